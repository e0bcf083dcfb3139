//! RC goodput between two engines on a veth pair between two network namespaces this bench
//! creates (198.18.4.0/24 only; needs root), against kernel TCP on the same veth, measured in
//! the same run and printed as ratios, at veth MTU 9000 (RC path MTU 4096) and 1500 (1024),
//! the same MTU for RC and TCP, each figure against TCP twice: with veth's offloads (a 64 KiB
//! write crosses veth as one GSO segment) and with GSO/TSO/GRO off on both ends (`ethtool -K`:
//! TCP then crosses veth in MTU-sized packets, as RC does, the equal-packet anchor):
//! - RC SEND and RC RDMA WRITE goodput with 64 KiB messages against one TCP connection
//!   writing 64 KiB at a time;
//! - messages per second at 64 B: RC SENDs against 64-byte TCP writes (TCP_NODELAY);
//! - CPU per message on each side (getrusage per thread);
//!
//! each through the `Driver` loop (the stack's frames drained into `send_batch`, received
//! through `recv_batch`) on a raw socket with three kinds of I/O: `sendmmsg`/`recvmmsg`; a
//! PACKET_TX_RING with `recvmmsg` (what the CLI tools use), also with the engines on MACs of
//! their own (the receiving kernel then drops their frames at once as another host's instead
//! of routing each to an address it does not own); both PACKET_MMAP rings (a TPACKET_V3
//! receive block is handed over when full or after 1 ms, which stalls ACKs). Everything takes
//! turns three times; each figure is its median round.
//!
//! The QPs are connected by hand (attributes exchanged in memory, as ibv_rc_pingpong does over
//! its socket); the CM is not in the measured path. `cargo bench -p roce-net --bench rc_veth`;
//! `ROCE_BENCH_MTU=9000` (or 1500) runs one MTU. Under `cargo test --benches` (no `--bench`
//! argument) it runs once with 20 and 500 messages, as root, so that it cannot rot.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use roce_cm::rc::{Access, QpAttr, QpCap, QpState, RecvWr, SendOp, SendWr, Sge, WcStatus};
use roce_cm::{Stack, StackConfig};
use roce_net::driver::Driver;
use roce_net::raw::RawSocket;
use roce_net::ring::RingConfig;

mod veth;
use veth::{enter, sh, thread_cpu, Nets};

/// A named thread (the name shows in `perf report --sort comm`).
fn spawn<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> std::thread::JoinHandle<T> {
    std::thread::Builder::new().name(name.into()).spawn(f).expect("spawn")
}

/// The veth pair, with fixed MACs.
fn nets() -> Nets {
    let macs = ("02:00:00:00:04:01", "02:00:00:00:04:02");
    Nets::pair("rcb", Some(macs), Ipv4Addr::new(198, 18, 4, 11), Ipv4Addr::new(198, 18, 4, 12))
}

const MAC_A: [u8; 6] = [2, 0, 0, 0, 4, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 4, 2];
/// The engines' own MACs, other than the veth ends' (for `Setup::own_macs`).
const OWN_MAC_A: [u8; 6] = [2, 0, 0, 0, 4, 0xa1];
const OWN_MAC_B: [u8; 6] = [2, 0, 0, 0, 4, 0xa2];
const IP_A: Ipv4Addr = Ipv4Addr::new(198, 18, 4, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(198, 18, 4, 2);
const WINDOW: usize = 64;

/// One measured run: (messages, seconds, sender CPU µs/msg, receiver CPU µs/msg).
#[derive(Debug, Clone, Copy)]
struct Run {
    msgs: u64,
    secs: f64,
    tx_us: f64,
    rx_us: f64,
}

/// The conditions of one set of runs: the IB path MTU RDMA-CM picks for the veth's MTU
/// (iboe_get_mtu: the largest IB MTU below link MTU − headers), and the raw socket's I/O.
#[derive(Debug, Clone, Copy)]
struct Setup {
    path_mtu: u32,
    /// The engines use MACs of their own instead of the veth ends' (as on a VF or macvlan
    /// with its own address): the receiving kernel drops their frames at once as another
    /// host's instead of routing each to an address it does not own.
    own_macs: bool,
    rings: RingConfig,
}

fn engine(ns: &str, iface: &str, mac: [u8; 6], ip: Ipv4Addr, seed: u64, setup: Setup) -> Driver<RawSocket> {
    enter(ns);
    let mut raw = RawSocket::open_with(iface, setup.rings).expect("raw socket");
    assert!(raw.ring_fallback().is_none(), "ring set-up: {:?}", raw.ring_fallback());
    // A window of packets arrives in one burst: give the socket room for it (rxe has the
    // NIC's ring; the kernel's TCP has its own buffers and congestion control).
    raw.set_buffer_sizes(32 << 20, 8 << 20).expect("socket buffers");
    let mut cfg = StackConfig::new(mac, ip, 24);
    cfg.seed = seed;
    let mut d = Driver::new(raw, Stack::new(cfg));
    d.stack.set_port_mtu(match setup.path_mtu {
        4096 => 5,
        _ => 3,
    });
    d
}

fn connect(
    d: &mut Driver<RawSocket>,
    qpn: u32,
    peer: Ipv4Addr,
    peer_mac: [u8; 6],
    peer_qpn: u32,
    (sq, rq): (u32, u32),
    setup: Setup,
) {
    let mut at = QpAttr::new(IpAddr::V4(peer), peer_qpn);
    at.path_mtu = setup.path_mtu;
    at.sq_psn = sq;
    at.rq_psn = rq;
    at.dmac = Some(peer_mac);
    at.timeout = 14;
    let now = d.now();
    for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
        d.stack.rc_mut().modify_qp(now, qpn, s, &at).expect("modify_qp");
    }
}

/// RC: `n` messages of `size` bytes, SEND (`write` false) or RDMA WRITE, `WINDOW` in flight.
fn rc_run(nets: &Nets, n: u64, size: usize, write: bool, setup: Setup) -> Run {
    let (a, b) = (nets.0.clone(), nets.1.clone());
    let (rkey_tx, rkey_rx) = mpsc::channel::<(u64, u32)>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let rx = spawn("rc-recv", move || {
        let (mac_a, mac_b) = if setup.own_macs { (OWN_MAC_A, OWN_MAC_B) } else { (MAC_A, MAC_B) };
        let mut d = engine(&b, "v2", mac_b, IP_B, 2, setup);
        let q = d.stack.create_rc_qp(QpCap { max_send_wr: 1024, max_recv_wr: 4096 }).unwrap();
        connect(&mut d, q, IP_A, mac_a, q, (200, 100), setup);
        let mr = d.stack.rc_mut().reg_mr(size.max(8), Access::ALL).unwrap();
        let post = |d: &mut Driver<RawSocket>| {
            let wr = RecvWr { wr_id: 0, sg_list: vec![Sge { addr: mr.addr, length: size as u32, lkey: mr.lkey }] };
            d.stack.rc_mut().post_recv(q, wr).unwrap();
        };
        if !write {
            for _ in 0..4 * WINDOW {
                post(&mut d);
            }
        }
        rkey_tx.send((mr.addr, mr.rkey)).unwrap();
        let c0 = thread_cpu();
        let mut got = 0u64;
        let mut t_first = None;
        let mut t_last = Instant::now();
        let _ = d.run_until(Duration::from_secs(120), |d| {
            while let Some(wc) = d.stack.rc_mut().poll_cq() {
                assert_eq!(wc.status, WcStatus::Success);
                got += 1;
                t_last = Instant::now();
                t_first.get_or_insert(t_last);
                if !write {
                    post(d);
                }
            }
            if write {
                return done_rx.try_recv().is_ok();
            }
            got >= n
        });
        if write {
            got = n;
        }
        let cpu = thread_cpu() - c0;
        let _ = d.run_for(Duration::from_millis(20)); // the last ACKs
        (got, cpu, t_first, t_last)
    });
    let tx = spawn("rc-send", move || {
        let (mac_a, mac_b) = if setup.own_macs { (OWN_MAC_A, OWN_MAC_B) } else { (MAC_A, MAC_B) };
        let mut d = engine(&a, "v1", mac_a, IP_A, 1, setup);
        let q = d.stack.create_rc_qp(QpCap { max_send_wr: 1024, max_recv_wr: 16 }).unwrap();
        connect(&mut d, q, IP_B, mac_b, q, (100, 200), setup);
        let mr = d.stack.rc_mut().reg_mr(size.max(8), Access::ALL).unwrap();
        let (raddr, rkey) = rkey_rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let c0 = thread_cpu();
        let t0 = Instant::now();
        let (mut posted, mut done) = (0u64, 0u64);
        let _ = d.run_until(Duration::from_secs(120), |d| {
            while let Some(wc) = d.stack.rc_mut().poll_cq() {
                assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
                done += 1;
            }
            let now = d.now();
            while posted < n && (posted - done) < WINDOW as u64 {
                let op = if write { SendOp::Write { remote_addr: raddr, rkey } } else { SendOp::Send };
                let sg = vec![Sge { addr: mr.addr, length: size as u32, lkey: mr.lkey }];
                let wr = SendWr { wr_id: posted, op, sg_list: sg, signaled: true, solicited: false };
                d.stack.rc_mut().post_send(now, q, wr).unwrap();
                posted += 1;
            }
            done >= n
        });
        let secs = t0.elapsed().as_secs_f64();
        let cpu = thread_cpu() - c0;
        let c = d.stack.rc().counters();
        if c.completer_retry_err > 0 || c.rcvd_seq_err > 0 {
            println!(
                "  (sender: {} retries, {} sequence NAKs, {} local ACK timeouts, {} packets resent)",
                c.completer_retry_err, c.rcvd_seq_err, c.local_ack_timeout_err, c.retransmitted_pkts
            );
        }
        done_tx.send(()).unwrap();
        (done, secs, cpu)
    });
    let (done, secs, tx_cpu) = tx.join().unwrap();
    let (got, rx_cpu, _, _) = rx.join().unwrap();
    assert_eq!((done, got), (n, n), "every message completed on both sides");
    Run { msgs: n, secs, tx_us: tx_cpu.as_secs_f64() * 1e6 / n as f64, rx_us: rx_cpu.as_secs_f64() * 1e6 / n as f64 }
}

/// Kernel TCP on the same veth: `n` writes of `size` bytes on one connection.
fn tcp_run(nets: &Nets, n: u64, size: usize) -> Run {
    let (a, b) = (nets.0.clone(), nets.1.clone());
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let rx = spawn("tcp-recv", move || {
        enter(&b);
        let l = TcpListener::bind("198.18.4.12:9471").unwrap();
        ready_tx.send(()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let c0 = thread_cpu();
        let mut buf = vec![0u8; 1 << 16];
        let mut left = n * size as u64;
        while left > 0 {
            let k = s.read(&mut buf).unwrap();
            assert!(k > 0);
            left -= k as u64;
        }
        s.write_all(b"k").unwrap();
        thread_cpu() - c0
    });
    let tx = spawn("tcp-send", move || {
        enter(&a);
        ready_rx.recv().unwrap();
        let mut s = TcpStream::connect("198.18.4.12:9471").unwrap();
        s.set_nodelay(true).unwrap();
        let msg = vec![7u8; size];
        let c0 = thread_cpu();
        let t0 = Instant::now();
        for _ in 0..n {
            s.write_all(&msg).unwrap();
        }
        let mut k = [0u8; 1];
        s.read_exact(&mut k).unwrap(); // everything arrived
        (t0.elapsed().as_secs_f64(), thread_cpu() - c0)
    });
    let (secs, tx_cpu) = tx.join().unwrap();
    let rx_cpu = rx.join().unwrap();
    Run { msgs: n, secs, tx_us: tx_cpu.as_secs_f64() * 1e6 / n as f64, rx_us: rx_cpu.as_secs_f64() * 1e6 / n as f64 }
}

/// The run with the median duration.
fn median(mut v: Vec<Run>) -> Run {
    v.sort_by(|a, b| a.secs.total_cmp(&b.secs));
    v[v.len() / 2]
}

/// Prints `r` against kernel TCP with veth's offloads (`base`: a 64 KiB write crosses veth as
/// one GSO segment) and with them off (`per_mtu`: MTU-sized packets, as RC sends them).
fn report(what: &str, size: usize, r: Run, base: Run, per_mtu: Run) {
    let mbps = |r: Run| r.msgs as f64 * size as f64 * 8.0 / r.secs / 1e6;
    let mps = |r: Run| r.msgs as f64 / r.secs;
    let cpu = |r: Run| r.tx_us + r.rx_us;
    println!(
        "{what}: {:.0} Mbit/s, {:.0} msg/s, CPU {:.2} µs/msg sending, {:.2} µs/msg receiving | kernel TCP {:.0} Mbit/s, {:.0} msg/s, {:.2} / {:.2} µs/msg | TCP per-MTU packet {:.0} Mbit/s, {:.0} msg/s, {:.2} / {:.2} µs/msg | ratio vs TCP: goodput {:.2}, msg/s {:.2}, CPU/msg (send+recv) {:.2} | vs TCP per-MTU packet: goodput {:.2}, msg/s {:.2}, CPU/msg {:.2}",
        mbps(r),
        mps(r),
        r.tx_us,
        r.rx_us,
        mbps(base),
        mps(base),
        base.tx_us,
        base.rx_us,
        mbps(per_mtu),
        mps(per_mtu),
        per_mtu.tx_us,
        per_mtu.rx_us,
        mbps(r) / mbps(base),
        mps(r) / mps(base),
        cpu(r) / cpu(base),
        mbps(r) / mbps(per_mtu),
        mps(r) / mps(per_mtu),
        cpu(r) / cpu(per_mtu),
    );
}

/// Packets `dev` in `ns` has received (its own count, from sysfs).
fn rx_packets(ns: &str, dev: &str) -> u64 {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "cat", &format!("/sys/class/net/{dev}/statistics/rx_packets")])
        .output()
        .expect("ip netns exec");
    String::from_utf8_lossy(&out.stdout).trim().parse().expect("rx_packets")
}

/// veth's segmentation offloads on both ends: on (the default: TCP hands veth 64 KiB GSO
/// segments and GRO merges on receipt) or off (TCP crosses veth in MTU-sized packets, as RC
/// does). Needs ethtool (tests/setup.sh installs it).
fn tcp_offloads(nets: &Nets, on: bool) {
    let v = if on { "on" } else { "off" };
    for (ns, dev) in [(&nets.0, "v1"), (&nets.1, "v2")] {
        sh(&format!("ip netns exec {ns} ethtool -K {dev} gso {v} tso {v} gro {v}"));
    }
}

fn main() {
    // `cargo bench` passes --bench: the full figures. `cargo test --benches` does not: one
    // short run of the same code (as root), so that the bench cannot rot.
    let full = std::env::args().any(|a| a == "--bench");
    let (n_big, n_small, rounds) = if full { (2000, 100_000, 3) } else { (20, 500, 1) };
    // ROCE_BENCH_MTU=9000 (or 1500): only that MTU (for profiling).
    let only: Option<u32> = std::env::var("ROCE_BENCH_MTU").ok().and_then(|v| v.parse().ok());
    if !full {
        println!(
            "rc_veth in test mode ({n_big} × 64 KiB, {n_small} × 64 B; figures not meaningful: `cargo bench` measures)"
        );
    }
    let nets = nets();
    let big = 1 << 16;
    let plain = RingConfig::NONE;
    for (link_mtu, path_mtu) in [(9000, 4096), (1500, 1024)] {
        if only.is_some_and(|m| m != link_mtu) {
            continue;
        }
        sh(&format!("ip -n {} link set v1 mtu {link_mtu} && ip -n {} link set v2 mtu {link_mtu}", nets.0, nets.1));
        println!("veth MTU {link_mtu} on both sides (RC path MTU {path_mtu}; TCP MSS from the same MTU), median of {rounds} rounds:");
        let tx_ring = RingConfig { qdisc_bypass: true, ..RingConfig::tx_only() };
        let both = RingConfig { qdisc_bypass: true, ..RingConfig::default() };
        let ios = [
            ("sendmmsg/recvmmsg", plain, false),
            ("TX ring, recvmmsg", tx_ring, false),
            ("TX ring, recvmmsg, engines' own MACs", tx_ring, true),
            ("TX ring, V3 RX ring", both, false),
        ];
        // Everything takes turns, `rounds` times; each figure is its median round (other
        // processes share the machine: one round alone is noisy).
        let (mut tcp_big, mut tcp_small) = (Vec::new(), Vec::new());
        let (mut mtu_big, mut mtu_small) = (Vec::new(), Vec::new());
        // Packets v2 received per 64 KiB write (the peer's count: data, and the connection's
        // few handshake packets), to show what crossed the veth.
        let (mut gso_pkts, mut mtu_pkts) = (Vec::new(), Vec::new());
        let mut rc: Vec<[Vec<Run>; 3]> = ios.iter().map(|_| Default::default()).collect();
        for _ in 0..rounds {
            let p0 = rx_packets(&nets.1, "v2");
            tcp_big.push(tcp_run(&nets, n_big, big));
            let p1 = rx_packets(&nets.1, "v2");
            gso_pkts.push((p1 - p0) as f64 / n_big as f64);
            tcp_small.push(tcp_run(&nets, n_small, 64));
            tcp_offloads(&nets, false);
            let p0 = rx_packets(&nets.1, "v2");
            mtu_big.push(tcp_run(&nets, n_big, big));
            let p1 = rx_packets(&nets.1, "v2");
            mtu_pkts.push((p1 - p0) as f64 / n_big as f64);
            mtu_small.push(tcp_run(&nets, n_small, 64));
            tcp_offloads(&nets, true);
            for (&(_, rings, own_macs), runs) in ios.iter().zip(rc.iter_mut()) {
                let setup = Setup { path_mtu, rings, own_macs };
                runs[0].push(rc_run(&nets, n_big, big, false, setup));
                runs[1].push(rc_run(&nets, n_big, big, true, setup));
                runs[2].push(rc_run(&nets, n_small, 64, false, setup));
            }
        }
        let (tcp_big, tcp_small) = (median(tcp_big), median(tcp_small));
        let (mtu_big, mtu_small) = (median(mtu_big), median(mtu_small));
        let mid = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        println!(
            "  packets v2 received per 64 KiB TCP write: {:.1} with offloads, {:.1} with gso/tso/gro off (RC: {} per message)",
            mid(gso_pkts),
            mid(mtu_pkts),
            big as u32 / path_mtu
        );
        report("  kernel TCP per-MTU packet (gso/tso/gro off): 64 KiB", big, mtu_big, tcp_big, mtu_big);
        for (&(io, _, _), runs) in ios.iter().zip(rc) {
            let [send_big, write_big, send_small] = runs.map(median);
            report(&format!("  {io}: RC SEND 64 KiB"), big, send_big, tcp_big, mtu_big);
            report(&format!("  {io}: RC RDMA WRITE 64 KiB"), big, write_big, tcp_big, mtu_big);
            report(&format!("  {io}: RC SEND 64 B"), 64, send_small, tcp_small, mtu_small);
        }
    }
}
