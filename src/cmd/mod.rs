//! The commands of `roce`, one file each and all of one shape: `pub struct Args` (clap; its
//! doc comment is the command's help) and `pub fn run(args: Args) -> ExitCode`. A command's
//! own code lives in its file; what several commands share lives in [`crate::plumbing`], so
//! that no command imports another.

pub mod analyze;
pub mod bench;
pub mod cmatose;
pub mod decode;
pub mod demo;
pub mod encode;
pub mod exec;
pub mod fuzz_peer;
pub mod mckey;
pub mod perftest;
pub mod pingpong;
pub mod rping;
pub mod sa_agent;
pub mod sa_query;
pub mod sa_server;
pub mod send;
pub mod udaddy;
