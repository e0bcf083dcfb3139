//! `roce pingpong rc|uc|ud|srq`: libibverbs' ibv_rc_pingpong, ibv_uc_pingpong, ibv_ud_pingpong
//! and ibv_srq_pingpong (rdma-core 44, libibverbs/examples) over this stack's QPs, against
//! those tools or another `roce pingpong` (spec/pingpong.md).
//!
//! 1. Both sides create their QPs (srq: `-q` RC QPs on one SRQ; ud: a UD QP with Q_Key
//!    0x11111111), move them to INIT and post `-r` receives (ud: room for the 40-byte GRH).
//! 2. The TCP exchange on `-p` (18515): the client sends "LID:QPN:PSN:GID" (52 bytes, NUL
//!    included; srq sends 256 of them, zeros past its QPs), the server reads it, moves its QPs
//!    to RTR and RTS, answers the same, and reads the client's "done".
//! 3. The client moves its QPs to RTS and SENDs `-s` bytes on each; every side SENDs again on a
//!    QP once its last SEND completed and a message arrived on it, until `-n` SENDs completed
//!    and `-n` messages arrived (srq: in all, over every QP).
//!
//! Without a GID index (`-g`) a side sends the zero GID, as the examples do; RoCE needs the GRH,
//! so both sides need `-g` (the kernel's examples too: `-g 1` is its IPv4-mapped GID).

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::process::ExitCode;
use std::time::{Duration, Instant as WallInstant};

use roce_cm::event::AddressHandle;
use roce_cm::rc::WcStatus;
use roce_cm::rc::{Access, MrInfo, QpAttr, QpCap, QpInit, QpState, RecvWr, SendOp, SendWr, Sge, TransportService};
use roce_cm::UdDest;
use roce_net::driver::Driver;
use roce_wire::Gid;

use crate::plumbing::exit;
use crate::plumbing::options::{wait_secs, LinkArgs};
use crate::plumbing::out::out;
use crate::plumbing::port::{iboe_mtu_code, iface_mtu, open_port_or_exit, CliDevice};
use crate::plumbing::shutdown;

/// The examples' TCP port.
pub const DEFAULT_PORT: u16 = 18515;
/// The exchange message: "%04x:%06x:%06x:%s" of LID, QPN, PSN and the GID's 32 hex digits,
/// NUL-terminated (`sizeof "0000:000000:000000:00000000000000000000000000000000"`).
pub const MESSAGE_LEN: usize = 52;
/// The closing word of the exchange, NUL included (`sizeof "done"`).
pub const DONE: &[u8; 5] = b"done\0";
/// Messages ibv_srq_pingpong sends each way, whatever `-q` (its `MAX_QP`).
pub const SRQ_MESSAGES: usize = 256;
/// The Q_Key of ibv_ud_pingpong's QP and of its sends.
pub const UD_QKEY: u32 = 0x1111_1111;
/// Room for the GRH at the front of a UD receive buffer.
pub const GRH_LEN: usize = 40;
/// The largest `-s` (the examples take any size; here a bound on the memory a region takes).
pub const MAX_SIZE: u32 = 64 << 20;
/// The page size of the `-c` pattern (one byte per page is set and checked).
const PAGE_SIZE: usize = 4096;
/// Work request ids (PINGPONG_RECV_WRID, PINGPONG_SEND_WRID); `pending` is a mask of them.
const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;

/// Which example.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// ibv_rc_pingpong: one RC QP.
    Rc,
    /// ibv_uc_pingpong: one UC QP.
    Uc,
    /// ibv_ud_pingpong: one UD QP, Q_Key 0x11111111.
    Ud,
    /// ibv_srq_pingpong: `-q` RC QPs taking their receives from one SRQ.
    Srq,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Rc => "rc",
            Kind::Uc => "uc",
            Kind::Ud => "ud",
            Kind::Srq => "srq",
        }
    }
}

fn parse_mtu(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(m @ (256 | 512 | 1024 | 2048 | 4096)) => Ok(m),
        _ => Err("one of 256, 512, 1024, 2048, 4096".into()),
    }
}

/// libibverbs' pingpong examples (ibv_rc_pingpong, ibv_uc_pingpong, ibv_ud_pingpong,
/// ibv_srq_pingpong): their TCP exchange of LID, QPN, PSN and GID on 18515, then SENDs back and
/// forth; a server without SERVER, a client with it.
///
/// Example: roce pingpong rc -g 1 --iface tap0 -I 198.18.0.1 198.18.0.2
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Which example: rc, uc, ud or srq.
    #[arg(value_enum)]
    pub kind: Kind,
    /// The server's host for the TCP exchange (client); none: be the server.
    pub server: Option<String>,
    /// The TCP port of the exchange.
    #[arg(short = 'p', long = "port", default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// The IB device (accepted; the device here is --iface).
    #[arg(short = 'd', long = "ib-dev")]
    pub ib_dev: Option<String>,
    /// The port of the IB device (accepted; 1 and up).
    #[arg(short = 'i', long = "ib-port", default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..))]
    pub ib_port: u8,
    /// Message size in bytes (default 4096; ud 1024, and at most the port MTU).
    #[arg(short = 's', long = "size", value_parser = clap::value_parser!(u32).range(1..=MAX_SIZE as i64))]
    pub size: Option<u32>,
    /// Path MTU (256, 512, 1024, 2048, 4096; not ud).
    #[arg(short = 'm', long = "mtu", default_value_t = 1024, value_parser = parse_mtu)]
    pub mtu: u32,
    /// Receives posted at a time (on the QP, or on the SRQ).
    #[arg(short = 'r', long = "rx-depth", default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=32768))]
    pub rx_depth: u32,
    /// Exchanges (srq: in all, over every QP).
    #[arg(short = 'n', long = "iters", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=i32::MAX as i64))]
    pub iters: u32,
    /// Service level (accepted; RoCE carries none).
    #[arg(short = 'l', long = "sl", default_value_t = 0)]
    pub sl: u8,
    /// Sleep on CQ events (accepted: this stack always sleeps until a frame or a timer).
    #[arg(short = 'e', long = "events")]
    pub events: bool,
    /// The local GID index to send (0: the link-local GID, 1: the IPv4-mapped GID of -I);
    /// none: the zero GID, as the examples send.
    #[arg(short = 'g', long = "gid-idx", allow_negative_numbers = true)]
    pub gid_idx: Option<i32>,
    /// QPs on the SRQ (srq only; 1 to 255, at most -r).
    #[arg(short = 'q', long = "num-qp", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    pub num_qp: u32,
    /// Validate the received buffer (the client sets one byte per page, the server checks it).
    #[arg(short = 'c', long = "chk")]
    pub chk: bool,
    /// The interface to run on (see --transport).
    #[arg(long, value_name = "IFACE")]
    pub iface: String,
    /// The stack's own address on --iface (its GID is the IPv4-mapped or IPv6 address).
    #[arg(short = 'I', value_name = "ADDR")]
    pub source: IpAddr,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub link: LinkArgs,
    /// Seconds to wait for each step: the accept, each TCP read, and the gap between two
    /// completions (0 to 86400).
    #[arg(long, default_value = "20", value_parser = wait_secs, value_name = "SECS")]
    pub timeout: Duration,
    /// Print every frame, and the engine's counters at exit.
    #[arg(long)]
    pub debug: bool,
}

// ---- the exchange message

/// One side's address as the exchange carries it (`struct pingpong_dest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Dest {
    /// LID (0 on RoCE).
    pub lid: u16,
    /// QP number.
    pub qpn: u32,
    /// The first PSN the QP sends.
    pub psn: u32,
    /// The GID (zero without `-g`).
    pub gid: Gid,
}

/// A message of the exchange that does not parse: what, and at which byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageError {
    /// Byte offset in the 52-byte message.
    pub offset: usize,
    /// What was expected there.
    pub expected: &'static str,
}

impl std::fmt::Display for MessageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pingpong exchange message: byte {}: expected {}", self.offset, self.expected)
    }
}

impl Dest {
    /// The message: `sprintf("%04x:%06x:%06x:%s")` with the GID as `gid_to_wire_gid` writes it
    /// (its 16 bytes in order, as hex), and the NUL.
    pub fn to_message(&self) -> [u8; MESSAGE_LEN] {
        let mut text = format!("{:04x}:{:06x}:{:06x}:", self.lid, self.qpn & 0xff_ffff, self.psn & 0xff_ffff);
        for b in self.gid.0 {
            text.push_str(&format!("{b:02x}"));
        }
        let mut m = [0u8; MESSAGE_LEN];
        let n = text.len().min(MESSAGE_LEN - 1);
        m[..n].copy_from_slice(&text.as_bytes()[..n]);
        m
    }

    /// Parse a message as `sscanf("%x:%x:%x:%s")` and `wire_gid_to_gid` read it: three hex
    /// numbers separated by ':', then 32 hex digits of GID.
    pub fn parse(m: &[u8]) -> Result<Dest, MessageError> {
        let mut at = 0usize;
        let hex = |at: &mut usize, max_digits: usize, what: &'static str| -> Result<u32, MessageError> {
            let start = *at;
            let mut v: u32 = 0;
            while *at < m.len() && m[*at].is_ascii_hexdigit() && *at - start < max_digits {
                v = (v << 4) | (m[*at] as char).to_digit(16).unwrap_or(0);
                *at += 1;
            }
            if *at == start {
                return Err(MessageError { offset: start, expected: what });
            }
            Ok(v)
        };
        let colon = |at: &mut usize| -> Result<(), MessageError> {
            if m.get(*at) == Some(&b':') {
                *at += 1;
                Ok(())
            } else {
                Err(MessageError { offset: *at, expected: "':'" })
            }
        };
        let lid = hex(&mut at, 4, "the LID in hex")?;
        colon(&mut at)?;
        let qpn = hex(&mut at, 6, "the QPN in hex")?;
        colon(&mut at)?;
        let psn = hex(&mut at, 6, "the PSN in hex")?;
        colon(&mut at)?;
        let mut gid = [0u8; 16];
        for b in &mut gid {
            let hi = m.get(at).and_then(|c| (*c as char).to_digit(16));
            let lo = m.get(at + 1).and_then(|c| (*c as char).to_digit(16));
            match (hi, lo) {
                (Some(h), Some(l)) => *b = (h << 4 | l) as u8,
                (None, _) => return Err(MessageError { offset: at, expected: "32 hex digits of GID" }),
                (_, None) => return Err(MessageError { offset: at + 1, expected: "32 hex digits of GID" }),
            }
            at += 2;
        }
        Ok(Dest { lid: lid as u16, qpn, psn, gid: Gid(gid) })
    }

    /// Whether the GID asks for a GRH (`dest->gid.global.interface_id` non-zero).
    pub fn has_grh(&self) -> bool {
        self.gid.0[8..] != [0u8; 8]
    }
}

/// The address line the examples print (`ud` puts a ':' before GID in the local line).
pub fn address_line(remote: bool, ud: bool, d: &Dest) -> String {
    let gid = std::net::Ipv6Addr::from(d.gid.0);
    if remote {
        format!("  remote address: LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {gid}", d.lid, d.qpn, d.psn)
    } else {
        let sep = if ud { ':' } else { ',' };
        format!("  local address:  LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}{sep} GID {gid}", d.lid, d.qpn, d.psn)
    }
}

/// The two result lines, as the examples print them (`usec` is a C `float`).
pub fn result_lines(size: u32, iters: u32, elapsed: Duration) -> [String; 2] {
    let usec = elapsed.as_micros() as f32;
    let bytes = i64::from(size) * i64::from(iters) * 2;
    [
        format!(
            "{bytes} bytes in {:.2} seconds = {:.2} Mbit/sec",
            f64::from(usec) / 1_000_000.0,
            bytes as f64 * 8.0 / f64::from(usec)
        ),
        format!(
            "{iters} iters in {:.2} seconds = {:.2} usec/iter",
            f64::from(usec) / 1_000_000.0,
            f64::from(usec / iters as f32)
        ),
    ]
}

/// The PSNs as the examples draw them: `srand48(getpid() * time(NULL))`, then
/// `lrand48() & 0xffffff` per QP (POSIX drand48: a 48-bit LCG, a = 0x5DEECE66D, c = 0xB).
pub struct Lrand48(u64);

impl Lrand48 {
    const MASK: u64 = (1 << 48) - 1;

    /// `srand48(seed)`: the high 32 bits of the state from the seed's low 32, then 0x330E.
    pub fn new(seed: i64) -> Lrand48 {
        Lrand48((((seed as u64) & 0xffff_ffff) << 16 | 0x330e) & Self::MASK)
    }

    /// `lrand48()`: the next 31-bit value.
    pub fn lrand48(&mut self) -> u32 {
        self.0 = (self.0.wrapping_mul(0x5_deec_e66d).wrapping_add(0xb)) & Self::MASK;
        (self.0 >> 17) as u32
    }
}

// ---- waiting with the stack running

/// Why a run stopped early: a step failed (its message), or a signal / closed stdout asked.
enum Stop {
    Failed(String),
    Asked,
}

impl From<String> for Stop {
    fn from(s: String) -> Stop {
        Stop::Failed(s)
    }
}

/// Run the stack until `step` gives a value, a stop is asked or `timeout` passes.
fn pump<T>(
    d: &mut Driver<CliDevice>,
    timeout: Duration,
    what: &str,
    mut step: impl FnMut(&mut Driver<CliDevice>) -> Result<Option<T>, String>,
) -> Result<T, Stop> {
    let end = WallInstant::now() + timeout;
    loop {
        if let Some(t) = step(d)? {
            return Ok(t);
        }
        if shutdown::requested().is_some() {
            return Err(Stop::Asked);
        }
        if WallInstant::now() >= end {
            return Err(Stop::Failed(format!("{what}: nothing within {:.1} s", timeout.as_secs_f64())));
        }
        d.turn(Duration::from_millis(5)).map_err(|e| format!("{what}: {e}"))?;
    }
}

/// Fill `buf[*filled..]` from a non-blocking stream; Ok(true) once full.
fn read_some(s: &mut TcpStream, buf: &mut [u8], filled: &mut usize) -> Result<bool, String> {
    while *filled < buf.len() {
        match s.read(&mut buf[*filled..]) {
            Ok(0) => return Err(format!("the peer closed the connection after {} of {} bytes", filled, buf.len())),
            Ok(n) => *filled += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(true)
}

/// Write `buf[*sent..]` to a non-blocking stream; Ok(true) once all of it went.
fn write_some(s: &mut TcpStream, buf: &[u8], sent: &mut usize) -> Result<bool, String> {
    while *sent < buf.len() {
        match s.write(&buf[*sent..]) {
            Ok(0) => return Err("the connection took no more bytes".into()),
            Ok(n) => *sent += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(true)
}

fn read_exact(
    d: &mut Driver<CliDevice>,
    s: &mut TcpStream,
    n: usize,
    t: Duration,
    what: &str,
) -> Result<Vec<u8>, Stop> {
    let mut buf = vec![0u8; n];
    let mut filled = 0;
    pump(d, t, what, |_| {
        read_some(s, &mut buf, &mut filled).map(|full| full.then_some(())).map_err(|e| format!("{what}: {e}"))
    })?;
    Ok(buf)
}

fn write_all(d: &mut Driver<CliDevice>, s: &mut TcpStream, buf: &[u8], t: Duration, what: &str) -> Result<(), Stop> {
    let mut sent = 0;
    pump(d, t, what, |_| write_some(s, buf, &mut sent).map(|all| all.then_some(())).map_err(|e| format!("{what}: {e}")))
}

fn messages(dests: &[Dest], count: usize) -> Vec<u8> {
    (0..count).flat_map(|i| dests.get(i).copied().unwrap_or_default().to_message()).collect()
}

fn parse_messages(bytes: &[u8], keep: usize) -> Result<Vec<Dest>, String> {
    bytes
        .chunks(MESSAGE_LEN)
        .take(keep)
        .enumerate()
        .map(|(i, m)| Dest::parse(m).map_err(|e| format!("message {i}: {e}")))
        .collect()
}

/// pp_client_exch_dest: connect, send ours, read theirs, send "done".
fn client_exchange(
    d: &mut Driver<CliDevice>,
    a: &Args,
    host: &str,
    mine: &[Dest],
    count: usize,
) -> Result<Vec<Dest>, Stop> {
    let t = a.timeout;
    let addrs: Vec<SocketAddr> =
        (host, a.port).to_socket_addrs().map_err(|e| format!("{e} for {host}:{}", a.port))?.collect();
    let mut stream = None;
    for addr in &addrs {
        if let Ok(s) = TcpStream::connect_timeout(addr, t.max(Duration::from_millis(100))) {
            stream = Some(s);
            break;
        }
    }
    let Some(mut s) = stream else { return Err(Stop::Failed(format!("Couldn't connect to {host}:{}", a.port))) };
    s.set_nonblocking(true).map_err(|e| e.to_string())?;
    let _ = s.set_nodelay(true);
    write_all(d, &mut s, &messages(mine, count), t, "Couldn't send local address")?;
    let theirs = read_exact(d, &mut s, MESSAGE_LEN * count, t, "Couldn't read/write remote address")?;
    write_all(d, &mut s, DONE, t, "Couldn't read/write remote address")?;
    Ok(parse_messages(&theirs, mine.len())?)
}

/// pp_server_exch_dest: accept one client, read its addresses, connect the QPs (`connect`),
/// send ours, read "done".
fn server_exchange(
    d: &mut Driver<CliDevice>,
    a: &Args,
    mine: &[Dest],
    count: usize,
    connect: impl FnOnce(&mut Driver<CliDevice>, &[Dest]) -> Result<(), String>,
) -> Result<Vec<Dest>, Stop> {
    let t = a.timeout;
    let listener = TcpListener::bind(("0.0.0.0", a.port))
        .or_else(|_| TcpListener::bind(("::", a.port)))
        .map_err(|e| format!("Couldn't listen to port {}: {e}", a.port))?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let mut s = pump(d, t, "accept() failed", |_| match listener.accept() {
        Ok((s, _)) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(format!("accept() failed: {e}")),
    })?;
    drop(listener);
    s.set_nonblocking(true).map_err(|e| e.to_string())?;
    let _ = s.set_nodelay(true);
    let theirs = read_exact(d, &mut s, MESSAGE_LEN * count, t, "Couldn't read remote address")?;
    let theirs = parse_messages(&theirs, mine.len())?;
    connect(d, &theirs).map_err(|e| format!("{e}\nCouldn't connect to remote QP"))?;
    write_all(d, &mut s, &messages(mine, count), t, "Couldn't send/recv local address")?;
    read_exact(d, &mut s, DONE.len(), t, "Couldn't send/recv local address")?;
    Ok(theirs)
}

// ---- the QPs

/// A completion as the examples see it: which QP (index), which work request, how it ended.
struct Wc {
    qp: Option<usize>,
    qp_num: u32,
    wr_id: u64,
    status: WcStatus,
}

/// The QPs of one run and their buffer.
struct Pp {
    kind: Kind,
    qpns: Vec<u32>,
    srq: Option<u32>,
    mr: MrInfo,
    size: usize,
    rx_depth: u32,
    mtu: u32,
    /// ud: the address handle of the peer, once known.
    ud_dest: Option<UdDest>,
    /// ud: receives "posted" (a UD QP here keeps its datagrams; this counts the buffers the
    /// example would have posted) and send completions to report.
    ud_posted: u32,
    ud_done: std::collections::VecDeque<Wc>,
    /// ud: datagrams that arrived with no receive posted (dropped, as rxe drops them).
    ud_no_recv: u64,
}

impl Pp {
    fn create(d: &mut Driver<CliDevice>, a: &Args, size: usize) -> Result<Pp, String> {
        let nq = if a.kind == Kind::Srq { a.num_qp as usize } else { 1 };
        let buf_len = if a.kind == Kind::Ud { size + GRH_LEN } else { size };
        let rc = d.stack.rc_mut();
        let mr = rc.reg_mr(buf_len, Access::LOCAL_WRITE).map_err(|e| format!("Couldn't register MR: {e}"))?;
        // memset(ctx->buf, 0x7b, size) in rc, uc and ud; srq's buffer is zeroed.
        if a.kind != Kind::Srq {
            if let Some(b) = rc.mr_mut(mr.lkey) {
                b.fill(0x7b);
            }
        }
        let mut pp = Pp {
            kind: a.kind,
            qpns: Vec::new(),
            srq: None,
            mr,
            size,
            rx_depth: a.rx_depth,
            mtu: a.mtu,
            ud_dest: None,
            ud_posted: 0,
            ud_done: Default::default(),
            ud_no_recv: 0,
        };
        match a.kind {
            Kind::Ud => {
                let qpn = d.stack.create_qp(UD_QKEY);
                pp.qpns.push(qpn);
            }
            Kind::Rc | Kind::Uc | Kind::Srq => {
                if a.kind == Kind::Srq {
                    let srq = d
                        .stack
                        .rc_mut()
                        .create_srq(a.rx_depth, 1, 0)
                        .map_err(|e| format!("Couldn't create SRQ: {e}"))?;
                    pp.srq = Some(srq);
                }
                let service = if a.kind == Kind::Uc { TransportService::Uc } else { TransportService::Rc };
                for i in 0..nq {
                    let cap = QpCap { max_send_wr: 1, max_recv_wr: if pp.srq.is_some() { 1 } else { a.rx_depth } };
                    let init = QpInit { service, cap, srq: pp.srq, pd: 0 };
                    let qpn = d.stack.create_qp_with(init).map_err(|e| format!("Couldn't create QP[{i}]: {e}"))?;
                    pp.qpns.push(qpn);
                    // INIT: pkey index 0, port 1, no remote access.
                    let mut at = QpAttr::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);
                    at.access = Access::NONE;
                    let now = d.now();
                    d.stack
                        .rc_mut()
                        .modify_qp(now, qpn, QpState::Init, &at)
                        .map_err(|e| format!("Failed to modify QP to INIT: {e}"))?;
                }
            }
        }
        Ok(pp)
    }

    fn sge(&self, offset: usize, len: usize) -> Vec<Sge> {
        vec![Sge { addr: self.mr.addr + offset as u64, length: len as u32, lkey: self.mr.lkey }]
    }

    /// pp_post_recv: post up to `n` receives; how many went.
    fn post_recv(&mut self, d: &mut Driver<CliDevice>, n: u32) -> u32 {
        if self.kind == Kind::Ud {
            self.ud_posted += n;
            return n;
        }
        let mut posted = 0;
        for _ in 0..n {
            let wr = RecvWr { wr_id: RECV_WRID, sg_list: self.sge(0, self.size) };
            let rc = d.stack.rc_mut();
            let r = match self.srq {
                Some(s) => rc.post_srq_recv(s, wr),
                None => rc.post_recv(self.qpns[0], wr),
            };
            if r.is_err() {
                break;
            }
            posted += 1;
        }
        posted
    }

    /// pp_post_send on QP `i`: a signalled SEND of the buffer.
    fn post_send(&mut self, d: &mut Driver<CliDevice>, i: usize) -> Result<(), String> {
        let qpn = self.qpns[i];
        if self.kind == Kind::Ud {
            let dest = self.ud_dest.ok_or("no address handle")?;
            let payload =
                d.stack.rc().mr(self.mr.lkey).map(|b| b[GRH_LEN..GRH_LEN + self.size].to_vec()).unwrap_or_default();
            d.stack.post_send(qpn, &dest, &payload, None).map_err(|e| e.to_string())?;
            // A UD send completes once it is on the wire; nothing answers it.
            self.ud_done.push_back(Wc { qp: Some(0), qp_num: qpn, wr_id: SEND_WRID, status: WcStatus::Success });
            return Ok(());
        }
        let wr = SendWr {
            wr_id: SEND_WRID,
            op: SendOp::Send,
            sg_list: self.sge(0, self.size),
            signaled: true,
            solicited: false,
            inline: None,
        };
        let now = d.now();
        d.stack.rc_mut().post_send(now, qpn, wr).map_err(|e| e.to_string())
    }

    /// pp_connect_ctx: RTR and RTS towards the peer's QPs (ud: RTS with our PSN and the
    /// address handle).
    fn connect(&mut self, d: &mut Driver<CliDevice>, mine: &[Dest], theirs: &[Dest], sgid: Gid) -> Result<(), String> {
        // The examples take the GRH's DGID from the first message for every QP.
        let first = theirs.first().copied().unwrap_or_default();
        if !first.has_grh() {
            return Err("Failed to modify QP to RTR: the peer sent the zero GID, and RoCE needs a GRH \
                        (give -g on both sides; -g 1 is the IPv4-mapped GID)"
                .into());
        }
        let dest_ip = first.gid.to_ip();
        if self.kind == Kind::Ud {
            let qpn = self.qpns[0];
            d.stack.set_qp_sq_psn(qpn, mine[0].psn).map_err(|e| format!("Failed to modify QP to RTS: {e}"))?;
            let ah = AddressHandle {
                dgid: first.gid,
                sgid,
                dmac: [0; 6], // resolved by the stack (ARP / ND)
                hop_limit: 1,
                traffic_class: 0,
                flow_label: 0,
                sl: 0,
            };
            self.ud_dest = Some(UdDest { ah, remote_qpn: first.qpn, remote_qkey: UD_QKEY });
            return Ok(());
        }
        for (i, qpn) in self.qpns.clone().into_iter().enumerate() {
            let peer = theirs.get(i).copied().unwrap_or_default();
            let mut at = QpAttr::new(dest_ip, peer.qpn & 0xff_ffff);
            at.path_mtu = self.mtu;
            at.rq_psn = peer.psn & 0xff_ffff;
            at.max_dest_rd_atomic = 1;
            at.min_rnr_timer = 12;
            at.hop_limit = 1;
            at.access = Access::NONE;
            let now = d.now();
            let rc = d.stack.rc_mut();
            rc.modify_qp(now, qpn, QpState::Rtr, &at).map_err(|e| format!("Failed to modify QP[{i}] to RTR: {e}"))?;
            at.timeout = 14;
            at.retry_cnt = 7;
            at.rnr_retry = 7;
            at.sq_psn = mine[i].psn & 0xff_ffff;
            at.max_rd_atomic = 1;
            rc.modify_qp(now, qpn, QpState::Rts, &at).map_err(|e| format!("Failed to modify QP[{i}] to RTS: {e}"))?;
        }
        Ok(())
    }

    /// The next completion, if any (ud: a datagram is a receive completion, copied behind the
    /// 40 bytes of GRH room as the QP would).
    fn poll(&mut self, d: &mut Driver<CliDevice>) -> Option<Wc> {
        if self.kind != Kind::Ud {
            let wc = d.stack.rc_mut().poll_cq()?;
            let qp = self.qpns.iter().position(|q| *q == wc.qp_num);
            return Some(Wc { qp, qp_num: wc.qp_num, wr_id: wc.wr_id, status: wc.status });
        }
        if let Some(wc) = self.ud_done.pop_front() {
            return Some(wc);
        }
        let qpn = self.qpns[0];
        loop {
            let dg = d.stack.poll_recv(qpn)?;
            if self.ud_posted == 0 {
                self.ud_no_recv += 1;
                continue;
            }
            self.ud_posted -= 1;
            if dg.payload.len() > self.size {
                return Some(Wc { qp: Some(0), qp_num: qpn, wr_id: RECV_WRID, status: WcStatus::LocLenErr });
            }
            if let Some(b) = d.stack.rc_mut().mr_mut(self.mr.lkey) {
                b[GRH_LEN..GRH_LEN + dg.payload.len()].copy_from_slice(&dg.payload);
            }
            return Some(Wc { qp: Some(0), qp_num: qpn, wr_id: RECV_WRID, status: WcStatus::Success });
        }
    }

    /// The buffer byte that holds message byte `i`.
    fn data_offset(&self) -> usize {
        if self.kind == Kind::Ud {
            GRH_LEN
        } else {
            0
        }
    }

    /// pp_close_ctx: destroy the QPs, then the SRQ and the region.
    fn destroy(&self, d: &mut Driver<CliDevice>) {
        for q in &self.qpns {
            if self.kind == Kind::Ud {
                let _ = d.stack.destroy_qp(*q);
            } else {
                let _ = d.stack.rc_mut().destroy_qp(*q);
            }
        }
        let rc = d.stack.rc_mut();
        if let Some(s) = self.srq {
            let _ = rc.destroy_srq(s);
        }
        let _ = rc.dereg_mr(self.mr.lkey);
    }
}

/// The ping-pong: post, count, repost (the examples' main loop and parse_single_wc).
fn run_loop(d: &mut Driver<CliDevice>, pp: &mut Pp, a: &Args, client: bool, mut routs: u32) -> Result<Duration, Stop> {
    let nq = pp.qpns.len();
    let iters = a.iters;
    let idle = a.timeout;
    let mut pending = vec![RECV_WRID; nq];
    if client {
        if a.chk {
            let off = pp.data_offset();
            if let Some(b) = d.stack.rc_mut().mr_mut(pp.mr.lkey) {
                for i in (0..pp.size).step_by(PAGE_SIZE) {
                    b[off + i] = 0; // i / page_size % sizeof(char)
                }
            }
        }
        for (i, p) in pending.iter_mut().enumerate() {
            pp.post_send(d, i).map_err(|e| format!("Couldn't post send: {e}"))?;
            *p = SEND_WRID | RECV_WRID;
        }
    }
    let start = WallInstant::now();
    let (mut rcnt, mut scnt) = (0u32, 0u32);
    let mut last = WallInstant::now();
    // The refill mark: 1 in rc, uc and ud; the QP count in srq.
    let low = nq as u32;
    while rcnt < iters || scnt < iters {
        let mut progressed = false;
        while let Some(wc) = pp.poll(d) {
            progressed = true;
            if wc.status != WcStatus::Success {
                let mut m = format!(
                    "Failed status {} ({}) for wr_id {}",
                    wc.status.as_str(),
                    wc.status.ibv_code(),
                    wc.wr_id as i32
                );
                if a.kind == Kind::Rc {
                    m.push_str("\nparse WC failed 1");
                }
                return Err(Stop::Failed(m));
            }
            let Some(qi) = wc.qp else { return Err(Stop::Failed(format!("Couldn't find QPN {:06x}", wc.qp_num))) };
            match wc.wr_id {
                SEND_WRID => scnt += 1,
                RECV_WRID => {
                    routs = routs.saturating_sub(1);
                    if routs <= low {
                        routs += pp.post_recv(d, pp.rx_depth - routs);
                        if routs < pp.rx_depth {
                            return Err(Stop::Failed(format!("Couldn't post receive ({routs})")));
                        }
                    }
                    rcnt += 1;
                }
                other => return Err(Stop::Failed(format!("Completion for unknown wr_id {}", other as i32))),
            }
            pending[qi] &= !wc.wr_id;
            if scnt < iters && pending[qi] == 0 {
                pp.post_send(d, qi).map_err(|e| format!("Couldn't post send: {e}"))?;
                pending[qi] = RECV_WRID | SEND_WRID;
            }
        }
        if rcnt >= iters && scnt >= iters {
            break;
        }
        if progressed {
            last = WallInstant::now();
        }
        if shutdown::requested().is_some() {
            return Err(Stop::Asked);
        }
        if last.elapsed() >= idle {
            return Err(Stop::Failed(format!(
                "no completion within {:.1} s: {scnt} of {iters} sends completed, {rcnt} of {iters} messages received",
                idle.as_secs_f64()
            )));
        }
        d.turn(Duration::from_millis(50)).map_err(|e| e.to_string())?;
    }
    let elapsed = start.elapsed();
    // The last ACKs leave before the QPs go.
    let _ = d.turn(Duration::ZERO);
    Ok(elapsed)
}

/// The whole run of one side, up to the results; the QPs are left for the caller to destroy.
fn run_side(d: &mut Driver<CliDevice>, a: &Args, pp: &mut Pp, size: u32) -> Result<(), Stop> {
    let count = if a.kind == Kind::Srq { SRQ_MESSAGES } else { 1 };
    let routs = pp.post_recv(d, a.rx_depth);
    if routs < a.rx_depth {
        return Err(Stop::Failed(format!("Couldn't post receive ({routs})")));
    }
    let gid = match a.gid_idx {
        Some(i) if i >= 0 => {
            let gids = d.stack.gids();
            match gids.get(i as usize) {
                Some(g) => *g,
                None if matches!(a.kind, Kind::Rc | Kind::Uc) => {
                    return Err(Stop::Failed(format!("can't read sgid of index {i}")));
                }
                None => return Err(Stop::Failed(format!("Could not get local gid for gid index {i}"))),
            }
        }
        _ => Gid([0; 16]),
    };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let mut rand = Lrand48::new(i64::from(std::process::id()).wrapping_mul(now.as_secs() as i64));
    let mine: Vec<Dest> =
        pp.qpns.iter().map(|q| Dest { lid: 0, qpn: *q, psn: rand.lrand48() & 0xff_ffff, gid }).collect();
    for m in &mine {
        out!("{}", address_line(false, a.kind == Kind::Ud, m));
    }
    let theirs = match &a.server {
        Some(host) => client_exchange(d, a, host, &mine, count)?,
        None => {
            let sgid = gid;
            server_exchange(d, a, &mine, count, |d, theirs| pp.connect(d, &mine, theirs, sgid))?
        }
    };
    for t in &theirs {
        out!("{}", address_line(true, false, t));
    }
    if a.server.is_some() {
        pp.connect(d, &mine, &theirs, gid)?;
    }
    let elapsed = run_loop(d, pp, a, a.server.is_some(), routs)?;
    for l in result_lines(size, a.iters, elapsed) {
        out!("{l}");
    }
    if a.server.is_none() && a.chk {
        let off = pp.data_offset();
        let buf = d.stack.rc().mr(pp.mr.lkey).unwrap_or(&[]).to_vec();
        for i in (0..pp.size).step_by(PAGE_SIZE) {
            if buf.get(off + i) != Some(&0) {
                out!("invalid data in page {}", i / PAGE_SIZE);
            }
        }
    }
    Ok(())
}

/// `roce pingpong`. Exit status: 0 every exchange done; 1 a step failed (the example's
/// message), or no completion within --timeout; 2 usage; 3 the interface cannot be used.
pub fn run(a: Args) -> ExitCode {
    shutdown::install();
    let tool = format!("roce pingpong {}", a.kind.name());
    let size = a.size.unwrap_or(if a.kind == Kind::Ud { 1024 } else { 4096 });
    if a.kind == Kind::Srq {
        if a.num_qp > a.rx_depth {
            eprintln!(
                "rx_depth {} is too small for {} QPs -- must have at least one receive per QP.",
                a.rx_depth, a.num_qp
            );
            return ExitCode::from(exit::FAILED);
        }
        if a.num_qp as usize >= SRQ_MESSAGES {
            eprintln!("num_qp {} must be less than {}", a.num_qp, SRQ_MESSAGES - 1);
            return ExitCode::from(exit::FAILED);
        }
    }
    if a.kind == Kind::Ud {
        // The port's active MTU: the IB MTU under the netdev's (iboe_get_mtu).
        let mtu = iface_mtu(&a.iface).map_or(1024, |m| 128u32 << iboe_mtu_code(m));
        if size > mtu {
            eprintln!("Requested size larger than port MTU ({mtu})");
            return ExitCode::from(exit::FAILED);
        }
    }
    let mut po = a.link.options(a.iface.clone(), None, a.source, None, roce_cm::MulticastPaths::IGMP_MLD_ONLY, a.debug);
    po.gso = true;
    let mut d = match open_port_or_exit(&tool, &po) {
        Ok(d) => d,
        Err(code) => return ExitCode::from(code),
    };
    d.set_busy_poll(crate::plumbing::port::DATA_PATH_BUSY_POLL);
    let code = match Pp::create(&mut d, &a, size as usize) {
        Err(e) => {
            eprintln!("{e}");
            exit::FAILED
        }
        Ok(mut pp) => {
            let r = run_side(&mut d, &a, &mut pp, size);
            // pp_close_ctx on every path: the QPs, the SRQ and the region go.
            pp.destroy(&mut d);
            if pp.ud_no_recv > 0 || a.debug {
                out!("pingpong: ud datagrams dropped with no receive posted: {}", pp.ud_no_recv);
            }
            match r {
                Ok(()) => exit::OK,
                Err(Stop::Asked) => {
                    if let Some(why) = shutdown::requested().map(shutdown::reason) {
                        eprintln!("{tool}: {why}: {} QP(s) destroyed", pp.qpns.len());
                    }
                    exit::FAILED
                }
                Err(Stop::Failed(e)) => {
                    eprintln!("{e}");
                    exit::FAILED
                }
            }
        }
    };
    let code = crate::plumbing::port::finish_rc(&tool, &mut d, &[], a.debug, code);
    ExitCode::from(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_the_examples_sprintf() {
        let d = Dest { lid: 0, qpn: 0x11, psn: 0xabcdef, gid: Gid::from_ip("198.18.0.1".parse().unwrap()) };
        let m = d.to_message();
        assert_eq!(&m[..], b"0000:000011:abcdef:00000000000000000000ffffc6120001\0");
        assert_eq!(Dest::parse(&m), Ok(d));
        assert!(d.has_grh());
        assert!(!Dest::default().has_grh());
        assert_eq!(&Dest::default().to_message()[..], b"0000:000000:000000:00000000000000000000000000000000\0");
    }

    #[test]
    fn a_bad_message_names_its_byte() {
        let e = Dest::parse(b"0000:00001x:abcdef:00").unwrap_err();
        assert_eq!(e.offset, 10);
        let e = Dest::parse(b"0000:000011:abcdef:00000000000000000000ffffc61200z1").unwrap_err();
        assert_eq!((e.offset, e.expected), (49, "32 hex digits of GID"));
        let e = Dest::parse(b"").unwrap_err();
        assert_eq!(e.offset, 0);
        assert!(e.to_string().contains("byte 0"));
        // Fewer digits than the widths, as sscanf's %x takes them.
        assert_eq!(Dest::parse(b"0:11:5:00000000000000000000ffffc6120002").map(|d| (d.qpn, d.psn)), Ok((0x11, 5)));
    }

    #[test]
    fn lrand48_is_posix() {
        // glibc: srand48(1); lrand48() -> 89400484, 976015093, 1792756325.
        let mut r = Lrand48::new(1);
        assert_eq!([r.lrand48(), r.lrand48(), r.lrand48()], [89_400_484, 976_015_093, 1_792_756_325]);
    }

    #[test]
    fn the_lines_are_the_examples_printf() {
        let d = Dest { lid: 0, qpn: 0x11, psn: 0x1234, gid: Gid::from_ip("198.18.0.2".parse().unwrap()) };
        assert_eq!(
            address_line(false, false, &d),
            "  local address:  LID 0x0000, QPN 0x000011, PSN 0x001234, GID ::ffff:198.18.0.2"
        );
        assert_eq!(
            address_line(false, true, &d),
            "  local address:  LID 0x0000, QPN 0x000011, PSN 0x001234: GID ::ffff:198.18.0.2"
        );
        assert_eq!(
            address_line(true, true, &Dest::default()),
            "  remote address: LID 0x0000, QPN 0x000000, PSN 0x000000, GID ::"
        );
        let [b, i] = result_lines(4096, 1000, Duration::from_micros(250_000));
        assert_eq!(b, "8192000 bytes in 0.25 seconds = 262.14 Mbit/sec");
        assert_eq!(i, "1000 iters in 0.25 seconds = 250.00 usec/iter");
    }
}
