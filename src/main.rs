//! `roce`: a pure-Rust userspace RoCEv2 CM and multicast stack, as a command-line tool.
//! This file only parses arguments and prints; the work is in the library crates.

use std::io::Write;
use std::net::{IpAddr, Ipv6Addr};
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
    /// Example: roce decode tests/data/sample.pcap
    ///
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
    ///
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
    /// Join a multicast group on a real interface, send or receive, leave (rdma-core's mckey).
    ///
    /// Joins with an SA Set to --sa's QP1 (and an IGMP/MLD report), sends -C datagrams of -S
    /// bytes to the group (-s) or receives them (-r, the default), then leaves (SA Delete,
    /// IGMP/MLD leave) and prints a summary and the drop counters. Needs CAP_NET_RAW. Exit 0
    /// only if the join and the leave were both answered (with --no-sa: sent).
    ///
    /// Example: roce mckey -m 239.1.2.3 -b 198.18.0.1 --iface tap0 --sa 198.18.0.2 -s -C 5 --leave-after 1
    ///
    /// Example: roce mckey --ibsim Hca2 -m 239.1.2.3 --leave-after 1   (OpenSM through ibsim)
    Mckey {
        /// The multicast group (IPv4 or IPv6).
        #[arg(short = 'm', long = "group")]
        group: IpAddr,
        /// The stack's own address on the interface (beside the kernel's).
        #[arg(short = 'b', long = "bind", required_unless_present = "ibsim", default_value = "0.0.0.0")]
        bind: IpAddr,
        /// Send (the default is to receive).
        #[arg(short = 's', long, conflicts_with = "receiver")]
        sender: bool,
        /// Receive.
        #[arg(short = 'r', long)]
        receiver: bool,
        /// Messages to send or to wait for.
        #[arg(short = 'C', long, default_value_t = 10)]
        count: u32,
        /// Message size in bytes.
        #[arg(short = 'S', long, default_value_t = 100)]
        size: usize,
        #[command(flatten)]
        port: PortArgs,
        /// Join state.
        #[arg(long, value_enum, default_value_t = JoinArg::Full)]
        join_state: JoinArg,
        /// Seconds to wait after sending (senders) or to receive (receivers) before leaving.
        #[arg(long, default_value_t = 3.0)]
        leave_after: f64,
        /// No SA: join and leave with IGMP/MLD only, as a Linux RoCE port does.
        #[arg(long)]
        no_sa: bool,
    },
    /// Query the SA for MCMemberRecords (Get with --mgid, else GetTable), like `saquery -m`.
    ///
    /// A response with a non-zero status is printed with the status and its meaning, and the
    /// exit code is 1. Needs CAP_NET_RAW.
    ///
    /// Example: roce sa-query --iface tap0 -b 198.18.0.1 --sa 198.18.0.2 --mgid ::ffff:239.1.2.3
    ///
    /// Example: roce sa-query --ibsim   (OpenSM through ibsim)
    SaQuery {
        /// The stack's own address on the interface.
        #[arg(short = 'b', long = "bind", required_unless_present = "ibsim", default_value = "0.0.0.0")]
        bind: IpAddr,
        /// Get this group's record (else GetTable of all).
        #[arg(long)]
        mgid: Option<Ipv6Addr>,
        #[command(flatten)]
        port: PortArgs,
    },
    /// Run the SA as a userspace agent of the kernel's umad on an RDMA (e.g. rxe) host.
    ///
    /// Opens /dev/infiniband/umadN, enables P_Key headers, registers for SA class 0x03
    /// version 2 (Get, Set, GetTable, Delete) on QP1, and answers with the same SA as
    /// `sa-server`, one log line per MAD each way. Needs access to the umad device (root).
    ///
    /// Example: roce sa-agent --device umad0
    SaAgent {
        /// The umad device (name under /dev/infiniband, or a path).
        #[arg(long, default_value = "umad0")]
        device: String,
        /// Stop after this many seconds (default: run until killed).
        #[arg(long)]
        duration: Option<f64>,
    },
    /// Resolve a UD service by SIDR and exchange datagrams with it (rdma-core's udaddy).
    ///
    /// Client (-s SERVER): resolve_addr ▶ resolve_route ▶ UD QP ▶ connect (SIDR_REQ) ▶
    /// ESTABLISHED with the service's QPN and Q_Key (SIDR_REP) ▶ send -C datagrams of -S
    /// bytes (SEND with immediate = our QPN, as udaddy) ▶ receive -C replies. Server (no -s):
    /// listen on -p, accept the CONNECT_REQUEST (SIDR_REP with our QPN), receive -C
    /// datagrams, reply -C to the sender (QPN from the immediate data). Needs CAP_NET_RAW.
    /// Exit 0 only if every step succeeded. (rdma-core's udaddy uses -p for the port space
    /// and a fixed port 7174; here -p is the port.)
    ///
    /// Example: roce udaddy -s 198.18.0.2 -b 198.18.0.1 --iface tap0 -C 10
    ///
    /// Example: roce udaddy -b 198.18.0.1 --iface tap0   (server)
    Udaddy {
        /// The server's address (client mode); without it, run the server.
        #[arg(short = 's', long = "server")]
        server: Option<IpAddr>,
        /// The stack's own address on the interface (beside the kernel's).
        #[arg(short = 'b', long = "bind")]
        bind: IpAddr,
        /// Datagrams each way.
        #[arg(short = 'C', long, default_value_t = 10)]
        count: u32,
        /// Datagram size in bytes.
        #[arg(short = 'S', long, default_value_t = 100)]
        size: usize,
        /// The RDMA-CM port (UDP port space).
        #[arg(short = 'p', long = "port", default_value_t = 7174)]
        cm_port: u16,
        /// Seconds to wait for each step (resolution, the request, the datagrams).
        #[arg(long, default_value_t = 20.0)]
        timeout: f64,
        #[command(flatten)]
        port: PortArgs,
    },
    /// Connect, accept and disconnect a connected (TCP port space, RC) id, as rdma-core's
    /// ucmatose does, WITHOUT data: this stack has no RC data path (no RC QP, no sends).
    ///
    /// Client (-s SERVER): resolve_addr ▶ resolve_route ▶ connect (REQ) ▶ REP ▶ our RTU:
    /// ESTABLISHED ▶ our DREQ ▶ DREP: DISCONNECTED ▶ TIMEWAIT_EXIT (if the peer's DREQ comes
    /// first we answer it with DREP). A REJ ends it with `event: REJECTED, error: REASON`.
    /// Server (no -s): listen on -p, accept the first request (REP) ▶ the peer's RTU:
    /// ESTABLISHED ▶ our DREQ (as ucmatose's server) ▶ DISCONNECTED. Needs CAP_NET_RAW. Exit
    /// 0 only if every step succeeded.
    ///
    /// Example: roce cmatose -s 198.18.0.2 -b 198.18.0.1 --iface tap0
    Cmatose {
        /// The server's address (client mode); without it, run the server.
        #[arg(short = 's', long = "server")]
        server: Option<IpAddr>,
        /// The stack's own address on the interface (beside the kernel's).
        #[arg(short = 'b', long = "bind")]
        bind: IpAddr,
        /// The RDMA-CM port (TCP port space).
        #[arg(short = 'p', long = "port", default_value_t = 7471)]
        cm_port: u16,
        /// Seconds to wait for each step.
        #[arg(long, default_value_t = 20.0)]
        timeout: f64,
        #[command(flatten)]
        port: PortArgs,
    },
    /// Run an SA (MCMemberRecord service) on a real interface, answering on QP1 of --ip.
    ///
    /// Example: roce sa-server --iface veth1 --ip 198.18.0.2
    /// Fuzz a live RoCEv2 peer (a kernel rxe) with structure-aware frames, predicting for each
    /// whether rxe counts it, and probing the peer's liveness.
    FuzzPeer(roce::fuzz_peer::FuzzPeerArgs),
    SaServer {
        /// The SA's address on the interface (it answers ARP/ND for it).
        #[arg(long)]
        ip: IpAddr,
        /// Stop after this many seconds (default: run until killed).
        #[arg(long)]
        duration: Option<f64>,
        #[command(flatten)]
        port: PortArgs,
    },
}

/// Where a stack runs.
#[derive(clap::Args, Debug, Clone)]
struct PortArgs {
    /// The interface to run on (a raw AF_PACKET socket).
    #[arg(long, required_unless_present = "ibsim")]
    iface: Option<String>,
    /// Talk to OpenSM's SA through ibsim instead (attach to the simulated HCA NODE, default:
    /// the sim's default port); the SA MADs are the same, without the RoCE framing.
    #[arg(long, num_args = 0..=1, default_missing_value = "", value_name = "NODE")]
    ibsim: Option<String>,
    /// The SA's address (its QP1 answers SA MADs).
    #[arg(long)]
    sa: Option<IpAddr>,
    /// Prefix length of the stack's address (default: the interface's subnet, else 24/64).
    #[arg(long)]
    prefix: Option<u8>,
    /// Write every frame to this pcap file.
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// Print every frame, and every counter at exit.
    #[arg(short = 'v', long)]
    verbose: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum JoinArg {
    /// FullMember (0x1).
    Full,
    /// SendOnlyFullMember (0x8).
    Sendonly,
}

fn port_options(p: &PortArgs, local: IpAddr, no_sa: bool) -> roce::tools::PortOptions {
    roce::tools::PortOptions {
        iface: p.iface.clone().unwrap_or_default(),
        local,
        prefix: p.prefix,
        sa: if no_sa { None } else { p.sa },
        pcap: p.pcap.clone(),
        verbose: p.verbose,
        paths: if no_sa { roce_cm::MulticastPaths::IGMP_MLD_ONLY } else { roce_cm::MulticastPaths::BOTH },
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Decode { file, json } => decode(&file, json),
        Command::Demo { pcap, ipv6, loss, count, seed } => demo(pcap, ipv6, loss, count, seed),
        Command::Mckey { group, bind, sender, receiver: _, count, size, port, join_state, leave_after, no_sa } => {
            if let Some(node) = &port.ibsim {
                let js = match join_state {
                    JoinArg::Full => roce_wire::mcmember::JoinState::FULL_MEMBER,
                    JoinArg::Sendonly => roce_wire::mcmember::JoinState::SEND_ONLY_FULL_MEMBER,
                };
                let node = (!node.is_empty()).then_some(node.as_str());
                let after = std::time::Duration::from_secs_f64(leave_after.max(0.0));
                return ExitCode::from(roce::tools::mckey_ibsim(node, group, js, after) as u8);
            }
            if !no_sa && port.sa.is_none() {
                eprintln!("roce mckey: give --sa ADDR (the SA's address), or --no-sa for IGMP/MLD only");
                return ExitCode::from(2);
            }
            let o = roce::tools::MckeyOptions {
                port: port_options(&port, bind, no_sa),
                group,
                sender,
                count,
                size,
                join_state: match join_state {
                    JoinArg::Full => roce_wire::mcmember::JoinState::FULL_MEMBER,
                    JoinArg::Sendonly => roce_wire::mcmember::JoinState::SEND_ONLY_FULL_MEMBER,
                },
                leave_after: std::time::Duration::from_secs_f64(leave_after.max(0.0)),
                no_sa,
            };
            ExitCode::from(roce::tools::mckey(&o) as u8)
        }
        Command::SaQuery { bind: _, mgid, port } if port.ibsim.is_some() => {
            let node = port.ibsim.as_deref().filter(|n| !n.is_empty());
            ExitCode::from(roce::tools::sa_query_ibsim(node, mgid.map(roce_wire::Gid::from_ipv6)) as u8)
        }
        Command::SaQuery { bind, mgid, port } => ExitCode::from(roce::tools::sa_query(
            &port_options(&port, bind, false),
            mgid.map(roce_wire::Gid::from_ipv6),
        ) as u8),
        Command::SaAgent { device, duration } => {
            let d = duration.map(|s| std::time::Duration::from_secs_f64(s.max(0.0)));
            match roce::sa_agent::run(&device, d, roce_sa::SaConfig::default()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("roce sa-agent: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Command::Udaddy { server, bind, count, size, cm_port, timeout, port } => {
            if port.ibsim.is_some() {
                eprintln!("roce udaddy: --ibsim has no data path; give --iface");
                return ExitCode::from(2);
            }
            let o = roce::cm_tools::UdaddyOptions {
                port: port_options(&port, bind, true),
                server,
                cm_port,
                count,
                size,
                timeout: std::time::Duration::from_secs_f64(timeout.max(0.0)),
            };
            ExitCode::from(roce::cm_tools::udaddy(&o) as u8)
        }
        Command::Cmatose { server, bind, cm_port, timeout, port } => {
            if port.ibsim.is_some() {
                eprintln!("roce cmatose: give --iface (no ibsim CM path)");
                return ExitCode::from(2);
            }
            let o = roce::cm_tools::CmatoseOptions {
                port: port_options(&port, bind, true),
                server,
                cm_port,
                timeout: std::time::Duration::from_secs_f64(timeout.max(0.0)),
            };
            ExitCode::from(roce::cm_tools::cmatose(&o) as u8)
        }
        Command::FuzzPeer(a) => roce::fuzz_peer::run(&a),
        Command::SaServer { ip, duration, port } => {
            let d = duration.map(|s| std::time::Duration::from_secs_f64(s.max(0.0)));
            ExitCode::from(roce::tools::sa_server(&port_options(&port, ip, true), d) as u8)
        }
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
