//! The capture decoder of the `roce` tool as a library: capture files ([`capture`]: a
//! streaming pcap/pcapng reader and a pcap writer), the frame decoder that `roce decode`
//! prints ([`decode`]: one summary line and one JSON object per frame, the JSON of
//! spec/decode.schema.json, built by [`json_out`]), the way back from that JSON to frame bytes
//! ([`encode`]), the analysis of a whole capture that `roce analyze` reports ([`analyze`]), and
//! sample frames ([`samples`], [`samples_mixed`], [`samples_flows`]).
//!
//! It reads bytes and writes bytes: no sockets, no command line (the `roce` binary adds both).
//!
//! ```
//! use roce_decode::capture::{read_bytes, PcapFileWriter};
//! use roce_decode::decode::decode_captured;
//! use roce_decode::samples::sample_frames;
//! use std::time::Duration;
//!
//! // Write the sample frames to an in-memory pcap, read it back, decode each frame.
//! let mut w = PcapFileWriter::new(Vec::new()).unwrap();
//! for (i, s) in sample_frames().iter().enumerate() {
//!     w.write(Duration::from_millis(i as u64), &s.bytes).unwrap();
//! }
//! let frames = read_bytes(&w.finish().unwrap()).unwrap();
//! let first = decode_captured(&frames[0]);
//! assert!(first.summary.starts_with("ARP"), "{}", first.summary);
//! assert_eq!(first.json["kind"], "arp");
//! ```

#![warn(missing_docs)]

pub mod analyze;
pub mod capture;
pub mod decode;
pub mod encode;
#[cfg(feature = "fuzz")]
#[doc(hidden)]
pub mod fuzz_targets;
pub mod json_out;
pub mod samples;
pub mod samples_flows;
pub mod samples_ib;
pub mod samples_mixed;
