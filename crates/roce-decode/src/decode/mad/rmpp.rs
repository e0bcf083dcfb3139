//! RMPP tables in `roce decode`: what each segment carries, and the table put back together
//! across frames.
//!
//! A GetTableResp longer than one MAD is cut into RMPP DATA segments of 200 data bytes each
//! (IBA 13.6.2); only the first has a record at SA data byte 0, the others continue the record
//! stream mid-record, and ACK/STOP/ABORT carry no data. The decoder keeps the data of each
//! table per (source, destination, TID, class, attribute) and, on the Last segment, decodes the
//! whole table — or says which segments it never saw. Memory is bounded: at most
//! [`MAX_OPEN_TABLES`] tables and [`MAX_BYTES`] bytes of segment data are held; a segment that
//! would exceed either is not kept and counted.

use std::collections::{BTreeMap, HashMap};

use roce_wire::mad::MgmtClass;
use roce_wire::mcmember::McMemberRecord;
use roce_wire::rmpp::{self, RmppFlags, RmppType};
use roce_wire::sa::{attr, SaMad, SA_DATA_LEN, SA_HEADER_LEN};
use roce_wire::service_record::ServiceRecord;

use super::{mcmember_json, service_json};
use crate::json_out::{push_fmt, Json, Summary};

macro_rules! sum {
    ($s:expr, $($arg:tt)*) => { push_fmt($s, format_args!($($arg)*)) };
}

/// Tables held open at once, at most.
pub const MAX_OPEN_TABLES: usize = 256;
/// Bytes of segment data held over all open tables, at most (16 MiB).
pub const MAX_BYTES: usize = 16 << 20;
/// Missing segment numbers listed by name per table (the count covers all of them).
const MISSING_LISTED: usize = 16;

/// A frame's (source, destination) addresses, IPv4 as IPv4-mapped IPv6.
pub(crate) type Endpoints = ([u8; 16], [u8; 16]);

/// What an SA MAD is in RMPP terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// No RMPP (or not active): one MAD, one record.
    None,
    /// DATA segment 1: the table's first records at data byte 0.
    First,
    /// DATA segment 2..n: the continuation of the record stream.
    Continuation,
    /// ACK, STOP or ABORT: no data.
    Control,
}

/// The role of `sa`'s MAD.
pub(crate) fn rmpp_role(sa: &SaMad) -> Role {
    let r = &sa.rmpp;
    match r.rmpp_type {
        RmppType::Data if r.flags.contains(RmppFlags::ACTIVE) => {
            if r.data1 <= 1 {
                Role::First
            } else {
                Role::Continuation
            }
        }
        RmppType::Ack | RmppType::Stop | RmppType::Abort => Role::Control,
        _ => Role::None,
    }
}

/// What the decoder noticed about RMPP tables over a whole capture.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RmppCounters {
    /// Tables whose every segment was seen: decoded whole.
    pub tables: u64,
    /// Tables ended by their Last segment with segments missing: reported as incomplete.
    pub incomplete: u64,
    /// Segments seen twice (a retransmission): the first copy is kept.
    pub duplicate_segments: u64,
    /// Continuation segments without an open table (its earlier segments were not captured,
    /// or the table was not kept).
    pub orphan_segments: u64,
    /// Segments not kept because [`MAX_OPEN_TABLES`] tables were open.
    pub over_tables: u64,
    /// Segments not kept because [`MAX_BYTES`] bytes were held.
    pub over_bytes: u64,
    /// Tables still open (no Last seen yet).
    pub open: u64,
}

impl RmppCounters {
    /// Whether anything worth a warning happened.
    pub fn any_loss(&self) -> bool {
        self.incomplete
            + self.duplicate_segments
            + self.orphan_segments
            + self.over_tables
            + self.over_bytes
            + self.open
            > 0
    }
}

impl std::fmt::Display for RmppCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} tables whole, {} incomplete, {} duplicate segments, {} segments without their table, \
             {} not kept (over {MAX_OPEN_TABLES} open tables), {} not kept (over {MAX_BYTES} bytes), {} without their Last",
            self.tables,
            self.incomplete,
            self.duplicate_segments,
            self.orphan_segments,
            self.over_tables,
            self.over_bytes,
            self.open
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    ends: Endpoints,
    tid: u64,
    class: u8,
    attribute: u16,
}

struct Table {
    /// The First's total: ⌈PayloadLength / 220⌉ segments.
    total: Option<u32>,
    /// AttributeOffset × 8: the bytes from one record to the next.
    record_len: usize,
    segments: BTreeMap<u32, Box<[u8; SA_DATA_LEN]>>,
    duplicates: u32,
}

/// The open tables of a capture, and what was counted.
#[derive(Default)]
pub struct Reassembly {
    open: HashMap<Key, Table>,
    bytes: usize,
    /// What was counted so far.
    pub counters: RmppCounters,
}

impl Reassembly {
    /// The counters, with the tables open now.
    pub fn counters(&self) -> RmppCounters {
        RmppCounters { open: self.open.len() as u64, ..self.counters }
    }
}

fn status_name(v: u8) -> &'static str {
    // ib_mad.h IB_MGMT_RMPP_STATUS_*.
    match v {
        rmpp::status::SUCCESS => "Success",
        rmpp::status::RESX => "ResX",
        rmpp::status::T2L => "T2L",
        rmpp::status::BAD_LEN => "BadLen",
        rmpp::status::BAD_SEG => "BadSeg",
        rmpp::status::BADT => "BadT",
        rmpp::status::W2S => "W2S",
        rmpp::status::S2B => "S2B",
        rmpp::status::BAD_STATUS => "BadStatus",
        rmpp::status::UNV => "UnV",
        rmpp::status::TMR => "TmR",
        rmpp::status::UNSPEC => "Unspec",
        _ => "unknown",
    }
}

/// `records`: the records of `data`, `record_len` bytes apart, each as the single-MAD record
/// member (other attributes as hex).
fn records_json(j: &mut Json, attribute_id: u16, data: &[u8], record_len: usize) {
    j.begin_array("records");
    for rec in data.chunks_exact(record_len.max(1)) {
        match attribute_id {
            attr::MC_MEMBER_RECORD => match McMemberRecord::parse_bytes(rec) {
                Ok(m) => mcmember_json(j, "", &m),
                Err(_) => j.hex("", rec),
            },
            attr::SERVICE_RECORD => match ServiceRecord::parse_bytes(rec) {
                Ok(r) => service_json(j, "", &r),
                Err(_) => j.hex("", rec),
            },
            _ => j.hex("", rec),
        }
    }
    j.end_array();
}

/// Bytes of a segment, RMPP header excluded: the SA header and its data area.
const SEGMENT_PAYLOAD: u32 = (SA_HEADER_LEN + SA_DATA_LEN) as u32;

impl Reassembly {
    /// Describe an RMPP segment (`rmpp_segment`, the summary) and keep its data; on the Last,
    /// the table (`sa_table`).
    ///
    /// `area` is the MAD's SA data area (200 bytes).
    pub(crate) fn describe_segment(
        &mut self,
        j: &mut Json,
        s: &mut Summary,
        ends: Endpoints,
        sa: &SaMad,
        area: &[u8],
        role: Role,
    ) {
        let r = &sa.rmpp;
        let key = Key {
            ends,
            tid: sa.header.transaction_id,
            class: u8::from(MgmtClass::SubnAdm),
            attribute: sa.header.attribute_id,
        };
        j.begin("rmpp_segment");
        match role {
            Role::Control => {
                let ty = match r.rmpp_type {
                    RmppType::Ack => "ACK",
                    RmppType::Stop => "STOP",
                    _ => "ABORT",
                };
                j.str("type", ty);
                if r.rmpp_type == RmppType::Ack {
                    j.num("segment", r.data1);
                    j.num("new_window_last", r.data2);
                    j.end();
                    sum!(s, " RMPP ACK seg {} NewWindowLast {}", r.data1, r.data2);
                } else {
                    j.num("status", u32::from(r.status));
                    j.str("status_name", status_name(r.status));
                    j.end();
                    sum!(s, " RMPP {ty} status {}({})", status_name(r.status), r.status);
                }
            }
            _ => self.data(j, s, key, sa, area, role),
        }
    }

    fn data(&mut self, j: &mut Json, s: &mut Summary, key: Key, sa: &SaMad, area: &[u8], role: Role) {
        let r = &sa.rmpp;
        let seg = r.data1.max(1);
        let last = r.flags.contains(RmppFlags::LAST);
        // PayloadLength: of the whole transfer on the First, of itself on the Last, 0 between.
        let data_len = if last {
            r.data2.saturating_sub(SA_HEADER_LEN as u32).min(SA_DATA_LEN as u32)
        } else {
            SA_DATA_LEN as u32
        };
        let first_total = (role == Role::First && !last && r.data2 > 0).then(|| r.data2.div_ceil(SEGMENT_PAYLOAD));
        let record_len = usize::from(sa.sa.attribute_offset) * 8;
        j.str("type", "DATA");
        j.num("segment", seg);
        j.bool("last", last);
        j.num("data_len", data_len);
        let total = self.keep(key, area, seg, first_total, record_len);
        if let Some(t) = total {
            j.num("total_segments", t);
        }
        if role == Role::First && record_len > 0 {
            // The records that end within this segment's data.
            let n = (data_len as usize / record_len).min(area.len() / record_len);
            j.count("records_in_segment", n as u64);
            records_json(j, sa.header.attribute_id, &area[..n * record_len], record_len);
        }
        j.bool("continues", !last);
        j.end();
        match total {
            Some(t) => sum!(s, " RMPP DATA seg {seg}/{t}"),
            None => sum!(s, " RMPP DATA seg {seg}/…"),
        }
        if role == Role::Continuation {
            sum!(s, " ({data_len} bytes of the table)");
        } else if record_len > 0 && !last {
            sum!(s, " ({} records here)", data_len as usize / record_len);
        }
        if !last {
            s.push_str(", table continues");
            return;
        }
        if let Some(t) = self.open.remove(&key) {
            self.bytes -= t.segments.len() * SA_DATA_LEN;
            self.table(j, s, sa, seg, data_len as usize, t);
        }
    }

    /// Keep segment `seg`'s data; the table's total segments when known.
    fn keep(&mut self, key: Key, area: &[u8], seg: u32, first_total: Option<u32>, record_len: usize) -> Option<u32> {
        if !self.open.contains_key(&key) {
            if seg > 1 {
                self.counters.orphan_segments += 1;
                return None;
            }
            if self.open.len() >= MAX_OPEN_TABLES {
                self.counters.over_tables += 1;
                return first_total;
            }
            let t = Table { total: first_total, record_len, segments: BTreeMap::new(), duplicates: 0 };
            self.open.insert(key, t);
        }
        let t = self.open.get_mut(&key)?;
        if first_total.is_some() {
            t.total = first_total;
        }
        let full = self.bytes + SA_DATA_LEN > MAX_BYTES;
        match t.segments.entry(seg) {
            std::collections::btree_map::Entry::Occupied(_) => {
                t.duplicates += 1;
                self.counters.duplicate_segments += 1;
            }
            std::collections::btree_map::Entry::Vacant(_) if full => self.counters.over_bytes += 1,
            std::collections::btree_map::Entry::Vacant(v) => {
                let mut data = Box::new([0u8; SA_DATA_LEN]);
                let n = area.len().min(SA_DATA_LEN);
                data[..n].copy_from_slice(&area[..n]);
                v.insert(data);
                self.bytes += SA_DATA_LEN;
            }
        }
        t.total
    }

    /// The table that `last` (its Last segment, `last_len` data bytes) closed.
    fn table(&mut self, j: &mut Json, s: &mut Summary, sa: &SaMad, last: u32, last_len: usize, t: Table) {
        let present = t.segments.range(1..=last).count() as u64;
        let missing_count = u64::from(last) - present;
        let complete = missing_count == 0 && t.total.is_none_or(|n| n == last);
        let attr_name = sa.header.attribute_name();
        j.begin("sa_table");
        j.str("attribute_name", attr_name);
        j.num("segments", last);
        j.count("record_len", t.record_len as u64);
        j.bool("complete", complete);
        j.count("missing_count", missing_count);
        // The first missing numbers, walking the kept ones (u64: SegmentNumber may be u32::MAX).
        let mut missing: Vec<u32> = Vec::new();
        let mut want = 1u64;
        for &n in t.segments.range(1..=last).map(|(n, _)| n) {
            while want < u64::from(n) && missing.len() < MISSING_LISTED {
                missing.push(want as u32);
                want += 1;
            }
            want = u64::from(n) + 1;
        }
        while want <= u64::from(last) && missing.len() < MISSING_LISTED {
            missing.push(want as u32);
            want += 1;
        }
        j.begin_array("missing");
        for &n in &missing {
            j.num("", n);
        }
        j.end_array();
        j.num("duplicates", t.duplicates);
        if !complete {
            j.end();
            self.counters.incomplete += 1;
            sum!(s, " | table incomplete: {missing_count} of {last} segments missing");
            if !missing.is_empty() {
                s.push_str(" (");
                for (i, n) in missing.iter().enumerate() {
                    sum!(s, "{}{n}", if i > 0 { "," } else { "" });
                }
                if missing_count > missing.len() as u64 {
                    s.push_str(",…");
                }
                s.push(')');
            }
            return;
        }
        self.counters.tables += 1;
        let data_len = (last as usize - 1) * SA_DATA_LEN + last_len;
        let mut data = Vec::with_capacity(data_len);
        for seg in t.segments.values() {
            data.extend_from_slice(&seg[..]);
        }
        data.truncate(data_len);
        let count = data_len.checked_div(t.record_len).unwrap_or(0);
        j.count("data_len", data_len as u64);
        j.count("count", count as u64);
        records_json(j, sa.header.attribute_id, &data[..count * t.record_len], t.record_len);
        if t.record_len > 0 && !data_len.is_multiple_of(t.record_len) {
            j.hex("leftover", &data[count * t.record_len..]);
        }
        j.end();
        sum!(s, " | table: {count} {attr_name}s");
        if t.duplicates > 0 {
            sum!(s, " ({} duplicate segments)", t.duplicates);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GetTableResp(MCMemberRecord) RMPP DATA MAD: `seg` of a table, `flags`, PayloadLength.
    fn mad(tid: u64, seg: u32, flags: u8, paylen: u32, fill: u8) -> Vec<u8> {
        let mut b = vec![fill; 256];
        b[..4].copy_from_slice(&[1, 0x03, 2, 0x92]);
        b[4..8].fill(0);
        b[8..16].copy_from_slice(&tid.to_be_bytes());
        b[16..18].copy_from_slice(&attr::MC_MEMBER_RECORD.to_be_bytes());
        b[24..28].copy_from_slice(&[1, 1, (0x1f << 3) | flags, 0]);
        b[28..32].copy_from_slice(&seg.to_be_bytes());
        b[32..36].copy_from_slice(&paylen.to_be_bytes());
        b[44..46].copy_from_slice(&7u16.to_be_bytes());
        b
    }

    fn feed(r: &mut Reassembly, b: &[u8]) -> (String, String) {
        let sa = SaMad::parse(b).unwrap();
        let (mut j, mut s) = (Json::default(), Summary::default());
        j.begin("");
        let role = rmpp_role(&sa);
        r.describe_segment(&mut j, &mut s, ([0; 16], [1; 16]), &sa, &b[56..], role);
        j.end();
        (String::from_utf8(j.buf).unwrap(), s.text)
    }

    #[test]
    fn open_tables_and_bytes_are_bounded_and_counted() {
        let mut r = Reassembly::default();
        for tid in 0..(MAX_OPEN_TABLES as u64 + 10) {
            feed(&mut r, &mad(tid, 1, 0x3, 20 * 2 + 56 * 5, 0));
        }
        assert_eq!(r.open.len(), MAX_OPEN_TABLES);
        assert_eq!(r.counters.over_tables, 10);
        // Segments of one table up to the byte bound.
        let mut r = Reassembly::default();
        feed(&mut r, &mad(7, 1, 0x3, 0, 0));
        let cap = MAX_BYTES / SA_DATA_LEN;
        for seg in 2..=(cap as u32 + 5) {
            feed(&mut r, &mad(7, seg, 0x1, 0, 0));
        }
        assert!(r.bytes <= MAX_BYTES);
        assert_eq!(r.counters.over_bytes, 5);
        // The Last closes it and gives the memory back.
        let (j, s) = feed(&mut r, &mad(7, cap as u32 + 6, 0x5, 20, 0));
        assert!(s.contains("table incomplete: 6 of"), "{s}");
        assert!(j.contains("\"complete\":false"), "{j}");
        assert_eq!((r.bytes, r.open.len()), (0, 0));
    }

    #[test]
    fn a_huge_segment_number_costs_no_time_and_lists_16_missing() {
        let mut r = Reassembly::default();
        feed(&mut r, &mad(1, 1, 0x3, 0, 0));
        let (j, s) = feed(&mut r, &mad(1, u32::MAX, 0x5, 20, 0));
        assert!(
            s.contains(&format!(
                "{} of {} segments missing (2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,…)",
                u32::MAX - 2,
                u32::MAX
            )),
            "{s}"
        );
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["sa_table"]["missing"].as_array().unwrap().len(), MISSING_LISTED);
    }

    #[test]
    fn a_one_segment_table_is_whole_on_its_first() {
        let mut r = Reassembly::default();
        let (j, s) = feed(&mut r, &mad(1, 1, 0x7, 20 + 56 * 2, 0));
        assert!(s.contains("table: 2 MCMemberRecords"), "{s}");
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["sa_table"]["count"], 2);
        assert_eq!(r.counters.tables, 1);
    }

    #[test]
    fn ack_stop_abort_name_their_fields() {
        let mut r = Reassembly::default();
        let mut b = mad(1, 3, 0x1, 9, 0);
        b[25] = 2;
        assert!(feed(&mut r, &b).1.contains("RMPP ACK seg 3 NewWindowLast 9"));
        b[25] = 4;
        b[27] = rmpp::status::BADT;
        let (j, s) = feed(&mut r, &b);
        assert!(s.contains("RMPP ABORT status BadT(121)"), "{s}");
        assert!(j.contains("\"status_name\":\"BadT\""), "{j}");
    }
}
