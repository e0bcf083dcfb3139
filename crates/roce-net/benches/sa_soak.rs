//! A soak of `roce sa-server` by 64 clients (issue 26 item 1), on a veth pair between two
//! network namespaces this bench creates (198.18.27.0/24 only; needs root):
//! - the release `roce` binary runs `sa-server --iface v2 --ip 198.18.27.2` in one namespace;
//! - in the other, 64 engines (roce-cm `Stack`s on raw sockets, each with its own MAC and
//!   address 198.18.27.100+i, as 64 hosts) join and leave multicast groups through it in a loop
//!   for the soak's duration: each cycle joins one of 16 shared groups (`rdma_join_multicast`:
//!   SubnAdmSet, retried by the engine as the kernel's SA client does) and leaves it
//!   (SubnAdmDelete);
//! - every join and leave is timed from the call to its event (MULTICAST_JOIN, MULTICAST_LEFT);
//!   a MULTICAST_ERROR, or no event within 10 s, is a lost transaction.
//!
//! It prints the joins and leaves done, p50/p99/max of each, the sa-server's RSS at the start and
//! end, and the SA's own counts at SIGTERM. It asserts what is not a time: no lost transaction,
//! and no member left once every client has left (the SA's last "N groups, M members" line).
//! `cargo bench -p roce-net --bench sa_soak` soaks for 600 s (`ROCE_SOAK_SECS` to change);
//! under `cargo test --benches` (no `--bench` argument) it runs 3 s, so that it cannot rot.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use roce_cm::{EventKind, PortSpace, QpType, Stack, StackConfig};
use roce_net::driver::Driver;
use roce_net::raw::RawSocket;
use roce_wire::mcmember::JoinState;

mod veth;
use veth::{enter, rss_kib, start_sa_server, Nets};

const CLIENTS: u8 = 64;
const GROUPS: u8 = 16;
const SA_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 27, 2);
/// How long one join or leave may take before it counts as lost.
const LOST_AFTER: Duration = Duration::from_secs(10);

/// What one client did: its join and leave times, and its lost transactions (with why).
#[derive(Default)]
struct Tally {
    joins: Vec<Duration>,
    leaves: Vec<Duration>,
    lost: Vec<String>,
}

/// Client `i`: its own MAC and address on v1; join and leave until `end`.
fn client(ns: String, i: u8, end: Instant) -> Tally {
    enter(&ns);
    let mac = [2, 0, 0, 0, 0x1b, i];
    let ip = Ipv4Addr::new(198, 18, 27, 100 + i);
    let mut raw = RawSocket::open("v1").expect("raw socket on v1");
    raw.add_unicast(mac).expect("PACKET_MR_UNICAST");
    let mut cfg = StackConfig::new(mac, ip, 24);
    cfg.sa = Some(IpAddr::V4(SA_IP));
    cfg.seed = 0x50a4 + u64::from(i);
    let mut d = Driver::new(raw, Stack::new(cfg));
    let id = d.stack.create_id(PortSpace::Udp, QpType::Ud).expect("create_id");
    d.stack.bind_addr(id, SocketAddr::new(IpAddr::V4(ip), 0)).expect("bind_addr");
    let mut t = Tally::default();
    let mut cycle = 0u32;
    while Instant::now() < end {
        let g = IpAddr::V4(Ipv4Addr::new(239, 27, 0, ((u32::from(i) + cycle) % u32::from(GROUPS)) as u8));
        cycle += 1;
        let t0 = Instant::now();
        match d.join(id, g, JoinState::FULL_MEMBER, LOST_AFTER) {
            Ok(Some(e)) if e.kind == EventKind::MulticastJoin => t.joins.push(t0.elapsed()),
            other => {
                t.lost.push(format!("client {i} join {g}: {other:?}"));
                continue;
            }
        }
        let t0 = Instant::now();
        match d.leave(id, g, LOST_AFTER) {
            Ok(Some(e)) if e.kind == EventKind::MulticastLeft => t.leaves.push(t0.elapsed()),
            other => t.lost.push(format!("client {i} leave {g}: {other:?}")),
        }
    }
    let _ = d.stack.destroy_id(d.now(), id);
    let _ = d.run_for(Duration::from_millis(200));
    t
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn line(what: &str, mut v: Vec<Duration>, secs: f64) -> String {
    v.sort_unstable();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    format!(
        "{what:>6}: {:>9} done, {:>8.0}/s, p50 {:>8.1} µs, p99 {:>8.1} µs, max {:>9.1} µs",
        v.len(),
        v.len() as f64 / secs,
        us(percentile(&v, 0.50)),
        us(percentile(&v, 0.99)),
        us(v.last().copied().unwrap_or_default())
    )
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let secs: u64 =
        if full { std::env::var("ROCE_SOAK_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(600) } else { 3 };
    if !full {
        println!("sa_soak in test mode ({secs} s; figures not meaningful: `cargo bench` soaks for 600 s)");
    }
    let nets = Nets::pair(
        "sas",
        Some(("02:00:00:00:1b:f1", "02:00:00:00:1b:f2")),
        Ipv4Addr::new(198, 18, 27, 1),
        Ipv4Addr::new(198, 18, 27, 12),
    );
    let (mut sa, sa_lines, up) = start_sa_server(&nets.1, SA_IP, &[]);
    up.recv_timeout(Duration::from_secs(10)).expect("sa-server up");
    let pid = sa.pid();
    let (rss_start, _) = rss_kib(pid);

    let t0 = Instant::now();
    let end = t0 + Duration::from_secs(secs);
    let tallies = Arc::new(Mutex::new(Vec::new()));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (ns, tallies) = (nets.0.clone(), tallies.clone());
            std::thread::Builder::new()
                .name(format!("client{i}"))
                .spawn(move || {
                    let t = client(ns, i, end);
                    tallies.lock().unwrap().push(t);
                })
                .expect("client thread")
        })
        .collect();
    for c in clients {
        c.join().expect("a client thread panicked");
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let (rss_end, hwm) = rss_kib(pid);
    // Let the server print its last count, then stop it as an operator would.
    std::thread::sleep(Duration::from_millis(300));
    let status = sa.stop();
    let lines = sa_lines.lock().unwrap().clone();

    let mut all = Tally::default();
    for t in tallies.lock().unwrap().drain(..) {
        all.joins.extend(t.joins);
        all.leaves.extend(t.leaves);
        all.lost.extend(t.lost);
    }
    println!("sa_soak: {CLIENTS} clients, {GROUPS} groups, {elapsed:.1} s");
    println!("{}", line("join", all.joins.clone(), elapsed));
    println!("{}", line("leave", all.leaves.clone(), elapsed));
    println!("lost transactions: {}", all.lost.len());
    println!(
        "sa-server RSS: {} KiB at the start, {} KiB at the end (high-water {} KiB); exit {status:?}",
        rss_start, rss_end, hwm
    );
    let last_count = lines.iter().rev().find(|l| l.contains(" groups, ") && l.contains(" members")).cloned();
    println!("sa-server's last count: {}", last_count.as_deref().unwrap_or("(none)"));
    for l in lines.iter().filter(|l| !l.contains(" requests, ")) {
        println!("  sa-server: {l}");
    }
    assert!(all.lost.is_empty(), "lost transactions:\n{}", all.lost.join("\n"));
    assert!(!all.joins.is_empty() && all.joins.len() == all.leaves.len(), "every join left");
    let last = last_count.expect("the sa-server's count");
    assert!(last.ends_with(" 0 members"), "no member left behind: {last}");
}
