//! Every count of `roce analyze --json` against one computed here from tshark's fields
//! (`tshark -T fields -e infiniband.bth.psn …`), with the definitions of
//! crates/roce-decode/src/analyze/flows.rs written again over plain sets and maps.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::captures::{self, roce};
use super::common;
pub use super::flow_oracle::{analyze_json, fields};
use super::flow_oracle::{check_flows, num, SourceQp};

pub fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sample.pcap")
}

/// The flow from `src` to QP `qp`.
fn flow(doc: &Value, src: std::net::Ipv4Addr, qp: u32) -> &Value {
    let flows = doc["flows"].as_array().unwrap();
    flows.iter().find(|f| f["dest_qp"] == qp && f["src"] == src.to_string() && f["transport"] != "CNP").unwrap()
}

#[test]
fn lossy_rc_flows_match_tshark() {
    let dir = common::artefact_dir("analyze-lossy-rc");
    let (pcap, qa, qb) = captures::lossy_rc(&dir, 11);
    let doc = check_flows(&pcap, &[], &[]);
    // The scenario made every kind of event the analysis names.
    let req = flow(&doc, captures::A, qb);
    let ack = flow(&doc, captures::B, qa);
    assert!(req["psn"]["retransmissions"].as_u64().unwrap() > 0, "{req}");
    assert_eq!(req["messages"].as_u64().unwrap(), 40 + 4 + 4 + 4, "{req}");
    assert!(ack["ack"]["naks"]["rnr"].as_u64().unwrap() > 0, "{ack}");
    assert!(ack["ack"]["naks"]["psn_sequence_error"].as_u64().unwrap() > 0, "{ack}");
    assert!(req["reads"]["requests"].as_u64().unwrap() > 0);
    assert!(req["reads"]["latency"]["count"].as_u64().unwrap() > 0, "{req}");
    assert!(req["atomics"]["latency"]["count"].as_u64().unwrap() > 0, "{req}");
    // The same traffic as a tap behind the faulty link sees it.
    let tap = captures::receiver_tap(&dir, &pcap, 5);
    let doc = check_flows(&tap, &[], &[]);
    let req = flow(&doc, captures::A, qb);
    for k in ["gaps", "out_of_order", "duplicates", "retransmissions"] {
        assert!(req["psn"][k].as_u64().unwrap() > 0, "{k}: {req}");
    }
}

#[test]
fn ecn_marks_and_cnps_match_tshark() {
    let dir = common::artefact_dir("analyze-ecn-cnp");
    let (pcap, qa, qb) = captures::lossy_rc(&dir, 12);
    let crafted = captures::with_ecn_and_cnps(&dir, &pcap, qa);
    // A's requests to B's QP come from A's QP: the CNPs B sends to it answer them; the
    // CNPs to a QP nothing in the capture comes from stay a CNP-only flow.
    let a_to_b: SourceQp = ((captures::A.to_string(), captures::B.to_string(), u64::from(qb)), u64::from(qa));
    let doc = check_flows(&crafted, &[], &[a_to_b]);
    let flows = doc["flows"].as_array().unwrap();
    let ce: u64 = flows.iter().map(|f| f["ecn_ce"].as_u64().unwrap()).sum();
    assert!(ce > 10, "{ce} CE marks");
    let req = flow(&doc, captures::A, qb);
    assert!(req["cnps"].as_u64().unwrap() > 10, "{req}");
    assert_eq!(req["src_qp"], qa, "learned from the READ responses and ACKs");
    let ack = flow(&doc, captures::B, qa);
    assert_eq!((&ack["transport"], &ack["cnps"]), (&"RC".into(), &0.into()), "{ack}");
    let cnp_only: Vec<&Value> = flows.iter().filter(|f| f["transport"] == "CNP").collect();
    assert_eq!(cnp_only.len(), 1, "{cnp_only:?}");
    assert_eq!(cnp_only[0]["dest_qp"], captures::UNKNOWN_QP);
    assert!(cnp_only[0]["packets"].as_u64().unwrap() > 5, "{}", cnp_only[0]);
    // The text report has the column, the HTML the line over the request flow's plot.
    let out = roce().arg("analyze").arg(&crafted).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("CNPs"), "{text}");
    let html = dir.join("ecn-cnp.html");
    assert!(roce().args(["analyze", "--html"]).arg(&html).arg(&crafted).status().unwrap().success());
    let cnps = req["cnps"].as_u64().unwrap();
    assert!(std::fs::read_to_string(&html).unwrap().contains(&format!("CNPs back to the source {cnps}")));
}

/// CM messages by attribute name, from tshark's fields.
fn cm_messages(path: &Path) -> BTreeMap<String, u64> {
    let rows = fields(path, &["infiniband.mad.mgmtclass", "infiniband.mad.attributeid"]);
    let mut cm: BTreeMap<String, u64> = BTreeMap::new();
    for r in rows.iter().filter(|r| r[0] == "0x07") {
        *cm.entry(roce_wire::cm::attr::name(num(&r[1]) as u16).to_owned()).or_default() += 1;
    }
    cm
}

fn got_cm_messages(doc: &Value) -> BTreeMap<String, u64> {
    doc["cm"]["messages"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_u64().unwrap())).collect()
}

#[test]
fn cm_connected_rc_matches_tshark() {
    let dir = common::artefact_dir("analyze-cm-rc");
    let pcap = captures::cm_rc(&dir, 3);
    let doc = check_flows(&pcap, &[], &[]);
    assert_eq!(got_cm_messages(&doc), cm_messages(&pcap));
    // The REQ and REP name both QPs: each RC flow comes from the QP the other one goes to.
    let rc: Vec<&Value> = doc["flows"].as_array().unwrap().iter().filter(|f| f["transport"] == "RC").collect();
    assert_eq!(rc.len(), 2, "{rc:?}");
    assert_eq!((&rc[0]["src_qp"], &rc[1]["src_qp"]), (&rc[1]["dest_qp"], &rc[0]["dest_qp"]), "{rc:?}");
    let conns = doc["cm"]["connections"].as_array().unwrap();
    assert_eq!(conns.len(), 1, "{}", doc["cm"]);
    let c = &conns[0];
    assert_eq!(c["state"], "closed", "{c}");
    assert_eq!((c["active"].as_str(), c["passive"].as_str()), (Some("198.18.0.2"), Some("198.18.0.1")));
    for k in ["req_rep", "rep_rtu", "dreq_drep"] {
        assert_eq!(doc["cm"][k]["count"], 1, "{k}: {}", doc["cm"]);
    }
    let flows = doc["flows"].as_array().unwrap();
    let reads: u64 = flows.iter().map(|f| f["reads"]["latency"]["count"].as_u64().unwrap()).sum();
    assert!(reads >= 12, "READs timed: {reads}");
}

/// SA joins and leaves per MGID from tshark's fields: a Set or Delete of an MCMemberRecord
/// opens (requester, TID); the first answer with status 0 counts a join or a leave.
fn sa_membership(path: &Path) -> BTreeMap<String, (u64, u64, u64, u64)> {
    let rows = fields(
        path,
        &[
            "ip.src",
            "ip.dst",
            "infiniband.mad.method",
            "infiniband.mad.transactionid",
            "infiniband.mad.status",
            "infiniband.mcmemberrecord.mgid",
        ],
    );
    let mut open: HashMap<(String, u64), u64> = HashMap::new();
    let mut per: BTreeMap<String, (u64, u64, u64, u64)> = BTreeMap::new();
    for r in rows.iter().filter(|r| !r[5].is_empty()) {
        let (method, tid, status) = (num(&r[2]), num(&r[3]), num(&r[4]));
        let e = per.entry(r[5].clone()).or_default();
        match method {
            0x02 | 0x15 => {
                if method == 0x02 {
                    e.0 += 1;
                } else {
                    e.1 += 1;
                }
                open.entry((r[0].clone(), tid)).or_insert(method);
            }
            m if m & 0x80 != 0 => {
                if let Some(req) = open.remove(&(r[1].clone(), tid)) {
                    if status == 0 && req == 0x02 {
                        e.2 += 1;
                    } else if status == 0 && req == 0x15 {
                        e.3 += 1;
                    }
                }
            }
            _ => {}
        }
    }
    per
}

#[test]
fn multicast_joins_and_leaves_through_the_sa_match_tshark() {
    let dir = common::artefact_dir("analyze-multicast");
    let pcap = captures::multicast(&dir, 21);
    let doc = check_flows(&pcap, &[], &[]);
    check_mads(&pcap, &doc);
    let mut got: BTreeMap<String, (u64, u64, u64, u64)> = BTreeMap::new();
    for g in doc["multicast"]["groups"].as_array().unwrap().iter().filter(|g| g["kind"] == "mgid") {
        let u = |k: &str| g[k].as_u64().unwrap();
        got.insert(
            g["group"].as_str().unwrap().to_owned(),
            (u("join_requests"), u("leave_requests"), u("joins"), u("leaves")),
        );
    }
    // The requests resent under loss are counted once per copy on the wire, as tshark sees them.
    let want: BTreeMap<String, (u64, u64, u64, u64)> = sa_membership(&pcap);
    assert_eq!(got, want);
    assert_eq!(got.len(), 3, "three groups");
    let resends: u64 =
        doc["mads"]["transactions"].as_array().unwrap().iter().map(|t| t["resends"].as_u64().unwrap()).sum();
    assert!(resends > 0, "SA requests re-sent under loss");
    // IGMP reports per group address, as tshark counts the records.
    let rows = fields(&pcap, &["igmp.type", "igmp.record_type"]);
    let reports = rows.iter().filter(|r| r[0] == "0x22").count() as u64;
    let groups = doc["multicast"]["groups"].as_array().unwrap();
    let sum = |k: &str| groups.iter().map(|g| g[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum("reports") + sum("report_leaves"), reports, "one record per IGMPv3 report here");
}

#[test]
fn sample_capture_flows_mads_cm_and_multicast_match_tshark() {
    // Frame 44's IPv4 total length is wrong: tshark dissects it anyway, we count it malformed.
    let doc = check_flows(&sample(), &[44], &[]);
    assert_eq!(doc["capture"]["malformed"]["IPv4: ip_length"], 1);
    check_mads(&sample(), &doc);
    assert_eq!(got_cm_messages(&doc), cm_messages(&sample()));
    // IGMP/MLD: reports and leaves per group address.
    let rows = fields(
        &sample(),
        &[
            "igmp.type",
            "igmp.maddr",
            "igmp.record_type",
            "icmpv6.type",
            "icmpv6.mldr.mar.record_type",
            "icmpv6.mldr.mar.multicast_address",
        ],
    );
    let mut reports = 0;
    let mut leaves = 0;
    for r in &rows {
        match (r[0].as_str(), r[2].as_str(), r[3].as_str(), r[4].as_str()) {
            ("0x16" | "0x12", ..) => reports += 1,
            ("0x17", ..) => leaves += 1,
            ("0x22", "3", ..) | (_, _, "143", "3") => leaves += 1,
            ("0x22", ..) | (_, _, "143", _) => reports += 1,
            _ => {}
        }
    }
    let groups = doc["multicast"]["groups"].as_array().unwrap();
    let sum = |k: &str| groups.iter().map(|g| g[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!((sum("reports"), sum("report_leaves")), (reports, leaves));
}

/// The MAD rows from tshark's fields: requests open (requester, class, TID), the first
/// response closes; RMPP DATA segments and ACKs counted per row.
fn check_mads(path: &Path, doc: &Value) {
    let rows = fields(
        path,
        &[
            "ip.src",
            "ipv6.src",
            "ip.dst",
            "ipv6.dst",
            "infiniband.mad.mgmtclass",
            "infiniband.mad.method",
            "infiniband.mad.transactionid",
            "infiniband.mad.attributeid",
            "infiniband.mad.status",
            "infiniband.rmpp.rmpptype",
            "infiniband.rmpp.rmppflags",
        ],
    );
    #[derive(Default, Debug, PartialEq)]
    struct Row {
        requests: u64,
        resends: u64,
        responses: u64,
        unanswered: u64,
        bad: u64,
        segments: u64,
        acks: u64,
    }
    let mut want: BTreeMap<(u64, u64, u64), Row> = BTreeMap::new();
    let mut open: HashMap<(String, u64, u64), (u64, u64, u64)> = HashMap::new();
    for r in rows.iter().filter(|r| !r[4].is_empty()) {
        let src = if r[0].is_empty() { &r[1] } else { &r[0] };
        let dst = if r[2].is_empty() { &r[3] } else { &r[2] };
        let (class, method, tid, attr, status) = (num(&r[4]), num(&r[5]), num(&r[6]), num(&r[7]), num(&r[8]));
        let key = (class, method & 0x7f, attr);
        let rmpp_active = !r[10].is_empty() && num(&r[10]) & 1 == 1;
        let rmpp_type = if rmpp_active { num(&r[9]) } else { 0 };
        if rmpp_type == 1 {
            want.entry(key).or_default().segments += 1;
        }
        if rmpp_type == 2 {
            want.entry(key).or_default().acks += 1;
        }
        if class == 7 || rmpp_type == 2 {
            continue;
        }
        if method & 0x80 == 0 {
            let row = want.entry(key).or_default();
            match open.entry((src.clone(), class, tid)) {
                std::collections::hash_map::Entry::Occupied(_) => row.resends += 1,
                std::collections::hash_map::Entry::Vacant(v) => {
                    row.requests += 1;
                    v.insert(key);
                }
            }
        } else if let Some(k) = open.remove(&(dst.clone(), class, tid)) {
            let row = want.entry(k).or_default();
            row.responses += 1;
            if status != 0 {
                row.bad += 1;
            }
        }
    }
    for k in open.values() {
        want.entry(*k).or_default().unanswered += 1;
    }
    let mut got: BTreeMap<(u64, u64, u64), Row> = BTreeMap::new();
    for t in doc["mads"]["transactions"].as_array().unwrap() {
        let u = |k: &str| t[k].as_u64().unwrap();
        let bad = t["statuses"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
        got.insert(
            (u("class"), u("method"), u("attribute")),
            Row {
                requests: u("requests"),
                resends: u("resends"),
                responses: u("responses"),
                unanswered: u("unanswered"),
                bad,
                segments: t["rmpp"]["segments"].as_u64().unwrap(),
                acks: t["rmpp"]["acks"].as_u64().unwrap(),
            },
        );
    }
    // CM rows carry RMPP counts only (none): drop empty rows on both sides.
    got.retain(|_, r| *r != Row::default());
    want.retain(|_, r| *r != Row::default());
    assert_eq!(got, want);
}

#[test]
fn rmpp_table_mads_match_tshark() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/rmpp-table.pcap");
    let doc = analyze_json(&p);
    check_mads(&p, &doc);
    let segs: u64 =
        doc["mads"]["transactions"].as_array().unwrap().iter().map(|t| t["rmpp"]["segments"].as_u64().unwrap()).sum();
    assert!(segs > 0);
}

#[test]
fn annotated_pcapng_carries_comments_tshark_reads() {
    let dir = common::artefact_dir("analyze-annotate");
    let (pcap, _, _) = captures::lossy_rc(&dir, 11);
    let out = dir.join("annotated.pcapng");
    let st = roce()
        .args(["analyze", "-q", "--annotate"])
        .arg(&out)
        .arg(&pcap)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let rows = fields(&out, &["frame.number", "frame.comment", "infiniband.bth.psn"]);
    let orig = fields(&pcap, &["frame.number"]);
    assert_eq!(rows.len(), orig.len(), "every frame written back");
    let doc = analyze_json(&pcap);
    let retx: u64 =
        doc["flows"].as_array().unwrap().iter().map(|f| f["psn"]["retransmissions"].as_u64().unwrap()).sum();
    let marked = rows.iter().filter(|r| r[1].contains("retransmission of PSN")).count() as u64;
    assert_eq!(marked, retx);
    // The comment names the PSN tshark reads in that frame.
    for r in rows.iter().filter(|r| r[1].contains("retransmission of PSN")) {
        assert!(r[1].contains(&format!("retransmission of PSN {}", r[2])), "{r:?}");
    }
    assert!(rows.iter().any(|r| r[1].contains("NAK")), "NAKs annotated");
    assert!(rows.iter().any(|r| r[1].contains("response to frame")), "responses annotated");
}
