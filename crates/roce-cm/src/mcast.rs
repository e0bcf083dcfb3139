//! Multicast membership with the kernel's InfiniBand accounting [multicast.c; protocol.md
//! §4.2], carried as SA transactions over RoCEv2, beside the RoCE-native IGMP/MLD [cma.c
//! cma_iboe_join_multicast, destroy_mc].
//!
//! Per group (MGID): members counted per join-state bit; `rec`, the last record the SA
//! returned, whose JoinState is the set of bits the SA holds for this port. The group's work
//! runs one SA transaction at a time: first pending joins (a Set when the member needs a bit
//! `rec` lacks; otherwise satisfied locally), then a Delete of exactly the bits whose count
//! fell to zero, on `rec`, mask 0x10003; a failed Delete is retried up to 3 more times.
//! A leave never blocks: it is a state, emitted on the next poll.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;

use roce_wire::igmp::IgmpMessage;
use roce_wire::l2::{IgmpFrame, MldFrame};
use roce_wire::mad::{MadHeader, MadStatus, Method};
use roce_wire::mcmember::{ComponentMask, JoinState, McMemberRecord, Selector};
use roce_wire::mld::MldMessage;
use roce_wire::sa::{attr, SA_DATA_OFFSET};
use roce_wire::{Gid, MULTICAST_QPN, RDMA_UDP_QKEY};

use crate::config::IgmpVersion;
use crate::ctx::{FastHash, Outgoing, Work};
use crate::event::{AddressHandle, CmEvent, EventKind, EventParam, UdParam};
use crate::id::{CmId, PortSpace};
use crate::neigh::{emit_frame, multicast_mac};
use crate::qp::UdQps;
use crate::sa_client::{SaClient, TxnOwner};
use crate::{Errno, Instant};

pub use crate::id::{IdMembers, MemberKey};
pub use crate::sa_query::SaQueryResult;

/// Where a member stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// Waiting for the group's work (its Set not sent yet).
    Pending,
    /// Its Set is in flight.
    Joining,
    /// Joined: counted in the group's per-bit counts.
    Joined,
    /// Left while its Set was in flight: the SA's answer will be undone by a Delete.
    Cancelled,
}

/// One join of one id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The id that joined.
    pub id: CmId,
    /// The group's MGID.
    pub mgid: Gid,
    /// The address the application joined.
    pub addr: IpAddr,
    /// The requested join state (one bit).
    pub join_state: JoinState,
    /// The member's state.
    pub state: MemberState,
    /// Whether it holds an IP-level (IGMP/MLD) reference.
    pub(crate) ip_ref: bool,
}

/// The transaction a group has in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GroupOp {
    Join { member: MemberKey },
    Leave { bits: u8, leavers: Vec<CmId> },
}

/// One multicast group of this port. Kept small (most groups sit idle for their lifetime):
/// the work state exists only while there is work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The MGID (`::ffff:G` for an IPv4 group on RoCEv2, the address for IPv6).
    pub mgid: Gid,
    /// Local members per join-state bit (FullMember, NonMember, SendOnlyNonMember,
    /// SendOnlyFullMember).
    pub counts: [u32; 4],
    /// The last record the SA returned; its JoinState is what the SA holds for us.
    pub rec: Option<McMemberRecord>,
    pub(crate) members: Vec<MemberKey>,
    pub(crate) leave_retries: u32,
    pub(crate) work: Option<Box<GroupWork>>,
}

/// A group's work in progress: the transaction in flight, joins waiting, ids waiting for the
/// next Delete's answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct GroupWork {
    pub busy: Option<GroupOp>,
    pub pending: VecDeque<MemberKey>,
    pub leavers: Vec<CmId>,
}

impl Group {
    /// The group's address (the MGID as an IP address).
    pub fn addr(&self) -> IpAddr {
        self.mgid.to_ip()
    }

    /// The work state, made (from `spare` if it holds one) when there is none.
    pub(crate) fn w(&mut self, spare: &mut Spare) -> &mut GroupWork {
        self.work.get_or_insert_with(|| spare.work.pop().unwrap_or_default())
    }

    pub(crate) fn is_busy(&self) -> bool {
        self.work.as_ref().is_some_and(|w| w.busy.is_some())
    }

    fn pending_front(&self) -> Option<MemberKey> {
        self.work.as_ref().and_then(|w| w.pending.front().copied())
    }

    fn take_busy(&mut self) -> Option<GroupOp> {
        self.work.as_mut().and_then(|w| w.busy.take())
    }

    /// The ids waiting for the next answer; an empty list from `spare` takes their place.
    fn take_leavers(&mut self, spare: &mut Spare) -> Vec<CmId> {
        match self.work.as_mut() {
            Some(w) => std::mem::replace(&mut w.leavers, spare.ids.pop().unwrap_or_default()),
            None => Vec::new(),
        }
    }

    /// Give the work state back to `spare` when there is no work.
    fn compact(&mut self, spare: &mut Spare) {
        if self.work.as_ref().is_some_and(|w| w.busy.is_none() && w.pending.is_empty() && w.leavers.is_empty()) {
            if let Some(w) = self.work.take() {
                spare.put_work(w);
            }
        }
    }
}

/// Emptied containers kept for reuse, so that a group made and dropped at every join+leave
/// cycle allocates nothing in steady state (a few dozen of each, a few KiB in all).
#[derive(Clone, Debug, Default)]
pub(crate) struct Spare {
    // Boxed on purpose: a group holds its work as `Option<Box<GroupWork>>` (small idle groups),
    // and the box itself is what is reused.
    #[allow(clippy::vec_box)]
    work: Vec<Box<GroupWork>>,
    ids: Vec<Vec<CmId>>,
    members: Vec<Vec<MemberKey>>,
}

impl Spare {
    const MAX: usize = 32;

    fn put_work(&mut self, w: Box<GroupWork>) {
        if self.work.len() < Self::MAX && w.pending.capacity() <= 64 && w.leavers.capacity() <= 64 {
            self.work.push(w);
        }
    }

    fn put_ids(&mut self, mut v: Vec<CmId>) {
        if self.ids.len() < Self::MAX && v.capacity() != 0 && v.capacity() <= 64 {
            v.clear();
            self.ids.push(v);
        }
    }

    fn put_members(&mut self, mut v: Vec<MemberKey>) {
        if self.members.len() < Self::MAX && v.capacity() != 0 && v.capacity() <= 64 {
            v.clear();
            self.members.push(v);
        }
    }
}

/// Remove a member; once none is left, a map grown by a burst gives its memory back (as the
/// tree it replaced did node by node).
fn forget(members: &mut HashMap<MemberKey, Member, FastHash>, key: &MemberKey) -> Option<Member> {
    let m = members.remove(key);
    if members.is_empty() && members.capacity() > 1024 {
        *members = HashMap::default();
    }
    m
}

/// The MGID RDMA-CM uses on RoCEv2 for a group address [cma.c cma_iboe_set_mgid].
pub fn mgid_for(group: &IpAddr) -> Gid {
    Gid::from_ip(*group)
}

fn bit_index(js: JoinState) -> usize {
    (js.0 & 0x0f).trailing_zeros().min(3) as usize
}

/// What multicast needs of the ids, and nothing more: the ids' table implements it (api.rs),
/// and keeps each id's joins ([`IdMembers`]) on multicast's behalf.
pub(crate) trait MemberIds {
    /// The id's port space, if the id exists.
    fn port_space(&self, id: CmId) -> Option<PortSpace>;
    /// The id's QP, if any.
    fn qpn(&self, id: CmId) -> Option<u32>;
    /// Whether the id still takes multicast events (it exists and its device did not go).
    fn takes_multicast_events(&self, id: CmId) -> bool;
    /// The id's joins, if the id exists.
    fn members_mut(&mut self, id: CmId) -> Option<&mut IdMembers>;
    /// The id's joins and its QP, if the id exists (one lookup).
    fn members_and_qpn(&mut self, id: CmId) -> Option<(&mut IdMembers, Option<u32>)>;
}

/// What the multicast owner is lent for one call: the shared [`Ctx`] parts, the SA client
/// (its transactions), the UD QPs (attach/detach) and the ids (through [`MemberIds`]).
pub(crate) struct McCtx<'a> {
    pub cfg: &'a crate::config::StackConfig,
    pub out: &'a mut crate::ctx::Outbox,
    pub timers: &'a mut crate::ctx::Timers,
    pub sa: &'a mut SaClient,
    pub ud: &'a mut UdQps,
    /// The ids' table, used only through [`MemberIds`] (static dispatch: the join path stays
    /// inlined).
    pub ids: &'a mut crate::id::IdTable,
}

/// The multicast owner: groups, members, the IP-level (IGMP/MLD) references.
#[derive(Clone, Debug)]
pub(crate) struct Multicast {
    groups: HashMap<Gid, Group, FastHash>,
    /// By handle; hashed (a join inserts and a leave removes one: a tree rebalanced on each
    /// cost more than a tenth of the engine's work per join+leave). Listed in handle order.
    members: HashMap<MemberKey, Member, FastHash>,
    next_member: u64,
    /// Emptied group containers kept for reuse.
    spare: Spare,
    /// Local users of each IPv4/IPv6 group at IP level (ip_mc_inc_group refcount).
    ip_group_refs: HashMap<IpAddr, u32, FastHash>,
}

impl Default for Multicast {
    fn default() -> Multicast {
        Multicast {
            groups: HashMap::default(),
            members: HashMap::default(),
            next_member: 1,
            spare: Spare::default(),
            ip_group_refs: HashMap::default(),
        }
    }
}

/// The MGID of a group address, in the port's style.
pub(crate) fn mgid_in_style(cfg: &crate::config::StackConfig, group: &IpAddr) -> Gid {
    match (cfg.mgid_style, group) {
        (crate::config::MgidStyle::InfiniBand { pkey }, IpAddr::V4(a)) => {
            let o = a.octets();
            let p = (pkey | 0x8000).to_be_bytes();
            Gid([0xff, 0x12, 0x40, 0x01, p[0], p[1], 0, 0, 0, 0, 0, 0, o[0], o[1], o[2], o[3]])
        }
        _ => mgid_for(group),
    }
}

impl Multicast {
    fn sa_enabled(cx: &McCtx<'_>) -> bool {
        cx.cfg.multicast_paths.sa
            && (cx.cfg.sa.is_some() || cx.cfg.sa_transport == crate::config::SaTransport::External)
    }

    /// Join `group` with one join-state bit (see [`Stack::join_multicast`]); the id's state
    /// was checked by the caller.
    pub(crate) fn start_join(
        &mut self,
        cx: &mut McCtx<'_>,
        now: Instant,
        id: CmId,
        group: IpAddr,
        join_state: JoinState,
    ) {
        let mgid = mgid_in_style(cx.cfg, &group);
        let key = MemberKey(self.next_member);
        self.next_member += 1;
        let send_only = join_state == JoinState::SEND_ONLY_FULL_MEMBER || join_state == JoinState::SEND_ONLY_NON_MEMBER;
        let ip_ref = cx.cfg.multicast_paths.igmp_mld && !send_only;
        let mut member = Member { id, mgid, addr: group, join_state, state: MemberState::Pending, ip_ref };
        if let Some(ms) = cx.ids.members_mut(id) {
            ms.insert(group, key);
        }
        let sa = Self::sa_enabled(cx);
        let spare = &mut self.spare;
        let mut fresh = false;
        let g = self.groups.entry(mgid).or_insert_with(|| {
            fresh = true;
            Group {
                mgid,
                counts: [0; 4],
                rec: None,
                members: spare.members.pop().unwrap_or_default(),
                leave_retries: 0,
                work: None,
            }
        });
        g.members.push(key);
        if sa && fresh {
            // A new group holds no record and has no work: what `run_group` does with its
            // lone pending join, at once (the member's Set; the IP-level reference below
            // does not look at the group's work, nor at the SA client).
            member.state = MemberState::Joining;
            let rec = Self::join_record(cx, &member);
            cx.sa.start_mc_member(now, Method::Set, ComponentMask::KERNEL_JOIN.0, &rec, TxnOwner::Join(mgid));
            g.w(spare).busy = Some(GroupOp::Join { member: key });
            g.leave_retries = cx.cfg.sa_timing.leave_retries;
        } else if sa {
            // Queued now, with the group at hand.
            g.w(spare).pending.push_back(key);
        }
        self.members.insert(key, member);
        if ip_ref {
            self.ip_group_ref(cx, now, group, true);
        }
        if sa {
            if !fresh {
                self.run_group(cx, now, mgid);
            }
        } else {
            // RoCE: the kernel builds the record locally and queues the event.
            cx.timers.schedule(now, Work::LocalJoinDone(key));
        }
    }

    /// The record RDMA-CM sends in its Set [cma.c cma_join_ib_multicast] (mask 0x130C7).
    fn join_record(cx: &McCtx<'_>, m: &Member) -> McMemberRecord {
        let ps = cx.ids.port_space(m.id);
        McMemberRecord {
            mgid: m.mgid,
            port_gid: cx.cfg.port_gid.or_else(|| cx.cfg.source_for(&m.addr).map(Gid::from_ip)).unwrap_or_default(),
            q_key: if matches!(ps, Some(PortSpace::Udp) | Some(PortSpace::Ib)) { RDMA_UDP_QKEY } else { 0 },
            p_key: cx.cfg.pkey,
            join_state: m.join_state,
            ..McMemberRecord::default()
        }
    }

    /// The record a RoCE join builds without an SA [cma.c cma_iboe_join_multicast].
    fn local_record(cx: &McCtx<'_>, m: &Member) -> McMemberRecord {
        let mut r = Self::join_record(cx, m);
        r.mtu_selector = Selector::Exactly;
        r.mtu = cx.cfg.mtu;
        r.rate_selector = Selector::Exactly;
        r.rate = 3;
        r.hop_limit = if m.addr.is_ipv4() { 64 } else { 1 };
        r
    }

    /// The group's work: pending joins, then leaving bits nobody holds, then cleanup.
    pub(crate) fn run_group(&mut self, cx: &mut McCtx<'_>, now: Instant, mgid: Gid) {
        let Some(g) = self.groups.get_mut(&mgid) else { return };
        if Self::work_group(g, &mut self.members, &mut self.spare, cx, now) {
            self.drop_group(mgid);
        }
    }

    /// [`Multicast::run_group`] on a group already at hand (borrowed beside the members and
    /// the spare containers, which are other fields: no lookup again). True when the group
    /// is idle and empty: the caller drops it ([`Multicast::drop_group`]).
    fn work_group(
        g: &mut Group,
        members: &mut HashMap<MemberKey, Member, FastHash>,
        spare: &mut Spare,
        cx: &mut McCtx<'_>,
        now: Instant,
    ) -> bool {
        let mgid = g.mgid;
        loop {
            if g.is_busy() {
                return false;
            }
            // 1. Pending joins.
            if let Some(key) = g.pending_front() {
                let held = g.rec.map_or(0, |r| r.join_state.0);
                g.w(spare).pending.pop_front();
                let Some(m) = members.get_mut(&key) else { continue };
                if held & m.join_state.0 == m.join_state.0 && held != 0 {
                    // The SA already holds our bit: satisfied locally (multicast.c process_join).
                    m.state = MemberState::Joined;
                    g.counts[bit_index(m.join_state)] += 1;
                    let (m, rec) = (m.clone(), g.rec);
                    Self::member_joined(cx, &m, rec);
                    continue;
                }
                let rec = Self::join_record(cx, m);
                m.state = MemberState::Joining;
                cx.sa.start_mc_member(now, Method::Set, ComponentMask::KERNEL_JOIN.0, &rec, TxnOwner::Join(mgid));
                g.w(spare).busy = Some(GroupOp::Join { member: key });
                g.leave_retries = cx.cfg.sa_timing.leave_retries;
                return false;
            }
            // 2. Bits no local member holds any more (get_leave_state).
            let held = g.rec.map_or(0, |r| r.join_state.0);
            let mut leave = 0u8;
            for bit in 0..4 {
                if held & (1 << bit) != 0 && g.counts[bit] == 0 {
                    leave |= 1 << bit;
                }
            }
            if leave != 0 {
                let mut rec = g.rec.unwrap_or_default();
                if let Some(r) = g.rec.as_mut() {
                    r.join_state = JoinState(r.join_state.0 & !leave);
                }
                rec.join_state = JoinState(leave);
                let leavers = g.take_leavers(spare);
                g.w(spare).busy = Some(GroupOp::Leave { bits: leave, leavers });
                cx.sa.start_mc_member(now, Method::Delete, ComponentMask::KERNEL_LEAVE.0, &rec, TxnOwner::Leave(mgid));
                return false;
            }
            // 3. Idle: leaves that needed no Delete are complete; an empty group goes.
            let leavers = g.take_leavers(spare);
            g.compact(spare);
            let empty = g.members.is_empty() && held == 0;
            let addr = g.addr();
            for &id in &leavers {
                Self::multicast_event(cx, id, EventKind::MulticastLeft, 0, addr, None, None);
            }
            spare.put_ids(leavers);
            return empty;
        }
    }

    /// An idle, empty group goes; its containers are kept for reuse.
    fn drop_group(&mut self, mgid: Gid) {
        if let Some(g) = self.groups.remove(&mgid) {
            self.spare.put_members(g.members);
            if let Some(w) = g.work {
                self.spare.put_work(w);
            }
        }
        // A hash map never shrinks by itself: after mass leaves give back what a
        // quarter-full table holds beyond twice its groups (amortised: it takes a
        // three-quarter drop between two shrinks).
        let (len, cap) = (self.groups.len(), self.groups.capacity());
        if cap > 4096 && len * 4 < cap {
            self.groups.shrink_to(len * 2);
        }
    }

    /// A member's join is done: the caller marked it Joined and counted it in its group; the
    /// QP attaches and the event goes out.
    fn member_joined(cx: &mut McCtx<'_>, m: &Member, rec: Option<McMemberRecord>) {
        let rec = rec.unwrap_or_else(|| Self::local_record(cx, m));
        let ah = AddressHandle {
            dgid: m.mgid,
            sgid: rec.port_gid,
            dmac: multicast_mac(&m.addr).unwrap_or([0xff; 6]),
            hop_limit: if rec.hop_limit == 0 { 64 } else { rec.hop_limit },
            traffic_class: rec.traffic_class,
            flow_label: rec.flow_label,
            sl: rec.sl,
        };
        let ud = UdParam { ah, qp_num: MULTICAST_QPN, qkey: rec.q_key };
        // librdmacm attaches the id's QP on MULTICAST_JOIN unless the join is send-only.
        let send_only = m.join_state.0 & 0x0c != 0;
        if let Some(qpn) = cx.ids.qpn(m.id) {
            if !send_only {
                let _ = cx.ud.attach(qpn, m.mgid);
            }
        }
        Self::multicast_event(cx, m.id, EventKind::MulticastJoin, 0, m.addr, Some(rec), Some(ud));
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn multicast_event(
        cx: &mut McCtx<'_>,
        id: CmId,
        kind: EventKind,
        status: i32,
        group: IpAddr,
        record: Option<McMemberRecord>,
        ud: Option<UdParam>,
    ) {
        Self::multicast_event_sa(cx, id, kind, status, group, record, ud, None);
    }

    #[allow(clippy::too_many_arguments)]
    fn multicast_event_sa(
        cx: &mut McCtx<'_>,
        id: CmId,
        kind: EventKind,
        status: i32,
        group: IpAddr,
        record: Option<McMemberRecord>,
        ud: Option<UdParam>,
        sa_status: Option<u16>,
    ) {
        // Destroyed ids, and ids whose device went away, get no multicast events
        // (cma_ib_mc_handler / cma_work_handler skip DESTROYING and DEVICE_REMOVAL).
        if !cx.ids.takes_multicast_events(id) {
            return;
        }
        cx.out.push_event(CmEvent {
            id,
            listen_id: None,
            kind,
            status,
            param: EventParam::Multicast { group, record, ud, sa_status },
        });
    }

    pub(crate) fn local_join_done(&mut self, cx: &mut McCtx<'_>, key: MemberKey) {
        let Some(m) = self.members.get_mut(&key).filter(|m| m.state == MemberState::Pending) else { return };
        m.state = MemberState::Joined;
        let m = m.clone();
        if let Some(g) = self.groups.get_mut(&m.mgid) {
            g.counts[bit_index(m.join_state)] += 1;
        }
        Self::member_joined(cx, &m, None);
    }

    /// Leave one join of `group` by `id` (the first matching, as the kernel does).
    pub(crate) fn start_leave(&mut self, cx: &mut McCtx<'_>, now: Instant, id: CmId, group: IpAddr) {
        // The id's join found and taken out in one lookup (what `remove_member` would do
        // first, by handle).
        let Some((ms, qpn)) = cx.ids.members_and_qpn(id) else { return };
        let Some((key, still)) = ms.take_first(group) else { return }; // unknown group: a no-op
        let Some(m) = self.members.get(&key).cloned() else { return };
        if let Some(qpn) = qpn {
            if m.state == MemberState::Joined && m.join_state.0 & 0x0c == 0 && !still {
                let _ = cx.ud.detach(qpn, m.mgid);
            }
        }
        self.remove_from_group(cx, now, key, m, true);
    }

    /// Take a member out of its group: cancel it if its join is not done, uncount it if it is,
    /// drop its IP-level reference, and let the group's work send what is needed.
    pub(crate) fn remove_member(&mut self, cx: &mut McCtx<'_>, now: Instant, key: MemberKey, report: bool) {
        let Some(m) = self.members.get(&key).cloned() else { return };
        if let Some((ms, qpn)) = cx.ids.members_and_qpn(m.id) {
            ms.remove(m.addr, key);
            if let Some(qpn) = qpn {
                if m.state == MemberState::Joined && m.join_state.0 & 0x0c == 0 {
                    let still = ms.has_group(m.addr);
                    if !still {
                        let _ = cx.ud.detach(qpn, m.mgid);
                    }
                }
            }
        }
        self.remove_from_group(cx, now, key, m, report);
    }

    /// The rest of [`Multicast::remove_member`], once the id no longer holds the join.
    fn remove_from_group(&mut self, cx: &mut McCtx<'_>, now: Instant, key: MemberKey, m: Member, report: bool) {
        if m.ip_ref {
            self.ip_group_ref(cx, now, m.addr, false);
        }
        let Some(g) = self.groups.get_mut(&m.mgid) else {
            self.forget_member(&key);
            return;
        };
        g.members.retain(|k| *k != key);
        if let Some(w) = g.work.as_mut() {
            w.pending.retain(|k| *k != key);
        }
        // (The group stays borrowed: the members and the spare containers are other fields.)
        match m.state {
            MemberState::Joined => g.counts[bit_index(m.join_state)] -= 1,
            MemberState::Joining => {
                // Keep the record so the Set's answer can be matched; the Delete follows.
                if let Some(mm) = self.members.get_mut(&key) {
                    mm.state = MemberState::Cancelled;
                }
                if report {
                    g.w(&mut self.spare).leavers.push(m.id);
                }
                return;
            }
            MemberState::Pending | MemberState::Cancelled => {}
        }
        if report {
            g.w(&mut self.spare).leavers.push(m.id);
        }
        forget(&mut self.members, &key);
        // Only a RoCE-only join waits for LocalJoinDone, and only until it is done.
        if m.state == MemberState::Pending {
            cx.timers.cancel(&Work::LocalJoinDone(key));
        }
        if Self::work_group(g, &mut self.members, &mut self.spare, cx, now) {
            self.drop_group(m.mgid);
        }
    }

    fn leave_done(&mut self, cx: &mut McCtx<'_>, now: Instant, mgid: Gid, status: i32, sa_status: Option<u16>) {
        let Some(g) = self.groups.get_mut(&mgid) else { return };
        let Some(GroupOp::Leave { leavers, .. }) = g.take_busy() else { return };
        let addr = g.addr();
        for &id in &leavers {
            if status == 0 {
                Self::multicast_event(cx, id, EventKind::MulticastLeft, 0, addr, None, None);
            } else {
                Self::multicast_event_sa(cx, id, EventKind::MulticastError, status, addr, None, None, sa_status);
            }
        }
        self.spare.put_ids(leavers);
        if Self::work_group(g, &mut self.members, &mut self.spare, cx, now) {
            self.drop_group(mgid);
        }
    }

    /// A Delete failed: resend it while the group's leave retries last (leave_handler), then
    /// report the failure to the ids that left.
    fn leave_failed(&mut self, cx: &mut McCtx<'_>, now: Instant, mgid: Gid, err: Errno, sa_status: Option<u16>) {
        let Some(g) = self.groups.get_mut(&mgid) else { return };
        let Some(GroupOp::Leave { bits, .. }) = g.work.as_ref().and_then(|w| w.busy.as_ref()) else { return };
        let bits = *bits;
        if g.leave_retries > 0 {
            g.leave_retries -= 1;
            let mut rec = g.rec.unwrap_or_default();
            rec.join_state = JoinState(bits);
            cx.sa.start_mc_member(now, Method::Delete, ComponentMask::KERNEL_LEAVE.0, &rec, TxnOwner::Leave(mgid));
            return;
        }
        self.leave_done(cx, now, mgid, err.status(), sa_status);
    }

    /// ip_mc_inc_group / ip_mc_dec_group: the first local user of a group sends the join
    /// report, the last one the leave; each is repeated once a second later (robustness 2).
    fn ip_group_ref(&mut self, cx: &mut McCtx<'_>, now: Instant, group: IpAddr, join: bool) {
        let count = self.ip_group_refs.entry(group).or_insert(0);
        let send = if join {
            *count += 1;
            *count == 1
        } else {
            *count = count.saturating_sub(1);
            *count == 0
        };
        if *count == 0 {
            self.ip_group_refs.remove(&group);
        }
        if send {
            cx.timers.cancel(&Work::ReportRepeat { group, join: true });
            cx.timers.cancel(&Work::ReportRepeat { group, join: false });
            self.send_group_report(cx, group, join);
            cx.timers.schedule(now + core::time::Duration::from_secs(1), Work::ReportRepeat { group, join });
        }
    }

    /// One IGMP or MLDv2 report for `group`.
    pub(crate) fn send_group_report(&mut self, cx: &mut McCtx<'_>, group: IpAddr, join: bool) {
        let frame = match group {
            IpAddr::V4(g) => {
                let Some((src, _)) = cx.cfg.ipv4 else { return };
                let msg = match (cx.cfg.igmp_version, join) {
                    (IgmpVersion::V3, true) => IgmpMessage::v3_join(g),
                    (IgmpVersion::V3, false) => IgmpMessage::v3_leave(g),
                    (IgmpVersion::V2, true) => IgmpMessage::v2_report(g),
                    (IgmpVersion::V2, false) => IgmpMessage::v2_leave(g),
                };
                emit_frame(&IgmpFrame::new(cx.cfg.mac, src, msg))
            }
            IpAddr::V6(g) => {
                let msg = if join { MldMessage::join(g) } else { MldMessage::leave(g) };
                emit_frame(&MldFrame::new(cx.cfg.mac, cx.cfg.link_local(), msg))
            }
        };
        cx.out.push(Outgoing::Raw(frame.into()));
    }

    /// Answer a query: a report for every group of that family we hold at IP level.
    pub(crate) fn report_all_groups(&mut self, cx: &mut McCtx<'_>, ipv4: bool) {
        let groups: Vec<IpAddr> = self.ip_group_refs.keys().copied().filter(|g| g.is_ipv4() == ipv4).collect();
        for g in groups {
            self.send_group_report(cx, g, true);
        }
    }

    /// The SA answered a group's Set (`status`, the MAD read in place: `h` its header,
    /// `payload` its 256 bytes).
    pub(crate) fn join_answered(&mut self, cx: &mut McCtx<'_>, now: Instant, mgid: Gid, h: &MadHeader, payload: &[u8]) {
        let status = h.status;
        let Some(g) = self.groups.get_mut(&mgid) else { return };
        let Some(GroupOp::Join { member }) = g.take_busy() else { return };
        if status == MadStatus(0) {
            // One lookup of the member (the group stays borrowed beside it: other fields).
            let m = self.members.get_mut(&member);
            let bits = m.as_ref().map_or(0, |m| m.join_state.0);
            let held = g.rec.map_or(0, |r| r.join_state.0);
            let answered = (h.attribute_id == attr::MC_MEMBER_RECORD)
                .then(|| McMemberRecord::parse_bytes(&payload[SA_DATA_OFFSET..]).ok())
                .flatten();
            let mut rec = answered.unwrap_or_else(|| g.rec.unwrap_or_default());
            rec.join_state = JoinState(held | bits);
            g.rec = Some(rec);
            match m {
                Some(mm) if mm.state == MemberState::Joining => {
                    mm.state = MemberState::Joined;
                    g.counts[bit_index(mm.join_state)] += 1;
                    let mm = mm.clone();
                    Self::member_joined(cx, &mm, Some(rec));
                }
                Some(mm) if mm.state == MemberState::Cancelled => {
                    forget(&mut self.members, &member);
                }
                _ => {}
            }
            // The group's next work, with the group still at hand.
            if Self::work_group(g, &mut self.members, &mut self.spare, cx, now) {
                self.drop_group(mgid);
            }
            return;
        } else if let Some(m) = self.members.get(&member).cloned() {
            self.forget_member(&member);
            if let Some(g) = self.groups.get_mut(&mgid) {
                g.members.retain(|k| *k != member);
            }
            if let Some(ms) = cx.ids.members_mut(m.id) {
                ms.remove(m.addr, member);
            }
            if m.ip_ref {
                self.ip_group_ref(cx, now, m.addr, false);
            }
            if m.state == MemberState::Joining {
                // Any non-zero SA status fails the join with -EINVAL (sa_query.c).
                Self::multicast_event_sa(
                    cx,
                    m.id,
                    EventKind::MulticastError,
                    Errno::EINVAL.status(),
                    m.addr,
                    None,
                    None,
                    Some(status.0),
                );
            }
        }
        self.run_group(cx, now, mgid);
    }

    /// The SA answered a group's Delete.
    pub(crate) fn leave_answered(&mut self, cx: &mut McCtx<'_>, now: Instant, mgid: Gid, status: MadStatus) {
        if status == MadStatus(0) {
            self.leave_done(cx, now, mgid, 0, None);
        } else {
            self.leave_failed(cx, now, mgid, Errno::EINVAL, Some(status.0));
        }
    }

    /// A group's Set ran out of time.
    pub(crate) fn join_timed_out(&mut self, cx: &mut McCtx<'_>, now: Instant, mgid: Gid, sa_status: Option<u16>) {
        let Some(g) = self.groups.get_mut(&mgid) else { return };
        let Some(GroupOp::Join { member }) = g.take_busy() else { return };
        if let Some(m) = self.forget_member(&member) {
            if let Some(g) = self.groups.get_mut(&mgid) {
                g.members.retain(|k| *k != member);
            }
            if let Some(ms) = cx.ids.members_mut(m.id) {
                ms.remove(m.addr, member);
            }
            if m.ip_ref {
                self.ip_group_ref(cx, now, m.addr, false);
            }
            if m.state == MemberState::Joining {
                Self::multicast_event_sa(
                    cx,
                    m.id,
                    EventKind::MulticastError,
                    Errno::ETIMEDOUT.status(),
                    m.addr,
                    None,
                    None,
                    sa_status,
                );
            }
        }
        self.run_group(cx, now, mgid);
    }

    /// A group's Delete ran out of time.
    pub(crate) fn leave_timed_out(&mut self, cx: &mut McCtx<'_>, now: Instant, mgid: Gid, sa_status: Option<u16>) {
        self.leave_failed(cx, now, mgid, Errno::ETIMEDOUT, sa_status);
    }

    /// The groups.
    /// The groups held at the IP level (IGMP/MLD reported).
    pub(crate) fn ip_groups(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.ip_group_refs.keys().copied()
    }

    pub(crate) fn groups(&self) -> impl Iterator<Item = &Group> {
        self.groups.values()
    }

    /// Remove a member; once none is left, a map grown by a burst gives its memory back (as
    /// the tree it replaced did node by node).
    fn forget_member(&mut self, key: &MemberKey) -> Option<Member> {
        forget(&mut self.members, key)
    }

    /// The members, in handle order.
    pub(crate) fn members(&self) -> impl Iterator<Item = (&MemberKey, &Member)> {
        let mut v: Vec<_> = self.members.iter().collect();
        v.sort_unstable_by_key(|(k, _)| **k);
        v.into_iter()
    }

    /// A fresh handle from the member numbering (SA query handles share it).
    pub(crate) fn next_handle(&mut self) -> u64 {
        let h = self.next_member;
        self.next_member += 1;
        h
    }
}
