//! `roce`: a pure-Rust userspace RoCEv2 CM and multicast stack, as a command-line tool.
//! This file only parses arguments and hands each command its own `Args`; every command is
//! one file of `roce::cmd`, with its help text on its `Args`.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use roce::cmd;

#[derive(Parser)]
#[command(name = "roce", version, about = "Speak RoCEv2, InfiniBand MAD/SA/CM and RoCE multicast from userspace", long_about = None,
          after_help = roce::plumbing::exit::TABLE)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Decode(cmd::decode::Args),
    Analyze(cmd::analyze::Args),
    Bench(cmd::bench::Args),
    Encode(cmd::encode::Args),
    Exec(cmd::exec::Args),
    Send(cmd::send::Args),
    Demo(cmd::demo::Args),
    Mckey(cmd::mckey::Args),
    SaQuery(cmd::sa_query::Args),
    SaAgent(cmd::sa_agent::Args),
    Udaddy(cmd::udaddy::Args),
    Cmatose(cmd::cmatose::Args),
    Rping(cmd::rping::Args),
    Pingpong(cmd::pingpong::Args),
    Perftest(cmd::perftest::Args),
    SaServer(cmd::sa_server::Args),
    FuzzPeer(cmd::fuzz_peer::Args),
}

fn main() -> ExitCode {
    // Every subcommand's --help ends with the one exit-status table.
    let cli = Cli::command().mut_subcommands(|c| c.after_help(roce::plumbing::exit::TABLE));
    let cli = match Cli::from_arg_matches(&cli.get_matches()) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    match cli.command {
        Command::Decode(a) => cmd::decode::run(a),
        Command::Analyze(a) => cmd::analyze::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Encode(a) => cmd::encode::run(a),
        Command::Exec(a) => cmd::exec::run(a),
        Command::Send(a) => cmd::send::run(a),
        Command::Demo(a) => cmd::demo::run(a),
        Command::Mckey(a) => cmd::mckey::run(a),
        Command::SaQuery(a) => cmd::sa_query::run(a),
        Command::SaAgent(a) => cmd::sa_agent::run(a),
        Command::Udaddy(a) => cmd::udaddy::run(a),
        Command::Cmatose(a) => cmd::cmatose::run(a),
        Command::Rping(a) => cmd::rping::run(a),
        Command::Pingpong(a) => cmd::pingpong::run(a),
        Command::Perftest(a) => cmd::perftest::run(a),
        Command::SaServer(a) => cmd::sa_server::run(a),
        Command::FuzzPeer(a) => cmd::fuzz_peer::run(a),
    }
}
