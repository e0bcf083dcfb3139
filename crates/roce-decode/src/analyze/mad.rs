//! MAD transactions by TID: each request (a method without the response bit) opens one,
//! keyed by (requester IP, class, TID); the first response closes it. Rows aggregate per
//! (class, request method, attribute): requests, responses, resends of an open TID,
//! statuses, request→response latency, and RMPP (data segments, ACKs, the largest window,
//! STOPs and ABORTs). CM (class 0x07) has no request/response pairs: see [`super::cm`].

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use roce_wire::mad::{attribute_name, method_name, Method, MgmtClass};

use super::series::Latency;
use super::{Endpoint, Note};

/// Open transactions kept; beyond, new requests are counted in [`MadTable::open_full`].
pub const MAX_OPEN: usize = 65_536;
/// Rows (class, method, attribute) kept; MADs of further rows are counted in
/// [`MadTable::rows_dropped`].
pub const MAX_ROWS: usize = 4096;

/// A row of the MAD table.
#[derive(Debug, Clone, Default)]
pub struct MadRow {
    /// Requests (first copies).
    pub requests: u64,
    /// Requests sent again with a TID still open.
    pub resends: u64,
    /// Responses that closed a transaction.
    pub responses: u64,
    /// Responses by non-zero status.
    pub statuses: BTreeMap<u16, u64>,
    /// Request (its last copy) to response.
    pub latency: Latency,
    /// RMPP DATA segments.
    pub rmpp_segments: u64,
    /// RMPP ACKs.
    pub rmpp_acks: u64,
    /// Largest RMPP window an ACK granted (NewWindowLast − SegmentNumber).
    pub rmpp_max_window: u32,
    /// RMPP STOPs and ABORTs.
    pub rmpp_stops: u64,
    /// Transactions still open at the end of the capture.
    pub unanswered: u64,
}

/// (class, request method, attribute).
pub type RowKey = (u8, u8, u16);

/// A request waiting for its response.
#[derive(Debug, Clone, Copy)]
struct Open {
    row: RowKey,
    t: f64,
    frame: u64,
}

/// What a response closed, for the sections that care (multicast).
#[derive(Debug, Clone, Copy)]
pub struct Closed {
    /// The request's method.
    pub method: u8,
    /// The response's status.
    pub status: u16,
}

/// Every MAD transaction.
#[derive(Debug, Default)]
pub struct MadTable {
    /// Rows.
    pub rows: BTreeMap<RowKey, MadRow>,
    open: HashMap<(Endpoint, u8, u64), Open>,
    /// Requests not tracked because [`MAX_OPEN`] were open.
    pub open_full: u64,
    /// Responses with no open request (their request is before the capture, or an RMPP
    /// segment after the first).
    pub unmatched_responses: u64,
    /// MADs in total.
    pub mads: u64,
    /// MADs not analysed because [`MAX_ROWS`] rows were there.
    pub rows_dropped: u64,
}

/// Names for a row: class, method, attribute.
pub fn row_names(k: RowKey) -> (&'static str, &'static str, &'static str) {
    let class = MgmtClass::from(k.0);
    (class.name(), method_name(class, Method::from(k.1), false), attribute_name(class, k.2))
}

impl MadTable {
    /// Account one MAD from `src` to `dst` (at least the 24-byte header: the caller checks).
    pub fn mad(
        &mut self,
        src: Endpoint,
        dst: Endpoint,
        m: &[u8],
        t: f64,
        frame: u64,
        note: &mut Note,
    ) -> Option<Closed> {
        self.mads += 1;
        let class = m[1];
        let method_byte = m[3];
        let response = method_byte & 0x80 != 0;
        let method = method_byte & 0x7f;
        let status = u16::from_be_bytes([m[4], m[5]]);
        let tid = u64::from_be_bytes([m[8], m[9], m[10], m[11], m[12], m[13], m[14], m[15]]);
        let attr = u16::from_be_bytes([m[16], m[17]]);
        let row_key = (class, method, attr);
        if self.rows.len() >= MAX_ROWS && !self.rows.contains_key(&row_key) {
            self.rows_dropped += 1;
            return None;
        }
        // RMPP header (MAD bytes 24..36), when active [IBA 13.6.2].
        let mut rmpp_type = 0;
        if has_rmpp(class) && m.len() >= 36 && m[26] & 1 != 0 {
            rmpp_type = m[25];
            let seg = u32::from_be_bytes([m[28], m[29], m[30], m[31]]);
            let data2 = u32::from_be_bytes([m[32], m[33], m[34], m[35]]);
            let row = self.rows.entry(row_key).or_default();
            match rmpp_type {
                1 => row.rmpp_segments += 1,
                2 => {
                    row.rmpp_acks += 1;
                    row.rmpp_max_window = row.rmpp_max_window.max(data2.saturating_sub(seg));
                    let _ = write!(note.text(), "RMPP ACK segment {seg}, window to {data2}");
                }
                3 | 4 => row.rmpp_stops += 1,
                _ => {}
            }
        }
        if class == roce_wire::cm::MGMT_CLASS {
            return None;
        }
        if rmpp_type == 2 {
            // An ACK travels against the data: neither request nor response.
            return None;
        }
        if !response {
            let key = (src, class, tid);
            let row = self.rows.entry(row_key).or_default();
            match self.open.get_mut(&key) {
                Some(o) => {
                    row.resends += 1;
                    let _ = write!(note.text(), "resend of TID 0x{tid:016x} (first in frame {})", o.frame);
                    o.t = t;
                }
                None => {
                    row.requests += 1;
                    if self.open.len() < MAX_OPEN {
                        self.open.insert(key, Open { row: row_key, t, frame });
                    } else {
                        self.open_full += 1;
                    }
                }
            }
            return None;
        }
        match self.open.remove(&(dst, class, tid)) {
            Some(o) => {
                let row = self.rows.entry(o.row).or_default();
                row.responses += 1;
                if status != 0 {
                    *row.statuses.entry(status).or_default() += 1;
                }
                let dt = t - o.t;
                row.latency.add(dt);
                let _ = write!(note.text(), "response to frame {} after {:.1} µs", o.frame, dt * 1e6);
                if status != 0 {
                    let _ = write!(note.text(), ", status 0x{status:04x}");
                }
                Some(Closed { method: o.row.1, status })
            }
            None => {
                self.unmatched_responses += 1;
                None
            }
        }
    }

    /// Count the transactions still open into their rows (at the end).
    pub fn finish(&mut self) {
        for o in self.open.values() {
            self.rows.entry(o.row).or_default().unanswered += 1;
        }
        self.open.clear();
    }
}

/// Classes whose MADs carry an RMPP header: SA and the vendor/RMPP-capable classes.
fn has_rmpp(class: u8) -> bool {
    class == 0x03 || class == 0x05 || (0x30..=0x4f).contains(&class)
}
