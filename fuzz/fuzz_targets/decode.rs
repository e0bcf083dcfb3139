#![no_main]
//! cargo-fuzz target `decode`: see `roce_decode::fuzz_targets::decode` for the invariants it checks.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| roce_decode::fuzz_targets::decode(data));
