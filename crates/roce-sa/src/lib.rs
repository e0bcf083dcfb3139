//! # roce-sa: a sans-IO SA responder (the MCMemberRecord service of a subnet manager)
//!
//! [`SaResponder`] answers the Subnet Administration MADs that RDMA-CM and the kernel's SA
//! client send to join and leave multicast groups (SubnAdmSet / SubnAdmDelete of an
//! MCMemberRecord), to look groups up (SubnAdmGet / SubnAdmGetTable) and to read the SA's
//! ClassPortInfo, with the rules and status codes of OpenSM's `osm_sa_mcmember_record.c`; and
//! it keeps ServiceRecords (register, look up, delete, leases that expire: [`service`]) as
//! `osm_sa_service_record.c` does, which `rdma_resolve_ib_service` queries.
//! It serves RoCEv2 (GIDs are IP addresses; the PortGID prefix check is off unless a prefix
//! is configured) as well as InfiniBand ([`SaConfig::infiniband`]).
//!
//! It is sans-IO: no socket, no clock. Hand it each MAD received on QP1 with the requester's
//! address and QP, and send back what it returns:
//!
//! ```
//! use roce_sa::{Requester, SaConfig, SaResponder};
//! use roce_wire::mad::{MadStatus, Method};
//! use roce_wire::mcmember::{ComponentMask, JoinState, McMemberRecord};
//! use roce_wire::sa::{attr, SaData, SaMad};
//! use roce_wire::Gid;
//!
//! let mut sa = SaResponder::new(SaConfig::roce()).expect("the RoCE defaults are valid");
//! let me = Gid::from_ipv4([198, 18, 0, 1].into());
//! let mgid = Gid::from_ipv4([239, 1, 2, 3].into());
//! let rec = McMemberRecord {
//!     mgid,
//!     port_gid: me,
//!     q_key: 0x0123_4567,
//!     p_key: 0xFFFF,
//!     join_state: JoinState::FULL_MEMBER,
//!     ..McMemberRecord::default()
//! };
//! let join = SaMad::request(Method::Set, 1, attr::MC_MEMBER_RECORD, ComponentMask::KERNEL_JOIN.0, SaData::mc_member(rec));
//! let reply = sa.handle_mad(Requester::new(me, 1), &join.to_bytes());
//! let resp = SaMad::parse(&reply[0]).unwrap();
//! assert_eq!(resp.header.status, MadStatus::SUCCESS);
//! assert_eq!(resp.mc_member().unwrap().mlid, 0xC000);
//! assert_eq!(sa.join_state(&mgid, &me), Some(JoinState::FULL_MEMBER));
//! ```
//!
//! The rules it implements, with their IBA compliance statements and OpenSM functions, and
//! where it deliberately differs from OpenSM (the send-only full member MLID leak of
//! OpenSM #43, the RoCE prefix check, RMPP windowing), are in spec/sa.md.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod cache;
pub mod config;
pub mod group;
mod mlid;
pub mod rate;
mod reply;
mod requester;
mod responder;
pub mod rmpp_send;
pub mod service;
mod stats;

#[cfg(test)]
mod tests;

pub use config::{
    ConfigError, SaConfig, DEFAULT_MAX_MEMBERS, DEFAULT_MAX_MEMBERS_PER_GROUP, DEFAULT_MAX_MEMBERS_PER_PORT,
};
pub use group::{Group, Member, FULL_JOIN_STATES};
pub use reply::Reply;
pub use requester::Requester;
pub use responder::{
    MemoryUsage, SaResponder, DUP_CACHE_HORIZON, MC_MEMBER_ATTRIBUTE_OFFSET, MEMBER_SWEEP_INTERVAL, TABLE_RECORD_LEN,
};
pub use rmpp_send::{RmppSendConfig, RmppSendStats, RmppSender};
pub use service::{ServiceStats, ServiceTable, SERVICE_ATTRIBUTE_OFFSET};
pub use stats::SaStats;
