//! [`RmppSender`]: the SA's windowed RMPP sender (IBA 13.6.3, as the kernel's sender in
//! mad_rmpp.c runs it), for an SA that answers on the wire itself (`roce sa-server`, the
//! simulated link). Behind a kernel's umad (`roce sa-agent`) the kernel does this instead.
//!
//! A GetTableResp longer than one MAD becomes a transfer: segment 1 is sent alone (the
//! receiver's first window is one segment [mad_rmpp.c `create_rmpp_recv`: `newwin = 1`]);
//! each ACK (SegmentNumber, NewWindowLast) moves the last acknowledged segment and the window's
//! end, and the segments up to the window's end go out [`process_rmpp_ack`, `send_next_seg`].
//! When no ACK moves the transfer for [`RmppSendConfig::ack_timeout`], the segments after the
//! last ACK are sent again, [`RmppSendConfig::retries`] times [`ib_retry_rmpp`]; then the
//! transfer is abandoned with an ABORT of status TMR (too many retries, IBA 13.6.3.2). The ACK
//! of the last segment ends it.
//!
//! ACK checks, as the kernel's sender: RMPPStatus ≠ 0 → ABORT BadStatus; NewWindowLast <
//! SegmentNumber → ABORT W2S; SegmentNumber past the last segment or past the window → ABORT
//! S2B; an ACK older than the last one (a smaller SegmentNumber or window) is ignored. STOP and
//! ABORT end the transfer. Every MAD that reaches the sender is counted under one name
//! ([`RmppSendStats`]), and so is every transfer's end.
//!
//! Bounds (hostile load): at most [`RmppSendConfig::max_transfers`] transfers, and
//! [`RmppSendConfig::max_transfers_per_requester`] per requesting port; a table past either is
//! answered with ERR_NO_RESOURCES (0x0100) instead, counted `refused_busy`. A request repeated
//! while its table is being sent (the requester's retry, a duplicate on the link) is not
//! answered again, counted `repeated_requests`: starting over would meet the first run's late
//! ACKs past the new window (S2B). The requester is still waiting, though: the segments after
//! the last ACK go out again at once, as the ACK timer would send them.

use core::time::Duration;

use roce_wire::mad::{field, MadStatus, MAD_HEADER_LEN, METHOD_RESPONSE_BIT};
use roce_wire::rmpp::{status, RmppFlags, RmppRepr, RmppType};
use roce_wire::sa::{rmpp_stop_or_abort, SA_HEADER_OFFSET};
use roce_wire::MAD_SIZE;

use crate::reply::error_mad_bytes;
use crate::{Reply, Requester, SaResponder};

/// The sender's limits and timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmppSendConfig {
    /// How long a window waits for the ACK that moves it (default 500 ms). The kernel's
    /// sender waits 2 s, a placeholder "until we can find the packet lifetime"
    /// [`send_next_seg`]; a RoCE link's lifetime is far shorter, and 500 ms is the kernel SA
    /// client's own shortest retry interval (6.13+), so a window is resent before the
    /// requester's query budget (3 s for a join) runs out.
    pub ack_timeout: Duration,
    /// Resends of the unacknowledged segments before the transfer is abandoned (default 3).
    pub retries: u32,
    /// Transfers at once (default 256).
    pub max_transfers: usize,
    /// Transfers at once to one requesting port (GID and QP; default 8).
    pub max_transfers_per_requester: usize,
}

impl Default for RmppSendConfig {
    fn default() -> Self {
        RmppSendConfig {
            ack_timeout: Duration::from_millis(500),
            retries: 3,
            max_transfers: 256,
            max_transfers_per_requester: 8,
        }
    }
}

/// What the sender did, every MAD it was handed and every transfer's end under one name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RmppSendStats {
    /// Transfers started (multi-segment answers).
    pub transfers: u64,
    /// Transfers whose last segment was acknowledged.
    pub completed: u64,
    /// Requests repeated while their table is being sent (the requester's retry, or a
    /// duplicate on the link): not answered again; the window is sent again from the last ACK.
    pub repeated_requests: u64,
    /// Transfers abandoned after [`RmppSendConfig::retries`] resends (an ABORT TMR sent).
    pub timed_out: u64,
    /// Transfers the receiver stopped (STOP).
    pub stopped_by_peer: u64,
    /// Transfers the receiver aborted (ABORT).
    pub aborted_by_peer: u64,
    /// Transfers we aborted over a bad ACK (BadStatus, W2S, S2B).
    pub aborted_bad_ack: u64,
    /// Tables refused with ERR_NO_RESOURCES: too many transfers at once.
    pub refused_busy: u64,
    /// DATA segments sent, first sends.
    pub segments_sent: u64,
    /// DATA segments sent again after an ACK timeout.
    pub segments_resent: u64,
    /// ACKs that moved a transfer or its window.
    pub acks: u64,
    /// ACKs older than the last one (ignored, as the kernel does).
    pub acks_stale: u64,
    /// RMPP ACK/STOP/ABORT that match no transfer (a finished one, or none of ours).
    pub unmatched: u64,
}

#[derive(Debug)]
struct Transfer {
    to: Requester,
    tid: u64,
    segments: Vec<[u8; MAD_SIZE]>,
    /// The last segment acknowledged (0: none).
    last_ack: u32,
    /// The last segment the receiver's window admits (NewWindowLast).
    newwin: u32,
    /// The last segment sent since the last (re)start of the window.
    sent: u32,
    /// Whether the segments up to `sent` past `last_ack` are resends.
    resending: u32,
    retries_left: u32,
    deadline: Duration,
}

impl Transfer {
    fn count(&self) -> u32 {
        self.segments.len() as u32
    }

    /// Send the window again from the last ACK [`ib_retry_rmpp`].
    fn rewind(&mut self) {
        self.resending = self.resending.max(self.sent);
        self.sent = self.last_ack;
    }

    /// The last segment that may go out now.
    fn window_end(&self) -> u32 {
        self.newwin.min(self.count())
    }
}

/// The SA's windowed RMPP sender: see the module documentation.
#[derive(Debug, Default)]
pub struct RmppSender {
    config: RmppSendConfig,
    transfers: Vec<Transfer>,
    /// Control MADs (our ABORTs) waiting to go out.
    control: Vec<(Requester, [u8; MAD_SIZE])>,
    /// Where the round robin over transfers goes on.
    next: usize,
    stats: RmppSendStats,
}

impl RmppSender {
    /// A sender with these limits and timers.
    pub fn new(config: RmppSendConfig) -> RmppSender {
        RmppSender { config, ..RmppSender::default() }
    }

    /// The counters.
    pub fn stats(&self) -> &RmppSendStats {
        &self.stats
    }

    /// Transfers under way.
    pub fn active(&self) -> usize {
        self.transfers.len()
    }

    /// Hand over a MAD that reached the SA's agent from `from` at `now`: an RMPP ACK, STOP or
    /// ABORT is the sender's (consumed, counted); anything else goes to `sa`. A one-MAD answer
    /// is returned to send at once; a segmented one becomes a transfer whose segments come
    /// from [`RmppSender::poll_transmit`], and `Reply::None` is returned.
    pub fn handle_mad(&mut self, sa: &mut SaResponder, from: Requester, mad: &[u8], now: Duration) -> Reply {
        if self.take_control(from, mad, now) {
            return Reply::None;
        }
        if let Some(i) = self.repeat_of(from, mad) {
            // The requester is still waiting: what it lacks goes out now, not at the timer.
            self.stats.repeated_requests += 1;
            self.transfers[i].rewind();
            return Reply::None;
        }
        match sa.handle_mad(from, mad) {
            Reply::Many(segments) => {
                self.start(from, mad, segments, now);
                Reply::None
            }
            one_or_none => one_or_none,
        }
    }

    /// A request whose answer is a transfer under way (same requester, TID, method and
    /// attribute): the requester's retry, or the link's duplicate, of a table being sent.
    fn repeat_of(&self, from: Requester, mad: &[u8]) -> Option<usize> {
        let req = mad.first_chunk::<MAD_SIZE>()?;
        let tid = tid_of(req);
        self.transfers.iter().position(|t| {
            let seg = &t.segments[0];
            t.to == from
                && t.tid == tid
                && seg[field::METHOD] == req[field::METHOD] | METHOD_RESPONSE_BIT
                && seg[field::ATTRIBUTE_ID] == req[field::ATTRIBUTE_ID]
        })
    }

    /// Start a transfer of `segments` (a GetTableResp's RMPP DATA segments, in order) to
    /// `to`, answering `request`; or, when the sender is full, queue ERR_NO_RESOURCES instead.
    fn start(&mut self, to: Requester, request: &[u8], segments: Vec<[u8; MAD_SIZE]>, now: Duration) {
        let tid = tid_of(&segments[0]);
        let mine = self.transfers.iter().filter(|t| t.to == to).count();
        if self.transfers.len() >= self.config.max_transfers || mine >= self.config.max_transfers_per_requester {
            self.stats.refused_busy += 1;
            if let Some(req) = request.first_chunk::<MAD_SIZE>() {
                self.control.push((to, error_mad_bytes(req, MadStatus::NO_RESOURCES)));
            }
            return;
        }
        self.stats.transfers += 1;
        self.transfers.push(Transfer {
            to,
            tid,
            segments,
            last_ack: 0,
            newwin: 1,
            sent: 0,
            resending: 0,
            retries_left: self.config.retries,
            deadline: now + self.config.ack_timeout,
        });
    }

    /// An RMPP-active ACK, STOP or ABORT: the sender's to handle. Anything else: `false`.
    fn take_control(&mut self, from: Requester, mad: &[u8], now: Duration) -> bool {
        let Some(bytes) = mad.first_chunk::<MAD_SIZE>() else { return false };
        let Ok(r) = RmppRepr::parse_bytes(&bytes[MAD_HEADER_LEN..SA_HEADER_OFFSET]) else { return false };
        if !r.flags.contains(RmppFlags::ACTIVE)
            || !matches!(r.rmpp_type, RmppType::Ack | RmppType::Stop | RmppType::Abort)
        {
            return false;
        }
        let tid = tid_of(bytes);
        let Some(i) = self.transfers.iter().position(|t| t.to == from && t.tid == tid) else {
            self.stats.unmatched += 1;
            return true;
        };
        match r.rmpp_type {
            RmppType::Stop => {
                self.stats.stopped_by_peer += 1;
                self.transfers.swap_remove(i);
            }
            RmppType::Abort => {
                self.stats.aborted_by_peer += 1;
                self.transfers.swap_remove(i);
            }
            _ => self.ack(i, bytes, &r, now),
        }
        true
    }

    /// An ACK for transfer `i` [mad_rmpp.c `process_rmpp_ack`].
    fn ack(&mut self, i: usize, ack: &[u8; MAD_SIZE], r: &RmppRepr, now: Duration) {
        let (seg, newwin) = (r.data1, r.data2);
        let t = &mut self.transfers[i];
        let bad = if r.status != status::SUCCESS {
            Some(status::BAD_STATUS)
        } else if newwin < seg {
            Some(status::W2S)
        } else if seg > t.count() || seg > t.newwin {
            Some(status::S2B)
        } else {
            None
        };
        if let Some(st) = bad {
            self.stats.aborted_bad_ack += 1;
            let to = t.to;
            self.control.push((to, rmpp_stop_or_abort(ack, RmppType::Abort, st)));
            self.transfers.swap_remove(i);
            return;
        }
        if newwin < t.newwin || seg < t.last_ack {
            self.stats.acks_stale += 1;
            return;
        }
        self.stats.acks += 1;
        if seg > t.last_ack {
            t.last_ack = seg;
            t.retries_left = self.config.retries;
            t.deadline = now + self.config.ack_timeout;
        }
        t.newwin = newwin;
        // Segments up to the ACK were received: a resend of them is moot.
        t.sent = t.sent.max(t.last_ack);
        if t.last_ack == t.count() {
            self.stats.completed += 1;
            self.transfers.swap_remove(i);
        }
    }

    /// The next MAD to send and to whom: our ABORTs and refusals first, then the transfers'
    /// segments that their windows admit, one transfer after another.
    pub fn poll_transmit(&mut self, now: Duration) -> Option<(Requester, [u8; MAD_SIZE])> {
        if !self.control.is_empty() {
            return Some(self.control.remove(0));
        }
        let n = self.transfers.len();
        for k in 0..n {
            let i = (self.next + k) % n;
            let t = &mut self.transfers[i];
            if t.sent < t.window_end() {
                t.sent += 1;
                if t.sent <= t.resending {
                    self.stats.segments_resent += 1;
                } else {
                    self.stats.segments_sent += 1;
                }
                // The wait for an ACK starts with the window's last send.
                t.deadline = now + self.config.ack_timeout;
                self.next = i + 1;
                return Some((t.to, t.segments[t.sent as usize - 1]));
            }
        }
        None
    }

    /// When [`RmppSender::handle_timeout`] has something to do.
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.transfers.iter().map(|t| t.deadline).min()
    }

    /// Run the ACK timers at `now`: a window with no ACK is sent again from the last ACK, or
    /// its transfer abandoned with an ABORT TMR after the last retry [`ib_retry_rmpp`].
    pub fn handle_timeout(&mut self, now: Duration) {
        let mut i = 0;
        while i < self.transfers.len() {
            let t = &mut self.transfers[i];
            if t.deadline > now {
                i += 1;
                continue;
            }
            if t.retries_left == 0 {
                self.stats.timed_out += 1;
                let mut abort = rmpp_stop_or_abort(&t.segments[0], RmppType::Abort, status::TMR);
                // Made from our own DATA segment: the sender's ABORT keeps its response method.
                abort[field::METHOD] |= METHOD_RESPONSE_BIT;
                let to = t.to;
                self.control.push((to, abort));
                self.transfers.swap_remove(i);
                continue;
            }
            t.retries_left -= 1;
            t.rewind();
            t.deadline = now + self.config.ack_timeout;
            i += 1;
        }
    }
}

/// The TID of a MAD (bytes 8..16).
fn tid_of(mad: &[u8; MAD_SIZE]) -> u64 {
    let mut tid = [0u8; 8];
    tid.copy_from_slice(&mad[field::TRANSACTION_ID]);
    u64::from_be_bytes(tid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SaConfig;
    use roce_wire::mad::Method;
    use roce_wire::mcmember::{ComponentMask, JoinState, McMemberRecord};
    use roce_wire::sa::{attr, SaData, SaMad};
    use roce_wire::Gid;
    use std::vec::Vec;

    const T0: Duration = Duration::from_secs(100);
    const TID: u64 = 0x1234_5678_0000_0001;

    fn host(n: u32) -> Gid {
        Gid::from_ipv4([198, 18, (n >> 8) as u8 + 1, n as u8].into())
    }

    fn asker() -> Requester {
        Requester::new(Gid::from_ipv4([198, 18, 0, 2].into()), 1)
    }

    /// An SA holding `n` groups of one member each: a GetTable of them is ⌈56n / 200⌉ segments.
    fn sa_with_groups(n: u32) -> SaResponder {
        let mut sa = SaResponder::new(SaConfig::roce()).unwrap();
        for i in 0..n {
            let rec = McMemberRecord {
                mgid: Gid::from_ipv4([239, 7, (i >> 8) as u8, i as u8].into()),
                port_gid: host(i),
                q_key: 1,
                p_key: 0xFFFF,
                join_state: JoinState::FULL_MEMBER,
                ..McMemberRecord::default()
            };
            let m = SaMad::request(
                Method::Set,
                u64::from(i),
                attr::MC_MEMBER_RECORD,
                ComponentMask::KERNEL_JOIN.0,
                SaData::mc_member(rec),
            );
            let r = sa.handle_mad(Requester::new(host(i), 1), &m.to_bytes());
            assert_eq!(SaMad::parse(&r[0]).unwrap().header.status, MadStatus::SUCCESS);
        }
        sa
    }

    fn get_table(tid: u64) -> [u8; MAD_SIZE] {
        SaMad::request(Method::GetTable, tid, attr::MC_MEMBER_RECORD, 0, SaData::mc_member(McMemberRecord::default()))
            .to_bytes()
    }

    /// What the receiver sends back for a DATA segment of ours: an RMPP MAD of `kind`.
    fn control(kind: RmppType, st: u8, seg: u32, newwin: u32) -> [u8; MAD_SIZE] {
        let mut m = get_table(TID);
        RmppRepr {
            version: 1,
            rmpp_type: kind,
            resp_time: 0,
            flags: RmppFlags::ACTIVE,
            status: st,
            data1: seg,
            data2: newwin,
        }
        .emit_bytes(&mut m[MAD_HEADER_LEN..SA_HEADER_OFFSET]);
        m
    }

    fn ack(seg: u32, newwin: u32) -> [u8; MAD_SIZE] {
        control(RmppType::Ack, 0, seg, newwin)
    }

    /// Every MAD ready now: (segment number, RMPP type, status) of each.
    fn drain(s: &mut RmppSender, now: Duration) -> Vec<(u32, RmppType, u8)> {
        let mut out = Vec::new();
        while let Some((to, m)) = s.poll_transmit(now) {
            assert_eq!(to, asker());
            let r = RmppRepr::parse_bytes(&m[MAD_HEADER_LEN..SA_HEADER_OFFSET]).unwrap();
            out.push((r.data1, r.rmpp_type, r.status));
        }
        out
    }

    fn segs(v: &[(u32, RmppType, u8)]) -> Vec<u32> {
        v.iter().map(|x| x.0).collect()
    }

    /// A sender with a transfer of the 84 segments of 300 groups started at [`T0`].
    fn started() -> (RmppSender, SaResponder) {
        let mut sa = sa_with_groups(300);
        let mut s = RmppSender::new(RmppSendConfig::default());
        assert_eq!(s.handle_mad(&mut sa, asker(), &get_table(TID), T0), Reply::None);
        assert_eq!(s.active(), 1);
        (s, sa)
    }

    #[test]
    fn windows_follow_the_kernels_acks() {
        let (mut s, mut sa) = started();
        // The receiver's first window is the first segment alone.
        assert_eq!(segs(&drain(&mut s, T0)), [1]);
        // mad_rmpp.c with its default receive queue of 512: window_size 64.
        assert_eq!(s.handle_mad(&mut sa, asker(), &ack(1, 65), T0), Reply::None);
        assert_eq!(segs(&drain(&mut s, T0)), (2..=65).collect::<Vec<_>>());
        s.handle_mad(&mut sa, asker(), &ack(65, 129), T0);
        assert_eq!(segs(&drain(&mut s, T0)), (66..=84).collect::<Vec<_>>());
        assert_eq!(s.active(), 1, "the last segment is not acknowledged yet");
        s.handle_mad(&mut sa, asker(), &ack(84, 148), T0);
        let st = *s.stats();
        assert_eq!((s.active(), st.completed, st.segments_sent, st.segments_resent, st.acks), (0, 1, 84, 0, 3));
        assert_eq!(s.poll_timeout(), None);
    }

    #[test]
    fn a_window_with_no_ack_is_sent_again_then_aborted_tmr() {
        let (mut s, mut sa) = started();
        drain(&mut s, T0);
        s.handle_mad(&mut sa, asker(), &ack(1, 65), T0);
        drain(&mut s, T0);
        // Segment 10 was lost: the receiver holds 11..65 and sends no ACK.
        let t1 = s.poll_timeout().unwrap();
        assert_eq!(t1, T0 + RmppSendConfig::default().ack_timeout);
        s.handle_timeout(t1 - Duration::from_millis(1));
        assert!(drain(&mut s, t1).is_empty(), "not before the timer");
        s.handle_timeout(t1);
        assert_eq!(segs(&drain(&mut s, t1)), (2..=65).collect::<Vec<_>>());
        assert_eq!(s.stats().segments_resent, 64);
        // An ACK moves it on and gives the retries back.
        s.handle_mad(&mut sa, asker(), &ack(65, 129), t1);
        assert_eq!(segs(&drain(&mut s, t1)), (66..=84).collect::<Vec<_>>());
        for _ in 0..3 {
            let now = s.poll_timeout().unwrap();
            s.handle_timeout(now);
            assert_eq!(segs(&drain(&mut s, now)), (66..=84).collect::<Vec<_>>());
        }
        let now = s.poll_timeout().unwrap();
        s.handle_timeout(now);
        let out = drain(&mut s, now);
        assert_eq!(out, [(0, RmppType::Abort, status::TMR)]);
        let st = *s.stats();
        assert_eq!((s.active(), st.timed_out, st.completed), (0, 1, 0));
    }

    #[test]
    fn the_senders_abort_keeps_the_response_method() {
        let (mut s, _) = started();
        drain(&mut s, T0);
        for _ in 0..4 {
            let now = s.poll_timeout().unwrap();
            s.handle_timeout(now);
        }
        let (_, m) = s.poll_transmit(T0).unwrap();
        assert_eq!(m[field::METHOD], u8::from(Method::GetTable) | METHOD_RESPONSE_BIT);
        assert_eq!(tid_of(&m), TID);
    }

    #[test]
    fn bad_acks_abort_as_the_kernel_does() {
        for (a, want) in [
            (control(RmppType::Ack, 5, 1, 65), status::BAD_STATUS),
            (ack(5, 4), status::W2S),
            (ack(2, 65), status::S2B),   // past the window of one
            (ack(85, 200), status::S2B), // past the last segment
        ] {
            let (mut s, mut sa) = started();
            drain(&mut s, T0);
            s.handle_mad(&mut sa, asker(), &a, T0);
            let out = drain(&mut s, T0);
            assert_eq!(out, [(0, RmppType::Abort, want)], "{want}");
            let (_, m) = {
                let (mut s2, mut sa2) = started();
                drain(&mut s2, T0);
                s2.handle_mad(&mut sa2, asker(), &a, T0);
                s2.poll_transmit(T0).unwrap()
            };
            // An answer to the receiver's ACK: the response bit flipped back on.
            assert_eq!(m[field::METHOD], u8::from(Method::GetTable) | METHOD_RESPONSE_BIT);
            assert_eq!((s.active(), s.stats().aborted_bad_ack), (0, 1));
        }
    }

    #[test]
    fn stale_acks_are_ignored() {
        let (mut s, mut sa) = started();
        drain(&mut s, T0);
        s.handle_mad(&mut sa, asker(), &ack(1, 65), T0);
        drain(&mut s, T0);
        s.handle_mad(&mut sa, asker(), &ack(65, 129), T0);
        s.handle_mad(&mut sa, asker(), &ack(1, 65), T0);
        assert_eq!(s.stats().acks_stale, 1);
        assert_eq!(segs(&drain(&mut s, T0)), (66..=84).collect::<Vec<_>>());
    }

    #[test]
    fn stop_and_abort_end_the_transfer_and_strays_are_counted() {
        for (kind, st) in [(RmppType::Stop, status::RESX), (RmppType::Abort, status::T2L)] {
            let (mut s, mut sa) = started();
            drain(&mut s, T0);
            s.handle_mad(&mut sa, asker(), &control(kind, st, 0, 0), T0);
            assert_eq!(s.active(), 0);
            assert!(drain(&mut s, T0).is_empty());
            assert_eq!(s.stats().stopped_by_peer + s.stats().aborted_by_peer, 1);
            // Another ACK for it now matches nothing; nor does one from another port.
            s.handle_mad(&mut sa, asker(), &ack(1, 65), T0);
            s.handle_mad(&mut sa, Requester::new(host(1), 1), &ack(1, 65), T0);
            assert_eq!(s.stats().unmatched, 2);
            assert_eq!(sa.stats().dropped_rmpp, 0, "the responder never sees them");
        }
    }

    #[test]
    fn a_repeated_request_does_not_start_its_transfer_again() {
        let (mut s, mut sa) = started();
        drain(&mut s, T0);
        s.handle_mad(&mut sa, asker(), &ack(1, 65), T0);
        drain(&mut s, T0);
        let queries = sa.stats().queries;
        s.handle_mad(&mut sa, asker(), &get_table(TID), T0);
        assert_eq!((s.active(), s.stats().repeated_requests, sa.stats().queries), (1, 1, queries));
        // What the requester lacks goes out again at once: the window after the last ACK.
        assert_eq!(segs(&drain(&mut s, T0)), (2..=65).collect::<Vec<_>>());
        assert_eq!(s.stats().segments_resent, 64);
        // A late ACK of the window goes on as before.
        s.handle_mad(&mut sa, asker(), &ack(65, 129), T0);
        assert_eq!(segs(&drain(&mut s, T0)), (66..=84).collect::<Vec<_>>());
        // Another TID from the same port is a table of its own.
        s.handle_mad(&mut sa, asker(), &get_table(TID + 1), T0);
        assert_eq!(s.active(), 2);
    }

    #[test]
    fn transfers_past_the_caps_are_answered_no_resources() {
        let mut sa = sa_with_groups(10);
        let mut s =
            RmppSender::new(RmppSendConfig { max_transfers: 3, max_transfers_per_requester: 2, ..Default::default() });
        let other = Requester::new(host(77), 1);
        for tid in 1..=3u64 {
            s.handle_mad(&mut sa, asker(), &get_table(tid), T0);
        }
        assert_eq!((s.active(), s.stats().refused_busy), (2, 1));
        let refused: Vec<_> = core::iter::from_fn(|| s.poll_transmit(T0)).filter(|(_, m)| tid_of(m) == 3).collect();
        assert_eq!(refused.len(), 1);
        let resp = SaMad::parse(&refused[0].1).unwrap();
        assert_eq!(
            (resp.header.status, resp.header.method, resp.header.response),
            (MadStatus::NO_RESOURCES, Method::GetTable, true)
        );
        s.handle_mad(&mut sa, other, &get_table(4), T0);
        s.handle_mad(&mut sa, other, &get_table(5), T0);
        assert_eq!((s.active(), s.stats().refused_busy), (3, 2));
    }

    #[test]
    fn one_mad_answers_pass_straight_through() {
        let mut sa = sa_with_groups(2);
        let mut s = RmppSender::default();
        let r = s.handle_mad(&mut sa, asker(), &get_table(9), T0);
        assert_eq!(r.len(), 1);
        assert_eq!((s.active(), s.stats().transfers), (0, 0));
    }
}
