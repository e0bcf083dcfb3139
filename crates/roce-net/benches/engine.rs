//! Engine benchmarks (issue: the sans-IO engine), ratios and figures quoted in the notes:
//! - join+leave cycles per second through the engine against the in-process SA on the
//!   simulated link without latency (every frame framed, ICRC'd, parsed and answered);
//! - from `leave_multicast` to the SA Delete frame ready in `poll_transmit`;
//! - memory per joined group and per id, and the cost per join over 100,000 groups (flat?).
//!
//! Memory is counted with a counting global allocator (this bench binary only).

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant as WallInstant};

use criterion::{criterion_group, BatchSize, Criterion, Throughput};
use roce_cm::{CmId, EventKind, Instant, MulticastPaths, PortSpace, QpType, Stack, StackConfig};
use roce_net::{LinkConfig, NodeId, SaHost, SimNet};
use roce_sa::SaConfig;
use roce_wire::mcmember::JoinState;

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts live bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LIVE.fetch_add(n, Ordering::Relaxed);
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const SA: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const GROUP: IpAddr = IpAddr::V4(Ipv4Addr::new(239, 1, 2, 3));

fn net(paths: MulticastPaths) -> (SimNet, NodeId, NodeId, CmId) {
    let mut net = SimNet::new(7);
    net.set_capture(false);
    let mut cfg = StackConfig::new([2, 0, 0, 0, 0, 1], A, 16);
    cfg.sa = Some(IpAddr::V4(SA));
    cfg.multicast_paths = paths;
    let a = net.add(Stack::new(cfg), LinkConfig::default());
    // 100,000 groups exceed the 16,383 multicast LIDs: let groups share them. One port joins
    // them all, past the default member cap per port (spec/sa.md R-CAP): this SA holds them.
    let sa_cfg = SaConfig {
        max_groups: 200_000,
        mlid_count: 0x3fff,
        share_mlids: true,
        max_members_per_port: 1 << 20,
        ..SaConfig::default()
    };
    let sa = net.add(
        SaHost::new(StackConfig::new([2, 0, 0, 0, 0, 2], SA, 16), sa_cfg).expect("a valid SaConfig"),
        LinkConfig::default(),
    );
    let s = net.node_mut::<Stack>(a);
    let id = s.create_id(PortSpace::Udp, QpType::Ud).unwrap();
    s.bind_addr(id, SocketAddr::new(IpAddr::V4(A), 0)).unwrap();
    (net, a, sa, id)
}

fn cycle(net: &mut SimNet, a: NodeId, id: CmId, group: IpAddr) {
    let now = net.now();
    net.node_mut::<Stack>(a).join_multicast(now, id, group, JoinState::FULL_MEMBER).unwrap();
    net.drive_bounded(10_000).unwrap();
    let e = net.node_mut::<Stack>(a).poll_event().unwrap();
    assert_eq!(e.kind, EventKind::MulticastJoin);
    let now = net.now();
    net.node_mut::<Stack>(a).leave_multicast(now, id, group).unwrap();
    net.drive_bounded(10_000).unwrap();
    let e = net.node_mut::<Stack>(a).poll_event().unwrap();
    assert_eq!(e.kind, EventKind::MulticastLeft);
}

/// Total time and iterations criterion measured for one bench (warm-up included), so that
/// the ratio of two benches comes from this very run.
struct Tally {
    nanos: AtomicU64,
    iters: AtomicU64,
}

impl Tally {
    const fn new() -> Tally {
        Tally { nanos: AtomicU64::new(0), iters: AtomicU64::new(0) }
    }

    /// Time `iters` runs of `f` for criterion, and keep the sum.
    fn time(&self, iters: u64, mut f: impl FnMut()) -> Duration {
        let t = WallInstant::now();
        for _ in 0..iters {
            f();
        }
        let d = t.elapsed();
        self.nanos.fetch_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
        self.iters.fetch_add(iters, Ordering::Relaxed);
        d
    }

    /// The mean, once there are enough iterations to mean something (not in `cargo test`'s
    /// single pass, which is unoptimised as well).
    fn mean_ns(&self) -> Option<f64> {
        let n = self.iters.load(Ordering::Relaxed);
        (n >= 1000).then(|| self.nanos.load(Ordering::Relaxed) as f64 / n as f64)
    }
}

static CYCLE: Tally = Tally::new();
static DIRECT: Tally = Tally::new();

/// The two engines with the frames carried between them by hand (no simulated segment: no
/// event queue, no cable model), to separate the engines' cost from the simulator's.
struct Direct {
    a: Stack,
    sa: SaHost,
    id: CmId,
    buf: Vec<u8>,
    frame: Vec<u8>,
}

impl Direct {
    fn new() -> Direct {
        let mut cfg = StackConfig::new([2, 0, 0, 0, 0, 1], A, 16);
        cfg.sa = Some(IpAddr::V4(SA));
        cfg.multicast_paths = MulticastPaths::SA_ONLY;
        let mut a = Stack::new(cfg);
        let sa = SaHost::with_defaults(StackConfig::new([2, 0, 0, 0, 0, 2], SA, 16));
        let id = a.create_id(PortSpace::Udp, QpType::Ud).unwrap();
        a.bind_addr(id, SocketAddr::new(IpAddr::V4(A), 0)).unwrap();
        let mut d = Direct { a, sa, id, buf: vec![0; 9000], frame: vec![0; 9000] };
        d.cycle(); // ARP
        d
    }

    fn exchange(&mut self) {
        use roce_net::Node;
        loop {
            let mut moved = false;
            while let Some(n) = self.a.poll_transmit(Instant::ZERO, &mut self.buf) {
                self.sa.handle_frame(Instant::ZERO, &self.buf[..n]);
                moved = true;
            }
            while let Some(n) = Node::poll_transmit(&mut self.sa, Instant::ZERO, &mut self.frame) {
                self.a.handle_frame(Instant::ZERO, &self.frame[..n]);
                moved = true;
            }
            if !moved {
                return;
            }
        }
    }

    fn cycle(&mut self) {
        self.a.join_multicast(Instant::ZERO, self.id, GROUP, JoinState::FULL_MEMBER).unwrap();
        self.exchange();
        assert_eq!(self.a.poll_event().map(|e| e.kind), Some(EventKind::MulticastJoin));
        self.a.leave_multicast(Instant::ZERO, self.id, GROUP).unwrap();
        self.exchange();
        assert_eq!(self.a.poll_event().map(|e| e.kind), Some(EventKind::MulticastLeft));
    }
}
static SLICE: Tally = Tally::new();

/// The baseline: etherparse slicing the Ethernet, IPv4 and UDP headers of one 322-byte
/// RoCEv2 frame (an SA Delete), the cheapest useful work on a frame.
fn etherparse_baseline(c: &mut Criterion) {
    let frame = roce_wire::golden::SA_DELETE_MCMEMBER;
    assert_eq!(frame.len(), 322);
    let mut g = c.benchmark_group("baseline");
    g.throughput(Throughput::Elements(1));
    g.bench_function("etherparse_slice_eth_ipv4_udp_322B", |b| {
        b.iter_custom(|iters| {
            SLICE.time(iters, || {
                let s = etherparse::SlicedPacket::from_ethernet(black_box(&frame[..])).unwrap();
                black_box(&s);
            })
        })
    });
    g.finish();
}

fn join_leave(c: &mut Criterion) {
    let (mut n, a, _sa, id) = net(MulticastPaths::SA_ONLY);
    cycle(&mut n, a, id, GROUP); // learn the SA's MAC
    let mut g = c.benchmark_group("engine");
    g.throughput(Throughput::Elements(1));
    g.bench_function("join_leave_cycle_vs_in_process_sa", |b| {
        b.iter_custom(|iters| CYCLE.time(iters, || cycle(&mut n, a, id, GROUP)))
    });
    let mut d = Direct::new();
    g.bench_function("join_leave_cycle_engines_only", |b| b.iter_custom(|iters| DIRECT.time(iters, || d.cycle())));
    g.bench_function("leave_to_delete_frame_ready", |b| {
        let mut buf = vec![0u8; 9000];
        b.iter_batched(
            || {
                let (mut n, a, _sa, id) = net(MulticastPaths::SA_ONLY);
                cycle(&mut n, a, id, GROUP);
                let now = n.now();
                n.node_mut::<Stack>(a).join_multicast(now, id, GROUP, JoinState::FULL_MEMBER).unwrap();
                n.drive_bounded(10_000).unwrap();
                let _ = n.node_mut::<Stack>(a).poll_event();
                let s: Stack = std::mem::replace(n.node_mut::<Stack>(a), Stack::new(StackConfig::new([0; 6], A, 16)));
                (s, id)
            },
            |(mut s, id)| {
                s.leave_multicast(Instant::ZERO, id, GROUP).unwrap();
                let n = s.poll_transmit(Instant::ZERO, &mut buf).unwrap();
                black_box(n);
                s
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

/// Memory per joined group and per id, and the join cost across 100,000 groups.
fn memory_and_scaling() {
    const N: u32 = 100_000;
    let (mut n, a, sa, id) = net(MulticastPaths::SA_ONLY);
    cycle(&mut n, a, id, GROUP);
    let group = |i: u32| IpAddr::V4(Ipv4Addr::from(u32::from(Ipv4Addr::new(239, 0, 0, 0)) + i + 1));
    let mut buf = vec![0u8; 9000];
    // Drive the stack and the SA host by hand-free stepping: join N groups in batches.
    let before = LIVE.load(Ordering::Relaxed);
    let sa_before = n.node::<SaHost>(sa).sa.memory_usage();
    let mut per_batch = Vec::new();
    let batch = 10_000;
    for b in 0..N / batch {
        let t = WallInstant::now();
        for i in b * batch..(b + 1) * batch {
            let now = n.now();
            n.node_mut::<Stack>(a).join_multicast(now, id, group(i), JoinState::FULL_MEMBER).unwrap();
        }
        n.drive_bounded(10_000_000).unwrap();
        per_batch.push(t.elapsed() / batch);
        // The application takes its MULTICAST_JOIN events batch by batch, as one would; left
        // queued, 100,000 events would keep ≈ 260 B/group of queue capacity after draining.
        while n.node_mut::<Stack>(a).poll_event().is_some() {}
    }
    let stack_bytes = LIVE.load(Ordering::Relaxed);
    let s = n.node::<Stack>(a);
    assert_eq!(s.groups().count(), N as usize);
    let _ = (&mut buf, sa_before);
    // The SA host's share is counted by the responder itself; subtract it.
    let sa_now = n.node::<SaHost>(sa).sa.memory_usage();
    let total = stack_bytes.saturating_sub(before);
    println!(
        "engine memory: {} bytes for {N} joined groups (both hosts) ≈ {:.0} B/group in all",
        total,
        total as f64 / f64::from(N)
    );
    // The SA host's share, measured by dropping its responder's state — a copy of it, kept
    // aside and put back afterwards, so that the leaves below find their groups.
    let kept = n.node::<SaHost>(sa).sa.clone();
    let l0 = LIVE.load(Ordering::Relaxed);
    n.node_mut::<SaHost>(sa).sa = roce_sa::SaResponder::with_defaults();
    let sa_bytes = l0.saturating_sub(LIVE.load(Ordering::Relaxed));
    n.node_mut::<SaHost>(sa).sa = kept;
    println!(
        "of which the SA responder: {:.0} B/group; the joining stack: {:.0} B/joined group",
        sa_bytes as f64 / f64::from(N),
        total.saturating_sub(sa_bytes) as f64 / f64::from(N)
    );
    println!("sa responder's own estimate after: {sa_now:?}");
    let leave_t = WallInstant::now();
    let now = n.now();
    for i in 0..N {
        n.node_mut::<Stack>(a).leave_multicast(now, id, group(i)).unwrap();
    }
    n.drive_bounded(10_000_000).unwrap();
    let leave_per = leave_t.elapsed() / N;
    let mut outcome = std::collections::BTreeMap::new();
    while let Some(e) = n.node_mut::<Stack>(a).poll_event() {
        *outcome.entry(format!("{:?} {}", e.kind, e.status)).or_insert(0u32) += 1;
    }
    // Every leave must have been answered: a timed failure path would measure the wrong thing.
    assert_eq!(outcome.len(), 1, "leave outcomes: {outcome:?}");
    assert_eq!(outcome.get("MulticastLeft 0"), Some(&N), "leave outcomes: {outcome:?}");
    {
        let s = n.node::<Stack>(a);
        let r = &n.node::<SaHost>(sa).sa;
        println!(
            "after the leaves: stack groups {} pending work {}; SA groups {} members {} mlids {} usage {:?}",
            s.groups().count(),
            s.pending_work(),
            r.group_count(),
            r.member_count(),
            r.mlids_in_use(),
            r.memory_usage()
        );
    }
    // What stays allocated with no group left: capacity the maps and queues keep.
    let kept = LIVE.load(Ordering::Relaxed).saturating_sub(before);
    println!(
        "after leaving all {N}: {:.0} B/group still allocated (capacity kept by maps and queues, both hosts)",
        kept as f64 / f64::from(N)
    );
    println!(
        "join cost per group by batch of 10,000 (flat is good): {:?}",
        per_batch.iter().map(|d| format!("{:.2}µs", d.as_secs_f64() * 1e6)).collect::<Vec<_>>()
    );
    println!("leave cost per group over {N}: {:.2}µs", leave_per.as_secs_f64() * 1e6);

    // Engine-only memory: a stack alone (no SA host in the count), joins queued.
    let mut cfg_sa = StackConfig::new([2, 0, 0, 0, 0, 1], A, 16);
    cfg_sa.multicast_paths = MulticastPaths::SA_ONLY;
    cfg_sa.sa = Some(IpAddr::V4(SA));
    let mut s = Stack::new(cfg_sa);
    let id = s.create_id(PortSpace::Udp, QpType::Ud).unwrap();
    s.bind_addr(id, SocketAddr::new(IpAddr::V4(A), 0)).unwrap();
    let before = LIVE.load(Ordering::Relaxed);
    for i in 0..N {
        s.join_multicast(Instant::ZERO, id, group(i), JoinState::FULL_MEMBER).unwrap();
    }
    let per_group = (LIVE.load(Ordering::Relaxed) - before) as f64 / f64::from(N);
    println!("engine memory per pending group (member + group + queue entries): {per_group:.0} B");
    // As many ids as the ephemeral range has ports (28,232 by default), each bound to one:
    // beyond that a bind fails with EADDRNOTAVAIL after probing the whole range, as the
    // kernel's cma_alloc_any_port does, which would measure the probe, not the id.
    let before = LIVE.load(Ordering::Relaxed);
    const IDS: u32 = 20_000;
    let mut ids = Vec::with_capacity(IDS as usize);
    for _ in 0..IDS {
        let id = s.create_id(PortSpace::Udp, QpType::Ud).unwrap();
        s.bind_addr(id, SocketAddr::new(IpAddr::V4(A), 0)).unwrap();
        ids.push(id);
    }
    let per_id = (LIVE.load(Ordering::Relaxed) - before - ids.capacity() * 4) as f64 / f64::from(IDS);
    println!("engine memory per bound id: {per_id:.0} B");
    let _ = Duration::ZERO;
}

criterion_group!(benches, etherparse_baseline, join_leave);

fn main() {
    // `ROCE_BENCH_CYCLES=N`: run N join+leave cycles after one warm-up cycle and exit, for an
    // instruction count under `valgrind --tool=callgrind` (reproducible on a shared machine).
    // `ROCE_BENCH_SLICES=N`: N etherparse slicings of the 322-byte frame (the baseline's count).
    if let Some(n) = std::env::var("ROCE_BENCH_SLICES").ok().and_then(|v| v.parse::<u32>().ok()) {
        let frame = roce_wire::golden::SA_DELETE_MCMEMBER;
        for _ in 0..n {
            black_box(etherparse::SlicedPacket::from_ethernet(black_box(&frame[..])).unwrap());
        }
        return;
    }
    // `ROCE_BENCH_DIRECT=1` with it: the engines only (frames carried by hand).
    if let Some(n) = std::env::var("ROCE_BENCH_CYCLES").ok().and_then(|v| v.parse::<u32>().ok()) {
        if std::env::var_os("ROCE_BENCH_DIRECT").is_some() {
            let mut d = Direct::new();
            for _ in 0..n {
                d.cycle();
            }
            return;
        }
        let (mut net, a, _sa, id) = net(MulticastPaths::SA_ONLY);
        cycle(&mut net, a, id, GROUP);
        for _ in 0..n {
            cycle(&mut net, a, id, GROUP);
        }
        return;
    }
    // The memory and scaling figures come with a real run, not with `--profile-time` (a
    // profiler wants the cycle alone).
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--profile-time") {
        memory_and_scaling();
    }
    benches();
    criterion::Criterion::default().configure_from_args().final_summary();
    for (what, t) in [("on the simulated link", &CYCLE), ("engines only, frames carried by hand", &DIRECT)] {
        if let (Some(cycle), Some(slice)) = (t.mean_ns(), SLICE.mean_ns()) {
            println!(
                "join+leave cycle ({what}) {cycle:.0} ns ({:.0} cycles/s) = {:.1}× the etherparse Eth/IPv4/UDP slicing of a 322-byte frame ({slice:.1} ns), same run (goal ≤ 40×, ≥ 1 M/s)",
                1e9 / cycle,
                cycle / slice
            );
        }
    }
}
