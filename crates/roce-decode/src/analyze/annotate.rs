//! `--annotate`: the capture written back as pcapng, each frame with an `opt_comment`
//! (Wireshark shows it as `frame.comment`) where the analysis has something to say.
//!
//! The writer is the minimum of the pcapng spec (draft-ietf-opsawg-pcapng): one Section
//! Header Block, one Interface Description Block per link type met (nanosecond
//! timestamps, `if_tsresol` = 9), one Enhanced Packet Block per frame, little-endian.

use std::collections::HashMap;
use std::io::{self, Write};
use std::time::Duration;

const SHB: u32 = 0x0A0D_0D0A;
const IDB: u32 = 0x0000_0001;
const EPB: u32 = 0x0000_0006;
const OPT_END: u16 = 0;
const OPT_COMMENT: u16 = 1;
const IF_TSRESOL: u16 = 9;

/// A pcapng writer with per-frame comments.
pub struct PcapngWriter<W: Write> {
    out: W,
    interfaces: HashMap<u32, u32>,
    buf: Vec<u8>,
}

fn pad4(n: usize) -> usize {
    (4 - n % 4) % 4
}

impl<W: Write> PcapngWriter<W> {
    /// Start a section on `out`.
    pub fn new(mut out: W) -> io::Result<Self> {
        let mut b = Vec::with_capacity(28);
        b.extend_from_slice(&SHB.to_le_bytes());
        b.extend_from_slice(&28u32.to_le_bytes());
        b.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&u64::MAX.to_le_bytes()); // section length unknown
        b.extend_from_slice(&28u32.to_le_bytes());
        out.write_all(&b)?;
        Ok(PcapngWriter { out, interfaces: HashMap::new(), buf: Vec::new() })
    }

    fn interface(&mut self, linktype: u32) -> io::Result<u32> {
        if let Some(&id) = self.interfaces.get(&linktype) {
            return Ok(id);
        }
        let id = self.interfaces.len() as u32;
        let mut b = Vec::with_capacity(32);
        b.extend_from_slice(&IDB.to_le_bytes());
        b.extend_from_slice(&32u32.to_le_bytes());
        // LINKTYPE values fit 16 bits in an IDB.
        b.extend_from_slice(&(linktype as u16).to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes()); // no snap length
        b.extend_from_slice(&IF_TSRESOL.to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&[9, 0, 0, 0]);
        b.extend_from_slice(&OPT_END.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&32u32.to_le_bytes());
        self.out.write_all(&b)?;
        self.interfaces.insert(linktype, id);
        Ok(id)
    }

    /// Write one frame, with `comment` unless it is empty.
    pub fn write(
        &mut self,
        timestamp: Duration,
        linktype: u32,
        orig_len: u32,
        data: &[u8],
        comment: &str,
    ) -> io::Result<()> {
        let id = self.interface(linktype)?;
        let ns = timestamp.as_nanos() as u64;
        let b = &mut self.buf;
        b.clear();
        b.extend_from_slice(&EPB.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes()); // length, set below
        b.extend_from_slice(&id.to_le_bytes());
        b.extend_from_slice(&((ns >> 32) as u32).to_le_bytes());
        b.extend_from_slice(&(ns as u32).to_le_bytes());
        b.extend_from_slice(&(data.len() as u32).to_le_bytes());
        b.extend_from_slice(&orig_len.max(data.len() as u32).to_le_bytes());
        b.extend_from_slice(data);
        b.extend(std::iter::repeat_n(0, pad4(data.len())));
        if !comment.is_empty() {
            // An option holds at most 65535 bytes: cut at a character boundary.
            let mut end = comment.len().min(65_532);
            while !comment.is_char_boundary(end) {
                end -= 1;
            }
            let c = &comment.as_bytes()[..end];
            b.extend_from_slice(&OPT_COMMENT.to_le_bytes());
            b.extend_from_slice(&(c.len() as u16).to_le_bytes());
            b.extend_from_slice(c);
            b.extend(std::iter::repeat_n(0, pad4(c.len())));
            b.extend_from_slice(&OPT_END.to_le_bytes());
            b.extend_from_slice(&0u16.to_le_bytes());
        }
        let total = b.len() as u32 + 4;
        b.extend_from_slice(&total.to_le_bytes());
        b[4..8].copy_from_slice(&total.to_le_bytes());
        self.out.write_all(b)
    }

    /// Flush and hand back the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::Reader;

    #[test]
    fn our_reader_reads_it_back() {
        let mut w = PcapngWriter::new(Vec::new()).unwrap();
        w.write(Duration::new(5, 7), 1, 60, &[1, 2, 3], "hello").unwrap();
        w.write(Duration::new(6, 0), 101, 5, &[4, 5, 6, 7, 8], "").unwrap();
        let bytes = w.finish().unwrap();
        let mut r = Reader::new(&bytes[..]).unwrap();
        let (rec, d) = r.next_frame().unwrap().unwrap();
        assert_eq!((rec.timestamp, rec.linktype, rec.orig_len, d), (Duration::new(5, 7), 1, 60, &[1u8, 2, 3][..]));
        let (rec, d) = r.next_frame().unwrap().unwrap();
        assert_eq!((rec.linktype, d.len()), (101, 5));
        assert!(r.next_frame().unwrap().is_none());
    }
}
