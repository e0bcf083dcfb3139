//! The sample capture that ships in tests/data/ (and that `roce decode` runs on in the README):
//! it must equal what `roce_decode::samples` builds today (regenerate with ROCE_BLESS=1), and every
//! frame in it must decode with exactly the verdict it was built for.

use std::path::PathBuf;
use std::time::Duration;

use roce_decode::capture::{read_file, PcapFileWriter};
use roce_decode::decode::decode_captured;
use roce_decode::samples::sample_frames;

fn sample_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/sample.pcap")
}

/// The sample capture's bytes, built from the samples with 1 ms between frames.
pub fn build_sample_pcap() -> Vec<u8> {
    let mut w = PcapFileWriter::new(Vec::new()).unwrap();
    let t0 = Duration::from_secs(1_764_460_800); // 2025-11-30T00:00:00Z
    for (i, s) in sample_frames().iter().enumerate() {
        w.write(t0 + Duration::from_millis(i as u64), &s.bytes).unwrap();
    }
    w.into_inner()
}

#[test]
fn shipped_sample_matches_the_builder() {
    let built = build_sample_pcap();
    if std::env::var_os("ROCE_BLESS").is_some() {
        std::fs::create_dir_all(sample_path().parent().unwrap()).unwrap();
        std::fs::write(sample_path(), &built).unwrap();
    }
    let shipped = std::fs::read(sample_path()).expect("tests/data/sample.pcap (ROCE_BLESS=1 writes it)");
    assert!(shipped == built, "tests/data/sample.pcap is stale: rerun with ROCE_BLESS=1 and commit it");
}

#[test]
fn every_sample_frame_decodes_as_built() {
    let frames = read_file(&sample_path()).unwrap();
    let samples = sample_frames();
    assert_eq!(frames.len(), samples.len());
    for (f, s) in frames.iter().zip(&samples) {
        let d = decode_captured(f);
        let j = &d.json;
        let bad = s.name.starts_with("bad_") || s.name.starts_with("truncated");
        let roce = j.get("kind").and_then(|k| k.as_str()) == Some("rocev2");
        if bad {
            assert!(
                j.contains_key("error") || j.get("icrc").and_then(|v| v.as_str()) == Some("bad"),
                "{}: {}",
                s.name,
                d.summary
            );
            continue;
        }
        assert!(!j.contains_key("error"), "{}: {}", s.name, d.summary);
        assert!(
            !j.contains_key("mad_error") && !j.contains_key("sa_error") && !j.contains_key("cm_error"),
            "{}: {}",
            s.name,
            d.summary
        );
        if roce {
            assert_eq!(j["icrc"], "ok", "{}", s.name);
            for k in ["opcode", "dest_qp", "psn", "p_key"] {
                assert!(j[k].is_u64(), "{}: {k} is a number", s.name);
            }
        }
        if s.name.starts_with("sa_") {
            assert!(j.contains_key("sa"), "{}: {}", s.name, d.summary);
        }
        if s.name.starts_with("cm_") {
            assert!(j.contains_key("cm"), "{}: {}", s.name, d.summary);
        }
    }
}
