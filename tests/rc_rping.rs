//! `roce rping` against `roce rping` on a veth pair in a network namespace this test creates
//! (198.18.0.0/15 only): SEND, RDMA READ and RDMA WRITE in both roles, both ends exit 0 and
//! print the ping data. Needs root (CI runs as root); a missing capability fails.
//! The same tool against the kernel's rping is tests/interop_rc.rs.

use std::process::{Command, Stdio};
use std::time::Duration;

struct Netns(String);

impl Netns {
    fn new() -> Netns {
        let name = format!("roce-rping-{}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).status();
        let ok = Command::new("ip").args(["netns", "add", &name]).status().map(|s| s.success()).unwrap_or(false);
        assert!(ok, "cannot create a network namespace: this test needs root (CI runs as root)");
        let ns = Netns(name);
        ns.sh("ip link set lo up; ip link add v0 type veth peer name v1; ip link set v0 up; ip link set v1 up");
        ns.sh("ip addr add 198.18.3.10/24 dev v0; ip addr add 198.18.3.11/24 dev v1");
        ns
    }
    fn sh(&self, cmd: &str) {
        let st = Command::new("ip").args(["netns", "exec", &self.0, "sh", "-c", cmd]).status().unwrap();
        assert!(st.success(), "{cmd}");
    }
    fn roce(&self, args: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0, env!("CARGO_BIN_EXE_roce")]).args(args.split_whitespace());
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn rping_between_two_stacks_on_veth() {
    let ns = Netns::new();
    let srv = ns.roce("rping -s -a 198.18.3.2 --iface v1 -v -S 3000 --timeout 20").spawn().unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let cli = ns.roce("rping -c -a 198.18.3.2 -I 198.18.3.1 --iface v0 -C 5 -S 3000 -v -V").output().unwrap();
    let srv = srv.wait_with_output().unwrap();
    let c = format!("{}{}", String::from_utf8_lossy(&cli.stdout), String::from_utf8_lossy(&cli.stderr));
    let s = format!("{}{}", String::from_utf8_lossy(&srv.stdout), String::from_utf8_lossy(&srv.stderr));
    assert!(cli.status.success(), "client:\n{c}\nserver:\n{s}");
    assert!(srv.status.success(), "server:\n{s}\nclient:\n{c}");
    assert_eq!(c.lines().filter(|l| l.starts_with("ping data: rdma-ping-")).count(), 5, "{c}");
    assert_eq!(s.lines().filter(|l| l.starts_with("server ping data: rdma-ping-")).count(), 5, "{s}");
    // Usage errors: a size outside rping's bounds names them; -c without -I.
    let o = ns.roce("rping -c -a 198.18.3.2 --iface v0 -S 10").output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("26 to 65535"));
    let o = ns.roce("rping -c -a 198.18.3.2 --iface v0").output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = ns.roce("rping -c -a 198.18.3.2 -I 198.18.3.1 --iface nosuch0").output().unwrap();
    assert_eq!(o.status.code(), Some(3));
}
