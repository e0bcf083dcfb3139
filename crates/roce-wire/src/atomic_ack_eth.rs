//! Atomic Acknowledge Extended Transport Header: the original remote data [IBA 9.3.5.3].

use crate::error::{Layer, Result};
#[allow(unused_imports)]
use crate::field::{be16, be24, be32, be64, put16, put24, put32, put64};

/// Length on the wire.
pub const LEN: usize = 8;

fixed_view!(Layer::AtomicAckEth, LEN);

/// Byte ranges of the AtomicAckETH.
pub mod field {
    #![allow(missing_docs)]
    use crate::field::Field;
    pub const ORIG: Field = 0..8;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The original remote data.
    pub fn orig(&self) -> u64 {
        be64(self.buffer.as_ref(), field::ORIG.start)
    }
}

/// An owned AtomicAckETH.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// The original remote data.
    pub orig: u64,
}

impl Repr {
    /// Parse a view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr { orig: p.orig() })
    }
    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Emit into a view of at least `LEN` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, p: &mut Packet<&mut T>) {
        put64(p.buffer.as_mut(), field::ORIG.start, self.orig);
    }
}
repr_bytes!(Repr);
