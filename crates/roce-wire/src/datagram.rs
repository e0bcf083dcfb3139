//! A RoCEv2 datagram as a kernel UDP socket hands it over: the UDP payload (BTH ▶ extension
//! headers ▶ payload ▶ pad ▶ ICRC) where the socket read it, and what the socket reports of
//! the IP and UDP headers around it ([`Arrival`]) — no Ethernet, IP or UDP header in the bytes.
//!
//! - [`compute_icrc`]: the ICRC over the IP and UDP headers the sender's kernel wrote
//!   (predicted from the arrival and an IPv4 ID) and the datagram, with no frame built;
//! - [`RoceDatagram`]: the checked view, every check a frame's RoCEv2 part gets
//!   ([`crate::frame`]: TVer, the extension headers' and ICRC's lengths, the pad) but the
//!   ICRC, which the caller verified;
//! - [`write_frame_headers`]: the Ethernet, IP and UDP headers of the frame the datagram came
//!   in, for a receiver that needs the whole frame.
//!
//! What the sender's kernel writes (IPv4: DF, ID 0 for a datagram sent alone, counting up
//! across a UDP GSO send's segments; IPv6: flow label 0; UDP checksum masked by the ICRC) is in
//! spec/net.md, "The udp transport".

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::bth::{self, BTH_LEN};
use crate::error::{Error, Layer, Result};
use crate::ext::ExtHeaders;
use crate::frame::{self, RoceLayout};
use crate::icrc::{self, IpVersion, ICRC_LEN};
use crate::ROCEV2_UDP_PORT;

const ETH_LEN: usize = 14;
const UDP_LEN: usize = 8;

/// How a datagram arrived: what a UDP socket reports of its IP and UDP headers.
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

impl Arrival {
    /// Whether it came over IPv4 (the destination's family: a socket of one family reports
    /// sources of that family).
    pub fn is_ipv4(&self) -> bool {
        self.dst.is_ipv4()
    }

    /// The IP and UDP headers' length.
    pub fn ip_udp_len(&self) -> usize {
        if self.is_ipv4() {
            20 + UDP_LEN
        } else {
            40 + UDP_LEN
        }
    }

    /// The frame's header length: Ethernet, IP and UDP.
    pub fn frame_header_len(&self) -> usize {
        ETH_LEN + self.ip_udp_len()
    }
}

/// Write the IP and UDP headers of a datagram of `len` bytes that arrived as `arrival` at
/// `buf[..arrival.ip_udp_len()]`, as the sender's kernel wrote them (IPv4: DF, ID `ipv4_id`,
/// the header checksum; IPv6: flow label 0; UDP checksum 0). Returns the length written, or a
/// length error if `buf` is shorter.
pub fn write_ip_udp(buf: &mut [u8], len: usize, arrival: &Arrival, ipv4_id: u16) -> Result<usize> {
    write_ip_udp_with(buf, len, arrival, ipv4_id, true)
}

/// [`write_ip_udp`], the IPv4 header checksum written or left 0 (`checksum`: the ICRC masks
/// it, so [`compute_icrc`] need not sum the header).
#[inline(always)]
fn write_ip_udp_with(buf: &mut [u8], len: usize, arrival: &Arrival, ipv4_id: u16, checksum: bool) -> Result<usize> {
    let n = arrival.ip_udp_len();
    if buf.len() < n {
        return Err(Error::len(Layer::Udp, 0, n, buf.len()));
    }
    let udp_len = (UDP_LEN + len) as u16;
    let (ip, udp) = buf[..n].split_at_mut(n - UDP_LEN);
    match (arrival.src.ip(), arrival.dst) {
        (s, IpAddr::V4(d)) => {
            let s = match s {
                IpAddr::V4(s) => s,
                IpAddr::V6(s) => s.to_ipv4_mapped().unwrap_or(Ipv4Addr::UNSPECIFIED),
            };
            ip[0] = 0x45;
            ip[1] = arrival.traffic_class;
            ip[2..4].copy_from_slice(&(udp_len.wrapping_add(20)).to_be_bytes());
            ip[4..6].copy_from_slice(&ipv4_id.to_be_bytes());
            ip[6..8].copy_from_slice(&[0x40, 0]); // DF
            ip[8] = arrival.hop_limit;
            ip[9] = 17;
            ip[10..12].copy_from_slice(&[0, 0]);
            ip[12..16].copy_from_slice(&s.octets());
            ip[16..20].copy_from_slice(&d.octets());
            if checksum {
                let sum = frame::ipv4_checksum(ip);
                ip[10..12].copy_from_slice(&sum.to_be_bytes());
            }
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
    udp[0..2].copy_from_slice(&arrival.src.port().to_be_bytes());
    udp[2..4].copy_from_slice(&ROCEV2_UDP_PORT.to_be_bytes());
    udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
    udp[6..8].copy_from_slice(&[0, 0]);
    Ok(n)
}

/// Write the Ethernet, IP and UDP headers of the frame a datagram of `len` bytes came in at
/// `buf[..arrival.frame_header_len()]`: to `mac` (or the group's MAC for a multicast
/// destination) from `neighbor_mac`, the IP and UDP headers as [`write_ip_udp`]. Returns the
/// header length, or a length error if `buf` is shorter.
pub fn write_frame_headers(
    buf: &mut [u8],
    len: usize,
    arrival: &Arrival,
    mac: [u8; 6],
    neighbor_mac: [u8; 6],
    ipv4_id: u16,
) -> Result<usize> {
    let n = arrival.frame_header_len();
    if buf.len() < n {
        return Err(Error::len(Layer::Ethernet, 0, n, buf.len()));
    }
    let dst_mac = match arrival.dst {
        IpAddr::V4(g) if g.is_multicast() => crate::multicast::ipv4_multicast_mac(g),
        IpAddr::V6(g) if g.is_multicast() => crate::multicast::ipv6_multicast_mac(g),
        _ => mac,
    };
    buf[0..6].copy_from_slice(&dst_mac);
    buf[6..12].copy_from_slice(&neighbor_mac);
    buf[12..14].copy_from_slice(&(if arrival.is_ipv4() { 0x0800u16 } else { 0x86dd }).to_be_bytes());
    write_ip_udp(&mut buf[ETH_LEN..], len, arrival, ipv4_id)?;
    Ok(n)
}

/// The ICRC of `datagram` (a whole UDP payload, BTH to ICRC) as it arrived, with the IPv4 ID
/// `ipv4_id` (ignored for IPv6), computed over headers written on the stack and the datagram
/// where it lies; and the ICRC it carries. A length error if it is shorter than a BTH and an
/// ICRC.
pub fn compute_icrc(datagram: &[u8], arrival: &Arrival, ipv4_id: u16) -> Result<(u32, u32)> {
    let Some(body) = datagram.len().checked_sub(ICRC_LEN).filter(|b| *b >= BTH_LEN) else {
        return Err(Error::len(Layer::Icrc, 0, BTH_LEN + ICRC_LEN, datagram.len()));
    };
    let mut head = [0u8; 40 + UDP_LEN];
    let n = write_ip_udp_with(&mut head, datagram.len(), arrival, ipv4_id, false)?;
    let (version, ip_len) = if arrival.is_ipv4() { (IpVersion::V4, 20) } else { (IpVersion::V6, 40) };
    let computed = icrc::compute_split(&head[..n], version, ip_len, &datagram[..body])?;
    let t = &datagram[body..];
    Ok((computed, icrc::from_wire([t[0], t[1], t[2], t[3]])))
}

/// The ICRCs of datagrams that arrive alike — a GRO read's segments: one sender, one length
/// but the last's, IPv4 IDs counting up — computed with one pass over each datagram where it
/// lies: the IP and UDP headers (ID 0) hashed once per arrival and length and the hash state
/// kept, each datagram hashed from it (its BTH byte 4 masked in place for the pass and put
/// back), and the IPv4 ID's part added as one GF(2) product
/// ([`icrc::Ipv4IdentificationShift`], kept for the last length). The same values as
/// [`compute_icrc`], which hashes the headers again for every datagram.
#[derive(Clone, Default)]
pub struct DatagramIcrc {
    /// The arrival and datagram length the hashed headers are for, and the hash after them.
    head: Option<(Arrival, usize, crc32fast::Hasher)>,
    /// The ID shift for the last IPv4 packet length.
    shift: Option<(usize, icrc::Ipv4IdentificationShift)>,
}

impl core::fmt::Debug for DatagramIcrc {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DatagramIcrc")
            .field("head", &self.head.as_ref().map(|(a, len, _)| (a, len)))
            .field("shift", &self.shift)
            .finish()
    }
}

impl DatagramIcrc {
    /// Whether `datagram` (a whole UDP payload, BTH to ICRC) carries the ICRC it has when it
    /// arrived as `arrival` with IPv4 ID `ipv4_id` (ignored for IPv6). `datagram` ends as it
    /// came. A length error if it is shorter than a BTH and an ICRC.
    pub fn verify(&mut self, datagram: &mut [u8], arrival: &Arrival, ipv4_id: u16) -> Result<bool> {
        let len = datagram.len();
        let Some(body) = len.checked_sub(ICRC_LEN).filter(|b| *b >= BTH_LEN) else {
            return Err(Error::len(Layer::Icrc, 0, BTH_LEN + ICRC_LEN, len));
        };
        let mut h = match &self.head {
            Some((a, l, h)) if a == arrival && *l == len => h.clone(),
            _ => {
                let mut head = [0u8; 40 + UDP_LEN];
                let n = write_ip_udp_with(&mut head, len, arrival, 0, false)?;
                // The masked fields set to ones (see `icrc`): TOS, TTL and checksum, or
                // traffic class, flow label and hop limit; the UDP checksum.
                if arrival.is_ipv4() {
                    for i in [1, 8, 10, 11] {
                        head[i] = 0xff;
                    }
                } else {
                    head[0] |= 0x0f;
                    for i in [1, 2, 3, 7] {
                        head[i] = 0xff;
                    }
                }
                head[n - 2] = 0xff;
                head[n - 1] = 0xff;
                let mut h = icrc::seeded();
                h.update(&head[..n]);
                self.head.insert((*arrival, len, h)).2.clone()
            }
        };
        let resv = datagram[4];
        datagram[4] = 0xff;
        h.update(&datagram[..body]);
        datagram[4] = resv;
        let mut computed = h.finalize();
        if arrival.is_ipv4() && ipv4_id != 0 {
            let packet_len = 20 + UDP_LEN + body;
            let shift = match self.shift {
                Some((l, s)) if l == packet_len => s,
                _ => self.shift.insert((packet_len, icrc::Ipv4IdentificationShift::new(packet_len)?)).1,
            };
            computed ^= shift.icrc_change(0, ipv4_id);
        }
        let t = &datagram[body..];
        Ok(computed == icrc::from_wire([t[0], t[1], t[2], t[3]]))
    }
}

/// A checked RoCEv2 datagram whose ICRC the caller verified ([`compute_icrc`]): the view a
/// receiver dispatches on, strict as [`crate::frame::parse`] in everything else. Offsets in
/// errors count from the BTH (the datagram's first byte).
#[derive(Debug, Clone, Copy)]
pub struct RoceDatagram<'a> {
    buf: &'a [u8],
    layout: RoceLayout,
}

impl<'a> RoceDatagram<'a> {
    /// Check `datagram` (BTH to ICRC), its ICRC taken as verified: TVer 0, the extension
    /// headers the opcode carries and the ICRC present, the pad within the payload.
    pub fn new_icrc_verified(datagram: &'a [u8]) -> Result<RoceDatagram<'a>> {
        let mut refused = None;
        let layout = frame::roce_layout(datagram, 0, true, &mut refused)?;
        Ok(RoceDatagram { buf: datagram, layout })
    }

    /// The BTH.
    #[inline]
    pub fn bth(&self) -> bth::Packet<&'a [u8]> {
        bth::Packet::new_unchecked(&self.buf[..BTH_LEN])
    }

    /// The BTH opcode.
    #[inline]
    pub fn opcode(&self) -> bth::Opcode {
        self.layout.opcode
    }

    /// The payload (pad excluded).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        let l = self.layout;
        &self.buf[BTH_LEN + l.ext_len..l.icrc_at - usize::from(l.pad)]
    }

    /// The BTH (with the pad count as checked) and the extension headers, owned.
    #[inline]
    pub fn transport_headers(&self) -> Result<(bth::Repr, ExtHeaders)> {
        frame::owned_transport_headers(&self.buf[..BTH_LEN + self.layout.ext_len], self.layout.pad, 0)
    }
}

fn v6(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrival(src: &str, dst: &str) -> Arrival {
        Arrival {
            src: SocketAddr::new(src.parse().unwrap(), 0xc123),
            dst: dst.parse().unwrap(),
            traffic_class: 0x0a,
            hop_limit: 63,
        }
    }

    /// A golden frame's UDP payload, with the headers of its arrival written again in front
    /// of it, is the same frame: its ICRC computed in two pieces is the frame's, the view
    /// gives its transport headers and payload, and a damaged datagram's ICRC differs.
    #[test]
    fn a_datagram_checks_as_the_frame_it_came_in() {
        let f = crate::golden::SA_DELETE_MCMEMBER;
        let parsed = frame::parse(&f).unwrap();
        let a = Arrival {
            src: SocketAddr::new(parsed.repr.ip.source(), parsed.repr.udp.source_port),
            dst: parsed.repr.ip.destination(),
            traffic_class: parsed.repr.ip.traffic_class(),
            hop_limit: parsed.repr.ip.hop_limit(),
        };
        let id = u16::from_be_bytes([f[18], f[19]]);
        let dgram = &f[42..];
        let (computed, wire) = compute_icrc(dgram, &a, id).unwrap();
        assert_eq!((computed, wire), (parsed.icrc_expected, parsed.icrc));
        assert_eq!(computed, wire);
        let mut rebuilt = [0u8; 42];
        assert_eq!(write_frame_headers(&mut rebuilt, dgram.len(), &a, f[..6].try_into().unwrap(), [0; 6], id), Ok(42));
        assert_eq!(&rebuilt[12..], &f[12..42], "the IP and UDP headers as the sender wrote them (UDP checksum 0)");
        let d = RoceDatagram::new_icrc_verified(dgram).unwrap();
        let (bth, ext) = d.transport_headers().unwrap();
        assert_eq!((bth, ext), (parsed.repr.bth, parsed.repr.ext));
        assert_eq!(d.payload(), parsed.repr.payload);
        assert_eq!(d.opcode(), parsed.repr.bth.opcode);
        let mut bad = dgram.to_vec();
        bad[30] ^= 1;
        let (computed, wire) = compute_icrc(&bad, &a, id).unwrap();
        assert_ne!(computed, wire);
        // Another ID, another ICRC: the ID is covered.
        assert_ne!(compute_icrc(dgram, &a, id ^ 1).unwrap().0, wire);
    }

    /// `DatagramIcrc` agrees with `compute_icrc` for IPv4 and IPv6, every ID, lengths that
    /// change between calls (its kept state follows them), a damaged datagram; and leaves the
    /// datagram as it was.
    #[test]
    fn the_kept_header_hash_gives_the_icrc_of_every_datagram() {
        let mut icrc = DatagramIcrc::default();
        let mut rng = crate::rng::SplitMix64::stream(5, 1);
        for (src, dst) in [("10.0.0.1", "10.0.0.2"), ("fd00::1", "fd00::2")] {
            let a = arrival(src, dst);
            for len in [16usize, 20, 1040, 1040, 1056, 4112, 60] {
                let mut d = [0u8; 4112];
                let d = &mut d[..len];
                for b in d.iter_mut() {
                    *b = rng.next_u64() as u8;
                }
                d[1] &= 0xf0;
                for id in [0u16, 1, 61, 0x1234] {
                    let (want, _) = compute_icrc(d, &a, id).unwrap();
                    d[len - 4..].copy_from_slice(&icrc::to_wire(want));
                    let before = d.to_vec();
                    assert_eq!(icrc.verify(d, &a, id), Ok(true), "{src} length {len} ID {id}");
                    assert_eq!(d, &before[..]);
                    d[len / 2] ^= 4;
                    assert_eq!(icrc.verify(d, &a, id), Ok(false));
                    d[len / 2] ^= 4;
                }
            }
        }
        assert!(icrc.verify(&mut [0u8; 15], &arrival("10.0.0.1", "10.0.0.2"), 0).is_err());
    }

    /// IPv6: the two-piece ICRC equals the frame's.
    #[test]
    fn an_ipv6_datagram_icrc_equals_its_frames() {
        let a = arrival("fd00::1", "fd00::2");
        let mut frame = [0u8; 62 + 12 + 8 + 4];
        let len = frame.len() - 62;
        write_frame_headers(&mut frame, len, &a, [2; 6], [4; 6], 0).unwrap();
        frame[62] = 0x64; // UD SEND_ONLY
        frame[62 + 12..62 + 20].copy_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
        let end = frame.len() - 4;
        let c = icrc::compute(&frame[14..end], IpVersion::V6, 40).unwrap();
        frame[end..].copy_from_slice(&icrc::to_wire(c));
        assert!(frame::parse(&frame).is_ok());
        assert_eq!(compute_icrc(&frame[62..], &a, 0).unwrap(), (c, c));
    }

    /// Each strict check of the frame path holds for a datagram, the offset counted from the
    /// BTH: TVer, a cut extension header, a missing ICRC, an oversize pad; too short for an
    /// ICRC is a length error from `compute_icrc`.
    #[test]
    fn a_bad_datagram_is_refused_naming_layer_and_offset() {
        let f = crate::golden::SA_DELETE_MCMEMBER;
        let dgram = &f[42..];
        let mut tver = dgram.to_vec();
        tver[1] |= 1;
        let e = RoceDatagram::new_icrc_verified(&tver).unwrap_err();
        assert_eq!((e.layer(), e.offset()), (Layer::Bth, 1));
        let e = RoceDatagram::new_icrc_verified(&dgram[..16]).unwrap_err();
        assert_eq!(e.layer(), Layer::Deth);
        let e = RoceDatagram::new_icrc_verified(&dgram[..22]).unwrap_err();
        assert_eq!((e.layer(), e.offset()), (Layer::Icrc, 20));
        let mut pad = dgram[..24].to_vec();
        pad[1] |= 0x30;
        let e = RoceDatagram::new_icrc_verified(&pad).unwrap_err();
        assert_eq!((e.layer(), e.offset()), (Layer::Bth, 1));
        assert!(compute_icrc(&dgram[..15], &arrival("10.0.0.1", "10.0.0.2"), 0).is_err());
        assert!(RoceDatagram::new_icrc_verified(&[]).is_err());
    }
}
