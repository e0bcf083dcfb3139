//! `rdma_cm_id`: handles, states, port spaces, and the port table with the kernel's
//! uniqueness rules [cma.c cma_check_port, cma_alloc_any_port, cma_use_port; cma_priv.h].

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, SocketAddr};

use crate::Errno;

/// A handle to an `rdma_cm_id` of one stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CmId(pub u32);

/// `enum rdma_cm_state` [cma_priv.h], values as the kernel numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CmState {
    /// 0
    Idle,
    /// 1
    AddrQuery,
    /// 2
    AddrResolved,
    /// 3
    RouteQuery,
    /// 4
    RouteResolved,
    /// 5
    Connect,
    /// 6
    Disconnect,
    /// 7
    AddrBound,
    /// 8
    Listen,
    /// 9
    DeviceRemoval,
    /// 10
    Destroying,
    /// 11: an IB service resolution (`rdma_resolve_ib_service`) is in flight.
    AddrInfoQuery,
    /// 12: the IB service resolved.
    AddrInfoResolved,
}

impl CmState {
    /// The kernel's name without the `RDMA_CM_` prefix.
    pub const fn name(self) -> &'static str {
        match self {
            CmState::Idle => "IDLE",
            CmState::AddrQuery => "ADDR_QUERY",
            CmState::AddrResolved => "ADDR_RESOLVED",
            CmState::RouteQuery => "ROUTE_QUERY",
            CmState::RouteResolved => "ROUTE_RESOLVED",
            CmState::Connect => "CONNECT",
            CmState::Disconnect => "DISCONNECT",
            CmState::AddrBound => "ADDR_BOUND",
            CmState::Listen => "LISTEN",
            CmState::DeviceRemoval => "DEVICE_REMOVAL",
            CmState::Destroying => "DESTROYING",
            CmState::AddrInfoQuery => "ADDRINFO_QUERY",
            CmState::AddrInfoResolved => "ADDRINFO_RESOLVED",
        }
    }

    /// Parse a name as `name()` writes it.
    pub fn from_name(s: &str) -> Option<CmState> {
        ALL_STATES.iter().copied().find(|st| st.name() == s)
    }
}

/// Every state.
pub const ALL_STATES: [CmState; 13] = [
    CmState::Idle,
    CmState::AddrQuery,
    CmState::AddrResolved,
    CmState::RouteQuery,
    CmState::RouteResolved,
    CmState::Connect,
    CmState::Disconnect,
    CmState::AddrBound,
    CmState::Listen,
    CmState::DeviceRemoval,
    CmState::Destroying,
    CmState::AddrInfoQuery,
    CmState::AddrInfoResolved,
];

/// `enum rdma_ucm_port_space`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PortSpace {
    /// RDMA_PS_IPOIB (0x0002): UD.
    Ipoib,
    /// RDMA_PS_TCP (0x0106): RC.
    Tcp,
    /// RDMA_PS_UDP (0x0111): UD.
    Udp,
    /// RDMA_PS_IB (0x013F): RC or UD.
    Ib,
}

impl PortSpace {
    /// The kernel's value.
    pub const fn value(self) -> u16 {
        match self {
            PortSpace::Ipoib => 0x0002,
            PortSpace::Tcp => 0x0106,
            PortSpace::Udp => 0x0111,
            PortSpace::Ib => 0x013F,
        }
    }

    /// The port space with this value.
    pub fn from_value(v: u16) -> Option<PortSpace> {
        [PortSpace::Ipoib, PortSpace::Tcp, PortSpace::Udp, PortSpace::Ib].into_iter().find(|p| p.value() == v)
    }

    /// Whether the port space is datagram (its connect is SIDR).
    pub const fn is_ud(self) -> bool {
        matches!(self, PortSpace::Udp | PortSpace::Ipoib)
    }
}

/// The QP type an id is created with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected (`IBV_QPT_UC`, on `RDMA_PS_IB` only, as ucma_get_qp_type).
    Uc,
    /// Unreliable datagram.
    Ud,
    /// XRC initiator (`IBV_QPT_XRC_SEND`, `RDMA_PS_IB` only): its REQ says transport type 3,
    /// extended transport type 1 (cm.c `cm_req_set_qp_type`).
    XrcIni,
    /// XRC target (`IBV_QPT_XRC_RECV`, `RDMA_PS_IB` only): it accepts the REQs of XRC
    /// initiators; its REP names its QP in the EE context field (cm.c `cm_format_rep`).
    XrcTgt,
}

/// `(port space, port)` → the ids bound to it.
#[derive(Clone, Debug, Default)]
pub(crate) struct PortTable {
    binds: BTreeMap<(PortSpace, u16), BTreeSet<CmId>>,
}

/// What the port table needs to know about an id to apply the uniqueness rules.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BindInfo {
    pub addr: SocketAddr,
    pub reuseaddr: bool,
    pub afonly: bool,
}

impl PortTable {
    /// `cma_check_port`: may `me` (with `reuseaddr` as given) share the port with its owners?
    pub fn check(
        &self,
        ps: PortSpace,
        port: u16,
        me: CmId,
        mine: BindInfo,
        reuseaddr: bool,
        info: impl Fn(CmId) -> BindInfo,
    ) -> Result<(), Errno> {
        let Some(owners) = self.binds.get(&(ps, port)) else { return Ok(()) };
        for &cur in owners {
            if cur == me {
                continue;
            }
            let c = info(cur);
            if reuseaddr && c.reuseaddr {
                continue;
            }
            if mine.afonly && c.afonly && mine.addr.is_ipv4() != c.addr.is_ipv4() {
                continue;
            }
            if mine.addr.ip().is_unspecified() || c.addr.ip().is_unspecified() {
                return Err(Errno::EADDRNOTAVAIL);
            }
            if mine.addr.ip() == c.addr.ip() {
                return Err(Errno::EADDRINUSE);
            }
        }
        Ok(())
    }

    /// Whether any id holds the port.
    pub fn in_use(&self, ps: PortSpace, port: u16) -> bool {
        self.binds.get(&(ps, port)).is_some_and(|s| !s.is_empty())
    }

    pub fn insert(&mut self, ps: PortSpace, port: u16, id: CmId) {
        self.binds.entry((ps, port)).or_default().insert(id);
    }

    pub fn remove(&mut self, ps: PortSpace, port: u16, id: CmId) {
        if let Some(s) = self.binds.get_mut(&(ps, port)) {
            s.remove(&id);
            if s.is_empty() {
                self.binds.remove(&(ps, port));
            }
        }
    }

    /// Every bound (space, port) pair with its owners.
    pub fn iter(&self) -> impl Iterator<Item = (&(PortSpace, u16), &BTreeSet<CmId>)> {
        self.binds.iter()
    }
}

/// Whether an address is an IPv6 link-local one without a scope id (the kernel refuses it).
pub(crate) fn link_local_without_scope(addr: &SocketAddr) -> bool {
    match addr {
        SocketAddr::V6(a) => (a.ip().segments()[0] & 0xffc0) == 0xfe80 && a.scope_id() == 0,
        SocketAddr::V4(_) => false,
    }
}

/// The unspecified address of `ip`'s family.
pub(crate) fn wildcard_like(ip: &IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
    }
}

/// A member handle (one join of one id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MemberKey(pub u64);

/// What the stack keeps per `rdma_cm_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdRecord {
    /// Port space.
    pub ps: PortSpace,
    /// QP type.
    pub qp_type: QpType,
    /// State.
    pub state: CmState,
    /// Source address and port (after bind or resolution).
    pub src: Option<SocketAddr>,
    /// Destination (after resolve_addr).
    pub dst: Option<SocketAddr>,
    /// Whether the port is held in the port table.
    pub(crate) bound: bool,
    /// SO_REUSEADDR.
    pub reuseaddr: bool,
    /// IPV6_V6ONLY-like: the address family only.
    pub afonly: bool,
    pub(crate) afonly_set: bool,
    /// Whether a device is attached (a specific bind or a resolved address).
    pub has_device: bool,
    /// The UD QP associated with the id (rdma_create_qp).
    pub qpn: Option<u32>,
    pub(crate) members: IdMembers,
    pub(crate) conn: Option<u32>,
    /// Whether an IB CM id is attached (cma.c `id_priv->cm_id.ib`): from a successful
    /// `rdma_connect`, a received request (child ids) or `rdma_listen` on a device, until the
    /// id is destroyed. `rdma_reject` and `rdma_disconnect` need one (else EINVAL).
    pub(crate) cm_id: bool,
    /// The listener a child id came from.
    pub listen_parent: Option<CmId>,
    /// `rdma_set_service_type`: the ToS (RoCE traffic class) of the id's connection.
    pub tos: Option<u8>,
    /// `rdma_restrict_node_type`: 0 unspecified, 1 IB CA, 4 RNIC.
    pub(crate) restricted_node_type: u8,
}

/// An id's joins, hashed by group so that a leave finds the id's first join of a group, and
/// the last leave of a group is seen, in O(1) however many groups the id holds. An id joins
/// a group once as a rule: that join is kept inline, so joining and leaving allocates nothing
/// once the map has grown (a hash map keeps its capacity). Boxed, made on the id's first join
/// and kept: an id that never joins holds 8 bytes for it.
#[derive(Debug, Clone, Default)]
pub struct IdMembers {
    joins: Option<Box<Joins>>,
}

impl PartialEq for IdMembers {
    fn eq(&self, other: &IdMembers) -> bool {
        match (&self.joins, &other.joins) {
            (Some(a), Some(b)) => a.by_group == b.by_group,
            _ => self.is_empty() && other.is_empty(),
        }
    }
}

impl Eq for IdMembers {}

/// The joins of an id that joined at least once.
#[derive(Debug, Clone, Default)]
struct Joins {
    by_group: HashMap<IpAddr, GroupJoins, foldhash::fast::RandomState>,
    len: usize,
}

/// One id's joins of one group, oldest (smallest handle) first.
#[derive(Debug, Clone, PartialEq, Eq)]
struct GroupJoins {
    first: MemberKey,
    /// Further joins of the same group (rare: several join states), in handle order; boxed
    /// so that the common entry stays small (a map entry per joined group).
    #[allow(clippy::box_collection)] // on purpose: 8 bytes in the entry instead of 24
    more: Option<Box<Vec<MemberKey>>>,
}

impl GroupJoins {
    fn more(&self) -> &[MemberKey] {
        self.more.as_deref().map_or(&[], |v| &v[..])
    }

    fn more_mut(&mut self) -> &mut Vec<MemberKey> {
        self.more.get_or_insert_with(Default::default)
    }

    /// Promote the oldest further join to `first`; false if there is none.
    fn promote(&mut self) -> bool {
        let Some(v) = self.more.as_mut() else { return false };
        self.first = v.remove(0);
        if v.is_empty() {
            self.more = None;
        }
        true
    }

    fn remove_more(&mut self, k: MemberKey) -> bool {
        let Some(v) = self.more.as_mut() else { return false };
        let Some(at) = v.iter().position(|x| *x == k) else { return false };
        v.remove(at);
        if v.is_empty() {
            self.more = None;
        }
        true
    }
}

impl Joins {
    fn insert(&mut self, group: IpAddr, k: MemberKey) {
        match self.by_group.entry(group) {
            Entry::Vacant(v) => {
                v.insert(GroupJoins { first: k, more: None });
            }
            Entry::Occupied(mut o) => {
                let j = o.get_mut();
                if j.first == k || j.more().contains(&k) {
                    return;
                }
                if k < j.first {
                    let old = core::mem::replace(&mut j.first, k);
                    j.more_mut().insert(0, old);
                } else {
                    let at = j.more().partition_point(|x| *x < k);
                    j.more_mut().insert(at, k);
                }
            }
        }
        self.len += 1;
    }
    fn remove(&mut self, group: IpAddr, k: MemberKey) {
        let Entry::Occupied(mut o) = self.by_group.entry(group) else { return };
        let j = o.get_mut();
        if j.first == k {
            if !j.promote() {
                o.remove();
            }
        } else if !j.remove_more(k) {
            return;
        }
        self.len -= 1;
        // A map grown by a burst gives its memory back once the id holds no group.
        if self.len == 0 && self.by_group.capacity() > 64 {
            self.by_group = HashMap::default();
        }
    }
    /// Take out the id's first (oldest) join of `group`: its handle, and whether the id still
    /// holds the group after it.
    fn take_first(&mut self, group: IpAddr) -> Option<(MemberKey, bool)> {
        let Entry::Occupied(mut o) = self.by_group.entry(group) else { return None };
        let j = o.get_mut();
        let k = j.first;
        let still = j.promote();
        if !still {
            o.remove();
        }
        self.len -= 1;
        if self.len == 0 && self.by_group.capacity() > 64 {
            self.by_group = HashMap::default();
        }
        Some((k, still))
    }

    fn keys(&self) -> Vec<MemberKey> {
        let mut v: Vec<(IpAddr, MemberKey)> = self
            .by_group
            .iter()
            .flat_map(|(g, j)| core::iter::once(j.first).chain(j.more().iter().copied()).map(|k| (*g, k)))
            .collect();
        v.sort_unstable();
        v.into_iter().map(|(_, k)| k).collect()
    }
    fn contains(&self, k: &MemberKey) -> bool {
        self.by_group.values().any(|j| j.first == *k || j.more().contains(k))
    }
}

impl IdMembers {
    pub(crate) fn insert(&mut self, group: IpAddr, k: MemberKey) {
        self.joins.get_or_insert_with(Default::default).insert(group, k);
    }
    pub(crate) fn remove(&mut self, group: IpAddr, k: MemberKey) {
        if let Some(j) = self.joins.as_mut() {
            j.remove(group, k);
        }
    }
    /// Take out the id's first (oldest) join of `group`: its handle, and whether the id still
    /// holds the group after it.
    pub(crate) fn take_first(&mut self, group: IpAddr) -> Option<(MemberKey, bool)> {
        self.joins.as_mut()?.take_first(group)
    }
    /// The id's first (oldest) join of `group`.
    #[cfg(test)]
    pub(crate) fn first_of(&self, group: IpAddr) -> Option<MemberKey> {
        self.joins.as_ref()?.by_group.get(&group).map(|j| j.first)
    }
    pub(crate) fn has_group(&self, group: IpAddr) -> bool {
        self.joins.as_ref().is_some_and(|j| j.by_group.contains_key(&group))
    }
    /// Every join of the id, by group (in address order), then oldest first.
    pub fn keys(&self) -> Vec<MemberKey> {
        self.joins.as_ref().map(|j| j.keys()).unwrap_or_default()
    }
    /// Whether the id holds this join (linear: for checks, not for the data path).
    pub fn contains(&self, k: &MemberKey) -> bool {
        self.joins.as_ref().is_some_and(|j| j.contains(k))
    }
    /// Number of joins.
    pub fn len(&self) -> usize {
        self.joins.as_ref().map_or(0, |j| j.len)
    }
    /// Whether the id holds no join.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The ids' table: what the stack keeps per `rdma_cm_id`, by id.
pub(crate) type IdTable = BTreeMap<CmId, IdRecord>;

/// The owner of the `rdma_cm_id`s: their records, their numbering and the port table. The id
/// calls (api.rs), CM (cm.rs) and multicast reach an id only through this interface.
#[derive(Clone, Debug)]
pub(crate) struct Ids {
    table: IdTable,
    next_id: u32,
    ports: PortTable,
}

impl Default for Ids {
    fn default() -> Ids {
        Ids { table: BTreeMap::new(), next_id: 1, ports: PortTable::default() }
    }
}

impl Ids {
    /// A new id in IDLE.
    pub fn alloc(&mut self, ps: PortSpace, qp_type: QpType) -> CmId {
        let id = CmId(self.next_id);
        self.next_id += 1;
        self.table.insert(
            id,
            IdRecord {
                ps,
                qp_type,
                state: CmState::Idle,
                src: None,
                dst: None,
                bound: false,
                reuseaddr: false,
                afonly: false,
                afonly_set: false,
                has_device: false,
                qpn: None,
                members: Default::default(),
                conn: None,
                cm_id: false,
                listen_parent: None,
                tos: None,
                restricted_node_type: 0,
            },
        );
        id
    }

    /// The id's record.
    #[inline]
    pub fn get(&self, id: &CmId) -> Option<&IdRecord> {
        self.table.get(id)
    }

    /// The id's record, to change.
    #[inline]
    pub fn get_mut(&mut self, id: &CmId) -> Option<&mut IdRecord> {
        self.table.get_mut(id)
    }

    /// Every live id's record (the crate's invariant checks read them all).
    #[cfg(test)]
    pub fn values(&self) -> impl Iterator<Item = &IdRecord> {
        self.table.values()
    }

    /// Every live id.
    pub fn keys(&self) -> impl Iterator<Item = &CmId> {
        self.table.keys()
    }

    /// Forget the id.
    pub fn remove(&mut self, id: &CmId) {
        self.table.remove(id);
    }

    /// The id's state.
    #[inline]
    pub fn state(&self, id: CmId) -> Option<CmState> {
        self.table.get(&id).map(|r| r.state)
    }

    /// Move the id to `st` (no checks: the caller applied the kernel's rules).
    #[inline]
    pub fn set_state(&mut self, id: CmId, st: CmState) {
        if let Some(r) = self.table.get_mut(&id) {
            r.state = st;
        }
    }

    /// The table as multicast sees it (through `MemberIds`, implemented in api.rs).
    #[inline]
    pub fn table_mut(&mut self) -> &mut IdTable {
        &mut self.table
    }

    /// The port table.
    pub fn ports(&self) -> &PortTable {
        &self.ports
    }

    /// What the port table needs to know about `id`.
    pub fn bind_info(&self, id: CmId) -> BindInfo {
        let r = &self.table[&id];
        BindInfo {
            addr: r.src.unwrap_or_else(|| SocketAddr::new(IpAddr::from([0, 0, 0, 0]), 0)),
            reuseaddr: r.reuseaddr,
            afonly: r.afonly,
        }
    }

    /// `cma_check_port` for `id` on `(ps, port)` with `reuseaddr` as given.
    pub fn check_port(&self, ps: PortSpace, port: u16, id: CmId, reuseaddr: bool) -> Result<(), Errno> {
        self.ports.check(ps, port, id, self.bind_info(id), reuseaddr, |c| self.bind_info(c))
    }

    /// Hold `(ps, port)` for `id`.
    pub fn hold_port(&mut self, ps: PortSpace, port: u16, id: CmId) {
        self.ports.insert(ps, port, id);
    }

    /// Give back the id's port, if it holds one.
    pub fn release_port(&mut self, id: CmId) {
        if let Some(r) = self.table.get_mut(&id) {
            if r.bound {
                r.bound = false;
                if let Some(src) = r.src {
                    self.ports.remove(r.ps, src.port(), id);
                }
            }
        }
    }

    /// The listener for a port space, port and destination address.
    pub fn find_listener(&self, ps: u16, port: u16, dst: IpAddr) -> Option<CmId> {
        self.table
            .iter()
            .filter(|(_, r)| r.state == CmState::Listen && r.ps.value() == ps)
            .find(|(_, r)| r.src.is_some_and(|s| s.port() == port && (s.ip().is_unspecified() || s.ip() == dst)))
            .map(|(id, _)| *id)
    }

    /// A child id of `listener` for a received request: CONNECT, with a device and an IB CM id.
    pub fn spawn_child(&mut self, listener: CmId, local: SocketAddr, remote: SocketAddr) -> CmId {
        let (ps, qp_type) = self.table.get(&listener).map_or((PortSpace::Tcp, QpType::Rc), |l| (l.ps, l.qp_type));
        let id = self.alloc(ps, qp_type);
        if let Some(r) = self.table.get_mut(&id) {
            r.state = CmState::Connect;
            r.src = Some(local);
            r.dst = Some(remote);
            r.has_device = true;
            r.cm_id = true;
            r.listen_parent = Some(listener);
        }
        id
    }

    /// The id's CM connection (by local communication ID).
    #[inline]
    pub fn conn(&self, id: CmId) -> Option<u32> {
        self.table.get(&id).and_then(|r| r.conn)
    }

    /// Attach a connection to the id (`None`: detach).
    pub fn set_conn(&mut self, id: CmId, comm: Option<u32>) {
        if let Some(r) = self.table.get_mut(&id) {
            r.conn = comm;
        }
    }

    /// The id's QP.
    #[inline]
    pub fn qpn(&self, id: CmId) -> Option<u32> {
        self.table.get(&id).and_then(|r| r.qpn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_members_first_of_keys_order_and_counts() {
        let g = |o: u8| IpAddr::from([239, 0, 0, o]);
        let g6: IpAddr = "ff0e::1".parse().unwrap();
        let mut m = IdMembers::default();
        for (grp, k) in [(g(2), 5), (g6, 1), (g(1), 7), (g(2), 3), (g(2), 9), (g(1), 2)] {
            m.insert(grp, MemberKey(k));
        }
        m.insert(g(2), MemberKey(9)); // a repeat changes nothing
        assert_eq!(m.len(), 6);
        // By group (IPv4 before IPv6, in address order), then oldest first: the BTreeSet's order.
        assert_eq!(m.keys(), [2, 7, 3, 5, 9, 1].map(MemberKey));
        assert_eq!(m.first_of(g(2)), Some(MemberKey(3)));
        assert_eq!(m.take_first(g(2)), Some((MemberKey(3), true)));
        assert_eq!(m.len(), 5);
        assert_eq!(m.first_of(g(2)), Some(MemberKey(5)));
        m.remove(g(2), MemberKey(9));
        m.remove(g(2), MemberKey(4)); // not held: nothing
        assert!(m.contains(&MemberKey(5)) && !m.contains(&MemberKey(9)));
        assert_eq!(m.take_first(g(2)), Some((MemberKey(5), false)));
        assert_eq!(m.take_first(g(2)), None);
        assert!(!m.has_group(g(2)) && m.first_of(g(2)).is_none());
        assert_eq!(m.len(), 3);
        for (grp, k) in [(g6, 1), (g(1), 7), (g(1), 2)] {
            m.remove(grp, MemberKey(k));
        }
        assert!(m.is_empty() && m.keys().is_empty());
    }
}
