//! The `interop` test binary: a Linux kernel rxe peer in a qemu guest (see [`harness`] and
//! spec/interop.md). Needs root, qemu and `bash tests/interop/setup.sh`; `ROCE_KERNEL`
//! (6.1, 6.12 or sid) picks the guest kernel. One binary for the area (issue 27);
//! `cargo test --test interop rmpp::` runs one former file.
//!
//! The tests run in parallel threads, but guests boot one at a time: [`harness`] holds a file
//! lock for each guest's life, and names each namespace after the process and a counter.

#[path = "../common/mod.rs"]
mod common;
#[path = "../capi/debian.rs"]
#[allow(dead_code)] // (the interop tests need only the programs)
mod debian;
#[path = "../capi/expect.rs"]
#[allow(dead_code)] // (FLUSH is not asserted against the guest: spec/kernel-findings.md §6)
mod expect;
#[path = "../analyze/flow_oracle.rs"]
mod flow_oracle;
mod harness;

mod analyze;
mod capi;
mod cm;
mod fuzz;
mod guest;
mod kernel;
mod perftest;
mod pingpong;
mod rc;
mod rmpp;
mod signals;
mod udp;
