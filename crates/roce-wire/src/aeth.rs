//! ACK Extended Transport Header: syndrome and MSN [IBA 9.3.5; rxe_hdr.h].

use crate::error::Layer;

/// Length on the wire.
pub const LEN: usize = 4;

fixed_view!(Layer::Aeth, LEN);

/// Byte ranges of the AETH.
pub mod field {
    #![allow(missing_docs)]
    use crate::field::Field;
    pub const SYNDROME: usize = 0;
    pub const MSN: Field = 1..4;
}

wire_fields! {
    /// An owned AETH.
    #[cfg_attr(feature = "serde", derive(serde::Serialize))]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Repr {
        /// Syndrome byte.
        syndrome, set_syndrome: u8 = u8(field::SYNDROME),
        /// MSN (24 bits).
        msn, set_msn: u32 = be24(field::MSN),
    }
}

repr_bytes!(Repr, len: LEN);
