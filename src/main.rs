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
    /// Run the embedded demo: two hosts and an SA on a simulated link (no root, no network).
    ///
    /// A joins a multicast group (SA Set ▶ GetResp, IGMP report), B joins, A sends datagrams
    /// to the group, B receives them, A leaves (SA Delete ▶ DeleteResp, IGMP leave), B leaves.
    /// Prints every frame as `roce decode` does and every event, verifies each step, and exits
    /// 0 only if every step was verified.
    ///
    /// Example: roce demo
    /// Example: roce demo --ipv6 --loss 0.3 --pcap demo.pcap
    Demo {
        /// Write every frame to this pcap file.
        #[arg(long)]
        pcap: Option<PathBuf>,
        /// Use IPv6 (fd00::/8 hosts, group ff0e::1:2:3 with MLDv2).
        #[arg(long)]
        ipv6: bool,
        /// Frame loss probability on the hosts' links (0.0–1.0).
        #[arg(long, default_value_t = 0.0)]
        loss: f64,
        /// Datagrams A sends to the group.
        #[arg(short = 'C', long, default_value_t = 5)]
        count: u32,
        /// Seed of the simulated link.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Decode { file, json } => decode(&file, json),
        Command::Demo { pcap, ipv6, loss, count, seed } => demo(pcap, ipv6, loss, count, seed),
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

fn demo(pcap: Option<PathBuf>, ipv6: bool, loss: f64, count: u32, seed: u64) -> ExitCode {
    if !(0.0..=1.0).contains(&loss) {
        eprintln!("roce demo: --loss must be between 0 and 1, not {loss}");
        return ExitCode::from(2);
    }
    let opts = roce::demo::DemoOptions { ipv6, loss, count, pcap, seed };
    let report = roce::demo::run(&opts);
    for l in &report.lines {
        println!("{l}");
    }
    let verdict = if report.ok() { "PASS" } else { "FAIL" };
    println!(
        "verdict: {verdict}: {} steps verified, {} failed; {} frames; {} of {} datagrams received",
        report.passed.len(),
        report.failed.len(),
        report.frames,
        report.received,
        report.sent
    );
    for f in &report.failed {
        println!("failed: {f}");
    }
    if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
