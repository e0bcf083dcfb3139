//! DREQ (DisconnectRequest, attribute 0x0015): IBTA vol. 1 table 112, `struct cm_dreq_msg`
//! [cm_msgs.h], `CM_DREQ_*` [ibta_vol1_c12.h]. Offsets are from the start of the data area
//! (MAD byte 24); tshark 4.0 names are `infiniband.cm.dreq.*`, except the remote QPN, which
//! tshark calls `infiniband.cm.req.remoteqpneecn`.

use crate::cm::{check_data_len, DATA_LEN};

/// Byte positions inside the DREQ body (data-area offsets).
pub mod field {
    use crate::field::*;
    /// Local Communication ID. tshark: `infiniband.cm.dreq.localcommid`.
    pub const LOCAL_COMM_ID: Field = 0..4;
    /// Remote Communication ID. tshark: `infiniband.cm.dreq.remotecommid`.
    pub const REMOTE_COMM_ID: Field = 4..8;
    /// Remote QPN/EECN (24). tshark: `infiniband.cm.req.remoteqpneecn`.
    pub const REMOTE_QPN_EECN: Field = 8..11;
    /// Reserved byte after the QPN.
    pub const RESERVED_11: usize = 11;
    /// Private data (220 bytes). tshark: `infiniband.cm.dreq.private`.
    pub const PRIVATE_DATA: Field = 12..232;
}

fixed_view!(check: check_data_len);

wire_fields! {
    /// An owned DREQ body.
    #[cfg_attr(feature = "serde", derive(serde::Serialize))]
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Repr {
        /// Local Communication ID.
        local_comm_id, set_local_comm_id: u32 = be32(field::LOCAL_COMM_ID),
        /// Remote Communication ID.
        remote_comm_id, set_remote_comm_id: u32 = be32(field::REMOTE_COMM_ID),
        /// Remote QPN/EECN (24 bits).
        remote_qpn_eecn, set_remote_qpn_eecn: u32 = be24(field::REMOTE_QPN_EECN),
        /// Reserved byte 11.
        reserved_11, set_reserved_11: u8 = u8(field::RESERVED_11),
        /// Private data (220 bytes).
        private_data, private_data_mut: [u8; 220] = bytes(field::PRIVATE_DATA),
    }
}

cm_body!(private_data: 220, "IB_CM_DREQ_PRIVATE_DATA_SIZE");

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::cm::test_util::*;
    use crate::error::{Error, Layer};
    use proptest::prelude::*;

    #[test]
    fn golden_kernel_dreq() {
        // cm_format_dreq: local ID, remote ID, the peer's QPN, no private data.
        let mut d = [0u8; DATA_LEN];
        iba_set32(&mut d, 0, 32, 0x1234_5678); // CM_DREQ_LOCAL_COMM_ID
        iba_set32(&mut d, 4, 32, 0xCAFE_0001); // CM_DREQ_REMOTE_COMM_ID
        iba_set32(&mut d, 8, 24, 0x12); // CM_DREQ_REMOTE_QPN_EECN
        let r =
            Repr { local_comm_id: 0x1234_5678, remote_comm_id: 0xCAFE_0001, remote_qpn_eecn: 0x12, ..Repr::default() };
        let mut out = [0u8; DATA_LEN];
        r.emit_bytes(&mut out);
        assert_eq!(out, d);
        assert_eq!(d[8..12], [0, 0, 0x12, 0]);
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
        fn repr_round_trips(l in any::<u32>(), r in any::<u32>(), q in u24(), res in any::<u8>(), pd in bytes::<220>()) {
            let repr = Repr { local_comm_id: l, remote_comm_id: r, remote_qpn_eecn: q, reserved_11: res, private_data: pd };
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
