//! Debian's unmodified perftest (`ib_write_bw`, `ib_send_lat` of perftest 4.5-0.17, from the
//! package, never rebuilt) over roce's drop-in libraries (`roce exec`), both ends, beside the
//! same work done by `roce perftest` (the engine as the roce tools drive it) and one kernel
//! TCP stream (iperf3, default offloads) on the same veth pair at MTU 1500, in the same run
//! (issue 35 item 3): the stream moves what ib_write_bw moves, in writes of its message size
//! (`-n`, `-l`: the same work), and, as quoted before, for 5 s. Printed: write_bw 64 KiB (BW
//! average, MB/s) as ratios of the TCP streams' and of `roce perftest write_bw`'s, and
//! send_lat 2 B (t_typical, µs) as a ratio of `roce perftest send_lat`'s, on the raw transport (the stacks on addresses of their own beside the
//! kernel's, which carry perftest's TCP exchange and iperf3) and the udp transport (the
//! kernel's addresses and UDP port 4791).
//!
//! Goals: write_bw ≥ 1.0× TCP and ≥ 0.9× `roce perftest`; send_lat ≤ 1.25× `roce perftest`.
//! `cargo bench --bench capi_perftest` (medians of three rounds); under `cargo test --benches`
//! one short round, so that it cannot rot. Needs root and `bash tests/interop/setup.sh` (the
//! .debs).

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

#[path = "../tests/capi/debian.rs"]
#[allow(dead_code)]
mod debian;
#[path = "../crates/roce-net/benches/veth/mod.rs"]
mod veth;
use veth::Nets;
#[path = "perftest_common/mod.rs"]
mod perftest_common;
use perftest_common::{iperf3, iperf3_bytes, median, netns, row, text};

const STACK_A: &str = "198.18.6.1";
const STACK_B: &str = "198.18.6.2";
const KERNEL_A: &str = "198.18.6.11";
const KERNEL_B: &str = "198.18.6.12";
const TRANSPORTS: [&str; 2] = ["raw", "udp"];

fn stack_addresses(transport: &str) -> (&'static str, &'static str) {
    if transport == "udp" {
        (KERNEL_A, KERNEL_B)
    } else {
        (STACK_A, STACK_B)
    }
}

/// Who runs the test: Debian's binary over the library, or `roce perftest`.
#[derive(Clone, Copy, PartialEq)]
enum Side {
    Debian,
    Roce,
}

/// One run (server in the second namespace, client in the first); the client's figure: BW
/// average (MB/s) for `_bw`, t_typical (µs) for `_lat`.
fn run(nets: &Nets, side: Side, transport: &str, test: &str, size: u64, iters: u64) -> f64 {
    let roce = env!("CARGO_BIN_EXE_roce");
    let (stack_a, stack_b) = stack_addresses(transport);
    // The same work on both sides: size, iterations, the 1.07 s local ACK timeout (-u 18: a
    // busy-polling side of a loaded 2-core machine can be off the CPU past 67 ms).
    let cmd = |iface: &str, stack: &str, peer: &str| {
        match side {
        Side::Debian => format!(
            "{roce} exec --iface {iface} --transport {transport} -I {stack} -- {} -d roce0 -x 1 -s {size} -n {iters} -u 18 {peer}",
            debian::bin(&format!("ib_{test}")).display()
        ),
        Side::Roce => format!(
            "{roce} perftest {test} --iface {iface} --transport {transport} -I {stack} -s {size} -n {iters} -u 18 --timeout 20 {peer}"
        ),
    }
    };
    let server: Child = netns(&nets.1, &cmd("v2", stack_b, ""))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("perftest server");
    // perftest's client does not retry its TCP connect: wait for the server's listener.
    let mut out = None;
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(200));
        let c = netns(&nets.0, &cmd("v1", stack_a, KERNEL_B)).output().expect("perftest client");
        let t = text(&c);
        if c.status.success() || !t.contains("Couldn't connect") && !t.contains("Unable to open file descriptor") {
            out = Some(c);
            break;
        }
    }
    let client = out.expect("the perftest server never listened");
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
    let (rounds, bw_iters, lat_iters, tcp_secs) = if full { (3, 20000, 10000, 5) } else { (1, 200, 200, 1) };
    let _: &Path = debian::root(); // unpack the packages before timing anything
    let _: PathBuf = debian::bin("ib_write_bw");
    let nets = Nets::pair("cpt", None, KERNEL_A.parse().expect("ip"), KERNEL_B.parse().expect("ip"));
    let cases: [(&str, u64, u64); 2] = [("write_bw", 65536, bw_iters), ("send_lat", 2, lat_iters)];
    // figures[transport][case][side]
    let mut figures = vec![vec![[Vec::new(), Vec::new()]; cases.len()]; TRANSPORTS.len()];
    // The TCP stream two ways: for `tcp_secs` (iperf3's own defaults, as quoted before), and
    // moving what ib_write_bw moves in writes of its message size (the same work: the goal's
    // baseline).
    let (mut tcp, mut tcp_same) = (Vec::new(), Vec::new());
    let (bw_size, bw_iters) = (cases[0].1, cases[0].2);
    for round in 1..=rounds {
        tcp.push(iperf3(&nets.0, &nets.1, KERNEL_B, tcp_secs));
        tcp_same.push(iperf3_bytes(&nets.0, &nets.1, KERNEL_B, bw_size * bw_iters, bw_size));
        for (t, transport) in TRANSPORTS.iter().enumerate() {
            for (i, (test, size, iters)) in cases.iter().enumerate() {
                // Alternated, so that a drift of the machine's speed touches both alike.
                figures[t][i][0].push(run(&nets, Side::Debian, transport, test, *size, *iters));
                figures[t][i][1].push(run(&nets, Side::Roce, transport, test, *size, *iters));
            }
        }
        // Every round's figures, for the spread.
        let mut line = format!("  round {round}: TCP {:.0} / {:.0} MB/s", tcp[round - 1], tcp_same[round - 1]);
        for (t, transport) in TRANSPORTS.iter().enumerate() {
            for (i, (test, _, _)) in cases.iter().enumerate() {
                let (deb, ours) = (figures[t][i][0][round - 1], figures[t][i][1][round - 1]);
                line += &format!("; {transport} {test} {deb:.2} / {ours:.2}");
            }
        }
        println!("{line}");
    }
    let (tcp, tcp_same) = (median(tcp), median(tcp_same));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("capi_perftest: veth MTU 1500 (RoCE path MTU 1024), {rounds} round(s), medians; load {}", load.trim());
    println!("  kernel TCP (iperf3, 1 stream, {tcp_secs} s)       {tcp:>10.2} MB/s");
    println!(
        "  kernel TCP (iperf3, 1 stream, -n {} -l {bw_size}: ib_write_bw's work) {tcp_same:>10.2} MB/s",
        bw_size * bw_iters
    );
    for (t, transport) in TRANSPORTS.iter().enumerate() {
        for (i, (test, size, iters)) in cases.iter().enumerate() {
            let (deb, ours) = (median(figures[t][i][0].clone()), median(figures[t][i][1].clone()));
            if test.ends_with("_bw") {
                println!(
                    "  ib_{test} (Debian, over roce) {transport:<3} {size:>6} B {deb:>10.2} MB/s  {:.3}× TCP (same work; {:.3}× the {tcp_secs} s stream)  {:.3}× roce perftest ({ours:.2} MB/s)  (-n {iters})",
                    deb / tcp_same,
                    deb / tcp,
                    deb / ours
                );
            } else {
                println!(
                    "  ib_{test} (Debian, over roce) {transport:<3} {size:>6} B {deb:>10.2} us t_typical  {:.3}× roce perftest ({ours:.2} us)  (-n {iters})",
                    deb / ours
                );
            }
        }
    }
}
