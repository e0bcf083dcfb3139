//! RDMA Extended Transport Header: virtual address, R_Key, DMA length [IBA 9.3.3; rxe_hdr.h].

use crate::error::{Layer, Result};
#[allow(unused_imports)]
use crate::field::{be16, be24, be32, be64, put16, put24, put32, put64};

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

impl<T: AsRef<[u8]>> Packet<T> {
    /// Virtual address.
    pub fn va(&self) -> u64 {
        be64(self.buffer.as_ref(), field::VA.start)
    }
    /// Remote key.
    pub fn rkey(&self) -> u32 {
        be32(self.buffer.as_ref(), field::RKEY.start)
    }
    /// DMA length.
    pub fn dma_len(&self) -> u32 {
        be32(self.buffer.as_ref(), field::DMA_LEN.start)
    }
}

/// An owned RETH.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length.
    pub dma_len: u32,
}

impl Repr {
    /// Parse a view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr { va: p.va(), rkey: p.rkey(), dma_len: p.dma_len() })
    }
    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Emit into a view of at least `LEN` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, p: &mut Packet<&mut T>) {
        let b = p.buffer.as_mut();
        put64(b, field::VA.start, self.va);
        put32(b, field::RKEY.start, self.rkey);
        put32(b, field::DMA_LEN.start, self.dma_len);
    }
}
repr_bytes!(Repr);
