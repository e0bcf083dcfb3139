//! InfiniBand Communication Management (management class 0x07) message bodies and the
//! RDMA-CM private-data header.
//!
//! Every CM message is a MAD whose 232-byte data area (MAD bytes 24..256) holds one message
//! body. The modules here describe those bodies only; the 24-byte MAD header is `crate::mad`'s.
//! Each body module has a checked view (`Packet`) and an owned `Repr` over the data area, with
//! every field of IBTA vol. 1 chapter 12 (tables 106–120) as the Linux kernel encodes it
//! (`include/rdma/ibta_vol1_c12.h`, `drivers/infiniband/core/cm_msgs.h`). Reserved bits and
//! bytes are kept, so any body re-emits byte for byte.
//!
//! Offsets in each `field` module are relative to the start of the data area. Errors carry
//! offsets relative to the start of the MAD (data-area offset + [`DATA_OFFSET`]), so that a
//! caller holding the whole frame shifts them once more with [`crate::Error::add_offset`].
//!
//! [`CmMessage`] dispatches on the MAD attribute ID ([`attr`]). LAP, APR and ClassPortInfo are
//! kept as raw [`CmMessage::Other`] bodies.
//!
//! The RDMA-CM header that `rdma_connect()` puts at the front of REQ and SIDR_REQ private data
//! for the IP port spaces lives in [`cma_hdr`], with the IP service-ID helpers.

use crate::error::{Error, Layer, Result};

/// What every CM body's `Repr` has besides its field table: `LEN` (the whole data area),
/// `PRIVATE_DATA_LEN` (the kernel's `IB_CM_*_PRIVATE_DATA_SIZE`), `buffer_len`, and
/// `parse_bytes` / `emit_bytes`.
macro_rules! cm_body {
    (private_data: $len:expr, $kernel_name:literal) => {
        impl Repr {
            /// The body length: the whole data area.
            pub const LEN: usize = DATA_LEN;
            #[doc = concat!("The private-data size, `", $kernel_name, "`.")]
            pub const PRIVATE_DATA_LEN: usize = $len;

            /// The body length: 232.
            pub const fn buffer_len(&self) -> usize {
                DATA_LEN
            }
        }

        repr_bytes!(Repr);
    };
}

pub mod cma_hdr;
pub mod drep;
pub mod dreq;
pub mod mra;
pub mod rej;
pub mod rep;
pub mod req;
pub mod rtu;
pub mod sidr_rep;
pub mod sidr_req;

pub use cma_hdr::{Packet as CmaHeaderPacket, Repr as CmaHeaderRepr};
pub use drep::{Packet as DrepPacket, Repr as DrepRepr};
pub use dreq::{Packet as DreqPacket, Repr as DreqRepr};
pub use mra::{Packet as MraPacket, Repr as MraRepr};
pub use rej::{Packet as RejPacket, RejReason, Repr as RejRepr};
pub use rep::{Packet as RepPacket, Repr as RepRepr};
pub use req::{Packet as ReqPacket, PathRepr, Repr as ReqRepr};
pub use rtu::{Packet as RtuPacket, Repr as RtuRepr};
pub use sidr_rep::{Packet as SidrRepPacket, Repr as SidrRepRepr, SidrStatus};
pub use sidr_req::{Packet as SidrReqPacket, Repr as SidrReqRepr};

/// The management class of Communication Management, `IB_MGMT_CLASS_CM` [ib_mad.h].
pub const MGMT_CLASS: u8 = 0x07;
/// The CM class version, `IB_CM_CLASS_VERSION` [cm_msgs.h].
pub const CLASS_VERSION: u8 = 2;
/// The method every CM message except ClassPortInfo uses: Send (0x03) [cm.c cm_format_mad_hdr].
pub const METHOD_SEND: u8 = 0x03;
/// The size of the MAD data area a CM body occupies (MAD bytes 24..256).
pub const DATA_LEN: usize = 232;
/// Where the data area starts in the MAD (`sizeof(struct ib_mad_hdr)`); added to every error
/// offset this module reports.
pub const DATA_OFFSET: usize = 24;

/// CM attribute IDs (MAD header `attr_id`) [ib_cm.h CM_*_ATTR_ID; IBTA vol. 1 table 103].
pub mod attr {
    /// ClassPortInfo (method Get/GetResp, not a connection message).
    pub const CLASS_PORT_INFO: u16 = 0x0001;
    /// ConnectRequest.
    pub const REQ: u16 = 0x0010;
    /// Message Receipt Acknowledgement.
    pub const MRA: u16 = 0x0011;
    /// ConnectReject.
    pub const REJ: u16 = 0x0012;
    /// ConnectReply.
    pub const REP: u16 = 0x0013;
    /// ReadyToUse.
    pub const RTU: u16 = 0x0014;
    /// DisconnectRequest.
    pub const DREQ: u16 = 0x0015;
    /// DisconnectReply.
    pub const DREP: u16 = 0x0016;
    /// Service ID Resolution Request.
    pub const SIDR_REQ: u16 = 0x0017;
    /// Service ID Resolution Response.
    pub const SIDR_REP: u16 = 0x0018;
    /// LoadAlternatePath.
    pub const LAP: u16 = 0x0019;
    /// AlternatePathResponse.
    pub const APR: u16 = 0x001A;

    /// The short name of a CM attribute ("REQ", "SIDR_REP", …), or "Unknown".
    pub const fn name(attribute_id: u16) -> &'static str {
        match attribute_id {
            CLASS_PORT_INFO => "ClassPortInfo",
            REQ => "REQ",
            MRA => "MRA",
            REJ => "REJ",
            REP => "REP",
            RTU => "RTU",
            DREQ => "DREQ",
            DREP => "DREP",
            SIDR_REQ => "SIDR_REQ",
            SIDR_REP => "SIDR_REP",
            LAP => "LAP",
            APR => "APR",
            _ => "Unknown",
        }
    }
}

enum_with_unknown! {
    /// Which message an MRA acknowledges or a REJ rejects (2 bits), `enum cm_msg_response`
    /// [cm_msgs.h]. For an MRA, `Other` means a LAP.
    pub enum MsgResponse(u8) {
        /// The REQ.
        Req = 0,
        /// The REP.
        Rep = 1,
        /// Any other message (LAP for an MRA).
        Other = 2,
    }
}

/// Check that a data area holds the full 232 bytes; the error points at MAD byte 24.
#[inline]
pub(crate) fn check_data_len(buf: &[u8]) -> Result<()> {
    if buf.len() < DATA_LEN {
        Err(Error::len(Layer::Cm, DATA_OFFSET, DATA_LEN, buf.len()))
    } else {
        Ok(())
    }
}

// The bit helpers live with the byte helpers; the CM bodies use them through here.
pub(crate) use crate::field::{get_bits, set_bits};

/// One CM message body, chosen by the MAD attribute ID. Bodies this crate does not decode
/// (ClassPortInfo, LAP, APR, unknown IDs) are kept raw in `Other`.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmMessage {
    /// ConnectRequest.
    Req(ReqRepr),
    /// Message Receipt Acknowledgement.
    Mra(MraRepr),
    /// ConnectReject.
    Rej(RejRepr),
    /// ConnectReply.
    Rep(RepRepr),
    /// ReadyToUse.
    Rtu(RtuRepr),
    /// DisconnectRequest.
    Dreq(DreqRepr),
    /// DisconnectReply.
    Drep(DrepRepr),
    /// Service ID Resolution Request.
    SidrReq(SidrReqRepr),
    /// Service ID Resolution Response.
    SidrRep(SidrRepRepr),
    /// Any other attribute, with its data area as it was.
    Other {
        /// The MAD attribute ID.
        attribute_id: u16,
        /// The 232-byte data area.
        #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serde_support::hex"))]
        data: [u8; DATA_LEN],
    },
}

impl CmMessage {
    /// Parse the data area `data` (MAD bytes 24..; at least 232 bytes) of a CM MAD whose
    /// attribute ID is `attribute_id`. A shorter buffer is an [`Error::Len`] at MAD byte 24.
    pub fn parse(attribute_id: u16, data: &[u8]) -> Result<CmMessage> {
        check_data_len(data)?;
        Ok(match attribute_id {
            attr::REQ => CmMessage::Req(ReqRepr::parse_bytes(data)?),
            attr::MRA => CmMessage::Mra(MraRepr::parse_bytes(data)?),
            attr::REJ => CmMessage::Rej(RejRepr::parse_bytes(data)?),
            attr::REP => CmMessage::Rep(RepRepr::parse_bytes(data)?),
            attr::RTU => CmMessage::Rtu(RtuRepr::parse_bytes(data)?),
            attr::DREQ => CmMessage::Dreq(DreqRepr::parse_bytes(data)?),
            attr::DREP => CmMessage::Drep(DrepRepr::parse_bytes(data)?),
            attr::SIDR_REQ => CmMessage::SidrReq(SidrReqRepr::parse_bytes(data)?),
            attr::SIDR_REP => CmMessage::SidrRep(SidrRepRepr::parse_bytes(data)?),
            other => CmMessage::Other { attribute_id: other, data: crate::field::array(data, 0) },
        })
    }

    /// Write the body into the data area `data`.
    ///
    /// # Panics
    /// If `data` is shorter than [`DATA_LEN`] (232) bytes.
    pub fn emit(&self, data: &mut [u8]) {
        match self {
            CmMessage::Req(r) => r.emit_bytes(data),
            CmMessage::Mra(r) => r.emit_bytes(data),
            CmMessage::Rej(r) => r.emit_bytes(data),
            CmMessage::Rep(r) => r.emit_bytes(data),
            CmMessage::Rtu(r) => r.emit_bytes(data),
            CmMessage::Dreq(r) => r.emit_bytes(data),
            CmMessage::Drep(r) => r.emit_bytes(data),
            CmMessage::SidrReq(r) => r.emit_bytes(data),
            CmMessage::SidrRep(r) => r.emit_bytes(data),
            CmMessage::Other { data: d, .. } => data[..DATA_LEN].copy_from_slice(d),
        }
    }

    /// The size of the body: always [`DATA_LEN`].
    pub const fn buffer_len(&self) -> usize {
        DATA_LEN
    }

    /// The MAD attribute ID that carries this body.
    pub const fn attribute_id(&self) -> u16 {
        match self {
            CmMessage::Req(_) => attr::REQ,
            CmMessage::Mra(_) => attr::MRA,
            CmMessage::Rej(_) => attr::REJ,
            CmMessage::Rep(_) => attr::REP,
            CmMessage::Rtu(_) => attr::RTU,
            CmMessage::Dreq(_) => attr::DREQ,
            CmMessage::Drep(_) => attr::DREP,
            CmMessage::SidrReq(_) => attr::SIDR_REQ,
            CmMessage::SidrRep(_) => attr::SIDR_REP,
            CmMessage::Other { attribute_id, .. } => *attribute_id,
        }
    }

    /// The short message name: "REQ", "MRA", "REJ", "REP", "RTU", "DREQ", "DREP", "SIDR_REQ",
    /// "SIDR_REP", and for `Other` "ClassPortInfo", "LAP", "APR" or "Unknown".
    pub const fn name(&self) -> &'static str {
        attr::name(self.attribute_id())
    }

    /// The sender's Local Communication ID, for the messages that carry one (not SIDR, whose
    /// RequestID is a different field, and not `Other`).
    pub const fn local_comm_id(&self) -> Option<u32> {
        match self {
            CmMessage::Req(r) => Some(r.local_comm_id),
            CmMessage::Mra(r) => Some(r.local_comm_id),
            CmMessage::Rej(r) => Some(r.local_comm_id),
            CmMessage::Rep(r) => Some(r.local_comm_id),
            CmMessage::Rtu(r) => Some(r.local_comm_id),
            CmMessage::Dreq(r) => Some(r.local_comm_id),
            CmMessage::Drep(r) => Some(r.local_comm_id),
            CmMessage::SidrReq(_) | CmMessage::SidrRep(_) | CmMessage::Other { .. } => None,
        }
    }

    /// The Remote Communication ID (the peer's local ID), for the messages that carry one
    /// (every connection message but REQ).
    pub const fn remote_comm_id(&self) -> Option<u32> {
        match self {
            CmMessage::Mra(r) => Some(r.remote_comm_id),
            CmMessage::Rej(r) => Some(r.remote_comm_id),
            CmMessage::Rep(r) => Some(r.remote_comm_id),
            CmMessage::Rtu(r) => Some(r.remote_comm_id),
            CmMessage::Dreq(r) => Some(r.remote_comm_id),
            CmMessage::Drep(r) => Some(r.remote_comm_id),
            CmMessage::Req(_) | CmMessage::SidrReq(_) | CmMessage::SidrRep(_) | CmMessage::Other { .. } => None,
        }
    }
}

/// Strategies and the kernel's `IBA_SET` re-implemented, shared by the tests of the CM modules.
#[cfg(test)]
pub(crate) mod test_util {
    extern crate std;
    use proptest::prelude::*;
    use std::vec::Vec;

    /// Any `[u8; N]`.
    pub fn bytes<const N: usize>() -> impl Strategy<Value = [u8; N]> {
        proptest::collection::vec(any::<u8>(), N).prop_map(|v: Vec<u8>| {
            let mut a = [0u8; N];
            a.copy_from_slice(&v);
            a
        })
    }

    /// Any value of `width` bits.
    pub fn bits(width: u32) -> impl Strategy<Value = u8> {
        0u8..=(((1u16 << width) - 1) as u8)
    }

    /// Any 24-bit value.
    pub fn u24() -> impl Strategy<Value = u32> {
        0u32..=0xFF_FFFF
    }

    /// The kernel's `GENMASK(h, l)` for 64-bit values.
    fn genmask(h: u32, l: u32) -> u64 {
        (u64::MAX >> (63 - h)) & (u64::MAX << l)
    }

    /// `FIELD_PREP(mask, v)`.
    fn field_prep(mask: u64, v: u64) -> u64 {
        (v << mask.trailing_zeros()) & mask
    }

    /// `IBA_SET(CM_FIELD_BLOC(struct, byte, bit_offset, width), msg, v)` on the data area.
    /// (The kernel offsets include the 24-byte MAD header; 24 is a multiple of 8, so the
    /// alignment arithmetic of the macros is the same on data-area offsets.)
    pub fn iba_set_bloc(d: &mut [u8], byte: usize, bit_offset: u32, width: u32, v: u64) {
        let mask = genmask(7 - bit_offset, 7 - bit_offset - (width - 1));
        let old = d[byte] as u64;
        d[byte] = ((old & !mask) | field_prep(mask, v)) as u8;
    }

    /// `IBA_SET(CM_FIELD8_LOC(struct, byte, width), …)`.
    pub fn iba_set8(d: &mut [u8], byte: usize, width: u32, v: u64) {
        iba_set_bloc(d, byte, 0, width, v);
    }

    /// `IBA_SET(CM_FIELD16_LOC(struct, byte, width), …)`.
    pub fn iba_set16(d: &mut [u8], byte: usize, width: u32, v: u64) {
        let at = byte & 0xFFFE;
        let hi = 15 - ((byte % 2) as u32) * 8;
        let mask = genmask(hi, hi - (width - 1));
        let old = u16::from_be_bytes([d[at], d[at + 1]]) as u64;
        let new = ((old & !mask) | field_prep(mask, v)) as u16;
        d[at..at + 2].copy_from_slice(&new.to_be_bytes());
    }

    /// `IBA_SET(CM_FIELD32_LOC(struct, byte, width), …)`.
    pub fn iba_set32(d: &mut [u8], byte: usize, width: u32, v: u64) {
        let at = byte & 0xFFFC;
        let hi = 31 - ((byte % 4) as u32) * 8;
        let mask = genmask(hi, hi - (width - 1));
        let old = u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]]) as u64;
        let new = ((old & !mask) | field_prep(mask, v)) as u32;
        d[at..at + 4].copy_from_slice(&new.to_be_bytes());
    }

    /// `IBA_SET(CM_FIELD64_LOC(struct, byte), …)`.
    pub fn iba_set64(d: &mut [u8], byte: usize, v: u64) {
        d[byte..byte + 8].copy_from_slice(&v.to_be_bytes());
    }

    /// `IBA_SET_MEM(CM_FIELD_MLOC(…), msg, src, len)` / `*IBA_GET_MEM_PTR(…) = x`.
    pub fn iba_set_mem(d: &mut [u8], byte: usize, src: &[u8]) {
        d[byte..byte + src.len()].copy_from_slice(src);
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn attribute_ids_and_names() {
        assert_eq!(attr::REQ, 0x0010);
        assert_eq!(attr::APR, 0x001A);
        assert_eq!(attr::name(attr::SIDR_REP), "SIDR_REP");
        assert_eq!(attr::name(0x0099), "Unknown");
        let lap = CmMessage::parse(attr::LAP, &[0u8; DATA_LEN]).unwrap();
        assert_eq!(lap.name(), "LAP");
        assert_eq!(lap.local_comm_id(), None);
    }

    #[test]
    fn truncated_data_area_is_a_len_error_at_mad_byte_24() {
        let buf = [0u8; DATA_LEN];
        for id in [
            attr::REQ,
            attr::MRA,
            attr::REJ,
            attr::REP,
            attr::RTU,
            attr::DREQ,
            attr::DREP,
            attr::SIDR_REQ,
            attr::SIDR_REP,
            attr::LAP,
            attr::CLASS_PORT_INFO,
            0x1234,
        ] {
            for len in 0..DATA_LEN {
                assert_eq!(
                    CmMessage::parse(id, &buf[..len]),
                    Err(Error::len(Layer::Cm, DATA_OFFSET, DATA_LEN, len)),
                    "attribute 0x{id:04x}, length {len}"
                );
            }
            assert!(CmMessage::parse(id, &buf).is_ok());
        }
        // A longer buffer (the rest of a frame) is fine: only 232 bytes are read.
        assert!(CmMessage::parse(attr::REQ, &[0u8; 300]).is_ok());
    }

    #[test]
    fn comm_ids() {
        let mut d = [0u8; DATA_LEN];
        d[..8].copy_from_slice(&[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]);
        let rtu = CmMessage::parse(attr::RTU, &d).unwrap();
        assert_eq!(rtu.local_comm_id(), Some(0x1122_3344));
        assert_eq!(rtu.remote_comm_id(), Some(0x5566_7788));
        let req = CmMessage::parse(attr::REQ, &d).unwrap();
        assert_eq!(req.local_comm_id(), Some(0x1122_3344));
        assert_eq!(req.remote_comm_id(), None);
        let sidr = CmMessage::parse(attr::SIDR_REQ, &d).unwrap();
        assert_eq!(sidr.local_comm_id(), None);
        assert_eq!(sidr.name(), "SIDR_REQ");
    }

    #[test]
    fn msg_response_codes() {
        assert_eq!(u8::from(MsgResponse::Other), 2);
        assert_eq!(MsgResponse::from(3), MsgResponse::Unknown(3));
    }

    fn any_attr() -> impl Strategy<Value = u16> {
        prop_oneof![0x0010u16..=0x001A, Just(0x0001u16), any::<u16>()]
    }

    proptest! {
        /// Every data area of every attribute re-emits byte for byte.
        #[test]
        fn any_body_reemits_byte_for_byte(id in any_attr(), data in test_util::bytes::<DATA_LEN>()) {
            let msg = CmMessage::parse(id, &data).unwrap();
            prop_assert_eq!(msg.attribute_id(), id);
            let mut out = [0u8; DATA_LEN];
            msg.emit(&mut out);
            prop_assert_eq!(&out[..], &data[..]);
            prop_assert_eq!(CmMessage::parse(id, &out).unwrap(), msg);
        }

        /// Parsing never panics, whatever the length.
        #[test]
        fn parse_never_panics(id in any_attr(), data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = CmMessage::parse(id, &data);
        }
    }
}

impl CmMessage {
    /// The whole MAD that carries this message, as the kernel's CM sends it [cm.c
    /// cm_format_mad_hdr]: base version 1, class 0x07, class version 2, method Send (0x03),
    /// status 0, the given transaction ID, attribute modifier 0.
    pub fn to_mad(&self, transaction_id: u64) -> crate::mad::MadRepr {
        let mut data = [0u8; DATA_LEN];
        self.emit(&mut data);
        crate::mad::MadRepr {
            header: crate::mad::MadHeader {
                base_version: 1,
                mgmt_class: crate::mad::MgmtClass::ComMgmt,
                class_version: CLASS_VERSION,
                response: false,
                method: crate::mad::Method::Send,
                status: crate::mad::MadStatus(0),
                class_specific: 0,
                transaction_id,
                attribute_id: self.attribute_id(),
                reserved: 0,
                attribute_modifier: 0,
            },
            data,
        }
    }
}
