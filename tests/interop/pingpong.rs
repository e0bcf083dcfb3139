//! libibverbs' pingpong examples against `roce pingpong`, with a real Linux kernel rxe peer
//! (rdma-core's ibv_rc_pingpong, ibv_uc_pingpong, ibv_ud_pingpong and ibv_srq_pingpong in the
//! guest, `-g 1`: its GID 1 is ::ffff:198.18.0.2), one guest boot for all eight runs:
//! for each kind, a. the guest's example as the server ▶ `roce pingpong KIND ... 198.18.0.2`;
//! b. `roce pingpong KIND` as the server ▶ the guest's example as the client.
//! Each run asserts what the guest observed: its example's exit status, its "bytes in" and
//! "iters in" lines and no "invalid data in page" (`-c`), and its rxe counters (`rdma
//! statistic`): packets both ways, no retry, no sequence error.
//!
//! Needs root, qemu and `bash tests/interop/setup.sh`. Artefacts:
//! target/interop/artefacts/interop_pingpong/.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read;
use std::time::{Duration, Instant};

use crate::harness::{self, roce, GuestBuilder};

const T: Duration = Duration::from_secs(90);
/// Exchanges per run (TCG is slow).
const ITERS: u32 = 20;

/// The guest's rxe counters (`rdma statistic show`: "name value" pairs).
pub(crate) fn counters(g: &mut harness::Guest) -> (BTreeMap<String, u64>, String) {
    let (_, out) = g.guest_exec("rdma statistic show 2>&1", T);
    let words: Vec<&str> = out.split_whitespace().collect();
    let map = words.windows(2).filter_map(|w| w[1].parse::<u64>().ok().map(|v| (w[0].to_string(), v))).collect();
    (map, out)
}

pub(crate) fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>, name: &str) -> u64 {
    after.get(name).copied().unwrap_or(0).saturating_sub(before.get(name).copied().unwrap_or(0))
}

/// The example's options for a kind: its default size, -n, -c (the client marks a byte per
/// page, the server checks it), and 4 QPs on the SRQ.
pub(crate) fn opts(kind: &str) -> String {
    match kind {
        "srq" => format!("-g 1 -n {ITERS} -c -q 4"),
        _ => format!("-g 1 -n {ITERS} -c"),
    }
}

fn size(kind: &str) -> u64 {
    if kind == "ud" {
        1024
    } else {
        4096
    }
}

/// The two result lines of an example that ran `ITERS` exchanges of `size` bytes.
pub(crate) fn assert_results(who: &str, out: &str, kind: &str) {
    let bytes = format!("{} bytes in ", size(kind) * u64::from(ITERS) * 2);
    let iters = format!("{ITERS} iters in ");
    assert!(!out.contains("invalid data in page"), "{who}: -c found a page the client did not mark:\n{out}");
    assert!(out.lines().any(|l| l.starts_with(&bytes) && l.ends_with(" Mbit/sec")), "{who}: no '{bytes}':\n{out}");
    assert!(out.lines().any(|l| l.starts_with(&iters) && l.ends_with(" usec/iter")), "{who}: no '{iters}':\n{out}");
}

/// Whether a TCP socket in the namespace listens on 18515 (our server is ready for the
/// guest's client, which does not retry).
pub(crate) fn listening(g: &harness::Guest) -> bool {
    let o = g.exec_in_netns("ss -ltn 'sport = :18515'");
    String::from_utf8_lossy(&o.stdout).contains(":18515")
}

#[test]
fn kernel_rxe_pingpong_examples_both_roles() {
    let mut g = GuestBuilder::new("interop_pingpong").scenario("serve\n").boot();
    let art = g.artefacts.clone();
    let mut report = format!("boot_time_s {:.2}\n", g.boot_time.as_secs_f64());
    for kind in ["rc", "uc", "ud", "srq"] {
        let tool = format!("ibv_{kind}_pingpong");
        let o = opts(kind);

        // a. The guest's example serves; our client.
        let (c0, _) = counters(&mut g);
        let (rc, out) = g.guest_exec(&format!("({tool} {o}; echo rc=$?) > /tmp/pp_{kind}.log 2>&1 &"), T);
        assert_eq!(rc, 0, "{out}");
        // The example prints nothing before its accept() that a redirected stdout would show:
        // our client retries its TCP connect until the server listens.
        let cmd = roce(&format!(
            "pingpong {kind} {o} --iface tap0 -I 198.18.0.1 --timeout 30 --pcap {}/{kind}_client.pcap 198.18.0.2",
            art.display()
        ));
        let end = Instant::now() + Duration::from_secs(30);
        let (rc, out) = loop {
            let (rc, out) = g.run_in_netns(&cmd);
            if !out.contains("Couldn't connect") || Instant::now() >= end {
                break (rc, out);
            }
            std::thread::sleep(Duration::from_millis(300));
        };
        let log = g.wait_for_output(
            &format!("cat /tmp/pp_{kind}.log"),
            "rc=",
            Duration::from_secs(60),
            T,
            Duration::from_millis(300),
        );
        let (c1, stats) = counters(&mut g);
        let _ = writeln!(report, "--- {kind} a. guest {tool} {o} (server) log:\n{log}\nroce (client), exit {rc}:\n{out}\nguest rxe counters after:\n{stats}");
        std::fs::write(art.join("report.txt"), &report).unwrap();
        assert_eq!(rc, 0, "roce pingpong {kind} client:\n{out}\nguest:\n{log}");
        assert!(log.contains("rc=0"), "the guest's {tool} server:\n{log}");
        assert_results(&format!("guest {tool} server"), &log, kind);
        assert_results(&format!("roce pingpong {kind} client"), &out, kind);
        check_counters(kind, &c0, &c1, &stats);

        // b. Our server; the guest's example as the client.
        let (c0, _) = counters(&mut g);
        let mut child = g.spawn_in_netns(&roce(&format!(
            "pingpong {kind} {o} --iface tap0 -I 198.18.0.1 --timeout 60 --pcap {}/{kind}_server.pcap",
            art.display()
        )));
        let end = Instant::now() + Duration::from_secs(20);
        while !listening(&g) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(100));
        }
        let (grc, glog) = g.guest_exec(&format!("{tool} {o} 198.18.0.1 2>&1; echo rc=$?"), T);
        let status = child.wait().expect("roce pingpong server");
        let mut out = String::new();
        let _ = child.stdout.take().map(|mut s| s.read_to_string(&mut out));
        let _ = child.stderr.take().map(|mut s| s.read_to_string(&mut out));
        harness::assert_no_send_errors("roce pingpong server", &out);
        let (c1, stats) = counters(&mut g);
        let rc = status.code().unwrap_or(-1);
        let _ = writeln!(report, "--- {kind} b. roce (server), exit {rc}:\n{out}\nguest {tool} {o} 198.18.0.1 (exec rc {grc}):\n{glog}\nguest rxe counters after:\n{stats}");
        std::fs::write(art.join("report.txt"), &report).unwrap();
        assert_eq!(rc, 0, "roce pingpong {kind} server:\n{out}\nguest:\n{glog}");
        assert!(glog.contains("rc=0"), "the guest's {tool} client:\n{glog}");
        assert_results(&format!("guest {tool} client"), &glog, kind);
        assert_results(&format!("roce pingpong {kind} server"), &out, kind);
        check_counters(kind, &c0, &c1, &stats);
    }
    g.signal("end");
    g.finish();
    std::fs::write(art.join("report.txt"), &report).unwrap();
    println!("{report}");
}

/// The guest's rxe saw the run: at least `ITERS` messages' packets each way (a message of
/// 4096 bytes is 4 packets at MTU 1024; UD's 1024 bytes one), no retry, no sequence error, no
/// duplicate.
pub(crate) fn check_counters(kind: &str, before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>, text: &str) {
    let pkts = u64::from(ITERS) * size(kind).div_ceil(1024);
    assert!(delta(before, after, "sent_pkts") >= pkts, "{kind}: sent_pkts:\n{text}");
    assert!(delta(before, after, "rcvd_pkts") >= pkts, "{kind}: rcvd_pkts:\n{text}");
    for name in ["retry_exceeded_err", "rcvd_seq_err", "duplicate_request", "out_of_seq_request"] {
        assert_eq!(delta(before, after, name), 0, "{kind}: {name}:\n{text}");
    }
}
