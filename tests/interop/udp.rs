//! The udp transport against a real Linux kernel rxe peer, every tool of ours run as nobody
//! without any capability (setpriv), over a kernel UDP socket on 198.18.0.1:4791 (tap0's own
//! address). Each test asserts what the PEER observed:
//! - `roce rping -c` ▶ the guest's `rping -s`, and `roce rping -s` ◀ the guest's `rping -c`:
//!   the guest's rping exits 0 with its ten ping data lines, and its rxe counter `rcvd_pkts`
//!   grew by exactly the datagrams our socket sent — every one passed rxe's checks, the ICRC
//!   over the IP header the host kernel wrote included. Our side takes the IPv4 IDs rxe sends
//!   (`__ip_select_ident`'s) from the ICRC (spec/net.md).
//! - `roce mckey -s` (join, five datagrams, leave) with the SA at the guest (`roce sa-agent`
//!   on its umad, as `kernel::` case b): the guest's rdma-core `mckey` receives the five
//!   datagrams, the agent logs our Set and our SubnAdmDelete, and tshark on tap0 shows, from
//!   our MAC, the SA Set and the SubnAdmDelete (method 0x15, attribute 0x0038) from UDP port
//!   4791 (the socket's: the raw transport's engine picks another), and the IGMPv3 join and
//!   leave of 239.1.2.3 the host kernel sent for IP_ADD/DROP_MEMBERSHIP.
//! - `roce perftest write_bw` against the guest's `ib_write_bw`, both roles, TCP exchange on
//!   18515: the guest's tool exits 0 with its result row, and `rcvd_pkts` grew by our sent
//!   datagrams.
//!
//! Needs root (for the namespace and the guest), qemu, `bash tests/interop/setup.sh` and the
//! static `roce` (the guest's SA agent). Artefacts: target/interop/artefacts/interop_udp*/.

use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use crate::harness::{self, as_nobody, rdma_stat as counter, roce, static_roce, Guest, GuestBuilder};
use crate::perftest::{self, How};

const T: Duration = Duration::from_secs(90);

/// The number after `key` on our counters line (`udp socket: sent N …`).
fn field(out: &str, key: &str) -> u64 {
    out.split(key).nth(1).and_then(|r| r.split_whitespace().next()).and_then(|v| v.parse().ok()).unwrap_or(u64::MAX)
}

/// The guest's rxe counters now (`rdma statistic show`).
fn rxe_stats(g: &mut Guest) -> String {
    std::thread::sleep(harness::HW_STATS_LIFESPAN);
    g.guest_exec("rdma statistic show 2>&1", T).1
}

/// The guest's rxe received exactly the `sent` datagrams our socket sent (`out`: our tool's
/// output, for the message).
fn assert_peer_received_all(before: &str, after: &str, sent: u64, out: &str) {
    assert!(sent > 0 && sent != u64::MAX, "{out}");
    let received = counter(after, "rcvd_pkts") - counter(before, "rcvd_pkts");
    assert_eq!(received, sent, "the guest's rxe received every datagram we sent\n{before}\n{after}\n{out}");
}

/// The RoCEv2 datagrams from `mac` in our tool's own capture: what the udp socket took (a
/// capture writes only what its device took, frames of a batch included).
fn captured_datagrams(pcap: &std::path::Path, mac: [u8; 6]) -> u64 {
    let frames = roce_decode::capture::read_file(pcap).unwrap_or_else(|e| panic!("{}: {e}", pcap.display()));
    frames
        .iter()
        .filter(|f| f.data.get(6..12) == Some(&mac[..]) && roce_wire::frame::parse_lax(&f.data).is_ok())
        .count() as u64
}

/// A directory in the artefacts that nobody may write (our tools' `--pcap`).
fn nobody_dir(g: &Guest) -> PathBuf {
    let dir = g.artefacts.join("nobody");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

#[test]
fn kernel_rxe_rping_server_and_our_unprivileged_udp_client() {
    let mut g = GuestBuilder::new("interop_udp").scenario("serve\n").boot();
    let art = g.artefacts.clone();
    let mut report = format!("boot_time_s {:.2}\n", g.boot_time.as_secs_f64());
    let before = rxe_stats(&mut g);
    let _ = writeln!(report, "guest rxe counters before:\n{before}");
    let (rc, out) = g.guest_exec("(rping -s -a 198.18.0.2 -C 10 -V -v; echo rc=$?) > /tmp/rping_srv.log 2>&1 &", T);
    assert_eq!(rc, 0, "{out}");
    let cm = g.wait_for_output("rdma res show cm_id", "LISTEN", Duration::from_secs(30), T, Duration::from_millis(300));
    let _ = writeln!(report, "the guest's rping listens:\n{cm}");
    let cmd = as_nobody(&roce("rping -c -a 198.18.0.2 -I 198.18.0.1 --iface tap0 --transport udp -C 10 -V -v -d"));
    let (rc, out) = g.run_in_netns(&cmd);
    let _ = writeln!(report, "{cmd}\nexit {rc}\n{out}");
    let log =
        g.wait_for_output("cat /tmp/rping_srv.log", "rc=", Duration::from_secs(30), T, Duration::from_millis(300));
    let _ = writeln!(report, "guest rping -s log:\n{log}");
    let after = rxe_stats(&mut g);
    let _ = writeln!(report, "guest rxe counters after:\n{after}");
    std::fs::write(art.join("report.txt"), &report).unwrap();
    assert_eq!(rc, 0, "roce rping client:\n{out}\nguest:\n{log}");
    assert!(out.contains("transport udp (--transport)"), "{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with("ping data: rdma-ping-")).count(), 10, "{out}");
    assert!(harness::guest_rping_succeeded(&log), "the guest's rping server:\n{log}");
    assert_eq!(log.lines().filter(|l| l.starts_with("server ping data: rdma-ping-")).count(), 10, "{log}");
    assert_peer_received_all(&before, &after, field(&out, "udp socket: sent"), &out);
    // rxe's IPv4 IDs are not 0: each came back from the ICRC, or the pings could not pass.
    assert!((1..u64::MAX).contains(&field(&out, "ipv4_id_from_icrc")), "{out}");
    g.signal("end");
    g.finish();
    println!("{report}");
}

#[test]
fn our_unprivileged_udp_rping_server_and_the_kernel_rxe_client() {
    let mut g = GuestBuilder::new("interop_udp_rping_server").scenario("serve\n").boot();
    let art = g.artefacts.clone();
    let mut report = format!("boot_time_s {:.2}\n", g.boot_time.as_secs_f64());
    let before = rxe_stats(&mut g);
    let pcap = nobody_dir(&g).join("rping_server.pcap");
    let cmd = as_nobody(&roce(&format!(
        "rping -s -a 198.18.0.1 --iface tap0 --transport udp -v -d --timeout 60 --pcap {}",
        pcap.display()
    )));
    let child = g.spawn_in_netns(&cmd);
    // (listening before the guest connects, as rc.rs case b)
    std::thread::sleep(Duration::from_millis(700));
    let (grc, glog) = g.guest_exec("rping -c -a 198.18.0.1 -C 10 -V -v 2>&1; echo rc=$?", T);
    let (rc, out) = harness::wait_tool(&cmd, child);
    let after = rxe_stats(&mut g);
    let _ = writeln!(
        report,
        "{cmd}\nexit {rc}\n{out}\nguest rping -c (exec rc {grc}):\n{glog}\nguest rxe counters before:\n{before}\nafter:\n{after}"
    );
    std::fs::write(art.join("report.txt"), &report).unwrap();
    assert_eq!(rc, 0, "roce rping server:\n{out}\nguest:\n{glog}");
    assert!(out.contains("transport udp (--transport)"), "{out}");
    assert!(harness::guest_rping_succeeded(&glog), "the guest's rping client:\n{glog}");
    assert_eq!(glog.lines().filter(|l| l.starts_with("ping data: rdma-ping-")).count(), 10, "{glog}");
    assert_eq!(out.lines().filter(|l| l.starts_with("server ping data: rdma-ping-")).count(), 10, "{out}");
    assert_peer_received_all(&before, &after, field(&out, "udp socket: sent"), &out);
    // Our capture (behind which the socket still batches) holds what the socket sent.
    assert_eq!(captured_datagrams(&pcap, g.tap_mac), field(&out, "udp socket: sent"), "{out}");
    g.signal("end");
    g.finish();
    println!("{report}");
}

#[test]
fn our_unprivileged_udp_mckey_joins_sends_and_leaves() {
    let bin = static_roce();
    let mut g = GuestBuilder::new("interop_udp_mckey").binary(&bin, "roce").scenario("serve\n").boot();
    let art = g.artefacts.clone();
    let mut report = format!("boot_time_s {:.2}\n", g.boot_time.as_secs_f64());
    // The SA: our agent on the guest's umad (its kernel carries the MADs to and from QP1).
    let (rc, out) = g.guest_exec("roce sa-agent --device umad0 --duration 60 > /tmp/agent.log 2>&1 &", T);
    assert_eq!(rc, 0, "{out}");
    let ready = g.wait_for_output(
        "cat /tmp/agent.log",
        "registered agent",
        Duration::from_secs(30),
        T,
        Duration::from_millis(300),
    );
    assert!(ready.contains("registered agent"), "the agent registered on umad0: {ready}");
    // The receiver: rdma-core's mckey (RoCE: an IP-level join, no SA of its own).
    let (rc, out) = g.guest_exec("(mckey -m 239.1.2.3 -b 198.18.0.2 -C 5; echo rc=$?) > /tmp/mckey_rx.log 2>&1 &", T);
    assert_eq!(rc, 0, "{out}");
    let igmp =
        g.wait_for_output("cat /proc/net/igmp", "030201EF", Duration::from_secs(30), T, Duration::from_millis(300));
    assert!(igmp.contains("030201EF"), "the guest's mckey joined 239.1.2.3: {igmp}");
    std::thread::sleep(Duration::from_millis(500));
    let before = rxe_stats(&mut g);
    let cmd = as_nobody(&roce(
        "mckey -m 239.1.2.3 -b 198.18.0.1 --iface tap0 --transport udp --sa 198.18.0.2 -s -C 5 --leave-after 1",
    ));
    let (rc, out) = g.run_in_netns(&cmd);
    let _ = writeln!(report, "{cmd}\nexit {rc}\n{out}");
    let log = g.wait_for_output("cat /tmp/mckey_rx.log", "rc=", Duration::from_secs(30), T, Duration::from_millis(300));
    let (_, agent) = g.guest_exec("cat /tmp/agent.log", T);
    let after = rxe_stats(&mut g);
    let _ = writeln!(
        report,
        "guest mckey (receiver) log:\n{log}\nagent log:\n{agent}\nguest rxe counters before:\n{before}\nafter:\n{after}"
    );
    std::fs::write(art.join("report.txt"), &report).unwrap();
    assert_eq!(rc, 0, "roce mckey:\n{out}");
    assert!(out.contains("transport udp (--transport)"), "{out}");
    assert!(out.contains("event: MULTICAST_JOIN") && out.contains("event: MULTICAST_LEFT"), "{out}");
    assert!(
        log.contains("data transfers complete") && log.contains("rc=0"),
        "the guest's mckey received our 5:\n{log}"
    );
    assert!(agent.contains("<- SubnAdmSet(MCMemberRecord)"), "{agent}");
    let delete = agent
        .lines()
        .find(|l| l.contains("<- SubnAdmDelete(MCMemberRecord)"))
        .unwrap_or_else(|| panic!("no Delete in the agent's log:\n{agent}"));
    assert!(delete.contains("mask=0x10003") && delete.contains("MGID=::ffff:239.1.2.3"), "{delete}");
    assert_peer_received_all(&before, &after, field(&out, "udp socket: sent"), &out);

    let (tap, tap_mac) = g.end_and_finish();
    // tap0's capture, only frames from our MAC (the guest's mckey sends IGMP too).
    let ours = harness::mac_string(&tap_mac);
    let sa = |method: u8| {
        harness::tshark_fields(
            &tap,
            &format!(
                "eth.src == {ours} && udp.srcport == 4791 && infiniband.mad.method == {method:#04x} \
                 && infiniband.mad.attributeid == 0x0038"
            ),
            &["infiniband.mad.method", "infiniband.mcmemberrecord.mgid", "infiniband.mcmemberrecord.joinstate"],
        )
    };
    let (sets, deletes) = (sa(0x02), sa(0x15));
    let igmp = harness::tshark_fields(
        &tap,
        &format!("eth.src == {ours} && igmp"),
        &["igmp.type", "igmp.record_type", "igmp.maddr"],
    );
    let _ = writeln!(report, "--- tshark on tap0 from {ours}:\nSA Set:\n{sets}SubnAdmDelete:\n{deletes}IGMP:\n{igmp}");
    std::fs::write(art.join("report.txt"), &report).unwrap();
    println!("{report}");
    assert!(sets.lines().any(|l| l.contains("::ffff:239.1.2.3")), "our SA Set on tap0:\n{sets}");
    assert!(deletes.lines().any(|l| l.contains("::ffff:239.1.2.3")), "our SubnAdmDelete on tap0:\n{deletes}");
    // IGMPv3 (type 0x22): CHANGE_TO_EXCLUDE (4) joins, CHANGE_TO_INCLUDE (3) leaves; or v2.
    let igmp_has = |v3_record: &str, v2_type: &str| {
        igmp.lines().any(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            f.last().is_some_and(|g| g.split(',').any(|a| a == "239.1.2.3"))
                && ((f[0] == "0x22" && f.get(1).is_some_and(|r| r.split(',').any(|r| r == v3_record)))
                    || f[0] == v2_type)
        })
    };
    assert!(igmp_has("4", "0x16"), "the kernel's membership report for 239.1.2.3:\n{igmp}");
    assert!(igmp_has("3", "0x17"), "the kernel's leave of 239.1.2.3:\n{igmp}");
}

#[test]
fn our_unprivileged_udp_perftest_write_bw_both_roles() {
    let mut g = GuestBuilder::new("interop_udp_perftest").scenario("serve\n").boot();
    let art = g.artefacts.clone();
    let mut report = format!("boot_time_s {:.2}\n", g.boot_time.as_secs_f64());
    let pcap_dir = nobody_dir(&g);
    // (what our socket sent is counted in our capture: perftest prints its counters only with
    // --debug, which prints every frame too, more than the server's stdout pipe holds)
    let how = How {
        host: perftest::Host::Roce,
        options: "--transport udp",
        wrap: &|cmd| as_nobody(&cmd),
        pcap_dir: &pcap_dir,
    };
    let case = perftest::rc("write_bw", 65536, true);
    let tap_mac = g.tap_mac;
    let before = rxe_stats(&mut g);
    let client = perftest::guest_server(&mut g, &case, &how, &mut report);
    let middle = rxe_stats(&mut g);
    let server = perftest::guest_client(&mut g, &case, &how, &mut report);
    let after = rxe_stats(&mut g);
    let _ = writeln!(report, "guest rxe counters before:\n{before}\nbetween:\n{middle}\nafter:\n{after}");
    std::fs::write(art.join("report.txt"), &report).unwrap();
    g.signal("end");
    g.finish();
    println!("{report}");
    for (role, ran) in [("client", &client), ("server", &server)] {
        assert!(ran.ok, "our write_bw {role} (see {})", art.join("report.txt").display());
        assert!(ran.ours.contains("transport udp (--transport)"), "{}", ran.ours);
    }
    let sent = |role: &str| captured_datagrams(&pcap_dir.join(format!("write_bw_{role}.pcap")), tap_mac);
    assert_peer_received_all(&before, &middle, sent("client"), &client.ours);
    assert_peer_received_all(&middle, &after, sent("server"), &server.ours);
}
