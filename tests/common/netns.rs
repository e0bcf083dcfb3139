//! A network namespace a test creates for itself, removed on drop. Needs root (CI runs as root);
//! a missing capability fails the test.

use std::ffi::OsStr;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// A network namespace of this process, named `roce-<tag>-<pid>-<n>`: tests running in parallel
/// threads of one binary never share one, whatever their tags.
pub struct Netns(pub String);

impl Netns {
    /// A fresh namespace with only `lo`, up.
    pub fn new(tag: &str) -> Netns {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let name = format!("roce-{tag}-{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
        let _ = Command::new("ip").args(["netns", "del", &name]).status();
        let ok = Command::new("ip").args(["netns", "add", &name]).status().map(|s| s.success()).unwrap_or(false);
        assert!(ok, "cannot create a network namespace: this test needs root (CI runs as root)");
        let ns = Netns(name);
        ns.sh("ip link set lo up");
        ns
    }

    /// A fresh namespace with a veth pair (veth0 ↔ veth1, both up), IPv6 off so that the
    /// kernel sends nothing of its own.
    pub fn veth_pair(tag: &str) -> Netns {
        let ns = Netns::new(tag);
        ns.sh("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1; \
               ip link add veth0 type veth peer name veth1; ip link set veth0 up; ip link set veth1 up");
        ns
    }

    /// Hosts on one segment: veth0 … veth{n-1}, each paired with a port of a bridge (raw
    /// sockets on one interface do not see each other's frames, as on a real NIC), vethI with
    /// the kernel's own address 198.18.1.1I/24.
    pub fn bridge(tag: &str, n: usize) -> Netns {
        let ns = Netns::new(tag);
        ns.sh("ip link add br0 type bridge; ip link set br0 type bridge mcast_snooping 0; ip link set br0 up");
        for i in 0..n {
            ns.sh(&format!("ip link add veth{i} type veth peer name port{i}; ip link set port{i} master br0; ip link set port{i} up; ip link set veth{i} up"));
            ns.sh(&format!("ip addr add 198.18.1.1{i}/24 dev veth{i}"));
        }
        ns
    }

    /// Run `sh -c cmd` in the namespace; a failure fails the test.
    pub fn sh(&self, cmd: &str) {
        let st = Command::new("ip").args(["netns", "exec", &self.0, "sh", "-c", cmd]).status().unwrap();
        assert!(st.success(), "{cmd}");
    }

    /// `program` to run in the namespace (`ip netns exec` execs it: the child's pid is the
    /// program's).
    ///
    /// SIGINT, SIGTERM and SIGHUP are set back to their default action in the child: a test
    /// run started in the background of a shell without job control inherits SIGINT ignored,
    /// and the tools keep a signal ignored at start (as nohup expects), so the tests that
    /// stop a tool with a signal would see it ignored.
    pub fn cmd(&self, program: impl AsRef<OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0]).arg(program);
        default_signals(&mut c);
        c
    }

    /// `roce ARGS` to run in the namespace.
    pub fn roce<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(&self, args: I) -> Command {
        let mut c = self.cmd(env!("CARGO_BIN_EXE_roce"));
        c.args(args);
        c
    }
}

/// Have `cmd`'s child start with SIGINT, SIGTERM and SIGHUP at their default action, whatever
/// this test process inherited.
pub fn default_signals(cmd: &mut Command) {
    // SAFETY: signal(2) is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(|| {
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        });
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}
