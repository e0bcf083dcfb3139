//! REQ (ConnectRequest, attribute 0x0010): IBTA vol. 1 table 106, `struct cm_req_msg`.
//!
//! Layout and bit positions follow `CM_REQ_*` in [ibta_vol1_c12.h] (`CM_FIELD32_LOC(s, o, w)`:
//! the top `w` bits of the big-endian word at `o & !3`, starting at byte `o`;
//! `CM_FIELD8_LOC(s, o, w)`: the top `w` bits of byte `o`; `CM_FIELD_BLOC(s, o, b, w)`: `w` bits
//! of byte `o` starting `b` bits below its MSB). Offsets below are from the start of the data
//! area (MAD byte 24). tshark (4.0) field names are given as `tshark:`; note that tshark calls
//! the Local Communication ID plainly `infiniband.cm.req`.

use crate::cm::{check_data_len, get_bits, set_bits, DATA_LEN, DATA_OFFSET};
use crate::error::Result;
use crate::field::{array, be16, be32, put16, put32};
use crate::gid::Gid;

/// Byte positions inside the REQ body (data-area offsets).
pub mod field {
    use crate::field::*;
    /// Local Communication ID (32). tshark: `infiniband.cm.req`.
    pub const LOCAL_COMM_ID: Field = 0..4;
    /// Reserved.
    pub const RESERVED_4: Field = 4..8;
    /// ServiceID (64). tshark: `infiniband.cm.req.serviceid`.
    pub const SERVICE_ID: Field = 8..16;
    /// Local CA GUID (64). tshark: `infiniband.cm.req.localcaguid`.
    pub const LOCAL_CA_GUID: Field = 16..24;
    /// Reserved.
    pub const RESERVED_24: Field = 24..28;
    /// Local Q_Key (32). tshark: `infiniband.cm.req.localqkey`.
    pub const LOCAL_Q_KEY: Field = 28..32;
    /// Local QPN (24). tshark: `infiniband.cm.req.localqpn`.
    pub const LOCAL_QPN: Field = 32..35;
    /// Responder Resources (8). tshark: `infiniband.cm.req.responderres`.
    pub const RESPONDER_RESOURCES: usize = 35;
    /// Local EECN (24). tshark: `infiniband.cm.req.localeecn`.
    pub const LOCAL_EECN: Field = 36..39;
    /// Initiator Depth (8). tshark: `infiniband.cm.req.initdepth`.
    pub const INITIATOR_DEPTH: usize = 39;
    /// Remote EECN (24). tshark: `infiniband.cm.req.remoteeecn`.
    pub const REMOTE_EECN: Field = 40..43;
    /// Remote CM Response Timeout (bits 7:3, tshark `remoteresptout`), Transport Service Type
    /// (bits 2:1, `transpsvctype`), End-to-End Flow Control (bit 0, `e2eflowctrl`).
    pub const BYTE_43: usize = 43;
    /// Starting PSN (24). tshark: `infiniband.cm.req.startpsn`.
    pub const STARTING_PSN: Field = 44..47;
    /// Local CM Response Timeout (bits 7:3, `localresptout`), Retry Count (bits 2:0, `retrcount`).
    pub const BYTE_47: usize = 47;
    /// Partition Key (16). tshark: `infiniband.cm.req.pkey`.
    pub const PARTITION_KEY: Field = 48..50;
    /// Path Packet Payload MTU (bits 7:4, `pppmtu`), RDC Exists (bit 3, `rdcexist`),
    /// RNR Retry Count (bits 2:0, `rnrretrcount`).
    pub const BYTE_50: usize = 50;
    /// Max CM Retries (bits 7:4, `maxcmretr`), SRQ (bit 3, `srq`), Extended Transport Type
    /// (bits 2:0, `ext_transport`).
    pub const BYTE_51: usize = 51;
    /// The primary path (44 bytes, see [`super::path`]). tshark: `prim_*`.
    pub const PRIMARY_PATH: Field = 52..96;
    /// The alternate path (44 bytes). tshark: `alt_*`.
    pub const ALTERNATE_PATH: Field = 96..140;
    /// Alternate Local ACK Timeout (bits 7:3), SAP Supported (bit 2), reserved (bits 1:0).
    pub const BYTE_139: usize = 139;
    /// Private data (92 bytes). tshark: `infiniband.cm.req.private`, and
    /// `infiniband.cm.req.ip_cm.*` for the RDMA-CM header inside it.
    pub const PRIVATE_DATA: Field = 140..232;
}

/// Byte positions inside one 44-byte path block (primary at data byte 52, alternate at 96).
pub mod path {
    use crate::field::*;
    /// Local Port LID (16). tshark: `prim_locallid` / `alt_locallid`.
    pub const LOCAL_LID: Field = 0..2;
    /// Remote Port LID (16). tshark: `prim_remotelid` / `alt_remotelid`.
    pub const REMOTE_LID: Field = 2..4;
    /// Local Port GID (128). tshark: `prim_localgid` / `alt_localgid`.
    pub const LOCAL_GID: Field = 4..20;
    /// Remote Port GID (128). tshark: `prim_remotegid` / `alt_remotegid`.
    pub const REMOTE_GID: Field = 20..36;
    /// Big-endian word: Flow Label (bits 31:12, `prim_flowlabel`), reserved (bits 11:6,
    /// `prim_reserved0`), Packet Rate (bits 5:0, `prim_pktrate`).
    pub const FLOW_LABEL_RATE: Field = 36..40;
    /// Traffic Class (8). tshark: `prim_tfcclass`.
    pub const TRAFFIC_CLASS: usize = 40;
    /// Hop Limit (8). tshark: `prim_hoplim`.
    pub const HOP_LIMIT: usize = 41;
    /// SL (bits 7:4, `prim_sl`), Subnet Local (bit 3, `prim_subnetlocal`), reserved (2:0).
    pub const SL_BYTE: usize = 42;
    /// Local ACK Timeout (bits 7:3, `prim_localacktout`), reserved (2:0; in the alternate path
    /// bit 2 is SAP Supported).
    pub const ACK_BYTE: usize = 43;
    /// The size of a path block.
    pub const LEN: usize = 44;
}

/// Transport Service Type codes (2 bits at byte 43) [cm_msgs.h cm_req_set_qp_type].
pub mod transport {
    /// Reliable Connected.
    pub const RC: u8 = 0;
    /// Unreliable Connected.
    pub const UC: u8 = 1;
    /// Reliable Datagram.
    pub const RD: u8 = 2;
    /// Extended: see Extended Transport Type (XRC when that is 1).
    pub const EXTENDED: u8 = 3;
    /// Extended Transport Type value for XRC.
    pub const EXT_XRC: u8 = 1;
}

/// One path of a REQ (primary or alternate), 44 bytes.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PathRepr {
    /// Local Port LID; RoCE peers write 0xFFFF (permissive) when the hop limit is above 1.
    pub local_lid: u16,
    /// Remote Port LID.
    pub remote_lid: u16,
    /// Local Port GID (on RoCEv2 the sender's IPv4-mapped or IPv6 address).
    pub local_gid: Gid,
    /// Remote Port GID.
    pub remote_gid: Gid,
    /// Flow Label (20 bits).
    pub flow_label: u32,
    /// The 6 reserved bits between Flow Label and Packet Rate.
    pub reserved_rate: u8,
    /// Packet Rate (6 bits, `enum ib_rate`).
    pub packet_rate: u8,
    /// Traffic Class.
    pub traffic_class: u8,
    /// Hop Limit.
    pub hop_limit: u8,
    /// Service Level (4 bits).
    pub sl: u8,
    /// Subnet Local (the kernel sets it when the hop limit is at most 1).
    pub subnet_local: bool,
    /// The 3 reserved bits after Subnet Local.
    pub reserved_sl: u8,
    /// Local ACK Timeout (5 bits).
    pub local_ack_timeout: u8,
    /// The 3 reserved bits after Local ACK Timeout. In the alternate path bit 2 of them is SAP
    /// Supported, which lives in [`Repr::sap_supported`]: parse leaves it 0 here and emit ignores
    /// it for the alternate path.
    pub reserved_ack: u8,
}

impl PathRepr {
    /// The size of a path block.
    pub const LEN: usize = path::LEN;

    /// Read a path block. `b` must hold 44 bytes (an array, so this cannot fail).
    pub fn from_bytes(b: &[u8; path::LEN]) -> PathRepr {
        let word = be32(b, path::FLOW_LABEL_RATE.start);
        let sl = b[path::SL_BYTE];
        let ack = b[path::ACK_BYTE];
        PathRepr {
            local_lid: be16(b, path::LOCAL_LID.start),
            remote_lid: be16(b, path::REMOTE_LID.start),
            local_gid: Gid(array(b, path::LOCAL_GID.start)),
            remote_gid: Gid(array(b, path::REMOTE_GID.start)),
            flow_label: word >> 12,
            reserved_rate: ((word >> 6) & 0x3F) as u8,
            packet_rate: (word & 0x3F) as u8,
            traffic_class: b[path::TRAFFIC_CLASS],
            hop_limit: b[path::HOP_LIMIT],
            sl: get_bits(sl, 4, 4),
            subnet_local: get_bits(sl, 3, 1) != 0,
            reserved_sl: get_bits(sl, 0, 3),
            local_ack_timeout: get_bits(ack, 3, 5),
            reserved_ack: get_bits(ack, 0, 3),
        }
    }

    /// The 44-byte block of this path (values wider than their fields are masked).
    pub fn to_bytes(&self) -> [u8; path::LEN] {
        let mut b = [0u8; path::LEN];
        put16(&mut b, path::LOCAL_LID.start, self.local_lid);
        put16(&mut b, path::REMOTE_LID.start, self.remote_lid);
        b[path::LOCAL_GID].copy_from_slice(&self.local_gid.0);
        b[path::REMOTE_GID].copy_from_slice(&self.remote_gid.0);
        let word = ((self.flow_label & 0xF_FFFF) << 12)
            | ((self.reserved_rate as u32 & 0x3F) << 6)
            | (self.packet_rate as u32 & 0x3F);
        put32(&mut b, path::FLOW_LABEL_RATE.start, word);
        b[path::TRAFFIC_CLASS] = self.traffic_class;
        b[path::HOP_LIMIT] = self.hop_limit;
        set_bits(&mut b[path::SL_BYTE], 4, 4, self.sl);
        set_bits(&mut b[path::SL_BYTE], 3, 1, self.subnet_local as u8);
        set_bits(&mut b[path::SL_BYTE], 0, 3, self.reserved_sl);
        set_bits(&mut b[path::ACK_BYTE], 3, 5, self.local_ack_timeout);
        set_bits(&mut b[path::ACK_BYTE], 0, 3, self.reserved_ack);
        b
    }
}

fixed_view!(check: check_data_len);

wire_fields! {
    /// An owned REQ body.
    #[cfg_attr(feature = "serde", derive(serde::Serialize))]
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Repr {
        /// Local Communication ID.
        local_comm_id, set_local_comm_id: u32 = be32(field::LOCAL_COMM_ID),
        /// Reserved bytes 4..8.
        reserved_4, set_reserved_4: [u8; 4] = array(field::RESERVED_4),
        /// ServiceID (for RDMA-CM IP port spaces `(ps << 16) + port`, see
        /// [`crate::cm::cma_hdr::service_id`]).
        service_id, set_service_id: u64 = be64(field::SERVICE_ID),
        /// Local CA GUID (the sender's node GUID).
        local_ca_guid, set_local_ca_guid: u64 = be64(field::LOCAL_CA_GUID),
        /// Reserved bytes 24..28.
        reserved_24, set_reserved_24: [u8; 4] = array(field::RESERVED_24),
        /// Local Q_Key (the kernel leaves it 0 for RC).
        local_qkey, set_local_qkey: u32 = be32(field::LOCAL_Q_KEY),
        /// Local QPN (24 bits).
        local_qpn, set_local_qpn: u32 = be24(field::LOCAL_QPN),
        /// Responder Resources.
        responder_resources, set_responder_resources: u8 = u8(field::RESPONDER_RESOURCES),
        /// Local EECN (24 bits).
        local_eecn, set_local_eecn: u32 = be24(field::LOCAL_EECN),
        /// Initiator Depth.
        initiator_depth, set_initiator_depth: u8 = u8(field::INITIATOR_DEPTH),
        /// Remote EECN (24 bits).
        remote_eecn, set_remote_eecn: u32 = be24(field::REMOTE_EECN),
        /// Remote CM Response Timeout (5 bits; 4.096 µs · 2^n).
        remote_cm_response_timeout, set_remote_cm_response_timeout: u8 = bits(field::BYTE_43, 3, 5),
        /// Transport Service Type (2 bits, see [`transport`]).
        transport_service_type, set_transport_service_type: u8 = bits(field::BYTE_43, 1, 2),
        /// End-to-End Flow Control.
        end_to_end_flow_control, set_end_to_end_flow_control: bool = flag(field::BYTE_43, 0),
        /// Starting PSN (24 bits).
        starting_psn, set_starting_psn: u32 = be24(field::STARTING_PSN),
        /// Local CM Response Timeout (5 bits).
        local_cm_response_timeout, set_local_cm_response_timeout: u8 = bits(field::BYTE_47, 3, 5),
        /// Retry Count (3 bits).
        retry_count, set_retry_count: u8 = bits(field::BYTE_47, 0, 3),
        /// Partition Key.
        partition_key, set_partition_key: u16 = be16(field::PARTITION_KEY),
        /// Path Packet Payload MTU (4 bits).
        path_mtu, set_path_mtu: u8 = bits(field::BYTE_50, 4, 4),
        /// RDC Exists.
        rdc_exists, set_rdc_exists: bool = flag(field::BYTE_50, 3),
        /// RNR Retry Count (3 bits).
        rnr_retry_count, set_rnr_retry_count: u8 = bits(field::BYTE_50, 0, 3),
        /// Max CM Retries (4 bits).
        max_cm_retries, set_max_cm_retries: u8 = bits(field::BYTE_51, 4, 4),
        /// SRQ.
        srq, set_srq: bool = flag(field::BYTE_51, 3),
        /// Extended Transport Type (3 bits).
        extended_transport_type, set_extended_transport_type: u8 = bits(field::BYTE_51, 0, 3),
        /// The primary path.
        primary_path, set_primary_path: PathRepr = custom(),
        /// The alternate path (all zero when absent; the kernel treats a nonzero local LID as
        /// present).
        alternate_path, set_alternate_path: PathRepr = custom(),
        /// SAP Supported (bit 2 of byte 139, inside the alternate path's last byte).
        sap_supported, set_sap_supported: bool = flag(field::BYTE_139, 2),
        /// Private data (92 bytes; RDMA-CM puts its 36-byte header first).
        private_data, private_data_mut: [u8; 92] = bytes(field::PRIVATE_DATA),
    }
}

cm_body!(private_data: 92, "IB_CM_REQ_PRIVATE_DATA_SIZE");

/// The path blocks, which the table above reads and writes through these.
impl<T: AsRef<[u8]>> Packet<T> {
    /// The primary path block.
    pub fn primary_path(&self) -> PathRepr {
        PathRepr::from_bytes(&array(self.buffer.as_ref(), field::PRIMARY_PATH.start))
    }
    /// The alternate path block (its `reserved_ack` bit 2 cleared: see [`Self::sap_supported`]).
    pub fn alternate_path(&self) -> PathRepr {
        let mut p = PathRepr::from_bytes(&array(self.buffer.as_ref(), field::ALTERNATE_PATH.start));
        p.reserved_ack &= 0b011;
        p
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Write the primary path block.
    pub fn set_primary_path(&mut self, p: &PathRepr) {
        self.buffer.as_mut()[field::PRIMARY_PATH].copy_from_slice(&p.to_bytes())
    }
    /// Write the alternate path block, keeping the SAP Supported bit as it is.
    pub fn set_alternate_path(&mut self, p: &PathRepr) {
        let sap = self.sap_supported();
        self.buffer.as_mut()[field::ALTERNATE_PATH].copy_from_slice(&p.to_bytes());
        self.set_sap_supported(sap);
    }
}

impl Repr {
    /// Whether the REQ carries an alternate path (`cm_req_has_alt_path`: nonzero alternate
    /// local LID).
    pub const fn has_alternate_path(&self) -> bool {
        self.alternate_path.local_lid != 0
    }

    /// The RDMA-CM header at the front of the private data (IP port spaces only). Errors carry
    /// MAD offsets (private data starts at MAD byte 164).
    pub fn cma_header(&self) -> Result<crate::cm::cma_hdr::Repr> {
        crate::cm::cma_hdr::Repr::parse_bytes(&self.private_data)
            .map_err(|e| e.add_offset(DATA_OFFSET + field::PRIVATE_DATA.start))
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::cm::cma_hdr::{self, RDMA_PS_TCP};
    use crate::cm::test_util::*;
    use crate::error::{ContentError, Error, Layer};
    use core::net::{IpAddr, Ipv4Addr};
    use proptest::prelude::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

    /// A REQ built the way the kernel builds one for `rdma_connect()` on an RC QP over rxe:
    /// `cma_connect_ib` (kzalloc'ed private data, `cma_format_hdr`, service ID from
    /// `rdma_get_service_id`, timeouts CMA_CM_RESPONSE_TIMEOUT 20, CMA_MAX_CM_RETRIES 15) and
    /// `cm_format_req` (hop limit 64 > 1 → permissive LIDs, subnet local 0), written with the
    /// `CM_REQ_*` locations of ibta_vol1_c12.h through a re-implementation of `IBA_SET`.
    fn kernel_req() -> [u8; DATA_LEN] {
        let mut d = [0u8; DATA_LEN];
        let sid = cma_hdr::service_id(RDMA_PS_TCP, 7174);
        iba_set32(&mut d, 0, 32, 0x1234_5678); // CM_REQ_LOCAL_COMM_ID
        iba_set64(&mut d, 8, sid); // CM_REQ_SERVICE_ID
        iba_set64(&mut d, 16, 0x5254_00ff_fe12_3456); // CM_REQ_LOCAL_CA_GUID
        iba_set32(&mut d, 32, 24, 0x11); // CM_REQ_LOCAL_QPN
        iba_set8(&mut d, 39, 8, 1); // CM_REQ_INITIATOR_DEPTH
        iba_set8(&mut d, 43, 5, 20); // CM_REQ_REMOTE_CM_RESPONSE_TIMEOUT
        iba_set_bloc(&mut d, 43, 5, 2, 0); // cm_req_set_qp_type(RC)
        iba_set_bloc(&mut d, 43, 7, 1, 1); // CM_REQ_END_TO_END_FLOW_CONTROL
        iba_set32(&mut d, 44, 24, 0xAB_CDEF); // CM_REQ_STARTING_PSN
        iba_set8(&mut d, 47, 5, 20); // CM_REQ_LOCAL_CM_RESPONSE_TIMEOUT
        iba_set16(&mut d, 48, 16, 0xFFFF); // CM_REQ_PARTITION_KEY
        iba_set8(&mut d, 50, 4, 3); // CM_REQ_PATH_PACKET_PAYLOAD_MTU (IB_MTU_1024)
        iba_set8(&mut d, 51, 4, 15); // CM_REQ_MAX_CM_RETRIES
        iba_set8(&mut d, 35, 8, 1); // CM_REQ_RESPONDER_RESOURCES
        iba_set_bloc(&mut d, 47, 5, 3, 7); // CM_REQ_RETRY_COUNT
        iba_set_bloc(&mut d, 50, 5, 3, 7); // CM_REQ_RNR_RETRY_COUNT
        iba_set_bloc(&mut d, 51, 4, 1, 0); // CM_REQ_SRQ
        iba_set_mem(&mut d, 56, &Gid::from_ipv4(SRC).0); // CM_REQ_PRIMARY_LOCAL_PORT_GID
        iba_set_mem(&mut d, 72, &Gid::from_ipv4(DST).0); // CM_REQ_PRIMARY_REMOTE_PORT_GID
        iba_set16(&mut d, 52, 16, 0xFFFF); // CM_REQ_PRIMARY_LOCAL_PORT_LID (permissive)
        iba_set16(&mut d, 54, 16, 0xFFFF); // CM_REQ_PRIMARY_REMOTE_PORT_LID
        iba_set32(&mut d, 88, 20, 0x1_2345); // CM_REQ_PRIMARY_FLOW_LABEL
        iba_set_bloc(&mut d, 91, 2, 6, 3); // CM_REQ_PRIMARY_PACKET_RATE
        iba_set8(&mut d, 92, 8, 0); // CM_REQ_PRIMARY_TRAFFIC_CLASS
        iba_set8(&mut d, 93, 8, 64); // CM_REQ_PRIMARY_HOP_LIMIT
        iba_set8(&mut d, 94, 4, 0); // CM_REQ_PRIMARY_SL
        iba_set_bloc(&mut d, 94, 4, 1, 0); // CM_REQ_PRIMARY_SUBNET_LOCAL
        iba_set8(&mut d, 95, 5, 19); // CM_REQ_PRIMARY_LOCAL_ACK_TIMEOUT
                                     // Private data: struct cma_hdr then the user's bytes.
        let mut pd = [0u8; 36 + 4];
        pd[0] = 0; // cma_version
        pd[1] = 4 << 4; // cma_set_ip_ver(hdr, 4)
        pd[2..4].copy_from_slice(&0xC123u16.to_be_bytes()); // src4->sin_port
        pd[4 + 12..20].copy_from_slice(&SRC.octets()); // src_addr.ip4.addr
        pd[20 + 12..36].copy_from_slice(&DST.octets()); // dst_addr.ip4.addr
        pd[36..].copy_from_slice(b"ping");
        iba_set_mem(&mut d, 140, &pd); // CM_REQ_PRIVATE_DATA
        d
    }

    fn our_req() -> Repr {
        let cma = cma_hdr::Repr::new_v4(SRC, 0xC123, DST);
        let mut private_data = [0u8; 92];
        cma.emit_bytes(&mut private_data);
        private_data[36..40].copy_from_slice(b"ping");
        Repr {
            local_comm_id: 0x1234_5678,
            service_id: 0x0000_0000_0106_1C06,
            local_ca_guid: 0x5254_00ff_fe12_3456,
            local_qpn: 0x11,
            responder_resources: 1,
            initiator_depth: 1,
            remote_cm_response_timeout: 20,
            transport_service_type: transport::RC,
            end_to_end_flow_control: true,
            starting_psn: 0xAB_CDEF,
            local_cm_response_timeout: 20,
            retry_count: 7,
            partition_key: 0xFFFF,
            path_mtu: 3,
            rnr_retry_count: 7,
            max_cm_retries: 15,
            primary_path: PathRepr {
                local_lid: 0xFFFF,
                remote_lid: 0xFFFF,
                local_gid: Gid::from_ipv4(SRC),
                remote_gid: Gid::from_ipv4(DST),
                flow_label: 0x1_2345,
                packet_rate: 3,
                hop_limit: 64,
                local_ack_timeout: 19,
                ..PathRepr::default()
            },
            private_data,
            ..Repr::default()
        }
    }

    #[test]
    fn golden_kernel_req() {
        let golden = kernel_req();
        let mut out = [0u8; DATA_LEN];
        our_req().emit_bytes(&mut out);
        assert_eq!(out, golden);
        assert_eq!(Repr::parse_bytes(&golden).unwrap(), our_req());

        // Spot-check absolute bytes (data-area offsets) against the ibta_vol1_c12.h table.
        assert_eq!(golden[0..4], [0x12, 0x34, 0x56, 0x78]);
        assert_eq!(golden[8..16], [0, 0, 0, 0, 0x01, 0x06, 0x1C, 0x06]);
        assert_eq!(golden[32..36], [0x00, 0x00, 0x11, 0x01]); // QPN, responder resources
        assert_eq!(golden[36..40], [0, 0, 0, 0x01]); // EECN, initiator depth
        assert_eq!(golden[43], 20 << 3 | 0b001); // timeout 20, RC, flow control
        assert_eq!(golden[44..48], [0xAB, 0xCD, 0xEF, 20 << 3 | 7]);
        assert_eq!(golden[48..52], [0xFF, 0xFF, 0x37, 0xF0]);
        assert_eq!(golden[52..56], [0xFF; 4]);
        assert_eq!(golden[66..72], [0xFF, 0xFF, 198, 18, 0, 1]);
        assert_eq!(golden[88..92], [0x12, 0x34, 0x50, 0x03]);
        assert_eq!(golden[93], 64);
        assert_eq!(golden[95], 19 << 3);
        assert_eq!(golden[96..140], [0u8; 44]);
        assert_eq!(golden[140..144], [0x00, 0x40, 0xC1, 0x23]);
        assert_eq!(golden[144 + 12..160], [198, 18, 0, 1]);
        assert_eq!(golden[160 + 12..176], [198, 18, 0, 2]);
        assert_eq!(golden[176..180], *b"ping");

        let req = Repr::parse_bytes(&golden).unwrap();
        assert!(!req.has_alternate_path());
        let cma = req.cma_header().unwrap();
        assert_eq!(cma.src_ip(), IpAddr::V4(SRC));
        assert_eq!(cma.dst_ip(), IpAddr::V4(DST));
        assert_eq!(cma.src_port, 0xC123);
        assert_eq!(cma_hdr::split_service_id(req.service_id), (RDMA_PS_TCP, 7174));
    }

    #[test]
    fn alternate_path_and_sap_bits() {
        let mut d = [0u8; DATA_LEN];
        iba_set16(&mut d, 96, 16, 0x0102); // CM_REQ_ALTERNATE_LOCAL_PORT_LID
        iba_set16(&mut d, 98, 16, 0x0304); // CM_REQ_ALTERNATE_REMOTE_PORT_LID
        iba_set_mem(&mut d, 100, &[0xAA; 16]); // CM_REQ_ALTERNATE_LOCAL_PORT_GID
        iba_set_mem(&mut d, 116, &[0xBB; 16]); // CM_REQ_ALTERNATE_REMOTE_PORT_GID
        iba_set32(&mut d, 132, 20, 0xF_FFFF); // CM_REQ_ALTERNATE_FLOW_LABEL
        iba_set_bloc(&mut d, 135, 2, 6, 0x2A); // CM_REQ_ALTERNATE_PACKET_RATE
        iba_set8(&mut d, 136, 8, 0xB8); // CM_REQ_ALTERNATE_TRAFFIC_CLASS
        iba_set8(&mut d, 137, 8, 1); // CM_REQ_ALTERNATE_HOP_LIMIT
        iba_set8(&mut d, 138, 4, 0xA); // CM_REQ_ALTERNATE_SL
        iba_set_bloc(&mut d, 138, 4, 1, 1); // CM_REQ_ALTERNATE_SUBNET_LOCAL
        iba_set8(&mut d, 139, 5, 0x1F); // CM_REQ_ALTERNATE_LOCAL_ACK_TIMEOUT
        iba_set_bloc(&mut d, 139, 5, 1, 1); // CM_REQ_SAP_SUPPORTED
        let r = Repr::parse_bytes(&d).unwrap();
        assert!(r.has_alternate_path());
        assert!(r.sap_supported);
        let a = r.alternate_path;
        assert_eq!((a.local_lid, a.remote_lid), (0x0102, 0x0304));
        assert_eq!((a.local_gid, a.remote_gid), (Gid([0xAA; 16]), Gid([0xBB; 16])));
        assert_eq!((a.flow_label, a.reserved_rate, a.packet_rate), (0xF_FFFF, 0, 0x2A));
        assert_eq!((a.traffic_class, a.hop_limit, a.sl, a.subnet_local), (0xB8, 1, 0xA, true));
        assert_eq!((a.local_ack_timeout, a.reserved_ack), (0x1F, 0));
        let mut out = [0u8; DATA_LEN];
        r.emit_bytes(&mut out);
        assert_eq!(out, d);
    }

    #[test]
    fn reserved_bits_are_kept() {
        let mut d = [0u8; DATA_LEN];
        d[4..8].copy_from_slice(&[1, 2, 3, 4]);
        d[24..28].copy_from_slice(&[5, 6, 7, 8]);
        d[90] = 0x0F; // flow label word bits 11:8 (reserved)
        d[91] = 0xC0; // bits 7:6 (reserved)
        d[94] = 0x07; // reserved after subnet local
        d[95] = 0x07; // reserved after ack timeout
        d[139] = 0x03; // alternate reserved (not SAP)
        let r = Repr::parse_bytes(&d).unwrap();
        assert_eq!(r.primary_path.reserved_rate, 0x3F);
        assert_eq!(r.primary_path.reserved_sl, 7);
        assert_eq!(r.primary_path.reserved_ack, 7);
        assert_eq!(r.alternate_path.reserved_ack, 3);
        assert!(!r.sap_supported);
        let mut out = [0xEEu8; DATA_LEN];
        r.emit_bytes(&mut out);
        assert_eq!(out, d);
    }

    #[test]
    fn view_setters_touch_only_their_bits() {
        let mut d = [0xFFu8; DATA_LEN];
        let mut p = Packet::new_checked(&mut d[..]).unwrap();
        p.set_transport_service_type(transport::UC);
        p.set_local_qpn(0x12_3456);
        assert_eq!(p.transport_service_type(), 1);
        assert_eq!(p.remote_cm_response_timeout(), 0x1F);
        assert!(p.end_to_end_flow_control());
        assert_eq!(p.responder_resources(), 0xFF);
        assert_eq!(p.local_qpn(), 0x12_3456);
        let d = p.into_inner();
        assert_eq!(d[43], 0xFB);
    }

    #[test]
    fn truncation() {
        let d = kernel_req();
        for len in 0..DATA_LEN {
            let e = Error::len(Layer::Cm, 24, DATA_LEN, len);
            assert_eq!(Repr::parse_bytes(&d[..len]), Err(e));
            assert_eq!(Packet::new_checked(&d[..len]).unwrap_err(), e);
        }
    }

    #[test]
    fn bad_cma_header_offset_is_a_mad_offset() {
        let mut r = our_req();
        r.private_data[1] = 0x50; // IP version 5
        assert_eq!(r.cma_header(), Err(Error::content(Layer::CmaHeader, 24 + 140 + 1, ContentError::Malformed)));
    }

    fn any_path(alternate: bool) -> impl Strategy<Value = PathRepr> {
        (
            (any::<u16>(), any::<u16>(), any::<[u8; 16]>(), any::<[u8; 16]>()),
            (0u32..=0xF_FFFF, bits(6), bits(6), any::<u8>(), any::<u8>()),
            (bits(4), any::<bool>(), bits(3), bits(5), bits(if alternate { 2 } else { 3 })),
        )
            .prop_map(|((ll, rl, lg, rg), (fl, rr, pr, tc, hl), (sl, sn, rs, at, ra))| PathRepr {
                local_lid: ll,
                remote_lid: rl,
                local_gid: Gid(lg),
                remote_gid: Gid(rg),
                flow_label: fl,
                reserved_rate: rr,
                packet_rate: pr,
                traffic_class: tc,
                hop_limit: hl,
                sl,
                subnet_local: sn,
                reserved_sl: rs,
                local_ack_timeout: at,
                reserved_ack: ra,
            })
    }

    fn any_req() -> impl Strategy<Value = Repr> {
        (
            (any::<u32>(), any::<[u8; 4]>(), any::<u64>(), any::<u64>(), any::<[u8; 4]>(), any::<u32>()),
            (u24(), any::<u8>(), u24(), any::<u8>(), u24()),
            (bits(5), bits(2), any::<bool>(), u24(), bits(5), bits(3), any::<u16>()),
            (bits(4), any::<bool>(), bits(3), bits(4), any::<bool>(), bits(3)),
            (any_path(false), any_path(true), any::<bool>(), bytes::<92>()),
        )
            .prop_map(|(a, b, c, d, e)| Repr {
                local_comm_id: a.0,
                reserved_4: a.1,
                service_id: a.2,
                local_ca_guid: a.3,
                reserved_24: a.4,
                local_qkey: a.5,
                local_qpn: b.0,
                responder_resources: b.1,
                local_eecn: b.2,
                initiator_depth: b.3,
                remote_eecn: b.4,
                remote_cm_response_timeout: c.0,
                transport_service_type: c.1,
                end_to_end_flow_control: c.2,
                starting_psn: c.3,
                local_cm_response_timeout: c.4,
                retry_count: c.5,
                partition_key: c.6,
                path_mtu: d.0,
                rdc_exists: d.1,
                rnr_retry_count: d.2,
                max_cm_retries: d.3,
                srq: d.4,
                extended_transport_type: d.5,
                primary_path: e.0,
                alternate_path: e.1,
                sap_supported: e.2,
                private_data: e.3,
            })
    }

    proptest! {
        #[test]
        fn repr_round_trips(r in any_req()) {
            let mut buf = [0u8; DATA_LEN];
            r.emit_bytes(&mut buf);
            prop_assert_eq!(Repr::parse_bytes(&buf).unwrap(), r);
        }

        #[test]
        fn bytes_round_trip(d in bytes::<DATA_LEN>()) {
            let r = Repr::parse_bytes(&d).unwrap();
            let mut out = [0u8; DATA_LEN];
            r.emit_bytes(&mut out);
            prop_assert_eq!(&out[..], &d[..]);
        }
    }
}
