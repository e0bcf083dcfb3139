//! `roce rping`: rdma-core's rping over this stack's RC QPs, against the kernel's rping or
//! another `roce rping`. The exchange (librdmacm/examples/rping.c), per ping:
//!
//! 1. the client writes "rdma-ping-N: " and a rotating run of 'A'..'z' into its start
//!    buffer (NUL at the end) and SENDs the buffer's address, rkey and size (16 bytes,
//!    big-endian: `struct rping_rdma_info`);
//! 2. the server RDMA READs that buffer into its own, prints it with `-v`
//!    ("server ping data: ..."), and SENDs a 16-byte "go ahead";
//! 3. the client SENDs the address, rkey and size of its sink buffer;
//! 4. the server RDMA WRITEs the string back into it and SENDs "go ahead" again;
//! 5. the client compares the two buffers with `-V` and prints "ping data: ..." with `-v`.
//!
//! After `-C` pings the client disconnects; the server runs until the client disconnects,
//! as rping's does. Both sides connect with responder resources 1, initiator depth 1, retry
//! and RNR retry 7.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use roce_cm::rc::{Access, MrInfo, RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus};
use roce_cm::{CmId, ConnectParam, EventKind, PortSpace, QpType};
use roce_net::driver::Driver;

use crate::plumbing::cm_steps::first_connect_request;
use crate::plumbing::exit;
use crate::plumbing::out::out;
use crate::plumbing::port::{open_port_or_exit, CliDevice};

/// The smallest ping (rping's RPING_MIN_BUFSIZE: room for "rdma-ping-2147483647: ").
pub const MIN_SIZE: usize = 26;
/// The largest ping (rping's RPING_BUFSIZE - 1).
pub const MAX_SIZE: usize = 65535;
/// The longest wait for one step, in seconds.
pub const MAX_TIMEOUT_S: f64 = 3600.0;

fn parse_size(s: &str) -> Result<usize, String> {
    let n: usize = s.parse().map_err(|e| format!("{e}"))?;
    if (MIN_SIZE..=MAX_SIZE).contains(&n) {
        Ok(n)
    } else {
        Err(format!("valid range is {MIN_SIZE} to {MAX_SIZE}"))
    }
}

fn parse_timeout(s: &str) -> Result<f64, String> {
    let t: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if t.is_finite() && (0.0..=MAX_TIMEOUT_S).contains(&t) {
        Ok(t)
    } else {
        Err(format!("seconds from 0 to {MAX_TIMEOUT_S}"))
    }
}

/// rdma-core's rping over RC QPs: per ping a SEND of the buffer's address, an RDMA READ
/// by the server, an RDMA WRITE back, "go ahead" SENDs (librdmacm/examples/rping.c).
///
/// Example: roce rping -c -a 198.18.0.2 -I 198.18.0.1 --iface tap0 -C 10 -V -v
#[derive(clap::Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("role").required(true).args(["server", "client"])))]
pub struct Args {
    /// Server side: listen on -a (the stack's own address) and -p.
    #[arg(short = 's')]
    pub server: bool,
    /// Client side: connect to -a from -I.
    #[arg(short = 'c')]
    pub client: bool,
    /// Address: the server's (client), the one to listen on (server).
    #[arg(short = 'a', value_name = "ADDR")]
    pub addr: IpAddr,
    /// Source address of the client: the stack's own address on --iface (required with -c).
    #[arg(short = 'I', value_name = "ADDR")]
    pub source: Option<IpAddr>,
    /// The RDMA-CM port (TCP port space).
    #[arg(short = 'p', default_value_t = 7174)]
    pub port: u16,
    /// Pings to send (client; 0: until interrupted). The server runs until the client leaves.
    #[arg(short = 'C', default_value_t = 0)]
    pub count: u32,
    /// Ping data size in bytes (26 to 65535, the NUL included).
    #[arg(short = 'S', default_value_t = 64, value_parser = parse_size)]
    pub size: usize,
    /// Print the ping data.
    #[arg(short = 'v')]
    pub verbose: bool,
    /// Validate the ping data (client).
    #[arg(short = 'V')]
    pub validate: bool,
    /// Print every frame, and every counter at exit.
    #[arg(short = 'd')]
    pub debug: bool,
    /// Quiet: no progress lines (ping data, results and errors stay).
    #[arg(short = 'q')]
    pub quiet: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub net: crate::plumbing::options::IfacePortArgs,
    /// Seconds to wait for each step (0 to 3600).
    #[arg(long, default_value_t = 20.0, value_parser = parse_timeout)]
    pub timeout: f64,
    /// Congestion control of the RC QP: off (as rxe) or dcqcn (ECN-capable data, CNPs, rate
    /// cuts; spec/congestion.md).
    #[arg(long, value_enum, default_value_t = crate::plumbing::options::CcArg::Off)]
    pub cc: crate::plumbing::options::CcArg,
}

/// The buffers of one side, as rping registers them.
struct Bufs {
    recv: MrInfo,
    send: MrInfo,
    rdma: MrInfo,
    start: Option<MrInfo>,
}

struct Ctx<'a> {
    d: &'a mut Driver<CliDevice>,
    id: CmId,
    qpn: u32,
    bufs: Bufs,
    size: usize,
    timeout: Duration,
    quiet: bool,
}

/// What ended a wait for a completion.
enum Waited {
    Done,
    Disconnected,
}

fn sge(m: &MrInfo, len: usize) -> Vec<Sge> {
    vec![Sge { addr: m.addr, length: len as u32, lkey: m.lkey }]
}

impl Ctx<'_> {
    fn say(&self, s: &str) {
        if !self.quiet {
            out!("{s}");
        }
    }

    fn setup(d: &mut Driver<CliDevice>, id: CmId, size: usize, client: bool) -> Result<(u32, Bufs), String> {
        let qpn = d.stack.create_qp_for_id(id).map_err(|e| format!("rdma_create_qp: {e}"))?;
        let rc = d.stack.rc_mut();
        let remote = Access::LOCAL_WRITE.union(Access::REMOTE_READ).union(Access::REMOTE_WRITE);
        let reg = |rc: &mut roce_cm::rc::Rc, n, a| rc.reg_mr(n, a).map_err(|e| format!("ibv_reg_mr: {e}"));
        let bufs = Bufs {
            recv: reg(rc, 16, Access::LOCAL_WRITE)?,
            send: reg(rc, 16, Access::NONE)?,
            rdma: reg(rc, size, remote)?,
            start: if client { Some(reg(rc, size, remote)?) } else { None },
        };
        rc.post_recv(qpn, RecvWr { wr_id: 0, sg_list: sge(&bufs.recv, 16) })
            .map_err(|e| format!("ibv_post_recv: {e}"))?;
        Ok((qpn, bufs))
    }

    /// SEND the 16-byte rping_rdma_info of `buf` (or zeros for the server's "go ahead").
    fn send_info(&mut self, buf: Option<MrInfo>) -> Result<(), String> {
        let mut info = [0u8; 16];
        if let Some(b) = buf {
            info[..8].copy_from_slice(&b.addr.to_be_bytes());
            info[8..12].copy_from_slice(&b.rkey.to_be_bytes());
            info[12..].copy_from_slice(&(self.size as u32).to_be_bytes());
        }
        let rc = self.d.stack.rc_mut();
        if buf.is_some() {
            rc.mr_mut(self.bufs.send.lkey).ok_or("send buffer gone")?.copy_from_slice(&info);
        }
        let wr = SendWr {
            wr_id: 1,
            op: SendOp::Send,
            sg_list: sge(&self.bufs.send, 16),
            signaled: true,
            solicited: false,
            inline: None,
        };
        let now = self.d.now();
        self.d.stack.rc_mut().post_send(now, self.qpn, wr).map_err(|e| format!("post send error {e}"))
    }

    fn post_rdma(&mut self, op: SendOp, len: usize) -> Result<(), String> {
        let wr =
            SendWr { wr_id: 2, op, sg_list: sge(&self.bufs.rdma, len), signaled: true, solicited: false, inline: None };
        let now = self.d.now();
        self.d.stack.rc_mut().post_send(now, self.qpn, wr).map_err(|e| format!("post send error {e}"))
    }

    /// Run until a completion of `want` (SEND completions are taken and passed over; a
    /// received message must be 16 bytes and its receive is posted again), or the peer
    /// disconnects.
    fn wait(&mut self, want: WcOpcode) -> Result<Waited, String> {
        let id = self.id;
        let (qpn, recv) = (self.qpn, self.bufs.recv);
        let mut out: Option<Result<Waited, String>> = None;
        let done = self.d.run_until(self.timeout, |d| {
            while let Some(wc) = d.stack.rc_mut().poll_cq() {
                if wc.status == WcStatus::WrFlushErr {
                    out = Some(Ok(Waited::Disconnected));
                    return true;
                }
                if wc.status != WcStatus::Success {
                    out = Some(Err(format!(
                        "cq completion failed status {} ({})",
                        wc.status.ibv_code(),
                        wc.status.as_str()
                    )));
                    return true;
                }
                if wc.opcode == WcOpcode::Recv {
                    if wc.byte_len != 16 {
                        out = Some(Err(format!("Received bogus data, size {}", wc.byte_len)));
                        return true;
                    }
                    let r = RecvWr { wr_id: 0, sg_list: sge(&recv, 16) };
                    if let Err(e) = d.stack.rc_mut().post_recv(qpn, r) {
                        out = Some(Err(format!("post recv error: {e}")));
                        return true;
                    }
                }
                if wc.opcode == want {
                    out = Some(Ok(Waited::Done));
                    return true;
                }
            }
            if d.events.iter().any(|e| e.id == id && e.kind == EventKind::Disconnected) {
                out = Some(Ok(Waited::Disconnected));
                return true;
            }
            false
        });
        match (done, out) {
            (Ok(true), Some(r)) => r,
            (Err(e), _) => Err(format!("{e}")),
            _ => Err(format!("no completion within {:.1} s", self.timeout.as_secs_f64())),
        }
    }

    fn expect(&mut self, want: WcOpcode, what: &str) -> Result<(), String> {
        match self.wait(want)? {
            Waited::Done => Ok(()),
            Waited::Disconnected => Err(format!("wait for {what}: DISCONNECTED")),
        }
    }

    fn cstr(&self, lkey: u32) -> String {
        let b = self.d.stack.rc().mr(lkey).unwrap_or(&[]);
        let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).into_owned()
    }
}

fn wait_cm(
    d: &mut Driver<CliDevice>,
    id: CmId,
    kind: EventKind,
    timeout: Duration,
) -> Result<roce_cm::CmEvent, String> {
    const FAIL: [EventKind; 6] = [
        EventKind::AddrError,
        EventKind::RouteError,
        EventKind::ConnectError,
        EventKind::Unreachable,
        EventKind::Rejected,
        EventKind::Disconnected,
    ];
    let mut kinds = vec![kind];
    kinds.extend(FAIL.iter().filter(|k| **k != kind));
    match d.wait_event(id, &kinds, timeout) {
        Ok(Some(e)) if e.kind == kind => Ok(e),
        Ok(Some(e)) => Err(format!("cma event {}, error {}", e.kind.name(), e.status)),
        Ok(None) => Err(format!("no {} within {:.1} s", kind.name(), timeout.as_secs_f64())),
        Err(e) => Err(format!("{e}")),
    }
}

/// The client's ping text: "rdma-ping-N: " then 'A'..'z' from `start`, NUL-terminated.
pub fn ping_text(ping: u32, start: u8, size: usize) -> Vec<u8> {
    let mut b = format!("rdma-ping-{ping}: ").into_bytes();
    b.truncate(size);
    let mut c = start;
    while b.len() < size {
        b.push(c);
        c = if c >= b'z' { b'A' } else { c + 1 };
    }
    if let Some(last) = b.last_mut() {
        *last = 0;
    }
    b
}

fn param() -> ConnectParam {
    ConnectParam {
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        ..Default::default()
    }
}

fn client<'a>(d: &'a mut Driver<CliDevice>, a: &Args, src: IpAddr) -> Result<Ctx<'a>, String> {
    let timeout = Duration::from_secs_f64(a.timeout);
    let id = d.stack.create_id(PortSpace::Tcp, QpType::Rc).map_err(|e| format!("rdma_create_id: {e}"))?;
    let dst = SocketAddr::new(a.addr, a.port);
    let step = |d: &mut Driver<CliDevice>| -> Result<(u32, Bufs), String> {
        let now = d.now();
        d.stack
            .resolve_addr(now, id, Some(SocketAddr::new(src, 0)), dst, Duration::from_millis(2000))
            .map_err(|e| format!("rdma_resolve_addr: {e}"))?;
        wait_cm(d, id, EventKind::AddrResolved, timeout)?;
        let now = d.now();
        d.stack.resolve_route(now, id, Duration::from_millis(2000)).map_err(|e| format!("rdma_resolve_route: {e}"))?;
        wait_cm(d, id, EventKind::RouteResolved, timeout)?;
        let (qpn, bufs) = Ctx::setup(d, id, a.size, true)?;
        let now = d.now();
        d.stack.connect(now, id, &param()).map_err(|e| format!("rdma_connect: {e}"))?;
        wait_cm(d, id, EventKind::Established, timeout)?;
        Ok((qpn, bufs))
    };
    match step(d) {
        Ok((qpn, bufs)) => Ok(Ctx { d, id, qpn, bufs, size: a.size, timeout, quiet: a.quiet }),
        Err(e) => {
            let now = d.now();
            let _ = d.stack.destroy_id(now, id);
            Err(e)
        }
    }
}

fn client_pings(c: &mut Ctx, a: &Args) -> Result<(), String> {
    let start_mr = c.bufs.start.ok_or("no start buffer")?;
    let mut start = b'A';
    let mut ping = 0u32;
    while a.count == 0 || ping < a.count {
        let text = ping_text(ping, start, c.size);
        start = if start >= b'z' { b'A' } else { start + 1 };
        c.d.stack.rc_mut().mr_mut(start_mr.lkey).ok_or("start buffer gone")?.copy_from_slice(&text);
        c.send_info(Some(start_mr))?;
        c.expect(WcOpcode::Recv, "RDMA_WRITE_ADV")?;
        let rdma = c.bufs.rdma;
        c.send_info(Some(rdma))?;
        c.expect(WcOpcode::Recv, "RDMA_WRITE_COMPLETE")?;
        let rc = c.d.stack.rc();
        if a.validate && rc.mr(start_mr.lkey) != rc.mr(rdma.lkey) {
            return Err("data mismatch!".into());
        }
        if a.verbose {
            out!("ping data: {}", c.cstr(rdma.lkey));
        }
        ping = ping.wrapping_add(1);
    }
    Ok(())
}

fn server<'a>(d: &'a mut Driver<CliDevice>, a: &Args) -> Result<(Ctx<'a>, CmId), String> {
    let timeout = Duration::from_secs_f64(a.timeout);
    let listen = d.stack.create_id(PortSpace::Tcp, QpType::Rc).map_err(|e| format!("rdma_create_id: {e}"))?;
    let step = |d: &mut Driver<CliDevice>| -> Result<(CmId, u32, Bufs), String> {
        let addr = SocketAddr::new(a.addr, a.port);
        d.stack.bind_addr(listen, addr).map_err(|e| format!("rdma_bind_addr {addr}: {e}"))?;
        d.stack.listen(listen, 3).map_err(|e| format!("rdma_listen: {e}"))?;
        if !a.quiet {
            out!("rping: listening on {addr}");
        }
        let req = first_connect_request(d, timeout)
            .ok_or_else(|| format!("no CONNECT_REQUEST within {:.1} s", timeout.as_secs_f64()))?;
        let child = req.id;
        let (qpn, bufs) = Ctx::setup(d, child, a.size, false)?;
        let now = d.now();
        d.stack.accept(now, child, &param()).map_err(|e| format!("rdma_accept: {e}"))?;
        wait_cm(d, child, EventKind::Established, timeout)?;
        Ok((child, qpn, bufs))
    };
    match step(d) {
        Ok((child, qpn, bufs)) => Ok((Ctx { d, id: child, qpn, bufs, size: a.size, timeout, quiet: a.quiet }, listen)),
        Err(e) => {
            let now = d.now();
            let _ = d.stack.destroy_id(now, listen);
            Err(e)
        }
    }
}

/// rping_test_server: until the client disconnects.
fn server_pings(c: &mut Ctx, a: &Args) -> Result<(), String> {
    loop {
        let Waited::Done = c.wait(WcOpcode::Recv)? else { return Ok(()) };
        let info = c.d.stack.rc().mr(c.bufs.recv.lkey).ok_or("recv buffer gone")?.to_vec();
        let addr = u64::from_be_bytes(info[..8].try_into().unwrap_or_default());
        let rkey = u32::from_be_bytes(info[8..12].try_into().unwrap_or_default());
        let len = u32::from_be_bytes(info[12..].try_into().unwrap_or_default()) as usize;
        if len > c.size {
            return Err(format!("the client's buffer ({len} bytes) is larger than ours ({}): use the same -S", c.size));
        }
        c.post_rdma(SendOp::Read { remote_addr: addr, rkey }, len)?;
        c.expect(WcOpcode::RdmaRead, "RDMA_READ_COMPLETE")?;
        if a.verbose {
            out!("server ping data: {}", c.cstr(c.bufs.rdma.lkey));
        }
        c.send_info(None)?;
        let Waited::Done = c.wait(WcOpcode::Recv)? else { return Ok(()) };
        let info = c.d.stack.rc().mr(c.bufs.recv.lkey).ok_or("recv buffer gone")?.to_vec();
        let addr = u64::from_be_bytes(info[..8].try_into().unwrap_or_default());
        let rkey = u32::from_be_bytes(info[8..12].try_into().unwrap_or_default());
        let n = (c.cstr(c.bufs.rdma.lkey).len() + 1).min(c.size);
        c.post_rdma(SendOp::Write { remote_addr: addr, rkey }, n)?;
        c.expect(WcOpcode::RdmaWrite, "RDMA_WRITE_COMPLETE")?;
        c.send_info(None)?;
    }
}

/// `roce rping`. Exit status: 0 every ping done (client) or the client left after its pings
/// (server); 1 a step failed; 2 usage; 3 the interface cannot be used.
pub fn run(args: Args) -> ExitCode {
    let a = args;
    // SIGINT/SIGTERM/SIGHUP and a closed stdout end it as the kernel ends a process's ids.
    crate::plumbing::shutdown::install();
    let local = if a.server {
        a.addr
    } else {
        match a.source {
            Some(s) => s,
            None => {
                eprintln!("roce rping: -c needs -I ADDR (the stack's own address on --iface)");
                return ExitCode::from(exit::USAGE);
            }
        }
    };
    if !a.server && a.source.is_some_and(|s| s.is_ipv4() != a.addr.is_ipv4()) {
        eprintln!("roce rping: -I and -a must be of one address family");
        return ExitCode::from(exit::USAGE);
    }
    let mut po = a.net.options(local, a.debug);
    po.gso = true;
    po.congestion = a.cc.congestion();
    crate::plumbing::out::set_quiet(a.quiet);
    let mut d = match open_port_or_exit("roce rping", &po) {
        Ok(d) => d,
        Err(code) => return ExitCode::from(code),
    };
    // The path MTU RDMA-CM uses on Ethernet (iboe_get_mtu): 1024 for the usual 1500.
    crate::plumbing::port::set_port_mtu_from(&mut d, &a.net.iface);
    let role = if a.server { "server" } else { "client" };
    let r = if a.server {
        match server(&mut d, &a) {
            Ok((mut c, listen)) => {
                let r = server_pings(&mut c, &a);
                let now = c.d.now();
                let _ = c.d.stack.disconnect(now, c.id);
                let _ = c.d.run_for(Duration::from_millis(50));
                let now = c.d.now();
                let _ = c.d.stack.destroy_id(now, c.id);
                let _ = c.d.stack.destroy_id(now, listen);
                r
            }
            Err(e) => Err(e),
        }
    } else {
        match client(&mut d, &a, local) {
            Ok(mut c) => {
                let r = client_pings(&mut c, &a);
                c.say("rping: disconnecting");
                let now = c.d.now();
                let _ = c.d.stack.disconnect(now, c.id);
                if wait_cm(c.d, c.id, EventKind::Disconnected, c.timeout).is_ok() {
                    eprintln!("client DISCONNECT EVENT...");
                }
                let now = c.d.now();
                let _ = c.d.stack.destroy_id(now, c.id);
                let _ = c.d.run_for(Duration::from_millis(50));
                r
            }
            Err(e) => Err(e),
        }
    };
    let code = match r {
        Ok(()) => {
            if !a.quiet {
                crate::plumbing::out::line(format_args!("rping {role}: done"));
            }
            exit::OK
        }
        // A stop cuts the step short: say so, not the step's own timeout message.
        Err(_) if crate::plumbing::shutdown::requested().is_some() => exit::FAILED,
        Err(e) => {
            eprintln!("rping {role} failed: {e}");
            exit::FAILED
        }
    };
    // Whatever is left (a stop in the middle of a step): destroyed as the kernel would, DREQ
    // for a connected id, within the grace period; then the counters and the exit status.
    let ids: Vec<CmId> = d.stack.ids().collect();
    let code = crate::plumbing::port::finish_rc("rping", &mut d, &ids, a.debug, code);
    ExitCode::from(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plumbing::port::iboe_mtu_code;

    #[test]
    fn ping_text_is_rpings() {
        let t = ping_text(0, b'A', 30);
        assert_eq!(&t[..], b"rdma-ping-0: ABCDEFGHIJKLMNOP\0");
        let t = ping_text(7, b'y', 18);
        assert_eq!(&t[..], b"rdma-ping-7: yzAB\0");
        assert_eq!(iboe_mtu_code(1500), 3);
        assert_eq!(iboe_mtu_code(9000), 5);
    }
}
