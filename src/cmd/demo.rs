//! `roce demo`: the embedded default. Two hosts and an SA on the simulated link, no root and
//! no network: A joins a group (SA Set ▶ GetResp, IGMP/MLD report), B joins, A sends N
//! datagrams to the group, B receives them, A leaves (SA Delete ▶ DeleteResp, IGMP/MLD leave),
//! B leaves. Every frame is printed as `roce decode` prints it, every event on its own line,
//! and each step is verified; the verdict says which step failed, if any.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use roce_cm::event::{EventParam, UdParam};
use roce_cm::{CmEvent, CmId, EventKind, MulticastPaths, PortSpace, QpType, Stack, StackConfig, UdDest};
use roce_net::{LinkConfig, NodeId, SaHost, SimNet};
use roce_wire::mcmember::JoinState;

use crate::plumbing::exit;
use crate::plumbing::options::probability;
use crate::plumbing::out::{out, status};

/// The most datagrams the demo sends: B's UD QP queues at most this many
/// ([`roce_cm::qp::RECV_QUEUE_DEPTH`]) and the demo polls it only after the sends.
pub const MAX_COUNT: u32 = roce_cm::qp::RECV_QUEUE_DEPTH as u32;

/// Run the embedded demo: two hosts and an SA on a simulated link (no root, no network).
///
/// A joins a multicast group (SA Set ▶ GetResp, IGMP report), B joins, A sends datagrams
/// to the group, B receives them, A leaves (SA Delete ▶ DeleteResp, IGMP leave), B leaves.
/// Prints every frame as `roce decode` does and every event, verifies each step, and exits
/// 0 only if every step was verified.
///
/// Example: roce demo
///
/// Example: roce demo --ipv6 --loss 0.3 --pcap demo.pcap
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Write every frame to this pcap file.
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// Use IPv6 (fd00::/8 hosts, group ff0e::1:2:3 with MLDv2).
    #[arg(long)]
    pub ipv6: bool,
    /// Frame loss probability on A's and B's links, 0 to 1 (the SA's link stays clean).
    #[arg(long, default_value = "0", value_parser = probability, allow_negative_numbers = true)]
    pub loss: f64,
    /// Datagrams A sends to the group (at most 1024: B's receive queue depth).
    #[arg(short = 'C', long, default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(0..=i64::from(MAX_COUNT)))]
    pub count: u32,
    /// Seed of the simulated link.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Quiet: only the verdict and the failed steps.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// Run `roce demo`: the simulation, its timeline (unless `-q`) and the verdict.
pub fn run(args: Args) -> ExitCode {
    crate::plumbing::out::set_quiet(args.quiet);
    let opts = DemoOptions { ipv6: args.ipv6, loss: args.loss, count: args.count, pcap: args.pcap, seed: args.seed };
    status!(
        "demo: limits: -C at most {} (B's receive queue), loss {} on A's and B's links (the SA's link is clean), \
         30 s of simulated time per step",
        MAX_COUNT,
        args.loss
    );
    let report = simulate(&opts);
    for l in &report.lines {
        status!("{l}");
    }
    let verdict = if report.ok() { "PASS" } else { "FAIL" };
    out!(
        "verdict: {verdict}: {} steps verified, {} failed; {} frames; {} of {} datagrams received",
        report.passed.len(),
        report.failed.len(),
        report.frames,
        report.received,
        report.sent
    );
    for f in &report.failed {
        out!("failed: {f}");
    }
    ExitCode::from(if crate::plumbing::shutdown::stdout_closed() {
        exit::CLOSED_PIPE
    } else if report.ok() {
        exit::OK
    } else {
        exit::FAILED
    })
}

/// What to run.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Use IPv6 (fd00::/8 and an MLDv2-joined ff0e:: group) instead of IPv4.
    pub ipv6: bool,
    /// Loss probability on A's and B's links (the SA's link stays clean).
    pub loss: f64,
    /// Datagrams A sends.
    pub count: u32,
    /// Write every frame to this pcap.
    pub pcap: Option<PathBuf>,
    /// Seed of the simulation.
    pub seed: u64,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions { ipv6: false, loss: 0.0, count: 5, pcap: None, seed: 1 }
    }
}

/// The result of a demo run.
#[derive(Debug, Clone, Default)]
pub struct DemoReport {
    /// The printed timeline, one line per frame or event.
    pub lines: Vec<String>,
    /// Steps verified, in order.
    pub passed: Vec<String>,
    /// Steps that failed.
    pub failed: Vec<String>,
    /// Datagrams sent and received.
    pub sent: u32,
    /// Datagrams B received.
    pub received: u32,
    /// Frames on the wire.
    pub frames: usize,
}

impl DemoReport {
    /// Whether every step was verified.
    pub fn ok(&self) -> bool {
        self.failed.is_empty() && !self.passed.is_empty()
    }
}

struct Demo {
    net: SimNet,
    a: NodeId,
    b: NodeId,
    sa: NodeId,
    printed: usize,
    report: DemoReport,
    events_a: Vec<CmEvent>,
    events_b: Vec<CmEvent>,
}

fn describe_event(who: &str, e: &CmEvent) -> String {
    let mut s = format!("event {who}: RDMA_CM_EVENT_{} id={} status={}", e.kind.name(), e.id.0, e.status);
    if let EventParam::Multicast { group, record, ud, sa_status } = &e.param {
        let _ = write!(s, " group={group}");
        if let Some(r) = record {
            let _ = write!(s, " MLID=0x{:04x} MTU={} rate={}", r.mlid, r.mtu, r.rate);
        }
        if let Some(u) = ud {
            let _ = write!(s, " qp_num=0x{:06x} qkey=0x{:08x} dgid={}", u.qp_num, u.qkey, u.ah.dgid);
        }
        if let Some(st) = sa_status {
            let _ = write!(s, " sa_status=0x{st:04x}");
        }
    }
    s
}

impl Demo {
    fn new(o: &DemoOptions) -> Demo {
        let mut net = SimNet::new(o.seed);
        let link = LinkConfig { latency: Duration::from_micros(50), loss: o.loss, ..LinkConfig::default() };
        let (ip_a, ip_b, ip_sa): (IpAddr, IpAddr, IpAddr) = if o.ipv6 {
            ("fd00::1".parse().unwrap(), "fd00::3".parse().unwrap(), "fd00::2".parse().unwrap())
        } else {
            (
                Ipv4Addr::new(198, 18, 0, 1).into(),
                Ipv4Addr::new(198, 18, 0, 3).into(),
                Ipv4Addr::new(198, 18, 0, 2).into(),
            )
        };
        let cfg = |mac: [u8; 6], ip: IpAddr, seed: u64| {
            let mut c = StackConfig::new(mac, Ipv4Addr::new(198, 18, 0, mac[5]), 24);
            if let IpAddr::V6(v6) = ip {
                c.ipv6.push((v6, 64));
            }
            c.seed = seed;
            c.multicast_paths = MulticastPaths::BOTH;
            c
        };
        let mut ca = cfg([0x02, 0, 0, 0, 0, 1], ip_a, o.seed);
        ca.sa = Some(ip_sa);
        let mut cb = cfg([0x02, 0, 0, 0, 0, 3], ip_b, o.seed ^ 3);
        cb.sa = Some(ip_sa);
        let csa = cfg([0x52, 0x54, 0x00, 0x12, 0x34, 0x02], ip_sa, o.seed ^ 2);
        let a = net.add(Stack::new(ca), link.clone());
        let b = net.add(Stack::new(cb), link);
        let sa = net.add(
            SaHost::with_defaults(csa),
            LinkConfig { latency: Duration::from_micros(50), ..LinkConfig::default() },
        );
        Demo { net, a, b, sa, printed: 0, report: DemoReport::default(), events_a: Vec::new(), events_b: Vec::new() }
    }

    fn name(&self, n: NodeId) -> &'static str {
        if n == self.a {
            "A"
        } else if n == self.b {
            "B"
        } else {
            "SA"
        }
    }

    /// Print what happened since the last call: frames in order, then events.
    fn flush_output(&mut self) {
        let cap = self.net.captured();
        let mut lines = Vec::new();
        for c in &cap[self.printed..] {
            let d = roce_decode::decode::decode_ethernet(&c.data);
            lines.push(format!("{:>10.6} {:<2} {}", c.time.since_epoch().as_secs_f64(), self.name(c.from), d.summary));
        }
        self.printed = cap.len();
        self.report.lines.extend(lines);
        for (who, id) in [("A", self.a), ("B", self.b)] {
            while let Some(e) = self.net.node_mut::<Stack>(id).poll_event() {
                self.report.lines.push(format!(
                    "{:>10.6} {}",
                    self.net.now().since_epoch().as_secs_f64(),
                    describe_event(who, &e)
                ));
                if who == "A" {
                    self.events_a.push(e);
                } else {
                    self.events_b.push(e);
                }
            }
        }
    }

    /// Run until `done` holds (checked after every step) or `limit` of simulated time passes.
    fn run_until(&mut self, limit: Duration, done: impl Fn(&Demo) -> bool) -> bool {
        let end = self.net.now() + limit;
        let mut first = true;
        loop {
            self.flush_output();
            if done(self) {
                return true;
            }
            // The first step always runs: it sends what the API calls just queued.
            let next_due = first || self.net.next_event().is_some_and(|t| t <= end);
            first = false;
            if !next_due || !self.net.step() {
                self.flush_output();
                return done(self);
            }
        }
    }

    fn check(&mut self, ok: bool, step: &str) -> bool {
        let line = format!("{} {step}", if ok { "  ✓" } else { "  ✗" });
        self.report.lines.push(line);
        if ok {
            self.report.passed.push(step.into());
        } else {
            self.report.failed.push(step.into());
        }
        ok
    }

    fn last(&self, who_a: bool, kind: EventKind) -> Option<&CmEvent> {
        let evs = if who_a { &self.events_a } else { &self.events_b };
        evs.iter().rev().find(|e| e.kind == kind)
    }

    fn frames_since(&self, from: usize, pred: impl Fn(&serde_json::Map<String, serde_json::Value>) -> bool) -> bool {
        self.net.captured()[from..].iter().any(|c| pred(&roce_decode::decode::decode_ethernet(&c.data).json))
    }
}

fn sa_method(j: &serde_json::Map<String, serde_json::Value>, name: &str) -> bool {
    j.get("mad").and_then(|m| m.get("method_name")).and_then(|v| v.as_str()) == Some(name)
}

fn is_report(j: &serde_json::Map<String, serde_json::Value>) -> bool {
    matches!(j.get("kind").and_then(|k| k.as_str()), Some("igmp") | Some("mld"))
}

fn setup_id(s: &mut Stack, ip: IpAddr) -> (CmId, u32) {
    let id = s.create_id(PortSpace::Udp, QpType::Ud).expect("UDP id");
    s.bind_addr(id, SocketAddr::new(ip, 0)).expect("bind to the host's address");
    let qpn = s.create_qp_for_id(id).expect("UD QP");
    (id, qpn)
}

/// Run the simulation: every step, its timeline and its verdict (nothing printed).
pub fn simulate(o: &DemoOptions) -> DemoReport {
    let mut d = Demo::new(o);
    let group: IpAddr =
        if o.ipv6 { "ff0e::1:2:3".parse::<Ipv6Addr>().unwrap().into() } else { Ipv4Addr::new(239, 1, 2, 3).into() };
    let (ip_a, ip_b): (IpAddr, IpAddr) = if o.ipv6 {
        ("fd00::1".parse().unwrap(), "fd00::3".parse().unwrap())
    } else {
        (Ipv4Addr::new(198, 18, 0, 1).into(), Ipv4Addr::new(198, 18, 0, 3).into())
    };
    let (a_id, a_qp) = setup_id(d.net.node_mut::<Stack>(d.a), ip_a);
    let (b_id, b_qp) = setup_id(d.net.node_mut::<Stack>(d.b), ip_b);
    let budget = Duration::from_secs(30);

    // 1. A joins.
    let mark = d.net.captured().len();
    let now = d.net.now();
    d.report.lines.push(format!("A joins {group} as FullMember"));
    let _ = d.net.node_mut::<Stack>(d.a).join_multicast(now, a_id, group, JoinState::FULL_MEMBER);
    let ok = d.run_until(budget, |d| {
        d.events_a.iter().any(|e| matches!(e.kind, EventKind::MulticastJoin | EventKind::MulticastError))
    });
    let joined = ok && d.last(true, EventKind::MulticastJoin).is_some();
    d.check(joined, "A: MULTICAST_JOIN with the SA's record");
    let set = d.frames_since(mark, |j| sa_method(j, "SubnAdmSet"))
        && d.frames_since(mark, |j| sa_method(j, "SubnAdmGetResp"));
    d.check(set, "A: SubnAdmSet(MCMemberRecord) answered by SubnAdmGetResp");
    d.check(d.frames_since(mark, is_report), "A: IGMP/MLD membership report sent");
    let ud: Option<UdParam> = d.last(true, EventKind::MulticastJoin).and_then(|e| match &e.param {
        EventParam::Multicast { ud, .. } => *ud,
        _ => None,
    });

    // 2. B joins.
    let now = d.net.now();
    d.report.lines.push(format!("B joins {group} as FullMember"));
    let started = d.net.node_mut::<Stack>(d.b).join_multicast(now, b_id, group, JoinState::FULL_MEMBER).is_ok();
    let ok = started
        && d.run_until(budget, |d| {
            d.events_b.iter().any(|e| matches!(e.kind, EventKind::MulticastJoin | EventKind::MulticastError))
        });
    let b_joined = ok && d.last(false, EventKind::MulticastJoin).is_some();
    d.check(b_joined, "B: MULTICAST_JOIN; its QP is attached");

    // 3. A sends, B receives.
    if o.count > MAX_COUNT {
        d.check(false, &format!("-C {} is more than B's receive queue holds ({MAX_COUNT})", o.count));
    } else if !b_joined {
        // Nothing B receives can be verified when B never joined.
        d.check(false, "B: receives the datagrams (not tried: B did not join)");
    } else if let Some(ud) = ud {
        let dest = UdDest { ah: ud.ah, remote_qpn: ud.qp_num, remote_qkey: ud.qkey };
        d.report.lines.push(format!(
            "A sends {} datagrams to {group} (QPN 0x{:06x}, Q_Key 0x{:08x})",
            o.count, ud.qp_num, ud.qkey
        ));
        for i in 0..o.count {
            let payload = format!("datagram {i} from A to {group}");
            if d.net.node_mut::<Stack>(d.a).post_send(a_qp, &dest, payload.as_bytes(), None).is_ok() {
                d.report.sent += 1;
            }
        }
        d.run_until(Duration::from_millis(200), |_| false);
        let mut got = 0;
        while let Some(dg) = d.net.node_mut::<Stack>(d.b).poll_recv(b_qp) {
            if dg.src == ip_a {
                got += 1;
            }
        }
        d.report.received = got;
        let ok = if o.loss == 0.0 { got == o.count } else { got <= o.count && d.report.sent == o.count };
        d.check(
            ok,
            &format!(
                "B: received {got} of {} datagrams{}",
                o.count,
                if o.loss > 0.0 { " (UD is unreliable: loss allowed)" } else { "" }
            ),
        );
    } else {
        d.check(false, "A: no group address handle to send to");
    }

    // 4. A leaves.
    let mark = d.net.captured().len();
    let now = d.net.now();
    d.report.lines.push(format!("A leaves {group}"));
    let _ = d.net.node_mut::<Stack>(d.a).leave_multicast(now, a_id, group);
    let ok = d.run_until(budget, |d| {
        d.events_a.iter().any(|e| {
            matches!(e.kind, EventKind::MulticastLeft)
                || (e.kind == EventKind::MulticastError && d.last(true, EventKind::MulticastJoin).is_some())
        })
    });
    d.check(ok && d.last(true, EventKind::MulticastLeft).is_some(), "A: MULTICAST_LEFT (the SA answered the Delete)");
    let del = d.frames_since(mark, |j| {
        sa_method(j, "SubnAdmDelete")
            && j.get("sa").and_then(|s| s.get("component_mask")).and_then(|v| v.as_str()) == Some("0x0000000000010003")
            && j.get("mcmember").and_then(|m| m.get("join_state")).and_then(|v| v.as_u64()) == Some(1)
    }) && d.frames_since(mark, |j| sa_method(j, "SubnAdmDeleteResp"));
    d.check(del, "A: SubnAdmDelete(MCMemberRecord) mask 0x10003 JoinState FullMember ▶ SubnAdmDeleteResp");
    d.check(d.frames_since(mark, is_report), "A: IGMP/MLD leave sent");

    // 5. B leaves.
    let now = d.net.now();
    d.report.lines.push(format!("B leaves {group}"));
    let _ = d.net.node_mut::<Stack>(d.b).leave_multicast(now, b_id, group);
    let ok = d.run_until(budget, |d| {
        d.last(false, EventKind::MulticastLeft).is_some() || d.last(false, EventKind::MulticastError).is_some()
    });
    d.check(ok && d.last(false, EventKind::MulticastLeft).is_some(), "B: MULTICAST_LEFT");
    d.run_until(Duration::from_secs(2), |_| false); // the reports' repeats
    let sa = &d.net.node::<SaHost>(d.sa).sa;
    d.check(sa.group_count() == 0 && sa.mlids_in_use() == 0, "SA: the group is gone and its MLID free");
    for (who, id) in [("A", d.a), ("B", d.b)] {
        let s = d.net.node::<Stack>(id);
        let clean = s.groups().count() == 0 && s.sa_transactions() == 0;
        d.check(clean, &format!("{who}: no group or SA transaction left"));
    }
    d.report.frames = d.net.captured().len();
    if let Some(p) = &o.pcap {
        if let Err(e) = d.net.write_pcap(p) {
            d.check(false, &format!("pcap {}: {e}", p.display()));
        } else {
            d.report.lines.push(format!("wrote {} frames to {}", d.report.frames, p.display()));
        }
    }
    d.report
}
