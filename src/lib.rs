//! The `roce` tool's library side: one module per command ([`cmd`]) and what they share
//! ([`plumbing`]). The wire formats live in `roce-wire`, the engine in `roce-cm`, I/O in
//! `roce-net`, capture files and the decoder in `roce-decode`.
//!
//! Modules depend one way only: `main.rs` ▶ [`cmd`] ▶ [`plumbing`]; no command uses another,
//! and inside `plumbing` each module uses only those listed before it in its docs.

#![warn(missing_docs)]

pub mod cmd;
pub mod plumbing;

/// The embedded demo as a library (the tests run its simulation): `roce::demo` is
/// [`cmd::demo`].
pub use cmd::demo;
/// The fuzz peer's generator and delta debugging, which the interop tests reuse:
/// `roce::fuzz_peer` is [`cmd::fuzz_peer`].
pub use cmd::fuzz_peer;
