//! The RDMA-CM private-data header (`struct cma_hdr` [cma.c]; IBTA vol. 1 annex A11 "IP CM
//! REQ private data") and the IP service-ID helpers.
//!
//! For the IP port spaces (TCP, UDP, IPoIB; not AF_IB ids) `rdma_connect()` prefixes the user's
//! private data of a REQ (`cma_connect_ib`) or SIDR_REQ (`cma_resolve_ib_udp`) with this
//! 36-byte header (`cma_user_data_offset` = `sizeof(struct cma_hdr)`), which leaves 56 bytes of
//! user data in a REQ and 180 in a SIDR_REQ. The private-data buffer is `kzalloc`ed and
//! `cma_format_hdr` writes only the 4-byte `ip4.addr` of each address union for IPv4, so an
//! IPv4 address sits in the last 4 bytes of its 16-byte slot after 12 zero bytes (not the
//! `::ffff:` v4-mapped prefix). This module keeps the slots raw so any header round-trips.
//!
//! The listener side (`cma_save_ip_info`) rejects a header whose version is not
//! [`CMA_VERSION`] (−EINVAL) or whose IP version is neither 4 nor 6 (−EAFNOSUPPORT);
//! [`Repr::parse`] does the same (`ContentError::Malformed`). Offsets are relative to the
//! buffer handed in (the start of the private data): the caller shifts them
//! (`ReqRepr::cma_header` and `SidrReqRepr::cma_header` do).
//!
//! tshark 4.0 shows this header under `infiniband.cm.req.ip_cm` (`.majv`/`.minv` for byte 0,
//! `.ipv`/`.reserved` for byte 1, `.sport`, `.sip4`/`.sip6`, `.dip4`/`.dip6`, `.private`), when
//! the REQ's ServiceID has the IP CM prefix 0x0000000001xxxxxx.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::cm::{get_bits, set_bits};
use crate::error::{ContentError, Error, Layer, Result};
use crate::field::{array, be16, put16};

/// Byte positions inside the header (offsets from the start of the private data).
pub mod field {
    use crate::field::*;
    /// `cma_version` (annex A11: MajV in bits 7:4, MinV in bits 3:0); the kernel writes 0.
    pub const CMA_VERSION: usize = 0;
    /// `ip_version`: IP version in bits 7:4, reserved bits 3:0.
    pub const IP_VERSION: usize = 1;
    /// `port`: the active side's source port (big-endian).
    pub const SRC_PORT: Field = 2..4;
    /// `src_addr`: the active side's address (IPv4 in bytes 16..20).
    pub const SRC_ADDR: Field = 4..20;
    /// `dst_addr`: the passive side's address (IPv4 in bytes 32..36).
    pub const DST_ADDR: Field = 20..36;
}

/// The header length, `sizeof(struct cma_hdr)`.
pub const HEADER_LEN: usize = 36;
/// The only header version the kernel accepts, `CMA_VERSION`.
pub const CMA_VERSION: u8 = 0x00;

/// Port space `RDMA_PS_IPOIB` [rdma_cma.h].
pub const RDMA_PS_IPOIB: u16 = 0x0002;
/// Port space `RDMA_PS_TCP` (RC connections).
pub const RDMA_PS_TCP: u16 = 0x0106;
/// Port space `RDMA_PS_UDP` (UD, SIDR).
pub const RDMA_PS_UDP: u16 = 0x0111;
/// Port space `RDMA_PS_IB` (native IB addressing; its private data has no header).
pub const RDMA_PS_IB: u16 = 0x013F;

/// The service-ID prefix of IP-based CM (annex A11), `IB_CMA_SERVICE_ID` [ib_cm.h].
pub const IP_SERVICE_ID_PREFIX: u64 = 0x0000_0000_0100_0000;
/// The mask that selects the prefix, `IB_CMA_SERVICE_ID_MASK` [ib_cm.h].
pub const IP_SERVICE_ID_MASK: u64 = 0xFFFF_FFFF_FF00_0000;

/// The ServiceID RDMA-CM uses for a port space and port: `rdma_get_service_id()` =
/// `cpu_to_be64(((u64)ps << 16) + port)` [cma.c]. For example TCP port 7174 gives
/// 0x0000_0000_0106_1C06.
pub const fn service_id(port_space: u16, port: u16) -> u64 {
    ((port_space as u64) << 16) + port as u64
}

/// The port space and port of a ServiceID, as the listener reads them:
/// `rdma_ps_from_service_id()` = `(sid >> 16) & 0xffff`, `cma_port_from_service_id()` =
/// `(u16)sid` [cma.c]. The inverse of [`service_id`].
pub const fn split_service_id(service_id: u64) -> (u16, u16) {
    (((service_id >> 16) & 0xFFFF) as u16, service_id as u16)
}

/// Whether a ServiceID has the IP-CM prefix (annex A11, `IB_CMA_SERVICE_ID`): true for the
/// TCP, UDP and IB port spaces, false for IPoIB (0x0002 << 16).
pub const fn is_ip_service_id(service_id: u64) -> bool {
    service_id & IP_SERVICE_ID_MASK == IP_SERVICE_ID_PREFIX
}

fixed_view!(Layer::CmaHeader, HEADER_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    /// `cma_version`.
    pub fn cma_version(&self) -> u8 {
        self.buffer.as_ref()[field::CMA_VERSION]
    }
    /// The IP version (bits 7:4 of byte 1).
    pub fn ip_version(&self) -> u8 {
        get_bits(self.buffer.as_ref()[field::IP_VERSION], 4, 4)
    }
    /// The reserved low nibble of byte 1.
    pub fn ip_version_reserved(&self) -> u8 {
        get_bits(self.buffer.as_ref()[field::IP_VERSION], 0, 4)
    }
    /// The source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT.start)
    }
    /// The raw 16-byte source address slot.
    pub fn src_addr(&self) -> [u8; 16] {
        array(self.buffer.as_ref(), field::SRC_ADDR.start)
    }
    /// The raw 16-byte destination address slot.
    pub fn dst_addr(&self) -> [u8; 16] {
        array(self.buffer.as_ref(), field::DST_ADDR.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set `cma_version`.
    pub fn set_cma_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::CMA_VERSION] = v
    }
    /// Set the IP version nibble (`cma_set_ip_ver`: keeps the low nibble).
    pub fn set_ip_version(&mut self, v: u8) {
        set_bits(&mut self.buffer.as_mut()[field::IP_VERSION], 4, 4, v)
    }
    /// Set the reserved low nibble of byte 1.
    pub fn set_ip_version_reserved(&mut self, v: u8) {
        set_bits(&mut self.buffer.as_mut()[field::IP_VERSION], 0, 4, v)
    }
    /// Set the source port.
    pub fn set_src_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::SRC_PORT.start, v)
    }
    /// Set the raw source address slot.
    pub fn set_src_addr(&mut self, v: [u8; 16]) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&v)
    }
    /// Set the raw destination address slot.
    pub fn set_dst_addr(&mut self, v: [u8; 16]) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&v)
    }
}

/// An owned RDMA-CM header.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// `cma_version` (0 from Linux; parse rejects anything else).
    pub cma_version: u8,
    /// IP version, 4 or 6 (bits 7:4 of byte 1).
    pub ip_version: u8,
    /// The reserved low nibble of byte 1, kept as it was.
    pub ip_version_reserved: u8,
    /// The active side's source port.
    pub src_port: u16,
    /// The source address slot, raw (IPv4: 12 zero bytes then the address).
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serde_support::hex"))]
    pub src_addr: [u8; 16],
    /// The destination address slot, raw.
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serde_support::hex"))]
    pub dst_addr: [u8; 16],
}

impl Repr {
    /// The header length.
    pub const LEN: usize = HEADER_LEN;

    /// The header `cma_format_hdr` writes for an IPv4 connection (pad bytes zero).
    pub const fn new_v4(src: Ipv4Addr, src_port: u16, dst: Ipv4Addr) -> Repr {
        Repr {
            cma_version: CMA_VERSION,
            ip_version: 4,
            ip_version_reserved: 0,
            src_port,
            src_addr: v4_slot(src),
            dst_addr: v4_slot(dst),
        }
    }

    /// The header `cma_format_hdr` writes for an IPv6 connection.
    pub const fn new_v6(src: Ipv6Addr, src_port: u16, dst: Ipv6Addr) -> Repr {
        Repr {
            cma_version: CMA_VERSION,
            ip_version: 6,
            ip_version_reserved: 0,
            src_port,
            src_addr: src.octets(),
            dst_addr: dst.octets(),
        }
    }

    /// Parse a header view. Rejects (like `cma_save_ip_info`) a version other than 0 (offset 0)
    /// and an IP version other than 4 or 6 (offset 1), with `ContentError::Malformed`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        if packet.cma_version() != CMA_VERSION {
            return Err(Error::content(Layer::CmaHeader, field::CMA_VERSION, ContentError::Malformed));
        }
        let ip_version = packet.ip_version();
        if ip_version != 4 && ip_version != 6 {
            return Err(Error::content(Layer::CmaHeader, field::IP_VERSION, ContentError::Malformed));
        }
        Ok(Repr {
            cma_version: packet.cma_version(),
            ip_version,
            ip_version_reserved: packet.ip_version_reserved(),
            src_port: packet.src_port(),
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
        })
    }

    /// The header length: 36.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header into a view.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        packet.set_cma_version(self.cma_version);
        packet.set_ip_version(self.ip_version);
        packet.set_ip_version_reserved(self.ip_version_reserved);
        packet.set_src_port(self.src_port);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }

    /// The source address: the last 4 bytes of the slot when `ip_version` is 4, the whole slot
    /// otherwise (parse only yields 4 or 6).
    pub const fn src_ip(&self) -> IpAddr {
        slot_ip(self.ip_version, &self.src_addr)
    }

    /// The destination address (see [`Self::src_ip`]).
    pub const fn dst_ip(&self) -> IpAddr {
        slot_ip(self.ip_version, &self.dst_addr)
    }
}

const fn v4_slot(a: Ipv4Addr) -> [u8; 16] {
    let o = a.octets();
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, o[0], o[1], o[2], o[3]]
}

/// The `i`th big-endian 16-bit segment of an address slot.
const fn seg(s: &[u8; 16], i: usize) -> u16 {
    u16::from_be_bytes([s[2 * i], s[2 * i + 1]])
}

const fn slot_ip(ip_version: u8, s: &[u8; 16]) -> IpAddr {
    if ip_version == 4 {
        IpAddr::V4(Ipv4Addr::new(s[12], s[13], s[14], s[15]))
    } else {
        IpAddr::V6(Ipv6Addr::new(
            seg(s, 0),
            seg(s, 1),
            seg(s, 2),
            seg(s, 3),
            seg(s, 4),
            seg(s, 5),
            seg(s, 6),
            seg(s, 7),
        ))
    }
}

repr_bytes!(Repr);

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn service_ids() {
        assert_eq!(service_id(RDMA_PS_TCP, 7174), 0x0000_0000_0106_1C06);
        assert_eq!(service_id(RDMA_PS_UDP, 0xFFFF), 0x0000_0000_0111_FFFF);
        assert_eq!(service_id(RDMA_PS_IB, 1), 0x0000_0000_013F_0001);
        assert_eq!(service_id(RDMA_PS_IPOIB, 2), 0x0000_0000_0002_0002);
        assert_eq!(split_service_id(0x0000_0000_0106_1C06), (RDMA_PS_TCP, 7174));
        assert!(is_ip_service_id(service_id(RDMA_PS_TCP, 1)));
        assert!(is_ip_service_id(service_id(RDMA_PS_UDP, 1)));
        assert!(!is_ip_service_id(service_id(RDMA_PS_IPOIB, 1)));
        assert!(!is_ip_service_id(0x0200_0000_0000_0001));
    }

    #[test]
    fn kernel_ipv4_layout() {
        // cma_format_hdr on a kzalloc'ed buffer: version 0, ip_version 0x40, port, then the
        // IPv4 addresses in the last 4 bytes of each 16-byte union.
        let mut golden = [0u8; 36];
        golden[1] = 0x40;
        golden[2..4].copy_from_slice(&[0x48, 0x53]);
        golden[16..20].copy_from_slice(&[10, 0, 0, 1]);
        golden[32..36].copy_from_slice(&[10, 0, 0, 2]);
        let r = Repr::new_v4(Ipv4Addr::new(10, 0, 0, 1), 0x4853, Ipv4Addr::new(10, 0, 0, 2));
        let mut out = [0u8; 36];
        r.emit_bytes(&mut out);
        assert_eq!(out, golden);
        let p = Repr::parse_bytes(&golden).unwrap();
        assert_eq!(p, r);
        assert_eq!(p.src_ip(), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(p.dst_ip(), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
    }

    #[test]
    fn ipv6_and_kept_bits() {
        let src: Ipv6Addr = "fe80::1".parse().unwrap();
        let dst: Ipv6Addr = "2001:db8::2".parse().unwrap();
        let mut r = Repr::new_v6(src, 1, dst);
        r.ip_version_reserved = 0xA;
        let mut out = [0u8; 40];
        r.emit_bytes(&mut out);
        assert_eq!(out[1], 0x6A);
        assert_eq!(out[36..], [0; 4]);
        let p = Repr::parse_bytes(&out).unwrap();
        assert_eq!(p, r);
        assert_eq!(p.src_ip(), IpAddr::V6(src));
        assert_eq!(p.dst_ip(), IpAddr::V6(dst));
        // A v4-mapped prefix in an IPv4 slot is kept as it was.
        let mut v4 = Repr::new_v4(Ipv4Addr::new(1, 2, 3, 4), 5, Ipv4Addr::new(6, 7, 8, 9));
        v4.src_addr[10] = 0xFF;
        v4.src_addr[11] = 0xFF;
        v4.emit_bytes(&mut out);
        assert_eq!(Repr::parse_bytes(&out).unwrap(), v4);
        assert_eq!(v4.src_ip(), IpAddr::V4(Ipv4Addr::new(1, 2, 3, 4)));
    }

    #[test]
    fn content_errors() {
        let mut b = [0u8; 36];
        b[1] = 0x40;
        b[0] = 0x10;
        assert_eq!(Repr::parse_bytes(&b), Err(Error::content(Layer::CmaHeader, 0, ContentError::Malformed)));
        b[0] = 0;
        for v in [0u8, 1, 5, 7, 15] {
            b[1] = v << 4;
            assert_eq!(Repr::parse_bytes(&b), Err(Error::content(Layer::CmaHeader, 1, ContentError::Malformed)));
        }
    }

    #[test]
    fn truncation() {
        let b = [
            0x00u8, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0,
        ];
        for len in 0..HEADER_LEN {
            assert_eq!(Repr::parse_bytes(&b[..len]), Err(Error::len(Layer::CmaHeader, 0, HEADER_LEN, len)));
        }
        assert!(Repr::parse_bytes(&b).is_ok());
    }

    fn any_repr() -> impl Strategy<Value = Repr> {
        (prop_oneof![Just(4u8), Just(6u8)], 0u8..16, any::<u16>(), any::<[u8; 16]>(), any::<[u8; 16]>()).prop_map(
            |(ip_version, ip_version_reserved, src_port, src_addr, dst_addr)| Repr {
                cma_version: CMA_VERSION,
                ip_version,
                ip_version_reserved,
                src_port,
                src_addr,
                dst_addr,
            },
        )
    }

    proptest! {
        #[test]
        fn repr_round_trips(r in any_repr()) {
            let mut buf = [0u8; HEADER_LEN];
            r.emit_bytes(&mut buf);
            prop_assert_eq!(Repr::parse_bytes(&buf).unwrap(), r);
        }

        #[test]
        fn service_id_round_trips(ps in any::<u16>(), port in any::<u16>()) {
            prop_assert_eq!(split_service_id(service_id(ps, port)), (ps, port));
        }

        #[test]
        fn parse_never_panics(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Repr::parse_bytes(&b);
        }
    }
}
