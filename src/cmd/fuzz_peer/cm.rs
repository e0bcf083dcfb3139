//! `roce fuzz-peer --target cm`: stateful fuzzing of the peer kernel's CM (ib_cm and rdma_cm,
//! which answer on QP1).
//!
//! The generator draws *sequences*: a connection (REQ ▶ REP/REJ/MRA ▶ RTU ▶ DREQ ▶ DREP), a
//! service ID resolution (SIDR_REQ ▶ SIDR_REP), a connection that goes astray after the REP
//! (MRA, LAP, APR, REJ, a second REP, DREP instead of RTU), and stray messages for comm IDs
//! the kernel never gave out. REQs and SIDR_REQs are aimed at the `--service`s (the listening
//! rdma_cm services in the guest) with the RDMA-CM IP header in their private data, so that
//! rdma_cm accepts them. Each message is built from roce-wire's CM Reprs and some are mutated
//! field by field (comm IDs, QPN, starting PSN, timeouts, retry counts, path fields, MAD
//! header, length fields, private data); the order of a sequence is mutated too (a message
//! dropped, repeated, two swapped, one for another comm ID injected). What the kernel answers
//! (REP's comm ID and QPN) feeds the messages after it, so the sequences reach the states
//! past the handshake. Everything is drawn from one seeded [`Rng`]: with no answers, the same
//! seed gives the same frames.

use std::collections::{BTreeMap, VecDeque};
use std::fs;
use std::io;
use std::net::IpAddr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use roce_net::device::Device;
use roce_net::pcap::PcapFileWriter;
use roce_net::raw::RawSocket;
use roce_wire::bth::{self, Opcode};
use roce_wire::cm::{self, attr, cma_hdr, CmMessage, MsgResponse, RejReason, SidrStatus};
use roce_wire::ext::ExtHeaders;
use roce_wire::mad::{MadRepr, Method, MgmtClass};
use roce_wire::{Gid, GSI_QKEY};

use super::{ddmin, reset_peer, write_pcap, Args, Endpoints, Generator, Rng, Summary};

/// An rdma_cm port space a `--service` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PortSpace {
    /// RDMA_PS_TCP (connections: REQ).
    Tcp,
    /// RDMA_PS_UDP (datagrams: SIDR_REQ).
    Udp,
}

/// A listening rdma_cm service in the peer: `tcp:7174` or `udp:7174`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Service {
    /// The port space.
    pub space: PortSpace,
    /// The port.
    pub port: u16,
}

impl Service {
    /// The RDMA-CM IP ServiceID: `(ps << 16) + port` (`rdma_get_service_id()`).
    pub fn service_id(&self) -> u64 {
        let ps = match self.space {
            PortSpace::Tcp => cma_hdr::RDMA_PS_TCP,
            PortSpace::Udp => cma_hdr::RDMA_PS_UDP,
        };
        cma_hdr::service_id(ps, self.port)
    }
}

impl std::str::FromStr for Service {
    type Err = String;
    fn from_str(s: &str) -> Result<Service, String> {
        let (ps, port) = s.split_once(':').ok_or_else(|| format!("'{s}' is not PS:PORT (tcp:7174, udp:7174)"))?;
        let space = match ps.to_ascii_lowercase().as_str() {
            "tcp" => PortSpace::Tcp,
            "udp" => PortSpace::Udp,
            _ => return Err(format!("port space '{ps}' is neither tcp nor udp")),
        };
        let port = port.parse::<u16>().map_err(|_| format!("'{port}' is not a port (0..=65535)"))?;
        Ok(Service { space, port })
    }
}

/// The CM messages the fuzzer sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MsgKind {
    /// ConnectRequest.
    Req,
    /// ConnectReply.
    Rep,
    /// ReadyToUse.
    Rtu,
    /// DisconnectRequest.
    Dreq,
    /// DisconnectReply.
    Drep,
    /// ConnectReject.
    Rej,
    /// Message Receipt Acknowledgement.
    Mra,
    /// LoadAlternatePath.
    Lap,
    /// AlternatePathResponse.
    Apr,
    /// Service ID Resolution Request.
    SidrReq,
    /// Service ID Resolution Response.
    SidrRep,
}

impl MsgKind {
    /// Every kind.
    pub const ALL: [MsgKind; 11] = [
        MsgKind::Req,
        MsgKind::Rep,
        MsgKind::Rtu,
        MsgKind::Dreq,
        MsgKind::Drep,
        MsgKind::Rej,
        MsgKind::Mra,
        MsgKind::Lap,
        MsgKind::Apr,
        MsgKind::SidrReq,
        MsgKind::SidrRep,
    ];

    /// The MAD attribute ID.
    pub const fn attribute_id(self) -> u16 {
        match self {
            MsgKind::Req => attr::REQ,
            MsgKind::Rep => attr::REP,
            MsgKind::Rtu => attr::RTU,
            MsgKind::Dreq => attr::DREQ,
            MsgKind::Drep => attr::DREP,
            MsgKind::Rej => attr::REJ,
            MsgKind::Mra => attr::MRA,
            MsgKind::Lap => attr::LAP,
            MsgKind::Apr => attr::APR,
            MsgKind::SidrReq => attr::SIDR_REQ,
            MsgKind::SidrRep => attr::SIDR_REP,
        }
    }

    /// The message's name ("REQ", "SIDR_REP", …).
    pub const fn name(self) -> &'static str {
        attr::name(self.attribute_id())
    }
}

/// The shape of a sequence before its order is mutated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceKind {
    /// REQ ▶ REP ▶ RTU ▶ DREQ ▶ DREP.
    Connect,
    /// SIDR_REQ ▶ SIDR_REP.
    Sidr,
    /// REQ ▶ REP ▶ something other than RTU.
    Astray,
    /// Messages for connections the kernel does not know.
    Stray,
}

/// One step of a sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Send this message; `foreign`: for another comm ID / request ID than the sequence's.
    Send {
        /// The message.
        kind: MsgKind,
        /// For another comm ID than the sequence's (an injected message).
        foreign: bool,
    },
    /// Wait this many milliseconds at most for the kernel's answer to what was sent.
    Await(u32),
}

/// What the kernel told us about a sequence's connection (from its REP, MRA or REJ).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PeerSide {
    /// The kernel's local comm ID (our remote comm ID).
    pub comm_id: u32,
    /// The kernel's QPN (REP's local QPN).
    pub qpn: u32,
    /// The kernel's starting PSN.
    pub psn: u32,
}

/// One sequence: its steps and the state its messages are built from.
#[derive(Debug, Clone)]
pub struct Sequence {
    /// Its shape.
    pub kind: SequenceKind,
    /// The steps left.
    pub steps: VecDeque<Step>,
    /// Our comm ID (and SIDR request ID).
    pub local_comm_id: u32,
    /// The service the REQ / SIDR_REQ goes to.
    pub service: Service,
    /// Our QPN in the REQ.
    pub local_qpn: u32,
    /// Our starting PSN in the REQ.
    pub starting_psn: u32,
    /// What the kernel said (None until it answered).
    pub peer: Option<PeerSide>,
    /// Set when an answer for the sequence arrived (cleared by each Await).
    pub answered: bool,
}

/// The CM message generator.
#[derive(Debug, Clone)]
pub struct CmGenerator {
    /// Keep every message within a MAD's 256 bytes (true unless `--kill-gsi`): a UD SEND to
    /// QP1 longer than that puts a 6.1 peer's GSI QP in the error state (spec/kernel-findings.md
    /// §2). Off, a mutated message may be a MAD with trailing bytes.
    pub spare_gsi: bool,
    rng: Rng,
    ep: Endpoints,
    services: Vec<Service>,
    /// The frame generator's emitter (Ethernet to ICRC), not its random draws.
    framer: Generator,
    tid: u64,
    psn: u32,
    /// Mutated messages so far.
    pub mutated: u64,
    /// Messages built as a MAD with trailing bytes (longer than 256 bytes) so far.
    pub trailing: u64,
}

/// How long to wait for the kernel's answer to a REQ or SIDR_REQ (rdma_cm hands it to the
/// listening process, which accepts from userspace: a TCG guest takes tens of ms).
const AWAIT_HANDSHAKE_MS: u32 = 1500;
/// How long to wait after other messages (the kernel answers from its own context).
const AWAIT_OTHER_MS: u32 = 150;
/// With `--kill-gsi`, the share (%) of mutated messages that get trailing bytes.
const TRAILING_PCT: u64 = 10;
/// How many trailing bytes: one past a MAD, a few, and up to a 1000-byte SEND (the frame of
/// spec/kernel-findings.md §2).
const TRAILING_LENS: [usize; 5] = [1, 4, 40, 256, 744];
/// The TIDs of the CM fuzzer's messages (the kernel's answers to the REQ echo nothing of it,
/// but a capture tells them apart from the probes').
const CM_TID_TAG: u64 = 0xC300_0000_0000_0000;

impl CmGenerator {
    /// A generator for `ep` aiming REQs and SIDR_REQs at `services` (empty: the RDMA-CM
    /// defaults tcp:7471 and udp:7174), seeded with `seed`.
    pub fn new(seed: u64, ep: Endpoints, services: &[Service]) -> CmGenerator {
        let services = if services.is_empty() {
            vec![Service { space: PortSpace::Tcp, port: 7471 }, Service { space: PortSpace::Udp, port: 7174 }]
        } else {
            services.to_vec()
        };
        CmGenerator {
            spare_gsi: true,
            rng: Rng::new(seed),
            ep,
            services,
            framer: Generator::new(0, ep),
            tid: 0,
            psn: 0,
            mutated: 0,
            trailing: 0,
        }
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.rng.below(xs.len() as u64) as usize]
    }

    fn u32_edge(&mut self) -> u32 {
        let r = self.rng.next_u64() as u32;
        self.pick(&[0, 1, 0x7f_ffff, 0xff_ffff, 0x100_0000, 0x7fff_ffff, 0x8000_0000, u32::MAX, r])
    }

    fn service_of(&mut self, space: Option<PortSpace>) -> Service {
        let matching: Vec<Service> =
            self.services.iter().copied().filter(|s| space.is_none_or(|p| s.space == p)).collect();
        if matching.is_empty() || self.rng.pct(10) {
            // a closed one, or the wrong port space
            let port = self.pick(&[1u16, 7174, 7471, 0, 65535]);
            let space = space.unwrap_or(PortSpace::Tcp);
            return Service { space: if self.rng.pct(30) { other(space) } else { space }, port };
        }
        self.pick(&matching)
    }

    /// The next sequence: its shape, then its order mutated (30 %).
    pub fn next_sequence(&mut self) -> Sequence {
        let kind = match self.rng.below(100) {
            0..=39 => SequenceKind::Connect,
            40..=64 => SequenceKind::Sidr,
            65..=84 => SequenceKind::Astray,
            _ => SequenceKind::Stray,
        };
        let send = |kind| Step::Send { kind, foreign: false };
        let hs = Step::Await(AWAIT_HANDSHAKE_MS);
        let other_wait = Step::Await(AWAIT_OTHER_MS);
        let mut steps: Vec<Step> = match kind {
            SequenceKind::Connect => {
                vec![send(MsgKind::Req), hs, send(MsgKind::Rtu), other_wait, send(MsgKind::Dreq), other_wait]
            }
            SequenceKind::Sidr => vec![send(MsgKind::SidrReq), hs],
            SequenceKind::Astray => {
                let k = self.pick(&[
                    MsgKind::Mra,
                    MsgKind::Lap,
                    MsgKind::Apr,
                    MsgKind::Rej,
                    MsgKind::Rep,
                    MsgKind::Drep,
                    MsgKind::Dreq,
                    MsgKind::Req,
                ]);
                let mut v = vec![send(MsgKind::Req), hs, send(k), other_wait];
                if self.rng.pct(50) {
                    v.extend([send(MsgKind::Rtu), other_wait]);
                }
                v.extend([send(MsgKind::Dreq), other_wait]);
                v
            }
            SequenceKind::Stray => {
                let n = 1 + self.rng.below(4);
                let mut v = Vec::new();
                for _ in 0..n {
                    let k = self.pick(&MsgKind::ALL);
                    v.push(send(k));
                }
                v.push(other_wait);
                v
            }
        };
        if self.rng.pct(30) {
            self.mutate_order(&mut steps);
        }
        let service = match kind {
            SequenceKind::Sidr => self.service_of(Some(PortSpace::Udp)),
            SequenceKind::Stray => self.service_of(None),
            _ => self.service_of(Some(PortSpace::Tcp)),
        };
        Sequence {
            kind,
            steps: steps.into(),
            local_comm_id: self.rng.next_u64() as u32 | 0x100,
            service,
            local_qpn: 0x100 + self.rng.below(0x1000) as u32,
            starting_psn: self.rng.next_u64() as u32 & 0xff_ffff,
            peer: None,
            answered: false,
        }
    }

    /// One order mutation: drop a message, repeat one, swap two, or inject one for another
    /// comm ID.
    fn mutate_order(&mut self, steps: &mut Vec<Step>) {
        let sends: Vec<usize> = (0..steps.len()).filter(|&i| matches!(steps[i], Step::Send { .. })).collect();
        if sends.is_empty() {
            return;
        }
        let i = sends[self.rng.below(sends.len() as u64) as usize];
        match self.rng.below(4) {
            0 if sends.len() > 1 => {
                steps.remove(i);
            }
            1 => {
                let s = steps[i];
                steps.insert(i + 1, s);
            }
            2 if sends.len() > 1 => {
                let j = sends[self.rng.below(sends.len() as u64) as usize];
                steps.swap(i, j);
            }
            _ => {
                let kind = self.pick(&MsgKind::ALL);
                steps.insert(i + 1, Step::Send { kind, foreign: true });
            }
        }
    }

    /// The frame of `kind` for `seq` (a UD SEND to QP1 carrying the CM MAD), mutated in one to
    /// three fields for a third of the messages.
    pub fn build(&mut self, seq: &Sequence, kind: MsgKind, foreign: bool) -> Vec<u8> {
        self.tid += 1;
        let local = if foreign { self.rng.next_u64() as u32 } else { seq.local_comm_id };
        let peer = seq.peer.unwrap_or(PeerSide {
            comm_id: if kind == MsgKind::Req { 0 } else { self.rng.next_u64() as u32 },
            qpn: self.rng.below(0x100) as u32,
            psn: 0,
        });
        let mut msg = self.message(seq, kind, local, peer);
        let mutate = self.rng.pct(33);
        let mut mad = msg.to_mad(CM_TID_TAG | self.tid);
        if mutate {
            self.mutated += 1;
            for _ in 0..1 + self.rng.below(3) {
                self.mutate_field(&mut msg, &mut mad);
            }
            let hdr = mad.header;
            mad = msg.to_mad(hdr.transaction_id);
            mad.header = hdr;
        }
        let mut bytes = mad.to_bytes().to_vec();
        if mutate && self.rng.pct(10) {
            // a short MAD: the CM reads what the MAD layer's receive buffer holds past it
            let n = 24 + self.rng.below(232) as usize;
            bytes.truncate(n);
        } else if mutate && !self.spare_gsi && self.rng.pct(TRAILING_PCT) {
            // a MAD with trailing bytes: the UD SEND is longer than the MAD layer's receive
            // buffer (a GRH and 256 bytes); drawn only with --kill-gsi, so that the frames of a
            // seed without it stay what they were
            let n = self.pick(&TRAILING_LENS);
            bytes.extend((0..n).map(|_| self.rng.next_u64() as u8));
            self.trailing += 1;
        }
        self.psn = (self.psn + 1) & 0xff_ffff;
        let mut b = bth::Repr::new(Opcode::UdSendOnly, 1, self.psn);
        b.ack_req = true;
        self.frame(b, &bytes)
    }

    fn frame(&self, b: bth::Repr, payload: &[u8]) -> Vec<u8> {
        self.framer.repr_frame(b, ExtHeaders::deth(GSI_QKEY, 1), payload, true)
    }

    fn cma_header(&mut self) -> [u8; cma_hdr::HEADER_LEN] {
        let port = 32768 + self.rng.below(28000) as u16;
        let hdr = match (self.ep.src, self.ep.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => cma_hdr::Repr::new_v4(s, port, d),
            (s, d) => {
                let v6 = |a: IpAddr| match a {
                    IpAddr::V6(x) => x,
                    IpAddr::V4(x) => x.to_ipv6_mapped(),
                };
                cma_hdr::Repr::new_v6(v6(s), port, v6(d))
            }
        };
        let mut out = [0u8; cma_hdr::HEADER_LEN];
        hdr.emit_bytes(&mut out);
        out
    }

    fn path(&self) -> cm::PathRepr {
        cm::PathRepr {
            local_lid: 0xffff,
            remote_lid: 0xffff,
            local_gid: Gid::from_ip(self.ep.src),
            remote_gid: Gid::from_ip(self.ep.dst),
            hop_limit: 64,
            local_ack_timeout: 18,
            ..Default::default()
        }
    }

    /// The well-formed message of `kind`, as the kernel's own CM would send it.
    fn message(&mut self, seq: &Sequence, kind: MsgKind, local: u32, peer: PeerSide) -> CmMessage {
        match kind {
            MsgKind::Req => {
                let mut m = cm::ReqRepr {
                    local_comm_id: local,
                    service_id: seq.service.service_id(),
                    local_ca_guid: 0x0252_00ff_fe00_0001,
                    local_qpn: seq.local_qpn,
                    responder_resources: 1,
                    initiator_depth: 1,
                    // ~1 s and 5 retries (rdma_cm's own are 20 and 15): a REP this
                    // sequence leaves unanswered is retransmitted for seconds, not minutes
                    remote_cm_response_timeout: 18,
                    starting_psn: seq.starting_psn,
                    local_cm_response_timeout: 18,
                    retry_count: 7,
                    partition_key: 0xffff,
                    path_mtu: 3,
                    rnr_retry_count: 7,
                    max_cm_retries: 5,
                    srq: self.rng.pct(20),
                    primary_path: self.path(),
                    ..Default::default()
                };
                let h = self.cma_header();
                m.private_data[..h.len()].copy_from_slice(&h);
                CmMessage::Req(m)
            }
            MsgKind::Rep => {
                let mut m = cm::RepRepr {
                    local_comm_id: local,
                    remote_comm_id: peer.comm_id,
                    local_qpn: seq.local_qpn,
                    starting_psn: seq.starting_psn,
                    responder_resources: 1,
                    initiator_depth: 1,
                    target_ack_delay: 15,
                    rnr_retry_count: 7,
                    local_ca_guid: 0x0252_00ff_fe00_0001,
                    ..Default::default()
                };
                m.private_data[0] = 0;
                CmMessage::Rep(m)
            }
            MsgKind::Rtu => {
                CmMessage::Rtu(cm::RtuRepr { local_comm_id: local, remote_comm_id: peer.comm_id, ..Default::default() })
            }
            MsgKind::Drep => CmMessage::Drep(cm::DrepRepr {
                local_comm_id: local,
                remote_comm_id: peer.comm_id,
                ..Default::default()
            }),
            MsgKind::Dreq => CmMessage::Dreq(cm::DreqRepr {
                local_comm_id: local,
                remote_comm_id: peer.comm_id,
                remote_qpn_eecn: peer.qpn,
                ..Default::default()
            }),
            MsgKind::Rej => {
                let reason = self.pick(&[28u16, 1, 2, 3, 4, 5, 8, 26, 27, 30, 33, 34, 35]);
                CmMessage::Rej(cm::RejRepr {
                    local_comm_id: local,
                    remote_comm_id: peer.comm_id,
                    message_rejected: self.pick(&[MsgResponse::Req, MsgResponse::Rep, MsgResponse::Other]),
                    reason: RejReason::from(reason),
                    ..Default::default()
                })
            }
            MsgKind::Mra => CmMessage::Mra(cm::MraRepr {
                local_comm_id: local,
                remote_comm_id: peer.comm_id,
                message_mraed: self.pick(&[MsgResponse::Req, MsgResponse::Rep, MsgResponse::Other]),
                service_timeout: self.rng.below(32) as u8,
                ..Default::default()
            }),
            MsgKind::SidrReq => {
                let mut m = cm::SidrReqRepr {
                    request_id: local,
                    partition_key: 0xffff,
                    service_id: seq.service.service_id(),
                    ..Default::default()
                };
                let h = self.cma_header();
                m.private_data[..h.len()].copy_from_slice(&h);
                CmMessage::SidrReq(m)
            }
            MsgKind::SidrRep => CmMessage::SidrRep(cm::SidrRepRepr {
                request_id: local,
                status: SidrStatus::from(self.rng.below(7) as u8),
                qpn: seq.local_qpn,
                service_id: seq.service.service_id(),
                qkey: 0x0123_4567,
                ..Default::default()
            }),
            MsgKind::Lap => {
                // LAP [cm_msgs.h CM_LAP_*]: comm IDs, remote QPN (12..15) and the CM response
                // timeout (byte 15), the alternate path from byte 20 (LIDs, GIDs, flow label,
                // traffic class, hop limit, rate, SL, local ACK timeout), private data from 56
                let mut d = [0u8; cm::DATA_LEN];
                d[0..4].copy_from_slice(&local.to_be_bytes());
                d[4..8].copy_from_slice(&peer.comm_id.to_be_bytes());
                d[12..15].copy_from_slice(&peer.qpn.to_be_bytes()[1..]);
                d[15] = 20 << 3;
                d[20..22].copy_from_slice(&0xffffu16.to_be_bytes());
                d[22..24].copy_from_slice(&0xffffu16.to_be_bytes());
                d[24..40].copy_from_slice(&Gid::from_ip(self.ep.src).0);
                d[40..56].copy_from_slice(&Gid::from_ip(self.ep.dst).0);
                CmMessage::Other { attribute_id: attr::LAP, data: d }
            }
            MsgKind::Apr => {
                // APR [cm_msgs.h CM_APR_*]: comm IDs, additional info length (8), AP status
                // (9), additional info (12..84), private data (84..232)
                let mut d = [0u8; cm::DATA_LEN];
                d[0..4].copy_from_slice(&local.to_be_bytes());
                d[4..8].copy_from_slice(&peer.comm_id.to_be_bytes());
                d[9] = self.rng.below(13) as u8;
                CmMessage::Other { attribute_id: attr::APR, data: d }
            }
        }
    }

    /// One structure-aware mutation of `msg` (a field of its body at a boundary or random
    /// value) or of its MAD header.
    fn mutate_field(&mut self, msg: &mut CmMessage, mad: &mut MadRepr) {
        if self.rng.pct(12) {
            let h = &mut mad.header;
            match self.rng.below(5) {
                0 => h.class_version = self.pick(&[1, 3, 0, 0xff]),
                1 => h.method = self.pick(&[Method::Get, Method::Set, Method::Send, Method::Unknown(0x7f)]),
                2 => h.attribute_modifier = self.u32_edge(),
                3 => h.status = roce_wire::mad::MadStatus(self.pick(&[0x0004u16, 0x001c, 0xffff])),
                _ => h.response = true,
            }
            return;
        }
        let r = self.rng.next_u64();
        let v32 = self.u32_edge();
        let b = (r >> 8) as u8;
        match msg {
            CmMessage::Req(m) => match self.rng.below(24) {
                0 => m.local_comm_id = v32,
                1 => m.service_id = self.pick(&[0, u64::MAX, r, cma_hdr::service_id(cma_hdr::RDMA_PS_IB, 7471)]),
                2 => m.local_qpn = v32 & 0xff_ffff,
                3 => m.starting_psn = v32 & 0xff_ffff,
                4 => m.responder_resources = b,
                5 => m.initiator_depth = b,
                6 => m.remote_cm_response_timeout = b & 31,
                7 => m.local_cm_response_timeout = b & 31,
                8 => m.retry_count = b & 7,
                9 => m.rnr_retry_count = b & 7,
                10 => m.max_cm_retries = b & 15,
                11 => m.transport_service_type = b & 3,
                12 => m.path_mtu = b & 15,
                13 => m.partition_key = self.pick(&[0, 0x7fff, 0x8000, r as u16]),
                14 => m.primary_path.local_gid = Gid((u128::from(r) * 0x9e37_79b9_7f4a_7c15).to_be_bytes()),
                15 => std::mem::swap(&mut m.primary_path.local_gid, &mut m.primary_path.remote_gid),
                16 => m.primary_path.hop_limit = self.pick(&[0, 1, 255]),
                17 => {
                    m.primary_path.flow_label = v32 & 0xf_ffff;
                    m.primary_path.traffic_class = b;
                    m.primary_path.sl = b & 15;
                }
                18 => {
                    // an alternate path: the kernel treats a nonzero local LID as present
                    m.alternate_path = m.primary_path;
                    m.alternate_path.local_lid = (r as u16).max(1);
                }
                19 => m.local_qkey = v32,
                20 => m.extended_transport_type = b & 7,
                21 => self.mutate_private(&mut m.private_data),
                22 => m.primary_path.local_ack_timeout = b & 31,
                _ => m.end_to_end_flow_control = !m.end_to_end_flow_control,
            },
            CmMessage::SidrReq(m) => match self.rng.below(5) {
                0 => m.request_id = v32,
                1 => m.partition_key = self.pick(&[0, 0x7fff, r as u16]),
                2 => m.service_id = self.pick(&[0, u64::MAX, r]),
                3 => m.reserved_6 = [b, !b],
                _ => self.mutate_private(&mut m.private_data),
            },
            CmMessage::Rep(m) => match self.rng.below(8) {
                0 => m.local_comm_id = v32,
                1 => m.remote_comm_id = v32,
                2 => m.local_qpn = v32 & 0xff_ffff,
                3 => m.starting_psn = v32 & 0xff_ffff,
                4 => m.failover_accepted = b & 3,
                5 => m.rnr_retry_count = b & 7,
                6 => m.target_ack_delay = b & 31,
                _ => m.private_data[(b as usize) % 196] = b,
            },
            CmMessage::Rtu(m) | CmMessage::Drep(m) => match self.rng.below(3) {
                0 => m.local_comm_id = v32,
                1 => m.remote_comm_id = v32,
                _ => m.private_data[(b as usize) % 224] = b,
            },
            CmMessage::Dreq(m) => match self.rng.below(4) {
                0 => m.local_comm_id = v32,
                1 => m.remote_comm_id = v32,
                2 => m.remote_qpn_eecn = v32 & 0xff_ffff,
                _ => m.reserved_11 = b,
            },
            CmMessage::Rej(m) => match self.rng.below(6) {
                0 => m.local_comm_id = v32,
                1 => m.remote_comm_id = v32,
                2 => m.message_rejected = MsgResponse::from(b & 3),
                // 7 bits: up to 127 against a 72-byte ARI
                3 => m.reject_info_length = self.pick(&[72, 73, 127, b & 127]),
                4 => m.reason = RejReason::from(r as u16),
                _ => m.ari[(b as usize) % 72] = b,
            },
            CmMessage::Mra(m) => match self.rng.below(4) {
                0 => m.local_comm_id = v32,
                1 => m.remote_comm_id = v32,
                2 => m.message_mraed = MsgResponse::from(b & 3),
                _ => m.service_timeout = b & 31,
            },
            CmMessage::SidrRep(m) => match self.rng.below(5) {
                0 => m.request_id = v32,
                1 => m.status = SidrStatus::from(b),
                2 => m.additional_info_length = self.pick(&[72, 73, 255, b]),
                3 => m.qpn = v32 & 0xff_ffff,
                _ => m.service_id = r,
            },
            CmMessage::Other { data, .. } => {
                // LAP / APR: a length byte, a comm ID or any byte at an edge value
                match self.rng.below(3) {
                    0 => data[8] = self.pick(&[72, 73, 255, b]),
                    1 => data[4..8].copy_from_slice(&v32.to_be_bytes()),
                    _ => data[(r as usize) % cm::DATA_LEN] = b,
                }
            }
        }
    }

    /// The RDMA-CM header (or what follows it) in a REQ's or SIDR_REQ's private data.
    fn mutate_private(&mut self, pd: &mut [u8]) {
        let r = self.rng.next_u64();
        match self.rng.below(6) {
            0 => pd[0] = self.pick(&[1, 0xff, r as u8]),                // CMA version
            1 => pd[1] = self.pick(&[0x00, 0x60, 0x40, 0xf0, r as u8]), // IP version
            2 => pd[20..36].copy_from_slice(&(r as u128 * 0x1_0000_0001).to_be_bytes()), // dst
            3 => pd.iter_mut().for_each(|x| *x = 0),
            4 => pd.iter_mut().enumerate().for_each(|(i, x)| *x = (r >> (i % 8 * 8)) as u8),
            _ => pd[2..4].copy_from_slice(&(r as u16).to_be_bytes()), // source port
        }
    }
}

fn other(space: PortSpace) -> PortSpace {
    match space {
        PortSpace::Tcp => PortSpace::Udp,
        PortSpace::Udp => PortSpace::Tcp,
    }
}

/// A CM MAD the kernel sent: its attribute ID and body, or None for anything else.
pub fn cm_answer(frame_bytes: &[u8]) -> Option<(u16, Option<CmMessage>)> {
    let f = roce_wire::frame::parse(frame_bytes).ok()?;
    let payload = f.repr.payload;
    let h = roce_wire::mad::MadHeader::parse_bytes(payload).ok()?;
    if h.mgmt_class != MgmtClass::ComMgmt {
        return None;
    }
    let body = payload.get(cm::DATA_OFFSET..).and_then(|d| CmMessage::parse(h.attribute_id, d).ok());
    Some((h.attribute_id, body))
}

impl Sequence {
    /// Take in a CM message the kernel sent; true when it answers this sequence (a REP, REJ,
    /// DREQ, DREP or SIDR_REP for its comm ID). A REP's comm ID and QPN feed the messages
    /// after it; an MRA's comm ID too, but the wait goes on for the REP.
    pub fn learn(&mut self, msg: &CmMessage) -> bool {
        let me = self.local_comm_id;
        match msg {
            CmMessage::Rep(r) if r.remote_comm_id == me => {
                self.peer = Some(PeerSide { comm_id: r.local_comm_id, qpn: r.local_qpn, psn: r.starting_psn });
                true
            }
            CmMessage::Mra(r) if r.remote_comm_id == me => {
                let qpn = self.peer.map_or(0, |p| p.qpn);
                self.peer = Some(PeerSide { comm_id: r.local_comm_id, qpn, psn: 0 });
                false
            }
            CmMessage::Rej(r) => r.remote_comm_id == me,
            CmMessage::Dreq(r) => r.remote_comm_id == me,
            CmMessage::Drep(r) => r.remote_comm_id == me,
            CmMessage::SidrRep(r) => r.request_id == me,
            _ => false,
        }
    }
}

/// What the kernel's log shows that fails a campaign (`--log-cmd`'s lines are scanned for
/// them): a kernel bug, warning, oops, GP fault, lockup, KASAN report or panic.
pub const KERNEL_TROUBLE: [&str; 7] =
    ["BUG:", "WARNING:", "Oops", "general protection", "soft lockup", "KASAN", "Kernel panic"];

/// The lines of `log` holding one of [`KERNEL_TROUBLE`].
pub fn kernel_trouble(log: &str) -> Vec<String> {
    log.lines().filter(|l| KERNEL_TROUBLE.iter().any(|t| l.contains(t))).map(str::to_string).collect()
}

/// The CM part of the summary.
#[derive(Debug, Clone, Default)]
pub struct CmStats {
    /// Messages sent, per CM message name.
    pub sent: BTreeMap<String, u64>,
    /// Messages the kernel sent back, per CM message name (probe answers not counted).
    pub answers: BTreeMap<String, u64>,
    /// Sequences run.
    pub sequences: u64,
    /// Messages mutated in a field or their MAD header.
    pub mutated: u64,
    /// Messages sent as a MAD with trailing bytes (`--kill-gsi` only).
    pub trailing: u64,
    /// Sequences whose REQ or SIDR_REQ the kernel answered.
    pub handshakes_answered: u64,
    /// `--log-cmd` runs.
    pub log_checks: u64,
    /// Kernel-log findings.
    pub findings: Vec<Finding>,
}

/// Kernel trouble `--log-cmd` showed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Finding {
    /// Its number (finding-N.pcap).
    pub n: u64,
    /// The log lines that hold trouble.
    pub lines: Vec<String>,
    /// Frames sent since the last clean log check (finding-N.pcap).
    pub frames: usize,
    /// Frames of the minimised sequence (finding-N-min.pcap), with `--reset-cmd`; None when
    /// not minimised or not reproduced.
    pub min_frames: Option<usize>,
    /// Resets the minimisation used.
    pub resets: usize,
}

impl CmStats {
    /// The `cm` object of the JSON summary.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "sent": self.sent,
            "answers": self.answers,
            "sequences": self.sequences,
            "mutated": self.mutated,
            "trailing": self.trailing,
            "handshakes_answered": self.handshakes_answered,
            "log_checks": self.log_checks,
            "findings": self.findings.iter().map(|f| serde_json::json!({
                "n": f.n, "lines": f.lines, "frames": f.frames, "min_frames": f.min_frames, "resets": f.resets,
            })).collect::<Vec<_>>(),
        })
    }
}

/// Run `cmd` with `sh -c` and return its standard output; killed after `timeout`.
pub fn run_log_cmd(cmd: &str, timeout: Duration) -> Result<String, String> {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let mut child = Command::new("sh")
        .args(["-c", cmd])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("--log-cmd: sh: {e}"))?;
    let Some(mut out) = child.stdout.take() else { return Err("--log-cmd: no stdout".to_string()) };
    // read in a thread so that a chatty command never blocks on a full pipe
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = io::Read::read_to_end(&mut out, &mut s);
        String::from_utf8_lossy(&s).into_owned()
    });
    let t0 = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(st)) => {
                let text = reader.join().unwrap_or_default();
                return if st.success() { Ok(text) } else { Err(format!("--log-cmd exited with {st}")) };
            }
            Ok(None) => {}
            Err(e) => return Err(format!("--log-cmd: wait: {e}")),
        }
        if t0.elapsed() >= timeout || super::SIGNALLED.load(Ordering::Relaxed) != 0 {
            // SAFETY: kill(2) on the process group we created; no memory is touched.
            unsafe {
                libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL);
            }
            let _ = child.wait();
            return Err(format!("--log-cmd did not finish within {} s", timeout.as_secs_f64()));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

type Pcap = Option<PcapFileWriter<roce_net::pcap::CaptureFile>>;

/// The CM fuzzer's loop (`--target cm`): sequences until `--duration`, a liveness probe every
/// `--probe-every` messages, `--log-cmd` every `--log-every` seconds. Err: an I/O error on the
/// socket (the run ends with exit 3).
pub(super) fn run(
    a: &Args,
    sock: &mut RawSocket,
    ep: Endpoints,
    pcap: &mut Pcap,
    s: &mut Summary,
) -> Result<(), String> {
    let seed = s.seed;
    let mut gen = CmGenerator::new(seed, ep, &a.service);
    gen.spare_gsi = !a.kill_gsi;
    // the probes draw from their own generator, so that they do not shift the sequences
    let mut probes = Generator::new(seed ^ 0x5052_4f42_4553, ep);
    let mut st = CmStats::default();
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(a.duration);
    let gap = Duration::from_secs_f64(1.0 / a.rate);
    let log_every = Duration::from_secs_f64(a.log_every);
    let log_timeout = Duration::from_secs(60);
    let mut buf = vec![0u8; roce_net::device::MAX_FRAME_LEN];
    let mut since_probe: Vec<Vec<u8>> = Vec::new();
    let mut since_log: Vec<Vec<u8>> = Vec::new();
    let mut next_send = Instant::now();
    let mut last_status = t0;
    let mut last_log = t0;
    let mut n_probe = 0u64;
    if let Some(cmd) = &a.log_cmd {
        // what the log held before the run is not ours
        let _ = run_log_cmd(cmd, log_timeout)?;
    }
    let count_answer = |st: &mut CmStats, seq: Option<&mut Sequence>, f: &[u8]| -> bool {
        let Some((id, body)) = cm_answer(f) else { return false };
        *st.answers.entry(attr::name(id).to_string()).or_default() += 1;
        match (seq, body) {
            (Some(seq), Some(m)) => seq.learn(&m),
            _ => false,
        }
    };
    'run: while Instant::now() < end && super::SIGNALLED.load(Ordering::Relaxed) == 0 {
        let mut seq = gen.next_sequence();
        st.sequences += 1;
        let mut handshake_pending = false;
        while let Some(step) = seq.steps.pop_front() {
            if super::SIGNALLED.load(Ordering::Relaxed) != 0 {
                break 'run;
            }
            match step {
                Step::Send { kind, foreign } => {
                    let f = gen.build(&seq, kind, foreign);
                    let now = Instant::now();
                    if next_send > now {
                        std::thread::sleep(next_send - now);
                    }
                    next_send = Instant::now().max(next_send) + gap;
                    if super::send_counted(&f, s, sock, pcap, ep, t0) {
                        *st.sent.entry(kind.name().to_string()).or_default() += 1;
                        since_probe.push(f.clone());
                        since_log.push(f);
                    }
                    handshake_pending = matches!(kind, MsgKind::Req | MsgKind::SidrReq) && !foreign;
                    seq.answered = false;
                }
                Step::Await(ms) => {
                    let deadline = Instant::now() + Duration::from_millis(u64::from(ms));
                    while !seq.answered && Instant::now() < deadline {
                        match sock.recv(&mut buf).map_err(|e| format!("receive on {}: {e}", a.iface))? {
                            Some(n) => {
                                if count_answer(&mut st, Some(&mut seq), &buf[..n]) {
                                    seq.answered = true;
                                }
                            }
                            None => std::thread::sleep(Duration::from_millis(1)),
                        }
                    }
                    if seq.answered && handshake_pending {
                        st.handshakes_answered += 1;
                    }
                    handshake_pending = false;
                }
            }
        }
        while let Some(n) = sock.recv(&mut buf).map_err(|e| format!("receive on {}: {e}", a.iface))? {
            count_answer(&mut st, None, &buf[..n]);
        }
        if since_probe.len() as u64 >= u64::from(a.probe_every) {
            n_probe += 1;
            let ctx = super::SendCtx { ep, t0, gap };
            let mut other = |f: &[u8]| {
                count_answer(&mut st, None, f);
            };
            match super::check_liveness(a, sock, pcap, ctx, &mut probes, n_probe, &since_probe, s, &mut other)? {
                super::Liveness::Alive => {}
                super::Liveness::Lost => {
                    if a.reset_cmd.is_some() {
                        next_send = Instant::now();
                    }
                }
                super::Liveness::RunEnds => break 'run,
            }
            since_probe.clear();
        }
        if let Some(cmd) = &a.log_cmd {
            if last_log.elapsed() >= log_every {
                last_log = Instant::now();
                check_log(a, cmd, sock, &mut probes, &mut since_log, gap, s, &mut st)?;
            }
        }
        if !a.quiet && last_status.elapsed() >= Duration::from_secs(3) {
            last_status = Instant::now();
            eprintln!(
                "#{} elapsed {:.0}s sequences {} answered {} answers {:?} probes {}/{} findings {}",
                s.sent,
                t0.elapsed().as_secs_f64(),
                st.sequences,
                st.handshakes_answered,
                st.answers,
                s.probes_answered,
                s.probes_sent,
                st.findings.len()
            );
        }
    }
    if let Some(cmd) = &a.log_cmd {
        // what the last messages left in the log (the kernel's timers may still be running)
        std::thread::sleep(Duration::from_secs(1));
        check_log(a, cmd, sock, &mut probes, &mut since_log, gap, s, &mut st)?;
    }
    st.mutated = gen.mutated;
    st.trailing = gen.trailing;
    s.cm = Some(st);
    Ok(())
}

/// Run `--log-cmd`; on kernel trouble record a finding (finding-N.pcap: the frames since the
/// last clean check) and, with `--reset-cmd`, minimise it: ddmin over those frames, each
/// candidate replayed on a freshly reset peer and judged by whether `--log-cmd` then shows
/// trouble again; then one more reset and the campaign goes on.
#[allow(clippy::too_many_arguments)]
fn check_log(
    a: &Args,
    cmd: &str,
    sock: &mut RawSocket,
    probes: &mut Generator,
    since_log: &mut Vec<Vec<u8>>,
    gap: Duration,
    s: &mut Summary,
    st: &mut CmStats,
) -> Result<(), String> {
    let log_timeout = Duration::from_secs(60);
    st.log_checks += 1;
    let text = match run_log_cmd(cmd, log_timeout) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("roce fuzz-peer: {e}");
            s.log_errors += 1;
            return Ok(());
        }
    };
    let lines = kernel_trouble(&text);
    if lines.is_empty() {
        since_log.clear();
        return Ok(());
    }
    let n = st.findings.len() as u64 + 1;
    eprintln!("roce fuzz-peer: finding {n}: the kernel log shows trouble after {} frames:", since_log.len());
    for l in &lines {
        eprintln!("  {l}");
    }
    if let Some(dir) = &a.out {
        write_pcap(&dir.join(format!("finding-{n}.pcap")), since_log);
    }
    let mut finding = Finding { n, lines, frames: since_log.len(), min_frames: None, resets: 0 };
    if let Some(reset) = &a.reset_cmd {
        let timeout = Duration::from_secs_f64(a.reset_timeout);
        let mut failed: Option<String> = None;
        let reset_and_drain = |s: &mut Summary| -> Result<(), String> {
            reset_peer(reset, timeout)?;
            s.resets += 1;
            run_log_cmd(cmd, log_timeout).map(|_| ())
        };
        let (min, calls) = ddmin(since_log, a.max_resets as usize, |xs| {
            if failed.is_some() {
                return false;
            }
            if let Err(e) = reset_and_drain(s) {
                failed = Some(e);
                return false;
            }
            for f in xs {
                let _ = sock.send(f);
                std::thread::sleep(gap);
            }
            std::thread::sleep(Duration::from_secs(1));
            match run_log_cmd(cmd, log_timeout) {
                Ok(t) => !kernel_trouble(&t).is_empty(),
                Err(e) => {
                    failed = Some(e);
                    false
                }
            }
        });
        finding.resets = calls;
        finding.min_frames = min.as_ref().map(Vec::len);
        if let (Some(m), Some(dir)) = (&min, &a.out) {
            write_pcap(&dir.join(format!("finding-{n}-min.pcap")), m);
        }
        if let Some(e) = failed {
            st.findings.push(finding);
            s.reset_error = Some(e.clone());
            return Err(e);
        }
        reset_and_drain(s)?;
        let _ = super::gsi_alive(sock, probes, &mut vec![0u8; roce_net::device::MAX_FRAME_LEN]);
    }
    st.findings.push(finding);
    since_log.clear();
    Ok(())
}

/// `report.txt` in `--out`: the summary, and per finding its log lines, its pcaps and how to
/// replay them.
pub fn write_report(dir: &Path, a: &Args, s: &Summary) {
    let mut r = String::new();
    use std::fmt::Write as _;
    let _ = writeln!(
        r,
        "roce fuzz-peer --target cm against {} on {} (seed {}, {:.0} s)",
        a.peer, a.iface, s.seed, s.duration_s
    );
    let _ = writeln!(r, "summary: {}", s.to_json());
    let Some(st) = &s.cm else { return };
    if st.findings.is_empty() {
        let _ = writeln!(r, "no kernel trouble in {} log checks", st.log_checks);
    }
    for f in &st.findings {
        let _ =
            writeln!(r, "\nfinding {}: {} frames since the last clean log check (finding-{}.pcap)", f.n, f.frames, f.n);
        for l in &f.lines {
            let _ = writeln!(r, "  {l}");
        }
        match f.min_frames {
            Some(m) => {
                let _ = writeln!(
                    r,
                    "minimised to {m} frames with {} resets: finding-{}-min.pcap; replay: roce send --iface {} {}",
                    f.resets,
                    f.n,
                    a.iface,
                    dir.join(format!("finding-{}-min.pcap", f.n)).display()
                );
            }
            None => {
                let _ = writeln!(r, "not minimised (no --reset-cmd, or not reproduced on a reset peer)");
            }
        }
    }
    for i in 1..=s.peer_unresponsive {
        let _ = writeln!(r, "\nliveness loss {i}: loss-{i}.pcap");
    }
    if let Err(e) = fs::write(dir.join("report.txt"), r) {
        eprintln!("roce fuzz-peer: {}: {e}", dir.join("report.txt").display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roce_wire::rxe_accept::RxeKernel;

    fn ep() -> Endpoints {
        Endpoints {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [0x52, 0x54, 0, 0x12, 0x34, 0x56],
            src: IpAddr::from([198, 18, 0, 1]),
            dst: IpAddr::from([198, 18, 0, 2]),
            kernel: RxeKernel::V6_1,
            gsi_index: 16,
        }
    }

    /// `n` sequences with no answers: (kind, foreign, frame) per message.
    fn run(seed: u64, n: usize) -> Vec<(MsgKind, bool, Vec<u8>)> {
        run_sparing(seed, n, true).0
    }

    /// [`run`] with the generator's `spare_gsi`; also its count of MADs with trailing bytes.
    fn run_sparing(seed: u64, n: usize, spare_gsi: bool) -> (Vec<(MsgKind, bool, Vec<u8>)>, u64) {
        let services = ["tcp:7174".parse().unwrap(), "udp:7174".parse().unwrap()];
        let mut g = CmGenerator::new(seed, ep(), &services);
        g.spare_gsi = spare_gsi;
        let mut out = Vec::new();
        for _ in 0..n {
            let mut seq = g.next_sequence();
            while let Some(step) = seq.steps.pop_front() {
                if let Step::Send { kind, foreign } = step {
                    out.push((kind, foreign, g.build(&seq, kind, foreign)));
                }
            }
        }
        (out, g.trailing)
    }

    #[test]
    fn trailing_bytes_only_with_kill_gsi() {
        let (spared, none) = run_sparing(11, 600, true);
        assert_eq!(none, 0);
        let (killing, trailing) = run_sparing(11, 600, false);
        let long: Vec<_> = killing
            .iter()
            .filter_map(|(k, _, f)| {
                let p = roce_wire::frame::parse(f).ok()?;
                (p.repr.payload.len() > 256).then(|| (*k, p.repr.payload.len(), f.clone()))
            })
            .collect();
        assert_eq!(long.len() as u64, trailing, "every MAD with trailing bytes is longer than 256 bytes");
        assert!(trailing >= 5, "{trailing} in 600 sequences");
        for (k, len, f) in &long {
            // a UD SEND to QP1 that rxe counts, carrying the CM MAD of its kind first
            assert!(ep().predict(f).is_ok(), "{}: {:?}", k.name(), ep().predict(f));
            assert!(*len <= 256 + 744 + 3, "{}: {len}", k.name());
            assert_eq!(cm_answer(f).map(|(id, _)| id), Some(k.attribute_id()));
        }
        // up to the first message mutated differently, the two runs send the same frames
        let first = killing.iter().zip(&spared).position(|(a, b)| a != b).unwrap_or(killing.len());
        assert!(first > 0 && killing[..first] == spared[..first]);
    }

    #[test]
    fn services_parse_to_rdma_cm_service_ids() {
        let s: Service = "tcp:7174".parse().unwrap();
        assert_eq!(s.service_id(), 0x0000_0000_0106_1C06);
        let s: Service = "UDP:7174".parse().unwrap();
        assert_eq!(s.service_id(), 0x0000_0000_0111_1C06);
        for bad in ["tcp", "sctp:1", "tcp:65536", "udp:x", ""] {
            assert!(bad.parse::<Service>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_frames() {
        let a = run(7, 200);
        assert_eq!(a, run(7, 200));
        assert_ne!(a, run(8, 200));
    }

    #[test]
    fn every_message_type_and_order_mutation_is_produced() {
        let msgs = run(1, 1000);
        for k in MsgKind::ALL {
            assert!(msgs.iter().any(|(m, _, _)| *m == k), "{} never sent", k.name());
        }
        assert!(msgs.iter().any(|(_, foreign, _)| *foreign), "no injected message");
        // every frame is a UD SEND to QP1 within a MAD's 256 bytes (a longer one kills 6.1's GSI QP)
        for (k, _, f) in &msgs {
            let p = roce_wire::frame::parse(f).unwrap_or_else(|e| panic!("{}: {e}", k.name()));
            assert_eq!(p.repr.bth.dest_qp, 1);
            assert!(p.repr.payload.len() <= 256 && p.repr.payload.len() >= 24, "{}", k.name());
        }
    }

    #[test]
    fn well_formed_frames_decode_with_roce_decode_and_reach_the_gsi_qp() {
        let mut g = CmGenerator::new(3, ep(), &[]);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..400 {
            let mut seq = g.next_sequence();
            while let Some(step) = seq.steps.pop_front() {
                let Step::Send { kind, foreign } = step else { continue };
                let before = g.mutated;
                let f = g.build(&seq, kind, foreign);
                if g.mutated != before {
                    continue;
                }
                let d = roce_decode::decode::decode_ethernet(&f);
                assert!(d.summary.contains(kind.name()), "{}: {}", kind.name(), d.summary);
                assert!(ep().predict(&f).is_ok(), "{}: {:?}", d.summary, ep().predict(&f));
                let (id, body) = cm_answer(&f).expect("a CM MAD");
                assert_eq!(id, kind.attribute_id());
                if !matches!(kind, MsgKind::Lap | MsgKind::Apr) {
                    assert!(body.is_some(), "{}", kind.name());
                }
                seen.insert(kind);
            }
        }
        assert_eq!(seen.len(), MsgKind::ALL.len(), "{seen:?}");
    }

    #[test]
    fn over_ipv6_the_messages_name_the_ipv6_gids_and_cma_addresses() {
        let (src, dst): (std::net::Ipv6Addr, std::net::Ipv6Addr) =
            ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        let e = Endpoints { src: IpAddr::V6(src), dst: IpAddr::V6(dst), ..ep() };
        let mut g = CmGenerator::new(4, e, &[]);
        let (mut reqs, mut sidrs) = (0, 0);
        for _ in 0..300 {
            let mut seq = g.next_sequence();
            while let Some(step) = seq.steps.pop_front() {
                let Step::Send { kind, foreign } = step else { continue };
                let before = g.mutated;
                let f = g.build(&seq, kind, foreign);
                let p = roce_wire::frame::parse(&f).expect("an IPv6 RoCEv2 frame");
                assert_eq!((p.repr.ip.source(), p.repr.ip.destination()), (IpAddr::V6(src), IpAddr::V6(dst)));
                assert!(e.predict(&f).is_ok(), "{}: {:?}", kind.name(), e.predict(&f));
                if g.mutated != before {
                    continue;
                }
                let pd = match cm_answer(&f) {
                    Some((_, Some(CmMessage::Req(m)))) => {
                        // the primary path's GIDs are the IPv6 addresses themselves
                        assert_eq!(m.primary_path.local_gid, Gid::from_ipv6(src));
                        assert_eq!(m.primary_path.remote_gid, Gid::from_ipv6(dst));
                        reqs += 1;
                        m.private_data.to_vec()
                    }
                    Some((_, Some(CmMessage::SidrReq(m)))) => {
                        sidrs += 1;
                        m.private_data.to_vec()
                    }
                    _ => continue,
                };
                let h = cma_hdr::Repr::parse(&cma_hdr::Packet::new_unchecked(&pd[..cma_hdr::HEADER_LEN])).unwrap();
                assert_eq!((h.ip_version, h.src_addr, h.dst_addr), (6, src.octets(), dst.octets()));
            }
        }
        assert!(reqs > 10 && sidrs > 10, "{reqs} REQs, {sidrs} SIDR_REQs");
    }

    #[test]
    fn answers_feed_the_next_messages() {
        let mut g = CmGenerator::new(5, ep(), &[]);
        let mut seq = loop {
            let s = g.next_sequence();
            if s.kind == SequenceKind::Connect {
                break s;
            }
        };
        let rep = CmMessage::Rep(cm::RepRepr {
            local_comm_id: 0xabcd_0001,
            remote_comm_id: seq.local_comm_id,
            local_qpn: 0x11,
            ..Default::default()
        });
        assert!(!seq.learn(&CmMessage::Rep(cm::RepRepr { remote_comm_id: !seq.local_comm_id, ..Default::default() })));
        assert!(seq.learn(&rep));
        assert_eq!(seq.peer.map(|p| (p.comm_id, p.qpn)), Some((0xabcd_0001, 0x11)));
        // a DREQ built now names the kernel's comm ID and QPN (unless mutated)
        for _ in 0..20 {
            let f = g.build(&seq, MsgKind::Dreq, false);
            if let Some((_, Some(CmMessage::Dreq(d)))) = cm_answer(&f) {
                if d.remote_comm_id == 0xabcd_0001 {
                    assert_eq!(d.remote_qpn_eecn, 0x11);
                    return;
                }
            }
        }
        panic!("no well-formed DREQ in 20");
    }

    #[test]
    fn kernel_trouble_lines_are_found() {
        let log = "[ 1.0] rxe: ok\n[ 2.0] BUG: KASAN: slab-use-after-free in cm_rej_handler\n[ 3.0] WARNING: CPU: 0 PID: 1 at cm.c:1\nfine";
        assert_eq!(kernel_trouble(log).len(), 2);
        assert!(kernel_trouble("all quiet\n").is_empty());
        assert_eq!(
            run_log_cmd("printf 'a\\nsoft lockup\\n'", Duration::from_secs(10)).map(|t| kernel_trouble(&t).len()),
            Ok(1)
        );
        assert!(run_log_cmd("exit 2", Duration::from_secs(10)).is_err());
        assert!(run_log_cmd("sleep 30", Duration::from_millis(200)).unwrap_err().contains("did not finish"));
    }
}
