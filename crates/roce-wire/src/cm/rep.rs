//! REP (ConnectReply, attribute 0x0013): IBTA vol. 1 table 110, `struct cm_rep_msg`
//! [cm_msgs.h], `CM_REP_*` [ibta_vol1_c12.h]. Offsets are from the start of the data area
//! (MAD byte 24); tshark 4.0 names are `infiniband.cm.rep.*` (the Local Communication ID is
//! plainly `infiniband.cm.rep`).

use crate::cm::{check_data_len, DATA_LEN};

/// Byte positions inside the REP body (data-area offsets).
pub mod field {
    use crate::field::*;
    /// Local Communication ID. tshark: `infiniband.cm.rep`.
    pub const LOCAL_COMM_ID: Field = 0..4;
    /// Remote Communication ID. tshark: `infiniband.cm.rep.remotecommid`.
    pub const REMOTE_COMM_ID: Field = 4..8;
    /// Local Q_Key. tshark: `infiniband.cm.rep.localqkey`.
    pub const LOCAL_Q_KEY: Field = 8..12;
    /// Local QPN (24). tshark: `infiniband.cm.rep.localqpn`.
    pub const LOCAL_QPN: Field = 12..15;
    /// Reserved byte after the QPN.
    pub const RESERVED_15: usize = 15;
    /// Local EE Context Number (24). tshark: `infiniband.cm.rep.localeecn`.
    pub const LOCAL_EECN: Field = 16..19;
    /// Reserved byte after the EECN.
    pub const RESERVED_19: usize = 19;
    /// Starting PSN (24). tshark: `infiniband.cm.rep.startpsn`.
    pub const STARTING_PSN: Field = 20..23;
    /// Reserved byte after the PSN.
    pub const RESERVED_23: usize = 23;
    /// Responder Resources. tshark: `infiniband.cm.rep.respres`.
    pub const RESPONDER_RESOURCES: usize = 24;
    /// Initiator Depth. tshark: `infiniband.cm.rep.initdepth`.
    pub const INITIATOR_DEPTH: usize = 25;
    /// Target ACK Delay (bits 7:3, `tgtackdelay`), Failover Accepted (bits 2:1,
    /// `failoveracc`), End-to-End Flow Control (bit 0, `e2eflowctrl`).
    pub const BYTE_26: usize = 26;
    /// RNR Retry Count (bits 7:5, `rnrretrcount`), SRQ (bit 4, `srq`), reserved (bits 3:0,
    /// `reserved`).
    pub const BYTE_27: usize = 27;
    /// Local CA GUID. tshark: `infiniband.cm.rep.localcaguid`.
    pub const LOCAL_CA_GUID: Field = 28..36;
    /// Private data (196 bytes). tshark: `infiniband.cm.rep.private`.
    pub const PRIVATE_DATA: Field = 36..232;
}

fixed_view!(check: check_data_len);

wire_fields! {
    /// An owned REP body.
    #[cfg_attr(feature = "serde", derive(serde::Serialize))]
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Repr {
        /// Local Communication ID.
        local_comm_id, set_local_comm_id: u32 = be32(field::LOCAL_COMM_ID),
        /// Remote Communication ID.
        remote_comm_id, set_remote_comm_id: u32 = be32(field::REMOTE_COMM_ID),
        /// Local Q_Key.
        local_qkey, set_local_qkey: u32 = be32(field::LOCAL_Q_KEY),
        /// Local QPN (24 bits).
        local_qpn, set_local_qpn: u32 = be24(field::LOCAL_QPN),
        /// Reserved byte 15.
        reserved_15, set_reserved_15: u8 = u8(field::RESERVED_15),
        /// Local EE Context Number (24 bits; the XRC TGT QPN for XRC).
        local_eecn, set_local_eecn: u32 = be24(field::LOCAL_EECN),
        /// Reserved byte 19.
        reserved_19, set_reserved_19: u8 = u8(field::RESERVED_19),
        /// Starting PSN (24 bits).
        starting_psn, set_starting_psn: u32 = be24(field::STARTING_PSN),
        /// Reserved byte 23.
        reserved_23, set_reserved_23: u8 = u8(field::RESERVED_23),
        /// Responder Resources.
        responder_resources, set_responder_resources: u8 = u8(field::RESPONDER_RESOURCES),
        /// Initiator Depth.
        initiator_depth, set_initiator_depth: u8 = u8(field::INITIATOR_DEPTH),
        /// Target ACK Delay (5 bits).
        target_ack_delay, set_target_ack_delay: u8 = bits(field::BYTE_26, 3, 5),
        /// Failover Accepted (2 bits).
        failover_accepted, set_failover_accepted: u8 = bits(field::BYTE_26, 1, 2),
        /// End-to-End Flow Control.
        end_to_end_flow_control, set_end_to_end_flow_control: bool = flag(field::BYTE_26, 0),
        /// RNR Retry Count (3 bits).
        rnr_retry_count, set_rnr_retry_count: u8 = bits(field::BYTE_27, 5, 3),
        /// SRQ.
        srq, set_srq: bool = flag(field::BYTE_27, 4),
        /// The 4 reserved bits of byte 27.
        reserved_27, set_reserved_27: u8 = bits(field::BYTE_27, 0, 4),
        /// Local CA GUID.
        local_ca_guid, set_local_ca_guid: u64 = be64(field::LOCAL_CA_GUID),
        /// Private data (196 bytes).
        private_data, private_data_mut: [u8; 196] = bytes(field::PRIVATE_DATA),
    }
}

cm_body!(private_data: 196, "IB_CM_REP_PRIVATE_DATA_SIZE");

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::cm::test_util::*;
    use crate::error::{Error, Layer};
    use proptest::prelude::*;

    #[test]
    fn golden_kernel_rep() {
        // cm_format_rep for cma_accept_ib on RC: QPN, PSN, resources, failover 0, flow
        // control 1, RNR retry 7, SRQ 0, target ACK delay from the device, node GUID.
        let mut d = [0u8; DATA_LEN];
        iba_set32(&mut d, 0, 32, 0xCAFE_0001); // CM_REP_LOCAL_COMM_ID
        iba_set32(&mut d, 4, 32, 0x1234_5678); // CM_REP_REMOTE_COMM_ID
        iba_set32(&mut d, 12, 24, 0x12); // CM_REP_LOCAL_QPN
        iba_set32(&mut d, 20, 24, 0x65_4321); // CM_REP_STARTING_PSN
        iba_set8(&mut d, 24, 8, 1); // CM_REP_RESPONDER_RESOURCES
        iba_set8(&mut d, 25, 8, 1); // CM_REP_INITIATOR_DEPTH
        iba_set8(&mut d, 26, 5, 15); // CM_REP_TARGET_ACK_DELAY
        iba_set_bloc(&mut d, 26, 5, 2, 0); // CM_REP_FAILOVER_ACCEPTED
        iba_set_bloc(&mut d, 26, 7, 1, 1); // CM_REP_END_TO_END_FLOW_CONTROL
        iba_set8(&mut d, 27, 3, 7); // CM_REP_RNR_RETRY_COUNT
        iba_set_bloc(&mut d, 27, 3, 1, 1); // CM_REP_SRQ
        iba_set64(&mut d, 28, 0x5254_00ff_fe65_4321); // CM_REP_LOCAL_CA_GUID
        let r = Repr {
            local_comm_id: 0xCAFE_0001,
            remote_comm_id: 0x1234_5678,
            local_qpn: 0x12,
            starting_psn: 0x65_4321,
            responder_resources: 1,
            initiator_depth: 1,
            target_ack_delay: 15,
            end_to_end_flow_control: true,
            rnr_retry_count: 7,
            srq: true,
            local_ca_guid: 0x5254_00ff_fe65_4321,
            ..Repr::default()
        };
        let mut out = [0u8; DATA_LEN];
        r.emit_bytes(&mut out);
        assert_eq!(out, d);
        assert_eq!(d[12..16], [0, 0, 0x12, 0]);
        assert_eq!(d[26..28], [15 << 3 | 1, 0xF0]);
        assert_eq!(Repr::parse_bytes(&d).unwrap(), r);
    }

    #[test]
    fn truncation() {
        let d = [0u8; DATA_LEN];
        for len in 0..DATA_LEN {
            assert_eq!(Repr::parse_bytes(&d[..len]), Err(Error::len(Layer::Cm, 24, DATA_LEN, len)));
        }
    }

    fn any_rep() -> impl Strategy<Value = Repr> {
        (
            (any::<u32>(), any::<u32>(), any::<u32>(), u24(), any::<u8>(), u24(), any::<u8>(), u24(), any::<u8>()),
            (any::<u8>(), any::<u8>(), bits(5), bits(2), any::<bool>(), bits(3), any::<bool>(), bits(4)),
            (any::<u64>(), bytes::<196>()),
        )
            .prop_map(|(a, b, c)| Repr {
                local_comm_id: a.0,
                remote_comm_id: a.1,
                local_qkey: a.2,
                local_qpn: a.3,
                reserved_15: a.4,
                local_eecn: a.5,
                reserved_19: a.6,
                starting_psn: a.7,
                reserved_23: a.8,
                responder_resources: b.0,
                initiator_depth: b.1,
                target_ack_delay: b.2,
                failover_accepted: b.3,
                end_to_end_flow_control: b.4,
                rnr_retry_count: b.5,
                srq: b.6,
                reserved_27: b.7,
                local_ca_guid: c.0,
                private_data: c.1,
            })
    }

    proptest! {
        #[test]
        fn repr_round_trips(r in any_rep()) {
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
