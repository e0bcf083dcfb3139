//! The arguments of the network commands and the demo, one `clap::Args` struct per command,
//! each with `run() -> u8` (the exit status, [`crate::plumbing::exit`]). Every value is checked before
//! anything is sent: durations are finite, non-negative and bounded; counts and sizes are
//! bounded, and the message names the bound. Options a command cannot use are not offered.

use std::net::{IpAddr, Ipv6Addr};
use std::path::PathBuf;
use std::time::Duration;

use roce_wire::mcmember::JoinState;

use crate::plumbing::exit;
use crate::plumbing::tools::PortOptions;

/// The longest wait a `--leave-after` or `--timeout` takes: one day.
pub const MAX_WAIT_SECS: f64 = 86_400.0;
/// The longest `--duration` of a server: 365 days.
pub const MAX_DURATION_SECS: f64 = 365.0 * 86_400.0;
/// The most datagrams `mckey` sends or waits for.
pub const MAX_MCKEY_COUNT: u32 = 1_000_000;
/// The most datagrams `udaddy` exchanges each way (all are queued at once, as udaddy does).
pub const MAX_UDADDY_COUNT: u32 = 10_000;
/// The largest `-S` taken at all (1 MiB); a sender's path MTU (at most 4096) then bounds it
/// per interface, with the limit in the message.
pub const MAX_SIZE: u32 = 1 << 20;

fn secs(s: &str, max: f64) -> Result<Duration, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !v.is_finite() || !(0.0..=max).contains(&v) {
        return Err(format!("must be a number of seconds from 0 to {max}, not {s}"));
    }
    Ok(Duration::from_secs_f64(v))
}

/// A `--leave-after`/`--timeout` value: seconds, finite, 0 to [`MAX_WAIT_SECS`].
pub fn wait_secs(s: &str) -> Result<Duration, String> {
    secs(s, MAX_WAIT_SECS)
}

/// A `--duration` value: seconds, finite, 0 to [`MAX_DURATION_SECS`].
pub fn duration_secs(s: &str) -> Result<Duration, String> {
    secs(s, MAX_DURATION_SECS)
}

/// A `--mac` value: six hex bytes separated by colons, unicast (bit 0 of the first byte clear)
/// and not all zero.
pub fn unicast_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    let bytes: Vec<u8> = parts
        .iter()
        .filter(|p| (1..=2).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_hexdigit()))
        .filter_map(|p| u8::from_str_radix(p, 16).ok())
        .collect();
    let mac: [u8; 6] = match (parts.len(), bytes.try_into()) {
        (6, Ok(m)) => m,
        _ => return Err(format!("'{s}' is not a MAC address: six hex bytes separated by colons (aa:bb:cc:dd:ee:ff)")),
    };
    if mac[0] & 1 != 0 || mac == [0; 6] {
        return Err(format!("{s} is not a unicast MAC address (bit 0 of the first byte set, or all zero)"));
    }
    Ok(mac)
}

/// A `--loss` probability: finite, 0 to 1.
pub fn probability(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("'{s}' is not a number"))?;
    if !v.is_finite() || !(0.0..=1.0).contains(&v) {
        return Err(format!("must be a probability from 0 to 1, not {s}"));
    }
    Ok(v)
}

/// Where `mckey` and `sa-query` run: a raw socket on an interface, or OpenSM's SA through ibsim.
#[derive(clap::Args, Debug, Clone)]
pub struct SaPortArgs {
    /// The interface to run on (a raw AF_PACKET socket; needs CAP_NET_RAW).
    #[arg(long, required_unless_present = "ibsim", value_name = "IFACE")]
    pub iface: Option<String>,
    /// Talk to OpenSM's SA through ibsim instead (attach to the simulated HCA NODE, default:
    /// the sim's default port); the SA MADs are the same, without the RoCE framing.
    #[arg(long, num_args = 0..=1, default_missing_value = "", value_name = "NODE",
          conflicts_with_all = ["iface", "sa", "prefix", "pcap"])]
    pub ibsim: Option<String>,
    /// The SA's address (its QP1 answers SA MADs).
    #[arg(long, value_name = "ADDR")]
    pub sa: Option<IpAddr>,
    /// Prefix length of the stack's address (default: the interface's subnet, else 24/64).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=128))]
    pub prefix: Option<u8>,
    /// The stack's own unicast MAC instead of the interface's (aa:bb:cc:dd:ee:ff): the kernel
    /// then drops the stack's frames as another host's instead of routing each (fewer CPU
    /// cycles per packet); the interface passes it while the tool runs (PACKET_MR_UNICAST).
    #[arg(long, value_parser = unicast_mac, value_name = "MAC", conflicts_with = "ibsim")]
    pub mac: Option<[u8; 6]>,
    /// Write every frame to this pcap file.
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// Print every frame, and every counter at exit.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Quiet: no progress or status lines (results and errors stay).
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// Where `udaddy`, `cmatose` and `sa-server` run: a raw socket on an interface.
#[derive(clap::Args, Debug, Clone)]
pub struct RawPortArgs {
    /// The interface to run on (a raw AF_PACKET socket; needs CAP_NET_RAW).
    #[arg(long, value_name = "IFACE")]
    pub iface: String,
    /// Prefix length of the stack's address (default: the interface's subnet, else 24/64).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=128))]
    pub prefix: Option<u8>,
    /// The stack's own unicast MAC instead of the interface's (aa:bb:cc:dd:ee:ff): the kernel
    /// then drops the stack's frames as another host's instead of routing each (fewer CPU
    /// cycles per packet); the interface passes it while the tool runs (PACKET_MR_UNICAST).
    #[arg(long, value_parser = unicast_mac, value_name = "MAC")]
    pub mac: Option<[u8; 6]>,
    /// Write every frame to this pcap file.
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// Print every frame, and every counter at exit.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Quiet: no progress or status lines (results and errors stay).
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

impl SaPortArgs {
    fn options(&self, local: Option<IpAddr>, no_sa: bool) -> PortOptions {
        crate::plumbing::out::set_quiet(self.quiet);
        PortOptions {
            iface: self.iface.clone().unwrap_or_default(),
            ibsim: self.ibsim.clone(),
            local: local.unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)),
            prefix: self.prefix,
            mac: self.mac,
            sa: if no_sa { None } else { self.sa },
            pcap: self.pcap.clone(),
            verbose: self.verbose,
            paths: if no_sa { roce_cm::MulticastPaths::IGMP_MLD_ONLY } else { roce_cm::MulticastPaths::BOTH },
        }
    }
}

impl RawPortArgs {
    fn options(&self, local: IpAddr) -> PortOptions {
        crate::plumbing::out::set_quiet(self.quiet);
        PortOptions {
            iface: self.iface.clone(),
            ibsim: None,
            local,
            prefix: self.prefix,
            mac: self.mac,
            sa: None,
            pcap: self.pcap.clone(),
            verbose: self.verbose,
            paths: roce_cm::MulticastPaths::IGMP_MLD_ONLY,
        }
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

/// `roce mckey`.
#[derive(clap::Args, Debug, Clone)]
pub struct MckeyArgs {
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
    #[arg(short = 'C', long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=MAX_MCKEY_COUNT as i64))]
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

impl MckeyArgs {
    /// Run it; returns the exit status.
    pub fn run(self) -> u8 {
        if self.port.ibsim.is_none() && !self.no_sa && self.port.sa.is_none() {
            eprintln!("roce mckey: give --sa ADDR (the SA's address), or --no-sa for IGMP/MLD only");
            return exit::USAGE;
        }
        let join_state = match (self.sendonly, self.join_state) {
            (true, _) | (_, JoinArg::Sendonly) => JoinState::SEND_ONLY_FULL_MEMBER,
            (false, JoinArg::Full) => JoinState::FULL_MEMBER,
        };
        crate::plumbing::shutdown::install();
        let o = crate::plumbing::tools::MckeyOptions {
            port: self.port.options(self.bind, self.no_sa),
            group: self.group,
            sender: self.sender,
            count: self.count,
            size: self.size as usize,
            join_state,
            leave_after: self.leave_after,
            no_sa: self.no_sa,
        };
        crate::plumbing::tools::mckey(&o)
    }
}

/// `roce sa-query`.
#[derive(clap::Args, Debug, Clone)]
pub struct SaQueryArgs {
    /// The stack's own address on the interface; required with --iface.
    #[arg(
        short = 'b',
        long = "bind",
        value_name = "ADDR",
        required_unless_present = "ibsim",
        conflicts_with = "ibsim"
    )]
    pub bind: Option<IpAddr>,
    /// Get this group's record (else GetTable of all).
    #[arg(long)]
    pub mgid: Option<Ipv6Addr>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub service: crate::sa_service::ServiceArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub port: SaPortArgs,
}

impl SaQueryArgs {
    /// Run it; returns the exit status.
    pub fn run(self) -> u8 {
        crate::plumbing::shutdown::install();
        if self.service.wanted() {
            return crate::sa_service::run(&self.port.options(self.bind, false), &self.service);
        }
        crate::plumbing::tools::sa_query(&self.port.options(self.bind, false), self.mgid.map(roce_wire::Gid::from_ipv6))
    }
}

/// `roce sa-server`.
#[derive(clap::Args, Debug, Clone)]
pub struct SaServerArgs {
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

impl SaServerArgs {
    /// Run it; returns the exit status.
    pub fn run(self) -> u8 {
        crate::plumbing::shutdown::install();
        crate::plumbing::tools::sa_server(&self.port.options(self.ip), self.duration)
    }
}

/// `roce sa-agent`.
#[derive(clap::Args, Debug, Clone)]
pub struct SaAgentArgs {
    /// The umad device (name under /dev/infiniband, or a path).
    #[arg(long, default_value = "umad0")]
    pub device: String,
    /// Stop after this many seconds (0 to 31536000; default: until SIGINT/SIGTERM/SIGHUP).
    #[arg(long, value_parser = duration_secs, value_name = "SECS", allow_negative_numbers = true)]
    pub duration: Option<Duration>,
    /// Quiet: no status lines (the per-MAD lines and errors stay).
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

impl SaAgentArgs {
    /// Run it; returns the exit status.
    pub fn run(self) -> u8 {
        crate::plumbing::out::set_quiet(self.quiet);
        crate::plumbing::shutdown::install();
        match crate::sa_agent::run(&self.device, self.duration, roce_sa::SaConfig::default()) {
            Ok(()) => crate::plumbing::shutdown::requested().unwrap_or(exit::OK),
            Err(e) => {
                eprintln!("roce sa-agent: {e}");
                exit::ENVIRONMENT
            }
        }
    }
}

/// `roce udaddy`.
#[derive(clap::Args, Debug, Clone)]
pub struct UdaddyArgs {
    /// The server's address (client mode); without it, run the server.
    #[arg(short = 's', long = "server", value_name = "ADDR")]
    pub server: Option<IpAddr>,
    /// The stack's own address on the interface (beside the kernel's).
    #[arg(short = 'b', long = "bind", value_name = "ADDR")]
    pub bind: IpAddr,
    /// Datagrams each way (at most 10000).
    #[arg(short = 'C', long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=MAX_UDADDY_COUNT as i64))]
    pub count: u32,
    /// Datagram size in bytes (at most the path MTU less the immediate data's 4 bytes of
    /// header room, e.g. 1024 on a 1500-byte link).
    #[arg(short = 'S', long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(0..=MAX_SIZE as i64))]
    pub size: u32,
    /// The RDMA-CM port (UDP port space).
    #[arg(short = 'p', long = "port", default_value_t = 7174)]
    pub cm_port: u16,
    /// Seconds to wait for each step: resolution, the request, the datagrams (0 to 86400).
    #[arg(long, default_value = "20", value_parser = wait_secs, value_name = "SECS", allow_negative_numbers = true)]
    pub timeout: Duration,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub port: RawPortArgs,
}

impl UdaddyArgs {
    /// Run it; returns the exit status.
    pub fn run(self) -> u8 {
        crate::plumbing::shutdown::install();
        let o = crate::cm_tools::UdaddyOptions {
            port: self.port.options(self.bind),
            server: self.server,
            cm_port: self.cm_port,
            count: self.count,
            size: self.size as usize,
            timeout: self.timeout,
        };
        crate::cm_tools::udaddy(&o)
    }
}

/// `roce cmatose`.
#[derive(clap::Args, Debug, Clone)]
pub struct CmatoseArgs {
    /// The server's address (client mode); without it, run the server.
    #[arg(short = 's', long = "server", value_name = "ADDR")]
    pub server: Option<IpAddr>,
    /// The stack's own address on the interface (beside the kernel's).
    #[arg(short = 'b', long = "bind", value_name = "ADDR")]
    pub bind: IpAddr,
    /// The RDMA-CM port (TCP port space).
    #[arg(short = 'p', long = "port", default_value_t = 7471)]
    pub cm_port: u16,
    /// Messages each way over the RC QP (ucmatose's default, 10; 0: the handshake only; at most
    /// 10000).
    #[arg(short = 'C', long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=MAX_UDADDY_COUNT as i64))]
    pub count: u32,
    /// Message size in bytes (at most 1 MiB).
    #[arg(short = 'S', long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(0..=MAX_SIZE as i64))]
    pub size: u32,
    /// Seconds to wait for each step (0 to 86400).
    #[arg(long, default_value = "20", value_parser = wait_secs, value_name = "SECS", allow_negative_numbers = true)]
    pub timeout: Duration,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub port: RawPortArgs,
}

impl CmatoseArgs {
    /// Run it; returns the exit status.
    pub fn run(self) -> u8 {
        crate::plumbing::shutdown::install();
        let o = crate::cm_tools::CmatoseOptions {
            port: self.port.options(self.bind),
            server: self.server,
            cm_port: self.cm_port,
            timeout: self.timeout,
            count: self.count,
            size: self.size as usize,
        };
        crate::cm_tools::cmatose(&o)
    }
}

/// `roce demo`.
#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    /// Write every frame to this pcap file.
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// Use IPv6 (fd00::/8 hosts, group ff0e::1:2:3 with MLDv2).
    #[arg(long)]
    pub ipv6: bool,
    /// Frame loss probability on A's and B's links, 0 to 1 (the SA's link stays clean).
    #[arg(long, default_value = "0", value_parser = probability, allow_negative_numbers = true)]
    pub loss: f64,
    /// Datagrams A sends to the group (at most 1024: B's receive queue depth).
    #[arg(short = 'C', long, default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(0..=i64::from(crate::demo::MAX_COUNT)))]
    pub count: u32,
    /// Seed of the simulated link.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Quiet: only the verdict and the failed steps.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

impl DemoArgs {
    /// Run it; returns the exit status.
    pub fn run(self) -> u8 {
        crate::plumbing::out::set_quiet(self.quiet);
        let opts = crate::demo::DemoOptions {
            ipv6: self.ipv6,
            loss: self.loss,
            count: self.count,
            pcap: self.pcap,
            seed: self.seed,
        };
        crate::status!(
            "demo: limits: -C at most {} (B's receive queue), loss {} on A's and B's links (the SA's link is clean), \
             30 s of simulated time per step",
            crate::demo::MAX_COUNT,
            self.loss
        );
        let report = crate::demo::run(&opts);
        for l in &report.lines {
            crate::status!("{l}");
        }
        let verdict = if report.ok() { "PASS" } else { "FAIL" };
        crate::out!(
            "verdict: {verdict}: {} steps verified, {} failed; {} frames; {} of {} datagrams received",
            report.passed.len(),
            report.failed.len(),
            report.frames,
            report.received,
            report.sent
        );
        for f in &report.failed {
            crate::out!("failed: {f}");
        }
        if crate::plumbing::out::stdout_closed() {
            exit::CLOSED_PIPE
        } else if report.ok() {
            exit::OK
        } else {
            exit::FAILED
        }
    }
}

#[cfg(test)]
mod mac_tests {
    use super::unicast_mac;

    #[test]
    fn mac_values() {
        assert_eq!(unicast_mac("02:00:00:00:aa:1"), Ok([2, 0, 0, 0, 0xaa, 1]));
        for bad in
            ["", "02:00:00:00:aa", "02:00:00:00:aa:01:02", "02:00:00:00:aa:1g", "02::00:00:aa:01", "+2:0:0:0:0:1"]
        {
            assert!(unicast_mac(bad).unwrap_err().contains("is not a MAC address"), "{bad}");
        }
        for bad in ["01:00:5e:00:00:01", "ff:ff:ff:ff:ff:ff", "0:0:0:0:0:0"] {
            assert!(unicast_mac(bad).unwrap_err().contains("not a unicast"), "{bad}");
        }
    }
}
