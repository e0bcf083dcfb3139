//! RMPP receive: an SA answer that spans several DATA segments (a SubnAdmGetTableResp of more
//! than one ServiceRecord or three MCMemberRecords) reassembled, ACKed window by window, as the
//! kernel's receiver does it [mad_rmpp.c `start_rmpp`, `continue_rmpp`, `complete_rmpp`,
//! `ack_recv`, `format_ack`, `nack_recv`, `recv_timeout_handler`, `process_rmpp_data`,
//! `ib_process_rmpp_recv_wc`; IBA vol 1 13.6.4/13.6.5]. spec/sa.md "RMPP receive" has the rules.
//!
//! Sans-IO and owned by the SA client (sa_client.rs): segments come in with the transaction's
//! responses, ACKs/ABORTs/STOPs go out through its queue (QP1, the SA's address), the reassembly
//! timer is the transaction's deadline in the same heap.

use core::fmt;
use core::time::Duration;

use roce_wire::mad::field::METHOD;
use roce_wire::rmpp::{status, RmppFlags, RmppRepr, RmppType, RMPP_VERSION};
use roce_wire::sa::{SA_DATA_LEN, SA_DATA_OFFSET, SA_HEADER_LEN};
use roce_wire::MAD_SIZE;

use crate::Errno;

/// The kernel's receive window: `window_size` = the MAD QP's receive queue (512) >> 3.
pub const KERNEL_WINDOW: u32 = 64;
/// How long a reassembly may take: the kernel's 40 s (`start_rmpp` "until we can find the
/// packet lifetimes"); the transaction's own deadline applies too (the earlier ends it).
pub const REASSEMBLY_TIMEOUT: Duration = Duration::from_secs(40);
/// How long a completed reassembly is kept to re-ACK a sender that missed the last ACK: the
/// kernel's 10 s (`complete_rmpp` queues `cleanup_work`).
pub const LINGER: Duration = Duration::from_secs(10);
/// Completed reassemblies kept at most (the oldest is forgotten first).
pub const LINGER_MAX: usize = 64;
/// The largest message this receiver reassembles, in segments (13 MB of SA data); more is
/// answered with STOP (status ResX) — the kernel has no bound.
pub const MAX_SEGMENTS: u32 = 1 << 16;

/// The bytes of one segment after the RMPP header (SA header + data): `IB_MGMT_RMPP_DATA`.
pub const SEGMENT_PAYLOAD: u32 = (SA_HEADER_LEN + SA_DATA_LEN) as u32;

/// MAD byte of the RMPP header (Data1 = SegmentNumber at +4, Data2 at +8).
const RMPP_AT: usize = 24;

/// Why an RMPP answer ended without a table. The transaction's owner gets it; every case also
/// counts as a named drop or an RMPP counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RmppError {
    /// We aborted the transfer (ABORT sent with `status`): segment `segment` broke the
    /// protocol at MAD byte `offset` (the RMPP field at fault).
    Aborted {
        /// The RMPPStatus we sent (`roce_wire::rmpp::status`).
        status: u8,
        /// The SegmentNumber of the offending segment.
        segment: u32,
        /// The MAD byte offset of the field at fault.
        offset: usize,
    },
    /// The message is larger than [`MAX_SEGMENTS`]: STOP (ResX) sent.
    TooLarge {
        /// The segment that went past the bound.
        segment: u32,
    },
    /// The sender aborted (RMPPType ABORT) with this status.
    PeerAborted {
        /// The sender's RMPPStatus.
        status: u8,
    },
    /// The sender stopped (RMPPType STOP) with this status.
    PeerStopped {
        /// The sender's RMPPStatus.
        status: u8,
    },
    /// The reassembly did not complete in time (ABORT T2L sent).
    TimedOut {
        /// Segments received in order before the timer ran out.
        received: u32,
    },
}

impl RmppError {
    /// The errno an application sees: ETIMEDOUT for a timeout (the kernel's query fails so),
    /// EPROTO for an abort of ours, ECONNABORTED for the sender's ABORT or STOP, EMSGSIZE for a
    /// message past the bound.
    pub fn errno(&self) -> Errno {
        match self {
            RmppError::Aborted { .. } => Errno::EPROTO,
            RmppError::TooLarge { .. } => Errno::EMSGSIZE,
            RmppError::PeerAborted { .. } | RmppError::PeerStopped { .. } => Errno::ECONNABORTED,
            RmppError::TimedOut { .. } => Errno::ETIMEDOUT,
        }
    }
}

/// The name of an RMPPStatus (`IB_MGMT_RMPP_STATUS_*`).
pub fn status_name(s: u8) -> &'static str {
    match s {
        status::SUCCESS => "Normal",
        status::RESX => "ResX",
        status::T2L => "T2L",
        status::BAD_LEN => "BadLen",
        status::BAD_SEG => "BadSeg",
        status::BADT => "BadT",
        status::W2S => "W2S",
        status::S2B => "S2B",
        status::BAD_STATUS => "BadStatus",
        status::UNV => "UNV",
        status::TMR => "TMR",
        status::UNSPEC => "Unspec",
        _ => "unknown",
    }
}

impl fmt::Display for RmppError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RmppError::Aborted { status, segment, offset } => write!(
                f,
                "RMPP: segment {segment} rejected at MAD byte {offset}: ABORT {status} ({}) sent",
                status_name(status)
            ),
            RmppError::TooLarge { segment } => {
                write!(f, "RMPP: segment {segment} past the bound of {MAX_SEGMENTS} segments: STOP ResX sent")
            }
            RmppError::PeerAborted { status } => {
                write!(f, "RMPP: the sender aborted, status {status} ({})", status_name(status))
            }
            RmppError::PeerStopped { status } => {
                write!(f, "RMPP: the sender stopped, status {status} ({})", status_name(status))
            }
            RmppError::TimedOut { received } => {
                write!(f, "RMPP: reassembly timed out after {received} segment(s): ABORT T2L sent")
            }
        }
    }
}

/// Counters of the RMPP receiver (drops are also counted by reason in the stack's counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RmppStats {
    /// DATA segments taken into a reassembly (in order).
    pub segments: u64,
    /// ACKs sent (window ends, Last segments, re-ACKs of duplicates).
    pub acks: u64,
    /// ABORTs and STOPs sent.
    pub aborts: u64,
    /// Multi-segment messages completed.
    pub tables: u64,
    /// Answers with the Active flag but no RMPP type (OpenSM's through ibsim's umad shim),
    /// read as one MAD: whether more of the table existed cannot be known.
    pub unsegmented: u64,
}

/// One reassembly in progress, kept in its transaction (boxed: joins never have one).
#[derive(Debug, Clone)]
pub(crate) struct Reassembly {
    /// The first segment whole: the answer's headers, and the template of our ACKs.
    pub first: [u8; MAD_SIZE],
    /// The SA data of the segments received in order.
    pub data: Vec<u8>,
    /// The last segment received in order.
    pub seg_num: u32,
    /// The SegmentNumber of our last ACK.
    pub last_ack: u32,
    /// The window's last segment (NewWindowLast of our ACKs).
    pub newwin: u32,
    /// The segments the first segment's PayloadLength announces (0: not given).
    pub expected: u32,
    /// ACKs sent for this message.
    pub acks: u32,
    /// Segments ahead of the next expected one within the window, held until the gap fills
    /// (the kernel keeps them in its list too, `find_seg_location`).
    pub held: std::collections::BTreeMap<u32, Held>,
}

/// A segment held out of order: its flags, PayloadLength and data.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    flags: RmppFlags,
    payload_length: u32,
    data: Box<[u8; SA_DATA_LEN]>,
}

/// A completed reassembly, kept [`LINGER`] to re-ACK duplicates.
#[derive(Debug, Clone)]
pub(crate) struct Linger {
    pub tid: u64,
    pub hdr: [u8; SA_DATA_OFFSET],
    pub seg_num: u32,
    pub newwin: u32,
    pub until: crate::Instant,
}

/// What one DATA segment did to a reassembly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Taken; `ack` if the window's end was reached.
    Taken { ack: bool },
    /// The Last segment: the message is whole (ACK it).
    Complete,
    /// Already ACKed (re-ACK it) or already in (no ACK): a duplicate.
    Duplicate { ack: bool },
    /// Past the window's end: dropped.
    BeyondWindow,
    /// Ahead of the next expected one within the window: held until the gap fills.
    Held,
    /// Broke the protocol: ABORT with this status; the byte offset of the field.
    Abort(u8, usize),
    /// Past [`MAX_SEGMENTS`]: STOP ResX.
    TooLarge,
}

/// The RMPP header of a MAD (at least 36 bytes).
pub(crate) fn header(mad: &[u8]) -> RmppRepr {
    RmppRepr::parse_bytes(&mad[RMPP_AT..]).unwrap_or_default()
}

/// The checks of `ib_process_rmpp_recv_wc` and `process_rmpp_data` on an active DATA segment
/// before any state: the ABORT status and the MAD byte at fault, or `None`.
pub(crate) fn check_data(r: &RmppRepr) -> Option<(u8, usize)> {
    if r.version != RMPP_VERSION {
        return Some((status::UNV, RMPP_AT));
    }
    if r.status != status::SUCCESS {
        return Some((status::BAD_STATUS, RMPP_AT + 3));
    }
    let first = r.flags.contains(RmppFlags::FIRST);
    if (r.data1 == 1) != first {
        return Some((status::BAD_SEG, RMPP_AT + 4));
    }
    None
}

/// The Last segment's PayloadLength (the SA header and the data in that segment): 20 to 220.
fn last_len_ok(pl: u32) -> bool {
    (SA_HEADER_LEN as u32..=SEGMENT_PAYLOAD).contains(&pl)
}

impl Reassembly {
    /// Start on a First segment that is not also the Last: ACK (1, 1 + window) follows.
    /// `Err` with the ABORT status when its PayloadLength cannot be a multi-segment message.
    pub fn start(mad: &[u8], r: &RmppRepr, window: u32) -> Result<Box<Reassembly>, (u8, usize)> {
        let p1 = r.data2;
        // More than one segment: at least 2 × 20 header bytes and 201 data bytes.
        if p1 != 0 && p1 <= SEGMENT_PAYLOAD {
            return Err((status::BAD_LEN, RMPP_AT + 8));
        }
        let expected = p1.div_ceil(SEGMENT_PAYLOAD);
        let mut first = [0u8; MAD_SIZE];
        first.copy_from_slice(&mad[..MAD_SIZE]);
        // The announced size is a hint, bounded: the data grows as segments come.
        let hint = (expected.min(64) as usize) * SA_DATA_LEN;
        let mut data = Vec::with_capacity(hint.max(2 * SA_DATA_LEN));
        data.extend_from_slice(&mad[SA_DATA_OFFSET..MAD_SIZE]);
        Ok(Box::new(Reassembly {
            first,
            data,
            seg_num: 1,
            last_ack: 0,
            newwin: window.max(1).saturating_add(1),
            expected,
            acks: 0,
            held: Default::default(),
        }))
    }

    /// A DATA segment after the first (or the first again) [`continue_rmpp`]: dropped past
    /// the window, re-ACKed when already ACKed, held when ahead of a gap, else taken with the
    /// held ones it makes consecutive [`update_seg_num`].
    pub fn segment(&mut self, mad: &[u8], r: &RmppRepr, window: u32) -> Step {
        let seg = r.data1;
        if seg > self.newwin {
            return Step::BeyondWindow;
        }
        if seg <= self.last_ack {
            return Step::Duplicate { ack: true };
        }
        if seg <= self.seg_num || self.held.contains_key(&seg) {
            return Step::Duplicate { ack: false };
        }
        if self.expected != 0 && seg > self.expected {
            return Step::Abort(status::S2B, RMPP_AT + 4);
        }
        if seg > MAX_SEGMENTS {
            return Step::TooLarge;
        }
        let mut data = [0u8; SA_DATA_LEN];
        data.copy_from_slice(&mad[SA_DATA_OFFSET..MAD_SIZE]);
        if seg != self.seg_num + 1 {
            self.held.insert(seg, Held { flags: r.flags, payload_length: r.data2, data: Box::new(data) });
            return Step::Held;
        }
        let mut step = self.take(seg, r.flags, r.data2, &data, window);
        let mut ack = false;
        while let Step::Taken { ack: a } = step {
            ack |= a;
            let Some(h) = self.held.remove(&(self.seg_num + 1)) else { break };
            step = self.take(self.seg_num + 1, h.flags, h.payload_length, &h.data, window);
        }
        match step {
            Step::Taken { .. } => Step::Taken { ack },
            other => other,
        }
    }

    /// Append the next segment in order.
    fn take(&mut self, seg: u32, flags: RmppFlags, pl: u32, data: &[u8; SA_DATA_LEN], window: u32) -> Step {
        if flags.contains(RmppFlags::LAST) {
            // The Last segment's length, and the total the First announced.
            let announced_ok = self.expected == 0 || (seg - 1) * SEGMENT_PAYLOAD + pl == self.first_len();
            if !last_len_ok(pl) || !announced_ok {
                return Step::Abort(status::BAD_LEN, RMPP_AT + 8);
            }
            self.data.extend_from_slice(&data[..(pl as usize) - SA_HEADER_LEN]);
            self.seg_num = seg;
            self.held.clear();
            return Step::Complete;
        }
        if self.expected != 0 && seg == self.expected {
            // The announced last segment without the Last flag.
            return Step::Abort(status::BAD_LEN, RMPP_AT + 2);
        }
        self.data.extend_from_slice(data);
        self.seg_num = seg;
        if seg == self.newwin {
            self.newwin = self.newwin.saturating_add(window.max(1));
            return Step::Taken { ack: true };
        }
        Step::Taken { ack: false }
    }

    /// The first segment's PayloadLength.
    fn first_len(&self) -> u32 {
        header(&self.first).data2
    }

    /// Our ACK of what is in order: SegmentNumber = last in order, NewWindowLast = window end
    /// (`format_ack`). Records it as the last ACK.
    pub fn ack(&mut self) -> [u8; MAD_SIZE] {
        self.last_ack = self.seg_num;
        self.acks += 1;
        ack_mad(&self.first[..SA_DATA_OFFSET], self.seg_num, self.newwin)
    }
}

/// An ACK: the segment's MAD, RMPP and SA headers, the method's response bit cleared, RMPPType
/// ACK, flags Active only (RRespTime kept), the rest zero [`format_ack`].
pub(crate) fn ack_mad(hdr: &[u8], seg_num: u32, newwin: u32) -> [u8; MAD_SIZE] {
    let mut m = [0u8; MAD_SIZE];
    m[..SA_DATA_OFFSET].copy_from_slice(&hdr[..SA_DATA_OFFSET]);
    m[METHOD] ^= 0x80;
    let mut r = header(&m);
    r.rmpp_type = RmppType::Ack;
    r.flags = RmppFlags::ACTIVE;
    r.data1 = seg_num;
    r.data2 = newwin;
    r.emit_bytes(&mut m[RMPP_AT..]);
    m
}

/// An ABORT (or a STOP) with `status`: as an ACK, version 1, SegmentNumber and
/// NewWindowLast 0 [`nack_recv`] (roce-wire's [`roce_wire::sa::rmpp_stop_or_abort`]).
pub(crate) fn abort_mad(hdr: &[u8], kind: RmppType, st: u8) -> [u8; MAD_SIZE] {
    roce_wire::sa::rmpp_stop_or_abort(hdr, kind, st)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(n: u32, flags: RmppFlags, pl: u32, fill: u8) -> [u8; MAD_SIZE] {
        let mut m = [fill; MAD_SIZE];
        m[..SA_DATA_OFFSET].fill(0);
        m[METHOD] = 0x92;
        RmppRepr { version: 1, rmpp_type: RmppType::Data, resp_time: 0x1F, flags, status: 0, data1: n, data2: pl }
            .emit_bytes(&mut m[RMPP_AT..]);
        m
    }

    #[test]
    fn three_segments_in_a_window_of_one() {
        let a = RmppFlags::ACTIVE;
        // 450 data bytes: 3 segments, PayloadLength 3 × 20 + 450 on the first, 20 + 50 on the last
        let s1 = seg(1, a | RmppFlags::FIRST, 510, 1);
        let mut r = Reassembly::start(&s1, &header(&s1), 1).unwrap();
        assert_eq!((r.seg_num, r.newwin, r.expected), (1, 2, 3));
        let ack = r.ack();
        let h = header(&ack);
        assert_eq!((h.rmpp_type, h.flags, h.data1, h.data2, ack[METHOD]), (RmppType::Ack, a, 1, 2, 0x12));
        assert_eq!(h.resp_time, 0x1F);
        let s2 = seg(2, a, 0, 2);
        assert_eq!(r.segment(&s2, &header(&s2), 1), Step::Taken { ack: true });
        assert_eq!(header(&r.ack()).data2, 3);
        // a duplicate of what was ACKed is re-ACKed; one beyond the window dropped
        assert_eq!(r.segment(&s2, &header(&s2), 1), Step::Duplicate { ack: true });
        let s4 = seg(4, a, 0, 4);
        assert_eq!(r.segment(&s4, &header(&s4), 1), Step::BeyondWindow);
        let s3 = seg(3, a | RmppFlags::LAST, 70, 3);
        assert_eq!(r.segment(&s3, &header(&s3), 1), Step::Complete);
        assert_eq!(r.data.len(), 450);
        assert!(r.data[..200].iter().all(|&b| b == 1) && r.data[400..].iter().all(|&b| b == 3));
    }

    #[test]
    fn bad_lengths_and_segments() {
        let a = RmppFlags::ACTIVE;
        let s1 = seg(1, a | RmppFlags::FIRST, 220, 0);
        assert_eq!(Reassembly::start(&s1, &header(&s1), 4).unwrap_err().0, status::BAD_LEN);
        let s1 = seg(1, a | RmppFlags::FIRST, 441, 0); // 3 segments announced
        let mut r = Reassembly::start(&s1, &header(&s1), 4).unwrap();
        // Last too early for the announced length
        let s2 = seg(2, a | RmppFlags::LAST, 220, 0);
        assert_eq!(r.segment(&s2, &header(&s2), 4), Step::Abort(status::BAD_LEN, 32));
        // past the announced count
        let s4 = seg(4, a | RmppFlags::LAST, 40, 0);
        assert_eq!(r.segment(&s4, &header(&s4), 4), Step::Abort(status::S2B, 28));
        // a gap within the window: held; held again is a duplicate
        let s3 = seg(3, a, 0, 0);
        assert_eq!(r.segment(&s3, &header(&s3), 4), Step::Held);
        assert_eq!(r.segment(&s3, &header(&s3), 4), Step::Duplicate { ack: false });
        // the gap fills: 2 taken, then the held 3 — the announced last one without Last
        let s2 = seg(2, a, 0, 0);
        assert_eq!(r.segment(&s2, &header(&s2), 4), Step::Abort(status::BAD_LEN, 26));
        assert_eq!(r.seg_num, 2);
        // the First flag on a later segment, a First without it, a version, a status
        assert_eq!(check_data(&header(&seg(2, a | RmppFlags::FIRST, 0, 0))), Some((status::BAD_SEG, 28)));
        assert_eq!(check_data(&header(&seg(1, a, 0, 0))), Some((status::BAD_SEG, 28)));
        let mut v = header(&s2);
        v.version = 2;
        assert_eq!(check_data(&v), Some((status::UNV, 24)));
        v.version = 1;
        v.status = 5;
        assert_eq!(check_data(&v), Some((status::BAD_STATUS, 27)));
    }

    #[test]
    fn abort_and_stop_format() {
        let s = seg(3, RmppFlags::ACTIVE, 0, 9);
        let m = abort_mad(&s, RmppType::Abort, status::T2L);
        let h = header(&m);
        assert_eq!((h.version, h.rmpp_type, h.status, h.data1, h.data2), (1, RmppType::Abort, 118, 0, 0));
        assert_eq!(m[METHOD], 0x12);
        assert!(m[SA_DATA_OFFSET..].iter().all(|&b| b == 0));
        assert_eq!(RmppError::TimedOut { received: 2 }.errno(), Errno::ETIMEDOUT);
        assert_eq!(RmppError::PeerStopped { status: 1 }.errno(), Errno::ECONNABORTED);
    }
}
