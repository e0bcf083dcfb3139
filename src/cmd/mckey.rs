//! `roce mckey`: rdma-core's mckey on this stack: join a multicast group (SA Set and an
//! IGMP/MLD report, or through ibsim OpenSM's SA only), send or receive datagrams, leave
//! (SA Delete, IGMP/MLD leave), print a summary and the counters. Every exit path destroys
//! the id, so a stop while joined still leaves the group.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::{Duration, Instant as WallInstant};

use roce_cm::event::EventParam;
use roce_cm::{EventKind, PortSpace, QpType, UdDest};
use roce_net::driver::Driver;
use roce_wire::mcmember::JoinState;

use crate::plumbing::exit;
use crate::plumbing::options::{wait_secs, SaPortArgs, MAX_SIZE};
use crate::plumbing::out::{out, print_event, status};
use crate::plumbing::port::{
    check_families, check_size, destroy_ids, finish, open_port_or_exit, sa_timeout_text, CliDevice, PortOptions,
};

/// The most datagrams `mckey` sends or waits for.
pub const MAX_COUNT: u32 = 1_000_000;

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
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// The multicast group (IPv4 224.0.0.0/4 or IPv6 ff00::/8).
    #[arg(short = 'm', long = "group", value_name = "GROUP")]
    pub group: IpAddr,
    /// The stack's own address on the interface (beside the kernel's); required with --iface.
    #[arg(
        short = 'b',
        long = "bind",
        value_name = "ADDR",
        required_unless_present = "ibsim",
        conflicts_with = "ibsim"
    )]
    pub bind: Option<IpAddr>,
    /// Send (the default is to receive). Not with --ibsim (no data path on the sim).
    #[arg(short = 's', long, conflicts_with_all = ["receiver", "ibsim"])]
    pub sender: bool,
    /// Receive (the default).
    #[arg(short = 'r', long)]
    pub receiver: bool,
    /// Messages to send or to wait for (at most 1000000).
    #[arg(short = 'C', long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=MAX_COUNT as i64))]
    pub count: u32,
    /// Message size in bytes (at most the path MTU: the largest IB MTU that fits the
    /// interface MTU after the RoCEv2 headers, e.g. 1024 on a 1500-byte link).
    #[arg(short = 'S', long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(0..=MAX_SIZE as i64))]
    pub size: u32,
    /// The RDMA-CM port space, as rdma-core's mckey takes it: only RDMA_PS_UDP (0x0111).
    #[arg(short = 'p', long = "port-space", value_name = "PS", default_value = "0x0111", value_parser = port_space_udp)]
    pub port_space: u16,
    /// Join as a SendOnlyFullMember (rdma-core's -o; the same as --join-state sendonly).
    #[arg(short = 'o', long = "sendonly")]
    pub sendonly: bool,
    /// Join state.
    #[arg(long, value_enum, default_value_t = JoinArg::Full)]
    pub join_state: JoinArg,
    /// Seconds to wait after sending (senders) or to receive (receivers) before leaving
    /// (0 to 86400).
    #[arg(long, default_value = "3", value_parser = wait_secs, value_name = "SECS", allow_negative_numbers = true)]
    pub leave_after: Duration,
    /// No SA: join and leave with IGMP/MLD only, as a Linux RoCE port does.
    #[arg(long, conflicts_with_all = ["sa", "ibsim"])]
    pub no_sa: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub port: SaPortArgs,
}

fn port_space_udp(s: &str) -> Result<u16, String> {
    let v = s.trim_start_matches("0x").trim_start_matches("0X");
    match u16::from_str_radix(v, 16) {
        Ok(0x0111) => Ok(0x0111),
        Ok(_) | Err(_) => Err(format!("only RDMA_PS_UDP (0x0111) is supported, not {s}")),
    }
}

/// Join states `mckey` offers.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum JoinArg {
    /// FullMember (0x1).
    Full,
    /// SendOnlyFullMember (0x8).
    Sendonly,
}

/// Run `roce mckey`.
pub fn run(args: Args) -> ExitCode {
    if args.port.ibsim.is_none() && !args.no_sa && args.port.sa.is_none() {
        eprintln!("roce mckey: give --sa ADDR (the SA's address), or --no-sa for IGMP/MLD only");
        return ExitCode::from(exit::USAGE);
    }
    let join_state = match (args.sendonly, args.join_state) {
        (true, _) | (_, JoinArg::Sendonly) => JoinState::SEND_ONLY_FULL_MEMBER,
        (false, JoinArg::Full) => JoinState::FULL_MEMBER,
    };
    crate::plumbing::shutdown::install();
    let o = Options {
        port: args.port.options(args.bind, args.no_sa),
        group: args.group,
        sender: args.sender,
        count: args.count,
        size: args.size as usize,
        join_state,
        leave_after: args.leave_after,
        no_sa: args.no_sa,
    };
    ExitCode::from(mckey(&o))
}

/// What `run` resolved from [`Args`].
#[derive(Debug, Clone)]
struct Options {
    /// Port.
    port: PortOptions,
    /// Group.
    group: IpAddr,
    /// Send (else receive).
    sender: bool,
    /// Messages.
    count: u32,
    /// Message size.
    size: usize,
    /// Join state.
    join_state: JoinState,
    /// Seconds to wait before leaving (after sending; receivers: the receive window).
    leave_after: Duration,
    /// No SA path (IGMP/MLD only).
    no_sa: bool,
}

const JOIN_WAIT: Duration = Duration::from_secs(10);
const LEAVE_WAIT: Duration = Duration::from_secs(20);

/// Refuse what cannot work before any traffic: a group that is not multicast, address families
/// that disagree, a datagram larger than the path MTU.
fn mckey_check(o: &Options) -> Result<(), String> {
    const TOOL: &str = "roce mckey";
    if !o.group.is_multicast() {
        return Err(format!("{TOOL}: -m {} is not a multicast address (IPv4 224.0.0.0/4 or IPv6 ff00::/8)", o.group));
    }
    if o.port.ibsim.is_none() {
        check_families(TOOL, &[("-m", Some(o.group)), ("-b", Some(o.port.local)), ("--sa", o.port.sa)])?;
        if o.sender {
            check_size(TOOL, &o.port.iface, o.size, o.port.local.is_ipv4(), false)?;
        }
    }
    Ok(())
}

/// Join, send or receive, leave. Returns the exit status.
fn mckey(o: &Options) -> u8 {
    const TOOL: &str = "roce mckey";
    if let Err(e) = mckey_check(o) {
        eprintln!("{e}");
        return exit::USAGE;
    }
    let mut d = match open_port_or_exit(TOOL, &o.port) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let ibsim = o.port.ibsim.is_some();
    let local = if ibsim {
        IpAddr::V4(d.stack.config().ipv4.map(|(a, _)| a).unwrap_or(std::net::Ipv4Addr::UNSPECIFIED))
    } else {
        o.port.local
    };
    let id = match d.stack.create_id(PortSpace::Udp, QpType::Ud) {
        Ok(id) => id,
        Err(e) => {
            eprintln!("{TOOL}: create_id: {e}");
            return exit::FAILED;
        }
    };
    if let Err(e) = d.stack.bind_addr(id, SocketAddr::new(local, 0)) {
        eprintln!("{TOOL}: bind {local}: {e}");
        return exit::USAGE;
    }
    let qpn = if ibsim {
        None
    } else {
        match d.stack.create_qp_for_id(id) {
            Ok(q) => Some(q),
            Err(e) => {
                eprintln!("{TOOL}: create_qp: {e}");
                return finish(TOOL, &mut d, &[id], o.port.verbose, exit::FAILED);
            }
        }
    };
    let where_ = if ibsim { "ibsim".to_string() } else { o.port.iface.clone() };
    status!(
        "mckey: joining {} (MGID {}) as {} on {where_} from {local}{}",
        o.group,
        d.stack.mgid(&o.group),
        o.join_state,
        qpn.map_or(String::new(), |q| format!(" (QP 0x{q:06x})"))
    );
    let now = d.now();
    if let Err(e) = d.stack.join_multicast(now, id, o.group, o.join_state) {
        eprintln!("{TOOL}: join_multicast: {} ({e})", e.name());
        return finish(TOOL, &mut d, &[id], o.port.verbose, exit::FAILED);
    }
    let ev = d.wait_event(id, &[EventKind::MulticastJoin, EventKind::MulticastError], JOIN_WAIT).ok().flatten();
    let mut ud = None;
    let joined = match &ev {
        Some(e) => {
            print_event(e, "");
            if e.kind == EventKind::MulticastJoin {
                if let EventParam::Multicast { ud: u, .. } = &e.param {
                    ud = *u;
                }
                true
            } else {
                if e.status == roce_cm::Errno::ETIMEDOUT.status() {
                    eprintln!("{TOOL}: join: {}", sa_timeout_text(&d));
                }
                false
            }
        }
        None if d.stopped() => false,
        None => {
            eprintln!("{TOOL}: join: no event within {} s", JOIN_WAIT.as_secs());
            false
        }
    };
    let (mut posted, mut received) = (0u32, 0u32);
    let (errors0, small0) = (d.send_errors, too_small(&d));
    let t0 = WallInstant::now();
    if joined && o.sender && !d.stopped() {
        if let (Some(u), Some(qpn)) = (ud, qpn) {
            let dest = UdDest { ah: u.ah, remote_qpn: u.qp_num, remote_qkey: u.qkey };
            let mut payload = vec![0u8; o.size];
            for i in 0..o.count {
                if d.stopped() {
                    break;
                }
                payload.iter_mut().enumerate().for_each(|(j, b)| *b = (i as usize + j) as u8);
                if let Err(e) = d.stack.post_send(qpn, &dest, &payload, None) {
                    eprintln!("{TOOL}: post_send: {e}");
                    break;
                }
                posted += 1;
                let _ = d.run_for(Duration::from_millis(1));
                if o.count >= 1000 && (i + 1) % 1000 == 0 {
                    status!("progress: sent {}/{}", i + 1, o.count);
                }
            }
        }
        let _ = d.run_for(o.leave_after);
    } else if joined && !d.stopped() {
        let mut last = 0;
        let _ = d.run_until(o.leave_after.max(Duration::from_millis(1)), |d| {
            if let Some(q) = qpn {
                while d.stack.poll_recv(q).is_some() {
                    received += 1;
                }
            }
            if o.count >= 1000 && received / 1000 > last {
                last = received / 1000;
                status!("progress: received {received}/{}", o.count);
            }
            qpn.is_some() && received >= o.count
        });
    }
    let secs = t0.elapsed().as_secs_f64().max(1e-9);
    // Frames the device did not take (or that did not fit a frame) were not sent.
    let failed = (d.send_errors - errors0) + (too_small(&d) - small0);
    let sent = posted.saturating_sub(u32::try_from(failed).unwrap_or(u32::MAX));
    if sent < posted {
        eprintln!(
            "{TOOL}: {} of {posted} datagrams were not sent: {}",
            posted - sent,
            d.last_send_error.as_ref().map_or("transmit_buffer_too_small".to_string(), |e| e.to_string())
        );
    }
    // Leave: SA Delete (and the IGMP/MLD leave); never blocks past its retries.
    let mut ok_leave = false;
    if joined && !d.stopped() {
        status!("mckey: leaving {}", o.group);
        let now = d.now();
        match d.stack.leave_multicast(now, id, o.group) {
            Ok(()) => match d.wait_event(id, &[EventKind::MulticastLeft, EventKind::MulticastError], LEAVE_WAIT) {
                Ok(Some(e)) => {
                    print_event(&e, if e.kind == EventKind::MulticastLeft { "" } else { " (leave)" });
                    if e.kind == EventKind::MulticastLeft {
                        ok_leave = true;
                    } else {
                        if e.status == roce_cm::Errno::ETIMEDOUT.status() {
                            eprintln!("{TOOL}: leave: {}", sa_timeout_text(&d));
                        }
                        ok_leave = o.no_sa;
                    }
                }
                _ if d.stopped() => {}
                _ => eprintln!("{TOOL}: leave: no event within {} s", LEAVE_WAIT.as_secs()),
            },
            Err(e) => eprintln!("{TOOL}: leave_multicast: {} ({e})", e.name()),
        }
    }
    // Destroy the id on every path: a stop while joined leaves here (SA Delete, IGMP/MLD leave).
    destroy_ids(TOOL, &mut d, &[id]);
    // No data path through ibsim: nothing was to be received.
    let lost = if o.sender || qpn.is_none() { 0 } else { o.count.saturating_sub(received) };
    let n = if o.sender { sent } else { received };
    out!(
        "summary: sent {sent} received {received} lost {lost} in {secs:.3} s ({:.0} msg/s, {:.2} Mbit/s)",
        f64::from(n) / secs,
        f64::from(n) * o.size as f64 * 8.0 / secs / 1e6
    );
    let code = if joined && ok_leave && sent == posted { exit::OK } else { exit::FAILED };
    finish(TOOL, &mut d, &[], o.port.verbose, code)
}

fn too_small(d: &Driver<CliDevice>) -> u64 {
    d.stack.counters().dropped(roce_cm::DropReason::TransmitBufferTooSmall)
}
