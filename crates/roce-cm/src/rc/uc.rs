//! Unreliable connected QPs: the responder side and the attributes a UC QP uses. UC carries
//! SEND and RDMA WRITE (with and without immediate) in the same FIRST/MIDDLE/LAST/ONLY
//! packets as RC, without ACKs or retransmission: a PSN gap or an error inside a message
//! makes the responder drop what it placed of that message and everything up to the next
//! FIRST or ONLY, which starts a new message at its own PSN [IBA 9.7.5.1.x class D1/E;
//! rxe_resp.c check_psn, check_op_seq, check_op_valid for IB_QPT_UC]. The requester side is
//! requester.rs (UC opcodes, no AckReq, completion once sent).

use roce_wire::bth::{self, Opcode};
use roce_wire::ext::ExtHeaders;

use super::mr::{Access, MrError};
use super::responder::{data_length_ok, ends_message, starts_message};
use super::{Ctx, InMsg, QpAttr, QpState, RcQp, WcOpcode, WcStatus};
use crate::rc::psn;

/// Why a UC responder is dropping packets until the next FIRST/ONLY; each dropped packet
/// is counted under the reason of its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UcDrop {
    /// A PSN gap (lost, duplicated or reordered packets).
    PsnGap,
    /// No receive posted for a SEND or WRITE with immediate.
    NoRecv,
    /// An invalid packet: out of sequence, no REMOTE_WRITE, a bad length, rkey or buffer.
    Invalid,
    /// The receive cannot take the SEND (too short, or an SGE the QP may not write): not a
    /// drop but a local error that ends the QP.
    Recv(MrError),
}

/// What placing one UC packet needs besides the QP.
#[derive(Clone, Copy)]
struct UcPacket<'p> {
    ext: &'p ExtHeaders,
    payload: &'p [u8],
    /// FIRST or ONLY.
    starts: bool,
    /// LAST or ONLY.
    ends: bool,
    /// The BTH's Solicited Event bit.
    solicited: bool,
}

/// The RC opcode with the same position in its message (UC opcodes are the RC ones with
/// transport bits 001).
fn as_rc(op: Opcode) -> Opcode {
    Opcode::from(u8::from(op) & 0x1f)
}

impl RcQp {
    /// `ibv_modify_qp` of a UC QP: only the attributes qp_state_table lists for UC are
    /// taken (RTR: AV, path MTU, dest QPN, RQ PSN; RTS from RTR: SQ PSN; INIT and later:
    /// access flags, P_Key). Timeout, retry and RNR counts, RD/atomic depths and the RNR
    /// timer do not exist for UC and stay 0.
    pub(crate) fn modify_uc(&mut self, state: QpState, attr: &QpAttr) {
        match state {
            QpState::Reset => *self = RcQp::new(self.qpn, self.init(), uc_attr(&self.attr)),
            QpState::Init => {
                self.attr.access = attr.access;
                self.attr.pkey = attr.pkey;
            }
            QpState::Rtr => {
                let (sq_psn, access) = (self.attr.sq_psn, self.attr.access);
                self.attr = uc_attr(attr);
                self.attr.sq_psn = sq_psn;
                self.attr.access = access;
                self.rq_psn = attr.rq_psn;
            }
            QpState::Rts if self.state == QpState::Rtr => {
                self.attr.sq_psn = attr.sq_psn;
                self.sq_psn = attr.sq_psn;
                self.comp_psn = attr.sq_psn;
                self.hw_psn = attr.sq_psn;
            }
            _ => {}
        }
    }

    /// A UC request packet (opcodes 0x20–0x2B) in RTR, RTS or SQD.
    pub(crate) fn handle_uc_request(&mut self, ctx: &mut Ctx<'_>, b: &bth::Repr, ext: &ExtHeaders, payload: &[u8]) {
        use Opcode::*;
        let op = as_rc(b.opcode); // UC carries no READ or atomic: 0x20..0x2B map to SEND/WRITE
        let (starts, ends) = (starts_message(op), ends_message(op));
        // PSN: after a gap, or while dropping, only a FIRST/ONLY gets through; it starts a
        // new message at its own PSN [rxe check_psn, IB_QPT_UC].
        if self.uc_drop.is_some() || b.psn != self.rq_psn {
            if !starts {
                let why = self.uc_drop.unwrap_or(UcDrop::PsnGap);
                return self.uc_drop_message(ctx, why);
            }
            self.uc_drop = None;
            self.rq_psn = b.psn;
        }
        // Opcode sequence: a FIRST/ONLY while a message is open means its LAST was lost:
        // that message is abandoned and this one starts (IBA class D1).
        let continues = match self.cur {
            None => false,
            Some(InMsg::Send { .. }) => matches!(op, RcSendMiddle | RcSendLast | RcSendLastWithImmediate),
            Some(InMsg::Write { .. }) => {
                matches!(op, RcRdmaWriteMiddle | RcRdmaWriteLast | RcRdmaWriteLastWithImmediate)
            }
        };
        if !continues {
            if !starts {
                return self.uc_drop_message(ctx, UcDrop::Invalid);
            }
            self.abandon_partial(ctx);
        }
        let is_send = matches!(
            op,
            RcSendFirst | RcSendMiddle | RcSendLast | RcSendLastWithImmediate | RcSendOnly | RcSendOnlyWithImmediate
        );
        if !is_send && !self.attr.access.contains(Access::REMOTE_WRITE) {
            return self.uc_drop_message(ctx, UcDrop::Invalid); // rxe check_op_valid: drop_msg
        }
        if !data_length_ok(starts, ends, payload.len(), self.attr.path_mtu as usize) {
            return self.uc_drop_message(ctx, UcDrop::Invalid);
        }
        let pkt = UcPacket { ext, payload, starts, ends, solicited: b.solicited };
        let placed = if is_send { self.uc_send(ctx, pkt) } else { self.uc_write(ctx, pkt) };
        match placed {
            Ok(()) => {}
            Err(UcDrop::Recv(e)) => return self.uc_recv_error(ctx, e),
            Err(why) => return self.uc_drop_message(ctx, why),
        }
        self.rq_psn = psn::add(b.psn, 1);
        if ends {
            self.uc_cur_pkts = 0;
        } else {
            self.uc_cur_pkts += 1;
        }
    }

    fn uc_send(&mut self, ctx: &mut Ctx<'_>, pkt: UcPacket<'_>) -> Result<(), UcDrop> {
        let UcPacket { ext, payload, starts, ends, solicited } = pkt;
        if starts && !self.take_recv(ctx) {
            return Err(UcDrop::NoRecv);
        }
        let offset = match self.cur {
            Some(InMsg::Send { offset }) if !starts => offset,
            _ => 0,
        };
        let Some(r) = self.rq.front() else { return Err(UcDrop::Invalid) };
        ctx.mrs.scatter(&r.sg_list, offset, payload).map_err(UcDrop::Recv)?;
        let offset = offset + payload.len() as u64;
        if ends {
            self.cur = None;
            if let Some(r) = self.rq.pop_front() {
                let imm = ext.immdt.map(|i| i.imm_data);
                let mut wc = self.recv_wc(r.wr_id, WcStatus::Success, WcOpcode::Recv, offset, imm);
                wc.solicited = solicited;
                ctx.cq.push_back(wc);
            }
        } else {
            self.cur = Some(InMsg::Send { offset });
        }
        Ok(())
    }

    fn uc_write(&mut self, ctx: &mut Ctx<'_>, pkt: UcPacket<'_>) -> Result<(), UcDrop> {
        let UcPacket { ext, payload, starts, ends, solicited } = pkt;
        let (va, rkey, resid, total) = match (self.cur, ext.reth) {
            (Some(InMsg::Write { va, rkey, resid, total }), _) if !starts => (va, rkey, resid, total),
            (_, Some(r)) if starts => {
                let total = u64::from(r.dma_len);
                if total > 1 << 31 || (total > 0 && !self.reth_reachable(ctx, &r, Access::REMOTE_WRITE)) {
                    return Err(UcDrop::Invalid); // rkey violation, UC: class D/E drop
                }
                (r.va, r.rkey, total, total)
            }
            _ => return Err(UcDrop::Invalid),
        };
        let len = payload.len() as u64;
        if len > resid || (ends && len != resid) {
            return Err(UcDrop::Invalid);
        }
        let imm = ext.immdt.map(|i| i.imm_data);
        if imm.is_some() && !self.take_recv(ctx) {
            return Err(UcDrop::NoRecv);
        }
        if len > 0 && ctx.mrs.remote_write(self.remote_accessor(ctx.srqs), rkey, va, payload).is_err() {
            return Err(UcDrop::Invalid);
        }
        self.write_placed(
            ctx,
            ends,
            InMsg::Write { va: va.wrapping_add(len), rkey, resid: resid - len, total },
            imm,
            solicited,
        );
        Ok(())
    }

    /// Drop this packet and the rest of its message (counted under `why`), abandoning what
    /// was placed of it.
    fn uc_drop_message(&mut self, ctx: &mut Ctx<'_>, why: UcDrop) {
        self.abandon_partial(ctx);
        self.uc_drop = Some(why);
        match why {
            UcDrop::PsnGap => ctx.c.uc_drop_psn_gap += 1,
            UcDrop::NoRecv => ctx.c.uc_drop_no_recv += 1,
            UcDrop::Invalid | UcDrop::Recv(_) => ctx.c.uc_drop_invalid += 1,
        }
    }

    /// A SEND its receive cannot take: rxe's copy_data fails (EINVAL: too long, or an lkey
    /// lookup that fails), which send_data_in turns into RESPST_ERR_MALFORMED_WQE, a class A
    /// error for every QP type: the receive completes in error and the QP enters ERR (with
    /// LOC_LEN_ERR or LOC_PROT_ERR here, as this engine's RC responder reports them; rxe says
    /// LOC_QP_OP_ERR). UC sends no NAK. The packet counts as `uc_drop_invalid`.
    fn uc_recv_error(&mut self, ctx: &mut Ctx<'_>, e: MrError) {
        let status = if e == MrError::Length { WcStatus::LocLenErr } else { WcStatus::LocProtErr };
        ctx.c.uc_drop_invalid += 1;
        if self.cur.take().is_some() {
            ctx.c.uc_partial_discarded += 1;
            ctx.c.uc_partial_discarded_pkts += u64::from(self.uc_cur_pkts);
        }
        if let Some(r) = self.rq.pop_front() {
            ctx.cq.push_back(self.recv_wc(r.wr_id, status, WcOpcode::Recv, 0, None));
        }
        self.enter_error(ctx);
    }

    /// Abandon the message in progress, if any: nothing of it completes; its receive stays
    /// for the next message (or, taken from an SRQ, completes in error).
    fn abandon_partial(&mut self, ctx: &mut Ctx<'_>) {
        if self.cur.take().is_none() {
            return;
        }
        ctx.c.uc_partial_discarded += 1;
        ctx.c.uc_partial_discarded_pkts += u64::from(self.uc_cur_pkts);
        self.uc_cur_pkts = 0;
        self.release_recv(ctx);
    }
}

/// The attributes a UC QP keeps of `attr`: the RC-only ones zeroed.
pub(crate) fn uc_attr(attr: &QpAttr) -> QpAttr {
    QpAttr {
        timeout: 0,
        retry_cnt: 0,
        rnr_retry: 0,
        min_rnr_timer: 0,
        max_rd_atomic: 0,
        max_dest_rd_atomic: 0,
        ..*attr
    }
}
