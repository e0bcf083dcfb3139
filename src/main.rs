//! `roce`: a pure-Rust userspace RoCEv2 CM and multicast stack, as a command-line tool.
//! This file only parses arguments and prints; the work is in the library crates.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use roce::cli;

#[derive(Parser)]
#[command(name = "roce", version, about = "Speak RoCEv2, InfiniBand MAD/SA/CM and RoCE multicast from userspace", long_about = None,
          after_help = roce::plumbing::exit::TABLE)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Decode(roce::decode_cli::DecodeArgs),
    /// Benchmarks as ratios measured in one run (`roce bench decode`: against tshark).
    Bench(roce::bench_decode::BenchArgs),
    Encode(roce::encode::EncodeArgs),
    Send(roce::send::SendArgs),
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
    Demo(cli::DemoArgs),
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
    Mckey(cli::MckeyArgs),
    /// Query the SA for MCMemberRecords (Get with --mgid, else GetTable), like `saquery -m`.
    ///
    /// A response with a non-zero status is printed with the status and its meaning, and the
    /// exit code is 1. Needs CAP_NET_RAW.
    ///
    /// Example: roce sa-query --iface tap0 -b 198.18.0.1 --sa 198.18.0.2 --mgid ::ffff:239.1.2.3
    ///
    /// Example: roce sa-query --ibsim   (OpenSM through ibsim)
    SaQuery(cli::SaQueryArgs),
    /// Run the SA as a userspace agent of the kernel's umad on an RDMA (e.g. rxe) host.
    ///
    /// Opens /dev/infiniband/umadN, enables P_Key headers, registers for SA class 0x03
    /// version 2 (Get, Set, GetTable, Delete) on QP1, and answers with the same SA as
    /// `sa-server`, one log line per MAD each way. Needs access to the umad device (root).
    ///
    /// Example: roce sa-agent --device umad0
    SaAgent(cli::SaAgentArgs),
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
    Udaddy(cli::UdaddyArgs),
    /// Connect, accept and disconnect a connected (TCP port space, RC) id, as rdma-core's
    /// ucmatose does, with -C messages of -S bytes each way over the RC QP (SENDs).
    ///
    /// Client (-s SERVER): resolve_addr ▶ resolve_route ▶ connect (REQ) ▶ REP ▶ our RTU:
    /// ESTABLISHED ▶ our DREQ ▶ DREP: DISCONNECTED ▶ TIMEWAIT_EXIT (if the peer's DREQ comes
    /// first we answer it with DREP). A REJ ends it with `event: REJECTED, error: REASON`.
    /// Server (no -s): listen on -p, accept the first request (REP) ▶ the peer's RTU:
    /// ESTABLISHED ▶ our DREQ (as ucmatose's server) ▶ DISCONNECTED. Needs CAP_NET_RAW. Exit
    /// 0 only if every step succeeded.
    ///
    /// Example: roce cmatose -s 198.18.0.2 -b 198.18.0.1 --iface tap0 -C 10 -S 100
    Cmatose(cli::CmatoseArgs),
    /// rdma-core's rping over RC QPs: per ping a SEND of the buffer's address, an RDMA READ
    /// by the server, an RDMA WRITE back, "go ahead" SENDs (librdmacm/examples/rping.c).
    ///
    /// Example: roce rping -c -a 198.18.0.2 -I 198.18.0.1 --iface tap0 -C 10 -V -v
    Rping(roce::rping::RpingArgs),
    /// Run an SA (MCMemberRecord service) on a real interface, answering on QP1 of --ip.
    ///
    /// Example: roce sa-server --iface veth1 --ip 198.18.0.2
    SaServer(cli::SaServerArgs),
    /// Fuzz a live RoCEv2 peer (a kernel rxe) with structure-aware frames, predicting for each
    /// whether rxe counts it, and probing the peer's liveness.
    FuzzPeer(roce::fuzz_peer::FuzzPeerArgs),
}

fn main() -> ExitCode {
    // Every subcommand's --help ends with the one exit-status table.
    let cmd = Cli::command().mut_subcommands(|c| c.after_help(roce::plumbing::exit::TABLE));
    let cli = match Cli::from_arg_matches(&cmd.get_matches()) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    match cli.command {
        Command::Decode(a) => roce::decode_cli::run(a),
        Command::Bench(a) => roce::bench_decode::run(a),
        Command::Encode(a) => roce::encode::run(a),
        Command::Send(a) => roce::send::run(a),
        Command::Demo(a) => ExitCode::from(a.run()),
        Command::Mckey(a) => ExitCode::from(a.run()),
        Command::SaQuery(a) => ExitCode::from(a.run()),
        Command::SaAgent(a) => ExitCode::from(a.run()),
        Command::Udaddy(a) => ExitCode::from(a.run()),
        Command::Cmatose(a) => ExitCode::from(a.run()),
        Command::SaServer(a) => ExitCode::from(a.run()),
        Command::Rping(a) => roce::rping::run(a),
        Command::FuzzPeer(a) => roce::fuzz_peer::run(&a),
    }
}
