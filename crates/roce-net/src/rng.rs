//! The simulated link's and the fault injector's PRNG: roce-wire's SplitMix64, the
//! workspace's one seeded generator (a seed fixes a whole run). Not for cryptography.

pub(crate) use roce_wire::rng::SplitMix64 as Rng;
