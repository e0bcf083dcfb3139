//! Engine tests on a minimal in-crate wire (cross-crate scenarios with the simulated link
//! and the real SA responder live in the workspace's tests/).

use core::time::Duration;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use roce_wire::mad::{MadStatus, Method};
use roce_wire::mcmember::{ComponentMask, JoinState};
use roce_wire::sa::{SaData, SaMad};
use roce_wire::{frame, MAD_SIZE};

use crate::*;

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const SA: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const GROUP: Ipv4Addr = Ipv4Addr::new(239, 1, 2, 3);

/// Two stacks on one wire: 0 is the host under test, 1 hosts a toy SA that answers every
/// Set with an MLID and every Delete with DeleteResp (unless `sa_silent`).
pub(crate) struct Wire {
    pub stacks: Vec<Stack>,
    pub now: Instant,
    pub frames: Vec<(usize, Vec<u8>)>,
    pub sa_silent: bool,
}

impl Wire {
    pub fn new(paths: MulticastPaths) -> Wire {
        let mut a = StackConfig::new([2, 0, 0, 0, 0, 1], A, 24);
        a.sa = Some(IpAddr::V4(SA));
        a.multicast_paths = paths;
        let b = StackConfig::new([2, 0, 0, 0, 0, 2], SA, 24);
        let mut sa = Stack::new(b);
        sa.register_mad_agent(0x03);
        Wire { stacks: vec![Stack::new(a), sa], now: Instant::ZERO, frames: Vec::new(), sa_silent: false }
    }

    fn answer_sa(&mut self) {
        while let Some(req) = self.stacks[1].poll_mad_request() {
            if self.sa_silent {
                continue;
            }
            let m = SaMad::parse(&req.mad).unwrap();
            let mut rec = *m.mc_member().unwrap();
            let resp = match m.header.method {
                Method::Set => {
                    rec.mlid = 0xC001;
                    m.response_to(Method::Get, MadStatus(0), SaData::mc_member(rec))
                }
                Method::Delete => m.response_to(Method::Delete, MadStatus(0), SaData::mc_member(rec)),
                _ => m.response_to(Method::Get, MadStatus::UNSUPPORTED_METHOD_ATTR, m.data),
            };
            self.stacks[1].send_mad(req.src, req.src_qp, &resp.to_bytes());
        }
    }

    /// Move frames until nothing moves, advancing time to the next timer; bounded.
    pub fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        let mut buf = vec![0u8; 9000];
        for _ in 0..100_000 {
            let mut moved = false;
            for i in 0..self.stacks.len() {
                while let Some(n) = self.stacks[i].poll_transmit(self.now, &mut buf) {
                    let f = buf[..n].to_vec();
                    self.frames.push((i, f.clone()));
                    for j in 0..self.stacks.len() {
                        if j != i {
                            self.stacks[j].handle_frame(self.now, &f);
                        }
                    }
                    moved = true;
                }
            }
            self.answer_sa();
            if moved {
                continue;
            }
            let next = self.stacks.iter().filter_map(|s| s.poll_timeout()).min();
            match next {
                Some(t) if t <= self.now => {
                    for s in &mut self.stacks {
                        s.handle_timeout(self.now);
                    }
                }
                Some(t) if t <= end => {
                    self.now = t;
                    for s in &mut self.stacks {
                        s.handle_timeout(self.now);
                    }
                }
                _ => {
                    self.now = end;
                    return;
                }
            }
        }
        panic!("livelock");
    }

    pub fn events(&mut self, i: usize) -> Vec<CmEvent> {
        std::iter::from_fn(|| self.stacks[i].poll_event()).collect()
    }

    /// The SA MADs stack `i` sent, in order.
    pub fn sa_mads(&self, i: usize) -> Vec<SaMad> {
        self.frames
            .iter()
            .filter(|(s, _)| *s == i)
            .filter_map(|(_, f)| frame::parse(f).ok().map(|p| p.repr.payload.to_vec()))
            .filter(|p| p.len() == MAD_SIZE && p[1] == 0x03)
            .filter_map(|p| SaMad::parse(&p).ok())
            .collect()
    }
}

fn bound_id(w: &mut Wire, ps: PortSpace) -> CmId {
    let s = &mut w.stacks[0];
    let id = s.create_id(ps, QpType::Ud).unwrap();
    s.bind_addr(id, SocketAddr::new(IpAddr::V4(A), 0)).unwrap();
    id
}

#[test]
fn join_and_leave_put_set_and_delete_on_the_wire() {
    let mut w = Wire::new(MulticastPaths::BOTH);
    let id = bound_id(&mut w, PortSpace::Udp);
    let now = w.now;
    w.stacks[0].join_multicast(now, id, IpAddr::V4(GROUP), JoinState::FULL_MEMBER).unwrap();
    w.run_for(Duration::from_millis(100));
    let ev = w.events(0);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0].kind, EventKind::MulticastJoin);
    let EventParam::Multicast { record: Some(rec), ud: Some(ud), .. } = &ev[0].param else { panic!() };
    assert_eq!(rec.mlid, 0xC001);
    assert_eq!(ud.qp_num, 0xFF_FFFF);
    assert_eq!(ud.qkey, 0x0123_4567);
    let now = w.now;
    w.stacks[0].leave_multicast(now, id, IpAddr::V4(GROUP)).unwrap();
    w.run_for(Duration::from_millis(100));
    let ev = w.events(0);
    assert_eq!(ev.iter().map(|e| e.kind).collect::<Vec<_>>(), vec![EventKind::MulticastLeft]);
    let mads = w.sa_mads(0);
    assert_eq!(mads.len(), 2);
    assert_eq!(mads[0].header.method, Method::Set);
    assert_eq!(mads[0].sa.component_mask, ComponentMask::KERNEL_JOIN.0);
    assert_eq!(mads[1].header.method, Method::Delete);
    assert_eq!(mads[1].sa.component_mask, ComponentMask::KERNEL_LEAVE.0);
    let del = mads[1].mc_member().unwrap();
    assert_eq!(del.join_state, JoinState::FULL_MEMBER);
    assert_eq!(del.mlid, 0xC001, "the Delete carries the record the SA returned");
    assert_ne!(mads[0].header.transaction_id, mads[1].header.transaction_id);
    assert_eq!(w.stacks[0].groups().count(), 0);
    assert_eq!(w.stacks[0].sa_transactions(), 0);
    // Every frame decodes strictly, and the IGMP join and leave went out.
    let igmp = w.frames.iter().filter(|(s, f)| *s == 0 && f.len() > 23 && f[12..14] == [8, 0] && f[23] == 2).count();
    assert_eq!(igmp, 2, "IGMP join and leave (repeats come a second later)");
    assert_eq!(w.stacks[0].counters().total_dropped(), 0, "{:?}", w.stacks[0].counters());
}

#[test]
fn two_ids_one_group_one_set_and_one_delete() {
    let mut w = Wire::new(MulticastPaths::SA_ONLY);
    let a = bound_id(&mut w, PortSpace::Udp);
    let b = w.stacks[0].create_id(PortSpace::Udp, QpType::Ud).unwrap();
    w.stacks[0].bind_addr(b, SocketAddr::new(IpAddr::V4(A), 0)).unwrap();
    let now = w.now;
    w.stacks[0].join_multicast(now, a, IpAddr::V4(GROUP), JoinState::FULL_MEMBER).unwrap();
    w.stacks[0].join_multicast(now, b, IpAddr::V4(GROUP), JoinState::FULL_MEMBER).unwrap();
    w.run_for(Duration::from_millis(100));
    assert_eq!(w.events(0).iter().filter(|e| e.kind == EventKind::MulticastJoin).count(), 2);
    assert_eq!(w.sa_mads(0).len(), 1, "the second member is satisfied locally");
    let now = w.now;
    w.stacks[0].leave_multicast(now, a, IpAddr::V4(GROUP)).unwrap();
    w.run_for(Duration::from_millis(100));
    assert_eq!(w.sa_mads(0).len(), 1, "another FullMember remains: no Delete");
    let now = w.now;
    w.stacks[0].leave_multicast(now, b, IpAddr::V4(GROUP)).unwrap();
    w.run_for(Duration::from_millis(100));
    let mads = w.sa_mads(0);
    assert_eq!(mads.len(), 2);
    assert_eq!(mads[1].header.method, Method::Delete);
}

#[test]
fn unanswered_leave_is_retried_then_reported_without_blocking() {
    let mut w = Wire::new(MulticastPaths::SA_ONLY);
    let id = bound_id(&mut w, PortSpace::Udp);
    let now = w.now;
    w.stacks[0].join_multicast(now, id, IpAddr::V4(GROUP), JoinState::FULL_MEMBER).unwrap();
    w.run_for(Duration::from_millis(100));
    w.events(0);
    w.sa_silent = true;
    let now = w.now;
    w.stacks[0].leave_multicast(now, id, IpAddr::V4(GROUP)).unwrap();
    w.run_for(Duration::from_secs(20));
    let ev = w.events(0);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].kind, EventKind::MulticastError);
    assert_eq!(ev[0].status, Errno::ETIMEDOUT.status());
    let deletes = w.sa_mads(0).iter().filter(|m| m.header.method == Method::Delete).count();
    // 4 Delete queries (1 + 3 leave retries), each sent at 0, 0.5, …, 2.5 s (6 times).
    assert_eq!(deletes, 24);
    assert_eq!(w.stacks[0].sa_transactions(), 0);
    assert_eq!(w.stacks[0].groups().count(), 0);
    assert_eq!(w.stacks[0].pending_work(), 0);
}

#[test]
fn leave_before_the_set_is_answered_cancels_and_cleans_up() {
    let mut w = Wire::new(MulticastPaths::SA_ONLY);
    let id = bound_id(&mut w, PortSpace::Udp);
    let now = w.now;
    w.stacks[0].join_multicast(now, id, IpAddr::V4(GROUP), JoinState::FULL_MEMBER).unwrap();
    w.stacks[0].leave_multicast(now, id, IpAddr::V4(GROUP)).unwrap();
    w.run_for(Duration::from_millis(100));
    let kinds: Vec<_> = w.events(0).iter().map(|e| e.kind).collect();
    assert!(!kinds.contains(&EventKind::MulticastJoin), "{kinds:?}");
    assert!(kinds.contains(&EventKind::MulticastLeft), "{kinds:?}");
    // The Set was already queued; its success is undone by a Delete.
    let methods: Vec<_> = w.sa_mads(0).iter().map(|m| m.header.method).collect();
    assert_eq!(methods, vec![Method::Set, Method::Delete]);
    assert_eq!(w.stacks[0].groups().count(), 0);
}

#[test]
fn igmp_only_join_completes_locally() {
    let mut w = Wire::new(MulticastPaths::IGMP_MLD_ONLY);
    let id = bound_id(&mut w, PortSpace::Udp);
    let now = w.now;
    w.stacks[0].join_multicast(now, id, IpAddr::V4(GROUP), JoinState::FULL_MEMBER).unwrap();
    w.run_for(Duration::from_millis(10));
    let ev = w.events(0);
    assert_eq!(ev[0].kind, EventKind::MulticastJoin);
    assert!(w.sa_mads(0).is_empty());
}

#[test]
fn sa_timeout_on_join_is_multicast_error() {
    let mut w = Wire::new(MulticastPaths::SA_ONLY);
    w.sa_silent = true;
    let id = bound_id(&mut w, PortSpace::Udp);
    let now = w.now;
    w.stacks[0].join_multicast(now, id, IpAddr::V4(GROUP), JoinState::FULL_MEMBER).unwrap();
    w.run_for(Duration::from_secs(5));
    let ev = w.events(0);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].kind, EventKind::MulticastError);
    assert_eq!(ev[0].status, -110);
    assert_eq!(w.stacks[0].groups().count(), 0);
    assert_eq!(w.stacks[0].sa_transactions(), 0);
}

#[test]
fn resolve_addr_by_arp_and_route() {
    let mut w = Wire::new(MulticastPaths::BOTH);
    let s = &mut w.stacks[0];
    let id = s.create_id(PortSpace::Udp, QpType::Ud).unwrap();
    s.resolve_addr(Instant::ZERO, id, None, SocketAddr::new(IpAddr::V4(SA), 7174), Duration::from_secs(2)).unwrap();
    assert_eq!(s.state(id), Some(CmState::AddrQuery));
    w.run_for(Duration::from_millis(10));
    let ev = w.events(0);
    assert_eq!(ev[0].kind, EventKind::AddrResolved);
    let s = &mut w.stacks[0];
    assert_eq!(s.state(id), Some(CmState::AddrResolved));
    assert_eq!(s.id(id).unwrap().src.unwrap().ip(), IpAddr::V4(A));
    s.resolve_route(w.now, id, Duration::from_secs(1)).unwrap();
    assert_eq!(s.state(id), Some(CmState::RouteQuery));
    w.run_for(Duration::from_millis(1));
    assert_eq!(w.events(0)[0].kind, EventKind::RouteResolved);
    // An address nobody answers for: ADDR_ERROR with -ETIMEDOUT after the probes.
    let s = &mut w.stacks[0];
    let id2 = s.create_id(PortSpace::Udp, QpType::Ud).unwrap();
    s.resolve_addr(
        w.now,
        id2,
        None,
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 99)), 1),
        Duration::from_secs(10),
    )
    .unwrap();
    w.run_for(Duration::from_secs(5));
    let ev = w.events(0);
    assert_eq!((ev[0].kind, ev[0].status), (EventKind::AddrError, -110));
    assert_eq!(w.stacks[0].state(id2), Some(CmState::AddrBound));
}

#[test]
fn multicast_datagrams_reach_attached_qps_only_with_the_right_qkey() {
    let mut w = Wire::new(MulticastPaths::BOTH);
    // Receiver: stack 1 joins too (IGMP-only there: no SA of its own).
    let rid = w.stacks[1].create_id(PortSpace::Udp, QpType::Ud).unwrap();
    w.stacks[1].bind_addr(rid, SocketAddr::new(IpAddr::V4(SA), 0)).unwrap();
    let rqp = w.stacks[1].create_qp_for_id(rid).unwrap();
    w.stacks[1].join_multicast(Instant::ZERO, rid, IpAddr::V4(GROUP), JoinState::FULL_MEMBER).unwrap();
    let sid = bound_id(&mut w, PortSpace::Udp);
    let sqp = w.stacks[0].create_qp_for_id(sid).unwrap();
    w.stacks[0].join_multicast(Instant::ZERO, sid, IpAddr::V4(GROUP), JoinState::SEND_ONLY_FULL_MEMBER).unwrap();
    w.run_for(Duration::from_millis(50));
    let ev = w.events(0);
    let EventParam::Multicast { ud: Some(ud), .. } = &ev[0].param else { panic!("{ev:?}") };
    let dest = UdDest { ah: ud.ah, remote_qpn: ud.qp_num, remote_qkey: ud.qkey };
    for i in 0..5u8 {
        w.stacks[0].post_send(sqp, &dest, &[i; 100], None).unwrap();
    }
    let bad = UdDest { remote_qkey: 0x1111, ..dest };
    w.stacks[0].post_send(sqp, &bad, b"wrong qkey", None).unwrap();
    w.run_for(Duration::from_millis(10));
    let got: Vec<_> = std::iter::from_fn(|| w.stacks[1].poll_recv(rqp)).collect();
    assert_eq!(got.len(), 5);
    assert_eq!(got[0].src, IpAddr::V4(A));
    assert_eq!(got[0].src_qp, sqp);
    assert_eq!(w.stacks[1].counters().dropped(DropReason::QkeyViolation), 1);
}

#[test]
fn bind_rules() {
    let mut s = Stack::new(StackConfig::new([2, 0, 0, 0, 0, 1], A, 24));
    let a = s.create_id(PortSpace::Tcp, QpType::Rc).unwrap();
    let b = s.create_id(PortSpace::Tcp, QpType::Rc).unwrap();
    let c = s.create_id(PortSpace::Tcp, QpType::Rc).unwrap();
    s.bind_addr(a, SocketAddr::new(IpAddr::V4(A), 7000)).unwrap();
    assert_eq!(s.bind_addr(b, SocketAddr::new(IpAddr::V4(A), 7000)), Err(Errno::EADDRINUSE));
    assert_eq!(s.bind_addr(c, "0.0.0.0:7000".parse().unwrap()), Err(Errno::EADDRNOTAVAIL));
    assert_eq!(s.bind_addr(b, "198.18.0.77:7000".parse().unwrap()), Err(Errno::EADDRNOTAVAIL));
    assert_eq!(s.state(b), Some(CmState::Idle));
    s.bind_addr(b, SocketAddr::new(IpAddr::V4(A), 7001)).unwrap();
    assert_eq!(s.bind_addr(b, SocketAddr::new(IpAddr::V4(A), 7002)), Err(Errno::EINVAL));
    // Both reuseaddr: shared.
    let d = s.create_id(PortSpace::Tcp, QpType::Rc).unwrap();
    let e = s.create_id(PortSpace::Tcp, QpType::Rc).unwrap();
    s.set_reuseaddr(d, true).unwrap();
    s.set_reuseaddr(e, true).unwrap();
    s.bind_addr(d, SocketAddr::new(IpAddr::V4(A), 8000)).unwrap();
    s.bind_addr(e, SocketAddr::new(IpAddr::V4(A), 8000)).unwrap();
    // Listening needs uniqueness even with reuseaddr.
    assert_eq!(s.listen(d, 1), Err(Errno::EADDRINUSE));
    s.destroy_id(Instant::ZERO, e).unwrap();
    s.listen(d, 1).unwrap();
    assert_eq!(s.set_reuseaddr(d, true), Err(Errno::EINVAL));
    // Other port spaces are separate.
    let u = s.create_id(PortSpace::Udp, QpType::Ud).unwrap();
    s.bind_addr(u, SocketAddr::new(IpAddr::V4(A), 7000)).unwrap();
    assert_eq!(s.create_id(PortSpace::Tcp, QpType::Ud), Err(Errno::EINVAL));
}

/// The SA MADs as (method, JoinState, mask) triples.
fn sa_trace(w: &Wire) -> Vec<(Method, u8, u64)> {
    w.sa_mads(0)
        .iter()
        .map(|m| (m.header.method, m.mc_member().map_or(0, |r| r.join_state.0), m.sa.component_mask))
        .collect()
}

/// IGMP messages from stack 0 as (type, record type) pairs: v3 reports carry one record.
fn igmp_trace(w: &Wire) -> Vec<(u8, u8)> {
    w.frames
        .iter()
        .filter(|(s, f)| *s == 0 && f.len() > 23 && f[12..14] == [8, 0] && f[23] == 2)
        .map(|(_, f)| {
            let ihl = usize::from(f[14] & 0x0f) * 4;
            let igmp = &f[14 + ihl..];
            (igmp[0], if igmp[0] == 0x22 { igmp[8] } else { 0 })
        })
        .collect()
}

const SET: Method = Method::Set;
const DEL: Method = Method::Delete;
const JOIN: u64 = 0x130C7;
const LEAVE: u64 = 0x10003;

fn join(w: &mut Wire, id: CmId, js: JoinState) {
    let now = w.now;
    w.stacks[0].join_multicast(now, id, IpAddr::V4(GROUP), js).unwrap();
    w.run_for(Duration::from_millis(100));
}

fn leave(w: &mut Wire, id: CmId) {
    let now = w.now;
    w.stacks[0].leave_multicast(now, id, IpAddr::V4(GROUP)).unwrap();
    w.run_for(Duration::from_millis(100));
}

// The sequences of spec/multicast.md, scenario by scenario.

#[test]
fn s1_full_and_send_only_members_each_bit_set_and_deleted() {
    let mut w = Wire::new(MulticastPaths::BOTH);
    let a = bound_id(&mut w, PortSpace::Udp);
    let b = bound_id(&mut w, PortSpace::Udp);
    join(&mut w, a, JoinState::FULL_MEMBER);
    join(&mut w, b, JoinState::SEND_ONLY_FULL_MEMBER);
    leave(&mut w, a);
    leave(&mut w, b);
    assert_eq!(sa_trace(&w), vec![(SET, 1, JOIN), (SET, 8, JOIN), (DEL, 1, LEAVE), (DEL, 8, LEAVE)]);
    // One IGMPv3 CHANGE_TO_EXCLUDE on the FullMember join, one CHANGE_TO_INCLUDE on its
    // leave; none for the send-only member (cma.c destroy_mc, since 2021).
    assert_eq!(igmp_trace(&w), vec![(0x22, 4), (0x22, 3)]);
    let kinds: Vec<_> = w.events(0).iter().map(|e| (e.id, e.kind)).collect();
    assert_eq!(
        kinds,
        vec![
            (a, EventKind::MulticastJoin),
            (b, EventKind::MulticastJoin),
            (a, EventKind::MulticastLeft),
            (b, EventKind::MulticastLeft)
        ]
    );
}

#[test]
fn s2_second_full_member_is_local_and_only_the_last_leave_deletes() {
    let mut w = Wire::new(MulticastPaths::BOTH);
    let a = bound_id(&mut w, PortSpace::Udp);
    let b = bound_id(&mut w, PortSpace::Udp);
    join(&mut w, a, JoinState::FULL_MEMBER);
    join(&mut w, b, JoinState::FULL_MEMBER);
    leave(&mut w, a);
    assert_eq!(sa_trace(&w), vec![(SET, 1, JOIN)]);
    leave(&mut w, b);
    assert_eq!(sa_trace(&w), vec![(SET, 1, JOIN), (DEL, 1, LEAVE)]);
    // ip_mc_inc_group/ip_mc_dec_group are refcounted: one report each way.
    assert_eq!(igmp_trace(&w), vec![(0x22, 4), (0x22, 3)]);
}

#[test]
fn s3_upgrade_send_only_to_full_then_partial_leave() {
    let mut w = Wire::new(MulticastPaths::SA_ONLY);
    let a = bound_id(&mut w, PortSpace::Udp);
    join(&mut w, a, JoinState::SEND_ONLY_FULL_MEMBER);
    join(&mut w, a, JoinState::FULL_MEMBER);
    // Leaving "the group" leaves the first join of it (the send-only one), as cma.c does.
    leave(&mut w, a);
    assert_eq!(sa_trace(&w), vec![(SET, 8, JOIN), (SET, 1, JOIN), (DEL, 8, LEAVE)]);
    leave(&mut w, a);
    assert_eq!(sa_trace(&w).last(), Some(&(DEL, 1, LEAVE)));
    assert_eq!(w.stacks[0].groups().count(), 0);
}

#[test]
fn s4_destroy_id_leaves_every_group_without_events() {
    let mut w = Wire::new(MulticastPaths::BOTH);
    let a = bound_id(&mut w, PortSpace::Udp);
    let now = w.now;
    for g in [GROUP, Ipv4Addr::new(239, 1, 2, 4), Ipv4Addr::new(239, 1, 2, 5)] {
        w.stacks[0].join_multicast(now, a, IpAddr::V4(g), JoinState::FULL_MEMBER).unwrap();
    }
    w.run_for(Duration::from_millis(100));
    assert_eq!(w.events(0).len(), 3);
    let now = w.now;
    w.stacks[0].destroy_id(now, a).unwrap();
    w.run_for(Duration::from_secs(3));
    assert!(w.events(0).is_empty());
    let dels = sa_trace(&w).iter().filter(|t| t.0 == DEL).count();
    assert_eq!(dels, 3);
    assert_eq!(w.stacks[0].groups().count(), 0);
    assert_eq!(w.stacks[0].pending_work(), 0);
    assert!(w.stacks[0].bound_ports().is_empty());
}

#[test]
fn s5_ipv6_group_uses_mld_and_the_sa() {
    let mut w = Wire::new(MulticastPaths::BOTH);
    let id = w.stacks[0].create_id(PortSpace::Udp, QpType::Ud).unwrap();
    let ll = w.stacks[0].config().link_local();
    w.stacks[0].bind_addr(id, SocketAddr::new(IpAddr::V6(ll), 0)).expect_err("link-local without scope id");
    let mut cfg = w.stacks[0].config().clone();
    cfg.ipv6.push(("fd00::1".parse().unwrap(), 64));
    w.stacks[0] = Stack::new(cfg);
    let id = w.stacks[0].create_id(PortSpace::Udp, QpType::Ud).unwrap();
    w.stacks[0].bind_addr(id, "[fd00::1]:0".parse().unwrap()).unwrap();
    let g: IpAddr = "ff0e::1:2:3".parse().unwrap();
    // The SA lives at an IPv4 address here: the SA path is per port, not per group family.
    w.stacks[0].join_multicast(Instant::ZERO, id, g, JoinState::FULL_MEMBER).unwrap();
    w.run_for(Duration::from_millis(100));
    assert_eq!(w.events(0)[0].kind, EventKind::MulticastJoin);
    let mld = w.frames.iter().filter(|(s, f)| *s == 0 && f[12..14] == [0x86, 0xdd]).count();
    assert!(mld >= 1);
    let mut cfg = w.stacks[0].config().clone();
    cfg.ipv6_multicast = false;
    let mut s = Stack::new(cfg);
    let id = s.create_id(PortSpace::Udp, QpType::Ud).unwrap();
    s.bind_addr(id, "[fd00::1]:0".parse().unwrap()).unwrap();
    assert_eq!(s.join_multicast(Instant::ZERO, id, g, JoinState::FULL_MEMBER), Err(Errno::ENOTSUPP));
}

#[test]
fn join_preconditions() {
    let mut s = Stack::new(StackConfig::new([2, 0, 0, 0, 0, 1], A, 24));
    let id = s.create_id(PortSpace::Udp, QpType::Ud).unwrap();
    let g = IpAddr::V4(GROUP);
    assert_eq!(s.join_multicast(Instant::ZERO, id, g, JoinState::FULL_MEMBER), Err(Errno::EINVAL), "IDLE");
    s.bind_addr(id, "0.0.0.0:0".parse().unwrap()).unwrap();
    assert_eq!(
        s.join_multicast(Instant::ZERO, id, g, JoinState::FULL_MEMBER),
        Err(Errno::EINVAL),
        "wildcard bind: no device"
    );
    let id = s.create_id(PortSpace::Udp, QpType::Ud).unwrap();
    s.bind_addr(id, SocketAddr::new(IpAddr::V4(A), 0)).unwrap();
    assert_eq!(
        s.join_multicast(Instant::ZERO, id, IpAddr::V4(Ipv4Addr::UNSPECIFIED), JoinState::FULL_MEMBER),
        Err(Errno::EINVAL)
    );
    assert_eq!(s.join_multicast(Instant::ZERO, id, g, JoinState(0x9)), Err(Errno::EINVAL));
    assert_eq!(s.join_multicast(Instant::ZERO, id, g, JoinState(0)), Err(Errno::EINVAL));
    assert_eq!(s.leave_multicast(Instant::ZERO, id, g), Ok(()), "unknown group: no-op");
    for js in [JoinState::NON_MEMBER, JoinState::SEND_ONLY_NON_MEMBER] {
        assert_eq!(s.join_multicast(Instant::ZERO, id, g, js), Ok(()));
    }
}

/// A wire whose first stack joined a group, and a good frame the second sent it.
fn joined_and_a_good_frame() -> (Wire, Vec<u8>) {
    let mut w = Wire::new(MulticastPaths::BOTH);
    let id = bound_id(&mut w, PortSpace::Udp);
    join(&mut w, id, JoinState::FULL_MEMBER);
    let good = w.frames.iter().find(|(s, f)| *s == 1 && frame::parse(f).is_ok()).unwrap().1.clone();
    (w, good)
}

#[test]
fn bad_frames_are_counted_never_fatal() {
    let (mut w, good) = joined_and_a_good_frame();
    let s = &mut w.stacks[0];
    let before = s.counters().clone();
    let mut bad = good.clone();
    let n = bad.len();
    bad[n - 1] ^= 1;
    s.handle_frame(Instant::ZERO, &bad);
    s.handle_frame(Instant::ZERO, &good[..40]);
    s.handle_frame(Instant::ZERO, &good); // a replayed response: no transaction matches
    let mut wrong_pkey = good.clone();
    wrong_pkey[44] = 0x7f;
    wrong_pkey[45] = 0x00;
    let f = frame::parse_lax(&wrong_pkey).unwrap();
    let mut r = f.repr.clone();
    r.fill().unwrap();
    let mut buf = vec![0u8; r.buffer_len()];
    r.emit(&mut buf).unwrap();
    s.handle_frame(Instant::ZERO, &buf);
    let c = s.counters();
    assert_eq!(c.dropped(DropReason::BadIcrc), before.dropped(DropReason::BadIcrc) + 1);
    assert_eq!(c.dropped(DropReason::UnsolicitedResponse), before.dropped(DropReason::UnsolicitedResponse) + 1);
    assert_eq!(c.dropped(DropReason::BadPkey), before.dropped(DropReason::BadPkey) + 1);
    assert!(c.total_dropped() >= before.total_dropped() + 4);
    assert_eq!(
        c.rx_frames,
        c.rx_accepted
            + c.dropped
                .iter()
                .filter(|(r, _)| !matches!(r, DropReason::NeighborUnresolved | DropReason::TransmitBufferTooSmall))
                .map(|(_, n)| n)
                .sum::<u64>()
    );
}

/// A frame the transport verified (`handle_frame_icrc_verified`) is handled as
/// `handle_frame` handles it but for the ICRC, which is not computed again; every other check
/// stays (a bad IPv4 checksum is still `BadIpChecksum`), and a frame nobody verified still
/// has its bad ICRC counted.
#[test]
fn a_frame_whose_icrc_the_transport_verified_is_checked_for_all_else() {
    let (mut w, good) = joined_and_a_good_frame();
    let s = &mut w.stacks[0];
    let mut bad_icrc = good.clone();
    let n = bad_icrc.len();
    bad_icrc[n - 1] ^= 1;
    let mut bad_ip_checksum = good.clone();
    bad_ip_checksum[24] ^= 1;
    // The two entries agree on every frame but one with a wrong ICRC.
    for f in [&good, &bad_ip_checksum, &good[..40].to_vec()] {
        let before = s.counters().clone();
        s.handle_frame(Instant::ZERO, f);
        let plain = s.counters().clone();
        s.handle_frame_icrc_verified(Instant::ZERO, f);
        let verified = s.counters().clone();
        assert_eq!(plain.rx_frames - before.rx_frames, verified.rx_frames - plain.rx_frames);
        assert_eq!(plain.rx_accepted - before.rx_accepted, verified.rx_accepted - plain.rx_accepted);
        for (reason, count) in plain.dropped.iter() {
            let was = before.dropped(*reason);
            assert_eq!(verified.dropped(*reason) - count, count - was, "{reason:?}");
        }
    }
    let before = s.counters().clone();
    s.handle_frame_icrc_verified(Instant::ZERO, &bad_ip_checksum);
    assert_eq!(s.counters().dropped(DropReason::BadIpChecksum), before.dropped(DropReason::BadIpChecksum) + 1);
    s.handle_frame(Instant::ZERO, &bad_icrc);
    assert_eq!(s.counters().dropped(DropReason::BadIcrc), before.dropped(DropReason::BadIcrc) + 1);
}

/// The one demux keeps the engine's two kinds of bad IPv4 checksum apart: a RoCEv2 frame's is
/// `BadIpChecksum` (as rxe counts it), an IGMP frame's a malformed IGMP frame.
#[test]
fn a_bad_ipv4_checksum_is_counted_by_what_the_frame_carries() {
    use roce_wire::igmp::IgmpMessage;
    use roce_wire::l2::{EmitFrame, IgmpFrame};
    let mut w = Wire::new(MulticastPaths::BOTH);
    let id = bound_id(&mut w, PortSpace::Udp);
    join(&mut w, id, JoinState::FULL_MEMBER);
    let good = w.frames.iter().find(|(s, f)| *s == 1 && frame::parse(f).is_ok()).unwrap().1.clone();
    let query = IgmpFrame::new(
        [2, 0, 0, 0, 0, 9],
        Ipv4Addr::new(198, 18, 0, 9),
        IgmpMessage::v2_report(Ipv4Addr::new(239, 9, 9, 9)),
    );
    let mut igmp = vec![0u8; query.buffer_len()];
    query.emit(&mut igmp);
    let s = &mut w.stacks[0];
    let before = s.counters().clone();
    for f in [&good, &igmp] {
        let mut bad = f.clone();
        bad[25] ^= 0xff;
        s.handle_frame(Instant::ZERO, &bad);
    }
    let c = s.counters();
    assert_eq!(c.dropped(DropReason::BadIpChecksum), before.dropped(DropReason::BadIpChecksum) + 1);
    let malformed = DropReason::Malformed(roce_wire::Layer::Ipv4);
    assert_eq!(c.dropped(malformed), before.dropped(malformed) + 1);
}

mod state_machine {
    //! Random call sequences and injected frames keep the invariants of spec/multicast.md.
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Join(usize, usize, usize),
        Leave(usize, usize),
        Destroy(usize),
        Run(u64),
        SaSilent(bool),
        Garbage(Vec<u8>),
        Mutate(usize, usize, u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..3usize, 0..3usize, 0..4usize).prop_map(|(i, g, j)| Op::Join(i, g, j)),
            3 => (0..3usize, 0..3usize).prop_map(|(i, g)| Op::Leave(i, g)),
            1 => (0..3usize).prop_map(Op::Destroy),
            3 => (0..4000u64).prop_map(Op::Run),
            1 => any::<bool>().prop_map(Op::SaSilent),
            1 => proptest::collection::vec(any::<u8>(), 0..400).prop_map(Op::Garbage),
            1 => (any::<usize>(), any::<usize>(), any::<u8>()).prop_map(|(f, b, v)| Op::Mutate(f, b, v)),
        ]
    }

    fn group(i: usize) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(239, 1, 2, 3 + i as u8))
    }

    fn check(s: &Stack) {
        // 1. counts match Joined members; 3. members and ids agree.
        let members: std::collections::BTreeMap<_, _> = s.members().collect();
        for g in s.groups() {
            let mut counts = [0u32; 4];
            for k in &g.members {
                let m = members.get(k).expect("group member exists");
                assert_eq!(m.mgid, g.mgid);
                if m.state == crate::mcast::MemberState::Joined {
                    counts[(m.join_state.0.trailing_zeros() as usize).min(3)] += 1;
                }
            }
            assert_eq!(counts, g.counts, "per-bit counts");
        }
        for (k, m) in &members {
            if m.state != crate::mcast::MemberState::Cancelled {
                let r = s.ids.get(&m.id).expect("member's id is alive");
                assert!(r.members.contains(k));
            }
        }
        for r in s.ids.values() {
            for k in r.members.keys() {
                assert!(members.contains_key(&k), "id names a live member");
            }
        }
        let c = s.counters();
        let drops: u64 = c
            .dropped
            .iter()
            .filter(|(r, _)| !matches!(r, DropReason::NeighborUnresolved | DropReason::TransmitBufferTooSmall))
            .map(|(_, n)| n)
            .sum();
        assert_eq!(c.rx_frames, c.rx_accepted + drops, "every frame accepted or counted once");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]
        #[test]
        fn random_calls_and_frames_keep_the_invariants(ops in proptest::collection::vec(op(), 1..40)) {
            let mut w = Wire::new(MulticastPaths::BOTH);
            let mut ids: Vec<CmId> = (0..3).map(|_| bound_id(&mut w, PortSpace::Udp)).collect();
            let js = [JoinState::FULL_MEMBER, JoinState::NON_MEMBER, JoinState::SEND_ONLY_NON_MEMBER, JoinState::SEND_ONLY_FULL_MEMBER];
            for op in ops {
                let now = w.now;
                match op {
                    Op::Join(i, g, j) => { w.stacks[0].join_multicast(now, ids[i], group(g), js[j]).unwrap(); }
                    Op::Leave(i, g) => { w.stacks[0].leave_multicast(now, ids[i], group(g)).unwrap(); }
                    Op::Destroy(i) => {
                        w.stacks[0].destroy_id(now, ids[i]).unwrap();
                        ids[i] = bound_id(&mut w, PortSpace::Udp);
                    }
                    Op::Run(ms) => w.run_for(Duration::from_millis(ms)),
                    Op::SaSilent(b) => w.sa_silent = b,
                    Op::Garbage(bytes) => w.stacks[0].handle_frame(now, &bytes),
                    Op::Mutate(f, b, v) => {
                        if !w.frames.is_empty() {
                            let mut fr = w.frames[f % w.frames.len()].1.clone();
                            let n = fr.len();
                            fr[b % n] = v;
                            w.stacks[0].handle_frame(now, &fr);
                        }
                    }
                }
                check(&w.stacks[0]);
            }
            // Quiescence: everything destroyed, the SA answering, time enough for retries.
            w.sa_silent = false;
            let now = w.now;
            for id in ids {
                w.stacks[0].destroy_id(now, id).unwrap();
            }
            w.run_for(Duration::from_secs(30));
            check(&w.stacks[0]);
            let s = &w.stacks[0];
            prop_assert_eq!(s.groups().count(), 0);
            prop_assert_eq!(s.members().count(), 0);
            prop_assert_eq!(s.sa_transactions(), 0);
            prop_assert_eq!(s.pending_work(), 0);
            prop_assert!(s.bound_ports().is_empty());
            // Every RoCE frame we emitted parses strictly.
            for (i, f) in &w.frames {
                if *i == 0 && f.len() > 37 && f[12..14] == [8, 0] && f[23] == 17 {
                    prop_assert!(frame::parse(f).is_ok());
                }
            }
        }
    }
}

#[test]
fn per_group_state_stays_small() {
    // Memory per joined group is a target (≤ 512 B in all); these are its biggest parts.
    assert!(std::mem::size_of::<crate::mcast::Group>() <= 160, "{}", std::mem::size_of::<crate::mcast::Group>());
    assert!(std::mem::size_of::<crate::mcast::Member>() <= 48);
}

#[test]
fn default_sa_timing_sends_six_times_in_three_seconds() {
    let t = SaTiming::default();
    assert_eq!(t.retry_interval(), Duration::from_millis(500));
    assert_eq!(t.max_sends(), 6);
}

#[test]
fn sa_mads_built_in_place_frame_exactly_as_the_owned_emit() {
    // The first Set waits for ARP (the packet path, parked); the Delete and the second Set go
    // out with the SA's MAC known, written straight into the transmit buffer.
    let mut w = Wire::new(MulticastPaths::SA_ONLY);
    let id = bound_id(&mut w, PortSpace::Udp);
    join(&mut w, id, JoinState::FULL_MEMBER);
    leave(&mut w, id);
    join(&mut w, id, JoinState::FULL_MEMBER);
    let sent: Vec<&Vec<u8>> =
        w.frames.iter().filter(|(s, f)| *s == 0 && f.len() == 322 && f[12..14] == [8, 0]).map(|(_, f)| f).collect();
    assert_eq!(sent.len(), 3, "Set, Delete, Set");
    let mut psns = Vec::new();
    for f in sent {
        let p = frame::parse(f).expect("strict parse: headers, IPv4 checksum and ICRC right");
        let mut again = vec![0u8; f.len()];
        assert_eq!(p.repr.emit(&mut again).unwrap(), f.len());
        assert_eq!(&again, f);
        assert_eq!(p.repr.ext.deth.map(|d| (d.qkey, d.src_qp)), Some((roce_wire::GSI_QKEY, 1)));
        assert!(p.repr.bth.ack_req);
        psns.push(p.repr.bth.psn);
    }
    // One GSI PSN per MAD sent, whichever path built it.
    assert_eq!(psns, [psns[0], psns[0] + 1, psns[0] + 2]);
    assert_eq!(sa_trace(&w).iter().map(|t| t.0).collect::<Vec<_>>(), [SET, DEL, SET]);
}

/// A frame's UDP payload and what a UDP socket would report of its IP and UDP headers.
fn as_datagram(f: &[u8]) -> (roce_wire::datagram::Arrival, &[u8]) {
    let p = frame::parse_lax(f).unwrap();
    let arrival = roce_wire::datagram::Arrival {
        src: SocketAddr::new(p.repr.ip.source(), p.repr.udp.source_port),
        dst: p.repr.ip.destination(),
        traffic_class: p.repr.ip.traffic_class(),
        hop_limit: p.repr.ip.hop_limit(),
    };
    (arrival, &f[p.offsets.bth..p.offsets.end])
}

/// Two stacks with a connected RC QP pair (path MTU 1024, attributes set by hand) and a
/// 64 KiB memory region each; returns them with their QP numbers and regions.
fn rc_pair() -> (Stack, Stack, u32, u32, crate::rc::MrInfo, crate::rc::MrInfo) {
    use crate::rc::{Access, QpAttr, QpInit, QpState};
    const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 3);
    let (mac_a, mac_b) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 3]);
    let mut a = Stack::new(StackConfig::new(mac_a, A, 24));
    let mut b = Stack::new(StackConfig::new(mac_b, B, 24));
    let qa = a.create_qp_with(QpInit::default()).unwrap();
    let qb = b.create_qp_with(QpInit::default()).unwrap();
    for (s, q, peer, pq, mac) in [(&mut a, qa, B, qb, mac_b), (&mut b, qb, A, qa, mac_a)] {
        let mut at = QpAttr::new(IpAddr::V4(peer), pq);
        at.path_mtu = 1024;
        at.sq_psn = 100;
        at.rq_psn = 100;
        at.dmac = Some(mac);
        for st in [QpState::Init, QpState::Rtr, QpState::Rts] {
            s.rc_mut().modify_qp(Instant::ZERO, q, st, &at).unwrap();
        }
    }
    let ma = a.rc_mut().reg_mr(1 << 16, Access::ALL).unwrap();
    let mb = b.rc_mut().reg_mr(1 << 16, Access::ALL).unwrap();
    (a, b, qa, qb, ma, mb)
}

/// RC SENDs and a WRITE handed to the receiver as datagrams (`handle_datagram_icrc_verified`,
/// as the udp transport hands them where `recvmmsg` put them) land as they land from frames:
/// the same bytes, completions and counters; and bad datagrams are counted under the reasons
/// their frames are (TVer, P_Key, a cut header), a UD MAD datagram taking the frame path.
#[test]
fn rc_datagrams_handed_in_place_land_as_frames_do() {
    use crate::rc::{RecvWr, SendOp, SendWr, Sge};
    let run = |in_place: bool| {
        let (mut a, mut b, qa, qb, ma, mb) = rc_pair();
        for (i, byte) in a.rc_mut().mr_mut(ma.lkey).unwrap().iter_mut().enumerate() {
            *byte = (i * 7 + i / 251) as u8;
        }
        for i in 0..3u64 {
            let sg = vec![Sge { addr: mb.addr + i * 8192, length: 8192, lkey: mb.lkey }];
            b.rc_mut().post_recv(qb, RecvWr { wr_id: i, sg_list: sg }).unwrap();
        }
        for (i, len) in [(0u64, 5000u32), (1, 1024), (2, 0)] {
            let sg = vec![Sge { addr: ma.addr + i * 100, length: len, lkey: ma.lkey }];
            a.rc_mut()
                .post_send(
                    Instant::ZERO,
                    qa,
                    SendWr { wr_id: i, op: SendOp::Send, sg_list: sg, signaled: true, solicited: false, inline: None },
                )
                .unwrap();
        }
        let write = SendOp::Write { remote_addr: mb.addr + 40000, rkey: mb.rkey };
        let sg = vec![Sge { addr: ma.addr + 3, length: 3000, lkey: ma.lkey }];
        a.rc_mut()
            .post_send(
                Instant::ZERO,
                qa,
                SendWr { wr_id: 9, op: write, sg_list: sg, signaled: true, solicited: false, inline: None },
            )
            .unwrap();
        let mut buf = vec![0u8; 9216];
        for _ in 0..20 {
            while let Some(n) = a.poll_transmit(Instant::ZERO, &mut buf) {
                if in_place {
                    let (arrival, d) = as_datagram(&buf[..n]);
                    b.handle_datagram_icrc_verified(Instant::ZERO, &arrival, d);
                } else {
                    b.handle_frame(Instant::ZERO, &buf[..n]);
                }
            }
            while let Some(n) = b.poll_transmit(Instant::ZERO, &mut buf) {
                a.handle_frame(Instant::ZERO, &buf[..n]);
            }
        }
        let wcs: Vec<_> = std::iter::from_fn(|| b.rc_mut().poll_cq()).collect();
        let sent: Vec<_> = std::iter::from_fn(|| a.rc_mut().poll_cq()).collect();
        let landed = b.rc().mr(mb.lkey).unwrap().to_vec();
        (wcs, sent, landed, b.counters().clone(), a, b, qa)
    };
    let (wcs, sent, landed, counters, ..) = run(false);
    let (wcs_in_place, sent_in_place, landed_in_place, counters_in_place, mut a, mut b, qa) = run(true);
    assert_eq!(wcs.len(), 3);
    assert_eq!(sent.len(), 4, "{sent:?}");
    assert_eq!((wcs_in_place, sent_in_place), (wcs, sent));
    assert!(landed == landed_in_place, "the same bytes landed");
    assert_eq!(counters_in_place, counters);
    assert!(counters.rx_accepted >= 9, "{counters:?}");
    // Bad datagrams: counted as their frames are on the frame path the transport verified.
    // A SEND of A's, taken off the wire to be damaged.
    let mut buf = vec![0u8; 9216];
    let empty = SendWr { wr_id: 21, op: SendOp::Send, sg_list: vec![], signaled: true, solicited: false, inline: None };
    a.rc_mut().post_send(Instant::ZERO, qa, empty).unwrap();
    let n = a.poll_transmit(Instant::ZERO, &mut buf).unwrap();
    let good = buf[..n].to_vec();
    let mut tver = good.clone();
    tver[43] |= 1;
    let mut pkey = good.clone();
    pkey[44..46].copy_from_slice(&[0x7f, 0x00]);
    // A datagram cut inside its extension headers, and the frame it would have come in.
    let (arrival, d) = as_datagram(&good);
    let mut cut = vec![0u8; 42 + 14];
    roce_wire::datagram::write_frame_headers(&mut cut, 14, &arrival, [2, 0, 0, 0, 0, 3], KERNEL_NEIGHBOR_MAC, 0)
        .unwrap();
    cut[42..].copy_from_slice(&d[..14]);
    let mad = roce_wire::golden::SA_DELETE_MCMEMBER.to_vec();
    for f in [&tver, &pkey, &cut, &mad] {
        let before = b.counters().clone();
        b.handle_frame_icrc_verified(Instant::ZERO, f);
        let framed = b.counters().clone();
        let (arrival, d) = if *f == cut { (arrival, &cut[42..]) } else { as_datagram(f) };
        b.handle_datagram_icrc_verified(Instant::ZERO, &arrival, d);
        let in_place = b.counters().clone();
        assert_eq!(in_place.rx_frames - framed.rx_frames, 1);
        assert_eq!(framed.rx_accepted - before.rx_accepted, in_place.rx_accepted - framed.rx_accepted);
        assert!(framed.total_dropped() > before.total_dropped() || framed.rx_accepted > before.rx_accepted);
        for (reason, count) in framed.dropped.iter() {
            assert_eq!(in_place.dropped(*reason) - count, count - before.dropped(*reason), "{reason:?}");
        }
    }
    let c = b.counters();
    assert!(c.dropped(DropReason::BadTver) >= 2 && c.dropped(DropReason::BadPkey) >= 2, "{c:?}");
}

/// A CE-marked frame through the stacks: the CNP frame on the wire is the ConnectX-4 one's
/// shape (opcode 0x81, the sender's QP, PSN 0, 16 zero bytes, a right ICRC, not ECN-capable)
/// and, handed to the sender's stack, cuts its QP's rate.
#[test]
fn a_ce_frame_through_the_stacks_gets_a_cnp_frame_that_cuts_the_rate() {
    use crate::rc::{Access, Congestion, DcqcnParams, QpAttr, QpCap, QpState, RecvWr, SendOp, SendWr, Sge};
    const G: u64 = 1_000_000_000;
    let dcqcn = |rate| Congestion::Dcqcn(DcqcnParams::nic().with_line_rate(rate));
    let sge = |m: &crate::rc::MrInfo| vec![Sge { addr: m.addr, length: 100, lkey: m.lkey }];
    let (ma, mb) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let (ia, ib) = (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
    let mut stacks = [(ma, ia), (mb, ib)].map(|(m, i)| {
        let mut c = StackConfig::new(m, i, 24);
        c.congestion = dcqcn(10 * G);
        Stack::new(c)
    });
    let now = Instant::ZERO;
    let qps: Vec<u32> = stacks.iter_mut().map(|s| s.create_rc_qp(QpCap::default()).unwrap()).collect();
    for (k, (peer, mac)) in [(ib, mb), (ia, ma)].into_iter().enumerate() {
        let mut at = QpAttr::new(IpAddr::V4(peer), qps[1 - k]);
        at.dmac = Some(mac);
        for st in [QpState::Init, QpState::Rtr, QpState::Rts] {
            stacks[k].rc_mut().modify_qp(now, qps[k], st, &at).unwrap();
        }
    }
    let m = stacks[0].rc_mut().reg_mr(2048, Access::ALL).unwrap();
    let wr = SendWr { wr_id: 1, op: SendOp::Send, sg_list: sge(&m), signaled: true, solicited: false, inline: None };
    stacks[0].rc_mut().post_send(now, qps[0], wr).unwrap();
    let r = stacks[1].rc_mut().reg_mr(2048, Access::ALL).unwrap();
    stacks[1].rc_mut().post_recv(qps[1], RecvWr { wr_id: 1, sg_list: sge(&r) }).unwrap();
    let mut buf = vec![0u8; 9000];
    let n = stacks[0].poll_transmit(now, &mut buf).unwrap();
    let mut frame = buf[..n].to_vec();
    assert_eq!(frame[15] & 3, 2, "ECT(0) in the IPv4 TOS");
    // The switch marks it CE (the ICRC masks the TOS; the IPv4 checksum is redone).
    frame[15] |= 3;
    frame[24..26].fill(0);
    let sum = frame::ipv4_checksum(&frame[14..34]);
    frame[24..26].copy_from_slice(&sum.to_be_bytes());
    stacks[1].handle_frame(now, &frame);
    assert_eq!(stacks[1].counters().rx_accepted, 1);
    let n = stacks[1].poll_transmit(now, &mut buf).unwrap();
    let f = frame::parse(&buf[..n]).unwrap();
    assert_eq!(f.repr.bth.opcode, roce_wire::bth::Opcode::Cnp);
    assert_eq!((f.repr.bth.dest_qp, f.repr.bth.psn, f.repr.payload), (qps[0], 0, &[0u8; 16][..]));
    assert!(f.icrc_ok());
    assert_eq!(f.repr.ip.traffic_class() & 3, 0, "the CNP is not ECN-capable");
    assert_eq!(n, 74, "as long as the ConnectX-4 CNP");
    let cnp = buf[..n].to_vec();
    stacks[0].handle_frame(now, &cnp);
    let c = stacks[0].rc().counters().cc;
    assert_eq!((c.cnp_received, c.rate_cuts), (1, 1));
    assert!(stacks[0].rc().qp_rate(qps[0]).unwrap().rate() < 10 * G);
}

/// Issue 37 item 6: our CNP beside a ConnectX-4 Lx's, field by field (the capture in
/// protocol.md §1.11, from scapy's test/contrib/roce.uts). Our notification point is given the
/// capture's MACs, addresses and sender QP and sends from UDP port 0 as the NIC did; then every
/// byte is the NIC's but for three documented differences: the TOS (the NIC's 0xC2 is DSCP 48
/// and ECT(0); ours keeps the QP's DSCP, 0 here, and is not ECN-capable, as spec/congestion.md
/// says), the IPv4 ID (ours 0, the NIC's a counter) and the IPv4 checksum that follows both.
/// With the NIC's ID put in, our ICRC is the NIC's: nothing else the ICRC covers differs.
#[test]
fn our_cnp_is_a_connectx_4_cnp_field_by_field() {
    use crate::rc::{Access, Congestion, DcqcnParams, QpAttr, QpCap, QpState, RecvWr, SendOp, SendWr, Sge};
    let hex = |s: &str| -> Vec<u8> {
        let s: String = s.chars().filter(char::is_ascii_hexdigit).collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    };
    let nic =
        hex("e41d2dab2bc2 7cfe90643b32 0800 45c2 003c 718c 4000 4011 9161 0a001101 0a001201 0000 12b7 0028 0000 \
         8100ffff 40000118 00000000 00000000000000000000000000000000 82fd002a");
    assert_eq!(nic.len(), 74);
    let (sender_mac, np_mac) = ([0xe4, 0x1d, 0x2d, 0xab, 0x2b, 0xc2], [0x7c, 0xfe, 0x90, 0x64, 0x3b, 0x32]);
    let (sender_ip, np_ip) = (Ipv4Addr::new(10, 0, 18, 1), Ipv4Addr::new(10, 0, 17, 1));
    let dcqcn = Congestion::Dcqcn(DcqcnParams::nic().with_line_rate(10_000_000_000));
    let mut sender = StackConfig::new(sender_mac, sender_ip, 16);
    sender.congestion = dcqcn;
    let mut np = StackConfig::new(np_mac, np_ip, 16);
    np.congestion = dcqcn;
    np.udp_source_port = Some(0);
    let (mut a, mut b) = (Stack::new(sender), Stack::new(np));
    let now = Instant::ZERO;
    const SENDER_QP: u32 = 0x118;
    a.rc_mut().create_qp(SENDER_QP, QpCap::default()).unwrap();
    let np_qp = b.create_rc_qp(QpCap::default()).unwrap();
    for (s, qpn, peer, peer_qp, mac) in
        [(&mut a, SENDER_QP, np_ip, np_qp, np_mac), (&mut b, np_qp, sender_ip, SENDER_QP, sender_mac)]
    {
        let mut at = QpAttr::new(IpAddr::V4(peer), peer_qp);
        at.dmac = Some(mac);
        for st in [QpState::Init, QpState::Rtr, QpState::Rts] {
            s.rc_mut().modify_qp(now, qpn, st, &at).unwrap();
        }
    }
    let m = a.rc_mut().reg_mr(64, Access::ALL).unwrap();
    let sg = vec![Sge { addr: m.addr, length: 64, lkey: m.lkey }];
    a.rc_mut()
        .post_send(
            now,
            SENDER_QP,
            SendWr { wr_id: 1, op: SendOp::Send, sg_list: sg, signaled: true, solicited: false, inline: None },
        )
        .unwrap();
    let r = b.rc_mut().reg_mr(64, Access::ALL).unwrap();
    b.rc_mut()
        .post_recv(np_qp, RecvWr { wr_id: 1, sg_list: vec![Sge { addr: r.addr, length: 64, lkey: r.lkey }] })
        .unwrap();
    let mut buf = vec![0u8; 9000];
    let n = a.poll_transmit(now, &mut buf).unwrap();
    let mut data = buf[..n].to_vec();
    data[15] |= 3; // CE, by a switch; the IPv4 checksum redone
    data[24..26].fill(0);
    let sum = frame::ipv4_checksum(&data[14..34]);
    data[24..26].copy_from_slice(&sum.to_be_bytes());
    b.handle_frame(now, &data);
    let n = b.poll_transmit(now, &mut buf).unwrap();
    let ours = buf[..n].to_vec();
    // (name, frame bytes, whether ours differs from the NIC's there and why)
    let fields: [(&str, std::ops::Range<usize>, Option<&str>); 23] = [
        ("Ethernet destination", 0..6, None),
        ("Ethernet source", 6..12, None),
        ("EtherType", 12..14, None),
        ("IPv4 version, IHL", 14..15, None),
        ("IPv4 TOS", 15..16, Some("DSCP 48 + ECT(0) on the NIC; the QP's DSCP and not-ECT here")),
        ("IPv4 total length", 16..18, None),
        ("IPv4 identification", 18..20, Some("the NIC counts; 0 here")),
        ("IPv4 flags, fragment offset", 20..22, None),
        ("IPv4 TTL", 22..23, None),
        ("IPv4 protocol", 23..24, None),
        ("IPv4 checksum", 24..26, Some("follows the TOS and the ID")),
        ("IPv4 source", 26..30, None),
        ("IPv4 destination", 30..34, None),
        ("UDP source port", 34..36, None),
        ("UDP destination port", 36..38, None),
        ("UDP length", 38..40, None),
        ("UDP checksum", 40..42, None),
        ("BTH opcode, SE/M/pad/TVer", 42..44, None),
        ("BTH P_Key", 44..46, None),
        ("BTH FECN/BECN/reserved", 46..47, None),
        ("BTH destination QP", 47..50, None),
        ("BTH AckReq/reserved, PSN", 50..54, None),
        ("16 reserved bytes", 54..70, None),
    ];
    assert_eq!(ours.len(), nic.len(), "74 bytes");
    for (name, at, differs) in fields {
        match differs {
            None => assert_eq!(ours[at.clone()], nic[at.clone()], "{name}"),
            Some(why) => assert_ne!(ours[at.clone()], nic[at.clone()], "{name}: expected to differ ({why})"),
        }
    }
    assert_eq!(ours[15], 0x00, "DSCP 0, not ECN-capable");
    // The ICRC: with the NIC's ID in our frame, the NIC's value (the TOS and checksum are masked).
    let mut with_nic_id = ours.clone();
    with_nic_id[18..20].copy_from_slice(&nic[18..20]);
    let icrc = roce_wire::icrc::compute(&with_nic_id[14..70], roce_wire::icrc::IpVersion::V4, 20).unwrap();
    assert_eq!(icrc.to_le_bytes(), nic[70..74], "the NIC's ICRC");
    let ours_icrc = roce_wire::icrc::compute(&ours[14..70], roce_wire::icrc::IpVersion::V4, 20).unwrap();
    assert_eq!(ours_icrc.to_le_bytes(), ours[70..74], "ours is right for ours");
}
