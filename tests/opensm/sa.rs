//! Interop with a real SA: OpenSM 3.3 on a fabric simulated by ibsim, reached through the
//! pure-Rust sim client [`roce_net::ibsim::IbsimClient`] attached to HCA `Hca2` of
//! `tests/ibsim/net`. The SA MADs are built by hand with `roce_wire` (the engine integration
//! comes later); OpenSM's state is read back with `saquery` (through `ibsim-run`).
//!
//! The statuses asserted here are the ones OpenSM actually returned; spec/opensm.md records
//! them (same case names) for the comparison with our own SA responder (crates/roce-sa).
//!
//! Every test starts its own fabric (its own `IBSIM_SOCKNAME`), so they may run in parallel.
//! They fail (never skip) when ibsim or OpenSM is missing: `bash tests/ibsim/setup.sh`.

use std::net::Ipv6Addr;
use std::time::Duration;

use crate::ibsim_harness::{Fabric, SaqueryMember};
use crate::{
    JOIN_MASK, LEAVE_MASK, MGID_CM, MGID_CM6, MGID_IPOIB, MGID_IPOIB_BCAST, MGID_PROXY, NODE, OTHER_NODE, SA_TIMEOUT,
};
use roce_net::ibsim::{IbsimClient, IbsimNode, IbsimOptions};
use roce_wire::mad::Method;
use roce_wire::mcmember::{ComponentMask, JoinState, McMemberRecord, Selector};
use roce_wire::sa::{attr, SaData, SaMad};
use roce_wire::{Gid, RDMA_UDP_QKEY};

/// The join record `cma_join_ib_multicast` builds (see crates/roce-decode/src/samples.rs `join_record`), for an
/// InfiniBand port: MGID, our PortGID, the RDMA-CM Q_Key, the default P_Key.
fn join_record(mgid: Ipv6Addr, port_gid: Gid, join_state: JoinState) -> McMemberRecord {
    McMemberRecord {
        mgid: Gid::from_ipv6(mgid),
        port_gid,
        q_key: RDMA_UDP_QKEY,
        p_key: 0xFFFF,
        join_state,
        ..McMemberRecord::default()
    }
}

fn ip(g: Gid) -> Ipv6Addr {
    Ipv6Addr::from(g.0)
}

/// Send one SA request for an MCMemberRecord to the SM's LID, QP 1, and return OpenSM's answer
/// (checked: SA class, same TID below the sim's client bits, the response bit, same attribute).
fn sa_request(client: &mut IbsimClient, method: Method, mask: u64, rec: McMemberRecord) -> SaMad {
    let tid = client.new_tid();
    let req = SaMad::request(method, tid, attr::MC_MEMBER_RECORD, mask, SaData::mc_member(rec));
    let resp = client
        .request(client.sm_lid(), 1, &req.to_bytes(), SA_TIMEOUT)
        .unwrap_or_else(|e| panic!("{method:?} mask {mask:#x}: {e}"));
    let resp = SaMad::parse_checked(&resp).expect("OpenSM's answer parses as an SA MAD");
    assert_eq!(resp.header.transaction_id, tid, "the answer carries our TID");
    assert!(resp.header.response, "the answer has the R bit");
    assert_eq!(resp.header.attribute_id, attr::MC_MEMBER_RECORD);
    resp
}

/// As [`sa_request`], but `None` when OpenSM does not answer within a second (it drops
/// requests it cannot parse or whose method it does not support on the class).
fn sa_try(client: &mut IbsimClient, method: Method, mask: u64, rec: McMemberRecord) -> Option<SaMad> {
    let tid = client.new_tid();
    let req = SaMad::request(method, tid, attr::MC_MEMBER_RECORD, mask, SaData::mc_member(rec));
    match client.request(client.sm_lid(), 1, &req.to_bytes(), Duration::from_secs(1)) {
        Ok(resp) => {
            let resp = SaMad::parse_checked(&resp).expect("OpenSM's answer parses as an SA MAD");
            assert_eq!(resp.header.transaction_id, tid, "the answer carries our TID");
            Some(resp)
        }
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => None,
        Err(e) => panic!("{method:?} mask {mask:#x}: {e}"),
    }
}

/// What OpenSM answered: (method, status).
fn answer(resp: &SaMad) -> (Method, u16) {
    (resp.header.method, resp.header.status.0)
}

/// Every case of spec/opensm.md's table, in its order.
const SPEC_CASES: [&str; 32] = [
    "full_member_join",
    "full_member_leave",
    "send_only_full_member_join",
    "send_only_full_member_leave",
    "sa_assigned_mgid_join",
    "sa_assigned_mgid_leave",
    "join_second_bit",
    "leave_send_only_keeps_full",
    "leave_full_drops_send_only",
    "get_after_dropped",
    "leave_send_only_after_dropped",
    "join_no_join_state",
    "join_no_port_gid",
    "join_no_mgid",
    "create_no_qkey",
    "create_leave_mask_only",
    "proxy_join_other_ports_gid",
    "join_unknown_port_gid",
    "join_wrong_subnet_prefix",
    "join_ipoib_mgid_rdma_cm_qkey",
    "join_join_state_zero",
    "leave_unknown_group",
    "leave_no_join_state",
    "leave_ipoib_broadcast_not_member",
    "send_method_unsupported",
    "rejoin_same_state",
    "join_other_qkey",
    "leave_state_not_held",
    "leave_other_ports_gid",
    "proxy_leave_other_ports_gid",
    "leave",
    "leave_again",
];

/// spec/opensm.md's table: case ▶ (answer, status) as written there.
fn spec_table() -> Vec<(String, String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/spec/opensm.md");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    text.lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cols: Vec<&str> = l.split('|').map(str::trim).collect();
            assert!(cols.len() >= 8, "spec/opensm.md row with too few columns: {l}");
            (cols[1].trim_matches('`').to_string(), cols[5].to_string(), cols[6].to_string())
        })
        .collect()
}

/// How spec/opensm.md writes an answer.
fn spec_form(got: Option<(Method, u16)>) -> (String, String) {
    match got {
        Some((Method::Get, st)) => ("SubnAdmGetResp".into(), format!("{st:#06X}").replace("0X", "0x")),
        Some((Method::Delete, st)) => ("SubnAdmDeleteResp".into(), format!("{st:#06X}").replace("0X", "0x")),
        Some((m, st)) => (format!("{m:?}"), format!("{st:#06X}").replace("0X", "0x")),
        None => ("no answer".into(), "—".into()),
    }
}

/// Assert that OpenSM answered `case` as spec/opensm.md records.
fn check_spec(case: &str, got: Option<(Method, u16)>) {
    assert!(SPEC_CASES.contains(&case), "{case} is not in SPEC_CASES");
    let table = spec_table();
    let row = table.iter().find(|r| r.0 == case).unwrap_or_else(|| panic!("spec/opensm.md has no row `{case}`"));
    let want = (row.1.clone(), row.2.clone());
    assert_eq!(spec_form(got), want, "OpenSM's answer to {case} differs from spec/opensm.md");
}

fn members(fabric: &Fabric, mgid: Ipv6Addr) -> Vec<SaqueryMember> {
    fabric.mc_members(Some(mgid)).into_iter().filter(|m| m.mgid == mgid).collect()
}

/// The MGIDs `saquery -g` lists.
fn groups(fabric: &Fabric) -> Vec<Ipv6Addr> {
    fabric
        .saquery(&["-g"])
        .lines()
        .filter_map(|l| l.trim().strip_prefix("MGID"))
        .map(|v| v.trim_start_matches('.').trim().parse().expect("saquery -g MGID"))
        .collect()
}

/// Join `mgid` with `state`, check the GetResp and saquery, leave with the record OpenSM
/// returned, check the DeleteResp and that the port and the group are gone.
fn join_and_leave(fabric: &Fabric, client: &mut IbsimClient, case: &str, mgid: Ipv6Addr, state: JoinState) {
    let me = client.port_gid();
    let resp = sa_request(client, Method::Set, JOIN_MASK, join_record(mgid, me, state));
    assert_eq!(answer(&resp), (Method::Get, 0x0000), "join {state} of {mgid}: GetResp, success");
    check_spec(&format!("{case}_join"), Some(answer(&resp)));
    assert_eq!(resp.sa.component_mask, JOIN_MASK, "OpenSM echoes the component mask");
    let rec = *resp.mc_member().expect("a GetResp carries the MCMemberRecord");
    assert_eq!(ip(rec.mgid), mgid);
    assert_eq!(rec.port_gid, me);
    assert_eq!(rec.join_state, state);
    assert_eq!(rec.q_key, RDMA_UDP_QKEY);
    assert_eq!(rec.p_key, 0xFFFF);
    assert!(rec.mlid >= 0xC000, "a multicast LID: {:#x}", rec.mlid);
    // The group's parameters as OpenSM chose them for the fabric: MTU 2048 and 10 Gb/s (the
    // simulated 4x SDR links), "exactly" selectors.
    assert_eq!((rec.mtu_selector, rec.mtu), (Selector::Exactly, 4));
    assert_eq!((rec.rate_selector, rec.rate), (Selector::Exactly, 3));
    assert_eq!(rec.packet_life_time_selector, Selector::Exactly);

    let listed = members(fabric, mgid);
    assert_eq!(listed.len(), 1, "saquery -m lists one member of {mgid}: {listed:?}");
    assert_eq!(listed[0].port_gid, ip(me), "saquery -m lists our port");
    assert_eq!(listed[0].join_state(), state.0, "saquery -m shows JoinState {state}");
    assert_eq!(listed[0].mlid, rec.mlid, "saquery -m shows OpenSM's MLID");
    assert!(groups(fabric).contains(&mgid), "saquery -g lists {mgid}");

    // The kernel's leave: the SA's record, JoinState = the bits to drop, mask 0x10003.
    let leave = McMemberRecord { join_state: state, ..rec };
    let resp = sa_request(client, Method::Delete, LEAVE_MASK, leave);
    assert_eq!(answer(&resp), (Method::Delete, 0x0000), "leave {state} of {mgid}: DeleteResp, success");
    check_spec(&format!("{case}_leave"), Some(answer(&resp)));
    let back = resp.mc_member().expect("a DeleteResp carries the record");
    assert_eq!(back.join_state, JoinState::NONE, "OpenSM's DeleteResp carries the JoinState left: none");
    assert_eq!(back.mlid, rec.mlid);
    assert_eq!(ip(back.mgid), mgid);
    assert_eq!(back.port_gid, me);

    assert!(members(fabric, mgid).iter().all(|m| m.port_gid != ip(me)), "saquery -m no longer lists our port");
    assert!(!groups(fabric).contains(&mgid), "the group is gone with its last member");
}

#[test]
fn spec_table_lists_every_case() {
    let names: Vec<String> = spec_table().into_iter().map(|r| r.0).collect();
    assert_eq!(names, SPEC_CASES.map(String::from).to_vec(), "spec/opensm.md rows vs SPEC_CASES");
    assert_eq!(spec_form(Some((Method::Get, 0x600))), ("SubnAdmGetResp".to_string(), "0x0600".to_string()));
    assert_eq!(spec_form(Some((Method::Get, 0xC))), ("SubnAdmGetResp".to_string(), "0x000C".to_string()));
}

#[test]
fn client_learns_its_port_from_the_sim() {
    let fabric = Fabric::start();
    let mut c = fabric.client(NODE);
    assert_eq!(c.node_id(), NODE);
    assert_eq!(c.node_type(), 1, "an HCA");
    assert_ne!(c.port_lid(), 0, "OpenSM gave the port a LID");
    assert_ne!(c.sm_lid(), 0);
    assert_ne!(c.sm_lid(), c.port_lid(), "OpenSM runs on Switch1, not on our HCA");
    assert_eq!(c.gid_prefix(), 0xfe80_0000_0000_0000, "OpenSM's default subnet prefix");
    // The sim's SMA agrees on the port GUID (NodeInfo.PortGUID through a directed-route SMP).
    let ni = c.smp_get(0x0011, 0).expect("SubnGet(NodeInfo)");
    assert_eq!(u64::from_be_bytes(ni[20..28].try_into().unwrap()), c.port_guid());
    assert_eq!(u64::from_be_bytes(ni[12..20].try_into().unwrap()), c.node_guid());
    // ... and on the LID (SubnGet(PortInfo)).
    let pi = c.smp_get(0x0015, 0).expect("SubnGet(PortInfo)");
    assert_eq!(u16::from_be_bytes([pi[16], pi[17]]), c.port_lid());
    assert_eq!(u16::from_be_bytes([pi[18], pi[19]]), c.sm_lid());
    // OpenSM knows the port by that LID and GUID (SA NodeRecord through saquery).
    let nr = fabric.saquery(&["NR", &c.port_lid().to_string()]);
    assert!(nr.contains(&format!("port_guid...............{:#018x}", c.port_guid())), "saquery NR:\n{nr}");
    // Another client on another HCA has another LID and GID.
    let other = fabric.client(OTHER_NODE);
    assert_ne!(other.port_lid(), c.port_lid());
    assert_ne!(other.port_gid(), c.port_gid());
    // Attaching by NodeGUID walks the fabric with directed-route SMPs and finds Hca3.
    let by_guid =
        IbsimClient::connect(&IbsimOptions { node: IbsimNode::Guid(other.node_guid()), ..fabric.options(NODE) })
            .expect("attach by NodeGUID");
    assert_eq!(by_guid.node_id(), OTHER_NODE);
    assert_eq!(by_guid.port_gid(), other.port_gid());
    let err =
        IbsimClient::connect(&IbsimOptions { node: IbsimNode::Guid(0x1234), ..fabric.options(NODE) }).unwrap_err();
    assert!(err.to_string().contains("no node with NodeGUID 0x0000000000001234"), "{err}");
    // The default node: $SIM_HOST when set (as ibsim's shim does), else — the sim's default
    // port being Switch1's (OpenSM's) — the first HCA.
    let want = std::env::var("SIM_HOST").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "Hca1".to_string());
    let first = IbsimClient::connect(&IbsimOptions { node: IbsimNode::Default, ..fabric.options(NODE) })
        .expect("attach to the default node");
    assert_eq!(first.node_id(), want, "the default node (SIM_HOST={:?})", std::env::var("SIM_HOST").ok());
    let err = IbsimClient::connect(&fabric.options("NoSuchNode")).unwrap_err();
    assert!(err.to_string().contains("refused the connection"), "{err}");
    // At start OpenSM has the IPoIB broadcast group and nothing else.
    assert_eq!(groups(&fabric), vec![MGID_IPOIB_BCAST]);
}

#[test]
fn full_member_join_and_leave() {
    let fabric = Fabric::start();
    let mut c = fabric.client(NODE);
    join_and_leave(&fabric, &mut c, "full_member", MGID_CM, JoinState::FULL_MEMBER);
}

#[test]
fn send_only_full_member_join_and_leave() {
    let fabric = Fabric::start();
    let mut c = fabric.client(NODE);
    join_and_leave(&fabric, &mut c, "send_only_full_member", MGID_CM6, JoinState::SEND_ONLY_FULL_MEMBER);
}

#[test]
fn combined_join_states_and_partial_leaves() {
    // Like the kernel's multicast.c: a second join for another JoinState bit, then a Delete of
    // one bit at a time.
    let fabric = Fabric::start();
    let mut c = fabric.client(NODE);
    let me = c.port_gid();
    let full = JoinState::FULL_MEMBER;
    let send_only = JoinState::SEND_ONLY_FULL_MEMBER;
    let join = |c: &mut IbsimClient, state: JoinState| {
        let resp = sa_request(c, Method::Set, JOIN_MASK, join_record(MGID_CM, me, state));
        assert_eq!(answer(&resp), (Method::Get, 0), "join {state}");
        *resp.mc_member().unwrap()
    };
    let leave = |c: &mut IbsimClient, rec: McMemberRecord, state: JoinState| {
        let resp = sa_request(c, Method::Delete, LEAVE_MASK, McMemberRecord { join_state: state, ..rec });
        (answer(&resp), resp.mc_member().unwrap().join_state)
    };
    let held = |fabric: &Fabric| -> Option<u8> {
        let listed = members(fabric, MGID_CM);
        assert!(listed.len() <= 1, "{listed:?}");
        listed.first().map(|m| m.join_state())
    };

    join(&mut c, full);
    let rec = join(&mut c, send_only);
    check_spec("join_second_bit", Some((Method::Get, 0)));
    assert_eq!(rec.join_state, full | send_only, "the GetResp carries the JoinState the port now holds");
    assert_eq!(held(&fabric), Some(0x9), "saquery: FullMember|SendOnlyFullMember");

    // Dropping SendOnlyFullMember keeps the FullMember bit; the DeleteResp carries the
    // JoinState the port keeps.
    let (got, kept) = leave(&mut c, rec, send_only);
    check_spec("leave_send_only_keeps_full", Some(got));
    assert_eq!(kept, full);
    assert_eq!(held(&fabric), Some(0x1), "saquery: FullMember left");

    // Dropping FullMember while SendOnlyFullMember is held: OpenSM counts only FullMember
    // (0x1) as keeping the group, so with its last full member gone it removes every member,
    // our send-only membership included (the empty group itself goes at the next re-route).
    let rec = join(&mut c, send_only);
    assert_eq!(rec.join_state, full | send_only);
    // The DeleteResp says JoinState 0: the port keeps nothing.
    let (got, kept) = leave(&mut c, rec, full);
    check_spec("leave_full_drops_send_only", Some(got));
    assert_eq!(kept, JoinState::NONE);
    assert_eq!(held(&fabric), None, "OpenSM dropped the send-only membership with the last full member");
    let get = sa_request(&mut c, Method::Get, LEAVE_MASK, join_record(MGID_CM, me, send_only));
    check_spec("get_after_dropped", Some(answer(&get)));
    // So the kernel's next step, the Delete of the send-only bit, is refused.
    check_spec("leave_send_only_after_dropped", Some(leave(&mut c, rec, send_only).0));
}

#[test]
fn sa_assigned_mgid() {
    let fabric = Fabric::start();
    let mut c = fabric.client(NODE);
    let me = c.port_gid();
    let resp =
        sa_request(&mut c, Method::Set, JOIN_MASK, join_record(Ipv6Addr::UNSPECIFIED, me, JoinState::FULL_MEMBER));
    check_spec("sa_assigned_mgid_join", Some(answer(&resp)));
    let rec = *resp.mc_member().unwrap();
    let mgid = ip(rec.mgid);
    println!("OpenSM assigned MGID {mgid}, MLID {:#x}", rec.mlid);
    // o15-0.2.4: an SA-assigned MGID is ff1x:a01b:<P_Key>:... (the kernel recognises such
    // MGIDs by (word0 & 0xFFF0FFFF) == 0xFF10A01B).
    assert_eq!(u32::from_be_bytes(rec.mgid.0[0..4].try_into().unwrap()) & 0xFFF0_FFFF, 0xFF10_A01B, "{mgid}");
    assert_eq!(members(&fabric, mgid).len(), 1);
    let resp =
        sa_request(&mut c, Method::Delete, LEAVE_MASK, McMemberRecord { join_state: JoinState::FULL_MEMBER, ..rec });
    check_spec("sa_assigned_mgid_leave", Some(answer(&resp)));
    assert!(!groups(&fabric).contains(&mgid));
}

/// One request of the status table (spec/opensm.md).
struct Case {
    name: &'static str,
    method: Method,
    mask: u64,
    rec: McMemberRecord,
    /// What OpenSM answered: response method and status; `None`: no answer at all.
    expect: Option<(Method, u16)>,
}

#[test]
fn bad_requests_and_their_statuses() {
    let fabric = Fabric::start();
    let mut c = fabric.client(NODE);
    let other = fabric.client(OTHER_NODE);
    let me = c.port_gid();
    let full = JoinState::FULL_MEMBER;
    let send_only = JoinState::SEND_ONLY_FULL_MEMBER;
    let j = |mgid, gid, state| join_record(mgid, gid, state);
    let unknown_port = Gid::from_parts(0xfe80_0000_0000_0000, 0x0002_c903_dead_beef);
    let wrong_prefix = Gid::from_parts(0xfec0_0000_0000_0000, c.port_guid());

    // First the requests on a fabric without our groups.
    let mut cases = vec![
        Case {
            name: "join_no_join_state",
            method: Method::Set,
            mask: JOIN_MASK & !ComponentMask::JOIN_STATE.0,
            rec: j(MGID_CM, me, full),
            expect: Some((Method::Get, 0x0600)),
        },
        Case {
            name: "join_no_port_gid",
            method: Method::Set,
            mask: JOIN_MASK & !ComponentMask::PORT_GID.0,
            rec: j(MGID_CM, me, full),
            expect: Some((Method::Get, 0x0600)),
        },
        Case {
            name: "join_no_mgid",
            method: Method::Set,
            mask: JOIN_MASK & !ComponentMask::MGID.0,
            rec: j(MGID_CM, me, full),
            expect: Some((Method::Get, 0x0600)),
        },
        Case {
            name: "create_no_qkey",
            method: Method::Set,
            mask: JOIN_MASK & !ComponentMask::Q_KEY.0,
            rec: j(MGID_CM, me, full),
            expect: Some((Method::Get, 0x0600)),
        },
        Case {
            name: "create_leave_mask_only",
            method: Method::Set,
            mask: LEAVE_MASK,
            rec: j(MGID_CM, me, full),
            expect: Some((Method::Get, 0x0600)),
        },
        Case {
            name: "proxy_join_other_ports_gid",
            method: Method::Set,
            mask: JOIN_MASK,
            rec: j(MGID_PROXY, other.port_gid(), full),
            expect: Some((Method::Get, 0x0000)),
        },
        Case {
            name: "join_unknown_port_gid",
            method: Method::Set,
            mask: JOIN_MASK,
            rec: j(MGID_CM, unknown_port, full),
            expect: Some((Method::Get, 0x0200)),
        },
        Case {
            name: "join_wrong_subnet_prefix",
            method: Method::Set,
            mask: JOIN_MASK,
            rec: j(MGID_CM, wrong_prefix, full),
            expect: Some((Method::Get, 0x0500)),
        },
        Case {
            name: "join_ipoib_mgid_rdma_cm_qkey",
            method: Method::Set,
            mask: JOIN_MASK,
            rec: j(MGID_IPOIB, me, full),
            expect: Some((Method::Get, 0x0200)),
        },
        Case {
            name: "join_join_state_zero",
            method: Method::Set,
            mask: JOIN_MASK,
            rec: j(MGID_CM, me, JoinState::NONE),
            expect: Some((Method::Get, 0x0200)),
        },
        Case {
            name: "leave_unknown_group",
            method: Method::Delete,
            mask: LEAVE_MASK,
            rec: j(MGID_CM, me, full),
            expect: Some((Method::Delete, 0x0200)),
        },
        Case {
            name: "leave_no_join_state",
            method: Method::Delete,
            mask: LEAVE_MASK & !ComponentMask::JOIN_STATE.0,
            rec: j(MGID_CM, me, full),
            expect: Some((Method::Delete, 0x0600)),
        },
        Case {
            name: "leave_ipoib_broadcast_not_member",
            method: Method::Delete,
            mask: LEAVE_MASK,
            rec: j(MGID_IPOIB_BCAST, me, full),
            expect: Some((Method::Delete, 0x0200)),
        },
        Case {
            name: "send_method_unsupported",
            method: Method::Send,
            mask: JOIN_MASK,
            rec: j(MGID_CM, me, full),
            expect: None,
        },
    ];
    let mut table = Vec::new();
    let mut run = |c: &mut IbsimClient, case: &Case| {
        let got = sa_try(c, case.method, case.mask, case.rec).map(|r| answer(&r));
        table.push((case.name, case.method, case.mask, case.rec.join_state, got, case.expect));
    };
    for case in &cases {
        run(&mut c, case);
    }
    // Nothing of the first batch created MGID_CM; the proxy join made Hca3 a member of
    // MGID_PROXY, with ProxyJoin set in OpenSM's record.
    assert!(members(&fabric, MGID_CM).is_empty(), "no bad request created {MGID_CM}");
    let proxied = members(&fabric, MGID_PROXY);
    assert_eq!(proxied.len(), 1, "{proxied:?}");
    assert_eq!(proxied[0].port_gid, ip(other.port_gid()));
    assert!(proxied[0].proxy_join, "OpenSM marks the membership ProxyJoin");

    // Then requests on a group we are a FullMember of.
    let joined = sa_request(&mut c, Method::Set, JOIN_MASK, j(MGID_CM, me, full));
    assert_eq!(answer(&joined), (Method::Get, 0));
    let rec = *joined.mc_member().unwrap();
    cases = vec![
        Case {
            name: "rejoin_same_state",
            method: Method::Set,
            mask: JOIN_MASK,
            rec: j(MGID_CM, me, full),
            expect: Some((Method::Get, 0x0000)),
        },
        Case {
            name: "join_other_qkey",
            method: Method::Set,
            mask: JOIN_MASK,
            rec: McMemberRecord { q_key: 0x1111_1111, ..j(MGID_CM, me, full) },
            expect: Some((Method::Get, 0x0200)),
        },
        Case {
            name: "leave_state_not_held",
            method: Method::Delete,
            mask: LEAVE_MASK,
            rec: McMemberRecord { join_state: send_only, ..rec },
            expect: Some((Method::Delete, 0x0200)),
        },
        Case {
            name: "leave_other_ports_gid",
            method: Method::Delete,
            mask: LEAVE_MASK,
            rec: McMemberRecord { port_gid: other.port_gid(), ..rec },
            expect: Some((Method::Delete, 0x0200)),
        },
        Case {
            name: "proxy_leave_other_ports_gid",
            method: Method::Delete,
            mask: LEAVE_MASK,
            rec: j(MGID_PROXY, other.port_gid(), full),
            expect: Some((Method::Delete, 0x0000)),
        },
        Case {
            name: "leave",
            method: Method::Delete,
            mask: LEAVE_MASK,
            rec: McMemberRecord { join_state: full, ..rec },
            expect: Some((Method::Delete, 0x0000)),
        },
        Case {
            name: "leave_again",
            method: Method::Delete,
            mask: LEAVE_MASK,
            rec: McMemberRecord { join_state: full, ..rec },
            expect: Some((Method::Delete, 0x0200)),
        },
    ];
    for case in &cases {
        run(&mut c, case);
    }

    println!("| case | request | mask | JoinState | OpenSM | status |");
    for (name, method, mask, js, got, _) in &table {
        match got {
            Some((m, st)) => println!("| {name} | {method:?} | {mask:#x} | {:#x} | {m:?} | {st:#06x} |", js.0),
            None => println!("| {name} | {method:?} | {mask:#x} | {:#x} | none | none |", js.0),
        }
    }
    let wrong: Vec<_> = table.iter().filter(|t| t.4 != t.5).collect();
    assert!(
        wrong.is_empty(),
        "OpenSM answered otherwise than this test expects: {:#?}",
        wrong.iter().map(|t| (t.0, t.4)).collect::<Vec<_>>()
    );
    for (name, _, _, _, got, _) in &table {
        check_spec(name, *got);
    }
    // Both groups are gone again; the broadcast group stays.
    assert_eq!(groups(&fabric), vec![MGID_IPOIB_BCAST]);
}
