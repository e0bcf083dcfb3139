//! The extended QP's work-request builder: `ibv_create_qp_ex` with `send_ops_flags`,
//! `ibv_qp_to_qp_ex`, and the `ibv_wr_*` inlines of `<infiniband/verbs.h>`, which call through
//! the function pointers of `struct ibv_qp_ex` (rdma-core v44; ibv_wr_post(3)).
//!
//! Between `ibv_wr_start` and `ibv_wr_complete` each `ibv_wr_<opcode>` call begins a work
//! request with the `wr_id` and `wr_flags` the program has just stored in the struct, and the
//! `ibv_wr_set_*` calls give the last one its data (SGEs, inline bytes, a UD address). Nothing
//! is posted until `ibv_wr_complete`, which posts all of them or none and returns the first
//! error met on the way (rxe's provider: a full queue is ENOSPC, and the batch is dropped);
//! `ibv_wr_abort` drops them. The requests go down the same path as `ibv_post_send`'s, so a
//! program gets the same checks and completions either way; `ibv_wr_atomic_write` is the one
//! operation only this API has (rdma-core v44 gives it no `ibv_send_wr` form).
//!
//! Not here: `ibv_wr_send_tso` (no TSO on RoCE; asking for it in `send_ops_flags` is
//! EOPNOTSUPP at creation, as rxe's provider answers).

use core::ffi::{c_int, c_void};

use roce_cm::rc::{FlushLevel, SendOp, SendWr, FLUSH_GLOBAL, FLUSH_PERSISTENT};

use crate::abi::*;
use crate::ffi::{boundary, null_errno, say_once};
use crate::verbs::Qp;
use crate::wr_batch::{Batch, Entry};

/// The builder's function pointers, as every QP of this library carries them.
pub fn ops() -> ibv_qp_ex_ops {
    ibv_qp_ex_ops {
        comp_mask: 0,
        wr_id: 0,
        wr_flags: 0,
        wr_atomic_cmp_swp: Some(wr_atomic_cmp_swp),
        wr_atomic_fetch_add: Some(wr_atomic_fetch_add),
        wr_bind_mw: Some(wr_bind_mw),
        wr_local_inv: Some(wr_local_inv),
        wr_rdma_read: Some(wr_rdma_read),
        wr_rdma_write: Some(wr_rdma_write),
        wr_rdma_write_imm: Some(wr_rdma_write_imm),
        wr_send: Some(wr_send),
        wr_send_imm: Some(wr_send_imm),
        wr_send_inv: Some(wr_send_inv),
        wr_send_tso: None,
        wr_set_ud_addr: Some(wr_set_ud_addr),
        wr_set_xrc_srqn: Some(wr_set_xrc_srqn),
        wr_set_inline_data: Some(wr_set_inline_data),
        wr_set_inline_data_list: Some(wr_set_inline_data_list),
        wr_set_sge: Some(wr_set_sge),
        wr_set_sge_list: Some(wr_set_sge_list),
        wr_start: Some(wr_start),
        wr_complete: Some(wr_complete),
        wr_abort: Some(wr_abort),
        wr_atomic_write: Some(wr_atomic_write),
    }
}

/// The `send_ops_flags` a QP of `qp_type` may ask for here: rxe's provider's sets
/// (providers/rxe/rxe.c RXE_SUP_*_QP_SEND_OPS_FLAGS).
pub fn supported_send_ops(qp_type: u32) -> u64 {
    let two_sided = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
    let write = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
    match qp_type {
        IBV_QPT_RC => {
            two_sided
                | write
                | IBV_QP_EX_WITH_RDMA_READ
                | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
                | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD
                | IBV_QP_EX_WITH_ATOMIC_WRITE
                | IBV_QP_EX_WITH_FLUSH
                | IBV_QP_EX_WITH_LOCAL_INV
                | IBV_QP_EX_WITH_BIND_MW
                | IBV_QP_EX_WITH_SEND_WITH_INV
        }
        IBV_QPT_UC => two_sided | write | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV,
        // RC's but the memory-placement operations, which have no XRC opcode (IBA table 38
        // gives XRC none; the engine refuses them).
        IBV_QPT_XRC_SEND => supported_send_ops(IBV_QPT_RC) & !(IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_FLUSH),
        IBV_QPT_UD => two_sided,
        _ => 0,
    }
}

/// Check `ibv_qp_init_attr_ex` as rxe's provider does (`check_qp_init_attr`): only PD, XRC
/// domain, create flags (none but the CM's loopback blocking) and send-ops flags; send ops the
/// QP type has. Returns the send-ops flags asked for, if any.
pub fn check_attr(a: &ibv_qp_init_attr_ex) -> Result<Option<u64>, c_int> {
    let known =
        IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    if a.comp_mask & !known != 0 {
        say_once(
            "ibv_create_qp_ex",
            "roce: ibv_create_qp_ex: only PD, XRC domain, create and send-ops flags are supported: EOPNOTSUPP",
        );
        return Err(libc::EOPNOTSUPP);
    }
    if a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS == 0 {
        return Ok(None);
    }
    let missing = a.send_ops_flags & !supported_send_ops(a.qp_type);
    if missing != 0 {
        say_once(
            "ibv_create_qp_ex send_ops",
            &format!(
                "roce: ibv_create_qp_ex: send_ops_flags {missing:#x} are not supported for QP type {} \
                 (TSO is not): EOPNOTSUPP",
                a.qp_type
            ),
        );
        return Err(libc::EOPNOTSUPP);
    }
    Ok(Some(a.send_ops_flags))
}

/// The `ibv_qp_init_attr` part of an `ibv_qp_init_attr_ex`.
pub fn basic_attr(a: &ibv_qp_init_attr_ex) -> ibv_qp_init_attr {
    ibv_qp_init_attr {
        qp_context: a.qp_context,
        send_cq: a.send_cq,
        recv_cq: a.recv_cq,
        srq: a.srq,
        cap: a.cap,
        qp_type: a.qp_type,
        sq_sig_all: a.sq_sig_all,
    }
}

/// `verbs_context.create_qp_ex` (what the `ibv_create_qp_ex` inline calls): a QP as
/// `ibv_create_qp` makes it, with the work-request builder when `send_ops_flags` are given.
///
/// # Safety
/// `attr` is the caller's attributes; its PD is ours.
pub unsafe extern "C" fn create_qp_ex(_ctx: *mut ibv_context, attr: *mut ibv_qp_init_attr_ex) -> *mut ibv_qp {
    boundary("ibv_create_qp_ex", std::ptr::null_mut(), || {
        if attr.is_null() {
            return null_errno(libc::EINVAL);
        }
        // SAFETY: the caller's attributes.
        let a = unsafe { &mut *attr };
        let send_ops = match check_attr(a) {
            Ok(s) => s,
            Err(e) => return null_errno(e),
        };
        if a.qp_type == IBV_QPT_XRC_RECV {
            if send_ops.is_some() {
                return null_errno(libc::EINVAL); // a target sends nothing
            }
            return match crate::xrc::create_target_qp(a) {
                Ok(qp) => qp.cast(),
                Err(e) => null_errno(e),
            };
        }
        if a.comp_mask & IBV_QP_INIT_ATTR_PD == 0 || a.pd.is_null() {
            return null_errno(libc::EINVAL);
        }
        let mut basic = basic_attr(a);
        // SAFETY: the caller's PD and our attributes.
        let qp = unsafe { crate::verbs::ibv_create_qp(a.pd, &mut basic) };
        if qp.is_null() {
            return qp;
        }
        a.cap = basic.cap;
        if let Some(flags) = send_ops {
            // SAFETY: the Qp just made, not yet seen by anyone else.
            unsafe { enable(qp.cast::<Qp>(), flags) };
        }
        qp
    })
}

/// Make `qp` extended with `send_ops`: its builder's functions (and rdma-core 45's `wr_flush`
/// after them) are set, and `ibv_qp_to_qp_ex` gives it out.
///
/// # Safety
/// `qp` is a QP of ours that no other thread uses yet.
pub unsafe fn enable(qp: *mut Qp, send_ops: u64) {
    // SAFETY: per the contract.
    let q = unsafe { &mut *qp };
    q.ex = ops();
    q.ex_flush = Some(wr_flush);
    q.send_ops = Some(send_ops);
}

/// `ibv_qp_to_qp_ex`: the QP as a `struct ibv_qp_ex` when it was created with send-ops flags,
/// else NULL (libibverbs: only a QP whose provider made it extended).
///
/// # Safety
/// `qp` is a QP of ours.
#[no_mangle]
pub unsafe extern "C" fn ibv_qp_to_qp_ex(qp: *mut ibv_qp) -> *mut ibv_qp_ex {
    boundary("ibv_qp_to_qp_ex", std::ptr::null_mut(), || {
        // SAFETY: a Qp of ours, or NULL.
        match unsafe { qp.cast::<Qp>().as_ref() } {
            Some(q) if q.send_ops.is_some() => qp.cast(),
            _ => std::ptr::null_mut(),
        }
    })
}

/// The QP behind a builder pointer.
///
/// # Safety
/// `qpx` came from [`ibv_qp_to_qp_ex`].
unsafe fn qp<'a>(qpx: *mut ibv_qp_ex) -> &'a Qp {
    // SAFETY: per the contract, our Qp, whose builder is at the offset ibv_qp_ex has it.
    unsafe { &*qpx.cast::<Qp>() }
}

/// Run `f` on the open batch; a call outside `ibv_wr_start` … `ibv_wr_complete` is ignored
/// (rxe's provider would write past its queue's producer index: undefined there).
fn with_batch(q: &Qp, f: impl FnOnce(&mut Batch)) {
    if let Ok(mut b) = q.batch.lock() {
        if let Some(b) = b.as_mut() {
            f(b);
        }
    }
}

/// Begin a work request of `opcode` with the `wr_id` and `wr_flags` the program stored; `need`
/// is the send-ops flag that opcode needs (else the batch fails with EOPNOTSUPP).
///
/// # Safety
/// As [`qp`].
unsafe fn begin(qpx: *mut ibv_qp_ex, opcode: ibv_wr_opcode, need: u64, fill: impl FnOnce(&mut ibv_send_wr)) {
    // SAFETY: per the contract.
    let q = unsafe { qp(qpx) };
    // SAFETY: the program writes wr_id and wr_flags in place before each call (the inlines'
    // contract); read them as they are now.
    let (wr_id, wr_flags) = unsafe { ((*qpx).ops.wr_id, (*qpx).ops.wr_flags) };
    let allowed = q.send_ops.unwrap_or(0) & need != 0;
    with_batch(q, |b| {
        if !allowed {
            b.fail(libc::EOPNOTSUPP);
            return;
        }
        // SAFETY: plain C data; all-zero is valid.
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.opcode = opcode;
        wr.send_flags = wr_flags;
        fill(&mut wr);
        b.entries.push(Entry { wr, sges: Vec::new(), inline: None, atomic_write: None, flush: None });
    });
}

/// Change the last work request begun (a `set` call before any is ignored).
fn last(q: &Qp, f: impl FnOnce(&mut Entry)) {
    with_batch(q, |b| {
        if let Some(e) = b.entries.last_mut() {
            f(e);
        }
    });
}

unsafe extern "C" fn wr_start(qpx: *mut ibv_qp_ex) {
    boundary("ibv_wr_start", (), || {
        // SAFETY: the builder of one of our QPs.
        let q = unsafe { qp(qpx) };
        if let Ok(mut b) = q.batch.lock() {
            *b = Some(Batch::default());
        }
    })
}

unsafe extern "C" fn wr_abort(qpx: *mut ibv_qp_ex) {
    boundary("ibv_wr_abort", (), || {
        // SAFETY: as above.
        let q = unsafe { qp(qpx) };
        if let Ok(mut b) = q.batch.lock() {
            *b = None;
        }
    })
}

unsafe extern "C" fn wr_send(qpx: *mut ibv_qp_ex) {
    // SAFETY: the builder of one of our QPs.
    boundary("ibv_wr_send", (), || unsafe { begin(qpx, IBV_WR_SEND, IBV_QP_EX_WITH_SEND, |_| {}) })
}

unsafe extern "C" fn wr_send_imm(qpx: *mut ibv_qp_ex, imm_data: u32) {
    boundary("ibv_wr_send_imm", (), || {
        // SAFETY: as above.
        unsafe { begin(qpx, IBV_WR_SEND_WITH_IMM, IBV_QP_EX_WITH_SEND_WITH_IMM, |w| w.imm_data = imm_data) }
    })
}

unsafe extern "C" fn wr_rdma_write(qpx: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    boundary("ibv_wr_rdma_write", (), || {
        // SAFETY: as above.
        unsafe {
            begin(qpx, IBV_WR_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE, |w| {
                w.wr.rdma = ibv_send_wr_rdma { remote_addr, rkey }
            })
        }
    })
}

unsafe extern "C" fn wr_rdma_write_imm(qpx: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, imm_data: u32) {
    boundary("ibv_wr_rdma_write_imm", (), || {
        // SAFETY: as above.
        unsafe {
            begin(qpx, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, |w| {
                w.wr.rdma = ibv_send_wr_rdma { remote_addr, rkey };
                w.imm_data = imm_data;
            })
        }
    })
}

unsafe extern "C" fn wr_rdma_read(qpx: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    boundary("ibv_wr_rdma_read", (), || {
        // SAFETY: as above.
        unsafe {
            begin(qpx, IBV_WR_RDMA_READ, IBV_QP_EX_WITH_RDMA_READ, |w| {
                w.wr.rdma = ibv_send_wr_rdma { remote_addr, rkey }
            })
        }
    })
}

unsafe extern "C" fn wr_atomic_cmp_swp(qpx: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, compare: u64, swap: u64) {
    boundary("ibv_wr_atomic_cmp_swp", (), || {
        // SAFETY: as above.
        unsafe {
            begin(qpx, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP, |w| {
                w.wr.atomic = ibv_send_wr_atomic { remote_addr, compare_add: compare, swap, rkey }
            })
        }
    })
}

unsafe extern "C" fn wr_atomic_fetch_add(qpx: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, add: u64) {
    boundary("ibv_wr_atomic_fetch_add", (), || {
        // SAFETY: as above.
        unsafe {
            begin(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, |w| {
                w.wr.atomic = ibv_send_wr_atomic { remote_addr, compare_add: add, swap: 0, rkey }
            })
        }
    })
}

unsafe extern "C" fn wr_atomic_write(qpx: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, atomic_wr: *const c_void) {
    boundary("ibv_wr_atomic_write", (), || {
        let mut data = [0u8; 8];
        if !atomic_wr.is_null() {
            // SAFETY: ibv_wr_atomic_write's argument: 8 bytes of the program's, read now (the
            // provider copies them into its WQE at this call).
            unsafe { std::ptr::copy_nonoverlapping(atomic_wr.cast::<u8>(), data.as_mut_ptr(), 8) };
        }
        // SAFETY: as above.
        unsafe {
            begin(qpx, IBV_WR_ATOMIC_WRITE, IBV_QP_EX_WITH_ATOMIC_WRITE, |w| {
                w.wr.rdma = ibv_send_wr_rdma { remote_addr, rkey }
            })
        };
        // SAFETY: as above.
        let q = unsafe { qp(qpx) };
        last(q, |e| {
            if e.wr.opcode == IBV_WR_ATOMIC_WRITE {
                e.atomic_write = Some(data);
            }
        });
        if atomic_wr.is_null() {
            with_batch(q, |b| b.fail(libc::EINVAL));
        }
    })
}

/// `ibv_wr_flush` (rdma-core 45's member after v44's `struct ibv_qp_ex`): FLUSH `len` bytes at
/// `remote_addr` (`level` IBV_FLUSH_RANGE, 0) or the whole region (IBV_FLUSH_MR, 1) to global
/// visibility (`type` bit 0) and/or persistence (bit 1). A length past 2 GiB, or a type or
/// level with other bits, fails the batch with EINVAL.
///
/// # Safety
/// As the other builder calls.
pub unsafe extern "C" fn wr_flush(qpx: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, len: usize, type_: u8, level: u8) {
    boundary("ibv_wr_flush", (), || {
        let level = match level {
            0 => Some(FlushLevel::Range),
            1 => Some(FlushLevel::Mr),
            _ => None,
        };
        let ok = len <= 1 << 31 && type_ & !(FLUSH_GLOBAL | FLUSH_PERSISTENT) == 0;
        // SAFETY: the builder of one of our QPs.
        unsafe {
            begin(qpx, IBV_WR_FLUSH, IBV_QP_EX_WITH_FLUSH, |w| w.wr.rdma = ibv_send_wr_rdma { remote_addr, rkey })
        };
        // SAFETY: as above.
        let q = unsafe { qp(qpx) };
        match (level, ok) {
            (Some(level), true) => last(q, |e| {
                if e.wr.opcode == IBV_WR_FLUSH {
                    e.flush = Some(SendOp::Flush { remote_addr, rkey, len: len as u32, placement: type_, level });
                }
            }),
            _ => with_batch(q, |b| b.fail(libc::EINVAL)),
        }
    })
}

unsafe extern "C" fn wr_bind_mw(qpx: *mut ibv_qp_ex, mw: *mut ibv_mw, rkey: u32, info: *const ibv_mw_bind_info) {
    boundary("ibv_wr_bind_mw", (), || {
        if info.is_null() {
            // SAFETY: the builder of one of our QPs.
            let q = unsafe { qp(qpx) };
            return with_batch(q, |b| b.fail(libc::EINVAL));
        }
        // SAFETY: the program's bind information, copied now.
        let bind_info = unsafe { *info };
        // SAFETY: as above.
        unsafe {
            begin(qpx, IBV_WR_BIND_MW, IBV_QP_EX_WITH_BIND_MW, |w| {
                w.bind_mw_tso.bind_mw = ibv_send_wr_bind_mw { mw, rkey, bind_info }
            })
        }
    })
}

unsafe extern "C" fn wr_local_inv(qpx: *mut ibv_qp_ex, invalidate_rkey: u32) {
    boundary("ibv_wr_local_inv", (), || {
        // SAFETY: the builder of one of our QPs.
        unsafe { begin(qpx, IBV_WR_LOCAL_INV, IBV_QP_EX_WITH_LOCAL_INV, |w| w.imm_data = invalidate_rkey) }
    })
}

unsafe extern "C" fn wr_send_inv(qpx: *mut ibv_qp_ex, invalidate_rkey: u32) {
    boundary("ibv_wr_send_inv", (), || {
        // SAFETY: as above.
        unsafe { begin(qpx, IBV_WR_SEND_WITH_INV, IBV_QP_EX_WITH_SEND_WITH_INV, |w| w.imm_data = invalidate_rkey) }
    })
}

/// `ibv_wr_set_xrc_srqn`: the remote XRC SRQ of the last request (on an XRC initiator; any
/// other QP fails the batch with EINVAL, as ibv_post_send would refuse the request).
unsafe extern "C" fn wr_set_xrc_srqn(qpx: *mut ibv_qp_ex, remote_srqn: u32) {
    boundary("ibv_wr_set_xrc_srqn", (), || {
        // SAFETY: the builder of one of our QPs.
        let q = unsafe { qp(qpx) };
        if q.c.qp_type != IBV_QPT_XRC_SEND {
            with_batch(q, |b| b.fail(libc::EINVAL));
            return;
        }
        last(q, |e| e.wr.qp_type.xrc.remote_srqn = remote_srqn);
    })
}

unsafe extern "C" fn wr_set_sge(qpx: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    boundary("ibv_wr_set_sge", (), || {
        // SAFETY: as above.
        let q = unsafe { qp(qpx) };
        last(q, |e| {
            e.sges = vec![ibv_sge { addr, length, lkey }];
            e.inline = None;
        });
    })
}

unsafe extern "C" fn wr_set_sge_list(qpx: *mut ibv_qp_ex, num_sge: usize, sg_list: *const ibv_sge) {
    boundary("ibv_wr_set_sge_list", (), || {
        // SAFETY: as above.
        let q = unsafe { qp(qpx) };
        let list = if num_sge == 0 || sg_list.is_null() {
            Vec::new()
        } else {
            // SAFETY: the program's list of num_sge elements, copied now.
            unsafe { std::slice::from_raw_parts(sg_list, num_sge) }.to_vec()
        };
        last(q, |e| {
            e.sges = list;
            e.inline = None;
        });
    })
}

unsafe extern "C" fn wr_set_inline_data(qpx: *mut ibv_qp_ex, addr: *mut c_void, length: usize) {
    let buf = ibv_data_buf { addr, length };
    // SAFETY: one buffer, as the list form takes it.
    unsafe { wr_set_inline_data_list(qpx, 1, &buf) }
}

unsafe extern "C" fn wr_set_inline_data_list(qpx: *mut ibv_qp_ex, num_buf: usize, buf_list: *const ibv_data_buf) {
    boundary("ibv_wr_set_inline_data", (), || {
        // SAFETY: as above.
        let q = unsafe { qp(qpx) };
        let mut data = Vec::new();
        for i in 0..if buf_list.is_null() { 0 } else { num_buf } {
            // SAFETY: the program's list of num_buf buffers, each copied now (inline data is
            // the program's memory at this call, in no region).
            let b = unsafe { *buf_list.add(i) };
            if b.length > 0 && !b.addr.is_null() {
                data.extend_from_slice(unsafe { std::slice::from_raw_parts(b.addr.cast::<u8>(), b.length) });
            }
        }
        let too_long = data.len() > q.cap.max_inline_data as usize;
        last(q, |e| {
            e.sges.clear();
            e.inline = Some(data);
        });
        if too_long {
            with_batch(q, |b| b.fail(libc::EINVAL));
        }
    })
}

unsafe extern "C" fn wr_set_ud_addr(qpx: *mut ibv_qp_ex, ah: *mut ibv_ah, remote_qpn: u32, remote_qkey: u32) {
    boundary("ibv_wr_set_ud_addr", (), || {
        // SAFETY: as above.
        let q = unsafe { qp(qpx) };
        last(q, |e| e.wr.wr.ud = ibv_send_wr_ud { ah, remote_qpn, remote_qkey });
    })
}

unsafe extern "C" fn wr_complete(qpx: *mut ibv_qp_ex) -> c_int {
    boundary("ibv_wr_complete", libc::EIO, || {
        // SAFETY: as above.
        let q = unsafe { qp(qpx) };
        let Some(mut b) = q.batch.lock().ok().and_then(|mut b| b.take()) else { return libc::EINVAL };
        if b.err != 0 {
            return b.err;
        }
        if b.entries.is_empty() {
            return 0;
        }
        // Each request's SGEs: its list, or one element over its inline bytes.
        for e in &mut b.entries {
            if let Some(d) = &e.inline {
                e.sges = vec![ibv_sge { addr: d.as_ptr() as u64, length: d.len() as u32, lkey: 0 }];
                e.wr.send_flags |= IBV_SEND_INLINE;
            } else {
                e.wr.send_flags &= !IBV_SEND_INLINE;
            }
            e.wr.num_sge = e.sges.len() as c_int;
            e.wr.sg_list = if e.sges.is_empty() { std::ptr::null_mut() } else { e.sges.as_mut_ptr() };
        }
        match &q.conn {
            Some(mirror) => post_connected(q, mirror, &b.entries),
            None => post_ud(q, &mut b.entries),
        }
    })
}

/// A connected QP's batch: every request converted and checked as `ibv_post_send` checks it,
/// then all posted, or none.
fn post_connected(q: &Qp, mirror: &std::sync::Arc<crate::queues::QpMirror>, entries: &[Entry]) -> c_int {
    let rt = match crate::runtime::runtime() {
        Ok(rt) => rt,
        Err(e) => return e,
    };
    let view = q.view();
    let mut batch = Vec::with_capacity(entries.len());
    {
        let lkey_ok = crate::conn::lkey_in_pd(rt, view.pd);
        for e in entries {
            let signaled = view.sq_sig_all || e.wr.send_flags & IBV_SEND_SIGNALED != 0;
            let srqn = match crate::conn::xrc_srqn(&e.wr, &view) {
                Ok(n) => n,
                Err(err) => return err,
            };
            if let Some(op) = e.flush {
                if view.uc {
                    return libc::EINVAL;
                }
                batch.push((
                    SendWr { wr_id: e.wr.wr_id, op, sg_list: Vec::new(), signaled, solicited: false, inline: None },
                    srqn,
                ));
                continue;
            }
            let wr = match e.atomic_write {
                Some(data) => {
                    // SAFETY: begun by wr_atomic_write, which filled the rdma member.
                    let rdma = unsafe { e.wr.wr.rdma };
                    if view.uc {
                        return libc::EINVAL;
                    }
                    SendWr {
                        wr_id: e.wr.wr_id,
                        op: SendOp::AtomicWrite { remote_addr: rdma.remote_addr, rkey: rdma.rkey, data },
                        sg_list: Vec::new(),
                        signaled,
                        solicited: false,
                        inline: None,
                    }
                }
                None => match crate::conn::send_wr(&e.wr, view.uc, &view.cap, view.sq_sig_all, &lkey_ok) {
                    Ok(w) => w,
                    Err(err) => return err,
                },
            };
            batch.push((wr, srqn));
        }
    }
    crate::conn::post_batch(rt, view, mirror, batch)
}

/// A UD QP's batch: chained and handed to the UD post path (which posts the requests before
/// one it refuses, as `ibv_post_send` does).
fn post_ud(q: &Qp, entries: &mut [Entry]) -> c_int {
    if entries.iter().any(|e| e.atomic_write.is_some() || e.flush.is_some()) {
        return libc::EINVAL;
    }
    for i in (0..entries.len()).rev() {
        let next = entries.get_mut(i + 1).map_or(std::ptr::null_mut(), |n| &mut n.wr as *mut ibv_send_wr);
        entries[i].wr.next = next;
    }
    let mut bad = std::ptr::null_mut();
    let qp_ptr = (q as *const Qp).cast_mut().cast::<ibv_qp>();
    // SAFETY: our QP and a chain of requests that lives until the call returns.
    unsafe { crate::verbs::post_send(qp_ptr, &mut entries[0].wr, &mut bad) }
}
