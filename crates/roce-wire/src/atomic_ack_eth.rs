//! Atomic Acknowledge Extended Transport Header: the original remote data [IBA 9.3.5.3].

use crate::error::Layer;

/// Length on the wire.
pub const LEN: usize = 8;

fixed_view!(Layer::AtomicAckEth, LEN);

/// Byte ranges of the AtomicAckETH.
pub mod field {
    #![allow(missing_docs)]
    use crate::field::Field;
    pub const ORIG: Field = 0..8;
}

wire_fields! {
    /// An owned AtomicAckETH.
    #[cfg_attr(feature = "serde", derive(serde::Serialize))]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Repr {
        /// The original remote data.
        orig, set_orig: u64 = be64(field::ORIG),
    }
}

repr_bytes!(Repr, len: LEN);
