//! What every owner of the engine shares, and nothing else: the outbox (frames and events
//! going out), the timers (deferred work), the PRNG and the hasher. The owners (neighbours,
//! UD QPs, multicast, the SA client, CM, ids, rc/) import this module, never each other's
//! state and never `stack`; [`crate::stack::Stack`] lends them a [`Ctx`] for one call, as
//! quinn-proto's `Connection` lends its parts what they need.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;

use bytes::{Bytes, BytesMut};
use roce_wire::bth::{self, Opcode};
use roce_wire::ext::ExtHeaders;
use roce_wire::rng::SplitMix64;
use roce_wire::{GSI_QKEY, MAD_SIZE};

use crate::config::StackConfig;
use crate::counters::Counters;
use crate::event::CmEvent;
use crate::id::{CmId, MemberKey};
use crate::Instant;

/// The hasher of the engine's hash maps: foldhash, seeded per map at random (keys such as a
/// neighbour's address come from the network, so a fixed seed would invite collisions), and
/// several times cheaper than SipHash on the 16-byte MGIDs of the multicast path.
pub(crate) type FastHash = foldhash::fast::RandomState;

/// The engine's PRNG step: one step of roce-wire's SplitMix64 (the workspace's one PRNG),
/// used to derive the SA client's and rc/'s seeds from `StackConfig::seed`.
#[inline]
pub(crate) fn splitmix(x: u64) -> u64 {
    SplitMix64::step(x)
}

/// The stack's stream: roce-wire's SplitMix64 in its chained form (each output the next
/// seed), the sequence every recorded run of the engine was drawn from.
#[derive(Debug, Clone)]
pub(crate) struct Rng(SplitMix64);

impl Rng {
    /// The stream of `seed`.
    pub(crate) fn new(seed: u64) -> Rng {
        let mut g = SplitMix64::new(seed);
        g.next_chained();
        Rng(g)
    }

    /// The next value.
    #[inline]
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0.next_chained()
    }
}

/// Deferred work, the sans-IO form of the kernel's queued work items and timers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Work {
    /// Address resolution that needs no neighbour (loopback, multicast, already known).
    AddrResolved(CmId),
    /// RoCE route resolution (local, queued in the kernel).
    RouteResolved(CmId),
    /// An IGMP/MLD-only join completes (cma_iboe_join_multicast queues the event).
    LocalJoinDone(MemberKey),
    /// Repeat an unsolicited IGMP/MLD report (robustness variable 2).
    ReportRepeat { group: IpAddr, join: bool },
    /// A neighbour probe is due.
    NeighborProbe(IpAddr),
    /// A resolve_addr deadline.
    ResolveDeadline(CmId),
    /// CM retransmission or TIMEWAIT for a connection (by local comm id).
    CmTimer(u32),
}

/// The work items by due time, indexed so that cancelling one is O(log n).
#[derive(Clone, Debug, Default)]
pub(crate) struct Timers {
    work: BTreeMap<(Instant, u64), Work>,
    /// Where each work item sits in `work`.
    index: HashMap<Work, Vec<(Instant, u64)>, FastHash>,
    seq: u64,
}

impl Timers {
    /// Run `w` at `at`.
    #[inline]
    pub(crate) fn schedule(&mut self, at: Instant, w: Work) {
        self.seq += 1;
        let key = (at, self.seq);
        self.index.entry(w.clone()).or_default().push(key);
        self.work.insert(key, w);
    }

    fn unindex(&mut self, key: (Instant, u64), w: &Work) {
        if let Some(v) = self.index.get_mut(w) {
            v.retain(|k| *k != key);
            if v.is_empty() {
                self.index.remove(w);
            }
        }
    }

    /// Cancel every scheduled instance of exactly this work item.
    #[inline]
    pub(crate) fn cancel(&mut self, w: &Work) {
        if let Some(keys) = self.index.remove(w) {
            for k in keys {
                self.work.remove(&k);
            }
        }
    }

    /// Cancel every work item matching `pred` (a scan: prefer [`Timers::cancel`]).
    pub(crate) fn unschedule(&mut self, pred: impl Fn(&Work) -> bool) {
        let doomed: Vec<Work> = self.index.keys().filter(|w| pred(w)).cloned().collect();
        for w in doomed {
            self.cancel(&w);
        }
    }

    /// The earliest due time.
    #[inline]
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.work.keys().next().map(|(t, _)| *t)
    }

    /// The next item due at or before `now`, taken out.
    #[inline]
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<Work> {
        let (&(at, seq), _) = self.work.iter().next()?;
        if at > now {
            return None;
        }
        let w = self.work.remove(&(at, seq))?;
        self.unindex((at, seq), &w);
        Some(w)
    }

    /// Number of pending items.
    pub(crate) fn len(&self) -> usize {
        self.work.len()
    }
}

/// A frame waiting for transmission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outgoing {
    /// A complete Ethernet frame (ARP, ND, IGMP, MLD).
    Raw(Bytes),
    /// A RoCEv2 packet still to be framed (its MAC may need resolving).
    Roce(RocePacket),
    /// A MAD from QP1 still to be framed (its MAC may need resolving).
    Mad(MadPacket),
}

/// A RoCEv2 packet before framing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RocePacket {
    pub dst: IpAddr,
    pub dst_mac: Option<[u8; 6]>,
    pub src_qp: u32,
    pub bth: bth::Repr,
    pub ext: ExtHeaders,
    /// Shared, not copied, on its way to the transmit buffer (see [`Outbox::tx_bytes`]).
    pub payload: Bytes,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// The extension headers of every MAD QP1 sends: a DETH with the GSI Q_Key, from QP 1.
pub(crate) static GSI_EXT: ExtHeaders = ExtHeaders::deth(GSI_QKEY, 1);

/// The hop limit (TTL) of the MADs QP1 sends.
pub(crate) const GSI_HOP_LIMIT: u8 = 64;

/// The BTH of a UD SEND_ONLY on QP1.
#[inline]
pub(crate) fn gsi_bth(pkey: u16, dst_qp: u32, psn: u32) -> bth::Repr {
    let mut b = bth::Repr::new(Opcode::UdSendOnly, dst_qp, psn);
    b.pkey = pkey;
    b.ack_req = true; // rxe sets AckReq on GSI (QP1 is type GSI, not UD)
    b
}

/// A MAD to be sent from QP1, as queued: the few fields its headers are made of (a
/// [`RocePacket`] carries every extension header a packet may have and is several times the
/// size: queued, moved and framed for every answer an agent sends). Its 256 bytes wait in
/// [`Outbox::mads`], in the same order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MadPacket {
    pub dst: IpAddr,
    pub dst_qp: u32,
    pub psn: u32,
    pub pkey: u16,
}

impl MadPacket {
    /// The BTH it goes out with.
    #[inline]
    pub(crate) fn bth(&self) -> bth::Repr {
        gsi_bth(self.pkey, self.dst_qp, self.psn)
    }

    /// The general packet form with its MAD (to wait for the destination's MAC).
    pub(crate) fn into_roce(self, payload: Bytes) -> RocePacket {
        RocePacket {
            dst: self.dst,
            dst_mac: None,
            src_qp: 1,
            bth: self.bth(),
            ext: GSI_EXT,
            payload,
            hop_limit: GSI_HOP_LIMIT,
            traffic_class: 0,
        }
    }
}

/// The transmit arena's size: 64 MADs. Frames queued from it share it; once they are gone,
/// the next payload reuses it from the start.
const TX_ARENA: usize = 64 * MAD_SIZE;

/// Frames and events on their way out.
#[derive(Clone, Debug, Default)]
pub(crate) struct Outbox {
    pub(crate) events: VecDeque<CmEvent>,
    pub(crate) tx: VecDeque<Outgoing>,
    /// The buffer queued payloads are cut from ([`Outbox::tx_bytes`]).
    arena: BytesMut,
    /// The MADs of the queued [`Outgoing::Mad`]s, in queue order (a ring of fixed-size
    /// slots: no arena cut and no reference count per MAD).
    pub(crate) mads: VecDeque<[u8; MAD_SIZE]>,
}

impl Outbox {
    /// Queue an event for the application.
    #[inline]
    pub(crate) fn push_event(&mut self, ev: CmEvent) {
        self.events.push_back(ev);
    }

    /// Queue a frame.
    #[inline]
    pub(crate) fn push(&mut self, o: Outgoing) {
        self.tx.push_back(o);
    }

    /// Queue a MAD from QP1: its headers' fields in the frame queue, its bytes beside them.
    #[inline]
    pub(crate) fn push_mad(&mut self, m: MadPacket, mad: &[u8; MAD_SIZE]) {
        self.mads.push_back(*mad);
        self.tx.push_back(Outgoing::Mad(m));
    }

    /// A payload to queue, cut from the transmit arena: once every frame cut from the arena
    /// has been sent (their `Bytes` dropped), `reserve` takes the same allocation back, so
    /// the steady state allocates nothing per frame.
    #[inline]
    pub(crate) fn tx_bytes(&mut self, data: &[u8]) -> Bytes {
        if self.arena.capacity() < data.len() {
            self.arena.reserve(TX_ARENA.max(data.len()));
        }
        self.arena.extend_from_slice(data);
        self.arena.split().freeze()
    }
}

/// What an owner is lent for one call: the configuration, the time, the counters, the
/// outbox and the timers. Built by `Stack` from disjoint fields (see `ctx!` in stack.rs), so
/// an owner never holds the stack.
pub(crate) struct Ctx<'a> {
    pub cfg: &'a StackConfig,
    pub now: Instant,
    pub counters: &'a mut Counters,
    pub out: &'a mut Outbox,
    pub timers: &'a mut Timers,
}
