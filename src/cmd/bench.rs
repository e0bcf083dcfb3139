//! `roce bench decode`: `roce decode` against tshark on the same mixed RoCEv2 capture, wall
//! time including process start, as ratios measured in one run (best of `--runs` each).

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
    }
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
