//! Wire benchmarks: parse+verify and emit of the 322-byte SA MAD frame, the ICRC against raw
//! crc32fast and the `crc` crate, and etherparse alone for scale. Figures are quoted as ratios
//! against baselines measured in the same run (see README "Benchmarks").

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use roce_wire::frame;
use roce_wire::golden::SA_DELETE_MCMEMBER;
use roce_wire::icrc::{self, IpVersion};

fn frame_parse_emit(c: &mut Criterion) {
    let mut g = c.benchmark_group("sa_frame_322B");
    g.throughput(Throughput::Elements(1));
    g.bench_function("parse_owned_and_verify_icrc", |b| {
        b.iter(|| {
            let f = frame::parse(black_box(&SA_DELETE_MCMEMBER)).unwrap();
            black_box(f.icrc)
        })
    });
    g.bench_function("view_and_verify_icrc", |b| {
        b.iter(|| {
            let f = frame::FramePacket::new_checked(black_box(&SA_DELETE_MCMEMBER)).unwrap();
            black_box((f.bth().dest_qp(), f.payload().len()))
        })
    });
    let repr = frame::parse(&SA_DELETE_MCMEMBER).unwrap().repr;
    let mut buf = [0u8; 400];
    g.bench_function("emit_with_icrc", |b| {
        b.iter(|| {
            let n = black_box(&repr).emit(&mut buf).unwrap();
            black_box(buf[n - 1])
        })
    });
    g.bench_function("etherparse_eth_ip_udp_only", |b| {
        b.iter(|| {
            let p = etherparse::SlicedPacket::from_ethernet(black_box(&SA_DELETE_MCMEMBER)).unwrap();
            black_box(p.transport.is_some())
        })
    });
    g.finish();
}

fn icrc_vs_crc(c: &mut Criterion) {
    let mut g = c.benchmark_group("icrc");
    let table = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC);
    for size in [64usize, 1024, 4096] {
        // IPv4 + UDP + BTH + DETH + payload, `size` bytes in all.
        let mut pkt = vec![0u8; size];
        let src = &SA_DELETE_MCMEMBER[14..];
        let n = src.len().min(size);
        pkt[..n].copy_from_slice(&src[..n]);
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_with_input(BenchmarkId::new("roce_wire_icrc", size), &pkt, |b, p| {
            b.iter(|| icrc::compute(black_box(p), IpVersion::V4, 20).unwrap())
        });
        g.bench_with_input(BenchmarkId::new("crc32fast_raw", size), &pkt, |b, p| {
            b.iter(|| crc32fast::hash(black_box(p)))
        });
        g.bench_with_input(BenchmarkId::new("crc_crate_default", size), &pkt, |b, p| {
            b.iter(|| table.checksum(black_box(p)))
        });
    }
    g.finish();
}

criterion_group!(benches, frame_parse_emit, icrc_vs_crc);
criterion_main!(benches);
