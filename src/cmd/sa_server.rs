//! `roce sa-server`: roce-sa's SA (the MCMemberRecord service of an SM's SA) on a raw
//! socket, answering SA MADs on QP1 of its own address, with its own ARP/ND, until a signal
//! or `--duration`.

use std::net::IpAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant as WallInstant};

use crate::plumbing::exit;
use crate::plumbing::options::{duration_secs, RawPortArgs};
use crate::plumbing::out::status;
use crate::plumbing::port::{finish, open_port_or_exit, PortOptions};
use crate::plumbing::shutdown;

/// Run an SA (MCMemberRecord service) on a real interface, answering on QP1 of --ip.
///
/// Example: roce sa-server --iface veth1 --ip 198.18.0.2
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// The SA's address on the interface (it answers ARP/ND for it).
    #[arg(long, value_name = "ADDR")]
    pub ip: IpAddr,
    /// Stop after this many seconds (0 to 31536000; default: until SIGINT/SIGTERM/SIGHUP).
    #[arg(long, value_parser = duration_secs, value_name = "SECS", allow_negative_numbers = true)]
    pub duration: Option<Duration>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub port: RawPortArgs,
}

/// Run `roce sa-server`.
pub fn run(args: Args) -> ExitCode {
    shutdown::install();
    ExitCode::from(sa_server(&args.port.options(args.ip), args.duration))
}

/// An SA on a raw socket, answering on QP1 of `port.local` (with its own ARP/ND), for
/// `duration` (until a signal if `None`). Returns the exit status.
fn sa_server(port: &PortOptions, duration: Option<Duration>) -> u8 {
    const TOOL: &str = "roce sa-server";
    let mut d = match open_port_or_exit(TOOL, port) {
        Ok(d) => d.with_sa(roce_sa::SaResponder::with_defaults()),
        Err(code) => return code,
    };
    status!("sa-server: answering SA requests on {} QP1 ({})", port.local, port.iface);
    let end = duration.map(|d| WallInstant::now() + d);
    let mut last = 0;
    let mut code = exit::OK;
    while !d.stopped() {
        let left = end.map_or(Duration::from_secs(1), |e| e.saturating_duration_since(WallInstant::now()));
        if left.is_zero() {
            break;
        }
        if let Err(e) = d.turn(left.min(Duration::from_millis(200))) {
            eprintln!("{TOOL}: {e}");
            code = exit::FAILED;
            break;
        }
        if let Some(sa) = d.sa.as_ref() {
            let n = sa.stats().received;
            if n != last {
                status!("sa-server: {} requests, {} groups, {} members", n, sa.group_count(), sa.member_count());
                last = n;
            }
        }
    }
    if let Some(why) = shutdown::requested() {
        eprintln!("{TOOL}: {}: stopping", shutdown::reason(why));
    }
    finish(TOOL, &mut d, &[], port.verbose, code)
}
