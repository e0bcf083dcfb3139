//! The RMPP (Reliable Multi-Packet Protocol) header: 12 bytes at MAD offset 24.
//!
//! [ib_mad.h `struct ib_rmpp_hdr`, `IB_MGMT_RMPP_*`; IBA 13.6.2]. Offsets in this module are
//! relative to the RMPP header itself (MAD byte 24 is offset 0 here).
//!
//! | Off | Size | Bits | Field |
//! |---|---|---|---|
//! | 0 | 1 | | RMPPVersion (1 when active, 0 in single-MAD SA requests) |
//! | 1 | 1 | | RMPPType (1 DATA, 2 ACK, 3 STOP, 4 ABORT) |
//! | 2 | 1 | 7:3 | RRespTime |
//! | 2 | 1 | 2:0 | RMPPFlags (0x1 Active, 0x2 First, 0x4 Last) |
//! | 3 | 1 | | RMPPStatus |
//! | 4 | 4 | | Data1: SegmentNumber (DATA, ACK) |
//! | 8 | 4 | | Data2: PayloadLength (DATA) / NewWindowLast (ACK) |

use core::fmt;
use core::ops::{BitAnd, BitOr, BitOrAssign};

use crate::error::{Layer, Result};
use crate::field::{be32, put32};

/// Length of the RMPP header.
pub const RMPP_HEADER_LEN: usize = 12;
/// The RMPP version in use, `IB_MGMT_RMPP_VERSION` [ib_mad.h].
pub const RMPP_VERSION: u8 = 1;
/// RRespTime value meaning "no response time given", `IB_MGMT_RMPP_NO_RESPTIME` [ib_mad.h].
pub const NO_RESPTIME: u8 = 0x1F;

/// RMPPStatus values [ib_mad.h `IB_MGMT_RMPP_STATUS_*`].
pub mod status {
    /// Normal.
    pub const SUCCESS: u8 = 0;
    /// Resources exhausted (STOP).
    pub const RESX: u8 = 1;
    /// Total time too long (ABORT).
    pub const T2L: u8 = 118;
    /// Inconsistent Last and PayloadLength.
    pub const BAD_LEN: u8 = 119;
    /// Inconsistent First and SegmentNumber.
    pub const BAD_SEG: u8 = 120;
    /// Bad RMPPType.
    pub const BADT: u8 = 121;
    /// NewWindowLast too small.
    pub const W2S: u8 = 122;
    /// SegmentNumber too big.
    pub const S2B: u8 = 123;
    /// Illegal status.
    pub const BAD_STATUS: u8 = 124;
    /// Unsupported version.
    pub const UNV: u8 = 125;
    /// Too many retries.
    pub const TMR: u8 = 126;
    /// Unspecified error.
    pub const UNSPEC: u8 = 127;
}

/// Byte ranges of the RMPP header (relative to its start, MAD byte 24).
pub mod field {
    use crate::field::*;

    /// RMPPVersion.
    pub const VERSION: usize = 0;
    /// RMPPType.
    pub const TYPE: usize = 1;
    /// RRespTime (bits 7:3) and RMPPFlags (bits 2:0).
    pub const RESP_TIME_FLAGS: usize = 2;
    /// RMPPStatus.
    pub const STATUS: usize = 3;
    /// Data1 (SegmentNumber).
    pub const DATA1: Field = 4..8;
    /// Data2 (PayloadLength / NewWindowLast).
    pub const DATA2: Field = 8..12;
}

enum_with_unknown! {
    /// RMPPType [ib_mad.h `IB_MGMT_RMPP_TYPE_*`]. 0 (`NotUsed`) is what a MAD without RMPP
    /// carries (Wireshark: "Not an RMPP Packet").
    pub enum RmppType(u8) {
        /// 0: no RMPP.
        NotUsed = 0,
        /// DATA segment.
        Data = 1,
        /// ACK.
        Ack = 2,
        /// STOP.
        Stop = 3,
        /// ABORT.
        Abort = 4,
    }
}

/// RMPPFlags, the low 3 bits of byte 2 [ib_mad.h `IB_MGMT_RMPP_FLAG_*`].
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RmppFlags(pub u8);

impl RmppFlags {
    /// No flags.
    pub const NONE: RmppFlags = RmppFlags(0);
    /// RMPP is active for this MAD.
    pub const ACTIVE: RmppFlags = RmppFlags(0x1);
    /// First segment.
    pub const FIRST: RmppFlags = RmppFlags(0x2);
    /// Last segment.
    pub const LAST: RmppFlags = RmppFlags(0x4);

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: RmppFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// The raw bits.
    pub const fn bits(self) -> u8 {
        self.0
    }
}

impl BitOr for RmppFlags {
    type Output = RmppFlags;
    fn bitor(self, rhs: RmppFlags) -> RmppFlags {
        RmppFlags(self.0 | rhs.0)
    }
}

impl BitOrAssign for RmppFlags {
    fn bitor_assign(&mut self, rhs: RmppFlags) {
        self.0 |= rhs.0;
    }
}

impl BitAnd for RmppFlags {
    type Output = RmppFlags;
    fn bitand(self, rhs: RmppFlags) -> RmppFlags {
        RmppFlags(self.0 & rhs.0)
    }
}

/// Printed as `Active|First|Last` (unknown bits in hex, `none` when empty).
impl fmt::Display for RmppFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_flags(f, self.0 as u64, &[(0x1, "Active"), (0x2, "First"), (0x4, "Last")])
    }
}

/// Write `names` of the set bits of `v` joined by `|`, then any unnamed bits as hex; `none`
/// when `v` is 0. Shared by the flag newtypes of the management formats.
pub(crate) fn write_flags(f: &mut fmt::Formatter<'_>, v: u64, names: &[(u64, &str)]) -> fmt::Result {
    if v == 0 {
        return f.write_str("none");
    }
    let mut rest = v;
    let mut first = true;
    for &(bit, name) in names {
        if v & bit == bit && bit != 0 {
            if !first {
                f.write_str("|")?;
            }
            f.write_str(name)?;
            first = false;
            rest &= !bit;
        }
    }
    if rest != 0 {
        if !first {
            f.write_str("|")?;
        }
        write!(f, "{rest:#x}")?;
    }
    Ok(())
}

fixed_view!(Layer::Rmpp, RMPP_HEADER_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    /// RMPPVersion.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    /// RMPPType.
    pub fn rmpp_type(&self) -> RmppType {
        RmppType::from(self.buffer.as_ref()[field::TYPE])
    }

    /// RRespTime (5 bits), `ib_get_rmpp_resptime`.
    pub fn resp_time(&self) -> u8 {
        self.buffer.as_ref()[field::RESP_TIME_FLAGS] >> 3
    }

    /// RMPPFlags (3 bits), `ib_get_rmpp_flags`.
    pub fn flags(&self) -> RmppFlags {
        RmppFlags(self.buffer.as_ref()[field::RESP_TIME_FLAGS] & 0x7)
    }

    /// Byte 2 whole: RRespTime (7:3) and RMPPFlags (2:0).
    pub fn resp_time_flags(&self) -> u8 {
        self.buffer.as_ref()[field::RESP_TIME_FLAGS]
    }

    /// RMPPStatus.
    pub fn status(&self) -> u8 {
        self.buffer.as_ref()[field::STATUS]
    }

    /// Data1 (SegmentNumber).
    pub fn data1(&self) -> u32 {
        be32(self.buffer.as_ref(), field::DATA1.start)
    }

    /// Data2 (PayloadLength / NewWindowLast).
    pub fn data2(&self) -> u32 {
        be32(self.buffer.as_ref(), field::DATA2.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set RMPPVersion.
    pub fn set_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::VERSION] = v;
    }

    /// Set RMPPType.
    pub fn set_rmpp_type(&mut self, t: RmppType) {
        self.buffer.as_mut()[field::TYPE] = t.into();
    }

    /// Set RRespTime (masked to 5 bits), keeping the flags (`ib_set_rmpp_resptime`).
    pub fn set_resp_time(&mut self, t: u8) {
        let b = &mut self.buffer.as_mut()[field::RESP_TIME_FLAGS];
        *b = (*b & 0x7) | (t << 3);
    }

    /// Set RMPPFlags (masked to 3 bits), keeping RRespTime (`ib_set_rmpp_flags`).
    pub fn set_flags(&mut self, fl: RmppFlags) {
        let b = &mut self.buffer.as_mut()[field::RESP_TIME_FLAGS];
        *b = (*b & 0xF8) | (fl.0 & 0x7);
    }

    /// Set byte 2 whole: RRespTime (7:3) and RMPPFlags (2:0).
    pub fn set_resp_time_flags(&mut self, v: u8) {
        self.buffer.as_mut()[field::RESP_TIME_FLAGS] = v;
    }

    /// Set RMPPStatus.
    pub fn set_status(&mut self, s: u8) {
        self.buffer.as_mut()[field::STATUS] = s;
    }

    /// Set Data1.
    pub fn set_data1(&mut self, v: u32) {
        put32(self.buffer.as_mut(), field::DATA1.start, v);
    }

    /// Set Data2.
    pub fn set_data2(&mut self, v: u32) {
        put32(self.buffer.as_mut(), field::DATA2.start, v);
    }
}

/// The owned RMPP header [ib_mad.h `struct ib_rmpp_hdr`]. `Default` is the all-zero header of
/// a MAD that does not use RMPP.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RmppRepr {
    /// RMPPVersion.
    pub version: u8,
    /// RMPPType.
    pub rmpp_type: RmppType,
    /// RRespTime, 5 bits (emitted masked).
    pub resp_time: u8,
    /// RMPPFlags, 3 bits (emitted masked).
    pub flags: RmppFlags,
    /// RMPPStatus.
    pub status: u8,
    /// Data1: SegmentNumber for DATA and ACK.
    pub data1: u32,
    /// Data2: PayloadLength for DATA, NewWindowLast for ACK.
    pub data2: u32,
}

impl Default for RmppRepr {
    fn default() -> Self {
        RmppRepr {
            version: 0,
            rmpp_type: RmppType::NotUsed,
            resp_time: 0,
            flags: RmppFlags::NONE,
            status: 0,
            data1: 0,
            data2: 0,
        }
    }
}

impl RmppRepr {
    /// Encoded length (12).
    pub const LEN: usize = RMPP_HEADER_LEN;

    /// Read the header.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<RmppRepr> {
        packet.check_len()?;
        Ok(RmppRepr {
            version: packet.version(),
            rmpp_type: packet.rmpp_type(),
            resp_time: packet.resp_time(),
            flags: packet.flags(),
            status: packet.status(),
            data1: packet.data1(),
            data2: packet.data2(),
        })
    }

    /// Parse from the start of `buf` (which starts at the RMPP header, MAD byte 24).
    pub fn parse_bytes(buf: &[u8]) -> Result<RmppRepr> {
        RmppRepr::parse(&Packet::new_unchecked(buf))
    }

    /// Encoded length (12).
    pub const fn buffer_len(&self) -> usize {
        RMPP_HEADER_LEN
    }

    /// Whether the Active flag is set (otherwise the MAD is a single, non-RMPP MAD).
    pub const fn is_active(&self) -> bool {
        self.flags.contains(RmppFlags::ACTIVE)
    }

    /// SegmentNumber (Data1).
    pub const fn segment_number(&self) -> u32 {
        self.data1
    }

    /// PayloadLength (Data2 of a DATA segment).
    pub const fn payload_length(&self) -> u32 {
        self.data2
    }

    /// NewWindowLast (Data2 of an ACK).
    pub const fn new_window_last(&self) -> u32 {
        self.data2
    }

    /// Write the header; the buffer must hold 12 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        packet.set_version(self.version);
        packet.set_rmpp_type(self.rmpp_type);
        packet.set_resp_time_flags((self.resp_time << 3) | (self.flags.0 & 0x7));
        packet.set_status(self.status);
        packet.set_data1(self.data1);
        packet.set_data2(self.data2);
    }

    /// Write the header to the start of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than 12 bytes.
    pub fn emit_bytes(&self, buf: &mut [u8]) {
        self.emit(&mut Packet::new_unchecked(buf));
    }
}

#[cfg(test)]
pub(crate) mod tests {
    extern crate std;
    use super::*;
    use crate::error::Error;
    use proptest::prelude::*;
    use std::format;

    /// A DATA segment as OpenSM sends a single-MAD GetTableResp: version 1, type DATA,
    /// RRespTime 0x1F, flags Active|First|Last, segment 1, payload length 56.
    const DATA_SEG: [u8; 12] = [1, 1, 0xFF, 0, 0, 0, 0, 1, 0, 0, 0, 56];

    #[test]
    fn golden_parse_emit() {
        let r = RmppRepr::parse_bytes(&DATA_SEG).unwrap();
        assert_eq!(
            r,
            RmppRepr {
                version: 1,
                rmpp_type: RmppType::Data,
                resp_time: NO_RESPTIME,
                flags: RmppFlags::ACTIVE | RmppFlags::FIRST | RmppFlags::LAST,
                status: status::SUCCESS,
                data1: 1,
                data2: 56,
            }
        );
        assert!(r.is_active());
        assert_eq!(r.segment_number(), 1);
        assert_eq!(r.payload_length(), 56);
        let mut out = [0u8; 12];
        r.emit_bytes(&mut out);
        assert_eq!(out, DATA_SEG);
        assert_eq!(RmppRepr::parse_bytes(&[0; 12]), Ok(RmppRepr::default()));
    }

    #[test]
    fn view_setters_keep_neighbours() {
        let mut b = [0u8; 12];
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        p.set_flags(RmppFlags::LAST);
        p.set_resp_time(0x1F);
        assert_eq!(p.flags(), RmppFlags::LAST);
        assert_eq!(p.resp_time(), 0x1F);
        p.set_flags(RmppFlags::ACTIVE);
        assert_eq!(p.resp_time(), 0x1F);
        p.set_rmpp_type(RmppType::Ack);
        p.set_version(1);
        p.set_status(status::W2S);
        p.set_data1(7);
        p.set_data2(9);
        assert_eq!(p.rmpp_type(), RmppType::Ack);
        assert_eq!((p.version(), p.status(), p.data1(), p.data2()), (1, 122, 7, 9));
        assert_eq!(b, [1, 2, 0xF9, 122, 0, 0, 0, 7, 0, 0, 0, 9]);
    }

    #[test]
    fn truncation() {
        for len in 0..RMPP_HEADER_LEN {
            assert_eq!(RmppRepr::parse_bytes(&DATA_SEG[..len]), Err(Error::len(Layer::Rmpp, 0, 12, len)));
        }
    }

    #[test]
    fn flags_display() {
        assert_eq!(format!("{}", RmppFlags(7)), "Active|First|Last");
        assert_eq!(format!("{}", RmppFlags(0)), "none");
        assert_eq!(format!("{}", RmppFlags(0x0D)), "Active|Last|0x8");
        assert_eq!(RmppType::from(5), RmppType::Unknown(5));
    }

    pub(crate) fn arb_rmpp() -> impl Strategy<Value = RmppRepr> {
        (any::<u8>(), any::<u8>(), 0u8..32, 0u8..8, any::<u8>(), any::<u32>(), any::<u32>()).prop_map(
            |(v, t, rt, fl, st, d1, d2)| RmppRepr {
                version: v,
                rmpp_type: RmppType::from(t),
                resp_time: rt,
                flags: RmppFlags(fl),
                status: st,
                data1: d1,
                data2: d2,
            },
        )
    }

    proptest! {
        #[test]
        fn round_trip(r in arb_rmpp()) {
            let mut b = [0u8; 12];
            r.emit_bytes(&mut b);
            prop_assert_eq!(RmppRepr::parse_bytes(&b), Ok(r));
        }

        #[test]
        fn bytes_round_trip(b in proptest::array::uniform12(any::<u8>())) {
            let r = RmppRepr::parse_bytes(&b).unwrap();
            let mut out = [0u8; 12];
            r.emit_bytes(&mut out);
            prop_assert_eq!(out, b);
        }
    }
}
