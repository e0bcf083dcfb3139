//! Subnet Management Packets: the MADs of the subnet manager, carried on QP0 over VL15
//! [IBA 14.2.1; ib_smi.h `struct ib_smp`; Wireshark `parse_SUBN_LID_ROUTED`,
//! `parse_SUBN_DIRECTED_ROUTE`].
//!
//! Both kinds are 256-byte MADs whose first 24 bytes are the common MAD header
//! ([`crate::mad`]); they differ after it and in two header fields:
//!
//! | Byte | LID-routed (class 0x01) | Directed route (class 0x81) |
//! |---|---|---|
//! | 4–5 | Status | D bit (15, set on the way back) / Status (14:0) |
//! | 6 | ClassSpecific | HopPointer |
//! | 7 | ClassSpecific | HopCount |
//! | 24–31 | M_Key | M_Key |
//! | 32–63 | Reserved | DrSLID (32–33), DrDLID (34–35), Reserved (36–63) |
//! | 64–127 | SMP data (the attribute) | SMP data |
//! | 128–255 | Reserved | InitialPath (128–191), ReturnPath (192–255) |

use crate::mad::{self, MgmtClass};

/// Length of an SMP.
pub const LEN: usize = crate::MAD_SIZE;
/// Length of the SMP data (the attribute's bytes).
pub const DATA_LEN: usize = 64;
/// Where the SMP data starts in the MAD.
pub const DATA_OFFSET: usize = 64;
/// The D (direction) bit of a directed-route SMP's status word.
pub const DIRECTION_BIT: u16 = 0x8000;

enum_with_unknown! {
    /// The subnet management attributes [IBA table 145; ib_smi.h `IB_SMP_ATTR_*`].
    pub enum Attribute(u16) {
        /// ClassPortInfo.
        ClassPortInfo = 0x0001,
        /// Notice (traps).
        Notice = 0x0002,
        /// InformInfo.
        InformInfo = 0x0003,
        /// NodeDescription: 64 bytes of text.
        NodeDescription = 0x0010,
        /// NodeInfo.
        NodeInfo = 0x0011,
        /// SwitchInfo.
        SwitchInfo = 0x0012,
        /// GUIDInfo.
        GuidInfo = 0x0014,
        /// PortInfo.
        PortInfo = 0x0015,
        /// P_KeyTable.
        PKeyTable = 0x0016,
        /// SLtoVLMappingTable.
        SlToVlMappingTable = 0x0017,
        /// VLArbitrationTable.
        VlArbitrationTable = 0x0018,
        /// LinearForwardingTable.
        LinearForwardingTable = 0x0019,
        /// RandomForwardingTable.
        RandomForwardingTable = 0x001a,
        /// MulticastForwardingTable.
        MulticastForwardingTable = 0x001b,
        /// LinkSpeedWidthPairsTable.
        LinkSpeedWidthPairsTable = 0x001c,
        /// SMInfo.
        SmInfo = 0x0020,
        /// VendorDiag.
        VendorDiag = 0x0030,
        /// LedInfo.
        LedInfo = 0x0031,
    }
}

impl Attribute {
    /// The attribute's name in the IBA's spelling (`NodeDescription`, `P_KeyTable`, …;
    /// `Unknown` for others): the one table in [`mad::attribute_name`].
    pub fn name(self) -> &'static str {
        mad::attribute_name(MgmtClass::SubnLid, u16::from(self))
    }
}

/// Whether a MAD class is a subnet management class (LID-routed or directed route).
pub fn is_smp_class(class: MgmtClass) -> bool {
    matches!(class, MgmtClass::SubnLid | MgmtClass::SubnDirected)
}

/// The directed-route fields of the MAD header's status and class-specific words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DirectedHeader {
    /// The D bit: set on the return path.
    pub direction: bool,
    /// The 15-bit status.
    pub status: u16,
    /// HopPointer.
    pub hop_pointer: u8,
    /// HopCount.
    pub hop_count: u8,
}

impl DirectedHeader {
    /// Split a MAD header's `status` and `class_specific` words.
    pub const fn from_header(status: u16, class_specific: u16) -> DirectedHeader {
        DirectedHeader {
            direction: status & DIRECTION_BIT != 0,
            status: status & !DIRECTION_BIT,
            hop_pointer: (class_specific >> 8) as u8,
            hop_count: class_specific as u8,
        }
    }
}

/// A NodeDescription's text: the bytes up to the first NUL, as UTF-8 where they are
/// (lossy: a description is free text of 64 bytes).
#[cfg(feature = "alloc")]
pub fn node_description_text(data: &[u8; DATA_LEN]) -> alloc::string::String {
    let end = data.iter().position(|&b| b == 0).unwrap_or(DATA_LEN);
    alloc::string::String::from_utf8_lossy(&data[..end]).into_owned()
}

/// NodeInfo, the first 40 bytes of the SMP data of attribute 0x0011 [IBA 14.2.5.3; ib_smi.h
/// `struct ib_node_info`; Wireshark `infiniband.nodeinfo.*`].
pub mod node_info {
    use crate::error::Layer;

    /// Length of NodeInfo.
    pub const LEN: usize = 40;

    fixed_view!(Layer::Smp, LEN);

    /// Byte ranges of NodeInfo.
    pub mod field {
        #![allow(missing_docs)]
        use crate::field::Field;
        pub const BASE_VERSION: usize = 0;
        pub const CLASS_VERSION: usize = 1;
        pub const NODE_TYPE: usize = 2;
        pub const NUM_PORTS: usize = 3;
        pub const SYSTEM_IMAGE_GUID: Field = 4..12;
        pub const NODE_GUID: Field = 12..20;
        pub const PORT_GUID: Field = 20..28;
        pub const PARTITION_CAP: Field = 28..30;
        pub const DEVICE_ID: Field = 30..32;
        pub const REVISION: Field = 32..36;
        pub const LOCAL_PORT_NUM: usize = 36;
        pub const VENDOR_ID: Field = 37..40;
    }

    wire_fields! {
        /// An owned NodeInfo.
        #[cfg_attr(feature = "serde", derive(serde::Serialize))]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub struct Repr {
            /// BaseVersion.
            base_version, set_base_version: u8 = u8(field::BASE_VERSION),
            /// ClassVersion.
            class_version, set_class_version: u8 = u8(field::CLASS_VERSION),
            /// NodeType: 1 channel adapter, 2 switch, 3 router.
            node_type, set_node_type: u8 = u8(field::NODE_TYPE),
            /// NumPorts.
            num_ports, set_num_ports: u8 = u8(field::NUM_PORTS),
            /// SystemImageGUID.
            system_image_guid, set_system_image_guid: u64 = be64(field::SYSTEM_IMAGE_GUID),
            /// NodeGUID.
            node_guid, set_node_guid: u64 = be64(field::NODE_GUID),
            /// PortGUID (of the port the SMP came through).
            port_guid, set_port_guid: u64 = be64(field::PORT_GUID),
            /// PartitionCap: P_Key table entries.
            partition_cap, set_partition_cap: u16 = be16(field::PARTITION_CAP),
            /// DeviceID.
            device_id, set_device_id: u16 = be16(field::DEVICE_ID),
            /// Revision.
            revision, set_revision: u32 = be32(field::REVISION),
            /// LocalPortNum.
            local_port_num, set_local_port_num: u8 = u8(field::LOCAL_PORT_NUM),
            /// VendorID (24 bits, the OUI).
            vendor_id, set_vendor_id: u32 = be24(field::VENDOR_ID),
        }
    }
    repr_bytes!(Repr, len: LEN);

    /// A NodeType's name (`"CA"`, `"Switch"`, `"Router"`, `"Unknown"`).
    pub const fn node_type_name(t: u8) -> &'static str {
        match t {
            1 => "CA",
            2 => "Switch",
            3 => "Router",
            _ => "Unknown",
        }
    }
}

/// The LID-routed SMP after its MAD header.
pub mod lid_routed {
    use crate::error::Layer;

    fixed_view!(Layer::Smp, super::LEN; /// A checked view of a whole LID-routed SMP (256 bytes).
    );

    /// Byte ranges of a LID-routed SMP.
    pub mod field {
        #![allow(missing_docs)]
        use crate::field::Field;
        pub const M_KEY: Field = 24..32;
        pub const RESERVED_32: Field = 32..64;
        pub const DATA: Field = 64..128;
        pub const RESERVED_128: Field = 128..256;
    }

    wire_fields! {
        /// The owned fields of a LID-routed SMP after the MAD header.
        #[cfg_attr(feature = "serde", derive(serde::Serialize))]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub struct Repr {
            /// M_Key.
            m_key, set_m_key: u64 = be64(field::M_KEY),
            /// Bytes 32–63, reserved (kept).
            reserved_32, reserved_32_mut: [u8; 32] = bytes(field::RESERVED_32),
            /// The attribute's 64 bytes.
            data, data_mut: [u8; 64] = bytes(field::DATA),
            /// Bytes 128–255, reserved (kept).
            reserved_128, reserved_128_mut: [u8; 128] = bytes(field::RESERVED_128),
        }
    }
    repr_bytes!(Repr);
}

/// The directed-route SMP after its MAD header.
pub mod directed {
    use crate::error::Layer;

    fixed_view!(Layer::Smp, super::LEN; /// A checked view of a whole directed-route SMP (256 bytes).
    );

    /// Byte ranges of a directed-route SMP.
    pub mod field {
        #![allow(missing_docs)]
        use crate::field::Field;
        pub const M_KEY: Field = 24..32;
        pub const DR_SLID: Field = 32..34;
        pub const DR_DLID: Field = 34..36;
        pub const RESERVED: Field = 36..64;
        pub const DATA: Field = 64..128;
        pub const INITIAL_PATH: Field = 128..192;
        pub const RETURN_PATH: Field = 192..256;
    }

    wire_fields! {
        /// The owned fields of a directed-route SMP after the MAD header.
        #[cfg_attr(feature = "serde", derive(serde::Serialize))]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub struct Repr {
            /// M_Key.
            m_key, set_m_key: u64 = be64(field::M_KEY),
            /// DrSLID: the LID-routed part's source LID (0xFFFF: permissive, none).
            dr_slid, set_dr_slid: u16 = be16(field::DR_SLID),
            /// DrDLID: the LID-routed part's destination LID.
            dr_dlid, set_dr_dlid: u16 = be16(field::DR_DLID),
            /// Bytes 36–63, reserved (kept).
            reserved, reserved_mut: [u8; 28] = bytes(field::RESERVED),
            /// The attribute's 64 bytes.
            data, data_mut: [u8; 64] = bytes(field::DATA),
            /// InitialPath: the egress port at each hop (entry 0 unused).
            initial_path, initial_path_mut: [u8; 64] = bytes(field::INITIAL_PATH),
            /// ReturnPath: the ingress port at each hop, filled on the way.
            return_path, return_path_mut: [u8; 64] = bytes(field::RETURN_PATH),
        }
    }
    repr_bytes!(Repr);

    impl Repr {
        /// The hops of the initial path that HopCount covers (entries 1..=HopCount).
        pub fn initial_hops(&self, hop_count: u8) -> &[u8] {
            &self.initial_path[1..=usize::from(hop_count).min(63)]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::MadHeader;

    /// A directed-route SubnGet(NodeInfo) as OpenSM's first sweep sends it, built by the
    /// table above: hop pointer 0, hop count 1 through port 1, permissive DR LIDs.
    fn dr_node_info() -> [u8; LEN] {
        let mut m = [0u8; LEN];
        m[..8].copy_from_slice(&[0x01, 0x81, 0x01, 0x01, 0x00, 0x00, 0x00, 0x01]);
        m[8..16].copy_from_slice(&0x1234_5678_9abc_def0u64.to_be_bytes());
        m[16..18].copy_from_slice(&0x0011u16.to_be_bytes());
        m[24..32].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0x2a]);
        m[32..36].copy_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        m[129] = 1;
        m
    }

    #[test]
    fn directed_route_fields() {
        let m = dr_node_info();
        let h = MadHeader::parse_bytes(&m).unwrap();
        assert_eq!(h.mgmt_class, MgmtClass::SubnDirected);
        assert!(is_smp_class(h.mgmt_class));
        assert_eq!(Attribute::from(h.attribute_id), Attribute::NodeInfo);
        assert_eq!(Attribute::NodeInfo.name(), "NodeInfo");
        assert_eq!(Attribute::PKeyTable.name(), "P_KeyTable");
        let d = DirectedHeader::from_header(h.status.0, h.class_specific);
        assert_eq!(d, DirectedHeader { direction: false, status: 0, hop_pointer: 0, hop_count: 1 });
        let r = directed::Repr::parse_bytes(&m).unwrap();
        assert_eq!((r.m_key, r.dr_slid, r.dr_dlid), (0x2a, 0xffff, 0xffff));
        // NodeInfo by its table: a CA with one port, GUIDs, VendorID 0x0002c9.
        let mut data = [0u8; DATA_LEN];
        data[..4].copy_from_slice(&[1, 1, 1, 1]);
        data[12..20].copy_from_slice(&0x0002_c903_0000_0003u64.to_be_bytes());
        data[28..32].copy_from_slice(&[0, 128, 0x10, 0x03]);
        data[36..40].copy_from_slice(&[1, 0x00, 0x02, 0xc9]);
        let n = node_info::Repr::parse_bytes(&data).unwrap();
        assert_eq!((n.node_type, n.num_ports, n.node_guid), (1, 1, 0x0002_c903_0000_0003));
        assert_eq!((n.partition_cap, n.device_id, n.local_port_num, n.vendor_id), (128, 0x1003, 1, 0x0002c9));
        assert_eq!(node_info::node_type_name(n.node_type), "CA");
        let mut out = [0u8; DATA_LEN];
        n.emit_bytes(&mut out[..node_info::LEN]);
        assert_eq!(out, data);
        assert_eq!(r.initial_hops(1), &[1]);
        let mut out = m;
        out[24..].fill(0);
        r.emit_bytes(&mut out);
        assert_eq!(out, m);
        let back = DirectedHeader::from_header(0x8000 | 0x001c, 0x0203);
        assert_eq!((back.direction, back.status, back.hop_pointer, back.hop_count), (true, 0x1c, 2, 3));
    }

    #[test]
    fn lid_routed_fields_and_errors() {
        let mut m = [0u8; LEN];
        m[1] = 0x01;
        m[24..32].copy_from_slice(&7u64.to_be_bytes());
        m[64..71].copy_from_slice(b"switch1");
        m[200] = 0x55;
        let r = lid_routed::Repr::parse_bytes(&m).unwrap();
        assert_eq!(r.m_key, 7);
        assert_eq!(node_description_text(&r.data), "switch1");
        assert_eq!(r.reserved_128[72], 0x55);
        let mut out = [0u8; LEN];
        out[..24].copy_from_slice(&m[..24]);
        r.emit_bytes(&mut out);
        assert_eq!(out, m);
        let e = lid_routed::Repr::parse_bytes(&m[..255]).unwrap_err();
        assert_eq!((e.layer(), e.offset()), (crate::Layer::Smp, 0));
        assert!(directed::Repr::parse_bytes(&m[..100]).is_err());
    }
}
