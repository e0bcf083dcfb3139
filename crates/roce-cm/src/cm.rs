//! Communication management on QP1: SIDR for UD port spaces and the REQ/REP/RTU/DREQ/DREP
//! handshake for connected ones, with the RDMA-CM private-data header, service IDs
//! `(ps << 16) | port`, retries and TIMEWAIT [cm.c; cma.c; protocol.md §6.5].
//!
//! Events reach an id as cma_ib_handler passes them on: only in CONNECT (TIMEWAIT_EXIT only
//! in DISCONNECT). An id has an "IB CM id" (`cm_id`, cma.c `cm_id.ib`) from its connect, its
//! request or its listen on a device until it is destroyed: reject and disconnect need one.
//!
//! MRA as the kernel's CM does it: an MRA for our REQ or REP stretches the wait for the
//! answer (and for each resend after it) to the MRA's service timeout plus the packet
//! lifetime (cm_mra_handler, ib_modify_mad); a REQ resent while the application has not yet
//! accepted is answered with an MRA of service timeout 24 (cma's CMA_CM_MRA_SETTING, sent
//! only on a duplicate REQ), and one resent into TIMEWAIT with REJ 10 (stale connection)
//! (cm_dup_req_handler). MRA reaches no rdma_cm_id (cma ignores IB_CM_MRA_RECEIVED).
//!
//! Deliberate simplifications (spec/cm-states.md): we never send an MRA for a REP; an
//! active id always answers a REP with RTU and reports ESTABLISHED (the kernel reports
//! CONNECT_RESPONSE to ids without a QP and lets them call accept); a DREQ is answered with
//! DREP at once (the kernel waits for the application's rdma_disconnect or destroy); a
//! connection given up or rejected leaves no TIMEWAIT behind; LAP/APR are not handled.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use roce_wire::cm::{self, cma_hdr, CmMessage, RejReason, SidrStatus};
use roce_wire::mad::MadHeader;
use roce_wire::{Gid, RDMA_UDP_QKEY};

use crate::conn::{Conn, ConnState};
use crate::counters::DropReason;
use crate::ctx::{Outgoing, Work};
use crate::event::{AddressHandle, CmEvent, ConnParam, EventKind, EventParam, UdParam};
use crate::id::{CmId, CmState, QpType};
use crate::stack::Stack;
use crate::{Errno, Instant};

/// The service timeout of the MRA we send for a REQ the application has not yet answered
/// (cma.c CMA_CM_MRA_SETTING without its DELAY flag): 4.096 µs × 2^24, about 69 s.
pub(crate) const MRA_SERVICE_TIMEOUT: u8 = 24;

/// The packet lifetime the kernel adds to an MRA's service timeout for RoCE: the path's
/// CMA_IBOE_PACKET_LIFETIME (16) plus one, as cm_init_av_by_path sets av.timeout.
const ROCE_AV_TIMEOUT: u8 = 17;

/// The local ACK timeout our REQ carries and both QPs use: 4.096 µs × 2^18, about 1 s.
const REQ_LOCAL_ACK_TIMEOUT: u8 = 18;

/// cm_convert_to_ms: an IBA time exponent (4.096 µs × 2^t) in milliseconds, as the kernel
/// rounds it (2^(t−8) ms, at least 1 ms).
fn iba_time_ms(t: u8) -> u64 {
    1u64 << u32::from(t.min(31)).saturating_sub(8)
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
        self.out.push(Outgoing::Roce(p));
    }

    fn new_comm_id(&mut self) -> u32 {
        loop {
            let c = self.random() as u32;
            if c != 0 && !self.conns.contains_key(&c) {
                return c;
            }
        }
    }

    /// An IB CM event for an id, as cma_ib_handler / cma_sidr_rep_handler pass it on: only
    /// while the id is in CONNECT (TIMEWAIT_EXIT only in DISCONNECT); an id in another state
    /// (DEVICE_REMOVAL, or DISCONNECT for a late reply) hears nothing.
    fn conn_event(&mut self, id: CmId, kind: EventKind, status: i32, param: EventParam) {
        let want = if kind == EventKind::TimewaitExit { CmState::Disconnect } else { CmState::Connect };
        if self.ids.get(&id).is_some_and(|r| r.state == want) {
            self.push_event(CmEvent { id, listen_id: None, kind, status, param });
        }
    }

    /// DREQ received, DREP received, or the DREQ given up: cma_ib_handler moves CONNECT to
    /// DISCONNECT and reports DISCONNECTED; in any other state nothing happens.
    fn conn_disconnected(&mut self, id: CmId, status: i32) {
        if self.state(id) == Some(CmState::Connect) {
            self.set_state(id, CmState::Disconnect);
            self.push_event(CmEvent {
                id,
                listen_id: None,
                kind: EventKind::Disconnected,
                status,
                param: EventParam::None,
            });
        }
    }

    /// This port's CA GUID as the CM sends it (the EUI-64 of the link-local GID).
    fn local_ca_guid(&self) -> u64 {
        self.cfg.link_local().octets()[8..].iter().fold(0u64, |a, b| (a << 8) | u64::from(*b))
    }

    /// `rdma_connect`: REQ, or SIDR_REQ for a UD id (rdma_connect_locked chooses by QP type,
    /// not port space).
    pub(crate) fn start_connect(&mut self, now: Instant, id: CmId, param: &ConnectParam) -> Result<(), Errno> {
        let rec = self.ids.get(&id).ok_or(Errno::ENOENT)?.clone();
        let (Some(src), Some(dst)) = (rec.src, rec.dst) else { return Err(Errno::EINVAL) };
        let service_id = cma_hdr::service_id(rec.ps.value(), dst.port());
        let comm = self.new_comm_id();
        let hdr = cma_header_for(src, dst);
        let tid = (u64::from(self.random() as u32) << 32) | u64::from(comm);
        let tos = rec.tos.unwrap_or(0);
        let mut qp = crate::rc::CmQp {
            traffic_class: tos,
            local_psn: (self.random() as u32) & 0xff_ffff,
            path_mtu: self.cfg.mtu,
            retry_count: param.retry_count & 7,
            local_ack_timeout: REQ_LOCAL_ACK_TIMEOUT,
            responder_resources: param.responder_resources,
            initiator_depth: param.initiator_depth,
            ..Default::default()
        };
        let (msg, state) = if rec.qp_type == QpType::Ud {
            let mut m =
                cm::SidrReqRepr { request_id: comm, partition_key: self.cfg.pkey, service_id, ..Default::default() };
            hdr.emit_bytes(&mut m.private_data);
            copy_private(&mut m.private_data, cma_hdr::HEADER_LEN, &param.private_data);
            (CmMessage::SidrReq(m), ConnState::SidrReqSent)
        } else {
            let mut m = cm::ReqRepr {
                local_comm_id: comm,
                service_id,
                local_ca_guid: self.local_ca_guid(),
                local_qpn: rec.qpn.unwrap_or(0),
                responder_resources: param.responder_resources,
                initiator_depth: param.initiator_depth,
                remote_cm_response_timeout: 20,
                starting_psn: qp.local_psn,
                local_cm_response_timeout: 20,
                retry_count: param.retry_count & 7,
                partition_key: self.cfg.pkey,
                path_mtu: self.cfg.mtu,
                rnr_retry_count: param.rnr_retry_count & 7,
                max_cm_retries: 15,
                ..Default::default()
            };
            m.primary_path.local_lid = 0xffff;
            m.primary_path.remote_lid = 0xffff;
            m.primary_path.local_gid = Gid::from_ip(src.ip());
            m.primary_path.remote_gid = Gid::from_ip(dst.ip());
            m.primary_path.hop_limit = 64;
            m.primary_path.traffic_class = tos;
            m.primary_path.local_ack_timeout = REQ_LOCAL_ACK_TIMEOUT;
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
            resend_after: self.cfg.cm_response_timeout,
            mra_received: false,
            qp: {
                qp.rnr_retry_count = param.rnr_retry_count & 7;
                qp
            },
        };
        self.cm_send(dst.ip(), 1, tid, &msg);
        self.conns.insert(comm, conn);
        if let Some(r) = self.ids.get_mut(&id) {
            r.conn = Some(comm);
            r.cm_id = true;
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
            ConnState::DreqSent if c.retries_left == 0 => {
                // cm_process_send_error: DREQ_ERROR enters TIMEWAIT; cma reports
                // DISCONNECTED with -ETIMEDOUT (and TIMEWAIT_EXIT later).
                let id = c.id;
                self.enter_timewait(now, comm);
                self.conn_disconnected(id, Errno::ETIMEDOUT.status());
            }
            ConnState::ReqSent | ConnState::SidrReqSent | ConnState::DreqSent | ConnState::RepSent => {
                if c.retries_left > 0 {
                    c.retries_left -= 1;
                    let (peer, qp, tid, msg) = (c.peer, c.peer_gsi_qp, c.tid, c.last);
                    let wait = c.resend_after;
                    if let Some(msg) = msg {
                        self.cm_send(peer, qp, tid, &msg);
                    }
                    self.schedule(now + wait, Work::CmTimer(comm));
                    return;
                }
                let id = c.id;
                self.conns.remove(&comm);
                if let Some(r) = self.ids.get_mut(&id) {
                    r.conn = None;
                }
                // REQ_ERROR, REP_ERROR and SIDR_REQ_ERROR all reach the id as UNREACHABLE
                // with -ETIMEDOUT (cma_ib_handler, cma_sidr_rep_handler).
                self.conn_event(id, EventKind::Unreachable, Errno::ETIMEDOUT.status(), EventParam::None);
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
            CmMessage::Rej(r) => self.cm_rej(src, &r),
            CmMessage::Dreq(r) => self.cm_dreq(now, src, src_qp, tid, r.local_comm_id, r.remote_comm_id),
            CmMessage::Drep(r) => self.cm_drep(now, r.remote_comm_id),
            CmMessage::SidrRep(r) => self.cm_sidr_rep(src, &r),
            CmMessage::Mra(r) => self.cm_mra(now, src, &r),
            CmMessage::Other { .. } => false,
        };
        if handled {
            self.counters.rx_accepted += 1;
        } else {
            self.counters.drop(DropReason::UnmatchedCm);
        }
    }

    /// An MRA: the peer needs more time to answer our REQ or REP (cm_mra_handler). The
    /// wait for the answer, and for each resend after it, becomes the MRA's service timeout
    /// plus the packet lifetime; the retry count is unchanged. No event reaches the id.
    fn cm_mra(&mut self, now: Instant, src: IpAddr, r: &cm::MraRepr) -> bool {
        let Some(c) = self.conns.get_mut(&r.remote_comm_id) else { return false };
        let for_our_message = match r.message_mraed {
            cm::MsgResponse::Req => c.state == ConnState::ReqSent,
            cm::MsgResponse::Rep => c.state == ConnState::RepSent,
            _ => false, // an MRA for a LAP: we send none
        };
        if c.peer != src || !for_our_message {
            return false;
        }
        if c.mra_received {
            return true; // MRA_REQ_RCVD / MRA_REP_RCVD: a repeat changes nothing
        }
        c.mra_received = true;
        c.resend_after = Duration::from_millis(iba_time_ms(r.service_timeout) + iba_time_ms(ROCE_AV_TIMEOUT));
        let (comm, wait) = (c.local_comm_id, c.resend_after);
        self.unschedule(|w| *w == Work::CmTimer(comm));
        self.schedule(now + wait, Work::CmTimer(comm));
        true
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
            r.cm_id = true;
            r.listen_parent = Some(listener);
        }
        id
    }

    fn cm_req(&mut self, _now: Instant, src: IpAddr, src_qp: u32, tid: u64, r: &cm::ReqRepr) -> bool {
        // A retransmitted REQ for a connection we already have (cm_dup_req_handler): not
        // yet accepted ▶ MRA, so the peer waits for the application; in TIMEWAIT ▶ REJ
        // stale connection; otherwise (REP sent, established) ignored.
        if let Some(comm) = self.conn_by_remote(r.local_comm_id, src) {
            let c = &self.conns[&comm];
            let (peer, qp, local, remote) = (c.peer, c.peer_gsi_qp, c.local_comm_id, c.remote_comm_id);
            match c.state {
                ConnState::ReqRcvd => {
                    let mra = cm::MraRepr {
                        local_comm_id: local,
                        remote_comm_id: remote,
                        message_mraed: cm::MsgResponse::Req,
                        service_timeout: MRA_SERVICE_TIMEOUT,
                        ..Default::default()
                    };
                    self.cm_send(peer, qp, tid, &CmMessage::Mra(mra));
                }
                ConnState::TimeWait => {
                    let rej = cm::RejRepr {
                        local_comm_id: local,
                        remote_comm_id: remote,
                        message_rejected: cm::MsgResponse::Req,
                        reason: RejReason::StaleConn,
                        ..Default::default()
                    };
                    self.cm_send(peer, qp, tid, &CmMessage::Rej(rej));
                }
                _ => {}
            }
            return true;
        }
        let hdr = r.cma_header().ok();
        let dst_ip = hdr.map(|h| h.dst_ip()).unwrap_or_else(|| self.source_for(&src).unwrap_or(src));
        let Some(listener) = self.find_listener(r.service_id, dst_ip) else {
            let rej = cm::RejRepr {
                remote_comm_id: r.local_comm_id,
                message_rejected: cm::MsgResponse::Req,
                reason: RejReason::InvalidServiceId,
                ..Default::default()
            };
            self.cm_send(src, src_qp, tid, &CmMessage::Rej(rej));
            return true;
        };
        if self.ids.get(&listener).is_some_and(|l| l.qp_type == QpType::Ud) {
            // cma_ib_check_req_qp_type: a REQ needs a listener of its (connected) QP type;
            // the handler's error makes the CM reject with reason 28.
            let rej = cm::RejRepr {
                remote_comm_id: r.local_comm_id,
                message_rejected: cm::MsgResponse::Req,
                reason: RejReason::ConsumerDefined,
                ..Default::default()
            };
            self.cm_send(src, src_qp, tid, &CmMessage::Rej(rej));
            return true;
        }
        let port = cma_hdr::split_service_id(r.service_id).1;
        let local = SocketAddr::new(dst_ip, port);
        let remote = SocketAddr::new(hdr.map(|h| h.src_ip()).unwrap_or(src), hdr.map_or(0, |h| h.src_port));
        let child = self.spawn_child(listener, local, remote);
        let comm = self.new_comm_id();
        let psn = (self.random() as u32) & 0xff_ffff; // cma.c: the id's seq_num
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
                resend_after: self.cfg.cm_response_timeout,
                mra_received: false,
                qp: crate::rc::CmQp {
                    local_psn: psn,
                    traffic_class: r.primary_path.traffic_class,
                    remote_psn: r.starting_psn,
                    path_mtu: r.path_mtu.clamp(1, 5).min(self.cfg.mtu),
                    retry_count: r.retry_count,
                    rnr_retry_count: r.rnr_retry_count,
                    local_ack_timeout: r.primary_path.local_ack_timeout,
                    ..Default::default()
                },
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
        // A resent SIDR_REQ while the first is still unanswered (the application has not yet
        // accepted or rejected it) is dropped: cm_sidr_req_handler finds it in the remote SIDR
        // table (cm_insert_remote_sidr) and counts a duplicate. Once answered, the kernel's
        // entry is gone and a repeat is a new request, as here.
        if self
            .conns
            .values()
            .any(|c| c.state == ConnState::SidrReqRcvd && c.remote_comm_id == r.request_id && c.peer == src)
        {
            return true;
        }
        let hdr = r.cma_header().ok();
        let dst_ip = hdr.map(|h| h.dst_ip()).unwrap_or_else(|| self.source_for(&src).unwrap_or(src));
        let Some(listener) = self.find_listener(r.service_id, dst_ip) else {
            let rep = cm::SidrRepRepr {
                request_id: r.request_id,
                status: SidrStatus::ServiceIdNotSupported,
                service_id: r.service_id,
                ..Default::default()
            };
            self.cm_send(src, src_qp, tid, &CmMessage::SidrRep(rep));
            return true;
        };
        if self.ids.get(&listener).is_some_and(|l| l.qp_type != QpType::Ud) {
            // cma_ib_check_req_qp_type: SIDR only for a UD listener; the CM answers Rejected.
            let rep = cm::SidrRepRepr {
                request_id: r.request_id,
                status: SidrStatus::Rejected,
                service_id: r.service_id,
                ..Default::default()
            };
            self.cm_send(src, src_qp, tid, &CmMessage::SidrRep(rep));
            return true;
        }
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
                resend_after: self.cfg.cm_response_timeout,
                mra_received: false,
                qp: crate::rc::CmQp::default(),
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
        if c.state == ConnState::Established && c.remote_comm_id == r.local_comm_id {
            // A repeated REP: our RTU was lost; send it again (cm_dup_rep_handler), no event.
            let (peer, qp) = (c.peer, c.peer_gsi_qp);
            let rtu =
                cm::RtuRepr { local_comm_id: r.remote_comm_id, remote_comm_id: r.local_comm_id, ..Default::default() };
            self.cm_send(peer, qp, tid, &CmMessage::Rtu(rtu));
            return true;
        }
        if c.state != ConnState::ReqSent {
            return false;
        }
        c.remote_comm_id = r.local_comm_id;
        c.remote_qpn = r.local_qpn;
        c.state = ConnState::Established;
        c.qp.remote_psn = r.starting_psn;
        c.qp.rnr_retry_count = r.rnr_retry_count;
        c.qp.initiator_depth = c.qp.initiator_depth.min(r.responder_resources);
        let (id, peer, qp) = (c.id, c.peer, c.peer_gsi_qp);
        let cmqp = c.qp;
        // cma_rep_recv: the QP to RTR and RTS before the RTU goes out.
        if let Some(qpn) = self.rc_qp_of(id) {
            let _ = self.rc_ready(_now, qpn, peer, r.local_qpn, &cmqp);
        }
        let rtu =
            cm::RtuRepr { local_comm_id: r.remote_comm_id, remote_comm_id: r.local_comm_id, ..Default::default() };
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

    /// A REJ: matched by our communication ID, except a Timeout REJ without one (what a
    /// destroyed active id sends before it knows ours), matched by the sender's ID and
    /// address (cm_acquire_rejected_id).
    fn cm_rej(&mut self, src: IpAddr, r: &cm::RejRepr) -> bool {
        let reason = r.reason;
        let local_comm = if reason == RejReason::Timeout && r.remote_comm_id == 0 {
            match self.conn_by_remote(r.local_comm_id, src) {
                Some(c) => c,
                None => return false,
            }
        } else {
            r.remote_comm_id
        };
        if self.conns.get(&local_comm).is_none_or(|c| c.peer != src || c.state == ConnState::TimeWait) {
            return false;
        }
        let Some(c) = self.conns.remove(&local_comm) else { return false };
        self.unschedule(|w| *w == Work::CmTimer(local_comm));
        if let Some(r) = self.ids.get_mut(&c.id) {
            r.conn = None;
        }
        // The REJ's private data reaches the event (rdma_consumer_reject_data reads it).
        let param = EventParam::Conn(ConnParam { private_data: r.private_data.to_vec(), ..ConnParam::default() });
        self.conn_event(c.id, EventKind::Rejected, i32::from(u16::from(reason)), param);
        true
    }

    fn enter_timewait(&mut self, now: Instant, comm: u32) {
        if let Some(c) = self.conns.get_mut(&comm) {
            c.state = ConnState::TimeWait;
            self.unschedule(|w| *w == Work::CmTimer(comm));
            self.schedule(now + self.cfg.timewait, Work::CmTimer(comm));
        }
    }

    fn cm_dreq(&mut self, now: Instant, src: IpAddr, src_qp: u32, tid: u64, remote_comm: u32, local_comm: u32) -> bool {
        let Some(c) = self.conns.get(&local_comm) else {
            // Unknown connection: the CM still answers DREP so the peer can finish.
            let drep = cm::DrepRepr { remote_comm_id: remote_comm, ..Default::default() };
            self.cm_send(src, src_qp, tid, &CmMessage::Drep(drep));
            return false;
        };
        let (id, state) = (c.id, c.state);
        let drep = cm::DrepRepr { local_comm_id: local_comm, remote_comm_id: remote_comm, ..Default::default() };
        self.cm_send(src, src_qp, tid, &CmMessage::Drep(drep));
        // cm_dreq_handler: an established connection, or one whose REP or DREQ is
        // outstanding, goes to TIMEWAIT (the DREP is sent at once here; see spec/cm-states.md).
        if matches!(state, ConnState::Established | ConnState::RepSent | ConnState::DreqSent) {
            self.enter_timewait(now, local_comm);
            self.rc_flush(now, id); // DREQ flushes the QP
            self.conn_disconnected(id, 0);
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
        self.conn_disconnected(id, 0);
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
                let c = self.conns.get_mut(&comm).ok_or(Errno::EINVAL)?;
                let psn = c.qp.local_psn;
                c.qp.responder_resources = param.responder_resources;
                c.qp.initiator_depth = param.initiator_depth;
                let (cmqp, peer, remote_qpn) = (c.qp, c.peer, c.remote_qpn);
                // cma_accept_ib: the QP to RTR and RTS before the REP goes out.
                if let Some(q) = self.rc_qp_of(id) {
                    self.rc_ready(now, q, peer, remote_qpn, &cmqp)?;
                }
                let c = self.conns.get_mut(&comm).ok_or(Errno::EINVAL)?;
                let mut rep = cm::RepRepr {
                    local_comm_id: comm,
                    remote_comm_id: c.remote_comm_id,
                    local_qpn: qpn,
                    starting_psn: psn,
                    responder_resources: param.responder_resources,
                    initiator_depth: param.initiator_depth,
                    rnr_retry_count: param.rnr_retry_count & 7,
                    ..Default::default()
                };
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
                let mut rep = cm::SidrRepRepr {
                    request_id: c.remote_comm_id,
                    status: SidrStatus::Success,
                    qpn,
                    service_id: c.service_id,
                    qkey: RDMA_UDP_QKEY,
                    ..Default::default()
                };
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

    /// `rdma_reject` (and the reject after a failed accept): EINVAL without an IB CM id; a
    /// UD id answers a SIDR_REQ it received with SIDR_REP Rejected (cma_send_sidr_rep); a
    /// connected id sends a REJ, reason 28, while a REQ is outstanding either way or its REP
    /// is (cm_send_rej_locked); any other CM state is EINVAL.
    pub(crate) fn cm_reject(&mut self, id: CmId, private_data: &[u8]) -> Result<(), Errno> {
        let r = self.ids.get(&id).ok_or(Errno::ENOENT)?;
        if !r.cm_id {
            return Err(Errno::EINVAL);
        }
        let ud = r.qp_type == QpType::Ud;
        let comm = r.conn.ok_or(Errno::EINVAL)?;
        let c = self.conns.get(&comm).ok_or(Errno::EINVAL)?;
        let msg = match (ud, c.state) {
            (true, ConnState::SidrReqRcvd) => {
                let mut rep = cm::SidrRepRepr {
                    request_id: c.remote_comm_id,
                    status: SidrStatus::Rejected,
                    service_id: c.service_id,
                    ..Default::default()
                };
                copy_private(&mut rep.private_data, 0, private_data);
                CmMessage::SidrRep(rep)
            }
            (false, ConnState::ReqSent | ConnState::ReqRcvd | ConnState::RepSent) => {
                CmMessage::Rej(self.rej_for(c, RejReason::ConsumerDefined, private_data))
            }
            _ => return Err(Errno::EINVAL),
        };
        let (peer, qp, tid) = (c.peer, c.peer_gsi_qp, c.tid);
        self.drop_conn(id, comm);
        self.cm_send(peer, qp, tid, &msg);
        Ok(())
    }

    /// A REJ for `c` as cm_format_rej fills it for the connection's state: a received REQ is
    /// rejected as such (our ID not given); anything else names both IDs, message "other".
    fn rej_for(&self, c: &Conn, reason: RejReason, private_data: &[u8]) -> cm::RejRepr {
        let mut rej = cm::RejRepr { remote_comm_id: c.remote_comm_id, ..Default::default() };
        if c.state == ConnState::ReqRcvd {
            rej.message_rejected = cm::MsgResponse::Req;
        } else {
            rej.local_comm_id = c.local_comm_id;
            rej.message_rejected = cm::MsgResponse::Other;
        }
        rej.reason = reason;
        copy_private(&mut rej.private_data, 0, private_data);
        rej
    }

    /// Forget a connection (the CM id goes back to idle; the rdma_cm_id keeps its CM id).
    fn drop_conn(&mut self, id: CmId, comm: u32) {
        self.conns.remove(&comm);
        self.unschedule(|w| *w == Work::CmTimer(comm));
        if let Some(r) = self.ids.get_mut(&id) {
            if r.conn == Some(comm) {
                r.conn = None;
            }
        }
    }

    /// `rdma_disconnect`: EINVAL without an IB CM id; otherwise 0 whatever the CM state, with
    /// a DREQ sent when the connection is established (a failing ib_send_cm_dreq and
    /// ib_send_cm_drep is not reported).
    pub(crate) fn cm_disconnect(&mut self, now: Instant, id: CmId) -> Result<(), Errno> {
        let r = self.ids.get(&id).ok_or(Errno::ENOENT)?;
        if !r.cm_id {
            return Err(Errno::EINVAL);
        }
        let conn = r.conn;
        // rdma_disconnect: cma_modify_qp_err first, whatever the CM state.
        self.rc_flush(now, id);
        let Some(comm) = conn else { return Ok(()) };
        let Some(c) = self.conns.get_mut(&comm) else { return Ok(()) };
        if c.state != ConnState::Established {
            return Ok(());
        }
        let dreq = cm::DreqRepr {
            local_comm_id: comm,
            remote_comm_id: c.remote_comm_id,
            remote_qpn_eecn: c.remote_qpn,
            ..Default::default()
        };
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

    /// Tear down an id's connection on destroy, as cm_destroy_id does for each CM state:
    /// established: DREQ; a REQ received: REJ (28), a SIDR_REQ received: SIDR_REP Rejected;
    /// our REQ outstanding: REJ Timeout with our CA GUID as ARI (the peer does not know our
    /// ID yet); our REP outstanding: REJ (28); DREQ sent, TIMEWAIT, SIDR_REQ sent: nothing.
    pub(crate) fn cm_destroy(&mut self, id: CmId) {
        let Some(comm) = self.ids.get(&id).and_then(|r| r.conn) else { return };
        if let Some(c) = self.conns.get(&comm).cloned() {
            let msg = match c.state {
                ConnState::Established => {
                    let dreq = cm::DreqRepr {
                        local_comm_id: comm,
                        remote_comm_id: c.remote_comm_id,
                        remote_qpn_eecn: c.remote_qpn,
                        ..Default::default()
                    };
                    Some((c.tid.wrapping_add(1 << 32), CmMessage::Dreq(dreq)))
                }
                ConnState::ReqRcvd | ConnState::RepSent => {
                    Some((c.tid, CmMessage::Rej(self.rej_for(&c, RejReason::ConsumerDefined, &[]))))
                }
                ConnState::ReqSent => {
                    let mut rej = self.rej_for(&c, RejReason::Timeout, &[]);
                    rej.ari[..8].copy_from_slice(&self.local_ca_guid().to_be_bytes());
                    rej.reject_info_length = 8;
                    Some((c.tid, CmMessage::Rej(rej)))
                }
                ConnState::SidrReqRcvd => {
                    let rep = cm::SidrRepRepr {
                        request_id: c.remote_comm_id,
                        status: SidrStatus::Rejected,
                        service_id: c.service_id,
                        ..Default::default()
                    };
                    Some((c.tid, CmMessage::SidrRep(rep)))
                }
                ConnState::DreqSent | ConnState::TimeWait | ConnState::SidrReqSent => None,
            };
            if let Some((tid, msg)) = msg {
                self.cm_send(c.peer, c.peer_gsi_qp, tid, &msg);
            }
        }
        self.drop_conn(id, comm);
    }
}

/// `RDMA_NODE_IB_CA`: what this port is to rdma_restrict_node_type (rxe is one).
pub const RDMA_NODE_IB_CA: u8 = 1;
/// `RDMA_NODE_RNIC` (iWARP).
pub const RDMA_NODE_RNIC: u8 = 4;

/// Whether an id restricted to `node_type` may use this port (0: unrestricted).
pub(crate) fn node_type_allowed(node_type: u8) -> bool {
    node_type == 0 || node_type == RDMA_NODE_IB_CA
}

/// The QP state `rdma_init_qp_attr` is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitQpState {
    /// IB_QPS_INIT.
    Init,
    /// IB_QPS_RTR.
    Rtr,
    /// IB_QPS_RTS.
    Rts,
}

/// The QP events `rdma_notify` takes (`enum ib_event_type`, the ones ib_cm_notify handles).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpEvent {
    /// IB_EVENT_COMM_EST: the QP received data before the RTU.
    CommEst,
    /// IB_EVENT_PATH_MIG.
    PathMig,
    /// IB_EVENT_PATH_MIG_ERR.
    PathMigErr,
    /// Any other event.
    Other,
}

/// `rdma_reject_msg` for an InfiniBand/RoCE id: `ibcm_reject_msg`'s text for a REJ reason.
pub fn reject_msg(reason: i32) -> &'static str {
    const S: [&str; 36] = [
        "",
        "no QP",
        "no EEC",
        "no resources",
        "timeout",
        "unsupported",
        "invalid comm ID",
        "invalid comm instance",
        "invalid service ID",
        "invalid transport type",
        "stale conn",
        "RDC not exist",
        "invalid GID",
        "invalid LID",
        "invalid SL",
        "invalid traffic class",
        "invalid hop limit",
        "invalid packet rate",
        "invalid alt GID",
        "invalid alt LID",
        "invalid alt SL",
        "invalid alt traffic class",
        "invalid alt hop limit",
        "invalid alt packet rate",
        "port CM redirect",
        "port redirect",
        "invalid MTU",
        "insufficient resp resources",
        "consumer defined",
        "invalid RNR retry",
        "duplicate local comm ID",
        "invalid class version",
        "invalid flow label",
        "invalid alt flow label",
        "",
        "vendor option is not supported",
    ];
    match usize::try_from(reason).ok().and_then(|i| S.get(i)) {
        Some(s) if !s.is_empty() => s,
        _ => "unrecognized reason",
    }
}

/// `rdma_consumer_reject_data`: the REJ's private data when a REJECTED event's reason is 28
/// (consumer defined: `rdma_is_consumer_reject`), else nothing.
pub fn consumer_reject_data(ev: &CmEvent) -> Option<&[u8]> {
    match (&ev.kind, &ev.param) {
        (EventKind::Rejected, EventParam::Conn(c)) if ev.status == i32::from(u16::from(RejReason::ConsumerDefined)) => {
            Some(&c.private_data)
        }
        _ => None,
    }
}

/// The rest of the rdma_cm family (rdma_leave_multicast(9)'s SEE ALSO list): spec/api.md.
impl Stack {
    /// `rdma_init_qp_attr`: the attributes of the id's QP for `state`. Without an IB CM id
    /// only INIT (cma_ib_init_qp_attr: no remote access); with one, ib_cm_init_qp_attr's
    /// state rules: INIT while a REQ is sent or received, a REP sent or the connection
    /// established; RTR and RTS once the peer's QP is known (not while our REQ is
    /// outstanding); EINVAL otherwise (disconnecting, TIMEWAIT, a UD id past INIT).
    pub fn init_qp_attr(&self, id: CmId, state: InitQpState) -> Result<crate::rc::QpAttr, Errno> {
        let r = self.ids.get(&id).ok_or(Errno::ENOENT)?;
        let conn = r.conn.and_then(|c| self.conns.get(&c));
        let conn = match conn {
            Some(c) if r.cm_id && r.qp_type != QpType::Ud => c,
            _ => {
                if state != InitQpState::Init {
                    return Err(Errno::EINVAL);
                }
                let mut at = crate::rc::QpAttr::new(r.dst.map_or(IpAddr::from([0, 0, 0, 0]), |d| d.ip()), 0);
                at.access = crate::rc::Access::LOCAL_WRITE;
                at.pkey = self.cfg.pkey;
                return Ok(at);
            }
        };
        let ok = match state {
            InitQpState::Init => {
                matches!(
                    conn.state,
                    ConnState::ReqSent | ConnState::ReqRcvd | ConnState::RepSent | ConnState::Established
                )
            }
            InitQpState::Rtr | InitQpState::Rts => {
                matches!(conn.state, ConnState::ReqRcvd | ConnState::RepSent | ConnState::Established)
            }
        };
        if !ok {
            return Err(Errno::EINVAL);
        }
        Ok(self.cm_qp_attr(conn.peer, conn.remote_qpn, &conn.qp))
    }

    /// `rdma_notify`: EINVAL without an IB CM id; COMM_EST (data arrived before the RTU)
    /// establishes a connection whose REP is outstanding, with an ESTABLISHED event
    /// (cm_establish), EISCONN when it is already established, EINVAL in other CM states;
    /// PATH_MIG / PATH_MIG_ERR on an established connection change nothing (no alternate
    /// path is ever loaded here: LAP is not handled) and are EINVAL otherwise; any other
    /// event is EINVAL.
    pub fn notify(&mut self, id: CmId, event: QpEvent) -> Result<(), Errno> {
        let r = self.ids.get(&id).ok_or(Errno::ENOENT)?;
        if !r.cm_id {
            return Err(Errno::EINVAL);
        }
        let Some(comm) = r.conn else { return Err(Errno::EINVAL) };
        let state = self.conns.get(&comm).map(|c| c.state);
        match (event, state) {
            (QpEvent::CommEst, Some(ConnState::RepSent)) => {
                self.cm_rtu(comm);
                Ok(())
            }
            (QpEvent::CommEst, Some(ConnState::Established)) => Err(Errno::EISCONN),
            (QpEvent::PathMig | QpEvent::PathMigErr, Some(ConnState::Established)) => Ok(()),
            _ => Err(Errno::EINVAL),
        }
    }

    /// `rdma_set_service_type`: the ToS of the id's connection: the traffic class of the
    /// REQ's primary path and of the QP's packets (RoCE: DSCP and ECN of the IP header). The
    /// SL stays 0 (iboe_tos_to_sl without an egress priority map).
    pub fn set_service_type(&mut self, id: CmId, tos: u8) -> Result<(), Errno> {
        let r = self.ids.get_mut(&id).ok_or(Errno::ENOENT)?;
        r.tos = Some(tos);
        Ok(())
    }

    /// `rdma_read_gids`: the source and destination GIDs of the id (RoCE: the addresses as
    /// GIDs); zeros without a device (cma_dev unset).
    pub fn read_gids(&self, id: CmId) -> Result<(Gid, Gid), Errno> {
        let r = self.ids.get(&id).ok_or(Errno::ENOENT)?;
        if !r.has_device {
            return Ok((Gid::default(), Gid::default()));
        }
        let g = |a: Option<SocketAddr>| a.map(|a| Gid::from_ip(a.ip())).unwrap_or_default();
        Ok((g(r.src), g(r.dst)))
    }

    /// `rdma_restrict_node_type`: 0 (unspecified), 1 (IB CA) or 4 (RNIC), else EINVAL;
    /// EALREADY once the id has left IDLE. An id restricted to RNIC finds no device here:
    /// binding a specific address is ENODEV.
    pub fn restrict_node_type(&mut self, id: CmId, node_type: u8) -> Result<(), Errno> {
        if !matches!(node_type, 0 | RDMA_NODE_IB_CA | RDMA_NODE_RNIC) {
            return Err(Errno::EINVAL);
        }
        let r = self.ids.get_mut(&id).ok_or(Errno::ENOENT)?;
        if r.state != CmState::Idle {
            return Err(Errno::EALREADY);
        }
        r.restricted_node_type = node_type;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PortSpace, StackConfig};

    fn sidr_req_mad(request_id: u32, port: u16) -> (MadHeader, [u8; roce_wire::MAD_SIZE]) {
        let mut m = cm::SidrReqRepr {
            request_id,
            partition_key: 0xffff,
            service_id: cma_hdr::service_id(PortSpace::Udp.value(), port),
            ..Default::default()
        };
        let hdr = cma_header_for("198.18.0.2:4000".parse().unwrap(), "198.18.0.1:7174".parse().unwrap());
        hdr.emit_bytes(&mut m.private_data);
        let mad = CmMessage::SidrReq(m).to_mad(0x1234).to_bytes();
        (MadHeader::parse_bytes(&mad).unwrap(), mad)
    }

    /// A SIDR_REQ resent before the application answered makes no second CONNECT_REQUEST
    /// (cm_insert_remote_sidr); after the SIDR_REP a repeat is a new request.
    #[test]
    fn duplicate_sidr_req_while_pending_is_dropped() {
        let mut s = Stack::new(StackConfig::new([2, 0, 0, 0, 0, 1], "198.18.0.1".parse().unwrap(), 24));
        let l = s.create_id(PortSpace::Udp, QpType::Ud).unwrap();
        s.bind_addr(l, "198.18.0.1:7174".parse().unwrap()).unwrap();
        s.listen(l, 0).unwrap();
        let now = Instant::from_nanos(0);
        let peer: IpAddr = "198.18.0.2".parse().unwrap();
        let (h, mad) = sidr_req_mad(0xabcd, 7174);
        s.handle_cm_mad(now, peer, 1, &h, &mad);
        s.handle_cm_mad(now, peer, 1, &h, &mad);
        let reqs: Vec<CmEvent> =
            std::iter::from_fn(|| s.poll_event()).filter(|e| e.kind == EventKind::ConnectRequest).collect();
        assert_eq!(reqs.len(), 1, "one CONNECT_REQUEST for a resent SIDR_REQ");
        let child = reqs[0].id;
        s.create_qp_for_id(child).unwrap();
        s.accept(now, child, &ConnectParam::default()).unwrap();
        s.handle_cm_mad(now, peer, 1, &h, &mad);
        let again = std::iter::from_fn(|| s.poll_event()).filter(|e| e.kind == EventKind::ConnectRequest).count();
        assert_eq!(again, 1, "answered: a repeat is a new request");
    }
}
