#![no_main]
//! cargo-fuzz target `l2`: see `roce::fuzz_targets::l2` for the invariants it checks.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| roce::fuzz_targets::l2(data));
