//! The udp transport against a real Linux kernel rxe peer: `roce rping -c` as nobody, without
//! any capability, over a kernel UDP socket on 198.18.0.1:4791 (tap0's own address), against
//! the guest's `rping -s`. The peer's view is asserted: its rping exits 0 with the ping data,
//! and its rxe counter `rcvd_pkts` grew by exactly the datagrams our socket sent — every one
//! passed rxe's checks, the ICRC over the IP header the host kernel wrote included. Our side
//! takes the IPv4 IDs rxe sends (`__ip_select_ident`'s) from the ICRC (spec/net.md).
//!
//! Needs root (for the namespace and the guest), qemu and `bash tests/interop/setup.sh`.
//! Artefacts: target/interop/artefacts/interop_udp/.

use std::fmt::Write as _;
use std::time::Duration;

use crate::harness::{roce, GuestBuilder};

const T: Duration = Duration::from_secs(90);

/// A counter of `rdma statistic show`'s output.
fn counter(stats: &str, name: &str) -> u64 {
    let mut it = stats.split_whitespace().skip_while(|w| *w != name);
    it.nth(1).and_then(|v| v.parse().ok()).unwrap_or(u64::MAX)
}

/// The number after `key` on our counters line (`udp socket: sent N …`).
fn field(out: &str, key: &str) -> u64 {
    out.split(key).nth(1).and_then(|r| r.split_whitespace().next()).and_then(|v| v.parse().ok()).unwrap_or(u64::MAX)
}

#[test]
fn kernel_rxe_rping_server_and_our_unprivileged_udp_client() {
    let mut g = GuestBuilder::new("interop_udp").scenario("serve\n").boot();
    let art = g.artefacts.clone();
    let mut report = format!("boot_time_s {:.2}\n", g.boot_time.as_secs_f64());
    let (_, before) = g.guest_exec("rdma statistic show 2>&1", T);
    let _ = writeln!(report, "guest rxe counters before:\n{before}");
    let (rc, out) = g.guest_exec("(rping -s -a 198.18.0.2 -C 10 -V -v; echo rc=$?) > /tmp/rping_srv.log 2>&1 &", T);
    assert_eq!(rc, 0, "{out}");
    let cm = g.wait_for_output("rdma res show cm_id", "LISTEN", Duration::from_secs(30), T, Duration::from_millis(300));
    let _ = writeln!(report, "the guest's rping listens:\n{cm}");
    let cmd = format!(
        "setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all {}",
        roce("rping -c -a 198.18.0.2 -I 198.18.0.1 --iface tap0 --transport udp -C 10 -V -v -d")
    );
    let (rc, out) = g.run_in_netns(&cmd);
    let _ = writeln!(report, "{cmd}\nexit {rc}\n{out}");
    let log =
        g.wait_for_output("cat /tmp/rping_srv.log", "rc=", Duration::from_secs(30), T, Duration::from_millis(300));
    let _ = writeln!(report, "guest rping -s log:\n{log}");
    let (_, after) = g.guest_exec("rdma statistic show 2>&1", T);
    let _ = writeln!(report, "guest rxe counters after:\n{after}");
    std::fs::write(art.join("report.txt"), &report).unwrap();
    assert_eq!(rc, 0, "roce rping client:\n{out}\nguest:\n{log}");
    assert!(out.contains("transport udp (--transport)"), "{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with("ping data: rdma-ping-")).count(), 10, "{out}");
    assert!(log.contains("rc=0"), "the guest's rping server:\n{log}");
    assert_eq!(log.lines().filter(|l| l.starts_with("server ping data: rdma-ping-")).count(), 10, "{log}");
    let sent = field(&out, "udp socket: sent");
    let received = counter(&after, "rcvd_pkts") - counter(&before, "rcvd_pkts");
    assert!(sent > 0 && sent != u64::MAX, "{out}");
    assert_eq!(received, sent, "the guest's rxe received every datagram we sent\n{before}\n{after}\n{out}");
    // rxe's IPv4 IDs are not 0: each came back from the ICRC, or the pings could not pass.
    assert!((1..u64::MAX).contains(&field(&out, "ipv4_id_from_icrc")), "{out}");
    g.signal("end");
    g.finish();
    println!("{report}");
}
