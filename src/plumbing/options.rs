//! The options several commands share, as clap takes them: where a stack runs
//! ([`SaPortArgs`] for `mckey` and `sa-query`, [`RawPortArgs`] for `udaddy`, `cmatose` and
//! `sa-server`, both with [`StackArgs`]; [`ClientServerArgs`] for `udaddy` and `cmatose`), and the values they check
//! before anything is sent: seconds (finite, non-negative, bounded), MAC addresses, and the
//! bounds of counts and sizes, each named in its message. Uses [`super::port`] (what the
//! options open) and [`super::out`] (`-q`).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use roce_net::{FaultConfig, FaultFrames};

use crate::plumbing::port::{PortOptions, Transport};

/// The longest wait a `--leave-after` or `--timeout` takes: one day.
pub const MAX_WAIT_SECS: f64 = 86_400.0;
/// The longest `--duration` of a server: 365 days.
pub const MAX_DURATION_SECS: f64 = 365.0 * 86_400.0;
/// The most datagrams `udaddy` (all queued at once, as udaddy does) or messages `cmatose`
/// exchanges each way.
pub const MAX_EXCHANGE_COUNT: u32 = 10_000;
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

/// A probability: a number from 0 to 1 (`--loss`, and each rate of `--fault`).
pub fn probability(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("'{s}' is not a number"))?;
    if !v.is_finite() || !(0.0..=1.0).contains(&v) {
        return Err(format!("must be a probability from 0 to 1, not {s}"));
    }
    Ok(v)
}

/// `--cc`: the congestion control of the RC tools' connected QPs (spec/congestion.md).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CcArg {
    /// None, as rxe: packets go out not ECN-capable, CE marks and CNPs are only counted.
    #[default]
    Off,
    /// DCQCN with a ConnectX NIC's defaults: data ECT(0), CNPs for CE marks, rate cuts on
    /// CNPs.
    Dcqcn,
}

impl CcArg {
    /// The engine's setting.
    pub fn congestion(self) -> roce_cm::rc::Congestion {
        match self {
            CcArg::Off => roce_cm::rc::Congestion::Off,
            CcArg::Dcqcn => roce_cm::rc::Congestion::dcqcn(),
        }
    }
}

/// The most receive polls a reordered frame is held (`--fault hold=N`).
pub const MAX_FAULT_HOLD: u32 = 1_000;

/// A `--fault` value: roce-net's [`FaultConfig`] for our own frames, its seed and the
/// directions it applies to.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultSpec {
    /// Drop, reorder (hold back) and duplicate rates.
    pub config: FaultConfig,
    /// The seed of every random decision (the same seed, the same faults for the same frames).
    pub seed: u64,
    /// Apply to the frames we send.
    pub tx: bool,
    /// Apply to the frames we receive.
    pub rx: bool,
}

/// The keys `--fault` takes, in its messages.
const FAULT_KEYS: &str = "drop, reorder, dup, ce, hold, seed, dir, only";

/// A `--fault` value: comma-separated `KEY=VALUE`s: `drop=P`, `reorder=P`, `dup=P`, `ce=P`
/// (an ECN-capable frame marked congestion experienced, as a congested switch does; each a
/// [`probability`]), `hold=N` (receive polls a reordered frame is held back, 1 to
/// [`MAX_FAULT_HOLD`], default 3), `seed=N` (default 1), `dir=tx|rx|both` (default tx),
/// `only=requests|responses|all` (which RoCEv2 frames the faults hit, by BTH opcode: default all
/// frames).
pub fn fault_spec(s: &str) -> Result<FaultSpec, String> {
    let mut spec =
        FaultSpec { config: FaultConfig { delay_polls: 3, ..FaultConfig::default() }, seed: 1, tx: true, rx: false };
    for part in s.split(',') {
        let Some((key, value)) = part.split_once('=') else {
            return Err(format!("'{part}' is not KEY=VALUE (keys: {FAULT_KEYS})"));
        };
        let rate = || probability(value).map_err(|e| format!("{key}: {e}"));
        match key.trim() {
            "drop" => spec.config.drop = rate()?,
            "reorder" => spec.config.delay = rate()?,
            "dup" => spec.config.duplicate = rate()?,
            "ce" => spec.config.mark_ce = rate()?,
            "hold" => {
                spec.config.delay_polls =
                    value.trim().parse().ok().filter(|n| (1..=MAX_FAULT_HOLD).contains(n)).ok_or_else(|| {
                        format!("hold must be a number of polls from 1 to {MAX_FAULT_HOLD}, not {value}")
                    })?
            }
            "seed" => {
                spec.seed =
                    value.trim().parse().map_err(|_| format!("seed must be a 64-bit unsigned number, not {value}"))?
            }
            "dir" => {
                (spec.tx, spec.rx) = match value.trim() {
                    "tx" => (true, false),
                    "rx" => (false, true),
                    "both" => (true, true),
                    _ => return Err(format!("dir must be tx, rx or both, not {value}")),
                }
            }
            "only" => {
                spec.config.frames = match value.trim() {
                    "all" => FaultFrames::All,
                    "requests" => FaultFrames::Requests,
                    "responses" => FaultFrames::Responses,
                    _ => return Err(format!("only must be requests, responses or all, not {value}")),
                }
            }
            other => return Err(format!("unknown key '{other}' (keys: {FAULT_KEYS})")),
        }
    }
    Ok(spec)
}

/// A MAC address: six hex bytes (one or two digits each) separated by colons.
pub fn mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    let bytes: Vec<u8> = parts
        .iter()
        .filter(|p| (1..=2).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_hexdigit()))
        .filter_map(|p| u8::from_str_radix(p, 16).ok())
        .collect();
    match (parts.len(), bytes.try_into()) {
        (6, Ok(m)) => Ok(m),
        _ => Err(format!("'{s}' is not a MAC address: six hex bytes separated by colons (aa:bb:cc:dd:ee:ff)")),
    }
}

/// A `--mac` value: a [`mac`] that is unicast (bit 0 of the first byte clear) and not all zero.
pub fn unicast_mac(s: &str) -> Result<[u8; 6], String> {
    let mac = mac(s)?;
    if mac[0] & 1 != 0 || mac == [0; 6] {
        return Err(format!("{s} is not a unicast MAC address (bit 0 of the first byte set, or all zero)"));
    }
    Ok(mac)
}

/// Where `mckey` and `sa-query` run: a raw socket on an interface, or OpenSM's SA through ibsim.
#[derive(clap::Args, Debug, Clone)]
pub struct SaPortArgs {
    /// The interface to run on (see --transport).
    #[arg(long, required_unless_present = "ibsim", value_name = "IFACE")]
    pub iface: Option<String>,
    /// Talk to OpenSM's SA through ibsim instead (attach to the simulated HCA NODE, default:
    /// the sim's default port); the SA MADs are the same, without the RoCE framing.
    #[arg(long, num_args = 0..=1, default_missing_value = "", value_name = "NODE",
          conflicts_with_all = ["iface", "sa", "prefix", "pcap", "mac", "transport", "fault"])]
    pub ibsim: Option<String>,
    /// The SA's address (its QP1 answers SA MADs).
    #[arg(long, value_name = "ADDR")]
    pub sa: Option<IpAddr>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub stack: StackArgs,
}

/// The two addresses of `udaddy` and `cmatose`: the server to connect to, or none to be the
/// server, and the stack's own.
#[derive(clap::Args, Debug, Clone)]
pub struct ClientServerArgs {
    /// The server's address (client mode); without it, run the server.
    #[arg(short = 's', long = "server", value_name = "ADDR")]
    pub server: Option<IpAddr>,
    /// The stack's own address on the interface (beside the kernel's).
    #[arg(short = 'b', long = "bind", value_name = "ADDR")]
    pub bind: IpAddr,
}

/// Where `udaddy`, `cmatose` and `sa-server` run: a raw socket on an interface.
#[derive(clap::Args, Debug, Clone)]
pub struct RawPortArgs {
    /// The interface to run on (see --transport).
    #[arg(long, value_name = "IFACE")]
    pub iface: String,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub stack: StackArgs,
}

/// Where `rping` and `perftest` run (their `-q` and `-v` are their own): an interface and the
/// link options (how frames travel, the prefix, our MAC, a capture).
#[derive(clap::Args, Debug, Clone)]
pub struct IfacePortArgs {
    /// The interface to run on (a raw AF_PACKET socket, or see --transport).
    #[arg(long)]
    pub iface: String,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub link: LinkArgs,
}

impl IfacePortArgs {
    /// The port at `local`, every frame printed with `verbose`; no SA, IGMP/MLD only.
    pub fn options(&self, local: IpAddr, verbose: bool) -> PortOptions {
        self.link.options(self.iface.clone(), None, local, None, roce_cm::MulticastPaths::IGMP_MLD_ONLY, verbose)
    }
}

/// How the stack runs on its interface, in both [`SaPortArgs`] and [`RawPortArgs`]: the link
/// options, `-v` and `-q`.
#[derive(clap::Args, Debug, Clone)]
pub struct StackArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub link: LinkArgs,
    /// Print every frame, and every counter at exit.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Quiet: no progress or status lines (results and errors stay).
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// How the stack's frames meet its interface: the transport, its prefix, its own MAC and a
/// capture (in [`StackArgs`], and alone in a tool whose `-v`/`-q` mean something else).
#[derive(clap::Args, Debug, Clone)]
pub struct LinkArgs {
    /// How frames travel: raw (an AF_PACKET socket: any address or MAC, needs CAP_NET_RAW)
    /// or udp (a kernel UDP socket on port 4791: no privilege; the kernel's own address, its
    /// ARP/ND and IGMP/MLD). Default: raw when the process has CAP_NET_RAW, else udp.
    #[arg(long, value_enum, value_name = "raw|udp")]
    pub transport: Option<Transport>,
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
    /// Faults on our own frames, from a seed: drop=P,reorder=P,dup=P (probabilities),
    /// ce=P (an ECN-capable frame marked congestion experienced, as a congested switch does:
    /// with `--cc dcqcn`, dir=rx on the receiver makes it send CNPs), hold=N (receive polls a
    /// reordered frame is held, default 3), seed=N (default 1), dir=tx|rx|both (default tx).
    /// Counted at exit (`fault sent: dropped N, reordered N, duplicated N[, CE marked N]`); a
    /// dropped frame is never counted as sent, and --pcap holds what passed.
    /// Repeatable, for other faults each way (`--fault drop=0.03,dir=rx --fault reorder=0.02,dir=tx`):
    /// a later one replaces an earlier one's faults for its direction; the seed is the first's.
    #[arg(long, value_parser = fault_spec, value_name = "SPEC", action = clap::ArgAction::Append)]
    pub fault: Vec<FaultSpec>,
}

impl LinkArgs {
    /// The port: these options on `iface` (or ibsim) at `local`, with the SA `sa`, the
    /// multicast `paths`, and every frame printed with `verbose`.
    pub fn options(
        &self,
        iface: String,
        ibsim: Option<String>,
        local: IpAddr,
        sa: Option<IpAddr>,
        paths: roce_cm::MulticastPaths,
        verbose: bool,
    ) -> PortOptions {
        PortOptions {
            iface,
            ibsim,
            local,
            prefix: self.prefix,
            mac: self.mac,
            sa,
            pcap: self.pcap.clone(),
            verbose,
            paths,
            transport: self.transport,
            fault: self.fault.clone(),
            rx_queues: 1,
            gso: false,
            congestion: roce_cm::rc::Congestion::Off,
            rxe_flush_icrc: false,
        }
    }
}

impl SaPortArgs {
    /// Where the stack runs, from `local` (`-b`), and whether the SA is used at all; sets `-q`.
    pub fn options(&self, local: Option<IpAddr>, no_sa: bool) -> PortOptions {
        crate::plumbing::out::set_quiet(self.stack.quiet);
        self.stack.link.options(
            self.iface.clone().unwrap_or_default(),
            self.ibsim.clone(),
            local.unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)),
            if no_sa { None } else { self.sa },
            if no_sa { roce_cm::MulticastPaths::IGMP_MLD_ONLY } else { roce_cm::MulticastPaths::BOTH },
            self.stack.verbose,
        )
    }
}

impl RawPortArgs {
    /// Where the stack runs, at `local`; sets `-q`.
    pub fn options(&self, local: IpAddr) -> PortOptions {
        crate::plumbing::out::set_quiet(self.stack.quiet);
        let paths = roce_cm::MulticastPaths::IGMP_MLD_ONLY;
        self.stack.link.options(self.iface.clone(), None, local, None, paths, self.stack.verbose)
    }
}

#[cfg(test)]
mod fault_tests {
    use super::*;

    #[test]
    fn fault_values() {
        let f = fault_spec("drop=0.02,reorder=0.01,dup=0.005,seed=7").unwrap();
        assert_eq!((f.config.drop, f.config.delay, f.config.duplicate), (0.02, 0.01, 0.005));
        assert_eq!((f.config.delay_polls, f.seed, f.tx, f.rx), (3, 7, true, false));
        let f = fault_spec("hold=5,dir=both").unwrap();
        assert_eq!((f.config.delay_polls, f.config.drop, f.tx, f.rx), (5, 0.0, true, true));
        assert_eq!((fault_spec("dir=rx").unwrap().tx, fault_spec("drop=1").unwrap().config.drop), (false, 1.0));
        assert_eq!(fault_spec("drop=1").unwrap().config.frames, FaultFrames::All);
        assert_eq!(fault_spec("drop=1,only=requests").unwrap().config.frames, FaultFrames::Requests);
        assert_eq!(fault_spec("only=responses").unwrap().config.frames, FaultFrames::Responses);
        for (bad, want) in [
            ("only=acks", "only must be requests, responses or all, not acks"),
            ("drop=1.5", "drop: must be a probability from 0 to 1, not 1.5"),
            ("drop=nan", "not nan"),
            ("reorder=-0.1", "not -0.1"),
            ("dup=x", "'x' is not a number"),
            ("loss=0.1", "unknown key 'loss'"),
            ("drop", "is not KEY=VALUE"),
            ("", "is not KEY=VALUE"),
            ("hold=0", "from 1 to 1000, not 0"),
            ("seed=-1", "64-bit unsigned"),
            ("dir=up", "tx, rx or both"),
        ] {
            assert!(fault_spec(bad).unwrap_err().contains(want), "{bad}: {:?}", fault_spec(bad));
        }
    }
}

#[cfg(test)]
mod mac_tests {
    use super::{mac, unicast_mac};

    #[test]
    fn mac_values() {
        assert_eq!(unicast_mac("02:00:00:00:aa:1"), Ok([2, 0, 0, 0, 0xaa, 1]));
        // `roce send --src-mac` takes any MAC, multicast too.
        assert_eq!(mac("01:00:5e:00:00:fb"), Ok([1, 0, 0x5e, 0, 0, 0xfb]));
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
