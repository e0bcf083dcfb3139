//! [`SaConfig`]: what the responder is told about its subnet, its port and itself.

use core::fmt;

use roce_wire::class_port_info::{cap, cap2};

/// The first multicast LID, `IB_LID_MCAST_START_HO` [opensm ib_types.h].
pub const MLID_START: u16 = 0xC000;
/// The last multicast LID OpenSM hands out, `IB_LID_MCAST_END_HO` (0xFFFF is the permissive
/// LID) [opensm ib_types.h].
pub const MLID_END: u16 = 0xFFFE;
/// OpenSM's default size of the MLID space: `max_mcast_lid_ho = IB_LID_MCAST_END_HO` before
/// any switch lowers it with its MulticastFDBCap [osm_subnet.c `osm_subn_init`], so
/// 0xC000..=0xFFFE, 16383 MLIDs.
pub const DEFAULT_MLID_COUNT: u16 = MLID_END - MLID_START + 1;

/// The IB MTU codes an SA accepts, `IB_MIN_MTU` (1 = 256 bytes) ..= `IB_MAX_MTU` (5 = 4096)
/// [opensm ib_types.h, osm_helper.c `ib_mtu_is_valid`].
pub const MTU_RANGE: core::ops::RangeInclusive<u8> = 1..=5;

/// Everything the responder needs to know; see each field for the default.
///
/// The defaults ([`SaConfig::roce`]) suit RoCEv2, where GIDs are IP addresses: no PortGID
/// subnet-prefix check (IPv4-mapped GIDs have prefix 0, IPv6 GIDs their own prefixes) and
/// MGIDs accepted when they are multicast addresses (`ff…` or `::ffff:224.0.0.0/4`).
/// [`SaConfig::infiniband`] turns both of OpenSM's checks on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaConfig {
    /// The subnet prefix. `None` (RoCE default): no PortGID prefix check, and SA-allocated
    /// MGIDs carry prefix 0. `Some(p)`: a Set or Delete whose PortGID prefix is not `p` is
    /// answered 0x0500 INVALID_GID, as OpenSM does against `opt.subnet_prefix`
    /// [osm_sa_mcmember_record.c `mcmr_rcv_join_mgrp`, `mcmr_rcv_leave_mgrp`].
    pub subnet_prefix: Option<u64>,
    /// Apply OpenSM's MGID rules to a requested MGID when a group is created (0xFF first
    /// byte, reserved flag bits zero, no link-local 0xA01B signature; o15-0.1.5,
    /// [osm_sa_mcmember_record.c `validate_requested_mgid`]). `false` (RoCE default): the MGID
    /// must only be a multicast address in the RoCE sense ([`roce_wire::Gid::is_multicast`]).
    pub ib_mgid_validation: bool,
    /// First MLID handed out (default [`MLID_START`] 0xC000).
    pub mlid_start: u16,
    /// Number of MLIDs (default [`DEFAULT_MLID_COUNT`], 0xC000..=0xFFFE).
    pub mlid_count: u16,
    /// When every MLID is taken, let a new group share an MLID with existing groups (as
    /// OpenSM's `osm_mgrp_box_t` holds several groups on one MLID) instead of answering
    /// 0x0100 NO_RESOURCES. Default `false`: MLIDs are unique, exhaustion is NO_RESOURCES
    /// [osm_sa_mcmember_record.c `get_new_mlid`, ERR 1B19].
    pub share_mlids: bool,
    /// At most this many groups; a create beyond it is answered 0x0100 NO_RESOURCES (default:
    /// the size of the MLID space). OpenSM has no such limit of its own.
    pub max_groups: usize,
    /// The MTU code (1..=5) of every port, used as OpenSM uses `ib_port_info_get_mtu_cap` to
    /// size new groups and to check joiners [osm_sa_mcmember_record.c
    /// `mgrp_request_is_realizable`, `validate_port_caps`]. Default 3 (1024 bytes, rxe's MTU on a 1500-byte Ethernet link).
    pub mtu: u8,
    /// The rate code (2..=20) of every port, as OpenSM uses `ib_port_info_compute_rate`.
    /// Default 3 (10 Gb/s).
    pub rate: u8,
    /// The PacketLifeTime (0..=63) given to a new group whose creator did not supply one
    /// (default 18, OpenSM's `subnet_timeout` default that `osm_prtn_add_mcgroup` uses).
    pub packet_life: u8,
    /// ClassPortInfo CapabilityMask (default [`cap::SA_UD_MULTICAST`]: the only optional
    /// service implemented is UD multicast).
    pub capability_mask: u16,
    /// ClassPortInfo CapabilityMask2 (default [`cap2::SA_SENDONLY_FULL_MEM`], bit 12:
    /// SendOnlyFullMember joins are supported, which RDMA-CM checks before such a join).
    pub capability_mask2: u32,
    /// ClassPortInfo RespTimeValue (0..=31). Default 16 (268 ms), what OpenSM derives from its
    /// default 200 ms `transaction_timeout` [osm_sa_class_port_info.c `cpi_rcv_respond`].
    pub resp_time_value: u8,
    /// The SA's SM_Key (default 1, `OSM_DEFAULT_SA_KEY`). A request whose SM_Key is neither
    /// 0 nor this is dropped (C15-0.1.5 [osm_sa_mad_ctrl.c]); one carrying this key is
    /// trusted: query results keep PortGID, JoinState and ProxyJoin.
    pub sa_key: u64,
    /// Accept a join whose PortGID is not the requester's own (a proxy join) when the
    /// record's ProxyJoin bit is set (default `true`). See spec/sa.md for how this stands
    /// in for OpenSM's shared-P_Key test.
    pub allow_proxy_join: bool,
    /// Entries of the duplicate-request cache (default 65,536; 0 disables it). A Set or
    /// Delete repeated with the same TID by the same requester is answered from it. The
    /// default holds [`crate::DUP_CACHE_HORIZON`] (8 s) of 8,000 Sets and Deletes a second
    /// (about 230 bytes an entry, allocated as entries come: 15 MiB when full); 1,024 held
    /// 60 ms at the 17,000 a second that 64 clients reach, and a leave retransmitted 500 ms
    /// later was applied twice and answered 0x0200 (the soak, crates/roce-net/benches/sa_soak.rs).
    pub dup_cache_size: usize,
    /// At most this many members in all groups together (default [`DEFAULT_MAX_MEMBERS`]);
    /// a join that would add one more is answered 0x0100 NO_RESOURCES and counted
    /// ([`crate::SaStats::refused_members_total`]). OpenSM has no such bound: its member
    /// records grow until memory runs out.
    pub max_members: usize,
    /// At most this many members in one group (default [`DEFAULT_MAX_MEMBERS_PER_GROUP`]);
    /// beyond it NO_RESOURCES ([`crate::SaStats::refused_members_group`]).
    pub max_members_per_group: usize,
    /// At most this many members that one requesting port made (its own joins and its proxy
    /// joins for other PortGIDs together; default [`DEFAULT_MAX_MEMBERS_PER_PORT`]); beyond it
    /// NO_RESOURCES ([`crate::SaStats::refused_members_port`]). This is what keeps one host's
    /// flood of spoofed proxy joins from crowding out the joins of every other host.
    pub max_members_per_port: usize,
    /// How long a member lives after its last join, RoCE's stand-in for OpenSM dropping a
    /// port's memberships when the port leaves the subnet (`drop_mgr_remove_port`; spec/sa.md
    /// §Expiry). `None` (default): members live until they leave, as on OpenSM, where nothing
    /// times a member out and the kernel's RDMA-CM never joins again by itself. `Some(t)`: a
    /// member that has not joined again (any Set for it renews it) for `t` is removed as if
    /// its port had gone, its group deleted with its last full member, checked once a second
    /// (so it goes between `t` and `t` + 2 s: the join time is kept in whole seconds), counted in
    /// [`crate::SaStats::members_expired`]. For fabrics whose clients re-join periodically.
    pub member_lifetime: Option<core::time::Duration>,
}

/// Default [`SaConfig::max_members`]: 2^18 members (about 10 MiB of member records), room
/// for 100,000 legitimate members and more.
pub const DEFAULT_MAX_MEMBERS: usize = 1 << 18;
/// Default [`SaConfig::max_members_per_group`]: 2^17, more than any fabric's ports.
pub const DEFAULT_MAX_MEMBERS_PER_GROUP: usize = 1 << 17;
/// Default [`SaConfig::max_members_per_port`]: 16,384 members made by one requesting port, as
/// many as there are MLIDs (a port's own joins are one member per group, so a port in every
/// group fits) or as many proxy joins; it takes 16 such ports to fill [`DEFAULT_MAX_MEMBERS`].
pub const DEFAULT_MAX_MEMBERS_PER_PORT: usize = 1 << 14;

impl SaConfig {
    /// The RoCEv2 defaults (also [`Default`]): see the field documentation.
    pub const fn roce() -> SaConfig {
        SaConfig {
            subnet_prefix: None,
            ib_mgid_validation: false,
            mlid_start: MLID_START,
            mlid_count: DEFAULT_MLID_COUNT,
            share_mlids: false,
            max_groups: DEFAULT_MLID_COUNT as usize,
            mtu: 3,
            rate: 3,
            packet_life: 18,
            capability_mask: cap::SA_UD_MULTICAST,
            capability_mask2: cap2::SA_SENDONLY_FULL_MEM,
            resp_time_value: 16,
            sa_key: 1,
            allow_proxy_join: true,
            dup_cache_size: 65_536,
            max_members: DEFAULT_MAX_MEMBERS,
            max_members_per_group: DEFAULT_MAX_MEMBERS_PER_GROUP,
            max_members_per_port: DEFAULT_MAX_MEMBERS_PER_PORT,
            member_lifetime: None,
        }
    }

    /// InfiniBand behaviour: the PortGID prefix checked against `subnet_prefix` and OpenSM's
    /// MGID rules applied; everything else as [`SaConfig::roce`].
    pub const fn infiniband(subnet_prefix: u64) -> SaConfig {
        SaConfig { subnet_prefix: Some(subnet_prefix), ib_mgid_validation: true, ..SaConfig::roce() }
    }

    /// Check the values: MLID range inside 0xC000..=0xFFFE and not empty, MTU 1..=5, rate
    /// 2..=20, PacketLifeTime and RespTimeValue within their field widths.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let end = u32::from(self.mlid_start) + u32::from(self.mlid_count);
        if self.mlid_start < MLID_START || self.mlid_count == 0 || end > u32::from(MLID_END) + 1 {
            return Err(ConfigError::MlidRange { start: self.mlid_start, count: self.mlid_count });
        }
        if !MTU_RANGE.contains(&self.mtu) {
            return Err(ConfigError::Mtu(self.mtu));
        }
        if !crate::rate::rate_is_valid(self.rate) {
            return Err(ConfigError::Rate(self.rate));
        }
        if self.packet_life > 0x3F {
            return Err(ConfigError::PacketLife(self.packet_life));
        }
        if self.resp_time_value > 0x1F {
            return Err(ConfigError::RespTimeValue(self.resp_time_value));
        }
        for (name, cap) in [
            ("max_members", self.max_members),
            ("max_members_per_group", self.max_members_per_group),
            ("max_members_per_port", self.max_members_per_port),
        ] {
            if cap == 0 || cap > u32::MAX as usize {
                return Err(ConfigError::MemberCap { name, value: cap });
            }
        }
        if let Some(t) = self.member_lifetime {
            if t.as_secs() == 0 || t.as_secs() > u64::from(u32::MAX) {
                return Err(ConfigError::MemberLifetime(t.as_secs()));
            }
        }
        Ok(())
    }
}

impl Default for SaConfig {
    fn default() -> Self {
        SaConfig::roce()
    }
}

/// Why [`SaConfig::validate`] refused a configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigError {
    /// The MLID range is empty or leaves 0xC000..=0xFFFE.
    MlidRange {
        /// The configured first MLID.
        start: u16,
        /// The configured count.
        count: u16,
    },
    /// MTU code outside 1..=5.
    Mtu(u8),
    /// Rate code outside 2..=20.
    Rate(u8),
    /// PacketLifeTime wider than 6 bits.
    PacketLife(u8),
    /// RespTimeValue wider than 5 bits.
    RespTimeValue(u8),
    /// A member lifetime shorter than a second (every member would go at once) or beyond
    /// 2^32 - 1 seconds.
    MemberLifetime(u64),
    /// A member cap of 0 (no join could ever succeed) or beyond 2^32 - 1.
    MemberCap {
        /// The field: `max_members`, `max_members_per_group` or `max_members_per_port`.
        name: &'static str,
        /// Its value.
        value: usize,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::MlidRange { start, count } => {
                write!(f, "MLID range {start:#06x} + {count} is empty or leaves 0xc000..=0xfffe")
            }
            ConfigError::Mtu(m) => write!(f, "MTU code {m} is not 1..=5"),
            ConfigError::Rate(r) => write!(f, "rate code {r} is not 2..=20"),
            ConfigError::PacketLife(p) => write!(f, "PacketLifeTime {p} does not fit 6 bits"),
            ConfigError::RespTimeValue(r) => write!(f, "RespTimeValue {r} does not fit 5 bits"),
            ConfigError::MemberCap { name, value } => write!(f, "{name} {value} is not 1..=4294967295"),
            ConfigError::MemberLifetime(s) => write!(f, "member lifetime {s} s is not 1..=4294967295 s"),
        }
    }
}

impl std::error::Error for ConfigError {}
