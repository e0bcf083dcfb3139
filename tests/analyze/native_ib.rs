//! `roce analyze` on native InfiniBand captures (tests/data/ib-erf.pcap, ERF records of type
//! INFINIBAND, link type 197; tests/data/ib-native.pcap, the same kind of packets as link type
//! 247): the flows' packet counts and PSN ranges against tshark's fields. Endpoints: the GRH's
//! GIDs (`src`/`dst`), or for a packet routed by LID alone its LIDs (`src_lid`/`dst_lid`, the
//! text's `LID 4`), never a LID written as an address. Expected from tshark: every frame with a
//! BTH whose LRH PktLen (4-byte words) plus the 2-byte VCRC fits in the frame (a truncated one
//! is malformed, not a packet).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::captures::roce;
use crate::oracle::{analyze_json, fields};

fn data(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn lid(v: &str) -> String {
    format!("LID {}", v.parse::<u16>().expect("a LID"))
}

/// A flow's endpoint as the text report names it: exactly one of the address (`name`) and
/// the LID (`name_lid`) is there.
fn endpoint(flow: &Value, name: &str) -> String {
    match (&flow[name], &flow[format!("{name}_lid")]) {
        (Value::String(gid), Value::Null) => gid.clone(),
        (Value::Null, Value::Number(lid)) => format!("LID {lid}"),
        other => panic!("{name}: {other:?} in {flow}"),
    }
}

/// Per flow: packets, first PSN, last PSN.
type FlowRow = (u64, u64, u64);

#[test]
fn erf_infiniband_flows_match_tshark() {
    let path = data("ib-erf.pcap");
    let rows = fields(
        &path,
        &[
            "frame.len",
            "infiniband.lrh.pktlen",
            "infiniband.lrh.slid",
            "infiniband.lrh.dlid",
            "infiniband.grh.sgid",
            "infiniband.grh.dgid",
            "infiniband.bth.destqp",
            "infiniband.bth.psn",
        ],
    );
    let mut want: BTreeMap<(String, String, u64), FlowRow> = BTreeMap::new();
    for r in &rows {
        let [len, pktlen, slid, dlid, sgid, dgid, qp, psn] = &r[..] else { panic!("{r:?}") };
        if qp.is_empty() || pktlen.parse::<usize>().unwrap() * 4 + 2 > len.parse::<usize>().unwrap() {
            continue;
        }
        let (src, dst) = if sgid.is_empty() { (lid(slid), lid(dlid)) } else { (sgid.clone(), dgid.clone()) };
        let qp = u64::from_str_radix(qp.trim_start_matches("0x"), 16).unwrap();
        let psn: u64 = psn.parse().unwrap();
        let row = want.entry((src, dst, qp)).or_insert((0, psn, psn));
        row.0 += 1;
        row.2 = psn;
    }
    assert!(want.len() >= 4, "the capture has LID-routed and global flows: {want:?}");
    assert!(want.keys().any(|k| k.0.starts_with("LID ")) && want.keys().any(|k| k.0.contains(':')), "{want:?}");
    let doc = analyze_json(&path);
    let got: BTreeMap<(String, String, u64), FlowRow> = doc["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let n = |k: &str| f[k].as_u64().unwrap();
            ((endpoint(f, "src"), endpoint(f, "dst"), n("dest_qp")), (n("packets"), n("first_psn"), n("last_psn")))
        })
        .collect();
    assert_eq!(got, want, "flows: packets, first and last PSN");
    assert!(doc["capture"]["other"].get("unsupported_link").is_none(), "{}", doc["capture"]);
    // The bad ICRC and the bad VCRC of the capture are the flow's bad packets.
    let bad: u64 = doc["flows"].as_array().unwrap().iter().map(|f| f["bad_icrc"].as_u64().unwrap()).sum();
    assert_eq!(bad, 2, "{}", doc["flows"]);
}

#[test]
fn link_type_247_reads_as_its_packets() {
    let doc = analyze_json(&data("ib-native.pcap"));
    let cap = &doc["capture"];
    assert!(cap["roce"].as_u64().unwrap() > 0, "{cap}");
    assert!(cap["other"].get("unsupported_link").is_none(), "{cap}");
    assert!(!doc["flows"].as_array().unwrap().is_empty());
}

/// The text, HTML and annotated reports name a LID as a LID: no flow reads as the IPv4 host
/// 0.0.0.1, and the flows' header says what its columns hold.
#[test]
fn reports_name_lids_as_lids() {
    let path = data("ib-erf.pcap");
    let out = roce().arg("analyze").arg(&path).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Flows (source -> destination: IP address, GID, or LID without a GRH; dest QP)"), "{text}");
    let row = |l: &&str| l.split_whitespace().take(5).collect::<Vec<_>>() == ["LID", "3", "LID", "1", "0x000001"];
    assert!(text.lines().any(|l| row(&l)), "LID 3 -> LID 1, QP 1: {text}");
    assert!(text.contains("LID 65535"), "the permissive LID: {text}");
    for quad in ["0.0.0.1", "0.0.0.3", "0.0.255.255"] {
        assert!(!text.contains(quad), "{quad}: {text}");
    }
    let dir = crate::common::artefact_dir("analyze-native-ib");
    let html = dir.join("ib-erf.html");
    let pcapng = dir.join("ib-erf-annotated.pcapng");
    let status = roce().args(["analyze", "--html"]).arg(&html).arg("--annotate").arg(&pcapng).arg(&path).status();
    assert!(status.unwrap().success());
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(html.contains("LID 3") && !html.contains("0.0.0.3"), "{html}");
    // The comments say what happened to a packet; none names an endpoint as an address.
    for row in fields(&pcapng, &["frame.comment"]) {
        assert!(!row[0].contains("0.0."), "{row:?}");
    }
}
