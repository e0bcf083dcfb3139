#![no_main]
//! cargo-fuzz target `roundtrip`: see `roce_decode::fuzz_targets::roundtrip` for the invariants it checks.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| roce_decode::fuzz_targets::roundtrip(data));
