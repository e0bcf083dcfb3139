//! RC goodput between two engines on a veth pair between two network namespaces this bench
//! creates (198.18.4.0/24 only; needs root), against one kernel TCP stream on the same veth in
//! the same run, printed as ratios: RC SEND and RC RDMA WRITE of 64 KiB messages, on one QP and
//! on four, at veth MTU 9000 (RC path MTU 4096) and 1500 (1024), on both transports:
//! - raw: an AF_PACKET socket with a PACKET_TX_RING and `recvmmsg` (what the CLI tools open);
//! - udp: the kernel UDP socket on port 4791 (`RoceUdpSocket`: UDP_SEGMENT on send, UDP_GRO and
//!   `recvmmsg` on receive).
//!
//! Each figure: goodput (Mbit/s of message bytes) and CPU seconds per GB moved (user + system,
//! both sides' threads, getrusage per thread), and both as ratios to the TCP stream's.
//!
//! The TCP stream is the bench's own (one connection, 64 KiB writes, veth's default offloads,
//! Nagle on: what `iperf3 -c` does by default), not iperf3 itself: its CPU is then measured the
//! same way as RC's (per thread, both ends in this process), where iperf3 reports its own
//! process's percentages. `ROCE_BENCH_IPERF3=1` also runs `iperf3 -c` on the same veth as a
//! cross-check of the stream's goodput.
//!
//! Everything runs through the `Driver` loop (the stack's frames drained into `send_batch`,
//! received through `recv_batch`), with a 50 µs busy poll after each turn that received, as
//! `roce perftest` runs it (`ROCE_BENCH_BUSY_POLL_US=0` turns it off; its CPU is counted). The QPs are connected by hand (attributes exchanged in
//! memory, as ibv_rc_pingpong does over its socket); the CM is not in the measured path.
//! `cargo bench -p roce-net --bench rc_veth`; `ROCE_BENCH_MTU=9000` (or 1500) runs one MTU,
//! `ROCE_BENCH_TRANSPORT=udp` (or raw; raw-ring or raw-gso for one of raw's two ways) one
//! transport, `ROCE_BENCH_QPS=1` (or 4) one QP count, `ROCE_BENCH_MSGS` sets the messages per
//! run (2000) — for profiling. `ROCE_BENCH_TRANSPORT=udp-pcap` runs the udp transport plain and
//! behind a capture (`--pcap`'s `PcapDevice`, writing to a sink), with its batches passed on and,
//! as before they were, frame by frame. Everything takes turns three times; each figure is its median
//! round. Under `cargo test --benches` (no `--bench` argument) it runs once with 20 messages, as
//! root, so that it cannot rot.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use roce_cm::rc::{Access, QpAttr, QpCap, QpState, RecvWr, SendOp, SendWr, Sge, WcStatus};
use roce_cm::{NeighborResolution, Stack, StackConfig, KERNEL_NEIGHBOR_MAC};
use roce_net::device::{Device, RecvBatch};
use roce_net::driver::{Driver, MulticastFilter};
use roce_net::pcap::PcapFileWriter;
use roce_net::raw::RawSocket;
use roce_net::ring::RingConfig;
use roce_net::udp::RoceUdpSocket;
use roce_net::PcapDevice;

mod veth;
use veth::{enter, sh, thread_cpu, Nets};

/// A named thread (the name shows in `perf report --sort comm`).
/// With `ROCE_BENCH_PIN=1` every sender thread (RC and TCP) runs on CPU 0 and every receiver
/// on CPU 1, so that both sides of each comparison get the same placement.
fn spawn<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> std::thread::JoinHandle<T> {
    let pin = std::env::var("ROCE_BENCH_PIN").is_ok_and(|v| v == "1");
    let cpu = usize::from(name.ends_with("recv"));
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            if pin {
                // SAFETY: a zeroed cpu_set_t with one CPU set, for this thread.
                unsafe {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                }
            }
            f()
        })
        .expect("spawn")
}

/// The veth pair, with fixed MACs.
fn nets() -> Nets {
    let macs = ("02:00:00:00:04:01", "02:00:00:00:04:02");
    Nets::pair("rcb", Some(macs), VETH_A, VETH_B)
}

const MAC_A: [u8; 6] = [2, 0, 0, 0, 4, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 4, 2];
/// The veth ends' addresses (the udp transport binds them: a UDP socket sends from the
/// kernel's own addresses).
const VETH_A: Ipv4Addr = Ipv4Addr::new(198, 18, 4, 11);
const VETH_B: Ipv4Addr = Ipv4Addr::new(198, 18, 4, 12);
/// The raw transport's engines' own addresses.
const IP_A: Ipv4Addr = Ipv4Addr::new(198, 18, 4, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(198, 18, 4, 2);
/// Messages in flight, over all QPs.
const WINDOW: usize = 64;
/// Socket buffers: a window of 64 KiB messages in MTU-sized packets (the kernel counts each
/// packet's truesize, about twice its length at MTU 1500), beyond rmem_max as root.
const RCVBUF: usize = 32 << 20;
const SNDBUF: usize = 8 << 20;

/// The transport under the engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    Raw,
    /// raw with PACKET_VNET_HDR: runs of frames as GSO frames, no rings.
    RawGso,
    Udp,
    /// udp behind a capture that passes batches on.
    UdpPcap,
    /// udp behind a capture that sends and receives frame by frame (`--pcap` before
    /// `PcapDevice` had `send_batch`/`recv_batch`).
    UdpPcapFrameByFrame,
}

impl Transport {
    fn name(self) -> &'static str {
        match self {
            Transport::Raw => "raw (TX ring, recvmmsg)",
            Transport::RawGso => "raw GSO (PACKET_VNET_HDR, sendmmsg, recvmmsg)",
            Transport::Udp => "udp (GSO, GRO, recvmmsg)",
            Transport::UdpPcap => "udp behind a capture, batches passed on",
            Transport::UdpPcapFrameByFrame => "udp behind a capture, frame by frame",
        }
    }

    /// The `ROCE_BENCH_TRANSPORT` value that runs it alone.
    fn selected_alone_by(self) -> &'static str {
        match self {
            Transport::Raw => "raw-ring",
            Transport::RawGso => "raw-gso",
            other => other.selected_by(),
        }
    }

    /// The `ROCE_BENCH_TRANSPORT` value that runs it.
    fn selected_by(self) -> &'static str {
        match self {
            Transport::Raw | Transport::RawGso => "raw",
            Transport::Udp => "udp",
            Transport::UdpPcap | Transport::UdpPcapFrameByFrame => "udp-pcap",
        }
    }
}

/// A device seen only through `send` and `recv` (the trait's one-by-one batches).
struct FrameByFrame<D>(D);

impl<D: Device> Device for FrameByFrame<D> {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        self.0.send(frame)
    }
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        self.0.recv(buf)
    }
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        self.0.raw_fd()
    }
}

/// Either transport's device, as the CLI's port holds it (a capture's to a sink).
enum BenchDev {
    Raw(RawSocket),
    Udp(RoceUdpSocket),
    UdpPcap(PcapDevice<RoceUdpSocket, io::Sink>),
    UdpPcapFrameByFrame(PcapDevice<FrameByFrame<RoceUdpSocket>, io::Sink>),
}

/// The device behind a [`BenchDev`].
macro_rules! each_device {
    ($dev:expr, $d:ident => $body:expr) => {
        match $dev {
            BenchDev::Raw($d) => $body,
            BenchDev::Udp($d) => $body,
            BenchDev::UdpPcap($d) => $body,
            BenchDev::UdpPcapFrameByFrame($d) => $body,
        }
    };
}

impl Device for BenchDev {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        each_device!(self, d => d.send(frame))
    }
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        each_device!(self, d => d.recv(buf))
    }
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        each_device!(self, d => d.raw_fd())
    }
    fn send_batch(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        each_device!(self, d => d.send_batch(frames))
    }
    fn recv_batch(&mut self, batch: &mut RecvBatch) -> io::Result<usize> {
        each_device!(self, d => d.recv_batch(batch))
    }
    fn recv_in_place(
        &mut self,
        batch: &mut RecvBatch,
        datagram: &mut dyn FnMut(&roce_wire::datagram::Arrival, &[u8]),
    ) -> io::Result<usize> {
        each_device!(self, d => d.recv_in_place(batch, datagram))
    }
}

impl BenchDev {
    /// The UDP socket's counts, on the udp transports.
    fn udp_stats(&self) -> Option<roce_net::udp::UdpStats> {
        match self {
            BenchDev::Raw(_) => None,
            BenchDev::Udp(u) => Some(u.stats()),
            BenchDev::UdpPcap(p) => Some(p.inner().stats()),
            BenchDev::UdpPcapFrameByFrame(p) => Some(p.inner().0.stats()),
        }
    }
}

impl MulticastFilter for BenchDev {}

/// One measured run: bytes moved, seconds, CPU seconds of the sender's and the receiver's thread.
#[derive(Debug, Clone, Copy)]
struct Run {
    bytes: u64,
    secs: f64,
    tx_cpu: f64,
    rx_cpu: f64,
    /// The udp transport's batching (sender's and receiver's counters), per message.
    udp: Option<UdpBatching>,
}

/// How the udp transport batched one run's datagrams.
#[derive(Debug, Clone, Copy, Default)]
struct UdpBatching {
    /// Datagrams the sender's kernel took.
    sent: u64,
    /// Messages (one `udp_sendmsg` each: a UDP_SEGMENT run or a lone datagram).
    send_messages: u64,
    /// `sendmmsg` system calls.
    send_calls: u64,
    /// Datagrams received, the reads (GRO-coalesced) they came in, and those the receiving
    /// kernel dropped for a full receive buffer.
    received: u64,
    reads: u64,
    overflow: u64,
    /// Datagrams whose IPv4 ID the receiver took from the ICRC (not 0).
    id_from_icrc: u64,
}

impl Run {
    fn mbps(self) -> f64 {
        self.bytes as f64 * 8.0 / self.secs / 1e6
    }
    /// CPU seconds (both sides) per GB moved.
    fn cpu_per_gb(self) -> f64 {
        (self.tx_cpu + self.rx_cpu) / (self.bytes as f64 / 1e9)
    }
}

/// The conditions of one set of runs: the IB path MTU RDMA-CM picks for the veth's MTU
/// (iboe_get_mtu: the largest IB MTU below link MTU − headers), the transport, the QPs.
#[derive(Debug, Clone, Copy)]
struct Setup {
    path_mtu: u32,
    transport: Transport,
    qps: usize,
}

/// One side: `(ns, iface, veth MAC, veth address, raw transport's address)`.
type Side = (String, &'static str, [u8; 6], Ipv4Addr, Ipv4Addr);

fn engine(side: &Side, seed: u64, setup: Setup) -> Driver<BenchDev> {
    let (ns, iface, mac, veth_ip, raw_ip) = side;
    enter(ns);
    let (dev, cfg) = match setup.transport {
        Transport::Raw => {
            let tx_ring = RingConfig { qdisc_bypass: true, ..RingConfig::tx_only() };
            let mut raw = RawSocket::open_with(iface, tx_ring).expect("raw socket");
            assert!(raw.ring_fallback().is_none(), "ring set-up: {:?}", raw.ring_fallback());
            // A window of packets arrives in one burst: give the socket room for it.
            raw.set_buffer_sizes(RCVBUF, SNDBUF).expect("socket buffers");
            (BenchDev::Raw(raw), StackConfig::new(*mac, *raw_ip, 24))
        }
        Transport::RawGso => {
            let mut raw =
                RawSocket::open_with(iface, RingConfig { qdisc_bypass: true, ..RingConfig::NONE }).expect("raw socket");
            raw.enable_gso().expect("PACKET_VNET_HDR");
            raw.set_buffer_sizes(RCVBUF, SNDBUF).expect("socket buffers");
            (BenchDev::Raw(raw), StackConfig::new(*mac, *raw_ip, 24))
        }
        Transport::Udp | Transport::UdpPcap | Transport::UdpPcapFrameByFrame => {
            let info = roce_net::raw::interface(iface).expect("interface");
            let mut udp = RoceUdpSocket::open(IpAddr::V4(*veth_ip), info.index, *mac).expect("udp socket");
            udp.set_buffer_sizes(RCVBUF, SNDBUF).expect("socket buffers");
            let mut cfg = StackConfig::new(*mac, *veth_ip, 24);
            cfg.neighbors = NeighborResolution::Kernel;
            cfg.udp_source_port = Some(roce_wire::ROCEV2_UDP_PORT);
            let capture = || PcapFileWriter::new(io::sink()).expect("pcap header");
            let dev = match setup.transport {
                Transport::UdpPcap => BenchDev::UdpPcap(PcapDevice::new(udp, capture())),
                Transport::UdpPcapFrameByFrame => {
                    BenchDev::UdpPcapFrameByFrame(PcapDevice::new(FrameByFrame(udp), capture()))
                }
                _ => BenchDev::Udp(udp),
            };
            (dev, cfg)
        }
    };
    let mut cfg = cfg;
    cfg.seed = seed;
    if let Some(w) = std::env::var("ROCE_BENCH_WINDOW").ok().and_then(|v| v.parse().ok()) {
        cfg.rc_max_unacked_psns = w; // the requesters' send window in PSNs (default 512)
    }
    let mut d = Driver::new(dev, Stack::new(cfg));
    // As `roce perftest` runs its driver (DATA_PATH_BUSY_POLL); 0 turns it off.
    let busy_us: u64 = std::env::var("ROCE_BENCH_BUSY_POLL_US").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    d.set_busy_poll(Duration::from_micros(busy_us));
    d.stack.set_port_mtu(match setup.path_mtu {
        4096 => 5,
        _ => 3,
    });
    d
}

fn connect(d: &mut Driver<BenchDev>, qpn: u32, peer: &Side, peer_qpn: u32, (sq, rq): (u32, u32), setup: Setup) {
    let (ip, dmac) = match setup.transport {
        Transport::Raw | Transport::RawGso => (peer.4, peer.2),
        _ => (peer.3, KERNEL_NEIGHBOR_MAC),
    };
    let mut at = QpAttr::new(IpAddr::V4(ip), peer_qpn);
    at.path_mtu = setup.path_mtu;
    at.sq_psn = sq;
    at.rq_psn = rq;
    at.dmac = Some(dmac);
    at.timeout = 14;
    let now = d.now();
    for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
        d.stack.rc_mut().modify_qp(now, qpn, s, &at).expect("modify_qp");
    }
}

/// RC: `n` messages of `size` bytes, SEND (`write` false) or RDMA WRITE, over `setup.qps` QPs
/// taken in turn, `WINDOW` in flight in all.
fn rc_run(nets: &Nets, n: u64, size: usize, write: bool, setup: Setup) -> Run {
    let a: Side = (nets.0.clone(), "v1", MAC_A, VETH_A, IP_A);
    let b: Side = (nets.1.clone(), "v2", MAC_B, VETH_B, IP_B);
    let (a2, b2) = (a.clone(), b.clone());
    let (rkey_tx, rkey_rx) = mpsc::channel::<Vec<(u32, u64, u32)>>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let qps = setup.qps;
    let rx = spawn("rc-recv", move || {
        let mut d = engine(&b, 2, setup);
        let mut keys = Vec::new();
        for _ in 0..qps {
            let q = d.stack.create_rc_qp(QpCap { max_send_wr: 1024, max_recv_wr: 4096 }).unwrap();
            connect(&mut d, q, &a2, q, (200, 100), setup);
            let mr = d.stack.rc_mut().reg_mr(size.max(8), Access::ALL).unwrap();
            keys.push((q, mr.addr, mr.rkey, mr.lkey));
        }
        let post = |d: &mut Driver<BenchDev>, (q, addr, _, lkey): (u32, u64, u32, u32)| {
            let wr = RecvWr { wr_id: u64::from(q), sg_list: vec![Sge { addr, length: size as u32, lkey }] };
            d.stack.rc_mut().post_recv(q, wr).unwrap();
        };
        if !write {
            for &k in &keys {
                for _ in 0..2 * WINDOW {
                    post(&mut d, k);
                }
            }
        }
        rkey_tx.send(keys.iter().map(|&(q, addr, rkey, _)| (q, addr, rkey)).collect()).unwrap();
        let c0 = thread_cpu();
        let mut got = 0u64;
        let _ = d.run_until(Duration::from_secs(120), |d| {
            while let Some(wc) = d.stack.rc_mut().poll_cq() {
                assert_eq!(wc.status, WcStatus::Success);
                got += 1;
                if !write {
                    let k = keys.iter().copied().find(|k| u64::from(k.0) == wc.wr_id).expect("a QP of ours");
                    post(d, k);
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
        let reads = d
            .dev
            .udp_stats()
            .map_or((0, 0, 0, 0), |s| (s.received, s.reads, s.receive_queue_overflow, s.ipv4_id_from_icrc));
        (got, cpu, reads)
    });
    let tx = spawn("rc-send", move || {
        let mut d = engine(&a, 1, setup);
        let mut qs = Vec::new();
        for _ in 0..qps {
            let q = d.stack.create_rc_qp(QpCap { max_send_wr: 1024, max_recv_wr: 16 }).unwrap();
            connect(&mut d, q, &b2, q, (100, 200), setup);
            qs.push(q);
        }
        let mr = d.stack.rc_mut().reg_mr(size.max(8), Access::ALL).unwrap();
        let remote = rkey_rx.recv().unwrap();
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
                let i = posted as usize % qps;
                let (_, raddr, rkey) = remote[i];
                let op = if write { SendOp::Write { remote_addr: raddr, rkey } } else { SendOp::Send };
                let sg = vec![Sge { addr: mr.addr, length: size as u32, lkey: mr.lkey }];
                let wr = SendWr { wr_id: posted, op, sg_list: sg, signaled: true, solicited: false, inline: None };
                d.stack.rc_mut().post_send(now, qs[i], wr).unwrap();
                posted += 1;
            }
            done >= n
        });
        let secs = t0.elapsed().as_secs_f64();
        let cpu = thread_cpu() - c0;
        let c = d.stack.rc().counters();
        if c.completer_retry_err > 0 || c.rcvd_seq_err > 0 || c.local_ack_timeout_err > 0 {
            println!(
                "    (sender: {} retries, {} sequence NAKs, {} local ACK timeouts, {} packets resent)",
                c.completer_retry_err, c.rcvd_seq_err, c.local_ack_timeout_err, c.retransmitted_pkts
            );
        }
        if let BenchDev::Raw(r) = &mut d.dev {
            let s = r.stats();
            if s.gso_runs > 0 || s.gso_refused > 0 {
                println!(
                    "    (raw GSO sender: {:.1} frames per GSO run, {} runs per 64 KiB message, {} refused)",
                    s.gso_run_frames as f64 / s.gso_runs.max(1) as f64,
                    s.gso_runs as f64 / n as f64,
                    s.gso_refused
                );
            }
        }
        let mut batching = None;
        if let Some(s) = d.dev.udp_stats() {
            batching = Some(UdpBatching {
                sent: s.sent,
                send_messages: s.send_messages,
                send_calls: s.send_calls,
                ..UdpBatching::default()
            });
            let lost: Vec<String> =
                s.not_sent_all().filter(|(_, k)| *k > 0).map(|(r, k)| format!("{k} {}", r.name())).collect();
            if !lost.is_empty() {
                println!("    (udp sender: not sent: {})", lost.join(", "));
            }
        }
        done_tx.send(()).unwrap();
        (done, secs, cpu, batching)
    });
    let (done, secs, tx_cpu, mut udp) = tx.join().unwrap();
    let (got, rx_cpu, (received, reads, overflow, id_from_icrc)) = rx.join().unwrap();
    assert_eq!((done, got), (n, n), "every message completed on both sides");
    if let Some(u) = udp.as_mut() {
        (u.received, u.reads, u.overflow, u.id_from_icrc) = (received, reads, overflow, id_from_icrc);
    }
    Run { bytes: n * size as u64, secs, tx_cpu: tx_cpu.as_secs_f64(), rx_cpu: rx_cpu.as_secs_f64(), udp }
}

/// One kernel TCP stream on the same veth: `n` writes of `size` bytes on one connection,
/// default offloads and Nagle (as `iperf3 -c`).
fn tcp_run(nets: &Nets, n: u64, size: usize) -> Run {
    let (a, b) = (nets.0.clone(), nets.1.clone());
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let rx = spawn("tcp-recv", move || {
        enter(&b);
        let l = TcpListener::bind((VETH_B, 9471)).unwrap();
        ready_tx.send(()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let c0 = thread_cpu();
        let mut buf = vec![0u8; 1 << 17];
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
        let mut s = TcpStream::connect((VETH_B, 9471)).unwrap();
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
    Run { bytes: n * size as u64, secs, tx_cpu: tx_cpu.as_secs_f64(), rx_cpu: rx_cpu.as_secs_f64(), udp: None }
}

/// `iperf3 -c` for 2 s on the same veth (a cross-check of the stream): Mbit/s received.
fn iperf3_mbps(nets: &Nets) -> Option<f64> {
    let server = std::process::Command::new("ip")
        .args(["netns", "exec", &nets.1, "iperf3", "-s", "-1", "-B", &VETH_B.to_string()])
        .stdout(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let mut server = Reaped(server);
    std::thread::sleep(Duration::from_millis(300));
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", &nets.0, "iperf3", "-c", &VETH_B.to_string(), "-t", "2", "-J"])
        .output()
        .ok()?;
    let _ = server.0.wait();
    let text = String::from_utf8_lossy(&out.stdout);
    // "sum_received": { ... "bits_per_second": N ... }
    let at = text.find("\"sum_received\"")?;
    let rest = &text[at..];
    let b = rest.find("\"bits_per_second\":")? + "\"bits_per_second\":".len();
    let num: String = rest[b..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == 'e' || *c == '+')
        .collect();
    num.parse::<f64>().ok().map(|v| v / 1e6)
}

/// A child process killed when dropped (a failed client leaves no server behind).
struct Reaped(std::process::Child);
impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The run with the median duration.
fn median(mut v: Vec<Run>) -> Run {
    v.sort_by(|a, b| a.secs.total_cmp(&b.secs));
    v[v.len() / 2]
}

/// Prints `r` beside the TCP stream's `tcp`, with the ratios.
fn report(what: &str, r: Run, tcp: Run) {
    println!(
        "  {what}: {:.0} Mbit/s, {:.2} CPU s/GB (send {:.2} + recv {:.2}) | ratio to TCP: goodput {:.2}, CPU/GB {:.2}",
        r.mbps(),
        r.cpu_per_gb(),
        r.tx_cpu / (r.bytes as f64 / 1e9),
        r.rx_cpu / (r.bytes as f64 / 1e9),
        r.mbps() / tcp.mbps(),
        r.cpu_per_gb() / tcp.cpu_per_gb(),
    );
    if let Some(u) = r.udp {
        // (Messages of 64 KiB: `bytes >> 16` of them.)
        let msgs = (r.bytes >> 16).max(1) as f64;
        println!(
            "      udp batching per 64 KiB message: {:.1} datagrams in {:.2} sendmsg messages ({:.2} sendmmsg calls); \
             receiver: {:.1} datagrams per read, {} dropped (receive buffer full), {} IDs from the ICRC",
            u.sent as f64 / msgs,
            u.send_messages as f64 / msgs,
            u.send_calls as f64 / msgs,
            u.received as f64 / u.reads.max(1) as f64,
            u.overflow,
            u.id_from_icrc,
        );
    }
}

fn main() {
    // `cargo bench` passes --bench: the full figures. `cargo test --benches` does not: one
    // short run of the same code (as root), so that the bench cannot rot.
    let full = std::env::args().any(|a| a == "--bench");
    let env = |k: &str| std::env::var(k).ok();
    let n_big: u64 = env("ROCE_BENCH_MSGS").and_then(|v| v.parse().ok()).unwrap_or(if full { 2000 } else { 20 });
    let rounds = if full { 3 } else { 1 };
    // For profiling: one MTU, one transport.
    let only_mtu: Option<u32> = env("ROCE_BENCH_MTU").and_then(|v| v.parse().ok());
    let only_transport = env("ROCE_BENCH_TRANSPORT");
    let only_qps: Option<usize> = env("ROCE_BENCH_QPS").and_then(|v| v.parse().ok());
    if !full {
        println!("rc_veth in test mode ({n_big} × 64 KiB; figures not meaningful: `cargo bench` measures)");
    }
    let nets = nets();
    let big = 1 << 16;
    let transports: Vec<Transport> = match only_transport.as_deref() {
        Some("udp-pcap") => vec![Transport::Udp, Transport::UdpPcap, Transport::UdpPcapFrameByFrame],
        only => [Transport::Raw, Transport::RawGso, Transport::Udp]
            .into_iter()
            .filter(|t| only.is_none_or(|o| o == t.selected_by() || o == t.selected_alone_by()))
            .collect(),
    };
    for (link_mtu, path_mtu) in [(1500, 1024), (9000, 4096)] {
        if only_mtu.is_some_and(|m| m != link_mtu) {
            continue;
        }
        sh(&format!("ip -n {} link set v1 mtu {link_mtu} && ip -n {} link set v2 mtu {link_mtu}", nets.0, nets.1));
        println!(
            "veth MTU {link_mtu} on both sides (RC path MTU {path_mtu}; TCP MSS from the same MTU), 64 KiB messages, median of {rounds} rounds:"
        );
        // Everything takes turns, `rounds` times; each figure is its median round (other
        // processes share the machine: one round alone is noisy).
        let mut tcp = Vec::new();
        let cases: Vec<(Transport, usize, bool)> = transports
            .iter()
            .flat_map(|&t| [(t, 1, false), (t, 1, true), (t, 4, false), (t, 4, true)])
            .filter(|&(_, qps, _)| only_qps.is_none_or(|q| q == qps))
            .collect();
        let mut rc: Vec<Vec<Run>> = cases.iter().map(|_| Vec::new()).collect();
        for _ in 0..rounds {
            tcp.push(tcp_run(&nets, n_big, big));
            for (&(transport, qps, write), runs) in cases.iter().zip(rc.iter_mut()) {
                runs.push(rc_run(&nets, n_big, big, write, Setup { path_mtu, transport, qps }));
            }
        }
        let tcp = median(tcp);
        report("kernel TCP, one stream (default offloads)", tcp, tcp);
        if full && env("ROCE_BENCH_IPERF3").is_some() {
            match iperf3_mbps(&nets) {
                Some(m) => println!("  iperf3 -c (2 s, cross-check): {m:.0} Mbit/s"),
                None => println!("  iperf3 -c: no figure (is iperf3 installed?)"),
            }
        }
        for (&(transport, qps, write), runs) in cases.iter().zip(rc) {
            let op = if write { "RDMA WRITE" } else { "SEND" };
            report(
                &format!("RC {op}, {qps} QP{}, {}", if qps > 1 { "s" } else { "" }, transport.name()),
                median(runs),
                tcp,
            );
        }
    }
}
