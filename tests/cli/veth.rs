//! Raw sockets for real: two stacks (and an SA) on the two ends of a veth pair inside a
//! network namespace this test creates (198.18.0.0/15 only). The kernel's own addresses on the
//! veth ends must not interfere. Needs root (CI runs as root); a missing capability fails.

use crate::common;
use crate::common::netns::Netns;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// Three hosts on one segment (veth0, veth1, veth2 on a bridge).
fn bridge_of_three(tag: &str) -> Netns {
    Netns::bridge(tag, 3)
}

/// `roce mckey` on veth0 (198.18.1.1) for 239.1.2.3 through the SA at 198.18.1.2, then `more`.
fn mckey_on_veth0(ns: &Netns, more: &[&str]) -> Command {
    let mut c = ns.roce(["mckey", "-m", "239.1.2.3", "-b", "198.18.1.1", "--iface", "veth0", "--sa", "198.18.1.2"]);
    c.args(more);
    c
}

fn spawn(mut c: Command) -> Child {
    c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

fn finish(c: Child) -> (bool, String) {
    let Output { status, stdout, stderr } = c.wait_with_output().unwrap();
    (status.success(), format!("{}{}", String::from_utf8_lossy(&stdout), String::from_utf8_lossy(&stderr)))
}

#[test]
fn join_send_receive_leave_over_veth_with_an_sa() {
    let ns = bridge_of_three("veth");
    let dir = common::artefact_dir("net_veth");
    let pcap: PathBuf = dir.join("sender.pcap");
    let sa = spawn(ns.roce(["sa-server", "--iface", "veth1", "--ip", "198.18.1.2", "--duration", "12"]));
    std::thread::sleep(Duration::from_millis(300));
    let rx = spawn(ns.roce([
        "mckey",
        "-m",
        "239.1.2.3",
        "-b",
        "198.18.1.3",
        "--iface",
        "veth2",
        "--sa",
        "198.18.1.2",
        "-r",
        "-C",
        "5",
        "--leave-after",
        "6",
    ]));
    std::thread::sleep(Duration::from_millis(1500));
    let tx = mckey_on_veth0(&ns, &["-s", "-C", "5", "--leave-after", "1", "--pcap"]).arg(&pcap).output().unwrap();
    let tx_out = String::from_utf8_lossy(&tx.stdout).to_string() + &String::from_utf8_lossy(&tx.stderr);
    let (rx_ok, rx_out) = finish(rx);
    let (_, sa_out) = finish(sa);
    std::fs::write(dir.join("sender.txt"), &tx_out).unwrap();
    std::fs::write(dir.join("receiver.txt"), &rx_out).unwrap();
    std::fs::write(dir.join("sa.txt"), &sa_out).unwrap();
    assert!(tx.status.success(), "sender:\n{tx_out}");
    assert!(tx_out.contains("event: MULTICAST_JOIN") && tx_out.contains("event: MULTICAST_LEFT"), "{tx_out}");
    assert!(rx_ok, "receiver:\n{rx_out}");
    assert!(rx_out.contains("received 5 lost 0"), "{rx_out}");
    // The capture decodes in tshark and in roce decode without errors.
    let out = Command::new(common::tshark())
        .args(["-n", "-r"])
        .arg(&pcap)
        .args(["-Y", "_ws.malformed || _ws.expert.severity >= \"error\"", "-T", "fields", "-e", "frame.number"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "tshark flags: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let dec = Command::new(env!("CARGO_BIN_EXE_roce")).args(["decode"]).arg(&pcap).output().unwrap();
    let text = String::from_utf8_lossy(&dec.stdout);
    assert!(
        text.contains("SubnAdmSet(MCMemberRecord)")
            && text.contains("SubnAdmDelete(MCMemberRecord)")
            && text.contains("SubnAdmDeleteResp"),
        "{text}"
    );
    assert!(!text.contains("malformed") && !text.contains("ICRC bad"), "{text}");
}

#[test]
fn sa_query_gets_an_error_status_and_clear_errors() {
    let ns = bridge_of_three("saq");
    let sa = spawn(ns.roce(["sa-server", "--iface", "veth1", "--ip", "198.18.1.2", "--duration", "4"]));
    std::thread::sleep(Duration::from_millis(300));
    // Get of a group that does not exist: the SA answers NO_RECORDS (0x0300); exit 1.
    let out = ns
        .roce(["sa-query", "--iface", "veth0", "-b", "198.18.1.1", "--sa", "198.18.1.2", "--mgid", "::ffff:239.9.9.9"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("0x0300"), "{text}");
    // GetTable with no groups: success, 0 records.
    let out = ns.roce(["sa-query", "--iface", "veth0", "-b", "198.18.1.1", "--sa", "198.18.1.2"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let _ = finish(sa);
    // Nobody at the SA's address: no ARP reply, so no SA request ever left; the error says so
    // (not "timed out after 6 transmissions").
    let out = ns.roce(["sa-query", "--iface", "veth0", "-b", "198.18.1.1", "--sa", "198.18.1.99"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        err.contains("ETIMEDOUT: no ARP reply for the SA's address 198.18.1.99") && err.contains("no SA request left"),
        "{err}"
    );
    assert!(!err.contains("transmissions") && !err.contains("-110"), "{err}");
    // An address outside the interface's subnet.
    let out = ns.roce(["sa-query", "--iface", "veth0", "-b", "10.9.9.9", "--sa", "198.18.1.2"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains("outside veth0's subnets"), "{err}");
    // An unknown interface: cannot run here (3).
    let out = ns.roce(["sa-query", "--iface", "nope0", "-b", "198.18.1.1", "--sa", "198.18.1.2"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("no interface named \"nope0\""));
    assert_eq!(out.status.code(), Some(3));
}

/// Read `child`'s stdout until a line containing `want`; returns what was read.
fn read_until(r: &mut impl BufRead, want: &str) -> String {
    let mut seen = String::new();
    loop {
        let mut l = String::new();
        assert!(r.read_line(&mut l).unwrap() > 0, "ended before {want:?}:\n{seen}");
        seen += &l;
        if l.contains(want) {
            return seen;
        }
    }
}

fn kill(child: &Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid (`ip netns exec` execs the command).
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

/// A stopped mckey leaves on a raw socket too: SIGINT while joined ▶ SA Delete from our MAC,
/// answered by the SA (DeleteResp), IGMP leave; exit 130. A closed stdout does the same (141).
/// A datagram larger than the path MTU is refused before any frame leaves.
#[test]
fn a_stopped_mckey_leaves_on_the_wire() {
    let ns = bridge_of_three("sig");
    let dir = common::artefact_dir("net_veth_signals");
    let sa = spawn(ns.roce(["sa-server", "--iface", "veth1", "--ip", "198.18.1.2", "--duration", "30"]));
    let mckey = |pcap: &Path| {
        let mut c = mckey_on_veth0(&ns, &["--leave-after", "60", "--pcap"]);
        c.arg(pcap);
        spawn(c)
    };
    for (how, status) in [("SIGINT", 130), ("closed stdout", 141)] {
        let pcap = dir.join(format!("stopped-{}.pcap", status));
        let mut child = mckey(&pcap);
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let seen = read_until(&mut out, "event: MULTICAST_JOIN");
        if how == "SIGINT" {
            kill(&child, libc::SIGINT);
        } else {
            drop(out);
        }
        let res = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&res.stderr);
        assert_eq!(res.status.code(), Some(status), "{how}:\n{seen}\n{err}");
        assert!(err.contains("destroying 1 id(s)") && err.contains("1 leave(s) answered"), "{how}: {err}");
        let dec = Command::new(env!("CARGO_BIN_EXE_roce")).args(["decode"]).arg(&pcap).output().unwrap();
        let text = String::from_utf8_lossy(&dec.stdout);
        let del = text.lines().position(|l| l.contains("SubnAdmDelete(MCMemberRecord)") && l.contains("198.18.1.1 →"));
        let resp = text.lines().position(|l| l.contains("SubnAdmDeleteResp(MCMemberRecord)"));
        assert!(del.is_some() && resp > del, "{how}: our Delete and the SA's answer:\n{text}");
        assert!(
            text.contains("IGMPv3") && text.contains("CHANGE_TO_INCLUDE_MODE 239.1.2.3"),
            "{how}: IGMP leave:\n{text}"
        );
    }
    // The SA saw both members go: no group is left.
    kill(&sa, libc::SIGTERM);
    let (_, sa_out) = finish(sa);
    assert!(sa_out.contains("0 groups, 0 members"), "{sa_out}");

    // Larger than the path MTU (veth's 1500: 1024-byte IB MTU): refused, nothing sent.
    let out = mckey_on_veth0(&ns, &["-s", "-S", "5000"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("at most 1024 bytes per datagram on veth0"), "{err}");
    assert!(out.stdout.is_empty(), "nothing joined or sent");
}

/// A listening cmatose server stopped by SIGTERM destroys its id and exits 143.
#[test]
fn a_stopped_cm_server_ends_with_the_signal_status() {
    let ns = bridge_of_three("cmsig");
    let mut child = spawn(ns.roce(["cmatose", "-b", "198.18.1.1", "--iface", "veth0"]));
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let seen = read_until(&mut out, "listening on");
    kill(&child, libc::SIGTERM);
    let res = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&res.stderr);
    assert_eq!(res.status.code(), Some(143), "{seen}\n{err}");
    assert!(err.contains("SIGTERM: destroying 1 id(s)"), "{err}");
}

/// A second signal during the grace period ends the process at once (exit 128+N, no summary):
/// the SA went away, so the Delete of the first signal's leave is never answered.
#[test]
fn a_second_signal_ends_at_once() {
    let ns = bridge_of_three("sig2");
    let mut sa = spawn(ns.roce(["sa-server", "--iface", "veth1", "--ip", "198.18.1.2", "--duration", "30"]));
    let mut child = spawn(mckey_on_veth0(&ns, &["--leave-after", "60"]));
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let seen = read_until(&mut out, "event: MULTICAST_JOIN");
    sa.kill().unwrap();
    let _ = sa.wait();
    kill(&child, libc::SIGINT);
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let said = read_until(&mut err, "SIGINT: destroying 1 id(s)");
    kill(&child, libc::SIGTERM);
    let st = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert_eq!(st.code(), Some(143), "{seen}{rest}\n{said}");
    assert!(!rest.contains("summary:"), "the second signal ended it at once:\n{rest}");
}

/// The kernel's IP counter of packets to an address it does not own (ip_error), in `ns`.
fn in_addr_errors(ns: &Netns) -> u64 {
    let out = ns.cmd("cat").arg("/proc/net/snmp").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut ip = text.lines().filter(|l| l.starts_with("Ip:"));
    let (names, values) = (ip.next().unwrap(), ip.next().unwrap());
    let col = names.split_whitespace().position(|n| n == "InAddrErrors").unwrap();
    values.split_whitespace().nth(col).unwrap().parse().unwrap()
}

/// The interface's promiscuity count as the kernel reports it.
fn promiscuity(ns: &Netns, dev: &str) -> u32 {
    let out = Command::new("ip").args(["-n", &ns.0, "-d", "link", "show", dev]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let rest = text.split("promiscuity ").nth(1).unwrap_or_else(|| panic!("{text}"));
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

/// `--mac`: a cmatose connection between two stacks on MACs of their own. A capture on the
/// server's link sees the client's frames come from and go to those MACs; the kernel hands
/// none of them to IP routing (its InAddrErrors stays put, where the interface's own MAC
/// makes it count every frame to an address it does not own); the interface is promiscuous
/// (veth has no unicast filter) only while the tool's socket lives.
#[test]
fn own_macs_keep_the_frames_from_the_kernel_ip_stack() {
    let ns = bridge_of_three("mac");
    let dir = common::artefact_dir("net_veth_mac");
    let (mac_s, mac_c) = ("02:00:00:00:aa:01", "02:00:00:00:aa:02");
    let before = in_addr_errors(&ns);
    let mut server = spawn(ns.roce(["cmatose", "-b", "198.18.1.1", "--iface", "veth0", "--mac", mac_s, "-C", "5"]));
    let mut sout = BufReader::new(server.stdout.take().unwrap());
    let seen = read_until(&mut sout, "listening on");
    assert_eq!(promiscuity(&ns, "veth0"), 1, "the membership makes veth promiscuous while the socket lives");
    let pcap = dir.join("server_link.pcap");
    // dumpcap, not tshark: the process stopped and waited for below is the one writing the file.
    let mut cap = ns.cmd(common::dumpcap());
    cap.args(["-i", "veth0", "-f", &format!("ether src {mac_c} and udp port 4791"), "-a", "duration:20", "-w"])
        .arg(&pcap);
    let mut cap = spawn(cap);
    let mut cerr = BufReader::new(cap.stderr.take().unwrap());
    read_until(&mut cerr, "Capturing on");
    let client = ns
        .roce(["cmatose", "-b", "198.18.1.2", "-s", "198.18.1.1", "--iface", "veth1", "--mac", mac_c, "-C", "5"])
        .output()
        .unwrap();
    let client_out = String::from_utf8_lossy(&client.stdout).to_string() + &String::from_utf8_lossy(&client.stderr);
    let st = server.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut sout, &mut rest).unwrap();
    kill(&cap, libc::SIGINT);
    let _ = cap.wait();
    std::fs::write(dir.join("client.txt"), &client_out).unwrap();
    assert!(client.status.success(), "client:\n{client_out}");
    assert!(st.success(), "server:\n{seen}{rest}");
    assert_eq!(promiscuity(&ns, "veth0"), 0, "the membership ended with the socket");
    assert_eq!(in_addr_errors(&ns), before, "no frame of the stacks reached the kernel's IP routing");
    let out = Command::new(common::tshark())
        .args(["-n", "-r"])
        .arg(&pcap)
        .args(["-Y", "infiniband.bth", "-T", "fields", "-e", "eth.src", "-e", "eth.dst"])
        .output()
        .unwrap();
    let lines = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(lines.lines().count() >= 5, "the client's frames on the server's link:\n{lines}");
    assert!(lines.lines().all(|l| l == format!("{mac_c}\t{mac_s}")), "{lines}");
}
