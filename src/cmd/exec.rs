//! `roce exec`: run an unmodified RDMA program on roce. The program finds roce's
//! `libibverbs.so.1` and `librdmacm.so.1` (one library, carried inside this binary and
//! written out once per version) first on its library path, and the port in the environment
//! (spec/capi.md, "Configuration"); `roce exec` then replaces itself with the program, as
//! `env` does, so the program's PID is the one the caller started. Bad configuration is said
//! in one line, with exit 2 (usage) or 3 (cannot run here), before the program runs.

use std::ffi::OsString;
use std::io::Write as _;
use std::net::IpAddr;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::plumbing::exit;
use crate::plumbing::options::unicast_mac;
use crate::plumbing::port::{has_cap_net_raw, Transport};

/// The C library, built by build.rs (crates/roce-verbs relinked with rdma-core's version
/// nodes); empty in the nested build that makes it.
static LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libroce_verbs.so"));

/// The sonames the library answers to (libmlx5 and libefa: perftest links them and calls them
/// only for their vendors' devices).
pub const SONAMES: [&str; 4] = ["libibverbs.so.1", "librdmacm.so.1", "libmlx5.so.1", "libefa.so.1"];

/// Run an unmodified rdma-core program (mckey, udaddy, …) over roce, with no RDMA device.
///
/// Puts roce's libibverbs.so.1 and librdmacm.so.1 first on the program's library path
/// (LD_LIBRARY_PATH after it), passes the port in ROCE_* environment variables and replaces
/// itself with the program. Without CAP_NET_RAW the udp transport is the default: -I must then
/// be one of the kernel's addresses on the interface.
///
/// Example: roce exec -I 198.18.0.1 --sa 198.18.0.2 -- mckey -m 239.1.2.3 -s -C 5
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// The stack's address (ROCE_ADDR).
    #[arg(short = 'I', long = "addr", value_name = "ADDR", required_unless_present = "print_lib_dir")]
    pub addr: Option<IpAddr>,
    /// The interface (ROCE_IFACE; default: the one whose subnet holds ADDR).
    #[arg(long, value_name = "IF")]
    pub iface: Option<String>,
    /// The SA's address (ROCE_SA): joins and leaves also go to it as SubnAdmSet/Delete.
    #[arg(long, value_name = "ADDR")]
    pub sa: Option<IpAddr>,
    /// How frames travel (ROCE_TRANSPORT): raw needs CAP_NET_RAW; udp is a kernel UDP socket.
    #[arg(long, value_enum, value_name = "raw|udp")]
    pub transport: Option<Transport>,
    /// The stack's own MAC (ROCE_MAC; raw transport only).
    #[arg(long, value_parser = unicast_mac, value_name = "MAC")]
    pub mac: Option<[u8; 6]>,
    /// Capture every frame of the stack to this pcap (ROCE_PCAP).
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// Print every frame on stderr (ROCE_VERBOSE=1).
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Congestion control of the program's connected QPs (ROCE_CC): off (the library's
    /// default, as rxe) or dcqcn.
    #[arg(long, value_enum)]
    pub cc: Option<crate::plumbing::options::CcArg>,
    /// Send RC FLUSH requests with the ICRC Linux rxe computes for them, and accept either
    /// (ROCE_RXE_FLUSH_ICRC=1): rxe (6.2 on) drops a FLUSH with the IBA's ICRC unanswered
    /// (spec/kernel-findings.md §6).
    #[arg(long)]
    pub rxe_flush_icrc: bool,
    /// Print the directory that holds the library (for LD_LIBRARY_PATH) and exit.
    #[arg(long)]
    pub print_lib_dir: bool,
    /// The program and its arguments.
    #[arg(last = true, value_name = "PROGRAM ARGS", required_unless_present = "print_lib_dir")]
    pub program: Vec<OsString>,
}

const TOOL: &str = "roce exec";

/// Run `roce exec`.
pub fn run(a: Args) -> ExitCode {
    if LIBRARY.is_empty() {
        eprintln!("{TOOL}: this roce was built without its C library (ROCE_VERBS_NESTED was set)");
        return ExitCode::from(exit::ENVIRONMENT);
    }
    let dir = match install_library() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{TOOL}: cannot write the library: {e}");
            return ExitCode::from(exit::ENVIRONMENT);
        }
    };
    if a.print_lib_dir {
        println!("{}", dir.display());
        return ExitCode::SUCCESS;
    }
    let env = match environment(&a) {
        Ok(env) => env,
        Err((code, msg)) => {
            eprintln!("{TOOL}: {msg}");
            return ExitCode::from(code);
        }
    };
    let mut path = dir.into_os_string();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|v| !v.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let mut cmd = std::process::Command::new(&a.program[0]);
    cmd.args(&a.program[1..]).env("LD_LIBRARY_PATH", path);
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    use std::os::unix::process::CommandExt;
    let e = cmd.exec();
    eprintln!("{TOOL}: {}: {e}", a.program[0].to_string_lossy());
    ExitCode::from(if e.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 })
}

type Env = Vec<(&'static str, Option<OsString>)>;

/// The ROCE_* variables for the program, after the checks the library would otherwise make
/// at its first call (so a mistake is said here, once, before the program runs).
fn environment(a: &Args) -> Result<Env, (u8, String)> {
    let addr = a.addr.ok_or((exit::USAGE, "give -I ADDR".to_string()))?;
    if let Some(sa) = a.sa {
        if sa.is_ipv4() != addr.is_ipv4() {
            return Err((exit::USAGE, format!("--sa {sa} and -I {addr} are of different families")));
        }
    }
    let transport = a.transport.unwrap_or_else(Transport::default_here);
    if a.mac.is_some() && transport == Transport::Udp {
        return Err((
            exit::USAGE,
            "--mac needs --transport raw: a UDP socket sends from the interface's own MAC".into(),
        ));
    }
    let ifaces =
        roce_net::raw::interfaces().map_err(|e| (exit::ENVIRONMENT, format!("cannot list the interfaces: {e}")))?;
    let iface = match &a.iface {
        Some(i) => ifaces.iter().find(|f| &f.name == i).ok_or_else(|| {
            let names: Vec<&str> = ifaces.iter().map(|f| f.name.as_str()).collect();
            (exit::ENVIRONMENT, format!("no interface named {i:?} (interfaces here: {})", names.join(", ")))
        })?,
        None => crate::plumbing::port::interface_for(&ifaces, addr)
            .ok_or((exit::ENVIRONMENT, format!("no interface has {addr} or its subnet: give --iface")))?,
    };
    match transport {
        Transport::Raw if !has_cap_net_raw() => {
            return Err((exit::ENVIRONMENT, "--transport raw needs CAP_NET_RAW (run as root, or use --transport udp)".into()))
        }
        Transport::Udp if !iface.ips.iter().any(|(ip, _)| *ip == addr) => {
            return Err((
                exit::ENVIRONMENT,
                format!(
                    "udp transport: {addr} is not an address of {} (a UDP socket sends from the kernel's own addresses: add it with `ip addr add`, or use --transport raw)",
                    iface.name
                ),
            ))
        }
        _ => {}
    }
    let os = |s: String| Some(OsString::from(s));
    Ok(vec![
        ("ROCE_ADDR", os(addr.to_string())),
        ("ROCE_IFACE", os(iface.name.clone())),
        ("ROCE_SA", a.sa.map(|s| s.to_string().into())),
        (
            "ROCE_TRANSPORT",
            os(match transport {
                Transport::Raw => "raw".into(),
                Transport::Udp => "udp".into(),
            }),
        ),
        ("ROCE_MAC", a.mac.map(|m| roce_wire::MacAddr(m).to_string().into())),
        ("ROCE_PCAP", a.pcap.as_ref().map(|p| p.as_os_str().to_owned())),
        ("ROCE_VERBOSE", a.verbose.then(|| "1".into())),
        (
            "ROCE_CC",
            a.cc.map(|c| match c {
                crate::plumbing::options::CcArg::Off => "off".into(),
                crate::plumbing::options::CcArg::Dcqcn => "dcqcn".into(),
            }),
        ),
        ("ROCE_RXE_FLUSH_ICRC", a.rxe_flush_icrc.then(|| "1".into())),
    ])
}

/// FNV-1a of the library: its directory's name, so that each build has its own.
fn digest(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// Where the library may go, in order: $XDG_RUNTIME_DIR/roce, $HOME/.cache/roce, and
/// /tmp/roce-<uid> (directories of this user's, mode 0700): the first that can be written.
fn base_dirs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty() && Path::new(d).is_dir()) {
        out.push(PathBuf::from(d).join("roce"));
    }
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty() && Path::new(h).is_dir()) {
        out.push(PathBuf::from(h).join(".cache").join("roce"));
    }
    // SAFETY: getuid has no preconditions.
    out.push(PathBuf::from(format!("/tmp/roce-{}", unsafe { libc::getuid() })));
    out
}

/// Write the library into the first usable base directory (see [`base_dirs`]).
pub fn install_library() -> std::io::Result<PathBuf> {
    let mut last = None;
    for base in base_dirs() {
        match install_library_in(&base) {
            Ok(d) => return Ok(d),
            Err(e) => last = Some(std::io::Error::new(e.kind(), format!("{}: {e}", base.display()))),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no directory to write to")))
}

/// Write the library and its soname links once under `base` (atomically: a temporary name,
/// then rename); returns the directory.
fn install_library_in(base: &Path) -> std::io::Result<PathBuf> {
    let dir = base.join(format!("lib-{}-{:016x}", env!("CARGO_PKG_VERSION"), digest(LIBRARY)));
    let lib = dir.join("libroce_verbs.so");
    let complete = lib.is_file()
        && std::fs::metadata(&lib).map(|m| m.len() == LIBRARY.len() as u64).unwrap_or(false)
        && SONAMES.iter().all(|s| dir.join(s).exists());
    if complete {
        return Ok(dir);
    }
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
    let meta = std::fs::metadata(&dir)?;
    use std::os::unix::fs::MetadataExt;
    // SAFETY: getuid has no preconditions.
    if meta.uid() != unsafe { libc::getuid() } {
        return Err(std::io::Error::other(format!("{} belongs to another user", dir.display())));
    }
    let tmp = dir.join(format!(".libroce_verbs.so.{}", std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(LIBRARY)?;
        f.set_permissions(std::fs::Permissions::from_mode(0o755))?;
    }
    std::fs::rename(&tmp, &lib)?;
    for s in SONAMES {
        let link = dir.join(s);
        let tmp = dir.join(format!(".{s}.{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink("libroce_verbs.so", &tmp)?;
        std::fs::rename(&tmp, &link)?;
    }
    Ok(dir)
}
