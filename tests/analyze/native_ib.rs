//! `roce analyze` on native InfiniBand captures (tests/data/ib-erf.pcap, ERF records of type
//! INFINIBAND, link type 197; tests/data/ib-native.pcap, the same kind of packets as link type
//! 247): the flows' packet counts against tshark's fields. Endpoints: the GRH's GIDs, or for a
//! packet routed by LID alone its LIDs as 0.0.HH.LL. Expected from tshark: every frame with a
//! BTH whose LRH PktLen (4-byte words) plus the 2-byte VCRC fits in the frame (a truncated one
//! is malformed, not a packet).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::Path;

use crate::oracle::{analyze_json, fields};

fn data(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn lid(v: &str) -> String {
    Ipv4Addr::from(v.parse::<u32>().expect("a LID")).to_string()
}

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
        ],
    );
    let mut want: BTreeMap<(String, String, u64), u64> = BTreeMap::new();
    for r in &rows {
        let [len, pktlen, slid, dlid, sgid, dgid, qp] = &r[..] else { panic!("{r:?}") };
        if qp.is_empty() || pktlen.parse::<usize>().unwrap() * 4 + 2 > len.parse::<usize>().unwrap() {
            continue;
        }
        let (src, dst) = if sgid.is_empty() { (lid(slid), lid(dlid)) } else { (sgid.clone(), dgid.clone()) };
        let qp = u64::from_str_radix(qp.trim_start_matches("0x"), 16).unwrap();
        *want.entry((src, dst, qp)).or_default() += 1;
    }
    assert!(want.len() >= 4, "the capture has LID-routed and global flows: {want:?}");
    let doc = analyze_json(&path);
    let got: BTreeMap<(String, String, u64), u64> = doc["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap().to_string();
            ((s("src"), s("dst"), f["dest_qp"].as_u64().unwrap()), f["packets"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(got, want, "flows and their packets");
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
