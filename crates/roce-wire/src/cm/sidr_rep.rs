//! SIDR_REP (Service ID Resolution Response, attribute 0x0018): IBTA vol. 1 table 120,
//! `struct cm_sidr_rep_msg` [cm_msgs.h], `CM_SIDR_REP_*` [ibta_vol1_c12.h]. Offsets are from
//! the start of the data area (MAD byte 24). tshark 4.0 does not dissect SIDR fields.
//!
//! The kernel (`cm_format_sidr_rep`) sets RequestID, Status, QPN, ServiceID, Q_Key, the
//! additional information and private data, but not the Additional Information Length.

use crate::cm::{check_data_len, DATA_LEN};

/// Byte positions inside the SIDR_REP body (data-area offsets).
pub mod field {
    use crate::field::*;
    /// RequestID (32), echoed from the SIDR_REQ.
    pub const REQUEST_ID: Field = 0..4;
    /// Status (8).
    pub const STATUS: usize = 4;
    /// Additional Information Length (8).
    pub const ADDITIONAL_INFO_LENGTH: usize = 5;
    /// Reserved.
    pub const RESERVED_6: Field = 6..8;
    /// QPN (24).
    pub const QPN: Field = 8..11;
    /// Reserved byte after the QPN.
    pub const RESERVED_11: usize = 11;
    /// ServiceID (64, not 8-byte aligned).
    pub const SERVICE_ID: Field = 12..20;
    /// Q_Key (32).
    pub const Q_KEY: Field = 20..24;
    /// Additional Information (72 bytes, `IB_CM_SIDR_REP_INFO_LENGTH`).
    pub const ADDITIONAL_INFO: Field = 24..96;
    /// Private data (136 bytes).
    pub const PRIVATE_DATA: Field = 96..232;
}

enum_with_unknown! {
    /// SIDR_REP status, `enum ib_cm_sidr_status` [ib_cm.h] (IBTA vol. 1 table 121).
    pub enum SidrStatus(u8) {
        /// 0: the QPN and Q_Key are valid.
        Success = 0,
        /// 1: ServiceID not supported (no listener), `IB_SIDR_UNSUPPORTED`.
        ServiceIdNotSupported = 1,
        /// 2: rejected by the service provider (`rdma_reject()` on a UD id).
        Rejected = 2,
        /// 3: no QP available.
        NoQp = 3,
        /// 4: redirect (additional information holds ClassPortInfo).
        Redirect = 4,
        /// 5: unsupported class version.
        UnsupportedVersion = 5,
    }
}

fixed_view!(check: check_data_len);

wire_fields! {
    /// An owned SIDR_REP body.
    #[cfg_attr(feature = "serde", derive(serde::Serialize))]
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Repr {
        /// RequestID (the SIDR_REQ's).
        request_id, set_request_id: u32 = be32(field::REQUEST_ID),
        /// Status.
        status, set_status: SidrStatus = code8(field::STATUS),
        /// Additional Information Length.
        additional_info_length, set_additional_info_length: u8 = u8(field::ADDITIONAL_INFO_LENGTH),
        /// Reserved bytes 6..8.
        reserved_6, set_reserved_6: [u8; 2] = array(field::RESERVED_6),
        /// QPN (24 bits) of the service's UD QP.
        qpn, set_qpn: u32 = be24(field::QPN),
        /// Reserved byte 11.
        reserved_11, set_reserved_11: u8 = u8(field::RESERVED_11),
        /// ServiceID.
        service_id, set_service_id: u64 = be64(field::SERVICE_ID),
        /// Q_Key of the service's UD QP (RDMA-CM: `RDMA_UDP_QKEY` 0x01234567).
        qkey, set_qkey: u32 = be32(field::Q_KEY),
        /// Additional information (72 bytes).
        additional_info, additional_info_mut: [u8; 72] = bytes(field::ADDITIONAL_INFO),
        /// Private data (136 bytes).
        private_data, private_data_mut: [u8; 136] = bytes(field::PRIVATE_DATA),
    }
}

cm_body!(private_data: 136, "IB_CM_SIDR_REP_PRIVATE_DATA_SIZE");

impl Repr {
    /// The additional-information size, `IB_CM_SIDR_REP_INFO_LENGTH`.
    pub const ADDITIONAL_INFO_LEN: usize = 72;

    /// The meaningful additional-information bytes: the first `additional_info_length` (at
    /// most 72).
    pub fn additional_info_bytes(&self) -> &[u8] {
        &self.additional_info[..(self.additional_info_length as usize).min(Self::ADDITIONAL_INFO_LEN)]
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::cm::cma_hdr::{service_id, RDMA_PS_UDP};
    use crate::cm::test_util::*;
    use crate::error::{Error, Layer};
    use proptest::prelude::*;

    #[test]
    fn golden_kernel_sidr_rep() {
        // cma_send_sidr_rep(IB_SIDR_SUCCESS) → cm_format_sidr_rep: request ID, status, QPN,
        // service ID, Q_Key = RDMA_UDP_QKEY.
        let mut d = [0u8; DATA_LEN];
        iba_set32(&mut d, 0, 32, 0x0BAD_CAFE); // CM_SIDR_REP_REQUESTID
        iba_set8(&mut d, 4, 8, 0); // CM_SIDR_REP_STATUS
        iba_set32(&mut d, 8, 24, 0x13); // CM_SIDR_REP_QPN
        iba_set64(&mut d, 12, service_id(RDMA_PS_UDP, 7471)); // CM_SIDR_REP_SERVICEID
        iba_set32(&mut d, 20, 32, crate::RDMA_UDP_QKEY as u64); // CM_SIDR_REP_Q_KEY
        let r = Repr {
            request_id: 0x0BAD_CAFE,
            status: SidrStatus::Success,
            qpn: 0x13,
            service_id: 0x0000_0000_0111_1D2F,
            qkey: 0x0123_4567,
            ..Repr::default()
        };
        let mut out = [0u8; DATA_LEN];
        r.emit_bytes(&mut out);
        assert_eq!(out, d);
        assert_eq!(d[8..24], [0, 0, 0x13, 0, 0, 0, 0, 0, 0x01, 0x11, 0x1D, 0x2F, 0x01, 0x23, 0x45, 0x67]);
        assert_eq!(Repr::parse_bytes(&d).unwrap(), r);

        // cm_reject_sidr_req(IB_SIDR_UNSUPPORTED) for a ServiceID nobody listens on.
        iba_set8(&mut d, 4, 8, 1);
        assert_eq!(Repr::parse_bytes(&d).unwrap().status, SidrStatus::ServiceIdNotSupported);
    }

    #[test]
    fn status_codes() {
        assert_eq!(u8::from(SidrStatus::Rejected), 2);
        assert_eq!(u8::from(SidrStatus::UnsupportedVersion), 5);
        assert_eq!(SidrStatus::from(6), SidrStatus::Unknown(6));
    }

    #[test]
    fn truncation() {
        let d = [0u8; DATA_LEN];
        for len in 0..DATA_LEN {
            assert_eq!(Repr::parse_bytes(&d[..len]), Err(Error::len(Layer::Cm, 24, DATA_LEN, len)));
        }
    }

    fn any_sidr_rep() -> impl Strategy<Value = Repr> {
        (
            (any::<u32>(), any::<u8>(), any::<u8>(), any::<[u8; 2]>(), u24(), any::<u8>(), any::<u64>(), any::<u32>()),
            (bytes::<72>(), bytes::<136>()),
        )
            .prop_map(|(a, (info, pd))| Repr {
                request_id: a.0,
                status: SidrStatus::from(a.1),
                additional_info_length: a.2,
                reserved_6: a.3,
                qpn: a.4,
                reserved_11: a.5,
                service_id: a.6,
                qkey: a.7,
                additional_info: info,
                private_data: pd,
            })
    }

    proptest! {
        #[test]
        fn repr_round_trips(r in any_sidr_rep()) {
            let mut buf = [0u8; DATA_LEN];
            r.emit_bytes(&mut buf);
            prop_assert_eq!(Repr::parse_bytes(&buf).unwrap(), r);
            prop_assert!(r.additional_info_bytes().len() <= 72);
        }

        #[test]
        fn bytes_round_trip(d in bytes::<DATA_LEN>()) {
            let mut out = [0u8; DATA_LEN];
            Repr::parse_bytes(&d).unwrap().emit_bytes(&mut out);
            prop_assert_eq!(&out[..], &d[..]);
        }
    }
}
