//! REP (ConnectReply, attribute 0x0013): IBTA vol. 1 table 110, `struct cm_rep_msg`
//! [cm_msgs.h], `CM_REP_*` [ibta_vol1_c12.h]. Offsets are from the start of the data area
//! (MAD byte 24); tshark 4.0 names are `infiniband.cm.rep.*` (the Local Communication ID is
//! plainly `infiniband.cm.rep`).

use crate::cm::{check_data_len, get_bits, set_bits, DATA_LEN};
use crate::error::Result;
use crate::field::{array, be24, be32, be64, put24, put32, put64};

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

impl<T: AsRef<[u8]>> Packet<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Local Communication ID.
    pub fn local_comm_id(&self) -> u32 {
        be32(self.b(), field::LOCAL_COMM_ID.start)
    }
    /// Remote Communication ID.
    pub fn remote_comm_id(&self) -> u32 {
        be32(self.b(), field::REMOTE_COMM_ID.start)
    }
    /// Local Q_Key.
    pub fn local_qkey(&self) -> u32 {
        be32(self.b(), field::LOCAL_Q_KEY.start)
    }
    /// Local QPN (24 bits).
    pub fn local_qpn(&self) -> u32 {
        be24(self.b(), field::LOCAL_QPN.start)
    }
    /// Reserved byte 15.
    pub fn reserved_15(&self) -> u8 {
        self.b()[field::RESERVED_15]
    }
    /// Local EE Context Number (24 bits).
    pub fn local_eecn(&self) -> u32 {
        be24(self.b(), field::LOCAL_EECN.start)
    }
    /// Reserved byte 19.
    pub fn reserved_19(&self) -> u8 {
        self.b()[field::RESERVED_19]
    }
    /// Starting PSN (24 bits).
    pub fn starting_psn(&self) -> u32 {
        be24(self.b(), field::STARTING_PSN.start)
    }
    /// Reserved byte 23.
    pub fn reserved_23(&self) -> u8 {
        self.b()[field::RESERVED_23]
    }
    /// Responder Resources.
    pub fn responder_resources(&self) -> u8 {
        self.b()[field::RESPONDER_RESOURCES]
    }
    /// Initiator Depth.
    pub fn initiator_depth(&self) -> u8 {
        self.b()[field::INITIATOR_DEPTH]
    }
    /// Target ACK Delay (5 bits).
    pub fn target_ack_delay(&self) -> u8 {
        get_bits(self.b()[field::BYTE_26], 3, 5)
    }
    /// Failover Accepted (2 bits).
    pub fn failover_accepted(&self) -> u8 {
        get_bits(self.b()[field::BYTE_26], 1, 2)
    }
    /// End-to-End Flow Control.
    pub fn end_to_end_flow_control(&self) -> bool {
        get_bits(self.b()[field::BYTE_26], 0, 1) != 0
    }
    /// RNR Retry Count (3 bits).
    pub fn rnr_retry_count(&self) -> u8 {
        get_bits(self.b()[field::BYTE_27], 5, 3)
    }
    /// SRQ.
    pub fn srq(&self) -> bool {
        get_bits(self.b()[field::BYTE_27], 4, 1) != 0
    }
    /// The 4 reserved bits of byte 27.
    pub fn reserved_27(&self) -> u8 {
        get_bits(self.b()[field::BYTE_27], 0, 4)
    }
    /// Local CA GUID.
    pub fn local_ca_guid(&self) -> u64 {
        be64(self.b(), field::LOCAL_CA_GUID.start)
    }
    /// The 196 bytes of private data.
    pub fn private_data(&self) -> &[u8] {
        &self.b()[field::PRIVATE_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Set the Local Communication ID.
    pub fn set_local_comm_id(&mut self, v: u32) {
        put32(self.bm(), field::LOCAL_COMM_ID.start, v)
    }
    /// Set the Remote Communication ID.
    pub fn set_remote_comm_id(&mut self, v: u32) {
        put32(self.bm(), field::REMOTE_COMM_ID.start, v)
    }
    /// Set the Local Q_Key.
    pub fn set_local_qkey(&mut self, v: u32) {
        put32(self.bm(), field::LOCAL_Q_KEY.start, v)
    }
    /// Set the Local QPN (low 24 bits).
    pub fn set_local_qpn(&mut self, v: u32) {
        put24(self.bm(), field::LOCAL_QPN.start, v)
    }
    /// Set reserved byte 15.
    pub fn set_reserved_15(&mut self, v: u8) {
        self.bm()[field::RESERVED_15] = v
    }
    /// Set the Local EE Context Number (low 24 bits).
    pub fn set_local_eecn(&mut self, v: u32) {
        put24(self.bm(), field::LOCAL_EECN.start, v)
    }
    /// Set reserved byte 19.
    pub fn set_reserved_19(&mut self, v: u8) {
        self.bm()[field::RESERVED_19] = v
    }
    /// Set the Starting PSN (low 24 bits).
    pub fn set_starting_psn(&mut self, v: u32) {
        put24(self.bm(), field::STARTING_PSN.start, v)
    }
    /// Set reserved byte 23.
    pub fn set_reserved_23(&mut self, v: u8) {
        self.bm()[field::RESERVED_23] = v
    }
    /// Set Responder Resources.
    pub fn set_responder_resources(&mut self, v: u8) {
        self.bm()[field::RESPONDER_RESOURCES] = v
    }
    /// Set Initiator Depth.
    pub fn set_initiator_depth(&mut self, v: u8) {
        self.bm()[field::INITIATOR_DEPTH] = v
    }
    /// Set the Target ACK Delay (5 bits).
    pub fn set_target_ack_delay(&mut self, v: u8) {
        set_bits(&mut self.bm()[field::BYTE_26], 3, 5, v)
    }
    /// Set Failover Accepted (2 bits).
    pub fn set_failover_accepted(&mut self, v: u8) {
        set_bits(&mut self.bm()[field::BYTE_26], 1, 2, v)
    }
    /// Set End-to-End Flow Control.
    pub fn set_end_to_end_flow_control(&mut self, v: bool) {
        set_bits(&mut self.bm()[field::BYTE_26], 0, 1, v as u8)
    }
    /// Set the RNR Retry Count (3 bits).
    pub fn set_rnr_retry_count(&mut self, v: u8) {
        set_bits(&mut self.bm()[field::BYTE_27], 5, 3, v)
    }
    /// Set SRQ.
    pub fn set_srq(&mut self, v: bool) {
        set_bits(&mut self.bm()[field::BYTE_27], 4, 1, v as u8)
    }
    /// Set the reserved bits of byte 27.
    pub fn set_reserved_27(&mut self, v: u8) {
        set_bits(&mut self.bm()[field::BYTE_27], 0, 4, v)
    }
    /// Set the Local CA GUID.
    pub fn set_local_ca_guid(&mut self, v: u64) {
        put64(self.bm(), field::LOCAL_CA_GUID.start, v)
    }
    /// The private data, writable.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.bm()[field::PRIVATE_DATA]
    }
}

/// An owned REP body.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Local Communication ID.
    pub local_comm_id: u32,
    /// Remote Communication ID.
    pub remote_comm_id: u32,
    /// Local Q_Key.
    pub local_qkey: u32,
    /// Local QPN (24 bits).
    pub local_qpn: u32,
    /// Reserved byte 15.
    pub reserved_15: u8,
    /// Local EE Context Number (24 bits; the XRC TGT QPN for XRC).
    pub local_eecn: u32,
    /// Reserved byte 19.
    pub reserved_19: u8,
    /// Starting PSN (24 bits).
    pub starting_psn: u32,
    /// Reserved byte 23.
    pub reserved_23: u8,
    /// Responder Resources.
    pub responder_resources: u8,
    /// Initiator Depth.
    pub initiator_depth: u8,
    /// Target ACK Delay (5 bits).
    pub target_ack_delay: u8,
    /// Failover Accepted (2 bits).
    pub failover_accepted: u8,
    /// End-to-End Flow Control.
    pub end_to_end_flow_control: bool,
    /// RNR Retry Count (3 bits).
    pub rnr_retry_count: u8,
    /// SRQ.
    pub srq: bool,
    /// The 4 reserved bits of byte 27.
    pub reserved_27: u8,
    /// Local CA GUID.
    pub local_ca_guid: u64,
    /// Private data (196 bytes).
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serde_support::hex"))]
    pub private_data: [u8; 196],
}

impl Default for Repr {
    fn default() -> Self {
        Repr {
            local_comm_id: 0,
            remote_comm_id: 0,
            local_qkey: 0,
            local_qpn: 0,
            reserved_15: 0,
            local_eecn: 0,
            reserved_19: 0,
            starting_psn: 0,
            reserved_23: 0,
            responder_resources: 0,
            initiator_depth: 0,
            target_ack_delay: 0,
            failover_accepted: 0,
            end_to_end_flow_control: false,
            rnr_retry_count: 0,
            srq: false,
            reserved_27: 0,
            local_ca_guid: 0,
            private_data: [0; 196],
        }
    }
}

impl Repr {
    /// The body length: the whole data area.
    pub const LEN: usize = DATA_LEN;
    /// The private-data size, `IB_CM_REP_PRIVATE_DATA_SIZE`.
    pub const PRIVATE_DATA_LEN: usize = 196;

    /// Parse a REP view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            local_comm_id: packet.local_comm_id(),
            remote_comm_id: packet.remote_comm_id(),
            local_qkey: packet.local_qkey(),
            local_qpn: packet.local_qpn(),
            reserved_15: packet.reserved_15(),
            local_eecn: packet.local_eecn(),
            reserved_19: packet.reserved_19(),
            starting_psn: packet.starting_psn(),
            reserved_23: packet.reserved_23(),
            responder_resources: packet.responder_resources(),
            initiator_depth: packet.initiator_depth(),
            target_ack_delay: packet.target_ack_delay(),
            failover_accepted: packet.failover_accepted(),
            end_to_end_flow_control: packet.end_to_end_flow_control(),
            rnr_retry_count: packet.rnr_retry_count(),
            srq: packet.srq(),
            reserved_27: packet.reserved_27(),
            local_ca_guid: packet.local_ca_guid(),
            private_data: array(packet.b(), field::PRIVATE_DATA.start),
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
        packet.set_local_qkey(self.local_qkey);
        packet.set_local_qpn(self.local_qpn);
        packet.set_reserved_15(self.reserved_15);
        packet.set_local_eecn(self.local_eecn);
        packet.set_reserved_19(self.reserved_19);
        packet.set_starting_psn(self.starting_psn);
        packet.set_reserved_23(self.reserved_23);
        packet.set_responder_resources(self.responder_resources);
        packet.set_initiator_depth(self.initiator_depth);
        packet.set_target_ack_delay(self.target_ack_delay);
        packet.set_failover_accepted(self.failover_accepted);
        packet.set_end_to_end_flow_control(self.end_to_end_flow_control);
        packet.set_rnr_retry_count(self.rnr_retry_count);
        packet.set_srq(self.srq);
        packet.set_reserved_27(self.reserved_27);
        packet.set_local_ca_guid(self.local_ca_guid);
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
