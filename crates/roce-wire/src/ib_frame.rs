//! A whole native InfiniBand packet, as `LINKTYPE_INFINIBAND` (247) captures and ERF
//! InfiniBand records carry it: LRH ▶ GRH (when LNH says global) ▶ BTH ▶ extension headers
//! ▶ payload ▶ pad ▶ ICRC, then the VCRC; raw packets (LNH 0 and 1) carry their datagram and
//! the VCRC only [IBA 7.7, 7.8, 8.3, 9.2].
//!
//! The LRH's PktLen says where the packet ends (its 4-byte words cover LRH through ICRC);
//! the VCRC follows; bytes after it are a trailer the capture added. Both CRCs are computed
//! and returned beside the values found: a bad CRC is a verdict, not a parse error.

use crate::bth::{self, BTH_LEN};
use crate::error::{ContentError, Error, Layer, Result};
use crate::ext::ExtHeaders;
use crate::icrc::{self, ICRC_LEN};
use crate::lrh::{self, Lnh};
use crate::{grh, vcrc};

/// What follows the LRH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IbBody<'a> {
    /// An IBA transport packet (LNH 2 or 3).
    Transport(Transport<'a>),
    /// A raw packet (LNH 0 or 1): its bytes after the LRH through PktLen, no ICRC.
    Raw(&'a [u8]),
}

/// The transport part of an IBA packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transport<'a> {
    /// The BTH.
    pub bth: bth::Repr,
    /// The extension headers the opcode carries.
    pub ext: ExtHeaders,
    /// The payload (pad excluded).
    pub payload: &'a [u8],
    /// The pad bytes (BTH PadCnt of them).
    pub pad: &'a [u8],
    /// The ICRC found.
    pub icrc: u32,
    /// The ICRC computed with IB's masks.
    pub icrc_expected: u32,
}

impl Transport<'_> {
    /// Whether the ICRC is right.
    pub const fn icrc_ok(&self) -> bool {
        self.icrc == self.icrc_expected
    }
}

/// Where each layer starts in the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IbOffsets {
    /// The BTH (0 for a raw packet).
    pub bth: usize,
    /// The payload (after the extension headers; after the LRH for a raw packet).
    pub payload: usize,
    /// The VCRC (PktLen × 4).
    pub vcrc: usize,
}

/// A parsed native IB packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IbFrame<'a> {
    /// The LRH.
    pub lrh: lrh::Repr,
    /// The GRH, for LNH "IBA global".
    pub grh: Option<grh::Repr>,
    /// The transport packet or raw datagram.
    pub body: IbBody<'a>,
    /// The VCRC found.
    pub vcrc: u16,
    /// The VCRC computed over LRH through ICRC.
    pub vcrc_expected: u16,
    /// Bytes after the VCRC.
    pub trailer: &'a [u8],
    /// Layer offsets.
    pub offsets: IbOffsets,
}

impl<'a> IbFrame<'a> {
    /// Whether the VCRC is right.
    pub const fn vcrc_ok(&self) -> bool {
        self.vcrc == self.vcrc_expected
    }

    /// What a receiving port would drop the packet for: a bad VCRC (checked by the link
    /// layer, first), else a bad ICRC; `None` when both are right.
    pub const fn crc_error(&self) -> Option<Error> {
        if !self.vcrc_ok() {
            let kind = ContentError::VcrcMismatch { found: self.vcrc, expected: self.vcrc_expected };
            return Some(Error::content(Layer::Vcrc, self.offsets.vcrc, kind));
        }
        match &self.body {
            IbBody::Transport(t) if !t.icrc_ok() => {
                let kind = ContentError::IcrcMismatch { found: t.icrc, expected: t.icrc_expected };
                Some(Error::content(Layer::Icrc, self.offsets.vcrc - ICRC_LEN, kind))
            }
            _ => None,
        }
    }

    /// The transport part, when this is an IBA packet.
    pub const fn transport(&self) -> Option<Transport<'a>> {
        match self.body {
            IbBody::Transport(t) => Some(t),
            IbBody::Raw(_) => None,
        }
    }
}

/// Parse a native IB packet from the LRH on. Errors name the layer and the byte.
pub fn parse(buf: &[u8]) -> Result<IbFrame<'_>> {
    let lrh = lrh::Repr::parse_bytes(buf)?;
    let end = lrh.packet_bytes();
    if end < lrh::LEN || end + vcrc::LEN > buf.len() {
        let kind = ContentError::PacketLength { claimed: end + vcrc::LEN, available: buf.len() };
        return Err(Error::content(Layer::Lrh, lrh::field::PKT_LEN.start, kind));
    }
    let packet = &buf[..end];
    let vcrc = vcrc::from_wire([buf[end], buf[end + 1]]);
    let vcrc_expected = vcrc::compute(packet);
    let trailer = &buf[end + vcrc::LEN..];
    let mut at = lrh::LEN;
    let mut grh = None;
    let body = if !lrh.lnh.is_iba() {
        IbBody::Raw(&packet[at..])
    } else {
        if lrh.lnh == Lnh::IbaGlobal {
            grh = Some(grh::Repr::parse_bytes(&packet[at..]).map_err(|e| e.add_offset(at))?);
            at += grh::LEN;
        }
        let bth_at = at;
        let bth = bth::Repr::parse_bytes(&packet[at..]).map_err(|e| e.add_offset(at))?;
        at += BTH_LEN;
        let (ext, n) = ExtHeaders::parse(bth.opcode.ext_headers(), &packet[at..]).map_err(|e| e.add_offset(at))?;
        at += n;
        if packet.len() < at + ICRC_LEN {
            return Err(Error::len(Layer::Icrc, at, ICRC_LEN, packet.len() - at));
        }
        let icrc_at = end - ICRC_LEN;
        let payload_and_pad = icrc_at - at;
        let pad = usize::from(bth.pad_count);
        if pad > payload_and_pad {
            let kind = ContentError::BadPad { pad: bth.pad_count, payload_and_pad };
            return Err(Error::content(Layer::Bth, bth_at + 1, kind));
        }
        let icrc = icrc::from_wire([packet[icrc_at], packet[icrc_at + 1], packet[icrc_at + 2], packet[icrc_at + 3]]);
        let icrc_expected = icrc::compute_native(&packet[..icrc_at], grh.is_some())?;
        let payload = &packet[at..icrc_at - pad];
        let offsets = IbOffsets { bth: bth_at, payload: at, vcrc: end };
        let t = Transport { bth, ext, payload, pad: &packet[icrc_at - pad..icrc_at], icrc, icrc_expected };
        return Ok(IbFrame { lrh, grh, body: IbBody::Transport(t), vcrc, vcrc_expected, trailer, offsets });
    };
    let offsets = IbOffsets { bth: 0, payload: lrh::LEN, vcrc: end };
    Ok(IbFrame { lrh, grh, body, vcrc, vcrc_expected, trailer, offsets })
}

/// The fields of a native IB transport packet to emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IbFrameRepr<'a> {
    /// The LRH (`pkt_len` is what [`IbFrameRepr::emit`] writes; [`IbFrameRepr::fill`] sets it).
    pub lrh: lrh::Repr,
    /// The GRH (LNH must say global for a parser to find it).
    pub grh: Option<grh::Repr>,
    /// The BTH.
    pub bth: bth::Repr,
    /// The extension headers.
    pub ext: ExtHeaders,
    /// The payload.
    pub payload: &'a [u8],
    /// The pad bytes (their count must equal `bth.pad_count`).
    pub pad: &'a [u8],
    /// The ICRC to write; `None`: computed.
    pub icrc: Option<u32>,
    /// The VCRC to write; `None`: computed.
    pub vcrc: Option<u16>,
}

impl IbFrameRepr<'_> {
    /// Length from the LRH through the ICRC.
    pub fn packet_len(&self) -> usize {
        lrh::LEN
            + self.grh.map_or(0, |_| grh::LEN)
            + BTH_LEN
            + self.ext.buffer_len()
            + self.payload.len()
            + self.pad.len()
            + ICRC_LEN
    }

    /// Length on the wire, VCRC included.
    pub fn buffer_len(&self) -> usize {
        self.packet_len() + vcrc::LEN
    }

    /// Set the length fields from the contents: LRH PktLen, GRH PayLen, LNH and the pad count.
    pub fn fill(&mut self) {
        let len = self.packet_len();
        self.lrh.pkt_len = (len / 4) as u16;
        self.lrh.lnh = if self.grh.is_some() { Lnh::IbaGlobal } else { Lnh::IbaLocal };
        if let Some(g) = &mut self.grh {
            g.pay_len = (len - lrh::LEN - grh::LEN) as u16;
        }
        self.bth.pad_count = self.pad.len() as u8;
    }

    /// Write the packet into the start of `buf`; returns its length. A length error when
    /// `buf` is shorter than [`IbFrameRepr::buffer_len`] or the pad is longer than 3 bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let n = self.buffer_len();
        if buf.len() < n {
            return Err(Error::len(Layer::Lrh, 0, n, buf.len()));
        }
        if self.pad.len() > 3 {
            let kind = ContentError::BadPad { pad: self.pad.len() as u8, payload_and_pad: self.payload.len() };
            return Err(Error::content(Layer::Bth, 1, kind));
        }
        self.lrh.emit_bytes(&mut buf[..lrh::LEN]);
        let mut at = lrh::LEN;
        if let Some(g) = &self.grh {
            g.emit_bytes(&mut buf[at..at + grh::LEN]);
            at += grh::LEN;
        }
        self.bth.emit_bytes(&mut buf[at..at + BTH_LEN]);
        at += BTH_LEN;
        at += self.ext.emit(&mut buf[at..]);
        buf[at..at + self.payload.len()].copy_from_slice(self.payload);
        at += self.payload.len();
        buf[at..at + self.pad.len()].copy_from_slice(self.pad);
        at += self.pad.len();
        let icrc = match self.icrc {
            Some(v) => v,
            None => icrc::compute_native(&buf[..at], self.grh.is_some())?,
        };
        buf[at..at + ICRC_LEN].copy_from_slice(&icrc::to_wire(icrc));
        at += ICRC_LEN;
        let vcrc = self.vcrc.unwrap_or_else(|| vcrc::compute(&buf[..at]));
        buf[at..at + vcrc::LEN].copy_from_slice(&vcrc::to_wire(vcrc));
        Ok(at + vcrc::LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bth::Opcode;

    fn ud_mad<'a>(payload: &'a [u8], global: bool) -> IbFrameRepr<'a> {
        let lrh = lrh::Repr { vl: 0, sl: 0, dlid: 1, slid: 3, ..lrh::Repr::default() };
        let grh = global.then(|| grh::Repr {
            ip_version: 6,
            next_header: grh::NEXT_HEADER_IBA,
            hop_limit: 1,
            sgid: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3],
            dgid: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            ..grh::Repr::default()
        });
        let bth = bth::Repr::new(Opcode::UdSendOnly, 1, 7);
        let mut r = IbFrameRepr {
            lrh,
            grh,
            bth,
            ext: ExtHeaders::deth(crate::GSI_QKEY, 1),
            payload,
            pad: &[],
            icrc: None,
            vcrc: None,
        };
        r.fill();
        r
    }

    #[test]
    fn emits_and_parses_local_and_global_packets() {
        let mad = [0x5au8; 256];
        for global in [false, true] {
            let r = ud_mad(&mad, global);
            let mut buf = [0u8; 400];
            let n = r.emit(&mut buf).unwrap();
            assert_eq!(n, if global { 8 + 40 + 12 + 8 + 256 + 4 + 2 } else { 8 + 12 + 8 + 256 + 4 + 2 });
            let f = parse(&buf[..n]).unwrap();
            assert_eq!(f.lrh, r.lrh);
            assert_eq!(f.grh, r.grh);
            assert!(f.vcrc_ok());
            let t = f.transport().unwrap();
            assert!(t.icrc_ok());
            assert_eq!((t.bth, t.ext, t.payload), (r.bth, r.ext, &mad[..]));
            assert!(f.trailer.is_empty());
            assert_eq!(f.crc_error(), None);
            // A changed VL keeps the ICRC but not the VCRC.
            buf[0] ^= 0x30;
            let f = parse(&buf[..n]).unwrap();
            assert!(f.transport().unwrap().icrc_ok() && !f.vcrc_ok());
            assert_eq!(f.crc_error().map(|e| (e.layer(), e.offset())), Some((Layer::Vcrc, n - 2)));
            // A changed payload byte breaks both.
            buf[n - 20] ^= 1;
            let f = parse(&buf[..n]).unwrap();
            assert!(!f.transport().unwrap().icrc_ok() && !f.vcrc_ok());
        }
    }

    #[test]
    fn lengths_are_typed_errors() {
        let mad = [0u8; 24];
        let r = ud_mad(&mad, true);
        let mut buf = [0u8; 200];
        let n = r.emit(&mut buf).unwrap();
        for cut in 0..n {
            let e = parse(&buf[..cut]).unwrap_err();
            let want = if cut < 8 { (Layer::Lrh, 0) } else { (Layer::Lrh, 4) };
            assert_eq!((e.layer(), e.offset()), want, "cut at {cut}");
        }
        // PktLen too small for the GRH: the GRH is cut short at byte 8.
        let mut small = buf;
        small[4..6].copy_from_slice(&4u16.to_be_bytes());
        let e = parse(&small[..n]).unwrap_err();
        assert_eq!((e.layer(), e.offset()), (Layer::Grh, 8));
        // Trailer after the VCRC is kept.
        let f = parse(&buf[..n + 3]).unwrap();
        assert_eq!(f.trailer.len(), 3);
        // A raw packet: no ICRC.
        let mut raw = [0u8; 8 + 12 + 2];
        lrh::Repr { lnh: Lnh::IpNonIba, pkt_len: 5, ..lrh::Repr::default() }.emit_bytes(&mut raw[..8]);
        let v = vcrc::compute(&raw[..20]);
        raw[20..].copy_from_slice(&vcrc::to_wire(v));
        let f = parse(&raw).unwrap();
        assert!(matches!(f.body, IbBody::Raw(b) if b.len() == 12) && f.vcrc_ok());
    }

    /// Two packets of a real fabric whose CRCs hardware computed ([`crate::golden`]): both
    /// ICRC forms (VL masked; whole LRH and GRH fields masked) and the VCRC agree with them,
    /// byte order included.
    #[test]
    fn crcs_agree_with_real_hardware() {
        let (local, global) = (crate::golden::IB_DAG_RC_ACK, crate::golden::IB_DAG_UD_MULTICAST_GRH);
        for (bytes, grh) in [(&local[..], false), (&global[..], true)] {
            let f = parse(bytes).unwrap();
            assert_eq!(f.grh.is_some(), grh);
            let t = f.transport().unwrap();
            assert!(t.icrc_ok(), "ICRC 0x{:08x}, computed 0x{:08x}", t.icrc, t.icrc_expected);
            assert!(f.vcrc_ok(), "VCRC 0x{:04x}, computed 0x{:04x}", f.vcrc, f.vcrc_expected);
            assert_eq!(f.crc_error(), None);
        }
        assert_eq!(parse(&local).unwrap().transport().unwrap().icrc, 0x5055_03a8);
        assert_eq!(parse(&local).unwrap().vcrc, 0x8130);
    }
}
