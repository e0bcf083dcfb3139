//! Memory regions: registered buffers with an address, an lkey/rkey and access flags, checked
//! on every local and remote access [rxe_mr.c `mr_check_range`, `lookup_mr`; IBA 10.6].
//!
//! The engine owns the bytes (sans-IO: there is no foreign memory to pin); the application
//! fills and reads them through [`MrTable::get`] / [`MrTable::get_mut`], and received data is
//! written straight from the frame into them.

use std::collections::BTreeMap;

use crate::Errno;

/// Access flags of a memory region or QP, with the values of `enum ibv_access_flags`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(pub u32);

impl Access {
    /// No access beyond local read.
    pub const NONE: Access = Access(0);
    /// `IBV_ACCESS_LOCAL_WRITE`: the HCA may write (receives, READ responses, atomic results).
    pub const LOCAL_WRITE: Access = Access(1);
    /// `IBV_ACCESS_REMOTE_WRITE`.
    pub const REMOTE_WRITE: Access = Access(2);
    /// `IBV_ACCESS_REMOTE_READ`.
    pub const REMOTE_READ: Access = Access(4);
    /// `IBV_ACCESS_REMOTE_ATOMIC`.
    pub const REMOTE_ATOMIC: Access = Access(8);
    /// Every flag above.
    pub const ALL: Access = Access(15);

    /// Both sets.
    pub const fn union(self, o: Access) -> Access {
        Access(self.0 | o.0)
    }
    /// Whether every flag of `o` is set.
    pub const fn contains(self, o: Access) -> bool {
        self.0 & o.0 == o.0
    }
}

/// What `reg_mr` returns (`struct ibv_mr`'s addr, length, lkey, rkey).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MrInfo {
    /// The region's first virtual address.
    pub addr: u64,
    /// Its length in bytes.
    pub length: usize,
    /// Local key (used in SGEs).
    pub lkey: u32,
    /// Remote key (0 when no remote access was granted).
    pub rkey: u32,
    /// The access flags it was registered with.
    pub access: Access,
}

/// A scatter/gather element (`struct ibv_sge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sge {
    /// Virtual address inside a registered region.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// The region's lkey.
    pub lkey: u32,
}

#[derive(Debug, Clone)]
struct Mr {
    info: MrInfo,
    buf: Vec<u8>,
}

/// Why an access to registered memory was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MrError {
    /// No region with that key.
    BadKey,
    /// The key exists but lacks the access flag.
    Access,
    /// The range is not inside the region.
    Range,
    /// More data than the SGEs hold.
    Length,
}

/// The protection domain's memory regions, by key.
#[derive(Debug, Clone, Default)]
pub struct MrTable {
    mrs: BTreeMap<u32, Mr>,
    next_index: u32,
    next_addr: u64,
}

/// Regions start at this address and are 4 KiB aligned, one guard page apart, so that an
/// address always names at most one region.
const BASE_ADDR: u64 = 0x7f00_0000_0000;

impl MrTable {
    /// `ibv_reg_mr` of a zeroed buffer of `length` bytes. Remote flags need LOCAL_WRITE with
    /// them when they include REMOTE_WRITE or REMOTE_ATOMIC (`ib_check_mr_access`: EINVAL).
    pub fn reg(&mut self, length: usize, access: Access, key_byte: u8) -> Result<MrInfo, Errno> {
        let needs_lw = access.contains(Access::REMOTE_WRITE) || access.contains(Access::REMOTE_ATOMIC);
        if needs_lw && !access.contains(Access::LOCAL_WRITE) {
            return Err(Errno::EINVAL);
        }
        if length > (1 << 31) || self.mrs.len() >= 1 << 20 {
            return Err(Errno::ENOMEM);
        }
        if self.next_addr == 0 {
            self.next_addr = BASE_ADDR;
        }
        self.next_index += 1;
        // rxe: key = index << 8 | a random byte; lkey and rkey are the same number.
        let key = (self.next_index << 8) | u32::from(key_byte);
        let remote = access.0 & (Access::REMOTE_WRITE.0 | Access::REMOTE_READ.0 | Access::REMOTE_ATOMIC.0) != 0;
        let info = MrInfo { addr: self.next_addr, length, lkey: key, rkey: if remote { key } else { 0 }, access };
        self.next_addr += (length as u64).div_ceil(4096) * 4096 + 4096;
        self.mrs.insert(key, Mr { info, buf: vec![0; length] });
        Ok(info)
    }

    /// `ibv_dereg_mr`.
    pub fn dereg(&mut self, lkey: u32) -> Result<(), Errno> {
        self.mrs.remove(&lkey).map(|_| ()).ok_or(Errno::EINVAL)
    }

    /// A region's description.
    pub fn info(&self, lkey: u32) -> Option<MrInfo> {
        self.mrs.get(&lkey).map(|m| m.info)
    }

    /// The bytes of a region.
    pub fn get(&self, lkey: u32) -> Option<&[u8]> {
        self.mrs.get(&lkey).map(|m| &m.buf[..])
    }

    /// The bytes of a region, writable by the application.
    pub fn get_mut(&mut self, lkey: u32) -> Option<&mut [u8]> {
        self.mrs.get_mut(&lkey).map(|m| &mut m.buf[..])
    }

    /// The byte offset of `[addr, addr+len)` in the region `key`, checked for `need` (and for
    /// being a remote key when `remote`).
    fn check(&self, key: u32, addr: u64, len: u64, need: Access, remote: bool) -> Result<usize, MrError> {
        let m = self.mrs.get(&key).ok_or(MrError::BadKey)?;
        if remote && m.info.rkey != key {
            return Err(MrError::BadKey);
        }
        if !m.info.access.contains(need) {
            return Err(MrError::Access);
        }
        let start = addr.checked_sub(m.info.addr).ok_or(MrError::Range)?;
        let end = start.checked_add(len).ok_or(MrError::Range)?;
        if end > m.info.length as u64 {
            return Err(MrError::Range);
        }
        Ok(start as usize)
    }

    /// Remote access to `[va, va+len)` under `rkey` with `need` (responder side).
    pub(crate) fn remote_slice(&mut self, rkey: u32, va: u64, len: usize, need: Access) -> Result<&mut [u8], MrError> {
        let off = self.check(rkey, va, len as u64, need, true)?;
        let m = self.mrs.get_mut(&rkey).ok_or(MrError::BadKey)?;
        Ok(&mut m.buf[off..off + len])
    }

    /// Check a remote range without touching it.
    pub(crate) fn check_remote(&self, rkey: u32, va: u64, len: usize, need: Access) -> Result<(), MrError> {
        self.check(rkey, va, len as u64, need, true).map(|_| ())
    }

    /// Check every SGE of a local list; returns the total length.
    pub(crate) fn check_sges(&self, sges: &[Sge], need: Access) -> Result<u64, MrError> {
        let mut total = 0u64;
        for s in sges {
            self.check(s.lkey, s.addr, u64::from(s.length), need, false)?;
            total += u64::from(s.length);
        }
        Ok(total)
    }

    /// [`MrTable::gather`] into `out` (exactly its length), written in place.
    pub(crate) fn gather_into(&self, sges: &[Sge], mut offset: u64, out: &mut [u8]) -> Result<(), MrError> {
        let mut done = 0;
        for s in sges {
            if done == out.len() {
                break;
            }
            let sl = u64::from(s.length);
            if offset >= sl {
                offset -= sl;
                continue;
            }
            let n = ((sl - offset) as usize).min(out.len() - done);
            let off = self.check(s.lkey, s.addr.wrapping_add(offset), n as u64, Access::NONE, false)?;
            let m = self.mrs.get(&s.lkey).ok_or(MrError::BadKey)?;
            out[done..done + n].copy_from_slice(&m.buf[off..off + n]);
            done += n;
            offset = 0;
        }
        if done == out.len() {
            Ok(())
        } else {
            Err(MrError::Length)
        }
    }

    /// Append `len` bytes starting `offset` bytes into the SGE list to `out` (the gather of a
    /// requester packet).
    pub(crate) fn gather(
        &self,
        sges: &[Sge],
        mut offset: u64,
        mut len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), MrError> {
        for s in sges {
            if len == 0 {
                break;
            }
            let sl = u64::from(s.length);
            if offset >= sl {
                offset -= sl;
                continue;
            }
            let n = ((sl - offset) as usize).min(len);
            let off = self.check(s.lkey, s.addr.wrapping_add(offset), n as u64, Access::NONE, false)?;
            let m = self.mrs.get(&s.lkey).ok_or(MrError::BadKey)?;
            out.extend_from_slice(&m.buf[off..off + n]);
            len -= n;
            offset = 0;
        }
        if len == 0 {
            Ok(())
        } else {
            Err(MrError::Length)
        }
    }

    /// Write `data` starting `offset` bytes into the SGE list (receives, READ responses,
    /// atomic results); needs LOCAL_WRITE on every region touched.
    pub(crate) fn scatter(&mut self, sges: &[Sge], mut offset: u64, mut data: &[u8]) -> Result<(), MrError> {
        for s in sges {
            if data.is_empty() {
                break;
            }
            let sl = u64::from(s.length);
            if offset >= sl {
                offset -= sl;
                continue;
            }
            let n = ((sl - offset) as usize).min(data.len());
            let off = self.check(s.lkey, s.addr.wrapping_add(offset), n as u64, Access::LOCAL_WRITE, false)?;
            let m = self.mrs.get_mut(&s.lkey).ok_or(MrError::BadKey)?;
            m.buf[off..off + n].copy_from_slice(&data[..n]);
            data = &data[n..];
            offset = 0;
        }
        if data.is_empty() {
            Ok(())
        } else {
            Err(MrError::Length)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_bounds_and_access() {
        let mut t = MrTable::default();
        assert_eq!(t.reg(16, Access::REMOTE_WRITE, 1), Err(Errno::EINVAL));
        let a = t.reg(100, Access::LOCAL_WRITE.union(Access::REMOTE_READ), 7).unwrap();
        let b = t.reg(10, Access::NONE, 9).unwrap();
        assert_eq!(a.lkey & 0xff, 7);
        assert_eq!(b.rkey, 0);
        assert!(b.addr > a.addr + 100);
        assert_eq!(t.check_remote(a.rkey, a.addr + 90, 10, Access::REMOTE_READ), Ok(()));
        assert_eq!(t.check_remote(a.rkey, a.addr + 91, 10, Access::REMOTE_READ), Err(MrError::Range));
        assert_eq!(t.check_remote(a.rkey, a.addr - 1, 1, Access::REMOTE_READ), Err(MrError::Range));
        assert_eq!(t.check_remote(a.rkey, a.addr, 1, Access::REMOTE_WRITE), Err(MrError::Access));
        assert_eq!(t.check_remote(b.lkey, b.addr, 1, Access::NONE), Err(MrError::BadKey));
        assert_eq!(t.check_remote(a.rkey ^ 1, a.addr, 1, Access::NONE), Err(MrError::BadKey));
        let sges = [Sge { addr: a.addr + 98, length: 2, lkey: a.lkey }, Sge { addr: b.addr, length: 3, lkey: b.lkey }];
        assert_eq!(t.scatter(&sges[..1], 0, b"xy"), Ok(()));
        assert_eq!(t.scatter(&sges, 0, b"xyz"), Err(MrError::Access)); // b has no LOCAL_WRITE
        t.get_mut(b.lkey).unwrap()[..3].copy_from_slice(b"abc");
        let mut out = Vec::new();
        t.gather(&sges, 1, 3, &mut out).unwrap();
        assert_eq!(out, b"yab");
        assert_eq!(t.gather(&sges, 0, 6, &mut out), Err(MrError::Length));
        assert_eq!(t.dereg(a.lkey), Ok(()));
        assert_eq!(t.dereg(a.lkey), Err(Errno::EINVAL));
    }
}
