//! One demux entry: a received or captured frame walked once, from its link layer to RoCEv2
//! or to the multicast and neighbour messages (in the spirit of etherparse's
//! `SlicedPacket::from_ethernet`).
//!
//! [`Sliced::from_link`] (or [`Sliced::from_ethernet`]) takes a link type and the bytes and
//! returns every layer it found, each checked once:
//! - the link header ([`LinkHeader`]: Ethernet II, Linux cooked SLL or SLL2, or none for raw
//!   IP) and an 802.1Q tag;
//! - the IP header ([`IpSlice`]: IPv4 with its options, or IPv6 with the Hop-by-Hop header
//!   that precedes MLD);
//! - the UDP header;
//! - the [`Payload`]: a checked RoCEv2 view ([`FramePacket`], the one [`crate::frame`] gives),
//!   or ARP, IGMP, MLD or NS/NA ([`L2Packet`]), or anything else with the reason it is not
//!   RoCEv2 ([`NotRoce`]: its EtherType, IP protocol or UDP port).
//!
//! [`Checks::Strict`] refuses what rxe refuses (as [`crate::frame::parse`]); [`Checks::Lax`]
//! decodes as far as the bytes allow (as [`crate::frame::parse_lax`]) and keeps the error the
//! strict walk would have returned. Errors are the crate's [`Error`]s, naming the layer and
//! the byte offset from the start of `bytes`; nothing panics. The walk agrees exactly with
//! [`crate::frame::parse`] followed, for a frame that is not RoCEv2, by
//! [`crate::l2::parse_frame`] (a property test holds it to that), without reading any layer
//! twice.

use core::net::IpAddr;

use etherparse::{Ethernet2Header, Ipv4Header, Ipv6Header, SingleVlanHeader, UdpHeader};

use crate::arp;
use crate::error::{ContentError, Error, Layer, Result};
use crate::frame::{self, FramePacket, LinkEnd};
use crate::l2::{self, L2Packet, ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6, IPPROTO_IGMP};
use crate::ROCEV2_UDP_PORT;

const UDP: u8 = 17;
const UDP_LEN: usize = 8;

/// A capture's link type: the pcap `LINKTYPE_*` values the decoder dissects; any other is
/// kept as [`LinkType::Unknown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// `LINKTYPE_ETHERNET` (1): Ethernet II.
    Ethernet,
    /// `LINKTYPE_RAW` (101): raw IP, the version nibble tells IPv4 from IPv6.
    Raw,
    /// `LINKTYPE_LINUX_SLL` (113): Linux cooked capture, 16-byte header.
    LinuxSll,
    /// `LINKTYPE_IPV4` (228): raw IPv4.
    Ipv4,
    /// `LINKTYPE_IPV6` (229): raw IPv6.
    Ipv6,
    /// `LINKTYPE_LINUX_SLL2` (276): Linux cooked capture v2, 20-byte header.
    LinuxSll2,
    /// Any other link type.
    Unknown(u32),
}

impl From<u32> for LinkType {
    fn from(v: u32) -> Self {
        match v {
            1 => LinkType::Ethernet,
            101 => LinkType::Raw,
            113 => LinkType::LinuxSll,
            228 => LinkType::Ipv4,
            229 => LinkType::Ipv6,
            276 => LinkType::LinuxSll2,
            other => LinkType::Unknown(other),
        }
    }
}

impl From<LinkType> for u32 {
    fn from(t: LinkType) -> u32 {
        match t {
            LinkType::Ethernet => 1,
            LinkType::Raw => 101,
            LinkType::LinuxSll => 113,
            LinkType::Ipv4 => 228,
            LinkType::Ipv6 => 229,
            LinkType::LinuxSll2 => 276,
            LinkType::Unknown(v) => v,
        }
    }
}

/// Length of a Linux cooked (SLL) header.
pub const SLL_LEN: usize = 16;
/// Length of a Linux cooked v2 (SLL2) header.
pub const SLL2_LEN: usize = 20;

/// A Linux cooked capture header (`LINKTYPE_LINUX_SLL`, linux/if_packet.h `sockaddr_ll`
/// as libpcap writes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SllHeader<'a> {
    /// The packet type (`PACKET_HOST`, `PACKET_BROADCAST`, …).
    pub packet_type: u16,
    /// The ARPHRD_ hardware type.
    pub hatype: u16,
    /// The link-layer address length.
    pub halen: u16,
    /// The 8 bytes of link-layer address (the first `halen` are used).
    pub addr: &'a [u8],
    /// The protocol (an EtherType).
    pub protocol: u16,
}

/// A Linux cooked capture v2 header (`LINKTYPE_LINUX_SLL2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sll2Header<'a> {
    /// The protocol (an EtherType).
    pub protocol: u16,
    /// Reserved (MBZ).
    pub reserved: u16,
    /// The interface index.
    pub ifindex: u32,
    /// The ARPHRD_ hardware type.
    pub hatype: u16,
    /// The packet type (`PACKET_HOST`, …).
    pub packet_type: u8,
    /// The link-layer address length.
    pub halen: u8,
    /// The 8 bytes of link-layer address (the first `halen` are used).
    pub addr: &'a [u8],
}

/// The link-layer header of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkHeader<'a> {
    /// An Ethernet II header (its 14 bytes; see [`LinkHeader::ethernet`]).
    Ethernet(&'a [u8]),
    /// A Linux cooked header.
    LinuxSll(SllHeader<'a>),
    /// A Linux cooked v2 header.
    LinuxSll2(Sll2Header<'a>),
    /// Raw IP: no link header. `ether_type` is what the link type and the version nibble say
    /// the packet is (IPv4 or IPv6; 0 for a raw packet of another version).
    RawIp {
        /// 0x0800, 0x86dd or 0.
        ether_type: u16,
    },
}

impl<'a> LinkHeader<'a> {
    /// Read the link-layer header of a frame of link type `link`: a header cut short is a
    /// length error ([`Layer::Ethernet`], or [`Layer::Link`] for SLL and SLL2), a link type
    /// not dissected is [`ContentError::UnsupportedLinkType`].
    #[inline]
    pub fn parse(link: LinkType, bytes: &'a [u8]) -> Result<LinkHeader<'a>> {
        let need = |layer, n: usize| {
            if bytes.len() < n {
                Err(Error::len(layer, 0, n, bytes.len()))
            } else {
                Ok(())
            }
        };
        let be16 = |at: usize| u16::from_be_bytes([bytes[at], bytes[at + 1]]);
        Ok(match link {
            LinkType::Ethernet => {
                need(Layer::Ethernet, frame::ETH_LEN)?;
                LinkHeader::Ethernet(&bytes[..frame::ETH_LEN])
            }
            LinkType::LinuxSll => {
                need(Layer::Link, SLL_LEN)?;
                LinkHeader::LinuxSll(SllHeader {
                    packet_type: be16(0),
                    hatype: be16(2),
                    halen: be16(4),
                    addr: &bytes[6..14],
                    protocol: be16(14),
                })
            }
            LinkType::LinuxSll2 => {
                need(Layer::Link, SLL2_LEN)?;
                LinkHeader::LinuxSll2(Sll2Header {
                    protocol: be16(0),
                    reserved: be16(2),
                    ifindex: u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]),
                    hatype: be16(8),
                    packet_type: bytes[10],
                    halen: bytes[11],
                    addr: &bytes[12..20],
                })
            }
            LinkType::Raw | LinkType::Ipv4 | LinkType::Ipv6 => {
                // The link type wins for IPv4; else the version nibble decides.
                let ether_type = match (link, bytes.first().map(|b| b >> 4)) {
                    (LinkType::Ipv4, _) | (_, Some(4)) => ETHERTYPE_IPV4,
                    (LinkType::Ipv6, _) | (_, Some(6)) => ETHERTYPE_IPV6,
                    _ => 0,
                };
                LinkHeader::RawIp { ether_type }
            }
            LinkType::Unknown(t) => {
                return Err(Error::content(Layer::Link, 0, ContentError::UnsupportedLinkType(t)));
            }
        })
    }

    /// The header's length (where the network layer, or a tag, starts).
    pub fn len(&self) -> usize {
        match self {
            LinkHeader::Ethernet(_) => frame::ETH_LEN,
            LinkHeader::LinuxSll(_) => SLL_LEN,
            LinkHeader::LinuxSll2(_) => SLL2_LEN,
            LinkHeader::RawIp { .. } => 0,
        }
    }

    /// Whether the header is empty (raw IP).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The EtherType of what follows the header.
    pub fn ether_type(&self) -> u16 {
        self.end().ether_type
    }

    /// The Ethernet II header, if the link is Ethernet.
    pub fn ethernet(&self) -> Option<Ethernet2Header> {
        match self {
            LinkHeader::Ethernet(b) => {
                let mut h = [0u8; frame::ETH_LEN];
                h.copy_from_slice(b);
                Some(Ethernet2Header::from_bytes(h))
            }
            _ => None,
        }
    }

    /// The source MAC of an Ethernet header.
    pub fn source_mac(&self) -> Option<[u8; 6]> {
        match self {
            LinkHeader::Ethernet(b) => Some([b[6], b[7], b[8], b[9], b[10], b[11]]),
            _ => None,
        }
    }

    /// The EtherType, where it sits and where its payload starts.
    #[inline(always)]
    fn end(&self) -> LinkEnd {
        let (ether_type, ether_type_at) = match self {
            LinkHeader::Ethernet(b) => (u16::from_be_bytes([b[12], b[13]]), 12),
            LinkHeader::LinuxSll(h) => (h.protocol, 14),
            LinkHeader::LinuxSll2(h) => (h.protocol, 0),
            LinkHeader::RawIp { ether_type } => (*ether_type, 0),
        };
        LinkEnd { ether_type, ether_type_at, payload_at: self.len(), vlan: false }
    }
}

/// Which checks the walk makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checks {
    /// As rxe accepts frames ([`crate::frame::parse`]): a bad ICRC, a bad IPv4 header checksum,
    /// the IPv4 reserved flag, a non-zero TVer or a pad larger than the payload is an error.
    Strict,
    /// As far as the bytes allow ([`crate::frame::parse_lax`]): those are recorded in
    /// [`Payload::RoceV2`]'s `refused` instead (an oversize pad is taken as none).
    Lax,
}

/// Why a frame is not RoCEv2: the first layer that says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotRoce {
    /// The EtherType (after a tag) is not IPv4 or IPv6.
    EtherType(u16),
    /// The IP protocol (IPv4) or next header (IPv6) is not UDP.
    IpProtocol(u8),
    /// The UDP destination port is not 4791.
    UdpPort(u16),
}

/// What a frame carries after its headers.
// (The report variants of `L2Packet` hold their records; RoCEv2, the common case, is a view.)
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload<'a> {
    /// A RoCEv2 frame, every check of the [`Checks`] made.
    RoceV2 {
        /// The checked view (the owned form: [`FramePacket::to_frame`]).
        packet: FramePacket<'a>,
        /// With [`Checks::Lax`], the error [`Checks::Strict`] would have returned (what rxe
        /// refuses); always `None` with [`Checks::Strict`].
        refused: Option<Error>,
    },
    /// Not RoCEv2: why, and what it is (ARP, IGMP, MLD, NS/NA, or [`L2Packet::Other`]), or
    /// the error of its message (an ARP packet, IGMP or MLD message that does not parse, an
    /// IGMP packet's bad IPv4 checksum…: the frame is known not to be RoCEv2 then).
    NotRoce {
        /// The layer that says it is not RoCEv2.
        why: NotRoce,
        /// The message, or why it does not parse.
        packet: Result<L2Packet<'a>>,
    },
}

/// A checked IP header and the packet it heads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpSlice<'a> {
    ipv6: bool,
    /// The IP packet (header to the end its length field gives).
    packet: &'a [u8],
    header_len: usize,
    extensions: &'a [u8],
}

impl<'a> IpSlice<'a> {
    /// Whether it is IPv6.
    pub fn is_ipv6(&self) -> bool {
        self.ipv6
    }

    /// The header's bytes (IPv4 with its options; IPv6's fixed 40 bytes).
    pub fn header(&self) -> &'a [u8] {
        &self.packet[..self.header_len]
    }

    /// The IPv6 extension headers walked (the Hop-by-Hop header before MLD, as Linux sends
    /// it); empty for IPv4 and for RoCEv2, whose UDP header must follow the fixed header.
    pub fn extensions(&self) -> &'a [u8] {
        self.extensions
    }

    /// The packet: header to the end its length field gives (Ethernet padding excluded).
    pub fn packet(&self) -> &'a [u8] {
        self.packet
    }

    /// The protocol (IPv4) or the fixed header's next header (IPv6).
    pub fn protocol(&self) -> u8 {
        if self.ipv6 {
            self.packet[6]
        } else {
            self.packet[9]
        }
    }

    /// The source address.
    pub fn source(&self) -> IpAddr {
        self.addr(true)
    }

    /// The destination address.
    pub fn destination(&self) -> IpAddr {
        self.addr(false)
    }

    fn addr(&self, src: bool) -> IpAddr {
        let b = self.packet;
        if self.ipv6 {
            let at = if src { 8 } else { 24 };
            let mut a = [0u8; 16];
            a.copy_from_slice(&b[at..at + 16]);
            IpAddr::from(a)
        } else {
            let at = if src { 12 } else { 16 };
            IpAddr::from([b[at], b[at + 1], b[at + 2], b[at + 3]])
        }
    }

    /// The owned IPv4 header (`None` for IPv6).
    pub fn ipv4_header(&self) -> Option<Ipv4Header> {
        if self.ipv6 {
            return None;
        }
        Ipv4Header::from_slice(self.header()).ok().map(|(h, _)| h)
    }

    /// The owned IPv6 header (`None` for IPv4).
    pub fn ipv6_header(&self) -> Option<Ipv6Header> {
        if !self.ipv6 {
            return None;
        }
        Ipv6Header::from_slice(self.header()).ok().map(|(h, _)| h)
    }
}

/// Every layer of one frame, each read once: see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sliced<'a> {
    /// The link-layer header.
    pub link: LinkHeader<'a>,
    /// The 802.1Q tag's 4 bytes, if tagged (see [`Sliced::vlan`]).
    pub vlan_tag: Option<&'a [u8]>,
    /// The IP header, for IPv4 and IPv6 frames.
    pub ip: Option<IpSlice<'a>>,
    /// The UDP header's 8 bytes, for UDP datagrams (see [`Sliced::udp`]).
    pub udp_header: Option<&'a [u8]>,
    /// What the frame carries.
    pub payload: Payload<'a>,
}

impl<'a> Sliced<'a> {
    /// Walk an Ethernet frame (see the module docs).
    #[inline]
    pub fn from_ethernet(bytes: &'a [u8], checks: Checks) -> Result<Sliced<'a>> {
        Self::from_link(LinkType::Ethernet, bytes, checks)
    }

    /// Walk a frame of link type `link` (see the module docs).
    #[inline]
    pub fn from_link(link: LinkType, bytes: &'a [u8], checks: Checks) -> Result<Sliced<'a>> {
        Self::after_link(LinkHeader::parse(link, bytes)?, bytes, checks)
    }

    /// Walk a frame whose link header `link` was read by [`LinkHeader::parse`] from the same
    /// `bytes` (for callers that show the link header also when a later layer fails).
    #[inline]
    pub fn after_link(link: LinkHeader<'a>, bytes: &'a [u8], checks: Checks) -> Result<Sliced<'a>> {
        Self::walk(link, bytes, checks, false)
    }

    /// Walk an Ethernet frame whose ICRC the caller has already computed over these very
    /// bytes and found right (a transport that had to compute it on receive, e.g. to recover
    /// the IPv4 ID a kernel socket does not report): as [`Checks::Strict`] in every other
    /// check, the ICRC taken as read instead of computed a second time. A frame whose ICRC
    /// was not verified so must go through [`Sliced::from_ethernet`].
    #[inline]
    pub fn from_ethernet_icrc_verified(bytes: &'a [u8]) -> Result<Sliced<'a>> {
        Self::walk(LinkHeader::parse(LinkType::Ethernet, bytes)?, bytes, Checks::Strict, true)
    }

    #[inline(always)]
    fn walk(link: LinkHeader<'a>, bytes: &'a [u8], checks: Checks, icrc_verified: bool) -> Result<Sliced<'a>> {
        let strict = checks == Checks::Strict;
        let mut refused = None;
        let end = frame::vlan_tag(bytes, link.end())?;
        let at = end.payload_at;
        let vlan_tag = end.vlan.then(|| &bytes[at - frame::VLAN_LEN..at]);
        let other = |why| Payload::NotRoce {
            why,
            packet: Ok(L2Packet::Other { ether_type: end.ether_type, payload: &bytes[at..] }),
        };
        let sliced = |ip, udp_header, payload| Sliced { link, vlan_tag, ip, udp_header, payload };
        match end.ether_type {
            ETHERTYPE_IPV4 | ETHERTYPE_IPV6 => {}
            ETHERTYPE_ARP => {
                let packet = arp::parse_bytes(&bytes[at..]).map(L2Packet::Arp).map_err(|e| e.add_offset(at));
                return Ok(sliced(None, None, Payload::NotRoce { why: NotRoce::EtherType(ETHERTYPE_ARP), packet }));
            }
            t => return Ok(sliced(None, None, other(NotRoce::EtherType(t)))),
        }
        let ip = frame::ip_header(bytes, end, strict, &mut refused)?;
        let mut ip_slice =
            IpSlice { ipv6: ip.ipv6, packet: &bytes[at..at + ip.len], header_len: ip.header_len, extensions: &[] };
        if ip.protocol != UDP {
            // The multicast and neighbour messages, read from the header on as
            // `l2::parse_frame` reads them (what `frame` checked above is not checked again).
            let rest = &bytes[at..];
            let packet = if ip.ipv6 {
                l2::read_ipv6_header(rest, at).and_then(|h| l2::icmpv6_in_ipv6(h, rest, at))
            } else if ip.protocol == IPPROTO_IGMP {
                l2::read_ipv4_header(rest, at).and_then(|h| l2::igmp_in_ipv4(h, rest, at)).map(Some)
            } else {
                Ok(None)
            };
            let why = NotRoce::IpProtocol(ip.protocol);
            let payload = match packet {
                Ok(None) => other(why),
                Ok(Some(p)) => {
                    if let L2Packet::Mld { hop_by_hop: Some(h), .. } | L2Packet::Ndisc { hop_by_hop: Some(h), .. } = &p
                    {
                        ip_slice.extensions = h;
                    }
                    Payload::NotRoce { why, packet: Ok(p) }
                }
                Err(e) => Payload::NotRoce { why, packet: Err(e) },
            };
            return Ok(sliced(Some(ip_slice), None, payload));
        }
        let udp = frame::udp_header(bytes, &ip, strict, &mut refused)?;
        let udp_at = at + ip.header_len;
        let udp_header = Some(&bytes[udp_at..udp_at + UDP_LEN]);
        if udp.dport != ROCEV2_UDP_PORT {
            return Ok(sliced(Some(ip_slice), udp_header, other(NotRoce::UdpPort(udp.dport))));
        }
        let ethernet = matches!(link, LinkHeader::Ethernet(_));
        let packet = frame::roce_after_udp(bytes, end, ethernet, &ip, udp, strict, icrc_verified, &mut refused)?;
        Ok(sliced(Some(ip_slice), udp_header, Payload::RoceV2 { packet, refused }))
    }

    /// The 802.1Q tag, if tagged (its `ether_type` is the payload's).
    pub fn vlan(&self) -> Option<SingleVlanHeader> {
        self.vlan_tag.map(|t| SingleVlanHeader::from_bytes([t[0], t[1], t[2], t[3]]))
    }

    /// The UDP header, for UDP datagrams.
    pub fn udp(&self) -> Option<UdpHeader> {
        self.udp_header.map(|u| UdpHeader {
            source_port: u16::from_be_bytes([u[0], u[1]]),
            destination_port: u16::from_be_bytes([u[2], u[3]]),
            length: u16::from_be_bytes([u[4], u[5]]),
            checksum: u16::from_be_bytes([u[6], u[7]]),
        })
    }

    /// The EtherType of the network layer (after a tag).
    pub fn ether_type(&self) -> u16 {
        match self.vlan_tag {
            Some(t) => u16::from_be_bytes([t[2], t[3]]),
            None => self.link.ether_type(),
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::frame::{Frame, FrameRepr};
    use crate::golden;
    use crate::igmp::IgmpMessage;
    use crate::l2::{ArpFrame, EmitFrame, IgmpFrame, L2Frame, MldFrame, NdiscFrame};
    use crate::mld::MldMessage;
    use core::net::{Ipv4Addr, Ipv6Addr};
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const LL: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);

    fn emit<F: EmitFrame>(f: &F) -> Vec<u8> {
        let mut b = vec![0u8; f.buffer_len()];
        f.emit(&mut b);
        b
    }

    /// Frames of every kind the demux tells apart, to mutate.
    fn seeds() -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> =
            vec![golden::SA_DELETE_MCMEMBER.to_vec(), golden::SCAPY_UC_SEND_ONLY.to_vec(), golden::CX4_CNP.to_vec()];
        // RoCEv2 over IPv6 and behind a tag.
        let bth = crate::bth::Repr::new(crate::bth::Opcode::UdSendOnly, 0xff_ffff, 7);
        let ext = crate::ext::ExtHeaders::deth(crate::RDMA_UDP_QKEY, 9);
        let payload = [0xabu8; 13];
        for (src, dst, tagged) in [
            (IpAddr::from(LL), IpAddr::from(Ipv6Addr::new(0xff12, 0x401b, 0, 0, 0, 0, 0, 1)), false),
            (IpAddr::from([198, 18, 0, 1]), IpAddr::from([239, 1, 2, 3]), true),
        ] {
            let mut r = FrameRepr::new(MAC, [1, 0, 0x5e, 1, 2, 3], src, dst, bth, ext, &payload);
            if tagged {
                r.vlan = Some(SingleVlanHeader::from_bytes([0x20, 0x05, 0x08, 0x00]));
            }
            let mut b = vec![0u8; r.buffer_len()];
            r.emit(&mut b).unwrap();
            v.push(b);
        }
        let g = Ipv4Addr::new(239, 1, 1, 1);
        v.push(emit(&IgmpFrame::new(MAC, Ipv4Addr::new(198, 18, 0, 1), IgmpMessage::v3_join(g))));
        v.push(emit(&IgmpFrame::new(MAC, Ipv4Addr::new(198, 18, 0, 1), IgmpMessage::v2_leave(g))));
        v.push(emit(&MldFrame::new(MAC, LL, MldMessage::join("ff12:401b::1".parse().unwrap()))));
        v.push(emit(&NdiscFrame::solicit(MAC, LL, Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2))));
        let req = crate::arp::request(MAC, Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
        v.push(emit(&ArpFrame::new(req)));
        v.push(emit(&ArpFrame { vlan_tci: Some(0x2005), repr: req }));
        // UDP to another port, and TCP.
        let mut udp = golden::SA_DELETE_MCMEMBER.to_vec();
        udp[36..38].copy_from_slice(&53u16.to_be_bytes());
        v.push(udp);
        let mut tcp = golden::SA_DELETE_MCMEMBER.to_vec();
        tcp[23] = 6;
        v.push(tcp);
        v
    }

    /// What the engine (strict) and the decoder (lax) did before the demux: `frame::parse`
    /// (then, for the decoder, `frame::parse_lax`), and `l2::parse_frame` from byte 0 when the
    /// frame is not RoCEv2.
    #[allow(clippy::large_enum_variant)]
    enum Old<'a> {
        Roce(Frame<'a>, Option<Error>),
        NotRoce(Error, Result<L2Frame<'a>>),
    }

    fn not_roce(e: &Error) -> bool {
        matches!(
            e,
            Error::Content {
                kind: ContentError::UnsupportedEtherType(_)
                    | ContentError::NotUdp { .. }
                    | ContentError::NotRoceV2Port { .. },
                ..
            }
        )
    }

    fn old(bytes: &[u8], checks: Checks) -> Result<Old<'_>> {
        let strict = match frame::parse(bytes) {
            Ok(f) => return Ok(Old::Roce(f, None)),
            Err(e) => e,
        };
        let e = match checks {
            Checks::Strict => strict,
            Checks::Lax => match frame::parse_lax(bytes) {
                Ok(f) => return Ok(Old::Roce(f, Some(strict))),
                Err(e) => e,
            },
        };
        if not_roce(&e) {
            return Ok(Old::NotRoce(e, l2::parse_frame(bytes)));
        }
        Err(e)
    }

    fn why_of(e: &Error) -> NotRoce {
        match e {
            Error::Content { kind: ContentError::UnsupportedEtherType(t), .. } => NotRoce::EtherType(*t),
            Error::Content { kind: ContentError::NotUdp { protocol }, .. } => NotRoce::IpProtocol(*protocol),
            Error::Content { kind: ContentError::NotRoceV2Port { port }, .. } => NotRoce::UdpPort(*port),
            _ => unreachable!(),
        }
    }

    /// The demux agrees with the old two-parser path on `bytes`.
    fn agrees(bytes: &[u8], checks: Checks) -> core::result::Result<(), TestCaseError> {
        let new = Sliced::from_ethernet(bytes, checks);
        match (old(bytes, checks), new) {
            (Err(a), Err(b)) => prop_assert_eq!(a, b),
            (Ok(Old::Roce(f, refused)), Ok(s)) => {
                let Payload::RoceV2 { packet, refused: r } = &s.payload else {
                    return Err(TestCaseError::fail("not RoCEv2"));
                };
                prop_assert_eq!(&packet.to_frame().unwrap(), &f);
                prop_assert_eq!(r, &refused);
                prop_assert_eq!(s.vlan(), f.repr.vlan);
                prop_assert_eq!(s.link.ethernet(), Some(f.repr.ethernet));
                prop_assert_eq!(s.udp(), Some(f.repr.udp));
                let ip = s.ip.unwrap();
                prop_assert_eq!((ip.source(), ip.destination()), (f.repr.ip.source(), f.repr.ip.destination()));
            }
            (Ok(Old::NotRoce(e, f)), Ok(s)) => {
                let Payload::NotRoce { why, packet } = &s.payload else {
                    return Err(TestCaseError::fail("RoCEv2"));
                };
                prop_assert_eq!(*why, why_of(&e));
                match f {
                    Ok(f) => {
                        prop_assert_eq!(packet, &Ok(f.packet.clone()));
                        prop_assert_eq!(s.ether_type(), f.ether_type());
                        prop_assert_eq!(s.link.ethernet(), Some(f.ethernet));
                        prop_assert_eq!(s.vlan(), f.vlan);
                    }
                    Err(e) => prop_assert_eq!(packet, &Err(e)),
                }
            }
            (a, b) => {
                let a = a.map(|o| matches!(o, Old::Roce(..)));
                return Err(TestCaseError::fail(std::format!("old {a:?}, demux {b:?}")));
            }
        }
        Ok(())
    }

    /// A frame of another link type walks as its Ethernet form (the network layer behind a
    /// blank Ethernet header, as the decoder once copied it) does, offsets moved.
    fn agrees_off_ethernet(
        link: LinkType,
        header: &[u8],
        proto: u16,
        net: &[u8],
    ) -> core::result::Result<(), TestCaseError> {
        let mut eth = vec![0u8; 12];
        eth.extend_from_slice(&proto.to_be_bytes());
        eth.extend_from_slice(net);
        let mut cap = header.to_vec();
        cap.extend_from_slice(net);
        let shift = |o: usize| o + header.len() - 14;
        let checks = Checks::Lax;
        match (Sliced::from_ethernet(&eth, checks), Sliced::from_link(link, &cap, checks)) {
            (Err(a), Err(b)) => {
                prop_assert_eq!(a.layer(), b.layer());
                prop_assert_eq!(shift(a.offset()), b.offset());
            }
            (Ok(a), Ok(b)) => {
                prop_assert_eq!(a.vlan(), b.vlan());
                prop_assert_eq!(a.ip.map(|i| i.packet()), b.ip.map(|i| i.packet()));
                prop_assert_eq!(a.udp(), b.udp());
                match (&a.payload, &b.payload) {
                    (Payload::RoceV2 { packet: p, refused: r }, Payload::RoceV2 { packet: q, refused: s }) => {
                        prop_assert!(!q.has_ethernet());
                        let (f, g) = (p.to_frame().unwrap(), q.to_frame().unwrap());
                        prop_assert_eq!(&f.repr, &g.repr);
                        prop_assert_eq!(f.trailer, g.trailer);
                        prop_assert_eq!(shift(f.offsets.payload), g.offsets.payload);
                        prop_assert_eq!(r.map(|e| shift(e.offset())), s.map(|e| e.offset()));
                    }
                    (Payload::NotRoce { why: w, packet: p }, Payload::NotRoce { why: v, packet: q }) => {
                        prop_assert_eq!(w, v);
                        match (p, q) {
                            (Ok(p), Ok(q)) => prop_assert_eq!(p, q),
                            (Err(a), Err(b)) => {
                                prop_assert_eq!(a.layer(), b.layer());
                                prop_assert_eq!(shift(a.offset()), b.offset());
                            }
                            _ => return Err(TestCaseError::fail("messages differ")),
                        }
                    }
                    _ => return Err(TestCaseError::fail("payloads differ")),
                }
            }
            (a, b) => return Err(TestCaseError::fail(std::format!("{a:?} / {b:?}"))),
        }
        Ok(())
    }

    #[test]
    fn every_seed_walks_as_the_old_path_did() {
        for s in seeds() {
            for checks in [Checks::Strict, Checks::Lax] {
                agrees(&s, checks).unwrap();
            }
        }
        let s = Sliced::from_ethernet(&golden::SA_DELETE_MCMEMBER, Checks::Strict).unwrap();
        assert!(matches!(s.payload, Payload::RoceV2 { refused: None, .. }));
        assert_eq!(s.ip.unwrap().header().len(), 20);
        assert_eq!(s.udp().unwrap().destination_port, 4791);
        let mld = &seeds()[7];
        let s = Sliced::from_ethernet(mld, Checks::Strict).unwrap();
        assert_eq!(s.ip.unwrap().extensions(), &l2::MLD_HOP_BY_HOP[..]);
        assert!(matches!(
            s.payload,
            Payload::NotRoce { why: NotRoce::IpProtocol(0), packet: Ok(L2Packet::Mld { .. }) }
        ));
    }

    #[test]
    fn lax_keeps_what_strict_refuses() {
        let mut f = golden::SA_DELETE_MCMEMBER;
        f[321] ^= 1;
        let strict = Sliced::from_ethernet(&f, Checks::Strict).unwrap_err();
        assert_eq!(strict.layer(), Layer::Icrc);
        let lax = Sliced::from_ethernet(&f, Checks::Lax).unwrap();
        assert!(matches!(lax.payload, Payload::RoceV2 { refused: Some(e), .. } if e == strict));
    }

    /// A walk that takes the ICRC as verified gives what the strict walk gives on every seed
    /// (whose ICRCs are right), and still refuses what the strict walk refuses but the ICRC:
    /// a bad IPv4 checksum, a non-zero TVer. (A wrong ICRC it takes as read: the caller vouched.)
    #[test]
    fn an_icrc_verified_walk_skips_only_the_icrc() {
        for s in seeds() {
            let strict = Sliced::from_ethernet(&s, Checks::Strict);
            assert_eq!(Sliced::from_ethernet_icrc_verified(&s), strict);
        }
        let mut f = golden::SA_DELETE_MCMEMBER;
        f[24] ^= 1; // the IPv4 header checksum (masked by the ICRC)
        let e = Sliced::from_ethernet_icrc_verified(&f).unwrap_err();
        assert_eq!(e, Sliced::from_ethernet(&f, Checks::Strict).unwrap_err());
        assert_eq!(e.layer(), Layer::Ipv4);
        let mut f = golden::SA_DELETE_MCMEMBER;
        f[43] |= 1; // TVer
        assert_eq!(Sliced::from_ethernet_icrc_verified(&f).unwrap_err().layer(), Layer::Bth);
        let mut f = golden::SA_DELETE_MCMEMBER;
        f[321] ^= 1; // the ICRC itself: taken as read
        let Payload::RoceV2 { packet, .. } = Sliced::from_ethernet_icrc_verified(&f).unwrap().payload else {
            panic!("not RoCEv2")
        };
        assert!(packet.icrc_ok());
    }

    #[test]
    fn link_headers() {
        assert_eq!(
            Sliced::from_link(LinkType::LinuxSll, &[0; 15], Checks::Lax).unwrap_err(),
            Error::len(Layer::Link, 0, 16, 15)
        );
        assert_eq!(
            Sliced::from_link(LinkType::Unknown(147), &[0; 40], Checks::Lax).unwrap_err(),
            Error::content(Layer::Link, 0, ContentError::UnsupportedLinkType(147))
        );
        for t in [1u32, 101, 113, 228, 229, 276, 147] {
            assert_eq!(u32::from(LinkType::from(t)), t);
        }
        // Raw IP: the version nibble (or the link type, for IPv4) says which.
        let net = &golden::SA_DELETE_MCMEMBER[14..];
        for link in [LinkType::Raw, LinkType::Ipv4, LinkType::Ipv6] {
            let s = Sliced::from_link(link, net, Checks::Strict).unwrap();
            assert!(s.link.is_empty());
            let Payload::RoceV2 { packet, .. } = s.payload else { panic!() };
            assert_eq!(packet.offsets.payload, 48);
            assert_eq!(packet.to_frame().unwrap().repr.payload.len(), 256);
        }
        assert!(matches!(
            Sliced::from_link(LinkType::Raw, &[0x50; 30], Checks::Lax).unwrap().payload,
            Payload::NotRoce { why: NotRoce::EtherType(0), .. }
        ));
    }

    prop_compose! {
        fn mutated()(seed in 0usize..14, edits in proptest::collection::vec((any::<u16>(), any::<u8>()), 0..4),
                     cut in proptest::option::of(any::<u16>())) -> Vec<u8> {
            let seeds = seeds();
            let mut b = seeds[seed % seeds.len()].clone();
            for (i, v) in edits {
                let n = b.len();
                b[usize::from(i) % n] = v;
            }
            if let Some(c) = cut {
                b.truncate(usize::from(c) % (b.len() + 1));
            }
            b
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]
        #[test]
        fn demux_agrees_with_parse_then_parse_frame(b in mutated()) {
            agrees(&b, Checks::Strict)?;
            agrees(&b, Checks::Lax)?;
        }

        #[test]
        fn demux_agrees_on_arbitrary_bytes(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            agrees(&b, Checks::Strict)?;
            agrees(&b, Checks::Lax)?;
        }

        #[test]
        fn cooked_and_raw_captures_walk_as_ethernet(b in mutated(), ptype in any::<u16>(), ifindex in any::<u32>()) {
            if b.len() >= 14 {
                let proto = [b[12], b[13]];
                let net = &b[14..];
                let mut sll = vec![0u8; 14];
                sll[0..2].copy_from_slice(&ptype.to_be_bytes());
                sll.extend_from_slice(&proto);
                agrees_off_ethernet(LinkType::LinuxSll, &sll, u16::from_be_bytes(proto), net)?;
                let mut sll2 = proto.to_vec();
                sll2.extend_from_slice(&[0, 0]);
                sll2.extend_from_slice(&ifindex.to_be_bytes());
                sll2.extend_from_slice(&[0; 12]);
                agrees_off_ethernet(LinkType::LinuxSll2, &sll2, u16::from_be_bytes(proto), net)?;
                if matches!(net.first().map(|v| v >> 4), Some(4 | 6)) {
                    let proto = if net[0] >> 4 == 4 { 0x0800 } else { 0x86dd };
                    // (A raw packet's errors before the IP header cannot happen: the shift is
                    // only checked where the IP layer starts at 0.)
                    let mut eth = vec![0u8; 12];
                    eth.extend_from_slice(&u16::to_be_bytes(proto));
                    eth.extend_from_slice(net);
                    let a = Sliced::from_ethernet(&eth, Checks::Lax).map(|s| s.payload.clone());
                    let c = Sliced::from_link(LinkType::Raw, net, Checks::Lax).map(|s| s.payload.clone());
                    prop_assert_eq!(a.is_ok(), c.is_ok());
                    if let (Err(a), Err(c)) = (a, c) {
                        prop_assert_eq!(a.offset() - 14, c.offset());
                    }
                }
            }
        }
    }
}
