//! CM's connection records (and SIDR resolutions), keyed by local communication ID: the
//! data the CM protocol (cm.rs) drives and the stack holds.

use std::net::IpAddr;
use std::time::Duration;

use roce_wire::cm::CmMessage;

use crate::id::CmId;

/// Where a connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnState {
    ReqSent,
    ReqRcvd,
    RepSent,
    /// An active id without a QP got the REP (CONNECT_RESPONSE): the RTU waits for
    /// `establish` (IB_CM_REP_RCVD).
    RepRcvd,
    Established,
    DreqSent,
    TimeWait,
    SidrReqSent,
    SidrReqRcvd,
}

/// One CM connection (or SIDR resolution), keyed by its local communication ID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Conn {
    pub id: CmId,
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub peer: IpAddr,
    pub peer_gsi_qp: u32,
    pub state: ConnState,
    pub tid: u64,
    pub retries_left: u32,
    pub last: Option<CmMessage>,
    pub remote_qpn: u32,
    pub service_id: u64,
    /// How long to wait for an answer before resending: the CM response timeout, or what
    /// the peer's MRA asked for.
    pub resend_after: Duration,
    /// The peer has sent an MRA for our REQ or REP (MRA_REQ_RCVD / MRA_REP_RCVD): a second
    /// one changes nothing.
    pub mra_received: bool,
    /// The RC QP's negotiated parameters (rc/).
    pub qp: crate::rc::CmQp,
}
