//! The 128-bit InfiniBand GID and its RoCEv2 mapping to IP addresses.
//!
//! On RoCEv2 a GID is an IP address: an IPv4 address a.b.c.d is the IPv4-mapped GID
//! `::ffff:a.b.c.d`, anything else is a native IPv6 GID (protocol.md §1.8).

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A 16-byte Global Identifier, in network byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Gid(pub [u8; 16]);

/// Hashed as one 128-bit word (equal GIDs, equal words), not as a byte slice with its length:
/// the engines key their groups by MGID and look them up several times per SA transaction.
impl core::hash::Hash for Gid {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        state.write_u128(u128::from_ne_bytes(self.0));
    }
}

impl Gid {
    /// The all-zero GID.
    pub const ZERO: Gid = Gid([0; 16]);

    /// The IPv4-mapped GID `::ffff:a.b.c.d` that RoCEv2 uses for an IPv4 address.
    #[inline]
    pub const fn from_ipv4(addr: Ipv4Addr) -> Gid {
        let o = addr.octets();
        Gid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, o[0], o[1], o[2], o[3]])
    }

    /// The GID of an IPv6 address (its 16 bytes).
    #[inline]
    pub const fn from_ipv6(addr: Ipv6Addr) -> Gid {
        Gid(addr.octets())
    }

    /// The GID of an IP address.
    #[inline]
    pub const fn from_ip(addr: IpAddr) -> Gid {
        match addr {
            IpAddr::V4(a) => Gid::from_ipv4(a),
            IpAddr::V6(a) => Gid::from_ipv6(a),
        }
    }

    /// The IPv4 address if this GID is IPv4-mapped.
    #[inline]
    pub const fn to_ipv4(&self) -> Option<Ipv4Addr> {
        let b = &self.0;
        if b[0] == 0
            && b[1] == 0
            && b[2] == 0
            && b[3] == 0
            && b[4] == 0
            && b[5] == 0
            && b[6] == 0
            && b[7] == 0
            && b[8] == 0
            && b[9] == 0
            && b[10] == 0xff
            && b[11] == 0xff
        {
            Some(Ipv4Addr::new(b[12], b[13], b[14], b[15]))
        } else {
            None
        }
    }

    /// The IP address this GID stands for on RoCEv2 (IPv4 when mapped, else IPv6).
    #[inline]
    pub const fn to_ip(&self) -> IpAddr {
        match self.to_ipv4() {
            Some(a) => IpAddr::V4(a),
            None => IpAddr::V6(Ipv6Addr::from_octets(self.0)),
        }
    }

    /// `rdma_is_multicast_addr`: first byte 0xff, or IPv4-mapped inside 224.0.0.0/4.
    #[inline]
    pub const fn is_multicast(&self) -> bool {
        if self.0[0] == 0xff {
            return true;
        }
        match self.to_ipv4() {
            Some(a) => a.is_multicast(),
            None => false,
        }
    }

    /// The 64-bit subnet prefix (bytes 0..8).
    pub const fn subnet_prefix(&self) -> u64 {
        u64::from_be_bytes([self.0[0], self.0[1], self.0[2], self.0[3], self.0[4], self.0[5], self.0[6], self.0[7]])
    }

    /// The 64-bit interface identifier (bytes 8..16).
    pub const fn interface_id(&self) -> u64 {
        u64::from_be_bytes([
            self.0[8], self.0[9], self.0[10], self.0[11], self.0[12], self.0[13], self.0[14], self.0[15],
        ])
    }

    /// Build from a subnet prefix and an interface identifier (GUID).
    pub const fn from_parts(prefix: u64, guid: u64) -> Gid {
        let p = prefix.to_be_bytes();
        let g = guid.to_be_bytes();
        Gid([p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]])
    }
}

impl From<[u8; 16]> for Gid {
    fn from(b: [u8; 16]) -> Self {
        Gid(b)
    }
}

impl From<IpAddr> for Gid {
    fn from(a: IpAddr) -> Self {
        Gid::from_ip(a)
    }
}

/// Printed as an IPv6 address (`::ffff:239.1.1.1`, `fe80::1`), as tshark prints GIDs.
impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&Ipv6Addr::from_octets(self.0), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_mapping_round_trips() {
        let g = Gid::from_ipv4(Ipv4Addr::new(239, 1, 1, 1));
        assert_eq!(g.0[10..12], [0xff, 0xff]);
        assert_eq!(g.to_ip(), IpAddr::V4(Ipv4Addr::new(239, 1, 1, 1)));
        assert!(g.is_multicast());
        assert!(!Gid::from_ipv4(Ipv4Addr::new(198, 18, 0, 1)).is_multicast());
        assert!(Gid::from_ipv6("ff12:401b::1".parse().unwrap()).is_multicast());
        extern crate std;
        assert_eq!(std::format!("{g}"), "::ffff:239.1.1.1");
    }
}
