//! The `--json` document: one object with the sections `capture`, `flows` (an array of flow
//! objects), `mads`, `cm`, `multicast` and `limits`. spec/analyze.schema.json describes it.

use std::net::Ipv6Addr;

use serde_json::{json, Map, Value};

use super::cm::rej_reason_name;
use super::flows::{Flow, PointKind};
use super::mad::row_names;
use super::mcast::{GroupId, Member};
use super::series::Latency;
use super::{Analyzer, Endpoint};

/// A latency histogram as JSON: microseconds, the non-empty power-of-two bins.
pub fn latency(l: &Latency) -> Value {
    let bins: Vec<Value> = l
        .bins
        .iter()
        .enumerate()
        .filter(|(_, &c)| c > 0)
        .map(|(i, &c)| json!({ "below_us": 1u64 << i, "count": c }))
        .collect();
    json!({
        "count": l.count,
        "min_us": l.min * 1e6,
        "mean_us": l.mean() * 1e6,
        "max_us": l.max * 1e6,
        "histogram": bins,
    })
}

/// An endpoint as two members, `name` (the IP address or GID, null for a LID) and
/// `name_lid` (the LID, null for an address): a LID never reads as an address.
fn endpoint(obj: &mut Value, name: &str, e: Endpoint) {
    obj[name] = e.ip().map_or(Value::Null, |ip| json!(ip.to_string()));
    obj[format!("{name}_lid")] = json!(e.lid());
}

fn flow(f: &Flow) -> Value {
    let n = &f.naks;
    let timers: Map<String, Value> =
        n.rnr_timers.iter().enumerate().filter(|(_, &c)| c > 0).map(|(i, &c)| (i.to_string(), json!(c))).collect();
    let kinds = |k: PointKind| f.points.items.iter().filter(|p| p.kind == k).count();
    let mut v = json!({
        "dest_qp": f.dest_qp,
        "transport": f.transport.name(),
        "packets": f.packets,
        "bytes": f.bytes,
        "first_psn": f.first_psn,
        "last_psn": f.last_psn,
        "first_frame": f.first_frame,
        "start": f.first_time,
        "duration": f.duration(),
        "messages": f.messages,
        "partial_messages": f.partial_messages,
        "goodput_bps": f.goodput_bps(),
        "psn": {
            "gaps": f.gaps,
            "missing": f.missing,
            "out_of_order": f.out_of_order,
            "duplicates": f.duplicates,
            "retransmissions": f.retransmissions,
            "holes_forgotten": f.holes_forgotten,
        },
        "ack": {
            "acks": f.acks,
            "acked_psns": f.acked_psns,
            "coalescing": f.coalescing(),
            "naks": {
                "total": n.total(),
                "psn_sequence_error": n.psn_sequence_error,
                "invalid_request": n.invalid_request,
                "remote_access_error": n.remote_access_error,
                "remote_operational_error": n.remote_operational_error,
                "invalid_rd_request": n.invalid_rd_request,
                "other": n.other,
                "rnr": n.rnr,
                "rnr_timers": timers,
            },
        },
        "reads": { "requests": f.read_requests, "responses": f.read_responses, "latency": latency(&f.read_latency) },
        "atomics": { "requests": f.atomics, "acks": f.atomic_acks, "latency": latency(&f.atomic_latency) },
        "ecn_ce": f.ecn_ce,
        "cnps": f.cnps,
        "src_qp": f.src_qp,
        "bad_icrc": f.bad_icrc,
        "plot": {
            "points": f.points.items.len(),
            "offered": f.points.offered(),
            "stride": f.points.stride.max(1),
            "acks": kinds(PointKind::Ack),
            "naks": kinds(PointKind::Nak),
        },
    });
    endpoint(&mut v, "src", f.src);
    endpoint(&mut v, "dst", f.dst);
    v
}

fn gid(g: &[u8; 16]) -> String {
    Ipv6Addr::from(*g).to_string()
}

/// The whole document.
pub fn document(a: &Analyzer) -> Value {
    let t = &a.totals;
    let mads: Vec<Value> = a
        .mads
        .rows
        .iter()
        .map(|(&k, r)| {
            let (class, method, attr) = row_names(k);
            let statuses: Map<String, Value> =
                r.statuses.iter().map(|(s, c)| (format!("0x{s:04x}"), json!(c))).collect();
            json!({
                "class": k.0, "class_name": class,
                "method": k.1, "method_name": method,
                "attribute": k.2, "attribute_name": attr,
                "requests": r.requests, "resends": r.resends, "responses": r.responses,
                "unanswered": r.unanswered, "statuses": statuses,
                "latency": latency(&r.latency),
                "rmpp": { "segments": r.rmpp_segments, "acks": r.rmpp_acks,
                          "max_window": r.rmpp_max_window, "stops_aborts": r.rmpp_stops },
            })
        })
        .collect();
    let cm = &a.cm;
    let conns: Vec<Value> = cm
        .connections
        .iter()
        .map(|c| {
            let mut v = json!({
                "active_comm_id": c.active_comm_id, "passive_comm_id": c.passive_comm_id,
                "service_id": format!("0x{:016x}", c.service_id), "frame": c.frame,
                "state": c.state(), "req": c.req, "rep": c.rep, "rtu": c.rtu,
                "dreq": c.dreq, "drep": c.drep,
                "rej_reason": c.rej.map(|r| r.1), "mras": c.mras, "resends": c.resends,
            });
            endpoint(&mut v, "active", c.active);
            endpoint(&mut v, "passive", c.passive);
            v
        })
        .collect();
    let groups: Vec<Value> = a
        .mcast
        .groups
        .iter()
        .map(|(id, g)| {
            let (kind, name) = match id {
                GroupId::Mgid(m) => ("mgid", gid(m)),
                GroupId::Ip(ip) => ("ip", ip.to_string()),
            };
            let members: Vec<String> = g
                .members
                .iter()
                .map(|m| match m {
                    Member::PortGid(p) => gid(p),
                    Member::Host(h) => h.to_string(),
                })
                .collect();
            json!({
                "group": name, "kind": kind,
                "join_requests": g.join_requests, "leave_requests": g.leave_requests,
                "joins": g.joins, "leaves": g.leaves, "failed": g.failed,
                "reports": g.reports, "report_leaves": g.report_leaves,
                "members": members, "max_members": g.max_members,
                "over_time": g.over_time.items.iter().map(|&(t, n)| json!([t, n])).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "capture": {
            "frames": t.frames, "bytes": t.bytes, "roce": t.roce,
            "multicast_reports": t.multicast_reports,
            "other": t.other, "malformed": t.malformed, "duration": t.duration,
        },
        "flows": a.flows.flows.iter().map(flow).collect::<Vec<_>>(),
        "mads": {
            "mads": a.mads.mads, "unmatched_responses": a.mads.unmatched_responses,
            "transactions": mads,
        },
        "cm": {
            "messages": cm.messages,
            "connections": conns,
            "req_rep": latency(&cm.req_rep), "rep_rtu": latency(&cm.rep_rtu), "dreq_drep": latency(&cm.dreq_drep),
            "rej_reasons": cm.rej_reasons.iter().map(|(&c, &n)| json!({"code": c, "name": rej_reason_name(c), "count": n})).collect::<Vec<_>>(),
            "sidr": {
                "requests": cm.sidr_requests,
                "replies": cm.sidr_replies.iter().map(|(s, n)| (s.to_string(), json!(n))).collect::<Map<String, Value>>(),
                "latency": latency(&cm.sidr_latency),
            },
            "unmatched": cm.unmatched,
        },
        "multicast": { "groups": groups, "queries": a.mcast.queries },
        "limits": {
            "flows_dropped_frames": a.flows.flow_table_full,
            "requests_not_timed": a.flows.pending_full,
            "cm_source_qps_not_kept": a.flows.cm_src_qps_full,
            "requests_unanswered": a.flows.unanswered(),
            "mad_transactions_not_tracked": a.mads.open_full,
            "mad_rows_dropped": a.mads.rows_dropped,
            "connections_dropped": cm.connections_dropped,
            "groups_dropped": a.mcast.groups_dropped,
            "ladder_dropped": a.ladder.dropped,
            "flows_decimated": a.flows.flows.iter().filter(|f| f.points.decimated()).count(),
            "max_plot_points": super::series::MAX_POINTS,
        },
    })
}
