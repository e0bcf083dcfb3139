//! REJ (ConnectReject, attribute 0x0012): IBTA vol. 1 table 108, `struct cm_rej_msg`
//! [cm_msgs.h], `CM_REJ_*` [ibta_vol1_c12.h]. Offsets are from the start of the data area
//! (MAD byte 24); tshark 4.0 names are `infiniband.cm.rej.*`.
//!
//! The kernel answers a REQ for a ServiceID nobody listens on with reason 8
//! ([`RejReason::InvalidServiceId`]) and `rdma_reject()` / a failing RDMA-CM listener with 28
//! ([`RejReason::ConsumerDefined`]) [cm.c; cma.c].

use crate::cm::{check_data_len, MsgResponse, DATA_LEN};

/// Byte positions inside the REJ body (data-area offsets).
pub mod field {
    use crate::field::*;
    /// Local Communication ID. tshark: `infiniband.cm.rej.localcommid`.
    pub const LOCAL_COMM_ID: Field = 0..4;
    /// Remote Communication ID. tshark: `infiniband.cm.rej.remotecommid`.
    pub const REMOTE_COMM_ID: Field = 4..8;
    /// Message REJected (bits 7:6, `msgrej`), reserved (bits 5:0; tshark's `reserved0` shows
    /// only bits 1:0).
    pub const BYTE_8: usize = 8;
    /// Reject Info Length (bits 7:1, `rejinfolen`), reserved (bit 0, `reserved1`).
    pub const BYTE_9: usize = 9;
    /// Reason (16). tshark: `infiniband.cm.rej.reason`.
    pub const REASON: Field = 10..12;
    /// Additional Reject Information (72 bytes). tshark: `infiniband.cm.rej.ari`.
    pub const ARI: Field = 12..84;
    /// Private data (148 bytes). tshark: `infiniband.cm.rej.private`.
    pub const PRIVATE_DATA: Field = 84..232;
}

enum_with_unknown! {
    /// The REJ reason, `enum ib_cm_rej_reason` [ib_cm.h] (IBTA vol. 1 table 109). The kernel
    /// names no reason 34; it is kept as `Unknown(34)` like any other unnamed code.
    pub enum RejReason(u16) {
        /// 1: no QP available.
        NoQp = 1,
        /// 2: no EEC available.
        NoEec = 2,
        /// 3: no resources available.
        NoResources = 3,
        /// 4: timeout.
        Timeout = 4,
        /// 5: unsupported request.
        Unsupported = 5,
        /// 6: invalid Communication ID.
        InvalidCommId = 6,
        /// 7: invalid communication instance.
        InvalidCommInstance = 7,
        /// 8: invalid ServiceID (no listener).
        InvalidServiceId = 8,
        /// 9: invalid transport service type.
        InvalidTransportType = 9,
        /// 10: stale connection.
        StaleConn = 10,
        /// 11: RDC does not exist.
        RdcNotExist = 11,
        /// 12: primary remote port GID rejected.
        InvalidGid = 12,
        /// 13: primary remote port LID rejected.
        InvalidLid = 13,
        /// 14: invalid primary SL.
        InvalidSl = 14,
        /// 15: invalid primary traffic class.
        InvalidTrafficClass = 15,
        /// 16: invalid primary hop limit.
        InvalidHopLimit = 16,
        /// 17: invalid primary packet rate.
        InvalidPacketRate = 17,
        /// 18: alternate remote port GID rejected.
        InvalidAltGid = 18,
        /// 19: alternate remote port LID rejected.
        InvalidAltLid = 19,
        /// 20: invalid alternate SL.
        InvalidAltSl = 20,
        /// 21: invalid alternate traffic class.
        InvalidAltTrafficClass = 21,
        /// 22: invalid alternate hop limit.
        InvalidAltHopLimit = 22,
        /// 23: invalid alternate packet rate.
        InvalidAltPacketRate = 23,
        /// 24: port and CM redirection.
        PortCmRedirect = 24,
        /// 25: port redirection.
        PortRedirect = 25,
        /// 26: invalid path MTU.
        InvalidMtu = 26,
        /// 27: insufficient responder resources.
        InsufficientRespResources = 27,
        /// 28: consumer reject (`rdma_reject()`).
        ConsumerDefined = 28,
        /// 29: invalid RNR NAK retry count.
        InvalidRnrRetry = 29,
        /// 30: duplicate local Communication ID.
        DuplicateLocalCommId = 30,
        /// 31: unsupported class version.
        InvalidClassVersion = 31,
        /// 32: invalid primary flow label.
        InvalidFlowLabel = 32,
        /// 33: invalid alternate flow label.
        InvalidAltFlowLabel = 33,
        /// 35: vendor option not supported.
        VendorOptionNotSupported = 35,
    }
}

fixed_view!(check: check_data_len);

wire_fields! {
    /// An owned REJ body.
    #[cfg_attr(feature = "serde", derive(serde::Serialize))]
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Repr {
        /// Local Communication ID.
        local_comm_id, set_local_comm_id: u32 = be32(field::LOCAL_COMM_ID),
        /// Remote Communication ID.
        remote_comm_id, set_remote_comm_id: u32 = be32(field::REMOTE_COMM_ID),
        /// Which message is rejected.
        message_rejected, set_message_rejected: MsgResponse = code_bits(field::BYTE_8, 6, 2),
        /// The 6 reserved bits of byte 8.
        reserved_8, set_reserved_8: u8 = bits(field::BYTE_8, 0, 6),
        /// Reject Info Length (7 bits).
        reject_info_length, set_reject_info_length: u8 = bits(field::BYTE_9, 1, 7),
        /// The reserved bit of byte 9.
        reserved_9, set_reserved_9: u8 = bits(field::BYTE_9, 0, 1),
        /// Reason.
        reason, set_reason: RejReason = code16(field::REASON),
        /// Additional Reject Information (72 bytes, `IB_CM_REJ_ARI_LENGTH`).
        ari, ari_mut: [u8; 72] = bytes(field::ARI),
        /// Private data (148 bytes).
        private_data, private_data_mut: [u8; 148] = bytes(field::PRIVATE_DATA),
    }
}

cm_body!(private_data: 148, "IB_CM_REJ_PRIVATE_DATA_SIZE");

impl Repr {
    /// The ARI size, `IB_CM_REJ_ARI_LENGTH`.
    pub const ARI_LEN: usize = 72;

    /// The meaningful ARI bytes: the first `reject_info_length` (at most 72).
    pub fn ari_bytes(&self) -> &[u8] {
        &self.ari[..(self.reject_info_length as usize).min(Self::ARI_LEN)]
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::cm::test_util::*;
    use crate::error::{Error, Layer};
    use proptest::prelude::*;

    #[test]
    fn golden_kernel_rej_invalid_service_id() {
        // cm_issue_rej(port, wc, IB_CM_REJ_INVALID_SERVICE_ID, CM_MSG_RESPONSE_REQ, NULL, 0)
        // answering a REQ whose local comm ID was 0x12345678.
        let mut d = [0u8; DATA_LEN];
        iba_set32(&mut d, 4, 32, 0x1234_5678); // CM_REJ_REMOTE_COMM_ID
        iba_set32(&mut d, 0, 32, 0); // CM_REJ_LOCAL_COMM_ID
        iba_set8(&mut d, 8, 2, 0); // CM_REJ_MESSAGE_REJECTED
        iba_set16(&mut d, 10, 16, 8); // CM_REJ_REASON
        let r = Repr {
            remote_comm_id: 0x1234_5678,
            message_rejected: MsgResponse::Req,
            reason: RejReason::InvalidServiceId,
            ..Repr::default()
        };
        let mut out = [0u8; DATA_LEN];
        r.emit_bytes(&mut out);
        assert_eq!(out, d);
        assert_eq!(d[..12], [0, 0, 0, 0, 0x12, 0x34, 0x56, 0x78, 0, 0, 0, 8]);
        assert_eq!(Repr::parse_bytes(&d).unwrap(), r);
    }

    #[test]
    fn golden_consumer_reject_with_ari() {
        // cm_format_rej in IB_CM_REP_RCVD state with ARI and private data.
        let mut d = [0u8; DATA_LEN];
        iba_set32(&mut d, 4, 32, 0xAAAA_0001); // CM_REJ_REMOTE_COMM_ID
        iba_set32(&mut d, 0, 32, 0xBBBB_0002); // CM_REJ_LOCAL_COMM_ID
        iba_set8(&mut d, 8, 2, 1); // CM_REJ_MESSAGE_REJECTED = REP
        iba_set16(&mut d, 10, 16, 28); // CM_REJ_REASON
        iba_set8(&mut d, 9, 7, 3); // CM_REJ_REJECTED_INFO_LENGTH
        iba_set_mem(&mut d, 12, &[9, 8, 7]); // CM_REJ_ARI
        iba_set_mem(&mut d, 84, b"nope"); // CM_REJ_PRIVATE_DATA
        assert_eq!(d[8..10], [0x40, 0x06]);
        let r = Repr::parse_bytes(&d).unwrap();
        assert_eq!(r.message_rejected, MsgResponse::Rep);
        assert_eq!(r.reason, RejReason::ConsumerDefined);
        assert_eq!(r.ari_bytes(), &[9, 8, 7]);
        assert_eq!(&r.private_data[..4], b"nope");
        let mut out = [0u8; DATA_LEN];
        r.emit_bytes(&mut out);
        assert_eq!(out, d);
    }

    #[test]
    fn reason_codes() {
        assert_eq!(u16::from(RejReason::NoQp), 1);
        assert_eq!(u16::from(RejReason::StaleConn), 10);
        assert_eq!(u16::from(RejReason::InvalidGid), 12);
        assert_eq!(u16::from(RejReason::InvalidAltFlowLabel), 33);
        assert_eq!(RejReason::from(34), RejReason::Unknown(34));
        assert_eq!(RejReason::from(35), RejReason::VendorOptionNotSupported);
        for code in 1..=35u16 {
            assert_eq!(u16::from(RejReason::from(code)), code);
            assert_eq!(matches!(RejReason::from(code), RejReason::Unknown(_)), code == 34);
        }
    }

    #[test]
    fn truncation() {
        let d = [0u8; DATA_LEN];
        for len in 0..DATA_LEN {
            assert_eq!(Repr::parse_bytes(&d[..len]), Err(Error::len(Layer::Cm, 24, DATA_LEN, len)));
        }
    }

    fn any_rej() -> impl Strategy<Value = Repr> {
        (
            (any::<u32>(), any::<u32>(), bits(2), bits(6), bits(7), bits(1), any::<u16>()),
            (bytes::<72>(), bytes::<148>()),
        )
            .prop_map(|((l, r, m, r8, len, r9, reason), (ari, pd))| Repr {
                local_comm_id: l,
                remote_comm_id: r,
                message_rejected: MsgResponse::from(m),
                reserved_8: r8,
                reject_info_length: len,
                reserved_9: r9,
                reason: RejReason::from(reason),
                ari,
                private_data: pd,
            })
    }

    proptest! {
        #[test]
        fn repr_round_trips(r in any_rej()) {
            let mut buf = [0u8; DATA_LEN];
            r.emit_bytes(&mut buf);
            prop_assert_eq!(Repr::parse_bytes(&buf).unwrap(), r);
            prop_assert!(r.ari_bytes().len() <= 72);
        }

        #[test]
        fn bytes_round_trip(d in bytes::<DATA_LEN>()) {
            let mut out = [0u8; DATA_LEN];
            Repr::parse_bytes(&d).unwrap().emit_bytes(&mut out);
            prop_assert_eq!(&out[..], &d[..]);
        }
    }
}
