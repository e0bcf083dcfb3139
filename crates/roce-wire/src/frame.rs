//! A whole RoCEv2 frame: Ethernet ▶ 802.1Q? ▶ IPv4 | IPv6 ▶ UDP 4791 ▶ BTH ▶ extension headers
//! ▶ payload ▶ pad ▶ ICRC.
//!
//! Ethernet, VLAN, IP and UDP headers are etherparse's owned headers; this module checks them
//! the way a RoCEv2 receiver must (lengths against the frame, no fragments, UDP to 4791) and
//! reports every failure with the layer and the frame offset.
//!
//! - [`parse`] is strict, as rxe is: a bad ICRC, a bad IPv4 header checksum, a non-zero TVer or
//!   a pad larger than the payload is an error.
//! - [`parse_lax`] decodes as far as the bytes allow and records the ICRC and checksum outcome
//!   in the [`Frame`] instead of failing: for decoders and captures.
//! - [`FrameRepr::emit`] builds a complete frame: lengths, EtherTypes, the IPv4 checksum and the
//!   ICRC are computed; every other field is written as the Repr holds it.

use core::net::IpAddr;

use etherparse::{
    EtherType, Ethernet2Header, IpDscp, IpEcn, IpFragOffset, IpNumber, Ipv4Header, Ipv4Options, Ipv6Header,
    SingleVlanHeader, UdpHeader,
};

use crate::bth::{self, BTH_LEN};
use crate::error::{ContentError, Error, Layer, Result};
use crate::ext::ExtHeaders;
use crate::icrc::{self, IpVersion, ICRC_LEN};
use crate::ROCEV2_UDP_PORT;

pub(crate) const ETH_LEN: usize = 14;
pub(crate) const VLAN_LEN: usize = 4;
const IPV4_MIN: usize = 20;
const IPV6_LEN: usize = 40;
const UDP_LEN: usize = 8;

/// The IP header of a RoCEv2 frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IpHeader {
    /// IPv4 (RoCEv2 over IPv4: the GIDs are IPv4-mapped).
    V4(Ipv4Header),
    /// IPv6.
    V6(Ipv6Header),
}

impl IpHeader {
    /// Header length in bytes.
    pub fn header_len(&self) -> usize {
        match self {
            IpHeader::V4(h) => h.header_len(),
            IpHeader::V6(_) => IPV6_LEN,
        }
    }
    /// Source address.
    pub fn source(&self) -> IpAddr {
        match self {
            IpHeader::V4(h) => IpAddr::from(h.source),
            IpHeader::V6(h) => IpAddr::from(h.source),
        }
    }
    /// Destination address.
    pub fn destination(&self) -> IpAddr {
        match self {
            IpHeader::V4(h) => IpAddr::from(h.destination),
            IpHeader::V6(h) => IpAddr::from(h.destination),
        }
    }
    /// The version for the ICRC's masking.
    pub fn version(&self) -> IpVersion {
        match self {
            IpHeader::V4(_) => IpVersion::V4,
            IpHeader::V6(_) => IpVersion::V6,
        }
    }
    /// TTL or hop limit.
    pub fn hop_limit(&self) -> u8 {
        match self {
            IpHeader::V4(h) => h.time_to_live,
            IpHeader::V6(h) => h.hop_limit,
        }
    }
    /// IPv4 TOS byte or IPv6 traffic class.
    pub fn traffic_class(&self) -> u8 {
        match self {
            IpHeader::V4(h) => (h.dscp.value() << 2) | h.ecn.value(),
            IpHeader::V6(h) => h.traffic_class,
        }
    }
}

/// Everything needed to emit a frame: the owned headers and borrowed payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameRepr<'a> {
    /// Ethernet II header (its EtherType is computed on emit).
    pub ethernet: Ethernet2Header,
    /// Optional 802.1Q tag (its inner EtherType is computed on emit).
    pub vlan: Option<SingleVlanHeader>,
    /// IP header (lengths, protocol and the IPv4 checksum are computed on emit).
    pub ip: IpHeader,
    /// UDP header (length is computed on emit; the checksum is written as held, 0 as rxe sends).
    pub udp: UdpHeader,
    /// Base transport header (PadCnt is written as held: use [`FrameRepr::with_auto_pad`]).
    pub bth: bth::Repr,
    /// The extension headers the opcode carries.
    pub ext: ExtHeaders,
    /// Transport payload (a MAD, a datagram …).
    pub payload: &'a [u8],
    /// Pad byte values (the first `bth.pad_count` are used; rxe sends zeros).
    pub pad: [u8; 3],
}

/// Where each layer starts in a parsed frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Offsets {
    /// The IP header.
    pub ip: usize,
    /// The UDP header.
    pub udp: usize,
    /// The BTH.
    pub bth: usize,
    /// The first extension header (or the payload if none).
    pub ext: usize,
    /// The payload.
    pub payload: usize,
    /// The ICRC.
    pub icrc: usize,
    /// One past the ICRC (the end of the UDP datagram).
    pub end: usize,
}

/// A parsed frame: the Repr plus what the wire said about its integrity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The decoded headers and payload.
    pub repr: FrameRepr<'a>,
    /// The ICRC on the wire (as a CRC value).
    pub icrc: u32,
    /// The ICRC computed over the frame.
    pub icrc_expected: u32,
    /// Whether the IPv4 header checksum was right (always true for IPv6).
    pub ip_checksum_ok: bool,
    /// Bytes after the IP packet (Ethernet minimum-size padding).
    pub trailer: &'a [u8],
    /// Where each layer starts.
    pub offsets: Offsets,
}

impl Frame<'_> {
    /// Whether the ICRC on the wire is right.
    pub fn icrc_ok(&self) -> bool {
        self.icrc == self.icrc_expected
    }
}

/// Parse a frame strictly, as rxe accepts it (see the module docs).
pub fn parse(buf: &[u8]) -> Result<Frame<'_>> {
    parse_inner(buf, true)
}

/// Parse a frame as far as possible, recording (not failing on) the ICRC, the IPv4 checksum,
/// TVer and an oversize pad (the pad is then treated as 0).
pub fn parse_lax(buf: &[u8]) -> Result<Frame<'_>> {
    parse_inner(buf, false)
}

fn content(layer: Layer, offset: usize, kind: ContentError) -> Error {
    Error::content(layer, offset, kind)
}

fn need(layer: Layer, offset: usize, required: usize, have: usize) -> Result<()> {
    if have < required {
        Err(Error::len(layer, offset, required, have))
    } else {
        Ok(())
    }
}

/// A checked zero-copy view of a whole RoCEv2 frame: every check of [`parse`] (or of
/// [`parse_lax`]) made once, the layers' offsets recorded, nothing copied. The fast path for
/// receivers that only need a few fields (the BTH, the DETH, the payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FramePacket<'a> {
    buf: &'a [u8],
    /// Where each layer starts.
    pub offsets: Offsets,
    ipv6: bool,
    vlan: bool,
    /// Whether the buffer starts with an Ethernet header (else the link layer is another:
    /// see the demux module; the tag, if any, sits right before the IP header).
    ethernet: bool,
    pad_count: u8,
    /// The BTH opcode (read once by the check; receivers dispatch on it).
    opcode: bth::Opcode,
    /// The ICRC on the wire.
    pub icrc: u32,
    /// The ICRC computed over the frame.
    pub icrc_expected: u32,
    /// Whether the IPv4 header checksum was right (always true for IPv6).
    pub ip_checksum_ok: bool,
    ip_end: usize,
}

impl<'a> FramePacket<'a> {
    /// Check a frame as [`parse`] does (strict, as rxe accepts frames).
    #[inline] // (built in the receiver's frame: the view is not copied out of a result)
    pub fn new_checked(buf: &'a [u8]) -> Result<FramePacket<'a>> {
        scan(buf, true)
    }

    /// Check a frame as [`parse_lax`] does.
    pub fn new_lax(buf: &'a [u8]) -> Result<FramePacket<'a>> {
        scan(buf, false)
    }

    /// The whole buffer.
    #[inline]
    pub fn as_bytes(&self) -> &'a [u8] {
        self.buf
    }

    /// Whether the frame is IPv6.
    pub fn is_ipv6(&self) -> bool {
        self.ipv6
    }

    /// Whether the buffer starts with an Ethernet header ([`FramePacket::new_checked`] and
    /// [`FramePacket::new_lax`] views always do; a demux view of a Linux cooked or
    /// raw IP capture does not).
    pub fn has_ethernet(&self) -> bool {
        self.ethernet
    }

    /// Whether an 802.1Q tag is present.
    pub fn has_vlan(&self) -> bool {
        self.vlan
    }

    /// The IP source address.
    #[inline]
    pub fn src_ip(&self) -> IpAddr {
        ip_at(self.buf, self.offsets.ip, self.ipv6, true)
    }

    /// The IP destination address.
    #[inline]
    pub fn dst_ip(&self) -> IpAddr {
        ip_at(self.buf, self.offsets.ip, self.ipv6, false)
    }

    /// The IPv4 TOS byte or the IPv6 traffic class (DSCP and ECN).
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        let ip = self.offsets.ip;
        if self.ipv6 {
            (self.buf[ip] << 4) | (self.buf[ip + 1] >> 4)
        } else {
            self.buf[ip + 1]
        }
    }

    /// The BTH.
    #[inline]
    pub fn bth(&self) -> bth::Packet<&'a [u8]> {
        bth::Packet::new_unchecked(&self.buf[self.offsets.bth..self.offsets.ext])
    }

    /// The BTH opcode.
    #[inline]
    pub fn opcode(&self) -> bth::Opcode {
        self.opcode
    }

    /// The DETH, if the opcode carries one (it comes first among the extension headers).
    #[inline]
    pub fn deth(&self) -> Option<crate::deth::Packet<&'a [u8]>> {
        self.opcode.ext_headers().contains(crate::ext::ExtMask::DETH).then(|| {
            crate::deth::Packet::new_unchecked(&self.buf[self.offsets.ext..self.offsets.ext + crate::deth::LEN])
        })
    }

    /// The XRCETH, if the opcode carries one (every XRC request; it comes first among the
    /// extension headers, as the DETH does: no opcode carries both).
    #[inline]
    pub fn xrceth(&self) -> Option<crate::xrceth::Packet<&'a [u8]>> {
        self.opcode.ext_headers().contains(crate::ext::ExtMask::XRCETH).then(|| {
            crate::xrceth::Packet::new_unchecked(&self.buf[self.offsets.ext..self.offsets.ext + crate::xrceth::LEN])
        })
    }

    /// The payload (pad excluded).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buf[self.offsets.payload..self.offsets.icrc - usize::from(self.pad_count)]
    }

    /// Whether the ICRC on the wire is right.
    pub fn icrc_ok(&self) -> bool {
        self.icrc == self.icrc_expected
    }

    /// The BTH (with the pad count as checked) and the extension headers, owned: what a
    /// receiver that dispatches on the transport needs, without building the link, IP and
    /// UDP headers [`FramePacket::to_frame`] builds too.
    #[inline]
    pub fn transport_headers(&self) -> Result<(bth::Repr, ExtHeaders)> {
        let o = self.offsets;
        owned_transport_headers(&self.buf[o.bth..o.payload], self.pad_count, o.bth)
    }

    /// Build the owned form.
    pub fn to_frame(&self) -> Result<Frame<'a>> {
        build(self)
    }
}

#[inline(always)] // (with `src` known at the call, half of it folds away)
fn ip_at(b: &[u8], ip: usize, v6: bool, src: bool) -> IpAddr {
    if v6 {
        let at = ip + if src { 8 } else { 24 };
        let mut a = [0u8; 16];
        a.copy_from_slice(&b[at..at + 16]);
        IpAddr::from(a)
    } else {
        let at = ip + if src { 12 } else { 16 };
        let mut a = [0u8; 4];
        a.copy_from_slice(&b[at..at + 4]);
        IpAddr::from(a)
    }
}

// The walk, in steps: `scan` runs them for an Ethernet frame that must be RoCEv2; the demux
// module runs the same steps from any link header and branches where `scan` fails with
// UnsupportedEtherType, NotUdp or NotRoceV2Port (so each check is written once).

/// The checks a frame fails in strict mode only (the IPv4 reserved flag and checksum, TVer,
/// an oversize pad, the ICRC): strict mode returns the first as the error; lax mode goes on
/// and keeps the first in `refused` (the error the strict mode would have returned).
#[inline(always)]
fn refuse(strict: bool, refused: &mut Option<Error>, e: Error) -> Result<()> {
    if strict {
        return Err(e);
    }
    if refused.is_none() {
        *refused = Some(e);
    }
    Ok(())
}

/// The EtherType of what follows an Ethernet header, where it sits, and where what follows
/// starts; after [`vlan_tag`] also whether an 802.1Q tag came between.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LinkEnd {
    /// The EtherType (of the payload, after a tag).
    pub ether_type: u16,
    /// Where that EtherType sits (an error about it points there).
    pub ether_type_at: usize,
    /// Where the payload (the tag, or after [`vlan_tag`] the network layer) starts.
    pub payload_at: usize,
    /// Whether an 802.1Q tag was stepped over.
    pub vlan: bool,
}

/// The Ethernet II header.
#[inline(always)]
pub(crate) fn ethernet(buf: &[u8]) -> Result<LinkEnd> {
    need(Layer::Ethernet, 0, ETH_LEN, buf.len())?;
    Ok(LinkEnd {
        ether_type: u16::from_be_bytes([buf[12], buf[13]]),
        ether_type_at: 12,
        payload_at: ETH_LEN,
        vlan: false,
    })
}

/// Step over one 802.1Q tag if the EtherType says one follows.
#[inline(always)]
pub(crate) fn vlan_tag(buf: &[u8], link: LinkEnd) -> Result<LinkEnd> {
    if link.ether_type != EtherType::VLAN_TAGGED_FRAME.0 {
        return Ok(link);
    }
    let off = link.payload_at;
    need(Layer::Vlan, off, VLAN_LEN, buf.len().saturating_sub(off))?;
    Ok(LinkEnd {
        ether_type: u16::from_be_bytes([buf[off + 2], buf[off + 3]]),
        ether_type_at: off + 2,
        payload_at: off + VLAN_LEN,
        vlan: true,
    })
}

/// An IP header checked as far as every IP packet is (before its protocol is looked at).
#[derive(Debug, Clone, Copy)]
pub(crate) struct IpCheck {
    /// Where the IP header starts.
    pub at: usize,
    /// IPv6 (else IPv4).
    pub ipv6: bool,
    /// The header's length.
    pub header_len: usize,
    /// The packet's length (its length field).
    pub len: usize,
    /// The protocol (IPv4) or next header (IPv6).
    pub protocol: u8,
}

/// Check the IP header at `link.payload_at` (IPv4 or IPv6 after the EtherType); any other
/// EtherType is [`ContentError::UnsupportedEtherType`].
#[inline(always)]
pub(crate) fn ip_header(buf: &[u8], link: LinkEnd, strict: bool, refused: &mut Option<Error>) -> Result<IpCheck> {
    let at = link.payload_at;
    let rest = &buf[at..];
    match EtherType(link.ether_type) {
        EtherType::IPV4 => check_ipv4(rest, at, strict, refused),
        EtherType::IPV6 => check_ipv6(rest, at),
        other => Err(content(Layer::Ethernet, link.ether_type_at, ContentError::UnsupportedEtherType(other.0))),
    }
}

/// What [`udp_header`] found.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UdpCheck {
    /// The destination port.
    pub dport: u16,
    /// Whether the IPv4 header checksum was right (always true for IPv6).
    pub ip_checksum_ok: bool,
}

/// The UDP header of a checked IP packet carrying UDP (its IPv4 options and checksum checked
/// first).
#[inline(always)]
pub(crate) fn udp_header(buf: &[u8], ip: &IpCheck, strict: bool, refused: &mut Option<Error>) -> Result<UdpCheck> {
    let ip_checksum_ok = ip.ipv6 || check_ipv4_for_udp(&buf[ip.at..ip.at + ip.header_len], ip.at, strict, refused)?;
    let packet = &buf[ip.at..ip.at + ip.len];
    let udp_off = ip.header_len;
    need(Layer::Udp, ip.at + udp_off, UDP_LEN, packet.len() - udp_off)?;
    Ok(UdpCheck { dport: u16::from_be_bytes([packet[udp_off + 2], packet[udp_off + 3]]), ip_checksum_ok })
}

/// The RoCEv2 part of a UDP datagram to port 4791 (its header checked by [`udp_header`]):
/// the UDP length, BTH, extension headers, pad and ICRC — the ICRC not computed again when
/// `icrc_verified` (the caller computed it over these very bytes: it is taken as read).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn roce_after_udp<'a>(
    buf: &'a [u8],
    link: LinkEnd,
    ethernet: bool,
    ip: &IpCheck,
    udp: UdpCheck,
    strict: bool,
    icrc_verified: bool,
    refused: &mut Option<Error>,
) -> Result<FramePacket<'a>> {
    let ip_off = ip.at;
    let packet = &buf[ip_off..ip_off + ip.len];
    let udp_off = ip.header_len;
    let u = &packet[udp_off..];
    let udp_len = usize::from(u16::from_be_bytes([u[4], u[5]]));
    let available = packet.len() - udp_off;
    if udp_len < UDP_LEN || udp_len > available {
        return Err(content(Layer::Udp, ip_off + udp_off + 4, ContentError::UdpLength { claimed: udp_len, available }));
    }
    // The RoCE part: BTH .. ICRC, exactly the UDP payload.
    let bth_off = udp_off + UDP_LEN;
    let roce = &packet[bth_off..udp_off + udp_len];
    let abs = |o: usize| ip_off + o;
    let RoceLayout { opcode, pad, ext_len, icrc_at } = roce_layout(roce, abs(bth_off), strict, refused)?;
    let ext_off = bth_off + BTH_LEN;
    let payload_off = ext_off + ext_len;
    let icrc_off = bth_off + icrc_at;
    let version = if ip.ipv6 { IpVersion::V6 } else { IpVersion::V4 };
    let with_icrc = &packet[..icrc_off + ICRC_LEN];
    let (found, expected) = if icrc_verified {
        let t = &with_icrc[icrc_off..];
        let found = icrc::from_wire([t[0], t[1], t[2], t[3]]);
        (found, found)
    } else {
        icrc::check(with_icrc, version, ip.header_len).map_err(|e| e.add_offset(ip_off))?
    };
    if found != expected {
        refuse(strict, refused, content(Layer::Icrc, abs(icrc_off), ContentError::IcrcMismatch { found, expected }))?;
    }
    Ok(FramePacket {
        buf,
        offsets: Offsets {
            ip: ip_off,
            udp: abs(udp_off),
            bth: abs(bth_off),
            ext: abs(ext_off),
            payload: abs(payload_off),
            icrc: abs(icrc_off),
            end: abs(icrc_off + ICRC_LEN),
        },
        ipv6: ip.ipv6,
        vlan: link.vlan,
        ethernet,
        pad_count: pad,
        opcode,
        icrc: found,
        icrc_expected: expected,
        ip_checksum_ok: udp.ip_checksum_ok,
        ip_end: ip_off + ip.len,
    })
}

/// Where the parts of a RoCEv2 UDP payload (BTH ▶ extension headers ▶ payload ▶ pad ▶ ICRC)
/// are, as [`roce_layout`] checked them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RoceLayout {
    pub(crate) opcode: bth::Opcode,
    /// The pad count (0 where lax mode let an oversize one pass).
    pub(crate) pad: u8,
    /// The extension headers' length (they follow the BTH).
    pub(crate) ext_len: usize,
    /// Where the ICRC starts, from the BTH.
    pub(crate) icrc_at: usize,
}

/// Check the RoCEv2 part of a UDP datagram, `roce` (its UDP payload, BTH to ICRC), the BTH at
/// offset `at` of what the errors count from: TVer, the extension headers' and the ICRC's
/// lengths, the pad against the payload. The checks of a frame and of a datagram a UDP socket
/// read ([`crate::datagram::RoceDatagram`]), written once.
#[inline(always)]
pub(crate) fn roce_layout(roce: &[u8], at: usize, strict: bool, refused: &mut Option<Error>) -> Result<RoceLayout> {
    need(Layer::Bth, at, BTH_LEN, roce.len())?;
    let opcode = bth::Opcode::from(roce[0]);
    let tver = roce[1] & 0x0f;
    let mut pad = (roce[1] >> 4) & 3;
    if tver != 0 {
        refuse(strict, refused, content(Layer::Bth, at + 1, ContentError::UnsupportedTver(tver)))?;
    }
    let mask = opcode.ext_headers();
    let ext_len = mask.len();
    if roce.len() < BTH_LEN + ext_len {
        // Let the header parsers name the header that is cut short.
        ExtHeaders::parse(mask, &roce[BTH_LEN..]).map_err(|e| e.add_offset(at + BTH_LEN))?;
    }
    let after_ext = roce.len() - BTH_LEN - ext_len;
    let payload_at = BTH_LEN + ext_len;
    if after_ext < ICRC_LEN {
        return Err(Error::len(Layer::Icrc, at + payload_at, ICRC_LEN, after_ext));
    }
    let payload_and_pad = after_ext - ICRC_LEN;
    if usize::from(pad) > payload_and_pad {
        refuse(strict, refused, content(Layer::Bth, at + 1, ContentError::BadPad { pad, payload_and_pad }))?;
        pad = 0;
    }
    Ok(RoceLayout { opcode, pad, ext_len, icrc_at: payload_at + payload_and_pad })
}

/// The BTH (its pad count `pad`, as checked) and the extension headers of `bth_and_ext`
/// (from the BTH to the payload), owned; `at` is where the BTH is, for errors.
#[inline(always)]
pub(crate) fn owned_transport_headers(bth_and_ext: &[u8], pad: u8, at: usize) -> Result<(bth::Repr, ExtHeaders)> {
    let mut bth = bth::Repr::parse(&bth::Packet::new_unchecked(&bth_and_ext[..BTH_LEN]))?;
    bth.pad_count = pad;
    let (ext, _) =
        ExtHeaders::parse(bth.opcode.ext_headers(), &bth_and_ext[BTH_LEN..]).map_err(|e| e.add_offset(at + BTH_LEN))?;
    Ok((bth, ext))
}

#[inline]
fn scan(buf: &[u8], strict: bool) -> Result<FramePacket<'_>> {
    let mut refused = None;
    let link = vlan_tag(buf, ethernet(buf)?)?;
    let ip = ip_header(buf, link, strict, &mut refused)?;
    if ip.protocol != 17 {
        let at = if ip.ipv6 { ip.at + 6 } else { ip.at + 9 };
        let layer = if ip.ipv6 { Layer::Ipv6 } else { Layer::Ipv4 };
        return Err(content(layer, at, ContentError::NotUdp { protocol: ip.protocol }));
    }
    let udp = udp_header(buf, &ip, strict, &mut refused)?;
    if udp.dport != ROCEV2_UDP_PORT {
        return Err(content(Layer::Udp, ip.at + ip.header_len + 2, ContentError::NotRoceV2Port { port: udp.dport }));
    }
    roce_after_udp(buf, link, true, &ip, udp, strict, false, &mut refused)
}

fn parse_inner(buf: &[u8], strict: bool) -> Result<Frame<'_>> {
    build(&scan(buf, strict)?)
}

/// The owned headers of a checked frame (every check already made).
fn build<'a>(p: &FramePacket<'a>) -> Result<Frame<'a>> {
    let buf = p.buf;
    let o = p.offsets;
    let ethernet = if p.ethernet {
        let mut eth = [0u8; ETH_LEN];
        eth.copy_from_slice(&buf[..ETH_LEN]);
        Ethernet2Header::from_bytes(eth)
    } else {
        // No Ethernet header on the wire (a Linux cooked or raw IP capture): a blank one,
        // with the EtherType `emit` would write.
        let ether_type = match (p.vlan, p.ipv6) {
            (true, _) => EtherType::VLAN_TAGGED_FRAME,
            (false, true) => EtherType::IPV6,
            (false, false) => EtherType::IPV4,
        };
        Ethernet2Header { source: [0; 6], destination: [0; 6], ether_type }
    };
    let t = o.ip.wrapping_sub(VLAN_LEN);
    let vlan = p.vlan.then(|| SingleVlanHeader::from_bytes([buf[t], buf[t + 1], buf[t + 2], buf[t + 3]]));
    let ip = if p.ipv6 {
        let (h, _) = Ipv6Header::from_slice(&buf[o.ip..o.udp])
            .map_err(|_| content(Layer::Ipv6, o.ip, ContentError::Malformed))?;
        IpHeader::V6(h)
    } else {
        IpHeader::V4(ipv4_header(&buf[o.ip..o.udp], o.ip)?)
    };
    let u = &buf[o.udp..o.bth];
    let udp = UdpHeader {
        source_port: u16::from_be_bytes([u[0], u[1]]),
        destination_port: u16::from_be_bytes([u[2], u[3]]),
        length: u16::from_be_bytes([u[4], u[5]]),
        checksum: u16::from_be_bytes([u[6], u[7]]),
    };
    let (bth, ext) = p.transport_headers()?;
    let pad_count = usize::from(p.pad_count);
    let mut pad = [0u8; 3];
    pad[..pad_count].copy_from_slice(&buf[o.icrc - pad_count..o.icrc]);
    Ok(Frame {
        repr: FrameRepr { ethernet, vlan, ip, udp, bth, ext, payload: p.payload(), pad },
        icrc: p.icrc,
        icrc_expected: p.icrc_expected,
        ip_checksum_ok: p.ip_checksum_ok,
        trailer: &buf[p.ip_end..],
        offsets: o,
    })
}

/// Check an IPv4 header as far as every IPv4 packet is checked here (lengths, no fragment,
/// the reserved flag): the options and the checksum are checked by [`check_ipv4_for_udp`].
#[inline(always)]
fn check_ipv4(b: &[u8], off: usize, strict: bool, refused: &mut Option<Error>) -> Result<IpCheck> {
    need(Layer::Ipv4, off, IPV4_MIN, b.len())?;
    let version = b[0] >> 4;
    if version != 4 {
        return Err(content(Layer::Ipv4, off, ContentError::IpVersionMismatch { version }));
    }
    let ihl = b[0] & 0x0f;
    if ihl < 5 {
        return Err(content(Layer::Ipv4, off, ContentError::Ipv4HeaderLenTooSmall { ihl }));
    }
    let hlen = usize::from(ihl) * 4;
    need(Layer::Ipv4, off, hlen, b.len())?;
    let total = usize::from(u16::from_be_bytes([b[2], b[3]]));
    if total < hlen || total > b.len() {
        return Err(content(Layer::Ipv4, off + 2, ContentError::IpLength { claimed: total, available: b.len() }));
    }
    if b[6] & 0x20 != 0 || (u16::from_be_bytes([b[6], b[7]]) & 0x1fff) != 0 {
        return Err(content(Layer::Ipv4, off + 6, ContentError::Ipv4Fragmented));
    }
    if b[6] & 0x80 != 0 {
        // The reserved flag bit (RFC 791: must be zero). etherparse's header has no field for
        // it, so such a frame could not re-emit byte for byte: the strict parser refuses it,
        // the lax one drops the bit.
        refuse(strict, refused, content(Layer::Ipv4, off + 6, ContentError::Malformed))?;
    }
    Ok(IpCheck { at: off, ipv6: false, header_len: hlen, len: total, protocol: b[9] })
}

/// The rest of an IPv4 header that carries UDP (`b` is the header): its options and its
/// checksum; returns whether the checksum is right.
#[inline(always)]
fn check_ipv4_for_udp(b: &[u8], off: usize, strict: bool, refused: &mut Option<Error>) -> Result<bool> {
    let hlen = b.len();
    if hlen > IPV4_MIN && Ipv4Options::try_from(&b[IPV4_MIN..hlen]).is_err() {
        return Err(content(Layer::Ipv4, off + IPV4_MIN, ContentError::Malformed));
    }
    let found = u16::from_be_bytes([b[10], b[11]]);
    let expected = ipv4_checksum(b);
    if found != expected {
        refuse(strict, refused, content(Layer::Ipv4, off + 10, ContentError::Ipv4Checksum { found, expected }))?;
    }
    Ok(found == expected)
}

/// The owned IPv4 header of checked bytes, built field by field (etherparse's parser would
/// check them all again: this is the hot path of every received frame).
fn ipv4_header(b: &[u8], off: usize) -> Result<Ipv4Header> {
    Ok(Ipv4Header {
        dscp: IpDscp::try_new(b[1] >> 2).unwrap_or(IpDscp::ZERO),
        ecn: IpEcn::try_new(b[1] & 3).unwrap_or(IpEcn::ZERO),
        total_len: u16::from_be_bytes([b[2], b[3]]),
        identification: u16::from_be_bytes([b[4], b[5]]),
        dont_fragment: b[6] & 0x40 != 0,
        more_fragments: false,
        fragment_offset: IpFragOffset::ZERO,
        time_to_live: b[8],
        protocol: IpNumber(b[9]),
        header_checksum: u16::from_be_bytes([b[10], b[11]]),
        source: [b[12], b[13], b[14], b[15]],
        destination: [b[16], b[17], b[18], b[19]],
        options: Ipv4Options::try_from(&b[IPV4_MIN..])
            .map_err(|_| content(Layer::Ipv4, off + IPV4_MIN, ContentError::Malformed))?,
    })
}

#[inline(always)]
fn check_ipv6(b: &[u8], off: usize) -> Result<IpCheck> {
    need(Layer::Ipv6, off, IPV6_LEN, b.len())?;
    let version = b[0] >> 4;
    if version != 6 {
        return Err(content(Layer::Ipv6, off, ContentError::IpVersionMismatch { version }));
    }
    let payload_len = usize::from(u16::from_be_bytes([b[4], b[5]]));
    let total = IPV6_LEN + payload_len;
    if total > b.len() {
        return Err(content(Layer::Ipv6, off + 4, ContentError::IpLength { claimed: total, available: b.len() }));
    }
    Ok(IpCheck { at: off, ipv6: true, header_len: IPV6_LEN, len: total, protocol: b[6] })
}

/// The IPv4 header checksum of `hdr` (its own checksum field counted as zero).
///
/// Summed by 32-bit words and folded (RFC 1071: the ones' complement sum does not depend on
/// the word size), a third of the work of 16-bit steps; it runs for every frame in and out.
pub fn ipv4_checksum(hdr: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    let mut words = hdr.chunks_exact(4);
    for (i, w) in (&mut words).enumerate() {
        let v = u32::from_be_bytes([w[0], w[1], w[2], w[3]]);
        // Word 2 is TTL, protocol and the checksum field (bytes 10–11), taken as zero.
        sum += u64::from(if i == 2 { v & 0xffff_0000 } else { v });
    }
    // A header is a multiple of 4 bytes; any other length is summed as before (16-bit words,
    // an odd last byte ignored; the rest starts at a multiple of 4, never at byte 10).
    if let [a, b, ..] = *words.remainder() {
        sum += u64::from(u16::from_be_bytes([a, b]));
    }
    // Fold the carries back in without a loop: below 2^36 (sixteen words: an IPv4 header is
    // at most fifteen) three folds reach 16 bits (2^36 → < 2^20 + 2^16 → < 2^16 + 2^5 →
    // 16 bits), a fourth for anything longer (below 2^48: any slice below 1 TiB); a fold of a
    // 16-bit value changes nothing, so this is the loop's result.
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    if hdr.len() > 64 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The UDP source port rxe uses for a QP: `0xC000 + (hash_32(qpn, 14) & 0x3FFF)`
/// [rxe_qp.c rxe_qp_init_req; protocol.md §1.5]. QP1 gives 0xD872.
pub const fn rxe_udp_sport(qpn: u32) -> u16 {
    let hash = qpn.wrapping_mul(0x61C8_8647) >> (32 - 14);
    0xC000 + (hash & 0x3FFF) as u16
}

impl<'a> FrameRepr<'a> {
    /// A frame as rxe builds one: IPv4 with DF, TTL 64 and ID 0, or IPv6 with hop limit 64
    /// and flow label 0; UDP source port 0xC000 and checksum 0; PadCnt from the payload length;
    /// zero pad. Addresses of different families are a caller bug: the IPv6 form of an IPv4
    /// address is used then.
    pub fn new(
        src_mac: [u8; 6],
        dst_mac: [u8; 6],
        src: IpAddr,
        dst: IpAddr,
        bth: bth::Repr,
        ext: ExtHeaders,
        payload: &'a [u8],
    ) -> FrameRepr<'a> {
        let ip = match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let mut h = Ipv4Header::new(0, 64, IpNumber::UDP, s.octets(), d.octets())
                    .unwrap_or_else(|_| Ipv4Header::default());
                h.dont_fragment = true;
                IpHeader::V4(h)
            }
            (s, d) => IpHeader::V6(Ipv6Header {
                traffic_class: 0,
                flow_label: Default::default(),
                payload_length: 0,
                next_header: IpNumber::UDP,
                hop_limit: 64,
                source: to_v6(s),
                destination: to_v6(d),
            }),
        };
        FrameRepr {
            ethernet: Ethernet2Header { source: src_mac, destination: dst_mac, ether_type: EtherType::IPV4 },
            vlan: None,
            ip,
            udp: UdpHeader { source_port: 0xC000, destination_port: ROCEV2_UDP_PORT, length: 0, checksum: 0 },
            bth,
            ext,
            payload,
            pad: [0; 3],
        }
        .with_auto_pad()
    }

    /// Set PadCnt to `(-payload_len) & 3` (and zero the pad bytes), as rxe does.
    #[must_use]
    pub fn with_auto_pad(mut self) -> Self {
        self.bth.pad_count = (self.payload.len().wrapping_neg() & 3) as u8;
        self.pad = [0; 3];
        self
    }

    /// Bytes of pad actually emitted (PadCnt).
    pub fn pad_len(&self) -> usize {
        usize::from(self.bth.pad_count & 3)
    }

    /// Length of the UDP datagram (UDP header .. ICRC).
    pub fn udp_len(&self) -> usize {
        UDP_LEN + BTH_LEN + self.ext.buffer_len() + self.payload.len() + self.pad_len() + ICRC_LEN
    }

    /// Length of the whole frame.
    pub fn buffer_len(&self) -> usize {
        ETH_LEN + self.vlan.as_ref().map_or(0, |_| VLAN_LEN) + self.ip.header_len() + self.udp_len()
    }

    /// Set every computed field (EtherTypes, IP lengths and protocol, the IPv4 checksum, the
    /// UDP length) so that the Repr equals what `parse` returns for the emitted frame.
    /// Fails if the frame is too long for the IP or UDP length fields.
    pub fn fill(&mut self) -> Result<()> {
        self.fill_for(self.payload.len())
    }

    /// [`FrameRepr::fill`] for a payload of `payload_len` bytes (whatever `self.payload` holds).
    fn fill_for(&mut self, payload_len: usize) -> Result<()> {
        let udp_len = UDP_LEN + BTH_LEN + self.ext.buffer_len() + payload_len + self.pad_len() + ICRC_LEN;
        let ip_type = match self.ip {
            IpHeader::V4(_) => EtherType::IPV4,
            IpHeader::V6(_) => EtherType::IPV6,
        };
        match &mut self.vlan {
            Some(v) => {
                v.ether_type = ip_type;
                self.ethernet.ether_type = EtherType::VLAN_TAGGED_FRAME;
            }
            None => self.ethernet.ether_type = ip_type,
        }
        let too_long = |layer| Error::content(layer, 0, ContentError::FieldOutOfRange { value: udp_len, max: 65535 });
        match &mut self.ip {
            IpHeader::V4(h) => {
                h.protocol = IpNumber::UDP;
                h.set_payload_len(udp_len).map_err(|_| too_long(Layer::Ipv4))?;
                h.header_checksum = h.calc_header_checksum();
            }
            IpHeader::V6(h) => {
                h.next_header = IpNumber::UDP;
                h.set_payload_length(udp_len).map_err(|_| too_long(Layer::Ipv6))?;
            }
        }
        self.udp.length = u16::try_from(udp_len).map_err(|_| too_long(Layer::Udp))?;
        Ok(())
    }

    /// Emit the complete frame into `buf`; returns its length. Lengths, EtherTypes, the IPv4
    /// checksum and the ICRC are computed (the Repr itself is not changed). Fails with a
    /// length error if `buf` is shorter than [`FrameRepr::buffer_len`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        self.emit_parts(buf, Some(self.payload), self.payload.len())
    }

    /// Length of everything before the payload: Ethernet, VLAN, IP, UDP, BTH and the extension
    /// headers (where [`FrameRepr::emit_around`] expects the payload).
    pub fn header_len(&self) -> usize {
        ETH_LEN
            + self.vlan.as_ref().map_or(0, |_| VLAN_LEN)
            + self.ip.header_len()
            + UDP_LEN
            + BTH_LEN
            + self.ext.buffer_len()
    }

    /// Emit the frame around a payload of `payload_len` bytes that the caller already wrote
    /// at `buf[self.header_len()..]` (a MAD built straight into the transmit buffer): the
    /// headers, the pad and the ICRC are written as [`FrameRepr::emit`] writes them, and
    /// `self.payload` is not used (PadCnt is taken as held: set it for `payload_len`).
    /// Returns the frame's length; fails with a length error if `buf` is too short.
    pub fn emit_around(&self, buf: &mut [u8], payload_len: usize) -> Result<usize> {
        self.emit_parts(buf, None, payload_len)
    }

    // The headers are written field by field from the Repr (what etherparse's `to_bytes` would
    // write after `fill`, without cloning the Repr): this runs for every frame sent.
    fn emit_parts(&self, buf: &mut [u8], payload: Option<&[u8]>, payload_len: usize) -> Result<usize> {
        // The UDP datagram, and the frame around it (`header_len` without asking the
        // extension headers for their length twice).
        let udp_len = UDP_LEN + BTH_LEN + self.ext.buffer_len() + payload_len + self.pad_len() + ICRC_LEN;
        let len = ETH_LEN + self.vlan.as_ref().map_or(0, |_| VLAN_LEN) + self.ip.header_len() + udp_len;
        if buf.len() < len {
            return Err(Error::len(Layer::Ethernet, 0, len, buf.len()));
        }
        let too_long = |layer| Error::content(layer, 0, ContentError::FieldOutOfRange { value: udp_len, max: 65535 });
        let (ip_type, ip_total) = match &self.ip {
            IpHeader::V4(h) => (EtherType::IPV4, h.header_len() + udp_len),
            IpHeader::V6(_) => (EtherType::IPV6, udp_len),
        };
        if ip_total > 65535 {
            return Err(too_long(if ip_type == EtherType::IPV4 { Layer::Ipv4 } else { Layer::Ipv6 }));
        }
        buf[0..6].copy_from_slice(&self.ethernet.destination);
        buf[6..12].copy_from_slice(&self.ethernet.source);
        let mut at = ETH_LEN;
        match &self.vlan {
            Some(v) => {
                buf[12..14].copy_from_slice(&EtherType::VLAN_TAGGED_FRAME.0.to_be_bytes());
                buf[at..at + VLAN_LEN].copy_from_slice(&v.to_bytes());
                buf[at + 2..at + 4].copy_from_slice(&ip_type.0.to_be_bytes());
                at += VLAN_LEN;
            }
            None => buf[12..14].copy_from_slice(&ip_type.0.to_be_bytes()),
        }
        let ip_off = at;
        match &self.ip {
            IpHeader::V4(h) => {
                let hlen = h.header_len();
                let b = &mut buf[at..at + hlen];
                b[0] = 0x40 | (hlen / 4) as u8;
                b[1] = (h.dscp.value() << 2) | h.ecn.value();
                b[2..4].copy_from_slice(&(ip_total as u16).to_be_bytes());
                b[4..6].copy_from_slice(&h.identification.to_be_bytes());
                let frag = h.fragment_offset.value().to_be_bytes();
                let flags = if h.dont_fragment { 0x40 } else { 0 } | if h.more_fragments { 0x20 } else { 0 };
                b[6] = flags | (frag[0] & 0x1f);
                b[7] = frag[1];
                b[8] = h.time_to_live;
                b[9] = IpNumber::UDP.0;
                b[12..16].copy_from_slice(&h.source);
                b[16..20].copy_from_slice(&h.destination);
                b[IPV4_MIN..].copy_from_slice(h.options.as_slice());
                let sum = ipv4_checksum(b);
                b[10..12].copy_from_slice(&sum.to_be_bytes());
                at += hlen;
            }
            IpHeader::V6(h) => {
                let b = &mut buf[at..at + IPV6_LEN];
                let flow = h.flow_label.value();
                b[0] = 0x60 | (h.traffic_class >> 4);
                b[1] = (h.traffic_class << 4) | ((flow >> 16) & 0x0f) as u8;
                b[2..4].copy_from_slice(&(flow as u16).to_be_bytes());
                b[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
                b[6] = IpNumber::UDP.0;
                b[7] = h.hop_limit;
                b[8..24].copy_from_slice(&h.source);
                b[24..40].copy_from_slice(&h.destination);
                at += IPV6_LEN;
            }
        }
        let ip_hlen = at - ip_off;
        let u = &mut buf[at..at + UDP_LEN];
        u[0..2].copy_from_slice(&self.udp.source_port.to_be_bytes());
        u[2..4].copy_from_slice(&self.udp.destination_port.to_be_bytes());
        u[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        u[6..8].copy_from_slice(&self.udp.checksum.to_be_bytes());
        at += UDP_LEN;
        self.bth.emit_bytes(&mut buf[at..at + BTH_LEN]);
        at += BTH_LEN;
        at += self.ext.emit(&mut buf[at..]);
        if let Some(p) = payload {
            buf[at..at + p.len()].copy_from_slice(p);
        }
        at += payload_len;
        let pad = self.pad_len();
        buf[at..at + pad].copy_from_slice(&self.pad[..pad]);
        at += pad;
        let icrc = icrc::compute_in_place(&mut buf[ip_off..at], self.ip.version(), ip_hlen)?;
        buf[at..at + ICRC_LEN].copy_from_slice(&icrc::to_wire(icrc));
        Ok(at + ICRC_LEN)
    }
}

/// The variable parts of a RoCEv2 frame as rxe builds it (what [`FrameRepr::new`] takes, and
/// the fields an engine then sets: hop limit, traffic class, UDP source port).
#[derive(Debug, Clone, Copy)]
pub struct RoceHeaders<'h> {
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Source address (both of one family; else the IPv6 form of both, as `FrameRepr::new`).
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// TTL (IPv4) or hop limit (IPv6).
    pub hop_limit: u8,
    /// Traffic class: DSCP and ECN (IPv4 TOS), or the IPv6 traffic class.
    pub traffic_class: u8,
    /// UDP source port.
    pub udp_source_port: u16,
    /// The BTH (PadCnt is set from the payload length).
    pub bth: &'h bth::Repr,
    /// The extension headers.
    pub ext: &'h ExtHeaders,
}

/// Emit the frame `FrameRepr::new(src_mac, dst_mac, src, dst, *bth, *ext, payload)` would
/// emit after its TTL/hop limit, traffic class and UDP source port were set from `h`: the
/// same bytes, written straight from the parts (no `FrameRepr` built and read back; this
/// runs for every RoCE frame an engine sends). `payload` is copied in when given; `None`
/// leaves the `payload_len` bytes already at the payload's offset (a MAD written in place;
/// see [`RoceHeaders::header_len`]). Fails with a length error if `buf` is too short, or if
/// the frame is too long for the IP/UDP length fields.
pub fn emit_roce(h: &RoceHeaders<'_>, buf: &mut [u8], payload: Option<&[u8]>, payload_len: usize) -> Result<usize> {
    let pad = payload_len.wrapping_neg() & 3;
    let v4 = match (h.src, h.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => Some((s.octets(), d.octets())),
        _ => None,
    };
    let ext_len = h.ext.buffer_len();
    let udp_len = UDP_LEN + BTH_LEN + ext_len + payload_len + pad + ICRC_LEN;
    let ip_hlen = if v4.is_some() { IPV4_MIN } else { IPV6_LEN };
    let len = ETH_LEN + ip_hlen + udp_len;
    if buf.len() < len {
        return Err(Error::len(Layer::Ethernet, 0, len, buf.len()));
    }
    let ip_total = if v4.is_some() { ip_hlen + udp_len } else { udp_len };
    if ip_total > 65535 {
        let layer = if v4.is_some() { Layer::Ipv4 } else { Layer::Ipv6 };
        return Err(Error::content(layer, 0, ContentError::FieldOutOfRange { value: udp_len, max: 65535 }));
    }
    buf[0..6].copy_from_slice(&h.dst_mac);
    buf[6..12].copy_from_slice(&h.src_mac);
    let ip_off = ETH_LEN;
    match v4 {
        Some((src, dst)) => {
            buf[12..14].copy_from_slice(&EtherType::IPV4.0.to_be_bytes());
            let b = &mut buf[ip_off..ip_off + IPV4_MIN];
            b[0] = 0x45;
            b[1] = h.traffic_class; // DSCP << 2 | ECN
            b[2..4].copy_from_slice(&(ip_total as u16).to_be_bytes());
            b[4..6].copy_from_slice(&[0, 0]); // identification 0
            b[6..8].copy_from_slice(&[0x40, 0]); // DF, offset 0
            b[8] = h.hop_limit;
            b[9] = IpNumber::UDP.0;
            b[12..16].copy_from_slice(&src);
            b[16..20].copy_from_slice(&dst);
            let sum = ipv4_checksum(b);
            b[10..12].copy_from_slice(&sum.to_be_bytes());
        }
        None => {
            buf[12..14].copy_from_slice(&EtherType::IPV6.0.to_be_bytes());
            let b = &mut buf[ip_off..ip_off + IPV6_LEN];
            b[0] = 0x60 | (h.traffic_class >> 4);
            b[1] = h.traffic_class << 4; // flow label 0
            b[2..4].copy_from_slice(&[0, 0]);
            b[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
            b[6] = IpNumber::UDP.0;
            b[7] = h.hop_limit;
            b[8..24].copy_from_slice(&to_v6(h.src));
            b[24..40].copy_from_slice(&to_v6(h.dst));
        }
    }
    let mut at = ip_off + ip_hlen;
    let u = &mut buf[at..at + UDP_LEN];
    u[0..2].copy_from_slice(&h.udp_source_port.to_be_bytes());
    u[2..4].copy_from_slice(&ROCEV2_UDP_PORT.to_be_bytes());
    u[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    u[6..8].copy_from_slice(&[0, 0]);
    at += UDP_LEN;
    let mut bth = *h.bth;
    bth.pad_count = pad as u8;
    bth.emit_bytes(&mut buf[at..at + BTH_LEN]);
    at += BTH_LEN;
    at += h.ext.emit(&mut buf[at..]);
    if let Some(p) = payload {
        buf[at..at + p.len()].copy_from_slice(p);
    }
    at += payload_len;
    if pad != 0 {
        // (A MAD needs none: no memset call for nothing.)
        buf[at..at + pad].fill(0);
    }
    at += pad;
    let version = if v4.is_some() { IpVersion::V4 } else { IpVersion::V6 };
    let icrc = icrc::compute_in_place(&mut buf[ip_off..at], version, ip_hlen)?;
    buf[at..at + ICRC_LEN].copy_from_slice(&icrc::to_wire(icrc));
    Ok(at + ICRC_LEN)
}

impl RoceHeaders<'_> {
    /// Where the payload starts in the frame [`emit_roce`] writes.
    pub fn header_len(&self) -> usize {
        let ip = if matches!((self.src, self.dst), (IpAddr::V4(_), IpAddr::V4(_))) { IPV4_MIN } else { IPV6_LEN };
        ETH_LEN + ip + UDP_LEN + BTH_LEN + self.ext.buffer_len()
    }
}

fn to_v6(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::ext::ExtMask;
    use crate::golden;
    use crate::{aeth, atomic_ack_eth, atomic_eth, deth, feth, ieth, immdt, reth, xrceth};
    use proptest::prelude::*;
    use std::vec::Vec;

    fn reemit(bytes: &[u8]) -> Vec<u8> {
        let f = parse(bytes).unwrap();
        let mut out = std::vec![0u8; f.repr.buffer_len()];
        let n = f.repr.emit(&mut out).unwrap();
        assert_eq!(n, out.len());
        out
    }

    #[test]
    fn golden_frames_parse_and_reemit_byte_for_byte() {
        for g in [&golden::SCAPY_UC_SEND_ONLY[..], &golden::CX4_CNP[..], &golden::SA_DELETE_MCMEMBER[..]] {
            assert_eq!(reemit(g), g);
        }
        let f = parse(&golden::SA_DELETE_MCMEMBER).unwrap();
        assert_eq!(f.repr.bth.opcode, crate::bth::Opcode::UdSendOnly);
        assert_eq!(f.repr.ext.deth, Some(deth::Repr::new(crate::GSI_QKEY, 1)));
        assert_eq!(f.repr.payload.len(), 256);
        assert_eq!(f.icrc, 0xEC2D_4ADF);
        assert_eq!(f.offsets.payload, 62);
        assert_eq!(f.offsets.icrc, 318);
        let f = parse(&golden::SCAPY_UC_SEND_ONLY).unwrap();
        assert_eq!((f.repr.bth.pad_count, f.repr.payload.len()), (2, 18));
        assert_eq!(f.repr.bth.psn, 13_571_856);
        let f = parse(&golden::CX4_CNP).unwrap();
        assert_eq!(f.icrc, 0x2A00_FD82);
    }

    /// The view's traffic class is the owned header's (IPv4 TOS; IPv6 across the nibbles).
    #[test]
    fn view_traffic_class_is_the_headers() {
        let cnp = FramePacket::new_checked(&golden::CX4_CNP).unwrap();
        assert_eq!(cnp.traffic_class(), 0xc2); // DSCP 48, ECT(0)
        let mut v6 = std::vec::Vec::new();
        let f = parse(&golden::SCAPY_UC_SEND_ONLY).unwrap();
        let mut r = f.repr.clone();
        r.ip = IpHeader::V6(etherparse::Ipv6Header {
            traffic_class: 0xa7,
            source: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            destination: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
            hop_limit: 64,
            ..Default::default()
        });
        v6.resize(r.buffer_len() + 14, 0);
        let n = r.emit(&mut v6).unwrap();
        let p = FramePacket::new_checked(&v6[..n]).unwrap();
        assert_eq!(p.traffic_class(), 0xa7);
    }

    #[test]
    fn emit_around_a_payload_in_place_equals_emit() {
        for g in [&golden::SCAPY_UC_SEND_ONLY[..], &golden::CX4_CNP[..], &golden::SA_DELETE_MCMEMBER[..]] {
            let f = parse(g).unwrap();
            let mut out = std::vec![0u8; g.len()];
            let at = f.repr.header_len();
            assert_eq!(at, f.offsets.payload);
            out[at..at + f.repr.payload.len()].copy_from_slice(f.repr.payload);
            let n = f.repr.emit_around(&mut out, f.repr.payload.len()).unwrap();
            assert_eq!(&out[..n], g);
            // Too short a buffer is a length error, not a panic.
            assert!(f.repr.emit_around(&mut out[..n - 1], f.repr.payload.len()).is_err());
        }
    }

    #[test]
    fn fecn_becn_do_not_change_the_icrc() {
        for bits in [0x80u8, 0x40, 0xc0, 0x3f, 0xff] {
            let mut f = golden::SA_DELETE_MCMEMBER;
            f[42 + 4] = bits;
            let p = parse(&f).unwrap();
            assert_eq!(p.icrc, 0xEC2D_4ADF);
            assert_eq!(p.repr.bth.fecn, bits & 0x80 != 0);
            assert_eq!(reemit(&f), f);
        }
    }

    #[test]
    fn any_flip_inside_the_icrc_coverage_is_detected() {
        let g = golden::SA_DELETE_MCMEMBER;
        // Masked bytes are outside the coverage: TOS 15, TTL 22, IP checksum 24–25, UDP checksum 40–41, BTH byte 4 = 46.
        let masked = [15usize, 22, 24, 25, 40, 41, 46];
        for byte in 14..g.len() - 4 {
            for bit in 0..8 {
                let mut f = g;
                f[byte] ^= 1 << bit;
                let (found, computed) = icrc::check(&f[14..], IpVersion::V4, 20).unwrap();
                assert_eq!(found == computed, masked.contains(&byte), "byte {byte} bit {bit}");
                if !masked.contains(&byte) {
                    assert!(parse(&f).is_err());
                }
            }
        }
    }

    #[test]
    fn bad_icrc_is_a_typed_error_at_the_icrc() {
        let mut f = golden::SA_DELETE_MCMEMBER;
        f[321] ^= 1;
        let e = parse(&f).unwrap_err();
        assert_eq!(e.layer(), Layer::Icrc);
        assert_eq!(e.offset(), 318);
        assert!(matches!(e, Error::Content { kind: ContentError::IcrcMismatch { .. }, .. }));
        let lax = parse_lax(&f).unwrap();
        assert!(!lax.icrc_ok());
    }

    #[test]
    fn truncation_at_every_offset_is_a_typed_error() {
        for g in [&golden::SCAPY_UC_SEND_ONLY[..], &golden::CX4_CNP[..], &golden::SA_DELETE_MCMEMBER[..]] {
            for n in 0..g.len() {
                let e = parse(&g[..n]).unwrap_err();
                assert!(e.offset() <= g.len());
                let _ = std::format!("{e}");
                let _ = parse_lax(&g[..n]);
            }
        }
        assert_eq!(parse(&golden::SA_DELETE_MCMEMBER[..10]).unwrap_err(), Error::len(Layer::Ethernet, 0, 14, 10));
        assert_eq!(parse(&golden::SA_DELETE_MCMEMBER[..30]).unwrap_err(), Error::len(Layer::Ipv4, 14, 20, 16));
    }

    #[test]
    fn content_errors_name_the_field() {
        let g = golden::SA_DELETE_MCMEMBER;
        let mut f = g;
        f[12] = 0x88;
        assert_eq!(parse(&f).unwrap_err().offset(), 12);
        let mut f = g;
        f[14] = 0x65;
        assert_eq!(
            parse(&f).unwrap_err(),
            Error::content(Layer::Ipv4, 14, ContentError::IpVersionMismatch { version: 6 })
        );
        let mut f = g;
        f[36] = 0x12; // UDP dport 4791 → 0x12b7 high byte unchanged; change low byte
        f[37] = 0x00;
        assert!(matches!(parse(&f).unwrap_err(), Error::Content { layer: Layer::Udp, offset: 36, .. }));
        let mut f = g;
        f[43] |= 0x01; // TVer 1
        assert!(matches!(parse(&f).unwrap_err(), Error::Content { layer: Layer::Bth, offset: 43, .. }));
        let mut f = g;
        f[25] ^= 0xff; // IPv4 checksum
        assert!(matches!(parse(&f).unwrap_err(), Error::Content { layer: Layer::Ipv4, offset: 24, .. }));
        assert!(parse_lax(&f).is_ok());
    }

    #[test]
    fn oversize_pad_is_rejected() {
        // A UD frame with no payload and PadCnt 3.
        let mut bth = crate::bth::Repr::new(crate::bth::Opcode::UdSendOnly, 1, 0);
        bth.pad_count = 0;
        let r = FrameRepr::new(
            [2; 6],
            [4; 6],
            IpAddr::from([198, 18, 0, 1]),
            IpAddr::from([198, 18, 0, 2]),
            bth,
            ExtHeaders::deth(1, 2),
            &[],
        );
        let mut buf = [0u8; 128];
        let n = r.emit(&mut buf).unwrap();
        buf[14 + 20 + 8 + 1] |= 0x30;
        let e = parse(&buf[..n]).unwrap_err();
        assert!(matches!(e, Error::Content { layer: Layer::Bth, offset: 43, kind: ContentError::BadPad { .. } }));
        assert_eq!(parse_lax(&buf[..n]).unwrap().repr.bth.pad_count, 0);
    }

    /// An XRC RDMA WRITE Only with Immediate over IPv6: BTH ▶ XRCETH ▶ RETH ▶ ImmDt ▶ payload,
    /// parsed where the IBA puts each, re-emitted byte for byte, the ICRC over all of it.
    fn xrc_write_imm() -> std::vec::Vec<u8> {
        let ext = ExtHeaders {
            xrceth: Some(xrceth::Repr { reserved: 0x5a, xrc_srq: 0x00_0a0b }),
            reth: Some(reth::Repr { va: 0x7f00_dead_0000, rkey: 0x1234, dma_len: 5 }),
            immdt: Some(immdt::Repr { imm_data: 0xcafe_f00d }),
            ..ExtHeaders::default()
        };
        let bth = crate::bth::Repr::new(crate::bth::Opcode::XrcRdmaWriteOnlyWithImmediate, 0x11, 9);
        let r =
            FrameRepr::new([2; 6], [4; 6], "fd00::1".parse().unwrap(), "fd00::2".parse().unwrap(), bth, ext, b"hello");
        let mut out = std::vec![0u8; r.buffer_len()];
        assert_eq!(r.emit(&mut out).unwrap(), out.len());
        out
    }

    #[test]
    fn xrc_frame_round_trips_with_its_xrceth_first() {
        let f = xrc_write_imm();
        let p = parse(&f).unwrap();
        assert!(p.icrc_ok());
        let e = p.repr.ext;
        assert_eq!(e.mask(), ExtMask::XRCETH.union(ExtMask::RETH).union(ExtMask::IMMDT));
        assert_eq!(e.xrceth, Some(xrceth::Repr { reserved: 0x5a, xrc_srq: 0x0a0b }));
        // Ethernet 14 + IPv6 40 + UDP 8: the BTH at 62, the XRCETH at 74, the RETH at 78,
        // the ImmDt at 94, the payload at 98 (5 bytes, 3 of pad), the ICRC at 106.
        assert_eq!((p.offsets.bth, p.offsets.ext, p.offsets.payload, p.offsets.icrc), (62, 74, 98, 106));
        assert_eq!(&f[74..78], &[0x5a, 0x00, 0x0a, 0x0b]);
        assert_eq!(&f[78..86], &0x7f00_dead_0000u64.to_be_bytes());
        assert_eq!(&f[94..98], &0xcafe_f00du32.to_be_bytes());
        assert_eq!((p.repr.payload, p.repr.bth.pad_count), (&b"hello"[..], 3));
        assert_eq!(reemit(&f), f);
        let v = FramePacket::new_checked(&f).unwrap();
        let x = v.xrceth().expect("an XRC request has an XRCETH");
        assert_eq!((x.reserved(), x.xrc_srq()), (0x5a, 0x0a0b));
        assert!(v.deth().is_none());
        assert_eq!(v.payload(), b"hello");
        // The XRCETH is covered by the ICRC.
        let mut bad = f.clone();
        bad[76] ^= 1;
        assert!(matches!(parse(&bad).unwrap_err(), Error::Content { layer: Layer::Icrc, offset: 106, .. }));
    }

    /// A UDP datagram that ends inside an XRC request's headers: the error names the header
    /// cut short and its frame offset.
    #[test]
    fn truncated_xrc_headers_name_the_header_and_offset() {
        let f = xrc_write_imm();
        // Keep `keep` bytes after the BTH (lengths fixed up: the IPv6 payload and UDP length).
        let cut = |keep: usize| {
            let mut t = f[..74 + keep].to_vec();
            let udp = (8 + 12 + keep) as u16;
            t[18..20].copy_from_slice(&udp.to_be_bytes());
            t[58..60].copy_from_slice(&udp.to_be_bytes());
            t
        };
        for keep in 0..4 {
            assert_eq!(parse_lax(&cut(keep)).unwrap_err(), Error::len(Layer::Xrceth, 74, 4, keep));
            assert_eq!(FramePacket::new_lax(&cut(keep)).unwrap_err(), Error::len(Layer::Xrceth, 74, 4, keep));
        }
        assert_eq!(parse_lax(&cut(4 + 10)).unwrap_err(), Error::len(Layer::Reth, 78, 16, 10));
        assert_eq!(parse_lax(&cut(4 + 16 + 1)).unwrap_err(), Error::len(Layer::ImmDt, 94, 4, 1));
        // All headers but no room for the ICRC.
        assert_eq!(parse_lax(&cut(24)).unwrap_err(), Error::len(Layer::Icrc, 98, 4, 0));
        assert_eq!(
            std::format!("{}", Error::len(Layer::Xrceth, 74, 4, 2)),
            "XRCETH at byte 74: truncated, needs 4 bytes but only 2 remain"
        );
    }

    #[test]
    fn rxe_qp1_source_port() {
        assert_eq!(rxe_udp_sport(1), 0xD872);
    }

    fn ext_for(mask: ExtMask, v: u64) -> ExtHeaders {
        let w = v as u32;
        let mut h = ExtHeaders::default();
        if mask.contains(ExtMask::DETH) {
            h.deth = Some(deth::Repr { qkey: w, reserved: (v >> 8) as u8, src_qp: w & 0xff_ffff });
        }
        if mask.contains(ExtMask::XRCETH) {
            h.xrceth = Some(xrceth::Repr { reserved: (v >> 24) as u8, xrc_srq: w.rotate_left(5) & 0xff_ffff });
        }
        if mask.contains(ExtMask::FETH) {
            h.feth = Some(feth::Repr { bits: w.rotate_left(3) });
        }
        if mask.contains(ExtMask::RETH) {
            h.reth = Some(reth::Repr { va: v, rkey: w ^ 0x55, dma_len: w >> 3 });
        }
        if mask.contains(ExtMask::ATOMIC_ETH) {
            h.atomic_eth = Some(atomic_eth::Repr { va: v, rkey: w, swap_add: !v, compare: v.rotate_left(7) });
        }
        if mask.contains(ExtMask::AETH) {
            h.aeth = Some(aeth::Repr { syndrome: (v >> 16) as u8, msn: w & 0xff_ffff });
        }
        if mask.contains(ExtMask::ATOMIC_ACK_ETH) {
            h.atomic_ack_eth = Some(atomic_ack_eth::Repr { orig: v ^ 0xdead });
        }
        if mask.contains(ExtMask::IMMDT) {
            h.immdt = Some(immdt::Repr { imm_data: w.swap_bytes() });
        }
        if mask.contains(ExtMask::IETH) {
            h.ieth = Some(ieth::Repr { rkey: !w });
        }
        h
    }

    prop_compose! {
        fn arb_bth()(op in proptest::sample::select(&crate::bth::Opcode::ALL[..]), flags in any::<u8>(),
                     pkey in any::<u16>(), b4 in any::<u8>(), qp in 0u32..0x100_0000, b8 in any::<u8>(),
                     psn in 0u32..0x100_0000) -> crate::bth::Repr {
            let mut raw = [0u8; 12];
            crate::bth::Repr::new(op, qp, psn).emit_bytes(&mut raw);
            raw[1] = flags & 0xf0; // TVer 0, as the strict parser requires
            raw[2..4].copy_from_slice(&pkey.to_be_bytes());
            raw[4] = b4;
            raw[8] = b8;
            crate::bth::Repr::parse_bytes(&raw).unwrap()
        }
    }

    /// The plain 16-bit form the word-wise `ipv4_checksum` must equal.
    fn ipv4_checksum_by_16(hdr: &[u8]) -> u16 {
        let mut sum: u32 = 0;
        let mut i = 0;
        while i + 1 < hdr.len() {
            if i != 10 {
                sum += u32::from(u16::from_be_bytes([hdr[i], hdr[i + 1]]));
            }
            i += 2;
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    proptest! {
        #[test]
        fn ipv4_checksum_equals_the_16_bit_sum(hdr in proptest::collection::vec(any::<u8>(), 0..64)) {
            prop_assert_eq!(ipv4_checksum(&hdr), ipv4_checksum_by_16(&hdr));
        }

        #[test]
        fn ipv4_checksum_of_all_ones_at_every_length(len in 0usize..400) {
            // The largest sums: the fold count must cover any length.
            let hdr = std::vec![0xffu8; len];
            prop_assert_eq!(ipv4_checksum(&hdr), ipv4_checksum_by_16(&hdr));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn emit_roce_equals_the_repr_path(
            fam in 0u8..3, src in any::<[u8; 16]>(), dst in any::<[u8; 16]>(), hop in any::<u8>(), tc in any::<u8>(),
            sport in any::<u16>(), bth in arb_bth(), v in any::<u64>(),
            payload in proptest::collection::vec(any::<u8>(), 0..300), macs in any::<([u8; 6], [u8; 6])>(),
            in_place in any::<bool>(), junk in any::<u8>(), short in 0usize..8,
        ) {
            // IPv4, IPv6, and mixed families (the IPv6 form of both).
            let v4 = |a: [u8; 16]| IpAddr::from([a[0], a[1], a[2], a[3]]);
            let (s, d) = match fam {
                0 => (v4(src), v4(dst)),
                1 => (IpAddr::from(src), IpAddr::from(dst)),
                _ => (v4(src), IpAddr::from(dst)),
            };
            let ext = ext_for(bth.opcode.ext_headers(), v);
            // The engine's path: FrameRepr::new, then hop limit, traffic class, source port.
            let mut r = FrameRepr::new(macs.0, macs.1, s, d, bth, ext, &payload);
            r.udp.source_port = sport;
            match &mut r.ip {
                IpHeader::V4(h) => { h.time_to_live = hop;
                    h.dscp = etherparse::IpDscp::try_new(tc >> 2).unwrap(); h.ecn = etherparse::IpEcn::try_new(tc & 3).unwrap(); }
                IpHeader::V6(h) => { h.hop_limit = hop; h.traffic_class = tc; }
            }
            let mut want = std::vec![junk; r.buffer_len() + 8];
            let n = r.emit(&mut want).unwrap();
            let h = RoceHeaders { src_mac: macs.0, dst_mac: macs.1, src: s, dst: d, hop_limit: hop, traffic_class: tc,
                udp_source_port: sport, bth: &bth, ext: &ext };
            prop_assert_eq!(h.header_len(), r.header_len());
            let mut got = std::vec![junk; n + 8];
            let m = if in_place {
                let at = h.header_len();
                got[at..at + payload.len()].copy_from_slice(&payload);
                emit_roce(&h, &mut got, None, payload.len()).unwrap()
            } else {
                emit_roce(&h, &mut got, Some(&payload), payload.len()).unwrap()
            };
            prop_assert_eq!(m, n);
            prop_assert_eq!(&got[..n], &want[..n]);
            // A short buffer: the same length error.
            let mut small = std::vec![0u8; n - 1 - short.min(n - 1)];
            prop_assert_eq!(emit_roce(&h, &mut small, Some(&payload), payload.len()).unwrap_err(),
                r.emit(&mut small).unwrap_err());
        }

        #[test]
        fn whole_frame_round_trip(
            v6 in any::<bool>(), vlan in proptest::option::of((0u8..8, any::<bool>(), 0u16..4096)),
            src in any::<[u8; 16]>(), dst in any::<[u8; 16]>(), hop in any::<u8>(), tc in any::<u8>(),
            id in any::<u16>(), sport in any::<u16>(), csum in any::<u16>(), mut bth in arb_bth(),
            v in any::<u64>(), payload in proptest::collection::vec(any::<u8>(), 0..300),
            pad in any::<[u8; 3]>(), macs in any::<([u8; 6], [u8; 6])>(),
        ) {
            let (s, d) = if v6 {
                (IpAddr::from(src), IpAddr::from(dst))
            } else {
                (IpAddr::from([src[0], src[1], src[2], src[3]]), IpAddr::from([dst[0], dst[1], dst[2], dst[3]]))
            };
            let ext = ext_for(bth.opcode.ext_headers(), v);
            bth.pad_count &= 3;
            let mut r = FrameRepr::new(macs.0, macs.1, s, d, bth, ext, &payload);
            r.bth.pad_count = bth.pad_count;
            r.pad = [0; 3];
            let n = usize::from(bth.pad_count);
            r.pad[..n].copy_from_slice(&pad[..n]);
            r.udp.source_port = sport;
            r.udp.checksum = csum;
            match &mut r.ip {
                IpHeader::V4(h) => { h.time_to_live = hop; h.identification = id;
                    h.dscp = etherparse::IpDscp::try_new(tc >> 2).unwrap(); h.ecn = etherparse::IpEcn::try_new(tc & 3).unwrap(); }
                IpHeader::V6(h) => { h.hop_limit = hop; h.traffic_class = tc;
                    h.flow_label = etherparse::Ipv6FlowLabel::try_new(u32::from(id) << 4).unwrap(); }
            }
            if let Some((pcp, dei, vid)) = vlan {
                r.vlan = Some(SingleVlanHeader { pcp: etherparse::VlanPcp::try_new(pcp).unwrap(), drop_eligible_indicator: dei,
                    vlan_id: etherparse::VlanId::try_new(vid).unwrap(), ether_type: EtherType::IPV4 });
            }
            r.fill().unwrap();
            let mut buf = std::vec![0u8; r.buffer_len()];
            let n = r.emit(&mut buf).unwrap();
            prop_assert_eq!(n, buf.len());
            let f = parse(&buf).unwrap();
            prop_assert!(f.icrc_ok());
            prop_assert_eq!(&f.repr, &r);
            // The zero-copy view agrees with the owned form.
            let v = FramePacket::new_checked(&buf).unwrap();
            prop_assert_eq!(v.to_frame().unwrap(), f.clone());
            prop_assert_eq!(v.payload(), r.payload);
            prop_assert_eq!(v.bth().psn(), r.bth.psn);
            prop_assert_eq!((v.src_ip(), v.dst_ip()), (r.ip.source(), r.ip.destination()));
            prop_assert_eq!(v.deth().map(|d| d.qkey()), r.ext.deth.map(|d| d.qkey));
            prop_assert_eq!(v.xrceth().map(|x| (x.reserved(), x.xrc_srq())), r.ext.xrceth.map(|x| (x.reserved, x.xrc_srq)));
            // The ICRC agrees with an independent whole-buffer CRC of the masked bytes.
            let ip = f.offsets.ip;
            let mut masked = buf[ip..f.offsets.icrc].to_vec();
            let h = f.offsets.udp - ip;
            if v6 { masked[0] |= 0x0f; masked[1] = 0xff; masked[2] = 0xff; masked[3] = 0xff; masked[7] = 0xff; }
            else { masked[1] = 0xff; masked[8] = 0xff; masked[10] = 0xff; masked[11] = 0xff; }
            masked[h + 6] = 0xff; masked[h + 7] = 0xff; masked[h + 12] = 0xff;
            let mut all = std::vec![0xffu8; 8];
            all.extend_from_slice(&masked);
            prop_assert_eq!(f.icrc, crc32fast::hash(&all));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = parse(&bytes);
            let _ = parse_lax(&bytes);
            prop_assert_eq!(FramePacket::new_checked(&bytes).is_ok(), parse(&bytes).is_ok());
        }

        #[test]
        fn mutated_golden_never_panics(i in 0usize..322, b in any::<u8>(), cut in 0usize..323) {
            let mut f = golden::SA_DELETE_MCMEMBER;
            f[i] = b;
            let _ = parse(&f[..cut]);
            let _ = parse_lax(&f[..cut]);
        }
    }
}
