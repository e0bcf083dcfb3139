//! However a program on roce ends, its groups are left on the wire, as the kernel leaves a dead
//! process's when its ucma file closes: Debian's `mckey` (a receiver waiting for datagrams that
//! never come) joined through `roce sa-server`, then killed with SIGKILL, SIGINT or SIGTERM (no
//! handler in mckey: the library runs no code after any of them). The watcher process puts the
//! SubnAdmDelete on the wire; a capture on the SA's port shows it from the program's address
//! after the kill, the SA answers it, and no member is left.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common;
use crate::common::netns::Netns;
use crate::debian;
use crate::library::exec;
use crate::veth::{spawn, stop_sa};

/// The SA MAD lines of a capture still being written (a torn last record is skipped), with
/// each frame's time.
fn sa_frames(pcap: &Path) -> Vec<(f64, String)> {
    let Ok(frames) = roce_decode::capture::read_file(pcap) else { return Vec::new() };
    frames
        .iter()
        .filter_map(|f| {
            let d = roce_decode::decode::decode_ethernet(&f.data);
            d.summary.contains("SubnAdm").then_some((f.timestamp.as_secs_f64(), d.summary))
        })
        .collect()
}

fn wait_for(pcap: &Path, what: impl Fn(&[(f64, String)]) -> bool, timeout: Duration) -> Vec<(f64, String)> {
    let end = Instant::now() + timeout;
    loop {
        let f = sa_frames(pcap);
        if what(&f) || Instant::now() > end {
            return f;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn tcpdump(ns: &Netns, iface: &str, pcap: &Path) -> Child {
    let mut c = ns.cmd("tcpdump");
    c.args(["-i", iface, "-U", "-n", "-w"]).arg(pcap).args(["udp", "port", "4791"]);
    c.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("tcpdump (tests/interop/setup.sh installs it)")
}

#[test]
fn a_program_killed_while_joined_leaves_its_group_on_the_wire() {
    let ns = Netns::bridge("capidie", 3);
    let dir = common::artefact_dir("capi_death");
    let sa = spawn(ns.roce(["sa-server", "--iface", "veth1", "--ip", "198.18.1.2", "--duration", "90"]));
    let mckey = debian::bin("mckey");
    let mut report = String::new();
    for (i, (sig, name)) in
        [(libc::SIGKILL, "SIGKILL"), (libc::SIGINT, "SIGINT"), (libc::SIGTERM, "SIGTERM")].into_iter().enumerate()
    {
        let pcap = dir.join(format!("{name}.pcap"));
        let mut cap = tcpdump(&ns, "veth1", &pcap);
        std::thread::sleep(Duration::from_millis(500));
        let me = format!("198.18.1.{}", 21 + i);
        let group = format!("239.1.3.{}", 1 + i);
        let mut prog = exec(
            &ns,
            &["-I", &me, "--iface", "veth0", "--transport", "raw", "--sa", "198.18.1.2"],
            &mckey,
            &["-m", &group, "-C", "5"],
        );
        let mut prog = prog.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let from = format!("{me} →");
        let joined = wait_for(
            &pcap,
            |f| f.iter().any(|(_, l)| l.contains("SubnAdmGetResp(MCMemberRecord)")),
            Duration::from_secs(20),
        );
        assert!(
            joined.iter().any(|(_, l)| l.contains(&from) && l.contains("SubnAdmSet")),
            "{name}: no join:\n{joined:?}"
        );
        let killed_at = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
        // SAFETY: kill(2) on our own child (roce exec and ip netns exec exec the program).
        assert_eq!(unsafe { libc::kill(prog.id() as i32, sig) }, 0);
        let st = prog.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(st.signal(), Some(sig), "{name}: the program died of it");
        let f = wait_for(&pcap, |f| f.iter().any(|(_, l)| l.contains("SubnAdmDeleteResp")), Duration::from_secs(10));
        // SAFETY: as above, on the capture.
        unsafe { libc::kill(cap.id() as i32, libc::SIGTERM) };
        let _ = cap.wait();
        let all: Vec<&String> = f.iter().map(|(_, l)| l).collect();
        let (t_del, del) = f
            .iter()
            .find(|(_, l)| l.contains(&from) && l.contains("SubnAdmDelete(MCMemberRecord)"))
            .unwrap_or_else(|| panic!("{name}: no SubnAdmDelete from {me} after the kill:\n{all:#?}"));
        assert!(
            del.contains("mask=0x10003") && del.contains("JoinState=FullMember") && del.contains(&group[..]),
            "{del}"
        );
        let tid = del.split("TID=").nth(1).and_then(|t| t.split_whitespace().next()).unwrap();
        assert!(
            f.iter().any(|(_, l)| l.contains("SubnAdmDeleteResp") && l.contains(&format!("TID={tid}"))),
            "{name}: the SA answered the Delete:\n{all:#?}"
        );
        report += &format!(
            "{name}: SubnAdmDelete on the wire {:.1} ms after the kill, answered\n",
            (t_del - killed_at) * 1e3
        );
        assert!(*t_del - killed_at < 5.0, "{name}: the Delete within seconds of the death");
    }
    let sa_out = stop_sa(sa);
    std::fs::write(dir.join("report.txt"), format!("{report}sa:\n{sa_out}")).unwrap();
    eprintln!("{report}");
    assert!(sa_out.contains("0 groups, 0 members"), "{sa_out}");
}

/// The library's own end of process: a program that joins and calls exit() without leaving or
/// destroying (here: Debian's mckey stopped by a closed stdout is not such a program, so a
/// small C program built against Debian's headers does it) leaves through the engine, and the
/// SA answers before the process is gone.
#[test]
fn exit_without_cleanup_leaves_through_the_engine() {
    let ns = Netns::bridge("capiexit", 3);
    let dir = common::artefact_dir("capi_exit");
    let pcap = dir.join("sa.pcap");
    let sa = spawn(
        ns.roce(["sa-server", "--iface", "veth1", "--ip", "198.18.1.2", "--duration", "60", "--pcap"]).arg(&pcap),
    );
    std::thread::sleep(Duration::from_millis(300));
    let prog = join_and_exit_program(&dir);
    let o = exec(
        &ns,
        &["-I", "198.18.1.1", "--iface", "veth0", "--transport", "raw", "--sa", "198.18.1.2"],
        &prog,
        &["239.1.3.9"],
    )
    .output()
    .unwrap();
    let out = crate::veth::text(&o);
    let sa_out = stop_sa(sa);
    std::fs::write(dir.join("outputs.txt"), format!("{out}\nsa:\n{sa_out}")).unwrap();
    assert!(o.status.success() && out.contains("joined; exit(0) without leaving"), "{out}");
    crate::veth::assert_joined_and_left(&crate::veth::sa_lines(&pcap), &["198.18.1.1"]);
}

/// A C program (built with Debian's headers, linked to the library by its soname) that joins
/// a group, waits for MULTICAST_JOIN and calls exit(0).
fn join_and_exit_program(dir: &Path) -> std::path::PathBuf {
    debian::build_c(dir, "join_and_exit", JOIN_AND_EXIT)
}

const JOIN_AND_EXIT: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>
int main(int argc, char **argv) {
    struct rdma_event_channel *ch = rdma_create_event_channel();
    struct rdma_cm_id *id; struct rdma_cm_event *ev;
    struct sockaddr_in g = { .sin_family = AF_INET };
    if (!ch || argc < 2 || inet_pton(AF_INET, argv[1], &g.sin_addr) != 1) return 2;
    if (rdma_create_id(ch, &id, NULL, RDMA_PS_UDP)) return 3;
    if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&g, 2000)) return 4;
    if (rdma_get_cm_event(ch, &ev) || ev->event != RDMA_CM_EVENT_ADDR_RESOLVED) return 5;
    rdma_ack_cm_event(ev);
    if (rdma_join_multicast(id, (struct sockaddr *)&g, NULL)) return 6;
    if (rdma_get_cm_event(ch, &ev) || ev->event != RDMA_CM_EVENT_MULTICAST_JOIN) return 7;
    rdma_ack_cm_event(ev);
    printf("joined; exit(0) without leaving\n");
    exit(0);
}
"#;

/// A connected program killed mid-transfer disconnects on the wire, as the kernel does for a
/// dead process's ids: Debian's `rping` client over roce, SIGKILLed while it pings our `rping`
/// server; the watcher sends the DREQ (a capture on the server's port shows it from the
/// client's address after the kill), and the server sees its DISCONNECT EVENT and exits.
#[test]
fn a_connected_program_killed_mid_transfer_sends_its_dreq() {
    let ns = Netns::bridge("capidreq", 2);
    let dir = common::artefact_dir("capi_death_dreq");
    let rping = debian::bin("rping");
    let pcap = dir.join("server.pcap");
    let mut cap = tcpdump(&ns, "veth1", &pcap);
    std::thread::sleep(Duration::from_millis(500));
    let server = spawn(exec(
        &ns,
        &["-I", "198.18.1.3", "--iface", "veth1", "--transport", "raw"],
        &rping,
        &["-s", "-a", "198.18.1.3", "-C", "1000000", "-S", "4000"],
    ));
    std::thread::sleep(Duration::from_millis(800));
    let client = spawn(exec(
        &ns,
        &["-I", "198.18.1.1", "--iface", "veth0", "--transport", "raw"],
        &rping,
        &["-c", "-a", "198.18.1.3", "-C", "1000000", "-S", "4000"],
    ));
    // Pinging: READs and WRITEs on the wire for a second, then the kill.
    std::thread::sleep(Duration::from_millis(1500));
    let killed = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
    // SAFETY: kill(2) on our own child (`ip netns exec` and `roce exec` exec the program).
    assert_eq!(unsafe { libc::kill(client.id() as i32, libc::SIGKILL) }, 0);
    let _ = client.wait_with_output();
    let server = crate::veth::finish_within(server, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) on our own tcpdump.
    unsafe { libc::kill(cap.id() as i32, libc::SIGTERM) };
    let _ = cap.wait();
    let frames = roce_decode::capture::read_file(&pcap).expect("the capture");
    let lines: Vec<(f64, String)> = frames
        .iter()
        .map(|f| (f.timestamp.as_secs_f64(), roce_decode::decode::decode_ethernet(&f.data).summary))
        .collect();
    let all = lines.iter().map(|(t, l)| format!("{t:.6} {l}")).collect::<Vec<_>>().join("\n");
    std::fs::write(dir.join("capture.txt"), &all).unwrap();
    let st = crate::veth::text(&server);
    assert!(lines.iter().any(|(_, l)| l.contains("RC_RDMA_READ_REQUEST")), "no transfer before the kill:\n{all}");
    let dreq = lines
        .iter()
        .find(|(_, l)| l.starts_with("198.18.1.1 →") && l.contains("CM DREQ"))
        .unwrap_or_else(|| panic!("no DREQ from the killed client:\n{all}\nserver:\n{st}"));
    assert!(dreq.0 >= killed - 0.01, "the DREQ came after the kill ({} < {killed}):\n{all}", dreq.0);
    assert!(lines.iter().any(|(_, l)| l.contains("CM DREP")), "the server answered the DREQ:\n{all}");
    assert!(st.contains("server DISCONNECT EVENT"), "the server saw the disconnect:\n{st}");
}
