//! `roce bench decode`: `roce decode` against tshark on the same mixed RoCEv2 capture, wall
//! time including process start, as ratios measured in one run (best of `--runs` each).
//! `roce bench analyze`: `roce analyze` against `tshark -q -z conv,udp -z io,stat,1` on one
//! generated capture of RC flows, and `roce analyze`'s peak memory (max RSS) on that capture
//! and on one `--scale` times larger, streamed through standard input.
//! `roce bench congestion`: RC flows between real engines through one simulated switch port
//! that marks ECN as DCQCN's switches do, in virtual time (roce-net's `fabric`; the machines
//! have no ECN-marking qdisc): goodput, fairness, drops, marks, CNPs and queue depths, with
//! `--cc dcqcn` and `--cc off` to compare (spec/congestion.md).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use crate::plumbing::exit;
use crate::plumbing::options::{probability, CcArg};

/// Benchmarks as ratios measured in one run (`roce bench decode`: against tshark).
#[derive(clap::Args, Debug)]
#[command(after_help = exit::TABLE)]
pub struct Args {
    /// What to measure.
    #[command(subcommand)]
    pub what: BenchWhat,
}

/// The benchmarks.
#[derive(clap::Subcommand, Debug)]
pub enum BenchWhat {
    /// `roce decode` and `roce decode --json` against `tshark` and `tshark -T json` on one
    /// generated capture (RC/UC/UD opcodes, SA and CM MADs, IPv4 and IPv6, bad ICRCs).
    ///
    /// Example: roce bench decode --frames 20000 --runs 3
    Decode(DecodeBench),
    /// `roce analyze` against `tshark -q -z conv,udp -z io,stat,1` on one generated capture
    /// of RC flows (sends, retransmissions, ACKs, NAKs); then `roce analyze`'s max RSS on that
    /// capture and on one `--scale` times larger (memory must stay flat).
    ///
    /// Example: roce bench analyze --frames 1000000 --scale 16
    Analyze(AnalyzeBench),
    /// N RC flows of 64 KiB WRITEs, each between two real engines, through one simulated
    /// switch egress port (an N:1 incast) in virtual time: a queue drained at the rate, ECN
    /// CE marked between K_min and K_max with probability rising to P_max, drops past the
    /// buffer (the DCQCN paper's switch by default). Prints per flow goodput and
    /// retransmissions, Jain's fairness, drops, CE marks, CNPs and the queue's depth
    /// percentiles (as arriving packets found it).
    ///
    /// Example: roce bench congestion --flows 2 --rate 2 --cc dcqcn
    Congestion(CongestionBench),
}

/// Options of `roce bench congestion`.
#[derive(clap::Args, Debug)]
pub struct CongestionBench {
    /// RC flows, each a sender and a receiver of its own (1 to 1024).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub flows: u32,
    /// Every link's rate and the switch port's, Gbit/s (above 0, at most 1000).
    #[arg(long, default_value = "2", value_parser = gbit)]
    pub rate: u64,
    /// The engines' congestion control.
    #[arg(long, value_enum, default_value_t = CcArg::Dcqcn)]
    pub cc: CcArg,
    /// DCQCN's parameters: a ConnectX NIC's defaults, or the paper's (spec/congestion.md).
    #[arg(long, value_enum, default_value_t = DcqcnPreset::Nic)]
    pub dcqcn_params: DcqcnPreset,
    /// Virtual seconds the flows run (above 0, at most 3600).
    #[arg(long, default_value = "0.2", value_parser = sim_secs)]
    pub duration: Duration,
    /// Seed of everything random (the engines, the switch's marking, the flows' starts).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// K_min: bytes queued at or below which nothing is marked (the paper: 5 KB).
    #[arg(long, default_value_t = 5_000)]
    pub kmin: u64,
    /// K_max: bytes queued from which every ECN-capable packet is marked (the paper: 200 KB).
    #[arg(long, default_value_t = 200_000)]
    pub kmax: u64,
    /// P_max: the marking probability just below K_max (the paper: 0.01).
    #[arg(long, default_value = "0.01", value_parser = probability)]
    pub pmax: f64,
    /// Bytes the switch port holds; a packet that does not fit is dropped (the paper's
    /// switch: 12 MB).
    #[arg(long, default_value_t = 12_000_000)]
    pub buffer: u64,
    /// Each link's propagation delay, microseconds (0 to 1,000,000).
    #[arg(long, default_value = "1", value_parser = micros)]
    pub delay: Duration,
    /// Print one JSON document instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `--dcqcn-params`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DcqcnPreset {
    /// mlx5 / ConnectX defaults (rpg_time_reset 300 µs, rpg_ai_rate 5 Mbit/s, ...).
    Nic,
    /// The paper's (T = 55 µs, B = 10 MB, F = 5, R_AI = 40 Mbit/s, ...).
    Paper,
}

/// A rate in Gbit/s as bits per second.
fn gbit(s: &str) -> Result<u64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("'{s}' is not a number of Gbit/s"))?;
    if !v.is_finite() || v <= 0.0 || v > 1000.0 {
        return Err(format!("must be above 0 and at most 1000 Gbit/s, not {s}"));
    }
    Ok((v * 1e9).round().max(1.0) as u64)
}

/// Virtual seconds: above 0, at most an hour.
fn sim_secs(s: &str) -> Result<Duration, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !v.is_finite() || v <= 0.0 || v > 3600.0 {
        return Err(format!("must be above 0 and at most 3600 seconds, not {s}"));
    }
    Ok(Duration::from_secs_f64(v))
}

/// Microseconds, 0 to one second.
fn micros(s: &str) -> Result<Duration, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("'{s}' is not a number of microseconds"))?;
    if !v.is_finite() || !(0.0..=1e6).contains(&v) {
        return Err(format!("must be 0 to 1000000 microseconds, not {s}"));
    }
    Ok(Duration::from_secs_f64(v / 1e6))
}

/// Options of `roce bench analyze`.
#[derive(clap::Args, Debug)]
pub struct AnalyzeBench {
    /// Frames in the capture both tools read (100 to 100,000,000).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(100..=100_000_000))]
    pub frames: u64,
    /// The larger capture of the memory check is this many times larger (1 to 64).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub scale: u64,
    /// Runs of each command; the best wall time counts (1 to 20).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=20))]
    pub runs: u64,
    /// Quiet: only the results.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// Options of `roce bench decode`.
#[derive(clap::Args, Debug)]
pub struct DecodeBench {
    /// Frames in the generated capture (100 to 10,000,000).
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(100..=10_000_000))]
    pub frames: u64,
    /// Runs of each command; the best wall time counts (1 to 20).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=20))]
    pub runs: u64,
    /// Keep the capture here (default: a temporary file, removed after).
    #[arg(long)]
    pub keep: Option<PathBuf>,
    /// Quiet: only the results.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

fn best(runs: u64, mut cmd: impl FnMut() -> Command) -> Result<Duration, String> {
    let mut best = Duration::MAX;
    for _ in 0..runs {
        let mut c = cmd();
        c.stdout(Stdio::null()).stderr(Stdio::null());
        let t = Instant::now();
        let st = c.status().map_err(|e| format!("{:?}: {e}", c.get_program()))?;
        let d = t.elapsed();
        if !st.success() {
            return Err(format!("{:?} {:?} exited with {st}", c.get_program(), c.get_args().collect::<Vec<_>>()));
        }
        best = best.min(d);
    }
    Ok(best)
}

/// Run `roce bench`.
pub fn run(args: Args) -> ExitCode {
    match args.what {
        BenchWhat::Decode(a) => decode(&a),
        BenchWhat::Congestion(a) => congestion(&a),
        BenchWhat::Analyze(a) => match analyze(&a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("roce bench: {e}");
                ExitCode::from(exit::ENVIRONMENT)
            }
        },
    }
}

fn analyze(a: &AnalyzeBench) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("roce-bench-analyze-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let r = analyze_in(a, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

fn analyze_in(a: &AnalyzeBench, dir: &Path) -> Result<(), String> {
    let path = dir.join("flows.pcap");
    let file = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    roce_decode::samples_flows::write_flow_capture(std::io::BufWriter::new(file), a.frames)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !a.quiet {
        eprintln!("roce bench: {} frames of RC flows in {}", a.frames, path.display());
    }
    let me = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let roce = || {
        let mut c = Command::new(&me);
        c.args(["analyze", "-q"]).arg(&path);
        c
    };
    let tshark = || {
        let mut c = Command::new("tshark");
        c.args(["-n", "-q", "-z", "conv,udp", "-z", "io,stat,1", "-r"]).arg(&path);
        c
    };
    let r = best(a.runs, roce)?;
    let t = best(a.runs, tshark)?;
    let small = analyze_rss(&me, a.frames)?;
    let large = analyze_rss(&me, a.frames * a.scale)?;
    let fps = |d: Duration| a.frames as f64 / d.as_secs_f64();
    println!("frames              {}", a.frames);
    println!("roce analyze        {:>9.3} s  {:>12.0} frames/s", r.as_secs_f64(), fps(r));
    println!("tshark conv,io,stat {:>9.3} s  {:>12.0} frames/s", t.as_secs_f64(), fps(t));
    println!("ratio               {:>9.1}x (goal 20x)", t.as_secs_f64() / r.as_secs_f64());
    println!("max RSS {:>11} frames {:>8} KiB", a.frames, small);
    println!("max RSS {:>11} frames {:>8} KiB", a.frames * a.scale, large);
    println!(
        "RSS ratio           {:>9.2}x for {}x the frames (goal: flat)",
        large as f64 / small.max(1) as f64,
        a.scale
    );
    Ok(())
}

/// `roce analyze -` fed `frames` generated frames through a pipe; its max RSS in KiB.
fn analyze_rss(me: &Path, frames: u64) -> Result<i64, String> {
    let mut child = Command::new(me)
        .args(["analyze", "-q", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("{}: {e}", me.display()))?;
    let stdin = child.stdin.take().ok_or("no stdin")?;
    let feeder = std::thread::spawn(move || {
        roce_decode::samples_flows::write_flow_capture(std::io::BufWriter::with_capacity(1 << 16, stdin), frames)
            .map(|_| ())
    });
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it for our own child, which std has not reaped.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our child's; status and usage point at live locals.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    let fed = feeder.join().map_err(|_| "feeder panicked".to_string())?;
    if pid < 0 || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(format!("roce analyze - on {frames} frames: status {status}"));
    }
    fed.map_err(|e| format!("feeding roce analyze: {e}"))?;
    Ok(usage.ru_maxrss)
}

fn decode(a: &DecodeBench) -> ExitCode {
    let dir = std::env::temp_dir().join(format!("roce-bench-decode-{}", std::process::id()));
    let path = a.keep.clone().unwrap_or_else(|| dir.join("mixed.pcap"));
    if a.keep.is_none() {
        if let Err(e) = std::fs::create_dir_all(&dir) {
            eprintln!("roce bench: {}: {e}", dir.display());
            return ExitCode::from(exit::ENVIRONMENT);
        }
    }
    let bytes = roce_decode::samples_mixed::mixed_capture(a.frames as usize, 1);
    if let Err(e) = std::fs::write(&path, &bytes) {
        eprintln!("roce bench: {}: {e}", path.display());
        return ExitCode::from(exit::ENVIRONMENT);
    }
    if !a.quiet {
        eprintln!("roce bench: {} frames, {} bytes in {}", a.frames, bytes.len(), path.display());
    }
    let r = measure(a, &path);
    if a.keep.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("roce bench: {e}");
            ExitCode::from(exit::ENVIRONMENT)
        }
    }
}

fn measure(a: &DecodeBench, path: &Path) -> Result<(), String> {
    let me = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let roce = |json: bool| {
        let mut c = Command::new(&me);
        c.arg("decode");
        if json {
            c.arg("--json");
        }
        c.arg(path);
        c
    };
    let tshark = |json: bool| {
        let mut c = Command::new("tshark");
        c.args(["-n", "-r"]).arg(path);
        if json {
            c.args(["-T", "json"]);
        }
        c
    };
    let rs = best(a.runs, || roce(false))?;
    let rj = best(a.runs, || roce(true))?;
    let ts = best(a.runs, || tshark(false))?;
    let tj = best(a.runs, || tshark(true))?;
    let fps = |d: Duration| a.frames as f64 / d.as_secs_f64();
    println!("frames            {}", a.frames);
    println!("roce decode       {:>9.3} s  {:>12.0} frames/s", rs.as_secs_f64(), fps(rs));
    println!("tshark            {:>9.3} s  {:>12.0} frames/s", ts.as_secs_f64(), fps(ts));
    println!("roce decode --json{:>9.3} s  {:>12.0} frames/s", rj.as_secs_f64(), fps(rj));
    println!("tshark -T json    {:>9.3} s  {:>12.0} frames/s", tj.as_secs_f64(), fps(tj));
    println!("summary ratio     {:>9.1}x (goal 20x)", ts.as_secs_f64() / rs.as_secs_f64());
    println!("json ratio        {:>9.1}x (goal 40x)", tj.as_secs_f64() / rj.as_secs_f64());
    Ok(())
}

fn congestion(a: &CongestionBench) -> ExitCode {
    use roce_cm::rc::{Congestion, DcqcnParams};
    use roce_net::fabric::{self, EcnQueueConfig, FabricConfig};
    let congestion = match (a.cc, a.dcqcn_params) {
        (CcArg::Off, _) => Congestion::Off,
        (CcArg::Dcqcn, DcqcnPreset::Nic) => Congestion::Dcqcn(DcqcnParams::nic()),
        (CcArg::Dcqcn, DcqcnPreset::Paper) => Congestion::Dcqcn(DcqcnParams::paper()),
    };
    let mut cfg = FabricConfig::new(a.flows as usize, a.rate, congestion, a.duration, a.seed);
    cfg.queue = EcnQueueConfig { rate: a.rate, kmin: a.kmin, kmax: a.kmax, pmax: a.pmax, buffer: a.buffer };
    cfg.link_delay = a.delay;
    let started = Instant::now();
    let r = match fabric::run(&cfg) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("roce bench congestion: {e}");
            return ExitCode::from(exit::USAGE);
        }
    };
    let wall = started.elapsed();
    let gb = |bps: f64| bps / 1e9;
    let rate = a.rate as f64;
    let depth = &r.port.depth;
    let sum = |f: &dyn Fn(&fabric::FlowReport) -> u64| r.flows.iter().map(f).sum::<u64>();
    let cnps = sum(&|f| f.receiver.cnp_sent);
    let cuts = sum(&|f| f.sender.rate_cuts);
    let retrans = sum(&|f| f.retransmitted_pkts);
    let cc = match a.cc {
        CcArg::Off => "off",
        CcArg::Dcqcn => "dcqcn",
    };
    if a.json {
        let flows: Vec<serde_json::Value> = r
            .flows
            .iter()
            .enumerate()
            .map(|(i, f)| {
                serde_json::json!({
                    "flow": i,
                    "goodput_gbit": gb(f.goodput),
                    "messages": f.messages,
                    "retransmitted_pkts": f.retransmitted_pkts,
                    "ack_timeouts": f.ack_timeouts,
                    "failed": f.failed,
                    "ce_received": f.receiver.ce_received,
                    "cnp_sent": f.receiver.cnp_sent,
                    "cnp_suppressed_by_interval": f.receiver.cnp_suppressed_by_interval,
                    "cnp_received": f.sender.cnp_received,
                    "rate_cuts": f.sender.rate_cuts,
                    "rate_increases": {
                        "fast_recovery": f.sender.rate_increase_fast_recovery,
                        "additive": f.sender.rate_increase_additive,
                        "hyper": f.sender.rate_increase_hyper,
                    },
                    "final_rate_gbit": gb(f.final_rate as f64),
                })
            })
            .collect();
        let doc = serde_json::json!({
            "config": {
                "flows": a.flows,
                "rate_gbit": gb(rate),
                "cc": cc,
                "dcqcn_params": match a.dcqcn_params { DcqcnPreset::Nic => "nic", DcqcnPreset::Paper => "paper" },
                "duration_s": a.duration.as_secs_f64(),
                "seed": a.seed,
                "kmin": a.kmin,
                "kmax": a.kmax,
                "pmax": a.pmax,
                "buffer": a.buffer,
                "link_delay_us": a.delay.as_secs_f64() * 1e6,
                "message": cfg.message,
                "mtu": cfg.mtu,
            },
            "flows": flows,
            "goodput_gbit": gb(r.total_goodput()),
            "goodput_of_rate": r.total_goodput() / rate,
            "fairness": r.fairness,
            "packets": r.port.enqueued,
            "drops": r.port.dropped,
            "ce_marks": r.port.ce_marked,
            "cnps": cnps,
            "rate_cuts": cuts,
            "retransmitted_pkts": retrans,
            "queue_bytes": { "p50": depth.quantile(0.5), "p99": depth.quantile(0.99), "max": depth.max() },
            "events": r.events,
        });
        println!("{doc}");
        return ExitCode::SUCCESS;
    }
    println!(
        "{} flows, {} Gbit/s links, cc {cc}, {} s virtual ({:.2} s wall, {} events), seed {}",
        a.flows,
        gb(rate),
        a.duration.as_secs_f64(),
        wall.as_secs_f64(),
        r.events,
        a.seed
    );
    println!("flow  goodput Gbit/s  messages  retransmitted  CNPs sent  rate cuts  final rate Gbit/s");
    for (i, f) in r.flows.iter().enumerate() {
        println!(
            "{i:>4}  {:>14.3}  {:>8}  {:>13}  {:>9}  {:>9}  {:>17.3}",
            gb(f.goodput),
            f.messages,
            f.retransmitted_pkts,
            f.receiver.cnp_sent,
            f.sender.rate_cuts,
            gb(f.final_rate as f64)
        );
    }
    println!(
        "total goodput {:.3} Gbit/s ({:.3} of the rate), Jain's fairness {:.4}",
        gb(r.total_goodput()),
        r.total_goodput() / rate,
        r.fairness
    );
    println!(
        "switch: {} packets, {} dropped, {} CE-marked; queue p50 {:.1} KB, p99 {:.1} KB, max {:.1} KB (buffer {:.0} KB)",
        r.port.enqueued,
        r.port.dropped,
        r.port.ce_marked,
        depth.quantile(0.5) as f64 / 1e3,
        depth.quantile(0.99) as f64 / 1e3,
        depth.max() as f64 / 1e3,
        a.buffer as f64 / 1e3
    );
    println!("CNPs {cnps}, rate cuts {cuts}, retransmitted packets {retrans}");
    ExitCode::SUCCESS
}
