//! The verbs of libibverbs over the engine: protection domains, memory regions, completion
//! queues and channels, UD queue pairs, address handles, and the data path that
//! `<infiniband/verbs.h>` inlines through `ibv_context.ops` (post_send, post_recv, poll_cq,
//! req_notify_cq); connected QPs (RC, UC and the XRC types) go on to conn.rs and xrc.rs. A
//! QP type none of them has (raw packet, driver QPs) answers EOPNOTSUPP, naming the call.
//!
//! Each C object the program sees is the first field of a Rust object (`#[repr(C)]`), so the
//! program's pointer is ours too. A CQ's completions sit in its own queue under its own lock:
//! `ibv_poll_cq` never waits for the engine's thread.

use core::ffi::{c_char, c_int, c_uint, c_void};
use std::collections::VecDeque;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use roce_cm::event::AddressHandle;
use roce_cm::UdDest;
use roce_wire::Gid;

use crate::abi::*;
use crate::ffi::{boundary, fail_errno, null_errno};
use crate::mr::{MrError, Region};
use crate::queues::{blocking_pipe, read_record, CompChannelShared, CqShared, RecvWr, UdQpLink};
use crate::runtime::{runtime, Engine};

// ------------------------------------------------------------------------------------------
// Objects

/// A protection domain.
#[repr(C)]
pub struct Pd {
    /// What the program sees.
    pub c: ibv_pd,
}

/// A memory region.
#[repr(C)]
pub struct Mr {
    /// What the program sees.
    pub c: ibv_mr,
}

/// A completion channel.
#[repr(C)]
pub struct CompChannel {
    /// What the program sees (`fd` is the read end of a pipe that carries CQ addresses).
    pub c: ibv_comp_channel,
    shared: Arc<CompChannelShared>,
    rfd: OwnedFd,
}

/// A completion queue.
#[repr(C)]
pub struct Cq {
    /// What the program sees.
    pub c: ibv_cq,
    /// The queue.
    pub shared: Arc<CqShared>,
}

/// An address handle.
#[repr(C)]
pub struct Ah {
    /// What the program sees.
    pub c: ibv_ah,
    /// The engine's address handle.
    pub ah: AddressHandle,
}

/// A queue pair (UD through this library for now).
#[repr(C)]
pub struct Qp {
    /// What the program sees.
    pub c: ibv_qp,
    /// The rest of `struct ibv_qp_ex` (right after `c`, so that the QP is one to a program
    /// that asked for the work-request builder: `ibv_qp_to_qp_ex`, qp_ex.rs).
    pub ex: ibv_qp_ex_ops,
    /// rdma-core 45's `wr_flush`, the member after v44's `struct ibv_qp_ex`: a program built
    /// against newer headers finds FLUSH here.
    pub ex_flush: ibv_wr_flush_fn,
    /// The `send_ops_flags` it was created with (`ibv_create_qp_ex`); None: a plain QP, which
    /// `ibv_qp_to_qp_ex` does not turn into an extended one.
    pub send_ops: Option<u64>,
    /// The work requests between `ibv_wr_start` and `ibv_wr_complete`.
    pub batch: Mutex<Option<crate::wr_batch::Batch>>,
    /// The engine's QPN.
    pub qpn: u32,
    /// The PD's address.
    pub pd: usize,
    /// Where send completions go (None: an XRC target, which sends nothing).
    pub send_cq: Option<Arc<CqShared>>,
    /// Where receive completions go (None: the XRC types, whose receives are an XRC SRQ's).
    pub recv_cq: Option<Arc<CqShared>>,
    /// `sq_sig_all`: every send completes with a work completion.
    pub sq_sig_all: bool,
    /// The capacities (as rxe reports them back).
    pub cap: ibv_qp_cap,
    qkey: AtomicU32,
    /// Created by `rdma_create_qp` (the id's QP: `rdma_destroy_qp` ends it).
    pub of_id: bool,
    /// A connected QP's (RC, UC) counts mirrored by the engine's thread; None for UD.
    pub conn: Option<Arc<crate::queues::QpMirror>>,
    /// An XRC target's use of the domain handle it was created through.
    pub xrcd_use: Option<crate::xrcd::HandleUse>,
}

// `ibv_qp_to_qp_ex` hands out the QP itself: the builder must sit where `struct ibv_qp_ex`
// has it.
const _: () = assert!(std::mem::offset_of!(Qp, ex) == std::mem::offset_of!(ibv_qp_ex, ops));
const _: () = assert!(std::mem::offset_of!(Qp, ex_flush) == std::mem::size_of::<ibv_qp_ex>());

impl Qp {
    /// What posting on a connected QP needs of it.
    pub fn view(&self) -> crate::conn::QpView {
        crate::conn::QpView {
            qpn: self.qpn,
            uc: self.c.qp_type == IBV_QPT_UC,
            xrc_send: self.c.qp_type == IBV_QPT_XRC_SEND,
            xrc_recv: self.c.qp_type == IBV_QPT_XRC_RECV,
            pd: self.pd,
            cap: self.cap,
            sq_sig_all: self.sq_sig_all,
            has_srq: !self.c.srq.is_null(),
        }
    }
}

// ------------------------------------------------------------------------------------------
// The context's ops

/// The ops table of every context: the data path, and NULL for the old ABI's slots.
pub fn context_ops() -> ibv_context_ops {
    // SAFETY: a table of Option<fn>; all-None (zero) is valid.
    let mut ops: ibv_context_ops = unsafe { std::mem::zeroed() };
    ops.poll_cq = Some(poll_cq);
    ops.req_notify_cq = Some(req_notify_cq);
    ops.post_send = Some(post_send);
    ops.post_recv = Some(post_recv);
    ops.post_srq_recv = Some(crate::conn::post_srq_recv);
    ops
}

// ------------------------------------------------------------------------------------------
// PDs and MRs

/// `ibv_alloc_pd`.
///
/// # Safety
/// `ctx` is a context of ours.
#[no_mangle]
pub unsafe extern "C" fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    boundary("ibv_alloc_pd", std::ptr::null_mut(), || {
        if ctx.is_null() {
            return null_errno(libc::EINVAL);
        }
        static HANDLES: AtomicU32 = AtomicU32::new(1);
        let pd = Box::new(Pd { c: ibv_pd { context: ctx, handle: HANDLES.fetch_add(1, Ordering::Relaxed) } });
        Box::into_raw(pd).cast()
    })
}

/// `ibv_dealloc_pd`.
///
/// # Safety
/// `pd` came from [`ibv_alloc_pd`].
#[no_mangle]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    if pd.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: a Pd boxed by ibv_alloc_pd.
    unsafe { drop(Box::from_raw(pd.cast::<Pd>())) };
    0
}

fn reg_mr(pd: *mut ibv_pd, addr: *mut c_void, length: usize, iova: u64, access: c_int) -> *mut ibv_mr {
    if pd.is_null() || (addr.is_null() && length > 0) {
        return null_errno(libc::EINVAL);
    }
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => return null_errno(e),
    };
    let region = Region { addr: addr as u64, length: length as u64, access: access as u32, pd: pd as usize };
    let key = match rt.mrs.write().map_err(|_| libc::EIO).and_then(|mut t| t.register(region)) {
        Ok(k) => k,
        Err(e) => return null_errno(e),
    };
    // The engine sees the region at its IOVA (the address the peer's RETHs name), its bytes
    // at `addr` in the program.
    let mem = std::sync::Arc::new(crate::conn::ProgramMemory::new(addr as usize, length));
    let eng_access = crate::conn::access_of(access as u32);
    // SAFETY: the PD's number, written at allocation: the peer reaches the region only
    // through QPs of this PD.
    let pdn = unsafe { (*pd).handle };
    let registered = rt.call(move |e| {
        e.d.stack.rc_mut().reg_lent_mr(pdn, key, iova, length, eng_access, mem).map_err(|er| er.value())
    });
    if let Err(e) = registered.and_then(|r| r) {
        if let Ok(mut t) = rt.mrs.write() {
            let _ = t.deregister(key);
        }
        return null_errno(e);
    }
    // SAFETY: the PD's context pointer, written at allocation.
    let context = unsafe { (*pd).context };
    // rxe: the rkey is the lkey when the region allows remote access, else 0.
    let rkey = if access as u32 & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC) != 0 {
        key
    } else {
        0
    };
    let mr = Box::new(Mr { c: ibv_mr { context, pd, addr, length, handle: key, lkey: key, rkey } });
    Box::into_raw(mr).cast()
}

/// `ibv_reg_mr`: the program's memory `[addr, addr+length)` with `access`.
///
/// # Safety
/// `pd` is a PD of ours; the memory stays valid until [`ibv_dereg_mr`].
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr(pd: *mut ibv_pd, addr: *mut c_void, length: usize, access: c_int) -> *mut ibv_mr {
    boundary("ibv_reg_mr", std::ptr::null_mut(), || reg_mr(pd, addr, length, addr as u64, access))
}

/// `ibv_reg_mr_iova2`.
///
/// # Safety
/// As [`ibv_reg_mr`].
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut ibv_mr {
    boundary("ibv_reg_mr_iova2", std::ptr::null_mut(), || reg_mr(pd, addr, length, iova, access as c_int))
}

/// `ibv_reg_mr_iova`.
///
/// # Safety
/// As [`ibv_reg_mr`].
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    boundary("ibv_reg_mr_iova", std::ptr::null_mut(), || reg_mr(pd, addr, length, iova, access))
}

/// `ibv_dereg_mr`.
///
/// # Safety
/// `mr` came from [`ibv_reg_mr`].
#[no_mangle]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    boundary("ibv_dereg_mr", libc::EIO, || {
        if mr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: an Mr boxed by reg_mr.
        let key = unsafe { (*mr).lkey };
        if let Some(rt) = crate::runtime::started() {
            if let Ok(mut t) = rt.mrs.write() {
                let _ = t.deregister(key);
            }
            // Out of the engine before the program may free the memory.
            let _ = rt.call(move |e| e.d.stack.rc_mut().dereg_mr(key));
        }
        // SAFETY: as above; not used after this.
        unsafe { drop(Box::from_raw(mr.cast::<Mr>())) };
        0
    })
}

// ------------------------------------------------------------------------------------------
// Completion channels and CQs

/// `ibv_create_comp_channel`.
///
/// # Safety
/// `ctx` is a context of ours.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_comp_channel(ctx: *mut ibv_context) -> *mut ibv_comp_channel {
    boundary("ibv_create_comp_channel", std::ptr::null_mut(), || {
        if ctx.is_null() {
            return null_errno(libc::EINVAL);
        }
        let (r, w) = match blocking_pipe() {
            Ok(p) => p,
            Err(e) => return null_errno(e.raw_os_error().unwrap_or(libc::EMFILE)),
        };
        let ch = Box::new(CompChannel {
            c: ibv_comp_channel { context: ctx, fd: r.as_raw_fd(), refcnt: 0 },
            shared: Arc::new(CompChannelShared { wfd: w }),
            rfd: r,
        });
        Box::into_raw(ch).cast()
    })
}

/// `ibv_destroy_comp_channel`: EBUSY while a CQ uses it.
///
/// # Safety
/// `ch` came from [`ibv_create_comp_channel`].
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int {
    if ch.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: a CompChannel of ours.
    unsafe {
        if (*ch).refcnt > 0 {
            return libc::EBUSY;
        }
        let b = Box::from_raw(ch.cast::<CompChannel>());
        drop(b.rfd);
    }
    0
}

/// `ibv_create_cq`.
///
/// # Safety
/// `ctx` is a context of ours; `channel` NULL or a channel of ours.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_cq(
    ctx: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    _comp_vector: c_int,
) -> *mut ibv_cq {
    boundary("ibv_create_cq", std::ptr::null_mut(), || {
        if ctx.is_null() || !(1..(1 << 15)).contains(&cqe) {
            return null_errno(libc::EINVAL);
        }
        let ch = if channel.is_null() {
            None
        } else {
            // SAFETY: a CompChannel of ours; the count keeps it alive while the CQ uses it.
            unsafe {
                (*channel).refcnt += 1;
                Some((*channel.cast::<CompChannel>()).shared.clone())
            }
        };
        let shared = Arc::new(CqShared {
            wcs: Mutex::new(VecDeque::with_capacity(cqe as usize)),
            capacity: cqe as usize,
            armed: std::sync::atomic::AtomicU8::new(0),
            channel: ch,
            cq_addr: Default::default(),
            overruns: AtomicU32::new(0),
        });
        // SAFETY: plain C data (pointers, ints, a mutex and a condition); zero is valid.
        let mut c: ibv_cq = unsafe { std::mem::zeroed() };
        c.context = ctx;
        c.channel = channel;
        c.cq_context = cq_context;
        c.cqe = cqe;
        let cq = Box::into_raw(Box::new(Cq { c, shared }));
        // SAFETY: the CQ just boxed; its mutex and condition initialised in place.
        unsafe {
            libc::pthread_mutex_init(&mut (*cq).c.mutex, std::ptr::null());
            libc::pthread_cond_init(&mut (*cq).c.cond, std::ptr::null());
            let shared: &Arc<CqShared> = &(*cq).shared;
            shared.cq_addr.store(cq as usize, Ordering::Release);
        }
        cq.cast()
    })
}

/// `ibv_destroy_cq`.
///
/// # Safety
/// `cq` came from [`ibv_create_cq`] and no QP uses it.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    boundary("ibv_destroy_cq", libc::EIO, || {
        if cq.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a Cq of ours.
        unsafe {
            let b = Box::from_raw(cq.cast::<Cq>());
            if !b.c.channel.is_null() {
                (*b.c.channel).refcnt -= 1;
            }
        }
        0
    })
}

/// `ibv_poll_cq` (through `ops.poll_cq`): up to `n` completions, oldest first.
///
/// # Safety
/// `cq` is a CQ of ours; `wc` has room for `n`.
pub unsafe extern "C" fn poll_cq(cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    if cq.is_null() || n < 0 || (wc.is_null() && n > 0) {
        return -libc::EINVAL;
    }
    // SAFETY: a Cq of ours.
    let shared = unsafe { &(*cq.cast::<Cq>()).shared };
    let take = |q: &mut VecDeque<ibv_wc>| {
        let k = (n as usize).min(q.len());
        for i in 0..k {
            if let Some(w) = q.pop_front() {
                // SAFETY: i < n slots of the caller's array.
                unsafe { *wc.add(i) = w };
            }
        }
        k
    };
    let Ok(k) = shared.wcs.lock().map(|mut q| take(&mut q)) else { return -libc::EIO };
    if k > 0 || n == 0 {
        return k as c_int;
    }
    // Empty: the spinning program takes the next frames itself when nobody holds the engine
    // (what the `roce` tools' busy poll does), else gives its core to whoever does.
    match crate::runtime::started() {
        Some(rt) if rt.progress() => {}
        _ => std::thread::yield_now(),
    }
    shared.wcs.lock().map_or(-libc::EIO, |mut q| take(&mut q) as c_int)
}

/// `ibv_req_notify_cq` (through `ops.req_notify_cq`): the next completion (with
/// `solicited_only`, the next solicited one or error) wakes the channel.
///
/// # Safety
/// `cq` is a CQ of ours.
pub unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    if cq.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: a Cq of ours.
    let shared = unsafe { &(*cq.cast::<Cq>()).shared };
    if shared.channel.is_none() {
        return libc::EINVAL;
    }
    let mode = if solicited_only != 0 { crate::queues::ARMED_SOLICITED } else { crate::queues::ARMED_NEXT };
    shared.armed.store(mode, Ordering::Release);
    0
}

/// `ibv_get_cq_event`: waits for an armed CQ's completion (unless the program made the
/// channel's fd non-blocking: then -1/EAGAIN).
///
/// # Safety
/// `ch` is a channel of ours; `cq` and `cq_context` point to pointers.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_cq_event(
    ch: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    boundary("ibv_get_cq_event", -1, || {
        if ch.is_null() || cq.is_null() || cq_context.is_null() {
            return fail_errno(libc::EINVAL);
        }
        let mut b = [0u8; 8];
        // SAFETY: our channel's read end.
        match read_record(unsafe { (*ch).fd }, &mut b) {
            Ok(true) => {}
            Ok(false) => return fail_errno(libc::EIO),
            Err(e) => return fail_errno(e),
        }
        let p = usize::from_ne_bytes(b) as *mut ibv_cq;
        // SAFETY: the CQ our thread wrote; the caller's out-pointers.
        unsafe {
            *cq = p;
            *cq_context = (*p).cq_context;
        }
        0
    })
}

/// `ibv_ack_cq_events`.
///
/// # Safety
/// `cq` is a CQ of ours.
#[no_mangle]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: c_uint) {
    if cq.is_null() {
        return;
    }
    // SAFETY: the CQ's own mutex and condition, as libibverbs uses them.
    unsafe {
        libc::pthread_mutex_lock(&mut (*cq).mutex);
        (*cq).comp_events_completed = (*cq).comp_events_completed.wrapping_add(nevents);
        libc::pthread_cond_signal(&mut (*cq).cond);
        libc::pthread_mutex_unlock(&mut (*cq).mutex);
    }
}

/// `ibv_get_async_event`: blocks until an asynchronous event (none are raised for UD yet).
///
/// # Safety
/// `event` points to an `ibv_async_event`.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_async_event(ctx: *mut ibv_context, event: *mut ibv_async_event) -> c_int {
    boundary("ibv_get_async_event", -1, || {
        if ctx.is_null() || event.is_null() {
            return fail_errno(libc::EINVAL);
        }
        let mut b = [0u8; std::mem::size_of::<ibv_async_event>()];
        // SAFETY: the context's async fd.
        match read_record(unsafe { (*ctx).async_fd }, &mut b) {
            Ok(true) => {
                // SAFETY: a whole ibv_async_event record written by us.
                unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), event.cast::<u8>(), b.len()) };
                0
            }
            Ok(false) => fail_errno(libc::EIO),
            Err(e) => fail_errno(e),
        }
    })
}

/// `ibv_ack_async_event`.
///
/// # Safety
/// Any event.
#[no_mangle]
pub unsafe extern "C" fn ibv_ack_async_event(_event: *mut ibv_async_event) {}

// ------------------------------------------------------------------------------------------
// QPs

/// The queue behind a CQ of ours (None for NULL).
pub(crate) fn cq_shared(cq: *mut ibv_cq) -> Option<Arc<CqShared>> {
    // SAFETY: a Cq of ours, or NULL.
    (!cq.is_null()).then(|| unsafe { (*cq.cast::<Cq>()).shared.clone() })
}

/// Build a UD QP object for engine QP `qpn`.
pub(crate) fn new_ud_qp(pd: *mut ibv_pd, attr: &ibv_qp_init_attr, qpn: u32, qkey: u32, of_id: bool) -> Option<*mut Qp> {
    // SAFETY: the PD's context.
    new_qp(unsafe { (*pd).context }, pd, attr, qpn, qkey, of_id, None)
}

/// Build a QP object for engine QP `qpn` on context `ctx` (`conn`: a connected QP's mirror).
/// Every type but the XRC ones has both CQs; an XRC initiator has a send CQ; an XRC target
/// has neither, nor a PD.
pub(crate) fn new_qp(
    ctx: *mut ibv_context,
    pd: *mut ibv_pd,
    attr: &ibv_qp_init_attr,
    qpn: u32,
    qkey: u32,
    of_id: bool,
    conn: Option<Arc<crate::queues::QpMirror>>,
) -> Option<*mut Qp> {
    let send_cq = cq_shared(attr.send_cq);
    let recv_cq = cq_shared(attr.recv_cq);
    let complete = match attr.qp_type {
        IBV_QPT_XRC_RECV => true,
        IBV_QPT_XRC_SEND => send_cq.is_some(),
        _ => send_cq.is_some() && recv_cq.is_some(),
    };
    if !complete {
        return None;
    }
    // SAFETY: plain C data; zero is valid.
    let mut c: ibv_qp = unsafe { std::mem::zeroed() };
    c.context = ctx;
    c.qp_context = attr.qp_context;
    c.pd = pd;
    c.send_cq = attr.send_cq;
    c.recv_cq = attr.recv_cq;
    c.srq = attr.srq;
    c.handle = qpn;
    c.qp_num = qpn;
    c.state = match (&conn, of_id) {
        (Some(m), _) => m.state.load(Ordering::Acquire),
        (None, true) => IBV_QPS_RTS,
        (None, false) => IBV_QPS_RESET,
    };
    c.qp_type = attr.qp_type;
    let qp = Box::into_raw(Box::new(Qp {
        c,
        // SAFETY: plain C data (numbers and optional function pointers); zero is valid. The
        // builder's functions are set when the QP becomes extended (qp_ex.rs `enable`).
        ex: unsafe { std::mem::zeroed() },
        ex_flush: None,
        send_ops: None,
        batch: Mutex::new(None),
        qpn,
        pd: pd as usize,
        send_cq,
        recv_cq,
        sq_sig_all: attr.sq_sig_all != 0,
        cap: attr.cap,
        qkey: AtomicU32::new(qkey),
        of_id,
        conn,
        xrcd_use: None,
    }));
    // SAFETY: the QP just boxed.
    unsafe {
        libc::pthread_mutex_init(&mut (*qp).c.mutex, std::ptr::null());
        libc::pthread_cond_init(&mut (*qp).c.cond, std::ptr::null());
    }
    Some(qp)
}

impl Engine {
    /// Link a UD QP to its receive queue and CQ.
    pub fn link_ud_qp(&mut self, qp: &Qp) {
        if let Some(cq) = &qp.recv_cq {
            self.ud_qps.insert(qp.qpn, UdQpLink::new(cq.clone(), qp.cap.max_recv_wr.max(1) as usize));
        }
    }
}

/// Check a UD QP's initial attributes as the kernel does (conn.rs checks RC and UC ones).
fn check_init_attr(name: &'static str, attr: &ibv_qp_init_attr) -> Result<(), i32> {
    if attr.qp_type != IBV_QPT_UD {
        crate::ffi::say_once(
            name,
            &format!("roce: {name}: QP type {} is not supported (RC, UC, UD and XRC are): EOPNOTSUPP", attr.qp_type),
        );
        return Err(libc::EOPNOTSUPP);
    }
    if !attr.srq.is_null() {
        return Err(libc::EINVAL);
    }
    if attr.send_cq.is_null() || attr.recv_cq.is_null() {
        return Err(libc::EINVAL);
    }
    if attr.cap.max_send_wr > 0x4000
        || attr.cap.max_recv_wr > 0x4000
        || attr.cap.max_send_sge > 32
        || attr.cap.max_recv_sge > 32
    {
        return Err(libc::EINVAL);
    }
    Ok(())
}

/// `ibv_create_qp` (UD): a QP in RESET, Q_Key 0 until `ibv_modify_qp` sets it.
///
/// # Safety
/// `pd` is a PD of ours; `attr` points to an `ibv_qp_init_attr`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_qp(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp {
    boundary("ibv_create_qp", std::ptr::null_mut(), || {
        if pd.is_null() || attr.is_null() {
            return null_errno(libc::EINVAL);
        }
        // SAFETY: the caller's attributes.
        let a = unsafe { *attr };
        if matches!(a.qp_type, IBV_QPT_RC | IBV_QPT_UC | IBV_QPT_XRC_SEND) {
            // SAFETY: as above (the capacities are given back).
            return match create_conn_qp(pd, unsafe { &mut *attr }, None) {
                Ok(qp) => qp.cast(),
                Err(e) => null_errno(e),
            };
        }
        if let Err(e) = check_init_attr("ibv_create_qp", &a) {
            return null_errno(e);
        }
        let rt = match runtime() {
            Ok(rt) => rt,
            Err(e) => return null_errno(e),
        };
        let Ok(qpn) = rt.call(|e| e.d.stack.create_qp(0)) else { return null_errno(libc::EIO) };
        let Some(qp) = new_ud_qp(pd, &a, qpn, 0, false) else { return null_errno(libc::EINVAL) };
        let addr = qp as usize;
        let _ = rt.call(move |e| {
            // SAFETY: the QP lives until ibv_destroy_qp, which unlinks it on this thread first.
            e.link_ud_qp(unsafe { &*(addr as *const Qp) })
        });
        qp.cast()
    })
}

/// `ibv_destroy_qp`.
///
/// # Safety
/// `qp` came from [`ibv_create_qp`] or `rdma_create_qp`.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    boundary("ibv_destroy_qp", libc::EIO, || {
        if qp.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a Qp of ours.
        let (qpn, conn) = unsafe { ((*qp.cast::<Qp>()).qpn, (*qp.cast::<Qp>()).conn.is_some()) };
        if let Some(rt) = crate::runtime::started() {
            let _ = rt.call(move |e| {
                if conn {
                    crate::conn::unlink(e, qpn);
                } else {
                    e.ud_qps.remove(&qpn);
                    let _ = e.d.stack.destroy_qp(qpn);
                }
            });
        }
        // SAFETY: as above; not used after this.
        unsafe { drop(Box::from_raw(qp.cast::<Qp>())) };
        0
    })
}

/// `ibv_modify_qp` of a UD QP: the state moves, `IBV_QP_QKEY` and `IBV_QP_SQ_PSN` reach the
/// engine.
///
/// # Safety
/// `qp` is a QP of ours; `attr` points to an `ibv_qp_attr`.
#[no_mangle]
pub unsafe extern "C" fn ibv_modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, mask: c_int) -> c_int {
    boundary("ibv_modify_qp", libc::EIO, || {
        if qp.is_null() || attr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a Qp of ours and the caller's attributes.
        let (q, a) = unsafe { (&mut *qp.cast::<Qp>(), *attr) };
        let mask = mask as u32;
        let Ok(rt) = runtime() else { return libc::ENODEV };
        let qpn = q.qpn;
        if let Some(m) = q.conn.clone() {
            let qp_type = q.c.qp_type;
            let r = rt.call(move |e| {
                let r = crate::conn::modify(e, qpn, &a, mask, qp_type);
                e.deliver_completions(); // a move to ERR flushes; RESET empties
                r
            });
            return match r {
                Ok(Ok(s)) => {
                    q.c.state = crate::conn::ibv_state(s);
                    m.state.store(q.c.state, Ordering::Release);
                    0
                }
                Ok(Err(e)) | Err(e) => e,
            };
        }
        if mask & IBV_QP_QKEY != 0 {
            let qkey = a.qkey;
            if rt.call(move |e| e.d.stack.set_qp_qkey(qpn, qkey)).ok().and_then(|r| r.ok()).is_none() {
                return libc::EINVAL;
            }
            q.qkey.store(qkey, Ordering::Relaxed);
        }
        if mask & IBV_QP_SQ_PSN != 0 {
            let psn = a.sq_psn;
            if rt.call(move |e| e.d.stack.set_qp_sq_psn(qpn, psn)).ok().and_then(|r| r.ok()).is_none() {
                return libc::EINVAL;
            }
        }
        if mask & IBV_QP_STATE != 0 {
            q.c.state = a.qp_state;
        }
        0
    })
}

/// `ibv_query_qp`.
///
/// # Safety
/// `qp` is a QP of ours; `attr` and `init_attr` point to their structs.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    _mask: c_int,
    init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    boundary("ibv_query_qp", libc::EIO, || {
        if qp.is_null() || attr.is_null() || init_attr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a Qp of ours and the caller's structs.
        unsafe {
            let q = &*qp.cast::<Qp>();
            if q.conn.is_some() {
                let Ok(rt) = runtime() else { return libc::ENODEV };
                let (qpn, cap) = (q.qpn, q.cap);
                let Ok(Some(a)) = rt.call(move |e| crate::conn::query(e, qpn, cap)) else { return libc::EINVAL };
                *attr = a;
            }
            let mut a: ibv_qp_attr = std::mem::zeroed();
            a.qp_state = q.c.state;
            a.cur_qp_state = q.c.state;
            a.path_mtu = crate::port::port().map_or(IBV_MTU_1024, |p| p.active_mtu);
            a.qkey = q.qkey.load(Ordering::Relaxed);
            a.cap = q.cap;
            a.port_num = 1;
            a.pkey_index = 0;
            if q.conn.is_none() {
                *attr = a;
            }
            let mut i: ibv_qp_init_attr = std::mem::zeroed();
            i.qp_context = q.c.qp_context;
            i.send_cq = q.c.send_cq;
            i.recv_cq = q.c.recv_cq;
            i.srq = q.c.srq;
            i.cap = q.cap;
            i.qp_type = q.c.qp_type;
            i.sq_sig_all = c_int::from(q.sq_sig_all);
            *init_attr = i;
        }
        0
    })
}

/// `ibv_attach_mcast`.
///
/// # Safety
/// `qp` is a QP of ours; `gid` points to 16 bytes.
#[no_mangle]
pub unsafe extern "C" fn ibv_attach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, _lid: u16) -> c_int {
    mcast(qp, gid, true)
}

/// `ibv_detach_mcast`.
///
/// # Safety
/// As [`ibv_attach_mcast`].
#[no_mangle]
pub unsafe extern "C" fn ibv_detach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, _lid: u16) -> c_int {
    mcast(qp, gid, false)
}

fn mcast(qp: *mut ibv_qp, gid: *const ibv_gid, attach: bool) -> c_int {
    boundary("ibv_attach_mcast", libc::EIO, || {
        if qp.is_null() || gid.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a Qp of ours and the caller's GID.
        let (qpn, g) = unsafe { ((*qp.cast::<Qp>()).qpn, Gid((*gid).raw)) };
        let Ok(rt) = runtime() else { return libc::ENODEV };
        let r = rt.call(move |e| if attach { e.d.stack.attach_mcast(qpn, g) } else { e.d.stack.detach_mcast(qpn, g) });
        match r {
            Ok(Ok(())) => 0,
            Ok(Err(e)) => e.value(),
            Err(e) => e,
        }
    })
}

// ------------------------------------------------------------------------------------------
// Address handles

fn multicast_mac(g: &Gid) -> Option<[u8; 6]> {
    match g.to_ip() {
        IpAddr::V4(a) if a.is_multicast() => {
            let o = a.octets();
            Some([0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]])
        }
        IpAddr::V6(a) if a.octets()[0] == 0xff => {
            let o = a.octets();
            Some([0x33, 0x33, o[12], o[13], o[14], o[15]])
        }
        _ => None,
    }
}

/// The engine's address handle for `attr` (GRH required, as on every RoCE port).
pub fn address_handle(attr: &ibv_ah_attr) -> Result<AddressHandle, i32> {
    if attr.is_global == 0 {
        return Err(libc::EINVAL);
    }
    // SAFETY: reading the GID union's raw bytes (every bit pattern is valid).
    let dgid = Gid(unsafe { attr.grh.dgid.raw });
    let port = crate::port::port().ok_or(libc::ENODEV)?;
    let sgid = port.gids.get(usize::from(attr.grh.sgid_index)).copied().unwrap_or(port.gids[1]);
    let dmac = match multicast_mac(&dgid) {
        Some(m) => m,
        None => {
            let ip = dgid.to_ip();
            let rt = runtime()?;
            rt.call(move |e| e.mac_of(ip)).ok().flatten().unwrap_or([0; 6])
        }
    };
    Ok(AddressHandle {
        dgid,
        sgid,
        dmac,
        hop_limit: attr.grh.hop_limit,
        traffic_class: attr.grh.traffic_class,
        flow_label: attr.grh.flow_label,
        sl: attr.sl,
    })
}

impl Engine {
    /// The MAC of a peer: learned from its datagrams and the CM, else the neighbour table.
    pub fn mac_of(&self, ip: IpAddr) -> Option<[u8; 6]> {
        let ip = match ip {
            IpAddr::V6(v) => v.to_ipv4_mapped().map_or(IpAddr::V6(v), IpAddr::V4),
            v4 => v4,
        };
        self.macs
            .get(&ip)
            .copied()
            .or_else(|| self.d.stack.neighbors().into_iter().find(|(a, _)| *a == ip).map(|(_, m)| m))
    }
}

fn create_ah(pd: *mut ibv_pd, attr: &ibv_ah_attr) -> *mut ibv_ah {
    if pd.is_null() {
        return null_errno(libc::EINVAL);
    }
    match address_handle(attr) {
        Ok(ah) => {
            // SAFETY: the PD's context.
            let context = unsafe { (*pd).context };
            Box::into_raw(Box::new(Ah { c: ibv_ah { context, pd, handle: 0 }, ah })).cast()
        }
        Err(e) => null_errno(e),
    }
}

/// `ibv_create_ah`.
///
/// # Safety
/// `pd` is a PD of ours; `attr` points to an `ibv_ah_attr`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    boundary("ibv_create_ah", std::ptr::null_mut(), || {
        if attr.is_null() {
            return null_errno(libc::EINVAL);
        }
        // SAFETY: the caller's attributes.
        create_ah(pd, unsafe { &*attr })
    })
}

/// `ibv_destroy_ah`.
///
/// # Safety
/// `ah` came from [`ibv_create_ah`].
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
    if ah.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: an Ah of ours.
    unsafe { drop(Box::from_raw(ah.cast::<Ah>())) };
    0
}

/// The address vector back to a datagram's sender, from the GRH area of its receive buffer
/// (what [`grh_area`] wrote: an IPv4 header in the last 20 bytes, or an IPv6 header).
pub fn ah_attr_from_grh(grh: &[u8; 40]) -> ibv_ah_attr {
    // SAFETY: plain C data; zero is valid.
    let mut a: ibv_ah_attr = unsafe { std::mem::zeroed() };
    a.is_global = 1;
    a.port_num = 1;
    if grh[20] >> 4 == 4 {
        let src = std::net::Ipv4Addr::new(grh[32], grh[33], grh[34], grh[35]);
        a.grh.dgid.raw = Gid::from_ipv4(src).0;
        a.grh.traffic_class = grh[21];
        a.grh.hop_limit = 0xff;
        a.grh.sgid_index = 1;
    } else {
        let mut src = [0u8; 16];
        src.copy_from_slice(&grh[8..24]);
        a.grh.dgid.raw = src;
        a.grh.traffic_class = (grh[0] << 4) | (grh[1] >> 4);
        a.grh.flow_label = u32::from_be_bytes([0, grh[1] & 0x0f, grh[2], grh[3]]);
        a.grh.hop_limit = 0xff;
        a.grh.sgid_index = 1;
    }
    a
}

/// `ibv_init_ah_from_wc`.
///
/// # Safety
/// `grh` points to the 40 bytes before the datagram; `ah_attr` to an `ibv_ah_attr`.
#[no_mangle]
pub unsafe extern "C" fn ibv_init_ah_from_wc(
    ctx: *mut ibv_context,
    _port_num: u8,
    wc: *mut ibv_wc,
    grh: *mut c_void,
    ah_attr: *mut ibv_ah_attr,
) -> c_int {
    boundary("ibv_init_ah_from_wc", -1, || {
        if ctx.is_null() || wc.is_null() || grh.is_null() || ah_attr.is_null() {
            return fail_errno(libc::EINVAL);
        }
        // SAFETY: the caller's WC, its 40-byte GRH area and out-struct.
        unsafe {
            if (*wc).wc_flags & IBV_WC_GRH == 0 {
                return fail_errno(libc::EINVAL);
            }
            let mut a = ah_attr_from_grh(&*grh.cast::<[u8; 40]>());
            a.sl = (*wc).sl;
            *ah_attr = a;
        }
        0
    })
}

/// `ibv_create_ah_from_wc`.
///
/// # Safety
/// As [`ibv_init_ah_from_wc`]; `pd` is a PD of ours.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_ah_from_wc(
    pd: *mut ibv_pd,
    wc: *mut ibv_wc,
    grh: *mut c_void,
    port_num: u8,
) -> *mut ibv_ah {
    boundary("ibv_create_ah_from_wc", std::ptr::null_mut(), || {
        if pd.is_null() {
            return null_errno(libc::EINVAL);
        }
        // SAFETY: a PD of ours.
        let ctx = unsafe { (*pd).context };
        // SAFETY: plain C data; zero is valid.
        let mut a: ibv_ah_attr = unsafe { std::mem::zeroed() };
        // SAFETY: forwarded caller pointers.
        if unsafe { ibv_init_ah_from_wc(ctx, port_num, wc, grh, &mut a) } != 0 {
            return std::ptr::null_mut();
        }
        create_ah(pd, &a)
    })
}

// ------------------------------------------------------------------------------------------
// The data path

fn wc(wr_id: u64, status: u32, opcode: u32, qp_num: u32) -> ibv_wc {
    ibv_wc { wr_id, status, opcode, qp_num, ..Default::default() }
}

/// Gather a send's elements from the program's memory, each checked against the region
/// table (or copied as is when the send is inline).
fn gather(rt: &crate::runtime::Runtime, pd: usize, wr: &ibv_send_wr) -> Result<Vec<u8>, MrError> {
    let n = wr.num_sge.max(0) as usize;
    let mut out = Vec::new();
    let inline = wr.send_flags & IBV_SEND_INLINE != 0;
    let table = rt.mrs.read().map_err(|_| MrError::Protection)?;
    for i in 0..n {
        // SAFETY: the caller's list of num_sge elements.
        let sge = unsafe { *wr.sg_list.add(i) };
        if sge.length == 0 {
            continue;
        }
        if !inline {
            table.check_local(sge.lkey, pd, sge.addr, u64::from(sge.length), false)?;
        }
        // SAFETY: inside a registered region (or the program's inline buffer).
        let bytes = unsafe { std::slice::from_raw_parts(sge.addr as *const u8, sge.length as usize) };
        out.extend_from_slice(bytes);
    }
    Ok(out)
}

/// `ibv_post_send` (through `ops.post_send`) of a UD QP: SEND and SEND_WITH_IMM. A request the
/// QP cannot take fails the call (`*bad_wr`, EINVAL); an element outside its region completes
/// with IBV_WC_LOC_PROT_ERR, as rxe does.
///
/// # Safety
/// `qp` is a QP of ours; `wr` a list of work requests; `bad_wr` a pointer slot.
pub unsafe extern "C" fn post_send(qp: *mut ibv_qp, wr: *mut ibv_send_wr, bad_wr: *mut *mut ibv_send_wr) -> c_int {
    boundary("ibv_post_send", libc::EIO, || {
        if qp.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a Qp of ours.
        let q = unsafe { &*qp.cast::<Qp>() };
        let Ok(rt) = runtime() else { return libc::ENODEV };
        if let Some(m) = &q.conn {
            // SAFETY: the caller's list and slot.
            return unsafe { crate::conn::post_send(rt, q.view(), m, wr, bad_wr) };
        }
        let mtu = crate::port::port().map_or(1024, |p| 128usize << p.active_mtu);
        let mut cur = wr;
        while !cur.is_null() {
            // SAFETY: the caller's work request.
            let w = unsafe { *cur };
            let fail = |e: c_int| {
                if !bad_wr.is_null() {
                    // SAFETY: the caller's slot.
                    unsafe { *bad_wr = cur };
                }
                e
            };
            if q.c.state != IBV_QPS_RTS {
                return fail(libc::EINVAL);
            }
            if w.opcode != IBV_WR_SEND && w.opcode != IBV_WR_SEND_WITH_IMM {
                return fail(libc::EINVAL);
            }
            if w.num_sge < 0 || w.num_sge as u32 > q.cap.max_send_sge.max(1) || (w.num_sge > 0 && w.sg_list.is_null()) {
                return fail(libc::EINVAL);
            }
            // SAFETY: the UD member of the request's union.
            let ud = unsafe { w.wr.ud };
            if ud.ah.is_null() {
                return fail(libc::EINVAL);
            }
            let signaled = q.sq_sig_all || w.send_flags & IBV_SEND_SIGNALED != 0;
            let Some(send_cq) = q.send_cq.clone() else { return fail(libc::EINVAL) };
            let qpn = q.qpn;
            match gather(rt, q.pd, &w) {
                Ok(payload) if payload.len() > mtu => return fail(libc::EINVAL),
                Ok(payload) => {
                    // SAFETY: an Ah of ours.
                    let ah = unsafe { (*ud.ah.cast::<Ah>()).ah };
                    let dest = UdDest { ah, remote_qpn: ud.remote_qpn & 0xff_ffff, remote_qkey: ud.remote_qkey };
                    let imm = (w.opcode == IBV_WR_SEND_WITH_IMM).then(|| u32::from_be(w.imm_data));
                    let wr_id = w.wr_id;
                    rt.post(move |e| {
                        let status = match e.d.stack.post_send(qpn, &dest, &payload, imm) {
                            Ok(()) => IBV_WC_SUCCESS,
                            Err(_) => IBV_WC_GENERAL_ERR,
                        };
                        if signaled || status != IBV_WC_SUCCESS {
                            let mut c = wc(wr_id, status, IBV_WC_SEND, qpn);
                            c.byte_len = payload.len() as u32;
                            send_cq.push(c);
                        }
                    });
                }
                Err(err) => {
                    let status = match err {
                        MrError::Protection => IBV_WC_LOC_PROT_ERR,
                        MrError::Access => IBV_WC_LOC_ACCESS_ERR,
                    };
                    send_cq.push(wc(w.wr_id, status, IBV_WC_SEND, qpn));
                }
            }
            cur = w.next;
        }
        0
    })
}

/// `ibv_post_recv` (through `ops.post_recv`) of a UD QP: each element is checked (local
/// write) when posted.
///
/// # Safety
/// `qp` is a QP of ours; `wr` a list of work requests; `bad_wr` a pointer slot.
pub unsafe extern "C" fn post_recv(qp: *mut ibv_qp, wr: *mut ibv_recv_wr, bad_wr: *mut *mut ibv_recv_wr) -> c_int {
    boundary("ibv_post_recv", libc::EIO, || {
        if qp.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a Qp of ours.
        let q = unsafe { &*qp.cast::<Qp>() };
        let Ok(rt) = runtime() else { return libc::ENODEV };
        if let Some(m) = &q.conn {
            // SAFETY: the caller's list and slot.
            return unsafe { crate::conn::post_recv(rt, q.view(), m, wr, bad_wr) };
        }
        let mut cur = wr;
        let mut batch = Vec::new();
        let table = match rt.mrs.read() {
            Ok(t) => t,
            Err(_) => return libc::EIO,
        };
        while !cur.is_null() {
            // SAFETY: the caller's work request.
            let w = unsafe { *cur };
            let fail = |e: c_int| {
                if !bad_wr.is_null() {
                    // SAFETY: the caller's slot.
                    unsafe { *bad_wr = cur };
                }
                e
            };
            if q.c.state == IBV_QPS_RESET {
                return fail(libc::EINVAL);
            }
            if w.num_sge < 0 || w.num_sge as u32 > q.cap.max_recv_sge.max(1) || (w.num_sge > 0 && w.sg_list.is_null()) {
                return fail(libc::EINVAL);
            }
            let mut sges = Vec::with_capacity(w.num_sge as usize);
            for i in 0..w.num_sge as usize {
                // SAFETY: the caller's list of num_sge elements.
                let s = unsafe { *w.sg_list.add(i) };
                if table.check_local(s.lkey, q.pd, s.addr, u64::from(s.length), true).is_err() {
                    return fail(libc::EINVAL);
                }
                sges.push((s.addr, s.length));
            }
            batch.push(RecvWr { wr_id: w.wr_id, sges });
            cur = w.next;
        }
        drop(table);
        let qpn = q.qpn;
        let n = batch.len();
        let full = rt.call(move |e| match e.ud_qps.get_mut(&qpn) {
            Some(l) if l.recvs.len() + n <= l.max_recv => {
                l.recvs.extend(batch);
                false
            }
            Some(_) => true,
            None => true,
        });
        match full {
            Ok(false) => 0,
            _ => {
                if !bad_wr.is_null() {
                    // SAFETY: the caller's slot.
                    unsafe { *bad_wr = wr };
                }
                libc::ENOMEM
            }
        }
    })
}

/// `ibv_wc_status_str`.
#[no_mangle]
pub extern "C" fn ibv_wc_status_str(status: u32) -> *const c_char {
    const NAMES: [&std::ffi::CStr; 23] = [
        c"success",
        c"local length error",
        c"local QP operation error",
        c"local EE context operation error",
        c"local protection error",
        c"Work Request Flushed Error",
        c"memory management operation error",
        c"bad response error",
        c"local access error",
        c"remote invalid request error",
        c"remote access error",
        c"remote operation error",
        c"transport retry counter exceeded",
        c"RNR retry counter exceeded",
        c"local RDD violation error",
        c"remote invalid RD request",
        c"aborted error",
        c"invalid EE context number",
        c"invalid EE context state",
        c"fatal error",
        c"response timeout error",
        c"general error",
        c"TM error",
    ];
    NAMES.get(status as usize).copied().unwrap_or(c"unknown").as_ptr()
}

/// `ibv_fork_init`: nothing to prepare (the program's memory is never pinned).
#[no_mangle]
pub extern "C" fn ibv_fork_init() -> c_int {
    0
}

/// A connected QP for `ibv_create_qp` (`id`: None) or `rdma_create_qp` (the id's QP, which
/// the engine moves to INIT at once and the CM on to RTS). `attr.cap` is given back as rxe
/// reports it.
pub(crate) fn create_conn_qp(
    pd: *mut ibv_pd,
    attr: &mut ibv_qp_init_attr,
    id: Option<roce_cm::CmId>,
) -> Result<*mut Qp, i32> {
    // An XRC initiator has no receive side: no receive CQ, SRQ or receive capacities
    // (ib_uverbs's create_qp zeroes them).
    let xrc = attr.qp_type == IBV_QPT_XRC_SEND;
    if xrc {
        attr.recv_cq = std::ptr::null_mut();
        attr.srq = std::ptr::null_mut();
    }
    if pd.is_null() || attr.send_cq.is_null() || (attr.recv_cq.is_null() && !xrc) {
        return Err(libc::EINVAL);
    }
    // SAFETY: an Srq of ours, or NULL.
    let srq = (!attr.srq.is_null()).then(|| unsafe { (*attr.srq.cast::<crate::conn::Srq>()).srqn });
    let cap = crate::conn::check_caps(&attr.cap, srq.is_some() || xrc)?;
    // SAFETY: the PD's context.
    let ctx = unsafe { (*pd).context };
    // SAFETY: the PD's number, written at allocation.
    let pdn = unsafe { (*pd).handle };
    link_conn_qp(ctx, pd, attr, cap, crate::conn::qp_init(attr.qp_type, &cap, srq, pdn), id)
}

/// Create the engine's QP for `init` (for the CM id `id`, if any), its object and its link to
/// the engine's thread; `attr.cap` becomes `cap`.
pub fn link_conn_qp(
    ctx: *mut ibv_context,
    pd: *mut ibv_pd,
    attr: &mut ibv_qp_init_attr,
    cap: ibv_qp_cap,
    init: roce_cm::rc::QpInit,
    id: Option<roce_cm::CmId>,
) -> Result<*mut Qp, i32> {
    let rt = crate::runtime::runtime()?;
    let qpn = rt
        .call(move |e| match id {
            Some(cm) => e.d.stack.create_qp_for_id_init(cm, init),
            None => e.d.stack.create_qp_with(init),
        })?
        .map_err(|er| er.value())?;
    attr.cap = cap;
    let mirror = Arc::new(crate::queues::QpMirror::default());
    let Some(qp) = new_qp(ctx, pd, attr, qpn, 0, id.is_some(), Some(mirror.clone())) else {
        let _ = rt.call(move |e| crate::conn::unlink(e, qpn));
        return Err(libc::EINVAL);
    };
    // SAFETY: the QP just made.
    let (send_cq, recv_cq) = unsafe { ((*qp).send_cq.clone(), (*qp).recv_cq.clone()) };
    let m = mirror.clone();
    let _ = rt.call(move |e| {
        e.conn_qps.insert(qpn, crate::queues::ConnQpLink { send_cq, recv_cq, mirror: m });
        e.deliver_completions();
    });
    // SAFETY: as above.
    unsafe { (*qp).c.state = mirror.state.load(Ordering::Acquire) };
    Ok(qp)
}
