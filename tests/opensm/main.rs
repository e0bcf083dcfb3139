//! The `opensm` test binary: interop with OpenSM 3.3 on a fabric simulated by ibsim
//! (tests/ibsim: `bash tests/ibsim/setup.sh` installs the tools; a missing one fails).
//! One binary for the area (issue 27); `cargo test --test opensm storm::` runs one former file.
//!
//! Every [`ibsim_harness::Fabric`] has its own ibsim socket name and directory, so the tests
//! run in parallel threads without meeting.

#[path = "../common/mod.rs"]
mod common;
#[path = "../ibsim/harness.rs"]
mod ibsim_harness;

mod differential;
mod engine;
mod rmpp;
mod sa;
mod service;
mod signals;
mod storm;
