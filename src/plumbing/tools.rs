//! The network commands of the `roce` tool (`mckey`, `sa-query`, `sa-server`): a stack on a
//! raw socket (or on OpenSM's SA through ibsim), run by roce-net's one [`Driver`] loop in real
//! time. Every exit path destroys the ids (see [`crate::plumbing::shutdown`]); every line goes through
//! [`crate::plumbing::out`]. `main.rs` only parses arguments and calls these.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant as WallInstant};

use roce_cm::event::EventParam;
use roce_cm::{CmId, EventKind, MulticastPaths, PortSpace, QpType, Stack, StackConfig, UdDest};
use roce_net::device::Device;
use roce_net::driver::{Direction, Driver, MulticastFilter, NoFrames};
use roce_net::raw::RawSocket;
use roce_net::PcapDevice;
use roce_wire::mad::Method;
use roce_wire::mcmember::{ComponentMask, JoinState, McMemberRecord};
use roce_wire::sa::{attr, SaData, SaMad};
use roce_wire::Gid;

use crate::plumbing::exit;
use crate::plumbing::out::{print_counters_raw, print_event};
use crate::plumbing::shutdown;
use crate::{out, status};

/// A raw socket (captured to a pcap or not), or no frames at all (ibsim: SA MADs only).
pub enum CliDevice {
    /// Plain.
    Raw(RawSocket),
    /// Every frame also written to a pcap file.
    Pcap(PcapDevice<RawSocket>),
    /// No Ethernet: the SA MADs go over the driver's SA link (ibsim).
    NoFrames(NoFrames),
}

impl Device for CliDevice {
    fn send(&mut self, f: &[u8]) -> io::Result<()> {
        match self {
            CliDevice::Raw(d) => d.send(f),
            CliDevice::Pcap(d) => d.send(f),
            CliDevice::NoFrames(d) => d.send(f),
        }
    }
    fn recv(&mut self, b: &mut [u8]) -> io::Result<Option<usize>> {
        match self {
            CliDevice::Raw(d) => d.recv(b),
            CliDevice::Pcap(d) => d.recv(b),
            CliDevice::NoFrames(d) => d.recv(b),
        }
    }
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        match self {
            CliDevice::Raw(d) => d.raw_fd(),
            CliDevice::Pcap(d) => d.raw_fd(),
            CliDevice::NoFrames(_) => None,
        }
    }
    // The raw socket's own batches (sendmmsg/recvmmsg) rather than the trait's frame-by-frame
    // defaults.
    fn send_batch(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        match self {
            CliDevice::Raw(d) => d.send_batch(frames),
            CliDevice::Pcap(d) => d.send_batch(frames),
            CliDevice::NoFrames(d) => d.send_batch(frames),
        }
    }
    fn recv_batch(&mut self, batch: &mut roce_net::device::RecvBatch) -> io::Result<usize> {
        match self {
            CliDevice::Raw(d) => d.recv_batch(batch),
            CliDevice::Pcap(d) => d.recv_batch(batch),
            CliDevice::NoFrames(d) => d.recv_batch(batch),
        }
    }
}

impl CliDevice {
    /// The raw socket's counts (kernel drops read now), if there is a raw socket.
    pub fn raw_stats(&mut self) -> Option<roce_net::raw::RawStats> {
        match self {
            CliDevice::Raw(d) => Some(d.stats()),
            CliDevice::Pcap(d) => Some(d.inner_mut().stats()),
            CliDevice::NoFrames(_) => None,
        }
    }
}

impl MulticastFilter for CliDevice {
    fn set_multicast(&mut self, m: &std::collections::BTreeSet<[u8; 6]>) -> io::Result<()> {
        match self {
            CliDevice::Raw(d) => d.set_multicast(m),
            CliDevice::Pcap(d) => MulticastFilter::set_multicast(d, m),
            CliDevice::NoFrames(_) => Ok(()),
        }
    }
}

/// Where a stack runs and how.
#[derive(Debug, Clone)]
pub struct PortOptions {
    /// Interface (raw socket), when not `ibsim`.
    pub iface: String,
    /// Attach to OpenSM's SA through ibsim instead, at this node ("": the sim's default port).
    pub ibsim: Option<String>,
    /// The stack's own address (beside the kernel's on the same link).
    pub local: IpAddr,
    /// Prefix length (default: the interface's for that subnet, else 24 / 64).
    pub prefix: Option<u8>,
    /// The stack's own MAC instead of the interface's (`--mac`).
    pub mac: Option<[u8; 6]>,
    /// The SA's address.
    pub sa: Option<IpAddr>,
    /// Capture to this pcap.
    pub pcap: Option<PathBuf>,
    /// Print every frame.
    pub verbose: bool,
    /// Multicast paths.
    pub paths: MulticastPaths,
}

/// Why a port could not be opened: the exit status (2 usage, 3 cannot run here) and the message.
#[derive(Debug, Clone)]
pub struct OpenError {
    /// The exit status.
    pub status: u8,
    /// The message.
    pub message: String,
}

impl OpenError {
    fn env(message: String) -> OpenError {
        OpenError { status: exit::ENVIRONMENT, message }
    }
    fn usage(message: String) -> OpenError {
        OpenError { status: exit::USAGE, message }
    }
}

fn in_prefix(a: IpAddr, b: IpAddr, p: u8) -> bool {
    match (a, b) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let m = if p == 0 { 0 } else { u32::MAX << (32 - u32::from(p.min(32))) };
            u32::from(a) & m == u32::from(b) & m
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            let m = if p == 0 { 0 } else { u128::MAX << (128 - u32::from(p.min(128))) };
            u128::from(a) & m == u128::from(b) & m
        }
        _ => false,
    }
}

fn family(a: &IpAddr) -> &'static str {
    if a.is_ipv4() {
        "IPv4"
    } else {
        "IPv6"
    }
}

/// Refuse, before any traffic, addresses whose families disagree: `what` names each address
/// by its option (`("-b", addr)`).
pub fn check_families(tool: &str, addrs: &[(&str, Option<IpAddr>)]) -> Result<(), String> {
    let known: Vec<(&str, IpAddr)> = addrs.iter().filter_map(|(n, a)| a.map(|a| (*n, a))).collect();
    if let Some(((n0, a0), (n1, a1))) =
        known.iter().zip(known.iter().skip(1)).find(|((_, a), (_, b))| a.is_ipv4() != b.is_ipv4())
    {
        return Err(format!(
            "{tool}: address families disagree: {n0} {a0} is {} but {n1} {a1} is {}; give addresses of one family",
            family(a0),
            family(a1)
        ));
    }
    Ok(())
}

/// The interface's MTU (from sysfs), if it can be read.
pub fn iface_mtu(iface: &str) -> Option<u32> {
    if iface.is_empty() || iface.contains('/') {
        return None;
    }
    std::fs::read_to_string(format!("/sys/class/net/{iface}/mtu")).ok()?.trim().parse().ok()
}

/// Bytes of RoCEv2 headers around a UD payload: IP, UDP 8, BTH 12, DETH 8, ICRC 4 (and
/// IMMDT 4 when the send carries immediate data).
pub fn roce_ud_overhead(ipv4: bool, imm: bool) -> u32 {
    (if ipv4 { 20 } else { 40 }) + 8 + 12 + 8 + 4 + if imm { 4 } else { 0 }
}

/// The path MTU of a UD send on an interface: the largest IB MTU (256, 512, 1024, 2048, 4096)
/// that fits the interface MTU after the RoCEv2 headers; a UD message is one packet, so this
/// is the largest datagram. `None` when even 256 does not fit.
pub fn ud_path_mtu(iface_mtu: u32, ipv4: bool, imm: bool) -> Option<u32> {
    let room = iface_mtu.checked_sub(roce_ud_overhead(ipv4, imm))?;
    [4096, 2048, 1024, 512, 256].into_iter().find(|m| *m <= room)
}

/// Refuse a datagram size the path cannot carry, before anything is sent.
pub fn check_size(tool: &str, iface: &str, size: usize, ipv4: bool, imm: bool) -> Result<(), String> {
    let Some(mtu) = iface_mtu(iface) else { return Ok(()) }; // open_port names a missing interface
    match ud_path_mtu(mtu, ipv4, imm) {
        Some(limit) if size <= limit as usize => Ok(()),
        Some(limit) => Err(format!(
            "{tool}: -S {size} is larger than the path MTU allows: at most {limit} bytes per datagram on {iface} \
             (interface MTU {mtu} less {} bytes of {} RoCEv2 headers, rounded down to an IB MTU); \
             a UD message is one packet",
            roce_ud_overhead(ipv4, imm),
            if ipv4 { "IPv4" } else { "IPv6" }
        )),
        None => Err(format!("{tool}: {iface}'s MTU {mtu} is too small for any RoCEv2 UD datagram (IB MTU 256)")),
    }
}

/// Open the interface (or attach to ibsim) and build a driven stack, attached to the shutdown
/// self-pipe so that a signal wakes its waits.
pub fn open_port(o: &PortOptions) -> Result<Driver<CliDevice>, OpenError> {
    let mut d = match &o.ibsim {
        Some(node) => open_ibsim((!node.is_empty()).then_some(node.as_str()))?,
        None => open_raw(o)?,
    };
    if o.verbose {
        d.set_tap(Box::new(|dir, now, f| {
            let s = roce_decode::decode::decode_ethernet(f).summary;
            status!("{:>10.6} {} {s}", now.since_epoch().as_secs_f64(), if dir == Direction::Tx { ">" } else { "<" });
        }));
    }
    shutdown::attach(&mut d);
    Ok(d)
}

fn open_ibsim(node: Option<&str>) -> Result<Driver<CliDevice>, OpenError> {
    let mut opts = match node {
        Some(n) => roce_net::ibsim::IbsimOptions::node(n),
        None => roce_net::ibsim::IbsimOptions::default(),
    };
    opts.wait_active = Some(Duration::from_secs(20));
    let client = roce_net::ibsim::IbsimClient::connect(&opts).map_err(|e| OpenError::env(e.to_string()))?;
    // An IPoIB-style address for the RDMA-CM id (the SA path does not use it on the wire).
    let lid = client.port_lid();
    let [hi, lo] = lid.to_be_bytes();
    let ip = std::net::Ipv4Addr::new(198, 19, hi, lo);
    let mut cfg = StackConfig::new([0x02, 0, 0, 0, hi, lo], ip, 15);
    cfg.multicast_paths = MulticastPaths::SA_ONLY;
    cfg.sa_transport = roce_cm::SaTransport::External;
    cfg.mgid_style = roce_cm::MgidStyle::InfiniBand { pkey: 0xffff };
    cfg.port_gid = Some(client.port_gid());
    cfg.seed = seed();
    status!(
        "ibsim: port LID {} GID {} (SM LID {}) of {}",
        client.port_lid(),
        client.port_gid(),
        client.sm_lid(),
        client.node_id()
    );
    let link = roce_net::ibsim::IbsimSaLink::new(client);
    Ok(Driver::new(CliDevice::NoFrames(NoFrames), Stack::new(cfg)).with_sa_link(Box::new(link)))
}

/// Kernel buffers of the raw socket: an RC window arrives in one burst (hundreds of frames),
/// more than the default ~200 KiB holds.
const SOCKET_BUFFER: usize = 4 << 20;

fn open_raw(o: &PortOptions) -> Result<Driver<CliDevice>, OpenError> {
    // A transmit ring: a batch of frames leaves with one kick (receiving stays recvmmsg: a
    // TPACKET_V3 block would hold a lone frame until its retire timer, too slow for a
    // handshake). If the kernel refuses the ring, sendmmsg, with a note.
    let mut raw = RawSocket::open_with(&o.iface, roce_net::ring::RingConfig::tx_only())
        .map_err(|e| OpenError::env(e.to_string()))?;
    if let Some(why) = raw.ring_fallback() {
        eprintln!("note: no transmit ring on {} ({why}): sending with sendmmsg", o.iface);
    }
    if let Err(e) = raw.set_buffer_sizes(SOCKET_BUFFER, SOCKET_BUFFER) {
        eprintln!("warning: {e}: keeping the default socket buffers");
    }
    let info = raw.info.clone();
    let if_mac = info
        .mac
        .ok_or_else(|| OpenError::env(format!("{} has no MAC address (not an Ethernet interface?)", o.iface)))?;
    // A MAC of the stack's own: the interface passes it only while this socket lives (a
    // unicast filter entry, or promiscuity where there is no filter), never beyond.
    let mac = match o.mac {
        Some(m) if m != if_mac => {
            raw.add_unicast(m).map_err(|e| OpenError::env(format!("{}: --mac {}: {e}", o.iface, mac_text(m))))?;
            m
        }
        _ => if_mac,
    };
    // The address must sit in one of the interface's subnets (when it has any of that family).
    let same_family: Vec<(IpAddr, u8)> = info
        .ips
        .iter()
        .copied()
        .filter(|(a, _)| a.is_ipv4() == o.local.is_ipv4())
        .filter(|(a, _)| !matches!(a, IpAddr::V6(v) if (v.segments()[0] & 0xffc0) == 0xfe80))
        .collect();
    let prefix = match o.prefix {
        Some(p) => p,
        None => match same_family.iter().find(|(a, p)| in_prefix(*a, o.local, *p)) {
            Some((_, p)) => *p,
            None if same_family.is_empty() => {
                if o.local.is_ipv4() {
                    24
                } else {
                    64
                }
            }
            None => {
                let nets: Vec<String> = same_family.iter().map(|(a, p)| format!("{a}/{p}")).collect();
                return Err(OpenError::usage(format!(
                    "{} is outside {}'s subnets ({}); pick an address in one of them or pass --prefix",
                    o.local,
                    o.iface,
                    nets.join(", ")
                )));
            }
        },
    };
    if same_family.iter().any(|(a, _)| *a == o.local) {
        eprintln!("note: {} is also the kernel's address on {}: both will answer ARP, and the kernel may send ICMP port-unreachable for RoCEv2 frames", o.local, o.iface);
    }
    let mut cfg = match o.local {
        IpAddr::V4(a) => StackConfig::new(mac, a, prefix),
        IpAddr::V6(a) => {
            let mut c = StackConfig::new(mac, std::net::Ipv4Addr::UNSPECIFIED, 32);
            c.ipv4 = None;
            c.ipv6.push((a, prefix));
            c
        }
    };
    cfg.sa = o.sa;
    cfg.multicast_paths = o.paths;
    cfg.seed = seed();
    let dev = match &o.pcap {
        Some(p) => {
            CliDevice::Pcap(PcapDevice::create(raw, p).map_err(|e| OpenError::env(format!("{}: {e}", p.display())))?)
        }
        None => CliDevice::Raw(raw),
    };
    Ok(Driver::new(dev, Stack::new(cfg)))
}

fn mac_text(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

fn seed() -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    (t.as_nanos() as u64) ^ (u64::from(std::process::id()) << 32)
}

/// Why the SA transactions got no answer: no ARP/ND answer for the SA's address (then no SA
/// request ever left), or the SA itself was silent.
pub fn sa_timeout_text(d: &Driver<CliDevice>) -> String {
    let cfg = d.stack.config();
    if let Some(sa) = cfg.sa {
        if !d.stack.neighbors().iter().any(|(ip, _)| *ip == sa) {
            let (what, proto) = if sa.is_ipv4() { ("ARP reply", "ARP") } else { ("Neighbor Advertisement", "ND") };
            return format!(
                "ETIMEDOUT: no {what} for the SA's address {sa} ({proto} resolution failed), so no SA request left"
            );
        }
    }
    let t = cfg.sa_timing;
    format!(
        "ETIMEDOUT: the SA did not answer: timed out after {} transmissions over {:.1} s (retry interval {:.1} s)",
        t.max_sends(),
        t.timeout.as_secs_f64(),
        t.retry_interval().as_secs_f64()
    )
}

/// The end of every network command: the ids destroyed (groups left, connections
/// disconnected), the counters printed, and the exit status: the stop's (128+N, 141) if one
/// was asked, else `code`.
pub fn finish(tool: &str, d: &mut Driver<CliDevice>, ids: &[CmId], verbose: bool, code: u8) -> u8 {
    shutdown::destroy_ids(tool, d, ids);
    let raw = d.dev.raw_stats();
    print_counters_raw(d.stack.counters(), d.send_errors, raw, verbose);
    shutdown::requested().unwrap_or(code)
}

/// `roce mckey` options.
#[derive(Debug, Clone)]
pub struct MckeyOptions {
    /// Port.
    pub port: PortOptions,
    /// Group.
    pub group: IpAddr,
    /// Send (else receive).
    pub sender: bool,
    /// Messages.
    pub count: u32,
    /// Message size.
    pub size: usize,
    /// Join state.
    pub join_state: JoinState,
    /// Seconds to wait before leaving (after sending; receivers: the receive window).
    pub leave_after: Duration,
    /// No SA path (IGMP/MLD only).
    pub no_sa: bool,
}

const JOIN_WAIT: Duration = Duration::from_secs(10);
const LEAVE_WAIT: Duration = Duration::from_secs(20);

/// Refuse what cannot work before any traffic: a group that is not multicast, address families
/// that disagree, a datagram larger than the path MTU.
fn mckey_check(o: &MckeyOptions) -> Result<(), String> {
    const TOOL: &str = "roce mckey";
    if !o.group.is_multicast() {
        return Err(format!("{TOOL}: -m {} is not a multicast address (IPv4 224.0.0.0/4 or IPv6 ff00::/8)", o.group));
    }
    if o.port.ibsim.is_none() {
        check_families(TOOL, &[("-m", Some(o.group)), ("-b", Some(o.port.local)), ("--sa", o.port.sa)])?;
        if o.sender {
            check_size(TOOL, &o.port.iface, o.size, o.port.local.is_ipv4(), false)?;
        }
    }
    Ok(())
}

/// `roce mckey`: join, send or receive, leave. Returns the exit status.
pub fn mckey(o: &MckeyOptions) -> u8 {
    const TOOL: &str = "roce mckey";
    if let Err(e) = mckey_check(o) {
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
    let ibsim = o.port.ibsim.is_some();
    let local = if ibsim {
        IpAddr::V4(d.stack.config().ipv4.map(|(a, _)| a).unwrap_or(std::net::Ipv4Addr::UNSPECIFIED))
    } else {
        o.port.local
    };
    let id = match d.stack.create_id(PortSpace::Udp, QpType::Ud) {
        Ok(id) => id,
        Err(e) => {
            eprintln!("{TOOL}: create_id: {e}");
            return exit::FAILED;
        }
    };
    if let Err(e) = d.stack.bind_addr(id, SocketAddr::new(local, 0)) {
        eprintln!("{TOOL}: bind {local}: {e}");
        return exit::USAGE;
    }
    let qpn = if ibsim {
        None
    } else {
        match d.stack.create_qp_for_id(id) {
            Ok(q) => Some(q),
            Err(e) => {
                eprintln!("{TOOL}: create_qp: {e}");
                return finish(TOOL, &mut d, &[id], o.port.verbose, exit::FAILED);
            }
        }
    };
    let where_ = if ibsim { "ibsim".to_string() } else { o.port.iface.clone() };
    status!(
        "mckey: joining {} (MGID {}) as {} on {where_} from {local}{}",
        o.group,
        d.stack.mgid(&o.group),
        o.join_state,
        qpn.map_or(String::new(), |q| format!(" (QP 0x{q:06x})"))
    );
    let now = d.now();
    if let Err(e) = d.stack.join_multicast(now, id, o.group, o.join_state) {
        eprintln!("{TOOL}: join_multicast: {} ({e})", e.name());
        return finish(TOOL, &mut d, &[id], o.port.verbose, exit::FAILED);
    }
    let ev = d.wait_event(id, &[EventKind::MulticastJoin, EventKind::MulticastError], JOIN_WAIT).ok().flatten();
    let mut ud = None;
    let joined = match &ev {
        Some(e) => {
            print_event(e, "");
            if e.kind == EventKind::MulticastJoin {
                if let EventParam::Multicast { ud: u, .. } = &e.param {
                    ud = *u;
                }
                true
            } else {
                if e.status == roce_cm::Errno::ETIMEDOUT.status() {
                    eprintln!("{TOOL}: join: {}", sa_timeout_text(&d));
                }
                false
            }
        }
        None if d.stopped() => false,
        None => {
            eprintln!("{TOOL}: join: no event within {} s", JOIN_WAIT.as_secs());
            false
        }
    };
    let (mut posted, mut received) = (0u32, 0u32);
    let (errors0, small0) = (d.send_errors, too_small(&d));
    let t0 = WallInstant::now();
    if joined && o.sender && !d.stopped() {
        if let (Some(u), Some(qpn)) = (ud, qpn) {
            let dest = UdDest { ah: u.ah, remote_qpn: u.qp_num, remote_qkey: u.qkey };
            let mut payload = vec![0u8; o.size];
            for i in 0..o.count {
                if d.stopped() {
                    break;
                }
                payload.iter_mut().enumerate().for_each(|(j, b)| *b = (i as usize + j) as u8);
                if let Err(e) = d.stack.post_send(qpn, &dest, &payload, None) {
                    eprintln!("{TOOL}: post_send: {e}");
                    break;
                }
                posted += 1;
                let _ = d.run_for(Duration::from_millis(1));
                if o.count >= 1000 && (i + 1) % 1000 == 0 {
                    status!("progress: sent {}/{}", i + 1, o.count);
                }
            }
        }
        let _ = d.run_for(o.leave_after);
    } else if joined && !d.stopped() {
        let mut last = 0;
        let _ = d.run_until(o.leave_after.max(Duration::from_millis(1)), |d| {
            if let Some(q) = qpn {
                while d.stack.poll_recv(q).is_some() {
                    received += 1;
                }
            }
            if o.count >= 1000 && received / 1000 > last {
                last = received / 1000;
                status!("progress: received {received}/{}", o.count);
            }
            qpn.is_some() && received >= o.count
        });
    }
    let secs = t0.elapsed().as_secs_f64().max(1e-9);
    // Frames the device did not take (or that did not fit a frame) were not sent.
    let failed = (d.send_errors - errors0) + (too_small(&d) - small0);
    let sent = posted.saturating_sub(u32::try_from(failed).unwrap_or(u32::MAX));
    if sent < posted {
        eprintln!(
            "{TOOL}: {} of {posted} datagrams were not sent: {}",
            posted - sent,
            d.last_send_error.as_ref().map_or("transmit_buffer_too_small".to_string(), |e| e.to_string())
        );
    }
    // Leave: SA Delete (and the IGMP/MLD leave); never blocks past its retries.
    let mut ok_leave = false;
    if joined && !d.stopped() {
        status!("mckey: leaving {}", o.group);
        let now = d.now();
        match d.stack.leave_multicast(now, id, o.group) {
            Ok(()) => match d.wait_event(id, &[EventKind::MulticastLeft, EventKind::MulticastError], LEAVE_WAIT) {
                Ok(Some(e)) => {
                    print_event(&e, if e.kind == EventKind::MulticastLeft { "" } else { " (leave)" });
                    if e.kind == EventKind::MulticastLeft {
                        ok_leave = true;
                    } else {
                        if e.status == roce_cm::Errno::ETIMEDOUT.status() {
                            eprintln!("{TOOL}: leave: {}", sa_timeout_text(&d));
                        }
                        ok_leave = o.no_sa;
                    }
                }
                _ if d.stopped() => {}
                _ => eprintln!("{TOOL}: leave: no event within {} s", LEAVE_WAIT.as_secs()),
            },
            Err(e) => eprintln!("{TOOL}: leave_multicast: {} ({e})", e.name()),
        }
    }
    // Destroy the id on every path: a stop while joined leaves here (SA Delete, IGMP/MLD leave).
    shutdown::destroy_ids(TOOL, &mut d, &[id]);
    // No data path through ibsim: nothing was to be received.
    let lost = if o.sender || qpn.is_none() { 0 } else { o.count.saturating_sub(received) };
    let n = if o.sender { sent } else { received };
    out!(
        "summary: sent {sent} received {received} lost {lost} in {secs:.3} s ({:.0} msg/s, {:.2} Mbit/s)",
        f64::from(n) / secs,
        f64::from(n) * o.size as f64 * 8.0 / secs / 1e6
    );
    let code = if joined && ok_leave && sent == posted { exit::OK } else { exit::FAILED };
    finish(TOOL, &mut d, &[], o.port.verbose, code)
}

fn too_small(d: &Driver<CliDevice>) -> u64 {
    d.stack.counters().dropped(roce_cm::DropReason::TransmitBufferTooSmall)
}

fn print_member(r: &McMemberRecord) {
    out!("MCMemberRecord member dump:");
    out!("\t\tMGID....................{}", r.mgid);
    out!("\t\tPortGid.................{}", r.port_gid);
    out!("\t\tqkey....................0x{:X}", r.q_key);
    out!("\t\tmlid....................0x{:X}", r.mlid);
    out!("\t\tmtu.....................0x{:X}", (u8::from(r.mtu_selector) << 6) | r.mtu);
    out!("\t\tTClass..................0x{:X}", r.traffic_class);
    out!("\t\tpkey....................0x{:X}", r.p_key);
    out!("\t\trate....................0x{:X}", (u8::from(r.rate_selector) << 6) | r.rate);
    out!("\t\tpkt_life................0x{:X}", (u8::from(r.packet_life_time_selector) << 6) | r.packet_life_time);
    out!("\t\tSL......................0x{:X}", r.sl);
    out!("\t\tFlowLabel...............0x{:X}", r.flow_label);
    out!("\t\tHopLimit................0x{:X}", r.hop_limit);
    out!("\t\tScope...................0x{:X}", r.scope);
    out!("\t\tJoinState...............0x{:X} {}", r.join_state.0, r.join_state);
    out!("\t\tProxyJoin...............0x{:X}", u8::from(r.proxy_join));
}

/// `roce sa-query`: SA Get (with an MGID) or GetTable of MCMemberRecords, to `port.sa` on a
/// raw socket or to OpenSM through ibsim. Returns the exit status: 0 on a success status, 1 on
/// an error status or no answer.
pub fn sa_query(port: &PortOptions, mgid: Option<Gid>) -> u8 {
    const TOOL: &str = "roce sa-query";
    if port.ibsim.is_none() {
        if port.sa.is_none() {
            eprintln!("{TOOL}: --sa ADDR is required with --iface");
            return exit::USAGE;
        }
        if let Err(e) = check_families(TOOL, &[("-b", Some(port.local)), ("--sa", port.sa)]) {
            eprintln!("{e}");
            return exit::USAGE;
        }
    }
    let mut d = match open_port(port) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{TOOL}: {}", e.message);
            return e.status;
        }
    };
    let rec = McMemberRecord { mgid: mgid.unwrap_or_default(), ..McMemberRecord::default() };
    let (method, mask) = match mgid {
        Some(_) => (Method::Get, ComponentMask::MGID.0),
        None => (Method::GetTable, 0),
    };
    let req = SaMad::request(method, 0, attr::MC_MEMBER_RECORD, mask, SaData::mc_member(rec));
    let now = d.now();
    let handle = match d.stack.sa_query(now, req) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("{TOOL}: {e}");
            return exit::USAGE;
        }
    };
    let name = if mgid.is_some() { "SubnAdmGet" } else { "SubnAdmGetTable" };
    match (&port.ibsim, port.sa) {
        (Some(_), _) => status!("sa-query: {name} MCMemberRecord to the SM's SA through ibsim"),
        (None, Some(sa)) => {
            status!("sa-query: {name} MCMemberRecord to {sa} QP1 from {} on {}", port.local, port.iface)
        }
        (None, None) => {}
    }
    let code = match wait_sa_answer(TOOL, &mut d, handle, port.verbose) {
        Ok((resp, whole)) => {
            if let Some(code) = sa_status_failed(TOOL, &resp) {
                code
            } else {
                print_records(&resp, &whole);
                exit::OK
            }
        }
        Err(code) => code,
    };
    finish(TOOL, &mut d, &[], port.verbose, code)
}

/// Wait up to 10 s for the answer to the SA query `handle` and print its first line (with
/// `verbose`, the RMPP segments received and ACKs sent). An error, a timeout (naming the step
/// that got no answer), a failed RMPP transfer or a stop is printed and turned into the exit
/// status. The answer comes with the whole result (its reassembled SA data).
pub fn wait_sa_answer(
    tool: &str,
    d: &mut Driver<CliDevice>,
    handle: u64,
    verbose: bool,
) -> Result<(SaMad, roce_cm::mcast::SaQueryResult), u8> {
    let mut result = None;
    let _ = d.run_until(Duration::from_secs(10), |d| {
        result = d.stack.poll_sa_result().filter(|r| r.handle == handle);
        result.is_some()
    });
    let Some(r) = result else {
        if !d.stopped() {
            eprintln!("{tool}: ETIMEDOUT: no answer within 10 s");
        }
        return Err(exit::FAILED);
    };
    match (&r.result, r.rmpp_error) {
        (Ok(resp), _) => {
            let st = resp.header.status;
            out!("answer: {} status {} TID 0x{:016x}", resp.header.method_name(), st, resp.header.transaction_id);
            if resp.rmpp.is_active() && r.segments == 0 {
                eprintln!(
                    "{tool}: warning: the answer is one MAD with the RMPP Active flag but no RMPP segment header (RMPPType {}, version {}: OpenSM through ibsim's umad shim): records past its {} data bytes, if the table had any, cannot be known",
                    u8::from(resp.rmpp.rmpp_type),
                    resp.rmpp.version,
                    roce_wire::sa::SA_DATA_LEN
                );
            }
            if verbose {
                let rs = d.stack.rmpp_stats();
                out!(
                    "RMPP: {} segments received, {} ACKs sent ({} bytes of SA data; receiver totals: {} segments, {} ACKs, {} ABORTs, {} unsegmented)",
                    r.segments,
                    r.acks,
                    r.data.len(),
                    rs.segments,
                    rs.acks,
                    rs.aborts,
                    rs.unsegmented
                );
            }
            Ok((*resp, r))
        }
        (Err(e), Some(why)) => {
            eprintln!("{tool}: {} ({why})", e.name());
            Err(exit::FAILED)
        }
        (Err(roce_cm::Errno::ETIMEDOUT), None) => {
            eprintln!("{tool}: {}", sa_timeout_text(d));
            Err(exit::FAILED)
        }
        (Err(e), None) => {
            eprintln!("{tool}: {} ({e})", e.name());
            Err(exit::FAILED)
        }
    }
}

/// An SA answer with an error status: printed, and the exit status it gives.
pub fn sa_status_failed(tool: &str, resp: &SaMad) -> Option<u8> {
    let st = resp.header.status;
    (st.0 != 0).then(|| {
        eprintln!("{tool}: the SA answered status {st}");
        exit::FAILED
    })
}

/// `roce sa-server`: an SA on a raw socket, answering on QP1 of `port.local` (with its own ARP/ND),
/// for `duration` (until a signal if `None`).
pub fn sa_server(port: &PortOptions, duration: Option<Duration>) -> u8 {
    const TOOL: &str = "roce sa-server";
    let mut d = match open_port(port) {
        Ok(d) => d.with_sa(roce_sa::SaResponder::with_defaults()),
        Err(e) => {
            eprintln!("{TOOL}: {}", e.message);
            return e.status;
        }
    };
    status!("sa-server: answering SA requests on {} QP1 ({})", port.local, port.iface);
    let end = duration.map(|d| WallInstant::now() + d);
    let mut last = 0;
    let mut code = exit::OK;
    while !d.stopped() {
        let left = end.map_or(Duration::from_secs(1), |e| e.saturating_duration_since(WallInstant::now()));
        if left.is_zero() {
            break;
        }
        if let Err(e) = d.turn(left.min(Duration::from_millis(200))) {
            eprintln!("{TOOL}: {e}");
            code = exit::FAILED;
            break;
        }
        if let Some(sa) = d.sa.as_ref() {
            let n = sa.stats().received;
            if n != last {
                status!("sa-server: {} requests, {} groups, {} members", n, sa.group_count(), sa.member_count());
                last = n;
            }
        }
    }
    if let Some(why) = shutdown::requested() {
        eprintln!("{TOOL}: {}: stopping", shutdown::reason(why));
    }
    finish(TOOL, &mut d, &[], port.verbose, code)
}

/// A GetResp's record, or every record of a GetTableResp (all its RMPP segments) and their
/// count.
fn print_records(resp: &SaMad, whole: &roce_cm::mcast::SaQueryResult) {
    match &resp.data {
        SaData::McMember { record, .. } if resp.header.method == Method::Get => print_member(record),
        _ => {
            let mut n = 0;
            for b in whole.records(McMemberRecord::LEN) {
                let Ok(r) = McMemberRecord::parse_bytes(b) else { continue };
                // One MAD without an RMPP DATA header has no length: its unused slots (zero, or
                // not even zeroed by OpenSM through ibsim) are not records.
                if whole.segments == 0 && r.mgid == Gid::ZERO {
                    continue;
                }
                print_member(&r);
                n += 1;
            }
            out!("{n} records");
        }
    }
}
