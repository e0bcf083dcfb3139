//! The MLID pool: the lowest free MLID first, O(1) allocation and release.
//!
//! OpenSM scans its `mboxes` array for the first empty slot from 0xC000 on
//! [osm_sa_mcmember_record.c `get_new_mlid`]; this pool gives the same answer (the lowest free
//! MLID) from a two-level bitmap, and keeps a reference count per MLID so that groups may
//! share one when [`crate::SaConfig::share_mlids`] is on.

/// A pool of `count` MLIDs from `start`.
#[derive(Debug, Clone)]
pub(crate) struct MlidPool {
    start: u16,
    count: u32,
    /// Bit i set: MLID `start + i` is in use (bits past `count` are set for good).
    used: Vec<u64>,
    /// Bit w set: word `used[w]` is full (bits past the last word are set for good).
    full: Vec<u64>,
    /// Groups on each MLID (more than 1 only when sharing).
    refs: Vec<u32>,
    in_use: usize,
    share: bool,
    /// Next MLID to share, round robin, once the pool is exhausted.
    cursor: u32,
}

impl MlidPool {
    /// A pool of `count` (≥ 1) MLIDs starting at `start`.
    pub(crate) fn new(start: u16, count: u16, share: bool) -> MlidPool {
        let count = u32::from(count);
        let words = count.div_ceil(64) as usize;
        let mut used = vec![0u64; words];
        let tail = count % 64;
        if tail != 0 {
            used[words - 1] = !0u64 << tail;
        }
        let mut full = vec![0u64; words.div_ceil(64)];
        let ftail = words % 64;
        if ftail != 0 {
            let last = full.len() - 1;
            full[last] = !0u64 << ftail;
        }
        let mut p = MlidPool { start, count, used, full, refs: vec![0; count as usize], in_use: 0, share, cursor: 0 };
        for w in 0..words {
            p.refresh_full(w);
        }
        p
    }

    fn index(&self, mlid: u16) -> Option<usize> {
        let i = u32::from(mlid.wrapping_sub(self.start));
        (mlid >= self.start && i < self.count).then_some(i as usize)
    }

    fn refresh_full(&mut self, w: usize) {
        let bit = 1u64 << (w % 64);
        if self.used[w] == !0 {
            self.full[w / 64] |= bit;
        } else {
            self.full[w / 64] &= !bit;
        }
    }

    fn take(&mut self, i: usize) -> u16 {
        self.used[i / 64] |= 1 << (i % 64);
        self.refresh_full(i / 64);
        self.refs[i] = 1;
        self.in_use += 1;
        self.start + i as u16
    }

    fn lowest_free(&self) -> Option<usize> {
        for (fi, &f) in self.full.iter().enumerate() {
            if f != !0 {
                let w = fi * 64 + (!f).trailing_zeros() as usize;
                let b = (!self.used[w]).trailing_zeros() as usize;
                return Some(w * 64 + b);
            }
        }
        None
    }

    /// An MLID for a new group: `requested` when it is in the range and free (OpenSM honours
    /// the record's MLID that way), else the lowest free one, else (sharing on) the next one
    /// round robin, else `None`.
    pub(crate) fn alloc(&mut self, requested: u16) -> Option<u16> {
        if let Some(i) = self.index(requested) {
            if self.refs[i] == 0 {
                return Some(self.take(i));
            }
        }
        if let Some(i) = self.lowest_free() {
            return Some(self.take(i));
        }
        if self.share {
            let i = self.cursor as usize;
            self.cursor = (self.cursor + 1) % self.count;
            self.refs[i] += 1;
            return Some(self.start + i as u16);
        }
        None
    }

    /// Give back one reference to `mlid`; it is free again when no group holds it.
    pub(crate) fn free(&mut self, mlid: u16) {
        let Some(i) = self.index(mlid) else { return };
        match self.refs[i] {
            0 => {}
            1 => {
                self.refs[i] = 0;
                self.used[i / 64] &= !(1 << (i % 64));
                self.refresh_full(i / 64);
                self.in_use -= 1;
            }
            _ => self.refs[i] -= 1,
        }
    }

    /// Distinct MLIDs in use.
    pub(crate) fn in_use(&self) -> usize {
        self.in_use
    }

    /// Groups holding `mlid` (0 when free or out of range).
    pub(crate) fn refs(&self, mlid: u16) -> u32 {
        self.index(mlid).map_or(0, |i| self.refs[i])
    }

    /// The MLIDs in use, lowest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        self.refs.iter().enumerate().filter(|(_, &r)| r > 0).map(|(i, _)| self.start + i as u16)
    }

    /// Heap bytes held.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.used.capacity() * 8 + self.full.capacity() * 8 + self.refs.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowest_free_first_and_reuse() {
        let mut p = MlidPool::new(0xC000, 0x3FFF, false);
        assert_eq!(p.alloc(0), Some(0xC000));
        assert_eq!(p.alloc(0), Some(0xC001));
        assert_eq!(p.alloc(0), Some(0xC002));
        p.free(0xC001);
        assert_eq!(p.in_use(), 2);
        assert_eq!(p.alloc(0), Some(0xC001));
        assert_eq!(p.alloc(0xC010), Some(0xC010)); // a free requested MLID is honoured
        assert_eq!(p.alloc(0xC010), Some(0xC003)); // a taken one is not
        assert_eq!(p.alloc(0x1234), Some(0xC004)); // out of range: ignored
        assert_eq!(p.iter().collect::<Vec<_>>(), [0xC000, 0xC001, 0xC002, 0xC003, 0xC004, 0xC010]);
    }

    #[test]
    fn exhaustion_and_full_cycle() {
        for count in [1u16, 63, 64, 65, 130, 4096, 0x3FFF] {
            let mut p = MlidPool::new(0xC000, count, false);
            for i in 0..count {
                assert_eq!(p.alloc(0), Some(0xC000 + i), "count {count}");
            }
            assert_eq!(p.alloc(0), None);
            assert_eq!(p.in_use(), count as usize);
            for i in (0..count).rev() {
                p.free(0xC000 + i);
            }
            assert_eq!(p.in_use(), 0);
            assert_eq!(p.alloc(0), Some(0xC000));
        }
    }

    #[test]
    fn sharing_when_exhausted() {
        let mut p = MlidPool::new(0xC000, 2, true);
        let a = p.alloc(0).unwrap();
        let b = p.alloc(0).unwrap();
        let c = p.alloc(0).unwrap(); // shares
        let d = p.alloc(0).unwrap();
        assert_eq!((a, b, c, d), (0xC000, 0xC001, 0xC000, 0xC001));
        assert_eq!(p.refs(0xC000), 2);
        assert_eq!(p.in_use(), 2);
        p.free(0xC000);
        assert_eq!(p.in_use(), 2);
        p.free(0xC000);
        assert_eq!(p.in_use(), 1);
        p.free(0xC000); // double free is ignored
        assert_eq!(p.alloc(0), Some(0xC000));
    }
}
