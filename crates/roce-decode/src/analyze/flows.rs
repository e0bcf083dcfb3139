//! Flows: one per (source, destination, BTH destination QP), the endpoints IP addresses,
//! GIDs or LIDs ([`Endpoint`]); the PSN analysis of the requests they carry, and the RC acknowledgement side (ACKs, NAKs, READ responses, atomics).
//!
//! The PSN verdicts, per packet of a flow in capture order (24-bit serial arithmetic):
//! - *gap*: the PSN is ahead of the expected next one (highest seen + 1); `missing` adds the
//!   PSNs skipped. After a READ request the next jump is not a gap: the READ's responses use
//!   those PSNs (how many, the capture alone does not say).
//! - *out of order*: behind the expected one and never seen (it fills a gap);
//! - *duplicate*: the same PSN as the flow's previous packet;
//! - *retransmission*: a PSN seen before (not the previous packet's).
//!
//! ACKs, ATOMIC ACKs and READ responses travel on the reverse flow and are counted there
//! (the acknowledgement side); they are not part of its PSN analysis.
//!
//! CNPs: a CNP goes to the QP that sent the CE-marked traffic (its BTH destination QP is the
//! data flow's *source* QP, which the data packets' BTH does not carry). A flow's source QP is
//! learned from the capture: the CM's REQ and REP (each side's local QPN), a UD packet's DETH,
//! a READ response or ATOMIC ACK answering one of the flow's requests, or an ACK/NAK whose PSN
//! lies in exactly one RC request flow's PSN range between the two endpoints. [`FlowTable::finish`] counts each CNP on the data flow it
//! answers (`cnps`); CNPs whose data flow stays unknown keep a CNP-only flow of their own.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;

use roce_wire::bth::{Opcode, Transport};

use super::series::{Buckets, Latency, Points};
use super::{Endpoint, Note, Packet};

/// Gaps a flow remembers (to tell a late packet from a retransmission); beyond, the oldest
/// is forgotten and counted in [`Flow::holes_forgotten`].
pub const MAX_HOLES: usize = 64;
/// READ and atomic requests waiting for their response, over the whole capture; beyond,
/// new ones are not timed and counted in [`FlowTable::pending_full`].
pub const MAX_PENDING: usize = 65_536;

/// What a flow is keyed by.
pub type FlowKey = (Endpoint, Endpoint, u32);

/// The kind of a point in a flow's PSN-over-time plot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PointKind {
    /// A request in order (or after a gap).
    Send,
    /// A retransmission or duplicate.
    Retransmission,
    /// A late packet filling a gap.
    OutOfOrder,
    /// An ACK (on the reverse flow) for this PSN.
    Ack,
    /// A NAK (on the reverse flow) for this PSN.
    Nak,
}

/// A point of the PSN plot: time since the capture's start, PSN, kind.
#[derive(Debug, Clone, Copy)]
pub struct PsnPoint {
    /// Seconds since the first frame.
    pub t: f64,
    /// The PSN.
    pub psn: u32,
    /// What it was.
    pub kind: PointKind,
}

/// NAKs by kind [IBA 9.7.5.2.2, table 44].
#[derive(Debug, Clone, Default)]
pub struct Naks {
    /// NAK code 0: PSN sequence error.
    pub psn_sequence_error: u64,
    /// NAK code 1: invalid request.
    pub invalid_request: u64,
    /// NAK code 2: remote access error.
    pub remote_access_error: u64,
    /// NAK code 3: remote operational error.
    pub remote_operational_error: u64,
    /// NAK code 4: invalid RD request.
    pub invalid_rd_request: u64,
    /// Reserved codes.
    pub other: u64,
    /// RNR NAKs.
    pub rnr: u64,
    /// RNR NAKs per encoded timer value (0..31).
    pub rnr_timers: [u64; 32],
}

impl Naks {
    /// Every NAK (RNR included).
    pub fn total(&self) -> u64 {
        self.psn_sequence_error
            + self.invalid_request
            + self.remote_access_error
            + self.remote_operational_error
            + self.invalid_rd_request
            + self.other
            + self.rnr
    }
}

/// The RNR NAK timer in milliseconds for its 5-bit code [IBA table 45; rxe's rnrnak_usec].
pub fn rnr_timer_ms(code: u8) -> f64 {
    const US: [u32; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840, 5_120, 7_680,
        10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840, 245_760, 327_680, 491_520,
    ];
    f64::from(US[usize::from(code & 0x1f)]) / 1000.0
}

/// The name of a NAK code (syndrome bits 4:0 with bits 6:5 = 11).
pub fn nak_name(code: u8) -> &'static str {
    match code {
        0 => "PSN sequence error",
        1 => "invalid request",
        2 => "remote access error",
        3 => "remote operational error",
        4 => "invalid RD request",
        _ => "reserved NAK code",
    }
}

/// One flow.
#[derive(Debug, Clone)]
pub struct Flow {
    /// Where its packets come from.
    pub src: Endpoint,
    /// Where they go.
    pub dst: Endpoint,
    /// BTH destination QP.
    pub dest_qp: u32,
    /// The transport of its first packet.
    pub transport: Transport,
    /// Frames.
    pub packets: u64,
    /// Payload bytes (pad and ICRC excluded).
    pub bytes: u64,
    /// Payload bytes of packets that were not retransmissions or duplicates.
    pub unique_bytes: u64,
    /// PSN of the first packet (capture order).
    pub first_psn: u32,
    /// PSN of the last packet (capture order).
    pub last_psn: u32,
    /// Time of the first packet (seconds since the capture's first frame).
    pub first_time: f64,
    /// Time of the last packet.
    pub last_time: f64,
    /// The capture's frame number of the first packet.
    pub first_frame: u64,
    /// Messages assembled: ONLY packets, and FIRST … LAST runs (retransmitted and
    /// duplicate packets left out, so a message re-sent counts once).
    pub messages: u64,
    /// MIDDLE or LAST packets with no FIRST before them.
    pub partial_messages: u64,
    in_message: bool,
    /// PSN gaps (jumps ahead).
    pub gaps: u64,
    /// PSNs skipped by gaps.
    pub missing: u64,
    /// Late packets that filled a gap.
    pub out_of_order: u64,
    /// Back-to-back repeats of the same PSN.
    pub duplicates: u64,
    /// PSNs seen before (not back to back).
    pub retransmissions: u64,
    /// Gaps forgotten to stay bounded (a later fill of one counts as a retransmission).
    pub holes_forgotten: u64,
    next_psn: Option<u32>,
    /// The PSN of the first request (the flow may start with ACKs in the other PSN space).
    first_request_psn: u32,
    prev_psn: Option<u32>,
    read_span: bool,
    holes: VecDeque<(u32, u32)>,
    /// RC ACKs (syndrome ACK) travelling on this flow.
    pub acks: u64,
    /// NAKs travelling on this flow.
    pub naks: Naks,
    /// PSNs acknowledged by this flow's ACKs (the serial advance from one ACK to the next).
    pub acked_psns: u64,
    last_ack_psn: Option<u32>,
    /// READ requests sent on this flow.
    pub read_requests: u64,
    /// READ response packets travelling on this flow.
    pub read_responses: u64,
    /// From each READ request to its first response packet.
    pub read_latency: Latency,
    /// Atomic requests (CmpSwap, FetchAdd) sent on this flow.
    pub atomics: u64,
    /// ATOMIC ACKs travelling on this flow.
    pub atomic_acks: u64,
    /// From each atomic request to its ATOMIC ACK.
    pub atomic_latency: Latency,
    /// Frames with ECN CE (IP ECN bits 11).
    pub ecn_ce: u64,
    /// Frames whose ICRC is wrong.
    pub bad_icrc: u64,
    /// CNPs answering this flow's traffic (sent back to its source QP).
    pub cnps: u64,
    /// The QP this flow's packets come from, when the capture tells (see the module docs).
    pub src_qp: Option<u32>,
    /// Carries RC requests (a candidate for the ACKs coming back).
    rc_requester: bool,
    /// The PSN-over-time plot (bounded).
    pub points: Points<PsnPoint>,
    /// Payload bytes over time from the flow's first packet (bounded).
    pub throughput: Buckets,
    /// When the frames marked ECN CE passed (capture time; bounded).
    pub ce_times: Points<f64>,
    /// When the CNPs answering this flow passed (capture time; bounded): a CNP-only flow's own
    /// packets, carried over to the data flow they answer at the end.
    pub cnp_times: Points<f64>,
}

impl Flow {
    fn new(key: FlowKey, transport: Transport, psn: u32, t: f64, frame: u64) -> Flow {
        Flow {
            src: key.0,
            dst: key.1,
            dest_qp: key.2,
            transport,
            packets: 0,
            bytes: 0,
            unique_bytes: 0,
            first_psn: psn,
            last_psn: psn,
            first_time: t,
            last_time: t,
            first_frame: frame,
            messages: 0,
            partial_messages: 0,
            in_message: false,
            gaps: 0,
            missing: 0,
            out_of_order: 0,
            duplicates: 0,
            retransmissions: 0,
            holes_forgotten: 0,
            next_psn: None,
            first_request_psn: psn,
            prev_psn: None,
            read_span: false,
            holes: VecDeque::new(),
            acks: 0,
            naks: Naks::default(),
            acked_psns: 0,
            last_ack_psn: None,
            read_requests: 0,
            read_responses: 0,
            read_latency: Latency::default(),
            atomics: 0,
            atomic_acks: 0,
            atomic_latency: Latency::default(),
            ecn_ce: 0,
            bad_icrc: 0,
            cnps: 0,
            src_qp: None,
            rc_requester: false,
            points: Points::default(),
            throughput: Buckets::default(),
            ce_times: Points::default(),
            cnp_times: Points::default(),
        }
    }

    /// Seconds from the first packet to the last.
    pub fn duration(&self) -> f64 {
        self.last_time - self.first_time
    }

    /// Unique payload bits per second over the flow's duration (0 for a single instant).
    pub fn goodput_bps(&self) -> f64 {
        let d = self.duration();
        if d > 0.0 {
            self.unique_bytes as f64 * 8.0 / d
        } else {
            0.0
        }
    }

    /// PSNs acknowledged per ACK (ACK coalescing), 0 without ACKs.
    pub fn coalescing(&self) -> f64 {
        if self.acks == 0 {
            0.0
        } else {
            self.acked_psns as f64 / self.acks as f64
        }
    }

    /// The PSN verdict of a request packet, with its note.
    fn psn(&mut self, psn: u32, t: f64, note: &mut Note) -> PointKind {
        let prev = self.prev_psn.replace(psn);
        let Some(next) = self.next_psn else {
            self.first_request_psn = psn;
            self.next_psn = Some(psn.wrapping_add(1) & PSN_MASK);
            return PointKind::Send;
        };
        let ahead = serial(psn, next);
        if ahead == 0 {
            self.next_psn = Some(psn.wrapping_add(1) & PSN_MASK);
            return PointKind::Send;
        }
        if ahead > 0 {
            self.next_psn = Some(psn.wrapping_add(1) & PSN_MASK);
            if std::mem::take(&mut self.read_span) {
                return PointKind::Send;
            }
            self.gaps += 1;
            self.missing += ahead as u64;
            if self.holes.len() == MAX_HOLES {
                self.holes.pop_front();
                self.holes_forgotten += 1;
            }
            self.holes.push_back((next, psn));
            let _ = write!(note.text(), "PSN gap: {ahead} PSN(s) missing before {psn} (expected {next})");
            return PointKind::Send;
        }
        let _ = t;
        if prev == Some(psn) {
            self.duplicates += 1;
            let _ = write!(note.text(), "duplicate of PSN {psn}");
            return PointKind::Retransmission;
        }
        if let Some(i) = self.holes.iter().position(|&(a, b)| serial(psn, a) >= 0 && serial(psn, b) < 0) {
            let (a, b) = self.holes[i];
            // Split the hole around the PSN that arrived.
            let after = psn.wrapping_add(1) & PSN_MASK;
            match (a == psn, after == b) {
                (true, true) => {
                    self.holes.remove(i);
                }
                (true, false) => self.holes[i].0 = after,
                (false, true) => self.holes[i].1 = psn,
                (false, false) => {
                    self.holes[i].1 = psn;
                    if self.holes.len() == MAX_HOLES {
                        self.holes.pop_front();
                        self.holes_forgotten += 1;
                    }
                    self.holes.push_back((after, b));
                }
            }
            self.out_of_order += 1;
            let _ = write!(
                note.text(),
                "out of order: PSN {psn} after PSN {}",
                self.next_psn.unwrap_or(0).wrapping_sub(1) & PSN_MASK
            );
            return PointKind::OutOfOrder;
        }
        self.retransmissions += 1;
        let _ = write!(note.text(), "retransmission of PSN {psn}");
        PointKind::Retransmission
    }
}

/// PSNs are 24 bits.
pub const PSN_MASK: u32 = 0xff_ffff;

/// `a - b` in 24-bit serial arithmetic, in (-2^23, 2^23].
pub fn serial(a: u32, b: u32) -> i32 {
    let d = a.wrapping_sub(b) & PSN_MASK;
    if d > 0x80_0000 {
        d as i32 - 0x100_0000
    } else {
        d as i32
    }
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    flow: usize,
    t: f64,
    frame: u64,
}

/// Every flow, in order of first appearance, and what links them.
#[derive(Debug, Default)]
pub struct FlowTable {
    /// The flows.
    pub flows: Vec<Flow>,
    index: HashMap<FlowKey, usize>,
    /// Requests waiting for a response, by (requester, responder, PSN).
    pending: HashMap<(Endpoint, Endpoint, u32), Pending>,
    /// The last RC request flow from a source to a destination (to put ACKs on its plot).
    pair: HashMap<(Endpoint, Endpoint), usize>,
    /// CNP-only flows (CNPs never join an ACK or data flow of the same key).
    cnp_index: HashMap<FlowKey, usize>,
    /// Data flows by (source, destination, source QP): where a CNP to that QP belongs.
    by_src_qp: HashMap<FlowKey, usize>,
    /// Flows carrying RC requests, by (source, destination): the candidates for an ACK.
    rc_requesters: HashMap<(Endpoint, Endpoint), Vec<usize>>,
    /// Source QPs the CM told before the flow's first packet, by flow key (at most
    /// [`MAX_PENDING`]; beyond, counted in `pending_full`).
    cm_src_qps: HashMap<FlowKey, u32>,
    /// Requests not timed because [`MAX_PENDING`] were waiting.
    pub pending_full: u64,
    /// Source QPs from the CM not kept for a flow yet to come, because [`MAX_PENDING`] were.
    pub cm_src_qps_full: u64,
    /// Flows not created because `max_flows` were there (their frames counted here).
    pub flow_table_full: u64,
    /// The most flows kept.
    pub max_flows: usize,
}

impl FlowTable {
    /// A table of at most `max_flows` flows.
    pub fn new(max_flows: usize) -> FlowTable {
        FlowTable { max_flows, ..FlowTable::default() }
    }

    /// Account one RoCEv2 frame.
    pub fn frame(&mut self, fp: &Packet<'_>, t: f64, frame: u64, note: &mut Note) {
        let bth = fp.bth;
        let op = bth.opcode();
        let psn = bth.psn();
        let key = (fp.src, fp.dst, bth.dest_qp());
        let index = if op.transport() == Transport::Cnp { &mut self.cnp_index } else { &mut self.index };
        let i = match index.get(&key) {
            Some(&i) => i,
            None => {
                if self.flows.len() >= self.max_flows {
                    self.flow_table_full += 1;
                    return;
                }
                self.flows.push(Flow::new(key, op.transport(), psn, t, frame));
                index.insert(key, self.flows.len() - 1);
                let i = self.flows.len() - 1;
                if let Some(src_qp) = self.cm_src_qps.remove(&key) {
                    self.learn_src_qp(i, src_qp);
                }
                i
            }
        };
        let payload = fp.payload.len() as u64;
        let f = &mut self.flows[i];
        f.packets += 1;
        f.bytes += payload;
        f.last_psn = psn;
        f.last_time = t;
        f.throughput.add(t - f.first_time, payload);
        if !fp.icrc_ok {
            f.bad_icrc += 1;
            note.add("ICRC bad");
        }
        if fp.ecn_ce {
            f.ecn_ce += 1;
            f.ce_times.push(t);
            note.add("ECN CE");
        }
        if f.transport == Transport::Cnp {
            f.cnp_times.push(t);
        }
        use Opcode::*;
        // XRC is RC's requester and responder on the twin opcodes (0xA0 + RC's low bits):
        // from here on, the RC opcode.
        let op = op.rc_twin();
        match op {
            // READ responses (0x0d–0x10), ACK (0x11) and ATOMIC ACK (0x12): what a responder
            // sends back [IBA table 38].
            _ if matches!(u8::from(op), 0x0d..=0x12) => {
                f.unique_bytes += payload;
                self.response(i, fp, op, psn, t, note);
            }
            Cnp => {
                note.add("CNP");
            }
            _ => {
                let kind = f.psn(psn, t, note);
                if kind != PointKind::Retransmission {
                    f.unique_bytes += payload;
                }
                f.points.push(PsnPoint { t, psn, kind });
                if kind != PointKind::Retransmission {
                    message(f, op);
                }
                if matches!(op.transport(), Transport::Rc) {
                    self.pair.insert((key.0, key.1), i);
                    if !std::mem::replace(&mut f.rc_requester, true) {
                        self.rc_requesters.entry((key.0, key.1)).or_default().push(i);
                    }
                }
                let timed = match op {
                    RcRdmaReadRequest => {
                        f.read_requests += 1;
                        f.read_span = true;
                        true
                    }
                    RcCompareSwap | RcFetchAdd => {
                        f.atomics += 1;
                        true
                    }
                    _ => false,
                };
                if timed {
                    let pkey = (key.0, key.1, psn);
                    if self.pending.len() < MAX_PENDING || self.pending.contains_key(&pkey) {
                        // A re-sent request is timed from its last copy.
                        self.pending.insert(pkey, Pending { flow: i, t, frame });
                    } else {
                        self.pending_full += 1;
                    }
                }
                // The DETH (Q_Key, reserved byte, source QP) names where UD packets come from.
                if matches!(op, UdSendOnly | UdSendOnlyWithImmediate) && fp.ext.len() >= 8 {
                    let src_qp = u32::from_be_bytes([0, fp.ext[5], fp.ext[6], fp.ext[7]]);
                    self.learn_src_qp(i, src_qp);
                }
            }
        }
    }

    /// An ACK, ATOMIC ACK or READ response on flow `i`.
    fn response(&mut self, i: usize, fp: &Packet<'_>, op: Opcode, psn: u32, t: f64, note: &mut Note) {
        use Opcode::*;
        // The AETH comes first among the extension headers of every opcode here but MIDDLE.
        let syndrome = fp.ext.first().copied().filter(|_| op != RcRdmaReadResponseMiddle);
        let f = &mut self.flows[i];
        let mut kind = PointKind::Ack;
        match op {
            RcAcknowledge | RcAtomicAcknowledge => {
                let s = syndrome.unwrap_or(0);
                match (s >> 5) & 3 {
                    0 => {
                        f.acks += 1;
                        let adv = match f.last_ack_psn {
                            None => 1,
                            Some(last) => serial(psn, last).max(0) as u64,
                        };
                        f.acked_psns += adv;
                        f.last_ack_psn = Some(psn);
                    }
                    1 => {
                        kind = PointKind::Nak;
                        let code = s & 0x1f;
                        f.naks.rnr += 1;
                        f.naks.rnr_timers[usize::from(code)] += 1;
                        let _ = write!(note.text(), "RNR NAK for PSN {psn}, timer {code} ({} ms)", rnr_timer_ms(code));
                    }
                    3 => {
                        kind = PointKind::Nak;
                        let code = s & 0x1f;
                        let n = &mut f.naks;
                        match code {
                            0 => n.psn_sequence_error += 1,
                            1 => n.invalid_request += 1,
                            2 => n.remote_access_error += 1,
                            3 => n.remote_operational_error += 1,
                            4 => n.invalid_rd_request += 1,
                            _ => n.other += 1,
                        }
                        let _ = write!(note.text(), "NAK {}: PSN {psn}", nak_name(code));
                    }
                    _ => f.naks.other += 1,
                }
                if op == RcAtomicAcknowledge {
                    f.atomic_acks += 1;
                }
            }
            _ => f.read_responses += 1,
        }
        let (src, dst) = (f.src, f.dst);
        // The request this answers: READ's first response or the ATOMIC ACK carry its PSN.
        let answers = matches!(op, RcRdmaReadResponseFirst | RcRdmaReadResponseOnly | RcAtomicAcknowledge);
        let requester_qp = f.dest_qp;
        if op == RcAcknowledge {
            self.ack_names_requester(src, dst, requester_qp, psn);
        }
        if answers {
            if let Some(p) = self.pending.remove(&(dst, src, psn)) {
                // The response goes back to the requester's QP: the request flow's source.
                self.learn_src_qp(p.flow, requester_qp);
                let dt = t - p.t;
                let req = &mut self.flows[p.flow];
                if op == RcAtomicAcknowledge {
                    req.atomic_latency.add(dt);
                } else {
                    req.read_latency.add(dt);
                }
                let _ = write!(note.text(), "response to frame {} after {:.1} µs", p.frame, dt * 1e6);
            }
        }
        if let Some(&r) = self.pair.get(&(dst, src)) {
            self.flows[r].points.push(PsnPoint { t, psn, kind });
        }
    }

    /// Requests still waiting for a response at the end.
    pub fn unanswered(&self) -> usize {
        self.pending.len()
    }

    /// A CM REQ and its REP connected `(a, qa)` with `(b, qb)`: the flow from a to QP qb comes
    /// from QP qa, and the other way round (now, or when the flow's first packet comes).
    pub fn connected(&mut self, (a, qa, b, qb): super::cm::QpPair) {
        for (key, src_qp) in [((a, b, qb), qa), ((b, a, qa), qb)] {
            match self.index.get(&key) {
                Some(&i) => self.learn_src_qp(i, src_qp),
                None if self.cm_src_qps.len() < MAX_PENDING => {
                    self.cm_src_qps.insert(key, src_qp);
                }
                None => self.cm_src_qps_full += 1,
            }
        }
    }

    /// Flow `i`'s packets come from QP `src_qp`.
    fn learn_src_qp(&mut self, i: usize, src_qp: u32) {
        let f = &mut self.flows[i];
        if let Some(old) = f.src_qp.replace(src_qp) {
            if old == src_qp {
                return;
            }
            self.by_src_qp.remove(&(f.src, f.dst, old));
        }
        self.by_src_qp.insert((f.src, f.dst, src_qp), i);
    }

    /// An ACK or NAK from `responder` to `requester`'s QP `requester_qp` for `psn`: when
    /// exactly one RC request flow from `requester` to `responder` whose source is not known
    /// to be another QP has sent that PSN (between its first PSN and its next expected one),
    /// that flow comes from `requester_qp`.
    fn ack_names_requester(&mut self, responder: Endpoint, requester: Endpoint, requester_qp: u32, psn: u32) {
        if self.by_src_qp.contains_key(&(requester, responder, requester_qp)) {
            return;
        }
        let Some(flows) = self.rc_requesters.get(&(requester, responder)) else { return };
        let mut found = None;
        for &j in flows {
            let f = &self.flows[j];
            let sent = f.next_psn.is_some_and(|next| serial(psn, f.first_request_psn) >= 0 && serial(psn, next) <= 0);
            if sent && f.src_qp.is_none_or(|q| q == requester_qp) {
                if found.is_some() {
                    return; // ambiguous: say nothing
                }
                found = Some(j);
            }
        }
        if let Some(j) = found {
            self.learn_src_qp(j, requester_qp);
        }
    }

    /// At the end: each CNP-only flow whose data flow is now known (the flow from the CNP's
    /// destination to its source, coming from the QP the CNPs go to) is counted in that
    /// flow's `cnps` and removed; the others stay, transport CNP.
    pub fn finish(&mut self) {
        let mut gone = vec![false; self.flows.len()];
        for (&(src, dst, qp), &c) in &self.cnp_index {
            if let Some(&j) = self.by_src_qp.get(&(dst, src, qp)) {
                self.flows[j].cnps += self.flows[c].packets;
                let times = std::mem::take(&mut self.flows[c].cnp_times);
                for t in times.items {
                    self.flows[j].cnp_times.push(t);
                }
                gone[c] = true;
            }
        }
        if !gone.contains(&true) {
            return;
        }
        // Renumber what stays, in the same order.
        let mut new_index = vec![None; self.flows.len()];
        let mut n = 0;
        for (i, g) in gone.iter().enumerate() {
            if !g {
                new_index[i] = Some(n);
                n += 1;
            }
        }
        let mut i = 0;
        self.flows.retain(|_| {
            i += 1;
            !gone[i - 1]
        });
        let map = |i: &mut usize| match new_index[*i] {
            Some(n) => {
                *i = n;
                true
            }
            None => false,
        };
        self.index.retain(|_, i| map(i));
        self.cnp_index.retain(|_, i| map(i));
        self.by_src_qp.retain(|_, i| map(i));
        self.pair.retain(|_, i| map(i));
        self.pending.retain(|_, p| map(&mut p.flow));
        for v in self.rc_requesters.values_mut() {
            v.retain_mut(|i| map(i));
        }
    }
}

/// Message assembly: ONLY is one message; FIRST opens, LAST closes.
fn message(f: &mut Flow, op: Opcode) {
    use Opcode::*;
    match op {
        RcSendFirst | RcRdmaWriteFirst | UcSendFirst | UcRdmaWriteFirst => f.in_message = true,
        RcSendMiddle | RcRdmaWriteMiddle | UcSendMiddle | UcRdmaWriteMiddle => {
            if !f.in_message {
                f.partial_messages += 1;
            }
        }
        RcSendLast
        | RcSendLastWithImmediate
        | RcSendLastWithInvalidate
        | RcRdmaWriteLast
        | RcRdmaWriteLastWithImmediate
        | UcSendLast
        | UcSendLastWithImmediate
        | UcRdmaWriteLast
        | UcRdmaWriteLastWithImmediate => {
            if std::mem::take(&mut f.in_message) {
                f.messages += 1;
            } else {
                f.partial_messages += 1;
            }
        }
        _ => f.messages += 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdicts(psns: &[u32]) -> Flow {
        let k: FlowKey = (ep([1, 1, 1, 1]), ep([2, 2, 2, 2]), 5);
        let mut f = Flow::new(k, Transport::Rc, psns[0], 0.0, 1);
        let mut n = Note::default();
        for &p in psns {
            f.psn(p, 0.0, &mut n);
        }
        f
    }

    #[test]
    fn gaps_late_packets_duplicates_and_retransmissions() {
        // 3 is late, 5..6 lost, 4 repeated back to back, 2 sent again later.
        let f = verdicts(&[0, 1, 2, 4, 3, 7, 8, 8, 2]);
        assert_eq!((f.gaps, f.missing), (2, 3));
        assert_eq!(f.out_of_order, 1);
        assert_eq!(f.duplicates, 1);
        assert_eq!(f.retransmissions, 1);
    }

    #[test]
    fn psns_wrap() {
        let f = verdicts(&[0xff_fffe, 0xff_ffff, 0, 1]);
        assert_eq!((f.gaps, f.retransmissions, f.out_of_order), (0, 0, 0));
        assert_eq!(serial(0, 0xff_ffff), 1);
    }

    const A: [u8; 4] = [198, 18, 0, 1];
    const B: [u8; 4] = [198, 18, 0, 2];

    fn ep(ip: [u8; 4]) -> Endpoint {
        std::net::Ipv4Addr::from(ip).into()
    }

    /// Hand `table` one packet: `opcode` from `src` to `dst`'s QP `qp`, PSN `psn`, `ext` bytes.
    fn packet(table: &mut FlowTable, src: [u8; 4], dst: [u8; 4], opcode: u8, qp: u32, psn: u32, ext: &[u8]) {
        let mut b = [0u8; 12];
        b[0] = opcode;
        b[4..8].copy_from_slice(&qp.to_be_bytes());
        b[8..12].copy_from_slice(&psn.to_be_bytes());
        let p = Packet {
            src: ep(src),
            dst: ep(dst),
            bth: roce_wire::bth::Packet::new_unchecked(&b[..]),
            ext,
            payload: &[],
            icrc_ok: true,
            ecn_ce: false,
        };
        let n = table.flows.iter().map(|f| f.packets).sum::<u64>();
        table.frame(&p, 0.0, n + 1, &mut Note::default());
    }

    fn flow(table: &FlowTable, src: [u8; 4], qp: u32, transport: Transport) -> Option<&Flow> {
        table.flows.iter().find(|f| f.src == ep(src) && f.dest_qp == qp && f.transport == transport)
    }

    #[test]
    fn a_cnp_counts_on_the_ud_flow_its_deth_names() {
        let mut t = FlowTable::new(16);
        // UD SEND ONLY from A's QP 0x11 to B's QP 0x22: DETH = Q_Key, reserved, source QP.
        let deth = [0x11, 0x11, 0x11, 0x11, 0, 0, 0, 0x11];
        for psn in 0..3 {
            packet(&mut t, A, B, 0x64, 0x22, psn, &deth);
        }
        packet(&mut t, B, A, 0x81, 0x11, 0, &[]);
        packet(&mut t, B, A, 0x81, 0x11, 0, &[]);
        packet(&mut t, B, A, 0x81, 0x99, 0, &[]); // to a QP no flow comes from
        t.finish();
        let ud = flow(&t, A, 0x22, Transport::Ud).unwrap();
        assert_eq!((ud.cnps, ud.src_qp, ud.packets), (2, Some(0x11), 3));
        let orphan = flow(&t, B, 0x99, Transport::Cnp).expect("the CNP-only flow stays");
        assert_eq!((orphan.packets, orphan.cnps), (1, 0));
        assert_eq!(t.flows.len(), 2);
        assert!(flow(&t, B, 0x11, Transport::Cnp).is_none());
    }

    #[test]
    fn a_cnp_before_the_ack_that_names_the_rc_requester_is_counted_at_the_end() {
        let mut t = FlowTable::new(16);
        packet(&mut t, B, A, 0x81, 0x0a, 0, &[]); // B's CNP to A's QP 0x0a, first in the capture
                                                  // A's flow to B's QP starts with an ACK of B's own requests (B's PSN space).
        packet(&mut t, A, B, 0x11, 0x0b, 9_000, &[0x1f, 0, 0, 1]);
        for psn in 100..105 {
            packet(&mut t, A, B, 0x04, 0x0b, psn, &[]); // RC SEND ONLY to B's QP 0x0b
        }
        for psn in 7..9 {
            packet(&mut t, A, B, 0x04, 0x0c, psn, &[]); // another QP, other PSNs
        }
        packet(&mut t, B, A, 0x11, 0x0a, 104, &[0x1f, 0, 0, 1]); // ACK of PSN 104 to QP 0x0a
        packet(&mut t, B, A, 0x81, 0x0a, 0, &[]);
        t.finish();
        let req = flow(&t, A, 0x0b, Transport::Rc).unwrap();
        assert_eq!((req.cnps, req.src_qp), (2, Some(0x0a)));
        let ack = flow(&t, B, 0x0a, Transport::Rc).unwrap();
        assert_eq!((ack.packets, ack.acks, ack.cnps), (1, 1, 0), "a CNP never joins the ACK flow");
        assert_eq!((req.packets, req.acks), (6, 1));
        assert_eq!(t.flows.len(), 3);
        // Indices stay right after the CNP-only flow went: the ACK still finds its request flow.
        assert_eq!(t.index.len(), 3);
        for (k, &i) in &t.index {
            assert_eq!((t.flows[i].src, t.flows[i].dst, t.flows[i].dest_qp), *k);
        }
    }

    #[test]
    fn the_cm_names_both_sides_qps_before_and_after_their_first_packet() {
        let mut t = FlowTable::new(16);
        packet(&mut t, A, B, 0x04, 0x0b, 1, &[]); // A's flow to B's QP exists before the REP
        t.connected((ep(A), 0x0a, ep(B), 0x0b));
        packet(&mut t, B, A, 0x04, 0x0a, 50, &[]); // B's flow to A's QP comes after
        packet(&mut t, A, B, 0x81, 0x0b, 0, &[]); // A's CNP to B's QP: B's flow
        packet(&mut t, B, A, 0x81, 0x0a, 0, &[]); // B's CNP to A's QP: A's flow
        t.finish();
        let a_to_b = flow(&t, A, 0x0b, Transport::Rc).unwrap();
        let b_to_a = flow(&t, B, 0x0a, Transport::Rc).unwrap();
        assert_eq!((a_to_b.src_qp, a_to_b.cnps), (Some(0x0a), 1));
        assert_eq!((b_to_a.src_qp, b_to_a.cnps), (Some(0x0b), 1));
        assert_eq!((t.flows.len(), t.cm_src_qps.len(), t.cm_src_qps_full), (2, 0, 0));
    }

    #[test]
    fn an_ack_two_request_flows_could_answer_names_neither() {
        let mut t = FlowTable::new(16);
        for qp in [0x0b, 0x0c] {
            for psn in 0..4 {
                packet(&mut t, A, B, 0x04, qp, psn, &[]);
            }
        }
        packet(&mut t, B, A, 0x11, 0x0a, 3, &[0x1f, 0, 0, 1]);
        packet(&mut t, B, A, 0x81, 0x0a, 0, &[]);
        t.finish();
        assert!(t.flows.iter().all(|f| f.cnps == 0 && f.src_qp.is_none()));
        assert_eq!(flow(&t, B, 0x0a, Transport::Cnp).unwrap().packets, 1);
    }

    #[test]
    fn rnr_timer_codes() {
        assert_eq!(rnr_timer_ms(12), 0.64);
        assert_eq!(rnr_timer_ms(0), 655.36);
    }
}
