//! `roce perftest TEST [OPTIONS] [SERVER]`: perftest's ib_send_bw, ib_write_bw, ib_read_bw,
//! ib_atomic_bw and the four *_lat over this stack's QPs, speaking perftest 4.5-0.17 (version
//! "6.06", Debian 12) on the wire in both roles: a server without SERVER, a client with it.
//!
//! The exchange (spec/perftest.md): a TCP connection on port 18515 (`-p`) carries the
//! versions, the system data, the MTU and the 108-byte key messages, each test's sync points,
//! the bandwidth report and the closing "done" ([`oob`]); the test QPs are RC, UC or UD QPs
//! of the engine moved to RTR/RTS by hand with the peer's QPN, PSN and GID from its key
//! message ([`run`]); the output is perftest's own ([`report`]).

mod cm;
pub mod oob;
pub mod report;
mod run;

use std::net::IpAddr;
use std::process::ExitCode;
use std::time::Duration;

use crate::plumbing::exit;
use crate::plumbing::port::open_port_or_exit;

/// perftest's test names.
pub const TESTS: [&str; 8] =
    ["send_bw", "write_bw", "read_bw", "atomic_bw", "send_lat", "write_lat", "read_lat", "atomic_lat"];

/// Connection types (`-c`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conn {
    /// Reliable connected.
    #[value(name = "RC")]
    Rc,
    /// Unreliable connected (send_bw, write_bw, send_lat, write_lat).
    #[value(name = "UC")]
    Uc,
    /// Unreliable datagram (send_bw, send_lat).
    #[value(name = "UD")]
    Ud,
}

impl Conn {
    /// perftest's `connStr`.
    pub fn name(self) -> &'static str {
        match self {
            Conn::Rc => "RC",
            Conn::Uc => "UC",
            Conn::Ud => "UD",
        }
    }
}

/// Atomic operations (`-A`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicType {
    /// Compare and swap (compare 0, swap 0).
    #[value(name = "CMP_AND_SWAP")]
    CmpAndSwap,
    /// Fetch and add 1.
    #[value(name = "FETCH_AND_ADD")]
    FetchAndAdd,
}

fn parse_test(s: &str) -> Result<String, String> {
    if TESTS.contains(&s) {
        Ok(s.to_string())
    } else {
        Err(format!("one of {}", TESTS.join(" ")))
    }
}

/// `-s`: bytes, with perftest's K and M suffixes (1 to 2^31 - 1).
fn parse_size(s: &str) -> Result<u64, String> {
    let (num, factor) = match s.strip_suffix('K') {
        Some(n) => (n, 1024),
        None => match s.strip_suffix('M') {
            Some(n) => (n, 1024 * 1024),
            None => (s, 1),
        },
    };
    let n = if let Some(h) = num.strip_prefix("0x") {
        u64::from_str_radix(h, 16).map_err(|e| format!("{e}"))?
    } else {
        num.parse::<u64>().map_err(|e| format!("{e}"))?
    };
    let v = n.checked_mul(factor).ok_or("too large")?;
    if (1..=u64::from(u32::MAX / 2)).contains(&v) {
        Ok(v)
    } else {
        Err(format!("Message Size should be between 1 and {}", u32::MAX / 2))
    }
}

fn parse_mtu(s: &str) -> Result<u32, String> {
    let m: u32 = s.parse().map_err(|e| format!("{e}"))?;
    if matches!(m, 256 | 512 | 1024 | 2048 | 4096) {
        Ok(m)
    } else {
        Err("256, 512, 1024, 2048 or 4096".into())
    }
}

fn parse_timeout(s: &str) -> Result<f64, String> {
    let t: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if t.is_finite() && (0.1..=3600.0).contains(&t) {
        Ok(t)
    } else {
        Err("seconds from 0.1 to 3600".into())
    }
}

fn in_range(lo: u64, hi: u64) -> impl Fn(&str) -> Result<u64, String> + Clone {
    move |s: &str| {
        let v: u64 = s.parse().map_err(|e| format!("{e}"))?;
        if (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(format!("from {lo} to {hi}"))
        }
    }
}

/// perftest's bandwidth and latency tests (4.5-0.17, version "6.06") over this stack's QPs:
/// a server without SERVER, a client with it, against the kernel's perftest or another
/// `roce perftest`.
///
/// Example: roce perftest write_bw --iface tap0 -I 198.18.0.1 -n 100 198.18.0.2
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// The test: send_bw write_bw read_bw atomic_bw send_lat write_lat read_lat atomic_lat.
    #[arg(value_name = "TEST", value_parser = parse_test)]
    pub test: String,
    /// The server's address (client side); none: be the server.
    #[arg(value_name = "SERVER")]
    pub server: Option<IpAddr>,
    /// The stack's own address on --iface (its GID is this address).
    #[arg(short = 'I', value_name = "ADDR")]
    pub source: IpAddr,
    /// Message size (default 65536 for bandwidth, 2 for latency, 8 for atomics; K and M suffixes).
    #[arg(short = 's', long = "size", value_parser = parse_size)]
    pub size: Option<u64>,
    /// Iterations (default 1000; write_bw 5000).
    #[arg(short = 'n', long = "iters", value_parser = in_range(5, 100_000_000))]
    pub iters: Option<u64>,
    /// Run for this many seconds instead of -n.
    #[arg(short = 'D', long = "duration", value_parser = in_range(1, 86_400))]
    pub duration: Option<u64>,
    /// Run every size from 2 to 2^23 (write_bw, send_bw, read_bw and the latency tests).
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// Send queue depth (default 128 for bandwidth, 1 for latency).
    #[arg(short = 't', long = "tx-depth", value_parser = in_range(1, 15_000))]
    pub tx_depth: Option<u64>,
    /// Receive queue depth for SEND tests (default 512).
    #[arg(short = 'r', long = "rx-depth", value_parser = in_range(1, 16_384))]
    pub rx_depth: Option<u64>,
    /// Completion moderation: every Nth work request signalled (default 100; 1 over 8 KiB).
    #[arg(short = 'Q', long = "cq-mod", value_parser = in_range(1, 1024))]
    pub cq_mod: Option<u64>,
    /// QPs (bandwidth tests).
    #[arg(short = 'q', long = "qp", default_value_t = 1, value_parser = in_range(1, 1024))]
    pub qps: u64,
    /// Connection type.
    #[arg(short = 'c', long = "connection", value_enum, default_value = "RC")]
    pub conn: Conn,
    /// MTU (default the port's active MTU; the smaller of the two sides' is used).
    #[arg(short = 'm', long = "mtu", value_parser = parse_mtu)]
    pub mtu: Option<u32>,
    /// Atomic operation.
    #[arg(short = 'A', long = "atomic_type", value_enum, default_value = "FETCH_AND_ADD")]
    pub atomic_type: AtomicType,
    /// Accepted for perftest's CPU frequency warning (nothing to do here).
    #[arg(short = 'F')]
    pub ignore_cpu_freq: bool,
    /// The TCP port of the exchange.
    #[arg(short = 'p', long = "port", default_value_t = 18515)]
    pub port: u16,
    /// rdma_cm mode: the exchanges over a CM-connected control QP, the test QP through the CM.
    #[arg(short = 'R', long = "rdma_cm")]
    pub rdma_cm: bool,
    /// Report Gb/sec (10^9 bits) instead of MB/sec (2^20 bytes).
    #[arg(long = "report_gbits")]
    pub report_gbits: bool,
    /// The device name (accepted, shown in the banner; the stack runs on --iface).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    pub device: Option<String>,
    /// The GID index (accepted; the stack's GID is its address).
    #[arg(short = 'x', long = "gid-index")]
    pub gid_index: Option<u8>,
    /// Local ACK timeout exponent of RC QPs (4.096 us * 2^N).
    #[arg(short = 'u', long = "qp-timeout", default_value_t = 14, value_parser = clap::value_parser!(u8).range(0..32))]
    pub qp_timeout: u8,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub net: crate::plumbing::options::IfacePortArgs,
    /// Seconds to wait for the peer at each step (its messages, a completion) before failing.
    #[arg(long, default_value_t = 30.0, value_parser = parse_timeout)]
    pub timeout: f64,
    /// Seconds the server waits for the client to connect.
    #[arg(long, default_value_t = 600.0, value_parser = parse_timeout)]
    pub accept_timeout: f64,
    /// Print every frame, and the engine's counters at exit.
    #[arg(long)]
    pub debug: bool,
    /// Congestion control of the test QPs: off (as rxe) or dcqcn (ECN-capable data, CNPs,
    /// rate cuts; spec/congestion.md).
    #[arg(long, value_enum, default_value_t = crate::plumbing::options::CcArg::Off)]
    pub cc: crate::plumbing::options::CcArg,
}

/// `roce perftest`. Exit status: 0 the test ran; 1 it failed (the peer refused, vanished,
/// or a completion failed); 2 usage; 3 the interface cannot be used.
pub fn run(args: Args) -> ExitCode {
    let a = args;
    crate::plumbing::shutdown::install();
    let params = match run::Params::from_args(&a) {
        Ok(p) => p,
        Err(e) => {
            eprintln!(" {e}");
            return ExitCode::from(exit::USAGE);
        }
    };
    if let Some(s) = a.server {
        if s.is_ipv4() != a.source.is_ipv4() {
            eprintln!("roce perftest: SERVER and -I must be of one address family");
            return ExitCode::from(exit::USAGE);
        }
    }
    let mut po = a.net.options(a.source, a.debug);
    po.gso = true;
    po.congestion = a.cc.congestion();
    let mut d = match open_port_or_exit("roce perftest", &po) {
        Ok(d) => d,
        Err(code) => return ExitCode::from(code),
    };
    crate::plumbing::port::set_port_mtu_from(&mut d, &a.net.iface);
    d.set_busy_poll(crate::plumbing::port::DATA_PATH_BUSY_POLL);
    // perftest prints no CM events: the shared CM steps' progress lines stay quiet.
    crate::plumbing::out::set_quiet(!a.debug);
    let mut res = run::Resources::default();
    let r = run::perftest(&mut d, &params, &mut res);
    if r.is_ok() && !res.qps.is_empty() && crate::plumbing::shutdown::requested().is_none() {
        run::linger(&mut d);
    }
    // Every QP and MR of the test destroyed on every path, a stop's included.
    res.destroy(&mut d);
    let code = match r {
        Ok(()) => exit::OK,
        Err(e) => {
            if crate::plumbing::shutdown::requested().is_none() {
                eprintln!("{e}");
            }
            exit::FAILED
        }
    };
    let _ = d.run_for(Duration::from_millis(20));
    let ids: Vec<roce_cm::CmId> = d.stack.ids().collect();
    // perftest's output ends with its last dashed line: the stack's counters only with --debug.
    let code = if a.debug {
        let code = crate::plumbing::port::finish("perftest", &mut d, &ids, true, code);
        crate::plumbing::out::line(format_args!("{:?}", d.stack.rc().counters()));
        code
    } else {
        crate::plumbing::port::destroy_ids("perftest", &mut d, &ids);
        // Off stdout, which ends with perftest's own table.
        crate::plumbing::port::release_faults(&mut d);
        if let Some(text) = crate::plumbing::port::fault_text(&d) {
            eprintln!("{text}");
        }
        // With congestion control on, what it did (its counters, spec/congestion.md).
        if let Some(text) = crate::plumbing::port::cc_text(&d) {
            eprintln!("{text}");
        }
        // A failed test says what the QPs went through (retries, timeouts, NAKs) so a
        // failure on a real link can be read without a rerun under --debug.
        if code != exit::OK {
            eprintln!("  rc counters: {:?}", d.stack.rc().counters());
        }
        crate::plumbing::shutdown::requested().unwrap_or(code)
    };
    ExitCode::from(code)
}
