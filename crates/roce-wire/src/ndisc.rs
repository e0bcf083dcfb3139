//! IPv6 neighbour discovery: Neighbor Solicitation (135) and Neighbor Advertisement (136)
//! with their link-layer address options [RFC 4861 §4.3, §4.4, §4.6.1], convertible to and
//! from smoltcp's `wire::NdiscRepr`, plus the solicited-node multicast address and its MAC.
//!
//! A RoCEv2 peer on an IPv6 GID resolves the requester's address with NS/NA before it can
//! answer (protocol.md §1.9).
//!
//! | Off | Size | NS (135) | NA (136) |
//! |---|---|---|---|
//! | 0 | 1 | Type 135 | Type 136 |
//! | 1 | 1 | Code 0 | Code 0 |
//! | 2 | 2 | Checksum | Checksum |
//! | 4 | 4 | Reserved | R(31) S(30) O(29), Reserved (28:0) |
//! | 8 | 16 | Target Address | Target Address |
//! | 24 | … | Options | Options |
//!
//! Options are type (1), length (1, in units of 8 bytes, never 0), data. The link-layer
//! address options for Ethernet are 8 bytes: type 1 (source) or 2 (target), length 1, MAC.
//!
//! ## Representation
//! [`NdiscMessage`] keeps every byte: the flags word whole (with its reserved bits), the
//! code, the Ethernet link-layer address option when it is the *first* option and of the
//! kind that belongs to the message (source for NS, target for NA) as `lladdr`, and all other
//! option bytes raw in `options` (for example the nonce option Linux adds to DAD
//! solicitations, RFC 7527). Emitting writes `lladdr` first, then `options`, so a parsed
//! message re-emits byte for byte. smoltcp's `NdiscRepr` drops the reserved bits and unknown
//! options, which is why it is not the stored form; [`NdiscMessage::to_smoltcp`] and
//! [`NdiscMessage::from_smoltcp`] convert.
//!
//! The checksum is the ICMPv6 checksum with the IPv6 pseudo-header, so parse and emit take
//! the IPv6 source and destination; parsing verifies it ([`ContentError::Checksum`], offset 2).

use core::fmt;
use core::net::Ipv6Addr;

use crate::error::{ContentError, Error, Layer, Result};
use crate::field::{array, be32, put16, put32};
use crate::mld::icmpv6_checksum;

pub use smoltcp::wire::{NdiscNeighborFlags, NdiscRepr, RawHardwareAddress};

/// Byte ranges of NS/NA messages and of an option (relative to the option).
pub mod field {
    #![allow(missing_docs)]
    use crate::field::Field;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Field = 2..4;
    /// Reserved (NS) / flags and reserved (NA).
    pub const FLAGS: Field = 4..8;
    pub const TARGET_ADDR: Field = 8..24;
    pub const OPTIONS: usize = 24;
    pub const OPT_TYPE: usize = 0;
    pub const OPT_LEN: usize = 1;
    pub const OPT_LLADDR: Field = 2..8;
}

/// Length of an NS/NA message without options.
pub const HEADER_LEN: usize = field::OPTIONS;
/// Length of an Ethernet link-layer address option.
pub const LLADDR_OPT_LEN: usize = 8;
/// Option type: Source Link-Layer Address.
pub const OPT_SOURCE_LLADDR: u8 = 1;
/// Option type: Target Link-Layer Address.
pub const OPT_TARGET_LLADDR: u8 = 2;
/// Option type: Nonce (RFC 7527, Linux DAD).
pub const OPT_NONCE: u8 = 14;
/// ICMPv6 type of a Neighbor Solicitation.
pub const TYPE_NS: u8 = 135;
/// ICMPv6 type of a Neighbor Advertisement.
pub const TYPE_NA: u8 = 136;
/// The hop limit NDISC messages must carry (RFC 4861 §7.1.1).
pub const HOP_LIMIT: u8 = 255;

/// The 32-bit flags word of an NA: R, S, O and 29 reserved bits (kept) [RFC 4861 §4.4].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NeighborFlags(pub u32);

impl NeighborFlags {
    /// Router flag.
    pub const ROUTER: NeighborFlags = NeighborFlags(0x8000_0000);
    /// Solicited flag.
    pub const SOLICITED: NeighborFlags = NeighborFlags(0x4000_0000);
    /// Override flag.
    pub const OVERRIDE: NeighborFlags = NeighborFlags(0x2000_0000);
    /// No flag.
    pub const EMPTY: NeighborFlags = NeighborFlags(0);

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: NeighborFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// smoltcp's flags (the three named bits; reserved bits are dropped).
    pub fn to_smoltcp(self) -> NdiscNeighborFlags {
        NdiscNeighborFlags::from_bits_truncate((self.0 >> 24) as u8)
    }

    /// From smoltcp's flags.
    pub fn from_smoltcp(f: NdiscNeighborFlags) -> Self {
        NeighborFlags(u32::from(f.bits()) << 24)
    }
}

impl core::ops::BitOr for NeighborFlags {
    type Output = NeighborFlags;
    fn bitor(self, rhs: NeighborFlags) -> NeighborFlags {
        NeighborFlags(self.0 | rhs.0)
    }
}

impl fmt::Display for NeighborFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (bit, name) in [(Self::ROUTER, "Router"), (Self::SOLICITED, "Solicited"), (Self::OVERRIDE, "Override")] {
            if self.contains(bit) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        let rest = self.0 & 0x1fff_ffff;
        if rest != 0 || first {
            if !first {
                f.write_str("|")?;
            }
            write!(f, "0x{rest:08x}")?;
        }
        Ok(())
    }
}

/// The solicited-node multicast address of `addr`: ff02::1:ff00:0 plus its low 24 bits
/// [RFC 4291 §2.7.1; include/net/addrconf.h addrconf_addr_solict_mult].
pub fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::from([0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, o[13], o[14], o[15]])
}

/// The MAC of the solicited-node group of `addr`: 33:33:ff + its low 24 bits.
pub fn solicited_node_mac(addr: Ipv6Addr) -> [u8; 6] {
    crate::multicast::ipv6_multicast_mac(solicited_node(addr))
}

fixed_view!(Layer::Ndisc, HEADER_LEN;
    /// A checked zero-copy view of an NS or NA message.
);

impl<T: AsRef<[u8]>> Packet<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// The ICMPv6 type (135 or 136 here).
    pub fn msg_type(&self) -> u8 {
        self.b()[field::TYPE]
    }
    /// The code.
    pub fn code(&self) -> u8 {
        self.b()[field::CODE]
    }
    /// The checksum field.
    pub fn checksum(&self) -> u16 {
        crate::field::be16(self.b(), field::CHECKSUM.start)
    }
    /// Whether the checksum is right for this IPv6 source and destination.
    pub fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        icmpv6_checksum(src, dst, self.b()) == 0
    }
    /// Bytes 4–7: reserved (NS) or flags (NA).
    pub fn flags(&self) -> u32 {
        be32(self.b(), field::FLAGS.start)
    }
    /// The target address.
    pub fn target_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(array::<16>(self.b(), field::TARGET_ADDR.start))
    }
    /// Iterate the options: `(offset in the message, type, whole option bytes)`; an error
    /// item (length 0 or past the end) ends the iteration.
    pub fn options(&self) -> Options<'_> {
        Options { buf: self.b(), offset: HEADER_LEN, done: false }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the type.
    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::TYPE] = v;
    }
    /// Set the code.
    pub fn set_code(&mut self, v: u8) {
        self.buffer.as_mut()[field::CODE] = v;
    }
    /// Set the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM.start, v);
    }
    /// Compute and set the checksum over the whole buffer.
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        self.set_checksum(0);
        let c = icmpv6_checksum(src, dst, self.buffer.as_ref());
        self.set_checksum(c);
    }
    /// Set bytes 4–7.
    pub fn set_flags(&mut self, v: u32) {
        put32(self.buffer.as_mut(), field::FLAGS.start, v);
    }
    /// Set the target address.
    pub fn set_target_addr(&mut self, v: Ipv6Addr) {
        self.buffer.as_mut()[field::TARGET_ADDR].copy_from_slice(&v.octets());
    }
}

/// Iterator over NDISC options; see [`Packet::options`].
#[derive(Debug, Clone)]
pub struct Options<'a> {
    buf: &'a [u8],
    offset: usize,
    done: bool,
}

impl<'a> Iterator for Options<'a> {
    /// `(offset, type, option bytes)` or the error of a bad option.
    type Item = Result<(usize, u8, &'a [u8])>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.offset >= self.buf.len() {
            return None;
        }
        let at = self.offset;
        let rest = &self.buf[at..];
        if rest.len() < 2 {
            self.done = true;
            return Some(Err(Error::len(Layer::Ndisc, at, 2, rest.len())));
        }
        let len = usize::from(rest[field::OPT_LEN]) * 8;
        if len == 0 {
            // RFC 4861 §4.6: a length of 0 is invalid; the packet is to be discarded.
            self.done = true;
            return Some(Err(Error::content(Layer::Ndisc, at + field::OPT_LEN, ContentError::Malformed)));
        }
        if rest.len() < len {
            self.done = true;
            return Some(Err(Error::len(Layer::Ndisc, at, len, rest.len())));
        }
        self.offset = at + len;
        Some(Ok((at, rest[field::OPT_TYPE], &rest[..len])))
    }
}

/// A Neighbor Solicitation or Advertisement (also [`Repr`]); see the module doc for how the
/// options are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NdiscMessage<'a> {
    /// Neighbor Solicitation (135).
    NeighborSolicit {
        /// Code (0).
        code: u8,
        /// Reserved bytes 4–7, kept.
        reserved: u32,
        /// Target Address.
        target_addr: Ipv6Addr,
        /// The Source Link-Layer Address option when it comes first (absent in DAD).
        source_lladdr: Option<[u8; 6]>,
        /// Every other option byte, raw and validated.
        options: &'a [u8],
    },
    /// Neighbor Advertisement (136).
    NeighborAdvert {
        /// Code (0).
        code: u8,
        /// R/S/O flags and the reserved bits.
        flags: NeighborFlags,
        /// Target Address.
        target_addr: Ipv6Addr,
        /// The Target Link-Layer Address option when it comes first.
        target_lladdr: Option<[u8; 6]>,
        /// Every other option byte, raw and validated.
        options: &'a [u8],
    },
}

/// The owned representation of an NS/NA message.
pub type Repr<'a> = NdiscMessage<'a>;

impl<'a> NdiscMessage<'a> {
    /// An NS for `target` with our MAC in a Source Link-Layer Address option (`None` for DAD,
    /// which is sent from ::) [net/ipv6/ndisc.c ndisc_send_ns].
    pub fn solicit(target: Ipv6Addr, source_mac: Option<[u8; 6]>) -> Self {
        NdiscMessage::NeighborSolicit {
            code: 0,
            reserved: 0,
            target_addr: target,
            source_lladdr: source_mac,
            options: &[],
        }
    }

    /// An NA for `target` (our address) with our MAC in a Target Link-Layer Address option
    /// [ndisc.c ndisc_send_na].
    pub fn advert(target: Ipv6Addr, flags: NeighborFlags, mac: [u8; 6]) -> Self {
        NdiscMessage::NeighborAdvert { code: 0, flags, target_addr: target, target_lladdr: Some(mac), options: &[] }
    }

    /// The target address.
    pub fn target_addr(&self) -> Ipv6Addr {
        match *self {
            NdiscMessage::NeighborSolicit { target_addr, .. } | NdiscMessage::NeighborAdvert { target_addr, .. } => {
                target_addr
            }
        }
    }

    /// The link-layer address the message announces (source for NS, target for NA), also when
    /// its option is not the first.
    pub fn lladdr(&self) -> Option<[u8; 6]> {
        let (first, want, opts) = match *self {
            NdiscMessage::NeighborSolicit { source_lladdr, options, .. } => (source_lladdr, OPT_SOURCE_LLADDR, options),
            NdiscMessage::NeighborAdvert { target_lladdr, options, .. } => (target_lladdr, OPT_TARGET_LLADDR, options),
        };
        first.or_else(|| {
            Options { buf: opts, offset: 0, done: false }
                .flatten()
                .find(|(_, t, o)| *t == want && o.len() == LLADDR_OPT_LEN)
                .map(|(_, _, o)| array::<6>(o, field::OPT_LLADDR.start))
        })
    }

    /// Parse an NS/NA sent from `src` to `dst`, verifying the checksum and the option chain.
    /// Other ICMPv6 types give [`ContentError::UnsupportedType`].
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&'a T>, src: &Ipv6Addr, dst: &Ipv6Addr) -> Result<Self> {
        p.check_len()?;
        let t = p.msg_type();
        if t != TYPE_NS && t != TYPE_NA {
            return Err(Error::content(Layer::Ndisc, field::TYPE, ContentError::UnsupportedType(t)));
        }
        if !p.verify_checksum(src, dst) {
            return Err(Error::content(Layer::Ndisc, field::CHECKSUM.start, ContentError::Checksum));
        }
        let buf: &'a [u8] = p.buffer.as_ref();
        for o in p.options() {
            o?;
        }
        let want = if t == TYPE_NS { OPT_SOURCE_LLADDR } else { OPT_TARGET_LLADDR };
        let opts = &buf[HEADER_LEN..];
        let (lladdr, options) = if opts.len() >= LLADDR_OPT_LEN && opts[0] == want && opts[1] == 1 {
            (Some(array::<6>(opts, field::OPT_LLADDR.start)), &opts[LLADDR_OPT_LEN..])
        } else {
            (None, opts)
        };
        Ok(if t == TYPE_NS {
            NdiscMessage::NeighborSolicit {
                code: p.code(),
                reserved: p.flags(),
                target_addr: p.target_addr(),
                source_lladdr: lladdr,
                options,
            }
        } else {
            NdiscMessage::NeighborAdvert {
                code: p.code(),
                flags: NeighborFlags(p.flags()),
                target_addr: p.target_addr(),
                target_lladdr: lladdr,
                options,
            }
        })
    }

    /// Parse from a buffer holding exactly the ICMPv6 message (never panics).
    pub fn parse_bytes(buf: &'a [u8], src: &Ipv6Addr, dst: &Ipv6Addr) -> Result<Self> {
        Self::parse(&Packet::new_checked(buf)?, src, dst)
    }

    /// The length of the emitted message.
    pub fn buffer_len(&self) -> usize {
        let (ll, opts) = match self {
            NdiscMessage::NeighborSolicit { source_lladdr, options, .. } => (source_lladdr.is_some(), options.len()),
            NdiscMessage::NeighborAdvert { target_lladdr, options, .. } => (target_lladdr.is_some(), options.len()),
        };
        HEADER_LEN + if ll { LLADDR_OPT_LEN } else { 0 } + opts
    }

    /// Emit and fill the checksum for `src` → `dst`; the buffer must be exactly
    /// `buffer_len()` bytes (panics if shorter).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, p: &mut Packet<&mut T>, src: &Ipv6Addr, dst: &Ipv6Addr) {
        let (t, code, word, target, ll, kind, opts) = match *self {
            NdiscMessage::NeighborSolicit { code, reserved, target_addr, source_lladdr, options } => {
                (TYPE_NS, code, reserved, target_addr, source_lladdr, OPT_SOURCE_LLADDR, options)
            }
            NdiscMessage::NeighborAdvert { code, flags, target_addr, target_lladdr, options } => {
                (TYPE_NA, code, flags.0, target_addr, target_lladdr, OPT_TARGET_LLADDR, options)
            }
        };
        p.set_msg_type(t);
        p.set_code(code);
        p.set_flags(word);
        p.set_target_addr(target);
        let b = p.buffer.as_mut();
        let mut at = HEADER_LEN;
        if let Some(mac) = ll {
            b[at] = kind;
            b[at + 1] = 1;
            b[at + 2..at + 8].copy_from_slice(&mac);
            at += LLADDR_OPT_LEN;
        }
        b[at..at + opts.len()].copy_from_slice(opts);
        p.fill_checksum(src, dst);
    }

    /// Emit into `buf[..buffer_len()]` (panics if shorter); returns the length.
    pub fn emit_bytes(&self, buf: &mut [u8], src: &Ipv6Addr, dst: &Ipv6Addr) -> usize {
        let n = self.buffer_len();
        self.emit(&mut Packet::new_unchecked(&mut buf[..n]), src, dst);
        n
    }

    /// smoltcp's representation: target, the announced link-layer address and the R/S/O flags
    /// (code, reserved bits and other options are dropped).
    pub fn to_smoltcp(&self) -> NdiscRepr<'static> {
        let ll = self.lladdr().map(|m| RawHardwareAddress::from_bytes(&m));
        match *self {
            NdiscMessage::NeighborSolicit { target_addr, .. } => NdiscRepr::NeighborSolicit { target_addr, lladdr: ll },
            NdiscMessage::NeighborAdvert { flags, target_addr, .. } => {
                NdiscRepr::NeighborAdvert { flags: flags.to_smoltcp(), target_addr, lladdr: ll }
            }
        }
    }

    /// From smoltcp's representation: NS/NA with an Ethernet (6-byte) or no link-layer
    /// address; `None` for other messages or address sizes.
    pub fn from_smoltcp(r: &NdiscRepr<'_>) -> Option<NdiscMessage<'static>> {
        let mac = |ll: &Option<RawHardwareAddress>| -> Option<Option<[u8; 6]>> {
            match ll {
                None => Some(None),
                Some(a) => <[u8; 6]>::try_from(a.as_bytes()).ok().map(Some),
            }
        };
        match r {
            NdiscRepr::NeighborSolicit { target_addr, lladdr } => Some(NdiscMessage::NeighborSolicit {
                code: 0,
                reserved: 0,
                target_addr: *target_addr,
                source_lladdr: mac(lladdr)?,
                options: &[],
            }),
            NdiscRepr::NeighborAdvert { flags, target_addr, lladdr } => Some(NdiscMessage::NeighborAdvert {
                code: 0,
                flags: NeighborFlags::from_smoltcp(*flags),
                target_addr: *target_addr,
                target_lladdr: mac(lladdr)?,
                options: &[],
            }),
            _ => None,
        }
    }
}

impl fmt::Display for NdiscMessage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NdiscMessage::NeighborSolicit { target_addr, .. } => write!(f, "Neighbor Solicitation for {target_addr}")?,
            NdiscMessage::NeighborAdvert { target_addr, flags, .. } => {
                write!(f, "Neighbor Advertisement {target_addr} ({flags})")?
            }
        }
        if let Some(m) = self.lladdr() {
            write!(f, " is {}", crate::MacAddr(m))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;
    use smoltcp::phy::ChecksumCapabilities;
    use smoltcp::wire::{Icmpv6Packet, Icmpv6Repr};
    use std::vec;
    use std::vec::Vec;

    const A: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0x0200, 0x00ff, 0xfe12, 0x3456);
    const B: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0x0200, 0x00ff, 0xfeab, 0xcdef);
    const MAC_A: [u8; 6] = [0x02, 0x00, 0x00, 0x12, 0x34, 0x56];

    #[test]
    fn solicited_node_helpers() {
        assert_eq!(solicited_node(B), "ff02::1:ffab:cdef".parse::<Ipv6Addr>().unwrap());
        assert_eq!(solicited_node_mac(B), [0x33, 0x33, 0xff, 0xab, 0xcd, 0xef]);
    }

    #[test]
    fn ns_golden_and_smoltcp() {
        let dst = solicited_node(B);
        let m = NdiscMessage::solicit(B, Some(MAC_A));
        let mut b = [0u8; 32];
        assert_eq!(m.emit_bytes(&mut b, &A, &dst), 32);
        assert_eq!(&b[..2], &[135, 0]);
        assert_eq!(&b[4..8], &[0; 4]);
        assert_eq!(&b[8..24], &B.octets());
        assert_eq!(&b[24..32], &[1, 1, 0x02, 0x00, 0x00, 0x12, 0x34, 0x56]);
        // smoltcp parses the same bytes (checksum included) to the same message
        let sp = Icmpv6Packet::new_checked(&b[..]).unwrap();
        let Icmpv6Repr::Ndisc(r) = Icmpv6Repr::parse(&A, &dst, &sp, &ChecksumCapabilities::default()).unwrap() else {
            panic!()
        };
        assert_eq!(r, m.to_smoltcp());
        assert_eq!(NdiscMessage::from_smoltcp(&r), Some(m));
        assert_eq!(NdiscMessage::parse_bytes(&b, &A, &dst).unwrap(), m);
    }

    #[test]
    fn na_keeps_everything() {
        let m = NdiscMessage::advert(A, NeighborFlags::SOLICITED | NeighborFlags::OVERRIDE, MAC_A);
        let mut b = [0u8; 32];
        m.emit_bytes(&mut b, &A, &B);
        assert_eq!(&b[4..8], &[0x60, 0, 0, 0]);
        assert_eq!(b[24], 2);
        let sp = Icmpv6Packet::new_checked(&b[..]).unwrap();
        let Icmpv6Repr::Ndisc(r) = Icmpv6Repr::parse(&A, &B, &sp, &ChecksumCapabilities::default()).unwrap() else {
            panic!()
        };
        assert_eq!(r, m.to_smoltcp());
        extern crate std;
        assert_eq!(std::format!("{}", NeighborFlags(0x6000_0001)), "Solicited|Override|0x00000001");
        // reserved bits, a nonce option before the lladdr, code 1: all kept
        let nonce_then_ll: [u8; 16] = [14, 1, 1, 2, 3, 4, 5, 6, 2, 1, 0x02, 0, 0, 0x12, 0x34, 0x56];
        let odd = NdiscMessage::NeighborAdvert {
            code: 1,
            flags: NeighborFlags(0xa000_00ff),
            target_addr: A,
            target_lladdr: None,
            options: &nonce_then_ll,
        };
        let mut b = vec![0u8; odd.buffer_len()];
        odd.emit_bytes(&mut b, &A, &B);
        let back = NdiscMessage::parse_bytes(&b, &A, &B).unwrap();
        assert_eq!(back, odd);
        assert_eq!(back.lladdr(), Some(MAC_A));
    }

    #[test]
    fn errors() {
        let m = NdiscMessage::solicit(B, Some(MAC_A));
        let mut b = [0u8; 32];
        m.emit_bytes(&mut b, &A, &B);
        for n in 0..24 {
            assert_eq!(NdiscMessage::parse_bytes(&b[..n], &A, &B), Err(Error::len(Layer::Ndisc, 0, 24, n)));
        }
        // a cut inside the option, checksum refilled: a Len error at the option
        for n in 25..32 {
            let mut c: Vec<u8> = b[..n].to_vec();
            Packet::new_unchecked(&mut c[..]).fill_checksum(&A, &B);
            match NdiscMessage::parse_bytes(&c, &A, &B) {
                Err(Error::Len { layer: Layer::Ndisc, offset: 24, .. }) => {}
                other => panic!("{n}: {other:?}"),
            }
        }
        let mut z = b;
        z[25] = 0;
        Packet::new_unchecked(&mut z[..]).fill_checksum(&A, &B);
        assert_eq!(
            NdiscMessage::parse_bytes(&z, &A, &B),
            Err(Error::content(Layer::Ndisc, 25, ContentError::Malformed))
        );
        assert_eq!(NdiscMessage::parse_bytes(&b, &B, &B), Err(Error::content(Layer::Ndisc, 2, ContentError::Checksum)));
        let mut t = b;
        t[0] = 133;
        assert_eq!(
            NdiscMessage::parse_bytes(&t, &A, &B),
            Err(Error::content(Layer::Ndisc, 0, ContentError::UnsupportedType(133)))
        );
    }

    proptest! {
        #[test]
        fn round_trip(ns in any::<bool>(), code in any::<u8>(), word in any::<u32>(), target in any::<u128>(),
                      ll in proptest::option::of(any::<[u8; 6]>()),
                      opts in proptest::collection::vec((any::<u8>(), 1u8..3), 0..3),
                      src in any::<u128>(), dst in any::<u128>()) {
            let mut raw = Vec::new();
            for (t, l) in &opts {
                raw.push(*t);
                raw.push(*l);
                raw.extend(std::iter::repeat_n(0xab, usize::from(*l) * 8 - 2));
            }
            let target = Ipv6Addr::from(target);
            let m = if ns {
                NdiscMessage::NeighborSolicit { code, reserved: word, target_addr: target, source_lladdr: ll, options: &raw }
            } else {
                NdiscMessage::NeighborAdvert { code, flags: NeighborFlags(word), target_addr: target, target_lladdr: ll, options: &raw }
            };
            let (src, dst) = (Ipv6Addr::from(src), Ipv6Addr::from(dst));
            let mut b = vec![0u8; m.buffer_len()];
            m.emit_bytes(&mut b, &src, &dst);
            let back = NdiscMessage::parse_bytes(&b, &src, &dst).unwrap();
            // an lladdr of None followed by a raw option that looks like the lladdr option is
            // read back as lladdr: compare bytes in that case
            let mut b2 = vec![0u8; back.buffer_len()];
            back.emit_bytes(&mut b2, &src, &dst);
            prop_assert_eq!(&b2, &b);
            if ll.is_some() {
                prop_assert_eq!(back, m);
            }
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = NdiscMessage::parse_bytes(&bytes, &A, &B);
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = p.options().count();
            }
        }
    }
}
