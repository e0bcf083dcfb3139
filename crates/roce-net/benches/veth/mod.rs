//! What the veth benchmarks share: two network namespaces joined by a veth pair (v1 in the
//! first, v2 in the second) that the bench creates and removes, entering a namespace on a
//! thread, a thread's CPU time, and a release `roce sa-server` run in a namespace with its
//! resident memory. Each bench uses part of it.
#![allow(dead_code)]

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// Run a shell command; a failure ends the bench (it needs root and iproute2).
pub fn sh(cmd: &str) {
    let ok = Command::new("sh").args(["-c", cmd]).status().map(|s| s.success()).unwrap_or(false);
    assert!(ok, "{cmd}");
}

/// Two namespaces (`.0` holds v1, `.1` holds v2), deleted on drop.
pub struct Nets(pub String, pub String);

impl Nets {
    /// Namespaces named after `tag` and this process, v1 = `ip1`/24 and v2 = `ip2`/24, both up;
    /// `macs`, when given, are set before the links come up.
    pub fn pair(tag: &str, macs: Option<(&str, &str)>, ip1: Ipv4Addr, ip2: Ipv4Addr) -> Nets {
        let (a, b) = (format!("roce-{tag}-a-{}", std::process::id()), format!("roce-{tag}-b-{}", std::process::id()));
        sh(&format!("ip netns add {a} && ip netns add {b}"));
        let nets = Nets(a, b);
        let (a, b) = (&nets.0, &nets.1);
        sh(&format!("ip link add v1 netns {a} type veth peer name v2 netns {b}"));
        if let Some((m1, m2)) = macs {
            sh(&format!("ip -n {a} link set v1 address {m1} && ip -n {b} link set v2 address {m2}"));
        }
        sh(&format!("ip -n {a} link set v1 up && ip -n {b} link set v2 up && ip -n {a} addr add {ip1}/24 dev v1 && ip -n {b} addr add {ip2}/24 dev v2"));
        nets
    }
}

impl Drop for Nets {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        let _ = Command::new("ip").args(["netns", "del", &self.1]).status();
    }
}

/// Move the calling thread into namespace `ns` (sockets it opens stay there).
pub fn enter(ns: &str) {
    let f = File::open(format!("/var/run/netns/{ns}")).expect("netns file");
    nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET).unwrap_or_else(|e| panic!("setns {ns}: {e}"));
}

/// CPU time (user + system) the calling thread has used.
pub fn thread_cpu() -> Duration {
    // SAFETY: getrusage fills the struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// The release `roce` binary: `ROCE_BIN` if set, else the newest of `target/release/roce` and
/// `target/x86_64-unknown-linux-gnu/release/roce` (what tests/run-all.sh builds), else it is
/// built with `cargo build --release --bin roce` into `target/bench-roce` (a target directory of
/// its own: the running cargo holds the lock on this one).
pub fn roce_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("ROCE_BIN") {
        return p.into();
    }
    // A bench runs as target/<profile>/deps/<bench>-<hash>.
    let exe = std::env::current_exe().expect("current_exe");
    let target = exe.ancestors().nth(3).expect("target directory").to_path_buf();
    let built = ["release/roce", "x86_64-unknown-linux-gnu/release/roce"]
        .iter()
        .map(|p| target.join(p))
        .filter_map(|p| Some((p.metadata().ok()?.modified().ok()?, p)))
        .max();
    if let Some((_, p)) = built {
        return p;
    }
    let own = target.join("bench-roce");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    println!("building the release roce binary into {}", own.display());
    let ok = Command::new(cargo)
        .args(["build", "--release", "--bin", "roce", "--manifest-path"])
        .arg(&workspace)
        .arg("--target-dir")
        .arg(&own)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "cargo build --release --bin roce");
    own.join("release/roce")
}

/// VmRSS and VmHWM of `pid`, in KiB.
pub fn rss_kib(pid: u32) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    let field = |name: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in /proc/{pid}/status"))
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The running sa-server: stopped with SIGTERM (and waited for) when dropped, so that a failed
/// assertion does not leave it behind.
pub struct SaServer(Option<Child>);

impl SaServer {
    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.0.as_ref().map_or(0, Child::id)
    }

    /// SIGTERM, as an operator stops it; its exit status.
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.0.take()?;
        // SAFETY: kill(2) on the child we started and have not reaped.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        child.wait().ok()
    }
}

impl Drop for SaServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `roce sa-server --iface v2 --ip IP ARGS…` in namespace `ns`, its stdout and stderr lines
/// collected by two threads; the receiver gets a message once it answers.
pub fn start_sa_server(
    ns: &str,
    ip: Ipv4Addr,
    args: &[&str],
) -> (SaServer, Arc<Mutex<Vec<String>>>, mpsc::Receiver<()>) {
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(roce_bin())
        .args(["sa-server", "--iface", "v2", "--ip", &ip.to_string()])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("roce sa-server");
    let lines = Arc::new(Mutex::new(Vec::new()));
    let (up_tx, up_rx) = mpsc::channel();
    let pipes: [Box<dyn std::io::Read + Send>; 2] =
        [Box::new(child.stdout.take().unwrap()), Box::new(child.stderr.take().unwrap())];
    for pipe in pipes {
        let (lines, up_tx) = (lines.clone(), up_tx.clone());
        std::thread::spawn(move || {
            for l in BufReader::new(pipe).lines().map_while(Result::ok) {
                if l.contains("answering SA requests") {
                    let _ = up_tx.send(());
                }
                lines.lock().unwrap().push(l);
            }
        });
    }
    (SaServer(Some(child)), lines, up_rx)
}
