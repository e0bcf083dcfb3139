//! The requester: turns send work requests into request packets, segmented to the path MTU,
//! and goes back to the oldest unacknowledged PSN when the completer asks for a retry
//! [rxe_req.c; IBA 9.7.4, 9.7.5]. A UC QP sends the UC opcodes without AckReq and completes
//! each request once its last packet is handed out (rxe_net.c rxe_xmit_packet: a non-RC
//! WQE is done after its last packet is sent).

use roce_wire::bth::{self, Opcode};
use roce_wire::ext::ExtHeaders;
use roce_wire::{atomic_eth, feth, ieth, immdt, reth};

use super::mr::Access;
use super::mr::MwError;
use super::{psn, Ctx, QpState, RcPacket, RcQp, SendOp, TransportService, WcStatus};

/// Packets sent without an ACK request before one is asked for [rxe RXE_MAX_PKT_PER_ACK].
pub(crate) const MAX_PKT_PER_ACK: u32 = 64;
/// rxe's bound on PSNs in flight before its requester waits [rxe RXE_MAX_UNACKED_PSNS]:
/// `Rc::set_max_unacked_psns` takes it for rxe's pacing; the engine's default is
/// [`crate::config::DEFAULT_MAX_UNACKED_PSNS`].
pub const RXE_MAX_UNACKED_PSNS: u32 = 128;
/// The largest window: half the 24-bit PSN space, past which "later" is ambiguous.
pub const MAX_UNACKED_PSNS_LIMIT: u32 = 1 << 22;

impl RcQp {
    /// The next request packet of the send queue, if one may go now.
    pub(crate) fn next_request(&mut self, ctx: &mut Ctx<'_>) -> Option<RcPacket> {
        if !matches!(self.state, QpState::Rts | QpState::Sqd) || self.rnr_deadline.is_some() {
            return None;
        }
        // Local operations (window binds and invalidations) are done as the requester reaches
        // them, nothing on the wire [rxe_requester → rxe_do_local_ops]; they complete in
        // order. A refused one stops the requester: it fails once everything before it has
        // completed, and the QP goes to ERR.
        while let Some(w) = self.sq.get(self.req_idx) {
            if !w.wr.op.is_local() {
                break;
            }
            match w.local {
                None if self.state == QpState::Sqd => return None,
                None => {
                    let outcome = self.do_local(ctx, self.req_idx);
                    let w = &mut self.sq[self.req_idx];
                    (w.local, w.started, w.first_psn) = (Some(outcome), true, self.sq_psn);
                    if outcome != WcStatus::Success {
                        self.complete_done_locals(ctx);
                        return None;
                    }
                }
                Some(WcStatus::Success) => {}
                Some(_) => return None,
            }
            self.req_idx += 1;
        }
        self.complete_done_locals(ctx);
        let idx = self.req_idx;
        let w = self.sq.get(idx)?;
        if self.state == QpState::Sqd && !w.started {
            return None; // SQD starts nothing new
        }
        if psn::diff(self.sq_psn, self.comp_psn) >= ctx.max_unacked_psns {
            return None;
        }
        if w.wr.op.uses_rd_atomic() && w.next_pkt == 0 {
            let outstanding = self.sq.iter().take(idx).filter(|w| w.wr.op.uses_rd_atomic()).count();
            if outstanding >= usize::from(self.attr.max_rd_atomic.max(1)) {
                return None;
            }
        }
        if !w.started {
            let need = if w.wr.op.is_read_or_atomic() { Access::LOCAL_WRITE } else { Access::NONE };
            if w.wr.inline.is_none() && ctx.mrs.check_sges(&w.wr.sg_list, need).is_err() {
                // Completions stay in order: fail it once everything before it completed.
                if idx == 0 {
                    self.fail_front(ctx, WcStatus::LocProtErr);
                }
                return None;
            }
            let sq_psn = self.sq_psn;
            let w = &mut self.sq[idx];
            w.first_psn = sq_psn;
            w.started = true;
        }
        let w = &self.sq[idx];
        let mtu = u64::from(self.attr.path_mtu);
        let k = w.next_pkt;
        let p = psn::add(w.first_psn, k);
        let first = k == 0;
        let last = k + 1 == w.npkts;
        let off = u64::from(k) * mtu;
        let mut ext = ExtHeaders::default();
        if self.service == TransportService::XrcIni {
            // Every XRC request names the target's SRQ, first of its headers (IBA table 38).
            ext.xrceth = Some(roce_wire::xrceth::Repr::new(self.sq[idx].xrc_srqn));
        }
        let mut payload = Vec::new();
        let mut payload_len = 0;
        let mut in_place = false;
        let (op, consumed) = match w.wr.op {
            SendOp::Send
            | SendOp::SendWithImm(_)
            | SendOp::SendWithInv { .. }
            | SendOp::Write { .. }
            | SendOp::WriteWithImm { .. } => {
                let n = (w.len - off).min(mtu) as usize;
                payload_len = n;
                let op = match (w.wr.op, first, last) {
                    (SendOp::SendWithInv { .. }, true, true) => Opcode::RcSendOnlyWithInvalidate,
                    (SendOp::SendWithInv { .. }, true, false) => Opcode::RcSendFirst,
                    (SendOp::SendWithInv { .. }, false, false) => Opcode::RcSendMiddle,
                    (SendOp::SendWithInv { .. }, false, true) => Opcode::RcSendLastWithInvalidate,
                    (SendOp::Send, true, true) => Opcode::RcSendOnly,
                    (SendOp::SendWithImm(_), true, true) => Opcode::RcSendOnlyWithImmediate,
                    (SendOp::Send | SendOp::SendWithImm(_), true, false) => Opcode::RcSendFirst,
                    (SendOp::Send | SendOp::SendWithImm(_), false, false) => Opcode::RcSendMiddle,
                    (SendOp::Send, false, true) => Opcode::RcSendLast,
                    (SendOp::SendWithImm(_), false, true) => Opcode::RcSendLastWithImmediate,
                    (SendOp::Write { .. }, true, true) => Opcode::RcRdmaWriteOnly,
                    (_, true, true) => Opcode::RcRdmaWriteOnlyWithImmediate,
                    (_, true, false) => Opcode::RcRdmaWriteFirst,
                    (_, false, false) => Opcode::RcRdmaWriteMiddle,
                    (SendOp::Write { .. }, false, true) => Opcode::RcRdmaWriteLast,
                    (_, false, true) => Opcode::RcRdmaWriteLastWithImmediate,
                };
                if let SendOp::Write { remote_addr, rkey } | SendOp::WriteWithImm { remote_addr, rkey, .. } = w.wr.op {
                    if first {
                        ext.reth = Some(reth::Repr { va: remote_addr, rkey, dma_len: w.len as u32 });
                    }
                }
                if let SendOp::SendWithImm(imm) | SendOp::WriteWithImm { imm, .. } = w.wr.op {
                    if last {
                        ext.immdt = Some(immdt::Repr { imm_data: imm });
                    }
                }
                if let SendOp::SendWithInv { rkey } = w.wr.op {
                    if last {
                        ext.ieth = Some(ieth::Repr { rkey });
                    }
                }
                // Straight into the frame when the caller gave its buffer (the headers are
                // known now), else into a payload buffer.
                let at = ctx.in_place.as_ref().and_then(|t| (t.header_len)(self.attr.dest, &ext));
                let inline = w.wr.inline.as_deref().map(|d| &d[off as usize..off as usize + n]);
                let gathered = match (ctx.in_place.as_mut(), at, inline) {
                    (Some(t), Some(at), Some(d)) if at + n <= t.buf.len() => {
                        in_place = true;
                        t.buf[at..at + n].copy_from_slice(d);
                        Ok(())
                    }
                    (Some(t), Some(at), None) if at + n <= t.buf.len() => {
                        in_place = true;
                        ctx.mrs.gather_into(&w.wr.sg_list, off, &mut t.buf[at..at + n])
                    }
                    (_, _, Some(d)) => {
                        payload = ctx.payload_buffer();
                        payload.extend_from_slice(d);
                        Ok(())
                    }
                    _ => {
                        payload = ctx.payload_buffer();
                        ctx.mrs.gather(&w.wr.sg_list, off, n, &mut payload)
                    }
                };
                if gathered.is_err() {
                    if idx == 0 {
                        self.fail_front(ctx, WcStatus::LocProtErr);
                    }
                    return None;
                }
                (op, 1)
            }
            SendOp::Read { remote_addr, rkey } => {
                // One request covers every response still missing: resumed at packet k after
                // a retry, at the matching offset [rxe req_retry].
                ext.reth = Some(reth::Repr { va: remote_addr.wrapping_add(off), rkey, dma_len: (w.len - off) as u32 });
                (Opcode::RcRdmaReadRequest, w.npkts - k)
            }
            SendOp::CompareSwap { remote_addr, rkey, compare, swap } => {
                ext.atomic_eth = Some(atomic_eth::Repr { va: remote_addr, rkey, swap_add: swap, compare });
                (Opcode::RcCompareSwap, 1)
            }
            SendOp::FetchAdd { remote_addr, rkey, add } => {
                ext.atomic_eth = Some(atomic_eth::Repr { va: remote_addr, rkey, swap_add: add, compare: 0 });
                (Opcode::RcFetchAdd, 1)
            }
            SendOp::AtomicWrite { remote_addr, rkey, data } => {
                // RETH with the 8 bytes' length, the bytes as the payload [rxe finish_packet].
                ext.reth = Some(reth::Repr { va: remote_addr, rkey, dma_len: 8 });
                payload = ctx.payload_buffer();
                payload.extend_from_slice(&data);
                payload_len = 8;
                (Opcode::RcAtomicWrite, 1)
            }
            SendOp::Flush { remote_addr, rkey, len, placement, level } => {
                // FETH then RETH, no payload (oA19-2) [rxe init_req_packet, feth_init].
                let bits = (u32::from(level.wire()) << 4 & 0x30) | u32::from(placement & 0x0f);
                ext.feth = Some(feth::Repr { bits });
                ext.reth = Some(reth::Repr { va: remote_addr, rkey, dma_len: len });
                (Opcode::RcFlush, 1)
            }
            SendOp::BindMw { .. } | SendOp::LocalInv { .. } => return None, // done above
        };
        let solicited = w.wr.solicited && last;
        let end = k + consumed == w.npkts;
        let uc = self.service == TransportService::Uc;
        // UC opcodes are the RC ones with transport bits 001 (IBA table 38).
        let op = if uc { Opcode::from(u8::from(op) | 0x20) } else { self.service.xrc_opcode(op) };
        let mut b = bth::Repr::new(op, self.attr.dest_qpn, p);
        b.pkey = self.attr.pkey;
        b.solicited = solicited;
        b.pad_count = ((4 - payload_len % 4) % 4) as u8;
        if uc {
            // No ACKs on UC [rxe_req.c init_req_packet: AckReq only for RC]; the request is
            // done once its last packet is out, the PSN window never fills.
            self.sq_psn = psn::add(p, 1);
            self.comp_psn = self.sq_psn;
            self.hw_psn = self.sq_psn;
            self.sq[idx].next_pkt += 1;
            if end {
                self.req_idx += 1;
                self.complete_front(ctx);
            }
            return Some(self.request_packet(b, ext, payload, in_place.then_some(payload_len)));
        }
        self.noack_pkts += 1;
        // The packet that fills the send window asks for the ACK that reopens it (rxe need
        // not: its window is two ACK intervals, so an AckReq is always in flight by then).
        let fills_window = psn::diff(psn::add(p, consumed), self.comp_psn) >= ctx.max_unacked_psns;
        b.ack_req = end || w.wr.op.is_read_or_atomic() || self.noack_pkts >= MAX_PKT_PER_ACK || fills_window;
        if b.ack_req {
            self.noack_pkts = 0;
        }
        let w = &mut self.sq[idx];
        w.next_pkt += consumed;
        if end {
            self.req_idx += 1;
        }
        self.sq_psn = psn::add(p, consumed);
        if psn::gt(self.sq_psn, self.hw_psn) {
            self.hw_psn = self.sq_psn;
        }
        if self.ack_deadline.is_none() {
            self.ack_deadline = super::ack_timeout(self.attr.timeout).map(|d| ctx.now + d);
        }
        Some(self.request_packet(b, ext, payload, in_place.then_some(payload_len)))
    }

    /// Do the local operation at `idx`: its completion status [rxe_do_local_ops: a refused
    /// bind IBV_WC_MW_BIND_ERR, a refused invalidation IBV_WC_LOC_QP_OP_ERR].
    fn do_local(&mut self, ctx: &mut Ctx<'_>, idx: usize) -> WcStatus {
        match self.sq[idx].wr.op {
            SendOp::BindMw { mw_rkey, new_rkey, bind } => {
                match ctx.mrs.bind_mw(self.remote_accessor(ctx.srqs), mw_rkey, new_rkey, &bind) {
                    Ok(_) => WcStatus::Success,
                    Err(MwError::Invalid | MwError::NotSupported) => WcStatus::MwBindErr,
                }
            }
            SendOp::LocalInv { rkey } => match ctx.mrs.invalidate(rkey) {
                Ok(()) => WcStatus::Success,
                Err(_) => WcStatus::LocQpOpErr,
            },
            _ => WcStatus::Success,
        }
    }

    /// Complete the local operations done at the front of the send queue (in order: once
    /// everything before them completed); a refused one ends the QP.
    pub(crate) fn complete_done_locals(&mut self, ctx: &mut Ctx<'_>) {
        while let Some(w) = self.sq.front() {
            match (w.wr.op.is_local(), w.local) {
                (true, Some(WcStatus::Success)) => {
                    let w = self.sq.pop_front().expect("front");
                    self.req_idx = self.req_idx.saturating_sub(1);
                    if w.wr.signaled {
                        ctx.cq.push_back(self.wc(&w, WcStatus::Success));
                    }
                }
                (true, Some(status)) => return self.fail_front(ctx, status),
                _ => return,
            }
        }
    }

    fn request_packet(&self, b: bth::Repr, ext: ExtHeaders, payload: Vec<u8>, in_place: Option<usize>) -> RcPacket {
        RcPacket { payload_in_place: in_place, ..self.packet(b, ext, payload) }
    }

    /// Go back to the oldest unacknowledged PSN: the oldest request resumes at its first
    /// unacknowledged packet, the later ones start over with the PSNs they had (PSNs are
    /// handed out in order, so they get the same ones again) [rxe req_retry].
    pub(crate) fn rewind(&mut self) {
        let comp = self.comp_psn;
        for (i, w) in self.sq.iter_mut().enumerate() {
            if !w.started {
                break;
            }
            if w.wr.op.is_local() {
                continue; // done once, not again
            }
            if i == 0 && !w.wr.op.is_atomic() && psn::ge(comp, w.first_psn) {
                w.next_pkt = psn::diff(comp, w.first_psn).min(w.npkts - 1);
            } else {
                w.next_pkt = 0;
            }
        }
        self.req_idx = 0;
        self.sq_psn = comp;
        self.noack_pkts = 0;
    }

    /// A retry (local ACK timeout, PSN sequence NAK, a missing response): counted against
    /// `retry_cnt`; when none is left the oldest request ends in `RetryExcErr`. A retry
    /// already under way is not restarted except by a timeout [rxe comp COMPST_ERROR_RETRY].
    pub(crate) fn retry(&mut self, ctx: &mut Ctx<'_>, timeout: bool) {
        if self.sq.front().is_none_or(|w| !w.started) {
            return;
        }
        if self.started_retry && !timeout {
            return;
        }
        if self.retry_left == 0 {
            ctx.c.retry_exceeded_err += 1;
            self.fail_front(ctx, WcStatus::RetryExcErr);
            return;
        }
        self.retry_left -= 1;
        ctx.c.completer_retry_err += 1;
        ctx.c.retransmitted_pkts += u64::from(psn::diff(self.sq_psn, self.comp_psn));
        self.rewind();
        self.started_retry = true;
        self.ack_deadline = None;
    }
}
