//! The InfiniBand Global Route Header (40 bytes): IPv6's layout with IB's names, present when
//! the LRH's LNH says "IBA global" [IBA 8.3; Wireshark `infiniband.grh.*`].
//!
//! | Byte | Bits | Field |
//! |---|---|---|
//! | 0–3 | 31:28 / 27:20 / 19:0 | IPVer / TClass / FlowLabel |
//! | 4–5 | | PayLen (bytes after the GRH through the ICRC) |
//! | 6 | | NxtHdr (0x1B: an IBA transport header follows) |
//! | 7 | | HopLmt |
//! | 8–23 | | SGID |
//! | 24–39 | | DGID |
//!
//! etherparse's `Ipv6Header` refuses what IPv6 would (a version other than 6), and a
//! capture of a damaged or odd GRH must still re-emit byte for byte, so the header has its own
//! view here.

use crate::error::Layer;
use crate::field::{be32, put32};

/// Length of the GRH.
pub const LEN: usize = 40;

/// NxtHdr of a GRH followed by an IBA transport header (the BTH).
pub const NEXT_HEADER_IBA: u8 = 0x1b;

fixed_view!(Layer::Grh, LEN);

/// Byte ranges of the GRH.
pub mod field {
    #![allow(missing_docs)]
    use crate::field::Field;
    pub const VERSION_CLASS_FLOW: Field = 0..4;
    pub const PAY_LEN: Field = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SGID: Field = 8..24;
    pub const DGID: Field = 24..40;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// TClass (8 bits).
    pub fn traffic_class(&self) -> u8 {
        (be32(self.buffer.as_ref(), 0) >> 20) as u8
    }

    /// FlowLabel (20 bits).
    pub fn flow_label(&self) -> u32 {
        be32(self.buffer.as_ref(), 0) & 0xf_ffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set TClass.
    pub fn set_traffic_class(&mut self, v: &u8) {
        let b = self.buffer.as_mut();
        let w = (be32(b, 0) & 0xf00f_ffff) | (u32::from(*v) << 20);
        put32(b, 0, w);
    }

    /// Set FlowLabel (masked to 20 bits).
    pub fn set_flow_label(&mut self, v: &u32) {
        let b = self.buffer.as_mut();
        let w = (be32(b, 0) & 0xfff0_0000) | (*v & 0xf_ffff);
        put32(b, 0, w);
    }
}

wire_fields! {
    /// An owned GRH.
    #[cfg_attr(feature = "serde", derive(serde::Serialize))]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Repr {
        /// IPVer (4 bits, 6; any value is kept).
        ip_version, set_ip_version: u8 = bits(0, 4, 4),
        /// TClass.
        traffic_class, set_traffic_class: u8 = custom(),
        /// FlowLabel (20 bits).
        flow_label, set_flow_label: u32 = custom(),
        /// PayLen: bytes after the GRH through the ICRC.
        pay_len, set_pay_len: u16 = be16(field::PAY_LEN),
        /// NxtHdr (0x1B for IBA transport).
        next_header, set_next_header: u8 = u8(field::NEXT_HEADER),
        /// HopLmt.
        hop_limit, set_hop_limit: u8 = u8(field::HOP_LIMIT),
        /// Source GID.
        sgid, set_sgid: [u8; 16] = array(field::SGID),
        /// Destination GID.
        dgid, set_dgid: [u8; 16] = array(field::DGID),
    }
}
repr_bytes!(Repr, len: LEN);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_emits_the_ipv6_shaped_layout() {
        let mut b = [0u8; LEN];
        b[..8].copy_from_slice(&[0x6a, 0xbc, 0xde, 0xf1, 0x01, 0x20, 0x1b, 0x40]);
        b[8] = 0xfe;
        b[39] = 0x02;
        let r = Repr::parse_bytes(&b).unwrap();
        assert_eq!((r.ip_version, r.traffic_class, r.flow_label), (6, 0xab, 0xcdef1));
        assert_eq!((r.pay_len, r.next_header, r.hop_limit), (0x120, NEXT_HEADER_IBA, 0x40));
        assert_eq!((r.sgid[0], r.dgid[15]), (0xfe, 0x02));
        let mut out = [0u8; LEN];
        r.emit_bytes(&mut out);
        assert_eq!(out, b);
        let e = Repr::parse_bytes(&b[..39]).unwrap_err();
        assert_eq!((e.layer(), e.offset()), (Layer::Grh, 0));
    }
}
