//! A driven stack on a raw socket (or on OpenSM's SA through ibsim), as the network commands
//! run it: [`open_port`] opens the interface and builds roce-net's one [`Driver`] loop, the
//! `check_*` functions refuse before any traffic what cannot work (address families, a
//! datagram over the path MTU), and every command ends through [`finish`]: its ids destroyed
//! as the kernel destroys a process's ([`destroy_ids`]), its counters printed, its exit status.
//! Uses [`super::shutdown`] (a stop wakes the driver's waits) and [`super::out`].

use std::io;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use roce_cm::mcast::MemberState;
use roce_cm::{CmId, EventKind, EventParam, MulticastPaths, Stack, StackConfig};
use roce_net::device::Device;
use roce_net::driver::{Direction, Driver, MulticastFilter, NoFrames};
use roce_net::raw::{InterfaceInfo, RawSocket};
use roce_net::udp::{RoceUdpSocket, UdpStats};
use roce_net::{FaultConfig, FaultDevice, FaultStats, PcapDevice};
use roce_wire::MacAddr;

use crate::plumbing::exit;
use crate::plumbing::options::FaultSpec;
use crate::plumbing::out::{errno_name, print_counters_raw, status};
use crate::plumbing::shutdown::{self, GRACE};

/// A raw socket or a kernel UDP socket (captured to a pcap or not), or no frames at all
/// (ibsim: SA MADs only).
pub enum CliDevice {
    /// Plain.
    Raw(RawSocket),
    /// Every frame also written to a pcap file.
    Pcap(PcapDevice<RawSocket>),
    /// The udp transport: a kernel UDP socket on port 4791.
    Udp(RoceUdpSocket),
    /// The udp transport, every frame (as the engine sees it) also written to a pcap file.
    UdpPcap(PcapDevice<RoceUdpSocket>),
    /// No Ethernet: the SA MADs go over the driver's SA link (ibsim).
    NoFrames(NoFrames),
    /// `--fault`: one of the others behind roce-net's fault transport (outside the pcap, so a
    /// capture holds what passed).
    Fault(FaultDevice<Box<CliDevice>>),
}

/// The device behind a [`CliDevice`], for the calls every variant answers alike.
macro_rules! each_device {
    ($dev:expr, $d:ident => $body:expr) => {
        match $dev {
            CliDevice::Raw($d) => $body,
            CliDevice::Pcap($d) => $body,
            CliDevice::Udp($d) => $body,
            CliDevice::UdpPcap($d) => $body,
            CliDevice::NoFrames($d) => $body,
            CliDevice::Fault($d) => $body,
        }
    };
}

impl Device for CliDevice {
    fn send(&mut self, f: &[u8]) -> io::Result<()> {
        each_device!(self, d => d.send(f))
    }
    fn recv(&mut self, b: &mut [u8]) -> io::Result<Option<usize>> {
        each_device!(self, d => d.recv(b))
    }
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        each_device!(self, d => d.raw_fd())
    }
    fn rx_ready_beside_flood(&self) -> bool {
        each_device!(self, d => d.rx_ready_beside_flood())
    }
    // The raw socket's own batches (sendmmsg/recvmmsg) rather than the trait's frame-by-frame
    // defaults.
    fn send_batch(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        each_device!(self, d => d.send_batch(frames))
    }
    fn recv_batch(&mut self, batch: &mut roce_net::device::RecvBatch) -> io::Result<usize> {
        each_device!(self, d => d.recv_batch(batch))
    }
    // The udp transport's datagrams where `recvmmsg` put them (a capture or a fault injector
    // takes frames: the trait's default).
    fn recv_in_place(
        &mut self,
        batch: &mut roce_net::device::RecvBatch,
        datagram: &mut dyn FnMut(&roce_wire::datagram::Arrival, &[u8]),
    ) -> io::Result<usize> {
        each_device!(self, d => d.recv_in_place(batch, datagram))
    }
}

impl CliDevice {
    /// Write out a capture's buffered frames and close it, keeping the device (the C library
    /// calls this at the end of its process, which ends without dropping the device).
    pub fn close_capture(&mut self) -> Option<std::io::Result<()>> {
        let dev = std::mem::replace(self, CliDevice::NoFrames(NoFrames));
        let (dev, r) = match dev {
            CliDevice::Pcap(p) => match p.finish() {
                Ok((d, _)) => (CliDevice::Raw(d), Some(Ok(()))),
                Err(e) => (CliDevice::NoFrames(NoFrames), Some(Err(e))),
            },
            CliDevice::UdpPcap(p) => match p.finish() {
                Ok((d, _)) => (CliDevice::Udp(d), Some(Ok(()))),
                Err(e) => (CliDevice::NoFrames(NoFrames), Some(Err(e))),
            },
            other => (other, None),
        };
        *self = dev;
        r
    }

    /// Write out a capture's buffered frames, keeping it open (a process killed later keeps
    /// them: the C library's stack thread calls this before it sleeps).
    pub fn flush_capture(&mut self) {
        match self {
            CliDevice::Pcap(p) => p.flush_capture(),
            CliDevice::UdpPcap(p) => p.flush_capture(),
            CliDevice::Fault(f) => f.inner_mut().flush_capture(),
            _ => {}
        }
    }

    /// The raw socket's counts (kernel drops read now), if there is a raw socket.
    pub fn raw_stats(&mut self) -> Option<roce_net::raw::RawStats> {
        match self {
            CliDevice::Raw(d) => Some(d.stats()),
            CliDevice::Pcap(d) => Some(d.inner_mut().stats()),
            CliDevice::Fault(d) => d.inner_mut().raw_stats(),
            _ => None,
        }
    }

    /// The UDP socket's counts, if the port runs on the udp transport.
    pub fn udp_stats(&mut self) -> Option<UdpStats> {
        match self {
            CliDevice::Udp(d) => Some(d.stats()),
            CliDevice::UdpPcap(d) => Some(d.inner_mut().stats()),
            CliDevice::Fault(d) => d.inner_mut().udp_stats(),
            _ => None,
        }
    }

    /// What `--fault` did to the frames sent and received, if it is set.
    pub fn fault_stats(&self) -> Option<(FaultStats, FaultStats)> {
        match self {
            CliDevice::Fault(d) => Some((d.tx_stats(), d.rx_stats())),
            _ => None,
        }
    }

    /// Put `self` behind the fault transport the `specs` describe: each sets the faults of its
    /// direction(s), a later one those of an earlier one; the seed is the first's.
    fn with_fault(self, specs: &[FaultSpec]) -> CliDevice {
        let mut dev = FaultDevice::new(Box::new(self), specs.first().map_or(1, |s| s.seed));
        for spec in specs {
            if spec.tx {
                dev.set_tx(spec.config.clone());
            }
            if spec.rx {
                dev.set_rx(spec.config.clone());
            }
        }
        CliDevice::Fault(dev)
    }
}

impl MulticastFilter for Box<CliDevice> {
    fn set_multicast(&mut self, m: &std::collections::BTreeSet<[u8; 6]>) -> io::Result<()> {
        MulticastFilter::set_multicast(&mut **self, m)
    }
    fn set_ip_groups(&mut self, g: &std::collections::BTreeSet<IpAddr>) -> io::Result<()> {
        MulticastFilter::set_ip_groups(&mut **self, g)
    }
}

impl MulticastFilter for CliDevice {
    fn set_multicast(&mut self, m: &std::collections::BTreeSet<[u8; 6]>) -> io::Result<()> {
        each_device!(self, d => MulticastFilter::set_multicast(d, m))
    }
    fn set_ip_groups(&mut self, g: &std::collections::BTreeSet<IpAddr>) -> io::Result<()> {
        each_device!(self, d => MulticastFilter::set_ip_groups(d, g))
    }
}

/// How a port's frames travel (`--transport`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A raw AF_PACKET socket: any frame, any source address or MAC; needs CAP_NET_RAW.
    Raw,
    /// A kernel UDP socket on port 4791: no privilege; the kernel's own addresses, its
    /// ARP/ND and its IGMP/MLD reports.
    Udp,
}

impl Transport {
    /// The transport a tool takes without `--transport`: raw when the process holds
    /// CAP_NET_RAW (in its effective set), else udp.
    pub fn default_here() -> Transport {
        if has_cap_net_raw() {
            Transport::Raw
        } else {
            Transport::Udp
        }
    }
}

/// Whether CAP_NET_RAW (capability 13) is in this process's effective set (/proc/self/status).
pub fn has_cap_net_raw() -> bool {
    const CAP_NET_RAW: u32 = 13;
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return false };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_NET_RAW) != 0)
}

/// How long the data-path tools (`roce perftest`, `roce pingpong`) look for the next frames
/// after a turn that received some before they sleep ([`Driver::set_busy_poll`]): a stream's
/// receiver stays awake between its sender's bursts (perftest itself spins on its CQ).
pub const DATA_PATH_BUSY_POLL: std::time::Duration = std::time::Duration::from_micros(50);

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
    /// How frames travel (`None`: [`Transport::default_here`]).
    pub transport: Option<Transport>,
    /// Faults on our own frames (`--fault`).
    pub fault: Vec<FaultSpec>,
    /// Raw sockets that receive, frames spread over them by flow (PACKET_FANOUT_HASH; 1: one
    /// socket). `roce sa-server --rx-queues`.
    pub rx_queues: usize,
    /// On the raw transport, send RC/UC runs as GSO frames (PACKET_VNET_HDR): the tools with an
    /// RC data path (perftest, pingpong, rping). The others keep the transmit ring: their
    /// frames never form runs, and `roce sa-server` answered 5× fewer joins a second through a
    /// GSO socket (sa_soak: 1,808 against 9,019; spec/net.md).
    pub gso: bool,
    /// The congestion control of the stack's connected QPs (`--cc` of the RC tools,
    /// `ROCE_CC` of the C library; off by default).
    pub congestion: roce_cm::rc::Congestion,
    /// RC FLUSH with rxe's ICRC (`ROCE_RXE_FLUSH_ICRC=1` of the C library;
    /// [`roce_cm::StackConfig::rxe_flush_icrc`]).
    pub rxe_flush_icrc: bool,
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

/// The interface that holds `addr`, else the first whose subnet holds it (`roce exec` and the
/// C library pick the port's interface so when none is given).
pub fn interface_for(ifaces: &[InterfaceInfo], addr: IpAddr) -> Option<&InterfaceInfo> {
    ifaces
        .iter()
        .find(|f| f.ips.iter().any(|(ip, _)| *ip == addr))
        .or_else(|| ifaces.iter().find(|f| f.ips.iter().any(|(ip, p)| in_prefix(*ip, addr, *p))))
}

/// Whether `a` and `b` share their first `p` bits (one subnet), for addresses of one family.
pub fn in_prefix(a: IpAddr, b: IpAddr, p: u8) -> bool {
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

/// The path MTU RDMA-CM uses on Ethernet: the largest IB MTU under the netdev's MTU
/// (`iboe_get_mtu`), read from sysfs; unchanged when it cannot be read.
pub fn set_port_mtu_from(d: &mut Driver<CliDevice>, iface: &str) {
    if let Some(m) = iface_mtu(iface) {
        d.stack.set_port_mtu(iboe_mtu_code(m));
    }
}

/// iboe_get_mtu: the IB MTU code for a netdev MTU (room for GRH, UDP, BTH, XRCETH,
/// AtomicETH and ICRC: 96 bytes).
pub fn iboe_mtu_code(netdev_mtu: u32) -> u8 {
    let room = netdev_mtu.saturating_sub(40 + 8 + 12 + 4 + 28 + 4);
    match room {
        4096.. => 5,
        2048.. => 4,
        1024.. => 3,
        512.. => 2,
        _ => 1,
    }
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

/// [`open_port`] for `tool`: a failure is said on stderr (`TOOL: message`) and becomes the
/// exit status.
pub fn open_port_or_exit(tool: &str, o: &PortOptions) -> Result<Driver<CliDevice>, u8> {
    let d = open_port(o).map_err(|e| {
        eprintln!("{tool}: {}", e.message);
        e.status
    })?;
    if o.ibsim.is_none() {
        let why = if o.transport.is_some() { "--transport" } else { "the default" };
        match &d.dev {
            CliDevice::Udp(_) | CliDevice::UdpPcap(_) => status!(
                "{tool}: transport udp ({why}{}): a UDP socket on {} port 4791 on {}",
                if o.transport.is_some() { "" } else { ": no CAP_NET_RAW" },
                o.local,
                o.iface
            ),
            _ => status!(
                "{tool}: transport raw ({why}{}): an AF_PACKET socket on {}",
                if o.transport.is_some() { "" } else { ": CAP_NET_RAW held" },
                o.iface
            ),
        }
    }
    Ok(d)
}

/// Open the interface (or attach to ibsim) and build a driven stack, attached to the shutdown
/// self-pipe so that a signal wakes its waits.
pub fn open_port(o: &PortOptions) -> Result<Driver<CliDevice>, OpenError> {
    let mut d = match (&o.ibsim, o.transport.unwrap_or_else(Transport::default_here)) {
        (Some(node), _) => open_ibsim((!node.is_empty()).then_some(node.as_str()))?,
        (None, Transport::Raw) => open_raw(o)?,
        (None, Transport::Udp) => open_udp(o)?,
    };
    if !o.fault.is_empty() && o.ibsim.is_none() {
        let dev = std::mem::replace(&mut d.dev, CliDevice::NoFrames(NoFrames));
        d.dev = dev.with_fault(&o.fault);
        for spec in &o.fault {
            let c = &spec.config;
            let dir = match (spec.tx, spec.rx) {
                (true, true) => "sent and received",
                (false, true) => "received",
                _ => "sent",
            };
            status!(
                "fault on {dir} frames{}: drop {} reorder {} (held {} polls) dup {}, seed {}",
                match c.frames {
                    roce_net::FaultFrames::All => String::new(),
                    only => format!(" (RoCEv2 {} only)", only.name()),
                },
                c.drop,
                c.delay,
                c.delay_polls,
                c.duplicate,
                o.fault[0].seed
            );
        }
    }
    d.stack.rc_mut().set_congestion(o.congestion);
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
/// The least receive buffer of one socket of a fanout group (`--rx-queues`).
const SOCKET_BUFFER_PER_QUEUE_MIN: usize = 512 << 10;

fn open_raw(o: &PortOptions) -> Result<Driver<CliDevice>, OpenError> {
    // With `o.gso`, GSO (PACKET_VNET_HDR): a run of RoCEv2 frames leaves as one skb and a
    // peer's run is read as one (spec/rc.md, "The raw transport's GSO path"); it takes the
    // socket without rings. Otherwise, or where the kernel refuses it, a transmit ring: a
    // batch of frames leaves with one kick
    // (receiving stays recvmmsg: a TPACKET_V3 block would hold a lone frame until its retire
    // timer, too slow for a handshake); where it refuses that too, sendmmsg, with a note.
    let with_gso = match o.gso {
        true => {
            let mut raw = RawSocket::open(&o.iface).map_err(|e| OpenError::env(e.to_string()))?;
            match raw.enable_gso() {
                Ok(()) => Some(raw),
                Err(e) => {
                    eprintln!("note: no GSO on {} ({e}): a transmit ring instead", o.iface);
                    None
                }
            }
        }
        false => None,
    };
    let mut raw = match with_gso {
        Some(raw) => raw,
        None => {
            let raw = RawSocket::open_with(&o.iface, roce_net::ring::RingConfig::tx_only())
                .map_err(|e| OpenError::env(e.to_string()))?;
            if let Some(why) = raw.ring_fallback() {
                eprintln!("note: no transmit ring on {} ({why}): sending with sendmmsg", o.iface);
            }
            raw
        }
    };
    // Before the buffer sizes, which are set on every socket of the group.
    raw.fan_out(o.rx_queues)
        .map_err(|e| OpenError::env(format!("{}: {} receive queues: {e}", o.iface, o.rx_queues)))?;
    // A fanout group shares the one socket's receive buffer: the kernel memory stays bounded
    // as before, and a flood's socket holds less backlog to read once the flood stops.
    let rcvbuf = (SOCKET_BUFFER / raw.receive_queues()).max(SOCKET_BUFFER_PER_QUEUE_MIN);
    if let Err(e) = raw.set_buffer_sizes(rcvbuf, SOCKET_BUFFER) {
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
            raw.add_unicast(m).map_err(|e| OpenError::env(format!("{}: --mac {}: {e}", o.iface, MacAddr(m))))?;
            m
        }
        _ => if_mac,
    };
    let cfg = port_config(o, &info, mac, false)?;
    let dev = match &o.pcap {
        Some(p) => {
            CliDevice::Pcap(PcapDevice::create(raw, p).map_err(|e| OpenError::env(format!("{}: {e}", p.display())))?)
        }
        None => CliDevice::Raw(raw),
    };
    Ok(Driver::new(dev, Stack::new(cfg)))
}

/// The stack's configuration on the interface `info` with `mac`: its address and prefix (the
/// address must sit in one of the interface's subnets when it has any of that family), the SA,
/// the multicast paths. `kernel_address`: the address is meant to be the kernel's own (the udp
/// transport), so no note that it is.
fn port_config(
    o: &PortOptions,
    info: &InterfaceInfo,
    mac: [u8; 6],
    kernel_address: bool,
) -> Result<StackConfig, OpenError> {
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
    if !kernel_address && same_family.iter().any(|(a, _)| *a == o.local) {
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
    cfg.rxe_flush_icrc = o.rxe_flush_icrc;
    cfg.seed = seed();
    Ok(cfg)
}

/// The udp transport: a kernel UDP socket bound to the stack's address (one of the kernel's)
/// and port 4791 on the interface. What it cannot do is refused, naming the raw transport;
/// the port already taken is exit 3 (never a fall back to raw).
fn open_udp(o: &PortOptions) -> Result<Driver<CliDevice>, OpenError> {
    if let Some(m) = o.mac {
        return Err(OpenError::usage(format!(
            "--mac {} needs --transport raw: a UDP socket sends from the interface's own MAC",
            MacAddr(m)
        )));
    }
    let info = roce_net::raw::interface(&o.iface).map_err(|e| OpenError::env(e.to_string()))?;
    let mac = info
        .mac
        .ok_or_else(|| OpenError::env(format!("{} has no MAC address (not an Ethernet interface?)", o.iface)))?;
    if !info.ips.iter().any(|(a, _)| *a == o.local) {
        return Err(OpenError::env(format!(
            "udp transport: {} is not an address of {} (a UDP socket sends from the kernel's own addresses: add it with `ip addr add`, or use --transport raw, which can use an address of its own)",
            o.local, o.iface
        )));
    }
    let mut cfg = port_config(o, &info, mac, true)?;
    // The kernel resolves neighbours and sends from port 4791, which the ICRC covers.
    cfg.neighbors = roce_cm::NeighborResolution::Kernel;
    cfg.udp_source_port = Some(roce_wire::ROCEV2_UDP_PORT);
    let sock = RoceUdpSocket::open(o.local, info.index, mac)
        .map_err(|e| OpenError::env(format!("udp transport: {e}; --transport raw does not bind the port")))?;
    let dev = match &o.pcap {
        Some(p) => CliDevice::UdpPcap(
            PcapDevice::create(sock, p).map_err(|e| OpenError::env(format!("{}: {e}", p.display())))?,
        ),
        None => CliDevice::Udp(sock),
    };
    Ok(Driver::new(dev, Stack::new(cfg)))
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

/// Destroy `ids` (those still alive) as the kernel does when a process ends: every group
/// they joined is left first (SA Delete and IGMP/MLD leave) and each leave's answer awaited,
/// at most [`GRACE`] in all; then the ids are destroyed (DREQ for a connected id, REJ for a
/// pending one) and the last frames sent. Says on stderr what it does and how it ended when a
/// stop asked for it or a leave went unanswered. Returns whether every leave was answered.
pub fn destroy_ids<D: Device + MulticastFilter>(tool: &str, d: &mut Driver<D>, ids: &[CmId]) -> bool {
    let alive: Vec<CmId> = ids.iter().copied().filter(|id| d.stack.id(*id).is_some()).collect();
    if alive.is_empty() {
        return true;
    }
    let why = shutdown::requested().map(shutdown::reason);
    d.set_stoppable(false);
    let mut leaves: Vec<(CmId, IpAddr)> = d
        .stack
        .members()
        .filter(|(_, m)| alive.contains(&m.id) && m.state != MemberState::Cancelled)
        .map(|(_, m)| (m.id, m.addr))
        .collect();
    leaves.sort();
    leaves.dedup();
    if let Some(why) = &why {
        eprintln!(
            "{tool}: {why}: destroying {} id(s) ({} group(s) to leave, connections to disconnect), \
             waiting up to {:.1} s for the answers; a second signal ends at once",
            alive.len(),
            leaves.len(),
            GRACE.as_secs_f64()
        );
    }
    let t0 = Instant::now();
    let now = d.now();
    leaves.retain(|(id, addr)| d.stack.leave_multicast(now, *id, *addr).is_ok());
    let total = leaves.len();
    let mut failed: Vec<String> = Vec::new();
    let _ = d.run_until(GRACE, |d| {
        d.events.retain(|e| {
            let group = match &e.param {
                EventParam::Multicast { group, .. } => Some(*group),
                _ => None,
            };
            if !matches!(e.kind, EventKind::MulticastLeft | EventKind::MulticastError) {
                return true;
            }
            // The group as the event names it (ibsim's names it by its MGID), else the id's first.
            let i = leaves
                .iter()
                .position(|(id, a)| *id == e.id && group == Some(*a))
                .or_else(|| leaves.iter().position(|(id, _)| *id == e.id));
            let Some(i) = i else { return true };
            match e.kind {
                EventKind::MulticastLeft => {}
                EventKind::MulticastError => {
                    let name = errno_name(e.status).unwrap_or("error");
                    failed.push(format!("{}: {name}", leaves[i].1));
                }
                _ => return true,
            }
            leaves.remove(i);
            false
        });
        leaves.is_empty()
    });
    for (_, addr) in &leaves {
        failed.push(format!("{addr}: no answer within the grace period"));
    }
    let now = d.now();
    for id in &alive {
        let _ = d.stack.destroy_id(now, *id);
    }
    // The DREQs, REJs and the last leaves go out with this turn.
    let _ = d.turn(Duration::ZERO);
    d.set_stoppable(true);
    if failed.is_empty() {
        if why.is_some() {
            eprintln!(
                "{tool}: every id destroyed; {total} leave(s) answered in {:.1} ms",
                t0.elapsed().as_secs_f64() * 1e3
            );
        }
        true
    } else {
        eprintln!(
            "{tool}: every id destroyed; {} of {total} leave(s) not answered ({}) after {:.1} s",
            failed.len(),
            failed.join("; "),
            t0.elapsed().as_secs_f64()
        );
        false
    }
}

/// The end of every network command: the ids destroyed (groups left, connections
/// disconnected), the counters printed, and the exit status: the stop's (128+N, 141) if one
/// was asked, else `code`.
pub fn finish(tool: &str, d: &mut Driver<CliDevice>, ids: &[CmId], verbose: bool, code: u8) -> u8 {
    destroy_ids(tool, d, ids);
    let fault = release_faults(d);
    let raw = d.dev.raw_stats();
    let mut counters = d.stack.counters().clone();
    if let Some((tx, _)) = fault {
        // `tx` counts what left: a frame the fault layer dropped never did, a copy did.
        counters.tx_frames = frames_sent(counters.tx_frames, &tx);
    }
    print_counters_raw(&counters, d.send_errors, raw, verbose);
    if let Some(u) = d.dev.udp_stats() {
        crate::plumbing::out::print_udp_counters(&u, verbose);
    }
    if let Some(text) = fault_text(d) {
        crate::plumbing::out::line(format_args!("{text}"));
    }
    shutdown::requested().unwrap_or(code)
}

/// `--fault`: the frames still held back go out now (late, as reordered frames do), so
/// nothing is left unsent at exit; returns what the fault layer did (sent, received).
pub fn release_faults(d: &mut Driver<CliDevice>) -> Option<(FaultStats, FaultStats)> {
    if let CliDevice::Fault(f) = &mut d.dev {
        if f.release_all().is_err() {
            d.send_errors += 1;
        }
    }
    d.dev.fault_stats()
}

/// The `--fault` counts, a line per direction faulted: `fault sent: dropped N, reordered N,
/// duplicated N`; `None` without `--fault`.
pub fn fault_text(d: &Driver<CliDevice>) -> Option<String> {
    let CliDevice::Fault(f) = &d.dev else { return None };
    Some(fault_lines((f.tx_config(), f.tx_stats()), (f.rx_config(), f.rx_stats())))
}

/// The congestion-control line of a port whose RC engine runs DCQCN (None when it is off):
/// `congestion (dcqcn): CE received N, CNPs sent N (N suppressed by the interval), CNPs
/// received N, rate cuts N, increases N fast recovery / N additive / N hyper`.
pub fn cc_text(d: &Driver<CliDevice>) -> Option<String> {
    let rc = d.stack.rc();
    rc.congestion().params()?;
    let c = rc.counters().cc;
    Some(format!(
        "  congestion (dcqcn): CE received {}, CNPs sent {} ({} suppressed by the interval), CNPs received {}, \
         rate cuts {}, increases {} fast recovery / {} additive / {} hyper",
        c.ce_received,
        c.cnp_sent,
        c.cnp_suppressed_by_interval,
        c.cnp_received,
        c.rate_cuts,
        c.rate_increase_fast_recovery,
        c.rate_increase_additive,
        c.rate_increase_hyper
    ))
}

/// The lines of [`fault_text`] for what was configured and done each way (sent, received):
/// a direction with faults configured has its line; with none at all, the sent one.
fn fault_lines(tx: (&FaultConfig, FaultStats), rx: (&FaultConfig, FaultStats)) -> String {
    let none = FaultConfig::default();
    let line = |dir: &str, s: FaultStats| {
        let ce = if s.ce_marked > 0 { format!(", CE marked {}", s.ce_marked) } else { String::new() };
        format!("  fault {dir}: dropped {}, reordered {}, duplicated {}{ce}", s.dropped, s.delayed, s.duplicated)
    };
    let mut lines = Vec::new();
    if tx.0 != &none || rx.0 == &none {
        lines.push(line("sent", tx.1));
    }
    if rx.0 != &none {
        lines.push(line("received", rx.1));
    }
    lines.join("\n")
}

/// The frames that left through the fault layer, for the `tx` count: the stack's `tx_frames`
/// less those dropped, plus the copies.
fn frames_sent(tx_frames: u64, tx: &FaultStats) -> u64 {
    tx_frames.saturating_sub(tx.dropped) + tx.duplicated
}

/// [`finish`] for the tools with RC QPs: with `verbose`, the RC engine's counters after the
/// others.
pub fn finish_rc(tool: &str, d: &mut Driver<CliDevice>, ids: &[CmId], verbose: bool, code: u8) -> u8 {
    let code = finish(tool, d, ids, verbose, code);
    if verbose {
        crate::plumbing::out::line(format_args!("{:?}", d.stack.rc().counters()));
    }
    code
}

#[cfg(test)]
mod fault_tests {
    use super::*;

    #[test]
    fn fault_counts_name_each_direction_faulted() {
        let on = FaultConfig { drop: 0.1, ..FaultConfig::default() };
        let off = FaultConfig::default();
        let s = FaultStats { dropped: 3, delayed: 2, duplicated: 1, passed: 40, ..FaultStats::default() };
        let z = FaultStats::default();
        assert_eq!(fault_lines((&on, s), (&off, z)), "  fault sent: dropped 3, reordered 2, duplicated 1");
        assert_eq!(
            fault_lines((&on, s), (&on, s)),
            "  fault sent: dropped 3, reordered 2, duplicated 1\n  fault received: dropped 3, reordered 2, duplicated 1"
        );
        assert_eq!(fault_lines((&off, z), (&on, s)), "  fault received: dropped 3, reordered 2, duplicated 1");
        assert_eq!(fault_lines((&off, z), (&off, z)), "  fault sent: dropped 0, reordered 0, duplicated 0");
        // A dropped frame never left; a copy did.
        assert_eq!(frames_sent(100, &s), 98);
        assert_eq!(frames_sent(2, &FaultStats { dropped: 5, ..z }), 0);
    }

    /// The fault layer sits outside the device: what it drops never reaches it.
    #[test]
    fn a_fault_wrapped_device_counts_its_drops() {
        let spec = crate::plumbing::options::fault_spec("drop=1,seed=3").unwrap();
        let mut dev = CliDevice::NoFrames(NoFrames).with_fault(std::slice::from_ref(&spec));
        for _ in 0..5 {
            dev.send(&[0u8; 60]).unwrap();
        }
        let (tx, rx) = dev.fault_stats().unwrap();
        assert_eq!((tx.dropped, tx.passed, rx.dropped), (5, 0, 0));
        assert!(dev.raw_stats().is_none() && dev.udp_stats().is_none());
    }
}
