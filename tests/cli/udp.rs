//! The udp transport for real: the tools as a user without capabilities (`setpriv` to nobody,
//! every capability dropped) on a veth pair between two network namespaces this test creates
//! (198.18.0.0/15 only), the kernel writing the IP and UDP headers. A capture on the veth sees
//! what the kernel sent: every RoCE frame's ICRC checks as rxe checks it (`roce decode`), tshark
//! decodes them, and the mission's SubnAdmDelete is on the wire. Needs root to build the
//! namespaces (CI runs as root); the tools themselves run unprivileged.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::common;
use crate::common::netns::Netns;

/// Two namespaces joined by a veth pair: `a` holds u0 (198.18.7.1), `b` holds u1 (198.18.7.2);
/// the test's artefacts go to `dir`, the capture on u0 to `pcap`.
struct Pair {
    a: Netns,
    b: Netns,
    dir: PathBuf,
    pcap: PathBuf,
}

fn pair(tag: &str, artefacts: &str) -> Pair {
    let a = Netns::new(&format!("{tag}a"));
    let b = Netns::new(&format!("{tag}b"));
    a.sh(&format!(
        "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1; \
         ip link add u0 type veth peer name u1 netns {}; ip addr add 198.18.7.1/24 dev u0; ip link set u0 up",
        b.0
    ));
    b.sh("sysctl -qw net.ipv6.conf.all.disable_ipv6=1; ip addr add 198.18.7.2/24 dev u1; ip link set u1 up");
    // veth would carry a UDP_SEGMENT send whole (the capture would see one long datagram):
    // without the offload the kernel segments it before the veth, as before a NIC without
    // it, so the capture sees each segment with the IPv4 ID the kernel gave it.
    a.sh("ethtool -K u0 tx-udp-segmentation off");
    b.sh("ethtool -K u1 tx-udp-segmentation off");
    let dir = common::artefact_dir(artefacts);
    let pcap = dir.join("u0.pcap");
    Pair { a, b, dir, pcap }
}

/// `roce ARGS` in `ns` as nobody with no capability at all.
fn unprivileged(ns: &Netns, args: &[&str]) -> Command {
    let mut c = ns.cmd("setpriv");
    c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--inh-caps=-all"])
        .arg(env!("CARGO_BIN_EXE_roce"))
        .args(args);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

/// The number after `key` on the counters line (`udp socket: sent N …`).
fn field(out: &str, key: &str) -> u64 {
    out.split(key).nth(1).and_then(|r| r.split_whitespace().next()).and_then(|v| v.parse().ok()).unwrap_or(u64::MAX)
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn read_until(r: &mut impl BufRead, want: &str) -> String {
    let mut seen = String::new();
    let mut line = String::new();
    while r.read_line(&mut line).unwrap_or(0) > 0 {
        seen.push_str(&line);
        if line.contains(want) {
            return seen;
        }
        line.clear();
    }
    panic!("no line with {want:?} in:\n{seen}");
}

/// dumpcap on u0 in `a` until stopped (its stderr kept open: a closed pipe would end it before
/// it writes the packets).
fn capture(p: &Pair) -> (Child, BufReader<std::process::ChildStderr>) {
    let mut cap = p.a.cmd(common::dumpcap());
    cap.args(["-i", "u0", "-f", "udp port 4791 or igmp", "-a", "duration:60", "-w"]).arg(&p.pcap);
    let mut cap = cap.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut err = BufReader::new(cap.stderr.take().unwrap());
    read_until(&mut err, "Capturing on");
    (cap, err)
}

/// tshark's `-T fields` of the frames of `pcap` that match `filter`.
fn tshark_fields(pcap: &Path, filter: &str, fields: &[&str]) -> String {
    let mut c = Command::new(common::tshark());
    c.args(["-n", "-r"]).arg(pcap).args(["-Y", filter, "-T", "fields"]);
    for f in fields {
        c.args(["-e", f]);
    }
    String::from_utf8_lossy(&c.output().unwrap().stdout).to_string()
}

fn stop((cap, _err): (Child, BufReader<std::process::ChildStderr>)) {
    // libpcap hands packets over a block at a time: let the last block retire first.
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(cap.id() as i32, libc::SIGINT) };
    let _ = cap.wait_with_output();
}

/// Every RoCE frame of the capture: `roce decode` finds its ICRC right (as rxe checks it, over
/// the IP header the kernel wrote), tshark decodes it without error; returns the decode and
/// tshark's `ip.src udp.srcport` per RoCE frame.
fn check_capture(pcap: &Path) -> (String, String) {
    let dec = Command::new(env!("CARGO_BIN_EXE_roce")).arg("decode").arg(pcap).output().unwrap();
    let decoded = String::from_utf8_lossy(&dec.stdout).to_string();
    let with_icrc: Vec<&str> = decoded.lines().filter(|l| l.contains("ICRC")).collect();
    assert!(!with_icrc.is_empty(), "no RoCE frame captured:\n{decoded}");
    assert!(with_icrc.iter().all(|l| l.contains("ICRC ok")) && !decoded.contains("malformed"), "{decoded}");
    let json = Command::new(env!("CARGO_BIN_EXE_roce")).args(["decode", "--json"]).arg(pcap).output().unwrap();
    let json = String::from_utf8_lossy(&json.stdout).to_string();
    let roce_frames = json.lines().filter(|l| l.contains("\"kind\":\"rocev2\"")).count();
    let icrc_ok = json.lines().filter(|l| l.contains("\"icrc\":\"ok\"")).count();
    assert!(roce_frames > 0 && icrc_ok == roce_frames, "{icrc_ok} of {roce_frames} ICRCs ok:\n{json}");
    let flagged = tshark_fields(pcap, "_ws.malformed || _ws.expert.severity >= \"error\"", &["frame.number"]);
    assert!(flagged.trim().is_empty(), "tshark flags frames: {flagged}");
    let ports = tshark_fields(pcap, "infiniband.bth", &["ip.src", "udp.srcport"]);
    assert_eq!(ports.lines().count(), roce_frames, "tshark sees every RoCE frame as InfiniBand:\n{ports}");
    (decoded, ports)
}

/// rping, client and server, both as nobody over the udp transport (the server by default, no
/// capability: the first status line says so); the capture between them checks every ICRC.
#[test]
fn rping_as_nobody_over_the_udp_transport() {
    let p = pair("udprp", "cli_udp_rping");
    let cap = capture(&p);
    let mut srv =
        unprivileged(&p.b, &["rping", "-s", "-a", "198.18.7.2", "--iface", "u1", "-v", "-S", "3000"]).spawn().unwrap();
    let mut sout = BufReader::new(srv.stdout.take().unwrap());
    let first = read_until(&mut sout, "transport");
    assert!(first.contains("transport udp (the default: no CAP_NET_RAW)"), "{first}");
    std::thread::sleep(Duration::from_millis(300));
    let cli = unprivileged(
        &p.a,
        &["rping", "-c", "-a", "198.18.7.2", "-I", "198.18.7.1", "--iface", "u0", "--transport", "udp", "-C", "5"],
    )
    .args(["-S", "3000", "-v", "-V", "-d"])
    .output()
    .unwrap();
    let st = srv.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut sout, &mut rest).unwrap();
    stop(cap);
    let c = text(&cli);
    std::fs::write(p.dir.join("client.txt"), &c).unwrap();
    assert!(cli.status.success(), "client:\n{c}\nserver:\n{first}{rest}");
    assert!(st.success(), "server:\n{first}{rest}");
    assert_eq!(c.lines().filter(|l| l.starts_with("ping data: rdma-ping-")).count(), 5, "{c}");
    assert!(c.contains("udp socket: sent"), "{c}");
    // 3000-byte RDMA READs and WRITEs at path MTU 1024: three datagrams in one UDP_SEGMENT
    // message, so fewer messages than datagrams.
    let (sent, messages) = (field(&c, "udp socket: sent"), field(&c, "send_messages"));
    assert!(messages < sent && sent != u64::MAX, "{c}");
    let (_, sources) = check_capture(&p.pcap);
    // Both directions, every frame from port 4791 (the bound port, which the engine writes too).
    for ip in ["198.18.7.1", "198.18.7.2"] {
        assert!(sources.lines().any(|l| l == format!("{ip}\t4791")), "{sources}");
    }
    assert!(sources.lines().all(|l| l.ends_with("\t4791")), "{sources}");
}

/// mckey as nobody over udp joins through `roce sa-server` (root, raw, its own address) and
/// leaves: the SubnAdmSet and the SubnAdmDelete are on the wire, with right ICRCs, and the
/// kernel sent the IGMP reports for the group the socket joined.
#[test]
fn mckey_as_nobody_over_udp_leaves_with_a_subnadmdelete() {
    let p = pair("udpmc", "cli_udp_mckey");
    let cap = capture(&p);
    let sa =
        p.b.roce(["sa-server", "--iface", "u1", "--ip", "198.18.7.3", "--transport", "raw", "--duration", "15"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let tx = unprivileged(
        &p.a,
        &["mckey", "-m", "239.1.2.3", "-b", "198.18.7.1", "--iface", "u0", "--sa", "198.18.7.3", "-s", "-C", "5"],
    )
    .args(["--leave-after", "1"])
    .output()
    .unwrap();
    stop(cap);
    let sa_pid = sa.id() as i32;
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(sa_pid, libc::SIGTERM) };
    let sa_out = text(&sa.wait_with_output().unwrap());
    let t = text(&tx);
    std::fs::write(p.dir.join("mckey.txt"), &t).unwrap();
    std::fs::write(p.dir.join("sa.txt"), &sa_out).unwrap();
    assert!(tx.status.success(), "mckey:\n{t}\nsa-server:\n{sa_out}");
    assert!(t.contains("transport udp"), "{t}");
    assert!(t.contains("event: MULTICAST_JOIN") && t.contains("event: MULTICAST_LEFT"), "{t}");
    let (decoded, _) = check_capture(&p.pcap);
    assert!(
        decoded.contains("SubnAdmSet(MCMemberRecord)")
            && decoded.contains("SubnAdmDelete(MCMemberRecord)")
            && decoded.contains("SubnAdmDeleteResp"),
        "{decoded}"
    );
    // The kernel's IGMPv3 reports for the group (join and leave), not the engine's.
    let igmp = tshark_fields(&p.pcap, "igmp.type == 0x22", &["igmp.maddr"]);
    assert!(igmp.lines().filter(|l| l.contains("239.1.2.3")).count() >= 2, "IGMPv3 reports:\n{igmp}");
    assert!(t.contains("udp not sent, igmp (the kernel reports)"), "{t}");
}

/// What the udp transport cannot do is refused, naming the transport that can: port 4791
/// already taken (as a kernel rxe takes it) is exit 3; a MAC of the stack's own is exit 2; an
/// address that is not the kernel's is exit 3.
#[test]
fn the_udp_transport_refuses_what_it_cannot_do() {
    let p = pair("udpno", "cli_udp_refusals");
    // A wildcard bind of 4791, as rxe's tunnel socket.
    let mut holder =
        p.b.cmd("python3")
            .args([
                "-c",
                "import socket,time; s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(('0.0.0.0',4791)); \
             print('bound',flush=True); time.sleep(30)",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
    read_until(&mut BufReader::new(holder.stdout.take().unwrap()), "bound");
    let o = unprivileged(&p.b, &["rping", "-s", "-a", "198.18.7.2", "--iface", "u1", "--transport", "udp"])
        .output()
        .unwrap();
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("already taken (EADDRINUSE)") && text(&o).contains("--transport raw"), "{}", text(&o));
    let o = unprivileged(&p.a, &["cmatose", "-b", "198.18.7.1", "--iface", "u0", "--mac", "02:00:00:00:aa:01"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--mac 02:00:00:00:aa:01 needs --transport raw"), "{}", text(&o));
    let o = unprivileged(&p.a, &["udaddy", "-b", "198.18.7.9", "--iface", "u0"]).output().unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("not an address of u0") && text(&o).contains("--transport raw"), "{}", text(&o));
    // And raw without the capability says what it needs.
    let o =
        unprivileged(&p.a, &["udaddy", "-b", "198.18.7.1", "--iface", "u0", "--transport", "raw"]).output().unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
}

/// Multicast datagrams between two udp-transport stacks (the receiver's group socket, joined
/// with IP_ADD_MEMBERSHIP), and rping over IPv6 (UDP_NO_CHECK6_RX, the IPv6 header re-built):
/// all as nobody.
#[test]
fn multicast_and_ipv6_as_nobody_over_udp() {
    let p = pair("udpm6", "cli_udp_mc_v6");
    let rx = unprivileged(
        &p.b,
        &["mckey", "-m", "239.1.2.3", "-b", "198.18.7.2", "--iface", "u1", "--no-sa", "-r", "-C", "5"],
    )
    .args(["--leave-after", "10"])
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let tx = unprivileged(
        &p.a,
        &["mckey", "-m", "239.1.2.3", "-b", "198.18.7.1", "--iface", "u0", "--no-sa", "-s", "-C", "5"],
    )
    .args(["--leave-after", "1"])
    .output()
    .unwrap();
    let rx = rx.wait_with_output().unwrap();
    assert!(tx.status.success(), "sender:\n{}", text(&tx));
    assert!(rx.status.success() && text(&rx).contains("received 5 lost 0"), "receiver:\n{}", text(&rx));
    for (ns, dev, addr) in [(&p.a, "u0", "fd00::1"), (&p.b, "u1", "fd00::2")] {
        ns.sh(&format!(
            "sysctl -qw net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.{dev}.disable_ipv6=0; \
             ip addr add {addr}/64 dev {dev} nodad"
        ));
    }
    let srv =
        unprivileged(&p.b, &["rping", "-s", "-a", "fd00::2", "--iface", "u1", "--timeout", "20"]).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let cli =
        unprivileged(&p.a, &["rping", "-c", "-a", "fd00::2", "-I", "fd00::1", "--iface", "u0", "-C", "3", "-v", "-V"])
            .output()
            .unwrap();
    let srv = srv.wait_with_output().unwrap();
    let c = text(&cli);
    std::fs::write(p.dir.join("rping6_client.txt"), &c).unwrap();
    assert!(cli.status.success() && srv.status.success(), "client:\n{c}\nserver:\n{}", text(&srv));
    assert_eq!(c.lines().filter(|l| l.starts_with("ping data: rdma-ping-")).count(), 3, "{c}");
}
