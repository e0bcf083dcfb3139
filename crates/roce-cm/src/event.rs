//! Events, with the kernel's names, values and payloads [include/rdma/rdma_cm.h; cma.c
//! cma_make_mc_event; protocol.md §5.4].

use std::net::IpAddr;

use roce_wire::mcmember::McMemberRecord;
use roce_wire::Gid;

use crate::id::CmId;

/// `enum rdma_cm_event_type`, plus one extension of ours ([`EventKind::MulticastLeft`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    /// 0: address resolved.
    AddrResolved,
    /// 1: address resolution failed.
    AddrError,
    /// 2: route resolved.
    RouteResolved,
    /// 3: route resolution failed.
    RouteError,
    /// 4: a connection request arrived (on the new child id).
    ConnectRequest,
    /// 5: a reply arrived (ids without a QP).
    ConnectResponse,
    /// 6: connection error.
    ConnectError,
    /// 7: the peer did not answer (or SIDR said so).
    Unreachable,
    /// 8: the peer rejected (status = REJ reason).
    Rejected,
    /// 9: connection (or SIDR resolution) established.
    Established,
    /// 10: disconnected.
    Disconnected,
    /// 11: the device went away.
    DeviceRemoval,
    /// 12: a multicast join completed.
    MulticastJoin,
    /// 13: a multicast join (or, with this stack, a leave) failed.
    MulticastError,
    /// 14: the address changed.
    AddrChange,
    /// 15: TIMEWAIT ended.
    TimewaitExit,
    /// 16: an IB service resolved (`rdma_resolve_ib_service`).
    AddrInfoResolved,
    /// 17: an IB service resolution failed (status: the errno).
    AddrInfoError,
    /// Extension (no kernel value): a leave completed — the SA answered the Delete, or no
    /// Delete was needed. The kernel never reports leaves; interop tools need to know.
    MulticastLeft,
}

impl EventKind {
    /// The kernel's value (`RDMA_CM_EVENT_*`); the extension reports 256.
    pub const fn value(self) -> u32 {
        match self {
            EventKind::AddrResolved => 0,
            EventKind::AddrError => 1,
            EventKind::RouteResolved => 2,
            EventKind::RouteError => 3,
            EventKind::ConnectRequest => 4,
            EventKind::ConnectResponse => 5,
            EventKind::ConnectError => 6,
            EventKind::Unreachable => 7,
            EventKind::Rejected => 8,
            EventKind::Established => 9,
            EventKind::Disconnected => 10,
            EventKind::DeviceRemoval => 11,
            EventKind::MulticastJoin => 12,
            EventKind::MulticastError => 13,
            EventKind::AddrChange => 14,
            EventKind::TimewaitExit => 15,
            EventKind::AddrInfoResolved => 16,
            EventKind::AddrInfoError => 17,
            EventKind::MulticastLeft => 256,
        }
    }

    /// The kernel's name without the `RDMA_CM_EVENT_` prefix (`MULTICAST_JOIN`).
    pub const fn name(self) -> &'static str {
        match self {
            EventKind::AddrResolved => "ADDR_RESOLVED",
            EventKind::AddrError => "ADDR_ERROR",
            EventKind::RouteResolved => "ROUTE_RESOLVED",
            EventKind::RouteError => "ROUTE_ERROR",
            EventKind::ConnectRequest => "CONNECT_REQUEST",
            EventKind::ConnectResponse => "CONNECT_RESPONSE",
            EventKind::ConnectError => "CONNECT_ERROR",
            EventKind::Unreachable => "UNREACHABLE",
            EventKind::Rejected => "REJECTED",
            EventKind::Established => "ESTABLISHED",
            EventKind::Disconnected => "DISCONNECTED",
            EventKind::DeviceRemoval => "DEVICE_REMOVAL",
            EventKind::MulticastJoin => "MULTICAST_JOIN",
            EventKind::MulticastError => "MULTICAST_ERROR",
            EventKind::AddrChange => "ADDR_CHANGE",
            EventKind::TimewaitExit => "TIMEWAIT_EXIT",
            EventKind::AddrInfoResolved => "ADDRINFO_RESOLVED",
            EventKind::AddrInfoError => "ADDRINFO_ERROR",
            EventKind::MulticastLeft => "MULTICAST_LEFT",
        }
    }

    /// Parse a name as `name()` writes it.
    pub fn from_name(s: &str) -> Option<EventKind> {
        ALL_EVENTS.iter().copied().find(|e| e.name() == s)
    }
}

/// Every event kind.
pub const ALL_EVENTS: [EventKind; 19] = [
    EventKind::AddrResolved,
    EventKind::AddrError,
    EventKind::RouteResolved,
    EventKind::RouteError,
    EventKind::ConnectRequest,
    EventKind::ConnectResponse,
    EventKind::ConnectError,
    EventKind::Unreachable,
    EventKind::Rejected,
    EventKind::Established,
    EventKind::Disconnected,
    EventKind::DeviceRemoval,
    EventKind::MulticastJoin,
    EventKind::MulticastError,
    EventKind::AddrChange,
    EventKind::TimewaitExit,
    EventKind::AddrInfoResolved,
    EventKind::AddrInfoError,
    EventKind::MulticastLeft,
];

/// An address handle as `ib_init_ah_from_mcmember` / the CM builds it for RoCE: where and how
/// to send UD datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AddressHandle {
    /// Destination GID (an MGID for a group).
    pub dgid: Gid,
    /// Source GID.
    pub sgid: Gid,
    /// Destination MAC (the multicast MAC for a group).
    pub dmac: [u8; 6],
    /// Hop limit / TTL.
    pub hop_limit: u8,
    /// Traffic class / TOS.
    pub traffic_class: u8,
    /// Flow label.
    pub flow_label: u32,
    /// Service level.
    pub sl: u8,
}

/// `struct rdma_ud_param`: what a UD peer (a group, or a SIDR-resolved service) needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdParam {
    /// The address handle.
    pub ah: AddressHandle,
    /// The remote QPN (0xFFFFFF for a group).
    pub qp_num: u32,
    /// The remote Q_Key.
    pub qkey: u32,
}

/// Connection parameters carried by CM events (`struct rdma_conn_param`, trimmed).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnParam {
    /// The peer's private data (after the RDMA-CM header, for IP port spaces).
    pub private_data: Vec<u8>,
    /// Responder resources.
    pub responder_resources: u8,
    /// Initiator depth.
    pub initiator_depth: u8,
    /// The peer's QPN.
    pub remote_qpn: u32,
    /// RNR retry count.
    pub rnr_retry_count: u8,
    /// Retry count.
    pub retry_count: u8,
}

/// What an event carries besides its kind and status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventParam {
    /// Nothing.
    None,
    /// A multicast event: the group, the record (SA's or local), the UD parameters of the
    /// group for MULTICAST_JOIN, and the SA's MAD status if the SA answered with an error.
    Multicast {
        /// The group address the application joined.
        group: IpAddr,
        /// The MCMemberRecord (MLID, MTU, rate …) the join produced.
        record: Option<McMemberRecord>,
        /// For MULTICAST_JOIN: QPN 0xFFFFFF, the group's Q_Key and address handle.
        ud: Option<UdParam>,
        /// The SA's status when it answered with one (MULTICAST_ERROR).
        sa_status: Option<u16>,
    },
    /// A UD (SIDR) event: ESTABLISHED with the service's QPN and Q_Key.
    Ud(UdParam),
    /// A connected-mode event.
    Conn(ConnParam),
}

/// One event (`struct rdma_cm_event`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmEvent {
    /// The id it is for (the new child id for CONNECT_REQUEST).
    pub id: CmId,
    /// For CONNECT_REQUEST: the listening id.
    pub listen_id: Option<CmId>,
    /// The kind.
    pub kind: EventKind,
    /// 0, a negative errno, or (REJECTED) the REJ reason.
    pub status: i32,
    /// The payload.
    pub param: EventParam,
}
