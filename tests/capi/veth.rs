//! Debian's `mckey` and `udaddy`, unmodified, program against program with both ends over roce:
//! on raw sockets (three hosts on a bridge, `roce sa-server` as the SA), and as nobody on the
//! udp transport (two namespaces joined by a veth pair), where two unprivileged receivers on
//! one host join the same group. What is asserted is what the peers saw: the receivers' five
//! datagrams, and in the SA's own capture every join's SubnAdmSet and every leave's
//! SubnAdmDelete (mask 0x10003, the join's JoinState, from the leaving port's address) with its
//! DeleteResp.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::common;
use crate::common::netns::Netns;
use crate::debian;
use crate::library::exec;

pub fn spawn(mut c: impl std::borrow::BorrowMut<Command>) -> Child {
    c.borrow_mut().stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

pub fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Wait for `c` at most `limit` (then kill it: a program waiting for datagrams that never
/// come fails the test instead of hanging it).
pub fn finish_within(c: Child, limit: Duration) -> Output {
    let pid = c.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let killer = std::thread::spawn(move || {
        if rx.recv_timeout(limit).is_err() {
            // SAFETY: kill(2) on our own child, still unwaited (the waiter holds it).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let out = c.wait_with_output().unwrap();
    let _ = tx.send(());
    let _ = killer.join();
    out
}

/// `cmd` as nobody with no capability.
pub fn as_nobody(ns: &Netns, roce_args: &[&str], program: &Path, args: &[&str]) -> Command {
    let mut c = ns.cmd("setpriv");
    c.args([
        "--reuid=nobody",
        "--regid=nogroup",
        "--clear-groups",
        "--inh-caps=-all",
        env!("CARGO_BIN_EXE_roce"),
        "exec",
    ])
    .args(roce_args)
    .arg("--")
    .arg(program)
    .args(args);
    c
}

/// Stop the SA (SIGTERM) and return its output; its capture is complete once it exited.
pub fn stop_sa(sa: Child) -> String {
    // SAFETY: kill(2) on our own child (`ip netns exec` execs the command).
    unsafe { libc::kill(sa.id() as i32, libc::SIGTERM) };
    text(&sa.wait_with_output().unwrap())
}

/// The SA's capture, decoded: the lines of SA MADs.
pub fn sa_lines(pcap: &Path) -> Vec<String> {
    let dec = Command::new(env!("CARGO_BIN_EXE_roce")).arg("decode").arg(pcap).output().unwrap();
    String::from_utf8_lossy(&dec.stdout).lines().filter(|l| l.contains("SubnAdm")).map(str::to_string).collect()
}

/// Every address in `from` joined (Set answered) and left (Delete with mask 0x10003 and the
/// FullMember JoinState, answered by a DeleteResp of the same TID).
pub fn assert_joined_and_left(lines: &[String], from: &[&str]) {
    let states: Vec<(&str, &str)> = from.iter().map(|a| (*a, "FullMember")).collect();
    assert_joined_and_left_as(lines, &states);
}

/// As [`assert_joined_and_left`], each address with its join state (the Delete carries it).
pub fn assert_joined_and_left_as(lines: &[String], from: &[(&str, &str)]) {
    let all = lines.join("\n");
    for (a, state) in from {
        let set = lines.iter().any(|l| l.contains(&format!("{a} →")) && l.contains("SubnAdmSet(MCMemberRecord)"));
        assert!(set, "no SubnAdmSet from {a}:\n{all}");
        let del = lines
            .iter()
            .find(|l| l.contains(&format!("{a} →")) && l.contains("SubnAdmDelete(MCMemberRecord)"))
            .unwrap_or_else(|| panic!("no SubnAdmDelete from {a}:\n{all}"));
        assert!(del.contains("mask=0x10003") && del.contains(&format!("JoinState={state} ")), "{del}");
        let tid = del.split("TID=").nth(1).and_then(|t| t.split_whitespace().next()).unwrap();
        assert!(
            lines.iter().any(|l| l.contains("SubnAdmDeleteResp") && l.contains(&format!("TID={tid}"))),
            "the SA answered {a}'s Delete {tid}:\n{all}"
        );
    }
}

fn assert_mckey_ok(who: &str, out: &str) {
    assert!(out.contains("data transfers complete") && out.contains("return status 0"), "{who}:\n{out}");
}

#[test]
fn debian_mckey_to_debian_mckey_on_raw_sockets() {
    let ns = Netns::bridge("capimk", 3);
    let dir = common::artefact_dir("capi_mckey_raw");
    let pcap = dir.join("sa.pcap");
    let sa = spawn(
        ns.roce(["sa-server", "--iface", "veth1", "--ip", "198.18.1.2", "--duration", "60", "--pcap"]).arg(&pcap),
    );
    std::thread::sleep(Duration::from_millis(300));
    let mckey = debian::bin("mckey");
    let rx = spawn(exec(
        &ns,
        &["-I", "198.18.1.3", "--iface", "veth2", "--transport", "raw", "--sa", "198.18.1.2"],
        &mckey,
        &["-m", "239.1.2.3", "-C", "5"],
    ));
    std::thread::sleep(Duration::from_millis(1500));
    let tx = exec(
        &ns,
        &["-I", "198.18.1.1", "--iface", "veth0", "--transport", "raw", "--sa", "198.18.1.2"],
        &mckey,
        &["-m", "239.1.2.3", "-s", "-o", "-C", "5"],
    )
    .output()
    .unwrap();
    let rx = finish_within(rx, Duration::from_secs(30));
    let sa_out = stop_sa(sa);
    std::fs::write(dir.join("outputs.txt"), format!("sender:\n{}\nreceiver:\n{}\nsa:\n{sa_out}", text(&tx), text(&rx)))
        .unwrap();
    assert!(tx.status.success(), "{}", text(&tx));
    assert_mckey_ok("sender", &text(&tx));
    assert!(rx.status.success(), "{}", text(&rx));
    assert_mckey_ok("receiver", &text(&rx));
    // The sender joined with -o: rdma_join_multicast_ex's SENDONLY_FULLMEMBER.
    assert_joined_and_left_as(&sa_lines(&pcap), &[("198.18.1.1", "SendOnlyFullMember"), ("198.18.1.3", "FullMember")]);
    assert!(sa_out.contains("0 groups, 0 members"), "{sa_out}");
}

/// Three hosts (namespaces) on one segment: `a` (u0: 198.18.7.1 and .4), `b` (a bridge br0:
/// 198.18.7.2, its ports the peers of u0 and of c's vs) and `c` (vs: 198.18.7.5; the SA at .3
/// on a raw socket). A raw socket does not see the frames its own host sends, so the SA has a
/// host of its own.
pub fn three_hosts(tag: &str) -> (Netns, Netns, Netns) {
    let (a, b, c) = (Netns::new(&format!("{tag}a")), Netns::new(&format!("{tag}b")), Netns::new(&format!("{tag}c")));
    for ns in [&a, &b, &c] {
        ns.sh("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1");
    }
    b.sh(&format!(
        "ip link add br0 type bridge; ip link set br0 type bridge mcast_snooping 0; ip link set br0 up; \
         ip link add u1 type veth peer name u0 netns {}; ip link add ps type veth peer name vs netns {}; \
         ip link set u1 master br0; ip link set ps master br0; ip link set u1 up; ip link set ps up; \
         ip addr add 198.18.7.2/24 dev br0",
        a.0, c.0
    ));
    a.sh("ip addr add 198.18.7.1/24 dev u0; ip addr add 198.18.7.4/24 dev u0; ip link set u0 up");
    c.sh("ip addr add 198.18.7.5/24 dev vs; ip link set vs up");
    (a, b, c)
}

#[test]
fn debian_mckey_as_nobody_on_the_udp_transport_two_receivers_on_one_host() {
    let (a, b, c) = three_hosts("capiudp");
    let dir = common::artefact_dir("capi_mckey_udp");
    let pcap = dir.join("sa.pcap");
    let sa =
        spawn(c.roce(["sa-server", "--iface", "vs", "--ip", "198.18.7.3", "--duration", "60", "--pcap"]).arg(&pcap));
    std::thread::sleep(Duration::from_millis(300));
    let mckey = debian::bin("mckey");
    let udp = |addr: &'static str| ["-I", addr, "--transport", "udp", "--sa", "198.18.7.3"];
    // Two unprivileged receivers on host a, one group: each binds 239.1.2.3:4791.
    let rx1 = spawn(as_nobody(&a, &udp("198.18.7.1"), &mckey, &["-m", "239.1.2.3", "-C", "5"]));
    let rx2 = spawn(as_nobody(&a, &udp("198.18.7.4"), &mckey, &["-m", "239.1.2.3", "-C", "5"]));
    std::thread::sleep(Duration::from_millis(1500));
    let tx = as_nobody(&b, &udp("198.18.7.2"), &mckey, &["-m", "239.1.2.3", "-s", "-C", "5"]).output().unwrap();
    let (rx1, rx2) = (finish_within(rx1, Duration::from_secs(30)), finish_within(rx2, Duration::from_secs(30)));
    let sa_out = stop_sa(sa);
    std::fs::write(
        dir.join("outputs.txt"),
        format!("sender:\n{}\nreceiver 1:\n{}\nreceiver 2:\n{}\nsa:\n{sa_out}", text(&tx), text(&rx1), text(&rx2)),
    )
    .unwrap();
    for (who, o) in [("sender", &tx), ("receiver 1", &rx1), ("receiver 2", &rx2)] {
        assert!(o.status.success(), "{who}: {}", text(o));
        assert_mckey_ok(who, &text(o));
    }
    assert_joined_and_left(&sa_lines(&pcap), &["198.18.7.1", "198.18.7.4", "198.18.7.2"]);
}

fn assert_udaddy_ok(who: &str, o: &Output) {
    let t = text(o);
    assert!(
        o.status.success() && t.contains("data transfers complete") && t.contains("return status 0"),
        "{who}:\n{t}"
    );
}

#[test]
fn debian_udaddy_both_roles_on_raw_sockets_and_as_nobody_on_udp() {
    let udaddy = debian::bin("udaddy");
    // Raw: server on veth2 (198.18.1.3), client on veth0 (198.18.1.1).
    let ns = Netns::bridge("capiud", 3);
    let server = spawn(exec(
        &ns,
        &["-I", "198.18.1.3", "--iface", "veth2", "--transport", "raw"],
        &udaddy,
        &["-b", "198.18.1.3"],
    ));
    std::thread::sleep(Duration::from_millis(800));
    let client = exec(
        &ns,
        &["-I", "198.18.1.1", "--iface", "veth0", "--transport", "raw"],
        &udaddy,
        &["-s", "198.18.1.3", "-b", "198.18.1.1"],
    )
    .output()
    .unwrap();
    let server = finish_within(server, Duration::from_secs(30));
    assert_udaddy_ok("raw client", &client);
    assert_udaddy_ok("raw server", &server);
    // udp, as nobody: server in b (198.18.7.2), client in a (198.18.7.1).
    let (a, b, _c) = three_hosts("capiudu");
    let server = spawn(as_nobody(&b, &["-I", "198.18.7.2", "--transport", "udp"], &udaddy, &["-b", "198.18.7.2"]));
    std::thread::sleep(Duration::from_millis(800));
    let client =
        as_nobody(&a, &["-I", "198.18.7.1", "--transport", "udp"], &udaddy, &["-s", "198.18.7.2", "-b", "198.18.7.1"])
            .output()
            .unwrap();
    let server = finish_within(server, Duration::from_secs(30));
    assert_udaddy_ok("udp client", &client);
    assert_udaddy_ok("udp server", &server);
}
