//! Memory regions: the program's own memory, registered with `ibv_reg_mr`. The table maps a
//! key to the region's bounds, access flags and PD; every scatter/gather element of a work
//! request is checked against it once, at post time (bounds, key, PD, access), before any
//! byte is read or written. The engine never sees a pointer: the posting thread gathers a
//! send's bytes into a buffer, and the engine's thread scatters a receive's bytes into checked
//! ranges (RDMA WRITE and READ of the next issue land in and are served from the same ranges,
//! with the rkey checks rxe_mr.c makes).
//!
//! Keys are rxe's shape: an index in the upper 24 bits and an 8-bit key, lkey == rkey.

use std::collections::BTreeMap;

use crate::abi::{IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_ATOMIC, IBV_ACCESS_REMOTE_WRITE};

/// One registered region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// Start address in the program.
    pub addr: u64,
    /// Length in bytes.
    pub length: u64,
    /// `IBV_ACCESS_*` flags.
    pub access: u32,
    /// The PD (its address).
    pub pd: usize,
}

/// Why an element was refused (the completion status rxe gives).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MrError {
    /// No region with this key, another PD, or outside the region (IBV_WC_LOC_PROT_ERR).
    Protection,
    /// The region does not allow the access (IBV_WC_LOC_ACCESS_ERR for a local write).
    Access,
}

/// Every region of the process.
#[derive(Debug, Default)]
pub struct MrTable {
    regions: BTreeMap<u32, Region>,
    next_index: u32,
    next_key: u8,
}

impl MrTable {
    /// Register a region; returns its key (lkey == rkey). EINVAL for an empty region, or
    /// remote write/atomic without local write (as ib_check_mr_access does).
    pub fn register(&mut self, r: Region) -> Result<u32, i32> {
        if r.length == 0 || r.addr.checked_add(r.length).is_none() {
            return Err(libc::EINVAL);
        }
        if r.access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC) != 0
            && r.access & IBV_ACCESS_LOCAL_WRITE == 0
        {
            return Err(libc::EINVAL);
        }
        // Region indices stay below the engine's window indices (roce_cm::rc::MW_INDEX_FIRST),
        // so that a key names one or the other.
        let last = roce_cm::rc::MW_INDEX_FIRST - 1;
        if self.regions.len() >= last as usize {
            return Err(libc::ENOMEM);
        }
        loop {
            self.next_index = (self.next_index % last) + 1;
            self.next_key = self.next_key.wrapping_add(1);
            let key = (self.next_index << 8) | u32::from(self.next_key);
            if let std::collections::btree_map::Entry::Vacant(v) = self.regions.entry(key) {
                v.insert(r);
                return Ok(key);
            }
        }
    }

    /// Deregister; EINVAL for an unknown key.
    pub fn deregister(&mut self, key: u32) -> Result<Region, i32> {
        self.regions.remove(&key).ok_or(libc::EINVAL)
    }

    /// The region of `key`.
    pub fn get(&self, key: u32) -> Option<&Region> {
        self.regions.get(&key)
    }

    /// Whether `key` names a region of the PD at `pd` (what an SGE of a QP of that PD may use).
    pub fn in_pd(&self, key: u32, pd: usize) -> bool {
        self.get(key).is_some_and(|r| r.pd == pd)
    }

    /// Check an element `[addr, addr+len)` with `lkey` for a local access by a QP of `pd`;
    /// `write`: the engine writes there (a receive).
    pub fn check_local(&self, lkey: u32, pd: usize, addr: u64, len: u64, write: bool) -> Result<(), MrError> {
        let r = self.regions.get(&lkey).ok_or(MrError::Protection)?;
        if r.pd != pd {
            return Err(MrError::Protection);
        }
        let end = addr.checked_add(len).ok_or(MrError::Protection)?;
        if addr < r.addr || end > r.addr + r.length {
            return Err(MrError::Protection);
        }
        if write && r.access & IBV_ACCESS_LOCAL_WRITE == 0 {
            return Err(MrError::Access);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(addr: u64, length: u64, access: u32) -> Region {
        Region { addr, length, access, pd: 1 }
    }

    #[test]
    fn elements_are_checked_against_bounds_pd_and_access() {
        let mut t = MrTable::default();
        let k = t.register(region(0x1000, 0x100, IBV_ACCESS_LOCAL_WRITE)).unwrap();
        assert_eq!(t.check_local(k, 1, 0x1000, 0x100, true), Ok(()));
        assert_eq!(t.check_local(k, 1, 0x10ff, 2, false), Err(MrError::Protection));
        assert_eq!(t.check_local(k, 2, 0x1000, 1, false), Err(MrError::Protection));
        assert_eq!(t.check_local(k ^ 1, 1, 0x1000, 1, false), Err(MrError::Protection));
        assert_eq!(t.check_local(k, 1, u64::MAX, 2, false), Err(MrError::Protection));
        let ro = t.register(region(0x2000, 0x10, 0)).unwrap();
        assert_eq!(t.check_local(ro, 1, 0x2000, 1, true), Err(MrError::Access));
        assert_eq!(t.check_local(ro, 1, 0x2000, 1, false), Ok(()));
    }

    #[test]
    fn registration_refuses_what_the_kernel_refuses() {
        let mut t = MrTable::default();
        assert_eq!(t.register(region(0x1000, 0, IBV_ACCESS_LOCAL_WRITE)), Err(libc::EINVAL));
        assert_eq!(t.register(region(0x1000, 1, IBV_ACCESS_REMOTE_WRITE)), Err(libc::EINVAL));
        assert_eq!(t.register(region(u64::MAX, 2, 0)), Err(libc::EINVAL));
        let k = t.register(region(0x1000, 1, 0)).unwrap();
        assert!(t.deregister(k).is_ok());
        assert_eq!(t.deregister(k), Err(libc::EINVAL));
    }
}
