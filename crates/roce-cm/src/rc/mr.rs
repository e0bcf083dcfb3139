//! Memory regions: registered buffers with an address, an lkey/rkey and access flags, checked
//! on every local and remote access [rxe_mr.c `mr_check_range`, `lookup_mr`; IBA 10.6].
//!
//! A region's bytes are either the engine's own (the `roce` tools: the application fills and
//! reads them through [`MrTable::get`] / [`MrTable::get_mut`]) or lent by the embedder
//! ([`LentMemory`]: a C program's buffer registered through the drop-in libibverbs), which
//! the engine reaches only by copying through the trait, so that the engine itself stays
//! free of `unsafe`. Received data is written straight from the frame into either.

use std::collections::BTreeMap;
use std::sync::Arc;

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
    /// `IBV_ACCESS_FLUSH_GLOBAL`: FLUSH with the global-visibility placement type.
    pub const FLUSH_GLOBAL: Access = Access(1 << 8);
    /// `IBV_ACCESS_FLUSH_PERSISTENT`: FLUSH to persistence. No region here can have it: a
    /// region is ordinary memory, and rxe refuses it for a page that is not persistent
    /// memory (rxe_mr.c "Page can't be persistent": EINVAL).
    pub const FLUSH_PERSISTENT: Access = Access(1 << 9);

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

/// Memory a region borrows from its embedder (a program's own buffer, as `ibv_reg_mr` takes
/// it). The engine checks every access against the region's bounds before it calls these,
/// so `offset + len` is always inside the length the region was registered with; the
/// embedder answers for the memory staying valid until the region is deregistered.
pub trait LentMemory: Send + Sync + std::fmt::Debug {
    /// Copy the bytes at `offset` into `out`.
    fn read(&self, offset: usize, out: &mut [u8]);
    /// Copy `data` to `offset`.
    fn write(&self, offset: usize, data: &[u8]);
    /// Replace the 8 bytes at `offset` (8-byte aligned) with `f(old)` as one atomic step
    /// against the program's own atomics; returns the old value.
    fn update_u64(&self, offset: usize, f: &mut dyn FnMut(u64) -> u64) -> u64;
}

/// Where a region's bytes live.
#[derive(Debug, Clone)]
enum Bytes {
    /// The engine's own buffer.
    Owned(Vec<u8>),
    /// The embedder's memory (a copy of the table shares it: the watcher's snapshot).
    Lent(Arc<dyn LentMemory>),
}

impl Bytes {
    fn read(&self, off: usize, out: &mut [u8]) {
        match self {
            Bytes::Owned(b) => out.copy_from_slice(&b[off..off + out.len()]),
            Bytes::Lent(m) => m.read(off, out),
        }
    }
    fn write(&mut self, off: usize, data: &[u8]) {
        match self {
            Bytes::Owned(b) => b[off..off + data.len()].copy_from_slice(data),
            Bytes::Lent(m) => m.write(off, data),
        }
    }
    fn update_u64(&mut self, off: usize, f: &mut dyn FnMut(u64) -> u64) -> u64 {
        match self {
            Bytes::Owned(b) => {
                let mut v = [0u8; 8];
                v.copy_from_slice(&b[off..off + 8]);
                let old = u64::from_ne_bytes(v);
                b[off..off + 8].copy_from_slice(&f(old).to_ne_bytes());
                old
            }
            Bytes::Lent(m) => m.update_u64(off, f),
        }
    }
}

#[derive(Debug, Clone)]
struct Mr {
    info: MrInfo,
    buf: Bytes,
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

/// The registration rules of `ib_check_mr_access` and rxe: remote write or atomic needs local
/// write (EINVAL); persistence needs persistent memory, which no region here is (EINVAL).
fn check_reg_access(access: Access) -> Result<(), Errno> {
    let needs_lw = access.contains(Access::REMOTE_WRITE) || access.contains(Access::REMOTE_ATOMIC);
    if (needs_lw && !access.contains(Access::LOCAL_WRITE)) || access.contains(Access::FLUSH_PERSISTENT) {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// Regions start at this address and are 4 KiB aligned, one guard page apart, so that an
/// address always names at most one region.
const BASE_ADDR: u64 = 0x7f00_0000_0000;

impl MrTable {
    /// `ibv_reg_mr` of a zeroed buffer of `length` bytes. Remote flags need LOCAL_WRITE with
    /// them when they include REMOTE_WRITE or REMOTE_ATOMIC (`ib_check_mr_access`: EINVAL).
    pub fn reg(&mut self, length: usize, access: Access, key_byte: u8) -> Result<MrInfo, Errno> {
        check_reg_access(access)?;
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
        self.mrs.insert(key, Mr { info, buf: Bytes::Owned(vec![0; length]) });
        Ok(info)
    }

    /// Register the embedder's memory `mem` as a region at `addr` of `length` bytes under
    /// `key` (the embedder numbers its regions, rxe-shaped: lkey == rkey, the rkey 0 without
    /// remote access). EINVAL for a key in use or remote write/atomic without local write;
    /// regions may overlap, as registrations of one buffer do.
    pub fn reg_lent(
        &mut self,
        key: u32,
        addr: u64,
        length: usize,
        access: Access,
        mem: Arc<dyn LentMemory>,
    ) -> Result<MrInfo, Errno> {
        check_reg_access(access)?;
        if self.mrs.contains_key(&key) {
            return Err(Errno::EINVAL);
        }
        if addr.checked_add(length as u64).is_none() {
            return Err(Errno::EINVAL);
        }
        let remote = access.0 & (Access::REMOTE_WRITE.0 | Access::REMOTE_READ.0 | Access::REMOTE_ATOMIC.0) != 0;
        let info = MrInfo { addr, length, lkey: key, rkey: if remote { key } else { 0 }, access };
        self.mrs.insert(key, Mr { info, buf: Bytes::Lent(mem) });
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

    /// The bytes of a region the engine owns (None for lent memory: its owner has it).
    pub fn get(&self, lkey: u32) -> Option<&[u8]> {
        match &self.mrs.get(&lkey)?.buf {
            Bytes::Owned(b) => Some(&b[..]),
            Bytes::Lent(_) => None,
        }
    }

    /// The bytes of a region the engine owns, writable by the application.
    pub fn get_mut(&mut self, lkey: u32) -> Option<&mut [u8]> {
        match &mut self.mrs.get_mut(&lkey)?.buf {
            Bytes::Owned(b) => Some(&mut b[..]),
            Bytes::Lent(_) => None,
        }
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

    /// A remote WRITE of `data` at `va` under `rkey` (responder side).
    pub(crate) fn remote_write(&mut self, rkey: u32, va: u64, data: &[u8]) -> Result<(), MrError> {
        let off = self.check(rkey, va, data.len() as u64, Access::REMOTE_WRITE, true)?;
        let m = self.mrs.get_mut(&rkey).ok_or(MrError::BadKey)?;
        m.buf.write(off, data);
        Ok(())
    }

    /// A remote READ of `out.len()` bytes at `va` under `rkey` (responder side).
    pub(crate) fn remote_read(&self, rkey: u32, va: u64, out: &mut [u8]) -> Result<(), MrError> {
        let off = self.check(rkey, va, out.len() as u64, Access::REMOTE_READ, true)?;
        let m = self.mrs.get(&rkey).ok_or(MrError::BadKey)?;
        m.buf.read(off, out);
        Ok(())
    }

    /// A remote atomic on the 8 bytes at `va` under `rkey`: `f(old)` replaces them; returns
    /// the old value (responder side).
    pub(crate) fn remote_atomic(&mut self, rkey: u32, va: u64, mut f: impl FnMut(u64) -> u64) -> Result<u64, MrError> {
        let off = self.check(rkey, va, 8, Access::REMOTE_ATOMIC, true)?;
        let m = self.mrs.get_mut(&rkey).ok_or(MrError::BadKey)?;
        Ok(m.buf.update_u64(off, &mut f))
    }

    /// An ATOMIC WRITE: the 8 bytes at `va` under `rkey` (REMOTE_WRITE) become `data` in one
    /// store, against the program's own atomics as an atomic operation is.
    pub(crate) fn remote_atomic_write(&mut self, rkey: u32, va: u64, data: [u8; 8]) -> Result<(), MrError> {
        let off = self.check(rkey, va, 8, Access::REMOTE_WRITE, true)?;
        let m = self.mrs.get_mut(&rkey).ok_or(MrError::BadKey)?;
        let v = u64::from_ne_bytes(data);
        m.buf.update_u64(off, &mut |_| v);
        Ok(())
    }

    /// Whether `rkey` is a remote key with `need` (any range: a FLUSH of the whole region).
    pub(crate) fn check_remote_key(&self, rkey: u32, need: Access) -> Result<(), MrError> {
        let m = self.mrs.get(&rkey).ok_or(MrError::BadKey)?;
        if m.info.rkey != rkey {
            return Err(MrError::BadKey);
        }
        if !m.info.access.contains(need) {
            return Err(MrError::Access);
        }
        Ok(())
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
            m.buf.read(off, &mut out[done..done + n]);
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
            let at = out.len();
            out.resize(at + n, 0);
            m.buf.read(off, &mut out[at..]);
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
            m.buf.write(off, &data[..n]);
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
