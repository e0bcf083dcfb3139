//! `--html`: one self-contained file (inline CSS and SVG, no script, nothing fetched): the
//! text report's tables, a PSN-over-time plot per flow in tcptrace's style (sends as dots,
//! retransmissions and late packets marked, ACKs and NAKs from the reverse flow), throughput
//! over time, a ladder diagram of the CM and SA messages, multicast members over time, and
//! latency histograms.

use std::fmt::Write as _;

use super::flows::{serial, Flow, PointKind};
use super::series::Latency;
use super::{Analyzer, Endpoint};

/// Flows that get their own PSN plot (the busiest).
pub const MAX_PLOTTED_FLOWS: usize = 24;
/// Points a flow needs for a plot of its own.
pub const MIN_PLOTTED_POINTS: usize = 4;

const W: f64 = 720.0;
const H: f64 = 260.0;
const L: f64 = 70.0; // left margin (axis labels)
const B: f64 = 30.0; // bottom margin

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The x of time `t` on an axis from `t0` to `t1`.
fn x_of(t: f64, (t0, t1): (f64, f64)) -> f64 {
    L + (W - L - 10.0) * if t1 > t0 { (t - t0) / (t1 - t0) } else { 0.0 }
}

fn y_of(v: f64, vmin: f64, vmax: f64) -> f64 {
    let span = if vmax > vmin { vmax - vmin } else { 1.0 };
    (H - B) - (H - B - 10.0) * (v - vmin) / span
}

/// The frame of a plot: axes, end labels, the SVG's open tag (closed by the caller).
fn axes(out: &mut String, class: &str, title: &str, x: (f64, f64, &str), y: (String, String, &str)) {
    let _ = write!(
        out,
        r#"<svg class="{class}" xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img"><title>{}</title>"#,
        esc(title)
    );
    let _ = write!(
        out,
        r##"<line x1="{L}" y1="{b}" x2="{r}" y2="{b}" stroke="#444"/><line x1="{L}" y1="10" x2="{L}" y2="{b}" stroke="#444"/>"##,
        b = H - B,
        r = W - 10.0
    );
    if !x.2.is_empty() {
        let _ = write!(
            out,
            r#"<text x="{L}" y="{ty}" font-size="11">{:.6}</text><text x="{rx}" y="{ty}" font-size="11" text-anchor="end">{:.6} {}</text>"#,
            x.0,
            x.1,
            esc(x.2),
            ty = H - 12.0,
            rx = W - 10.0
        );
    }
    let _ = write!(
        out,
        r#"<text x="{lx}" y="{yb}" font-size="10" text-anchor="end">{}</text><text x="{lx}" y="20" font-size="10" text-anchor="end">{}</text><text x="{lx}" y="32" font-size="10" text-anchor="end">{}</text>"#,
        y.0,
        y.1,
        esc(y.2),
        lx = L - 4.0,
        yb = H - B
    );
}

fn psn_plot(out: &mut String, f: &Flow) {
    let pts = &f.points.items;
    // The flow's own time span (tcptrace's axis), ACKs from the reverse flow included.
    let span = pts.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.t), b.max(p.t)));
    let rel = |p: u32| f64::from(serial(p, f.first_psn));
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for p in pts {
        lo = lo.min(rel(p.psn));
        hi = hi.max(rel(p.psn));
    }
    let title = format!("PSN over time: {} -> {} QP 0x{:06x}", f.src, f.dst, f.dest_qp);
    let _ = write!(out, "<h3>{}</h3>", esc(&title));
    if f.ecn_ce + f.cnps > 0 {
        // Congestion: the marks on this flow and the CNPs its source QP got back.
        let _ = write!(out, "<p class=congestion>ECN CE {}, CNPs back to the source {}</p>", f.ecn_ce, f.cnps);
    }
    // The axis ends as PSNs again (24 bits: they may wrap inside a plot).
    let psn_at = |v: f64| ((i64::from(f.first_psn) + v as i64) & 0xff_ffff).to_string();
    axes(out, "psn-plot", &title, (span.0, span.1, "s"), (psn_at(lo), psn_at(hi), "PSN"));
    for p in pts {
        let (x, y) = (x_of(p.t, span), y_of(rel(p.psn), lo, hi));
        let _ = match p.kind {
            PointKind::Send => {
                write!(out, r##"<circle class="send" cx="{x:.1}" cy="{y:.1}" r="1.6" fill="#1f4e99"/>"##)
            }
            PointKind::Retransmission => write!(
                out,
                r##"<path class="retx" d="M{:.1} {:.1}l6 6m0 -6l-6 6" stroke="#c00" stroke-width="1.5"/>"##,
                x - 3.0,
                y - 3.0
            ),
            PointKind::OutOfOrder => {
                write!(
                    out,
                    r##"<rect class="ooo" x="{:.1}" y="{:.1}" width="5" height="5" fill="#e69500"/>"##,
                    x - 2.5,
                    y - 2.5
                )
            }
            PointKind::Ack => {
                write!(out, r##"<path class="ack" d="M{:.1} {y:.1}h8" stroke="#2a9d2a" stroke-width="1.2"/>"##, x - 4.0)
            }
            PointKind::Nak => write!(out, r##"<path class="nak" d="M{x:.1} {:.1}l4 7h-8z" fill="#b000b0"/>"##, y - 4.0),
        };
    }
    out.push_str("</svg>");
    if f.points.decimated() {
        let _ = write!(
            out,
            "<p class=note>{} of {} points drawn (one in {}, to keep memory bounded).</p>",
            pts.len(),
            f.points.offered(),
            f.points.stride
        );
    }
}

fn throughput_plot(out: &mut String, flows: &[&Flow]) {
    const COLORS: [&str; 6] = ["#1f4e99", "#c00", "#2a9d2a", "#e69500", "#b000b0", "#555"];
    let mut ymax = 1.0f64;
    for f in flows {
        for &b in &f.throughput.bytes {
            ymax = ymax.max(b as f64 * 8.0 / f.throughput.width);
        }
    }
    // The span the charted flows were active in.
    let span = flows.iter().fold((f64::MAX, f64::MIN), |(a, b), f| (a.min(f.first_time), b.max(f.last_time)));
    let span = if flows.is_empty() { (0.0, 0.0) } else { span };
    let y = (String::from("0"), super::report_text::rate(ymax), "");
    axes(out, "throughput-plot", "Throughput over time", (span.0, span.1, "s"), y);
    for (i, f) in flows.iter().enumerate() {
        let tp = &f.throughput;
        let mut d = String::new();
        for (k, &b) in tp.bytes.iter().enumerate() {
            let t = f.first_time + (k as f64 + 0.5) * tp.width;
            let _ = write!(
                d,
                "{}{:.1} {:.1}",
                if k == 0 { "M" } else { "L" },
                x_of(t.min(span.1), span),
                y_of(b as f64 * 8.0 / tp.width, 0.0, ymax)
            );
        }
        let c = COLORS[i % COLORS.len()];
        let _ = write!(out, r#"<path class="tput" d="{d}" fill="none" stroke="{c}" stroke-width="1.2"/>"#);
        let _ = write!(
            out,
            r#"<text x="{}" y="{}" font-size="10" fill="{c}">{} -> {} 0x{:06x}</text>"#,
            L + 8.0,
            22.0 + 12.0 * i as f64,
            f.src,
            f.dst,
            f.dest_qp
        );
    }
    out.push_str("</svg>");
}

/// A flow under congestion control: the sender's rate over time (its payload bits per second,
/// as the capture saw the flow), with the CE marks its frames carried along the bottom and the
/// CNPs that came back to its source along the top.
fn congestion_plot(out: &mut String, f: &Flow) {
    let tp = &f.throughput;
    let span = (f.first_time, f.last_time.max(f.first_time + tp.width));
    let ymax = tp.bytes.iter().fold(1.0f64, |m, &b| m.max(b as f64 * 8.0 / tp.width));
    let title = format!("Sender's rate: {} -> {} QP 0x{:06x}", f.src, f.dst, f.dest_qp);
    let _ = write!(
        out,
        "<h3>{}</h3><p class=congestion>ECN CE {} (&#9650; below), CNPs back to the source {} (&#9660; above)</p>",
        esc(&title),
        f.ecn_ce,
        f.cnps
    );
    axes(out, "rate-plot", &title, (span.0, span.1, "s"), (String::from("0"), super::report_text::rate(ymax), ""));
    let mut d = String::new();
    for (k, &b) in tp.bytes.iter().enumerate() {
        let t = f.first_time + (k as f64 + 0.5) * tp.width;
        let (x, y) = (x_of(t.min(span.1), span), y_of(b as f64 * 8.0 / tp.width, 0.0, ymax));
        let _ = write!(d, "{}{x:.1} {y:.1}", if k == 0 { "M" } else { "L" });
    }
    let _ = write!(out, r##"<path class="rate" d="{d}" fill="none" stroke="#1f4e99" stroke-width="1.4"/>"##);
    for &t in &f.ce_times.items {
        let _ = write!(out, r##"<path class="ce" d="M{:.1} {:.1}v-6" stroke="#e69500"/>"##, x_of(t, span), H - B);
    }
    for &t in &f.cnp_times.items {
        let _ = write!(out, r##"<path class="cnp" d="M{:.1} 8v6" stroke="#c00"/>"##, x_of(t, span));
    }
    out.push_str("</svg>");
}

fn ladder(out: &mut String, a: &Analyzer) {
    let rungs = &a.ladder.rungs;
    let mut hosts: Vec<Endpoint> = Vec::new();
    for r in rungs {
        for h in [r.src, r.dst] {
            if !hosts.contains(&h) {
                hosts.push(h);
            }
        }
    }
    let col = 260.0;
    let w = 160.0 + col * hosts.len().max(1) as f64;
    let h = 50.0 + 22.0 * rungs.len() as f64;
    let _ = write!(
        out,
        r#"<svg class="ladder" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}"><title>CM and SA ladder</title><defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto-start-reverse"><path d="M0 0L10 5L0 10z"/></marker></defs>"#
    );
    let hx = |e: Endpoint| 200.0 + col * hosts.iter().position(|&x| x == e).unwrap_or(0) as f64;
    for &host in &hosts {
        let x = hx(host);
        let _ = write!(
            out,
            r##"<text x="{x}" y="16" font-size="11" text-anchor="middle">{host}</text><line x1="{x}" y1="24" x2="{x}" y2="{h}" stroke="#999"/>"##
        );
    }
    for (i, r) in rungs.iter().enumerate() {
        let y = 40.0 + 22.0 * i as f64;
        let (x1, x2) = (hx(r.src), hx(r.dst));
        let _ = write!(
            out,
            r##"<text x="4" y="{y}" font-size="10">{:.6} #{}</text><line class="rung" x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" stroke="#1f4e99" marker-end="url(#arrow)"/><text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle">{}</text>"##,
            r.t,
            r.frame,
            (x1 + x2) / 2.0,
            y - 3.0,
            esc(&r.label)
        );
    }
    out.push_str("</svg>");
    if a.ladder.dropped > 0 {
        let _ = write!(out, "<p class=note>{} later messages not drawn.</p>", a.ladder.dropped);
    }
}

/// Groups that get a members-over-time plot.
pub const MAX_PLOTTED_GROUPS: usize = 12;

/// Members of each multicast group over time, as steps.
fn members_plot(out: &mut String, a: &Analyzer) {
    use super::mcast::GroupId;
    let groups: Vec<_> = a.mcast.groups.iter().filter(|(_, g)| !g.over_time.items.is_empty()).collect();
    if groups.is_empty() {
        out.push_str("<p class=note>no membership changes</p>");
        return;
    }
    let span = (0.0, a.totals.duration);
    let ymax = groups.iter().map(|(_, g)| g.max_members).max().unwrap_or(1).max(1) as f64;
    let y = (String::from("0"), format!("{ymax}"), "members");
    axes(out, "members-plot", "Multicast members over time", (span.0, span.1, "s"), y);
    const COLORS: [&str; 6] = ["#1f4e99", "#c00", "#2a9d2a", "#e69500", "#b000b0", "#555"];
    for (i, (id, g)) in groups.iter().take(MAX_PLOTTED_GROUPS).enumerate() {
        let c = COLORS[i % COLORS.len()];
        let mut d = format!("M{:.1} {:.1}", x_of(0.0, span), y_of(0.0, 0.0, ymax));
        let mut last = 0.0;
        for &(t, n) in &g.over_time.items {
            let x = x_of(t, span);
            let _ = write!(d, "L{x:.1} {:.1}L{x:.1} {:.1}", y_of(last, 0.0, ymax), y_of(f64::from(n), 0.0, ymax));
            last = f64::from(n);
        }
        let _ = write!(d, "L{:.1} {:.1}", x_of(span.1, span), y_of(last, 0.0, ymax));
        let name = match id {
            GroupId::Mgid(m) => format!("MGID {}", std::net::Ipv6Addr::from(*m)),
            GroupId::Ip(ip) => format!("IP {ip}"),
        };
        let _ = write!(
            out,
            r#"<path class="members" d="{d}" fill="none" stroke="{c}" stroke-width="1.2"/><text x="{}" y="{}" font-size="10" fill="{c}">{}</text>"#,
            L + 8.0,
            22.0 + 12.0 * i as f64,
            esc(&name)
        );
    }
    out.push_str("</svg>");
    if groups.len() > MAX_PLOTTED_GROUPS {
        let _ = write!(out, "<p class=note>{} more groups in the tables.</p>", groups.len() - MAX_PLOTTED_GROUPS);
    }
}

fn histogram(out: &mut String, title: &str, l: &Latency) {
    let _ = write!(out, "<h3>{}</h3>", esc(title));
    if l.count == 0 {
        out.push_str("<p class=note>no samples</p>");
        return;
    }
    let first = l.bins.iter().position(|&c| c > 0).unwrap_or(0);
    let last = l.bins.iter().rposition(|&c| c > 0).unwrap_or(0);
    let n = (last - first + 1) as f64;
    let ymax = *l.bins.iter().max().unwrap_or(&1) as f64;
    axes(out, "histogram", title, (0.0, 0.0, ""), (String::from("0"), ymax.to_string(), "samples"));
    let bw = (W - L - 10.0) / n;
    for (k, i) in (first..=last).enumerate() {
        let c = l.bins[i] as f64;
        let x = L + bw * k as f64;
        let y = y_of(c, 0.0, ymax);
        let _ = write!(
            out,
            r##"<rect class="bar" x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="#1f4e99"/><text x="{:.1}" y="{:.1}" font-size="9" text-anchor="middle">&lt;{}µs</text>"##,
            (bw - 2.0).max(1.0),
            (H - B) - y,
            x + bw / 2.0,
            H - B + 11.0,
            1u64 << i
        );
    }
    out.push_str("</svg>");
}

/// The whole page.
pub fn render(a: &Analyzer) -> String {
    let mut out = String::with_capacity(1 << 16);
    out.push_str(
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>roce analyze</title><style>\
body{font-family:sans-serif;margin:1.5em;color:#222}pre{font-size:11px;background:#f6f6f6;padding:.6em;overflow-x:auto}\
svg{border:1px solid #ddd;margin:.3em 0;background:#fff}.note{color:#666;font-size:12px}h3{font-size:14px;margin:.8em 0 .2em}\
.legend span{margin-right:1.2em;font-size:12px}</style></head><body><h1>roce analyze</h1>",
    );
    let _ = write!(out, "<h2>Summary</h2><pre>{}</pre>", esc(&super::report_text::render(a)));
    // Flows of a few requests (MADs on QP 1) say little as a plot: the table has them.
    let plotted = |f: &&Flow| f.points.items.len() >= MIN_PLOTTED_POINTS;
    let mut busiest: Vec<&Flow> = a.flows.flows.iter().filter(plotted).collect();
    busiest.sort_by_key(|f| std::cmp::Reverse(f.packets));
    busiest.truncate(MAX_PLOTTED_FLOWS);
    out.push_str(
        "<h2>PSN over time</h2><p class=legend><span style=color:#1f4e99>&#9679; send</span><span style=color:#c00>&#10005; retransmission / duplicate</span><span style=color:#e69500>&#9632; out of order</span><span style=color:#2a9d2a>&#8212; ACK</span><span style=color:#b000b0>&#9650; NAK</span></p>",
    );
    if busiest.is_empty() {
        out.push_str("<p class=note>no flow with enough requests to plot</p>");
    }
    for f in &busiest {
        psn_plot(&mut out, f);
    }
    let hidden = a.flows.flows.iter().filter(|f| !f.points.items.is_empty()).count().saturating_sub(busiest.len());
    if hidden > 0 {
        let _ = write!(out, "<p class=note>{hidden} smaller flows not plotted (see the tables).</p>");
    }
    out.push_str("<h2>Throughput over time</h2>");
    let mut top: Vec<&Flow> = a.flows.flows.iter().filter(|f| f.packets >= MIN_PLOTTED_POINTS as u64).collect();
    top.sort_by_key(|f| std::cmp::Reverse(f.bytes));
    top.truncate(6);
    throughput_plot(&mut out, &top);
    // Congestion: the flows that were marked or got CNPs back, their sender's rate over time.
    let mut congested: Vec<&Flow> = a
        .flows
        .flows
        .iter()
        .filter(|f| f.ecn_ce + f.cnps > 0 && f.transport != roce_wire::bth::Transport::Cnp)
        .collect();
    if !congested.is_empty() {
        congested.sort_by_key(|f| std::cmp::Reverse(f.ecn_ce + f.cnps));
        congested.truncate(MAX_PLOTTED_FLOWS);
        out.push_str("<h2>Congestion: the sender's rate over time</h2>");
        for f in &congested {
            congestion_plot(&mut out, f);
        }
    }
    out.push_str("<h2>CM and SA ladder</h2>");
    ladder(&mut out, a);
    out.push_str("<h2>Multicast members over time</h2>");
    members_plot(&mut out, a);
    out.push_str("<h2>Latency histograms</h2>");
    let mut reads = Latency::default();
    let mut atomics = Latency::default();
    for f in &a.flows.flows {
        reads.merge(&f.read_latency);
        atomics.merge(&f.atomic_latency);
    }
    let mut mads = Latency::default();
    for r in a.mads.rows.values() {
        mads.merge(&r.latency);
    }
    histogram(&mut out, "RDMA READ request to first response", &reads);
    histogram(&mut out, "Atomic request to ATOMIC ACK", &atomics);
    histogram(&mut out, "MAD request to response", &mads);
    histogram(&mut out, "CM REQ to REP", &a.cm.req_rep);
    out.push_str("</body></html>\n");
    out
}
