//! ARP for Ethernet/IPv4 (request and reply), through smoltcp's `wire::ArpPacket` /
//! `ArpRepr`, with this crate's errors.
//!
//! A RoCEv2 peer resolves the requester's IPv4 address with ARP before it can answer
//! (the kernel neighbour table builds the destination MAC of every unicast RoCE frame;
//! protocol.md §1.9).
//!
//! Layout for Ethernet/IPv4, 28 bytes [RFC 826; include/uapi/linux/if_arp.h; smoltcp arp.rs]:
//!
//! | Off | Size | Field | Value here |
//! |---|---|---|---|
//! | 0 | 2 | Hardware type (HTYPE) | 1 (Ethernet) |
//! | 2 | 2 | Protocol type (PTYPE) | 0x0800 (IPv4) |
//! | 4 | 1 | Hardware address length (HLEN) | 6 |
//! | 5 | 1 | Protocol address length (PLEN) | 4 |
//! | 6 | 2 | Operation | 1 request, 2 reply |
//! | 8 | 6 | Sender hardware address | |
//! | 14 | 4 | Sender protocol address | |
//! | 18 | 6 | Target hardware address | zero in a request |
//! | 24 | 4 | Target protocol address | |
//!
//! The owned representation is smoltcp's [`ArpRepr`] (re-exported, also as [`Repr`]): for
//! Ethernet/IPv4 it holds every field, so any such packet re-emits byte for byte. Since it is
//! a foreign type, parsing and emitting are the free functions [`parse`], [`parse_bytes`],
//! [`emit`] and [`emit_bytes`].

use core::net::Ipv4Addr;

use crate::error::{ContentError, Error, Layer, Result};
use crate::field::{array, be16, put16};

pub use smoltcp::wire::{ArpHardware, ArpOperation, ArpPacket, ArpRepr, EthernetAddress};

/// The owned representation of an ARP packet (smoltcp's).
pub type Repr = ArpRepr;

/// Byte ranges of an Ethernet/IPv4 ARP packet.
pub mod field {
    #![allow(missing_docs)]
    use crate::field::Field;
    pub const HTYPE: Field = 0..2;
    pub const PTYPE: Field = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Field = 6..8;
    pub const SHA: Field = 8..14;
    pub const SPA: Field = 14..18;
    pub const THA: Field = 18..24;
    pub const TPA: Field = 24..28;
}

/// Length of an Ethernet/IPv4 ARP packet.
pub const LEN: usize = 28;
/// EtherType of ARP.
pub const ETHERTYPE: u16 = 0x0806;

fixed_view!(Layer::Arp, LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// Hardware type (1 = Ethernet).
    pub fn htype(&self) -> u16 {
        be16(self.b(), field::HTYPE.start)
    }
    /// Protocol type (0x0800 = IPv4).
    pub fn ptype(&self) -> u16 {
        be16(self.b(), field::PTYPE.start)
    }
    /// Hardware address length.
    pub fn hlen(&self) -> u8 {
        self.b()[field::HLEN]
    }
    /// Protocol address length.
    pub fn plen(&self) -> u8 {
        self.b()[field::PLEN]
    }
    /// Operation.
    pub fn operation(&self) -> ArpOperation {
        ArpOperation::from(be16(self.b(), field::OPER.start))
    }
    /// Sender hardware address (Ethernet/IPv4 layout).
    pub fn sender_mac(&self) -> [u8; 6] {
        array(self.b(), field::SHA.start)
    }
    /// Sender protocol address (Ethernet/IPv4 layout).
    pub fn sender_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(array::<4>(self.b(), field::SPA.start))
    }
    /// Target hardware address (Ethernet/IPv4 layout).
    pub fn target_mac(&self) -> [u8; 6] {
        array(self.b(), field::THA.start)
    }
    /// Target protocol address (Ethernet/IPv4 layout).
    pub fn target_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(array::<4>(self.b(), field::TPA.start))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the hardware type.
    pub fn set_htype(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::HTYPE.start, v);
    }
    /// Set the protocol type.
    pub fn set_ptype(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::PTYPE.start, v);
    }
    /// Set the hardware and protocol address lengths.
    pub fn set_lens(&mut self, hlen: u8, plen: u8) {
        let b = self.buffer.as_mut();
        b[field::HLEN] = hlen;
        b[field::PLEN] = plen;
    }
    /// Set the operation.
    pub fn set_operation(&mut self, v: ArpOperation) {
        put16(self.buffer.as_mut(), field::OPER.start, v.into());
    }
    /// Set the sender hardware address.
    pub fn set_sender_mac(&mut self, v: [u8; 6]) {
        self.buffer.as_mut()[field::SHA].copy_from_slice(&v);
    }
    /// Set the sender protocol address.
    pub fn set_sender_ip(&mut self, v: Ipv4Addr) {
        self.buffer.as_mut()[field::SPA].copy_from_slice(&v.octets());
    }
    /// Set the target hardware address.
    pub fn set_target_mac(&mut self, v: [u8; 6]) {
        self.buffer.as_mut()[field::THA].copy_from_slice(&v);
    }
    /// Set the target protocol address.
    pub fn set_target_ip(&mut self, v: Ipv4Addr) {
        self.buffer.as_mut()[field::TPA].copy_from_slice(&v.octets());
    }
}

/// Parse an Ethernet/IPv4 ARP packet with smoltcp's `ArpRepr::parse`.
///
/// Errors: fewer than 28 bytes ([`Error::Len`]); hardware type not 1 (offset 0), protocol
/// type not 0x0800 (offset 2), or address lengths not 6/4 (offsets 4/5):
/// [`ContentError::Malformed`].
pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<ArpRepr> {
    p.check_len()?;
    let bad = |at| Err(Error::content(Layer::Arp, at, ContentError::Malformed));
    if p.htype() != 1 {
        return bad(field::HTYPE.start);
    }
    if p.ptype() != 0x0800 {
        return bad(field::PTYPE.start);
    }
    if p.hlen() != 6 {
        return bad(field::HLEN);
    }
    if p.plen() != 4 {
        return bad(field::PLEN);
    }
    ArpRepr::parse(&ArpPacket::new_unchecked(p.buffer.as_ref()))
        .map_err(|_| Error::content(Layer::Arp, 0, ContentError::Malformed))
}

/// Parse from the start of `buf` (never panics; bytes after the 28 are ignored).
pub fn parse_bytes(buf: &[u8]) -> Result<ArpRepr> {
    parse(&Packet::new_checked(buf)?)
}

/// The emitted length (28).
pub const fn buffer_len(repr: &ArpRepr) -> usize {
    repr.buffer_len()
}

/// Emit with smoltcp's `ArpRepr::emit` (buffer at least 28 bytes; panics otherwise).
pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(repr: &ArpRepr, p: &mut Packet<&mut T>) {
    repr.emit(&mut ArpPacket::new_unchecked(&mut p.buffer.as_mut()[..LEN]));
}

/// Emit into the start of `buf` (at least 28 bytes; panics otherwise); returns 28.
pub fn emit_bytes(repr: &ArpRepr, buf: &mut [u8]) -> usize {
    emit(repr, &mut Packet::new_unchecked(buf));
    LEN
}

/// An ARP request "who has `target_ip`? tell `sender_ip`", target hardware address zero, as
/// Linux sends it for an unresolved neighbour [net/ipv4/arp.c arp_solicit, arp_create].
pub fn request(sender_mac: [u8; 6], sender_ip: Ipv4Addr, target_ip: Ipv4Addr) -> ArpRepr {
    ArpRepr::EthernetIpv4 {
        operation: ArpOperation::Request,
        source_hardware_addr: EthernetAddress(sender_mac),
        source_protocol_addr: sender_ip,
        target_hardware_addr: EthernetAddress([0; 6]),
        target_protocol_addr: target_ip,
    }
}

/// An ARP reply "`sender_ip` is at `sender_mac`" to the requester [arp.c arp_process].
pub fn reply(sender_mac: [u8; 6], sender_ip: Ipv4Addr, target_mac: [u8; 6], target_ip: Ipv4Addr) -> ArpRepr {
    ArpRepr::EthernetIpv4 {
        operation: ArpOperation::Reply,
        source_hardware_addr: EthernetAddress(sender_mac),
        source_protocol_addr: sender_ip,
        target_hardware_addr: EthernetAddress(target_mac),
        target_protocol_addr: target_ip,
    }
}

/// The reply that answers `request` for our `mac` (sender/target swapped), or `None` if it is
/// not a request.
pub fn reply_to(request: &ArpRepr, mac: [u8; 6]) -> Option<ArpRepr> {
    match *request {
        ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr,
            source_protocol_addr,
            target_protocol_addr,
            ..
        } => Some(reply(mac, target_protocol_addr, source_hardware_addr.0, source_protocol_addr)),
        _ => None,
    }
}

/// The fields of an `ArpRepr`: (operation, sender MAC, sender IP, target MAC, target IP).
pub fn fields(repr: &ArpRepr) -> (ArpOperation, [u8; 6], Ipv4Addr, [u8; 6], Ipv4Addr) {
    match *repr {
        ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr,
            source_protocol_addr,
            target_hardware_addr,
            target_protocol_addr,
        } => (operation, source_hardware_addr.0, source_protocol_addr, target_hardware_addr.0, target_protocol_addr),
        #[allow(unreachable_patterns)]
        _ => (ArpOperation::Unknown(0), [0; 6], Ipv4Addr::UNSPECIFIED, [0; 6], Ipv4Addr::UNSPECIFIED),
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;

    // smoltcp's ARP test vector (src/wire/arp.rs).
    static PACKET_BYTES: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x21, 0x22, 0x23, 0x24,
        0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x41, 0x42, 0x43, 0x44,
    ];

    #[test]
    fn golden() {
        let r = parse_bytes(&PACKET_BYTES).unwrap();
        assert_eq!(
            fields(&r),
            (
                ArpOperation::Request,
                [0x11, 0x12, 0x13, 0x14, 0x15, 0x16],
                Ipv4Addr::new(0x21, 0x22, 0x23, 0x24),
                [0x31, 0x32, 0x33, 0x34, 0x35, 0x36],
                Ipv4Addr::new(0x41, 0x42, 0x43, 0x44)
            )
        );
        let mut out = [0u8; 28];
        assert_eq!(emit_bytes(&r, &mut out), 28);
        assert_eq!(out, PACKET_BYTES);
        let p = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(p.sender_ip(), Ipv4Addr::new(0x21, 0x22, 0x23, 0x24));
    }

    #[test]
    fn request_and_reply() {
        let me = [2, 0, 0, 0, 0, 1];
        let req = request([2, 0, 0, 0, 0, 2], Ipv4Addr::new(198, 18, 0, 2), Ipv4Addr::new(198, 18, 0, 1));
        let rep = reply_to(&req, me).unwrap();
        assert_eq!(rep, reply(me, Ipv4Addr::new(198, 18, 0, 1), [2, 0, 0, 0, 0, 2], Ipv4Addr::new(198, 18, 0, 2)));
        assert_eq!(reply_to(&rep, me), None);
        let mut b = [0u8; 28];
        emit_bytes(&req, &mut b);
        assert_eq!(&b[6..8], &[0, 1]);
        assert_eq!(&b[18..24], &[0; 6]);
    }

    #[test]
    fn errors() {
        for n in 0..28 {
            assert_eq!(parse_bytes(&PACKET_BYTES[..n]), Err(Error::len(Layer::Arp, 0, 28, n)));
        }
        for (at, byte) in [(1, 6u8), (3, 0xdd), (4, 8), (5, 16)] {
            let mut b = PACKET_BYTES;
            b[at] = byte;
            let off = if at < 4 { at - 1 } else { at };
            assert_eq!(parse_bytes(&b), Err(Error::content(Layer::Arp, off, ContentError::Malformed)));
        }
    }

    proptest! {
        #[test]
        fn round_trip(op in any::<u16>(), sha in any::<[u8; 6]>(), spa in any::<u32>(), tha in any::<[u8; 6]>(), tpa in any::<u32>()) {
            let r = ArpRepr::EthernetIpv4 {
                operation: ArpOperation::from(op),
                source_hardware_addr: EthernetAddress(sha),
                source_protocol_addr: Ipv4Addr::from(spa),
                target_hardware_addr: EthernetAddress(tha),
                target_protocol_addr: Ipv4Addr::from(tpa),
            };
            let mut b = [0u8; 28];
            emit_bytes(&r, &mut b);
            prop_assert_eq!(parse_bytes(&b).unwrap(), r);
        }
    }
}
