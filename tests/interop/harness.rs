//! The interop harness: a Linux kernel rxe peer in a qemu guest (TCG), on a tap interface inside
//! a network namespace of its own. See spec/interop.md for the facts behind it.
//!
//! A module of the `interop` test binary (`mod harness;` in tests/interop/main.rs); each test
//! boots a guest with a per-test scenario:
//!
//! ```ignore
//! let script = "counters before\nhost_wait go\ncounters after\n";
//! let mut g = crate::harness::GuestBuilder::new("my_test").scenario(script).boot();
//! let sock = g.raw_socket();              // AF_PACKET on tap0, inside the namespace
//! sock.send(&frame)?;
//! g.signal("go");                          // a line to the guest's scenario (ttyS1)
//! let after = g.counters("after", Duration::from_secs(10));
//! g.finish();                              // waits for @@DONE, tears down
//! ```
//!
//! What it sets up, per guest:
//! - the network namespace `roce-it-<pid>-<n>` with `tap0` (198.18.0.1/24, fd00::1/64, a fresh
//!   locally-administered MAC) and nothing else but `lo`: all traffic stays inside it;
//! - `tcpdump -U --immediate-mode -i tap0` into `artefacts/<test>/tap0.pcap`, started (and
//!   listening) before the guest boots;
//! - `qemu-system-x86_64 -accel tcg -cpu max` with `-kernel target/interop/vmlinuz` and the initrd
//!   `base.cpio.gz` + a per-run `scenario.cpio.gz` (holding `/scenario.sh` and any static
//!   binaries at `/usr/local/bin/`), the console (ttyS0) in `artefacts/<test>/console.log`, and a
//!   second serial port (ttyS1) on a unix socket: the control channel from the host to the
//!   scenario (`signal`, `guest_exec`);
//! - teardown (qemu, tcpdump, the namespace) on `finish`, on drop and on panic; qemu and tcpdump
//!   also die with the test thread (PR_SET_PDEATHSIG) if the test process is killed.
//!
//! Guests of one kernel run one at a time (a file lock on `$TMPDIR/roce-interop-guest-<kernel>.lock`,
//! held for a guest's life, across test threads, test binaries and work trees); the test
//! command runs two kernels' suites at once (a TCG guest is CPU-bound mostly while it boots).
//!
//! Prerequisites (missing ones are a test failure, never a skip): root, `qemu-system-x86_64`,
//! `tcpdump`, `ip`, `gzip`, and `target/interop/{vmlinuz,base.cpio.gz}` from
//! `bash tests/interop/setup.sh`.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use roce_wire::rxe_accept::RxeKernel;

/// The guest NIC's MAC (`-device virtio-net-pci,mac=…`).
pub const GUEST_MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
/// tap0's IPv4 address in the namespace (the host side).
pub const HOST_IP4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The guest's eth0 IPv4 address.
pub const GUEST_IP4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// tap0's IPv6 address in the namespace.
pub const HOST_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
/// The guest's eth0 IPv6 address.
pub const GUEST_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
/// The interface in the namespace that the guest's NIC is attached to.
pub const TAP: &str = "tap0";
/// Prefix of the namespaces this harness creates (stale ones of dead processes are removed).
pub const NETNS_PREFIX: &str = "roce-it-";

/// The repository root (the root package's manifest directory).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `target/interop` of the repository: kernels/, cache/, artefacts/.
pub fn interop_dir() -> PathBuf {
    repo_root().join("target").join("interop")
}

/// A guest kernel that tests/interop/setup.sh builds, and what it does where the kernels differ,
/// as the tests observed it (spec/interop.md, spec/kernel-findings.md). A test whose expectation
/// depends on the kernel asks this, not the kernel's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestKernel {
    /// `ROCE_KERNEL`'s value: the directory under `target/interop/kernels/` and
    /// `target/interop/artefacts/`.
    pub name: &'static str,
    /// rxe's opcode table, for the acceptance predictor (`Endpoints::kernel`).
    pub rxe: RxeKernel,
    /// A UD SEND longer than a MAD (1000 bytes) to QP1 with the GSI Q_Key leaves the GSI QP in
    /// the error state: no MAD is answered until rxe0 is re-created (kernel-findings.md §2;
    /// `fuzz::oversize_ud_send_to_qp1_kills_the_gsi_qp`).
    pub oversize_send_kills_gsi: bool,
    /// An IPv6 RoCEv2 frame whose UDP payload is shorter than a BTH oopses the kernel in
    /// `__rxe_put` from `rxe_rcv` (kernel-findings.md §1;
    /// `fuzz::ipv6_frame_shorter_than_a_bth_crashes_rxe`).
    pub ipv6_short_bth_oopses: bool,
    /// The MAD layer matches an RMPP ACK received over RoCEv2 IPv4 to its send (false: mad.c
    /// `rcv_has_same_gid` compares a GID with rxe's IPv4 GRH buffer, kernel-findings.md §3;
    /// `rmpp::kernel_rmpp_sender_and_our_receiver` case d).
    pub rmpp_ack_over_ipv4_matches: bool,
    /// rxe has ATOMIC WRITE and FLUSH (the IBA 1.5 memory placement opcodes, rxe_opcode.c
    /// from 6.2 on; `capi::atomic_write_both_ways`).
    pub memory_placement: bool,
}

impl GuestKernel {
    /// The `--kernel` value of `roce fuzz-peer` that selects [`Self::rxe`]'s opcode table.
    pub fn fuzz_peer_kernel(&self) -> &'static str {
        match self.rxe {
            RxeKernel::V6_1 => "6.1",
            RxeKernel::V6_12 => "6.12",
        }
    }
}

impl std::fmt::Display for GuestKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// The guest kernels tests/interop/setup.sh builds, the default first: Debian 12's 6.1 and
/// 6.12, and `sid`, the newest amd64 kernel of Debian's unstable suite (7.2.13 when written).
pub static KERNELS: [GuestKernel; 3] = [
    GuestKernel {
        name: "6.1",
        rxe: RxeKernel::V6_1,
        oversize_send_kills_gsi: true,
        ipv6_short_bth_oopses: true,
        rmpp_ack_over_ipv4_matches: false,
        memory_placement: false,
    },
    GuestKernel {
        name: "6.12",
        rxe: RxeKernel::V6_12,
        oversize_send_kills_gsi: false,
        ipv6_short_bth_oopses: true,
        rmpp_ack_over_ipv4_matches: false,
        memory_placement: true,
    },
    GuestKernel {
        name: "sid",
        rxe: RxeKernel::V6_12,
        oversize_send_kills_gsi: false,
        ipv6_short_bth_oopses: true,
        rmpp_ack_over_ipv4_matches: false,
        memory_placement: true,
    },
];

/// The guest kernel this run boots: `ROCE_KERNEL` (a [`KERNELS`] name), 6.1 when unset.
/// tests/run-all.sh runs the interop tests once per kernel. Panics on any other value.
pub fn kernel() -> &'static GuestKernel {
    let names: Vec<&str> = KERNELS.iter().map(|k| k.name).collect();
    match std::env::var("ROCE_KERNEL") {
        Ok(k) if k.is_empty() => &KERNELS[0],
        Ok(k) => KERNELS
            .iter()
            .find(|g| g.name == k)
            .unwrap_or_else(|| panic!("ROCE_KERNEL={k:?}: expected one of {names:?}")),
        Err(_) => &KERNELS[0],
    }
}

/// `target/interop/kernels/<kernel>`: vmlinuz, base.cpio.gz, kernel-version of [`kernel`].
pub fn kernel_dir() -> PathBuf {
    interop_dir().join("kernels").join(kernel().name)
}

/// Kernel messages that fail a run (the console is watched for them): a kernel bug, warning,
/// oops, GP fault or lockup, whatever a test sent.
pub const KERNEL_TROUBLE: [&str; 6] = ["BUG:", "WARNING:", "Oops", "general protection", "soft lockup", "Kernel panic"];

/// The console lines holding one of [`KERNEL_TROUBLE`].
pub fn kernel_trouble(console: &str) -> Vec<String> {
    console.lines().filter(|l| KERNEL_TROUBLE.iter().any(|t| l.contains(t))).map(str::to_string).collect()
}

/// A fresh locally-administered unicast MAC (02:xx:…), different on every call.
pub fn fresh_mac() -> [u8; 6] {
    static N: AtomicU32 = AtomicU32::new(0);
    let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().subsec_nanos();
    let x = t ^ (std::process::id() << 12) ^ N.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9E37_79B9);
    let b = x.to_be_bytes();
    [0x02, 0x52, b[0], b[1], b[2], b[3]]
}

/// Which host tools and files are missing for booting a guest (empty when all are there).
pub fn missing_prerequisites() -> Vec<String> {
    let mut missing = Vec::new();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        missing.push("root (network namespaces, tap devices and tcpdump need it)".to_string());
    }
    for tool in ["qemu-system-x86_64", "tcpdump", "ip", "gzip"] {
        if which(tool).is_none() {
            missing.push(format!("`{tool}` in PATH"));
        }
    }
    for f in ["vmlinuz", "base.cpio.gz"] {
        let p = kernel_dir().join(f);
        if !p.is_file() {
            missing.push(format!("{} (the guest kernel/initramfs)", p.display()));
        }
    }
    missing
}

fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    // `cargo test` may run with a PATH without the sbin directories.
    dirs.extend(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from));
    let dirs = std::env::join_paths(dirs).ok()?;
    which::which_in(tool, Some(dirs), "/").ok()
}

fn tool(name: &str) -> PathBuf {
    which(name).unwrap_or_else(|| PathBuf::from(name))
}

/// Run a command to completion; Err with its stderr when it fails.
fn run(cmd: &mut Command) -> Result<Output, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?}: {}: {}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    Ok(out)
}

fn ip(args: &[&str]) -> Result<Output, String> {
    run(Command::new(tool("ip")).args(args))
}

/// Whether a process with this pid exists.
fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Remove namespaces of this harness whose creating process is gone (a killed test run).
fn remove_stale_namespaces() {
    let Ok(dir) = fs::read_dir("/run/netns") else { return };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(NETNS_PREFIX) else { continue };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        if !pid_alive(pid) {
            let _ = ip(&["netns", "del", &name]);
        }
    }
}

// ------------------------------------------------------------------------------------- cpio

/// A `newc` cpio archive built in memory (what the kernel's initramfs unpacker reads).
#[derive(Default)]
pub struct Cpio {
    buf: Vec<u8>,
    ino: u32,
}

impl Cpio {
    fn entry(&mut self, name: &str, mode: u32, data: &[u8]) {
        // inode numbers high enough not to collide with the base archive's (cpio -o numbers from 1…)
        self.ino += 1;
        let b = cpio::newc::Builder::new(name).ino(0x0070_0000 + self.ino).mode(mode).nlink(1);
        let mut w = b.write(&mut self.buf, data.len() as u32);
        w.write_all(data).expect("writing to memory");
        w.finish().expect("writing to memory");
    }

    /// A directory (no leading slash: `usr/local/bin`).
    pub fn dir(&mut self, name: &str) {
        self.entry(name, 0o040_755, &[]);
    }

    /// A regular file with permission bits `perm`.
    pub fn file(&mut self, name: &str, perm: u32, data: &[u8]) {
        self.entry(name, 0o100_000 | perm, data);
    }

    /// The archive with its trailer.
    pub fn finish(mut self) -> Vec<u8> {
        cpio::newc::trailer(&mut self.buf).expect("writing to memory");
        self.buf
    }
}

fn gzip(data: &[u8]) -> Result<Vec<u8>, String> {
    // As `gzip -n -1`: no name, no time stamp, fastest level.
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(data).map_err(|e| format!("gzip: {e}"))?;
    z.finish().map_err(|e| format!("gzip: {e}"))
}

// ------------------------------------------------------------------------------------- guest

/// What to boot: the test's name (its artefacts directory), the scenario and extra binaries.
pub struct GuestBuilder {
    test: String,
    scenario: String,
    binaries: Vec<(PathBuf, String)>,
    boot_timeout: Duration,
    memory_mb: u32,
}

impl GuestBuilder {
    /// A guest for the test `test` (artefacts in `target/interop/artefacts/<test>/`) with an
    /// empty scenario.
    pub fn new(test: &str) -> GuestBuilder {
        GuestBuilder {
            test: test.to_string(),
            scenario: String::new(),
            binaries: Vec::new(),
            boot_timeout: Duration::from_secs(60),
            memory_mb: 1024,
        }
    }

    /// The scenario: a POSIX shell script for busybox sh, run after `@@READY` with the helpers
    /// of `/lib/interop.sh` (tests/interop/guest-lib.sh) in scope: `counters TAG`,
    /// `host_wait WORD [TIMEOUT]`, `serve`, `result NAME VALUE`, `gids`. The guest powers off
    /// when it returns.
    pub fn scenario(mut self, script: &str) -> GuestBuilder {
        self.scenario = script.to_string();
        self
    }

    /// Put the host file `host_path` (a statically linked binary: the guest has only the
    /// rdma-core tools' libraries) at `/usr/local/bin/<name>` in the guest.
    pub fn binary(mut self, host_path: impl Into<PathBuf>, name: &str) -> GuestBuilder {
        self.binaries.push((host_path.into(), name.to_string()));
        self
    }

    /// How long to wait for `@@READY` (default 60 s; the boot takes about 5 s).
    pub fn boot_timeout(mut self, t: Duration) -> GuestBuilder {
        self.boot_timeout = t;
        self
    }

    /// Boot the guest and wait for `@@READY`. Panics (the test fails) when a prerequisite is
    /// missing or the guest does not come up.
    pub fn boot(self) -> Guest {
        let missing = missing_prerequisites();
        assert!(
            missing.is_empty(),
            "interop harness: cannot boot the kernel rxe guest; missing: {}.\n\
             Run `ROCE_KERNEL={} bash tests/interop/setup.sh` as root first (tests/run-all.sh does).",
            missing.join("; "),
            kernel()
        );
        match Guest::start(self) {
            Ok(g) => g,
            Err(e) => panic!("interop harness: {e}"),
        }
    }
}

/// A running guest and everything around it. Dropping it tears everything down.
pub struct Guest {
    /// The test's name.
    pub test: String,
    /// The network namespace holding tap0.
    pub ns: String,
    /// `target/interop/artefacts/<test>/`.
    pub artefacts: PathBuf,
    /// From starting qemu to `@@READY` on the console.
    pub boot_time: Duration,
    /// The MAC address of tap0 (the namespace kernel's, which answers the guest's ARP/ND).
    pub tap_mac: [u8; 6],
    /// `uname -r` of the guest (from `@@BOOT`), e.g. `6.1.0-57-amd64`.
    pub kernel_version: String,
    console: PathBuf,
    qemu: Option<Child>,
    tcpdump: Option<Child>,
    ctl: Option<UnixStream>,
    ctl_path: PathBuf,
    exec_seq: u32,
    torn_down: bool,
    // held for the guest's lifetime: one guest at a time
    _lock: File,
}

/// Make a child die with the thread that spawned it (a killed test leaves no qemu behind).
fn die_with_parent(cmd: &mut Command) {
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl Guest {
    fn start(b: GuestBuilder) -> Result<Guest, String> {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let dir = interop_dir();
        fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        // One guest of a kernel at a time on this machine, whichever work tree or test binary
        // asks: the tests of one run share it in turn. Runs of two kernels may overlap (the
        // test command runs 6.12's and sid's at once): a guest's CPU is busy mostly while it
        // boots, and a suite keeps about a quarter of two cores busy (16.5 min wall, 8.6 min
        // CPU for 6.12's, measured).
        let lock_path = std::env::temp_dir().join(format!("roce-interop-guest-{}.lock", kernel().name));
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| format!("{}: {e}", lock_path.display()))?;
        lock.lock().map_err(|e| format!("lock {}: {e}", lock_path.display()))?;
        remove_stale_namespaces();

        let kdir = kernel_dir();
        let artefacts = dir.join("artefacts").join(kernel().name).join(&b.test);
        let _ = fs::remove_dir_all(&artefacts);
        fs::create_dir_all(&artefacts).map_err(|e| format!("{}: {e}", artefacts.display()))?;

        // the initrd: base + this run's scenario archive (the kernel unpacks concatenated gzip cpios)
        let mut cpio = Cpio::default();
        cpio.file("scenario.sh", 0o755, b.scenario.as_bytes());
        if !b.binaries.is_empty() {
            for d in ["usr", "usr/local", "usr/local/bin"] {
                cpio.dir(d);
            }
            for (src, name) in &b.binaries {
                let data = fs::read(src).map_err(|e| format!("binary for the guest {}: {e}", src.display()))?;
                cpio.file(&format!("usr/local/bin/{name}"), 0o755, &data);
            }
        }
        let scenario_gz = gzip(&cpio.finish())?;
        let write = |name: &str, data: &[u8]| {
            let p = artefacts.join(name);
            fs::write(&p, data).map_err(|e| format!("{}: {e}", p.display()))
        };
        write("scenario.sh", b.scenario.as_bytes())?;
        write("scenario.cpio.gz", &scenario_gz)?;
        let base = fs::read(kdir.join("base.cpio.gz")).map_err(|e| format!("base.cpio.gz: {e}"))?;
        let initrd = artefacts.join("initrd.cpio.gz");
        write("initrd.cpio.gz", &[base, scenario_gz].concat())?;

        // the namespace and tap0
        let ns = format!("{NETNS_PREFIX}{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
        let tap_mac = fresh_mac();
        let mac_s = mac_string(&tap_mac);
        let ctl_path = std::env::temp_dir().join(format!("{ns}.ctl"));
        let _ = fs::remove_file(&ctl_path);
        let mut g = Guest {
            test: b.test.clone(),
            ns: ns.clone(),
            artefacts: artefacts.clone(),
            boot_time: Duration::ZERO,
            tap_mac,
            kernel_version: String::new(),
            console: artefacts.join("console.log"),
            qemu: None,
            tcpdump: None,
            ctl: None,
            ctl_path: ctl_path.clone(),
            exec_seq: 0,
            torn_down: false,
            _lock: lock,
        };
        ip(&["netns", "add", &ns])?;
        for args in [
            vec!["link", "set", "lo", "up"],
            vec!["tuntap", "add", "dev", TAP, "mode", "tap"],
            vec!["link", "set", TAP, "address", &mac_s],
            vec!["link", "set", TAP, "up"],
            vec!["addr", "add", "198.18.0.1/24", "dev", TAP],
            vec!["-6", "addr", "add", "fd00::1/64", "dev", TAP, "nodad"],
        ] {
            let mut a = vec!["-n", ns.as_str()];
            a.extend(args);
            ip(&a)?;
        }

        // tcpdump first, and wait until it listens
        let pcap = artefacts.join("tap0.pcap");
        let tcpdump_log = artefacts.join("tcpdump.log");
        let mut cmd = Command::new(tool("ip"));
        cmd.args(["netns", "exec", &ns])
            .arg(tool("tcpdump"))
            // -Z root: no switch to the tcpdump user (which would also clear PR_SET_PDEATHSIG);
            // -B: a 64 MiB capture buffer, so a burst (an RMPP window of 64 segments while the
            // machine is busy) is not "dropped by kernel" before tcpdump reads it
            .args(["-Z", "root", "-U", "--immediate-mode", "-B", "65536", "-n", "-s", "0", "-i", TAP, "-w", "-"])
            .stdin(Stdio::null())
            .stdout(File::create(&pcap).map_err(|e| format!("{}: {e}", pcap.display()))?)
            .stderr(File::create(&tcpdump_log).map_err(|e| format!("{}: {e}", tcpdump_log.display()))?);
        die_with_parent(&mut cmd);
        g.tcpdump = Some(cmd.spawn().map_err(|e| format!("tcpdump: {e}"))?);
        let t0 = Instant::now();
        loop {
            let log = fs::read_to_string(&tcpdump_log).unwrap_or_default();
            if log.contains("listening on") {
                break;
            }
            if let Some(st) = g.tcpdump.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                return Err(format!("tcpdump on {TAP} exited ({st}): {log}"));
            }
            if t0.elapsed() > Duration::from_secs(15) {
                return Err(format!("tcpdump on {TAP} did not start listening: {log}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }

        // qemu
        let qemu_args: Vec<String> = vec![
            "-accel".into(),
            "tcg".into(),
            "-cpu".into(),
            "max".into(),
            "-m".into(),
            b.memory_mb.to_string(),
            "-smp".into(),
            "1".into(),
            "-nographic".into(),
            "-no-reboot".into(),
            "-kernel".into(),
            kdir.join("vmlinuz").display().to_string(),
            "-initrd".into(),
            initrd.display().to_string(),
            "-append".into(),
            "console=ttyS0 panic=-1 quiet".into(),
            "-netdev".into(),
            format!("tap,id=n0,ifname={TAP},script=no,downscript=no"),
            "-device".into(),
            format!("virtio-net-pci,netdev=n0,mac={}", mac_string(&GUEST_MAC)),
            // ttyS0: the console on stdout (what -nographic does by default, but any explicit
            // serial port turns that default off); ttyS1: the control channel (host → scenario)
            "-serial".into(),
            "mon:stdio".into(),
            "-serial".into(),
            format!("unix:{},server=on,wait=off", ctl_path.display()),
        ];
        let qemu_bin = tool("qemu-system-x86_64");
        write(
            "qemu-cmdline.txt",
            format!("ip netns exec {ns} {} {}\n", qemu_bin.display(), qemu_args.join(" ")).as_bytes(),
        )?;
        let console = File::create(&g.console).map_err(|e| format!("{}: {e}", g.console.display()))?;
        let console_err = console.try_clone().map_err(|e| e.to_string())?;
        let mut cmd = Command::new(tool("ip"));
        cmd.args(["netns", "exec", &ns])
            .arg(&qemu_bin)
            .args(&qemu_args)
            .stdin(Stdio::null())
            .stdout(console)
            .stderr(console_err);
        die_with_parent(&mut cmd);
        let started = Instant::now();
        g.qemu = Some(cmd.spawn().map_err(|e| format!("qemu: {e}"))?);

        // the control channel (qemu creates the socket at once: wait=off)
        loop {
            match UnixStream::connect(&ctl_path) {
                Ok(s) => {
                    g.ctl = Some(s);
                    break;
                }
                Err(e) => {
                    if g.qemu_exited() || started.elapsed() > Duration::from_secs(10) {
                        return Err(format!(
                            "control socket {}: {e}; console:\n{}",
                            ctl_path.display(),
                            tail(&g.console_log(), 20)
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }

        g.wait_for("@@READY", b.boot_timeout)?;
        g.boot_time = started.elapsed();
        g.kernel_version = g
            .marker_lines("@@BOOT kernel=")
            .first()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|k| k.strip_prefix("kernel="))
            .unwrap_or("?")
            .to_string();
        let summary = format!(
            "boot_time_s {:.2}\nkernel {}\nnetns {ns}\ntap_mac {mac_s}\nguest_mac {}\n",
            g.boot_time.as_secs_f64(),
            g.kernel_version,
            mac_string(&GUEST_MAC)
        );
        write("boot.txt", summary.as_bytes())?;
        eprintln!(
            "interop: {}: kernel {} ready in {:.1} s (netns {ns}, artefacts {})",
            g.test,
            g.kernel_version,
            g.boot_time.as_secs_f64(),
            artefacts.display()
        );
        Ok(g)
    }

    fn qemu_exited(&mut self) -> bool {
        match self.qemu.as_mut() {
            Some(c) => !matches!(c.try_wait(), Ok(None)),
            None => true,
        }
    }

    /// The console (ttyS0) so far, with the guest's CRs removed.
    pub fn console_log(&self) -> String {
        let mut data = Vec::new();
        if let Ok(mut f) = File::open(&self.console) {
            let _ = f.read_to_end(&mut data);
        }
        String::from_utf8_lossy(&data).replace('\r', "")
    }

    /// Every console line that holds `marker`, from the marker on.
    pub fn marker_lines(&self, marker: &str) -> Vec<String> {
        self.console_log().lines().filter_map(|l| l.find(marker).map(|i| l[i..].to_string())).collect()
    }

    /// Wait until a console line holds `marker`; returns that line from the marker on. Fails
    /// at once when qemu has exited, and after `timeout`.
    pub fn wait_for(&mut self, marker: &str, timeout: Duration) -> Result<String, String> {
        let t0 = Instant::now();
        loop {
            let exited = self.qemu_exited();
            let log = self.console_log();
            // only whole lines: qemu may be in the middle of writing the last one
            let whole = &log[..log.rfind('\n').map_or(0, |i| i + 1)];
            if let Some(l) = whole.lines().find_map(|l| l.find(marker).map(|i| l[i..].to_string())) {
                return Ok(l);
            }
            if exited || t0.elapsed() > timeout {
                return Err(format!(
                    "{}: no console line with {marker:?} after {:.1} s{}; console ({}):\n{}",
                    self.test,
                    t0.elapsed().as_secs_f64(),
                    if exited { " (qemu exited)" } else { "" },
                    self.console.display(),
                    tail(&log, 40)
                ));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Send one line to the guest's scenario over ttyS1 (`host_wait WORD` returns on it).
    pub fn signal(&mut self, line: &str) {
        assert!(!line.contains('\n'), "one line at a time");
        let ctl = self.ctl.as_mut().expect("control channel");
        ctl.write_all(format!("{line}\n").as_bytes()).expect("write to the guest's ttyS1");
        ctl.flush().expect("flush the guest's ttyS1");
    }

    /// Read the guest's rxe counters now (the scenario must be in `serve`): ask for them
    /// (`counters TAG`) and return [`Guest::counters`]'s pairs.
    ///
    /// First it waits [`HW_STATS_LIFESPAN`]: ib_core answers a hw_counters read within
    /// `RDMA_HW_STATS_DEFAULT_LIFESPAN` (10 ms) of the last one from its cache
    /// (core/sysfs.c `update_hw_stats`), so a read soon after a frame, or after another read,
    /// could miss what the frame counted (seen once on 7.2.13 under TCG: a probe answered,
    /// `rcvd_pkts` unchanged).
    pub fn read_counters(&mut self, tag: &str, timeout: Duration) -> BTreeMap<String, u64> {
        std::thread::sleep(HW_STATS_LIFESPAN);
        self.signal(&format!("counters {tag}"));
        self.counters(tag, timeout)
    }

    /// Wait for `@@COUNTERS tag=TAG` (a scenario's `counters TAG` line, or
    /// [`Guest::read_counters`]) and return its name=value pairs.
    pub fn counters(&mut self, tag: &str, timeout: Duration) -> BTreeMap<String, u64> {
        let line = self.wait_for(&format!("@@COUNTERS tag={tag} "), timeout).unwrap_or_else(|e| panic!("{e}"));
        parse_counters(&line)
    }

    /// Run a shell command in the guest (the scenario must be in `serve`); returns its exit
    /// status and output (stdout and stderr).
    pub fn guest_exec(&mut self, cmd: &str, timeout: Duration) -> (i32, String) {
        assert!(!cmd.contains('\n'), "one line at a time");
        self.exec_seq += 1;
        let id = format!("x{}", self.exec_seq);
        self.signal(&format!("exec {id} {cmd}"));
        let end = self.wait_for(&format!("@@EXEC_END {id} rc="), timeout).unwrap_or_else(|e| panic!("{e}"));
        let rc = end.rsplit("rc=").next().and_then(|s| s.trim().parse().ok()).unwrap_or(-1);
        let log = self.console_log();
        let begin = format!("@@EXEC_BEGIN {id}");
        let endm = format!("@@EXEC_END {id} ");
        let out: Vec<&str> =
            log.lines().skip_while(|l| !l.contains(&begin)).skip(1).take_while(|l| !l.contains(&endm)).collect();
        (rc, out.join("\n"))
    }

    /// Run `sh -c cmd` inside the namespace (our host-side tools on tap0).
    pub fn exec_in_netns(&self, cmd: &str) -> Output {
        let mut c = Command::new(tool("ip"));
        crate::common::netns::default_signals(&mut c);
        c.args(["netns", "exec", &self.ns, "sh", "-c", cmd])
            .output()
            .unwrap_or_else(|e| panic!("ip netns exec {}: {e}", self.ns))
    }

    /// A host-side shell command started in the namespace (stdout and stderr piped), for a
    /// test that must serve it while it runs.
    pub fn spawn_in_netns(&self, cmd: &str) -> Child {
        let mut c = Command::new(tool("ip"));
        crate::common::netns::default_signals(&mut c);
        c.args(["netns", "exec", &self.ns, "sh", "-c", cmd])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("ip netns exec {}: {e}", self.ns))
    }

    /// (exit code, stdout+stderr) of a host-side shell command in the namespace.
    ///
    /// Every counters line a `roce` tool printed must say `send_errors 0`: a frame the device
    /// refused never reached the peer, so the peer's counts would not be what the test expects.
    pub fn run_in_netns(&self, cmd: &str) -> (i32, String) {
        let o = self.exec_in_netns(cmd);
        let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert_no_send_errors(cmd, &out);
        (o.status.code().unwrap_or(-1), out)
    }

    /// Run `f` on a thread that has entered the namespace (sockets it opens stay there).
    pub fn in_netns<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("/run/netns/{}", self.ns);
        std::thread::scope(|s| {
            s.spawn(|| {
                let ns = File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
                // Changes only this thread.
                nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET)
                    .unwrap_or_else(|e| panic!("setns {path}: {e}"));
                f()
            })
            .join()
            .expect("thread in the namespace panicked")
        })
    }

    /// A raw AF_PACKET socket bound to tap0 in the namespace.
    pub fn raw_socket(&self) -> RawSocket {
        self.in_netns(|| RawSocket::bind(TAP)).unwrap_or_else(|e| panic!("raw socket on {TAP}: {e}"))
    }

    /// The tcpdump capture of tap0 (complete after `finish`).
    pub fn pcap_path(&self) -> PathBuf {
        self.artefacts.join("tap0.pcap")
    }

    /// The end of a test that reads tap0's capture afterwards: `end` signalled to the
    /// scenario, [`Guest::finish`], and the complete capture's path and tap0's MAC (the
    /// source of our frames) returned.
    pub fn end_and_finish(mut self) -> (PathBuf, [u8; 6]) {
        self.signal("end");
        let (tap, mac) = (self.pcap_path(), self.tap_mac);
        self.finish();
        (tap, mac)
    }

    /// Wait for the scenario's end (`@@DONE`) and qemu's exit, then tear down. Panics when
    /// the guest does not finish within 60 s, or when the kernel printed one of
    /// [`KERNEL_TROUBLE`] (the artefacts keep the console and the capture).
    pub fn finish(mut self) {
        let r = self.wait_for("@@DONE", Duration::from_secs(60));
        if r.is_ok() {
            let t0 = Instant::now();
            while !self.qemu_exited() && t0.elapsed() < Duration::from_secs(20) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        self.teardown();
        if let Err(e) = r {
            panic!("{e}");
        }
        let trouble = kernel_trouble(&self.console_log());
        assert!(
            trouble.is_empty(),
            "{}: the guest kernel {} printed:\n{}\n(console and capture in {})",
            self.test,
            self.kernel_version,
            trouble.join("\n"),
            self.artefacts.display()
        );
    }

    /// Kill qemu, stop tcpdump (after it has written the last frames), delete the namespace,
    /// and write `counters.txt` (every @@COUNTERS line) to the artefacts. Idempotent.
    pub fn teardown(&mut self) {
        if self.torn_down {
            return;
        }
        self.torn_down = true;
        self.ctl = None;
        if let Some(mut q) = self.qemu.take() {
            if matches!(q.try_wait(), Ok(None)) {
                let _ = q.kill();
            }
            let _ = q.wait();
        }
        if let Some(mut t) = self.tcpdump.take() {
            std::thread::sleep(Duration::from_millis(300));
            // SAFETY: kill on the pid of our own child (ip netns exec has exec'd tcpdump).
            unsafe { libc::kill(t.id() as libc::pid_t, libc::SIGTERM) };
            let t0 = Instant::now();
            while matches!(t.try_wait(), Ok(None)) && t0.elapsed() < Duration::from_secs(3) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = t.kill();
            let _ = t.wait();
        }
        if let Err(e) = ip(&["netns", "del", &self.ns]) {
            eprintln!("interop: {e}");
        }
        let _ = fs::remove_file(&self.ctl_path);
        let counters: Vec<String> = self.marker_lines("@@COUNTERS");
        let _ = fs::write(self.artefacts.join("counters.txt"), counters.join("\n") + "\n");
    }
}

impl Guest {
    /// tshark's one-line summaries of the last `n` frames of tap0's capture: what was on the
    /// wire when a test failed, in the log itself (a CI machine's artefacts are gone with it).
    fn capture_tail(&self, n: usize) -> String {
        let pcap = self.pcap_path();
        match Command::new(crate::common::tshark()).args(["-n", "-t", "r", "-r"]).arg(&pcap).output() {
            Ok(o) => tail(&String::from_utf8_lossy(&o.stdout), n),
            Err(e) => format!("(tshark -r {}: {e})", pcap.display()),
        }
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        self.teardown();
        if std::thread::panicking() {
            eprintln!(
                "interop: {} failed; artefacts in {}; console tail:\n{}\nthe capture's last frames (tshark):\n{}",
                self.test,
                self.artefacts.display(),
                tail(&self.console_log(), 25),
                self.capture_tail(30)
            );
        }
    }
}

/// `aa:bb:cc:dd:ee:ff`.
/// Longer than ib_core's hw_counters cache lifespan (10 ms), with room for a TCG guest's
/// scheduling: see [`Guest::counters`].
pub const HW_STATS_LIFESPAN: Duration = Duration::from_millis(100);

pub fn mac_string(m: &[u8; 6]) -> String {
    roce_wire::MacAddr(*m).to_string()
}

/// The name=value pairs of a `@@COUNTERS tag=… name=value …` line (tag and non-numbers left out).
pub fn parse_counters(line: &str) -> BTreeMap<String, u64> {
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .filter_map(|(k, v)| v.parse().ok().map(|v| (k.to_string(), v)))
        .collect()
}

/// The GIDs the guest printed at boot (`@@GID INDEX GID TYPE`), as addresses.
pub fn guest_gids(console: &str) -> Vec<IpAddr> {
    console
        .lines()
        .filter_map(|l| l.find("@@GID ").map(|i| &l[i..]))
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter_map(|g| g.parse::<Ipv6Addr>().ok())
        .map(|a| match a.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(a),
        })
        .collect()
}

// ------------------------------------------------------------------------------------- raw socket

/// A raw AF_PACKET socket bound to one interface (every frame in and out of it).
pub struct RawSocket {
    fd: OwnedFd,
    ifindex: i32,
}

/// A frame received on a [`RawSocket`], with the kernel's packet type (`PACKET_HOST` 0, …,
/// `PACKET_OUTGOING` 4).
pub struct Received {
    /// Ethernet frame.
    pub data: Vec<u8>,
    /// `sll_pkttype`.
    pub pkttype: u8,
}

impl RawSocket {
    /// Open and bind (call it inside the namespace: [`Guest::raw_socket`]).
    pub fn bind(ifname: &str) -> io::Result<RawSocket> {
        let info = roce_net::raw::interface(ifname)?;
        let fd = roce_net::raw::packet_socket(&info, false)?;
        let ifindex = info.index as i32;
        Ok(RawSocket { fd, ifindex })
    }

    /// Send one Ethernet frame as it is.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: frame is a valid buffer of frame.len() bytes.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n as usize != frame.len() {
            return Err(io::Error::other(format!("short send: {n} of {} bytes", frame.len())));
        }
        Ok(())
    }

    /// Receive one frame, waiting at most `timeout`; `None` on timeout.
    pub fn recv(&self, timeout: Duration) -> io::Result<Option<Received>> {
        let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(None) } else { Err(e) };
        }
        if r == 0 {
            return Ok(None);
        }
        let mut buf = vec![0u8; 65536];
        // SAFETY: as for bind.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: buf, sll and len are valid for the sizes given.
        let n = unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
                (&mut sll as *mut libc::sockaddr_ll).cast(),
                &mut len,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        buf.truncate(n as usize);
        Ok(Some(Received { data: buf, pkttype: sll.sll_pkttype }))
    }

    /// Receive frames coming in from the wire (not our own) until `want` returns true for one,
    /// or `timeout` passes; returns every incoming frame seen, the last one the match.
    pub fn recv_until(&self, timeout: Duration, mut want: impl FnMut(&[u8]) -> bool) -> (bool, Vec<Vec<u8>>) {
        let t0 = Instant::now();
        let mut seen = Vec::new();
        while let Some(left) = timeout.checked_sub(t0.elapsed()) {
            match self.recv(left) {
                Ok(Some(r)) if r.pkttype != libc::PACKET_OUTGOING => {
                    let hit = want(&r.data);
                    seen.push(r.data);
                    if hit {
                        return (true, seen);
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => panic!("recv on {TAP}: {e}"),
            }
        }
        (false, seen)
    }

    /// The interface index it is bound to.
    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }
}

/// The static `roce` the guest runs (its sa-agent): tests/run-all.sh builds it; a missing one
/// fails the test with the command that builds it.
pub fn static_roce() -> PathBuf {
    let p = repo_root().join("target/x86_64-unknown-linux-gnu/release/roce");
    assert!(
        p.exists(),
        "the guest needs a static roce: RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --target x86_64-unknown-linux-gnu --bin roce (tests/run-all.sh does it)"
    );
    p
}

/// A command line running the host's `roce` (this package's binary) with `args`.
pub fn roce(args: &str) -> String {
    format!("{} {args}", env!("CARGO_BIN_EXE_roce"))
}

impl Guest {
    /// Run `cmd` in the guest (each run within `exec_budget`) every `every` until its output
    /// holds `needle` or `timeout` has passed; the last output either way.
    pub fn wait_for_output(
        &mut self,
        cmd: &str,
        needle: &str,
        timeout: Duration,
        exec_budget: Duration,
        every: Duration,
    ) -> String {
        let end = Instant::now() + timeout;
        loop {
            let (_, out) = self.guest_exec(cmd, exec_budget);
            if out.contains(needle) || Instant::now() >= end {
                return out;
            }
            std::thread::sleep(every);
        }
    }
}

/// The fields `fields` (tab-separated, one line a frame) of the frames of `pcap` that match
/// the display filter `filter`, as tshark decodes them.
pub fn tshark_fields(pcap: &Path, filter: &str, fields: &[&str]) -> String {
    let mut c = Command::new(crate::common::tshark());
    c.args(["-n", "-r"]).arg(pcap).args(["-Y", filter, "-T", "fields"]);
    for f in fields {
        c.args(["-e", f]);
    }
    String::from_utf8_lossy(&c.output().unwrap_or_else(|e| panic!("tshark: {e}")).stdout).to_string()
}

/// A counter of the guest's `rdma statistic show` output (`u64::MAX` when missing).
pub fn rdma_stat(stats: &str, name: &str) -> u64 {
    let mut it = stats.split_whitespace().skip_while(|w| *w != name);
    it.nth(1).and_then(|v| v.parse().ok()).unwrap_or(u64::MAX)
}

/// The closing lines a finished Debian 12 `rping` prints to stderr (its ping data aside).
const RPING_CLOSING: [&str; 3] =
    ["server DISCONNECT EVENT...", "client DISCONNECT EVENT...", "wait for RDMA_READ_ADV state 10"];

/// rping's own cm-thread race, as it ends: the main thread destroys the event channel between
/// the thread's last `rdma_ack_cm_event` and its next `rdma_get_cm_event`, which fails with
/// EBADF, and the thread calls `exit(-1)` after a successful test. rdma-core fixed it in
/// f3ae6534a ("rping: terminate CM event thread before exiting", rdma-core 61); Debian 12's
/// rping (rdma-core 44) has it. Seen once on 6.1 in CI (2026-12-07) after all ten pings and
/// the DREQ/DREP exchange. Recognised narrowly: exit 255, the DISCONNECT event first, the
/// EBADF line, and otherwise only what a successful run prints.
pub fn rping_cm_thread_race(log: &str) -> bool {
    let mut disconnected = false;
    let mut raced = false;
    for line in log.lines().filter(|l| !l.contains("ping data: rdma-ping-")) {
        match line {
            l if l.ends_with("DISCONNECT EVENT...") && RPING_CLOSING.contains(&l) => disconnected = true,
            l if RPING_CLOSING.contains(&l) => {}
            "rdma_get_cm_event: Bad file descriptor" if disconnected => raced = true,
            "rc=255" if raced => {}
            _ => return false,
        }
    }
    raced && log.contains("rc=255")
}

/// The guest's rping ended as a successful run does: exit 0, or (Debian 12's rping) exit 255
/// through [`rping_cm_thread_race`] alone. The callers still count every ping it printed.
pub fn guest_rping_succeeded(log: &str) -> bool {
    if log.lines().any(|l| l == "rc=0") {
        return true;
    }
    let raced = rping_cm_thread_race(log);
    if raced {
        println!("interop: the guest's rping exited 255 through its own cm-thread race (rdma-core f3ae6534a)");
    }
    raced
}

/// `cmd` as `nobody` without any capability or supplementary group (the udp transport's
/// tests: what a user without privilege can do).
pub fn as_nobody(cmd: &str) -> String {
    format!("setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all {cmd}")
}

/// (exit code, stdout+stderr) of a tool started with [`Guest::spawn_in_netns`] as `cmd`, once
/// it has ended; its counters must say `send_errors 0`, as for [`Guest::run_in_netns`].
pub fn wait_tool(cmd: &str, child: Child) -> (i32, String) {
    let o = child.wait_with_output().unwrap_or_else(|e| panic!("{cmd}: {e}"));
    let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_no_send_errors(cmd, &out);
    (o.status.code().unwrap_or(-1), out)
}

/// Fail when a tool's output reports device send errors (`send_errors N`, N > 0).
pub fn assert_no_send_errors(cmd: &str, out: &str) {
    for (at, _) in out.match_indices("send_errors ") {
        let n: String = out[at + "send_errors ".len()..].chars().take_while(char::is_ascii_digit).collect();
        assert!(n.is_empty() || n == "0", "{cmd}: the device refused frames (send_errors {n}):\n{out}");
    }
}

/// Resetting the peer between replays (minimising a liveness loss: tests/interop/fuzz.rs).
impl Guest {
    /// Re-create the guest's rxe device (`rdma link delete rxe0`, `rdma link add rxe0 type rxe
    /// netdev eth0`) and wait until its port is ACTIVE with the IPv4 and IPv6 GIDs again: a
    /// fresh GSI QP (at the same pool index, the QP pool being per device) and hw counters from
    /// 0. The cheapest reset that revives a GSI QP in the error state (a reboot takes ~7 s and
    /// a new namespace; reloading rdma_rxe needs every user of the device gone). The scenario
    /// must be in `serve`. Returns how long it took, or the guest's output when it failed.
    pub fn recreate_rxe(&mut self) -> Result<Duration, String> {
        let t0 = Instant::now();
        let cmd = "rdma link delete rxe0 && rdma link add rxe0 type rxe netdev eth0 && . /lib/interop.sh && \
                   i=0; until grep -q ACTIVE $RXE_PORT/state && gids | grep -q ':ffff:c612:0002' && \
                   gids | grep -q '^@@GID [0-9]* fd00:'; do i=$((i+1)); [ $i -gt 200 ] && exit 9; sleep 0.05; done";
        let (rc, out) = self.guest_exec(cmd, Duration::from_secs(60));
        if rc == 0 {
            Ok(t0.elapsed())
        } else {
            Err(format!("re-creating rxe0 failed (rc {rc}): {out}"))
        }
    }
}
