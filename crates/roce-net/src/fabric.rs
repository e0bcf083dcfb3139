//! A simulated switch fabric for congestion experiments, in virtual time: N RC flows, each
//! between two real engines ([`roce_cm::Stack`]), through one switch egress port that marks
//! ECN as the DCQCN paper's switches do (Zhu et al., SIGCOMM 2015, §3.1 and §5.3): nothing
//! below K_min bytes queued, CE with a probability rising linearly to P_max at K_max, every
//! ECN-capable packet above K_max (the queue a packet leaves behind decides); a packet that
//! does not fit the buffer is dropped. This is
//! `roce bench congestion` (spec/congestion.md, spec/benchmarks.md): the machines this is
//! built on have no ECN-marking qdisc, so the congestion point is simulated and everything
//! else (framing, ICRC, CNPs, the engines' rate control) is the real code.
//!
//! Topology: sender i and receiver i (flow i) each hang off the switch by a link of the
//! configured rate and propagation delay. Every sender's frames serialize on its own link,
//! cross to the switch and queue at the one egress port all the receivers are behind (an
//! N:1 incast); that port drains at the rate. The way back (ACKs, CNPs) crosses the
//! receiver's link and the sender's without a queue of its own (its load is a few packets
//! per message).

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use roce_cm::rc::{Access, Congestion, Ecn, QpAttr, QpState, SendOp, SendWr, Sge, WcStatus};
use roce_cm::{Instant, Stack, StackConfig};

use crate::rng::Rng;
use crate::sim::{wire_time, TX_BUF_LEN};

/// The switch port's ECN marking and buffer (RED-like marking as DCQCN's switches do it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EcnQueueConfig {
    /// Bits per second the port drains.
    pub rate: u64,
    /// K_min: queued bytes at or below which nothing is marked (the paper: 5 KB).
    pub kmin: u64,
    /// K_max: queued bytes at or above which every ECN-capable packet is marked (the paper:
    /// 200 KB).
    pub kmax: u64,
    /// P_max: the marking probability just below K_max (the paper: 1 %).
    pub pmax: f64,
    /// Bytes the port may hold; a packet that does not fit is dropped (the paper's switch,
    /// a Trident II, has 12 MB shared by its ports: all of it here).
    pub buffer: u64,
}

impl EcnQueueConfig {
    /// The paper's marking (K_min 5 KB, K_max 200 KB, P_max 1 %) and a 12 MB buffer, at
    /// `rate` bit/s.
    pub fn paper(rate: u64) -> EcnQueueConfig {
        EcnQueueConfig { rate, kmin: 5_000, kmax: 200_000, pmax: 0.01, buffer: 12_000_000 }
    }

    /// The probability that a packet arriving to `queued` bytes is marked.
    pub fn mark_probability(&self, queued: u64) -> f64 {
        if queued <= self.kmin {
            0.0
        } else if queued >= self.kmax {
            1.0
        } else {
            self.pmax * (queued - self.kmin) as f64 / (self.kmax - self.kmin) as f64
        }
    }
}

/// Queue depths, in bytes, as arriving packets found them.
#[derive(Debug, Clone, Default)]
pub struct DepthHistogram {
    /// Counts per [`DepthHistogram::BUCKET`] bytes.
    buckets: Vec<u64>,
    samples: u64,
    max: u64,
}

impl DepthHistogram {
    /// The histogram's resolution in bytes.
    pub const BUCKET: u64 = 64;

    fn add(&mut self, depth: u64) {
        let b = usize::try_from(depth / Self::BUCKET).unwrap_or(usize::MAX);
        if b >= self.buckets.len() {
            self.buckets.resize(b + 1, 0);
        }
        self.buckets[b] += 1;
        self.samples += 1;
        self.max = self.max.max(depth);
    }

    /// The smallest depth (to [`DepthHistogram::BUCKET`] bytes, rounded up, at most the
    /// maximum) that at least `q` of the samples were at or below; 0 with no samples.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.samples == 0 {
            return 0;
        }
        let want = ((q.clamp(0.0, 1.0) * self.samples as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= want {
                return ((i as u64 + 1) * Self::BUCKET - 1).min(self.max);
            }
        }
        self.max
    }

    /// The deepest queue a packet found.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// How many packets were sampled.
    pub fn samples(&self) -> u64 {
        self.samples
    }
}

/// What the switch port did.
#[derive(Debug, Clone, Default)]
pub struct PortStats {
    /// Packets queued.
    pub enqueued: u64,
    /// Packets dropped: the buffer was full.
    pub dropped: u64,
    /// Packets marked CE.
    pub ce_marked: u64,
    /// Bytes sent on.
    pub sent_bytes: u64,
    /// The depth each arriving packet found (dropped ones too).
    pub depth: DepthHistogram,
}

/// One switch egress port: a FIFO of frames drained at the rate, ECN-marked and tail-dropped
/// as [`EcnQueueConfig`] says. Only ECN-capable packets are marked; others are never dropped
/// early (only a full buffer drops).
#[derive(Debug)]
pub struct SwitchPort {
    cfg: EcnQueueConfig,
    queue: VecDeque<(usize, Vec<u8>)>,
    queued: u64,
    rng: Rng,
    /// When the frame at the head has left (`None`: the port is idle).
    head_done: Option<Instant>,
    stats: PortStats,
}

impl SwitchPort {
    /// An empty port; `seed` drives the marking draws.
    pub fn new(cfg: EcnQueueConfig, seed: u64) -> SwitchPort {
        SwitchPort {
            cfg,
            queue: VecDeque::new(),
            queued: 0,
            rng: Rng::stream(seed, 0xec7),
            head_done: None,
            stats: PortStats::default(),
        }
    }

    /// The counts so far.
    pub fn stats(&self) -> &PortStats {
        &self.stats
    }

    /// Bytes queued now (the frame being sent included).
    pub fn queued(&self) -> u64 {
        self.queued
    }

    /// A frame for output `tag` arrives at `now`: dropped (false) or queued.
    pub fn enqueue(&mut self, now: Instant, tag: usize, frame: Vec<u8>) -> bool {
        self.stats.depth.add(self.queued);
        let len = frame.len() as u64;
        if self.queued + len > self.cfg.buffer {
            self.stats.dropped += 1;
            return false;
        }
        self.queued += len;
        self.stats.enqueued += 1;
        self.queue.push_back((tag, frame));
        if self.head_done.is_none() {
            self.head_done = Some(now + wire_time(len as usize, self.cfg.rate));
        }
        true
    }

    /// When the frame at the head will have left.
    pub fn next_departure(&self) -> Option<Instant> {
        self.head_done
    }

    /// The frame at the head, if it has left by `now` (the next one starts then), marked CE
    /// with the probability the queue it leaves behind gives. Marking as a packet leaves
    /// rather than as it arrives spares the mark the queue's own delay on its way to the
    /// receiver (the HPCC simulator's switch, which DCQCN studies run, marks so:
    /// SwitchNode::SwitchNotifyDequeue).
    pub fn depart(&mut self, now: Instant) -> Option<(usize, Vec<u8>)> {
        let done = self.head_done.filter(|t| *t <= now)?;
        let (tag, mut frame) = self.queue.pop_front()?;
        self.queued -= frame.len() as u64;
        let p = self.cfg.mark_probability(self.queued);
        if ecn_of(&frame).is_some_and(Ecn::is_ect) && self.rng.chance(p) && mark_ce(&mut frame) {
            self.stats.ce_marked += 1;
        }
        self.stats.sent_bytes += frame.len() as u64;
        self.head_done = self.queue.front().map(|(_, f)| done + wire_time(f.len(), self.cfg.rate));
        Some((tag, frame))
    }
}

/// The ECN field of an Ethernet frame's IPv4 or IPv6 header (`None`: neither, or too short).
pub fn ecn_of(frame: &[u8]) -> Option<Ecn> {
    match frame.get(12..14)? {
        [0x08, 0x00] => frame.get(15).map(|tos| Ecn::of(*tos)),
        [0x86, 0xdd] => frame.get(15).map(|b| Ecn::of(b >> 4)),
        _ => None,
    }
}

/// Mark an Ethernet frame's IP header CE, as a switch does: the IPv4 TOS (and its header
/// checksum) or the IPv6 traffic class. The ICRC leaves these bits out, so it stays right.
/// False when the frame has no such header.
pub fn mark_ce(frame: &mut [u8]) -> bool {
    match frame.get(12..14) {
        Some([0x08, 0x00]) if frame.len() >= 34 => {
            frame[15] |= 3;
            let ihl = usize::from(frame[14] & 0x0f) * 4;
            let Some(hdr) = frame.get_mut(14..14 + ihl) else { return false };
            hdr[10..12].fill(0);
            let sum = roce_wire::frame::ipv4_checksum(hdr);
            hdr[10..12].copy_from_slice(&sum.to_be_bytes());
            true
        }
        Some([0x86, 0xdd]) if frame.len() >= 54 => {
            frame[15] |= 0x30;
            true
        }
        _ => false,
    }
}

/// A run of [`run`]: the flows, the links and the switch port.
#[derive(Debug, Clone, PartialEq)]
pub struct FabricConfig {
    /// RC flows, each a sender and a receiver of its own (1 to [`MAX_FLOWS`]).
    pub flows: usize,
    /// Every link's rate and the switch port's, bit/s.
    pub rate: u64,
    /// The engines' congestion control (its line rate is set to `rate`).
    pub congestion: Congestion,
    /// Virtual time the flows run.
    pub duration: Duration,
    /// Seed of everything random (the engines, the marking, the flows' start times).
    pub seed: u64,
    /// The switch port.
    pub queue: EcnQueueConfig,
    /// Each link's propagation delay.
    pub link_delay: Duration,
    /// Bytes per RDMA WRITE.
    pub message: u32,
    /// WRITEs each sender keeps posted.
    pub outstanding: u32,
    /// Path MTU in bytes (256 … 4096).
    pub mtu: u32,
}

/// The most flows a run takes.
pub const MAX_FLOWS: usize = 1024;

impl FabricConfig {
    /// `flows` flows at `rate` bit/s for `duration`, congestion control as given; the paper's
    /// switch; 1 µs links, 64 KiB WRITEs, 4 posted, path MTU 1024.
    pub fn new(flows: usize, rate: u64, congestion: Congestion, duration: Duration, seed: u64) -> FabricConfig {
        FabricConfig {
            flows,
            rate,
            congestion,
            duration,
            seed,
            queue: EcnQueueConfig::paper(rate),
            link_delay: Duration::from_micros(1),
            message: 64 * 1024,
            outstanding: 4,
            mtu: 1024,
        }
    }

    fn check(&self) -> Result<(), FabricError> {
        let bad = |what: &'static str, why: String| Err(FabricError::Config { what, why });
        if self.flows == 0 || self.flows > MAX_FLOWS {
            return bad("flows", format!("{} is not 1 to {MAX_FLOWS}", self.flows));
        }
        if self.rate == 0 || self.queue.rate == 0 {
            return bad("rate", "must be above 0".into());
        }
        if self.duration.is_zero() || self.duration > Duration::from_secs(3600) {
            return bad("duration", format!("{:?} is not above 0 and at most an hour", self.duration));
        }
        let q = &self.queue;
        if q.kmin > q.kmax {
            return bad("kmin", format!("K_min {} above K_max {}", q.kmin, q.kmax));
        }
        if !(0.0..=1.0).contains(&q.pmax) {
            return bad("pmax", format!("{} is not a probability", q.pmax));
        }
        if q.buffer < 2 * u64::from(self.mtu) {
            return bad("buffer", format!("{} bytes hold no two packets", q.buffer));
        }
        if !matches!(self.mtu, 256 | 512 | 1024 | 2048 | 4096) {
            return bad("mtu", format!("{} is not 256, 512, 1024, 2048 or 4096", self.mtu));
        }
        if self.message == 0 || self.message > 1 << 30 {
            return bad("message", format!("{} is not 1 byte to 1 GiB", self.message));
        }
        if self.outstanding == 0 || self.outstanding > 1024 {
            return bad("outstanding", format!("{} is not 1 to 1024", self.outstanding));
        }
        Ok(())
    }
}

/// Why a run could not start or went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FabricError {
    /// A setting out of range.
    #[error("{what}: {why}")]
    Config {
        /// The setting.
        what: &'static str,
        /// What is wrong with it.
        why: String,
    },
    /// An engine refused a call setting up a flow (a bug, reported rather than a panic).
    #[error("flow {flow}: {call}: {errno}")]
    Engine {
        /// The flow.
        flow: usize,
        /// The call.
        call: &'static str,
        /// Its error.
        errno: roce_cm::Errno,
    },
}

/// One flow's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowReport {
    /// WRITEs completed.
    pub messages: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Goodput over the run, bit/s.
    pub goodput: f64,
    /// Packets the sender sent again.
    pub retransmitted_pkts: u64,
    /// The sender's local ACK timeouts.
    pub ack_timeouts: u64,
    /// WRITEs that ended in error (RETRY_EXC_ERR and the ones flushed after it).
    pub failed: u64,
    /// The sender's congestion counters.
    pub sender: roce_cm::rc::CcCounters,
    /// The receiver's congestion counters.
    pub receiver: roce_cm::rc::CcCounters,
    /// The sender QP's rate at the end, bit/s (the line rate if never cut).
    pub final_rate: u64,
}

/// A run's outcome.
#[derive(Debug, Clone)]
pub struct FabricReport {
    /// The flows, in order.
    pub flows: Vec<FlowReport>,
    /// Jain's fairness index of the goodputs, (Σx)² / (n·Σx²): 1 is equal shares (0 when
    /// nothing was delivered).
    pub fairness: f64,
    /// The switch port.
    pub port: PortStats,
    /// Events the simulation ran.
    pub events: u64,
}

impl FabricReport {
    /// The flows' goodputs added up, bit/s.
    pub fn total_goodput(&self) -> f64 {
        self.flows.iter().map(|f| f.goodput).sum()
    }
}

/// Jain's fairness index of `x`: (Σx)² / (n·Σx²), 0 for no data.
pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    if x.is_empty() || s2 <= 0.0 {
        0.0
    } else {
        s * s / (x.len() as f64 * s2)
    }
}

/// What happens next in the simulation.
#[derive(Debug)]
enum What {
    /// A host's link finished sending a frame.
    LinkFree(usize),
    /// A frame reaches the switch port (flow, bytes).
    AtSwitch(usize, Vec<u8>),
    /// The switch port's head frame has left.
    PortDeparture,
    /// A frame reaches a host.
    Deliver(usize, Vec<u8>),
    /// A host's engine timer (with the arming's generation: a re-armed timer makes older
    /// events stale).
    Timer(usize, u64),
    /// A sender starts its flow.
    Start(usize),
}

/// One host: its engine, its link's state, its timer.
struct Host {
    stack: Stack,
    qpn: u32,
    link_busy: bool,
    timer: Option<Instant>,
    timer_gen: u64,
}

/// The sender's side of a flow.
struct Flow {
    lkey: u32,
    addr: u64,
    remote_addr: u64,
    rkey: u32,
    started: bool,
    next_wr: u64,
    messages: u64,
    failed: u64,
}

struct Sim {
    cfg: FabricConfig,
    now: Instant,
    seq: u64,
    /// What happens next, by time and then in the order it was scheduled.
    events: BTreeMap<(Instant, u64), What>,
    hosts: Vec<Host>,
    flows: Vec<Flow>,
    port: SwitchPort,
    buf: Vec<u8>,
    count: u64,
}

/// Host `2i` sends flow `i` to host `2i + 1`.
fn sender(flow: usize) -> usize {
    2 * flow
}

/// Whether host `h` is a flow's sender (else its receiver).
fn is_sender(h: usize) -> bool {
    h.is_multiple_of(2)
}

fn host_ip(h: usize) -> Ipv4Addr {
    // 198.18.0.0/15, the benchmarking range: hosts from 198.18.0.1 on.
    let n = u32::try_from(h + 1).unwrap_or(u32::MAX);
    Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 0, 0)) + n)
}

fn host_mac(h: usize) -> [u8; 6] {
    let n = (h + 1) as u32;
    let b = n.to_be_bytes();
    [0x02, 0, b[0], b[1], b[2], b[3]]
}

/// Run the flows for the configured time and report.
pub fn run(cfg: &FabricConfig) -> Result<FabricReport, FabricError> {
    cfg.check()?;
    let mut sim = Sim::new(cfg.clone())?;
    let end = Instant::ZERO + cfg.duration;
    while let Some(e) = sim.events.first_entry() {
        let (at, _) = *e.key();
        if at > end {
            break;
        }
        let what = e.remove();
        sim.now = sim.now.max(at);
        sim.count += 1;
        sim.handle(what);
    }
    sim.now = end;
    Ok(sim.report())
}

impl Sim {
    fn new(cfg: FabricConfig) -> Result<Sim, FabricError> {
        let congestion = match cfg.congestion {
            Congestion::Off => Congestion::Off,
            Congestion::Dcqcn(p) => Congestion::Dcqcn(p.with_line_rate(cfg.rate)),
        };
        let mut hosts = Vec::with_capacity(2 * cfg.flows);
        for h in 0..2 * cfg.flows {
            let mut c = StackConfig::new(host_mac(h), host_ip(h), 15);
            c.seed = roce_wire::rng::SplitMix64::stream(cfg.seed, h as u64).next_u64();
            c.congestion = congestion;
            let mut stack = Stack::new(c);
            let qpn = stack.create_rc_qp(roce_cm::rc::QpCap::default()).map_err(|errno| FabricError::Engine {
                flow: h / 2,
                call: "create_qp",
                errno,
            })?;
            hosts.push(Host { stack, qpn, link_busy: false, timer: None, timer_gen: 0 });
        }
        let mut rng = Rng::stream(cfg.seed, 0x5747);
        let mut flows = Vec::with_capacity(cfg.flows);
        let mut starts = Vec::with_capacity(cfg.flows);
        for i in 0..cfg.flows {
            let (s, r) = (sender(i), sender(i) + 1);
            let (qs, qr) = (hosts[s].qpn, hosts[r].qpn);
            let psn = (rng.next_u64() & 0xff_ffff) as u32;
            for (me, peer, pq) in [(s, r, qr), (r, s, qs)] {
                let mut at = QpAttr::new(IpAddr::V4(host_ip(peer)), pq);
                at.path_mtu = cfg.mtu;
                at.sq_psn = psn;
                at.rq_psn = psn;
                at.dmac = Some(host_mac(peer));
                at.timeout = 14;
                let host = &mut hosts[me];
                for st in [QpState::Init, QpState::Rtr, QpState::Rts] {
                    host.stack
                        .rc_mut()
                        .modify_qp(Instant::ZERO, host.qpn, st, &at)
                        .map_err(|errno| FabricError::Engine { flow: i, call: "modify_qp", errno })?;
                }
            }
            let len = cfg.message as usize;
            let reg = |h: &mut Host| {
                h.stack.rc_mut().reg_mr(len, Access::ALL).map_err(|errno| FabricError::Engine {
                    flow: i,
                    call: "reg_mr",
                    errno,
                })
            };
            let local = reg(&mut hosts[s])?;
            let remote = reg(&mut hosts[r])?;
            flows.push(Flow {
                lkey: local.lkey,
                addr: local.addr,
                remote_addr: remote.addr,
                rkey: remote.rkey,
                started: false,
                next_wr: 0,
                messages: 0,
                failed: 0,
            });
            // Starts spread over the first 10 µs, so that the seed decides who goes first.
            starts.push(Instant::from_nanos(rng.up_to(10_000)));
        }
        let port = SwitchPort::new(cfg.queue, cfg.seed);
        let mut sim = Sim {
            cfg,
            now: Instant::ZERO,
            seq: 0,
            events: BTreeMap::new(),
            hosts,
            flows,
            port,
            buf: vec![0; TX_BUF_LEN],
            count: 0,
        };
        for (i, at) in starts.into_iter().enumerate() {
            sim.schedule(at, What::Start(i));
        }
        Ok(sim)
    }

    fn schedule(&mut self, at: Instant, what: What) {
        self.seq += 1;
        self.events.insert((at, self.seq), what);
    }

    fn handle(&mut self, what: What) {
        match what {
            What::Start(i) => {
                self.flows[i].started = true;
                self.post(i);
                self.service(sender(i));
            }
            What::LinkFree(h) => {
                self.hosts[h].link_busy = false;
                self.service(h);
            }
            What::AtSwitch(flow, frame) => {
                let idle = self.port.next_departure().is_none();
                if self.port.enqueue(self.now, flow, frame) && idle {
                    if let Some(t) = self.port.next_departure() {
                        self.schedule(t, What::PortDeparture);
                    }
                }
            }
            What::PortDeparture => {
                if let Some((flow, frame)) = self.port.depart(self.now) {
                    let at = self.now + self.cfg.link_delay;
                    self.schedule(at, What::Deliver(sender(flow) + 1, frame));
                }
                if let Some(t) = self.port.next_departure() {
                    self.schedule(t, What::PortDeparture);
                }
            }
            What::Deliver(h, frame) => {
                self.hosts[h].stack.handle_frame(self.now, &frame);
                self.after_input(h);
            }
            What::Timer(h, gen) => {
                if self.hosts[h].timer_gen != gen {
                    return;
                }
                self.hosts[h].timer = None;
                self.hosts[h].stack.handle_timeout(self.now);
                self.after_input(h);
            }
        }
    }

    /// After an input: a sender reaps its completions and posts more; the host transmits.
    fn after_input(&mut self, h: usize) {
        if is_sender(h) {
            self.reap(h / 2);
        } else {
            // (A receiver's completions: none, WRITEs take no receive.)
            while self.hosts[h].stack.rc_mut().poll_cq().is_some() {}
        }
        self.service(h);
    }

    fn reap(&mut self, i: usize) {
        let h = sender(i);
        while let Some(wc) = self.hosts[h].stack.rc_mut().poll_cq() {
            if wc.status == WcStatus::Success {
                self.flows[i].messages += 1;
            } else {
                self.flows[i].failed += 1;
            }
        }
        self.post(i);
    }

    /// Keep `outstanding` WRITEs posted (none once the sender's QP failed).
    fn post(&mut self, i: usize) {
        let h = sender(i);
        let f = &mut self.flows[i];
        if !f.started {
            return;
        }
        let qpn = self.hosts[h].qpn;
        let rc = self.hosts[h].stack.rc_mut();
        if rc.qp_state(qpn) != Some(QpState::Rts) {
            return;
        }
        while rc.queue_lens(qpn).is_some_and(|(sq, _)| sq < self.cfg.outstanding as usize) {
            let wr = SendWr {
                wr_id: f.next_wr,
                op: SendOp::Write { remote_addr: f.remote_addr, rkey: f.rkey },
                sg_list: vec![Sge { addr: f.addr, length: self.cfg.message, lkey: f.lkey }],
                signaled: true,
                solicited: false,
                inline: None,
            };
            if rc.post_send(self.now, qpn, wr).is_err() {
                break;
            }
            f.next_wr += 1;
        }
    }

    /// Send the host's next frame if its link is free, and arm its timer.
    fn service(&mut self, h: usize) {
        for _ in 0..64 {
            if !self.hosts[h].link_busy {
                if let Some(n) = self.hosts[h].stack.poll_transmit(self.now, &mut self.buf) {
                    let frame = self.buf[..n].to_vec();
                    let wire = wire_time(n, self.cfg.rate);
                    self.hosts[h].link_busy = true;
                    self.schedule(self.now + wire, What::LinkFree(h));
                    let delay = self.cfg.link_delay;
                    if is_sender(h) {
                        self.schedule(self.now + wire + delay, What::AtSwitch(h / 2, frame));
                    } else {
                        // Back through an uncongested port: the receiver's link, then the sender's.
                        self.schedule(self.now + wire + delay + wire + delay, What::Deliver(h - 1, frame));
                    }
                }
            }
            match self.hosts[h].stack.poll_timeout() {
                Some(t) if t <= self.now => {
                    self.hosts[h].stack.handle_timeout(self.now);
                    if is_sender(h) {
                        self.reap(h / 2);
                    }
                }
                t => return self.arm(h, t),
            }
        }
        // Still due after 64 rounds (never seen): look again in a microsecond.
        self.arm(h, Some(self.now + Duration::from_micros(1)));
    }

    fn arm(&mut self, h: usize, t: Option<Instant>) {
        let host = &mut self.hosts[h];
        if host.timer == t {
            return;
        }
        host.timer = t;
        host.timer_gen += 1;
        let gen = host.timer_gen;
        if let Some(t) = t {
            self.schedule(t, What::Timer(h, gen));
        }
    }

    fn report(&self) -> FabricReport {
        let secs = self.cfg.duration.as_secs_f64();
        let flows: Vec<FlowReport> = self
            .flows
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let s = &self.hosts[sender(i)];
                let r = &self.hosts[sender(i) + 1];
                let c = s.stack.rc().counters();
                let bytes = f.messages * u64::from(self.cfg.message);
                FlowReport {
                    messages: f.messages,
                    bytes,
                    goodput: bytes as f64 * 8.0 / secs,
                    retransmitted_pkts: c.retransmitted_pkts,
                    ack_timeouts: c.local_ack_timeout_err,
                    failed: f.failed,
                    sender: c.cc,
                    receiver: r.stack.rc().counters().cc,
                    final_rate: s.stack.rc().qp_rate(s.qpn).map_or(self.cfg.rate, |d| d.rate()),
                }
            })
            .collect();
        let goodputs: Vec<f64> = flows.iter().map(|f| f.goodput).collect();
        FabricReport { fairness: jain(&goodputs), flows, port: self.port.stats().clone(), events: self.count }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marking_probability_is_the_papers_ramp() {
        let q = EcnQueueConfig::paper(2_000_000_000);
        assert_eq!(q.mark_probability(0), 0.0);
        assert_eq!(q.mark_probability(5_000), 0.0);
        assert!((q.mark_probability(102_500) - 0.005).abs() < 1e-12);
        assert_eq!(q.mark_probability(200_000), 1.0);
        assert_eq!(q.mark_probability(1_000_000), 1.0);
    }

    #[test]
    fn marking_a_frame_ce_keeps_its_checksum_and_icrc_right() {
        let mut f = roce_wire::golden::SCAPY_UC_SEND_ONLY.to_vec();
        f[15] = (f[15] & !3) | 2; // ECT(0)
        f[24..26].fill(0);
        let sum = roce_wire::frame::ipv4_checksum(&f[14..34]);
        f[24..26].copy_from_slice(&sum.to_be_bytes());
        assert_eq!(ecn_of(&f), Some(Ecn::Ect0));
        assert!(mark_ce(&mut f));
        assert_eq!(ecn_of(&f), Some(Ecn::Ce));
        let p = roce_wire::frame::parse(&f).unwrap();
        assert!(p.icrc_ok(), "the ICRC masks the TOS");
        assert!(!mark_ce(&mut [0u8; 20]), "too short: nothing marked");
    }

    #[test]
    fn the_port_drains_at_its_rate_marks_above_kmax_and_drops_past_the_buffer() {
        let cfg = EcnQueueConfig { rate: 8_000_000_000, kmin: 0, kmax: 1000, pmax: 0.0, buffer: 3000 };
        let mut port = SwitchPort::new(cfg, 1);
        let mut f = roce_wire::golden::SCAPY_UC_SEND_ONLY.to_vec();
        f[15] = (f[15] & !3) | 2; // ECT(0)
        f.resize(1000, 0); // (not a valid frame any more: the port does not care)
        let t0 = Instant::ZERO;
        assert!(port.enqueue(t0, 0, f.clone()));
        assert!(port.enqueue(t0, 1, f.clone()));
        assert!(port.enqueue(t0, 2, f.clone()));
        assert!(!port.enqueue(t0, 3, f.clone()), "the fourth does not fit");
        let s = port.stats();
        assert_eq!((s.enqueued, s.dropped, s.ce_marked), (3, 1, 0));
        // 1000 bytes + 24 on the wire at 8 Gbit/s: 1024 ns each.
        assert_eq!(port.next_departure(), Some(Instant::from_nanos(1024)));
        assert!(port.depart(Instant::from_nanos(1023)).is_none());
        let (tag, first) = port.depart(Instant::from_nanos(1024)).unwrap();
        assert_eq!((tag, ecn_of(&first)), (0, Some(Ecn::Ce)), "left 2000 bytes behind: marked");
        assert_eq!(port.next_departure(), Some(Instant::from_nanos(2048)));
        assert_eq!(port.queued(), 2000);
        assert_eq!(port.depart(Instant::from_nanos(2048)).map(|(_, f)| ecn_of(&f)), Some(Some(Ecn::Ce)));
        let (_, last) = port.depart(Instant::from_nanos(3072)).unwrap();
        assert_eq!(ecn_of(&last), Some(Ecn::Ect0), "left nothing behind: not marked");
        assert_eq!(port.stats().ce_marked, 2);
        assert_eq!((port.stats().depth.max(), port.stats().depth.samples()), (3000, 4));
    }

    #[test]
    fn quantiles_and_jain() {
        let mut h = DepthHistogram::default();
        for d in [0, 0, 0, 100, 5000] {
            h.add(d);
        }
        assert_eq!(h.quantile(0.5), 63);
        assert_eq!(h.quantile(0.8), 127);
        assert_eq!(h.quantile(1.0), 5000);
        assert_eq!(jain(&[1.0, 1.0]), 1.0);
        assert_eq!(jain(&[1.0, 0.0]), 0.5);
        assert_eq!(jain(&[0.0, 0.0]), 0.0);
    }

    #[test]
    fn bad_settings_are_errors() {
        let ok = FabricConfig::new(2, 1_000_000_000, Congestion::Off, Duration::from_millis(1), 1);
        for (bad, what) in [
            (FabricConfig { flows: 0, ..ok.clone() }, "flows"),
            (FabricConfig { rate: 0, ..ok.clone() }, "rate"),
            (FabricConfig { mtu: 1000, ..ok.clone() }, "mtu"),
            (FabricConfig { queue: EcnQueueConfig { pmax: 1.5, ..ok.queue }, ..ok.clone() }, "pmax"),
            (FabricConfig { queue: EcnQueueConfig { kmin: 10, kmax: 5, ..ok.queue }, ..ok.clone() }, "kmin"),
            (FabricConfig { duration: Duration::ZERO, ..ok.clone() }, "duration"),
        ] {
            match run(&bad) {
                Err(FabricError::Config { what: w, .. }) => assert_eq!(w, what),
                other => panic!("{what}: {other:?}"),
            }
        }
    }

    /// Two flows into one port for 5 ms: with DCQCN the queue stays low and the receivers
    /// sent CNPs that cut the senders' rates; the same seed gives the same run.
    #[test]
    fn two_flows_with_dcqcn_cut_their_rates_and_a_seed_fixes_the_run() {
        let cfg = FabricConfig::new(2, 2_000_000_000, Congestion::dcqcn(), Duration::from_millis(5), 7);
        let a = run(&cfg).unwrap();
        assert!(a.flows.iter().all(|f| f.sender.rate_cuts > 0 && f.receiver.cnp_sent > 0), "{a:?}");
        assert!(a.port.ce_marked > 0);
        assert!(a.flows.iter().all(|f| f.messages > 0));
        let b = run(&cfg).unwrap();
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        let off = run(&FabricConfig { congestion: Congestion::Off, ..cfg }).unwrap();
        assert!(off.flows.iter().all(|f| f.sender.cnp_received == 0 && f.receiver.cnp_sent == 0));
        assert_eq!(off.port.ce_marked, 0, "nothing ECN-capable to mark");
    }
}
