//! `roce analyze` on captures of real conversations with a Linux kernel rxe peer.
//!
//! `analyze_a_kernel_rping_capture`: the guest's `rping -s` ▶ `roce rping -c -C 10 --pcap`.
//! The CM section shows the one connection the kernel accepted (REQ, REP, RTU, with REP after
//! REQ), the flows show the kernel's ten RDMA READs of our buffer with their response latency
//! and its ten RDMA WRITEs, no PSN gap or retransmission on a clean link, and every flow's
//! packets and first/last PSN agree with tshark's fields.
//!
//! `analyze_a_lossy_kernel_write_lat_capture`: the guest's `ib_write_lat -s 8192` ▶ `roce
//! perftest write_lat -s 8192 --fault …,dir=both`: our side drops, holds back and duplicates
//! frames both ways, so both sides' 8-packet WRITEs lose packets; the kernel NAKs our gaps
//! (PSN sequence error) and we retransmit, we NAK its gaps and it retransmits. tap0's capture
//! (tcpdump) is analysed and every flow count checked against tshark's fields
//! (tests/analyze/flow_oracle.rs); the guest's rxe counters agree with what the capture shows.
//!
//! Needs root, qemu and `bash tests/interop/setup.sh`. Artefacts: target/interop/artefacts/interop_analyze/.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use crate::flow_oracle::check_flows;
use crate::harness::{roce, GuestBuilder};

const T: Duration = Duration::from_secs(90);

#[test]
fn analyze_a_kernel_rping_capture() {
    let mut g = GuestBuilder::new("interop_analyze").scenario("serve\n").boot();
    let art = g.artefacts.clone();
    let (rc, out) = g.guest_exec("(rping -s -a 198.18.0.2 -C 10 -V -v; echo rc=$?) > /tmp/rping_srv.log 2>&1 &", T);
    assert_eq!(rc, 0, "{out}");
    g.wait_for_output("rdma res show cm_id", "LISTEN", Duration::from_secs(30), T, Duration::from_millis(300));
    let pcap = art.join("rping_client.pcap");
    let (rc, out) = g.run_in_netns(&roce(&format!(
        "rping -c -a 198.18.0.2 -I 198.18.0.1 --iface tap0 -C 10 -V -v --pcap {}",
        pcap.display()
    )));
    assert_eq!(rc, 0, "roce rping client:\n{out}");
    g.signal("end");
    g.finish();

    let html = art.join("report.html");
    let out = Command::new(env!("CARGO_BIN_EXE_roce"))
        .args(["analyze", "--json", "--html"])
        .arg(&html)
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(art.join("analyze.json"), &out.stdout).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    let conns = doc["cm"]["connections"].as_array().unwrap();
    assert_eq!(conns.len(), 1, "{}", doc["cm"]);
    let c = &conns[0];
    assert_eq!((c["active"].as_str(), c["passive"].as_str()), (Some("198.18.0.1"), Some("198.18.0.2")), "{c}");
    assert!(c["rep"].as_f64().unwrap() >= c["req"].as_f64().unwrap(), "{c}");
    assert!(c["rtu"].as_f64().is_some(), "{c}");
    assert_eq!(doc["cm"]["req_rep"]["count"], 1);

    let flows = doc["flows"].as_array().unwrap();
    let rc_from = |src: &str| flows.iter().filter(|f| f["transport"] == "RC" && f["src"] == src).collect::<Vec<_>>();
    let kernel = rc_from("198.18.0.2");
    let reads: u64 = kernel.iter().map(|f| f["reads"]["requests"].as_u64().unwrap()).sum();
    let timed: u64 = kernel.iter().map(|f| f["reads"]["latency"]["count"].as_u64().unwrap()).sum();
    assert_eq!((reads, timed), (10, 10), "the kernel's RDMA READs of our start buffer: {kernel:?}");
    let ours = rc_from("198.18.0.1");
    let responses: u64 = ours.iter().map(|f| f["reads"]["responses"].as_u64().unwrap()).sum();
    assert!(responses >= 10, "{ours:?}");
    for f in flows {
        for k in ["gaps", "retransmissions", "out_of_order", "duplicates"] {
            assert_eq!(f["psn"][k], 0, "{k} on a clean link: {f}");
        }
        assert_eq!(f["bad_icrc"], 0, "{f}");
    }

    // Packets and first/last PSN per flow, from tshark's fields.
    let t = Command::new("tshark")
        .arg("-r")
        .arg(&pcap)
        .args(["-T", "fields", "-E", "separator=|", "-e", "ip.src", "-e", "ip.dst", "-e", "infiniband.bth.destqp"])
        .args(["-e", "infiniband.bth.psn", "-Y", "infiniband"])
        .output()
        .unwrap();
    assert!(t.status.success());
    let mut want: BTreeMap<(String, String, u64), (u64, u64, u64)> = BTreeMap::new();
    for l in String::from_utf8(t.stdout).unwrap().lines() {
        let r: Vec<&str> = l.split('|').collect();
        let qp = u64::from_str_radix(r[2].trim_start_matches("0x"), 16).unwrap();
        let psn: u64 = r[3].parse().unwrap();
        let e = want.entry((r[0].into(), r[1].into(), qp)).or_insert((0, psn, psn));
        e.0 += 1;
        e.2 = psn;
    }
    let got: BTreeMap<(String, String, u64), (u64, u64, u64)> = flows
        .iter()
        .map(|f| {
            let u = |k: &str| f[k].as_u64().unwrap();
            (
                (f["src"].as_str().unwrap().into(), f["dst"].as_str().unwrap().into(), u("dest_qp")),
                (u("packets"), u("first_psn"), u("last_psn")),
            )
        })
        .collect();
    assert_eq!(got, want);
    assert!(std::fs::read_to_string(&html).unwrap().contains("class=\"psn-plot\""));
}

/// The faults (seeded: the same decisions for the same sequence of frames): the kernel's
/// requests dropped, ours held back and duplicated, but none of ours dropped and none of the
/// kernel's ACKs: write_lat has no closing handshake, so a lost ACK of our last WRITE leaves us
/// retransmitting to a QP the guest has already destroyed (spec/perftest.md, "write_lat's last
/// ACK"; seen once in CI, at the last iteration). A lost ACK of ours makes
/// the kernel's requester retransmit a WRITE by timeout; an ACK of the whole WRITE that reaches
/// it during that retransmission left 7.2.13's ib_write_lat stalled for good in one run of
/// five (spec/kernel-findings.md §4): loss that way is a kernel finding, not this test's.
/// `ROCE_STALL_FAULT` replaces these `--fault` arguments to reproduce it (the test then fails:
/// at the guest's `rc=0` when it stalls, at our sent-frame drop count when it does not).
const FAULT: [&str; 2] = ["drop=0.04,only=requests,seed=25,dir=rx", "reorder=0.03,dup=0.01,dir=tx"];

#[test]
fn analyze_a_lossy_kernel_write_lat_capture() {
    let mut g = GuestBuilder::new("interop_analyze_loss").scenario("serve\n").boot();
    let before = g.read_counters("before", T);
    let gcmd = "ib_write_lat -d rxe0 -x 1 -n 100 -s 8192";
    let (rc, out) = g.guest_exec(&format!("({gcmd}; echo rc=$?) > /tmp/write_lat.log 2>&1 &"), T);
    assert_eq!(rc, 0, "{out}");
    let needle = ":4853 00000000:0000 0A"; // perftest's TCP port 18515, listening
    let l = g.wait_for_output("cat /proc/net/tcp", needle, Duration::from_secs(60), T, Duration::from_millis(300));
    assert!(l.contains(needle), "{gcmd} does not listen:\n{l}");
    // Our requester waits 268 ms (-u 16) for an ACK: a TCG guest answers late.
    let ours = format!(
        "perftest write_lat --iface tap0 -I 198.18.0.1 -n 100 -s 8192 -u 16 --timeout 60 --fault {} 198.18.0.2",
        std::env::var("ROCE_STALL_FAULT").unwrap_or_else(|_| format!("{} --fault {}", FAULT[0], FAULT[1]))
    );
    let (rc, our_out) = g.run_in_netns(&roce(&ours));
    let glog =
        g.wait_for_output("cat /tmp/write_lat.log", "rc=", Duration::from_secs(90), T, Duration::from_millis(300));
    let after = g.read_counters("after", T);
    let art = g.artefacts.clone();
    if !glog.contains("rc=") {
        // A stalled guest (spec/kernel-findings.md §4): its QP's PSNs as rxe reports them
        // (sq_psn is the requester's next PSN, rq_psn the responder's expected one).
        let (_, qp) = g.guest_exec("rdma res show qp -dd; rdma stat show; cat /proc/net/tcp", T);
        std::fs::write(art.join("qp-at-stall.txt"), qp).unwrap();
    }
    let pcap = g.pcap_path();
    std::fs::write(art.join("roce.log"), format!("{ours}\n{our_out}\n--- guest {gcmd}:\n{glog}")).unwrap();
    g.signal("end");
    g.finish();
    // Both sides' view in the message: CI keeps only the test's output, not the artefacts.
    let both = format!(
        "roce {ours}:\n{our_out}\n--- guest {gcmd}:\n{glog}\n--- guest rxe before/after:\n{before:?}\n{after:?}"
    );
    assert_eq!(rc, 0, "{both}");
    assert!(glog.contains("rc=0"), "{both}");

    // What our fault layer did, as the tool counted it.
    let fault = |dir: &str, what: &str| -> u64 {
        let l = our_out
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("fault {dir}:")))
            .unwrap_or_else(|| panic!("no `fault {dir}:` line:\n{our_out}"));
        l.split(&format!("{what} ")).nth(1).and_then(|r| r.split(',').next()).and_then(|n| n.parse().ok()).unwrap()
    };
    assert!(fault("received", "dropped") > 0, "{our_out}");
    assert!(fault("sent", "reordered") > 0 && fault("sent", "duplicated") > 0, "{our_out}");
    assert_eq!(fault("sent", "dropped"), 0, "{our_out}");

    // Every flow count against tshark's fields.
    let doc = check_flows(&pcap, &[], &[]);
    std::fs::write(art.join("analyze.json"), doc.to_string()).unwrap();
    let flows = doc["flows"].as_array().unwrap();
    let rc_from = |src: &str| -> Vec<&serde_json::Value> {
        flows.iter().filter(|f| f["transport"] == "RC" && f["src"] == src).collect()
    };
    let sum = |fs: &[&serde_json::Value], path: &[&str]| -> u64 {
        fs.iter().map(|f| path.iter().fold(*f, |v, k| &v[k]).as_u64().unwrap()).sum()
    };
    let (ours, kernel) = (rc_from("198.18.0.1"), rc_from("198.18.0.2"));
    let seq_naks = |fs: &[&serde_json::Value]| sum(fs, &["ack", "naks", "psn_sequence_error"]);
    let (our_naks, kernel_naks) = (seq_naks(&ours), seq_naks(&kernel));
    let (our_retx, kernel_retx) = (sum(&ours, &["psn", "retransmissions"]), sum(&kernel, &["psn", "retransmissions"]));
    let summary = format!(
        "ours: retransmissions {our_retx}, PSN-sequence NAKs {our_naks}, duplicates {}, out of order {}; \
         kernel: retransmissions {kernel_retx}, PSN-sequence NAKs {kernel_naks}",
        sum(&ours, &["psn", "duplicates"]),
        sum(&ours, &["psn", "out_of_order"]),
    );
    std::fs::write(art.join("summary.txt"), &summary).unwrap();
    println!("{summary}");
    assert!(kernel_naks > 0 && our_retx > 0, "the kernel NAKs our gaps and we resend: {summary}");
    assert!(our_naks > 0 && kernel_retx > 0, "we NAK its gaps and the kernel resends: {summary}");
    assert!(sum(&ours, &["psn", "duplicates"]) > 0, "our duplicated frames: {summary}");
    // Each side's requests come from the QP the other side's go to (learned from the ACKs).
    let data = |fs: &[&serde_json::Value]| {
        let f = fs.iter().find(|f| f["psn"]["retransmissions"].as_u64() > Some(0)).copied().unwrap();
        (f["dest_qp"].clone(), f["src_qp"].clone())
    };
    let ((our_dest, our_src), (kernel_dest, kernel_src)) = (data(&ours), data(&kernel));
    assert_eq!((our_src, kernel_src), (kernel_dest, our_dest));

    // The peer's view: its responder NAKed once per gap (out_of_seq_request counts the NAKs
    // it sent, rxe_resp.c check_psn), it saw requests again (duplicate_request), its
    // requester took our NAKs (rcvd_seq_err counts those that acknowledged something new,
    // so at most the NAKs on the wire) and retried (completer_retry_err).
    let delta = |k: &str| after[k] - before[k];
    let peer = format!(
        "out_of_seq_request {} duplicate_request {} rcvd_seq_err {} completer_retry_err {} retry_exceeded_err {}",
        delta("out_of_seq_request"),
        delta("duplicate_request"),
        delta("rcvd_seq_err"),
        delta("completer_retry_err"),
        delta("retry_exceeded_err")
    );
    std::fs::write(art.join("summary.txt"), format!("{summary}\nguest rxe: {peer}\n")).unwrap();
    assert_eq!(delta("out_of_seq_request"), kernel_naks, "{peer}; {summary}");
    assert!(delta("duplicate_request") > 0, "{peer}");
    assert!((1..=our_naks).contains(&delta("rcvd_seq_err")), "{peer}; {summary}");
    assert!(delta("completer_retry_err") >= delta("rcvd_seq_err"), "{peer}");
    assert_eq!(delta("retry_exceeded_err"), 0, "{peer}");
    // Every packet the kernel sent is on tap0; it received at most what we let through.
    assert_eq!(delta("sent_pkts"), sum(&kernel, &["packets"]), "{peer}; {summary}");
    assert!(delta("rcvd_pkts") <= sum(&ours, &["packets"]), "{peer}; {summary}");
}
