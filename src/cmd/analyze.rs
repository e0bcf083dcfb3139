//! `roce analyze`: one streaming pass over a capture (roce_decode::analyze), then the report:
//! text tables, one JSON document, an HTML page, and/or the capture back as annotated pcapng.

use std::io::{self, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::plumbing::exit;
use crate::plumbing::out::warn_line;
use roce_decode::analyze::annotate::PcapngWriter;
use roce_decode::analyze::{report_html, report_json, report_text, Analyzer, DEFAULT_MAX_FLOWS};
use roce_decode::capture::{ReadError, Reader};

/// Analyse a capture (pcap or pcapng, a file or `-`): flows per (IP source, IP destination,
/// BTH destination QP) with their PSN gaps, out-of-order packets, duplicates and
/// retransmissions, the RC acknowledgement side (ACKs, NAKs by kind, ACK coalescing, READ and
/// atomic latency), ECN CE marks, CNPs and bad ICRCs; MAD transactions by TID (latency,
/// resends, RMPP); CM connections (REQ→REP→RTU→DREQ→DREP, REJ reasons, MRA, SIDR); multicast
/// joins and leaves (SA, IGMP, MLD).
///
/// Memory is bounded by flows and open transactions, not frames: the plots keep at most a
/// fixed number of points per flow (decimated beyond, as the report says).
/// The JSON document follows spec/analyze.schema.json.
///
/// Example: roce analyze tests/data/sample.pcap
///
/// Example: roce analyze --json capture.pcapng | jq '.flows[] | select(.psn.retransmissions > 0)'
///
/// Example: roce analyze --html report.html --annotate annotated.pcapng capture.pcap
#[derive(clap::Args, Debug)]
#[command(after_help = exit::TABLE)]
pub struct Args {
    /// The capture file, `-` for standard input.
    pub file: PathBuf,
    /// Print one JSON document instead of the text tables.
    #[arg(long)]
    pub json: bool,
    /// Also write a self-contained HTML report (inline SVG plots, no script) here.
    #[arg(long, value_name = "REPORT.html")]
    pub html: Option<PathBuf>,
    /// Also write the capture back as pcapng here, with a comment on each frame the analysis
    /// has something to say about.
    #[arg(long, value_name = "OUT.pcapng")]
    pub annotate: Option<PathBuf>,
    /// Keep at most N flows (frames of further flows are counted, not analysed).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_FLOWS)]
    pub max_flows: usize,
    /// Quiet: no warnings on stderr (results and errors stay).
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// Run `roce analyze`.
pub fn run(args: Args) -> ExitCode {
    // SAFETY: setting a signal disposition to SIG_IGN has no preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let (input, name) = match crate::plumbing::input::open("roce analyze", &args.file) {
        Ok(opened) => opened,
        Err(code) => return ExitCode::from(code),
    };
    let mut reader = match Reader::new(BufReader::with_capacity(1 << 16, input)) {
        Ok(r) => r,
        Err(e) => {
            warn_line!("roce analyze: cannot read {name}: {e}");
            return ExitCode::from(exit::USAGE);
        }
    };
    let mut annotated = match &args.annotate {
        Some(path) => match std::fs::File::create(path).and_then(|f| PcapngWriter::new(BufWriter::new(f))) {
            Ok(w) => Some(w),
            Err(e) => {
                warn_line!("roce analyze: cannot write {}: {e}", path.display());
                return ExitCode::from(exit::USAGE);
            }
        },
        None => None,
    };
    let mut a = Analyzer::new(args.max_flows.max(1));
    let mut status = exit::OK;
    loop {
        match reader.next_frame() {
            Ok(Some((rec, data))) => {
                a.frame(rec.timestamp, rec.linktype, data);
                if let Some(w) = &mut annotated {
                    if let Err(e) = w.write(rec.timestamp, rec.linktype, rec.orig_len, data, a.note()) {
                        warn_line!("roce analyze: --annotate: {e}");
                        return ExitCode::from(exit::FAILED);
                    }
                }
            }
            Ok(None) => break,
            Err(e) => {
                // Everything before the damage is analysed; say where the input ends.
                let what = if matches!(e, ReadError::Truncated { .. }) { "warning" } else { "error" };
                if !(args.quiet && what == "warning") {
                    warn_line!("roce analyze: {what}: {name}: {e} (after {} frames)", a.totals.frames);
                }
                status = exit::USAGE;
                break;
            }
        }
    }
    a.finish();
    if let Some(w) = annotated {
        if let Err(e) = w.finish() {
            warn_line!("roce analyze: --annotate: {e}");
            return ExitCode::from(exit::FAILED);
        }
    }
    if let Some(path) = &args.html {
        if let Err(e) = std::fs::write(path, report_html::render(&a)) {
            warn_line!("roce analyze: cannot write {}: {e}", path.display());
            return ExitCode::from(exit::FAILED);
        }
    }
    let text = if args.json {
        let mut s = report_json::document(&a).to_string();
        s.push('\n');
        s
    } else {
        report_text::render(&a)
    };
    let mut out = io::stdout().lock();
    if out.write_all(text.as_bytes()).and_then(|()| out.flush()).is_err() {
        return ExitCode::from(exit::CLOSED_PIPE);
    }
    ExitCode::from(status)
}
