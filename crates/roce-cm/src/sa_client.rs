//! SA client transactions: unique TIDs (random upper half, counting lower half), the
//! kernel's retry timing, responses matched by TID and method [sa_query.c send_mad, recv_handler;
//! mad.c find_mad_agent, timeout_sends].

use core::time::Duration;
use std::cmp::Reverse;
use std::collections::hash_map::Entry;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use roce_wire::mad::{self, MadHeader, Method};
use roce_wire::mcmember::McMemberRecord;
use roce_wire::rmpp::{status, RmppFlags, RmppType, RMPP_VERSION};
use roce_wire::sa::{attr, SaMad, SA_DATA_OFFSET, SA_HEADER_LEN};
use roce_wire::{Gid, MAD_SIZE};

use crate::config::SaTiming;
use crate::counters::DropReason;
use crate::ctx::FastHash;
use crate::rmpp_recv::{self, Linger, Reassembly, RmppError, RmppStats, Step};
use crate::Instant;

/// Who started a transaction, so its outcome goes back to the right place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxnOwner {
    /// A join (Set) for the group with this MGID.
    Join(Gid),
    /// A leave (Delete) for the group with this MGID.
    Leave(Gid),
    /// An application query (Get/GetTable) with this handle.
    Query(u64),
    /// `rdma_resolve_ib_service` of this id (service.rs).
    Service(crate::CmId),
}

#[derive(Debug, Clone)]
pub(crate) struct Txn {
    /// The request as sent (its TID in place): encoded once, copied out on each send.
    mad: [u8; MAD_SIZE],
    /// The request's method and attribute, which its response must match.
    method: Method,
    attribute_id: u16,
    pub owner: TxnOwner,
    next_send: Instant,
    deadline: Instant,
    sends: u32,
    /// Waiting in the outbox for (re)transmission.
    queued: bool,
    /// The key of this transaction in the timer index.
    due: Instant,
    /// The RMPP reassembly of its answer, from the first DATA segment on (boxed: a join's
    /// transaction never has one).
    pub rmpp: Option<Box<Reassembly>>,
}

impl Txn {
    /// A slot's content before its first transaction.
    const VACANT: Txn = Txn {
        mad: [0; MAD_SIZE],
        method: Method::Get,
        attribute_id: 0,
        owner: TxnOwner::Query(0),
        next_send: Instant::ZERO,
        deadline: Instant::ZERO,
        sends: 0,
        queued: false,
        due: Instant::ZERO,
        rmpp: None,
    };

    /// Why the transaction ended at its deadline, when that was during a reassembly.
    pub fn rmpp_timeout(&self) -> Option<RmppError> {
        self.rmpp.as_ref().map(|r| RmppError::TimedOut { received: r.seg_num })
    }
}

/// Transactions by TID, in a slab: a transaction (its MAD is 256 bytes) is written once where
/// it stays, instead of being moved in and out of tree nodes; TIDs index the slots. A slot
/// outlives its transaction (only `by_tid` says which are live): the next transaction in it is
/// written over it field by field, its request MAD encoded in place.
#[derive(Clone, Debug, Default)]
struct Txns {
    slots: Vec<Txn>,
    free: Vec<u32>,
    by_tid: HashMap<u64, u32, FastHash>,
}

impl Txns {
    fn len(&self) -> usize {
        self.by_tid.len()
    }

    /// Reserve a slot for `tid` if it is not in use (`None` if it is): the TID is looked up
    /// and indexed in one probe. The caller writes every field of the returned slot.
    fn claim(&mut self, tid: u64) -> Option<usize> {
        let std::collections::hash_map::Entry::Vacant(v) = self.by_tid.entry(tid) else { return None };
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Txn::VACANT);
                (self.slots.len() - 1) as u32
            }
        };
        v.insert(i);
        Some(i as usize)
    }

    /// The slot of `tid`'s transaction.
    #[inline]
    fn index(&self, tid: &u64) -> Option<usize> {
        self.by_tid.get(tid).map(|&i| i as usize)
    }

    fn get(&self, tid: &u64) -> Option<&Txn> {
        self.index(tid).map(|i| &self.slots[i])
    }

    fn get_mut(&mut self, tid: &u64) -> Option<&mut Txn> {
        let i = self.index(tid)?;
        Some(&mut self.slots[i])
    }

    /// Remove a transaction and hand it out whole (a copy: the slot stays for the next).
    fn remove(&mut self, tid: &u64) -> Option<Txn> {
        let i = self.by_tid.remove(tid)?;
        let s = &mut self.slots[i as usize];
        let rmpp = s.rmpp.take();
        let t = Txn { rmpp, ..s.clone() };
        self.release(i);
        Some(t)
    }

    /// End the transaction in slot `i` (already out of `by_tid`), keeping what its end needs.
    #[inline]
    fn vacate(&mut self, i: usize) -> (TxnOwner, bool) {
        let s = &mut self.slots[i];
        s.rmpp = None;
        let out = (s.owner, s.queued);
        self.release(i as u32);
        out
    }

    #[inline]
    fn release(&mut self, i: u32) {
        self.free.push(i);
        // After a burst, give the memory back once every transaction has ended.
        if self.by_tid.is_empty() && self.slots.capacity() > 1024 {
            self.reset();
        }
    }

    #[cold]
    fn reset(&mut self) {
        *self = Txns::default();
    }
}

/// Drop the stale entries at the top of `timers` (so that its top, what `poll_timeout`
/// reports, is live), and every stale entry once they outnumber the live ones (amortised: at
/// most one stale entry is left per re-arm or end of a transaction).
fn settle(timers: &mut BinaryHeap<Reverse<(Instant, u64)>>, txns: &Txns) {
    let live = |&Reverse((due, tid)): &Reverse<(Instant, u64)>| txns.get(&tid).is_some_and(|t| t.due == due);
    if txns.len() == 0 {
        timers.clear();
        // After a burst (100,000 joins at once), give the memory back, as the transactions'
        // slab does; small heaps keep their capacity (no reallocation in steady state).
        if timers.capacity() > 4096 {
            timers.shrink_to(1024);
        }
        return;
    }
    while let Some(top) = timers.peek() {
        if live(top) {
            break;
        }
        timers.pop();
    }
    if timers.len() > 2 * txns.len() + 32 {
        timers.retain(live);
    }
}

/// The outstanding transactions of one stack.
#[derive(Clone, Debug)]
pub(crate) struct SaClient {
    tid_hi: u32,
    tid_lo: u32,
    timing: SaTiming,
    txns: Txns,
    outbox: VecDeque<u64>,
    /// (when the transaction next needs attention, TID): retransmission or deadline. A
    /// min-heap with lazy deletion: an entry is live while its transaction exists with that
    /// very `due`; see [`settle`]. (A tree set cost a rebalancing per send, answer and
    /// retry: a third of the client's work per transaction.)
    timers: BinaryHeap<Reverse<(Instant, u64)>>,
    /// Transmissions in all (first sends and retries), for tests and tools.
    pub sent: u64,
    /// Retransmissions.
    pub retransmissions: u64,
    /// RMPP control MADs (ACK, ABORT, STOP) waiting to go out, ahead of the requests.
    control: VecDeque<[u8; MAD_SIZE]>,
    /// The control MAD being handed out.
    control_out: [u8; MAD_SIZE],
    /// Completed reassemblies kept to re-ACK duplicates (oldest first).
    linger: Vec<Linger>,
    /// The RMPP receiver's counts.
    pub rmpp: RmppStats,
}

/// What a response did.
#[derive(Debug)]
pub(crate) enum Response {
    /// No outstanding transaction matches it.
    Unsolicited,
    /// One MAD answered the transaction (no RMPP, or a single DATA segment, ACKed).
    Single(TxnOwner),
    /// A DATA segment was taken; the transaction goes on.
    Segment,
    /// The MAD was dropped for this reason; the transaction (if any) goes on.
    Dropped(DropReason),
    /// The last segment: the whole message.
    Table(TxnOwner, Box<Reassembly>),
    /// RMPP ended the transaction without a table; the MAD itself counts as dropped with the
    /// reason, if any (a segment we aborted), or as accepted (the sender's ABORT or STOP).
    Failed(TxnOwner, RmppError, Option<DropReason>),
}

impl SaClient {
    pub fn new(seed: u64, timing: SaTiming) -> SaClient {
        // The upper half is random (and never 0, which some agents treat as "kernel").
        let hi = ((seed >> 32) as u32) | 1;
        SaClient {
            tid_hi: hi,
            tid_lo: seed as u32,
            timing,
            txns: Txns::default(),
            outbox: VecDeque::new(),
            timers: BinaryHeap::new(),
            sent: 0,
            retransmissions: 0,
            control: VecDeque::new(),
            control_out: [0; MAD_SIZE],
            linger: Vec::new(),
            rmpp: RmppStats::default(),
        }
    }

    /// Start a transaction; the MAD goes out on the next poll. Returns its TID.
    pub fn start(&mut self, now: Instant, mad: SaMad, owner: TxnOwner) -> u64 {
        let timeout = self.timing.timeout;
        self.start_with_timeout(now, mad, owner, timeout)
    }

    /// [`SaClient::start`] with its own budget instead of the configured one.
    pub fn start_with_timeout(&mut self, now: Instant, mad: SaMad, owner: TxnOwner, timeout: Duration) -> u64 {
        let (method, attribute_id) = (mad.header.method, mad.header.attribute_id);
        self.start_encoded(now, mad.to_bytes(), method, attribute_id, owner, timeout)
    }

    /// Start an MCMemberRecord Set or Delete (a join or a leave), its MAD written directly
    /// into the transaction's slot.
    pub fn start_mc_member(
        &mut self,
        now: Instant,
        method: Method,
        component_mask: u64,
        record: &McMemberRecord,
        owner: TxnOwner,
    ) -> u64 {
        let timeout = self.timing.timeout;
        let (tid, t) = self.claim(now, method, attr::MC_MEMBER_RECORD, owner, timeout);
        SaMad::mc_member_request_into(&mut t.mad, method, tid, component_mask, record);
        tid
    }

    /// Start a transaction for an encoded request (its TID is filled in).
    fn start_encoded(
        &mut self,
        now: Instant,
        mad: [u8; MAD_SIZE],
        method: Method,
        attribute_id: u16,
        owner: TxnOwner,
        timeout: Duration,
    ) -> u64 {
        let (tid, t) = self.claim(now, method, attribute_id, owner, timeout);
        t.mad = mad;
        t.mad[mad::field::TRANSACTION_ID].copy_from_slice(&tid.to_be_bytes());
        tid
    }

    /// Open a transaction under the next free TID, queued and timed; the caller writes its
    /// request MAD (with the TID) into the returned slot.
    #[inline]
    fn claim(
        &mut self,
        now: Instant,
        method: Method,
        attribute_id: u16,
        owner: TxnOwner,
        timeout: Duration,
    ) -> (u64, &mut Txn) {
        let deadline = now + timeout;
        // The next TID not in use, indexed in the same probe.
        let (tid, i) = loop {
            let tid = (u64::from(self.tid_hi) << 32) | u64::from(self.tid_lo);
            self.tid_lo = self.tid_lo.wrapping_add(1);
            if let Some(i) = self.txns.claim(tid) {
                break (tid, i);
            }
        };
        if !self.linger.is_empty() {
            // A TID in use again: duplicates of the old message are not re-ACKed any more.
            self.linger.retain(|l| l.tid != tid);
        }
        self.timers.push(Reverse((deadline, tid)));
        self.outbox.push_back(tid);
        let t = &mut self.txns.slots[i];
        t.method = method;
        t.attribute_id = attribute_id;
        t.owner = owner;
        t.next_send = now;
        t.deadline = deadline;
        t.sends = 0;
        t.queued = true;
        t.due = deadline;
        t.rmpp = None;
        (tid, t)
    }

    /// Re-index a transaction under its next due time (its old entry goes stale).
    fn rearm(timers: &mut BinaryHeap<Reverse<(Instant, u64)>>, tid: u64, t: &mut Txn, retries: u32) {
        let due = if t.sends <= retries { t.next_send.min(t.deadline) } else { t.deadline };
        if due != t.due {
            // The old entry is usually the top (a first send right after the start): moved
            // in place rather than left stale under a new one.
            if timers.peek() == Some(&Reverse((t.due, tid))) {
                if let Some(mut top) = timers.peek_mut() {
                    *top = Reverse((due, tid));
                }
            } else {
                timers.push(Reverse((due, tid)));
            }
            t.due = due;
        }
    }

    /// Whether a MAD waits for (re)transmission.
    pub fn has_outgoing(&self) -> bool {
        !self.outbox.is_empty() || !self.control.is_empty()
    }

    /// The next MAD to put on the wire, if any.
    pub fn poll_outgoing(&mut self, now: Instant) -> Option<[u8; 256]> {
        self.next_outgoing(now).copied()
    }

    /// The next MAD, written into `mad` (256 bytes: a transmit buffer at the payload's
    /// offset); false when there is none.
    pub fn poll_outgoing_into(&mut self, now: Instant, mad: &mut [u8]) -> bool {
        match self.next_outgoing(now) {
            Some(m) => {
                mad[..MAD_SIZE].copy_from_slice(m);
                true
            }
            None => false,
        }
    }

    fn next_outgoing(&mut self, now: Instant) -> Option<&[u8; MAD_SIZE]> {
        // Tested first: popping an empty queue still moved a MAD-sized `None` out.
        if !self.control.is_empty() {
            if let Some(m) = self.control.pop_front() {
                self.control_out = m;
                return Some(&self.control_out);
            }
        }
        while let Some(tid) = self.outbox.pop_front() {
            let interval = self.timing.retry_interval();
            let retries = self.timing.retries;
            let Some(i) = self.txns.index(&tid) else { continue };
            let t = &mut self.txns.slots[i];
            t.queued = false;
            if t.sends > retries {
                continue;
            }
            t.sends += 1;
            t.next_send = now + interval;
            Self::rearm(&mut self.timers, tid, t, retries);
            self.sent += 1;
            if t.sends > 1 {
                self.retransmissions += 1;
            }
            // The entry just re-armed is usually the top: live, so nothing stale is above it
            // (the probe of `settle` is skipped).
            let top = Reverse((t.due, tid));
            if self.timers.peek() != Some(&top) || self.timers.len() > 2 * self.txns.len() + 32 {
                settle(&mut self.timers, &self.txns);
            }
            return Some(&self.txns.slots[i].mad);
        }
        None
    }

    /// When the next retransmission or deadline falls.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.outbox.is_empty() || !self.control.is_empty() {
            return Some(Instant::ZERO);
        }
        self.timers.peek().map(|Reverse((t, _))| *t)
    }

    /// Queue due retransmissions; return the transactions whose deadline passed (removed).
    pub fn handle_timeout(&mut self, now: Instant) -> Vec<(u64, Txn)> {
        let mut expired = Vec::new();
        while let Some(&Reverse((due, tid))) = self.timers.peek() {
            if due > now {
                break;
            }
            self.timers.pop();
            let Some(t) = self.txns.get_mut(&tid) else { continue };
            if t.due != due {
                continue; // a stale entry: the transaction was re-armed since
            }
            if t.deadline <= now {
                if let Some(t) = self.txns.remove(&tid) {
                    if let Some(r) = &t.rmpp {
                        // The reassembly ran out of time: ABORT T2L [`recv_timeout_handler`].
                        let m = rmpp_recv::abort_mad(&r.first, RmppType::Abort, status::T2L);
                        if self.timing.rmpp_ack {
                            self.control.push_back(m);
                        }
                    }
                    expired.push((tid, t));
                }
                continue;
            }
            // A retransmission is due: queue it; it is re-armed when it goes out. Until then it
            // waits on its deadline only.
            t.due = t.deadline;
            self.timers.push(Reverse((t.deadline, tid)));
            if !t.queued {
                t.queued = true;
                self.outbox.push_back(tid);
            }
        }
        settle(&mut self.timers, &self.txns);
        expired
    }

    /// Match a response by TID and method (Set and Get are answered by GetResp, Delete by
    /// DeleteResp, GetTable by GetTableResp), then run its RMPP header through the receiver:
    /// `mad` is the whole MAD (at least 256 bytes).
    pub fn handle_response(&mut self, now: Instant, resp: &MadHeader, mad: &[u8]) -> Response {
        let tid = resp.transaction_id;
        // One probe finds the transaction and, for a one-MAD answer, takes it out.
        let Entry::Occupied(e) = self.txns.by_tid.entry(tid) else { return self.lingering(now, tid, mad) };
        let i = *e.get() as usize;
        let t = &self.txns.slots[i];
        let expected = match t.method {
            Method::Set | Method::Get => Method::Get,
            other => other,
        };
        if !resp.response || resp.method != expected || resp.attribute_id != t.attribute_id {
            return Response::Unsolicited;
        }
        let r = rmpp_recv::header(mad);
        // Not active: one MAD, as every join and leave is answered. Active without an RMPP
        // type or version (OpenSM's answers through ibsim's umad shim, which leaves RMPP to a
        // kernel that is not there; a kernel would ABORT it, UNV): read as the one MAD it is,
        // and counted — whether the table went on past it cannot be known (spec/opensm.md).
        if !r.is_active() || r.rmpp_type == RmppType::NotUsed {
            if r.is_active() {
                self.rmpp.unsegmented += 1;
            }
            e.remove();
            let (owner, queued) = self.txns.vacate(i);
            self.after_end(tid, queued);
            return Response::Single(owner);
        }
        if r.version != RMPP_VERSION {
            return self.abort(tid, mad, status::UNV, r.data1, 24);
        }
        match r.rmpp_type {
            RmppType::Data => {}
            // We only receive: an ACK here answers nothing of ours.
            RmppType::Ack => return Response::Dropped(DropReason::RmppUnexpectedAck),
            RmppType::Stop => return self.fail(tid, RmppError::PeerStopped { status: r.status }, None),
            RmppType::Abort => return self.fail(tid, RmppError::PeerAborted { status: r.status }, None),
            _ => return self.abort(tid, mad, status::BADT, r.data1, 25),
        }
        if let Some((st, at)) = rmpp_recv::check_data(&r) {
            return self.abort(tid, mad, st, r.data1, at);
        }
        let (window, ack_on) = (self.timing.rmpp_window.max(1), self.timing.rmpp_ack);
        let retries = self.timing.retries;
        let Some(t) = self.txns.get_mut(&tid) else { return Response::Unsolicited };
        let Some(re) = t.rmpp.as_mut() else {
            if r.data1 != 1 {
                // A later segment without its First: nothing to add it to [`continue_rmpp`].
                return Response::Dropped(DropReason::RmppNoFirst);
            }
            if r.flags.contains(RmppFlags::LAST) {
                // One segment: whole at once, ACKed (1, 1) as `complete_rmpp` does.
                if !(SA_HEADER_LEN as u32..=rmpp_recv::SEGMENT_PAYLOAD).contains(&r.data2) {
                    return self.abort(tid, mad, status::BAD_LEN, 1, 32);
                }
                self.rmpp.segments += 1;
                if ack_on {
                    let ack = rmpp_recv::ack_mad(&mad[..SA_DATA_OFFSET], 1, 1);
                    self.push_control(ack);
                    self.rmpp.acks += 1;
                }
                self.remember(now, tid, mad, 1, 1);
                return self.single(tid);
            }
            return match Reassembly::start(mad, &r, window) {
                Ok(mut re) => {
                    self.rmpp.segments += 1;
                    let ack = ack_on.then(|| re.ack());
                    t.rmpp = Some(re);
                    // The reassembly's own timer: the kernel's 40 s, or the transaction's
                    // budget if that ends first. The request's retransmissions go on as the
                    // kernel's do (its send is matched only once the message is whole).
                    t.deadline = t.deadline.min(now + rmpp_recv::REASSEMBLY_TIMEOUT);
                    Self::rearm(&mut self.timers, tid, t, retries);
                    if let Some(a) = ack {
                        self.push_control(a);
                        self.rmpp.acks += 1;
                    }
                    Response::Segment
                }
                Err((st, at)) => self.abort(tid, mad, st, 1, at),
            };
        };
        let before = re.seg_num;
        let step = re.segment(mad, &r, window);
        self.rmpp.segments += u64::from(re.seg_num - before);
        match step {
            Step::Held => Response::Segment,
            Step::Taken { ack } => {
                if ack && ack_on {
                    let a = re.ack();
                    self.control.push_back(a);
                    self.rmpp.acks += 1;
                }
                Response::Segment
            }
            Step::Complete => {
                if ack_on {
                    let a = re.ack();
                    self.control.push_back(a);
                    self.rmpp.acks += 1;
                }
                let (seg, win) = (re.seg_num, re.newwin);
                let Some(t) = self.txns.remove(&tid) else { return Response::Unsolicited };
                self.after_end(tid, t.queued);
                let Some(re) = t.rmpp else { return Response::Unsolicited };
                self.remember(now, tid, &re.first, seg, win);
                self.rmpp.tables += 1;
                Response::Table(t.owner, re)
            }
            Step::Duplicate { ack } => {
                if ack && ack_on {
                    let a = re.ack();
                    self.control.push_back(a);
                    self.rmpp.acks += 1;
                }
                Response::Dropped(DropReason::RmppDuplicate)
            }
            Step::BeyondWindow => Response::Dropped(DropReason::RmppBeyondWindow),
            Step::Abort(st, at) => self.abort(tid, mad, st, r.data1, at),
            Step::TooLarge => {
                let m = rmpp_recv::abort_mad(mad, RmppType::Stop, status::RESX);
                self.push_control(m);
                self.rmpp.aborts += 1;
                self.fail(tid, RmppError::TooLarge { segment: r.data1 }, Some(DropReason::RmppAborted))
            }
        }
    }

    /// A response for no outstanding transaction: a duplicate segment of a message completed
    /// lately is re-ACKed (the sender may have missed our last ACK), anything else unsolicited.
    fn lingering(&mut self, now: Instant, tid: u64, mad: &[u8]) -> Response {
        if self.linger.is_empty() {
            return Response::Unsolicited;
        }
        self.linger.retain(|l| l.until > now);
        let r = rmpp_recv::header(mad);
        let Some(l) = self.linger.iter().find(|l| l.tid == tid) else { return Response::Unsolicited };
        if !r.is_active() || r.rmpp_type != RmppType::Data {
            return Response::Unsolicited;
        }
        if self.timing.rmpp_ack {
            let a = rmpp_recv::ack_mad(&l.hdr, l.seg_num, l.newwin);
            self.push_control(a);
            self.rmpp.acks += 1;
        }
        Response::Dropped(DropReason::RmppDuplicate)
    }

    /// Keep a completed message's ACK state for [`rmpp_recv::LINGER`].
    fn remember(&mut self, now: Instant, tid: u64, mad: &[u8], seg_num: u32, newwin: u32) {
        self.linger.retain(|l| l.until > now && l.tid != tid);
        if self.linger.len() >= rmpp_recv::LINGER_MAX {
            self.linger.remove(0);
        }
        let mut hdr = [0u8; SA_DATA_OFFSET];
        hdr.copy_from_slice(&mad[..SA_DATA_OFFSET]);
        self.linger.push(Linger { tid, hdr, seg_num, newwin, until: now + rmpp_recv::LINGER });
    }

    /// Queue an RMPP control MAD, unless the receiver is mute (`SaTiming::rmpp_ack` false, a
    /// tests-only setting: no ACK, no ABORT, no STOP).
    fn push_control(&mut self, m: [u8; MAD_SIZE]) {
        if self.timing.rmpp_ack {
            self.control.push_back(m);
        }
    }

    /// ABORT the transfer with `st` and end the transaction with the typed error.
    fn abort(&mut self, tid: u64, mad: &[u8], st: u8, segment: u32, offset: usize) -> Response {
        let m = rmpp_recv::abort_mad(mad, RmppType::Abort, st);
        self.push_control(m);
        self.rmpp.aborts += 1;
        self.fail(tid, RmppError::Aborted { status: st, segment, offset }, Some(DropReason::RmppAborted))
    }

    fn fail(&mut self, tid: u64, e: RmppError, drop: Option<DropReason>) -> Response {
        match self.txns.remove(&tid) {
            Some(t) => {
                self.after_end(tid, t.queued);
                Response::Failed(t.owner, e, drop)
            }
            None => Response::Unsolicited,
        }
    }

    /// End a transaction answered by one MAD.
    fn single(&mut self, tid: u64) -> Response {
        let Some(i) = self.txns.by_tid.remove(&tid) else { return Response::Unsolicited };
        let (owner, queued) = self.txns.vacate(i as usize);
        self.after_end(tid, queued);
        Response::Single(owner)
    }

    fn after_end(&mut self, tid: u64, queued: bool) {
        if self.txns.len() == 0 && self.timers.capacity() <= 4096 {
            // What `settle` does with no transaction left, without the call.
            self.timers.clear();
        } else {
            settle(&mut self.timers, &self.txns);
        }
        if queued {
            self.outbox.retain(|&x| x != tid);
        }
    }

    /// The RMPP receiver's counts.
    pub fn rmpp_stats(&self) -> RmppStats {
        self.rmpp
    }

    /// Outstanding transactions.
    pub fn len(&self) -> usize {
        self.txns.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roce_wire::rmpp::RmppRepr;
    use roce_wire::sa::SaData;

    fn client(window: u32) -> SaClient {
        SaClient::new(7, SaTiming { rmpp_window: window, ..SaTiming::default() })
    }

    fn start(c: &mut SaClient, now: Instant) -> u64 {
        let req = SaMad::request(Method::GetTable, 0, attr::MC_MEMBER_RECORD, 0, SaData::mc_member(Default::default()));
        let tid = c.start(now, req, TxnOwner::Query(1));
        assert!(c.poll_outgoing(now).is_some(), "the request goes out");
        tid
    }

    /// A GetTableResp of `records` 56-byte records (record i filled with byte i + 1), cut into
    /// segments as roce-sa and the kernel cut them.
    fn segments(tid: u64, records: usize) -> Vec<[u8; MAD_SIZE]> {
        let data: Vec<u8> = (0..records).flat_map(|i| [i as u8 + 1; 56]).collect();
        let n = data.len().div_ceil(200).max(1);
        (0..n)
            .map(|s| {
                let req = SaMad::request(Method::GetTable, tid, attr::MC_MEMBER_RECORD, 0, SaData::zeroed());
                let mut m = req.response_to(Method::GetTable, mad::MadStatus::SUCCESS, SaData::zeroed());
                let (first, last) = (s == 0, s + 1 == n);
                let mut flags = RmppFlags::ACTIVE;
                if first {
                    flags |= RmppFlags::FIRST;
                }
                if last {
                    flags |= RmppFlags::LAST;
                }
                let pl = if last {
                    20 + data.len() - 200 * (n - 1)
                } else if first {
                    data.len() + 20 * n
                } else {
                    0
                };
                m.rmpp = RmppRepr {
                    version: 1,
                    rmpp_type: RmppType::Data,
                    resp_time: 0x1F,
                    flags,
                    status: 0,
                    data1: s as u32 + 1,
                    data2: pl as u32,
                };
                m.sa.attribute_offset = 7;
                let mut b = m.to_bytes();
                let chunk = &data[(s * 200).min(data.len())..((s + 1) * 200).min(data.len())];
                b[SA_DATA_OFFSET..SA_DATA_OFFSET + chunk.len()].copy_from_slice(chunk);
                b[SA_DATA_OFFSET + chunk.len()..].fill(0);
                b
            })
            .collect()
    }

    fn feed(c: &mut SaClient, now: Instant, m: &[u8; MAD_SIZE]) -> Response {
        let h = MadHeader::parse_bytes(m).unwrap();
        c.handle_response(now, &h, m)
    }

    /// The RMPP control MADs queued: (type, status, SegmentNumber, NewWindowLast).
    fn control(c: &mut SaClient, now: Instant) -> Vec<(RmppType, u8, u32, u32)> {
        let mut out = Vec::new();
        while !c.control.is_empty() {
            let m = c.poll_outgoing(now).unwrap();
            assert_eq!(m[3], 0x12, "the method's response bit cleared");
            let r = rmpp_recv::header(&m);
            out.push((r.rmpp_type, r.status, r.data1, r.data2));
        }
        out
    }

    const ACK: RmppType = RmppType::Ack;

    #[test]
    fn in_order_window_and_last_acks() {
        let now = Instant::ZERO;
        for (window, want) in [
            (64, vec![(ACK, 0, 1, 65), (ACK, 0, 4, 65)]),
            (1, vec![(ACK, 0, 1, 2), (ACK, 0, 2, 3), (ACK, 0, 3, 4), (ACK, 0, 4, 4)]),
        ] {
            let mut c = client(window);
            let tid = start(&mut c, now);
            let segs = segments(tid, 12); // 672 bytes: 4 segments
            assert_eq!(segs.len(), 4);
            let mut table = None;
            for s in &segs {
                match feed(&mut c, now, s) {
                    Response::Segment => {}
                    Response::Table(TxnOwner::Query(1), re) => table = Some(re),
                    other => panic!("{other:?}"),
                }
            }
            assert_eq!(control(&mut c, now), want, "window {window}");
            let re = table.expect("the whole table");
            assert_eq!(re.data.len(), 12 * 56);
            assert!(re.data.chunks(56).enumerate().all(|(i, r)| r.iter().all(|&b| b == i as u8 + 1)));
            assert_eq!((c.len(), c.rmpp.tables, c.rmpp.segments), (0, 1, 4));
            // a late duplicate of the Last: re-ACKed from the lingering state, not a table
            assert!(matches!(feed(&mut c, now, &segs[3]), Response::Dropped(DropReason::RmppDuplicate)));
            assert_eq!(control(&mut c, now), [want[want.len() - 1]]);
            // after the linger time: unsolicited
            let later = now + rmpp_recv::LINGER + Duration::from_millis(1);
            assert!(matches!(feed(&mut c, later, &segs[3]), Response::Unsolicited));
        }
    }

    #[test]
    fn single_segment_is_acked_and_answers_at_once() {
        let now = Instant::ZERO;
        let mut c = client(64);
        let tid = start(&mut c, now);
        let segs = segments(tid, 3);
        assert_eq!(segs.len(), 1);
        assert!(matches!(feed(&mut c, now, &segs[0]), Response::Single(TxnOwner::Query(1))));
        assert_eq!(control(&mut c, now), [(ACK, 0, 1, 1)]);
    }

    #[test]
    fn duplicate_old_beyond_window_and_missing_first() {
        let now = Instant::ZERO;
        let mut c = client(1);
        let tid = start(&mut c, now);
        let segs = segments(tid, 12);
        // a segment before its First: dropped, the transaction goes on
        assert!(matches!(feed(&mut c, now, &segs[1]), Response::Dropped(DropReason::RmppNoFirst)));
        assert!(matches!(feed(&mut c, now, &segs[0]), Response::Segment));
        // the First again: re-ACKed
        assert!(matches!(feed(&mut c, now, &segs[0]), Response::Dropped(DropReason::RmppDuplicate)));
        // 3 is past the window (1 + 1)
        assert!(matches!(feed(&mut c, now, &segs[2]), Response::Dropped(DropReason::RmppBeyondWindow)));
        assert_eq!(control(&mut c, now), [(ACK, 0, 1, 2), (ACK, 0, 1, 2)]);
        assert!(matches!(feed(&mut c, now, &segs[1]), Response::Segment));
        let mut c2 = client(64);
        let tid = start(&mut c2, now);
        let segs = segments(tid, 12);
        assert!(matches!(feed(&mut c2, now, &segs[0]), Response::Segment));
        // a gap within the window: held; the gap filled takes both; again (not ACKed yet): no ACK
        assert!(matches!(feed(&mut c2, now, &segs[2]), Response::Segment));
        assert_eq!(c2.rmpp.segments, 1);
        assert!(matches!(feed(&mut c2, now, &segs[1]), Response::Segment));
        assert_eq!(c2.rmpp.segments, 3);
        assert!(matches!(feed(&mut c2, now, &segs[1]), Response::Dropped(DropReason::RmppDuplicate)));
        assert!(matches!(feed(&mut c2, now, &segs[2]), Response::Dropped(DropReason::RmppDuplicate)));
        assert_eq!(control(&mut c2, now), [(ACK, 0, 1, 65)]);
        assert!(matches!(feed(&mut c2, now, &segs[3]), Response::Table(..)));
    }

    #[test]
    fn bad_segments_abort_with_their_status() {
        let now = Instant::ZERO;
        type Edit<'a> = &'a dyn Fn(&mut [u8; MAD_SIZE]);
        let cases: [(Edit, u8, usize); 5] = [
            // a First whose PayloadLength fits one segment but without Last
            (&|m| m[32..36].copy_from_slice(&220u32.to_be_bytes()), status::BAD_LEN, 32),
            // the First flag on segment 1 missing
            (&|m| m[26] &= !0x2, status::BAD_SEG, 28),
            (&|m| m[24] = 2, status::UNV, 24),
            (&|m| m[27] = 9, status::BAD_STATUS, 27),
            (&|m| m[25] = 7, status::BADT, 25),
        ];
        for (edit, st, at) in cases {
            let mut c = client(64);
            let tid = start(&mut c, now);
            let mut s = segments(tid, 12)[0];
            s[32..36].copy_from_slice(&(672u32 + 80).to_be_bytes());
            edit(&mut s);
            match feed(&mut c, now, &s) {
                Response::Failed(TxnOwner::Query(1), RmppError::Aborted { status, offset, .. }, Some(_)) => {
                    assert_eq!((status, offset), (st, at))
                }
                other => panic!("status {st}: {other:?}"),
            }
            assert_eq!(control(&mut c, now), [(RmppType::Abort, st, 0, 0)]);
            assert_eq!(c.len(), 0);
        }
        // Last before all the First announced
        let mut c = client(64);
        let tid = start(&mut c, now);
        let segs = segments(tid, 12);
        feed(&mut c, now, &segs[0]);
        let mut early = segs[1];
        early[26] |= 0x4;
        early[32..36].copy_from_slice(&220u32.to_be_bytes());
        assert!(matches!(
            feed(&mut c, now, &early),
            Response::Failed(_, RmppError::Aborted { status: status::BAD_LEN, segment: 2, .. }, _)
        ));
    }

    #[test]
    fn sender_abort_and_stop_reach_the_owner() {
        let now = Instant::ZERO;
        for (t, st) in [(RmppType::Abort, status::TMR), (RmppType::Stop, status::RESX)] {
            let mut c = client(64);
            let tid = start(&mut c, now);
            let segs = segments(tid, 12);
            feed(&mut c, now, &segs[0]);
            let mut m = segs[1];
            let mut r = rmpp_recv::header(&m);
            r.rmpp_type = t;
            r.status = st;
            r.emit_bytes(&mut m[24..]);
            let want = if t == RmppType::Abort {
                RmppError::PeerAborted { status: st }
            } else {
                RmppError::PeerStopped { status: st }
            };
            match feed(&mut c, now, &m) {
                Response::Failed(_, e, None) => assert_eq!(e, want),
                other => panic!("{other:?}"),
            }
            assert_eq!(c.len(), 0);
        }
    }

    #[test]
    fn reassembly_timeout_aborts_t2l() {
        let now = Instant::ZERO;
        let mut c = client(64);
        let tid = start(&mut c, now);
        let segs = segments(tid, 12);
        feed(&mut c, now, &segs[0]);
        feed(&mut c, now, &segs[1]);
        let _ = control(&mut c, now);
        // the request is still retransmitted (as the kernel's is) until the deadline
        let mut t = now;
        let mut expired = Vec::new();
        while expired.is_empty() {
            t = c.poll_timeout().unwrap().max(t);
            expired = c.handle_timeout(t);
            while c.outbox.front().is_some() {
                c.poll_outgoing(t);
            }
        }
        assert_eq!(t, now + SaTiming::default().timeout);
        assert_eq!(expired[0].1.rmpp_timeout(), Some(RmppError::TimedOut { received: 2 }));
        assert_eq!(control(&mut c, t), [(RmppType::Abort, status::T2L, 0, 0)]);
    }

    #[test]
    fn tid_reuse_after_completion() {
        let now = Instant::ZERO;
        let mut c = client(64);
        let tid = start(&mut c, now);
        for s in &segments(tid, 12) {
            feed(&mut c, now, s);
        }
        let _ = control(&mut c, now);
        assert_eq!(c.linger.len(), 1);
        // the same TID again (the counter wrapped): the old message's state is forgotten and
        // the new answer is reassembled from its own First
        c.tid_lo = c.tid_lo.wrapping_sub(1);
        let again = start(&mut c, now);
        assert_eq!(again, tid);
        assert!(c.linger.is_empty());
        let segs = segments(tid, 5);
        assert!(matches!(feed(&mut c, now, &segs[0]), Response::Segment));
        match feed(&mut c, now, &segs[1]) {
            Response::Table(_, re) => assert_eq!(re.data.len(), 5 * 56),
            other => panic!("{other:?}"),
        }
    }

    proptest::proptest! {
        /// Any order, loss, duplication or RMPP-header corruption of a table's segments, with any window:
        /// never a panic; a table delivered is the whole table; otherwise the transaction
        /// goes on, or ends in a typed RMPP error.
        #[test]
        fn any_segment_sequence(
            records in 0usize..40,
            window in proptest::prop_oneof![proptest::strategy::Just(u32::MAX), 1u32..5],
            picks in proptest::collection::vec((0usize..64, 0u8..8, 24usize..36, proptest::num::u8::ANY), 0..40),
        ) {
            let now = Instant::ZERO;
            let mut c = client(window);
            let tid = start(&mut c, now);
            let segs = segments(tid, records);
            let want: Vec<u8> = (0..records).flat_map(|i| [i as u8 + 1; 56]).collect();
            let mut corrupted = false;
            for (i, how, at, byte) in picks {
                let mut m = segs[i % segs.len()];
                if how == 0 {
                    // a byte of the RMPP header changed (a MAD has no check of its own: what
                    // a corrupted PayloadLength delivers is only required not to panic)
                    m[at] = byte;
                    corrupted = true;
                }
                match feed(&mut c, now, &m) {
                    Response::Table(_, re) => {
                        proptest::prop_assert!(corrupted || re.data == want);
                        break;
                    }
                    Response::Single(_) => {
                        proptest::prop_assert!(segs.len() == 1 || corrupted);
                        break;
                    }
                    Response::Failed(..) => break,
                    _ => {}
                }
                let _ = control(&mut c, now);
            }
        }
    }
}
