//! Immediate Data header: 4 bytes of immediate data [IBA 9.3.6].

use crate::error::{Layer, Result};
#[allow(unused_imports)]
use crate::field::{be16, be24, be32, be64, put16, put24, put32, put64};

/// Length on the wire.
pub const LEN: usize = 4;

fixed_view!(Layer::ImmDt, LEN);

/// Byte ranges of the header.
pub mod field {
    #![allow(missing_docs)]
    use crate::field::Field;
    pub const VALUE: Field = 0..4;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The immediate data (big-endian on the wire).
    pub fn imm_data(&self) -> u32 {
        be32(self.buffer.as_ref(), field::VALUE.start)
    }
}

/// The owned header.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// The immediate data (big-endian on the wire).
    pub imm_data: u32,
}

impl Repr {
    /// Parse a view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr { imm_data: p.imm_data() })
    }
    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Emit into a view of at least `LEN` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, p: &mut Packet<&mut T>) {
        put32(p.buffer.as_mut(), field::VALUE.start, self.imm_data);
    }
}
repr_bytes!(Repr);
