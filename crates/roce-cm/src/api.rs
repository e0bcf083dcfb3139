//! The `rdma_cm_id` calls, with the kernel's state checks and error numbers [cma.c;
//! protocol.md §5.2–5.3]. spec/cm-states.csv lists every (state, call) outcome; a test walks
//! it against these functions.

use core::time::Duration;
use std::net::{IpAddr, SocketAddr};

use roce_wire::cm::cma_hdr;
use roce_wire::mad::{MadHeader, Method};
use roce_wire::mcmember::JoinState;
use roce_wire::sa::{attr, SaData, SaMad};
use roce_wire::service_record::ServiceRecord;
use roce_wire::Gid;

use crate::cm::{node_type_allowed, ConnectParam, InitQpState, QpEvent, RDMA_NODE_IB_CA, RDMA_NODE_RNIC};
use crate::ctx::Work;
use crate::event::{CmEvent, EventKind, EventParam};
use crate::id::{link_local_without_scope, wildcard_like, CmId, CmState, PortSpace, QpType};
use crate::rc::{Access, QpAttr, QpCap, QpInit, QpState, Rc, TransportService};
use crate::sa_client::TxnOwner;
use crate::service::{records_in, records_of, IbService};
use crate::stack::Stack;
use crate::{Errno, Instant};

pub use crate::id::IdRecord;

impl Stack {
    fn rec(&self, id: CmId) -> Result<&IdRecord, Errno> {
        self.ids.get(&id).ok_or(Errno::ENOENT)
    }

    /// The id's record (state, addresses, options).
    pub fn id(&self, id: CmId) -> Option<&IdRecord> {
        self.ids.get(&id)
    }

    /// The id's state.
    pub fn state(&self, id: CmId) -> Option<CmState> {
        self.ids.state(id)
    }

    /// Every live id.
    pub fn ids(&self) -> impl Iterator<Item = CmId> + '_ {
        self.ids.keys().copied()
    }

    fn set_state(&mut self, id: CmId, st: CmState) {
        self.ids.set_state(id, st);
    }

    /// `rdma_create_id`: a new id in IDLE. The QP type must fit the port space (ucma:
    /// TCP ▶ RC, UDP and IPOIB ▶ UD, IB any: RC, UC or UD), else EINVAL.
    pub fn create_id(&mut self, ps: PortSpace, qp_type: QpType) -> Result<CmId, Errno> {
        let ok = match ps {
            PortSpace::Tcp => qp_type == QpType::Rc,
            PortSpace::Udp | PortSpace::Ipoib => qp_type == QpType::Ud,
            PortSpace::Ib => true,
        };
        if !ok {
            return Err(Errno::EINVAL);
        }
        Ok(self.ids.alloc(ps, qp_type))
    }

    /// `rdma_create_qp`: for a UD id a QP with the port space's Q_Key (0x01234567), used for
    /// multicast attach on join and for SIDR accept; for a connected id an RC or UC QP (the
    /// id's type) in INIT that connect/accept move to RTS (rc/).
    pub fn create_qp_for_id(&mut self, id: CmId) -> Result<u32, Errno> {
        self.create_qp_for_id_with_srq(id, None)
    }

    /// `rdma_create_qp` with `qp_init_attr.srq` set: a connected id's QP that takes its
    /// receives from SRQ `srq` (the REQ or REP then carries the SRQ bit, as cma.c's
    /// cma_connect_ib/cma_accept_ib send `id_priv->srq`). EINVAL for a UD id with an SRQ.
    pub fn create_qp_for_id_with_srq(&mut self, id: CmId, srq: Option<u32>) -> Result<u32, Errno> {
        self.create_qp_for_id_with(id, QpCap::default(), srq)
    }

    /// `rdma_create_qp` with the program's queue depths (`qp_init_attr.cap`) for a connected
    /// id's QP; a UD id's QP ignores them (its receives are the caller's to hold).
    pub fn create_qp_for_id_with(&mut self, id: CmId, cap: QpCap, srq: Option<u32>) -> Result<u32, Errno> {
        let r = self.rec(id)?;
        if r.qpn.is_some() {
            return Err(Errno::EINVAL);
        }
        let service = match r.qp_type {
            QpType::Rc => Some(TransportService::Rc),
            QpType::Uc => Some(TransportService::Uc),
            QpType::XrcIni => Some(TransportService::XrcIni),
            QpType::XrcTgt => return Err(Errno::EINVAL), // a target needs its domain
            QpType::Ud => None,
        };
        if let Some(service) = service {
            return self.create_qp_for_id_init(id, QpInit { service, cap, srq, pd: 0 });
            // rc/: a QP in INIT
        }
        if srq.is_some() {
            return Err(Errno::EINVAL);
        }
        let qpn = self.create_qp(roce_wire::RDMA_UDP_QKEY);
        if let Some(r) = self.ids.get_mut(&id) {
            r.qpn = Some(qpn);
        }
        Ok(qpn)
    }

    /// `rdma_create_qp` of a connected id with the QP's whole description (an XRC target's
    /// domain among it): EINVAL when the service is not the id's QP type (RC, UC, XRC
    /// initiator, XRC target of any domain) or the id has a QP already.
    pub fn create_qp_for_id_init(&mut self, id: CmId, init: QpInit) -> Result<u32, Errno> {
        let r = self.rec(id)?;
        let fits = matches!(
            (r.qp_type, init.service),
            (QpType::Rc, TransportService::Rc)
                | (QpType::Uc, TransportService::Uc)
                | (QpType::XrcIni, TransportService::XrcIni)
                | (QpType::XrcTgt, TransportService::XrcTgt { .. })
        );
        if !fits || r.qpn.is_some() {
            return Err(Errno::EINVAL);
        }
        self.create_conn_qp_for_id(id, init)
    }

    /// `rdma_bind_addr`.
    pub fn bind_addr(&mut self, id: CmId, addr: SocketAddr) -> Result<(), Errno> {
        let r = self.rec(id)?;
        if r.state != CmState::Idle {
            return Err(Errno::EINVAL);
        }
        if link_local_without_scope(&addr) {
            return Err(Errno::EINVAL);
        }
        if !addr.ip().is_unspecified() && !self.is_local(&addr.ip()) {
            return Err(Errno::EADDRNOTAVAIL);
        }
        if !addr.ip().is_unspecified() && !node_type_allowed(r.restricted_node_type) {
            return Err(Errno::ENODEV); // cma_acquire_dev_by_src_ip skips our IB CA
        }
        let ps = r.ps;
        let reuse = r.reuseaddr;
        let afonly = if r.afonly_set { r.afonly } else { addr.is_ipv4() };
        if let Some(r) = self.ids.get_mut(&id) {
            r.afonly = afonly;
            r.src = Some(addr);
        }
        let port = if addr.port() == 0 {
            self.alloc_any_port(ps, id)?
        } else {
            if addr.port() < 1024 && !self.cfg.privileged {
                self.undo_bind(id);
                return Err(Errno::EACCES);
            }
            if let Err(e) = self.ids.check_port(ps, addr.port(), id, reuse) {
                self.undo_bind(id);
                return Err(e);
            }
            addr.port()
        };
        self.ids.hold_port(ps, port, id);
        let has_device = !addr.ip().is_unspecified();
        if let Some(r) = self.ids.get_mut(&id) {
            r.src = Some(SocketAddr::new(addr.ip(), port));
            r.bound = true;
            r.has_device = has_device;
            r.state = CmState::AddrBound;
        }
        Ok(())
    }

    fn undo_bind(&mut self, id: CmId) {
        if let Some(r) = self.ids.get_mut(&id) {
            r.src = None;
        }
    }

    /// `cma_alloc_any_port`: a random start in the ephemeral range, then a linear probe for a
    /// port nobody holds.
    fn alloc_any_port(&mut self, ps: PortSpace, id: CmId) -> Result<u16, Errno> {
        let (lo, hi) = self.cfg.ephemeral_ports;
        let span = u32::from(hi.saturating_sub(lo)) + 1;
        let start = (self.random() % u64::from(span)) as u32;
        for i in 0..span {
            let port = lo + ((start + i) % span) as u16;
            if !self.ids.ports().in_use(ps, port) {
                return Ok(port);
            }
        }
        self.undo_bind(id);
        Err(Errno::EADDRNOTAVAIL)
    }

    /// `rdma_resolve_addr`: from IDLE (binding implicitly) or ADDR_BOUND to ADDR_QUERY; then
    /// ADDR_RESOLVED or ADDR_ERROR, by ARP/ND for a unicast peer and at once (queued) for a
    /// multicast or local destination.
    pub fn resolve_addr(
        &mut self,
        now: Instant,
        id: CmId,
        src: Option<SocketAddr>,
        dst: SocketAddr,
        timeout: Duration,
    ) -> Result<(), Errno> {
        let st = self.rec(id)?.state;
        if st == CmState::Idle {
            // resolve_prepare_src: bind first (the source given, or the destination family's
            // wildcard); a family mismatch is found after the bind and leaves the id bound.
            let bind = src.unwrap_or_else(|| SocketAddr::new(wildcard_like(&dst.ip()), 0));
            self.bind_addr(id, bind)?;
        }
        let r = self.rec(id)?;
        if r.state != CmState::AddrBound {
            return Err(Errno::EINVAL);
        }
        if r.src.is_some_and(|s| s.is_ipv4() != dst.is_ipv4()) {
            return Err(Errno::EINVAL);
        }
        let ip = dst.ip();
        if !ip.is_multicast() && !self.is_local(&ip) && !self.on_link(&ip) {
            return Err(Errno::ENETUNREACH);
        }
        if let Some(r) = self.ids.get_mut(&id) {
            r.state = CmState::AddrQuery;
            r.dst = Some(dst);
        }
        if ip.is_multicast() || self.is_local(&ip) || self.resolve_neighbor(now, ip, id) {
            self.schedule(now, Work::AddrResolved(id));
        } else {
            self.schedule(now + timeout, Work::ResolveDeadline(id));
        }
        Ok(())
    }

    pub(crate) fn addr_resolved(&mut self, _now: Instant, id: CmId) {
        let Some(r) = self.ids.get(&id) else { return };
        if r.state != CmState::AddrQuery {
            return;
        }
        let dst = r.dst;
        let src = r.src;
        let new_src = match (src, dst) {
            (Some(s), Some(d)) if s.ip().is_unspecified() => {
                self.source_for(&d.ip()).map(|ip| SocketAddr::new(ip, s.port()))
            }
            (s, _) => s,
        };
        if let Some(r) = self.ids.get_mut(&id) {
            r.state = CmState::AddrResolved;
            r.src = new_src;
            r.has_device = true;
        }
        self.unschedule(|w| *w == Work::ResolveDeadline(id));
        self.push_event(CmEvent {
            id,
            listen_id: None,
            kind: EventKind::AddrResolved,
            status: 0,
            param: EventParam::None,
        });
    }

    pub(crate) fn addr_error(&mut self, id: CmId, err: Errno) {
        let Some(r) = self.ids.get_mut(&id) else { return };
        if r.state != CmState::AddrQuery {
            return;
        }
        r.state = CmState::AddrBound;
        self.unschedule(|w| *w == Work::ResolveDeadline(id) || *w == Work::AddrResolved(id));
        self.push_event(CmEvent {
            id,
            listen_id: None,
            kind: EventKind::AddrError,
            status: err.status(),
            param: EventParam::None,
        });
    }

    pub(crate) fn resolve_deadline(&mut self, id: CmId) {
        self.forget_resolver(id);
        self.addr_error(id, Errno::ETIMEDOUT);
    }

    /// `rdma_resolve_route`: ADDR_RESOLVED (or ADDRINFO_RESOLVED, after
    /// `rdma_resolve_ib_service`) ▶ ROUTE_QUERY ▶ (queued) ROUTE_RESOLVED; on RoCE the path is
    /// built locally.
    pub fn resolve_route(&mut self, now: Instant, id: CmId, timeout: Duration) -> Result<(), Errno> {
        let r = self.rec(id)?;
        if timeout.is_zero() || !matches!(r.state, CmState::AddrResolved | CmState::AddrInfoResolved) {
            return Err(Errno::EINVAL);
        }
        self.set_state(id, CmState::RouteQuery);
        self.schedule(now, Work::RouteResolved(id));
        Ok(())
    }

    pub(crate) fn route_resolved(&mut self, id: CmId) {
        if self.state(id) == Some(CmState::RouteQuery) {
            self.set_state(id, CmState::RouteResolved);
            self.push_event(CmEvent {
                id,
                listen_id: None,
                kind: EventKind::RouteResolved,
                status: 0,
                param: EventParam::None,
            });
        }
    }

    /// `rdma_listen`: from IDLE (binding the IPv4 wildcard) or ADDR_BOUND; with reuseaddr the
    /// address must still be unique, and a listening id is reusable no more (cma.c clears
    /// `reuseaddr`). A listener on a device holds an IB CM listen id (cma_ib_listen); a
    /// wildcard one does not (cma_listen_on_all).
    pub fn listen(&mut self, id: CmId, _backlog: u32) -> Result<(), Errno> {
        if self.rec(id)?.state == CmState::Idle {
            self.bind_addr(id, SocketAddr::new(IpAddr::from([0, 0, 0, 0]), 0))?;
        }
        let r = self.rec(id)?;
        if r.state != CmState::AddrBound {
            return Err(Errno::EINVAL);
        }
        if r.reuseaddr {
            let (ps, port) = (r.ps, r.src.map_or(0, |s| s.port()));
            self.ids.check_port(ps, port, id, false)?;
        }
        if let Some(r) = self.ids.get_mut(&id) {
            r.reuseaddr = false;
            r.cm_id = r.has_device;
            r.state = CmState::Listen;
        }
        Ok(())
    }

    /// `rdma_connect`: ROUTE_RESOLVED ▶ CONNECT, sending a REQ (or a SIDR_REQ for UD).
    pub fn connect(&mut self, now: Instant, id: CmId, param: &ConnectParam) -> Result<(), Errno> {
        if self.rec(id)?.state != CmState::RouteResolved {
            return Err(Errno::EINVAL);
        }
        self.set_state(id, CmState::Connect);
        let (cm, mut cx) = self.cm_parts();
        if let Err(e) = cm.start_connect(&mut cx, now, id, param) {
            self.set_state(id, CmState::RouteResolved);
            return Err(e);
        }
        Ok(())
    }

    /// `rdma_accept` on a child id in CONNECT with a pending request (REP, or SIDR_REP for
    /// UD). EINVAL in any other state. In CONNECT without a request to answer (an active id,
    /// an accepted or answered child) it fails with EINVAL and, like cma.c's `goto reject`,
    /// rejects whatever the connection still allows (REJ for an outstanding REQ or REP).
    pub fn accept(&mut self, now: Instant, id: CmId, param: &ConnectParam) -> Result<(), Errno> {
        if self.rec(id)?.state != CmState::Connect {
            return Err(Errno::EINVAL);
        }
        let (cm, mut cx) = self.cm_parts();
        cm.accept(&mut cx, now, id, param).inspect_err(|_| {
            let _ = cm.reject(&mut cx, id, &[]);
        })
    }

    /// `rdma_establish`: an active id without a QP, whose REP was reported as
    /// CONNECT_RESPONSE, sends its RTU (the application has moved its own QP to RTS); the
    /// connection is established with no further event. EINVAL in any other state.
    pub fn establish(&mut self, id: CmId) -> Result<(), Errno> {
        if self.rec(id)?.state != CmState::Connect {
            return Err(Errno::EINVAL);
        }
        let (cm, mut cx) = self.cm_parts();
        cm.establish(&mut cx, id)
    }

    /// `rdma_reject`: EINVAL without an IB CM id; then what ib_send_cm_rej allows: a REQ
    /// received or sent, or a REP sent (REJ), or a SIDR_REQ received (SIDR_REP, Rejected);
    /// EINVAL in any other CM state (established, disconnecting, TIMEWAIT, idle).
    pub fn reject(&mut self, id: CmId, private_data: &[u8]) -> Result<(), Errno> {
        self.rec(id)?;
        let (cm, mut cx) = self.cm_parts();
        cm.reject(&mut cx, id, private_data)
    }

    /// `rdma_disconnect`: EINVAL without an IB CM id; otherwise 0, sending a DREQ if the
    /// connection is established (ib_send_cm_dreq and ib_send_cm_drep failing is not an error).
    pub fn disconnect(&mut self, now: Instant, id: CmId) -> Result<(), Errno> {
        self.rec(id)?;
        let (cm, mut cx) = self.cm_parts();
        cm.disconnect(&mut cx, now, id)
    }

    /// `rdma_join_multicast` (`join_state`: exactly one bit; RDMA-CM itself offers
    /// FullMember and SendOnlyFullMember, NonMember and SendOnlyNonMember go on the wire too).
    /// Needs a device and ADDR_BOUND or ADDR_RESOLVED (else EINVAL), and a UD id (EINVAL
    /// otherwise: "RDMA/cma: Allow UD qp_type to join multicast only"); the group must be a
    /// multicast address (EINVAL), IPv6 groups need `ipv6_multicast` (else ENOTSUPP, the
    /// kernel's answer on RoCEv2). Completion is MULTICAST_JOIN or MULTICAST_ERROR.
    pub fn join_multicast(
        &mut self,
        now: Instant,
        id: CmId,
        group: IpAddr,
        join_state: JoinState,
    ) -> Result<(), Errno> {
        let r = self.rec(id)?;
        if !r.has_device || !matches!(r.state, CmState::AddrBound | CmState::AddrResolved) {
            return Err(Errno::EINVAL);
        }
        if r.qp_type != QpType::Ud {
            return Err(Errno::EINVAL);
        }
        if join_state.0 == 0 || join_state.0 & (join_state.0 - 1) != 0 || join_state.0 > 0x8 {
            return Err(Errno::EINVAL);
        }
        if group.is_unspecified() || !group.is_multicast() {
            return Err(Errno::EINVAL);
        }
        if group.is_ipv6() && !self.cfg.ipv6_multicast {
            return Err(Errno::ENOTSUPP);
        }
        if self.source_for(&group).is_none() {
            return Err(Errno::ENODEV);
        }
        self.start_join(now, id, group, join_state);
        Ok(())
    }

    /// `rdma_leave_multicast`: never blocks and never fails for a live id; an unknown group is
    /// a no-op (the kernel's void). Completion is reported as MULTICAST_LEFT (or
    /// MULTICAST_ERROR when the SA never answers the Delete).
    pub fn leave_multicast(&mut self, now: Instant, id: CmId, group: IpAddr) -> Result<(), Errno> {
        self.rec(id)?;
        self.start_leave(now, id, group);
        Ok(())
    }

    /// `rdma_destroy_id`: leaves every group (no events), ends a connection (DREQ or REJ),
    /// releases the port; queued events of the id are dropped.
    pub fn destroy_id(&mut self, now: Instant, id: CmId) -> Result<(), Errno> {
        self.rec(id)?;
        self.set_state(id, CmState::Destroying);
        let members = self.ids.get(&id).map(|r| r.members.keys()).unwrap_or_default();
        for m in members {
            self.remove_member(now, m, false);
        }
        let (cm, mut cx) = self.cm_parts();
        cm.destroy(&mut cx, id);
        self.ids.release_port(id);
        self.cancel_queries(id);
        self.ib_services.forget(id);
        self.ids.remove(&id);
        self.out.events.retain(|e| e.id != id);
        Ok(())
    }

    /// cma_cancel_operation for ADDR_QUERY and ROUTE_QUERY: the queued completion, the
    /// deadline and the neighbour resolution the id waits for.
    fn cancel_queries(&mut self, id: CmId) {
        self.unschedule(
            |w| matches!(w, Work::AddrResolved(x) | Work::RouteResolved(x) | Work::ResolveDeadline(x) if *x == id),
        );
        self.forget_resolver(id);
    }

    /// `rdma_set_reuseaddr`: allowed when (reuse and not LISTEN) or in IDLE.
    pub fn set_reuseaddr(&mut self, id: CmId, reuse: bool) -> Result<(), Errno> {
        let r = self.ids.get_mut(&id).ok_or(Errno::ENOENT)?;
        if (reuse && r.state != CmState::Listen) || r.state == CmState::Idle {
            r.reuseaddr = reuse;
            Ok(())
        } else {
            Err(Errno::EINVAL)
        }
    }

    /// `rdma_set_afonly`: only in IDLE or ADDR_BOUND.
    pub fn set_afonly(&mut self, id: CmId, afonly: bool) -> Result<(), Errno> {
        let r = self.ids.get_mut(&id).ok_or(Errno::ENOENT)?;
        if matches!(r.state, CmState::Idle | CmState::AddrBound) {
            r.afonly = afonly;
            r.afonly_set = true;
            Ok(())
        } else {
            Err(Errno::EINVAL)
        }
    }

    /// The device went away (cma_process_remove): every id attached to the device moves to
    /// DEVICE_REMOVAL and gets the event, and its address or route query is cancelled. Ids
    /// without a device are not on the device's list and are untouched: IDLE ones, ones bound
    /// to a wildcard address (and so wildcard listeners, whose per-device listen ids the
    /// kernel destroys silently), and ones still resolving from a wildcard source.
    pub fn remove_device(&mut self) {
        let ids: Vec<CmId> = self.ids.keys().copied().collect();
        for id in ids {
            if let Some(r) = self.ids.get_mut(&id) {
                if !r.has_device || matches!(r.state, CmState::Destroying | CmState::DeviceRemoval) {
                    continue;
                }
                r.state = CmState::DeviceRemoval;
                self.cancel_queries(id);
                self.push_event(CmEvent {
                    id,
                    listen_id: None,
                    kind: EventKind::DeviceRemoval,
                    status: 0,
                    param: EventParam::None,
                });
            }
        }
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
        let (cm, cfg, neigh, ids) = self.cm_view();
        cm.init_qp_attr(cfg, neigh, ids, id, state)
    }

    /// `rdma_notify`: EINVAL without an IB CM id; COMM_EST (data arrived before the RTU)
    /// establishes a connection whose REP is outstanding, with an ESTABLISHED event
    /// (cm_establish), EISCONN when it is already established, EINVAL in other CM states;
    /// PATH_MIG / PATH_MIG_ERR on an established connection change nothing (no alternate
    /// path is ever loaded here: LAP is not handled) and are EINVAL otherwise; any other
    /// event is EINVAL.
    pub fn notify(&mut self, id: CmId, event: QpEvent) -> Result<(), Errno> {
        let (cm, mut cx) = self.cm_parts();
        cm.notify(&mut cx, id, event)
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

/// The RC QPs of the ids and the verbs doors to rc/ (rc/ owns QPs, memory regions and the
/// completion queue; the stack numbers QPs, as UD QPs share the numbering).
impl Stack {
    /// `rdma_create_qp` for a connected id: an RC or UC QP moved to INIT at once, as
    /// cma_init_conn_qp does.
    fn create_conn_qp_for_id(&mut self, id: CmId, init: QpInit) -> Result<u32, Errno> {
        let qpn = self.create_qp_with(init)?;
        // cma_ib_init_qp_attr without a CM id: no remote access until the CM grants it.
        let mut at = QpAttr::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);
        at.access = Access::LOCAL_WRITE;
        self.rc.modify_qp(self.now, qpn, QpState::Init, &at)?;
        if let Some(r) = self.ids.get_mut(&id) {
            r.qpn = Some(qpn);
        }
        Ok(qpn)
    }

    /// `ibv_create_qp` of an RC QP: a QP number from the port's space (shared with UD QPs),
    /// in RESET.
    pub fn create_rc_qp(&mut self, cap: QpCap) -> Result<u32, Errno> {
        self.create_qp_with(QpInit { cap, ..QpInit::default() })
    }

    /// `ibv_create_qp` of an RC or UC QP, with or without an SRQ (`Rc::create_srq`), in
    /// RESET.
    pub fn create_qp_with(&mut self, init: QpInit) -> Result<u32, Errno> {
        let qpn = self.next_qpn;
        self.rc.create_qp_with(qpn, init)?;
        self.next_qpn = (self.next_qpn + 1) & crate::rc::psn::PSN_MASK;
        Ok(qpn)
    }

    /// `ibv_get_async_event`: the next asynchronous event of the port's QPs and SRQs (today
    /// `IBV_EVENT_SRQ_LIMIT_REACHED`), oldest first. Separate from `poll_event`, as the
    /// verbs async fd is separate from the rdma_cm event channel.
    pub fn poll_async_event(&mut self) -> Option<crate::rc::AsyncEvent> {
        self.rc.poll_async_event()
    }

    /// Set the port MTU (IB MTU code 1 = 256 … 5 = 4096) that connections offer in their
    /// REQ and accept at most: RDMA-CM's `iboe_get_mtu` of the netdev MTU on Ethernet.
    pub fn set_port_mtu(&mut self, code: u8) {
        self.cfg.mtu = code.clamp(1, 5);
    }

    /// The RC engine (QPs, memory regions, completions).
    pub fn rc(&self) -> &Rc {
        &self.rc
    }

    /// The RC engine, for verbs calls (`post_send`, `post_recv`, `poll_cq`, `reg_mr`, ...).
    pub fn rc_mut(&mut self) -> &mut Rc {
        &mut self.rc
    }
}

/// The ids as multicast sees them (mcast.rs asks for nothing else).
impl crate::mcast::MemberIds for crate::id::IdTable {
    #[inline]
    fn port_space(&self, id: CmId) -> Option<PortSpace> {
        self.get(&id).map(|r| r.ps)
    }

    #[inline]
    fn qpn(&self, id: CmId) -> Option<u32> {
        self.get(&id).and_then(|r| r.qpn)
    }

    #[inline]
    fn takes_multicast_events(&self, id: CmId) -> bool {
        // Destroyed ids, and ids whose device went away, get no multicast events
        // (cma_ib_mc_handler / cma_work_handler skip DESTROYING and DEVICE_REMOVAL).
        self.get(&id).is_some_and(|r| r.state != CmState::DeviceRemoval)
    }

    #[inline]
    fn members_mut(&mut self, id: CmId) -> Option<&mut crate::mcast::IdMembers> {
        self.get_mut(&id).map(|r| &mut r.members)
    }

    #[inline]
    fn members_and_qpn(&mut self, id: CmId) -> Option<(&mut crate::mcast::IdMembers, Option<u32>)> {
        self.get_mut(&id).map(|r| (&mut r.members, r.qpn))
    }
}

/// IB service resolution, `rdma_resolve_ib_service` and its answers ([`crate::service`] keeps
/// the records and reads them from the SA's answers).
impl Stack {
    /// `rdma_resolve_ib_service`: from ADDR_BOUND on a device (a specific address bound) to
    /// ADDRINFO_QUERY, then an SA SubnAdmGetTable(ServiceRecord) by `service`; EINVAL in any
    /// other state or without a device; EOPNOTSUPP without an SA (the kernel's answer for a port
    /// without `rdma_cap_ib_sa`, which on a kernel is every RoCE port: see spec/api.md).
    /// `timeout` is the query's whole budget ([`KERNEL_TIMEOUT`](crate::service::KERNEL_TIMEOUT) is the kernel's fixed one),
    /// retransmitted as [`crate::SaTiming`] says. The answer comes as ADDRINFO_RESOLVED or
    /// ADDRINFO_ERROR (status ETIMEDOUT, EINVAL for an SA error status, ENODATA for no record).
    pub fn resolve_ib_service(
        &mut self,
        now: Instant,
        id: CmId,
        service: &IbService,
        timeout: Duration,
    ) -> Result<(), Errno> {
        let r = self.ids.get(&id).ok_or(Errno::ENOENT)?;
        if !r.has_device || r.state != CmState::AddrBound {
            return Err(Errno::EINVAL);
        }
        if self.cfg.sa.is_none() && self.cfg.sa_transport != crate::config::SaTransport::External {
            return Err(Errno::EOPNOTSUPP);
        }
        if timeout.is_zero() {
            return Err(Errno::EINVAL);
        }
        let (rec, mask) = service.query();
        let mad = SaMad::request(Method::GetTable, 0, attr::SERVICE_RECORD, mask.0, SaData::service(rec));
        self.ids.set_state(id, CmState::AddrInfoQuery);
        self.sa.start_with_timeout(now, mad, TxnOwner::Service(id), timeout);
        Ok(())
    }

    /// `RDMA_USER_CM_QUERY_IB_SERVICE`: the records the last resolution returned (the first
    /// is the destination); ENODATA before one succeeded, ENOENT for an unknown id.
    pub fn query_ib_service(&self, id: CmId) -> Result<&[ServiceRecord], Errno> {
        self.ids.get(&id).ok_or(Errno::ENOENT)?;
        self.ib_services.records(id).ok_or(Errno::ENODATA)
    }

    /// The SA answered a resolution [`cma_query_ib_service_handler`]: one MAD, or the whole
    /// reassembled RMPP message (`table`), every record of which the kernel keeps.
    pub(crate) fn ib_service_answered(
        &mut self,
        id: CmId,
        h: &MadHeader,
        payload: &[u8],
        table: Option<&crate::rmpp_recv::Reassembly>,
    ) {
        // Any SA status: -EINVAL (sa_query.c `recv_handler`); no record: -ENODATA
        // (`ib_sa_service_rec_callback`).
        if h.status.0 != 0 {
            return self.ib_service_failed(id, Errno::EINVAL);
        }
        let recs = match table {
            Some(t) => records_in(&t.data, SaMad::parse(&t.first).map_or(0, |m| m.sa.attribute_offset)),
            None => records_of(payload),
        };
        let Some(first) = recs.first().copied() else {
            return self.ib_service_failed(id, Errno::ENODATA);
        };
        if self.ib_services.contains(id) {
            return self.ib_service_failed(id, Errno::EALREADY);
        }
        let Some(r) = self.ids.get_mut(&id) else { return };
        if r.state != CmState::AddrInfoQuery {
            return;
        }
        // The destination: the record's GID (an IP address on RoCE) and, for an RDMA-CM IP
        // service ID, its port (the kernel sets an AF_IB address with GID, P_Key and SID).
        let port =
            if cma_hdr::is_ip_service_id(first.service_id) { cma_hdr::split_service_id(first.service_id).1 } else { 0 };
        r.dst = Some(SocketAddr::new(first.service_gid.to_ip(), port));
        r.state = CmState::AddrInfoResolved;
        self.ib_services.insert(id, recs);
        self.push_event(CmEvent {
            id,
            listen_id: None,
            kind: EventKind::AddrInfoResolved,
            status: 0,
            param: EventParam::None,
        });
    }

    /// The resolution failed: back to ADDR_BOUND with ADDRINFO_ERROR and the errno.
    pub(crate) fn ib_service_failed(&mut self, id: CmId, err: Errno) {
        let Some(r) = self.ids.get_mut(&id) else { return };
        if r.state != CmState::AddrInfoQuery {
            return;
        }
        r.state = CmState::AddrBound;
        self.push_event(CmEvent {
            id,
            listen_id: None,
            kind: EventKind::AddrInfoError,
            status: err.status(),
            param: EventParam::None,
        });
    }
}
