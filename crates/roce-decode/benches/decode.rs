//! `roce decode`'s cost per frame, both outputs, against the wire crate's parse+verify of the
//! same 20,000 mixed frames (`roce_decode::samples_mixed`: RC/UC/UD, SA and CM MADs, ARP/IGMP/MLD/ND,
//! IPv4 and IPv6, one bad ICRC in 16), so that the formatting cost shows as a ratio. Throughput
//! is frames per iteration (criterion prints frames/s). `roce bench decode` compares the
//! binary with tshark, process start included.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use roce_decode::decode::{Decoder, Meta};

fn frames() -> Vec<Vec<u8>> {
    roce_decode::samples_mixed::mixed_frames(20_000, 1).collect()
}

fn meta(i: usize, len: usize) -> Meta {
    Meta {
        number: i as u64 + 1,
        timestamp: Duration::from_micros(i as u64),
        relative: Duration::from_micros(i as u64),
        linktype: 1,
        interface: 0,
        orig_len: len as u32,
    }
}

fn decode(c: &mut Criterion) {
    let fr = frames();
    let mut g = c.benchmark_group("decode_20000_mixed_frames");
    g.throughput(Throughput::Elements(fr.len() as u64));
    g.sample_size(10);
    g.bench_function("wire_parse_and_verify", |b| {
        b.iter(|| {
            let mut ok = 0usize;
            for f in &fr {
                // What the decoder starts with: the strict parse, the lax one when it fails.
                ok += match roce_wire::frame::parse(black_box(f)) {
                    Ok(p) => p.offsets.end,
                    Err(_) => roce_wire::frame::parse_lax(f).map(|p| p.offsets.end).unwrap_or(1),
                };
            }
            black_box(ok)
        })
    });
    let mut summary = Decoder::new();
    summary.json.off = true;
    g.bench_function("decode_summary", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for (i, f) in fr.iter().enumerate() {
                summary.decode(&meta(i, f.len()), black_box(f));
                n += summary.summary.text.len();
            }
            black_box(n)
        })
    });
    let mut json = Decoder::new();
    json.summary.off = true;
    g.bench_function("decode_json", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for (i, f) in fr.iter().enumerate() {
                json.decode(&meta(i, f.len()), black_box(f));
                n += json.json.buf.len();
            }
            black_box(n)
        })
    });
    g.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
