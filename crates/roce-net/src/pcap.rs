//! Reading and writing capture files: roce-decode's one pcap/pcapng implementation
//! ([`roce_decode::capture`]), re-exported for the devices here ([`crate::PcapDevice`],
//! the simulated link's capture).

pub use roce_decode::capture::{read_bytes, read_file, CaptureError, CaptureFile, CapturedFrame, PcapFileWriter};
