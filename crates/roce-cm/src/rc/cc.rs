//! The congestion path inside the connected-QP engine: which packets are paced and marked
//! ECN-capable, a QP's reaction point and CNP pacer, the CNP it sends, what a CNP or a CE
//! mark does to it (the state machines themselves: [`crate::cc`]; spec/congestion.md).

use roce_wire::bth::{self, Opcode};
use roce_wire::ext::ExtHeaders;

use super::{Ctx, RcPacket, RcQp};
use crate::cc::{CnpPacer, Dcqcn, Ecn};
use crate::Instant;

/// Whether packets of this opcode are data the rate paces and marks ECN-capable: requests and
/// READ responses (not ACKs, NAKs, atomic ACKs or CNPs).
pub(crate) fn paced(op: Opcode) -> bool {
    !matches!(op, Opcode::RcAcknowledge | Opcode::RcAtomicAcknowledge | Opcode::Cnp)
}

/// The bytes a packet's frame takes (Ethernet, IP, UDP, BTH, extension headers, payload, pad,
/// ICRC): what the rate is charged.
fn frame_len(p: &RcPacket) -> u64 {
    let ip = if p.dst.is_ipv4() { 20 } else { 40 };
    let payload = p.payload_in_place.unwrap_or(p.payload.len());
    (14 + ip + 8 + bth::BTH_LEN + p.ext.buffer_len() + payload + usize::from(p.bth.pad_count) + 4) as u64
}

/// A CNP's 16 reserved bytes after the BTH (IBA annex A17; the ConnectX-4 capture,
/// reference/protocol.md §1.11).
pub(crate) const CNP_PAYLOAD: [u8; 16] = [0; 16];

/// One QP's congestion state.
#[derive(Debug, Clone, Default)]
pub(crate) struct QpCc {
    /// The reaction point, from the QP's first CNP on.
    pub rp: Option<Dcqcn>,
    /// The notification point's pacer.
    pub np: CnpPacer,
    /// A CNP waiting to be sent (at most one: the pacer spaces them).
    pub cnp_out: Option<RcPacket>,
    /// The last poll found a packet held back by the rate: wake at its time.
    pub gated: bool,
}

impl QpCc {
    /// Whether the rate lets a packet go now (timers applied first).
    pub fn gate_open(&mut self, ctx: &mut Ctx<'_>) -> bool {
        self.gated = false;
        match self.rp.as_mut() {
            Some(rp) => {
                rp.advance(ctx.now, &mut ctx.c.cc);
                rp.may_send(ctx.now)
            }
            None => true,
        }
    }

    /// A packet is ready and the rate holds it back.
    pub fn hold(&mut self, ctx: &mut Ctx<'_>) -> Option<RcPacket> {
        self.gated = true;
        ctx.c.cc.paced += 1;
        None
    }

    /// `p` goes: a data packet is marked ECT(0) and charged to the rate.
    pub fn sent(&mut self, ctx: &mut Ctx<'_>, mut p: RcPacket) -> RcPacket {
        if paced(p.bth.opcode) {
            p.traffic_class = Ecn::Ect0.set(p.traffic_class);
            if let Some(rp) = self.rp.as_mut() {
                rp.on_sent(ctx.now, frame_len(&p), &mut ctx.c.cc);
            }
        }
        p
    }

    /// The timer ran at `now`: a wake for a held-back packet due by then is delivered (the
    /// next `poll_transmit` sends it), not asked for again, so a driver that cannot transmit
    /// yet is not woken in a loop.
    pub fn woken(&mut self, now: Instant) {
        if self.wake().is_some_and(|t| t <= now) {
            self.gated = false;
        }
    }

    /// When the QP wants to be polled again: the time its held-back packet may go.
    pub fn wake(&self) -> Option<Instant> {
        if !self.gated {
            return None;
        }
        self.rp.as_ref().filter(|r| r.is_limited()).map(Dcqcn::next_send)
    }
}

impl RcQp {
    /// A CNP for this QP (its peer's notification point saw our packets CE-marked): with
    /// congestion control on, the rate is cut.
    pub(crate) fn handle_cnp(&mut self, ctx: &mut Ctx<'_>) {
        ctx.c.cc.cnp_received += 1;
        let Some(p) = ctx.cc else {
            ctx.c.cc.cnp_ignored += 1;
            return;
        };
        let rp = self.cc.rp.get_or_insert_with(|| Dcqcn::new(*p));
        rp.on_cnp(ctx.now, &mut ctx.c.cc);
    }

    /// A packet for this QP arrived CE-marked: with congestion control on, a CNP to the
    /// sender's QP unless one went less than the interval ago.
    pub(crate) fn congestion_experienced(&mut self, ctx: &mut Ctx<'_>) {
        ctx.c.cc.ce_received += 1;
        let Some(p) = ctx.cc else { return };
        if self.cc.cnp_out.is_some() || !self.cc.np.allow(ctx.now, p.cnp_interval) {
            ctx.c.cc.cnp_suppressed_by_interval += 1;
            return;
        }
        let mut b = bth::Repr::new(Opcode::Cnp, self.attr.dest_qpn, 0);
        b.pkey = self.attr.pkey;
        // BECN set, as the ConnectX-4 capture has it (the ICRC masks that byte anyway).
        b.becn = true;
        let mut cnp = self.packet(b, ExtHeaders::default(), CNP_PAYLOAD.to_vec());
        cnp.traffic_class = Ecn::NotEct.set(cnp.traffic_class);
        self.cc.cnp_out = Some(cnp);
    }
}
