//! Atomic Extended Transport Header: address, R_Key, swap/add and compare data [IBA 9.3.4].

use crate::error::Layer;

/// Length on the wire.
pub const LEN: usize = 28;

fixed_view!(Layer::AtomicEth, LEN);

/// Byte ranges of the AtomicETH.
pub mod field {
    #![allow(missing_docs)]
    use crate::field::Field;
    pub const VA: Field = 0..8;
    pub const RKEY: Field = 8..12;
    pub const SWAP_ADD: Field = 12..20;
    pub const COMPARE: Field = 20..28;
}

wire_fields! {
    /// An owned AtomicETH.
    #[cfg_attr(feature = "serde", derive(serde::Serialize))]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Repr {
        /// Virtual address.
        va, set_va: u64 = be64(field::VA),
        /// Remote key.
        rkey, set_rkey: u32 = be32(field::RKEY),
        /// Swap or add data.
        swap_add, set_swap_add: u64 = be64(field::SWAP_ADD),
        /// Compare data.
        compare, set_compare: u64 = be64(field::COMPARE),
    }
}

repr_bytes!(Repr, len: LEN);
