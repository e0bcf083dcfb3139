#![no_main]
//! cargo-fuzz target `l2`: see `roce_decode::fuzz_targets::l2` for the invariants it checks.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| roce_decode::fuzz_targets::l2(data));
