//! A device wrapper that injects faults, deterministically from a seed (smoltcp's
//! `FaultInjector`).

use std::collections::VecDeque;
use std::io;

use crate::corrupt::{corrupt, CorruptScope};
use crate::device::{too_small, Device, RecvBatch};
use crate::rng::Rng;

/// The faults applied to one direction of a [`FaultDevice`]. Each frame goes through, in
/// order: drop? → corrupt one byte? → duplicate? (the copy follows right after) → delay?
#[derive(Debug, Clone, PartialEq)]
pub struct FaultConfig {
    /// Probability that a frame is dropped.
    pub drop: f64,
    /// Probability that one byte of a frame is corrupted (XOR with a random non-zero value).
    pub corrupt: f64,
    /// Which bytes corruption may hit ([`CorruptScope::IcrcCovered`] makes bad-ICRC frames).
    pub corrupt_scope: CorruptScope,
    /// Probability that a frame is held back for `delay_polls` receive polls.
    pub delay: f64,
    /// How many receive polls (calls of `recv`) a delayed frame is held: it comes out on the
    /// `delay_polls`-th poll after the one that took it in (0 counts as 1).
    pub delay_polls: u32,
    /// Probability that an ECN-capable frame (ECT(0) or ECT(1) in its IP header) is marked
    /// congestion experienced, as a congested switch marks it (the IPv4 checksum follows; the
    /// ICRC leaves the field out). Frames that are not ECN-capable draw no number.
    pub mark_ce: f64,
    /// Probability that a frame is passed on twice.
    pub duplicate: f64,
    /// Which frames the faults apply to; the others pass untouched and draw no random
    /// number, so the faults of the selected frames depend on those frames alone.
    pub frames: FaultFrames,
}

/// Which frames a [`FaultConfig`] applies to, by their BTH opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FaultFrames {
    /// Every frame, RoCEv2 or not.
    #[default]
    All,
    /// RoCEv2 requests: every BTH opcode that is not a response (SEND, WRITE, READ request,
    /// atomics, UD, CNP ...). Frames that are not RoCEv2 (ARP, IGMP, ...) pass untouched.
    Requests,
    /// RoCEv2 responses: ACKs, atomic ACKs and READ responses (RC, RD and XRC opcodes 0x0D to
    /// 0x12 of their class), what a requester waits for.
    Responses,
}

impl FaultFrames {
    /// Whether the faults apply to `frame`.
    pub fn selects(self, frame: &[u8]) -> bool {
        match self {
            FaultFrames::All => true,
            FaultFrames::Requests => response_opcode(frame) == Some(false),
            FaultFrames::Responses => response_opcode(frame) == Some(true),
        }
    }

    /// The name `--fault only=` takes.
    pub fn name(self) -> &'static str {
        match self {
            FaultFrames::All => "all",
            FaultFrames::Requests => "requests",
            FaultFrames::Responses => "responses",
        }
    }
}

/// Whether `frame` is a RoCEv2 response (`Some(true)`), another RoCEv2 frame (`Some(false)`),
/// or not RoCEv2 as `roce_wire::frame::parse_lax` sees it (`None`).
fn response_opcode(frame: &[u8]) -> Option<bool> {
    let f = roce_wire::frame::parse_lax(frame).ok()?;
    let opcode = *frame.get(f.offsets.bth)?;
    // RC, RD and XRC share the response opcodes 0x0D-0x12 of their class; UC and UD have no
    // responses, CNP (0x81) is a request of its own.
    use roce_wire::bth::{Opcode, Transport};
    let reliable = matches!(Opcode::from(opcode).transport(), Transport::Rc | Transport::Rd | Transport::Xrc);
    Some(reliable && (0x0D..=0x12).contains(&(opcode & 0x1F)))
}

impl Default for FaultConfig {
    /// No faults (`delay_polls` is 1, used only once `delay` is set).
    fn default() -> Self {
        FaultConfig {
            drop: 0.0,
            corrupt: 0.0,
            corrupt_scope: CorruptScope::Any,
            delay: 0.0,
            delay_polls: 1,
            mark_ce: 0.0,
            duplicate: 0.0,
            frames: FaultFrames::All,
        }
    }
}

/// What a [`FaultDevice`] did in one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Frames passed on (to the caller on receive, to the inner device on send), copies and
    /// released delayed frames included.
    pub passed: u64,
    /// Frames dropped.
    pub dropped: u64,
    /// Frames with one byte corrupted.
    pub corrupted: u64,
    /// Corruptions drawn but not done because the scope held no byte (a non-RoCEv2 frame under
    /// [`CorruptScope::IcrcCovered`]).
    pub corrupt_skipped: u64,
    /// Frames held back.
    pub delayed: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// ECN-capable frames marked congestion experienced.
    pub ce_marked: u64,
}

/// Wraps a device and applies [`FaultConfig`]s to what is received and what is sent.
///
/// Time, for delays, is counted in receive polls: every `recv` or `recv_batch` call is one
/// tick. Delayed
/// received frames come out of a later `recv`; delayed sent frames go to the inner device
/// during a later `recv` (or [`FaultDevice::release_all`]). A poll loop must therefore keep
/// calling `recv` while [`FaultDevice::held`] is not zero, even when the inner device's file
/// descriptor is not readable.
///
/// Batches stay batches: the frames of a `send_batch` that pass at once go to the inner
/// device in one `send_batch` (a frame it does not take is not counted as passed, and its
/// faults are drawn again when it is sent again), and a `recv_batch` takes the inner
/// device's frames with one `recv_batch`.
#[derive(Debug)]
pub struct FaultDevice<D> {
    inner: D,
    rx_config: FaultConfig,
    tx_config: FaultConfig,
    rx_stats: FaultStats,
    tx_stats: FaultStats,
    rng: Rng,
    tick: u64,
    /// Received frames held back, with the tick they are released at.
    rx_held: VecDeque<(u64, Vec<u8>)>,
    /// Received frames due, returned before anything new is read.
    rx_ready: VecDeque<Vec<u8>>,
    /// Sent frames held back, with the tick they are released at.
    tx_held: VecDeque<(u64, Vec<u8>)>,
    /// Where `recv_batch` takes the inner device's frames (the caller's batch's shape).
    rx_scratch: Option<RecvBatch>,
}

impl<D: Device> FaultDevice<D> {
    /// Wrap `inner` with no faults configured yet; `seed` fixes every random decision.
    pub fn new(inner: D, seed: u64) -> Self {
        FaultDevice {
            inner,
            rx_config: FaultConfig::default(),
            tx_config: FaultConfig::default(),
            rx_stats: FaultStats::default(),
            tx_stats: FaultStats::default(),
            rng: Rng::new(seed),
            tick: 0,
            rx_held: VecDeque::new(),
            rx_ready: VecDeque::new(),
            tx_held: VecDeque::new(),
            rx_scratch: None,
        }
    }

    /// Apply `config` to received frames.
    pub fn set_rx(&mut self, config: FaultConfig) {
        self.rx_config = config;
    }

    /// Apply `config` to sent frames.
    pub fn set_tx(&mut self, config: FaultConfig) {
        self.tx_config = config;
    }

    /// Apply `config` to both directions.
    pub fn set_both(&mut self, config: FaultConfig) {
        self.tx_config = config.clone();
        self.rx_config = config;
    }

    /// The faults applied to received frames.
    pub fn rx_config(&self) -> &FaultConfig {
        &self.rx_config
    }

    /// The faults applied to sent frames.
    pub fn tx_config(&self) -> &FaultConfig {
        &self.tx_config
    }

    /// What was done to received frames.
    pub fn rx_stats(&self) -> FaultStats {
        self.rx_stats
    }

    /// What was done to sent frames.
    pub fn tx_stats(&self) -> FaultStats {
        self.tx_stats
    }

    /// Frames held back or waiting (both directions).
    pub fn held(&self) -> usize {
        self.rx_held.len() + self.rx_ready.len() + self.tx_held.len()
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The wrapped device, mutably.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// Release every held frame now: sent ones go to the inner device, received ones are
    /// returned by the next `recv` calls.
    pub fn release_all(&mut self) -> io::Result<()> {
        self.rx_ready.extend(self.rx_held.drain(..).map(|(_, f)| f));
        while let Some((_, f)) = self.tx_held.front() {
            self.inner.send(f)?;
            self.tx_held.pop_front();
            self.tx_stats.passed += 1;
        }
        Ok(())
    }

    /// Apply `config`'s drop, corruption and duplication to `frame`: the copies to pass on
    /// (none, one or two) and whether to delay them.
    fn apply(
        rng: &mut Rng,
        config: &FaultConfig,
        stats: &mut FaultStats,
        mut frame: Vec<u8>,
    ) -> (Option<Vec<u8>>, Option<Vec<u8>>, bool) {
        if !config.frames.selects(&frame) {
            return (Some(frame), None, false);
        }
        if rng.chance(config.drop) {
            stats.dropped += 1;
            return (None, None, false);
        }
        if config.mark_ce > 0.0
            && crate::fabric::ecn_of(&frame).is_some_and(|e| e.is_ect())
            && rng.chance(config.mark_ce)
            && crate::fabric::mark_ce(&mut frame)
        {
            stats.ce_marked += 1;
        }
        if rng.chance(config.corrupt) {
            if corrupt(&mut frame, config.corrupt_scope, rng).is_some() {
                stats.corrupted += 1;
            } else {
                stats.corrupt_skipped += 1;
            }
        }
        let copy = if rng.chance(config.duplicate) {
            stats.duplicated += 1;
            Some(frame.clone())
        } else {
            None
        };
        let delay = rng.chance(config.delay);
        if delay {
            stats.delayed += 1 + u64::from(copy.is_some());
        }
        (Some(frame), copy, delay)
    }

    /// Apply the receive faults to a frame the inner device returned: what to pass on now
    /// (the frame and a copy, if duplicated), or `None` when it was dropped or held back.
    fn fault_received(&mut self, frame: Vec<u8>) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
        let (first, copy, delay) = Self::apply(&mut self.rng, &self.rx_config, &mut self.rx_stats, frame);
        let first = first?;
        if delay {
            let release = self.release_tick(&self.rx_config);
            self.rx_held.push_back((release, first));
            self.rx_held.extend(copy.map(|c| (release, c)));
            return None;
        }
        Some((first, copy))
    }

    fn release_tick(&self, config: &FaultConfig) -> u64 {
        self.tick + u64::from(config.delay_polls.max(1))
    }

    /// One receive poll: the tick advances, received frames due become ready, sent frames due
    /// go to the inner device.
    fn poll_tick(&mut self) -> io::Result<()> {
        self.tick += 1;
        while self.rx_held.front().is_some_and(|(t, _)| *t <= self.tick) {
            let (_, f) = self.rx_held.pop_front().expect("front exists");
            self.rx_ready.push_back(f);
        }
        while let Some((t, f)) = self.tx_held.front() {
            if *t > self.tick {
                break;
            }
            self.inner.send(f)?;
            self.tx_held.pop_front();
            self.tx_stats.passed += 1;
        }
        Ok(())
    }

    fn pop_ready(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let Some(f) = self.rx_ready.front() else { return Ok(None) };
        if f.len() > buf.len() {
            return Err(too_small(f.len(), buf.len()));
        }
        let f = self.rx_ready.pop_front().expect("front exists");
        buf[..f.len()].copy_from_slice(&f);
        self.rx_stats.passed += 1;
        Ok(Some(f.len()))
    }
}

impl<D: Device> Device for FaultDevice<D> {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        match self.send_batch(&[frame])? {
            1 => Ok(()),
            _ => Err(io::Error::new(io::ErrorKind::WouldBlock, "the device took no frame")),
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        self.poll_tick()?;
        if !self.rx_ready.is_empty() {
            return self.pop_ready(buf);
        }
        loop {
            let Some(n) = self.inner.recv(buf)? else { return Ok(None) };
            let Some((first, copy)) = self.fault_received(buf[..n].to_vec()) else { continue };
            // `first` has `n` bytes, so it fits.
            buf[..n].copy_from_slice(&first);
            self.rx_stats.passed += 1;
            self.rx_ready.extend(copy);
            return Ok(Some(n));
        }
    }

    #[cfg(unix)]
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        self.inner.raw_fd()
    }

    fn send_batch(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        // Every frame's fate first, remembering the state before each: what the inner device
        // does not take is undone, so that sending it again draws the same faults.
        let mut before = Vec::with_capacity(frames.len());
        let mut now: Vec<(usize, Vec<u8>)> = Vec::with_capacity(frames.len());
        for (i, frame) in frames.iter().enumerate() {
            before.push((self.rng.clone(), self.tx_stats, self.tx_held.len()));
            let (first, copy, delay) = Self::apply(&mut self.rng, &self.tx_config, &mut self.tx_stats, frame.to_vec());
            let release = self.release_tick(&self.tx_config);
            for f in first.into_iter().chain(copy) {
                if delay {
                    self.tx_held.push_back((release, f));
                } else {
                    now.push((i, f));
                }
            }
        }
        if now.is_empty() {
            return Ok(frames.len());
        }
        let refs: Vec<&[u8]> = now.iter().map(|(_, f)| f.as_slice()).collect();
        let (passed, error) = match self.inner.send_batch(&refs) {
            Ok(m) => (m.min(refs.len()), None),
            Err(e) => (0, Some(e)),
        };
        let Some(&(stopped_at, _)) = now.get(passed) else {
            self.tx_stats.passed += passed as u64;
            return Ok(frames.len());
        };
        // The inner device stopped at a copy of frame `stopped_at`: the frames before it are
        // done (dropped, held or passed); it is too when its first copy passed (only its
        // duplicate was refused, and is no longer one).
        let first_passed = passed > 0 && now[passed - 1].0 == stopped_at;
        let taken = stopped_at + usize::from(first_passed);
        if let Some((rng, stats, held)) = before.get(taken) {
            self.rng = rng.clone();
            self.tx_stats = *stats;
            self.tx_held.truncate(*held);
        }
        if first_passed {
            self.tx_stats.duplicated -= 1;
        }
        self.tx_stats.passed += passed as u64;
        match error {
            Some(e) if taken == 0 => Err(e),
            _ => Ok(taken),
        }
    }

    fn recv_batch(&mut self, batch: &mut RecvBatch) -> io::Result<usize> {
        batch.clear();
        self.poll_tick()?;
        let (slots, slot_len) = (batch.capacity(), batch.slot_len());
        // Frames due first, in order; nothing new is read while one is still waiting.
        while batch.len() < slots {
            let Some(f) = self.rx_ready.front() else { break };
            if f.len() > slot_len {
                if batch.is_empty() {
                    return Err(too_small(f.len(), slot_len));
                }
                break;
            }
            let f = self.rx_ready.pop_front().expect("front exists");
            let slot = batch.len();
            batch.slot_mut(slot)[..f.len()].copy_from_slice(&f);
            batch.push(slot, f.len());
            self.rx_stats.passed += 1;
        }
        if !self.rx_ready.is_empty() || batch.len() == slots {
            return Ok(batch.len());
        }
        // (The caller's shape, allocated once: what does not fit waits in `rx_ready`.)
        let mut scratch = match self.rx_scratch.take() {
            Some(b) if b.capacity() == slots && b.slot_len() == slot_len => b,
            _ => RecvBatch::new(slots, slot_len)?,
        };
        let got = self.inner.recv_batch(&mut scratch);
        if let Err(e) = got {
            self.rx_scratch = Some(scratch);
            return if batch.is_empty() { Err(e) } else { Ok(batch.len()) };
        }
        for f in scratch.iter() {
            let Some((first, copy)) = self.fault_received(f.to_vec()) else { continue };
            for c in std::iter::once(first).chain(copy) {
                // A frame beyond the batch's slots comes out of the next call.
                if batch.len() < slots && self.rx_ready.is_empty() {
                    let slot = batch.len();
                    batch.slot_mut(slot)[..c.len()].copy_from_slice(&c);
                    batch.push(slot, c.len());
                    self.rx_stats.passed += 1;
                } else {
                    self.rx_ready.push_back(c);
                }
            }
        }
        self.rx_scratch = Some(scratch);
        Ok(batch.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Batching, MemoryDevice};
    use roce_wire::{frame, golden, ContentError, Error};

    fn frame_n(i: u32) -> Vec<u8> {
        let mut f = vec![0u8; 64];
        f[..4].copy_from_slice(&i.to_be_bytes());
        f
    }

    fn drain(dev: &mut FaultDevice<MemoryDevice>) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = [0u8; 2048];
        let mut idle = 0;
        while idle < 10 {
            match dev.recv(&mut buf).unwrap() {
                Some(n) => {
                    out.push(buf[..n].to_vec());
                    idle = 0;
                }
                None => idle += 1,
            }
        }
        out
    }

    /// A RoCEv2 frame with BTH opcode `opcode` (the golden UC SEND ONLY, opcode rewritten).
    fn roce_with_opcode(opcode: u8) -> Vec<u8> {
        let mut f = golden::SCAPY_UC_SEND_ONLY.to_vec();
        let bth = roce_wire::frame::parse_lax(&f).unwrap().offsets.bth;
        f[bth] = opcode;
        f
    }

    #[test]
    fn frame_classes_select_requests_or_responses() {
        let (ack, read_resp, atomic_ack, write, cnp) = (0x11, 0x10, 0x12, 0x0A, 0x81);
        for (opcode, response) in [
            (ack, true),
            (read_resp, true),
            (atomic_ack, true),
            (0xB1, true),
            (write, false),
            (cnp, false),
            (0x24, false),
        ] {
            let f = roce_with_opcode(opcode);
            assert_eq!(response_opcode(&f), Some(response), "opcode {opcode:#x}");
            assert!(FaultFrames::All.selects(&f));
            assert_eq!(FaultFrames::Responses.selects(&f), response);
            assert_eq!(FaultFrames::Requests.selects(&f), !response);
        }
        let not_roce = frame_n(1);
        assert!(FaultFrames::All.selects(&not_roce));
        assert!(!FaultFrames::Requests.selects(&not_roce) && !FaultFrames::Responses.selects(&not_roce));
    }

    #[test]
    fn faults_limited_to_requests_leave_responses_and_other_frames_alone() {
        let (mut a, b) = MemoryDevice::pair();
        let mut dev = FaultDevice::new(b, 7);
        dev.set_rx(FaultConfig { drop: 1.0, frames: FaultFrames::Requests, ..FaultConfig::default() });
        let (ack, write) = (roce_with_opcode(0x11), roce_with_opcode(0x0A));
        for f in [&ack, &write, &frame_n(2), &write, &ack] {
            a.send(f).unwrap();
        }
        assert_eq!(drain(&mut dev), vec![ack.clone(), frame_n(2), ack]);
        assert_eq!(dev.rx_stats(), FaultStats { passed: 3, dropped: 2, ..FaultStats::default() });
    }

    #[test]
    fn no_faults_passes_everything() {
        let (mut a, b) = MemoryDevice::pair();
        let mut dev = FaultDevice::new(b, 1);
        for i in 0..10 {
            a.send(&frame_n(i)).unwrap();
        }
        let got = drain(&mut dev);
        assert_eq!(got, (0..10).map(frame_n).collect::<Vec<_>>());
        assert_eq!(dev.rx_stats(), FaultStats { passed: 10, ..FaultStats::default() });
    }

    #[test]
    fn rx_faults_are_counted_and_rates_hold() {
        let (mut a, b) = MemoryDevice::pair();
        let mut dev = FaultDevice::new(b, 99);
        dev.set_rx(FaultConfig { drop: 0.1, duplicate: 0.1, corrupt: 0.1, ..FaultConfig::default() });
        let n = 5_000u32;
        for i in 0..n {
            a.send(&frame_n(i)).unwrap();
        }
        let got = drain(&mut dev);
        let s = dev.rx_stats();
        assert_eq!(s.dropped + s.passed - s.duplicated, u64::from(n));
        assert_eq!(got.len() as u64, s.passed);
        for (count, what) in [(s.dropped, "dropped"), (s.duplicated, "duplicated"), (s.corrupted, "corrupted")] {
            assert!((400..600).contains(&count), "{what}: {count}");
        }
        let corrupted = got.iter().filter(|f| f[4..].iter().any(|&b| b != 0) || f.len() != 64).count();
        // A corruption may hit the 4 index bytes instead; most hit the 60 zero bytes.
        assert!(corrupted as u64 <= s.corrupted + s.duplicated && corrupted as u64 >= s.corrupted * 8 / 10);
    }

    #[test]
    fn same_seed_same_faults() {
        let run = |seed| {
            let (mut a, b) = MemoryDevice::pair();
            let mut dev = FaultDevice::new(b, seed);
            dev.set_rx(FaultConfig {
                drop: 0.2,
                corrupt: 0.2,
                duplicate: 0.2,
                delay: 0.2,
                delay_polls: 3,
                ..FaultConfig::default()
            });
            for i in 0..500 {
                a.send(&frame_n(i)).unwrap();
            }
            (drain(&mut dev), dev.rx_stats())
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5).0, run(6).0);
    }

    #[test]
    fn delay_holds_frames_for_n_polls() {
        let (mut a, b) = MemoryDevice::pair();
        let mut dev = FaultDevice::new(b, 1);
        dev.set_rx(FaultConfig { delay: 1.0, delay_polls: 3, ..FaultConfig::default() });
        a.send(&frame_n(1)).unwrap();
        let mut buf = [0u8; 128];
        assert_eq!(dev.recv(&mut buf).unwrap(), None); // poll 1 takes it in
        assert_eq!(dev.held(), 1);
        assert_eq!(dev.recv(&mut buf).unwrap(), None); // poll 2
        dev.set_rx(FaultConfig::default());
        a.send(&frame_n(2)).unwrap();
        assert_eq!(dev.recv(&mut buf).unwrap(), Some(64)); // poll 3: frame 2 overtakes
        assert_eq!(buf[..64], frame_n(2)[..]);
        assert_eq!(dev.recv(&mut buf).unwrap(), Some(64)); // poll 4 = 1 + 3: frame 1
        assert_eq!(buf[..64], frame_n(1)[..]);
        assert_eq!(dev.held(), 0);
        assert_eq!(dev.rx_stats().delayed, 1);
        assert_eq!(dev.rx_stats().passed, 2);
    }

    #[test]
    fn tx_faults_and_release() {
        let (a, b) = MemoryDevice::pair();
        let mut dev = FaultDevice::new(a, 1);
        dev.set_tx(FaultConfig { duplicate: 1.0, delay: 1.0, delay_polls: 2, ..FaultConfig::default() });
        dev.send(&frame_n(7)).unwrap();
        assert_eq!(b.pending(), 0);
        let mut buf = [0u8; 128];
        assert_eq!(dev.recv(&mut buf).unwrap(), None); // tick 1
        assert_eq!(b.pending(), 0);
        assert_eq!(dev.recv(&mut buf).unwrap(), None); // tick 2: released
        assert_eq!(b.pending(), 2);
        dev.set_tx(FaultConfig { drop: 1.0, ..FaultConfig::default() });
        dev.send(&frame_n(8)).unwrap();
        dev.set_tx(FaultConfig { delay: 1.0, delay_polls: 100, ..FaultConfig::default() });
        dev.send(&frame_n(9)).unwrap();
        dev.release_all().unwrap();
        assert_eq!(b.pending(), 3);
        let s = dev.tx_stats();
        assert_eq!((s.passed, s.dropped, s.duplicated, s.delayed), (3, 1, 1, 3));
    }

    #[test]
    fn icrc_scoped_corruption_makes_bad_icrc_frames() {
        let (mut a, b) = MemoryDevice::pair();
        let mut dev = FaultDevice::new(b, 11);
        dev.set_rx(FaultConfig { corrupt: 1.0, corrupt_scope: CorruptScope::IcrcCovered, ..FaultConfig::default() });
        for _ in 0..20 {
            a.send(&golden::SA_DELETE_MCMEMBER).unwrap();
        }
        a.send(&[0u8; 60]).unwrap(); // not RoCEv2: passed intact
        let got = drain(&mut dev);
        assert_eq!(got.len(), 21);
        for f in &got[..20] {
            assert!(matches!(frame::parse(f), Err(Error::Content { kind: ContentError::IcrcMismatch { .. }, .. })));
            assert!(!frame::parse_lax(f).unwrap().icrc_ok());
        }
        assert_eq!(got[20], [0u8; 60]);
        let s = dev.rx_stats();
        assert_eq!((s.corrupted, s.corrupt_skipped), (20, 1));
    }

    fn batch_refs(frames: &[Vec<u8>]) -> Vec<&[u8]> {
        frames.iter().map(Vec::as_slice).collect()
    }

    /// What reaches the peer when `frames` go through a FaultDevice (seed 3, `config` on
    /// send): frame by frame with `send`, or with `send_batch` in batches of 16 into a device
    /// that takes `room` frames per call (the rest sent again); and the send stats.
    fn sent_through(config: &FaultConfig, frames: &[Vec<u8>], room: Option<usize>) -> (Vec<Vec<u8>>, FaultStats) {
        let (a, b) = MemoryDevice::pair();
        let mut dev = FaultDevice::new(Batching::new(a), 3);
        dev.set_tx(config.clone());
        match room {
            None => frames.iter().for_each(|f| dev.send(f).unwrap()),
            Some(room) => {
                let mut at = 0;
                while at < frames.len() {
                    dev.inner_mut().room = room;
                    let end = frames.len().min(at + 16);
                    at += dev.send_batch(&batch_refs(&frames[at..end])).unwrap();
                }
            }
        }
        let mut peer = FaultDevice::new(b, 0);
        (drain(&mut peer), dev.tx_stats())
    }

    #[test]
    fn send_batch_is_one_inner_batch_and_counts_what_was_taken() {
        let (a, b) = MemoryDevice::pair();
        let mut inner = Batching::new(a);
        inner.room = 3;
        let mut dev = FaultDevice::new(inner, 1);
        let frames: Vec<Vec<u8>> = (0..5).map(frame_n).collect();
        assert_eq!(dev.send_batch(&batch_refs(&frames)).unwrap(), 3);
        assert_eq!(dev.send_batch(&batch_refs(&frames[3..])).unwrap_err().kind(), io::ErrorKind::WouldBlock);
        assert_eq!(dev.inner().send_batches, [5, 2]);
        assert_eq!((b.pending(), dev.tx_stats()), (3, FaultStats { passed: 3, ..FaultStats::default() }));
        // Frames all held (delayed) are taken without a call to the inner device.
        dev.set_tx(FaultConfig { delay: 1.0, delay_polls: 1, ..FaultConfig::default() });
        assert_eq!(dev.send_batch(&batch_refs(&frames[3..])).unwrap(), 2);
        assert_eq!((dev.inner().send_batches.len(), dev.held()), (2, 2));
    }

    /// Batches, whole or cut short by the inner device, put on the wire what frame-by-frame
    /// sends put there, with the same counts: a frame not taken draws its faults again.
    #[test]
    fn send_batch_faults_match_frame_by_frame() {
        let frames: Vec<Vec<u8>> = (0..300).map(frame_n).collect();
        let lossy = FaultConfig { drop: 0.3, corrupt: 0.3, ..FaultConfig::default() };
        let one_by_one = sent_through(&lossy, &frames, None);
        assert!(one_by_one.1.dropped > 50 && one_by_one.1.corrupted > 50, "{:?}", one_by_one.1);
        assert_eq!(sent_through(&lossy, &frames, Some(usize::MAX)), one_by_one);
        assert_eq!(sent_through(&lossy, &frames, Some(5)), one_by_one);
        let dup = FaultConfig { drop: 0.2, duplicate: 0.3, ..FaultConfig::default() };
        assert_eq!(sent_through(&dup, &frames, Some(usize::MAX)), sent_through(&dup, &frames, None));
    }

    /// A duplicate the inner device refuses after it took the original: the frame is taken,
    /// the copy is not counted as made.
    #[test]
    fn send_batch_refused_duplicate_is_not_counted() {
        let (a, b) = MemoryDevice::pair();
        let mut inner = Batching::new(a);
        inner.room = 3;
        let mut dev = FaultDevice::new(inner, 1);
        dev.set_tx(FaultConfig { duplicate: 1.0, ..FaultConfig::default() });
        let frames: Vec<Vec<u8>> = (0..2).map(frame_n).collect();
        assert_eq!(dev.send_batch(&batch_refs(&frames)).unwrap(), 2);
        assert_eq!(b.pending(), 3);
        let s = dev.tx_stats();
        assert_eq!((s.passed, s.duplicated), (3, 1));
    }

    #[test]
    fn recv_batch_is_one_inner_batch_and_one_poll() {
        let (mut a, b) = MemoryDevice::pair();
        let mut dev = FaultDevice::new(Batching::new(b), 1);
        dev.set_rx(FaultConfig { duplicate: 1.0, ..FaultConfig::default() });
        for i in 0..10 {
            a.send(&frame_n(i)).unwrap();
        }
        let mut batch = RecvBatch::new(8, 128).unwrap();
        let mut got = Vec::new();
        let mut calls = Vec::new();
        loop {
            let n = dev.recv_batch(&mut batch).unwrap();
            if n == 0 {
                break;
            }
            got.extend(batch.iter().map(<[u8]>::to_vec));
            calls.push((n, dev.inner().recv_batches));
        }
        // 8 read (16 copies): 8 returned, 8 waiting; then the 8 waiting without a read; then 2.
        assert_eq!(calls, [(8, 1), (8, 1), (4, 2)]);
        let want: Vec<Vec<u8>> = (0..10).flat_map(|i| [frame_n(i), frame_n(i)]).collect();
        assert_eq!(got, want);
        assert_eq!(dev.rx_stats(), FaultStats { passed: 20, duplicated: 10, ..FaultStats::default() });
        // A delay counts batch calls as polls.
        dev.set_rx(FaultConfig { delay: 1.0, delay_polls: 2, ..FaultConfig::default() });
        for i in 0..3 {
            a.send(&frame_n(i)).unwrap();
        }
        assert_eq!(dev.recv_batch(&mut batch).unwrap(), 0);
        assert_eq!(dev.recv_batch(&mut batch).unwrap(), 0);
        dev.set_rx(FaultConfig::default());
        assert_eq!(dev.recv_batch(&mut batch).unwrap(), 3);
        assert_eq!(dev.held(), 0);
        // A waiting frame longer than a slot: an error when it comes first, as for recv.
        dev.set_rx(FaultConfig { duplicate: 1.0, ..FaultConfig::default() });
        a.send(&[7; 100]).unwrap();
        let mut small = RecvBatch::new(1, 100).unwrap();
        assert_eq!(dev.recv_batch(&mut small).unwrap(), 1);
        assert_eq!(
            dev.recv_batch(&mut RecvBatch::new(1, 10).unwrap()).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(dev.recv_batch(&mut small).unwrap(), 1);
    }

    /// Received batches see the faults frame-by-frame receives see (no delay: ticks differ).
    #[test]
    fn recv_batch_faults_match_frame_by_frame() {
        let lossy = FaultConfig { drop: 0.2, corrupt: 0.2, duplicate: 0.2, ..FaultConfig::default() };
        let run = |batched: bool| {
            let (mut a, b) = MemoryDevice::pair();
            let mut dev = FaultDevice::new(b, 9);
            dev.set_rx(lossy.clone());
            for i in 0..300 {
                a.send(&frame_n(i)).unwrap();
            }
            let got = if batched {
                let mut batch = RecvBatch::new(7, 128).unwrap();
                let mut got = Vec::new();
                while dev.recv_batch(&mut batch).unwrap() > 0 {
                    got.extend(batch.iter().map(<[u8]>::to_vec));
                }
                got
            } else {
                drain(&mut dev)
            };
            (got, dev.rx_stats())
        };
        assert_eq!(run(true), run(false));
    }

    #[test]
    fn small_buffer_keeps_a_ready_frame() {
        let (mut a, b) = MemoryDevice::pair();
        let mut dev = FaultDevice::new(b, 1);
        dev.set_rx(FaultConfig { duplicate: 1.0, ..FaultConfig::default() });
        a.send(&[1; 100]).unwrap();
        let mut buf = [0u8; 100];
        assert_eq!(dev.recv(&mut buf).unwrap(), Some(100));
        assert!(dev.recv(&mut [0u8; 10]).is_err());
        assert_eq!(dev.recv(&mut buf).unwrap(), Some(100));
    }
}
