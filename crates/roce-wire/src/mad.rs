//! The MAD (Management Datagram) common header and the whole 256-byte MAD.
//!
//! Every InfiniBand management message (SA, CM, PerfMgmt, …) is a 256-byte MAD that starts with
//! the same 24-byte common header [ib_mad.h `struct ib_mad_hdr`; IBA 13.4.3]:
//!
//! | Off | Size | Field |
//! |---|---|---|
//! | 0 | 1 | BaseVersion (1) |
//! | 1 | 1 | MgmtClass |
//! | 2 | 1 | ClassVersion |
//! | 3 | 1 | R (bit 7) + Method (bits 6:0) |
//! | 4 | 2 | Status |
//! | 6 | 2 | ClassSpecific |
//! | 8 | 8 | TransactionID |
//! | 16 | 2 | AttributeID |
//! | 18 | 2 | Reserved |
//! | 20 | 4 | AttributeModifier |
//! | 24 | 232 | class data |
//!
//! [`Packet`] is a view over the header (it needs 24 bytes); [`MadHeader`] is its owned form and
//! [`MadRepr`] a whole class-agnostic MAD (header plus the 232 data bytes).
//!
//! Version policy: [`MadHeader::parse`] and [`MadRepr::parse`] accept any base version so that odd
//! frames still decode and re-emit byte for byte; [`MadRepr::parse_checked`] (and
//! [`MadHeader::check_version`]) reject a base version other than 1, as the kernel's
//! `validate_mad()` does.

use core::fmt;

use crate::error::{check_len, ContentError, Error, Layer, Result};
use crate::field::{array, be16, be32, be64, put16, put32, put64};

/// Length of the MAD common header, `IB_MGMT_MAD_HDR` [ib_mad.h].
pub const MAD_HEADER_LEN: usize = 24;
/// Length of the data that follows the common header, `IB_MGMT_MAD_DATA` [ib_mad.h].
pub const MAD_DATA_LEN: usize = 232;
/// The only InfiniBand management base version, `IB_MGMT_BASE_VERSION` [ib_mad.h].
pub const BASE_VERSION: u8 = 1;
/// The response bit of the method byte, `IB_MGMT_METHOD_RESP` [ib_mad.h].
pub const METHOD_RESPONSE_BIT: u8 = 0x80;
/// The attribute ID of ClassPortInfo, common to every class, `IB_MGMT_CLASSPORTINFO_ATTR_ID` [ib_mad.h].
pub const CLASS_PORT_INFO_ATTR_ID: u16 = 0x0001;

/// Byte ranges of the MAD common header.
pub mod field {
    use crate::field::*;

    /// BaseVersion.
    pub const BASE_VERSION: usize = 0;
    /// MgmtClass.
    pub const MGMT_CLASS: usize = 1;
    /// ClassVersion.
    pub const CLASS_VERSION: usize = 2;
    /// R bit (0x80) and 7-bit Method.
    pub const METHOD: usize = 3;
    /// Status.
    pub const STATUS: Field = 4..6;
    /// ClassSpecific.
    pub const CLASS_SPECIFIC: Field = 6..8;
    /// TransactionID.
    pub const TRANSACTION_ID: Field = 8..16;
    /// AttributeID.
    pub const ATTRIBUTE_ID: Field = 16..18;
    /// Reserved.
    pub const RESERVED: Field = 18..20;
    /// AttributeModifier.
    pub const ATTRIBUTE_MODIFIER: Field = 20..24;
    /// The class data after the header.
    pub const DATA: Field = 24..256;
}

enum_with_unknown! {
    /// Management class [ib_mad.h `IB_MGMT_CLASS_*`; IBA 13.4.4 Table 114]. Vendor classes
    /// (0x09–0x0F, 0x30–0x4F) stay `Unknown`; see [`MgmtClass::is_vendor`].
    pub enum MgmtClass(u8) {
        /// Subnet management, LID-routed SMP.
        SubnLid = 0x01,
        /// Subnet administration (SA).
        SubnAdm = 0x03,
        /// Performance management.
        PerfMgmt = 0x04,
        /// Baseboard management.
        BoardMgmt = 0x05,
        /// Device management.
        DevMgmt = 0x06,
        /// Communication management (CM).
        ComMgmt = 0x07,
        /// SNMP tunneling.
        Snmp = 0x08,
        /// Device administration.
        DevAdm = 0x10,
        /// Boot management.
        BootMgmt = 0x11,
        /// Boot integrity service.
        Bis = 0x12,
        /// Congestion management.
        CongMgmt = 0x21,
        /// Subnet management, directed-route SMP.
        SubnDirected = 0x81,
    }
}

impl MgmtClass {
    /// Whether a class code is vendor-specific: the low range 0x09–0x0F or the high range
    /// 0x30–0x4F (the one with an OUI) [opensm ib_types.h `IB_MCLASS_VENDOR_LOW/HIGH_RANGE_*`;
    /// ib_mad.h `IB_MGMT_CLASS_VENDOR_RANGE2_*`; IBA 13.4.4].
    pub const fn is_vendor(class: u8) -> bool {
        matches!(class, 0x09..=0x0F | 0x30..=0x4F)
    }

    /// Whether a class code is in vendor range 2 (0x30–0x4F), the classes that carry an OUI
    /// [ib_mad.h `IB_MGMT_CLASS_VENDOR_RANGE2_START/END`; mad.c `is_vendor_class`].
    pub const fn is_vendor_range2(class: u8) -> bool {
        matches!(class, 0x30..=0x4F)
    }

    /// Short name of the class (as in ib_mad.h, without the prefix); "Vendor" or "Unknown" for
    /// unnamed codes.
    pub const fn name(self) -> &'static str {
        match self {
            MgmtClass::SubnLid => "SubnLidRouted",
            MgmtClass::SubnAdm => "SubnAdm",
            MgmtClass::PerfMgmt => "PerfMgmt",
            MgmtClass::BoardMgmt => "BoardMgmt",
            MgmtClass::DevMgmt => "DevMgmt",
            MgmtClass::ComMgmt => "ComMgmt",
            MgmtClass::Snmp => "SNMP",
            MgmtClass::DevAdm => "DevAdm",
            MgmtClass::BootMgmt => "BootMgmt",
            MgmtClass::Bis => "BIS",
            MgmtClass::CongMgmt => "CongMgmt",
            MgmtClass::SubnDirected => "SubnDirectedRoute",
            MgmtClass::Unknown(c) => {
                if MgmtClass::is_vendor(c) {
                    "Vendor"
                } else {
                    "Unknown"
                }
            }
        }
    }
}

enum_with_unknown! {
    /// The 7-bit method, without the response bit [ib_mad.h `IB_MGMT_METHOD_*`; ib_sa.h
    /// `IB_SA_METHOD_*`]. A response is this method with [`MadHeader::response`] set
    /// (GetResp = Get + R = 0x81, DeleteResp = 0x95, …).
    pub enum Method(u8) {
        /// Get (0x01).
        Get = 0x01,
        /// Set (0x02).
        Set = 0x02,
        /// Send (0x03): the only method CM uses.
        Send = 0x03,
        /// Trap (0x05).
        Trap = 0x05,
        /// Report (0x06).
        Report = 0x06,
        /// TrapRepress (0x07).
        TrapRepress = 0x07,
        /// SA GetTable (0x12).
        GetTable = 0x12,
        /// SA GetTraceTable (0x13).
        GetTraceTable = 0x13,
        /// SA GetMulti (0x14).
        GetMulti = 0x14,
        /// SA Delete (0x15).
        Delete = 0x15,
    }
}

/// The 16-bit MAD status [ib_mad.h `IB_MGMT_MAD_STATUS_*`; IBA 13.4.7 Table 113; SA class
/// codes in bits 15:8 from opensm ib_types.h `IB_SA_MAD_STATUS_*`].
///
/// Bit 0 busy, bit 1 redirect required, bits 4:2 the invalid-field code, bits 14:8 (SA: 15:8)
/// class-specific; bit 15 is the D bit in directed-route SMPs.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct MadStatus(pub u16);

impl MadStatus {
    /// Success.
    pub const SUCCESS: MadStatus = MadStatus(0x0000);
    /// Busy: the request was discarded, retry later.
    pub const BUSY: MadStatus = MadStatus(0x0001);
    /// Redirect required (see ClassPortInfo).
    pub const REDIRECT: MadStatus = MadStatus(0x0002);
    /// Bad base or class version.
    pub const BAD_VERSION: MadStatus = MadStatus(0x0004);
    /// Method not supported.
    pub const UNSUPPORTED_METHOD: MadStatus = MadStatus(0x0008);
    /// Method/attribute combination not supported (what the MAD core answers for an
    /// unhandled Get/Set).
    pub const UNSUPPORTED_METHOD_ATTR: MadStatus = MadStatus(0x000C);
    /// One or more fields of the attribute or modifier hold an invalid value.
    pub const INVALID_ATTR_VALUE: MadStatus = MadStatus(0x001C);
    /// SA: insufficient resources to complete the request.
    pub const NO_RESOURCES: MadStatus = MadStatus(0x0100);
    /// SA: the request is invalid (e.g. Delete of a group the port is not in).
    pub const REQ_INVALID: MadStatus = MadStatus(0x0200);
    /// SA: no records match the query.
    pub const NO_RECORDS: MadStatus = MadStatus(0x0300);
    /// SA: too many records match a Get.
    pub const TOO_MANY_RECORDS: MadStatus = MadStatus(0x0400);
    /// SA: a GID in the request is invalid (e.g. wrong subnet prefix).
    pub const INVALID_GID: MadStatus = MadStatus(0x0500);
    /// SA: the component mask lacks required components.
    pub const INSUF_COMPS: MadStatus = MadStatus(0x0600);
    /// SA: request denied.
    pub const DENIED: MadStatus = MadStatus(0x0700);
    /// SA: the requested QoS priority was not available; a suggestion is returned.
    pub const PRIO_SUGGESTED: MadStatus = MadStatus(0x0800);
    /// The D (direction) bit of directed-route SMPs.
    pub const DIRECTION_BIT: u16 = 0x8000;

    /// Whether the status is 0.
    pub const fn is_success(self) -> bool {
        self.0 == 0
    }

    /// Bit 0: busy.
    pub const fn is_busy(self) -> bool {
        self.0 & 0x0001 != 0
    }

    /// Bit 1: redirect required.
    pub const fn is_redirect(self) -> bool {
        self.0 & 0x0002 != 0
    }

    /// Bits 4:2: the invalid-field code (0 none, 1 bad version, 2 unsupported method,
    /// 3 unsupported method/attribute, 7 invalid attribute value).
    pub const fn invalid_field_code(self) -> u8 {
        ((self.0 >> 2) & 0x7) as u8
    }

    /// Bits 15:8: the class-specific code (SA: 1 NO_RESOURCES … 8 PRIO_SUGGESTED).
    pub const fn class_code(self) -> u8 {
        (self.0 >> 8) as u8
    }

    /// A human description. Exact values are named; other values are described by their most
    /// significant part; class-specific codes are given their SA meaning.
    pub const fn description(&self) -> &'static str {
        match self.0 {
            0x0000 => "success",
            0x0001 => "busy",
            0x0002 => "redirect required",
            0x0004 => "bad base or class version",
            0x0008 => "unsupported method",
            0x000C => "unsupported method/attribute",
            0x001C => "invalid attribute value",
            0x0100 => "insufficient resources",
            0x0200 => "request invalid",
            0x0300 => "no records",
            0x0400 => "too many records",
            0x0500 => "invalid GID",
            0x0600 => "insufficient components",
            0x0700 => "request denied",
            0x0800 => "priority suggested",
            s if s & 0xFF00 != 0 => "class-specific status",
            s => match (s >> 2) & 0x7 {
                1 => "bad base or class version",
                2 => "unsupported method",
                3 => "unsupported method/attribute",
                7 => "invalid attribute value",
                0 if s & 0x3 != 0 => {
                    if s & 0x1 != 0 {
                        "busy"
                    } else {
                        "redirect required"
                    }
                }
                _ => "reserved status",
            },
        }
    }
}

impl From<u16> for MadStatus {
    fn from(v: u16) -> Self {
        MadStatus(v)
    }
}

impl From<MadStatus> for u16 {
    fn from(s: MadStatus) -> Self {
        s.0
    }
}

/// Printed as `0x000c (unsupported method/attribute)`.
impl fmt::Display for MadStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#06x} ({})", self.0, self.description())
    }
}

/// The method name Wireshark shows [wireshark packet-infiniband.c `SUBA_Methods`,
/// `SUBM_Methods`; packet-opa-mad.c `Methods`]: `SubnAdm…` names for the SA class
/// (plus `SubnAdmTrap`/`SubnAdmTrapRepress`, which Wireshark's table lacks), `Subn…` names for
/// the two SMP classes (0x07 as IBA's `SubnTrapRepress`, Wireshark prints `SubnTrapResp`),
/// and the generic `Get`, `GetResp`, `Send`, … for every other class. Combinations that no
/// class defines (for example `Set` with the response bit) give `"Unknown"`.
pub fn method_name(class: MgmtClass, method: Method, response: bool) -> &'static str {
    use Method as M;
    match class {
        MgmtClass::SubnAdm => match (method, response) {
            (M::Get, false) => "SubnAdmGet",
            (M::Get, true) => "SubnAdmGetResp",
            (M::Set, false) => "SubnAdmSet",
            (M::Report, false) => "SubnAdmReport",
            (M::Report, true) => "SubnAdmReportResp",
            (M::GetTable, false) => "SubnAdmGetTable",
            (M::GetTable, true) => "SubnAdmGetTableResp",
            (M::GetTraceTable, false) => "SubnAdmGetTraceTable",
            (M::GetMulti, false) => "SubnAdmGetMulti",
            (M::GetMulti, true) => "SubnAdmGetMultiResp",
            (M::Delete, false) => "SubnAdmDelete",
            (M::Delete, true) => "SubnAdmDeleteResp",
            (M::Trap, false) => "SubnAdmTrap",
            (M::TrapRepress, false) => "SubnAdmTrapRepress",
            _ => "Unknown",
        },
        MgmtClass::SubnLid | MgmtClass::SubnDirected => match (method, response) {
            (M::Get, false) => "SubnGet",
            (M::Get, true) => "SubnGetResp",
            (M::Set, false) => "SubnSet",
            (M::Trap, false) => "SubnTrap",
            (M::TrapRepress, false) => "SubnTrapRepress",
            _ => "Unknown",
        },
        _ => match (method, response) {
            (M::Get, false) => "Get",
            (M::Get, true) => "GetResp",
            (M::Set, false) => "Set",
            (M::Send, false) => "Send",
            (M::Trap, false) => "Trap",
            (M::Report, false) => "Report",
            (M::Report, true) => "ReportResp",
            (M::TrapRepress, false) => "TrapRepress",
            (M::GetTable, false) => "GetTable",
            (M::GetTable, true) => "GetTableResp",
            (M::GetTraceTable, false) => "GetTraceTable",
            (M::GetTraceTable, true) => "GetTraceTableResp",
            (M::GetMulti, false) => "GetMulti",
            (M::GetMulti, true) => "GetMultiResp",
            (M::Delete, false) => "Delete",
            (M::Delete, true) => "DeleteResp",
            _ => "Unknown",
        },
    }
}

/// The attribute name Wireshark shows [wireshark packet-infiniband.c `SUBA_Attributes`,
/// `SUBM_Attributes`, `CM_Attributes`; IDs from ib_sa.h `IB_SA_ATTR_*`, ib_cm.h / cm_msgs.h].
///
/// SA names lose Wireshark's `Attribute (…)` wrapper; for classes without a table the common
/// class attributes ClassPortInfo, Notice and InformInfo (IBA 13.4.8) are named. `"Unknown"`
/// otherwise.
pub fn attribute_name(class: MgmtClass, attr: u16) -> &'static str {
    match class {
        MgmtClass::SubnAdm => match attr {
            0x0001 => "ClassPortInfo",
            0x0002 => "Notice",
            0x0003 => "InformInfo",
            0x0011 => "NodeRecord",
            0x0012 => "PortInfoRecord",
            0x0013 => "SLtoVLMappingTableRecord",
            0x0014 => "SwitchInfoRecord",
            0x0015 => "LinearForwardingTableRecord",
            0x0016 => "RandomForwardingTableRecord",
            0x0017 => "MulticastForwardingTableRecord",
            0x0018 => "SMInfoRecord",
            0x0019 => "LinkSpeedWidthPairsTableRecord",
            0x0020 => "LinkRecord",
            0x0030 => "GuidInfoRecord",
            0x0031 => "ServiceRecord",
            0x0033 => "P_KeyTableRecord",
            0x0035 => "PathRecord",
            0x0036 => "VLArbitrationTableRecord",
            0x0038 => "MCMemberRecord",
            0x0039 => "TraceRecord",
            0x003A => "MultiPathRecord",
            0x003B => "ServiceAssociationRecord",
            0x00F3 => "InformInfoRecord",
            _ => "Unknown",
        },
        MgmtClass::ComMgmt => match attr {
            0x0001 => "ClassPortInfo",
            0x0010 => "ConnectRequest",
            0x0011 => "MsgRcptAck",
            0x0012 => "ConnectReject",
            0x0013 => "ConnectReply",
            0x0014 => "ReadyToUse",
            0x0015 => "DisconnectRequest",
            0x0016 => "DisconnectReply",
            0x0017 => "ServiceIDResReq",
            0x0018 => "ServiceIDResReqResp",
            0x0019 => "LoadAlternatePath",
            0x001A => "AlternatePathResponse",
            _ => "Unknown",
        },
        MgmtClass::SubnLid | MgmtClass::SubnDirected => match attr {
            0x0001 => "ClassPortInfo",
            0x0002 => "Notice",
            0x0003 => "InformInfo",
            0x0010 => "NodeDescription",
            0x0011 => "NodeInfo",
            0x0012 => "SwitchInfo",
            0x0014 => "GUIDInfo",
            0x0015 => "PortInfo",
            0x0016 => "P_KeyTable",
            0x0017 => "SLtoVLMappingTable",
            0x0018 => "VLArbitrationTable",
            0x0019 => "LinearForwardingTable",
            0x001A => "RandomForwardingTable",
            0x001B => "MulticastForwardingTable",
            0x001C => "LinkSpeedWidthPairsTable",
            0x0020 => "SMInfo",
            0x0030 => "VendorDiag",
            0x0031 => "LedInfo",
            _ => "Unknown",
        },
        _ => match attr {
            0x0001 => "ClassPortInfo",
            0x0002 => "Notice",
            0x0003 => "InformInfo",
            _ => "Unknown",
        },
    }
}

fixed_view!(Layer::Mad, MAD_HEADER_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    /// BaseVersion (1 for InfiniBand, 0x80 for OPA).
    pub fn base_version(&self) -> u8 {
        self.buffer.as_ref()[field::BASE_VERSION]
    }

    /// MgmtClass.
    pub fn mgmt_class(&self) -> MgmtClass {
        MgmtClass::from(self.buffer.as_ref()[field::MGMT_CLASS])
    }

    /// ClassVersion.
    pub fn class_version(&self) -> u8 {
        self.buffer.as_ref()[field::CLASS_VERSION]
    }

    /// The whole method byte, response bit included.
    pub fn method_byte(&self) -> u8 {
        self.buffer.as_ref()[field::METHOD]
    }

    /// The R (response) bit.
    pub fn response(&self) -> bool {
        self.method_byte() & METHOD_RESPONSE_BIT != 0
    }

    /// The 7-bit method.
    pub fn method(&self) -> Method {
        Method::from(self.method_byte() & !METHOD_RESPONSE_BIT)
    }

    /// Status.
    pub fn status(&self) -> MadStatus {
        MadStatus(be16(self.buffer.as_ref(), field::STATUS.start))
    }

    /// ClassSpecific (hop pointer/count in directed-route SMPs; 0 for SA and CM).
    pub fn class_specific(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CLASS_SPECIFIC.start)
    }

    /// TransactionID.
    pub fn transaction_id(&self) -> u64 {
        be64(self.buffer.as_ref(), field::TRANSACTION_ID.start)
    }

    /// AttributeID.
    pub fn attribute_id(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ATTRIBUTE_ID.start)
    }

    /// The reserved 16 bits after AttributeID.
    pub fn reserved(&self) -> u16 {
        be16(self.buffer.as_ref(), field::RESERVED.start)
    }

    /// AttributeModifier.
    pub fn attribute_modifier(&self) -> u32 {
        be32(self.buffer.as_ref(), field::ATTRIBUTE_MODIFIER.start)
    }

    /// The bytes after the header (232 for a whole MAD; may be shorter or empty).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[MAD_HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set BaseVersion.
    pub fn set_base_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::BASE_VERSION] = v;
    }

    /// Set MgmtClass.
    pub fn set_mgmt_class(&mut self, v: MgmtClass) {
        self.buffer.as_mut()[field::MGMT_CLASS] = v.into();
    }

    /// Set ClassVersion.
    pub fn set_class_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::CLASS_VERSION] = v;
    }

    /// Set the whole method byte.
    pub fn set_method_byte(&mut self, v: u8) {
        self.buffer.as_mut()[field::METHOD] = v;
    }

    /// Set or clear the R bit, keeping the method.
    pub fn set_response(&mut self, r: bool) {
        let m = self.method_byte() & !METHOD_RESPONSE_BIT;
        self.set_method_byte(if r { m | METHOD_RESPONSE_BIT } else { m });
    }

    /// Set the 7-bit method (masked to 7 bits), keeping the R bit.
    pub fn set_method(&mut self, m: Method) {
        let r = self.method_byte() & METHOD_RESPONSE_BIT;
        self.set_method_byte(r | (u8::from(m) & !METHOD_RESPONSE_BIT));
    }

    /// Set Status.
    pub fn set_status(&mut self, s: MadStatus) {
        put16(self.buffer.as_mut(), field::STATUS.start, s.0);
    }

    /// Set ClassSpecific.
    pub fn set_class_specific(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::CLASS_SPECIFIC.start, v);
    }

    /// Set TransactionID.
    pub fn set_transaction_id(&mut self, v: u64) {
        put64(self.buffer.as_mut(), field::TRANSACTION_ID.start, v);
    }

    /// Set AttributeID.
    pub fn set_attribute_id(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::ATTRIBUTE_ID.start, v);
    }

    /// Set the reserved 16 bits.
    pub fn set_reserved(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::RESERVED.start, v);
    }

    /// Set AttributeModifier.
    pub fn set_attribute_modifier(&mut self, v: u32) {
        put32(self.buffer.as_mut(), field::ATTRIBUTE_MODIFIER.start, v);
    }

    /// The bytes after the header, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[MAD_HEADER_LEN..]
    }
}

/// The owned MAD common header [ib_mad.h `struct ib_mad_hdr`].
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MadHeader {
    /// BaseVersion (1; any value is kept).
    pub base_version: u8,
    /// MgmtClass.
    pub mgmt_class: MgmtClass,
    /// ClassVersion (SA 2, CM 2).
    pub class_version: u8,
    /// The R bit (0x80 of the method byte).
    pub response: bool,
    /// The 7-bit method (emitted masked to 7 bits).
    pub method: Method,
    /// Status.
    pub status: MadStatus,
    /// ClassSpecific.
    pub class_specific: u16,
    /// TransactionID.
    pub transaction_id: u64,
    /// AttributeID.
    pub attribute_id: u16,
    /// Reserved 16 bits (kept).
    pub reserved: u16,
    /// AttributeModifier.
    pub attribute_modifier: u32,
}

impl MadHeader {
    /// Encoded length.
    pub const LEN: usize = MAD_HEADER_LEN;

    /// Read a header from a view whose length was checked (`check_len` is repeated here).
    /// Any base version is accepted; see [`MadHeader::check_version`].
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<MadHeader> {
        packet.check_len()?;
        Ok(MadHeader {
            base_version: packet.base_version(),
            mgmt_class: packet.mgmt_class(),
            class_version: packet.class_version(),
            response: packet.response(),
            method: packet.method(),
            status: packet.status(),
            class_specific: packet.class_specific(),
            transaction_id: packet.transaction_id(),
            attribute_id: packet.attribute_id(),
            reserved: packet.reserved(),
            attribute_modifier: packet.attribute_modifier(),
        })
    }

    /// Parse from the start of `buf`.
    pub fn parse_bytes(buf: &[u8]) -> Result<MadHeader> {
        // Through a fixed-size array when long enough (no bounds check per field); a short
        // buffer gets the view's length error.
        match buf.first_chunk::<MAD_HEADER_LEN>() {
            Some(b) => MadHeader::parse(&Packet::new_unchecked(b)),
            None => MadHeader::parse(&Packet::new_unchecked(buf)),
        }
    }

    /// `Err(Content(UnsupportedBaseVersion))` at offset 0 unless the base version is 1 (the
    /// kernel's `validate_mad()` drops such MADs).
    pub fn check_version(&self) -> Result<()> {
        if self.base_version != BASE_VERSION {
            return Err(Error::content(
                Layer::Mad,
                field::BASE_VERSION,
                ContentError::UnsupportedBaseVersion(self.base_version),
            ));
        }
        Ok(())
    }

    /// Encoded length (24).
    pub const fn buffer_len(&self) -> usize {
        MAD_HEADER_LEN
    }

    /// The method byte as on the wire: R bit | 7-bit method.
    pub fn method_byte(&self) -> u8 {
        (u8::from(self.method) & !METHOD_RESPONSE_BIT) | if self.response { METHOD_RESPONSE_BIT } else { 0 }
    }

    /// `ib_response_mad()` [mad.c]: the R bit, or TrapRepress, or a BM MAD with the response
    /// bit of the attribute modifier.
    pub fn is_response_mad(&self) -> bool {
        self.response
            || self.method == Method::TrapRepress
            || (self.mgmt_class == MgmtClass::BoardMgmt && self.attribute_modifier & 1 != 0)
    }

    /// Write the header; the buffer must hold at least 24 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        packet.set_base_version(self.base_version);
        packet.set_mgmt_class(self.mgmt_class);
        packet.set_class_version(self.class_version);
        packet.set_method_byte(self.method_byte());
        packet.set_status(self.status);
        packet.set_class_specific(self.class_specific);
        packet.set_transaction_id(self.transaction_id);
        packet.set_attribute_id(self.attribute_id);
        packet.set_reserved(self.reserved);
        packet.set_attribute_modifier(self.attribute_modifier);
    }

    /// Write the header to the start of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than 24 bytes.
    ///
    /// The 24 bytes are built whole and stored at once (what [`MadHeader::emit`]'s setters
    /// write, without a bounds check per field): every MAD sent runs this.
    pub fn emit_bytes(&self, buf: &mut [u8]) {
        let mut b = [0u8; MAD_HEADER_LEN];
        b[field::BASE_VERSION] = self.base_version;
        b[field::MGMT_CLASS] = self.mgmt_class.into();
        b[field::CLASS_VERSION] = self.class_version;
        b[field::METHOD] = self.method_byte();
        b[field::STATUS].copy_from_slice(&self.status.0.to_be_bytes());
        b[field::CLASS_SPECIFIC].copy_from_slice(&self.class_specific.to_be_bytes());
        b[field::TRANSACTION_ID].copy_from_slice(&self.transaction_id.to_be_bytes());
        b[field::ATTRIBUTE_ID].copy_from_slice(&self.attribute_id.to_be_bytes());
        b[field::RESERVED].copy_from_slice(&self.reserved.to_be_bytes());
        b[field::ATTRIBUTE_MODIFIER].copy_from_slice(&self.attribute_modifier.to_be_bytes());
        buf[..MAD_HEADER_LEN].copy_from_slice(&b);
    }

    /// The Wireshark method name of this header ([`method_name`]).
    pub fn method_name(&self) -> &'static str {
        method_name(self.mgmt_class, self.method, self.response)
    }

    /// The Wireshark attribute name of this header ([`attribute_name`]).
    pub fn attribute_name(&self) -> &'static str {
        attribute_name(self.mgmt_class, self.attribute_id)
    }
}

/// A whole 256-byte MAD, class-agnostic: the header and the 232 data bytes.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MadRepr {
    /// The common header.
    pub header: MadHeader,
    /// MAD bytes 24..256 (RMPP and class headers included).
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serde_support::hex"))]
    pub data: [u8; MAD_DATA_LEN],
}

impl MadRepr {
    /// Encoded length (256).
    pub const LEN: usize = crate::MAD_SIZE;

    /// Parse a whole MAD: the buffer must hold 256 bytes (else `Len` for `Layer::Mad`, offset
    /// 0, required 256); bytes beyond 256 are ignored. Any base version is accepted so odd
    /// frames still decode; use [`MadRepr::parse_checked`] to reject them.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<MadRepr> {
        let buf = packet.buffer.as_ref();
        check_len(Layer::Mad, buf, Self::LEN)?;
        Ok(MadRepr { header: MadHeader::parse(packet)?, data: array(buf, MAD_HEADER_LEN) })
    }

    /// Parse a whole MAD from `buf`.
    pub fn parse_bytes(buf: &[u8]) -> Result<MadRepr> {
        MadRepr::parse(&Packet::new_unchecked(buf))
    }

    /// As [`MadRepr::parse_bytes`], then reject a base version other than 1
    /// (`Content(UnsupportedBaseVersion)` at offset 0).
    pub fn parse_checked(buf: &[u8]) -> Result<MadRepr> {
        let m = MadRepr::parse_bytes(buf)?;
        m.header.check_version()?;
        Ok(m)
    }

    /// Encoded length (256).
    pub const fn buffer_len(&self) -> usize {
        Self::LEN
    }

    /// Write the MAD; the buffer must hold 256 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        self.header.emit(packet);
        packet.payload_mut()[..MAD_DATA_LEN].copy_from_slice(&self.data);
    }

    /// Write the MAD to the start of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than 256 bytes.
    pub fn emit_bytes(&self, buf: &mut [u8]) {
        self.emit(&mut Packet::new_unchecked(buf));
    }

    /// The 256 encoded bytes.
    pub fn to_bytes(&self) -> [u8; crate::MAD_SIZE] {
        let mut b = [0u8; crate::MAD_SIZE];
        self.emit_bytes(&mut b);
        b
    }
}

#[cfg(test)]
pub(crate) mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;
    use std::format;

    /// The MAD header of the golden SubnAdmDelete frame (protocol.md §1.11, frame bytes 62..86).
    const DELETE_HDR: [u8; 24] = [
        0x01, 0x03, 0x02, 0x15, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x38,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    fn delete_hdr() -> MadHeader {
        MadHeader {
            base_version: 1,
            mgmt_class: MgmtClass::SubnAdm,
            class_version: 2,
            response: false,
            method: Method::Delete,
            status: MadStatus::SUCCESS,
            class_specific: 0,
            transaction_id: 0x0000_0001_0000_0002,
            attribute_id: 0x0038,
            reserved: 0,
            attribute_modifier: 0,
        }
    }

    #[test]
    fn golden_header_parse_and_emit() {
        let h = MadHeader::parse_bytes(&DELETE_HDR).unwrap();
        assert_eq!(h, delete_hdr());
        assert_eq!(h.method_name(), "SubnAdmDelete");
        assert_eq!(h.attribute_name(), "MCMemberRecord");
        let mut out = [0u8; 24];
        h.emit_bytes(&mut out);
        assert_eq!(out, DELETE_HDR);
    }

    #[test]
    fn view_accessors_and_setters() {
        let mut buf = [0u8; 24];
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.set_base_version(1);
        p.set_mgmt_class(MgmtClass::ComMgmt);
        p.set_class_version(2);
        p.set_method(Method::Get);
        p.set_response(true);
        p.set_status(MadStatus::UNSUPPORTED_METHOD_ATTR);
        p.set_class_specific(0xA5A5);
        p.set_transaction_id(0x0102_0304_0506_0708);
        p.set_attribute_id(0x0010);
        p.set_reserved(0xBEEF);
        p.set_attribute_modifier(0xDEAD_BEEF);
        assert_eq!(p.method_byte(), 0x81);
        p.set_method(Method::Delete);
        assert_eq!(p.method_byte(), 0x95);
        assert!(p.response());
        assert_eq!(p.method(), Method::Delete);
        assert_eq!(p.status(), MadStatus(0x000C));
        assert_eq!(p.class_specific(), 0xA5A5);
        assert_eq!(p.transaction_id(), 0x0102_0304_0506_0708);
        assert_eq!(p.attribute_id(), 0x0010);
        assert_eq!(p.reserved(), 0xBEEF);
        assert_eq!(p.attribute_modifier(), 0xDEAD_BEEF);
        assert_eq!(p.mgmt_class(), MgmtClass::ComMgmt);
        assert!(p.payload().is_empty());
        assert_eq!(
            buf,
            [
                1, 7, 2, 0x95, 0x00, 0x0C, 0xA5, 0xA5, 1, 2, 3, 4, 5, 6, 7, 8, 0x00, 0x10, 0xBE, 0xEF, 0xDE, 0xAD,
                0xBE, 0xEF
            ]
        );
    }

    #[test]
    fn header_truncation_is_len_error() {
        for len in 0..MAD_HEADER_LEN {
            assert_eq!(MadHeader::parse_bytes(&DELETE_HDR[..len]), Err(Error::len(Layer::Mad, 0, MAD_HEADER_LEN, len)));
            assert!(Packet::new_checked(&DELETE_HDR[..len]).is_err());
        }
    }

    #[test]
    fn mad_truncation_is_len_error() {
        let buf = [0u8; 256];
        for len in 0..256 {
            assert_eq!(MadRepr::parse_bytes(&buf[..len]), Err(Error::len(Layer::Mad, 0, 256, len)));
            assert_eq!(MadRepr::parse_checked(&buf[..len]), Err(Error::len(Layer::Mad, 0, 256, len)));
        }
    }

    #[test]
    fn whole_mad_round_trip_and_version_policy() {
        let mut buf = [0u8; 260];
        buf[..24].copy_from_slice(&DELETE_HDR);
        for (i, b) in buf[24..256].iter_mut().enumerate() {
            *b = i as u8;
        }
        let m = MadRepr::parse_bytes(&buf).unwrap();
        assert_eq!(m.header, delete_hdr());
        assert_eq!(m.to_bytes()[..], buf[..256]);
        assert_eq!(MadRepr::parse_checked(&buf), Ok(m));

        buf[0] = 0x80; // OPA base version: plain parse keeps it, checked parse rejects it
        let m = MadRepr::parse_bytes(&buf).unwrap();
        assert_eq!(m.header.base_version, 0x80);
        assert_eq!(m.to_bytes()[..], buf[..256]);
        assert_eq!(
            MadRepr::parse_checked(&buf),
            Err(Error::content(Layer::Mad, 0, ContentError::UnsupportedBaseVersion(0x80)))
        );
    }

    #[test]
    fn status_names() {
        assert_eq!(format!("{}", MadStatus::UNSUPPORTED_METHOD_ATTR), "0x000c (unsupported method/attribute)");
        assert_eq!(MadStatus::INSUF_COMPS.description(), "insufficient components");
        assert_eq!(format!("{}", MadStatus(0x0600)), "0x0600 (insufficient components)");
        assert_eq!(format!("{}", MadStatus::SUCCESS), "0x0000 (success)");
        assert_eq!(MadStatus(0x0003).description(), "busy");
        assert_eq!(MadStatus(0x0010).description(), "reserved status");
        assert_eq!(MadStatus(0x0900).description(), "class-specific status");
        assert_eq!(MadStatus(0x0600).class_code(), 6);
        assert_eq!(MadStatus(0x000C).invalid_field_code(), 3);
        assert_eq!(MadStatus(0x001C).invalid_field_code(), 7);
        assert!(MadStatus::BUSY.is_busy() && MadStatus::REDIRECT.is_redirect());
    }

    #[test]
    fn names() {
        let sa = MgmtClass::SubnAdm;
        assert_eq!(method_name(sa, Method::Get, true), "SubnAdmGetResp");
        assert_eq!(method_name(sa, Method::Set, false), "SubnAdmSet");
        assert_eq!(method_name(sa, Method::GetTable, true), "SubnAdmGetTableResp");
        assert_eq!(method_name(sa, Method::Delete, true), "SubnAdmDeleteResp");
        assert_eq!(method_name(sa, Method::Trap, false), "SubnAdmTrap");
        assert_eq!(method_name(sa, Method::Set, true), "Unknown");
        assert_eq!(method_name(MgmtClass::ComMgmt, Method::Send, false), "Send");
        assert_eq!(method_name(MgmtClass::ComMgmt, Method::Get, true), "GetResp");
        assert_eq!(method_name(MgmtClass::SubnLid, Method::Get, true), "SubnGetResp");
        assert_eq!(method_name(MgmtClass::PerfMgmt, Method::Unknown(0x7f), false), "Unknown");
        assert_eq!(attribute_name(sa, 0x0038), "MCMemberRecord");
        assert_eq!(attribute_name(sa, 0x0001), "ClassPortInfo");
        assert_eq!(attribute_name(sa, 0x00F3), "InformInfoRecord");
        assert_eq!(attribute_name(MgmtClass::ComMgmt, 0x0010), "ConnectRequest");
        assert_eq!(attribute_name(MgmtClass::ComMgmt, 0x001A), "AlternatePathResponse");
        assert_eq!(attribute_name(MgmtClass::ComMgmt, 0x0038), "Unknown");
        assert_eq!(attribute_name(MgmtClass::PerfMgmt, 0x0001), "ClassPortInfo");
        assert_eq!(attribute_name(MgmtClass::PerfMgmt, 0x0012), "Unknown");
    }

    #[test]
    fn classes() {
        assert_eq!(MgmtClass::from(0x03), MgmtClass::SubnAdm);
        assert_eq!(MgmtClass::from(0x81), MgmtClass::SubnDirected);
        assert_eq!(MgmtClass::from(0x30), MgmtClass::Unknown(0x30));
        assert!(MgmtClass::is_vendor(0x09) && MgmtClass::is_vendor(0x0F));
        assert!(MgmtClass::is_vendor(0x30) && MgmtClass::is_vendor(0x4F));
        assert!(!MgmtClass::is_vendor(0x07) && !MgmtClass::is_vendor(0x50) && !MgmtClass::is_vendor(0x10));
        assert!(MgmtClass::is_vendor_range2(0x40) && !MgmtClass::is_vendor_range2(0x09));
        assert_eq!(MgmtClass::Unknown(0x0A).name(), "Vendor");
        assert_eq!(MgmtClass::Unknown(0x50).name(), "Unknown");
        assert_eq!(MgmtClass::SubnAdm.name(), "SubnAdm");
    }

    #[test]
    fn response_mad_rule() {
        let mut h = delete_hdr();
        assert!(!h.is_response_mad());
        h.method = Method::TrapRepress;
        assert!(h.is_response_mad());
        h.method = Method::Get;
        h.mgmt_class = MgmtClass::BoardMgmt;
        h.attribute_modifier = 1;
        assert!(h.is_response_mad());
    }

    pub(crate) fn arb_header() -> impl Strategy<Value = MadHeader> {
        (
            any::<u8>(),
            any::<u8>(),
            any::<u8>(),
            any::<bool>(),
            0u8..0x80,
            any::<u16>(),
            any::<u16>(),
            any::<u64>(),
            any::<u16>(),
            any::<u16>(),
            any::<u32>(),
        )
            .prop_map(|(bv, c, cv, r, m, st, cs, tid, a, rs, am)| MadHeader {
                base_version: bv,
                mgmt_class: MgmtClass::from(c),
                class_version: cv,
                response: r,
                method: Method::from(m),
                status: MadStatus(st),
                class_specific: cs,
                transaction_id: tid,
                attribute_id: a,
                reserved: rs,
                attribute_modifier: am,
            })
    }

    proptest! {
        #[test]
        fn emit_bytes_writes_what_the_setters_write(h in arb_header(), junk in any::<u8>()) {
            let mut by_setters = [junk; 24];
            h.emit(&mut Packet::new_unchecked(&mut by_setters[..]));
            let mut whole = [junk; 24];
            h.emit_bytes(&mut whole);
            prop_assert_eq!(whole, by_setters);
        }

        #[test]
        fn header_round_trip(h in arb_header()) {
            let mut buf = [0u8; 24];
            h.emit_bytes(&mut buf);
            prop_assert_eq!(MadHeader::parse_bytes(&buf), Ok(h));
        }

        #[test]
        fn mad_round_trip(h in arb_header(), data in proptest::collection::vec(any::<u8>(), MAD_DATA_LEN)) {
            let mut d = [0u8; MAD_DATA_LEN];
            d.copy_from_slice(&data);
            let m = MadRepr { header: h, data: d };
            let bytes = m.to_bytes();
            prop_assert_eq!(MadRepr::parse_bytes(&bytes), Ok(m));
        }

        #[test]
        fn any_bytes_re_emit(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(m) = MadRepr::parse_bytes(&bytes) {
                prop_assert_eq!(&m.to_bytes()[..], &bytes[..256]);
            }
        }
    }
}
