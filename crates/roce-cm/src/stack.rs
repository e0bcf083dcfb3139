//! The engine: one [`Stack`] per RoCE port. This file holds the state, the inputs
//! (`handle_frame`, `handle_timeout`) and the outputs (`poll_transmit`, `poll_timeout`,
//! `poll_event`); the API calls live beside the parts they drive (`api.rs` for ids,
//! `mcast.rs` for multicast, `neigh.rs` for ARP/ND, `qp.rs` for UD QPs, `cm.rs` for CM).

use std::collections::{BTreeMap, HashMap, VecDeque};

use bytes::{Bytes, BytesMut};

/// The hasher of the engine's hash maps: foldhash, seeded per map at random (keys such as a
/// neighbour's address come from the network, so a fixed seed would invite collisions), and
/// several times cheaper than SipHash on the 16-byte MGIDs of the multicast path.
pub(crate) type FastHash = foldhash::fast::RandomState;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use roce_wire::bth::{self, Opcode};
use roce_wire::ext::ExtHeaders;
use roce_wire::frame::{self, rxe_udp_sport, FramePacket, FrameRepr};
use roce_wire::mad::{MadHeader, MadStatus, Method, MgmtClass};
use roce_wire::{ContentError, Error as WireError, Gid, GSI_QKEY, MAD_SIZE, MULTICAST_QPN};

use crate::config::StackConfig;
use crate::counters::{Counters, DropReason};
use crate::event::CmEvent;
use crate::id::{CmId, PortTable};
use crate::mcast::{Group, Member, MemberKey};
use crate::neigh::Neighbor;
use crate::qp::UdQp;
use crate::sa_client::SaClient;
use crate::Instant;

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

/// A frame waiting for transmission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outgoing {
    /// A complete Ethernet frame (ARP, ND, IGMP, MLD).
    Raw(Bytes),
    /// A RoCEv2 packet still to be framed (its MAC may need resolving).
    Roce(RocePacket),
}

/// A RoCEv2 packet before framing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RocePacket {
    pub dst: IpAddr,
    pub dst_mac: Option<[u8; 6]>,
    pub src_qp: u32,
    pub bth: bth::Repr,
    pub ext: ExtHeaders,
    /// Shared, not copied, on its way to the transmit buffer (see [`Stack::tx_bytes`]).
    pub payload: Bytes,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// A MAD request delivered to a registered agent (the umad-like hook an SA host uses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MadRequest {
    /// The requester's address.
    pub src: IpAddr,
    /// The requester's QP (DETH SrcQP).
    pub src_qp: u32,
    /// The requester's GID (its IP as a GID).
    pub src_gid: Gid,
    /// The 256-byte MAD.
    pub mad: [u8; MAD_SIZE],
}

/// One RoCE port's engine. See the crate docs.
#[derive(Debug)]
pub struct Stack {
    pub(crate) cfg: StackConfig,
    pub(crate) rng: u64,
    pub(crate) counters: Counters,
    pub(crate) events: VecDeque<CmEvent>,
    pub(crate) tx: VecDeque<Outgoing>,
    pub(crate) work: BTreeMap<(Instant, u64), Work>,
    /// Where each work item sits in `work`, so that cancelling one is O(log n).
    pub(crate) work_index: HashMap<Work, Vec<(Instant, u64)>, FastHash>,
    pub(crate) work_seq: u64,
    pub(crate) now: Instant,
    // ids
    pub(crate) ids: BTreeMap<CmId, crate::api::IdRecord>,
    pub(crate) next_id: u32,
    pub(crate) ports: PortTable,
    // neighbours
    pub(crate) neighbors: HashMap<IpAddr, Neighbor, FastHash>,
    // SA and multicast
    pub(crate) sa: SaClient,
    pub(crate) groups: HashMap<Gid, Group, FastHash>,
    pub(crate) members: BTreeMap<MemberKey, Member>,
    pub(crate) sa_results: VecDeque<crate::mcast::SaQueryResult>,
    pub(crate) next_member: u64,
    /// Emptied group containers kept for reuse.
    pub(crate) spare: crate::mcast::Spare,
    /// Local users of each IPv4/IPv6 group at IP level (ip_mc_inc_group refcount).
    pub(crate) ip_group_refs: HashMap<IpAddr, u32, FastHash>,
    // QPs
    pub(crate) qps: BTreeMap<u32, UdQp>,
    pub(crate) next_qpn: u32,
    pub(crate) gsi_psn: u32,
    pub(crate) mad_agents: Vec<u8>,
    pub(crate) mad_requests: VecDeque<MadRequest>,
    // CM
    pub(crate) conns: BTreeMap<u32, crate::cm::Conn>,
    /// The buffer queued payloads are cut from ([`Stack::tx_bytes`]).
    pub(crate) tx_arena: BytesMut,
    /// RC QPs, memory regions and their completion queue (owned by rc/).
    pub(crate) rc: crate::rc::Rc,
}

/// The transmit arena's size: 64 MADs. Frames queued from it share it; once they are gone,
/// the next payload reuses it from the start.
const TX_ARENA: usize = 64 * MAD_SIZE;

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
            rng: splitmix(seed),
            counters: Counters::default(),
            events: VecDeque::new(),
            tx: VecDeque::new(),
            work: BTreeMap::new(),
            work_index: HashMap::default(),
            work_seq: 0,
            now: Instant::ZERO,
            ids: BTreeMap::new(),
            next_id: 1,
            ports: PortTable::default(),
            neighbors: HashMap::default(),
            sa,
            groups: HashMap::default(),
            members: BTreeMap::new(),
            sa_results: VecDeque::new(),
            next_member: 1,
            spare: Default::default(),
            ip_group_refs: HashMap::default(),
            qps: BTreeMap::new(),
            next_qpn: 0x11,
            gsi_psn: 0,
            mad_agents: Vec::new(),
            mad_requests: VecDeque::new(),
            conns: BTreeMap::new(),
            tx_arena: BytesMut::new(),
            rc: crate::rc::Rc::new(splitmix(seed ^ 0x0c0c)),
            cfg,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &StackConfig {
        &self.cfg
    }

    /// Bound (port space, port) pairs with their ids.
    pub fn bound_ports(&self) -> Vec<(crate::id::PortSpace, u16, Vec<CmId>)> {
        self.ports.iter().map(|((ps, port), ids)| (*ps, *port, ids.iter().copied().collect())).collect()
    }

    /// Pending timers and queued work items (for leak checks).
    pub fn pending_work(&self) -> usize {
        self.work.len()
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
    pub fn is_local(&self, ip: &IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => self.cfg.ipv4.is_some_and(|(x, _)| x == *a),
            IpAddr::V6(a) => *a == self.cfg.link_local() || self.cfg.ipv6.iter().any(|(x, _)| x == a),
        }
    }

    /// Our source address for talking to `dst`.
    pub(crate) fn source_for(&self, dst: &IpAddr) -> Option<IpAddr> {
        match dst {
            IpAddr::V4(_) => self.cfg.ipv4.map(|(a, _)| IpAddr::V4(a)),
            IpAddr::V6(d) => {
                if (d.segments()[0] & 0xffc0) == 0xfe80 || self.cfg.ipv6.is_empty() {
                    Some(IpAddr::V6(self.cfg.link_local()))
                } else {
                    Some(IpAddr::V6(self.cfg.ipv6[0].0))
                }
            }
        }
    }

    /// Whether `dst` is on one of our links (the stack does no routing).
    pub(crate) fn on_link(&self, dst: &IpAddr) -> bool {
        match dst {
            IpAddr::V4(d) => self.cfg.ipv4.is_some_and(|(a, p)| same_prefix_v4(a, *d, p)),
            IpAddr::V6(d) => {
                (d.segments()[0] & 0xffc0) == 0xfe80 || self.cfg.ipv6.iter().any(|(a, p)| same_prefix_v6(*a, *d, *p))
            }
        }
    }

    pub(crate) fn random(&mut self) -> u64 {
        self.rng = splitmix(self.rng);
        self.rng
    }

    pub(crate) fn schedule(&mut self, at: Instant, w: Work) {
        self.work_seq += 1;
        let key = (at, self.work_seq);
        self.work_index.entry(w.clone()).or_default().push(key);
        self.work.insert(key, w);
    }

    fn unindex(&mut self, key: (Instant, u64), w: &Work) {
        if let Some(v) = self.work_index.get_mut(w) {
            v.retain(|k| *k != key);
            if v.is_empty() {
                self.work_index.remove(w);
            }
        }
    }

    /// Cancel every scheduled instance of exactly this work item.
    pub(crate) fn cancel(&mut self, w: &Work) {
        if let Some(keys) = self.work_index.remove(w) {
            for k in keys {
                self.work.remove(&k);
            }
        }
    }

    /// Cancel every work item matching `pred` (a scan: prefer [`Stack::cancel`]).
    pub(crate) fn unschedule(&mut self, pred: impl Fn(&Work) -> bool) {
        let doomed: Vec<Work> = self.work_index.keys().filter(|w| pred(w)).cloned().collect();
        for w in doomed {
            self.cancel(&w);
        }
    }

    pub(crate) fn push_event(&mut self, ev: CmEvent) {
        self.events.push_back(ev);
    }

    /// A payload to queue, cut from the transmit arena: once every frame cut from the arena
    /// has been sent (their `Bytes` dropped), `reserve` takes the same allocation back, so
    /// the steady state allocates nothing per frame.
    pub(crate) fn tx_bytes(&mut self, data: &[u8]) -> Bytes {
        if self.tx_arena.capacity() < data.len() {
            self.tx_arena.reserve(TX_ARENA.max(data.len()));
        }
        self.tx_arena.extend_from_slice(data);
        self.tx_arena.split().freeze()
    }

    // ----------------------------------------------------------------------------------
    // Outputs

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<CmEvent> {
        let e = self.events.pop_front();
        if e.is_none() {
            release_burst_capacity(&mut self.events);
        }
        e
    }

    /// When `handle_timeout` must next be called (`None`: nothing pending). A time at or
    /// before now means "call it now".
    pub fn poll_timeout(&self) -> Option<Instant> {
        let work = self.work.keys().next().map(|(t, _)| *t);
        let sa = self.sa.poll_timeout();
        [work, sa, self.rc.poll_timeout()].into_iter().flatten().min()
    }

    /// The next frame to send, written into `buf`; returns its length. A frame whose
    /// destination MAC is not yet known is held back until ARP/ND resolves it (or counted as
    /// dropped when resolution fails).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        self.now = self.now.max(now);
        // Drivers poll until `None` after every input: answer that cheaply.
        if self.tx.is_empty() && !self.sa.has_outgoing() && self.rc.is_empty() {
            release_burst_capacity(&mut self.tx);
            return None;
        }
        self.transmit_next(now, buf)
    }

    #[inline(never)]
    fn transmit_next(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        loop {
            let out = match self.tx.pop_front() {
                Some(o) => o,
                None => {
                    release_burst_capacity(&mut self.tx);
                    if let Some(p) = self.rc.poll_transmit(now) {
                        self.tx.push_back(crate::rc::outgoing(p));
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
                Outgoing::Roce(p) => {
                    let mac = match p.dst_mac.or_else(|| self.neighbor_mac(&p.dst)) {
                        Some(m) => m,
                        None => {
                            self.park_for_neighbor(now, p);
                            continue;
                        }
                    };
                    match self.frame_roce(&p, mac, buf) {
                        Some(n) => {
                            self.counters.tx_frames += 1;
                            return Some(n);
                        }
                        None => {
                            self.counters.drop(DropReason::TransmitBufferTooSmall);
                            continue;
                        }
                    }
                }
            }
        }
    }

    fn frame_roce(&self, p: &RocePacket, dst_mac: [u8; 6], buf: &mut [u8]) -> Option<usize> {
        let r = self.roce_repr(p, dst_mac, &p.payload)?;
        r.emit(buf).ok()
    }

    /// The frame of a RoCE packet, carrying `payload`.
    fn roce_repr<'a>(&self, p: &RocePacket, dst_mac: [u8; 6], payload: &'a [u8]) -> Option<FrameRepr<'a>> {
        let src = self.source_for(&p.dst)?;
        let mut r = FrameRepr::new(self.cfg.mac, dst_mac, src, p.dst, p.bth, p.ext, payload);
        r.udp.source_port = rxe_udp_sport(p.src_qp);
        match &mut r.ip {
            frame::IpHeader::V4(h) => {
                h.time_to_live = p.hop_limit;
                h.dscp = etherparse::IpDscp::try_new(p.traffic_class >> 2).unwrap_or(etherparse::IpDscp::ZERO);
                h.ecn = etherparse::IpEcn::try_new(p.traffic_class & 3).unwrap_or(etherparse::IpEcn::ZERO);
            }
            frame::IpHeader::V6(h) => {
                h.hop_limit = p.hop_limit;
                h.traffic_class = p.traffic_class;
            }
        }
        Some(r)
    }

    /// The next SA request, its MAD written straight into the transmit buffer and the frame
    /// built around it: no copy of the MAD, no allocation. `None` (nothing consumed) when no
    /// request waits, the SA's MAC is unknown or `buf` is too small.
    fn emit_sa_mad_in_place(&mut self, now: Instant, sa: IpAddr, buf: &mut [u8]) -> Option<usize> {
        if !self.sa.has_outgoing() {
            return None;
        }
        let mac = self.neighbor_mac(&sa)?;
        let p = self.gsi_header(sa, 1, Bytes::new());
        let mut r = self.roce_repr(&p, mac, &[])?;
        r.bth.pad_count = 0; // a MAD is 256 bytes: no pad
        let at = r.header_len();
        if r.buffer_len() + MAD_SIZE > buf.len() || !self.sa.poll_outgoing_into(now, &mut buf[at..at + MAD_SIZE]) {
            return None;
        }
        self.gsi_psn = (self.gsi_psn + 1) & 0xff_ffff;
        match r.emit_around(buf, MAD_SIZE) {
            Ok(n) => Some(n),
            Err(_) => {
                // Unreachable with the length checked above; never lost silently all the same.
                self.counters.drop(DropReason::TransmitBufferTooSmall);
                None
            }
        }
    }

    /// The headers of a UD SEND_ONLY on QP1 (PSN not advanced).
    fn gsi_header(&self, dst: IpAddr, dst_qp: u32, payload: Bytes) -> RocePacket {
        let mut b = bth::Repr::new(Opcode::UdSendOnly, dst_qp, self.gsi_psn);
        b.pkey = self.cfg.pkey;
        b.ack_req = true; // rxe sets AckReq on GSI (QP1 is type GSI, not UD)
        RocePacket {
            dst,
            dst_mac: None,
            src_qp: 1,
            bth: b,
            ext: ExtHeaders::deth(GSI_QKEY, 1),
            payload,
            hop_limit: 64,
            traffic_class: 0,
        }
    }

    /// A UD SEND_ONLY on QP1 carrying a MAD, framed as rxe frames GSI traffic.
    pub(crate) fn gsi_packet(&mut self, dst: IpAddr, dst_qp: u32, mad: &[u8]) -> RocePacket {
        let payload = self.tx_bytes(mad);
        let p = self.gsi_header(dst, dst_qp, payload);
        self.gsi_psn = (self.gsi_psn + 1) & 0xff_ffff;
        p
    }

    // ----------------------------------------------------------------------------------
    // Inputs

    /// Run due timers: SA retransmissions and deadlines, neighbour probes, queued work.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = self.now.max(now);
        for (tid, txn) in self.sa.handle_timeout(now) {
            self.sa_transaction_failed(now, tid, txn.owner, None);
        }
        self.rc.handle_timeout(now);
        while let Some((&(at, seq), _)) = self.work.iter().next() {
            if at > now {
                break;
            }
            let Some(w) = self.work.remove(&(at, seq)) else { break };
            self.unindex((at, seq), &w);
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
            Work::CmTimer(comm_id) => self.cm_timer(now, comm_id),
        }
    }

    /// Handle one received Ethernet frame. Every frame ends accepted or counted as dropped
    /// with its reason.
    pub fn handle_frame(&mut self, now: Instant, bytes: &[u8]) {
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
        // The zero-copy view: every check of `frame::parse`, nothing copied; the owned headers
        // are built only for the UD QPs that hand a datagram to the application.
        match FramePacket::new_checked(bytes) {
            Ok(p) => self.handle_roce(now, &p),
            Err(e) => self.handle_not_roce(now, bytes, e),
        }
    }

    fn handle_not_roce(&mut self, now: Instant, bytes: &[u8], e: WireError) {
        let reason = match e {
            WireError::Content { kind, .. } => match kind {
                ContentError::UnsupportedEtherType(_)
                | ContentError::NotUdp { .. }
                | ContentError::NotRoceV2Port { .. } => {
                    return self.handle_l2(now, bytes);
                }
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
        if !Gid::from_ip(dst).is_multicast() && !self.is_local(&dst) {
            self.counters.drop(DropReason::NotForUs);
            return;
        }
        let b = p.bth();
        if !pkey_match(b.pkey(), self.cfg.pkey) {
            self.counters.drop(DropReason::BadPkey);
            return;
        }
        let qpn = b.dest_qp();
        let ud_opcode = matches!(b.opcode(), Opcode::UdSendOnly | Opcode::UdSendOnlyWithImmediate);
        if qpn == 0 {
            self.counters.drop(DropReason::UnknownQp);
            return;
        }
        if b.opcode().transport() == bth::Transport::Rc && self.rc.has_qp(qpn) {
            // RC packets go to rc/ in their owned header form (no copy of the payload).
            match p.to_frame() {
                Ok(f) => {
                    self.counters.rx_accepted += 1;
                    let r = &f.repr;
                    self.rc.handle_packet(now, r.ip.source(), &r.bth, &r.ext, r.payload);
                }
                Err(e) => self.counters.drop(DropReason::Malformed(e.layer())),
            }
            return;
        }
        if !ud_opcode {
            // Only UD QPs exist here (QP1 is GSI): any other opcode has no QP to go to.
            let reason = if qpn == 1 || qpn == MULTICAST_QPN || self.qps.contains_key(&qpn) {
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
            self.deliver_multicast(&f, deth);
        } else {
            self.deliver_unicast(&f, deth);
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
        if self.mad_agents.contains(&class) {
            let mut mad = [0u8; MAD_SIZE];
            mad.copy_from_slice(payload);
            self.mad_requests.push_back(MadRequest { src, src_qp, src_gid: Gid::from_ip(src), mad });
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
            let p = self.gsi_packet(src, src_qp, &resp);
            self.tx.push_back(Outgoing::Roce(p));
            self.counters.rx_accepted += 1;
        } else {
            self.counters.drop(DropReason::UnhandledMad);
        }
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
        if !self.mad_agents.contains(&mgmt_class) {
            self.mad_agents.push(mgmt_class);
        }
    }

    /// The next MAD request for a registered agent.
    pub fn poll_mad_request(&mut self) -> Option<MadRequest> {
        self.mad_requests.pop_front()
    }

    /// Send a MAD from QP1 to `dst`'s QP `dst_qp` (an agent's response).
    pub fn send_mad(&mut self, dst: IpAddr, dst_qp: u32, mad: &[u8; MAD_SIZE]) {
        let p = self.gsi_packet(dst, dst_qp, mad);
        self.tx.push_back(Outgoing::Roce(p));
    }
}

pub(crate) fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn same_prefix_v4(a: Ipv4Addr, b: Ipv4Addr, prefix: u8) -> bool {
    let p = u32::from(prefix.min(32));
    let mask = if p == 0 { 0 } else { u32::MAX << (32 - p) };
    (u32::from(a) & mask) == (u32::from(b) & mask)
}

fn same_prefix_v6(a: Ipv6Addr, b: Ipv6Addr, prefix: u8) -> bool {
    let p = u32::from(prefix.min(128));
    let mask = if p == 0 { 0 } else { u128::MAX << (128 - p) };
    (u128::from(a) & mask) == (u128::from(b) & mask)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkey_match_is_rxes() {
        assert!(pkey_match(0xffff, 0xffff));
        assert!(pkey_match(0x7fff, 0xffff));
        assert!(!pkey_match(0x7fff, 0x7fff));
        assert!(!pkey_match(0x8000, 0xffff));
        assert!(!pkey_match(0x0000, 0xffff));
        assert!(!pkey_match(0xfffe, 0xffff));
    }

    #[test]
    fn prefixes() {
        assert!(same_prefix_v4(Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 200), 24));
        assert!(!same_prefix_v4(Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 1, 1), 24));
        assert!(same_prefix_v6("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap(), 64));
    }
}
