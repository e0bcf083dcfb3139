//! XRC Extended Transport Header: the XRC SRQ that receives the request [IBA 1.3 vol. 1
//! table 38 (XRC); NFStest `packet/transport/ib.py` `XRCETH`; the rxe XRC series' `rxe_xrceth`].
//!
//! In every XRC request, right after the BTH: byte 0 reserved, bytes 1–3 the destination XRC
//! SRQ number. XRC responses (READ responses, ACK, ATOMIC ACK) carry none (see
//! [`crate::bth::Opcode::ext_headers`]).

use crate::error::Layer;

/// Length on the wire.
pub const LEN: usize = 4;

fixed_view!(Layer::Xrceth, LEN);

/// Byte ranges of the XRCETH.
pub mod field {
    #![allow(missing_docs)]
    use crate::field::Field;
    pub const RESERVED: usize = 0;
    pub const XRC_SRQ: Field = 1..4;
}

wire_fields! {
    /// An owned XRCETH.
    #[cfg_attr(feature = "serde", derive(serde::Serialize))]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Repr {
        /// Reserved byte (kept).
        reserved, set_reserved: u8 = u8(field::RESERVED),
        /// The destination XRC SRQ number (24 bits).
        xrc_srq, set_xrc_srq: u32 = be24(field::XRC_SRQ),
    }
}

impl Repr {
    /// An XRCETH with a zero reserved byte.
    pub const fn new(xrc_srq: u32) -> Repr {
        Repr { reserved: 0, xrc_srq }
    }
}
repr_bytes!(Repr, len: LEN);

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::Error;

    /// SRQ 0x0a0b0c, reserved byte 0x5a.
    const BYTES: [u8; 4] = [0x5a, 0x0a, 0x0b, 0x0c];

    #[test]
    fn parses_and_emits_the_layout() {
        let r = Repr::parse_bytes(&BYTES).unwrap();
        assert_eq!((r.reserved, r.xrc_srq), (0x5a, 0x0a_0b0c));
        let mut out = [0u8; LEN];
        r.emit_bytes(&mut out);
        assert_eq!(out, BYTES);
        assert_eq!(r.buffer_len(), LEN);
    }

    #[test]
    fn view_reads_and_writes_the_fields() {
        let mut b = [0u8; 6];
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        p.set_reserved(0xff);
        p.set_xrc_srq(0x12_3456);
        assert_eq!((p.reserved(), p.xrc_srq()), (0xff, 0x12_3456));
        assert_eq!(&b[..4], &[0xff, 0x12, 0x34, 0x56]);
        assert_eq!(b[4..], [0, 0], "nothing written past the header");
    }

    #[test]
    fn new_zeroes_the_reserved_byte_and_emit_masks_the_srq() {
        let r = Repr::new(0xff12_3456);
        assert_eq!(r.reserved, 0);
        let mut out = [0xeeu8; LEN];
        r.emit_bytes(&mut out);
        // A value wider than 24 bits loses its top byte, as every 24-bit field here does.
        assert_eq!(out, [0x00, 0x12, 0x34, 0x56]);
        assert_eq!(Repr::default(), Repr { reserved: 0, xrc_srq: 0 });
    }

    #[test]
    fn short_is_a_typed_length_error() {
        for n in 0..LEN {
            assert_eq!(Repr::parse_bytes(&BYTES[..n]).unwrap_err(), Error::len(Layer::Xrceth, 0, LEN, n));
            assert!(Packet::new_checked(&BYTES[..n]).is_err());
        }
        assert_eq!(
            std::format!("{}", Error::len(Layer::Xrceth, 54, 4, 1)),
            "XRCETH at byte 54: truncated, needs 4 bytes but only 1 remain"
        );
    }

    #[test]
    fn every_value_round_trips() {
        for (reserved, xrc_srq) in [(0, 0), (0xff, 0xff_ffff), (1, 0x80_0001), (0x80, 0x7f)] {
            let r = Repr { reserved, xrc_srq };
            let mut out = [0u8; LEN];
            r.emit_bytes(&mut out);
            assert_eq!(Repr::parse_bytes(&out).unwrap(), r);
        }
    }
}
