//! Debian's unmodified rdma-core programs on the host, over roce's drop-in libraries
//! (`roce exec`), against a Linux kernel rxe peer and its own rdma-core programs (one guest
//! boot; spec/capi.md). What is asserted is what the guest observed:
//! a. the mission, from C: the host's `mckey -s` joins through `roce sa-agent` on the guest's
//!    umad, sends five datagrams that the guest kernel's `mckey` receives, and on exit its
//!    `rdma_leave_multicast` puts a SubnAdmDelete (mask 0x10003, JoinState FullMember, from
//!    our address) on the wire that the agent receives and answers; the guest's `rcvd_pkts`
//!    grew by exactly the RoCEv2 frames our capture holds for it;
//! b. the same as nobody over the udp transport;
//! c. the host's `mckey` receives what the guest's `mckey -s` sends;
//! d. `udaddy` both roles against the guest's (SIDR, then UD datagrams both ways);
//! e. the host's `mckey` killed with SIGKILL while joined: the agent receives and answers its
//!    SubnAdmDelete;
//! f. connected mode (issue 35): `rping -V` (SEND, RDMA READ, RDMA WRITE, every byte checked;
//!    again with `-q`, each side's own QP and `rdma_establish`) and `ucmatose`, each in both
//!    roles against the guest's, and the four pingpong examples in both roles against the
//!    guest's, with the guest's rxe counters: packets both ways, no retry, no sequence error,
//!    no duplicate; `ibv_rc_pingpong -N` (the work-request builder) both roles too;
//! h. memory windows (tests/capi/mw.c: a type 2 window bound by a work request, a type 1 by
//!    `ibv_bind_mw`, READs through both, a SEND with invalidate, a READ refused after it; then
//!    a READ of a region in the server's second PD, refused by the serving QP's PD check),
//!    both directions, on every kernel (rxe has windows since 5.13);
//! g. ATOMIC WRITE through the work-request builder (issue 37), one C program
//!    (tests/capi/atomwr.c) on our libraries and on the guest's real ones, both directions:
//!    where the guest's rxe has the opcode (6.2 on) every case as between two roce ends and the
//!    word in the guest's memory; where it has not (6.1), the kernel's real answers (no answer
//!    to ours: RETRY_EXC_ERR; its own: LOC_QP_OP_ERR) and the other side's word untouched.
//! i. XRC (issue 37), which no rxe has (its rxe_opcode[] holds no XRC opcode; its provider no
//!    `open_xrcd`): the guest's `ibv_xsrq_pingpong` in both roles gets libibverbs' answer,
//!    EOPNOTSUPP from `ibv_open_xrcd`, and our XRC requests (SEND Only with its XRCETH, as
//!    Debian's `ibv_xsrq_pingpong` over roce sends them: tests/capi/rc.rs) are dropped by the
//!    guest's rxe uncounted (`rcvd_pkts` unchanged), as the acceptance predictor says
//!    (`UnknownOpcode`, spec/rxe-acceptance.md), and answered with nothing. XRC through the CM:
//!    the guest kernel's CM takes our `rdma_xclient -c x`'s REQ (transport type 3, extended
//!    type 1) as XRC and hands it to its `rdma_xserver -c x` as a CONNECT_REQUEST, whose
//!    librdmacm then cannot make the target QP (EOPNOTSUPP); its CM rejects us, reason 28.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::debian;
use crate::expect::{ATOMWR_CLIENT, ATOMWR_FLUSH, ATOMWR_SERVER, MW_CLIENT, MW_SERVER};
use crate::harness::{self, as_nobody, rdma_stat, roce, static_roce, Guest, GuestBuilder};

const T: Duration = Duration::from_secs(60);

fn wait_guest_log(g: &mut Guest, path: &str, needle: &str, timeout: Duration) -> String {
    g.wait_for_output(&format!("cat {path} 2>/dev/null"), needle, timeout, T, Duration::from_millis(300))
}

/// `roce exec` on tap0 with `opts`, running Debian's `program` with `args`.
fn exec(opts: &str, program: &str, args: &str) -> String {
    roce(&format!("exec --iface tap0 {opts} -- {} {args}", debian::bin(program).display()))
}

/// Wait until the guest's `program` listens (an rdma_cm id in LISTEN): a TCG guest on a
/// loaded host can take longer than any fixed pause, and a request before the listen is
/// answered "unreachable" (SIDR) or rejected.
fn guest_listening(g: &mut Guest, program: &str) {
    let l = g.wait_for_output("rdma res show cm_id", "LISTEN", Duration::from_secs(60), T, Duration::from_millis(200));
    if !l.contains("LISTEN") {
        // Its own words, where a test keeps them (/tmp/<program>.log), say why.
        let (_, log) = g.guest_exec(&format!("cat /tmp/{program}.log /tmp/aw.log /tmp/mw.log 2>&1; true"), T);
        panic!("the guest's {program} does not listen:\n{l}\nits log:\n{log}");
    }
}

/// Our server `cmd` (a `roce exec` of tests/capi's atomwr or mw, which print `listening` once
/// they listen), started in the namespace under a 60 s KILL timeout with its output in
/// `log`; returns once that line is there (at most 20 s), so that the guest's client never
/// races its start.
fn our_listening_server(g: &Guest, cmd: &str, log: &std::path::Path) -> std::process::Child {
    let srv = g.spawn_in_netns(&format!("exec timeout -s KILL 60 {cmd} > {} 2>&1", log.display()));
    let end = Instant::now() + Duration::from_secs(20);
    while Instant::now() < end && !std::fs::read_to_string(log).unwrap_or_default().contains("listening") {
        std::thread::sleep(Duration::from_millis(50));
    }
    srv
}

/// (exit code, output) of a server started by [`our_listening_server`], once it has ended.
fn our_server_output(cmd: &str, srv: std::process::Child, log: &std::path::Path) -> (i32, String) {
    let (rc, _) = harness::wait_tool(cmd, srv);
    let out = std::fs::read_to_string(log).unwrap_or_else(|e| format!("({}: {e})", log.display()));
    harness::assert_no_send_errors(cmd, &out);
    (rc, out)
}

fn rxe_stats(g: &mut Guest) -> String {
    std::thread::sleep(harness::HW_STATS_LIFESPAN);
    g.guest_exec("rdma statistic show 2>&1", T).1
}

/// RoCEv2 frames in our capture addressed to the guest or to `group` (what its rxe counts).
fn frames_for_guest(pcap: &std::path::Path, group: &str) -> usize {
    let frames = roce_decode::capture::read_file(pcap).unwrap_or_else(|e| panic!("{}: {e}", pcap.display()));
    frames
        .iter()
        .filter(|f| {
            let j = roce_decode::decode::decode_ethernet(&f.data).json;
            let dst = j.get("ip").and_then(|i| i.get("dst")).and_then(|v| v.as_str()).unwrap_or("");
            j.get("kind").and_then(|k| k.as_str()) == Some("rocev2") && (dst == "198.18.0.2" || dst == group)
        })
        .count()
}

/// The agent's log lines for `group`'s Delete from `port_gid`, and whether it answered.
fn agent_delete(agent: &str, group: &str, port_gid: &str) -> Option<String> {
    agent
        .lines()
        .find(|l| {
            l.contains("<- SubnAdmDelete(MCMemberRecord)")
                && l.contains(&format!("MGID=::ffff:{group}"))
                && l.contains(&format!("PortGID={port_gid}"))
        })
        .map(str::to_string)
}

/// The guest's mckey receiving `count` datagrams of `group` in the background, once its IP
/// membership (IGMP) is up; its log in /tmp/<tag>.log.
fn guest_receiver(g: &mut Guest, group: &str, tag: &str, report: &mut String) {
    let (rc, out) =
        g.guest_exec(&format!("(mckey -m {group} -b 198.18.0.2 -C 5; echo rc=$?) > /tmp/{tag}.log 2>&1 &"), T);
    assert_eq!(rc, 0, "{out}");
    let hex: String = group.split('.').rev().map(|o| format!("{:02X}", o.parse::<u8>().unwrap())).collect();
    let igmp = wait_guest_log(g, "/proc/net/igmp", &hex, Duration::from_secs(30));
    assert!(igmp.contains(&hex), "the guest's mckey joined {group}: {igmp}");
    let _ = writeln!(report, "the guest's mckey joined {group} ({hex} in /proc/net/igmp)");
    std::thread::sleep(Duration::from_millis(500));
}

#[test]
fn debians_mckey_and_udaddy_over_roce_against_the_kernel() {
    // Built per kernel: the kernels' runs overlap (tests/run-all.sh).
    let aw_dir = harness::interop_dir().join(format!("atomwr-{}", harness::kernel().name));
    std::fs::create_dir_all(&aw_dir).unwrap();
    // Linked against Debian's own libraries (their symbol versions), to run on the guest's.
    let atomwr = debian::build_c_for_both(&aw_dir, "atomwr", include_str!("../capi/atomwr.c"));
    let mw = debian::build_c_for_both(&aw_dir, "mw", include_str!("../capi/mw.c"));
    let mut g = GuestBuilder::new("interop_capi")
        .binary(static_roce(), "roce")
        .binary(&atomwr, "atomwr")
        .binary(&mw, "mw")
        .scenario("serve\n")
        .boot();
    let art = g.artefacts.clone();
    let mut report = format!("boot_time_s {:.2}\n", g.boot_time.as_secs_f64());
    let (rc, out) = g.guest_exec("roce sa-agent --device umad0 --duration 300 > /tmp/agent.log 2>&1 &", T);
    assert_eq!(rc, 0, "{out}");
    let ready = wait_guest_log(&mut g, "/tmp/agent.log", "registered agent", Duration::from_secs(30));
    assert!(ready.contains("registered agent"), "the agent registered on umad0: {ready}");

    // a. Raw transport: our mckey -s into the guest's mckey; the leave's Delete answered.
    guest_receiver(&mut g, "239.1.2.3", "mk_a", &mut report);
    let before = rxe_stats(&mut g);
    let pcap = art.join("mckey_a.pcap");
    let cmd = exec(
        &format!("-I 198.18.0.1 --transport raw --sa 198.18.0.2 --pcap {}", pcap.display()),
        "mckey",
        "-m 239.1.2.3 -s -C 5",
    );
    let (rc, out) = g.run_in_netns(&cmd);
    let _ = writeln!(report, "--- a. {cmd}\nexit {rc}\n{out}");
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("mckey: joined dgid: ::ffff:239.1.2.3") && out.contains("data transfers complete"), "{out}");
    let log = wait_guest_log(&mut g, "/tmp/mk_a.log", "rc=", Duration::from_secs(30));
    let _ = writeln!(report, "guest mckey:\n{log}");
    assert!(log.contains("data transfers complete") && log.contains("rc=0"), "the guest received our 5:\n{log}");
    let after = rxe_stats(&mut g);
    let sent = frames_for_guest(&pcap, "239.1.2.3");
    let got = rdma_stat(&after, "rcvd_pkts") - rdma_stat(&before, "rcvd_pkts");
    let _ = writeln!(report, "rcvd_pkts +{got}; our capture holds {sent} RoCEv2 frames for the guest and the group");
    assert_eq!(got as usize, sent, "the guest's rxe counted every frame we sent it\n{before}\n{after}");
    let agent = g.guest_exec("cat /tmp/agent.log", T).1;
    let del = agent_delete(&agent, "239.1.2.3", "::ffff:198.18.0.1").unwrap_or_else(|| panic!("no Delete:\n{agent}"));
    assert!(del.contains("mask=0x10003") && del.contains("JoinState=FullMember"), "{del}");
    assert!(agent.contains("-> SubnAdmDeleteResp(MCMemberRecord)"), "{agent}");
    let _ = writeln!(report, "agent: {del}");

    // b. The same as nobody on the udp transport.
    guest_receiver(&mut g, "239.1.2.4", "mk_b", &mut report);
    let cmd = as_nobody(&exec("-I 198.18.0.1 --transport udp --sa 198.18.0.2", "mckey", "-m 239.1.2.4 -s -C 5"));
    let (rc, out) = g.run_in_netns(&cmd);
    let _ = writeln!(report, "--- b. {cmd}\nexit {rc}\n{out}");
    assert_eq!(rc, 0, "{out}");
    let log = wait_guest_log(&mut g, "/tmp/mk_b.log", "rc=", Duration::from_secs(30));
    assert!(log.contains("data transfers complete") && log.contains("rc=0"), "udp: the guest received our 5:\n{log}");
    let agent = g.guest_exec("cat /tmp/agent.log", T).1;
    let del =
        agent_delete(&agent, "239.1.2.4", "::ffff:198.18.0.1").unwrap_or_else(|| panic!("udp: no Delete:\n{agent}"));
    assert!(del.contains("mask=0x10003") && del.contains("JoinState=FullMember"), "{del}");

    // c. The guest's mckey -s into our mckey (raw; IGMP and the SA join on our side). Ours
    //    waits for one datagram: the guest's mckey posts its five unsignalled and destroys its
    //    QP at once, and 7.2's rxe has been seen to put only two of them on the wire.
    let cmd = exec("-I 198.18.0.1 --transport raw --sa 198.18.0.2", "mckey", "-m 239.1.2.5 -C 1");
    let rx = g.spawn_in_netns(&format!("exec timeout -s KILL 60 {cmd}"));
    std::thread::sleep(Duration::from_secs(2));
    let (rc, out) = g.guest_exec("mckey -m 239.1.2.5 -b 198.18.0.2 -s -C 5 2>&1; echo rc=$?", T);
    let (rx_rc, rx_out) = harness::wait_tool(&cmd, rx);
    let _ = writeln!(report, "--- c. guest mckey -s (exec rc {rc}):\n{out}\nours ({cmd}), exit {rx_rc}:\n{rx_out}");
    assert!(out.contains("rc=0"), "{out}");
    assert_eq!(rx_rc, 0, "{rx_out}");
    assert!(rx_out.contains("data transfers complete") && rx_out.contains("return status 0"), "{rx_out}");

    // d. udaddy: the guest's server, our client; then ours, the guest's client.
    let (rc, out) = g.guest_exec("(udaddy -C 10; echo rc=$?) > /tmp/udaddy_srv.log 2>&1 &", T);
    assert_eq!(rc, 0, "{out}");
    guest_listening(&mut g, "udaddy");
    let cmd = exec("-I 198.18.0.1 --transport raw", "udaddy", "-s 198.18.0.2 -b 198.18.0.1 -C 10");
    let (rc, out) = g.run_in_netns(&cmd);
    let log = wait_guest_log(&mut g, "/tmp/udaddy_srv.log", "rc=", Duration::from_secs(30));
    let _ = writeln!(report, "--- d1. {cmd}\nexit {rc}\n{out}\nguest udaddy server:\n{log}");
    assert_eq!(rc, 0, "{out}");
    assert!(
        out.contains("data transfers complete") && log.contains("data transfers complete") && log.contains("rc=0"),
        "{out}\n{log}"
    );
    let cmd = exec("-I 198.18.0.1 --transport raw", "udaddy", "-b 198.18.0.1 -C 10");
    let server = g.spawn_in_netns(&format!("exec timeout -s KILL 60 {cmd}"));
    std::thread::sleep(Duration::from_secs(1));
    let (grc, glog) = g.guest_exec("udaddy -s 198.18.0.1 -C 10 2>&1; echo rc=$?", T);
    let (rc, out) = harness::wait_tool(&cmd, server);
    let _ = writeln!(report, "--- d2. {cmd}\nexit {rc}\n{out}\nguest udaddy -s 198.18.0.1 (rc {grc}):\n{glog}");
    assert_eq!(rc, 0, "{out}");
    assert!(glog.contains("data transfers complete") && glog.contains("rc=0"), "{glog}");

    // e. SIGKILL while joined: the watcher's Delete reaches the agent, which answers it.
    let cmd = exec("-I 198.18.0.1 --transport raw --sa 198.18.0.2", "mckey", "-m 239.1.2.6 -C 5");
    let child = g.spawn_in_netns(&format!("exec {cmd}"));
    let end = Instant::now() + Duration::from_secs(30);
    while !g.guest_exec("cat /tmp/agent.log", T).1.contains("MGID=::ffff:239.1.2.6") && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(200));
    }
    let killed = Instant::now();
    // SAFETY: kill(2) on our child (`sh -c exec …` and `roce exec` exec the program).
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGKILL) }, 0);
    let _ = child.wait_with_output();
    let agent = wait_guest_log(&mut g, "/tmp/agent.log", "MGID=::ffff:239.1.2.6 PortGID", Duration::from_secs(1));
    let mut del = agent_delete(&agent, "239.1.2.6", "::ffff:198.18.0.1");
    let mut agent = agent;
    while del.is_none() && killed.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(200));
        agent = g.guest_exec("cat /tmp/agent.log", T).1;
        del = agent_delete(&agent, "239.1.2.6", "::ffff:198.18.0.1");
    }
    let _ = writeln!(
        report,
        "--- e. SIGKILL: the agent saw {del:?} within {:.1} s of the kill",
        killed.elapsed().as_secs_f64()
    );
    std::fs::write(art.join("report.txt"), &report).unwrap();
    let del = del.unwrap_or_else(|| panic!("no Delete for 239.1.2.6 after SIGKILL:\n{agent}"));
    xrc_refused_by_the_guest(&mut g, &art, &mut report);
    connected_programs(&mut g, &art, &mut report);
    atomic_write_both_ways(&mut g, &art, &atomwr, &mut report);
    memory_windows_both_ways(&mut g, &art, &mw, &mut report);
    std::fs::write(art.join("report.txt"), &report).unwrap();
    assert!(del.contains("mask=0x10003") && del.contains("JoinState=FullMember"), "{del}");
    let answered = agent.lines().filter(|l| l.contains("-> SubnAdmDeleteResp(MCMemberRecord)")).count();
    assert!(answered >= 3, "the agent answered the three Deletes (a, b, e):\n{agent}");
    g.signal("end");
    g.finish();
    println!("{report}");
}

/// f. Debian's connected-mode programs over roce against the guest's, both roles.
fn connected_programs(g: &mut Guest, art: &std::path::Path, report: &mut String) {
    use crate::pingpong::{assert_results, check_counters, counters, listening, opts};
    let ours = "-I 198.18.0.1 --transport raw";
    // rping and ucmatose: the guest serves, then ours does.
    // What each role prints when it succeeded: rping's server its DISCONNECT EVENT (its main
    // thread waits for it); rping's client exits 0 (-V: no "data mismatch") and may end before
    // its CM thread prints the event.
    for (program, server, client, want_server, want_client) in [
        ("rping", "-s -a {S} -C 10 -V -S 3000", "-c -a {S} -C 10 -V -S 3000", "server DISCONNECT EVENT", ""),
        // -q: each side's own QP (ibv_create_qp, rdma_init_qp_attr), rdma_establish's RTU.
        ("rping", "-s -q -a {S} -C 10 -V -S 3000", "-c -q -a {S} -C 10 -V -S 3000", "server DISCONNECT EVENT", ""),
        ("ucmatose", "-C 10", "-s {S} -C 10", "return status 0", "return status 0"),
    ] {
        let (c0, _) = counters(g);
        let guest_srv = server.replace("{S}", "198.18.0.2");
        let (rc, out) = g.guest_exec(&format!("({program} {guest_srv}; echo rc=$?) > /tmp/{program}.log 2>&1 &"), T);
        assert_eq!(rc, 0, "{out}");
        guest_listening(g, program);
        let cmd = exec(ours, program, &client.replace("{S}", "198.18.0.2"));
        let (rc, out) = g.run_in_netns(&format!("timeout -s KILL 120 {cmd}"));
        let log = wait_guest_log(g, &format!("/tmp/{program}.log"), "rc=", Duration::from_secs(60));
        let (c1, stats) = counters(g);
        let _ = writeln!(report, "--- f. guest {program} {guest_srv}:\n{log}\nours: {cmd}\nexit {rc}\n{out}");
        std::fs::write(art.join("report.txt"), &*report).unwrap();
        assert!(rc == 0 && out.contains(want_client), "our {program} client:\n{out}\nguest:\n{log}");
        // (Debian 12's rping may exit 255 after a successful run: harness::rping_cm_thread_race.)
        let guest_ok = |log: &str| log.contains("rc=0") || program == "rping" && harness::rping_cm_thread_race(log);
        assert!(guest_ok(&log) && log.contains(want_server), "the guest's {program} server:\n{log}");
        check_rc_counters(program, &c0, &c1, &stats);

        let (c0, _) = counters(g);
        let cmd = exec(ours, program, &server.replace("{S}", "198.18.0.1"));
        let srv = g.spawn_in_netns(&format!("exec timeout -s KILL 120 {cmd}"));
        std::thread::sleep(Duration::from_secs(2));
        let (grc, glog) = g.guest_exec(
            &format!("timeout -s KILL 45 {program} {} 2>&1; echo rc=$?", client.replace("{S}", "198.18.0.1")),
            T,
        );
        let (rc, out) = harness::wait_tool(&cmd, srv);
        let (c1, stats) = counters(g);
        let _ = writeln!(report, "--- f. ours: {cmd}\nexit {rc}\n{out}\nguest {program} client (rc {grc}):\n{glog}");
        std::fs::write(art.join("report.txt"), &*report).unwrap();
        assert!(rc == 0 && out.contains(want_server), "our {program} server:\n{out}\nguest:\n{glog}");
        assert!(guest_ok(&glog) && glog.contains(want_client), "the guest's {program} client:\n{glog}");
        check_rc_counters(program, &c0, &c1, &stats);
    }
    // The pingpong examples, as tests/interop/pingpong.rs runs them against `roce pingpong`;
    // -N: ibv_rc_pingpong's SENDs through the work-request builder (ibv_wr_*), ours on
    // qp_ex.rs, the guest's on rxe's provider.
    for (kind, extra) in [("rc", ""), ("rc", " -N"), ("uc", ""), ("ud", ""), ("srq", "")] {
        let tool = format!("ibv_{kind}_pingpong");
        let o = format!("{}{extra}", opts(kind));
        let (c0, _) = counters(g);
        let (rc, out) = g.guest_exec(&format!("({tool} {o}; echo rc=$?) > /tmp/pp_{kind}.log 2>&1 &"), T);
        assert_eq!(rc, 0, "{out}");
        let cmd = exec(ours, &tool, &format!("{o} 198.18.0.2"));
        let end = Instant::now() + Duration::from_secs(30);
        let (rc, out) = loop {
            let (rc, out) = g.run_in_netns(&format!("timeout -s KILL 60 {cmd}"));
            if !out.contains("Couldn't connect") || Instant::now() >= end {
                break (rc, out);
            }
            std::thread::sleep(Duration::from_millis(300));
        };
        let log = wait_guest_log(g, &format!("/tmp/pp_{kind}.log"), "rc=", Duration::from_secs(60));
        let (c1, stats) = counters(g);
        let _ = writeln!(report, "--- f. guest {tool} {o}:\n{log}\nours: {cmd}\nexit {rc}\n{out}");
        std::fs::write(art.join("report.txt"), &*report).unwrap();
        assert_eq!(rc, 0, "our {tool} client:\n{out}\nguest:\n{log}");
        assert!(log.contains("rc=0"), "the guest's {tool} server:\n{log}");
        assert_results(&format!("guest {tool} server"), &log, kind);
        assert_results(&format!("our {tool} client"), &out, kind);
        check_counters(kind, &c0, &c1, &stats);

        let (c0, _) = counters(g);
        let cmd = exec(ours, &tool, &o);
        let srv = g.spawn_in_netns(&format!("exec timeout -s KILL 60 {cmd}"));
        let end = Instant::now() + Duration::from_secs(20);
        while !listening(g) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(100));
        }
        let (grc, glog) = g.guest_exec(&format!("timeout -s KILL 45 {tool} {o} 198.18.0.1 2>&1; echo rc=$?"), T);
        let (rc, out) = harness::wait_tool(&cmd, srv);
        let (c1, stats) = counters(g);
        let _ = writeln!(report, "--- f. ours: {cmd}\nexit {rc}\n{out}\nguest {tool} client (rc {grc}):\n{glog}");
        std::fs::write(art.join("report.txt"), &*report).unwrap();
        assert_eq!(rc, 0, "our {tool} server:\n{out}\nguest:\n{glog}");
        assert!(glog.contains("rc=0"), "the guest's {tool} client:\n{glog}");
        assert_results(&format!("guest {tool} client"), &glog, kind);
        assert_results(&format!("our {tool} server"), &out, kind);
        check_counters(kind, &c0, &c1, &stats);
    }
}

/// The guest's rxe saw a clean RC run: packets both ways, no retry, no sequence error, no
/// duplicate request.
fn check_rc_counters(
    program: &str,
    before: &std::collections::BTreeMap<String, u64>,
    after: &std::collections::BTreeMap<String, u64>,
    text: &str,
) {
    use crate::pingpong::delta;
    assert!(delta(before, after, "sent_pkts") >= 10, "{program}: sent_pkts:\n{text}");
    assert!(delta(before, after, "rcvd_pkts") >= 10, "{program}: rcvd_pkts:\n{text}");
    for name in ["retry_exceeded_err", "rcvd_seq_err", "duplicate_request", "out_of_seq_request"] {
        assert_eq!(delta(before, after, name), 0, "{program}: {name}:\n{text}");
    }
}

/// g. The C program of tests/capi/atomwr.c, ours (roce's libraries) against the guest's (the
/// kernel's rxe and rdma-core v44's rxe provider), both directions.
fn atomic_write_both_ways(g: &mut Guest, art: &std::path::Path, atomwr: &std::path::Path, report: &mut String) {
    let kernel = harness::kernel();
    let ours =
        |args: &str| roce(&format!("exec --iface tap0 -I 198.18.0.1 --transport raw -- {} {args}", atomwr.display()));
    // The guest serves, ours writes into its memory (FLUSH below).
    let (rc, out) = g.guest_exec("(atomwr -s 198.18.0.2; echo rc=$?) > /tmp/aw.log 2>&1 &", T);
    assert_eq!(rc, 0, "{out}");
    guest_listening(g, "atomwr");
    let cmd = ours("-c 198.18.0.2");
    let (rc, out) = g.run_in_netns(&format!("timeout -s KILL 60 {cmd}"));
    let log = wait_guest_log(g, "/tmp/aw.log", "server word=", Duration::from_secs(30));
    let _ = g.guest_exec("killall atomwr; true", T);
    let _ = writeln!(report, "--- g. guest atomwr -s:\n{log}\nours: {cmd}\nexit {rc}\n{out}");
    std::fs::write(art.join("report.txt"), &*report).unwrap();
    let client_has = |out: &str, want: &str| out.lines().any(|l| l == want);
    if kernel.memory_placement {
        assert_eq!(rc, 0, "our atomwr client:\n{out}\nguest:\n{log}");
        for want in ATOMWR_CLIENT {
            assert!(client_has(&out, want), "our client against {kernel}: wanted '{want}':\n{out}\nguest:\n{log}");
        }
        assert!(log.lines().any(|l| l == ATOMWR_SERVER), "the guest's server on {kernel}:\n{log}");
    } else {
        for want in RXE_6_1_RESPONDER {
            assert!(
                client_has(&out, want),
                "our client against {kernel} (no ATOMIC WRITE opcode): wanted '{want}':\n{out}\nguest:\n{log}"
            );
        }
        // Nothing of it reached the guest's memory.
        assert!(log.contains("server word=0101010101010101"), "the guest's word on {kernel}:\n{log}");
    }

    if kernel.memory_placement {
        flush_into_the_guest(g, art, atomwr, report);
    }

    // Ours serves, the guest's writes into our memory.
    let cmd = ours("-s 198.18.0.1");
    let srv_log = art.join("atomwr_server.log");
    let srv = our_listening_server(g, &cmd, &srv_log);
    // Within the guest's own timeout, so that a hang still reports both sides.
    let (grc, glog) = g.guest_exec("timeout -s KILL 40 atomwr -c 198.18.0.1 2>&1; echo rc=$?", T);
    std::thread::sleep(Duration::from_millis(500));
    let _ = g.run_in_netns("pkill -TERM -f 'atomwr -s 198.18.0.1'; true");
    let (rc, out) = our_server_output(&cmd, srv, &srv_log);
    let _ = writeln!(report, "--- g. ours: {cmd}\nexit {rc}\n{out}\nguest atomwr -c (rc {grc}):\n{glog}");
    std::fs::write(art.join("report.txt"), &*report).unwrap();
    if kernel.memory_placement {
        assert!(glog.contains("rc=0"), "the guest's atomwr client on {kernel}:\n{glog}\nours:\n{out}");
        for want in ATOMWR_CLIENT {
            assert!(client_has(&glog, want), "the guest's client on {kernel}: wanted '{want}':\n{glog}\nours:\n{out}");
        }
        assert!(out.lines().any(|l| l == ATOMWR_SERVER), "our server:\n{out}\nguest:\n{glog}");
    } else {
        for want in RXE_6_1_REQUESTER {
            assert!(
                client_has(&glog, want),
                "the guest's client on {kernel} (no ATOMIC WRITE opcode): wanted '{want}':\n{glog}\nours:\n{out}"
            );
        }
        assert!(out.contains("server word=0101010101010101"), "our word, untouched:\n{out}");
    }
}

/// g, FLUSH (a kernel whose rxe has it): the guest's `atomwr -s -f` grants FLUSH on its region
/// and QP; our two FLUSHes (a range, the whole region) with the IBA's ICRC get no answer at all
/// (rxe's check wants the headers covered twice: spec/kernel-findings.md §6), so the first ends
/// in IBV_WC_RETRY_EXC_ERR (12) and the second is flushed (5); with `--rxe-flush-icrc` rxe
/// answers both. (The guest's rdma-core v44 cannot post a FLUSH itself: one direction only.)
fn flush_into_the_guest(g: &mut Guest, art: &std::path::Path, atomwr: &std::path::Path, report: &mut String) {
    let kernel = harness::kernel();
    for rxe_icrc in [false, true] {
        let opt = if rxe_icrc { " --rxe-flush-icrc" } else { "" };
        let (rc, out) = g.guest_exec("(atomwr -s 198.18.0.2 -f; echo rc=$?) > /tmp/aw.log 2>&1 &", T);
        assert_eq!(rc, 0, "{out}");
        guest_listening(g, "atomwr");
        let cmd = roce(&format!(
            "exec --iface tap0 -I 198.18.0.1 --transport raw{opt} -- {} -c 198.18.0.2 -f",
            atomwr.display()
        ));
        let (rc, out) = g.run_in_netns(&format!("timeout -s KILL 60 {cmd}"));
        let log = wait_guest_log(g, "/tmp/aw.log", "server word=", Duration::from_secs(30));
        let _ = g.guest_exec("killall atomwr; true", T);
        let _ = writeln!(report, "--- g. FLUSH: guest atomwr -s -f:\n{log}\nours: {cmd}\nexit {rc}\n{out}");
        std::fs::write(art.join("report.txt"), &*report).unwrap();
        assert!(log.lines().any(|l| l == "server flush_access=0"), "the guest granted FLUSH on {kernel}:\n{log}");
        let want: &[&str] = if rxe_icrc { &ATOMWR_FLUSH } else { &RXE_FLUSH_UNANSWERED };
        for w in want {
            assert!(
                out.lines().any(|l| l.starts_with(w)),
                "our FLUSH client{opt} against {kernel}: wanted '{w}…':\n{out}\nguest:\n{log}"
            );
        }
    }
}

/// Our FLUSHes with the IBA's ICRC into an rxe that has FLUSH: no answer, so the requester's
/// retries end in IBV_WC_RETRY_EXC_ERR (12) and the second FLUSH is flushed (5).
const RXE_FLUSH_UNANSWERED: [&str; 2] = ["case=flush complete=0 status=12 ", "case=flush_mr complete=0 status=5 "];

/// 6.1's rxe as the responder to our ATOMIC WRITE (opcode 0x1D, which its table lacks): no
/// answer at all, so our requester retries until IBV_WC_RETRY_EXC_ERR (12) and the QP's other
/// requests are flushed (5) (seen 2026-12-07).
const RXE_6_1_RESPONDER: [&str; 2] =
    ["case=atomic_write status=12 opcode=9 wr_id=1", "case=read status=5 wr_id=2 same=0"];
/// 6.1's rxe as the requester of the guest program's ATOMIC WRITE (rdma-core v44's provider
/// posts it; the kernel's requester has no opcode for it): IBV_WC_LOC_QP_OP_ERR (2), nothing on
/// the wire, the QP's other requests flushed (5) (seen 2026-12-07).
const RXE_6_1_REQUESTER: [&str; 2] =
    ["case=atomic_write status=2 opcode=0 wr_id=1", "case=read status=5 wr_id=2 same=0"];

/// h. tests/capi/mw.c, ours against the guest's, both directions: the same lines as between
/// two roce ends (tests/capi/windows.rs).
fn memory_windows_both_ways(g: &mut Guest, art: &std::path::Path, mw: &std::path::Path, report: &mut String) {
    let ours =
        |args: &str| roce(&format!("exec --iface tap0 -I 198.18.0.1 --transport raw -- {} {args}", mw.display()));
    let (rc, out) = g.guest_exec("(mw -s 198.18.0.2; echo rc=$?) > /tmp/mw.log 2>&1 &", T);
    assert_eq!(rc, 0, "{out}");
    guest_listening(g, "mw");
    let cmd = ours("-c 198.18.0.2");
    let (rc, out) = g.run_in_netns(&format!("timeout -s KILL 60 {cmd}"));
    let log = wait_guest_log(g, "/tmp/mw.log", "server recv=", Duration::from_secs(30));
    let _ = g.guest_exec("killall mw; true", T);
    let _ = writeln!(report, "--- h. guest mw -s:\n{log}\nours: {cmd}\nexit {rc}\n{out}");
    std::fs::write(art.join("report.txt"), &*report).unwrap();
    assert_eq!(rc, 0, "our mw client:\n{out}\nguest:\n{log}");
    for want in MW_CLIENT {
        assert!(out.lines().any(|l| l == want), "our client: wanted '{want}':\n{out}\nguest:\n{log}");
    }
    for want in &MW_SERVER[..3] {
        assert!(log.lines().any(|l| l == *want), "the guest's server: wanted '{want}':\n{log}\nours:\n{out}");
    }
    // rxe hands the receive of a SEND with invalidate to the program with the key but with
    // the kernel's flag value (IB_WC_WITH_INVALIDATE, bit 2: IBV_WC_IP_CSUM_OK to libibverbs)
    // instead of IBV_WC_WITH_INV (bit 3).
    assert!(
        log.lines().any(|l| l == RXE_INV_RECV),
        "the guest's server: wanted '{RXE_INV_RECV}':\n{log}\nours:\n{out}"
    );

    let cmd = ours("-s 198.18.0.1");
    let srv_log = art.join("mw_server.log");
    let srv = our_listening_server(g, &cmd, &srv_log);
    let (grc, glog) = g.guest_exec("timeout -s KILL 40 mw -c 198.18.0.1 2>&1; echo rc=$?", T);
    std::thread::sleep(Duration::from_millis(500));
    let _ = g.run_in_netns("pkill -TERM -f 'mw -s 198.18.0.1'; true");
    let (rc, out) = our_server_output(&cmd, srv, &srv_log);
    let _ = writeln!(report, "--- h. ours: {cmd}\nexit {rc}\n{out}\nguest mw -c (rc {grc}):\n{glog}");
    std::fs::write(art.join("report.txt"), &*report).unwrap();
    assert!(glog.contains("rc=0"), "the guest's mw client:\n{glog}\nours:\n{out}");
    for want in MW_CLIENT {
        assert!(glog.lines().any(|l| l == want), "the guest's client: wanted '{want}':\n{glog}\nours:\n{out}");
    }
    for want in MW_SERVER {
        assert!(out.lines().any(|l| l == want), "our server: wanted '{want}':\n{out}\nguest:\n{glog}");
    }
}

/// The guest's server's receive of our SEND with invalidate, as rxe completes it: the key
/// right, but wc_flags 0x5, IBV_WC_GRH | bit 2, the kernel's IB_WC_WITH_INVALIDATE, which
/// libibverbs calls IBV_WC_IP_CSUM_OK; IBV_WC_WITH_INV (bit 3) is not set (seen on 6.1,
/// 2026-12-07: rxe copies the kernel's flags into the user CQE).
const RXE_INV_RECV: &str = "server recv=1 status=0 flags=0x5 rkey_ok=1";

/// i. XRC against a kernel without it: the guest's program refused at `ibv_open_xrcd`, our
/// XRC frames dropped uncounted and unanswered.
fn xrc_refused_by_the_guest(g: &mut Guest, art: &std::path::Path, report: &mut String) {
    use roce_wire::bth::{self, Opcode};
    use roce_wire::ext::ExtHeaders;
    use roce_wire::frame::FrameRepr;
    use roce_wire::rxe_accept::RxeDrop;

    for args in ["-g 1", "-g 1 198.18.0.1"] {
        let (_, out) = g.guest_exec(&format!("timeout -s KILL 30 ibv_xsrq_pingpong {args} 2>&1; echo rc=$?"), T);
        let _ = writeln!(report, "--- i. guest ibv_xsrq_pingpong {args}:\n{out}");
        std::fs::write(art.join("report.txt"), &*report).unwrap();
        // errno 95: EOPNOTSUPP, libibverbs' own op for a provider without open_xrcd.
        assert!(out.contains("Couldn't Open the XRC Domain 95") && out.contains("rc=1"), "{args}:\n{out}");
    }

    let ep = crate::fuzz::endpoints(g, false);
    let frames: Vec<Vec<u8>> =
        [(Opcode::XrcSendOnly, 1), (Opcode::XrcSendOnly, 0x11), (Opcode::XrcRdmaWriteOnly, 0x11)]
            .iter()
            .map(|&(op, qpn)| {
                let mut ext = ExtHeaders { xrceth: Some(roce_wire::xrceth::Repr::new(1)), ..ExtHeaders::default() };
                if op == Opcode::XrcRdmaWriteOnly {
                    ext.reth = Some(roce_wire::reth::Repr { va: 0x1000, rkey: 0x100, dma_len: 8 });
                }
                let b = bth::Repr::new(op, qpn, 1);
                let r = FrameRepr::new(ep.src_mac, ep.dst_mac, ep.src, ep.dst, b, ext, &[0x5a; 8]);
                let mut out = vec![0u8; r.buffer_len()];
                let n = r.emit(&mut out).expect("an XRC frame");
                out.truncate(n);
                out
            })
            .collect();
    for f in &frames {
        assert_eq!(ep.predict(f), Err(RxeDrop::UnknownOpcode), "the predictor's view of an XRC frame");
    }
    let sock = g.raw_socket();
    let before = g.read_counters("xrc0", T);
    for f in &frames {
        sock.send(f).expect("send on tap0");
    }
    // Any RoCEv2 frame from the guest would be an answer (nothing else of it is running).
    let (answered, _) = sock.recv_until(Duration::from_secs(3), |f| roce_wire::frame::parse_lax(f).is_ok());
    let after = g.read_counters("xrc1", T);
    // The control: an SA query on the same path is counted and answered, so the frames above
    // reached the guest's rxe.
    let (tid, probe) = roce::fuzz_peer::Generator::new(37, ep).sa_probe();
    assert!(ep.predict(&probe).is_ok(), "the control is one rxe counts");
    sock.send(&probe).expect("send on tap0");
    let probe_answered = crate::fuzz::sa_answered(&sock, tid, Duration::from_secs(10));
    let control = g.read_counters("xrc2", T);
    let _ = writeln!(
        report,
        "--- i. {} XRC frames to QPN 1 and 0x11: rcvd_pkts {} -> {}, an answer: {answered}; then an SA \
         query: rcvd_pkts {}, answered: {probe_answered}",
        frames.len(),
        before["rcvd_pkts"],
        after["rcvd_pkts"],
        control["rcvd_pkts"]
    );
    std::fs::write(art.join("report.txt"), &*report).unwrap();
    assert_eq!(after["rcvd_pkts"], before["rcvd_pkts"], "rxe drops XRC opcodes uncounted");
    assert!(!answered, "rxe answers no XRC request");
    assert_eq!(control["rcvd_pkts"], after["rcvd_pkts"] + 1, "the control SA query was counted");
    assert!(probe_answered, "the control SA query was answered");

    // XRC through the CM: the guest's rdma_xserver -c x gets our REQ as a CONNECT_REQUEST
    // (librdmacm makes the target QP only then, in rdma_get_request, and fails there); had
    // its kernel not read the REQ as XRC, cma_ib_check_req_qp_type would have rejected it
    // before the program saw anything, and the server would still be waiting.
    let (rc, out) =
        g.guest_exec("(timeout -s KILL 60 rdma_xserver -c x; echo rc=$?) > /tmp/rdma_xserver.log 2>&1 &", T);
    assert_eq!(rc, 0, "{out}");
    guest_listening(g, "rdma_xserver");
    let pcap = art.join("xrc_cm.pcap");
    let cmd =
        exec(&format!("-I 198.18.0.1 --transport raw --pcap {}", pcap.display()), "rdma_xclient", "-c x -s 198.18.0.2");
    let (rc, out) = g.run_in_netns(&format!("timeout -s KILL 60 {cmd}"));
    let log = wait_guest_log(g, "/tmp/rdma_xserver.log", "rc=", Duration::from_secs(30));
    let fields = harness::tshark_fields(
        &pcap,
        "infiniband.cm.req.transpsvctype || infiniband.cm.rej.reason",
        &["ip.src", "infiniband.cm.req.transpsvctype", "infiniband.cm.req.ext_transport", "infiniband.cm.rej.reason"],
    );
    let _ = writeln!(
        report,
        "--- i. guest rdma_xserver -c x:\n{log}\nours: {cmd}\nexit {rc}\n{out}\nthe CM in our capture (src, REQ transport, extended, REJ reason):\n{fields}"
    );
    std::fs::write(art.join("report.txt"), &*report).unwrap();
    assert!(log.contains("rdma_get_request: Operation not supported"), "the guest's server:\n{log}");
    assert!(out.contains("rdma_connect: Connection refused") && out.contains("end -1"), "ours:\n{out}");
    // tshark prints these fields in hex ("0x03").
    let num = |v: &str| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok();
    // (source, REQ transport type, extended type, REJ reason)
    type CmRow = (String, Option<u64>, Option<u64>, Option<u64>);
    let lines: Vec<CmRow> = fields
        .lines()
        .map(|l| {
            let c: Vec<&str> = l.split('\t').chain(std::iter::repeat("")).take(4).collect();
            (c[0].to_string(), num(c[1]), num(c[2]), num(c[3]))
        })
        .collect();
    assert!(
        lines.iter().any(|l| l.0 == "198.18.0.1" && l.1 == Some(3) && l.2 == Some(1)),
        "our REQ: transport type 3, extended 1:\n{fields}"
    );
    assert!(lines.iter().any(|l| l.0 == "198.18.0.2" && l.3 == Some(28)), "the guest's REJ, reason 28:\n{fields}");
}
