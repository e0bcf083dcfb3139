//! Multicast groups and their members, as the responder keeps them.

use roce_wire::mcmember::{JoinState, McMemberRecord};
use roce_wire::Gid;

/// The join-state bits that make a port a *full* member: FullMember (0x1) and, since IBA 1.3
/// and OpenSM 0dc7b6da, SendOnlyFullMember (0x8). A group lives while it has one
/// [osm_multicast.c `osm_mgrp_add_port`, `osm_mgrp_remove_port`: `full_join_state`].
pub const FULL_JOIN_STATES: JoinState = JoinState(0x1 | 0x8);

/// One port's membership of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Member {
    port_gid: Gid,
    join_state: JoinState,
    proxy: bool,
    /// The requesting port whose join made this member (its own PortGID, or a proxy's):
    /// the port the member counts against in [`crate::SaConfig::max_members_per_port`].
    made_by: Gid,
    /// The responder's clock, in whole seconds, at the member's last join (its first or a
    /// repeat): what [`crate::SaConfig::member_lifetime`] counts from.
    joined_at: u32,
}

impl Member {
    /// The member port's GID.
    pub const fn port_gid(&self) -> Gid {
        self.port_gid
    }

    /// Its join state: the OR of every join not yet left (never empty).
    pub const fn join_state(&self) -> JoinState {
        self.join_state
    }

    /// Whether it was joined by another port (a proxy join). As OpenSM's
    /// `osm_mcm_alias_guid_t::proxy_join`, set by the first join and kept.
    pub const fn proxy(&self) -> bool {
        self.proxy
    }

    /// The requesting port whose join made this member (the first join; kept).
    pub const fn made_by(&self) -> Gid {
        self.made_by
    }

    /// When it last joined (a repeated join renews it): the responder's clock in whole
    /// seconds (see [`crate::SaResponder::handle_time`]).
    pub const fn joined_at(&self) -> u32 {
        self.joined_at
    }

    /// Whether the join state holds a full-member bit ([`FULL_JOIN_STATES`]).
    pub const fn is_full(&self) -> bool {
        self.join_state.0 & FULL_JOIN_STATES.0 != 0
    }
}

/// A multicast group: its record and its members, sorted by port GID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The record the group was created with, completed by the SA (MLID, MTU, rate,
    /// PacketLifeTime, selectors "exactly"). Like OpenSM's `osm_mgrp_t::mcmember_rec` it keeps
    /// the creator's PortGID, Scope/JoinState and ProxyJoin.
    rec: McMemberRecord,
    members: Vec<Member>,
    full_members: u32,
}

impl Group {
    /// A group with no member yet, whose member list reuses `members`' allocation.
    pub(crate) fn with_members(rec: McMemberRecord, mut members: Vec<Member>) -> Group {
        members.clear();
        Group { rec, members, full_members: 0 }
    }

    /// The member list, for reuse.
    pub(crate) fn into_members(self) -> Vec<Member> {
        self.members
    }

    /// The MGID.
    pub const fn mgid(&self) -> Gid {
        self.rec.mgid
    }

    /// The MLID.
    pub const fn mlid(&self) -> u16 {
        self.rec.mlid
    }

    /// The group record (see the field documentation of [`Group`]).
    pub const fn record(&self) -> &McMemberRecord {
        &self.rec
    }

    /// The members, sorted by port GID.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The member with this port GID.
    pub fn member(&self, port_gid: &Gid) -> Option<&Member> {
        self.find(port_gid).ok().map(|i| &self.members[i])
    }

    /// Members whose join state holds a full-member bit (the group's reason to live).
    pub const fn full_member_count(&self) -> u32 {
        self.full_members
    }

    pub(crate) fn find(&self, port_gid: &Gid) -> Result<usize, usize> {
        self.members.binary_search_by(|m| m.port_gid.cmp(port_gid))
    }

    /// OR `join_state` into the port's membership (adding the port if new, made by
    /// `made_by`), renew its join time to `now_s`, and return the merged state
    /// [osm_multicast.c `osm_mgrp_add_port`; o15-0.1.11].
    pub(crate) fn add(
        &mut self,
        port_gid: Gid,
        join_state: JoinState,
        proxy: bool,
        made_by: Gid,
        now_s: u32,
    ) -> JoinState {
        match self.find(&port_gid) {
            Ok(i) => {
                let m = &mut self.members[i];
                let was_full = m.is_full();
                m.join_state |= join_state;
                m.joined_at = now_s;
                if !was_full && m.is_full() {
                    self.full_members += 1;
                }
                m.join_state
            }
            Err(i) => {
                let m = Member { port_gid, join_state, proxy, made_by, joined_at: now_s };
                if m.is_full() {
                    self.full_members += 1;
                }
                self.members.insert(i, m);
                join_state
            }
        }
    }

    /// Clear `leave` (⊆ the stored state, checked by the caller) from member `i`, removing it
    /// when OpenSM would; returns the state left (empty when the port was removed).
    ///
    /// The member stays when what is left holds a full-member bit, FullMember *or*
    /// SendOnlyFullMember (the fix of OpenSM #43; OpenSM tests FullMember only and drops a
    /// 0x9 member that leaves 0x1 without counting it out), or when it holds other bits and
    /// another full member remains. Otherwise the port goes. The caller deletes the group
    /// when [`Group::full_member_count`] falls to 0 [osm_multicast.c `osm_mgrp_remove_port`].
    pub(crate) fn leave(&mut self, i: usize, leave: JoinState) -> JoinState {
        let m = self.members[i];
        let left = JoinState(m.join_state.0 & !leave.0 & 0xF);
        let was_full = m.is_full();
        let still_full = left.0 & FULL_JOIN_STATES.0 != 0;
        let others_full = self.full_members > u32::from(was_full);
        if was_full && !still_full {
            self.full_members -= 1;
        }
        if still_full || (!left.is_empty() && others_full) {
            self.members[i].join_state = left;
            left
        } else {
            self.members.remove(i);
            JoinState::NONE
        }
    }

    /// Remove the members that last joined before `before_s` (as if their port had gone:
    /// all their join-state bits at once), each handed to `removed`. The caller deletes the
    /// group when [`Group::full_member_count`] falls to 0.
    pub(crate) fn expire(&mut self, before_s: u32, mut removed: impl FnMut(&Member)) {
        let mut full_gone = 0;
        self.members.retain(|m| {
            let keep = m.joined_at >= before_s;
            if !keep {
                full_gone += u32::from(m.is_full());
                removed(m);
            }
            keep
        });
        self.full_members -= full_gone;
    }

    pub(crate) fn members_heap_bytes(&self) -> usize {
        self.members.capacity() * core::mem::size_of::<Member>()
    }
}

/// Bytes of a hashbrown table with `capacity` usable slots of `entry` bytes: buckets are a
/// power of two at most 7/8 full, each with its entry and one control byte (plus a group of
/// 16 trailing control bytes). An estimate from the published layout, not a measurement.
pub(crate) fn hash_table_bytes(capacity: usize, entry: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    let buckets =
        if capacity < 8 { (capacity + 1).next_power_of_two() } else { (capacity * 8 / 7).next_power_of_two() };
    buckets * (entry + 1) + 16
}
