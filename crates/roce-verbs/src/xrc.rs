//! XRC SRQs and target QPs through the verbs (issue 37 item 2): `ibv_create_srq_ex` with
//! `IBV_SRQT_XRC`, `ibv_get_srq_num`, and `ibv_create_qp_ex` of `IBV_QPT_XRC_RECV` in a domain
//! (xrcd.rs has the domains). The initiators (`IBV_QPT_XRC_SEND`) are connected QPs like RC's
//! (verbs.rs, conn.rs), each send request naming the remote SRQ in
//! `wr.qp_type.xrc.remote_srqn`. A receive taken from an XRC SRQ completes on the SRQ's CQ
//! (conn.rs `deliver_completions`).

use core::ffi::c_int;

use roce_cm::rc::{QpCap, QpInit, TransportService};

use crate::abi::*;
use crate::ffi::{boundary, null_errno, say_once};
use crate::verbs::Qp;
use crate::xrcd::{xrcdn_of, HandleUse};

/// `verbs_context.create_srq_ex` (the `ibv_create_srq_ex` inline, for what it does not send to
/// `ibv_create_srq`): a basic SRQ, or an XRC SRQ, which needs its PD, domain and CQ
/// (ib_uverbs_create_xsrq). Tag-matching SRQs: EOPNOTSUPP, as rxe's provider answers.
///
/// # Safety
/// `attr` points to an `ibv_srq_init_attr_ex` whose objects are ours.
pub unsafe extern "C" fn create_srq_ex(_ctx: *mut ibv_context, attr: *mut ibv_srq_init_attr_ex) -> *mut ibv_srq {
    boundary("ibv_create_srq_ex", std::ptr::null_mut(), || {
        if attr.is_null() {
            return null_errno(libc::EINVAL);
        }
        // SAFETY: the caller's attributes.
        let a = unsafe { &mut *attr };
        if a.comp_mask >= IBV_SRQ_INIT_ATTR_RESERVED {
            return null_errno(libc::EOPNOTSUPP);
        }
        let srq_type = if a.comp_mask & IBV_SRQ_INIT_ATTR_TYPE != 0 { a.srq_type } else { IBV_SRQT_BASIC };
        if a.comp_mask & IBV_SRQ_INIT_ATTR_PD == 0 || a.pd.is_null() {
            return null_errno(libc::EINVAL);
        }
        let xrc = match srq_type {
            IBV_SRQT_BASIC => None,
            IBV_SRQT_XRC => {
                let need = IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
                match (a.comp_mask & need == need, xrcdn_of(a.xrcd), crate::verbs::cq_shared(a.cq)) {
                    (true, Some(xrcd), Some(cq)) => {
                        Some(crate::conn::XrcSrq { xrcd, cq, handle: HandleUse::take(a.xrcd) })
                    }
                    _ => return null_errno(libc::EINVAL),
                }
            }
            t => {
                say_once(
                    "ibv_create_srq_ex",
                    &format!("roce: ibv_create_srq_ex: SRQ type {t} is not supported (basic and XRC are): EOPNOTSUPP"),
                );
                return null_errno(libc::EOPNOTSUPP);
            }
        };
        match crate::conn::new_srq(a.pd, a.srq_context, &mut a.attr, xrc) {
            Ok(s) => s.cast(),
            Err(e) => null_errno(e),
        }
    })
}

/// `verbs_context.get_srq_num` (the `ibv_get_srq_num` inline): the number an XRCETH names.
///
/// # Safety
/// `srq` is ours; `srq_num` points to a u32.
pub unsafe extern "C" fn get_srq_num(srq: *mut ibv_srq, srq_num: *mut u32) -> c_int {
    boundary("ibv_get_srq_num", libc::EIO, || {
        match crate::conn::srq_of(srq) {
            Some(s) if !srq_num.is_null() => {
                // SAFETY: the caller's u32.
                unsafe { *srq_num = s.srqn };
                0
            }
            _ => libc::EINVAL,
        }
    })
}

/// An XRC target QP (`ibv_create_qp_ex` of `IBV_QPT_XRC_RECV`): in the domain `xrcd` names,
/// with no PD, CQ, SRQ or queue of its own (ib_uverbs's create_qp takes only the domain).
pub fn create_target_qp(a: &mut ibv_qp_init_attr_ex) -> Result<*mut Qp, c_int> {
    if a.comp_mask & IBV_QP_INIT_ATTR_XRCD == 0 {
        return Err(libc::EINVAL);
    }
    let qp = target_qp(a.xrcd, a.qp_context, None)?;
    a.cap = ibv_qp_cap::default();
    Ok(qp)
}

/// An XRC target QP in the domain of handle `xrcd` (EINVAL for NULL), for the CM id `id` if
/// any (`rdma_create_qp` of an XRC_RECV id).
pub(crate) fn target_qp(
    xrcd: *mut ibv_xrcd,
    qp_context: *mut core::ffi::c_void,
    id: Option<roce_cm::CmId>,
) -> Result<*mut Qp, c_int> {
    let Some(xrcdn) = xrcdn_of(xrcd) else { return Err(libc::EINVAL) };
    // SAFETY: an Xrcd of ours (checked above).
    let ctx = unsafe { (*xrcd).context };
    let mut basic = ibv_qp_init_attr {
        qp_context,
        send_cq: std::ptr::null_mut(),
        recv_cq: std::ptr::null_mut(),
        srq: std::ptr::null_mut(),
        cap: ibv_qp_cap::default(),
        qp_type: IBV_QPT_XRC_RECV,
        sq_sig_all: 0,
    };
    let cap = ibv_qp_cap::default();
    let service = TransportService::XrcTgt { xrcd: xrcdn };
    // No PD of its own: each request is checked against its XRC SRQ's.
    let init = QpInit { service, cap: QpCap { max_send_wr: 1, max_recv_wr: 1 }, srq: None, pd: 0 };
    let qp = crate::verbs::link_conn_qp(ctx, std::ptr::null_mut(), &mut basic, cap, init, id)?;
    // SAFETY: the QP just made, not yet seen by the program.
    unsafe { (*qp).xrcd_use = Some(HandleUse::take(xrcd)) };
    Ok(qp)
}
