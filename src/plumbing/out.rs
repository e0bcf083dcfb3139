//! The one printer of the network commands: results to stdout (a closed stdout is a stop
//! request, never a panic), progress and status to stdout unless `-q`, errors to stderr, and
//! one format for CM events and counters, shared by every tool. Uses [`super::shutdown`] (a
//! closed stdout is a stop).

use std::fmt::{self, Write as _};
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

use roce_cm::event::EventParam;
use roce_cm::{CmEvent, Counters, Errno};
use roce_net::raw::RawStats;
use roce_wire::mad::MadStatus;

use crate::plumbing::shutdown;

static QUIET: AtomicBool = AtomicBool::new(false);

/// `-q`: silence progress and status lines (results and errors stay).
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Write one line to stdout. A write error (EPIPE: `| head` went away) marks stdout closed and
/// asks the running command to stop (exit status 141 after its ids are destroyed).
pub fn line(args: fmt::Arguments<'_>) {
    if shutdown::stdout_closed() {
        return;
    }
    let mut o = std::io::stdout().lock();
    if o.write_fmt(args).and_then(|()| o.write_all(b"\n")).and_then(|()| o.flush()).is_err() {
        shutdown::stdout_went_away();
    }
}

/// Write one progress/status line unless `-q`.
pub fn status(args: fmt::Arguments<'_>) {
    if !QUIET.load(Ordering::Relaxed) {
        line(args);
    }
}

/// A result line on stdout (never silenced).
macro_rules! out {
    ($($t:tt)*) => { $crate::plumbing::out::line(format_args!($($t)*)) };
}
pub(crate) use out;

/// A progress/status line on stdout (silenced by `-q`).
macro_rules! status_line {
    ($($t:tt)*) => { $crate::plumbing::out::status(format_args!($($t)*)) };
}
pub(crate) use status_line as status;

/// A line on stderr, for the commands that print no CM events (`decode`, `encode`, `send`);
/// a closed stderr is not worth a panic.
macro_rules! warn_line {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}
pub(crate) use warn_line;

/// The errno name of an event status (`-110` → `ETIMEDOUT`), if it is a negative errno.
pub fn errno_name(status: i32) -> Option<&'static str> {
    let v = status.checked_neg()?;
    Errno::from_value(v).map(Errno::name)
}

/// One CM event as every tool prints it: `event: KIND status N [ERRNO]` and the parameters
/// (multicast record and UD parameters, SA status, connection parameters).
pub fn event_line(e: &CmEvent) -> String {
    let mut s = format!("event: {} status {}", e.kind.name(), e.status);
    match &e.param {
        EventParam::Multicast { record, ud, sa_status, .. } => {
            if let Some(r) = record {
                let _ = write!(s, " MLID 0x{:04x} MTU {} rate {}", r.mlid, r.mtu, r.rate);
            }
            if let Some(u) = ud {
                let _ = write!(s, " qp_num 0x{:06x} qkey 0x{:08x}", u.qp_num, u.qkey);
            } else if let Some(r) = record {
                let _ = write!(s, " qkey 0x{:08x}", r.q_key);
            }
            if let Some(st) = sa_status {
                let _ = write!(s, " SA status {}", MadStatus(*st));
            }
        }
        EventParam::Ud(u) => {
            let _ = write!(s, " qp_num 0x{:06x} qkey 0x{:08x} dgid {}", u.qp_num, u.qkey, u.ah.dgid);
        }
        EventParam::Conn(c) => {
            let _ = write!(s, " remote_qpn 0x{:06x} private_data {} bytes", c.remote_qpn, c.private_data.len());
        }
        _ => {}
    }
    s
}

/// Print one CM event (with `suffix`, e.g. " (leave)"), and its errno name when it failed.
pub fn print_event(e: &CmEvent, suffix: &str) {
    match errno_name(e.status) {
        Some(n) => line(format_args!("{}{suffix} {n}", event_line(e))),
        None => line(format_args!("{}{suffix}", event_line(e))),
    }
}

/// Print the counters (all drop reasons with `verbose`, else the non-zero ones), and the
/// device's send errors.
pub fn print_counters(c: &Counters, send_errors: u64, verbose: bool) {
    print_counters_raw(c, send_errors, None, verbose);
}

/// [`print_counters`], and a raw socket's own counts when it has any (or with `verbose`): the
/// frames the kernel dropped before the stack saw them (socket queue or ring full), the frames
/// too long for a receive slot, and ring set-ups that fell back to `recvmmsg`/`sendmmsg`.
pub fn print_counters_raw(c: &Counters, send_errors: u64, raw: Option<RawStats>, verbose: bool) {
    line(format_args!("{}", counters_text(c, send_errors, raw, verbose)));
}

fn counters_text(c: &Counters, send_errors: u64, raw: Option<RawStats>, verbose: bool) -> String {
    let mut s = format!(
        "counters: rx {} accepted {} tx {} dropped {} send_errors {}",
        c.rx_frames,
        c.rx_accepted,
        c.tx_frames,
        c.total_dropped(),
        send_errors
    );
    for (r, n) in &c.dropped {
        if *n > 0 || verbose {
            let _ = write!(s, "\n  dropped {r}: {n}");
        }
    }
    if let Some(r) = raw.filter(|r| verbose || r.kernel_drops > 0 || r.truncated > 0 || r.ring_fallbacks > 0) {
        let _ = write!(
            s,
            "\n  raw socket: kernel_drops {} (queue full, before the stack saw them) truncated {} ring_fallbacks {}",
            r.kernel_drops, r.truncated, r.ring_fallbacks
        );
    }
    if let Some(r) = raw.filter(|r| verbose || r.gso_not_udp > 0 || r.gso_refused > 0) {
        let _ = write!(
            s,
            "\n  raw socket gso: runs {} of {} frames, reads {} of {} frames, not_udp {} (dropped), refused {}",
            r.gso_runs, r.gso_run_frames, r.gso_reads, r.gso_split_frames, r.gso_not_udp, r.gso_refused
        );
    }
    s
}

/// The udp transport's counts at exit: on one line, with every reason a frame was not sent
/// that counted (or all, with `-v`).
pub fn print_udp_counters(u: &roce_net::udp::UdpStats, verbose: bool) {
    line(format_args!("{}", udp_counters_text(u, verbose)));
}

fn udp_counters_text(u: &roce_net::udp::UdpStats, verbose: bool) -> String {
    let mut s = format!(
        "  udp socket: sent {} received {} truncated {} ipv4_id_from_icrc {} receive_queue_overflow {} send_messages {} reads {}{}",
        u.sent,
        u.received,
        u.truncated,
        u.ipv4_id_from_icrc,
        u.receive_queue_overflow,
        u.send_messages,
        u.reads,
        if u.gso_disabled { " (UDP_SEGMENT refused: one datagram per message)" } else { "" }
    );
    for (reason, n) in u.not_sent_all() {
        if n > 0 || verbose {
            let _ = write!(s, "\n  udp not sent, {}: {n}", reason.name());
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_socket_counts_named_when_not_zero() {
        let c = Counters::default();
        let quiet = counters_text(&c, 0, Some(RawStats::default()), false);
        assert!(!quiet.contains("raw socket"), "{quiet}");
        let r = RawStats { kernel_drops: 7, truncated: 2, ..RawStats::default() };
        let t = counters_text(&c, 0, Some(r), false);
        assert!(
            t.contains(
                "raw socket: kernel_drops 7 (queue full, before the stack saw them) truncated 2 ring_fallbacks 0"
            ),
            "{t}"
        );
        assert!(counters_text(&c, 0, Some(RawStats::default()), true).contains("raw socket: kernel_drops 0"));
        assert!(!counters_text(&c, 0, None, true).contains("raw socket"));
    }

    #[test]
    fn errno_names() {
        assert_eq!(errno_name(-110), Some("ETIMEDOUT"));
        assert_eq!(errno_name(-22), Some("EINVAL"));
        assert_eq!(errno_name(0), None);
        assert_eq!(errno_name(8), None);
        assert_eq!(errno_name(i32::MIN), None);
    }
}
