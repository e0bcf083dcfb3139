//! CM interop with a real Linux kernel rxe peer (rdma-core's tools in the guest):
//! a. the guest's `udaddy` server ▶ `roce udaddy -s` resolves it by SIDR (SIDR_REQ ▶ SIDR_REP
//!    with the kernel's QPN and Q_Key) and exchanges 10 datagrams each way; both sides end
//!    with success; a SIDR_REQ to a port nobody listens on gets SIDR_REP status 1 and our
//!    event is UNREACHABLE status 1;
//! b. `roce udaddy` as the server ▶ the guest's `udaddy -s 198.18.0.1` client resolves us and
//!    exchanges 10 datagrams each way; both sides end with success;
//! c. the guest's `ucmatose -C 0` server ▶ `roce cmatose -s`: REQ ▶ REP, our RTU brings the
//!    kernel side to ESTABLISHED (ucmatose goes on to disconnect), our DREQ ▶ DREP; a REQ to a
//!    port nobody listens on ▶ REJ reason 8, reported as REJECTED status 8;
//! d. `roce cmatose` as the server ▶ the guest's `ucmatose -s 198.18.0.1 -C 0`: REQ ▶ our REP ▶
//!    its RTU (ESTABLISHED), our DREQ ▶ its DREP. No RC data anywhere (-C 0): this stack has no
//!    RC data path.
//!
//! Needs root, qemu and `bash tests/interop/setup.sh`. Artefacts: target/interop/artefacts/<kernel>/interop_cm/ (ROCE_KERNEL picks 6.1, 6.12 or sid).

use crate::harness;

use std::fmt::Write as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::harness::{roce, GuestBuilder};

const T: Duration = Duration::from_secs(60);

/// (exit code, stdout+stderr) of a host-side command in the namespace.
fn run(g: &harness::Guest, cmd: &str) -> (i32, String) {
    g.run_in_netns(cmd)
}

/// Poll a command's output in the guest until it contains `needle`; returns the output.
fn wait_guest(g: &mut harness::Guest, cmd: &str, needle: &str, timeout: Duration) -> String {
    g.wait_for_output(cmd, needle, timeout, T, Duration::from_millis(300))
}

/// Start a host-side server in the namespace and wait (at most 30 s) until its standard output
/// says it listens; returns the child and a thread collecting all its output.
fn spawn_listening(
    g: &harness::Guest,
    cmd: &str,
) -> (std::process::Child, std::thread::JoinHandle<String>, std::sync::mpsc::Receiver<()>) {
    use std::io::BufRead;
    let mut child = Command::new("ip")
        .args(["netns", "exec", &g.ns, "sh", "-c"])
        .arg(format!("{cmd} 2>&1"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("host-side server");
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.contains(": listening on ") {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    (child, reader, rx)
}

/// The CM messages of a capture, one line each.
fn decode_cm(pcap: &std::path::Path) -> String {
    let frames = roce_decode::capture::read_file(pcap).expect("our pcap");
    frames
        .iter()
        .map(|f| roce_decode::decode::decode_ethernet(&f.data).summary)
        .filter(|l| l.contains(" CM "))
        .map(|l| l.split(" | ").take(2).collect::<Vec<_>>().join(" | "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn kernel_rxe_cm_interop() {
    let mut g = GuestBuilder::new("interop_cm").scenario("serve\n").boot();
    let art = g.artefacts.clone();
    let mut report = format!("boot_time_s {:.2}\n", g.boot_time.as_secs_f64());

    // a. The guest's udaddy server; our client.
    let (rc, out) = g.guest_exec("(udaddy -C 10; echo rc=$?) > /tmp/udaddy_srv.log 2>&1 &", T);
    assert_eq!(rc, 0, "{out}");
    let cm = wait_guest(&mut g, "rdma res show cm_id", "LISTEN", Duration::from_secs(30));
    let _ = writeln!(report, "--- a. the guest's udaddy listens:\n{cm}");
    assert!(cm.contains("LISTEN"), "{cm}");
    let pcap_a = art.join("udaddy_client.pcap");
    let (rc, out) =
        run(&g, &roce(&format!("udaddy -s 198.18.0.2 -b 198.18.0.1 --iface tap0 -C 10 --pcap {}", pcap_a.display())));
    let _ = writeln!(report, "roce udaddy -s 198.18.0.2, exit {rc}\n{out}");
    let log = wait_guest(&mut g, "cat /tmp/udaddy_srv.log", "rc=", Duration::from_secs(30));
    let _ = writeln!(report, "guest udaddy (server) log:\n{log}");
    std::fs::write(art.join("report.txt"), &report).unwrap();
    assert_eq!(rc, 0, "roce udaddy client:\n{out}\nguest:\n{log}");
    assert!(out.contains("event: ESTABLISHED status 0") && out.contains("data transfers complete"), "{out}");
    assert!(log.contains("data transfers complete") && log.contains("rc=0"), "the guest's udaddy server:\n{log}");

    //    A SIDR_REQ to a port nobody listens on: SIDR_REP status 1 (service ID not supported),
    //    reported as UNREACHABLE status 1 (cma_sidr_rep_handler).
    let (rc, out) = run(&g, &roce("udaddy -s 198.18.0.2 -b 198.18.0.1 --iface tap0 -p 7999"));
    let _ = writeln!(report, "--- a2. roce udaddy -s 198.18.0.2 -p 7999 (no listener), exit {rc}\n{out}");
    std::fs::write(art.join("report.txt"), &report).unwrap();
    assert_eq!(rc, 1, "{out}");
    assert!(out.contains("event: UNREACHABLE status 1"), "{out}");

    // b. Our server; the guest's udaddy client.
    let pcap_b = art.join("udaddy_server.pcap");
    let (mut child, reader, listening) = spawn_listening(
        &g,
        &roce(&format!("udaddy -b 198.18.0.1 --iface tap0 -C 10 --timeout 40 --pcap {}", pcap_b.display())),
    );
    listening.recv_timeout(Duration::from_secs(30)).expect("roce udaddy server listening");
    let (grc, glog) = g.guest_exec("udaddy -s 198.18.0.1 -C 10 2>&1; echo rc=$?", T);
    let rc = child.wait().expect("roce udaddy server").code().unwrap_or(-1);
    let out = reader.join().expect("server output");
    let _ = writeln!(
        report,
        "--- b. roce udaddy (server), exit {rc}\n{out}\nguest udaddy -s 198.18.0.1 (exec rc {grc}):\n{glog}"
    );
    std::fs::write(art.join("report.txt"), &report).unwrap();
    assert_eq!(rc, 0, "roce udaddy server:\n{out}\nguest:\n{glog}");
    assert!(glog.contains("data transfers complete") && glog.contains("rc=0"), "the guest's udaddy client:\n{glog}");

    // c. The guest's ucmatose server (-C 0: the handshake alone; data is tests/interop/rc.rs); our
    //    client: REQ ▶ REP, our RTU brings the kernel side to ESTABLISHED (ucmatose leaves
    //    connect_events and disconnects), our DREQ ▶ DREP.
    let (rc, out) = g.guest_exec("(ucmatose -C 0; echo rc=$?) > /tmp/ucmatose_srv.log 2>&1 &", T);
    assert_eq!(rc, 0, "{out}");
    let cm = wait_guest(&mut g, "rdma res show cm_id", "ps TCP", Duration::from_secs(30));
    let _ = writeln!(report, "--- c. the guest's ucmatose listens:\n{cm}");
    let pcap_c = art.join("cmatose_client.pcap");
    let (rc, out) =
        run(&g, &roce(&format!("cmatose -s 198.18.0.2 -b 198.18.0.1 --iface tap0 -C 0 --pcap {}", pcap_c.display())));
    let _ = writeln!(report, "roce cmatose -s 198.18.0.2, exit {rc}\n{out}");
    let log = wait_guest(&mut g, "cat /tmp/ucmatose_srv.log", "rc=", Duration::from_secs(30));
    let _ = writeln!(report, "guest ucmatose (server) log:\n{log}");
    let summary = decode_cm(&pcap_c);
    assert!(summary.contains("CM DREP"), "the kernel answered our DREQ:\n{summary}");
    let _ = writeln!(report, "CM messages on the wire:\n{summary}");
    std::fs::write(art.join("report.txt"), &report).unwrap();
    assert_eq!(rc, 0, "roce cmatose client:\n{out}\nguest:\n{log}");
    assert!(out.contains("event: ESTABLISHED status 0") && out.contains("event: DISCONNECTED status 0"), "{out}");
    assert!(log.contains("cmatose: disconnecting") && log.contains("rc=0"), "the guest's ucmatose server:\n{log}");

    //    A REQ to a port nobody listens on: REJ reason 8, and our event says so.
    let (rc, out) = run(&g, &roce("cmatose -s 198.18.0.2 -b 198.18.0.1 --iface tap0 -C 0 -p 7999"));
    let _ = writeln!(report, "--- c2. roce cmatose -s 198.18.0.2 -p 7999 (no listener), exit {rc}\n{out}");
    std::fs::write(art.join("report.txt"), &report).unwrap();
    assert_eq!(rc, 1, "{out}");
    assert!(out.contains("event: REJECTED status 8") && out.contains("error: 8 (InvalidServiceId)"), "{out}");

    // d. Our cmatose server; the guest's ucmatose client (-C 0): REQ ▶ our REP ▶ its RTU, our
    //    DREQ ▶ its DREP.
    let pcap_d = art.join("cmatose_server.pcap");
    let (mut child, reader, listening) = spawn_listening(
        &g,
        &roce(&format!("cmatose -b 198.18.0.1 --iface tap0 -C 0 --timeout 40 --pcap {}", pcap_d.display())),
    );
    listening.recv_timeout(Duration::from_secs(30)).expect("roce cmatose server listening");
    let (grc, glog) = g.guest_exec("ucmatose -s 198.18.0.1 -C 0 2>&1; echo rc=$?", T);
    let rc = child.wait().expect("roce cmatose server").code().unwrap_or(-1);
    let out = reader.join().expect("server output");
    let _ = writeln!(
        report,
        "--- d. roce cmatose (server), exit {rc}\n{out}\nguest ucmatose -s 198.18.0.1 -C 0 (exec rc {grc}):\n{glog}\nCM messages on the wire:\n{}",
        decode_cm(&pcap_d)
    );
    std::fs::write(art.join("report.txt"), &report).unwrap();
    assert_eq!(rc, 0, "roce cmatose server:\n{out}\nguest:\n{glog}");
    assert!(glog.contains("rc=0"), "the guest's ucmatose client:\n{glog}");
    assert!(out.contains("event: ESTABLISHED status 0") && out.contains("event: DISCONNECTED status 0"), "{out}");

    g.signal("end");
    g.finish();
    std::fs::write(art.join("report.txt"), &report).unwrap();
    println!("{report}");
}
