//! `roce`: a pure-Rust userspace RoCEv2 CM and multicast stack, as a command-line tool.
//! This file only parses arguments and prints; the work is in the library crates.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "roce", version, about = "Speak RoCEv2, InfiniBand MAD/SA/CM and RoCE multicast from userspace", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Decode a capture (pcap or pcapng): one line per frame, or one JSON object per line.
    ///
    /// Every frame is listed, RoCEv2 or not; RoCEv2 frames show addresses, opcode, QPs, PSN,
    /// P_Key, the MAD class/method/attribute, TID, SA component mask, MCMemberRecord fields
    /// and whether the ICRC is right.
    ///
    /// Example: roce decode tests/data/sa-join-leave.pcap
    /// Example: roce decode --json capture.pcapng | jq .icrc
    Decode {
        /// The capture file.
        file: PathBuf,
        /// One JSON object per line per frame instead of the summary.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Decode { file, json } => decode(&file, json),
    }
}

fn decode(file: &std::path::Path, json: bool) -> ExitCode {
    let frames = match roce::capture::read_file(file) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("roce decode: cannot read {e}");
            return ExitCode::from(2);
        }
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let t0 = frames.first().map(|f| f.timestamp).unwrap_or_default();
    for (i, f) in frames.iter().enumerate() {
        let n = i + 1;
        let rel = f.timestamp.saturating_sub(t0).as_secs_f64();
        let line = roce::decode::decode_captured(f);
        let res = if json {
            let mut obj = serde_json::Map::new();
            obj.insert("frame".into(), n.into());
            obj.insert("time".into(), rel.into());
            obj.extend(line.json);
            writeln!(out, "{}", serde_json::Value::Object(obj))
        } else {
            writeln!(out, "{n:>5} {rel:>11.6} {}", line.summary)
        };
        if res.is_err() {
            // A closed pipe (`| head`) is not an error of ours.
            return ExitCode::SUCCESS;
        }
    }
    let _ = out.flush();
    ExitCode::SUCCESS
}
