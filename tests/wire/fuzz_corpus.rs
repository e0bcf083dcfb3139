//! Replays every file of every fuzz seed set, corpus and regression set (fuzz/seeds/TARGET/*,
//! fuzz/corpus/TARGET/*, fuzz/regressions/TARGET/*) through the fuzz targets' own code, so that
//! `cargo test` catches a regression without a fuzzer. The seeds are the sample frames cut per
//! target; they must equal what `seeds()` builds (regenerate with ROCE_BLESS=1). The corpus is
//! what fuzzing found, minimised with `cargo fuzz cmin` (spec/testing.md).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use roce_decode::fuzz_targets::TARGETS;
use roce_decode::samples::sample_frames;

fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// The seed corpora: for each target, named inputs cut from the sample frames.
fn seeds() -> BTreeMap<&'static str, Vec<(String, Vec<u8>)>> {
    let mut m: BTreeMap<&'static str, Vec<(String, Vec<u8>)>> = BTreeMap::new();
    for s in sample_frames() {
        for t in ["frame", "roundtrip", "decode", "l2", "differential"] {
            m.entry(t).or_default().push((s.name.to_string(), s.bytes.clone()));
        }
        if let Ok(f) = roce_wire::frame::parse_lax(&s.bytes) {
            // The datagram a UDP socket would hand over, behind the arrival bytes `datagram`
            // reads: IPv6?, the IPv4 ID, TOS or traffic class, TTL or hop limit.
            if f.repr.vlan.is_none() {
                let ip = &s.bytes[f.offsets.ip..];
                let (v6, id) = if ip[0] >> 4 == 6 { (1, [0, 0]) } else { (0, [ip[4], ip[5]]) };
                let mut d = vec![v6, id[0], id[1], f.repr.ip.traffic_class(), f.repr.ip.hop_limit()];
                d.extend_from_slice(&s.bytes[f.offsets.bth..f.offsets.end]);
                m.entry("datagram").or_default().push((s.name.to_string(), d));
            }
            if f.repr.payload.len() == roce_wire::MAD_SIZE {
                let mad = f.repr.payload.to_vec();
                m.entry("mad").or_default().push((s.name.to_string(), mad.clone()));
                if mad[1] == 0x07 {
                    let mut cm = mad[16..18].to_vec(); // attribute ID, then the data area
                    cm.extend_from_slice(&mad[24..]);
                    m.entry("cm").or_default().push((s.name.to_string(), cm));
                }
            }
        }
    }
    // Native InfiniBand packets for the decoder (which reads every input as IB too), and
    // their MADs (SMPs included) for the MAD target.
    for s in roce_decode::samples_ib::ib_sample_frames() {
        m.entry("decode").or_default().push((s.name.to_string(), s.bytes.clone()));
        if let Some(t) = roce_wire::ib_frame::parse(&s.bytes).ok().and_then(|f| f.transport()) {
            if t.payload.len() == roce_wire::MAD_SIZE {
                m.entry("mad").or_default().push((s.name.to_string(), t.payload.to_vec()));
            }
        }
    }
    m
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn seed_corpora_are_current() {
    for (target, inputs) in seeds() {
        let dir = fuzz_dir().join("seeds").join(target);
        if std::env::var_os("ROCE_BLESS").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            for (name, bytes) in &inputs {
                std::fs::write(dir.join(format!("seed-{name}.bin")), bytes).unwrap();
            }
        }
        for (name, bytes) in &inputs {
            let p = dir.join(format!("seed-{name}.bin"));
            let on_disk =
                std::fs::read(&p).unwrap_or_else(|_| panic!("{} missing: rerun with ROCE_BLESS=1", p.display()));
            assert!(on_disk == *bytes, "{} is stale: rerun with ROCE_BLESS=1", p.display());
        }
    }
}

#[test]
fn every_corpus_and_regression_file_replays_cleanly() {
    let mut replayed = 0;
    for (target, run) in TARGETS {
        let mut n = 0;
        for sub in ["seeds", "corpus", "regressions"] {
            for f in files(&fuzz_dir().join(sub).join(target)) {
                let data = std::fs::read(&f).unwrap();
                let r = std::panic::catch_unwind(|| run(&data));
                assert!(r.is_ok(), "fuzz target {target} fails on {}", f.display());
                n += 1;
            }
        }
        assert!(n > 0, "fuzz target {target} has no corpus");
        replayed += n;
    }
    println!("replayed {replayed} corpus and regression files");
}
