//! SIDR_REQ (Service ID Resolution Request, attribute 0x0017): IBTA vol. 1 table 119,
//! `struct cm_sidr_req_msg` [cm_msgs.h], `CM_SIDR_REQ_*` [ibta_vol1_c12.h]. Offsets are from
//! the start of the data area (MAD byte 24). tshark 4.0 does not dissect SIDR fields.
//!
//! RDMA-CM sends one from `rdma_connect()` on a UD id (`cma_resolve_ib_udp`), with the
//! RDMA-CM header ([`crate::cm::cma_hdr`]) at the front of the private data and the ServiceID
//! of `RDMA_PS_UDP`.

use crate::cm::{check_data_len, DATA_LEN, DATA_OFFSET};
use crate::error::Result;

/// Byte positions inside the SIDR_REQ body (data-area offsets).
pub mod field {
    use crate::field::*;
    /// RequestID (32): the sender's local ID.
    pub const REQUEST_ID: Field = 0..4;
    /// Partition Key (16).
    pub const PARTITION_KEY: Field = 4..6;
    /// Reserved.
    pub const RESERVED_6: Field = 6..8;
    /// ServiceID (64).
    pub const SERVICE_ID: Field = 8..16;
    /// Private data (216 bytes).
    pub const PRIVATE_DATA: Field = 16..232;
}

fixed_view!(check: check_data_len);

wire_fields! {
    /// An owned SIDR_REQ body.
    #[cfg_attr(feature = "serde", derive(serde::Serialize))]
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Repr {
        /// RequestID (the sender's local ID; the SIDR_REP echoes it).
        request_id, set_request_id: u32 = be32(field::REQUEST_ID),
        /// Partition Key.
        partition_key, set_partition_key: u16 = be16(field::PARTITION_KEY),
        /// Reserved bytes 6..8.
        reserved_6, set_reserved_6: [u8; 2] = array(field::RESERVED_6),
        /// ServiceID.
        service_id, set_service_id: u64 = be64(field::SERVICE_ID),
        /// Private data (216 bytes; RDMA-CM puts its 36-byte header first).
        private_data, private_data_mut: [u8; 216] = bytes(field::PRIVATE_DATA),
    }
}

cm_body!(private_data: 216, "IB_CM_SIDR_REQ_PRIVATE_DATA_SIZE");

impl Repr {
    /// The RDMA-CM header at the front of the private data (IP port spaces only). Errors carry
    /// MAD offsets (private data starts at MAD byte 40).
    pub fn cma_header(&self) -> Result<crate::cm::cma_hdr::Repr> {
        crate::cm::cma_hdr::Repr::parse_bytes(&self.private_data)
            .map_err(|e| e.add_offset(DATA_OFFSET + field::PRIVATE_DATA.start))
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::cm::cma_hdr::{self, RDMA_PS_UDP};
    use crate::cm::test_util::*;
    use crate::error::{ContentError, Error, Layer};
    use core::net::{IpAddr, Ipv4Addr};
    use proptest::prelude::*;

    /// A SIDR_REQ as the kernel sends it for `rdma_connect()` on a UD id
    /// (`cma_resolve_ib_udp` + `cm_format_sidr_req`): request ID = local ID, P_Key of the
    /// path, ServiceID of RDMA_PS_UDP, private data = cma_hdr + user data in a kzalloc'ed
    /// buffer.
    #[test]
    fn golden_kernel_sidr_req() {
        let src = Ipv4Addr::new(198, 18, 0, 1);
        let dst = Ipv4Addr::new(198, 18, 0, 2);
        let mut d = [0u8; DATA_LEN];
        iba_set32(&mut d, 0, 32, 0x0BAD_CAFE); // CM_SIDR_REQ_REQUESTID
        iba_set16(&mut d, 4, 16, 0xFFFF); // CM_SIDR_REQ_PARTITION_KEY
        iba_set64(&mut d, 8, cma_hdr::service_id(RDMA_PS_UDP, 7471)); // CM_SIDR_REQ_SERVICEID
        let mut pd = [0u8; 36 + 3];
        pd[1] = 0x40;
        pd[2..4].copy_from_slice(&0xD431u16.to_be_bytes());
        pd[16..20].copy_from_slice(&src.octets());
        pd[32..36].copy_from_slice(&dst.octets());
        pd[36..].copy_from_slice(b"hey");
        iba_set_mem(&mut d, 16, &pd); // CM_SIDR_REQ_PRIVATE_DATA

        let mut r = Repr {
            request_id: 0x0BAD_CAFE,
            partition_key: 0xFFFF,
            service_id: 0x0000_0000_0111_1D2F,
            ..Repr::default()
        };
        cma_hdr::Repr::new_v4(src, 0xD431, dst).emit_bytes(&mut r.private_data);
        r.private_data[36..39].copy_from_slice(b"hey");
        let mut out = [0u8; DATA_LEN];
        r.emit_bytes(&mut out);
        assert_eq!(out, d);
        assert_eq!(d[..16], [0x0B, 0xAD, 0xCA, 0xFE, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0x01, 0x11, 0x1D, 0x2F]);
        assert_eq!(d[16..20], [0x00, 0x40, 0xD4, 0x31]);
        let p = Repr::parse_bytes(&d).unwrap();
        assert_eq!(p, r);
        let h = p.cma_header().unwrap();
        assert_eq!((h.src_ip(), h.dst_ip()), (IpAddr::V4(src), IpAddr::V4(dst)));
        assert_eq!(cma_hdr::split_service_id(p.service_id), (RDMA_PS_UDP, 7471));

        r.private_data[0] = 1;
        assert_eq!(r.cma_header(), Err(Error::content(Layer::CmaHeader, 40, ContentError::Malformed)));
    }

    #[test]
    fn truncation() {
        let d = [0u8; DATA_LEN];
        for len in 0..DATA_LEN {
            assert_eq!(Repr::parse_bytes(&d[..len]), Err(Error::len(Layer::Cm, 24, DATA_LEN, len)));
        }
    }

    proptest! {
        #[test]
        fn repr_round_trips(id in any::<u32>(), pk in any::<u16>(), res in any::<[u8; 2]>(), sid in any::<u64>(), pd in bytes::<216>()) {
            let repr = Repr { request_id: id, partition_key: pk, reserved_6: res, service_id: sid, private_data: pd };
            let mut buf = [0u8; DATA_LEN];
            repr.emit_bytes(&mut buf);
            prop_assert_eq!(Repr::parse_bytes(&buf).unwrap(), repr);
        }

        #[test]
        fn bytes_round_trip(d in bytes::<DATA_LEN>()) {
            let mut out = [0u8; DATA_LEN];
            Repr::parse_bytes(&d).unwrap().emit_bytes(&mut out);
            prop_assert_eq!(&out[..], &d[..]);
        }
    }
}
