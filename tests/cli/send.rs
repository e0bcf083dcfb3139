//! `roce send` on a veth pair in a namespace the test creates, with `roce decode -i -w` on the
//! far end as the capture: the bytes that arrive are the bytes of the file (or rewritten as
//! asked, with checksums and ICRC recomputed). Needs root (CI runs as root).

use crate::common;
use crate::common::netns::Netns;

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn sample() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/sample.pcap")
}

/// `roce decode -i veth1 -c n -w out` started and listening, its output read as it comes.
struct Capture(Child, std::thread::JoinHandle<String>);

fn capture(ns: &Netns, n: usize, out: &Path) -> Capture {
    let mut c = ns
        .roce(["decode", "--json", "-i", "veth1", "-c", &n.to_string(), "-w"])
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(c.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("listening on veth1"), "{line}");
    let mut stdout = c.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let _err = err; // stderr stays open until the end
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).unwrap();
        s
    });
    Capture(c, reader)
}

fn wait(Capture(mut c, reader): Capture, what: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.try_wait().unwrap().is_none() {
        if Instant::now() >= deadline {
            let _ = c.kill();
            panic!("{what}: the capture did not see every frame");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(c.wait().unwrap().success(), "{what}");
    reader.join().unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn send(ns: &Netns, args: &[&str]) -> String {
    let o = ns.roce(["send", "--iface", "veth0"]).args(args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn sends_a_capture_byte_for_byte_and_rewrites_sources_on_request() {
    let ns = Netns::veth_pair("send");
    let dir = common::artefact_dir("cli_send");
    let frames = roce_decode::capture::read_file(&sample()).unwrap();
    let n = frames.len();

    // As it is: the far end sees exactly the file's bytes.
    let got = dir.join("plain.pcap");
    let cap = capture(&ns, n, &got);
    let out = send(&ns, &[sample().to_str().unwrap()]);
    assert_eq!(out.trim(), format!("sent {n}"));
    wait(cap, "plain");
    let seen = roce_decode::capture::read_file(&got).unwrap();
    assert_eq!(seen.len(), n);
    for (a, b) in seen.iter().zip(&frames) {
        assert_eq!(a.data, b.data);
    }

    // Rewritten: new source MAC and IPv4 address; the IPv4 checksum and a right ICRC stay right.
    let cap = capture(&ns, n, &dir.join("rewritten.pcap"));
    send(&ns, &["-q", "--src-mac", "02:aa:bb:cc:dd:ee", "--src-ip", "198.18.7.7", sample().to_str().unwrap()]);
    let after = wait(cap, "rewritten");
    let before: Vec<Value> = {
        let o = Command::new(env!("CARGO_BIN_EXE_roce")).args(["decode", "--json"]).arg(sample()).output().unwrap();
        String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let mut roce_v4 = 0;
    for (a, b) in after.iter().zip(&before) {
        assert_eq!(a["eth"]["src"], "02:aa:bb:cc:dd:ee", "{a}");
        if a["kind"] == "rocev2" && a["ip"]["version"] == 4 && b.get("raw").is_none() {
            roce_v4 += 1;
            assert_eq!(a["ip"]["src"], "198.18.7.7");
            assert_eq!(a["ip"]["checksum_ok"], true);
            assert_eq!(a["icrc"], b["icrc"], "a right ICRC is recomputed, a wrong one stays wrong: {a}");
        }
    }
    assert!(roce_v4 > 20);

    // --keep-icrc: the rewrite leaves the ICRC as it was, so it no longer matches.
    let cap = capture(&ns, n, &dir.join("kept.pcap"));
    send(&ns, &["-q", "--keep-icrc", "--src-ip", "198.18.7.7", sample().to_str().unwrap()]);
    let kept = wait(cap, "keep-icrc");
    assert!(
        kept.iter().filter(|v| v["kind"] == "rocev2" && v["ip"]["version"] == 4 && v["icrc"] == "bad").count()
            >= roce_v4
    );

    // --loop, --count and --rate: 120 frames at 2,000/s from a 44-frame file.
    let cap = capture(&ns, 120, &dir.join("loop.pcap"));
    let out = send(&ns, &["--loop", "--count", "120", "--rate", "2000", sample().to_str().unwrap()]);
    assert_eq!(out.trim(), "sent 120");
    assert_eq!(wait(cap, "loop").len(), 120);
}

#[test]
fn a_missing_interface_is_exit_3() {
    let o = Command::new(env!("CARGO_BIN_EXE_roce"))
        .args(["send", "--iface", "no-such-if0"])
        .arg(sample())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", String::from_utf8_lossy(&o.stderr));
}
