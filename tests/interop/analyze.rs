//! `roce analyze` on a capture of a real conversation with a Linux kernel rxe peer: the
//! guest's `rping -s` ▶ `roce rping -c -C 10 --pcap`. The CM section shows the one connection
//! the kernel accepted (REQ, REP, RTU, with REP after REQ), the flows show the kernel's ten
//! RDMA READs of our buffer with their response latency and its ten RDMA WRITEs, no PSN gap or
//! retransmission on a clean link, and every flow's packets and first/last PSN agree with
//! tshark's fields.
//!
//! Needs root, qemu and `bash tests/interop/setup.sh`. Artefacts: target/interop/artefacts/interop_analyze/.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

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
