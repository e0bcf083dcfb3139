//! `roce perftest` against `roce perftest` on a veth pair between two network namespaces this
//! bench creates (198.18.5.0/24 only; needs root), beside one kernel TCP stream (iperf3,
//! default offloads) on the same veth, measured in the same run (issue 22 item 7):
//! write_bw, send_bw and read_bw at 64 KiB (BW average, MB/s = 2^20 bytes/s) and send_lat and
//! write_lat at 2 bytes (t_typical, µs), each bandwidth also as a ratio of the TCP stream's.
//! Each test runs on both transports: `--transport raw`, the stacks on addresses of their own
//! (198.18.5.1 and .2) beside the kernel's (.11 and .12, which carry perftest's TCP exchange
//! and iperf3), so the kernels drop the RoCE frames as another host's instead of answering
//! them; and `--transport udp`, the stacks on the kernel's addresses and its UDP port 4791.
//!
//! The QPs' local ACK timeout is 1.07 s (`-u 18`) instead of perftest's 67 ms (`-u 14`): on a
//! loaded machine a busy-polling side can be off the CPU longer than 67 ms, and seven timeouts
//! in a row end an RC run with "transport retry counter exceeded".
//!
//! `cargo bench --bench perftest_veth` (every figure the median of three rounds); under
//! `cargo test --benches` (no `--bench` argument) one round with 100 messages and a 1 s TCP
//! stream, so that it cannot rot.

use std::process::{Child, Stdio};
use std::time::Duration;

#[path = "../crates/roce-net/benches/veth/mod.rs"]
mod veth;
use veth::Nets;
#[path = "perftest_common/mod.rs"]
mod perftest_common;
use perftest_common::{iperf3, median, netns, row, text};

const STACK_A: &str = "198.18.5.1";
const STACK_B: &str = "198.18.5.2";
const KERNEL_A: &str = "198.18.5.11";
const KERNEL_B: &str = "198.18.5.12";

/// How the two `roce perftest` reach the wire: `raw` (a packet socket, the stacks on addresses
/// of their own) or `udp` (the kernel's UDP socket on port 4791, the kernel's addresses).
const TRANSPORTS: [&str; 2] = ["raw", "udp"];

/// The stacks' addresses (client, server) on `transport`.
fn stack_addresses(transport: &str) -> (&'static str, &'static str) {
    if transport == "udp" {
        (KERNEL_A, KERNEL_B)
    } else {
        (STACK_A, STACK_B)
    }
}

/// One perftest run; the client's figure: BW average (MB/s) for bandwidth tests, t_typical
/// (µs) for latency tests.
fn perftest(nets: &Nets, transport: &str, test: &str, size: u64, iters: u64) -> f64 {
    let roce = env!("CARGO_BIN_EXE_roce");
    let (stack_a, stack_b) = stack_addresses(transport);
    let server: Child = netns(
        &nets.1,
        &format!(
            "{roce} perftest {test} --iface v2 --transport {transport} -I {stack_b} -s {size} -n {iters} -u 18 --timeout 20 --accept-timeout 20"
        ),
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("roce perftest server");
    std::thread::sleep(Duration::from_millis(300));
    let client = netns(
        &nets.0,
        &format!(
            "{roce} perftest {test} --iface v1 --transport {transport} -I {stack_a} -s {size} -n {iters} -u 18 --timeout 20 {KERNEL_B}"
        ),
    )
    .output()
    .expect("roce perftest client");
    let s = server.wait_with_output().expect("server output");
    let out = text(&client);
    assert!(
        client.status.success() && s.status.success(),
        "{test} ({transport}):\nclient:\n{out}\nserver:\n{}",
        text(&s)
    );
    let r = row(&out);
    let figure = if test.ends_with("_bw") { r.get(3) } else { r.get(4) };
    *figure.unwrap_or_else(|| panic!("{test}: no result row:\n{out}"))
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (rounds, bw_iters, lat_iters, tcp_secs) = if full { (3, 20000, 10000, 5) } else { (1, 100, 100, 1) };
    let nets = Nets::pair("ptb", None, "198.18.5.11".parse().expect("ip"), KERNEL_B.parse().expect("ip"));
    let cases: [(&str, u64, u64); 5] = [
        ("write_bw", 65536, bw_iters),
        ("send_bw", 65536, bw_iters),
        ("read_bw", 65536, bw_iters),
        ("send_lat", 2, lat_iters),
        ("write_lat", 2, lat_iters),
    ];
    let mut figures: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); cases.len()]; TRANSPORTS.len()];
    let mut tcp = Vec::new();
    for _ in 0..rounds {
        tcp.push(iperf3(&nets.0, &nets.1, KERNEL_B, tcp_secs));
        for (t, transport) in TRANSPORTS.iter().enumerate() {
            for (i, (test, size, iters)) in cases.iter().enumerate() {
                figures[t][i].push(perftest(&nets, transport, test, *size, *iters));
            }
        }
    }
    let tcp = median(tcp);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("perftest_veth: veth MTU 1500 (RoCE path MTU 1024), {rounds} round(s), medians; load {}", load.trim());
    println!("  kernel TCP (iperf3, 1 stream)      {tcp:>10.2} MB/s");
    for (t, transport) in TRANSPORTS.iter().enumerate() {
        for (i, (test, size, iters)) in cases.iter().enumerate() {
            let m = median(figures[t][i].clone());
            if test.ends_with("_bw") {
                println!(
                    "  roce perftest {test:<9} {transport:<3} {size:>6} B {m:>10.2} MB/s  {:.3} of TCP  (-n {iters})",
                    m / tcp
                );
            } else {
                println!("  roce perftest {test:<9} {transport:<3} {size:>6} B {m:>10.2} us t_typical  (-n {iters})");
            }
        }
    }
}
