//! Datagram Extended Transport Header: Q_Key and source QP [IBA 9.3.2; rxe_hdr.h].

use crate::error::Layer;

/// Length on the wire.
pub const LEN: usize = 8;

fixed_view!(Layer::Deth, LEN);

/// Byte ranges of the DETH.
pub mod field {
    #![allow(missing_docs)]
    use crate::field::Field;
    pub const QKEY: Field = 0..4;
    pub const RESERVED: usize = 4;
    pub const SRC_QP: Field = 5..8;
}

wire_fields! {
    /// An owned DETH.
    #[cfg_attr(feature = "serde", derive(serde::Serialize))]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Repr {
        /// Queue key (0x80010000 for QP1).
        qkey, set_qkey: u32 = be32(field::QKEY),
        /// Reserved byte (kept).
        reserved, set_reserved: u8 = u8(field::RESERVED),
        /// Source QP (24 bits).
        src_qp, set_src_qp: u32 = be24(field::SRC_QP),
    }
}

impl Repr {
    /// A DETH with a zero reserved byte.
    pub const fn new(qkey: u32, src_qp: u32) -> Repr {
        Repr { qkey, reserved: 0, src_qp }
    }
}
repr_bytes!(Repr, len: LEN);
