//! SA client transactions: unique TIDs (random upper half, counting lower half), the
//! kernel's retry timing, responses matched by TID and method [sa_query.c send_mad, recv_handler;
//! mad.c find_mad_agent, timeout_sends].

use std::collections::{BTreeMap, VecDeque};

use roce_wire::mad::Method;
use roce_wire::sa::SaMad;
use roce_wire::Gid;

use crate::config::SaTiming;
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
}

#[derive(Debug, Clone)]
pub(crate) struct Txn {
    pub mad: SaMad,
    pub owner: TxnOwner,
    next_send: Instant,
    deadline: Instant,
    sends: u32,
}

/// The outstanding transactions of one stack.
#[derive(Debug)]
pub(crate) struct SaClient {
    tid_hi: u32,
    tid_lo: u32,
    timing: SaTiming,
    txns: BTreeMap<u64, Txn>,
    outbox: VecDeque<u64>,
    /// Transmissions in all (first sends and retries), for tests and tools.
    pub sent: u64,
    /// Retransmissions.
    pub retransmissions: u64,
}

/// What a response matched.
pub(crate) struct Matched {
    pub owner: TxnOwner,
}

impl SaClient {
    pub fn new(seed: u64, timing: SaTiming) -> SaClient {
        // The upper half is random (and never 0, which some agents treat as "kernel").
        let hi = ((seed >> 32) as u32) | 1;
        SaClient {
            tid_hi: hi,
            tid_lo: seed as u32,
            timing,
            txns: BTreeMap::new(),
            outbox: VecDeque::new(),
            sent: 0,
            retransmissions: 0,
        }
    }

    fn next_tid(&mut self) -> u64 {
        loop {
            let tid = (u64::from(self.tid_hi) << 32) | u64::from(self.tid_lo);
            self.tid_lo = self.tid_lo.wrapping_add(1);
            if !self.txns.contains_key(&tid) {
                return tid;
            }
        }
    }

    /// Start a transaction; the MAD goes out on the next poll. Returns its TID.
    pub fn start(&mut self, now: Instant, mut mad: SaMad, owner: TxnOwner) -> u64 {
        let tid = self.next_tid();
        mad.header.transaction_id = tid;
        self.txns.insert(tid, Txn { mad, owner, next_send: now, deadline: now + self.timing.timeout, sends: 0 });
        self.outbox.push_back(tid);
        tid
    }

    /// The next MAD to put on the wire, if any.
    pub fn poll_outgoing(&mut self, now: Instant) -> Option<[u8; 256]> {
        while let Some(tid) = self.outbox.pop_front() {
            let interval = self.timing.retry_interval();
            let retries = self.timing.retries;
            let Some(t) = self.txns.get_mut(&tid) else { continue };
            if t.sends > retries {
                continue;
            }
            t.sends += 1;
            t.next_send = now + interval;
            self.sent += 1;
            if t.sends > 1 {
                self.retransmissions += 1;
            }
            return Some(t.mad.to_bytes());
        }
        None
    }

    /// When the next retransmission or deadline falls.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.outbox.is_empty() {
            return Some(Instant::ZERO);
        }
        self.txns
            .values()
            .map(|t| if t.sends <= self.timing.retries { t.next_send.min(t.deadline) } else { t.deadline })
            .min()
    }

    /// Queue due retransmissions; return the transactions whose deadline passed (removed).
    pub fn handle_timeout(&mut self, now: Instant) -> Vec<(u64, Txn)> {
        let mut expired = Vec::new();
        let mut resend = Vec::new();
        for (&tid, t) in &self.txns {
            if t.deadline <= now {
                expired.push(tid);
            } else if t.sends <= self.timing.retries && t.next_send <= now && !self.outbox.contains(&tid) {
                resend.push(tid);
            }
        }
        self.outbox.extend(resend);
        expired.into_iter().filter_map(|tid| self.txns.remove(&tid).map(|t| (tid, t))).collect()
    }

    /// Match a response by TID and method: Set and Get are answered by GetResp, Delete by
    /// DeleteResp, GetTable by GetTableResp. `None` if nothing matches (unsolicited).
    pub fn handle_response(&mut self, resp: &SaMad) -> Option<Matched> {
        let tid = resp.header.transaction_id;
        let t = self.txns.get(&tid)?;
        let expected = match t.mad.header.method {
            Method::Set | Method::Get => Method::Get,
            other => other,
        };
        if !resp.header.response
            || resp.header.method != expected
            || resp.header.attribute_id != t.mad.header.attribute_id
        {
            return None;
        }
        let t = self.txns.remove(&tid)?;
        self.outbox.retain(|&x| x != tid);
        Some(Matched { owner: t.owner })
    }

    /// Outstanding transactions.
    pub fn len(&self) -> usize {
        self.txns.len()
    }
}
