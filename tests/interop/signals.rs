//! A stopped `roce mckey` leaves, against a real Linux kernel rxe peer: `roce sa-agent` runs on
//! the guest's umad; `roce mckey` on tap0 joins through it (SA Set ▶ GetResp through the guest
//! kernel) and holds the group; SIGINT makes it destroy its id: the SA Delete leaves our MAC
//! (tshark on tap0, filtered on `eth.src` and the Delete method), the agent logs the Delete and
//! its DeleteResp, and mckey exits 130. The agent's GetTable (our `sa-query` to the guest's
//! QP1, which the guest kernel hands to the agent) lists the group while we are its member,
//! and not after the stop.
//!
//! Needs root, qemu, `bash tests/interop/setup.sh` and the static `roce` for the guest
//! (tests/run-all.sh builds both). Artefacts: target/interop/artefacts/interop_signals/.

use crate::harness;

use crate::common;

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::harness::{static_roce, GuestBuilder};

const T: Duration = Duration::from_secs(60);

/// Poll a guest file until it contains `needle` (a readiness wait); returns its content.
fn wait_guest_log(g: &mut harness::Guest, path: &str, needle: &str, timeout: Duration) -> String {
    g.wait_for_output(&format!("cat {path} 2>/dev/null"), needle, timeout, T, Duration::from_millis(200))
}

#[test]
fn sigint_leaves_through_the_kernel_peer() {
    let bin = static_roce();
    let roce = env!("CARGO_BIN_EXE_roce");
    let mut g = GuestBuilder::new("interop_signals").binary(&bin, "roce").scenario("serve\n").boot();
    let art = g.artefacts.clone();
    let mut report = String::new();

    let (rc, out) = g.guest_exec("roce sa-agent --device umad0 --duration 120 > /tmp/agent.log 2>&1 &", T);
    assert_eq!(rc, 0, "{out}");
    let log = wait_guest_log(&mut g, "/tmp/agent.log", "registered agent", Duration::from_secs(30));
    assert!(log.contains("registered agent"), "the agent did not start:\n{log}");
    // The agent's records, read the way saquery reads an SM's: GetTable to the SA's QP1.
    let query = format!("{roce} sa-query -q --iface tap0 -b 198.18.0.3 --sa 198.18.0.2");
    let (_, before) = g.run_in_netns(&query);
    let _ = writeln!(report, "--- sa-query before:\n{before}");

    let pcap = art.join("mckey_sigint.pcap");
    let mut cmd = Command::new("ip");
    // SIGINT at its default action in the child, whatever this test process inherited.
    crate::common::netns::default_signals(&mut cmd);
    let mut child = cmd
        .args(["netns", "exec", &g.ns, roce])
        .args(["mckey", "-m", "239.1.2.3", "-b", "198.18.0.1", "--iface", "tap0", "--sa", "198.18.0.2"])
        .args(["--leave-after", "60", "--pcap"])
        .arg(&pcap)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut r = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("event: MULTICAST_") {
        let mut l = String::new();
        if r.read_line(&mut l).unwrap() == 0 {
            break;
        }
        seen += &l;
    }
    assert!(seen.contains("event: MULTICAST_JOIN"), "{seen}");
    let (_, during) = g.run_in_netns(&query);
    let _ = writeln!(report, "--- sa-query during:\n{during}");
    // SAFETY: kill(2) on our own child (`ip netns exec` execs roce).
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut r, &mut rest).unwrap();
    let res = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&res.stderr).to_string();
    let _ = writeln!(report, "--- mckey, SIGINT, exit {:?}\n{seen}{rest}{err}", res.status.code());
    let (_, after) = g.run_in_netns(&query);
    let _ = writeln!(report, "--- sa-query after:\n{after}");
    let (_, agent) = g.guest_exec("cat /tmp/agent.log", T);
    let _ = writeln!(report, "--- agent log:\n{agent}");
    let (tap, tap_mac) = g.end_and_finish();
    let mac = harness::mac_string(&tap_mac);
    let o = Command::new(common::tshark())
        .args(["-n", "-r"])
        .arg(&tap)
        .args(["-Y", &format!("eth.src == {mac} && infiniband.mad.method == 0x15")])
        .output()
        .unwrap();
    let deletes = String::from_utf8_lossy(&o.stdout).to_string();
    let _ = writeln!(report, "--- tshark on tap0: SA Deletes from our MAC {mac}:\n{deletes}");
    std::fs::write(art.join("report.txt"), &report).unwrap();
    println!("{report}");

    assert_eq!(res.status.code(), Some(130), "{report}");
    assert!(err.contains("SIGINT: destroying 1 id(s)") && err.contains("1 leave(s) answered"), "{err}");
    assert!(rest.contains("summary:") && rest.contains("counters:"), "{rest}");
    // GetTable from another port lists the group (its member's PortGID is not shown to it).
    assert!(during.contains("MGID....................::ffff:239.1.2.3"), "the agent lists our group:\n{during}");
    assert!(!after.contains("::ffff:239.1.2.3"), "no group after the stop (its only member left):\n{after}");
    let delete = agent
        .lines()
        .find(|l| l.contains("<- SubnAdmDelete(MCMemberRecord)"))
        .unwrap_or_else(|| panic!("no Delete in the agent's log:\n{agent}"));
    assert!(delete.contains("MGID=::ffff:239.1.2.3") && delete.contains("PortGID=::ffff:198.18.0.1"), "{delete}");
    assert!(agent.contains("-> SubnAdmDeleteResp(MCMemberRecord)"), "{agent}");
    assert!(deletes.contains("SubnAdmDelete"), "tap0 shows the Delete from our MAC:\n{deletes}");
}
