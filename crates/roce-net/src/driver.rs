//! The real-time event loop: runs a [`Stack`] (and, when asked, an SA responder on its QP1)
//! on a [`Device`] — `poll_timeout` ▶ wait on the device's descriptor or the timer ▶
//! `handle_frame` / `handle_timeout` ▶ `poll_transmit` — plus a blocking API for programs
//! (`join` returns on MULTICAST_JOIN or MULTICAST_ERROR, with a timeout) and an event queue.
//!
//! Frames move in batches: the stack's queued frames are drained into one
//! [`Device::send_batch`] (64 at a time) and received frames taken with
//! [`Device::recv_batch`], so a raw socket makes one system call (or ring kick) per batch.
//!
//! With an SA ([`Driver::with_sa`]) its requests are queued per requester and answered in
//! turn ([`crate::sa_queue`]), so one host's flood does not delay another host's join.
//!
//! One loop serves every transport: frames go through the [`Device`]; a stack whose SA
//! transport is `External` (OpenSM through ibsim) has its SA MADs carried by an [`SaLink`].
//! A stop descriptor (a signal's self-pipe) wakes the wait at once; see [`Driver::set_stop`].

use std::collections::{BTreeSet, VecDeque};
use std::io;
use std::net::IpAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant as WallInstant};

use roce_cm::{CmEvent, CmId, EventKind, Instant, Stack};
use roce_sa::{Requester, RmppSender, SaResponder};
use roce_wire::mcmember::JoinState;
use roce_wire::MAD_SIZE;

use crate::device::{Device, RecvBatch, MAX_FRAME_LEN};
use crate::raw::RawSocket;
use crate::sa_queue::{RequestQueue, RequestQueueConfig};

/// Which way a frame went, for taps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Received from the device.
    Rx,
    /// Sent to the device.
    Tx,
}

/// A callback that sees every frame (printing, capture).
pub type Tap = Box<dyn FnMut(Direction, Instant, &[u8]) + Send>;

/// Devices that can be told which multicast traffic to pass: by MAC (a raw socket), or by IP
/// group (a UDP socket, which joins them so that the kernel reports them); others need not.
pub trait MulticastFilter {
    /// Pass exactly these multicast MACs.
    fn set_multicast(&mut self, _macs: &BTreeSet<[u8; 6]>) -> io::Result<()> {
        Ok(())
    }

    /// Be a member of exactly these IP multicast groups (the stack's
    /// [`Stack::ip_multicast_groups`]: those it sends IGMP/MLD reports for).
    fn set_ip_groups(&mut self, _groups: &BTreeSet<IpAddr>) -> io::Result<()> {
        Ok(())
    }
}

impl MulticastFilter for RawSocket {
    fn set_multicast(&mut self, macs: &BTreeSet<[u8; 6]>) -> io::Result<()> {
        RawSocket::set_multicast(self, macs)
    }
}
impl MulticastFilter for crate::udp::RoceUdpSocket {
    fn set_ip_groups(&mut self, groups: &BTreeSet<IpAddr>) -> io::Result<()> {
        crate::udp::RoceUdpSocket::set_ip_groups(self, groups)
    }
}
impl MulticastFilter for crate::device::MemoryDevice {}
impl<D: MulticastFilter + Device, W: std::io::Write> MulticastFilter for crate::pcap_device::PcapDevice<D, W> {
    fn set_multicast(&mut self, macs: &BTreeSet<[u8; 6]>) -> io::Result<()> {
        self.inner_mut().set_multicast(macs)
    }
    fn set_ip_groups(&mut self, groups: &BTreeSet<IpAddr>) -> io::Result<()> {
        self.inner_mut().set_ip_groups(groups)
    }
}
impl<D: MulticastFilter + Device> MulticastFilter for crate::fault::FaultDevice<D> {
    fn set_multicast(&mut self, macs: &BTreeSet<[u8; 6]>) -> io::Result<()> {
        self.inner_mut().set_multicast(macs)
    }
    fn set_ip_groups(&mut self, groups: &BTreeSet<IpAddr>) -> io::Result<()> {
        self.inner_mut().set_ip_groups(groups)
    }
}

/// A transport for SA MADs outside Ethernet frames, for a stack whose SA transport is
/// `External` (e.g. OpenSM through ibsim: [`crate::ibsim::IbsimSaLink`]).
pub trait SaLink {
    /// Send one SA MAD of the stack's to the SA.
    fn send_sa_mad(&mut self, mad: &[u8; MAD_SIZE]) -> io::Result<()>;
    /// Take one MAD that arrived, without waiting (`Ok(None)`: none is waiting).
    fn recv_sa_mad(&mut self) -> io::Result<Option<[u8; MAD_SIZE]>>;
    /// A descriptor that polls readable when a MAD may be waiting.
    fn raw_fd(&self) -> Option<RawFd>;
}

/// A device that carries no frames (a port whose only traffic is SA MADs over an [`SaLink`]):
/// a send is refused and counted as a send error.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoFrames;

impl Device for NoFrames {
    fn send(&mut self, _frame: &[u8]) -> io::Result<()> {
        Err(io::Error::new(io::ErrorKind::Unsupported, "this port carries no Ethernet frames"))
    }
    fn recv(&mut self, _buf: &mut [u8]) -> io::Result<Option<usize>> {
        Ok(None)
    }
}
impl MulticastFilter for NoFrames {}

/// Frames per transmit or receive batch (one `sendmmsg`/`recvmmsg` or ring kick).
const BATCH: usize = 64;
/// A receive slot: a jumbo frame with a VLAN tag. A longer frame is dropped and counted by
/// the device (a raw socket), or taken alone into a [`MAX_FRAME_LEN`] buffer (other devices).
const RX_SLOT: usize = 9216;
/// The transmit arena: a batch is sent once it holds [`BATCH`] frames or less than
/// [`MAX_FRAME_LEN`] is left after `BATCH_BYTES` (every `poll_transmit` gets at least that).
const BATCH_BYTES: usize = 256 << 10;
/// Receive batches handled per turn before the queued frames (ACKs) are sent.
const RX_BATCHES_PER_TURN: usize = 4;
/// With an SA, a turn is up to this many steps, each a receive batch and the answers it
/// allows, so that no receive socket goes unread for more than a step's work (under a flood
/// on a veth, where sending an answer costs 5–15 µs: a 32-frame read of 10–25 µs and one
/// answer to the flood): a request that arrives while a flood's backlog drains is read within
/// a step and, its requester having nothing queued, answered first. 32 steps read up to
/// 1,024 frames a turn.
const SA_STEPS_PER_TURN: usize = 32;
/// With an SA: frames per receive batch (one step's reads). A fanout group's sockets are read
/// in turn, the one that filled the last batch (a flood's) last, and after a batch it filled
/// alone not at all when the others gave frames (a short batch, answered at once), so a flood
/// takes at most one step's batch before every other socket is read again.
const SA_RX_BATCH: usize = 32;
/// With an SA: requests answered per step, and in each flush; of them at most
/// [`SA_BULK_PER_STEP`] from requesters with a backlog (old flows). In a step the answers to
/// requesters that had nothing waiting leave in one batch, before the others are built.
const SA_SERVE_PER_STEP: usize = 16;
/// With an SA: at most this many of a step's answers go to requesters with a backlog (a
/// flood), so that a step stays short while one drains. They are built and sent one at a
/// time, and the step ends early when a receive queue other than the flood's has frames
/// ([`Device::rx_ready_beside_flood`]), so that a join arriving meanwhile waits for one such
/// answer's send, not four (on a veth 10–60 µs for four; spec/benchmarks.md, "The first join
/// after a flood within its usual time"). Requesters that had nothing waiting (new flows: a
/// lone join, many hosts with one request each, all of sa_soak's answers) fill the rest of
/// the step, so their answers still leave in large batches.
const SA_BULK_PER_STEP: usize = 4;

/// A stack running on a device in real time.
pub struct Driver<D: Device + MulticastFilter> {
    /// The device.
    pub dev: D,
    /// The engine.
    pub stack: Stack,
    /// An SA answering the SA requests that reach this port's QP1, if any.
    pub sa: Option<SaResponder>,
    /// The SA's windowed RMPP sender: its tables go out as the requesters' ACKs admit.
    pub rmpp: RmppSender,
    /// The SA's requests waiting to be answered, queued per requester and answered in deficit
    /// round robin ([`RequestQueue`]), so that one host's flood does not delay another's join.
    pub sa_queue: RequestQueue,
    /// Events polled from the stack and not yet taken.
    pub events: VecDeque<CmEvent>,
    /// Frames (and SA-link MADs) that could not be sent (device errors), counted.
    pub send_errors: u64,
    /// Frames (and SA-link MADs) the device accepted.
    pub sent_ok: u64,
    /// The last device send error, for the report.
    pub last_send_error: Option<io::Error>,
    epoch: WallInstant,
    buf: Vec<u8>,
    tx_arena: Vec<u8>,
    rx_batch: RecvBatch,
    tap: Option<Tap>,
    sa_link: Option<Box<dyn SaLink + Send>>,
    stop: Option<(RawFd, Arc<AtomicBool>)>,
    stoppable: bool,
    busy_poll: Duration,
    received_last_turn: bool,
}

impl<D: Device + MulticastFilter> Driver<D> {
    /// Run `stack` on `dev`.
    pub fn new(dev: D, stack: Stack) -> Self {
        Driver {
            dev,
            stack,
            sa: None,
            rmpp: RmppSender::default(),
            sa_queue: RequestQueue::default(),
            events: VecDeque::new(),
            send_errors: 0,
            sent_ok: 0,
            last_send_error: None,
            epoch: WallInstant::now(),
            buf: vec![0; MAX_FRAME_LEN],
            tx_arena: vec![0; BATCH_BYTES + MAX_FRAME_LEN],
            rx_batch: RecvBatch::new(BATCH, RX_SLOT).expect("a valid batch shape"),
            tap: None,
            sa_link: None,
            stop: None,
            stoppable: true,
            busy_poll: Duration::ZERO,
            received_last_turn: false,
        }
    }

    /// After a turn that received frames, look for the next ones for up to `d` (`poll` with no
    /// timeout, again and again) before sleeping in `poll`: a stream's receiver then stays
    /// awake between its sender's bursts, and neither pays for a sleep and a wake-up per burst
    /// (on a veth the sender's core runs the wake-up inside its send). Off (zero) by default;
    /// the CPU it spends shows in the thread's CPU time.
    pub fn set_busy_poll(&mut self, d: Duration) {
        self.busy_poll = d;
    }

    /// Carry the stack's SA MADs (SA transport `External`) over `link` instead of frames.
    pub fn with_sa_link(mut self, link: Box<dyn SaLink + Send>) -> Self {
        self.sa_link = Some(link);
        self
    }

    /// Stop waiting when `flag` is set: `fd` (a signal's self-pipe, non-blocking) is polled
    /// with the device, so a signal wakes the wait at once; its bytes are drained. While the
    /// flag is set and the driver is stoppable, [`Driver::run_until`] returns `Ok(false)`.
    pub fn set_stop(&mut self, fd: RawFd, flag: Arc<AtomicBool>) {
        self.stop = Some((fd, flag));
    }

    /// Whether a stop was asked (and the driver is stoppable).
    pub fn stopped(&self) -> bool {
        self.stoppable && self.stop.as_ref().is_some_and(|(_, f)| f.load(Ordering::SeqCst))
    }

    /// Keep running after a stop was asked (`false`): for the grace period that destroys the
    /// ids and lets their leaves and disconnects go out and be answered.
    pub fn set_stoppable(&mut self, stoppable: bool) {
        self.stoppable = stoppable;
    }

    /// Answer SA requests on this port's QP1 with `sa` (registers the class-0x03 agent). The
    /// driver then reads in small batches, answering a few requests after each.
    pub fn with_sa(mut self, sa: SaResponder) -> Self {
        self.stack.register_mad_agent(0x03);
        self.sa = Some(sa);
        self.rx_batch = RecvBatch::new(SA_RX_BATCH, RX_SLOT).expect("a valid batch shape");
        self
    }

    /// Bound the SA's request queue with `cfg` (default [`RequestQueueConfig::default`]).
    pub fn with_sa_queue(mut self, cfg: RequestQueueConfig) -> Self {
        self.sa_queue = RequestQueue::new(cfg);
        self
    }

    /// See every frame in both directions.
    pub fn set_tap(&mut self, tap: Tap) {
        self.tap = Some(tap);
    }

    /// The engine's clock: time since the driver started.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    /// Send what the stack queued (frames, SA MADs) and collect its events, without reading
    /// the device: for a caller that posted work and reads the device elsewhere.
    pub fn send_queued(&mut self) -> io::Result<()> {
        self.flush()
    }

    fn flush(&mut self) -> io::Result<()> {
        let now = self.now();
        self.pump_sa_batch();
        let macs = self.stack.multicast_macs();
        self.dev.set_multicast(&macs)?;
        let groups: BTreeSet<IpAddr> = self.stack.ip_multicast_groups().collect();
        self.dev.set_ip_groups(&groups)?;
        if let Some(link) = self.sa_link.as_mut() {
            while let Some(mad) = self.stack.poll_sa_mad(now) {
                match link.send_sa_mad(&mad) {
                    Ok(()) => self.sent_ok += 1,
                    Err(e) => {
                        self.send_errors += 1;
                        self.last_send_error = Some(e);
                    }
                }
            }
        }
        self.transmit(now);
        while let Some(e) = self.stack.poll_event() {
            self.events.push_back(e);
        }
        Ok(())
    }

    /// Send the stack's queued frames in batches: one device call (sendmmsg, or a ring kick)
    /// per BATCH frames instead of one system call per frame.
    fn transmit(&mut self, now: Instant) {
        let mut spans = [(0usize, 0usize); BATCH];
        loop {
            let (mut k, mut used, mut drained) = (0, 0, false);
            while k < BATCH && used <= BATCH_BYTES {
                match self.stack.poll_transmit(now, &mut self.tx_arena[used..]) {
                    Some(n) => {
                        spans[k] = (used, n);
                        used += n;
                        k += 1;
                    }
                    None => {
                        drained = true;
                        break;
                    }
                }
            }
            if k > 0 {
                let mut frames: [&[u8]; BATCH] = [&[]; BATCH];
                for (f, &(at, n)) in frames.iter_mut().zip(&spans[..k]) {
                    *f = &self.tx_arena[at..at + n];
                }
                let mut i = 0;
                while i < k {
                    match self.dev.send_batch(&frames[i..k]) {
                        Ok(m) if m > 0 => {
                            self.sent_ok += m as u64;
                            i += m;
                        }
                        // The device took none of them: that frame is lost, counted.
                        Ok(_) => {
                            self.send_errors += 1;
                            self.last_send_error =
                                Some(io::Error::new(io::ErrorKind::WouldBlock, "the device took no frame of a batch"));
                            i += 1;
                        }
                        Err(e) => {
                            self.send_errors += 1;
                            self.last_send_error = Some(e);
                            i += 1;
                        }
                    }
                }
                // After the send: a tap's timestamp is when the frame left the device.
                if let Some(t) = self.tap.as_mut() {
                    for f in &frames[..k] {
                        t(Direction::Tx, now, f);
                    }
                }
            }
            if drained {
                break;
            }
        }
    }

    /// One step's answers, after its receive batch (and in each flush): queue the batch's SA
    /// requests, answer a few in turn, and send the answers now rather than after the turn's
    /// reads. Requesters that had nothing waiting (a lone join) are answered first and their
    /// answers sent at once; then the backlogged requesters' few, one answer a send (on a veth
    /// a send runs the receiving side: 5–15 µs an answer), until another host's frames wait
    /// to be read. Returns the requests answered.
    fn pump_sa_batch(&mut self) -> usize {
        if self.sa.is_none() {
            return 0;
        }
        self.queue_sa_requests();
        let sparse = self.serve_sa(SA_SERVE_PER_STEP, 0);
        if sparse > 0 {
            self.transmit(self.now());
        }
        let mut bulk = 0;
        while bulk < SA_BULK_PER_STEP.min(SA_SERVE_PER_STEP - sparse) {
            if bulk > 0 && self.dev.rx_ready_beside_flood() {
                break;
            }
            let served = self.serve_sa(1, 1);
            if served == 0 {
                break;
            }
            self.transmit(self.now());
            bulk += served;
        }
        sparse + bulk
    }

    /// Move the SA requests the stack took into the fair queue (each behind its requester's).
    fn queue_sa_requests(&mut self) {
        if self.sa.is_none() {
            return;
        }
        while let Some(req) = self.stack.poll_mad_request() {
            self.sa_queue.push(req);
        }
    }

    /// Answer up to `budget` queued SA requests, requesters in turn, at most `bulk_budget` of
    /// them from requesters with a backlog; then the RMPP segments the requesters' windows
    /// admit. Returns the requests answered.
    fn serve_sa(&mut self, budget: usize, bulk_budget: usize) -> usize {
        let now = self.now().since_epoch();
        let Some(sa) = self.sa.as_mut() else { return 0 };
        sa.handle_time(now); // service leases and member lifetimes run on the driver's clock
        if self.rmpp.poll_timeout().is_some_and(|t| t <= now) {
            self.rmpp.handle_timeout(now);
        }
        let (rmpp, stack) = (&mut self.rmpp, &mut self.stack);
        let served = self.sa_queue.serve_bounded(budget, bulk_budget, |req| {
            let reply = rmpp.handle_mad(sa, Requester::new(req.src_gid, req.src_qp), &req.mad, now);
            for mad in reply.as_slice() {
                stack.send_mad(req.src, req.src_qp, mad);
            }
            reply.as_slice().len()
        });
        while let Some((to, mad)) = self.rmpp.poll_transmit(now) {
            self.stack.send_mad(to.gid.to_ip(), to.qpn, &mad);
        }
        served
    }

    /// How long a turn may wait, at most `max_wait`: until the stack's or the RMPP sender's
    /// next timer, or not at all when a stop was asked or SA requests wait.
    pub fn next_wait(&self, max_wait: Duration) -> Duration {
        let now = self.now();
        let mut wait = max_wait;
        if let Some(t) = self.stack.poll_timeout() {
            wait = wait.min(t.saturating_duration_since(now));
        }
        if let Some(t) = self.rmpp.poll_timeout() {
            wait = wait.min(t.saturating_sub(now.since_epoch()));
        }
        if self.stopped() || !self.sa_queue.is_empty() {
            wait = Duration::ZERO;
        }
        wait
    }

    /// Whether the last turn received frames (a loop that waits itself busy-polls after one,
    /// as [`Driver::set_busy_poll`] has a turn do).
    pub fn received_last_turn(&self) -> bool {
        self.received_last_turn
    }

    /// The descriptors a turn waits on for input (the device's, the SA link's): for a loop
    /// that waits itself, without holding the driver (an engine shared between threads).
    pub fn input_fds(&self) -> [Option<RawFd>; 2] {
        [self.dev.raw_fd(), self.sa_link.as_ref().and_then(|l| l.raw_fd())]
    }

    /// One turn of the loop: send what is queued, wait up to `max_wait` for a frame or the
    /// stack's next timer, handle what came.
    pub fn turn(&mut self, max_wait: Duration) -> io::Result<()> {
        self.flush()?;
        let mut wait = self.next_wait(max_wait);
        let stop_fd = self.stop.as_ref().map(|(fd, _)| *fd);
        // At most three descriptors: the device, the SA link, the stop pipe (no allocation).
        let mut pfds = [libc::pollfd { fd: -1, events: libc::POLLIN, revents: 0 }; 3];
        let mut n = 0;
        for fd in [self.dev.raw_fd(), self.sa_link.as_ref().and_then(|l| l.raw_fd()), stop_fd].into_iter().flatten() {
            pfds[n].fd = fd;
            n += 1;
        }
        if n > usize::from(stop_fd.is_some()) {
            // Busy poll first (after a turn that received), then sleep for what is left.
            let spin_until = (self.received_last_turn && !self.busy_poll.is_zero() && !wait.is_zero())
                .then(|| WallInstant::now() + self.busy_poll.min(wait));
            let mut ready = false;
            if let Some(until) = spin_until {
                while !ready && WallInstant::now() < until {
                    // SAFETY: a valid array of `n` pollfds.
                    let r = unsafe { libc::poll(pfds.as_mut_ptr(), n as libc::nfds_t, 0) };
                    if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                        return Err(io::Error::last_os_error());
                    }
                    ready = r > 0;
                }
                wait = wait.saturating_sub(self.busy_poll);
            }
            // With nothing to wait for, the receive below finds out as cheaply as poll would.
            if !ready && !wait.is_zero() {
                let ms = i32::try_from(wait.as_millis().max(u128::from(!wait.is_zero()))).unwrap_or(i32::MAX);
                // SAFETY: a valid array of `n` pollfds.
                let r = unsafe { libc::poll(pfds.as_mut_ptr(), n as libc::nfds_t, ms) };
                if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    return Err(io::Error::last_os_error());
                }
            }
        } else if !wait.is_zero() {
            std::thread::sleep(wait.min(Duration::from_millis(1)));
        }
        // Once a stop was asked, its bytes would keep every later poll awake: drop them.
        if let Some((fd, flag)) = &self.stop {
            if flag.load(Ordering::SeqCst) {
                drain(*fd);
            }
        }
        if let Some(link) = self.sa_link.as_mut() {
            while let Some(mad) = link.recv_sa_mad()? {
                let now = Instant::from_nanos(u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX));
                self.stack.handle_sa_mad(now, &mad);
            }
        }
        // An SA alternates small receive batches with a few answers (steps) while frames come
        // or requests wait: its requests wait in the fair queue, not in the kernel's, where a
        // flood's would hold up everyone's, and no socket waits long to be read again.
        let sa = self.sa.is_some();
        let batches = if sa { SA_STEPS_PER_TURN } else { RX_BATCHES_PER_TURN };
        self.received_last_turn = false;
        for _ in 0..batches {
            // Datagrams in place (the udp transport) when nothing needs to see them as frames
            // (a tap, an SA's shedding): no frame built around them, no copy.
            let received = if self.tap.is_none() && !sa {
                let (now, stack) = (self.now(), &mut self.stack);
                self.dev.recv_in_place(&mut self.rx_batch, &mut |arrival, datagram| {
                    stack.handle_datagram_icrc_verified(now, arrival, datagram)
                })
            } else {
                self.dev.recv_batch(&mut self.rx_batch)
            };
            match received {
                // Nothing read: an SA answers its step's share of what waits, then reads again.
                Ok(0) => {
                    if !sa || self.pump_sa_batch() == 0 {
                        break;
                    }
                }
                Ok(_) => {
                    self.received_last_turn = true;
                    let now = self.now();
                    for (f, icrc_verified) in self.rx_batch.iter_icrc_verified() {
                        if let Some(t) = self.tap.as_mut() {
                            t(Direction::Rx, now, f);
                        }
                        // A flooding requester's frames past its queue's bound go before the
                        // stack's parse and ICRC: reading stays cheap, the socket drains.
                        if sa && self.sa_queue.shed_frame(f) {
                            continue;
                        }
                        // (The udp transport computed the ICRC already: once is enough.)
                        if icrc_verified {
                            self.stack.handle_frame_icrc_verified(now, f);
                        } else {
                            self.stack.handle_frame(now, f);
                        }
                        // Queued at once, so that the next frame's shedding sees its queue.
                        while let Some(req) = sa.then(|| self.stack.poll_mad_request()).flatten() {
                            self.sa_queue.push(req);
                        }
                    }
                    self.pump_sa_batch();
                }
                // A frame longer than a slot that the device kept queued: take it alone.
                Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                    let Some(n) = self.dev.recv(&mut self.buf)? else { break };
                    let now = self.now();
                    if let Some(t) = self.tap.as_mut() {
                        t(Direction::Rx, now, &self.buf[..n]);
                    }
                    self.stack.handle_frame(now, &self.buf[..n]);
                    self.pump_sa_batch();
                }
                Err(e) => return Err(e),
            }
        }
        let now = self.now();
        if self.stack.poll_timeout().is_some_and(|t| t <= now) {
            self.stack.handle_timeout(now);
        }
        self.flush()
    }

    /// Run until `done` holds or `timeout` passes; returns whether `done` held.
    pub fn run_until(&mut self, timeout: Duration, mut done: impl FnMut(&mut Self) -> bool) -> io::Result<bool> {
        let end = WallInstant::now() + timeout;
        loop {
            self.flush()?;
            if done(self) {
                return Ok(true);
            }
            if self.stopped() {
                return Ok(false);
            }
            let left = end.saturating_duration_since(WallInstant::now());
            if left.is_zero() {
                return Ok(false);
            }
            self.turn(left.min(Duration::from_millis(100)))?;
        }
    }

    /// Run for `d`.
    pub fn run_for(&mut self, d: Duration) -> io::Result<()> {
        self.run_until(d, |_| false).map(|_| ())
    }

    /// Take the first queued event of `id` whose kind is in `kinds`, running up to `timeout`.
    pub fn wait_event(&mut self, id: CmId, kinds: &[EventKind], timeout: Duration) -> io::Result<Option<CmEvent>> {
        let found = |d: &mut Self| d.events.iter().position(|e| e.id == id && kinds.contains(&e.kind));
        self.run_until(timeout, |d| found(d).is_some())?;
        Ok(found(self).and_then(|i| self.events.remove(i)))
    }

    /// Join and block until MULTICAST_JOIN or MULTICAST_ERROR (or the timeout).
    pub fn join(
        &mut self,
        id: CmId,
        group: IpAddr,
        join_state: JoinState,
        timeout: Duration,
    ) -> io::Result<Option<CmEvent>> {
        let now = self.now();
        self.stack
            .join_multicast(now, id, group, join_state)
            .map_err(|errno| crate::NetError::Cm { call: "join_multicast", errno })?;
        self.wait_event(id, &[EventKind::MulticastJoin, EventKind::MulticastError], timeout)
    }

    /// Leave and block until MULTICAST_LEFT or MULTICAST_ERROR (or the timeout).
    pub fn leave(&mut self, id: CmId, group: IpAddr, timeout: Duration) -> io::Result<Option<CmEvent>> {
        let now = self.now();
        self.stack
            .leave_multicast(now, id, group)
            .map_err(|errno| crate::NetError::Cm { call: "leave_multicast", errno })?;
        self.wait_event(id, &[EventKind::MulticastLeft, EventKind::MulticastError], timeout)
    }
}

/// Read and drop whatever waits on a non-blocking descriptor (a self-pipe).
fn drain(fd: RawFd) {
    let mut b = [0u8; 64];
    // SAFETY: reading into our buffer with its length; the descriptor is non-blocking.
    while unsafe { libc::read(fd, b.as_mut_ptr().cast(), b.len()) } > 0 {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemoryDevice;
    use roce_cm::{DropReason, StackConfig};
    use roce_wire::golden;

    /// Bad frames on the wire — malformed, bad ICRC, wrong Q_Key, a replayed response — are
    /// counted and never stop the loop: a good frame after them is still answered.
    #[test]
    fn bad_frames_are_counted_and_the_loop_goes_on() {
        let (a, mut peer) = MemoryDevice::pair();
        // The golden SA frame is addressed to 192.168.100.2 at 02:00:00:00:00:02.
        let cfg = StackConfig::new([2, 0, 0, 0, 0, 2], "192.168.100.2".parse().unwrap(), 24);
        let mut d = Driver::new(a, Stack::new(cfg));
        let good = golden::SA_DELETE_MCMEMBER.to_vec();
        let mut bad_icrc = good.clone();
        *bad_icrc.last_mut().unwrap() ^= 1;
        let truncated = good[..100].to_vec();
        // Wrong Q_Key: DETH Q_Key at frame byte 54; re-emit so the ICRC is right.
        let f = roce_wire::frame::parse(&good).unwrap();
        let mut r = f.repr.clone();
        r.ext.deth.as_mut().unwrap().qkey = 0x1234_5678;
        let mut wrong_qkey = vec![0u8; r.buffer_len()];
        r.emit(&mut wrong_qkey).unwrap();
        // A response nobody asked for: the Delete turned into a DeleteResp.
        let mut resp = f.repr.clone();
        let mut mad = f.repr.payload.to_vec();
        mad[3] |= 0x80;
        resp.payload = &mad;
        let mut replayed = vec![0u8; resp.buffer_len()];
        resp.emit(&mut replayed).unwrap();
        for frame in [&bad_icrc, &truncated, &wrong_qkey, &replayed, &vec![0u8; 3]] {
            peer.send(frame).unwrap();
        }
        // Then a good ARP request for our address.
        let arp = roce_wire::arp::request(
            [2, 0, 0, 0, 0, 1],
            "192.168.100.1".parse().unwrap(),
            "192.168.100.2".parse().unwrap(),
        );
        let mut arp_frame = vec![0u8; 64];
        let n = roce_wire::l2::EmitFrame::emit(&roce_wire::l2::ArpFrame::new(arp), &mut arp_frame);
        peer.send(&arp_frame[..n]).unwrap();
        for _ in 0..5 {
            d.turn(Duration::ZERO).unwrap();
        }
        let c = d.stack.counters();
        assert_eq!(c.dropped(DropReason::BadIcrc), 1);
        assert_eq!(c.dropped(DropReason::QkeyViolation), 1);
        assert_eq!(c.dropped(DropReason::UnsolicitedResponse), 1);
        assert_eq!(c.rx_frames, 6);
        assert_eq!(c.rx_accepted + c.total_dropped(), 6, "{c:?}");
        let mut buf = vec![0u8; 2048];
        let reply = peer.recv(&mut buf).unwrap().expect("the ARP request is answered after the bad frames");
        assert_eq!(&buf[12..14], &[0x08, 0x06]);
        assert!(reply >= 42);
    }

    use crate::device::Batching;
    impl MulticastFilter for Batching {}

    /// An ARP request for 192.168.100.2 from host `i` (02:00:00:00:01:i, 192.168.100.(100 + i)).
    fn arp_request_from(i: u8) -> Vec<u8> {
        let req = roce_wire::arp::request(
            [2, 0, 0, 0, 1, i],
            std::net::Ipv4Addr::new(192, 168, 100, 100 + i),
            "192.168.100.2".parse().unwrap(),
        );
        let mut f = vec![0u8; 64];
        let n = roce_wire::l2::EmitFrame::emit(&roce_wire::l2::ArpFrame::new(req), &mut f);
        f.truncate(n);
        f
    }

    /// Frames that arrive together are taken in one receive batch, and the answers leave in
    /// one send batch: 100 ARP requests, 100 replies, in order, in two batches each way.
    #[test]
    fn frames_move_in_batches() {
        let (a, mut peer) = MemoryDevice::pair();
        let cfg = StackConfig::new([2, 0, 0, 0, 0, 2], "192.168.100.2".parse().unwrap(), 24);
        let dev = Batching::new(a);
        let mut d = Driver::new(dev, Stack::new(cfg));
        for i in 0..100u8 {
            peer.send(&arp_request_from(i)).unwrap();
        }
        d.turn(Duration::ZERO).unwrap();
        // 100 frames: a batch of 64 and one of 36 (then an empty one ends the receive loop).
        assert!(d.dev.recv_batches <= 3, "{} receive calls", d.dev.recv_batches);
        assert_eq!(d.dev.send_batches, [64, 36]);
        assert_eq!((d.sent_ok, d.send_errors), (100, 0));
        let mut buf = [0u8; 128];
        for i in 0..100u8 {
            let n = peer.recv(&mut buf).unwrap().expect("a reply per request");
            assert_eq!(&buf[..6], &[2, 0, 0, 0, 1, i], "the replies in order");
            assert!(n >= 42);
        }
    }

    /// An SA join from `host` (192.168.100.`host`, MAC 02:00:00:00:01:`host`) to the driver's
    /// port at 192.168.100.2, TID `tid`, as a RoCEv2 UD frame to QP1.
    fn sa_join_frame(host: u8, tid: u64) -> Vec<u8> {
        use roce_wire::bth::{self, Opcode};
        use roce_wire::mad::Method;
        use roce_wire::mcmember::{ComponentMask, McMemberRecord};
        use roce_wire::sa::{attr, SaData, SaMad};
        use roce_wire::{ext::ExtHeaders, frame::FrameRepr, Gid, GSI_QKEY};
        let src = std::net::Ipv4Addr::new(192, 168, 100, host);
        let rec = McMemberRecord {
            mgid: Gid::from_ipv4(std::net::Ipv4Addr::new(239, 1, 0, host)),
            port_gid: Gid::from_ipv4(src),
            q_key: 0x0123_4567,
            p_key: 0xffff,
            join_state: JoinState::FULL_MEMBER,
            ..McMemberRecord::default()
        };
        let mad = SaMad::request(
            Method::Set,
            tid,
            attr::MC_MEMBER_RECORD,
            ComponentMask::KERNEL_JOIN.0,
            SaData::mc_member(rec),
        )
        .to_bytes();
        let mut b = bth::Repr::new(Opcode::UdSendOnly, 1, tid as u32 & 0xff_ffff);
        b.ack_req = true;
        let r = FrameRepr::new(
            [2, 0, 0, 0, 1, host],
            [2, 0, 0, 0, 0, 2],
            IpAddr::V4(src),
            "192.168.100.2".parse().unwrap(),
            b,
            ExtHeaders::deth(GSI_QKEY, 1),
            &mad,
        );
        let mut f = vec![0u8; r.buffer_len()];
        let n = r.emit(&mut f).unwrap();
        f.truncate(n);
        f
    }

    /// A step answers a requester with nothing waiting in a send of its own, before the
    /// backlogged requester's answers, which leave one a send: 8 joins from one host then one
    /// from another, read in one batch, give sends of 1 (the other host's answer, first on
    /// the wire) and then 1 each.
    #[test]
    fn a_lone_join_is_sent_before_a_backlog_one_answer_a_send() {
        let (a, mut peer) = MemoryDevice::pair();
        let cfg = StackConfig::new([2, 0, 0, 0, 0, 2], "192.168.100.2".parse().unwrap(), 24);
        let sa = SaResponder::new(roce_sa::SaConfig::roce()).unwrap();
        let mut d = Driver::new(Batching::new(a), Stack::new(cfg)).with_sa(sa);
        let mut buf = vec![0u8; 2048];
        // The two hosts' addresses resolved first (the SA answers them without an ARP).
        for host in [1u8, 3] {
            let arp = roce_wire::arp::request(
                [2, 0, 0, 0, 1, host],
                std::net::Ipv4Addr::new(192, 168, 100, host),
                "192.168.100.2".parse().unwrap(),
            );
            let mut f = vec![0u8; 64];
            let n = roce_wire::l2::EmitFrame::emit(&roce_wire::l2::ArpFrame::new(arp), &mut f);
            peer.send(&f[..n]).unwrap();
        }
        d.turn(Duration::ZERO).unwrap();
        while peer.recv(&mut buf).unwrap().is_some() {}
        d.dev.send_batches.clear();
        for tid in 1..=8 {
            peer.send(&sa_join_frame(1, tid)).unwrap();
        }
        peer.send(&sa_join_frame(3, 100)).unwrap();
        d.turn(Duration::ZERO).unwrap();
        assert_eq!(d.dev.send_batches, vec![1; 9], "the lone join's answer alone, then the backlog's one a send");
        let mut to = Vec::new();
        while let Some(n) = peer.recv(&mut buf).unwrap() {
            let f = roce_wire::frame::parse(&buf[..n]).unwrap();
            to.push(f.repr.ip.destination());
        }
        let host = |h: u8| IpAddr::V4(std::net::Ipv4Addr::new(192, 168, 100, h));
        assert_eq!(to.len(), 9);
        assert_eq!(to[0], host(3), "the lone join answered first: {to:?}");
        assert!(to[1..].iter().all(|&ip| ip == host(1)), "{to:?}");
        assert_eq!(d.sa_queue.stats().served, 9);
    }

    /// A memory device whose readiness is a socket's: the peer writes a byte with each frame.
    struct Signalled {
        dev: MemoryDevice,
        ready: std::os::unix::net::UnixStream,
    }
    impl Device for Signalled {
        fn send(&mut self, frame: &[u8]) -> io::Result<()> {
            self.dev.send(frame)
        }
        fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
            drain(std::os::fd::AsRawFd::as_raw_fd(&self.ready));
            self.dev.recv(buf)
        }
        fn raw_fd(&self) -> Option<RawFd> {
            Some(std::os::fd::AsRawFd::as_raw_fd(&self.ready))
        }
    }
    impl MulticastFilter for Signalled {}

    /// With a busy poll, a frame that comes while the driver looks is handled in that turn,
    /// and a turn in which nothing comes still ends when its wait is over.
    #[test]
    fn a_busy_poll_takes_what_comes_while_it_looks() {
        use std::io::Write;
        let (a, mut peer) = MemoryDevice::pair();
        let (ready, mut signal) = std::os::unix::net::UnixStream::pair().unwrap();
        ready.set_nonblocking(true).unwrap();
        let cfg = StackConfig::new([2, 0, 0, 0, 0, 2], "192.168.100.2".parse().unwrap(), 24);
        let mut d = Driver::new(Signalled { dev: a, ready }, Stack::new(cfg));
        d.set_busy_poll(Duration::from_secs(30));
        // A first frame: the turn receives, so the next one busy-polls.
        peer.send(&arp_request_from(0)).unwrap();
        signal.write_all(&[1]).unwrap();
        d.turn(Duration::ZERO).unwrap();
        assert_eq!(d.stack.counters().rx_frames, 1);
        // The next frame comes from another thread while the driver spins.
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            peer.send(&arp_request_from(1)).unwrap();
            signal.write_all(&[1]).unwrap();
            (peer, signal)
        });
        d.turn(Duration::from_secs(60)).unwrap();
        assert_eq!(d.stack.counters().rx_frames, 2, "handled in the turn that looked for it");
        let (_peer, _signal) = late.join().unwrap();
        // Nothing more comes: the spin (30 s) is cut to the turn's wait (10 ms).
        d.turn(Duration::from_millis(10)).unwrap();
        d.turn(Duration::from_millis(10)).unwrap();
        assert_eq!(d.stack.counters().rx_frames, 2);
    }

    /// A stop wakes the wait and ends `run_until` (which would otherwise run for an hour);
    /// after `set_stoppable(false)` the driver runs on (the grace period), and the stop's
    /// bytes on the self-pipe are drained.
    #[test]
    fn a_stop_ends_run_until_and_the_grace_period_runs_on() {
        use std::io::Write;
        let (a, _peer) = MemoryDevice::pair();
        let cfg = StackConfig::new([2, 0, 0, 0, 0, 2], "192.168.100.2".parse().unwrap(), 24);
        let mut d = Driver::new(a, Stack::new(cfg));
        let (rx, mut tx) = std::os::unix::net::UnixStream::pair().unwrap();
        rx.set_nonblocking(true).unwrap();
        let flag = Arc::new(AtomicBool::new(false));
        d.set_stop(std::os::fd::AsRawFd::as_raw_fd(&rx), flag.clone());
        assert!(!d.stopped());
        flag.store(true, Ordering::SeqCst);
        tx.write_all(&[1, 1, 1]).unwrap();
        assert!(d.stopped());
        assert!(!d.run_until(Duration::from_secs(3600), |_| false).unwrap());
        d.set_stoppable(false);
        assert!(!d.stopped());
        let mut turns = 0;
        assert!(d
            .run_until(Duration::from_secs(3600), |_| {
                turns += 1;
                turns > 3
            })
            .unwrap());
        d.turn(Duration::ZERO).unwrap();
        let mut b = [0u8; 8];
        assert!(std::io::Read::read(&mut &rx, &mut b).is_err(), "the self-pipe was drained");
    }
}
