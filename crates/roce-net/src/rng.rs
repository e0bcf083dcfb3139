//! A small deterministic PRNG (SplitMix64): the simulated link and the fault injector draw every
//! random decision from it, so a seed fixes a whole run. Not for cryptography.

/// SplitMix64 (Steele, Lea and Flood, 2014; the seeding generator of xoshiro): a 64-bit state
/// advanced by the golden-ratio increment and mixed by two multiply-xorshift rounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rng {
    state: u64,
}

impl Rng {
    /// A generator seeded with `seed`.
    pub(crate) fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// A generator for stream `stream` of `seed`: streams of one seed are independent, so that
    /// changing what one link draws does not shift what another link draws.
    pub(crate) fn stream(seed: u64, stream: u64) -> Rng {
        let mut r = Rng::new(seed ^ mix(stream.wrapping_add(0x5EED_5EED)));
        // Decorrelate neighbouring seeds.
        r.next_u64();
        r
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.state)
    }

    /// Uniform in [0, 1).
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p` (never for `p <= 0`, always for `p >= 1`). Draws a number only
    /// when `0 < p < 1`, so a link without faults consumes no randomness.
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 || p.is_nan() {
            false
        } else if p >= 1.0 {
            true
        } else {
            self.next_f64() < p
        }
    }

    /// Uniform in [0, n] (inclusive); `n = 0` draws nothing.
    pub(crate) fn up_to(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        match n.checked_add(1) {
            // Multiply-shift reduction (Lemire); the bias is below 2^-64 · n, irrelevant here.
            Some(range) => ((u128::from(self.next_u64()) * u128::from(range)) >> 64) as u64,
            None => self.next_u64(),
        }
    }

    /// Uniform in [0, n); `n` must not be 0.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        debug_assert!(n > 0);
        self.up_to(n as u64 - 1) as usize
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_reference_values() {
        // The first outputs of SplitMix64 seeded with 0 (as in the reference C code).
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn ranges_and_chances() {
        let mut r = Rng::new(7);
        for _ in 0..1000 {
            assert!(r.up_to(5) <= 5);
            assert!(r.below(3) < 3);
            let f = r.next_f64();
            assert!((0.0..1.0).contains(&f));
        }
        assert!(!r.chance(0.0));
        assert!(r.chance(1.0));
        assert_eq!(r.up_to(0), 0);
        let hits = (0..10_000).filter(|_| r.chance(0.25)).count();
        assert!((2_300..2_700).contains(&hits), "{hits}");
        assert_ne!(Rng::stream(1, 0).next_u64(), Rng::stream(1, 1).next_u64());
    }
}
