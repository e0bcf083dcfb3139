//! The extension headers that follow the BTH, chosen by the opcode.
//!
//! Wire order [IBA 9.2 table 38]: DETH, XRCETH, FETH, RETH, AtomicETH, AETH, AtomicAckETH,
//! ImmDt, IETH. No opcode carries both DETH and XRCETH; the XRCETH precedes every header of
//! an XRC request, FETH included (IBA 1.5 annex A19's XRC FLUSH, `BTH | XRCETH | FETH | RETH`,
//! as quoted on linux-rdma, 2022-01-25, "RDMA/rxe: Add RDMA FLUSH operation").
//! (RDETH belongs to RD, whose opcodes this crate keeps as unknown.)

use crate::error::Result;
use crate::{aeth, atomic_ack_eth, atomic_eth, deth, feth, ieth, immdt, reth, xrceth};

/// A set of extension headers, as a bit mask (XRCETH took bit 8: bits 0–7 kept their values).
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ExtMask(pub u16);

impl ExtMask {
    /// No extension header.
    pub const NONE: ExtMask = ExtMask(0);
    /// DETH (UD).
    pub const DETH: ExtMask = ExtMask(1 << 0);
    /// FETH (RC FLUSH).
    pub const FETH: ExtMask = ExtMask(1 << 1);
    /// RETH.
    pub const RETH: ExtMask = ExtMask(1 << 2);
    /// AtomicETH.
    pub const ATOMIC_ETH: ExtMask = ExtMask(1 << 3);
    /// AETH.
    pub const AETH: ExtMask = ExtMask(1 << 4);
    /// AtomicAckETH.
    pub const ATOMIC_ACK_ETH: ExtMask = ExtMask(1 << 5);
    /// ImmDt.
    pub const IMMDT: ExtMask = ExtMask(1 << 6);
    /// IETH.
    pub const IETH: ExtMask = ExtMask(1 << 7);
    /// XRCETH (every XRC request).
    pub const XRCETH: ExtMask = ExtMask(1 << 8);
    /// Every bit that names a header.
    const KNOWN: u16 = (1 << 9) - 1;

    /// Both sets.
    pub const fn union(self, other: ExtMask) -> ExtMask {
        ExtMask(self.0 | other.0)
    }
    /// Whether every header of `other` is in `self`.
    pub const fn contains(self, other: ExtMask) -> bool {
        self.0 & other.0 == other.0
    }
    /// Total length of the headers in the set (one table lookup: every frame in and out asks,
    /// some several times). Bits that name no header count for nothing.
    pub const fn len(self) -> usize {
        LEN_BY_MASK[(self.0 & Self::KNOWN) as usize] as usize
    }

    /// [`ExtMask::len`] summed header by header (the table's source).
    const fn len_by_headers(self) -> usize {
        let mut n = 0;
        if self.contains(Self::DETH) {
            n += deth::LEN;
        }
        if self.contains(Self::XRCETH) {
            n += xrceth::LEN;
        }
        if self.contains(Self::FETH) {
            n += feth::LEN;
        }
        if self.contains(Self::RETH) {
            n += reth::LEN;
        }
        if self.contains(Self::ATOMIC_ETH) {
            n += atomic_eth::LEN;
        }
        if self.contains(Self::AETH) {
            n += aeth::LEN;
        }
        if self.contains(Self::ATOMIC_ACK_ETH) {
            n += atomic_ack_eth::LEN;
        }
        if self.contains(Self::IMMDT) {
            n += immdt::LEN;
        }
        if self.contains(Self::IETH) {
            n += ieth::LEN;
        }
        n
    }
    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// [`ExtMask::len`] of every mask of known bits (all nine headers make 80 bytes: a byte
/// holds it).
const LEN_BY_MASK: [u8; ExtMask::KNOWN as usize + 1] = {
    let mut t = [0u8; ExtMask::KNOWN as usize + 1];
    let mut m = 0;
    while m < t.len() {
        t[m] = ExtMask(m as u16).len_by_headers() as u8;
        m += 1;
    }
    t
};

/// The extension headers of one packet; each is present iff the opcode carries it.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ExtHeaders {
    /// Datagram ETH.
    pub deth: Option<deth::Repr>,
    /// XRC ETH.
    pub xrceth: Option<xrceth::Repr>,
    /// Flush ETH.
    pub feth: Option<feth::Repr>,
    /// RDMA ETH.
    pub reth: Option<reth::Repr>,
    /// Atomic ETH.
    pub atomic_eth: Option<atomic_eth::Repr>,
    /// ACK ETH.
    pub aeth: Option<aeth::Repr>,
    /// Atomic ACK ETH.
    pub atomic_ack_eth: Option<atomic_ack_eth::Repr>,
    /// Immediate data.
    pub immdt: Option<immdt::Repr>,
    /// Invalidate ETH.
    pub ieth: Option<ieth::Repr>,
}

impl ExtHeaders {
    /// Only a DETH (UD SEND_ONLY).
    pub const fn deth(qkey: u32, src_qp: u32) -> ExtHeaders {
        ExtHeaders {
            deth: Some(deth::Repr::new(qkey, src_qp)),
            xrceth: None,
            feth: None,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            immdt: None,
            ieth: None,
        }
    }

    /// The set of headers present.
    pub const fn mask(&self) -> ExtMask {
        // Branch-free (every frame sent asks): one bit per present header.
        ExtMask(
            (self.deth.is_some() as u16)
                | ((self.feth.is_some() as u16) << 1)
                | ((self.reth.is_some() as u16) << 2)
                | ((self.atomic_eth.is_some() as u16) << 3)
                | ((self.aeth.is_some() as u16) << 4)
                | ((self.atomic_ack_eth.is_some() as u16) << 5)
                | ((self.immdt.is_some() as u16) << 6)
                | ((self.ieth.is_some() as u16) << 7)
                | ((self.xrceth.is_some() as u16) << 8),
        )
    }

    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        self.mask().len()
    }

    /// Parse the headers in `mask` from the start of `buf`; returns them and their length.
    /// Error offsets are relative to `buf`.
    pub fn parse(mask: ExtMask, buf: &[u8]) -> Result<(ExtHeaders, usize)> {
        let mut h = ExtHeaders::default();
        let mut at = 0;
        // Each header: parse at `at` (offset errors shifted), then advance.
        macro_rules! take {
            ($bit:expr, $slot:ident, $m:ident) => {
                if mask.contains($bit) {
                    let rest = buf.get(at..).unwrap_or(&[]);
                    h.$slot = Some($m::Repr::parse_bytes(rest).map_err(|e| e.add_offset(at))?);
                    at += $m::LEN;
                }
            };
        }
        take!(ExtMask::DETH, deth, deth);
        take!(ExtMask::XRCETH, xrceth, xrceth);
        take!(ExtMask::FETH, feth, feth);
        take!(ExtMask::RETH, reth, reth);
        take!(ExtMask::ATOMIC_ETH, atomic_eth, atomic_eth);
        take!(ExtMask::AETH, aeth, aeth);
        take!(ExtMask::ATOMIC_ACK_ETH, atomic_ack_eth, atomic_ack_eth);
        take!(ExtMask::IMMDT, immdt, immdt);
        take!(ExtMask::IETH, ieth, ieth);
        Ok((h, at))
    }

    /// Emit the present headers in wire order; `buf` must hold `buffer_len()` bytes.
    /// Returns the bytes written.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let mut at = 0;
        macro_rules! put {
            ($slot:ident, $m:ident) => {
                if let Some(r) = &self.$slot {
                    r.emit_bytes(&mut buf[at..at + $m::LEN]);
                    at += $m::LEN;
                }
            };
        }
        put!(deth, deth);
        put!(xrceth, xrceth);
        put!(feth, feth);
        put!(reth, reth);
        put!(atomic_eth, atomic_eth);
        put!(aeth, aeth);
        put!(atomic_ack_eth, atomic_ack_eth);
        put!(immdt, immdt);
        put!(ieth, ieth);
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bth::Opcode;
    use crate::{Error, Layer};

    #[test]
    fn every_opcode_parses_its_headers_and_truncation_names_the_header() {
        let buf = [0xa5u8; 64];
        for op in 0..=255u8 {
            let mask = Opcode::from(op).ext_headers();
            let (h, n) = ExtHeaders::parse(mask, &buf).unwrap();
            assert_eq!(n, mask.len());
            assert_eq!(h.mask(), mask);
            let mut out = [0u8; 64];
            assert_eq!(h.emit(&mut out), n);
            assert_eq!(out[..n], buf[..n]);
            for cut in 0..n {
                let e = ExtHeaders::parse(mask, &buf[..cut]).unwrap_err();
                assert!(matches!(e, Error::Len { .. }));
                assert!(e.offset() <= cut);
            }
        }
        let e = ExtHeaders::parse(Opcode::RcRdmaWriteOnlyWithImmediate.ext_headers(), &buf[..18]).unwrap_err();
        assert_eq!(e, Error::len(Layer::ImmDt, 16, 4, 2));
        let e = ExtHeaders::parse(Opcode::XrcRdmaWriteOnlyWithImmediate.ext_headers(), &buf[..2]).unwrap_err();
        assert_eq!(e, Error::len(Layer::Xrceth, 0, 4, 2));
        let e = ExtHeaders::parse(Opcode::XrcCompareSwap.ext_headers(), &buf[..10]).unwrap_err();
        assert_eq!(e, Error::len(Layer::AtomicEth, 4, 28, 6));
    }

    /// The XRCETH comes right after the BTH, then the RC opcode's headers in their order.
    #[test]
    fn xrceth_comes_first() {
        let buf: [u8; 24] = core::array::from_fn(|i| i as u8);
        let (h, n) = ExtHeaders::parse(Opcode::XrcRdmaWriteOnlyWithImmediate.ext_headers(), &buf).unwrap();
        assert_eq!(n, 24);
        assert_eq!(h.xrceth, Some(xrceth::Repr { reserved: 0, xrc_srq: 0x01_0203 }));
        assert_eq!(h.reth.map(|r| r.va), Some(0x0405_0607_0809_0a0b));
        assert_eq!(h.immdt.map(|i| i.imm_data), Some(0x1415_1617));
        let (h, n) = ExtHeaders::parse(Opcode::XrcSendOnlyWithInvalidate.ext_headers(), &buf).unwrap();
        assert_eq!((n, h.xrceth.map(|x| x.xrc_srq), h.ieth.map(|i| i.rkey)), (8, Some(0x01_0203), Some(0x0405_0607)));
        // A response carries none.
        let (h, _) = ExtHeaders::parse(Opcode::XrcAcknowledge.ext_headers(), &buf).unwrap();
        assert_eq!((h.xrceth, h.aeth.map(|a| a.msn)), (None, Some(0x01_0203)));
    }

    #[test]
    fn lengths_of_every_mask_never_panic() {
        assert_eq!(ExtMask(0x1ff).len(), 80);
        // Bits that name no header count for nothing (and index nothing).
        assert_eq!(ExtMask(u16::MAX).len(), 80);
        assert_eq!(ExtMask(0xfe00).len(), 0);
        assert_eq!(ExtMask::XRCETH.len(), xrceth::LEN);
    }
}
