//! `roce bench decode`: `roce decode` against tshark on the same mixed RoCEv2 capture, wall
//! time including process start, as ratios measured in one run (best of `--runs` each).
//! `roce bench analyze`: `roce analyze` against `tshark -q -z conv,udp -z io,stat,1` on one
//! generated capture of RC flows, and `roce analyze`'s peak memory (max RSS) on that capture
//! and on one `--scale` times larger, streamed through standard input.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use crate::plumbing::exit;

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
