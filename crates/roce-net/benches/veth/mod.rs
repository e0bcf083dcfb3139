//! What the veth benchmarks share: two network namespaces joined by a veth pair (v1 in the
//! first, v2 in the second) that the bench creates and removes, entering a namespace on a
//! thread, and a thread's CPU time.

use std::fs::File;
use std::net::Ipv4Addr;
use std::process::Command;
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
