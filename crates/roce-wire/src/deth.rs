//! Datagram Extended Transport Header: Q_Key and source QP [IBA 9.3.2; rxe_hdr.h].

use crate::error::{Layer, Result};
#[allow(unused_imports)]
use crate::field::{be16, be24, be32, be64, put16, put24, put32, put64};

/// Length on the wire.
pub const LEN: usize = 8;

fixed_view!(Layer::Deth, LEN);

/// Byte ranges of the DETH.
pub mod field {
    #![allow(missing_docs)]
    use crate::field::Field;
    pub const QKEY: Field = 0..4;
    pub const RESERVED: usize = 4;
    pub const SRC_QP: Field = 5..8;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Queue key.
    pub fn qkey(&self) -> u32 {
        be32(self.buffer.as_ref(), field::QKEY.start)
    }
    /// The reserved byte.
    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[field::RESERVED]
    }
    /// Source QP.
    pub fn src_qp(&self) -> u32 {
        be24(self.buffer.as_ref(), field::SRC_QP.start)
    }
}

/// An owned DETH.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Queue key (0x80010000 for QP1).
    pub qkey: u32,
    /// Reserved byte (kept).
    pub reserved: u8,
    /// Source QP (24 bits).
    pub src_qp: u32,
}

impl Repr {
    /// A DETH with a zero reserved byte.
    pub const fn new(qkey: u32, src_qp: u32) -> Repr {
        Repr { qkey, reserved: 0, src_qp }
    }
    /// Parse a view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr { qkey: p.qkey(), reserved: p.reserved(), src_qp: p.src_qp() })
    }
    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Emit into a view of at least `LEN` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, p: &mut Packet<&mut T>) {
        let b = p.buffer.as_mut();
        put32(b, field::QKEY.start, self.qkey);
        b[field::RESERVED] = self.reserved;
        put24(b, field::SRC_QP.start, self.src_qp & 0xff_ffff);
    }
}
repr_bytes!(Repr);
