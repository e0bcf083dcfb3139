//! Shared receive queues: one queue of receives that several QPs (RC and UC) take from, its
//! limit event and the asynchronous events [rxe_srq.c, rxe_resp.c get_srq_wqe; verbs.c
//! ib_destroy_srq_user; ibv_create_srq(3), ibv_modify_srq(3)].

use std::collections::VecDeque;

use super::{Ctx, Rc, RcQp, RecvWr, WcOpcode, WcStatus};
use crate::Errno;

/// Most receives an SRQ holds (the same bound as a QP's queues here).
pub const MAX_SRQ_WR: u32 = 1 << 15;
/// Most SGEs a receive on an SRQ may have [rxe_param.h RXE_MAX_SRQ_SGE].
pub const MAX_SRQ_SGE: u32 = 27;

/// `struct ibv_srq_attr`, as `ibv_query_srq` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrqAttr {
    /// Receives the queue holds.
    pub max_wr: u32,
    /// SGEs a receive may have.
    pub max_sge: u32,
    /// The armed limit; 0 when not armed (also after the limit event fired).
    pub srq_limit: u32,
}

/// An asynchronous event (`struct ibv_async_event`, the kinds this engine raises), read
/// with `Rc::poll_async_event` / `Stack::poll_async_event` as `ibv_get_async_event` reads
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsyncEvent {
    /// `IBV_EVENT_SRQ_LIMIT_REACHED` for the SRQ with this number: fewer receives than the
    /// armed limit are left; the SRQ is disarmed.
    SrqLimitReached(u32),
}

/// One SRQ.
#[derive(Debug, Clone)]
pub(crate) struct Srq {
    pub max_wr: u32,
    pub max_sge: u32,
    /// Armed limit, 0 = disarmed [rxe srq->limit].
    pub limit: u32,
    pub rq: VecDeque<RecvWr>,
    /// QPs using it [ib_srq.usecnt].
    pub usecnt: u32,
    /// The XRC domain of an XRC SRQ (`IBV_SRQT_XRC`), whose targets' messages it receives.
    pub xrcd: Option<u32>,
    /// Its protection domain: an XRC target's requests for it are checked against this PD.
    pub pd: u32,
}

impl Rc {
    /// `ibv_create_srq(max_wr, max_sge, srq_limit)`: the SRQ's number. A non-zero
    /// `srq_limit` arms it at once, as rxe_srq_from_init sets `srq->limit` from the init
    /// attributes. EINVAL: `max_wr` 0 or above `MAX_SRQ_WR`, `max_sge` above
    /// `MAX_SRQ_SGE`, a limit above `max_wr` (rxe_srq_chk_attr).
    /// The SRQ is in protection domain 0 (the `roce` tools' one; [`Rc::create_srq_in`]).
    pub fn create_srq(&mut self, max_wr: u32, max_sge: u32, srq_limit: u32) -> Result<u32, Errno> {
        self.create_srq_in(0, max_wr, max_sge, srq_limit, None)
    }

    /// `ibv_create_srq(pd, …)` or `ibv_create_srq_ex`: [`Rc::create_srq`] in protection domain
    /// `pd`, or with `xrcd` [`Rc::create_srq_xrc`] in it.
    pub fn create_srq_in(
        &mut self,
        pd: u32,
        max_wr: u32,
        max_sge: u32,
        srq_limit: u32,
        xrcd: Option<u32>,
    ) -> Result<u32, Errno> {
        if xrcd.is_some_and(|d| !self.xrcds.contains_key(&d)) {
            return Err(Errno::EINVAL);
        }
        if max_wr == 0 || max_wr > MAX_SRQ_WR || max_sge > MAX_SRQ_SGE || srq_limit > max_wr {
            return Err(Errno::EINVAL);
        }
        self.next_srqn += 1;
        let n = self.next_srqn;
        let srq = Srq { max_wr, max_sge: max_sge.max(1), limit: srq_limit, rq: VecDeque::new(), usecnt: 0, xrcd, pd };
        self.srqs.insert(n, srq);
        if let Some(u) = xrcd.and_then(|d| self.xrcds.get_mut(&d)) {
            *u += 1;
        }
        Ok(n)
    }

    /// `ibv_alloc_xrcd` (`ibv_open_xrcd` without a file): a new XRC domain's number.
    pub fn alloc_xrcd(&mut self) -> u32 {
        self.next_xrcd += 1;
        self.xrcds.insert(self.next_xrcd, 0);
        self.next_xrcd
    }

    /// `ibv_close_xrcd`: EBUSY while an XRC target or XRC SRQ of it exists (ib_dealloc_xrcd's
    /// `usecnt`), EINVAL for no such domain.
    pub fn dealloc_xrcd(&mut self, xrcd: u32) -> Result<(), Errno> {
        match self.xrcds.get(&xrcd) {
            None => Err(Errno::EINVAL),
            Some(0) => {
                self.xrcds.remove(&xrcd);
                Ok(())
            }
            Some(_) => Err(Errno::EBUSY),
        }
    }

    /// `ibv_create_srq_ex` of type `IBV_SRQT_XRC` in domain `xrcd`: [`Rc::create_srq`]'s
    /// checks, and EINVAL for no such domain. Its number is the one an initiator names in
    /// its XRCETH (`ibv_get_srq_num`); it holds a use of the domain until destroyed.
    pub fn create_srq_xrc(&mut self, max_wr: u32, max_sge: u32, srq_limit: u32, xrcd: u32) -> Result<u32, Errno> {
        self.create_srq_in(0, max_wr, max_sge, srq_limit, Some(xrcd))
    }

    /// The XRC domain of SRQ `srqn`, if it is an XRC SRQ.
    pub fn srq_xrcd(&self, srqn: u32) -> Option<u32> {
        self.srqs.get(&srqn).and_then(|s| s.xrcd)
    }

    /// `ibv_modify_srq` with `IBV_SRQ_LIMIT`: arm (or, with 0, disarm) the limit event.
    /// EINVAL: no such SRQ, a limit above `max_wr` (rxe_srq_chk_attr). As in rxe, arming
    /// below the current count does not fire by itself: the event comes when a receive is
    /// taken and fewer than the limit are left.
    pub fn modify_srq(&mut self, srqn: u32, srq_limit: u32) -> Result<(), Errno> {
        let srq = self.srqs.get_mut(&srqn).ok_or(Errno::EINVAL)?;
        if srq_limit > srq.max_wr {
            return Err(Errno::EINVAL);
        }
        srq.limit = srq_limit;
        Ok(())
    }

    /// `ibv_modify_srq` with `IBV_SRQ_MAX_WR`: resize the queue, keeping the receives posted
    /// (rxe_srq_from_attr, rxe_queue_resize). EINVAL: no such SRQ, 0 or above `MAX_SRQ_WR`,
    /// below the armed limit (rxe_srq_chk_attr), or below the receives now posted (the
    /// resized queue cannot hold them).
    pub fn resize_srq(&mut self, srqn: u32, max_wr: u32) -> Result<(), Errno> {
        let srq = self.srqs.get_mut(&srqn).ok_or(Errno::EINVAL)?;
        if max_wr == 0 || max_wr > MAX_SRQ_WR || (srq.limit > 0 && max_wr < srq.limit) {
            return Err(Errno::EINVAL);
        }
        if (max_wr as usize) < srq.rq.len() {
            return Err(Errno::EINVAL);
        }
        srq.max_wr = max_wr;
        Ok(())
    }

    /// `ibv_query_srq`.
    pub fn query_srq(&self, srqn: u32) -> Option<SrqAttr> {
        self.srqs.get(&srqn).map(|s| SrqAttr { max_wr: s.max_wr, max_sge: s.max_sge, srq_limit: s.limit })
    }

    /// Receives posted to an SRQ and not yet taken by a QP.
    pub fn srq_count(&self, srqn: u32) -> Option<usize> {
        self.srqs.get(&srqn).map(|s| s.rq.len())
    }

    /// `ibv_destroy_srq`: EBUSY while a QP uses it (ib_destroy_srq_user's `usecnt`), EINVAL
    /// for no such SRQ. The receives still posted are dropped with it, as in rxe.
    pub fn destroy_srq(&mut self, srqn: u32) -> Result<(), Errno> {
        let srq = self.srqs.get(&srqn).ok_or(Errno::EINVAL)?;
        if srq.usecnt > 0 {
            return Err(Errno::EBUSY);
        }
        if let Some(u) = srq.xrcd.and_then(|x| self.xrcds.get_mut(&x)) {
            *u -= 1;
        }
        self.srqs.remove(&srqn);
        Ok(())
    }

    /// `ibv_post_srq_recv`: EINVAL for no such SRQ or more SGEs than `max_sge`; ENOMEM when
    /// full [rxe_post_srq_recv, post_one_recv].
    pub fn post_srq_recv(&mut self, srqn: u32, wr: RecvWr) -> Result<(), Errno> {
        let srq = self.srqs.get_mut(&srqn).ok_or(Errno::EINVAL)?;
        if wr.sg_list.len() > srq.max_sge as usize {
            return Err(Errno::EINVAL);
        }
        if srq.rq.len() >= srq.max_wr as usize {
            return Err(Errno::ENOMEM);
        }
        srq.rq.push_back(wr);
        Ok(())
    }

    /// `ibv_get_async_event`: the next asynchronous event, oldest first.
    pub fn poll_async_event(&mut self) -> Option<AsyncEvent> {
        self.async_events.pop_front()
    }
}

impl RcQp {
    /// Make sure a receive is at the front of `rq` for the message starting now: the QP's
    /// own, or one taken from its SRQ. Taking one that leaves fewer than the armed limit
    /// raises `SrqLimitReached` once and disarms the SRQ [rxe_resp.c get_srq_wqe]. False:
    /// none posted (RC answers RNR NAK, UC drops the message).
    pub(crate) fn take_recv(&mut self, ctx: &mut Ctx<'_>) -> bool {
        if !self.rq.is_empty() {
            return true;
        }
        let Some(n) = self.srq else { return false };
        let Some(srq) = ctx.srqs.get_mut(&n) else { return false };
        let Some(wr) = srq.rq.pop_front() else { return false };
        ctx.c.srq_recv_taken += 1;
        if srq.limit > 0 && (srq.rq.len() as u32) < srq.limit {
            srq.limit = 0;
            ctx.events.push_back(AsyncEvent::SrqLimitReached(n));
        }
        self.rq.push_back(wr);
        true
    }

    /// A receive taken from the SRQ for a UC message that will not complete: it cannot go
    /// back, so it completes with REM_INV_REQ_ERR (rxe_resp.c do_class_d1e_error, class E).
    /// A QP's own receive stays at the front for the next message (class D1).
    pub(crate) fn release_recv(&mut self, ctx: &mut Ctx<'_>) {
        if self.srq.is_none() {
            return;
        }
        if let Some(r) = self.rq.pop_front() {
            let wc = self.recv_wc(r.wr_id, WcStatus::RemInvReqErr, WcOpcode::Recv, 0, None);
            ctx.cq.push_back(wc);
        }
    }
}
