//! A stack's configuration: its port's addresses, the SA, timers and which multicast paths
//! it uses. Every timer defaults to the kernel's value.

use core::time::Duration;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Which multicast signalling a stack uses for joins and leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MulticastPaths {
    /// InfiniBand SA: SubnAdmSet/SubnAdmDelete of an MCMemberRecord to the SA's QP1 (what the
    /// kernel does on an IB port).
    pub sa: bool,
    /// RoCE-native: IGMP for IPv4 groups, MLDv2 for IPv6 groups (what the kernel does on RoCE).
    pub igmp_mld: bool,
}

impl MulticastPaths {
    /// Both paths (the default).
    pub const BOTH: MulticastPaths = MulticastPaths { sa: true, igmp_mld: true };
    /// Only the SA path.
    pub const SA_ONLY: MulticastPaths = MulticastPaths { sa: true, igmp_mld: false };
    /// Only IGMP/MLD, as a Linux RoCE port.
    pub const IGMP_MLD_ONLY: MulticastPaths = MulticastPaths { sa: false, igmp_mld: true };
}

impl Default for MulticastPaths {
    fn default() -> Self {
        MulticastPaths::BOTH
    }
}

/// How SA MADs travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SaTransport {
    /// In RoCEv2 frames to QP1 of [`StackConfig::sa`] (the default).
    #[default]
    RoceV2,
    /// Handed to the driver as bare MADs ([`crate::Stack::poll_sa_mad`] /
    /// [`crate::Stack::handle_sa_mad`]), for an SA reached some other way: OpenSM through
    /// ibsim, or umad on a native InfiniBand port. The MAD bytes are the same.
    External,
}

/// How a group address becomes an MGID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MgidStyle {
    /// RoCEv2: `::ffff:a.b.c.d` for IPv4, the address itself for IPv6 (cma_iboe_set_mgid).
    #[default]
    RoceV2,
    /// InfiniBand, as RDMA-CM builds it for RDMA_PS_UDP (cma_set_mgid): the IPoIB mapping
    /// `ff12:401b:PKEY::a.b.c.d` with byte 3 set to 0x01 (the RDMA CM signature).
    InfiniBand {
        /// The P_Key of the port's IPoIB broadcast address.
        pkey: u16,
    },
}

/// The IGMP version a stack speaks for IPv4 groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IgmpVersion {
    /// IGMPv2: report to the group, leave to 224.0.0.2.
    V2,
    /// IGMPv3 (Linux's default): reports to 224.0.0.22.
    #[default]
    V3,
}

/// SA transaction timing [sa_query.c; multicast.c; protocol.md §4.3].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaTiming {
    /// The whole budget of one SA query (multicast join/leave: 3000 ms).
    pub timeout: Duration,
    /// Retransmissions within the budget (kernel ≥ 5.15: 10).
    pub retries: u32,
    /// The smallest interval between transmissions (kernel ≥ 6.13: 500 ms); the per-try
    /// interval is `max(min_retry_interval, timeout / (retries + 1))` … capped by the budget.
    pub min_retry_interval: Duration,
    /// Extra Delete attempts per group after a failed leave (multicast.c: 3).
    pub leave_retries: u32,
    /// The RMPP receive window: segments the sender may send past our last ACK (the kernel's
    /// 64, `crate::rmpp_recv::KERNEL_WINDOW`; at least 1).
    pub rmpp_window: u32,
    /// Whether the RMPP receiver sends its ACKs, ABORTs and STOPs (always, but for tests that
    /// check what a sender does when nothing comes back).
    pub rmpp_ack: bool,
}

impl Default for SaTiming {
    fn default() -> Self {
        SaTiming {
            timeout: Duration::from_millis(3000),
            retries: 10,
            min_retry_interval: Duration::from_millis(500),
            leave_retries: 3,
            rmpp_window: crate::rmpp_recv::KERNEL_WINDOW,
            rmpp_ack: true,
        }
    }
}

impl SaTiming {
    /// How many times one query is sent before its deadline: at 0, one interval, two … while
    /// before the budget ends, at most `retries + 1` (defaults: 0, 0.5, … 2.5 s: 6).
    pub fn max_sends(&self) -> u32 {
        let i = self.retry_interval().as_nanos().max(1);
        let fit = self.timeout.as_nanos().div_ceil(i);
        u32::try_from(fit).unwrap_or(u32::MAX).clamp(1, self.retries + 1)
    }

    /// The interval between transmissions of one query.
    pub fn retry_interval(&self) -> Duration {
        let per_try = self.timeout / (self.retries + 1).max(1);
        per_try.max(self.min_retry_interval).min(self.timeout)
    }
}

/// Neighbour resolution timing (Linux ARP/ND defaults: 3 probes, 1 s apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeighTiming {
    /// Probes sent before giving up.
    pub probes: u32,
    /// Interval between probes.
    pub interval: Duration,
}

impl Default for NeighTiming {
    fn default() -> Self {
        NeighTiming { probes: 3, interval: Duration::from_millis(1000) }
    }
}

/// Who resolves a unicast destination's MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NeighborResolution {
    /// The stack itself, with ARP and neighbour discovery (a raw-socket port).
    #[default]
    Arp,
    /// The kernel, below a UDP socket that takes the frame's payload and routes it: every
    /// unicast destination is known at once at [`KERNEL_NEIGHBOR_MAC`], which the device
    /// ignores; the stack sends no ARP or ND and parks nothing.
    Kernel,
}

/// The placeholder MAC of every unicast neighbour when the kernel resolves them
/// ([`NeighborResolution::Kernel`]): locally administered, unicast, ending in 0x12B7 (4791).
pub const KERNEL_NEIGHBOR_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x12, 0xb7];

/// The engine's bound on PSNs an RC or UC requester has in flight before it waits for an ACK
/// (`StackConfig::rc_max_unacked_psns`). rxe's 128 (RXE_MAX_UNACKED_PSNS) is two ACK
/// intervals (an ACK is asked for every 64 packets), so a one-QP sender stops at every round
/// trip and both ends sleep and wake per message: on a veth at MTU 1500 one QP moved 13 Gbit/s
/// with 128 and 23 with 256–512 (spec/rc.md "The send window"). The IBTA bounds it only by the
/// PSN space (half of 2^24); a NIC by its send queue.
pub const DEFAULT_MAX_UNACKED_PSNS: u32 = 512;

/// Configuration of one [`crate::Stack`] (one RoCE port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackConfig {
    /// The port's MAC address.
    pub mac: [u8; 6],
    /// IPv4 address and prefix length, if any.
    pub ipv4: Option<(Ipv4Addr, u8)>,
    /// IPv6 addresses and prefix lengths (the link-local one is derived from the MAC if absent).
    pub ipv6: Vec<(Ipv6Addr, u8)>,
    /// The partition key (RDMA-CM uses 0xFFFF on RoCE).
    pub pkey: u16,
    /// The SA's address (its QP1 answers with Q_Key 0x80010000); `None` disables the SA path.
    pub sa: Option<IpAddr>,
    /// Which multicast paths to use.
    pub multicast_paths: MulticastPaths,
    /// How SA MADs travel.
    pub sa_transport: SaTransport,
    /// How group addresses become MGIDs.
    pub mgid_style: MgidStyle,
    /// The PortGID for SA records (default: the source address's GID, as on RoCEv2; on an IB
    /// port, the port's GID).
    pub port_gid: Option<roce_wire::Gid>,
    /// IGMP version for IPv4 groups.
    pub igmp_version: IgmpVersion,
    /// Accept IPv6 multicast joins (the kernel refuses them on RoCEv2 with ENOTSUPP; we
    /// support them unless this is false).
    pub ipv6_multicast: bool,
    /// SA timing.
    pub sa_timing: SaTiming,
    /// ARP/ND timing.
    pub neigh_timing: NeighTiming,
    /// Seed for the random parts (the TID's upper half, ephemeral port start, CM IDs, PSNs):
    /// the engine has no randomness of its own, so a driver passes real entropy and a test a
    /// fixed value.
    pub seed: u64,
    /// Whether binds below port 1024 are allowed (CAP_NET_BIND_SERVICE).
    pub privileged: bool,
    /// The ephemeral port range (ip_local_port_range: 32768–60999).
    pub ephemeral_ports: (u16, u16),
    /// The port MTU (IB MTU enum value: 1=256 … 5=4096) reported in local records.
    pub mtu: u8,
    /// How long a CM connection stays in TIMEWAIT after a disconnect.
    pub timewait: Duration,
    /// How long the CM waits for an answer to a REQ, SIDR_REQ or DREQ before resending
    /// (CMA_CM_RESPONSE_TIMEOUT 20: 4.096 µs × 2^20 ≈ 4.3 s).
    pub cm_response_timeout: Duration,
    /// CM resends before giving up (CMA_MAX_CM_RETRIES: 15).
    pub cm_max_retries: u32,
    /// Who resolves unicast neighbours: the stack (ARP/ND, the default) or the kernel.
    pub neighbors: NeighborResolution,
    /// The UDP source port of every RoCE frame: `None` (the default) for rxe's hash of the
    /// source QPN, or one port for all (a UDP socket bound to 4791 sends from 4791, and the
    /// ICRC covers the port).
    pub udp_source_port: Option<u16>,
    /// PSNs an RC or UC requester may have in flight before it waits for an ACK
    /// ([`crate::rc::Rc::set_max_unacked_psns`]; default
    /// [`DEFAULT_MAX_UNACKED_PSNS`], rxe's is [`crate::rc::RXE_MAX_UNACKED_PSNS`]).
    pub rc_max_unacked_psns: u32,
    /// The congestion control of connected QPs ([`crate::rc::Rc::set_congestion`]; off by
    /// default, as rxe has none).
    pub congestion: crate::cc::Congestion,
    /// Send RC FLUSH requests with the ICRC Linux rxe computes for them (the 32 header bytes
    /// covered twice; [`roce_wire::icrc::compute_rxe_flush`]) instead of the IBA's, and accept
    /// a received FLUSH with either. Off by default: only an rxe peer (6.2 and later) wants
    /// it, and it drops a standard FLUSH without a word (spec/kernel-findings.md §6).
    pub rxe_flush_icrc: bool,
}

impl StackConfig {
    /// A configuration with the kernel's defaults for a port with this MAC and IPv4 address.
    pub fn new(mac: [u8; 6], ipv4: Ipv4Addr, prefix: u8) -> StackConfig {
        StackConfig {
            mac,
            ipv4: Some((ipv4, prefix)),
            ipv6: Vec::new(),
            pkey: roce_wire::DEFAULT_PKEY,
            sa: None,
            multicast_paths: MulticastPaths::default(),
            sa_transport: SaTransport::default(),
            mgid_style: MgidStyle::default(),
            port_gid: None,
            igmp_version: IgmpVersion::default(),
            ipv6_multicast: true,
            sa_timing: SaTiming::default(),
            neigh_timing: NeighTiming::default(),
            seed: 0x0123_4567_89ab_cdef,
            privileged: true,
            ephemeral_ports: (32768, 60999),
            mtu: 4,
            timewait: Duration::from_millis(1000),
            cm_response_timeout: Duration::from_nanos(4096 << 20),
            cm_max_retries: 15,
            neighbors: NeighborResolution::Arp,
            udp_source_port: None,
            rc_max_unacked_psns: DEFAULT_MAX_UNACKED_PSNS,
            congestion: crate::cc::Congestion::Off,
            rxe_flush_icrc: false,
        }
    }

    /// The link-local IPv6 address derived from the MAC (EUI-64), as the kernel makes GID 0.
    pub fn link_local(&self) -> Ipv6Addr {
        let m = self.mac;
        Ipv6Addr::from([0xfe, 0x80, 0, 0, 0, 0, 0, 0, m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]])
    }

    /// Whether `ip` is one of the port's addresses.
    #[inline]
    pub fn is_local(&self, ip: &IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => self.ipv4.is_some_and(|(x, _)| x == *a),
            IpAddr::V6(a) => *a == self.link_local() || self.ipv6.iter().any(|(x, _)| x == a),
        }
    }

    /// Our source address for talking to `dst`.
    #[inline]
    pub fn source_for(&self, dst: &IpAddr) -> Option<IpAddr> {
        match dst {
            IpAddr::V4(_) => self.ipv4.map(|(a, _)| IpAddr::V4(a)),
            IpAddr::V6(d) => {
                if (d.segments()[0] & 0xffc0) == 0xfe80 || self.ipv6.is_empty() {
                    Some(IpAddr::V6(self.link_local()))
                } else {
                    Some(IpAddr::V6(self.ipv6[0].0))
                }
            }
        }
    }

    /// Whether `dst` is on one of our links (the stack does no routing).
    #[inline]
    pub fn on_link(&self, dst: &IpAddr) -> bool {
        match dst {
            IpAddr::V4(d) => self.ipv4.is_some_and(|(a, p)| same_prefix_v4(a, *d, p)),
            IpAddr::V6(d) => {
                (d.segments()[0] & 0xffc0) == 0xfe80 || self.ipv6.iter().any(|(a, p)| same_prefix_v6(*a, *d, *p))
            }
        }
    }
}

fn same_prefix_v4(a: Ipv4Addr, b: Ipv4Addr, prefix: u8) -> bool {
    let p = u32::from(prefix.min(32));
    let mask = if p == 0 { 0 } else { u32::MAX << (32 - p) };
    (u32::from(a) & mask) == (u32::from(b) & mask)
}

fn same_prefix_v6(a: Ipv6Addr, b: Ipv6Addr, prefix: u8) -> bool {
    let p = u32::from(prefix.min(128));
    let mask = if p == 0 { 0 } else { u128::MAX << (128 - p) };
    (u128::from(a) & mask) == (u128::from(b) & mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        assert!(same_prefix_v4(Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 200), 24));
        assert!(!same_prefix_v4(Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 1, 1), 24));
        assert!(same_prefix_v6("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap(), 64));
    }
}
