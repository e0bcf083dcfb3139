//! Flush Extended Transport Header (IBA 1.5 memory placement extensions; rxe_hdr.h `rxe_feth`).

use crate::error::Layer;

/// Length on the wire.
pub const LEN: usize = 4;

fixed_view!(Layer::Feth, LEN);

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
        /// The raw 32-bit word: selectivity level in bits 5:4, placement type in bits 3:0.
        bits, set_bits: u32 = be32(field::VALUE),
    }
}

repr_bytes!(Repr, len: LEN);

impl Repr {
    /// Placement type (bits 3:0).
    pub const fn placement_type(&self) -> u8 {
        (self.bits & 0x0f) as u8
    }
    /// Selectivity level (bits 5:4).
    pub const fn selectivity_level(&self) -> u8 {
        ((self.bits >> 4) & 3) as u8
    }
}
