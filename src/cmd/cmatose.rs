//! `roce cmatose`: connect / accept / disconnect of a connected (RDMA_PS_TCP, RC) id, as
//! rdma-core's ucmatose does it, with its SENDs over the RC QP.
//!
//! The RC data path, as ucmatose moves data (librdmacm/examples/cmatose.c):
//! each side creates its RC QP, registers one message buffer and posts COUNT receives of
//! SIZE bytes before it connects or accepts; once ESTABLISHED the server sends COUNT
//! messages, waits for their completions, then for COUNT receives; the client waits for
//! COUNT receives, then sends COUNT replies ("sending replies") and here also waits for their
//! completions before it goes on to disconnect.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use roce_cm::rc::{Access, MrInfo, RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus};
use roce_cm::{CmId, ConnectParam, EventKind, PortSpace};
use roce_net::driver::Driver;

use crate::plumbing::cm_steps::{check_addresses, listen, resolved_id, run_steps, wait_connect_request, wait_for};
use crate::plumbing::options::{wait_secs, ClientServerArgs, RawPortArgs, MAX_EXCHANGE_COUNT, MAX_SIZE};
use crate::plumbing::out::{out, print_event, status};
use crate::plumbing::port::{set_port_mtu_from, CliDevice, PortOptions};

/// Connect, accept and disconnect a connected (TCP port space, RC) id, as rdma-core's
/// ucmatose does, with -C messages of -S bytes each way over the RC QP (SENDs).
///
/// Client (-s SERVER): resolve_addr ▶ resolve_route ▶ connect (REQ) ▶ REP ▶ our RTU:
/// ESTABLISHED ▶ our DREQ ▶ DREP: DISCONNECTED ▶ TIMEWAIT_EXIT (if the peer's DREQ comes
/// first we answer it with DREP). A REJ ends it with `event: REJECTED, error: REASON`.
/// Server (no -s): listen on -p, accept the first request (REP) ▶ the peer's RTU:
/// ESTABLISHED ▶ our DREQ (as ucmatose's server) ▶ DISCONNECTED. Needs CAP_NET_RAW. Exit
/// 0 only if every step succeeded.
///
/// Example: roce cmatose -s 198.18.0.2 -b 198.18.0.1 --iface tap0 -C 10 -S 100
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub addrs: ClientServerArgs,
    /// The RDMA-CM port (TCP port space).
    #[arg(short = 'p', long = "port", default_value_t = 7471)]
    pub cm_port: u16,
    /// Messages each way over the RC QP (ucmatose's default, 10; 0: the handshake only; at most
    /// 10000).
    #[arg(short = 'C', long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=MAX_EXCHANGE_COUNT as i64))]
    pub count: u32,
    /// Message size in bytes (at most 1 MiB).
    #[arg(short = 'S', long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(0..=MAX_SIZE as i64))]
    pub size: u32,
    /// Seconds to wait for each step (0 to 86400).
    #[arg(long, default_value = "20", value_parser = wait_secs, value_name = "SECS", allow_negative_numbers = true)]
    pub timeout: Duration,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub port: RawPortArgs,
    /// Congestion control of the RC QP: off (as rxe) or dcqcn (ECN-capable data, CNPs, rate
    /// cuts; spec/congestion.md).
    #[arg(long, value_enum, default_value_t = crate::plumbing::options::CcArg::Off)]
    pub cc: crate::plumbing::options::CcArg,
}

/// Run `roce cmatose`.
pub fn run(args: Args) -> ExitCode {
    crate::plumbing::shutdown::install();
    let mut port = args.port.options(args.addrs.bind);
    port.congestion = args.cc.congestion();
    ExitCode::from(cmatose(&args, &port))
}

/// `roce cmatose`: a connected (RDMA_PS_TCP, RC) id through the CM handshake and back, as
/// ucmatose does, with `count` SENDs each way (the RC data path below): the client resolves,
/// connects (REQ ▶ REP ▶ our RTU: ESTABLISHED), then disconnects itself (DREQ ▶ DREP:
/// DISCONNECTED) unless the peer's DREQ came first, and waits for TIMEWAIT_EXIT; the server
/// listens, accepts the first request (REP ▶ the peer's RTU: ESTABLISHED) and then, as
/// ucmatose's server does, disconnects (DREQ) and waits for DISCONNECTED. A REJ is reported
/// as ucmatose reports it (`cmatose: event: REJECTED, error: REASON`). Returns the exit code
/// (0: every step done).
fn cmatose(a: &Args, port: &PortOptions) -> u8 {
    const TOOL: &str = "roce cmatose";
    let checked = check_addresses(TOOL, port, a.addrs.server);
    // Connected ids still alive (a stop, a failure) are disconnected at the end: DREQ, or REJ.
    run_steps(TOOL, "cmatose", port, checked, |d| match a.addrs.server {
        Some(server) => cmatose_client(d, a, port, server),
        None => cmatose_server(d, a, port),
    })
}

fn cmatose_client(d: &mut Driver<CliDevice>, a: &Args, port: &PortOptions, server: IpAddr) -> Result<(), String> {
    status!("cmatose: starting client");
    let (id, dst) =
        resolved_id(d, "cmatose", PortSpace::Tcp, port.local, SocketAddr::new(server, a.cm_port), a.timeout)?;
    let service = roce_wire::cm::cma_hdr::service_id(PortSpace::Tcp.value(), a.cm_port);
    status!("cmatose: REQ to {dst} (service ID 0x{service:016x})");
    let mut node = prepare(d, &port.iface, id, a.count, a.size as usize)?; // QP, receives
    let now = d.now();
    let param = ConnectParam { responder_resources: 1, initiator_depth: 1, retry_count: 5, ..Default::default() };
    d.stack.connect(now, id, &param).map_err(|e| format!("connect: {e}"))?;
    match d.wait_event(
        id,
        &[EventKind::Established, EventKind::Rejected, EventKind::Unreachable, EventKind::ConnectError],
        a.timeout,
    ) {
        Ok(Some(e)) if e.kind == EventKind::Established => {
            print_event(&e, "");
            client_exchange(d, &mut node, a.timeout)?;
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
        Ok(None) => return Err(format!("connect: ETIMEDOUT: no event within {:.1} s", a.timeout.as_secs_f64())),
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
    wait_for(d, id, &[EventKind::Disconnected], a.timeout, "disconnect")?;
    out!("disconnected");
    // TIMEWAIT ends (the CM's timewait); the id then leaves the connection for good.
    let _ = wait_for(d, id, &[EventKind::TimewaitExit], a.timeout, "timewait");
    let now = d.now();
    let _ = d.stack.destroy_id(now, id);
    Ok(())
}

fn cmatose_server(d: &mut Driver<CliDevice>, a: &Args, port: &PortOptions) -> Result<(), String> {
    status!("cmatose: starting server");
    let addr = SocketAddr::new(port.local, a.cm_port);
    let listen = listen(d, PortSpace::Tcp, addr)?;
    status!("cmatose: listening on {addr}");
    let req = wait_connect_request(d, a.timeout)?;
    let child = req.id;
    let mut node = prepare(d, &port.iface, child, a.count, a.size as usize)?; // QP, receives
    let now = d.now();
    let param = ConnectParam { responder_resources: 1, initiator_depth: 1, ..Default::default() };
    d.stack.accept(now, child, &param).map_err(|e| format!("accept: {e}"))?;
    status!("cmatose: accepted (REP)");
    wait_for(d, child, &[EventKind::Established], a.timeout, "accept")?;
    server_exchange(d, &mut node, a.timeout)?;
    status!("cmatose: disconnecting");
    let now = d.now();
    d.stack.disconnect(now, child).map_err(|e| format!("disconnect: {e}"))?;
    wait_for(d, child, &[EventKind::Disconnected], a.timeout, "disconnect")?;
    out!("disconnected");
    let now = d.now();
    let _ = d.stack.destroy_id(now, child);
    let _ = d.stack.destroy_id(now, listen);
    Ok(())
}

/// The largest message of the RC data path (ucmatose takes any int; the bound keeps the
/// buffer sane; `-S` is bounded lower, by [`crate::plumbing::options::MAX_SIZE`]).
pub const MAX_MESSAGE_SIZE: usize = 1 << 24;
/// The most messages each way of the RC data path (`-C` is bounded lower, by
/// [`crate::plumbing::options::MAX_EXCHANGE_COUNT`]).
pub const MAX_MESSAGES: u32 = 1 << 16;

/// One connection's QP and message buffer.
#[derive(Debug, Clone, Copy)]
struct Node {
    qpn: u32,
    mr: Option<MrInfo>,
    count: u32,
    size: usize,
    /// Completions seen so far (a receive may complete while we wait for sends).
    sends_done: u32,
    recvs_done: u32,
}

/// init_node + post_recvs: the RC QP of `id`, and with data (`count` and `size` both
/// non-zero, as create_message decides) a buffer and `count` receives. The path MTU comes
/// from `iface` (see [`set_port_mtu_from`]).
fn prepare(d: &mut Driver<CliDevice>, iface: &str, id: CmId, count: u32, size: usize) -> Result<Node, String> {
    if count > MAX_MESSAGES || size > MAX_MESSAGE_SIZE {
        return Err(format!("at most {MAX_MESSAGES} messages of at most {MAX_MESSAGE_SIZE} bytes"));
    }
    set_port_mtu_from(d, iface);
    let count = if size == 0 { 0 } else { count };
    let qpn = d.stack.create_qp_for_id(id).map_err(|e| format!("unable to create QP: {e}"))?;
    let mut node = Node { qpn, mr: None, count, size, sends_done: 0, recvs_done: 0 };
    if count == 0 {
        return Ok(node);
    }
    let rc = d.stack.rc_mut();
    let mr = rc.reg_mr(size, Access::LOCAL_WRITE).map_err(|e| format!("failed to reg MR: {e}"))?;
    for i in 0..count {
        let wr = RecvWr { wr_id: u64::from(i), sg_list: vec![sge(&mr, size)] };
        rc.post_recv(qpn, wr).map_err(|e| format!("failed to post receives: {e}"))?;
    }
    node.mr = Some(mr);
    Ok(node)
}

fn sge(m: &MrInfo, size: usize) -> Sge {
    Sge { addr: m.addr, length: size as u32, lkey: m.lkey }
}

fn post_sends(d: &mut Driver<CliDevice>, n: &Node) -> Result<(), String> {
    let Some(mr) = n.mr else { return Ok(()) };
    let now = d.now();
    for i in 0..n.count {
        let wr = SendWr {
            wr_id: u64::from(i),
            op: SendOp::Send,
            sg_list: vec![sge(&mr, n.size)],
            signaled: true,
            solicited: false,
            inline: None,
        };
        d.stack.rc_mut().post_send(now, n.qpn, wr).map_err(|e| format!("failed to post sends: {e}"))?;
    }
    Ok(())
}

/// Poll until `count` completions of `want` have been seen (completions of the other kind
/// are counted too, for the next wait).
fn poll(d: &mut Driver<CliDevice>, n: &mut Node, want: WcOpcode, timeout: Duration) -> Result<(), String> {
    let mut err = None;
    let count = n.count;
    let done = d
        .run_until(timeout, |d| {
            while let Some(wc) = d.stack.rc_mut().poll_cq() {
                if wc.status != WcStatus::Success {
                    err = Some(format!("completion {:?} failed: {}", wc.opcode, wc.status.as_str()));
                    return true;
                }
                match wc.opcode {
                    WcOpcode::Send => n.sends_done += 1,
                    WcOpcode::Recv => n.recvs_done += 1,
                    _ => {}
                }
            }
            (if want == WcOpcode::Send { n.sends_done } else { n.recvs_done }) >= count
        })
        .map_err(|e| e.to_string())?;
    match err {
        Some(e) => Err(e),
        None if done => Ok(()),
        None => Err(format!(
            "{want:?} completions missing after {:.1} s: {} sends and {} receives of {count}",
            timeout.as_secs_f64(),
            n.sends_done,
            n.recvs_done
        )),
    }
}

/// The server's transfers after ESTABLISHED.
fn server_exchange(d: &mut Driver<CliDevice>, n: &mut Node, timeout: Duration) -> Result<(), String> {
    if n.count == 0 {
        return Ok(());
    }
    out!("initiating data transfers");
    post_sends(d, n)?;
    out!("completing sends");
    poll(d, n, WcOpcode::Send, timeout)?;
    out!("receiving data transfers");
    poll(d, n, WcOpcode::Recv, timeout)?;
    out!("data transfers complete");
    Ok(())
}

/// The client's transfers after ESTABLISHED.
fn client_exchange(d: &mut Driver<CliDevice>, n: &mut Node, timeout: Duration) -> Result<(), String> {
    if n.count == 0 {
        return Ok(());
    }
    out!("receiving data transfers");
    poll(d, n, WcOpcode::Recv, timeout)?;
    out!("sending replies");
    post_sends(d, n)?;
    poll(d, n, WcOpcode::Send, timeout)?;
    out!("data transfers complete");
    Ok(())
}
