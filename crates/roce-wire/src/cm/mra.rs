//! MRA (Message Receipt Acknowledgement, attribute 0x0011): IBTA vol. 1 table 107,
//! `struct cm_mra_msg` [cm_msgs.h], `CM_MRA_*` [ibta_vol1_c12.h]. Offsets are from the start
//! of the data area (MAD byte 24). tshark 4.0 does not dissect MRA fields.
//!
//! RDMA-CM sends `CMA_CM_MRA_SETTING` = `IB_CM_MRA_FLAG_DELAY | 24`: the flag stays in the
//! kernel, only the 5-bit timeout 24 goes on the wire.

use crate::cm::{check_data_len, get_bits, set_bits, MsgResponse, DATA_LEN};
use crate::error::Result;
use crate::field::{array, be32, put32};

/// Byte positions inside the MRA body (data-area offsets).
pub mod field {
    use crate::field::*;
    /// Local Communication ID.
    pub const LOCAL_COMM_ID: Field = 0..4;
    /// Remote Communication ID.
    pub const REMOTE_COMM_ID: Field = 4..8;
    /// Message MRAed (bits 7:6), reserved (bits 5:0).
    pub const BYTE_8: usize = 8;
    /// Service Timeout (bits 7:3), reserved (bits 2:0).
    pub const BYTE_9: usize = 9;
    /// Private data (222 bytes).
    pub const PRIVATE_DATA: Field = 10..232;
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
    /// Message MRAed (2 bits).
    pub fn message_mraed(&self) -> MsgResponse {
        MsgResponse::from(get_bits(self.buffer.as_ref()[field::BYTE_8], 6, 2))
    }
    /// The 6 reserved bits of byte 8.
    pub fn reserved_8(&self) -> u8 {
        get_bits(self.buffer.as_ref()[field::BYTE_8], 0, 6)
    }
    /// Service Timeout (5 bits; 4.096 µs · 2^n).
    pub fn service_timeout(&self) -> u8 {
        get_bits(self.buffer.as_ref()[field::BYTE_9], 3, 5)
    }
    /// The 3 reserved bits of byte 9.
    pub fn reserved_9(&self) -> u8 {
        get_bits(self.buffer.as_ref()[field::BYTE_9], 0, 3)
    }
    /// The 222 bytes of private data.
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
    /// Set Message MRAed (low 2 bits of the code).
    pub fn set_message_mraed(&mut self, v: MsgResponse) {
        set_bits(&mut self.buffer.as_mut()[field::BYTE_8], 6, 2, u8::from(v))
    }
    /// Set the reserved bits of byte 8.
    pub fn set_reserved_8(&mut self, v: u8) {
        set_bits(&mut self.buffer.as_mut()[field::BYTE_8], 0, 6, v)
    }
    /// Set the Service Timeout (5 bits).
    pub fn set_service_timeout(&mut self, v: u8) {
        set_bits(&mut self.buffer.as_mut()[field::BYTE_9], 3, 5, v)
    }
    /// Set the reserved bits of byte 9.
    pub fn set_reserved_9(&mut self, v: u8) {
        set_bits(&mut self.buffer.as_mut()[field::BYTE_9], 0, 3, v)
    }
    /// The private data, writable.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PRIVATE_DATA]
    }
}

/// An owned MRA body.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Local Communication ID.
    pub local_comm_id: u32,
    /// Remote Communication ID.
    pub remote_comm_id: u32,
    /// Which message is acknowledged (REQ, REP, or LAP as `Other`).
    pub message_mraed: MsgResponse,
    /// The 6 reserved bits of byte 8.
    pub reserved_8: u8,
    /// Service Timeout (5 bits).
    pub service_timeout: u8,
    /// The 3 reserved bits of byte 9.
    pub reserved_9: u8,
    /// Private data (222 bytes).
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serde_support::hex"))]
    pub private_data: [u8; 222],
}

impl Default for Repr {
    fn default() -> Self {
        Repr {
            local_comm_id: 0,
            remote_comm_id: 0,
            message_mraed: MsgResponse::Req,
            reserved_8: 0,
            service_timeout: 0,
            reserved_9: 0,
            private_data: [0; 222],
        }
    }
}

impl Repr {
    /// The body length: the whole data area.
    pub const LEN: usize = DATA_LEN;
    /// The private-data size, `IB_CM_MRA_PRIVATE_DATA_SIZE`.
    pub const PRIVATE_DATA_LEN: usize = 222;

    /// Parse an MRA view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            local_comm_id: packet.local_comm_id(),
            remote_comm_id: packet.remote_comm_id(),
            message_mraed: packet.message_mraed(),
            reserved_8: packet.reserved_8(),
            service_timeout: packet.service_timeout(),
            reserved_9: packet.reserved_9(),
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
        packet.set_message_mraed(self.message_mraed);
        packet.set_reserved_8(self.reserved_8);
        packet.set_service_timeout(self.service_timeout);
        packet.set_reserved_9(self.reserved_9);
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
    fn golden_kernel_mra() {
        // cm_format_mra(msg_mraed = CM_MSG_RESPONSE_REQ, service_timeout = 24 (CMA_CM_MRA_SETTING
        // without the delay flag), no private data).
        let mut d = [0u8; DATA_LEN];
        iba_set8(&mut d, 8, 2, 0); // CM_MRA_MESSAGE_MRAED
        iba_set32(&mut d, 0, 32, 0xCAFE_0001); // CM_MRA_LOCAL_COMM_ID
        iba_set32(&mut d, 4, 32, 0x1234_5678); // CM_MRA_REMOTE_COMM_ID
        iba_set8(&mut d, 9, 5, 24); // CM_MRA_SERVICE_TIMEOUT
        let r = Repr {
            local_comm_id: 0xCAFE_0001,
            remote_comm_id: 0x1234_5678,
            message_mraed: MsgResponse::Req,
            service_timeout: 24,
            ..Repr::default()
        };
        let mut out = [0u8; DATA_LEN];
        r.emit_bytes(&mut out);
        assert_eq!(out, d);
        assert_eq!(d[8..10], [0x00, 0xC0]);
        assert_eq!(Repr::parse_bytes(&d).unwrap(), r);

        iba_set8(&mut d, 8, 2, 2); // MRA of a LAP
        assert_eq!(d[8], 0x80);
        assert_eq!(Repr::parse_bytes(&d).unwrap().message_mraed, MsgResponse::Other);
    }

    #[test]
    fn truncation() {
        let d = [0u8; DATA_LEN];
        for len in 0..DATA_LEN {
            assert_eq!(Repr::parse_bytes(&d[..len]), Err(Error::len(Layer::Cm, 24, DATA_LEN, len)));
        }
    }

    fn any_mra() -> impl Strategy<Value = Repr> {
        (any::<u32>(), any::<u32>(), bits(2), bits(6), bits(5), bits(3), bytes::<222>()).prop_map(
            |(l, r, m, r8, t, r9, pd)| Repr {
                local_comm_id: l,
                remote_comm_id: r,
                message_mraed: MsgResponse::from(m),
                reserved_8: r8,
                service_timeout: t,
                reserved_9: r9,
                private_data: pd,
            },
        )
    }

    proptest! {
        #[test]
        fn repr_round_trips(r in any_mra()) {
            let mut buf = [0u8; DATA_LEN];
            r.emit_bytes(&mut buf);
            prop_assert_eq!(Repr::parse_bytes(&buf).unwrap(), r);
        }

        #[test]
        fn bytes_round_trip(d in bytes::<DATA_LEN>()) {
            let mut out = [0u8; DATA_LEN];
            Repr::parse_bytes(&d).unwrap().emit_bytes(&mut out);
            prop_assert_eq!(&out[..], &d[..]);
        }
    }
}
