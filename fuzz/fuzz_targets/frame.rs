#![no_main]
//! cargo-fuzz target `frame`: see `roce_decode::fuzz_targets::frame` for the invariants it checks.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| roce_decode::fuzz_targets::frame(data));
