//! RMPP with the Linux kernel's MAD layer as the sender: `roce sa-agent` in the rxe guest
//! registers class 0x03 with rmpp_version 1 and writes each multi-segment GetTableResp as one
//! umad message; the guest kernel segments it, sends a window, waits for our ACKs and goes on
//! [mad_rmpp.c]. Our stack (the host side, tap0) reassembles it:
//! a. 12 groups joined (in-process), then `roce sa-query` GetTable prints all 12 MCMemberRecords
//!    (4 segments); 4 ServiceRecords registered with `roce sa-query -S --register`, then
//!    `roce sa-query -S` prints all 4 (4 segments);
//! b. a receive window of 1 (in-process): a window per segment, every ACK, the table whole;
//! c. a receiver that never ACKs (in-process, tests-only option): no table for us, and the
//!    guest kernel gives up on its send — the agent prints umad's status 110 (ETIMEDOUT);
//! d. over IPv4 the kernel cannot match our ACKs (mad.c `rcv_has_same_gid` reads a GID where
//!    rxe put the IPv4 header; spec/kernel-findings.md §3): the same ETIMEDOUT, and our typed
//!    timeout, on every kernel of the suite (`harness::GuestKernel::rmpp_ack_over_ipv4_matches`).
//!    a–c run over IPv6 (fd00::1 ▶ fd00::2); the joins, single MADs, over IPv4.
//! Asserted on the peer: the agent's log (the table sent as one message; no send error in a and
//! b, the ETIMEDOUT in c) and tshark on tap0, frames of our MAC and the guest's: the guest's
//! DATA segments (First/Last, segment numbers, PayloadLength) and our ACKs (SegmentNumber,
//! NewWindowLast). Needs root, qemu, `bash tests/interop/setup.sh` and the static `roce`
//! (tests/run-all.sh builds both). Artefacts: target/interop/artefacts/<kernel>/interop_rmpp/.

use crate::harness;

use crate::common;

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use crate::harness::{roce, static_roce, GuestBuilder};
use roce_cm::{EventKind, PortSpace, QpType, RmppError, RmppStats, SaTiming, Stack, StackConfig};
use roce_net::driver::Driver;
use roce_wire::mad::Method;
use roce_wire::mcmember::{JoinState, McMemberRecord};
use roce_wire::sa::{attr, SaData, SaMad};

const T: Duration = Duration::from_secs(60);
const GROUPS: u8 = 12;

fn wait_guest_log(g: &mut harness::Guest, path: &str, needle: &str, timeout: Duration) -> String {
    g.wait_for_output(&format!("cat {path} 2>/dev/null"), needle, timeout, T, Duration::from_millis(300))
}

/// Our stack on tap0: 198.18.0.1/24 and fd00::1/64; the SA (the guest's agent) at 198.18.0.2
/// or, with `v6`, fd00::2.
fn stack_on_tap0(timing: SaTiming, v6: bool) -> Driver<roce_net::raw::RawSocket> {
    let raw = roce_net::raw::RawSocket::open("tap0").expect("raw socket on tap0");
    let mac = raw.info.mac.expect("tap0 MAC");
    let mut cfg = StackConfig::new(mac, Ipv4Addr::new(198, 18, 0, 1), 24);
    cfg.ipv6.push(("fd00::1".parse().unwrap(), 64));
    cfg.sa = Some(if v6 { "fd00::2".parse().unwrap() } else { "198.18.0.2".parse().unwrap() });
    cfg.sa_timing = timing;
    // A seed of its own per stack: its TIDs differ from the last stack's (the guest's umad
    // refuses a response whose TID is still in flight, EINVAL).
    cfg.seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    Driver::new(raw, Stack::new(cfg))
}

/// Join `GROUPS` groups through the guest's agent; the joins stay (no leave).
fn join_groups() -> usize {
    let mut d = stack_on_tap0(SaTiming::default(), false);
    let now = d.now();
    let id = d.stack.create_id(PortSpace::Udp, QpType::Ud).unwrap();
    d.stack.bind_addr(id, SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)), 0)).unwrap();
    for i in 0..GROUPS {
        let g = IpAddr::V4(Ipv4Addr::new(239, 9, 0, i + 1));
        d.stack.join_multicast(now, id, g, JoinState::FULL_MEMBER).unwrap();
    }
    let mut joined = 0;
    let _ = d.run_until(Duration::from_secs(20), |d| {
        while let Some(e) = d.events.pop_front() {
            assert_eq!(e.kind, EventKind::MulticastJoin, "{e:?}");
            joined += 1;
        }
        joined == usize::from(GROUPS)
    });
    joined
}

/// GetTable of MCMemberRecords from an in-process stack with `timing`: the records (or the
/// error) and the receiver's counts.
type TableOutcome = (Result<usize, (roce_cm::Errno, Option<RmppError>)>, RmppStats, u64);

fn table_in_process(timing: SaTiming, v6: bool) -> TableOutcome {
    let mut d = stack_on_tap0(timing, v6);
    let req =
        SaMad::request(Method::GetTable, 0, attr::MC_MEMBER_RECORD, 0, SaData::mc_member(McMemberRecord::default()));
    let now = d.now();
    let h = d.stack.sa_query(now, req).unwrap();
    let mut res = None;
    let _ = d.run_until(Duration::from_secs(10), |d| {
        res = d.stack.poll_sa_result().filter(|r| r.handle == h);
        res.is_some()
    });
    let r = res.expect("the query ends");
    let out = match &r.result {
        Ok(_) => Ok(r.records(McMemberRecord::LEN).count()),
        Err(e) => Err((*e, r.rmpp_error)),
    };
    (out, d.stack.rmpp_stats(), d.send_errors)
}

#[test]
fn kernel_rmpp_sender_and_our_receiver() {
    let bin = static_roce();
    let mut g = GuestBuilder::new("interop_rmpp").binary(&bin, "roce").scenario("serve\n").boot();
    let art = g.artefacts.clone();
    let mut report = format!("kernel {}\n", g.kernel_version);

    let (rc, out) = g.guest_exec("roce sa-agent --device umad0 --duration 120 > /tmp/agent.log 2>&1 &", T);
    assert_eq!(rc, 0, "{out}");
    let ready = wait_guest_log(&mut g, "/tmp/agent.log", "registered agent", Duration::from_secs(30));
    assert!(ready.contains("rmpp_version 1"), "the agent registered with kernel RMPP: {ready}");

    // a. 12 groups, then the table through our CLI.
    let joined = g.in_netns(join_groups);
    assert_eq!(joined, usize::from(GROUPS), "every join answered");
    let t0 = std::time::Instant::now();
    let (rc, out) = g.run_in_netns(&roce("sa-query --iface tap0 -b fd00::1 --sa fd00::2 -v"));
    let _ = writeln!(report, "--- a. sa-query GetTable after {GROUPS} joins, exit {rc} ({:?})\n{out}", t0.elapsed());
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains(&format!("\n{GROUPS} records\n")), "{out}");
    assert!(out.contains("RMPP: 4 segments received, 2 ACKs sent (672 bytes"), "{out}");
    for i in 1..=GROUPS {
        assert!(out.contains(&format!("MGID....................::ffff:239.9.0.{i}\n")), "group {i}: {out}");
    }
    for i in 0..4u32 {
        let (rc, out) = g.run_in_netns(&roce(&format!(
            "sa-query --iface tap0 -b 198.18.0.1 --sa 198.18.0.2 -S --register --service-id {:#x} --service-name rmpp-{i}",
            0x5000 + i
        )));
        assert_eq!(rc, 0, "{out}");
    }
    let (rc, out) = g.run_in_netns(&roce("sa-query --iface tap0 -b fd00::1 --sa fd00::2 -S -v"));
    let _ = writeln!(report, "--- a. sa-query -S GetTable after 4 registrations, exit {rc}\n{out}");
    assert_eq!(rc, 0, "{out}");
    assert!(
        out.contains("\n4 records\n") && out.contains("RMPP: 4 segments received, 2 ACKs sent (704 bytes"),
        "{out}"
    );
    for i in 0..4 {
        assert!(out.contains(&format!("ServiceName.............rmpp-{i}\n")), "{out}");
    }

    // b. A window of one segment: an ACK per segment, the table whole.
    let timing = SaTiming { rmpp_window: 1, ..SaTiming::default() };
    let (res, st, send_errors) = g.in_netns(move || table_in_process(timing, true));
    let _ = writeln!(report, "--- b. window 1: {res:?} {st:?}");
    assert_eq!(res, Ok(usize::from(GROUPS)));
    assert_eq!((st.segments, st.acks, st.tables, st.aborts), (4, 4, 1, 0));
    assert_eq!(send_errors, 0);

    let (_, agent) = g.guest_exec("cat /tmp/agent.log", T);
    let _ = writeln!(report, "--- agent log after a and b:\n{agent}");
    assert!(agent.contains("one RMPP message, 4 segment(s), 672 data bytes"), "{agent}");
    assert!(agent.contains("one RMPP message, 4 segment(s), 704 data bytes"), "{agent}");
    assert!(!agent.contains("send completion status"), "the kernel completed every send (our ACKs came):\n{agent}");

    // c. A receiver that never ACKs: our query ends in the reassembly's typed timeout, and the
    //    guest kernel's send times out (2 s per try, RMPP_RETRIES retries): umad status 110.
    let timing = SaTiming { rmpp_ack: false, ..SaTiming::default() };
    let (res, st, _) = g.in_netns(move || table_in_process(timing, true));
    let _ = writeln!(report, "--- c. no ACKs: {res:?} {st:?}");
    assert!(matches!(res, Err((roce_cm::Errno::ETIMEDOUT, Some(RmppError::TimedOut { received: 1 })))), "{res:?}");
    assert_eq!(st.acks, 0);
    let agent = wait_guest_log(&mut g, "/tmp/agent.log", "send completion status 110", Duration::from_secs(30));
    let _ = writeln!(report, "--- agent log after c:\n{agent}");
    assert!(agent.contains("send completion status 110 (ETIMEDOUT)"), "the kernel's RMPP send timed out:\n{agent}");

    // d. Over IPv4 the guest kernel never matches our ACK to its send: mad.c
    //    `rcv_has_same_gid` compares the send's destination GID with the raw GRH buffer of the
    //    received ACK, which for a RoCEv2 IPv4 packet holds the IPv4 header, not a GID. It
    //    sends segment 1 only, resends it every 2 s, and gives up: umad status 110 again. Our
    //    stack ACKs each copy and ends in the reassembly's typed timeout.
    //    (`GuestKernel::rmpp_ack_over_ipv4_matches`: false on every kernel of the suite; where
    //    it is true the table must come whole over IPv4 too.)
    let (_, before) = g.guest_exec("grep -c 'send completion status 110' /tmp/agent.log", T);
    let (res, st, _) = g.in_netns(move || table_in_process(SaTiming::default(), false));
    let _ = writeln!(report, "--- d. IPv4: {res:?} {st:?}");
    let k = harness::kernel();
    if k.rmpp_ack_over_ipv4_matches {
        assert_eq!(res, Ok(usize::from(GROUPS)), "{k}: the table over IPv4");
    } else {
        assert!(
            matches!(res, Err((roce_cm::Errno::ETIMEDOUT, Some(RmppError::TimedOut { received: 1 })))),
            "{k}: {res:?}"
        );
        assert!(st.acks >= 1, "we ACKed segment 1: {st:?}");
        let want = before.trim().parse::<u32>().unwrap_or(0) + 1;
        let end = std::time::Instant::now() + Duration::from_secs(30);
        let mut after = 0;
        while after < want && std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(500));
            let (_, n) = g.guest_exec("grep -c 'send completion status 110' /tmp/agent.log", T);
            after = n.trim().parse().unwrap_or(0);
        }
        let _ = writeln!(report, "agent's ETIMEDOUT lines: {} before, {after} after", before.trim());
        assert!(after >= want, "{k}: the kernel's send over IPv4 times out despite our ACKs");
    }

    let (tap, tap_mac) = g.end_and_finish();
    let ours = harness::mac_string(&tap_mac);
    let fields = |filter: &str, f: &[&str]| harness::tshark_fields(&tap, filter, f);
    let data = fields(
        &format!("eth.dst == {ours} && infiniband.rmpp.rmpptype == 1"),
        &[
            "infiniband.mad.transactionid",
            "infiniband.rmpp.rmppflags",
            "infiniband.rmpp.segmentnumber",
            "infiniband.rmpp.payloadlength",
        ],
    );
    let acks = fields(
        &format!("eth.src == {ours} && infiniband.rmpp.rmpptype == 2"),
        &["infiniband.mad.transactionid", "infiniband.rmpp.segmentnumber", "infiniband.rmpp.newwindowlast"],
    );
    let _ = writeln!(report, "--- tshark: the guest's DATA segments to {ours}\n{data}--- our ACKs\n{acks}");
    std::fs::write(art.join("report.txt"), &report).unwrap();
    println!("{report}");
    // The 12-record table: 4 segments, First on 1 (PayloadLength 4 × 20 + 672 = 752), Last on 4
    // (20 + 72 = 92), 0 between; then our ACKs (1, 65) and (4, 65); with the window of 1 every
    // segment ACKed, (1, 2) … (4, 4).
    let rows = |text: &str| -> Vec<Vec<u64>> {
        let num = |v: &str| v.strip_prefix("0x").map_or_else(|| v.parse().ok(), |h| u64::from_str_radix(h, 16).ok());
        text.lines().map(|l| l.split('\t').skip(1).filter_map(num).collect()).collect()
    };
    let (data_rows, ack_rows) = (rows(&data), rows(&acks));
    for want in [[3, 1, 752], [1, 2, 0], [1, 3, 0], [5, 4, 92]] {
        assert!(data_rows.iter().any(|r| r[..] == want), "DATA {want:?} in\n{data}");
    }
    for want in [[1, 65], [4, 65], [1, 2], [2, 3], [3, 4], [4, 4]] {
        assert!(ack_rows.iter().any(|r| r[..] == want), "ACK {want:?} in\n{acks}");
    }
}

/// What the host-side SA's RMPP sender did while it ran.
type SenderOutcome = (roce_sa::RmppSendStats, roce_sa::SaStats, u64);

/// Our SA on tap0 (198.18.0.1 and fd00::1), holding `GROUPS_BIG` groups and `SERVICES_BIG`
/// ServiceRecords, answering until `stop` is set; then its sender's counts.
fn serve_tables(
    g: &harness::Guest,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<SenderOutcome> {
    let d = g.in_netns(|| stack_on_tap0(SaTiming::default(), true));
    let mut sa = roce_sa::SaResponder::with_defaults();
    common::sa_fill::fill_groups(&mut sa, GROUPS_BIG);
    common::sa_fill::fill_services(&mut sa, SERVICES_BIG);
    let mut d = d.with_sa(sa);
    std::thread::spawn(move || {
        let _ = d.run_until(Duration::from_secs(240), |_| stop.load(std::sync::atomic::Ordering::SeqCst));
        (*d.rmpp.stats(), *d.sa.as_ref().unwrap().stats(), d.send_errors)
    })
}

const GROUPS_BIG: u16 = 300;
const SERVICES_BIG: u16 = 100;

/// Our windowed RMPP sender (roce-sa) into the kernel's RMPP receiver: `roce sa-agent --query`
/// in the guest sends one SubnAdmGetTable through umad; the kernel takes our segments in its
/// windows (1, then 64 at a time [mad_rmpp.c `start_rmpp`, `continue_rmpp`]), ACKs each
/// window's end, and hands umad the whole table:
/// a. 300 MCMemberRecords over IPv6: 84 segments, the guest's ACKs (1, 65), (65, 129) and
///    (84, 129); our segments 2..65 only after the first ACK, 66..84 only after the second;
/// b. 100 ServiceRecords over IPv6: 88 segments, the same windows;
/// c. over IPv4 the guest kernel cannot match our answer to its request (mad.c
///    `rcv_has_same_gid` reads the GRH area where rxe put the IPv4 header): since the
///    CVE-2026-68425 fix `ib_mad_complete_recv` matches each DATA segment before reassembly,
///    so segment 1 is dropped unACKed and the send ends ETIMEDOUT
///    (spec/kernel-findings.md §3b; `GuestKernel::rmpp_ack_over_ipv4_matches`).
/// Asserted on the peer: the guest tool's output and exit status, and tshark on tap0.
#[test]
fn our_rmpp_sender_and_the_kernels_receiver() {
    let bin = static_roce();
    let mut g = GuestBuilder::new("interop_rmpp_send").binary(&bin, "roce").scenario("serve\n").boot();
    let art = g.artefacts.clone();
    let mut report = format!("kernel {}\n", g.kernel_version);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server = serve_tables(&g, stop.clone());

    // a. MCMemberRecords.
    let (rc, out) = g.guest_exec("roce sa-agent --query mcmember --sa fd00::1 -b fd00::2 2>&1; echo rc=$?", T);
    let _ = writeln!(report, "--- a. guest: roce sa-agent --query mcmember --sa fd00::1 -b fd00::2 (exec {rc})\n{out}");
    std::fs::write(art.join("report.txt"), &report).unwrap();
    assert!(out.contains("rc=0"), "{out}");
    assert!(out.contains(&format!("\n{GROUPS_BIG} records\n")), "{out}");
    assert_eq!(out.matches("MCMemberRecord member dump:").count(), usize::from(GROUPS_BIG), "{out}");
    for i in [0u16, 1, 150, 299] {
        let mgid = common::sa_fill::group(i);
        assert!(out.contains(&format!("MGID....................{mgid}\n")), "group {i}: {out}");
    }
    // b. ServiceRecords.
    let (rc, out) = g.guest_exec("roce sa-agent --query service --sa fd00::1 -b fd00::2 2>&1; echo rc=$?", T);
    let _ = writeln!(report, "--- b. guest: roce sa-agent --query service --sa fd00::1 -b fd00::2 (exec {rc})\n{out}");
    std::fs::write(art.join("report.txt"), &report).unwrap();
    assert!(out.contains("rc=0"), "{out}");
    assert!(out.contains(&format!("\n{SERVICES_BIG} records\n")), "{out}");
    for i in [0u16, 99] {
        assert!(out.contains(&format!("ServiceName.............svc-{i}\n")), "service {i}: {out}");
    }
    // c. IPv4.
    let k = harness::kernel();
    let (rc, out) = g.guest_exec("roce sa-agent --query mcmember --sa 198.18.0.1 -b 198.18.0.2 2>&1; echo rc=$?", T);
    let _ = writeln!(
        report,
        "--- c. guest: roce sa-agent --query mcmember --sa 198.18.0.1 -b 198.18.0.2 (exec {rc})\n{out}"
    );
    std::fs::write(art.join("report.txt"), &report).unwrap();
    if k.rmpp_ack_over_ipv4_matches {
        assert!(out.contains("rc=0") && out.contains(&format!("\n{GROUPS_BIG} records\n")), "{k}: {out}");
    } else {
        assert!(out.contains("rc=1") && out.contains("status 110 (ETIMEDOUT)"), "{k}: {out}");
    }

    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (sent, sa_stats, send_errors) = server.join().expect("the SA thread");
    let _ = writeln!(report, "--- our SA: {sent:?}\n{sa_stats:?}\nsend errors {send_errors}");
    std::fs::write(art.join("report.txt"), &report).unwrap();
    assert_eq!(send_errors, 0);
    assert_eq!((sent.aborted_bad_ack, sent.aborted_by_peer, sent.stopped_by_peer), (0, 0, 0), "{sent:?}");
    assert!(sent.completed >= 2, "both IPv6 tables acknowledged to their last segment: {sent:?}");
    if k.rmpp_ack_over_ipv4_matches {
        assert_eq!(sent.timed_out, 0, "{sent:?}");
    } else {
        // No ACK ever came over IPv4: each try of the guest's request was a transfer that
        // timed out after its resends, ended with an ABORT TMR.
        assert!(sent.timed_out >= 1 && sent.segments_resent >= 3, "{sent:?}");
    }

    let (tap, tap_mac) = g.end_and_finish();
    let ours = harness::mac_string(&tap_mac);
    let fields = |filter: &str, f: &[&str]| harness::tshark_fields(&tap, filter, f);
    // Every RMPP frame of the IPv6 exchanges in capture order: who sent it, type, segment
    // number, NewWindowLast (ACKs) and the attribute.
    let rmpp = fields(
        "ipv6 && infiniband.rmpp.rmpptype",
        &[
            "eth.src",
            "infiniband.rmpp.rmpptype",
            "infiniband.rmpp.segmentnumber",
            "infiniband.rmpp.newwindowlast",
            "infiniband.mad.attributeid",
        ],
    );
    let _ =
        writeln!(report, "--- tshark: RMPP over IPv6 on tap0 (src, type, segment, NewWindowLast, attribute)\n{rmpp}");
    // Over IPv4 (c): our DATA segment 1, its resends and the ABORT TMR; an ACK from the guest
    // only where the kernel matches RoCEv2 IPv4 answers.
    let v4 = fields(
        "ip && infiniband.rmpp.rmpptype",
        &["eth.src", "infiniband.rmpp.rmpptype", "infiniband.rmpp.rmppstatus"],
    );
    let _ = writeln!(report, "--- tshark: RMPP over IPv4 on tap0 (src, type, status)\n{v4}");
    if !k.rmpp_ack_over_ipv4_matches {
        assert!(!v4.lines().any(|l| !l.starts_with(&ours) && l.contains("\t0x02")), "{k}: no ACK over IPv4:\n{v4}");
        assert!(v4.lines().any(|l| l.starts_with(&ours) && l.ends_with("\t0x04\t0x7e")), "our ABORT TMR (126):\n{v4}");
    }
    // Over IPv4 (c): our DATA segment 1, its resends and the ABORT TMR; an ACK from the guest
    // only where the kernel matches RoCEv2 IPv4 answers.
    let v4 = fields(
        "ip && infiniband.rmpp.rmpptype",
        &["eth.src", "infiniband.rmpp.rmpptype", "infiniband.rmpp.rmppstatus"],
    );
    let _ = writeln!(report, "--- tshark: RMPP over IPv4 on tap0 (src, type, status)\n{v4}");
    if !k.rmpp_ack_over_ipv4_matches {
        assert!(!v4.lines().any(|l| !l.starts_with(&ours) && l.contains("\t0x02")), "{k}: no ACK over IPv4:\n{v4}");
        assert!(v4.lines().any(|l| l.starts_with(&ours) && l.ends_with("\t0x04\t0x7e")), "our ABORT TMR (126):\n{v4}");
    }
    let num = |v: &str| v.strip_prefix("0x").map_or_else(|| v.parse::<u64>().ok(), |h| u64::from_str_radix(h, 16).ok());
    for (attribute, segments) in [(0x0038u64, 84u64), (0x0031, 88)] {
        // (ours, type, segment, newwin) in order, for this table.
        let rows: Vec<(bool, u64, u64, u64)> = rmpp
            .lines()
            .filter_map(|l| {
                let c: Vec<&str> = l.split('\t').collect();
                (c.len() >= 5 && num(c[4]) == Some(attribute))
                    .then(|| (c[0] == ours, num(c[1]).unwrap_or(0), num(c[2]).unwrap_or(0), num(c[3]).unwrap_or(0)))
            })
            .collect();
        let data: Vec<u64> = rows.iter().filter(|r| r.0 && r.1 == 1).map(|r| r.2).collect();
        let acks: Vec<(u64, u64)> = rows.iter().filter(|r| !r.0 && r.1 == 2).map(|r| (r.2, r.3)).collect();
        let mut distinct = data.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct, (1..=segments).collect::<Vec<_>>(), "0x{attribute:04x}: every segment: {data:?}");
        // Resent only if a window's ACK was late (a resend after 500 ms, or the guest's retry of
        // its request): counted in the report, the windows below must hold either way.
        let _ =
            writeln!(report, "0x{attribute:04x}: {} DATA frames for {segments} segments; ACKs {acks:?}", data.len());
        let mut want = [(1, 65), (65, 129), (segments, 129)].into_iter().peekable();
        for a in &acks {
            if want.peek() == Some(a) {
                want.next();
            }
        }
        assert_eq!(
            want.next(),
            None,
            "0x{attribute:04x}: the kernel's windows (1, 65), (65, 129), ({segments}, 129) in {acks:?}"
        );
        // The windows held: nothing past 1 before the first ACK, nothing past 65 before the second.
        let ack_of = |seg: u64| rows.iter().position(|r| !r.0 && r.1 == 2 && r.2 == seg).unwrap();
        let (first_ack, second_ack) = (ack_of(1), ack_of(65));
        assert!(rows[..first_ack].iter().all(|r| !(r.0 && r.1 == 1 && r.2 > 1)), "0x{attribute:04x}: window 1");
        assert!(rows[..second_ack].iter().all(|r| !(r.0 && r.1 == 1 && r.2 > 65)), "0x{attribute:04x}: window 65");
    }
    std::fs::write(art.join("report.txt"), &report).unwrap();
    println!("{report}");
}
