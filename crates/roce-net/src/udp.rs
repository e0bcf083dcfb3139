//! A kernel UDP socket on the RoCEv2 port: the [`Device`] that needs no privilege.
//!
//! The engine keeps speaking Ethernet frames. On send the device checks that a frame is IPv4
//! or IPv6 UDP from the stack's MAC, address and port 4791 to port 4791, and hands the UDP
//! payload (BTH … ICRC) to `sendmsg(2)`: the kernel writes the IP and UDP headers, resolves
//! the neighbour and routes. On receive it hands each unicast datagram whose ICRC it verified
//! to the engine where `recvmmsg` put it ([`Device::recv_in_place`]), or rebuilds around it
//! the Ethernet, IP and UDP headers the engine's demux expects, so that the engine's ICRC
//! check holds ([`Device::recv_batch`], and what follows a datagram it could not verify).
//! The frames whose job the kernel does here (ARP, ND, IGMP, MLD) are not sent, and counted; frames the
//! socket cannot send (another source, a raw frame) are refused, and counted. Multicast groups
//! are joined with IP_ADD_MEMBERSHIP / IPV6_JOIN_GROUP as the engine joins them
//! ([`RoceUdpSocket::set_ip_groups`]), so the kernel sends the reports. spec/net.md ("The udp
//! transport") has what the kernel writes and why the ICRC still holds.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::Range;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use roce_cm::KERNEL_NEIGHBOR_MAC;
use roce_wire::icrc;
use roce_wire::ROCEV2_UDP_PORT;

use crate::device::{Device, RecvBatch};
use crate::gso;
use crate::raw::set_int;

/// Why an engine frame was not sent on the udp transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NotSent {
    /// An ARP frame: the kernel resolves neighbours on this transport.
    Arp,
    /// IPv6 neighbour discovery: the same.
    NeighborDiscovery,
    /// An IGMP report or leave: the kernel sends them for the groups the socket joined.
    Igmp,
    /// An MLD report or done: the same for IPv6.
    Mld,
    /// From another MAC than the stack's.
    ForeignSourceMac,
    /// From another IP address than the socket's.
    ForeignSourceAddress,
    /// From another UDP port than 4791, or to another.
    ForeignPort,
    /// Not IPv4/IPv6 UDP (a raw frame), or malformed.
    NotRoceV2,
    /// The kernel's send buffer was full (EAGAIN, ENOBUFS).
    SendBufferFull,
    /// Longer than the path MTU (EMSGSIZE: the socket never fragments).
    TooLong,
}

impl NotSent {
    /// Every reason, in counter order.
    pub const ALL: [NotSent; 10] = [
        NotSent::Arp,
        NotSent::NeighborDiscovery,
        NotSent::Igmp,
        NotSent::Mld,
        NotSent::ForeignSourceMac,
        NotSent::ForeignSourceAddress,
        NotSent::ForeignPort,
        NotSent::NotRoceV2,
        NotSent::SendBufferFull,
        NotSent::TooLong,
    ];

    /// The counter's name.
    pub fn name(self) -> &'static str {
        match self {
            NotSent::Arp => "arp (the kernel resolves)",
            NotSent::NeighborDiscovery => "neighbour discovery (the kernel resolves)",
            NotSent::Igmp => "igmp (the kernel reports)",
            NotSent::Mld => "mld (the kernel reports)",
            NotSent::ForeignSourceMac => "foreign source mac",
            NotSent::ForeignSourceAddress => "foreign source address",
            NotSent::ForeignPort => "udp port not 4791",
            NotSent::NotRoceV2 => "not a RoCEv2 frame",
            NotSent::SendBufferFull => "send buffer full",
            NotSent::TooLong => "longer than the path MTU",
        }
    }

    /// Whether the kernel does this frame's job on this transport (the frame is not needed,
    /// not lost): the device takes it and counts it.
    pub fn done_by_kernel(self) -> bool {
        matches!(self, NotSent::Arp | NotSent::NeighborDiscovery | NotSent::Igmp | NotSent::Mld)
    }

    fn index(self) -> usize {
        NotSent::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

/// What a [`RoceUdpSocket`] counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdpStats {
    /// Datagrams the kernel took.
    pub sent: u64,
    /// Datagrams received and framed for the engine.
    pub received: u64,
    /// Datagrams longer than the receive buffer: consumed, dropped, counted here.
    pub truncated: u64,
    /// IPv4 datagrams whose IP Identification was not 0 and was taken from the ICRC (a
    /// kernel rxe sends `__ip_select_ident`'s; see [`icrc::solve_ipv4_identification`]).
    pub ipv4_id_from_icrc: u64,
    /// What the kernel dropped because the receive buffer was full (SO_RXQ_OVFL: the socket's
    /// drop count, stamped on each datagram as it is queued, so drops show with the next one
    /// received; a GRO-coalesced run dropped counts once).
    pub receive_queue_overflow: u64,
    /// Messages the kernel took (`sendmmsg` entries): a UDP_SEGMENT message carries up to 64
    /// datagrams, so `sent / send_messages` is the datagrams per message.
    pub send_messages: u64,
    /// `sendmmsg` system calls that took at least one message: `send_messages / send_calls`
    /// is the messages per system call.
    pub send_calls: u64,
    /// Reads from the unicast socket: a GRO-coalesced read carries several datagrams, so
    /// `received / reads` is about the datagrams per read.
    pub reads: u64,
    /// Whether the kernel refused UDP_SEGMENT (EIO: no checksum offload on the route) and
    /// datagrams now go out one per message.
    pub gso_disabled: bool,
    not_sent: [u64; NotSent::ALL.len()],
}

impl UdpStats {
    /// Engine frames not sent for `reason`.
    pub fn not_sent(&self, reason: NotSent) -> u64 {
        self.not_sent[reason.index()]
    }

    /// Every reason with its count.
    pub fn not_sent_all(&self) -> impl Iterator<Item = (NotSent, u64)> + '_ {
        NotSent::ALL.iter().map(|r| (*r, self.not_sent(*r)))
    }
}

/// What the kernel is asked to send for one engine frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    /// The destination address (port 4791).
    pub dst: IpAddr,
    /// IPv4 TOS or IPv6 traffic class (passed as IP_TOS / IPV6_TCLASS).
    pub traffic_class: u8,
    /// TTL or hop limit (passed as IP_TTL / IPV6_HOPLIMIT; 0: the socket's default).
    pub hop_limit: u8,
    /// Where the UDP payload (BTH … ICRC) sits in the frame.
    pub payload: Range<usize>,
    /// Whether it must go alone, never in a GSO run (an RC FLUSH: see `vnet::is_rc_flush`).
    pub alone: bool,
}

impl gso::RunMember for Datagram {
    fn payload_len(&self) -> usize {
        self.payload.len()
    }
    fn joins(&self, first: &Self) -> bool {
        !self.alone
            && !first.alone
            && self.dst == first.dst
            && self.traffic_class == first.traffic_class
            && self.hop_limit == first.hop_limit
    }
}

impl Datagram {
    /// A placeholder (for arrays filled as frames are classified).
    const EMPTY: Datagram = Datagram {
        dst: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        traffic_class: 0,
        hop_limit: 0,
        payload: 0..0,
        alone: false,
    };
}

const ETH_LEN: usize = 14;
const UDP_LEN: usize = 8;

/// Where in a received frame the datagram goes: after Ethernet, IP and UDP headers.
pub fn header_len(ipv4: bool) -> usize {
    ETH_LEN + if ipv4 { 20 } else { 40 } + UDP_LEN
}

/// What the udp transport makes of an engine frame from `mac` and `local`: the datagram to
/// send, or why not.
pub fn classify(frame: &[u8], local: IpAddr, mac: [u8; 6]) -> Result<Datagram, NotSent> {
    if frame.len() < ETH_LEN {
        return Err(NotSent::NotRoceV2);
    }
    let ip = &frame[ETH_LEN..];
    let (src, dst, tc, hop, udp_at, ip_end) = match u16::from_be_bytes([frame[12], frame[13]]) {
        0x0806 => return Err(NotSent::Arp),
        0x0800 => {
            if ip.len() < 20 || ip[0] >> 4 != 4 {
                return Err(NotSent::NotRoceV2);
            }
            let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            match ip[9] {
                2 => return Err(NotSent::Igmp),
                17 if ip[0] & 0x0f == 5 && total <= ip.len() => {}
                _ => return Err(NotSent::NotRoceV2),
            }
            let src = IpAddr::from(<[u8; 4]>::try_from(&ip[12..16]).unwrap_or_default());
            let dst = IpAddr::from(<[u8; 4]>::try_from(&ip[16..20]).unwrap_or_default());
            (src, dst, ip[1], ip[8], 20, total)
        }
        0x86dd => {
            if ip.len() < 40 || ip[0] >> 4 != 6 {
                return Err(NotSent::NotRoceV2);
            }
            // ICMPv6 (ND, MLD), behind MLD's hop-by-hop Router Alert or not.
            let icmp_type = match ip[6] {
                58 => ip.get(40).copied(),
                0 if ip.get(40) == Some(&58) => {
                    ip.get(41).and_then(|l| ip.get(40 + (usize::from(*l) + 1) * 8)).copied()
                }
                _ => None,
            };
            match icmp_type {
                Some(133..=137) => return Err(NotSent::NeighborDiscovery),
                Some(130..=132 | 143) => return Err(NotSent::Mld),
                _ if ip[6] != 17 => return Err(NotSent::NotRoceV2),
                _ => {}
            }
            let total = 40 + usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            if total > ip.len() {
                return Err(NotSent::NotRoceV2);
            }
            let src = IpAddr::from(<[u8; 16]>::try_from(&ip[8..24]).unwrap_or_default());
            let dst = IpAddr::from(<[u8; 16]>::try_from(&ip[24..40]).unwrap_or_default());
            (src, dst, (ip[0] << 4) | (ip[1] >> 4), ip[7], 40, total)
        }
        _ => return Err(NotSent::NotRoceV2),
    };
    if frame[6..12] != mac {
        return Err(NotSent::ForeignSourceMac);
    }
    if src != local {
        return Err(NotSent::ForeignSourceAddress);
    }
    let udp = ip.get(udp_at..ip_end).filter(|u| u.len() >= UDP_LEN).ok_or(NotSent::NotRoceV2)?;
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if !(UDP_LEN..=udp.len()).contains(&udp_len) {
        return Err(NotSent::NotRoceV2);
    }
    if u16::from_be_bytes([udp[0], udp[1]]) != ROCEV2_UDP_PORT
        || u16::from_be_bytes([udp[2], udp[3]]) != ROCEV2_UDP_PORT
    {
        return Err(NotSent::ForeignPort);
    }
    let at = ETH_LEN + udp_at + UDP_LEN;
    let alone = crate::vnet::is_rc_flush(frame.get(at).copied());
    Ok(Datagram { dst, traffic_class: tc, hop_limit: hop, payload: at..ETH_LEN + udp_at + udp_len, alone })
}

/// How a received datagram arrived (what the socket reports of its IP and UDP headers).
pub use roce_wire::datagram::Arrival;

/// Write the Ethernet, IP and UDP headers of a received datagram of `len` bytes that sits at
/// `buf[header_len(..)..]`, as the sender's kernel wrote them on the wire (IPv4: DF, ID
/// `id_hint`; IPv6: flow label 0; UDP checksum 0 — the ICRC masks what is unknown here, and an
/// IPv4 ID the hint does not match is taken from the ICRC). The hint is 0 for a datagram read
/// alone (an unconnected DF socket's ID) and its index for the `i`th segment of a coalesced
/// read (a GSO send's segments count up from 0). `mac` is the stack's.
pub fn frame_datagram(buf: &mut [u8], len: usize, arrival: &Arrival, mac: [u8; 6], id_hint: u16) -> Framed {
    let ipv4 = arrival.dst.is_ipv4();
    let hdr = header_len(ipv4);
    // (`buf` holds the datagram behind `hdr` bytes: the headers fit.)
    let _ = roce_wire::datagram::write_frame_headers(buf, len, arrival, mac, KERNEL_NEIGHBOR_MAC, id_hint);
    let end = hdr + len;
    let (mut id_from_icrc, mut icrc_verified) = (false, false);
    if ipv4 && len >= roce_wire::bth::BTH_LEN + icrc::ICRC_LEN {
        let wire = icrc::from_wire([buf[end - 4], buf[end - 3], buf[end - 2], buf[end - 1]]);
        let packet = &buf[ETH_LEN..end - icrc::ICRC_LEN];
        match icrc::compute(packet, icrc::IpVersion::V4, 20) {
            Ok(c) if c == wire => {
                id_from_icrc = id_hint != 0;
                // Computed over the frame as it now stands: the engine need not compute it
                // again.
                icrc_verified = true;
            }
            // (An ID solved from the ICRC: the engine checks the result itself.)
            Ok(_) => {
                if let Ok(Some(id)) = icrc::solve_ipv4_identification(packet, wire) {
                    buf[ETH_LEN + 4..ETH_LEN + 6].copy_from_slice(&id.to_be_bytes());
                    id_from_icrc = id != 0;
                    let sum = roce_wire::frame::ipv4_checksum(&buf[ETH_LEN..ETH_LEN + 20]);
                    buf[ETH_LEN + 10..ETH_LEN + 12].copy_from_slice(&sum.to_be_bytes());
                }
            }
            Err(_) => {}
        }
    }
    Framed { len: end, id_from_icrc, icrc_verified }
}

/// A datagram framed by [`frame_datagram`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framed {
    /// The frame's length.
    pub len: usize,
    /// Whether its IPv4 ID is not 0 and came from the ICRC (the hint or a solution).
    pub id_from_icrc: bool,
    /// Whether its ICRC was computed over the frame as written and found right (IPv4 with the
    /// hinted ID): the engine may take it as verified (`Stack::handle_frame_icrc_verified`).
    /// False for IPv6 (not computed here), for an ID solved from the ICRC and for a bad ICRC:
    /// the engine computes it.
    pub icrc_verified: bool,
}

fn v6(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

/// UDP_NO_CHECK6_RX (linux/udp.h): accept a zero IPv6 UDP checksum, which rxe sends.
const UDP_NO_CHECK6_RX: libc::c_int = 102;
/// IPV6_AUTOFLOWLABEL (linux/in6.h).
const IPV6_AUTOFLOWLABEL: libc::c_int = 70;

fn os_err(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn set_struct<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: &T, what: &str) -> io::Result<()> {
    // SAFETY: the option value points at a live T of the given size.
    let r = unsafe {
        libc::setsockopt(fd, level, name, value as *const T as *const libc::c_void, std::mem::size_of::<T>() as u32)
    };
    if r < 0 {
        return Err(os_err(what));
    }
    Ok(())
}

/// A socket address for `sendmsg`/`bind`.
fn sockaddr(addr: IpAddr, port: u16, scope: u32) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data; zeroed is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match addr {
        IpAddr::V4(a) => {
            // SAFETY: sockaddr_storage is large enough and aligned for sockaddr_in.
            let sin = unsafe { &mut *(&mut ss as *mut libc::sockaddr_storage as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = port.to_be();
            sin.sin_addr = libc::in_addr { s_addr: u32::from_ne_bytes(a.octets()) };
            (ss, std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t)
        }
        IpAddr::V6(a) => {
            // SAFETY: sockaddr_storage is large enough and aligned for sockaddr_in6.
            let sin6 = unsafe { &mut *(&mut ss as *mut libc::sockaddr_storage as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = port.to_be();
            sin6.sin6_addr = libc::in6_addr { s6_addr: a.octets() };
            sin6.sin6_scope_id = if needs_scope(&a) { scope } else { 0 };
            (ss, std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t)
        }
    }
}

fn needs_scope(a: &Ipv6Addr) -> bool {
    (a.segments()[0] & 0xffc0) == 0xfe80 || (a.is_multicast() && a.segments()[0] & 0x000f <= 2)
}

fn from_sockaddr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(ss.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let sin = unsafe { &*(ss as *const libc::sockaddr_storage as *const libc::sockaddr_in) };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::new(ip.into(), u16::from_be(sin.sin_port)))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let sin6 = unsafe { &*(ss as *const libc::sockaddr_storage as *const libc::sockaddr_in6) };
            Some(SocketAddr::new(Ipv6Addr::from(sin6.sin6_addr.s6_addr).into(), u16::from_be(sin6.sin6_port)))
        }
        _ => None,
    }
}

/// A non-blocking UDP socket of `addr`'s family bound to `addr`:4791, receiving TOS/TTL (or
/// traffic class/hop limit), never fragmenting (DF: the kernel then writes IPv4 ID 0), and, for
/// IPv6, accepting rxe's zero checksums. The unicast socket takes no SO_REUSEADDR: a port
/// already taken is EADDRINUSE. A group's socket (`shared`) does: every process of the host
/// that joins the group binds group:4791 and each gets a copy of its datagrams, as two kernel
/// RDMA programs joined to one group both receive.
fn bound_socket(addr: IpAddr, ifindex: u32, shared: bool) -> io::Result<OwnedFd> {
    let family = if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(os_err("socket(SOCK_DGRAM)"));
    }
    // SAFETY: fd is a fresh, valid descriptor we own from here on.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let raw = fd.as_raw_fd();
    if addr.is_ipv4() {
        set_int(raw, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, libc::IP_PMTUDISC_DO, "IP_MTU_DISCOVER")?;
        set_int(raw, libc::IPPROTO_IP, libc::IP_RECVTOS, 1, "IP_RECVTOS")?;
        set_int(raw, libc::IPPROTO_IP, libc::IP_RECVTTL, 1, "IP_RECVTTL")?;
    } else {
        set_int(raw, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1, "IPV6_V6ONLY")?;
        set_int(raw, libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER, libc::IPV6_PMTUDISC_DO, "IPV6_MTU_DISCOVER")?;
        set_int(raw, libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS, 1, "IPV6_RECVTCLASS")?;
        set_int(raw, libc::IPPROTO_IPV6, libc::IPV6_RECVHOPLIMIT, 1, "IPV6_RECVHOPLIMIT")?;
        set_int(raw, libc::IPPROTO_UDP, UDP_NO_CHECK6_RX, 1, "UDP_NO_CHECK6_RX")?;
        // Flow label 0, as rxe sends (the ICRC masks it either way); older kernels lack it.
        let _ = set_int(raw, libc::IPPROTO_IPV6, IPV6_AUTOFLOWLABEL, 0, "IPV6_AUTOFLOWLABEL");
    }
    if shared {
        set_int(raw, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1, "SO_REUSEADDR")?;
    }
    let (sa, len) = sockaddr(addr, ROCEV2_UDP_PORT, ifindex);
    // SAFETY: the pointer and length describe `sa`, alive across the call.
    let r = unsafe { libc::bind(raw, &sa as *const libc::sockaddr_storage as *const libc::sockaddr, len) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EADDRINUSE) => io::Error::new(
                io::ErrorKind::AddrInUse,
                format!(
                    "UDP port {ROCEV2_UDP_PORT} on {addr} is already taken (EADDRINUSE): another RoCEv2 stack \
                     binds it — a kernel rxe on this host (`rdma link` shows it) takes it for every address"
                ),
            ),
            Some(libc::EADDRNOTAVAIL) => io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                format!(
                    "{addr} is not an address of this host (EADDRNOTAVAIL): a UDP socket sends from the kernel's \
                     own addresses (add it with `ip addr add`); a raw socket can use an address of its own"
                ),
            ),
            _ => io::Error::new(e.kind(), format!("bind {addr} port {ROCEV2_UDP_PORT}: {e}")),
        });
    }
    Ok(fd)
}

/// The kernel UDP socket on port 4791 as a [`Device`] (the "udp transport"): one socket bound
/// to the stack's address for unicast, one per joined multicast group bound to the group's
/// address (a socket bound to a unicast address receives no multicast), all behind one epoll
/// descriptor for the driver's `poll`.
#[derive(Debug)]
pub struct RoceUdpSocket {
    unicast: OwnedFd,
    groups: BTreeMap<IpAddr, OwnedFd>,
    epoll: OwnedFd,
    local: IpAddr,
    ifindex: u32,
    mac: [u8; 6],
    stats: UdpStats,
    /// Send runs of datagrams with UDP_SEGMENT (until the kernel refuses it).
    gso: bool,
    /// Segments' ICRCs corrected for the IPv4 IDs the kernel gives them.
    id_correction: gso::IdCorrection,
    rx: Box<Reads>,
    /// The ICRC of datagrams handed over in place: the headers' hash kept across a read.
    rx_icrc: roce_wire::datagram::DatagramIcrc,
}

impl RoceUdpSocket {
    /// Bind `local`:4791 for a stack whose MAC is `mac`, on the interface `ifindex` (multicast
    /// is sent and joined there; a link-local IPv6 address is scoped to it). An address of
    /// another host is `AddrNotAvailable`, a port already taken `AddrInUse`, each saying why.
    pub fn open(local: IpAddr, ifindex: u32, mac: [u8; 6]) -> io::Result<RoceUdpSocket> {
        let unicast = bound_socket(local, ifindex, false)?;
        let raw = unicast.as_raw_fd();
        // Multicast leaves on the stack's interface and does not loop back to us (a raw
        // socket does not see its own frames either).
        match local {
            IpAddr::V4(a) => {
                let mreq = libc::ip_mreqn {
                    imr_multiaddr: libc::in_addr { s_addr: 0 },
                    imr_address: libc::in_addr { s_addr: u32::from_ne_bytes(a.octets()) },
                    imr_ifindex: ifindex as libc::c_int,
                };
                set_struct(raw, libc::IPPROTO_IP, libc::IP_MULTICAST_IF, &mreq, "IP_MULTICAST_IF")?;
                set_int(raw, libc::IPPROTO_IP, libc::IP_MULTICAST_LOOP, 0, "IP_MULTICAST_LOOP")?;
            }
            IpAddr::V6(_) => {
                set_int(raw, libc::IPPROTO_IPV6, libc::IPV6_MULTICAST_IF, ifindex as libc::c_int, "IPV6_MULTICAST_IF")?;
                set_int(raw, libc::IPPROTO_IPV6, libc::IPV6_MULTICAST_LOOP, 0, "IPV6_MULTICAST_LOOP")?;
            }
        }
        // SAFETY: plain epoll_create1(2); checked before use.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(os_err("epoll_create1"));
        }
        // SAFETY: a fresh descriptor we own from here on.
        let epoll = unsafe { OwnedFd::from_raw_fd(ep) };
        // Receive runs of datagrams coalesced (UDP_GRO: one read, its segment size in a cmsg;
        // a kernel without it delivers them one by one), with the socket's drop count
        // (SO_RXQ_OVFL), into buffers sized for a window of packets (capped by
        // net.core.rmem_max/wmem_max without CAP_NET_ADMIN).
        let _ = set_int(raw, libc::SOL_UDP, UDP_GRO, 1, "UDP_GRO");
        set_int(raw, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1, "SO_RXQ_OVFL")?;
        let _ = crate::raw::set_buffer_sizes(raw, DEFAULT_RCVBUF, DEFAULT_SNDBUF);
        let s = RoceUdpSocket {
            unicast,
            groups: BTreeMap::new(),
            epoll,
            local,
            ifindex,
            mac,
            stats: UdpStats::default(),
            gso: true,
            id_correction: gso::IdCorrection::default(),
            rx: Box::new(Reads::new()),
            rx_icrc: Default::default(),
        };
        s.watch(raw, true)?;
        Ok(s)
    }

    fn watch(&self, fd: RawFd, add: bool) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: fd as u64 };
        let op = if add { libc::EPOLL_CTL_ADD } else { libc::EPOLL_CTL_DEL };
        // SAFETY: both descriptors are live; `ev` outlives the call.
        if unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), op, fd, &mut ev) } < 0 {
            return Err(os_err("epoll_ctl"));
        }
        Ok(())
    }

    /// Set the kernel's receive and send buffer sizes of the unicast socket (bytes, up to 256
    /// MiB each): beyond `net.core.rmem_max`/`wmem_max` with CAP_NET_ADMIN (SO_RCVBUFFORCE),
    /// else capped by them. Size them for a window of packets: a burst beyond the receive
    /// buffer is dropped by the kernel (counted: [`UdpStats::receive_queue_overflow`]).
    pub fn set_buffer_sizes(&mut self, rcv: usize, snd: usize) -> io::Result<()> {
        crate::raw::set_buffer_sizes(self.unicast.as_raw_fd(), rcv, snd)
    }

    /// The counters.
    pub fn stats(&self) -> UdpStats {
        self.stats
    }

    /// The address the socket is bound to.
    pub fn local(&self) -> IpAddr {
        self.local
    }

    /// The groups joined now.
    pub fn joined(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.groups.keys().copied()
    }

    /// Be a member of exactly these IP multicast groups: each new one joined on a socket
    /// bound to it (IP_ADD_MEMBERSHIP / IPV6_JOIN_GROUP: the kernel sends the IGMP/MLD
    /// report), each gone one dropped (IP_DROP_MEMBERSHIP / IPV6_LEAVE_GROUP: the leave).
    /// A group of the other family than the socket's is an `InvalidInput` error.
    pub fn set_ip_groups(&mut self, groups: &BTreeSet<IpAddr>) -> io::Result<()> {
        let gone: Vec<IpAddr> = self.groups.keys().filter(|g| !groups.contains(g)).copied().collect();
        for g in gone {
            if let Some(fd) = self.groups.remove(&g) {
                let _ = self.watch(fd.as_raw_fd(), false);
                self.membership(fd.as_raw_fd(), g, false)?;
            }
        }
        for g in groups {
            if self.groups.contains_key(g) {
                continue;
            }
            if g.is_ipv4() != self.local.is_ipv4() || !g.is_multicast() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("cannot join {g} on a socket bound to {}: not a multicast group of its family", self.local),
                ));
            }
            let fd = bound_socket(*g, self.ifindex, true)?;
            self.membership(fd.as_raw_fd(), *g, true)?;
            self.watch(fd.as_raw_fd(), true)?;
            self.groups.insert(*g, fd);
        }
        Ok(())
    }

    fn membership(&self, fd: RawFd, group: IpAddr, join: bool) -> io::Result<()> {
        match (group, self.local) {
            (IpAddr::V4(g), IpAddr::V4(a)) => {
                let mreq = libc::ip_mreqn {
                    imr_multiaddr: libc::in_addr { s_addr: u32::from_ne_bytes(g.octets()) },
                    imr_address: libc::in_addr { s_addr: u32::from_ne_bytes(a.octets()) },
                    imr_ifindex: self.ifindex as libc::c_int,
                };
                let (opt, what) = if join {
                    (libc::IP_ADD_MEMBERSHIP, "IP_ADD_MEMBERSHIP")
                } else {
                    (libc::IP_DROP_MEMBERSHIP, "IP_DROP_MEMBERSHIP")
                };
                set_struct(fd, libc::IPPROTO_IP, opt, &mreq, what)
            }
            (g, _) => {
                let mreq = libc::ipv6_mreq {
                    ipv6mr_multiaddr: libc::in6_addr { s6_addr: v6(g).octets() },
                    ipv6mr_interface: self.ifindex,
                };
                let (opt, what) = if join {
                    (libc::IPV6_ADD_MEMBERSHIP, "IPV6_JOIN_GROUP")
                } else {
                    (libc::IPV6_DROP_MEMBERSHIP, "IPV6_LEAVE_GROUP")
                };
                set_struct(fd, libc::IPPROTO_IPV6, opt, &mreq, what)
            }
        }
    }

    fn not_sent(&mut self, reason: NotSent) -> io::Result<()> {
        self.stats.not_sent[reason.index()] += 1;
        if reason.done_by_kernel() {
            return Ok(());
        }
        Err(io::Error::new(
            match reason {
                NotSent::SendBufferFull => io::ErrorKind::WouldBlock,
                NotSent::TooLong => io::ErrorKind::InvalidInput,
                _ => io::ErrorKind::Unsupported,
            },
            match reason {
                NotSent::SendBufferFull | NotSent::TooLong => format!("udp transport: {}", reason.name()),
                _ => format!(
                    "the udp transport sends only RoCEv2 datagrams from {} port {ROCEV2_UDP_PORT}: not sent ({}); \
                     the raw transport can send it",
                    self.local,
                    reason.name()
                ),
            },
        ))
    }

    /// Receive one datagram from `fd` (a group's socket, bound to `dst`: no GRO) into `buf` as a
    /// frame.
    fn recv_from(&mut self, fd: RawFd, dst: IpAddr, buf: &mut [u8]) -> io::Result<Option<Framed>> {
        let hdr = header_len(dst.is_ipv4());
        if buf.len() < hdr {
            return Err(crate::device::too_small(hdr, buf.len()));
        }
        loop {
            let room = &mut buf[hdr..];
            let mut iov = libc::iovec { iov_base: room.as_mut_ptr() as *mut libc::c_void, iov_len: room.len() };
            // SAFETY: plain data.
            let mut from: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
            let mut control = [0u64; CONTROL_WORDS];
            // SAFETY: msghdr is plain data; zeroed is valid.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_name = &mut from as *mut libc::sockaddr_storage as *mut libc::c_void;
            msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = std::mem::size_of_val(&control);
            // SAFETY: every pointer in `msg` points at live buffers of the lengths given.
            let r = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_TRUNC | libc::MSG_DONTWAIT) };
            if r < 0 {
                let e = io::Error::last_os_error();
                return match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
                    _ => Err(io::Error::new(e.kind(), format!("recvmsg: {e}"))),
                };
            }
            let len = r as usize;
            if len > room.len() || msg.msg_flags & libc::MSG_TRUNC != 0 {
                self.stats.truncated += 1; // consumed already: dropped, counted
                continue;
            }
            let Some(src) = from_sockaddr(&from) else { continue };
            let c = ReadControl::parse(&msg);
            self.note_overflow(c.overflow);
            let arrival = Arrival { src, dst, traffic_class: c.traffic_class, hop_limit: c.hop_limit };
            let framed = frame_datagram(buf, len, &arrival, self.mac, 0);
            self.stats.received += 1;
            self.stats.ipv4_id_from_icrc += u64::from(framed.id_from_icrc);
            return Ok(Some(framed));
        }
    }

    fn note_overflow(&mut self, dropped: Option<u32>) {
        if let Some(d) = dropped {
            self.stats.receive_queue_overflow = u64::from(d);
        }
    }

    /// The next datagram of the unicast socket into `out` as a frame: the next segment of the
    /// reads already taken, or new reads (one `recvmmsg`, each read a GRO-coalesced run of
    /// datagrams). A frame longer than `out` is an `InvalidInput` error and stays next.
    fn next_unicast(&mut self, out: &mut [u8]) -> io::Result<Option<Framed>> {
        if self.rx.is_drained() && self.fill_reads()? == 0 {
            return Ok(None);
        }
        let hdr = header_len(self.local.is_ipv4());
        let Some((range, arrival, index)) = self.rx.peek() else { return Ok(None) };
        if out.len() < hdr + range.len() {
            return Err(crate::device::too_small(hdr + range.len(), out.len()));
        }
        let len = range.len();
        out[hdr..hdr + len].copy_from_slice(&self.rx.buf[range]);
        self.rx.advance();
        // Segment `index` of a GSO send carries ID `index` (inet_gso_segment counts up).
        let framed = frame_datagram(out, len, &arrival, self.mac, index as u16);
        self.stats.received += 1;
        self.stats.ipv4_id_from_icrc += u64::from(framed.id_from_icrc);
        Ok(Some(framed))
    }

    /// Read what the unicast socket holds, up to [`RX_READS`] reads in one `recvmmsg`: returns
    /// how many reads (0: nothing waiting).
    fn fill_reads(&mut self) -> io::Result<usize> {
        let rx = &mut self.rx;
        rx.clear();
        // SAFETY: plain data; zeroed is valid for each.
        let mut from: [libc::sockaddr_storage; RX_READS] = unsafe { std::mem::zeroed() };
        let mut control = [[0u64; CONTROL_WORDS]; RX_READS];
        let mut iovs: [libc::iovec; RX_READS] = unsafe { std::mem::zeroed() };
        let mut msgs: [libc::mmsghdr; RX_READS] = unsafe { std::mem::zeroed() };
        for (i, room) in rx.buf.chunks_exact_mut(RX_READ_LEN).enumerate() {
            iovs[i] = libc::iovec { iov_base: room.as_mut_ptr() as *mut libc::c_void, iov_len: RX_READ_LEN };
            let h = &mut msgs[i].msg_hdr;
            h.msg_name = &mut from[i] as *mut libc::sockaddr_storage as *mut libc::c_void;
            h.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_iov = &mut iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = control[i].as_mut_ptr() as *mut libc::c_void;
            h.msg_controllen = std::mem::size_of_val(&control[i]);
        }
        loop {
            // SAFETY: every message points at live buffers of the lengths given.
            let r = unsafe {
                libc::recvmmsg(
                    self.unicast.as_raw_fd(),
                    msgs.as_mut_ptr(),
                    RX_READS as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                return match e.raw_os_error() {
                    Some(libc::EAGAIN) => Ok(0),
                    Some(libc::EINTR) => continue,
                    _ => Err(io::Error::new(e.kind(), format!("recvmmsg: {e}"))),
                };
            }
            let mut overflow = None;
            for (i, m) in msgs[..r as usize].iter().enumerate() {
                let len = m.msg_len as usize;
                if m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                    self.stats.truncated += 1; // consumed already: dropped, counted
                    continue;
                }
                let Some(src) = from_sockaddr(&from[i]) else { continue };
                let c = ReadControl::parse(&m.msg_hdr);
                overflow = c.overflow.or(overflow);
                let arrival = Arrival { src, dst: self.local, traffic_class: c.traffic_class, hop_limit: c.hop_limit };
                // A read without a UDP_GRO cmsg is one datagram.
                let segment = c.gso_size.filter(|g| *g > 0).unwrap_or(len.max(1));
                self.rx.push(i * RX_READ_LEN, len, segment, arrival);
            }
            self.note_overflow(overflow);
            self.stats.reads += r as u64;
            return Ok(r as usize);
        }
    }

    /// Send `frames[..]` (all datagrams, classified in `dgrams`) in one `sendmmsg`: runs of
    /// datagrams to one destination with one payload length (the last may be shorter) as one
    /// message with UDP_SEGMENT, each segment's ICRC corrected for the IPv4 ID the kernel gives
    /// it. Returns how many frames the kernel took, or the error of the first message if it
    /// took none.
    fn send_datagrams(&mut self, frames: &[&[u8]], dgrams: &[Datagram], gso: bool) -> Result<usize, SendError> {
        let n = frames.len().min(TX_FRAMES);
        // Messages: (first frame, frames).
        let mut runs = [(0usize, 0usize); TX_FRAMES];
        let n_runs = gso::split_runs(&dgrams[..n], gso, &mut runs);
        // Each frame: its payload without the ICRC, then the ICRC (corrected or as it is).
        let mut icrcs = [[0u8; 4]; TX_FRAMES];
        let mut iovs: [libc::iovec; 2 * TX_FRAMES] = unsafe { std::mem::zeroed() };
        // SAFETY: plain data; zeroed is valid for each.
        let mut addrs: [(libc::sockaddr_storage, libc::socklen_t); TX_FRAMES] = unsafe { std::mem::zeroed() };
        let mut control = [[0u64; CONTROL_WORDS]; TX_FRAMES];
        let mut msgs: [libc::mmsghdr; TX_FRAMES] = unsafe { std::mem::zeroed() };
        // First every ICRC, then the iovecs pointing at them, then the messages pointing at the
        // iovecs: no buffer is written once a pointer into it is taken.
        for &(first, k) in &runs[..n_runs] {
            for j in 0..k {
                let (f, d) = (frames[first + j], &dgrams[first + j]);
                let Some(tail) = f.get(d.payload.end.saturating_sub(icrc::ICRC_LEN)..d.payload.end) else { continue };
                icrcs[first + j].copy_from_slice(tail);
                // The kernel writes ID 0 for the message and inet_gso_segment counts up: the
                // jth segment goes out with ID j.
                if !d.dst.is_ipv4() || d.payload.len() < icrc::ICRC_LEN {
                    continue;
                }
                let have = u16::from_be_bytes([f[ETH_LEN + 4], f[ETH_LEN + 5]]);
                let len = d.payload.end - icrc::ICRC_LEN - ETH_LEN;
                icrcs[first + j] = self.id_correction.icrc(icrcs[first + j], len, have, j as u16);
            }
        }
        for (i, (f, d)) in frames[..n].iter().zip(&dgrams[..n]).enumerate() {
            let body = &f[d.payload.start..d.payload.end.saturating_sub(icrc::ICRC_LEN).max(d.payload.start)];
            let tail = (d.payload.len() - body.len()).min(icrc::ICRC_LEN);
            iovs[2 * i] = libc::iovec { iov_base: body.as_ptr() as *mut libc::c_void, iov_len: body.len() };
            iovs[2 * i + 1] = libc::iovec { iov_base: icrcs[i].as_mut_ptr() as *mut libc::c_void, iov_len: tail };
        }
        for (r, &(first, _)) in runs[..n_runs].iter().enumerate() {
            addrs[r] = sockaddr(dgrams[first].dst, ROCEV2_UDP_PORT, self.ifindex);
        }
        for (r, &(first, k)) in runs[..n_runs].iter().enumerate() {
            let d = &dgrams[first];
            let h = &mut msgs[r].msg_hdr;
            h.msg_name = &addrs[r].0 as *const libc::sockaddr_storage as *mut libc::c_void;
            h.msg_namelen = addrs[r].1;
            h.msg_iov = &mut iovs[2 * first];
            h.msg_iovlen = 2 * k;
            let gso = (k > 1).then_some(d.payload.len() as u16);
            write_send_control(h, &mut control[r], d, gso);
        }
        let out = gso::send_messages(self.unicast.as_raw_fd(), &mut msgs[..n_runs]);
        let taken: usize = runs[..out.taken].iter().map(|&(_, k)| k).sum();
        self.stats.send_messages += out.taken as u64;
        self.stats.send_calls += out.calls;
        if let Some(e) = out.error {
            let (first, k) = runs[out.taken];
            // A route without UDP GSO (EIO: no checksum offload) sends datagrams one by
            // one from here on; a run the kernel finds invalid (EINVAL: a segment beyond
            // the path MTU) goes one by one this time, each then failing on its own.
            if k > 1 && matches!(e.raw_os_error(), Some(libc::EIO) | Some(libc::EINVAL)) {
                if e.raw_os_error() == Some(libc::EIO) {
                    self.gso = false;
                    self.stats.gso_disabled = true;
                }
                self.stats.sent += taken as u64;
                let rest = self.send_datagrams(&frames[first..n], &dgrams[first..n], false);
                return match rest {
                    Ok(m) => Ok(taken + m),
                    Err(_) if taken > 0 => Ok(taken),
                    Err(e) => Err(e),
                };
            }
            if taken == 0 {
                return Err(SendError { dst: dgrams[first].dst, error: e });
            }
        }
        self.stats.sent += taken as u64;
        Ok(taken)
    }

    /// The device's answer to a failed send: counted under its reason.
    fn send_failed(&mut self, e: SendError) -> io::Error {
        match e.error.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::ENOBUFS) => self.not_sent(NotSent::SendBufferFull).err().unwrap_or(e.error),
            Some(libc::EMSGSIZE) => self.not_sent(NotSent::TooLong).err().unwrap_or(e.error),
            _ => io::Error::new(e.error.kind(), format!("sendmsg to {}: {}", e.dst, e.error)),
        }
    }
}

/// A send the kernel refused.
struct SendError {
    dst: IpAddr,
    error: io::Error,
}

/// Control data of one message: room for three int-sized cmsgs (send: TOS, TTL,
/// UDP_SEGMENT; receive: TOS, TTL, UDP_GRO, SO_RXQ_OVFL, each CMSG_SPACE(4) = 16 bytes).
const CONTROL_WORDS: usize = 10;
/// Frames per `sendmmsg` (the driver's batch).
const TX_FRAMES: usize = 64;
/// Socket buffers a new socket asks for: a window of 64 KiB messages.
const DEFAULT_RCVBUF: usize = 8 << 20;
const DEFAULT_SNDBUF: usize = 4 << 20;
/// Reads per `recvmmsg`, each up to a GRO-coalesced 64 KiB.
const RX_READS: usize = 8;
const RX_READ_LEN: usize = 1 << 16;
/// UDP_SEGMENT and UDP_GRO (linux/udp.h), at SOL_UDP.
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;

/// Write the cmsgs of one send: TOS (or traffic class), TTL (hop limit) unless 0, and the GSO
/// segment size for a run of segments.
fn write_send_control(msg: &mut libc::msghdr, control: &mut [u64; CONTROL_WORDS], d: &Datagram, gso: Option<u16>) {
    let (level, tc_opt, hop_opt) = if d.dst.is_ipv4() {
        (libc::IPPROTO_IP, libc::IP_TOS, libc::IP_TTL)
    } else {
        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS, libc::IPV6_HOPLIMIT)
    };
    let mut cmsgs = [(level, tc_opt, libc::c_int::from(d.traffic_class)); 3];
    let mut n = 1;
    if d.hop_limit != 0 {
        cmsgs[n] = (level, hop_opt, libc::c_int::from(d.hop_limit));
        n += 1;
    }
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(control);
    // SAFETY: the control buffer holds three int cmsgs (3 × CMSG_SPACE(4) = 48 of 80 bytes) and
    // a u16 one in the same room; the headers are written through the CMSG macros over it.
    unsafe {
        let space = libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) as usize;
        let mut c = libc::CMSG_FIRSTHDR(msg);
        for &(level, kind, value) in &cmsgs[..n] {
            (*c).cmsg_level = level;
            (*c).cmsg_type = kind;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut libc::c_int, value);
            c = libc::CMSG_NXTHDR(msg, c);
        }
        let mut used = space * n;
        if let Some(size) = gso {
            (*c).cmsg_level = libc::SOL_UDP;
            (*c).cmsg_type = UDP_SEGMENT;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u16>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut u16, size);
            used += libc::CMSG_SPACE(std::mem::size_of::<u16>() as u32) as usize;
        }
        msg.msg_controllen = used;
    }
}

/// What a read's cmsgs report.
#[derive(Debug, Clone, Copy)]
struct ReadControl {
    traffic_class: u8,
    hop_limit: u8,
    /// UDP_GRO: the size of each coalesced datagram but the last.
    gso_size: Option<usize>,
    /// SO_RXQ_OVFL: datagrams the socket dropped so far (receive buffer full).
    overflow: Option<u32>,
}

impl ReadControl {
    fn parse(msg: &libc::msghdr) -> ReadControl {
        let mut out = ReadControl { traffic_class: 0, hop_limit: 64, gso_size: None, overflow: None };
        // SAFETY: the kernel filled `msg_controllen` bytes of the control buffer with cmsgs.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(msg);
            while !c.is_null() {
                let data = libc::CMSG_DATA(c);
                let int = || std::ptr::read_unaligned(data as *const libc::c_int);
                match ((*c).cmsg_level, (*c).cmsg_type) {
                    (libc::IPPROTO_IP, libc::IP_TOS) => out.traffic_class = *data, // one byte
                    (libc::IPPROTO_IP, libc::IP_TTL) => out.hop_limit = int() as u8,
                    (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) => out.traffic_class = int() as u8,
                    (libc::IPPROTO_IPV6, libc::IPV6_HOPLIMIT) => out.hop_limit = int() as u8,
                    (libc::SOL_UDP, UDP_GRO) => out.gso_size = usize::try_from(int()).ok(),
                    (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) => {
                        out.overflow = Some(std::ptr::read_unaligned(data as *const u32))
                    }
                    _ => {}
                }
                c = libc::CMSG_NXTHDR(msg, c);
            }
        }
        out
    }
}

/// The reads of one `recvmmsg` and where their splitting has got to: allocated once.
#[derive(Debug)]
struct Reads {
    buf: Vec<u8>,
    /// (offset in `buf`, length, segment size, arrival) per read.
    reads: [(usize, usize, usize, Option<Arrival>); RX_READS],
    n: usize,
    /// The read being split, and the next segment's index in it.
    at: usize,
    segment: usize,
}

impl Reads {
    fn new() -> Reads {
        Reads { buf: vec![0; RX_READS * RX_READ_LEN], reads: [(0, 0, 0, None); RX_READS], n: 0, at: 0, segment: 0 }
    }

    fn clear(&mut self) {
        (self.n, self.at, self.segment) = (0, 0, 0);
    }

    fn push(&mut self, offset: usize, len: usize, segment: usize, arrival: Arrival) {
        self.reads[self.n] = (offset, len, segment, Some(arrival));
        self.n += 1;
    }

    fn is_drained(&self) -> bool {
        self.at >= self.n
    }

    /// The next segment: its bytes in `buf`, how it arrived, its index in its read.
    fn peek(&self) -> Option<(Range<usize>, Arrival, usize)> {
        let &(offset, len, size, arrival) = self.reads.get(self.at).filter(|_| self.at < self.n)?;
        let start = self.segment * size;
        let end = (start + size).min(len);
        Some((offset + start..offset + end, arrival?, self.segment))
    }

    fn advance(&mut self) {
        let (_, len, size, _) = self.reads[self.at];
        self.segment += 1;
        if self.segment * size >= len {
            (self.at, self.segment) = (self.at + 1, 0);
        }
    }
}

impl Device for RoceUdpSocket {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        self.send_batch(&[frame]).map(|_| ())
    }

    /// Datagrams in one `sendmmsg`, runs of them in one UDP_SEGMENT message each; frames the
    /// kernel's job (ARP, IGMP …) taken and counted.
    fn send_batch(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        let mut dgrams: [Datagram; TX_FRAMES] = std::array::from_fn(|_| Datagram::EMPTY);
        let mut taken = 0;
        while taken < frames.len() {
            // The next run of datagrams, up to TX_FRAMES, up to the first frame that is not one.
            let rest = &frames[taken..frames.len().min(taken + TX_FRAMES)];
            let mut k = 0;
            let mut refused = None;
            for f in rest {
                match classify(f, self.local, self.mac) {
                    Ok(d) => {
                        dgrams[k] = d;
                        k += 1;
                    }
                    Err(reason) => {
                        refused = Some(reason);
                        break;
                    }
                }
            }
            if k > 0 {
                let gso = self.gso;
                match self.send_datagrams(&rest[..k], &dgrams[..k], gso) {
                    Ok(m) => {
                        taken += m;
                        if m < k {
                            return Ok(taken);
                        }
                    }
                    Err(e) if taken == 0 => return Err(self.send_failed(e)),
                    Err(_) => return Ok(taken),
                }
            }
            if let Some(reason) = refused {
                match self.not_sent(reason) {
                    Ok(()) => taken += 1,
                    Err(e) if taken == 0 => return Err(e),
                    Err(_) => return Ok(taken),
                }
            }
        }
        Ok(taken)
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        if let Some(f) = self.next_unicast(buf)? {
            return Ok(Some(f.len));
        }
        Ok(self.recv_group(buf)?.map(|f| f.len))
    }

    /// The unicast socket's datagrams split out of GRO-coalesced reads (one `recvmmsg` for
    /// several), then the groups' one by one.
    fn recv_batch(&mut self, batch: &mut RecvBatch) -> io::Result<usize> {
        batch.clear();
        self.recv_frames(batch, 0)
    }

    /// The unicast socket's datagrams handed to `datagram` where `recvmmsg` put them, up to the
    /// batch's capacity, while the ICRC computed over them (with the headers the sender's kernel
    /// wrote, the IPv4 ID from the segment's place in its read) holds; from the first one it
    /// does not (a kernel rxe's ID, a damaged datagram) on, frames in `batch` as
    /// [`Device::recv_batch`] gives them, so the order stays the order of arrival.
    fn recv_in_place(&mut self, batch: &mut RecvBatch, datagram: &mut dyn FnMut(&Arrival, &[u8])) -> io::Result<usize> {
        batch.clear();
        let mut handed = 0;
        while handed < batch.capacity() {
            if self.rx.is_drained() {
                match self.fill_reads() {
                    Ok(0) => return Ok(handed + self.recv_group_frames(batch, 0)?),
                    Ok(_) => {}
                    Err(e) if handed == 0 => return Err(e),
                    Err(_) => return Ok(handed),
                }
            }
            let Some((range, arrival, index)) = self.rx.peek() else { break };
            let bytes = &mut self.rx.buf[range];
            // Segment `index` of a GSO send carries ID `index` (inet_gso_segment counts up).
            let id = index as u16;
            match self.rx_icrc.verify(bytes, &arrival, id) {
                Ok(true) => datagram(&arrival, bytes),
                _ => break,
            }
            self.rx.advance();
            self.stats.received += 1;
            self.stats.ipv4_id_from_icrc += u64::from(arrival.is_ipv4() && id != 0);
            handed += 1;
        }
        if handed == batch.capacity() {
            return Ok(handed);
        }
        match self.recv_frames(batch, handed) {
            Ok(n) => Ok(handed + n),
            Err(_) if handed > 0 => Ok(handed),
            Err(e) => Err(e),
        }
    }

    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.epoll.as_raw_fd())
    }
}

impl RoceUdpSocket {
    /// Frames into `batch` from its first slot, up to its capacity less `handed` (datagrams
    /// handed over in place this call): the unicast socket's, then the groups'.
    fn recv_frames(&mut self, batch: &mut RecvBatch, handed: usize) -> io::Result<usize> {
        let room = batch.capacity() - handed;
        let mut slot = 0;
        while slot < room {
            match self.next_unicast(batch.slot_mut(slot)) {
                Ok(Some(f)) => push_framed(batch, slot, f),
                Ok(None) => break,
                Err(e) if batch.is_empty() => return Err(e),
                Err(_) => return Ok(batch.len()),
            }
            slot += 1;
        }
        self.recv_group_frames(batch, handed)
    }

    /// The groups' datagrams as frames into `batch` after the frames it holds, up to its
    /// capacity less `handed`; returns the frames it holds.
    fn recv_group_frames(&mut self, batch: &mut RecvBatch, handed: usize) -> io::Result<usize> {
        let mut slot = batch.len();
        while slot + handed < batch.capacity() && !self.groups.is_empty() {
            match self.recv_group(batch.slot_mut(slot)) {
                Ok(Some(f)) => push_framed(batch, slot, f),
                Ok(None) => break,
                Err(e) if batch.is_empty() && handed == 0 => return Err(e),
                Err(_) => break,
            }
            slot += 1;
        }
        Ok(batch.len())
    }
}

/// Record a framed datagram in `slot`, with the ICRC verdict when it was verified.
fn push_framed(batch: &mut RecvBatch, slot: usize, f: Framed) {
    if f.icrc_verified {
        batch.push_icrc_verified(slot, f.len);
    } else {
        batch.push(slot, f.len);
    }
}

impl RoceUdpSocket {
    /// One datagram from any group's socket.
    fn recv_group(&mut self, buf: &mut [u8]) -> io::Result<Option<Framed>> {
        // (By position, so that receiving needs no copy of the group list.)
        for i in 0..self.groups.len() {
            let Some((g, fd)) = self.groups.iter().nth(i).map(|(g, fd)| (*g, fd.as_raw_fd())) else { break };
            if let Some(n) = self.recv_from(fd, g, buf)? {
                return Ok(Some(n));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use roce_wire::frame::RoceHeaders;

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

    /// An engine frame: a UD SEND_ONLY from QP 1 with source port `sport`.
    pub(crate) fn engine_frame(src: IpAddr, dst: IpAddr, sport: u16, payload: &[u8]) -> Vec<u8> {
        engine_frame_as(src, dst, sport, payload, false)
    }

    /// [`engine_frame`] as an RC SEND_MIDDLE (no extension header) to the same QP: bulk data,
    /// what the raw transport's GSO runs carry.
    pub(crate) fn rc_engine_frame(src: IpAddr, dst: IpAddr, sport: u16, payload: &[u8]) -> Vec<u8> {
        engine_frame_as(src, dst, sport, payload, true)
    }

    fn engine_frame_as(src: IpAddr, dst: IpAddr, sport: u16, payload: &[u8], rc: bool) -> Vec<u8> {
        // The BTH and DETH of a real UD SEND_ONLY to QP1 (the golden SA Delete).
        let golden = roce_wire::frame::parse(&roce_wire::golden::SA_DELETE_MCMEMBER).unwrap();
        let (mut bth, mut ext) = (golden.repr.bth, golden.repr.ext);
        if rc {
            bth.opcode = roce_wire::bth::Opcode::RcSendMiddle;
            ext = Default::default();
        }
        let h = RoceHeaders {
            src_mac: MAC,
            dst_mac: KERNEL_NEIGHBOR_MAC,
            src,
            dst,
            hop_limit: 64,
            traffic_class: 0x0a,
            udp_source_port: sport,
            bth: &bth,
            ext: &ext,
        };
        let mut buf = vec![0u8; 2048];
        let n = roce_wire::frame::emit_roce(&h, &mut buf, Some(payload), payload.len()).unwrap();
        buf.truncate(n);
        buf
    }

    /// Sent, then received: what the kernel carries (the UDP payload) framed again gives
    /// the engine's own frame back byte for byte but for the MACs and the UDP checksum —
    /// so the ICRC holds — for IPv4 and IPv6.
    #[test]
    fn a_frame_goes_out_as_its_payload_and_comes_back_whole() {
        for (a, b) in [("10.0.0.1", "10.0.0.2"), ("fd00::1", "fd00::2")] {
            let (a, b): (IpAddr, IpAddr) = (a.parse().unwrap(), b.parse().unwrap());
            let f = engine_frame(a, b, ROCEV2_UDP_PORT, &[0x5a; 37]);
            let d = classify(&f, a, MAC).unwrap();
            assert_eq!((d.dst, d.traffic_class, d.hop_limit), (b, 0x0a, 64));
            let payload = &f[d.payload.clone()];
            assert_eq!(payload.len(), 12 + 8 + 37 + 3 + 4, "BTH DETH payload pad ICRC");
            // The peer receives it.
            let hdr = header_len(a.is_ipv4());
            let mut buf = vec![0u8; 2048];
            buf[hdr..hdr + payload.len()].copy_from_slice(payload);
            let arrival =
                Arrival { src: SocketAddr::new(a, ROCEV2_UDP_PORT), dst: b, traffic_class: 0x0a, hop_limit: 64 };
            let peer_mac = [2, 0, 0, 0, 0, 2];
            let Framed { len: n, id_from_icrc: from_icrc, icrc_verified } =
                frame_datagram(&mut buf, payload.len(), &arrival, peer_mac, 0);
            assert!(!from_icrc);
            assert_eq!(icrc_verified, a.is_ipv4(), "IPv4's ICRC is computed here, IPv6's by the engine");
            assert_eq!(n, f.len());
            assert_eq!(&buf[..6], &peer_mac);
            assert_eq!(&buf[6..12], &KERNEL_NEIGHBOR_MAC);
            assert_eq!(&buf[12..n], &f[12..], "{a}: the headers as the engine wrote them");
            let parsed = roce_wire::frame::parse(&buf[..n]).unwrap();
            assert_eq!(parsed.repr.payload, &[0x5a; 37][..]);
        }
    }

    /// A kernel rxe's IPv4 ID is not 0: the rebuilt frame takes it from the ICRC, and a
    /// damaged datagram still fails the engine's check.
    #[test]
    fn an_ipv4_id_comes_back_from_the_icrc() {
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let mut f = engine_frame(a, b, 0xc123, &[7; 100]);
        f[18..20].copy_from_slice(&0x3c1fu16.to_be_bytes());
        let end = f.len() - 4;
        let icrc = icrc::compute(&f[14..end], icrc::IpVersion::V4, 20).unwrap();
        f[end..].copy_from_slice(&icrc::to_wire(icrc));
        let payload = f[42..].to_vec();
        let arrival = Arrival { src: SocketAddr::new(a, 0xc123), dst: b, traffic_class: 0, hop_limit: 63 };
        let mut buf = vec![0u8; 2048];
        buf[42..42 + payload.len()].copy_from_slice(&payload);
        let Framed { len: n, id_from_icrc: from_icrc, icrc_verified } =
            frame_datagram(&mut buf, payload.len(), &arrival, MAC, 0);
        assert!(from_icrc);
        assert!(!icrc_verified, "a solved ID is checked by the engine");
        assert_eq!(&buf[18..20], &[0x3c, 0x1f]);
        assert!(roce_wire::frame::parse(&buf[..n]).is_ok(), "the ICRC and the IPv4 checksum hold");
        buf[42 + 30] ^= 1;
        let Framed { len: n, id_from_icrc: from_icrc, icrc_verified } =
            frame_datagram(&mut buf, payload.len(), &arrival, MAC, 0);
        assert!(!from_icrc && !icrc_verified);
        assert!(roce_wire::frame::parse(&buf[..n]).is_err(), "a damaged datagram fails the ICRC");
    }

    /// An address of 127/8 of this test process's own (port 4791 stays free for others).
    fn net(host: u8) -> IpAddr {
        let pick = std::process::id();
        IpAddr::V4(Ipv4Addr::new(127, 90 + (pick % 100) as u8, (pick >> 8) as u8, host))
    }

    /// Two sockets on loopback addresses `net(a)` and `net(b)` (interface 1: lo).
    pub(crate) fn loopback_pair(a: u8, b: u8) -> (IpAddr, IpAddr, RoceUdpSocket, RoceUdpSocket) {
        let (a, b) = (net(a), net(b));
        (a, b, RoceUdpSocket::open(a, 1, MAC).unwrap(), RoceUdpSocket::open(b, 1, MAC).unwrap())
    }

    /// A batch of equal datagrams leaves in one UDP_SEGMENT message (the shorter last one
    /// too), each segment's ICRC corrected for the IPv4 ID the kernel numbers it with; a
    /// GRO socket reads them coalesced and splits them back into frames whose ICRC holds; a
    /// socket without GRO gets them segmented by the kernel, and each one's ICRC holds with
    /// the ID its place in the run gives it. Over loopback, on addresses of 127/8 of its own.
    #[test]
    fn a_run_of_datagrams_goes_out_in_one_gso_send_and_comes_back_split() {
        let (a, b, mut tx, mut rx) = loopback_pair(1, 2);
        let mut frames: Vec<Vec<u8>> = (0..10u8).map(|i| engine_frame(a, b, ROCEV2_UDP_PORT, &[i; 1000])).collect();
        frames.push(engine_frame(a, b, ROCEV2_UDP_PORT, &[0xee; 300]));
        let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
        assert_eq!(tx.send_batch(&refs).unwrap(), 11);
        let st = tx.stats();
        assert_eq!((st.sent, st.send_messages, st.gso_disabled), (11, 1, false), "{st:?}");
        let mut batch = RecvBatch::new(64, 9216).unwrap();
        let (mut got, mut verified) = (Vec::new(), Vec::new());
        for _ in 0..200 {
            rx.recv_batch(&mut batch).unwrap();
            got.extend(batch.iter().map(|f| f.to_vec()));
            verified.extend(batch.iter_icrc_verified().map(|(_, ok)| ok));
            if got.len() >= 11 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(got.len(), 11);
        assert!(verified.iter().all(|v| *v), "each ICRC computed once, here: {verified:?}");
        for (i, f) in got.iter().enumerate() {
            let parsed = roce_wire::frame::parse(f).unwrap_or_else(|e| panic!("frame {i}: {e}"));
            let want: &[u8] = if i < 10 { &[i as u8; 1000] } else { &[0xee; 300] };
            assert_eq!(parsed.repr.payload, want);
            assert_eq!(u16::from_be_bytes([f[18], f[19]]), i as u16, "segment {i}'s ID");
        }
        let rs = rx.stats();
        assert!(rs.reads < 11 && rs.received == 11, "GRO coalesced them: {rs:?}");
        // A socket without GRO: the kernel segments, with the IDs the sender predicted.
        let plain = std::net::UdpSocket::bind(SocketAddr::new(net(3), ROCEV2_UDP_PORT)).unwrap();
        plain.set_read_timeout(Some(std::time::Duration::from_secs(2))).unwrap();
        let frames: Vec<Vec<u8>> = (0..5u8).map(|i| engine_frame(a, net(3), ROCEV2_UDP_PORT, &[i; 512])).collect();
        let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
        assert_eq!(tx.send_batch(&refs).unwrap(), 5);
        for i in 0..5u16 {
            let mut buf = vec![0u8; 2048];
            let (n, from) = plain.recv_from(&mut buf[42..]).unwrap();
            let arrival = Arrival { src: from, dst: net(3), traffic_class: 0, hop_limit: 64 };
            let Framed { len, id_from_icrc: from_icrc, .. } = frame_datagram(&mut buf, n, &arrival, MAC, 0);
            assert_eq!((from_icrc, u16::from_be_bytes([buf[18], buf[19]])), (i != 0, i), "datagram {i}");
            assert!(roce_wire::frame::parse(&buf[..len]).is_ok());
        }
    }

    /// Datagrams whose ICRC holds are handed over where `recvmmsg` put them (the UDP payload,
    /// with how it arrived); from the first whose ICRC does not hold at its place's ID (a
    /// damaged one, a kernel rxe's ID) on, frames in the batch as `recv_batch` gives them —
    /// so the order of arrival holds — the damaged one without an ICRC verdict (the engine
    /// computes it and counts it bad).
    #[test]
    fn datagrams_are_handed_in_place_until_one_is_not_verified() {
        let (a, b, mut tx, mut rx) = loopback_pair(21, 22);
        let run = |n: u8, fill: u8| -> Vec<Vec<u8>> {
            (0..n).map(|i| engine_frame(a, b, ROCEV2_UDP_PORT, &[fill + i; 700])).collect()
        };
        let send = |tx: &mut RoceUdpSocket, frames: &[Vec<u8>]| {
            let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
            assert_eq!(tx.send_batch(&refs).unwrap(), frames.len());
        };
        let (first, last) = (run(5, 0), run(3, 0x40));
        let mut damaged = engine_frame(a, b, ROCEV2_UDP_PORT, &[0x33; 700]);
        damaged[100] ^= 1;
        send(&mut tx, &first);
        send(&mut tx, &[damaged.clone()]);
        send(&mut tx, &last);
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut batch = RecvBatch::new(64, 9216).unwrap();
        let mut in_place: Vec<(Arrival, Vec<u8>)> = Vec::new();
        let n = rx.recv_in_place(&mut batch, &mut |arrival, d| in_place.push((*arrival, d.to_vec()))).unwrap();
        assert_eq!((n, in_place.len(), batch.len()), (9, 5, 4));
        for ((arrival, d), f) in in_place.iter().zip(&first) {
            // (Its ICRC corrected for the ID of its place in the GSO run.)
            assert!(d[..d.len() - 4] == f[42..f.len() - 4], "the UDP payload as sent");
            assert_eq!(
                (arrival.src, arrival.dst, arrival.traffic_class),
                (SocketAddr::new(a, ROCEV2_UDP_PORT), b, 0x0a)
            );
        }
        let frames: Vec<(Vec<u8>, bool)> = batch.iter_icrc_verified().map(|(f, ok)| (f.to_vec(), ok)).collect();
        assert!(frames[0].0[42..] == damaged[42..]);
        assert!(!frames[0].1, "the damaged one goes to the engine unverified");
        for ((f, ok), sent) in frames[1..].iter().zip(&last) {
            assert!(ok);
            assert_eq!(
                roce_wire::frame::parse(f).unwrap().repr.payload,
                roce_wire::frame::parse(sent).unwrap().repr.payload
            );
        }
        assert_eq!(rx.stats().received, 9);
        // Nothing left: 0.
        assert_eq!(rx.recv_in_place(&mut batch, &mut |_, _| panic!("nothing waits")).unwrap(), 0);
    }

    /// A burst beyond a small receive buffer: the kernel's drops come back counted
    /// (SO_RXQ_OVFL, stamped on the next datagram queued after them), never silent.
    #[test]
    fn receive_queue_drops_are_counted() {
        let (a, b, mut tx, mut rx) = loopback_pair(11, 12);
        rx.set_buffer_sizes(4096, 4096).unwrap();
        let frame = engine_frame(a, b, ROCEV2_UDP_PORT, &[3; 1000]);
        // One message each (no run): one skb, one drop, per datagram.
        let mut sent = 0u64;
        for _ in 0..100 {
            sent += u64::from(tx.send(&frame).is_ok());
        }
        let mut batch = RecvBatch::new(64, 9216).unwrap();
        while rx.recv_batch(&mut batch).unwrap() > 0 {}
        // The next datagram carries the count.
        tx.send(&frame).unwrap();
        for _ in 0..200 {
            if rx.recv_batch(&mut batch).unwrap() > 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let st = rx.stats();
        assert!(st.receive_queue_overflow > 0, "{st:?}");
        assert_eq!(st.received + st.receive_queue_overflow, sent + 1, "{st:?}");
    }

    /// What the socket cannot send, or the kernel does itself, is named.
    #[test]
    fn frames_the_socket_does_not_send_are_classified() {
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let good = engine_frame(a, b, ROCEV2_UDP_PORT, &[1; 8]);
        assert!(classify(&good, a, MAC).is_ok());
        assert_eq!(classify(&good, "10.0.0.9".parse().unwrap(), MAC), Err(NotSent::ForeignSourceAddress));
        assert_eq!(classify(&good, a, [2, 0, 0, 0, 0, 9]), Err(NotSent::ForeignSourceMac));
        let other_port = engine_frame(a, b, 0xc000, &[1; 8]);
        assert_eq!(classify(&other_port, a, MAC), Err(NotSent::ForeignPort));
        let arp = roce_wire::arp::request(MAC, "10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let mut f = vec![0u8; 64];
        let n = roce_wire::l2::EmitFrame::emit(&roce_wire::l2::ArpFrame::new(arp), &mut f);
        assert_eq!(classify(&f[..n], a, MAC), Err(NotSent::Arp));
        let igmp = roce_wire::l2::IgmpFrame::new(
            MAC,
            "10.0.0.1".parse().unwrap(),
            roce_wire::igmp::IgmpMessage::v3_join("239.1.1.1".parse().unwrap()),
        );
        let mut f = vec![0u8; 128];
        let n = roce_wire::l2::EmitFrame::emit(&igmp, &mut f);
        assert_eq!(classify(&f[..n], a, MAC), Err(NotSent::Igmp));
        let mld = roce_wire::l2::MldFrame::new(
            MAC,
            "fe80::1".parse().unwrap(),
            roce_wire::mld::MldMessage::join("ff12::1".parse().unwrap()),
        );
        let n = roce_wire::l2::EmitFrame::emit(&mld, &mut f);
        assert_eq!(classify(&f[..n], "fe80::1".parse().unwrap(), MAC), Err(NotSent::Mld));
        assert_eq!(classify(&[0u8; 10], a, MAC), Err(NotSent::NotRoceV2));
        let mut truncated = good.clone();
        truncated.truncate(40);
        assert_eq!(classify(&truncated, a, MAC), Err(NotSent::NotRoceV2));
    }
}
