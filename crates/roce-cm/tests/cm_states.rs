//! The rdma_cm_id transition table, spec/cm-states.csv, walked row by row against the engine.
//!
//! For every row: a fresh pair of stacks on a simulated wire, an id driven into the row's
//! state by that state's recipe (spec/cm-states.md), the row's input applied, then the result
//! of the call, the id's state and the events it received compared with the row. Every
//! mismatching row is listed before the test fails. The table must hold exactly one row for
//! every (state, call) pair of `roce_cm::CmState` × the calls below.

use core::time::Duration;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use roce_cm::id::ALL_STATES;
use roce_cm::{
    CmEvent, CmId, CmState, ConnectParam, Errno, EventKind, IbService, Instant, PortSpace, QpType, Stack, StackConfig,
};
use roce_wire::mad::{MadStatus, Method};
use roce_wire::mcmember::JoinState;
use roce_wire::sa::{attr, SaData, SaMad};
use roce_wire::service_record::ServiceRecord;
use roce_wire::Gid;

/// The host under test (stack 0).
const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The peer (stack 1): CM listeners on TCP and UDP port [`PORT`], and a toy SA.
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const PORT: u16 = 7000;
const GROUP: Ipv4Addr = Ipv4Addr::new(239, 1, 2, 3);
/// How long the wire runs after a call (and for most asynchronous inputs): long enough for
/// ARP, the SA and a CM exchange, shorter than TIMEWAIT (1 s) and any CM retransmission.
const SETTLE: Duration = Duration::from_millis(100);

/// The calls of the table, as the CSV names them.
const CALLS: [&str; 15] = [
    "bind_addr",
    "resolve_addr",
    "resolve_route",
    "listen",
    "connect",
    "accept",
    "reject",
    "disconnect",
    "join_multicast",
    "leave_multicast",
    "destroy_id",
    "set_reuseaddr(true)",
    "set_reuseaddr(false)",
    "set_afonly",
    "resolve_ib_service",
];

/// The asynchronous inputs the table may use (each where it applies).
const ASYNC: [&str; 15] = [
    "addr_resolved",
    "addr_error",
    "route_resolved",
    "req_received",
    "rep_received",
    "rej_received",
    "rtu_received",
    "req_timeout",
    "dreq_received",
    "drep_received",
    "timewait_expiry",
    "sidr_rep_received",
    "device_removal",
    "addrinfo_resolved",
    "addrinfo_error",
];

// ------------------------------------------------------------------------------------------
// The table

#[derive(Debug, Clone)]
struct Row {
    line: usize,
    state: CmState,
    input: String,
    result: Result<(), Errno>,
    /// `None`: unchanged; `Some(None)`: gone; `Some(Some(s))`: s.
    next: Option<Option<CmState>>,
    event: String,
}

/// One CSV record: fields separated by commas, a field may be double-quoted (with `""` for a
/// quote inside).
fn csv_fields(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            (true, '"') => quoted = false,
            (false, '"') if cur.is_empty() => quoted = true,
            (false, ',') => out.push(std::mem::take(&mut cur)),
            (_, c) => cur.push(c),
        }
    }
    out.push(cur);
    out
}

fn load_table() -> Vec<Row> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../spec/cm-states.csv");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut lines = text.lines().enumerate();
    let (_, header) = lines.next().expect("a header");
    assert_eq!(csv_fields(header), ["state", "input", "result", "next_state", "event", "source", "note"]);
    let mut rows = Vec::new();
    for (i, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let line_no = i + 1;
        let f = csv_fields(line);
        assert_eq!(f.len(), 7, "line {line_no}: 7 fields expected: {line}");
        let state = CmState::from_name(&f[0]).unwrap_or_else(|| panic!("line {line_no}: state {:?}", f[0]));
        let input = f[1].clone();
        assert!(
            CALLS.contains(&input.as_str()) || ASYNC.contains(&input.as_str()),
            "line {line_no}: unknown input {input:?}"
        );
        let result = match f[2].as_str() {
            "ok" => Ok(()),
            e => Err(Errno::from_name(e).unwrap_or_else(|| panic!("line {line_no}: result {e:?}"))),
        };
        let next = match f[3].as_str() {
            "-" => None,
            "gone" => Some(None),
            s => Some(Some(CmState::from_name(s).unwrap_or_else(|| panic!("line {line_no}: next_state {s:?}")))),
        };
        let event = f[4].clone();
        for name in event.split('+').filter(|n| *n != "-") {
            assert!(EventKind::from_name(name).is_some(), "line {line_no}: event {name:?}");
        }
        assert!(!f[5].trim().is_empty(), "line {line_no}: a source is required");
        rows.push(Row { line: line_no, state, input, result, next, event });
    }
    rows
}

// ------------------------------------------------------------------------------------------
// Two stacks on a wire

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    Accept,
    Reject,
    /// Leave every request unanswered (an application that takes its time).
    Hold,
}

/// Stack 0 is the host under test; stack 1 is the peer: it listens on TCP and UDP port
/// [`PORT`], answers connection requests by `policy`, and answers SA Set and Delete like the
/// in-crate test SA. `link_up == false` drops every frame in both directions.
struct Wire {
    stacks: [Stack; 2],
    now: Instant,
    link_up: bool,
    policy: Policy,
    /// The peer's child ids, in the order their requests arrived.
    peer_children: Vec<CmId>,
    /// Every event of the peer (its id and kind), in order.
    peer_events: Vec<(CmId, EventKind)>,
    /// Every event of stack 0 since the last [`Wire::take_events`].
    events: Vec<CmEvent>,
}

impl Wire {
    fn new() -> Wire {
        let mut a = StackConfig::new([2, 0, 0, 0, 0, 1], A, 24);
        a.sa = Some(IpAddr::V4(B));
        let mut b = StackConfig::new([2, 0, 0, 0, 0, 2], B, 24);
        b.seed ^= 0x5555_5555;
        let mut peer = Stack::new(b);
        peer.register_mad_agent(0x03);
        for (ps, qp) in [(PortSpace::Tcp, QpType::Rc), (PortSpace::Udp, QpType::Ud)] {
            let l = peer.create_id(ps, qp).unwrap();
            peer.bind_addr(l, SocketAddr::new(IpAddr::V4(B), PORT)).unwrap();
            peer.listen(l, 8).unwrap();
        }
        Wire {
            stacks: [Stack::new(a), peer],
            now: Instant::ZERO,
            link_up: true,
            policy: Policy::Accept,
            peer_children: Vec::new(),
            peer_events: Vec::new(),
            events: Vec::new(),
        }
    }

    fn host(&mut self) -> &mut Stack {
        &mut self.stacks[0]
    }

    /// The peer's application: accept or reject every request; answer the SA's MADs.
    fn peer_app(&mut self) {
        let now = self.now;
        while let Some(ev) = self.stacks[1].poll_event() {
            self.peer_events.push((ev.id, ev.kind));
            if ev.kind == EventKind::ConnectRequest {
                self.peer_children.push(ev.id);
                let r = match self.policy {
                    Policy::Accept => self.stacks[1].accept(now, ev.id, &ConnectParam::default()),
                    Policy::Reject => self.stacks[1].reject(ev.id, b"no"),
                    Policy::Hold => Ok(()),
                };
                r.expect("the peer answers the request");
            }
            // The peer's ids have no QP: the REP comes as CONNECT_RESPONSE, and the peer's
            // application sends the RTU (rdma_establish).
            if ev.kind == EventKind::ConnectResponse {
                self.stacks[1].establish(ev.id).expect("the peer establishes");
            }
        }
        while let Some(req) = self.stacks[1].poll_mad_request() {
            let m = SaMad::parse(&req.mad).expect("an SA MAD");
            if m.header.attribute_id == attr::SERVICE_RECORD {
                // rdma_resolve_ib_service's GetTable: one record, the peer's service.
                let rec = ServiceRecord {
                    service_id: m.data.as_service().map_or(0, |q| q.service_id),
                    service_gid: Gid::from_ipv4(B),
                    service_p_key: 0xFFFF,
                    ..ServiceRecord::default()
                };
                let resp = m.response_to(Method::GetTable, MadStatus(0), SaData::service(rec));
                self.stacks[1].send_mad(req.src, req.src_qp, &resp.to_bytes());
                continue;
            }
            let mut rec = *m.mc_member().expect("an MCMemberRecord");
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

    /// Move frames and fire timers until nothing moves, advancing time up to `d`.
    fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        let mut buf = vec![0u8; 9000];
        for _ in 0..200_000 {
            let mut moved = false;
            for i in 0..2 {
                while let Some(n) = self.stacks[i].poll_transmit(self.now, &mut buf) {
                    if self.link_up {
                        self.stacks[1 - i].handle_frame(self.now, &buf[..n]);
                    }
                    moved = true;
                }
            }
            self.peer_app();
            self.events.extend(std::iter::from_fn(|| self.stacks[0].poll_event()));
            if moved {
                continue;
            }
            match self.stacks.iter().filter_map(|s| s.poll_timeout()).min() {
                Some(t) if t <= end => {
                    self.now = self.now.max(t);
                    let now = self.now;
                    for s in &mut self.stacks {
                        s.handle_timeout(now);
                    }
                }
                _ => {
                    self.now = end;
                    return;
                }
            }
        }
        panic!("the wire does not come to rest");
    }

    /// Stack 0's events so far (including ones queued by a call not followed by a run).
    fn take_events(&mut self) -> Vec<CmEvent> {
        self.events.extend(std::iter::from_fn(|| self.stacks[0].poll_event()));
        std::mem::take(&mut self.events)
    }

    /// Run until stack 0 has an event of `kind` and return it (other events are kept).
    fn expect_event(&mut self, kind: EventKind) -> CmEvent {
        self.run_for(SETTLE);
        let pos = self.events.iter().position(|e| e.kind == kind);
        let pos = pos.unwrap_or_else(|| panic!("recipe: no {kind:?} among {:?}", self.events));
        self.events.remove(pos)
    }
}

fn peer_addr() -> SocketAddr {
    SocketAddr::new(IpAddr::V4(B), PORT)
}

fn group() -> IpAddr {
    IpAddr::V4(GROUP)
}

// ------------------------------------------------------------------------------------------
// Recipes

/// A fresh id of the port space the recipes use for the address states (multicast needs UD).
fn udp_id(w: &mut Wire) -> CmId {
    w.host().create_id(PortSpace::Udp, QpType::Ud).unwrap()
}

fn bound(w: &mut Wire, ps: PortSpace, qp: QpType, port: u16) -> CmId {
    let id = w.host().create_id(ps, qp).unwrap();
    w.host().bind_addr(id, SocketAddr::new(IpAddr::V4(A), port)).unwrap();
    id
}

/// resolve_addr + resolve_route to the peer's listener, each run to completion.
fn route_resolved(w: &mut Wire, ps: PortSpace, qp: QpType) -> CmId {
    let id = w.host().create_id(ps, qp).unwrap();
    let now = w.now;
    w.host().resolve_addr(now, id, None, peer_addr(), Duration::from_secs(2)).unwrap();
    w.expect_event(EventKind::AddrResolved);
    let now = w.now;
    w.host().resolve_route(now, id, Duration::from_secs(1)).unwrap();
    w.expect_event(EventKind::RouteResolved);
    id
}

/// An active id whose REQ (SIDR_REQ for UD) is queued but not yet on the wire.
fn connecting(w: &mut Wire, ps: PortSpace, qp: QpType) -> CmId {
    let id = route_resolved(w, ps, qp);
    let now = w.now;
    w.host().connect(now, id, &ConnectParam::default()).unwrap();
    id
}

/// An active TCP/RC id, established with the peer. The id has no QP, so the REP is
/// reported as CONNECT_RESPONSE and the application sends the RTU (`rdma_establish`).
fn established(w: &mut Wire) -> CmId {
    let id = connecting(w, PortSpace::Tcp, QpType::Rc);
    w.expect_event(EventKind::ConnectResponse);
    w.host().establish(id).unwrap();
    w.run_for(SETTLE);
    id
}

/// A TCP listener on the host's address.
fn listener(w: &mut Wire) -> CmId {
    let id = bound(w, PortSpace::Tcp, QpType::Rc, PORT);
    w.host().listen(id, 8).unwrap();
    id
}

/// The peer connects to the host's TCP listener: resolve, route, connect (REQ queued).
fn peer_connects(w: &mut Wire) {
    let p = &mut w.stacks[1];
    let id = p.create_id(PortSpace::Tcp, QpType::Rc).unwrap();
    let dst = SocketAddr::new(IpAddr::V4(A), PORT);
    p.resolve_addr(w.now, id, None, dst, Duration::from_secs(2)).unwrap();
    w.run_for(SETTLE);
    let now = w.now;
    w.stacks[1].resolve_route(now, id, Duration::from_secs(1)).unwrap();
    w.run_for(SETTLE);
    let now = w.now;
    w.stacks[1].connect(now, id, &ConnectParam::default()).unwrap();
}

/// A passive child of the host's listener holding the peer's unanswered REQ.
fn passive_child(w: &mut Wire) -> CmId {
    listener(w);
    peer_connects(w);
    w.expect_event(EventKind::ConnectRequest).id
}

/// The service the recipes resolve (the peer's toy SA answers every ServiceRecord query).
fn service() -> IbService {
    IbService::by_id(0x1000_0000_0000_0001)
}

/// The kernel's budget for the SA query of `rdma_resolve_ib_service`.
const SERVICE_TIMEOUT: Duration = roce_cm::service::KERNEL_TIMEOUT;

/// Join [`GROUP`] and wait for MULTICAST_JOIN.
fn joined(w: &mut Wire, id: CmId) {
    let now = w.now;
    w.host().join_multicast(now, id, group(), JoinState::FULL_MEMBER).unwrap();
    w.expect_event(EventKind::MulticastJoin);
}

/// Drive a fresh id into `state`, shaped for `input` where a state has several shapes
/// (spec/cm-states.md, "Recipes"). For DESTROYING the returned handle is already gone.
fn recipe(w: &mut Wire, state: CmState, input: &str) -> CmId {
    let id = match state {
        CmState::Idle => udp_id(w),
        CmState::AddrBound => {
            let id = bound(w, PortSpace::Udp, QpType::Ud, 0);
            if input == "leave_multicast" {
                joined(w, id);
            }
            id
        }
        CmState::AddrQuery => {
            let id = udp_id(w);
            let now = w.now;
            w.host().resolve_addr(now, id, None, peer_addr(), Duration::from_secs(2)).unwrap();
            id
        }
        CmState::AddrResolved => {
            let id = udp_id(w);
            let now = w.now;
            w.host().resolve_addr(now, id, None, peer_addr(), Duration::from_secs(2)).unwrap();
            w.expect_event(EventKind::AddrResolved);
            if input == "leave_multicast" {
                joined(w, id);
            }
            id
        }
        CmState::RouteQuery => {
            let id = udp_id(w);
            let now = w.now;
            w.host().resolve_addr(now, id, None, peer_addr(), Duration::from_secs(2)).unwrap();
            w.expect_event(EventKind::AddrResolved);
            let now = w.now;
            w.host().resolve_route(now, id, Duration::from_secs(1)).unwrap();
            id
        }
        CmState::RouteResolved => route_resolved(w, PortSpace::Udp, QpType::Ud),
        CmState::Connect => match input {
            "rep_received" | "rej_received" | "req_timeout" => connecting(w, PortSpace::Tcp, QpType::Rc),
            "sidr_rep_received" => connecting(w, PortSpace::Udp, QpType::Ud),
            "dreq_received" => established(w),
            "drep_received" => {
                let id = established(w);
                let now = w.now;
                w.host().disconnect(now, id).unwrap();
                id
            }
            "rtu_received" => {
                let id = passive_child(w);
                let now = w.now;
                w.host().accept(now, id, &ConnectParam::default()).unwrap();
                id
            }
            _ => passive_child(w),
        },
        CmState::Disconnect => {
            let id = established(w);
            let now = w.now;
            w.host().disconnect(now, id).unwrap();
            w.expect_event(EventKind::Disconnected);
            id
        }
        CmState::Listen => listener(w),
        CmState::DeviceRemoval => {
            let id = bound(w, PortSpace::Udp, QpType::Ud, 0);
            w.host().remove_device();
            w.expect_event(EventKind::DeviceRemoval);
            id
        }
        CmState::Destroying => {
            let id = bound(w, PortSpace::Udp, QpType::Ud, 0);
            let now = w.now;
            w.host().destroy_id(now, id).unwrap();
            id
        }
        CmState::AddrInfoQuery => {
            let id = bound(w, PortSpace::Udp, QpType::Ud, 0);
            let now = w.now;
            w.host().resolve_ib_service(now, id, &service(), SERVICE_TIMEOUT).unwrap();
            id
        }
        CmState::AddrInfoResolved => {
            let id = bound(w, PortSpace::Udp, QpType::Ud, 0);
            let now = w.now;
            w.host().resolve_ib_service(now, id, &service(), SERVICE_TIMEOUT).unwrap();
            w.expect_event(EventKind::AddrInfoResolved);
            id
        }
    };
    let got = w.host().state(id);
    let want = if state == CmState::Destroying { None } else { Some(state) };
    assert_eq!(got, want, "recipe for {} (input {input}) reached {got:?}", state.name());
    w.take_events();
    id
}

// ------------------------------------------------------------------------------------------
// Inputs

fn call(w: &mut Wire, id: CmId, input: &str) -> Result<(), Errno> {
    let now = w.now;
    let s = w.host();
    match input {
        "bind_addr" => s.bind_addr(id, SocketAddr::new(IpAddr::V4(A), 0)),
        "resolve_addr" => s.resolve_addr(now, id, None, peer_addr(), Duration::from_secs(2)),
        "resolve_route" => s.resolve_route(now, id, Duration::from_secs(1)),
        "listen" => s.listen(id, 8),
        "connect" => s.connect(now, id, &ConnectParam::default()),
        "accept" => s.accept(now, id, &ConnectParam::default()),
        "reject" => s.reject(id, b"no"),
        "disconnect" => s.disconnect(now, id),
        "join_multicast" => s.join_multicast(now, id, group(), JoinState::FULL_MEMBER),
        "leave_multicast" => s.leave_multicast(now, id, group()),
        "destroy_id" => s.destroy_id(now, id),
        "set_reuseaddr(true)" => s.set_reuseaddr(id, true),
        "set_reuseaddr(false)" => s.set_reuseaddr(id, false),
        "set_afonly" => s.set_afonly(id, true),
        "resolve_ib_service" => s.resolve_ib_service(now, id, &service(), SERVICE_TIMEOUT),
        other => unreachable!("not a call: {other}"),
    }
}

/// Deliver an asynchronous input (the recipe has set up what it needs).
fn deliver(w: &mut Wire, input: &str) {
    match input {
        "device_removal" => w.host().remove_device(),
        "addr_error" | "addrinfo_error" | "req_timeout" => {
            w.link_up = false;
            w.run_for(Duration::from_secs(if input == "req_timeout" { 90 } else { 5 }));
        }
        "rej_received" => {
            w.policy = Policy::Reject;
            w.run_for(SETTLE);
        }
        "dreq_received" => {
            let child = *w.peer_children.last().expect("the peer's child");
            let now = w.now;
            w.stacks[1].disconnect(now, child).unwrap();
            w.run_for(SETTLE);
        }
        "timewait_expiry" => w.run_for(Duration::from_secs(2)),
        "req_received" => {
            peer_connects(w);
            w.run_for(SETTLE);
        }
        // addr_resolved, route_resolved, rep/rtu/drep/sidr_rep received: the wire delivers.
        _ => w.run_for(SETTLE),
    }
}

fn state_name(s: Option<CmState>) -> &'static str {
    s.map_or("gone", CmState::name)
}

fn result_name(r: Result<(), Errno>) -> &'static str {
    r.map_or_else(Errno::name, |()| "ok")
}

/// Run one row; `Err` describes every way it differs from the table.
fn check_row(row: &Row) -> Result<(), String> {
    let mut w = Wire::new();
    let id = recipe(&mut w, row.state, &row.input);
    let before = w.host().state(id);
    let (result, after) = if CALLS.contains(&row.input.as_str()) {
        let r = call(&mut w, id, &row.input);
        let after = w.host().state(id);
        w.run_for(SETTLE);
        (r, after)
    } else {
        deliver(&mut w, &row.input);
        (Ok(()), w.host().state(id))
    };
    let events: Vec<&str> =
        w.take_events().iter().filter(|e| e.id == id || e.listen_id == Some(id)).map(|e| e.kind.name()).collect();
    let events = if events.is_empty() { "-".to_string() } else { events.join("+") };
    let want_state = match row.next {
        None => before,
        Some(s) => s,
    };
    let mut diffs = Vec::new();
    if result != row.result {
        diffs.push(format!("result {} (table {})", result_name(result), result_name(row.result)));
    }
    if after != want_state {
        diffs.push(format!("state {} (table {})", state_name(after), state_name(want_state)));
    }
    if events != row.event {
        diffs.push(format!("event {events} (table {})", row.event));
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(format!("line {}: {},{}: {}", row.line, row.state.name(), row.input, diffs.join("; ")))
    }
}

// ------------------------------------------------------------------------------------------
// Tests

#[test]
fn table_covers_every_state_and_call_once() {
    let rows = load_table();
    let mut seen: BTreeMap<(CmState, String), usize> = BTreeMap::new();
    let mut problems = Vec::new();
    for r in &rows {
        if let Some(first) = seen.insert((r.state, r.input.clone()), r.line) {
            problems.push(format!("{},{}: rows at lines {first} and {}", r.state.name(), r.input, r.line));
        }
    }
    for st in ALL_STATES {
        for c in CALLS {
            if !seen.contains_key(&(st, c.to_string())) {
                problems.push(format!("{},{c}: no row", st.name()));
            }
        }
        if !seen.contains_key(&(st, "device_removal".to_string())) {
            problems.push(format!("{},device_removal: no row", st.name()));
        }
    }
    let used: BTreeSet<&str> = rows.iter().map(|r| r.input.as_str()).collect();
    for a in ASYNC {
        if !used.contains(a) {
            problems.push(format!("asynchronous input {a} is used by no row"));
        }
    }
    assert!(problems.is_empty(), "spec/cm-states.csv:\n{}", problems.join("\n"));
}

#[test]
fn every_row_of_the_table_holds() {
    let rows = load_table();
    let failures: Vec<String> = rows.iter().filter_map(|r| check_row(r).err()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} rows of spec/cm-states.csv do not hold:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}

// ------------------------------------------------------------------------------------------
// Kernel behaviour the table's one shape per state does not show

/// cma.c rdma_join_multicast: only UD ids may join.
#[test]
fn join_needs_a_ud_id() {
    let mut w = Wire::new();
    let id = bound(&mut w, PortSpace::Tcp, QpType::Rc, 0);
    let now = w.now;
    assert_eq!(w.host().join_multicast(now, id, group(), JoinState::FULL_MEMBER), Err(Errno::EINVAL));
}

/// cma.c rdma_listen: a listening id is reusable no more, so a reuseaddr bind beside it fails.
#[test]
fn listening_clears_reuseaddr() {
    let mut w = Wire::new();
    let s = w.host();
    let l = s.create_id(PortSpace::Tcp, QpType::Rc).unwrap();
    s.set_reuseaddr(l, true).unwrap();
    s.bind_addr(l, SocketAddr::new(IpAddr::V4(A), 8000)).unwrap();
    s.listen(l, 1).unwrap();
    assert!(!s.id(l).unwrap().reuseaddr);
    let o = s.create_id(PortSpace::Tcp, QpType::Rc).unwrap();
    s.set_reuseaddr(o, true).unwrap();
    assert_eq!(s.bind_addr(o, SocketAddr::new(IpAddr::V4(A), 8000)), Err(Errno::EADDRINUSE));
}

/// Device removal reaches only ids on the device: a wildcard listener is not told.
#[test]
fn device_removal_skips_ids_without_a_device() {
    let mut w = Wire::new();
    let s = w.host();
    let wild = s.create_id(PortSpace::Tcp, QpType::Rc).unwrap();
    s.listen(wild, 1).unwrap();
    let specific = bound(&mut w, PortSpace::Udp, QpType::Ud, 0);
    w.host().remove_device();
    let ev = w.take_events();
    assert_eq!(ev.iter().map(|e| (e.id, e.kind)).collect::<Vec<_>>(), [(specific, EventKind::DeviceRemoval)]);
    assert_eq!(w.host().state(wild), Some(CmState::Listen));
    // A wildcard listener has no IB CM id: rdma_disconnect refuses it.
    let now = w.now;
    assert_eq!(w.host().disconnect(now, wild), Err(Errno::EINVAL));
}

/// After TIMEWAIT the IB CM id still exists: disconnect answers 0, reject EINVAL.
#[test]
fn after_timewait_disconnect_is_still_zero() {
    let mut w = Wire::new();
    let id = established(&mut w);
    let now = w.now;
    w.host().disconnect(now, id).unwrap();
    w.run_for(Duration::from_secs(2));
    let kinds: Vec<_> = w.take_events().iter().filter(|e| e.id == id).map(|e| e.kind).collect();
    assert_eq!(kinds, [EventKind::Disconnected, EventKind::TimewaitExit]);
    let now = w.now;
    assert_eq!(w.host().disconnect(now, id), Ok(()));
    assert_eq!(w.host().reject(id, &[]), Err(Errno::EINVAL));
    assert_eq!(w.host().state(id), Some(CmState::Disconnect));
}

/// rdma_accept on an id with nothing to answer fails and rejects what is outstanding (cma.c:
/// `goto reject`): an active id's REQ is abandoned, so the peer's REP finds nothing and the
/// id never hears ESTABLISHED; its IB CM id remains (disconnect 0, reject EINVAL).
#[test]
fn accept_on_an_active_id_abandons_its_request() {
    let mut w = Wire::new();
    let id = connecting(&mut w, PortSpace::Tcp, QpType::Rc);
    let now = w.now;
    assert_eq!(w.host().accept(now, id, &ConnectParam::default()), Err(Errno::EINVAL));
    w.run_for(SETTLE);
    assert!(w.take_events().iter().all(|e| e.id != id));
    assert_eq!(w.host().state(id), Some(CmState::Connect));
    let now = w.now;
    assert_eq!(w.host().disconnect(now, id), Ok(()));
    assert_eq!(w.host().reject(id, &[]), Err(Errno::EINVAL));
}

/// Destroying an active id whose REQ is outstanding sends REJ Timeout with the CA GUID, which
/// the peer matches by our communication ID: its child hears REJECTED (status 4).
#[test]
fn destroy_with_a_req_outstanding_rejects_it() {
    let mut w = Wire::new();
    // The host listens; the peer's REQ creates a child there; the peer destroys its id.
    let child = passive_child(&mut w);
    let peer_active = w.stacks[1].ids().max().unwrap();
    let now = w.now;
    w.stacks[1].destroy_id(now, peer_active).unwrap();
    w.run_for(SETTLE);
    let ev: Vec<_> = w.take_events().into_iter().filter(|e| e.id == child).collect();
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!((ev[0].kind, ev[0].status), (EventKind::Rejected, 4));
}

/// A peer whose application holds a request answers our resent REQ with an MRA (service
/// timeout 24, cma's CMA_CM_MRA_SETTING); the MRA stretches our wait to about 66 s, so we do
/// not give up after the 16 × 4.3 s of an unanswered REQ, and the late accept connects.
#[test]
fn mra_keeps_a_held_request_alive() {
    let mut w = Wire::new();
    w.policy = Policy::Hold;
    let id = connecting(&mut w, PortSpace::Tcp, QpType::Rc);
    w.run_for(Duration::from_secs(80));
    let ev: Vec<_> = w.take_events().into_iter().filter(|e| e.id == id).collect();
    assert!(ev.is_empty(), "no UNREACHABLE while the peer holds the request: {ev:?}");
    assert_eq!(w.peer_children.len(), 1, "one CONNECT_REQUEST for the resent REQs");
    let (now, child) = (w.now, w.peer_children[0]);
    w.stacks[1].accept(now, child, &ConnectParam::default()).unwrap();
    assert_eq!(w.expect_event(EventKind::ConnectResponse).id, id);
}

/// Without the peer's MRA (the link drops everything) the REQ is given up after its sends:
/// UNREACHABLE −ETIMEDOUT, well before the 80 s the MRA case survives.
#[test]
fn unanswered_req_is_unreachable_without_mra() {
    let mut w = Wire::new();
    let id = connecting(&mut w, PortSpace::Tcp, QpType::Rc);
    w.link_up = false;
    w.run_for(Duration::from_secs(80));
    let ev: Vec<_> = w.take_events().into_iter().filter(|e| e.id == id).collect();
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!((ev[0].kind, ev[0].status), (EventKind::Unreachable, -110));
}

/// `establish` (rdma_establish) sends the RTU only for a REP reported as CONNECT_RESPONSE:
/// EINVAL before it (REQ outstanding) and after it (already established); the peer's child
/// is ESTABLISHED once the RTU arrives.
#[test]
fn establish_answers_only_a_connect_response() {
    let mut w = Wire::new();
    w.policy = Policy::Hold;
    let id = connecting(&mut w, PortSpace::Tcp, QpType::Rc);
    w.run_for(SETTLE);
    assert_eq!(w.host().establish(id), Err(roce_cm::Errno::EINVAL), "REQ outstanding");
    let (now, child) = (w.now, w.peer_children[0]);
    w.stacks[1].accept(now, child, &ConnectParam::default()).unwrap();
    w.expect_event(EventKind::ConnectResponse);
    assert!(!w.peer_events.contains(&(child, EventKind::Established)), "no RTU before establish");
    w.host().establish(id).unwrap();
    w.run_for(SETTLE);
    assert!(w.peer_events.contains(&(child, EventKind::Established)), "the peer's events: {:?}", w.peer_events);
    assert_eq!(w.host().establish(id), Err(roce_cm::Errno::EINVAL), "already established");
}
