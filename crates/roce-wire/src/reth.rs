//! RDMA Extended Transport Header: virtual address, R_Key, DMA length [IBA 9.3.3; rxe_hdr.h].

use crate::error::Layer;

/// Length on the wire.
pub const LEN: usize = 16;

fixed_view!(Layer::Reth, LEN);

/// Byte ranges of the RETH.
pub mod field {
    #![allow(missing_docs)]
    use crate::field::Field;
    pub const VA: Field = 0..8;
    pub const RKEY: Field = 8..12;
    pub const DMA_LEN: Field = 12..16;
}

wire_fields! {
    /// An owned RETH.
    #[cfg_attr(feature = "serde", derive(serde::Serialize))]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Repr {
        /// Virtual address.
        va, set_va: u64 = be64(field::VA),
        /// Remote key.
        rkey, set_rkey: u32 = be32(field::RKEY),
        /// DMA length.
        dma_len, set_dma_len: u32 = be32(field::DMA_LEN),
    }
}

repr_bytes!(Repr, len: LEN);
