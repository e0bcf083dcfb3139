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
    /// `IBV_ACCESS_MW_BIND`: windows may be bound to the region.
    pub const MW_BIND: Access = Access(1 << 4);
    /// `IBV_ACCESS_ZERO_BASED`: a (type 2) window's addresses count from its start.
    pub const ZERO_BASED: Access = Access(1 << 5);
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
    /// Its protection domain (a number the embedder chooses; the `roce` tools have one, 0):
    /// only a QP of the same domain reaches it remotely.
    pub pd: u32,
}

/// Who reaches registered memory from the wire: a QP (a type 2 window serves only the QP it
/// is bound to) and the protection domain its accesses are checked against — the QP's, or
/// for an XRC target the domain of the XRC SRQ the request names [IBA 9.4.1.1 XRC; rxe
/// `lookup_mr(qp->pd, …)` and `rxe_lookup_mw`: a region or window of another PD is an rkey
/// violation].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RemoteAccessor {
    /// The responding QP.
    pub qpn: u32,
    /// The protection domain of the access.
    pub pd: u32,
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
    /// Memory windows, by index (`rkey >> 8`).
    mws: BTreeMap<u32, Mw>,
    next_mw_index: u32,
}

/// `enum ibv_mw_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MwType {
    /// Type 1: bound by `ibv_bind_mw` (a bind work request), unbound by binding length 0;
    /// not invalidated.
    Type1,
    /// Type 2 (rxe's 2B): bound by a bind work request to the QP that posted it, which alone
    /// may use it; freed again by LOCAL_INV or a SEND with invalidate.
    Type2,
}

/// A window's state [rxe_mw.c RXE_MW_STATE_*].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MwState {
    /// A type 2 window that is not bound.
    Free,
    /// Usable (a type 1 window from allocation on, with length 0 until bound).
    Valid,
}

/// What a bind work request binds (`struct ibv_mw_bind_info` and the window's new key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MwBind {
    /// The region under the window (its lkey); ignored when `length` is 0.
    pub mr_lkey: u32,
    /// The window's first address (a virtual address of the region).
    pub addr: u64,
    /// Its length; 0 unbinds a type 1 window.
    pub length: u64,
    /// REMOTE_READ/WRITE/ATOMIC (and ZERO_BASED for type 2) the window grants.
    pub access: Access,
}

/// A window as `ibv_alloc_mw`/the binds left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MwInfo {
    /// Type 1 or 2.
    pub mw_type: MwType,
    /// Its current rkey (the low byte is the one the last bind chose).
    pub rkey: u32,
    /// Free or valid.
    pub state: MwState,
    /// A bound type 2 window's QP.
    pub qpn: Option<u32>,
    /// The region under it, when bound with a length.
    pub mr: Option<u32>,
    /// Its first address (an offset into it when zero based).
    pub addr: u64,
    /// Its length.
    pub length: u64,
    /// What it grants.
    pub access: Access,
    /// Its protection domain ([`MrInfo::pd`]).
    pub pd: u32,
}

#[derive(Debug, Clone, Copy)]
struct Mw {
    info: MwInfo,
}

/// Window indices start here, above any region index a process reaches (the C library numbers
/// its regions below it), so that a key names a window or a region, never both (rxe keeps
/// separate index ranges, rkey_is_mw).
pub const MW_INDEX_FIRST: u32 = 0xF0_0001;

/// Why a bind or an invalidation was refused (the work request's completion says which).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MwError {
    /// No such window or region, a key that is not the current one, or a rule of
    /// rxe_check_bind_mw / rxe_check_invalidate_mw broken.
    Invalid,
    /// An access flag windows do not take.
    NotSupported,
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
    /// The region is in protection domain `pd`.
    pub fn reg(&mut self, pd: u32, length: usize, access: Access, key_byte: u8) -> Result<MrInfo, Errno> {
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
        let info = MrInfo { addr: self.next_addr, length, lkey: key, rkey: if remote { key } else { 0 }, access, pd };
        self.next_addr += (length as u64).div_ceil(4096) * 4096 + 4096;
        self.mrs.insert(key, Mr { info, buf: Bytes::Owned(vec![0; length]) });
        Ok(info)
    }

    /// Register the embedder's memory `mem` as a region of protection domain `pd` at `addr` of
    /// `length` bytes under `key` (the embedder numbers its regions, rxe-shaped: lkey == rkey,
    /// the rkey 0 without remote access). EINVAL for a key in use or remote write/atomic
    /// without local write; regions may overlap, as registrations of one buffer do.
    pub fn reg_lent(
        &mut self,
        pd: u32,
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
        let info = MrInfo { addr, length, lkey: key, rkey: if remote { key } else { 0 }, access, pd };
        self.mrs.insert(key, Mr { info, buf: Bytes::Lent(mem) });
        Ok(info)
    }

    /// `ibv_dereg_mr`: EINVAL for an unknown key, or a region a window is bound to (rxe:
    /// `num_mw > 0`).
    pub fn dereg(&mut self, lkey: u32) -> Result<(), Errno> {
        if self.mws.values().any(|w| w.info.mr == Some(lkey)) {
            return Err(Errno::EINVAL);
        }
        self.mrs.remove(&lkey).map(|_| ()).ok_or(Errno::EINVAL)
    }

    // ---- memory windows [rxe_mw.c]

    /// `ibv_alloc_mw` in protection domain `pd`: a type 1 window starts valid with nothing
    /// bound, a type 2 free. Returns its rkey.
    pub fn alloc_mw(&mut self, pd: u32, mw_type: MwType, key_byte: u8) -> Result<u32, Errno> {
        if self.mws.len() >= 1 << 16 {
            return Err(Errno::ENOMEM);
        }
        let mut index = self.next_mw_index.max(MW_INDEX_FIRST);
        while self.mws.contains_key(&index) {
            index = if index >= 0xFF_FFFF { MW_INDEX_FIRST } else { index + 1 };
        }
        self.next_mw_index = if index >= 0xFF_FFFF { MW_INDEX_FIRST } else { index + 1 };
        let rkey = (index << 8) | u32::from(key_byte);
        let state = if mw_type == MwType::Type1 { MwState::Valid } else { MwState::Free };
        let info = MwInfo { mw_type, rkey, state, qpn: None, mr: None, addr: 0, length: 0, access: Access::NONE, pd };
        self.mws.insert(index, Mw { info });
        Ok(rkey)
    }

    /// `ibv_dealloc_mw`: EINVAL for an unknown window.
    pub fn dealloc_mw(&mut self, rkey: u32) -> Result<(), Errno> {
        match self.mws.get(&(rkey >> 8)) {
            Some(w) if w.info.rkey >> 8 == rkey >> 8 => {
                self.mws.remove(&(rkey >> 8));
                Ok(())
            }
            _ => Err(Errno::EINVAL),
        }
    }

    /// A window's description, by its current rkey.
    pub fn mw(&self, rkey: u32) -> Option<MwInfo> {
        self.mws.get(&(rkey >> 8)).map(|w| w.info).filter(|i| i.rkey == rkey)
    }

    /// A bind work request of QP `by.qpn` (of PD `by.pd`): window `mw_rkey` (its current key)
    /// gets `new_rkey`'s low byte and `bind` [rxe_bind_mw, rxe_check_bind_mw: o10-36.2.2,
    /// o10-37.2.30, C10-72 (a type 2 window of another PD than the QP's), o10-37.2.40,
    /// C10-73..75]. Returns the window's new rkey.
    pub(crate) fn bind_mw(
        &mut self,
        by: RemoteAccessor,
        mw_rkey: u32,
        new_rkey: u32,
        bind: &MwBind,
    ) -> Result<u32, MwError> {
        let qpn = by.qpn;
        let w = self.mws.get(&(mw_rkey >> 8)).ok_or(MwError::Invalid)?.info;
        if w.rkey != mw_rkey {
            return Err(MwError::Invalid);
        }
        let mr = if bind.length > 0 {
            let m = self.mrs.get(&bind.mr_lkey).ok_or(MwError::Invalid)?;
            Some(m.info)
        } else {
            None
        };
        let supported = Access::ALL.union(Access::MW_BIND).union(Access::ZERO_BASED);
        if bind.access.0 & !supported.0 != 0 {
            return Err(MwError::NotSupported);
        }
        let zero_based = bind.access.contains(Access::ZERO_BASED);
        match w.mw_type {
            MwType::Type1 if w.state != MwState::Valid || zero_based => return Err(MwError::Invalid),
            MwType::Type2 if w.state != MwState::Free || w.pd != by.pd || mr.is_none() => return Err(MwError::Invalid),
            _ => {}
        }
        if let Some(m) = mr {
            let writable = bind.access.contains(Access::REMOTE_WRITE) || bind.access.contains(Access::REMOTE_ATOMIC);
            // The window inside the region, zero based or not (rxe checks only the length of a
            // zero-based one; its address is still where in the region it starts).
            let inside = bind.addr >= m.addr
                && bind.addr.checked_add(bind.length).is_some_and(|e| e <= m.addr + m.length as u64);
            if !m.access.contains(Access::MW_BIND) || (writable && !m.access.contains(Access::LOCAL_WRITE)) || !inside {
                return Err(MwError::Invalid);
            }
        }
        let rkey = (mw_rkey & !0xff) | (new_rkey & 0xff);
        let info = MwInfo {
            mw_type: w.mw_type,
            rkey,
            state: MwState::Valid,
            qpn: (w.mw_type == MwType::Type2).then_some(qpn),
            mr: mr.map(|m| m.lkey),
            addr: bind.addr,
            length: if mr.is_some() { bind.length } else { 0 },
            access: bind.access,
            pd: w.pd,
        };
        self.mws.insert(mw_rkey >> 8, Mw { info });
        Ok(rkey)
    }

    /// LOCAL_INV or a SEND with invalidate of `rkey`: a valid type 2 window becomes free
    /// [rxe_invalidate_mw: o10-37.2.26, a type 1 window cannot be]. A region's key is refused
    /// too: only fast-registration regions can be invalidated (rxe_invalidate_mr), and there
    /// are none here.
    pub(crate) fn invalidate(&mut self, rkey: u32) -> Result<(), MwError> {
        let w = self.mws.get_mut(&(rkey >> 8)).ok_or(MwError::Invalid)?;
        if w.info.rkey != rkey || w.info.mw_type == MwType::Type1 || w.info.state != MwState::Valid {
            return Err(MwError::Invalid);
        }
        let i = &mut w.info;
        (i.state, i.qpn, i.mr, i.addr, i.length, i.access) = (MwState::Free, None, None, 0, 0, Access::NONE);
        Ok(())
    }

    /// The region key and region address a remote access by `by` reaches: an MR's rkey as
    /// it is, or a window's rkey translated [rxe_lookup_mw: the current key, the QP's PD, a
    /// type 2 window bound to this QP, a length, the access, valid]. A window's own bounds
    /// are checked too (IBA C10-?: an access stays inside the window), which rxe does not (it
    /// checks only the region under it: spec/rc.md).
    fn resolve_remote(
        &self,
        by: RemoteAccessor,
        rkey: u32,
        va: u64,
        len: u64,
        need: Access,
    ) -> Result<(u32, u64), MrError> {
        let Some(w) = self.mws.get(&(rkey >> 8)) else { return Ok((rkey, va)) };
        let i = &w.info;
        let bound_here = i.mw_type == MwType::Type1 || i.qpn == Some(by.qpn);
        if i.rkey != rkey || i.pd != by.pd || i.state != MwState::Valid || i.length == 0 || !bound_here {
            return Err(MrError::BadKey);
        }
        if !i.access.contains(need) {
            return Err(MrError::Access);
        }
        let start =
            if i.access.contains(Access::ZERO_BASED) { va } else { va.checked_sub(i.addr).ok_or(MrError::Range)? };
        if start.checked_add(len).is_none_or(|e| e > i.length) {
            return Err(MrError::Range);
        }
        let mr = i.mr.ok_or(MrError::BadKey)?;
        Ok((mr, i.addr.wrapping_add(start)))
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

    /// The byte offset of `[addr, addr+len)` in the region `key`, checked for `need` (and,
    /// for a remote access, for being a remote key of the accessor's protection domain).
    fn check(&self, key: u32, addr: u64, len: u64, need: Access, remote: Option<u32>) -> Result<usize, MrError> {
        let m = self.mrs.get(&key).ok_or(MrError::BadKey)?;
        if remote.is_some_and(|pd| m.info.rkey != key || m.info.pd != pd) {
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
    pub(crate) fn remote_write(&mut self, by: RemoteAccessor, rkey: u32, va: u64, data: &[u8]) -> Result<(), MrError> {
        let (rkey, va) = self.resolve_remote(by, rkey, va, data.len() as u64, Access::REMOTE_WRITE)?;
        let off = self.check(rkey, va, data.len() as u64, Access::REMOTE_WRITE, Some(by.pd))?;
        let m = self.mrs.get_mut(&rkey).ok_or(MrError::BadKey)?;
        m.buf.write(off, data);
        Ok(())
    }

    /// A remote READ of `out.len()` bytes at `va` under `rkey` (responder side).
    pub(crate) fn remote_read(&self, by: RemoteAccessor, rkey: u32, va: u64, out: &mut [u8]) -> Result<(), MrError> {
        let (rkey, va) = self.resolve_remote(by, rkey, va, out.len() as u64, Access::REMOTE_READ)?;
        let off = self.check(rkey, va, out.len() as u64, Access::REMOTE_READ, Some(by.pd))?;
        let m = self.mrs.get(&rkey).ok_or(MrError::BadKey)?;
        m.buf.read(off, out);
        Ok(())
    }

    /// A remote atomic on the 8 bytes at `va` under `rkey`: `f(old)` replaces them; returns
    /// the old value (responder side).
    pub(crate) fn remote_atomic(
        &mut self,
        by: RemoteAccessor,
        rkey: u32,
        va: u64,
        mut f: impl FnMut(u64) -> u64,
    ) -> Result<u64, MrError> {
        let (rkey, va) = self.resolve_remote(by, rkey, va, 8, Access::REMOTE_ATOMIC)?;
        let off = self.check(rkey, va, 8, Access::REMOTE_ATOMIC, Some(by.pd))?;
        let m = self.mrs.get_mut(&rkey).ok_or(MrError::BadKey)?;
        Ok(m.buf.update_u64(off, &mut f))
    }

    /// An ATOMIC WRITE: the 8 bytes at `va` under `rkey` (REMOTE_WRITE) become `data` in one
    /// store, against the program's own atomics as an atomic operation is.
    pub(crate) fn remote_atomic_write(
        &mut self,
        by: RemoteAccessor,
        rkey: u32,
        va: u64,
        data: [u8; 8],
    ) -> Result<(), MrError> {
        let (rkey, va) = self.resolve_remote(by, rkey, va, 8, Access::REMOTE_WRITE)?;
        let off = self.check(rkey, va, 8, Access::REMOTE_WRITE, Some(by.pd))?;
        let m = self.mrs.get_mut(&rkey).ok_or(MrError::BadKey)?;
        let v = u64::from_ne_bytes(data);
        m.buf.update_u64(off, &mut |_| v);
        Ok(())
    }

    /// Whether `rkey` is a remote key with `need` (any range: a FLUSH of the whole region).
    pub(crate) fn check_remote_key(&self, by: RemoteAccessor, rkey: u32, need: Access) -> Result<(), MrError> {
        if let Some(w) = self.mw(rkey) {
            // A whole-region FLUSH through a window: the window's whole range.
            let va = if w.access.contains(Access::ZERO_BASED) { 0 } else { w.addr };
            return self.check_remote(by, rkey, va, w.length as usize, need);
        }
        // A region's: its key, PD and access as any remote access, over no bytes.
        let addr = self.mrs.get(&rkey).ok_or(MrError::BadKey)?.info.addr;
        self.check(rkey, addr, 0, need, Some(by.pd)).map(|_| ())
    }

    /// Check a remote range without touching it.
    pub(crate) fn check_remote(
        &self,
        by: RemoteAccessor,
        rkey: u32,
        va: u64,
        len: usize,
        need: Access,
    ) -> Result<(), MrError> {
        let (rkey, va) = self.resolve_remote(by, rkey, va, len as u64, need)?;
        self.check(rkey, va, len as u64, need, Some(by.pd)).map(|_| ())
    }

    /// Check every SGE of a local list; returns the total length.
    pub(crate) fn check_sges(&self, sges: &[Sge], need: Access) -> Result<u64, MrError> {
        let mut total = 0u64;
        for s in sges {
            self.check(s.lkey, s.addr, u64::from(s.length), need, None)?;
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
            let off = self.check(s.lkey, s.addr.wrapping_add(offset), n as u64, Access::NONE, None)?;
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
            let off = self.check(s.lkey, s.addr.wrapping_add(offset), n as u64, Access::NONE, None)?;
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
            let off = self.check(s.lkey, s.addr.wrapping_add(offset), n as u64, Access::LOCAL_WRITE, None)?;
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
        assert_eq!(t.reg(0, 16, Access::REMOTE_WRITE, 1), Err(Errno::EINVAL));
        let a = t.reg(0, 100, Access::LOCAL_WRITE.union(Access::REMOTE_READ), 7).unwrap();
        let b = t.reg(0, 10, Access::NONE, 9).unwrap();
        assert_eq!(a.lkey & 0xff, 7);
        assert_eq!(b.rkey, 0);
        assert!(b.addr > a.addr + 100);
        let qp1 = RemoteAccessor { qpn: 1, pd: 0 };
        assert_eq!(t.check_remote(qp1, a.rkey, a.addr + 90, 10, Access::REMOTE_READ), Ok(()));
        // The same key through a QP of another PD: not its region to reach.
        assert_eq!(
            t.check_remote(RemoteAccessor { qpn: 1, pd: 2 }, a.rkey, a.addr + 90, 10, Access::REMOTE_READ),
            Err(MrError::BadKey)
        );
        assert_eq!(t.check_remote(qp1, a.rkey, a.addr + 91, 10, Access::REMOTE_READ), Err(MrError::Range));
        assert_eq!(t.check_remote(qp1, a.rkey, a.addr - 1, 1, Access::REMOTE_READ), Err(MrError::Range));
        assert_eq!(t.check_remote(qp1, a.rkey, a.addr, 1, Access::REMOTE_WRITE), Err(MrError::Access));
        assert_eq!(t.check_remote(qp1, b.lkey, b.addr, 1, Access::NONE), Err(MrError::BadKey));
        assert_eq!(t.check_remote(qp1, a.rkey ^ 1, a.addr, 1, Access::NONE), Err(MrError::BadKey));
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
