//! The engine: one [`Stack`] per RoCE port. This file holds the composition, the inputs
//! (`handle_frame`, `handle_timeout`), the outputs (`poll_transmit`, `poll_timeout`,
//! `poll_event`) and the routing between the owners: neighbours (neigh.rs), UD QPs (qp.rs),
//! multicast (mcast.rs), the SA client (sa_client.rs), QP1 (gsi.rs), CM (cm.rs), the ids
//! (id.rs) and RC (rc/) each own their state, and the stack lends them a `Ctx` (ctx.rs, or an
//! owner's own context such as `CmCtx`) for one call (spec/engine.md). The id calls (api.rs)
//! are the stack's public face over these owners.

use std::collections::VecDeque;

use std::net::IpAddr;

use roce_wire::bth::{self, Opcode};
use roce_wire::datagram::{Arrival, RoceDatagram};
use roce_wire::demux::{Checks, Payload, Sliced};
use roce_wire::frame::{self, rxe_udp_sport, FramePacket, RoceHeaders};
use roce_wire::igmp::IgmpMessage;
use roce_wire::l2::{self, L2Packet};
use roce_wire::mad::{MadHeader, MadStatus, Method, MgmtClass};
use roce_wire::mcmember::JoinState;
use roce_wire::mld::MldMessage;
use roce_wire::sa::SaMad;
use roce_wire::{ContentError, Error as WireError, Gid, GSI_QKEY, MAD_SIZE, MULTICAST_QPN};

use crate::cm::{Cm, CmCtx};
use crate::config::StackConfig;
use crate::counters::{Counters, DropReason};
pub(crate) use crate::ctx::{splitmix, Outgoing, RocePacket, Work};
use crate::ctx::{Ctx, Outbox, Rng, Timers};
use crate::event::CmEvent;
use crate::gsi::Gsi;
use crate::id::{CmId, Ids, MemberKey};
use crate::mcast::{mgid_in_style, Group, McCtx, Member, Multicast, SaQueryResult};
use crate::neigh::{multicast_mac, Neighbors};
use crate::qp::{Datagram, UdDest, UdQp, UdQps};
use crate::rmpp_recv::RmppError;
use crate::sa_client::TxnOwner;
use crate::sa_client::{Response, SaClient};
use crate::{Errno, Instant};

/// An owner's [`Ctx`], lent from the stack's disjoint fields (so that the owner itself, another
/// field, can be borrowed beside it).
macro_rules! ctx {
    ($s:expr, $now:expr) => {
        Ctx { cfg: &$s.cfg, now: $now, counters: &mut $s.counters, out: &mut $s.out, timers: &mut $s.timers }
    };
}

/// The multicast owner's [`McCtx`], lent the same way.
macro_rules! mctx {
    ($s:expr) => {
        McCtx {
            cfg: &$s.cfg,
            out: &mut $s.out,
            timers: &mut $s.timers,
            sa: &mut $s.sa,
            ud: &mut $s.ud,
            ids: $s.ids.table_mut(),
        }
    };
}

pub use crate::gsi::MadRequest;

/// One RoCE port's engine. See the crate docs. A clone is a snapshot: the C library
/// destroys a snapshot's ids to learn the frames a process's death must put on the wire.
#[derive(Debug, Clone)]
pub struct Stack {
    pub(crate) cfg: StackConfig,
    rng: Rng,
    pub(crate) counters: Counters,
    /// Frames and events going out (shared by every owner through [`Ctx`]).
    pub(crate) out: Outbox,
    /// Deferred work of every owner.
    pub(crate) timers: Timers,
    pub(crate) now: Instant,
    /// The `rdma_cm_id`s and the port table: owned by id.rs.
    pub(crate) ids: Ids,
    /// Neighbours (ARP/ND): owned by neigh.rs.
    neigh: Neighbors,
    // SA and multicast
    pub(crate) sa: SaClient,
    /// Answers to the application's SA queries.
    sa_results: VecDeque<SaQueryResult>,
    /// Records of `rdma_resolve_ib_service` (service.rs).
    pub(crate) ib_services: crate::service::IbServices,
    /// Multicast (groups, members, IGMP/MLD): owned by mcast.rs.
    mcast: Multicast,
    // QPs
    /// UD QPs: owned by qp.rs.
    ud: UdQps,
    /// The next QPN, shared by UD and RC QPs.
    pub(crate) next_qpn: u32,
    /// QP1's sender and agent queue: owned by gsi.rs.
    gsi: Gsi,
    /// Connections and SIDR resolutions: owned by cm.rs.
    cm: Cm,
    /// RC QPs, memory regions and their completion queue (owned by rc/).
    pub(crate) rc: crate::rc::Rc,
    /// Where a datagram that is not for an RC/UC QP is framed for the frame path
    /// ([`Stack::handle_datagram_icrc_verified`]): grown once, kept.
    datagram_frame: Vec<u8>,
}

/// `Gid::from_ip(*ip).is_multicast()` (`rdma_is_multicast_addr`) without building the GID.
#[inline]
fn is_multicast_dst(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => a.is_multicast(),
        IpAddr::V6(a) => a.octets()[0] == 0xff || a.to_ipv4_mapped().is_some_and(|v| v.is_multicast()),
    }
}

/// `pkey_match` [rxe]: the low 15 bits equal and not zero, and one of the two a full member.
pub(crate) fn pkey_match(a: u16, b: u16) -> bool {
    (a & 0x7fff) != 0 && (a & 0x7fff) == (b & 0x7fff) && ((a | b) & 0x8000) != 0
}

impl Stack {
    /// A stack for one port.
    pub fn new(cfg: StackConfig) -> Stack {
        let seed = cfg.seed;
        let sa = SaClient::new(splitmix(seed ^ 0x5a5a), cfg.sa_timing);
        Stack {
            rng: Rng::new(seed),
            counters: Counters::default(),
            out: Outbox::default(),
            timers: Timers::default(),
            now: Instant::ZERO,
            ids: Ids::default(),
            neigh: Neighbors::default(),
            sa,
            sa_results: VecDeque::new(),
            ib_services: Default::default(),
            mcast: Multicast::default(),
            ud: UdQps::default(),
            next_qpn: 0x11,
            gsi: Gsi::default(),
            cm: Cm::default(),
            rc: {
                let mut rc = crate::rc::Rc::new(splitmix(seed ^ 0x0c0c));
                rc.set_max_unacked_psns(cfg.rc_max_unacked_psns);
                rc.set_congestion(cfg.congestion);
                rc
            },
            datagram_frame: Vec::new(),
            cfg,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &StackConfig {
        &self.cfg
    }

    /// Bound (port space, port) pairs with their ids.
    pub fn bound_ports(&self) -> Vec<(crate::id::PortSpace, u16, Vec<CmId>)> {
        self.ids.ports().iter().map(|((ps, port), ids)| (*ps, *port, ids.iter().copied().collect())).collect()
    }

    /// Pending timers and queued work items (for leak checks).
    pub fn pending_work(&self) -> usize {
        self.timers.len()
    }

    /// Frame and drop counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The port's GID table: IPv4-mapped GID of the IPv4 address, then the IPv6 ones (the
    /// link-local GID 0 as rxe has it first).
    pub fn gids(&self) -> Vec<Gid> {
        let mut v = vec![Gid::from_ipv6(self.cfg.link_local())];
        if let Some((a, _)) = self.cfg.ipv4 {
            v.push(Gid::from_ipv4(a));
        }
        v.extend(self.cfg.ipv6.iter().map(|(a, _)| Gid::from_ipv6(*a)));
        v
    }

    /// Whether `ip` is one of the port's addresses.
    #[inline]
    pub fn is_local(&self, ip: &IpAddr) -> bool {
        self.cfg.is_local(ip)
    }

    /// Our source address for talking to `dst`.
    #[inline]
    pub(crate) fn source_for(&self, dst: &IpAddr) -> Option<IpAddr> {
        self.cfg.source_for(dst)
    }

    /// Whether `dst` is on one of our links (the stack does no routing).
    #[inline]
    pub(crate) fn on_link(&self, dst: &IpAddr) -> bool {
        self.cfg.on_link(dst)
    }

    #[inline]
    pub(crate) fn random(&mut self) -> u64 {
        self.rng.next_u64()
    }

    #[inline]
    pub(crate) fn schedule(&mut self, at: Instant, w: Work) {
        self.timers.schedule(at, w);
    }

    /// Cancel every work item matching `pred` (a scan: prefer `Timers::cancel`).
    pub(crate) fn unschedule(&mut self, pred: impl Fn(&Work) -> bool) {
        self.timers.unschedule(pred);
    }

    #[inline]
    pub(crate) fn push_event(&mut self, ev: CmEvent) {
        self.out.push_event(ev);
    }

    // ----------------------------------------------------------------------------------
    // Outputs

    /// Turn [`StackConfig::rxe_flush_icrc`] on or off (the FLUSH frames framed from now on,
    /// and the check of those received).
    pub fn set_rxe_flush_icrc(&mut self, on: bool) {
        self.cfg.rxe_flush_icrc = on;
    }

    /// The next event for the application.
    #[inline] // an event is a few hundred bytes: built in the caller's frame, not copied out
    pub fn poll_event(&mut self) -> Option<CmEvent> {
        let e = self.out.events.pop_front();
        if e.is_none() {
            release_burst_capacity(&mut self.out.events);
        }
        e
    }

    /// When `handle_timeout` must next be called (`None`: nothing pending). A time at or
    /// before now means "call it now".
    pub fn poll_timeout(&self) -> Option<Instant> {
        let earliest = |a: Option<Instant>, b: Option<Instant>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let due = earliest(self.timers.next_due(), self.sa.poll_timeout());
        // rc/ scans its QPs: skipped when there are none (a driver asks after every input).
        if self.rc.is_empty() {
            due
        } else {
            earliest(due, self.rc.poll_timeout())
        }
    }

    /// The next frame to send, written into `buf`; returns its length. A frame whose
    /// destination MAC is not yet known is held back until ARP/ND resolves it (or counted as
    /// dropped when resolution fails).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        self.now = self.now.max(now);
        // Drivers poll until `None` after every input: answer that cheaply.
        if self.out.tx.is_empty() && !self.sa.has_outgoing() && self.rc.is_empty() {
            release_burst_capacity(&mut self.out.tx);
            return None;
        }
        self.transmit_next(now, buf)
    }

    #[inline(never)]
    fn transmit_next(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        loop {
            // An agent's MAD is framed where it waits (its fields read in place, not moved out
            // with the size of the largest frame kind).
            if let Some(Outgoing::Mad(m)) = self.out.tx.front() {
                let m = m.clone();
                self.out.tx.pop_front();
                let Some(mad) = self.out.mads.front() else {
                    continue; // (never: one MAD per queued Mad)
                };
                let Some(mac) = self.neighbor_mac(&m.dst) else {
                    let mad = *mad;
                    self.out.mads.pop_front();
                    let payload = self.out.tx_bytes(&mad);
                    self.park_for_neighbor(now, m.into_roce(payload));
                    continue;
                };
                let bth = m.bth();
                let framed = self
                    .gsi_headers(&bth, m.dst, mac)
                    .and_then(|h| frame::emit_roce(&h, buf, Some(&mad[..]), MAD_SIZE).ok());
                self.out.mads.pop_front();
                if let Some(n) = self.count_framed(framed) {
                    return Some(n);
                }
                continue;
            }
            let out = match self.out.tx.pop_front() {
                Some(o) => o,
                None => {
                    release_burst_capacity(&mut self.out.tx);
                    release_burst_capacity(&mut self.out.mads);
                    // A request's payload is gathered straight into `buf` behind the headers
                    // its frame will have (when its source address is known).
                    let cfg = &self.cfg;
                    let header_len = |dst: IpAddr, ext: &roce_wire::ext::ExtHeaders| {
                        let v4 = dst.is_ipv4() && cfg.source_for(&dst)?.is_ipv4();
                        Some(14 + if v4 { 20 } else { 40 } + 8 + roce_wire::bth::BTH_LEN + ext.buffer_len())
                    };
                    // (No RC QP: skip rc/'s round-robin set-up, which costs a frame's worth
                    // of header work on every SA MAD.)
                    let rc_packet =
                        (!self.rc.is_empty()).then(|| self.rc.poll_transmit_into(now, buf, &header_len)).flatten();
                    if let Some(mut p) = rc_packet {
                        // Framed here, straight from the QP's packet (no queueing, no shared
                        // buffer), its payload buffer given back for the next packet; parked
                        // like any packet while the neighbour is unknown.
                        let Some(mac) = p.dst_mac.or_else(|| self.neighbor_mac(&p.dst)) else {
                            if let Some(n) = p.payload_in_place.take() {
                                // (Rare: an RC peer whose MAC is not known.)
                                let at = header_len(p.dst, &p.ext).unwrap_or(0);
                                p.payload = buf[at..at + n].to_vec();
                            }
                            self.out.push(crate::rc::outgoing(p));
                            continue;
                        };
                        let framed = self.frame_rc(&p, mac, buf);
                        self.rc.recycle_payload(p.payload);
                        if let Some(n) = self.count_framed(framed) {
                            return Some(n);
                        }
                        continue;
                    }
                    if self.cfg.sa_transport == crate::config::SaTransport::External {
                        return None; // SA MADs leave through poll_sa_mad
                    }
                    let Some(sa) = self.cfg.sa else {
                        self.sa.poll_outgoing(now)?;
                        continue;
                    };
                    if let Some(n) = self.emit_sa_mad_in_place(now, sa, buf) {
                        self.counters.tx_frames += 1;
                        return Some(n);
                    }
                    // The SA's MAC is not known yet (or the buffer is too small): the packet
                    // form, parked for ARP/ND or counted as dropped below.
                    let mad = self.sa.poll_outgoing(now)?;
                    Outgoing::Roce(self.gsi_packet(sa, 1, &mad))
                }
            };
            match out {
                Outgoing::Raw(f) => {
                    if f.len() > buf.len() {
                        self.counters.drop(DropReason::TransmitBufferTooSmall);
                        continue;
                    }
                    buf[..f.len()].copy_from_slice(&f);
                    self.counters.tx_frames += 1;
                    return Some(f.len());
                }
                Outgoing::Mad(_) => {
                    // (Framed from the front above, never popped here; its MAD goes with it.)
                    self.out.mads.pop_front();
                    continue;
                }
                Outgoing::Roce(p) => {
                    let mac = match p.dst_mac.or_else(|| self.neighbor_mac(&p.dst)) {
                        Some(m) => m,
                        None => {
                            self.park_for_neighbor(now, p);
                            continue;
                        }
                    };
                    let framed = self.frame_roce(&p, mac, buf);
                    if let Some(n) = self.count_framed(framed) {
                        return Some(n);
                    }
                }
            }
        }
    }

    /// Count a frame built for `poll_transmit` (`Some(length)`), or one that did not fit the
    /// buffer (`None`, dropped); passes the length on.
    fn count_framed(&mut self, framed: Option<usize>) -> Option<usize> {
        match framed {
            Some(_) => self.counters.tx_frames += 1,
            None => self.counters.drop(DropReason::TransmitBufferTooSmall),
        }
        framed
    }

    fn frame_roce(&self, p: &RocePacket, dst_mac: [u8; 6], buf: &mut [u8]) -> Option<usize> {
        let h = self.roce_headers(p, dst_mac)?;
        frame::emit_roce(&h, buf, Some(&p.payload), p.payload.len()).ok()
    }

    /// [`Stack::frame_roce`] for an RC/UC packet as its QP made it.
    fn frame_rc(&self, p: &crate::rc::RcPacket, dst_mac: [u8; 6], buf: &mut [u8]) -> Option<usize> {
        let h = self.roce_headers(p, dst_mac)?;
        let n = match p.payload_in_place {
            // (Gathered where `h.header_len()` puts it: the headers go around it.)
            Some(n) => frame::emit_roce(&h, buf, None, n).ok(),
            None => frame::emit_roce(&h, buf, Some(&p.payload), p.payload.len()).ok(),
        }?;
        if self.cfg.rxe_flush_icrc && p.bth.opcode == Opcode::RcFlush {
            rxe_flush_icrc(&mut buf[..n], h.src.is_ipv4());
        }
        Some(n)
    }

    /// The headers of a RoCE packet's frame (written by `frame::emit_roce` straight from
    /// these parts: the same bytes as a `FrameRepr` would give, without building one).
    fn roce_headers<'p>(&self, p: &'p impl RoceParts, dst_mac: [u8; 6]) -> Option<RoceHeaders<'p>> {
        let (dst, src_qp, hop_limit, traffic_class, bth, ext) = p.parts();
        let src = self.source_for(&dst)?;
        Some(RoceHeaders {
            src_mac: self.cfg.mac,
            dst_mac,
            src,
            dst,
            hop_limit,
            traffic_class,
            udp_source_port: self.cfg.udp_source_port.unwrap_or(rxe_udp_sport(src_qp)),
            bth,
            ext,
        })
    }

    /// The next SA request, its MAD written straight into the transmit buffer and the frame
    /// built around it: no copy of the MAD, no allocation. `None` (nothing consumed) when no
    /// request waits, the SA's MAC is unknown or `buf` is too small.
    fn emit_sa_mad_in_place(&mut self, now: Instant, sa: IpAddr, buf: &mut [u8]) -> Option<usize> {
        if !self.sa.has_outgoing() {
            return None;
        }
        let mac = self.neighbor_mac(&sa)?;
        let bth = self.gsi.bth(self.cfg.pkey, 1);
        let h = self.gsi_headers(&bth, sa, mac)?;
        // `h.header_len()` for the one extension header QP1 sends (the DETH), without asking
        // the headers for their set again.
        let ip_len = if matches!((h.src, h.dst), (IpAddr::V4(_), IpAddr::V4(_))) { 20 } else { 40 };
        let at = 14 + ip_len + 8 + roce_wire::bth::BTH_LEN + roce_wire::deth::LEN;
        debug_assert_eq!(at, h.header_len());
        // The whole frame: headers, the MAD (256 bytes: no pad), the ICRC.
        if at + MAD_SIZE + roce_wire::icrc::ICRC_LEN > buf.len()
            || !self.sa.poll_outgoing_into(now, &mut buf[at..at + MAD_SIZE])
        {
            return None;
        }
        self.gsi.advance();
        match frame::emit_roce(&h, buf, None, MAD_SIZE) {
            Ok(n) => Some(n),
            Err(_) => {
                // Unreachable with the length checked above; never lost silently all the same.
                self.counters.drop(DropReason::TransmitBufferTooSmall);
                None
            }
        }
    }

    /// The headers of a MAD from QP1 to `dst` (what `Gsi::header` would give, from their
    /// parts: no packet built to be read back).
    #[inline]
    fn gsi_headers<'b>(&self, bth: &'b bth::Repr, dst: IpAddr, dst_mac: [u8; 6]) -> Option<RoceHeaders<'b>> {
        Some(RoceHeaders {
            src_mac: self.cfg.mac,
            dst_mac,
            src: self.source_for(&dst)?,
            dst,
            hop_limit: crate::ctx::GSI_HOP_LIMIT,
            traffic_class: 0,
            udp_source_port: self.cfg.udp_source_port.unwrap_or(rxe_udp_sport(1)),
            bth,
            ext: &crate::ctx::GSI_EXT,
        })
    }

    /// A UD SEND_ONLY on QP1 carrying a MAD, framed as rxe frames GSI traffic.
    pub(crate) fn gsi_packet(&mut self, dst: IpAddr, dst_qp: u32, mad: &[u8]) -> RocePacket {
        self.gsi.packet(&mut self.out, self.cfg.pkey, dst, dst_qp, mad)
    }

    // ----------------------------------------------------------------------------------
    // Inputs

    /// Run due timers: SA retransmissions and deadlines, neighbour probes, queued work.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = self.now.max(now);
        for (tid, txn) in self.sa.handle_timeout(now) {
            let rmpp = txn.rmpp_timeout();
            self.sa_transaction_failed(now, tid, txn.owner, None, rmpp);
        }
        self.rc.handle_timeout(now);
        while let Some(w) = self.timers.pop_due(now) {
            self.run_work(now, w);
        }
    }

    fn run_work(&mut self, now: Instant, w: Work) {
        match w {
            Work::AddrResolved(id) => self.addr_resolved(now, id),
            Work::RouteResolved(id) => self.route_resolved(id),
            Work::LocalJoinDone(m) => self.local_join_done(m),
            Work::ReportRepeat { group, join } => self.send_group_report(group, join),
            Work::NeighborProbe(ip) => self.neighbor_probe(now, ip),
            Work::ResolveDeadline(id) => self.resolve_deadline(id),
            Work::CmTimer(comm_id) => {
                let (cm, mut cx) = self.cm_parts();
                cm.timer(&mut cx, now, comm_id)
            }
        }
    }

    /// Handle one received Ethernet frame. Every frame ends accepted or counted as dropped
    /// with its reason.
    pub fn handle_frame(&mut self, now: Instant, bytes: &[u8]) {
        self.receive_frame(now, bytes, false);
    }

    /// [`Stack::handle_frame`] for a frame whose ICRC the transport already computed over
    /// these very bytes and found right (the udp transport does, to recover the IPv4 ID the
    /// kernel does not report): every other check as `handle_frame`, the ICRC not computed a
    /// second time. A frame nobody verified so (the raw transport's, a fault injector's, a
    /// capture's) goes to `handle_frame`, where a bad ICRC is counted as `bad_icrc`.
    pub fn handle_frame_icrc_verified(&mut self, now: Instant, bytes: &[u8]) {
        self.receive_frame(now, bytes, true);
    }

    /// A RoCEv2 datagram as a kernel UDP socket read it (`datagram`: its UDP payload, BTH to
    /// ICRC, where the socket put it; `arrival`: what the socket reported of its IP and UDP
    /// headers), its ICRC verified by the transport over the headers the sender's kernel wrote
    /// ([`roce_wire::datagram::compute_icrc`]). The same outcome and counters as
    /// [`Stack::handle_frame_icrc_verified`] of the frame it came in (to our MAC from
    /// [`crate::KERNEL_NEIGHBOR_MAC`]): an RC or UC packet for one of our QPs is checked
    /// ([`roce_wire::datagram::RoceDatagram`]: TVer, lengths, pad; then P_Key) and handed to
    /// its QP where it lies; anything else is framed in a buffer the stack keeps and takes
    /// the frame path.
    pub fn handle_datagram_icrc_verified(&mut self, now: Instant, arrival: &Arrival, datagram: &[u8]) {
        let for_rc_qp = datagram.len() >= bth::BTH_LEN && {
            let transport = Opcode::from(datagram[0]).transport();
            let qpn = u32::from_be_bytes([0, datagram[5], datagram[6], datagram[7]]);
            matches!(transport, bth::Transport::Rc | bth::Transport::Uc | bth::Transport::Xrc | bth::Transport::Cnp)
                && self.rc.has_qp(qpn)
                && !is_multicast_dst(&arrival.dst)
                && self.is_local(&arrival.dst)
        };
        if !for_rc_qp {
            self.frame_datagram(now, arrival, datagram);
            return;
        }
        self.now = self.now.max(now);
        self.counters.rx_frames += 1;
        let d = match RoceDatagram::new_icrc_verified(datagram) {
            Ok(d) => d,
            Err(e) => return self.drop_malformed(e),
        };
        if !pkey_match(d.bth().pkey(), self.cfg.pkey) {
            self.counters.drop(DropReason::BadPkey);
            return;
        }
        match d.transport_headers() {
            Ok((bth, ext)) => {
                self.counters.rx_accepted += 1;
                let ecn = crate::cc::Ecn::of(arrival.traffic_class);
                self.rc.handle_packet_ecn(now, arrival.src.ip(), ecn, &bth, &ext, d.payload());
            }
            Err(e) => self.counters.drop(DropReason::Malformed(e.layer())),
        }
    }

    /// [`Stack::handle_datagram_icrc_verified`] for what is not an RC/UC QP's: the frame it
    /// came in, rebuilt, on the frame path.
    fn frame_datagram(&mut self, now: Instant, arrival: &Arrival, datagram: &[u8]) {
        let mut frame = std::mem::take(&mut self.datagram_frame);
        let hdr = arrival.frame_header_len();
        if frame.len() < hdr + datagram.len() {
            frame.resize(hdr + datagram.len(), 0);
        }
        let framed = roce_wire::datagram::write_frame_headers(
            &mut frame,
            datagram.len(),
            arrival,
            self.cfg.mac,
            crate::KERNEL_NEIGHBOR_MAC,
            0,
        );
        frame[hdr..hdr + datagram.len()].copy_from_slice(datagram);
        match framed {
            // (The ICRC verified covers the IPv4 ID the sender's kernel wrote, which this
            // frame need not carry: the ICRC is not computed again on this path.)
            Ok(_) => self.receive_frame(now, &frame[..hdr + datagram.len()], true),
            Err(e) => {
                self.counters.rx_frames += 1;
                self.drop_malformed(e);
            }
        }
        self.datagram_frame = frame;
    }

    #[inline(always)]
    fn receive_frame(&mut self, now: Instant, bytes: &[u8], icrc_verified: bool) {
        self.now = self.now.max(now);
        self.counters.rx_frames += 1;
        if bytes.len() < 14 {
            self.counters.drop(DropReason::Malformed(roce_wire::Layer::Ethernet));
            return;
        }
        let dst_mac: [u8; 6] = bytes[0..6].try_into().unwrap_or([0; 6]);
        let multicast = dst_mac[0] & 1 != 0;
        if !multicast && dst_mac != self.cfg.mac {
            self.counters.drop(DropReason::NotForUs);
            return;
        }
        // One walk (roce_wire's demux, strict as rxe): RoCEv2 as the zero-copy view, nothing
        // copied (the owned headers are built only for the UD QPs that hand a datagram to the
        // application); ARP, IGMP, MLD and NS/NA parsed from where the walk found them.
        let walked = if icrc_verified {
            Sliced::from_ethernet_icrc_verified(bytes)
        } else {
            Sliced::from_ethernet(bytes, Checks::Strict)
        };
        match walked {
            Ok(Sliced { payload: Payload::RoceV2 { packet, .. }, .. }) => self.handle_roce(now, &packet),
            Ok(Sliced { link, payload: Payload::NotRoce { packet, .. }, .. }) => match packet {
                Ok(packet) => self.handle_l2(now, link.source_mac().unwrap_or([0; 6]), &packet),
                // (Not RoCEv2, so not a bad ICRC or checksum of one: an IGMP packet's bad IPv4
                // checksum is a malformed IGMP frame.)
                Err(e) => self.counters.drop(DropReason::Malformed(e.layer())),
            },
            Err(e) if self.cfg.rxe_flush_icrc && is_icrc_mismatch(&e) && has_rxe_flush_icrc(bytes) => {
                match Sliced::from_ethernet_icrc_verified(bytes) {
                    Ok(Sliced { payload: Payload::RoceV2 { packet, .. }, .. }) => self.handle_roce(now, &packet),
                    _ => self.drop_malformed(e),
                }
            }
            Err(e) => self.drop_malformed(e),
        }
    }

    /// Count a frame the walk refused.
    fn drop_malformed(&mut self, e: WireError) {
        let reason = match e {
            WireError::Content { kind, .. } => match kind {
                ContentError::IcrcMismatch { .. } => DropReason::BadIcrc,
                ContentError::Ipv4Checksum { .. } => DropReason::BadIpChecksum,
                ContentError::UnsupportedTver(_) => DropReason::BadTver,
                _ => DropReason::Malformed(e.layer()),
            },
            WireError::Len { .. } => DropReason::Malformed(e.layer()),
        };
        self.counters.drop(reason);
    }

    fn handle_roce(&mut self, now: Instant, p: &FramePacket<'_>) {
        let dst = p.dst_ip();
        if !is_multicast_dst(&dst) && !self.is_local(&dst) {
            self.counters.drop(DropReason::NotForUs);
            return;
        }
        let b = p.bth();
        if !pkey_match(b.pkey(), self.cfg.pkey) {
            self.counters.drop(DropReason::BadPkey);
            return;
        }
        let qpn = b.dest_qp();
        // (The opcode as the check read it: not converted again per question.)
        let op = p.opcode();
        let ud_opcode = matches!(op, Opcode::UdSendOnly | Opcode::UdSendOnlyWithImmediate);
        if qpn == 0 {
            self.counters.drop(DropReason::UnknownQp);
            return;
        }
        let connected = matches!(
            op.transport(),
            bth::Transport::Rc | bth::Transport::Uc | bth::Transport::Xrc | bth::Transport::Cnp
        );
        if connected && self.rc.has_qp(qpn) {
            // RC, UC and XRC packets (and CNPs for their QPs) go to rc/ with their BTH and
            // extension headers owned and the IP header's ECN field (the rest read from the
            // view, no copy of the payload); rc/ drops one whose transport is not its QP's.
            match p.transport_headers() {
                Ok((bth, ext)) => {
                    self.counters.rx_accepted += 1;
                    let ecn = crate::cc::Ecn::of(p.traffic_class());
                    self.rc.handle_packet_ecn(now, p.src_ip(), ecn, &bth, &ext, p.payload());
                }
                Err(e) => self.counters.drop(DropReason::Malformed(e.layer())),
            }
            return;
        }
        if !ud_opcode {
            // Only UD QPs exist here (QP1 is GSI): any other opcode has no QP to go to.
            let reason = if qpn == 1 || qpn == MULTICAST_QPN || self.ud.contains(qpn) {
                DropReason::WrongOpcodeForQp
            } else {
                DropReason::UnknownQp
            };
            self.counters.drop(reason);
            return;
        }
        let Some(deth) = p.deth() else {
            self.counters.drop(DropReason::Malformed(roce_wire::Layer::Deth));
            return;
        };
        let deth = roce_wire::deth::Repr { qkey: deth.qkey(), src_qp: deth.src_qp(), reserved: deth.reserved() };
        if qpn == 1 {
            if deth.qkey != GSI_QKEY {
                self.counters.drop(DropReason::QkeyViolation);
                return;
            }
            let src = p.src_ip();
            let bytes = p.as_bytes();
            let src_mac = [bytes[6], bytes[7], bytes[8], bytes[9], bytes[10], bytes[11]];
            self.learn_neighbor(src, src_mac);
            self.handle_mad(now, src, deth.src_qp, p.payload());
            return;
        }
        // A datagram for the application: the owned form it is delivered in.
        let f = match p.to_frame() {
            Ok(f) => f,
            Err(e) => {
                self.counters.drop(DropReason::Malformed(e.layer()));
                return;
            }
        };
        if qpn == MULTICAST_QPN {
            self.ud.deliver_multicast(&mut self.counters, &f, deth);
        } else {
            self.ud.deliver_unicast(&mut self.counters, &f, deth);
        }
    }

    fn handle_mad(&mut self, now: Instant, src: IpAddr, src_qp: u32, payload: &[u8]) {
        // rxe's GSI QP posts 256-byte buffers: longer is a length error, shorter is no MAD.
        if payload.len() != MAD_SIZE {
            self.counters.drop(DropReason::BadMad);
            return;
        }
        let Ok(h) = MadHeader::parse_bytes(payload) else {
            self.counters.drop(DropReason::BadMad);
            return;
        };
        if h.base_version != 1 || matches!(h.mgmt_class, MgmtClass::SubnLid | MgmtClass::SubnDirected) {
            // validate_mad: base version 1; SMPs only on QP0.
            self.counters.drop(DropReason::BadMad);
            return;
        }
        let class = u8::from(h.mgmt_class);
        if h.mgmt_class == MgmtClass::ComMgmt {
            if h.method != Method::Send && h.attribute_id != roce_wire::cm::attr::CLASS_PORT_INFO {
                self.counters.drop(DropReason::BadMad);
                return;
            }
            self.handle_cm_mad(now, src, src_qp, &h, payload);
            return;
        }
        if h.response || h.method == Method::TrapRepress {
            if h.mgmt_class == MgmtClass::SubnAdm {
                self.handle_sa_response(now, &h, payload);
            } else {
                self.counters.drop(DropReason::UnsolicitedResponse);
            }
            return;
        }
        if self.gsi.has_agent(class) {
            if let Some(mad) = payload.first_chunk::<MAD_SIZE>() {
                self.gsi.deliver(src, src_qp, mad);
            }
            self.counters.rx_accepted += 1;
            return;
        }
        // No agent: the kernel's MAD core answers Get and Set with a copy of the request,
        // method GetResp, status 0x000C (generate_unmatched_resp); anything else is dropped.
        if matches!(h.method, Method::Get | Method::Set) {
            let mut resp = [0u8; MAD_SIZE];
            resp.copy_from_slice(payload);
            resp[3] = 0x80 | u8::from(Method::Get);
            resp[4..6].copy_from_slice(&MadStatus::UNSUPPORTED_METHOD_ATTR.0.to_be_bytes());
            self.send_mad(src, src_qp, &resp);
            self.counters.rx_accepted += 1;
        } else {
            self.counters.drop(DropReason::UnhandledMad);
        }
    }

    /// A CM MAD arrived on QP1: routed to the CM owner.
    pub(crate) fn handle_cm_mad(&mut self, now: Instant, src: IpAddr, src_qp: u32, h: &MadHeader, payload: &[u8]) {
        let (cm, mut cx) = self.cm_parts();
        cm.handle_mad(&mut cx, now, src, src_qp, h, payload);
    }

    /// The CM owner with its [`CmCtx`], lent from the stack's disjoint fields.
    #[inline]
    pub(crate) fn cm_parts(&mut self) -> (&mut Cm, CmCtx<'_>) {
        let cx = CmCtx {
            cfg: &self.cfg,
            counters: &mut self.counters,
            out: &mut self.out,
            timers: &mut self.timers,
            rng: &mut self.rng,
            ids: &mut self.ids,
            gsi: &mut self.gsi,
            neigh: &self.neigh,
            rc: &mut self.rc,
        };
        (&mut self.cm, cx)
    }

    /// What `rdma_init_qp_attr` reads: CM, the configuration, the neighbours and the ids.
    pub(crate) fn cm_view(&self) -> (&Cm, &StackConfig, &Neighbors, &Ids) {
        (&self.cm, &self.cfg, &self.neigh, &self.ids)
    }

    /// With [`crate::config::SaTransport::External`]: the next SA request MAD to deliver to the
    /// SA (its QP1), as bare bytes.
    pub fn poll_sa_mad(&mut self, now: Instant) -> Option<[u8; MAD_SIZE]> {
        if self.cfg.sa_transport != crate::config::SaTransport::External {
            return None;
        }
        self.now = self.now.max(now);
        self.sa.poll_outgoing(now)
    }

    /// With [`crate::config::SaTransport::External`]: an SA response MAD arrived.
    pub fn handle_sa_mad(&mut self, now: Instant, mad: &[u8]) {
        self.now = self.now.max(now);
        self.counters.rx_frames += 1;
        match MadHeader::parse_bytes(mad) {
            Ok(h) if h.mgmt_class == MgmtClass::SubnAdm && h.response && mad.len() >= MAD_SIZE => {
                self.handle_sa_response(now, &h, &mad[..MAD_SIZE])
            }
            Ok(_) => self.counters.drop(DropReason::UnsolicitedResponse),
            Err(_) => self.counters.drop(DropReason::BadMad),
        }
    }

    // ----------------------------------------------------------------------------------
    // The MAD agent hook (what umad gives a userspace agent on a kernel host)

    /// Receive MAD requests of management class `mgmt_class` (e.g. 0x03 for an SA) instead of
    /// answering them with status 0x000C: they queue for [`Stack::poll_mad_request`].
    pub fn register_mad_agent(&mut self, mgmt_class: u8) {
        self.gsi.register(mgmt_class);
    }

    /// The next MAD request for a registered agent.
    pub fn poll_mad_request(&mut self) -> Option<MadRequest> {
        self.gsi.poll_request()
    }

    /// Answer the queued MAD requests in place, in order: `answer` reads each request where it
    /// waits (no copy of its 256 bytes, unlike [`Stack::poll_mad_request`]) and returns the MADs
    /// to send back to the requester's QP (none, one, or several). Returns the MADs queued.
    pub fn answer_mad_requests<R>(&mut self, mut answer: impl FnMut(&MadRequest) -> R) -> usize
    where
        R: core::ops::Deref<Target = [[u8; MAD_SIZE]]>,
    {
        let mut sent = 0;
        while let Some(req) = self.gsi.front_request() {
            let (src, src_qp) = (req.src, req.src_qp);
            let reply = answer(req);
            self.gsi.drop_front_request();
            for mad in reply.iter() {
                self.send_mad(src, src_qp, mad);
                sent += 1;
            }
        }
        sent
    }

    /// Send a MAD from QP1 to `dst`'s QP `dst_qp` (an agent's response).
    pub fn send_mad(&mut self, dst: IpAddr, dst_qp: u32, mad: &[u8; MAD_SIZE]) {
        self.gsi.queue_mad(&mut self.out, self.cfg.pkey, dst, dst_qp, mad);
    }
}

// --------------------------------------------------------------------------------------
// Neighbours (neigh.rs owns the table; the stack reports the ids whose resolution failed)

impl Stack {
    /// The MAC for `ip` if known (multicast MACs are computed).
    #[inline]
    pub(crate) fn neighbor_mac(&self, ip: &IpAddr) -> Option<[u8; 6]> {
        self.neigh.mac(&self.cfg, ip)
    }

    /// The neighbour table as (address, MAC) pairs of reachable entries.
    pub fn neighbors(&self) -> Vec<(IpAddr, [u8; 6])> {
        self.neigh.reachable()
    }

    /// Hold a packet until `p.dst` resolves, starting resolution if needed.
    pub(crate) fn park_for_neighbor(&mut self, now: Instant, p: RocePacket) {
        self.neigh.park(&mut ctx!(self, now), p);
    }

    /// Start resolving `ip` for `id`; true if it is already known.
    pub(crate) fn resolve_neighbor(&mut self, now: Instant, ip: IpAddr, id: CmId) -> bool {
        match self.neigh.resolve(&mut ctx!(self, now), ip, id) {
            Ok(known) => known,
            Err(failed) => {
                for id in failed {
                    self.addr_error(id, Errno::ETIMEDOUT);
                }
                false
            }
        }
    }

    /// Send the next probe, or fail the entry when the probes are used up.
    pub(crate) fn neighbor_probe(&mut self, now: Instant, ip: IpAddr) {
        if let Some(failed) = self.neigh.probe(&mut ctx!(self, now), ip) {
            for id in failed {
                self.addr_error(id, Errno::ETIMEDOUT);
            }
        }
    }

    /// `id` waits for no resolution any more.
    pub(crate) fn forget_resolver(&mut self, id: CmId) {
        self.neigh.forget_resolver(id);
    }

    /// Record `ip` at `mac` and release whatever waited for it.
    #[inline]
    pub(crate) fn learn_neighbor(&mut self, ip: IpAddr, mac: [u8; 6]) {
        let now = self.now;
        self.neigh.learn(&mut ctx!(self, now), ip, mac);
    }

    /// ARP and ND go to the neighbours, IGMP and MLD queries to multicast (`src_mac`: the
    /// frame's Ethernet source).
    fn handle_l2(&mut self, now: Instant, src_mac: [u8; 6], packet: &L2Packet<'_>) {
        match packet {
            L2Packet::Arp(r) => {
                let now = self.now.max(now);
                self.neigh.handle_arp(&mut ctx!(self, now), r);
            }
            L2Packet::Ndisc { ip, msg, .. } => {
                let src = std::net::Ipv6Addr::from(ip.source);
                let dst = std::net::Ipv6Addr::from(ip.destination);
                let now = self.now.max(now);
                self.neigh.handle_ndisc(&mut ctx!(self, now), src_mac, src, dst, msg);
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

    /// The groups this port is a member of at the IP level: those it sends IGMP/MLD reports
    /// for (joined with a receiving join state), which a device below a UDP socket joins with
    /// IP_ADD_MEMBERSHIP / IPV6_JOIN_GROUP so the kernel reports them.
    pub fn ip_multicast_groups(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.mcast.ip_groups()
    }

    /// The multicast MACs this port must receive: the joined groups', all-systems
    /// (224.0.0.1), all-nodes (ff02::1) and the solicited-node MACs of our IPv6 addresses. A
    /// raw-socket driver adds exactly these to the interface.
    pub fn multicast_macs(&self) -> std::collections::BTreeSet<[u8; 6]> {
        let mut s = std::collections::BTreeSet::new();
        s.insert(l2::ipv4_multicast_mac(std::net::Ipv4Addr::new(224, 0, 0, 1)));
        s.insert(l2::ipv6_multicast_mac(std::net::Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1)));
        let mut v6 = vec![self.cfg.link_local()];
        v6.extend(self.cfg.ipv6.iter().map(|(a, _)| *a));
        for a in v6 {
            s.insert(roce_wire::ndisc::solicited_node_mac(a));
        }
        for g in self.mcast.groups() {
            if let Some(m) = multicast_mac(&g.addr()) {
                s.insert(m);
            }
        }
        s
    }
}

// --------------------------------------------------------------------------------------
// UD QPs (qp.rs owns them; the stack numbers them, as RC QPs share the numbering)

impl Stack {
    /// Create a UD QP with `qkey`; returns its QPN.
    pub fn create_qp(&mut self, qkey: u32) -> u32 {
        let qpn = self.next_qpn;
        self.next_qpn = (self.next_qpn + 1) & 0xff_ffff;
        let psn = (self.random() as u32) & 0xff_ffff;
        self.ud.create(qpn, qkey, psn);
        qpn
    }

    /// `ibv_modify_qp(RTS, IBV_QP_SQ_PSN)` of a UD QP: its sends go on from `psn` (ud_pingpong
    /// sets the PSN it told its peer). EINVAL: no such UD QP, a PSN over 24 bits.
    pub fn set_qp_sq_psn(&mut self, qpn: u32, psn: u32) -> Result<(), Errno> {
        self.ud.set_sq_psn(qpn, psn)
    }

    /// `ibv_modify_qp(IBV_QP_QKEY)` of a UD QP. EINVAL: no such UD QP.
    pub fn set_qp_qkey(&mut self, qpn: u32, qkey: u32) -> Result<(), Errno> {
        self.ud.set_qkey(qpn, qkey)
    }

    /// The PSN the next send of UD QP `qpn` carries.
    pub fn qp_sq_psn(&self, qpn: u32) -> Option<u32> {
        self.ud.sq_psn(qpn)
    }

    /// Destroy a QP (detaching it from every group).
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), Errno> {
        self.ud.destroy(qpn)
    }

    /// `ibv_attach_mcast`: deliver datagrams for `mgid` to this QP (a repeat is a no-op).
    pub fn attach_mcast(&mut self, qpn: u32, mgid: Gid) -> Result<(), Errno> {
        self.ud.attach(qpn, mgid)
    }

    /// `ibv_detach_mcast`: unknown QP or group → EINVAL.
    pub fn detach_mcast(&mut self, qpn: u32, mgid: Gid) -> Result<(), Errno> {
        self.ud.detach(qpn, mgid)
    }

    /// The QP, if it exists.
    pub fn qp(&self, qpn: u32) -> Option<&UdQp> {
        self.ud.get(qpn)
    }

    /// Post a UD send (SEND_ONLY, or SEND_ONLY_WITH_IMMEDIATE when `imm_data` is given).
    pub fn post_send(&mut self, qpn: u32, dest: &UdDest, payload: &[u8], imm_data: Option<u32>) -> Result<(), Errno> {
        let now = self.now;
        self.ud.post_send(&mut ctx!(self, now), qpn, dest, payload, imm_data)
    }

    /// The next received datagram of a QP.
    pub fn poll_recv(&mut self, qpn: u32) -> Option<Datagram> {
        self.ud.poll_recv(qpn)
    }
}

// --------------------------------------------------------------------------------------
// Multicast (mcast.rs owns groups and members) and the SA client's answers, routed by owner

impl Stack {
    /// The groups of this port.
    pub fn groups(&self) -> impl Iterator<Item = &Group> {
        self.mcast.groups()
    }

    /// Members of this port (all ids).
    pub fn members(&self) -> impl Iterator<Item = (&MemberKey, &Member)> {
        self.mcast.members()
    }

    /// Outstanding SA transactions.
    pub fn sa_transactions(&self) -> usize {
        self.sa.len()
    }

    /// SA MADs sent (first sends and retransmissions) and retransmissions alone.
    pub fn sa_sent(&self) -> (u64, u64) {
        (self.sa.sent, self.sa.retransmissions)
    }

    /// The MGID of a group address, in the port's style.
    pub fn mgid(&self, group: &IpAddr) -> Gid {
        mgid_in_style(&self.cfg, group)
    }

    /// Join `group` with one join-state bit (see [`Stack::join_multicast`]); the id's state
    /// was checked by the caller.
    #[inline]
    pub(crate) fn start_join(&mut self, now: Instant, id: CmId, group: IpAddr, join_state: JoinState) {
        self.mcast.start_join(&mut mctx!(self), now, id, group, join_state);
    }

    /// Leave one join of `group` by `id` (the first matching, as the kernel does).
    #[inline]
    pub(crate) fn start_leave(&mut self, now: Instant, id: CmId, group: IpAddr) {
        self.mcast.start_leave(&mut mctx!(self), now, id, group);
    }

    /// Take a member out of its group.
    #[inline]
    pub(crate) fn remove_member(&mut self, now: Instant, key: MemberKey, report: bool) {
        self.mcast.remove_member(&mut mctx!(self), now, key, report);
    }

    pub(crate) fn local_join_done(&mut self, key: MemberKey) {
        self.mcast.local_join_done(&mut mctx!(self), key);
    }

    pub(crate) fn send_group_report(&mut self, group: IpAddr, join: bool) {
        self.mcast.send_group_report(&mut mctx!(self), group, join);
    }

    /// Answer a query: a report for every group of that family we hold at IP level.
    pub(crate) fn report_all_groups(&mut self, ipv4: bool) {
        self.mcast.report_all_groups(&mut mctx!(self), ipv4);
    }

    /// An SA response arrived on QP1, read in place (`h` its parsed header, `payload` its
    /// 256 bytes): matched by the SA client, then routed to the transaction's owner.
    pub(crate) fn handle_sa_response(&mut self, now: Instant, h: &MadHeader, payload: &[u8]) {
        if payload.len() < SaMad::LEN {
            self.counters.drop(DropReason::BadMad);
            return;
        }
        let (owner, table) = match self.sa.handle_response(now, h, payload) {
            Response::Single(owner) => (owner, None),
            Response::Table(owner, re) => (owner, Some(re)),
            Response::Segment => {
                self.counters.rx_accepted += 1;
                return;
            }
            Response::Unsolicited => return self.counters.drop(DropReason::UnsolicitedResponse),
            Response::Dropped(why) => return self.counters.drop(why),
            Response::Failed(owner, e, drop) => {
                match drop {
                    Some(why) => self.counters.drop(why),
                    None => self.counters.rx_accepted += 1,
                }
                return self.sa_transaction_failed(now, h.transaction_id, owner, None, Some(e));
            }
        };
        self.counters.rx_accepted += 1;
        match owner {
            TxnOwner::Join(mgid) => self.mcast.join_answered(&mut mctx!(self), now, mgid, h, payload),
            TxnOwner::Leave(mgid) => self.mcast.leave_answered(&mut mctx!(self), now, mgid, h.status),
            TxnOwner::Query(handle) => self.sa_results.push_back(SaQueryResult::answer(handle, payload, table)),
            TxnOwner::Service(id) => self.ib_service_answered(id, h, payload, table.as_deref()),
        }
    }

    /// Send an SA request (Get, GetTable, …) of the application's to the configured SA; the
    /// answer (or ETIMEDOUT after the retries) comes from [`Stack::poll_sa_result`]. ENODEV
    /// without an SA.
    pub fn sa_query(&mut self, now: Instant, request: SaMad) -> Result<u64, Errno> {
        if self.cfg.sa.is_none() && self.cfg.sa_transport != crate::config::SaTransport::External {
            return Err(Errno::ENODEV);
        }
        let handle = self.mcast.next_handle();
        self.sa.start(now, request, TxnOwner::Query(handle));
        Ok(handle)
    }

    /// The next answer to an [`Stack::sa_query`].
    pub fn poll_sa_result(&mut self) -> Option<SaQueryResult> {
        self.sa_results.pop_front()
    }

    /// An SA transaction ran out of time, or its RMPP answer failed (`rmpp`).
    pub(crate) fn sa_transaction_failed(
        &mut self,
        now: Instant,
        _tid: u64,
        owner: TxnOwner,
        sa_status: Option<u16>,
        rmpp: Option<RmppError>,
    ) {
        let errno = rmpp.map_or(Errno::ETIMEDOUT, |e| e.errno());
        match owner {
            TxnOwner::Join(mgid) => self.mcast.join_timed_out(&mut mctx!(self), now, mgid, sa_status),
            TxnOwner::Leave(mgid) => self.mcast.leave_timed_out(&mut mctx!(self), now, mgid, sa_status),
            TxnOwner::Query(handle) => self.sa_results.push_back(SaQueryResult::failed(handle, errno, rmpp)),
            TxnOwner::Service(id) => self.ib_service_failed(id, errno),
        }
    }

    /// The RMPP receiver's counts (segments, ACKs, ABORTs, tables).
    pub fn rmpp_stats(&self) -> crate::RmppStats {
        self.sa.rmpp_stats()
    }
}

/// A queue that a burst grew (100,000 leaves queue 100,000 Deletes and as many events) gives
/// the memory back once it is empty: VecDeque never shrinks by itself, and a stack would
/// otherwise keep hundreds of bytes per past group. Small queues keep their capacity, so the
/// steady state does not reallocate.
fn release_burst_capacity<T>(q: &mut VecDeque<T>) {
    const KEEP: usize = 1024;
    if q.is_empty() && q.capacity() > 4 * KEEP {
        q.shrink_to(KEEP);
    }
}

/// What a frame's headers are made of, in the queued packet form and in rc/'s.
trait RoceParts {
    /// Destination, source QP, hop limit, traffic class, BTH, extension headers.
    fn parts(&self) -> (IpAddr, u32, u8, u8, &roce_wire::bth::Repr, &roce_wire::ext::ExtHeaders);
}

impl RoceParts for RocePacket {
    fn parts(&self) -> (IpAddr, u32, u8, u8, &roce_wire::bth::Repr, &roce_wire::ext::ExtHeaders) {
        (self.dst, self.src_qp, self.hop_limit, self.traffic_class, &self.bth, &self.ext)
    }
}

impl RoceParts for crate::rc::RcPacket {
    fn parts(&self) -> (IpAddr, u32, u8, u8, &roce_wire::bth::Repr, &roce_wire::ext::ExtHeaders) {
        (self.dst, self.src_qp, self.hop_limit, self.traffic_class, &self.bth, &self.ext)
    }
}

/// Whether the walk refused a frame for its ICRC.
fn is_icrc_mismatch(e: &WireError) -> bool {
    matches!(e, WireError::Content { kind: ContentError::IcrcMismatch { .. }, .. })
}

/// Whether `frame` is an RC FLUSH whose ICRC is the one rxe computes
/// ([`roce_wire::icrc::compute_rxe_flush`]). (Asked only of a frame the strict walk refused for
/// its ICRC: the lax parse finds its layers, VLAN tag and IP options included.)
fn has_rxe_flush_icrc(frame: &[u8]) -> bool {
    let Ok(f) = frame::parse_lax(frame) else { return false };
    if f.repr.bth.opcode != Opcode::RcFlush {
        return false;
    }
    let o = f.offsets;
    let version = if frame[o.ip] >> 4 == 4 { roce_wire::icrc::IpVersion::V4 } else { roce_wire::icrc::IpVersion::V6 };
    roce_wire::icrc::compute_rxe_flush(&frame[o.ip..o.icrc], version, o.udp - o.ip).is_ok_and(|c| c == f.icrc)
}

/// Put rxe's FLUSH ICRC on an emitted FLUSH frame (`frame` ends with its ICRC).
fn rxe_flush_icrc(frame: &mut [u8], ipv4: bool) {
    let hl = if ipv4 { 20 } else { 40 };
    let version = if ipv4 { roce_wire::icrc::IpVersion::V4 } else { roce_wire::icrc::IpVersion::V6 };
    let n = frame.len();
    if let Ok(c) = roce_wire::icrc::compute_rxe_flush(&frame[14..n - 4], version, hl) {
        frame[n - 4..].copy_from_slice(&c.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multicast_dst_is_the_gids() {
        for a in ["239.1.2.3", "224.0.0.1", "198.18.0.1", "ff0e::1", "::ffff:239.0.0.1", "::ffff:10.0.0.1", "fe80::1"] {
            let ip: IpAddr = a.parse().unwrap();
            assert_eq!(is_multicast_dst(&ip), Gid::from_ip(ip).is_multicast(), "{a}");
        }
    }

    #[test]
    fn pkey_match_is_rxes() {
        assert!(pkey_match(0xffff, 0xffff));
        assert!(pkey_match(0x7fff, 0xffff));
        assert!(!pkey_match(0x7fff, 0x7fff));
        assert!(!pkey_match(0x8000, 0xffff));
        assert!(!pkey_match(0x0000, 0xffff));
        assert!(!pkey_match(0xfffe, 0xffff));
    }
}
