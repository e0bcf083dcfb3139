//! `roce encode`: the JSON lines of `roce decode --json` back into a pcap (the encoding
//! itself is `roce_decode::encode`).

use std::io::{self, BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use roce_decode::capture::linktype;
use roce_decode::encode::{encode_value, EncodeError, PcapOut, SettledBy};
use serde_json::Value;

use crate::plumbing::exit;
use crate::plumbing::out::warn_line;

/// Write frames from the JSON lines of `roce decode --json` (a file or `-` for standard input)
/// to a pcap file.
///
/// Present fields are used as given (wrong values included: a bad ICRC stays bad); absent ones
/// are computed (lengths, checksums, pad, ICRC); frames the JSON cannot describe field by field
/// come back from their `raw` bytes. A QP1 frame's MAD is built from its `mad`, `rmpp`, `sa`,
/// `mcmember`, `class_port_info`, `service_record` and `cm` members over its `payload` bytes;
/// where a member and the payload disagree, the member wins and a line on stderr names it.
/// A member that restates another (`cm.port` of `cm.fields.service_id`, `mad.response` of
/// `mad.method`, `bth.psn` of `psn`, …) follows it when the other was edited, and wins when
/// it was the one edited; a line on stderr says which (spec/decode.md).
/// Native InfiniBand lines (link types 247, 197) are built from `lrh`, `grh`, the BTH and its
/// members (an SMP's from `smp`), with the ICRC and VCRC, and the ERF header from `erf`.
/// `roce decode --json F | roce encode - -o G` gives G with the frames and timestamps of F.
///
/// Example: roce decode --json tests/data/sample.pcap | roce encode - -o copy.pcap
///
/// Example: roce decode --json in.pcap | jq -c '.psn = 7' | roce encode - -o psn7.pcap
///
/// Example: roce decode --json in.pcap | jq -c '.mcmember.port_gid = "fd00::7"' | roce encode - -o x.pcap
#[derive(clap::Args, Debug)]
#[command(after_help = exit::TABLE)]
pub struct Args {
    /// The JSON lines, `-` for standard input.
    pub file: PathBuf,
    /// The pcap file to write, `-` for standard output.
    #[arg(short = 'o', long = "output", value_name = "OUT.pcap")]
    pub output: PathBuf,
    /// Quiet: no summary and no notes on stderr (overrides are still reported).
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// Run `roce encode`.
pub fn run(args: Args) -> ExitCode {
    let input = match crate::plumbing::input::open("roce encode", &args.file) {
        Ok((input, _name)) => input,
        Err(code) => return ExitCode::from(code),
    };
    // `-o -`: standard output (for `| roce send -`).
    let file: Box<dyn Write> = if args.output.as_os_str() == "-" {
        Box::new(io::stdout().lock())
    } else {
        match std::fs::File::create(&args.output) {
            Ok(f) => Box::new(f),
            Err(e) => {
                warn_line!("roce encode: cannot write {}: {e}", args.output.display());
                return ExitCode::from(exit::USAGE);
            }
        }
    };
    let mut out: Option<PcapOut<io::BufWriter<Box<dyn Write>>>> = None;
    let mut pending = Some(io::BufWriter::new(file));
    let mut n = 0u64;
    let mut overridden = 0u64;
    let mut settled = 0u64;
    let mut first_lt: Option<u32> = None;
    for (i, line) in BufReader::new(input).lines().enumerate() {
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                warn_line!("roce encode: line {}: {e}", i + 1);
                return ExitCode::from(exit::USAGE);
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let enc = serde_json::from_str::<Value>(&line)
            .map_err(|e| EncodeError(format!("not JSON: {e}")))
            .and_then(|v| encode_value(&v));
        let f = match enc {
            Ok(f) => f,
            Err(e) => {
                warn_line!("roce encode: line {}: {e}", i + 1);
                return ExitCode::from(exit::USAGE);
            }
        };
        if out.is_none() {
            match PcapOut::new(pending.take().expect("writer"), f.linktype) {
                Ok(w) => out = Some(w),
                Err(e) => {
                    warn_line!("roce encode: {}: {e}", args.output.display());
                    return ExitCode::from(exit::FAILED);
                }
            }
        }
        let w = out.as_mut().expect("writer");
        if *first_lt.get_or_insert(f.linktype) != f.linktype {
            warn_line!(
                "roce encode: line {}: link type {} after frames of another link type (a pcap holds one; split the input)",
                i + 1,
                f.linktype
            );
            return ExitCode::from(exit::USAGE);
        }
        if let Err(e) = w.write(&f) {
            warn_line!("roce encode: {}: {e}", args.output.display());
            return ExitCode::from(exit::FAILED);
        }
        n += 1;
        // A structured member that contradicts the payload wins, and says so.
        if !f.overrides.is_empty() {
            overridden += 1;
            warn_line!(
                "roce encode: line {} (frame {n}): {} from the structured fields, not the payload",
                i + 1,
                f.overrides.join(", ")
            );
        }
        // A restating member and its field disagreed: which side went to the wire, and why.
        if !f.settled.is_empty() {
            settled += 1;
            let how = match f.settled_by {
                Some(SettledBy::Checksum) => " (the line's checksum tells which was edited)",
                Some(SettledBy::Rule) => {
                    " (nothing in the line tells which was edited: the field wins; drop the member you did not edit)"
                }
                None => "",
            };
            let pairs: Vec<String> = f.settled.iter().map(|s| s.text()).collect();
            warn_line!("roce encode: line {} (frame {n}): {}{how}", i + 1, pairs.join(", "));
        }
        if !args.quiet {
            for note in &f.notes {
                warn_line!("roce encode: line {} (frame {n}): {note}", i + 1);
            }
        }
    }
    let res = match out {
        Some(w) => w.finish().map(|_| ()),
        None => PcapOut::new(pending.take().expect("writer"), linktype::ETHERNET).and_then(|w| w.finish().map(|_| ())),
    };
    if let Err(e) = res {
        warn_line!("roce encode: {}: {e}", args.output.display());
        return ExitCode::from(exit::FAILED);
    }
    if !args.quiet {
        let mut why = Vec::new();
        if overridden > 0 {
            why.push(format!("{overridden} with structured fields overriding payload"));
        }
        if settled > 0 {
            why.push(format!("{settled} with restating members settled"));
        }
        let why = if why.is_empty() { String::new() } else { format!(" ({})", why.join(", ")) };
        warn_line!("roce encode: {n} frames to {}{why}", args.output.display());
    }
    ExitCode::SUCCESS
}
