//! Every `roce analyze --json` document of the test captures against spec/analyze.schema.json
//! (tests/validate_json.py, the venv's jsonschema), and `roce bench analyze` run once small.

use std::path::PathBuf;

use super::captures::{self, roce};
use super::common;

#[test]
fn every_document_matches_the_schema() {
    let dir = common::artefact_dir("analyze-schema");
    let (lossy, qa, _) = captures::lossy_rc(&dir, 13);
    let tap = captures::receiver_tap(&dir, &lossy, 3);
    let ecn = captures::with_ecn_and_cnps(&dir, &lossy, qa);
    let cm = captures::cm_rc(&dir, 4);
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut files = Vec::new();
    let tests_data = ["sample.pcap", "rmpp-table.pcap", "tcpdump-any.pcap", "ib-erf.pcap", "ib-native.pcap"];
    for cap in [lossy, tap, ecn, cm].into_iter().chain(tests_data.map(|f| data.join(f))) {
        let out = roce().args(["analyze", "--json"]).arg(&cap).output().unwrap();
        assert!(out.status.success() || out.status.code() == Some(2), "{}", String::from_utf8_lossy(&out.stderr));
        let f = dir.join(format!("{}.json", cap.file_stem().unwrap().to_string_lossy()));
        std::fs::write(&f, &out.stdout).unwrap();
        files.push(f);
    }
    common::validate_json("analyze.schema.json", &files, files.len());
}

/// The benchmark's code path, small: it runs, compares with tshark and reports both RSS
/// figures (the figures themselves are measured by hand: spec/benchmarks.md).
#[test]
fn bench_analyze_runs_small() {
    common::tshark();
    let out =
        roce().args(["bench", "analyze", "-q", "--frames", "2000", "--scale", "2", "--runs", "1"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    for k in ["roce analyze", "tshark conv,io,stat", "ratio", "RSS ratio"] {
        assert!(text.contains(k), "{k}: {text}");
    }
}
