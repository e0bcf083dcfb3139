//! ClassPortInfo (attribute 0x0001 of every class, 72 bytes).
//!
//! Layout [ib_mad.h `struct ib_class_port_info`; opensm ib_types.h `ib_class_port_info_t`;
//! IBA 13.4.8.1]; offsets are relative to the attribute (MAD byte 56 in an SA MAD, 64 in a
//! PerfMgmt MAD, 24 in a CM MAD):
//!
//! | Off | Size | Bits | Field |
//! |---|---|---|---|
//! | 0 | 1 | | BaseVersion |
//! | 1 | 1 | | ClassVersion |
//! | 2 | 2 | | CapabilityMask |
//! | 4 | 4 | 31:5 / 4:0 | CapabilityMask2 / RespTimeValue |
//! | 8 | 16 | | RedirectGID |
//! | 24 | 4 | 31:24 / 23:20 / 19:0 | RedirectTC / RedirectSL / RedirectFL |
//! | 28 | 2 | | RedirectLID |
//! | 30 | 2 | | RedirectP_Key |
//! | 32 | 4 | 31:24 / 23:0 | Reserved / RedirectQP |
//! | 36 | 4 | | RedirectQ_Key |
//! | 40 | 16 | | TrapGID |
//! | 56 | 4 | 31:24 / 23:20 / 19:0 | TrapTC / TrapSL / TrapFL |
//! | 60 | 2 | | TrapLID |
//! | 62 | 2 | | TrapP_Key |
//! | 64 | 4 | 31:24 / 23:0 | TrapHL / TrapQP |
//! | 68 | 4 | | TrapQ_Key |

use crate::error::{Layer, Result};
use crate::field::{array, be16, be32, put16, put32};
use crate::gid::Gid;

/// Length of ClassPortInfo.
pub const CLASS_PORT_INFO_LEN: usize = 72;

/// CapabilityMask2 bit 12 of the SA ClassPortInfo: the SA supports SendOnlyFullMember joins,
/// `IB_SA_CAP_MASK2_SENDONLY_FULL_MEM_SUPPORT` = BIT(12) [ib_sa.h]; RDMA-CM refuses a
/// send-only full-member join on IB without it [cma.c `cma_join_ib_multicast`].
pub const CAP_MASK2_SENDONLY_FULL_MEM_SUPPORT: u32 = 1 << 12;

/// RespTimeValue mask, `IB_CLASS_PORT_INFO_RESP_TIME_MASK` [ib_mad.h].
pub const RESP_TIME_MASK: u32 = 0x1F;
/// Width of RespTimeValue, `IB_CLASS_PORT_INFO_RESP_TIME_FIELD_SIZE` [ib_mad.h].
pub const RESP_TIME_FIELD_SIZE: u32 = 5;

/// CapabilityMask bits. Bits 0–7 are common to all classes [opensm ib_types.h
/// `IB_CLASS_CAP_*`; IBA 13.4.8.1]; bits 8–15 are class-specific, the `SA_*` ones are the SA
/// class's [opensm osm_base.h `OSM_CAP_IS_*`, IBA 1.2.1 Table 188].
pub mod cap {
    /// The class generates Trap() MADs (`IB_CLASS_CAP_TRAP`).
    pub const TRAP: u16 = 0x0001;
    /// The class supports Get(Notice) and Set(Notice) (`IB_CLASS_CAP_GETSET`).
    pub const GET_SET_NOTICE: u16 = 0x0002;
    /// CapabilityMask2 is valid (`IB_CLASS_CAP_CAPMASK2`).
    pub const CAP_MASK2: u16 = 0x0004;
    /// SA: all optional records except MCMemberRecord, TraceRecord, MultiPathRecord
    /// (`OSM_CAP_IS_SUBN_OPT_RECS_SUP`).
    pub const SA_OPTIONAL_RECORDS: u16 = 1 << 8;
    /// SA: UD multicast (MCMemberRecord) supported (`OSM_CAP_IS_UD_MCAST_SUP`).
    pub const SA_UD_MULTICAST: u16 = 1 << 9;
    /// SA: MultiPathRecord and TraceRecord supported (`OSM_CAP_IS_MULTIPATH_SUP`).
    pub const SA_MULTIPATH: u16 = 1 << 10;
    /// SA: re-initialization supported (`OSM_CAP_IS_REINIT_SUP`).
    pub const SA_REINIT: u16 = 1 << 11;
    /// SA: PortInfoRecord CapabilityMask matching (`OSM_CAP_IS_PORT_INFO_CAPMASK_MATCH_SUPPORTED`).
    pub const SA_PORT_INFO_CAPMASK_MATCH: u16 = 1 << 13;
}

/// CapabilityMask2 bits of the SA class [opensm osm_base.h `OSM_CAP2_IS_*`; ib_sa.h].
pub mod cap2 {
    /// QoS supported.
    pub const SA_QOS: u32 = 1 << 1;
    /// Reverse-path P_Keys in PathRecord responses.
    pub const SA_REVERSE_PATH_PKEY: u32 = 1 << 2;
    /// SwitchInfo.MulticastFDBTop supported.
    pub const SA_MCAST_TOP: u32 = 1 << 3;
    /// Hierarchy info supported.
    pub const SA_HIERARCHY: u32 = 1 << 4;
    /// Alias GUIDs supported.
    pub const SA_ALIAS_GUIDS: u32 = 1 << 5;
    /// Full PortInfoRecords supported.
    pub const SA_FULL_PORTINFO_REC: u32 = 1 << 6;
    /// Extended link speeds supported.
    pub const SA_EXTENDED_SPEEDS: u32 = 1 << 7;
    /// Multicast ServiceRecords supported.
    pub const SA_MULTICAST_SERVICE_RECS: u32 = 1 << 8;
    /// PortInfoRecord CapabilityMask2 matching.
    pub const SA_PORT_INFO_CAPMASK2_MATCH: u32 = 1 << 10;
    /// SendOnlyFullMember joins supported (= [`super::CAP_MASK2_SENDONLY_FULL_MEM_SUPPORT`]).
    pub const SA_SENDONLY_FULL_MEM: u32 = 1 << 12;
    /// 2x link width supported.
    pub const SA_LINK_WIDTH_2X: u32 = 1 << 13;
    /// HDR link speed supported.
    pub const SA_LINK_SPEED_HDR: u32 = 1 << 15;
    /// NDR link speed supported.
    pub const SA_LINK_SPEED_NDR: u32 = 1 << 17;
    /// Extended link speeds 2 supported.
    pub const SA_EXTENDED_SPEEDS2: u32 = 1 << 19;
    /// XDR link speed supported.
    pub const SA_LINK_SPEED_XDR: u32 = 1 << 20;
}

/// Byte ranges of ClassPortInfo (relative to the attribute).
pub mod field {
    use crate::field::*;

    /// BaseVersion.
    pub const BASE_VERSION: usize = 0;
    /// ClassVersion.
    pub const CLASS_VERSION: usize = 1;
    /// CapabilityMask.
    pub const CAPABILITY_MASK: Field = 2..4;
    /// CapabilityMask2 (27 bits) and RespTimeValue (5 bits).
    pub const CAP_MASK2_RESP_TIME: Field = 4..8;
    /// RedirectGID.
    pub const REDIRECT_GID: Field = 8..24;
    /// RedirectTC (8), RedirectSL (4), RedirectFL (20).
    pub const REDIRECT_TC_SL_FL: Field = 24..28;
    /// RedirectLID.
    pub const REDIRECT_LID: Field = 28..30;
    /// RedirectP_Key.
    pub const REDIRECT_PKEY: Field = 30..32;
    /// Reserved (8) and RedirectQP (24).
    pub const REDIRECT_QP: Field = 32..36;
    /// RedirectQ_Key.
    pub const REDIRECT_QKEY: Field = 36..40;
    /// TrapGID.
    pub const TRAP_GID: Field = 40..56;
    /// TrapTC (8), TrapSL (4), TrapFL (20).
    pub const TRAP_TC_SL_FL: Field = 56..60;
    /// TrapLID.
    pub const TRAP_LID: Field = 60..62;
    /// TrapP_Key.
    pub const TRAP_PKEY: Field = 62..64;
    /// TrapHL (8) and TrapQP (24).
    pub const TRAP_HL_QP: Field = 64..68;
    /// TrapQ_Key.
    pub const TRAP_QKEY: Field = 68..72;
}

/// Split a TC(8)|SL(4)|FL(20) word.
const fn tc_sl_fl(w: u32) -> (u8, u8, u32) {
    ((w >> 24) as u8, ((w >> 20) & 0xF) as u8, w & 0xF_FFFF)
}

/// Build a TC(8)|SL(4)|FL(20) word (SL and FL masked).
const fn make_tc_sl_fl(tc: u8, sl: u8, fl: u32) -> u32 {
    ((tc as u32) << 24) | (((sl & 0xF) as u32) << 20) | (fl & 0xF_FFFF)
}

fixed_view!(Layer::ClassPortInfo, CLASS_PORT_INFO_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// BaseVersion.
    pub fn base_version(&self) -> u8 {
        self.b()[field::BASE_VERSION]
    }

    /// ClassVersion.
    pub fn class_version(&self) -> u8 {
        self.b()[field::CLASS_VERSION]
    }

    /// CapabilityMask.
    pub fn capability_mask(&self) -> u16 {
        be16(self.b(), field::CAPABILITY_MASK.start)
    }

    /// The CapabilityMask2/RespTimeValue word.
    pub fn cap_mask2_resp_time(&self) -> u32 {
        be32(self.b(), field::CAP_MASK2_RESP_TIME.start)
    }

    /// RedirectGID.
    pub fn redirect_gid(&self) -> Gid {
        Gid(array(self.b(), field::REDIRECT_GID.start))
    }

    /// The RedirectTC/SL/FL word.
    pub fn redirect_tc_sl_fl(&self) -> u32 {
        be32(self.b(), field::REDIRECT_TC_SL_FL.start)
    }

    /// RedirectLID.
    pub fn redirect_lid(&self) -> u16 {
        be16(self.b(), field::REDIRECT_LID.start)
    }

    /// RedirectP_Key.
    pub fn redirect_pkey(&self) -> u16 {
        be16(self.b(), field::REDIRECT_PKEY.start)
    }

    /// The Reserved/RedirectQP word.
    pub fn redirect_qp(&self) -> u32 {
        be32(self.b(), field::REDIRECT_QP.start)
    }

    /// RedirectQ_Key.
    pub fn redirect_qkey(&self) -> u32 {
        be32(self.b(), field::REDIRECT_QKEY.start)
    }

    /// TrapGID.
    pub fn trap_gid(&self) -> Gid {
        Gid(array(self.b(), field::TRAP_GID.start))
    }

    /// The TrapTC/SL/FL word.
    pub fn trap_tc_sl_fl(&self) -> u32 {
        be32(self.b(), field::TRAP_TC_SL_FL.start)
    }

    /// TrapLID.
    pub fn trap_lid(&self) -> u16 {
        be16(self.b(), field::TRAP_LID.start)
    }

    /// TrapP_Key.
    pub fn trap_pkey(&self) -> u16 {
        be16(self.b(), field::TRAP_PKEY.start)
    }

    /// The TrapHL/TrapQP word.
    pub fn trap_hl_qp(&self) -> u32 {
        be32(self.b(), field::TRAP_HL_QP.start)
    }

    /// TrapQ_Key.
    pub fn trap_qkey(&self) -> u32 {
        be32(self.b(), field::TRAP_QKEY.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Set BaseVersion.
    pub fn set_base_version(&mut self, v: u8) {
        self.bm()[field::BASE_VERSION] = v;
    }

    /// Set ClassVersion.
    pub fn set_class_version(&mut self, v: u8) {
        self.bm()[field::CLASS_VERSION] = v;
    }

    /// Set CapabilityMask.
    pub fn set_capability_mask(&mut self, v: u16) {
        put16(self.bm(), field::CAPABILITY_MASK.start, v);
    }

    /// Set the CapabilityMask2/RespTimeValue word.
    pub fn set_cap_mask2_resp_time(&mut self, v: u32) {
        put32(self.bm(), field::CAP_MASK2_RESP_TIME.start, v);
    }

    /// Set RedirectGID.
    pub fn set_redirect_gid(&mut self, g: Gid) {
        self.bm()[field::REDIRECT_GID].copy_from_slice(&g.0);
    }

    /// Set the RedirectTC/SL/FL word.
    pub fn set_redirect_tc_sl_fl(&mut self, v: u32) {
        put32(self.bm(), field::REDIRECT_TC_SL_FL.start, v);
    }

    /// Set RedirectLID.
    pub fn set_redirect_lid(&mut self, v: u16) {
        put16(self.bm(), field::REDIRECT_LID.start, v);
    }

    /// Set RedirectP_Key.
    pub fn set_redirect_pkey(&mut self, v: u16) {
        put16(self.bm(), field::REDIRECT_PKEY.start, v);
    }

    /// Set the Reserved/RedirectQP word.
    pub fn set_redirect_qp(&mut self, v: u32) {
        put32(self.bm(), field::REDIRECT_QP.start, v);
    }

    /// Set RedirectQ_Key.
    pub fn set_redirect_qkey(&mut self, v: u32) {
        put32(self.bm(), field::REDIRECT_QKEY.start, v);
    }

    /// Set TrapGID.
    pub fn set_trap_gid(&mut self, g: Gid) {
        self.bm()[field::TRAP_GID].copy_from_slice(&g.0);
    }

    /// Set the TrapTC/SL/FL word.
    pub fn set_trap_tc_sl_fl(&mut self, v: u32) {
        put32(self.bm(), field::TRAP_TC_SL_FL.start, v);
    }

    /// Set TrapLID.
    pub fn set_trap_lid(&mut self, v: u16) {
        put16(self.bm(), field::TRAP_LID.start, v);
    }

    /// Set TrapP_Key.
    pub fn set_trap_pkey(&mut self, v: u16) {
        put16(self.bm(), field::TRAP_PKEY.start, v);
    }

    /// Set the TrapHL/TrapQP word.
    pub fn set_trap_hl_qp(&mut self, v: u32) {
        put32(self.bm(), field::TRAP_HL_QP.start, v);
    }

    /// Set TrapQ_Key.
    pub fn set_trap_qkey(&mut self, v: u32) {
        put32(self.bm(), field::TRAP_QKEY.start, v);
    }
}

/// The owned ClassPortInfo. Packed words are kept whole (so every bit re-emits) and split by
/// the accessor methods.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ClassPortInfo {
    /// BaseVersion (1).
    pub base_version: u8,
    /// ClassVersion of the class described (SA 2).
    pub class_version: u8,
    /// CapabilityMask (see [`cap`]).
    pub capability_mask: u16,
    /// CapabilityMask2 (bits 31:5) and RespTimeValue (bits 4:0).
    pub cap_mask2_resp_time: u32,
    /// RedirectGID.
    pub redirect_gid: Gid,
    /// RedirectTC (31:24), RedirectSL (23:20), RedirectFL (19:0).
    pub redirect_tc_sl_fl: u32,
    /// RedirectLID.
    pub redirect_lid: u16,
    /// RedirectP_Key.
    pub redirect_pkey: u16,
    /// Reserved (31:24, kept) and RedirectQP (23:0).
    pub redirect_qp: u32,
    /// RedirectQ_Key.
    pub redirect_qkey: u32,
    /// TrapGID.
    pub trap_gid: Gid,
    /// TrapTC (31:24), TrapSL (23:20), TrapFL (19:0).
    pub trap_tc_sl_fl: u32,
    /// TrapLID.
    pub trap_lid: u16,
    /// TrapP_Key.
    pub trap_pkey: u16,
    /// TrapHL (31:24) and TrapQP (23:0).
    pub trap_hl_qp: u32,
    /// TrapQ_Key.
    pub trap_qkey: u32,
}

impl ClassPortInfo {
    /// Encoded length (72).
    pub const LEN: usize = CLASS_PORT_INFO_LEN;

    /// CapabilityMask2 (27 bits), `ib_get_cpi_capmask2`.
    pub const fn capability_mask2(&self) -> u32 {
        self.cap_mask2_resp_time >> RESP_TIME_FIELD_SIZE
    }

    /// Set CapabilityMask2 (27 bits), keeping RespTimeValue (`ib_set_cpi_capmask2`).
    pub fn set_capability_mask2(&mut self, v: u32) {
        self.cap_mask2_resp_time = (self.cap_mask2_resp_time & RESP_TIME_MASK) | (v << RESP_TIME_FIELD_SIZE);
    }

    /// RespTimeValue (5 bits), `ib_get_cpi_resp_time`.
    pub const fn resp_time_value(&self) -> u8 {
        (self.cap_mask2_resp_time & RESP_TIME_MASK) as u8
    }

    /// Set RespTimeValue (5 bits), keeping CapabilityMask2 (`ib_set_cpi_resp_time`).
    pub fn set_resp_time_value(&mut self, v: u8) {
        self.cap_mask2_resp_time = (self.cap_mask2_resp_time & !RESP_TIME_MASK) | (u32::from(v) & RESP_TIME_MASK);
    }

    /// The response time RespTimeValue encodes, 4.096 µs × 2^RespTimeValue, in nanoseconds.
    pub const fn resp_time_ns(&self) -> u64 {
        4096u64 << self.resp_time_value()
    }

    /// Whether the SA supports SendOnlyFullMember joins ([`CAP_MASK2_SENDONLY_FULL_MEM_SUPPORT`]).
    pub const fn sendonly_full_member_supported(&self) -> bool {
        self.capability_mask2() & CAP_MASK2_SENDONLY_FULL_MEM_SUPPORT != 0
    }

    /// RedirectTC, RedirectSL, RedirectFL.
    pub const fn redirect_tc_sl_fl_parts(&self) -> (u8, u8, u32) {
        tc_sl_fl(self.redirect_tc_sl_fl)
    }

    /// Set RedirectTC, RedirectSL (4 bits), RedirectFL (20 bits).
    pub fn set_redirect_tc_sl_fl_parts(&mut self, tc: u8, sl: u8, fl: u32) {
        self.redirect_tc_sl_fl = make_tc_sl_fl(tc, sl, fl);
    }

    /// RedirectQP (24 bits).
    pub const fn redirect_qpn(&self) -> u32 {
        self.redirect_qp & 0xFF_FFFF
    }

    /// Set RedirectQP (24 bits), keeping the reserved top byte.
    pub fn set_redirect_qpn(&mut self, qpn: u32) {
        self.redirect_qp = (self.redirect_qp & 0xFF00_0000) | (qpn & 0xFF_FFFF);
    }

    /// TrapTC, TrapSL, TrapFL.
    pub const fn trap_tc_sl_fl_parts(&self) -> (u8, u8, u32) {
        tc_sl_fl(self.trap_tc_sl_fl)
    }

    /// Set TrapTC, TrapSL (4 bits), TrapFL (20 bits).
    pub fn set_trap_tc_sl_fl_parts(&mut self, tc: u8, sl: u8, fl: u32) {
        self.trap_tc_sl_fl = make_tc_sl_fl(tc, sl, fl);
    }

    /// TrapHL (hop limit).
    pub const fn trap_hop_limit(&self) -> u8 {
        (self.trap_hl_qp >> 24) as u8
    }

    /// TrapQP (24 bits).
    pub const fn trap_qpn(&self) -> u32 {
        self.trap_hl_qp & 0xFF_FFFF
    }

    /// Set TrapHL and TrapQP (24 bits).
    pub fn set_trap_hl_qpn(&mut self, hop_limit: u8, qpn: u32) {
        self.trap_hl_qp = (u32::from(hop_limit) << 24) | (qpn & 0xFF_FFFF);
    }

    /// Read the attribute.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<ClassPortInfo> {
        packet.check_len()?;
        Ok(ClassPortInfo {
            base_version: packet.base_version(),
            class_version: packet.class_version(),
            capability_mask: packet.capability_mask(),
            cap_mask2_resp_time: packet.cap_mask2_resp_time(),
            redirect_gid: packet.redirect_gid(),
            redirect_tc_sl_fl: packet.redirect_tc_sl_fl(),
            redirect_lid: packet.redirect_lid(),
            redirect_pkey: packet.redirect_pkey(),
            redirect_qp: packet.redirect_qp(),
            redirect_qkey: packet.redirect_qkey(),
            trap_gid: packet.trap_gid(),
            trap_tc_sl_fl: packet.trap_tc_sl_fl(),
            trap_lid: packet.trap_lid(),
            trap_pkey: packet.trap_pkey(),
            trap_hl_qp: packet.trap_hl_qp(),
            trap_qkey: packet.trap_qkey(),
        })
    }

    /// Parse from the start of `buf`.
    pub fn parse_bytes(buf: &[u8]) -> Result<ClassPortInfo> {
        ClassPortInfo::parse(&Packet::new_unchecked(buf))
    }

    /// Encoded length (72).
    pub const fn buffer_len(&self) -> usize {
        CLASS_PORT_INFO_LEN
    }

    /// Write the attribute (all 72 bytes).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        packet.set_base_version(self.base_version);
        packet.set_class_version(self.class_version);
        packet.set_capability_mask(self.capability_mask);
        packet.set_cap_mask2_resp_time(self.cap_mask2_resp_time);
        packet.set_redirect_gid(self.redirect_gid);
        packet.set_redirect_tc_sl_fl(self.redirect_tc_sl_fl);
        packet.set_redirect_lid(self.redirect_lid);
        packet.set_redirect_pkey(self.redirect_pkey);
        packet.set_redirect_qp(self.redirect_qp);
        packet.set_redirect_qkey(self.redirect_qkey);
        packet.set_trap_gid(self.trap_gid);
        packet.set_trap_tc_sl_fl(self.trap_tc_sl_fl);
        packet.set_trap_lid(self.trap_lid);
        packet.set_trap_pkey(self.trap_pkey);
        packet.set_trap_hl_qp(self.trap_hl_qp);
        packet.set_trap_qkey(self.trap_qkey);
    }

    /// Write the attribute to the start of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than 72 bytes.
    pub fn emit_bytes(&self, buf: &mut [u8]) {
        self.emit(&mut Packet::new_unchecked(buf));
    }

    /// The 72 encoded bytes.
    pub fn to_bytes(&self) -> [u8; CLASS_PORT_INFO_LEN] {
        let mut b = [0u8; CLASS_PORT_INFO_LEN];
        self.emit_bytes(&mut b);
        b
    }
}

#[cfg(test)]
pub(crate) mod tests {
    extern crate std;
    use super::*;
    use crate::error::Error;
    use proptest::prelude::*;

    /// What OpenSM's `cpi_rcv_respond` builds (derived here from its code: base 1, class 2,
    /// CapMask GetSetNotice|PortInfoCapMaskMatch|UDMcast, CapMask2 FullPortInfoRec|
    /// ExtendedSpeeds|AliasGuids|McastServiceRecs|PortInfoCapMask2Match, RespTimeValue 18,
    /// RedirectQP 1, RedirectQ_Key 0x80010000), with a trap QP/HL to exercise packed words.
    fn opensm_like() -> (ClassPortInfo, [u8; 72]) {
        let mut c = ClassPortInfo {
            base_version: 1,
            class_version: 2,
            capability_mask: cap::GET_SET_NOTICE | cap::SA_PORT_INFO_CAPMASK_MATCH | cap::SA_UD_MULTICAST,
            redirect_qp: 1,
            redirect_qkey: crate::GSI_QKEY,
            ..ClassPortInfo::default()
        };
        c.set_capability_mask2(
            cap2::SA_FULL_PORTINFO_REC
                | cap2::SA_EXTENDED_SPEEDS
                | cap2::SA_ALIAS_GUIDS
                | cap2::SA_MULTICAST_SERVICE_RECS
                | cap2::SA_PORT_INFO_CAPMASK2_MATCH,
        );
        c.set_resp_time_value(18);
        c.set_trap_hl_qpn(0xFF, 1);
        c.set_trap_tc_sl_fl_parts(0xAB, 0x5, 0xC_DEF0);
        let mut b = [0u8; 72];
        b[0] = 1;
        b[1] = 2;
        b[2..4].copy_from_slice(&0x2202u16.to_be_bytes());
        // CapMask2 = 0x5E0 << 5 = 0xBC00, | 18 = 0xBC12
        b[4..8].copy_from_slice(&0x0000_BC12u32.to_be_bytes());
        b[32..36].copy_from_slice(&[0, 0, 0, 1]);
        b[36..40].copy_from_slice(&[0x80, 0x01, 0, 0]);
        b[56..60].copy_from_slice(&[0xAB, 0x5C, 0xDE, 0xF0]);
        b[64..68].copy_from_slice(&[0xFF, 0, 0, 1]);
        (c, b)
    }

    #[test]
    fn golden_parse_emit() {
        let (c, b) = opensm_like();
        assert_eq!(c.to_bytes(), b);
        let p = ClassPortInfo::parse_bytes(&b).unwrap();
        assert_eq!(p, c);
        assert_eq!(p.capability_mask2(), 0x5E0);
        assert_eq!(p.resp_time_value(), 18);
        assert_eq!(p.resp_time_ns(), 4096 << 18);
        assert!(!p.sendonly_full_member_supported());
        assert_eq!(p.redirect_qpn(), 1);
        assert_eq!((p.trap_hop_limit(), p.trap_qpn()), (0xFF, 1));
        assert_eq!(p.trap_tc_sl_fl_parts(), (0xAB, 5, 0xC_DEF0));
    }

    #[test]
    fn accessors_keep_neighbours() {
        let mut c = ClassPortInfo::default();
        c.set_resp_time_value(0x1F);
        c.set_capability_mask2(CAP_MASK2_SENDONLY_FULL_MEM_SUPPORT);
        assert!(c.sendonly_full_member_supported());
        assert_eq!(c.resp_time_value(), 0x1F);
        assert_eq!(c.cap_mask2_resp_time, (1 << 17) | 0x1F);
        c.redirect_qp = 0xAA00_0000;
        c.set_redirect_qpn(0x12_3456);
        assert_eq!(c.redirect_qp, 0xAA12_3456);
        c.set_redirect_tc_sl_fl_parts(1, 0xFF, u32::MAX);
        assert_eq!(c.redirect_tc_sl_fl, 0x01FF_FFFF);
        assert_eq!(c.redirect_tc_sl_fl_parts(), (1, 0xF, 0xF_FFFF));
        assert_eq!(cap2::SA_SENDONLY_FULL_MEM, CAP_MASK2_SENDONLY_FULL_MEM_SUPPORT);
    }

    #[test]
    fn view_setters() {
        let mut b = [0u8; 72];
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        p.set_redirect_gid(Gid([1; 16]));
        p.set_trap_gid(Gid([2; 16]));
        p.set_redirect_lid(0x0102);
        p.set_redirect_pkey(0xFFFF);
        p.set_trap_lid(0x0304);
        p.set_trap_pkey(0x7FFF);
        p.set_trap_qkey(0x0506_0708);
        assert_eq!((p.redirect_gid(), p.trap_gid()), (Gid([1; 16]), Gid([2; 16])));
        assert_eq!(
            (p.redirect_lid(), p.redirect_pkey(), p.trap_lid(), p.trap_pkey()),
            (0x0102, 0xFFFF, 0x0304, 0x7FFF)
        );
        assert_eq!(p.trap_qkey(), 0x0506_0708);
        assert_eq!(&b[8..24], &[1; 16]);
        assert_eq!(&b[28..32], &[1, 2, 0xFF, 0xFF]);
        assert_eq!(&b[40..56], &[2; 16]);
        assert_eq!(&b[60..64], &[3, 4, 0x7F, 0xFF]);
        assert_eq!(&b[68..72], &[5, 6, 7, 8]);
    }

    #[test]
    fn truncation() {
        let (_, b) = opensm_like();
        for len in 0..72 {
            assert_eq!(ClassPortInfo::parse_bytes(&b[..len]), Err(Error::len(Layer::ClassPortInfo, 0, 72, len)));
        }
    }

    pub(crate) fn arb_cpi() -> impl Strategy<Value = ClassPortInfo> {
        use crate::mcmember::tests::arb_gid;
        (
            (any::<u8>(), any::<u8>(), any::<u16>(), any::<u32>(), arb_gid(), any::<u32>(), any::<u16>(), any::<u16>()),
            (
                any::<u32>(),
                any::<u32>(),
                arb_gid(),
                any::<u32>(),
                any::<u16>(),
                any::<u16>(),
                any::<u32>(),
                any::<u32>(),
            ),
        )
            .prop_map(|((bv, cv, cm, cm2, rg, rt, rl, rp), (rq, rk, tg, tt, tl, tp, th, tk))| ClassPortInfo {
                base_version: bv,
                class_version: cv,
                capability_mask: cm,
                cap_mask2_resp_time: cm2,
                redirect_gid: rg,
                redirect_tc_sl_fl: rt,
                redirect_lid: rl,
                redirect_pkey: rp,
                redirect_qp: rq,
                redirect_qkey: rk,
                trap_gid: tg,
                trap_tc_sl_fl: tt,
                trap_lid: tl,
                trap_pkey: tp,
                trap_hl_qp: th,
                trap_qkey: tk,
            })
    }

    proptest! {
        #[test]
        fn round_trip(c in arb_cpi()) {
            prop_assert_eq!(ClassPortInfo::parse_bytes(&c.to_bytes()), Ok(c));
        }

        #[test]
        fn bytes_round_trip(v in proptest::collection::vec(any::<u8>(), 72)) {
            let c = ClassPortInfo::parse_bytes(&v).unwrap();
            prop_assert_eq!(&c.to_bytes()[..], &v[..]);
        }
    }
}
