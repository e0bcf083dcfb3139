//! Immediate Data header: 4 bytes of immediate data [IBA 9.3.6].

use crate::error::Layer;

/// Length on the wire.
pub const LEN: usize = 4;

fixed_view!(Layer::ImmDt, LEN);

/// Byte ranges of the header.
pub mod field {
    #![allow(missing_docs)]
    use crate::field::Field;
    pub const VALUE: Field = 0..4;
}

wire_fields! {
    /// The owned header.
    #[cfg_attr(feature = "serde", derive(serde::Serialize))]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Repr {
        /// The immediate data (big-endian on the wire).
        imm_data, set_imm_data: u32 = be32(field::VALUE),
    }
}

repr_bytes!(Repr, len: LEN);
