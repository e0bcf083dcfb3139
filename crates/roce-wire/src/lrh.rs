//! The InfiniBand Local Route Header (8 bytes), first header of every native IB packet.
//!
//! Layout [IBA 7.7; Wireshark packet-infiniband.c `infiniband.lrh.*`; ib_hdrs.h]:
//!
//! | Byte | Bits | Field |
//! |---|---|---|
//! | 0 | 7:4 / 3:0 | VL / LVer |
//! | 1 | 7:4 / 3:2 / 1:0 | SL / Reserved2 / LNH |
//! | 2–3 | | DLID |
//! | 4–5 | 15:11 / 10:0 | Reserved5 / PktLen (4-byte words from the LRH through the ICRC) |
//! | 6–7 | | SLID |
//!
//! The VCRC (2 bytes) follows the PktLen words; it is not counted in them.

use crate::error::Layer;
use crate::field::{be16, put16};

/// Length of the LRH.
pub const LEN: usize = 8;

fixed_view!(Layer::Lrh, LEN);

/// Byte ranges of the LRH.
pub mod field {
    #![allow(missing_docs)]
    use crate::field::Field;
    pub const VL_LVER: usize = 0;
    pub const SL_LNH: usize = 1;
    pub const DLID: Field = 2..4;
    pub const PKT_LEN: Field = 4..6;
    pub const SLID: Field = 6..8;
}

enum_with_unknown! {
    /// Link Next Header: what follows the LRH [IBA 7.7.8]. Two bits, so every value is named;
    /// `Unknown` never occurs on the wire.
    pub enum Lnh(u8) {
        /// Raw packet: an EtherType-tagged datagram follows (no ICRC).
        Raw = 0,
        /// Raw IPv6 packet (no ICRC).
        IpNonIba = 1,
        /// IBA local: the BTH follows.
        IbaLocal = 2,
        /// IBA global: the GRH, then the BTH.
        IbaGlobal = 3,
    }
}

impl Lnh {
    /// The name as tshark prints it (`infiniband.lrh.lnh`).
    pub const fn name(self) -> &'static str {
        match self {
            Lnh::Raw => "Raw",
            Lnh::IpNonIba => "IP Non-IBA",
            Lnh::IbaLocal => "IBA Local",
            Lnh::IbaGlobal => "IBA Global",
            Lnh::Unknown(_) => "Unknown",
        }
    }

    /// Whether an IBA transport header (and so an ICRC) follows.
    pub const fn is_iba(self) -> bool {
        matches!(self, Lnh::IbaLocal | Lnh::IbaGlobal)
    }
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The 5 reserved bits above PktLen.
    pub fn reserved5(&self) -> u8 {
        (be16(self.buffer.as_ref(), field::PKT_LEN.start) >> 11) as u8
    }

    /// PktLen: the packet's length in 4-byte words from the first LRH byte through the ICRC.
    pub fn pkt_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PKT_LEN.start) & 0x07ff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the 5 reserved bits (masked to 5 bits).
    pub fn set_reserved5(&mut self, v: &u8) {
        let b = self.buffer.as_mut();
        let w = (be16(b, field::PKT_LEN.start) & 0x07ff) | (u16::from(*v & 0x1f) << 11);
        put16(b, field::PKT_LEN.start, w);
    }

    /// Set PktLen (masked to 11 bits).
    pub fn set_pkt_len(&mut self, v: &u16) {
        let b = self.buffer.as_mut();
        let w = (be16(b, field::PKT_LEN.start) & 0xf800) | (*v & 0x07ff);
        put16(b, field::PKT_LEN.start, w);
    }
}

wire_fields! {
    /// An owned LRH.
    #[cfg_attr(feature = "serde", derive(serde::Serialize))]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Repr {
        /// Virtual lane (4 bits; 15 is the management lane VL15).
        vl, set_vl: u8 = bits(field::VL_LVER, 4, 4),
        /// Link version (4 bits, 0).
        lver, set_lver: u8 = bits(field::VL_LVER, 0, 4),
        /// Service level (4 bits).
        sl, set_sl: u8 = bits(field::SL_LNH, 4, 4),
        /// The 2 reserved bits (kept).
        reserved2, set_reserved2: u8 = bits(field::SL_LNH, 2, 2),
        /// Link next header.
        lnh, set_lnh: Lnh = code_bits(field::SL_LNH, 0, 2),
        /// Destination LID.
        dlid, set_dlid: u16 = be16(field::DLID),
        /// The 5 reserved bits (kept).
        reserved5, set_reserved5: u8 = custom(),
        /// Packet length in 4-byte words, LRH through ICRC (11 bits).
        pkt_len, set_pkt_len: u16 = custom(),
        /// Source LID.
        slid, set_slid: u16 = be16(field::SLID),
    }
}
repr_bytes!(Repr, len: LEN);

impl Repr {
    /// The packet's length in bytes from the LRH through the ICRC (`pkt_len` × 4).
    pub const fn packet_bytes(&self) -> usize {
        self.pkt_len as usize * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An SMP on VL15 from LID 1 to LID 2, 72 words, built by the table above.
    const BYTES: [u8; 8] = [0xf0, 0x02, 0x00, 0x02, 0x00, 0x48, 0x00, 0x01];

    #[test]
    fn parses_and_emits_the_spec_layout() {
        let r = Repr::parse_bytes(&BYTES).unwrap();
        assert_eq!((r.vl, r.lver, r.sl, r.lnh, r.dlid, r.pkt_len, r.slid), (15, 0, 0, Lnh::IbaLocal, 2, 72, 1));
        assert_eq!(r.packet_bytes(), 288);
        let mut out = [0u8; 8];
        r.emit_bytes(&mut out);
        assert_eq!(out, BYTES);
    }

    #[test]
    fn reserved_bits_survive() {
        let b = [0x5a, 0xc7, 0xff, 0xfe, 0xff, 0xff, 0x12, 0x34];
        let r = Repr::parse_bytes(&b).unwrap();
        assert_eq!((r.vl, r.lver, r.sl, r.reserved2, r.lnh), (5, 0xa, 0xc, 1, Lnh::IbaGlobal));
        assert_eq!((r.reserved5, r.pkt_len), (0x1f, 0x7ff));
        let mut out = [0u8; 8];
        r.emit_bytes(&mut out);
        assert_eq!(out, b);
    }

    #[test]
    fn short_is_a_typed_error() {
        for n in 0..LEN {
            let e = Repr::parse_bytes(&BYTES[..n]).unwrap_err();
            assert_eq!((e.layer(), e.offset()), (Layer::Lrh, 0));
        }
    }
}
