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
//! A REP reaches an active id as the kernel delivers it: with a QP, the QP moves to RTR and
//! RTS, the RTU goes out, ESTABLISHED; without one (the application's own QP, `rping -q`),
//! CONNECT_RESPONSE, and the RTU waits for `establish` (rdma_establish).
//!
//! Deliberate simplifications (spec/cm-states.md): we never send an MRA for a REP; a DREQ is answered with
//! DREP at once (the kernel waits for the application's rdma_disconnect or destroy); a
//! connection given up or rejected leaves no TIMEWAIT behind; LAP/APR are not handled.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use roce_wire::cm::req::transport as req_transport;
use roce_wire::cm::{self, cma_hdr, CmMessage, RejReason, SidrStatus};
use roce_wire::mad::MadHeader;
use roce_wire::{Gid, RDMA_UDP_QKEY};

use crate::config::StackConfig;
use crate::conn::{Conn, ConnState};
use crate::counters::{Counters, DropReason};
use crate::ctx::{Outbox, Outgoing, Rng, Timers, Work};
use crate::event::{AddressHandle, CmEvent, ConnParam, EventKind, EventParam, UdParam};
use crate::gsi::Gsi;
use crate::id::{CmId, CmState, Ids, QpType};
use crate::neigh::Neighbors;
use crate::rc::{mtu_bytes, Access, CmQp, QpAttr, QpState, Rc};
use crate::{Errno, Instant};

/// The CM owner: connections and SIDR resolutions by local communication ID, and their
/// timers (`Work::CmTimer`). It answers CM MADs and the id calls that drive the protocol
/// (connect, accept, reject, disconnect, destroy) through a [`CmCtx`] the stack lends it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Cm {
    conns: BTreeMap<u32, Conn>,
}

/// What CM is lent for one call: the shared parts ([`crate::ctx::Ctx`]'s, and the stack's PRNG,
/// whose stream CM shares with the rest of the engine), the ids (states, connections,
/// listeners), QP1's sender, the neighbours (a peer's MAC for address handles and QP
/// attributes) and the RC QPs the handshake moves to RTS or flushes.
pub(crate) struct CmCtx<'a> {
    pub cfg: &'a StackConfig,
    pub counters: &'a mut Counters,
    pub out: &'a mut Outbox,
    pub timers: &'a mut Timers,
    pub rng: &'a mut Rng,
    pub ids: &'a mut Ids,
    pub gsi: &'a mut Gsi,
    pub neigh: &'a Neighbors,
    pub rc: &'a mut Rc,
}

impl CmCtx<'_> {
    fn send(&mut self, peer: IpAddr, peer_qp: u32, tid: u64, msg: &CmMessage) {
        let mad = msg.to_mad(tid).to_bytes();
        let p = self.gsi.packet(self.out, self.cfg.pkey, peer, peer_qp, &mad);
        self.out.push(Outgoing::Roce(p));
    }

    /// An IB CM event for an id, as cma_ib_handler / cma_sidr_rep_handler pass it on: only
    /// while the id is in CONNECT (TIMEWAIT_EXIT only in DISCONNECT); an id in another state
    /// (DEVICE_REMOVAL, or DISCONNECT for a late reply) hears nothing.
    fn conn_event(&mut self, id: CmId, kind: EventKind, status: i32, param: EventParam) {
        let want = if kind == EventKind::TimewaitExit { CmState::Disconnect } else { CmState::Connect };
        if self.ids.state(id) == Some(want) {
            self.out.push_event(CmEvent { id, listen_id: None, kind, status, param });
        }
    }

    /// DREQ received, DREP received, or the DREQ given up: cma_ib_handler moves CONNECT to
    /// DISCONNECT and reports DISCONNECTED; in any other state nothing happens.
    fn conn_disconnected(&mut self, id: CmId, status: i32) {
        if self.ids.state(id) == Some(CmState::Connect) {
            self.ids.set_state(id, CmState::Disconnect);
            self.out.push_event(CmEvent {
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

    /// The RC or UC QP of an id, if it has one.
    fn rc_qp_of(&self, id: CmId) -> Option<u32> {
        self.ids.qpn(id).filter(|q| self.rc.has_qp(*q))
    }

    /// Whether the id's QP takes its receives from an SRQ (the REQ's and REP's SRQ bit).
    fn qp_has_srq(&self, id: CmId) -> bool {
        self.rc_qp_of(id).and_then(|q| self.rc.qp_init(q)).is_some_and(|i| i.srq.is_some())
    }

    /// INIT → INIT (access flags) → RTR → RTS with what the CM negotiated (cma_modify_qp_rtr /
    /// _rts).
    fn rc_ready(&mut self, now: Instant, qpn: u32, peer: IpAddr, dest_qpn: u32, p: &CmQp) -> Result<(), Errno> {
        let at = cm_qp_attr(self.cfg, self.neigh, peer, dest_qpn, p);
        self.rc.modify_qp(now, qpn, QpState::Init, &at)?;
        self.rc.modify_qp(now, qpn, QpState::Rtr, &at)?;
        self.rc.modify_qp(now, qpn, QpState::Rts, &at)
    }

    /// A disconnect: the QP goes to ERR and everything outstanding is flushed
    /// (cma_modify_qp_err).
    fn rc_flush(&mut self, now: Instant, id: CmId) {
        if let Some(qpn) = self.rc_qp_of(id) {
            if let Some(at) = self.rc.query_qp(qpn) {
                let _ = self.rc.modify_qp(now, qpn, QpState::Err, &at);
            }
        }
    }
}

/// The attributes the CM negotiated for an RC QP (ib_cm_init_qp_attr's values; rq_psn from
/// our own message as cma.c sets it from `seq_num`).
fn cm_qp_attr(cfg: &StackConfig, neigh: &Neighbors, peer: IpAddr, dest_qpn: u32, p: &CmQp) -> QpAttr {
    let mut at = QpAttr::new(peer, dest_qpn);
    at.path_mtu = mtu_bytes(p.path_mtu);
    // The Starting PSN of a REQ or REP is the one its sender will receive with: the peer
    // sends from it (cm.c: rq_psn from the message sent, sq_psn from the one received).
    at.rq_psn = p.local_psn;
    at.sq_psn = p.remote_psn;
    at.timeout = p.local_ack_timeout.min(31);
    at.retry_cnt = p.retry_count & 7;
    at.rnr_retry = p.rnr_retry_count & 7;
    at.max_rd_atomic = p.initiator_depth;
    at.max_dest_rd_atomic = p.responder_resources;
    // cm_init_qp_init_attr: REMOTE_WRITE, and READ/ATOMIC when we answer any.
    at.access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);
    if p.responder_resources > 0 {
        at.access = at.access.union(Access::REMOTE_READ).union(Access::REMOTE_ATOMIC);
    }
    at.pkey = cfg.pkey;
    at.dmac = neigh.mac(cfg, &peer);
    at.traffic_class = p.traffic_class;
    at
}

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
    /// The QP of an id without one (`conn_param->qp_num`): the application created it with
    /// `ibv_create_qp` and moves it itself (rdma_init_qp_attr). Its number goes in the REQ or
    /// REP; an active id without a QP reports the REP as CONNECT_RESPONSE and sends the RTU
    /// when the application calls `establish`. Ignored when the id has a QP (cma.c
    /// `rdma_connect_locked`/`rdma_accept`: `if (!id->qp) id_priv->qp_num = ...`).
    pub qp_num: u32,
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

impl Cm {
    fn new_comm_id(&self, cx: &mut CmCtx<'_>) -> u32 {
        loop {
            let c = cx.rng.next_u64() as u32;
            if c != 0 && !self.conns.contains_key(&c) {
                return c;
            }
        }
    }

    /// `rdma_connect`: REQ, or SIDR_REQ for a UD id (rdma_connect_locked chooses by QP type,
    /// not port space).
    pub(crate) fn start_connect(
        &mut self,
        cx: &mut CmCtx<'_>,
        now: Instant,
        id: CmId,
        param: &ConnectParam,
    ) -> Result<(), Errno> {
        let rec = cx.ids.get(&id).ok_or(Errno::ENOENT)?.clone();
        let (Some(src), Some(dst)) = (rec.src, rec.dst) else { return Err(Errno::EINVAL) };
        let service_id = cma_hdr::service_id(rec.ps.value(), dst.port());
        let comm = self.new_comm_id(cx);
        let hdr = cma_header_for(src, dst);
        let tid = (u64::from(cx.rng.next_u64() as u32) << 32) | u64::from(comm);
        let tos = rec.tos.unwrap_or(0);
        let mut qp = crate::rc::CmQp {
            traffic_class: tos,
            local_psn: (cx.rng.next_u64() as u32) & 0xff_ffff,
            path_mtu: cx.cfg.mtu,
            retry_count: param.retry_count & 7,
            local_ack_timeout: REQ_LOCAL_ACK_TIMEOUT,
            responder_resources: param.responder_resources,
            initiator_depth: param.initiator_depth,
            ..Default::default()
        };
        let srq = cx.qp_has_srq(id);
        let (msg, state) = if rec.qp_type == QpType::Ud {
            let mut m =
                cm::SidrReqRepr { request_id: comm, partition_key: cx.cfg.pkey, service_id, ..Default::default() };
            hdr.emit_bytes(&mut m.private_data);
            copy_private(&mut m.private_data, cma_hdr::HEADER_LEN, &param.private_data);
            (CmMessage::SidrReq(m), ConnState::SidrReqSent)
        } else {
            let xrc = rec.qp_type == QpType::XrcIni;
            let mut m = cm::ReqRepr {
                local_comm_id: comm,
                service_id,
                local_ca_guid: cx.local_ca_guid(),
                local_qpn: rec.qpn.unwrap_or(param.qp_num),
                responder_resources: param.responder_resources,
                initiator_depth: param.initiator_depth,
                remote_cm_response_timeout: 20,
                starting_psn: qp.local_psn,
                local_cm_response_timeout: 20,
                retry_count: param.retry_count & 7,
                partition_key: cx.cfg.pkey,
                path_mtu: cx.cfg.mtu,
                rnr_retry_count: param.rnr_retry_count & 7,
                max_cm_retries: 15,
                // cm_req_set_qp_type: RC 0, UC 1, XRC initiator 3 with extended type 1 (the
                // id's QP type, as cma_connect_ib passes it); the other fields as for RC:
                // cm_format_req writes what the consumer gave, the UC peer's
                // cm_init_qp_*_attr ignores the RC-only ones.
                transport_service_type: match rec.qp_type {
                    QpType::Uc => req_transport::UC,
                    QpType::XrcIni => req_transport::EXTENDED,
                    _ => req_transport::RC,
                },
                extended_transport_type: if xrc { req_transport::EXT_XRC } else { 0 },
                srq,
                ..Default::default()
            };
            if xrc {
                // cm_format_req: an XRC initiator has no responder, so no responder
                // resources, and no retry counts or SRQ bit of its own.
                m.responder_resources = 0;
                m.retry_count = 0;
                m.rnr_retry_count = 0;
                m.srq = false;
            }
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
            retries_left: cx.cfg.cm_max_retries,
            last: Some(msg),
            remote_qpn: 0,
            service_id,
            resend_after: cx.cfg.cm_response_timeout,
            mra_received: false,
            qp: {
                qp.rnr_retry_count = param.rnr_retry_count & 7;
                qp
            },
        };
        cx.send(dst.ip(), 1, tid, &msg);
        self.conns.insert(comm, conn);
        if let Some(r) = cx.ids.get_mut(&id) {
            r.conn = Some(comm);
            r.cm_id = true;
        }
        cx.timers.schedule(now + cx.cfg.cm_response_timeout, Work::CmTimer(comm));
        Ok(())
    }

    /// A CM timer: resend the last message, give up, or end TIMEWAIT.
    pub(crate) fn timer(&mut self, cx: &mut CmCtx<'_>, now: Instant, comm: u32) {
        let Some(c) = self.conns.get_mut(&comm) else { return };
        match c.state {
            ConnState::TimeWait => {
                let id = c.id;
                self.conns.remove(&comm);
                cx.ids.set_conn(id, None);
                cx.conn_event(id, EventKind::TimewaitExit, 0, EventParam::None);
            }
            ConnState::DreqSent if c.retries_left == 0 => {
                // cm_process_send_error: DREQ_ERROR enters TIMEWAIT; cma reports
                // DISCONNECTED with -ETIMEDOUT (and TIMEWAIT_EXIT later).
                let id = c.id;
                self.enter_timewait(cx, now, comm);
                cx.conn_disconnected(id, Errno::ETIMEDOUT.status());
            }
            ConnState::ReqSent | ConnState::SidrReqSent | ConnState::DreqSent | ConnState::RepSent => {
                if c.retries_left > 0 {
                    c.retries_left -= 1;
                    let (peer, qp, tid, msg) = (c.peer, c.peer_gsi_qp, c.tid, c.last);
                    let wait = c.resend_after;
                    if let Some(msg) = msg {
                        cx.send(peer, qp, tid, &msg);
                    }
                    cx.timers.schedule(now + wait, Work::CmTimer(comm));
                    return;
                }
                let id = c.id;
                self.conns.remove(&comm);
                cx.ids.set_conn(id, None);
                // REQ_ERROR, REP_ERROR and SIDR_REQ_ERROR all reach the id as UNREACHABLE
                // with -ETIMEDOUT (cma_ib_handler, cma_sidr_rep_handler).
                cx.conn_event(id, EventKind::Unreachable, Errno::ETIMEDOUT.status(), EventParam::None);
            }
            _ => {}
        }
    }

    fn conn_by_remote(&self, remote_comm: u32, peer: IpAddr) -> Option<u32> {
        self.conns.values().find(|c| c.remote_comm_id == remote_comm && c.peer == peer).map(|c| c.local_comm_id)
    }

    /// A CM MAD arrived on QP1.
    pub(crate) fn handle_mad(
        &mut self,
        cx: &mut CmCtx<'_>,
        now: Instant,
        src: IpAddr,
        src_qp: u32,
        h: &MadHeader,
        payload: &[u8],
    ) {
        let msg = match CmMessage::parse(h.attribute_id, &payload[24..256]) {
            Ok(m) => m,
            Err(_) => {
                cx.counters.drop(DropReason::BadMad);
                return;
            }
        };
        let tid = h.transaction_id;
        let handled = match msg {
            CmMessage::Req(r) => self.cm_req(cx, now, src, src_qp, tid, &r),
            CmMessage::SidrReq(r) => self.cm_sidr_req(cx, now, src, src_qp, tid, &r),
            CmMessage::Rep(r) => self.cm_rep(cx, now, src, tid, &r),
            CmMessage::Rtu(r) => self.cm_rtu(cx, r.remote_comm_id),
            CmMessage::Rej(r) => self.cm_rej(cx, src, &r),
            CmMessage::Dreq(r) => self.cm_dreq(cx, now, src, src_qp, tid, &r),
            CmMessage::Drep(r) => self.cm_drep(cx, now, r.remote_comm_id),
            CmMessage::SidrRep(r) => self.cm_sidr_rep(cx, src, &r),
            CmMessage::Mra(r) => self.cm_mra(cx, now, src, &r),
            CmMessage::Other { .. } => false,
        };
        if handled {
            cx.counters.rx_accepted += 1;
        } else {
            cx.counters.drop(DropReason::UnmatchedCm);
        }
    }

    /// An MRA: the peer needs more time to answer our REQ or REP (cm_mra_handler). The
    /// wait for the answer, and for each resend after it, becomes the MRA's service timeout
    /// plus the packet lifetime; the retry count is unchanged. No event reaches the id.
    fn cm_mra(&mut self, cx: &mut CmCtx<'_>, now: Instant, src: IpAddr, r: &cm::MraRepr) -> bool {
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
        cx.timers.unschedule(|w| *w == Work::CmTimer(comm));
        cx.timers.schedule(now + wait, Work::CmTimer(comm));
        true
    }

    /// The listener for a service ID and destination address.
    fn find_listener(cx: &CmCtx<'_>, service_id: u64, dst: IpAddr) -> Option<CmId> {
        if !cma_hdr::is_ip_service_id(service_id) {
            return None;
        }
        let (ps, port) = cma_hdr::split_service_id(service_id);
        cx.ids.find_listener(ps, port, dst)
    }

    fn cm_req(
        &mut self,
        cx: &mut CmCtx<'_>,
        _now: Instant,
        src: IpAddr,
        src_qp: u32,
        tid: u64,
        r: &cm::ReqRepr,
    ) -> bool {
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
                    cx.send(peer, qp, tid, &CmMessage::Mra(mra));
                }
                ConnState::TimeWait => {
                    let rej = cm::RejRepr {
                        local_comm_id: local,
                        remote_comm_id: remote,
                        message_rejected: cm::MsgResponse::Req,
                        reason: RejReason::StaleConn,
                        ..Default::default()
                    };
                    cx.send(peer, qp, tid, &CmMessage::Rej(rej));
                }
                _ => {}
            }
            return true;
        }
        let hdr = r.cma_header().ok();
        let dst_ip = hdr.map(|h| h.dst_ip()).unwrap_or_else(|| cx.cfg.source_for(&src).unwrap_or(src));
        let Some(listener) = Self::find_listener(cx, r.service_id, dst_ip) else {
            let rej = cm::RejRepr {
                remote_comm_id: r.local_comm_id,
                message_rejected: cm::MsgResponse::Req,
                reason: RejReason::InvalidServiceId,
                ..Default::default()
            };
            cx.send(src, src_qp, tid, &CmMessage::Rej(rej));
            return true;
        };
        // cm_req_get_qp_type: RC, UC, and XRC (3 with extended type 1) for a target; RD and
        // any other extended type: no such id here.
        let req_type = match (r.transport_service_type, r.extended_transport_type) {
            (req_transport::RC, _) => Some(QpType::Rc),
            (req_transport::UC, _) => Some(QpType::Uc),
            (req_transport::EXTENDED, req_transport::EXT_XRC) => Some(QpType::XrcTgt),
            _ => None,
        };
        if cx.ids.get(&listener).is_some_and(|l| Some(l.qp_type) != req_type) {
            // cma_ib_check_req_qp_type: a REQ needs a listener of its QP type (RC or UC);
            // the handler's error makes the CM reject with reason 28.
            let rej = cm::RejRepr {
                remote_comm_id: r.local_comm_id,
                message_rejected: cm::MsgResponse::Req,
                reason: RejReason::ConsumerDefined,
                ..Default::default()
            };
            cx.send(src, src_qp, tid, &CmMessage::Rej(rej));
            return true;
        }
        let port = cma_hdr::split_service_id(r.service_id).1;
        let local = SocketAddr::new(dst_ip, port);
        let remote = SocketAddr::new(hdr.map(|h| h.src_ip()).unwrap_or(src), hdr.map_or(0, |h| h.src_port));
        let child = cx.ids.spawn_child(listener, local, remote);
        let comm = self.new_comm_id(cx);
        let psn = (cx.rng.next_u64() as u32) & 0xff_ffff; // cma.c: the id's seq_num
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
                retries_left: cx.cfg.cm_max_retries,
                last: None,
                remote_qpn: r.local_qpn,
                service_id: r.service_id,
                resend_after: cx.cfg.cm_response_timeout,
                mra_received: false,
                qp: crate::rc::CmQp {
                    local_psn: psn,
                    traffic_class: r.primary_path.traffic_class,
                    remote_psn: r.starting_psn,
                    path_mtu: r.path_mtu.clamp(1, 5).min(cx.cfg.mtu),
                    retry_count: r.retry_count,
                    rnr_retry_count: r.rnr_retry_count,
                    local_ack_timeout: r.primary_path.local_ack_timeout,
                    ..Default::default()
                },
            },
        );
        cx.ids.set_conn(child, Some(comm));
        let param = ConnParam {
            private_data: r.private_data[cma_hdr::HEADER_LEN..].to_vec(),
            responder_resources: r.responder_resources,
            initiator_depth: r.initiator_depth,
            remote_qpn: r.local_qpn,
            rnr_retry_count: r.rnr_retry_count,
            retry_count: r.retry_count,
        };
        cx.out.push_event(CmEvent {
            id: child,
            listen_id: Some(listener),
            kind: EventKind::ConnectRequest,
            status: 0,
            param: EventParam::Conn(param),
        });
        true
    }

    fn cm_sidr_req(
        &mut self,
        cx: &mut CmCtx<'_>,
        _now: Instant,
        src: IpAddr,
        src_qp: u32,
        tid: u64,
        r: &cm::SidrReqRepr,
    ) -> bool {
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
        let dst_ip = hdr.map(|h| h.dst_ip()).unwrap_or_else(|| cx.cfg.source_for(&src).unwrap_or(src));
        let Some(listener) = Self::find_listener(cx, r.service_id, dst_ip) else {
            let rep = cm::SidrRepRepr {
                request_id: r.request_id,
                status: SidrStatus::ServiceIdNotSupported,
                service_id: r.service_id,
                ..Default::default()
            };
            cx.send(src, src_qp, tid, &CmMessage::SidrRep(rep));
            return true;
        };
        if cx.ids.get(&listener).is_some_and(|l| l.qp_type != QpType::Ud) {
            // cma_ib_check_req_qp_type: SIDR only for a UD listener; the CM answers Rejected.
            let rep = cm::SidrRepRepr {
                request_id: r.request_id,
                status: SidrStatus::Rejected,
                service_id: r.service_id,
                ..Default::default()
            };
            cx.send(src, src_qp, tid, &CmMessage::SidrRep(rep));
            return true;
        }
        let port = cma_hdr::split_service_id(r.service_id).1;
        let remote = SocketAddr::new(hdr.map(|h| h.src_ip()).unwrap_or(src), hdr.map_or(0, |h| h.src_port));
        let child = cx.ids.spawn_child(listener, SocketAddr::new(dst_ip, port), remote);
        let comm = self.new_comm_id(cx);
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
                resend_after: cx.cfg.cm_response_timeout,
                mra_received: false,
                qp: crate::rc::CmQp::default(),
            },
        );
        cx.ids.set_conn(child, Some(comm));
        let param = ConnParam { private_data: r.private_data[cma_hdr::HEADER_LEN..].to_vec(), ..ConnParam::default() };
        cx.out.push_event(CmEvent {
            id: child,
            listen_id: Some(listener),
            kind: EventKind::ConnectRequest,
            status: 0,
            param: EventParam::Conn(param),
        });
        true
    }

    fn cm_rep(&mut self, cx: &mut CmCtx<'_>, _now: Instant, src: IpAddr, tid: u64, r: &cm::RepRepr) -> bool {
        let Some(c) = self.conns.get_mut(&r.remote_comm_id) else { return false };
        if c.peer != src {
            return false;
        }
        if c.state == ConnState::Established && c.remote_comm_id == r.local_comm_id {
            // A repeated REP: our RTU was lost; send it again (cm_dup_rep_handler), no event.
            let (peer, qp) = (c.peer, c.peer_gsi_qp);
            let rtu =
                cm::RtuRepr { local_comm_id: r.remote_comm_id, remote_comm_id: r.local_comm_id, ..Default::default() };
            cx.send(peer, qp, tid, &CmMessage::Rtu(rtu));
            return true;
        }
        if c.state != ConnState::ReqSent {
            return false;
        }
        // cm_rep_get_qpn: an XRC initiator's peer is the target in the EE context field.
        let xrc = cx.ids.get(&c.id).is_some_and(|i| i.qp_type == QpType::XrcIni);
        let remote_qpn = if xrc { r.local_eecn } else { r.local_qpn };
        c.remote_comm_id = r.local_comm_id;
        c.remote_qpn = remote_qpn;
        c.qp.remote_psn = r.starting_psn;
        c.qp.rnr_retry_count = r.rnr_retry_count;
        c.qp.initiator_depth = c.qp.initiator_depth.min(r.responder_resources);
        let (id, peer, qp) = (c.id, c.peer, c.peer_gsi_qp);
        let cmqp = c.qp;
        // cma_ib_handler: an id with a QP moves it to RTR and RTS and sends the RTU
        // (cma_rep_recv), ESTABLISHED; one without reports CONNECT_RESPONSE, and the RTU
        // waits for the application's `establish` (IB_CM_REP_RCVD).
        let rc_qp = cx.rc_qp_of(id);
        let kind = if let Some(qpn) = rc_qp {
            let _ = cx.rc_ready(_now, qpn, peer, remote_qpn, &cmqp);
            c.state = ConnState::Established;
            let rtu =
                cm::RtuRepr { local_comm_id: r.remote_comm_id, remote_comm_id: r.local_comm_id, ..Default::default() };
            cx.send(peer, qp, tid, &CmMessage::Rtu(rtu));
            EventKind::Established
        } else {
            c.state = ConnState::RepRcvd;
            c.tid = tid;
            EventKind::ConnectResponse
        };
        let param = ConnParam {
            private_data: r.private_data.to_vec(),
            responder_resources: r.responder_resources,
            initiator_depth: r.initiator_depth,
            remote_qpn,
            rnr_retry_count: r.rnr_retry_count,
            retry_count: 0,
        };
        cx.timers.unschedule(|w| *w == Work::CmTimer(r.remote_comm_id));
        cx.conn_event(id, kind, 0, EventParam::Conn(param));
        true
    }

    /// `rdma_establish` (the kernel's `rdma_accept` on an active id, cma_rep_recv without a
    /// QP): the RTU for a REP reported as CONNECT_RESPONSE; the connection is established, no
    /// event follows. EINVAL in any other CM state (ib_send_cm_rtu).
    pub(crate) fn establish(&mut self, cx: &mut CmCtx<'_>, id: CmId) -> Result<(), Errno> {
        let comm = cx.ids.conn(id).ok_or(Errno::EINVAL)?;
        let c = self.conns.get_mut(&comm).ok_or(Errno::EINVAL)?;
        if c.state != ConnState::RepRcvd {
            return Err(Errno::EINVAL);
        }
        c.state = ConnState::Established;
        let rtu = cm::RtuRepr { local_comm_id: comm, remote_comm_id: c.remote_comm_id, ..Default::default() };
        let (peer, qp, tid) = (c.peer, c.peer_gsi_qp, c.tid);
        cx.send(peer, qp, tid, &CmMessage::Rtu(rtu));
        Ok(())
    }

    fn cm_rtu(&mut self, cx: &mut CmCtx<'_>, local_comm: u32) -> bool {
        let Some(c) = self.conns.get_mut(&local_comm) else { return false };
        if c.state != ConnState::RepSent {
            return c.state == ConnState::Established;
        }
        c.state = ConnState::Established;
        let id = c.id;
        let remote_qpn = c.remote_qpn;
        cx.timers.unschedule(|w| *w == Work::CmTimer(local_comm));
        cx.conn_event(
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
    fn cm_rej(&mut self, cx: &mut CmCtx<'_>, src: IpAddr, r: &cm::RejRepr) -> bool {
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
        cx.timers.unschedule(|w| *w == Work::CmTimer(local_comm));
        cx.ids.set_conn(c.id, None);
        // The REJ's private data reaches the event (rdma_consumer_reject_data reads it).
        let param = EventParam::Conn(ConnParam { private_data: r.private_data.to_vec(), ..ConnParam::default() });
        cx.conn_event(c.id, EventKind::Rejected, i32::from(u16::from(reason)), param);
        true
    }

    fn enter_timewait(&mut self, cx: &mut CmCtx<'_>, now: Instant, comm: u32) {
        if let Some(c) = self.conns.get_mut(&comm) {
            c.state = ConnState::TimeWait;
            cx.timers.unschedule(|w| *w == Work::CmTimer(comm));
            cx.timers.schedule(now + cx.cfg.timewait, Work::CmTimer(comm));
        }
    }

    fn cm_dreq(
        &mut self,
        cx: &mut CmCtx<'_>,
        now: Instant,
        src: IpAddr,
        src_qp: u32,
        tid: u64,
        r: &cm::DreqRepr,
    ) -> bool {
        let (remote_comm, local_comm) = (r.local_comm_id, r.remote_comm_id);
        let Some(c) = self.conns.get(&local_comm) else {
            // Unknown connection: the CM still answers DREP so the peer can finish.
            let drep = cm::DrepRepr { remote_comm_id: remote_comm, ..Default::default() };
            cx.send(src, src_qp, tid, &CmMessage::Drep(drep));
            return false;
        };
        let (id, state) = (c.id, c.state);
        let drep = cm::DrepRepr { local_comm_id: local_comm, remote_comm_id: remote_comm, ..Default::default() };
        cx.send(src, src_qp, tid, &CmMessage::Drep(drep));
        // cm_dreq_handler: an established connection, or one whose REP or DREQ is
        // outstanding, goes to TIMEWAIT (the DREP is sent at once here; see spec/cm-states.md).
        // The QP is left as it is: neither the kernel's CM (cma_ib_handler) nor librdmacm's
        // DISCONNECTED touches it; the consumer's rdma_disconnect or destroy moves it to ERR.
        // Until then it completes what the peer still acknowledges (the peer's ACK of our last
        // SEND may well come after its DREQ).
        if matches!(state, ConnState::Established | ConnState::RepSent | ConnState::DreqSent) {
            self.enter_timewait(cx, now, local_comm);
            cx.conn_disconnected(id, 0);
        }
        true
    }

    fn cm_drep(&mut self, cx: &mut CmCtx<'_>, now: Instant, local_comm: u32) -> bool {
        let Some(c) = self.conns.get(&local_comm) else { return false };
        if c.state != ConnState::DreqSent {
            return false;
        }
        let id = c.id;
        self.enter_timewait(cx, now, local_comm);
        cx.conn_disconnected(id, 0);
        true
    }

    fn cm_sidr_rep(&mut self, cx: &mut CmCtx<'_>, src: IpAddr, r: &cm::SidrRepRepr) -> bool {
        let Some(c) = self.conns.get(&r.request_id) else { return false };
        if c.state != ConnState::SidrReqSent || c.peer != src {
            return false;
        }
        let id = c.id;
        let comm = r.request_id;
        self.conns.remove(&comm);
        cx.timers.unschedule(|w| *w == Work::CmTimer(comm));
        cx.ids.set_conn(id, None);
        if r.status == SidrStatus::Success {
            let ah = AddressHandle {
                dgid: Gid::from_ip(src),
                sgid: cx.cfg.source_for(&src).map(Gid::from_ip).unwrap_or_default(),
                dmac: cx.neigh.mac(cx.cfg, &src).unwrap_or([0; 6]),
                hop_limit: 64,
                traffic_class: 0,
                flow_label: 0,
                sl: 0,
            };
            cx.conn_event(id, EventKind::Established, 0, EventParam::Ud(UdParam { ah, qp_num: r.qpn, qkey: r.qkey }));
        } else {
            cx.conn_event(id, EventKind::Unreachable, i32::from(u8::from(r.status)), EventParam::None);
        }
        true
    }

    /// `rdma_accept` on a child id: REP (connected) or SIDR_REP (UD).
    pub(crate) fn accept(
        &mut self,
        cx: &mut CmCtx<'_>,
        now: Instant,
        id: CmId,
        param: &ConnectParam,
    ) -> Result<(), Errno> {
        let comm = cx.ids.conn(id).ok_or(Errno::EINVAL)?;
        let qpn = cx.ids.qpn(id).unwrap_or(param.qp_num);
        let c = self.conns.get_mut(&comm).ok_or(Errno::EINVAL)?;
        match c.state {
            ConnState::ReqRcvd => {
                let c = self.conns.get_mut(&comm).ok_or(Errno::EINVAL)?;
                let psn = c.qp.local_psn;
                c.qp.responder_resources = param.responder_resources;
                c.qp.initiator_depth = param.initiator_depth;
                let (cmqp, peer, remote_qpn) = (c.qp, c.peer, c.remote_qpn);
                // cma_accept_ib: the QP to RTR and RTS before the REP goes out.
                if let Some(q) = cx.rc_qp_of(id) {
                    cx.rc_ready(now, q, peer, remote_qpn, &cmqp)?;
                }
                let srq = cx.qp_has_srq(id);
                let xrc = cx.ids.get(&id).is_some_and(|r| r.qp_type == QpType::XrcTgt);
                let c = self.conns.get_mut(&comm).ok_or(Errno::EINVAL)?;
                let mut rep = cm::RepRepr {
                    local_comm_id: comm,
                    remote_comm_id: c.remote_comm_id,
                    local_qpn: qpn,
                    starting_psn: psn,
                    responder_resources: param.responder_resources,
                    initiator_depth: param.initiator_depth,
                    rnr_retry_count: param.rnr_retry_count & 7,
                    srq,
                    ..Default::default()
                };
                if xrc {
                    // cm_format_rep: a target names its QP in the EE context field, the SRQ
                    // bit set (its receives are an XRC SRQ's), no initiator depth.
                    rep.local_qpn = 0;
                    rep.local_eecn = qpn;
                    rep.srq = true;
                    rep.initiator_depth = 0;
                }
                copy_private(&mut rep.private_data, 0, &param.private_data);
                c.state = ConnState::RepSent;
                let msg = CmMessage::Rep(rep);
                c.last = Some(msg);
                let (peer, qp, tid) = (c.peer, c.peer_gsi_qp, c.tid);
                cx.send(peer, qp, tid, &msg);
                cx.timers.schedule(now + cx.cfg.cm_response_timeout, Work::CmTimer(comm));
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
                cx.ids.set_conn(id, None);
                cx.send(peer, qp, tid, &CmMessage::SidrRep(rep));
                Ok(())
            }
            _ => Err(Errno::EINVAL),
        }
    }

    /// `rdma_reject` (and the reject after a failed accept): EINVAL without an IB CM id; a
    /// UD id answers a SIDR_REQ it received with SIDR_REP Rejected (cma_send_sidr_rep); a
    /// connected id sends a REJ, reason 28, while a REQ is outstanding either way or its REP
    /// is (cm_send_rej_locked); any other CM state is EINVAL.
    pub(crate) fn reject(&mut self, cx: &mut CmCtx<'_>, id: CmId, private_data: &[u8]) -> Result<(), Errno> {
        let r = cx.ids.get(&id).ok_or(Errno::ENOENT)?;
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
            (false, ConnState::ReqSent | ConnState::ReqRcvd | ConnState::RepSent | ConnState::RepRcvd) => {
                CmMessage::Rej(rej_for(c, RejReason::ConsumerDefined, private_data))
            }
            _ => return Err(Errno::EINVAL),
        };
        let (peer, qp, tid) = (c.peer, c.peer_gsi_qp, c.tid);
        self.drop_conn(cx, id, comm);
        cx.send(peer, qp, tid, &msg);
        Ok(())
    }

    /// Forget a connection (the CM id goes back to idle; the rdma_cm_id keeps its CM id).
    fn drop_conn(&mut self, cx: &mut CmCtx<'_>, id: CmId, comm: u32) {
        self.conns.remove(&comm);
        cx.timers.unschedule(|w| *w == Work::CmTimer(comm));
        if let Some(r) = cx.ids.get_mut(&id) {
            if r.conn == Some(comm) {
                r.conn = None;
            }
        }
    }

    /// `rdma_disconnect`: EINVAL without an IB CM id; otherwise 0 whatever the CM state, with
    /// a DREQ sent when the connection is established (a failing ib_send_cm_dreq and
    /// ib_send_cm_drep is not reported).
    pub(crate) fn disconnect(&mut self, cx: &mut CmCtx<'_>, now: Instant, id: CmId) -> Result<(), Errno> {
        let r = cx.ids.get(&id).ok_or(Errno::ENOENT)?;
        if !r.cm_id {
            return Err(Errno::EINVAL);
        }
        let conn = r.conn;
        // rdma_disconnect: cma_modify_qp_err first, whatever the CM state.
        cx.rc_flush(now, id);
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
        c.retries_left = cx.cfg.cm_max_retries;
        let (peer, qp, tid) = (c.peer, c.peer_gsi_qp, c.tid);
        cx.send(peer, qp, tid, &msg);
        cx.timers.schedule(now + cx.cfg.cm_response_timeout, Work::CmTimer(comm));
        Ok(())
    }

    /// Tear down an id's connection on destroy, as cm_destroy_id does for each CM state:
    /// established: DREQ; a REQ received: REJ (28), a SIDR_REQ received: SIDR_REP Rejected;
    /// our REQ outstanding: REJ Timeout with our CA GUID as ARI (the peer does not know our
    /// ID yet); our REP outstanding: REJ (28); DREQ sent, TIMEWAIT, SIDR_REQ sent: nothing.
    pub(crate) fn destroy(&mut self, cx: &mut CmCtx<'_>, id: CmId) {
        let Some(comm) = cx.ids.conn(id) else { return };
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
                ConnState::ReqRcvd | ConnState::RepSent | ConnState::RepRcvd => {
                    Some((c.tid, CmMessage::Rej(rej_for(&c, RejReason::ConsumerDefined, &[]))))
                }
                ConnState::ReqSent => {
                    let mut rej = rej_for(&c, RejReason::Timeout, &[]);
                    rej.ari[..8].copy_from_slice(&cx.local_ca_guid().to_be_bytes());
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
                cx.send(c.peer, c.peer_gsi_qp, tid, &msg);
            }
        }
        self.drop_conn(cx, id, comm);
    }
}

/// A REJ for `c` as cm_format_rej fills it for the connection's state: a received REQ is
/// rejected as such (our ID not given); anything else names both IDs, message "other".
fn rej_for(c: &Conn, reason: RejReason, private_data: &[u8]) -> cm::RejRepr {
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

/// The CM's side of `rdma_init_qp_attr` and `rdma_notify` (the stack's calls in api.rs).
impl Cm {
    /// `rdma_init_qp_attr` (see [`crate::Stack::init_qp_attr`]).
    pub(crate) fn init_qp_attr(
        &self,
        cfg: &StackConfig,
        neigh: &Neighbors,
        ids: &Ids,
        id: CmId,
        state: InitQpState,
    ) -> Result<QpAttr, Errno> {
        let r = ids.get(&id).ok_or(Errno::ENOENT)?;
        let conn = r.conn.and_then(|c| self.conns.get(&c));
        let conn = match conn {
            Some(c) if r.cm_id && r.qp_type != QpType::Ud => c,
            _ => {
                if state != InitQpState::Init {
                    return Err(Errno::EINVAL);
                }
                let mut at = QpAttr::new(r.dst.map_or(IpAddr::from([0, 0, 0, 0]), |d| d.ip()), 0);
                at.access = Access::LOCAL_WRITE;
                at.pkey = cfg.pkey;
                return Ok(at);
            }
        };
        let ok = match state {
            InitQpState::Init => {
                matches!(
                    conn.state,
                    ConnState::ReqSent
                        | ConnState::ReqRcvd
                        | ConnState::RepSent
                        | ConnState::RepRcvd
                        | ConnState::Established
                )
            }
            InitQpState::Rtr | InitQpState::Rts => {
                matches!(
                    conn.state,
                    ConnState::ReqRcvd | ConnState::RepSent | ConnState::RepRcvd | ConnState::Established
                )
            }
        };
        if !ok {
            return Err(Errno::EINVAL);
        }
        Ok(cm_qp_attr(cfg, neigh, conn.peer, conn.remote_qpn, &conn.qp))
    }

    /// `rdma_notify` (see [`crate::Stack::notify`]).
    pub(crate) fn notify(&mut self, cx: &mut CmCtx<'_>, id: CmId, event: QpEvent) -> Result<(), Errno> {
        let r = cx.ids.get(&id).ok_or(Errno::ENOENT)?;
        if !r.cm_id {
            return Err(Errno::EINVAL);
        }
        let Some(comm) = r.conn else { return Err(Errno::EINVAL) };
        let state = self.conns.get(&comm).map(|c| c.state);
        match (event, state) {
            (QpEvent::CommEst, Some(ConnState::RepSent)) => {
                self.cm_rtu(cx, comm);
                Ok(())
            }
            (QpEvent::CommEst, Some(ConnState::Established)) => Err(Errno::EISCONN),
            (QpEvent::PathMig | QpEvent::PathMigErr, Some(ConnState::Established)) => Ok(()),
            _ => Err(Errno::EINVAL),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Stack;
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
