//! The raw transport's GSO path ([`crate::raw::RawSocket::enable_gso`]): with PACKET_VNET_HDR
//! every frame a packet socket sends or reads starts with a `struct virtio_net_hdr`
//! (include/uapi/linux/virtio_net.h). On send a run of RoCEv2 frames (the rules of
//! [`crate::gso::split_runs`]) goes as one frame: the first frame's Ethernet, IP and UDP
//! headers, then every frame's UDP payload back to back, marked VIRTIO_NET_HDR_GSO_UDP_L4 with
//! `gso_size` the payload length, which the kernel segments (`virtio_net_hdr_to_skb`, then
//! `__udp_gso_segment` wherever a device cannot carry it whole). On receive a GSO frame (veth
//! passes one whole) is split back into its segments, headers rebuilt as the sending kernel
//! would have segmented them. spec/rc.md, "The raw transport's GSO path".

use std::ops::Range;

use crate::gso::RunMember;

/// `sizeof(struct virtio_net_hdr)`.
pub(crate) const VNET_HDR_LEN: usize = 10;
/// PACKET_VNET_HDR (linux/if_packet.h).
pub(crate) const PACKET_VNET_HDR: libc::c_int = 15;
const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
const VIRTIO_NET_HDR_GSO_NONE: u8 = 0;
const VIRTIO_NET_HDR_GSO_UDP_L4: u8 = 5;
const VIRTIO_NET_HDR_GSO_ECN: u8 = 0x80;
const ETH_LEN: usize = 14;
const UDP_LEN: usize = 8;
const ICRC_LEN: usize = roce_wire::icrc::ICRC_LEN;

/// `struct virtio_net_hdr`, in the host's byte order (a packet socket's header is legacy
/// virtio: af_packet's `vio_le()` is the host's endianness).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct VnetHdr {
    flags: u8,
    gso_type: u8,
    hdr_len: u16,
    gso_size: u16,
    csum_start: u16,
    csum_offset: u16,
}

impl VnetHdr {
    pub(crate) fn to_bytes(self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        for (at, v) in [(2, self.hdr_len), (4, self.gso_size), (6, self.csum_start), (8, self.csum_offset)] {
            b[at..at + 2].copy_from_slice(&v.to_ne_bytes());
        }
        b
    }

    pub(crate) fn from_bytes(b: &[u8]) -> VnetHdr {
        let w = |at: usize| u16::from_ne_bytes([b[at], b[at + 1]]);
        VnetHdr { flags: b[0], gso_type: b[1], hdr_len: w(2), gso_size: w(4), csum_start: w(6), csum_offset: w(8) }
    }
}

/// A frame that may be part of a GSO run: IPv4 (no options, not a fragment) or IPv6 (UDP
/// straight after the fixed header) UDP, without a VLAN tag.
#[derive(Debug, Clone)]
pub(crate) struct RunFrame<'a> {
    frame: &'a [u8],
    /// Whether it can be a run member at all (else it goes alone).
    runnable: bool,
    ipv4: bool,
    /// The UDP header's offset (34 or 54) and the UDP datagram's end.
    udp_at: usize,
    end: usize,
}

impl RunFrame<'_> {
    /// A placeholder (for arrays filled as frames are classified).
    pub(crate) const EMPTY: RunFrame<'static> = RunFrame { frame: &[], runnable: false, ipv4: true, udp_at: 0, end: 0 };

    /// `frame` as a run member, or alone (not IPv4/IPv6 UDP as [`RunFrame::classify`] takes it).
    pub(crate) fn of(frame: &[u8]) -> RunFrame<'_> {
        RunFrame::classify(frame).unwrap_or(RunFrame { frame, ..RunFrame::EMPTY })
    }

    /// The whole frame.
    pub(crate) fn frame(&self) -> &[u8] {
        self.frame
    }

    /// `frame` as a run member, or `None`: it goes alone.
    pub(crate) fn classify(frame: &[u8]) -> Option<RunFrame<'_>> {
        let (ipv4, udp_at) = match frame.get(12..14)? {
            [0x08, 0x00] => {
                let ip = frame.get(ETH_LEN..ETH_LEN + 20)?;
                // IHL 5, UDP, DF or nothing, offset 0.
                (ip[0] == 0x45 && ip[9] == 17 && ip[6] & 0x3f == 0 && ip[7] == 0).then_some((true, ETH_LEN + 20))?
            }
            [0x86, 0xdd] => {
                let ip = frame.get(ETH_LEN..ETH_LEN + 40)?;
                (ip[0] >> 4 == 6 && ip[6] == 17).then_some((false, ETH_LEN + 40))?
            }
            _ => return None,
        };
        let udp = frame.get(udp_at..udp_at + UDP_LEN)?;
        let end = udp_at + usize::from(u16::from_be_bytes([udp[4], udp[5]]));
        (end <= frame.len() && end >= udp_at + UDP_LEN + ICRC_LEN).then_some(RunFrame {
            frame,
            runnable: !is_rc_flush(frame.get(udp_at + UDP_LEN).copied()),
            ipv4,
            udp_at,
            end,
        })
    }

    /// The headers (Ethernet to UDP).
    fn headers(&self) -> &[u8] {
        &self.frame[..self.udp_at + UDP_LEN]
    }

    /// The UDP payload without its ICRC.
    pub(crate) fn body(&self) -> &[u8] {
        &self.frame[self.udp_at + UDP_LEN..self.end - ICRC_LEN]
    }

    /// The ICRC as on the wire.
    pub(crate) fn icrc(&self) -> [u8; 4] {
        let mut c = [0u8; 4];
        c.copy_from_slice(&self.frame[self.end - ICRC_LEN..self.end]);
        c
    }

    /// The IPv4 Identification (`None` for IPv6).
    pub(crate) fn ipv4_id(&self) -> Option<u16> {
        self.ipv4.then(|| u16::from_be_bytes([self.frame[ETH_LEN + 4], self.frame[ETH_LEN + 5]]))
    }

    /// The IP packet's length up to the ICRC (what the ICRC's ID shift is computed for).
    pub(crate) fn icrc_covered_len(&self) -> usize {
        self.end - ICRC_LEN - ETH_LEN
    }
}

impl RunMember for RunFrame<'_> {
    fn payload_len(&self) -> usize {
        self.end.saturating_sub(self.udp_at + UDP_LEN)
    }

    /// The same Ethernet header, IP header but for lengths, checksum and ID, UDP ports; RC or
    /// UC both (bulk data: a UD datagram or a MAD answer goes alone, so a plain packet socket on
    /// the peer's end of a veth, which sees a GSO frame whole, still reads each one as sent).
    fn joins(&self, first: &Self) -> bool {
        let (a, b) = (self.frame, first.frame);
        let same = |r: Range<usize>| a[r.clone()] == b[r];
        self.runnable
            && first.runnable
            && self.resend_safe()
            && first.resend_safe()
            && self.ipv4 == first.ipv4
            && same(0..ETH_LEN)
            && if self.ipv4 {
                same(ETH_LEN..ETH_LEN + 2) && same(ETH_LEN + 6..ETH_LEN + 10) && same(ETH_LEN + 12..ETH_LEN + 20)
            } else {
                same(ETH_LEN..ETH_LEN + 4) && same(ETH_LEN + 6..ETH_LEN + 40)
            }
            && same(self.udp_at..self.udp_at + 4)
    }

    /// RC and UC: the receiver drops a PSN it has had.
    fn resend_safe(&self) -> bool {
        use roce_wire::bth::{Opcode, Transport};
        self.runnable
            && self
                .frame
                .get(self.udp_at + UDP_LEN)
                .is_some_and(|&op| matches!(Opcode::from(op).transport(), Transport::Rc | Transport::Uc))
    }
}

/// Whether a datagram whose BTH opcode is `op` is an RC FLUSH, which always goes alone: its
/// ICRC may be rxe's (the headers covered twice, `roce_cm::StackConfig::rxe_flush_icrc`), which
/// the per-segment IPv4 ID correction, linear in the standard ICRC's length, would break.
pub(crate) fn is_rc_flush(op: Option<u8>) -> bool {
    op == Some(u8::from(roce_wire::bth::Opcode::RcFlush))
}

/// The headers of a run of `first`'s kind carrying `payload` UDP payload bytes in all, and the
/// virtio header that has the kernel segment it into payloads of `first`'s length: written into
/// `hdr` (returns its length). The UDP checksum holds the pseudo-header sum (CHECKSUM_PARTIAL:
/// each segment's is completed where it is segmented or by the device); the IPv4 header
/// header checksum is the run's (`inet_gso_segment` computes each segment's own).
pub(crate) fn run_headers(first: &RunFrame<'_>, payload: usize, hdr: &mut [u8; 64]) -> (usize, [u8; VNET_HDR_LEN]) {
    let h = first.headers();
    let n = h.len();
    hdr[..n].copy_from_slice(h);
    let udp_len = (UDP_LEN + payload) as u16;
    let mut sum: u32 = 17 + u32::from(udp_len);
    let mut add = |b: &[u8]| {
        for w in b.chunks(2) {
            sum += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
        }
    };
    if first.ipv4 {
        hdr[ETH_LEN + 2..ETH_LEN + 4].copy_from_slice(&(udp_len + 20).to_be_bytes());
        add(&h[ETH_LEN + 12..ETH_LEN + 20]);
        // Right for the run as a whole too: a bridge with br_netfilter checks it
        // (br_validate_ipv4) before anything segments the frame.
        let sum = roce_wire::frame::ipv4_checksum(&hdr[ETH_LEN..ETH_LEN + 20]);
        hdr[ETH_LEN + 10..ETH_LEN + 12].copy_from_slice(&sum.to_be_bytes());
    } else {
        hdr[ETH_LEN + 4..ETH_LEN + 6].copy_from_slice(&udp_len.to_be_bytes());
        add(&h[ETH_LEN + 8..ETH_LEN + 40]);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let u = first.udp_at;
    hdr[u + 4..u + 6].copy_from_slice(&udp_len.to_be_bytes());
    hdr[u + 6..u + 8].copy_from_slice(&(sum as u16).to_be_bytes());
    let vnet = VnetHdr {
        flags: VIRTIO_NET_HDR_F_NEEDS_CSUM,
        gso_type: VIRTIO_NET_HDR_GSO_UDP_L4,
        hdr_len: n as u16,
        gso_size: first.payload_len() as u16,
        csum_start: u as u16,
        csum_offset: 6,
    };
    (n, vnet.to_bytes())
}

/// Why a frame read with its virtio header cannot be handed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SplitError {
    /// A GSO frame of another kind than UDP (a TCP stream's on the same interface), or whose
    /// headers are not Ethernet, IPv4/IPv6 and UDP: not RoCEv2, dropped.
    NotUdpGso,
}

/// Where a read frame's segments are: each segment `i` is `headers` then
/// `payload(i)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Segments {
    /// Ethernet to UDP (0: the frame is not GSO, one segment, taken whole).
    hdr_len: usize,
    gso_size: usize,
    len: usize,
    ipv4: bool,
}

impl Segments {
    /// How the frame `frame` read behind `vnet` splits.
    pub(crate) fn of(vnet: &[u8], frame: &[u8]) -> Result<Segments, SplitError> {
        let v = VnetHdr::from_bytes(vnet);
        let whole = Segments { hdr_len: 0, gso_size: frame.len().max(1), len: frame.len(), ipv4: false };
        match v.gso_type & !VIRTIO_NET_HDR_GSO_ECN {
            VIRTIO_NET_HDR_GSO_NONE => Ok(whole),
            VIRTIO_NET_HDR_GSO_UDP_L4 => {
                let (ipv4, hdr_len) = match frame.get(12..14) {
                    Some([0x08, 0x00]) => {
                        let ihl = usize::from(frame.get(ETH_LEN).copied().unwrap_or(0) & 0x0f) * 4;
                        (true, ETH_LEN + ihl + UDP_LEN)
                    }
                    Some([0x86, 0xdd]) if frame.get(ETH_LEN + 6) == Some(&17) => (false, ETH_LEN + 40 + UDP_LEN),
                    _ => return Err(SplitError::NotUdpGso),
                };
                let gso_size = usize::from(v.gso_size);
                if gso_size == 0 || frame.len() <= hdr_len || (ipv4 && hdr_len < ETH_LEN + 28) {
                    return Err(SplitError::NotUdpGso);
                }
                Ok(Segments { hdr_len, gso_size, len: frame.len(), ipv4 })
            }
            _ => Err(SplitError::NotUdpGso),
        }
    }

    /// How many segments.
    pub(crate) fn count(&self) -> usize {
        if self.hdr_len == 0 {
            1
        } else {
            (self.len - self.hdr_len).div_ceil(self.gso_size)
        }
    }

    /// Segment `i`'s length as a frame.
    pub(crate) fn frame_len(&self, i: usize) -> usize {
        if self.hdr_len == 0 {
            return self.len;
        }
        let start = self.hdr_len + i * self.gso_size;
        self.hdr_len + (self.len - start).min(self.gso_size)
    }

    /// Write segment `i` of `frame` into `out` (at least [`Segments::frame_len`] bytes) as the
    /// sending kernel's segmentation would have put it on the wire: the lengths its own, the
    /// IPv4 ID the first's plus `i` and the header checksum computed; the UDP checksum 0 (the
    /// ICRC covers the datagram, and 0 is what rxe sends).
    pub(crate) fn write(&self, frame: &[u8], i: usize, out: &mut [u8]) -> usize {
        let n = self.frame_len(i);
        if self.hdr_len == 0 {
            out[..n].copy_from_slice(frame);
            return n;
        }
        let h = self.hdr_len;
        let start = h + i * self.gso_size;
        out[..h].copy_from_slice(&frame[..h]);
        out[h..n].copy_from_slice(&frame[start..start + n - h]);
        let udp_len = (n - h + UDP_LEN) as u16;
        if self.ipv4 {
            let ip_len = (n - ETH_LEN) as u16;
            out[ETH_LEN + 2..ETH_LEN + 4].copy_from_slice(&ip_len.to_be_bytes());
            let id = u16::from_be_bytes([frame[ETH_LEN + 4], frame[ETH_LEN + 5]]).wrapping_add(i as u16);
            out[ETH_LEN + 4..ETH_LEN + 6].copy_from_slice(&id.to_be_bytes());
            out[ETH_LEN + 10..ETH_LEN + 12].copy_from_slice(&[0, 0]);
            let sum = roce_wire::frame::ipv4_checksum(&out[ETH_LEN..h - UDP_LEN]);
            out[ETH_LEN + 10..ETH_LEN + 12].copy_from_slice(&sum.to_be_bytes());
        } else {
            out[ETH_LEN + 4..ETH_LEN + 6].copy_from_slice(&udp_len.to_be_bytes());
        }
        out[h - 4..h - 2].copy_from_slice(&udp_len.to_be_bytes());
        out[h - 2..h].copy_from_slice(&[0, 0]);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gso::split_runs;
    use std::net::IpAddr;

    fn frames(src: &str, dst: &str, lens: &[usize]) -> Vec<Vec<u8>> {
        let (a, b): (IpAddr, IpAddr) = (src.parse().unwrap(), dst.parse().unwrap());
        lens.iter()
            .enumerate()
            .map(|(i, &n)| crate::udp::tests::rc_engine_frame(a, b, 0xc001, &vec![i as u8; n]))
            .collect()
    }

    /// A run's combined frame, split as the receiving side does, gives back every frame whose
    /// ICRC holds once its IPv4 ID is what the kernel counts up to (the sender corrects the
    /// ICRC for it); IPv6 has no ID and comes back byte for byte but for the UDP checksum.
    #[test]
    fn a_run_splits_back_into_its_frames() {
        for (a, b) in [("10.0.0.1", "10.0.0.2"), ("fd00::1", "fd00::2")] {
            let fs = frames(a, b, &[1000, 1000, 1000, 400]);
            let run: Vec<RunFrame<'_>> = fs.iter().map(|f| RunFrame::classify(f).unwrap()).collect();
            let mut runs = [(0, 0); 8];
            assert_eq!(split_runs(&run, true, &mut runs), 1);
            let payload: usize = run.iter().map(RunMember::payload_len).sum();
            let mut hdr = [0u8; 64];
            let (n, vnet) = run_headers(&run[0], payload, &mut hdr);
            if a.contains('.') {
                let sum = u16::from_be_bytes([hdr[24], hdr[25]]);
                assert_eq!(roce_wire::frame::ipv4_checksum(&hdr[14..34]), sum, "the run's IPv4 header checksum holds");
            }
            // The combined frame, ICRCs corrected as RawSocket::send_batch does.
            let mut big = hdr[..n].to_vec();
            let mut fix = crate::gso::IdCorrection::default();
            let first_id = run[0].ipv4_id();
            for (j, r) in run.iter().enumerate() {
                big.extend_from_slice(r.body());
                let icrc = match (first_id, r.ipv4_id()) {
                    (Some(f), Some(have)) => fix.icrc(r.icrc(), r.icrc_covered_len(), have, f.wrapping_add(j as u16)),
                    _ => r.icrc(),
                };
                big.extend_from_slice(&icrc);
            }
            let seg = Segments::of(&vnet, &big).unwrap();
            assert_eq!(seg.count(), 4);
            for (i, f) in fs.iter().enumerate() {
                let mut out = vec![0u8; 2048];
                let m = seg.write(&big, i, &mut out);
                let parsed = roce_wire::frame::parse(&out[..m]).unwrap_or_else(|e| panic!("{a} segment {i}: {e}"));
                assert_eq!(parsed.repr.payload.len(), if i < 3 { 1000 } else { 400 });
                if a.contains(':') {
                    assert_eq!(&out[..m], &f[..], "IPv6 segment {i}");
                } else {
                    assert_eq!(u16::from_be_bytes([out[18], out[19]]), i as u16);
                }
            }
        }
    }

    /// Frames of other destinations, or that cannot be a run member, are not joined.
    /// An RC FLUSH goes alone on both transports: its ICRC may be rxe's, which the ID
    /// correction of a run's later segments would break.
    #[test]
    fn a_flush_never_joins_a_run() {
        let mut fs = frames("10.0.0.1", "10.0.0.2", &[32, 32, 32]);
        let at = ETH_LEN + 20 + UDP_LEN;
        for f in &mut fs[1..] {
            f[at] = u8::from(roce_wire::bth::Opcode::RcFlush);
        }
        let run: Vec<RunFrame<'_>> = fs.iter().map(|f| RunFrame::classify(f).unwrap()).collect();
        assert!(!run[1].joins(&run[0]) && !run[2].joins(&run[1]));
        // The udp transport's frames leave from port 4791.
        let local: IpAddr = "10.0.0.1".parse().unwrap();
        let d: Vec<_> = (0..3u8)
            .map(|i| {
                let mut f = crate::udp::tests::rc_engine_frame(local, "10.0.0.2".parse().unwrap(), 4791, &[i; 32]);
                if i > 0 {
                    f[at] = u8::from(roce_wire::bth::Opcode::RcFlush);
                }
                let mac = f[6..12].try_into().unwrap();
                crate::udp::classify(&f, local, mac).unwrap()
            })
            .collect();
        use crate::gso::RunMember;
        assert!(!d[1].joins(&d[0]) && !d[2].joins(&d[1]) && d[1].alone && !d[0].alone);
    }

    #[test]
    fn only_like_frames_join() {
        let mut fs = frames("10.0.0.1", "10.0.0.2", &[100, 100]);
        fs.extend(frames("10.0.0.1", "10.0.0.3", &[100]));
        let run: Vec<RunFrame<'_>> = fs.iter().map(|f| RunFrame::classify(f).unwrap()).collect();
        assert!(run[1].joins(&run[0]) && !run[2].joins(&run[0]));
        assert!(RunFrame::classify(&fs[0][..40]).is_none());
        let mut frag = fs[0].clone();
        frag[20] = 0x20; // MF
        assert!(RunFrame::classify(&frag).is_none());
        let tcp = VnetHdr { gso_type: 1, gso_size: 1448, ..VnetHdr::default() }.to_bytes();
        assert_eq!(Segments::of(&tcp, &fs[0]), Err(SplitError::NotUdpGso));
        // A UD datagram (a MAD answer) goes alone: a plain packet socket on the peer's end of a
        // veth sees a GSO frame whole.
        let ud = |n: u8| {
            crate::udp::tests::engine_frame(
                "198.18.0.1".parse().unwrap(),
                "198.18.0.2".parse().unwrap(),
                0xc001,
                &[n; 300],
            )
        };
        let (u1, u2) = (ud(1), ud(2));
        assert!(!RunFrame::of(&u2).joins(&RunFrame::of(&u1)), "UD frames never form a run");
    }
}
