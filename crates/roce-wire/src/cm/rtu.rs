//! RTU (ReadyToUse, attribute 0x0014): IBTA vol. 1 table 111, `struct cm_rtu_msg`
//! [cm_msgs.h], `CM_RTU_*` [ibta_vol1_c12.h]. Offsets are from the start of the data area
//! (MAD byte 24); tshark 4.0 names are `infiniband.cm.rtu.*`.

use crate::cm::{check_data_len, DATA_LEN};
use crate::error::Result;
use crate::field::{array, be32, put32};

/// Byte positions inside the RTU body (data-area offsets).
pub mod field {
    use crate::field::*;
    /// Local Communication ID. tshark: `infiniband.cm.rtu.localcommid`.
    pub const LOCAL_COMM_ID: Field = 0..4;
    /// Remote Communication ID. tshark: `infiniband.cm.rtu.remotecommid`.
    pub const REMOTE_COMM_ID: Field = 4..8;
    /// Private data (224 bytes). tshark: `infiniband.cm.rtu.private`.
    pub const PRIVATE_DATA: Field = 8..232;
}

fixed_view!(check: check_data_len);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Local Communication ID.
    pub fn local_comm_id(&self) -> u32 {
        be32(self.buffer.as_ref(), field::LOCAL_COMM_ID.start)
    }
    /// Remote Communication ID.
    pub fn remote_comm_id(&self) -> u32 {
        be32(self.buffer.as_ref(), field::REMOTE_COMM_ID.start)
    }
    /// The 224 bytes of private data.
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the Local Communication ID.
    pub fn set_local_comm_id(&mut self, v: u32) {
        put32(self.buffer.as_mut(), field::LOCAL_COMM_ID.start, v)
    }
    /// Set the Remote Communication ID.
    pub fn set_remote_comm_id(&mut self, v: u32) {
        put32(self.buffer.as_mut(), field::REMOTE_COMM_ID.start, v)
    }
    /// The private data, writable.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PRIVATE_DATA]
    }
}

/// An owned RTU body.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Local Communication ID.
    pub local_comm_id: u32,
    /// Remote Communication ID.
    pub remote_comm_id: u32,
    /// Private data (224 bytes).
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serde_support::hex"))]
    pub private_data: [u8; 224],
}

impl Default for Repr {
    fn default() -> Self {
        Repr { local_comm_id: 0, remote_comm_id: 0, private_data: [0; 224] }
    }
}

impl Repr {
    /// The body length: the whole data area.
    pub const LEN: usize = DATA_LEN;
    /// The private-data size, `IB_CM_RTU_PRIVATE_DATA_SIZE`.
    pub const PRIVATE_DATA_LEN: usize = 224;

    /// Parse an RTU view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            local_comm_id: packet.local_comm_id(),
            remote_comm_id: packet.remote_comm_id(),
            private_data: array(packet.buffer.as_ref(), field::PRIVATE_DATA.start),
        })
    }

    /// The body length: 232.
    pub const fn buffer_len(&self) -> usize {
        DATA_LEN
    }

    /// Write the body into a view.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        packet.set_local_comm_id(self.local_comm_id);
        packet.set_remote_comm_id(self.remote_comm_id);
        packet.private_data_mut().copy_from_slice(&self.private_data);
    }
}

repr_bytes!(Repr);

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::cm::test_util::*;
    use crate::error::{Error, Layer};
    use proptest::prelude::*;

    #[test]
    fn golden_kernel_rtu() {
        // cm_format_rtu: local ID, remote ID, optional private data.
        let mut d = [0u8; DATA_LEN];
        iba_set32(&mut d, 0, 32, 0x1234_5678); // CM_RTU_LOCAL_COMM_ID
        iba_set32(&mut d, 4, 32, 0xCAFE_0001); // CM_RTU_REMOTE_COMM_ID
        iba_set_mem(&mut d, 8, b"go"); // CM_RTU_PRIVATE_DATA
        let mut r = Repr { local_comm_id: 0x1234_5678, remote_comm_id: 0xCAFE_0001, ..Repr::default() };
        r.private_data[..2].copy_from_slice(b"go");
        let mut out = [0u8; DATA_LEN];
        r.emit_bytes(&mut out);
        assert_eq!(out, d);
        assert_eq!(Repr::parse_bytes(&d).unwrap(), r);
    }

    #[test]
    fn truncation() {
        let d = [0u8; DATA_LEN];
        for len in 0..DATA_LEN {
            assert_eq!(Repr::parse_bytes(&d[..len]), Err(Error::len(Layer::Cm, 24, DATA_LEN, len)));
        }
    }

    proptest! {
        #[test]
        fn repr_round_trips(l in any::<u32>(), r in any::<u32>(), pd in bytes::<224>()) {
            let repr = Repr { local_comm_id: l, remote_comm_id: r, private_data: pd };
            let mut buf = [0u8; DATA_LEN];
            repr.emit_bytes(&mut buf);
            prop_assert_eq!(Repr::parse_bytes(&buf).unwrap(), repr);
        }

        #[test]
        fn bytes_round_trip(d in bytes::<DATA_LEN>()) {
            let mut out = [0u8; DATA_LEN];
            Repr::parse_bytes(&d).unwrap().emit_bytes(&mut out);
            prop_assert_eq!(&out[..], &d[..]);
        }
    }
}
