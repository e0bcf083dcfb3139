#![no_main]
//! cargo-fuzz target `datagram`: see `roce_decode::fuzz_targets::datagram` for the invariants it checks.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| roce_decode::fuzz_targets::datagram(data));
