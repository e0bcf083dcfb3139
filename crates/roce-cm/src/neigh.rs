//! Userspace neighbour resolution: ARP for IPv4, neighbour discovery for IPv6, with Linux's
//! probe count and interval; frames wait for their MAC and are counted as dropped when
//! resolution fails. Also answers ARP/NS for our addresses and handles IGMP/MLD queries.

use std::net::IpAddr;

use roce_wire::arp::{self, ArpOperation};
use roce_wire::igmp::IgmpMessage;
use roce_wire::l2::{self, ArpFrame, EmitFrame, L2Packet, NdiscFrame};
use roce_wire::mld::MldMessage;
use roce_wire::ndisc::NdiscMessage;

use crate::counters::DropReason;
use crate::id::CmId;
use crate::stack::{Outgoing, RocePacket, Stack, Work};
use crate::{Errno, Instant};

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

impl Stack {
    /// The MAC for `ip` if known (multicast MACs are computed).
    pub(crate) fn neighbor_mac(&self, ip: &IpAddr) -> Option<[u8; 6]> {
        if let Some(m) = multicast_mac(ip) {
            return Some(m);
        }
        if self.is_local(ip) {
            return Some(self.cfg.mac);
        }
        match self.neighbors.get(ip) {
            Some(Neighbor::Reachable { mac }) => Some(*mac),
            _ => None,
        }
    }

    /// The neighbour table as (address, MAC) pairs of reachable entries.
    pub fn neighbors(&self) -> Vec<(IpAddr, [u8; 6])> {
        let mut v: Vec<_> = self
            .neighbors
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
    pub(crate) fn park_for_neighbor(&mut self, now: Instant, p: RocePacket) {
        let ip = p.dst;
        if !self.on_link(&ip) {
            self.counters.drop(DropReason::NeighborUnresolved);
            return;
        }
        match self.neighbors.get_mut(&ip) {
            Some(Neighbor::Incomplete { waiting, .. }) => waiting.push(p),
            _ => {
                self.neighbors.insert(ip, Neighbor::Incomplete { probes: 0, waiting: vec![p], resolvers: Vec::new() });
                self.neighbor_probe(now, ip);
            }
        }
    }

    /// Start resolving `ip` for `id`; true if it is already known.
    pub(crate) fn resolve_neighbor(&mut self, now: Instant, ip: IpAddr, id: CmId) -> bool {
        if self.neighbor_mac(&ip).is_some() {
            return true;
        }
        match self.neighbors.get_mut(&ip) {
            Some(Neighbor::Incomplete { resolvers, .. }) => resolvers.push(id),
            _ => {
                self.neighbors.insert(ip, Neighbor::Incomplete { probes: 0, waiting: Vec::new(), resolvers: vec![id] });
                self.neighbor_probe(now, ip);
            }
        }
        false
    }

    /// Send the next probe, or fail the entry when the probes are used up.
    pub(crate) fn neighbor_probe(&mut self, now: Instant, ip: IpAddr) {
        let max = self.cfg.neigh_timing.probes;
        let interval = self.cfg.neigh_timing.interval;
        let Some(Neighbor::Incomplete { probes, .. }) = self.neighbors.get_mut(&ip) else { return };
        if *probes < max {
            *probes += 1;
            self.send_probe(ip);
            self.schedule(now + interval, Work::NeighborProbe(ip));
            return;
        }
        if let Some(Neighbor::Incomplete { waiting, resolvers, .. }) = self.neighbors.remove(&ip) {
            for _ in waiting {
                self.counters.drop(DropReason::NeighborUnresolved);
            }
            for id in resolvers {
                self.addr_error(id, Errno::ETIMEDOUT);
            }
        }
    }

    fn send_probe(&mut self, ip: IpAddr) {
        let frame = match (ip, self.source_for(&ip)) {
            (IpAddr::V4(t), Some(IpAddr::V4(s))) => emit_frame(&ArpFrame::new(arp::request(self.cfg.mac, s, t))),
            (IpAddr::V6(t), Some(IpAddr::V6(s))) => emit_frame(&NdiscFrame::solicit(self.cfg.mac, s, t)),
            _ => return,
        };
        self.tx.push_back(Outgoing::Raw(frame.into()));
    }

    /// Record `ip` at `mac` and release whatever waited for it.
    pub(crate) fn learn_neighbor(&mut self, ip: IpAddr, mac: [u8; 6]) {
        if self.is_local(&ip) || mac[0] & 1 != 0 {
            return;
        }
        // Every MAD from a known peer lands here: a lookup, not a rewrite, when nothing changed.
        if matches!(self.neighbors.get(&ip), Some(Neighbor::Reachable { mac: m }) if *m == mac) {
            return;
        }
        let prev = self.neighbors.insert(ip, Neighbor::Reachable { mac });
        if let Some(Neighbor::Incomplete { waiting, resolvers, .. }) = prev {
            self.cancel(&Work::NeighborProbe(ip));
            for p in waiting {
                self.tx.push_back(Outgoing::Roce(p));
            }
            let now = self.now;
            for id in resolvers {
                self.schedule(now, Work::AddrResolved(id));
            }
        }
    }

    /// ARP, ND, IGMP and MLD frames.
    pub(crate) fn handle_l2(&mut self, _now: Instant, bytes: &[u8]) {
        let f = match l2::parse_frame(bytes) {
            Ok(f) => f,
            Err(e) => {
                self.counters.drop(DropReason::Malformed(e.layer()));
                return;
            }
        };
        match &f.packet {
            L2Packet::Arp(r) => {
                let (op, sha, spa, _tha, tpa) = arp::fields(r);
                let ours = self.cfg.ipv4.is_some_and(|(a, _)| a == tpa);
                if !ours {
                    // Still refresh an entry we already have (gratuitous ARP, replies to others).
                    if self.neighbors.contains_key(&IpAddr::V4(spa)) {
                        self.learn_neighbor(IpAddr::V4(spa), sha);
                        self.counters.rx_accepted += 1;
                    } else {
                        self.counters.drop(DropReason::NeighborNotForUs);
                    }
                    return;
                }
                self.learn_neighbor(IpAddr::V4(spa), sha);
                if op == ArpOperation::Request {
                    if let Some(rep) = arp::reply_to(r, self.cfg.mac) {
                        self.tx.push_back(Outgoing::Raw(emit_frame(&ArpFrame::new(rep)).into()));
                    }
                }
                self.counters.rx_accepted += 1;
            }
            L2Packet::Ndisc { ip, msg, .. } => {
                let src = std::net::Ipv6Addr::from(ip.source);
                let dst = std::net::Ipv6Addr::from(ip.destination);
                match msg {
                    NdiscMessage::NeighborSolicit { target_addr, source_lladdr, .. } => {
                        if !self.is_local(&IpAddr::V6(*target_addr)) {
                            self.counters.drop(DropReason::NeighborNotForUs);
                            return;
                        }
                        if let Some(mac) = source_lladdr {
                            self.learn_neighbor(IpAddr::V6(src), *mac);
                        }
                        let na = NdiscFrame::answer(self.cfg.mac, *target_addr, src, f.ethernet.source, dst);
                        self.tx.push_back(Outgoing::Raw(emit_frame(&na).into()));
                        self.counters.rx_accepted += 1;
                    }
                    NdiscMessage::NeighborAdvert { target_addr, target_lladdr, .. } => {
                        let t = IpAddr::V6(*target_addr);
                        if self.neighbors.contains_key(&t) {
                            self.learn_neighbor(t, target_lladdr.unwrap_or(f.ethernet.source));
                            self.counters.rx_accepted += 1;
                        } else {
                            self.counters.drop(DropReason::NeighborNotForUs);
                        }
                    }
                }
            }
            L2Packet::Igmp { msg, .. } => {
                // A query asks every member to report: answer for each group we hold.
                if matches!(msg, IgmpMessage::V3Query(_))
                    || matches!(msg, IgmpMessage::V2(v) if v.msg_type == roce_wire::igmp::MessageType::MembershipQuery)
                {
                    self.report_all_groups(true);
                }
                self.counters.rx_accepted += 1;
            }
            L2Packet::Mld { msg, .. } => {
                if matches!(msg, MldMessage::Query(_)) {
                    self.report_all_groups(false);
                }
                self.counters.rx_accepted += 1;
            }
            L2Packet::Other { .. } => self.counters.drop(DropReason::UnhandledProtocol),
        }
    }
}

impl Stack {
    /// The multicast MACs this port must receive: the joined groups', all-systems
    /// (224.0.0.1), all-nodes (ff02::1) and the solicited-node MACs of our IPv6 addresses. A
    /// raw-socket driver adds exactly these to the interface.
    pub fn multicast_macs(&self) -> std::collections::BTreeSet<[u8; 6]> {
        let mut s = std::collections::BTreeSet::new();
        s.insert(l2::ipv4_multicast_mac(std::net::Ipv4Addr::new(224, 0, 0, 1)));
        s.insert(l2::ipv6_multicast_mac("ff02::1".parse().expect("ff02::1")));
        let mut v6 = vec![self.cfg.link_local()];
        v6.extend(self.cfg.ipv6.iter().map(|(a, _)| *a));
        for a in v6 {
            s.insert(roce_wire::ndisc::solicited_node_mac(a));
        }
        for g in self.groups.values() {
            if let Some(m) = multicast_mac(&g.addr()) {
                s.insert(m);
            }
        }
        s
    }
}
