//! QP1 (the GSI QP) as this port's MAD sender and agent hook: the PSN of the MADs we send, the
//! management classes a userspace agent registered (umad-like) and the requests waiting for
//! it. The MADs themselves are dispatched by the stack (CM, SA responses, agents).

use std::collections::VecDeque;
use std::net::IpAddr;

use bytes::Bytes;
use roce_wire::bth;
use roce_wire::{Gid, MAD_SIZE};

use crate::ctx::{gsi_bth, MadPacket, Outbox, RocePacket, GSI_EXT, GSI_HOP_LIMIT};

/// A MAD request delivered to a registered agent (the umad-like hook an SA host uses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MadRequest {
    /// The requester's address.
    pub src: IpAddr,
    /// The requester's QP (DETH SrcQP).
    pub src_qp: u32,
    /// The requester's GID (its IP as a GID).
    pub src_gid: Gid,
    /// The 256-byte MAD.
    pub mad: [u8; MAD_SIZE],
}

/// QP1's sender state and agent queue (the owner of both).
#[derive(Clone, Debug, Default)]
pub(crate) struct Gsi {
    psn: u32,
    agents: Vec<u8>,
    requests: VecDeque<MadRequest>,
}

impl Gsi {
    /// The BTH of a UD SEND_ONLY on QP1 with the current PSN (not advanced).
    #[inline]
    pub(crate) fn bth(&self, pkey: u16, dst_qp: u32) -> bth::Repr {
        gsi_bth(pkey, dst_qp, self.psn)
    }

    /// Queue a MAD to send in its compact form; the PSN advances. Framed as [`Gsi::packet`]
    /// frames it.
    #[inline]
    pub(crate) fn queue_mad(&mut self, out: &mut Outbox, pkey: u16, dst: IpAddr, dst_qp: u32, mad: &[u8; MAD_SIZE]) {
        out.push_mad(MadPacket { dst, dst_qp, psn: self.psn, pkey }, mad);
        self.advance();
    }

    /// The headers of a UD SEND_ONLY on QP1 with the current PSN (not advanced).
    #[inline]
    pub(crate) fn header(&self, pkey: u16, dst: IpAddr, dst_qp: u32, payload: Bytes) -> RocePacket {
        RocePacket {
            dst,
            dst_mac: None,
            src_qp: 1,
            bth: self.bth(pkey, dst_qp),
            ext: GSI_EXT,
            payload,
            hop_limit: GSI_HOP_LIMIT,
            traffic_class: 0,
        }
    }

    /// A MAD went out with the current PSN: the next one takes the following PSN.
    #[inline]
    pub(crate) fn advance(&mut self) {
        self.psn = (self.psn + 1) & 0xff_ffff;
    }

    /// A UD SEND_ONLY on QP1 carrying `mad` (cut from the outbox's arena), framed as rxe
    /// frames GSI traffic; the PSN advances.
    #[inline]
    pub(crate) fn packet(&mut self, out: &mut Outbox, pkey: u16, dst: IpAddr, dst_qp: u32, mad: &[u8]) -> RocePacket {
        let payload = out.tx_bytes(mad);
        let p = self.header(pkey, dst, dst_qp, payload);
        self.advance();
        p
    }

    /// Deliver requests of `mgmt_class` to the agent (a repeat is a no-op).
    pub(crate) fn register(&mut self, mgmt_class: u8) {
        if !self.agents.contains(&mgmt_class) {
            self.agents.push(mgmt_class);
        }
    }

    /// Whether an agent takes requests of `mgmt_class`.
    #[inline]
    pub(crate) fn has_agent(&self, mgmt_class: u8) -> bool {
        self.agents.contains(&mgmt_class)
    }

    /// Queue a request for the agent (its MAD copied once, straight into the queue).
    pub(crate) fn deliver(&mut self, src: IpAddr, src_qp: u32, mad: &[u8; MAD_SIZE]) {
        self.requests.push_back(MadRequest { src, src_qp, src_gid: Gid::from_ip(src), mad: *mad });
    }

    /// The next request for the agent.
    pub(crate) fn poll_request(&mut self) -> Option<MadRequest> {
        self.requests.pop_front()
    }

    /// The next request for the agent, where it waits.
    pub(crate) fn front_request(&self) -> Option<&MadRequest> {
        self.requests.front()
    }

    /// Drop the next request (answered in place).
    pub(crate) fn drop_front_request(&mut self) {
        self.requests.pop_front();
    }
}
