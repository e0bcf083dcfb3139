//! A simulated Ethernet segment with a virtual clock, for running sans-IO engines against each
//! other deterministically (in the spirit of quinn-proto's test `Pair`).
//!
//! # Model
//! - **Topology**: one hub. Every frame a node transmits is offered to every *other* node;
//!   nodes filter destination MACs themselves.
//! - **Links**: each node hangs off the hub by its own cable, described by a [`LinkConfig`]. A
//!   frame from A to B crosses A's cable (egress: MTU check, serialization at A's bandwidth,
//!   then latency, jitter, loss, duplication, reordering and corruption, once for all
//!   receivers) and then B's cable (ingress: MTU check and the same effects, for B only). So
//!   the one-way delay A → B is `A.latency + B.latency` (+ jitter, + serialization), and a
//!   loss on A's cable loses the frame for everyone. Effects are counted in the
//!   [`NodeStats`] of the node whose cable caused them.
//! - **Time**: a virtual clock that starts at [`Instant::ZERO`] and only moves when the
//!   simulation runs: [`SimNet::step`] jumps to the next event (a frame's delivery or a node's
//!   timer), [`SimNet::run_until`] also moves it to the requested instant when idle before.
//! - **Events**: at equal times a timer fires before a delivery; timers of equal time fire in
//!   node order; deliveries of equal time in transmission order. Every random decision comes
//!   from a per-cable SplitMix64 stream derived from the seed, so a seed fixes the run, and
//!   changing one cable's configuration does not change what the other cables draw.
//! - **Transmission**: after every event, and before looking for the next one, the
//!   `poll_transmit` of every node that may have something to send is drained (in node order,
//!   at most [`SimNet::set_max_burst`] frames per node per drain): a node that was given a
//!   frame or a timeout, was reached through [`SimNet::node_mut`] (so frames queued by API
//!   calls leave at the current time on the next step or run), or still had frames after its
//!   last burst. A node that has nothing to send arms a timer for when it will
//!   ([`Node::poll_timeout`]); it is not polled again just because the clock moved.

use std::any::{type_name, Any};
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::io::{self, Write};
use std::path::Path;

use bytes::Bytes;
use std::time::Duration;

use roce_cm::Instant;

use crate::corrupt::{corrupt, CorruptScope};
use crate::node::Node;
use crate::pcap::PcapFileWriter;
use crate::rng::Rng;

/// The size of the buffer the simulator hands to [`Node::poll_transmit`] (larger than any MTU,
/// so that an oversized frame reaches the MTU check and is counted there).
pub const TX_BUF_LEN: usize = 65_536;

/// The default IP MTU: 4200, what RoCE NICs are configured with to carry a 4096-byte IB MTU
/// (4096 payload + IPv6 40 + UDP 8 + BTH 12 + RETH 16 + ImmDt 4 + ICRC 4 = 4180 fits).
pub const DEFAULT_MTU: usize = 4200;

/// Ethernet II header length (the frame may be this much larger than the MTU).
pub const ETH_HEADER_LEN: usize = 14;

/// An 802.1Q tag (a tagged frame may be this much larger still).
pub const VLAN_TAG_LEN: usize = 4;

/// Bytes a frame occupies on the wire beyond its captured bytes: preamble and SFD (8), FCS (4)
/// and the inter-frame gap (12). Counted for serialization delay.
pub const WIRE_OVERHEAD: usize = 24;

/// The minimum frame length on the wire without FCS (shorter frames are padded to it).
pub const MIN_WIRE_FRAME: usize = 60;

/// The default number of steps [`SimNet::run_until`] may take without the clock moving before
/// it declares a livelock.
pub const DEFAULT_STALL_LIMIT: u64 = 1_000_000;

/// One node's cable to the hub (see the [module docs](self) for how it applies).
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConfig {
    /// Propagation delay of this cable.
    pub latency: Duration,
    /// A uniform extra delay in `[0, jitter]` per frame crossing (may reorder frames).
    pub jitter: Duration,
    /// Probability that a frame crossing this cable is lost.
    pub loss: f64,
    /// Probability that a frame crossing this cable arrives twice (each copy gets its own
    /// jitter and reordering draw).
    pub duplicate: f64,
    /// Probability that a frame is held back by an extra [`LinkConfig::reorder_delay`], so that
    /// the frames behind it overtake it.
    pub reorder: f64,
    /// The extra delay of a reordered frame.
    pub reorder_delay: Duration,
    /// Probability that one byte of a frame is corrupted (XOR with a random non-zero value).
    pub corrupt: f64,
    /// Which bytes corruption may hit.
    pub corrupt_scope: CorruptScope,
    /// IP MTU: frames longer than `mtu + 14` (`+ 4` when 802.1Q-tagged) are dropped and
    /// counted in [`NodeStats::mtu_dropped`], on egress and on ingress.
    pub mtu: usize,
    /// Bits per second of this node's transmitter; `None` is infinitely fast. Frames queue
    /// behind each other and take `(max(len, 60) + 24) · 8 / bandwidth` seconds each.
    pub bandwidth: Option<u64>,
}

impl Default for LinkConfig {
    /// A perfect cable: no delay, no faults, MTU [`DEFAULT_MTU`], infinite bandwidth
    /// (`reorder_delay` is 1 ms, used only once `reorder` is set).
    fn default() -> Self {
        LinkConfig {
            latency: Duration::ZERO,
            jitter: Duration::ZERO,
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::from_millis(1),
            corrupt: 0.0,
            corrupt_scope: CorruptScope::Any,
            mtu: DEFAULT_MTU,
            bandwidth: None,
        }
    }
}

impl LinkConfig {
    /// A perfect cable with this propagation delay.
    pub fn with_latency(latency: Duration) -> LinkConfig {
        LinkConfig { latency, ..LinkConfig::default() }
    }

    /// No loss, duplication, reordering, corruption or jitter: a frame crosses unchanged,
    /// once, after the latency, and no random number is drawn (`Rng::chance` treats these
    /// probabilities as "never" without drawing).
    fn is_clean(&self) -> bool {
        let never = |p: f64| p <= 0.0 || p.is_nan();
        never(self.loss) && never(self.duplicate) && never(self.reorder) && never(self.corrupt) && self.jitter.is_zero()
    }

    /// The longest frame this cable carries: `mtu + 14`, `+ 4` when `frame` is 802.1Q-tagged.
    pub fn max_frame_len(&self, frame: &[u8]) -> usize {
        let tagged = frame.len() >= ETH_HEADER_LEN && frame[12..14] == [0x81, 0x00];
        self.mtu + ETH_HEADER_LEN + if tagged { VLAN_TAG_LEN } else { 0 }
    }
}

/// A cable's latency in nanoseconds (saturated as `Instant + Duration` saturates) and its
/// longest untagged frame.
fn link_constants(link: &LinkConfig) -> (u64, usize) {
    (u64::try_from(link.latency.as_nanos()).unwrap_or(u64::MAX), link.mtu.saturating_add(ETH_HEADER_LEN))
}

impl Slot {
    /// Whether `frame` is over this cable's MTU ([`LinkConfig::max_frame_len`]; a frame no
    /// longer than the untagged limit fits either way).
    fn too_long(&self, frame: &[u8]) -> bool {
        frame.len() > self.max_untagged && frame.len() > self.link.max_frame_len(frame)
    }
}

/// The time `len` bytes take on a wire of `bandwidth` bits per second.
pub fn wire_time(len: usize, bandwidth: u64) -> Duration {
    if bandwidth == 0 {
        return Duration::ZERO;
    }
    let bits = (len.max(MIN_WIRE_FRAME) + WIRE_OVERHEAD) as u128 * 8;
    let nanos = (bits * 1_000_000_000).div_ceil(u128::from(bandwidth));
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// A node's place on the segment (its index, in the order nodes were added).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(usize);

impl NodeId {
    /// The index (0 for the first node added).
    pub fn index(self) -> usize {
        self.0
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node {}", self.0)
    }
}

/// What happened to the frames of one node and on its cable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// Frames the node transmitted (polled from it, or injected as it).
    pub sent: u64,
    /// Bytes of those frames.
    pub sent_bytes: u64,
    /// Frames handed to the node's `handle_frame`.
    pub delivered: u64,
    /// Bytes of those frames.
    pub delivered_bytes: u64,
    /// Frames lost on this node's cable (either direction).
    pub lost: u64,
    /// Extra copies made on this node's cable.
    pub duplicated: u64,
    /// Frames held back for reordering on this node's cable.
    pub reordered: u64,
    /// Frames with a byte corrupted on this node's cable.
    pub corrupted: u64,
    /// Corruptions drawn but not done because the scope held no byte (a non-RoCEv2 frame
    /// under [`CorruptScope::IcrcCovered`]).
    pub corrupt_skipped: u64,
    /// Frames over this cable's MTU (sent by this node, or offered to it).
    pub mtu_dropped: u64,
    /// Calls of the node's `handle_timeout`.
    pub timeouts: u64,
}

impl NodeStats {
    fn add(&mut self, o: &NodeStats) {
        self.sent += o.sent;
        self.sent_bytes += o.sent_bytes;
        self.delivered += o.delivered;
        self.delivered_bytes += o.delivered_bytes;
        self.lost += o.lost;
        self.duplicated += o.duplicated;
        self.reordered += o.reordered;
        self.corrupted += o.corrupted;
        self.corrupt_skipped += o.corrupt_skipped;
        self.mtu_dropped += o.mtu_dropped;
        self.timeouts += o.timeouts;
    }
}

/// One transmitted frame, as the sender sent it (before any fault on the wire).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedTx {
    /// When the node transmitted it.
    pub time: Instant,
    /// The node that transmitted it.
    pub from: NodeId,
    /// The frame's bytes.
    pub data: Bytes,
}

/// [`SimNet::drive_bounded`] or [`SimNet::run_until`] found the simulation still busy after
/// its step budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Livelock {
    /// Steps taken.
    pub steps: u64,
    /// The virtual time when it gave up.
    pub now: Instant,
    /// Frames still in flight.
    pub in_flight: usize,
    /// The earliest armed timer, if any.
    pub next_timer: Option<(NodeId, Instant)>,
}

impl fmt::Display for Livelock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no quiescence after {} steps at {:?}: {} frames in flight", self.steps, self.now, self.in_flight)?;
        match self.next_timer {
            Some((id, at)) => write!(f, ", {id} has a timer at {at:?}"),
            None => f.write_str(", no timer armed"),
        }
    }
}

impl std::error::Error for Livelock {}

struct Slot {
    node: Box<dyn Node>,
    link: LinkConfig,
    /// `link.is_clean()`, kept with it.
    clean: bool,
    /// `link.latency` in nanoseconds (saturated), kept with it: `t + latency` for an
    /// [`Instant`] `t`, without the `Duration` arithmetic, on the clean path.
    latency_ns: u64,
    /// The longest untagged frame the cable carries (`link.mtu + 14`), kept with it.
    max_untagged: usize,
    rng: Rng,
    busy_until: Instant,
    stats: NodeStats,
    /// The node may have frames to send: it was handed an input or a `&mut` since it last
    /// answered `None`, or it hit the burst limit. Only these are polled.
    ready: bool,
    /// `node.poll_timeout()` as of the node's last drain: a node's timer changes only when
    /// the node is given an input or a `&mut`, which makes it ready, so only ready nodes are
    /// asked again.
    timer: Option<Instant>,
}

impl Slot {
    /// Frame `data` crosses this cable at `t`: the copies that come out, with their arrival
    /// times, each holding a reference to its frame in `frames`.
    fn cross(&mut self, t: Instant, data: FrameId, frames: &mut Frames, out: &mut Vec<(Instant, FrameId)>) {
        let link = &self.link;
        // A clean cable (the common case) draws nothing: one copy after the latency, exactly
        // what the general path below gives it, without its bookkeeping.
        if self.clean {
            frames.retain(data);
            out.push((t + link.latency, data));
            return;
        }
        let rng = &mut self.rng;
        if rng.chance(link.loss) {
            self.stats.lost += 1;
            return;
        }
        let copies = if rng.chance(link.duplicate) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        let jitter = u64::try_from(link.jitter.as_nanos()).unwrap_or(u64::MAX);
        for _ in 0..copies {
            let mut at = t + link.latency + Duration::from_nanos(rng.up_to(jitter));
            if rng.chance(link.reorder) {
                self.stats.reordered += 1;
                at += link.reorder_delay;
            }
            let mut copy = None;
            if rng.chance(link.corrupt) {
                let mut bytes = frames.get(data).to_vec();
                if corrupt(&mut bytes, link.corrupt_scope, rng).is_some() {
                    self.stats.corrupted += 1;
                    copy = Some(frames.add(&bytes));
                } else {
                    self.stats.corrupt_skipped += 1;
                }
            }
            let copy = copy.unwrap_or_else(|| {
                frames.retain(data);
                data
            });
            out.push((at, copy));
        }
    }
}

/// A frame's number in [`Frames`].
type FrameId = u32;

/// Frame buffers [`Frames`] keeps once no frame is in flight (what a burst of more made is
/// given back).
const KEPT_FRAMES: usize = 64;

/// The frames on the wire, by number: each one buffer, counted by the copies in flight that
/// refer to it and reused for a later frame once the last of them is delivered or lost (so
/// steady traffic neither allocates nor shares an allocation per frame).
#[derive(Default)]
struct Frames {
    bufs: Vec<Vec<u8>>,
    refs: Vec<u32>,
    free: Vec<FrameId>,
}

impl Frames {
    /// A frame holding a copy of `data`, with one reference (the caller's).
    fn add(&mut self, data: &[u8]) -> FrameId {
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.bufs.push(Vec::new());
                self.refs.push(0);
                (self.bufs.len() - 1) as FrameId
            }
        };
        let buf = &mut self.bufs[id as usize];
        buf.clear();
        buf.extend_from_slice(data);
        self.refs[id as usize] = 1;
        id
    }

    fn get(&self, id: FrameId) -> &[u8] {
        &self.bufs[id as usize]
    }

    fn retain(&mut self, id: FrameId) {
        self.refs[id as usize] += 1;
    }

    /// Drop one reference; the buffer is free again with the last.
    fn release(&mut self, id: FrameId) {
        let r = &mut self.refs[id as usize];
        *r -= 1;
        if *r == 0 {
            self.free.push(id);
            if self.free.len() == self.bufs.len() && self.bufs.len() > KEPT_FRAMES {
                self.trim();
            }
        }
    }

    /// Nothing in flight: keep [`KEPT_FRAMES`] buffers, give back the others.
    #[cold]
    fn trim(&mut self) {
        self.bufs.truncate(KEPT_FRAMES);
        self.bufs.shrink_to_fit();
        self.refs.truncate(KEPT_FRAMES);
        self.refs.shrink_to_fit();
        self.free.clear();
        self.free.extend(0..KEPT_FRAMES as FrameId);
        self.free.shrink_to_fit();
    }
}

/// A frame on its way to one node.
struct InFlight {
    at: Instant,
    seq: u64,
    to: usize,
    data: FrameId,
}

impl PartialEq for InFlight {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for InFlight {}

impl PartialOrd for InFlight {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for InFlight {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest, then the first sent.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// The frames in flight, earliest first (then first sent): a FIFO for the frames that arrive
/// no earlier than the last one queued there (on cables without jitter or reordering, all of
/// them), a heap for the others. Pops in the same order as one heap of all of them would, the
/// keys (time, sequence number) being distinct.
#[derive(Default)]
struct Events {
    fifo: VecDeque<InFlight>,
    heap: BinaryHeap<InFlight>,
}

impl Events {
    fn push(&mut self, f: InFlight) {
        // `seq` grows with every push, so a frame not earlier than the FIFO's last keeps it sorted.
        if self.fifo.back().is_none_or(|b| f.at >= b.at) {
            self.fifo.push_back(f);
        } else {
            self.heap.push(f);
        }
    }

    /// Whether the FIFO's front comes before the heap's top.
    fn fifo_first(&self) -> Option<bool> {
        if self.heap.is_empty() {
            return (!self.fifo.is_empty()).then_some(true);
        }
        match (self.fifo.front(), self.heap.peek()) {
            (None, None) => None,
            (Some(_), None) => Some(true),
            (None, Some(_)) => Some(false),
            (Some(a), Some(b)) => Some((a.at, a.seq) < (b.at, b.seq)),
        }
    }

    fn peek(&self) -> Option<&InFlight> {
        match self.fifo_first()? {
            true => self.fifo.front(),
            false => self.heap.peek(),
        }
    }

    fn pop(&mut self) -> Option<InFlight> {
        match self.fifo_first()? {
            true => self.fifo.pop_front(),
            false => self.heap.pop(),
        }
    }

    fn len(&self) -> usize {
        self.fifo.len() + self.heap.len()
    }
}

/// N nodes on one simulated Ethernet segment with a virtual clock (see the
/// [module docs](self) for the model).
///
/// ```
/// use roce_net::{LinkConfig, ScriptedNode, SimNet};
/// use std::time::Duration;
///
/// let mut net = SimNet::new(42);
/// let a = net.add(ScriptedNode::new(), LinkConfig::with_latency(Duration::from_micros(5)));
/// let b = net.add(ScriptedNode::new(), LinkConfig::default());
/// net.node_mut::<ScriptedNode>(a).send(vec![0xff; 60]);
/// net.drive_bounded(100).unwrap();
/// assert_eq!(net.node::<ScriptedNode>(b).received()[0].at.as_nanos(), 5_000);
/// ```
pub struct SimNet {
    seed: u64,
    now: Instant,
    slots: Vec<Slot>,
    queue: Events,
    seq: u64,
    steps: u64,
    capture: Vec<CapturedTx>,
    capturing: bool,
    buf: Vec<u8>,
    /// The frames in flight (see [`SimNet::flush`]).
    frames: Frames,
    copies: Vec<(Instant, FrameId)>,
    ingress: Vec<(Instant, FrameId)>,
    max_burst: usize,
    stall_limit: u64,
    /// Some node may be ready (see `Slot::ready`): set with any node's flag, cleared by a
    /// drain that leaves none ready, so that a drain with nothing to do looks at no node.
    pending: bool,
}

impl fmt::Debug for SimNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimNet")
            .field("seed", &self.seed)
            .field("now", &self.now)
            .field("nodes", &self.slots.len())
            .field("in_flight", &self.queue.len())
            .field("steps", &self.steps)
            .finish()
    }
}

impl SimNet {
    /// An empty segment at time zero; `seed` fixes every random decision.
    pub fn new(seed: u64) -> SimNet {
        SimNet {
            seed,
            now: Instant::ZERO,
            slots: Vec::new(),
            queue: Events::default(),
            seq: 0,
            steps: 0,
            capture: Vec::new(),
            capturing: true,
            buf: vec![0; TX_BUF_LEN],
            frames: Frames::default(),
            copies: Vec::new(),
            ingress: Vec::new(),
            max_burst: 10_000,
            stall_limit: DEFAULT_STALL_LIMIT,
            pending: false,
        }
    }

    /// The seed the segment was made with.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Attach a node by its own cable.
    pub fn add_node(&mut self, node: Box<dyn Node>, link: LinkConfig) -> NodeId {
        let id = self.slots.len();
        let rng = Rng::stream(self.seed, id as u64);
        let clean = link.is_clean();
        let (latency_ns, max_untagged) = link_constants(&link);
        self.slots.push(Slot {
            node,
            link,
            clean,
            latency_ns,
            max_untagged,
            rng,
            busy_until: Instant::ZERO,
            stats: NodeStats::default(),
            ready: true,
            timer: None,
        });
        self.pending = true;
        NodeId(id)
    }

    /// Attach a node (boxing it).
    pub fn add<N: Node>(&mut self, node: N, link: LinkConfig) -> NodeId {
        self.add_node(Box::new(node), link)
    }

    /// How many nodes are attached.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether no node is attached.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Every node, in the order added.
    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> {
        (0..self.slots.len()).map(NodeId)
    }

    /// The node as its concrete type.
    ///
    /// # Panics
    /// If `id` is not a node of this segment or the node is not a `T`.
    pub fn node<T: Node>(&self, id: NodeId) -> &T {
        self.try_node(id).unwrap_or_else(|| panic!("{id} is not a {}", type_name::<T>()))
    }

    /// The node as its concrete type, mutably (for API calls; whatever they queue is sent at
    /// the current time on the next step or run).
    ///
    /// # Panics
    /// If `id` is not a node of this segment or the node is not a `T`.
    pub fn node_mut<T: Node>(&mut self, id: NodeId) -> &mut T {
        self.try_node_mut(id).unwrap_or_else(|| panic!("{id} is not a {}", type_name::<T>()))
    }

    /// The node as its concrete type, or `None` if it is another type.
    pub fn try_node<T: Node>(&self, id: NodeId) -> Option<&T> {
        // Deref the box first: `&Box<dyn Node>` is itself `Any` (as the box type).
        let node: &dyn Node = &*self.slots[id.0].node;
        let any: &dyn Any = node;
        any.downcast_ref()
    }

    /// The node as its concrete type, mutably, or `None` if it is another type.
    pub fn try_node_mut<T: Node>(&mut self, id: NodeId) -> Option<&mut T> {
        let slot = &mut self.slots[id.0];
        slot.ready = true; // the caller may queue frames
        self.pending = true;
        let node: &mut dyn Node = &mut *slot.node;
        let any: &mut dyn Any = node;
        any.downcast_mut()
    }

    /// The node as a trait object.
    pub fn node_dyn(&self, id: NodeId) -> &dyn Node {
        &*self.slots[id.0].node
    }

    /// The node as a trait object, mutably.
    pub fn node_dyn_mut(&mut self, id: NodeId) -> &mut dyn Node {
        let slot = &mut self.slots[id.0];
        slot.ready = true; // the caller may queue frames
        self.pending = true;
        &mut *slot.node
    }

    /// The node's cable.
    pub fn link(&self, id: NodeId) -> &LinkConfig {
        &self.slots[id.0].link
    }

    /// Change the node's cable from now on (frames already in flight keep their fate), e.g.
    /// `loss: 1.0` to cut it.
    pub fn set_link(&mut self, id: NodeId, link: LinkConfig) {
        let slot = &mut self.slots[id.0];
        slot.clean = link.is_clean();
        (slot.latency_ns, slot.max_untagged) = link_constants(&link);
        slot.link = link;
    }

    /// The node's counters.
    pub fn stats(&self, id: NodeId) -> NodeStats {
        self.slots[id.0].stats
    }

    /// The counters of all nodes summed.
    pub fn total_stats(&self) -> NodeStats {
        let mut t = NodeStats::default();
        for s in &self.slots {
            t.add(&s.stats);
        }
        t
    }

    /// The virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Events processed so far (each [`SimNet::step`] that returned `true`).
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Frames in flight (counting each receiver's copy).
    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }

    /// How many frames one node may send per drain (default 10 000); the rest wait for the
    /// next step, so a node that never stops transmitting shows up as a livelock.
    pub fn set_max_burst(&mut self, frames: usize) {
        self.max_burst = frames.max(1);
    }

    /// How many steps [`SimNet::run_until`] may take at one instant before it declares a
    /// livelock (default [`DEFAULT_STALL_LIMIT`]).
    pub fn set_stall_limit(&mut self, steps: u64) {
        self.stall_limit = steps.max(1);
    }

    /// Capture transmitted frames (the default) or not.
    pub fn set_capture(&mut self, on: bool) {
        self.capturing = on;
    }

    /// Every frame transmitted so far (while capturing), in transmission order.
    pub fn captured(&self) -> &[CapturedTx] {
        &self.capture
    }

    /// Forget the frames captured so far.
    pub fn clear_capture(&mut self) {
        self.capture.clear();
    }

    /// The capture as a pcap image (Ethernet, nanosecond timestamps from the virtual clock).
    pub fn pcap_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_pcap_to(&mut out).expect("writing to a Vec does not fail");
        out
    }

    /// Write the capture as a pcap file (Ethernet, nanosecond timestamps from the virtual
    /// clock; readable with `roce_net::pcap::read_file`, tcpdump, Wireshark).
    pub fn write_pcap(&self, path: &Path) -> io::Result<()> {
        let mut w = PcapFileWriter::create(path)?;
        for c in &self.capture {
            w.write(c.time.since_epoch(), &c.data)?;
        }
        w.finish()?;
        Ok(())
    }

    /// Write the capture as a pcap image to `w`.
    pub fn write_pcap_to<W: Write>(&self, w: W) -> io::Result<()> {
        let mut p = PcapFileWriter::new(w)?;
        for c in &self.capture {
            p.write(c.time.since_epoch(), &c.data)?;
        }
        p.finish()?;
        Ok(())
    }

    /// Send `frame` as if node `from` had transmitted it now (captured, counted and subject
    /// to `from`'s cable like any frame of that node).
    pub fn inject(&mut self, from: NodeId, frame: &[u8]) {
        let data = self.frames.add(frame);
        self.transmit(from.0, data);
    }

    /// Drain every node's transmit queue, then process the next event: advance the clock to
    /// the earliest delivery or timer (never backwards), deliver the frame or fire the timer,
    /// and drain again. Returns `false`, doing nothing, when no frame is in flight and no timer
    /// is armed.
    pub fn step(&mut self) -> bool {
        self.flush();
        let timer = self.next_timer();
        let delivery = self.queue.peek().map(|f| f.at);
        match (timer, delivery) {
            (None, None) => return false,
            (Some((t, id)), d) if d.is_none_or(|d| t <= d) => {
                self.now = self.now.max(t);
                let slot = &mut self.slots[id];
                slot.stats.timeouts += 1;
                slot.ready = true;
                self.pending = true;
                slot.node.handle_timeout(self.now);
            }
            _ => {
                let f = self.queue.pop().expect("peeked");
                self.now = self.now.max(f.at);
                let slot = &mut self.slots[f.to];
                let data = self.frames.get(f.data);
                slot.stats.delivered += 1;
                slot.stats.delivered_bytes += data.len() as u64;
                slot.ready = true;
                self.pending = true;
                slot.node.handle_frame(self.now, data);
                self.frames.release(f.data);
            }
        }
        self.steps += 1;
        self.flush();
        true
    }

    /// Process every event due at or before `t`, then set the clock to `t`. A `t` in the past
    /// counts as now (the clock never goes back), so `run_until(now())` processes what is due.
    ///
    /// # Panics
    /// On a livelock: more than the stall limit ([`SimNet::set_stall_limit`]) of steps without
    /// the clock moving (a timer that stays due, or nodes answering each other with no delay).
    pub fn run_until(&mut self, t: Instant) {
        let t = t.max(self.now);
        let mut stalled = 0u64;
        loop {
            self.flush();
            match self.next_event() {
                Some(e) if e <= t => {
                    let before = self.now;
                    self.step();
                    stalled = if self.now == before { stalled + 1 } else { 0 };
                    if stalled > self.stall_limit {
                        panic!("run_until({t:?}): {}", self.livelock(stalled));
                    }
                }
                _ => break,
            }
        }
        self.now = t;
    }

    /// [`SimNet::run_until`] `now + d`.
    ///
    /// # Panics
    /// As [`SimNet::run_until`].
    pub fn run_for(&mut self, d: Duration) {
        self.run_until(self.now + d);
    }

    /// Step until nothing is in flight and no timer is armed, or fail after `max_steps` steps.
    /// Engines that keep a periodic timer armed never quiesce: drive them with
    /// [`SimNet::run_until`] instead.
    pub fn drive_bounded(&mut self, max_steps: u64) -> Result<(), Livelock> {
        for _ in 0..max_steps {
            if !self.step() {
                return Ok(());
            }
        }
        self.flush();
        match self.next_event() {
            None => Ok(()),
            Some(_) => Err(self.livelock(max_steps)),
        }
    }

    /// When the next event is due (a delivery or a timer; a timer in the past counts as now),
    /// or `None` when the segment is idle. Frames queued but not yet polled are not seen.
    pub fn next_event(&self) -> Option<Instant> {
        let timer = self.next_timer().map(|(t, _)| self.now.max(t));
        let delivery = self.queue.peek().map(|f| f.at);
        match (timer, delivery) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn livelock(&self, steps: u64) -> Livelock {
        Livelock {
            steps,
            now: self.now,
            in_flight: self.queue.len(),
            next_timer: self.next_timer().map(|(t, id)| (NodeId(id), t)),
        }
    }

    /// The earliest armed timer and its node (the lowest id on a tie). Only ready nodes are
    /// asked; the others' timers are as their last drain left them ([`Slot::timer`]).
    fn next_timer(&self) -> Option<(Instant, usize)> {
        let mut first: Option<(Instant, usize)> = None;
        for (id, s) in self.slots.iter().enumerate() {
            let timer = if s.ready { s.node.poll_timeout() } else { s.timer };
            if let Some(t) = timer {
                // Strictly earlier: on a tie the lower id (seen first) stays.
                if first.is_none_or(|(f, _)| t < f) {
                    first = Some((t, id));
                }
            }
        }
        first
    }

    /// Drain the transmit queue of every ready node (up to `max_burst` frames each) at the
    /// current time.
    fn flush(&mut self) {
        if !self.pending {
            return;
        }
        self.pending = false;
        for id in 0..self.slots.len() {
            if !self.slots[id].ready {
                continue;
            }
            let mut sent = 0;
            loop {
                if sent == self.max_burst {
                    self.pending = true;
                    break; // the rest waits for the next step; the node stays ready
                }
                let Some(len) = self.slots[id].node.poll_transmit(self.now, &mut self.buf) else {
                    self.slots[id].ready = false;
                    break;
                };
                sent += 1;
                assert!(
                    len <= self.buf.len(),
                    "node {id} returned a {len}-byte frame from a {}-byte buffer",
                    self.buf.len()
                );
                // Each frame is copied once, into a buffer of the frames in flight that the
                // delivered frames gave back: steady traffic allocates nothing per frame.
                let data = self.frames.add(&self.buf[..len]);
                self.transmit(id, data);
            }
            let slot = &mut self.slots[id];
            slot.timer = slot.node.poll_timeout();
        }
    }

    /// Send frame `data` (whose reference the caller hands over) from node `from` now.
    fn transmit(&mut self, from: usize, data: FrameId) {
        self.transmit_copies(from, data);
        self.frames.release(data);
    }

    fn transmit_copies(&mut self, from: usize, data: FrameId) {
        let now = self.now;
        let frame = self.frames.get(data);
        let len = frame.len();
        if self.capturing {
            let data = Bytes::copy_from_slice(frame);
            self.capture.push(CapturedTx { time: now, from: NodeId(from), data });
        }
        let sender = &mut self.slots[from];
        sender.stats.sent += 1;
        sender.stats.sent_bytes += len as u64;
        if sender.too_long(frame) {
            sender.stats.mtu_dropped += 1;
            return;
        }
        let depart = match sender.link.bandwidth {
            Some(bw) if bw > 0 => {
                let end = now.max(sender.busy_until) + wire_time(len, bw);
                sender.busy_until = end;
                end
            }
            _ => now,
        };
        if sender.clean {
            // One copy leaves after the latency; clean receivers take it after theirs: what
            // the general path below does for clean cables, without its copy lists.
            let t1 = depart.as_nanos().saturating_add(sender.latency_ns);
            for to in 0..self.slots.len() {
                if to == from {
                    continue;
                }
                let receiver = &mut self.slots[to];
                if receiver.too_long(self.frames.get(data)) {
                    receiver.stats.mtu_dropped += 1;
                    continue;
                }
                if receiver.clean {
                    let at = Instant::from_nanos(t1.saturating_add(receiver.latency_ns));
                    let seq = self.seq;
                    self.seq += 1;
                    self.frames.retain(data);
                    self.queue.push(InFlight { at, seq, to, data });
                    continue;
                }
                let mut ingress = std::mem::take(&mut self.ingress);
                ingress.clear();
                receiver.cross(Instant::from_nanos(t1), data, &mut self.frames, &mut ingress);
                for (at, data) in ingress.drain(..) {
                    let seq = self.seq;
                    self.seq += 1;
                    self.queue.push(InFlight { at, seq, to, data });
                }
                self.ingress = ingress;
            }
            return;
        }
        let mut egress = std::mem::take(&mut self.copies);
        egress.clear();
        sender.cross(depart, data, &mut self.frames, &mut egress);
        let mut ingress = std::mem::take(&mut self.ingress);
        for &(t1, copy) in &egress {
            for to in 0..self.slots.len() {
                if to == from {
                    continue;
                }
                let receiver = &mut self.slots[to];
                let frame = self.frames.get(copy);
                if frame.len() > receiver.link.max_frame_len(frame) {
                    receiver.stats.mtu_dropped += 1;
                    continue;
                }
                ingress.clear();
                receiver.cross(t1, copy, &mut self.frames, &mut ingress);
                for (at, data) in ingress.drain(..) {
                    let seq = self.seq;
                    self.seq += 1;
                    self.queue.push(InFlight { at, seq, to, data });
                }
            }
        }
        // The egress copies were references for the receivers' crossings only.
        for &(_, copy) in &egress {
            self.frames.release(copy);
        }
        self.copies = egress;
        self.ingress = ingress;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::ScriptedNode;
    use std::collections::VecDeque;

    #[test]
    fn frame_buffers_given_back_when_idle() {
        // A burst of frames in flight at once, then none: the buffers beyond a few dozen go.
        let mut net = SimNet::new(1);
        let a = net.add(ScriptedNode::new(), LinkConfig::default());
        let b = net.add(ScriptedNode::new(), LinkConfig::default());
        for i in 0..500u32 {
            let mut f = vec![0xff; 60];
            f[14..18].copy_from_slice(&i.to_be_bytes());
            net.node_mut::<ScriptedNode>(a).send(f);
        }
        net.flush();
        assert_eq!((net.in_flight(), net.frames.bufs.len()), (500, 500));
        net.drive_bounded(10_000).unwrap();
        assert_eq!(net.node::<ScriptedNode>(b).received().len(), 500);
        assert_eq!(net.frames.bufs.len(), KEPT_FRAMES);
        assert_eq!(net.frames.free.len(), KEPT_FRAMES);
    }

    #[test]
    fn events_pop_as_one_heap_would() {
        // Frames arriving in order (the FIFO) and out of order (the heap), pushes and pops
        // interleaved: the same order as a single heap of all of them.
        let mut rng = Rng::stream(3, 0);
        let (mut events, mut heap) = (Events::default(), BinaryHeap::new());
        let mut seq = 0;
        for round in 0..2000u64 {
            for _ in 0..rng.up_to(3) {
                // Mostly non-decreasing times, sometimes earlier ones (jitter, reordering).
                let at = Instant::from_nanos(round * 10 + rng.up_to(15));
                let f = |seq| InFlight { at, seq, to: 0, data: 0 };
                events.push(f(seq));
                heap.push(f(seq));
                seq += 1;
            }
            for _ in 0..rng.up_to(3) {
                let (a, b) = (events.pop(), heap.pop());
                assert_eq!(a.map(|f| (f.at, f.seq)), b.map(|f| (f.at, f.seq)));
                assert_eq!(events.len(), heap.len());
            }
        }
        assert!(!events.heap.is_empty() || seq == 0, "the heap was used");
        while let Some(b) = heap.pop() {
            assert_eq!(events.peek().map(|f| (f.at, f.seq)), Some((b.at, b.seq)));
            assert_eq!(events.pop().map(|f| (f.at, f.seq)), Some((b.at, b.seq)));
        }
        assert!(events.pop().is_none());
    }

    const ETHERTYPE: [u8; 2] = [0x88, 0xb5]; // local experimental
    const BROADCAST: [u8; 6] = [0xff; 6];

    fn mac(i: u8) -> [u8; 6] {
        [0x02, 0, 0, 0, 0, i]
    }

    /// An Ethernet frame of `len` bytes carrying a sequence number.
    fn eth(dst: [u8; 6], src: [u8; 6], seq: u32, len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len.max(18)];
        f[..6].copy_from_slice(&dst);
        f[6..12].copy_from_slice(&src);
        f[12..14].copy_from_slice(&ETHERTYPE);
        f[14..18].copy_from_slice(&seq.to_be_bytes());
        f
    }

    fn seq_of(f: &[u8]) -> u32 {
        u32::from_be_bytes(f[14..18].try_into().unwrap())
    }

    /// Answers every frame addressed to its MAC, swapping the addresses.
    struct Echo {
        mac: [u8; 6],
        out: VecDeque<Vec<u8>>,
    }

    impl Echo {
        fn new(mac: [u8; 6]) -> Echo {
            Echo { mac, out: VecDeque::new() }
        }
    }

    impl Node for Echo {
        fn handle_frame(&mut self, _now: Instant, frame: &[u8]) {
            if frame.len() >= 14 && frame[..6] == self.mac {
                let mut r = frame.to_vec();
                r.copy_within(6..12, 0);
                r[6..12].copy_from_slice(&self.mac);
                self.out.push_back(r);
            }
        }
        fn poll_transmit(&mut self, _now: Instant, buf: &mut [u8]) -> Option<usize> {
            let f = self.out.pop_front()?;
            buf[..f.len()].copy_from_slice(&f);
            Some(f.len())
        }
        fn poll_timeout(&self) -> Option<Instant> {
            None
        }
        fn handle_timeout(&mut self, _now: Instant) {}
    }

    /// Sends `count` frames to `dst`, one every `every`, from a timer; records what it gets.
    struct Pinger {
        mac: [u8; 6],
        dst: [u8; 6],
        every: Duration,
        count: u32,
        sent: u32,
        next: Option<Instant>,
        due: bool,
        got: Vec<(Instant, u32)>,
    }

    impl Pinger {
        fn new(mac: [u8; 6], dst: [u8; 6], every: Duration, count: u32) -> Pinger {
            Pinger { mac, dst, every, count, sent: 0, next: Some(Instant::ZERO), due: false, got: Vec::new() }
        }
    }

    impl Node for Pinger {
        fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
            if frame[..6] == self.mac {
                self.got.push((now, seq_of(frame)));
            }
        }
        fn poll_transmit(&mut self, _now: Instant, buf: &mut [u8]) -> Option<usize> {
            if !self.due {
                return None;
            }
            self.due = false;
            let f = eth(self.dst, self.mac, self.sent - 1, 64);
            buf[..f.len()].copy_from_slice(&f);
            Some(f.len())
        }
        fn poll_timeout(&self) -> Option<Instant> {
            self.next
        }
        fn handle_timeout(&mut self, now: Instant) {
            self.due = true;
            self.sent += 1;
            self.next = (self.sent < self.count).then(|| now + self.every);
        }
    }

    /// Always has a timer due: a livelock.
    struct Busy(Instant);

    impl Node for Busy {
        fn handle_frame(&mut self, _now: Instant, _frame: &[u8]) {}
        fn poll_transmit(&mut self, _now: Instant, _buf: &mut [u8]) -> Option<usize> {
            None
        }
        fn poll_timeout(&self) -> Option<Instant> {
            Some(self.0)
        }
        fn handle_timeout(&mut self, now: Instant) {
            self.0 = now;
        }
    }

    /// Never stops transmitting.
    struct Chatty;

    impl Node for Chatty {
        fn handle_frame(&mut self, _now: Instant, _frame: &[u8]) {}
        fn poll_transmit(&mut self, _now: Instant, buf: &mut [u8]) -> Option<usize> {
            buf[..60].fill(0xff);
            Some(60)
        }
        fn poll_timeout(&self) -> Option<Instant> {
            None
        }
        fn handle_timeout(&mut self, _now: Instant) {}
    }

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    #[test]
    fn hub_offers_every_frame_to_every_other_node() {
        let mut net = SimNet::new(1);
        let a = net.add(ScriptedNode::new(), LinkConfig::default());
        let b = net.add(ScriptedNode::new(), LinkConfig::default());
        let c = net.add(ScriptedNode::new(), LinkConfig::default());
        net.node_mut::<ScriptedNode>(a).send(eth(mac(2), mac(1), 0, 60));
        net.drive_bounded(10).unwrap();
        assert!(net.node::<ScriptedNode>(a).received().is_empty());
        assert_eq!(net.node::<ScriptedNode>(b).received().len(), 1);
        assert_eq!(net.node::<ScriptedNode>(c).received().len(), 1);
        assert_eq!(net.stats(a).sent, 1);
        assert_eq!(net.stats(a).sent_bytes, 60);
        assert_eq!((net.stats(b).delivered, net.stats(c).delivered_bytes), (1, 60));
        assert_eq!(net.total_stats().delivered, 2);
        assert_eq!(net.steps(), 2);
        assert_eq!(net.len(), 3);
        assert_eq!(net.node_ids().collect::<Vec<_>>(), [a, b, c]);
    }

    #[test]
    fn latency_is_the_sum_of_both_cables_and_jitter_stays_in_bounds() {
        let mut net = SimNet::new(2);
        let a = net.add(Echo::new(mac(1)), LinkConfig::with_latency(Duration::from_millis(5)));
        let b = net.add(ScriptedNode::new(), LinkConfig::with_latency(Duration::from_millis(3)));
        net.node_mut::<ScriptedNode>(b).send(eth(mac(1), mac(2), 0, 60));
        net.drive_bounded(10).unwrap();
        // b → a in 8 ms, echoed back in 8 more.
        assert_eq!(net.node::<ScriptedNode>(b).received()[0].at, ms(16));
        assert_eq!(net.now(), ms(16));
        assert_eq!(net.stats(a).delivered, 1);

        let jitter =
            LinkConfig { jitter: Duration::from_millis(1), ..LinkConfig::with_latency(Duration::from_millis(5)) };
        let mut net = SimNet::new(2);
        let p = net.add(Pinger::new(mac(1), mac(2), Duration::from_micros(10), 300), jitter);
        let r = net.add(ScriptedNode::new(), LinkConfig::with_latency(Duration::from_millis(3)));
        net.drive_bounded(10_000).unwrap();
        let got = net.node::<ScriptedNode>(r).received();
        assert_eq!(got.len(), 300);
        let sent_at: Vec<Instant> = net.captured().iter().filter(|c| c.from == p).map(|c| c.time).collect();
        let mut delays: Vec<Duration> = got.iter().map(|f| f.at - sent_at[seq_of(&f.data) as usize]).collect();
        delays.sort();
        assert!(delays[0] >= Duration::from_millis(8) && delays[299] <= Duration::from_millis(9), "{delays:?}");
        assert!(delays[299] - delays[0] > Duration::from_micros(900));
        // With 1 ms of jitter and 10 µs spacing, frames overtake each other.
        assert!(got.windows(2).any(|w| seq_of(&w[0].data) > seq_of(&w[1].data)));
    }

    #[test]
    fn loss_duplication_and_reordering_rates() {
        let n = 20_000u32;
        let mut net = SimNet::new(3);
        let tx =
            LinkConfig { loss: 0.1, reorder: 0.1, reorder_delay: Duration::from_micros(35), ..LinkConfig::default() };
        let rx = LinkConfig { duplicate: 0.05, ..LinkConfig::default() };
        let p = net.add(Pinger::new(mac(1), mac(2), Duration::from_micros(10), n), tx);
        let r = net.add(ScriptedNode::new(), rx);
        net.set_capture(false);
        net.drive_bounded(u64::from(n) * 3).unwrap();
        let (sp, sr) = (net.stats(p), net.stats(r));
        let within = |x: u64, p: f64, of: u64| {
            let expect = p * of as f64;
            (x as f64 - expect).abs() < 4.0 * (expect * (1.0 - p)).sqrt() + 1.0
        };
        assert_eq!(sp.sent, u64::from(n));
        assert!(within(sp.lost, 0.1, sp.sent), "lost {}", sp.lost);
        let crossed = sp.sent - sp.lost;
        assert!(within(sp.reordered, 0.1, crossed), "reordered {}", sp.reordered);
        assert!(within(sr.duplicated, 0.05, crossed), "duplicated {}", sr.duplicated);
        assert_eq!(sr.delivered, crossed + sr.duplicated);
        assert_eq!((sr.lost, sp.duplicated, sr.reordered), (0, 0, 0));
        let got = net.node::<ScriptedNode>(r).received();
        assert_eq!(got.len() as u64, sr.delivered);
        let inversions = got.windows(2).filter(|w| seq_of(&w[0].data) > seq_of(&w[1].data)).count() as u64;
        // Every reordered frame is overtaken by the (up to 3) frames sent within 35 µs after it.
        assert!(inversions >= sp.reordered * 8 / 10 && inversions <= sp.reordered + 1, "{inversions}");
        assert!(net.captured().is_empty());
    }

    #[test]
    fn corruption_on_a_cable() {
        let mut net = SimNet::new(4);
        let a = net.add(ScriptedNode::new(), LinkConfig { corrupt: 1.0, ..LinkConfig::default() });
        let b = net.add(ScriptedNode::new(), LinkConfig::default());
        let f = eth(mac(2), mac(1), 0, 60);
        net.node_mut::<ScriptedNode>(a).send(f.clone());
        net.drive_bounded(10).unwrap();
        let got = &net.node::<ScriptedNode>(b).received()[0].data;
        assert_eq!(got.iter().zip(&f).filter(|(x, y)| x != y).count(), 1);
        assert_eq!(net.captured()[0].data[..], f[..], "the capture shows what was sent");
        assert_eq!(net.stats(a).corrupted, 1);
    }

    #[test]
    fn frames_over_the_mtu_are_dropped_and_counted() {
        let mut net = SimNet::new(5);
        let a = net.add(ScriptedNode::new(), LinkConfig::default());
        let b = net.add(ScriptedNode::new(), LinkConfig::default());
        let c = net.add(ScriptedNode::new(), LinkConfig { mtu: 1500, ..LinkConfig::default() });
        let max = DEFAULT_MTU + ETH_HEADER_LEN;
        let mut tagged = eth(mac(2), mac(1), 2, max + VLAN_TAG_LEN);
        tagged[12..14].copy_from_slice(&[0x81, 0x00]);
        {
            let n = net.node_mut::<ScriptedNode>(a);
            n.send(eth(mac(2), mac(1), 0, max));
            n.send(eth(mac(2), mac(1), 1, max + 1));
            n.send(tagged);
            n.send(eth(mac(2), mac(1), 3, 1514));
        }
        net.drive_bounded(100).unwrap();
        let seqs = |id| net.node::<ScriptedNode>(id).received().iter().map(|f| seq_of(&f.data)).collect::<Vec<_>>();
        assert_eq!(seqs(b), [0, 2, 3]);
        assert_eq!(seqs(c), [3]);
        assert_eq!(net.stats(a).mtu_dropped, 1);
        assert_eq!(net.stats(c).mtu_dropped, 2);
        assert_eq!(net.stats(a).sent, 4);
        assert_eq!(net.captured().len(), 4);
    }

    #[test]
    fn bandwidth_adds_serialization_delay_and_queues() {
        let mut net = SimNet::new(6);
        let a = net.add(ScriptedNode::new(), LinkConfig { bandwidth: Some(1_000_000_000), ..LinkConfig::default() });
        let b = net.add(ScriptedNode::new(), LinkConfig::default());
        net.node_mut::<ScriptedNode>(a).send(eth(mac(2), mac(1), 0, 1000));
        net.node_mut::<ScriptedNode>(a).send(eth(mac(2), mac(1), 1, 1000));
        net.node_mut::<ScriptedNode>(a).send(eth(mac(2), mac(1), 2, 20));
        net.drive_bounded(10).unwrap();
        let at: Vec<u64> = net.node::<ScriptedNode>(b).received().iter().map(|f| f.at.as_nanos()).collect();
        // (1000 + 24) · 8 ns each at 1 Gb/s; the short frame is padded to 60 bytes.
        assert_eq!(at, [8_192, 16_384, 16_384 + 672]);
        assert_eq!(wire_time(1000, 0), Duration::ZERO);
    }

    #[test]
    fn timers_fire_on_time_and_run_until_moves_the_clock() {
        let mut net = SimNet::new(7);
        let a = net.add(ScriptedNode::new(), LinkConfig::default());
        net.node_mut::<ScriptedNode>(a).wake_at(ms(3));
        net.run_until(ms(2));
        assert_eq!(net.now(), ms(2));
        assert!(net.node::<ScriptedNode>(a).wakeups().is_empty());
        assert_eq!(net.next_event(), Some(ms(3)));
        net.run_for(Duration::from_millis(8));
        assert_eq!(net.now(), ms(10));
        assert_eq!(net.node::<ScriptedNode>(a).wakeups(), [ms(3)]);
        assert_eq!(net.stats(a).timeouts, 1);
        // A deadline in the past fires at the current time; the clock never goes back.
        net.node_mut::<ScriptedNode>(a).wake_at(ms(1));
        net.run_until(ms(5));
        assert_eq!(net.now(), ms(10));
        assert_eq!(net.node::<ScriptedNode>(a).wakeups(), [ms(3), ms(10)]);
        assert!(!net.step());
    }

    #[test]
    fn drive_bounded_reports_a_livelock() {
        let mut net = SimNet::new(8);
        net.add(ScriptedNode::new(), LinkConfig::default());
        let busy = net.add(Busy(ms(1)), LinkConfig::default());
        let err = net.drive_bounded(100).unwrap_err();
        assert_eq!(err.steps, 100);
        assert_eq!(err.next_timer, Some((busy, ms(1))));
        assert_eq!(err.now, ms(1));
        assert!(err.to_string().contains("node 1 has a timer"), "{err}");

        let mut net = SimNet::new(8);
        net.add(Chatty, LinkConfig::default());
        net.add(ScriptedNode::new(), LinkConfig::default());
        net.set_max_burst(5);
        let err = net.drive_bounded(50).unwrap_err();
        assert!(err.in_flight > 0);
    }

    #[test]
    #[should_panic(expected = "no quiescence")]
    fn run_until_panics_on_a_livelock() {
        let mut net = SimNet::new(9);
        net.add(Busy(ms(1)), LinkConfig::default());
        net.set_stall_limit(1000);
        net.run_until(ms(2));
    }

    #[test]
    fn typed_access() {
        let mut net = SimNet::new(10);
        let e = net.add_node(Box::new(Echo::new(mac(1))), LinkConfig::default());
        let s = net.add(ScriptedNode::new(), LinkConfig::default());
        assert_eq!(net.node::<Echo>(e).mac, mac(1));
        assert!(net.try_node::<ScriptedNode>(e).is_none());
        assert!(net.try_node_mut::<Echo>(s).is_none());
        net.node_dyn_mut(s).handle_frame(Instant::ZERO, &[1]);
        assert_eq!(net.node::<ScriptedNode>(s).received().len(), 1);
        assert!(net.node_dyn(e).poll_timeout().is_none());
        assert_eq!(s.index(), 1);
        assert_eq!(s.to_string(), "node 1");
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            net.node::<Echo>(s);
        }));
        let msg = r.unwrap_err().downcast::<String>().unwrap();
        assert!(msg.contains("node 1 is not a") && msg.contains("Echo"), "{msg}");
    }

    /// The capture, the counters and what each pinger got back.
    type Run = (Vec<u8>, Vec<NodeStats>, Vec<Vec<(Instant, u32)>>);

    /// A three-node run with every fault enabled.
    fn faulty_run(seed: u64) -> Run {
        let mut net = SimNet::new(seed);
        let link = LinkConfig {
            latency: Duration::from_micros(50),
            jitter: Duration::from_micros(20),
            loss: 0.1,
            duplicate: 0.1,
            reorder: 0.1,
            reorder_delay: Duration::from_micros(100),
            corrupt: 0.05,
            ..LinkConfig::default()
        };
        let p1 = net.add(Pinger::new(mac(1), mac(3), Duration::from_micros(30), 200), link.clone());
        let p2 = net.add(Pinger::new(mac(2), mac(3), Duration::from_micros(70), 100), link.clone());
        let e = net.add(Echo::new(mac(3)), link);
        net.drive_bounded(10_000).unwrap();
        let stats = vec![net.stats(p1), net.stats(p2), net.stats(e)];
        let got = vec![net.node::<Pinger>(p1).got.clone(), net.node::<Pinger>(p2).got.clone()];
        (net.pcap_bytes(), stats, got)
    }

    #[test]
    fn same_seed_same_run() {
        let a = faulty_run(42);
        let b = faulty_run(42);
        assert_eq!(a, b);
        assert!(a.1.iter().all(|s| s.lost > 0 && s.duplicated > 0 && s.reordered > 0));
        assert!(!a.2[0].is_empty() && !a.2[1].is_empty());
        let c = faulty_run(43);
        assert_ne!(a.0, c.0);
    }

    #[test]
    fn pcap_file_reads_back() {
        let mut net = SimNet::new(11);
        let a = net.add(Echo::new(mac(1)), LinkConfig::with_latency(Duration::from_micros(3)));
        let b = net.add(ScriptedNode::new(), LinkConfig::with_latency(Duration::from_micros(4)));
        net.node_mut::<ScriptedNode>(b).send(eth(mac(1), mac(2), 0, 60));
        net.drive_bounded(10).unwrap();
        net.inject(b, &roce_wire::golden::SA_DELETE_MCMEMBER);
        net.drive_bounded(10).unwrap();
        assert_eq!(net.stats(b).sent, 2);
        let cap = net.captured();
        assert_eq!(cap.len(), 3);
        assert_eq!((cap[0].from, cap[1].from, cap[2].from), (b, a, b));
        assert_eq!(cap[1].time, Instant::from_nanos(7_000));

        let path = std::env::temp_dir().join(format!("roce-net-sim-{}.pcap", std::process::id()));
        net.write_pcap(&path).unwrap();
        let frames = crate::pcap::read_file(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(frames.len(), 3);
        for (f, c) in frames.iter().zip(cap) {
            assert_eq!(f.timestamp, c.time.since_epoch());
            assert_eq!(f.data[..], c.data[..]);
            assert_eq!(f.linktype, 1);
        }
        assert_eq!(crate::pcap::read_bytes(&net.pcap_bytes()).unwrap(), frames);
        net.clear_capture();
        assert!(net.captured().is_empty());
    }

    #[test]
    fn set_link_cuts_a_cable() {
        let mut net = SimNet::new(12);
        let a = net.add(ScriptedNode::new(), LinkConfig::default());
        let b = net.add(ScriptedNode::new(), LinkConfig::default());
        net.set_link(a, LinkConfig { loss: 1.0, ..net.link(a).clone() });
        net.node_mut::<ScriptedNode>(a).send(eth(BROADCAST, mac(1), 0, 60));
        net.drive_bounded(10).unwrap();
        assert!(net.node::<ScriptedNode>(b).received().is_empty());
        assert_eq!(net.stats(a).lost, 1);
        assert_eq!(net.in_flight(), 0);
        assert!(format!("{net:?}").contains("SimNet"));
        assert_eq!(net.seed(), 12);
        assert!(!net.is_empty());
    }
}
