//! Capture files (pcap and pcapng): `roce_net::pcap`, re-exported.
pub use roce_net::pcap::*;
