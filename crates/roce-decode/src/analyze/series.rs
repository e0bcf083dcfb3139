//! Bounded per-flow series for the plots: memory stays flat however long a flow runs.
//!
//! [`Points`] keeps at most [`MAX_POINTS`] samples: when full it drops every other one and
//! from then on keeps one sample in two (then four, …), so the plot covers the whole flow
//! at a coarser step. [`Buckets`] sums bytes into at most [`MAX_BUCKETS`] equal time slots,
//! doubling the slot width (merging neighbours) when time runs past the last one.

/// Samples a plot keeps per series before it starts decimating.
pub const MAX_POINTS: usize = 1024;
/// Time slots a throughput series keeps.
pub const MAX_BUCKETS: usize = 256;

/// A decimating list of samples.
#[derive(Debug, Clone)]
pub struct Points<T> {
    /// The kept samples, in capture order.
    pub items: Vec<T>,
    /// Keep one sample in `stride` (a power of two, from 1).
    pub stride: u64,
    seen: u64,
}

impl<T> Default for Points<T> {
    fn default() -> Self {
        Points { items: Vec::new(), stride: 1, seen: 0 }
    }
}

impl<T> Points<T> {
    /// Offer a sample; it is kept if it falls on the current stride.
    pub fn push(&mut self, item: T) {
        if self.stride == 0 {
            self.stride = 1;
        }
        self.seen += 1;
        if !(self.seen - 1).is_multiple_of(self.stride) {
            return;
        }
        if self.items.len() == MAX_POINTS {
            let mut i = 0;
            self.items.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.stride *= 2;
            if !(self.seen - 1).is_multiple_of(self.stride) {
                return;
            }
        }
        self.items.push(item);
    }

    /// Samples offered (kept or not).
    pub fn offered(&self) -> u64 {
        self.seen
    }

    /// Whether samples were dropped to stay bounded.
    pub fn decimated(&self) -> bool {
        self.stride > 1
    }
}

/// Bytes per time slot, the slot width doubling as needed.
#[derive(Debug, Clone)]
pub struct Buckets {
    /// Slot width in seconds.
    pub width: f64,
    /// Bytes per slot, from the series' time 0 (a flow's first packet).
    pub bytes: Vec<u64>,
}

impl Default for Buckets {
    fn default() -> Self {
        // 10 µs to start: a short capture gets fine slots, a long one doubles its way up.
        Buckets { width: 1e-5, bytes: Vec::new() }
    }
}

impl Buckets {
    /// Add `n` bytes at `t` seconds since the series' time 0.
    pub fn add(&mut self, t: f64, n: u64) {
        let t = if t.is_finite() && t > 0.0 { t } else { 0.0 };
        let mut slot = (t / self.width) as usize;
        while slot >= MAX_BUCKETS {
            let merged: Vec<u64> = self.bytes.chunks(2).map(|c| c.iter().sum()).collect();
            self.bytes = merged;
            self.width *= 2.0;
            slot = (t / self.width) as usize;
        }
        if self.bytes.len() <= slot {
            self.bytes.resize(slot + 1, 0);
        }
        self.bytes[slot] += n;
    }
}

/// A latency histogram in powers of two of microseconds, plus min/max/sum.
#[derive(Debug, Clone, Default)]
pub struct Latency {
    /// Samples.
    pub count: u64,
    /// Sum in seconds.
    pub sum: f64,
    /// Smallest, seconds.
    pub min: f64,
    /// Largest, seconds.
    pub max: f64,
    /// `bins[i]`: samples in [2^(i-1), 2^i) µs (bin 0: below 1 µs).
    pub bins: [u64; 32],
}

impl Latency {
    /// Add one sample (seconds).
    pub fn add(&mut self, secs: f64) {
        let s = if secs.is_finite() && secs > 0.0 { secs } else { 0.0 };
        if self.count == 0 || s < self.min {
            self.min = s;
        }
        if s > self.max {
            self.max = s;
        }
        self.count += 1;
        self.sum += s;
        let us = (s * 1e6) as u64;
        let bin = (64 - us.leading_zeros() as usize).min(31);
        self.bins[bin] += 1;
    }

    /// Mean in seconds (0 without samples).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum / self.count as f64
        }
    }

    /// Fold another histogram in.
    pub fn merge(&mut self, o: &Latency) {
        if o.count == 0 {
            return;
        }
        if self.count == 0 || o.min < self.min {
            self.min = o.min;
        }
        self.max = self.max.max(o.max);
        self.count += o.count;
        self.sum += o.sum;
        for (a, b) in self.bins.iter_mut().zip(o.bins.iter()) {
            *a += b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_stay_bounded_and_cover_the_whole_run() {
        let mut p = Points::default();
        for i in 0..100_000u32 {
            p.push(i);
        }
        assert!(p.items.len() <= MAX_POINTS);
        assert!(p.decimated());
        assert_eq!(p.items[0], 0);
        assert!(*p.items.last().unwrap() > 99_000);
        assert!(p.items.windows(2).all(|w| w[1] - w[0] == p.stride as u32));
    }

    #[test]
    fn buckets_double_and_keep_the_sum() {
        let mut b = Buckets::default();
        let mut total = 0;
        for i in 0..10_000u64 {
            b.add(i as f64 * 1e-3, i);
            total += i;
        }
        assert!(b.bytes.len() <= MAX_BUCKETS);
        assert_eq!(b.bytes.iter().sum::<u64>(), total);
    }

    #[test]
    fn latency_bins() {
        let mut l = Latency::default();
        l.add(0.5e-6);
        l.add(3e-6);
        l.add(1.0);
        assert_eq!(l.bins[0], 1);
        assert_eq!(l.bins[2], 1);
        assert_eq!(l.count, 3);
        assert_eq!(l.max, 1.0);
    }
}
