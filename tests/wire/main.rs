//! The `wire` test binary: what roce-wire and roce-decode make of bytes, checked against
//! independent oracles (tshark, scapy), hostile input, the fuzz corpora and the shipped sample.
//! One binary for the area (issue 27): every former `tests/<file>.rs` is a module here, so
//! `cargo test --test wire oracle_tshark::` runs what `--test oracle_tshark` ran.

#[path = "../common/mod.rs"]
mod common;

mod bad_input;
mod fuzz_corpus;
mod ib_capture;
mod oracle_scapy;
mod oracle_tshark;
mod sample_capture;
