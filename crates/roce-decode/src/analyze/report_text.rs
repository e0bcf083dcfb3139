//! The default report: one table per section, columns aligned, framed by `=` rules as
//! tshark's `-z` statistics are.

use std::fmt::Write as _;

use super::cm::rej_reason_name;
use super::flows::rnr_timer_ms;
use super::mad::row_names;
use super::mcast::GroupId;
use super::series::Latency;
use super::Analyzer;

const RULE: &str = "================================================================================";

/// A table: a header row and rows of cells; the first `left` columns are left-aligned, the
/// others right-aligned (numbers).
struct Table {
    head: Vec<&'static str>,
    rows: Vec<Vec<String>>,
    left: usize,
}

impl Table {
    fn new(head: &[&'static str], left: usize) -> Table {
        Table { head: head.to_vec(), rows: Vec::new(), left }
    }

    fn render(&self, out: &mut String) {
        let mut w: Vec<usize> = self.head.iter().map(|h| h.len()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
            let mut s = String::new();
            for (i, c) in cells.enumerate() {
                if i > 0 {
                    s.push_str("  ");
                }
                let pad = w[i].saturating_sub(c.chars().count());
                if i < self.left {
                    s.push_str(c);
                    s.extend(std::iter::repeat_n(' ', pad));
                } else {
                    s.extend(std::iter::repeat_n(' ', pad));
                    s.push_str(c);
                }
            }
            out.push_str(s.trim_end());
            out.push('\n');
        };
        line(out, &mut self.head.iter().copied());
        for r in &self.rows {
            line(out, &mut r.iter().map(|s| s.as_str()));
        }
    }
}

fn us(l: &Latency) -> String {
    if l.count == 0 {
        "-".into()
    } else {
        format!("{:.1}/{:.1}/{:.1}", l.min * 1e6, l.mean() * 1e6, l.max * 1e6)
    }
}

fn section(out: &mut String, title: &str) {
    let _ = writeln!(out, "{RULE}\n{title}");
}

/// Human bits per second.
pub fn rate(bps: f64) -> String {
    match bps {
        b if b >= 1e9 => format!("{:.2} Gb/s", b / 1e9),
        b if b >= 1e6 => format!("{:.2} Mb/s", b / 1e6),
        b if b >= 1e3 => format!("{:.2} kb/s", b / 1e3),
        b => format!("{b:.0} b/s"),
    }
}

/// The whole text report.
pub fn render(a: &Analyzer) -> String {
    let mut out = String::new();
    let t = &a.totals;
    section(&mut out, "RoCE analysis");
    let _ = writeln!(
        out,
        "Frames: {}  transport (RoCEv2, IB): {}  IGMP/MLD: {}  other: {}  malformed: {}  duration: {:.6} s",
        t.frames,
        t.roce,
        t.multicast_reports,
        t.other.values().sum::<u64>(),
        t.malformed.values().sum::<u64>(),
        t.duration
    );
    for (why, n) in &t.malformed {
        let _ = writeln!(out, "  malformed {why}: {n}");
    }

    section(&mut out, "Flows (source -> destination: IP address, GID, or LID without a GRH; dest QP)");
    let mut tab = Table::new(
        &[
            "Source",
            "Destination",
            "DestQP",
            "Tr",
            "Packets",
            "Bytes",
            "FirstPSN",
            "LastPSN",
            "Msgs",
            "Duration",
            "Goodput",
            "Gaps",
            "Missing",
            "OOO",
            "Dup",
            "Retx",
            "ECN-CE",
            "CNPs",
            "BadICRC",
        ],
        2,
    );
    for f in &a.flows.flows {
        tab.rows.push(vec![
            f.src.to_string(),
            f.dst.to_string(),
            format!("0x{:06x}", f.dest_qp),
            f.transport.name().into(),
            f.packets.to_string(),
            f.bytes.to_string(),
            f.first_psn.to_string(),
            f.last_psn.to_string(),
            f.messages.to_string(),
            format!("{:.6}", f.duration()),
            rate(f.goodput_bps()),
            f.gaps.to_string(),
            f.missing.to_string(),
            f.out_of_order.to_string(),
            f.duplicates.to_string(),
            f.retransmissions.to_string(),
            f.ecn_ce.to_string(),
            f.cnps.to_string(),
            f.bad_icrc.to_string(),
        ]);
    }
    tab.render(&mut out);

    let rc: Vec<_> = a
        .flows
        .flows
        .iter()
        .filter(|f| f.acks + f.naks.total() + f.read_requests + f.read_responses + f.atomics + f.atomic_acks > 0)
        .collect();
    if !rc.is_empty() {
        section(&mut out, "RC acknowledgement side (per flow the ACKs travel on); latency min/mean/max µs");
        let mut tab = Table::new(
            &[
                "Source",
                "Destination",
                "DestQP",
                "ACKs",
                "PSNs/ACK",
                "NAKs",
                "SeqErr",
                "InvReq",
                "RemAcc",
                "RemOp",
                "RNR",
                "Reads",
                "ReadResp",
                "ReadLatency",
                "Atomics",
                "AtomicAck",
                "AtomicLatency",
            ],
            2,
        );
        let mut rnr = Vec::new();
        for f in rc {
            let n = &f.naks;
            tab.rows.push(vec![
                f.src.to_string(),
                f.dst.to_string(),
                format!("0x{:06x}", f.dest_qp),
                f.acks.to_string(),
                format!("{:.2}", f.coalescing()),
                n.total().to_string(),
                n.psn_sequence_error.to_string(),
                n.invalid_request.to_string(),
                n.remote_access_error.to_string(),
                n.remote_operational_error.to_string(),
                n.rnr.to_string(),
                f.read_requests.to_string(),
                f.read_responses.to_string(),
                us(&f.read_latency),
                f.atomics.to_string(),
                f.atomic_acks.to_string(),
                us(&f.atomic_latency),
            ]);
            for (code, &c) in n.rnr_timers.iter().enumerate().filter(|(_, &c)| c > 0) {
                rnr.push(format!(
                    "  {} -> {} QP 0x{:06x}: RNR timer {code} ({} ms): {c}",
                    f.src,
                    f.dst,
                    f.dest_qp,
                    rnr_timer_ms(code as u8)
                ));
            }
        }
        tab.render(&mut out);
        for l in rnr {
            out.push_str(&l);
            out.push('\n');
        }
    }

    section(&mut out, "MAD transactions (class, method, attribute); latency min/mean/max µs");
    let mut tab = Table::new(
        &[
            "Class",
            "Method",
            "Attribute",
            "Requests",
            "Resends",
            "Responses",
            "Unanswered",
            "BadStatus",
            "Latency",
            "RMPPSeg",
            "RMPPAck",
            "Window",
        ],
        3,
    );
    for (&k, r) in &a.mads.rows {
        let (c, m, at) = row_names(k);
        tab.rows.push(vec![
            c.into(),
            m.into(),
            at.into(),
            r.requests.to_string(),
            r.resends.to_string(),
            r.responses.to_string(),
            r.unanswered.to_string(),
            r.statuses.values().sum::<u64>().to_string(),
            us(&r.latency),
            r.rmpp_segments.to_string(),
            r.rmpp_acks.to_string(),
            r.rmpp_max_window.to_string(),
        ]);
    }
    tab.render(&mut out);

    let cm = &a.cm;
    section(&mut out, "CM connections; times in µs after the REQ");
    let mut tab = Table::new(&["Active", "Passive", "CommID", "State", "REP", "RTU", "DREQ", "DREP", "REJ", "MRA"], 2);
    let rel = |t: Option<f64>, t0: f64| t.map_or("-".into(), |t| format!("{:.1}", (t - t0) * 1e6));
    for c in &cm.connections {
        tab.rows.push(vec![
            c.active.to_string(),
            c.passive.to_string(),
            format!("0x{:08x}", c.active_comm_id),
            c.state().into(),
            rel(c.rep, c.req),
            rel(c.rtu, c.req),
            rel(c.dreq, c.req),
            rel(c.drep, c.req),
            c.rej.map_or("-".into(), |r| rej_reason_name(r.1)),
            c.mras.to_string(),
        ]);
    }
    tab.render(&mut out);
    let _ = writeln!(
        out,
        "REQ->REP {}  REP->RTU {}  DREQ->DREP {}  SIDR REQ {} REP {} ({})",
        us(&cm.req_rep),
        us(&cm.rep_rtu),
        us(&cm.dreq_drep),
        cm.sidr_requests,
        cm.sidr_replies.values().sum::<u64>(),
        us(&cm.sidr_latency)
    );

    section(&mut out, "Multicast groups");
    let mut tab = Table::new(
        &[
            "Group",
            "Kind",
            "JoinReq",
            "LeaveReq",
            "Joins",
            "Leaves",
            "Failed",
            "Reports",
            "RptLeaves",
            "Members",
            "Max",
        ],
        2,
    );
    for (id, g) in &a.mcast.groups {
        let (name, kind) = match id {
            GroupId::Mgid(m) => (std::net::Ipv6Addr::from(*m).to_string(), "MGID"),
            GroupId::Ip(ip) => (ip.to_string(), "IP"),
        };
        tab.rows.push(vec![
            name,
            kind.into(),
            g.join_requests.to_string(),
            g.leave_requests.to_string(),
            g.joins.to_string(),
            g.leaves.to_string(),
            g.failed.to_string(),
            g.reports.to_string(),
            g.report_leaves.to_string(),
            g.members.len().to_string(),
            g.max_members.to_string(),
        ]);
    }
    tab.render(&mut out);
    let dec = a.flows.flows.iter().filter(|f| f.points.decimated()).count();
    let _ = writeln!(
        out,
        "{RULE}\nLimits: flows not kept: {} frames; requests not timed: {}; CM source QPs not kept: {}; plots decimated: {dec} flows (at most {} points each)",
        a.flows.flow_table_full,
        a.flows.pending_full,
        a.flows.cm_src_qps_full,
        super::series::MAX_POINTS
    );
    out.push_str(RULE);
    out.push('\n');
    out
}
