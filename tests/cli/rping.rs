//! `roce rping` against `roce rping` on a veth pair in a network namespace this test creates
//! (198.18.0.0/15 only): SEND, RDMA READ and RDMA WRITE in both roles, both ends exit 0 and
//! print the ping data. Needs root (CI runs as root); a missing capability fails.
//! The same tool against the kernel's rping is tests/interop/rc.rs.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::netns::Netns;

/// Two stacks' ends: v0 (198.18.3.10) ↔ v1 (198.18.3.11).
fn veth_pair() -> Netns {
    let ns = Netns::new("rping");
    ns.sh("ip link add v0 type veth peer name v1; ip link set v0 up; ip link set v1 up");
    ns.sh("ip addr add 198.18.3.10/24 dev v0; ip addr add 198.18.3.11/24 dev v1");
    ns
}

/// `roce ARGS` (split at white space) in the namespace, its output piped.
fn roce(ns: &Netns, args: &str) -> Command {
    let mut c = ns.roce(args.split_whitespace());
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

#[test]
fn rping_between_two_stacks_on_veth() {
    let ns = veth_pair();
    let srv = roce(&ns, "rping -s -a 198.18.3.2 --iface v1 -v -S 3000 --timeout 20").spawn().unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let cli = roce(&ns, "rping -c -a 198.18.3.2 -I 198.18.3.1 --iface v0 -C 5 -S 3000 -v -V").output().unwrap();
    let srv = srv.wait_with_output().unwrap();
    let c = format!("{}{}", String::from_utf8_lossy(&cli.stdout), String::from_utf8_lossy(&cli.stderr));
    let s = format!("{}{}", String::from_utf8_lossy(&srv.stdout), String::from_utf8_lossy(&srv.stderr));
    assert!(cli.status.success(), "client:\n{c}\nserver:\n{s}");
    assert!(srv.status.success(), "server:\n{s}\nclient:\n{c}");
    assert_eq!(c.lines().filter(|l| l.starts_with("ping data: rdma-ping-")).count(), 5, "{c}");
    assert_eq!(s.lines().filter(|l| l.starts_with("server ping data: rdma-ping-")).count(), 5, "{s}");
    // Usage errors: a size outside rping's bounds names them; -c without -I.
    let o = roce(&ns, "rping -c -a 198.18.3.2 --iface v0 -S 10").output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("26 to 65535"));
    let o = roce(&ns, "rping -c -a 198.18.3.2 --iface v0").output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = roce(&ns, "rping -c -a 198.18.3.2 -I 198.18.3.1 --iface nosuch0").output().unwrap();
    assert_eq!(o.status.code(), Some(3));
}
