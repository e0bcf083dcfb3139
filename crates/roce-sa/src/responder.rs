//! [`SaResponder`]: one MAD in, the answer out.

use core::hash::BuildHasher;
use core::time::Duration;

use hashbrown::hash_table::Entry;
use hashbrown::HashTable;
use roce_wire::class_port_info::ClassPortInfo;
use roce_wire::mad::{self, MadStatus, Method, MgmtClass, BASE_VERSION, MAD_HEADER_LEN};
use roce_wire::mcmember::{ComponentMask as Cm, JoinState, McMemberRecord, Selector, MC_MEMBER_RECORD_LEN};
use roce_wire::rmpp;
use roce_wire::rmpp::{RmppFlags, RmppType};
use roce_wire::sa::{self, attr, SaData, SaMad, SA_CLASS_VERSION, SA_DATA_OFFSET, SA_HEADER_OFFSET};
use roce_wire::{Gid, GSI_QKEY, MAD_SIZE};

use crate::cache::DupCache;
use crate::config::{ConfigError, SaConfig};
use crate::group::{hash_table_bytes, Group, Member, FULL_JOIN_STATES};
use crate::mlid::MlidPool;
use crate::rate::{compare_rates, mtu_is_valid, rate_is_valid, rate_prev};
use crate::reply::{error_mad, error_mad_bytes, segmented_table_reply, Reply};
use crate::requester::Requester;
use crate::service::ServiceTable;
use crate::stats::{MemberCap, SaStats};

/// The size of an MCMemberRecord in a table, 52 bytes padded to 8-byte words (56): OpenSM's
/// `ib_member_rec_t` carries 4 pad bytes, and AttributeOffset = 56 / 8 = 7.
pub const TABLE_RECORD_LEN: usize = MC_MEMBER_RECORD_LEN.div_ceil(8) * 8;
/// AttributeOffset of an MCMemberRecord response, in 8-byte words (`ib_get_attr_offset`).
pub const MC_MEMBER_ATTRIBUTE_OFFSET: u16 = (TABLE_RECORD_LEN / 8) as u16;

/// Link-local multicast scope, the one OpenSM gives an SA-allocated MGID when the request
/// names none (`IB_MC_SCOPE_LINK_LOCAL`).
const SCOPE_LINK_LOCAL: u8 = 0x2;
/// Tries at a free MGID before NO_RESOURCES (`build_new_mgid`).
const MGID_TRIES: u32 = 1000;

/// Heap bytes held by a responder, estimated from the capacities of its containers and the
/// sizes of its types (see [`SaResponder::memory_usage`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryUsage {
    /// The group hash table (MGID key, group record, member-vector header, counters).
    pub group_table: usize,
    /// Every group's member vector (port GID, join state, proxy flag per member).
    pub members: usize,
    /// The MLID bitmap and reference counts.
    pub mlid_pool: usize,
    /// The duplicate-request cache.
    pub dup_cache: usize,
    /// The count of members per requesting port the member caps are checked against.
    pub member_makers: usize,
}

impl MemoryUsage {
    /// The sum.
    pub const fn total(&self) -> usize {
        self.group_table + self.members + self.mlid_pool + self.dup_cache + self.member_makers
    }
}

/// The SA's MCMemberRecord service, sans-IO: feed it the MADs that arrive on QP1 with
/// [`SaResponder::handle_mad`] and send back what it returns, to the requester's address and
/// QP. It keeps no clock and opens no socket.
///
/// The rules, each with its reference, are listed in spec/sa.md.
#[derive(Debug, Clone)]
pub struct SaResponder {
    config: SaConfig,
    /// The groups by MGID (a table of groups hashed by their MGID: one probe finds, inserts
    /// or removes a group, the hash computed once).
    groups: HashTable<Group>,
    hasher: foldhash::fast::RandomState,
    mlids: MlidPool,
    cache: DupCache<Answer>,
    stats: SaStats,
    /// How many members there are, and how many each requesting port made: what the member
    /// caps are checked against.
    members: MemberTally,
    mgid_counter: u32,
    /// Member lists of deleted groups, kept for the next new groups (a group made and
    /// deleted per transaction pair then allocates nothing; a few dozen lists at most).
    spare_members: Vec<Vec<Member>>,
    /// The ServiceRecord service (crate::service).
    pub(crate) services: ServiceTable,
    /// The latest time [`SaResponder::handle_time`] gave (when cache entries were stored).
    now: Duration,
    /// When members are next checked against [`SaConfig::member_lifetime`].
    next_member_sweep: Duration,
}

/// How often members are checked against [`SaConfig::member_lifetime`] (a member outlives its
/// lifetime by less than this).
pub const MEMBER_SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// How long a requester may go on retransmitting a Set or Delete: the kernel's SA client
/// gives a join or leave 3 s (sa_query.c, cma.c) and an `ibv`/umad tool a few tries of a few
/// seconds; a cache entry evicted sooner than this is counted.
pub const DUP_CACHE_HORIZON: Duration = Duration::from_secs(8);

/// A checked outcome of a transaction: the record to answer with, or the status.
type Outcome = Result<McMemberRecord, MadStatus>;

/// What the answer to a Set or Delete is made of, with the request: its status and, for a
/// success, its record (encoded). The duplicate cache keeps this, not the 256-byte answer.
#[derive(Debug, Clone, Copy)]
struct Answer {
    status: MadStatus,
    record: [u8; MC_MEMBER_RECORD_LEN],
}

impl Answer {
    fn error(status: MadStatus) -> Answer {
        Answer { status, record: [0; MC_MEMBER_RECORD_LEN] }
    }

    /// The answer to a leave: the request's record with the selectors "exactly", the group's
    /// Scope and the JoinState left, patched into the request's bytes (the bytes of emitting
    /// the parsed record so changed, without parsing and emitting it).
    fn left(request: &[u8; MAD_SIZE], scope: u8, left: JoinState) -> Answer {
        use roce_wire::mcmember::field;
        let mut record = [0u8; MC_MEMBER_RECORD_LEN];
        record.copy_from_slice(&request[SA_DATA_OFFSET..SA_DATA_OFFSET + MC_MEMBER_RECORD_LEN]);
        let exactly = u8::from(Selector::Exactly) << 6;
        for at in [field::MTU, field::RATE, field::PACKET_LIFE_TIME] {
            record[at] = exactly | record[at] & 0x3F;
        }
        record[field::SCOPE_JOIN_STATE] = scope << 4 | left.0 & 0x0F;
        Answer { status: MadStatus::SUCCESS, record }
    }

    /// Write the answer MAD to `request` (a Set or a Delete of method `m`) into `b`, which
    /// is all zero: a GetResp or DeleteResp with the record, as
    /// [`SaMad::mc_member_response`] writes it, or the error answer.
    fn write_mad(&self, request: &[u8; MAD_SIZE], m: Method, b: &mut [u8; MAD_SIZE]) {
        if self.status != MadStatus::SUCCESS {
            *b = error_mad_bytes(request, self.status);
            return;
        }
        // The request's header with the method (R bit set) and status 0; RMPP header, SM_Key
        // and the SA header's reserved bytes zero.
        b[..MAD_HEADER_LEN].copy_from_slice(&request[..MAD_HEADER_LEN]);
        b[mad::field::METHOD] = u8::from(response_method(m)) & !mad::METHOD_RESPONSE_BIT | mad::METHOD_RESPONSE_BIT;
        b[mad::field::STATUS].copy_from_slice(&[0, 0]);
        let mask = sa::Packet::new_unchecked(&request[SA_HEADER_OFFSET..SA_DATA_OFFSET]).component_mask();
        let mut sa = sa::Packet::new_unchecked(&mut b[SA_HEADER_OFFSET..SA_DATA_OFFSET]);
        sa.set_attribute_offset(MC_MEMBER_RECORD_LEN.div_ceil(8) as u16);
        sa.set_component_mask(mask);
        b[SA_DATA_OFFSET..SA_DATA_OFFSET + MC_MEMBER_RECORD_LEN].copy_from_slice(&self.record);
    }
}

impl SaResponder {
    /// A responder with this configuration, or the reason it is refused
    /// ([`SaConfig::validate`]).
    pub fn new(config: SaConfig) -> Result<SaResponder, ConfigError> {
        config.validate()?;
        Ok(SaResponder::build(config))
    }

    /// A responder with [`SaConfig::default`] (valid: no error to handle).
    pub fn with_defaults() -> SaResponder {
        SaResponder::build(SaConfig::default())
    }

    fn build(config: SaConfig) -> SaResponder {
        SaResponder {
            mlids: MlidPool::new(config.mlid_start, config.mlid_count, config.share_mlids),
            cache: DupCache::new(config.dup_cache_size),
            groups: HashTable::new(),
            hasher: Default::default(),
            stats: SaStats::default(),
            members: MemberTally::default(),
            mgid_counter: 0,
            spare_members: Vec::new(),
            services: Default::default(),
            now: Duration::ZERO,
            next_member_sweep: Duration::ZERO,
            config,
        }
    }

    /// Handle one MAD received from `from` and return the MADs to send back to it (none for a
    /// response or a MAD that is dropped; see [`SaStats`] for the reasons). `mad` is the
    /// 256-byte MAD (bytes past 256 are ignored).
    pub fn handle_mad(&mut self, from: Requester, mad: &[u8]) -> Reply {
        self.stats.received += 1;
        let Some(bytes) = mad.first_chunk::<MAD_SIZE>() else {
            self.stats.dropped_short += 1;
            return Reply::None;
        };
        // Read in place through the header's view: a join or a leave is answered without
        // decoding the whole MAD.
        let h = mad::Packet::new_unchecked(bytes);
        if h.base_version() != BASE_VERSION {
            self.stats.dropped_base_version += 1;
            return Reply::None;
        }
        if h.mgmt_class() != MgmtClass::SubnAdm {
            self.stats.dropped_not_sa += 1;
            return Reply::None;
        }
        // `ib_response_mad()` for class 0x03: the R bit or TrapRepress.
        if h.response() || h.method() == Method::TrapRepress {
            self.stats.dropped_response += 1;
            return Reply::None;
        }
        // The answer is returned as `answer` writes it (counted there), not moved again.
        self.answer(&from, bytes)
    }

    /// Count an answer in the statistics.
    fn count(&mut self, reply: &Reply) {
        if let Some(first) = reply.first() {
            self.stats.answered += 1;
            self.stats.mads_out += reply.len() as u64;
            if first[4..6] != [0, 0] {
                self.stats.errors += 1;
            }
        }
    }

    fn answer(&mut self, from: &Requester, bytes: &[u8; MAD_SIZE]) -> Reply {
        let h = mad::Packet::new_unchecked(bytes);
        // A class version nobody registered for: the kernel MAD layer finds no agent and
        // answers 0x000C itself [mad.c `generate_unmatched_resp`].
        if h.class_version() != SA_CLASS_VERSION {
            let reply = Reply::One(error_mad_bytes(bytes, MadStatus::UNSUPPORTED_METHOD_ATTR));
            self.count(&reply);
            return reply;
        }
        let r = rmpp::Packet::new_unchecked(&bytes[MAD_HEADER_LEN..SA_HEADER_OFFSET]);
        let flags = r.flags();
        if flags.contains(RmppFlags::ACTIVE)
            && !(r.rmpp_type() == RmppType::Data && flags.contains(RmppFlags::FIRST | RmppFlags::LAST))
        {
            self.stats.dropped_rmpp += 1;
            return Reply::None;
        }
        let sa = sa::Packet::new_unchecked(&bytes[SA_HEADER_OFFSET..SA_DATA_OFFSET]);
        let sm_key = sa.sm_key();
        if sm_key != 0 && sm_key != self.config.sa_key {
            self.stats.dropped_sm_key += 1;
            return Reply::None;
        }
        let m = h.method();
        if h.attribute_id() == attr::MC_MEMBER_RECORD && matches!(m, Method::Set | Method::Delete) {
            // Written where the caller gets it, not built aside and moved.
            let mut reply = Reply::One([0; MAD_SIZE]);
            if let Reply::One(out) = &mut reply {
                self.set_or_delete(from, bytes, m, Cm(sa.component_mask()), out);
            }
            self.count(&reply);
            return reply;
        }
        // The rest (queries, ClassPortInfo, ServiceRecords, errors) from the decoded MAD.
        let Ok(req) = SaMad::parse(bytes) else {
            // Not for 256 bytes; counted as before, not a panic.
            self.stats.dropped_short += 1;
            return Reply::None;
        };
        let reply = match (req.header.attribute_id, req.header.method) {
            (attr::CLASS_PORT_INFO, Method::Get) => Reply::One(self.class_port_info(&req)),
            (attr::MC_MEMBER_RECORD, Method::Get | Method::GetTable) => {
                self.stats.queries += 1;
                self.query(from, &req)
            }
            (attr::SERVICE_RECORD, _) => self.services.handle(&req),
            _ => Reply::One(error_mad(&req, MadStatus::UNSUPPORTED_METHOD_ATTR)),
        };
        self.count(&reply);
        reply
    }

    /// SubnAdmSet / SubnAdmDelete(MCMemberRecord): the answer from the cache of answers to
    /// repeated requests, or the join or leave applied and its answer written from the
    /// request's bytes.
    fn set_or_delete(
        &mut self,
        from: &Requester,
        bytes: &[u8; MAD_SIZE],
        m: Method,
        mask: Cm,
        out: &mut [u8; MAD_SIZE],
    ) {
        let tid = mad::Packet::new_unchecked(bytes).transaction_id();
        let miss = match self.cache.lookup(from, tid, bytes) {
            Ok(cached) => {
                self.stats.duplicates += 1;
                return cached.write_mad(bytes, m, out);
            }
            Err(miss) => miss,
        };
        let rec = record_at(bytes);
        let answer = if m == Method::Set {
            let o = self.join(from, mask, &rec, bytes);
            self.stats.joins += u64::from(o.is_ok());
            match o {
                Ok(record) => Answer { status: MadStatus::SUCCESS, record },
                Err(status) => Answer::error(status),
            }
        } else {
            let o = self.leave(from, mask, &rec);
            self.stats.leaves += u64::from(o.is_ok());
            match o {
                Ok((scope, left)) => Answer::left(bytes, scope, left),
                Err(status) => Answer::error(status),
            }
        };
        if self.cache.insert_missed(miss, bytes, &answer, self.now, DUP_CACHE_HORIZON) {
            self.stats.dup_cache_evicted_young += 1;
        }
        answer.write_mad(bytes, m, out)
    }

    /// ClassPortInfo as OpenSM fills it [osm_sa_class_port_info.c `cpi_rcv_respond`].
    fn class_port_info(&self, req: &SaMad) -> [u8; MAD_SIZE] {
        let mut cpi = ClassPortInfo {
            base_version: BASE_VERSION,
            class_version: SA_CLASS_VERSION,
            capability_mask: self.config.capability_mask,
            redirect_qkey: GSI_QKEY,
            trap_qkey: GSI_QKEY,
            ..ClassPortInfo::default()
        };
        cpi.set_capability_mask2(self.config.capability_mask2);
        cpi.set_resp_time_value(self.config.resp_time_value);
        cpi.set_redirect_qpn(1);
        req.response_to(Method::Get, MadStatus::SUCCESS, SaData::class_port_info(cpi)).to_bytes()
    }

    // ---------------------------------------------------------------- join (SubnAdmSet)

    /// SubnAdmSet(MCMemberRecord): join, creating the group if needed
    /// [osm_sa_mcmember_record.c `osm_mcmr_rcv_process`, `mcmr_rcv_join_mgrp`].
    /// Returns the answer's record: the request's (`request`) with the group's values
    /// [`copy_from_create_mc_rec`] and the merged JoinState (o15-0.1.11).
    fn join(
        &mut self,
        from: &Requester,
        mask: Cm,
        rec: &McMemberRecord,
        request: &[u8; MAD_SIZE],
    ) -> Result<[u8; MC_MEMBER_RECORD_LEN], MadStatus> {
        if !mask.contains(Cm::OPENSM_JOIN_REQUIRED) {
            return Err(MadStatus::INSUF_COMPS);
        }
        check_rate_mtu(mask, rec)?;
        self.check_prefix(&rec.port_gid)?;
        // The port must be one the SA knows: any unicast GID on RoCE.
        if rec.port_gid == Gid::ZERO || rec.port_gid.is_multicast() {
            return Err(MadStatus::REQ_INVALID);
        }
        let proxy = rec.port_gid != from.gid;
        if proxy && !(self.config.allow_proxy_join && rec.proxy_join) {
            return Err(MadStatus::REQ_INVALID);
        }
        if mask.contains(Cm::P_KEY) && rec.p_key & 0x7FFF == 0 {
            return Err(MadStatus::REQ_INVALID);
        }
        let js = JoinState(rec.join_state.0 & 0xF);

        // MGID 0 names no group (no group has it): a new group whose MGID the SA picks.
        let mgid = if rec.mgid == Gid::ZERO {
            check_create_js(mask, js)?;
            self.allocate_mgid(mask, rec)?
        } else {
            rec.mgid
        };
        let hash = mgid_hash(&self.hasher, &mgid);
        let group_count = self.groups.len();
        let entry = self.groups.entry(hash, |g| g.mgid() == mgid, |g| mgid_hash(&self.hasher, &g.mgid()));
        let (group, created) = match entry {
            Entry::Occupied(o) => {
                let g = o.into_mut();
                if rec.mgid == Gid::ZERO || !other_components_match(mask, rec, g.record()) {
                    return Err(MadStatus::REQ_INVALID);
                }
                check_join(&self.config, from, mask, rec, g.record(), js)?;
                // o15-0.2.1: who may modify an existing membership [`validate_modify`].
                if let Some(m) = g.member(&rec.port_gid) {
                    if !may_modify(from, m, g.record()) {
                        return Err(MadStatus::REQ_INVALID);
                    }
                } else {
                    self.members.admit(&self.config, g.members().len(), from).map_err(|cap| {
                        self.stats.refuse(cap);
                        MadStatus::NO_RESOURCES
                    })?;
                }
                (g, false)
            }
            Entry::Vacant(v) => {
                if rec.mgid != Gid::ZERO {
                    check_create_js(mask, js)?;
                }
                self.members.admit(&self.config, 0, from).map_err(|cap| {
                    self.stats.refuse(cap);
                    MadStatus::NO_RESOURCES
                })?;
                let mut grp = new_group_record(&self.config, mask, rec, mgid)?;
                if group_count >= self.config.max_groups {
                    return Err(MadStatus::NO_RESOURCES);
                }
                grp.mlid = self.mlids.alloc(rec.mlid).ok_or(MadStatus::NO_RESOURCES)?;
                if let Err(status) = check_join(&self.config, from, mask, rec, &grp, js) {
                    self.mlids.free(grp.mlid);
                    return Err(status);
                }
                let members = self.spare_members.pop().unwrap_or_default();
                (v.insert(Group::with_members(grp, members)).into_mut(), true)
            }
        };
        if created {
            self.stats.groups_created += 1;
        }
        let before = group.members().len();
        let merged = group.add(rec.port_gid, js, proxy, from.gid, clock_secs(self.now));
        if group.members().len() > before {
            self.members.added(from.gid);
        }

        Ok(joined_record(request, group.record(), merged))
    }

    /// An MGID for a group created with MGID 0: ff1S:a01b:PPPP:PPPP:PPPP:PPPP:CCCC:CCCC, S the
    /// requested scope (link-local when none), P the subnet prefix, C a counter
    /// [`build_new_mgid`].
    fn allocate_mgid(&mut self, mask: Cm, rec: &McMemberRecord) -> Result<Gid, MadStatus> {
        let scope = if mask.contains(Cm::SCOPE) { rec.scope & 0xF } else { SCOPE_LINK_LOCAL };
        let prefix = self.config.subnet_prefix.unwrap_or(0).to_be_bytes();
        for _ in 0..MGID_TRIES {
            let mut g = [0u8; 16];
            g[0] = 0xFF;
            g[1] = 0x10 | scope;
            g[2] = 0xA0;
            g[3] = 0x1B;
            g[4..12].copy_from_slice(&prefix);
            g[12..16].copy_from_slice(&self.mgid_counter.to_be_bytes());
            self.mgid_counter = self.mgid_counter.wrapping_add(1);
            if self.group(&Gid(g)).is_none() {
                return Ok(Gid(g));
            }
        }
        Err(MadStatus::NO_RESOURCES)
    }

    fn check_prefix(&self, port_gid: &Gid) -> Result<(), MadStatus> {
        match self.config.subnet_prefix {
            Some(p) if port_gid.subnet_prefix() != p => Err(MadStatus::INVALID_GID),
            _ => Ok(()),
        }
    }

    // ---------------------------------------------------------------- leave (SubnAdmDelete)

    /// SubnAdmDelete(MCMemberRecord): leave [`mcmr_rcv_leave_mgrp`, `validate_delete`
    /// (o15-0.1.14), `osm_mgrp_remove_port`].
    /// Returns the group's Scope and the JoinState left, what the answer changes in the
    /// request's record.
    fn leave(&mut self, from: &Requester, mask: Cm, rec: &McMemberRecord) -> Result<(u8, JoinState), MadStatus> {
        if !mask.contains(Cm::OPENSM_JOIN_REQUIRED) {
            return Err(MadStatus::INSUF_COMPS);
        }
        check_rate_mtu(mask, rec)?;
        self.check_prefix(&rec.port_gid)?;
        let mgid = rec.mgid;
        let hash = mgid_hash(&self.hasher, &mgid);
        let Ok(mut entry) = self.groups.find_entry(hash, |g| g.mgid() == mgid) else {
            return Err(MadStatus::REQ_INVALID);
        };
        let group = entry.get_mut();
        let i = group.find(&rec.port_gid).map_err(|_| MadStatus::REQ_INVALID)?;
        let m = group.members()[i];
        let js = JoinState(rec.join_state.0 & 0xF);
        // o15-0.1.14 2 and 3: at least one stored bit, and no bit that is not stored.
        if (js & m.join_state()).is_empty() || !m.join_state().contains(js) {
            return Err(MadStatus::REQ_INVALID);
        }
        // o15-0.1.14 4 / o15-0.2.1.
        if !may_modify(from, &m, group.record()) {
            return Err(MadStatus::REQ_INVALID);
        }
        let left = group.leave(i, js);
        if left.is_empty() {
            self.members.removed(m.made_by());
        }
        let scope = group.record().scope;
        if group.full_member_count() == 0 {
            // The last full member left: the group goes, with any other member, and its MLID
            // is free again [`osm_mgrp_cleanup`].
            let mlid = group.mlid();
            let (g, _) = entry.remove();
            for m in g.members() {
                self.members.removed(m.made_by());
            }
            let members = g.into_members();
            if self.spare_members.len() < 32 && members.capacity() <= 16 {
                self.spare_members.push(members);
            }
            // Give back a mostly empty table after mass deletes (a hash table never shrinks
            // by itself); amortised, as it takes a three-quarter drop between two shrinks.
            let (len, cap) = (self.groups.len(), self.groups.capacity());
            if cap > 4096 && len * 4 < cap {
                let hasher = &self.hasher;
                self.groups.shrink_to(len * 2, |g| mgid_hash(hasher, &g.mgid()));
            }
            self.mlids.free(mlid);
            self.stats.groups_deleted += 1;
        }
        Ok((scope, left))
    }

    // ---------------------------------------------------------------- Get / GetTable

    /// SubnAdmGet / SubnAdmGetTable(MCMemberRecord) [`mcmr_query_mgrp`, `mcmr_by_comp_mask`,
    /// osm_sa.c `osm_sa_respond`].
    fn query(&self, from: &Requester, req: &SaMad) -> Reply {
        let mask = Cm(req.sa.component_mask);
        let rec = record_of(req);
        if let Err(status) = check_rate_mtu(mask, &rec) {
            return Reply::One(error_mad(req, status));
        }
        let trusted = req.sa.sm_key != 0;
        let mut found = Vec::new();
        if mask.contains(Cm::MGID) {
            if let Some(g) = self.group(&rec.mgid) {
                self.match_group(from, mask, &rec, g, trusted, &mut found);
            }
        } else {
            let mut all: Vec<&Group> = self.groups.iter().collect();
            all.sort_unstable_by_key(|g| g.mgid());
            for g in all {
                self.match_group(from, mask, &rec, g, trusted, &mut found);
            }
        }
        // p923: PortGID, JoinState and ProxyJoin are zero for an untrusted requester.
        if !trusted {
            for r in &mut found {
                r.port_gid = Gid::ZERO;
                r.join_state = JoinState::NONE;
                r.proxy_join = false;
            }
        }
        if req.header.method == Method::Get {
            return Reply::One(match found.len() {
                0 => error_mad(req, MadStatus::NO_RECORDS),
                1 => req.response_to(Method::Get, MadStatus::SUCCESS, SaData::mc_member(found[0])).to_bytes(),
                // C15-0.1.30: a Get that matches more than one record is an error.
                _ => error_mad(req, MadStatus::TOO_MANY_RECORDS),
            });
        }
        table_reply(req, &found)
    }

    /// Add the records of group `g` that match the request.
    fn match_group(
        &self,
        from: &Requester,
        mask: Cm,
        rec: &McMemberRecord,
        g: &Group,
        trusted: bool,
        out: &mut Vec<McMemberRecord>,
    ) {
        let grp = g.record();
        if mask.contains(Cm::MLID) && rec.mlid != grp.mlid {
            return;
        }
        // The requester must be in the group's partition.
        if !pkey_shared(from.pkey, grp.p_key) {
            return;
        }
        if !other_components_match(mask, rec, grp) {
            return;
        }
        if mask.contains(Cm::PROXY_JOIN) && rec.proxy_join != grp.proxy_join {
            return;
        }
        if !selectors_match(mask, rec, grp) {
            return;
        }
        let state_mask =
            (if mask.contains(Cm::SCOPE) { 0xF0 } else { 0 }) | (if mask.contains(Cm::JOIN_STATE) { 0x0F } else { 0 });
        let wanted = scope_state(rec.scope, rec.join_state) & state_mask;
        let member_record = |m: &Member| McMemberRecord {
            port_gid: m.port_gid(),
            join_state: m.join_state(),
            proxy_join: m.proxy(),
            ..*grp
        };
        if mask.contains(Cm::PORT_GID) {
            if let Some(m) = g.member(&rec.port_gid) {
                if scope_state(grp.scope, m.join_state()) & state_mask == wanted {
                    out.push(member_record(m));
                }
            }
        } else if trusted {
            for m in g.members() {
                if scope_state(grp.scope, m.join_state()) & state_mask == wanted {
                    out.push(member_record(m));
                }
            }
        } else if scope_state(grp.scope, grp.join_state) & state_mask == wanted {
            out.push(McMemberRecord { port_gid: Gid::ZERO, proxy_join: false, ..*grp });
        }
    }

    // ---------------------------------------------------------------- accessors

    /// The configuration.
    pub fn config(&self) -> &SaConfig {
        &self.config
    }

    /// The counters.
    pub fn stats(&self) -> &SaStats {
        &self.stats
    }

    /// Every group, in no particular order (sort by [`Group::mgid`] for a stable one).
    pub fn groups(&self) -> impl Iterator<Item = &Group> + '_ {
        self.groups.iter()
    }

    /// The group with this MGID.
    pub fn group(&self, mgid: &Gid) -> Option<&Group> {
        self.groups.find(mgid_hash(&self.hasher, mgid), |g| g.mgid() == *mgid)
    }

    /// The join state of `port_gid` in group `mgid` (`None`: not a member).
    pub fn join_state(&self, mgid: &Gid, port_gid: &Gid) -> Option<JoinState> {
        self.group(mgid)?.member(port_gid).map(Member::join_state)
    }

    /// Number of groups.
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// Number of memberships (members summed over the groups).
    pub fn member_count(&self) -> usize {
        self.members.total
    }

    /// Number of distinct MLIDs in use.
    pub fn mlids_in_use(&self) -> usize {
        self.mlids.in_use()
    }

    /// The MLIDs in use, lowest first.
    pub fn mlids(&self) -> impl Iterator<Item = u16> + '_ {
        self.mlids.iter()
    }

    /// Groups holding `mlid` (0: free; more than 1 only with [`SaConfig::share_mlids`]).
    pub fn mlid_group_count(&self, mlid: u16) -> u32 {
        self.mlids.refs(mlid)
    }

    /// Entries in the duplicate-request cache.
    pub fn cached_replies(&self) -> usize {
        self.cache.len()
    }

    /// Members that the requesting port `port` made and that are still there (what
    /// [`SaConfig::max_members_per_port`] bounds).
    pub fn members_made_by(&self, port: &Gid) -> usize {
        self.members.made_by(port)
    }

    /// Heap bytes held, estimated from container capacities and type sizes (the hash tables
    /// are counted with hashbrown's layout: power-of-two buckets at most 7/8 full, one control
    /// byte each). Allocator overhead per allocation is not included.
    pub fn memory_usage(&self) -> MemoryUsage {
        MemoryUsage {
            group_table: hash_table_bytes(self.groups.capacity(), core::mem::size_of::<Group>()),
            members: self.groups.iter().map(Group::members_heap_bytes).sum(),
            mlid_pool: self.mlids.heap_bytes(),
            dup_cache: self.cache.heap_bytes(),
            member_makers: self.members.heap_bytes(),
        }
    }
}

// -------------------------------------------------------------------- helpers

/// The members counted for the caps: all of them, and per requesting port the ones its joins
/// made (a port with none has no entry, so the table is bounded by the member count).
#[derive(Debug, Clone, Default)]
struct MemberTally {
    total: usize,
    made_by_port: hashbrown::HashMap<Gid, u32, foldhash::fast::RandomState>,
}

impl MemberTally {
    /// Whether one more member, made by `from` in a group of `group_members`, stays within the
    /// caps. The port's own cap is tested first: a flooding port is refused for what it did,
    /// and the total is left for everyone else.
    fn admit(&self, config: &SaConfig, group_members: usize, from: &Requester) -> Result<(), MemberCap> {
        if self.made_by(&from.gid) >= config.max_members_per_port {
            Err(MemberCap::Port)
        } else if group_members >= config.max_members_per_group {
            Err(MemberCap::Group)
        } else if self.total >= config.max_members {
            Err(MemberCap::Total)
        } else {
            Ok(())
        }
    }

    fn made_by(&self, port: &Gid) -> usize {
        self.made_by_port.get(port).copied().unwrap_or(0) as usize
    }

    /// A member made by `port` was added.
    fn added(&mut self, port: Gid) {
        self.total += 1;
        *self.made_by_port.entry(port).or_insert(0) += 1;
    }

    /// A member made by `port` is gone.
    fn removed(&mut self, port: Gid) {
        self.total -= 1;
        if let hashbrown::hash_map::EntryRef::Occupied(mut e) = self.made_by_port.entry_ref(&port) {
            *e.get_mut() -= 1;
            if *e.get() == 0 {
                e.remove();
            }
        }
    }

    fn heap_bytes(&self) -> usize {
        hash_table_bytes(self.made_by_port.capacity(), core::mem::size_of::<(Gid, u32)>())
    }
}

/// The MCMemberRecord of a request (the SA data decoded by attribute; re-read when the
/// decoder kept raw bytes).
fn record_of(req: &SaMad) -> McMemberRecord {
    match &req.data {
        SaData::McMember { record, .. } => *record,
        other => McMemberRecord::parse_bytes(&other.to_bytes()).unwrap_or_default(),
    }
}

/// o15-0.1.9: only a full member (or send-only full member) creates a group, and only with
/// the components OpenSM requires for a create.
fn check_create_js(mask: Cm, js: JoinState) -> Result<(), MadStatus> {
    if (js & FULL_JOIN_STATES).is_empty() {
        return Err(MadStatus::REQ_INVALID);
    }
    if !mask.contains(Cm::OPENSM_CREATE_REQUIRED) {
        return Err(MadStatus::INSUF_COMPS);
    }
    Ok(())
}

/// The record of a new group of MGID `mgid` (the request's, validated, or one the SA
/// allocated for MGID 0): MTU, rate and PacketLifeTime made real, selectors "exactly"
/// [`mcmr_rcv_create_new_mgrp`, `mgrp_request_is_realizable`].
fn new_group_record(config: &SaConfig, mask: Cm, rec: &McMemberRecord, mgid: Gid) -> Outcome {
    let mut g = *rec;
    if rec.mgid != Gid::ZERO && !mgid_is_valid(config, &rec.mgid) {
        return Err(MadStatus::REQ_INVALID);
    }
    g.mgid = mgid;
    g.mtu = realize_mtu(config, mask, rec).ok_or(MadStatus::REQ_INVALID)?;
    g.rate = realize_rate(config, mask, rec).ok_or(MadStatus::REQ_INVALID)?;
    g.packet_life_time = realize_packet_life(config, mask, rec).ok_or(MadStatus::REQ_INVALID)?;
    Ok(exactly(g))
}

/// The checks of a join that hold for new and existing groups alike: selectors met, port able
/// to use the group, JoinState not empty (o15-0.2.4) [`validate_more_comp_fields`,
/// `validate_port_caps`], and the joining port in the group's partition (ERR 1B14).
fn check_join(
    config: &SaConfig,
    from: &Requester,
    mask: Cm,
    rec: &McMemberRecord,
    grp: &McMemberRecord,
    js: JoinState,
) -> Result<(), MadStatus> {
    if !selectors_match(mask, rec, grp) || !port_can_use(config, grp) || js.is_empty() {
        return Err(MadStatus::REQ_INVALID);
    }
    if !pkey_shared(from.pkey, grp.p_key) {
        return Err(MadStatus::REQ_INVALID);
    }
    Ok(())
}

/// A requested MGID acceptable for a new group (see [`SaConfig::ib_mgid_validation`]).
fn mgid_is_valid(config: &SaConfig, mgid: &Gid) -> bool {
    if !config.ib_mgid_validation {
        return mgid.is_multicast();
    }
    let b = &mgid.0;
    if b[0] != 0xFF {
        return false;
    }
    let signature = u16::from_be_bytes([b[2], b[3]]);
    if signature == 0x401B || signature == 0x601B {
        return true; // IPoIB MGIDs are not checked further
    }
    if b[1] & 0xE0 != 0 {
        return false; // reserved flag bits
    }
    !(signature == 0xA01B && b[1] & 0x0F == SCOPE_LINK_LOCAL)
}

fn realize_mtu(config: &SaConfig, mask: Cm, rec: &McMemberRecord) -> Option<u8> {
    let port = config.mtu;
    if !mask.contains(Cm::MTU | Cm::MTU_SELECTOR) || rec.mtu_selector == Selector::Largest {
        return Some(port);
    }
    let want = rec.mtu;
    let mtu = match rec.mtu_selector {
        Selector::GreaterThan if want >= port => return None,
        Selector::GreaterThan => port,
        Selector::LessThan if want > port => port,
        Selector::LessThan => want.wrapping_sub(1),
        _ => want,
    };
    mtu_is_valid(mtu).then_some(mtu)
}

fn realize_rate(config: &SaConfig, mask: Cm, rec: &McMemberRecord) -> Option<u8> {
    let port = config.rate;
    if !mask.contains(Cm::RATE | Cm::RATE_SELECTOR) || rec.rate_selector == Selector::Largest {
        return Some(port);
    }
    let want = rec.rate;
    let rate = match rec.rate_selector {
        Selector::GreaterThan if compare_rates(want, port).is_ge() => return None,
        Selector::GreaterThan => port,
        Selector::LessThan if compare_rates(want, port).is_gt() => port,
        Selector::LessThan => rate_prev(want),
        _ => want,
    };
    rate_is_valid(rate).then_some(rate)
}

/// PacketLifeTime of a new group. OpenSM keeps the request's value whatever the mask; this
/// responder uses the configured one unless the request names one, and honours the
/// selector the way MTU and rate are honoured (a smaller life time is "better").
fn realize_packet_life(config: &SaConfig, mask: Cm, rec: &McMemberRecord) -> Option<u8> {
    let port = config.packet_life;
    let want = rec.packet_life_time & 0x3F;
    if !mask.contains(Cm::PACKET_LIFE_TIME) {
        return Some(port);
    }
    if !mask.contains(Cm::PACKET_LIFE_TIME_SELECTOR) {
        return Some(want);
    }
    match rec.packet_life_time_selector {
        Selector::GreaterThan if port > want => Some(port),
        Selector::GreaterThan => (want < 0x3F).then(|| want + 1),
        Selector::LessThan if port < want => Some(port),
        Selector::LessThan => want.checked_sub(1),
        Selector::Largest => Some(port),
        _ => Some(want),
    }
}

/// Whether a port of this SA's MTU and rate can be in the group [`validate_port_caps`].
fn port_can_use(config: &SaConfig, grp: &McMemberRecord) -> bool {
    config.mtu >= grp.mtu && compare_rates(config.rate, grp.rate).is_ge()
}

/// The hash of an MGID in the group table: its 16 bytes as one integer (no length prefix).
fn mgid_hash(hasher: &foldhash::fast::RandomState, mgid: &Gid) -> u64 {
    hasher.hash_one(u128::from_ne_bytes(mgid.0))
}

/// The record answering a join: the request's record (`request`'s SA data) with the group
/// record's MGID, Q_Key, MLID, MTU, TClass, P_Key, rate, PacketLifeTime, SL, FlowLabel,
/// HopLimit and Scope, the selectors "exactly" and the merged JoinState; PortGID, ProxyJoin and
/// the reserved bits stay the request's. The bytes of emitting the parsed request so changed
/// (`McMemberRecord::emit_bytes` packs the same words), without building it.
fn joined_record(request: &[u8; MAD_SIZE], grp: &McMemberRecord, merged: JoinState) -> [u8; MC_MEMBER_RECORD_LEN] {
    use roce_wire::mcmember::field;
    let mut r = [0u8; MC_MEMBER_RECORD_LEN];
    r.copy_from_slice(&request[SA_DATA_OFFSET..SA_DATA_OFFSET + MC_MEMBER_RECORD_LEN]);
    r[field::MGID].copy_from_slice(&grp.mgid.0);
    let exactly = u64::from(u8::from(Selector::Exactly) << 6);
    let w0 = u64::from(grp.q_key) << 32
        | u64::from(grp.mlid) << 16
        | (exactly | u64::from(grp.mtu & 0x3F)) << 8
        | u64::from(grp.traffic_class);
    let sl_flow = u64::from(grp.sl & 0xF) << 20 | u64::from(grp.flow_label & 0xF_FFFF);
    let w1 = u64::from(grp.p_key) << 48
        | (exactly | u64::from(grp.rate & 0x3F)) << 40
        | (exactly | u64::from(grp.packet_life_time & 0x3F)) << 32
        | sl_flow << 8
        | u64::from(grp.hop_limit);
    r[field::Q_KEY.start..field::Q_KEY.start + 8].copy_from_slice(&w0.to_be_bytes());
    r[field::P_KEY.start..field::P_KEY.start + 8].copy_from_slice(&w1.to_be_bytes());
    r[field::SCOPE_JOIN_STATE] = grp.scope << 4 | merged.0 & 0x0F;
    r
}

/// The MCMemberRecord at the start of a request's SA data, read in place.
fn record_at(bytes: &[u8; MAD_SIZE]) -> McMemberRecord {
    McMemberRecord::parse(&roce_wire::mcmember::Packet::new_unchecked(&bytes[SA_DATA_OFFSET..])).unwrap_or_default()
    // 200 bytes of SA data always hold one
}

/// MTU and rate, when given with their selectors, must be valid codes (else 0x0200)
/// [`rate_is_valid`, `mtu_is_valid` of osm_sa_mcmember_record.c].
fn check_rate_mtu(mask: Cm, rec: &McMemberRecord) -> Result<(), MadStatus> {
    if mask.contains(Cm::RATE | Cm::RATE_SELECTOR) && !rate_is_valid(rec.rate) {
        return Err(MadStatus::REQ_INVALID);
    }
    if mask.contains(Cm::MTU | Cm::MTU_SELECTOR) && !mtu_is_valid(rec.mtu) {
        return Err(MadStatus::REQ_INVALID);
    }
    Ok(())
}

/// The components named in `mask` equal the group's: Q_Key, P_Key (same base, not both
/// limited), TClass, SL, FlowLabel, HopLimit [`validate_other_comp_fields`].
fn other_components_match(mask: Cm, rec: &McMemberRecord, grp: &McMemberRecord) -> bool {
    if mask.contains(Cm::Q_KEY) && rec.q_key != grp.q_key {
        return false;
    }
    if mask.contains(Cm::P_KEY) && ((rec.p_key | grp.p_key) & 0x8000 == 0 || rec.p_key & 0x7FFF != grp.p_key & 0x7FFF) {
        return false;
    }
    !(mask.contains(Cm::TCLASS) && rec.traffic_class != grp.traffic_class
        || mask.contains(Cm::SL) && rec.sl != grp.sl
        || mask.contains(Cm::FLOW_LABEL) && rec.flow_label != grp.flow_label
        || mask.contains(Cm::HOP_LIMIT) && rec.hop_limit != grp.hop_limit)
}

/// The selectors named in `mask` are met by the group's MTU, rate and PacketLifeTime
/// [`validate_more_comp_fields`; PacketLifeTime added here, OpenSM ignores it].
fn selectors_match(mask: Cm, rec: &McMemberRecord, grp: &McMemberRecord) -> bool {
    use core::cmp::Ordering;
    let meets = |sel: Selector, group_vs_wanted: Ordering| match sel {
        Selector::GreaterThan => group_vs_wanted.is_gt(),
        Selector::LessThan => group_vs_wanted.is_lt(),
        Selector::Exactly => group_vs_wanted.is_eq(),
        _ => true,
    };
    (!mask.contains(Cm::MTU_SELECTOR) || meets(rec.mtu_selector, grp.mtu.cmp(&rec.mtu)))
        && (!mask.contains(Cm::RATE_SELECTOR) || meets(rec.rate_selector, compare_rates(grp.rate, rec.rate)))
        && (!mask.contains(Cm::PACKET_LIFE_TIME_SELECTOR)
            || meets(rec.packet_life_time_selector, grp.packet_life_time.cmp(&(rec.packet_life_time & 0x3F))))
}

/// Whether a requester whose P_Key is `pkey` is in the partition of `group_pkey` (same base;
/// `osm_physp_has_pkey` looks the base up in the port's table).
const fn pkey_shared(pkey: u16, group_pkey: u16) -> bool {
    pkey & 0x7FFF == group_pkey & 0x7FFF
}

/// o15-0.2.1: a member joined by itself may be modified only by itself; one joined by proxy by
/// any port in the group's partition [`validate_modify`].
fn may_modify(from: &Requester, m: &Member, grp: &McMemberRecord) -> bool {
    if m.proxy() {
        pkey_shared(from.pkey, grp.p_key)
    } else {
        from.gid == m.port_gid()
    }
}

const fn scope_state(scope: u8, js: JoinState) -> u8 {
    (scope << 4) | (js.0 & 0xF)
}

/// The MTU, rate and PacketLifeTime selectors set to "exactly", as OpenSM answers
/// [`mcmr_rcv_respond`].
fn exactly(mut r: McMemberRecord) -> McMemberRecord {
    r.mtu_selector = Selector::Exactly;
    r.rate_selector = Selector::Exactly;
    r.packet_life_time_selector = Selector::Exactly;
    r
}

/// The method of the answer: GetResp for Set, else the request's method with the R bit.
fn response_method(m: Method) -> Method {
    if m == Method::Set {
        Method::Get
    } else {
        m
    }
}

/// A GetTableResp: the records, 56 bytes apart, cut into 200-byte RMPP DATA segments
/// [osm_sa.c `osm_sa_respond`; mad_rmpp.c for the PayloadLength of each segment].
fn table_reply(req: &SaMad, records: &[McMemberRecord]) -> Reply {
    segmented_table_reply(req, TABLE_RECORD_LEN, records.len(), MC_MEMBER_ATTRIBUTE_OFFSET, |i, slot| {
        records[i].emit_bytes(&mut slot[..MC_MEMBER_RECORD_LEN])
    })
}

/// The ServiceRecord service ([`crate::service`]) as the responder's clients see it.
impl SaResponder {
    /// The registered services.
    pub fn services(&self) -> &ServiceTable {
        &self.services
    }

    /// Advance the responder's clock (a monotonic time since any fixed epoch): service leases
    /// run out against it ([`ServiceTable::handle_time`]). A host calls it before each
    /// [`SaResponder::handle_mad`] and when [`SaResponder::next_expiry`] comes.
    /// With [`SaConfig::member_lifetime`], members that outlived it go too (checked once
    /// every [`MEMBER_SWEEP_INTERVAL`]).
    #[inline]
    pub fn handle_time(&mut self, now: Duration) {
        self.now = self.now.max(now);
        self.services.handle_time(now);
        if self.config.member_lifetime.is_some() && self.now >= self.next_member_sweep {
            self.next_member_sweep = self.now + MEMBER_SWEEP_INTERVAL;
            self.expire_members();
        }
    }

    /// When the next service lease runs out or members are next checked against their
    /// lifetime, if either is due.
    pub fn next_expiry(&self) -> Option<Duration> {
        let sweep =
            (self.config.member_lifetime.is_some() && !self.groups.is_empty()).then_some(self.next_member_sweep);
        match (self.services.next_expiry(), sweep) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Remove the members that last joined longer than [`SaConfig::member_lifetime`] ago, as
    /// OpenSM removes a departed port's [osm_drop_mgr.c `drop_mgr_remove_port` ▶
    /// osm_multicast.c `osm_mgrp_delete_port`, `osm_mgrp_remove_port` with JoinState 0xF]; a
    /// group whose last full member went is deleted and its MLID freed [`osm_mgrp_cleanup`].
    fn expire_members(&mut self) {
        let Some(lifetime) = self.config.member_lifetime else { return };
        let Some(before) = self.now.checked_sub(lifetime) else { return };
        // A member joined at second s (rounded down) is kept while s + lifetime > now.
        let before_s = clock_secs(before);
        let (members, mlids, stats, spare) =
            (&mut self.members, &mut self.mlids, &mut self.stats, &mut self.spare_members);
        self.groups.retain(|g| {
            g.expire(before_s, |m| {
                members.removed(m.made_by());
                stats.members_expired += 1;
            });
            if g.full_member_count() > 0 {
                return true;
            }
            // The last full member went: the others go with the group.
            let rest = core::mem::replace(g, Group::with_members(*g.record(), Vec::new()));
            for m in rest.members() {
                members.removed(m.made_by());
                stats.members_expired += 1;
            }
            mlids.free(rest.mlid());
            stats.groups_deleted += 1;
            let list = rest.into_members();
            if spare.len() < 32 && list.capacity() <= 16 {
                spare.push(list);
            }
            false
        });
    }
}

/// The responder's clock in whole seconds, as members keep it (saturating after 136 years).
fn clock_secs(t: Duration) -> u32 {
    u32::try_from(t.as_secs()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn mad_of(bytes: &[u8]) -> [u8; MAD_SIZE] {
        let mut m = [0u8; MAD_SIZE];
        m.copy_from_slice(&bytes[..MAD_SIZE]);
        m
    }

    proptest! {
        /// The answers patched into the request's bytes are the bytes of emitting the parsed
        /// request with the answer's fields set, as the responder answered before.
        #[test]
        fn patched_answers_are_emitted_records(
            req in proptest::collection::vec(any::<u8>(), MAD_SIZE),
            grp in proptest::collection::vec(any::<u8>(), MC_MEMBER_RECORD_LEN),
            js in 0u8..16,
            set in any::<bool>(),
        ) {
            let req = mad_of(&req);
            let rec = record_at(&req);
            let grp = McMemberRecord::parse_bytes(&grp).unwrap();

            let mut out = rec;
            out.mgid = grp.mgid;
            out.q_key = grp.q_key;
            out.mlid = grp.mlid;
            out.traffic_class = grp.traffic_class;
            out.p_key = grp.p_key;
            out.sl = grp.sl;
            out.flow_label = grp.flow_label;
            out.hop_limit = grp.hop_limit;
            out.scope = grp.scope;
            out.mtu = grp.mtu;
            out.rate = grp.rate;
            out.packet_life_time = grp.packet_life_time;
            out.join_state = JoinState(js);
            let mut joined = [0u8; MC_MEMBER_RECORD_LEN];
            exactly(out).emit_bytes(&mut joined);
            prop_assert_eq!(joined_record(&req, &grp, JoinState(js)), joined);

            let mut out = rec;
            out.scope = grp.scope;
            out.join_state = JoinState(js);
            let mut left = [0u8; MC_MEMBER_RECORD_LEN];
            exactly(out).emit_bytes(&mut left);
            let answer = Answer::left(&req, grp.scope, JoinState(js));
            prop_assert_eq!(answer.record, left);

            // The whole answer MAD, as `SaMad::mc_member_response` writes it.
            let m = if set { Method::Set } else { Method::Delete };
            let mut b = [0u8; MAD_SIZE];
            answer.write_mad(&req, m, &mut b);
            let record = McMemberRecord::parse_bytes(&answer.record).unwrap();
            prop_assert_eq!(b, SaMad::mc_member_response(&req, response_method(m), MadStatus::SUCCESS, &record));
        }

        /// The error answer written from the request's bytes is the decoded request's
        /// `response_to` with the RMPP header, reserved bytes and AttributeOffset rules of
        /// `osm_sa_send_error`.
        #[test]
        fn error_answer_from_bytes_is_the_decoded_one(req in proptest::collection::vec(any::<u8>(), MAD_SIZE), status in any::<u16>()) {
            let req = mad_of(&req);
            let parsed = SaMad::parse(&req).unwrap();
            let mut r = parsed.response_to(response_method(parsed.header.method), MadStatus(status), parsed.data);
            r.rmpp = parsed.rmpp;
            r.sa.reserved = parsed.sa.reserved;
            r.sa.attribute_offset = if parsed.header.method == Method::GetTable { 0 } else { parsed.sa.attribute_offset };
            prop_assert_eq!(error_mad(&parsed, MadStatus(status)), r.to_bytes());
        }
    }
}
