//! `roce pingpong rc|uc|ud|srq` against `roce pingpong` in a network namespace this test
//! creates (198.18.0.0/15 only): each kind over raw sockets on the two ends of a veth pair,
//! and over the udp transport; both ends exit 0 and print the examples' lines. Then the
//! failures: a peer killed mid-run (RC: the retry counter runs out and the client says so as
//! the example does; UD: no completion within --timeout), a stop by SIGTERM (143), and usage
//! errors. Needs root (CI runs as root). The same tool against the kernel's examples is
//! tests/interop/pingpong.rs.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::netns::Netns;

/// v0 (kernel 198.18.9.10, stack 198.18.9.1) ↔ v1 (kernel 198.18.9.11, stack 198.18.9.2).
fn veth_pair() -> Netns {
    let ns = Netns::new("pingpong");
    ns.sh("ip link add v0 type veth peer name v1; ip link set v0 up; ip link set v1 up");
    ns.sh("ip addr add 198.18.9.10/24 dev v0; ip addr add 198.18.9.11/24 dev v1");
    ns
}

fn roce(ns: &Netns, args: &str) -> Command {
    let mut c = ns.roce(args.split_whitespace());
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

fn text(o: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Wait until the server listens on `port` (the client does not retry its connect).
fn wait_listening(ns: &Netns, port: u16) {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        let o = ns.cmd("ss").args(["-ltn", &format!("sport = :{port}")]).output().unwrap();
        if String::from_utf8_lossy(&o.stdout).contains(&format!(":{port}")) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("nothing listens on {port}");
}

/// One run: server `srv` args, client `cli` args (the server's host last); both outputs.
fn run_pair(ns: &Netns, port: u16, srv: &str, cli: &str) -> (std::process::Output, std::process::Output) {
    let s = roce(ns, &format!("{srv} -p {port}")).spawn().unwrap();
    wait_listening(ns, port);
    let c = roce(ns, &format!("{cli} -p {port}")).output().unwrap();
    (s.wait_with_output().unwrap(), c)
}

fn assert_lines(who: &str, out: &str, size: u64, iters: u64, qps: usize, ud: bool) {
    let sep = if ud { ':' } else { ',' };
    let local = out.lines().filter(|l| l.starts_with("  local address:  LID 0x0000, QPN 0x")).collect::<Vec<_>>();
    assert_eq!(local.len(), qps, "{who}:\n{out}");
    assert!(local.iter().all(|l| l.contains(&format!("{sep} GID ::ffff:198.18.9."))), "{who}:\n{out}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("  remote address: LID 0x0000, QPN 0x")).count(),
        qps,
        "{who}:\n{out}"
    );
    let bytes = format!("{} bytes in ", size * iters * 2);
    assert!(out.lines().any(|l| l.starts_with(&bytes) && l.ends_with(" Mbit/sec")), "{who}: no '{bytes}':\n{out}");
    let it = format!("{iters} iters in ");
    assert!(out.lines().any(|l| l.starts_with(&it) && l.ends_with(" usec/iter")), "{who}: no '{it}':\n{out}");
}

#[test]
fn pingpong_every_kind_between_two_stacks() {
    let ns = veth_pair();
    let cases = [("rc", 4096, 1), ("uc", 4096, 1), ("ud", 1024, 1), ("srq", 4096, 4)];
    for (i, (kind, size, qps)) in cases.into_iter().enumerate() {
        let extra = if kind == "srq" { " -q 4" } else { "" };
        // Raw sockets, the stacks' own addresses.
        let port = 18515 + i as u16;
        let (s, c) = run_pair(
            &ns,
            port,
            &format!("pingpong {kind} -g 1 -n 100 --iface v1 -I 198.18.9.2 --timeout 10{extra}"),
            &format!("pingpong {kind} -g 1 -n 100 --iface v0 -I 198.18.9.1 --timeout 10{extra} 127.0.0.1"),
        );
        let (st, ct) = (text(&s), text(&c));
        assert!(c.status.success(), "{kind} client:\n{ct}\nserver:\n{st}");
        assert!(s.status.success(), "{kind} server:\n{st}\nclient:\n{ct}");
        assert_lines(&format!("{kind} client"), &ct, size, 100, qps, kind == "ud");
        assert_lines(&format!("{kind} server"), &st, size, 100, qps, kind == "ud");
        // The udp transport: kernel sockets on the kernel's addresses, no raw socket.
        let port = 18600 + i as u16;
        let udp_size = if kind == "ud" { 1000 } else { 2000 };
        let (s, c) = run_pair(
            &ns,
            port,
            &format!("pingpong {kind} -g 1 -n 50 -s {udp_size} --iface v1 -I 198.18.9.11 --transport udp --timeout 10{extra}"),
            &format!(
                "pingpong {kind} -g 1 -n 50 -s {udp_size} --iface v0 -I 198.18.9.10 --transport udp --timeout 10{extra} 198.18.9.11"
            ),
        );
        let (st, ct) = (text(&s), text(&c));
        assert!(c.status.success() && s.status.success(), "{kind} udp client:\n{ct}\nserver:\n{st}");
        assert!(ct.contains("transport udp"), "{ct}");
        assert_lines(&format!("{kind} udp client"), &ct, udp_size, 50, qps, kind == "ud");
    }
}

/// A TCP server in the namespace that answers one client's exchange with `message` (the
/// peer of a pingpong whose QP does not exist), ready when this returns.
fn fake_server(ns: &Netns, port: u16, message: &str) -> std::thread::JoinHandle<()> {
    let path = format!("/run/netns/{}", ns.0);
    let mut reply = message.as_bytes().to_vec();
    reply.push(0);
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let f = std::fs::File::open(&path).unwrap();
        // Changes only this thread.
        nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let l = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
        tx.send(()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let mut m = [0u8; 52];
        s.read_exact(&mut m).unwrap();
        s.write_all(&reply).unwrap();
        let mut done = [0u8; 5];
        let _ = s.read_exact(&mut done);
    });
    rx.recv().unwrap();
    t
}

fn spawn(ns: &Netns, args: &str) -> Child {
    roce(ns, args).spawn().unwrap()
}

fn kill(child: &Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid (`ip netns exec` execs the command).
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

#[test]
fn a_vanished_peer_ends_the_run_with_the_examples_words() {
    let ns = veth_pair();
    // RC: the peer's QP is gone (a fake exchange names QPN 0x999 at the kernel's own address,
    // where no RDMA device answers); the client's first SEND runs out of retries (timeout 14,
    // retry 7: about half a second) and the client says so as ibv_rc_pingpong does.
    let fake = fake_server(&ns, 18700, "0000:000999:000001:00000000000000000000ffffc612090b");
    let t0 = Instant::now();
    let c = roce(&ns, "pingpong rc -g 1 -n 1000 --iface v0 -I 198.18.9.1 -p 18700 --timeout 10 127.0.0.1")
        .output()
        .unwrap();
    let ct = text(&c);
    let _ = fake.join();
    assert_eq!(c.status.code(), Some(1), "{ct}");
    assert!(ct.contains("Failed status transport retry counter exceeded (12) for wr_id 2"), "{ct}");
    assert!(t0.elapsed() < Duration::from_secs(8), "{:?}\n{ct}", t0.elapsed());

    // UD: nothing answers for a vanished peer; the run ends after --timeout without a completion.
    let (s, c) = run_pair(
        &ns,
        18701,
        "pingpong ud -g 1 -n 1 --iface v1 -I 198.18.9.2",
        "pingpong ud -g 1 -n 1000 --iface v0 -I 198.18.9.1 --timeout 1 127.0.0.1",
    );
    let (st, ct) = (text(&s), text(&c));
    assert!(s.status.success(), "{st}");
    assert_eq!(c.status.code(), Some(1), "{ct}");
    assert!(ct.contains("no completion within 1.0 s: 2 of 1000 sends completed, 1 of 1000 messages received"), "{ct}");

    // SIGTERM while waiting for a client: the QP destroyed, the counters printed, exit 143.
    let srv = spawn(&ns, "pingpong srq -g 1 -q 2 --iface v1 -I 198.18.9.2 -p 18702");
    wait_listening(&ns, 18702);
    kill(&srv, libc::SIGTERM);
    let s = srv.wait_with_output().unwrap();
    let st = text(&s);
    assert_eq!(s.status.code(), Some(143), "{st}");
    assert!(st.contains("SIGTERM: 2 QP(s) destroyed") && st.contains("counters: rx "), "{st}");

    // A server nobody connects to ends after --timeout.
    let o = roce(&ns, "pingpong uc -g 1 --iface v1 -I 198.18.9.2 -p 18703 --timeout 0.5").output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("accept() failed: nothing within 0.5 s"), "{}", text(&o));
}

#[test]
fn pingpong_usage_errors() {
    let ns = veth_pair();
    let run = |args: &str| {
        let o = roce(&ns, args).output().unwrap();
        (o.status.code(), text(&o))
    };
    let (c, t) = run("pingpong rc -m 1000 --iface v0 -I 198.18.9.1");
    assert_eq!(c, Some(2), "{t}");
    assert!(t.contains("one of 256, 512, 1024, 2048, 4096"), "{t}");
    let (c, t) = run("pingpong srq -q 300 -r 500 --iface v0 -I 198.18.9.1");
    assert_eq!(c, Some(1), "{t}");
    assert!(t.contains("num_qp 300 must be less than 255"), "{t}");
    let (c, t) = run("pingpong srq -q 20 -r 10 --iface v0 -I 198.18.9.1");
    assert_eq!(c, Some(1), "{t}");
    assert!(t.contains("rx_depth 10 is too small for 20 QPs"), "{t}");
    // veth's 1500-byte MTU: a 1024-byte port MTU.
    let (c, t) = run("pingpong ud -s 2048 --iface v0 -I 198.18.9.1");
    assert_eq!(c, Some(1), "{t}");
    assert!(t.contains("Requested size larger than port MTU (1024)"), "{t}");
    let (c, t) = run("pingpong rc -g 7 --iface v0 -I 198.18.9.1 127.0.0.1");
    assert_eq!(c, Some(1), "{t}");
    assert!(t.contains("can't read sgid of index 7"), "{t}");
    let (c, t) = run("pingpong rc --iface nosuch0 -I 198.18.9.1");
    assert_eq!(c, Some(3), "{t}");
    let (c, _) = run("pingpong xx --iface v0 -I 198.18.9.1");
    assert_eq!(c, Some(2));
    // The peer sent the zero GID (no -g): refused with the reason, not a hang.
    let (s, c) = run_pair(
        &ns,
        18710,
        "pingpong rc -g 1 --iface v1 -I 198.18.9.2 --timeout 3",
        "pingpong rc --iface v0 -I 198.18.9.1 --timeout 3 127.0.0.1",
    );
    assert_eq!(s.status.code(), Some(1), "{}", text(&s));
    assert!(text(&s).contains("the peer sent the zero GID"), "{}", text(&s));
    assert_eq!(c.status.code(), Some(1), "{}", text(&c));
}
