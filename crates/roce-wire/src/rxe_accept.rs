//! Whether a Linux rxe peer counts a frame in `rcvd_pkts`: the acceptance predictor.
//!
//! [`rxe_accepts`] follows a frame through what the peer's kernel does with it, in order, and
//! stops at the first check that drops it (spec/rxe-acceptance.md has the table with the
//! kernel source of each step):
//!
//! 1. the NIC and the link layer: destination MAC = the peer's, EtherType IPv4 or IPv6 (an
//!    802.1Q tag only with VID 0, as the kernel treats priority-tagged frames as untagged);
//! 2. the IP layer (`ip_rcv_core`, `ip_route_input`, `ipv6_rcv`): version, header length and
//!    checksum, total length within the frame, no fragment, a local unicast destination, a
//!    source that is not martian, protocol UDP;
//! 3. UDP (`udp_rcv`, `udp_queue_rcv_one_skb`): length, destination port 4791, checksum when
//!    it is non-zero (rxe's tunnel sockets accept a zero checksum on IPv4 and IPv6);
//! 4. `rxe_udp_encap_recv` ▶ `rxe_rcv`: at least a BTH, the destination a GID of the port,
//!    an opcode in rxe's `rxe_opcode[]` table, at least the opcode's header length plus the
//!    PadCnt plus the ICRC, then `hdr_check`
//!    (TVer 0, QPN not 0, the QP exists — QPN 1 means the GSI QP — its type matches the
//!    opcode's transport, the P_Key matches 0xFFFF in its low 15 bits, the Q_Key of a UD/GSI
//!    QP matches, read where rxe reads the DETH), and last the ICRC (`rxe_icrc_check`: over
//!    exactly 20 bytes of IPv4 header, as rxe copies them).
//!
//! Only a frame that passes all of them increments `rcvd_pkts`. The kernels modelled are
//! Debian's 6.1.192 and 6.12.117, which carry the two 2026 fixes to `rxe_rcv`'s length checks
//! (upstream 7244491dab34 "Validate pad and ICRC before payload_size()" and 4c6f86d85d03
//! "Reject unknown opcodes before ICRC processing", CVE-2026-46133; in 6.1.175 and 6.12.88):
//! an opcode outside rxe's table is dropped first ([`RxeDrop::UnknownOpcode`]), and a UDP
//! payload shorter than the opcode's headers plus the BTH's PadCnt plus the ICRC is dropped
//! ([`RxeDrop::ShortHeaders`]). Older kernels read out of bounds on both (a crash), which this
//! predictor does not model.
//!
//! Pure and allocation-free: the peer is described by [`RxePeer`].

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::bth::BTH_LEN;
use crate::{GSI_QKEY, MULTICAST_QPN, ROCEV2_UDP_PORT};

/// The guest kernel version, where rxe's behaviour differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RxeKernel {
    /// Linux 6.1 (Debian 12's default): no FLUSH (0x1C) or ATOMIC WRITE (0x1D) in rxe's opcode
    /// table.
    V6_1,
    /// Linux 6.12: FLUSH and ATOMIC WRITE are in the table (since 6.2).
    V6_12,
}

/// The transport of a QP on the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RxeQpType {
    /// The GSI QP (QPN 1), which the MAD layer creates on every port.
    Gsi,
    /// An unreliable datagram QP.
    Ud,
    /// A reliable connected QP (the address check is not modelled: such a QP is predicted
    /// to accept any source).
    Rc,
    /// An unreliable connected QP (same caveat as `Rc`).
    Uc,
}

/// One QP of the peer, as rxe's QP pool holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RxeQp {
    /// Its index in rxe's QP pool (the QPN on the wire, except for the GSI QP: the wire's
    /// QPN 1 is mapped to this index, and the index itself also reaches it).
    pub index: u32,
    /// Its type.
    pub qp_type: RxeQpType,
    /// Its Q_Key (the GSI QP is checked against [`GSI_QKEY`] when addressed as QPN 1).
    pub qkey: u32,
}

/// The peer: its link and network addresses and its QPs.
#[derive(Debug, Clone, Copy)]
pub struct RxePeer<'a> {
    /// The peer NIC's MAC address.
    pub mac: [u8; 6],
    /// Its local unicast addresses, which are also its port's GIDs (IPv4 ones are GIDs as
    /// IPv4-mapped IPv6 addresses).
    pub addrs: &'a [IpAddr],
    /// Its QPs in state RTS.
    pub qps: &'a [RxeQp],
    /// Its kernel.
    pub kernel: RxeKernel,
}

/// Why the peer does not count a frame; the step that drops it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RxeDrop {
    /// Shorter than an Ethernet header, or not addressed to the peer's MAC.
    NotForPeer,
    /// An 802.1Q tag with a non-zero VID (no VLAN device on the peer).
    Vlan,
    /// Not IPv4 or IPv6.
    NotIp,
    /// The IP header is malformed (version, header length, total length).
    IpHeader,
    /// The IPv4 header checksum is wrong.
    IpChecksum,
    /// A fragment (held for reassembly, never completed).
    Fragment,
    /// The destination is not a local unicast address of the peer.
    NotLocal,
    /// A martian source address (multicast, broadcast, loopback, unspecified or the peer's own).
    MartianSource,
    /// Not UDP (or an IPv6 extension header first).
    NotUdp,
    /// The UDP length is below 8 or beyond the IP payload.
    UdpLength,
    /// Not to UDP port 4791.
    NotRoceV2,
    /// A non-zero UDP checksum that is wrong.
    UdpChecksum,
    /// Shorter than a BTH (`rxe_rcv`).
    ShortBth,
    /// An opcode outside rxe's table (`rxe_rcv`: its entry's mask and length are 0).
    UnknownOpcode,
    /// The UDP payload is shorter than the opcode's headers in rxe's table plus the BTH's
    /// PadCnt plus the ICRC (`rxe_rcv`: `paylen < header_size + bth_pad + RXE_ICRC_SIZE`).
    ShortHeaders,
    /// TVer is not 0 (`hdr_check`).
    Tver,
    /// QPN 0 (`hdr_check`: QP 0 is not supported).
    Qp0,
    /// No QP with that number (`rxe_pool_get_index`).
    NoQp,
    /// The opcode's transport does not match the QP's type (`check_type_state`).
    QpType,
    /// The P_Key does not match the default P_Key (`check_keys`).
    PKey,
    /// The Q_Key does not match the QP's (`check_keys`).
    QKey,
    /// The ICRC is wrong (`rxe_icrc_check`).
    Icrc,
}

impl RxeDrop {
    /// A short name for counters and JSON (`icrc`, `qkey`, …).
    pub fn name(self) -> &'static str {
        match self {
            RxeDrop::NotForPeer => "not_for_peer",
            RxeDrop::Vlan => "vlan",
            RxeDrop::NotIp => "not_ip",
            RxeDrop::IpHeader => "ip_header",
            RxeDrop::IpChecksum => "ip_checksum",
            RxeDrop::Fragment => "fragment",
            RxeDrop::NotLocal => "not_local",
            RxeDrop::MartianSource => "martian_source",
            RxeDrop::NotUdp => "not_udp",
            RxeDrop::UdpLength => "udp_length",
            RxeDrop::NotRoceV2 => "not_rocev2",
            RxeDrop::UdpChecksum => "udp_checksum",
            RxeDrop::ShortBth => "short_bth",
            RxeDrop::UnknownOpcode => "unknown_opcode",
            RxeDrop::ShortHeaders => "short_headers",
            RxeDrop::Tver => "tver",
            RxeDrop::Qp0 => "qp0",
            RxeDrop::NoQp => "no_qp",
            RxeDrop::QpType => "qp_type",
            RxeDrop::PKey => "pkey",
            RxeDrop::QKey => "qkey",
            RxeDrop::Icrc => "icrc",
        }
    }
}

/// What the peer does with a frame: counted in `rcvd_pkts`, or dropped at one step.
pub type RxeVerdict = core::result::Result<RxeAccepted, RxeDrop>;

/// A frame the peer counts, with where its RoCE part lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RxeAccepted {
    /// Offset of the BTH in the frame.
    pub bth: usize,
    /// The UDP payload length (BTH to ICRC inclusive).
    pub paylen: usize,
    /// The destination QPN.
    pub dest_qp: u32,
    /// The opcode byte.
    pub opcode: u8,
}

/// The length of BTH plus extension headers for `opcode` in rxe's `rxe_opcode[]` table on
/// `kernel`, or `None` when the opcode is not in it (its mask and length are 0).
pub fn rxe_header_len(opcode: u8, kernel: RxeKernel) -> Option<usize> {
    const IMM: usize = 4;
    const RETH: usize = 16;
    const AETH: usize = 4;
    const DETH: usize = 8;
    const RDETH: usize = 4;
    const ATOMIC: usize = 28;
    const ATOMIC_ACK: usize = 8;
    const IETH: usize = 4;
    const FETH: usize = 4;
    let rc_uc = |low: u8| -> Option<usize> {
        Some(match low {
            0x00..=0x02 => 0,
            0x03 => IMM,
            0x04 => 0,
            0x05 => IMM,
            0x06 => RETH,
            0x07 | 0x08 => 0,
            0x09 => IMM,
            0x0a => RETH,
            0x0b => RETH + IMM,
            _ => return None,
        })
    };
    let ext = match opcode {
        0x00..=0x0b => rc_uc(opcode)?,
        0x0c => RETH,
        0x0d => AETH,
        0x0e => 0,
        0x0f..=0x11 => AETH,
        0x12 => AETH + ATOMIC_ACK,
        0x13 | 0x14 => ATOMIC,
        0x16 | 0x17 => IETH,
        0x1c if kernel == RxeKernel::V6_12 => FETH + RETH,
        0x1d if kernel == RxeKernel::V6_12 => RETH,
        0x20..=0x2b => rc_uc(opcode - 0x20)?,
        0x40..=0x42 | 0x44 | 0x47 | 0x48 => RDETH + DETH,
        0x43 | 0x45 | 0x49 => RDETH + DETH + IMM,
        0x46 | 0x4a | 0x4c => RDETH + DETH + RETH,
        0x4b => RDETH + DETH + RETH + IMM,
        0x4d | 0x4f | 0x50 | 0x51 => RDETH + AETH,
        0x4e => RDETH,
        0x52 => RDETH + AETH + ATOMIC_ACK,
        0x53 | 0x54 => RDETH + DETH + ATOMIC,
        0x64 => DETH,
        0x65 => DETH + IMM,
        _ => return None,
    };
    Some(BTH_LEN + ext)
}

/// Where rxe reads the DETH of `opcode` (offset from the BTH): after the RDETH for RD
/// opcodes, right after the BTH for UD ones, and at 0 (the BTH itself) for opcodes whose
/// table entry has no DETH offset.
fn deth_offset(opcode: u8) -> usize {
    match opcode {
        0x64 | 0x65 => BTH_LEN,
        0x40..=0x4c | 0x53 | 0x54 => BTH_LEN + 4,
        _ => 0,
    }
}

/// Whether `opcode` is a request in rxe's table (`RXE_REQ_MASK`): a response/ack opcode is
/// checked against the QP's requester state instead (both are ready in RTS).
fn transport_of(opcode: u8) -> u8 {
    opcode & 0xe0
}

fn pkey_matches(pkey: u16) -> bool {
    // pkey_match(pkey, IB_DEFAULT_PKEY_FULL): the low 15 bits equal and non-zero, one of the
    // two a full member (0xFFFF is).
    pkey & 0x7fff == 0x7fff
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// One's complement sum of `data` (16-bit words, big endian) added to `sum`.
fn csum_add(mut sum: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    sum
}

fn csum_fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

fn martian_v4(a: Ipv4Addr) -> bool {
    a.is_multicast() || a.is_broadcast() || a.is_loopback() || a.is_unspecified()
}

fn martian_v6(a: Ipv6Addr) -> bool {
    a.is_multicast() || a.is_loopback()
}

/// Predict whether the rxe peer `peer` counts `frame` (a whole Ethernet frame, FCS excluded)
/// in its port's `rcvd_pkts` hw counter: `Ok` when it does, else the step that drops it.
/// See the module docs for the steps and spec/rxe-acceptance.md for their kernel sources.
pub fn rxe_accepts(frame: &[u8], peer: &RxePeer<'_>) -> RxeVerdict {
    // 1. link layer
    if frame.len() < 14 || frame[..6] != peer.mac {
        return Err(RxeDrop::NotForPeer);
    }
    let mut ether_type = be16(frame, 12);
    let mut ip = 14;
    if ether_type == 0x8100 {
        if frame.len() < 18 {
            return Err(RxeDrop::NotIp);
        }
        if be16(frame, 14) & 0x0fff != 0 {
            return Err(RxeDrop::Vlan);
        }
        ether_type = be16(frame, 16);
        ip = 18;
    }
    let b = &frame[ip..];
    // 2. IP: the packet's bytes (the Ethernet trailer cut off), the UDP offset, the version
    let (packet, udp, v6) = match ether_type {
        0x0800 => {
            if b.len() < 20 || b[0] >> 4 != 4 {
                return Err(RxeDrop::IpHeader);
            }
            let ihl = usize::from(b[0] & 0x0f) * 4;
            let total = usize::from(be16(b, 2));
            if ihl < 20 || b.len() < ihl || total < ihl || total > b.len() {
                return Err(RxeDrop::IpHeader);
            }
            if csum_fold(csum_add(0, &b[..ihl])) != 0xffff {
                return Err(RxeDrop::IpChecksum);
            }
            // options are not modelled (the fuzzer sends none): a header with options is
            // taken as the kernel would parse a valid one
            if be16(b, 6) & 0x3fff != 0 {
                return Err(RxeDrop::Fragment);
            }
            let dst = Ipv4Addr::new(b[16], b[17], b[18], b[19]);
            let src = Ipv4Addr::new(b[12], b[13], b[14], b[15]);
            if !peer.addrs.contains(&IpAddr::V4(dst)) {
                return Err(RxeDrop::NotLocal);
            }
            if martian_v4(src) || peer.addrs.contains(&IpAddr::V4(src)) {
                return Err(RxeDrop::MartianSource);
            }
            if b[9] != 17 {
                return Err(RxeDrop::NotUdp);
            }
            (&b[..total], ihl, false)
        }
        0x86dd => {
            if b.len() < 40 || b[0] >> 4 != 6 {
                return Err(RxeDrop::IpHeader);
            }
            let plen = usize::from(be16(b, 4));
            if plen == 0 || 40 + plen > b.len() {
                return Err(RxeDrop::IpHeader);
            }
            let mut s = [0u8; 16];
            s.copy_from_slice(&b[8..24]);
            let mut d = [0u8; 16];
            d.copy_from_slice(&b[24..40]);
            let (src, dst) = (Ipv6Addr::from(s), Ipv6Addr::from(d));
            if martian_v6(src) {
                return Err(RxeDrop::MartianSource);
            }
            if !peer.addrs.contains(&IpAddr::V6(dst)) {
                return Err(RxeDrop::NotLocal);
            }
            if b[6] != 17 {
                return Err(RxeDrop::NotUdp);
            }
            (&b[..40 + plen], 40, true)
        }
        _ => return Err(RxeDrop::NotIp),
    };
    // 3. UDP
    let avail = packet.len() - udp;
    if avail < 8 {
        return Err(RxeDrop::UdpLength);
    }
    let ulen = usize::from(be16(packet, udp + 4));
    if ulen < 8 || ulen > avail {
        return Err(RxeDrop::UdpLength);
    }
    let dgram = &packet[udp..udp + ulen];
    if be16(dgram, 2) != ROCEV2_UDP_PORT {
        return Err(RxeDrop::NotRoceV2);
    }
    if be16(dgram, 6) != 0 {
        let pseudo = if v6 {
            csum_add(csum_add(0, &packet[8..40]), &[0, 0, (ulen >> 8) as u8, ulen as u8, 0, 0, 0, 17])
        } else {
            csum_add(csum_add(0, &packet[12..20]), &[0, 17, (ulen >> 8) as u8, ulen as u8])
        };
        if csum_fold(csum_add(pseudo, dgram)) != 0xffff {
            return Err(RxeDrop::UdpChecksum);
        }
    }
    // 4. rxe_rcv
    let hdr = &dgram[8..];
    let paylen = hdr.len();
    if paylen < BTH_LEN {
        return Err(RxeDrop::ShortBth);
    }
    // rxe_chk_dgid: the destination is a GID of the port (every local address here)
    let opcode = hdr[0];
    // rxe_rcv, since the fixes named in the module docs: an empty table entry is dropped
    // before any length arithmetic, then the length must hold the headers, the pad the BTH
    // claims and the ICRC (so payload_size() cannot wrap)
    let Some(hlen) = rxe_header_len(opcode, peer.kernel) else { return Err(RxeDrop::UnknownOpcode) };
    let pad = usize::from((hdr[1] >> 4) & 3);
    if paylen < hlen + pad + 4 {
        return Err(RxeDrop::ShortHeaders);
    }
    // hdr_check
    if hdr[1] & 0x0f != 0 {
        return Err(RxeDrop::Tver);
    }
    let qpn = be32(hdr, 4) & 0x00ff_ffff;
    if qpn == 0 {
        return Err(RxeDrop::Qp0);
    }
    if qpn != MULTICAST_QPN {
        let gsi = peer.qps.iter().find(|q| q.qp_type == RxeQpType::Gsi);
        let qp = if qpn == 1 { gsi } else { peer.qps.iter().find(|q| q.index == qpn) };
        let Some(qp) = qp else { return Err(RxeDrop::NoQp) };
        let want = match qp.qp_type {
            RxeQpType::Rc => 0x00,
            RxeQpType::Uc => 0x20,
            RxeQpType::Gsi | RxeQpType::Ud => 0x60,
        };
        if transport_of(opcode) != want {
            return Err(RxeDrop::QpType);
        }
        if !pkey_matches(be16(hdr, 2)) {
            return Err(RxeDrop::PKey);
        }
        if matches!(qp.qp_type, RxeQpType::Gsi | RxeQpType::Ud) {
            // within the headers: the length check above covers the DETH
            let at = deth_offset(opcode);
            let qkey = if qpn == 1 { GSI_QKEY } else { qp.qkey };
            if be32(hdr, at) != qkey {
                return Err(RxeDrop::QKey);
            }
        }
    }
    // rxe_icrc_check: rxe_opcode[].length bytes of headers, then payload_size + pad bytes
    let quirk = flush_has_no_payload_offset(opcode, peer.kernel).then_some(hlen);
    if rxe_icrc(packet, udp, v6, quirk)
        != u32::from_le_bytes([hdr[paylen - 4], hdr[paylen - 3], hdr[paylen - 2], hdr[paylen - 1]])
    {
        return Err(RxeDrop::Icrc);
    }
    Ok(RxeAccepted { bth: ip + udp + 8, paylen, dest_qp: qpn, opcode })
}

/// Opcodes whose entry in rxe's table gives no payload offset, so that `payload_addr` is the
/// BTH itself and `payload_size` counts from there: rxe's ICRC for them covers the headers
/// after the BTH a second time, from the BTH on. RC FLUSH (6.2 and later), RD ACKNOWLEDGE and
/// RD ATOMIC ACKNOWLEDGE, found by the oracle (frames with the standard ICRC never counted;
/// with this one counted: spec/rxe-acceptance.md §2).
fn flush_has_no_payload_offset(opcode: u8, kernel: RxeKernel) -> bool {
    (opcode == 0x1c && kernel == RxeKernel::V6_12) || opcode == 0x51 || opcode == 0x52
}

/// The ICRC (as the CRC value whose little-endian bytes go on the wire) that `kernel`'s rxe
/// expects for `frame`, an Ethernet frame without a VLAN tag holding a RoCEv2 packet whose
/// opcode is in rxe's table; `None` when the frame is too short to tell. Equal to the
/// standard ICRC ([`crate::icrc`]) except for RC FLUSH on 6.12 and RD ACKNOWLEDGE (see
/// spec/rxe-acceptance.md).
pub fn rxe_expected_icrc(frame: &[u8], kernel: RxeKernel) -> Option<u32> {
    let v6 = match frame.get(12..14)? {
        [0x08, 0x00] => false,
        [0x86, 0xdd] => true,
        _ => return None,
    };
    let packet = &frame[14..];
    let udp = if v6 { 40 } else { usize::from(*packet.first()? & 0x0f) * 4 };
    let ulen = usize::from(be16(packet.get(udp..udp + 8)?, 4));
    let hlen = rxe_header_len(*packet.get(udp + 8)?, kernel)?;
    if ulen < 8 + hlen + 4 || udp + ulen > packet.len() || udp < 20 {
        return None;
    }
    let quirk = flush_has_no_payload_offset(packet[udp + 8], kernel).then_some(hlen);
    Some(rxe_icrc(packet, udp, v6, quirk))
}

/// The ICRC as rxe computes it on receive (`rxe_icrc_hdr` + `rxe_icrc_check`): a masked copy
/// of exactly 20 (IPv4) or 40 (IPv6) bytes of IP header followed by 8 bytes taken as the UDP
/// header, the BTH with byte 4 masked, then everything up to the ICRC. `packet` runs from the
/// IP header to the end of the IP packet; the UDP datagram starts at `udp`. The result is the
/// CRC value whose little-endian bytes are the ICRC on the wire.
fn rxe_icrc(packet: &[u8], udp: usize, v6: bool, no_payload_offset: Option<usize>) -> u32 {
    let iph = if v6 { 40 } else { 20 };
    let ulen = usize::from(be16(packet, udp + 4));
    let end = udp + ulen - 4;
    let mut pseudo = [0u8; 40 + 8 + BTH_LEN];
    let n = iph + 8;
    // rxe copies sizeof(iphdr) + sizeof(udphdr) bytes from the IP header: with IPv4 options
    // its "UDP header" is the options' first 8 bytes
    pseudo[..n].copy_from_slice(&packet[..n]);
    if v6 {
        pseudo[0] |= 0x0f;
        pseudo[1] = 0xff;
        pseudo[2] = 0xff;
        pseudo[3] = 0xff;
        pseudo[7] = 0xff;
    } else {
        pseudo[1] = 0xff;
        pseudo[8] = 0xff;
        pseudo[10] = 0xff;
        pseudo[11] = 0xff;
    }
    pseudo[iph + 6] = 0xff;
    pseudo[iph + 7] = 0xff;
    let bth = udp + 8;
    pseudo[n..n + BTH_LEN].copy_from_slice(&packet[bth..bth + BTH_LEN]);
    pseudo[n + 4] = 0xff;
    let mut h = crc32fast::Hasher::new_with_initial(crate::icrc::SEED);
    h.update(&pseudo[..n + BTH_LEN]);
    if let Some(hlen) = no_payload_offset {
        // the headers after the BTH, then "payload" from the BTH on
        h.update(&packet[bth + BTH_LEN..bth + hlen]);
        h.update(&packet[bth..end]);
    } else {
        h.update(&packet[bth + BTH_LEN..end]);
    }
    h.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bth::{self, Opcode};
    use crate::ext::ExtHeaders;
    use crate::frame::FrameRepr;

    const PEER_MAC: [u8; 6] = [0x52, 0x54, 0, 0x12, 0x34, 0x56];
    const OUR_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

    fn addrs() -> [IpAddr; 2] {
        [IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)), "fd00::2".parse().unwrap()]
    }

    fn frame(dst: IpAddr, op: Opcode, qpn: u32, qkey: u32, payload: &[u8]) -> ([u8; 512], usize) {
        let src: IpAddr = if dst.is_ipv4() { "198.18.0.1".parse().unwrap() } else { "fd00::1".parse().unwrap() };
        let b = bth::Repr::new(op, qpn, 7);
        let ext = if op.ext_headers().contains(crate::ext::ExtMask::DETH) {
            ExtHeaders::deth(qkey, 1)
        } else {
            ExtHeaders::default()
        };
        let r = FrameRepr::new(OUR_MAC, PEER_MAC, src, dst, b, ext, payload).with_auto_pad();
        let mut out = [0u8; 512];
        let n = r.buffer_len();
        r.emit(&mut out[..n]).unwrap();
        (out, n)
    }

    #[test]
    fn gsi_frames_and_each_drop_step() {
        let a = addrs();
        let qps = [RxeQp { index: 17, qp_type: RxeQpType::Gsi, qkey: GSI_QKEY }];
        let peer = RxePeer { mac: PEER_MAC, addrs: &a, qps: &qps, kernel: RxeKernel::V6_1 };
        for dst in a {
            let (f, n) = frame(dst, Opcode::UdSendOnly, 1, GSI_QKEY, &[0u8; 256]);
            let ok = rxe_accepts(&f[..n], &peer).expect("a MAD to QP1 is counted");
            assert_eq!(ok.dest_qp, 1);
            // the pool index reaches the GSI QP too, with its own Q_Key
            let (f, n) = frame(dst, Opcode::UdSendOnly, 17, GSI_QKEY, &[0u8; 256]);
            assert!(rxe_accepts(&f[..n], &peer).is_ok());
            let mut bad = f;
            bad[n - 1] ^= 1;
            assert_eq!(rxe_accepts(&bad[..n], &peer), Err(RxeDrop::Icrc));
            let (f, n) = frame(dst, Opcode::UdSendOnly, 1, 0x1234, &[0u8; 256]);
            assert_eq!(rxe_accepts(&f[..n], &peer), Err(RxeDrop::QKey));
            let (f, n) = frame(dst, Opcode::UdSendOnly, 0x99, GSI_QKEY, &[0u8; 8]);
            assert_eq!(rxe_accepts(&f[..n], &peer), Err(RxeDrop::NoQp));
            let (f, n) = frame(dst, Opcode::RcSendOnly, 1, GSI_QKEY, &[0u8; 8]);
            assert_eq!(rxe_accepts(&f[..n], &peer), Err(RxeDrop::QpType));
            let (f, n) = frame(dst, Opcode::UdSendOnly, 0, GSI_QKEY, &[0u8; 8]);
            assert_eq!(rxe_accepts(&f[..n], &peer), Err(RxeDrop::Qp0));
            // any opcode in the table goes to the multicast QPN unchecked but for the ICRC
            let (f, n) = frame(dst, Opcode::RcSendOnly, MULTICAST_QPN, 0, &[0u8; 8]);
            assert!(rxe_accepts(&f[..n], &peer).is_ok());
            let mut other = f;
            other[0] ^= 0x01;
            assert_eq!(rxe_accepts(&other[..n], &peer), Err(RxeDrop::NotForPeer));
        }
        // P_Key 0x7FFF (limited member) matches, 0x8001 does not
        let (mut f, n) = frame(a[0], Opcode::UdSendOnly, 1, GSI_QKEY, &[0u8; 4]);
        let bth_at = 14 + 20 + 8;
        f[bth_at + 2] = 0x80;
        f[bth_at + 3] = 0x01;
        assert_eq!(rxe_accepts(&f[..n], &peer), Err(RxeDrop::PKey));
    }

    #[test]
    fn agrees_with_the_crate_icrc() {
        let a = addrs();
        let qps = [RxeQp { index: 17, qp_type: RxeQpType::Gsi, qkey: GSI_QKEY }];
        let peer = RxePeer { mac: PEER_MAC, addrs: &a, qps: &qps, kernel: RxeKernel::V6_12 };
        for len in [0usize, 1, 2, 3, 4, 100, 256] {
            for dst in a {
                let (f, n) = frame(dst, Opcode::UdSendOnly, 1, GSI_QKEY, &[0xa5u8; 256][..len]);
                let strict = crate::frame::parse(&f[..n]).is_ok();
                assert_eq!(rxe_accepts(&f[..n], &peer).is_ok(), strict, "len {len} dst {dst}");
            }
        }
    }

    /// The open 0x4E class of spec/rxe-acceptance.md: an RD READ RESPONSE MIDDLE to the
    /// multicast QPN with no byte after its RDETH but PadCnt 3 is dropped by rxe_rcv's
    /// `paylen < header_size + bth_pad + ICRC` check; with the pad's bytes present it counts.
    /// An opcode outside the table is dropped before any length check, even to QPN 0xFFFFFF.
    #[test]
    fn pad_beyond_the_payload_and_unknown_opcodes() {
        let a = addrs();
        let qps = [RxeQp { index: 16, qp_type: RxeQpType::Gsi, qkey: GSI_QKEY }];
        for kernel in [RxeKernel::V6_1, RxeKernel::V6_12] {
            let peer = RxePeer { mac: PEER_MAC, addrs: &a, qps: &qps, kernel };
            for (after_rdeth, pad, want) in [
                (0usize, 3u8, Err(RxeDrop::ShortHeaders)),
                (0, 1, Err(RxeDrop::ShortHeaders)),
                (4, 3, Ok(())),
                (0, 0, Ok(())),
            ] {
                // RDETH + payload (a multiple of 4: no auto pad) carried as the payload of an RC
                // SEND, then the opcode and PadCnt patched
                let (mut f, n) = frame(a[0], Opcode::RcSendOnly, MULTICAST_QPN, 0, &[0u8; 8][..4 + after_rdeth]);
                let bth_at = 14 + 20 + 8;
                f[bth_at] = 0x4e;
                f[bth_at + 1] = (f[bth_at + 1] & !0x30) | (pad << 4);
                let c = crate::icrc::compute(&f[14..n - 4], crate::icrc::IpVersion::V4, 20).unwrap();
                f[n - 4..n].copy_from_slice(&c.to_le_bytes());
                assert_eq!(rxe_accepts(&f[..n], &peer).map(|_| ()), want, "{kernel:?} +{after_rdeth} pad {pad}");
            }
            // a MAD to QP1 without its ICRC: 20 bytes of headers only
            let (f, n) = frame(a[0], Opcode::UdSendOnly, 1, GSI_QKEY, &[]);
            let mut short = f;
            short[14 + 2..14 + 4].copy_from_slice(&((n - 14 - 4) as u16).to_be_bytes());
            short[14 + 20 + 4..14 + 20 + 6].copy_from_slice(&((n - 14 - 20 - 4) as u16).to_be_bytes());
            short[14 + 20 + 6..14 + 20 + 8].copy_from_slice(&[0, 0]);
            let mut ip = [0u8; 20];
            ip.copy_from_slice(&short[14..34]);
            ip[10] = 0;
            ip[11] = 0;
            let sum = !csum_fold(csum_add(0, &ip));
            short[24..26].copy_from_slice(&sum.to_be_bytes());
            assert_eq!(rxe_accepts(&short[..n - 4], &peer), Err(RxeDrop::ShortHeaders));
            // CVE-2026-46133's trigger: opcode 0xFF to QPN 0xFFFFFF
            let (mut f, n) = frame(a[0], Opcode::RcSendOnly, MULTICAST_QPN, 0, &[0u8; 8]);
            f[14 + 20 + 8] = 0xff;
            assert_eq!(rxe_accepts(&f[..n], &peer), Err(RxeDrop::UnknownOpcode));
        }
    }

    #[test]
    fn table_differs_between_kernels() {
        assert_eq!(rxe_header_len(0x1c, RxeKernel::V6_1), None);
        assert_eq!(rxe_header_len(0x1c, RxeKernel::V6_12), Some(32));
        assert_eq!(rxe_header_len(0x64, RxeKernel::V6_1), Some(20));
        assert_eq!(rxe_header_len(0x81, RxeKernel::V6_12), None);
    }
}
