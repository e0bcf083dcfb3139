//! Heap allocations per join+leave cycle in steady state (issue 15, item 2), counted with a
//! counting global allocator (this test binary only). The cycle is driven by hand, frame by
//! frame, so that every allocation is charged to the side that made it:
//! - the joining stack (`join_multicast`, `leave_multicast`, `poll_transmit`, `handle_frame`,
//!   `poll_event`): none after warm-up;
//! - the SA host (its stack's QP1 and the in-process SA responder, which makes and deletes
//!   the group at every cycle): none after warm-up either.
//!
//! Speed is measured in the criterion bench (crates/roce-net/benches/engine.rs), never here.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use roce_cm::{CmId, EventKind, Instant, MulticastPaths, PortSpace, QpType, Stack, StackConfig};
use roce_net::SaHost;
use roce_wire::mcmember::JoinState;

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; only counts calls on this thread.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const SA: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const GROUP: IpAddr = IpAddr::V4(Ipv4Addr::new(239, 1, 2, 3));

struct Pair {
    a: Stack,
    sa: SaHost,
    id: CmId,
    buf: Vec<u8>,
    now: Instant,
    /// Allocations charged to each side.
    stack_allocs: u64,
    sa_allocs: u64,
}

impl Pair {
    fn new() -> Pair {
        let mut cfg = StackConfig::new([2, 0, 0, 0, 0, 1], A, 16);
        cfg.sa = Some(IpAddr::V4(SA));
        cfg.multicast_paths = MulticastPaths::SA_ONLY;
        let mut a = Stack::new(cfg);
        // A duplicate cache of 1,024 entries fills during the warm-up: its slots grow by
        // doubling up to their bound (65,536 by default), amortized, not per cycle; what is
        // measured is the steady state, a full cache recycling its slots.
        let sa_cfg = roce_sa::SaConfig { dup_cache_size: 1024, ..roce_sa::SaConfig::roce() };
        let sa = SaHost::new(StackConfig::new([2, 0, 0, 0, 0, 2], SA, 16), sa_cfg).expect("SA config");
        let id = a.create_id(PortSpace::Udp, QpType::Ud).unwrap();
        a.bind_addr(id, SocketAddr::new(IpAddr::V4(A), 0)).unwrap();
        Pair { a, sa, id, buf: vec![0; 65_536], now: Instant::ZERO, stack_allocs: 0, sa_allocs: 0 }
    }

    fn on_stack<T>(&mut self, f: impl FnOnce(&mut Stack, &mut [u8]) -> T) -> T {
        let before = allocs();
        let r = f(&mut self.a, &mut self.buf);
        self.stack_allocs += allocs() - before;
        r
    }

    fn on_sa<T>(&mut self, f: impl FnOnce(&mut SaHost, &mut [u8]) -> T) -> T {
        let before = allocs();
        let r = f(&mut self.sa, &mut self.buf);
        self.sa_allocs += allocs() - before;
        r
    }

    /// Carry frames both ways until both sides are quiet (the SA's MAC is learnt through ARP
    /// on the first cycle).
    fn exchange(&mut self) {
        use roce_net::Node;
        let now = self.now;
        loop {
            let mut moved = false;
            while let Some(n) = self.on_stack(|s, buf| s.poll_transmit(now, buf)) {
                let frame = self.buf[..n].to_vec_outside_count();
                self.on_sa(|h, _| h.handle_frame(now, &frame));
                moved = true;
            }
            while let Some(n) = self.on_sa(|h, buf| Node::poll_transmit(h, now, buf)) {
                let frame = self.buf[..n].to_vec_outside_count();
                self.on_stack(|s, _| s.handle_frame(now, &frame));
                moved = true;
            }
            if !moved {
                break;
            }
        }
    }

    fn cycle(&mut self) {
        let (now, id) = (self.now, self.id);
        self.on_stack(|s, _| s.join_multicast(now, id, GROUP, JoinState::FULL_MEMBER)).unwrap();
        self.exchange();
        let e = self.on_stack(|s, _| s.poll_event()).expect("join answered");
        assert_eq!(e.kind, EventKind::MulticastJoin);
        self.on_stack(|s, _| s.leave_multicast(now, id, GROUP)).unwrap();
        self.exchange();
        let e = self.on_stack(|s, _| s.poll_event()).expect("leave answered");
        assert_eq!(e.kind, EventKind::MulticastLeft);
    }
}

/// The harness's own copy of a frame between the two sides, not charged to either.
trait CopyOutsideCount {
    fn to_vec_outside_count(&self) -> Vec<u8>;
}

impl CopyOutsideCount for [u8] {
    fn to_vec_outside_count(&self) -> Vec<u8> {
        let before = allocs();
        let v = self.to_vec();
        ALLOCS.with(|c| c.set(before));
        v
    }
}

#[test]
fn no_allocation_per_join_leave_cycle_on_the_stack_after_warm_up() {
    let mut p = Pair::new();
    // Warm-up: ARP, first-time capacities of maps, queues and arenas, and the SA's duplicate
    // cache filled to its size (1,024 answers: 512 cycles).
    for _ in 0..1000 {
        p.cycle();
    }
    let (s0, sa0) = (p.stack_allocs, p.sa_allocs);
    const N: u64 = 10_000;
    for _ in 0..N {
        p.cycle();
    }
    let stack = p.stack_allocs - s0;
    let sa = p.sa_allocs - sa0;
    println!(
        "allocations per join+leave cycle after warm-up: joining stack {:.3}, SA host {:.3} (over {N} cycles)",
        stack as f64 / N as f64,
        sa as f64 / N as f64
    );
    assert_eq!(stack, 0, "the joining stack allocated {stack} times in {N} cycles");
    assert_eq!(sa, 0, "the SA host allocated {sa} times in {N} cycles");
}
