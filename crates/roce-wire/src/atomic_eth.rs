//! Atomic Extended Transport Header: address, R_Key, swap/add and compare data [IBA 9.3.4].

use crate::error::{Layer, Result};
#[allow(unused_imports)]
use crate::field::{be16, be24, be32, be64, put16, put24, put32, put64};

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

impl<T: AsRef<[u8]>> Packet<T> {
    /// Virtual address.
    pub fn va(&self) -> u64 {
        be64(self.buffer.as_ref(), field::VA.start)
    }
    /// Remote key.
    pub fn rkey(&self) -> u32 {
        be32(self.buffer.as_ref(), field::RKEY.start)
    }
    /// Swap (CmpSwap) or add (FetchAdd) data.
    pub fn swap_add(&self) -> u64 {
        be64(self.buffer.as_ref(), field::SWAP_ADD.start)
    }
    /// Compare data.
    pub fn compare(&self) -> u64 {
        be64(self.buffer.as_ref(), field::COMPARE.start)
    }
}

/// An owned AtomicETH.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap or add data.
    pub swap_add: u64,
    /// Compare data.
    pub compare: u64,
}

impl Repr {
    /// Parse a view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr { va: p.va(), rkey: p.rkey(), swap_add: p.swap_add(), compare: p.compare() })
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
        put64(b, field::SWAP_ADD.start, self.swap_add);
        put64(b, field::COMPARE.start, self.compare);
    }
}
repr_bytes!(Repr);
