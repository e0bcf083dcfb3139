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
    /// At most this many members in all groups together; a join past it is answered
    /// NO_RESOURCES (0x0100) and counted.
    #[arg(long, value_name = "N", default_value_t = roce_sa::DEFAULT_MAX_MEMBERS)]
    pub max_members: usize,
    /// At most this many members in one group (past it: NO_RESOURCES).
    #[arg(long, value_name = "N", default_value_t = roce_sa::DEFAULT_MAX_MEMBERS_PER_GROUP)]
    pub max_members_per_group: usize,
    /// At most this many members made by one requesting port, its proxy joins included (past
    /// it: NO_RESOURCES), so that one host's flood cannot crowd out the others.
    #[arg(long, value_name = "N", default_value_t = roce_sa::DEFAULT_MAX_MEMBERS_PER_PORT)]
    pub max_members_per_port: usize,
    /// Remove a member that has not joined again for this many seconds, as OpenSM removes the
    /// memberships of a port that left the subnet (default: members live until they leave,
    /// as on OpenSM; for clients that re-join periodically). 1 to 4294967295.
    #[arg(long, value_parser = duration_secs, value_name = "SECS", allow_negative_numbers = true)]
    pub member_lifetime: Option<Duration>,
    /// At most this many requests waiting from one requester (source address) while others'
    /// are answered in turn; past it its requests are dropped, counted
    /// `requester_queue_full`, so that one host's flood is shed and not another's joins.
    #[arg(long, value_name = "N", default_value_t = roce_net::sa_queue::DEFAULT_PER_REQUESTER)]
    pub requester_queue: usize,
    /// At most this many requests waiting in all (about 300 bytes each); past it the oldest
    /// of the requester with the most waiting is dropped, counted `request_queue_full`.
    #[arg(long, value_name = "N", default_value_t = roce_net::sa_queue::DEFAULT_LIMIT)]
    pub request_queue: usize,
    /// Receive on this many raw sockets (1 to 64), frames spread over them by flow (the
    /// kernel's PACKET_FANOUT_HASH of addresses and ports), each with its own kernel queue:
    /// a flood from one host fills its own socket's queue, not the one another host's join
    /// arrives in (unless their flows hash alike: 1 in N). Raw transport only.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_RX_QUEUES, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub rx_queues: u16,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub port: RawPortArgs,
}

/// Default `--rx-queues`: 1 in 8 that a host's flow shares a flooding host's socket.
pub const DEFAULT_RX_QUEUES: u16 = 8;

/// How often at most `roce sa-server` prints its progress line.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// The progress line's state: the request count last printed, and when.
#[derive(Default)]
struct Progress {
    printed: u64,
    at: Option<WallInstant>,
}

impl Progress {
    /// Print "N requests, G groups, M members" if the count changed since the last line, and
    /// PROGRESS_EVERY has passed since it or this is the `last` line.
    fn print(&mut self, sa: &roce_sa::SaResponder, last: bool) {
        let n = sa.stats().received;
        let due = last || self.at.is_none_or(|t| t.elapsed() >= PROGRESS_EVERY);
        if n == self.printed || !due {
            return;
        }
        status!("sa-server: {} requests, {} groups, {} members", n, sa.group_count(), sa.member_count());
        (self.printed, self.at) = (n, Some(WallInstant::now()));
    }
}

/// Run `roce sa-server`.
pub fn run(args: Args) -> ExitCode {
    // The SA's configuration is checked before any traffic.
    let config = roce_sa::SaConfig {
        max_members: args.max_members,
        max_members_per_group: args.max_members_per_group,
        max_members_per_port: args.max_members_per_port,
        member_lifetime: args.member_lifetime,
        ..roce_sa::SaConfig::roce()
    };
    let sa = match roce_sa::SaResponder::new(config) {
        Ok(sa) => sa,
        Err(e) => {
            eprintln!("roce sa-server: {e}");
            return ExitCode::from(exit::USAGE);
        }
    };
    let queue = roce_net::sa_queue::RequestQueueConfig {
        per_requester: args.requester_queue,
        limit: args.request_queue,
        ..Default::default()
    };
    if let Err(e) = queue.validate() {
        eprintln!(
            "roce sa-server: --requester-queue {} --request-queue {}: {e}",
            args.requester_queue, args.request_queue
        );
        return ExitCode::from(exit::USAGE);
    }
    shutdown::install();
    let mut port = args.port.options(args.ip);
    port.rx_queues = usize::from(args.rx_queues);
    ExitCode::from(sa_server(&port, args.duration, sa, queue))
}

/// An SA on a raw socket, answering on QP1 of `port.local` (with its own ARP/ND), for
/// `duration` (until a signal if `None`). Returns the exit status.
fn sa_server(
    port: &PortOptions,
    duration: Option<Duration>,
    sa: roce_sa::SaResponder,
    queue: roce_net::sa_queue::RequestQueueConfig,
) -> u8 {
    const TOOL: &str = "roce sa-server";
    let mut d = match open_port_or_exit(TOOL, port) {
        Ok(d) => d.with_sa(sa).with_sa_queue(queue),
        Err(code) => return code,
    };
    status!("sa-server: answering SA requests on {} QP1 ({})", port.local, port.iface);
    let end = duration.map(|d| WallInstant::now() + d);
    // The progress line: when the request count changed, at most once per PROGRESS_EVERY (a
    // line per turn under load would be thousands a second, and a slow reader of stdout, a
    // full pipe, would stop the SA in the write), and the last one when it stops.
    let mut progress = Progress::default();
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
            progress.print(sa, false);
        }
    }
    if let Some(sa) = d.sa.as_ref() {
        progress.print(sa, true);
    }
    if let Some(why) = shutdown::requested() {
        eprintln!("{TOOL}: {}: stopping", shutdown::reason(why));
    }
    if let Some(s) = d.sa.as_ref().map(|sa| *sa.stats()) {
        let refused = s.refused_members_total + s.refused_members_group + s.refused_members_port;
        if refused > 0 {
            println!(
                "sa-server: {refused} joins refused with NO_RESOURCES past a member cap (total {}, group {}, port {})",
                s.refused_members_total, s.refused_members_group, s.refused_members_port
            );
        }
        if s.members_expired > 0 {
            println!("sa-server: {} members expired (not joined again within --member-lifetime)", s.members_expired);
        }
        if s.dup_cache_evicted_young > 0 {
            println!(
                "sa-server: {} duplicate-cache entries evicted younger than {} s: a retransmission of those requests would be applied again (the cache is too small for this load)",
                s.dup_cache_evicted_young,
                roce_sa::DUP_CACHE_HORIZON.as_secs()
            );
        }
    }
    let q = *d.sa_queue.stats();
    if port.verbose || q.dropped_requester_queue_full + q.dropped_request_queue_full > 0 {
        println!(
            "sa-server: request queue: {} queued, {} answered in turn, at most {} waiting from {} requesters; dropped requester_queue_full: {} (past --requester-queue {}), dropped request_queue_full: {} (past --request-queue {})",
            q.queued,
            q.served,
            q.max_queued,
            q.max_active_flows,
            q.dropped_requester_queue_full,
            d.sa_queue.config().per_requester,
            q.dropped_request_queue_full,
            d.sa_queue.config().limit
        );
    }
    let r = *d.rmpp.stats();
    if r.transfers + r.refused_busy + r.unmatched > 0 {
        println!(
            "sa-server: RMPP tables: {} sent whole, {} timed out, {} stopped, {} aborted by the requester, {} aborted over a bad ACK, {} refused busy, {} under way; {} segments sent, {} resent; {} ACKs, {} stale, {} unmatched, {} repeated requests",
            r.completed,
            r.timed_out,
            r.stopped_by_peer,
            r.aborted_by_peer,
            r.aborted_bad_ack,
            r.refused_busy,
            d.rmpp.active(),
            r.segments_sent,
            r.segments_resent,
            r.acks,
            r.acks_stale,
            r.unmatched,
            r.repeated_requests
        );
    }
    finish(TOOL, &mut d, &[], port.verbose, code)
}
