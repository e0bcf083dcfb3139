//! Drop counters: every frame the stack does not accept increments exactly one named counter
//! with its reason (like rxe's hw_counters), so nothing is lost silently.

use std::collections::BTreeMap;
use std::fmt;

/// Why a received frame (or a frame queued for sending) was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DropReason {
    /// Not addressed to us (another unicast MAC, or a multicast MAC we did not join).
    NotForUs,
    /// A layer failed to parse: `roce_wire::Error::reason()` and the layer's name.
    Malformed(roce_wire::Layer),
    /// The ICRC was wrong (rxe drops these silently; we count them).
    BadIcrc,
    /// The IPv4 header checksum was wrong.
    BadIpChecksum,
    /// BTH TVer not 0.
    BadTver,
    /// The P_Key did not match ours (`pkey_match`).
    BadPkey,
    /// The DETH Q_Key did not match the QP's (or 0x80010000 for QP1).
    QkeyViolation,
    /// The opcode is not one this QP type accepts (UD/GSI accept only UD opcodes).
    WrongOpcodeForQp,
    /// No QP with that number.
    UnknownQp,
    /// A multicast datagram for a group no QP is attached to.
    UnknownGroup,
    /// A MAD on QP1 that is not valid (base version, class rules).
    BadMad,
    /// A MAD response with no outstanding request (TID and method do not match).
    UnsolicitedResponse,
    /// A MAD request for a class or method we do not serve.
    UnhandledMad,
    /// A CM message we cannot match to a connection.
    UnmatchedCm,
    /// A non-RoCE frame of a protocol we do not handle.
    UnhandledProtocol,
    /// An ARP or ND message that is not for our addresses.
    NeighborNotForUs,
    /// A UD receive queue was full.
    ReceiveQueueFull,
    /// An outgoing frame whose destination could not be resolved.
    NeighborUnresolved,
    /// An outgoing frame larger than the caller's buffer.
    TransmitBufferTooSmall,
    /// An RMPP DATA segment already received (re-ACKed when it was ACKed before).
    RmppDuplicate,
    /// An RMPP DATA segment past the window our last ACK opened.
    RmppBeyondWindow,
    /// An RMPP DATA segment after the first with no reassembly to add it to (its First missed).
    RmppNoFirst,
    /// An RMPP ACK sent to us (we only receive RMPP).
    RmppUnexpectedAck,
    /// An RMPP segment that broke the protocol: ABORT (or STOP) sent, the transaction failed.
    RmppAborted,
}

impl DropReason {
    /// A stable snake_case name, with the layer for malformed frames (`malformed_ipv4`).
    pub fn name(&self) -> String {
        match self {
            DropReason::NotForUs => "not_for_us".into(),
            DropReason::Malformed(l) => {
                format!("malformed_{}", l.name().to_ascii_lowercase().replace([' ', '-', '.'], "_"))
            }
            DropReason::BadIcrc => "bad_icrc".into(),
            DropReason::BadIpChecksum => "bad_ip_checksum".into(),
            DropReason::BadTver => "bad_tver".into(),
            DropReason::BadPkey => "bad_pkey".into(),
            DropReason::QkeyViolation => "qkey_violation".into(),
            DropReason::WrongOpcodeForQp => "wrong_opcode_for_qp".into(),
            DropReason::UnknownQp => "unknown_qp".into(),
            DropReason::UnknownGroup => "unknown_group".into(),
            DropReason::BadMad => "bad_mad".into(),
            DropReason::UnsolicitedResponse => "unsolicited_response".into(),
            DropReason::UnhandledMad => "unhandled_mad".into(),
            DropReason::UnmatchedCm => "unmatched_cm".into(),
            DropReason::UnhandledProtocol => "unhandled_protocol".into(),
            DropReason::NeighborNotForUs => "neighbor_not_for_us".into(),
            DropReason::ReceiveQueueFull => "receive_queue_full".into(),
            DropReason::NeighborUnresolved => "neighbor_unresolved".into(),
            DropReason::TransmitBufferTooSmall => "transmit_buffer_too_small".into(),
            DropReason::RmppDuplicate => "rmpp_duplicate".into(),
            DropReason::RmppBeyondWindow => "rmpp_beyond_window".into(),
            DropReason::RmppNoFirst => "rmpp_no_first".into(),
            DropReason::RmppUnexpectedAck => "rmpp_unexpected_ack".into(),
            DropReason::RmppAborted => "rmpp_aborted".into(),
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Frame counters of a stack.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// Frames handed to `handle_frame`.
    pub rx_frames: u64,
    /// Frames accepted (consumed by some part of the stack).
    pub rx_accepted: u64,
    /// Frames produced by `poll_transmit`.
    pub tx_frames: u64,
    /// Dropped frames by reason (received and, for the `Neighbor*`/`Transmit*` reasons, sent).
    pub dropped: BTreeMap<DropReason, u64>,
}

impl Counters {
    /// Count one dropped frame.
    pub fn drop(&mut self, reason: DropReason) {
        *self.dropped.entry(reason).or_insert(0) += 1;
    }

    /// The count for one reason.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped.get(&reason).copied().unwrap_or(0)
    }

    /// All drops.
    pub fn total_dropped(&self) -> u64 {
        self.dropped.values().sum()
    }
}
