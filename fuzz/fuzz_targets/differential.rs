#![no_main]
//! cargo-fuzz target `differential`: see `roce_decode::fuzz_targets::differential` for the invariants
//! it checks (strict parser, zero-copy view and rxe acceptance predictor agree).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| roce_decode::fuzz_targets::differential(data));
