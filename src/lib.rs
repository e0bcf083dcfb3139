//! The `roce` tool's library side: capture files and the frame decoder that `roce decode`
//! prints. The wire formats themselves live in `roce-wire`.

pub mod capture;
pub mod cm_tools;
pub mod decode;
mod decode_l2;
mod decode_mad;
pub mod demo;
#[doc(hidden)]
pub mod fuzz_targets;
pub mod sa_agent;
pub mod samples;
mod samples_l2;
pub mod tools;
