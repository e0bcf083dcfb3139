//! The duplicate-request cache: the last N answers to Set and Delete, by requester and TID.
//!
//! A requester retransmits a request when the answer was lost (the kernel's SA client resends
//! the same MAD, same TID, after its timeout [sa_query.c]). Applying a join twice is harmless,
//! but a leave applied twice would be answered 0x0200 the second time although it succeeded,
//! so the answer is kept and sent again. The cache is a ring of fixed slots (FIFO eviction)
//! indexed by a hash map; it never grows past its size.

use std::collections::HashMap;

use roce_wire::{Gid, MAD_SIZE};

use crate::Requester;

/// Who asked, and which transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    gid: Gid,
    qpn: u32,
    tid: u64,
}

#[derive(Debug, Clone)]
struct Slot {
    key: Key,
    request: [u8; MAD_SIZE],
    reply: [u8; MAD_SIZE],
}

/// A bounded cache of single-MAD answers.
#[derive(Debug, Clone)]
pub(crate) struct DupCache {
    size: usize,
    slots: Vec<Slot>,
    next: usize,
    index: HashMap<Key, u32, foldhash::fast::RandomState>,
}

impl DupCache {
    /// A cache of `size` entries (0: disabled).
    pub(crate) fn new(size: usize) -> DupCache {
        DupCache {
            size,
            slots: Vec::new(),
            next: 0,
            // Twice the entries: with eviction churning the index, a table at most half full
            // rehashes in place instead of growing (no allocation in steady state).
            index: HashMap::with_capacity_and_hasher(2 * size.min(1 << 16), Default::default()),
        }
    }

    /// The answer already sent for this very request (same requester, TID and bytes).
    pub(crate) fn get(&self, from: &Requester, tid: u64, request: &[u8; MAD_SIZE]) -> Option<&[u8; MAD_SIZE]> {
        let key = Key { gid: from.gid, qpn: from.qpn, tid };
        let slot = &self.slots[*self.index.get(&key)? as usize];
        (slot.request == *request).then_some(&slot.reply)
    }

    /// Remember `reply` as the answer to `request`, evicting the oldest entry when full.
    pub(crate) fn insert(&mut self, from: &Requester, tid: u64, request: &[u8; MAD_SIZE], reply: &[u8; MAD_SIZE]) {
        if self.size == 0 {
            return;
        }
        let key = Key { gid: from.gid, qpn: from.qpn, tid };
        // The same key with different bytes (a TID reused for another request) replaces the
        // old entry in place.
        if let Some(&i) = self.index.get(&key) {
            let slot = &mut self.slots[i as usize];
            slot.request = *request;
            slot.reply = *reply;
            return;
        }
        // Written in place: a slot is two MADs, too big to build aside and move.
        let i = if self.slots.len() < self.size {
            self.slots.push(Slot { key, request: *request, reply: *reply });
            self.slots.len() - 1
        } else {
            let i = self.next;
            self.next = (self.next + 1) % self.size;
            let slot = &mut self.slots[i];
            self.index.remove(&slot.key);
            slot.key = key;
            slot.request = *request;
            slot.reply = *reply;
            i
        };
        self.index.insert(key, i as u32);
    }

    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Heap bytes held (slots and index, estimated from capacities).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.slots.capacity() * core::mem::size_of::<Slot>()
            + crate::group::hash_table_bytes(self.index.capacity(), core::mem::size_of::<(Key, u32)>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(n: u8) -> Requester {
        Requester::new(Gid::from_ipv4([10, 0, 0, n].into()), 1)
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
    fn disabled() {
        let mut c = DupCache::new(0);
        c.insert(&who(1), 7, &[0; 256], &[0; 256]);
        assert!(c.get(&who(1), 7, &[0; 256]).is_none());
        assert_eq!(c.len(), 0);
    }
}
