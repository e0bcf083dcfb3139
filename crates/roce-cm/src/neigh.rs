//! Userspace neighbour resolution: ARP for IPv4, neighbour discovery for IPv6, with Linux's
//! probe count and interval; frames wait for their MAC and are counted as dropped when
//! resolution fails. Also answers ARP/NS for our addresses.
//!
//! `Neighbors` owns the table; the stack lends it a `Ctx` to send probes and answers,
//! release parked packets and schedule address resolutions. Ids whose resolution failed
//! are handed back to the caller (the ids' owner reports them).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};

use roce_wire::arp::{self, ArpOperation, ArpRepr};
use roce_wire::l2::{self, ArpFrame, EmitFrame, NdiscFrame};
use roce_wire::ndisc::NdiscMessage;

use crate::config::StackConfig;
use crate::counters::DropReason;
use crate::ctx::{Ctx, FastHash, Outgoing, RocePacket, Work};
use crate::id::CmId;

/// A neighbour entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Neighbor {
    /// Probing: frames and resolve_addr calls wait.
    Incomplete { probes: u32, waiting: Vec<RocePacket>, resolvers: Vec<CmId> },
    /// Known.
    Reachable { mac: [u8; 6] },
}

pub(crate) fn emit_frame(f: &dyn EmitFrame) -> Vec<u8> {
    let mut out = vec![0u8; f.buffer_len()];
    let n = f.emit(&mut out);
    out.truncate(n);
    out
}

/// The multicast MAC of an IP multicast destination.
pub fn multicast_mac(ip: &IpAddr) -> Option<[u8; 6]> {
    match ip {
        IpAddr::V4(a) if a.is_multicast() => Some(l2::ipv4_multicast_mac(*a)),
        IpAddr::V6(a) if a.is_multicast() => Some(l2::ipv6_multicast_mac(*a)),
        _ => None,
    }
}

/// The neighbour table (the owner of ARP/ND state).
#[derive(Clone, Debug, Default)]
pub(crate) struct Neighbors {
    map: HashMap<IpAddr, Neighbor, FastHash>,
    /// The entry learned last, reachable at that MAC: every MAD from the peer we talk to
    /// (the SA) confirms it and every frame to it looks it up, and a compare is cheaper than
    /// hashing the address. Cleared when that address's entry is replaced or removed.
    last: Option<(IpAddr, [u8; 6])>,
}

impl Neighbors {
    /// The MAC for `ip` if known (multicast MACs are computed, our own addresses are ours).
    #[inline]
    pub(crate) fn mac(&self, cfg: &StackConfig, ip: &IpAddr) -> Option<[u8; 6]> {
        if let Some(m) = multicast_mac(ip) {
            return Some(m);
        }
        if cfg.is_local(ip) {
            return Some(cfg.mac);
        }
        if cfg.neighbors == crate::config::NeighborResolution::Kernel {
            return Some(crate::config::KERNEL_NEIGHBOR_MAC);
        }
        if let Some((a, m)) = self.last {
            if a == *ip {
                return Some(m);
            }
        }
        match self.map.get(ip) {
            Some(Neighbor::Reachable { mac }) => Some(*mac),
            _ => None,
        }
    }

    /// The reachable entries as (address, MAC) pairs, sorted.
    pub(crate) fn reachable(&self) -> Vec<(IpAddr, [u8; 6])> {
        let mut v: Vec<_> = self
            .map
            .iter()
            .filter_map(|(ip, n)| match n {
                Neighbor::Reachable { mac } => Some((*ip, *mac)),
                _ => None,
            })
            .collect();
        v.sort();
        v
    }

    /// Hold a packet until `p.dst` resolves, starting resolution if needed.
    pub(crate) fn park(&mut self, cx: &mut Ctx<'_>, p: RocePacket) {
        let ip = p.dst;
        if !cx.cfg.on_link(&ip) {
            cx.counters.drop(DropReason::NeighborUnresolved);
            return;
        }
        match self.map.get_mut(&ip) {
            Some(Neighbor::Incomplete { waiting, .. }) => waiting.push(p),
            _ => {
                self.forget_last(ip);
                self.map.insert(ip, Neighbor::Incomplete { probes: 0, waiting: vec![p], resolvers: Vec::new() });
                // No resolver waits on a fresh entry: nothing to hand back.
                let _ = self.probe(cx, ip);
            }
        }
    }

    /// Start resolving `ip` for `id`: `Ok(true)` if it is already known, `Ok(false)` while it
    /// resolves, `Err(ids)` when resolution failed at once (no probes configured).
    pub(crate) fn resolve(&mut self, cx: &mut Ctx<'_>, ip: IpAddr, id: CmId) -> Result<bool, Vec<CmId>> {
        if self.mac(cx.cfg, &ip).is_some() {
            return Ok(true);
        }
        match self.map.get_mut(&ip) {
            Some(Neighbor::Incomplete { resolvers, .. }) => resolvers.push(id),
            _ => {
                self.forget_last(ip);
                self.map.insert(ip, Neighbor::Incomplete { probes: 0, waiting: Vec::new(), resolvers: vec![id] });
                if let Some(failed) = self.probe(cx, ip) {
                    return Err(failed);
                }
            }
        }
        Ok(false)
    }

    /// Send the next probe, or fail the entry when the probes are used up: its waiting
    /// packets are counted as dropped and its resolvers returned.
    pub(crate) fn probe(&mut self, cx: &mut Ctx<'_>, ip: IpAddr) -> Option<Vec<CmId>> {
        let max = cx.cfg.neigh_timing.probes;
        let interval = cx.cfg.neigh_timing.interval;
        let Some(Neighbor::Incomplete { probes, .. }) = self.map.get_mut(&ip) else { return None };
        if *probes < max {
            *probes += 1;
            send_probe(cx, ip);
            cx.timers.schedule(cx.now + interval, Work::NeighborProbe(ip));
            return None;
        }
        self.forget_last(ip);
        if let Some(Neighbor::Incomplete { waiting, resolvers, .. }) = self.map.remove(&ip) {
            for _ in waiting {
                cx.counters.drop(DropReason::NeighborUnresolved);
            }
            return Some(resolvers);
        }
        None
    }

    /// `ip`'s entry is about to change: no longer the cached one.
    fn forget_last(&mut self, ip: IpAddr) {
        if self.last.is_some_and(|(a, _)| a == ip) {
            self.last = None;
        }
    }

    /// An id no longer waits for any resolution.
    pub(crate) fn forget_resolver(&mut self, id: CmId) {
        for n in self.map.values_mut() {
            if let Neighbor::Incomplete { resolvers, .. } = n {
                resolvers.retain(|x| *x != id);
            }
        }
    }

    /// Record `ip` at `mac` and release whatever waited for it.
    #[inline]
    pub(crate) fn learn(&mut self, cx: &mut Ctx<'_>, ip: IpAddr, mac: [u8; 6]) {
        // Every MAD from a known peer lands here: a compare, or a lookup, not a rewrite, when
        // nothing changed (`last` never holds one of ours or a multicast MAC).
        if self.last == Some((ip, mac)) {
            return;
        }
        if cx.cfg.is_local(&ip) || mac[0] & 1 != 0 {
            return;
        }
        if matches!(self.map.get(&ip), Some(Neighbor::Reachable { mac: m }) if *m == mac) {
            self.last = Some((ip, mac));
            return;
        }
        self.last = Some((ip, mac));
        let prev = self.map.insert(ip, Neighbor::Reachable { mac });
        if let Some(Neighbor::Incomplete { waiting, resolvers, .. }) = prev {
            cx.timers.cancel(&Work::NeighborProbe(ip));
            for p in waiting {
                cx.out.push(Outgoing::Roce(p));
            }
            for id in resolvers {
                cx.timers.schedule(cx.now, Work::AddrResolved(id));
            }
        }
    }

    /// An ARP frame.
    pub(crate) fn handle_arp(&mut self, cx: &mut Ctx<'_>, r: &ArpRepr) {
        let (op, sha, spa, _tha, tpa) = arp::fields(r);
        let ours = cx.cfg.ipv4.is_some_and(|(a, _)| a == tpa);
        if !ours {
            // Still refresh an entry we already have (gratuitous ARP, replies to others).
            if self.map.contains_key(&IpAddr::V4(spa)) {
                self.learn(cx, IpAddr::V4(spa), sha);
                cx.counters.rx_accepted += 1;
            } else {
                cx.counters.drop(DropReason::NeighborNotForUs);
            }
            return;
        }
        self.learn(cx, IpAddr::V4(spa), sha);
        if op == ArpOperation::Request {
            if let Some(rep) = arp::reply_to(r, cx.cfg.mac) {
                cx.out.push(Outgoing::Raw(emit_frame(&ArpFrame::new(rep)).into()));
            }
        }
        cx.counters.rx_accepted += 1;
    }

    /// A neighbour discovery message from `src` (Ethernet source `src_mac`) to `dst`.
    pub(crate) fn handle_ndisc(
        &mut self,
        cx: &mut Ctx<'_>,
        src_mac: [u8; 6],
        src: Ipv6Addr,
        dst: Ipv6Addr,
        msg: &NdiscMessage,
    ) {
        match msg {
            NdiscMessage::NeighborSolicit { target_addr, source_lladdr, .. } => {
                if !cx.cfg.is_local(&IpAddr::V6(*target_addr)) {
                    cx.counters.drop(DropReason::NeighborNotForUs);
                    return;
                }
                if let Some(mac) = source_lladdr {
                    self.learn(cx, IpAddr::V6(src), *mac);
                }
                let na = NdiscFrame::answer(cx.cfg.mac, *target_addr, src, src_mac, dst);
                cx.out.push(Outgoing::Raw(emit_frame(&na).into()));
                cx.counters.rx_accepted += 1;
            }
            NdiscMessage::NeighborAdvert { target_addr, target_lladdr, .. } => {
                let t = IpAddr::V6(*target_addr);
                if self.map.contains_key(&t) {
                    self.learn(cx, t, target_lladdr.unwrap_or(src_mac));
                    cx.counters.rx_accepted += 1;
                } else {
                    cx.counters.drop(DropReason::NeighborNotForUs);
                }
            }
        }
    }
}

fn send_probe(cx: &mut Ctx<'_>, ip: IpAddr) {
    let frame = match (ip, cx.cfg.source_for(&ip)) {
        (IpAddr::V4(t), Some(IpAddr::V4(s))) => emit_frame(&ArpFrame::new(arp::request(cx.cfg.mac, s, t))),
        (IpAddr::V6(t), Some(IpAddr::V6(s))) => emit_frame(&NdiscFrame::solicit(cx.cfg.mac, s, t)),
        _ => return,
    };
    cx.out.push(Outgoing::Raw(frame.into()));
}
