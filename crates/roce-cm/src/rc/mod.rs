//! Connected queue pairs, reliable (RC) and unreliable (UC): requester, responder and
//! completer as IBA vol. 1 ch. 9 and Linux rxe (rxe_req.c, rxe_resp.c, rxe_comp.c) describe
//! them, with memory regions and shared receive queues (rxe_srq.c).
//!
//! [`Rc`] is the owner of every connected QP, memory region, SRQ and the completion queue of
//! one port. It
//! is sans-IO like the rest of the engine: packets in through [`Rc::handle_packet`], packets
//! out through [`Rc::poll_transmit`], time through [`Rc::poll_timeout`] /
//! [`Rc::handle_timeout`]. The [`crate::Stack`] routes RC opcodes to it and frames what it
//! sends; nothing else reaches into its state. See spec/rc.md; congestion control (DCQCN,
//! off by default) is [`crate::cc`] and spec/congestion.md.

mod cc;
#[cfg(test)]
mod cc_tests;
mod completer;
pub mod mr;
#[cfg(test)]
mod mw_tests;
#[cfg(test)]
mod pd_tests;
#[cfg(test)]
mod placement_tests;
pub mod psn;
mod requester;
mod responder;
pub mod srq;
#[cfg(test)]
mod tests;
mod uc;
#[cfg(test)]
mod uc_srq_tests;
#[cfg(test)]
mod xrc_tests;

use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;
use std::time::Duration;

use roce_wire::bth;
use roce_wire::ext::ExtHeaders;

pub use crate::cc::{CcCounters, Congestion, Dcqcn, DcqcnParams, Ecn};
pub use crate::config::DEFAULT_MAX_UNACKED_PSNS;
pub use mr::{Access, LentMemory, MrInfo, MrTable, MwBind, MwInfo, MwState, MwType, Sge, MW_INDEX_FIRST};
pub use requester::{MAX_UNACKED_PSNS_LIMIT, RXE_MAX_UNACKED_PSNS};
pub use srq::{AsyncEvent, SrqAttr};

use crate::{Errno, Instant};

/// `enum ibv_qp_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QpState {
    /// Reset: nothing is processed.
    Reset,
    /// Initialised: receives may be posted, nothing is sent or received.
    Init,
    /// Ready to receive: the responder runs.
    Rtr,
    /// Ready to send: requester and responder run.
    Rts,
    /// Send queue drained: no new request is started; outstanding ones complete.
    Sqd,
    /// Send queue error (UC/UD only in IBA; an RC QP goes to ERR instead).
    Sqe,
    /// Error: every outstanding work request is flushed.
    Err,
}

impl QpState {
    /// The kernel's name (`IB_QPS_RTS` → "RTS").
    pub const fn name(self) -> &'static str {
        match self {
            QpState::Reset => "RESET",
            QpState::Init => "INIT",
            QpState::Rtr => "RTR",
            QpState::Rts => "RTS",
            QpState::Sqd => "SQD",
            QpState::Sqe => "SQE",
            QpState::Err => "ERR",
        }
    }
}

/// The transport service of a connected QP (`IBV_QPT_RC`, `IBV_QPT_UC`, `IBV_QPT_XRC_SEND`
/// or `IBV_QPT_XRC_RECV`; the CM REQ's Transport Service Type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TransportService {
    /// Reliable connected.
    #[default]
    Rc,
    /// Unreliable connected: SEND and RDMA WRITE only, no ACKs, no retransmission.
    Uc,
    /// XRC initiator (`IBV_QPT_XRC_SEND`): RC's requester whose every request names the
    /// remote XRC SRQ in an XRCETH; it has no receive queue.
    XrcIni,
    /// XRC target (`IBV_QPT_XRC_RECV`) of the XRC domain `xrcd`: RC's responder with no send
    /// queue, no receive queue and no SRQ of its own: each message goes to the SRQ its
    /// XRCETH names, which must be an XRC SRQ of the same domain.
    XrcTgt {
        /// Its XRC domain.
        xrcd: u32,
    },
}

impl TransportService {
    /// The BTH transport of its opcodes.
    pub fn bth_transport(self) -> bth::Transport {
        match self {
            TransportService::Rc => bth::Transport::Rc,
            TransportService::Uc => bth::Transport::Uc,
            TransportService::XrcIni | TransportService::XrcTgt { .. } => bth::Transport::Xrc,
        }
    }

    /// Whether it is one of XRC's.
    pub fn is_xrc(self) -> bool {
        matches!(self, TransportService::XrcIni | TransportService::XrcTgt { .. })
    }

    /// The XRC twin of an RC opcode (transport bits 101, IBA table 38), for an XRC QP; RC's
    /// own for the others (UC maps its own where it sends).
    pub(crate) fn xrc_opcode(self, rc: bth::Opcode) -> bth::Opcode {
        if self.is_xrc() {
            bth::Opcode::from((u8::from(rc) & 0x1f) | 0xa0)
        } else {
            rc
        }
    }
}

/// What `ibv_create_qp` takes for a connected QP (`struct ibv_qp_init_attr`, the part used).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QpInit {
    /// RC or UC.
    pub service: TransportService,
    /// Queue depths (`max_recv_wr` unused with an SRQ).
    pub cap: QpCap,
    /// The shared receive queue the QP takes its receives from, if any.
    pub srq: Option<u32>,
    /// Its protection domain (`ibv_qp_init_attr.pd`; the `roce` tools have one, 0): the
    /// regions and windows the peer may reach through it. An XRC target has none of its
    /// own: each request is checked against the PD of the XRC SRQ it names.
    pub pd: u32,
}

/// The modify_qp transitions an RC QP accepts [IBA table 93 "QP state transition"; the
/// kernel's `qp_state_table`]: `(from, to)`. Any state may go to RESET or ERR.
pub const TRANSITIONS: &[(QpState, QpState)] = &[
    (QpState::Reset, QpState::Init),
    (QpState::Init, QpState::Init),
    (QpState::Init, QpState::Rtr),
    (QpState::Rtr, QpState::Rts),
    (QpState::Rts, QpState::Rts),
    (QpState::Rts, QpState::Sqd),
    (QpState::Sqd, QpState::Sqd),
    (QpState::Sqd, QpState::Rts),
    (QpState::Sqe, QpState::Rts),
];

/// The transitions of a UC QP: the same pairs as RC [IBA 10.3.1; qp_state_table's UC
/// entries], with fewer attributes (spec/uc-qp-states.csv).
pub const UC_TRANSITIONS: &[(QpState, QpState)] = TRANSITIONS;

/// Whether `from → to` is a legal modify_qp transition.
pub fn transition_ok(from: QpState, to: QpState) -> bool {
    matches!(to, QpState::Reset | QpState::Err) || TRANSITIONS.contains(&(from, to))
}

/// The attributes of `ibv_modify_qp` an RC QP uses (all of them given at every call; the
/// ones a transition does not use are ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAttr {
    /// Path MTU in bytes: 256, 512, 1024, 2048 or 4096.
    pub path_mtu: u32,
    /// The remote QP number.
    pub dest_qpn: u32,
    /// The first PSN the responder expects (RTR).
    pub rq_psn: u32,
    /// The first PSN the requester sends (RTS).
    pub sq_psn: u32,
    /// Local ACK timeout exponent: 4.096 µs · 2^timeout; 0 waits forever (RTS).
    pub timeout: u8,
    /// Retries after a local ACK timeout or sequence error, 0..=7 (RTS).
    pub retry_cnt: u8,
    /// Retries after an RNR NAK, 0..=7; 7 retries forever (RTS).
    pub rnr_retry: u8,
    /// The RNR timer code this responder sends in RNR NAKs, 0..=31 (RTR).
    pub min_rnr_timer: u8,
    /// Outstanding READ/atomic requests this requester may have (initiator depth).
    pub max_rd_atomic: u8,
    /// READ/atomic requests this responder remembers for duplicates (responder resources).
    pub max_dest_rd_atomic: u8,
    /// Remote operations this QP accepts as responder (REMOTE_WRITE/READ/ATOMIC).
    pub access: Access,
    /// Partition key sent in the BTH.
    pub pkey: u16,
    /// The peer's address.
    pub dest: IpAddr,
    /// The peer's MAC, when known (otherwise the stack resolves it).
    pub dmac: Option<[u8; 6]>,
    /// Hop limit / TTL.
    pub hop_limit: u8,
    /// Traffic class / TOS.
    pub traffic_class: u8,
}

impl QpAttr {
    /// Attributes towards `dest`/`dest_qpn` with rdma-cm's defaults: MTU 1024, timeout 14
    /// (67 ms), retry 7, RNR retry 7, min RNR timer 12 (0.64 ms), depth 16.
    pub fn new(dest: IpAddr, dest_qpn: u32) -> QpAttr {
        QpAttr {
            path_mtu: 1024,
            dest_qpn,
            rq_psn: 0,
            sq_psn: 0,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            access: Access::LOCAL_WRITE
                .union(Access::REMOTE_WRITE)
                .union(Access::REMOTE_READ)
                .union(Access::REMOTE_ATOMIC),
            pkey: roce_wire::DEFAULT_PKEY,
            dest,
            dmac: None,
            hop_limit: 64,
            traffic_class: 0,
        }
    }

    fn check(&self) -> Result<(), Errno> {
        let ok = matches!(self.path_mtu, 256 | 512 | 1024 | 2048 | 4096)
            && self.dest_qpn <= psn::PSN_MASK
            && self.rq_psn <= psn::PSN_MASK
            && self.sq_psn <= psn::PSN_MASK
            && self.timeout < 32
            && self.retry_cnt < 8
            && self.rnr_retry < 8
            && self.min_rnr_timer < 32;
        if ok {
            Ok(())
        } else {
            Err(Errno::EINVAL)
        }
    }
}

/// The local ACK timeout of an attribute value: 4.096 µs · 2^t (`None`: t = 0, no timer).
pub fn ack_timeout(t: u8) -> Option<Duration> {
    if t == 0 {
        None
    } else {
        Some(Duration::from_nanos(4096u64 << t.min(31)))
    }
}

/// The RNR NAK timer codes of IBA table 45, in microseconds (code 0 is the longest).
pub const RNR_TIMER_US: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840, 5_120, 7_680,
    10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840, 245_760, 327_680, 491_520,
];

/// What a send work request does (`ibv_wr_opcode` with its operands).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    /// SEND.
    Send,
    /// SEND with immediate data.
    SendWithImm(u32),
    /// RDMA WRITE to `remote_addr` under `rkey`.
    Write {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// RDMA WRITE with immediate data (consumes a receive at the peer).
    WriteWithImm {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Immediate data.
        imm: u32,
    },
    /// RDMA READ from `remote_addr` into the SGEs.
    Read {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// ATOMIC compare and swap of the 8 bytes at `remote_addr`; the old value lands in the SGE.
    CompareSwap {
        /// Remote virtual address (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Value compared.
        compare: u64,
        /// Value written when equal.
        swap: u64,
    },
    /// ATOMIC fetch and add; the old value lands in the SGE.
    FetchAdd {
        /// Remote virtual address (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Value added.
        add: u64,
    },
    /// ATOMIC WRITE (IBA 1.5 memory placement extensions; `ibv_wr_atomic_write`): the 8
    /// bytes `data` replace the 8 at `remote_addr` as one store, after every earlier request
    /// of the QP took effect. No SGE: the bytes travel in the request, copied as they are.
    AtomicWrite {
        /// Remote virtual address (8-byte aligned).
        remote_addr: u64,
        /// Remote key (needs REMOTE_WRITE).
        rkey: u32,
        /// The bytes written.
        data: [u8; 8],
    },
    /// FLUSH (IBA 1.5; `ibv_wr_flush`): make what earlier requests placed in the range (or
    /// the whole region) globally visible or persistent before the flush completes.
    Flush {
        /// Remote virtual address of the range.
        remote_addr: u64,
        /// Remote key (the region needs the FLUSH access of the placement type).
        rkey: u32,
        /// Length of the range (ignored for [`FlushLevel::Mr`]).
        len: u32,
        /// Placement type: [`FLUSH_GLOBAL`], [`FLUSH_PERSISTENT`] or both.
        placement: u8,
        /// Selectivity level: a range or the whole region.
        level: FlushLevel,
    },
    /// SEND that invalidates `rkey` at the responder once placed (SEND with invalidate:
    /// `IBV_WR_SEND_WITH_INV`; the IETH on its last packet).
    SendWithInv {
        /// The responder's window (or region) key to invalidate.
        rkey: u32,
    },
    /// Bind a memory window (`IBV_WR_BIND_MW`, and `ibv_bind_mw` for a type 1 window): a
    /// local operation, done when the requester reaches it, completed in order.
    BindMw {
        /// The window's current rkey.
        mw_rkey: u32,
        /// The rkey it gets (its low byte is taken).
        new_rkey: u32,
        /// What it is bound to.
        bind: MwBind,
    },
    /// Invalidate a type 2 window locally (`IBV_WR_LOCAL_INV`): a local operation.
    LocalInv {
        /// The window's rkey.
        rkey: u32,
    },
}

/// FLUSH placement type: global visibility (`IB_FLUSH_GLOBAL`, FETH bit 0).
pub const FLUSH_GLOBAL: u8 = 1;
/// FLUSH placement type: persistence (`IB_FLUSH_PERSISTENT`, FETH bit 1).
pub const FLUSH_PERSISTENT: u8 = 2;

/// FLUSH selectivity level (FETH bits 5:4; `IB_FLUSH_RANGE`, `IB_FLUSH_MR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlushLevel {
    /// The RETH's range.
    Range,
    /// The whole region the rkey names.
    Mr,
}

impl FlushLevel {
    /// The FETH's selectivity level value.
    pub const fn wire(self) -> u8 {
        match self {
            FlushLevel::Range => 0,
            FlushLevel::Mr => 1,
        }
    }
}

impl SendOp {
    /// The completion opcode of this request.
    pub fn wc_opcode(self) -> WcOpcode {
        match self {
            SendOp::Send | SendOp::SendWithImm(_) | SendOp::SendWithInv { .. } => WcOpcode::Send,
            SendOp::BindMw { .. } => WcOpcode::BindMw,
            SendOp::LocalInv { .. } => WcOpcode::LocalInv,
            SendOp::Write { .. } | SendOp::WriteWithImm { .. } => WcOpcode::RdmaWrite,
            SendOp::Read { .. } => WcOpcode::RdmaRead,
            SendOp::CompareSwap { .. } => WcOpcode::CompSwap,
            SendOp::FetchAdd { .. } => WcOpcode::FetchAdd,
            SendOp::AtomicWrite { .. } => WcOpcode::AtomicWrite,
            SendOp::Flush { .. } => WcOpcode::Flush,
        }
    }
    /// A READ or an atomic: its response carries data, so a later ACK cannot stand in for it
    /// (rxe's `WR_ATOMIC_OR_READ_MASK`).
    fn is_read_or_atomic(self) -> bool {
        matches!(self, SendOp::Read { .. } | SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. })
    }
    fn is_atomic(self) -> bool {
        matches!(self, SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. })
    }
    /// Holds one of the responder's READ/atomic resources, so counts against `max_rd_atomic`
    /// [rxe_req.c: `RXE_READ_OR_ATOMIC_MASK | RXE_ATOMIC_WRITE_MASK` → check_init_depth].
    fn uses_rd_atomic(self) -> bool {
        self.is_read_or_atomic() || matches!(self, SendOp::AtomicWrite { .. })
    }
    /// The memory placement operations: one packet, answered by an empty READ response.
    fn is_placement(self) -> bool {
        matches!(self, SendOp::AtomicWrite { .. } | SendOp::Flush { .. })
    }
    /// Only an RC QP may post it (rxe_verbs.c validate_send_wr), never inline.
    fn rc_only(self) -> bool {
        self.is_read_or_atomic() || self.is_placement() || matches!(self, SendOp::SendWithInv { .. })
    }
    /// A local operation: done by the requester when it gets there, nothing on the wire.
    pub(crate) fn is_local(self) -> bool {
        matches!(self, SendOp::BindMw { .. } | SendOp::LocalInv { .. })
    }
}

/// A send work request (`struct ibv_send_wr`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendWr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: SendOp,
    /// Local buffers: gathered for SEND/WRITE, scattered for READ/atomics (one 8-byte SGE).
    pub sg_list: Vec<Sge>,
    /// `IBV_SEND_SIGNALED`: complete successfully with a work completion (errors always do).
    pub signaled: bool,
    /// `IBV_SEND_SOLICITED`: set SE on the last packet.
    pub solicited: bool,
    /// `IBV_SEND_INLINE`: the payload, copied when the request was posted (the SGEs are then
    /// not read, and name no region); kept with the request for retransmissions, as rxe
    /// keeps inline data in its WQE.
    pub inline: Option<Vec<u8>>,
}

/// A receive work request (`struct ibv_recv_wr`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvWr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Where the message lands.
    pub sg_list: Vec<Sge>,
}

/// `enum ibv_wc_status` (the subset an RC QP produces).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcStatus {
    /// `IBV_WC_SUCCESS`.
    Success,
    /// `IBV_WC_LOC_LEN_ERR`: a message longer than the receive buffer.
    LocLenErr,
    /// `IBV_WC_LOC_QP_OP_ERR`.
    LocQpOpErr,
    /// `IBV_WC_LOC_PROT_ERR`: a local SGE outside its region or without the access.
    LocProtErr,
    /// `IBV_WC_WR_FLUSH_ERR`: flushed because the QP went to ERR.
    WrFlushErr,
    /// `IBV_WC_MW_BIND_ERR`: a memory window bind the rules refuse.
    MwBindErr,
    /// `IBV_WC_BAD_RESP_ERR`: a response that does not fit the request.
    BadRespErr,
    /// `IBV_WC_REM_INV_REQ_ERR`: the responder's NAK "invalid request".
    RemInvReqErr,
    /// `IBV_WC_REM_ACCESS_ERR`: the responder's NAK "remote access error".
    RemAccessErr,
    /// `IBV_WC_REM_OP_ERR`: the responder's NAK "remote operational error".
    RemOpErr,
    /// `IBV_WC_RETRY_EXC_ERR`: local ACK timeouts / sequence errors beyond `retry_cnt`.
    RetryExcErr,
    /// `IBV_WC_RNR_RETRY_EXC_ERR`: RNR NAKs beyond `rnr_retry`.
    RnrRetryExcErr,
}

impl WcStatus {
    /// The status's number in `enum ibv_wc_status` (what `%d` of `wc.status` prints: 12 for
    /// `IBV_WC_RETRY_EXC_ERR`).
    pub const fn ibv_code(self) -> u8 {
        match self {
            WcStatus::Success => 0,
            WcStatus::LocLenErr => 1,
            WcStatus::LocQpOpErr => 2,
            WcStatus::LocProtErr => 4,
            WcStatus::WrFlushErr => 5,
            WcStatus::MwBindErr => 6,
            WcStatus::BadRespErr => 7,
            WcStatus::RemInvReqErr => 9,
            WcStatus::RemAccessErr => 10,
            WcStatus::RemOpErr => 11,
            WcStatus::RetryExcErr => 12,
            WcStatus::RnrRetryExcErr => 13,
        }
    }

    /// `ibv_wc_status_str`.
    pub const fn as_str(self) -> &'static str {
        match self {
            WcStatus::Success => "success",
            WcStatus::LocLenErr => "local length error",
            WcStatus::LocQpOpErr => "local QP operation error",
            WcStatus::LocProtErr => "local protection error",
            WcStatus::WrFlushErr => "Work Request Flushed Error",
            WcStatus::MwBindErr => "memory bind operation error",
            WcStatus::BadRespErr => "bad response error",
            WcStatus::RemInvReqErr => "remote invalid request error",
            WcStatus::RemAccessErr => "remote access error",
            WcStatus::RemOpErr => "remote operation error",
            WcStatus::RetryExcErr => "transport retry counter exceeded",
            WcStatus::RnrRetryExcErr => "RNR retry counter exceeded",
        }
    }
}

/// `enum ibv_wc_opcode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcOpcode {
    /// `IBV_WC_SEND`.
    Send,
    /// `IBV_WC_RDMA_WRITE`.
    RdmaWrite,
    /// `IBV_WC_RDMA_READ`.
    RdmaRead,
    /// `IBV_WC_COMP_SWAP`.
    CompSwap,
    /// `IBV_WC_FETCH_ADD`.
    FetchAdd,
    /// `IBV_WC_BIND_MW`.
    BindMw,
    /// `IBV_WC_LOCAL_INV`.
    LocalInv,
    /// `IBV_WC_FLUSH`.
    Flush,
    /// `IBV_WC_ATOMIC_WRITE`.
    AtomicWrite,
    /// `IBV_WC_RECV`.
    Recv,
    /// `IBV_WC_RECV_RDMA_WITH_IMM`.
    RecvRdmaWithImm,
}

/// A work completion (`struct ibv_wc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkCompletion {
    /// The work request's id.
    pub wr_id: u64,
    /// Outcome.
    pub status: WcStatus,
    /// What completed.
    pub opcode: WcOpcode,
    /// The local QP.
    pub qp_num: u32,
    /// Bytes received (receives) or transferred.
    pub byte_len: u32,
    /// Immediate data of a receive.
    pub imm_data: Option<u32>,
    /// A receive whose message's last packet had the BTH's Solicited Event bit (an error
    /// completion counts as solicited): what wakes a CQ armed for solicited completions only
    /// [rxe_resp.c do_complete: `bth_se(pkt)`, 1 without a packet].
    pub solicited: bool,
    /// A receive of a SEND with invalidate: the key it invalidated (`IBV_WC_WITH_INV`).
    pub invalidated_rkey: Option<u32>,
    /// A receive of an XRC target: the XRC SRQ it came from, whose CQ it goes to (`qp_num`
    /// is the target's). `None` for every other completion.
    pub srq: Option<u32>,
}

/// QP capacities (`struct ibv_qp_cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCap {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
}

impl Default for QpCap {
    fn default() -> Self {
        QpCap { max_send_wr: 1024, max_recv_wr: 1024 }
    }
}

/// Counters of the RC engine, named after rxe's hw_counters where one exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RcCounters {
    /// Packets sent.
    pub sent_pkts: u64,
    /// Packets received for an RC QP.
    pub rcvd_pkts: u64,
    /// Requests retransmitted (packets sent again after a retry).
    pub retransmitted_pkts: u64,
    /// Duplicate requests seen by the responder (re-ACKed or re-served).
    pub duplicate_request: u64,
    /// Requests ahead of the expected PSN (answered with one PSN sequence NAK).
    pub out_of_seq_request: u64,
    /// PSN sequence error NAKs received.
    pub rcvd_seq_err: u64,
    /// RNR NAKs received.
    pub rcvd_rnr_err: u64,
    /// RNR NAKs sent.
    pub send_rnr_err: u64,
    /// Local ACK timeouts that led to a retry.
    pub local_ack_timeout_err: u64,
    /// Retries started by the completer (timeouts, sequence NAKs, missing responses).
    pub completer_retry_err: u64,
    /// Work requests ended with `RetryExcErr`.
    pub retry_exceeded_err: u64,
    /// Work requests ended with `RnrRetryExcErr`.
    pub rnr_retry_exceeded_err: u64,
    /// Responses that were old or unexpected and dropped.
    pub duplicate_response: u64,
    /// Packets dropped: no RC QP with that number.
    pub drop_unknown_qp: u64,
    /// Packets dropped: the QP is not in a state that takes them (RESET, INIT, ERR; a
    /// response before RTS).
    pub drop_qp_state: u64,
    /// Packets dropped: not from the QP's peer address.
    pub drop_wrong_source: u64,
    /// ACKs dropped: a reserved AETH syndrome (type 2).
    pub drop_bad_syndrome: u64,
    /// Duplicate READ/atomic requests dropped: no longer among the remembered ones (rxe:
    /// class D, dropped).
    pub drop_forgotten_request: u64,
    /// ACKs coalesced into a later one.
    pub ack_coalesced: u64,
    /// Packets dropped: an RC opcode for a UC QP or the other way round (rxe_recv.c
    /// check_type_state), an XRC opcode for a QP of neither XRC type, a request for an XRC
    /// initiator or a response for an XRC target.
    pub drop_wrong_transport: u64,
    /// UC packets dropped by the responder after a PSN gap (out of sequence, or the rest of
    /// a message after one) until the next FIRST/ONLY [rxe check_psn, IB_QPT_UC].
    pub uc_drop_psn_gap: u64,
    /// UC packets dropped because no receive was posted (RQ or SRQ empty) for a SEND or
    /// WRITE with immediate, and the rest of that message [rxe RESPST_ERR_RNR, class D].
    pub uc_drop_no_recv: u64,
    /// UC packets dropped as invalid (opcode out of sequence, WRITE without REMOTE_WRITE,
    /// bad length, rkey or receive buffer), and the rest of that message [rxe class D/E].
    pub uc_drop_invalid: u64,
    /// UC messages the responder had begun placing and abandoned (a gap or an error inside
    /// them): nothing of them completes.
    pub uc_partial_discarded: u64,
    /// The packets of those abandoned messages that had been placed.
    pub uc_partial_discarded_pkts: u64,
    /// SRQ receives handed to a QP.
    pub srq_recv_taken: u64,
    /// XRC requests answered "invalid request": their XRCETH named no XRC SRQ of the
    /// target's domain.
    pub xrc_srq_invalid: u64,
    /// The congestion path: CE marks, CNPs, rate cuts and increases ([`crate::cc`]).
    pub cc: CcCounters,
}

/// A packet the RC engine wants sent; the stack frames it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RcPacket {
    /// The sending QP (for the UDP source port).
    pub src_qp: u32,
    /// The peer.
    pub dst: IpAddr,
    /// The peer's MAC, when the QP knows it.
    pub dst_mac: Option<[u8; 6]>,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// BTH.
    pub bth: bth::Repr,
    /// Extension headers.
    pub ext: ExtHeaders,
    /// Payload (empty when it was gathered in place: `payload_in_place`).
    pub payload: Vec<u8>,
    /// From [`Rc::poll_transmit_into`]: the payload's length, when it was gathered straight
    /// into the transmit buffer where the frame's headers end (not into `payload`).
    pub payload_in_place: Option<usize>,
}

/// Where a request packet's payload may be gathered straight into the frame
/// ([`Rc::poll_transmit_into`]): the transmit buffer, and the frame's header length for a
/// destination and extension headers (`None`: not framable here, gathered as usual).
pub(crate) struct InPlace<'a> {
    pub buf: &'a mut [u8],
    pub header_len: &'a HeaderLen<'a>,
}

/// The header length of a frame to a destination with these extension headers (see
/// [`Rc::poll_transmit_into`]).
pub type HeaderLen<'a> = dyn Fn(IpAddr, &ExtHeaders) -> Option<usize> + 'a;

/// One outstanding send work request.
#[derive(Debug, Clone)]
pub(crate) struct Wqe {
    pub wr: SendWr,
    pub len: u64,
    /// Packets (responses for a READ) this request takes.
    pub npkts: u32,
    /// PSN of its first packet (valid once `started`).
    pub first_psn: u32,
    /// Packets sent so far (a READ request reserves all of them at once).
    pub next_pkt: u32,
    pub started: bool,
    /// A local operation the requester has done: how it went (it completes, in order, once
    /// everything before it has).
    pub local: Option<WcStatus>,
    /// The remote XRC SRQ of an XRC initiator's request (`wr.qp_type.xrc.remote_srqn`).
    pub xrc_srqn: u32,
}

impl Wqe {
    pub fn last_psn(&self) -> u32 {
        psn::add(self.first_psn, self.npkts.max(1) - 1)
    }
}

/// The message the responder is in the middle of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InMsg {
    /// A SEND: bytes placed so far in the front receive WQE.
    Send { offset: u64 },
    /// An RDMA WRITE: where the next byte goes and how many may still come.
    Write { va: u64, rkey: u32, resid: u64, total: u64 },
}

/// A READ or atomic request the responder remembers, to answer duplicates [rxe resp_res].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resource {
    Read {
        first_psn: u32,
        last_psn: u32,
        rkey: u32,
    },
    Atomic {
        psn: u32,
        orig: u64,
    },
    /// An ATOMIC WRITE or FLUSH done: a duplicate is answered again, not done again
    /// [rxe duplicate_request; IBA oA19-14, oA19-15].
    Placement {
        psn: u32,
    },
}

/// One RC QP.
#[derive(Debug, Clone)]
pub(crate) struct RcQp {
    pub qpn: u32,
    pub service: TransportService,
    /// The SRQ receives come from (then `rq` holds at most the one being filled).
    pub srq: Option<u32>,
    /// Its protection domain ([`QpInit::pd`]).
    pub pd: u32,
    pub state: QpState,
    pub attr: QpAttr,
    pub cap: QpCap,
    // requester and completer
    pub sq: VecDeque<Wqe>,
    pub req_idx: usize,
    pub sq_psn: u32,
    pub comp_psn: u32,
    /// One past the highest PSN ever sent (responses up to it are meaningful after a rewind).
    pub hw_psn: u32,
    pub retry_left: u8,
    pub rnr_left: u8,
    pub started_retry: bool,
    pub ack_deadline: Option<Instant>,
    pub rnr_deadline: Option<Instant>,
    pub noack_pkts: u32,
    // responder
    pub rq: VecDeque<RecvWr>,
    pub rq_psn: u32,
    pub msn: u32,
    pub cur: Option<InMsg>,
    pub resources: VecDeque<Resource>,
    pub nak_sent: bool,
    pub pending_ack: Option<u32>,
    pub resp_out: VecDeque<RcPacket>,
    /// UC: dropping to the next FIRST/ONLY, and why [rxe resp.drop_msg].
    pub uc_drop: Option<uc::UcDrop>,
    /// UC: packets placed of the message in progress.
    pub uc_cur_pkts: u32,
    /// Congestion control: the reaction point (from the first CNP on), the notification
    /// point's pacer, a CNP to send.
    pub cc: cc::QpCc,
}

/// The connected-QP engine of one port: RC and UC QPs, memory regions, SRQs, one
/// completion queue, the asynchronous events.
#[derive(Debug, Clone, Default)]
pub struct Rc {
    qps: BTreeMap<u32, RcQp>,
    srqs: BTreeMap<u32, srq::Srq>,
    next_srqn: u32,
    /// XRC domains and the targets and XRC SRQs that use each.
    xrcds: BTreeMap<u32, u32>,
    next_xrcd: u32,
    async_events: VecDeque<AsyncEvent>,
    mrs: MrTable,
    cq: VecDeque<WorkCompletion>,
    counters: RcCounters,
    rr: u32,
    /// Packets the QP at `rr` sent in its current turn.
    burst: u32,
    key_seed: u64,
    /// Payload buffers of packets already framed, for the next request packets to gather
    /// into (no allocation per packet in steady state).
    spare_payloads: Vec<Vec<u8>>,
    window: SendWindow,
    congestion: Congestion,
}

/// How many PSNs a requester may have in flight ([`Rc::set_max_unacked_psns`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SendWindow(u32);

impl Default for SendWindow {
    fn default() -> Self {
        SendWindow(DEFAULT_MAX_UNACKED_PSNS)
    }
}

/// Packets a QP sends in a row before the next QP's turn: a 64 KiB message at path MTU 1024,
/// one driver batch. Shorter bursts cost a GSO transport runs: a WRITE's first packet (its RETH
/// makes it longer) can lead a run of only two, so a burst that ends inside a message starts
/// the next one a run short (rc_veth, 4 QPs, MTU 1500: bursts of 32 gave 3 runs per WRITE
/// message, 64 gave 2, as one QP).
const TX_BURST: u32 = 64;

/// Payload buffers kept for reuse: a transmit batch's worth.
const SPARE_PAYLOADS: usize = 64;

/// Mutable pieces of the engine a QP's handlers work on beside the QP itself.
pub(crate) struct Ctx<'a> {
    pub now: Instant,
    pub srqs: &'a mut BTreeMap<u32, srq::Srq>,
    pub events: &'a mut VecDeque<AsyncEvent>,
    pub mrs: &'a mut MrTable,
    pub cq: &'a mut VecDeque<WorkCompletion>,
    pub c: &'a mut RcCounters,
    pub spare_payloads: &'a mut Vec<Vec<u8>>,
    /// Where the requester may gather a payload in place (see [`InPlace`]).
    pub in_place: Option<InPlace<'a>>,
    /// PSNs a requester may have in flight.
    pub max_unacked_psns: u32,
    /// The DCQCN parameters when congestion control is on.
    pub cc: Option<&'a DcqcnParams>,
}

impl RcQp {
    /// Who the peer's requests reach memory as: this QP with its protection domain, or on an
    /// XRC target the PD of the XRC SRQ the message in progress names (set from its XRCETH
    /// when it began; none yet: PD 0 of no region of a program, refused where it matters).
    pub(crate) fn remote_accessor(&self, srqs: &BTreeMap<u32, srq::Srq>) -> mr::RemoteAccessor {
        let pd = match self.service {
            TransportService::XrcTgt { .. } => self.srq.and_then(|n| srqs.get(&n)).map_or(self.pd, |s| s.pd),
            _ => self.pd,
        };
        mr::RemoteAccessor { qpn: self.qpn, pd }
    }

    /// Whether the peer may reach a RETH's whole range with `need`, as this QP
    /// ([`MrTable::check_remote`] with [`RcQp::remote_accessor`]).
    pub(crate) fn reth_reachable(&self, ctx: &Ctx<'_>, r: &roce_wire::reth::Repr, need: Access) -> bool {
        ctx.mrs.check_remote(self.remote_accessor(ctx.srqs), r.rkey, r.va, r.dma_len as usize, need).is_ok()
    }
}

impl Ctx<'_> {
    /// An empty payload buffer, reused if one was given back ([`Rc::recycle_payload`]).
    pub fn payload_buffer(&mut self) -> Vec<u8> {
        let mut v = self.spare_payloads.pop().unwrap_or_default();
        v.clear();
        v
    }
}

impl Rc {
    /// An empty engine; `seed` varies the key bytes of memory regions.
    pub fn new(seed: u64) -> Rc {
        Rc { key_seed: seed | 1, ..Rc::default() }
    }

    fn ctx_qp(&mut self, now: Instant, qpn: u32) -> Option<(&mut RcQp, Ctx<'_>)> {
        let qp = self.qps.get_mut(&qpn)?;
        let ctx = Ctx {
            now,
            srqs: &mut self.srqs,
            events: &mut self.async_events,
            mrs: &mut self.mrs,
            cq: &mut self.cq,
            c: &mut self.counters,
            spare_payloads: &mut self.spare_payloads,
            in_place: None,
            max_unacked_psns: self.window.0,
            cc: self.congestion.params(),
        };
        Some((qp, ctx))
    }

    /// The congestion control of every connected QP ([`Congestion::Off`] by default: nothing
    /// is marked, paced or answered). Switching it off leaves a QP's rate state as it was,
    /// unused; switching it on again resumes it.
    pub fn set_congestion(&mut self, c: Congestion) {
        self.congestion = c;
    }

    /// The congestion control in use ([`Rc::set_congestion`]).
    pub fn congestion(&self) -> &Congestion {
        &self.congestion
    }

    /// A QP's DCQCN reaction point, once it has received a CNP (its current and target rate,
    /// alpha); `None` before, or for no such QP.
    pub fn qp_rate(&self, qpn: u32) -> Option<&Dcqcn> {
        self.qps.get(&qpn).and_then(|q| q.cc.rp.as_ref())
    }

    /// How many PSNs each requester may have in flight before it waits for an ACK: clamped to
    /// 1 ..= [`MAX_UNACKED_PSNS_LIMIT`] (half the PSN space). The default is
    /// [`DEFAULT_MAX_UNACKED_PSNS`]; [`RXE_MAX_UNACKED_PSNS`] paces as rxe does.
    pub fn set_max_unacked_psns(&mut self, psns: u32) {
        self.window = SendWindow(psns.clamp(1, requester::MAX_UNACKED_PSNS_LIMIT));
    }

    /// The requesters' send window in PSNs ([`Rc::set_max_unacked_psns`]).
    pub fn max_unacked_psns(&self) -> u32 {
        self.window.0
    }

    // ---- memory regions

    /// `ibv_reg_mr`: a zeroed region of `length` bytes in protection domain 0 (the `roce`
    /// tools' one).
    pub fn reg_mr(&mut self, length: usize, access: Access) -> Result<MrInfo, Errno> {
        self.reg_mr_in(0, length, access)
    }

    /// `ibv_reg_mr(pd, …)`: a zeroed region of `length` bytes in protection domain `pd`,
    /// which only QPs of that PD reach from the wire.
    pub fn reg_mr_in(&mut self, pd: u32, length: usize, access: Access) -> Result<MrInfo, Errno> {
        self.key_seed = crate::ctx::splitmix(self.key_seed);
        self.mrs.reg(pd, length, access, self.key_seed as u8)
    }

    /// `ibv_reg_mr` of memory the embedder lends (a program's own buffer at `addr`) in
    /// protection domain `pd`, under the embedder's `key` ([`MrTable::reg_lent`]).
    pub fn reg_lent_mr(
        &mut self,
        pd: u32,
        key: u32,
        addr: u64,
        length: usize,
        access: Access,
        mem: std::sync::Arc<dyn mr::LentMemory>,
    ) -> Result<MrInfo, Errno> {
        self.mrs.reg_lent(pd, key, addr, length, access, mem)
    }

    /// `ibv_dereg_mr`.
    pub fn dereg_mr(&mut self, lkey: u32) -> Result<(), Errno> {
        self.mrs.dereg(lkey)
    }

    /// A region's bytes.
    pub fn mr(&self, lkey: u32) -> Option<&[u8]> {
        self.mrs.get(lkey)
    }

    /// A region's bytes, writable.
    pub fn mr_mut(&mut self, lkey: u32) -> Option<&mut [u8]> {
        self.mrs.get_mut(lkey)
    }

    // ---- memory windows

    /// `ibv_alloc_mw`: a window of `mw_type` in protection domain 0 (the `roce` tools'); its
    /// rkey.
    pub fn alloc_mw(&mut self, mw_type: MwType) -> Result<u32, Errno> {
        self.alloc_mw_in(0, mw_type)
    }

    /// `ibv_alloc_mw(pd, mw_type)`: a window of protection domain `pd`; its rkey.
    pub fn alloc_mw_in(&mut self, pd: u32, mw_type: MwType) -> Result<u32, Errno> {
        self.key_seed = crate::ctx::splitmix(self.key_seed);
        self.mrs.alloc_mw(pd, mw_type, self.key_seed as u8)
    }

    /// `ibv_dealloc_mw`.
    pub fn dealloc_mw(&mut self, rkey: u32) -> Result<(), Errno> {
        self.mrs.dealloc_mw(rkey)
    }

    /// A window, by its current rkey.
    pub fn mw(&self, rkey: u32) -> Option<MwInfo> {
        self.mrs.mw(rkey)
    }

    // ---- QPs

    /// `ibv_create_qp` of an RC QP numbered `qpn` (the stack allocates numbers); it starts
    /// in RESET.
    pub fn create_qp(&mut self, qpn: u32, cap: QpCap) -> Result<(), Errno> {
        self.create_qp_with(qpn, QpInit { cap, ..QpInit::default() })
    }

    /// `ibv_create_qp` of an RC or UC QP, with or without an SRQ; it starts in RESET.
    /// EINVAL: a number taken or out of range, caps 0 or > 32768, no such SRQ. A QP on an
    /// SRQ holds a use of it until destroyed (ib_create_qp's `srq->usecnt`).
    pub fn create_qp_with(&mut self, qpn: u32, init: QpInit) -> Result<(), Errno> {
        if !(2..=psn::PSN_MASK).contains(&qpn) || self.qps.contains_key(&qpn) {
            return Err(Errno::EINVAL);
        }
        let cap = init.cap;
        if cap.max_send_wr == 0 || cap.max_recv_wr == 0 || cap.max_send_wr > 1 << 15 || cap.max_recv_wr > 1 << 15 {
            return Err(Errno::EINVAL);
        }
        if init.service.is_xrc() && init.srq.is_some() {
            return Err(Errno::EINVAL); // an XRC QP has no SRQ of its own
        }
        if let TransportService::XrcTgt { xrcd } = init.service {
            *self.xrcds.get_mut(&xrcd).ok_or(Errno::EINVAL)? += 1;
        }
        if let Some(n) = init.srq {
            self.srqs.get_mut(&n).ok_or(Errno::EINVAL)?.usecnt += 1;
        }
        let mut attr = QpAttr::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);
        if init.service == TransportService::Uc {
            attr = uc::uc_attr(&attr);
        }
        self.qps.insert(qpn, RcQp::new(qpn, init, attr));
        Ok(())
    }

    /// `ibv_destroy_qp` (gives back its use of an SRQ).
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), Errno> {
        let qp = self.qps.remove(&qpn).ok_or(Errno::EINVAL)?;
        if let TransportService::XrcTgt { xrcd } = qp.service {
            // (A target's `srq` is the SRQ of its last message, never a use of it.)
            if let Some(n) = self.xrcds.get_mut(&xrcd) {
                *n -= 1;
            }
        } else if let Some(s) = qp.srq.and_then(|n| self.srqs.get_mut(&n)) {
            s.usecnt -= 1;
        }
        Ok(())
    }

    /// A QP's transport service and SRQ.
    pub fn qp_init(&self, qpn: u32) -> Option<QpInit> {
        self.qps.get(&qpn).map(|q| q.init())
    }

    /// Whether `qpn` is an RC QP of this engine.
    pub fn has_qp(&self, qpn: u32) -> bool {
        self.qps.contains_key(&qpn)
    }

    /// A QP's state.
    pub fn qp_state(&self, qpn: u32) -> Option<QpState> {
        self.qps.get(&qpn).map(|q| q.state)
    }

    /// A QP's attributes (`ibv_query_qp`), with the current send and receive PSNs.
    pub fn query_qp(&self, qpn: u32) -> Option<QpAttr> {
        self.qps.get(&qpn).map(|q| QpAttr { sq_psn: q.sq_psn, rq_psn: q.rq_psn, ..q.attr })
    }

    /// How many send and receive work requests the QP holds (posted and not yet retired):
    /// what a verbs layer that posts asynchronously checks its queue depths against.
    pub fn queue_lens(&self, qpn: u32) -> Option<(usize, usize)> {
        self.qps.get(&qpn).map(|q| (q.sq.len(), q.rq.len()))
    }

    /// `ibv_modify_qp` to `state` with `attr`: EINVAL for a transition the state table does
    /// not have or an attribute out of range. To ERR flushes; to RESET empties the queues.
    pub fn modify_qp(&mut self, now: Instant, qpn: u32, state: QpState, attr: &QpAttr) -> Result<(), Errno> {
        attr.check()?;
        let (qp, mut ctx) = self.ctx_qp(now, qpn).ok_or(Errno::EINVAL)?;
        if !transition_ok(qp.state, state) {
            return Err(Errno::EINVAL);
        }
        if qp.service == TransportService::Uc {
            qp.modify_uc(state, attr);
            if state == QpState::Err {
                qp.enter_error(&mut ctx);
            }
            qp.state = state;
            return Ok(());
        }
        match state {
            QpState::Reset => *qp = RcQp::new(qp.qpn, qp.init(), qp.attr),
            QpState::Err => qp.enter_error(&mut ctx),
            QpState::Init => qp.attr.access = attr.access,
            QpState::Rtr => {
                let sq_psn = qp.attr.sq_psn;
                qp.attr = *attr;
                qp.attr.sq_psn = sq_psn;
                qp.rq_psn = attr.rq_psn;
            }
            QpState::Rts if qp.state == QpState::Rtr => {
                qp.attr.sq_psn = attr.sq_psn;
                qp.attr.timeout = attr.timeout;
                qp.attr.retry_cnt = attr.retry_cnt;
                qp.attr.rnr_retry = attr.rnr_retry;
                qp.attr.max_rd_atomic = attr.max_rd_atomic;
                qp.sq_psn = attr.sq_psn;
                qp.comp_psn = attr.sq_psn;
                qp.hw_psn = attr.sq_psn;
                qp.retry_left = attr.retry_cnt;
                qp.rnr_left = attr.rnr_retry;
            }
            QpState::Rts | QpState::Sqd | QpState::Sqe => {
                // Access flags may change here too (ib_modify_qp_is_ok: optional in RTS→RTS,
                // SQD→RTS, SQE→RTS): a program grants FLUSH after rdma_accept so.
                qp.attr.access = attr.access;
                qp.attr.timeout = attr.timeout;
                qp.attr.retry_cnt = attr.retry_cnt;
                qp.attr.rnr_retry = attr.rnr_retry;
                qp.attr.min_rnr_timer = attr.min_rnr_timer;
                qp.retry_left = attr.retry_cnt;
                qp.rnr_left = attr.rnr_retry;
            }
        }
        qp.state = state;
        Ok(())
    }

    /// `ibv_post_send`: EINVAL unless the QP is in RTS or SQD (or ERR, where the request is
    /// flushed at once), and on an XRC QP (see [`Rc::post_send_xrc`]); ENOMEM when the send
    /// queue is full.
    pub fn post_send(&mut self, now: Instant, qpn: u32, wr: SendWr) -> Result<(), Errno> {
        self.post_send_to(now, qpn, wr, None)
    }

    /// `ibv_post_send` on an XRC initiator, the request going to the remote XRC SRQ
    /// `remote_srqn` (`wr.qp_type.xrc.remote_srqn`, 24 bits). EINVAL as [`Rc::post_send`],
    /// and on any other QP, for a number wider than 24 bits, and for ATOMIC WRITE and FLUSH
    /// (XRC's opcodes for them are not known: spec/wire.md).
    pub fn post_send_xrc(&mut self, now: Instant, qpn: u32, remote_srqn: u32, wr: SendWr) -> Result<(), Errno> {
        if remote_srqn > 0xff_ffff || wr.op.is_placement() {
            return Err(Errno::EINVAL);
        }
        self.post_send_to(now, qpn, wr, Some(remote_srqn))
    }

    fn post_send_to(&mut self, now: Instant, qpn: u32, wr: SendWr, xrc: Option<u32>) -> Result<(), Errno> {
        let (qp, ctx) = self.ctx_qp(now, qpn).ok_or(Errno::EINVAL)?;
        if !matches!(qp.state, QpState::Rts | QpState::Sqd | QpState::Err) {
            return Err(Errno::EINVAL);
        }
        // An initiator's requests name their SRQ; a target has no send queue.
        if (qp.service == TransportService::XrcIni) != xrc.is_some()
            || matches!(qp.service, TransportService::XrcTgt { .. })
        {
            return Err(Errno::EINVAL);
        }
        let xrc_srqn = xrc.unwrap_or(0);
        if qp.sq.len() >= qp.cap.max_send_wr as usize {
            return Err(Errno::ENOMEM);
        }
        if wr.op.is_atomic() && (wr.sg_list.len() != 1 || wr.sg_list[0].length != 8) {
            return Err(Errno::EINVAL);
        }
        if (wr.op.is_placement() || wr.op.is_local()) && !wr.sg_list.is_empty() {
            return Err(Errno::EINVAL); // the data of an ATOMIC WRITE travels in the request
        }
        if wr.op.is_local() && wr.inline.is_some() {
            return Err(Errno::EINVAL);
        }
        if qp.service == TransportService::Uc && wr.op.rc_only() {
            // rxe_verbs.c validate_send_wr: no READ, atomic or placement opcode for a UC QP.
            return Err(Errno::EINVAL);
        }
        if wr.inline.is_some() && wr.op.rc_only() {
            return Err(Errno::EINVAL); // inline data is for SEND and WRITE only
        }
        let len: u64 = match (&wr.inline, wr.op) {
            (_, SendOp::AtomicWrite { .. }) => 8,
            (_, SendOp::Flush { len, .. }) => u64::from(len),
            (Some(d), _) => d.len() as u64,
            (None, _) => wr.sg_list.iter().map(|s| u64::from(s.length)).sum(),
        };
        if len > 1 << 31 {
            return Err(Errno::EINVAL);
        }
        let mtu = u64::from(qp.attr.path_mtu);
        let one_packet = wr.op.is_atomic() || wr.op.is_placement();
        let npkts = if wr.op.is_local() {
            0
        } else if one_packet {
            1
        } else {
            len.div_ceil(mtu).max(1) as u32
        };
        let len = if wr.op.is_local() { 0 } else { len };
        let wqe = Wqe { wr, len, npkts, first_psn: 0, next_pkt: 0, started: false, local: None, xrc_srqn };
        if qp.state == QpState::Err {
            ctx.cq.push_back(qp.wc(&wqe, WcStatus::WrFlushErr));
            return Ok(());
        }
        qp.sq.push_back(wqe);
        Ok(())
    }

    /// `ibv_post_recv`: EINVAL in RESET or on a QP with an SRQ (rxe_post_recv); ENOMEM when
    /// the receive queue is full; flushed at once in ERR.
    pub fn post_recv(&mut self, qpn: u32, wr: RecvWr) -> Result<(), Errno> {
        let qp = self.qps.get_mut(&qpn).ok_or(Errno::EINVAL)?;
        if qp.state == QpState::Reset || qp.srq.is_some() || qp.service.is_xrc() {
            return Err(Errno::EINVAL);
        }
        if qp.rq.len() >= qp.cap.max_recv_wr as usize {
            return Err(Errno::ENOMEM);
        }
        if qp.state == QpState::Err {
            let wc = qp.recv_wc(wr.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, 0, None);
            self.cq.push_back(wc);
            return Ok(());
        }
        qp.rq.push_back(wr);
        Ok(())
    }

    /// `ibv_poll_cq` for one completion (one CQ for every QP of the engine).
    pub fn poll_cq(&mut self) -> Option<WorkCompletion> {
        self.cq.pop_front()
    }

    /// The engine's counters (every dropped packet is in exactly one `drop_*` counter or in
    /// `duplicate_response`).
    pub fn counters(&self) -> &RcCounters {
        &self.counters
    }

    // ---- sans-IO

    /// A packet for RC QP `bth.dest_qp` from `src`, its IP header not ECN-marked (see
    /// [`Rc::handle_packet_ecn`]).
    pub fn handle_packet(&mut self, now: Instant, src: IpAddr, bth: &bth::Repr, ext: &ExtHeaders, payload: &[u8]) {
        self.handle_packet_ecn(now, src, Ecn::NotEct, bth, ext, payload);
    }

    /// A packet for connected QP `bth.dest_qp` from `src`, with its IP header's ECN field: a
    /// CE mark is counted and, with congestion control on, answered with a CNP to the sender's
    /// QP (at most one per interval); a CNP (opcode 0x81) cuts the QP's rate.
    pub fn handle_packet_ecn(
        &mut self,
        now: Instant,
        src: IpAddr,
        ecn: Ecn,
        bth: &bth::Repr,
        ext: &ExtHeaders,
        payload: &[u8],
    ) {
        self.counters.rcvd_pkts += 1;
        let Some((qp, mut ctx)) = self.ctx_qp(now, bth.dest_qp) else {
            self.counters.drop_unknown_qp += 1;
            return;
        };
        if !matches!(qp.state, QpState::Rtr | QpState::Rts | QpState::Sqd) {
            ctx.c.drop_qp_state += 1;
            return;
        }
        if src != qp.attr.dest {
            ctx.c.drop_wrong_source += 1;
            return;
        }
        if bth.opcode == bth::Opcode::Cnp {
            return qp.handle_cnp(&mut ctx);
        }
        if ecn == Ecn::Ce {
            qp.congestion_experienced(&mut ctx);
        }
        if bth.opcode.transport() != qp.service.bth_transport() {
            ctx.c.drop_wrong_transport += 1;
            return;
        }
        // XRC runs RC's requester (initiator) or responder (target) on XRC's twins of RC's
        // opcodes: from here on, the RC opcode.
        let rc_twin;
        let bth = if qp.service.is_xrc() {
            rc_twin = bth::Repr { opcode: bth.opcode.rc_twin(), ..*bth };
            let response = matches!(u8::from(rc_twin.opcode), 0x0d..=0x12);
            if response != (qp.service == TransportService::XrcIni) {
                ctx.c.drop_wrong_transport += 1;
                return;
            }
            &rc_twin
        } else {
            bth
        };
        if qp.service == TransportService::Uc {
            return qp.handle_uc_request(&mut ctx, bth, ext, payload);
        }
        use roce_wire::bth::Opcode::*;
        match bth.opcode {
            RcAcknowledge
            | RcAtomicAcknowledge
            | RcRdmaReadResponseFirst
            | RcRdmaReadResponseMiddle
            | RcRdmaReadResponseLast
            | RcRdmaReadResponseOnly => {
                if qp.state == QpState::Rtr {
                    ctx.c.drop_qp_state += 1;
                } else {
                    qp.handle_response(&mut ctx, bth, ext, payload)
                }
            }
            RcSendFirst
            | RcSendMiddle
            | RcSendLast
            | RcSendLastWithImmediate
            | RcSendOnly
            | RcSendOnlyWithImmediate
            | RcRdmaWriteFirst
            | RcRdmaWriteMiddle
            | RcRdmaWriteLast
            | RcRdmaWriteLastWithImmediate
            | RcRdmaWriteOnly
            | RcRdmaWriteOnlyWithImmediate
            | RcRdmaReadRequest
            | RcCompareSwap
            | RcFetchAdd
            | RcAtomicWrite
            | RcFlush
            | RcSendLastWithInvalidate
            | RcSendOnlyWithInvalidate => qp.handle_request(&mut ctx, bth, ext, payload),
            // Anything else (RD, vendor): rxe answers an unsupported opcode with "invalid
            // request".
            _ => qp.nak_invalid(&mut ctx, bth.psn),
        }
    }

    /// Whether no RC QP exists (nothing can be waiting to be sent).
    pub fn is_empty(&self) -> bool {
        self.qps.is_empty()
    }

    /// The next packet to send, QPs served in turn: responses first, then requests.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<RcPacket> {
        self.transmit(now, None)
    }

    /// [`Rc::poll_transmit`], with a request packet's payload gathered from its memory region
    /// straight into `buf` at `header_len(dst, ext)` (the frame's header length; `None` if
    /// the packet cannot be framed there): such a packet comes with `payload_in_place` set
    /// and an empty `payload`, and the caller writes the headers around it (one copy of the
    /// payload fewer than gathering it and framing it).
    pub fn poll_transmit_into(&mut self, now: Instant, buf: &mut [u8], header_len: &HeaderLen<'_>) -> Option<RcPacket> {
        self.transmit(now, Some((buf, header_len)))
    }

    fn transmit(&mut self, now: Instant, mut in_place: Option<(&mut [u8], &HeaderLen<'_>)>) -> Option<RcPacket> {
        // The QPs from `rr` on, then those before it, looked up one by one (no list of keys
        // collected per packet).
        let start = self.rr;
        let mut next = Some(start);
        let mut wrapped = false;
        loop {
            let k = match next.and_then(|from| self.qps.range(from..).next().map(|(k, _)| *k)) {
                Some(k) if wrapped && k >= start => return None,
                Some(k) => k,
                None if wrapped || start == 0 => return None,
                None => {
                    (wrapped, next) = (true, Some(0));
                    continue;
                }
            };
            next = k.checked_add(1);
            let Some((qp, mut ctx)) = self.ctx_qp(now, k) else { continue };
            if let Some((buf, header_len)) = in_place.as_mut() {
                ctx.in_place = Some(InPlace { buf, header_len: *header_len });
            }
            if let Some(p) = qp.poll_transmit(&mut ctx) {
                self.counters.sent_pkts += 1;
                // A QP keeps its turn for a burst (as rxe's requester task runs until it
                // blocks): one flow's packets leave side by side, where a transport can join
                // them into one GSO run, and the next QP goes on after it.
                self.burst = if k == start && self.burst < TX_BURST { self.burst + 1 } else { 1 };
                self.rr = if self.burst < TX_BURST { k } else { k.wrapping_add(1) };
                return Some(p);
            }
        }
    }

    /// Give back the payload buffer of a packet from [`Rc::poll_transmit`] once it is framed:
    /// the next request packets gather into it instead of a new allocation.
    pub fn recycle_payload(&mut self, payload: Vec<u8>) {
        if self.spare_payloads.len() < SPARE_PAYLOADS && payload.capacity() > 0 {
            self.spare_payloads.push(payload);
        }
    }

    /// When `handle_timeout` is next due (a QP held back by its rate counts with the time its
    /// next packet may go).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.qps
            .values()
            .filter_map(|q| [q.ack_deadline, q.rnr_deadline, q.cc.wake()].into_iter().flatten().min())
            .min()
    }

    /// Run the QPs' local ACK and RNR timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        let keys: Vec<u32> = self.qps.keys().copied().collect();
        for k in keys {
            if let Some((qp, mut ctx)) = self.ctx_qp(now, k) {
                qp.handle_timeout(&mut ctx);
            }
        }
    }
}

/// The stack's form of an outgoing RC packet.
pub(crate) fn outgoing(p: RcPacket) -> crate::ctx::Outgoing {
    crate::ctx::Outgoing::Roce(crate::ctx::RocePacket {
        dst: p.dst,
        dst_mac: p.dst_mac,
        src_qp: p.src_qp,
        bth: p.bth,
        ext: p.ext,
        payload: p.payload.into(),
        hop_limit: p.hop_limit,
        traffic_class: p.traffic_class,
    })
}

/// What the CM negotiates for an RC QP (the REQ's and REP's fields), kept with the
/// connection until the QP is moved to RTR and RTS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct CmQp {
    /// The Starting PSN of the REQ or REP we send: the first PSN our responder expects.
    pub local_psn: u32,
    /// The Starting PSN of the REQ or REP received: the first PSN our requester sends.
    pub remote_psn: u32,
    /// Path MTU code (IBA: 1 = 256 … 5 = 4096).
    pub path_mtu: u8,
    /// The REQ's retry count (both sides use it).
    pub retry_count: u8,
    /// RNR retry count this side uses (passive: the REQ's; active: the REP's).
    pub rnr_retry_count: u8,
    /// Local ACK timeout exponent (the REQ's primary path).
    pub local_ack_timeout: u8,
    /// READ/atomic requests this side answers (max_dest_rd_atomic).
    pub responder_resources: u8,
    /// READ/atomic requests this side may have outstanding (max_rd_atomic).
    pub initiator_depth: u8,
    /// Traffic class of the path (the id's ToS, or the REQ's path on the passive side).
    pub traffic_class: u8,
}

/// An IBA MTU code in bytes (1 = 256 … 5 = 4096; anything else 1024).
pub fn mtu_bytes(code: u8) -> u32 {
    match code {
        1..=5 => 128 << code,
        _ => 1024,
    }
}

impl RcQp {
    fn new(qpn: u32, init: QpInit, attr: QpAttr) -> RcQp {
        let cap = init.cap;
        RcQp {
            qpn,
            service: init.service,
            srq: init.srq,
            pd: init.pd,
            state: QpState::Reset,
            attr,
            cap,
            sq: VecDeque::new(),
            req_idx: 0,
            sq_psn: attr.sq_psn,
            comp_psn: attr.sq_psn,
            hw_psn: attr.sq_psn,
            retry_left: attr.retry_cnt,
            rnr_left: attr.rnr_retry,
            started_retry: false,
            ack_deadline: None,
            rnr_deadline: None,
            noack_pkts: 0,
            rq: VecDeque::new(),
            rq_psn: attr.rq_psn,
            msn: 0,
            cur: None,
            resources: VecDeque::new(),
            nak_sent: false,
            pending_ack: None,
            resp_out: VecDeque::new(),
            uc_drop: None,
            uc_cur_pkts: 0,
            cc: cc::QpCc::default(),
        }
    }

    fn init(&self) -> QpInit {
        let srq = if self.service.is_xrc() { None } else { self.srq };
        QpInit { service: self.service, cap: self.cap, srq, pd: self.pd }
    }

    pub(crate) fn wc(&self, w: &Wqe, status: WcStatus) -> WorkCompletion {
        WorkCompletion {
            wr_id: w.wr.wr_id,
            status,
            opcode: w.wr.op.wc_opcode(),
            qp_num: self.qpn,
            byte_len: w.len as u32,
            imm_data: None,
            solicited: status != WcStatus::Success,
            invalidated_rkey: None,
            srq: None,
        }
    }

    pub(crate) fn recv_wc(
        &self,
        wr_id: u64,
        status: WcStatus,
        opcode: WcOpcode,
        byte_len: u64,
        imm_data: Option<u32>,
    ) -> WorkCompletion {
        let solicited = status != WcStatus::Success;
        WorkCompletion {
            wr_id,
            status,
            opcode,
            qp_num: self.qpn,
            byte_len: byte_len as u32,
            imm_data,
            solicited,
            invalidated_rkey: None,
            srq: if self.service.is_xrc() { self.srq } else { None },
        }
    }

    /// Enter ERR: flush every outstanding send and receive request [rxe_qp_error, flush_send_queue].
    pub(crate) fn enter_error(&mut self, ctx: &mut Ctx<'_>) {
        self.state = QpState::Err;
        while let Some(w) = self.sq.pop_front() {
            ctx.cq.push_back(self.wc(&w, WcStatus::WrFlushErr));
        }
        while let Some(r) = self.rq.pop_front() {
            let wc = self.recv_wc(r.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, 0, None);
            ctx.cq.push_back(wc);
        }
        self.req_idx = 0;
        self.cur = None;
        self.uc_drop = None;
        self.uc_cur_pkts = 0;
        self.ack_deadline = None;
        self.rnr_deadline = None;
        self.resp_out.clear();
        self.pending_ack = None;
        self.cc.cnp_out = None;
    }

    /// Complete the oldest send request with an error and enter ERR.
    pub(crate) fn fail_front(&mut self, ctx: &mut Ctx<'_>, status: WcStatus) {
        if let Some(w) = self.sq.pop_front() {
            ctx.cq.push_back(self.wc(&w, status));
        }
        self.enter_error(ctx);
    }

    fn poll_transmit(&mut self, ctx: &mut Ctx<'_>) -> Option<RcPacket> {
        if ctx.cc.is_none() {
            if let Some(p) = self.resp_out.pop_front() {
                return Some(p);
            }
            if let Some(psn) = self.pending_ack.take() {
                return Some(self.ack_packet(psn, crate::rc::responder::AETH_ACK, None));
            }
            return self.next_request(ctx);
        }
        // Congestion control on: a CNP first; then what the rate lets go (ACKs always).
        if let Some(p) = self.cc.cnp_out.take() {
            ctx.c.cc.cnp_sent += 1;
            return Some(p);
        }
        let open = self.cc.gate_open(ctx);
        if let Some(front) = self.resp_out.front() {
            if !open && cc::paced(front.bth.opcode) {
                return self.cc.hold(ctx);
            }
            let p = self.resp_out.pop_front()?;
            return Some(self.cc.sent(ctx, p));
        }
        if let Some(psn) = self.pending_ack.take() {
            return Some(self.ack_packet(psn, crate::rc::responder::AETH_ACK, None));
        }
        if !open {
            if self.req_idx < self.sq.len() {
                return self.cc.hold(ctx);
            }
            return None;
        }
        let p = self.next_request(ctx)?;
        Some(self.cc.sent(ctx, p))
    }

    fn handle_timeout(&mut self, ctx: &mut Ctx<'_>) {
        self.cc.woken(ctx.now);
        if self.rnr_deadline.is_some_and(|t| t <= ctx.now) {
            self.rnr_deadline = None;
            self.rewind();
        }
        if self.ack_deadline.is_some_and(|t| t <= ctx.now) {
            self.ack_deadline = None;
            if psn::lt(self.comp_psn, self.hw_psn) {
                ctx.c.local_ack_timeout_err += 1;
                self.retry(ctx, true);
            }
        }
    }

    pub(crate) fn packet(&self, bth: bth::Repr, ext: ExtHeaders, payload: Vec<u8>) -> RcPacket {
        RcPacket {
            src_qp: self.qpn,
            dst: self.attr.dest,
            dst_mac: self.attr.dmac,
            hop_limit: self.attr.hop_limit,
            traffic_class: self.attr.traffic_class,
            bth,
            ext,
            payload,
            payload_in_place: None,
        }
    }
}
