//! Differential test: OpenSM's SA against ours. The same MCMemberRecord join, leave and query
//! sequences go to OpenSM 3.3 (on ibsim, through the pure-Rust sim client, as in
//! tests/opensm/sa.rs) and to [`roce_sa::SaResponder`] (in-process), and after every step both are
//! compared:
//!
//! - the **answer**: response method, status and record(s) (every field; for an error, whether
//!   it echoes the request's record);
//! - the **state**, as the SAs themselves report it: for every MGID of the sequence an
//!   untrusted `SubnAdmGet` by MGID (does the group exist, with an MLID?) and a trusted
//!   (SM_Key 1) `SubnAdmGetTable` by MGID (which ports, with which JoinState and ProxyJoin).
//!
//! The responder is configured like the simulated IB subnet: `SaConfig::infiniband(<the sim's
//! GID prefix>)` with the MTU and rate of the port as the sim's PortInfo gives them, and every
//! request reaches it from the same port GID it came from on the fabric (`Requester` = the
//! sim's GID of Hca2 or Hca3, QP 1, P_Key 0xFFFF), so that both SAs see the same thing.
//!
//! MLID values are not compared (only whether one was assigned), nor the value of an
//! SA-assigned MGID (only that both carry the SA-assigned signature). Every other disagreement
//! is either a row of [`DEVIATIONS`] (a step's answer or state) or [`FIELD_DEVIATIONS`] (one
//! record field, wherever it occurs), each a deliberate difference that spec/sa.md §9 lists and
//! each with both SAs' expected answers, so that a row that no longer holds fails too; or it
//! fails the test with the sequence, the step, both requests, both answers and the steps
//! before. spec/opensm.md "Differential" carries the same tables; a test checks that it lists
//! every row and that every request row of its status table is a step of some sequence here.
//!
//! Every sequence runs on its own fabric (they run in parallel) and its own responder. They fail
//! (never skip) when ibsim or OpenSM is missing: `bash tests/ibsim/setup.sh`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::Ipv6Addr;
use std::time::{Duration, Instant};

use crate::ibsim_harness::{sa_exchange, Fabric};
use crate::{JOIN_MASK, LEAVE_MASK, MGID_CM, MGID_CM6, MGID_IPOIB, MGID_IPOIB_BCAST, MGID_PROXY, NODE, OTHER_NODE};
use roce_net::ibsim::IbsimClient;
use roce_sa::{Requester, SaConfig, SaResponder};
use roce_wire::mad::Method;
use roce_wire::mcmember::{ComponentMask, JoinState, McMemberRecord, Selector, MC_MEMBER_RECORD_LEN};
use roce_wire::rmpp::RmppFlags;
use roce_wire::sa::{attr, SaData, SaMad, SA_DATA_OFFSET, SA_HEADER_LEN, SA_HEADER_OFFSET};
use roce_wire::{Gid, RDMA_UDP_QKEY};

const FULL: u8 = JoinState::FULL_MEMBER.0;
const SEND_ONLY: u8 = JoinState::SEND_ONLY_FULL_MEMBER.0;
/// OpenSM's default SM_Key (`OSM_DEFAULT_SM_KEY`), also roce-sa's `sa_key`: a query carrying it
/// is trusted (PortGID, JoinState and ProxyJoin are reported).
const SM_KEY: u64 = 1;
/// OpenSM answers within microseconds; nothing after this is "no answer".
const NO_ANSWER_AFTER: Duration = Duration::from_secs(2);
/// MAD header + RMPP header + SA header: the length of a GetTableResp with no record.
const SA_MAD_HEADER_LEN: usize = SA_DATA_OFFSET;
/// An MCMemberRecord in a table: 52 bytes padded to 56.
const TABLE_STRIDE: usize = 56;
/// The first TID of every run; both SAs get the same TIDs.
const TID_BASE: u64 = 0x0000_D1FF_0000_0000;

// ------------------------------------------------------------------------------------------
// The steps

/// Which port sends a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    /// Hca2.
    Me,
    /// Hca3.
    Other,
}

/// The MGIDs of the sequences.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Mg {
    Cm,
    Cm6,
    Proxy,
    Ipoib,
    Bcast,
    /// The first MGID this SA assigned for a join with MGID zero (its value may differ between
    /// the SAs).
    Assigned,
    /// The second one.
    Assigned2,
    /// All zero: "assign one".
    Zero,
}

/// The groups whose state is read after each step.
const GROUPS: [Mg; 7] = [Mg::Cm, Mg::Cm6, Mg::Proxy, Mg::Ipoib, Mg::Bcast, Mg::Assigned, Mg::Assigned2];

impl Mg {
    fn label(self) -> &'static str {
        match self {
            Mg::Cm => "MGID_CM",
            Mg::Cm6 => "MGID_CM6",
            Mg::Proxy => "MGID_PROXY",
            Mg::Ipoib => "MGID_IPOIB",
            Mg::Bcast => "MGID_BCAST",
            Mg::Assigned => "SA-assigned#1",
            Mg::Assigned2 => "SA-assigned#2",
            Mg::Zero => "::",
        }
    }
}

/// The PortGIDs of the records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Pg {
    Me,
    Other,
    /// The sim's prefix and a GUID of no port.
    Unknown,
    /// Our GUID under another prefix (fec0::/64).
    WrongPrefix,
}

/// What a step sends.
#[derive(Clone, Copy)]
enum RecOf {
    /// The join record `cma_join_ib_multicast` builds: MGID, PortGID, RDMA-CM's Q_Key, P_Key
    /// 0xFFFF, the JoinState.
    Join(Mg, Pg, u8),
    /// The kernel's leave: the record this SA answered the last successful join of (MGID,
    /// PortGID) with (the join record when there was none), JoinState = the bits to drop.
    Leave(Mg, Pg, u8),
    /// A join record changed by a function.
    Edit(Mg, Pg, u8, fn(&mut McMemberRecord)),
    /// As `Leave` (the record this SA answered the last join of (MGID, PortGID) with), changed
    /// by a function.
    JoinedEdit(Mg, Pg, fn(&mut McMemberRecord)),
    /// The previous step's request again, byte for byte, same TID (a retransmission).
    Repeat,
}

struct Step {
    name: &'static str,
    who: Who,
    method: Method,
    mask: u64,
    rec: RecOf,
    sm_key: u64,
    /// The request's AttributeOffset (0 as the kernel sends it; an error answer echoes it, but
    /// for a GetTable).
    attribute_offset: u16,
}

fn step(name: &'static str, who: Who, method: Method, mask: u64, rec: RecOf) -> Step {
    Step { name, who, method, mask, rec, sm_key: 0, attribute_offset: 0 }
}

/// Our port joins `mg` with `js` (SubnAdmSet, mask 0x130C7).
fn join(name: &'static str, mg: Mg, js: u8) -> Step {
    step(name, Who::Me, Method::Set, JOIN_MASK, RecOf::Join(mg, Pg::Me, js))
}

/// Our port joins (or creates) `mg` as a full member: SubnAdmSet with the join mask and
/// `components`, the record edited by `edit`.
fn join_edited(name: &'static str, mg: Mg, components: u64, edit: fn(&mut McMemberRecord)) -> Step {
    step(name, Who::Me, Method::Set, JOIN_MASK | components, RecOf::Edit(mg, Pg::Me, FULL, edit))
}

/// Our port drops `js` of `mg` (SubnAdmDelete, mask 0x10003).
fn leave(name: &'static str, mg: Mg, js: u8) -> Step {
    step(name, Who::Me, Method::Delete, LEAVE_MASK, RecOf::Leave(mg, Pg::Me, js))
}

/// One sequence: its name and steps.
struct Sequence {
    name: &'static str,
    steps: Vec<Step>,
}

fn sequences() -> Vec<Sequence> {
    use Method::{Delete, Get, GetMulti, GetTable, Send, Set};
    use RecOf::{Edit, Join, JoinedEdit, Leave, Repeat};
    const MTU: u64 = ComponentMask::MTU_SELECTOR.0 | ComponentMask::MTU.0;
    const RATE: u64 = ComponentMask::RATE_SELECTOR.0 | ComponentMask::RATE.0;
    const PLT: u64 = ComponentMask::PACKET_LIFE_TIME.0;
    const PLT_SEL: u64 = ComponentMask::PACKET_LIFE_TIME_SELECTOR.0;
    const HOP: u64 = ComponentMask::HOP_LIMIT.0;
    const SCOPE: u64 = ComponentMask::SCOPE.0;
    const MGID: u64 = ComponentMask::MGID.0;
    const PORT: u64 = ComponentMask::PORT_GID.0;
    const JS: u64 = ComponentMask::JOIN_STATE.0;
    const QKEY: u64 = ComponentMask::Q_KEY.0;
    vec![
        Sequence {
            name: "full_member",
            steps: vec![
                join("full_member_join", Mg::Cm, FULL),
                leave("full_member_leave", Mg::Cm, FULL),
                leave("leave_again", Mg::Cm, FULL),
                join("rejoin", Mg::Cm, FULL),
                join("rejoin_same_state", Mg::Cm, FULL),
                leave("leave", Mg::Cm, FULL),
            ],
        },
        Sequence {
            name: "send_only_full_member",
            steps: vec![
                join("send_only_full_member_join", Mg::Cm6, SEND_ONLY),
                leave("send_only_full_member_leave", Mg::Cm6, SEND_ONLY),
            ],
        },
        Sequence {
            name: "sa_assigned_mgid",
            steps: vec![
                join("sa_assigned_mgid_join", Mg::Zero, FULL),
                join("sa_assigned_mgid_join_second", Mg::Zero, FULL),
                leave("sa_assigned_mgid_leave_second", Mg::Assigned2, FULL),
                leave("sa_assigned_mgid_leave", Mg::Assigned, FULL),
            ],
        },
        Sequence {
            name: "upgrade_send_only_to_full",
            steps: vec![
                join("send_only_join", Mg::Cm, SEND_ONLY),
                join("upgrade_to_full", Mg::Cm, FULL),
                leave("leave_send_only_keeps_full", Mg::Cm, SEND_ONLY),
                leave("leave_full", Mg::Cm, FULL),
            ],
        },
        Sequence {
            // tests/opensm/sa.rs `combined_join_states_and_partial_leaves`, then a rejoin.
            name: "partial_leave",
            steps: vec![
                join("full_member_join", Mg::Cm, FULL),
                join("join_second_bit", Mg::Cm, SEND_ONLY),
                leave("leave_send_only_keeps_full", Mg::Cm, SEND_ONLY),
                join("join_second_bit_again", Mg::Cm, SEND_ONLY),
                leave("leave_full_drops_send_only", Mg::Cm, FULL),
                step("get_after_dropped", Who::Me, Get, LEAVE_MASK, Join(Mg::Cm, Pg::Me, SEND_ONLY)),
                leave("leave_send_only_after_dropped", Mg::Cm, SEND_ONLY),
                join("rejoin_after_dropped", Mg::Cm, FULL),
                leave("leave_after_rejoin", Mg::Cm, FULL),
            ],
        },
        Sequence {
            name: "two_ports",
            steps: vec![
                step("other_full_member_join", Who::Other, Set, JOIN_MASK, Join(Mg::Cm, Pg::Other, FULL)),
                join("send_only_join", Mg::Cm, SEND_ONLY),
                Step {
                    sm_key: SM_KEY,
                    ..step("get_table_all_members_trusted", Who::Me, GetTable, 0, Join(Mg::Cm, Pg::Me, 0))
                },
                step("get_table_all_groups_untrusted", Who::Me, GetTable, 0, Join(Mg::Cm, Pg::Me, 0)),
                step("leave_other_ports_membership", Who::Me, Delete, LEAVE_MASK, Leave(Mg::Cm, Pg::Other, FULL)),
                step("modify_other_ports_membership", Who::Me, Set, JOIN_MASK, Join(Mg::Cm, Pg::Other, SEND_ONLY)),
                step("other_leaves_last_full_member", Who::Other, Delete, LEAVE_MASK, Leave(Mg::Cm, Pg::Other, FULL)),
                leave("send_only_leave", Mg::Cm, SEND_ONLY),
            ],
        },
        Sequence {
            name: "proxy",
            steps: vec![
                step("proxy_join_other_ports_gid", Who::Me, Set, JOIN_MASK, Join(Mg::Proxy, Pg::Other, FULL)),
                step("proxy_leave_other_ports_gid", Who::Me, Delete, LEAVE_MASK, Leave(Mg::Proxy, Pg::Other, FULL)),
                step(
                    "proxy_join_with_proxy_join_bit",
                    Who::Me,
                    Set,
                    JOIN_MASK,
                    Edit(Mg::Proxy, Pg::Other, FULL, |r| r.proxy_join = true),
                ),
                step(
                    "proxy_leave_after_proxy_join_bit",
                    Who::Me,
                    Delete,
                    LEAVE_MASK,
                    Leave(Mg::Proxy, Pg::Other, FULL),
                ),
            ],
        },
        Sequence {
            name: "ipoib_mgid",
            steps: vec![
                join("join_ipoib_mgid_rdma_cm_qkey", Mg::Ipoib, FULL),
                leave("leave_ipoib_mgid", Mg::Ipoib, FULL),
                leave("leave_ipoib_broadcast_not_member", Mg::Bcast, FULL),
            ],
        },
        Sequence {
            // NonMember and SendOnlyNonMember bits, and Deletes of bits not held.
            name: "non_members",
            steps: vec![
                join("create_non_member", Mg::Cm, 0x2),
                step("other_full_member_join", Who::Other, Set, JOIN_MASK, Join(Mg::Cm, Pg::Other, FULL)),
                join("non_member_join", Mg::Cm, 0x2),
                join("send_only_non_member_join", Mg::Cm, 0x4),
                leave("leave_more_bits_than_held", Mg::Cm, 0x3),
                leave("leave_join_state_zero", Mg::Cm, 0),
                leave("leave_send_only_non_member", Mg::Cm, 0x4),
                step("other_leaves_last_full_member", Who::Other, Delete, LEAVE_MASK, Leave(Mg::Cm, Pg::Other, FULL)),
                step("get_after_group_gone", Who::Me, Get, LEAVE_MASK, Join(Mg::Cm, Pg::Me, 0x2)),
                leave("leave_non_member_after_group_gone", Mg::Cm, 0x2),
            ],
        },
        Sequence {
            // The other components of a join, the realisation of a new group's MTU, rate and
            // PacketLifeTime, MGID rules, and queries by MLID, JoinState, Scope and PortGID.
            name: "components",
            steps: vec![
                join("full_member_join", Mg::Cm, FULL),
                join_edited("join_existing_mtu_exactly_other", Mg::Cm, MTU, |r| {
                    r.mtu_selector = Selector::Exactly;
                    r.mtu = 3;
                }),
                join_edited("join_existing_mtu_less_than_larger", Mg::Cm, MTU, |r| {
                    r.mtu_selector = Selector::LessThan;
                    r.mtu = 5;
                }),
                join_edited("join_existing_rate_greater_than_faster", Mg::Cm, RATE, |r| {
                    r.rate_selector = Selector::GreaterThan;
                    r.rate = 6;
                }),
                join_edited("join_existing_invalid_mtu_code", Mg::Cm, MTU, |r| {
                    r.mtu_selector = Selector::Exactly;
                    r.mtu = 7;
                }),
                join_edited("join_existing_sl_other", Mg::Cm, 0, |r| r.sl = 1),
                join_edited("join_existing_tclass_other", Mg::Cm, 0, |r| r.traffic_class = 1),
                join_edited("join_existing_flow_label_other", Mg::Cm, 0, |r| r.flow_label = 5),
                join_edited("join_existing_hop_limit_other", Mg::Cm, HOP, |r| r.hop_limit = 1),
                join_edited("join_existing_limited_pkey", Mg::Cm, 0, |r| r.p_key = 0x7FFF),
                join_edited("join_existing_invalid_pkey", Mg::Cm, 0, |r| r.p_key = 0x8000),
                step("get_by_mlid", Who::Me, Get, ComponentMask::MLID.0, JoinedEdit(Mg::Cm, Pg::Me, |_| {})),
                step(
                    "get_by_other_mlid",
                    Who::Me,
                    Get,
                    ComponentMask::MLID.0,
                    JoinedEdit(Mg::Cm, Pg::Me, |r| r.mlid = 0xFFFE),
                ),
                step("get_join_state_filter_held", Who::Me, Get, LEAVE_MASK, Join(Mg::Cm, Pg::Me, FULL)),
                step("get_join_state_filter_not_held", Who::Me, Get, LEAVE_MASK, Join(Mg::Cm, Pg::Me, SEND_ONLY)),
                step("get_untrusted_group_join_state", Who::Me, Get, MGID | JS, Join(Mg::Cm, Pg::Me, FULL)),
                step("get_scope_filter_other", Who::Me, Get, MGID | SCOPE, Edit(Mg::Cm, Pg::Me, FULL, |r| r.scope = 5)),
                Step {
                    sm_key: SM_KEY,
                    ..step("get_table_trusted_by_port", Who::Me, GetTable, MGID | PORT, Join(Mg::Cm, Pg::Me, FULL))
                },
                step("get_table_untrusted_by_mgid", Who::Me, GetTable, MGID, Join(Mg::Cm, Pg::Me, FULL)),
                step("get_qkey_filter_other", Who::Me, Get, MGID | QKEY, Edit(Mg::Cm, Pg::Me, FULL, |r| r.q_key = 1)),
                // Errors to queries: GetResp and GetTableResp (AttributeOffset 0) with the
                // request echoed [`osm_mcmr_rcv_process` checks rate and MTU codes for every
                // method; `osm_sa_send_error`].
                Step {
                    attribute_offset: 7,
                    ..step(
                        "get_invalid_mtu_code",
                        Who::Me,
                        Get,
                        MGID | MTU,
                        Edit(Mg::Cm, Pg::Me, FULL, |r| {
                            r.mtu_selector = Selector::Exactly;
                            r.mtu = 7;
                        }),
                    )
                },
                Step {
                    sm_key: SM_KEY,
                    attribute_offset: 7,
                    ..step(
                        "get_table_invalid_rate_code",
                        Who::Me,
                        GetTable,
                        MGID | RATE,
                        Edit(Mg::Cm, Pg::Me, FULL, |r| {
                            r.rate_selector = Selector::Exactly;
                            r.rate = 1;
                        }),
                    )
                },
                leave("leave", Mg::Cm, FULL),
                join_edited("create_mtu_exactly_lower", Mg::Cm6, MTU, |r| {
                    r.mtu_selector = Selector::Exactly;
                    r.mtu = 3;
                }),
                step("join_port_mtu_above_group", Who::Me, Set, JOIN_MASK, Join(Mg::Cm6, Pg::Me, SEND_ONLY)),
                leave("leave_mtu_exactly_lower", Mg::Cm6, FULL | SEND_ONLY),
                join_edited("create_mtu_greater_than_port", Mg::Cm6, MTU, |r| {
                    r.mtu_selector = Selector::GreaterThan;
                    r.mtu = 4;
                }),
                join_edited("create_mtu_largest", Mg::Cm6, MTU, |r| {
                    r.mtu_selector = Selector::Largest;
                    r.mtu = 1;
                }),
                leave("leave_mtu_largest", Mg::Cm6, FULL),
                join_edited("create_rate_exactly_faster", Mg::Cm6, RATE, |r| {
                    r.rate_selector = Selector::Exactly;
                    r.rate = 6;
                }),
                join_edited("create_rate_less_than_port", Mg::Cm6, RATE, |r| {
                    r.rate_selector = Selector::LessThan;
                    r.rate = 3;
                }),
                leave("leave_rate_less_than_port", Mg::Cm6, FULL),
                join_edited("create_packet_life_given", Mg::Cm6, PLT, |r| {
                    r.packet_life_time = 5;
                }),
                leave("leave_packet_life_given", Mg::Cm6, FULL),
                join_edited("create_packet_life_less_than", Mg::Cm6, PLT | PLT_SEL, |r| {
                    r.packet_life_time_selector = Selector::LessThan;
                    r.packet_life_time = 10;
                }),
                leave("leave_packet_life_less_than", Mg::Cm6, FULL),
                join_edited("create_limited_pkey", Mg::Cm6, 0, |r| r.p_key = 0x7FFF),
                step("join_full_pkey_limited_group", Who::Me, Set, JOIN_MASK, Join(Mg::Cm6, Pg::Me, SEND_ONLY)),
                leave("leave_limited_pkey", Mg::Cm6, FULL | SEND_ONLY),
                join_edited("create_mgid_reserved_flags", Mg::Cm, 0, |r| {
                    r.mgid = Gid::from_ipv6(Ipv6Addr::new(0xff32, 0x4001, 0xffff, 0, 0, 0, 0xef01, 0x0203));
                }),
                join_edited("create_mgid_not_multicast", Mg::Cm, 0, |r| {
                    r.mgid = Gid::from_ipv6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1));
                }),
                join_edited("create_mgid_link_local_sa_signature", Mg::Cm, 0, |r| {
                    r.mgid = Gid::from_ipv6(Ipv6Addr::new(0xff12, 0xa01b, 0, 0, 0, 0, 0, 1));
                }),
                join_edited("create_sa_assigned_with_scope", Mg::Zero, SCOPE, |r| r.scope = 5),
                leave("leave_sa_assigned_with_scope", Mg::Assigned, FULL),
            ],
        },
        Sequence {
            // tests/opensm/sa.rs `bad_requests_and_their_statuses` (but the proxy and IPoIB rows,
            // which have their own sequences) and a few more.
            name: "bad_requests",
            steps: vec![
                step(
                    "join_no_join_state",
                    Who::Me,
                    Set,
                    JOIN_MASK & !ComponentMask::JOIN_STATE.0,
                    Join(Mg::Cm, Pg::Me, FULL),
                ),
                step(
                    "join_no_port_gid",
                    Who::Me,
                    Set,
                    JOIN_MASK & !ComponentMask::PORT_GID.0,
                    Join(Mg::Cm, Pg::Me, FULL),
                ),
                step("join_no_mgid", Who::Me, Set, JOIN_MASK & !ComponentMask::MGID.0, Join(Mg::Cm, Pg::Me, FULL)),
                step("create_no_qkey", Who::Me, Set, JOIN_MASK & !ComponentMask::Q_KEY.0, Join(Mg::Cm, Pg::Me, FULL)),
                step("create_leave_mask_only", Who::Me, Set, LEAVE_MASK, Join(Mg::Cm, Pg::Me, FULL)),
                step("join_unknown_port_gid", Who::Me, Set, JOIN_MASK, Join(Mg::Cm, Pg::Unknown, FULL)),
                step("join_wrong_subnet_prefix", Who::Me, Set, JOIN_MASK, Join(Mg::Cm, Pg::WrongPrefix, FULL)),
                join("join_join_state_zero", Mg::Cm, 0),
                leave("leave_unknown_group", Mg::Cm, FULL),
                step(
                    "leave_no_join_state",
                    Who::Me,
                    Delete,
                    LEAVE_MASK & !ComponentMask::JOIN_STATE.0,
                    Leave(Mg::Cm, Pg::Me, FULL),
                ),
                step(
                    "leave_no_mgid",
                    Who::Me,
                    Delete,
                    LEAVE_MASK & !ComponentMask::MGID.0,
                    Leave(Mg::Cm, Pg::Me, FULL),
                ),
                step("leave_wrong_subnet_prefix", Who::Me, Delete, LEAVE_MASK, Leave(Mg::Cm, Pg::WrongPrefix, FULL)),
                step("send_method_unsupported", Who::Me, Send, JOIN_MASK, Join(Mg::Cm, Pg::Me, FULL)),
                step("get_multi_method_unsupported", Who::Me, GetMulti, JOIN_MASK, Join(Mg::Cm, Pg::Me, FULL)),
                join("full_member_join", Mg::Cm, FULL),
                join("rejoin_same_state", Mg::Cm, FULL),
                join_edited("join_other_qkey", Mg::Cm, 0, |r| r.q_key = 0x1111_1111),
                join("join_join_state_zero_existing", Mg::Cm, 0),
                leave("leave_state_not_held", Mg::Cm, SEND_ONLY),
                step("leave_other_ports_gid", Who::Me, Delete, LEAVE_MASK, Leave(Mg::Cm, Pg::Other, FULL)),
                step("leave_unknown_port_gid", Who::Me, Delete, LEAVE_MASK, Leave(Mg::Cm, Pg::Unknown, FULL)),
                leave("leave", Mg::Cm, FULL),
                step("leave_retransmitted", Who::Me, Delete, LEAVE_MASK, Repeat),
                leave("leave_again", Mg::Cm, FULL),
            ],
        },
    ]
}

// ------------------------------------------------------------------------------------------
// The deviations

/// A deliberate difference at one step: both answers as [`Answer::summary`] prints them.
struct Deviation {
    /// The sequence, or "*" for every sequence.
    seq: &'static str,
    /// The step, or "*" for every step.
    step: &'static str,
    /// "answer", or "Get <MGID>" / "GetTable <MGID>" of the state read after the step.
    what: &'static str,
    opensm: &'static str,
    roce_sa: &'static str,
    /// The difference, with its row of spec/sa.md.
    why: &'static Reason,
}

/// Why the SAs differ: a short tag (the deviation table's last column) and the explanation.
struct Reason {
    tag: &'static str,
    text: &'static str,
}

const WHY_BCAST: Reason = Reason {
    tag: "broadcast group",
    text: "OpenSM creates the IPoIB broadcast group of the default partition at start \
           (osm_prtn_make_partitions; MLID 0xC000, no members); roce-sa has no partition or well-known groups \
           (spec/sa.md §9 \"Not implemented\")",
};
const WHY_43: Reason = Reason {
    tag: "R-DEL-43",
    text: "spec/sa.md §5 R-DEL-43 and §9 first row: after 0x9 - 0x1 roce-sa keeps the port as a \
           SendOnlyFullMember; OpenSM 3.3.23 removes it without counting it out (linux-rdma/opensm#43), so \
           its group stays, empty, with a full-member count stuck at 1 and its MLID held, even after a rejoin \
           and leave",
};
const WHY_PROXY: Reason = Reason {
    tag: "R-SET-PORT-2",
    text: "spec/sa.md §9 \"Proxy join\": OpenSM accepts another port's PortGID (a proxy join) when the \
           two ports share a P_Key; roce-sa only when the record's ProxyJoin bit is set (with it, both agree: \
           `proxy_join_with_proxy_join_bit`)",
};
const WHY_IPOIB: Reason = Reason {
    tag: "IPoIB MGID",
    text: "spec/sa.md §9 \"Requested MGID\" and \"Not implemented\": OpenSM \
           (ipoib_mcgroup_creation_validation) creates a group with an IPoIB signature (0x401B/0x601B) only with \
           the Q_Key, P_Key, TClass, SL, FlowLabel and HopLimit of the IPoIB broadcast group (Q_Key 0x0B1B, \
           so RDMA-CM's 0x01234567 fails: ERR 1B30/1B1C); roce-sa has no broadcast group and no such check",
};
const WHY_UNSUP: Reason = Reason {
    tag: "R-UNSUP-2",
    text: "spec/sa.md §9 \"Unknown attribute / unsupported method\": OpenSM's sa_mad_ctrl drops a method \
           it does not dispatch (Send: ERR 1A05); roce-sa answers 0x000C, as IBA 13.4.7 defines, so that every \
           request gets one answer (for GetMulti both answer 0x000C)",
};
const WHY_DUP: Reason = Reason {
    tag: "R-DUP",
    text: "spec/sa.md §7 and §9 \"Duplicate cache\": the same Delete again with the same TID and bytes (a \
           retransmission whose answer was lost) is answered from roce-sa's cache with the success it had; \
           OpenSM has no such cache and applies it again: 0x0200, the port is no member",
};

/// Every reason, for the printed table.
const REASONS: [&Reason; 6] = [&WHY_BCAST, &WHY_43, &WHY_PROXY, &WHY_IPOIB, &WHY_UNSUP, &WHY_DUP];

/// Every deliberate difference of the answers or the state, by sequence and step.
const DEVIATIONS: &[Deviation] = &[
    Deviation {
        seq: "*",
        step: "*",
        what: "Get MGID_BCAST",
        opensm: "GetResp 0x0000 [MGID_BCAST :: js=0x0 mlid=yes]",
        roce_sa: "GetResp 0x0300",
        why: &WHY_BCAST,
    },
    Deviation {
        seq: "two_ports",
        step: "get_table_all_groups_untrusted",
        what: "answer",
        opensm: "GetTableResp 0x0000 [MGID_CM :: js=0x0 mlid=yes, MGID_BCAST :: js=0x0 mlid=yes]",
        roce_sa: "GetTableResp 0x0000 [MGID_CM :: js=0x0 mlid=yes]",
        why: &WHY_BCAST,
    },
    // R-DEL-43
    Deviation {
        seq: "partial_leave",
        step: "leave_full_drops_send_only",
        what: "answer",
        opensm: "DeleteResp 0x0000 [MGID_CM me js=0x0 mlid=yes]",
        roce_sa: "DeleteResp 0x0000 [MGID_CM me js=0x8 mlid=yes]",
        why: &WHY_43,
    },
    Deviation {
        seq: "partial_leave",
        step: "leave_full_drops_send_only",
        what: "GetTable MGID_CM",
        opensm: "GetTableResp 0x0000 []",
        roce_sa: "GetTableResp 0x0000 [MGID_CM me js=0x8 mlid=yes]",
        why: &WHY_43,
    },
    Deviation {
        seq: "partial_leave",
        step: "get_after_dropped",
        what: "answer",
        opensm: "GetResp 0x0300",
        roce_sa: "GetResp 0x0000 [MGID_CM :: js=0x0 mlid=yes]",
        why: &WHY_43,
    },
    Deviation {
        seq: "partial_leave",
        step: "get_after_dropped",
        what: "GetTable MGID_CM",
        opensm: "GetTableResp 0x0000 []",
        roce_sa: "GetTableResp 0x0000 [MGID_CM me js=0x8 mlid=yes]",
        why: &WHY_43,
    },
    Deviation {
        seq: "partial_leave",
        step: "leave_send_only_after_dropped",
        what: "answer",
        opensm: "DeleteResp 0x0200",
        roce_sa: "DeleteResp 0x0000 [MGID_CM me js=0x0 mlid=yes]",
        why: &WHY_43,
    },
    Deviation {
        seq: "partial_leave",
        step: "leave_send_only_after_dropped",
        what: "Get MGID_CM",
        opensm: "GetResp 0x0000 [MGID_CM :: js=0x0 mlid=yes]",
        roce_sa: "GetResp 0x0300",
        why: &WHY_43,
    },
    Deviation {
        seq: "partial_leave",
        step: "leave_after_rejoin",
        what: "Get MGID_CM",
        opensm: "GetResp 0x0000 [MGID_CM :: js=0x0 mlid=yes]",
        roce_sa: "GetResp 0x0300",
        why: &WHY_43,
    },
    // Proxy joins.
    Deviation {
        seq: "proxy",
        step: "proxy_join_other_ports_gid",
        what: "answer",
        opensm: "GetResp 0x0000 [MGID_PROXY other js=0x1 mlid=yes]",
        roce_sa: "GetResp 0x0200",
        why: &WHY_PROXY,
    },
    Deviation {
        seq: "proxy",
        step: "proxy_join_other_ports_gid",
        what: "Get MGID_PROXY",
        opensm: "GetResp 0x0000 [MGID_PROXY :: js=0x0 mlid=yes]",
        roce_sa: "GetResp 0x0300",
        why: &WHY_PROXY,
    },
    Deviation {
        seq: "proxy",
        step: "proxy_join_other_ports_gid",
        what: "GetTable MGID_PROXY",
        opensm: "GetTableResp 0x0000 [MGID_PROXY other js=0x1 mlid=yes proxy]",
        roce_sa: "GetTableResp 0x0000 []",
        why: &WHY_PROXY,
    },
    Deviation {
        seq: "proxy",
        step: "proxy_leave_other_ports_gid",
        what: "answer",
        opensm: "DeleteResp 0x0000 [MGID_PROXY other js=0x0 mlid=yes]",
        roce_sa: "DeleteResp 0x0200",
        why: &WHY_PROXY,
    },
    // IPoIB-signature MGIDs.
    Deviation {
        seq: "ipoib_mgid",
        step: "join_ipoib_mgid_rdma_cm_qkey",
        what: "answer",
        opensm: "GetResp 0x0200",
        roce_sa: "GetResp 0x0000 [MGID_IPOIB me js=0x1 mlid=yes]",
        why: &WHY_IPOIB,
    },
    Deviation {
        seq: "ipoib_mgid",
        step: "join_ipoib_mgid_rdma_cm_qkey",
        what: "Get MGID_IPOIB",
        opensm: "GetResp 0x0300",
        roce_sa: "GetResp 0x0000 [MGID_IPOIB :: js=0x0 mlid=yes]",
        why: &WHY_IPOIB,
    },
    Deviation {
        seq: "ipoib_mgid",
        step: "join_ipoib_mgid_rdma_cm_qkey",
        what: "GetTable MGID_IPOIB",
        opensm: "GetTableResp 0x0000 []",
        roce_sa: "GetTableResp 0x0000 [MGID_IPOIB me js=0x1 mlid=yes]",
        why: &WHY_IPOIB,
    },
    Deviation {
        seq: "ipoib_mgid",
        step: "leave_ipoib_mgid",
        what: "answer",
        opensm: "DeleteResp 0x0200",
        roce_sa: "DeleteResp 0x0000 [MGID_IPOIB me js=0x0 mlid=yes]",
        why: &WHY_IPOIB,
    },
    // Methods.
    Deviation {
        seq: "bad_requests",
        step: "send_method_unsupported",
        what: "answer",
        opensm: "no answer",
        roce_sa: "SendResp 0x000c",
        why: &WHY_UNSUP,
    },
    // Retransmissions.
    Deviation {
        seq: "bad_requests",
        step: "leave_retransmitted",
        what: "answer",
        opensm: "DeleteResp 0x0200",
        roce_sa: "DeleteResp 0x0000 [MGID_CM me js=0x0 mlid=yes]",
        why: &WHY_DUP,
    },
];

/// A difference of single record fields, everywhere it occurs.
struct FieldDeviation {
    field: &'static str,
    opensm: &'static str,
    roce_sa: &'static str,
    why: &'static str,
    /// Whether this pair of records (OpenSM's, ours) shows it; `align` then makes ours equal.
    applies: fn(&Rec, &Rec) -> bool,
    align: fn(&Rec, &mut Rec),
}

const FIELD_DEVIATIONS: &[FieldDeviation] = &[
    FieldDeviation {
        field: "ProxyJoin bit",
        opensm: "bit 0 of record byte 49 (`uint8_t proxy_join:1` in ib_member_rec_t, a little-endian bit field); \
                 bit 7 keeps whatever the group creator's request had there, even in untrusted answers",
        roce_sa: "bit 7 of byte 49, IBA's position (bit offset 392; the kernel's ib_sa and roce-wire)",
        why: "spec/sa.md §9 \"ProxyJoin bit\". Not a difference of behaviour, so in the answers to queries \
              ProxyJoin is compared where each SA keeps it (and must agree), and in the answers to Set/Delete, \
              which send the request's record back, the bits as sent (and must agree)",
        applies: |o, r| {
            if o.query {
                o.proxy == r.proxy && o.proxy_bits != r.proxy_bits
            } else {
                o.proxy_bits == r.proxy_bits && o.proxy != r.proxy
            }
        },
        align: |o, r| {
            r.proxy = o.proxy;
            r.proxy_bits = o.proxy_bits;
        },
    },
    FieldDeviation {
        field: "PacketLifeTime",
        opensm: "2:0 (selector exactly, the request's value 0, which the mask 0x130C7 does not name)",
        roce_sa: "2:18 (SaConfig::packet_life, since the mask does not name PacketLifeTime)",
        why: "R-SET-REALIZE (spec/sa.md §9 \"PacketLifeTime\"): OpenSM copies the request's PacketLifeTime \
              whatever the mask; roce-sa takes it only when the mask names it, else its configured value",
        applies: |o, r| o.plt == (2, 0) && r.plt == (2, 18),
        align: |o, r| r.plt = o.plt,
    },
    FieldDeviation {
        field: "PacketLifeTime with a selector",
        opensm: "2:10 for a group created with PacketLifeTimeSelector 1 (less than) and PacketLifeTime 10: the \
                 selector is ignored",
        roce_sa: "2:9: the selector is honoured as MTU's and rate's are (less than 10, and the configured 18 is not)",
        why: "R-SET-REALIZE, R-SET-SELECTORS (spec/sa.md §9 \"PacketLifeTime\"): OpenSM's \"HACK\" ignores \
              PacketLifeTimeSelector; roce-sa honours it",
        applies: |o, r| o.plt == (2, 10) && r.plt == (2, 9),
        align: |o, r| r.plt = o.plt,
    },
    FieldDeviation {
        field: "MGID of an SA-assigned group",
        opensm: "ff12:a01b:fe80:: with a counter in host byte order over bytes 10..13 (the second: \
                 ff12:a01b:fe80::100:0:0)",
        roce_sa: "ff12:a01b, the prefix in bytes 4..11, a big-endian counter in bytes 12..15 (the second: \
                  ff12:a01b:fe80::1)",
        why: "R-SET-MGID-ZERO (spec/sa.md §9 \"Allocated MGID\"): both carry the SA-assigned signature \
              (word 0 & 0xFFF0FFFF = 0xFF10A01B), which is what is compared; the values differ",
        applies: |o, r| {
            let sa_assigned = |v: &str| {
                let s = v.parse::<Ipv6Addr>().map(|a| a.segments()).unwrap_or_default();
                s[0] & 0xFFF0 == 0xFF10 && s[1] == 0xA01B
            };
            o.mgid == r.mgid
                && o.mgid.starts_with("SA-assigned")
                && o.mgid_value != r.mgid_value
                && sa_assigned(&o.mgid_value)
                && sa_assigned(&r.mgid_value)
        },
        align: |o, r| r.mgid_value = o.mgid_value.clone(),
    },
];

// ------------------------------------------------------------------------------------------
// The two SAs

#[derive(Clone, Copy, Debug)]
struct Ports {
    me: Gid,
    other: Gid,
    prefix: u64,
    me_guid: u64,
}

impl Ports {
    fn requester(&self, who: Who) -> Gid {
        match who {
            Who::Me => self.me,
            Who::Other => self.other,
        }
    }

    fn gid(&self, p: Pg) -> Gid {
        match p {
            Pg::Me => self.me,
            Pg::Other => self.other,
            Pg::Unknown => Gid::from_parts(self.prefix, 0x0002_c903_dead_beef),
            Pg::WrongPrefix => Gid::from_parts(0xfec0_0000_0000_0000, self.me_guid),
        }
    }

    fn label(&self, g: Gid) -> String {
        for p in [Pg::Me, Pg::Other, Pg::Unknown, Pg::WrongPrefix] {
            if g == self.gid(p) {
                return match p {
                    Pg::Me => "me",
                    Pg::Other => "other",
                    Pg::Unknown => "unknown-port",
                    Pg::WrongPrefix => "wrong-prefix",
                }
                .to_string();
            }
        }
        if g == Gid::ZERO {
            "::".to_string()
        } else {
            Ipv6Addr::from(g.0).to_string()
        }
    }
}

/// An SA reached by MADs.
trait Backend {
    /// Send `mad` from `who`'s port; the MADs that came back, each with the length its sender
    /// gave it (OpenSM's SA MADs come through the sim with umad's length: header + records;
    /// 256 when cut to one MAD).
    fn exchange(&mut self, who: Who, mad: &[u8; 256]) -> Vec<([u8; 256], usize)>;

    /// Where this SA keeps ProxyJoin: `false` for bit 7 of record byte 49, IBA's position (the
    /// first bit of the 24 bits at bit offset 392; the kernel's ib_sa `proxy_join`, roce-wire);
    /// `true` for bit 0, where OpenSM's `uint8_t proxy_join:1` bit field of `ib_member_rec_t`
    /// lies on a little-endian host.
    fn proxy_join_in_bit0(&self) -> bool {
        false
    }
}

/// OpenSM on ibsim, with a client on our port and one on the other port.
struct OpenSm {
    me: IbsimClient,
    other: IbsimClient,
    // Dropped last: kills OpenSM and ibsim.
    _fabric: Fabric,
}

impl Backend for OpenSm {
    fn exchange(&mut self, who: Who, mad: &[u8; 256]) -> Vec<([u8; 256], usize)> {
        let c = match who {
            Who::Me => &self.me,
            Who::Other => &self.other,
        };
        sa_exchange(c, mad, NO_ANSWER_AFTER).into_iter().collect()
    }

    fn proxy_join_in_bit0(&self) -> bool {
        true
    }
}

/// Our responder, in-process.
struct Ours {
    sa: SaResponder,
    ports: Ports,
}

impl Backend for Ours {
    fn exchange(&mut self, who: Who, mad: &[u8; 256]) -> Vec<([u8; 256], usize)> {
        let from = Requester::new(self.ports.requester(who), 1);
        self.sa.handle_mad(from, mad).into_iter().map(|m| (m, 256)).collect()
    }
}

/// The IB rate code of the port's active width and speed (PortInfo LinkWidthActive, byte 31;
/// LinkSpeedActive, byte 35 bits 7:4), as OpenSM's `ib_port_info_compute_rate`.
fn port_rate(pi: &[u8; 64]) -> u8 {
    let lanes = match pi[31] {
        1 => 1,
        2 => 4,
        4 => 8,
        8 => 12,
        w => panic!("PortInfo LinkWidthActive {w:#x}"),
    };
    let half_gbps = lanes
        * match pi[35] >> 4 {
            1 => 5,  // SDR 2.5
            2 => 10, // DDR 5
            4 => 20, // QDR 10
            s => panic!("PortInfo LinkSpeedActive {s:#x}"),
        };
    match half_gbps {
        5 => 2,
        10 => 5,
        20 => 3,
        40 => 6,
        60 => 4,
        80 => 7,
        120 => 8,
        160 => 9,
        240 => 10,
        r => panic!("no IB rate code for {} Gb/s", f64::from(r) / 2.0),
    }
}

/// Start a fabric, attach to Hca2 and Hca3, and build a responder configured like the subnet.
fn both() -> (OpenSm, Ours, Ports) {
    let fabric = Fabric::start();
    let me = fabric.client(NODE);
    let other = fabric.client(OTHER_NODE);
    let ports = Ports { me: me.port_gid(), other: other.port_gid(), prefix: me.gid_prefix(), me_guid: me.port_guid() };
    let pi = me.port_info();
    let mut cfg = SaConfig::infiniband(me.gid_prefix());
    cfg.mtu = pi[41] & 0x0F; // PortInfo MTUCap
    cfg.rate = port_rate(pi);
    let ours = Ours { sa: SaResponder::new(cfg).expect("a valid SaConfig"), ports };
    (OpenSm { me, other, _fabric: fabric }, ours, ports)
}

// ------------------------------------------------------------------------------------------
// Answers, normalised

/// A record as compared: MGID and PortGID by name, the MLID only as "assigned".
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rec {
    mgid: String,
    /// The MGID's value (compared too, but for SA-assigned MGIDs: FIELD_DEVIATIONS).
    mgid_value: String,
    port: String,
    js: u8,
    scope: u8,
    /// ProxyJoin, read where this SA keeps it ([`Backend::proxy_join_in_bit0`]).
    proxy: bool,
    /// Bits 7 and 0 of record byte 49 as sent (compared too, but: FIELD_DEVIATIONS).
    proxy_bits: (bool, bool),
    /// Whether the record answers a Get/GetTable (else it is the request's record sent back
    /// with the SA's values, for a Set or Delete).
    query: bool,
    mlid: bool,
    q_key: u32,
    p_key: u16,
    tclass: u8,
    sl: u8,
    flow: u32,
    hop: u8,
    mtu: (u8, u8),
    rate: (u8, u8),
    plt: (u8, u8),
}

impl Rec {
    fn summary(&self) -> String {
        format!(
            "{} {} js={:#x} mlid={}{}",
            self.mgid,
            self.port,
            self.js,
            if self.mlid { "yes" } else { "no" },
            if self.query && self.proxy { " proxy" } else { "" }
        )
    }

    fn full(&self) -> String {
        format!(
            "{}={} {} js={:#x} scope={:#x} proxy={} byte49.7/0={}/{} mlid={} qkey={:#010x} pkey={:#06x} tclass={} sl={} flow={:#x} \
             hop={} mtu={}:{} rate={}:{} plt={}:{}",
            self.mgid,
            self.mgid_value,
            self.port,
            self.js,
            self.scope,
            u8::from(self.proxy),
            u8::from(self.proxy_bits.0),
            u8::from(self.proxy_bits.1),
            if self.mlid { "yes" } else { "no" },
            self.q_key,
            self.p_key,
            self.tclass,
            self.sl,
            self.flow,
            self.hop,
            self.mtu.0,
            self.mtu.1,
            self.rate.0,
            self.rate.1,
            self.plt.0,
            self.plt.1
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Answer {
    /// Nothing came back.
    None,
    /// A response: its method name, status, the record(s) of a success, and for an error
    /// whether the MAD's data echoes the request's record and its SA header's SM_Key and
    /// AttributeOffset (`osm_sa_send_error`: SM_Key 0; the request's AttributeOffset, 0 for a
    /// GetTable).
    Mad { method: String, status: u16, records: Vec<Rec>, echo: Option<(bool, u64, u16)> },
    /// Something that could not be read, or a state not to be queried.
    Other(String),
}

impl Answer {
    /// What the deviation table writes: method, status and per record MGID, port, JoinState,
    /// whether an MLID is set and the ProxyJoin bit.
    fn summary(&self) -> String {
        match self {
            Answer::None => "no answer".to_string(),
            Answer::Mad { method, status, records, .. } => {
                let mut s = format!("{method} {status:#06x}");
                if !records.is_empty() || method == "GetTableResp" {
                    let r: Vec<String> = records.iter().map(Rec::summary).collect();
                    write!(s, " [{}]", r.join(", ")).unwrap();
                }
                s
            }
            Answer::Other(s) => s.clone(),
        }
    }

    fn full(&self) -> String {
        match self {
            Answer::Mad { method, status, records, echo } => {
                let mut s = format!("{method} {status:#06x}");
                if let Some((e, sm_key, offset)) = echo {
                    write!(s, " (echoes the request's record: {e}; SM_Key {sm_key:#x}, AttributeOffset {offset})")
                        .unwrap();
                }
                for r in records {
                    write!(s, "\n        {}", r.full()).unwrap();
                }
                s
            }
            other => other.summary(),
        }
    }
}

fn method_name(m: Method, response: bool) -> String {
    let base = match m {
        Method::Get => "Get".to_string(),
        Method::Set => "Set".to_string(),
        Method::Send => "Send".to_string(),
        Method::GetTable => "GetTable".to_string(),
        Method::GetMulti => "GetMulti".to_string(),
        Method::Delete => "Delete".to_string(),
        other => format!("{other:?}"),
    };
    if response {
        base + "Resp"
    } else {
        base
    }
}

/// The records of a GetTableResp: counted from the sim's length for OpenSM's (header + 56 per
/// record; the sim cuts answers to one MAD, so 4 and more records cannot be counted), from the
/// RMPP PayloadLength for ours (20 per segment + 56 per record).
fn table_records(mads: &[([u8; 256], usize)]) -> Result<Vec<McMemberRecord>, String> {
    let (first, len) = &mads[0];
    let m = SaMad::parse(first).map_err(|e| format!("unreadable GetTableResp: {e}"))?;
    let n = if mads.len() == 1 && *len < 256 {
        (len.checked_sub(SA_MAD_HEADER_LEN).ok_or(format!("a GetTableResp of {len} bytes"))?) / TABLE_STRIDE
    } else if m.rmpp.version == 1 && m.rmpp.flags.contains(RmppFlags::FIRST) {
        (m.rmpp.data2 as usize - SA_HEADER_LEN * mads.len()) / TABLE_STRIDE
    } else {
        return Err(format!(
            "GetTableResp of {len} bytes without an RMPP length: cut by the sim (more than 3 records)"
        ));
    };
    let mut stream = Vec::new();
    for (mad, _) in mads {
        stream.extend_from_slice(&mad[SA_DATA_OFFSET..]);
    }
    (0..n)
        .map(|i| {
            let at = i * TABLE_STRIDE;
            let bytes = stream.get(at..at + MC_MEMBER_RECORD_LEN).ok_or(format!("{n} records do not fit"))?;
            McMemberRecord::parse_bytes(bytes).map_err(|e| e.to_string())
        })
        .collect()
}

// ------------------------------------------------------------------------------------------
// One SA's run of a sequence

/// An answer before its records are named (a join may name a new SA-assigned MGID first).
enum Raw {
    Final(Answer),
    Records { method: String, status: u16, records: Vec<McMemberRecord> },
}

struct Ctx<B: Backend> {
    b: B,
    ports: Ports,
    /// The MGIDs this SA assigned, in order.
    assigned: Vec<Gid>,
    /// The record of the last successful join of (MGID, PortGID).
    joined: HashMap<(Mg, Pg), McMemberRecord>,
    prev: Option<(Who, [u8; 256])>,
    tid: u64,
}

impl<B: Backend> Ctx<B> {
    fn new(b: B, ports: Ports) -> Ctx<B> {
        Ctx { b, ports, assigned: Vec::new(), joined: HashMap::new(), prev: None, tid: TID_BASE }
    }

    fn mgid(&self, mg: Mg) -> Option<Gid> {
        Some(match mg {
            Mg::Cm => Gid::from_ipv6(MGID_CM),
            Mg::Cm6 => Gid::from_ipv6(MGID_CM6),
            Mg::Proxy => Gid::from_ipv6(MGID_PROXY),
            Mg::Ipoib => Gid::from_ipv6(MGID_IPOIB),
            Mg::Bcast => Gid::from_ipv6(MGID_IPOIB_BCAST),
            Mg::Assigned => return self.assigned.first().copied(),
            Mg::Assigned2 => return self.assigned.get(1).copied(),
            Mg::Zero => Gid::ZERO,
        })
    }

    fn mgid_label(&self, g: Gid) -> String {
        for mg in [Mg::Cm, Mg::Cm6, Mg::Proxy, Mg::Ipoib, Mg::Bcast, Mg::Assigned, Mg::Assigned2, Mg::Zero] {
            if self.mgid(mg) == Some(g) {
                return mg.label().to_string();
            }
        }
        Ipv6Addr::from(g.0).to_string()
    }

    fn join_record(&self, mg: Mg, pg: Pg, js: u8) -> McMemberRecord {
        McMemberRecord {
            mgid: self.mgid(mg).unwrap_or(Gid::ZERO),
            port_gid: self.ports.gid(pg),
            q_key: RDMA_UDP_QKEY,
            p_key: 0xFFFF,
            join_state: JoinState(js),
            ..McMemberRecord::default()
        }
    }

    fn next_tid(&mut self) -> u64 {
        self.tid += 1;
        self.tid
    }

    fn mad(&mut self, method: Method, mask: u64, rec: McMemberRecord, sm_key: u64) -> [u8; 256] {
        let mut req = SaMad::request(method, self.next_tid(), attr::MC_MEMBER_RECORD, mask, SaData::mc_member(rec));
        req.sa.sm_key = sm_key;
        req.to_bytes()
    }

    fn rec(&self, r: &McMemberRecord, query: bool) -> Rec {
        // Bit 0 of byte 49 is the last of roce-wire's 23 reserved bits there: bit 16.
        let bit0 = r.reserved & (1 << 16) != 0;
        Rec {
            mgid: self.mgid_label(r.mgid),
            mgid_value: Ipv6Addr::from(r.mgid.0).to_string(),
            port: self.ports.label(r.port_gid),
            js: r.join_state.0,
            scope: r.scope,
            proxy: if self.b.proxy_join_in_bit0() { bit0 } else { r.proxy_join },
            proxy_bits: (r.proxy_join, bit0),
            query,
            mlid: r.mlid != 0,
            q_key: r.q_key,
            p_key: r.p_key,
            tclass: r.traffic_class,
            sl: r.sl,
            flow: r.flow_label,
            hop: r.hop_limit,
            mtu: (u8::from(r.mtu_selector), r.mtu),
            rate: (u8::from(r.rate_selector), r.rate),
            plt: (u8::from(r.packet_life_time_selector), r.packet_life_time),
        }
    }

    /// Send `mad` and read the answer (its records not yet named).
    fn ask(&mut self, who: Who, mad: &[u8; 256]) -> Raw {
        let mads = self.b.exchange(who, mad);
        let Some((first, _)) = mads.first() else { return Raw::Final(Answer::None) };
        let m = match SaMad::parse(first) {
            Ok(m) => m,
            Err(e) => return Raw::Final(Answer::Other(format!("unreadable answer: {e}"))),
        };
        let method = method_name(m.header.method, m.header.response);
        let status = m.header.status.0;
        if status != 0 {
            let rec = SA_DATA_OFFSET..SA_DATA_OFFSET + MC_MEMBER_RECORD_LEN;
            let echo = first[rec.clone()] == mad[rec];
            let sa = &first[SA_HEADER_OFFSET..SA_DATA_OFFSET];
            let sm_key = u64::from_be_bytes(sa[0..8].try_into().expect("8 bytes"));
            let offset = u16::from_be_bytes([sa[8], sa[9]]);
            return Raw::Final(Answer::Mad { method, status, records: Vec::new(), echo: Some((echo, sm_key, offset)) });
        }
        let records = if m.header.method == Method::GetTable {
            match table_records(&mads) {
                Ok(r) => r,
                Err(e) => return Raw::Final(Answer::Other(e)),
            }
        } else {
            m.mc_member().into_iter().copied().collect()
        };
        Raw::Records { method, status, records }
    }

    /// Name the records of an answer to a query (`query`) or to a Set/Delete.
    fn name(&self, raw: Raw, query: bool) -> Answer {
        match raw {
            Raw::Final(a) => a,
            Raw::Records { method, status, records } => Answer::Mad {
                method,
                status,
                records: records.iter().map(|r| self.rec(r, query)).collect(),
                echo: None,
            },
        }
    }

    /// Run one step: its request and the answer.
    fn run(&mut self, s: &Step) -> ([u8; 256], Answer) {
        let mad = match s.rec {
            RecOf::Repeat => {
                let (who, mad) = self.prev.expect("Repeat needs a previous step");
                assert_eq!(who, s.who, "{}: a retransmission comes from the same port", s.name);
                mad
            }
            RecOf::Join(mg, pg, js) => self.mad(s.method, s.mask, self.join_record(mg, pg, js), s.sm_key),
            RecOf::Edit(mg, pg, js, f) => {
                let mut r = self.join_record(mg, pg, js);
                f(&mut r);
                self.mad(s.method, s.mask, r, s.sm_key)
            }
            RecOf::Leave(mg, pg, js) => {
                let base = self.joined.get(&(mg, pg)).copied().unwrap_or_else(|| self.join_record(mg, pg, js));
                self.mad(s.method, s.mask, McMemberRecord { join_state: JoinState(js), ..base }, s.sm_key)
            }
            RecOf::JoinedEdit(mg, pg, f) => {
                let mut r = self.joined.get(&(mg, pg)).copied().unwrap_or_else(|| self.join_record(mg, pg, 0));
                f(&mut r);
                self.mad(s.method, s.mask, r, s.sm_key)
            }
        };
        let mut mad = mad;
        if s.attribute_offset != 0 {
            let at = SA_HEADER_OFFSET + 8;
            mad[at..at + 2].copy_from_slice(&s.attribute_offset.to_be_bytes());
        }
        self.prev = Some((s.who, mad));
        let raw = self.ask(s.who, &mad);
        // Remember what a successful join answered (the kernel leaves with that record).
        if let (Method::Set, Raw::Records { records, .. }, RecOf::Join(mg, pg, _) | RecOf::Edit(mg, pg, _, _)) =
            (s.method, &raw, s.rec)
        {
            let rec = records[0];
            let mg = if mg == Mg::Zero {
                self.assigned.push(rec.mgid);
                [Mg::Assigned, Mg::Assigned2][self.assigned.len() - 1]
            } else {
                mg
            };
            self.joined.insert((mg, pg), rec);
        }
        let query = matches!(s.method, Method::Get | Method::GetTable);
        (mad, self.name(raw, query))
    }

    /// The state after a step: per group, an untrusted Get by MGID and a trusted GetTable by MGID.
    fn state(&mut self) -> Vec<(String, Answer)> {
        let mut out = Vec::new();
        for mg in GROUPS {
            let Some(mgid) = self.mgid(mg) else {
                out.push((format!("Get {}", mg.label()), Answer::Other("(not assigned)".into())));
                out.push((format!("GetTable {}", mg.label()), Answer::Other("(not assigned)".into())));
                continue;
            };
            let rec = McMemberRecord { mgid, ..McMemberRecord::default() };
            let get = self.mad(Method::Get, ComponentMask::MGID.0, rec, 0);
            let raw = self.ask(Who::Me, &get);
            out.push((format!("Get {}", mg.label()), self.name(raw, true)));
            let table = self.mad(Method::GetTable, ComponentMask::MGID.0, rec, SM_KEY);
            let raw = self.ask(Who::Me, &table);
            out.push((format!("GetTable {}", mg.label()), self.name(raw, true)));
        }
        out
    }
}

// ------------------------------------------------------------------------------------------
// Comparison

fn request_text(mad: &[u8; 256]) -> String {
    match SaMad::parse(mad) {
        Ok(m) => {
            let r = m.mc_member().copied().unwrap_or_default();
            format!(
                "{:?} TID {:#x} mask {:#x} SM_Key {} MGID {} PortGID {} JoinState {:#x} MLID {:#x} Q_Key {:#x} ProxyJoin {}",
                m.header.method,
                m.header.transaction_id,
                m.sa.component_mask,
                m.sa.sm_key,
                Ipv6Addr::from(r.mgid.0),
                Ipv6Addr::from(r.port_gid.0),
                r.join_state.0,
                r.mlid,
                r.q_key,
                u8::from(r.proxy_join)
            )
        }
        Err(e) => format!("(unparsable: {e})"),
    }
}

#[derive(Debug)]
enum Verdict {
    Same,
    /// Index into DEVIATIONS.
    Deviation(usize),
    Fail(String),
}

/// Compare one pair of answers; field deviations are applied (and counted) first.
fn compare(seq: &str, step: &str, what: &str, osm: &Answer, ours: &Answer, field_hits: &mut [usize]) -> Verdict {
    let mut aligned = ours.clone();
    if let (Answer::Mad { records: o, .. }, Answer::Mad { records: r, .. }) = (osm, &mut aligned) {
        if o.len() == r.len() {
            for (o, r) in o.iter().zip(r.iter_mut()) {
                for (i, fd) in FIELD_DEVIATIONS.iter().enumerate() {
                    if (fd.applies)(o, r) {
                        (fd.align)(o, r);
                        field_hits[i] += 1;
                    }
                }
            }
        }
    }
    let listed = DEVIATIONS
        .iter()
        .position(|d| (d.seq == "*" || d.seq == seq) && (d.step == "*" || d.step == step) && d.what == what);
    if *osm == aligned {
        return match listed {
            Some(i) if DEVIATIONS[i].step != "*" => {
                Verdict::Fail(format!("listed as a deviation, but both SAs answered alike: {}", osm.summary()))
            }
            _ => Verdict::Same,
        };
    }
    match listed {
        Some(i) => {
            let d = &DEVIATIONS[i];
            if osm.summary() == d.opensm && ours.summary() == d.roce_sa {
                Verdict::Deviation(i)
            } else {
                Verdict::Fail(format!(
                    "not the listed deviation: expected OpenSM `{}` / roce-sa `{}`",
                    d.opensm, d.roce_sa
                ))
            }
        }
        None => Verdict::Fail("the SAs disagree".to_string()),
    }
}

/// Run a sequence on a fresh fabric and a fresh responder; panic with every disagreement.
fn run_sequence(name: &str) {
    let seqs = sequences();
    let seq = seqs.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no sequence {name}"));
    let t0 = Instant::now();
    let (osm, ours, ports) = both();
    let mut a = Ctx::new(osm, ports);
    let mut b = Ctx::new(ours, ports);
    println!(
        "sequence {name}: our port {} (Hca2), other port {} (Hca3); roce-sa: SaConfig::infiniband({:#x}), MTU {}, rate {}",
        Ipv6Addr::from(ports.me.0),
        Ipv6Addr::from(ports.other.0),
        ports.prefix,
        b.b.sa.config().mtu,
        b.b.sa.config().rate
    );

    let mut failures = Vec::new();
    let mut deviations_seen = vec![0usize; DEVIATIONS.len()];
    let mut field_hits = vec![0usize; FIELD_DEVIATIONS.len()];
    let mut history: Vec<String> = Vec::new();
    // The state before the first step.
    let (start_a, start_b) = (a.state(), b.state());
    for ((what, o), (_, r)) in start_a.iter().zip(&start_b) {
        match compare(name, "(start)", what, o, r, &mut field_hits) {
            Verdict::Same => {}
            Verdict::Deviation(i) => deviations_seen[i] += 1,
            Verdict::Fail(why) => failures.push(format!(
                "sequence {name}, before the first step, {what}: {why}\n    OpenSM:  {}\n    roce-sa: {}",
                o.full(),
                r.full()
            )),
        }
    }

    println!("| step | request | OpenSM | roce-sa | verdict |");
    for s in &seq.steps {
        let (req_a, ans_a) = a.run(s);
        let (req_b, ans_b) = b.run(s);
        let mut checks = vec![("answer".to_string(), ans_a.clone(), ans_b.clone())];
        for ((what, o), (what_b, r)) in a.state().into_iter().zip(b.state()) {
            assert_eq!(what, what_b);
            checks.push((what, o, r));
        }
        let mut verdicts = Vec::new();
        for (what, o, r) in &checks {
            match compare(name, s.name, what, o, r, &mut field_hits) {
                Verdict::Same => {}
                Verdict::Deviation(i) => {
                    deviations_seen[i] += 1;
                    verdicts.push(format!("deviation: {what}"));
                }
                Verdict::Fail(why) => {
                    verdicts.push(format!("FAIL: {what}"));
                    failures.push(format!(
                        "sequence {name}, step {} ({what}): {why}\n    request to OpenSM:  {}\n    request to roce-sa: {}\n    \
                         OpenSM:  {}\n    roce-sa: {}\n    steps before: {}",
                        s.name,
                        request_text(&req_a),
                        request_text(&req_b),
                        o.full(),
                        r.full(),
                        if history.is_empty() { "none".to_string() } else { history.join(" → ") }
                    ));
                }
            }
        }
        println!(
            "| {} | {:?} mask {:#x} | {} | {} | {} |",
            s.name,
            s.method,
            s.mask,
            ans_a.summary(),
            ans_b.summary(),
            if verdicts.is_empty() { "same".to_string() } else { verdicts.join("; ") }
        );
        history.push(s.name.to_string());
    }

    // Every deviation listed for this sequence was seen (the "*" ones at least once).
    for (i, d) in DEVIATIONS.iter().enumerate() {
        if (d.seq == name || d.seq == "*") && deviations_seen[i] == 0 {
            failures.push(format!("deviation {} / {} / {} is listed but was not observed", d.seq, d.step, d.what));
        }
    }
    for (i, fd) in FIELD_DEVIATIONS.iter().enumerate() {
        if field_hits[i] > 0 {
            println!("field deviation `{}`: {} record pairs", fd.field, field_hits[i]);
        }
    }
    for (i, (x, y)) in a.assigned.iter().zip(&b.assigned).enumerate() {
        println!("SA-assigned MGID #{}: OpenSM {}, roce-sa {}", i + 1, Ipv6Addr::from(x.0), Ipv6Addr::from(y.0));
    }
    println!("sequence {name}: {} steps in {:.2?}", seq.steps.len(), t0.elapsed());
    assert!(failures.is_empty(), "OpenSM and roce-sa disagree:\n{}", failures.join("\n\n"));
}

// ------------------------------------------------------------------------------------------
// The tests

#[test]
fn full_member() {
    run_sequence("full_member");
}

#[test]
fn send_only_full_member() {
    run_sequence("send_only_full_member");
}

#[test]
fn sa_assigned_mgid() {
    run_sequence("sa_assigned_mgid");
}

#[test]
fn upgrade_send_only_to_full() {
    run_sequence("upgrade_send_only_to_full");
}

#[test]
fn partial_leave() {
    run_sequence("partial_leave");
}

#[test]
fn two_ports() {
    run_sequence("two_ports");
}

#[test]
fn proxy() {
    run_sequence("proxy");
}

#[test]
fn ipoib_mgid() {
    run_sequence("ipoib_mgid");
}

#[test]
fn non_members() {
    run_sequence("non_members");
}

#[test]
fn components() {
    run_sequence("components");
}

#[test]
fn bad_requests() {
    run_sequence("bad_requests");
}

/// Every sequence has its test; step names are unique in a sequence; every request row of
/// spec/opensm.md's status table is a step somewhere; spec/opensm.md's "Differential" section
/// lists every deviation.
#[test]
fn sequences_cover_spec_and_deviations_are_documented() {
    let seqs = sequences();
    let tests = [
        "full_member",
        "send_only_full_member",
        "sa_assigned_mgid",
        "upgrade_send_only_to_full",
        "partial_leave",
        "two_ports",
        "proxy",
        "ipoib_mgid",
        "non_members",
        "components",
        "bad_requests",
    ];
    assert_eq!(seqs.iter().map(|s| s.name).collect::<Vec<_>>(), tests, "one test per sequence");
    for s in &seqs {
        let mut names: Vec<&str> = s.steps.iter().map(|st| st.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), s.steps.len(), "step names repeat in {}", s.name);
    }
    for d in DEVIATIONS {
        assert!(
            d.seq == "*"
                || seqs
                    .iter()
                    .any(|s| s.name == d.seq && (d.step == "*" || s.steps.iter().any(|st| st.name == d.step))),
            "deviation {} / {} names no step",
            d.seq,
            d.step
        );
    }

    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/spec/opensm.md");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    let (table, differential) = text.split_once("## Differential").expect("spec/opensm.md has a Differential section");
    // Every request row of the status table.
    let cases: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| l.split('|').nth(1).unwrap().trim().trim_matches('`'))
        .collect();
    assert!(cases.len() >= 32, "{cases:?}");
    let steps: Vec<&str> = seqs.iter().flat_map(|s| s.steps.iter().map(|st| st.name)).collect();
    let missing: Vec<&&str> = cases.iter().filter(|c| !steps.contains(c)).collect();
    assert!(missing.is_empty(), "rows of spec/opensm.md without a step here: {missing:?}");
    // Every deviation, as `seq` / `step` / `what` in a row of the Differential section.
    for d in DEVIATIONS {
        // (No backquotes in the first column: tests/opensm/sa.rs reads every line starting "| `" as
        // a row of the status table.)
        let row = format!("| {} | {} | {} |", d.seq, d.step, d.what);
        assert!(differential.contains(&row), "spec/opensm.md Differential lacks the row starting {row}");
    }
    for fd in FIELD_DEVIATIONS {
        assert!(differential.contains(&format!("| {} |", fd.field)), "spec/opensm.md Differential lacks {}", fd.field);
    }
}

/// Print the deviation tables in spec/opensm.md's form (run with --nocapture).
#[test]
fn print_deviation_table() {
    println!("| sequence | step | compared | OpenSM | roce-sa | why |");
    println!("|---|---|---|---|---|---|");
    for d in DEVIATIONS {
        println!("| {} | {} | {} | {} | {} | {} |", d.seq, d.step, d.what, d.opensm, d.roce_sa, d.why.tag);
    }
    println!();
    for r in REASONS {
        println!("- **{}**: {}", r.tag, r.text);
    }
    println!();
    println!("| field | OpenSM | roce-sa | why |");
    println!("|---|---|---|---|");
    for fd in FIELD_DEVIATIONS {
        println!("| {} | {} | {} | {} |", fd.field, fd.opensm, fd.roce_sa, fd.why);
    }
}
