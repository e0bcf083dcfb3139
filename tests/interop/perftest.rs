//! perftest interop with a real Linux kernel rxe peer (Debian 12's perftest 4.5-0.17 in the
//! guest, version "6.06"), every test over RC with the TCP exchange on port 18515, both roles:
//! a. the guest's `ib_<test> -d rxe0 -x 1 -n 100` server ▶ `roce perftest <test> ... 198.18.0.2`;
//! b. `roce perftest <test>` as the server ▶ the guest's `ib_<test> -d rxe0 -x 1 -n 100 198.18.0.1`.
//! One guest boot per role, the eight tests in turn. Each run asserts what the guest saw: its
//! tool's exit status, its result row (size and iterations; the bandwidth servers print the
//! client's report, so our report exchange is checked too) and, at the end, its rxe counters
//! (no retry exhausted, no sequence error, packets sent and received).
//!
//! Needs root, qemu and `bash tests/interop/setup.sh`. Artefacts:
//! target/interop/artefacts/<kernel>/interop_perftest_*/report.txt.

use std::fmt::Write as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::harness::{self, roce, GuestBuilder};

const T: Duration = Duration::from_secs(120);
/// Iterations: TCG is slow.
const N: u32 = 100;

/// (test, its default size).
const TESTS: [(&str, u64); 8] = [
    ("send_bw", 65536),
    ("write_bw", 65536),
    ("read_bw", 65536),
    ("atomic_bw", 8),
    ("send_lat", 2),
    ("write_lat", 2),
    ("read_lat", 2),
    ("atomic_lat", 8),
];

/// The row under perftest's " #bytes" header: (size, iterations), the rest kept as text.
fn result_row(out: &str) -> Option<(u64, u64, String)> {
    let mut lines = out.lines().skip_while(|l| !l.trim_start().starts_with("#bytes"));
    lines.next()?;
    let row = lines.next()?;
    let mut f = row.split_whitespace();
    let size = f.next()?.parse().ok()?;
    let iters = f.next()?.parse().ok()?;
    Some((size, iters, row.to_string()))
}

fn counter(stats: &str, name: &str) -> u64 {
    let mut it = stats.split_whitespace().skip_while(|w| *w != name);
    it.nth(1).and_then(|v| v.parse().ok()).unwrap_or(u64::MAX)
}

/// The guest's rxe counters stayed clean and moved.
fn assert_counters(before: &str, after: &str) {
    assert_eq!(counter(after, "retry_exceeded_err"), 0, "{after}");
    assert_eq!(counter(after, "rcvd_seq_err"), 0, "{after}");
    assert!(counter(after, "sent_pkts") > counter(before, "sent_pkts"), "before:\n{before}\nafter:\n{after}");
    assert!(counter(after, "rcvd_pkts") > counter(before, "rcvd_pkts"), "before:\n{before}\nafter:\n{after}");
}

/// Whether a server of `test` prints a result row (ib_read_lat and ib_atomic_lat servers
/// close right after the setup).
fn server_prints_row(test: &str) -> bool {
    !matches!(test, "read_lat" | "atomic_lat")
}

#[test]
fn perftest_guest_server_roce_client() {
    let mut g = GuestBuilder::new("interop_perftest_client").scenario("serve\n").boot();
    let art = g.artefacts.clone();
    let mut report = format!("boot_time_s {:.2}\n", g.boot_time.as_secs_f64());
    let (_, before) = g.guest_exec("rdma statistic show 2>&1", T);
    let mut failures = Vec::new();
    for (test, size) in TESTS {
        let log = format!("/tmp/ib_{test}.log");
        let (rc, out) = g.guest_exec(&format!("(ib_{test} -d rxe0 -x 1 -n {N}; echo rc=$?) > {log} 2>&1 &"), T);
        assert_eq!(rc, 0, "{out}");
        // The server listens on 18515 (0x4853) once its device is open.
        let tcp = g.wait_for_output(
            "cat /proc/net/tcp",
            ":4853 00000000:0000 0A",
            Duration::from_secs(60),
            T,
            Duration::from_millis(300),
        );
        assert!(tcp.contains(":4853 00000000:0000 0A"), "ib_{test} does not listen:\n{tcp}");
        let pcap = art.join(format!("{test}_client.pcap"));
        let cmd = format!(
            "perftest {test} --iface tap0 -I 198.18.0.1 -n {N} --timeout 60 --pcap {} 198.18.0.2",
            pcap.display()
        );
        let (ours, our_out) = g.run_in_netns(&roce(&cmd));
        let glog =
            g.wait_for_output(&format!("cat {log}"), "rc=", Duration::from_secs(60), T, Duration::from_millis(300));
        let _ = writeln!(
            report,
            "=== {test}: roce {cmd} exit {ours}\n{our_out}\n--- guest ib_{test} -d rxe0 -x 1 -n {N}:\n{glog}"
        );
        std::fs::write(art.join("report.txt"), &report).unwrap();
        let row = result_row(&glog);
        let ok = ours == 0
            && glog.contains("rc=0")
            && (!server_prints_row(test) || row.as_ref().is_some_and(|(s, n, _)| *s == size && *n == u64::from(N)))
            && result_row(&our_out).is_some_and(|(s, n, _)| s == size && n == u64::from(N));
        let _ = writeln!(
            report,
            "RESULT {test} roce=client guest=server mode=tcp transport=RC: {} guest row: {}",
            if ok { "PASS" } else { "FAIL" },
            row.map(|r| r.2).unwrap_or_else(|| "(none)".into())
        );
        if !ok {
            failures.push(test);
        }
    }
    let (_, after) = g.guest_exec("rdma statistic show 2>&1", T);
    let _ = writeln!(report, "guest rxe counters before:\n{before}\nafter:\n{after}");
    std::fs::write(art.join("report.txt"), &report).unwrap();
    g.signal("end");
    g.finish();
    println!("{report}");
    assert!(failures.is_empty(), "failed: {failures:?} (see {})", art.join("report.txt").display());
    assert_counters(&before, &after);
}

#[test]
fn perftest_roce_server_guest_client() {
    let mut g = GuestBuilder::new("interop_perftest_server").scenario("serve\n").boot();
    let art = g.artefacts.clone();
    let mut report = format!("boot_time_s {:.2}\n", g.boot_time.as_secs_f64());
    let (_, before) = g.guest_exec("rdma statistic show 2>&1", T);
    let mut failures = Vec::new();
    for (test, size) in TESTS {
        let pcap = art.join(format!("{test}_server.pcap"));
        let cmd = format!(
            "perftest {test} --iface tap0 -I 198.18.0.1 -n {N} --timeout 60 --accept-timeout 90 --pcap {}",
            pcap.display()
        );
        let child = Command::new("ip")
            .args(["netns", "exec", &g.ns, "sh", "-c"])
            .arg(roce(&cmd))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("roce perftest server");
        std::thread::sleep(Duration::from_millis(700));
        let (grc, glog) = g.guest_exec(&format!("ib_{test} -d rxe0 -x 1 -n {N} 198.18.0.1 2>&1; echo rc=$?"), T);
        let o = child.wait_with_output().expect("roce perftest server output");
        let our_out = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        harness::assert_no_send_errors(&cmd, &our_out);
        let ours = o.status.code().unwrap_or(-1);
        let _ = writeln!(
            report,
            "=== {test}: roce {cmd} exit {ours}\n{our_out}\n--- guest ib_{test} -d rxe0 -x 1 -n {N} 198.18.0.1 (exec rc {grc}):\n{glog}"
        );
        let row = result_row(&glog);
        let ok = ours == 0
            && glog.contains("rc=0")
            && row.as_ref().is_some_and(|(s, n, _)| *s == size && *n == u64::from(N))
            && (!server_prints_row(test)
                || result_row(&our_out).is_some_and(|(s, n, _)| s == size && n == u64::from(N)));
        let _ = writeln!(
            report,
            "RESULT {test} roce=server guest=client mode=tcp transport=RC: {} guest row: {}",
            if ok { "PASS" } else { "FAIL" },
            row.map(|r| r.2).unwrap_or_else(|| "(none)".into())
        );
        std::fs::write(art.join("report.txt"), &report).unwrap();
        if !ok {
            failures.push(test);
        }
    }
    let (_, after) = g.guest_exec("rdma statistic show 2>&1", T);
    let _ = writeln!(report, "guest rxe counters before:\n{before}\nafter:\n{after}");
    std::fs::write(art.join("report.txt"), &report).unwrap();
    g.signal("end");
    g.finish();
    println!("{report}");
    assert!(failures.is_empty(), "failed: {failures:?} (see {})", art.join("report.txt").display());
    assert_counters(&before, &after);
}
