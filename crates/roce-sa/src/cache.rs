//! The duplicate-request cache: the last N answers to Set and Delete, by requester and TID.
//!
//! A requester retransmits a request when the answer was lost (the kernel's SA client resends
//! the same MAD, same TID, after its timeout [sa_query.c]). Applying a join twice is harmless,
//! but a leave applied twice would be answered 0x0200 the second time although it succeeded,
//! so the answer is kept and sent again. The cache is a ring of fixed slots (FIFO eviction)
//! indexed by an open-addressing table; it never grows past its size. An entry evicted while
//! younger than the requesters' retry horizon is counted
//! ([`crate::SaStats::dup_cache_evicted_young`]): a retransmission of its request would be
//! applied again (a leave then answered 0x0200).
//!
//! A slot keeps what the answer is made of (the responder's [`crate::responder`] keeps the
//! status and the answer's record, 54 bytes), not the answer, and the request compactly: its
//! first 108 bytes (headers and the record) and the 148 after them only when they are not all
//! zero (never, from the kernel or this workspace's stack), so that a request is still
//! compared byte for byte.

use core::hash::{BuildHasher, Hash, Hasher};
use core::time::Duration;

use roce_wire::{Gid, MAD_SIZE};

use crate::requester::Requester;

/// The bytes of a request kept in every slot: MAD, RMPP and SA headers and an MCMemberRecord.
const HEAD: usize = 108;

/// Who asked, and which transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    gid: Gid,
    qpn: u32,
    tid: u64,
}

impl Hash for Key {
    // Three words, not the GID as a byte slice (length prefix and all): this runs twice per
    // Set or Delete the SA answers.
    fn hash<H: Hasher>(&self, h: &mut H) {
        let g = u128::from_le_bytes(self.gid.0);
        h.write_u64(self.tid);
        h.write_u64(g as u64);
        h.write_u64((g >> 64) as u64 ^ u64::from(self.qpn) << 32);
    }
}

/// A request [`DupCache::lookup`] did not find: its key, the key's hash, and the slot holding
/// the same key with other bytes, if any.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Miss {
    key: Key,
    hash: u64,
    slot: Option<usize>,
}

/// A request as a slot keeps it (see the module documentation).
#[derive(Debug, Clone)]
struct Request {
    head: [u8; HEAD],
    /// The bytes after the head, unless all zero.
    tail: Option<Box<[u8; MAD_SIZE - HEAD]>>,
}

impl Request {
    fn new(r: &[u8; MAD_SIZE]) -> Request {
        let (head, tail) = split(r);
        Request { head: *head, tail: (!is_zero(tail)).then(|| Box::new(*tail)) }
    }

    fn set(&mut self, r: &[u8; MAD_SIZE]) {
        let (head, tail) = split(r);
        self.head = *head;
        match &mut self.tail {
            _ if is_zero(tail) => self.tail = None,
            Some(t) => **t = *tail,
            None => self.tail = Some(Box::new(*tail)),
        }
    }

    fn is(&self, r: &[u8; MAD_SIZE]) -> bool {
        let (head, tail) = split(r);
        self.head == *head
            && match &self.tail {
                None => is_zero(tail),
                Some(t) => **t == *tail,
            }
    }
}

/// Whether every byte is 0 (an OR of them all: no early exit, no zero array to compare with).
fn is_zero(b: &[u8]) -> bool {
    b.iter().fold(0, |acc, &x| acc | x) == 0
}

fn split(r: &[u8; MAD_SIZE]) -> (&[u8; HEAD], &[u8; MAD_SIZE - HEAD]) {
    let (head, tail) = r.split_first_chunk::<HEAD>().expect("a MAD is longer than its head");
    (head, tail.try_into().expect("the rest of a MAD"))
}

#[derive(Debug, Clone)]
struct Slot<V> {
    /// When it was stored (the responder's clock, [`crate::SaResponder::handle_time`]).
    at: Duration,
    key: Key,
    /// The key's hash (where its index entry wants to be).
    hash: u64,
    /// The table position of its index entry (kept as entries move), for the eviction.
    pos: u32,
    request: Request,
    value: V,
}

/// A bounded cache of the answers (`V`) to requests.
///
/// The index is an open-addressing table of slot numbers (linear probing, at most a quarter full,
/// deletion by backward shift): a lookup is a probe or two in one array, an eviction none
/// (each slot knows its index position).
#[derive(Debug, Clone)]
pub(crate) struct DupCache<V> {
    size: usize,
    slots: Vec<Slot<V>>,
    next: usize,
    /// Slot number + 1 per table position; 0 is empty.
    table: Vec<u32>,
    hasher: foldhash::fast::RandomState,
}

impl<V: Copy> DupCache<V> {
    /// A cache of `size` entries (0: disabled).
    pub(crate) fn new(size: usize) -> DupCache<V> {
        // Four times the entries, a power of two, made up front for up to 1,024 entries and
        // grown with the entries beyond (a responder that sees little load stays small); none
        // when disabled. At most a quarter full, probe chains stay short (an eviction walks
        // one to its end).
        let positions = if size == 0 { 0 } else { (4 * size.min(1 << 10)).next_power_of_two() };
        DupCache { size, slots: Vec::new(), next: 0, table: vec![0; positions], hasher: Default::default() }
    }

    /// Keep the table at most a quarter full for `entries` entries.
    fn reserve(&mut self, entries: usize) {
        if 4 * entries <= self.table.len() {
            return;
        }
        self.table = vec![0; (4 * entries).next_power_of_two()];
        for i in 0..self.slots.len() {
            self.index(self.slots[i].hash, i);
        }
    }

    fn mask(&self) -> usize {
        self.table.len() - 1
    }

    /// The slot holding `key`.
    fn find(&self, key: &Key, hash: u64) -> Option<usize> {
        if self.table.is_empty() {
            return None;
        }
        let mask = self.mask();
        let mut p = hash as usize & mask;
        loop {
            let e = self.table[p];
            if e == 0 {
                return None;
            }
            let i = (e - 1) as usize;
            if self.slots[i].hash == hash && self.slots[i].key == *key {
                return Some(i);
            }
            p = (p + 1) & mask;
        }
    }

    /// Point a free table position at slot `i` (whose key hashes to `hash`).
    fn index(&mut self, hash: u64, i: usize) {
        let mask = self.mask();
        let mut p = hash as usize & mask;
        while self.table[p] != 0 {
            p = (p + 1) & mask;
        }
        self.table[p] = i as u32 + 1;
        self.slots[i].pos = p as u32;
    }

    /// Empty table position `hole`, moving back the entries after it that probed past it.
    fn unindex(&mut self, mut hole: usize) {
        let mask = self.mask();
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let e = self.table[j];
            if e == 0 {
                break;
            }
            let slot = &mut self.slots[(e - 1) as usize];
            let ideal = slot.hash as usize & mask;
            // The entry at j may fill the hole if its ideal position is not in (hole, j].
            if j.wrapping_sub(ideal) & mask >= j.wrapping_sub(hole) & mask {
                slot.pos = hole as u32;
                self.table[hole] = e;
                hole = j;
            }
        }
        self.table[hole] = 0;
    }

    /// The answer already sent for this very request (same requester, TID and bytes).
    #[cfg(test)]
    pub(crate) fn get(&self, from: &Requester, tid: u64, request: &[u8; MAD_SIZE]) -> Option<&V> {
        self.lookup(from, tid, request).ok()
    }

    /// The answer already sent for this very request (same requester, TID and bytes), or
    /// what [`DupCache::insert_missed`] needs to remember its answer without hashing and
    /// probing again.
    pub(crate) fn lookup(&self, from: &Requester, tid: u64, request: &[u8; MAD_SIZE]) -> Result<&V, Miss> {
        let key = Key { gid: from.gid, qpn: from.qpn, tid };
        let hash = self.hasher.hash_one(key);
        match self.find(&key, hash) {
            Some(i) if self.slots[i].request.is(request) => Ok(&self.slots[i].value),
            found => Err(Miss { key, hash, slot: found }),
        }
    }

    /// Remember `value` as the answer to `request`, evicting the oldest entry when full.
    #[cfg(test)]
    pub(crate) fn insert(&mut self, from: &Requester, tid: u64, request: &[u8; MAD_SIZE], value: &V) {
        let key = Key { gid: from.gid, qpn: from.qpn, tid };
        let hash = self.hasher.hash_one(key);
        let slot = self.find(&key, hash);
        self.insert_missed(Miss { key, hash, slot }, request, value, Duration::ZERO, Duration::ZERO);
    }

    /// Remember `value` as the answer to the request `lookup` missed (the cache unchanged
    /// since) at `now`, evicting the oldest entry when full. Returns whether the entry evicted
    /// was younger than `horizon` (a retransmission of it would now be applied again).
    pub(crate) fn insert_missed(
        &mut self,
        miss: Miss,
        request: &[u8; MAD_SIZE],
        value: &V,
        now: Duration,
        horizon: Duration,
    ) -> bool {
        if self.size == 0 {
            return false;
        }
        let Miss { key, hash, slot } = miss;
        // The same key with different bytes (a TID reused for another request) replaces the
        // old entry in place.
        if let Some(i) = slot {
            let slot = &mut self.slots[i];
            slot.request.set(request);
            slot.value = *value;
            slot.at = now;
            return false;
        }
        let mut young = false;
        let i = if self.slots.len() < self.size {
            self.reserve(self.slots.len() + 1);
            self.slots.push(Slot { at: now, key, hash, pos: 0, request: Request::new(request), value: *value });
            self.slots.len() - 1
        } else {
            let i = self.next;
            self.next = if self.next + 1 == self.size { 0 } else { self.next + 1 };
            self.unindex(self.slots[i].pos as usize);
            let slot = &mut self.slots[i];
            young = now.saturating_sub(slot.at) < horizon;
            slot.at = now;
            slot.key = key;
            slot.hash = hash;
            slot.request.set(request);
            slot.value = *value;
            i
        };
        self.index(hash, i);
        young
    }

    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Heap bytes held (slots, the request tails that are not zero, and the index).
    pub(crate) fn heap_bytes(&self) -> usize {
        let tails = self.slots.iter().filter(|s| s.request.tail.is_some()).count();
        self.slots.capacity() * core::mem::size_of::<Slot<V>>()
            + tails * (MAD_SIZE - HEAD)
            + self.table.capacity() * core::mem::size_of::<u32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(n: u8) -> Requester {
        Requester::new(Gid::from_ipv4([10, 0, 0, n].into()), 1)
    }

    #[test]
    fn evicting_an_entry_younger_than_the_horizon_is_reported() {
        let mut c = DupCache::new(2);
        let (a, r) = ([1u8; 256], [9u8; 256]);
        let h = Duration::from_secs(8);
        let put = |c: &mut DupCache<[u8; 256]>, tid: u64, at: u64| {
            let Err(miss) = c.lookup(&who(1), tid, &a) else { panic!("cached") };
            c.insert_missed(miss, &a, &r, Duration::from_secs(at), h)
        };
        assert!(!put(&mut c, 1, 0) && !put(&mut c, 2, 1), "room for both");
        assert!(put(&mut c, 3, 5), "TID 1, 5 s old, evicted");
        assert!(!put(&mut c, 4, 20), "TID 2, 19 s old: past the horizon");
    }

    #[test]
    fn hit_miss_eviction() {
        let mut c = DupCache::new(2);
        let (a, b, r) = ([1u8; 256], [2u8; 256], [9u8; 256]);
        assert!(c.get(&who(1), 7, &a).is_none());
        c.insert(&who(1), 7, &a, &r);
        assert_eq!(c.get(&who(1), 7, &a), Some(&r));
        assert!(c.get(&who(2), 7, &a).is_none()); // another requester
        assert!(c.get(&who(1), 8, &a).is_none()); // another TID
        assert!(c.get(&who(1), 7, &b).is_none()); // same TID, other bytes
        c.insert(&who(1), 8, &a, &r);
        c.insert(&who(1), 9, &a, &r); // evicts TID 7
        assert!(c.get(&who(1), 7, &a).is_none());
        assert!(c.get(&who(1), 8, &a).is_some() && c.get(&who(1), 9, &a).is_some());
        assert_eq!(c.len(), 2);
        c.insert(&who(1), 9, &b, &a); // replaced in place
        assert_eq!(c.get(&who(1), 9, &b), Some(&a));
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn evicts_in_order_through_many_probe_chains() {
        // A small table under churn: evictions move entries back along their probe chains;
        // every live entry must stay findable and every evicted one gone.
        let size = 8;
        let mut c = DupCache::new(size);
        let req = |t: u64| [t as u8; 256];
        for t in 0..500u64 {
            let from = who((t % 3) as u8);
            c.insert(&from, t, &req(t), &[1; 256]);
            for u in 0..=t {
                let hit = c.get(&who((u % 3) as u8), u, &req(u)).is_some();
                assert_eq!(hit, u + size as u64 > t, "tid {u} after inserting {t}");
            }
        }
        assert_eq!(c.len(), size);
    }

    #[test]
    fn requests_are_compared_whole() {
        // A slot keeps a request's tail only when it is not zero: same head with another tail,
        // or the other way round, is another request.
        let mut c = DupCache::new(4);
        let mut a = [0u8; 256];
        a[0] = 1;
        let mut b = a;
        b[200] = 5;
        let mut d = a;
        d[100] = 7;
        c.insert(&who(1), 1, &a, &1u8);
        assert_eq!(c.get(&who(1), 1, &a), Some(&1));
        assert!(c.get(&who(1), 1, &b).is_none() && c.get(&who(1), 1, &d).is_none());
        c.insert(&who(1), 1, &b, &2u8); // replaced in place, with a tail
        assert_eq!(c.get(&who(1), 1, &b), Some(&2));
        assert!(c.get(&who(1), 1, &a).is_none());
        c.insert(&who(1), 1, &a, &3u8); // and back to a zero tail
        assert_eq!(c.get(&who(1), 1, &a), Some(&3));
        assert!(c.get(&who(1), 1, &b).is_none());
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn disabled() {
        let mut c = DupCache::new(0);
        c.insert(&who(1), 7, &[0; 256], &[0; 256]);
        assert!(c.get(&who(1), 7, &[0; 256]).is_none());
        assert_eq!(c.len(), 0);
    }
}
