//! Capture files, the one implementation of pcap and pcapng in the workspace (roce-net's
//! `pcap` module and its `PcapDevice` use it). [`Reader`] streams pcap (both byte orders,
//! micro- and nanosecond) and pcapng (any number of sections and interfaces, each with its own
//! link type and timestamp resolution) one record at a time from any [`Read`], so that
//! `roce decode` holds one frame in memory whatever the file size, and reports a capture cut
//! short with the byte offset where it ends. [`read_file`] and [`read_bytes`] collect what it
//! reads; [`PcapFileWriter`] writes pcap (through the pcap-file crate).

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
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

/// Read every frame of a pcap or pcapng image held in memory, with [`Reader`].
pub fn read_bytes(data: &[u8]) -> Result<Vec<CapturedFrame>, CaptureError> {
    let mut r = Reader::new(data).map_err(|e| CaptureError(e.to_string()))?;
    let mut frames = Vec::new();
    loop {
        match r.next_frame() {
            Ok(Some((rec, bytes))) => frames.push(CapturedFrame {
                timestamp: rec.timestamp,
                linktype: rec.linktype,
                data: bytes.to_vec(),
                orig_len: rec.orig_len,
            }),
            Ok(None) => return Ok(frames),
            Err(e) => return Err(CaptureError(format!("after {} frames: {e}", frames.len()))),
        }
    }
}

/// A pcap (not pcapng) writer for Ethernet frames, as tcpdump writes them.
pub struct PcapFileWriter<W: Write> {
    inner: PcapWriter<W>,
    /// The file under `inner`, when it is one ([`PcapFileWriter::create`]): what
    /// [`PcapFileWriter::flush`] reaches.
    file: Option<CaptureFile>,
}

/// A buffered capture file that can be flushed from outside the pcap writer that owns it:
/// a process that is killed keeps what was flushed, so a long-running port flushes whenever it
/// goes idle (the drop-in library's stack thread before it sleeps).
#[derive(Clone, Debug)]
pub struct CaptureFile(std::sync::Arc<std::sync::Mutex<BufWriter<File>>>);

impl Write for CaptureFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().map_err(|_| io::Error::other("capture file poisoned"))?.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.lock().map_err(|_| io::Error::other("capture file poisoned"))?.write_all(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.lock().map_err(|_| io::Error::other("capture file poisoned"))?.flush()
    }
}

impl PcapFileWriter<CaptureFile> {
    /// Create (truncate) a pcap file.
    pub fn create(path: &Path) -> io::Result<Self> {
        let f = CaptureFile(std::sync::Arc::new(std::sync::Mutex::new(BufWriter::new(File::create(path)?))));
        let mut w = PcapFileWriter::new(f.clone())?;
        w.file = Some(f);
        Ok(w)
    }
}

impl<W: Write> PcapFileWriter<W> {
    /// Write a pcap header for Ethernet frames with nanosecond timestamps.
    pub fn new(w: W) -> io::Result<Self> {
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            ts_resolution: pcap_file::TsResolution::NanoSecond,
            ..Default::default()
        };
        let inner = PcapWriter::with_header(w, header).map_err(io::Error::other)?;
        Ok(PcapFileWriter { inner, file: None })
    }

    /// Write out the frames buffered so far (a file made by [`PcapFileWriter::create`]; other
    /// writers are flushed by [`PcapFileWriter::finish`]).
    pub fn flush(&mut self) -> io::Result<()> {
        match &mut self.file {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }

    /// Append one frame.
    pub fn write(&mut self, timestamp: Duration, frame: &[u8]) -> io::Result<()> {
        let len = u32::try_from(frame.len()).map_err(io::Error::other)?;
        self.inner.write_packet(&PcapPacket::new(timestamp, len, frame)).map(|_| ()).map_err(io::Error::other)
    }

    /// Flush (ignoring a flush error: use [`PcapFileWriter::finish`] to see it) and return the
    /// underlying writer.
    pub fn into_inner(self) -> W {
        let mut w = self.inner.into_writer();
        let _ = w.flush();
        w
    }

    /// Flush and return the underlying writer.
    pub fn finish(self) -> io::Result<W> {
        let mut w = self.inner.into_writer();
        w.flush()?;
        Ok(w)
    }
}

/// Link types (LINKTYPE_* of the tcpdump.org registry) that `roce decode` dissects.
pub mod linktype {
    /// Ethernet (LINKTYPE_ETHERNET).
    pub const ETHERNET: u32 = 1;
    /// Raw IP, version in the first nibble (LINKTYPE_RAW; DLT 12/14 on some systems).
    pub const RAW: u32 = 101;
    /// Linux cooked capture v1 (`tcpdump -i any` before libpcap 1.10).
    pub const LINUX_SLL: u32 = 113;
    /// Raw IPv4 (LINKTYPE_IPV4).
    pub const IPV4: u32 = 228;
    /// Raw IPv6 (LINKTYPE_IPV6).
    pub const IPV6: u32 = 229;
    /// Linux cooked capture v2 (`tcpdump -i any`, libpcap ≥ 1.10).
    pub const LINUX_SLL2: u32 = 276;
    /// Endace ERF records (LINKTYPE_ERF): ibdump's native InfiniBand captures (record type 21).
    pub const ERF: u32 = 197;
    /// Native InfiniBand packets from the LRH on (LINKTYPE_INFINIBAND).
    pub const INFINIBAND: u32 = 247;
}

/// The largest record or block accepted: larger is a corrupt length field, not a frame (a
/// 64 KiB jumbo frame fits many times over; libpcap's own bound is 256 KiB).
pub const MAX_RECORD: usize = 16 << 20;

/// Where a frame came from and what the capture says about it (the bytes are returned beside).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Capture timestamp since the epoch.
    pub timestamp: Duration,
    /// Link type of the interface it was captured on.
    pub linktype: u32,
    /// Interface index in a pcapng section (0 in pcap).
    pub interface: u32,
    /// The frame's length on the wire (may exceed the captured bytes: snap length).
    pub orig_len: u32,
    /// Byte offset of the record (pcap) or block (pcapng) in the input.
    pub offset: u64,
}

/// Why a capture could not be read (further).
#[derive(Debug)]
pub enum ReadError {
    /// The input could not be read.
    Io(io::Error),
    /// The input does not start like pcap or pcapng.
    NotCapture(String),
    /// The input ends inside a header, record or block: every complete frame before it was
    /// returned.
    Truncated {
        /// Byte offset where the incomplete record or block starts.
        offset: u64,
        /// What was being read.
        what: &'static str,
        /// Bytes it needed.
        needed: u64,
        /// Bytes there were.
        had: u64,
    },
    /// A record or block whose fields are impossible (a length past [`MAX_RECORD`], an unknown
    /// interface, a block length that is not a multiple of 4).
    Bad {
        /// Byte offset of the record or block.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::NotCapture(s) => write!(f, "not a pcap or pcapng file: {s}"),
            ReadError::Truncated { offset, what, needed, had } => write!(
                f,
                "the capture was cut short in the middle of a {what} at byte offset {offset} \
                 ({needed} bytes needed, {had} present)"
            ),
            ReadError::Bad { offset, reason } => write!(f, "bad capture at byte offset {offset}: {reason}"),
        }
    }
}

impl std::error::Error for ReadError {}

#[derive(Debug, Clone, Copy)]
struct Iface {
    linktype: u32,
    /// Timestamp unit: (base, exponent): 10^-e or 2^-e seconds.
    pow2: bool,
    exp: u8,
    snaplen: u32,
}

impl Iface {
    fn duration(&self, units: u64) -> Duration {
        let ns: u128 = if self.pow2 {
            (u128::from(units) * 1_000_000_000) >> self.exp.min(127)
        } else if self.exp <= 9 {
            u128::from(units) * 10u128.pow(9 - u32::from(self.exp))
        } else {
            u128::from(units) / 10u128.pow(u32::from(self.exp.min(38)) - 9)
        };
        let ns = u64::try_from(ns).unwrap_or(u64::MAX);
        Duration::from_nanos(ns)
    }
}

enum Format {
    Pcap { nanos: bool, linktype: u32 },
    PcapNg { ifaces: Vec<Iface> },
}

/// A streaming pcap/pcapng reader: one record in memory at a time.
pub struct Reader<R: Read> {
    r: R,
    pos: u64,
    big_endian: bool,
    format: Format,
    buf: Vec<u8>,
    /// Where the current frame's bytes lie in `buf`.
    data: (usize, usize),
}

/// Read up to `buf.len()` bytes; returns how many (fewer only at the end of the input).
fn fill(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl<R: Read> Reader<R> {
    /// Read the file header (pcap) or first section header (pcapng).
    pub fn new(mut r: R) -> Result<Self, ReadError> {
        let mut head = [0u8; 24];
        let n = fill(&mut r, &mut head[..4]).map_err(ReadError::Io)?;
        if n < 4 {
            return Err(ReadError::NotCapture(format!("{n} bytes")));
        }
        let magic = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let mut me = Reader {
            r,
            pos: 4,
            big_endian: false,
            format: Format::Pcap { nanos: false, linktype: 1 },
            buf: Vec::new(),
            data: (0, 0),
        };
        match magic {
            0xa1b2_c3d4 | 0xa1b2_3c4d | 0xd4c3_b2a1 | 0x4d3c_b2a1 => {
                me.big_endian = matches!(magic, 0xd4c3_b2a1 | 0x4d3c_b2a1);
                let nanos = matches!(magic, 0xa1b2_3c4d | 0x4d3c_b2a1);
                let n = fill(&mut me.r, &mut head[4..]).map_err(ReadError::Io)?;
                if n < 20 {
                    return Err(ReadError::Truncated {
                        offset: 0,
                        what: "pcap file header",
                        needed: 24,
                        had: 4 + n as u64,
                    });
                }
                me.pos = 24;
                // The link type's upper bits hold the FCS length flags (pcap spec §4).
                let linktype = me.u32(&head[20..24]) & 0x0fff_ffff;
                me.format = Format::Pcap { nanos, linktype };
            }
            0x0a0d_0d0a => {
                me.format = Format::PcapNg { ifaces: Vec::new() };
                me.section_header_with(0, [head[0], head[1], head[2], head[3]], &[])?;
            }
            _ => return Err(ReadError::NotCapture(format!("magic number 0x{magic:08x}"))),
        }
        Ok(me)
    }

    fn u32(&self, b: &[u8]) -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        if self.big_endian {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    }

    fn u16(&self, b: &[u8]) -> u16 {
        if self.big_endian {
            u16::from_be_bytes([b[0], b[1]])
        } else {
            u16::from_le_bytes([b[0], b[1]])
        }
    }

    /// Read exactly `n` bytes into `buf[at..]`, or say where the input was cut short.
    fn exact(&mut self, at: usize, n: usize, start: u64, what: &'static str, needed: u64) -> Result<(), ReadError> {
        // Grow only: zeroing the buffer for every record costs as much as reading it.
        if self.buf.len() < at + n {
            self.buf.resize(at + n, 0);
        }
        let got = fill(&mut self.r, &mut self.buf[at..at + n]).map_err(ReadError::Io)?;
        self.pos += got as u64;
        if got < n {
            let had = self.pos - start;
            return Err(ReadError::Truncated { offset: start, what, needed, had });
        }
        Ok(())
    }

    /// The next frame and its bytes, `None` at a clean end of the input.
    pub fn next_frame(&mut self) -> Result<Option<(Record, &[u8])>, ReadError> {
        match self.format {
            Format::Pcap { nanos, linktype } => self.next_pcap(nanos, linktype),
            Format::PcapNg { .. } => self.next_pcapng(),
        }
    }

    fn next_pcap(&mut self, nanos: bool, linktype: u32) -> Result<Option<(Record, &[u8])>, ReadError> {
        let start = self.pos;
        let mut h = [0u8; 16];
        let n = fill(&mut self.r, &mut h).map_err(ReadError::Io)?;
        self.pos += n as u64;
        if n == 0 {
            return Ok(None);
        }
        if n < 16 {
            return Err(ReadError::Truncated { offset: start, what: "pcap record header", needed: 16, had: n as u64 });
        }
        let (sec, frac, incl, orig) =
            (self.u32(&h[0..4]), self.u32(&h[4..8]), self.u32(&h[8..12]), self.u32(&h[12..16]));
        let incl = incl as usize;
        if incl > MAX_RECORD {
            return Err(ReadError::Bad {
                offset: start,
                reason: format!("record length {incl} exceeds the bound of {MAX_RECORD} bytes"),
            });
        }
        self.exact(0, incl, start, "pcap record", 16 + incl as u64)?;
        let sub = if nanos { frac } else { frac.saturating_mul(1000) };
        let timestamp = Duration::new(u64::from(sec), 0) + Duration::from_nanos(u64::from(sub));
        let rec = Record { timestamp, linktype, interface: 0, orig_len: orig, offset: start };
        Ok(Some((rec, &self.buf[..incl])))
    }

    fn next_pcapng(&mut self) -> Result<Option<(Record, &[u8])>, ReadError> {
        loop {
            let start = self.pos;
            let mut h = [0u8; 8];
            let n = fill(&mut self.r, &mut h).map_err(ReadError::Io)?;
            self.pos += n as u64;
            if n == 0 {
                return Ok(None);
            }
            if n >= 4 && h[..4] == [0x0a, 0x0d, 0x0d, 0x0a] {
                // A new section (the block type reads the same in both byte orders).
                let rest = h[4..n].to_vec();
                self.section_header_with(start, [h[0], h[1], h[2], h[3]], &rest)?;
                continue;
            }
            if n < 8 {
                return Err(ReadError::Truncated {
                    offset: start,
                    what: "pcapng block header",
                    needed: 8,
                    had: n as u64,
                });
            }
            let btype = self.u32(&h[0..4]);
            let len = self.u32(&h[4..8]) as usize;
            if !(12..=MAX_RECORD).contains(&len) || !len.is_multiple_of(4) {
                return Err(ReadError::Bad {
                    offset: start,
                    reason: format!("block length {len} (a multiple of 4 from 12 to {MAX_RECORD} expected)"),
                });
            }
            self.exact(0, len - 8, start, "pcapng block", len as u64)?;
            let body_len = len - 12;
            if let Some(r) = self.block(btype, body_len, start)? {
                let (a, b) = self.data;
                return Ok(Some((r, &self.buf[a..b])));
            }
        }
    }

    fn section_header_with(&mut self, start: u64, first: [u8; 4], rest: &[u8]) -> Result<(), ReadError> {
        self.buf.clear();
        self.buf.extend_from_slice(&first);
        self.buf.extend_from_slice(rest);
        let have = self.buf.len();
        self.pos = start + have as u64;
        if have < 12 {
            self.exact(have, 12 - have, start, "pcapng section header", 12)?;
        }
        let bom = u32::from_le_bytes([self.buf[8], self.buf[9], self.buf[10], self.buf[11]]);
        self.big_endian = match bom {
            0x1a2b_3c4d => false,
            0x4d3c_2b1a => true,
            _ => return Err(ReadError::Bad { offset: start, reason: format!("byte-order magic 0x{bom:08x}") }),
        };
        let len = self.u32(&self.buf[4..8]) as usize;
        if !(28..=MAX_RECORD).contains(&len) || !len.is_multiple_of(4) {
            return Err(ReadError::Bad { offset: start, reason: format!("section header length {len}") });
        }
        self.exact(12, len - 12, start, "pcapng section header", len as u64)?;
        if let Format::PcapNg { ifaces } = &mut self.format {
            ifaces.clear();
        }
        Ok(())
    }

    /// Interpret a block whose body is `buf[..body_len]`; `Some` for a packet.
    fn block(&mut self, btype: u32, body_len: usize, start: u64) -> Result<Option<Record>, ReadError> {
        let b = &self.buf[..body_len];
        let bad = |reason: String| ReadError::Bad { offset: start, reason };
        match btype {
            // Interface Description Block.
            1 => {
                if body_len < 8 {
                    return Err(bad(format!("interface description of {body_len} bytes")));
                }
                let linktype = u32::from(self.u16(&b[0..2]));
                let snaplen = self.u32(&b[4..8]);
                let mut iface = Iface { linktype, pow2: false, exp: 6, snaplen };
                let mut o = 8;
                while o + 4 <= body_len {
                    let code = self.u16(&b[o..o + 2]);
                    let olen = usize::from(self.u16(&b[o + 2..o + 4]));
                    if code == 0 || o + 4 + olen > body_len {
                        break;
                    }
                    // if_tsresol: MSB set = a power of 2, else of 10 (pcapng §4.2).
                    if code == 9 && olen >= 1 {
                        let v = b[o + 4];
                        iface.pow2 = v & 0x80 != 0;
                        iface.exp = v & 0x7f;
                    }
                    o += 4 + olen.div_ceil(4) * 4;
                }
                if let Format::PcapNg { ifaces } = &mut self.format {
                    ifaces.push(iface);
                }
                Ok(None)
            }
            // Enhanced Packet Block, and the obsolete Packet Block (still written by old tools:
            // a 16-bit interface id and drops count where the EPB has a 32-bit id).
            6 | 2 => {
                let name = if btype == 6 { "enhanced packet block" } else { "packet block" };
                if body_len < 20 {
                    return Err(bad(format!("{name} of {body_len} bytes")));
                }
                let ifid = if btype == 6 { self.u32(&b[0..4]) } else { u32::from(self.u16(&b[0..2])) };
                let units = (u64::from(self.u32(&b[4..8])) << 32) | u64::from(self.u32(&b[8..12]));
                let cap = self.u32(&b[12..16]) as usize;
                let orig = self.u32(&b[16..20]);
                if 20 + cap > body_len {
                    return Err(bad(format!("captured length {cap} past the block's {} bytes", body_len - 20)));
                }
                let iface = self.iface(ifid, start)?;
                self.data = (20, 20 + cap);
                let timestamp = iface.duration(units);
                Ok(Some(Record { timestamp, linktype: iface.linktype, interface: ifid, orig_len: orig, offset: start }))
            }
            // Simple Packet Block: interface 0, no timestamp.
            3 => {
                if body_len < 4 {
                    return Err(bad(format!("simple packet block of {body_len} bytes")));
                }
                let orig = self.u32(&b[0..4]);
                let iface = self.iface(0, start)?;
                let mut cap = (orig as usize).min(body_len - 4);
                if iface.snaplen != 0 {
                    cap = cap.min(iface.snaplen as usize);
                }
                self.data = (4, 4 + cap);
                Ok(Some(Record {
                    timestamp: Duration::ZERO,
                    linktype: iface.linktype,
                    interface: 0,
                    orig_len: orig,
                    offset: start,
                }))
            }
            _ => Ok(None),
        }
    }

    fn iface(&self, id: u32, start: u64) -> Result<Iface, ReadError> {
        match &self.format {
            Format::PcapNg { ifaces } => ifaces.get(id as usize).copied().ok_or_else(|| ReadError::Bad {
                offset: start,
                reason: format!("packet of interface {id}, but the section describes {}", ifaces.len()),
            }),
            Format::Pcap { .. } => unreachable!("pcap has no interface blocks"),
        }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> u64 {
        self.pos
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pcap(big: bool, nanos: bool, frames: &[(u32, u32, &[u8])]) -> Vec<u8> {
        let w32 = |v: u32| if big { v.to_be_bytes() } else { v.to_le_bytes() };
        let w16 = |v: u16| if big { v.to_be_bytes() } else { v.to_le_bytes() };
        let mut o = Vec::new();
        o.extend(w32(if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 }));
        o.extend(w16(2));
        o.extend(w16(4));
        o.extend(w32(0));
        o.extend(w32(0));
        o.extend(w32(65535));
        o.extend(w32(1));
        for (s, f, d) in frames {
            o.extend(w32(*s));
            o.extend(w32(*f));
            o.extend(w32(d.len() as u32));
            o.extend(w32(d.len() as u32));
            o.extend_from_slice(d);
        }
        o
    }

    fn all(bytes: &[u8]) -> (Vec<(Record, Vec<u8>)>, Option<ReadError>) {
        let mut r = Reader::new(bytes).unwrap();
        let mut v = Vec::new();
        loop {
            match r.next_frame() {
                Ok(Some((rec, d))) => v.push((rec, d.to_vec())),
                Ok(None) => return (v, None),
                Err(e) => return (v, Some(e)),
            }
        }
    }

    #[test]
    fn pcap_in_both_byte_orders_and_resolutions() {
        for big in [false, true] {
            for nanos in [false, true] {
                let b = pcap(big, nanos, &[(1, 5, b"abc"), (2, 7, b"defg")]);
                let (v, e) = all(&b);
                assert!(e.is_none());
                assert_eq!(v.len(), 2);
                assert_eq!(v[1].1, b"defg");
                let sub = if nanos { 7 } else { 7000 };
                assert_eq!(v[1].0.timestamp, Duration::new(2, sub));
                assert_eq!(v[1].0.offset, 24 + 16 + 3);
            }
        }
    }

    #[test]
    fn a_capture_cut_short_returns_every_complete_frame_then_the_offset() {
        let b = pcap(false, false, &[(1, 0, b"abcdef"), (2, 0, b"ghijkl")]);
        for cut in 25..b.len() {
            let (v, e) = all(&b[..cut]);
            let complete = if cut >= 24 + 22 { 1 } else { 0 };
            assert_eq!(v.len(), complete, "cut at {cut}");
            if cut == 24 + 22 {
                // Exactly at a record boundary: a clean end.
                assert!(e.is_none());
                continue;
            }
            match e {
                Some(ReadError::Truncated { offset, .. }) => {
                    assert_eq!(offset, if complete == 1 { 46 } else { 24 })
                }
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
    }

    proptest::proptest! {
        /// Any bytes after a pcap or pcapng header: records or an error, never a panic, and
        /// the reader always ends.
        #[test]
        fn any_bytes_read_without_panic(tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600), ng in proptest::prelude::any::<bool>()) {
            let mut b = if ng {
                let mut h = std::vec![0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0];
                h.extend_from_slice(&[0xff; 8]);
                h.extend_from_slice(&[28, 0, 0, 0]);
                // An Ethernet interface, so that packet blocks have one.
                h.extend_from_slice(&[1, 0, 0, 0, 20, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 20, 0, 0, 0]);
                h
            } else {
                pcap(false, false, &[])
            };
            b.extend_from_slice(&tail);
            let (v, _) = all(&b);
            proptest::prop_assert!(v.len() <= tail.len() / 12 + 1);
        }
    }

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

    #[test]
    fn junk_and_huge_lengths_are_errors_not_panics() {
        assert!(matches!(Reader::new(&b"hello world"[..]), Err(ReadError::NotCapture(_))));
        let mut b = pcap(false, false, &[(1, 0, b"x")]);
        b[24 + 8..24 + 12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(all(&b).1, Some(ReadError::Bad { offset: 24, .. })));
    }
}
