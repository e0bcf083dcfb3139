//! A simulated InfiniBand fabric with a real SM for interop tests: ibsim (linux-rdma's fabric
//! simulator) on the small net file `tests/ibsim/net`, and OpenSM attached to it through
//! `ibsim-run` (the `LD_PRELOAD` shim), both in a fresh temporary directory.
//!
//! A module of the `opensm` test binary (`#[path = "../ibsim/harness.rs"] mod ibsim_harness;` in
//! tests/opensm/main.rs). [`Fabric::start`] panics
//! (the test fails, it never skips) when the tools are missing: `bash tests/ibsim/setup.sh`
//! installs them (Debian `ibsim-utils opensm infiniband-diags`).
//!
//! Every fabric has its own socket base name (`IBSIM_SOCKNAME`, read by ibsim, the shim and
//! [`roce_net::ibsim`]), so fabrics do not clash and tests may run in parallel (threads of one binary, or binaries). Both processes
//! are killed by PID when the [`Fabric`] drops (also on panic), and run under
//! `setpriv --pdeathsig KILL` so that they die with the test thread that started them even if
//! the test binary is killed. The directory (net file, `ibsim.log`, `osm.log`, OpenSM's cache)
//! is removed on success and kept, with its path printed, when the test panicked (or when
//! `ROCE_IBSIM_KEEP` is set).
#![allow(dead_code)]

use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use roce_net::ibsim::{IbsimClient, IbsimOptions};

/// The net file: Switch1 (OpenSM's port, the sim's default) and HCAs Hca1, Hca2, Hca3.
pub const NET_FILE: &str = include_str!("net");

/// How long OpenSM may take to become MASTER, and a port to become Active.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one `ibsim-run` tool (saquery, sminfo) may run.
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(20);

const TOOLS: [&str; 4] = ["ibsim", "ibsim-run", "opensm", "saquery"];

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A running ibsim + OpenSM.
pub struct Fabric {
    /// The temporary directory everything runs in.
    pub dir: PathBuf,
    /// The `IBSIM_SOCKNAME` of this fabric.
    pub sockname: String,
    ibsim: Option<Child>,
    opensm: Option<Child>,
}

fn find_in_path(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin"].iter().map(PathBuf::from))
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

fn tool(name: &str) -> PathBuf {
    find_in_path(name).unwrap_or_else(|| {
        panic!(
            "`{name}` is not installed: the OpenSM interop tests need ibsim and OpenSM; run \
             `bash tests/ibsim/setup.sh` (installs Debian's ibsim-utils opensm infiniband-diags)"
        )
    })
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| format!("(cannot read {}: {e})", path.display()));
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Wait for `child` with a deadline; kill it (by PID) when the deadline passes.
fn wait_output(mut child: Child, timeout: Duration, what: &str) -> Output {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return child.wait_with_output().expect("collect output"),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let out = child.wait_with_output().expect("collect output");
                panic!(
                    "{what} did not finish within {timeout:?}; stdout:\n{}\nstderr:\n{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            Err(e) => panic!("waiting for {what}: {e}"),
        }
    }
}

impl Fabric {
    /// Start ibsim and OpenSM and wait until OpenSM is MASTER. Panics, with the logs, when
    /// something is missing or does not come up.
    pub fn start() -> Fabric {
        for t in TOOLS {
            tool(t);
        }
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let sockname = format!("roce{}s{seq}", std::process::id());
        let dir = std::env::temp_dir().join(format!("roce-ibsim-{}-{seq}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the fabric's temporary directory");
        let net = dir.join("net");
        std::fs::write(&net, NET_FILE).expect("write the net file");
        let mut fabric = Fabric { dir, sockname, ibsim: None, opensm: None };

        // ibsim: -s starts the network at once, -n runs without a console.
        let log = std::fs::File::create(fabric.dir.join("ibsim.log")).expect("create ibsim.log");
        let child = fabric
            .command(&tool("ibsim"))
            .args(["-s", "-n"])
            .arg(&net)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup log"))
            .stderr(log)
            .spawn()
            .expect("spawn ibsim");
        fabric.ibsim = Some(child);
        fabric.wait_for("ibsim's control socket", |f| f.ctl_socket_bound(), "ibsim.log");

        // OpenSM through the shim, attached to the sim's default port (Switch1 port 0).
        let out = std::fs::File::create(fabric.dir.join("opensm.out")).expect("create opensm.out");
        let child = fabric
            .command(&tool("ibsim-run"))
            .arg(tool("opensm"))
            .arg("-f")
            .arg(fabric.dir.join("osm.log"))
            .env("OSM_TMP_DIR", &fabric.dir)
            .env("OSM_CACHE_DIR", &fabric.dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("dup log"))
            .stderr(out)
            .spawn()
            .expect("spawn opensm");
        fabric.opensm = Some(child);
        fabric.wait_for(
            "OpenSM to enter MASTER state",
            |f| std::fs::read_to_string(f.dir.join("osm.log")).is_ok_and(|l| l.contains("Entering MASTER state")),
            "osm.log",
        );
        fabric
    }

    /// A command run in the fabric's directory with its `IBSIM_SOCKNAME`, under
    /// `setpriv --pdeathsig KILL` when setpriv exists.
    fn command(&self, program: &Path) -> Command {
        let mut c = match find_in_path("setpriv") {
            Some(setpriv) => {
                let mut c = Command::new(setpriv);
                c.args(["--pdeathsig", "KILL"]).arg(program);
                c
            }
            None => Command::new(program),
        };
        c.current_dir(&self.dir).env("IBSIM_SOCKNAME", &self.sockname).env_remove("SIM_HOST").env_remove("LD_PRELOAD");
        c
    }

    fn ctl_socket_bound(&self) -> bool {
        // ibsim binds "@NAME:ctl" padded with NULs, which /proc/net/unix shows as '@'.
        let want = format!("@{}:ctl@", self.sockname);
        std::fs::read_to_string("/proc/net/unix").is_ok_and(|t| t.contains(&want))
    }

    fn wait_for(&mut self, what: &str, mut ready: impl FnMut(&Fabric) -> bool, log: &str) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if ready(self) {
                return;
            }
            for (name, child) in [("ibsim", &mut self.ibsim), ("opensm", &mut self.opensm)] {
                if let Some(c) = child {
                    if let Ok(Some(status)) = c.try_wait() {
                        panic!(
                            "{name} exited ({status}) while waiting for {what}; {log} ends with:\n{}\n(ibsim.log: {})",
                            tail(&self.dir.join(log), 30),
                            tail(&self.dir.join("ibsim.log"), 10)
                        );
                    }
                }
            }
            if Instant::now() >= deadline {
                panic!(
                    "timed out after {START_TIMEOUT:?} waiting for {what}; {log} ends with:\n{}",
                    tail(&self.dir.join(log), 30)
                );
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Options for a client of this fabric attached to `node` (a name in [`NET_FILE`]).
    pub fn options(&self, node: &str) -> IbsimOptions {
        IbsimOptions::node(node).with_sockname(&self.sockname).with_wait_active(START_TIMEOUT)
    }

    /// A client attached to `node`, once OpenSM has made its port Active.
    pub fn client(&self, node: &str) -> IbsimClient {
        IbsimClient::connect(&self.options(node)).unwrap_or_else(|e| {
            panic!("attach to {node}: {e}\nosm.log ends with:\n{}", tail(&self.dir.join("osm.log"), 20))
        })
    }

    /// Run an infiniband-diags tool through `ibsim-run` on this fabric (attached at the default
    /// port); its stdout. Panics when it fails or runs longer than [`TOOL_TIMEOUT`].
    pub fn ibsim_run(&self, program: &str, args: &[&str]) -> String {
        let child = self
            .command(&tool("ibsim-run"))
            .arg(tool(program))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn ibsim-run {program}: {e}"));
        let what = format!("ibsim-run {program} {}", args.join(" "));
        let out = wait_output(child, TOOL_TIMEOUT, &what);
        if !out.status.success() {
            panic!(
                "{what} failed ({}); stdout:\n{}\nstderr:\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `ibsim-run saquery ARGS`: its stdout.
    pub fn saquery(&self, args: &[&str]) -> String {
        self.ibsim_run("saquery", args)
    }

    /// The MCMemberRecords `saquery -m` lists (all of them, or those of one MGID). Note: under
    /// the shim, SA answers bigger than one MAD are cut to the first MAD (no RMPP), so at most 3
    /// records come back; filter by MGID when more may exist.
    pub fn mc_members(&self, mgid: Option<Ipv6Addr>) -> Vec<SaqueryMember> {
        let out = match mgid {
            Some(m) => self.saquery(&["--smkey", "1", "-m", "--mgid", &m.to_string()]),
            None => self.saquery(&["--smkey", "1", "-m"]),
        };
        parse_saquery_members(&out)
    }

    /// The MGIDs `saquery -g` lists (one untrusted MCMemberRecord per group; under the shim at
    /// most 3, see [`Fabric::mc_members`]).
    pub fn mc_groups(&self) -> Vec<Ipv6Addr> {
        self.saquery(&["-g"])
            .lines()
            .filter_map(|l| field(l, "MGID"))
            .map(|v| v.parse().unwrap_or_else(|e| panic!("saquery -g MGID {v:?}: {e}")))
            .collect()
    }

    /// OpenSM's log so far.
    pub fn osm_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("osm.log")).unwrap_or_default()
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        // OpenSM first (it is a client of ibsim), then ibsim; by PID, then reap.
        for child in [self.opensm.take(), self.ibsim.take()].into_iter().flatten() {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() || std::env::var_os("ROCE_IBSIM_KEEP").is_some() {
            eprintln!("ibsim harness: logs kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Send one SA MAD from `client` to the SM (its LID, QP 1) and wait up to `timeout` for the
/// response carrying its TID (bits 47..0; the sim rewrites bits 63..48): the MAD and the length
/// the sim carried with it. OpenSM sends its SA answers with umad's length (MAD, RMPP and SA
/// headers, 56 bytes, plus the records: 112 for one MCMemberRecord, 56 for a GetTableResp of
/// none; the shim cuts longer ones to one 256-byte MAD). `None`: no answer in time (OpenSM drops
/// what it does not handle). Panics when the sim cannot deliver the MAD.
pub fn sa_exchange(client: &IbsimClient, mad: &[u8; 256], timeout: Duration) -> Option<([u8; 256], usize)> {
    const LOW48: u64 = 0xFFFF_FFFF_FFFF;
    let tid = u64::from_be_bytes(mad[8..16].try_into().expect("8 bytes"));
    client.send_mad(client.sm_lid(), 1, mad).unwrap_or_else(|e| panic!("send to the SM: {e}"));
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        match client.recv_packet(Some(left)).unwrap_or_else(|e| panic!("receive from the sim: {e}")) {
            None => return None,
            Some(p) if p.status != 0 => {
                panic!("the sim could not deliver our MAD (TID {:#x}) to the SM: status {}", p.tid(), p.status)
            }
            Some(p) if p.tid() & LOW48 == tid & LOW48 && p.mad[3] & 0x80 != 0 => {
                return Some((p.mad, p.length as usize));
            }
            Some(_) => {}
        }
    }
}

/// One record of `saquery -m`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaqueryMember {
    /// MGID.
    pub mgid: Ipv6Addr,
    /// MLID.
    pub mlid: u16,
    /// PortGid.
    pub port_gid: Ipv6Addr,
    /// Scope (high nibble) and JoinState (low nibble).
    pub scope_state: u8,
    /// ProxyJoin.
    pub proxy_join: bool,
}

impl SaqueryMember {
    /// The JoinState bits.
    pub fn join_state(&self) -> u8 {
        self.scope_state & 0x0F
    }
}

fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let rest = line.trim().strip_prefix(name)?;
    Some(rest.trim_start_matches('.').trim())
}

fn hex(v: &str) -> u64 {
    u64::from_str_radix(v.trim_start_matches("0x").trim_start_matches("0X"), 16)
        .unwrap_or_else(|e| panic!("saquery printed {v:?}, not a hex number: {e}"))
}

/// Parse `saquery -m` output ("MCMemberRecord member dump:" blocks).
pub fn parse_saquery_members(out: &str) -> Vec<SaqueryMember> {
    let mut v = Vec::new();
    for block in out.split("MCMemberRecord member dump:").skip(1) {
        let mut m = SaqueryMember {
            mgid: Ipv6Addr::UNSPECIFIED,
            mlid: 0,
            port_gid: Ipv6Addr::UNSPECIFIED,
            scope_state: 0,
            proxy_join: false,
        };
        for line in block.lines() {
            if let Some(x) = field(line, "MGID") {
                m.mgid = x.parse().unwrap_or_else(|e| panic!("saquery MGID {x:?}: {e}"));
            } else if let Some(x) = field(line, "Mlid") {
                m.mlid = hex(x) as u16;
            } else if let Some(x) = field(line, "PortGid") {
                m.port_gid = x.parse().unwrap_or_else(|e| panic!("saquery PortGid {x:?}: {e}"));
            } else if let Some(x) = field(line, "ScopeState") {
                m.scope_state = hex(x) as u8;
            } else if let Some(x) = field(line, "ProxyJoin") {
                m.proxy_join = hex(x) != 0;
            }
        }
        v.push(m);
    }
    v
}
