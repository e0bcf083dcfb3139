//! Reading and writing capture files (pcap and pcapng) through the pcap-file crate.
//!
//! The `roce` package re-exports this module as `roce::capture`.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::DataLink;

/// One captured frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedFrame {
    /// Capture timestamp since the epoch.
    pub timestamp: Duration,
    /// Link type of the interface it was captured on (1 = Ethernet).
    pub linktype: u32,
    /// The captured bytes.
    pub data: Vec<u8>,
    /// The frame's length on the wire (may exceed `data.len()` when the capture was cut).
    pub orig_len: u32,
}

/// Why a capture file could not be read.
#[derive(Debug)]
pub struct CaptureError(pub String);

impl std::fmt::Display for CaptureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CaptureError {}

/// Read every frame of a pcap or pcapng file (the format is recognised by its magic number).
pub fn read_file(path: &Path) -> Result<Vec<CapturedFrame>, CaptureError> {
    let mut data = Vec::new();
    File::open(path)
        .and_then(|f| BufReader::new(f).read_to_end(&mut data))
        .map_err(|e| CaptureError(format!("{}: {e}", path.display())))?;
    read_bytes(&data).map_err(|e| CaptureError(format!("{}: {e}", path.display())))
}

/// Read every frame of a pcap or pcapng image held in memory.
pub fn read_bytes(data: &[u8]) -> Result<Vec<CapturedFrame>, CaptureError> {
    if data.len() < 4 {
        return Err(CaptureError(format!("not a capture file: {} bytes", data.len())));
    }
    let magic = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
    let mut frames = Vec::new();
    if magic == 0x0A0D_0D0A {
        let mut r = PcapNgReader::new(data).map_err(|e| CaptureError(format!("bad pcapng: {e}")))?;
        // Link types by interface id, from the Interface Description Blocks seen so far.
        let mut linktypes: Vec<u32> = Vec::new();
        while let Some(block) = r.next_block() {
            let block =
                block.map_err(|e| CaptureError(format!("bad pcapng block after {} frames: {e}", frames.len())))?;
            match block {
                Block::EnhancedPacket(p) => {
                    let linktype = linktypes.get(p.interface_id as usize).copied().unwrap_or(1);
                    frames.push(CapturedFrame {
                        timestamp: p.timestamp,
                        linktype,
                        data: p.data.into_owned(),
                        orig_len: p.original_len,
                    });
                }
                Block::SimplePacket(p) => {
                    let linktype = linktypes.first().copied().unwrap_or(1);
                    frames.push(CapturedFrame {
                        timestamp: Duration::ZERO,
                        linktype,
                        orig_len: p.original_len,
                        data: p.data.into_owned(),
                    });
                }
                Block::InterfaceDescription(i) => linktypes.push(u32::from(i.linktype)),
                _ => {}
            }
        }
    } else {
        let mut r = PcapReader::new(data).map_err(|e| CaptureError(format!("not a pcap or pcapng file: {e}")))?;
        let linktype = u32::from(r.header().datalink);
        while let Some(p) = r.next_packet() {
            let p = p.map_err(|e| CaptureError(format!("bad pcap record after {} frames: {e}", frames.len())))?;
            frames.push(CapturedFrame {
                timestamp: p.timestamp,
                linktype,
                orig_len: p.orig_len,
                data: p.data.into_owned(),
            });
        }
    }
    Ok(frames)
}

/// A pcap (not pcapng) writer for Ethernet frames, as tcpdump writes them.
pub struct PcapFileWriter<W: Write> {
    inner: PcapWriter<W>,
}

impl PcapFileWriter<BufWriter<File>> {
    /// Create (truncate) a pcap file.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let f = BufWriter::new(File::create(path)?);
        PcapFileWriter::new(f)
    }
}

impl<W: Write> PcapFileWriter<W> {
    /// Write a pcap header for Ethernet frames with nanosecond timestamps.
    pub fn new(w: W) -> std::io::Result<Self> {
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            ts_resolution: pcap_file::TsResolution::NanoSecond,
            ..Default::default()
        };
        let inner = PcapWriter::with_header(w, header).map_err(std::io::Error::other)?;
        Ok(PcapFileWriter { inner })
    }

    /// Append one frame.
    pub fn write(&mut self, timestamp: Duration, frame: &[u8]) -> std::io::Result<()> {
        let len = u32::try_from(frame.len()).map_err(std::io::Error::other)?;
        self.inner.write_packet(&PcapPacket::new(timestamp, len, frame)).map(|_| ()).map_err(std::io::Error::other)
    }

    /// Flush (ignoring a flush error: use [`PcapFileWriter::finish`] to see it) and return the
    /// underlying writer.
    pub fn into_inner(self) -> W {
        let mut w = self.inner.into_writer();
        let _ = w.flush();
        w
    }

    /// Flush and return the underlying writer.
    pub fn finish(self) -> std::io::Result<W> {
        let mut w = self.inner.into_writer();
        w.flush()?;
        Ok(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcap_round_trip_in_memory() {
        let mut w = PcapFileWriter::new(Vec::new()).unwrap();
        w.write(Duration::from_millis(5), &[1, 2, 3]).unwrap();
        w.write(Duration::from_millis(6), &roce_wire::golden::CX4_CNP).unwrap();
        let bytes = w.into_inner();
        let frames = read_bytes(&bytes).unwrap();
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0].data, [1, 2, 3]);
        assert_eq!(frames[1].timestamp, Duration::from_millis(6));
        assert_eq!(frames[1].linktype, 1);
        assert!(read_bytes(b"nope").is_err());
        assert!(read_bytes(&bytes[..30]).is_err() || read_bytes(&bytes[..30]).unwrap().is_empty());
    }
}
