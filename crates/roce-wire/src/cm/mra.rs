//! MRA (Message Receipt Acknowledgement, attribute 0x0011): IBTA vol. 1 table 107,
//! `struct cm_mra_msg` [cm_msgs.h], `CM_MRA_*` [ibta_vol1_c12.h]. Offsets are from the start
//! of the data area (MAD byte 24). tshark 4.0 does not dissect MRA fields.
//!
//! RDMA-CM sends `CMA_CM_MRA_SETTING` = `IB_CM_MRA_FLAG_DELAY | 24`: the flag stays in the
//! kernel, only the 5-bit timeout 24 goes on the wire.

use crate::cm::{check_data_len, MsgResponse, DATA_LEN};

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

wire_fields! {
    /// An owned MRA body.
    #[cfg_attr(feature = "serde", derive(serde::Serialize))]
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Repr {
        /// Local Communication ID.
        local_comm_id, set_local_comm_id: u32 = be32(field::LOCAL_COMM_ID),
        /// Remote Communication ID.
        remote_comm_id, set_remote_comm_id: u32 = be32(field::REMOTE_COMM_ID),
        /// Which message is acknowledged (REQ, REP, or LAP as `Other`).
        message_mraed, set_message_mraed: MsgResponse = code_bits(field::BYTE_8, 6, 2),
        /// The 6 reserved bits of byte 8.
        reserved_8, set_reserved_8: u8 = bits(field::BYTE_8, 0, 6),
        /// Service Timeout (5 bits).
        service_timeout, set_service_timeout: u8 = bits(field::BYTE_9, 3, 5),
        /// The 3 reserved bits of byte 9.
        reserved_9, set_reserved_9: u8 = bits(field::BYTE_9, 0, 3),
        /// Private data (222 bytes).
        private_data, private_data_mut: [u8; 222] = bytes(field::PRIVATE_DATA),
    }
}

cm_body!(private_data: 222, "IB_CM_MRA_PRIVATE_DATA_SIZE");

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
