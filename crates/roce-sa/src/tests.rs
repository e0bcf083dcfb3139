//! Rule-by-rule tests of the responder (each names the rule of spec/sa.md it checks), the
//! OpenSM #43 sequence, the duplicate cache, RMPP tables and property tests of the invariants.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use proptest::prelude::*;
use roce_wire::mad::{MadStatus, Method, MgmtClass};
use roce_wire::mcmember::{ComponentMask as Cm, JoinState, McMemberRecord, Selector};
use roce_wire::rmpp::{RmppFlags, RmppRepr, RmppType};
use roce_wire::sa::{attr, SaData, SaMad};
use roce_wire::Gid;

use crate::*;

const FULL: JoinState = JoinState::FULL_MEMBER;
const NON: JoinState = JoinState::NON_MEMBER;
const SEND_ONLY_NON: JoinState = JoinState::SEND_ONLY_NON_MEMBER;
const SEND_ONLY_FULL: JoinState = JoinState::SEND_ONLY_FULL_MEMBER;
const QKEY: u32 = 0x0123_4567;

fn host(n: u8) -> Gid {
    Gid::from_ipv4(Ipv4Addr::new(198, 18, 0, n))
}

fn mcast(n: u16) -> Gid {
    Gid::from_ipv4(Ipv4Addr::new(239, 1, (n >> 8) as u8, n as u8))
}

fn who(n: u8) -> Requester {
    Requester::new(host(n), 1)
}

/// The record RDMA-CM sends to join (mask 0x130C7 names MGID, PortGID, Q_Key, TClass, P_Key,
/// SL, FlowLabel, JoinState).
fn rec(port: Gid, mgid: Gid, js: JoinState) -> McMemberRecord {
    McMemberRecord { mgid, port_gid: port, q_key: QKEY, p_key: 0xFFFF, join_state: js, ..McMemberRecord::default() }
}

struct H {
    sa: SaResponder,
    tid: u64,
}

impl H {
    fn new() -> H {
        H::with(SaConfig::roce())
    }

    fn with(cfg: SaConfig) -> H {
        H { sa: SaResponder::new(cfg).expect("a valid SaConfig"), tid: 0x1000 }
    }

    fn mad(&mut self, method: Method, mask: Cm, r: McMemberRecord) -> SaMad {
        self.tid += 1;
        SaMad::request(method, self.tid, attr::MC_MEMBER_RECORD, mask.0, SaData::mc_member(r))
    }

    /// Send and parse every MAD of the reply.
    fn send(&mut self, from: Requester, m: &SaMad) -> Vec<SaMad> {
        self.sa.handle_mad(from, &m.to_bytes()).iter().map(|b| SaMad::parse(b).unwrap()).collect()
    }

    /// Send a single-answer request and return the answer.
    fn one(&mut self, from: Requester, m: &SaMad) -> SaMad {
        let r = self.send(from, m);
        assert_eq!(r.len(), 1, "one answer expected");
        r[0]
    }

    fn set(&mut self, from: Requester, mask: Cm, r: McMemberRecord) -> SaMad {
        let m = self.mad(Method::Set, mask, r);
        self.one(from, &m)
    }

    fn delete(&mut self, from: Requester, mask: Cm, r: McMemberRecord) -> SaMad {
        let m = self.mad(Method::Delete, mask, r);
        self.one(from, &m)
    }

    /// A kernel-style join of host `n` to `mgid`.
    fn join(&mut self, n: u8, mgid: Gid, js: JoinState) -> SaMad {
        self.set(who(n), Cm::KERNEL_JOIN, rec(host(n), mgid, js))
    }

    /// A kernel-style leave of host `n` from `mgid`.
    fn leave(&mut self, n: u8, mgid: Gid, js: JoinState) -> SaMad {
        self.delete(who(n), Cm::KERNEL_LEAVE, McMemberRecord::leave(mgid, host(n), js))
    }

    fn query(&mut self, from: Requester, method: Method, sm_key: u64, mask: Cm, r: McMemberRecord) -> Vec<SaMad> {
        let mut m = self.mad(method, mask, r);
        m.sa.sm_key = sm_key;
        self.send(from, &m)
    }
}

fn status(m: &SaMad) -> MadStatus {
    m.header.status
}

fn ok(m: &SaMad) -> McMemberRecord {
    assert_eq!(m.header.status, MadStatus::SUCCESS, "status {}", m.header.status);
    *m.mc_member().unwrap()
}

/// Check the invariants every state must keep.
fn check_invariants(sa: &SaResponder) {
    // Every member counts against the port that made it, and only there.
    let mut made_by = std::collections::HashMap::new();
    for g in sa.groups() {
        for m in g.members() {
            *made_by.entry(m.made_by()).or_insert(0usize) += 1;
        }
    }
    for (port, n) in &made_by {
        assert_eq!(sa.members_made_by(port), *n, "members made by {port}");
    }
    let mut mlids = HashSet::new();
    let mut members = 0;
    for g in sa.groups() {
        assert!(!g.members().is_empty(), "group {} without member", g.mgid());
        assert!(g.members().iter().all(|m| !m.join_state().is_empty()), "empty join state");
        let full = g.members().iter().filter(|m| m.is_full()).count() as u32;
        assert_eq!(g.full_member_count(), full);
        assert!(full >= 1, "group {} without full member", g.mgid());
        assert!(g.members().windows(2).all(|w| w[0].port_gid() < w[1].port_gid()));
        let c = sa.config();
        assert!(g.mlid() >= c.mlid_start && u32::from(g.mlid()) < u32::from(c.mlid_start) + u32::from(c.mlid_count));
        if !c.share_mlids {
            assert!(mlids.insert(g.mlid()), "MLID {:#x} twice", g.mlid());
        }
        members += g.members().len();
    }
    assert_eq!(sa.member_count(), members);
    if !sa.config().share_mlids {
        assert_eq!(sa.mlids_in_use(), sa.group_count());
        assert_eq!(sa.mlids().collect::<HashSet<_>>(), mlids);
    }
}

// ------------------------------------------------------------------------------ Set (join)

/// R-SET-CREATE: a kernel join creates the group; GetResp, same TID, AttributeOffset 7,
/// SM_Key 0, MLID 0xC000, the configured MTU/rate/PacketLifeTime with selectors "exactly".
#[test]
fn join_creates_group() {
    let mut h = H::new();
    let req = h.mad(Method::Set, Cm::KERNEL_JOIN, rec(host(1), mcast(1), FULL));
    let resp = h.one(who(1), &req);
    let b = resp.to_bytes();
    assert_eq!((b[0], b[1], b[2], b[3]), (1, 0x03, 2, 0x81)); // GetResp
    assert_eq!(resp.header.transaction_id, req.header.transaction_id);
    assert_eq!(resp.header.attribute_id, attr::MC_MEMBER_RECORD);
    assert_eq!(resp.sa.attribute_offset, 7);
    assert_eq!(resp.sa.sm_key, 0);
    assert_eq!(resp.sa.component_mask, Cm::KERNEL_JOIN.0);
    assert_eq!(resp.rmpp, RmppRepr::default());
    let r = ok(&resp);
    assert_eq!((r.mgid, r.port_gid, r.q_key, r.p_key, r.mlid), (mcast(1), host(1), QKEY, 0xFFFF, 0xC000));
    assert_eq!((r.mtu, r.rate, r.packet_life_time), (3, 3, 18));
    assert_eq!(r.mtu_selector, Selector::Exactly);
    assert_eq!(r.rate_selector, Selector::Exactly);
    assert_eq!(r.packet_life_time_selector, Selector::Exactly);
    assert_eq!((b[56 + 38], b[56 + 42], b[56 + 43]), (0x83, 0x83, 0x80 | 18));
    assert_eq!(r.join_state, FULL);
    let g = h.sa.group(&mcast(1)).unwrap();
    assert_eq!((g.mlid(), g.members().len(), g.full_member_count()), (0xC000, 1, 1));
    assert_eq!(h.sa.join_state(&mcast(1), &host(1)), Some(FULL));
    assert_eq!(h.sa.stats().groups_created, 1);
    check_invariants(&h.sa);
}

/// R-SET-MASK: MGID, PortGID and JoinState are required (0x0600 INSUF_COMPS).
#[test]
fn set_needs_mgid_portgid_joinstate() {
    let mut h = H::new();
    for missing in [Cm::MGID, Cm::PORT_GID, Cm::JOIN_STATE] {
        let mask = Cm(Cm::KERNEL_JOIN.0 & !missing.0);
        assert_eq!(status(&h.set(who(1), mask, rec(host(1), mcast(1), FULL))), MadStatus::INSUF_COMPS);
    }
    assert_eq!(h.sa.group_count(), 0);
}

/// R-SET-CREATE-MASK: creating needs REQUIRED_MC_CREATE_COMP_MASK; joining an existing group
/// needs only MGID|PortGID|JoinState.
#[test]
fn create_needs_create_mask() {
    let mut h = H::new();
    for missing in [Cm::Q_KEY, Cm::TCLASS, Cm::P_KEY, Cm::FLOW_LABEL, Cm::SL] {
        let mask = Cm(Cm::KERNEL_JOIN.0 & !missing.0);
        assert_eq!(status(&h.set(who(1), mask, rec(host(1), mcast(1), FULL))), MadStatus::INSUF_COMPS);
    }
    ok(&h.join(1, mcast(1), FULL));
    let r = ok(&h.set(who(2), Cm::OPENSM_JOIN_REQUIRED, rec(host(2), mcast(1), FULL)));
    assert_eq!((r.mlid, r.q_key), (0xC000, QKEY));
}

/// R-SET-MGID-ZERO: an all-zero MGID asks the SA for one: ff12:a01b:<prefix>:<counter>, the
/// scope taken from the record when the mask names it.
#[test]
fn zero_mgid_is_allocated() {
    let mut h = H::new();
    let r1 = ok(&h.join(1, Gid::ZERO, FULL));
    let r2 = ok(&h.join(2, Gid::ZERO, FULL));
    assert_eq!(&r1.mgid.0[..4], &[0xFF, 0x12, 0xA0, 0x1B]);
    assert_ne!(r1.mgid, r2.mgid);
    assert!(h.sa.group(&r1.mgid).is_some() && h.sa.group(&r2.mgid).is_some());
    let mut r = rec(host(3), Gid::ZERO, FULL);
    r.scope = 0x5;
    let r3 = ok(&h.set(who(3), Cm::KERNEL_JOIN | Cm::SCOPE, r));
    assert_eq!(r3.mgid.0[1], 0x15);
    // IB: the subnet prefix is in bytes 4..12
    let mut h = H::with(SaConfig::infiniband(0xFE80_0000_0000_0000));
    let port = Gid::from_parts(0xFE80_0000_0000_0000, 7);
    let r = ok(&h.set(Requester::new(port, 1), Cm::KERNEL_JOIN, rec(port, Gid::ZERO, FULL)));
    assert_eq!(&r.mgid.0[4..12], &0xFE80_0000_0000_0000u64.to_be_bytes());
}

/// R-SET-MGID: a requested MGID must be multicast (RoCE: ff… or ::ffff:224/4); with
/// `ib_mgid_validation` OpenSM's rules (0xFF, flags, no link-local 0xA01B).
#[test]
fn requested_mgid_is_validated() {
    let mut h = H::new();
    let unicast = Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, 1));
    assert_eq!(status(&h.join(1, unicast, FULL)), MadStatus::REQ_INVALID);
    ok(&h.join(1, Gid::from_ipv6("ff3e::8000:1".parse().unwrap()), FULL)); // IPv6 SSM: fine on RoCE
    ok(&h.join(1, mcast(9), FULL));

    let prefix = 0xFE80_0000_0000_0000;
    let port = Gid::from_parts(prefix, 7);
    let me = Requester::new(port, 1);
    let mut h = H::with(SaConfig::infiniband(prefix));
    let join = |h: &mut H, mgid: &str| {
        status(&h.set(me, Cm::KERNEL_JOIN, rec(port, Gid::from_ipv6(mgid.parse().unwrap()), FULL)))
    };
    assert_eq!(join(&mut h, "::ffff:239.1.1.1"), MadStatus::REQ_INVALID); // not 0xFF
    assert_eq!(join(&mut h, "ff32::1"), MadStatus::REQ_INVALID); // reserved flag bit
    assert_eq!(join(&mut h, "ff12:a01b::1"), MadStatus::REQ_INVALID); // SA signature, link-local
    assert_eq!(join(&mut h, "ff15:a01b::1"), MadStatus::SUCCESS);
    assert_eq!(join(&mut h, "ff12:401b:ffff::ffff:ffff"), MadStatus::SUCCESS); // IPoIB: not checked
    assert_eq!(join(&mut h, "ff32:601b:ffff::1"), MadStatus::SUCCESS);
    assert_eq!(join(&mut h, "ff0e::1"), MadStatus::SUCCESS);
}

/// R-SET-PREFIX: with a configured subnet prefix the PortGID prefix is checked (0x0500);
/// without one (RoCE) it is not.
#[test]
fn portgid_prefix_check() {
    let prefix = 0xFE80_0000_0000_0000;
    let mut h = H::with(SaConfig::infiniband(prefix));
    let bad = Gid::from_parts(0x2001_0db8_0000_0000, 7);
    let good = Gid::from_parts(prefix, 7);
    let mgid = Gid::from_ipv6("ff12:401b:ffff::1".parse().unwrap());
    assert_eq!(status(&h.set(Requester::new(bad, 1), Cm::KERNEL_JOIN, rec(bad, mgid, FULL))), MadStatus::INVALID_GID);
    ok(&h.set(Requester::new(good, 1), Cm::KERNEL_JOIN, rec(good, mgid, FULL)));
    let leave = McMemberRecord::leave(mgid, bad, FULL);
    assert_eq!(status(&h.delete(Requester::new(bad, 1), Cm::KERNEL_LEAVE, leave)), MadStatus::INVALID_GID);

    // RoCE: IPv4-mapped (prefix 0) and IPv6 GIDs of any prefix join the same group
    let mut h = H::new();
    ok(&h.join(1, mcast(1), FULL));
    let v6 = Gid::from_ipv6("2001:db8::5".parse().unwrap());
    ok(&h.set(Requester::new(v6, 1), Cm::KERNEL_JOIN, rec(v6, mcast(1), FULL)));
    assert_eq!(h.sa.group(&mcast(1)).unwrap().members().len(), 2);
}

/// R-SET-PORT: PortGID must be a port (not zero, not multicast) and the requester's own,
/// unless the record asks for a proxy join (ProxyJoin bit, allowed by the configuration);
/// OpenSM answers a refused proxy join with 0x0200.
#[test]
fn portgid_is_requester_unless_proxy() {
    let mut h = H::new();
    assert_eq!(status(&h.set(who(1), Cm::KERNEL_JOIN, rec(Gid::ZERO, mcast(1), FULL))), MadStatus::REQ_INVALID);
    assert_eq!(status(&h.set(who(1), Cm::KERNEL_JOIN, rec(mcast(5), mcast(1), FULL))), MadStatus::REQ_INVALID);
    // host 1 joins host 2 without ProxyJoin: refused
    assert_eq!(status(&h.set(who(1), Cm::KERNEL_JOIN, rec(host(2), mcast(1), FULL))), MadStatus::REQ_INVALID);
    // with ProxyJoin: a proxy member
    let mut r = rec(host(2), mcast(1), FULL);
    r.proxy_join = true;
    ok(&h.set(who(1), Cm::KERNEL_JOIN, r));
    assert!(h.sa.group(&mcast(1)).unwrap().member(&host(2)).unwrap().proxy());
    // not allowed by the configuration
    let mut h = H::with(SaConfig { allow_proxy_join: false, ..SaConfig::roce() });
    assert_eq!(status(&h.set(who(1), Cm::KERNEL_JOIN, r)), MadStatus::REQ_INVALID);
}

/// R-MODIFY (o15-0.2.1): a member joined by itself is modified only by itself; a proxy member
/// by any requester of the group's partition.
#[test]
fn who_may_modify_a_membership() {
    let mut h = H::new();
    ok(&h.join(2, mcast(1), FULL));
    let mut r = rec(host(2), mcast(1), NON);
    r.proxy_join = true;
    assert_eq!(status(&h.set(who(1), Cm::KERNEL_JOIN, r)), MadStatus::REQ_INVALID);
    let leave = McMemberRecord::leave(mcast(1), host(2), FULL);
    assert_eq!(status(&h.delete(who(1), Cm::KERNEL_LEAVE, leave)), MadStatus::REQ_INVALID);
    assert_eq!(h.sa.join_state(&mcast(1), &host(2)), Some(FULL));

    // proxy member host 3 (joined by host 1): host 4 may leave it, a foreign partition may not
    let mut r = rec(host(3), mcast(1), FULL);
    r.proxy_join = true;
    ok(&h.set(who(1), Cm::KERNEL_JOIN, r));
    let leave = McMemberRecord::leave(mcast(1), host(3), FULL);
    assert_eq!(status(&h.delete(who(4).with_pkey(0x8002), Cm::KERNEL_LEAVE, leave)), MadStatus::REQ_INVALID);
    ok(&h.delete(who(4), Cm::KERNEL_LEAVE, leave));
    assert_eq!(h.sa.join_state(&mcast(1), &host(3)), None);
}

/// R-SET-JOINSTATE: JoinState must not be 0; creating needs FullMember or SendOnlyFullMember
/// (o15-0.1.9); other states may join an existing group.
#[test]
fn join_state_rules() {
    let mut h = H::new();
    assert_eq!(status(&h.join(1, mcast(1), JoinState::NONE)), MadStatus::REQ_INVALID);
    assert_eq!(status(&h.join(1, mcast(1), NON)), MadStatus::REQ_INVALID);
    assert_eq!(status(&h.join(1, mcast(1), SEND_ONLY_NON)), MadStatus::REQ_INVALID);
    assert_eq!(h.sa.group_count(), 0);
    ok(&h.join(1, mcast(1), SEND_ONLY_FULL)); // IBA 1.3: a send-only full member creates
    assert_eq!(status(&h.join(2, mcast(1), JoinState::NONE)), MadStatus::REQ_INVALID);
    ok(&h.join(2, mcast(1), NON));
    ok(&h.join(3, mcast(1), SEND_ONLY_NON));
    assert_eq!(h.sa.group(&mcast(1)).unwrap().full_member_count(), 1);
    check_invariants(&h.sa);
}

/// R-SET-MERGE (o15-0.1.11): join states of a port are ORed; the answer carries the merge.
#[test]
fn join_states_merge() {
    let mut h = H::new();
    assert_eq!(ok(&h.join(1, mcast(1), FULL)).join_state, FULL);
    assert_eq!(ok(&h.join(1, mcast(1), SEND_ONLY_FULL)).join_state, JoinState(0x9));
    assert_eq!(ok(&h.join(1, mcast(1), NON)).join_state, JoinState(0xB));
    assert_eq!(h.sa.join_state(&mcast(1), &host(1)), Some(JoinState(0xB)));
    assert_eq!(h.sa.group(&mcast(1)).unwrap().full_member_count(), 1);
    assert_eq!(h.sa.member_count(), 1);
}

/// R-SET-VALID: MTU and rate given with their selectors must be valid codes (0x0200).
#[test]
fn invalid_mtu_or_rate_code() {
    let mut h = H::new();
    for (mtu, rate) in [(0, 3), (6, 3), (3, 1), (3, 21)] {
        let mut r = rec(host(1), mcast(1), FULL);
        r.mtu_selector = Selector::Exactly;
        r.mtu = mtu;
        r.rate_selector = Selector::Exactly;
        r.rate = rate;
        let mask = Cm::KERNEL_JOIN | Cm::MTU | Cm::MTU_SELECTOR | Cm::RATE | Cm::RATE_SELECTOR;
        assert_eq!(status(&h.set(who(1), mask, r)), MadStatus::REQ_INVALID, "mtu {mtu} rate {rate}");
        let m = h.mad(Method::GetTable, mask, r);
        assert_eq!(status(&h.one(who(1), &m)), MadStatus::REQ_INVALID);
        let m = h.mad(Method::Delete, mask, r);
        assert_eq!(status(&h.one(who(1), &m)), MadStatus::REQ_INVALID);
    }
    // without the selector bit the value is not looked at
    let mut r = rec(host(1), mcast(1), FULL);
    r.mtu = 0x3F;
    ok(&h.set(who(1), Cm::KERNEL_JOIN | Cm::MTU, r));
}

fn join_with(h: &mut H, n: u8, mgid: Gid, sel: Selector, what: Cm, value: u8) -> MadStatus {
    let mut r = rec(host(n), mgid, FULL);
    let mask = match what {
        Cm::MTU => {
            r.mtu_selector = sel;
            r.mtu = value;
            Cm::MTU | Cm::MTU_SELECTOR
        }
        Cm::RATE => {
            r.rate_selector = sel;
            r.rate = value;
            Cm::RATE | Cm::RATE_SELECTOR
        }
        _ => {
            r.packet_life_time_selector = sel;
            r.packet_life_time = value;
            Cm::PACKET_LIFE_TIME | Cm::PACKET_LIFE_TIME_SELECTOR
        }
    };
    status(&h.set(who(n), Cm::KERNEL_JOIN | mask, r))
}

/// R-SET-SELECTORS: joining an existing group, the MTU/rate/PacketLifeTime selectors must be
/// met by the group's values (0x0200) [validate_more_comp_fields].
#[test]
fn selectors_against_existing_group() {
    use Selector::*;
    let mut h = H::new();
    ok(&h.join(1, mcast(1), FULL)); // MTU 3, rate 3 (10 Gb/s), PacketLifeTime 18
    let g = mcast(1);
    let cases = [
        (GreaterThan, Cm::MTU, 3, false),
        (GreaterThan, Cm::MTU, 2, true),
        (LessThan, Cm::MTU, 3, false),
        (LessThan, Cm::MTU, 4, true),
        (Exactly, Cm::MTU, 4, false),
        (Exactly, Cm::MTU, 3, true),
        (Largest, Cm::MTU, 1, true),
        (GreaterThan, Cm::RATE, 5, true), // 10 Gb/s > 5 Gb/s although code 3 < 5
        (GreaterThan, Cm::RATE, 3, false),
        (LessThan, Cm::RATE, 16, true),
        (LessThan, Cm::RATE, 2, false),
        (Exactly, Cm::RATE, 3, true),
        (Exactly, Cm::RATE, 16, false),
        (GreaterThan, Cm::PACKET_LIFE_TIME, 17, true),
        (GreaterThan, Cm::PACKET_LIFE_TIME, 18, false),
        (LessThan, Cm::PACKET_LIFE_TIME, 19, true),
        (LessThan, Cm::PACKET_LIFE_TIME, 18, false),
        (Exactly, Cm::PACKET_LIFE_TIME, 18, true),
        (Exactly, Cm::PACKET_LIFE_TIME, 10, false),
        (Largest, Cm::PACKET_LIFE_TIME, 0, true),
    ];
    for (sel, what, v, good) in cases {
        let want = if good { MadStatus::SUCCESS } else { MadStatus::REQ_INVALID };
        assert_eq!(join_with(&mut h, 2, g, sel, what, v), want, "{sel:?} {what} {v}");
    }
}

/// R-SET-REALIZE: a new group's MTU/rate/PacketLifeTime follow the selectors against the port's
/// values; unrealizable requests get 0x0200 and create nothing [mgrp_request_is_realizable].
#[test]
fn new_group_values_from_selectors() {
    use Selector::*;
    let mut h = H::with(SaConfig { mtu: 4, rate: 16, packet_life: 18, ..SaConfig::roce() });
    let mut n = 0;
    let mut create = |h: &mut H, sel: Selector, what: Cm, v: u8| -> Option<McMemberRecord> {
        n += 1;
        let s = join_with(h, 1, mcast(n), sel, what, v);
        (s == MadStatus::SUCCESS).then(|| *h.sa.group(&mcast(n)).unwrap().record())
    };
    assert_eq!(create(&mut h, GreaterThan, Cm::MTU, 2).unwrap().mtu, 4); // the port's
    assert!(create(&mut h, GreaterThan, Cm::MTU, 4).is_none());
    assert_eq!(create(&mut h, LessThan, Cm::MTU, 3).unwrap().mtu, 2);
    assert_eq!(create(&mut h, LessThan, Cm::MTU, 5).unwrap().mtu, 4);
    assert!(create(&mut h, LessThan, Cm::MTU, 1).is_none()); // nothing below 256
    assert_eq!(create(&mut h, Exactly, Cm::MTU, 2).unwrap().mtu, 2);
    assert!(create(&mut h, Exactly, Cm::MTU, 5).is_none()); // larger than the port can carry
    assert_eq!(create(&mut h, Largest, Cm::MTU, 1).unwrap().mtu, 4);
    assert_eq!(create(&mut h, GreaterThan, Cm::RATE, 3).unwrap().rate, 16);
    assert!(create(&mut h, GreaterThan, Cm::RATE, 17).is_none()); // 200 Gb/s > 100 Gb/s
    assert_eq!(create(&mut h, LessThan, Cm::RATE, 3).unwrap().rate, 5); // below 10 is 5 Gb/s
    assert!(create(&mut h, LessThan, Cm::RATE, 2).is_none());
    assert_eq!(create(&mut h, LessThan, Cm::RATE, 17).unwrap().rate, 16);
    assert_eq!(create(&mut h, GreaterThan, Cm::PACKET_LIFE_TIME, 10).unwrap().packet_life_time, 18);
    assert_eq!(create(&mut h, GreaterThan, Cm::PACKET_LIFE_TIME, 20).unwrap().packet_life_time, 21);
    assert!(create(&mut h, GreaterThan, Cm::PACKET_LIFE_TIME, 63).is_none());
    assert_eq!(create(&mut h, LessThan, Cm::PACKET_LIFE_TIME, 10).unwrap().packet_life_time, 9);
    assert!(create(&mut h, LessThan, Cm::PACKET_LIFE_TIME, 0).is_none());
    assert_eq!(create(&mut h, Exactly, Cm::PACKET_LIFE_TIME, 7).unwrap().packet_life_time, 7);
    // PacketLifeTime given without its selector: taken as it is
    let mut r = rec(host(1), mcast(100), FULL);
    r.packet_life_time = 5;
    ok(&h.set(who(1), Cm::KERNEL_JOIN | Cm::PACKET_LIFE_TIME, r));
    assert_eq!(h.sa.group(&mcast(100)).unwrap().record().packet_life_time, 5);
    assert_eq!(h.sa.mlids_in_use(), h.sa.group_count()); // failed creates freed their MLID
    check_invariants(&h.sa);
}

/// R-SET-PORTCAPS: a joiner whose port cannot carry the group's MTU or rate is refused.
#[test]
fn port_caps_against_group() {
    let mut h = H::new(); // port MTU 3
    let mut r = rec(host(1), mcast(1), FULL);
    r.mtu_selector = Selector::Exactly;
    r.mtu = 4;
    assert_eq!(status(&h.set(who(1), Cm::KERNEL_JOIN | Cm::MTU | Cm::MTU_SELECTOR, r)), MadStatus::REQ_INVALID);
    assert_eq!(h.sa.group_count(), 0);
    assert_eq!(h.sa.mlids_in_use(), 0);
}

/// R-SET-OTHER: joining an existing group, Q_Key, P_Key, TClass, SL, FlowLabel and HopLimit
/// named in the mask must equal the group's (0x0200) [validate_other_comp_fields].
#[test]
fn qkey_pkey_and_other_components() {
    let mut h = H::new();
    ok(&h.join(1, mcast(1), FULL));
    let base = rec(host(2), mcast(1), FULL);
    let bad: [(Cm, McMemberRecord); 7] = [
        (Cm::KERNEL_JOIN, McMemberRecord { q_key: 0x1111_1111, ..base }),
        (Cm::KERNEL_JOIN, McMemberRecord { p_key: 0xFFFE, ..base }), // other base
        (Cm::KERNEL_JOIN, McMemberRecord { traffic_class: 1, ..base }),
        (Cm::KERNEL_JOIN, McMemberRecord { sl: 2, ..base }),
        (Cm::KERNEL_JOIN, McMemberRecord { flow_label: 9, ..base }),
        (Cm::KERNEL_JOIN | Cm::HOP_LIMIT, McMemberRecord { hop_limit: 3, ..base }),
        (Cm::KERNEL_JOIN, McMemberRecord { p_key: 0x8000, ..base }), // invalid P_Key
    ];
    for (mask, r) in bad {
        assert_eq!(status(&h.set(who(2), mask, r)), MadStatus::REQ_INVALID, "{r:?}");
    }
    // limited member P_Key of the same base: accepted (the group's is full)
    ok(&h.set(who(2), Cm::KERNEL_JOIN, McMemberRecord { p_key: 0x7FFF, ..base }));
    // not named in the mask: not compared
    ok(&h.set(who(3), Cm::OPENSM_JOIN_REQUIRED, McMemberRecord { q_key: 1, ..rec(host(3), mcast(1), FULL) }));
    // both limited
    let mut h = H::new();
    let me = who(1).with_pkey(0x7001);
    ok(&h.set(me, Cm::KERNEL_JOIN, McMemberRecord { p_key: 0x7001, ..rec(host(1), mcast(1), FULL) }));
    let two = who(2).with_pkey(0x7001);
    let r = McMemberRecord { p_key: 0x7001, ..rec(host(2), mcast(1), FULL) };
    assert_eq!(status(&h.set(two, Cm::KERNEL_JOIN, r)), MadStatus::REQ_INVALID);
}

/// R-SET-PARTITION: the joining port must be in the group's partition (requester P_Key).
#[test]
fn joiner_outside_partition() {
    let mut h = H::new();
    ok(&h.set(
        who(1).with_pkey(0x8001),
        Cm::KERNEL_JOIN,
        McMemberRecord { p_key: 0x8001, ..rec(host(1), mcast(1), FULL) },
    ));
    assert_eq!(status(&h.set(who(2), Cm::OPENSM_JOIN_REQUIRED, rec(host(2), mcast(1), FULL))), MadStatus::REQ_INVALID);
    // a create in a partition the requester is not in is undone
    assert_eq!(
        status(&h.set(who(3), Cm::KERNEL_JOIN, McMemberRecord { p_key: 0x8005, ..rec(host(3), mcast(2), FULL) })),
        MadStatus::REQ_INVALID
    );
    assert!(h.sa.group(&mcast(2)).is_none());
    assert_eq!(h.sa.mlids_in_use(), 1);
}

/// R-MLID: MLIDs from 0xC000, lowest free first; exhaustion is 0x0100 NO_RESOURCES; a free
/// MLID named in the record is honoured; the group limit is NO_RESOURCES too.
#[test]
fn mlid_allocation_and_exhaustion() {
    let mut h = H::with(SaConfig { mlid_count: 3, ..SaConfig::roce() });
    for i in 0..3 {
        assert_eq!(ok(&h.join(1, mcast(i), FULL)).mlid, 0xC000 + i);
    }
    assert_eq!(status(&h.join(1, mcast(3), FULL)), MadStatus::NO_RESOURCES);
    assert!(h.sa.group(&mcast(3)).is_none());
    ok(&h.leave(1, mcast(1), FULL));
    assert_eq!(ok(&h.join(1, mcast(3), FULL)).mlid, 0xC001);
    // a requested MLID
    let mut h = H::new();
    let r = McMemberRecord { mlid: 0xC123, ..rec(host(1), mcast(1), FULL) };
    assert_eq!(ok(&h.set(who(1), Cm::KERNEL_JOIN, r)).mlid, 0xC123);
    assert_eq!(ok(&h.join(1, mcast(2), FULL)).mlid, 0xC000);
    // the group limit
    let mut h = H::with(SaConfig { max_groups: 1, ..SaConfig::roce() });
    ok(&h.join(1, mcast(1), FULL));
    assert_eq!(status(&h.join(1, mcast(2), FULL)), MadStatus::NO_RESOURCES);
    assert_eq!(h.sa.mlids_in_use(), 1);
}

/// R-MLID-SHARE: with `share_mlids` an exhausted pool shares MLIDs and frees each when its last
/// group goes.
#[test]
fn shared_mlids() {
    let mut h = H::with(SaConfig { mlid_count: 2, share_mlids: true, max_groups: 10, ..SaConfig::roce() });
    let m: Vec<u16> = (0..4).map(|i| ok(&h.join(1, mcast(i), FULL)).mlid).collect();
    assert_eq!(m, [0xC000, 0xC001, 0xC000, 0xC001]);
    assert_eq!((h.sa.mlids_in_use(), h.sa.mlid_group_count(0xC000)), (2, 2));
    check_invariants(&h.sa);
    for i in 0..4 {
        ok(&h.leave(1, mcast(i), FULL));
    }
    assert_eq!(h.sa.mlids_in_use(), 0);
    assert_eq!(ok(&h.join(1, mcast(9), FULL)).mlid, 0xC000);
}

// ------------------------------------------------------------------------------ Delete (leave)

/// R-DEL-MASK: MGID, PortGID and JoinState are required (0x0600).
#[test]
fn delete_needs_mask() {
    let mut h = H::new();
    ok(&h.join(1, mcast(1), FULL));
    for missing in [Cm::MGID, Cm::PORT_GID, Cm::JOIN_STATE] {
        let mask = Cm(Cm::KERNEL_LEAVE.0 & !missing.0);
        let r = McMemberRecord::leave(mcast(1), host(1), FULL);
        assert_eq!(status(&h.delete(who(1), mask, r)), MadStatus::INSUF_COMPS);
    }
    assert_eq!(h.sa.join_state(&mcast(1), &host(1)), Some(FULL));
}

/// R-DEL-VALID (o15-0.1.14): group exists, port is a member, requested ∩ stored ≠ ∅,
/// requested ⊆ stored; else 0x0200 and nothing changes.
#[test]
fn delete_validity() {
    let mut h = H::new();
    ok(&h.join(1, mcast(1), JoinState(0x3)));
    assert_eq!(status(&h.leave(1, mcast(2), FULL)), MadStatus::REQ_INVALID); // no such group
    assert_eq!(status(&h.leave(2, mcast(1), FULL)), MadStatus::REQ_INVALID); // not a member
    assert_eq!(status(&h.leave(1, mcast(1), SEND_ONLY_FULL)), MadStatus::REQ_INVALID); // no common bit
    assert_eq!(status(&h.leave(1, mcast(1), JoinState(0x5))), MadStatus::REQ_INVALID); // 0x4 not stored
    assert_eq!(status(&h.leave(1, mcast(1), JoinState::NONE)), MadStatus::REQ_INVALID);
    assert_eq!(h.sa.join_state(&mcast(1), &host(1)), Some(JoinState(0x3)));
}

/// R-DEL-RESP: DeleteResp 0x95, the request's record with the JoinState left and selectors
/// "exactly", AttributeOffset 7.
#[test]
fn delete_answer() {
    let mut h = H::new();
    ok(&h.join(1, mcast(1), JoinState(0x3)));
    let resp = h.leave(1, mcast(1), NON);
    assert_eq!(resp.to_bytes()[3], 0x95);
    assert_eq!(resp.sa.attribute_offset, 7);
    let r = ok(&resp);
    assert_eq!((r.mgid, r.port_gid, r.join_state), (mcast(1), host(1), FULL));
    assert_eq!(r.mtu_selector, Selector::Exactly);
    assert_eq!(h.sa.join_state(&mcast(1), &host(1)), Some(FULL));
    assert_eq!(ok(&h.leave(1, mcast(1), FULL)).join_state, JoinState::NONE);
    assert_eq!(h.sa.group_count(), 0);
}

/// R-DEL-REMOVE: bits cleared; the port goes when none would keep it; the group goes (with
/// its non-full members) when its last full member leaves, and its MLID is free.
#[test]
fn leave_removes_port_and_group() {
    let mut h = H::new();
    ok(&h.join(1, mcast(1), FULL));
    ok(&h.join(2, mcast(1), FULL));
    ok(&h.join(3, mcast(1), NON));
    assert_eq!(h.sa.member_count(), 3);
    ok(&h.leave(2, mcast(1), FULL));
    assert_eq!(h.sa.join_state(&mcast(1), &host(2)), None);
    assert_eq!(h.sa.member_count(), 2);
    ok(&h.join(1, mcast(1), NON)); // 0x3
    assert_eq!(ok(&h.leave(1, mcast(1), FULL)).join_state, JoinState::NONE); // no full member left: all goes
    assert_eq!(h.sa.group_count(), 0);
    assert_eq!(h.sa.member_count(), 0);
    assert_eq!(h.sa.mlids_in_use(), 0);
    assert_eq!(h.sa.stats().groups_deleted, 1);
    // a non-full bit left is kept while another full member remains
    ok(&h.join(1, mcast(2), FULL));
    ok(&h.join(2, mcast(2), JoinState(0x3)));
    assert_eq!(ok(&h.leave(2, mcast(2), FULL)).join_state, NON);
    assert_eq!(h.sa.join_state(&mcast(2), &host(2)), Some(NON));
    check_invariants(&h.sa);
}

/// R-DEL-43: OpenSM #43. Join 0x9, partial leave 0x1: the port stays a send-only full member
/// (OpenSM drops it and leaks the MLID); the final leave 0x8 frees the MLID. 5,000 cycles on
/// one group, then 5,000 groups at once: no MLID leaks, and a new group gets 0xC000.
#[test]
fn opensm_43_send_only_full_partial_leave_does_not_leak() {
    let mut h = H::new();
    for _ in 0..5000 {
        assert_eq!(ok(&h.join(1, mcast(7), JoinState(0x9))).join_state, JoinState(0x9));
        assert_eq!(ok(&h.leave(1, mcast(7), FULL)).join_state, SEND_ONLY_FULL);
        let g = h.sa.group(&mcast(7)).expect("the group lives on with its send-only full member");
        assert_eq!((g.members().len(), g.full_member_count()), (1, 1));
        assert_eq!(h.sa.mlids_in_use(), 1);
        assert_eq!(ok(&h.leave(1, mcast(7), SEND_ONLY_FULL)).join_state, JoinState::NONE);
        assert_eq!(h.sa.mlids_in_use(), 0);
    }
    for i in 0..5000 {
        ok(&h.join(1, mcast(i), JoinState(0x9)));
        ok(&h.leave(1, mcast(i), FULL));
    }
    assert_eq!((h.sa.group_count(), h.sa.mlids_in_use()), (5000, 5000));
    check_invariants(&h.sa);
    for i in 0..5000 {
        ok(&h.leave(1, mcast(i), SEND_ONLY_FULL));
    }
    assert_eq!((h.sa.group_count(), h.sa.member_count(), h.sa.mlids_in_use()), (0, 0, 0));
    assert_eq!(ok(&h.join(2, mcast(9999), FULL)).mlid, 0xC000);
    // the reverse partial leave: 0x9 minus 0x8 leaves a full member
    ok(&h.join(1, mcast(1), JoinState(0x9)));
    assert_eq!(ok(&h.leave(1, mcast(1), SEND_ONLY_FULL)).join_state, FULL);
    assert_eq!(h.sa.mlids_in_use(), 2);
}

// ------------------------------------------------------------------------------ member caps

/// A proxy join by `by` of the port `port` to `mgid` (ProxyJoin set).
fn proxy_join(h: &mut H, by: u8, port: Gid, mgid: Gid) -> SaMad {
    let mut r = rec(port, mgid, FULL);
    r.proxy_join = true;
    h.set(who(by), Cm::KERNEL_JOIN, r)
}

/// A spoofed PortGID: fd00::n.
fn spoofed(n: u32) -> Gid {
    let mut b = [0u8; 16];
    b[0] = 0xfd;
    b[12..].copy_from_slice(&n.to_be_bytes());
    Gid(b)
}

/// R-CAP-PORT: one requesting port's proxy joins (each with a new PortGID) stop at
/// `max_members_per_port` with NO_RESOURCES, counted; another host's join and leave go on as
/// before; a member that goes frees its maker's slot.
#[test]
fn a_flood_of_spoofed_proxy_joins_stops_at_the_port_cap() {
    let mut h = H::with(SaConfig { max_members_per_port: 100, ..SaConfig::roce() });
    for n in 0..100 {
        ok(&proxy_join(&mut h, 1, spoofed(n), mcast(n as u16 % 7)));
    }
    for n in 100..150 {
        assert_eq!(status(&proxy_join(&mut h, 1, spoofed(n), mcast(n as u16 % 7))), MadStatus::NO_RESOURCES);
    }
    assert_eq!(h.sa.stats().refused_members_port, 50);
    assert_eq!((h.sa.member_count(), h.sa.members_made_by(&host(1))), (100, 100));
    // Another host is not crowded out: its join and leave are answered as always.
    ok(&h.join(2, mcast(1), FULL));
    ok(&h.leave(2, mcast(1), FULL));
    // An existing member of the flooding port may still change its join state.
    let mut r = rec(spoofed(0), mcast(0), JoinState(0x3));
    r.proxy_join = true;
    assert_eq!(ok(&h.set(who(1), Cm::KERNEL_JOIN, r)).join_state, JoinState(0x3));
    // One member leaves (any port may leave a proxy member of its partition): a slot is free.
    h.delete(who(3), Cm::KERNEL_LEAVE, McMemberRecord::leave(mcast(5), spoofed(5), FULL));
    assert_eq!(h.sa.members_made_by(&host(1)), 99);
    ok(&proxy_join(&mut h, 1, spoofed(1000), mcast(1)));
    assert_eq!(status(&proxy_join(&mut h, 1, spoofed(1001), mcast(1))), MadStatus::NO_RESOURCES);
    assert_eq!(h.sa.stats().refused_members_port, 51);
    check_invariants(&h.sa);
}

/// R-CAP-GROUP and R-CAP-TOTAL: a group stops at `max_members_per_group`, all groups together
/// at `max_members`; each refusal is NO_RESOURCES counted by its reason, and joins that add no
/// member (a known port adding a bit) are not refused.
#[test]
fn group_and_total_caps_refuse_new_members_only() {
    let mut h = H::with(SaConfig { max_members_per_group: 3, max_members: 5, ..SaConfig::roce() });
    for n in 1..=3 {
        ok(&h.join(n, mcast(1), FULL));
    }
    assert_eq!(status(&h.join(4, mcast(1), FULL)), MadStatus::NO_RESOURCES);
    assert_eq!(h.sa.stats().refused_members_group, 1);
    assert_eq!(ok(&h.join(3, mcast(1), JoinState(0x3))).join_state, JoinState(0x3));
    ok(&h.join(4, mcast(2), FULL));
    ok(&h.join(5, mcast(2), FULL));
    // five members: a sixth, in any group (a new one too), is refused
    assert_eq!(status(&h.join(6, mcast(2), FULL)), MadStatus::NO_RESOURCES);
    assert_eq!(status(&h.join(6, mcast(3), FULL)), MadStatus::NO_RESOURCES);
    assert_eq!(h.sa.stats().refused_members_total, 2);
    assert_eq!((h.sa.group_count(), h.sa.mlids_in_use()), (2, 2), "a refused create leaves nothing behind");
    // the group goes with its last full member: its members' slots come back
    ok(&h.leave(4, mcast(2), FULL));
    ok(&h.leave(5, mcast(2), FULL));
    ok(&h.join(6, mcast(3), FULL));
    check_invariants(&h.sa);
}

/// R-CAP-DEFAULT: the default caps hold 100,000 legitimate members (100 hosts in 1,000
/// groups each), refusing none, and the accounting empties with the groups.
#[test]
fn default_caps_hold_100_000_members() {
    let mut h = H::new();
    for g in 0..1000u16 {
        for n in 1..=100u8 {
            let m = h.mad(Method::Set, Cm::KERNEL_JOIN, rec(host(n), mcast(g), FULL));
            let reply = h.sa.handle_mad(who(n), &m.to_bytes());
            assert_eq!(SaMad::parse(&reply[0]).unwrap().header.status, MadStatus::SUCCESS);
        }
    }
    let s = *h.sa.stats();
    assert_eq!((h.sa.member_count(), h.sa.group_count()), (100_000, 1000));
    assert_eq!((s.refused_members_total, s.refused_members_group, s.refused_members_port), (0, 0, 0));
    assert_eq!(h.sa.members_made_by(&host(7)), 1000);
    for g in 0..1000u16 {
        for n in 1..=100u8 {
            ok(&h.leave(n, mcast(g), FULL));
        }
    }
    assert_eq!((h.sa.member_count(), h.sa.mlids_in_use(), h.sa.members_made_by(&host(7))), (0, 0, 0));
}

/// The caps are checked with the rest of the configuration.
#[test]
fn a_zero_member_cap_is_refused() {
    for cfg in [
        SaConfig { max_members: 0, ..SaConfig::roce() },
        SaConfig { max_members_per_group: 0, ..SaConfig::roce() },
        SaConfig { max_members_per_port: 0, ..SaConfig::roce() },
    ] {
        let e = SaResponder::new(cfg).unwrap_err();
        assert!(matches!(e, ConfigError::MemberCap { value: 0, .. }), "{e}");
    }
}

// ------------------------------------------------------------------------------ duplicates

/// R-DUP: the same request (TID, requester) again is answered from the cache, not applied
/// twice; another requester with the same TID is a new request.
#[test]
fn duplicate_requests_answered_from_cache() {
    let mut h = H::new();
    let join = h.mad(Method::Set, Cm::KERNEL_JOIN, rec(host(1), mcast(1), FULL));
    let a = h.sa.handle_mad(who(1), &join.to_bytes());
    let b = h.sa.handle_mad(who(1), &join.to_bytes());
    assert_eq!(a, b);
    assert_eq!(h.sa.stats().duplicates, 1);
    assert_eq!(h.sa.stats().joins, 1);

    let leave = h.mad(Method::Delete, Cm::KERNEL_LEAVE, McMemberRecord::leave(mcast(1), host(1), FULL));
    let first = h.sa.handle_mad(who(1), &leave.to_bytes());
    assert_eq!(SaMad::parse(&first[0]).unwrap().header.status, MadStatus::SUCCESS);
    // applied once: the group is gone, yet the retransmission gets the same success
    let again = h.sa.handle_mad(who(1), &leave.to_bytes());
    assert_eq!(first, again);
    assert_eq!(h.sa.stats().leaves, 1);
    // another requester (other QP) with the same TID is processed
    let other = h.sa.handle_mad(Requester::new(host(1), 2), &leave.to_bytes());
    assert_eq!(SaMad::parse(&other[0]).unwrap().header.status, MadStatus::REQ_INVALID);
    // the same TID with other bytes is a new request
    let mut changed = leave;
    changed.data = SaData::mc_member(McMemberRecord::leave(mcast(2), host(1), FULL));
    let r = h.sa.handle_mad(who(1), &changed.to_bytes());
    assert_eq!(SaMad::parse(&r[0]).unwrap().mc_member().unwrap().mgid, mcast(2));

    // the cache is bounded
    let mut h = H::with(SaConfig { dup_cache_size: 4, ..SaConfig::roce() });
    for i in 0..10 {
        h.join(1, mcast(i), FULL);
    }
    assert_eq!(h.sa.cached_replies(), 4);
    // disabled: a retransmitted leave is applied again and fails
    let mut h = H::with(SaConfig { dup_cache_size: 0, ..SaConfig::roce() });
    h.join(1, mcast(1), FULL);
    let leave = h.mad(Method::Delete, Cm::KERNEL_LEAVE, McMemberRecord::leave(mcast(1), host(1), FULL));
    assert_eq!(status(&h.one(who(1), &leave)), MadStatus::SUCCESS);
    assert_eq!(status(&h.one(who(1), &leave)), MadStatus::REQ_INVALID);
}

// ------------------------------------------------------------------------------ drops

/// R-RESP: a response (R bit, or TrapRepress) is never answered.
#[test]
fn never_answers_a_response() {
    let mut h = H::new();
    let join = h.mad(Method::Set, Cm::KERNEL_JOIN, rec(host(1), mcast(1), FULL));
    let resp = h.one(who(1), &join);
    // the SA's own answer fed back, and every response method
    assert!(h.sa.handle_mad(who(1), &resp.to_bytes()).is_empty());
    for method in [Method::Get, Method::Set, Method::GetTable, Method::Delete, Method::Report] {
        let mut m = h.mad(method, Cm::KERNEL_JOIN, rec(host(1), mcast(1), FULL));
        m.header.response = true;
        assert!(h.sa.handle_mad(who(1), &m.to_bytes()).is_empty(), "{method:?}");
    }
    // an RMPP ACK of a GetTableResp
    let mut ack = h.mad(Method::GetTable, Cm::NONE, McMemberRecord::default());
    ack.header.response = true;
    ack.rmpp = RmppRepr {
        version: 1,
        rmpp_type: RmppType::Ack,
        flags: RmppFlags::ACTIVE,
        data1: 1,
        data2: 1,
        ..RmppRepr::default()
    };
    assert!(h.sa.handle_mad(who(1), &ack.to_bytes()).is_empty());
    let m = h.mad(Method::TrapRepress, Cm::NONE, McMemberRecord::default());
    assert!(h.sa.handle_mad(who(1), &m.to_bytes()).is_empty());
    assert_eq!(h.sa.stats().dropped_response, 8);
    assert_eq!(h.sa.group_count(), 1);
}

/// R-DROP: short MADs, base version ≠ 1, other classes, a wrong SM_Key and multi-segment RMPP
/// requests are dropped, each counted.
#[test]
fn dropped_mads_are_counted() {
    let mut h = H::new();
    let good = h.mad(Method::Get, Cm::NONE, McMemberRecord::default()).to_bytes();
    assert!(h.sa.handle_mad(who(1), &good[..255]).is_empty());
    let mut b = good;
    b[0] = 2;
    assert!(h.sa.handle_mad(who(1), &b).is_empty());
    let mut b = good;
    b[1] = MgmtClass::ComMgmt.into();
    assert!(h.sa.handle_mad(who(1), &b).is_empty());
    let mut m = SaMad::parse(&good).unwrap();
    m.sa.sm_key = 0x1234;
    assert!(h.sa.handle_mad(who(1), &m.to_bytes()).is_empty());
    m.sa.sm_key = 1; // the SA key: trusted, answered
    assert_eq!(h.sa.handle_mad(who(1), &m.to_bytes()).len(), 1);
    let mut m = SaMad::parse(&good).unwrap();
    m.rmpp = RmppRepr {
        version: 1,
        rmpp_type: RmppType::Data,
        flags: RmppFlags::ACTIVE | RmppFlags::FIRST,
        data1: 1,
        data2: 400,
        ..RmppRepr::default()
    };
    assert!(h.sa.handle_mad(who(1), &m.to_bytes()).is_empty());
    m.rmpp.flags = RmppFlags::ACTIVE | RmppFlags::FIRST | RmppFlags::LAST; // one segment: fine
    assert_eq!(h.sa.handle_mad(who(1), &m.to_bytes()).len(), 1);
    let s = h.sa.stats();
    assert_eq!(
        (s.dropped_short, s.dropped_base_version, s.dropped_not_sa, s.dropped_sm_key, s.dropped_rmpp),
        (1, 1, 1, 1, 1)
    );
    assert_eq!((s.received, s.answered), (7, 2));
}

// ------------------------------------------------------------------------------ 0x000C

/// R-UNSUP: unsupported method/attribute combinations and a bad class version are answered
/// 0x000C with the request echoed (Set → GetResp, others → method | R).
#[test]
fn unsupported_combinations() {
    let mut h = H::new();
    let cases = [
        (Method::GetMulti, attr::MC_MEMBER_RECORD, 0x94),
        (Method::GetTraceTable, attr::MC_MEMBER_RECORD, 0x93),
        (Method::Send, attr::MC_MEMBER_RECORD, 0x83),
        (Method::Get, attr::PATH_RECORD, 0x81),
        (Method::GetMulti, attr::SERVICE_RECORD, 0x94), // ServiceRecord: only Set, Get, GetTable, Delete
        (Method::Set, attr::CLASS_PORT_INFO, 0x81),
        (Method::GetTable, attr::CLASS_PORT_INFO, 0x92),
        (Method::Delete, attr::CLASS_PORT_INFO, 0x95),
    ];
    for (method, attribute, byte) in cases {
        let m = SaMad::request(method, 77, attribute, 0x3, SaData::mc_member(rec(host(1), mcast(1), FULL)));
        let r = h.one(who(1), &m);
        let b = r.to_bytes();
        assert_eq!((b[3], r.header.status), (byte, MadStatus::UNSUPPORTED_METHOD_ATTR), "{method:?} {attribute:#x}");
        assert_eq!(&b[56..], &m.to_bytes()[56..]); // the request data echoed
    }
    for method in [Method::Get, Method::Set, Method::Delete] {
        let mut m = h.mad(method, Cm::KERNEL_JOIN, rec(host(1), mcast(1), FULL));
        m.header.class_version = 1;
        assert_eq!(status(&h.one(who(1), &m)), MadStatus::UNSUPPORTED_METHOD_ATTR);
    }
    assert_eq!(h.sa.group_count(), 0);
}

/// R-ERR-ECHO: error answers are the request MAD with status, method and SM_Key changed
/// (osm_sa_send_error); AttributeOffset 0 for GetTable.
#[test]
fn errors_echo_the_request() {
    let mut h = H::new();
    let mut m = h.mad(Method::Set, Cm::OPENSM_JOIN_REQUIRED, rec(host(1), mcast(1), FULL));
    m.header.attribute_modifier = 0xABCD;
    m.sa.sm_key = 1;
    let req = m.to_bytes();
    let resp = h.sa.handle_mad(who(1), &req)[0];
    assert_eq!(&resp[..3], &req[..3]);
    assert_eq!(resp[3], 0x81);
    assert_eq!(&resp[4..6], &[0x06, 0x00]); // INSUF_COMPS: create mask missing
    assert_eq!(&resp[6..36], &req[6..36]);
    assert_eq!(&resp[36..44], &[0; 8]); // SM_Key 0 (C15-0.1.5)
    assert_eq!(&resp[44..], &req[44..]);
}

// ------------------------------------------------------------------------------ ClassPortInfo

/// R-CPI: Get(ClassPortInfo) answers OpenSM's fields with the configured capabilities,
/// CapabilityMask2 bit 12 (send-only full member) included; AttributeOffset 9.
#[test]
fn class_port_info() {
    let mut h = H::new();
    let m = SaMad::request(Method::Get, 5, attr::CLASS_PORT_INFO, 0, SaData::zeroed());
    let r = h.one(who(1), &m);
    assert_eq!((r.header.status, r.to_bytes()[3], r.sa.attribute_offset), (MadStatus::SUCCESS, 0x81, 9));
    let cpi = r.data.as_class_port_info().unwrap();
    assert_eq!((cpi.base_version, cpi.class_version), (1, 2));
    assert_eq!(cpi.capability_mask, roce_wire::class_port_info::cap::SA_UD_MULTICAST);
    assert!(cpi.sendonly_full_member_supported());
    assert_eq!(cpi.capability_mask2() & (1 << 12), 1 << 12);
    assert_eq!(cpi.resp_time_value(), 16);
    assert_eq!((cpi.redirect_qpn(), cpi.redirect_qkey, cpi.trap_qkey), (1, 0x8001_0000, 0x8001_0000));
    let mut h = H::with(SaConfig { capability_mask2: 0, resp_time_value: 20, ..SaConfig::roce() });
    let r = h.one(who(1), &m);
    let cpi = r.data.as_class_port_info().unwrap();
    assert!(!cpi.sendonly_full_member_supported());
    assert_eq!(cpi.resp_time_value(), 20);
}

// ------------------------------------------------------------------------------ Get / GetTable

/// R-GET: one match → GetResp with the group record (PortGID, JoinState, ProxyJoin zeroed for
/// an untrusted requester); none → 0x0300; more than one → 0x0400 (C15-0.1.30).
#[test]
fn get_one_none_many() {
    let mut h = H::new();
    ok(&h.join(1, mcast(1), FULL));
    ok(&h.join(2, mcast(2), FULL));
    let r = h.query(who(3), Method::Get, 0, Cm::MGID, McMemberRecord { mgid: mcast(1), ..Default::default() });
    let got = ok(&r[0]);
    assert_eq!(
        (got.mgid, got.mlid, got.q_key, got.port_gid, got.join_state),
        (mcast(1), 0xC000, QKEY, Gid::ZERO, JoinState::NONE)
    );
    assert_eq!(r[0].sa.attribute_offset, 7);
    let r = h.query(who(3), Method::Get, 0, Cm::MGID, McMemberRecord { mgid: mcast(3), ..Default::default() });
    assert_eq!(status(&r[0]), MadStatus::NO_RECORDS);
    let r = h.query(who(3), Method::Get, 0, Cm::NONE, McMemberRecord::default());
    assert_eq!(status(&r[0]), MadStatus::TOO_MANY_RECORDS);
    let r = h.query(who(3), Method::Get, 0, Cm::MLID, McMemberRecord { mlid: 0xC001, ..Default::default() });
    assert_eq!(ok(&r[0]).mgid, mcast(2));
    assert_eq!(h.sa.stats().queries, 4);
}

/// R-GET-MATCH: components in the mask filter groups as in mcmr_by_comp_mask; PortGID selects
/// the member; a trusted requester (SM_Key = the SA key) sees PortGID, JoinState, ProxyJoin
/// and, without PortGID, one record per member; the requester's partition filters groups.
#[test]
fn query_matching_and_trust() {
    let mut h = H::new();
    ok(&h.join(1, mcast(1), FULL));
    ok(&h.join(2, mcast(1), NON));
    ok(&h.set(
        who(3).with_pkey(0x8003),
        Cm::KERNEL_JOIN,
        McMemberRecord { p_key: 0x8003, ..rec(host(3), mcast(2), FULL) },
    ));
    let all = |h: &mut H, from: Requester, key: u64, mask: Cm, r: McMemberRecord| -> Vec<McMemberRecord> {
        let segs = h.query(from, Method::GetTable, key, mask, r);
        records_of(&segs)
    };
    // untrusted, no mask: one record per group the requester's partition can see
    let r = all(&mut h, who(9), 0, Cm::NONE, McMemberRecord::default());
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].mgid, r[0].port_gid), (mcast(1), Gid::ZERO));
    let r = all(&mut h, who(9).with_pkey(0x0003), 0, Cm::NONE, McMemberRecord::default());
    assert_eq!(r.iter().map(|r| r.mgid).collect::<Vec<_>>(), [mcast(2)]);
    // trusted: a record per member
    let r = all(&mut h, who(9), 1, Cm::NONE, McMemberRecord::default());
    assert_eq!(r.iter().map(|r| (r.port_gid, r.join_state)).collect::<Vec<_>>(), [(host(1), FULL), (host(2), NON)]);
    // trusted, JoinState in the mask filters the members
    let r = all(&mut h, who(9), 1, Cm::JOIN_STATE, McMemberRecord { join_state: NON, ..Default::default() });
    assert_eq!(r.iter().map(|r| r.port_gid).collect::<Vec<_>>(), [host(2)]);
    // PortGID selects the member (trusted keeps its fields, untrusted zeroes them)
    let q = McMemberRecord { port_gid: host(2), ..Default::default() };
    let r = all(&mut h, who(9), 1, Cm::PORT_GID, q);
    assert_eq!((r.len(), r[0].port_gid, r[0].join_state), (1, host(2), NON));
    let r = all(&mut h, who(9), 0, Cm::PORT_GID, q);
    assert_eq!((r.len(), r[0].port_gid, r[0].join_state), (1, Gid::ZERO, JoinState::NONE));
    // other components: Q_Key mismatch, selectors
    assert!(all(&mut h, who(9), 0, Cm::Q_KEY, McMemberRecord { q_key: 5, ..Default::default() }).is_empty());
    let q = McMemberRecord { mtu_selector: Selector::GreaterThan, mtu: 3, ..Default::default() };
    assert!(all(&mut h, who(9), 0, Cm::MTU_SELECTOR, q).is_empty());
    let q = McMemberRecord { mtu_selector: Selector::Exactly, mtu: 3, ..Default::default() };
    assert_eq!(all(&mut h, who(9), 0, Cm::MTU_SELECTOR | Cm::MTU, q).len(), 1);
}

/// Reassemble the records of a GetTableResp from its segments.
fn records_of(segments: &[SaMad]) -> Vec<McMemberRecord> {
    let mut stream = Vec::new();
    for s in segments {
        assert_eq!(s.header.status, MadStatus::SUCCESS);
        stream.extend_from_slice(&s.data.to_bytes());
    }
    let total = segments[0].rmpp.data2 as usize - 20 * segments.len();
    if total == 0 {
        return Vec::new();
    }
    assert_eq!(segments[0].sa.attribute_offset, 7);
    stream[..total].chunks(56).map(|c| McMemberRecord::parse_bytes(c).unwrap()).collect()
}

/// R-TABLE: GetTableResp 0x92, RMPP version 1, DATA, Active|First|Last for a single segment,
/// PayloadLength 20 + 56 × records, AttributeOffset 7, records at 56-byte strides, sorted by
/// MGID; an empty table is a success with AttributeOffset 0.
#[test]
fn get_table_single_segment() {
    let mut h = H::new();
    for i in [3, 1, 2] {
        ok(&h.join(1, mcast(i), FULL));
    }
    let segs = h.query(who(1), Method::GetTable, 0, Cm::NONE, McMemberRecord::default());
    assert_eq!(segs.len(), 1);
    let s = &segs[0];
    let b = s.to_bytes();
    assert_eq!(b[3], 0x92);
    assert_eq!((s.rmpp.version, s.rmpp.rmpp_type), (1, RmppType::Data));
    assert_eq!(s.rmpp.flags, RmppFlags::ACTIVE | RmppFlags::FIRST | RmppFlags::LAST);
    assert_eq!((s.rmpp.data1, s.rmpp.data2), (1, 20 + 3 * 56));
    assert_eq!(s.sa.attribute_offset, 7);
    for (i, want) in [mcast(1), mcast(2), mcast(3)].iter().enumerate() {
        let r = McMemberRecord::parse_bytes(&b[56 + i * 56..]).unwrap();
        assert_eq!(r.mgid, *want);
        assert_eq!(&b[56 + i * 56 + 52..56 + i * 56 + 56], &[0; 4]); // the pad
    }
    // empty
    let segs = h.query(who(1), Method::GetTable, 0, Cm::MGID, McMemberRecord { mgid: mcast(9), ..Default::default() });
    assert_eq!(segs.len(), 1);
    assert_eq!((segs[0].header.status, segs[0].sa.attribute_offset, segs[0].rmpp.data2), (MadStatus::SUCCESS, 0, 20));
    assert!(records_of(&segs).is_empty());
}

/// R-TABLE-RMPP: a table larger than one MAD is sent as RMPP DATA segments 1..n, First on the
/// first, Last on the last, PayloadLength total/last/0; every segment repeats the headers.
#[test]
fn get_table_rmpp_segments() {
    let mut h = H::new();
    for i in 0..20 {
        ok(&h.join(1, mcast(i), FULL));
        ok(&h.join(2, mcast(i), NON));
    }
    // trusted: 40 records, 2240 bytes, 12 segments
    let segs = h.query(who(1), Method::GetTable, 1, Cm::NONE, McMemberRecord::default());
    assert_eq!(segs.len(), 12);
    let tid = segs[0].header.transaction_id;
    for (i, s) in segs.iter().enumerate() {
        assert_eq!(s.header.transaction_id, tid);
        assert_eq!(s.to_bytes()[3], 0x92);
        assert_eq!(s.sa.attribute_offset, 7);
        assert_eq!(s.rmpp.data1, i as u32 + 1);
        assert_eq!(s.rmpp.rmpp_type, RmppType::Data);
        let mut f = RmppFlags::ACTIVE;
        if i == 0 {
            f |= RmppFlags::FIRST;
        }
        if i == 11 {
            f |= RmppFlags::LAST;
        }
        assert_eq!(s.rmpp.flags, f);
        let want = match i {
            0 => 2240 + 20 * 12,
            11 => 20 + (2240 - 11 * 200),
            _ => 0,
        };
        assert_eq!(s.rmpp.data2, want as u32, "segment {i}");
    }
    let r = records_of(&segs);
    assert_eq!(r.len(), 40);
    assert_eq!(r[0].mgid, mcast(0));
    assert_eq!((r[0].port_gid, r[1].port_gid, r[1].join_state), (host(1), host(2), NON));
    assert_eq!(r[39].mgid, mcast(19));
    assert!(r.windows(2).all(|w| w[0].mgid <= w[1].mgid));
}

// ------------------------------------------------------------------------------ misc

#[test]
fn config_validation() {
    assert!(SaConfig::roce().validate().is_ok());
    assert!(SaConfig::infiniband(0xFE80 << 48).validate().is_ok());
    let bad = [
        SaConfig { mlid_start: 0xBFFF, ..SaConfig::roce() },
        SaConfig { mlid_count: 0, ..SaConfig::roce() },
        SaConfig { mlid_start: 0xC001, ..SaConfig::roce() }, // runs past 0xFFFE
        SaConfig { mtu: 6, ..SaConfig::roce() },
        SaConfig { rate: 1, ..SaConfig::roce() },
        SaConfig { packet_life: 64, ..SaConfig::roce() },
        SaConfig { resp_time_value: 32, ..SaConfig::roce() },
    ];
    for c in bad {
        let e = SaResponder::new(c).unwrap_err();
        assert!(!e.to_string().is_empty());
    }
}

#[test]
fn reply_api_and_memory() {
    let mut h = H::new();
    let m = h.mad(Method::Set, Cm::KERNEL_JOIN, rec(host(1), mcast(1), FULL));
    let r = h.sa.handle_mad(who(1), &m.to_bytes());
    assert_eq!((r.len(), r.iter().count(), (&r).into_iter().count()), (1, 1, 1));
    assert_eq!(r.clone().into_vec().len(), 1);
    assert_eq!(Vec::from(r.clone()), r.as_slice().to_vec());
    assert_eq!(r.into_iter().count(), 1);
    assert!(Reply::None.is_empty() && Reply::default().first().is_none());
    let before = h.sa.memory_usage();
    for i in 0..1000 {
        h.join(1, mcast(i), FULL);
    }
    let after = h.sa.memory_usage();
    assert!(after.group_table > before.group_table && after.members > before.members);
    assert_eq!(
        after.total(),
        after.group_table + after.members + after.mlid_pool + after.dup_cache + after.member_makers
    );
    assert!(after.member_makers > 0, "the per-port member count is heap too");
    assert_eq!(h.sa.mlids().next(), Some(0xC000));
}

// ------------------------------------------------------------------------------ properties

#[derive(Debug, Clone)]
struct Op {
    from: u8,
    port: u8,
    proxy: bool,
    mgid: u16,
    delete: bool,
    js: u8,
    mask: u8,
}

fn arb_op() -> impl Strategy<Value = Op> {
    (0u8..3, 0u8..3, any::<bool>(), 0u16..4, any::<bool>(), 0u8..16, 0u8..4)
        .prop_map(|(from, port, proxy, mgid, delete, js, mask)| Op { from, port, proxy, mgid, delete, js, mask })
}

fn apply(h: &mut H, op: &Op) -> MadStatus {
    let mask = match op.mask {
        0 => Cm::KERNEL_JOIN,
        1 => Cm::OPENSM_JOIN_REQUIRED,
        2 => Cm::IPOIB_JOIN,
        _ => Cm(Cm::KERNEL_JOIN.0 & !Cm::JOIN_STATE.0),
    };
    let mut r = rec(host(op.port + 1), mcast(op.mgid), JoinState(op.js));
    r.proxy_join = op.proxy;
    let m = h.mad(if op.delete { Method::Delete } else { Method::Set }, mask, r);
    status(&h.one(who(op.from + 1), &m))
}

/// Leave every membership as its port, then check that nothing is left.
fn leave_all(h: &mut H) {
    let mut todo: Vec<(Gid, Gid, JoinState)> =
        h.sa.groups().flat_map(|g| g.members().iter().map(move |m| (g.mgid(), m.port_gid(), m.join_state()))).collect();
    todo.sort();
    for (mgid, port, js) in todo {
        if h.sa.join_state(&mgid, &port).is_none() {
            continue; // went with its group
        }
        let s = status(&h.delete(Requester::new(port, 1), Cm::KERNEL_LEAVE, McMemberRecord::leave(mgid, port, js)));
        assert_eq!(s, MadStatus::SUCCESS);
        check_invariants(&h.sa);
    }
    assert_eq!((h.sa.group_count(), h.sa.member_count(), h.sa.mlids_in_use()), (0, 0, 0));
    assert_eq!(ok(&h.join(1, mcast(500), FULL)).mlid, 0xC000);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Random Set/Delete sequences from three requesters on four groups keep the invariants:
    /// every group has a member (and a full one), every member a non-empty join state, MLIDs
    /// unique; answers are GetResp/DeleteResp with known statuses; leaving everything frees
    /// every MLID.
    #[test]
    fn random_set_delete_keep_invariants(ops in proptest::collection::vec(arb_op(), 1..80)) {
        let mut h = H::new();
        for op in &ops {
            let s = apply(&mut h, op);
            prop_assert!(
                [MadStatus::SUCCESS, MadStatus::REQ_INVALID, MadStatus::INSUF_COMPS].contains(&s),
                "status {} for {:?}", s, op
            );
            check_invariants(&h.sa);
        }
        leave_all(&mut h);
    }

    /// The same with MLID sharing and a tiny MLID space.
    #[test]
    fn random_ops_with_shared_mlids(ops in proptest::collection::vec(arb_op(), 1..60)) {
        let mut h = H::with(SaConfig { mlid_count: 2, share_mlids: true, ..SaConfig::roce() });
        for op in &ops {
            apply(&mut h, op);
            check_invariants(&h.sa);
            let total: u32 = h.sa.mlids().map(|m| h.sa.mlid_group_count(m)).sum();
            prop_assert_eq!(total as usize, h.sa.group_count());
        }
        leave_all(&mut h);
    }

    /// Arbitrary bytes (as an SA MAD or not) never panic and never break the invariants.
    #[test]
    fn arbitrary_mads(bytes in proptest::collection::vec(any::<u8>(), 200..300), sa in any::<bool>(), method in 0u8..0x16) {
        let mut h = H::new();
        h.join(1, mcast(1), FULL);
        let mut b = bytes;
        if sa && b.len() >= 256 {
            b[0] = 1;
            b[1] = 3;
            b[2] = 2;
            b[3] = method;
            b[16..18].copy_from_slice(&attr::MC_MEMBER_RECORD.to_be_bytes());
        }
        let r = h.sa.handle_mad(who(1), &b);
        prop_assert!(r.len() <= 1 || b[3] == Method::GetTable.into());
        check_invariants(&h.sa);
    }
}

// --------------------------------------------------------------------------- member lifetime

/// R-EXPIRE-OFF: without a member lifetime (the default, as OpenSM) members stay however long
/// the clock runs.
#[test]
fn members_never_expire_by_default() {
    let mut h = H::new();
    assert_eq!(SaConfig::roce().member_lifetime, None);
    ok(&h.join(1, mcast(1), FULL));
    h.sa.handle_time(std::time::Duration::from_secs(10 * 365 * 86_400));
    assert_eq!((h.sa.member_count(), h.sa.stats().members_expired), (1, 0));
    assert_eq!(h.sa.next_expiry(), None);
}

/// R-EXPIRE: with a member lifetime, a member that has not joined again within it goes as if
/// its port had gone (all its bits at once), never before the lifetime and within 2 s after;
/// a join renews it; a group goes with its last full member, its non-members and MLID too
/// [osm_drop_mgr.c `drop_mgr_remove_port`, osm_multicast.c `osm_mgrp_delete_port`].
#[test]
fn members_expire_after_their_lifetime_unless_renewed() {
    use std::time::Duration;
    let secs = Duration::from_secs;
    let mut h = H::with(SaConfig { member_lifetime: Some(secs(30)), ..SaConfig::roce() });
    h.sa.handle_time(secs(100));
    ok(&h.join(1, mcast(1), FULL)); // expires at 130..132
    ok(&h.join(2, mcast(1), FULL)); // renewed below
    ok(&h.join(3, mcast(1), NON)); // goes with the group's last full member
    ok(&h.join(4, mcast(2), JoinState(0x9))); // a group of its own
    assert_eq!(h.sa.next_expiry(), Some(secs(101)));
    h.sa.handle_time(Duration::from_millis(115_500));
    ok(&h.join(2, mcast(1), FULL)); // renewed at 115
    ok(&h.join(3, mcast(1), NON));
    h.sa.handle_time(Duration::from_millis(129_999));
    assert_eq!(h.sa.member_count(), 4, "nothing goes before its lifetime");
    h.sa.handle_time(secs(132));
    assert_eq!(h.sa.join_state(&mcast(1), &host(1)), None);
    assert_eq!(h.sa.join_state(&mcast(2), &host(4)), None);
    assert_eq!(h.sa.join_state(&mcast(1), &host(2)), Some(FULL));
    assert_eq!(h.sa.join_state(&mcast(1), &host(3)), Some(NON));
    assert_eq!((h.sa.group_count(), h.sa.mlids_in_use()), (1, 1));
    assert_eq!(h.sa.stats().members_expired, 2);
    check_invariants(&h.sa);
    h.sa.handle_time(secs(140));
    ok(&h.join(3, mcast(1), NON)); // renewed until 170
                                   // The last full member's time comes: the group goes, with its non-member (whose own
                                   // lifetime has not run out) and its MLID.
    h.sa.handle_time(secs(147));
    assert_eq!((h.sa.group_count(), h.sa.member_count(), h.sa.mlids_in_use()), (0, 0, 0));
    let s = *h.sa.stats();
    assert_eq!((s.members_expired, s.groups_deleted), (4, 2));
    check_invariants(&h.sa);
    // The slots and MLIDs are free again: a new join works, and expired members' makers
    // count none.
    assert_eq!(h.sa.members_made_by(&host(1)), 0);
    assert_eq!(ok(&h.join(1, mcast(1), FULL)).mlid, 0xC000);
}

/// An expired proxy flood frees its maker's cap: the port may join again.
#[test]
fn expired_members_free_their_makers_cap() {
    use std::time::Duration;
    let mut h = H::with(SaConfig {
        max_members_per_port: 10,
        member_lifetime: Some(Duration::from_secs(5)),
        ..SaConfig::roce()
    });
    for n in 0..15 {
        proxy_join(&mut h, 1, spoofed(n), mcast(n as u16 % 3));
    }
    assert_eq!((h.sa.members_made_by(&host(1)), h.sa.stats().refused_members_port), (10, 5));
    h.sa.handle_time(Duration::from_secs(7));
    assert_eq!((h.sa.member_count(), h.sa.members_made_by(&host(1)), h.sa.group_count()), (0, 0, 0));
    ok(&proxy_join(&mut h, 1, spoofed(99), mcast(1)));
    check_invariants(&h.sa);
}

#[test]
fn a_zero_member_lifetime_is_refused() {
    use std::time::Duration;
    let e = SaResponder::new(SaConfig { member_lifetime: Some(Duration::from_millis(500)), ..SaConfig::roce() });
    assert_eq!(e.unwrap_err(), ConfigError::MemberLifetime(0));
    assert!(SaResponder::new(SaConfig { member_lifetime: Some(Duration::from_secs(1)), ..SaConfig::roce() }).is_ok());
}
