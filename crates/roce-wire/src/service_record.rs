//! The SA ServiceRecord (attribute 0x0031, 176 bytes) and its ComponentMask.
//!
//! Layout [sa_query.c `service_rec_table` (v6.17); ib_user_sa.h `struct ib_user_service_rec`;
//! opensm ib_types.h `ib_service_record_t`; IBA 15.2.5.14]; offsets are relative to the record
//! (MAD byte 56):
//!
//! | Off | Size | Field |
//! |---|---|---|
//! | 0 | 8 | ServiceID |
//! | 8 | 16 | ServiceGID |
//! | 24 | 2 | ServiceP_Key |
//! | 26 | 2 | Reserved |
//! | 28 | 4 | ServiceLease (seconds; 0xFFFFFFFF infinite) |
//! | 32 | 16 | ServiceKey |
//! | 48 | 64 | ServiceName (NUL-padded UTF-8) |
//! | 112 | 16 | ServiceData8\[16\] |
//! | 128 | 16 | ServiceData16\[8\] (big-endian) |
//! | 144 | 16 | ServiceData32\[4\] (big-endian) |
//! | 160 | 16 | ServiceData64\[2\] (big-endian) |

use core::fmt;

use crate::error::{Layer, Result};
use crate::field::{array, be16, be32, be64, put16, put32, put64};
use crate::gid::Gid;

/// Length of a ServiceRecord (`IB_SERVICE_REC_SZ` [sa_query.c]).
pub const SERVICE_RECORD_LEN: usize = 176;
/// Length of ServiceName (`RDMA_USER_CM_IB_SERVICE_NAME_SIZE` [rdma_user_cm.h]).
pub const SERVICE_NAME_LEN: usize = 64;
/// ServiceLease meaning "never expires" [IBA 15.2.5.14; osm_sa_service_record.c].
pub const INFINITE_LEASE: u32 = 0xFFFF_FFFF;

/// Byte ranges of the ServiceRecord (relative to the record).
pub mod field {
    use crate::field::*;

    /// ServiceID.
    pub const SERVICE_ID: Field = 0..8;
    /// ServiceGID.
    pub const SERVICE_GID: Field = 8..24;
    /// ServiceP_Key.
    pub const SERVICE_P_KEY: Field = 24..26;
    /// Reserved.
    pub const RESERVED: Field = 26..28;
    /// ServiceLease.
    pub const SERVICE_LEASE: Field = 28..32;
    /// ServiceKey.
    pub const SERVICE_KEY: Field = 32..48;
    /// ServiceName.
    pub const SERVICE_NAME: Field = 48..112;
    /// ServiceData8\[0..16\].
    pub const SERVICE_DATA8: Field = 112..128;
    /// ServiceData16\[0..8\].
    pub const SERVICE_DATA16: Field = 128..144;
    /// ServiceData32\[0..4\].
    pub const SERVICE_DATA32: Field = 144..160;
    /// ServiceData64\[0..2\].
    pub const SERVICE_DATA64: Field = 160..176;
}

/// The SA ComponentMask for ServiceRecord: bit n selects record component n
/// [ib_sa.h `IB_SA_SERVICE_REC_*`; opensm `IB_SR_COMPMASK_*`; IBA 15.2.5.14]. Bit 3 is the
/// reserved field; bits 7–22 are ServiceData8\[0..16\], 23–30 ServiceData16\[0..8\], 31–34
/// ServiceData32\[0..4\], 35–36 ServiceData64\[0..2\].
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ComponentMask(pub u64);

impl ComponentMask {
    /// No component.
    pub const NONE: ComponentMask = ComponentMask(0);
    /// Bit 0: ServiceID.
    pub const SERVICE_ID: ComponentMask = ComponentMask(1 << 0);
    /// Bit 1: ServiceGID.
    pub const SERVICE_GID: ComponentMask = ComponentMask(1 << 1);
    /// Bit 2: ServiceP_Key.
    pub const SERVICE_P_KEY: ComponentMask = ComponentMask(1 << 2);
    /// Bit 4: ServiceLease.
    pub const SERVICE_LEASE: ComponentMask = ComponentMask(1 << 4);
    /// Bit 5: ServiceKey.
    pub const SERVICE_KEY: ComponentMask = ComponentMask(1 << 5);
    /// Bit 6: ServiceName.
    pub const SERVICE_NAME: ComponentMask = ComponentMask(1 << 6);
    /// The bits with a defined meaning (0..=36 without the reserved bit 3).
    pub const ALL: ComponentMask = ComponentMask(((1 << 37) - 1) & !(1 << 3));
    /// The record ID OpenSM requires of a Set: ServiceID|ServiceGID, else status 0x0200
    /// REQ_INVALID [osm_sa_service_record.c `osm_sr_rcv_process_set_method`].
    pub const OPENSM_SET_REQUIRED: ComponentMask = ComponentMask(0x3);

    /// Bit of ServiceData8\[i\] (i < 16).
    pub const fn data8(i: usize) -> ComponentMask {
        ComponentMask(1 << (7 + (i & 15)))
    }

    /// Bit of ServiceData16\[i\] (i < 8).
    pub const fn data16(i: usize) -> ComponentMask {
        ComponentMask(1 << (23 + (i & 7)))
    }

    /// Bit of ServiceData32\[i\] (i < 4).
    pub const fn data32(i: usize) -> ComponentMask {
        ComponentMask(1 << (31 + (i & 3)))
    }

    /// Bit of ServiceData64\[i\] (i < 2).
    pub const fn data64(i: usize) -> ComponentMask {
        ComponentMask(1 << (35 + (i & 1)))
    }
}

bit_set_ops!(ComponentMask(u64));

/// Printed as `ServiceID|ServiceName|ServiceData8.3` (undefined bits in hex, `none` when empty).
impl fmt::Display for ComponentMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("none");
        }
        const NAMES: [(u32, &str); 6] = [
            (0, "ServiceID"),
            (1, "ServiceGID"),
            (2, "ServiceP_Key"),
            (4, "ServiceLease"),
            (5, "ServiceKey"),
            (6, "ServiceName"),
        ];
        let mut sep = "";
        let mut rest = self.0;
        for (bit, name) in NAMES {
            if self.0 & (1 << bit) != 0 {
                write!(f, "{sep}{name}")?;
                sep = "|";
                rest &= !(1 << bit);
            }
        }
        for (first, count, width) in [(7u32, 16u32, 8u32), (23, 8, 16), (31, 4, 32), (35, 2, 64)] {
            for i in 0..count {
                let bit = 1u64 << (first + i);
                if self.0 & bit != 0 {
                    write!(f, "{sep}ServiceData{width}.{i}")?;
                    sep = "|";
                    rest &= !bit;
                }
            }
        }
        if rest != 0 {
            write!(f, "{sep}{rest:#x}")?;
        }
        Ok(())
    }
}

fixed_view!(Layer::ServiceRecord, SERVICE_RECORD_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// ServiceID.
    pub fn service_id(&self) -> u64 {
        be64(self.b(), field::SERVICE_ID.start)
    }

    /// ServiceGID.
    pub fn service_gid(&self) -> Gid {
        Gid(array(self.b(), field::SERVICE_GID.start))
    }

    /// ServiceP_Key.
    pub fn service_p_key(&self) -> u16 {
        be16(self.b(), field::SERVICE_P_KEY.start)
    }

    /// Reserved.
    pub fn reserved(&self) -> u16 {
        be16(self.b(), field::RESERVED.start)
    }

    /// ServiceLease (seconds).
    pub fn service_lease(&self) -> u32 {
        be32(self.b(), field::SERVICE_LEASE.start)
    }

    /// ServiceKey.
    pub fn service_key(&self) -> [u8; 16] {
        array(self.b(), field::SERVICE_KEY.start)
    }

    /// ServiceName (all 64 bytes).
    pub fn service_name(&self) -> [u8; SERVICE_NAME_LEN] {
        array(self.b(), field::SERVICE_NAME.start)
    }

    /// ServiceData8.
    pub fn service_data8(&self) -> [u8; 16] {
        array(self.b(), field::SERVICE_DATA8.start)
    }

    /// ServiceData16\[i\] (i < 8).
    pub fn service_data16(&self, i: usize) -> u16 {
        be16(self.b(), field::SERVICE_DATA16.start + 2 * (i & 7))
    }

    /// ServiceData32\[i\] (i < 4).
    pub fn service_data32(&self, i: usize) -> u32 {
        be32(self.b(), field::SERVICE_DATA32.start + 4 * (i & 3))
    }

    /// ServiceData64\[i\] (i < 2).
    pub fn service_data64(&self, i: usize) -> u64 {
        be64(self.b(), field::SERVICE_DATA64.start + 8 * (i & 1))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Set ServiceID.
    pub fn set_service_id(&mut self, v: u64) {
        put64(self.bm(), field::SERVICE_ID.start, v);
    }

    /// Set ServiceGID.
    pub fn set_service_gid(&mut self, g: Gid) {
        self.bm()[field::SERVICE_GID].copy_from_slice(&g.0);
    }

    /// Set ServiceP_Key.
    pub fn set_service_p_key(&mut self, v: u16) {
        put16(self.bm(), field::SERVICE_P_KEY.start, v);
    }

    /// Set Reserved.
    pub fn set_reserved(&mut self, v: u16) {
        put16(self.bm(), field::RESERVED.start, v);
    }

    /// Set ServiceLease.
    pub fn set_service_lease(&mut self, v: u32) {
        put32(self.bm(), field::SERVICE_LEASE.start, v);
    }

    /// Set ServiceKey.
    pub fn set_service_key(&mut self, v: &[u8; 16]) {
        self.bm()[field::SERVICE_KEY].copy_from_slice(v);
    }

    /// Set ServiceName (all 64 bytes).
    pub fn set_service_name(&mut self, v: &[u8; SERVICE_NAME_LEN]) {
        self.bm()[field::SERVICE_NAME].copy_from_slice(v);
    }

    /// Set ServiceData8.
    pub fn set_service_data8(&mut self, v: &[u8; 16]) {
        self.bm()[field::SERVICE_DATA8].copy_from_slice(v);
    }

    /// Set ServiceData16\[i\] (i < 8).
    pub fn set_service_data16(&mut self, i: usize, v: u16) {
        put16(self.bm(), field::SERVICE_DATA16.start + 2 * (i & 7), v);
    }

    /// Set ServiceData32\[i\] (i < 4).
    pub fn set_service_data32(&mut self, i: usize, v: u32) {
        put32(self.bm(), field::SERVICE_DATA32.start + 4 * (i & 3), v);
    }

    /// Set ServiceData64\[i\] (i < 2).
    pub fn set_service_data64(&mut self, i: usize, v: u64) {
        put64(self.bm(), field::SERVICE_DATA64.start + 8 * (i & 1), v);
    }
}

/// The owned ServiceRecord; every byte is kept (the reserved field and the bytes after a
/// name's NUL included), so a record re-emits byte for byte.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServiceRecord {
    /// ServiceID.
    pub service_id: u64,
    /// ServiceGID: the port offering the service.
    pub service_gid: Gid,
    /// ServiceP_Key.
    pub service_p_key: u16,
    /// Reserved (kept).
    pub reserved: u16,
    /// ServiceLease in seconds ([`INFINITE_LEASE`] never expires).
    pub service_lease: u32,
    /// ServiceKey (an SA zeroes it in answers to an untrusted request, SM_Key 0).
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serde_support::hex"))]
    pub service_key: [u8; 16],
    /// ServiceName, NUL-padded (see [`ServiceRecord::name`]).
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serde_support::hex"))]
    pub service_name: [u8; SERVICE_NAME_LEN],
    /// ServiceData8.
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::serde_support::hex"))]
    pub service_data8: [u8; 16],
    /// ServiceData16.
    pub service_data16: [u16; 8],
    /// ServiceData32.
    pub service_data32: [u32; 4],
    /// ServiceData64.
    pub service_data64: [u64; 2],
}

impl Default for ServiceRecord {
    fn default() -> Self {
        ServiceRecord {
            service_id: 0,
            service_gid: Gid::default(),
            service_p_key: 0,
            reserved: 0,
            service_lease: 0,
            service_key: [0; 16],
            service_name: [0; SERVICE_NAME_LEN],
            service_data8: [0; 16],
            service_data16: [0; 8],
            service_data32: [0; 4],
            service_data64: [0; 2],
        }
    }
}

impl ServiceRecord {
    /// Encoded length (176).
    pub const LEN: usize = SERVICE_RECORD_LEN;

    /// A ServiceName field from `name`: its bytes NUL-padded, cut at 63 bytes so a NUL always
    /// ends it (what the kernel's `strscpy` into `sr.name` does [cma.c
    /// `cma_resolve_ib_service`]; cut at a character boundary).
    pub fn name_field(name: &str) -> [u8; SERVICE_NAME_LEN] {
        let mut end = name.len().min(SERVICE_NAME_LEN - 1);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        let mut f = [0u8; SERVICE_NAME_LEN];
        f[..end].copy_from_slice(&name.as_bytes()[..end]);
        f
    }

    /// ServiceName up to its first NUL.
    pub fn name_bytes(&self) -> &[u8] {
        let end = self.service_name.iter().position(|&b| b == 0).unwrap_or(SERVICE_NAME_LEN);
        &self.service_name[..end]
    }

    /// ServiceName up to its first NUL as text, `None` if that is not UTF-8.
    pub fn name(&self) -> Option<&str> {
        core::str::from_utf8(self.name_bytes()).ok()
    }

    /// Whether the lease never expires.
    pub const fn is_infinite_lease(&self) -> bool {
        self.service_lease == INFINITE_LEASE
    }

    /// Read the record.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<ServiceRecord> {
        packet.check_len()?;
        let mut r = ServiceRecord {
            service_id: packet.service_id(),
            service_gid: packet.service_gid(),
            service_p_key: packet.service_p_key(),
            reserved: packet.reserved(),
            service_lease: packet.service_lease(),
            service_key: packet.service_key(),
            service_name: packet.service_name(),
            service_data8: packet.service_data8(),
            ..ServiceRecord::default()
        };
        for (i, v) in r.service_data16.iter_mut().enumerate() {
            *v = packet.service_data16(i);
        }
        for (i, v) in r.service_data32.iter_mut().enumerate() {
            *v = packet.service_data32(i);
        }
        for (i, v) in r.service_data64.iter_mut().enumerate() {
            *v = packet.service_data64(i);
        }
        Ok(r)
    }

    /// Parse from the start of `buf` (`Len` for [`Layer::ServiceRecord`] if shorter than 176).
    pub fn parse_bytes(buf: &[u8]) -> Result<ServiceRecord> {
        ServiceRecord::parse(&Packet::new_unchecked(buf))
    }

    /// Encoded length (176).
    pub const fn buffer_len(&self) -> usize {
        SERVICE_RECORD_LEN
    }

    /// Write the record (all 176 bytes).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        packet.set_service_id(self.service_id);
        packet.set_service_gid(self.service_gid);
        packet.set_service_p_key(self.service_p_key);
        packet.set_reserved(self.reserved);
        packet.set_service_lease(self.service_lease);
        packet.set_service_key(&self.service_key);
        packet.set_service_name(&self.service_name);
        packet.set_service_data8(&self.service_data8);
        for (i, v) in self.service_data16.iter().enumerate() {
            packet.set_service_data16(i, *v);
        }
        for (i, v) in self.service_data32.iter().enumerate() {
            packet.set_service_data32(i, *v);
        }
        for (i, v) in self.service_data64.iter().enumerate() {
            packet.set_service_data64(i, *v);
        }
    }

    /// Write the record to the start of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than 176 bytes.
    pub fn emit_bytes(&self, buf: &mut [u8]) {
        self.emit(&mut Packet::new_unchecked(buf));
    }

    /// The 176 encoded bytes.
    pub fn to_bytes(&self) -> [u8; SERVICE_RECORD_LEN] {
        let mut b = [0u8; SERVICE_RECORD_LEN];
        self.emit_bytes(&mut b);
        b
    }

    /// Whether `self` (a stored record) matches `query` under `mask`, component by component
    /// as OpenSM's `__get_matching_sr` compares them (ServiceID, GID, P_Key, Key, the whole
    /// 64-byte Name, each ServiceData element). ServiceLease and the reserved bit are not
    /// compared (OpenSM does not either).
    pub fn matches(&self, query: &ServiceRecord, mask: ComponentMask) -> bool {
        let m = |c: ComponentMask| mask.contains(c);
        if m(ComponentMask::SERVICE_ID) && self.service_id != query.service_id {
            return false;
        }
        if m(ComponentMask::SERVICE_GID) && self.service_gid != query.service_gid {
            return false;
        }
        if m(ComponentMask::SERVICE_P_KEY) && self.service_p_key != query.service_p_key {
            return false;
        }
        if m(ComponentMask::SERVICE_KEY) && self.service_key != query.service_key {
            return false;
        }
        if m(ComponentMask::SERVICE_NAME) && self.service_name != query.service_name {
            return false;
        }
        let d8 = (0..16).all(|i| !m(ComponentMask::data8(i)) || self.service_data8[i] == query.service_data8[i]);
        let d16 = (0..8).all(|i| !m(ComponentMask::data16(i)) || self.service_data16[i] == query.service_data16[i]);
        let d32 = (0..4).all(|i| !m(ComponentMask::data32(i)) || self.service_data32[i] == query.service_data32[i]);
        let d64 = (0..2).all(|i| !m(ComponentMask::data64(i)) || self.service_data64[i] == query.service_data64[i]);
        d8 && d16 && d32 && d64
    }
}

#[cfg(test)]
pub(crate) mod tests {
    extern crate std;
    use super::*;
    use crate::error::Error;
    use proptest::prelude::*;

    /// A record with every field distinct, and its bytes written out by hand from the table
    /// in the module documentation.
    pub(crate) fn golden() -> (ServiceRecord, [u8; SERVICE_RECORD_LEN]) {
        let mut b = [0u8; SERVICE_RECORD_LEN];
        b[0..8].copy_from_slice(&[0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x12, 0x34]);
        b[8..24].copy_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55]);
        b[24..26].copy_from_slice(&[0xff, 0xff]);
        b[26..28].copy_from_slice(&[0xab, 0xcd]);
        b[28..32].copy_from_slice(&[0, 0, 0x0e, 0x10]);
        b[32] = 0x5a;
        b[47] = 0xa5;
        b[48..55].copy_from_slice(b"roce-sv");
        b[112] = 1;
        b[127] = 16;
        b[128..130].copy_from_slice(&[0x16, 0x00]);
        b[142..144].copy_from_slice(&[0x00, 0x07]);
        b[144..148].copy_from_slice(&[0x32, 0, 0, 0]);
        b[156..160].copy_from_slice(&[0, 0, 0, 3]);
        b[160..168].copy_from_slice(&[0x64, 0, 0, 0, 0, 0, 0, 0]);
        b[168..176].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1]);
        let mut key = [0u8; 16];
        key[0] = 0x5a;
        key[15] = 0xa5;
        let mut d8 = [0u8; 16];
        d8[0] = 1;
        d8[15] = 16;
        let r = ServiceRecord {
            service_id: 0x1000_0000_0000_1234,
            service_gid: Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55]),
            service_p_key: 0xffff,
            reserved: 0xabcd,
            service_lease: 3600,
            service_key: key,
            service_name: ServiceRecord::name_field("roce-sv"),
            service_data8: d8,
            service_data16: [0x1600, 0, 0, 0, 0, 0, 0, 7],
            service_data32: [0x3200_0000, 0, 0, 3],
            service_data64: [0x6400_0000_0000_0000, 1],
        };
        (r, b)
    }

    #[test]
    fn golden_record() {
        let (r, b) = golden();
        assert_eq!(ServiceRecord::parse_bytes(&b), Ok(r));
        assert_eq!(r.to_bytes(), b);
        assert_eq!(r.name(), Some("roce-sv"));
        assert!(!r.is_infinite_lease());
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.service_data16(7), p.service_data32(3), p.service_data64(1)), (7, 3, 1));
    }

    #[test]
    fn truncation() {
        let (_, b) = golden();
        for len in 0..SERVICE_RECORD_LEN {
            assert_eq!(
                ServiceRecord::parse_bytes(&b[..len]),
                Err(Error::len(Layer::ServiceRecord, 0, SERVICE_RECORD_LEN, len))
            );
        }
    }

    #[test]
    fn name_field_is_cut_and_terminated() {
        let long = "x".repeat(100);
        let f = ServiceRecord::name_field(&long);
        assert_eq!(f[62], b'x');
        assert_eq!(f[63], 0);
        // a 2-byte character straddling byte 63 is left out whole
        let s = std::format!("{}é", "a".repeat(62));
        let f = ServiceRecord::name_field(&s);
        assert_eq!((f[61], f[62]), (b'a', 0));
        let r = ServiceRecord { service_name: [0xff; 64], ..ServiceRecord::default() };
        assert_eq!((r.name(), r.name_bytes().len()), (None, 64));
    }

    #[test]
    fn component_mask_bits_and_names() {
        // IBA 15.2.5.14 / ib_sa.h IB_SA_SERVICE_REC_*
        assert_eq!(ComponentMask::SERVICE_NAME.0, 1 << 6);
        assert_eq!(ComponentMask::data8(0).0, 1 << 7);
        assert_eq!(ComponentMask::data8(15).0, 1 << 22);
        assert_eq!(ComponentMask::data16(0).0, 1 << 23);
        assert_eq!(ComponentMask::data32(0).0, 1 << 31);
        assert_eq!(ComponentMask::data64(1).0, 1 << 36);
        assert_eq!(ComponentMask::ALL.0.count_ones(), 36);
        let m = ComponentMask::SERVICE_ID | ComponentMask::SERVICE_NAME | ComponentMask::data16(2);
        assert_eq!(std::format!("{m}"), "ServiceID|ServiceName|ServiceData16.2");
        assert_eq!(std::format!("{}", ComponentMask(1 << 3 | 1 << 40)), "0x10000000008");
        assert_eq!(std::format!("{}", ComponentMask::NONE), "none");
    }

    #[test]
    fn matching_by_mask() {
        let (stored, _) = golden();
        let by_id = ServiceRecord { service_id: stored.service_id, ..ServiceRecord::default() };
        assert!(stored.matches(&by_id, ComponentMask::SERVICE_ID));
        assert!(!stored.matches(&by_id, ComponentMask::SERVICE_ID | ComponentMask::SERVICE_NAME));
        let by_name = ServiceRecord { service_name: ServiceRecord::name_field("roce-sv"), ..ServiceRecord::default() };
        assert!(stored.matches(&by_name, ComponentMask::SERVICE_NAME));
        let other = ServiceRecord { service_name: ServiceRecord::name_field("roce-s"), ..ServiceRecord::default() };
        assert!(!stored.matches(&other, ComponentMask::SERVICE_NAME));
        assert!(stored.matches(&other, ComponentMask::NONE));
        let mut d = ServiceRecord::default();
        d.service_data16[7] = 7;
        assert!(stored.matches(&d, ComponentMask::data16(7)));
        assert!(!stored.matches(&d, ComponentMask::data16(0)));
        // the lease is never compared
        let lease = ServiceRecord { service_lease: 1, ..stored };
        assert!(stored.matches(&lease, ComponentMask::ALL));
    }

    pub(crate) fn arb_record() -> impl Strategy<Value = ServiceRecord> {
        proptest::collection::vec(any::<u8>(), SERVICE_RECORD_LEN).prop_map(|v| ServiceRecord::parse_bytes(&v).unwrap())
    }

    proptest! {
        #[test]
        fn round_trip(v in proptest::collection::vec(any::<u8>(), SERVICE_RECORD_LEN)) {
            let r = ServiceRecord::parse_bytes(&v).unwrap();
            prop_assert_eq!(&r.to_bytes()[..], &v[..]);
        }
    }
}
