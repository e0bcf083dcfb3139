//! The responder: places SENDs in posted receives and RDMA WRITEs in registered memory,
//! serves RDMA READs and atomics, ACKs (only what asks for it, several at once when they
//! queue up), NAKs, and answers duplicates as rxe does: a duplicate SEND or WRITE is
//! re-ACKed, a duplicate READ is served again, a duplicate atomic gets its saved result
//! [rxe_resp.c; IBA 9.7.5.2, 9.7.6].

use roce_wire::bth::{self, Opcode};
use roce_wire::ext::ExtHeaders;
use roce_wire::{aeth, atomic_ack_eth};

use super::mr::{Access, MrError};
use super::{psn, Ctx, InMsg, RcPacket, RcQp, Resource, WcOpcode, WcStatus};

/// ACK syndrome with the "invalid" credit count: rxe's `AETH_ACK_UNLIMITED` (no end-to-end
/// flow control).
pub(crate) const AETH_ACK: u8 = 0x1f;
/// RNR NAK; the low 5 bits are the timer code.
pub(crate) const AETH_RNR_NAK: u8 = 0x20;
/// NAK: PSN sequence error.
pub(crate) const AETH_NAK_PSN_SEQ: u8 = 0x60;
/// NAK: invalid request.
pub(crate) const AETH_NAK_INVALID: u8 = 0x61;
/// NAK: remote access error.
pub(crate) const AETH_NAK_REM_ACCESS: u8 = 0x62;
/// NAK: remote operational error.
pub(crate) const AETH_NAK_REM_OP: u8 = 0x63;

/// Whether a request opcode (RC numbering) begins a message: FIRST or ONLY, or a READ or
/// atomic request.
pub(crate) fn starts_message(op: Opcode) -> bool {
    use Opcode::*;
    matches!(
        op,
        RcSendFirst
            | RcSendOnly
            | RcSendOnlyWithImmediate
            | RcSendOnlyWithInvalidate
            | RcRdmaWriteFirst
            | RcRdmaWriteOnly
            | RcRdmaWriteOnlyWithImmediate
            | RcRdmaReadRequest
            | RcCompareSwap
            | RcFetchAdd
            | RcAtomicWrite
            | RcFlush
    )
}

/// Whether a SEND or WRITE opcode (RC numbering) ends its message: LAST or ONLY.
pub(crate) fn ends_message(op: Opcode) -> bool {
    use Opcode::*;
    matches!(
        op,
        RcSendLast
            | RcSendLastWithImmediate
            | RcSendLastWithInvalidate
            | RcSendOnly
            | RcSendOnlyWithImmediate
            | RcSendOnlyWithInvalidate
            | RcRdmaWriteLast
            | RcRdmaWriteLastWithImmediate
            | RcRdmaWriteOnly
            | RcRdmaWriteOnlyWithImmediate
    )
}

/// The payload length a SEND/WRITE packet may carry [rxe check_length]: FIRST and MIDDLE
/// exactly one MTU, LAST 1..=MTU, ONLY at most one MTU.
pub(crate) fn data_length_ok(starts: bool, ends: bool, len: usize, mtu: usize) -> bool {
    match (starts, ends) {
        (true, true) => len <= mtu,
        (_, false) => len == mtu,
        (false, true) => len > 0 && len <= mtu,
    }
}

/// The QP and region access a FLUSH needs for its placement type [rxe_resp.c
/// check_qp_attr_access]: FLUSH_GLOBAL for bit 0, FLUSH_PERSISTENT for bit 1.
fn flush_access(ext: &ExtHeaders) -> Access {
    let plt = ext.feth.map_or(0, |f| f.placement_type());
    let mut need = Access::NONE;
    if plt & super::FLUSH_GLOBAL != 0 {
        need = need.union(Access::FLUSH_GLOBAL);
    }
    if plt & super::FLUSH_PERSISTENT != 0 {
        need = need.union(Access::FLUSH_PERSISTENT);
    }
    need
}

impl RcQp {
    /// An ACK, NAK or atomic ACK with the current MSN.
    pub(crate) fn ack_packet(&self, p: u32, syndrome: u8, orig: Option<u64>) -> RcPacket {
        let op = if orig.is_some() { Opcode::RcAtomicAcknowledge } else { Opcode::RcAcknowledge };
        // (An XRC target answers with XRC's twins: transport bits 101.)
        let mut b = bth::Repr::new(self.service.xrc_opcode(op), self.attr.dest_qpn, p);
        b.pkey = self.attr.pkey;
        let ext = ExtHeaders {
            aeth: Some(aeth::Repr { syndrome, msn: self.msn }),
            atomic_ack_eth: orig.map(|orig| atomic_ack_eth::Repr { orig }),
            ..ExtHeaders::default()
        };
        self.packet(b, ext, Vec::new())
    }

    /// Queue a response; a pending ACK for an earlier PSN is implied by it and dropped.
    fn queue_resp(&mut self, ctx: &mut Ctx<'_>, pkt: RcPacket) {
        if self.pending_ack.take().is_some() {
            ctx.c.ack_coalesced += 1;
        }
        self.resp_out.push_back(pkt);
    }

    /// ACK `p` when the transmit side is next polled; a later ACK replaces it (coalescing).
    fn ack_later(&mut self, ctx: &mut Ctx<'_>, p: u32) {
        if self.pending_ack.replace(p).is_some() {
            ctx.c.ack_coalesced += 1;
        }
    }

    /// A fatal responder error: NAK `p` with `syndrome` and enter ERR.
    fn nak_fatal(&mut self, ctx: &mut Ctx<'_>, p: u32, syndrome: u8) {
        self.enter_error(ctx);
        let nak = self.ack_packet(p, syndrome, None);
        self.resp_out.push_back(nak);
    }

    /// "Invalid request" NAK (unsupported opcode, opcode out of sequence, bad length).
    pub(crate) fn nak_invalid(&mut self, ctx: &mut Ctx<'_>, p: u32) {
        self.nak_fatal(ctx, p, AETH_NAK_INVALID);
    }

    /// A request packet.
    pub(crate) fn handle_request(&mut self, ctx: &mut Ctx<'_>, b: &bth::Repr, ext: &ExtHeaders, payload: &[u8]) {
        use Opcode::*;
        let p = b.psn;
        let d = psn::cmp(p, self.rq_psn);
        if d > 0 {
            // Ahead of sequence: one NAK until the expected PSN shows up [rxe sent_psn_nak].
            ctx.c.out_of_seq_request += 1;
            if !self.nak_sent {
                self.nak_sent = true;
                let nak = self.ack_packet(self.rq_psn, AETH_NAK_PSN_SEQ, None);
                self.queue_resp(ctx, nak);
            }
            return;
        }
        if d < 0 {
            ctx.c.duplicate_request += 1;
            return self.duplicate(ctx, b, ext);
        }
        self.nak_sent = false;
        let op = b.opcode;
        let starts = starts_message(op);
        let seq_ok = match self.cur {
            None => starts,
            Some(InMsg::Send { .. }) => {
                matches!(op, RcSendMiddle | RcSendLast | RcSendLastWithImmediate | RcSendLastWithInvalidate)
            }
            Some(InMsg::Write { .. }) => {
                matches!(op, RcRdmaWriteMiddle | RcRdmaWriteLast | RcRdmaWriteLastWithImmediate)
            }
        };
        let need = match op {
            RcRdmaReadRequest => Access::REMOTE_READ,
            RcCompareSwap | RcFetchAdd => Access::REMOTE_ATOMIC,
            RcFlush => flush_access(ext),
            RcSendFirst
            | RcSendMiddle
            | RcSendLast
            | RcSendLastWithImmediate
            | RcSendLastWithInvalidate
            | RcSendOnly
            | RcSendOnlyWithImmediate
            | RcSendOnlyWithInvalidate => Access::NONE,
            _ => Access::REMOTE_WRITE,
        };
        if !seq_ok || !self.attr.access.contains(need) {
            return self.nak_invalid(ctx, p);
        }
        if let super::TransportService::XrcTgt { xrcd } = self.service {
            // A message goes to the SRQ its XRCETH names, an XRC SRQ of this target's domain.
            if starts {
                let n = ext.xrceth.map(|x| x.xrc_srq);
                match n.filter(|n| ctx.srqs.get(n).is_some_and(|s| s.xrcd == Some(xrcd))) {
                    Some(n) => self.srq = Some(n),
                    None => {
                        ctx.c.xrc_srq_invalid += 1;
                        return self.nak_invalid(ctx, p);
                    }
                }
            }
        }
        // Payload length rules [rxe check_length; IBA C9-?: First/Middle exactly one MTU].
        let mtu = self.attr.path_mtu as usize;
        let len = payload.len();
        let ends = ends_message(op);
        let len_ok = match op {
            RcRdmaReadRequest | RcCompareSwap | RcFetchAdd | RcFlush => len == 0,
            // Eight bytes, and a RETH that says so [rxe check_rkey: pktlen != resid].
            RcAtomicWrite => len == 8 && ext.reth.is_some_and(|r| r.dma_len == 8),
            _ => data_length_ok(starts, ends, len, mtu),
        };
        if !len_ok {
            return self.nak_invalid(ctx, p);
        }
        match op {
            RcRdmaReadRequest => self.read_request(ctx, b, ext),
            RcCompareSwap | RcFetchAdd => self.atomic(ctx, b, ext),
            RcAtomicWrite => self.atomic_write(ctx, b, ext, payload),
            RcFlush => self.flush(ctx, b, ext),
            RcSendFirst
            | RcSendMiddle
            | RcSendLast
            | RcSendLastWithImmediate
            | RcSendLastWithInvalidate
            | RcSendOnly
            | RcSendOnlyWithImmediate
            | RcSendOnlyWithInvalidate => self.send(ctx, b, ext, payload, starts, ends),
            _ => self.write(ctx, b, ext, payload, starts, ends),
        }
    }

    fn rnr(&mut self, ctx: &mut Ctx<'_>, p: u32) {
        ctx.c.send_rnr_err += 1;
        let nak = self.ack_packet(p, AETH_RNR_NAK | (self.attr.min_rnr_timer & 0x1f), None);
        self.queue_resp(ctx, nak);
    }

    /// The request at `p` is done: advance, count the message at its end, ACK if asked.
    fn accept(&mut self, ctx: &mut Ctx<'_>, b: &bth::Repr, ends: bool) {
        self.rq_psn = psn::add(b.psn, 1);
        if ends {
            self.msn = psn::add(self.msn, 1);
        }
        if b.ack_req {
            self.ack_later(ctx, b.psn);
        }
    }

    fn send(&mut self, ctx: &mut Ctx<'_>, b: &bth::Repr, ext: &ExtHeaders, payload: &[u8], starts: bool, ends: bool) {
        if !self.take_recv(ctx) {
            return self.rnr(ctx, b.psn);
        }
        let offset = match self.cur {
            Some(InMsg::Send { offset }) if !starts => offset,
            _ => 0,
        };
        let r = ctx.mrs.scatter(&self.rq[0].sg_list, offset, payload);
        if let Err(e) = r {
            return self.recv_error(ctx, b.psn, e);
        }
        let offset = offset + payload.len() as u64;
        if ends {
            self.cur = None;
            // SEND with invalidate: the key goes once the message is placed [rxe execute →
            // invalidate_rkey]. One the rules refuse (a type 1 window, a region, a window not
            // valid) completes the receive with REM_INV_REQ_ERR and ends the QP, with an
            // "invalid request" NAK (rxe, class J: the same completion and ERR, but an ACK).
            let inv = ext.ieth.map(|i| i.rkey);
            if let Some(rkey) = inv {
                if ctx.mrs.invalidate(rkey).is_err() {
                    if let Some(r) = self.rq.pop_front() {
                        let wc = self.recv_wc(r.wr_id, WcStatus::RemInvReqErr, WcOpcode::Recv, offset, None);
                        ctx.cq.push_back(wc);
                    }
                    return self.nak_fatal(ctx, b.psn, AETH_NAK_INVALID);
                }
            }
            if let Some(r) = self.rq.pop_front() {
                let mut wc =
                    self.recv_wc(r.wr_id, WcStatus::Success, WcOpcode::Recv, offset, ext.immdt.map(|i| i.imm_data));
                wc.solicited = b.solicited;
                wc.invalidated_rkey = inv;
                ctx.cq.push_back(wc);
            }
        } else {
            self.cur = Some(InMsg::Send { offset });
        }
        self.accept(ctx, b, ends);
    }

    /// Data that does not fit or may not be written into the receive buffer: the receive
    /// completes in error, the requester gets a NAK, the QP enters ERR [rxe do_complete].
    fn recv_error(&mut self, ctx: &mut Ctx<'_>, p: u32, e: MrError) {
        let (status, syndrome) = match e {
            MrError::Length => (WcStatus::LocLenErr, AETH_NAK_INVALID),
            _ => (WcStatus::LocProtErr, AETH_NAK_REM_OP),
        };
        if let Some(r) = self.rq.pop_front() {
            let wc = self.recv_wc(r.wr_id, status, WcOpcode::Recv, 0, None);
            ctx.cq.push_back(wc);
        }
        self.nak_fatal(ctx, p, syndrome);
    }

    fn write(&mut self, ctx: &mut Ctx<'_>, b: &bth::Repr, ext: &ExtHeaders, payload: &[u8], starts: bool, ends: bool) {
        let p = b.psn;
        let (mut va, rkey, mut resid, total) = match (self.cur, ext.reth) {
            (Some(InMsg::Write { va, rkey, resid, total }), _) if !starts => (va, rkey, resid, total),
            (_, Some(r)) => {
                let total = u64::from(r.dma_len);
                if total > 0 && !self.reth_reachable(ctx, &r, Access::REMOTE_WRITE) {
                    return self.nak_fatal(ctx, p, AETH_NAK_REM_ACCESS);
                }
                (r.va, r.rkey, total, total)
            }
            _ => return self.nak_invalid(ctx, p),
        };
        let imm = ext.immdt.map(|i| i.imm_data);
        if imm.is_some() && !self.take_recv(ctx) {
            return self.rnr(ctx, p);
        }
        let len = payload.len() as u64;
        if len > resid || (ends && len != resid) {
            return self.nak_invalid(ctx, p);
        }
        if len > 0 && ctx.mrs.remote_write(self.remote_accessor(ctx.srqs), rkey, va, payload).is_err() {
            return self.nak_fatal(ctx, p, AETH_NAK_REM_ACCESS);
        }
        va = va.wrapping_add(len);
        resid -= len;
        self.write_placed(ctx, ends, InMsg::Write { va, rkey, resid, total }, imm, b.solicited);
        self.accept(ctx, b, ends);
    }

    /// A WRITE packet is placed: at the message's end it closes (a WRITE with immediate
    /// completes its receive with the message's length), otherwise `next` says where the
    /// next packet goes.
    pub(crate) fn write_placed(
        &mut self,
        ctx: &mut Ctx<'_>,
        ends: bool,
        next: InMsg,
        imm: Option<u32>,
        solicited: bool,
    ) {
        if !ends {
            self.cur = Some(next);
            return;
        }
        self.cur = None;
        let InMsg::Write { total, .. } = next else { return };
        if imm.is_some() {
            if let Some(r) = self.rq.pop_front() {
                let mut wc = self.recv_wc(r.wr_id, WcStatus::Success, WcOpcode::RecvRdmaWithImm, total, imm);
                wc.solicited = solicited;
                ctx.cq.push_back(wc);
            }
        }
    }

    fn read_request(&mut self, ctx: &mut Ctx<'_>, b: &bth::Repr, ext: &ExtHeaders) {
        let p = b.psn;
        let Some(r) = ext.reth else { return self.nak_invalid(ctx, p) };
        if r.dma_len > 1 << 31 {
            return self.nak_invalid(ctx, p);
        }
        if r.dma_len > 0 && !self.reth_reachable(ctx, &r, Access::REMOTE_READ) {
            return self.nak_fatal(ctx, p, AETH_NAK_REM_ACCESS);
        }
        let npkts = (r.dma_len as u64).div_ceil(u64::from(self.attr.path_mtu)).max(1) as u32;
        self.msn = psn::add(self.msn, 1);
        self.remember(Resource::Read { first_psn: p, last_psn: psn::add(p, npkts - 1), rkey: r.rkey });
        self.serve_read(ctx, p, r.va, r.rkey, r.dma_len);
        self.rq_psn = psn::add(p, npkts);
    }

    fn remember(&mut self, r: Resource) {
        while self.resources.len() >= usize::from(self.attr.max_dest_rd_atomic.max(1)) {
            self.resources.pop_front();
        }
        self.resources.push_back(r);
    }

    /// Queue the READ responses for `len` bytes at `va`, PSNs from `p`.
    fn serve_read(&mut self, ctx: &mut Ctx<'_>, p: u32, va: u64, rkey: u32, len: u32) {
        let mtu = u64::from(self.attr.path_mtu);
        let len = u64::from(len);
        let npkts = len.div_ceil(mtu).max(1) as u32;
        for k in 0..npkts {
            let off = u64::from(k) * mtu;
            let n = (len - off).min(mtu) as usize;
            let data = if n == 0 {
                Vec::new()
            } else {
                let mut d = ctx.payload_buffer();
                d.resize(n, 0);
                if ctx.mrs.remote_read(self.remote_accessor(ctx.srqs), rkey, va.wrapping_add(off), &mut d).is_err() {
                    return self.nak_fatal(ctx, psn::add(p, k), AETH_NAK_REM_ACCESS);
                }
                d
            };
            let op = match (k == 0, k + 1 == npkts) {
                (true, true) => Opcode::RcRdmaReadResponseOnly,
                (true, false) => Opcode::RcRdmaReadResponseFirst,
                (false, false) => Opcode::RcRdmaReadResponseMiddle,
                (false, true) => Opcode::RcRdmaReadResponseLast,
            };
            let mut bth = bth::Repr::new(self.service.xrc_opcode(op), self.attr.dest_qpn, psn::add(p, k));
            bth.pkey = self.attr.pkey;
            bth.pad_count = ((4 - n % 4) % 4) as u8;
            let mut ext = ExtHeaders::default();
            if op != Opcode::RcRdmaReadResponseMiddle {
                ext.aeth = Some(aeth::Repr { syndrome: AETH_ACK, msn: self.msn });
            }
            let pkt = self.packet(bth, ext, data);
            self.queue_resp(ctx, pkt);
        }
    }

    fn atomic(&mut self, ctx: &mut Ctx<'_>, b: &bth::Repr, ext: &ExtHeaders) {
        let p = b.psn;
        let Some(a) = ext.atomic_eth else { return self.nak_invalid(ctx, p) };
        if a.va % 8 != 0 {
            return self.nak_invalid(ctx, p); // rxe: misaligned atomic
        }
        let compare_swap = b.opcode == Opcode::RcCompareSwap;
        let update = |old: u64| {
            if !compare_swap {
                old.wrapping_add(a.swap_add)
            } else if old == a.compare {
                a.swap_add
            } else {
                old
            }
        };
        let orig = match ctx.mrs.remote_atomic(self.remote_accessor(ctx.srqs), a.rkey, a.va, update) {
            Ok(old) => old,
            Err(_) => return self.nak_fatal(ctx, p, AETH_NAK_REM_ACCESS),
        };
        self.msn = psn::add(self.msn, 1);
        self.remember(Resource::Atomic { psn: p, orig });
        let ack = self.ack_packet(p, AETH_ACK, Some(orig));
        self.queue_resp(ctx, ack);
        self.rq_psn = psn::add(p, 1);
    }

    /// ATOMIC WRITE: the rkey and range as for a WRITE (a remote access NAK), an aligned
    /// address (else "invalid request", rxe's ERR_MISALIGNED_ATOMIC), then one 8-byte store;
    /// answered, as rxe does, by an RDMA READ Response Only without payload
    /// [rxe_resp.c atomic_write_reply, send_read_response_ack].
    fn atomic_write(&mut self, ctx: &mut Ctx<'_>, b: &bth::Repr, ext: &ExtHeaders, payload: &[u8]) {
        let p = b.psn;
        let Some(r) = ext.reth else { return self.nak_invalid(ctx, p) };
        if ctx.mrs.check_remote(self.remote_accessor(ctx.srqs), r.rkey, r.va, 8, Access::REMOTE_WRITE).is_err() {
            return self.nak_fatal(ctx, p, AETH_NAK_REM_ACCESS);
        }
        if r.va % 8 != 0 {
            return self.nak_invalid(ctx, p);
        }
        let mut data = [0u8; 8];
        data.copy_from_slice(payload);
        if ctx.mrs.remote_atomic_write(self.remote_accessor(ctx.srqs), r.rkey, r.va, data).is_err() {
            return self.nak_fatal(ctx, p, AETH_NAK_REM_ACCESS);
        }
        self.placement_done(ctx, p);
    }

    /// FLUSH: the QP's access was checked for the placement type; the region must have it
    /// too, and hold the range unless the whole region is asked for (a remote access NAK)
    /// [rxe_resp.c check_rkey, process_flush]. Every earlier request of this QP is already
    /// placed (requests are executed in PSN order, each one's bytes copied into the region
    /// before the next is looked at), so global visibility needs only a release fence; no
    /// region here is persistent (registration refuses FLUSH_PERSISTENT), so a persistent
    /// FLUSH cannot get this far.
    fn flush(&mut self, ctx: &mut Ctx<'_>, b: &bth::Repr, ext: &ExtHeaders) {
        let p = b.psn;
        let (Some(f), Some(r)) = (ext.feth, ext.reth) else { return self.nak_invalid(ctx, p) };
        let need = flush_access(ext);
        let reachable = if f.selectivity_level() == super::FlushLevel::Mr.wire() {
            ctx.mrs.check_remote_key(self.remote_accessor(ctx.srqs), r.rkey, need).is_ok()
        } else {
            self.reth_reachable(ctx, &r, need)
        };
        if !reachable {
            return self.nak_fatal(ctx, p, AETH_NAK_REM_ACCESS);
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        self.placement_done(ctx, p);
    }

    /// An ATOMIC WRITE or FLUSH at `p` took effect: count the message, remember it for a
    /// duplicate, answer with an empty READ response.
    fn placement_done(&mut self, ctx: &mut Ctx<'_>, p: u32) {
        self.msn = psn::add(self.msn, 1);
        self.remember(Resource::Placement { psn: p });
        let resp = self.placement_response(p);
        self.queue_resp(ctx, resp);
        self.rq_psn = psn::add(p, 1);
    }

    /// RDMA READ Response Only, no payload, ACK syndrome: the answer to ATOMIC WRITE and FLUSH.
    fn placement_response(&self, p: u32) -> RcPacket {
        let mut bth = bth::Repr::new(Opcode::RcRdmaReadResponseOnly, self.attr.dest_qpn, p);
        bth.pkey = self.attr.pkey;
        let ext = ExtHeaders { aeth: Some(aeth::Repr { syndrome: AETH_ACK, msn: self.msn }), ..ExtHeaders::default() };
        self.packet(bth, ext, Vec::new())
    }

    /// A request behind the expected PSN.
    fn duplicate(&mut self, ctx: &mut Ctx<'_>, b: &bth::Repr, ext: &ExtHeaders) {
        let p = b.psn;
        match b.opcode {
            Opcode::RcRdmaReadRequest => {
                let Some(r) = ext.reth else { return };
                let found = self.resources.iter().any(|res| {
                    matches!(*res, Resource::Read { first_psn, last_psn, rkey }
                        if rkey == r.rkey && psn::ge(p, first_psn) && psn::ge(last_psn, p)
                            && psn::add(p, (u64::from(r.dma_len).div_ceil(u64::from(self.attr.path_mtu)).max(1) - 1) as u32) == last_psn)
                });
                if found {
                    self.serve_read(ctx, p, r.va, r.rkey, r.dma_len);
                } else {
                    ctx.c.drop_forgotten_request += 1; // forgotten (more than max_dest_rd_atomic ago): rxe drops it too
                }
            }
            Opcode::RcCompareSwap | Opcode::RcFetchAdd => {
                let saved = self.resources.iter().find_map(|res| match *res {
                    Resource::Atomic { psn, orig } if psn == p => Some(orig),
                    _ => None,
                });
                match saved {
                    Some(orig) => {
                        let ack = self.ack_packet(p, AETH_ACK, Some(orig));
                        self.queue_resp(ctx, ack);
                    }
                    None => ctx.c.drop_forgotten_request += 1,
                }
            }
            Opcode::RcAtomicWrite | Opcode::RcFlush => {
                // Answered again, not done again. (rxe 6.2+ does this for ATOMIC WRITE; for a
                // FLUSH its rxe_prepare_res leaves the resource's PSNs unset, so a duplicate
                // FLUSH is usually not found and dropped: we answer it as IBA oA19-14 asks.)
                let saved = self.resources.iter().any(|res| matches!(*res, Resource::Placement { psn } if psn == p));
                if saved {
                    let resp = self.placement_response(p);
                    self.queue_resp(ctx, resp);
                } else {
                    ctx.c.drop_forgotten_request += 1;
                }
            }
            _ => {
                let prev = psn::sub(self.rq_psn, 1);
                self.ack_later(ctx, prev);
            }
        }
    }
}
