//! IGMP (IPv4 multicast group membership): v1/v2 messages through smoltcp's `wire::IgmpPacket` /
//! `IgmpRepr`, and IGMPv3 (membership report and query), which smoltcp does not have.
//!
//! On RoCEv2 an IPv4 multicast join by RDMA-CM is an IP-level join (`ip_mc_inc_group`), which
//! the kernel announces with IGMP: IGMPv3 by default, IGMPv2 when a v2 querier was seen
//! [cma.c cma_igmp_send; net/ipv4/igmp.c igmp_send_report, igmpv3_newpack, add_grec].
//!
//! Layouts [RFC 2236 §2; RFC 3376 §4.1, §4.2]:
//!
//! | Off | Size | v1/v2 (8 bytes) | v3 query (type 0x11, ≥ 12) | v3 report (type 0x22) |
//! |---|---|---|---|---|
//! | 0 | 1 | Type | Type 0x11 | Type 0x22 |
//! | 1 | 1 | Max Resp Time | Max Resp Code | Reserved |
//! | 2 | 2 | Checksum | Checksum | Checksum |
//! | 4 | 4 | Group Address | Group Address | Reserved (2), Number of Group Records (2) |
//! | 8 | 1 | | Resv(7:4) S(3) QRV(2:0) | Group Records … |
//! | 9 | 1 | | QQIC | |
//! | 10 | 2 | | Number of Sources | |
//! | 12 | 4·N | | Source Addresses | |
//!
//! A group record: Record Type (1), Aux Data Len (1, in 32-bit words), Number of Sources (2),
//! Multicast Address (4), Source Addresses (4·N), Auxiliary Data (4·Aux Data Len).
//!
//! The checksum is the Internet checksum over the whole IGMP message (RFC 1071); parsing
//! verifies it ([`ContentError::Checksum`] at offset 2) and emitting fills it.
//!
//! Bytes after the described fields ("Additional Data", RFC 3376 §4.1.10, §4.2.16; or a v1/v2
//! message longer than 8 bytes) count for the checksum but are not kept by the Repr.
//!
//! ## Limits of the owned Repr
//! With the `alloc` feature (on with `std`, the default) there are none: the lists are
//! [`List`]s backed by a `Vec`, and a report holds whatever the frame holds. Without `alloc`,
//! [`V3ReportRepr`] holds at most [`MAX_RECORDS`] group records, each (and a [`V3QueryRepr`])
//! at most [`MAX_SOURCES`] sources and [`MAX_AUX_WORDS`] words of auxiliary data, inline;
//! parsing a message beyond these gives [`ContentError::FieldOutOfRange`]. The view
//! ([`Packet::records`], [`GroupRecord::source`]) reads any number safely either way.
//!
//! A sender splits a report that would exceed the MTU across several messages, as Linux does
//! (net/ipv4/igmp.c `add_grec()`: a new packet when `AVAILABLE(skb)` is too small for the next
//! record or source); [`V3ReportRepr::split_at_mtu`] does the same.

use core::fmt;
use core::net::Ipv4Addr;

use crate::error::{check_count, check_len, ContentError, Error, Layer, Result};
use crate::field::{be16, be32, put16, put32};
use crate::multicast::{self, GroupAddress, List, Records};

pub use smoltcp::wire::{IgmpPacket, IgmpRepr, IgmpVersion};

/// Byte ranges of IGMP messages (offsets in the message; record fields in the record).
pub mod field {
    #![allow(missing_docs)]
    use crate::field::Field;
    pub const TYPE: usize = 0;
    /// Max Resp Time (v2) / Max Resp Code (v3 query) / Reserved (v3 report).
    pub const MAX_RESP_CODE: usize = 1;
    pub const CHECKSUM: Field = 2..4;
    pub const GROUP_ADDRESS: Field = 4..8;
    /// Length of every IGMPv1/v2 message.
    pub const V2_LEN: usize = 8;
    // IGMPv3 query [RFC 3376 §4.1]
    pub const QUERY_FLAGS: usize = 8;
    pub const QQIC: usize = 9;
    pub const QUERY_NUM_SOURCES: Field = 10..12;
    pub const QUERY_SOURCES: usize = 12;
    // IGMPv3 report [RFC 3376 §4.2]
    pub const REPORT_RESERVED2: Field = 4..6;
    pub const REPORT_NUM_RECORDS: Field = 6..8;
    pub const REPORT_RECORDS: usize = 8;
    // Group record, relative to the record [RFC 3376 §4.2.4]
    pub const RECORD_TYPE: usize = 0;
    pub const RECORD_AUX_DATA_LEN: usize = 1;
    pub const RECORD_NUM_SOURCES: Field = 2..4;
    pub const RECORD_GROUP: Field = 4..8;
    pub const RECORD_SOURCES: usize = 8;
}

/// Length of an IGMPv1/v2 message.
pub const V2_LEN: usize = field::V2_LEN;
/// Minimum length of an IGMPv3 query (RFC 3376 §7.1: a query of 8 bytes is v1/v2, ≥ 12 is v3).
pub const V3_QUERY_MIN_LEN: usize = field::QUERY_SOURCES;
/// Length of the fixed part of an IGMPv3 report.
pub const V3_REPORT_HEADER_LEN: usize = field::REPORT_RECORDS;
/// Length of the fixed part of a group record.
pub const GROUP_RECORD_HEADER_LEN: usize = field::RECORD_SOURCES;

/// Most group records a [`V3ReportRepr`] holds without the `alloc` feature.
pub const MAX_RECORDS: usize = 8;
/// Most sources a [`GroupRecordRepr`] or [`V3QueryRepr`] holds without the `alloc` feature,
/// and most 32-bit words of auxiliary data a [`GroupRecordRepr`] holds (IGMPv3 hosts send none):
/// as MLDv2's.
pub use crate::multicast::{MAX_AUX_WORDS, MAX_SOURCES};

/// 224.0.0.1, all systems: destination of general queries [RFC 2236 §3].
pub const ALL_SYSTEMS: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 1);
/// 224.0.0.2, all routers: destination of an IGMPv2 Leave Group [RFC 2236 §3; igmp.c IGMP_ALL_ROUTER].
pub const ALL_ROUTERS: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 2);
/// 224.0.0.22, all IGMPv3-capable routers: destination of v3 reports [RFC 3376 §4.2.14; igmp.c IGMPV3_ALL_MCR].
pub const ALL_V3_ROUTERS: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 22);

enum_with_unknown! {
    /// The IGMP message type [RFC 3376 §4; include/uapi/linux/igmp.h].
    pub enum MessageType(u8) {
        /// Membership Query (v1, v2 or v3 by length).
        MembershipQuery = 0x11,
        /// IGMPv1 Membership Report.
        V1MembershipReport = 0x12,
        /// IGMPv2 Membership Report.
        V2MembershipReport = 0x16,
        /// IGMPv2 Leave Group.
        LeaveGroup = 0x17,
        /// IGMPv3 Membership Report.
        V3MembershipReport = 0x22,
    }
}

impl fmt::Display for MessageType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MessageType::MembershipQuery => f.write_str("Membership Query"),
            MessageType::V1MembershipReport => f.write_str("Membership Report v1"),
            MessageType::V2MembershipReport => f.write_str("Membership Report v2"),
            MessageType::LeaveGroup => f.write_str("Leave Group"),
            MessageType::V3MembershipReport => f.write_str("Membership Report v3"),
            MessageType::Unknown(t) => write!(f, "Unknown (0x{t:02x})"),
        }
    }
}

enum_with_unknown! {
    /// An IGMPv3 group record type [RFC 3376 §4.2.12; igmp.h IGMPV3_MODE_IS_INCLUDE …].
    pub enum RecordType(u8) {
        /// MODE_IS_INCLUDE (current state).
        ModeIsInclude = 1,
        /// MODE_IS_EXCLUDE (current state).
        ModeIsExclude = 2,
        /// CHANGE_TO_INCLUDE_MODE (filter mode change; with no sources: leave).
        ChangeToInclude = 3,
        /// CHANGE_TO_EXCLUDE_MODE (filter mode change; with no sources: join).
        ChangeToExclude = 4,
        /// ALLOW_NEW_SOURCES (source list change).
        AllowNewSources = 5,
        /// BLOCK_OLD_SOURCES (source list change).
        BlockOldSources = 6,
    }
}

impl fmt::Display for RecordType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RecordType::ModeIsInclude => f.write_str("MODE_IS_INCLUDE"),
            RecordType::ModeIsExclude => f.write_str("MODE_IS_EXCLUDE"),
            RecordType::ChangeToInclude => f.write_str("CHANGE_TO_INCLUDE_MODE"),
            RecordType::ChangeToExclude => f.write_str("CHANGE_TO_EXCLUDE_MODE"),
            RecordType::AllowNewSources => f.write_str("ALLOW_NEW_SOURCES"),
            RecordType::BlockOldSources => f.write_str("BLOCK_OLD_SOURCES"),
            RecordType::Unknown(t) => write!(f, "Unknown ({t})"),
        }
    }
}

/// The Internet checksum (RFC 1071, complemented) of `data`, with smoltcp's
/// `wire::checksum::data`.
#[inline]
pub(crate) fn internet_checksum(data: &[u8]) -> u16 {
    !smoltcp::wire::checksum::data(data)
}

/// Check that the fixed part of the message is there (8 bytes; 12 for a v3 query).
fn check_fixed_part(b: &[u8]) -> Result<()> {
    check_len(Layer::Igmp, b, V2_LEN)?;
    if Packet::new_unchecked(b).is_v3_query() {
        check_len(Layer::Igmp, b, V3_QUERY_MIN_LEN)?;
    }
    Ok(())
}

fixed_view!(check: check_fixed_part;
    /// A checked zero-copy view of an IGMP message (any version).
    ///
    /// `check_len` checks the fixed part for the message type: 8 bytes, or 12 for a query longer
    /// than 8 bytes (an IGMPv3 query). The sources of a v3 query and the records of a v3 report
    /// are read through accessors that check their own bounds.
);

impl<T: AsRef<[u8]>> Packet<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The message length (the whole buffer).
    pub fn len(&self) -> usize {
        self.b().len()
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.b().is_empty()
    }

    /// Whether this is a query longer than 8 bytes, i.e. an IGMPv3 query (RFC 3376 §7.1).
    pub fn is_v3_query(&self) -> bool {
        let b = self.b();
        !b.is_empty() && b[field::TYPE] == 0x11 && b.len() > V2_LEN
    }

    /// The message type.
    pub fn msg_type(&self) -> MessageType {
        MessageType::from(self.b()[field::TYPE])
    }

    /// Max Resp Time (v1/v2, in 1/10 s) or Max Resp Code (v3 query); Reserved in a v3 report.
    pub fn max_resp_code(&self) -> u8 {
        self.b()[field::MAX_RESP_CODE]
    }

    /// The checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.b(), field::CHECKSUM.start)
    }

    /// Whether the checksum over the whole message is right.
    pub fn verify_checksum(&self) -> bool {
        smoltcp::wire::checksum::data(self.b()) == 0xffff
    }

    /// The group address (v1/v2 and v3 query).
    pub fn group_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(be32(self.b(), field::GROUP_ADDRESS.start))
    }

    /// v3 query: the byte holding Resv (7:4), S (3) and QRV (2:0).
    pub fn query_flags(&self) -> u8 {
        self.b()[field::QUERY_FLAGS]
    }

    /// v3 query: Suppress Router-Side Processing.
    pub fn s_flag(&self) -> bool {
        self.query_flags() & 0x08 != 0
    }

    /// v3 query: Querier's Robustness Variable.
    pub fn qrv(&self) -> u8 {
        self.query_flags() & 0x07
    }

    /// v3 query: the four reserved bits (7:4 of byte 8), shifted down.
    pub fn query_resv(&self) -> u8 {
        self.query_flags() >> 4
    }

    /// v3 query: Querier's Query Interval Code.
    pub fn qqic(&self) -> u8 {
        self.b()[field::QQIC]
    }

    /// v3 query: Number of Sources.
    pub fn query_num_sources(&self) -> u16 {
        be16(self.b(), field::QUERY_NUM_SOURCES.start)
    }

    /// v3 query: the `i`th source address, `None` past the buffer or the count.
    pub fn query_source(&self, i: usize) -> Option<Ipv4Addr> {
        if i >= usize::from(self.query_num_sources()) {
            return None;
        }
        let at = field::QUERY_SOURCES + 4 * i;
        let b = self.b();
        (b.len() >= at + 4).then(|| Ipv4Addr::from(be32(b, at)))
    }

    /// v3 report: the reserved byte 1.
    pub fn report_reserved1(&self) -> u8 {
        self.b()[field::MAX_RESP_CODE]
    }

    /// v3 report: the reserved bytes 4–5.
    pub fn report_reserved2(&self) -> u16 {
        be16(self.b(), field::REPORT_RESERVED2.start)
    }

    /// v3 report: Number of Group Records.
    pub fn report_num_records(&self) -> u16 {
        be16(self.b(), field::REPORT_NUM_RECORDS.start)
    }

    /// v3 report: iterate the group records (as many as the count says; an error item for a
    /// record that does not fit, after which the iterator ends).
    pub fn records(&self) -> GroupRecords<'_> {
        Records::new(self.b(), field::REPORT_RECORDS, self.report_num_records())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Set the message type.
    pub fn set_msg_type(&mut self, v: MessageType) {
        self.bm()[field::TYPE] = v.into();
    }

    /// Set byte 1 (Max Resp Time / Max Resp Code / Reserved).
    pub fn set_max_resp_code(&mut self, v: u8) {
        self.bm()[field::MAX_RESP_CODE] = v;
    }

    /// Set the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.bm(), field::CHECKSUM.start, v);
    }

    /// Compute and set the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = internet_checksum(self.b());
        self.set_checksum(c);
    }

    /// Set the group address (v1/v2, v3 query).
    pub fn set_group_addr(&mut self, v: Ipv4Addr) {
        put32(self.bm(), field::GROUP_ADDRESS.start, v.into());
    }

    /// v3 query: set Resv (4 bits), S and QRV (3 bits).
    pub fn set_query_flags(&mut self, resv: u8, s_flag: bool, qrv: u8) {
        self.bm()[field::QUERY_FLAGS] = (resv << 4) | (u8::from(s_flag) << 3) | (qrv & 0x07);
    }

    /// v3 query: set QQIC.
    pub fn set_qqic(&mut self, v: u8) {
        self.bm()[field::QQIC] = v;
    }

    /// v3 query: set Number of Sources.
    pub fn set_query_num_sources(&mut self, v: u16) {
        put16(self.bm(), field::QUERY_NUM_SOURCES.start, v);
    }

    /// v3 query: set the `i`th source (panics past the buffer).
    pub fn set_query_source(&mut self, i: usize, v: Ipv4Addr) {
        put32(self.bm(), field::QUERY_SOURCES + 4 * i, v.into());
    }

    /// v3 report: set the reserved bytes 4–5.
    pub fn set_report_reserved2(&mut self, v: u16) {
        put16(self.bm(), field::REPORT_RESERVED2.start, v);
    }

    /// v3 report: set Number of Group Records.
    pub fn set_report_num_records(&mut self, v: u16) {
        put16(self.bm(), field::REPORT_NUM_RECORDS.start, v);
    }
}

/// Iterator over the group records of an IGMPv3 report; see [`Packet::records`].
pub type GroupRecords<'a> = Records<'a, Ipv4Addr>;

/// A checked zero-copy view of one IGMPv3 group record (the shared view of
/// [`multicast::Record`] with an IPv4 group).
pub type GroupRecord<T> = multicast::Record<T, Ipv4Addr>;

impl<T: AsRef<[u8]>> GroupRecord<T> {
    /// Multicast Address.
    pub fn group_addr(&self) -> Ipv4Addr {
        self.address()
    }
}

/// IGMPv3 records carry IPv4 groups and sources.
impl GroupAddress for Ipv4Addr {
    const LEN: usize = 4;
    const LAYER: Layer = Layer::Igmp;
    type RecordType = RecordType;
    fn read(b: &[u8]) -> Self {
        Ipv4Addr::from(be32(b, 0))
    }
    fn write(self, b: &mut [u8]) {
        put32(b, 0, self.into());
    }
}

/// An IGMPv1/v2 message (8 bytes), kept whole: type, byte 1 and group [RFC 2236 §2].
///
/// Converts to and from smoltcp's [`IgmpRepr`] ([`V2Repr::to_smoltcp`], `From<&IgmpRepr>`),
/// which holds the same message without byte 1 of reports and leaves (zero on the wire,
/// RFC 2236 §2.2) and rejects non-multicast groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct V2Repr {
    /// Type: 0x11 query, 0x12 v1 report, 0x16 v2 report, 0x17 leave (any other is kept).
    pub msg_type: MessageType,
    /// Max Resp Time in 1/10 s (queries; 0 in a v1 query and in every other message).
    pub max_resp_code: u8,
    /// Group Address (0.0.0.0 in a general query).
    pub group_addr: Ipv4Addr,
}

impl V2Repr {
    /// Convert to smoltcp's representation, checked by smoltcp's own `IgmpRepr::parse`.
    ///
    /// Errors: a type smoltcp does not know ([`ContentError::UnsupportedType`] at 0) or a
    /// group that is neither multicast nor 0.0.0.0 ([`ContentError::Malformed`] at 4).
    pub fn to_smoltcp(&self) -> Result<IgmpRepr> {
        let mut buf = [0u8; V2_LEN];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_msg_type(self.msg_type);
        p.set_max_resp_code(self.max_resp_code);
        p.set_group_addr(self.group_addr);
        p.fill_checksum();
        if !self.group_addr.is_multicast() && !self.group_addr.is_unspecified() {
            return Err(Error::content(Layer::Igmp, field::GROUP_ADDRESS.start, ContentError::Malformed));
        }
        IgmpRepr::parse(&IgmpPacket::new_unchecked(&buf[..]))
            .map_err(|_| Error::content(Layer::Igmp, field::TYPE, ContentError::UnsupportedType(buf[0])))
    }
}

impl From<&IgmpRepr> for V2Repr {
    /// Emit smoltcp's repr (its `IgmpRepr::emit`) into a zeroed buffer and read the bytes back.
    fn from(r: &IgmpRepr) -> V2Repr {
        let mut buf = [0u8; V2_LEN];
        r.emit(&mut IgmpPacket::new_unchecked(&mut buf[..]));
        let p = Packet::new_unchecked(&buf[..]);
        V2Repr { msg_type: p.msg_type(), max_resp_code: p.max_resp_code(), group_addr: p.group_addr() }
    }
}

/// An IGMPv3 Membership Query (type 0x11, ≥ 12 bytes) [RFC 3376 §4.1].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(not(feature = "alloc"), derive(Copy))]
pub struct V3QueryRepr {
    /// Max Resp Code (RFC 3376 §4.1.1: < 128 is 1/10 s, else floating point).
    pub max_resp_code: u8,
    /// Group Address (0.0.0.0: general query).
    pub group_addr: Ipv4Addr,
    /// The four reserved bits of byte 8 (7:4), kept.
    pub resv: u8,
    /// S flag (Suppress Router-Side Processing).
    pub s_flag: bool,
    /// QRV, Querier's Robustness Variable (3 bits).
    pub qrv: u8,
    /// QQIC, Querier's Query Interval Code.
    pub qqic: u8,
    /// Source addresses (any number with `alloc`; else at most [`MAX_SOURCES`]).
    pub sources: List<Ipv4Addr, MAX_SOURCES>,
}

/// One IGMPv3 group record [RFC 3376 §4.2.4].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(not(feature = "alloc"), derive(Copy))]
pub struct GroupRecordRepr {
    /// Record Type.
    pub record_type: RecordType,
    /// Multicast Address.
    pub group_addr: Ipv4Addr,
    /// Source addresses (any number with `alloc`; else at most [`MAX_SOURCES`]).
    pub sources: List<Ipv4Addr, MAX_SOURCES>,
    /// Auxiliary data, in 32-bit words (at most [`MAX_AUX_WORDS`]; hosts send none).
    pub aux_data: List<u32, MAX_AUX_WORDS>,
}

#[cfg(not(feature = "alloc"))]
impl crate::multicast::Blank for GroupRecordRepr {
    const BLANK: Self = GroupRecordRepr::new(RecordType::ModeIsInclude, Ipv4Addr::UNSPECIFIED);
}

group_record_repr!(GroupRecordRepr { group_addr: Ipv4Addr }, view: GroupRecord, record_type: RecordType);

/// An IGMPv3 Membership Report (type 0x22) [RFC 3376 §4.2].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(not(feature = "alloc"), derive(Copy))]
pub struct V3ReportRepr {
    /// Reserved byte 1, kept.
    pub reserved1: u8,
    /// Reserved bytes 4–5, kept.
    pub reserved2: u16,
    /// The group records (any number with `alloc`; else at most [`MAX_RECORDS`]).
    pub records: List<GroupRecordRepr, MAX_RECORDS>,
}

impl V3ReportRepr {
    /// A report with one record of `record_type` for `group` and no sources.
    pub fn single(record_type: RecordType, group: Ipv4Addr) -> Self {
        let mut records = List::new();
        records.push(GroupRecordRepr::new(record_type, group)).ok();
        V3ReportRepr { reserved1: 0, reserved2: 0, records }
    }

    /// The report as one or more reports whose IPv4 packets (20-byte header plus the 4-byte
    /// Router Alert option Linux adds) fit `mtu`, as net/ipv4/igmp.c `add_grec()` builds them:
    /// records are packed in order while they fit; a record whose sources alone do not fit
    /// is cut into records of the same type and group, each with as many sources as fit.
    /// Every report holds at least one record (or one source), whatever the MTU.
    #[cfg(feature = "alloc")]
    pub fn split_at_mtu(&self, mtu: usize) -> alloc::vec::Vec<V3ReportRepr> {
        let room = mtu.saturating_sub(24 + V3_REPORT_HEADER_LEN);
        let (reserved1, reserved2) = (self.reserved1, self.reserved2);
        let pieces = multicast::split_records(&self.records, room);
        pieces.into_iter().map(|records| V3ReportRepr { reserved1, reserved2, records }).collect()
    }
}

/// An IGMP message of any version: the owned representation of this module (also [`Repr`]).
// The v3/v2 report variant holds its records inline (no allocator in this crate), so it
// is much larger than the others; boxing is not an option in `no_std` without `alloc`.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(not(feature = "alloc"), derive(Copy))]
pub enum IgmpMessage {
    /// An 8-byte IGMPv1/v2 message: v1/v2 query, v1/v2 report, leave.
    V2(V2Repr),
    /// An IGMPv3 query (a query longer than 8 bytes).
    V3Query(V3QueryRepr),
    /// An IGMPv3 membership report.
    V3Report(V3ReportRepr),
}

/// The owned representation of an IGMP message.
pub type Repr = IgmpMessage;

impl IgmpMessage {
    /// The Linux IGMPv3 join: a report with one CHANGE_TO_EXCLUDE_MODE record and no sources,
    /// sent to 224.0.0.22 [igmp.c igmpv3_send_cr, add_grec].
    pub fn v3_join(group: Ipv4Addr) -> Self {
        IgmpMessage::V3Report(V3ReportRepr::single(RecordType::ChangeToExclude, group))
    }

    /// The Linux IGMPv3 leave: a report with one CHANGE_TO_INCLUDE_MODE record and no sources,
    /// sent to 224.0.0.22 [igmp.c igmpv3_send_cr].
    pub fn v3_leave(group: Ipv4Addr) -> Self {
        IgmpMessage::V3Report(V3ReportRepr::single(RecordType::ChangeToInclude, group))
    }

    /// The IGMPv2 join: a v2 Membership Report (0x16) sent to the group [igmp.c igmp_send_report].
    pub fn v2_report(group: Ipv4Addr) -> Self {
        IgmpMessage::V2(V2Repr { msg_type: MessageType::V2MembershipReport, max_resp_code: 0, group_addr: group })
    }

    /// The IGMPv2 leave: Leave Group (0x17) sent to 224.0.0.2 [igmp.c igmp_send_report].
    pub fn v2_leave(group: Ipv4Addr) -> Self {
        IgmpMessage::V2(V2Repr { msg_type: MessageType::LeaveGroup, max_resp_code: 0, group_addr: group })
    }

    /// The IPv4 destination the message goes to: 224.0.0.22 for a v3 report, 224.0.0.2 for a
    /// leave, the group for a v1/v2 report and a group-specific query, 224.0.0.1 for a general
    /// query [RFC 2236 §3, RFC 3376 §4.1.12, §4.2.14; igmp.c].
    pub fn destination(&self) -> Ipv4Addr {
        match self {
            IgmpMessage::V3Report(_) => ALL_V3_ROUTERS,
            IgmpMessage::V2(v) if v.msg_type == MessageType::LeaveGroup => ALL_ROUTERS,
            IgmpMessage::V2(v) if v.msg_type == MessageType::MembershipQuery && v.group_addr.is_unspecified() => {
                ALL_SYSTEMS
            }
            IgmpMessage::V3Query(q) if q.group_addr.is_unspecified() => ALL_SYSTEMS,
            IgmpMessage::V2(v) => v.group_addr,
            IgmpMessage::V3Query(q) => q.group_addr,
        }
    }

    /// The message type on the wire.
    pub fn msg_type(&self) -> MessageType {
        match self {
            IgmpMessage::V2(v) => v.msg_type,
            IgmpMessage::V3Query(_) => MessageType::MembershipQuery,
            IgmpMessage::V3Report(_) => MessageType::V3MembershipReport,
        }
    }

    /// Parse a whole IGMP message (the IPv4 payload): the checksum is verified over all of it.
    ///
    /// A query of exactly 8 bytes is v1/v2, one of 12 or more is v3 (9–11 is a length
    /// error); types 0x12, 0x16 and 0x17 are v1/v2; 0x22 is a v3 report; any other type is
    /// [`ContentError::UnsupportedType`].
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Self> {
        p.check_len()?;
        if !p.verify_checksum() {
            return Err(Error::content(Layer::Igmp, field::CHECKSUM.start, ContentError::Checksum));
        }
        match p.msg_type() {
            MessageType::MembershipQuery if p.is_v3_query() => {
                let n = check_count(
                    Layer::Igmp,
                    field::QUERY_NUM_SOURCES.start,
                    usize::from(p.query_num_sources()),
                    List::<u32, MAX_SOURCES>::CAPACITY,
                )?;
                check_len(Layer::Igmp, p.b(), field::QUERY_SOURCES + 4 * n)?;
                let mut sources = List::new();
                for s in (0..n).filter_map(|i| p.query_source(i)) {
                    sources.push(s).ok();
                }
                Ok(IgmpMessage::V3Query(V3QueryRepr {
                    max_resp_code: p.max_resp_code(),
                    group_addr: p.group_addr(),
                    resv: p.query_resv(),
                    s_flag: p.s_flag(),
                    qrv: p.qrv(),
                    qqic: p.qqic(),
                    sources,
                }))
            }
            MessageType::MembershipQuery
            | MessageType::V1MembershipReport
            | MessageType::V2MembershipReport
            | MessageType::LeaveGroup => Ok(IgmpMessage::V2(V2Repr {
                msg_type: p.msg_type(),
                max_resp_code: p.max_resp_code(),
                group_addr: p.group_addr(),
            })),
            MessageType::V3MembershipReport => {
                check_count(
                    Layer::Igmp,
                    field::REPORT_NUM_RECORDS.start,
                    usize::from(p.report_num_records()),
                    List::<u32, MAX_RECORDS>::CAPACITY,
                )?;
                let mut records = List::new();
                for item in p.records() {
                    let (at, rec) = item?;
                    let r = GroupRecordRepr::parse(&rec).map_err(|e| e.add_offset(at))?;
                    records.push(r).ok();
                }
                Ok(IgmpMessage::V3Report(V3ReportRepr {
                    reserved1: p.report_reserved1(),
                    reserved2: p.report_reserved2(),
                    records,
                }))
            }
            MessageType::Unknown(t) => Err(Error::content(Layer::Igmp, field::TYPE, ContentError::UnsupportedType(t))),
        }
    }

    /// Parse from a buffer holding exactly the IGMP message (never panics).
    pub fn parse_bytes(buf: &[u8]) -> Result<Self> {
        Self::parse(&Packet::new_checked(buf)?)
    }

    /// The length of the emitted message.
    pub fn buffer_len(&self) -> usize {
        match self {
            IgmpMessage::V2(_) => V2_LEN,
            IgmpMessage::V3Query(q) => V3_QUERY_MIN_LEN + 4 * q.sources.len(),
            IgmpMessage::V3Report(r) => {
                V3_REPORT_HEADER_LEN + r.records.iter().map(GroupRecordRepr::buffer_len).sum::<usize>()
            }
        }
    }

    /// Emit the message and fill its checksum. The packet's buffer must be exactly
    /// `buffer_len()` bytes (the checksum covers the whole buffer); panics if it is shorter.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, p: &mut Packet<&mut T>) {
        p.set_checksum(0);
        match self {
            IgmpMessage::V2(v) => {
                p.set_msg_type(v.msg_type);
                p.set_max_resp_code(v.max_resp_code);
                p.set_group_addr(v.group_addr);
            }
            IgmpMessage::V3Query(q) => {
                p.set_msg_type(MessageType::MembershipQuery);
                p.set_max_resp_code(q.max_resp_code);
                p.set_group_addr(q.group_addr);
                p.set_query_flags(q.resv, q.s_flag, q.qrv);
                p.set_qqic(q.qqic);
                p.set_query_num_sources(q.sources.len() as u16);
                for (i, s) in q.sources.iter().enumerate() {
                    p.set_query_source(i, *s);
                }
            }
            IgmpMessage::V3Report(r) => {
                p.set_msg_type(MessageType::V3MembershipReport);
                p.set_max_resp_code(r.reserved1);
                p.set_report_reserved2(r.reserved2);
                p.set_report_num_records(r.records.len() as u16);
                let mut at = field::REPORT_RECORDS;
                for rec in r.records.iter() {
                    rec.emit_bytes(&mut p.bm()[at..]);
                    at += rec.buffer_len();
                }
            }
        }
        p.fill_checksum();
    }

    /// Emit into `buf[..buffer_len()]` (panics if `buf` is shorter); returns the length.
    pub fn emit_bytes(&self, buf: &mut [u8]) -> usize {
        let n = self.buffer_len();
        self.emit(&mut Packet::new_unchecked(&mut buf[..n]));
        n
    }
}

impl From<&IgmpRepr> for IgmpMessage {
    fn from(r: &IgmpRepr) -> Self {
        IgmpMessage::V2(V2Repr::from(r))
    }
}

impl fmt::Display for IgmpMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IgmpMessage::V2(v) => write!(f, "IGMP {} group {}", v.msg_type, v.group_addr),
            IgmpMessage::V3Query(q) => {
                write!(f, "IGMPv3 Membership Query group {} sources {}", q.group_addr, q.sources.len())
            }
            IgmpMessage::V3Report(r) => {
                write!(f, "IGMPv3 Membership Report")?;
                for rec in r.records.iter() {
                    write!(f, " [{} {}", rec.record_type, rec.group_addr)?;
                    for s in rec.sources.iter() {
                        write!(f, " {s}")?;
                    }
                    f.write_str("]")?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    // smoltcp's own IGMPv2 vectors (src/wire/igmp.rs tests).
    static LEAVE_PACKET_BYTES: [u8; 8] = [0x17, 0x00, 0x02, 0x69, 0xe0, 0x00, 0x06, 0x96];
    static REPORT_PACKET_BYTES: [u8; 8] = [0x16, 0x00, 0x08, 0xda, 0xe1, 0x00, 0x00, 0x25];

    /// An independent RFC 1071 checksum (16-bit one's-complement sum, folded, complemented).
    fn rfc1071(data: &[u8]) -> u16 {
        let mut sum: u32 = 0;
        for chunk in data.chunks(2) {
            let w = if chunk.len() == 2 {
                u16::from_be_bytes([chunk[0], chunk[1]])
            } else {
                u16::from_be_bytes([chunk[0], 0])
            };
            sum += u32::from(w);
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    #[test]
    fn smoltcp_v2_vectors() {
        let leave = IgmpMessage::parse_bytes(&LEAVE_PACKET_BYTES).unwrap();
        assert_eq!(leave, IgmpMessage::v2_leave(Ipv4Addr::new(224, 0, 6, 150)));
        assert_eq!(leave.destination(), ALL_ROUTERS);
        let report = IgmpMessage::parse_bytes(&REPORT_PACKET_BYTES).unwrap();
        assert_eq!(report, IgmpMessage::v2_report(Ipv4Addr::new(225, 0, 0, 37)));
        assert_eq!(report.destination(), Ipv4Addr::new(225, 0, 0, 37));
        let mut buf = [0xa5u8; 8];
        assert_eq!(leave.emit_bytes(&mut buf), 8);
        assert_eq!(buf, LEAVE_PACKET_BYTES);
        report.emit_bytes(&mut buf);
        assert_eq!(buf, REPORT_PACKET_BYTES);
    }

    #[test]
    fn smoltcp_interop() {
        let IgmpMessage::V2(v) = IgmpMessage::v2_leave(Ipv4Addr::new(224, 0, 6, 150)) else { unreachable!() };
        let s = v.to_smoltcp().unwrap();
        assert_eq!(s, IgmpRepr::LeaveGroup { group_addr: Ipv4Addr::new(224, 0, 6, 150) });
        assert_eq!(V2Repr::from(&s), v);
        let q = IgmpRepr::MembershipQuery {
            max_resp_time: smoltcp::time::Duration::from_millis(10_000),
            group_addr: Ipv4Addr::UNSPECIFIED,
            version: IgmpVersion::Version2,
        };
        let ours = IgmpMessage::from(&q);
        assert_eq!(
            ours,
            IgmpMessage::V2(V2Repr {
                msg_type: MessageType::MembershipQuery,
                max_resp_code: 100,
                group_addr: Ipv4Addr::UNSPECIFIED
            })
        );
        assert_eq!(ours.destination(), ALL_SYSTEMS);
        let bad = V2Repr {
            msg_type: MessageType::V2MembershipReport,
            max_resp_code: 0,
            group_addr: Ipv4Addr::new(10, 0, 0, 1),
        };
        assert_eq!(bad.to_smoltcp(), Err(Error::content(Layer::Igmp, 4, ContentError::Malformed)));
        let bad = V2Repr { msg_type: MessageType::Unknown(0x30), max_resp_code: 0, group_addr: Ipv4Addr::UNSPECIFIED };
        assert_eq!(bad.to_smoltcp(), Err(Error::content(Layer::Igmp, 0, ContentError::UnsupportedType(0x30))));
        // smoltcp's own parser accepts our emitted v2 report
        let mut buf = [0u8; 8];
        IgmpMessage::v2_report(Ipv4Addr::new(239, 1, 1, 1)).emit_bytes(&mut buf);
        let p = IgmpPacket::new_checked(&buf[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(
            IgmpRepr::parse(&p).unwrap(),
            IgmpRepr::MembershipReport { group_addr: Ipv4Addr::new(239, 1, 1, 1), version: IgmpVersion::Version2 }
        );
    }

    /// The Linux IGMPv3 join for 239.1.1.1, built by hand: 0x22, 0, csum, 0, 0, ngrec=1,
    /// record {4, 0, nsrcs=0, 239.1.1.1}.
    #[test]
    fn v3_join_golden() {
        let mut expected = [0x22, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 239, 1, 1, 1];
        let c = rfc1071(&expected);
        expected[2..4].copy_from_slice(&c.to_be_bytes());
        // 0x2200 + 0x0001 + 0x0400 + 0xef01 + 0x0101 = 0x11603 -> fold 0x1604 -> !0x1604 = 0xe9fb
        assert_eq!(c, 0xe9fb);
        let m = IgmpMessage::v3_join(Ipv4Addr::new(239, 1, 1, 1));
        assert_eq!(m.buffer_len(), 16);
        let mut buf = [0xffu8; 16];
        m.emit_bytes(&mut buf);
        assert_eq!(buf, expected);
        assert_eq!(IgmpMessage::parse_bytes(&buf).unwrap(), m);
        assert_eq!(m.destination(), ALL_V3_ROUTERS);

        let leave = IgmpMessage::v3_leave(Ipv4Addr::new(239, 1, 1, 1));
        leave.emit_bytes(&mut buf);
        assert_eq!(buf[8], 3);
        assert_eq!(rfc1071(&buf), 0);
    }

    #[test]
    fn v3_report_with_sources_and_view() {
        let mut rec = GroupRecordRepr::new(RecordType::AllowNewSources, Ipv4Addr::new(232, 1, 2, 3));
        rec.sources.push(Ipv4Addr::new(10, 0, 0, 1)).unwrap();
        rec.sources.push(Ipv4Addr::new(10, 0, 0, 2)).unwrap();
        rec.aux_data.push(0xdead_beef).unwrap();
        let mut r = V3ReportRepr::single(RecordType::ModeIsExclude, Ipv4Addr::new(239, 0, 0, 1));
        r.records.push(rec).unwrap();
        let m = IgmpMessage::V3Report(r);
        let mut buf = vec![0u8; m.buffer_len()];
        m.emit_bytes(&mut buf);
        assert_eq!(buf.len(), 8 + 8 + 8 + 8 + 4);
        let p = Packet::new_checked(&buf[..]).unwrap();
        let recs: Vec<_> = p.records().map(|r| r.unwrap()).collect();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[1].0, 16);
        assert_eq!(recs[1].1.source(1), Some(Ipv4Addr::new(10, 0, 0, 2)));
        assert_eq!(recs[1].1.source(2), None);
        assert_eq!(recs[1].1.aux_word(0), Some(0xdead_beef));
        assert_eq!(IgmpMessage::parse_bytes(&buf).unwrap(), m);
    }

    #[test]
    fn v3_query_parse() {
        // general query, MRC 100, S=0, QRV 2, QQIC 125, one source
        let mut b = [0x11, 100, 0, 0, 0, 0, 0, 0, 0x02, 125, 0, 1, 192, 0, 2, 1];
        let c = rfc1071(&b);
        b[2..4].copy_from_slice(&c.to_be_bytes());
        let m = IgmpMessage::parse_bytes(&b).unwrap();
        let IgmpMessage::V3Query(ref q) = m else { panic!("{m:?}") };
        assert_eq!((q.max_resp_code, q.qrv, q.qqic, q.s_flag, q.resv), (100, 2, 125, false, 0));
        assert_eq!(q.sources.as_slice(), &[Ipv4Addr::new(192, 0, 2, 1)]);
        assert_eq!(m.destination(), ALL_SYSTEMS);
        let mut out = [0u8; 16];
        m.emit_bytes(&mut out);
        assert_eq!(out, b);
        // 10 bytes of query: neither v2 nor v3
        assert!(matches!(
            IgmpMessage::parse_bytes(&b[..10]),
            Err(Error::Len { layer: Layer::Igmp, required_len: 12, .. })
        ));
    }

    #[test]
    fn errors() {
        let mut b = REPORT_PACKET_BYTES;
        b[7] ^= 1;
        assert_eq!(IgmpMessage::parse_bytes(&b), Err(Error::content(Layer::Igmp, 2, ContentError::Checksum)));
        let mut u = [0x30, 0, 0, 0, 0, 0, 0, 0];
        let c = rfc1071(&u);
        u[2..4].copy_from_slice(&c.to_be_bytes());
        assert_eq!(
            IgmpMessage::parse_bytes(&u),
            Err(Error::content(Layer::Igmp, 0, ContentError::UnsupportedType(0x30)))
        );
        // nine records announced, none present: a length error at the first record
        let mut r = [0x22, 0, 0, 0, 0, 0, 0, 9];
        let c = rfc1071(&r);
        r[2..4].copy_from_slice(&c.to_be_bytes());
        assert_eq!(IgmpMessage::parse_bytes(&r), Err(Error::len(Layer::Igmp, 8, GROUP_RECORD_HEADER_LEN, 0)));
    }

    /// No cap on records or sources with `alloc`: a report from a host in 300 groups, one of
    /// them with 100 sources, parses and re-emits byte for byte (Linux splits its own reports
    /// at the MTU, igmp.c add_grec(); a receiver takes whatever arrives).
    #[test]
    fn reports_and_queries_of_any_size_round_trip() {
        let mut records = List::new();
        for i in 0..300u32 {
            let mut g = GroupRecordRepr::new(RecordType::ModeIsExclude, Ipv4Addr::from(0xef00_0000 | i));
            if i == 7 {
                for k in 0..100u32 {
                    g.sources.push(Ipv4Addr::from(0x0a00_0000 | k)).unwrap();
                }
            }
            records.push(g).unwrap();
        }
        let m = IgmpMessage::V3Report(V3ReportRepr { reserved1: 0, reserved2: 0, records });
        let mut out = vec![0u8; m.buffer_len()];
        m.emit_bytes(&mut out);
        assert_eq!(Packet::new_checked(&out[..]).unwrap().records().count(), 300);
        assert_eq!(IgmpMessage::parse_bytes(&out).unwrap(), m);
        let mut sources = List::new();
        for k in 0..1000u32 {
            sources.push(Ipv4Addr::from(k)).unwrap();
        }
        let q = IgmpMessage::V3Query(V3QueryRepr {
            max_resp_code: 100,
            group_addr: Ipv4Addr::new(239, 1, 2, 3),
            resv: 0,
            s_flag: false,
            qrv: 2,
            qqic: 125,
            sources,
        });
        let mut out = vec![0u8; q.buffer_len()];
        q.emit_bytes(&mut out);
        assert_eq!(IgmpMessage::parse_bytes(&out).unwrap(), q);
        // Split at a 1500-byte MTU: every piece fits, and together they hold every record
        // and source in order.
        let IgmpMessage::V3Report(big) = m else { unreachable!() };
        let parts = big.split_at_mtu(1500);
        assert!(parts.len() > 1);
        let mut groups = Vec::new();
        for p in &parts {
            let len = IgmpMessage::V3Report(p.clone()).buffer_len();
            assert!(24 + len <= 1500, "{len}");
            for r in p.records.iter() {
                groups.extend(core::iter::repeat_n(r.group_addr, r.sources.len().max(1)));
            }
        }
        let want: Vec<Ipv4Addr> =
            big.records.iter().flat_map(|r| core::iter::repeat_n(r.group_addr, r.sources.len().max(1))).collect();
        assert_eq!(groups, want);
        // A record of 1000 sources at a small MTU is cut into records of the same group.
        let mut one = GroupRecordRepr::new(RecordType::AllowNewSources, Ipv4Addr::new(239, 9, 9, 9));
        for k in 0..1000u32 {
            one.sources.push(Ipv4Addr::from(k)).unwrap();
        }
        let mut records = List::new();
        records.push(one).unwrap();
        let parts = V3ReportRepr { reserved1: 0, reserved2: 0, records }.split_at_mtu(576);
        assert_eq!(parts.iter().map(|p| p.records[0].sources.len()).sum::<usize>(), 1000);
        assert!(parts.iter().all(|p| 24 + IgmpMessage::V3Report(p.clone()).buffer_len() <= 576));
    }

    #[test]
    fn truncation_is_len_error() {
        let mut r = V3ReportRepr::single(RecordType::ChangeToExclude, Ipv4Addr::new(239, 1, 1, 1));
        let mut rec = GroupRecordRepr::new(RecordType::AllowNewSources, Ipv4Addr::new(239, 1, 1, 2));
        rec.sources.push(Ipv4Addr::new(10, 1, 1, 1)).unwrap();
        r.records.push(rec).unwrap();
        let mut q = V3QueryRepr {
            max_resp_code: 10,
            group_addr: Ipv4Addr::new(239, 1, 1, 1),
            resv: 0,
            s_flag: true,
            qrv: 2,
            qqic: 125,
            sources: List::new(),
        };
        q.sources.push(Ipv4Addr::new(10, 0, 0, 9)).unwrap();
        for m in [IgmpMessage::V3Report(r), IgmpMessage::V3Query(q), IgmpMessage::v2_leave(Ipv4Addr::new(239, 1, 1, 1))]
        {
            let mut buf = vec![0u8; m.buffer_len()];
            m.emit_bytes(&mut buf);
            for n in 0..buf.len() {
                let cut = &mut buf.clone()[..n];
                // refill the checksum so that only the length is wrong (when there is room)
                if n >= 4 {
                    Packet::new_unchecked(&mut *cut).fill_checksum();
                }
                match IgmpMessage::parse_bytes(cut) {
                    Err(Error::Len { layer: Layer::Igmp, .. }) => {}
                    // 8 bytes of a v3 query are a valid v2 query
                    Ok(IgmpMessage::V2(_)) if n == 8 => {}
                    other => panic!("{m:?} cut at {n}: {other:?}"),
                }
            }
        }
    }

    fn arb_addr() -> impl Strategy<Value = Ipv4Addr> {
        any::<u32>().prop_map(Ipv4Addr::from)
    }

    fn arb_record() -> impl Strategy<Value = GroupRecordRepr> {
        (
            any::<u8>(),
            arb_addr(),
            proptest::collection::vec(arb_addr(), 0..=MAX_SOURCES),
            proptest::collection::vec(any::<u32>(), 0..=MAX_AUX_WORDS),
        )
            .prop_map(|(t, g, s, a)| GroupRecordRepr {
                record_type: RecordType::from(t),
                group_addr: g,
                sources: List::from_slice(&s).unwrap(),
                aux_data: List::from_slice(&a).unwrap(),
            })
    }

    pub(crate) fn arb_message() -> impl Strategy<Value = IgmpMessage> {
        prop_oneof![
            (prop_oneof![Just(0x11u8), Just(0x12), Just(0x16), Just(0x17)], any::<u8>(), arb_addr()).prop_map(
                |(t, c, g)| IgmpMessage::V2(V2Repr { msg_type: MessageType::from(t), max_resp_code: c, group_addr: g })
            ),
            (
                any::<u8>(),
                arb_addr(),
                0u8..16,
                any::<bool>(),
                0u8..8,
                any::<u8>(),
                proptest::collection::vec(arb_addr(), 0..=MAX_SOURCES)
            )
                .prop_map(|(c, g, resv, s, qrv, qqic, src)| IgmpMessage::V3Query(V3QueryRepr {
                    max_resp_code: c,
                    group_addr: g,
                    resv,
                    s_flag: s,
                    qrv,
                    qqic,
                    sources: List::from_slice(&src).unwrap(),
                })),
            (any::<u8>(), any::<u16>(), proptest::collection::vec(arb_record(), 0..=MAX_RECORDS)).prop_map(
                |(r1, r2, recs)| IgmpMessage::V3Report(V3ReportRepr {
                    reserved1: r1,
                    reserved2: r2,
                    records: List::from_slice(&recs).unwrap(),
                })
            ),
        ]
    }

    proptest! {
        #[test]
        fn round_trip(m in arb_message()) {
            let mut buf = vec![0u8; m.buffer_len()];
            m.emit_bytes(&mut buf);
            prop_assert_eq!(rfc1071(&buf), 0);
            prop_assert_eq!(IgmpMessage::parse_bytes(&buf).unwrap(), m);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = IgmpMessage::parse_bytes(&bytes);
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                for r in p.records().flatten() {
                    let _ = (r.1.source(0), r.1.aux_word(0));
                }
            }
        }
    }
}
