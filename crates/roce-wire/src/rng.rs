//! The workspace's one seeded PRNG: SplitMix64 (Steele, Lea and Flood, 2014; the seeding
//! generator of xoshiro). The engine (TIDs, communication IDs, PSNs, keys), the simulated link
//! and its fault injector, and the fuzz peer all draw from it, so a seed fixes a whole run.
//! Beside it, [`XorShift64Star`]: the generator of the mixed sample capture and of the test
//! suite's random frames, kept because their seeded outputs are recorded. Not for cryptography.

/// The golden-ratio increment that advances the state.
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The output function: two multiply-xorshift rounds over the state.
#[inline]
const fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A SplitMix64 generator: a 64-bit state advanced by a fixed increment, each output mixed
/// from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator seeded with `seed` (the reference C code's `x = seed`).
    #[inline]
    pub const fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// A generator for stream `stream` of `seed`: streams of one seed are independent, so that
    /// changing what one user draws does not shift what another draws.
    pub fn stream(seed: u64, stream: u64) -> SplitMix64 {
        let mut r = SplitMix64::new(seed ^ mix(stream.wrapping_add(0x5EED_5EED)));
        // Decorrelate neighbouring seeds.
        r.next_u64();
        r
    }

    /// One SplitMix64 step as a function: the first output of a generator seeded with `x`.
    /// Used to derive seeds from seeds.
    #[inline]
    pub const fn step(x: u64) -> u64 {
        mix(x.wrapping_add(GAMMA))
    }

    /// The next 64 bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        mix(self.state)
    }

    /// The next 64 bits of the chained form, where each output is the next seed
    /// (`x ← step(x)`): the sequence the engine has always drawn (roce-cm's TIDs, IDs and
    /// PSNs, and the runs recorded from them, depend on it).
    #[inline]
    pub fn next_chained(&mut self) -> u64 {
        self.state = Self::step(self.state);
        self.state
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p` (never for `p <= 0` or NaN, always for `p >= 1`). Draws a
    /// number only when `0 < p < 1`, so a user without randomness configured consumes none.
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 || p.is_nan() {
            false
        } else if p >= 1.0 {
            true
        } else {
            self.next_f64() < p
        }
    }

    /// Uniform in [0, n] (inclusive); `n = 0` draws nothing.
    pub fn up_to(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        match n.checked_add(1) {
            // Multiply-shift reduction (Lemire); the bias is below 2^-64 · n, irrelevant here.
            Some(range) => ((u128::from(self.next_u64()) * u128::from(range)) >> 64) as u64,
            None => self.next_u64(),
        }
    }

    /// Uniform in [0, n); `n = 0` is taken as 1 (the answer is 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.up_to((n as u64).max(1) - 1) as usize
    }
}

/// A xorshift64* generator (Vigna, 2016: Marsaglia's xorshift with shifts 12, 25, 27 and a
/// multiplied output): the generator of the mixed sample capture (roce-decode) and of the
/// test suite's random frames, whose seeded sequences it keeps. A zero state stays zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XorShift64Star {
    state: u64,
}

impl XorShift64Star {
    /// A generator seeded with `seed` (give it a nonzero one, e.g. `seed | 1`).
    #[inline]
    pub const fn new(seed: u64) -> XorShift64Star {
        XorShift64Star { state: seed }
    }

    /// One step over a bare state: advance `state` and return the output drawn from it (for a
    /// user that keeps the state as a plain `u64`).
    #[inline]
    pub fn advance(state: &mut u64) -> u64 {
        let mut x = *state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        *state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// The next 64 bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        Self::advance(&mut self.state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_reference_values() {
        // The first outputs of SplitMix64 seeded with 0, as the reference C code gives them.
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(SplitMix64::step(0), 0xE220_A839_7B1D_CDAF);
    }

    #[test]
    fn xorshift64_star_reference_values() {
        // The recurrence written out, from seed 1 (the C reference: x ^= x >> 12;
        // x ^= x << 25; x ^= x >> 27; return x * 0x2545F4914F6CDD1D).
        let mut r = XorShift64Star::new(1);
        assert_eq!(r.next_u64(), 0x47E4_CE4B_896C_DD1D);
        assert_eq!(r.next_u64(), 0xABCF_A6A8_E079_651D);
        assert_eq!(r.next_u64(), 0xB9D1_0D8F_EB73_1F57);
        let mut zero = XorShift64Star::new(0);
        assert_eq!(zero.next_u64(), 0);
    }

    #[test]
    fn chained_is_step_of_the_last_output() {
        let mut r = SplitMix64::new(42);
        let a = r.next_chained();
        assert_eq!(a, SplitMix64::step(42));
        assert_eq!(r.next_chained(), SplitMix64::step(a));
    }

    #[test]
    fn ranges_and_chances() {
        let mut r = SplitMix64::new(7);
        for _ in 0..1000 {
            assert!(r.up_to(5) <= 5);
            assert!(r.below(3) < 3);
            let f = r.next_f64();
            assert!((0.0..1.0).contains(&f));
        }
        assert!(!r.chance(0.0));
        assert!(r.chance(1.0));
        assert_eq!(r.up_to(0), 0);
        assert_eq!(r.below(0), 0);
        let hits = (0..10_000).filter(|_| r.chance(0.25)).count();
        assert!((2_300..2_700).contains(&hits), "{hits}");
        assert_ne!(SplitMix64::stream(1, 0).next_u64(), SplitMix64::stream(1, 1).next_u64());
    }
}
