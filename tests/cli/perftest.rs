//! `roce perftest` on a veth pair in a network namespace this test creates (198.18.6.0/24
//! only; needs root): the stacks on addresses of their own (.1, .2) beside the kernel's (.11,
//! .12, which carry perftest's TCP exchange). Against itself (the eight tests, `-R`, UC, UD);
//! the edges of issue 22 item 6: a peer of another perftest version refused with an error
//! naming both versions (a fake TCP peer), a peer that vanishes mid-test (exit 1 with
//! perftest's "Completion with error" and ibv_wc_status_str's name, within the timeout), and
//! SIGINT while waiting (exit 130). The same tool against the kernel's perftest is
//! tests/interop/perftest.rs.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::netns::Netns;

fn pair() -> Netns {
    let ns = Netns::veth_pair("perftest");
    ns.sh("ip addr add 198.18.6.11/24 dev veth0; ip addr add 198.18.6.12/24 dev veth1");
    ns
}

/// `roce perftest ARGS` (split at white space) in the namespace, its output piped.
fn perftest(ns: &Netns, args: &str) -> Command {
    let mut c = ns.roce(["perftest"].into_iter().chain(args.split_whitespace()));
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The server on veth1 (198.18.6.2), the client on veth0 (198.18.6.1); both outputs.
fn run_pair(ns: &Netns, test: &str, args: &str) -> (Output, Output) {
    // -u 18: a side off the CPU of a loaded machine past 67 ms must not end the run.
    let srv =
        perftest(ns, &format!("{test} --iface veth1 -I 198.18.6.2 -u 18 --timeout 10 --accept-timeout 10 {args}"))
            .spawn()
            .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // TCP reaches the server's kernel address; rdma_cm (-R) reaches its stack's.
    let server = if args.contains("-R") { "198.18.6.2" } else { "198.18.6.12" };
    let cli = perftest(ns, &format!("{test} --iface veth0 -I 198.18.6.1 -u 18 --timeout 10 {args} {server}"))
        .output()
        .unwrap();
    (cli, srv.wait_with_output().unwrap())
}

/// The row under perftest's " #bytes" header: (size, iterations).
fn row(out: &str) -> Option<(u64, u64)> {
    let mut lines = out.lines().skip_while(|l| !l.trim_start().starts_with("#bytes"));
    lines.next()?;
    let mut f = lines.next()?.split_whitespace();
    Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
}

#[test]
fn perftest_against_itself_every_test_and_mode() {
    let ns = pair();
    let runs: [(&str, &str, u64); 14] = [
        ("send_bw", "-n 50", 65536),
        ("write_bw", "-n 50", 65536),
        ("read_bw", "-n 50", 65536),
        ("atomic_bw", "-n 50", 8),
        ("send_lat", "-n 50", 2),
        ("write_lat", "-n 50", 2),
        ("read_lat", "-n 50", 2),
        ("atomic_lat", "-n 50 -A CMP_AND_SWAP", 8),
        ("write_bw", "-n 50 -R", 65536),
        ("read_lat", "-n 50 -R", 2),
        ("send_bw", "-n 25 -R -q 2", 65536),
        ("send_bw", "-n 50 -c UC -s 4096", 4096),
        ("send_bw", "-n 50 -c UD", 1024),
        ("write_bw", "-n 20 -q 4 --report_gbits", 65536),
    ];
    for (test, args, size) in runs {
        let (c, s) = run_pair(&ns, test, args);
        let (ct, st) = (text(&c), text(&s));
        assert!(c.status.success() && s.status.success(), "{test} {args}\nclient:\n{ct}\nserver:\n{st}");
        let want_iters = if args.contains("-q 4") {
            80
        } else if args.contains("-n 25 -R -q 2") {
            50
        } else if args.contains("-n 20") {
            20
        } else {
            50
        };
        assert_eq!(row(&ct), Some((size, want_iters)), "{test} {args}\n{ct}");
        if !matches!(test, "read_lat" | "atomic_lat") {
            assert_eq!(row(&st), Some((size, want_iters)), "{test} {args}\n{st}");
        }
        assert!(ct.contains("---------------------------------------------------------------------------------------"));
    }
}

/// `--cc dcqcn` on both sides: the WRITEs go out ECN-capable (ECT(0) in the IPv4 TOS), the
/// ACKs do not, and the test runs as without it (nothing marks CE on a veth).
#[test]
fn perftest_cc_dcqcn_sends_its_data_ecn_capable() {
    let ns = pair();
    let dir = crate::common::artefact_dir("cli_perftest_cc");
    let cap = dir.join("client.pcap");
    let srv =
        perftest(&ns, "write_bw --iface veth1 -I 198.18.6.2 -u 18 --timeout 10 --accept-timeout 10 -n 20 --cc dcqcn")
            .spawn()
            .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let args = format!(
        "write_bw --iface veth0 -I 198.18.6.1 -u 18 --timeout 10 -n 20 --cc dcqcn --pcap {} 198.18.6.12",
        cap.display()
    );
    let c = perftest(&ns, &args).output().unwrap();
    let s = srv.wait_with_output().unwrap();
    assert!(c.status.success() && s.status.success(), "client:\n{}\nserver:\n{}", text(&c), text(&s));
    assert_eq!(row(&text(&c)), Some((65536, 20)));
    // The capture (pcap, Ethernet): RoCEv2 frames' TOS by BTH opcode.
    let bytes = std::fs::read(&cap).unwrap();
    let big_endian = bytes[0] == 0xa1; // (the magic as written: a1b2c3d4 or, in ns, a1b23c4d)
    let (mut writes, mut acks) = (0, 0);
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let field: [u8; 4] = bytes[at + 8..at + 12].try_into().unwrap();
        let len = if big_endian { u32::from_be_bytes(field) } else { u32::from_le_bytes(field) } as usize;
        let f = &bytes[at + 16..at + 16 + len];
        at += 16 + len;
        if f.len() < 54 || f[12..14] != [0x08, 0x00] || f[23] != 17 || f[36..38] != [0x12, 0xb7] {
            continue;
        }
        match f[42] {
            0x06..=0x0b => {
                assert_eq!(f[15] & 3, 2, "a WRITE packet not ECT(0): TOS {:#04x}", f[15]);
                writes += 1;
            }
            0x11 => {
                assert_eq!(f[15] & 3, 0, "an ACK marked ECN-capable");
                acks += 1;
            }
            _ => {}
        }
    }
    assert!(writes >= 20 * 64 && acks > 0, "{writes} WRITE packets, {acks} ACKs");
}

/// The whole DCQCN loop over a real veth (issue 37 item 6): the receiver's fault layer marks
/// CE on a share of the ECN-capable WRITEs it receives (`--fault ce=0.2,dir=rx`, a congested
/// switch's doing), its engine answers with CNPs (at most one per QP per interval), and the
/// sender's rate is cut and recovers, as both ends' counters and the sender's capture show.
#[test]
fn ce_marks_on_the_receiver_bring_cnps_and_rate_cuts_to_the_sender() {
    let ns = pair();
    let dir = crate::common::artefact_dir("cli_perftest_ce");
    let cap = dir.join("client.pcap");
    let srv = perftest(
        &ns,
        "write_bw --iface veth1 -I 198.18.6.2 -u 18 --timeout 20 --accept-timeout 10 -n 2000 --cc dcqcn \
         --fault ce=0.2,dir=rx,seed=5",
    )
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let args = format!(
        "write_bw --iface veth0 -I 198.18.6.1 -u 18 --timeout 20 -n 2000 --cc dcqcn --pcap {} 198.18.6.12",
        cap.display()
    );
    let c = perftest(&ns, &args).output().unwrap();
    let s = srv.wait_with_output().unwrap();
    let (ct, st) = (text(&c), text(&s));
    std::fs::write(dir.join("outputs.txt"), format!("client:\n{ct}\nserver:\n{st}")).unwrap();
    assert!(c.status.success() && s.status.success(), "client:\n{ct}\nserver:\n{st}");
    assert_eq!(row(&ct), Some((65536, 2000)));
    let num = |t: &str, after: &str| -> u64 {
        let i = t.find(after).unwrap_or_else(|| panic!("no '{after}' in:\n{t}")) + after.len();
        t[i..].trim_start().split(|ch: char| !ch.is_ascii_digit()).next().unwrap().parse().unwrap()
    };
    let marked = num(&st, "CE marked");
    let ce_received = num(&st, "CE received");
    let cnps_sent = num(&st, "CNPs sent");
    let cnps_received = num(&ct, "CNPs received");
    let cuts = num(&ct, "rate cuts");
    let recovered = num(&ct, "increases");
    assert!(marked > 100 && ce_received == marked, "server: {marked} marked, {ce_received} received:\n{st}");
    assert!(cnps_sent > 0 && cnps_sent <= ce_received, "server: {cnps_sent} CNPs for {ce_received} CE:\n{st}");
    assert!(cnps_received > 0 && cuts > 0 && recovered > 0, "client:\n{ct}");
    // The CNPs in the sender's capture: RoCEv2 opcode 0x81, from the receiver, one per CNP
    // the sender counted.
    let frames = roce_decode::capture::read_file(&cap).unwrap();
    let cnps = frames
        .iter()
        .filter(|f| f.data.len() > 42 && f.data[12..14] == [0x08, 0x00] && f.data[36..38] == [0x12, 0xb7])
        .filter(|f| f.data[42] == 0x81 && f.data[26..30] == [198, 18, 6, 2])
        .count() as u64;
    assert_eq!(cnps, cnps_received, "CNPs captured vs counted:\n{ct}");
}

/// A fake perftest peer in the namespace on 198.18.6.12:`port`: it accepts, reads the
/// client's 16-byte version, answers `version`, then reads until the connection closes.
/// Returns how long the close took after its answer.
fn fake_server(ns: &Netns, port: u16, version: &'static str) -> std::thread::JoinHandle<Duration> {
    let path = format!("/run/netns/{}", ns.0);
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        let f = std::fs::File::open(&path).unwrap();
        nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let l = TcpListener::bind(("198.18.6.12", port)).unwrap();
        tx.send(()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let mut v = [0u8; 16];
        s.read_exact(&mut v).unwrap();
        assert_eq!(&v[..5], b"6.06\0");
        let mut mine = [0u8; 16];
        mine[..version.len()].copy_from_slice(version.as_bytes());
        s.write_all(&mine).unwrap();
        let t0 = Instant::now();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        t0.elapsed()
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    h
}

#[test]
fn perftest_refuses_another_version_naming_both() {
    let ns = pair();
    let fake = fake_server(&ns, 18601, "6.29");
    let t0 = Instant::now();
    let o = perftest(&ns, "write_bw --iface veth0 -I 198.18.6.1 -p 18601 --timeout 10 198.18.6.12").output().unwrap();
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("\"6.29\"") && out.contains("\"6.06\""), "{out}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}\n{out}", t0.elapsed());
    // The peer sees the connection closed at once: no hang on either side.
    assert!(fake.join().unwrap() < Duration::from_secs(5));
    // One older than perftest's own floor (5.70).
    let fake = fake_server(&ns, 18602, "5.60");
    let o = perftest(&ns, "send_lat --iface veth0 -I 198.18.6.1 -p 18602 --timeout 10 198.18.6.12").output().unwrap();
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("\"5.60\"") && out.contains("5.70") && out.contains("\"6.06\""), "{out}");
    assert!(fake.join().unwrap() < Duration::from_secs(5));
}

#[test]
fn perftest_peer_vanishing_mid_test_is_a_completion_error() {
    let ns = pair();
    // A long write_bw; the server is killed while the client writes.
    let mut srv = perftest(&ns, "write_bw --iface veth1 -I 198.18.6.2 -n 100000000 --timeout 10").spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let cli =
        perftest(&ns, "write_bw --iface veth0 -I 198.18.6.1 -n 100000000 --timeout 10 198.18.6.12").spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    srv.kill().unwrap();
    let _ = srv.wait();
    let t0 = Instant::now();
    let o = cli.wait_with_output().unwrap();
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    // RC retries exhausted: perftest's words and ibv_wc_status_str's name.
    assert!(out.contains("Completion with error at client"), "{out}");
    assert!(out.contains("Failed status 12") && out.contains("transport retry counter exceeded"), "{out}");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
}

#[test]
fn perftest_sigint_while_waiting_exits_130() {
    let ns = pair();
    let srv = perftest(&ns, "send_bw --iface veth1 -I 198.18.6.2 -p 18603").spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // `ip netns exec` execs roce: the child's pid is roce's.
    let _ = Command::new("kill").args(["-INT", &srv.id().to_string()]).status();
    let o = srv.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", text(&o));
}
