//! [`SaStats`]: what the responder did, with a named counter for every MAD it did not answer.

/// Counters since the responder was made. Every MAD that gets no answer is counted under one
/// `dropped_*` reason, so nothing is lost silently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SaStats {
    /// MADs handed to [`crate::SaResponder::handle_mad`].
    pub received: u64,
    /// Requests answered (with any status), duplicates included.
    pub answered: u64,
    /// MADs returned to send (RMPP segments counted one by one).
    pub mads_out: u64,
    /// Answers with a non-zero status.
    pub errors: u64,
    /// Dropped: shorter than 256 bytes.
    pub dropped_short: u64,
    /// Dropped: BaseVersion other than 1 (the kernel's `validate_mad` drops them too).
    pub dropped_base_version: u64,
    /// Dropped: not the SA class (0x03).
    pub dropped_not_sa: u64,
    /// Dropped: a response (R bit set, or TrapRepress); an SA never answers one.
    pub dropped_response: u64,
    /// Dropped: SM_Key neither 0 nor the SA's key (C15-0.1.5; OpenSM ERR 1A04).
    pub dropped_sm_key: u64,
    /// Dropped: an RMPP-active request that is not a single DATA segment (no reassembly).
    pub dropped_rmpp: u64,
    /// Set/Delete requests answered from the duplicate cache, not applied again.
    pub duplicates: u64,
    /// Duplicate-cache entries evicted younger than [`crate::DUP_CACHE_HORIZON`] (the cache
    /// was full): a retransmission of such a request is applied again, not answered from the
    /// cache. Nonzero means [`crate::SaConfig::dup_cache_size`] is too small for the load.
    pub dup_cache_evicted_young: u64,
    /// Successful joins (Set).
    pub joins: u64,
    /// Successful leaves (Delete).
    pub leaves: u64,
    /// Get and GetTable requests answered.
    pub queries: u64,
    /// Groups created.
    pub groups_created: u64,
    /// Groups deleted (their last full member left, or expired).
    pub groups_deleted: u64,
    /// Members removed because they had not joined again within
    /// [`crate::SaConfig::member_lifetime`] (off by default).
    pub members_expired: u64,
    /// Joins refused with NO_RESOURCES: [`crate::SaConfig::max_members`] reached.
    pub refused_members_total: u64,
    /// Joins refused with NO_RESOURCES: the group holds
    /// [`crate::SaConfig::max_members_per_group`] members.
    pub refused_members_group: u64,
    /// Joins refused with NO_RESOURCES: the requesting port has made
    /// [`crate::SaConfig::max_members_per_port`] members.
    pub refused_members_port: u64,
}

/// Which member cap a join would break.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemberCap {
    /// [`crate::SaConfig::max_members`].
    Total,
    /// [`crate::SaConfig::max_members_per_group`].
    Group,
    /// [`crate::SaConfig::max_members_per_port`].
    Port,
}

impl SaStats {
    /// Count a join refused by a member cap.
    pub(crate) fn refuse(&mut self, cap: MemberCap) {
        match cap {
            MemberCap::Total => self.refused_members_total += 1,
            MemberCap::Group => self.refused_members_group += 1,
            MemberCap::Port => self.refused_members_port += 1,
        }
    }
}
