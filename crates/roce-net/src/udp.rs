//! A kernel UDP socket on the RoCEv2 port: the [`Device`] that needs no privilege.
//!
//! The engine keeps speaking Ethernet frames. On send the device checks that a frame is IPv4
//! or IPv6 UDP from the stack's MAC, address and port 4791 to port 4791, and hands the UDP
//! payload (BTH … ICRC) to `sendmsg(2)`: the kernel writes the IP and UDP headers, resolves
//! the neighbour and routes. On receive it rebuilds around each datagram the Ethernet, IP and
//! UDP headers the engine's demux expects, so that the engine's ICRC check holds. The frames
//! whose job the kernel does here (ARP, ND, IGMP, MLD) are not sent, and counted; frames the
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

use crate::device::Device;

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
    Ok(Datagram { dst, traffic_class: tc, hop_limit: hop, payload: at..ETH_LEN + udp_at + udp_len })
}

/// How a received datagram arrived: what the socket reports of its IP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// The sender's address and UDP port.
    pub src: SocketAddr,
    /// The destination address (the socket's bound address: ours, or the group's).
    pub dst: IpAddr,
    /// TOS or traffic class (IP_RECVTOS / IPV6_RECVTCLASS; 0 when not reported).
    pub traffic_class: u8,
    /// TTL or hop limit (IP_RECVTTL / IPV6_RECVHOPLIMIT; 64 when not reported).
    pub hop_limit: u8,
}

/// Write the Ethernet, IP and UDP headers of a received datagram of `len` bytes that sits at
/// `buf[header_len(..)..]`, as the sender's kernel wrote them on the wire (IPv4: DF, ID 0;
/// IPv6: flow label 0; UDP checksum 0 — the ICRC masks what is unknown here, and an IPv4 ID
/// that was not 0 is taken from the ICRC). `mac` is the stack's. Returns the frame's length
/// and whether the IPv4 ID came from the ICRC.
pub fn frame_datagram(buf: &mut [u8], len: usize, arrival: &Arrival, mac: [u8; 6]) -> (usize, bool) {
    let ipv4 = arrival.dst.is_ipv4();
    let hdr = header_len(ipv4);
    let dst_mac = match arrival.dst {
        IpAddr::V4(g) if g.is_multicast() => roce_wire::multicast::ipv4_multicast_mac(g),
        IpAddr::V6(g) if g.is_multicast() => roce_wire::multicast::ipv6_multicast_mac(g),
        _ => mac,
    };
    buf[0..6].copy_from_slice(&dst_mac);
    buf[6..12].copy_from_slice(&KERNEL_NEIGHBOR_MAC);
    let udp_len = (UDP_LEN + len) as u16;
    let ip = &mut buf[ETH_LEN..hdr - UDP_LEN];
    match (arrival.src.ip(), arrival.dst) {
        (s, IpAddr::V4(d)) => {
            // (A socket of one family reports sources of that family.)
            let s = match s {
                IpAddr::V4(s) => s,
                IpAddr::V6(s) => s.to_ipv4_mapped().unwrap_or(Ipv4Addr::UNSPECIFIED),
            };
            ip[0] = 0x45;
            ip[1] = arrival.traffic_class;
            ip[2..4].copy_from_slice(&(udp_len + 20).to_be_bytes());
            ip[4..8].copy_from_slice(&[0, 0, 0x40, 0]); // ID 0, DF
            ip[8] = arrival.hop_limit;
            ip[9] = 17;
            ip[10..12].copy_from_slice(&[0, 0]);
            ip[12..16].copy_from_slice(&s.octets());
            ip[16..20].copy_from_slice(&d.octets());
        }
        (s, d) => {
            let tc = arrival.traffic_class;
            ip[0..4].copy_from_slice(&[0x60 | (tc >> 4), tc << 4, 0, 0]);
            ip[4..6].copy_from_slice(&udp_len.to_be_bytes());
            ip[6] = 17;
            ip[7] = arrival.hop_limit;
            ip[8..24].copy_from_slice(&v6(s).octets());
            ip[24..40].copy_from_slice(&v6(d).octets());
        }
    }
    buf[12..14].copy_from_slice(&(if ipv4 { 0x0800u16 } else { 0x86dd }).to_be_bytes());
    let u = &mut buf[hdr - UDP_LEN..hdr];
    u[0..2].copy_from_slice(&arrival.src.port().to_be_bytes());
    u[2..4].copy_from_slice(&ROCEV2_UDP_PORT.to_be_bytes());
    u[4..6].copy_from_slice(&udp_len.to_be_bytes());
    u[6..8].copy_from_slice(&[0, 0]);
    let end = hdr + len;
    let mut id_from_icrc = false;
    if ipv4 && len >= roce_wire::bth::BTH_LEN + icrc::ICRC_LEN {
        let wire = icrc::from_wire([buf[end - 4], buf[end - 3], buf[end - 2], buf[end - 1]]);
        let packet = &buf[ETH_LEN..end - icrc::ICRC_LEN];
        if icrc::compute(packet, icrc::IpVersion::V4, 20).is_ok_and(|c| c != wire) {
            if let Ok(Some(id)) = icrc::solve_ipv4_identification(packet, wire) {
                buf[ETH_LEN + 4..ETH_LEN + 6].copy_from_slice(&id.to_be_bytes());
                id_from_icrc = true;
            }
        }
    }
    if ipv4 {
        let sum = roce_wire::frame::ipv4_checksum(&buf[ETH_LEN..ETH_LEN + 20]);
        buf[ETH_LEN + 10..ETH_LEN + 12].copy_from_slice(&sum.to_be_bytes());
    }
    (end, id_from_icrc)
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

fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int, what: &str) -> io::Result<()> {
    // SAFETY: the option value points at a live c_int of the given size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &value as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(os_err(what));
    }
    Ok(())
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
/// IPv6, accepting rxe's zero checksums. No SO_REUSEADDR: a port already taken is EADDRINUSE.
fn bound_socket(addr: IpAddr, ifindex: u32) -> io::Result<OwnedFd> {
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
}

impl RoceUdpSocket {
    /// Bind `local`:4791 for a stack whose MAC is `mac`, on the interface `ifindex` (multicast
    /// is sent and joined there; a link-local IPv6 address is scoped to it). An address of
    /// another host is `AddrNotAvailable`, a port already taken `AddrInUse`, each saying why.
    pub fn open(local: IpAddr, ifindex: u32, mac: [u8; 6]) -> io::Result<RoceUdpSocket> {
        let unicast = bound_socket(local, ifindex)?;
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
        let s =
            RoceUdpSocket { unicast, groups: BTreeMap::new(), epoll, local, ifindex, mac, stats: UdpStats::default() };
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
            let fd = bound_socket(*g, self.ifindex)?;
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

    /// Receive one datagram from `fd` (bound to `dst`) into `buf` as a frame.
    fn recv_from(&mut self, fd: RawFd, dst: IpAddr, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let hdr = header_len(dst.is_ipv4());
        if buf.len() < hdr {
            return Err(crate::device::too_small(hdr, buf.len()));
        }
        loop {
            let room = &mut buf[hdr..];
            let mut iov = libc::iovec { iov_base: room.as_mut_ptr() as *mut libc::c_void, iov_len: room.len() };
            // SAFETY: plain data.
            let mut from: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
            let mut control = [0u64; 16];
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
            let (mut traffic_class, mut hop_limit) = (0u8, 64u8);
            // SAFETY: the kernel filled `msg_controllen` bytes of `control` with cmsgs.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&msg);
                while !c.is_null() {
                    let data = libc::CMSG_DATA(c);
                    let (level, kind) = ((*c).cmsg_level, (*c).cmsg_type);
                    if level == libc::IPPROTO_IP && kind == libc::IP_TOS {
                        traffic_class = *data; // one byte
                    } else if level == libc::IPPROTO_IP && kind == libc::IP_TTL {
                        hop_limit = std::ptr::read_unaligned(data as *const libc::c_int) as u8;
                    } else if level == libc::IPPROTO_IPV6 && kind == libc::IPV6_TCLASS {
                        traffic_class = std::ptr::read_unaligned(data as *const libc::c_int) as u8;
                    } else if level == libc::IPPROTO_IPV6 && kind == libc::IPV6_HOPLIMIT {
                        hop_limit = std::ptr::read_unaligned(data as *const libc::c_int) as u8;
                    }
                    c = libc::CMSG_NXTHDR(&msg, c);
                }
            }
            let arrival = Arrival { src, dst, traffic_class, hop_limit };
            let (n, id_from_icrc) = frame_datagram(buf, len, &arrival, self.mac);
            self.stats.received += 1;
            self.stats.ipv4_id_from_icrc += u64::from(id_from_icrc);
            return Ok(Some(n));
        }
    }
}

impl Device for RoceUdpSocket {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        let d = match classify(frame, self.local, self.mac) {
            Ok(d) => d,
            Err(reason) => return self.not_sent(reason),
        };
        let payload = &frame[d.payload.clone()];
        let (sa, salen) = sockaddr(d.dst, ROCEV2_UDP_PORT, self.ifindex);
        let mut iov = libc::iovec { iov_base: payload.as_ptr() as *mut libc::c_void, iov_len: payload.len() };
        // The engine's TOS/traffic class and TTL/hop limit, per datagram (the ICRC masks them;
        // they carry DSCP and ECN).
        let mut control = [0u64; 8];
        // SAFETY: msghdr is plain data.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = &sa as *const libc::sockaddr_storage as *mut libc::c_void;
        msg.msg_namelen = salen;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&control);
        let (level, tc_opt, hop_opt) = if d.dst.is_ipv4() {
            (libc::IPPROTO_IP, libc::IP_TOS, libc::IP_TTL)
        } else {
            (libc::IPPROTO_IPV6, libc::IPV6_TCLASS, libc::IPV6_HOPLIMIT)
        };
        let mut cmsgs: [(libc::c_int, libc::c_int); 2] = [(tc_opt, libc::c_int::from(d.traffic_class)), (hop_opt, 0)];
        let n_cmsgs = if d.hop_limit == 0 {
            1
        } else {
            cmsgs[1].1 = libc::c_int::from(d.hop_limit);
            2
        };
        // SAFETY: the control buffer holds two int cmsgs (2 × CMSG_SPACE(4) = 32 of 64 bytes);
        // the headers are written through the CMSG macros over it.
        unsafe {
            let space = libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) as usize;
            msg.msg_controllen = space * n_cmsgs;
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            for &(kind, value) in &cmsgs[..n_cmsgs] {
                if c.is_null() {
                    break;
                }
                (*c).cmsg_level = level;
                (*c).cmsg_type = kind;
                (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut libc::c_int, value);
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        // SAFETY: `msg` points at live buffers: the address, the payload, the control data.
        let r = unsafe { libc::sendmsg(self.unicast.as_raw_fd(), &msg, 0) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => self.not_sent(NotSent::SendBufferFull),
                Some(libc::EMSGSIZE) => self.not_sent(NotSent::TooLong),
                _ => Err(io::Error::new(e.kind(), format!("sendmsg to {}: {e}", d.dst))),
            };
        }
        self.stats.sent += 1;
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let fd = self.unicast.as_raw_fd();
        if let Some(n) = self.recv_from(fd, self.local, buf)? {
            return Ok(Some(n));
        }
        // (By position, so that receiving needs no copy of the group list.)
        for i in 0..self.groups.len() {
            let Some((g, fd)) = self.groups.iter().nth(i).map(|(g, fd)| (*g, fd.as_raw_fd())) else { break };
            if let Some(n) = self.recv_from(fd, g, buf)? {
                return Ok(Some(n));
            }
        }
        Ok(None)
    }

    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.epoll.as_raw_fd())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roce_wire::frame::RoceHeaders;

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

    /// An engine frame: a UD SEND_ONLY from QP 1 with source port `sport`.
    fn engine_frame(src: IpAddr, dst: IpAddr, sport: u16, payload: &[u8]) -> Vec<u8> {
        // The BTH and DETH of a real UD SEND_ONLY to QP1 (the golden SA Delete).
        let golden = roce_wire::frame::parse(&roce_wire::golden::SA_DELETE_MCMEMBER).unwrap();
        let (bth, ext) = (golden.repr.bth, golden.repr.ext);
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
            let (n, from_icrc) = frame_datagram(&mut buf, payload.len(), &arrival, peer_mac);
            assert!(!from_icrc);
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
        let (n, from_icrc) = frame_datagram(&mut buf, payload.len(), &arrival, MAC);
        assert!(from_icrc);
        assert_eq!(&buf[18..20], &[0x3c, 0x1f]);
        assert!(roce_wire::frame::parse(&buf[..n]).is_ok(), "the ICRC and the IPv4 checksum hold");
        buf[42 + 30] ^= 1;
        let (n, from_icrc) = frame_datagram(&mut buf, payload.len(), &arrival, MAC);
        assert!(!from_icrc);
        assert!(roce_wire::frame::parse(&buf[..n]).is_err(), "a damaged datagram fails the ICRC");
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
