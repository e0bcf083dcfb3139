//! Interop with a real Linux kernel rxe peer through our own tools (the issue's cases):
//! a. `roce sa-query` to the guest's QP1: the kernel answers GetResp 0x000C and the tool says so;
//! b. the mission: `roce sa-agent` on the guest's umad, `roce mckey … -s -C 5 --leave-after 1`
//!    joins (SA Set ▶ the agent's GetResp through the guest kernel) and leaves (SA Delete,
//!    JoinState FullMember, mask 0x10003 ▶ DeleteResp); the agent logs the Delete, the guest's
//!    rcvd_pkts counts every frame we sent it, tshark on tap0 shows the Delete from our MAC and
//!    the IGMP leave;
//! c. without the agent the leave still reaches the guest (rcvd_pkts +1 per try) and our stack
//!    reports the SA timeout as MULTICAST_ERROR after its retries;
//! f. the probe of (a) over IPv6.
//!
//! Needs root, qemu, `bash tests/interop/setup.sh` and the static `roce` for the guest
//! (tests/run-all.sh builds both). Artefacts: target/interop/artefacts/<kernel>/interop_kernel/
//! (ROCE_KERNEL picks 6.1, 6.12 or sid).

use crate::harness;

use crate::common;

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::harness::{roce, static_roce, GuestBuilder};

const T: Duration = Duration::from_secs(60);

/// (exit code, stdout+stderr) of a host-side command in the namespace.
fn run(g: &harness::Guest, cmd: &str) -> (i32, String) {
    g.run_in_netns(cmd)
}

fn counters(g: &mut harness::Guest, tag: &str) -> std::collections::BTreeMap<String, u64> {
    g.read_counters(tag, T)
}

/// RoCEv2 frames in `pcap` that we sent to the guest's unicast address.
fn frames_to_guest(pcap: &Path, guest: &str) -> Vec<String> {
    let frames = roce_decode::capture::read_file(pcap).expect("our pcap");
    frames
        .iter()
        .filter_map(|f| {
            let d = roce_decode::decode::decode_ethernet(&f.data);
            let j = &d.json;
            (j.get("kind").and_then(|k| k.as_str()) == Some("rocev2")
                && j.get("ip").and_then(|i| i.get("dst")).and_then(|v| v.as_str()) == Some(guest))
            .then_some(d.summary)
        })
        .collect()
}

/// Poll a log file in the guest until it contains `needle`; returns its content.
fn wait_guest_log(g: &mut harness::Guest, path: &str, needle: &str, timeout: Duration) -> String {
    g.wait_for_output(&format!("cat {path} 2>/dev/null"), needle, timeout, T, Duration::from_millis(300))
}

#[test]
fn kernel_rxe_interop_with_our_tools() {
    let bin = static_roce();
    let mut g = GuestBuilder::new("interop_kernel").binary(&bin, "roce").scenario("serve\n").boot();
    let art = g.artefacts.clone();
    let mut report = format!("boot_time_s {:.2}\n", g.boot_time.as_secs_f64());

    // a. The probe with our tool: the kernel's MAD core answers status 0x000C.
    let (rc, out) = run(&g, &roce("sa-query --iface tap0 -b 198.18.0.1 --sa 198.18.0.2 --mgid ::ffff:239.1.2.3"));
    let _ = writeln!(report, "--- a. sa-query (IPv4), exit {rc}\n{out}");
    assert_eq!(rc, 1, "{out}");
    assert!(out.contains("answer: SubnAdmGetResp status 0x000c (unsupported method/attribute)"), "{out}");
    // f. The same over IPv6.
    let (rc, out) = run(&g, &roce("sa-query --iface tap0 -b fd00::1 --sa fd00::2 --mgid ::ffff:239.1.2.3"));
    let _ = writeln!(report, "--- f. sa-query (IPv6), exit {rc}\n{out}");
    assert_eq!(rc, 1, "{out}");
    assert!(out.contains("answer: SubnAdmGetResp status 0x000c (unsupported method/attribute)"), "{out}");

    // b. The mission: an SA agent on the guest's umad; join and leave from our stack.
    let (rc, out) = g.guest_exec("roce sa-agent --device umad0 --duration 60 > /tmp/agent.log 2>&1 &", T);
    assert_eq!(rc, 0, "{out}");
    let ready = wait_guest_log(&mut g, "/tmp/agent.log", "registered agent", Duration::from_secs(30));
    assert!(ready.contains("registered agent"), "the agent registered on umad0: {ready}");
    let before = counters(&mut g, "b_before");
    let pcap_b = art.join("mckey_b.pcap");
    let (rc, out) = run(
        &g,
        &roce(&format!(
            "mckey -m 239.1.2.3 -b 198.18.0.1 --iface tap0 --sa 198.18.0.2 -s -C 5 --leave-after 1 --pcap {}",
            pcap_b.display()
        )),
    );
    let _ = writeln!(report, "--- b. mckey -s, exit {rc}\n{out}");
    assert_eq!(rc, 0, "mckey:\n{out}");
    assert!(out.contains("event: MULTICAST_JOIN") && out.contains("event: MULTICAST_LEFT"), "{out}");
    let after = counters(&mut g, "b_after");
    let (_, agent) = g.guest_exec("cat /tmp/agent.log", T);
    let _ = writeln!(report, "agent log:\n{agent}");
    assert!(
        agent.contains("<- SubnAdmSet(MCMemberRecord)") && agent.contains("-> SubnAdmGetResp(MCMemberRecord)"),
        "{agent}"
    );
    let delete = agent
        .lines()
        .find(|l| l.contains("<- SubnAdmDelete(MCMemberRecord)"))
        .unwrap_or_else(|| panic!("no Delete in the agent's log:\n{agent}"));
    assert!(
        delete.contains("mask=0x10003")
            && delete.contains("MGID=::ffff:239.1.2.3")
            && delete.contains("PortGID=::ffff:198.18.0.1")
            && delete.contains("JoinState=FullMember"),
        "{delete}"
    );
    assert!(agent.contains("-> SubnAdmDeleteResp(MCMemberRecord)"), "{agent}");
    let sent_b = frames_to_guest(&pcap_b, "198.18.0.2");
    let d = after["rcvd_pkts"] - before["rcvd_pkts"];
    let _ = writeln!(
        report,
        "rcvd_pkts {} -> {} (+{d}); we sent the guest {} RoCEv2 frames",
        before["rcvd_pkts"],
        after["rcvd_pkts"],
        sent_b.len()
    );
    assert_eq!(d as usize, sent_b.len(), "rcvd_pkts counts every frame we sent:\n{}", sent_b.join("\n"));

    // c. Without the agent: the leave still reaches the guest, and times out after its retries.
    let _ = g.guest_exec(
        "killall roce; while pidof roce >/dev/null; do sleep 0.05; done; roce sa-agent --device umad0 --duration 3 > /tmp/agent2.log 2>&1 &",
        T,
    );
    let ready = wait_guest_log(&mut g, "/tmp/agent2.log", "registered agent", Duration::from_secs(30));
    assert!(ready.contains("registered agent"), "the second agent registered on umad0: {ready}");
    let before = counters(&mut g, "c_before");
    let pcap_c = art.join("mckey_c.pcap");
    let (rc, out) = run(
        &g,
        &roce(&format!(
            "mckey -m 239.1.2.4 -b 198.18.0.1 --iface tap0 --sa 198.18.0.2 -s -C 1 --leave-after 4 --pcap {}",
            pcap_c.display()
        )),
    );
    let _ = writeln!(report, "--- c. mckey with the agent gone before the leave, exit {rc}\n{out}");
    assert!(out.contains("event: MULTICAST_JOIN"), "{out}");
    assert!(out.contains("event: MULTICAST_ERROR status -110 (leave)"), "{out}");
    // how many times each Delete went out is our stack's own setting: take it from its report
    // and check it against what the guest counted and what tap0 saw (after the run)
    let per_query: usize = out
        .split("timed out after ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no 'timed out after N transmissions' in:\n{out}"));
    assert!(per_query >= 1, "{out}");
    assert_eq!(rc, 1, "a leave that was never answered fails the command");
    let after = counters(&mut g, "c_after");
    let sent_c = frames_to_guest(&pcap_c, "198.18.0.2");
    let deletes = sent_c.iter().filter(|l| l.contains("SubnAdmDelete(")).count();
    let deletes_c_ours = deletes;
    let d = after["rcvd_pkts"] - before["rcvd_pkts"];
    let _ = writeln!(report, "rcvd_pkts +{d}; we sent {} frames, {deletes} of them Deletes", sent_c.len());
    assert!(deletes >= per_query && deletes % per_query == 0, "{deletes} Deletes, {per_query} sends per query");
    assert_eq!(d as usize, sent_c.len(), "the guest counted every try we sent");

    // d. A bad ICRC through the fault-injecting device: the guest's rxe drops every try
    //    (rcvd_pkts does not move) and our stack retries until its budget ends.
    let before = counters(&mut g, "d_before");
    let (tries, outcome, send_errors_d) = g.in_netns(|| {
        use roce_net::driver::Driver;
        use roce_net::{CorruptScope, FaultConfig, FaultDevice};
        let raw = roce_net::raw::RawSocket::open("tap0").expect("raw socket on tap0");
        let mac = raw.info.mac.expect("tap0 MAC");
        let mut dev = FaultDevice::new(raw, 7);
        dev.set_tx(FaultConfig { corrupt: 1.0, corrupt_scope: CorruptScope::IcrcCovered, ..FaultConfig::default() });
        let mut cfg = roce_cm::StackConfig::new(mac, "198.18.0.1".parse().unwrap(), 24);
        cfg.sa = Some("198.18.0.2".parse().unwrap());
        let mut d = Driver::new(dev, roce_cm::Stack::new(cfg));
        let rec = roce_wire::mcmember::McMemberRecord {
            mgid: roce_wire::Gid::from_ipv4("239.1.2.3".parse().unwrap()),
            ..Default::default()
        };
        let req = roce_wire::sa::SaMad::request(
            roce_wire::mad::Method::Get,
            0,
            roce_wire::sa::attr::MC_MEMBER_RECORD,
            1,
            roce_wire::sa::SaData::mc_member(rec),
        );
        let now = d.now();
        let h = d.stack.sa_query(now, req).unwrap();
        let mut res = None;
        d.run_until(Duration::from_secs(6), |d| {
            res = d.stack.poll_sa_result().filter(|r| r.handle == h);
            res.is_some()
        })
        .unwrap();
        (d.stack.sa_sent().0, res.map(|r| r.result.map(|m| m.header.status.0)), d.send_errors)
    });
    let after = counters(&mut g, "d_after");
    let d = after["rcvd_pkts"] - before["rcvd_pkts"];
    let _ = writeln!(report, "--- d. {tries} tries with a corrupted ICRC: rcvd_pkts +{d}; outcome {outcome:?}");
    assert!(tries >= 1, "the query was sent");
    assert_eq!(send_errors_d, 0, "device send errors in case d");
    assert_eq!(outcome, Some(Err(roce_cm::Errno::ETIMEDOUT)));
    assert_eq!(d, 0, "rxe drops frames with a bad ICRC before counting them");

    // e. Multicast data with the kernel's RDMA stack: rdma-core's mckey in the guest.
    //    Guest receives what `roce mckey -s` sends (IGMP-only on our side, as a RoCE port):
    let (rc, out) = g.guest_exec("(mckey -m 239.1.2.3 -b 198.18.0.2 -C 5; echo rc=$?) > /tmp/mckey_rx.log 2>&1 &", T);
    assert_eq!(rc, 0, "{out}");
    // mckey's output is block-buffered into the file: watch the guest's IGMP membership instead
    // (RDMA-CM's RoCE join is ip_mc_inc_group; /proc/net/igmp shows 239.1.2.3 as 030201EF).
    let igmp = wait_guest_log(&mut g, "/proc/net/igmp", "030201EF", Duration::from_secs(30));
    assert!(igmp.contains("030201EF"), "the guest's mckey joined 239.1.2.3 at IP level: {igmp}");
    std::thread::sleep(Duration::from_millis(500));
    let _ = writeln!(report, "--- e1. the guest joined 239.1.2.3 (IGMP) for rdma-core's mckey: {igmp}");
    let (rc, out) = run(&g, &roce("mckey -m 239.1.2.3 -b 198.18.0.1 --iface tap0 --no-sa -s -C 5 --leave-after 1"));
    let _ = writeln!(
        report,
        "roce mckey -s --no-sa, exit {rc}
{out}"
    );
    assert_eq!(rc, 0, "{out}");
    let log = wait_guest_log(&mut g, "/tmp/mckey_rx.log", "rc=", Duration::from_secs(30));
    let _ = writeln!(
        report,
        "guest mckey (receiver) log:
{log}"
    );
    assert!(
        log.contains("data transfers complete") && log.contains("rc=0"),
        "the guest's mckey received our 5 datagrams:
{log}"
    );

    //    We receive what the guest's `mckey -s` sends, and after our leave nothing more reaches
    //    our application (the datagrams are counted as unknown_group drops).
    let (mut d, qpn, id, group) = g.in_netns(|| {
        use roce_net::driver::Driver;
        let raw = roce_net::raw::RawSocket::open("tap0").expect("raw socket on tap0");
        let mac = raw.info.mac.expect("tap0 MAC");
        let mut cfg = roce_cm::StackConfig::new(mac, "198.18.0.1".parse().unwrap(), 24);
        cfg.multicast_paths = roce_cm::MulticastPaths::IGMP_MLD_ONLY;
        let mut d = Driver::new(raw, roce_cm::Stack::new(cfg));
        let id = d.stack.create_id(roce_cm::PortSpace::Udp, roce_cm::QpType::Ud).unwrap();
        d.stack.bind_addr(id, "198.18.0.1:0".parse().unwrap()).unwrap();
        let qpn = d.stack.create_qp_for_id(id).unwrap();
        let group: std::net::IpAddr = "239.1.2.3".parse().unwrap();
        let ev = d.join(id, group, roce_wire::mcmember::JoinState::FULL_MEMBER, Duration::from_secs(5)).unwrap();
        assert_eq!(ev.map(|e| e.kind), Some(roce_cm::EventKind::MulticastJoin));
        (d, qpn, id, group)
    });
    // (the driver is moved back out of the namespace thread: its socket stays in the namespace)
    let (rc, out) =
        g.guest_exec("(mckey -m 239.1.2.3 -b 198.18.0.2 -s -C 5; echo rc=$?) > /tmp/mckey_tx.log 2>&1 &", T);
    assert_eq!(rc, 0, "{out}");
    let mut received = 0;
    let _ = d.run_until(Duration::from_secs(20), |d| {
        while d.stack.poll_recv(qpn).is_some() {
            received += 1;
        }
        received >= 5
    });
    let log = wait_guest_log(&mut g, "/tmp/mckey_tx.log", "rc=", Duration::from_secs(30));
    let _ = writeln!(
        report,
        "--- e2. guest mckey -s log:
{log}
our stack received {received} datagrams"
    );
    // how many of them the guest put on the wire is checked against tap0's capture at the end
    // (once, under heavy host load, 6.12's mckey reported success with 1 of 5 on the wire)
    assert!(received >= 1, "we receive the guest's datagrams");
    let ev = d.leave(id, group, Duration::from_secs(5)).unwrap();
    assert_eq!(ev.map(|e| e.kind), Some(roce_cm::EventKind::MulticastLeft));
    let drops_before = d.stack.counters().dropped(roce_cm::DropReason::UnknownGroup);
    // The premise: the guest's mckey sends its five. Once (sid, 2026-12-07, a loaded host) it
    // joined and put none on the wire (the tap's capture); so it is asked again, at most once,
    // when its log does not say its transfers completed.
    let mut log2 = String::new();
    for attempt in 0..2 {
        let cmd =
            format!("(mckey -m 239.1.2.3 -b 198.18.0.2 -s -C 5; echo rc=$?) > /tmp/mckey_tx2_{attempt}.log 2>&1 &");
        let (rc, _) = g.guest_exec(&cmd, T);
        assert_eq!(rc, 0);
        log2 = wait_guest_log(&mut g, &format!("/tmp/mckey_tx2_{attempt}.log"), "rc=", Duration::from_secs(30));
        let _ = d.run_for(Duration::from_millis(500));
        if log2.contains("data transfers complete") {
            break;
        }
        let _ = writeln!(report, "the guest's mckey -s did not complete (attempt {attempt}):\n{log2}");
    }
    let mut late = 0;
    while d.stack.poll_recv(qpn).is_some() {
        late += 1;
    }
    let dropped = d.stack.counters().dropped(roce_cm::DropReason::UnknownGroup) - drops_before;
    let _ = writeln!(
        report,
        "after our leave the guest sent 5 more:
{log2}
delivered to us: {late}; counted unknown_group: {dropped}"
    );
    assert_eq!(late, 0, "nothing reaches our application after the leave");
    assert_eq!(d.send_errors, 0, "device send errors in case e");
    assert!(dropped >= 1, "the guest's datagrams after our leave are counted, not lost silently; its mckey:\n{log2}");

    let (tap, tap_mac) = g.end_and_finish();
    // tshark on tap0, only frames from our MAC (tap0's: the guest's mckey sends IGMP too): the
    // SA Delete of case b (MGID ::ffff:239.1.2.3) and our IGMP leave of 239.1.2.3.
    let tshark = common::tshark();
    let ours = harness::mac_string(&tap_mac);
    let run_tshark = |filter: &str| {
        let o = Command::new(&tshark).args(["-n", "-r"]).arg(&tap).args(["-Y", filter]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    let deletes = run_tshark(&format!(
        "eth.src == {ours} && infiniband.mad.method == 0x15 && infiniband.mcmemberrecord.mgid == ::ffff:239.1.2.3"
    ));
    let _ = writeln!(report, "--- tshark on tap0: SA Deletes of ::ffff:239.1.2.3 from {ours}:\n{deletes}");
    assert!(deletes.contains("SubnAdmDelete(MCMemberRecord)"), "{deletes}");
    let igmp = run_tshark(&format!("eth.src == {ours} && igmp"));
    let _ = writeln!(report, "--- tshark on tap0: IGMP from {ours}:\n{igmp}");
    assert!(igmp.contains("Leave group 239.1.2.3") || igmp.contains("Change to Include Mode"), "{igmp}");
    // case c: tap0 saw every Delete of ::ffff:239.1.2.4 that our capture holds
    let deletes_c = run_tshark(&format!(
        "eth.src == {ours} && infiniband.mad.method == 0x15 && infiniband.mcmemberrecord.mgid == ::ffff:239.1.2.4"
    ));
    let _ = writeln!(
        report,
        "--- tshark on tap0: SA Deletes of ::ffff:239.1.2.4 from {ours}: {}",
        deletes_c.lines().count()
    );
    assert_eq!(deletes_c.lines().count(), deletes_c_ours, "case c: Deletes on tap0 vs in our own capture");
    // case d: the corrupted frames really left, from our MAC, with a bad ICRC
    let frames = roce_decode::capture::read_file(&tap).expect("tap0.pcap");
    let bad = frames
        .iter()
        .filter(|f| {
            let j = roce_decode::decode::decode_ethernet(&f.data).json;
            j.get("eth").and_then(|e| e.get("src")).and_then(|v| v.as_str()) == Some(ours.as_str())
                && j.get("icrc").and_then(|v| v.as_str()) == Some("bad")
        })
        .count();
    let _ = writeln!(report, "--- tap0: {bad} frames from {ours} with a bad ICRC (case d sent {tries})");
    assert_eq!(bad as u64, tries, "case d: the corrupted tries on tap0");
    // e2: we received every datagram of the guest's first `mckey -s` (one source QP) that tap0
    // saw, and nothing of its second one after our leave
    let mut by_qp: Vec<(u32, usize)> = Vec::new();
    for f in &frames {
        let Ok(p) = roce_wire::frame::parse(&f.data) else { continue };
        if p.repr.ip.source() != std::net::IpAddr::from([198, 18, 0, 2])
            || p.repr.ip.destination() != std::net::IpAddr::from([239, 1, 2, 3])
        {
            continue;
        }
        let qp = p.repr.ext.deth.map_or(0, |d| d.src_qp);
        match by_qp.iter_mut().find(|(q, _)| *q == qp) {
            Some((_, n)) => *n += 1,
            None => by_qp.push((qp, 1)),
        }
    }
    let _ =
        writeln!(report, "--- tap0: the guest's multicast datagrams per source QP: {by_qp:?}; we received {received}");
    let on_wire = by_qp.first().map_or(0, |(_, n)| *n);
    assert_eq!(received, on_wire, "we receive every datagram of the guest's first mckey -s that tap0 saw");
    std::fs::write(art.join("report.txt"), &report).unwrap();
    println!("{report}");
}
