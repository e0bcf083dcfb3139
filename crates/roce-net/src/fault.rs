//! A device wrapper that injects faults, deterministically from a seed (smoltcp's
//! `FaultInjector`).

use std::collections::VecDeque;
use std::io;

use crate::corrupt::{corrupt, CorruptScope};
use crate::device::{too_small, Device};
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
    /// Probability that a frame is passed on twice.
    pub duplicate: f64,
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
            duplicate: 0.0,
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
}

/// Wraps a device and applies [`FaultConfig`]s to what is received and what is sent.
///
/// Time, for delays, is counted in receive polls: every `recv` call is one tick. Delayed
/// received frames come out of a later `recv`; delayed sent frames go to the inner device
/// during a later `recv` (or [`FaultDevice::release_all`]). A poll loop must therefore keep
/// calling `recv` while [`FaultDevice::held`] is not zero, even when the inner device's file
/// descriptor is not readable.
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
        if rng.chance(config.drop) {
            stats.dropped += 1;
            return (None, None, false);
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

    fn release_tick(&self, config: &FaultConfig) -> u64 {
        self.tick + u64::from(config.delay_polls.max(1))
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
        let (first, copy, delay) = Self::apply(&mut self.rng, &self.tx_config, &mut self.tx_stats, frame.to_vec());
        let release = self.release_tick(&self.tx_config);
        for f in first.into_iter().chain(copy) {
            if delay {
                self.tx_held.push_back((release, f));
            } else {
                self.inner.send(&f)?;
                self.tx_stats.passed += 1;
            }
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
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
        if !self.rx_ready.is_empty() {
            return self.pop_ready(buf);
        }
        loop {
            let Some(n) = self.inner.recv(buf)? else { return Ok(None) };
            let (first, copy, delay) =
                Self::apply(&mut self.rng, &self.rx_config, &mut self.rx_stats, buf[..n].to_vec());
            let Some(first) = first else { continue };
            if delay {
                let release = self.release_tick(&self.rx_config);
                self.rx_held.push_back((release, first));
                self.rx_held.extend(copy.map(|c| (release, c)));
                continue;
            }
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemoryDevice;
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
