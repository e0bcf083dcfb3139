//! The Endace ERF record header, as `LINKTYPE_ERF` (197) pcap records carry it in front of
//! each frame; ibdump writes native InfiniBand captures this way (record type 21)
//! [Wireshark wiretap/erf_record.h, epan/dissectors/packet-erf.c; libpcap pcap-common.c].
//!
//! | Byte | Field |
//! |---|---|
//! | 0–7 | Timestamp, little-endian 32.32 fixed point (seconds since the epoch, binary fraction) |
//! | 8 | Type: bit 7 extension headers follow, bits 6:0 the record type |
//! | 9 | Flags: bits 1:0 capture interface, 2 varying length, 3 truncated, 4 RX error, 5 DS error |
//! | 10–11 | RLen: the record's length, this header and padding included (big-endian) |
//! | 12–13 | LCtr (loss counter) or colour (big-endian) |
//! | 14–15 | WLen: the frame's length on the wire (big-endian), not counting this header |
//!
//! Then, while the type's bit 7 (and then each extension header's bit 7) says so, 8-byte
//! extension headers; an InfiniBand record has no type-specific header after them, so the
//! IB packet (LRH first) follows directly, padded to the record's length.

use crate::error::{Error, Layer, Result};

/// Length of the fixed ERF header.
pub const LEN: usize = 16;
/// Length of one extension header.
pub const EXT_LEN: usize = 8;
/// The "more headers follow" bit of the type byte and of each extension header's first byte.
pub const MORE_BIT: u8 = 0x80;
/// The most extension headers read (a longer chain is a malformed record, not a frame).
pub const MAX_EXT_HEADERS: usize = 16;

enum_with_unknown! {
    /// ERF record types (erf_record.h `ERF_TYPE_*`, the ones next to InfiniBand named).
    pub enum RecordType(u8) {
        /// Ethernet (a 2-byte offset/pad header precedes the frame).
        Ethernet = 2,
        /// InfiniBand: an IB packet from the LRH on.
        Infiniband = 21,
        /// Raw IPv4.
        Ipv4 = 22,
        /// Raw IPv6.
        Ipv6 = 23,
        /// Raw link data.
        RawLink = 24,
        /// InfiniBand link-layer packets (flow control).
        InfinibandLink = 25,
        /// Metadata record.
        Meta = 27,
    }
}

fixed_view!(Layer::Erf, LEN);

/// Byte ranges of the ERF header.
pub mod field {
    #![allow(missing_docs)]
    use crate::field::Field;
    pub const TIMESTAMP: Field = 0..8;
    pub const TYPE: usize = 8;
    pub const FLAGS: usize = 9;
    pub const RLEN: Field = 10..12;
    pub const LCTR: Field = 12..14;
    pub const WLEN: Field = 14..16;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The timestamp (little-endian, unlike the other fields).
    pub fn timestamp(&self) -> u64 {
        u64::from_le_bytes(crate::field::array(self.buffer.as_ref(), field::TIMESTAMP.start))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the timestamp.
    pub fn set_timestamp(&mut self, v: &u64) {
        self.buffer.as_mut()[field::TIMESTAMP].copy_from_slice(&v.to_le_bytes());
    }
}

wire_fields! {
    /// An owned ERF header (the fixed 16 bytes).
    #[cfg_attr(feature = "serde", derive(serde::Serialize))]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Repr {
        /// Timestamp: seconds in the high 32 bits, binary fraction in the low 32.
        timestamp, set_timestamp: u64 = custom(),
        /// Whether extension headers follow (type bit 7).
        extension, set_extension: bool = flag(field::TYPE, 7),
        /// The record type (type bits 6:0).
        record_type, set_record_type: RecordType = code_bits(field::TYPE, 0, 7),
        /// The flags byte.
        flags, set_flags: u8 = u8(field::FLAGS),
        /// RLen: the whole record's length, this header included.
        rlen, set_rlen: u16 = be16(field::RLEN),
        /// LCtr: frames lost before this one (or a colour).
        lctr, set_lctr: u16 = be16(field::LCTR),
        /// WLen: the frame's length on the wire.
        wlen, set_wlen: u16 = be16(field::WLEN),
    }
}
repr_bytes!(Repr, len: LEN);

impl Repr {
    /// The capture interface (flags bits 1:0).
    pub const fn interface(&self) -> u8 {
        self.flags & 0x03
    }

    /// Whether the capture card truncated the record (flags bit 3).
    pub const fn truncated(&self) -> bool {
        self.flags & 0x08 != 0
    }

    /// Whether the card saw a receive error (flags bit 4).
    pub const fn rx_error(&self) -> bool {
        self.flags & 0x10 != 0
    }

    /// The timestamp as (seconds, nanoseconds), the fraction rounded down.
    pub const fn seconds_nanos(&self) -> (u32, u32) {
        let frac = self.timestamp & 0xffff_ffff;
        ((self.timestamp >> 32) as u32, ((frac * 1_000_000_000) >> 32) as u32)
    }

    /// The 32.32 timestamp of (seconds, nanoseconds), the fraction rounded up so that
    /// [`Repr::seconds_nanos`] gives the nanoseconds back.
    pub const fn timestamp_of(secs: u32, nanos: u32) -> u64 {
        let frac = ((nanos as u64) << 32).div_ceil(1_000_000_000);
        ((secs as u64) << 32) | (frac & 0xffff_ffff)
    }
}

/// A parsed ERF record head: the fixed header, the extension headers' bytes, and where the
/// frame starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// The fixed header.
    pub header: Repr,
    /// The extension headers (a multiple of 8 bytes, each as on the wire).
    pub extensions: &'a [u8],
    /// The frame: after the headers, through RLen (or the captured bytes, if fewer), cut to
    /// WLen (the rest is the record's alignment padding, see `padding`).
    pub frame: &'a [u8],
    /// Bytes after the frame up to RLen (alignment padding).
    pub padding: &'a [u8],
    /// Bytes after RLen (none in a well-formed capture: one record per pcap record).
    pub after: &'a [u8],
}

/// Parse an ERF record from the start of `buf` (a pcap record of link type 197). Errors name
/// [`Layer::Erf`] and the byte.
pub fn parse_record(buf: &[u8]) -> Result<Record<'_>> {
    let header = Repr::parse_bytes(buf)?;
    let mut at = LEN;
    let mut more = header.extension;
    let mut n = 0;
    while more {
        if n == MAX_EXT_HEADERS {
            return Err(Error::content(
                Layer::Erf,
                at,
                crate::ContentError::FieldOutOfRange { value: n + 1, max: MAX_EXT_HEADERS },
            ));
        }
        if buf.len() < at + EXT_LEN {
            return Err(Error::len(Layer::Erf, at, EXT_LEN, buf.len() - at));
        }
        more = buf[at] & MORE_BIT != 0;
        at += EXT_LEN;
        n += 1;
    }
    // RLen bounds the record; a capture may hold fewer bytes (snap length).
    let end = usize::from(header.rlen).clamp(at, buf.len());
    let frame_end = (at + usize::from(header.wlen)).min(end);
    Ok(Record {
        header,
        extensions: &buf[LEN..at],
        frame: &buf[at..frame_end],
        padding: &buf[frame_end..end],
        after: &buf[end..],
    })
}

/// The record length ERF writers use for a frame of `frame_len` bytes after `ext_len` bytes
/// of extension headers: padded to a multiple of 8.
pub const fn padded_rlen(ext_len: usize, frame_len: usize) -> usize {
    (LEN + ext_len + frame_len).next_multiple_of(8)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An InfiniBand record as ibdump writes one: interface 1, varying length, a 30-byte
    /// frame padded to 48 bytes of record.
    fn record() -> [u8; 48] {
        let mut r = [0u8; 48];
        r[..8].copy_from_slice(&Repr::timestamp_of(1_700_000_000, 500_000_000).to_le_bytes());
        r[8] = 21;
        r[9] = 0x05;
        r[10..12].copy_from_slice(&48u16.to_be_bytes());
        r[14..16].copy_from_slice(&30u16.to_be_bytes());
        for (i, b) in r[16..46].iter_mut().enumerate() {
            *b = i as u8 + 1;
        }
        r
    }

    #[test]
    fn parses_an_infiniband_record() {
        let r = record();
        let rec = parse_record(&r).unwrap();
        let h = rec.header;
        assert_eq!(
            (h.record_type, h.extension, h.interface(), h.rlen, h.wlen),
            (RecordType::Infiniband, false, 1, 48, 30)
        );
        assert_eq!(h.seconds_nanos(), (1_700_000_000, 500_000_000));
        assert_eq!((rec.frame.len(), rec.frame[0], rec.padding.len(), rec.after.len()), (30, 1, 2, 0));
        let mut longer = [0u8; 50];
        longer[..48].copy_from_slice(&r);
        assert_eq!(parse_record(&longer).unwrap().after, &[0, 0]);
        assert_eq!(padded_rlen(0, 30), 48);
        let mut out = [0u8; 16];
        h.emit_bytes(&mut out);
        assert_eq!(out, r[..16]);
    }

    #[test]
    fn extension_headers_and_errors() {
        let mut r = [0u8; 64];
        r[..48].copy_from_slice(&record());
        r[8] |= MORE_BIT;
        r[16] = MORE_BIT | 3;
        r[24] = 4;
        r[10..12].copy_from_slice(&64u16.to_be_bytes());
        let rec = parse_record(&r).unwrap();
        assert_eq!((rec.extensions.len(), rec.frame.len()), (16, 30));
        let e = parse_record(&r[..20]).unwrap_err();
        assert_eq!((e.layer(), e.offset()), (Layer::Erf, 16));
        let e = parse_record(&r[..10]).unwrap_err();
        assert_eq!((e.layer(), e.offset()), (Layer::Erf, 0));
        let mut chain = [0xffu8; 16 + 8 * 20];
        let n = chain.len() as u16;
        chain[10..12].copy_from_slice(&n.to_be_bytes());
        assert!(parse_record(&chain).is_err(), "an endless chain is refused");
        // For every timestamp fraction the nanoseconds survive the round trip.
        for ns in [0u32, 1, 999_999_999, 123_456_789] {
            let h = Repr { timestamp: Repr::timestamp_of(5, ns), ..Repr::default() };
            assert_eq!(h.seconds_nanos(), (5, ns));
        }
    }
}
