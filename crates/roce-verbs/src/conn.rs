//! Connected QPs (RC and UC) and SRQs through the verbs, over the engine's rc/ (the same
//! requester, responder and completer the `roce` tools run):
//!
//! - **Memory.** A region is the program's own memory, lent to the engine
//!   ([`ProgramMemory`], the one place its bytes are touched): RDMA WRITEs and READs from the
//!   peer land in and are served from the registered buffer, with rxe's rkey, range and
//!   access checks made by the engine.
//! - **Posting** does not wait for the engine's thread: the work request is checked here
//!   (state, opcode, SGE count, inline size, queue depth), handed over, and its frames leave
//!   at the thread's next turn. The queue depths are checked against counts the thread
//!   mirrors ([`QpMirror`]) before it delivers completions, so a program that saw a
//!   completion also sees its slot free.
//! - **Completions** are routed by QP number to the QP's send or receive CQ, whose own lock
//!   `ibv_poll_cq` takes; asynchronous events (SRQ limit) go to the context's async fd.
//! - **modify_qp** maps `struct ibv_qp_attr` and its mask onto the engine's attributes,
//!   requiring per transition what `ib_modify_qp_is_ok` requires (EINVAL otherwise).

use core::ffi::c_int;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use roce_cm::rc::{
    Access, AsyncEvent, LentMemory, MwBind, QpAttr, QpCap, QpInit, QpState, RecvWr as EngineRecvWr, SendOp, SendWr,
    Sge, TransportService, WcOpcode, WorkCompletion,
};
use roce_wire::Gid;

use crate::abi::*;
use crate::queues::{QpMirror, SrqLink};
use crate::runtime::{Engine, Runtime};

/// rxe's largest inline payload (`RXE_MAX_INLINE_DATA`: a WQE of 32 SGEs' room).
pub const MAX_INLINE_DATA: u32 = 512;
/// rxe's most SGEs per work request (`RXE_MAX_SGE`).
pub const MAX_SGE: u32 = 32;
/// rxe's deepest queue (`RXE_MAX_QP_WR`).
pub const MAX_QP_WR: u32 = 0x4000;

// ------------------------------------------------------------------------------------------
// Memory

/// A program's buffer as the engine reaches it: only through copies, bounds-checked again
/// here (the engine checked them against the region first).
#[derive(Debug)]
pub struct ProgramMemory {
    base: usize,
    len: usize,
}

impl ProgramMemory {
    /// The `len` bytes at `base`, which the program keeps valid until it deregisters them.
    pub fn new(base: usize, len: usize) -> ProgramMemory {
        ProgramMemory { base, len }
    }

    fn inside(&self, offset: usize, n: usize) -> bool {
        offset.checked_add(n).is_some_and(|end| end <= self.len)
    }
}

impl LentMemory for ProgramMemory {
    fn read(&self, offset: usize, out: &mut [u8]) {
        if self.inside(offset, out.len()) {
            // SAFETY: inside the registered buffer, which stays valid until ibv_dereg_mr
            // (which takes the region out of the engine first, on the engine's thread).
            unsafe { std::ptr::copy_nonoverlapping((self.base + offset) as *const u8, out.as_mut_ptr(), out.len()) }
        }
    }

    fn write(&self, offset: usize, data: &[u8]) {
        if self.inside(offset, data.len()) {
            // SAFETY: as in `read`; the region was registered with local write (the engine
            // checks the access before any write).
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), (self.base + offset) as *mut u8, data.len()) }
        }
    }

    fn update_u64(&self, offset: usize, f: &mut dyn FnMut(u64) -> u64) -> u64 {
        if !self.inside(offset, 8) {
            return 0;
        }
        let p = (self.base + offset) as *mut u64;
        if (p as usize).is_multiple_of(8) {
            // SAFETY: an aligned u64 inside the buffer; an atomic against the program's own.
            let a = unsafe { AtomicU64::from_ptr(p) };
            match a.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| Some(f(v))) {
                Ok(v) | Err(v) => v,
            }
        } else {
            // SAFETY: inside the buffer; unaligned (the engine refuses misaligned atomics,
            // so this is not reached from the wire).
            unsafe {
                let old = std::ptr::read_unaligned(p);
                std::ptr::write_unaligned(p, f(old));
                old
            }
        }
    }
}

/// The engine's access flags of `IBV_ACCESS_*` (the four remote/local ones, MW_BIND and
/// ZERO_BASED, and rdma-core 45's FLUSH_GLOBAL and FLUSH_PERSISTENT, 1 << 8 and 1 << 9, which
/// v44 programs may pass as bits).
pub fn access_of(flags: u32) -> Access {
    Access(flags & (0x3f | Access::FLUSH_GLOBAL.0 | Access::FLUSH_PERSISTENT.0))
}

/// `ibv_qp_state` of an engine state.
pub fn ibv_state(s: QpState) -> u32 {
    match s {
        QpState::Reset => IBV_QPS_RESET,
        QpState::Init => IBV_QPS_INIT,
        QpState::Rtr => IBV_QPS_RTR,
        QpState::Rts => IBV_QPS_RTS,
        QpState::Sqd => IBV_QPS_SQD,
        QpState::Sqe => IBV_QPS_SQE,
        QpState::Err => IBV_QPS_ERR,
    }
}

fn engine_state(s: u32) -> Option<QpState> {
    Some(match s {
        IBV_QPS_RESET => QpState::Reset,
        IBV_QPS_INIT => QpState::Init,
        IBV_QPS_RTR => QpState::Rtr,
        IBV_QPS_RTS => QpState::Rts,
        IBV_QPS_SQD => QpState::Sqd,
        IBV_QPS_SQE => QpState::Sqe,
        IBV_QPS_ERR => QpState::Err,
        _ => return None,
    })
}

/// `struct ibv_wc` of an engine completion.
pub fn ibv_wc_of(w: &WorkCompletion) -> ibv_wc {
    let opcode = match w.opcode {
        WcOpcode::Send => IBV_WC_SEND,
        WcOpcode::RdmaWrite => IBV_WC_RDMA_WRITE,
        WcOpcode::RdmaRead => IBV_WC_RDMA_READ,
        WcOpcode::CompSwap => IBV_WC_COMP_SWAP,
        WcOpcode::FetchAdd => IBV_WC_FETCH_ADD,
        WcOpcode::BindMw => IBV_WC_BIND_MW,
        WcOpcode::LocalInv => IBV_WC_LOCAL_INV,
        WcOpcode::Flush => IBV_WC_FLUSH,
        WcOpcode::AtomicWrite => IBV_WC_ATOMIC_WRITE,
        WcOpcode::Recv => IBV_WC_RECV,
        WcOpcode::RecvRdmaWithImm => IBV_WC_RECV_RDMA_WITH_IMM,
    };
    let mut c = ibv_wc {
        wr_id: w.wr_id,
        status: u32::from(w.status.ibv_code()),
        opcode,
        qp_num: w.qp_num,
        byte_len: w.byte_len,
        ..Default::default()
    };
    if let Some(imm) = w.imm_data {
        c.imm_data = imm.to_be(); // __be32, as the wire carries it
        c.wc_flags |= IBV_WC_WITH_IMM;
    }
    if let Some(rkey) = w.invalidated_rkey {
        c.imm_data = rkey; // the union's invalidated_rkey: host order
        c.wc_flags |= IBV_WC_WITH_INV;
    }
    c
}

fn is_receive(op: WcOpcode) -> bool {
    matches!(op, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm)
}

impl Engine {
    /// Mirror every connected QP's state and queue counts, then route the engine's
    /// completions to their CQs and its asynchronous events to the async fd.
    pub fn deliver_completions(&mut self) {
        if self.conn_qps.is_empty() {
            return;
        }
        let rc = self.d.stack.rc();
        for (qpn, link) in &self.conn_qps {
            if let (Some(s), Some((sq, rq))) = (rc.qp_state(*qpn), rc.queue_lens(*qpn)) {
                link.mirror.state.store(ibv_state(s), Ordering::Release);
                link.mirror.sq_len.store(sq as u32, Ordering::Release);
                link.mirror.rq_len.store(rq as u32, Ordering::Release);
            }
        }
        while let Some(w) = self.d.stack.rc_mut().poll_cq() {
            let Some(l) = self.conn_qps.get(&w.qp_num) else {
                self.orphan_completions += 1;
                continue;
            };
            // A receive taken from an XRC SRQ completes on the SRQ's CQ (an XRC target has
            // none of its own); any other on the QP's receive CQ.
            let srq_cq = w.srq.and_then(|n| self.srqs.get(&n)).and_then(|s| s.cq.as_ref());
            let cq = if is_receive(w.opcode) { srq_cq.or(l.recv_cq.as_ref()) } else { l.send_cq.as_ref() };
            match cq {
                Some(cq) if is_receive(w.opcode) => cq.push_solicited(ibv_wc_of(&w), w.solicited),
                Some(cq) => cq.push(ibv_wc_of(&w)),
                None => self.orphan_completions += 1,
            }
        }
        while let Some(ev) = self.d.stack.poll_async_event() {
            match ev {
                AsyncEvent::SrqLimitReached(srqn) => {
                    if let Some(s) = self.srqs.get(&srqn) {
                        crate::queues::raise_async_event(
                            ibv_async_event_element { srq: s.srq_ptr as *mut ibv_srq },
                            IBV_EVENT_SRQ_LIMIT_REACHED,
                        );
                    }
                }
            }
        }
    }

    /// Hand a send work request to the engine; one it refuses completes with
    /// IBV_WC_LOC_QP_OP_ERR (never lost silently).
    fn post_conn_send(&mut self, qpn: u32, (wr, xrc_srqn): Queued) {
        let now = self.d.now();
        let (wr_id, op) = (wr.wr_id, wr.op.wc_opcode());
        let rc = self.d.stack.rc_mut();
        let refused = match xrc_srqn {
            Some(srqn) => rc.post_send_xrc(now, qpn, srqn, wr),
            None => rc.post_send(now, qpn, wr),
        }
        .is_err();
        if let Some(l) = self.conn_qps.get(&qpn) {
            l.mirror.sq_pending.fetch_sub(1, Ordering::AcqRel);
            if refused {
                let w = WorkCompletion {
                    wr_id,
                    status: roce_cm::rc::WcStatus::LocQpOpErr,
                    opcode: op,
                    qp_num: qpn,
                    byte_len: 0,
                    imm_data: None,
                    solicited: true,
                    invalidated_rkey: None,
                    srq: None,
                };
                match &l.send_cq {
                    Some(cq) => cq.push(ibv_wc_of(&w)),
                    None => self.orphan_completions += 1,
                }
            }
        }
    }
}

/// A send request on its way to the engine, with the remote XRC SRQ an XRC initiator's
/// request names (`ibv_send_wr.qp_type.xrc.remote_srqn`).
pub type Queued = (SendWr, Option<u32>);

// ------------------------------------------------------------------------------------------
// Creation

/// Check a connected QP's initial attributes as rxe_qp_chk_init / rxe_qp_chk_cap do, and
/// give back the capacities rxe reports (inline room: the larger of the SGEs' and the ask).
pub fn check_caps(cap: &ibv_qp_cap, with_srq: bool) -> Result<ibv_qp_cap, i32> {
    if cap.max_send_wr == 0 || cap.max_send_wr > MAX_QP_WR || cap.max_send_sge > MAX_SGE {
        return Err(libc::EINVAL);
    }
    if !with_srq && (cap.max_recv_wr == 0 || cap.max_recv_wr > MAX_QP_WR || cap.max_recv_sge > MAX_SGE) {
        return Err(libc::EINVAL);
    }
    if cap.max_inline_data > MAX_INLINE_DATA {
        return Err(libc::EINVAL);
    }
    let mut out = *cap;
    out.max_inline_data = cap.max_inline_data.max(cap.max_send_sge * 16);
    out.max_send_sge = out.max_send_sge.max(1);
    if with_srq {
        out.max_recv_wr = 0;
        out.max_recv_sge = 0;
    } else {
        out.max_recv_sge = out.max_recv_sge.max(1);
    }
    Ok(out)
}

/// The engine's description of a new connected QP of the PD numbered `pd`.
pub fn qp_init(qp_type: u32, cap: &ibv_qp_cap, srq: Option<u32>, pd: u32) -> QpInit {
    QpInit {
        service: match qp_type {
            IBV_QPT_UC => TransportService::Uc,
            IBV_QPT_XRC_SEND => TransportService::XrcIni,
            _ => TransportService::Rc,
        },
        cap: QpCap { max_send_wr: cap.max_send_wr, max_recv_wr: cap.max_recv_wr.max(1) },
        srq,
        pd,
    }
}

/// `QpCap` of the C caps (what `rdma_create_qp` passes to the engine).
pub fn engine_cap(cap: &ibv_qp_cap) -> QpCap {
    QpCap { max_send_wr: cap.max_send_wr, max_recv_wr: cap.max_recv_wr.max(1) }
}

// ------------------------------------------------------------------------------------------
// modify_qp

/// The attributes a transition requires (`ib_modify_qp_is_ok`'s `req_param` for RC, UC and
/// the two XRC types on Ethernet, where the port's P_Key index and the AV are as for IB): an
/// XRC initiator is a requester (no responder's attributes at RTR), a target a responder (no
/// requester's retry attributes at RTS).
fn required_mask(from: QpState, to: QpState, qp_type: u32) -> u32 {
    let uc = qp_type == IBV_QPT_UC;
    match (from, to) {
        (QpState::Reset, QpState::Init) => IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
        (QpState::Init, QpState::Rtr) if uc || qp_type == IBV_QPT_XRC_SEND => {
            IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN
        }
        (QpState::Init, QpState::Rtr) => {
            IBV_QP_AV
                | IBV_QP_PATH_MTU
                | IBV_QP_DEST_QPN
                | IBV_QP_RQ_PSN
                | IBV_QP_MAX_DEST_RD_ATOMIC
                | IBV_QP_MIN_RNR_TIMER
        }
        (QpState::Rtr, QpState::Rts) if uc => IBV_QP_SQ_PSN,
        (QpState::Rtr, QpState::Rts) if qp_type == IBV_QPT_XRC_RECV => IBV_QP_SQ_PSN | IBV_QP_TIMEOUT,
        (QpState::Rtr, QpState::Rts) => {
            IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC
        }
        _ => 0,
    }
}

/// `ibv_modify_qp` of a connected QP on the engine's thread: the new state.
pub fn modify(e: &mut Engine, qpn: u32, a: &ibv_qp_attr, mask: u32, qp_type: u32) -> Result<QpState, i32> {
    let rc = e.d.stack.rc();
    let cur = rc.qp_state(qpn).ok_or(libc::EINVAL)?;
    let mut at: QpAttr = rc.query_qp(qpn).ok_or(libc::EINVAL)?;
    if mask & IBV_QP_CUR_STATE != 0 && engine_state(a.cur_qp_state) != Some(cur) {
        return Err(libc::EINVAL);
    }
    let to = if mask & IBV_QP_STATE != 0 { engine_state(a.qp_state).ok_or(libc::EINVAL)? } else { cur };
    let need = required_mask(cur, to, qp_type);
    if mask & need != need {
        return Err(libc::EINVAL);
    }
    if mask & IBV_QP_PORT != 0 && a.port_num != 1 {
        return Err(libc::EINVAL);
    }
    if mask & IBV_QP_PKEY_INDEX != 0 && a.pkey_index != 0 {
        return Err(libc::EINVAL);
    }
    if mask & IBV_QP_ACCESS_FLAGS != 0 {
        at.access = access_of(a.qp_access_flags);
    }
    if mask & IBV_QP_PATH_MTU != 0 {
        if !(IBV_MTU_256..=IBV_MTU_4096).contains(&a.path_mtu) {
            return Err(libc::EINVAL);
        }
        at.path_mtu = 128 << a.path_mtu;
    }
    if mask & IBV_QP_DEST_QPN != 0 {
        at.dest_qpn = a.dest_qp_num;
    }
    if mask & IBV_QP_RQ_PSN != 0 {
        at.rq_psn = a.rq_psn;
    }
    if mask & IBV_QP_SQ_PSN != 0 {
        at.sq_psn = a.sq_psn;
    }
    if mask & IBV_QP_TIMEOUT != 0 {
        at.timeout = a.timeout;
    }
    if mask & IBV_QP_RETRY_CNT != 0 {
        at.retry_cnt = a.retry_cnt;
    }
    if mask & IBV_QP_RNR_RETRY != 0 {
        at.rnr_retry = a.rnr_retry;
    }
    if mask & IBV_QP_MIN_RNR_TIMER != 0 {
        at.min_rnr_timer = a.min_rnr_timer;
    }
    if mask & IBV_QP_MAX_QP_RD_ATOMIC != 0 {
        at.max_rd_atomic = a.max_rd_atomic;
    }
    if mask & IBV_QP_MAX_DEST_RD_ATOMIC != 0 {
        at.max_dest_rd_atomic = a.max_dest_rd_atomic;
    }
    if mask & IBV_QP_AV != 0 {
        // RoCE needs the GRH: the destination is the GID's address (ib_resolve_eth_dmac's
        // EINVAL without IB_AH_GRH).
        if a.ah_attr.is_global == 0 {
            return Err(libc::EINVAL);
        }
        // SAFETY: a GID's 16 bytes, whichever view of the union the program wrote.
        let dest: IpAddr = Gid(unsafe { a.ah_attr.grh.dgid.raw }).to_ip();
        at.dest = dest;
        at.dmac = e.macs.get(&dest).copied();
        at.hop_limit = if a.ah_attr.grh.hop_limit == 0 { 64 } else { a.ah_attr.grh.hop_limit };
        at.traffic_class = a.ah_attr.grh.traffic_class;
    }
    let now = e.d.now();
    e.d.stack.rc_mut().modify_qp(now, qpn, to, &at).map_err(|er| er.value())?;
    Ok(to)
}

/// The C attributes and mask that move a QP to `state` with the engine's attributes `at`
/// (what `rdma_init_qp_attr` gives: INIT access, port and P_Key index; RTR the path and the
/// responder's side; RTS the requester's).
pub fn ibv_attr_for(state: u32, at: &QpAttr) -> (ibv_qp_attr, u32) {
    let mut a = attr_of(QpState::Reset, at, ibv_qp_cap::default());
    a.qp_state = state;
    let mask = IBV_QP_STATE
        | match state {
            IBV_QPS_INIT => IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT,
            IBV_QPS_RTR => {
                IBV_QP_AV
                    | IBV_QP_PATH_MTU
                    | IBV_QP_DEST_QPN
                    | IBV_QP_RQ_PSN
                    | IBV_QP_MAX_DEST_RD_ATOMIC
                    | IBV_QP_MIN_RNR_TIMER
            }
            _ => IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
        };
    (a, mask)
}

/// `ibv_query_qp` of a connected QP: the engine's attributes in the C shape.
pub fn query(e: &Engine, qpn: u32, cap: ibv_qp_cap) -> Option<ibv_qp_attr> {
    let rc = e.d.stack.rc();
    let s = rc.qp_state(qpn)?;
    let at = rc.query_qp(qpn)?;
    Some(attr_of(s, &at, cap))
}

/// The C shape of the engine's attributes of a QP in state `s`.
fn attr_of(s: QpState, at: &QpAttr, cap: ibv_qp_cap) -> ibv_qp_attr {
    // SAFETY: plain C data; zero is valid.
    let mut a: ibv_qp_attr = unsafe { std::mem::zeroed() };
    a.qp_state = ibv_state(s);
    a.cur_qp_state = a.qp_state;
    a.path_mtu = (at.path_mtu.max(256) / 128).trailing_zeros();
    a.qkey = 0;
    a.rq_psn = at.rq_psn;
    a.sq_psn = at.sq_psn;
    a.dest_qp_num = at.dest_qpn;
    a.qp_access_flags = at.access.0;
    a.cap = cap;
    a.ah_attr.grh.dgid.raw = Gid::from_ip(at.dest).0;
    a.ah_attr.grh.hop_limit = at.hop_limit;
    a.ah_attr.grh.traffic_class = at.traffic_class;
    a.ah_attr.grh.sgid_index = if at.dest.is_ipv4() { 1 } else { 0 };
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.max_rd_atomic = at.max_rd_atomic;
    a.max_dest_rd_atomic = at.max_dest_rd_atomic;
    a.min_rnr_timer = at.min_rnr_timer;
    a.port_num = 1;
    a.timeout = at.timeout;
    a.retry_cnt = at.retry_cnt;
    a.rnr_retry = at.rnr_retry;
    a
}

// ------------------------------------------------------------------------------------------
// The data path

/// Why a work request is refused at post time (the call fails with it and `*bad_wr`).
pub type PostError = c_int;

/// The engine's work request for a C send request on a connected QP. `lkey_ok` says whether
/// a key belongs to the QP's PD (a region of another PD goes with an lkey no region has, so
/// the engine completes the request with IBV_WC_LOC_PROT_ERR as rxe does).
pub fn send_wr(
    w: &ibv_send_wr,
    uc: bool,
    cap: &ibv_qp_cap,
    sq_sig_all: bool,
    lkey_ok: &dyn Fn(u32) -> bool,
) -> Result<SendWr, PostError> {
    let n = w.num_sge;
    if n < 0 || n as u32 > cap.max_send_sge.max(1) || (n > 0 && w.sg_list.is_null()) {
        return Err(libc::EINVAL);
    }
    // SAFETY: the opcode says which member of the union the program filled.
    let (rdma, atomic) = unsafe { (w.wr.rdma, w.wr.atomic) };
    let op = match w.opcode {
        IBV_WR_SEND => SendOp::Send,
        IBV_WR_SEND_WITH_IMM => SendOp::SendWithImm(u32::from_be(w.imm_data)),
        IBV_WR_RDMA_WRITE => SendOp::Write { remote_addr: rdma.remote_addr, rkey: rdma.rkey },
        IBV_WR_RDMA_WRITE_WITH_IMM => {
            SendOp::WriteWithImm { remote_addr: rdma.remote_addr, rkey: rdma.rkey, imm: u32::from_be(w.imm_data) }
        }
        IBV_WR_RDMA_READ if !uc => SendOp::Read { remote_addr: rdma.remote_addr, rkey: rdma.rkey },
        IBV_WR_ATOMIC_CMP_AND_SWP if !uc => SendOp::CompareSwap {
            remote_addr: atomic.remote_addr,
            rkey: atomic.rkey,
            compare: atomic.compare_add,
            swap: atomic.swap,
        },
        IBV_WR_ATOMIC_FETCH_AND_ADD if !uc => {
            SendOp::FetchAdd { remote_addr: atomic.remote_addr, rkey: atomic.rkey, add: atomic.compare_add }
        }
        // The union's invalidate_rkey (host order).
        IBV_WR_SEND_WITH_INV if !uc => SendOp::SendWithInv { rkey: w.imm_data },
        IBV_WR_LOCAL_INV => SendOp::LocalInv { rkey: w.imm_data },
        IBV_WR_BIND_MW => {
            // SAFETY: the opcode says the bind_mw member is filled.
            let b = unsafe { w.bind_mw_tso.bind_mw };
            if b.mw.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: the program's window and region (ours), read now.
            let (mw_rkey, mr_lkey) =
                unsafe { ((*b.mw).rkey, if b.bind_info.mr.is_null() { 0 } else { (*b.bind_info.mr).lkey }) };
            let i = b.bind_info;
            let bind = MwBind { mr_lkey, addr: i.addr, length: i.length, access: Access(i.mw_access_flags) };
            SendOp::BindMw { mw_rkey, new_rkey: b.rkey, bind }
        }
        _ => return Err(libc::EINVAL),
    };
    if matches!(op, SendOp::LocalInv { .. } | SendOp::BindMw { .. }) {
        // Local operations carry no data: their SGEs are not looked at (rxe's provider).
        return Ok(SendWr {
            wr_id: w.wr_id,
            op,
            sg_list: Vec::new(),
            signaled: sq_sig_all || w.send_flags & IBV_SEND_SIGNALED != 0,
            solicited: false,
            inline: None,
        });
    }
    let sg_list = sges(w.sg_list, n as usize, lkey_ok);
    let is_atomic = matches!(op, SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. });
    if is_atomic {
        let total: u64 = sg_list.iter().map(|s| u64::from(s.length)).sum();
        // rxe validate_send_wr: an atomic's buffer is 8 bytes, 8-byte aligned at the peer.
        if sg_list.len() != 1 || total != 8 || atomic.remote_addr % 8 != 0 {
            return Err(libc::EINVAL);
        }
    }
    let mut inline = None;
    if w.send_flags & IBV_SEND_INLINE != 0 && !matches!(op, SendOp::Read { .. }) && !is_atomic {
        let total: u64 = sg_list.iter().map(|s| u64::from(s.length)).sum();
        if total > u64::from(cap.max_inline_data) {
            return Err(libc::EINVAL);
        }
        let mut data = Vec::with_capacity(total as usize);
        for s in &sg_list {
            if s.length > 0 {
                // SAFETY: inline data is the program's memory at post time (no region).
                data.extend_from_slice(unsafe { std::slice::from_raw_parts(s.addr as *const u8, s.length as usize) });
            }
        }
        inline = Some(data);
    }
    Ok(SendWr {
        wr_id: w.wr_id,
        op,
        sg_list,
        signaled: sq_sig_all || w.send_flags & IBV_SEND_SIGNALED != 0,
        solicited: w.send_flags & IBV_SEND_SOLICITED != 0,
        inline,
    })
}

/// The engine's SGEs for the caller's `n` elements at `list`; an lkey `lkey_ok` refuses becomes
/// 0, a key no region has (the engine completes with IBV_WC_LOC_PROT_ERR, as rxe).
fn sges(list: *const ibv_sge, n: usize, lkey_ok: &dyn Fn(u32) -> bool) -> Vec<Sge> {
    (0..n)
        .map(|i| {
            // SAFETY: the caller's list of n elements (checked non-NULL when n > 0).
            let s = unsafe { *list.add(i) };
            Sge { addr: s.addr, length: s.length, lkey: if lkey_ok(s.lkey) { s.lkey } else { 0 } }
        })
        .collect()
}

/// The engine's receive request for a C one.
pub fn recv_wr(w: &ibv_recv_wr, max_sge: u32, lkey_ok: &dyn Fn(u32) -> bool) -> Result<EngineRecvWr, PostError> {
    let n = w.num_sge;
    if n < 0 || n as u32 > max_sge.max(1) || (n > 0 && w.sg_list.is_null()) {
        return Err(libc::EINVAL);
    }
    let sg_list = sges(w.sg_list, n as usize, lkey_ok);
    Ok(EngineRecvWr { wr_id: w.wr_id, sg_list })
}

/// What posting needs of a connected QP's C object (verbs.rs builds it: this module does not
/// see the object).
#[derive(Debug, Clone, Copy)]
pub struct QpView {
    /// The engine's QPN.
    pub qpn: u32,
    /// `IBV_QPT_UC`.
    pub uc: bool,
    /// `IBV_QPT_XRC_SEND`: each send request names the remote XRC SRQ.
    pub xrc_send: bool,
    /// `IBV_QPT_XRC_RECV`: no send queue, no receive queue.
    pub xrc_recv: bool,
    /// The PD's address.
    pub pd: usize,
    /// Its capacities.
    pub cap: ibv_qp_cap,
    /// `sq_sig_all`.
    pub sq_sig_all: bool,
    /// Created on an SRQ (its receives are the SRQ's).
    pub has_srq: bool,
}

/// Post a list of send requests on a connected QP without waiting for the engine's thread.
///
/// # Safety
/// `wr` is the caller's list; `bad_wr` NULL or a slot.
pub unsafe fn post_send(
    rt: &Runtime,
    q: QpView,
    mirror: &Arc<QpMirror>,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    let uc = q.uc;
    let lkey_ok = lkey_in_pd(rt, q.pd);
    let mut batch = Vec::new();
    let mut cur = wr;
    let fail = |at: *mut ibv_send_wr, e: c_int| {
        if !bad_wr.is_null() {
            // SAFETY: the caller's slot.
            unsafe { *bad_wr = at };
        }
        e
    };
    let state = mirror.state.load(Ordering::Acquire);
    let held = mirror.sq_len.load(Ordering::Acquire) + mirror.sq_pending.load(Ordering::Acquire);
    if q.xrc_recv && !wr.is_null() {
        return fail(wr, libc::EINVAL); // an XRC target has no send queue
    }
    while !cur.is_null() {
        // SAFETY: the caller's work request.
        let w = unsafe { &*cur };
        if !matches!(state, IBV_QPS_RTS | IBV_QPS_SQD | IBV_QPS_ERR) {
            break;
        }
        if held + batch.len() as u32 >= q.cap.max_send_wr {
            break;
        }
        let Ok(srqn) = xrc_srqn(w, &q) else { break };
        match send_wr(w, uc, &q.cap, q.sq_sig_all, &lkey_ok) {
            Ok(s) => batch.push((s, srqn)),
            Err(_) => break,
        }
        cur = w.next;
    }
    drop(lkey_ok);
    // The ones before a refused request are posted (as the kernel's post_send does).
    let refused = cur;
    let rc = if refused.is_null() {
        0
    } else if !matches!(state, IBV_QPS_RTS | IBV_QPS_SQD | IBV_QPS_ERR) {
        fail(refused, libc::EINVAL)
    } else if held + batch.len() as u32 >= q.cap.max_send_wr {
        fail(refused, libc::ENOMEM)
    } else {
        fail(refused, libc::EINVAL)
    };
    submit(rt, q.qpn, mirror, batch);
    rc
}

/// The remote XRC SRQ a send request on an XRC initiator names (None on any other QP);
/// EINVAL past 24 bits, and on an XRC target, which has no send queue.
pub fn xrc_srqn(w: &ibv_send_wr, q: &QpView) -> Result<Option<u32>, PostError> {
    if q.xrc_recv {
        return Err(libc::EINVAL);
    }
    if !q.xrc_send {
        return Ok(None);
    }
    // SAFETY: an XRC initiator's requests fill the union's xrc member.
    let n = unsafe { w.qp_type.xrc.remote_srqn };
    if n > 0xff_ffff {
        return Err(libc::EINVAL);
    }
    Ok(Some(n))
}

/// Hand engine send requests to the engine's thread (counted as pending until it has them).
fn submit(rt: &Runtime, qpn: u32, mirror: &Arc<QpMirror>, batch: Vec<Queued>) {
    if batch.is_empty() {
        return;
    }
    mirror.sq_pending.fetch_add(batch.len() as u32, Ordering::AcqRel);
    rt.post(move |e| {
        for s in batch {
            e.post_conn_send(qpn, s);
        }
    });
}

/// Post engine send requests on a connected QP all together or not at all (`ibv_wr_complete`,
/// qp_ex.rs): EINVAL outside RTS, SQD and ERR, ENOSPC when the send queue cannot take them all
/// (rxe's provider: `check_qp_queue_full`).
pub fn post_batch(rt: &Runtime, q: QpView, mirror: &Arc<QpMirror>, batch: Vec<Queued>) -> c_int {
    let state = mirror.state.load(Ordering::Acquire);
    if !matches!(state, IBV_QPS_RTS | IBV_QPS_SQD | IBV_QPS_ERR) {
        return libc::EINVAL;
    }
    let held = mirror.sq_len.load(Ordering::Acquire) + mirror.sq_pending.load(Ordering::Acquire);
    if u64::from(held) + batch.len() as u64 > u64::from(q.cap.max_send_wr) {
        return libc::ENOSPC;
    }
    submit(rt, q.qpn, mirror, batch);
    0
}

/// Whether a key belongs to the PD at `pd` (see [`send_wr`]'s `lkey_ok`).
pub fn lkey_in_pd(rt: &Runtime, pd: usize) -> impl Fn(u32) -> bool + '_ {
    let table = rt.mrs.read().ok();
    move |k| table.as_ref().is_some_and(|t| t.in_pd(k, pd))
}

/// Post a list of receive requests on a connected QP (its own queue).
///
/// # Safety
/// As [`post_send`].
pub unsafe fn post_recv(
    rt: &Runtime,
    q: QpView,
    mirror: &Arc<QpMirror>,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    let lkey_ok = lkey_in_pd(rt, q.pd);
    let state = mirror.state.load(Ordering::Acquire);
    let held = mirror.rq_len.load(Ordering::Acquire) + mirror.rq_pending.load(Ordering::Acquire);
    let mut batch = Vec::new();
    let mut cur = wr;
    let mut err = 0;
    while !cur.is_null() {
        // SAFETY: the caller's work request.
        let w = unsafe { &*cur };
        // rxe_post_recv: EINVAL in RESET (and on a QP with an SRQ); the XRC types have no
        // receive queue.
        if state == IBV_QPS_RESET || q.has_srq || q.xrc_send || q.xrc_recv {
            err = libc::EINVAL;
            break;
        }
        if held + batch.len() as u32 >= q.cap.max_recv_wr.max(1) {
            err = libc::ENOMEM;
            break;
        }
        match recv_wr(w, q.cap.max_recv_sge, &lkey_ok) {
            Ok(r) => batch.push(r),
            Err(e) => {
                err = e;
                break;
            }
        }
        cur = w.next;
    }
    drop(lkey_ok);
    if err != 0 && !bad_wr.is_null() {
        // SAFETY: the caller's slot.
        unsafe { *bad_wr = cur };
    }
    if !batch.is_empty() {
        mirror.rq_pending.fetch_add(batch.len() as u32, Ordering::AcqRel);
        let (qpn, m) = (q.qpn, mirror.clone());
        rt.post(move |e| {
            for r in batch {
                let (wr_id, refused) = (r.wr_id, e.d.stack.rc_mut().post_recv(qpn, r).is_err());
                m.rq_pending.fetch_sub(1, Ordering::AcqRel);
                if refused {
                    if let Some(cq) = e.conn_qps.get(&qpn).and_then(|l| l.recv_cq.as_ref()) {
                        let mut c =
                            ibv_wc { wr_id, status: IBV_WC_LOC_QP_OP_ERR, opcode: IBV_WC_RECV, ..Default::default() };
                        c.qp_num = qpn;
                        cq.push(c);
                    }
                }
            }
        });
    }
    err
}

/// Unlink a connected QP from the engine's thread (before its object is freed).
pub fn unlink(e: &mut Engine, qpn: u32) {
    e.conn_qps.remove(&qpn);
    let _ = e.d.stack.rc_mut().destroy_qp(qpn);
}

// ------------------------------------------------------------------------------------------
// SRQs

/// A shared receive queue.
#[repr(C)]
pub struct Srq {
    /// What the program sees.
    pub c: ibv_srq,
    /// The engine's SRQ number.
    pub srqn: u32,
    /// The PD's address.
    pub pd: usize,
    /// Its most SGEs per receive.
    pub max_sge: u32,
    /// An XRC SRQ's domain (`IBV_SRQT_XRC`); None for a basic SRQ.
    pub xrcd: Option<u32>,
    /// The use it holds of the domain handle it was created through (XRC only).
    pub xrcd_use: Option<crate::xrcd::HandleUse>,
}

/// What makes an SRQ an XRC SRQ: its domain, the CQ its receives complete on, and the use of
/// the handle it is created through.
pub struct XrcSrq {
    /// The engine's XRC domain.
    pub xrcd: u32,
    /// The CQ (`ibv_srq_init_attr_ex.cq`).
    pub cq: Arc<crate::queues::CqShared>,
    /// The handle's use.
    pub handle: crate::xrcd::HandleUse,
}

/// A new SRQ (basic, or XRC with `xrc`): EINVAL for a depth of 0 or past rxe's, more SGEs
/// than rxe's, or a limit past the depth (rxe_srq_chk_init); `attr.max_sge` is given back.
pub(crate) fn new_srq(
    pd: *mut ibv_pd,
    srq_context: *mut core::ffi::c_void,
    attr: &mut ibv_srq_attr,
    xrc: Option<XrcSrq>,
) -> Result<*mut Srq, i32> {
    let (max_wr, max_sge, limit) = (attr.max_wr, attr.max_sge, attr.srq_limit);
    if max_wr == 0 || max_wr > MAX_SRQ_WR || max_sge > roce_cm::rc::srq::MAX_SRQ_SGE || limit > max_wr {
        return Err(libc::EINVAL);
    }
    let rt = crate::runtime::runtime()?;
    let xrcd = xrc.as_ref().map(|x| x.xrcd);
    let (cq, xrcd_use) = match xrc {
        Some(x) => (Some(x.cq), Some(x.handle)),
        None => (None, None),
    };
    // SAFETY: a PD of ours (the callers checked it is not NULL).
    let pdn = unsafe { (*pd).handle };
    let srqn = rt
        .call(move |e| e.d.stack.rc_mut().create_srq_in(pdn, max_wr, max_sge.max(1), limit, xrcd))?
        .map_err(|e| e.value())?;
    // SAFETY: plain C data; zero is valid.
    let mut c: ibv_srq = unsafe { std::mem::zeroed() };
    // SAFETY: the PD's context.
    c.context = unsafe { (*pd).context };
    c.srq_context = srq_context;
    c.pd = pd;
    c.handle = srqn;
    let s = Box::into_raw(Box::new(Srq { c, srqn, pd: pd as usize, max_sge: max_sge.max(1), xrcd, xrcd_use }));
    // SAFETY: the SRQ just boxed.
    unsafe {
        libc::pthread_mutex_init(&mut (*s).c.mutex, std::ptr::null());
        libc::pthread_cond_init(&mut (*s).c.cond, std::ptr::null());
    }
    let ptr = s as usize;
    let _ = rt.call(move |e| {
        e.srqs.insert(srqn, SrqLink { srq_ptr: ptr, cq });
    });
    attr.max_sge = max_sge.max(1);
    Ok(s)
}

/// rxe's deepest SRQ (`RXE_MAX_SRQ_WR`).
pub const MAX_SRQ_WR: u32 = 0x4000;

/// `ibv_create_srq`: a basic SRQ ([`new_srq`]).
///
/// # Safety
/// `pd` is a PD of ours; `attr` points to an `ibv_srq_init_attr`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_srq(pd: *mut ibv_pd, attr: *mut ibv_srq_init_attr) -> *mut ibv_srq {
    crate::ffi::boundary("ibv_create_srq", std::ptr::null_mut(), || {
        if pd.is_null() || attr.is_null() {
            return crate::ffi::null_errno(libc::EINVAL);
        }
        // SAFETY: the caller's attributes.
        let a = unsafe { &mut *attr };
        match new_srq(pd, a.srq_context, &mut a.attr, None) {
            Ok(s) => s.cast(),
            Err(e) => crate::ffi::null_errno(e),
        }
    })
}

/// Our SRQ behind a program's pointer (None for NULL).
pub fn srq_of<'a>(srq: *mut ibv_srq) -> Option<&'a Srq> {
    // SAFETY: an Srq of ours, or NULL.
    (!srq.is_null()).then(|| unsafe { &*srq.cast::<Srq>() })
}

/// `ibv_modify_srq`: a new depth (IBV_SRQ_MAX_WR, keeping the receives posted), then the
/// limit (IBV_SRQ_LIMIT, arming the SRQ_LIMIT_REACHED event), in rxe_srq_from_attr's order.
///
/// # Safety
/// `srq` is ours; `attr` points to an `ibv_srq_attr`.
#[no_mangle]
pub unsafe extern "C" fn ibv_modify_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr, mask: c_int) -> c_int {
    crate::ffi::boundary("ibv_modify_srq", libc::EIO, || {
        let Some(s) = srq_of(srq) else { return libc::EINVAL };
        if attr.is_null() || mask & !(IBV_SRQ_LIMIT | IBV_SRQ_MAX_WR) != 0 {
            return libc::EINVAL;
        }
        let Some(rt) = crate::runtime::started() else { return libc::EINVAL };
        // SAFETY: the caller's attributes.
        let (max_wr, limit) = unsafe { ((*attr).max_wr, (*attr).srq_limit) };
        let srqn = s.srqn;
        let r = rt.call(move |e| -> Result<(), roce_cm::Errno> {
            let rc = e.d.stack.rc_mut();
            if mask & IBV_SRQ_MAX_WR != 0 {
                rc.resize_srq(srqn, max_wr)?;
            }
            if mask & IBV_SRQ_LIMIT != 0 {
                rc.modify_srq(srqn, limit)?;
            }
            Ok(())
        });
        match r {
            Ok(Ok(())) => 0,
            Ok(Err(e)) => e.value(),
            Err(e) => e,
        }
    })
}

/// `ibv_query_srq`.
///
/// # Safety
/// `srq` is ours; `attr` points to an `ibv_srq_attr`.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int {
    crate::ffi::boundary("ibv_query_srq", libc::EIO, || {
        let Some(s) = srq_of(srq) else { return libc::EINVAL };
        let Some(rt) = crate::runtime::started() else { return libc::EINVAL };
        if attr.is_null() {
            return libc::EINVAL;
        }
        let srqn = s.srqn;
        match rt.call(move |e| e.d.stack.rc().query_srq(srqn)) {
            Ok(Some(q)) => {
                // SAFETY: the caller's struct.
                unsafe { *attr = ibv_srq_attr { max_wr: q.max_wr, max_sge: q.max_sge, srq_limit: q.srq_limit } };
                0
            }
            _ => libc::EINVAL,
        }
    })
}

/// `ibv_destroy_srq`: EBUSY while a QP uses it.
///
/// # Safety
/// `srq` is ours; not used after this.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int {
    crate::ffi::boundary("ibv_destroy_srq", libc::EIO, || {
        let Some(s) = srq_of(srq) else { return libc::EINVAL };
        let srqn = s.srqn;
        if let Some(rt) = crate::runtime::started() {
            let r = rt.call(move |e| {
                let r = e.d.stack.rc_mut().destroy_srq(srqn);
                if r.is_ok() {
                    e.srqs.remove(&srqn);
                }
                r
            });
            match r {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return e.value(),
                Err(e) => return e,
            }
        }
        // SAFETY: an Srq boxed by ibv_create_srq; not used after this.
        unsafe { drop(Box::from_raw(srq.cast::<Srq>())) };
        0
    })
}

/// `ibv_post_srq_recv` (through `ops.post_srq_recv`): each request reaches the engine's SRQ
/// before the call returns (ENOMEM when it is full, EINVAL for too many SGEs).
///
/// # Safety
/// `srq` is ours; `wr` a list of work requests; `bad_wr` NULL or a slot.
pub unsafe extern "C" fn post_srq_recv(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    crate::ffi::boundary("ibv_post_srq_recv", libc::EIO, || {
        let Some(s) = srq_of(srq) else { return libc::EINVAL };
        let Ok(rt) = crate::runtime::runtime() else { return libc::ENODEV };
        let lkey_ok = lkey_in_pd(rt, s.pd);
        let mut batch = Vec::new();
        let mut cur = wr;
        while !cur.is_null() {
            // SAFETY: the caller's work request.
            let w = unsafe { &*cur };
            match recv_wr(w, s.max_sge, &lkey_ok) {
                Ok(r) => batch.push((cur as usize, r)),
                Err(e) => {
                    if !bad_wr.is_null() {
                        // SAFETY: the caller's slot.
                        unsafe { *bad_wr = cur };
                    }
                    return e;
                }
            }
            cur = w.next;
        }
        drop(lkey_ok);
        let srqn = s.srqn;
        let r = rt.call(move |e| {
            for (at, r) in batch {
                if let Err(er) = e.d.stack.rc_mut().post_srq_recv(srqn, r) {
                    return Err((at, er.value()));
                }
            }
            Ok(())
        });
        match r {
            Ok(Ok(())) => 0,
            Ok(Err((at, e))) => {
                if !bad_wr.is_null() {
                    // SAFETY: the caller's slot.
                    unsafe { *bad_wr = at as *mut ibv_recv_wr };
                }
                e
            }
            Err(e) => e,
        }
    })
}
