//! The Subnet Administration (SA) header and a whole SA MAD.
//!
//! An SA MAD [ib_mad.h `struct ib_sa_mad` (packed); `IB_MGMT_SA_HDR` = 56,
//! `IB_MGMT_SA_DATA` = 200; IBA 15.2.1]:
//!
//! | MAD off | Size | Part |
//! |---|---|---|
//! | 0 | 24 | MAD common header ([`crate::mad`]) |
//! | 24 | 12 | RMPP header ([`crate::rmpp`]) |
//! | 36 | 20 | SA header (this module's [`Packet`]/[`SaHeader`]) |
//! | 56 | 200 | SA data: the record(s) |
//!
//! The SA header, offsets relative to its start (MAD byte 36):
//!
//! | Off | Size | Field |
//! |---|---|---|
//! | 0 | 8 | SM_Key |
//! | 8 | 2 | AttributeOffset (in 8-byte words) |
//! | 10 | 2 | Reserved |
//! | 12 | 8 | ComponentMask |

use crate::class_port_info::{ClassPortInfo, CLASS_PORT_INFO_LEN};
use crate::error::{check_len, ContentError, Error, Layer, Result};
use crate::field::{array, be16, be64, put16, put64};
use crate::mad::{self, MadHeader, MadStatus, Method, MgmtClass, MAD_HEADER_LEN};
use crate::mcmember::{McMemberRecord, MC_MEMBER_RECORD_LEN};
use crate::rmpp::{self, RmppRepr, RMPP_HEADER_LEN};
use crate::service_record::{ServiceRecord, SERVICE_RECORD_LEN};

/// The SA management class version, `IB_SA_CLASS_VERSION` [ib_sa.h].
pub const SA_CLASS_VERSION: u8 = 2;
/// Length of the SA header.
pub const SA_HEADER_LEN: usize = 20;
/// MAD offset of the SA header (`IB_MGMT_RMPP_HDR`).
pub const SA_HEADER_OFFSET: usize = MAD_HEADER_LEN + RMPP_HEADER_LEN;
/// MAD offset of the SA data, `IB_MGMT_SA_HDR` [ib_mad.h].
pub const SA_DATA_OFFSET: usize = SA_HEADER_OFFSET + SA_HEADER_LEN;
/// Length of the SA data area of one MAD, `IB_MGMT_SA_DATA` [ib_mad.h].
pub const SA_DATA_LEN: usize = 200;
/// Bytes of the SA data after an MCMemberRecord.
pub const MC_MEMBER_TRAILING_LEN: usize = SA_DATA_LEN - MC_MEMBER_RECORD_LEN;
/// Bytes of the SA data after a ClassPortInfo.
pub const CLASS_PORT_INFO_TRAILING_LEN: usize = SA_DATA_LEN - CLASS_PORT_INFO_LEN;
/// Bytes of the SA data after a ServiceRecord.
pub const SERVICE_TRAILING_LEN: usize = SA_DATA_LEN - SERVICE_RECORD_LEN;

/// SA attribute IDs [ib_sa.h `IB_SA_ATTR_*`; protocol.md §3.5].
pub mod attr {
    /// ClassPortInfo.
    pub const CLASS_PORT_INFO: u16 = 0x0001;
    /// Notice.
    pub const NOTICE: u16 = 0x0002;
    /// InformInfo.
    pub const INFORM_INFO: u16 = 0x0003;
    /// NodeRecord.
    pub const NODE_RECORD: u16 = 0x0011;
    /// PortInfoRecord.
    pub const PORT_INFO_RECORD: u16 = 0x0012;
    /// SLtoVLMappingTableRecord.
    pub const SL2VL_RECORD: u16 = 0x0013;
    /// SwitchInfoRecord.
    pub const SWITCH_INFO_RECORD: u16 = 0x0014;
    /// LinearForwardingTableRecord.
    pub const LINEAR_FDB_RECORD: u16 = 0x0015;
    /// RandomForwardingTableRecord.
    pub const RANDOM_FDB_RECORD: u16 = 0x0016;
    /// MulticastForwardingTableRecord.
    pub const MCAST_FDB_RECORD: u16 = 0x0017;
    /// SMInfoRecord.
    pub const SM_INFO_RECORD: u16 = 0x0018;
    /// LinkRecord.
    pub const LINK_RECORD: u16 = 0x0020;
    /// GuidInfoRecord.
    pub const GUID_INFO_RECORD: u16 = 0x0030;
    /// ServiceRecord.
    pub const SERVICE_RECORD: u16 = 0x0031;
    /// P_KeyTableRecord.
    pub const PARTITION_RECORD: u16 = 0x0033;
    /// PathRecord.
    pub const PATH_RECORD: u16 = 0x0035;
    /// VLArbitrationTableRecord.
    pub const VL_ARB_RECORD: u16 = 0x0036;
    /// MCMemberRecord.
    pub const MC_MEMBER_RECORD: u16 = 0x0038;
    /// TraceRecord.
    pub const TRACE_RECORD: u16 = 0x0039;
    /// MultiPathRecord.
    pub const MULTI_PATH_RECORD: u16 = 0x003A;
    /// ServiceAssociationRecord.
    pub const SERVICE_ASSOC_RECORD: u16 = 0x003B;
    /// InformInfoRecord.
    pub const INFORM_INFO_RECORD: u16 = 0x00F3;
}

/// Byte ranges of the SA header (relative to its start, MAD byte 36).
pub mod field {
    use crate::field::*;

    /// SM_Key.
    pub const SM_KEY: Field = 0..8;
    /// AttributeOffset.
    pub const ATTRIBUTE_OFFSET: Field = 8..10;
    /// Reserved.
    pub const RESERVED: Field = 10..12;
    /// ComponentMask.
    pub const COMPONENT_MASK: Field = 12..20;
}

fixed_view!(Layer::SaHeader, SA_HEADER_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    /// SM_Key.
    pub fn sm_key(&self) -> u64 {
        be64(self.buffer.as_ref(), field::SM_KEY.start)
    }

    /// AttributeOffset, in 8-byte words.
    pub fn attribute_offset(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ATTRIBUTE_OFFSET.start)
    }

    /// Reserved.
    pub fn reserved(&self) -> u16 {
        be16(self.buffer.as_ref(), field::RESERVED.start)
    }

    /// ComponentMask.
    pub fn component_mask(&self) -> u64 {
        be64(self.buffer.as_ref(), field::COMPONENT_MASK.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set SM_Key.
    pub fn set_sm_key(&mut self, v: u64) {
        put64(self.buffer.as_mut(), field::SM_KEY.start, v);
    }

    /// Set AttributeOffset.
    pub fn set_attribute_offset(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::ATTRIBUTE_OFFSET.start, v);
    }

    /// Set Reserved.
    pub fn set_reserved(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::RESERVED.start, v);
    }

    /// Set ComponentMask.
    pub fn set_component_mask(&mut self, v: u64) {
        put64(self.buffer.as_mut(), field::COMPONENT_MASK.start, v);
    }
}

/// The owned SA header [ib_mad.h `struct ib_sa_hdr`].
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SaHeader {
    /// SM_Key (0 from the kernel; an SA always answers 0, C15-0.1.5).
    pub sm_key: u64,
    /// AttributeOffset in 8-byte words (0 in requests; the padded record size in responses).
    pub attribute_offset: u16,
    /// Reserved (kept).
    pub reserved: u16,
    /// ComponentMask (for MCMemberRecord see [`crate::mcmember::ComponentMask`]).
    pub component_mask: u64,
}

impl SaHeader {
    /// Encoded length (20).
    pub const LEN: usize = SA_HEADER_LEN;

    /// Read the header.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<SaHeader> {
        packet.check_len()?;
        Ok(SaHeader {
            sm_key: packet.sm_key(),
            attribute_offset: packet.attribute_offset(),
            reserved: packet.reserved(),
            component_mask: packet.component_mask(),
        })
    }

    /// Parse from the start of `buf` (which starts at the SA header, MAD byte 36).
    pub fn parse_bytes(buf: &[u8]) -> Result<SaHeader> {
        SaHeader::parse(&Packet::new_unchecked(buf))
    }

    /// Encoded length (20).
    pub const fn buffer_len(&self) -> usize {
        SA_HEADER_LEN
    }

    /// Write the header; the buffer must hold 20 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        packet.set_sm_key(self.sm_key);
        packet.set_attribute_offset(self.attribute_offset);
        packet.set_reserved(self.reserved);
        packet.set_component_mask(self.component_mask);
    }

    /// Write the header to the start of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than 20 bytes.
    pub fn emit_bytes(&self, buf: &mut [u8]) {
        self.emit(&mut Packet::new_unchecked(buf));
    }
}

/// The 200-byte SA data area, decoded by attribute.
///
/// The record is decoded whenever the AttributeID names it, whatever the method, status or
/// RMPP state (every data area is long enough for one record). In a GetTableResp, an
/// RMPP-active segment or an error response the area may hold something else (several
/// records, a later segment, a copy of the request); the bytes after the first record are
/// kept in `trailing`, so the MAD always re-emits byte for byte.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SaData {
    /// AttributeID 0x0038: an MCMemberRecord (52 bytes) and the 148 bytes after it.
    McMember {
        /// The record (SA data bytes 0..52).
        record: McMemberRecord,
        /// SA data bytes 52..200 (zero in a single-record MAD).
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serde_support::hex"))]
        trailing: [u8; MC_MEMBER_TRAILING_LEN],
    },
    /// AttributeID 0x0001: ClassPortInfo (72 bytes) and the 128 bytes after it.
    ClassPortInfo {
        /// The attribute (SA data bytes 0..72).
        info: ClassPortInfo,
        /// SA data bytes 72..200.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serde_support::hex"))]
        trailing: [u8; CLASS_PORT_INFO_TRAILING_LEN],
    },
    /// AttributeID 0x0031: a ServiceRecord (176 bytes) and the 24 bytes after it.
    Service {
        /// The record (SA data bytes 0..176).
        record: ServiceRecord,
        /// SA data bytes 176..200 (zero in a single-record MAD).
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serde_support::hex"))]
        trailing: [u8; SERVICE_TRAILING_LEN],
    },
    /// Any other attribute: the raw 200 bytes.
    Raw(#[cfg_attr(feature = "serde", serde(serialize_with = "crate::serde_support::hex"))] [u8; SA_DATA_LEN]),
}

impl SaData {
    /// An MCMemberRecord followed by zeros.
    pub const fn mc_member(record: McMemberRecord) -> SaData {
        SaData::McMember { record, trailing: [0; MC_MEMBER_TRAILING_LEN] }
    }

    /// A ClassPortInfo followed by zeros.
    pub const fn class_port_info(info: ClassPortInfo) -> SaData {
        SaData::ClassPortInfo { info, trailing: [0; CLASS_PORT_INFO_TRAILING_LEN] }
    }

    /// A ServiceRecord followed by zeros.
    pub const fn service(record: ServiceRecord) -> SaData {
        SaData::Service { record, trailing: [0; SERVICE_TRAILING_LEN] }
    }

    /// All-zero raw data.
    pub const fn zeroed() -> SaData {
        SaData::Raw([0; SA_DATA_LEN])
    }

    /// Decode the 200-byte area for `attribute_id` (see the type documentation).
    pub fn decode(attribute_id: u16, data: &[u8; SA_DATA_LEN]) -> SaData {
        match attribute_id {
            attr::MC_MEMBER_RECORD => match McMemberRecord::parse_bytes(&data[..]) {
                Ok(record) => SaData::McMember { record, trailing: array(data, MC_MEMBER_RECORD_LEN) },
                Err(_) => SaData::Raw(*data),
            },
            attr::CLASS_PORT_INFO => match ClassPortInfo::parse_bytes(&data[..]) {
                Ok(info) => SaData::ClassPortInfo { info, trailing: array(data, CLASS_PORT_INFO_LEN) },
                Err(_) => SaData::Raw(*data),
            },
            attr::SERVICE_RECORD => match ServiceRecord::parse_bytes(&data[..]) {
                Ok(record) => SaData::Service { record, trailing: array(data, SERVICE_RECORD_LEN) },
                Err(_) => SaData::Raw(*data),
            },
            _ => SaData::Raw(*data),
        }
    }

    /// The 200 encoded bytes.
    pub fn to_bytes(&self) -> [u8; SA_DATA_LEN] {
        let mut b = [0u8; SA_DATA_LEN];
        self.emit_bytes(&mut b);
        b
    }

    /// Write the 200 encoded bytes to the start of `buf` (every byte written: no
    /// intermediate copy when the MAD is built in a transmit buffer).
    ///
    /// # Panics
    /// If `buf` is shorter than 200 bytes.
    pub fn emit_bytes(&self, buf: &mut [u8]) {
        let b = &mut buf[..SA_DATA_LEN];
        match self {
            SaData::McMember { record, trailing } => {
                record.emit_bytes(&mut b[..MC_MEMBER_RECORD_LEN]);
                b[MC_MEMBER_RECORD_LEN..].copy_from_slice(trailing);
            }
            SaData::ClassPortInfo { info, trailing } => {
                info.emit_bytes(&mut b[..CLASS_PORT_INFO_LEN]);
                b[CLASS_PORT_INFO_LEN..].copy_from_slice(trailing);
            }
            SaData::Service { record, trailing } => {
                record.emit_bytes(&mut b[..SERVICE_RECORD_LEN]);
                b[SERVICE_RECORD_LEN..].copy_from_slice(trailing);
            }
            SaData::Raw(r) => b.copy_from_slice(r),
        }
    }

    /// The record size in 8-byte words, as an SA puts it in AttributeOffset of a response
    /// (`ib_get_attr_offset`: MCMemberRecord 7, ClassPortInfo 9, ServiceRecord 22); 0 for raw
    /// data.
    pub const fn attribute_offset_words(&self) -> u16 {
        match self {
            SaData::McMember { .. } => MC_MEMBER_RECORD_LEN.div_ceil(8) as u16,
            SaData::ClassPortInfo { .. } => CLASS_PORT_INFO_LEN.div_ceil(8) as u16,
            SaData::Service { .. } => SERVICE_RECORD_LEN.div_ceil(8) as u16,
            SaData::Raw(_) => 0,
        }
    }

    /// The MCMemberRecord, if this is one.
    pub const fn as_mc_member(&self) -> Option<&McMemberRecord> {
        match self {
            SaData::McMember { record, .. } => Some(record),
            _ => None,
        }
    }

    /// The ServiceRecord, if this is one.
    pub const fn as_service(&self) -> Option<&ServiceRecord> {
        match self {
            SaData::Service { record, .. } => Some(record),
            _ => None,
        }
    }

    /// The ClassPortInfo, if this is one.
    pub const fn as_class_port_info(&self) -> Option<&ClassPortInfo> {
        match self {
            SaData::ClassPortInfo { info, .. } => Some(info),
            _ => None,
        }
    }
}

/// A whole 256-byte SA MAD: common header, RMPP header, SA header and the decoded data.
///
/// [`SaMad::parse`] is lenient (any base version, class or class version is kept, so odd
/// frames decode and re-emit byte for byte); [`SaMad::parse_checked`] also requires base
/// version 1, class 0x03 and class version 2. Error offsets are relative to the MAD start.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SaMad {
    /// The MAD common header.
    pub header: MadHeader,
    /// The RMPP header (all zero in single-MAD requests).
    pub rmpp: RmppRepr,
    /// The SA header.
    pub sa: SaHeader,
    /// The SA data, decoded by `header.attribute_id`.
    pub data: SaData,
}

impl SaMad {
    /// Encoded length (256).
    pub const LEN: usize = crate::MAD_SIZE;

    /// Parse a whole SA MAD from `buf` (at least 256 bytes, else `Len` for `Layer::Mad` at
    /// offset 0 with required length 256; bytes after 256 are ignored). Same as
    /// [`SaMad::parse_bytes`].
    #[inline] // built in the caller's frame: a MAD-sized value not copied out
    pub fn parse(buf: &[u8]) -> Result<SaMad> {
        check_len(Layer::Mad, buf, Self::LEN)?;
        // A fixed-size array from here on: every field's bounds are known at compile time.
        let Some(buf) = buf.first_chunk::<{ Self::LEN }>() else {
            return Err(Error::len(Layer::Mad, 0, Self::LEN, buf.len()));
        };
        let header = MadHeader::parse(&mad::Packet::new_unchecked(buf))?;
        let rmpp = RmppRepr::parse(&rmpp::Packet::new_unchecked(&buf[MAD_HEADER_LEN..SA_HEADER_OFFSET]))
            .map_err(|e| e.add_offset(MAD_HEADER_LEN))?;
        let sa = SaHeader::parse(&Packet::new_unchecked(&buf[SA_HEADER_OFFSET..SA_DATA_OFFSET]))
            .map_err(|e| e.add_offset(SA_HEADER_OFFSET))?;
        // Decoded straight from `buf`, not from a copy.
        let Some(area) = buf[SA_DATA_OFFSET..].first_chunk::<SA_DATA_LEN>() else {
            return Err(Error::len(Layer::Mad, 0, Self::LEN, buf.len()));
        };
        let data = SaData::decode(header.attribute_id, area);
        Ok(SaMad { header, rmpp, sa, data })
    }

    /// Parse a whole SA MAD from `buf`; see [`SaMad::parse`].
    pub fn parse_bytes(buf: &[u8]) -> Result<SaMad> {
        SaMad::parse(buf)
    }

    /// As [`SaMad::parse`], then require base version 1 (`UnsupportedBaseVersion` at offset
    /// 0), class 0x03 (`UnsupportedType(class)` at offset 1) and class version 2
    /// (`UnsupportedClassVersion` at offset 2), all for `Layer::Mad`.
    pub fn parse_checked(buf: &[u8]) -> Result<SaMad> {
        let m = SaMad::parse(buf)?;
        m.header.check_version()?;
        let class = u8::from(m.header.mgmt_class);
        if m.header.mgmt_class != MgmtClass::SubnAdm {
            return Err(Error::content(Layer::Mad, mad::field::MGMT_CLASS, ContentError::UnsupportedType(class)));
        }
        if m.header.class_version != SA_CLASS_VERSION {
            return Err(Error::content(
                Layer::Mad,
                mad::field::CLASS_VERSION,
                ContentError::UnsupportedClassVersion { class, version: m.header.class_version },
            ));
        }
        Ok(m)
    }

    /// Encoded length (256).
    pub const fn buffer_len(&self) -> usize {
        Self::LEN
    }

    /// Write the MAD to the start of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than 256 bytes.
    pub fn emit_bytes(&self, buf: &mut [u8]) {
        self.header.emit_bytes(&mut buf[..MAD_HEADER_LEN]);
        self.rmpp.emit_bytes(&mut buf[MAD_HEADER_LEN..SA_HEADER_OFFSET]);
        self.sa.emit_bytes(&mut buf[SA_HEADER_OFFSET..SA_DATA_OFFSET]);
        self.data.emit_bytes(&mut buf[SA_DATA_OFFSET..Self::LEN]);
    }

    /// Write the MAD through a MAD view (the buffer must hold 256 bytes).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut mad::Packet<&mut T>) {
        let mut b = [0u8; Self::LEN];
        self.emit_bytes(&mut b);
        self.header.emit(packet);
        packet.payload_mut()[..Self::LEN - MAD_HEADER_LEN].copy_from_slice(&b[MAD_HEADER_LEN..]);
    }

    /// The 256 encoded bytes.
    #[inline] // built in the caller's frame: a MAD-sized value not copied out
    pub fn to_bytes(&self) -> [u8; crate::MAD_SIZE] {
        let mut b = [0u8; crate::MAD_SIZE];
        self.emit_bytes(&mut b);
        b
    }

    /// A request as the kernel's SA client builds it (`init_mad`): base version 1, class
    /// 0x03, class version 2, status 0, RMPP header zero, SM_Key 0, AttributeOffset 0.
    pub fn request(method: Method, tid: u64, attribute_id: u16, component_mask: u64, data: SaData) -> SaMad {
        SaMad {
            header: MadHeader {
                base_version: mad::BASE_VERSION,
                mgmt_class: MgmtClass::SubnAdm,
                class_version: SA_CLASS_VERSION,
                response: false,
                method,
                status: MadStatus::SUCCESS,
                class_specific: 0,
                transaction_id: tid,
                attribute_id,
                reserved: 0,
                attribute_modifier: 0,
            },
            rmpp: RmppRepr::default(),
            sa: SaHeader { sm_key: 0, attribute_offset: 0, reserved: 0, component_mask },
            data,
        }
    }

    /// The 256 bytes of `SaMad::request(method, tid, attr::MC_MEMBER_RECORD, component_mask,
    /// SaData::mc_member(*record))`, written directly (proptest
    /// `mc_member_request_as_request`): how a stack's joins and leaves are built.
    #[inline]
    pub fn mc_member_request(
        method: Method,
        tid: u64,
        component_mask: u64,
        record: &McMemberRecord,
    ) -> [u8; crate::MAD_SIZE] {
        let mut b = [0u8; crate::MAD_SIZE];
        Self::mc_member_request_into(&mut b, method, tid, component_mask, record);
        b
    }

    /// [`SaMad::mc_member_request`] written over `b` (every byte of it), so that a caller
    /// keeps the request where it is stored instead of moving a MAD-sized value in.
    #[inline]
    pub fn mc_member_request_into(
        b: &mut [u8; crate::MAD_SIZE],
        method: Method,
        tid: u64,
        component_mask: u64,
        record: &McMemberRecord,
    ) {
        *b = [0u8; crate::MAD_SIZE];
        b[mad::field::BASE_VERSION] = mad::BASE_VERSION;
        b[mad::field::MGMT_CLASS] = MgmtClass::SubnAdm.into();
        b[mad::field::CLASS_VERSION] = SA_CLASS_VERSION;
        b[mad::field::METHOD] = u8::from(method) & !mad::METHOD_RESPONSE_BIT;
        b[mad::field::TRANSACTION_ID].copy_from_slice(&tid.to_be_bytes());
        b[mad::field::ATTRIBUTE_ID].copy_from_slice(&attr::MC_MEMBER_RECORD.to_be_bytes());
        let at = SA_HEADER_OFFSET + field::COMPONENT_MASK.start;
        b[at..at + 8].copy_from_slice(&component_mask.to_be_bytes());
        record.emit_bytes(&mut b[SA_DATA_OFFSET..SA_DATA_OFFSET + MC_MEMBER_RECORD_LEN]);
    }

    /// The response an SA would send to this request, after OpenSM's `osm_sa_respond` /
    /// `osm_sa_send_error`: same TID, class, version, attribute ID and modifier and component
    /// mask; the R bit set and the method `method_resp` (pass `Method::Get` for a GetResp,
    /// also when answering a Set; `Method::Delete` for a DeleteResp); `status`; RMPP header
    /// zero; SM_Key 0 (C15-0.1.5); AttributeOffset the record size in 8-byte words of `data`
    /// (0 for raw data).
    #[inline] // built in the caller's frame: a MAD-sized value not copied out
    pub fn response_to(&self, method_resp: Method, status: MadStatus, data: SaData) -> SaMad {
        SaMad {
            header: MadHeader { response: true, method: method_resp, status, ..self.header },
            rmpp: RmppRepr::default(),
            sa: SaHeader {
                sm_key: 0,
                attribute_offset: data.attribute_offset_words(),
                reserved: 0,
                component_mask: self.sa.component_mask,
            },
            data,
        }
    }

    /// The answer to the MCMemberRecord request `request` carrying `record`, written from the
    /// request's bytes: the same 256 bytes as parsing `request` and emitting
    /// `response_to(method_resp, status, SaData::mc_member(*record))`, without building the
    /// parsed request's response as a value (an SA answers every join and leave this way).
    #[inline]
    pub fn mc_member_response(
        request: &[u8; crate::MAD_SIZE],
        method_resp: Method,
        status: MadStatus,
        record: &McMemberRecord,
    ) -> [u8; crate::MAD_SIZE] {
        let mut b = [0u8; crate::MAD_SIZE];
        // The header as parsed and emitted again is the request's bytes; only the method
        // byte (R bit set) and the status change. RMPP header, SM_Key and reserved stay zero.
        b[..MAD_HEADER_LEN].copy_from_slice(&request[..MAD_HEADER_LEN]);
        b[mad::field::METHOD] = (u8::from(method_resp) & !mad::METHOD_RESPONSE_BIT) | mad::METHOD_RESPONSE_BIT;
        b[mad::field::STATUS].copy_from_slice(&status.0.to_be_bytes());
        let sa = &mut b[SA_HEADER_OFFSET..SA_DATA_OFFSET];
        sa[field::ATTRIBUTE_OFFSET].copy_from_slice(&(MC_MEMBER_RECORD_LEN.div_ceil(8) as u16).to_be_bytes());
        let mask =
            &request[SA_HEADER_OFFSET + field::COMPONENT_MASK.start..SA_HEADER_OFFSET + field::COMPONENT_MASK.end];
        sa[field::COMPONENT_MASK].copy_from_slice(mask);
        record.emit_bytes(&mut b[SA_DATA_OFFSET..SA_DATA_OFFSET + MC_MEMBER_RECORD_LEN]);
        b
    }

    /// The MCMemberRecord, if the data holds one.
    pub const fn mc_member(&self) -> Option<&McMemberRecord> {
        self.data.as_mc_member()
    }
}

/// An RMPP STOP or ABORT (`kind`) with `status` answering the SA MAD `mad` (at least its MAD,
/// RMPP and SA headers, [`SA_DATA_OFFSET`] bytes): those headers, the method's response bit
/// flipped, RMPPVersion 1, RRespTime kept, RMPPFlags Active, SegmentNumber and NewWindowLast 0,
/// no data [mad_rmpp.c `nack_recv`]. Shared by the engine's RMPP receiver and the SA's sender.
pub fn rmpp_stop_or_abort(mad: &[u8], kind: rmpp::RmppType, status: u8) -> [u8; crate::MAD_SIZE] {
    let mut m = [0u8; crate::MAD_SIZE];
    m[..SA_DATA_OFFSET].copy_from_slice(&mad[..SA_DATA_OFFSET]);
    m[mad::field::METHOD] ^= mad::METHOD_RESPONSE_BIT;
    let resp_time = rmpp::Packet::new_unchecked(&m[MAD_HEADER_LEN..SA_HEADER_OFFSET]).resp_time();
    RmppRepr {
        version: rmpp::RMPP_VERSION,
        rmpp_type: kind,
        resp_time,
        flags: rmpp::RmppFlags::ACTIVE,
        status,
        data1: 0,
        data2: 0,
    }
    .emit_bytes(&mut m[MAD_HEADER_LEN..SA_HEADER_OFFSET]);
    m
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::class_port_info::tests::arb_cpi;
    use crate::mad::tests::arb_header;
    use crate::mcmember::tests::{arb_record, golden_frame, golden_record, MAD_AT};
    use crate::mcmember::{ComponentMask, JoinState};
    use crate::rmpp::tests::arb_rmpp;
    use crate::rmpp::{RmppFlags, RmppType};
    use crate::service_record::tests::{arb_record as arb_service, golden as golden_service};
    use proptest::prelude::*;

    fn golden_mad() -> [u8; 256] {
        let f = golden_frame();
        let mut m = [0u8; 256];
        m.copy_from_slice(&f[MAD_AT..MAD_AT + 256]);
        m
    }

    #[test]
    fn golden_delete_mad() {
        let bytes = golden_mad();
        let m = SaMad::parse(&bytes).unwrap();
        assert_eq!(m.header.base_version, 1);
        assert_eq!(m.header.mgmt_class, MgmtClass::SubnAdm);
        assert_eq!(m.header.class_version, 2);
        assert_eq!((m.header.method, m.header.response), (Method::Delete, false));
        assert_eq!(m.header.status, MadStatus::SUCCESS);
        assert_eq!(m.header.transaction_id, 0x0000_0001_0000_0002);
        assert_eq!(m.header.attribute_id, attr::MC_MEMBER_RECORD);
        assert_eq!(m.header.attribute_modifier, 0);
        assert_eq!(m.rmpp, RmppRepr::default());
        assert_eq!(m.sa, SaHeader { component_mask: 0x10003, ..SaHeader::default() });
        assert_eq!(ComponentMask(m.sa.component_mask), ComponentMask::KERNEL_LEAVE);
        assert_eq!(m.mc_member(), Some(&golden_record()));
        assert_eq!(m.header.method_name(), "SubnAdmDelete");
        assert_eq!(m.to_bytes(), bytes);
        assert_eq!(SaMad::parse_checked(&bytes), Ok(m));

        // the builder produces the same MAD
        let built = SaMad::request(
            Method::Delete,
            0x0000_0001_0000_0002,
            attr::MC_MEMBER_RECORD,
            ComponentMask::KERNEL_LEAVE.0,
            SaData::mc_member(golden_record()),
        );
        assert_eq!(built, m);
        // and emit through the MAD view gives the same bytes
        let mut b = [0u8; 256];
        built.emit(&mut mad::Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, bytes);
    }

    #[test]
    fn response_builder() {
        let req = SaMad::parse(&golden_mad()).unwrap();
        let mut rec = golden_record();
        rec.mtu_selector = crate::mcmember::Selector::Exactly;
        let resp = req.response_to(Method::Delete, MadStatus::SUCCESS, SaData::mc_member(rec));
        let b = resp.to_bytes();
        assert_eq!(b[3], 0x95);
        assert_eq!(&b[8..16], &[0, 0, 0, 1, 0, 0, 0, 2]);
        assert_eq!(&b[44..46], &[0, 7]); // AttributeOffset 7 words
        assert_eq!(&b[48..56], &[0, 0, 0, 0, 0, 1, 0, 3]);
        assert_eq!(b[56 + 38], 0x80);
        assert_eq!(resp.header.method_name(), "SubnAdmDeleteResp");
        assert_eq!(SaMad::parse(&b), Ok(resp));

        let err = req.response_to(Method::Get, MadStatus::UNSUPPORTED_METHOD_ATTR, req.data);
        let b = err.to_bytes();
        assert_eq!((b[3], &b[4..6]), (0x81, &[0x00u8, 0x0C][..]));
        assert_eq!(SaMad::parse(&b).unwrap().header.status, MadStatus(0x000C));
    }

    #[test]
    fn class_port_info_and_raw_data() {
        let mut cpi = ClassPortInfo { base_version: 1, class_version: 2, ..ClassPortInfo::default() };
        cpi.set_capability_mask2(crate::class_port_info::CAP_MASK2_SENDONLY_FULL_MEM_SUPPORT);
        let req = SaMad::request(Method::Get, 7, attr::CLASS_PORT_INFO, 0, SaData::zeroed());
        // a zero data area with attribute 0x0001 decodes as an (all-zero) ClassPortInfo
        let parsed = SaMad::parse(&req.to_bytes()).unwrap();
        assert_eq!(parsed.data, SaData::class_port_info(ClassPortInfo::default()));
        assert_eq!(parsed.to_bytes(), req.to_bytes());
        let resp = req.response_to(Method::Get, MadStatus::SUCCESS, SaData::class_port_info(cpi));
        let back = SaMad::parse(&resp.to_bytes()).unwrap();
        assert_eq!(back, resp);
        assert_eq!(back.sa.attribute_offset, 9);
        assert!(back.data.as_class_port_info().unwrap().sendonly_full_member_supported());

        let mut raw = [0u8; 200];
        raw[0] = 0xAA;
        raw[199] = 0x55;
        let pr = SaMad::request(Method::GetTable, 1, attr::PATH_RECORD, 0xC, SaData::Raw(raw));
        let back = SaMad::parse(&pr.to_bytes()).unwrap();
        assert_eq!(back.data, SaData::Raw(raw));
        assert_eq!(back.data.attribute_offset_words(), 0);
    }

    /// A GetTableResp with RMPP active and two records: the first is decoded, the second is
    /// kept in `trailing`.
    #[test]
    fn table_response_keeps_every_byte() {
        let mut b = golden_mad();
        b[3] = 0x92;
        b[24..36].copy_from_slice(&[1, 1, 0xFF, 0, 0, 0, 0, 1, 0, 0, 0, 112]);
        b[44..46].copy_from_slice(&[0, 7]);
        let rec2 = McMemberRecord { join_state: JoinState::SEND_ONLY_FULL_MEMBER, ..golden_record() };
        rec2.emit_bytes(&mut b[56 + 56..56 + 56 + 52]);
        let m = SaMad::parse(&b).unwrap();
        assert_eq!((m.header.method, m.header.response), (Method::GetTable, true));
        assert_eq!(m.rmpp.rmpp_type, RmppType::Data);
        assert_eq!(m.rmpp.flags, RmppFlags::ACTIVE | RmppFlags::FIRST | RmppFlags::LAST);
        assert_eq!(m.mc_member(), Some(&golden_record()));
        match m.data {
            SaData::McMember { trailing, .. } => {
                assert_eq!(McMemberRecord::parse_bytes(&trailing[4..]).unwrap(), rec2);
            }
            _ => panic!("not an MCMemberRecord"),
        }
        assert_eq!(m.to_bytes(), b);
    }

    /// A ServiceRecord Set as `roce sa-query --register` sends it: decoded, re-emitted byte for
    /// byte; OpenSM's answer carries AttributeOffset 22.
    #[test]
    fn service_record_mad() {
        let (rec, rec_bytes) = golden_service();
        let mask = crate::service_record::ComponentMask(0x53);
        let req = SaMad::request(Method::Set, 0x42, attr::SERVICE_RECORD, mask.0, SaData::service(rec));
        let b = req.to_bytes();
        assert_eq!(&b[16..18], &[0x00, 0x31]);
        assert_eq!(&b[56..56 + 176], &rec_bytes[..]);
        assert_eq!(&b[56 + 176..], &[0u8; 24][..]);
        let back = SaMad::parse_checked(&b).unwrap();
        assert_eq!(back, req);
        assert_eq!(back.data.as_service(), Some(&rec));
        let resp = req.response_to(Method::Get, MadStatus::SUCCESS, SaData::service(rec));
        assert_eq!(resp.sa.attribute_offset, 22);
        assert_eq!(resp.header.method_name(), "SubnAdmGetResp");
    }

    #[test]
    fn checked_parse_rejects() {
        let mut b = golden_mad();
        b[0] = 2;
        assert_eq!(
            SaMad::parse_checked(&b),
            Err(Error::content(Layer::Mad, 0, ContentError::UnsupportedBaseVersion(2)))
        );
        assert!(SaMad::parse(&b).is_ok());
        let mut b = golden_mad();
        b[1] = 0x07;
        assert_eq!(SaMad::parse_checked(&b), Err(Error::content(Layer::Mad, 1, ContentError::UnsupportedType(7))));
        let mut b = golden_mad();
        b[2] = 1;
        assert_eq!(
            SaMad::parse_checked(&b),
            Err(Error::content(Layer::Mad, 2, ContentError::UnsupportedClassVersion { class: 3, version: 1 }))
        );
    }

    #[test]
    fn truncation() {
        let b = golden_mad();
        for len in 0..256 {
            assert_eq!(SaMad::parse(&b[..len]), Err(Error::len(Layer::Mad, 0, 256, len)));
            assert_eq!(SaMad::parse_checked(&b[..len]), Err(Error::len(Layer::Mad, 0, 256, len)));
        }
        for len in 0..SA_HEADER_LEN {
            assert_eq!(SaHeader::parse_bytes(&b[36..36 + len]), Err(Error::len(Layer::SaHeader, 0, 20, len)));
        }
    }

    #[test]
    fn sa_header_view() {
        let mut b = [0u8; 20];
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        p.set_sm_key(0x0102_0304_0506_0708);
        p.set_attribute_offset(7);
        p.set_reserved(0xABCD);
        p.set_component_mask(0x10003);
        assert_eq!(
            (p.sm_key(), p.attribute_offset(), p.reserved(), p.component_mask()),
            (0x0102_0304_0506_0708, 7, 0xABCD, 0x10003)
        );
        assert_eq!(b, [1, 2, 3, 4, 5, 6, 7, 8, 0, 7, 0xAB, 0xCD, 0, 0, 0, 0, 0, 1, 0, 3]);
    }

    fn arb_sa_header() -> impl Strategy<Value = SaHeader> {
        (any::<u64>(), any::<u16>(), any::<u16>(), any::<u64>()).prop_map(|(k, o, r, m)| SaHeader {
            sm_key: k,
            attribute_offset: o,
            reserved: r,
            component_mask: m,
        })
    }

    fn arb_sa_mad() -> impl Strategy<Value = SaMad> {
        let trailing = proptest::collection::vec(any::<u8>(), 200);
        (arb_header(), arb_rmpp(), arb_sa_header(), 0u8..4, arb_record(), arb_cpi(), trailing, arb_service()).prop_map(
            |(mut header, rmpp, sa, kind, rec, cpi, t, svc)| {
                let data = match kind {
                    0 => {
                        header.attribute_id = attr::MC_MEMBER_RECORD;
                        let mut trailing = [0u8; MC_MEMBER_TRAILING_LEN];
                        trailing.copy_from_slice(&t[..MC_MEMBER_TRAILING_LEN]);
                        SaData::McMember { record: rec, trailing }
                    }
                    1 => {
                        header.attribute_id = attr::CLASS_PORT_INFO;
                        let mut trailing = [0u8; CLASS_PORT_INFO_TRAILING_LEN];
                        trailing.copy_from_slice(&t[..CLASS_PORT_INFO_TRAILING_LEN]);
                        SaData::ClassPortInfo { info: cpi, trailing }
                    }
                    2 => {
                        header.attribute_id = attr::SERVICE_RECORD;
                        SaData::Service { record: svc, trailing: array(&t, 0) }
                    }
                    _ => {
                        if matches!(
                            header.attribute_id,
                            attr::MC_MEMBER_RECORD | attr::CLASS_PORT_INFO | attr::SERVICE_RECORD
                        ) {
                            header.attribute_id = attr::PATH_RECORD;
                        }
                        let mut raw = [0u8; SA_DATA_LEN];
                        raw.copy_from_slice(&t);
                        SaData::Raw(raw)
                    }
                };
                SaMad { header, rmpp, sa, data }
            },
        )
    }

    proptest! {
        #[test]
        fn round_trip(m in arb_sa_mad()) {
            prop_assert_eq!(SaMad::parse(&m.to_bytes()), Ok(m));
        }

        #[test]
        fn mc_member_response_as_response_to(m in arb_sa_mad(), rec in arb_record(), resp in any::<u8>(), status in any::<u16>()) {
            let request = m.to_bytes();
            let (method, status) = (Method::from(resp & 0x7f), MadStatus(status));
            let want = SaMad::parse(&request).unwrap().response_to(method, status, SaData::mc_member(rec)).to_bytes();
            prop_assert_eq!(SaMad::mc_member_response(&request, method, status, &rec), want);
        }

        #[test]
        fn mc_member_request_as_request(rec in arb_record(), m in any::<u8>(), tid in any::<u64>(), mask in any::<u64>()) {
            let method = Method::from(m);
            let want = SaMad::request(method, tid, attr::MC_MEMBER_RECORD, mask, SaData::mc_member(rec)).to_bytes();
            prop_assert_eq!(SaMad::mc_member_request(method, tid, mask, &rec), want);
        }

        #[test]
        fn sa_header_round_trip(h in arb_sa_header()) {
            let mut b = [0u8; 20];
            h.emit_bytes(&mut b);
            prop_assert_eq!(SaHeader::parse_bytes(&b), Ok(h));
        }

        #[test]
        fn any_bytes_re_emit(v in proptest::collection::vec(any::<u8>(), 0..300), attr_pick in 0u8..4) {
            let mut v = v;
            if v.len() >= 18 {
                let a: u16 = [attr::MC_MEMBER_RECORD, attr::CLASS_PORT_INFO, attr::SERVICE_RECORD, 0x1234][attr_pick as usize];
                v[16..18].copy_from_slice(&a.to_be_bytes());
            }
            match SaMad::parse(&v) {
                Ok(m) => prop_assert_eq!(&m.to_bytes()[..], &v[..256]),
                Err(e) => prop_assert!(v.len() < 256 && e == Error::len(Layer::Mad, 0, 256, v.len())),
            }
        }
    }
}
