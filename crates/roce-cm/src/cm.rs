//! Communication management on QP1: SIDR for UD port spaces and the REQ/REP/RTU/DREQ/DREP
//! handshake for connected ones, with the RDMA-CM private-data header, service IDs
//! `(ps << 16) | port`, retries and TIMEWAIT [cm.c; cma.c; protocol.md §6.5].
//!
//! Deliberate simplifications (spec/cm-states.md): MRA is accepted and ignored; an active
//! id always answers a REP with RTU and reports ESTABLISHED (the kernel reports
//! CONNECT_RESPONSE to ids without a QP and lets them call accept); LAP/APR are not handled.

use std::net::{IpAddr, SocketAddr};

use roce_wire::cm::{self, cma_hdr, CmMessage, RejReason, SidrStatus};
use roce_wire::mad::MadHeader;
use roce_wire::{Gid, RDMA_UDP_QKEY};

use crate::counters::DropReason;
use crate::event::{AddressHandle, CmEvent, ConnParam, EventKind, EventParam, UdParam};
use crate::id::{CmId, CmState};
use crate::stack::{Outgoing, Stack, Work};
use crate::{Errno, Instant};

/// Where a connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnState {
    ReqSent,
    ReqRcvd,
    RepSent,
    Established,
    DreqSent,
    TimeWait,
    SidrReqSent,
    SidrReqRcvd,
}

/// One CM connection (or SIDR resolution), keyed by its local communication ID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Conn {
    pub id: CmId,
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub peer: IpAddr,
    pub peer_gsi_qp: u32,
    pub state: ConnState,
    pub tid: u64,
    pub retries_left: u32,
    pub last: Option<CmMessage>,
    pub remote_qpn: u32,
    pub service_id: u64,
}

/// Connection parameters for connect/accept (`struct rdma_conn_param`, trimmed).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnectParam {
    /// Private data after the RDMA-CM header (REQ: up to 56 bytes; SIDR_REQ: 180).
    pub private_data: Vec<u8>,
    /// Responder resources.
    pub responder_resources: u8,
    /// Initiator depth.
    pub initiator_depth: u8,
    /// Retry count (3 bits).
    pub retry_count: u8,
    /// RNR retry count (3 bits).
    pub rnr_retry_count: u8,
}

fn copy_private(dst: &mut [u8], at: usize, data: &[u8]) {
    let n = data.len().min(dst.len().saturating_sub(at));
    dst[at..at + n].copy_from_slice(&data[..n]);
}

fn cma_header_for(src: SocketAddr, dst: SocketAddr) -> cma_hdr::Repr {
    match (src, dst) {
        (SocketAddr::V4(s), SocketAddr::V4(d)) => cma_hdr::Repr::new_v4(*s.ip(), s.port(), *d.ip()),
        (s, d) => {
            let v6 = |a: SocketAddr| match a {
                SocketAddr::V6(x) => *x.ip(),
                SocketAddr::V4(x) => x.ip().to_ipv6_mapped(),
            };
            cma_hdr::Repr::new_v6(v6(s), s.port(), v6(d))
        }
    }
}

impl Stack {
    fn cm_send(&mut self, peer: IpAddr, peer_qp: u32, tid: u64, msg: &CmMessage) {
        let mad = msg.to_mad(tid).to_bytes();
        let p = self.gsi_packet(peer, peer_qp, &mad);
        self.tx.push_back(Outgoing::Roce(p));
    }

    fn new_comm_id(&mut self) -> u32 {
        loop {
            let c = self.random() as u32;
            if c != 0 && !self.conns.contains_key(&c) {
                return c;
            }
        }
    }

    fn conn_event(&mut self, id: CmId, kind: EventKind, status: i32, param: EventParam) {
        if self.ids.contains_key(&id) {
            self.push_event(CmEvent { id, listen_id: None, kind, status, param });
        }
    }

    /// `rdma_connect`: REQ (connected port spaces) or SIDR_REQ (UD).
    pub(crate) fn start_connect(&mut self, now: Instant, id: CmId, param: &ConnectParam) -> Result<(), Errno> {
        let rec = self.ids.get(&id).ok_or(Errno::ENOENT)?.clone();
        let (Some(src), Some(dst)) = (rec.src, rec.dst) else { return Err(Errno::EINVAL) };
        let service_id = cma_hdr::service_id(rec.ps.value(), dst.port());
        let comm = self.new_comm_id();
        let hdr = cma_header_for(src, dst);
        let tid = (u64::from(self.random() as u32) << 32) | u64::from(comm);
        let (msg, state) = if rec.ps.is_ud() {
            let mut m = cm::SidrReqRepr::default();
            m.request_id = comm;
            m.partition_key = self.cfg.pkey;
            m.service_id = service_id;
            hdr.emit_bytes(&mut m.private_data);
            copy_private(&mut m.private_data, cma_hdr::HEADER_LEN, &param.private_data);
            (CmMessage::SidrReq(m), ConnState::SidrReqSent)
        } else {
            let mut m = cm::ReqRepr::default();
            m.local_comm_id = comm;
            m.service_id = service_id;
            m.local_ca_guid = self.cfg.link_local().octets()[8..].iter().fold(0u64, |a, b| (a << 8) | u64::from(*b));
            m.local_qpn = rec.qpn.unwrap_or(0);
            m.responder_resources = param.responder_resources;
            m.initiator_depth = param.initiator_depth;
            m.remote_cm_response_timeout = 20;
            m.starting_psn = (self.random() as u32) & 0xff_ffff;
            m.local_cm_response_timeout = 20;
            m.retry_count = param.retry_count & 7;
            m.partition_key = self.cfg.pkey;
            m.path_mtu = self.cfg.mtu;
            m.rnr_retry_count = param.rnr_retry_count & 7;
            m.max_cm_retries = 15;
            m.primary_path.local_lid = 0xffff;
            m.primary_path.remote_lid = 0xffff;
            m.primary_path.local_gid = Gid::from_ip(src.ip());
            m.primary_path.remote_gid = Gid::from_ip(dst.ip());
            m.primary_path.hop_limit = 64;
            m.primary_path.local_ack_timeout = 18;
            hdr.emit_bytes(&mut m.private_data);
            copy_private(&mut m.private_data, cma_hdr::HEADER_LEN, &param.private_data);
            (CmMessage::Req(m), ConnState::ReqSent)
        };
        let conn = Conn {
            id,
            local_comm_id: comm,
            remote_comm_id: 0,
            peer: dst.ip(),
            peer_gsi_qp: 1,
            state,
            tid,
            retries_left: self.cfg.cm_max_retries,
            last: Some(msg),
            remote_qpn: 0,
            service_id,
        };
        self.cm_send(dst.ip(), 1, tid, &msg);
        self.conns.insert(comm, conn);
        if let Some(r) = self.ids.get_mut(&id) {
            r.conn = Some(comm);
        }
        self.schedule(now + self.cfg.cm_response_timeout, Work::CmTimer(comm));
        Ok(())
    }

    /// A CM timer: resend the last message, give up, or end TIMEWAIT.
    pub(crate) fn cm_timer(&mut self, now: Instant, comm: u32) {
        let Some(c) = self.conns.get_mut(&comm) else { return };
        match c.state {
            ConnState::TimeWait => {
                let id = c.id;
                self.conns.remove(&comm);
                if let Some(r) = self.ids.get_mut(&id) {
                    r.conn = None;
                }
                self.conn_event(id, EventKind::TimewaitExit, 0, EventParam::None);
            }
            ConnState::ReqSent | ConnState::SidrReqSent | ConnState::DreqSent | ConnState::RepSent => {
                if c.retries_left > 0 {
                    c.retries_left -= 1;
                    let (peer, qp, tid, msg) = (c.peer, c.peer_gsi_qp, c.tid, c.last);
                    if let Some(msg) = msg {
                        self.cm_send(peer, qp, tid, &msg);
                    }
                    self.schedule(now + self.cfg.cm_response_timeout, Work::CmTimer(comm));
                    return;
                }
                let (id, state) = (c.id, c.state);
                self.conns.remove(&comm);
                if let Some(r) = self.ids.get_mut(&id) {
                    r.conn = None;
                }
                match state {
                    ConnState::DreqSent => {
                        self.set_state(id, CmState::Disconnect);
                        self.conn_event(id, EventKind::Disconnected, Errno::ETIMEDOUT.status(), EventParam::None);
                    }
                    ConnState::RepSent => {
                        self.conn_event(id, EventKind::ConnectError, Errno::ETIMEDOUT.status(), EventParam::None);
                    }
                    _ => self.conn_event(id, EventKind::Unreachable, Errno::ETIMEDOUT.status(), EventParam::None),
                }
            }
            _ => {}
        }
    }

    fn conn_by_remote(&self, remote_comm: u32, peer: IpAddr) -> Option<u32> {
        self.conns.values().find(|c| c.remote_comm_id == remote_comm && c.peer == peer).map(|c| c.local_comm_id)
    }

    /// A CM MAD arrived on QP1.
    pub(crate) fn handle_cm_mad(&mut self, now: Instant, src: IpAddr, src_qp: u32, h: &MadHeader, payload: &[u8]) {
        let msg = match CmMessage::parse(h.attribute_id, &payload[24..256]) {
            Ok(m) => m,
            Err(_) => {
                self.counters.drop(DropReason::BadMad);
                return;
            }
        };
        let tid = h.transaction_id;
        let handled = match msg {
            CmMessage::Req(r) => self.cm_req(now, src, src_qp, tid, &r),
            CmMessage::SidrReq(r) => self.cm_sidr_req(now, src, src_qp, tid, &r),
            CmMessage::Rep(r) => self.cm_rep(now, src, tid, &r),
            CmMessage::Rtu(r) => self.cm_rtu(r.remote_comm_id),
            CmMessage::Rej(r) => self.cm_rej(r.remote_comm_id, r.reason),
            CmMessage::Dreq(r) => self.cm_dreq(now, src, src_qp, tid, r.local_comm_id, r.remote_comm_id),
            CmMessage::Drep(r) => self.cm_drep(now, r.remote_comm_id),
            CmMessage::SidrRep(r) => self.cm_sidr_rep(src, &r),
            CmMessage::Mra(_) => true,
            CmMessage::Other { .. } => false,
        };
        if handled {
            self.counters.rx_accepted += 1;
        } else {
            self.counters.drop(DropReason::UnmatchedCm);
        }
    }

    /// The listener for a service ID and destination address.
    fn find_listener(&self, service_id: u64, dst: IpAddr) -> Option<CmId> {
        if !cma_hdr::is_ip_service_id(service_id) {
            return None;
        }
        let (ps, port) = cma_hdr::split_service_id(service_id);
        self.ids
            .iter()
            .filter(|(_, r)| r.state == CmState::Listen && r.ps.value() == ps)
            .find(|(_, r)| r.src.is_some_and(|s| s.port() == port && (s.ip().is_unspecified() || s.ip() == dst)))
            .map(|(id, _)| *id)
    }

    fn spawn_child(&mut self, listener: CmId, local: SocketAddr, remote: SocketAddr) -> CmId {
        let l = self.ids.get(&listener).cloned();
        let id = self.alloc_id(
            l.as_ref().map_or(crate::id::PortSpace::Tcp, |l| l.ps),
            l.as_ref().map_or(crate::id::QpType::Rc, |l| l.qp_type),
        );
        if let Some(r) = self.ids.get_mut(&id) {
            r.state = CmState::Connect;
            r.src = Some(local);
            r.dst = Some(remote);
            r.has_device = true;
            r.listen_parent = Some(listener);
        }
        id
    }

    fn cm_req(&mut self, _now: Instant, src: IpAddr, src_qp: u32, tid: u64, r: &cm::ReqRepr) -> bool {
        // A retransmitted REQ for a connection we already have: the kernel answers with MRA
        // or ignores it; we ignore it.
        if self.conn_by_remote(r.local_comm_id, src).is_some() {
            return true;
        }
        let hdr = r.cma_header().ok();
        let dst_ip = hdr.map(|h| h.dst_ip()).unwrap_or_else(|| self.source_for(&src).unwrap_or(src));
        let Some(listener) = self.find_listener(r.service_id, dst_ip) else {
            let mut rej = cm::RejRepr::default();
            rej.remote_comm_id = r.local_comm_id;
            rej.message_rejected = cm::MsgResponse::Req;
            rej.reason = RejReason::InvalidServiceId;
            self.cm_send(src, src_qp, tid, &CmMessage::Rej(rej));
            return true;
        };
        let port = cma_hdr::split_service_id(r.service_id).1;
        let local = SocketAddr::new(dst_ip, port);
        let remote = SocketAddr::new(hdr.map(|h| h.src_ip()).unwrap_or(src), hdr.map_or(0, |h| h.src_port));
        let child = self.spawn_child(listener, local, remote);
        let comm = self.new_comm_id();
        self.conns.insert(
            comm,
            Conn {
                id: child,
                local_comm_id: comm,
                remote_comm_id: r.local_comm_id,
                peer: src,
                peer_gsi_qp: src_qp,
                state: ConnState::ReqRcvd,
                tid,
                retries_left: self.cfg.cm_max_retries,
                last: None,
                remote_qpn: r.local_qpn,
                service_id: r.service_id,
            },
        );
        if let Some(rec) = self.ids.get_mut(&child) {
            rec.conn = Some(comm);
        }
        let param = ConnParam {
            private_data: r.private_data[cma_hdr::HEADER_LEN..].to_vec(),
            responder_resources: r.responder_resources,
            initiator_depth: r.initiator_depth,
            remote_qpn: r.local_qpn,
            rnr_retry_count: r.rnr_retry_count,
            retry_count: r.retry_count,
        };
        self.push_event(CmEvent {
            id: child,
            listen_id: Some(listener),
            kind: EventKind::ConnectRequest,
            status: 0,
            param: EventParam::Conn(param),
        });
        true
    }

    fn cm_sidr_req(&mut self, _now: Instant, src: IpAddr, src_qp: u32, tid: u64, r: &cm::SidrReqRepr) -> bool {
        let hdr = r.cma_header().ok();
        let dst_ip = hdr.map(|h| h.dst_ip()).unwrap_or_else(|| self.source_for(&src).unwrap_or(src));
        let Some(listener) = self.find_listener(r.service_id, dst_ip) else {
            let mut rep = cm::SidrRepRepr::default();
            rep.request_id = r.request_id;
            rep.status = SidrStatus::ServiceIdNotSupported;
            rep.service_id = r.service_id;
            self.cm_send(src, src_qp, tid, &CmMessage::SidrRep(rep));
            return true;
        };
        let port = cma_hdr::split_service_id(r.service_id).1;
        let remote = SocketAddr::new(hdr.map(|h| h.src_ip()).unwrap_or(src), hdr.map_or(0, |h| h.src_port));
        let child = self.spawn_child(listener, SocketAddr::new(dst_ip, port), remote);
        let comm = self.new_comm_id();
        self.conns.insert(
            comm,
            Conn {
                id: child,
                local_comm_id: comm,
                remote_comm_id: r.request_id,
                peer: src,
                peer_gsi_qp: src_qp,
                state: ConnState::SidrReqRcvd,
                tid,
                retries_left: 0,
                last: None,
                remote_qpn: 0,
                service_id: r.service_id,
            },
        );
        if let Some(rec) = self.ids.get_mut(&child) {
            rec.conn = Some(comm);
        }
        let param = ConnParam { private_data: r.private_data[cma_hdr::HEADER_LEN..].to_vec(), ..ConnParam::default() };
        self.push_event(CmEvent {
            id: child,
            listen_id: Some(listener),
            kind: EventKind::ConnectRequest,
            status: 0,
            param: EventParam::Conn(param),
        });
        true
    }

    fn cm_rep(&mut self, _now: Instant, src: IpAddr, tid: u64, r: &cm::RepRepr) -> bool {
        let Some(c) = self.conns.get_mut(&r.remote_comm_id) else { return false };
        if c.peer != src {
            return false;
        }
        if c.state == ConnState::Established {
            // A repeated REP: our RTU was lost; send it again.
        } else if c.state != ConnState::ReqSent {
            return false;
        }
        c.remote_comm_id = r.local_comm_id;
        c.remote_qpn = r.local_qpn;
        c.state = ConnState::Established;
        let (id, peer, qp) = (c.id, c.peer, c.peer_gsi_qp);
        let mut rtu = cm::RtuRepr::default();
        rtu.local_comm_id = r.remote_comm_id;
        rtu.remote_comm_id = r.local_comm_id;
        self.cm_send(peer, qp, tid, &CmMessage::Rtu(rtu));
        let param = ConnParam {
            private_data: r.private_data.to_vec(),
            responder_resources: r.responder_resources,
            initiator_depth: r.initiator_depth,
            remote_qpn: r.local_qpn,
            rnr_retry_count: r.rnr_retry_count,
            retry_count: 0,
        };
        self.unschedule(|w| *w == Work::CmTimer(r.remote_comm_id));
        self.conn_event(id, EventKind::Established, 0, EventParam::Conn(param));
        true
    }

    fn cm_rtu(&mut self, local_comm: u32) -> bool {
        let Some(c) = self.conns.get_mut(&local_comm) else { return false };
        if c.state != ConnState::RepSent {
            return c.state == ConnState::Established;
        }
        c.state = ConnState::Established;
        let id = c.id;
        let remote_qpn = c.remote_qpn;
        self.unschedule(|w| *w == Work::CmTimer(local_comm));
        self.conn_event(
            id,
            EventKind::Established,
            0,
            EventParam::Conn(ConnParam { remote_qpn, ..ConnParam::default() }),
        );
        true
    }

    fn cm_rej(&mut self, local_comm: u32, reason: RejReason) -> bool {
        let Some(c) = self.conns.remove(&local_comm) else { return false };
        self.unschedule(|w| *w == Work::CmTimer(local_comm));
        if let Some(r) = self.ids.get_mut(&c.id) {
            r.conn = None;
        }
        self.conn_event(c.id, EventKind::Rejected, i32::from(u16::from(reason)), EventParam::None);
        true
    }

    fn enter_timewait(&mut self, now: Instant, comm: u32) {
        if let Some(c) = self.conns.get_mut(&comm) {
            c.state = ConnState::TimeWait;
            let id = c.id;
            self.unschedule(|w| *w == Work::CmTimer(comm));
            self.schedule(now + self.cfg.timewait, Work::CmTimer(comm));
            self.set_state(id, CmState::Disconnect);
        }
    }

    fn cm_dreq(&mut self, now: Instant, src: IpAddr, src_qp: u32, tid: u64, remote_comm: u32, local_comm: u32) -> bool {
        let Some(c) = self.conns.get(&local_comm) else {
            // Unknown connection: the CM still answers DREP so the peer can finish.
            let mut drep = cm::DrepRepr::default();
            drep.remote_comm_id = remote_comm;
            self.cm_send(src, src_qp, tid, &CmMessage::Drep(drep));
            return false;
        };
        let (id, state) = (c.id, c.state);
        let mut drep = cm::DrepRepr::default();
        drep.local_comm_id = local_comm;
        drep.remote_comm_id = remote_comm;
        self.cm_send(src, src_qp, tid, &CmMessage::Drep(drep));
        if matches!(state, ConnState::Established | ConnState::DreqSent) {
            self.enter_timewait(now, local_comm);
            self.conn_event(id, EventKind::Disconnected, 0, EventParam::None);
        }
        true
    }

    fn cm_drep(&mut self, now: Instant, local_comm: u32) -> bool {
        let Some(c) = self.conns.get(&local_comm) else { return false };
        if c.state != ConnState::DreqSent {
            return false;
        }
        let id = c.id;
        self.enter_timewait(now, local_comm);
        self.conn_event(id, EventKind::Disconnected, 0, EventParam::None);
        true
    }

    fn cm_sidr_rep(&mut self, src: IpAddr, r: &cm::SidrRepRepr) -> bool {
        let Some(c) = self.conns.get(&r.request_id) else { return false };
        if c.state != ConnState::SidrReqSent || c.peer != src {
            return false;
        }
        let id = c.id;
        let comm = r.request_id;
        self.conns.remove(&comm);
        self.unschedule(|w| *w == Work::CmTimer(comm));
        if let Some(rec) = self.ids.get_mut(&id) {
            rec.conn = None;
        }
        if r.status == SidrStatus::Success {
            let ah = AddressHandle {
                dgid: Gid::from_ip(src),
                sgid: self.source_for(&src).map(Gid::from_ip).unwrap_or_default(),
                dmac: self.neighbor_mac(&src).unwrap_or([0; 6]),
                hop_limit: 64,
                traffic_class: 0,
                flow_label: 0,
                sl: 0,
            };
            self.conn_event(id, EventKind::Established, 0, EventParam::Ud(UdParam { ah, qp_num: r.qpn, qkey: r.qkey }));
        } else {
            self.conn_event(id, EventKind::Unreachable, i32::from(u8::from(r.status)), EventParam::None);
        }
        true
    }

    /// `rdma_accept` on a child id: REP (connected) or SIDR_REP (UD).
    pub(crate) fn cm_accept(&mut self, now: Instant, id: CmId, param: &ConnectParam) -> Result<(), Errno> {
        let comm = self.ids.get(&id).and_then(|r| r.conn).ok_or(Errno::EINVAL)?;
        let qpn = self.ids.get(&id).and_then(|r| r.qpn).unwrap_or(0);
        let c = self.conns.get_mut(&comm).ok_or(Errno::EINVAL)?;
        match c.state {
            ConnState::ReqRcvd => {
                let mut rep = cm::RepRepr::default();
                rep.local_comm_id = comm;
                rep.remote_comm_id = c.remote_comm_id;
                rep.local_qpn = qpn;
                rep.responder_resources = param.responder_resources;
                rep.initiator_depth = param.initiator_depth;
                rep.rnr_retry_count = param.rnr_retry_count & 7;
                copy_private(&mut rep.private_data, 0, &param.private_data);
                c.state = ConnState::RepSent;
                let msg = CmMessage::Rep(rep);
                c.last = Some(msg);
                let (peer, qp, tid) = (c.peer, c.peer_gsi_qp, c.tid);
                self.cm_send(peer, qp, tid, &msg);
                self.schedule(now + self.cfg.cm_response_timeout, Work::CmTimer(comm));
                Ok(())
            }
            ConnState::SidrReqRcvd => {
                let mut rep = cm::SidrRepRepr::default();
                rep.request_id = c.remote_comm_id;
                rep.status = SidrStatus::Success;
                rep.qpn = qpn;
                rep.service_id = c.service_id;
                rep.qkey = RDMA_UDP_QKEY;
                copy_private(&mut rep.private_data, 0, &param.private_data);
                let (peer, qp, tid) = (c.peer, c.peer_gsi_qp, c.tid);
                self.conns.remove(&comm);
                if let Some(r) = self.ids.get_mut(&id) {
                    r.conn = None;
                }
                self.cm_send(peer, qp, tid, &CmMessage::SidrRep(rep));
                Ok(())
            }
            _ => Err(Errno::EINVAL),
        }
    }

    /// `rdma_reject`: REJ (consumer defined, 28) or SIDR_REP with status Rejected.
    pub(crate) fn cm_reject(&mut self, id: CmId, private_data: &[u8]) -> Result<(), Errno> {
        let comm = self.ids.get(&id).and_then(|r| r.conn).ok_or(Errno::EINVAL)?;
        let c = self.conns.remove(&comm).ok_or(Errno::EINVAL)?;
        if let Some(r) = self.ids.get_mut(&id) {
            r.conn = None;
        }
        let msg = match c.state {
            ConnState::SidrReqRcvd => {
                let mut rep = cm::SidrRepRepr::default();
                rep.request_id = c.remote_comm_id;
                rep.status = SidrStatus::Rejected;
                rep.service_id = c.service_id;
                copy_private(&mut rep.private_data, 0, private_data);
                CmMessage::SidrRep(rep)
            }
            _ => {
                let mut rej = cm::RejRepr::default();
                rej.local_comm_id = comm;
                rej.remote_comm_id = c.remote_comm_id;
                rej.message_rejected = cm::MsgResponse::Req;
                rej.reason = RejReason::ConsumerDefined;
                copy_private(&mut rej.private_data, 0, private_data);
                CmMessage::Rej(rej)
            }
        };
        self.cm_send(c.peer, c.peer_gsi_qp, c.tid, &msg);
        Ok(())
    }

    /// `rdma_disconnect`: DREQ on an established connection; otherwise nothing to send.
    pub(crate) fn cm_disconnect(&mut self, now: Instant, id: CmId) -> Result<(), Errno> {
        let comm = self.ids.get(&id).and_then(|r| r.conn).ok_or(Errno::EINVAL)?;
        let c = self.conns.get_mut(&comm).ok_or(Errno::EINVAL)?;
        if c.state != ConnState::Established {
            return Ok(());
        }
        let mut dreq = cm::DreqRepr::default();
        dreq.local_comm_id = comm;
        dreq.remote_comm_id = c.remote_comm_id;
        dreq.remote_qpn_eecn = c.remote_qpn;
        c.state = ConnState::DreqSent;
        c.tid = c.tid.wrapping_add(1 << 32);
        let msg = CmMessage::Dreq(dreq);
        c.last = Some(msg);
        c.retries_left = self.cfg.cm_max_retries;
        let (peer, qp, tid) = (c.peer, c.peer_gsi_qp, c.tid);
        self.cm_send(peer, qp, tid, &msg);
        self.schedule(now + self.cfg.cm_response_timeout, Work::CmTimer(comm));
        Ok(())
    }

    /// Tear down an id's connection on destroy: DREQ if established, REJ if a request waits.
    pub(crate) fn cm_destroy(&mut self, id: CmId) {
        let Some(comm) = self.ids.get(&id).and_then(|r| r.conn) else { return };
        if let Some(c) = self.conns.get(&comm).cloned() {
            match c.state {
                ConnState::Established => {
                    let mut dreq = cm::DreqRepr::default();
                    dreq.local_comm_id = comm;
                    dreq.remote_comm_id = c.remote_comm_id;
                    dreq.remote_qpn_eecn = c.remote_qpn;
                    self.cm_send(c.peer, c.peer_gsi_qp, c.tid.wrapping_add(1 << 32), &CmMessage::Dreq(dreq));
                }
                ConnState::ReqRcvd | ConnState::SidrReqRcvd => {
                    let _ = self.cm_reject(id, &[]);
                }
                _ => {}
            }
        }
        self.conns.remove(&comm);
        self.unschedule(|w| *w == Work::CmTimer(comm));
    }
}
