//! What the perftest benches share (perftest_veth, capi_perftest): a shell command in a
//! namespace, a run's text, perftest's result row, one iperf3 stream, a median.
#![allow(dead_code)]

use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// `sh -c cmd` in namespace `ns`.
pub fn netns(ns: &str, cmd: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, "sh", "-c", cmd]);
    c
}

/// A run's stdout and stderr.
pub fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The row under perftest's " #bytes" header, split at blanks.
pub fn row(out: &str) -> Vec<f64> {
    let mut lines = out.lines().skip_while(|l| !l.trim_start().starts_with("#bytes"));
    lines.next();
    lines.next().map(|r| r.split_whitespace().filter_map(|f| f.parse().ok()).collect()).unwrap_or_default()
}

/// One iperf3 stream for `secs` from namespace `client_ns` to `server` in `server_ns`: the
/// receiver's MB/s (2^20 bytes/s).
pub fn iperf3(client_ns: &str, server_ns: &str, server: &str, secs: u32) -> f64 {
    iperf3_with(client_ns, server_ns, server, &format!("-t {secs}"))
}

/// One iperf3 stream from namespace `client_ns` to `server` in `server_ns` that moves `bytes`
/// in writes of `len` bytes (`-n`, `-l`): the same work as a perftest run of `bytes / len`
/// messages of `len` bytes. The receiver's MB/s (2^20 bytes/s).
pub fn iperf3_bytes(client_ns: &str, server_ns: &str, server: &str, bytes: u64, len: u64) -> f64 {
    iperf3_with(client_ns, server_ns, server, &format!("-n {bytes} -l {len}"))
}

fn iperf3_with(client_ns: &str, server_ns: &str, server: &str, how: &str) -> f64 {
    let srv = netns(server_ns, &format!("iperf3 -s -1 -B {server}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 -s (tests/setup.sh installs iperf3)");
    std::thread::sleep(Duration::from_millis(300));
    let c = netns(client_ns, &format!("iperf3 -c {server} {how} -J")).output().expect("iperf3 -c");
    let _ = srv.wait_with_output();
    assert!(c.status.success(), "iperf3:\n{}", text(&c));
    let json: serde_json::Value = serde_json::from_slice(&c.stdout).expect("iperf3 -J output");
    json["end"]["sum_received"]["bits_per_second"].as_f64().expect("bits_per_second") / 8.0 / 1048576.0
}

/// The median of `v` (non-empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
