//! The `roce` tool's library side: capture files, the frame decoder that `roce decode`
//! prints, the embedded demo, the SA agent on umad and the CM tools (`udaddy`, `cmatose`).
//! The wire formats live in `roce-wire`, the engine in `roce-cm`, I/O in `roce-net`.

#![warn(missing_docs)]

pub mod bench_decode;
pub mod capture;
pub mod cli;
pub mod cm_tools;
pub mod decode;
pub mod decode_cli;
mod decode_l2;
mod decode_mad;
pub mod demo;
pub mod encode;
pub mod exit;
pub mod fuzz_peer;
#[doc(hidden)]
pub mod fuzz_targets;
pub mod json_out;
pub mod out;
pub mod rc_tools;
pub mod rping;
pub mod sa_agent;
pub mod sa_service;
pub mod samples;
mod samples_l2;
pub mod samples_mixed;
pub mod send;
pub mod shutdown;
pub mod tools;
