//! The `cli` test binary: the `roce` executable as a user runs it — decode, encode, demo, send,
//! hostile arguments — and the tools on raw sockets over veth pairs in network namespaces the
//! tests create (`veth`, `rping`, live `decode -i`, `send`; these need root, CI runs as root).
//! One binary for the area (issue 27); `cargo test --test cli send::` runs one former file.
//!
//! Tests here run in parallel threads of one process: every namespace gets a name of its own
//! ([`common::netns::Netns`]) and every artefact directory is named after its test.

#[path = "../common/mod.rs"]
mod common;

mod congestion;
mod decode;
mod demo;
mod encode;
mod hostile;
mod perftest;
mod pingpong;
mod rping;
mod send;
mod udp;
mod veth;
