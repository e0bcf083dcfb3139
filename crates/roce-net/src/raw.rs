//! A raw AF_PACKET socket bound to one interface: the production [`Device`].
//!
//! It receives every frame on the interface (the engine filters MACs itself), skips the frames
//! it sent itself, and joins the multicast MACs the engine asks for (PACKET_ADD_MEMBERSHIP),
//! so that the NIC passes them without promiscuous mode. Interfaces are found with pnet's
//! datalink enumeration.

use std::collections::BTreeSet;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::device::{Device, RecvBatch};
use crate::gso::{self, IdCorrection, RunMember};
use crate::ring::{RingConfig, Rings, RxFrame};
use crate::vnet::{self, RunFrame, Segments, VNET_HDR_LEN};

/// What the stack needs to know about an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceInfo {
    /// Name (`tap0`).
    pub name: String,
    /// Index.
    pub index: u32,
    /// MAC address.
    pub mac: Option<[u8; 6]>,
    /// Addresses with prefix lengths.
    pub ips: Vec<(IpAddr, u8)>,
    /// Whether the interface is up.
    pub up: bool,
}

/// Look an interface up by name (through pnet's datalink enumeration).
pub fn interface(name: &str) -> io::Result<InterfaceInfo> {
    let all = pnet_datalink::interfaces();
    let Some(i) = all.iter().find(|i| i.name == name) else {
        let names: Vec<&str> = all.iter().map(|i| i.name.as_str()).collect();
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface named {name:?} (interfaces here: {})", names.join(", ")),
        ));
    };
    Ok(info_of(i))
}

/// Every interface of the host (its network namespace), as [`interface`] describes one.
pub fn interfaces() -> io::Result<Vec<InterfaceInfo>> {
    Ok(pnet_datalink::interfaces().iter().map(info_of).collect())
}

fn info_of(i: &pnet_datalink::NetworkInterface) -> InterfaceInfo {
    InterfaceInfo {
        name: i.name.clone(),
        index: i.index,
        mac: i.mac.map(|m| m.octets()),
        ips: i.ips.iter().map(|n| (n.ip(), n.prefix())).collect(),
        up: i.is_up(),
    }
}

/// `PACKET_MR_UNICAST` of linux/if_packet.h (not in every libc target's constants).
const PACKET_MR_UNICAST: libc::c_int = 3;

/// What a [`RawSocket`] counted (see [`RawSocket::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawStats {
    /// Frames dropped because they were longer than the receive slot (or the kernel
    /// truncated them in the ring): reason "truncated".
    pub truncated: u64,
    /// Frames the kernel dropped before we read them (full socket buffer or ring), from
    /// PACKET_STATISTICS: reason "kernel queue full".
    pub kernel_drops: u64,
    /// Frames the kernel queued for us, from PACKET_STATISTICS.
    pub kernel_packets: u64,
    /// Ring set-ups that failed, so the socket fell back to `recvmmsg`/`sendmmsg`
    /// ([`RawSocket::ring_fallback`] says why).
    pub ring_fallbacks: u64,
    /// Transmit ring kicks (one `send` per batch).
    pub tx_kicks: u64,
    /// With [`RawSocket::enable_gso`]: runs of frames sent as one GSO frame, and the frames in
    /// them (`gso_run_frames / gso_runs` frames per skb).
    pub gso_runs: u64,
    /// See [`RawStats::gso_runs`].
    pub gso_run_frames: u64,
    /// Runs the kernel refused (EINVAL: a kernel without VIRTIO_NET_HDR_GSO_UDP_L4, before
    /// 6.2): sent again one frame per skb, and GSO sends turned off
    /// ([`RawSocket::gso_refused`] says why).
    pub gso_refused: u64,
    /// GSO frames read (a run a peer's kernel passed whole), and the frames split out of them.
    pub gso_reads: u64,
    /// See [`RawStats::gso_reads`].
    pub gso_split_frames: u64,
    /// GSO frames read that are not UDP (a TCP stream's on the same interface): not RoCEv2,
    /// dropped — reason "gso, not udp".
    pub gso_not_udp: u64,
}

/// A raw socket on one interface: `sendmmsg`/`recvmmsg` by default, or PACKET_MMAP rings
/// ([`RawSocket::open_with`]); received frames may be spread by flow over several sockets
/// ([`RawSocket::fan_out`]).
#[derive(Debug)]
pub struct RawSocket {
    // Dropped (unmapped) before the descriptor closes.
    rings: Option<Rings>,
    ring_fallback: Option<String>,
    stats: RawStats,
    /// With [`RawSocket::fan_out`]: the other sockets of the fanout group, and an epoll
    /// descriptor over all of them (what `raw_fd` gives to poll).
    fanout: Vec<OwnedFd>,
    epoll: Option<OwnedFd>,
    /// The socket a receive starts with (the group's sockets are read in turn).
    next_rx: usize,
    /// The socket that alone filled the last receive batch (a flood's): the next batch reads
    /// it only if the other sockets gave nothing ([`Device::recv_batch`]).
    flood_rx: Option<usize>,
    fd: OwnedFd,
    ifindex: i32,
    memberships: BTreeSet<[u8; 6]>,
    /// With [`RawSocket::enable_gso`]: PACKET_VNET_HDR's state.
    gso: Option<Box<GsoState>>,
    /// The interface.
    pub info: InterfaceInfo,
}

/// The epoll key of the GSO path's wake descriptor (a receiving socket's is its index + 1).
const EPOLL_KEY_WAKE: u64 = 0;

/// Reads per `recvmmsg` on the GSO path, each up to a 64 KiB GSO frame behind its virtio header.
const GSO_READS: usize = 8;
/// A read's room: the virtio header, Ethernet with a VLAN tag, an IP packet of 64 KiB.
const GSO_READ_LEN: usize = 66 << 10;

/// The GSO path's state (allocated once, at [`RawSocket::enable_gso`]).
#[derive(Debug)]
struct GsoState {
    /// Send runs as GSO frames (until the kernel refuses one).
    send_runs: bool,
    refused: Option<String>,
    id_correction: IdCorrection,
    /// The reads of one `recvmmsg` (each: virtio header, frame) and where splitting got to.
    buf: Vec<u8>,
    reads: [(usize, Segments); GSO_READS],
    n: usize,
    at: usize,
    segment: usize,
    /// Readable while split frames wait here, so that the driver's poll does not sleep on them.
    wake: OwnedFd,
    wake_armed: bool,
}

impl GsoState {
    fn is_drained(&self) -> bool {
        self.at >= self.n
    }
}

fn last_err(what: &str) -> io::Error {
    described(what, io::Error::last_os_error())
}

/// `e` from the call `what`, with what to do about a missing privilege.
fn described(what: &str, e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{what}: permission denied: raw sockets need CAP_NET_RAW (run as root, or `setcap cap_net_raw+ep` on the binary); `roce demo` runs the same stack on a simulated link without it"
            ),
        ),
        _ => io::Error::new(e.kind(), format!("{what}: {e}")),
    }
}

/// An AF_PACKET socket for every protocol (ETH_P_ALL), bound to the interface `info`,
/// non-blocking or not: the start of a [`RawSocket`], and for a user that only needs the
/// descriptor (a test harness). A missing privilege is a `PermissionDenied` error that says
/// what to do.
pub fn packet_socket(info: &InterfaceInfo, nonblocking: bool) -> io::Result<OwnedFd> {
    let proto = (libc::ETH_P_ALL as u16).to_be();
    let flags = libc::SOCK_RAW | libc::SOCK_CLOEXEC | if nonblocking { libc::SOCK_NONBLOCK } else { 0 };
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_PACKET, flags, i32::from(proto)) };
    if fd < 0 {
        return Err(last_err("socket(AF_PACKET)"));
    }
    // SAFETY: fd is a fresh, valid descriptor we own from here on.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_ll is plain data; zeroed is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto;
    sll.sll_ifindex = i32::try_from(info.index).map_err(|_| crate::NetError::InterfaceIndex)?;
    // SAFETY: the pointer and length describe `sll`, which lives across the call.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    if r < 0 {
        return Err(last_err(&format!("bind to {}", info.name)));
    }
    Ok(fd)
}

impl RawSocket {
    /// Open a raw socket on the interface `name`.
    pub fn open(name: &str) -> io::Result<RawSocket> {
        let info = interface(name)?;
        let fd = packet_socket(&info, true)?;
        let ifindex = i32::try_from(info.index).map_err(|_| crate::NetError::InterfaceIndex)?;
        // Our own transmissions would loop back to us: ignore them (Linux ≥ 4.20; older kernels
        // are handled by the PACKET_OUTGOING check in recv).
        ignore_outgoing(&fd);
        Ok(RawSocket {
            rings: None,
            ring_fallback: None,
            stats: RawStats::default(),
            fanout: Vec::new(),
            epoll: None,
            next_rx: 0,
            flood_rx: None,
            fd,
            ifindex,
            memberships: BTreeSet::new(),
            gso: None,
            info,
        })
    }

    /// Send and receive runs of RoCEv2 frames as single GSO frames (PACKET_VNET_HDR): a run
    /// (consecutive IPv4/IPv6 UDP frames with one header but for lengths, checksums and the
    /// IPv4 ID, all of one payload length but the last) leaves as one frame marked
    /// VIRTIO_NET_HDR_GSO_UDP_L4, segmented by the kernel where a device cannot carry it
    /// whole, each segment's ICRC corrected for the IPv4 ID the kernel counts up to; a GSO
    /// frame received is split back into its frames. Frames leave through `sendmmsg` (a
    /// transmit ring's slot holds one MTU frame: not with rings, `InvalidInput`). A kernel
    /// that refuses the runs (before 6.2) has them sent one frame per skb, counted
    /// ([`RawStats::gso_refused`]). spec/rc.md, "The raw transport's GSO path".
    pub fn enable_gso(&mut self) -> io::Result<()> {
        if self.gso.is_some() {
            return Ok(());
        }
        if self.rings.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "GSO goes without packet rings (a ring slot holds one MTU frame, a GSO run up to 64 KiB)",
            ));
        }
        let fds: Vec<RawFd> = self.rx_fds().collect();
        for fd in fds {
            set_int(fd, libc::SOL_PACKET, vnet::PACKET_VNET_HDR, 1, "PACKET_VNET_HDR")?;
        }
        // SAFETY: plain eventfd(2); checked before use.
        let wake = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if wake < 0 {
            return Err(last_err("eventfd"));
        }
        // SAFETY: a fresh descriptor we own from here on.
        let wake = unsafe { OwnedFd::from_raw_fd(wake) };
        self.epoll_add(wake.as_raw_fd(), EPOLL_KEY_WAKE)?;
        self.gso = Some(Box::new(GsoState {
            send_runs: true,
            refused: None,
            id_correction: IdCorrection::default(),
            buf: vec![0; GSO_READS * GSO_READ_LEN],
            reads: [(0, Segments::default()); GSO_READS],
            n: 0,
            at: 0,
            segment: 0,
            wake,
            wake_armed: false,
        }));
        Ok(())
    }

    /// Whether runs leave as GSO frames ([`RawSocket::enable_gso`], and the kernel took them).
    pub fn gso(&self) -> bool {
        self.gso.as_ref().is_some_and(|g| g.send_runs)
    }

    /// Why the kernel refused a GSO run (`None`: it did not, or GSO is off).
    pub fn gso_refused(&self) -> Option<&str> {
        self.gso.as_ref().and_then(|g| g.refused.as_deref())
    }

    /// Add `fd` to the epoll descriptor the driver polls, creating it (over the socket) first;
    /// its events carry `key` (a receiving socket's index + 1, or [`EPOLL_KEY_WAKE`]).
    fn epoll_add(&mut self, fd: RawFd, key: u64) -> io::Result<()> {
        if self.epoll.is_none() {
            // SAFETY: plain epoll_create1; the result is checked before use.
            let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
            if ep < 0 {
                return Err(last_err("epoll_create1"));
            }
            // SAFETY: a fresh descriptor we own from here on.
            self.epoll = Some(unsafe { OwnedFd::from_raw_fd(ep) });
            self.epoll_add(self.fd.as_raw_fd(), 1)?;
        }
        let ep = self.epoll.as_ref().map_or(-1, |e| e.as_raw_fd());
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: key };
        // SAFETY: both descriptors are live; `ev` lives across the call.
        if unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(last_err("epoll_ctl"));
        }
        Ok(())
    }

    /// Open a raw socket on `name` with the PACKET_MMAP rings of `cfg`
    /// ([`RingConfig::NONE`]: as [`RawSocket::open`]). If the kernel refuses the rings, the
    /// socket is reopened without them: [`RawSocket::ring_fallback`] says why and
    /// [`RawStats::ring_fallbacks`] counts it. A bad `cfg` is an `InvalidInput` error.
    pub fn open_with(name: &str, cfg: RingConfig) -> io::Result<RawSocket> {
        cfg.check()?;
        let mut s = RawSocket::open(name)?;
        if !cfg.rx && !cfg.tx {
            // (Without rings the bypass still applies: packet_direct_xmit.)
            if cfg.qdisc_bypass {
                set_int(s.fd.as_raw_fd(), libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, 1, "PACKET_QDISC_BYPASS")?;
            }
            return Ok(s);
        }
        let set_up = s.mtu().and_then(|mtu| Rings::setup(s.fd.as_raw_fd(), &cfg, mtu));
        match set_up {
            Ok(r) => s.rings = Some(r),
            Err(e) => {
                // The socket's ring state is unknown after a partial set-up: start over.
                let mut plain = RawSocket::open(name)?;
                plain.ring_fallback = Some(e.to_string());
                plain.stats.ring_fallbacks = 1;
                return Ok(plain);
            }
        }
        Ok(s)
    }

    /// Spread the frames received over `queues` sockets (1 to [`MAX_FANOUT`]) by flow
    /// (PACKET_FANOUT_HASH: the kernel hashes addresses and ports, so one flow's frames keep
    /// their order in one socket), each with its own kernel queue, read in turn: a flood from
    /// one address fills its own socket's queue, and frames of other flows are not queued or
    /// dropped behind it. Receive buffers are set on every socket; sending stays on the first.
    /// Not with a receive ring (`InvalidInput`); 1 is a no-op.
    pub fn fan_out(&mut self, queues: usize) -> io::Result<()> {
        if !(1..=MAX_FANOUT).contains(&queues) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("1 to {MAX_FANOUT} receive queues (asked: {queues})"),
            ));
        }
        if self.rings.as_ref().is_some_and(|r| r.has_rx()) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "receive queues do not go with a receive ring"));
        }
        if queues == 1 || !self.fanout.is_empty() {
            return Ok(());
        }
        // A group id of the kernel's choosing (never another process's group), read back for
        // the other sockets to join.
        let unique = ((libc::PACKET_FANOUT_HASH | libc::PACKET_FANOUT_FLAG_UNIQUEID) << 16) as libc::c_int;
        set_int(self.fd.as_raw_fd(), libc::SOL_PACKET, libc::PACKET_FANOUT, unique, "PACKET_FANOUT")?;
        let mut group: libc::c_int = 0;
        let mut len = std::mem::size_of_val(&group) as libc::socklen_t;
        // SAFETY: the kernel writes at most `len` bytes into `group`.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_FANOUT,
                (&mut group as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if r < 0 {
            return Err(last_err("getsockopt(PACKET_FANOUT)"));
        }
        let join = (group & 0xffff) | (libc::PACKET_FANOUT_HASH << 16) as libc::c_int;
        for _ in 1..queues {
            let fd = packet_socket(&self.info, true)?;
            ignore_outgoing(&fd);
            if self.gso.is_some() {
                set_int(fd.as_raw_fd(), libc::SOL_PACKET, vnet::PACKET_VNET_HDR, 1, "PACKET_VNET_HDR")?;
            }
            set_int(fd.as_raw_fd(), libc::SOL_PACKET, libc::PACKET_FANOUT, join, "PACKET_FANOUT (join)")?;
            // Its index in the group: after the first socket and the others so far.
            self.epoll_add(fd.as_raw_fd(), self.fanout.len() as u64 + 2)?;
            self.fanout.push(fd);
        }
        Ok(())
    }

    /// How many sockets receive (1 without [`RawSocket::fan_out`]).
    pub fn receive_queues(&self) -> usize {
        1 + self.fanout.len()
    }

    /// The receiving sockets, the first one first.
    fn rx_fds(&self) -> impl Iterator<Item = RawFd> + '_ {
        std::iter::once(self.fd.as_raw_fd()).chain(self.fanout.iter().map(|f| f.as_raw_fd()))
    }

    /// Why the rings asked of [`RawSocket::open_with`] could not be set up (`None`: they
    /// were, or none was asked).
    pub fn ring_fallback(&self) -> Option<&str> {
        self.ring_fallback.as_deref()
    }

    /// Whether frames arrive through the TPACKET_V3 ring and leave through the transmit ring.
    pub fn rings(&self) -> (bool, bool) {
        self.rings.as_ref().map_or((false, false), |r| (r.has_rx(), r.has_tx()))
    }

    /// The interface's MTU (SIOCGIFMTU).
    pub fn mtu(&self) -> io::Result<usize> {
        // SAFETY: ifreq is plain data.
        let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
        for (d, s) in ifr.ifr_name.iter_mut().zip(self.info.name.bytes().take(libc::IFNAMSIZ - 1)) {
            *d = s as libc::c_char;
        }
        // SAFETY: SIOCGIFMTU reads the name and writes the MTU into `ifr`, alive across the call.
        let r = unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::SIOCGIFMTU as _, &mut ifr) };
        if r < 0 {
            return Err(last_err("SIOCGIFMTU"));
        }
        // SAFETY: the kernel filled the MTU member.
        Ok(unsafe { ifr.ifr_ifru.ifru_mtu }.max(0) as usize)
    }

    /// The counters, with the kernel's PACKET_STATISTICS added in (reading them resets the
    /// kernel's copy, so they accumulate here).
    pub fn stats(&mut self) -> RawStats {
        let fds: Vec<RawFd> = self.rx_fds().collect();
        for fd in fds {
            let mut st = [0u32; 3];
            let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
            // SAFETY: the kernel writes at most `len` bytes into `st`.
            let r = unsafe {
                libc::getsockopt(fd, libc::SOL_PACKET, libc::PACKET_STATISTICS, st.as_mut_ptr().cast(), &mut len)
            };
            if r == 0 {
                self.stats.kernel_packets += u64::from(st[0]);
                self.stats.kernel_drops += u64::from(st[1]);
            }
        }
        self.stats
    }

    fn membership(&mut self, mac: [u8; 6], add: bool) -> io::Result<()> {
        self.membership_of(libc::PACKET_MR_MULTICAST, mac, add)
    }

    fn membership_of(&mut self, kind: libc::c_int, mac: [u8; 6], add: bool) -> io::Result<()> {
        // SAFETY: packet_mreq is plain data.
        let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
        mreq.mr_ifindex = self.ifindex;
        mreq.mr_type = kind as u16;
        mreq.mr_alen = 6;
        mreq.mr_address[..6].copy_from_slice(&mac);
        let opt = if add { libc::PACKET_ADD_MEMBERSHIP } else { libc::PACKET_DROP_MEMBERSHIP };
        // SAFETY: the option value points at `mreq`, alive across the call.
        let r = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                opt,
                &mreq as *const libc::packet_mreq as *const libc::c_void,
                std::mem::size_of::<libc::packet_mreq>() as u32,
            )
        };
        if r < 0 {
            return Err(last_err("PACKET_ADD_MEMBERSHIP"));
        }
        Ok(())
    }

    /// Make the interface pass exactly these multicast MACs to us (adds and drops the
    /// differences from the last call).
    pub fn set_multicast(&mut self, macs: &BTreeSet<[u8; 6]>) -> io::Result<()> {
        let add: Vec<[u8; 6]> = macs.difference(&self.memberships).copied().collect();
        let drop: Vec<[u8; 6]> = self.memberships.difference(macs).copied().collect();
        for m in add {
            self.membership(m, true)?;
            self.memberships.insert(m);
        }
        for m in drop {
            self.membership(m, false)?;
            self.memberships.remove(&m);
        }
        Ok(())
    }

    /// Make the interface pass frames sent to the unicast `mac` (a MAC other than its own,
    /// which the stack then uses) through a PACKET_MR_UNICAST membership: the kernel adds it
    /// to the device's unicast filter, or makes the device promiscuous when it has none
    /// (veth); either ends when this socket closes, so the host is never left promiscuous.
    /// The receiving kernel sees such frames as another host's (PACKET_OTHERHOST) and drops
    /// them before routing.
    pub fn add_unicast(&mut self, mac: [u8; 6]) -> io::Result<()> {
        if mac[0] & 1 != 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "a unicast MAC has bit 0 of its first byte clear"));
        }
        self.membership_of(PACKET_MR_UNICAST, mac, true)
    }

    /// The multicast MACs currently joined.
    pub fn multicast(&self) -> &BTreeSet<[u8; 6]> {
        &self.memberships
    }

    /// Set the kernel's receive and send buffer sizes (bytes, up to 256 MiB each): beyond
    /// `net.core.rmem_max`/`wmem_max` with CAP_NET_ADMIN (SO_RCVBUFFORCE), else capped by them.
    /// With [`RawSocket::fan_out`], every receiving socket gets them.
    pub fn set_buffer_sizes(&mut self, rcv: usize, snd: usize) -> io::Result<()> {
        for fd in self.rx_fds() {
            set_buffer_sizes(fd, rcv, snd)?;
        }
        Ok(())
    }
}

/// Set `fd`'s receive and send buffer sizes (bytes, up to 256 MiB each): beyond
/// `net.core.rmem_max`/`wmem_max` with CAP_NET_ADMIN (SO_RCVBUFFORCE), else capped by them.
pub(crate) fn set_buffer_sizes(fd: std::os::fd::RawFd, rcv: usize, snd: usize) -> io::Result<()> {
    const MAX: usize = 256 << 20;
    if rcv > MAX || snd > MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("socket buffers are at most {MAX} bytes (asked: receive {rcv}, send {snd})"),
        ));
    }
    for (force, plain, v) in
        [(libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, rcv), (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, snd)]
    {
        let v = v as libc::c_int;
        // SAFETY: the option value points at a live c_int.
        let set = |opt| unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                &v as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if set(force) < 0 && set(plain) < 0 {
            return Err(last_err("setsockopt(SO_RCVBUF/SO_SNDBUF)"));
        }
    }
    Ok(())
}

/// Our own transmissions would loop back to a packet socket: ignore them (Linux ≥ 4.20; older
/// kernels are handled by the PACKET_OUTGOING check in recv).
fn ignore_outgoing(fd: &OwnedFd) {
    // PACKET_IGNORE_OUTGOING is 23; an older kernel refuses it, which the check covers.
    let _ = set_int(fd.as_raw_fd(), libc::SOL_PACKET, 23, 1, "PACKET_IGNORE_OUTGOING");
}

/// The most sockets [`RawSocket::fan_out`] spreads frames over.
pub const MAX_FANOUT: usize = 64;

/// Set an integer socket option; an error names `what`.
pub(crate) fn set_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
    what: &str,
) -> io::Result<()> {
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
        return Err(last_err(what));
    }
    Ok(())
}

/// Frames per `sendmmsg`/`recvmmsg` call (the headers live on the stack: no allocation).
const MMSG: usize = 64;

fn zeroed_mmsghdr() -> libc::mmsghdr {
    // SAFETY: mmsghdr is plain data (pointers and integers); all zeroes is a valid value.
    unsafe { std::mem::zeroed() }
}

impl RawSocket {
    /// The GSO path's send: each run of `frames` as one GSO frame (or, alone, a frame behind
    /// an empty virtio header), all in one `sendmmsg` per 64 frames.
    fn send_batch_gso(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        let mut sent = 0;
        while sent < frames.len() {
            let chunk = &frames[sent..frames.len().min(sent + MMSG)];
            match self.send_runs(chunk) {
                Ok(m) => {
                    sent += m;
                    if m < chunk.len() {
                        break; // the kernel took fewer (a full queue): the caller sees how many
                    }
                }
                Err(e) if sent == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(sent)
    }

    /// Up to 64 frames in one `sendmmsg`: how many the kernel took, or the first message's
    /// error if it took none.
    fn send_runs(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        let Some(g) = self.gso.as_mut() else { return Ok(0) };
        let n = frames.len().min(MMSG);
        let mut items: [RunFrame<'_>; MMSG] = std::array::from_fn(|_| RunFrame::EMPTY);
        for (it, f) in items.iter_mut().zip(frames) {
            *it = RunFrame::of(f);
        }
        // Runs gather a flow's frames past other QPs' (each QP has its own UDP source port).
        let (mut order, mut runs) = ([0usize; gso::MAX_BATCH], [(0usize, 0usize); MMSG]);
        let n_runs = gso::split_flow_runs(&items[..n], g.send_runs, true, &mut order, &mut runs);
        // First every header and ICRC, then the iovecs pointing at them, then the messages
        // pointing at the iovecs: no buffer is written once a pointer into it is taken.
        let mut vnets = [[0u8; VNET_HDR_LEN]; MMSG];
        let mut hdrs = [[0u8; 64]; MMSG];
        let mut hdr_lens = [0usize; MMSG];
        let mut icrcs = [[0u8; 4]; MMSG];
        for (r, &(start, k)) in runs[..n_runs].iter().enumerate() {
            if k < 2 {
                continue;
            }
            let run = &order[start..start + k];
            let payload = run.iter().map(|&i| items[i].payload_len()).sum();
            (hdr_lens[r], vnets[r]) = vnet::run_headers(&items[run[0]], payload, &mut hdrs[r]);
            // inet_gso_segment gives segment j the first's ID + j: its ICRC must say so.
            let first_id = items[run[0]].ipv4_id();
            for (j, &i) in run.iter().enumerate() {
                let f = &items[i];
                icrcs[i] = match (first_id, f.ipv4_id()) {
                    (Some(id), Some(have)) => {
                        g.id_correction.icrc(f.icrc(), f.icrc_covered_len(), have, id.wrapping_add(j as u16))
                    }
                    _ => f.icrc(),
                };
            }
        }
        let mut iovs = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; 4 * MMSG];
        let mut starts = [(0usize, 0usize); MMSG];
        let mut used = 0;
        let iov = |b: &[u8]| libc::iovec { iov_base: b.as_ptr() as *mut libc::c_void, iov_len: b.len() };
        for (r, &(start, k)) in runs[..n_runs].iter().enumerate() {
            let at = used;
            iovs[used] = iov(&vnets[r]);
            if k < 2 {
                iovs[used + 1] = iov(items[order[start]].frame());
                used += 2;
            } else {
                iovs[used + 1] = iov(&hdrs[r][..hdr_lens[r]]);
                used += 2;
                for &j in &order[start..start + k] {
                    iovs[used] = iov(items[j].body());
                    iovs[used + 1] = iov(&icrcs[j]);
                    used += 2;
                }
            }
            starts[r] = (at, used - at);
        }
        let mut msgs = [zeroed_mmsghdr(); MMSG];
        for (m, &(at, len)) in msgs.iter_mut().zip(&starts[..n_runs]) {
            m.msg_hdr.msg_iov = &mut iovs[at];
            m.msg_hdr.msg_iovlen = len;
        }
        // Which frames went out: runs may take frames of one flow past others', so what the
        // caller is told was taken is the prefix of `frames` that all went out.
        let mut sent = [false; MMSG];
        let out = gso::send_messages(self.fd.as_raw_fd(), &mut msgs[..n_runs]);
        for &(start, k) in &runs[..out.taken] {
            for &i in &order[start..start + k] {
                sent[i] = true;
            }
            if k > 1 {
                self.stats.gso_runs += 1;
                self.stats.gso_run_frames += k as u64;
            }
        }
        if let Some(e) = out.error {
            let k = runs[out.taken].1;
            if k > 1 && e.raw_os_error() == Some(libc::EINVAL) {
                // A kernel without VIRTIO_NET_HDR_GSO_UDP_L4 (before 6.2): one frame per
                // skb from here on, the frames not sent yet too, in their order.
                self.stats.gso_refused += 1;
                g.send_runs = false;
                g.refused = Some(format!("the kernel refused a GSO run of {k} frames: {e}"));
                let mut rest: [&[u8]; MMSG] = [&[]; MMSG];
                let mut at = [0usize; MMSG];
                let mut m = 0;
                for i in (0..n).filter(|&i| !sent[i]) {
                    (rest[m], at[m]) = (frames[i], i);
                    m += 1;
                }
                let took = self.send_runs(&rest[..m]);
                for &i in &at[..*took.as_ref().unwrap_or(&0)] {
                    sent[i] = true;
                }
                let prefix = sent[..n].iter().take_while(|s| **s).count();
                return match took {
                    Err(e) if prefix == 0 => Err(e),
                    _ => Ok(prefix),
                };
            }
            if out.taken == 0 {
                return Err(described("sendmmsg", e));
            }
        }
        // (A frame of a later message sent past an earlier one the kernel did not take goes
        // again with the rest: a duplicate, which RC discards by its PSN; not a loss.)
        Ok(sent[..n].iter().take_while(|s| **s).count())
    }

    /// The GSO path's next frame into `out`: the next segment of the reads already taken, or
    /// new reads (one `recvmmsg` on the receiving sockets in turn). A frame longer than `out`
    /// is an `InvalidInput` error and stays next; GSO frames that are not UDP are dropped and
    /// counted ([`RawStats::gso_not_udp`]), frames beyond a read's 66 KiB too ([`RawStats::truncated`]).
    fn recv_gso(&mut self, out: &mut [u8]) -> io::Result<Option<usize>> {
        if self.gso.as_ref().is_none_or(|g| g.is_drained()) && self.fill_gso_reads()? == 0 {
            return Ok(None);
        }
        self.next_gso_frame(out)
    }

    /// The next frame split from the reads already taken into `out` (`None`: none left); one
    /// longer than `out` is an `InvalidInput` error and stays next.
    fn next_gso_frame(&mut self, out: &mut [u8]) -> io::Result<Option<usize>> {
        let Some(g) = self.gso.as_deref_mut().filter(|g| !g.is_drained()) else { return Ok(None) };
        let (len, seg) = g.reads[g.at];
        let i = g.segment;
        if seg.frame_len(i) > out.len() {
            // Stays next: the caller may take it with a larger buffer.
            return Err(crate::device::too_small(seg.frame_len(i), out.len()));
        }
        g.segment += 1;
        let at = g.at * GSO_READ_LEN + VNET_HDR_LEN;
        if g.segment >= seg.count() {
            (g.at, g.segment) = (g.at + 1, 0);
        }
        Ok(Some(seg.write(&g.buf[at..at + len], i, out)))
    }

    /// One `recvmmsg` of up to [`GSO_READS`] frames (each behind its virtio header) from the
    /// receiving sockets in turn: how many were kept.
    fn fill_gso_reads(&mut self) -> io::Result<usize> {
        let n_fds = self.receive_queues();
        for k in 0..n_fds {
            let i = (self.next_rx + k) % n_fds;
            let (got, kept) = self.fill_gso_reads_from(i)?;
            if got > 0 {
                self.next_rx = (i + 1) % n_fds;
            }
            if kept > 0 {
                return Ok(kept);
            }
        }
        Ok(0)
    }

    /// One `recvmmsg` of up to [`GSO_READS`] frames from receiving socket `i`: how many it
    /// read, and how many of them were kept (the reads split from here on).
    fn fill_gso_reads_from(&mut self, i: usize) -> io::Result<(usize, usize)> {
        let fd = self.rx_fd(i);
        let Some(g) = self.gso.as_mut() else { return Ok((0, 0)) };
        (g.n, g.at, g.segment) = (0, 0, 0);
        let (mut lens, mut outgoing) = ([0usize; MMSG], [false; MMSG]);
        let got = recvmmsg_rooms(fd, g.buf.chunks_exact_mut(GSO_READ_LEN), &mut lens, &mut outgoing)?;
        for r in 0..got {
            if outgoing[r] {
                continue;
            }
            // The length is the virtio header's and the whole frame's (MSG_TRUNC).
            let len = lens[r].saturating_sub(VNET_HDR_LEN);
            if len + VNET_HDR_LEN > GSO_READ_LEN {
                self.stats.truncated += 1;
                continue;
            }
            let at = r * GSO_READ_LEN;
            let read = &g.buf[at..at + VNET_HDR_LEN + len];
            match Segments::of(&read[..VNET_HDR_LEN], &read[VNET_HDR_LEN..]) {
                Ok(seg) => {
                    if seg.count() > 1 {
                        self.stats.gso_reads += 1;
                        self.stats.gso_split_frames += seg.count() as u64;
                    }
                    // The kept reads are the first `n` (one skipped before: moved down).
                    g.reads[g.n] = (len, seg);
                    if g.n != r {
                        g.buf.copy_within(at..at + VNET_HDR_LEN + len, g.n * GSO_READ_LEN);
                    }
                    g.n += 1;
                }
                Err(vnet::SplitError::NotUdpGso) => self.stats.gso_not_udp += 1,
            }
        }
        Ok((got, g.n))
    }

    /// Receiving socket `i` (0: the first; then the fanout group's others).
    fn rx_fd(&self, i: usize) -> RawFd {
        if i == 0 {
            self.fd.as_raw_fd()
        } else {
            self.fanout[i - 1].as_raw_fd()
        }
    }

    /// The GSO path's batch: the frames split from reads already taken, then the sockets in
    /// turn as [`Device::recv_batch`] reads them (a socket read again while it has frames and
    /// the batch room; the one that alone filled the last batch last, and not at all when the
    /// others gave frames), each read split into its frames.
    fn recv_batch_gso(&mut self, batch: &mut RecvBatch) -> io::Result<usize> {
        if !self.gso_frames_into(batch)? {
            return Ok(batch.len());
        }
        let n = self.receive_queues();
        let (start, flood) = (self.next_rx, self.flood_rx.take());
        for k in 0..n {
            let i = (start + k) % n;
            if flood == Some(i) && !batch.is_empty() {
                break;
            }
            let before = batch.len();
            loop {
                let (got, kept) = match self.fill_gso_reads_from(i) {
                    Ok(r) => r,
                    Err(e) if batch.is_empty() => return Err(e),
                    Err(_) => return Ok(batch.len()),
                };
                if kept > 0 && !self.gso_frames_into(batch)? {
                    self.batch_filled_by(i, before == 0);
                    return Ok(batch.len());
                }
                if got < GSO_READS {
                    break;
                }
            }
        }
        Ok(batch.len())
    }

    /// Move the frames split from the reads taken into `batch`'s next slots: `true` when all
    /// went in, `false` when the batch is full or the next frame is longer than a slot (it
    /// stays next; an `InvalidInput` error if the batch is empty, for the caller to take it
    /// alone).
    fn gso_frames_into(&mut self, batch: &mut RecvBatch) -> io::Result<bool> {
        while batch.len() < batch.capacity() {
            let slot = batch.len();
            match self.next_gso_frame(batch.slot_mut(slot)) {
                Ok(Some(len)) => batch.push(slot, len),
                Ok(None) => return Ok(true),
                Err(e) if batch.is_empty() => return Err(e),
                Err(_) => return Ok(false),
            }
        }
        Ok(false)
    }

    /// Receiving socket `i` filled the batch (`alone`: every frame of it): the next batch
    /// starts after it, and when it was alone (a flood's backlog) reads it only if the other
    /// sockets give nothing, so that another host's frame waits for one batch's reading at
    /// most, never for another batch of the flood's. One such short batch at a time: the
    /// batch after it reads that socket again, whatever the others hold.
    fn batch_filled_by(&mut self, i: usize, alone: bool) {
        self.next_rx = (i + 1) % self.receive_queues();
        if alone && self.receive_queues() > 1 {
            self.flood_rx = Some(i);
        }
    }

    /// Keep the wake descriptor readable exactly while split frames wait in the reads.
    fn sync_gso_wake(&mut self) {
        let Some(g) = self.gso.as_mut() else { return };
        let pending = !g.is_drained();
        if pending != g.wake_armed {
            let mut v = 1u64;
            // SAFETY: an 8-byte write to or read from our eventfd (non-blocking).
            unsafe {
                if pending {
                    libc::write(g.wake.as_raw_fd(), (&v as *const u64).cast(), 8);
                } else {
                    libc::read(g.wake.as_raw_fd(), (&mut v as *mut u64).cast(), 8);
                }
            }
            g.wake_armed = pending;
        }
    }
}

impl Device for RawSocket {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        if self.gso.is_some() {
            return self.send_batch(&[frame]).map(|_| ());
        }
        if self.rings.as_ref().is_some_and(|r| r.has_tx()) {
            return self.send_batch(&[frame]).map(|_| ());
        }
        // SAFETY: the buffer pointer and length describe `frame`.
        let r = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr() as *const libc::c_void, frame.len(), 0) };
        if r < 0 {
            return Err(last_err("send"));
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        if self.gso.is_some() {
            let got = self.recv_gso(buf);
            self.sync_gso_wake();
            return got;
        }
        if let Some(rings) = self.rings.as_mut().filter(|r| r.has_rx()) {
            loop {
                let got = rings.rx_next(|f| match f {
                    RxFrame::Frame(f) if f.len() <= buf.len() => {
                        buf[..f.len()].copy_from_slice(f);
                        Ok(Some(f.len()))
                    }
                    RxFrame::Frame(f) => Err(f.len()),
                    RxFrame::Truncated(n) => Err(n),
                    RxFrame::Outgoing => Ok(None),
                });
                return match got {
                    None => Ok(None),
                    Some(Ok(Some(n))) => Ok(Some(n)),
                    Some(Ok(None)) => continue,
                    Some(Err(n)) => {
                        self.stats.truncated += 1;
                        Err(io::Error::new(
                            io::ErrorKind::InvalidInput,
                            format!("frame of {n} bytes truncated to {}", buf.len()),
                        ))
                    }
                };
            }
        }
        // The sockets of a fanout group in turn, from the one after the last that had a frame.
        let n = self.receive_queues();
        for k in 0..n {
            let i = (self.next_rx + k) % n;
            let fd = self.rx_fd(i);
            if let Some(len) = recv_one(fd, buf)? {
                self.next_rx = (i + 1) % n;
                return Ok(Some(len));
            }
        }
        Ok(None)
    }

    /// The socket's descriptor, or with [`RawSocket::fan_out`] an epoll descriptor readable
    /// when any of the group's sockets is.
    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.epoll.as_ref().unwrap_or(&self.fd).as_raw_fd())
    }

    /// One `epoll_wait` with no timeout on the fanout group's epoll descriptor: whether a
    /// receiving socket other than the one that alone filled the last batch is readable.
    fn rx_ready_beside_flood(&self) -> bool {
        let Some(ep) = self.epoll.as_ref().filter(|_| !self.fanout.is_empty()) else { return false };
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 1 + MAX_FANOUT + 1];
        // SAFETY: `events` is live and holds the count given; no timeout.
        let n = unsafe { libc::epoll_wait(ep.as_raw_fd(), events.as_mut_ptr(), events.len() as libc::c_int, 0) };
        let flood = self.flood_rx.map(|i| i as u64 + 1);
        events[..usize::try_from(n).unwrap_or(0)].iter().any(|e| {
            let key = e.u64;
            key != EPOLL_KEY_WAKE && Some(key) != flood
        })
    }

    /// `sendmmsg(2)`, up to 64 frames a call; or, with a transmit ring, the frames written into
    /// its slots and one `send` kick for the batch (a full ring is kicked and waited for).
    fn send_batch(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        if self.gso.is_some() {
            return self.send_batch_gso(frames);
        }
        if let Some(rings) = self.rings.as_mut().filter(|r| r.has_tx()) {
            let fd = self.fd.as_raw_fd();
            let mut taken = 0;
            for f in frames {
                let mut put = rings.tx_put(f);
                if matches!(put, Ok(false)) {
                    // Full: send what is queued and wait until the slots come back.
                    self.stats.tx_kicks += 1;
                    if let Err(e) = rings.tx_kick(fd, true) {
                        let e = io::Error::new(e.kind(), format!("send (transmit ring): {e}"));
                        return if taken == 0 { Err(e) } else { Ok(taken) };
                    }
                    put = rings.tx_put(f);
                }
                match put {
                    Ok(true) => taken += 1,
                    Ok(false) => break, // still full after the wait: the caller sees how many
                    Err(e) => {
                        if taken == 0 {
                            return Err(e);
                        }
                        break;
                    }
                }
            }
            if rings.tx_queued() > 0 {
                self.stats.tx_kicks += 1;
                rings.tx_kick(fd, false).map_err(|e| io::Error::new(e.kind(), format!("send (transmit ring): {e}")))?;
            }
            return Ok(taken);
        }
        let mut sent = 0;
        while sent < frames.len() {
            let chunk = &frames[sent..frames.len().min(sent + MMSG)];
            let mut iov = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; MMSG];
            let mut hdrs = [zeroed_mmsghdr(); MMSG];
            for (i, f) in chunk.iter().enumerate() {
                iov[i] = libc::iovec { iov_base: f.as_ptr() as *mut libc::c_void, iov_len: f.len() };
                hdrs[i].msg_hdr.msg_iov = &mut iov[i];
                hdrs[i].msg_hdr.msg_iovlen = 1;
            }
            // The socket is bound: no address is needed.
            let out = gso::send_messages(self.fd.as_raw_fd(), &mut hdrs[..chunk.len()]);
            sent += out.taken;
            if let Some(e) = out.error {
                return if sent == 0 { Err(described("sendmmsg", e)) } else { Ok(sent) };
            }
            if out.taken < chunk.len() {
                break; // the kernel took fewer (a full queue): the caller sees how many
            }
        }
        Ok(sent)
    }

    /// `recvmmsg(2)`, up to 64 frames a call, or the frames waiting in the receive ring (no
    /// system call); our own looped-back frames are skipped, and frames longer than a slot are
    /// dropped and counted ([`RawStats::truncated`]).
    fn recv_batch(&mut self, batch: &mut RecvBatch) -> io::Result<usize> {
        batch.clear();
        if self.gso.is_some() {
            let got = self.recv_batch_gso(batch);
            self.sync_gso_wake();
            return got;
        }
        if let Some(rings) = self.rings.as_mut().filter(|r| r.has_rx()) {
            let mut slot = 0;
            let mut truncated = 0;
            while slot < batch.capacity() {
                let Some(ok) = rings.rx_next(|f| match f {
                    RxFrame::Frame(f) if f.len() <= batch.slot_len() => {
                        batch.slot_mut(slot)[..f.len()].copy_from_slice(f);
                        batch.push(slot, f.len());
                        true
                    }
                    RxFrame::Outgoing => false,
                    RxFrame::Frame(_) | RxFrame::Truncated(_) => {
                        truncated += 1;
                        false
                    }
                }) else {
                    break;
                };
                slot += usize::from(ok);
            }
            self.stats.truncated += truncated;
            return Ok(batch.len());
        }
        // The sockets of a fanout group in turn, each until it is empty or the batch is full;
        // the socket that filled the last batch (a flood's) is read last, so frames that wait
        // in the others are read in the very next batch; and when it filled that batch alone,
        // not at all if the others gave frames: those are handled (and answered) first.
        let n = self.receive_queues();
        let (start, flood) = (self.next_rx, self.flood_rx.take());
        let mut next_slot = 0;
        for k in 0..n {
            let i = (start + k) % n;
            if flood == Some(i) && !batch.is_empty() {
                break;
            }
            let (fd, before) = (self.rx_fd(i), next_slot);
            while next_slot < batch.capacity() {
                let (used, more) = recvmmsg_into(fd, batch, next_slot, &mut self.stats)?;
                next_slot += used;
                if !more {
                    break;
                }
            }
            if next_slot == batch.capacity() {
                self.batch_filled_by(i, before == 0);
                break;
            }
        }
        Ok(batch.len())
    }
}

/// One frame from packet socket `fd` into `buf` (`None`: none waiting), our own looped-back
/// frames skipped; a frame longer than `buf` is an `InvalidInput` error (it is consumed).
fn recv_one(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    loop {
        // SAFETY: sockaddr_ll is plain data.
        let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: buf and from are live and their lengths are given.
        let r = unsafe {
            libc::recvfrom(
                fd,
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                libc::MSG_TRUNC | libc::MSG_DONTWAIT,
                &mut from as *mut libc::sockaddr_ll as *mut libc::sockaddr,
                &mut len,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
                _ => Err(last_err("recv")),
            };
        }
        if from.sll_pkttype == libc::PACKET_OUTGOING {
            continue; // our own frame, looped back
        }
        let n = r as usize;
        if n > buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("frame of {n} bytes truncated to {}", buf.len()),
            ));
        }
        return Ok(Some(n));
    }
}

/// One `recvmmsg(2)` from packet socket `fd` into `batch`'s slots from `first` on (at most 64):
/// the slots it used, and whether more frames may wait (it filled every slot it offered). Our
/// own looped-back frames are skipped, frames longer than a slot dropped and counted.
fn recvmmsg_into(fd: RawFd, batch: &mut RecvBatch, first: usize, stats: &mut RawStats) -> io::Result<(usize, bool)> {
    let n = (batch.capacity() - first).min(MMSG);
    let slot_len = batch.slot_len();
    let (mut lens, mut outgoing) = ([0usize; MMSG], [false; MMSG]);
    let r = recvmmsg_rooms(fd, batch.slots_mut().skip(first).take(n), &mut lens, &mut outgoing)?;
    for i in 0..r {
        if outgoing[i] {
            continue;
        }
        if lens[i] > slot_len {
            stats.truncated += 1; // consumed already (MSG_TRUNC): dropped, counted
            continue;
        }
        batch.push(first + i, lens[i]);
    }
    Ok((r, r == n))
}

/// One `recvmmsg(2)` from packet socket `fd`, each frame into the next of `rooms` (at most
/// 64): how many were read (0: none waiting), each one's whole length (MSG_TRUNC: it may
/// exceed its room) in `lens`, and whether it is our own looped back in `outgoing`.
fn recvmmsg_rooms<'a>(
    fd: RawFd,
    rooms: impl Iterator<Item = &'a mut [u8]>,
    lens: &mut [usize; MMSG],
    outgoing: &mut [bool; MMSG],
) -> io::Result<usize> {
    let mut iov = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; MMSG];
    // SAFETY: sockaddr_ll is plain data.
    let mut from: [libc::sockaddr_ll; MMSG] = unsafe { std::mem::zeroed() };
    let mut hdrs = [zeroed_mmsghdr(); MMSG];
    let mut n = 0;
    for (i, room) in rooms.take(MMSG).enumerate() {
        iov[i] = libc::iovec { iov_base: room.as_mut_ptr() as *mut libc::c_void, iov_len: room.len() };
        hdrs[i].msg_hdr.msg_iov = &mut iov[i];
        hdrs[i].msg_hdr.msg_iovlen = 1;
        hdrs[i].msg_hdr.msg_name = &mut from[i] as *mut libc::sockaddr_ll as *mut libc::c_void;
        hdrs[i].msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        n = i + 1;
    }
    // SAFETY: every header points at a live iovec over its own room (the caller's buffers,
    // borrowed for this call) and at its own sockaddr_ll, all alive across the call; no timeout.
    let r = unsafe {
        libc::recvmmsg(
            fd,
            hdrs.as_mut_ptr(),
            n as libc::c_uint,
            libc::MSG_TRUNC | libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(0),
            _ => Err(last_err("recvmmsg")),
        };
    }
    let r = r as usize;
    for i in 0..r {
        lens[i] = hdrs[i].msg_len as usize;
        outgoing[i] = from[i].sll_pkttype == libc::PACKET_OUTGOING;
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A UDP frame to port 4791 of flow `flow` (198.18.9.`flow`, source port 0xc000 + `flow`)
    /// carrying its sequence number `seq`.
    fn flow_frame(flow: u8, seq: u32) -> Vec<u8> {
        let mut f = Vec::new();
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([198, 18, 9, flow], [198, 18, 9, 200], 64)
            .udp(0xc000 + u16::from(flow), 4791)
            .write(&mut f, &seq.to_be_bytes())
            .unwrap();
        f
    }

    /// A fanout group of 4 sockets on one end of a veth pair (in a network namespace of the
    /// test's own thread): UDP frames of 8 flows, interleaved, all arrive through the group's
    /// epoll descriptor and batches, each flow's in order; the kernel's counts are summed over
    /// the sockets. Needs root (CI runs as root): a missing privilege is a failure.
    #[test]
    fn a_fanout_group_receives_every_flow_in_order() {
        std::thread::spawn(|| {
            crate::veth_in_own_netns("f1", "f2");
            let mut a = RawSocket::open("f1").unwrap();
            let mut b = RawSocket::open("f2").unwrap();
            b.fan_out(4).unwrap();
            assert_eq!(b.receive_queues(), 4);
            assert_eq!(b.fan_out(0).unwrap_err().kind(), io::ErrorKind::InvalidInput);
            let frame = flow_frame;
            let sent: Vec<Vec<u8>> = (0..50).flat_map(|seq| (1..=8).map(move |flow| frame(flow, seq))).collect();
            let refs: Vec<&[u8]> = sent.iter().map(|f| &f[..]).collect();
            assert_eq!(a.send_batch(&refs).unwrap(), 400);
            let mut batch = RecvBatch::new(64, 2048).unwrap();
            let mut seqs = vec![Vec::new(); 9];
            let end = Instant::now() + Duration::from_secs(5);
            while seqs.iter().map(Vec::len).sum::<usize>() < 400 && Instant::now() < end {
                if b.recv_batch(&mut batch).unwrap() == 0 {
                    let mut p = libc::pollfd { fd: b.raw_fd().unwrap(), events: libc::POLLIN, revents: 0 };
                    // SAFETY: one live pollfd.
                    unsafe { libc::poll(&mut p, 1, 10) };
                }
                for f in batch.iter().filter(|f| f.len() >= 46 && f[23] == 17 && f[36..38] == [0x12, 0xb7]) {
                    seqs[usize::from(f[29])].push(u32::from_be_bytes(f[42..46].try_into().unwrap()));
                }
            }
            for (flow, s) in seqs.iter().enumerate().skip(1) {
                assert_eq!(s, &(0..50).collect::<Vec<u32>>(), "flow {flow}");
            }
            // Nothing left: the epoll descriptor polls idle.
            let mut p = libc::pollfd { fd: b.raw_fd().unwrap(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one live pollfd.
            let ready = unsafe { libc::poll(&mut p, 1, 50) };
            assert!(ready == 0 || b.recv_batch(&mut batch).unwrap() == 0 || batch.iter().all(|f| f[12..14] != [8, 0]));
            let st = b.stats();
            assert!(st.kernel_packets >= 400, "{st:?}");
            assert_eq!(st.kernel_drops, 0);
        })
        .join()
        .unwrap();
    }

    /// A flood's socket waits while another flow is read: once one socket of a fanout group
    /// filled a receive batch alone, `rx_ready_beside_flood` tells when another socket has
    /// frames, the next batch takes only what the other sockets hold (another host's frames,
    /// handled before more of the flood), and the batch after reads the flood's socket again;
    /// no frame is lost or reordered. Both receive paths (recvmmsg,
    /// and the GSO path's reads). Needs root (CI runs as root).
    #[test]
    fn a_flood_waits_while_another_flow_is_read() {
        for gso in [false, true] {
            std::thread::spawn(move || {
                crate::veth_in_own_netns("h1", "h2");
                // No IPv6 on the link (its router solicitations and MLD reports would land
                // in the batches): only the test's frames.
                for end in ["h1", "h2"] {
                    std::fs::write(format!("/proc/sys/net/ipv6/conf/{end}/disable_ipv6"), "1").unwrap();
                }
                let mut a = RawSocket::open("h1").unwrap();
                let mut b = RawSocket::open("h2").unwrap();
                b.fan_out(4).unwrap();
                if gso {
                    b.enable_gso().unwrap();
                }
                let mut batch = RecvBatch::new(16, 2048).unwrap();
                std::thread::sleep(Duration::from_millis(20));
                while b.recv_batch(&mut batch).unwrap() > 0 {}
                let frame = flow_frame;
                // Wait for what was sent to reach the sockets.
                let settle = |b: &RawSocket| {
                    let mut p = libc::pollfd { fd: b.raw_fd().unwrap(), events: libc::POLLIN, revents: 0 };
                    // SAFETY: one live pollfd.
                    unsafe { libc::poll(&mut p, 1, 1000) };
                    std::thread::sleep(Duration::from_millis(20));
                };
                let ours = |f: &&[u8]| f.len() >= 46 && f[23] == 17 && f[36..38] == [0x12, 0xb7];
                let mut seqs = vec![Vec::new(); 9];
                let mut take = |b: &mut RawSocket, seqs: &mut Vec<Vec<u32>>| {
                    b.recv_batch(&mut batch).unwrap();
                    let flows: Vec<u8> = batch.iter().filter(ours).map(|f| f[29]).collect();
                    for f in batch.iter().filter(ours) {
                        seqs[usize::from(f[29])].push(u32::from_be_bytes(f[42..46].try_into().unwrap()));
                    }
                    flows
                };
                // The flood (flow 1) alone fills a batch.
                let flood: Vec<Vec<u8>> = (0..100).map(|seq| frame(1, seq)).collect();
                let refs: Vec<&[u8]> = flood.iter().map(|f| &f[..]).collect();
                assert_eq!(a.send_batch(&refs).unwrap(), 100);
                settle(&b);
                assert_eq!(take(&mut b, &mut seqs), vec![1; 16], "gso {gso}");
                // Only the flood's socket holds frames: nothing else to read.
                assert!(!b.rx_ready_beside_flood(), "gso {gso}");
                // One frame of each of 7 other flows: some hash to other sockets than the
                // flood's (all 7 into its socket: 1 in 4^7). The next batch is theirs alone.
                let others: Vec<Vec<u8>> = (2..=8).map(|flow| frame(flow, 0)).collect();
                let refs: Vec<&[u8]> = others.iter().map(|f| &f[..]).collect();
                assert_eq!(a.send_batch(&refs).unwrap(), 7);
                settle(&b);
                assert!(b.rx_ready_beside_flood(), "gso {gso}");
                let short = take(&mut b, &mut seqs);
                assert!(!short.is_empty() && !short.contains(&1), "gso {gso}: {short:?}");
                // Then the flood's socket is read again.
                assert!(take(&mut b, &mut seqs).contains(&1), "gso {gso}");
                let end = Instant::now() + Duration::from_secs(5);
                while seqs.iter().map(Vec::len).sum::<usize>() < 107 && Instant::now() < end {
                    take(&mut b, &mut seqs);
                }
                assert_eq!(seqs[1], (0..100).collect::<Vec<u32>>(), "gso {gso}");
                for (flow, s) in seqs.iter().enumerate().skip(2) {
                    assert_eq!(s, &[0], "gso {gso}: flow {flow}");
                }
            })
            .join()
            .unwrap();
        }
    }

    /// The GSO path on a veth pair (in a network namespace of the test's own thread): runs
    /// of RoCEv2 frames (IPv4 and IPv6, a shorter last one, an ARP frame between) leave as a
    /// few GSO frames, veth passes them whole, and the receiver splits them back into frames
    /// whose ICRC and IPv4 checksum hold, IDs counting up within each run. Then with UDP
    /// segmentation off on the sending end (as before a device without it: a qemu tap), the
    /// kernel segments, and a plain socket receives ordinary frames whose ICRC holds. Needs
    /// root (CI runs as root): a missing privilege is a failure.
    #[test]
    fn gso_runs_cross_a_veth_pair_and_split_back() {
        use crate::udp::tests::rc_engine_frame as engine_frame;
        std::thread::spawn(|| {
            crate::veth_in_own_netns("g1", "g2");
            let mut a = RawSocket::open("g1").unwrap();
            let mut b = RawSocket::open("g2").unwrap();
            a.enable_gso().unwrap();
            b.enable_gso().unwrap();
            assert!(RawSocket::open_with("g1", RingConfig::tx_only()).unwrap().enable_gso().is_err());
            let (a4, b4): (IpAddr, IpAddr) = ("10.9.0.1".parse().unwrap(), "10.9.0.2".parse().unwrap());
            let (a6, b6): (IpAddr, IpAddr) = ("fd09::1".parse().unwrap(), "fd09::2".parse().unwrap());
            let mut sent: Vec<Vec<u8>> = (0..100u8).map(|i| engine_frame(a4, b4, 0xc001, &[i; 1024])).collect();
            sent.push(engine_frame(a4, b4, 0xc001, &[0xee; 100]));
            let arp =
                roce_wire::arp::request([2, 0, 0, 0, 0, 1], "10.9.0.1".parse().unwrap(), "10.9.0.2".parse().unwrap());
            let mut f = vec![0u8; 64];
            let n = roce_wire::l2::EmitFrame::emit(&roce_wire::l2::ArpFrame::new(arp), &mut f);
            sent.push(f[..n].to_vec());
            sent.extend((0..20u8).map(|i| engine_frame(a6, b6, 0xc001, &[i; 900])));
            let refs: Vec<&[u8]> = sent.iter().map(|f| &f[..]).collect();
            let receive = |b: &mut RawSocket, want: usize| {
                let mut batch = RecvBatch::new(64, 9216).unwrap();
                let mut got: Vec<Vec<u8>> = Vec::new();
                let end = Instant::now() + Duration::from_secs(5);
                while got.len() < want && Instant::now() < end {
                    if b.recv_batch(&mut batch).unwrap() == 0 {
                        let mut p = libc::pollfd { fd: b.raw_fd().unwrap(), events: libc::POLLIN, revents: 0 };
                        // SAFETY: one live pollfd.
                        unsafe { libc::poll(&mut p, 1, 10) };
                    }
                    // (IPv6 also brings the kernel's own ND and MLD frames: RoCEv2 and ARP only.)
                    got.extend(
                        batch
                            .iter()
                            .filter(|f| f[12..14] == [8, 6] || roce_wire::frame::parse(f).is_ok())
                            .map(<[u8]>::to_vec),
                    );
                }
                got
            };
            assert_eq!(a.send_batch(&refs).unwrap(), sent.len());
            let st = a.stats();
            assert!(st.gso_runs >= 3 && st.gso_run_frames >= 110, "{st:?}");
            let got = receive(&mut b, sent.len());
            assert_eq!(got.len(), sent.len(), "every frame back");
            for (i, (g, s)) in got.iter().zip(&sent).enumerate() {
                assert_eq!(g.len(), s.len(), "frame {i}");
                if s[12..14] == [8, 0] {
                    let parsed = roce_wire::frame::parse(g).unwrap();
                    assert_eq!(parsed.repr.payload, roce_wire::frame::parse(s).unwrap().repr.payload, "frame {i}");
                } else {
                    assert_eq!(g, s, "frame {i}: as sent (IPv6 has no ID; ARP goes alone)");
                }
            }
            // IDs count up within a run (the first run: 62 frames of 1,040 bytes).
            let ids: Vec<u16> = got[..62].iter().map(|f| u16::from_be_bytes([f[18], f[19]])).collect();
            assert_eq!(ids, (0..62).collect::<Vec<u16>>());
            let st = b.stats();
            assert!(st.gso_reads >= 3 && st.gso_split_frames >= 110, "{st:?}");
            assert_eq!((st.truncated, st.gso_not_udp), (0, 0));
            // The kernel segments for a device without UDP GSO; a plain socket reads ordinary frames.
            let ok = std::process::Command::new("ethtool")
                .args(["-K", "g1", "tx-udp-segmentation", "off"])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "ethtool -K g1 tx-udp-segmentation off");
            let mut plain = RawSocket::open("g2").unwrap();
            plain.set_buffer_sizes(4 << 20, 1 << 20).unwrap();
            drop(b);
            assert_eq!(a.send_batch(&refs).unwrap(), sent.len());
            let got = receive(&mut plain, sent.len());
            let st = plain.stats();
            assert_eq!(got.len(), sent.len(), "every frame, segmented by the kernel: {st:?}");
            assert_eq!(st.truncated, 0);
            for (i, (g, s)) in got.iter().zip(&sent).enumerate() {
                assert_eq!(g.len(), s.len(), "frame {i}");
                assert!(s[12..14] == [8, 6] || roce_wire::frame::parse(g).is_ok(), "frame {i}: the ICRC holds");
            }
        })
        .join()
        .unwrap();
    }
}
