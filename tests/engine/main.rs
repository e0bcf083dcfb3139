//! The `engine` test binary: the sans-IO engines in process, on the simulated link with a
//! virtual clock — multicast under loss, RC through the CM and under loss, UC and SRQs
//! (through the CM, under loss), RMPP against roce-sa, and heap allocations per join+leave
//! cycle. No root, no network.
//! One binary for the area (issue 27); `cargo test --test engine rc_loss::` runs one former file.
//!
//! `allocations` installs the binary's global allocator; it counts per thread, so the other
//! tests running beside it in parallel threads do not touch its counts.

#[path = "../common/mod.rs"]
mod common;

mod allocations;
mod loss;
mod rc_cm;
mod rc_loss;
mod sa_rmpp;
mod uc_srq;
mod xrc;
