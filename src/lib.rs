//! The `roce` tool's library side: capture files, the frame decoder that `roce decode`
//! prints, the embedded demo, the SA agent on umad and the CM tools (`udaddy`, `cmatose`).
//! The wire formats live in `roce-wire`, the engine in `roce-cm`, I/O in `roce-net`.

#![warn(missing_docs)]

pub mod capture;
pub mod cm_tools;
pub mod decode;
mod decode_l2;
mod decode_mad;
pub mod demo;
pub mod exit;
pub mod fuzz_peer;
#[doc(hidden)]
pub mod fuzz_targets;
pub mod sa_agent;
pub mod samples;
mod samples_l2;
pub mod tools;
