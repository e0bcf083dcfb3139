//! The house's own rules, read from the sources and from spec/architecture.md: no import circle
//! in any crate, and the floors that page draws are the ones the manifests and paths show.

mod architecture;
mod module_graph;
