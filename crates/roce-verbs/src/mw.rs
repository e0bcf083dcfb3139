//! Memory windows through the library: `ibv_alloc_mw`, `ibv_dealloc_mw` and `ibv_bind_mw`
//! (the `<infiniband/verbs.h>` inlines call them through `ibv_context.ops`), and the bind,
//! LOCAL_INV and SEND-with-invalidate work requests (conn.rs turns them into the engine's; the
//! engine does windows as rxe_mw.c does, spec/rc.md "Memory windows").

use core::ffi::{c_int, c_void};

use roce_cm::rc::MwType;

use crate::abi::*;
use crate::ffi::{boundary, null_errno};
use crate::runtime::runtime;

/// A memory window (what the program sees, first).
#[repr(C)]
pub struct Mw {
    /// `struct ibv_mw`.
    pub c: ibv_mw,
}

/// `ops.alloc_mw` (`ibv_alloc_mw`): a type 1 or type 2 window of the PD's.
///
/// # Safety
/// `pd` is a PD of ours.
pub unsafe extern "C" fn alloc_mw(pd: *mut ibv_pd, type_: ibv_mw_type) -> *mut ibv_mw {
    boundary("ibv_alloc_mw", std::ptr::null_mut(), || {
        let mw_type = match type_ {
            IBV_MW_TYPE_1 => MwType::Type1,
            IBV_MW_TYPE_2 => MwType::Type2,
            _ => return null_errno(libc::EINVAL),
        };
        if pd.is_null() {
            return null_errno(libc::EINVAL);
        }
        let rt = match runtime() {
            Ok(rt) => rt,
            Err(e) => return null_errno(e),
        };
        // SAFETY: the PD's number, written at allocation.
        let pdn = unsafe { (*pd).handle };
        let rkey = match rt.call(move |e| e.d.stack.rc_mut().alloc_mw_in(pdn, mw_type)) {
            Ok(Ok(k)) => k,
            Ok(Err(e)) => return null_errno(e.value()),
            Err(e) => return null_errno(e),
        };
        // SAFETY: the PD's context pointer, written at allocation.
        let context = unsafe { (*pd).context };
        let mw = Box::new(Mw { c: ibv_mw { context, pd, rkey, handle: rkey >> 8, type_ } });
        Box::into_raw(mw).cast()
    })
}

/// `ops.dealloc_mw` (`ibv_dealloc_mw`).
///
/// # Safety
/// `mw` came from [`alloc_mw`] and is not used after.
pub unsafe extern "C" fn dealloc_mw(mw: *mut ibv_mw) -> c_int {
    boundary("ibv_dealloc_mw", libc::EIO, || {
        if mw.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a window of ours.
        let rkey = unsafe { (*mw).rkey };
        if let Ok(rt) = runtime() {
            let _ = rt.call(move |e| e.d.stack.rc_mut().dealloc_mw(rkey));
        }
        // SAFETY: as above; not used after this.
        unsafe { drop(Box::from_raw(mw.cast::<Mw>())) };
        0
    })
}

/// `struct ibv_mw_bind` (`ibv_bind_mw`'s argument).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_mw_bind {
    /// The bind work request's id.
    pub wr_id: u64,
    /// `IBV_SEND_*` (signaled).
    pub send_flags: core::ffi::c_uint,
    /// What the window binds.
    pub bind_info: ibv_mw_bind_info,
}

/// `ibv_inc_rkey`: the key with its low byte one up.
pub fn inc_rkey(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}

/// `ops.bind_mw` (`ibv_bind_mw`, type 1 windows; the inline checked the type and the PD): a
/// bind work request on `qp` with the window's next key, as rxe's provider posts it; the
/// window's `rkey` is the new one once posted ("the user has to undo this if he gets an error
/// completion", rdma-core providers/rxe).
///
/// # Safety
/// `qp` and `mw` are ours; `mw_bind` points to a `struct ibv_mw_bind`.
pub unsafe extern "C" fn bind_mw(qp: *mut ibv_qp, mw: *mut ibv_mw, mw_bind: *mut c_void) -> c_int {
    boundary("ibv_bind_mw", libc::EIO, || {
        if qp.is_null() || mw.is_null() || mw_bind.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: per the contract.
        let (b, old) = unsafe { (*mw_bind.cast::<ibv_mw_bind>(), (*mw).rkey) };
        if b.bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED != 0 {
            return libc::EINVAL;
        }
        // SAFETY: plain C data; all-zero is valid.
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = b.wr_id;
        wr.opcode = IBV_WR_BIND_MW;
        wr.send_flags = b.send_flags;
        let new = inc_rkey(old);
        wr.bind_mw_tso.bind_mw = ibv_send_wr_bind_mw { mw, rkey: new, bind_info: b.bind_info };
        let mut bad = std::ptr::null_mut();
        // SAFETY: our QP and a request that lives until the call returns.
        let rc = unsafe { crate::verbs::post_send(qp, &mut wr, &mut bad) };
        if rc == 0 {
            // SAFETY: a window of ours.
            unsafe { (*mw).rkey = new };
        }
        rc
    })
}
