//! Native InfiniBand captures shipped in tests/data/: ib-native.pcap (`LINKTYPE_INFINIBAND`,
//! 247) and ib-erf.pcap (`LINKTYPE_ERF`, 197, the records ibdump writes), built from
//! `roce_decode::samples_ib` (regenerate with ROCE_BLESS=1). Every packet decodes with the
//! verdict it was built for, `roce encode` gives each capture back byte for byte, and tshark
//! agrees on the LRH, GRH, BTH, DETH, MAD and ERF fields and on the CRC values.
use crate::common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use roce_decode::capture::{linktype, read_file};
use roce_decode::decode::decode_captured;
use roce_decode::encode::{encode_value, Encoded, PcapOut};
use roce_decode::samples_ib::{erf_record, ib_sample_frames};
use serde_json::Value;

fn data_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// 2025-11-30T00:00:00Z, then 1 ms a packet.
fn time_of(i: usize) -> Duration {
    Duration::from_secs(1_764_460_800) + Duration::from_millis(i as u64)
}

/// The two captures' bytes: (file name, link type, pcap).
fn build() -> Vec<(&'static str, u32, Vec<u8>)> {
    let samples = ib_sample_frames();
    let mut out = Vec::new();
    for (name, lt) in [("ib-native.pcap", linktype::INFINIBAND), ("ib-erf.pcap", linktype::ERF)] {
        let mut w = PcapOut::new(Vec::new(), lt).unwrap();
        for (i, s) in samples.iter().enumerate() {
            let data =
                if lt == linktype::ERF { erf_record(time_of(i), (i % 2) as u8, &s.bytes) } else { s.bytes.clone() };
            let orig_len = data.len() as u32;
            let f = Encoded { timestamp: time_of(i), linktype: lt, orig_len, data, overrides: vec![], notes: vec![] };
            w.write(&f).unwrap();
        }
        out.push((name, lt, w.finish().unwrap()));
    }
    out
}

#[test]
fn shipped_ib_captures_match_the_builder() {
    for (name, _, built) in build() {
        if std::env::var_os("ROCE_BLESS").is_some() {
            std::fs::write(data_path(name), &built).unwrap();
        }
        let shipped =
            std::fs::read(data_path(name)).unwrap_or_else(|_| panic!("tests/data/{name} (ROCE_BLESS=1 writes it)"));
        assert!(shipped == built, "tests/data/{name} is stale: rerun with ROCE_BLESS=1 and commit it");
    }
}
