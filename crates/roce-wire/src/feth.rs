//! Flush Extended Transport Header (IBA 1.5 memory placement extensions; rxe_hdr.h `rxe_feth`).

use crate::error::{Layer, Result};
#[allow(unused_imports)]
use crate::field::{be16, be24, be32, be64, put16, put24, put32, put64};

/// Length on the wire.
pub const LEN: usize = 4;

fixed_view!(Layer::Feth, LEN);

/// Byte ranges of the header.
pub mod field {
    #![allow(missing_docs)]
    use crate::field::Field;
    pub const VALUE: Field = 0..4;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The raw 32-bit word: selectivity level in bits 5:4, placement type in bits 3:0.
    pub fn bits(&self) -> u32 {
        be32(self.buffer.as_ref(), field::VALUE.start)
    }
}

/// The owned header.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// The raw 32-bit word: selectivity level in bits 5:4, placement type in bits 3:0.
    pub bits: u32,
}

impl Repr {
    /// Parse a view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr { bits: p.bits() })
    }
    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Emit into a view of at least `LEN` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, p: &mut Packet<&mut T>) {
        put32(p.buffer.as_mut(), field::VALUE.start, self.bits);
    }
}
repr_bytes!(Repr);

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
