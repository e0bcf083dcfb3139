//! What the multicast formats share: the lists of the IGMPv3 and MLDv2 Reprs ([`List`],
//! [`FixedVec`]), their group record (one view, iterator and owned-record code with the group
//! address type as a parameter: [`GroupAddress`]) and the Ethernet MACs of multicast groups.
//! [`crate::igmp`], [`crate::mld`], [`crate::ndisc`] and [`crate::l2`] import it; it imports none of
//! them.

use core::fmt;
use core::marker::PhantomData;
use core::net::{Ipv4Addr, Ipv6Addr};
use core::ops::Deref;

use crate::error::{check_count, check_len, Layer, Result};
use crate::field::{be16, be32, put16, put32};

// ---------------------------------------------------------------------------------------
// The lists of IGMPv3/MLDv2 Reprs: unbounded with `alloc`, inline without
// ---------------------------------------------------------------------------------------

/// A list of sources, records or auxiliary words in an IGMPv3/MLDv2 Repr. With the `alloc`
/// feature it holds any number of items (a report from a host in hundreds of groups parses);
/// without it, at most `N` inline (a [`FixedVec`]: parsing more gives
/// [`crate::ContentError::FieldOutOfRange`]). Dereferences to a slice.
#[cfg(feature = "alloc")]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct List<T, const N: usize> {
    items: alloc::vec::Vec<T>,
}

/// A list of sources, records or auxiliary words in an IGMPv3/MLDv2 Repr: at most `N` inline
/// without the `alloc` feature (see the `alloc` version's docs).
#[cfg(not(feature = "alloc"))]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct List<T: Blank, const N: usize> {
    items: FixedVec<T, N>,
}

#[cfg(feature = "alloc")]
impl<T: Clone, const N: usize> List<T, N> {
    /// How many items the list holds at most (unbounded with `alloc`).
    pub const CAPACITY: usize = usize::MAX;

    /// An empty list.
    pub const fn new() -> Self {
        List { items: alloc::vec::Vec::new() }
    }

    /// A list holding a copy of `items` (always `Some` with `alloc`).
    pub fn from_slice(items: &[T]) -> Option<Self> {
        Some(List { items: items.to_vec() })
    }

    /// Append (never full with `alloc`).
    pub fn push(&mut self, item: T) -> core::result::Result<(), T> {
        self.items.push(item);
        Ok(())
    }

    /// Remove every item.
    pub fn clear(&mut self) {
        self.items.clear();
    }

    /// The items.
    pub fn as_slice(&self) -> &[T] {
        &self.items
    }

    /// The items, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.items
    }
}

#[cfg(not(feature = "alloc"))]
impl<T: Blank, const N: usize> List<T, N> {
    /// How many items the list holds at most.
    pub const CAPACITY: usize = N;

    /// An empty list.
    pub const fn new() -> Self {
        List { items: FixedVec::new() }
    }

    /// A list holding a copy of `items`, `None` if there are more than `N`.
    pub fn from_slice(items: &[T]) -> Option<Self> {
        FixedVec::from_slice(items).map(|items| List { items })
    }

    /// Append, or give the item back when the list is full.
    pub fn push(&mut self, item: T) -> core::result::Result<(), T> {
        self.items.push(item)
    }

    /// Remove every item.
    pub fn clear(&mut self) {
        self.items.clear();
    }

    /// The items.
    pub fn as_slice(&self) -> &[T] {
        self.items.as_slice()
    }

    /// The items, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        self.items.as_mut_slice()
    }
}

#[cfg(feature = "alloc")]
impl<T: Clone, const N: usize> Default for List<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(not(feature = "alloc"))]
impl<T: Blank, const N: usize> Default for List<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "alloc")]
impl<T: Clone, const N: usize> Deref for List<T, N> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

#[cfg(not(feature = "alloc"))]
impl<T: Blank, const N: usize> Deref for List<T, N> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

#[cfg(feature = "alloc")]
impl<T: Clone + fmt::Debug, const N: usize> fmt::Debug for List<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

#[cfg(not(feature = "alloc"))]
impl<T: Blank + fmt::Debug, const N: usize> fmt::Debug for List<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

// ---------------------------------------------------------------------------------------
// A fixed-capacity list for the Reprs (no allocation)
// ---------------------------------------------------------------------------------------

/// A placeholder value for the unused slots of a [`FixedVec`] (types without `Default`,
/// such as `Ipv4Addr`).
pub trait Blank: Copy {
    /// The placeholder.
    const BLANK: Self;
}

impl Blank for Ipv4Addr {
    const BLANK: Self = Ipv4Addr::UNSPECIFIED;
}
impl Blank for Ipv6Addr {
    const BLANK: Self = Ipv6Addr::UNSPECIFIED;
}
impl Blank for u32 {
    const BLANK: Self = 0;
}
impl Blank for u8 {
    const BLANK: Self = 0;
}

/// A list of at most `N` items stored inline, so that Reprs with variable lists (IGMPv3 and
/// MLDv2 records and sources) stay `Copy` and need no allocator. Dereferences to a slice;
/// equality, hashing and `Debug` look only at the items present.
#[derive(Clone, Copy)]
pub struct FixedVec<T: Blank, const N: usize> {
    len: usize,
    items: [T; N],
}

impl<T: Blank, const N: usize> FixedVec<T, N> {
    /// The capacity.
    pub const CAPACITY: usize = N;

    /// An empty list.
    pub const fn new() -> Self {
        FixedVec { len: 0, items: [T::BLANK; N] }
    }

    /// A list holding a copy of `items`, `None` if there are more than `N`.
    pub fn from_slice(items: &[T]) -> Option<Self> {
        let mut v = Self::new();
        v.items.get_mut(..items.len())?.copy_from_slice(items);
        v.len = items.len();
        Some(v)
    }

    /// Append, or give the item back when the list is full.
    pub fn push(&mut self, item: T) -> core::result::Result<(), T> {
        match self.items.get_mut(self.len) {
            Some(slot) => {
                *slot = item;
                self.len += 1;
                Ok(())
            }
            None => Err(item),
        }
    }

    /// Remove every item.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// The items present.
    pub fn as_slice(&self) -> &[T] {
        &self.items[..self.len]
    }

    /// The items present, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.items[..self.len]
    }
}

impl<T: Blank, const N: usize> Default for FixedVec<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Blank, const N: usize> Deref for FixedVec<T, N> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Blank + PartialEq, const N: usize> PartialEq for FixedVec<T, N> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Blank + Eq, const N: usize> Eq for FixedVec<T, N> {}

impl<T: Blank + core::hash::Hash, const N: usize> core::hash::Hash for FixedVec<T, N> {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state)
    }
}

impl<T: Blank + fmt::Debug, const N: usize> fmt::Debug for FixedVec<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

// ---------------------------------------------------------------------------------------
// Multicast MACs
// ---------------------------------------------------------------------------------------

/// The Ethernet MAC of an IPv4 multicast group: 01:00:5e + the low 23 bits
/// [RFC 1112 §6.4; include/net/ip.h ip_eth_mc_map].
pub const fn ipv4_multicast_mac(group: Ipv4Addr) -> [u8; 6] {
    let o = group.octets();
    [0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]]
}

/// The Ethernet MAC of an IPv6 multicast group: 33:33 + the last 4 bytes
/// [RFC 2464 §7; include/net/addrconf.h ipv6_eth_mc_map].
pub const fn ipv6_multicast_mac(group: Ipv6Addr) -> [u8; 6] {
    let o = group.octets();
    [0x33, 0x33, o[12], o[13], o[14], o[15]]
}

// ---------------------------------------------------------------------------------------
// The group record of IGMPv3 [RFC 3376 §4.2.4] and MLDv2 [RFC 3810 §5.2.4]
// ---------------------------------------------------------------------------------------

/// Most sources a group record or a query holds without the `alloc` feature.
pub const MAX_SOURCES: usize = 8;
/// Most 32-bit words of auxiliary data a group record holds (hosts send none).
pub const MAX_AUX_WORDS: usize = 4;

/// Byte offsets in a group record, relative to the record: Record Type (1), Aux Data Len (1,
/// in 32-bit words), Number of Sources (2), the group address, its sources, the aux data.
pub mod field {
    #![allow(missing_docs)]
    use crate::field::Field;
    pub const RECORD_TYPE: usize = 0;
    pub const RECORD_AUX_DATA_LEN: usize = 1;
    pub const RECORD_NUM_SOURCES: Field = 2..4;
    pub const RECORD_ADDRESS: usize = 4;
}

/// The group address of a record: IPv4 in IGMPv3, IPv6 in MLDv2. The parameter of the record
/// view, its iterator and the owned-record code (implemented in [`crate::igmp`] and
/// [`crate::mld`], next to the record types).
pub trait GroupAddress: Copy + Blank {
    /// Bytes on the wire (4 or 16).
    const LEN: usize;
    /// The layer that errors name.
    const LAYER: Layer;
    /// The Record Type code of this protocol.
    type RecordType: Copy + From<u8> + Into<u8>;
    /// Read an address from the first [`Self::LEN`] bytes of `b`.
    fn read(b: &[u8]) -> Self;
    /// Write the address into the first [`Self::LEN`] bytes of `b`.
    fn write(self, b: &mut [u8]);
}

/// The length of a record's fixed part: 4 + the address.
pub const fn record_header_len<A: GroupAddress>() -> usize {
    field::RECORD_ADDRESS + A::LEN
}

/// Iterator over the group records of a report; see `igmp::Packet::records` and
/// `mld::Packet::records`.
#[derive(Debug, Clone)]
pub struct Records<'a, A> {
    buf: &'a [u8],
    offset: usize,
    remaining: u16,
    addr: PhantomData<A>,
}

impl<'a, A> Records<'a, A> {
    /// The `count` records of `buf` from `offset` on.
    pub(crate) const fn new(buf: &'a [u8], offset: usize, count: u16) -> Self {
        Records { buf, offset, remaining: count, addr: PhantomData }
    }
}

impl<'a, A: GroupAddress> Iterator for Records<'a, A> {
    /// A record view and its offset in the message, or the error of a record that does not fit.
    type Item = Result<(usize, Record<&'a [u8], A>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        let at = self.offset;
        let rest = self.buf.get(at..).unwrap_or(&[]);
        match Record::<_, A>::new_checked(rest) {
            Ok(rec) => {
                let len = rec.total_len();
                self.remaining -= 1;
                self.offset = at + len;
                Some(Ok((at, Record::new_unchecked(&rest[..len]))))
            }
            Err(e) => {
                self.remaining = 0;
                Some(Err(e.add_offset(at)))
            }
        }
    }
}

/// A checked zero-copy view of one group record whose group address is an `A`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<T: AsRef<[u8]>, A> {
    buffer: T,
    addr: PhantomData<A>,
}

impl<T: AsRef<[u8]>, A: GroupAddress> Record<T, A> {
    /// Wrap a buffer starting at the record without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        Record { buffer, addr: PhantomData }
    }

    /// Wrap a buffer, checking that the whole record (sources and aux data) is there.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let r = Self::new_unchecked(buffer);
        r.check_len()?;
        Ok(r)
    }

    /// Check that the record header, its sources and its aux data are in the buffer.
    pub fn check_len(&self) -> Result<()> {
        check_len(A::LAYER, self.b(), record_header_len::<A>())?;
        check_len(A::LAYER, self.b(), self.total_len())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Record Type.
    pub fn record_type(&self) -> A::RecordType {
        A::RecordType::from(self.b()[field::RECORD_TYPE])
    }

    /// Aux Data Len, in 32-bit words.
    pub fn aux_data_len(&self) -> u8 {
        self.b()[field::RECORD_AUX_DATA_LEN]
    }

    /// Number of Sources.
    pub fn num_sources(&self) -> u16 {
        be16(self.b(), field::RECORD_NUM_SOURCES.start)
    }

    /// Multicast Address.
    pub fn address(&self) -> A {
        A::read(&self.b()[field::RECORD_ADDRESS..])
    }

    /// The record length the header announces: header + sources + 4·aux words.
    pub fn total_len(&self) -> usize {
        record_header_len::<A>() + A::LEN * usize::from(self.num_sources()) + 4 * usize::from(self.aux_data_len())
    }

    /// The `i`th source, `None` past the count or the buffer.
    pub fn source(&self, i: usize) -> Option<A> {
        if i >= usize::from(self.num_sources()) {
            return None;
        }
        let at = record_header_len::<A>() + A::LEN * i;
        (self.b().len() >= at + A::LEN).then(|| A::read(&self.b()[at..]))
    }

    /// The `i`th word of auxiliary data, `None` past the length or the buffer.
    pub fn aux_word(&self, i: usize) -> Option<u32> {
        if i >= usize::from(self.aux_data_len()) {
            return None;
        }
        let at = record_header_len::<A>() + A::LEN * usize::from(self.num_sources()) + 4 * i;
        (self.b().len() >= at + 4).then(|| be32(self.b(), at))
    }
}

/// An owned group record (IGMPv3's `GroupRecordRepr`, MLDv2's `AddressRecordRepr`, which keep
/// their own field names): what the shared parse, length, emit and split need.
pub trait SourceRecord: Clone {
    /// The group address type.
    type Addr: GroupAddress;
    /// A record with no sources and no aux data.
    fn with_group(record_type: <Self::Addr as GroupAddress>::RecordType, group: Self::Addr) -> Self;
    /// Record Type.
    fn record_type(&self) -> <Self::Addr as GroupAddress>::RecordType;
    /// Multicast Address.
    fn group(&self) -> Self::Addr;
    /// The sources.
    fn sources(&self) -> &List<Self::Addr, MAX_SOURCES>;
    /// The sources, to fill.
    fn sources_mut(&mut self) -> &mut List<Self::Addr, MAX_SOURCES>;
    /// The auxiliary data words.
    fn aux_data(&self) -> &List<u32, MAX_AUX_WORDS>;
    /// The auxiliary data words, to fill.
    fn aux_data_mut(&mut self) -> &mut List<u32, MAX_AUX_WORDS>;
}

/// Parse one record view (checked) into an owned record, within the lists' capacities.
pub(crate) fn parse_record<R: SourceRecord, T: AsRef<[u8]> + ?Sized>(r: &Record<&T, R::Addr>) -> Result<R> {
    r.check_len()?;
    let layer = <R::Addr as GroupAddress>::LAYER;
    let capacity = List::<u32, MAX_SOURCES>::CAPACITY;
    let nsrc = check_count(layer, field::RECORD_NUM_SOURCES.start, usize::from(r.num_sources()), capacity)?;
    let capacity = List::<u32, MAX_AUX_WORDS>::CAPACITY;
    let naux = check_count(layer, field::RECORD_AUX_DATA_LEN, usize::from(r.aux_data_len()), capacity)?;
    let mut out = R::with_group(r.record_type(), r.address());
    for s in (0..nsrc).filter_map(|i| r.source(i)) {
        out.sources_mut().push(s).ok();
    }
    for w in (0..naux).filter_map(|i| r.aux_word(i)) {
        out.aux_data_mut().push(w).ok();
    }
    Ok(out)
}

/// The record's length on the wire.
pub(crate) fn record_len<R: SourceRecord>(r: &R) -> usize {
    let a = <R::Addr as GroupAddress>::LEN;
    record_header_len::<R::Addr>() + a * r.sources().len() + 4 * r.aux_data().len()
}

/// Write the record at the start of `buf` (at least [`record_len`] bytes; panics otherwise).
pub(crate) fn emit_record<R: SourceRecord>(r: &R, buf: &mut [u8]) {
    let a = <R::Addr as GroupAddress>::LEN;
    buf[field::RECORD_TYPE] = r.record_type().into();
    buf[field::RECORD_AUX_DATA_LEN] = r.aux_data().len() as u8;
    put16(buf, field::RECORD_NUM_SOURCES.start, r.sources().len() as u16);
    r.group().write(&mut buf[field::RECORD_ADDRESS..]);
    let mut at = record_header_len::<R::Addr>();
    for s in r.sources().iter() {
        s.write(&mut buf[at..]);
        at += a;
    }
    for w in r.aux_data().iter() {
        put32(buf, at, *w);
        at += 4;
    }
}

/// The records of a report cut into the record lists of reports that each fit `room` bytes
/// after the report header, as Linux's `add_grec()` builds them (net/ipv4/igmp.c,
/// net/ipv6/mcast.c): records are packed in order while they fit; a record whose sources
/// alone do not fit is cut into records of the same type and group, each with as many sources
/// as fit. Every list holds at least one record (or one source), whatever the room.
#[cfg(feature = "alloc")]
pub(crate) fn split_records<R: SourceRecord, const N: usize>(
    records: &[R],
    room: usize,
) -> alloc::vec::Vec<List<R, N>> {
    let a = <R::Addr as GroupAddress>::LEN;
    let mut out = alloc::vec::Vec::new();
    let mut cur = List::new();
    let mut used = 0;
    for r in records {
        let mut pieces = alloc::vec::Vec::new();
        if record_len(r) <= room || r.sources().is_empty() {
            pieces.push(r.clone());
        } else {
            let per = (room.saturating_sub(record_header_len::<R::Addr>() + 4 * r.aux_data().len()) / a).max(1);
            for chunk in r.sources().chunks(per) {
                let mut p = r.clone();
                *p.sources_mut() = List::from_slice(chunk).unwrap_or_default();
                pieces.push(p);
            }
        }
        for p in pieces {
            if used + record_len(&p) > room && !cur.is_empty() {
                out.push(core::mem::take(&mut cur));
                used = 0;
            }
            used += record_len(&p);
            cur.push(p).ok();
        }
    }
    if !cur.is_empty() || out.is_empty() {
        out.push(cur);
    }
    out
}
