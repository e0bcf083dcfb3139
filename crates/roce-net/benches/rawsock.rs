//! Raw-socket benchmarks on a veth pair between two network namespaces this bench creates
//! (198.18.2.0/24 only; needs root). Every figure is quoted against baselines measured in the
//! same run, on the same veth, with frames of the same size (322 bytes: an SA Delete MAD on
//! RoCEv2/IPv4):
//! - frames per second received (from the sender's first frame to the last one received), and
//!   CPU per frame on each side, through `RawSocket` with PACKET_MMAP rings (TPACKET_V3 receive
//!   ring, transmit ring with qdisc bypass, one kick per 64 frames), batched (`sendmmsg`/
//!   `recvmmsg`, 64 frames a call) and frame by frame, and through a pnet_datalink channel
//!   (the design card's crate; spec/net.md says why `RawSocket` does not use it), against the
//!   kernel's UDP socket (the same 280-byte UDP payloads) frame by frame and batched; the
//!   variants take turns, five
//!   rounds, and each line is the median round. The receivers do the same work: first none
//!   (count frames of the right length), then both parse and verify
//!   (`FramePacket::new_checked`: every header, the IPv4 checksum and the ICRC; the UDP
//!   receiver rebuilds the Ethernet/IPv4/UDP headers the kernel stripped, in place in front of
//!   the payload it received). Raw frames go to the raw receiver's own address beside the
//!   kernel's, as `roce` runs; UDP datagrams to the kernel's. A send error is counted and
//!   fatal; frames the receiving kernel dropped (PACKET_STATISTICS) are shown;
//! - netsniff-ng's `trafgen` (PACKET_MMAP TX ring, qdisc bypass) sending the same frame on the
//!   same veth, received by the ring receiver: the transmit anchor;
//! - latency from `leave_multicast` to the SA Delete frame leaving the socket (median, p99),
//!   with a real SA on the other end.
//!
//! `cargo bench -p roce-net --bench rawsock` runs 200,000 frames per figure; `cargo test
//! --benches` (no `--bench` argument) runs the same code once with 5,000, as root, so that the
//! bench cannot rot (tests/run-all.sh). A missing `trafgen` or `ip` is a failure, never a skip.
//! `ROCE_BENCH_ONLY=rings` runs the ring pair alone (for a profiler).

use std::fs::File;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use roce_cm::{EventKind, MulticastPaths, PortSpace, QpType, Stack, StackConfig};
use roce_net::device::{Device, RecvBatch};
use roce_net::driver::Driver;
use roce_net::raw::RawSocket;
use roce_net::ring::RingConfig;
use roce_sa::SaResponder;
use roce_wire::bth::{self, Opcode};
use roce_wire::ext::ExtHeaders;
use roce_wire::frame::{rxe_udp_sport, FramePacket, FrameRepr};
use roce_wire::golden::SA_DELETE_MCMEMBER;
use roce_wire::mcmember::JoinState;
use roce_wire::GSI_QKEY;

mod veth;
use veth::{enter, sh, thread_cpu, Nets};

const TX_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 11);
const RX_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 12);
/// The raw receiver's own address, beside the kernel's RX_IP on the same interface, as
/// `roce` runs (the kernel drops frames to it after one route lookup, with ICMP off since
/// it does not forward; frames to the kernel's own address would make it answer each with
/// an ICMP port-unreachable lookup, work a userspace RoCE receiver never asks for).
const RAW_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 22);
const FRAME_LEN: usize = 322;
const UDP_PAYLOAD: usize = FRAME_LEN - 42;
const BATCH: usize = 64;

/// The veth pair, with static neighbours: no ARP inside a measurement.
fn nets() -> Nets {
    let nets = Nets::pair("bench", None, TX_IP, RX_IP);
    let (a, b) = (&nets.0, &nets.1);
    let mac = |ns: &str, dev: &str| {
        let out = Command::new("ip").args(["-n", ns, "-br", "link", "show", dev]).output().expect("ip link");
        String::from_utf8_lossy(&out.stdout).split_whitespace().nth(2).expect("a MAC").to_string()
    };
    let (m1, m2) = (mac(a, "v1"), mac(b, "v2"));
    sh(&format!("ip -n {a} neigh replace {RX_IP} lladdr {m2} dev v1 nud permanent"));
    sh(&format!("ip -n {b} neigh replace {TX_IP} lladdr {m1} dev v2 nud permanent"));
    nets
}

/// The frame every sender sends: a real SA Delete MAD to QP1, v1 → v2, with the UDP source
/// port rxe gives QP1 (so that the UDP sender can send exactly its UDP payload).
fn roce_frame(src_mac: [u8; 6], dst_mac: [u8; 6], dst_ip: Ipv4Addr) -> Vec<u8> {
    let mad = &SA_DELETE_MCMEMBER[62..318];
    let mut b = bth::Repr::new(Opcode::UdSendOnly, 1, 7);
    b.ack_req = true;
    let mut r = FrameRepr::new(src_mac, dst_mac, TX_IP.into(), dst_ip.into(), b, ExtHeaders::deth(GSI_QKEY, 1), mad);
    r.udp.source_port = rxe_udp_sport(1);
    let mut out = vec![0u8; r.buffer_len()];
    let n = r.emit(&mut out).expect("emit");
    assert_eq!(n, FRAME_LEN);
    out
}

/// What a receiver does with each frame.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Work {
    /// Count frames of the right length.
    Count,
    /// Parse and verify every header, the IPv4 checksum and the ICRC.
    Verify,
}

/// One measurement: frames received, the span from the first to the last, CPU per frame.
struct Figure {
    /// Frames the receiving socket's kernel queue (or ring) dropped.
    drops: u64,
    got: u64,
    secs: f64,
    tx_us: f64,
    rx_us: f64,
}

impl Figure {
    fn pps(&self) -> f64 {
        self.got as f64 / self.secs.max(1e-9)
    }
}

/// The receiving raw socket's kernel drops (PACKET_STATISTICS), read when it is idle.
static RX_DROPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

type Sender = Box<dyn FnMut(u64) -> Result<(), String> + Send>;
type Receiver = Box<dyn FnMut() -> u64 + Send>;

/// Run a sender (in namespace a, `n` frames; an error is fatal) against a receiver (in
/// namespace b, until `n` frames or 1 s without one).
fn run_pair(
    nets: &Nets,
    n: u64,
    send: impl FnOnce() -> Sender + Send + 'static,
    recv: impl FnOnce() -> Receiver + Send + 'static,
) -> Figure {
    let (a, b) = (nets.0.clone(), nets.1.clone());
    let ready = Arc::new(AtomicBool::new(false));
    let r2 = ready.clone();
    let start: Arc<Mutex<Option<Instant>>> = Arc::default();
    let start2 = start.clone();
    RX_DROPS.store(0, Ordering::SeqCst);
    let rx = std::thread::spawn(move || {
        enter(&b);
        let mut take = recv();
        r2.store(true, Ordering::SeqCst);
        let mut got = 0u64;
        let mut first = None;
        let mut last = Instant::now();
        let mut c0 = thread_cpu();
        // Until `n` frames, or 1 s without one (a sender that was descheduled is not done).
        while got < n && last.elapsed() < Duration::from_secs(1) {
            let k = take();
            if k > 0 {
                if first.is_none() {
                    first = Some(Instant::now());
                    c0 = thread_cpu();
                }
                got += k;
                last = Instant::now();
            }
        }
        // From the sender's first frame to the last one received: a ring hands frames over a
        // block at a time, so the span between the first and last arrivals would flatter it.
        let t0 = start2.lock().unwrap().unwrap_or(last);
        let span = first.map_or(0.0, |_| last.saturating_duration_since(t0).as_secs_f64());
        (got, span, thread_cpu() - c0)
    });
    let tx = std::thread::spawn(move || {
        enter(&a);
        let mut one = send();
        while !ready.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(20));
        let c0 = thread_cpu();
        *start.lock().unwrap() = Some(Instant::now());
        one(n).map(|()| thread_cpu() - c0)
    });
    let tx_cpu = match tx.join().unwrap() {
        Ok(c) => c,
        Err(e) => panic!("send error (fatal): {e}"),
    };
    let (got, secs, rx_cpu) = rx.join().unwrap();
    Figure {
        drops: RX_DROPS.load(Ordering::SeqCst),
        got,
        secs,
        tx_us: tx_cpu.as_secs_f64() * 1e6 / n as f64,
        rx_us: rx_cpu.as_secs_f64() * 1e6 / got.max(1) as f64,
    }
}

/// How a raw socket moves frames.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Raw {
    /// `send`/`recv`, one frame per system call.
    OneByOne,
    /// `sendmmsg`/`recvmmsg`, 64 frames a call.
    Mmsg,
    /// PACKET_MMAP: TPACKET_V3 receive ring, transmit ring (one kick per 64 frames).
    Rings,
}

fn open_raw(iface: &str, mode: Raw) -> RawSocket {
    let s = if mode == Raw::Rings {
        let s = RawSocket::open_with(iface, RingConfig { rx_blocks: 64, qdisc_bypass: true, ..RingConfig::default() })
            .unwrap();
        assert_eq!(s.rings(), (true, true), "ring set-up failed: {:?}", s.ring_fallback());
        s
    } else {
        RawSocket::open(iface).unwrap()
    };
    s
}

fn raw_sender(frame: Vec<u8>, mode: Raw) -> impl FnOnce() -> Sender + Send + 'static {
    move || {
        let batched = mode != Raw::OneByOne;
        let mut s = open_raw("v1", mode);
        s.set_buffer_sizes(8 << 20, 8 << 20).unwrap();
        Box::new(move |n| {
            let frames: Vec<&[u8]> = vec![&frame[..]; BATCH];
            let mut sent = 0u64;
            let mut errors = 0u64;
            while sent < n {
                if batched {
                    let k = (n - sent).min(BATCH as u64) as usize;
                    match s.send_batch(&frames[..k]) {
                        Ok(m) if m > 0 => sent += m as u64,
                        Ok(_) => errors += 1,
                        Err(e) => return Err(format!("{e} after {sent} frames ({} errors)", errors + 1)),
                    }
                } else {
                    s.send(&frame).map_err(|e| format!("{e} after {sent} frames"))?;
                    sent += 1;
                }
                if errors > 0 {
                    return Err(format!("the kernel took no frame of a batch after {sent} frames"));
                }
            }
            Ok(())
        })
    }
}

fn raw_receiver(work: Work, mode: Raw) -> impl FnOnce() -> Receiver + Send + 'static {
    move || {
        let batched = mode != Raw::OneByOne;
        let mut s = open_raw("v2", mode);
        s.set_buffer_sizes(8 << 20, 8 << 20).unwrap();
        let mut batch = RecvBatch::new(BATCH, 2048).unwrap();
        let mut buf = vec![0u8; 2048];
        let ok = move |f: &[u8]| {
            f.len() == FRAME_LEN && (work == Work::Count || FramePacket::new_checked(f).is_ok_and(|p| p.icrc_ok()))
        };
        let fd = s.raw_fd().expect("a socket has a descriptor");
        Box::new(move || {
            if batched {
                match s.recv_batch(&mut batch) {
                    Ok(0) => {
                        RX_DROPS.store(s.stats().kernel_drops, Ordering::SeqCst);
                        wait_readable(fd);
                        0
                    }
                    Ok(_) => batch.iter().filter(|f| ok(f)).count() as u64,
                    Err(e) => panic!("receive: {e}"),
                }
            } else {
                match s.recv(&mut buf) {
                    Ok(Some(n)) => u64::from(ok(&buf[..n])),
                    Ok(None) => {
                        wait_readable(fd);
                        0
                    }
                    Err(e) => panic!("receive: {e}"),
                }
            }
        })
    }
}

/// A pnet_datalink channel on `iface` (not promiscuous, 2 KiB buffers, 50 ms read timeout),
/// over a socket made here only to give it the same 8 MiB buffers as the others: pnet's
/// `Config` has no buffer-size knob, but takes a ready descriptor (`socket_fd`), which it
/// binds, makes non-blocking and closes on drop.
fn pnet_channel(iface: &str) -> (Box<dyn pnet_datalink::DataLinkSender>, Box<dyn pnet_datalink::DataLinkReceiver>) {
    let ni = pnet_datalink::interfaces().into_iter().find(|i| i.name == iface).expect("the veth interface");
    // SAFETY: plain socket(2); the descriptor goes to pnet, which owns it from here on.
    let fd = unsafe {
        libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, (libc::ETH_P_ALL as u16).to_be().into())
    };
    assert!(fd >= 0, "socket(AF_PACKET): {}", std::io::Error::last_os_error());
    set_bufs(fd);
    let cfg = pnet_datalink::Config {
        read_buffer_size: 2048,
        write_buffer_size: 2048,
        read_timeout: Some(Duration::from_millis(50)),
        promiscuous: false,
        socket_fd: Some(fd),
        ..Default::default()
    };
    match pnet_datalink::channel(&ni, cfg).expect("pnet_datalink::channel") {
        pnet_datalink::Channel::Ethernet(tx, rx) => (tx, rx),
        _ => unreachable!("an AF_PACKET channel is Ethernet"),
    }
}

/// pnet_datalink's channel, frame by frame (`send_to`: poll(2) and sendto(2) a frame).
fn pnet_sender(frame: Vec<u8>) -> impl FnOnce() -> Sender + Send + 'static {
    move || {
        let (mut tx, _rx) = pnet_channel("v1");
        Box::new(move |n| {
            for sent in 0..n {
                match tx.send_to(&frame, None) {
                    Some(Ok(())) => {}
                    Some(Err(e)) => return Err(format!("{e} after {sent} frames")),
                    None => return Err("pnet: frame larger than its write buffer".into()),
                }
            }
            Ok(())
        })
    }
}

/// pnet_datalink's channel, frame by frame (`next`: poll(2), waiting up to its 50 ms read
/// timeout, and recvfrom(2) a frame).
fn pnet_receiver(work: Work) -> impl FnOnce() -> Receiver + Send + 'static {
    move || {
        let (_tx, mut rx) = pnet_channel("v2");
        Box::new(move || match rx.next() {
            Ok(f) => u64::from(
                f.len() == FRAME_LEN && (work == Work::Count || FramePacket::new_checked(f).is_ok_and(|p| p.icrc_ok())),
            ),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => 0,
            Err(e) => panic!("pnet receive: {e}"),
        })
    }
}

/// Block until `fd` is readable or 50 ms pass: receivers sleep instead of spinning, so that
/// their CPU per frame is their work, and the sender keeps its core on a busy machine.
fn wait_readable(fd: i32) {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one live pollfd.
    unsafe { libc::poll(&mut p, 1, 50) };
}

fn set_bufs(fd: i32) {
    let v: libc::c_int = 8 << 20;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_SNDBUFFORCE] {
        // SAFETY: the option value points at a live c_int.
        unsafe { libc::setsockopt(fd, libc::SOL_SOCKET, opt, &v as *const _ as *const libc::c_void, 4) };
    }
}

fn udp_sender(payload: Vec<u8>, batched: bool) -> impl FnOnce() -> Sender + Send + 'static {
    move || {
        let s = UdpSocket::bind(SocketAddr::new(TX_IP.into(), rxe_udp_sport(1))).unwrap();
        set_bufs(s.as_raw_fd());
        let to = SocketAddr::new(RX_IP.into(), 4791);
        // SAFETY: sockaddr_in is plain data.
        let mut sin: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        sin.sin_family = libc::AF_INET as u16;
        sin.sin_port = 4791u16.to_be();
        sin.sin_addr.s_addr = u32::from(RX_IP).to_be();
        Box::new(move |n| {
            let mut sent = 0u64;
            while sent < n {
                if batched {
                    let k = (n - sent).min(BATCH as u64) as usize;
                    let mut iov = [libc::iovec { iov_base: payload.as_ptr() as *mut _, iov_len: payload.len() }; BATCH];
                    // SAFETY: mmsghdr is plain data.
                    let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
                    for i in 0..k {
                        hdrs[i].msg_hdr.msg_iov = &mut iov[i];
                        hdrs[i].msg_hdr.msg_iovlen = 1;
                        hdrs[i].msg_hdr.msg_name = &mut sin as *mut _ as *mut libc::c_void;
                        hdrs[i].msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as u32;
                    }
                    // SAFETY: the headers point at live iovecs over `payload` and at `sin`.
                    let r = unsafe { libc::sendmmsg(s.as_raw_fd(), hdrs.as_mut_ptr(), k as u32, 0) };
                    if r <= 0 {
                        return Err(format!("sendmmsg: {} after {sent}", std::io::Error::last_os_error()));
                    }
                    sent += r as u64;
                } else {
                    s.send_to(&payload, to).map_err(|e| format!("{e} after {sent} datagrams"))?;
                    sent += 1;
                }
            }
            Ok(())
        })
    }
}

fn udp_receiver(work: Work, batched: bool, frame: Vec<u8>) -> impl FnOnce() -> Receiver + Send + 'static {
    move || {
        let s = UdpSocket::bind(SocketAddr::new(RX_IP.into(), 4791)).unwrap();
        s.set_nonblocking(true).unwrap();
        set_bufs(s.as_raw_fd());
        // Each slot holds the 42 bytes of Ethernet/IPv4/UDP headers the kernel stripped, then
        // the datagram: to verify, the receiver rebuilds the headers in place (the IPv4 length
        // and checksum, the UDP length and source port from what the kernel reports), as a
        // RoCE receiver on a UDP socket would have to.
        let mut slots = vec![0u8; BATCH * 2048];
        for slot in slots.chunks_exact_mut(2048) {
            slot[..42].copy_from_slice(&frame[..42]);
        }
        let verify = move |slot: &mut [u8], len: usize, from: SocketAddr| -> bool {
            if len != UDP_PAYLOAD {
                return false;
            }
            if work == Work::Count {
                return true;
            }
            let (IpAddr::V4(src), port) = (from.ip(), from.port()) else { return false };
            slot[26..30].copy_from_slice(&src.octets());
            slot[16..18].copy_from_slice(&((20 + 8 + len) as u16).to_be_bytes());
            slot[24..26].fill(0);
            let sum = ipv4_checksum(&slot[14..34]);
            slot[24..26].copy_from_slice(&sum.to_be_bytes());
            slot[34..36].copy_from_slice(&port.to_be_bytes());
            slot[38..40].copy_from_slice(&((8 + len) as u16).to_be_bytes());
            FramePacket::new_checked(&slot[..42 + len]).is_ok_and(|p| p.icrc_ok())
        };
        Box::new(move || {
            if batched {
                let mut iov = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; BATCH];
                // SAFETY: plain data.
                let mut from: [libc::sockaddr_in; BATCH] = unsafe { std::mem::zeroed() };
                let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
                for (i, slot) in slots.chunks_exact_mut(2048).enumerate() {
                    iov[i] = libc::iovec { iov_base: slot[42..].as_mut_ptr() as *mut _, iov_len: 2048 - 42 };
                    hdrs[i].msg_hdr.msg_iov = &mut iov[i];
                    hdrs[i].msg_hdr.msg_iovlen = 1;
                    hdrs[i].msg_hdr.msg_name = &mut from[i] as *mut _ as *mut libc::c_void;
                    hdrs[i].msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as u32;
                }
                // SAFETY: every header points at a live iovec over its own slot, and its own
                // sockaddr_in.
                let r = unsafe {
                    libc::recvmmsg(
                        s.as_raw_fd(),
                        hdrs.as_mut_ptr(),
                        BATCH as u32,
                        libc::MSG_DONTWAIT,
                        std::ptr::null_mut(),
                    )
                };
                if r <= 0 {
                    wait_readable(s.as_raw_fd());
                    return 0;
                }
                let mut ok = 0;
                for (i, slot) in slots.chunks_exact_mut(2048).take(r as usize).enumerate() {
                    let addr = SocketAddr::new(
                        Ipv4Addr::from(u32::from_be(from[i].sin_addr.s_addr)).into(),
                        u16::from_be(from[i].sin_port),
                    );
                    ok += u64::from(verify(slot, hdrs[i].msg_len as usize, addr));
                }
                ok
            } else {
                let slot = &mut slots[..2048];
                match s.recv_from(&mut slot[42..]) {
                    Ok((len, from)) => u64::from(verify(slot, len, from)),
                    Err(_) => {
                        wait_readable(s.as_raw_fd());
                        0
                    }
                }
            }
        })
    }
}

/// The IPv4 header checksum (its checksum field zero).
fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h.chunks_exact(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn mac_of(ns: &str, dev: &str) -> [u8; 6] {
    let nsn = ns.to_string();
    let dev = dev.to_string();
    std::thread::spawn(move || {
        enter(&nsn);
        roce_net::raw::interface(&dev).unwrap().mac.unwrap()
    })
    .join()
    .unwrap()
}

fn line(name: &str, f: &Figure, n: u64) {
    println!(
        "  {name:<44} {:>7}/{n} in {:.3} s = {:>9.0} frames/s; CPU {:.2} µs/frame sending, {:.2} µs/frame receiving{}",
        f.got,
        f.secs,
        f.pps(),
        f.tx_us,
        f.rx_us,
        if f.drops > 0 { format!("; {} dropped by the kernel (queue full)", f.drops) } else { String::new() }
    );
}

/// The figure with the median rate.
fn median(mut v: Vec<Figure>) -> Figure {
    v.sort_by(|a, b| a.pps().total_cmp(&b.pps()));
    v.swap_remove(v.len() / 2)
}

fn throughput(nets: &Nets, n: u64, rounds: usize) -> f64 {
    let (m1, m2) = (mac_of(&nets.0, "v1"), mac_of(&nets.1, "v2"));
    // The UDP sockets carry the frame addressed to the kernel's address; the raw sockets the
    // same frame addressed to the raw receiver's own (same size, same work to verify).
    let udp_frame = roce_frame(m1, m2, RX_IP);
    let payload = udp_frame[42..].to_vec();
    let frame = roce_frame(m1, m2, RAW_IP);
    // The same frame to a MAC of the raw receiver's own (as on a VF or macvlan with its own
    // address): the receiving kernel drops it at once as another host's (PACKET_OTHERHOST)
    // instead of routing it to an address it does not own; the packet socket still gets it.
    let own_mac = roce_frame(m1, [2, 0, 0, 0, 2, 0x22], RAW_IP);
    let mut ring_pps = 0.0;
    for work in [Work::Count, Work::Verify] {
        let what = if work == Work::Count { "receivers count frames" } else { "receivers parse and verify (ICRC)" };
        println!("rawsock: {n} frames of {FRAME_LEN} B on a veth pair, {what} (median of {rounds} rounds):");
        // The variants take turns, `rounds` times; each line is the round with the median
        // rate (other processes share the machine: one round alone is noisy).
        let mut runs: [Vec<Figure>; 7] = Default::default();
        // ROCE_BENCH_ONLY=rings: the ring pair alone, once (for a profiler).
        if std::env::var("ROCE_BENCH_ONLY").is_ok_and(|v| v == "rings") {
            let f = run_pair(nets, n, raw_sender(frame.clone(), Raw::Rings), raw_receiver(work, Raw::Rings));
            line("RawSocket PACKET_MMAP rings (V3 RX, TX ring)", &f, n);
            ring_pps = f.pps();
            continue;
        }
        for _ in 0..rounds {
            runs[0].push(run_pair(nets, n, raw_sender(frame.clone(), Raw::Rings), raw_receiver(work, Raw::Rings)));
            runs[1].push(run_pair(nets, n, raw_sender(frame.clone(), Raw::Mmsg), raw_receiver(work, Raw::Mmsg)));
            runs[2].push(run_pair(
                nets,
                n,
                raw_sender(frame.clone(), Raw::OneByOne),
                raw_receiver(work, Raw::OneByOne),
            ));
            runs[3].push(run_pair(
                nets,
                n,
                udp_sender(payload.clone(), false),
                udp_receiver(work, false, udp_frame.clone()),
            ));
            runs[4].push(run_pair(
                nets,
                n,
                udp_sender(payload.clone(), true),
                udp_receiver(work, true, udp_frame.clone()),
            ));
            runs[5].push(run_pair(nets, n, raw_sender(own_mac.clone(), Raw::Rings), raw_receiver(work, Raw::Rings)));
            runs[6].push(run_pair(nets, n, pnet_sender(frame.clone()), pnet_receiver(work)));
        }
        let [ring, raw_b, raw_1, udp_1, udp_b, ring_own, pnet_1] = runs.map(median);
        line("RawSocket PACKET_MMAP rings (V3 RX, TX ring)", &ring, n);
        line("  the same, to the receiver's own MAC", &ring_own, n);
        line("RawSocket sendmmsg/recvmmsg (64)", &raw_b, n);
        line("RawSocket send/recv, frame by frame", &raw_1, n);
        line("pnet_datalink channel, frame by frame", &pnet_1, n);
        line("kernel UDP send_to/recv_from", &udp_1, n);
        line("kernel UDP sendmmsg/recvmmsg (64)", &udp_b, n);
        for (name, f) in [
            ("raw rings", &ring),
            ("raw batched", &raw_b),
            ("raw frame by frame", &raw_1),
            ("pnet frame by frame", &pnet_1),
            ("UDP", &udp_1),
            ("UDP batched", &udp_b),
        ] {
            assert!(f.got > 0, "{name}: nothing received");
        }
        println!(
            "  ratio (same work, same run): raw rings / kernel UDP {:.2}× (receive CPU {:.2}×), / kernel UDP batched {:.2}×",
            ring.pps() / udp_1.pps(),
            ring.rx_us / udp_1.rx_us,
            ring.pps() / udp_b.pps(),
        );
        println!(
            "  ratio (same work, same run): raw rings to the receiver's own MAC / kernel UDP {:.2}×, / kernel UDP batched {:.2}×",
            ring_own.pps() / udp_1.pps(),
            ring_own.pps() / udp_b.pps(),
        );
        println!(
            "  ratio (same work, same run): raw batched / kernel UDP {:.2}× (receive CPU {:.2}×), / kernel UDP batched {:.2}×; raw batched / raw frame by frame {:.2}×",
            raw_b.pps() / udp_1.pps(),
            raw_b.rx_us / udp_1.rx_us,
            raw_b.pps() / udp_b.pps(),
            raw_b.pps() / raw_1.pps()
        );
        println!(
            "  ratio (same work, same run): raw frame by frame / pnet_datalink channel {:.2}× (send CPU {:.2}×, receive CPU {:.2}×); raw batched / pnet {:.2}×, raw rings / pnet {:.2}×",
            raw_1.pps() / pnet_1.pps(),
            raw_1.tx_us / pnet_1.tx_us,
            raw_1.rx_us / pnet_1.rx_us,
            raw_b.pps() / pnet_1.pps(),
            ring.pps() / pnet_1.pps(),
        );
        if work == Work::Count {
            ring_pps = ring.pps();
        }
    }
    ring_pps
}

/// trafgen on v1 sending the same frame, the ring receiver counting on v2.
fn trafgen_anchor(nets: &Nets, n: u64, ring_pps: f64) {
    let (m1, m2) = (mac_of(&nets.0, "v1"), mac_of(&nets.1, "v2"));
    let frame = roce_frame(m1, m2, RAW_IP);
    let dir = std::env::temp_dir().join(format!("roce-bench-trafgen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("frame.cfg");
    let bytes: Vec<String> = frame.iter().map(|b| format!("0x{b:02x}")).collect();
    writeln!(File::create(&cfg).unwrap(), "{{ {} }}", bytes.join(", ")).unwrap();
    let ns = nets.0.clone();
    let cfg2 = cfg.clone();
    let wall = Arc::new(Mutex::new(Duration::ZERO));
    let wall2 = wall.clone();
    let f = run_pair(
        nets,
        n,
        move || {
            Box::new(move |n| {
                // -P 1: one process; leave the machine's socket memory and IRQ
                // affinity alone; no CPU statistics.
                let t = Instant::now();
                let out = Command::new("ip")
                    .args(["netns", "exec", &ns, "trafgen", "-o", "v1", "-i"])
                    .arg(&cfg2)
                    .args(["-n", &n.to_string(), "-P", "1", "--no-sock-mem", "--notouch-irq", "--no-cpu-stats"])
                    .output()
                    .map_err(|e| format!("trafgen (netsniff-ng; tests/setup.sh installs it): {e}"))?;
                *wall2.lock().unwrap() = t.elapsed();
                if !out.status.success() {
                    return Err(format!("trafgen failed: {}", String::from_utf8_lossy(&out.stderr)));
                }
                Ok(())
            })
        },
        raw_receiver(Work::Count, Raw::Rings),
    );
    let _ = std::fs::remove_dir_all(&dir);
    println!("transmit anchor: netsniff-ng trafgen (TX ring) on the same veth, the ring receiver counting:");
    line("trafgen -P 1", &f, n);
    println!(
        "  trafgen process {:.3} s for {n} frames (its start-up included in the rate); RawSocket's TX ring → RX ring reached {:.2}× trafgen's received rate",
        wall.lock().unwrap().as_secs_f64(),
        ring_pps / f.pps()
    );
    assert!(f.got > 0, "trafgen: nothing received");
}

fn leave_latency(nets: &Nets, rounds: usize) {
    let (a, b) = (nets.0.clone(), nets.1.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let sa = std::thread::spawn(move || {
        enter(&b);
        let mac = roce_net::raw::interface("v2").unwrap().mac.unwrap();
        let cfg = StackConfig::new(mac, RX_IP, 24);
        let mut d = Driver::new(RawSocket::open("v2").unwrap(), Stack::new(cfg)).with_sa(SaResponder::with_defaults());
        while !stop2.load(Ordering::SeqCst) {
            let _ = d.turn(Duration::from_millis(10));
        }
    });
    enter(&a);
    let mac = roce_net::raw::interface("v1").unwrap().mac.unwrap();
    let mut cfg = StackConfig::new(mac, TX_IP, 24);
    cfg.sa = Some(IpAddr::V4(RX_IP));
    cfg.multicast_paths = MulticastPaths::SA_ONLY;
    let mut d = Driver::new(RawSocket::open("v1").unwrap(), Stack::new(cfg));
    let sent_at: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let s2 = sent_at.clone();
    d.set_tap(Box::new(move |dir, _, f| {
        // A SubnAdmDelete leaving: MAD method byte at frame offset 62 + 3.
        if dir == roce_net::driver::Direction::Tx && f.len() == 322 && f[65] == 0x15 {
            let mut g = s2.lock().unwrap();
            if g.is_none() {
                *g = Some(Instant::now());
            }
        }
    }));
    let id = d.stack.create_id(PortSpace::Udp, QpType::Ud).unwrap();
    d.stack.bind_addr(id, SocketAddr::new(IpAddr::V4(TX_IP), 0)).unwrap();
    let group = IpAddr::V4(Ipv4Addr::new(239, 1, 2, 3));
    let mut lat = Vec::new();
    for _ in 0..rounds {
        let e = d.join(id, group, JoinState::FULL_MEMBER, Duration::from_secs(5)).unwrap().expect("join answered");
        assert_eq!(e.kind, EventKind::MulticastJoin);
        *sent_at.lock().unwrap() = None;
        let t0 = Instant::now();
        let now = d.now();
        d.stack.leave_multicast(now, id, group).unwrap();
        d.turn(Duration::ZERO).unwrap();
        let t1 = sent_at.lock().unwrap().expect("Delete sent on the first turn");
        lat.push(t1 - t0);
        let e =
            d.wait_event(id, &[EventKind::MulticastLeft, EventKind::MulticastError], Duration::from_secs(5)).unwrap();
        assert_eq!(e.map(|e| e.kind), Some(EventKind::MulticastLeft));
    }
    stop.store(true, Ordering::SeqCst);
    sa.join().unwrap();
    lat.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "leave_multicast → SA Delete out of the socket over {} leaves: median {:.1} µs, p99 {:.1} µs, max {:.1} µs",
        lat.len(),
        us(lat[lat.len() / 2]),
        us(lat[lat.len() * 99 / 100]),
        us(lat[lat.len() - 1])
    );
}

fn main() {
    // `cargo bench` passes --bench: the full figures. `cargo test --benches` does not: one
    // short run of the same code (it needs root: a missing privilege is a failure).
    let full = std::env::args().any(|a| a == "--bench");
    let n: u64 = if full { 200_000 } else { 5_000 };
    let nets = nets();
    let ring_pps = throughput(&nets, n, if full { 5 } else { 1 });
    trafgen_anchor(&nets, n, ring_pps);
    leave_latency(&nets, if full { 1000 } else { 20 });
}
