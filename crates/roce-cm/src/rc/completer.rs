//! The completer: ACKs (coalesced: one ACK covers every PSN up to its own), NAKs, READ
//! responses and atomic ACKs retire send work requests in order [rxe_comp.c; IBA 9.7.5.1].

use roce_wire::bth::{self, Opcode};
use roce_wire::ext::ExtHeaders;

use super::{psn, Ctx, RcQp, SendOp, WcStatus, RNR_TIMER_US};

impl RcQp {
    /// Progress was made: fresh retry budgets and a restarted local ACK timer.
    fn progress(&mut self, ctx: &mut Ctx<'_>) {
        self.retry_left = self.attr.retry_cnt;
        self.rnr_left = self.attr.rnr_retry;
        self.started_retry = false;
        if psn::lt(self.sq_psn, self.comp_psn) {
            // Acknowledged beyond what a rewind has resent yet: skip ahead.
            self.rewind();
        }
        self.ack_deadline = if psn::lt(self.comp_psn, self.hw_psn) {
            super::ack_timeout(self.attr.timeout).map(|d| ctx.now + d)
        } else {
            None
        };
    }

    /// Retire the oldest request successfully.
    pub(crate) fn complete_front(&mut self, ctx: &mut Ctx<'_>) {
        if let Some(w) = self.sq.pop_front() {
            self.req_idx = self.req_idx.saturating_sub(1);
            self.comp_psn = psn::add(w.last_psn(), 1);
            if w.wr.signaled {
                ctx.cq.push_back(self.wc(&w, WcStatus::Success));
            }
            self.complete_done_locals(ctx);
        }
    }

    /// Everything up to and including `p` is acknowledged. Returns true when a READ or
    /// atomic before `p` never got its response (the responder has moved past it: retry).
    fn ack_upto(&mut self, ctx: &mut Ctx<'_>, p: u32) -> bool {
        let before = self.comp_psn;
        let mut need_retry = false;
        while let Some(w) = self.sq.front() {
            if !w.started || psn::lt(p, w.first_psn) {
                break;
            }
            if w.wr.op.is_read_or_atomic() {
                need_retry = psn::gt(p, w.last_psn());
                break;
            }
            if psn::ge(p, w.last_psn()) {
                self.complete_front(ctx);
            } else {
                let np = psn::add(p, 1);
                if psn::gt(np, self.comp_psn) {
                    self.comp_psn = np;
                }
                break;
            }
        }
        if self.comp_psn != before {
            self.progress(ctx);
        }
        need_retry
    }

    /// A response packet (ACK, NAK, READ response, atomic ACK) for this QP's requests.
    pub(crate) fn handle_response(&mut self, ctx: &mut Ctx<'_>, b: &bth::Repr, ext: &ExtHeaders, payload: &[u8]) {
        let p = b.psn;
        // Not for anything sent (a stale response from before a retry of a later request).
        if psn::ge(p, self.hw_psn) || self.sq.front().is_none_or(|w| !w.started) {
            ctx.c.duplicate_response += 1;
            return;
        }
        let syndrome = ext.aeth.map(|a| a.syndrome);
        match b.opcode {
            Opcode::RcAcknowledge => {
                let Some(s) = syndrome else { return };
                match s >> 5 {
                    0 => {
                        if psn::lt(p, self.comp_psn) {
                            ctx.c.duplicate_response += 1;
                        } else if self.ack_upto(ctx, p) {
                            self.retry(ctx, false);
                        }
                    }
                    1 => self.rnr_nak(ctx, p, s & 0x1f),
                    3 => self.nak(ctx, p, s & 0x1f),
                    _ => ctx.c.drop_bad_syndrome += 1, // reserved syndrome
                }
            }
            Opcode::RcAtomicAcknowledge => {
                if psn::lt(p, self.comp_psn) || syndrome.is_some_and(|s| s >> 5 != 0) {
                    ctx.c.duplicate_response += 1;
                    return;
                }
                if self.ack_upto(ctx, psn::sub(p, 1)) {
                    return self.retry(ctx, false);
                }
                let Some(w) = self.sq.front() else { return };
                if !w.wr.op.is_atomic() || p != w.first_psn {
                    ctx.c.duplicate_response += 1;
                    return;
                }
                let orig = ext.atomic_ack_eth.map(|a| a.orig).unwrap_or(0);
                let sges = w.wr.sg_list.clone();
                if ctx.mrs.scatter(&sges, 0, &orig.to_ne_bytes()).is_err() {
                    return self.fail_front(ctx, WcStatus::LocProtErr);
                }
                self.complete_front(ctx);
                self.progress(ctx);
            }
            Opcode::RcRdmaReadResponseFirst
            | Opcode::RcRdmaReadResponseMiddle
            | Opcode::RcRdmaReadResponseLast
            | Opcode::RcRdmaReadResponseOnly => self.read_response(ctx, b, syndrome, payload),
            _ => ctx.c.duplicate_response += 1,
        }
    }

    fn read_response(&mut self, ctx: &mut Ctx<'_>, b: &bth::Repr, syndrome: Option<u8>, payload: &[u8]) {
        let p = b.psn;
        if psn::lt(p, self.comp_psn) {
            ctx.c.duplicate_response += 1;
            return;
        }
        // A response implicitly acknowledges every earlier request.
        if self.ack_upto(ctx, psn::sub(p, 1)) {
            return self.retry(ctx, false);
        }
        let Some(w) = self.sq.front() else { return };
        if w.wr.op.is_placement() {
            return self.handle_placement_response(ctx, b, syndrome, payload);
        }
        let SendOp::Read { .. } = w.wr.op else {
            ctx.c.duplicate_response += 1;
            return;
        };
        if p != self.comp_psn {
            // An earlier response of this READ went missing.
            ctx.c.duplicate_response += 1;
            return self.retry(ctx, false);
        }
        let mtu = u64::from(self.attr.path_mtu);
        let k = psn::diff(p, w.first_psn);
        let is_last = k + 1 == w.npkts;
        let want = if is_last { w.len - u64::from(k) * mtu } else { mtu };
        let op_ok = match b.opcode {
            Opcode::RcRdmaReadResponseFirst | Opcode::RcRdmaReadResponseMiddle => !is_last,
            _ => is_last,
        };
        if !op_ok || payload.len() as u64 != want || syndrome.is_some_and(|s| s >> 5 != 0) {
            return self.fail_front(ctx, WcStatus::BadRespErr);
        }
        let sges = std::mem::take(&mut self.sq[0].wr.sg_list);
        let r = ctx.mrs.scatter(&sges, u64::from(k) * mtu, payload);
        self.sq[0].wr.sg_list = sges;
        if r.is_err() {
            return self.fail_front(ctx, WcStatus::LocProtErr);
        }
        self.comp_psn = psn::add(p, 1);
        if is_last {
            self.complete_front(ctx);
        }
        self.progress(ctx);
    }

    /// The answer to an ATOMIC WRITE or FLUSH at the front: an RDMA READ Response Only with
    /// no payload and an ACK syndrome [rxe_comp.c check_ack; rxe_resp.c
    /// send_read_response_ack]. (A later ACK completes it too, as it does a WRITE: nothing
    /// comes back but the acknowledgement.)
    fn handle_placement_response(&mut self, ctx: &mut Ctx<'_>, b: &bth::Repr, syndrome: Option<u8>, payload: &[u8]) {
        let Some(w) = self.sq.front() else { return };
        if b.psn != w.first_psn {
            ctx.c.duplicate_response += 1;
            return;
        }
        let ok =
            b.opcode == Opcode::RcRdmaReadResponseOnly && payload.is_empty() && syndrome.is_some_and(|s| s >> 5 == 0);
        if !ok {
            return self.fail_front(ctx, WcStatus::BadRespErr);
        }
        self.complete_front(ctx);
        self.progress(ctx);
    }

    fn rnr_nak(&mut self, ctx: &mut Ctx<'_>, p: u32, timer: u8) {
        if psn::lt(p, self.comp_psn) {
            ctx.c.duplicate_response += 1;
            return;
        }
        ctx.c.rcvd_rnr_err += 1;
        if self.ack_upto(ctx, psn::sub(p, 1)) {
            return self.retry(ctx, false);
        }
        if self.rnr_left == 0 {
            ctx.c.rnr_retry_exceeded_err += 1;
            return self.fail_front(ctx, WcStatus::RnrRetryExcErr);
        }
        if self.rnr_left != 7 {
            self.rnr_left -= 1;
        }
        // Wait the peer's timer, then resend from the refused request.
        self.comp_psn = p;
        self.ack_deadline = None;
        let us = u64::from(RNR_TIMER_US[usize::from(timer & 0x1f)]);
        self.rnr_deadline = Some(ctx.now + std::time::Duration::from_micros(us));
    }

    fn nak(&mut self, ctx: &mut Ctx<'_>, p: u32, code: u8) {
        if psn::lt(p, self.comp_psn) {
            ctx.c.duplicate_response += 1;
            return;
        }
        let retry = self.ack_upto(ctx, psn::sub(p, 1));
        let status = match code {
            0 => {
                ctx.c.rcvd_seq_err += 1;
                // Ignored while an RNR wait is on: the wait ends in its own rewind.
                if self.rnr_deadline.is_none() {
                    self.retry(ctx, false);
                }
                return;
            }
            1 | 4 => WcStatus::RemInvReqErr,
            2 => WcStatus::RemAccessErr,
            _ => WcStatus::RemOpErr,
        };
        if retry {
            return self.retry(ctx, false);
        }
        self.fail_front(ctx, status);
    }
}
