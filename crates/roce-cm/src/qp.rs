//! UD queue pairs: created with a Q_Key, attached to groups, sending to a group (QPN
//! 0xFFFFFF, the multicast MAC) or a unicast address and QP, receiving datagrams with their
//! source information; Q_Key and P_Key enforced on receive [rxe_recv.c check_keys,
//! rxe_rcv_mcast_pkt; rxe_mcast.c].

use std::collections::{BTreeSet, VecDeque};
use std::net::IpAddr;

use roce_wire::bth::{self, Opcode};
use roce_wire::deth;
use roce_wire::ext::ExtHeaders;
use roce_wire::frame::Frame;
use roce_wire::{immdt, Gid, MULTICAST_QPN};

use crate::counters::DropReason;
use crate::event::AddressHandle;
use crate::stack::{Outgoing, RocePacket, Stack};
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

impl Stack {
    /// Create a UD QP with `qkey`; returns its QPN.
    pub fn create_qp(&mut self, qkey: u32) -> u32 {
        let qpn = self.next_qpn;
        self.next_qpn = (self.next_qpn + 1) & 0xff_ffff;
        let psn = (self.random() as u32) & 0xff_ffff;
        self.qps.insert(qpn, UdQp { qkey, groups: BTreeSet::new(), rx: VecDeque::new(), psn });
        qpn
    }

    /// Destroy a QP (detaching it from every group).
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), Errno> {
        self.qps.remove(&qpn).map(|_| ()).ok_or(Errno::EINVAL)
    }

    /// `ibv_attach_mcast`: deliver datagrams for `mgid` to this QP (a repeat is a no-op).
    pub fn attach_mcast(&mut self, qpn: u32, mgid: Gid) -> Result<(), Errno> {
        if !mgid.is_multicast() {
            return Err(Errno::EINVAL);
        }
        let qp = self.qps.get_mut(&qpn).ok_or(Errno::EINVAL)?;
        qp.groups.insert(mgid);
        Ok(())
    }

    /// `ibv_detach_mcast`: unknown QP or group → EINVAL.
    pub fn detach_mcast(&mut self, qpn: u32, mgid: Gid) -> Result<(), Errno> {
        let qp = self.qps.get_mut(&qpn).ok_or(Errno::EINVAL)?;
        if qp.groups.remove(&mgid) {
            Ok(())
        } else {
            Err(Errno::EINVAL)
        }
    }

    /// The QP, if it exists.
    pub fn qp(&self, qpn: u32) -> Option<&UdQp> {
        self.qps.get(&qpn)
    }

    /// Post a UD send (SEND_ONLY, or SEND_ONLY_WITH_IMMEDIATE when `imm_data` is given).
    pub fn post_send(&mut self, qpn: u32, dest: &UdDest, payload: &[u8], imm_data: Option<u32>) -> Result<(), Errno> {
        let pkey = self.cfg.pkey;
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
        let payload = self.tx_bytes(payload);
        self.tx.push_back(Outgoing::Roce(RocePacket {
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
    pub fn poll_recv(&mut self, qpn: u32) -> Option<Datagram> {
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

    fn enqueue(&mut self, qpn: u32, d: Datagram) -> bool {
        let Some(qp) = self.qps.get_mut(&qpn) else { return false };
        if qp.rx.len() >= RECV_QUEUE_DEPTH {
            self.counters.drop(DropReason::ReceiveQueueFull);
            return false;
        }
        qp.rx.push_back(d);
        true
    }

    /// DestQP 0xFFFFFF: a clone to every attached QP whose Q_Key matches; failures are counted
    /// (rxe skips them silently).
    pub(crate) fn deliver_multicast(&mut self, f: &Frame<'_>, d: deth::Repr) {
        let mgid = Gid::from_ip(f.repr.ip.destination());
        let targets: Vec<(u32, u32)> =
            self.qps.iter().filter(|(_, q)| q.groups.contains(&mgid)).map(|(n, q)| (*n, q.qkey)).collect();
        if targets.is_empty() {
            self.counters.drop(DropReason::UnknownGroup);
            return;
        }
        let mut delivered = false;
        for (qpn, qkey) in targets {
            if qkey != d.qkey {
                self.counters.drop(DropReason::QkeyViolation);
                continue;
            }
            delivered |= self.enqueue(qpn, Self::datagram(f, &d));
        }
        if delivered {
            self.counters.rx_accepted += 1;
        }
    }

    /// A UD datagram for one QP.
    pub(crate) fn deliver_unicast(&mut self, f: &Frame<'_>, d: deth::Repr) {
        let qpn = f.repr.bth.dest_qp;
        let Some(qkey) = self.qps.get(&qpn).map(|q| q.qkey) else {
            self.counters.drop(DropReason::UnknownQp);
            return;
        };
        if qkey != d.qkey {
            self.counters.drop(DropReason::QkeyViolation);
            return;
        }
        if self.enqueue(qpn, Self::datagram(f, &d)) {
            self.counters.rx_accepted += 1;
        }
    }
}
