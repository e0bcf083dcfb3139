//! # roce-wire: every wire format of a userspace RoCEv2 CM and multicast stack
//!
//! RoCEv2 framing (Ethernet, optional 802.1Q, IPv4/IPv6, UDP 4791, BTH and every extension
//! header, pad, ICRC exactly as Linux rxe computes it), the InfiniBand management formats
//! (MAD, RMPP, SA header, MCMemberRecord, ClassPortInfo, ServiceRecord, the CM messages and the RDMA-CM
//! private-data header) and the RoCE-native multicast and neighbour formats (IGMP, MLDv2,
//! ARP, neighbour discovery).
//!
//! ## The contract (after smoltcp's `wire`)
//! Each format lives in one module with
//! - a `field` module of byte ranges,
//! - a checked zero-copy view `Packet<T: AsRef<[u8]>>`: once `Packet::new_checked` (or
//!   `check_len`) returned `Ok`, no accessor panics; setters exist for `T: AsMut<[u8]>`;
//! - an owned `Repr` with `parse`, `buffer_len` and `emit`. `emit` never panics when the
//!   buffer is at least `buffer_len()` bytes long.
//!
//! Enums keep unknown values (`Opcode::Unknown(0x1f)`), so any input re-emits byte for byte.
//! Every parse error is an [`Error`] that names the [`Layer`] and the byte offset.
//! Parsing untrusted input never panics: the fuzz targets in `fuzz/` hold the crate to it.
//!
//! The crate is `no_std` (with an optional `std` feature for `std::error::Error` users) and
//! forbids `unsafe`.
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "std")]
extern crate std;

// IGMPv3/MLDv2 Reprs hold any number of records and sources with an allocator.
#[cfg(feature = "alloc")]
extern crate alloc;

#[macro_use]
mod macros;

pub mod error;
pub mod field;
pub mod gid;

pub mod aeth;
pub mod atomic_ack_eth;
pub mod atomic_eth;
pub mod bth;
pub mod datagram;
pub mod demux;
pub mod deth;
pub mod ext;
pub mod feth;
pub mod frame;
pub mod golden;
pub mod grh;
pub mod ib_frame;
pub mod icrc;
pub mod ieth;
pub mod immdt;
pub mod lrh;
pub mod reth;
pub mod rxe_accept;
pub mod vcrc;
pub mod xrceth;

pub mod class_port_info;
pub mod cm;
pub mod mad;
pub mod mcmember;
pub mod rmpp;
pub mod sa;
pub mod service_record;
pub mod smp;

pub mod arp;
pub mod igmp;
pub mod l2;
pub mod mld;
pub mod multicast;
pub mod ndisc;

pub mod erf;

pub mod rng;

#[cfg(feature = "serde")]
pub mod serde_support;

pub use error::{ContentError, Error, Layer, Result};
/// The IPv4 header's DSCP and ECN fields, for dependents that set a frame's traffic class
/// (re-exported so that they need no etherparse of their own).
pub use etherparse::{IpDscp, IpEcn};
pub use gid::Gid;

/// A MAC address displayed as `aa:bb:cc:dd:ee:ff` (lower-case hex, colons): the one MAC
/// formatter of the workspace. (smoltcp's `EthernetAddress` displays with dashes.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MacAddr(pub [u8; 6]);

impl core::fmt::Display for MacAddr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let m = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
    }
}

/// Bytes displayed as one lower-case hex string without separators (`0a1b…`): the one hex
/// formatter of the workspace (JSON output of byte arrays uses it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HexBytes<'a>(pub &'a [u8]);

impl core::fmt::Display for HexBytes<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// The UDP destination port of RoCEv2.
pub const ROCEV2_UDP_PORT: u16 = 4791;
/// The multicast destination QP number.
pub const MULTICAST_QPN: u32 = 0xFF_FFFF;
/// The Q_Key of QP1 (GSI), `IB_QP1_QKEY`.
pub const GSI_QKEY: u32 = 0x8001_0000;
/// The Q_Key RDMA-CM uses for UD port spaces, `RDMA_UDP_QKEY`.
pub const RDMA_UDP_QKEY: u32 = 0x0123_4567;
/// The default (full-membership) partition key.
pub const DEFAULT_PKEY: u16 = 0xFFFF;
/// The size of every MAD carried here.
pub const MAD_SIZE: usize = 256;

#[cfg(test)]
mod tests {
    #[test]
    fn mac_addr_displays_with_colons() {
        extern crate std;
        use std::string::ToString;
        assert_eq!(super::MacAddr([0x02, 0, 0xab, 0x10, 0xff, 1]).to_string(), "02:00:ab:10:ff:01");
        assert_eq!(super::HexBytes(&[0x0a, 0x1b, 0xff]).to_string(), "0a1bff");
    }
}
