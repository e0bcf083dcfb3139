//! `roce udaddy`: SIDR resolution of a UD service and a datagram exchange, as rdma-core's
//! librdmacm/examples/udaddy.c does it.
//!
//! udaddy's exchange (udaddy.c): the client resolves the address and the route, creates its
//! UD QP, posts its receives and connects (SIDR_REQ); on ESTABLISHED (SIDR_REP: the server's
//! QPN and Q_Key) it sends COUNT datagrams, SEND with immediate = its own QPN, and waits for
//! COUNT replies. The server listens, creates its QP and posts its receives on
//! CONNECT_REQUEST, accepts (SIDR_REP with its QPN), waits for COUNT datagrams, builds the
//! reply address from the first one's GRH (`ibv_create_ah_from_wc`), takes the client's QPN
//! from the immediate data and its own Q_Key as the remote Q_Key, and sends COUNT replies.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use roce_cm::event::{AddressHandle, EventParam};
use roce_cm::{ConnectParam, EventKind, PortSpace, UdDest};
use roce_net::driver::Driver;
use roce_wire::Gid;

use crate::plumbing::cm_steps::{check_addresses, listen, resolved_id, run_steps, wait_connect_request, wait_for};
use crate::plumbing::options::{wait_secs, ClientServerArgs, RawPortArgs, MAX_EXCHANGE_COUNT, MAX_SIZE};
use crate::plumbing::out::{out, status};
use crate::plumbing::port::{check_size, CliDevice, PortOptions};

/// Resolve a UD service by SIDR and exchange datagrams with it (rdma-core's udaddy).
///
/// Client (-s SERVER): resolve_addr ▶ resolve_route ▶ UD QP ▶ connect (SIDR_REQ) ▶
/// ESTABLISHED with the service's QPN and Q_Key (SIDR_REP) ▶ send -C datagrams of -S
/// bytes (SEND with immediate = our QPN, as udaddy) ▶ receive -C replies. Server (no -s):
/// listen on -p, accept the CONNECT_REQUEST (SIDR_REP with our QPN), receive -C
/// datagrams, reply -C to the sender (QPN from the immediate data). Needs CAP_NET_RAW.
/// Exit 0 only if every step succeeded. (rdma-core's udaddy uses -p for the port space
/// and a fixed port 7174; here -p is the port.)
///
/// Example: roce udaddy -s 198.18.0.2 -b 198.18.0.1 --iface tap0 -C 10
///
/// Example: roce udaddy -b 198.18.0.1 --iface tap0   (server)
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub addrs: ClientServerArgs,
    /// Datagrams each way (at most 10000).
    #[arg(short = 'C', long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=MAX_EXCHANGE_COUNT as i64))]
    pub count: u32,
    /// Datagram size in bytes (at most the path MTU less the immediate data's 4 bytes of
    /// header room, e.g. 1024 on a 1500-byte link).
    #[arg(short = 'S', long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(0..=MAX_SIZE as i64))]
    pub size: u32,
    /// The RDMA-CM port (UDP port space).
    #[arg(short = 'p', long = "port", default_value_t = 7174)]
    pub cm_port: u16,
    /// Seconds to wait for each step: resolution, the request, the datagrams (0 to 86400).
    #[arg(long, default_value = "20", value_parser = wait_secs, value_name = "SECS", allow_negative_numbers = true)]
    pub timeout: Duration,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub port: RawPortArgs,
}

/// Run `roce udaddy`.
pub fn run(args: Args) -> ExitCode {
    crate::plumbing::shutdown::install();
    ExitCode::from(udaddy(&args, &args.port.options(args.addrs.bind)))
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
fn udaddy(a: &Args, port: &PortOptions) -> u8 {
    const TOOL: &str = "roce udaddy";
    let checked = check_addresses(TOOL, port, a.addrs.server)
        .and_then(|()| check_size(TOOL, &port.iface, a.size as usize, port.local.is_ipv4(), true));
    run_steps(TOOL, "udaddy", port, checked, |d| match a.addrs.server {
        Some(server) => udaddy_client(d, a, port, server),
        None => udaddy_server(d, a, port),
    })
}

fn udaddy_client(d: &mut Driver<CliDevice>, a: &Args, port: &PortOptions, server: IpAddr) -> Result<(), String> {
    status!("udaddy: starting client");
    let (id, dst) =
        resolved_id(d, "udaddy", PortSpace::Udp, port.local, SocketAddr::new(server, a.cm_port), a.timeout)?;
    let qpn = d.stack.create_qp_for_id(id).map_err(|e| format!("create_qp: {e}"))?;
    status!("udaddy: UD QP 0x{qpn:06x}; SIDR_REQ to {dst} (service ID 0x{:016x})", service_id(a.cm_port));
    let now = d.now();
    d.stack.connect(now, id, &ConnectParam::default()).map_err(|e| format!("connect: {e}"))?;
    let ev = wait_for(d, id, &[EventKind::Established], a.timeout, "connect")?;
    let EventParam::Ud(ud) = ev.param else { return Err("ESTABLISHED without UD parameters".into()) };
    let dest = UdDest { ah: ud.ah, remote_qpn: ud.qp_num, remote_qkey: ud.qkey };
    if a.count == 0 || a.size == 0 {
        return Ok(());
    }
    status!("initiating data transfers");
    for i in 0..a.count {
        d.stack
            .post_send(qpn, &dest, &payload(a.size as usize, i), Some(qpn))
            .map_err(|e| format!("post_send: {e}"))?;
    }
    status!("receiving data transfers");
    let got = receive(d, qpn, a.count, a.timeout);
    report_received(&got, a.count, ud.qp_num)?;
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

fn udaddy_server(d: &mut Driver<CliDevice>, a: &Args, port: &PortOptions) -> Result<(), String> {
    status!("udaddy: starting server");
    let addr = SocketAddr::new(port.local, a.cm_port);
    let listen = listen(d, PortSpace::Udp, addr)?;
    status!("udaddy: listening on {addr} (service ID 0x{:016x})", service_id(a.cm_port));
    let req = wait_connect_request(d, a.timeout)?;
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
    if a.count == 0 || a.size == 0 {
        return Ok(());
    }
    status!("receiving data transfers");
    let got = receive(d, qpn, a.count, a.timeout);
    report_received(&got, a.count, 0)?;
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
    for i in 0..a.count {
        d.stack
            .post_send(qpn, &dest, &payload(a.size as usize, i), Some(qpn))
            .map_err(|e| format!("post_send: {e}"))?;
        let _ = d.run_for(Duration::from_millis(1));
    }
    out!("data transfers complete");
    let now = d.now();
    let _ = d.stack.destroy_id(now, child);
    let _ = d.stack.destroy_id(now, listen);
    Ok(())
}
