//! XRC domains through the verbs (issue 37 item 2): `ibv_open_xrcd` and `ibv_close_xrcd`, the
//! inlines of `<infiniband/verbs.h>` that call through `struct verbs_context` (device.rs sets
//! the ops), and the use an XRC SRQ or target QP holds of the handle it was made through
//! (xrc.rs makes those).
//!
//! A domain opened with a file (`fd` not -1) is the one domain of that file's inode, as the
//! kernel's `xrcd_table` keeps it per device: a second `ibv_open_xrcd` of the same file gets
//! the same domain (EINVAL with `O_EXCL`), a first one without `O_CREAT` is EAGAIN
//! (ib_uverbs_open_xrcd). Each process runs its own engine, so the table is the process's: two
//! processes over roce that open one file have two domains (under the kernel they would share
//! one; nothing a peer sees differs, since a domain never leaves its host).
//!
//! Closing is per handle, as uverbs does it (`uverbs_free_xrcd`): EBUSY while an XRC SRQ or
//! target QP created through this handle remains (`ib_uxrcd_object.refcnt`); otherwise the
//! handle goes, and the domain with its last handle.

use core::ffi::c_int;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use crate::abi::*;
use crate::ffi::{boundary, null_errno};

/// An XRC domain as the program holds it (one object per `ibv_open_xrcd`).
#[repr(C)]
pub struct Xrcd {
    /// What the program sees.
    pub c: ibv_xrcd,
    /// The engine's domain.
    pub xrcdn: u32,
    /// XRC SRQs and target QPs created through this handle and not yet destroyed.
    pub users: AtomicU32,
}

/// A use of a handle by an XRC SRQ or target QP, given back when that object is destroyed.
#[derive(Debug)]
pub struct HandleUse(usize);

impl HandleUse {
    /// A use of `xrcd`, one of ours.
    pub fn take(xrcd: *mut ibv_xrcd) -> HandleUse {
        // SAFETY: an Xrcd of ours (the callers checked), alive while this use holds it.
        unsafe { (*xrcd.cast::<Xrcd>()).users.fetch_add(1, Ordering::AcqRel) };
        HandleUse(xrcd as usize)
    }
}

impl Drop for HandleUse {
    fn drop(&mut self) {
        // SAFETY: the handle cannot be closed while this use holds it (close_xrcd: EBUSY).
        unsafe { (*(self.0 as *const Xrcd)).users.fetch_sub(1, Ordering::AcqRel) };
    }
}

/// The process's domains: how many opens each has, and which file's inode it belongs to.
#[derive(Default)]
struct Domains {
    opens: HashMap<u32, (u32, Option<(u64, u64)>)>,
    by_file: HashMap<(u64, u64), u32>,
}

static DOMAINS: Mutex<Option<Domains>> = Mutex::new(None);

/// The (device, inode) of an open file; EBADF for a descriptor that is not open.
fn inode_of(fd: c_int) -> Result<(u64, u64), c_int> {
    // SAFETY: plain C data; zero is valid.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat on the caller's descriptor into our struct.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(libc::EBADF);
    }
    Ok((st.st_dev, st.st_ino))
}

/// The checks of `ibv_cmd_open_xrcd` and `ib_uverbs_open_xrcd`, then the domain: the file's
/// if it has one, else a new one.
fn open(attr: &ibv_xrcd_init_attr) -> Result<u32, c_int> {
    if attr.comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED {
        return Err(libc::EOPNOTSUPP);
    }
    if attr.comp_mask & IBV_XRCD_INIT_ATTR_FD == 0 || attr.comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS == 0 {
        return Err(libc::EINVAL);
    }
    let file = if attr.fd == -1 { None } else { Some(inode_of(attr.fd)?) };
    let mut guard = DOMAINS.lock().map_err(|_| libc::EIO)?;
    let d = guard.get_or_insert_with(Domains::default);
    if let Some(n) = file.and_then(|f| d.by_file.get(&f).copied()) {
        if attr.oflags & libc::O_EXCL != 0 {
            return Err(libc::EINVAL);
        }
        if let Some(o) = d.opens.get_mut(&n) {
            o.0 += 1;
        }
        return Ok(n);
    }
    if file.is_some() && attr.oflags & libc::O_CREAT == 0 {
        return Err(libc::EAGAIN);
    }
    let rt = crate::runtime::runtime()?;
    let n = rt.call(|e| e.d.stack.rc_mut().alloc_xrcd())?;
    d.opens.insert(n, (1, file));
    if let Some(f) = file {
        d.by_file.insert(f, n);
    }
    Ok(n)
}

/// `verbs_context.open_xrcd` (the `ibv_open_xrcd` inline).
///
/// # Safety
/// `attr` points to an `ibv_xrcd_init_attr`.
pub unsafe extern "C" fn open_xrcd(ctx: *mut ibv_context, attr: *mut ibv_xrcd_init_attr) -> *mut ibv_xrcd {
    boundary("ibv_open_xrcd", std::ptr::null_mut(), || {
        if ctx.is_null() || attr.is_null() {
            return null_errno(libc::EINVAL);
        }
        // SAFETY: the caller's attributes.
        match open(unsafe { &*attr }) {
            Ok(xrcdn) => {
                Box::into_raw(Box::new(Xrcd { c: ibv_xrcd { context: ctx }, xrcdn, users: AtomicU32::new(0) })).cast()
            }
            Err(e) => null_errno(e),
        }
    })
}

/// `verbs_context.close_xrcd` (the `ibv_close_xrcd` inline): EBUSY while an XRC SRQ or target
/// QP created through this handle remains; else the handle goes, the domain with its last.
///
/// # Safety
/// `xrcd` came from [`open_xrcd`]; not used after a successful close.
pub unsafe extern "C" fn close_xrcd(xrcd: *mut ibv_xrcd) -> c_int {
    boundary("ibv_close_xrcd", libc::EIO, || {
        if xrcd.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: an Xrcd of ours.
        let (n, users) =
            unsafe { ((*xrcd.cast::<Xrcd>()).xrcdn, (*xrcd.cast::<Xrcd>()).users.load(Ordering::Acquire)) };
        if users > 0 {
            return libc::EBUSY;
        }
        let Ok(mut guard) = DOMAINS.lock() else { return libc::EIO };
        let Some(d) = guard.as_mut() else { return libc::EINVAL };
        let Some(&(opens, file)) = d.opens.get(&n) else { return libc::EINVAL };
        if opens == 1 {
            let Ok(rt) = crate::runtime::runtime() else { return libc::ENODEV };
            match rt.call(move |e| e.d.stack.rc_mut().dealloc_xrcd(n)) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return e.value(),
                Err(e) => return e,
            }
            d.opens.remove(&n);
            if let Some(f) = file {
                d.by_file.remove(&f);
            }
        } else if let Some(o) = d.opens.get_mut(&n) {
            o.0 -= 1;
        }
        // SAFETY: as above; not used after this.
        unsafe { drop(Box::from_raw(xrcd.cast::<Xrcd>())) };
        0
    })
}

/// The engine's domain of a handle (None for NULL).
pub fn xrcdn_of(xrcd: *mut ibv_xrcd) -> Option<u32> {
    // SAFETY: an Xrcd of ours, or NULL.
    (!xrcd.is_null()).then(|| unsafe { (*xrcd.cast::<Xrcd>()).xrcdn })
}
