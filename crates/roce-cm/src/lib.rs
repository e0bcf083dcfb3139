//! # roce-cm: the sans-IO RoCEv2 engine
//!
//! One [`Stack`] per port: `rdma_cm_id`s with the kernel's states, events and errors; multicast
//! membership with the kernel's InfiniBand accounting carried as SA transactions to QP1, beside
//! the RoCE-native IGMP/MLD; userspace ARP and neighbour discovery; UD queue pairs.
//!
//! Like quinn-proto, it has no sockets and no clock: inputs are `handle_frame(now, bytes)` and
//! `handle_timeout(now)`, API calls are mutators, outputs are `poll_transmit(now, buf)`,
//! `poll_timeout()` and `poll_event()`. The same engine runs on a simulated link in tests and on
//! a raw socket in production.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod api;
pub mod cc;
pub mod cm;
pub mod config;
mod conn;
pub mod counters;
mod ctx;
pub mod errno;
pub mod event;
mod gsi;
pub mod id;
pub mod mcast;
pub mod neigh;
pub mod qp;
pub mod rc;
pub mod rmpp_recv;
mod sa_client;
pub mod sa_query;
pub mod service;
pub mod stack;
pub mod time;

pub use cm::{consumer_reject_data, reject_msg, ConnectParam, InitQpState, QpEvent};
pub use config::{
    IgmpVersion, MgidStyle, MulticastPaths, NeighborResolution, SaTiming, SaTransport, StackConfig, KERNEL_NEIGHBOR_MAC,
};
pub use counters::{Counters, DropReason};
pub use errno::Errno;
pub use event::{CmEvent, EventKind, EventParam};
pub use id::{CmId, CmState, PortSpace, QpType};
pub use qp::{Datagram, UdDest};
pub use rmpp_recv::{RmppError, RmppStats};
pub use service::IbService;
pub use stack::{MadRequest, Stack};
pub use time::Instant;
#[cfg(test)]
mod tests;
