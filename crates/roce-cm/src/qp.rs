//! UD queue pairs: created with a Q_Key, attached to groups, sending to a group (QPN
//! 0xFFFFFF, the multicast MAC) or a unicast address and QP, receiving datagrams with their
//! source information; Q_Key and P_Key enforced on receive [rxe_recv.c check_keys,
//! rxe_rcv_mcast_pkt; rxe_mcast.c].
//!
//! `UdQps` owns the UD QPs; QP numbers come from the stack (UD and RC QPs share one
//! numbering), frames leave through the `Ctx` the stack lends.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::IpAddr;

use roce_wire::bth::{self, Opcode};
use roce_wire::deth;
use roce_wire::ext::ExtHeaders;
use roce_wire::frame::Frame;
use roce_wire::{immdt, Gid, MULTICAST_QPN};

use crate::counters::{Counters, DropReason};
use crate::ctx::{Ctx, Outgoing, RocePacket};
use crate::event::AddressHandle;
use crate::Errno;

/// Receive queue depth of a UD QP (datagrams beyond it are dropped and counted).
pub const RECV_QUEUE_DEPTH: usize = 1024;

/// A received datagram with its GRH-like source information.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    /// Source address (the GRH's SGID as IP).
    pub src: IpAddr,
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Source QP (DETH SrcQP).
    pub src_qp: u32,
    /// Destination address (a group for multicast).
    pub dst: IpAddr,
    /// Q_Key the datagram carried.
    pub qkey: u32,
    /// Immediate data, if any.
    pub imm_data: Option<u32>,
    /// Traffic class / TOS.
    pub traffic_class: u8,
    /// Hop limit / TTL.
    pub hop_limit: u8,
    /// The payload (pad removed).
    pub payload: Vec<u8>,
}

/// Where a UD send goes: an address handle, the remote QPN and Q_Key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdDest {
    /// Address handle (DGID, DMAC, hop limit, traffic class).
    pub ah: AddressHandle,
    /// Remote QPN (0xFFFFFF for a group).
    pub remote_qpn: u32,
    /// Remote Q_Key.
    pub remote_qkey: u32,
}

/// One UD QP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdQp {
    /// The QP's Q_Key.
    pub qkey: u32,
    /// Groups it is attached to.
    pub groups: BTreeSet<Gid>,
    pub(crate) rx: VecDeque<Datagram>,
    pub(crate) psn: u32,
}

/// The UD QPs of a port (the owner of their state).
#[derive(Clone, Debug, Default)]
pub(crate) struct UdQps {
    qps: BTreeMap<u32, UdQp>,
}

impl UdQps {
    /// Create QP `qpn` with `qkey`, its send PSN starting at `psn`.
    pub(crate) fn create(&mut self, qpn: u32, qkey: u32, psn: u32) {
        self.qps.insert(qpn, UdQp { qkey, groups: BTreeSet::new(), rx: VecDeque::new(), psn });
    }

    /// Destroy a QP (detaching it from every group).
    pub(crate) fn destroy(&mut self, qpn: u32) -> Result<(), Errno> {
        self.qps.remove(&qpn).map(|_| ()).ok_or(Errno::EINVAL)
    }

    /// `ibv_attach_mcast`: deliver datagrams for `mgid` to this QP (a repeat is a no-op).
    pub(crate) fn attach(&mut self, qpn: u32, mgid: Gid) -> Result<(), Errno> {
        if !mgid.is_multicast() {
            return Err(Errno::EINVAL);
        }
        let qp = self.qps.get_mut(&qpn).ok_or(Errno::EINVAL)?;
        qp.groups.insert(mgid);
        Ok(())
    }

    /// `ibv_detach_mcast`: unknown QP or group → EINVAL.
    pub(crate) fn detach(&mut self, qpn: u32, mgid: Gid) -> Result<(), Errno> {
        let qp = self.qps.get_mut(&qpn).ok_or(Errno::EINVAL)?;
        if qp.groups.remove(&mgid) {
            Ok(())
        } else {
            Err(Errno::EINVAL)
        }
    }

    /// The QP, if it exists.
    pub(crate) fn get(&self, qpn: u32) -> Option<&UdQp> {
        self.qps.get(&qpn)
    }

    /// `ibv_modify_qp` to RTS with `IBV_QP_SQ_PSN`: the PSN of the next send (EINVAL: no
    /// such QP or a PSN over 24 bits).
    pub(crate) fn set_sq_psn(&mut self, qpn: u32, psn: u32) -> Result<(), Errno> {
        if psn > 0xff_ffff {
            return Err(Errno::EINVAL);
        }
        self.qps.get_mut(&qpn).ok_or(Errno::EINVAL)?.psn = psn;
        Ok(())
    }

    /// Set QP `qpn`'s Q_Key.
    pub(crate) fn set_qkey(&mut self, qpn: u32, qkey: u32) -> Result<(), Errno> {
        self.qps.get_mut(&qpn).ok_or(Errno::EINVAL)?.qkey = qkey;
        Ok(())
    }

    /// The PSN the next send of QP `qpn` carries.
    pub(crate) fn sq_psn(&self, qpn: u32) -> Option<u32> {
        self.qps.get(&qpn).map(|q| q.psn)
    }

    /// Whether QP `qpn` exists.
    pub(crate) fn contains(&self, qpn: u32) -> bool {
        self.qps.contains_key(&qpn)
    }

    /// Post a UD send (SEND_ONLY, or SEND_ONLY_WITH_IMMEDIATE when `imm_data` is given).
    pub(crate) fn post_send(
        &mut self,
        cx: &mut Ctx<'_>,
        qpn: u32,
        dest: &UdDest,
        payload: &[u8],
        imm_data: Option<u32>,
    ) -> Result<(), Errno> {
        let pkey = cx.cfg.pkey;
        let qp = self.qps.get_mut(&qpn).ok_or(Errno::EINVAL)?;
        let op = if imm_data.is_some() { Opcode::UdSendOnlyWithImmediate } else { Opcode::UdSendOnly };
        let dst_qpn = dest.remote_qpn & 0xff_ffff;
        let mut b = bth::Repr::new(op, dst_qpn, qp.psn);
        b.pkey = pkey;
        qp.psn = (qp.psn + 1) & 0xff_ffff;
        let mut ext = ExtHeaders::deth(dest.remote_qkey, qpn);
        ext.immdt = imm_data.map(|imm_data| immdt::Repr { imm_data });
        let dst = dest.ah.dgid.to_ip();
        let dst_mac = if dest.ah.dgid.is_multicast() || dst_qpn == MULTICAST_QPN {
            crate::neigh::multicast_mac(&dst).or(Some(dest.ah.dmac))
        } else if dest.ah.dmac != [0; 6] {
            Some(dest.ah.dmac)
        } else {
            None
        };
        let payload = cx.out.tx_bytes(payload);
        cx.out.push(Outgoing::Roce(RocePacket {
            dst,
            dst_mac,
            src_qp: qpn,
            bth: b,
            ext,
            payload,
            hop_limit: if dest.ah.hop_limit == 0 { 64 } else { dest.ah.hop_limit },
            traffic_class: dest.ah.traffic_class,
        }));
        Ok(())
    }

    /// The next received datagram of a QP.
    pub(crate) fn poll_recv(&mut self, qpn: u32) -> Option<Datagram> {
        self.qps.get_mut(&qpn)?.rx.pop_front()
    }

    fn datagram(f: &Frame<'_>, d: &deth::Repr) -> Datagram {
        let r = &f.repr;
        Datagram {
            src: r.ip.source(),
            src_mac: r.ethernet.source,
            src_qp: d.src_qp,
            dst: r.ip.destination(),
            qkey: d.qkey,
            imm_data: r.ext.immdt.map(|i| i.imm_data),
            traffic_class: r.ip.traffic_class(),
            hop_limit: r.ip.hop_limit(),
            payload: r.payload.to_vec(),
        }
    }

    fn enqueue(&mut self, counters: &mut Counters, qpn: u32, d: Datagram) -> bool {
        let Some(qp) = self.qps.get_mut(&qpn) else { return false };
        if qp.rx.len() >= RECV_QUEUE_DEPTH {
            counters.drop(DropReason::ReceiveQueueFull);
            return false;
        }
        qp.rx.push_back(d);
        true
    }

    /// DestQP 0xFFFFFF: a clone to every attached QP whose Q_Key matches; failures are counted
    /// (rxe skips them silently).
    pub(crate) fn deliver_multicast(&mut self, counters: &mut Counters, f: &Frame<'_>, d: deth::Repr) {
        let mgid = Gid::from_ip(f.repr.ip.destination());
        let targets: Vec<(u32, u32)> =
            self.qps.iter().filter(|(_, q)| q.groups.contains(&mgid)).map(|(n, q)| (*n, q.qkey)).collect();
        if targets.is_empty() {
            counters.drop(DropReason::UnknownGroup);
            return;
        }
        let mut delivered = false;
        for (qpn, qkey) in targets {
            if qkey != d.qkey {
                counters.drop(DropReason::QkeyViolation);
                continue;
            }
            delivered |= self.enqueue(counters, qpn, Self::datagram(f, &d));
        }
        if delivered {
            counters.rx_accepted += 1;
        }
    }

    /// A UD datagram for one QP.
    pub(crate) fn deliver_unicast(&mut self, counters: &mut Counters, f: &Frame<'_>, d: deth::Repr) {
        let qpn = f.repr.bth.dest_qp;
        let Some(qkey) = self.qps.get(&qpn).map(|q| q.qkey) else {
            counters.drop(DropReason::UnknownQp);
            return;
        };
        if qkey != d.qkey {
            counters.drop(DropReason::QkeyViolation);
            return;
        }
        if self.enqueue(counters, qpn, Self::datagram(f, &d)) {
            counters.rx_accepted += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_send_psn_is_set_within_24_bits_and_only_on_a_qp() {
        let mut qps = UdQps::default();
        qps.create(0x11, 0x1111_1111, 5);
        assert_eq!(qps.sq_psn(0x11), Some(5));
        assert_eq!(qps.set_sq_psn(0x11, 0xab_cdef), Ok(()));
        assert_eq!(qps.sq_psn(0x11), Some(0xab_cdef));
        assert_eq!(qps.set_sq_psn(0x11, 0x100_0000), Err(Errno::EINVAL));
        assert_eq!(qps.set_sq_psn(0x12, 1), Err(Errno::EINVAL));
        assert_eq!(qps.sq_psn(0x12), None);
    }
}
