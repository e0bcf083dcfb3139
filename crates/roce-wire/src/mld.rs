//! MLD (IPv6 multicast listener discovery, ICMPv6): MLDv2 report and query [RFC 3810 §5],
//! MLDv1 query, report and done [RFC 2710 §3], reusing smoltcp's `wire::MldRecordType` and
//! its ICMPv6 checksum helpers.
//!
//! Layouts (offsets in the ICMPv6 message):
//!
//! | Off | Size | MLDv1 (24 bytes: 130, 131, 132) | MLDv2 query (130, ≥ 28) | MLDv2 report (143) |
//! |---|---|---|---|---|
//! | 0 | 1 | Type | Type 130 | Type 143 |
//! | 1 | 1 | Code | Code | Code (Reserved) |
//! | 2 | 2 | Checksum | Checksum | Checksum |
//! | 4 | 2 | Maximum Response Delay | Maximum Response Code | Reserved |
//! | 6 | 2 | Reserved | Reserved | Nr of Mcast Address Records |
//! | 8 | 16 | Multicast Address | Multicast Address | Address records … |
//! | 24 | 1 | | Resv(7:4) S(3) QRV(2:0) | |
//! | 25 | 1 | | QQIC | |
//! | 26 | 2 | | Number of Sources | |
//! | 28 | 16·N | | Source Addresses | |
//!
//! An address record [RFC 3810 §5.2.4]: Record Type (1), Aux Data Len (1, 32-bit words),
//! Number of Sources (2), Multicast Address (16), Sources (16·N), Auxiliary Data.
//!
//! The checksum is the ICMPv6 checksum over the IPv6 pseudo-header (source, destination,
//! length, next header 58) and the message [RFC 4443 §2.3], so `parse` and `emit` take the
//! IPv6 source and destination. Parsing verifies it ([`ContentError::Checksum`] at offset 2).
//!
//! Linux joins with an MLDv2 report holding one CHANGE_TO_EXCLUDE record with no sources and
//! leaves with CHANGE_TO_INCLUDE and no sources, both to ff02::16 [net/ipv6/mcast.c
//! mld_send_cr, add_grec, mld_newpack]; MLDv1 sends a report to the group and a done to ff02::2
//! [mcast.c igmp6_send].
//!
//! Limits as in [`crate::igmp`] (none with `alloc`; without it at most [`MAX_RECORDS`] records, [`MAX_SOURCES`] sources and
//! [`MAX_AUX_WORDS`] aux words per record; beyond that parsing gives
//! [`ContentError::FieldOutOfRange`] while the view reads any number.

use core::fmt;
use core::net::Ipv6Addr;

use crate::error::{check_count, check_len, ContentError, Error, Layer, Result};
use crate::field::{array, be16, put16};
use crate::multicast::{self, GroupAddress, List, Records};

pub use smoltcp::wire::{Icmpv6Message, Icmpv6Packet, MldAddressRecordRepr, MldRecordType, MldRepr};

/// The record type of an MLDv2 address record: smoltcp's (codes 1–6 as in IGMPv3).
pub type RecordType = MldRecordType;

/// Byte ranges of MLD messages (offsets in the message; record fields in the record).
pub mod field {
    #![allow(missing_docs)]
    use crate::field::Field;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Field = 2..4;
    /// Maximum Response Delay (v1) / Maximum Response Code (v2 query) / Reserved (v2 report).
    pub const MAX_RESP: Field = 4..6;
    /// Reserved (v1, v2 query) / Nr of Mcast Address Records (v2 report).
    pub const RESERVED: Field = 6..8;
    pub const MCAST_ADDR: Field = 8..24;
    /// Length of an MLDv1 message.
    pub const V1_LEN: usize = 24;
    pub const QUERY_FLAGS: usize = 24;
    pub const QQIC: usize = 25;
    pub const QUERY_NUM_SOURCES: Field = 26..28;
    pub const QUERY_SOURCES: usize = 28;
    pub const REPORT_RESERVED: Field = 4..6;
    pub const REPORT_NUM_RECORDS: Field = 6..8;
    pub const REPORT_RECORDS: usize = 8;
    // Address record, relative to the record
    pub const RECORD_TYPE: usize = 0;
    pub const RECORD_AUX_DATA_LEN: usize = 1;
    pub const RECORD_NUM_SOURCES: Field = 2..4;
    pub const RECORD_MCAST_ADDR: Field = 4..20;
    pub const RECORD_SOURCES: usize = 20;
}

/// Length of an MLDv1 message.
pub const V1_LEN: usize = field::V1_LEN;
/// Minimum length of an MLDv2 query [RFC 3810 §8.1].
pub const V2_QUERY_MIN_LEN: usize = field::QUERY_SOURCES;
/// Length of the fixed part of an MLDv2 report.
pub const V2_REPORT_HEADER_LEN: usize = field::REPORT_RECORDS;
/// Length of the fixed part of an address record.
pub const RECORD_HEADER_LEN: usize = field::RECORD_SOURCES;

/// Most address records a [`ReportRepr`] holds.
pub const MAX_RECORDS: usize = 8;
/// Most sources an [`AddressRecordRepr`] or [`QueryRepr`] holds, and most 32-bit words of aux
/// data an [`AddressRecordRepr`] holds (hosts send none): as IGMPv3's.
pub use crate::multicast::{MAX_AUX_WORDS, MAX_SOURCES};

/// ff02::16, all MLDv2-capable routers: destination of MLDv2 reports [RFC 3810 §5.2.14; mcast.c mld2_all_mcr].
pub const ALL_MLDV2_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0x16);
/// ff02::2, all routers: destination of an MLDv1 done [RFC 2710 §3; mcast.c in6addr_linklocal_allrouters].
pub const ALL_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);
/// ff02::1, all nodes: destination of a general query.
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// ICMPv6 next-header number.
pub const IPPROTO_ICMPV6: u8 = 58;

enum_with_unknown! {
    /// The MLD message type (ICMPv6 type) [RFC 2710 §3; RFC 3810 §5; icmpv6.h].
    pub enum MessageType(u8) {
        /// Multicast Listener Query (v1 if 24 bytes, v2 if ≥ 28).
        Query = 130,
        /// MLDv1 Multicast Listener Report.
        V1Report = 131,
        /// MLDv1 Multicast Listener Done.
        V1Done = 132,
        /// MLDv2 Multicast Listener Report.
        V2Report = 143,
    }
}

impl MessageType {
    /// Whether an ICMPv6 type is one of MLD's.
    pub fn is_mld(t: u8) -> bool {
        !matches!(MessageType::from(t), MessageType::Unknown(_))
    }
}

impl fmt::Display for MessageType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MessageType::Query => f.write_str("Multicast Listener Query"),
            MessageType::V1Report => f.write_str("Multicast Listener Report"),
            MessageType::V1Done => f.write_str("Multicast Listener Done"),
            MessageType::V2Report => f.write_str("Multicast Listener Report v2"),
            MessageType::Unknown(t) => write!(f, "ICMPv6 type {t}"),
        }
    }
}

/// The ICMPv6 checksum (complemented) of `data` under the IPv6 pseudo-header, with smoltcp's
/// `wire::checksum` [RFC 4443 §2.3].
pub(crate) fn icmpv6_checksum(src: &Ipv6Addr, dst: &Ipv6Addr, data: &[u8]) -> u16 {
    use smoltcp::wire::checksum;
    !checksum::combine(&[
        checksum::pseudo_header_v6(src, dst, smoltcp::wire::IpProtocol::Icmpv6, data.len() as u32),
        checksum::data(data),
    ])
}

/// Check the fixed part: 8 bytes for a v2 report, 24 for a v1 message or a query, 28 for a
/// query longer than 24 bytes.
fn check_fixed_part(b: &[u8]) -> Result<()> {
    check_len(Layer::Mld, b, V2_REPORT_HEADER_LEN)?;
    match Packet::new_unchecked(b).msg_type() {
        MessageType::V2Report => Ok(()),
        MessageType::Query if b.len() > V1_LEN => check_len(Layer::Mld, b, V2_QUERY_MIN_LEN),
        _ => check_len(Layer::Mld, b, V1_LEN),
    }
}

fixed_view!(check: check_fixed_part;
    /// A checked zero-copy view of an MLD message (any version).
    ///
    /// `check_len` checks the fixed part: 8 bytes for a v2 report, 24 for a v1 message or a
    /// query, 28 for a query longer than 24 bytes (v2). Query sources and report records are read
    /// through accessors that check their own bounds.
);

impl<T: AsRef<[u8]>> Packet<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Whether this is a query longer than 24 bytes (MLDv2, RFC 3810 §8.1).
    pub fn is_v2_query(&self) -> bool {
        let b = self.b();
        !b.is_empty() && b[field::TYPE] == 130 && b.len() > V1_LEN
    }

    /// The message type.
    pub fn msg_type(&self) -> MessageType {
        MessageType::from(self.b()[field::TYPE])
    }

    /// The ICMPv6 code (0).
    pub fn code(&self) -> u8 {
        self.b()[field::CODE]
    }

    /// The checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.b(), field::CHECKSUM.start)
    }

    /// Whether the checksum is right for this IPv6 source and destination.
    pub fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        icmpv6_checksum(src, dst, self.b()) == 0
    }

    /// Bytes 4–5: Maximum Response Delay (v1, ms) / Maximum Response Code (v2 query) /
    /// Reserved (v2 report).
    pub fn max_resp(&self) -> u16 {
        be16(self.b(), field::MAX_RESP.start)
    }

    /// Bytes 6–7: Reserved (v1, query) / Nr of Mcast Address Records (v2 report).
    pub fn reserved(&self) -> u16 {
        be16(self.b(), field::RESERVED.start)
    }

    /// The multicast address (v1 messages and queries).
    pub fn mcast_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(array::<16>(self.b(), field::MCAST_ADDR.start))
    }

    /// v2 query: the byte holding Resv (7:4), S (3), QRV (2:0).
    pub fn query_flags(&self) -> u8 {
        self.b()[field::QUERY_FLAGS]
    }

    /// v2 query: QQIC.
    pub fn qqic(&self) -> u8 {
        self.b()[field::QQIC]
    }

    /// v2 query: Number of Sources.
    pub fn query_num_sources(&self) -> u16 {
        be16(self.b(), field::QUERY_NUM_SOURCES.start)
    }

    /// v2 query: the `i`th source, `None` past the count or the buffer.
    pub fn query_source(&self, i: usize) -> Option<Ipv6Addr> {
        if i >= usize::from(self.query_num_sources()) {
            return None;
        }
        let at = field::QUERY_SOURCES + 16 * i;
        (self.b().len() >= at + 16).then(|| Ipv6Addr::from(array::<16>(self.b(), at)))
    }

    /// v2 report: Nr of Mcast Address Records.
    pub fn report_num_records(&self) -> u16 {
        self.reserved()
    }

    /// v2 report: iterate the address records (with their offsets; an error item for a record
    /// that does not fit, after which the iterator ends).
    pub fn records(&self) -> AddressRecords<'_> {
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
    /// Set the code.
    pub fn set_code(&mut self, v: u8) {
        self.bm()[field::CODE] = v;
    }
    /// Set the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.bm(), field::CHECKSUM.start, v);
    }
    /// Compute and set the checksum over the whole buffer.
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        self.set_checksum(0);
        let c = icmpv6_checksum(src, dst, self.b());
        self.set_checksum(c);
    }
    /// Set bytes 4–5.
    pub fn set_max_resp(&mut self, v: u16) {
        put16(self.bm(), field::MAX_RESP.start, v);
    }
    /// Set bytes 6–7.
    pub fn set_reserved(&mut self, v: u16) {
        put16(self.bm(), field::RESERVED.start, v);
    }
    /// Set the multicast address.
    pub fn set_mcast_addr(&mut self, v: Ipv6Addr) {
        self.bm()[field::MCAST_ADDR].copy_from_slice(&v.octets());
    }
    /// v2 query: set Resv (4 bits), S and QRV (3 bits).
    pub fn set_query_flags(&mut self, resv: u8, s_flag: bool, qrv: u8) {
        self.bm()[field::QUERY_FLAGS] = (resv << 4) | (u8::from(s_flag) << 3) | (qrv & 7);
    }
    /// v2 query: set QQIC.
    pub fn set_qqic(&mut self, v: u8) {
        self.bm()[field::QQIC] = v;
    }
    /// v2 query: set Number of Sources.
    pub fn set_query_num_sources(&mut self, v: u16) {
        put16(self.bm(), field::QUERY_NUM_SOURCES.start, v);
    }
    /// v2 query: set the `i`th source (panics past the buffer).
    pub fn set_query_source(&mut self, i: usize, v: Ipv6Addr) {
        let at = field::QUERY_SOURCES + 16 * i;
        self.bm()[at..at + 16].copy_from_slice(&v.octets());
    }
}

/// Iterator over the address records of an MLDv2 report; see [`Packet::records`].
pub type AddressRecords<'a> = Records<'a, Ipv6Addr>;

/// A checked zero-copy view of one MLDv2 address record (the shared view of
/// [`multicast::Record`] with an IPv6 group).
pub type AddressRecord<T> = multicast::Record<T, Ipv6Addr>;

impl<T: AsRef<[u8]>> AddressRecord<T> {
    /// Multicast Address.
    pub fn mcast_addr(&self) -> Ipv6Addr {
        self.address()
    }
}

/// MLDv2 records carry IPv6 groups and sources.
impl GroupAddress for Ipv6Addr {
    const LEN: usize = 16;
    const LAYER: Layer = Layer::Mld;
    type RecordType = RecordType;
    fn read(b: &[u8]) -> Self {
        Ipv6Addr::from(array::<16>(b, 0))
    }
    fn write(self, b: &mut [u8]) {
        b[..16].copy_from_slice(&self.octets());
    }
}

/// An MLDv1 message (24 bytes): query (130), report (131) or done (132) [RFC 2710 §3].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct V1Repr {
    /// Type.
    pub msg_type: MessageType,
    /// Code (0).
    pub code: u8,
    /// Maximum Response Delay in ms (queries; 0 otherwise).
    pub max_resp_delay: u16,
    /// Reserved bytes 6–7, kept.
    pub reserved: u16,
    /// Multicast Address (:: in a general query).
    pub mcast_addr: Ipv6Addr,
}

/// An MLDv2 query (type 130, ≥ 28 bytes) [RFC 3810 §5.1].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(not(feature = "alloc"), derive(Copy))]
pub struct QueryRepr {
    /// Code (0).
    pub code: u8,
    /// Maximum Response Code (RFC 3810 §5.1.3).
    pub max_resp_code: u16,
    /// Reserved bytes 6–7, kept.
    pub reserved: u16,
    /// Multicast Address (:: for a general query).
    pub mcast_addr: Ipv6Addr,
    /// The four reserved bits of byte 24, kept.
    pub resv: u8,
    /// S flag.
    pub s_flag: bool,
    /// QRV (3 bits).
    pub qrv: u8,
    /// QQIC.
    pub qqic: u8,
    /// Source addresses (at most [`MAX_SOURCES`]).
    pub sources: List<Ipv6Addr, MAX_SOURCES>,
}

/// One MLDv2 multicast address record [RFC 3810 §5.2.4].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(not(feature = "alloc"), derive(Copy))]
pub struct AddressRecordRepr {
    /// Record Type.
    pub record_type: RecordType,
    /// Multicast Address.
    pub mcast_addr: Ipv6Addr,
    /// Sources (at most [`MAX_SOURCES`]).
    pub sources: List<Ipv6Addr, MAX_SOURCES>,
    /// Auxiliary data words (at most [`MAX_AUX_WORDS`]).
    pub aux_data: List<u32, MAX_AUX_WORDS>,
}

#[cfg(not(feature = "alloc"))]
impl crate::multicast::Blank for AddressRecordRepr {
    const BLANK: Self = AddressRecordRepr::new(RecordType::ModeIsInclude, Ipv6Addr::UNSPECIFIED);
}

group_record_repr!(AddressRecordRepr { mcast_addr: Ipv6Addr }, view: AddressRecord, record_type: RecordType);

impl AddressRecordRepr {
    /// Convert smoltcp's record repr (its `payload` holds sources then aux data).
    pub fn from_smoltcp(r: &MldAddressRecordRepr<'_>) -> Result<Self> {
        let n = usize::from(r.num_srcs);
        let a = usize::from(r.aux_data_len);
        if r.payload.len() < 16 * n + 4 * a {
            return Err(Error::len(Layer::Mld, RECORD_HEADER_LEN, 16 * n + 4 * a, r.payload.len()));
        }
        check_count(Layer::Mld, field::RECORD_NUM_SOURCES.start, n, List::<u32, MAX_SOURCES>::CAPACITY)?;
        check_count(Layer::Mld, field::RECORD_AUX_DATA_LEN, a, List::<u32, MAX_AUX_WORDS>::CAPACITY)?;
        let mut out = AddressRecordRepr::new(r.record_type, r.mcast_addr);
        for c in r.payload[..16 * n].chunks_exact(16) {
            let mut o = [0u8; 16];
            o.copy_from_slice(c);
            out.sources.push(Ipv6Addr::from(o)).ok();
        }
        for c in r.payload[16 * n..16 * n + 4 * a].chunks_exact(4) {
            out.aux_data.push(u32::from_be_bytes([c[0], c[1], c[2], c[3]])).ok();
        }
        Ok(out)
    }
}

/// An MLDv2 report (type 143) [RFC 3810 §5.2].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(not(feature = "alloc"), derive(Copy))]
pub struct ReportRepr {
    /// Code (0; RFC 3810 calls byte 1 Reserved).
    pub code: u8,
    /// Reserved bytes 4–5, kept.
    pub reserved: u16,
    /// The address records (any number with `alloc`; else at most [`MAX_RECORDS`]).
    pub records: List<AddressRecordRepr, MAX_RECORDS>,
}

impl ReportRepr {
    /// A report with one record of `record_type` for `group` and no sources.
    pub fn single(record_type: RecordType, group: Ipv6Addr) -> Self {
        let mut records = List::new();
        records.push(AddressRecordRepr::new(record_type, group)).ok();
        ReportRepr { code: 0, reserved: 0, records }
    }

    /// The report as one or more reports whose IPv6 packets (40-byte header plus the 8-byte
    /// Hop-by-Hop header with Router Alert) fit `mtu`, as net/ipv6/mcast.c `add_grec()` builds
    /// them (see [`crate::igmp::V3ReportRepr::split_at_mtu`]).
    #[cfg(feature = "alloc")]
    pub fn split_at_mtu(&self, mtu: usize) -> alloc::vec::Vec<ReportRepr> {
        let room = mtu.saturating_sub(40 + 8 + field::REPORT_RECORDS);
        let (code, reserved) = (self.code, self.reserved);
        let pieces = multicast::split_records(&self.records, room);
        pieces.into_iter().map(|records| ReportRepr { code, reserved, records }).collect()
    }
}

/// An MLD message of any version: the owned representation of this module (also [`Repr`]).
// The v3/v2 report variant holds its records inline (no allocator in this crate), so it
// is much larger than the others; boxing is not an option in `no_std` without `alloc`.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(not(feature = "alloc"), derive(Copy))]
pub enum MldMessage {
    /// An MLDv1 message (query of 24 bytes, report, done).
    V1(V1Repr),
    /// An MLDv2 query.
    Query(QueryRepr),
    /// An MLDv2 report.
    Report(ReportRepr),
}

/// The owned representation of an MLD message.
pub type Repr = MldMessage;

impl MldMessage {
    /// The Linux MLDv2 join: one CHANGE_TO_EXCLUDE record, no sources, to ff02::16
    /// [mcast.c mld_send_cr].
    pub fn join(group: Ipv6Addr) -> Self {
        MldMessage::Report(ReportRepr::single(RecordType::ChangeToExclude, group))
    }

    /// The Linux MLDv2 leave ("done"): one CHANGE_TO_INCLUDE record, no sources, to ff02::16.
    pub fn leave(group: Ipv6Addr) -> Self {
        MldMessage::Report(ReportRepr::single(RecordType::ChangeToInclude, group))
    }

    /// An MLDv1 report for `group` (sent to the group) [mcast.c igmp6_send].
    pub fn v1_report(group: Ipv6Addr) -> Self {
        MldMessage::V1(V1Repr {
            msg_type: MessageType::V1Report,
            code: 0,
            max_resp_delay: 0,
            reserved: 0,
            mcast_addr: group,
        })
    }

    /// An MLDv1 done for `group` (sent to ff02::2) [mcast.c igmp6_send].
    pub fn v1_done(group: Ipv6Addr) -> Self {
        MldMessage::V1(V1Repr {
            msg_type: MessageType::V1Done,
            code: 0,
            max_resp_delay: 0,
            reserved: 0,
            mcast_addr: group,
        })
    }

    /// The IPv6 destination: ff02::16 for a v2 report, ff02::2 for a done, the group for a v1
    /// report or a specific query, ff02::1 for a general query.
    pub fn destination(&self) -> Ipv6Addr {
        match self {
            MldMessage::Report(_) => ALL_MLDV2_ROUTERS,
            MldMessage::V1(v) if v.msg_type == MessageType::V1Done => ALL_ROUTERS,
            MldMessage::V1(v) if v.mcast_addr.is_unspecified() => ALL_NODES,
            MldMessage::Query(q) if q.mcast_addr.is_unspecified() => ALL_NODES,
            MldMessage::V1(v) => v.mcast_addr,
            MldMessage::Query(q) => q.mcast_addr,
        }
    }

    /// The message type on the wire.
    pub fn msg_type(&self) -> MessageType {
        match self {
            MldMessage::V1(v) => v.msg_type,
            MldMessage::Query(_) => MessageType::Query,
            MldMessage::Report(_) => MessageType::V2Report,
        }
    }

    /// Parse a whole MLD message (the ICMPv6 message) sent from `src` to `dst`, verifying the
    /// checksum. Non-MLD ICMPv6 types give [`ContentError::UnsupportedType`].
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>, src: &Ipv6Addr, dst: &Ipv6Addr) -> Result<Self> {
        p.check_len()?;
        if let MessageType::Unknown(t) = p.msg_type() {
            return Err(Error::content(Layer::Mld, field::TYPE, ContentError::UnsupportedType(t)));
        }
        if !p.verify_checksum(src, dst) {
            return Err(Error::content(Layer::Mld, field::CHECKSUM.start, ContentError::Checksum));
        }
        match p.msg_type() {
            MessageType::Query if p.is_v2_query() => {
                let n = check_count(
                    Layer::Mld,
                    field::QUERY_NUM_SOURCES.start,
                    usize::from(p.query_num_sources()),
                    List::<u32, MAX_SOURCES>::CAPACITY,
                )?;
                check_len(Layer::Mld, p.b(), field::QUERY_SOURCES + 16 * n)?;
                let mut sources = List::new();
                for s in (0..n).filter_map(|i| p.query_source(i)) {
                    sources.push(s).ok();
                }
                let flags = p.query_flags();
                Ok(MldMessage::Query(QueryRepr {
                    code: p.code(),
                    max_resp_code: p.max_resp(),
                    reserved: p.reserved(),
                    mcast_addr: p.mcast_addr(),
                    resv: flags >> 4,
                    s_flag: flags & 0x08 != 0,
                    qrv: flags & 7,
                    qqic: p.qqic(),
                    sources,
                }))
            }
            MessageType::V2Report => {
                check_count(
                    Layer::Mld,
                    field::REPORT_NUM_RECORDS.start,
                    usize::from(p.report_num_records()),
                    List::<u32, MAX_RECORDS>::CAPACITY,
                )?;
                let mut records = List::new();
                for item in p.records() {
                    let (at, rec) = item?;
                    records.push(AddressRecordRepr::parse(&rec).map_err(|e| e.add_offset(at))?).ok();
                }
                Ok(MldMessage::Report(ReportRepr { code: p.code(), reserved: p.max_resp(), records }))
            }
            t => Ok(MldMessage::V1(V1Repr {
                msg_type: t,
                code: p.code(),
                max_resp_delay: p.max_resp(),
                reserved: p.reserved(),
                mcast_addr: p.mcast_addr(),
            })),
        }
    }

    /// Parse from a buffer holding exactly the ICMPv6 message (never panics).
    pub fn parse_bytes(buf: &[u8], src: &Ipv6Addr, dst: &Ipv6Addr) -> Result<Self> {
        Self::parse(&Packet::new_checked(buf)?, src, dst)
    }

    /// The length of the emitted message.
    pub fn buffer_len(&self) -> usize {
        match self {
            MldMessage::V1(_) => V1_LEN,
            MldMessage::Query(q) => V2_QUERY_MIN_LEN + 16 * q.sources.len(),
            MldMessage::Report(r) => {
                V2_REPORT_HEADER_LEN + r.records.iter().map(AddressRecordRepr::buffer_len).sum::<usize>()
            }
        }
    }

    /// Emit the message and fill its checksum for `src` → `dst`. The buffer must be exactly
    /// `buffer_len()` bytes (panics if shorter).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, p: &mut Packet<&mut T>, src: &Ipv6Addr, dst: &Ipv6Addr) {
        p.set_checksum(0);
        match self {
            MldMessage::V1(v) => {
                p.set_msg_type(v.msg_type);
                p.set_code(v.code);
                p.set_max_resp(v.max_resp_delay);
                p.set_reserved(v.reserved);
                p.set_mcast_addr(v.mcast_addr);
            }
            MldMessage::Query(q) => {
                p.set_msg_type(MessageType::Query);
                p.set_code(q.code);
                p.set_max_resp(q.max_resp_code);
                p.set_reserved(q.reserved);
                p.set_mcast_addr(q.mcast_addr);
                p.set_query_flags(q.resv, q.s_flag, q.qrv);
                p.set_qqic(q.qqic);
                p.set_query_num_sources(q.sources.len() as u16);
                for (i, s) in q.sources.iter().enumerate() {
                    p.set_query_source(i, *s);
                }
            }
            MldMessage::Report(r) => {
                p.set_msg_type(MessageType::V2Report);
                p.set_code(r.code);
                p.set_max_resp(r.reserved);
                p.set_reserved(r.records.len() as u16);
                let mut at = field::REPORT_RECORDS;
                for rec in r.records.iter() {
                    rec.emit_bytes(&mut p.bm()[at..]);
                    at += rec.buffer_len();
                }
            }
        }
        p.fill_checksum(src, dst);
    }

    /// Emit into `buf[..buffer_len()]` (panics if shorter); returns the length.
    pub fn emit_bytes(&self, buf: &mut [u8], src: &Ipv6Addr, dst: &Ipv6Addr) -> usize {
        let n = self.buffer_len();
        self.emit(&mut Packet::new_unchecked(&mut buf[..n]), src, dst);
        n
    }
}

impl fmt::Display for MldMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MldMessage::V1(v) => write!(f, "MLD {} {}", v.msg_type, v.mcast_addr),
            MldMessage::Query(q) => write!(f, "MLDv2 Query {} sources {}", q.mcast_addr, q.sources.len()),
            MldMessage::Report(r) => {
                f.write_str("MLDv2 Report")?;
                for rec in r.records.iter() {
                    write!(f, " [{} {}", u8::from(rec.record_type), rec.mcast_addr)?;
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
    use smoltcp::phy::ChecksumCapabilities;
    use smoltcp::wire::Icmpv6Repr;
    use std::vec;

    const LL: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0x0200, 0x00ff, 0xfe00, 0x0001);
    const GROUP: Ipv6Addr = Ipv6Addr::new(0xff12, 0x401b, 0, 0, 0, 0, 0, 1);

    // smoltcp's MLDv2 vectors (src/wire/mld.rs), src ff02::1, dst ff02::2.
    static QUERY_PACKET_BYTES: [u8; 44] = [
        0x82, 0x00, 0x73, 0x74, 0x04, 0x00, 0x00, 0x00, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x0a, 0x12, 0x00, 0x01, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
    ];
    static REPORT_PACKET_BYTES: [u8; 44] = [
        0x8f, 0x00, 0x73, 0x85, 0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00, 0x01, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
    ];

    /// No cap on records or sources with `alloc`: 200 records, one with 100 sources.
    #[test]
    fn reports_of_any_size_round_trip() {
        let mut records = List::new();
        for i in 0..200u16 {
            let mut r = AddressRecordRepr::new(RecordType::ModeIsExclude, Ipv6Addr::new(0xff0e, 0, 0, 0, 0, 0, 1, i));
            if i == 3 {
                for k in 0..100u16 {
                    r.sources.push(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, k)).unwrap();
                }
            }
            records.push(r).unwrap();
        }
        let report = ReportRepr { code: 0, reserved: 0, records };
        let m = MldMessage::Report(report.clone());
        let mut out = vec![0u8; m.buffer_len()];
        m.emit_bytes(&mut out, &LL, &ALL_ROUTERS);
        assert_eq!(MldMessage::parse_bytes(&out, &LL, &ALL_ROUTERS).unwrap(), m);
        // Split at 1280 (the IPv6 minimum MTU): every piece fits, every record and source kept.
        let parts = report.split_at_mtu(1280);
        assert!(parts.len() > 1);
        let mut n = (0, 0);
        for p in &parts {
            assert!(48 + MldMessage::Report(p.clone()).buffer_len() <= 1280);
            n.0 += p.records.len();
            n.1 += p.records.iter().map(|r| r.sources.len()).sum::<usize>();
        }
        assert_eq!(n.1, 100);
        assert!(n.0 >= 200);
    }

    #[test]
    fn smoltcp_vectors() {
        let q = MldMessage::parse_bytes(&QUERY_PACKET_BYTES, &ALL_NODES, &ALL_ROUTERS).unwrap();
        let MldMessage::Query(ref qr) = q else { panic!("{q:?}") };
        assert_eq!((qr.max_resp_code, qr.s_flag, qr.qrv, qr.qqic, qr.resv), (0x400, true, 2, 0x12, 0));
        assert_eq!(qr.mcast_addr, ALL_NODES);
        assert_eq!(qr.sources.as_slice(), &[ALL_ROUTERS]);
        let mut out = [0u8; 44];
        q.emit_bytes(&mut out, &ALL_NODES, &ALL_ROUTERS);
        assert_eq!(out, QUERY_PACKET_BYTES);

        let r = MldMessage::parse_bytes(&REPORT_PACKET_BYTES, &ALL_NODES, &ALL_ROUTERS).unwrap();
        let MldMessage::Report(ref rr) = r else { panic!("{r:?}") };
        assert_eq!(rr.records.len(), 1);
        assert_eq!(rr.records[0].record_type, RecordType::ModeIsInclude);
        assert_eq!(rr.records[0].sources.as_slice(), &[ALL_ROUTERS]);
        r.emit_bytes(&mut out, &ALL_NODES, &ALL_ROUTERS);
        assert_eq!(out, REPORT_PACKET_BYTES);
        // wrong pseudo-header
        assert_eq!(
            MldMessage::parse_bytes(&REPORT_PACKET_BYTES, &LL, &ALL_ROUTERS),
            Err(Error::content(Layer::Mld, 2, ContentError::Checksum))
        );
    }

    /// The join as bytes, checked against smoltcp's own ICMPv6 parser (checksum included).
    #[test]
    fn join_golden_and_smoltcp_parse() {
        let m = MldMessage::join(GROUP);
        assert_eq!(m.destination(), ALL_MLDV2_ROUTERS);
        let mut b = [0u8; 28];
        assert_eq!(m.emit_bytes(&mut b, &LL, &ALL_MLDV2_ROUTERS), 28);
        assert_eq!(&b[..2], &[143, 0]);
        assert_eq!(&b[4..12], &[0, 0, 0, 1, 4, 0, 0, 0]);
        assert_eq!(&b[12..28], &GROUP.octets());
        let sp = Icmpv6Packet::new_checked(&b[..]).unwrap();
        assert!(sp.verify_checksum(&LL, &ALL_MLDV2_ROUTERS));
        let parsed = Icmpv6Repr::parse(&LL, &ALL_MLDV2_ROUTERS, &sp, &ChecksumCapabilities::default()).unwrap();
        let Icmpv6Repr::Mld(MldRepr::Report { nr_mcast_addr_rcrds, data }) = parsed else { panic!("{parsed:?}") };
        assert_eq!(nr_mcast_addr_rcrds, 1);
        let rec = MldAddressRecordRepr::parse(&smoltcp::wire::MldAddressRecord::new_checked(data).unwrap()).unwrap();
        assert_eq!(rec.record_type, MldRecordType::ChangeToExclude);
        assert_eq!(
            AddressRecordRepr::from_smoltcp(&rec).unwrap(),
            AddressRecordRepr::new(RecordType::ChangeToExclude, GROUP)
        );
        assert_eq!(MldMessage::parse_bytes(&b, &LL, &ALL_MLDV2_ROUTERS).unwrap(), m);

        let l = MldMessage::leave(GROUP);
        l.emit_bytes(&mut b, &LL, &ALL_MLDV2_ROUTERS);
        assert_eq!(b[8], 3);
    }

    #[test]
    fn v1_messages() {
        for m in [MldMessage::v1_report(GROUP), MldMessage::v1_done(GROUP)] {
            let dst = m.destination();
            let mut b = [0u8; 24];
            m.emit_bytes(&mut b, &LL, &dst);
            assert_eq!(MldMessage::parse_bytes(&b, &LL, &dst).unwrap(), m);
        }
        assert_eq!(MldMessage::v1_done(GROUP).destination(), ALL_ROUTERS);
        assert_eq!(MldMessage::v1_report(GROUP).destination(), GROUP);
    }

    #[test]
    fn truncation_and_types() {
        let mut r = ReportRepr::single(RecordType::ChangeToExclude, GROUP);
        let mut rec = AddressRecordRepr::new(RecordType::AllowNewSources, GROUP);
        rec.sources.push(LL).unwrap();
        r.records.push(rec).unwrap();
        let msgs = [
            MldMessage::Report(r),
            MldMessage::parse_bytes(&QUERY_PACKET_BYTES, &ALL_NODES, &ALL_ROUTERS).unwrap(),
            MldMessage::v1_done(GROUP),
        ];
        for m in msgs {
            let mut buf = vec![0u8; m.buffer_len()];
            m.emit_bytes(&mut buf, &LL, &ALL_MLDV2_ROUTERS);
            for n in 0..buf.len() {
                let mut cut = buf[..n].to_vec();
                if n >= 4 {
                    Packet::new_unchecked(&mut cut[..]).fill_checksum(&LL, &ALL_MLDV2_ROUTERS);
                }
                match MldMessage::parse_bytes(&cut, &LL, &ALL_MLDV2_ROUTERS) {
                    Err(Error::Len { layer: Layer::Mld, .. }) => {}
                    Ok(MldMessage::V1(_)) if n == 24 => {}
                    other => panic!("{m:?} cut at {n}: {other:?}"),
                }
            }
        }
        let mut b = [0u8; 24];
        b[0] = 135;
        assert_eq!(
            MldMessage::parse_bytes(&b, &LL, &LL),
            Err(Error::content(Layer::Mld, 0, ContentError::UnsupportedType(135)))
        );
    }

    fn arb_v6() -> impl Strategy<Value = Ipv6Addr> {
        any::<u128>().prop_map(Ipv6Addr::from)
    }

    fn arb_record() -> impl Strategy<Value = AddressRecordRepr> {
        (
            any::<u8>(),
            arb_v6(),
            proptest::collection::vec(arb_v6(), 0..=MAX_SOURCES),
            proptest::collection::vec(any::<u32>(), 0..=MAX_AUX_WORDS),
        )
            .prop_map(|(t, g, s, a)| AddressRecordRepr {
                record_type: RecordType::from(t),
                mcast_addr: g,
                sources: List::from_slice(&s).unwrap(),
                aux_data: List::from_slice(&a).unwrap(),
            })
    }

    pub(crate) fn arb_message() -> impl Strategy<Value = MldMessage> {
        prop_oneof![
            (prop_oneof![Just(130u8), Just(131), Just(132)], any::<u8>(), any::<u16>(), any::<u16>(), arb_v6())
                .prop_map(|(t, c, d, r, a)| MldMessage::V1(V1Repr {
                    msg_type: MessageType::from(t),
                    code: c,
                    max_resp_delay: d,
                    reserved: r,
                    mcast_addr: a
                })),
            (
                any::<u8>(),
                any::<u16>(),
                any::<u16>(),
                arb_v6(),
                0u8..16,
                any::<bool>(),
                0u8..8,
                any::<u8>(),
                proptest::collection::vec(arb_v6(), 0..=MAX_SOURCES)
            )
                .prop_map(|(code, mrc, res, a, resv, s, qrv, qqic, src)| MldMessage::Query(QueryRepr {
                    code,
                    max_resp_code: mrc,
                    reserved: res,
                    mcast_addr: a,
                    resv,
                    s_flag: s,
                    qrv,
                    qqic,
                    sources: List::from_slice(&src).unwrap(),
                })),
            (any::<u8>(), any::<u16>(), proptest::collection::vec(arb_record(), 0..=MAX_RECORDS)).prop_map(
                |(code, reserved, recs)| MldMessage::Report(ReportRepr {
                    code,
                    reserved,
                    records: List::from_slice(&recs).unwrap()
                })
            ),
        ]
    }

    proptest! {
        #[test]
        fn round_trip(m in arb_message(), src in arb_v6(), dst in arb_v6()) {
            let mut buf = vec![0u8; m.buffer_len()];
            m.emit_bytes(&mut buf, &src, &dst);
            prop_assert_eq!(MldMessage::parse_bytes(&buf, &src, &dst).unwrap(), m);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            let _ = MldMessage::parse_bytes(&bytes, &LL, &ALL_MLDV2_ROUTERS);
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                for r in p.records().flatten() {
                    let _ = (r.1.source(0), r.1.aux_word(0));
                }
            }
        }
    }
}
