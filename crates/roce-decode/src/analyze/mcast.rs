//! Multicast: SA MCMemberRecord joins (Set) and leaves (Delete) per MGID and port GID, the
//! membership changing when the SA answers with success; IGMP and MLD reports and leaves
//! per group address and host. Members over time are a bounded series per group.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::IpAddr;

use roce_wire::igmp::{self, IgmpMessage};
use roce_wire::mld::{self, MldMessage};

use super::series::Points;
use super::Note;

/// Members a group remembers; beyond, joins still count but the member is not listed.
pub const MAX_MEMBERS: usize = 4096;
/// Groups kept; beyond, messages are counted in [`McastTable::groups_dropped`].
pub const MAX_GROUPS: usize = 65_536;

/// A group: an MGID (SA) or an IP multicast address (IGMP/MLD).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GroupId {
    /// IB MGID (RoCE: the IP address mapped to a GID).
    Mgid([u8; 16]),
    /// IPv4 or IPv6 group address.
    Ip(IpAddr),
}

/// A member: an SA port GID or an IGMP/MLD host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Member {
    /// Port GID.
    PortGid([u8; 16]),
    /// Reporting host.
    Host(IpAddr),
}

/// One group.
#[derive(Debug, Clone, Default)]
pub struct Group {
    /// SA Set requests (join).
    pub join_requests: u64,
    /// SA Delete requests (leave).
    pub leave_requests: u64,
    /// SA Sets answered with success.
    pub joins: u64,
    /// SA Deletes answered with success.
    pub leaves: u64,
    /// SA answers with a non-zero status.
    pub failed: u64,
    /// IGMP/MLD reports naming the group.
    pub reports: u64,
    /// IGMP leaves, MLD dones, or records changing to include-nothing.
    pub report_leaves: u64,
    /// Members now.
    pub members: BTreeSet<Member>,
    /// The most members at once.
    pub max_members: usize,
    /// (time, members) at each change (bounded).
    pub over_time: Points<(f64, u32)>,
}

impl Group {
    fn change(&mut self, m: Member, join: bool, t: f64) {
        let changed =
            if join { self.members.len() < MAX_MEMBERS && self.members.insert(m) } else { self.members.remove(&m) };
        if changed {
            self.max_members = self.max_members.max(self.members.len());
            self.over_time.push((t, self.members.len() as u32));
        }
    }
}

/// Every group.
#[derive(Debug, Default)]
pub struct McastTable {
    /// Groups by id.
    pub groups: BTreeMap<GroupId, Group>,
    /// Messages about groups past [`MAX_GROUPS`].
    pub groups_dropped: u64,
    /// IGMP/MLD queries.
    pub queries: u64,
}

fn gid(b: &[u8]) -> [u8; 16] {
    let mut g = [0; 16];
    g.copy_from_slice(&b[..16]);
    g
}

/// Where the MCMemberRecord starts in an SA MAD (MAD 24 + RMPP 12 + SA header 20).
const RECORD: usize = roce_wire::sa::SA_DATA_OFFSET;

impl McastTable {
    fn group(&mut self, id: GroupId) -> Option<&mut Group> {
        if !self.groups.contains_key(&id) && self.groups.len() >= MAX_GROUPS {
            self.groups_dropped += 1;
            return None;
        }
        Some(self.groups.entry(id).or_default())
    }

    /// An SA MCMemberRecord request (Set or Delete) or its answer, `closed` the request's
    /// method and the answer's status.
    pub fn sa(&mut self, m: &[u8], response: Option<(u8, u16)>, t: f64, note: &mut Note) {
        if m.len() < RECORD + 52 {
            return;
        }
        let r = &m[RECORD..];
        let mgid = gid(&r[0..16]);
        let port = gid(&r[16..32]);
        let method = m[3] & 0x7f;
        let Some(g) = self.group(GroupId::Mgid(mgid)) else { return };
        match response {
            None if m[3] & 0x80 == 0 => match method {
                0x02 => g.join_requests += 1,
                0x15 => g.leave_requests += 1,
                _ => {}
            },
            None => {}
            Some((req, status)) => {
                let join = match req {
                    0x02 => true,
                    0x15 => false,
                    _ => return,
                };
                if status != 0 {
                    g.failed += 1;
                    return;
                }
                if join {
                    g.joins += 1;
                } else {
                    g.leaves += 1;
                }
                g.change(Member::PortGid(port), join, t);
                let _ = write!(note.text(), "{} {} members", if join { "join:" } else { "leave:" }, g.members.len());
            }
        }
    }

    fn host(&mut self, group: IpAddr, host: IpAddr, join: bool, t: f64) {
        if let Some(g) = self.group(GroupId::Ip(group)) {
            if join {
                g.reports += 1;
            } else {
                g.report_leaves += 1;
            }
            g.change(Member::Host(host), join, t);
        }
    }

    /// An IGMP message from `host`.
    pub fn igmp(&mut self, host: IpAddr, msg: &IgmpMessage, t: f64) {
        use igmp::{MessageType as M, RecordType as R};
        match msg {
            IgmpMessage::V2(v) => match v.msg_type {
                M::V1MembershipReport | M::V2MembershipReport => self.host(v.group_addr.into(), host, true, t),
                M::LeaveGroup => self.host(v.group_addr.into(), host, false, t),
                M::MembershipQuery => self.queries += 1,
                _ => {}
            },
            IgmpMessage::V3Query(_) => self.queries += 1,
            IgmpMessage::V3Report(r) => {
                for rec in r.records.iter() {
                    let leave =
                        matches!(rec.record_type, R::ChangeToInclude | R::ModeIsInclude) && rec.sources.is_empty();
                    self.host(rec.group_addr.into(), host, !leave, t);
                }
            }
        }
    }

    /// An MLD message from `host`.
    pub fn mld(&mut self, host: IpAddr, msg: &MldMessage, t: f64) {
        use mld::{MessageType as M, RecordType as R};
        match msg {
            MldMessage::V1(v) => match v.msg_type {
                M::V1Report => self.host(v.mcast_addr.into(), host, true, t),
                M::V1Done => self.host(v.mcast_addr.into(), host, false, t),
                M::Query => self.queries += 1,
                _ => {}
            },
            MldMessage::Query(_) => self.queries += 1,
            MldMessage::Report(r) => {
                for rec in r.records.iter() {
                    let leave =
                        matches!(rec.record_type, R::ChangeToInclude | R::ModeIsInclude) && rec.sources.is_empty();
                    self.host(rec.mcast_addr.into(), host, !leave, t);
                }
            }
        }
    }
}
