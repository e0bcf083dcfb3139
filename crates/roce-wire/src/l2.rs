//! Whole Ethernet frames of the multicast and neighbour protocols a RoCEv2 host sends and
//! receives besides RoCEv2 itself: ARP, IGMP, MLD and NS/NA. Parse with [`parse_frame`];
//! build with the emitters [`ArpFrame`], [`IgmpFrame`], [`MldFrame`] and [`NdiscFrame`],
//! which frame the message exactly as the Linux kernel does.
//!
//! Built on etherparse (`Ethernet2Header`, `SingleVlanHeader`, `Ipv4Header`, `Ipv6Header`,
//! `Ipv6RawExtHeaderSlice`) and the message modules [`crate::arp`], [`crate::igmp`],
//! [`crate::mld`], [`crate::ndisc`].
//!
//! What Linux puts around the messages:
//! - IGMP (v2 and v3): IPv4 with IHL 6 and the Router Alert option `94 04 00 00`
//!   (RFC 2113), TOS 0xc0, DF, TTL 1, ID 0 (`ip_select_ident` gives 0 to DF packets without
//!   a socket), protocol 2; v3 reports to 224.0.0.22, v2 reports to the group, leaves to
//!   224.0.0.2 [net/ipv4/igmp.c igmpv3_newpack, igmp_send_report; include/net/ip.h
//!   ip_select_ident_segs].
//! - MLD: IPv6 with traffic class 0, flow label 0, hop limit 1, next header 0 (Hop-by-Hop)
//!   `3a 00 05 02 00 00 01 00` (next header 58, Router Alert value 0 = MLD, PadN), from the
//!   link-local address (or ::), v2 reports to ff02::16 [net/ipv6/mcast.c mld_newpack,
//!   igmp6_send, ip6_mc_hdr; the igmp socket's hop limit is 1].
//! - NS/NA: IPv6 hop limit 255, no extension header; NS to the target's solicited-node group
//!   (33:33:ff:xx:xx:xx) when resolving [net/ipv6/ndisc.c ndisc_send_ns, ndisc_send_na].
//! - ARP: EtherType 0x0806; requests broadcast, replies to the requester [net/ipv4/arp.c].
//! - Destination MACs of IP multicast: 01:00:5e + low 23 bits (IPv4), 33:33 + last 4 bytes
//!   (IPv6) [include/net/ip.h ip_eth_mc_map; include/net/addrconf.h ipv6_eth_mc_map].
//!
//! Emitters do not pad to the 60-byte Ethernet minimum (the NIC does); [`parse_frame`]
//! accepts padding after the IP packet.

use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};

use etherparse::{
    err, Ethernet2Header, IpDscp, IpEcn, IpNumber, Ipv4Header, Ipv6FlowLabel, Ipv6Header, Ipv6RawExtHeaderSlice,
    SingleVlanHeader,
};

use crate::arp::{self, ArpOperation, ArpRepr};
use crate::error::{ContentError, Error, Layer, Result};
use crate::igmp::IgmpMessage;
use crate::mld::{self, MldMessage};
use crate::ndisc::{self, NdiscMessage, NeighborFlags};
// The lists and multicast MACs moved to `multicast` (which igmp, mld and ndisc import, so that
// the imports point one way); re-exported here, where dependents found them.
pub use crate::multicast::{ipv4_multicast_mac, ipv6_multicast_mac, Blank, FixedVec, List};

/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// EtherType of ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// EtherType (TPID) of an 802.1Q tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// Length of the Ethernet II header.
pub const ETHERNET_LEN: usize = 14;
/// Length of an 802.1Q tag.
pub const VLAN_LEN: usize = 4;
/// The broadcast MAC.
pub const BROADCAST_MAC: [u8; 6] = [0xff; 6];
/// IP protocol number of IGMP.
pub const IPPROTO_IGMP: u8 = 2;
/// The IPv4 Router Alert option Linux puts on IGMP: type 148, length 4, value 0 [RFC 2113].
pub const IPV4_ROUTER_ALERT: [u8; 4] = [0x94, 0x04, 0x00, 0x00];
/// The Hop-by-Hop header Linux puts on MLD: next header ICMPv6, length 0, Router Alert
/// (type 5, length 2, value 0 = MLD, RFC 2711), PadN (type 1, length 0) [mcast.c `ra[8]`].
pub const MLD_HOP_BY_HOP: [u8; 8] = [58, 0, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00];
/// The TOS byte of IGMP packets (DSCP CS6) [igmp.c].
pub const IGMP_TOS: u8 = 0xc0;

// ---------------------------------------------------------------------------------------
// Address helpers
// ---------------------------------------------------------------------------------------

/// The value of the Router Alert option (type 148) among IPv4 header options, if present
/// [RFC 2113].
pub fn ipv4_router_alert(options: &[u8]) -> Option<u16> {
    let mut i = 0;
    while i < options.len() {
        match options[i] {
            0 => return None,
            1 => i += 1,
            t => {
                let len = usize::from(*options.get(i + 1)?);
                if len < 2 || i + len > options.len() {
                    return None;
                }
                if t == 0x94 && len == 4 {
                    return Some(u16::from_be_bytes([options[i + 2], options[i + 3]]));
                }
                i += len;
            }
        }
    }
    None
}

/// The value of the Router Alert option (type 5) in an IPv6 Hop-by-Hop header (whole header
/// bytes), if present [RFC 2711].
pub fn ipv6_router_alert(hop_by_hop: &[u8]) -> Option<u16> {
    let mut i = 2;
    while i < hop_by_hop.len() {
        match hop_by_hop[i] {
            0 => i += 1,
            t => {
                let len = usize::from(*hop_by_hop.get(i + 1)?);
                if i + 2 + len > hop_by_hop.len() {
                    return None;
                }
                if t == 5 && len == 2 {
                    return Some(u16::from_be_bytes([hop_by_hop[i + 2], hop_by_hop[i + 3]]));
                }
                i += 2 + len;
            }
        }
    }
    None
}

// ---------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------

/// A parsed frame: Ethernet header, optional 802.1Q tag, and what it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct L2Frame<'a> {
    /// The Ethernet II header (its `ether_type` is 0x8100 when tagged).
    pub ethernet: Ethernet2Header,
    /// The 802.1Q tag, if any (its `ether_type` is the payload's).
    pub vlan: Option<SingleVlanHeader>,
    /// The payload.
    pub packet: L2Packet<'a>,
}

impl L2Frame<'_> {
    /// The EtherType of the payload (after the tag, if any).
    pub fn ether_type(&self) -> u16 {
        self.vlan.as_ref().map_or(self.ethernet.ether_type.0, |v| v.ether_type.0)
    }
}

/// The payload of a frame that is not RoCEv2.
// The v3/v2 report variant holds its records inline (no allocator in this crate), so it
// is much larger than the others; boxing is not an option in `no_std` without `alloc`.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum L2Packet<'a> {
    /// ARP (Ethernet/IPv4).
    Arp(ArpRepr),
    /// IGMP in IPv4.
    Igmp {
        /// The IPv4 header (with its options, e.g. Router Alert: see [`ipv4_router_alert`]).
        ip: Ipv4Header,
        /// The IGMP message.
        msg: IgmpMessage,
    },
    /// MLD in IPv6 (normally behind a Hop-by-Hop header with Router Alert).
    Mld {
        /// The IPv6 header.
        ip: Ipv6Header,
        /// The Hop-by-Hop header bytes, if present (see [`ipv6_router_alert`]).
        hop_by_hop: Option<&'a [u8]>,
        /// The MLD message.
        msg: MldMessage,
    },
    /// Neighbor Solicitation or Advertisement in IPv6.
    Ndisc {
        /// The IPv6 header.
        ip: Ipv6Header,
        /// The Hop-by-Hop header bytes, if present.
        hop_by_hop: Option<&'a [u8]>,
        /// The message.
        msg: NdiscMessage<'a>,
    },
    /// Anything else: other EtherTypes, IPv4 other than IGMP, IPv6 other than MLD/NS/NA
    /// (or behind extension headers other than Hop-by-Hop).
    Other {
        /// The EtherType (after the tag, if any).
        ether_type: u16,
        /// The bytes after the Ethernet header and tag.
        payload: &'a [u8],
    },
}

impl fmt::Display for L2Packet<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            L2Packet::Arp(r) => {
                let (op, sha, spa, _, tpa) = arp::fields(r);
                match op {
                    ArpOperation::Request => write!(f, "ARP who has {tpa}? tell {spa}"),
                    ArpOperation::Reply => write!(f, "ARP {spa} is at {}", crate::MacAddr(sha)),
                    ArpOperation::Unknown(o) => write!(f, "ARP operation {o}"),
                }
            }
            L2Packet::Igmp { msg, .. } => fmt::Display::fmt(msg, f),
            L2Packet::Mld { msg, .. } => fmt::Display::fmt(msg, f),
            L2Packet::Ndisc { msg, .. } => fmt::Display::fmt(msg, f),
            L2Packet::Other { ether_type, payload } => {
                write!(f, "EtherType 0x{ether_type:04x}, {} bytes", payload.len())
            }
        }
    }
}

fn map_len(layer: Layer, off: usize, e: &err::LenError) -> Error {
    Error::len(layer, off, e.required_len, e.len)
}

/// Parse an Ethernet frame carrying ARP, IGMP, MLD or NS/NA (anything else is
/// [`L2Packet::Other`]). Never panics; errors carry offsets from the start of the frame.
///
/// IPv4 is checked (header checksum, total length within the frame; trailing padding is
/// ignored); IGMP is parsed from the IPv4 payload after any options. IPv6 may carry one
/// Hop-by-Hop header before ICMPv6. Message checksums are verified.
pub fn parse_frame(buf: &[u8]) -> Result<L2Frame<'_>> {
    let (ethernet, _) = Ethernet2Header::from_slice(buf).map_err(|e| map_len(Layer::Ethernet, 0, &e))?;
    let mut off = ETHERNET_LEN;
    let mut vlan = None;
    let mut ether_type = ethernet.ether_type.0;
    if ether_type == ETHERTYPE_VLAN {
        let (v, _) = SingleVlanHeader::from_slice(&buf[off..]).map_err(|e| map_len(Layer::Vlan, off, &e))?;
        ether_type = v.ether_type.0;
        vlan = Some(v);
        off += VLAN_LEN;
    }
    let payload = &buf[off..];
    let packet = match ether_type {
        ETHERTYPE_ARP => L2Packet::Arp(arp::parse_bytes(payload).map_err(|e| e.add_offset(off))?),
        ETHERTYPE_IPV4 => parse_ipv4(payload, off)?.unwrap_or(L2Packet::Other { ether_type, payload }),
        ETHERTYPE_IPV6 => parse_ipv6(payload, off)?.unwrap_or(L2Packet::Other { ether_type, payload }),
        _ => L2Packet::Other { ether_type, payload },
    };
    Ok(L2Frame { ethernet, vlan, packet })
}

/// IPv4: `Some(Igmp)` or `None` for another protocol.
fn parse_ipv4(buf: &[u8], off: usize) -> Result<Option<L2Packet<'_>>> {
    let ip = read_ipv4_header(buf, off)?;
    if ip.protocol.0 != IPPROTO_IGMP {
        return Ok(None);
    }
    igmp_in_ipv4(ip, buf, off).map(Some)
}

/// The IPv4 header at the start of `buf` (which starts at `off` in the frame).
pub(crate) fn read_ipv4_header(buf: &[u8], off: usize) -> Result<Ipv4Header> {
    let (ip, _) = Ipv4Header::from_slice(buf).map_err(|e| match e {
        err::ipv4::HeaderSliceError::Len(l) => map_len(Layer::Ipv4, off, &l),
        err::ipv4::HeaderSliceError::Content(err::ipv4::HeaderError::UnexpectedVersion { version_number }) => {
            Error::content(Layer::Ipv4, off, ContentError::IpVersionMismatch { version: version_number })
        }
        err::ipv4::HeaderSliceError::Content(err::ipv4::HeaderError::HeaderLengthSmallerThanHeader { ihl }) => {
            Error::content(Layer::Ipv4, off, ContentError::Ipv4HeaderLenTooSmall { ihl })
        }
    })?;
    Ok(ip)
}

/// The IGMP message of an IPv4 packet whose header `ip` (protocol 2) was read from the start
/// of `buf`: the header checksum, the length and fragment fields, then the message.
pub(crate) fn igmp_in_ipv4(ip: Ipv4Header, buf: &[u8], off: usize) -> Result<L2Packet<'_>> {
    let expected = ip.calc_header_checksum();
    if expected != ip.header_checksum {
        return Err(Error::content(
            Layer::Ipv4,
            off + 10,
            ContentError::Ipv4Checksum { found: ip.header_checksum, expected },
        ));
    }
    let hl = ip.header_len();
    let total = usize::from(ip.total_len);
    if total < hl || total > buf.len() {
        return Err(Error::content(
            Layer::Ipv4,
            off + 2,
            ContentError::IpLength { claimed: total, available: buf.len() },
        ));
    }
    if ip.more_fragments || ip.fragment_offset.value() != 0 {
        return Err(Error::content(Layer::Ipv4, off + 6, ContentError::Ipv4Fragmented));
    }
    let msg = IgmpMessage::parse_bytes(&buf[hl..total]).map_err(|e| e.add_offset(off + hl))?;
    Ok(L2Packet::Igmp { ip, msg })
}

/// IPv6: `Some(Mld | Ndisc)` or `None` for anything else.
fn parse_ipv6(buf: &[u8], off: usize) -> Result<Option<L2Packet<'_>>> {
    icmpv6_in_ipv6(read_ipv6_header(buf, off)?, buf, off)
}

/// The IPv6 header at the start of `buf` (which starts at `off` in the frame).
pub(crate) fn read_ipv6_header(buf: &[u8], off: usize) -> Result<Ipv6Header> {
    let (ip, _) = Ipv6Header::from_slice(buf).map_err(|e| match e {
        err::ipv6::HeaderSliceError::Len(l) => map_len(Layer::Ipv6, off, &l),
        err::ipv6::HeaderSliceError::Content(err::ipv6::HeaderError::UnexpectedVersion { version_number }) => {
            Error::content(Layer::Ipv6, off, ContentError::IpVersionMismatch { version: version_number })
        }
    })?;
    Ok(ip)
}

/// The MLD or NS/NA message of an IPv6 packet whose header `ip` was read from the start of
/// `buf` (one Hop-by-Hop header may come first), or `None` for anything else.
pub(crate) fn icmpv6_in_ipv6(ip: Ipv6Header, buf: &[u8], off: usize) -> Result<Option<L2Packet<'_>>> {
    let mut at = Ipv6Header::LEN;
    let mut next = ip.next_header.0;
    let mut hop_by_hop = None;
    if next == 0 {
        let rest = &buf[at..];
        let h = Ipv6RawExtHeaderSlice::from_slice(rest).map_err(|e| map_len(Layer::Ipv6, off + at, &e))?;
        let len = h.slice().len();
        next = h.next_header().0;
        hop_by_hop = Some(&rest[..len]);
        at += len;
    }
    if next != mld::IPPROTO_ICMPV6 {
        return Ok(None);
    }
    let total = Ipv6Header::LEN + usize::from(ip.payload_length);
    if total < at || total > buf.len() {
        return Err(Error::content(
            Layer::Ipv6,
            off + 4,
            ContentError::IpLength { claimed: usize::from(ip.payload_length), available: buf.len() - Ipv6Header::LEN },
        ));
    }
    let icmp = &buf[at..total];
    let (src, dst) = (ip.source_addr(), ip.destination_addr());
    let Some(&t) = icmp.first() else { return Ok(None) };
    if mld::MessageType::is_mld(t) {
        let msg = MldMessage::parse_bytes(icmp, &src, &dst).map_err(|e| e.add_offset(off + at))?;
        Ok(Some(L2Packet::Mld { ip, hop_by_hop, msg }))
    } else if t == ndisc::TYPE_NS || t == ndisc::TYPE_NA {
        let msg = NdiscMessage::parse_bytes(icmp, &src, &dst).map_err(|e| e.add_offset(off + at))?;
        Ok(Some(L2Packet::Ndisc { ip, hop_by_hop, msg }))
    } else {
        Ok(None)
    }
}

// ---------------------------------------------------------------------------------------
// Emitting
// ---------------------------------------------------------------------------------------

/// A complete frame that can be written into a buffer.
pub trait EmitFrame {
    /// The frame length in bytes (no Ethernet padding, no FCS).
    fn buffer_len(&self) -> usize;
    /// Write the frame into `buf[..buffer_len()]` (panics if `buf` is shorter); returns the length.
    fn emit(&self, buf: &mut [u8]) -> usize;
}

fn vlan_len(tci: Option<u16>) -> usize {
    if tci.is_some() {
        VLAN_LEN
    } else {
        0
    }
}

/// Write the Ethernet header and tag; returns the offset of the payload.
fn emit_ethernet(buf: &mut [u8], dst: [u8; 6], src: [u8; 6], tci: Option<u16>, ether_type: u16) -> usize {
    buf[0..6].copy_from_slice(&dst);
    buf[6..12].copy_from_slice(&src);
    match tci {
        Some(tci) => {
            buf[12..14].copy_from_slice(&ETHERTYPE_VLAN.to_be_bytes());
            buf[14..16].copy_from_slice(&tci.to_be_bytes());
            buf[16..18].copy_from_slice(&ether_type.to_be_bytes());
            ETHERNET_LEN + VLAN_LEN
        }
        None => {
            buf[12..14].copy_from_slice(&ether_type.to_be_bytes());
            ETHERNET_LEN
        }
    }
}

/// An ARP frame: requests go to the broadcast MAC, replies to the target's MAC; the source
/// MAC is the sender hardware address [arp.c arp_create].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpFrame {
    /// The 802.1Q TCI (PCP, DEI, VID), if tagged.
    pub vlan_tci: Option<u16>,
    /// The ARP packet.
    pub repr: ArpRepr,
}

impl ArpFrame {
    /// An untagged frame.
    pub const fn new(repr: ArpRepr) -> Self {
        ArpFrame { vlan_tci: None, repr }
    }

    /// The destination MAC.
    pub fn dst_mac(&self) -> [u8; 6] {
        let (op, _, _, tha, _) = arp::fields(&self.repr);
        if op == ArpOperation::Reply {
            tha
        } else {
            BROADCAST_MAC
        }
    }
}

impl EmitFrame for ArpFrame {
    fn buffer_len(&self) -> usize {
        ETHERNET_LEN + vlan_len(self.vlan_tci) + arp::LEN
    }

    fn emit(&self, buf: &mut [u8]) -> usize {
        let n = self.buffer_len();
        let buf = &mut buf[..n];
        let (_, sha, _, _, _) = arp::fields(&self.repr);
        let at = emit_ethernet(buf, self.dst_mac(), sha, self.vlan_tci, ETHERTYPE_ARP);
        arp::emit_bytes(&self.repr, &mut buf[at..]);
        n
    }
}

/// An IGMP frame as Linux sends it (see the module doc): IPv4 with Router Alert, TOS 0xc0,
/// DF, TTL 1, to [`IgmpMessage::destination`] and its multicast MAC.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(feature = "alloc"), derive(Copy))]
pub struct IgmpFrame {
    /// Our MAC.
    pub src_mac: [u8; 6],
    /// Our IPv4 address (0.0.0.0 when the interface has none: igmpv3_get_srcaddr).
    pub src_ip: Ipv4Addr,
    /// The 802.1Q TCI, if tagged.
    pub vlan_tci: Option<u16>,
    /// The IPv4 identification (Linux: 0).
    pub identification: u16,
    /// The IGMP message.
    pub msg: IgmpMessage,
}

impl IgmpFrame {
    /// An untagged frame with identification 0.
    pub const fn new(src_mac: [u8; 6], src_ip: Ipv4Addr, msg: IgmpMessage) -> Self {
        IgmpFrame { src_mac, src_ip, vlan_tci: None, identification: 0, msg }
    }

    /// The IPv4 header this frame carries (checksum filled).
    pub fn ipv4_header(&self) -> Ipv4Header {
        let mut ip = Ipv4Header {
            dscp: IpDscp::CS6,
            ecn: IpEcn::ZERO,
            total_len: 0,
            identification: self.identification,
            dont_fragment: true,
            more_fragments: false,
            fragment_offset: Default::default(),
            time_to_live: 1,
            protocol: IpNumber(IPPROTO_IGMP),
            header_checksum: 0,
            source: self.src_ip.octets(),
            destination: self.msg.destination().octets(),
            options: IPV4_ROUTER_ALERT.into(),
        };
        ip.total_len = (ip.header_len() + self.msg.buffer_len()) as u16;
        ip.header_checksum = ip.calc_header_checksum();
        ip
    }

    /// The destination MAC (of the destination group).
    pub fn dst_mac(&self) -> [u8; 6] {
        ipv4_multicast_mac(self.msg.destination())
    }
}

impl EmitFrame for IgmpFrame {
    fn buffer_len(&self) -> usize {
        ETHERNET_LEN + vlan_len(self.vlan_tci) + 24 + self.msg.buffer_len()
    }

    fn emit(&self, buf: &mut [u8]) -> usize {
        let n = self.buffer_len();
        let buf = &mut buf[..n];
        let mut at = emit_ethernet(buf, self.dst_mac(), self.src_mac, self.vlan_tci, ETHERTYPE_IPV4);
        let ip = self.ipv4_header().to_bytes();
        buf[at..at + ip.len()].copy_from_slice(&ip);
        at += ip.len();
        self.msg.emit_bytes(&mut buf[at..]);
        n
    }
}

fn ipv6_header(src: Ipv6Addr, dst: Ipv6Addr, hop_limit: u8, next_header: u8, payload_len: usize) -> Ipv6Header {
    Ipv6Header {
        traffic_class: 0,
        flow_label: Ipv6FlowLabel::ZERO,
        payload_length: payload_len as u16,
        next_header: IpNumber(next_header),
        hop_limit,
        source: src.octets(),
        destination: dst.octets(),
    }
}

/// An MLD frame as Linux sends it (see the module doc): IPv6 hop limit 1, Hop-by-Hop Router
/// Alert + PadN, to [`MldMessage::destination`] and its 33:33 MAC.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(feature = "alloc"), derive(Copy))]
pub struct MldFrame {
    /// Our MAC.
    pub src_mac: [u8; 6],
    /// Our link-local address (:: when none is usable yet, as Linux does).
    pub src_ip: Ipv6Addr,
    /// The 802.1Q TCI, if tagged.
    pub vlan_tci: Option<u16>,
    /// The MLD message.
    pub msg: MldMessage,
}

impl MldFrame {
    /// An untagged frame.
    pub const fn new(src_mac: [u8; 6], src_ip: Ipv6Addr, msg: MldMessage) -> Self {
        MldFrame { src_mac, src_ip, vlan_tci: None, msg }
    }

    /// The IPv6 header this frame carries.
    pub fn ipv6_header(&self) -> Ipv6Header {
        ipv6_header(self.src_ip, self.msg.destination(), 1, 0, MLD_HOP_BY_HOP.len() + self.msg.buffer_len())
    }

    /// The destination MAC.
    pub fn dst_mac(&self) -> [u8; 6] {
        ipv6_multicast_mac(self.msg.destination())
    }
}

impl EmitFrame for MldFrame {
    fn buffer_len(&self) -> usize {
        ETHERNET_LEN + vlan_len(self.vlan_tci) + Ipv6Header::LEN + MLD_HOP_BY_HOP.len() + self.msg.buffer_len()
    }

    fn emit(&self, buf: &mut [u8]) -> usize {
        let n = self.buffer_len();
        let buf = &mut buf[..n];
        let mut at = emit_ethernet(buf, self.dst_mac(), self.src_mac, self.vlan_tci, ETHERTYPE_IPV6);
        buf[at..at + Ipv6Header::LEN].copy_from_slice(&self.ipv6_header().to_bytes());
        at += Ipv6Header::LEN;
        buf[at..at + 8].copy_from_slice(&MLD_HOP_BY_HOP);
        at += 8;
        self.msg.emit_bytes(&mut buf[at..], &self.src_ip, &self.msg.destination());
        n
    }
}

/// An NS or NA frame: IPv6 hop limit 255, no extension header [ndisc.c].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NdiscFrame<'a> {
    /// Our MAC.
    pub src_mac: [u8; 6],
    /// The destination MAC.
    pub dst_mac: [u8; 6],
    /// The IPv6 source.
    pub src_ip: Ipv6Addr,
    /// The IPv6 destination.
    pub dst_ip: Ipv6Addr,
    /// The 802.1Q TCI, if tagged.
    pub vlan_tci: Option<u16>,
    /// The message.
    pub msg: NdiscMessage<'a>,
}

impl NdiscFrame<'static> {
    /// An address-resolution NS for `target` from `src_ip`, to the target's solicited-node
    /// group, with our MAC as Source Link-Layer Address (none when `src_ip` is ::, i.e. DAD)
    /// [ndisc.c ndisc_send_ns, ndisc_solicit].
    pub fn solicit(src_mac: [u8; 6], src_ip: Ipv6Addr, target: Ipv6Addr) -> Self {
        let ll = (!src_ip.is_unspecified()).then_some(src_mac);
        NdiscFrame {
            src_mac,
            dst_mac: ndisc::solicited_node_mac(target),
            src_ip,
            dst_ip: ndisc::solicited_node(target),
            vlan_tci: None,
            msg: NdiscMessage::solicit(target, ll),
        }
    }

    /// The NA that answers an address-resolution NS (sent to our solicited-node group) for
    /// our address `src_ip` from `dst_ip`/`dst_mac`: Solicited and Override set, our MAC as
    /// Target Link-Layer Address. Same as [`NdiscFrame::answer`] with a multicast NS.
    pub fn advert(src_mac: [u8; 6], src_ip: Ipv6Addr, dst_ip: Ipv6Addr, dst_mac: [u8; 6]) -> Self {
        Self::answer(src_mac, src_ip, dst_ip, dst_mac, ndisc::solicited_node(src_ip))
    }

    /// The NA Linux sends in answer to an NS for our address `src_ip` that came from
    /// `ns_src_ip`/`ns_src_mac` to `ns_dst_ip` [net/ipv6/ndisc.c ndisc_recv_ns]:
    /// - from :: (DAD): to ff02::1, Override only, Target Link-Layer Address option;
    /// - to a multicast address (address resolution): to the soliciter, Solicited|Override,
    ///   Target Link-Layer Address option;
    /// - to our unicast address (reachability probe): to the soliciter, Solicited only, no
    ///   option.
    pub fn answer(
        src_mac: [u8; 6],
        src_ip: Ipv6Addr,
        ns_src_ip: Ipv6Addr,
        ns_src_mac: [u8; 6],
        ns_dst_ip: Ipv6Addr,
    ) -> Self {
        let (dst_ip, dst_mac, flags, with_ll) = if ns_src_ip.is_unspecified() {
            (mld::ALL_NODES, ipv6_multicast_mac(mld::ALL_NODES), NeighborFlags::OVERRIDE, true)
        } else if ns_dst_ip.is_multicast() {
            (ns_src_ip, ns_src_mac, NeighborFlags::SOLICITED | NeighborFlags::OVERRIDE, true)
        } else {
            (ns_src_ip, ns_src_mac, NeighborFlags::SOLICITED, false)
        };
        let msg = NdiscMessage::NeighborAdvert {
            code: 0,
            flags,
            target_addr: src_ip,
            target_lladdr: with_ll.then_some(src_mac),
            options: &[],
        };
        NdiscFrame { src_mac, dst_mac, src_ip, dst_ip, vlan_tci: None, msg }
    }
}

impl NdiscFrame<'_> {
    /// The IPv6 header this frame carries.
    pub fn ipv6_header(&self) -> Ipv6Header {
        ipv6_header(self.src_ip, self.dst_ip, ndisc::HOP_LIMIT, mld::IPPROTO_ICMPV6, self.msg.buffer_len())
    }
}

impl EmitFrame for NdiscFrame<'_> {
    fn buffer_len(&self) -> usize {
        ETHERNET_LEN + vlan_len(self.vlan_tci) + Ipv6Header::LEN + self.msg.buffer_len()
    }

    fn emit(&self, buf: &mut [u8]) -> usize {
        let n = self.buffer_len();
        let buf = &mut buf[..n];
        let mut at = emit_ethernet(buf, self.dst_mac, self.src_mac, self.vlan_tci, ETHERTYPE_IPV6);
        buf[at..at + Ipv6Header::LEN].copy_from_slice(&self.ipv6_header().to_bytes());
        at += Ipv6Header::LEN;
        self.msg.emit_bytes(&mut buf[at..], &self.src_ip, &self.dst_ip);
        n
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::igmp::{GroupRecordRepr, RecordType, V3ReportRepr};
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    const MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];
    const PEER_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x02];
    const IP4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    const LL: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
    const LL2: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0xab, 0xcdef);

    fn emit<F: EmitFrame>(f: &F) -> Vec<u8> {
        let mut b = vec![0u8; f.buffer_len()];
        assert_eq!(f.emit(&mut b), b.len());
        b
    }

    fn rfc1071(data: &[u8]) -> u16 {
        let mut sum: u32 = data.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    #[test]
    fn multicast_macs() {
        assert_eq!(ipv4_multicast_mac(Ipv4Addr::new(239, 129, 1, 1)), [0x01, 0x00, 0x5e, 0x01, 0x01, 0x01]);
        assert_eq!(ipv4_multicast_mac(Ipv4Addr::new(224, 0, 0, 22)), [0x01, 0x00, 0x5e, 0x00, 0x00, 0x16]);
        assert_eq!(ipv6_multicast_mac(mld::ALL_MLDV2_ROUTERS), [0x33, 0x33, 0x00, 0x00, 0x00, 0x16]);
        assert_eq!(ipv6_multicast_mac("ff02::1:ff00:1".parse().unwrap()), [0x33, 0x33, 0xff, 0x00, 0x00, 0x01]);
    }

    /// The Linux IGMPv3 join frame for 239.1.1.1 from 198.18.0.1, byte for byte.
    #[test]
    fn igmpv3_join_frame_golden() {
        let f = IgmpFrame::new(MAC, IP4, IgmpMessage::v3_join(Ipv4Addr::new(239, 1, 1, 1)));
        let b = emit(&f);
        assert_eq!(b.len(), 14 + 24 + 16);
        let mut expected: Vec<u8> = Vec::new();
        expected.extend_from_slice(&[0x01, 0x00, 0x5e, 0x00, 0x00, 0x16]);
        expected.extend_from_slice(&MAC);
        expected.extend_from_slice(&[0x08, 0x00]);
        // IPv4: 46 c0 0028 0000 4000 01 02 csum c6120001 e0000016 94040000
        expected.extend_from_slice(&[0x46, 0xc0, 0x00, 0x28, 0x00, 0x00, 0x40, 0x00, 0x01, 0x02, 0, 0]);
        expected.extend_from_slice(&[198, 18, 0, 1, 224, 0, 0, 22, 0x94, 0x04, 0x00, 0x00]);
        let c = rfc1071(&expected[14..38]);
        expected[24..26].copy_from_slice(&c.to_be_bytes());
        expected.extend_from_slice(&[0x22, 0, 0xe9, 0xfb, 0, 0, 0, 1, 4, 0, 0, 0, 239, 1, 1, 1]);
        assert_eq!(b, expected);
        assert_eq!(rfc1071(&b[14..38]), 0);

        let fr = parse_frame(&b).unwrap();
        assert_eq!(fr.ethernet.destination, [0x01, 0x00, 0x5e, 0x00, 0x00, 0x16]);
        let L2Packet::Igmp { ip, msg } = fr.packet else { panic!() };
        assert_eq!(msg, f.msg);
        assert_eq!(ip, f.ipv4_header());
        assert_eq!(ipv4_router_alert(&ip.options), Some(0));
    }

    #[test]
    fn igmpv2_frames() {
        let g = Ipv4Addr::new(239, 1, 1, 1);
        let rep = emit(&IgmpFrame::new(MAC, IP4, IgmpMessage::v2_report(g)));
        assert_eq!(&rep[..6], &[0x01, 0x00, 0x5e, 0x01, 0x01, 0x01]);
        assert_eq!(&rep[30..34], &[239, 1, 1, 1]);
        let leave = emit(&IgmpFrame::new(MAC, IP4, IgmpMessage::v2_leave(g)));
        assert_eq!(&leave[..6], &[0x01, 0x00, 0x5e, 0x00, 0x00, 0x02]);
        assert_eq!(&leave[30..34], &[224, 0, 0, 2]);
        assert_eq!(leave[38], 0x17);
        assert_eq!(&leave[42..46], &[239, 1, 1, 1]);
        // padded to 60 bytes, as seen on the wire: still parses
        let mut padded = leave.clone();
        padded.resize(60, 0);
        let L2Packet::Igmp { msg, .. } = parse_frame(&padded).unwrap().packet else { panic!() };
        assert_eq!(msg, IgmpMessage::v2_leave(g));
    }

    /// The Linux MLDv2 join frame for ff12:401b::1 from fe80::1.
    #[test]
    fn mldv2_join_frame_golden() {
        let g: Ipv6Addr = "ff12:401b::1".parse().unwrap();
        let f = MldFrame::new(MAC, LL, MldMessage::join(g));
        let b = emit(&f);
        assert_eq!(b.len(), 14 + 40 + 8 + 28);
        assert_eq!(&b[..6], &[0x33, 0x33, 0x00, 0x00, 0x00, 0x16]);
        assert_eq!(&b[12..14], &[0x86, 0xdd]);
        assert_eq!(&b[14..22], &[0x60, 0, 0, 0, 0, 36, 0, 1]);
        assert_eq!(&b[22..38], &LL.octets());
        assert_eq!(&b[38..54], &mld::ALL_MLDV2_ROUTERS.octets());
        assert_eq!(&b[54..62], &[0x3a, 0x00, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00]);
        assert_eq!(&b[62..64], &[143, 0]);
        let fr = parse_frame(&b).unwrap();
        let L2Packet::Mld { ip, hop_by_hop, msg } = fr.packet else { panic!() };
        assert_eq!(msg, f.msg);
        assert_eq!(ip, f.ipv6_header());
        assert_eq!(hop_by_hop, Some(&MLD_HOP_BY_HOP[..]));
        assert_eq!(ipv6_router_alert(hop_by_hop.unwrap()), Some(0));
    }

    #[test]
    fn arp_frames() {
        let req = ArpFrame::new(arp::request(MAC, IP4, Ipv4Addr::new(198, 18, 0, 2)));
        let b = emit(&req);
        assert_eq!(b.len(), 42);
        assert_eq!(&b[..12], &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1]);
        assert_eq!(&b[12..14], &[0x08, 0x06]);
        assert_eq!(parse_frame(&b).unwrap().packet, L2Packet::Arp(req.repr));
        let rep = ArpFrame { vlan_tci: Some(0x2005), repr: arp::reply_to(&req.repr, PEER_MAC).unwrap() };
        let b = emit(&rep);
        assert_eq!(&b[..6], &MAC);
        assert_eq!(&b[12..18], &[0x81, 0x00, 0x20, 0x05, 0x08, 0x06]);
        let fr = parse_frame(&b).unwrap();
        assert_eq!(fr.vlan.as_ref().map(|v| v.vlan_id.value()), Some(5));
        assert_eq!(fr.ether_type(), ETHERTYPE_ARP);
        assert_eq!(fr.packet, L2Packet::Arp(rep.repr));
    }

    #[test]
    fn ndisc_frames() {
        let ns = NdiscFrame::solicit(MAC, LL, LL2);
        let b = emit(&ns);
        assert_eq!(&b[..6], &[0x33, 0x33, 0xff, 0xab, 0xcd, 0xef]);
        assert_eq!(b[21], 255);
        assert_eq!(&b[38..54], &ndisc::solicited_node(LL2).octets());
        let fr = parse_frame(&b).unwrap();
        let L2Packet::Ndisc { ip, hop_by_hop: None, msg } = fr.packet else { panic!() };
        assert_eq!(msg, ns.msg);
        assert_eq!(ip, ns.ipv6_header());
        assert_eq!(msg.lladdr(), Some(MAC));

        let na = NdiscFrame::advert(PEER_MAC, LL2, LL, MAC);
        let b = emit(&na);
        assert_eq!(&b[..6], &MAC);
        let L2Packet::Ndisc { msg, .. } = parse_frame(&b).unwrap().packet else { panic!() };
        assert_eq!(msg, na.msg);
        assert_eq!(msg.lladdr(), Some(PEER_MAC));

        let dad = NdiscFrame::solicit(MAC, Ipv6Addr::UNSPECIFIED, LL);
        assert_eq!(dad.msg.lladdr(), None);
        let b = emit(&dad);
        let L2Packet::Ndisc { msg, .. } = parse_frame(&b).unwrap().packet else { panic!() };
        assert_eq!(msg, dad.msg);
        let dad_answer = NdiscFrame::advert(MAC, LL, Ipv6Addr::UNSPECIFIED, PEER_MAC);
        assert_eq!(dad_answer.dst_ip, mld::ALL_NODES);
        let NdiscMessage::NeighborAdvert { flags, .. } = dad_answer.msg else { panic!() };
        assert_eq!(flags, NeighborFlags::OVERRIDE);
        // a unicast probe gets S only and no option
        let probe_answer = NdiscFrame::answer(MAC, LL, LL2, PEER_MAC, LL);
        assert_eq!(
            probe_answer.msg,
            NdiscMessage::NeighborAdvert {
                code: 0,
                flags: NeighborFlags::SOLICITED,
                target_addr: LL,
                target_lladdr: None,
                options: &[]
            }
        );
        assert_eq!(probe_answer.dst_mac, PEER_MAC);
        let b = emit(&probe_answer);
        assert_eq!(b.len(), 14 + 40 + 24);
        let L2Packet::Ndisc { msg, .. } = parse_frame(&b).unwrap().packet else { panic!() };
        assert_eq!(msg, probe_answer.msg);
    }

    #[test]
    fn other_and_errors() {
        // a RoCEv2-looking IPv4/UDP frame is Other
        let mut b = emit(&IgmpFrame::new(MAC, IP4, IgmpMessage::v2_report(Ipv4Addr::new(239, 1, 1, 1))));
        b[23] = 17;
        assert!(matches!(parse_frame(&b).unwrap().packet, L2Packet::Other { ether_type: 0x0800, .. }));
        let other = [0u8; 14];
        assert_eq!(parse_frame(&other).unwrap().packet, L2Packet::Other { ether_type: 0, payload: &[] });
        // bad IPv4 header checksum
        let mut b = emit(&IgmpFrame::new(MAC, IP4, IgmpMessage::v2_report(Ipv4Addr::new(239, 1, 1, 1))));
        b[22] = 2;
        assert!(matches!(
            parse_frame(&b),
            Err(Error::Content { layer: Layer::Ipv4, offset: 24, kind: ContentError::Ipv4Checksum { .. } })
        ));
        // bad IGMP checksum: offset inside the frame
        let mut b = emit(&IgmpFrame::new(MAC, IP4, IgmpMessage::v2_report(Ipv4Addr::new(239, 1, 1, 1))));
        b[41] ^= 1;
        assert_eq!(parse_frame(&b), Err(Error::content(Layer::Igmp, 40, ContentError::Checksum)));
        // bad MLD checksum
        let mut b = emit(&MldFrame::new(MAC, LL, MldMessage::leave("ff12::1".parse().unwrap())));
        let n = b.len();
        b[n - 1] ^= 1;
        assert_eq!(parse_frame(&b), Err(Error::content(Layer::Mld, 64, ContentError::Checksum)));
    }

    fn check_truncations(b: &[u8]) {
        for n in 0..b.len() {
            match parse_frame(&b[..n]) {
                Err(Error::Len { .. }) | Err(Error::Content { kind: ContentError::IpLength { .. }, .. }) => {}
                other => panic!("cut at {n} of {}: {other:?}", b.len()),
            }
        }
    }

    #[test]
    fn truncation_at_every_length() {
        let g = Ipv4Addr::new(239, 1, 1, 1);
        let mut r = V3ReportRepr::single(RecordType::ChangeToExclude, g);
        let mut rec = GroupRecordRepr::new(RecordType::AllowNewSources, g);
        rec.sources.push(IP4).unwrap();
        r.records.push(rec).unwrap();
        check_truncations(&emit(&IgmpFrame::new(MAC, IP4, IgmpMessage::V3Report(r))));
        check_truncations(&emit(&IgmpFrame {
            vlan_tci: Some(7),
            ..IgmpFrame::new(MAC, IP4, IgmpMessage::v2_leave(g))
        }));
        check_truncations(&emit(&MldFrame::new(MAC, LL, MldMessage::join("ff12::1".parse().unwrap()))));
        check_truncations(&emit(&NdiscFrame::solicit(MAC, LL, LL2)));
        check_truncations(&emit(&ArpFrame::new(arp::request(MAC, IP4, IP4))));
    }

    /// Every byte of every kind of frame set to a few values, then every truncation of that:
    /// parse_frame never panics.
    #[test]
    fn exhaustive_byte_mutations() {
        let g = Ipv4Addr::new(239, 1, 1, 1);
        let mut r = V3ReportRepr::single(RecordType::ChangeToExclude, g);
        let mut rec = GroupRecordRepr::new(RecordType::AllowNewSources, g);
        rec.sources.push(IP4).unwrap();
        rec.aux_data.push(7).unwrap();
        r.records.push(rec).unwrap();
        let frames = [
            emit(&IgmpFrame { vlan_tci: Some(1), ..IgmpFrame::new(MAC, IP4, IgmpMessage::V3Report(r)) }),
            emit(&MldFrame::new(MAC, LL, MldMessage::join("ff12::1".parse().unwrap()))),
            emit(&NdiscFrame::solicit(MAC, LL, LL2)),
            emit(&NdiscFrame::advert(MAC, LL, LL2, PEER_MAC)),
            emit(&ArpFrame::new(arp::request(MAC, IP4, IP4))),
        ];
        for f in &frames {
            for i in 0..f.len() {
                for v in [0u8, 1, 2, 0x7f, 0x80, 0xff, f[i] ^ 0x01] {
                    let mut b = f.clone();
                    b[i] = v;
                    for n in (0..=b.len()).rev().step_by(3) {
                        let _ = parse_frame(&b[..n]);
                    }
                }
            }
        }
    }

    proptest! {
        #[test]
        fn igmp_frames_round_trip(m in crate::igmp::tests::arb_message(), src in any::<u32>(), id in any::<u16>(), tci in proptest::option::of(any::<u16>())) {
            let f = IgmpFrame { src_mac: MAC, src_ip: Ipv4Addr::from(src), vlan_tci: tci, identification: id, msg: m.clone() };
            let b = emit(&f);
            let fr = parse_frame(&b).unwrap();
            prop_assert_eq!(fr.vlan.map(|v| u16::from_be_bytes([v.to_bytes()[0], v.to_bytes()[1]])), tci);
            prop_assert_eq!(fr.packet, L2Packet::Igmp { ip: f.ipv4_header(), msg: m });
        }

        #[test]
        fn mld_frames_round_trip(m in crate::mld::tests::arb_message(), src in any::<u128>()) {
            let f = MldFrame::new(MAC, Ipv6Addr::from(src), m.clone());
            let b = emit(&f);
            prop_assert_eq!(parse_frame(&b).unwrap().packet, L2Packet::Mld { ip: f.ipv6_header(), hop_by_hop: Some(&MLD_HOP_BY_HOP[..]), msg: m });
        }

        #[test]
        fn ndisc_frames_round_trip(src in any::<u128>(), target in any::<u128>(), mac in any::<[u8; 6]>(), solicit in any::<bool>()) {
            let (src, target) = (Ipv6Addr::from(src), Ipv6Addr::from(target));
            let f = if solicit { NdiscFrame::solicit(mac, src, target) } else { NdiscFrame::advert(mac, src, target, PEER_MAC) };
            let b = emit(&f);
            prop_assert_eq!(parse_frame(&b).unwrap().packet, L2Packet::Ndisc { ip: f.ipv6_header(), hop_by_hop: None, msg: f.msg });
        }

        #[test]
        fn parse_frame_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..160)) {
            let _ = parse_frame(&bytes);
        }

        #[test]
        fn parse_frame_never_panics_on_mutated_frames(idx in any::<usize>(), byte in any::<u8>(), which in 0usize..4) {
            let g = Ipv4Addr::new(239, 1, 1, 1);
            let mut b = match which {
                0 => emit(&IgmpFrame::new(MAC, IP4, IgmpMessage::v3_join(g))),
                1 => emit(&MldFrame::new(MAC, LL, MldMessage::join("ff12::1".parse().unwrap()))),
                2 => emit(&NdiscFrame::solicit(MAC, LL, LL2)),
                _ => emit(&ArpFrame::new(arp::request(MAC, IP4, IP4))),
            };
            let i = idx % b.len();
            b[i] = byte;
            let _ = parse_frame(&b);
        }
    }
}
