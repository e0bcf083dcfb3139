//! ACK Extended Transport Header: syndrome and MSN [IBA 9.3.5; rxe_hdr.h].

use crate::error::{Layer, Result};
#[allow(unused_imports)]
use crate::field::{be16, be24, be32, be64, put16, put24, put32, put64};

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

impl<T: AsRef<[u8]>> Packet<T> {
    /// Syndrome: bits 6:5 select ACK (0), RNR NAK (1) or NAK (3); bits 4:0 are credits/timer/code.
    pub fn syndrome(&self) -> u8 {
        self.buffer.as_ref()[field::SYNDROME]
    }
    /// Message sequence number.
    pub fn msn(&self) -> u32 {
        be24(self.buffer.as_ref(), field::MSN.start)
    }
}

/// An owned AETH.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Syndrome byte.
    pub syndrome: u8,
    /// MSN (24 bits).
    pub msn: u32,
}

impl Repr {
    /// Parse a view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr { syndrome: p.syndrome(), msn: p.msn() })
    }
    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Emit into a view of at least `LEN` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, p: &mut Packet<&mut T>) {
        let b = p.buffer.as_mut();
        b[field::SYNDROME] = self.syndrome;
        put24(b, field::MSN.start, self.msn & 0xff_ffff);
    }
}
repr_bytes!(Repr);
