//! Raw-socket benchmarks on a veth pair between two network namespaces this bench creates
//! (198.18.2.0/24 only; needs root). Figures are printed as ratios against the kernel's UDP
//! measured in the same run:
//! - frames per second through `RawSocket` (send on one end, receive on the other) and CPU
//!   per frame, against kernel UDP datagrams of the same size on the same veth;
//! - latency from `leave_multicast` to the SA Delete frame leaving the socket (median, p99),
//!   with a real SA on the other end.
//!
//! `cargo bench -p roce-net --bench rawsock`. Under `cargo test` (no `--bench` argument) it
//! only checks that it builds.

use std::fs::File;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use roce_cm::{EventKind, MulticastPaths, PortSpace, QpType, Stack, StackConfig};
use roce_net::device::Device;
use roce_net::driver::Driver;
use roce_net::raw::RawSocket;
use roce_sa::{SaConfig, SaResponder};
use roce_wire::golden::SA_DELETE_MCMEMBER;
use roce_wire::mcmember::JoinState;

const N: u32 = 200_000;

fn sh(cmd: &str) {
    let ok = Command::new("sh").args(["-c", cmd]).status().map(|s| s.success()).unwrap_or(false);
    assert!(ok, "{cmd}");
}

struct Nets(String, String);

impl Nets {
    fn new() -> Nets {
        let (a, b) = (format!("roce-bench-a-{}", std::process::id()), format!("roce-bench-b-{}", std::process::id()));
        sh(&format!("ip netns add {a} && ip netns add {b}"));
        sh(&format!("ip link add v1 netns {a} type veth peer name v2 netns {b}"));
        sh(&format!("ip -n {a} link set v1 up && ip -n {b} link set v2 up && ip -n {a} addr add 198.18.2.11/24 dev v1 && ip -n {b} addr add 198.18.2.12/24 dev v2"));
        Nets(a, b)
    }
}

impl Drop for Nets {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        let _ = Command::new("ip").args(["netns", "del", &self.1]).status();
    }
}

fn enter(ns: &str) {
    let f = File::open(format!("/var/run/netns/{ns}")).expect("netns file");
    // SAFETY: setns on this thread with a valid namespace descriptor.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(r, 0, "setns {ns}: {}", std::io::Error::last_os_error());
}

fn thread_cpu() -> Duration {
    // SAFETY: getrusage fills the struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// (frames received, seconds, sender CPU µs/frame, receiver CPU µs/frame)
fn run_pair(
    nets: &Nets,
    send: impl FnOnce() -> Box<dyn FnMut() + Send> + Send + 'static,
    recv: impl FnOnce() -> Box<dyn FnMut() -> bool + Send> + Send + 'static,
) -> (u32, f64, f64, f64) {
    let (a, b) = (nets.0.clone(), nets.1.clone());
    let ready = Arc::new(AtomicBool::new(false));
    let r2 = ready.clone();
    let rx = std::thread::spawn(move || {
        enter(&b);
        let mut got_one = recv();
        r2.store(true, Ordering::SeqCst);
        let c0 = thread_cpu();
        let t0 = Instant::now();
        let mut got = 0u32;
        let mut last = Instant::now();
        while got < N && last.elapsed() < Duration::from_millis(500) {
            if got_one() {
                got += 1;
                last = Instant::now();
            }
        }
        (got, (last - t0).as_secs_f64(), thread_cpu() - c0)
    });
    let tx = std::thread::spawn(move || {
        enter(&a);
        let mut one = send();
        while !ready.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(20));
        let c0 = thread_cpu();
        for _ in 0..N {
            one();
        }
        thread_cpu() - c0
    });
    let tx_cpu = tx.join().unwrap();
    let (got, secs, rx_cpu) = rx.join().unwrap();
    (got, secs, tx_cpu.as_secs_f64() * 1e6 / f64::from(N), rx_cpu.as_secs_f64() * 1e6 / f64::from(got.max(1)))
}

fn throughput(nets: &Nets) {
    let (got, secs, tx_us, rx_us) = run_pair(
        nets,
        || {
            let mut s = RawSocket::open("v1").unwrap();
            Box::new(move || {
                let _ = s.send(&SA_DELETE_MCMEMBER);
            })
        },
        || {
            let mut s = RawSocket::open("v2").unwrap();
            let mut buf = vec![0u8; 2048];
            Box::new(
                move || matches!(s.recv(&mut buf), Ok(Some(n)) if n == SA_DELETE_MCMEMBER.len() && roce_wire::frame::FramePacket::new_checked(&buf[..n]).is_ok()),
            )
        },
    );
    let raw_pps = f64::from(got) / secs;
    println!("rawsock: {got}/{N} frames of 322 B in {secs:.3} s = {raw_pps:.0} frames/s (received, parsed, ICRC checked); CPU {tx_us:.2} µs/frame sending, {rx_us:.2} µs/frame receiving");
    let (kgot, ksecs, ktx_us, krx_us) = run_pair(
        nets,
        || {
            let s = UdpSocket::bind("198.18.2.11:0").unwrap();
            let payload = [7u8; 280]; // 322-byte frames: 14 + 20 + 8 + 280
            Box::new(move || {
                let _ = s.send_to(&payload, "198.18.2.12:9999");
            })
        },
        || {
            let s = UdpSocket::bind("198.18.2.12:9999").unwrap();
            s.set_nonblocking(true).unwrap();
            let mut buf = [0u8; 2048];
            Box::new(move || matches!(s.recv_from(&mut buf), Ok((280, _))))
        },
    );
    let k_pps = f64::from(kgot) / ksecs;
    println!("kernel UDP: {kgot}/{N} datagrams of 280 B (322-byte frames) in {ksecs:.3} s = {k_pps:.0} datagrams/s; CPU {ktx_us:.2} µs/frame sending, {krx_us:.2} µs/frame receiving");
    println!(
        "ratio raw/kernel: throughput {:.2}×, send CPU {:.2}×, receive CPU {:.2}×",
        raw_pps / k_pps,
        tx_us / ktx_us,
        rx_us / krx_us
    );
}

fn leave_latency(nets: &Nets) {
    let (a, b) = (nets.0.clone(), nets.1.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let sa = std::thread::spawn(move || {
        enter(&b);
        let cfg = StackConfig::new([0x02, 0, 0, 0, 0, 0x22], Ipv4Addr::new(198, 18, 2, 2), 24);
        let mut mac_cfg = cfg.clone();
        mac_cfg.mac = roce_net::raw::interface("v2").unwrap().mac.unwrap();
        let mut d = Driver::new(RawSocket::open("v2").unwrap(), Stack::new(mac_cfg))
            .with_sa(SaResponder::new(SaConfig::default()));
        while !stop2.load(Ordering::SeqCst) {
            let _ = d.turn(Duration::from_millis(10));
        }
    });
    enter(&a);
    let mac = roce_net::raw::interface("v1").unwrap().mac.unwrap();
    let mut cfg = StackConfig::new(mac, Ipv4Addr::new(198, 18, 2, 1), 24);
    cfg.sa = Some(IpAddr::V4(Ipv4Addr::new(198, 18, 2, 2)));
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
    d.stack.bind_addr(id, SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 18, 2, 1)), 0)).unwrap();
    let group = IpAddr::V4(Ipv4Addr::new(239, 1, 2, 3));
    let mut lat = Vec::new();
    for _ in 0..1000 {
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
    if !std::env::args().any(|a| a == "--bench") {
        return; // cargo test --benches: build only (needs root and namespaces to run)
    }
    let nets = Nets::new();
    throughput(&nets);
    leave_latency(&nets);
}
