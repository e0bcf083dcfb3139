//! [`RequestQueue`]: the SA server's receive queue, fair between requesters (issue 26 item 1:
//! one host's flood must not crowd out another's joins).
//!
//! The driver reads the socket fast (a batch is cheap: parse, ICRC, copy) and queues each SA
//! request here by its requester; answering (the responder, the answer's frame and ICRC, the
//! transmit) is the expensive part, and it takes the queued requests in deficit round robin
//! between requesters, so a quiet host's join waits for at most one quantum of each flooding
//! host's, never behind their whole backlog. A flood is shed here, counted by reason, instead
//! of in the kernel's socket queue, where a drop cannot tell one host from another.
//!
//! The shape is the kernel's fq_codel/sfq (net/sched/sch_fq_codel.c): requesters hashed with
//! a per-process random key into a fixed number of flows, one FIFO per flow (so requests of
//! one requester are never reordered: a Set then a Delete of the same member stay in order),
//! two lists of flows as `fq_codel_dequeue` keeps them: new flows (a flow that had nothing
//! waiting joins its tail) served before old flows (round robin), a credit per flow refilled by
//! a quantum when spent, the flow then moved to the old flows' tail (the cost of a request is
//! known after it is answered: the MADs it sent); a new flow that empties goes to the old
//! flows' tail (when there are old flows) before it leaves the lists, so that hosts coming and
//! going one request at a time are served in arrival order and cannot starve the old flows; and
//! when the whole queue is full the request dropped is the head of the longest flow
//! (`fq_codel_drop`'s "fat flow"), so a host that spreads its flood over many source addresses
//! still cannot take the quiet host's place. One addition: a new flow with a quantum's worth of
//! requests waiting is a bulk flow already and goes to the old flows at once, so a burst that
//! arrives before any serving (a flood's first read) does not keep the new flows' head. Memory
//! is bounded: at most `limit` requests, held in one slab, whatever the number of requesters.
//!
//! A frame whose requester's queue is already full is dropped before the stack parses it
//! ([`RequestQueue::shed_frame`]: its Ethernet, IP and UDP headers read, no ICRC), which makes
//! reading a flood much cheaper than answering it, so that the socket is drained faster than
//! a flood fills it.

use std::collections::hash_map::RandomState;
use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::net::IpAddr;

use etherparse::{NetSlice, SlicedPacket, TransportSlice};

use roce_cm::MadRequest;

/// Flows (hash buckets of requesters), as fq_codel's default `flows 1024`.
pub const FLOWS: usize = 1024;
/// Default [`RequestQueueConfig::per_requester`].
pub const DEFAULT_PER_REQUESTER: usize = 256;
/// Default [`RequestQueueConfig::limit`].
pub const DEFAULT_LIMIT: usize = 4096;
/// Default [`RequestQueueConfig::quantum`].
pub const DEFAULT_QUANTUM: u32 = 4;

/// How big the queue may grow and how it shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestQueueConfig {
    /// At most this many requests queued from one requester (one flow); a request past it is
    /// dropped, counted `requester_queue_full`. Default 256.
    pub per_requester: usize,
    /// At most this many requests queued in all (about 300 bytes each: 1.2 MiB at the
    /// default 4,096); past it the head of the longest flow is dropped, counted
    /// `request_queue_full`.
    pub limit: usize,
    /// MADs a requester may send in one turn of the round robin (its answers, RMPP segments
    /// one each). Default 4.
    pub quantum: u32,
}

impl Default for RequestQueueConfig {
    fn default() -> Self {
        RequestQueueConfig { per_requester: DEFAULT_PER_REQUESTER, limit: DEFAULT_LIMIT, quantum: DEFAULT_QUANTUM }
    }
}

impl RequestQueueConfig {
    /// Check the bounds: each at least 1, `per_requester` ≤ `limit` ≤ 2^24.
    pub fn validate(&self) -> Result<(), String> {
        if self.per_requester == 0 || self.limit == 0 || self.quantum == 0 {
            return Err(format!(
                "the request queue bounds and quantum are at least 1 (per requester {}, limit {}, quantum {})",
                self.per_requester, self.limit, self.quantum
            ));
        }
        if self.per_requester > self.limit || self.limit > 1 << 24 {
            return Err(format!(
                "a requester's queue ({}) is at most the whole queue ({}), which is at most 16777216",
                self.per_requester, self.limit
            ));
        }
        Ok(())
    }
}

/// What the queue did. Every request it did not hand on is counted under one `dropped_*`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestQueueStats {
    /// Requests queued.
    pub queued: u64,
    /// Requests handed to the SA.
    pub served: u64,
    /// Dropped on arrival: the requester's queue held [`RequestQueueConfig::per_requester`].
    pub dropped_requester_queue_full: u64,
    /// Dropped from the head of the longest flow: the whole queue held
    /// [`RequestQueueConfig::limit`].
    pub dropped_request_queue_full: u64,
    /// The most requests queued at once.
    pub max_queued: usize,
    /// The most flows listed at once (new and old: with requests, or emptied and not yet
    /// visited).
    pub max_active_flows: usize,
}

const NIL: u32 = u32::MAX;

/// One queued request in the slab, linked to the next of its flow.
#[derive(Debug)]
struct Slot {
    req: MadRequest,
    next: u32,
}

/// Which list a flow is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listed {
    No,
    New,
    Old,
}

/// One flow: a FIFO through the slab, its credit, and its list.
#[derive(Debug, Clone, Copy)]
struct Flow {
    head: u32,
    tail: u32,
    len: u32,
    credit: i64,
    listed: Listed,
}

impl Flow {
    const EMPTY: Flow = Flow { head: NIL, tail: NIL, len: 0, credit: 0, listed: Listed::No };
}

/// The SA server's requests, queued per requester and served in deficit round robin.
#[derive(Debug)]
pub struct RequestQueue {
    cfg: RequestQueueConfig,
    hasher: RandomState,
    flows: Vec<Flow>,
    /// Flows that had nothing waiting when a request came, in arrival order: served first.
    new_flows: VecDeque<u16>,
    /// The other listed flows, in round-robin order (the front is served).
    old_flows: VecDeque<u16>,
    slots: Vec<Slot>,
    free: u32,
    len: usize,
    stats: RequestQueueStats,
}

impl Default for RequestQueue {
    fn default() -> Self {
        RequestQueue::new(RequestQueueConfig::default())
    }
}

impl RequestQueue {
    /// An empty queue (a configuration [`RequestQueueConfig::validate`] refuses is clamped to
    /// at least one request each).
    pub fn new(cfg: RequestQueueConfig) -> RequestQueue {
        let limit = cfg.limit.clamp(1, 1 << 24);
        let cfg =
            RequestQueueConfig { per_requester: cfg.per_requester.clamp(1, limit), limit, quantum: cfg.quantum.max(1) };
        RequestQueue {
            cfg,
            hasher: RandomState::new(),
            flows: vec![Flow::EMPTY; FLOWS],
            new_flows: VecDeque::with_capacity(FLOWS),
            old_flows: VecDeque::with_capacity(FLOWS),
            slots: Vec::new(),
            free: NIL,
            len: 0,
            stats: RequestQueueStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &RequestQueueConfig {
        &self.cfg
    }

    /// The counters.
    pub fn stats(&self) -> &RequestQueueStats {
        &self.stats
    }

    /// Requests queued now.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no request waits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes the queue holds at most (its slab at `limit` requests and the flow table).
    pub fn max_bytes(&self) -> usize {
        self.cfg.limit * std::mem::size_of::<Slot>() + FLOWS * (std::mem::size_of::<Flow>() + 2)
    }

    fn flow_of(&self, req: &MadRequest) -> usize {
        self.flow_of_addr(req.src)
    }

    fn flow_of_addr(&self, src: IpAddr) -> usize {
        (self.hasher.hash_one(src) % FLOWS as u64) as usize
    }

    /// Drop `frame` before the stack sees it when it is a RoCEv2 datagram (UDP 4791) from a
    /// requester whose queue is full (counted `requester_queue_full`, as if queued and
    /// dropped); `false`: hand it to the stack. Only the Ethernet, VLAN, IP and UDP headers
    /// are read.
    pub fn shed_frame(&mut self, frame: &[u8]) -> bool {
        let Some(src) = roce_source(frame) else { return false };
        if (self.flows[self.flow_of_addr(src)].len as usize) < self.cfg.per_requester {
            return false;
        }
        self.stats.dropped_requester_queue_full += 1;
        true
    }

    /// Queue a request behind the others of its requester; when its requester's queue is
    /// full it is dropped, and when the whole queue is full the head of the longest flow is.
    pub fn push(&mut self, req: MadRequest) {
        let f = self.flow_of(&req);
        if self.flows[f].len as usize >= self.cfg.per_requester {
            self.stats.dropped_requester_queue_full += 1;
            return;
        }
        if self.len >= self.cfg.limit {
            self.drop_from_longest();
        }
        let slot = self.alloc(req);
        let flow = &mut self.flows[f];
        if flow.tail == NIL {
            flow.head = slot;
        } else {
            self.slots[flow.tail as usize].next = slot;
        }
        flow.tail = slot;
        flow.len += 1;
        match flow.listed {
            // A requester with nothing waiting goes to the new flows with a fresh quantum: a
            // lone join is answered before the busy (old) flows, whatever they hold. A
            // flooding requester's flow stays listed, so it never gets this.
            Listed::No => {
                flow.listed = Listed::New;
                flow.credit = i64::from(self.cfg.quantum);
                self.new_flows.push_back(f as u16);
            }
            // A quantum's worth waiting before its turn: a bulk flow, not a new one.
            Listed::New if flow.len >= self.cfg.quantum => {
                flow.listed = Listed::Old;
                self.new_flows.retain(|&n| usize::from(n) != f);
                self.old_flows.push_back(f as u16);
            }
            Listed::New | Listed::Old => {}
        }
        self.len += 1;
        self.stats.queued += 1;
        self.stats.max_queued = self.stats.max_queued.max(self.len);
        self.stats.max_active_flows = self.stats.max_active_flows.max(self.new_flows.len() + self.old_flows.len());
    }

    fn alloc(&mut self, req: MadRequest) -> u32 {
        if self.free != NIL {
            let i = self.free;
            let s = &mut self.slots[i as usize];
            self.free = s.next;
            s.req = req;
            s.next = NIL;
            return i;
        }
        self.slots.push(Slot { req, next: NIL });
        (self.slots.len() - 1) as u32
    }

    /// Unlink the head of flow `f` (which has one) and put its slot on the free list.
    fn unlink_head(&mut self, f: usize) -> u32 {
        let flow = &mut self.flows[f];
        let i = flow.head;
        flow.head = self.slots[i as usize].next;
        if flow.head == NIL {
            flow.tail = NIL;
        }
        flow.len -= 1;
        self.len -= 1;
        i
    }

    fn release(&mut self, i: u32) {
        self.slots[i as usize].next = self.free;
        self.free = i;
    }

    /// Drop the head of the longest flow (it stays listed, emptied or not, until its turn).
    fn drop_from_longest(&mut self) {
        let listed = self.new_flows.iter().chain(&self.old_flows);
        let Some(&f) = listed.max_by_key(|&&f| self.flows[usize::from(f)].len) else { return };
        let f = usize::from(f);
        if self.flows[f].len == 0 {
            return; // nothing is queued (a limit below one request cannot be configured)
        }
        let i = self.unlink_head(f);
        self.release(i);
        self.stats.dropped_request_queue_full += 1;
    }

    /// Hand up to `budget` requests to `answer`, in deficit round robin between requesters:
    /// `answer` returns the MADs it sent for the request (its cost; counted at least 1).
    /// Returns the requests served.
    pub fn serve(&mut self, budget: usize, answer: impl FnMut(&MadRequest) -> usize) -> usize {
        self.serve_bounded(budget, budget, answer)
    }

    /// [`RequestQueue::serve`], but of those `budget` requests at most `bulk_budget` from the
    /// old flows (requesters with a backlog): new flows' requests (sparse requesters, a lone
    /// join) go out in large batches, while a flood's are taken a few at a time, so that the
    /// caller reads its sockets again soon.
    pub fn serve_bounded(
        &mut self,
        budget: usize,
        bulk_budget: usize,
        mut answer: impl FnMut(&MadRequest) -> usize,
    ) -> usize {
        let (mut served, mut bulk) = (0, 0);
        while served < budget {
            if self.new_flows.is_empty() && bulk >= bulk_budget {
                break;
            }
            let from_new = !self.new_flows.is_empty();
            let list = if from_new { &mut self.new_flows } else { &mut self.old_flows };
            let Some(f) = list.pop_front() else { break };
            let f = usize::from(f);
            let flow = &mut self.flows[f];
            if flow.credit <= 0 {
                // Spent: a fresh quantum, and the next requester's turn.
                flow.credit += i64::from(self.cfg.quantum);
                flow.listed = Listed::Old;
                self.old_flows.push_back(f as u16);
                continue;
            }
            if flow.len == 0 {
                // Emptied: a new flow passes through the old flows first (when there are
                // any), so that a stream of new flows cannot starve them; then it leaves.
                if from_new && !self.old_flows.is_empty() {
                    flow.listed = Listed::Old;
                    self.old_flows.push_back(f as u16);
                } else {
                    flow.listed = Listed::No;
                }
                continue;
            }
            // Its turn goes on: back at the front of its list.
            let list = if from_new { &mut self.new_flows } else { &mut self.old_flows };
            list.push_front(f as u16);
            let i = self.unlink_head(f);
            let cost = answer(&self.slots[i as usize].req).max(1);
            self.release(i);
            served += 1;
            bulk += usize::from(!from_new);
            self.stats.served += 1;
            self.flows[f].credit -= i64::try_from(cost).unwrap_or(i64::MAX);
        }
        served
    }
}

/// The source address of a RoCEv2 frame (Ethernet, an optional VLAN tag, IPv4 or IPv6, UDP
/// to port 4791); `None` for any other frame or one too short for its headers.
fn roce_source(frame: &[u8]) -> Option<IpAddr> {
    let p = SlicedPacket::from_ethernet(frame).ok()?;
    match p.transport {
        Some(TransportSlice::Udp(u)) if u.destination_port() == roce_wire::ROCEV2_UDP_PORT => {}
        _ => return None,
    }
    match p.net? {
        NetSlice::Ipv4(s) => Some(IpAddr::V4(s.header().source_addr())),
        NetSlice::Ipv6(s) => Some(IpAddr::V6(s.header().source_addr())),
        NetSlice::Arp(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};

    use roce_wire::{Gid, MAD_SIZE};

    fn req(host: u8, seq: u32) -> MadRequest {
        let src = IpAddr::V4(Ipv4Addr::new(198, 18, 0, host));
        let mut mad = [0u8; MAD_SIZE];
        mad[..4].copy_from_slice(&seq.to_be_bytes());
        MadRequest { src, src_qp: 1, src_gid: Gid::from_ip(src), mad }
    }

    fn seq(r: &MadRequest) -> (u8, u32) {
        let IpAddr::V4(a) = r.src else { unreachable!() };
        (a.octets()[3], u32::from_be_bytes(r.mad[..4].try_into().unwrap()))
    }

    /// Up to `budget` requests served, at most `bulk` from old flows, one MAD each: (host,
    /// sequence number) in serving order.
    fn take(q: &mut RequestQueue, budget: usize, bulk: usize) -> Vec<(u8, u32)> {
        let mut out = Vec::new();
        q.serve_bounded(budget, bulk, |r| {
            out.push(seq(r));
            1
        });
        out
    }

    /// Everything queued, served one MAD each: (host, sequence number) in serving order.
    fn drain(q: &mut RequestQueue) -> Vec<(u8, u32)> {
        take(q, usize::MAX, usize::MAX)
    }

    /// Two hosts whose flows do not collide (the hash key is random per queue).
    fn two_hosts(q: &RequestQueue) -> (u8, u8) {
        let a = 1;
        let b = (2..=255).find(|&b| q.flow_of(&req(b, 0)) != q.flow_of(&req(a, 0))).unwrap();
        (a, b)
    }

    /// A queue (100 requests per requester, quantum 4) with `n` requests of a flooding host
    /// queued, and a quiet host whose flow is another.
    fn flooded(n: u32) -> (RequestQueue, u8, u8) {
        let mut q = RequestQueue::new(RequestQueueConfig { per_requester: 100, limit: 1000, quantum: 4 });
        let (flood, quiet) = two_hosts(&q);
        for i in 0..n {
            q.push(req(flood, i));
        }
        (q, flood, quiet)
    }

    /// A quiet host's request queued behind a flood is served first (its flow was empty), its
    /// second one after at most the flood's quantum, and each host's requests come out in the
    /// order they went in.
    #[test]
    fn a_quiet_requester_is_served_within_one_quantum_in_order() {
        let (mut q, flood, quiet) = flooded(100);
        q.push(req(quiet, 0));
        q.push(req(quiet, 1));
        let out = drain(&mut q);
        let second_quiet = out.iter().rposition(|s| s.0 == quiet).unwrap();
        assert!(second_quiet <= 1 + 4, "the quiet host's second request waited for {second_quiet}");
        let first_quiet = out.iter().position(|s| s.0 == quiet).unwrap();
        assert_eq!(first_quiet, 0, "the quiet host, whose flow was empty, goes first");
        for host in [flood, quiet] {
            let s: Vec<u32> = out.iter().filter(|s| s.0 == host).map(|s| s.1).collect();
            assert!(s.windows(2).all(|w| w[0] < w[1]), "host {host} reordered: {s:?}");
        }
        assert_eq!(out.len(), 102);
        assert!(q.is_empty());
        assert_eq!(q.stats().served, 102);
    }

    /// Requesters that send one request at a time (as 64 soak clients do) are new flows each
    /// time: they are served in the order they came, never the newest first, so none waits
    /// while later ones keep coming (a first version served new flows newest first: the soak
    /// saw answers 2.6 s late and clients giving up).
    #[test]
    fn sparse_requesters_are_served_in_arrival_order() {
        let mut q = RequestQueue::new(RequestQueueConfig { per_requester: 10, limit: 1000, quantum: 4 });
        // 40 hosts with a flow each (the hash key is random).
        let mut hosts: Vec<u8> = Vec::new();
        for h in 1..=255u8 {
            if hosts.len() < 40 && hosts.iter().all(|&o| q.flow_of(&req(o, 0)) != q.flow_of(&req(h, 0))) {
                hosts.push(h);
            }
        }
        assert_eq!(hosts.len(), 40);
        let mut order = Vec::new();
        // Ten come, then one is answered for each that comes.
        for &h in &hosts[..10] {
            q.push(req(h, 0));
        }
        for &h in &hosts[10..] {
            order.extend(take(&mut q, 1, 1).iter().map(|s| s.0));
            q.push(req(h, 0));
        }
        order.extend(drain(&mut q).iter().map(|s| s.0));
        assert_eq!(order, hosts, "served in arrival order");
    }

    /// `serve_bounded`: of a call's budget at most `bulk_budget` go to requesters with a
    /// backlog (old flows); a new flow's requests are taken first and besides them.
    #[test]
    fn a_step_takes_few_of_a_backlog_and_every_new_flow() {
        let (mut q, _, quiet) = flooded(50);
        assert_eq!(take(&mut q, 16, 4).len(), 4, "a backlog alone: the bulk bound");
        q.push(req(quiet, 0));
        let out = take(&mut q, 16, 4);
        assert_eq!(out.len(), 5, "the new flow's request besides the bulk bound");
        assert_eq!(out[0].0, quiet, "the new flow first");
        assert_eq!(q.len(), 50 - 8);
    }

    /// Past its bound a requester's requests are dropped and counted; another's still queue.
    #[test]
    fn past_its_bound_a_requester_is_shed_counted() {
        let mut q = RequestQueue::new(RequestQueueConfig { per_requester: 10, limit: 1000, quantum: 4 });
        let (flood, quiet) = two_hosts(&q);
        for i in 0..50 {
            q.push(req(flood, i));
        }
        q.push(req(quiet, 0));
        assert_eq!(q.len(), 11);
        assert_eq!(q.stats().dropped_requester_queue_full, 40);
        let out = drain(&mut q);
        // The first ten of the flood were kept (tail drop), the quiet host's one too.
        assert_eq!(out.iter().filter(|s| s.0 == flood).map(|s| s.1).collect::<Vec<_>>(), (0..10).collect::<Vec<_>>());
        assert!(out.contains(&(quiet, 0)));
    }

    /// A flood spread over 20 source addresses fills the whole queue: the drops come from the
    /// longest flows' heads, never the quiet host's lone request; memory stays within the
    /// limit's slab.
    #[test]
    fn a_full_queue_drops_from_the_longest_flow() {
        let mut q = RequestQueue::new(RequestQueueConfig { per_requester: 64, limit: 128, quantum: 1 });
        // A quiet host whose flow no flooding host shares (the hash key is random).
        let quiet = (100..=255).find(|&h| (0..20).all(|f| q.flow_of(&req(h, 0)) != q.flow_of(&req(f, 0)))).unwrap();
        q.push(req(quiet, 7));
        // 20 flooding hosts: about 6 requests each wait once the queue is full.
        for i in 0..10_000u32 {
            q.push(req((i % 20) as u8, i));
        }
        assert_eq!(q.len(), 128);
        assert!(q.slots.len() <= 128, "the slab grew past the limit: {}", q.slots.len());
        let s = *q.stats();
        assert_eq!(s.queued, 10_001);
        assert_eq!(s.queued, s.dropped_request_queue_full + q.len() as u64);
        assert!(drain(&mut q).contains(&(quiet, 7)), "the quiet host's request was kept");
    }

    /// Deficit round robin: a requester whose answers take many MADs (an RMPP table) waits
    /// for its credit to come back, so the others get as many MADs out as it does.
    #[test]
    fn costly_answers_spend_the_credit() {
        let mut q = RequestQueue::new(RequestQueueConfig { per_requester: 100, limit: 1000, quantum: 4 });
        let (big, small) = two_hosts(&q);
        for i in 0..10 {
            q.push(req(big, i));
            q.push(req(small, i));
        }
        let mut mads = [0usize; 2];
        q.serve(12, |r| {
            let cost = if seq(r).0 == big { 8 } else { 1 };
            mads[usize::from(seq(r).0 == big)] += cost;
            cost
        });
        // 12 served: the big one got 1 request (8 MADs) per 2 turns, the small one 4 per turn.
        assert!(mads[1] <= mads[0] + 8, "big {} MADs, small {}", mads[1], mads[0]);
    }

    /// A frame from a requester whose queue is full is shed before the stack (counted); a
    /// frame of another requester, or not RoCEv2, is not.
    #[test]
    fn frames_of_a_full_requester_are_shed_before_the_stack() {
        let mut q = RequestQueue::new(RequestQueueConfig { per_requester: 2, limit: 100, quantum: 1 });
        let (flood, quiet) = two_hosts(&q);
        let frame = |host: u8| {
            let src = IpAddr::V4(Ipv4Addr::new(198, 18, 0, host));
            let mut f = Vec::new();
            let (b, ext) = (
                roce_wire::bth::Repr::new(roce_wire::bth::Opcode::UdSendOnly, 1, 0),
                roce_wire::ext::ExtHeaders::deth(roce_wire::GSI_QKEY, 1),
            );
            let mad = [0u8; MAD_SIZE];
            let r = roce_wire::frame::FrameRepr::new(
                [2, 0, 0, 0, 0, 1],
                [2, 0, 0, 0, 0, 2],
                src,
                "198.18.0.250".parse().unwrap(),
                b,
                ext,
                &mad,
            );
            f.resize(r.buffer_len(), 0);
            let n = r.emit(&mut f).unwrap();
            f.truncate(n);
            f
        };
        let (ff, qf) = (frame(flood), frame(quiet));
        assert!(!q.shed_frame(&ff));
        q.push(req(flood, 0));
        q.push(req(flood, 1));
        assert!(q.shed_frame(&ff), "the flood's queue is full");
        assert!(!q.shed_frame(&qf), "another requester's frame goes on");
        assert!(!q.shed_frame(&ff[..20]), "not a whole RoCEv2 frame: the stack counts it");
        assert_eq!(q.stats().dropped_requester_queue_full, 1);
    }

    #[test]
    fn bounds_are_checked() {
        assert!(RequestQueueConfig::default().validate().is_ok());
        assert!(RequestQueueConfig { per_requester: 0, ..Default::default() }.validate().is_err());
        assert!(RequestQueueConfig { per_requester: 10, limit: 5, quantum: 1 }.validate().is_err());
        assert!(RequestQueueConfig { quantum: 0, ..Default::default() }.validate().is_err());
    }
}
