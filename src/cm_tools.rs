//! The CM commands of the `roce` tool: `udaddy` (SIDR resolution of a UD service and a
//! datagram exchange, as rdma-core's librdmacm/examples/udaddy.c does it) and `cmatose`
//! (connect / accept / disconnect of a connected id, as ucmatose does it, with its SENDs over
//! the RC QP from rc_tools.rs). `main.rs` only parses arguments and calls these.
//!
//! udaddy's exchange (udaddy.c): the client resolves the address and the route, creates its
//! UD QP, posts its receives and connects (SIDR_REQ); on ESTABLISHED (SIDR_REP: the server's
//! QPN and Q_Key) it sends COUNT datagrams, SEND with immediate = its own QPN, and waits for
//! COUNT replies. The server listens, creates its QP and posts its receives on
//! CONNECT_REQUEST, accepts (SIDR_REP with its QPN), waits for COUNT datagrams, builds the
//! reply address from the first one's GRH (`ibv_create_ah_from_wc`), takes the client's QPN
//! from the immediate data and its own Q_Key as the remote Q_Key, and sends COUNT replies.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use roce_cm::event::{AddressHandle, EventParam};
use roce_cm::{CmEvent, CmId, ConnectParam, EventKind, PortSpace, QpType, UdDest};
use roce_net::driver::Driver;
use roce_wire::Gid;

use crate::plumbing::exit;
use crate::plumbing::out::print_event;
use crate::plumbing::tools::{check_families, check_size, finish, open_port, CliDevice, PortOptions};
use crate::{out, status};

/// `roce udaddy` options.
#[derive(Debug, Clone)]
pub struct UdaddyOptions {
    /// Where the stack runs (`local` is `-b`).
    pub port: PortOptions,
    /// The server to connect to (`-s`); a server when `None`.
    pub server: Option<IpAddr>,
    /// The RDMA-CM port (service ID = (RDMA_PS_UDP << 16) | port).
    pub cm_port: u16,
    /// Datagrams each way (`-C`).
    pub count: u32,
    /// Datagram size (`-S`).
    pub size: usize,
    /// How long to wait for each step (resolution, connection request, the datagrams).
    pub timeout: Duration,
}

/// Wait for one of `kinds` on `id` (any kind of `fail` ends the wait too); prints the event.
fn wait_for(
    d: &mut Driver<CliDevice>,
    id: CmId,
    kinds: &[EventKind],
    timeout: Duration,
    what: &str,
) -> Result<CmEvent, String> {
    const FAIL: [EventKind; 7] = [
        EventKind::AddrError,
        EventKind::RouteError,
        EventKind::ConnectError,
        EventKind::Unreachable,
        EventKind::Rejected,
        EventKind::DeviceRemoval,
        EventKind::Disconnected,
    ];
    let mut all: Vec<EventKind> = kinds.to_vec();
    all.extend(FAIL.iter().filter(|k| !kinds.contains(k)));
    match d.wait_event(id, &all, timeout) {
        Ok(Some(e)) => {
            print_event(&e, "");
            if kinds.contains(&e.kind) {
                Ok(e)
            } else {
                Err(format!("{what}: {} status {}", e.kind.name(), e.status))
            }
        }
        Ok(None) if d.stopped() => Err(format!("{what}: stopped")),
        Ok(None) => Err(format!("{what}: ETIMEDOUT: no event within {:.1} s", timeout.as_secs_f64())),
        Err(e) => Err(format!("{what}: {e}")),
    }
}

fn payload(size: usize, i: u32) -> Vec<u8> {
    (0..size).map(|j| (i as usize + j) as u8).collect()
}

/// Receive `n` datagrams on `qpn` within `timeout`; returns them.
fn receive(d: &mut Driver<CliDevice>, qpn: u32, n: u32, timeout: Duration) -> Vec<roce_cm::Datagram> {
    let mut got = Vec::new();
    let _ = d.run_until(timeout, |d| {
        while let Some(g) = d.stack.poll_recv(qpn) {
            got.push(g);
        }
        got.len() >= n as usize
    });
    got
}

/// `roce udaddy`: the client (with `server`) or the server. Returns the exit status: 0 when
/// the resolution (or the accept) and the whole exchange succeeded, 1 otherwise, 2 on a usage
/// error, 3 when it cannot run here; 128+N / 141 when stopped (after the ids were destroyed).
pub fn udaddy(o: &UdaddyOptions) -> u8 {
    const TOOL: &str = "roce udaddy";
    let checks = check_families(TOOL, &[("-b", Some(o.port.local)), ("-s", o.server)])
        .and_then(|()| check_size(TOOL, &o.port.iface, o.size, o.port.local.is_ipv4(), true));
    if let Err(e) = checks {
        eprintln!("{e}");
        return exit::USAGE;
    }
    let mut d = match open_port(&o.port) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{TOOL}: {}", e.message);
            return e.status;
        }
    };
    let r = match o.server {
        Some(server) => udaddy_client(&mut d, o, server),
        None => udaddy_server(&mut d, o),
    };
    let code = match r {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("udaddy: {e}");
            exit::FAILED
        }
    };
    let ids: Vec<CmId> = d.stack.ids().collect();
    crate::plumbing::shutdown::destroy_ids(TOOL, &mut d, &ids);
    out!("test complete");
    out!("return status {code}");
    finish(TOOL, &mut d, &[], o.port.verbose, code)
}

/// The client's first steps in both tools (as udaddy.c and cmatose.c): create an id of the
/// port space (UD for UDP, RC for TCP), resolve_addr from our address to the server, then
/// resolve_route, each waited for.
fn resolved_id(
    d: &mut Driver<CliDevice>,
    tool: &str,
    ps: PortSpace,
    local: IpAddr,
    dst: SocketAddr,
    timeout: Duration,
) -> Result<(CmId, SocketAddr), String> {
    let qp_type = if ps == PortSpace::Udp { QpType::Ud } else { QpType::Rc };
    let id = d.stack.create_id(ps, qp_type).map_err(|e| format!("create_id: {e}"))?;
    status!("{tool}: connecting");
    let now = d.now();
    d.stack
        .resolve_addr(now, id, Some(SocketAddr::new(local, 0)), dst, Duration::from_millis(2000))
        .map_err(|e| format!("resolve_addr: {e}"))?;
    wait_for(d, id, &[EventKind::AddrResolved], timeout, "resolve_addr")?;
    let now = d.now();
    d.stack.resolve_route(now, id, Duration::from_millis(2000)).map_err(|e| format!("resolve_route: {e}"))?;
    wait_for(d, id, &[EventKind::RouteResolved], timeout, "resolve_route")?;
    Ok((id, dst))
}

fn udaddy_client(d: &mut Driver<CliDevice>, o: &UdaddyOptions, server: IpAddr) -> Result<(), String> {
    status!("udaddy: starting client");
    let (id, dst) =
        resolved_id(d, "udaddy", PortSpace::Udp, o.port.local, SocketAddr::new(server, o.cm_port), o.timeout)?;
    let qpn = d.stack.create_qp_for_id(id).map_err(|e| format!("create_qp: {e}"))?;
    status!("udaddy: UD QP 0x{qpn:06x}; SIDR_REQ to {dst} (service ID 0x{:016x})", service_id(o.cm_port));
    let now = d.now();
    d.stack.connect(now, id, &ConnectParam::default()).map_err(|e| format!("connect: {e}"))?;
    let ev = wait_for(d, id, &[EventKind::Established], o.timeout, "connect")?;
    let EventParam::Ud(ud) = ev.param else { return Err("ESTABLISHED without UD parameters".into()) };
    let dest = UdDest { ah: ud.ah, remote_qpn: ud.qp_num, remote_qkey: ud.qkey };
    if o.count == 0 || o.size == 0 {
        return Ok(());
    }
    status!("initiating data transfers");
    for i in 0..o.count {
        d.stack.post_send(qpn, &dest, &payload(o.size, i), Some(qpn)).map_err(|e| format!("post_send: {e}"))?;
    }
    status!("receiving data transfers");
    let got = receive(d, qpn, o.count, o.timeout);
    report_received(&got, o.count, ud.qp_num)?;
    out!("data transfers complete");
    let now = d.now();
    let _ = d.stack.destroy_id(now, id);
    Ok(())
}

fn service_id(port: u16) -> u64 {
    roce_wire::cm::cma_hdr::service_id(PortSpace::Udp.value(), port)
}

fn report_received(got: &[roce_cm::Datagram], count: u32, from_qpn: u32) -> Result<(), String> {
    if let Some(g) = got.first() {
        out!(
            "received {} datagrams from {} QP 0x{:06x} (imm 0x{:06x}, {} bytes, Q_Key 0x{:08x})",
            got.len(),
            g.src,
            g.src_qp,
            g.imm_data.unwrap_or(0),
            g.payload.len(),
            g.qkey
        );
    }
    if got.len() < count as usize {
        return Err(format!("received {} of {count} datagrams", got.len()));
    }
    if from_qpn != 0 && got.iter().any(|g| g.src_qp != from_qpn) {
        return Err(format!("a datagram did not come from QP 0x{from_qpn:06x}"));
    }
    Ok(())
}

fn udaddy_server(d: &mut Driver<CliDevice>, o: &UdaddyOptions) -> Result<(), String> {
    status!("udaddy: starting server");
    let listen = d.stack.create_id(PortSpace::Udp, QpType::Ud).map_err(|e| format!("create_id: {e}"))?;
    let addr = SocketAddr::new(o.port.local, o.cm_port);
    d.stack.bind_addr(listen, addr).map_err(|e| format!("bind {addr}: {e}"))?;
    d.stack.listen(listen, 0).map_err(|e| format!("listen: {e}"))?;
    status!("udaddy: listening on {addr} (service ID 0x{:016x})", service_id(o.cm_port));
    // The CONNECT_REQUEST arrives on the child id, with listen_id = the listener.
    let mut req = None;
    let _ = d.run_until(o.timeout, |d| {
        if let Some(i) = d.events.iter().position(|e| e.kind == EventKind::ConnectRequest) {
            req = d.events.remove(i);
        }
        req.is_some()
    });
    let Some(req) = req else {
        if d.stopped() {
            return Err("stopped while listening".into());
        }
        return Err(format!("ETIMEDOUT: no connection request within {:.1} s", o.timeout.as_secs_f64()));
    };
    print_event(&req, "");
    let child = req.id;
    let peer = d.stack.id(child).and_then(|r| r.dst);
    let qpn = d.stack.create_qp_for_id(child).map_err(|e| format!("create_qp: {e}"))?;
    let now = d.now();
    d.stack.accept(now, child, &ConnectParam::default()).map_err(|e| format!("accept: {e}"))?;
    status!(
        "udaddy: accepted {} with SIDR_REP (QPN 0x{qpn:06x}, Q_Key 0x{:08x})",
        peer.map_or("?".to_string(), |p| p.to_string()),
        roce_wire::RDMA_UDP_QKEY
    );
    if o.count == 0 || o.size == 0 {
        return Ok(());
    }
    status!("receiving data transfers");
    let got = receive(d, qpn, o.count, o.timeout);
    report_received(&got, o.count, 0)?;
    // create_reply_ah: the AH from the first datagram's GRH, the QPN from its immediate data,
    // our own Q_Key as the remote Q_Key.
    let first = &got[0];
    let ah = AddressHandle {
        dgid: Gid::from_ip(first.src),
        sgid: Gid::from_ip(first.dst),
        dmac: first.src_mac,
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
        sl: 0,
    };
    let remote_qpn = first.imm_data.unwrap_or(first.src_qp) & 0xff_ffff;
    let qkey = d.stack.qp(qpn).map_or(roce_wire::RDMA_UDP_QKEY, |q| q.qkey);
    let dest = UdDest { ah, remote_qpn, remote_qkey: qkey };
    status!("sending replies to {} QP 0x{remote_qpn:06x}", first.src);
    for i in 0..o.count {
        d.stack.post_send(qpn, &dest, &payload(o.size, i), Some(qpn)).map_err(|e| format!("post_send: {e}"))?;
        let _ = d.run_for(Duration::from_millis(1));
    }
    out!("data transfers complete");
    let now = d.now();
    let _ = d.stack.destroy_id(now, child);
    let _ = d.stack.destroy_id(now, listen);
    Ok(())
}

/// `roce cmatose` options.
#[derive(Debug, Clone)]
pub struct CmatoseOptions {
    /// Where the stack runs (`local` is `-b`).
    pub port: PortOptions,
    /// The server to connect to (`-s`); a server when `None`.
    pub server: Option<IpAddr>,
    /// The RDMA-CM port (TCP port space: service ID = (RDMA_PS_TCP << 16) | port).
    pub cm_port: u16,
    /// How long to wait for each step.
    pub timeout: Duration,
    /// Messages each way over the RC QP (`-C`; 0: the handshake only).
    pub count: u32,
    /// Message size (`-S`).
    pub size: usize,
}

/// `roce cmatose`: a connected (RDMA_PS_TCP, RC) id through the CM handshake and back, as
/// ucmatose does, with `count` SENDs each way (rc_tools.rs): the client resolves, connects (REQ ▶ REP ▶ our RTU:
/// ESTABLISHED), then disconnects itself (DREQ ▶ DREP: DISCONNECTED) unless the peer's DREQ
/// came first, and waits for TIMEWAIT_EXIT; the server listens, accepts the first request (REP
/// ▶ the peer's RTU: ESTABLISHED) and then, as ucmatose's server does, disconnects (DREQ) and
/// waits for DISCONNECTED. A REJ is reported as ucmatose reports it
/// (`cmatose: event: REJECTED, error: REASON`). Returns the exit code (0: every step done).
pub fn cmatose(o: &CmatoseOptions) -> u8 {
    const TOOL: &str = "roce cmatose";
    if let Err(e) = check_families(TOOL, &[("-b", Some(o.port.local)), ("-s", o.server)]) {
        eprintln!("{e}");
        return exit::USAGE;
    }
    let mut d = match open_port(&o.port) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{TOOL}: {}", e.message);
            return e.status;
        }
    };
    let r = match o.server {
        Some(server) => cmatose_client(&mut d, o, server),
        None => cmatose_server(&mut d, o),
    };
    let code = match r {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("cmatose: {e}");
            exit::FAILED
        }
    };
    // Connected ids still alive (a stop, a failure) are disconnected here: DREQ, or REJ.
    let ids: Vec<CmId> = d.stack.ids().collect();
    crate::plumbing::shutdown::destroy_ids(TOOL, &mut d, &ids);
    out!("test complete");
    out!("return status {code}");
    finish(TOOL, &mut d, &[], o.port.verbose, code)
}

fn cmatose_client(d: &mut Driver<CliDevice>, o: &CmatoseOptions, server: IpAddr) -> Result<(), String> {
    status!("cmatose: starting client");
    let (id, dst) =
        resolved_id(d, "cmatose", PortSpace::Tcp, o.port.local, SocketAddr::new(server, o.cm_port), o.timeout)?;
    let service = roce_wire::cm::cma_hdr::service_id(PortSpace::Tcp.value(), o.cm_port);
    status!("cmatose: REQ to {dst} (service ID 0x{service:016x})");
    let mut node = crate::rc_tools::prepare(d, &o.port.iface, id, o.count, o.size)?; // rc_tools: QP, receives
    let now = d.now();
    let param = ConnectParam { responder_resources: 1, initiator_depth: 1, retry_count: 5, ..Default::default() };
    d.stack.connect(now, id, &param).map_err(|e| format!("connect: {e}"))?;
    match d.wait_event(
        id,
        &[EventKind::Established, EventKind::Rejected, EventKind::Unreachable, EventKind::ConnectError],
        o.timeout,
    ) {
        Ok(Some(e)) if e.kind == EventKind::Established => {
            print_event(&e, "");
            crate::rc_tools::client_exchange(d, &mut node, o.timeout)?;
        }
        Ok(Some(e)) => {
            print_event(&e, "");
            let what = if e.kind == EventKind::Rejected {
                format!(" ({:?})", roce_wire::cm::RejReason::from(e.status as u16))
            } else {
                String::new()
            };
            return Err(format!("event: {}, error: {}{what}", e.kind.name(), e.status));
        }
        Ok(None) if d.stopped() => return Err("connect: stopped".into()),
        Ok(None) => return Err(format!("connect: ETIMEDOUT: no event within {:.1} s", o.timeout.as_secs_f64())),
        Err(e) => return Err(format!("connect: {e}")),
    }
    // Our DREQ, unless the peer's came first (its DISCONNECTED is then already queued).
    let _ = d.run_for(Duration::from_millis(0));
    let peer_first = d.events.iter().any(|e| e.id == id && e.kind == EventKind::Disconnected);
    if peer_first {
        status!("cmatose: the peer disconnected first (its DREQ, our DREP)");
    } else {
        status!("cmatose: disconnecting (DREQ)");
    }
    let now = d.now();
    d.stack.disconnect(now, id).map_err(|e| format!("disconnect: {e}"))?;
    wait_for(d, id, &[EventKind::Disconnected], o.timeout, "disconnect")?;
    out!("disconnected");
    // TIMEWAIT ends (the CM's timewait); the id then leaves the connection for good.
    let _ = wait_for(d, id, &[EventKind::TimewaitExit], o.timeout, "timewait");
    let now = d.now();
    let _ = d.stack.destroy_id(now, id);
    Ok(())
}

fn cmatose_server(d: &mut Driver<CliDevice>, o: &CmatoseOptions) -> Result<(), String> {
    status!("cmatose: starting server");
    let listen = d.stack.create_id(PortSpace::Tcp, QpType::Rc).map_err(|e| format!("create_id: {e}"))?;
    let addr = SocketAddr::new(o.port.local, o.cm_port);
    d.stack.bind_addr(listen, addr).map_err(|e| format!("bind {addr}: {e}"))?;
    d.stack.listen(listen, 0).map_err(|e| format!("listen: {e}"))?;
    status!("cmatose: listening on {addr}");
    let mut req = None;
    let _ = d.run_until(o.timeout, |d| {
        if let Some(i) = d.events.iter().position(|e| e.kind == EventKind::ConnectRequest) {
            req = d.events.remove(i);
        }
        req.is_some()
    });
    let Some(req) = req else {
        if d.stopped() {
            return Err("stopped while listening".into());
        }
        return Err(format!("ETIMEDOUT: no connection request within {:.1} s", o.timeout.as_secs_f64()));
    };
    print_event(&req, "");
    let child = req.id;
    let mut node = crate::rc_tools::prepare(d, &o.port.iface, child, o.count, o.size)?; // rc_tools: QP, receives
    let now = d.now();
    let param = ConnectParam { responder_resources: 1, initiator_depth: 1, ..Default::default() };
    d.stack.accept(now, child, &param).map_err(|e| format!("accept: {e}"))?;
    status!("cmatose: accepted (REP)");
    wait_for(d, child, &[EventKind::Established], o.timeout, "accept")?;
    crate::rc_tools::server_exchange(d, &mut node, o.timeout)?;
    status!("cmatose: disconnecting");
    let now = d.now();
    d.stack.disconnect(now, child).map_err(|e| format!("disconnect: {e}"))?;
    wait_for(d, child, &[EventKind::Disconnected], o.timeout, "disconnect")?;
    out!("disconnected");
    let now = d.now();
    let _ = d.stack.destroy_id(now, child);
    let _ = d.stack.destroy_id(now, listen);
    Ok(())
}
