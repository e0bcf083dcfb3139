//! The `roce` tool's library side: the commands (the embedded demo, the SA agent on umad,
//! the CM tools `udaddy` and `cmatose`, …). The wire formats live in `roce-wire`, the engine
//! in `roce-cm`, I/O in `roce-net`, capture files and the decoder in `roce-decode`.

#![warn(missing_docs)]

pub mod bench_decode;
pub mod cli;
pub mod cm_tools;
pub mod decode_cli;
pub mod demo;
pub mod encode;
pub mod fuzz_peer;
pub mod plumbing;
pub mod rc_tools;
pub mod rping;
pub mod sa_agent;
pub mod sa_service;
pub mod send;
