//! Raw sockets for real: two stacks (and an SA) on the two ends of a veth pair inside a
//! network namespace this test creates (198.18.0.0/15 only). The kernel's own addresses on the
//! veth ends must not interfere. Needs root (CI runs as root); a missing capability fails.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = format!("roce-{tag}-{}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).status();
        let ok = Command::new("ip").args(["netns", "add", &name]).status().map(|s| s.success()).unwrap_or(false);
        assert!(ok, "cannot create a network namespace: this test needs root (CI runs as root)");
        let ns = Netns(name);
        // Three hosts on one segment: veth0, veth1, veth2, each paired with a port of a bridge
        // (raw sockets on one interface do not see each other's frames, as on a real NIC).
        ns.sh("ip link set lo up; ip link add br0 type bridge; ip link set br0 type bridge mcast_snooping 0; ip link set br0 up");
        for i in 0..3 {
            ns.sh(&format!("ip link add veth{i} type veth peer name port{i}; ip link set port{i} master br0; ip link set port{i} up; ip link set veth{i} up"));
            // The kernel's own addresses on the same link as the stacks' addresses.
            ns.sh(&format!("ip addr add 198.18.1.1{i}/24 dev veth{i}"));
        }
        ns
    }

    fn sh(&self, cmd: &str) {
        let st = Command::new("ip").args(["netns", "exec", &self.0, "sh", "-c", cmd]).status().unwrap();
        assert!(st.success(), "{cmd}");
    }

    fn roce(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0, env!("CARGO_BIN_EXE_roce")]).args(args);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn spawn(mut c: Command) -> Child {
    c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

fn finish(c: Child) -> (bool, String) {
    let Output { status, stdout, stderr } = c.wait_with_output().unwrap();
    (status.success(), format!("{}{}", String::from_utf8_lossy(&stdout), String::from_utf8_lossy(&stderr)))
}

#[test]
fn join_send_receive_leave_over_veth_with_an_sa() {
    let ns = Netns::new("veth");
    let dir = common::artefact_dir("net_veth");
    let pcap: PathBuf = dir.join("sender.pcap");
    let sa = spawn(ns.roce(&["sa-server", "--iface", "veth1", "--ip", "198.18.1.2", "--duration", "12"]));
    std::thread::sleep(Duration::from_millis(300));
    let rx = spawn(ns.roce(&[
        "mckey",
        "-m",
        "239.1.2.3",
        "-b",
        "198.18.1.3",
        "--iface",
        "veth2",
        "--sa",
        "198.18.1.2",
        "-r",
        "-C",
        "5",
        "--leave-after",
        "6",
    ]));
    std::thread::sleep(Duration::from_millis(1500));
    let tx = ns
        .roce(&[
            "mckey",
            "-m",
            "239.1.2.3",
            "-b",
            "198.18.1.1",
            "--iface",
            "veth0",
            "--sa",
            "198.18.1.2",
            "-s",
            "-C",
            "5",
            "--leave-after",
            "1",
            "--pcap",
        ])
        .arg(&pcap)
        .output()
        .unwrap();
    let tx_out = String::from_utf8_lossy(&tx.stdout).to_string() + &String::from_utf8_lossy(&tx.stderr);
    let (rx_ok, rx_out) = finish(rx);
    let (_, sa_out) = finish(sa);
    std::fs::write(dir.join("sender.txt"), &tx_out).unwrap();
    std::fs::write(dir.join("receiver.txt"), &rx_out).unwrap();
    std::fs::write(dir.join("sa.txt"), &sa_out).unwrap();
    assert!(tx.status.success(), "sender:\n{tx_out}");
    assert!(tx_out.contains("event: MULTICAST_JOIN") && tx_out.contains("event: MULTICAST_LEFT"), "{tx_out}");
    assert!(rx_ok, "receiver:\n{rx_out}");
    assert!(rx_out.contains("received 5 lost 0"), "{rx_out}");
    // The capture decodes in tshark and in roce decode without errors.
    let out = Command::new(common::tshark())
        .args(["-n", "-r"])
        .arg(&pcap)
        .args(["-Y", "_ws.malformed || _ws.expert.severity >= \"error\"", "-T", "fields", "-e", "frame.number"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "tshark flags: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let dec = Command::new(env!("CARGO_BIN_EXE_roce")).args(["decode"]).arg(&pcap).output().unwrap();
    let text = String::from_utf8_lossy(&dec.stdout);
    assert!(
        text.contains("SubnAdmSet(MCMemberRecord)")
            && text.contains("SubnAdmDelete(MCMemberRecord)")
            && text.contains("SubnAdmDeleteResp"),
        "{text}"
    );
    assert!(!text.contains("malformed") && !text.contains("ICRC bad"), "{text}");
}

#[test]
fn sa_query_gets_an_error_status_and_clear_errors() {
    let ns = Netns::new("saq");
    let sa = spawn(ns.roce(&["sa-server", "--iface", "veth1", "--ip", "198.18.1.2", "--duration", "4"]));
    std::thread::sleep(Duration::from_millis(300));
    // Get of a group that does not exist: the SA answers NO_RECORDS (0x0300); exit 1.
    let out = ns
        .roce(&["sa-query", "--iface", "veth0", "-b", "198.18.1.1", "--sa", "198.18.1.2", "--mgid", "::ffff:239.9.9.9"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("0x0300"), "{text}");
    // GetTable with no groups: success, 0 records.
    let out = ns.roce(&["sa-query", "--iface", "veth0", "-b", "198.18.1.1", "--sa", "198.18.1.2"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let _ = finish(sa);
    // Nobody at the SA's address: a timeout after the kernel's retries, said with numbers.
    let out = ns.roce(&["sa-query", "--iface", "veth0", "-b", "198.18.1.1", "--sa", "198.18.1.99"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1));
    assert!(text.contains("timed out after 6 transmissions"), "{text}");
    // An address outside the interface's subnet.
    let out = ns.roce(&["sa-query", "--iface", "veth0", "-b", "10.9.9.9", "--sa", "198.18.1.2"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains("outside veth0's subnets"), "{err}");
    // An unknown interface.
    let out = ns.roce(&["sa-query", "--iface", "nope0", "-b", "198.18.1.1", "--sa", "198.18.1.2"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("no interface named \"nope0\""));
}
