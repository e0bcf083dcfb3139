//! The drop-in library against the engine it wraps, equal work on both sides, same run: join a
//! group through `roce sa-server` (SubnAdmSet ▶ GetResp, IGMP report) and leave it
//! (SubnAdmDelete, IGMP leave), on a raw socket on a veth pair this bench creates (198.18.6.0/24,
//! needs root). Two figures per side:
//! - join ▶ event: from the join call to the MULTICAST_JOIN event in the program's hands
//!   (`rdma_join_multicast` ▶ `rdma_get_cm_event`, in a C program built against Debian's
//!   headers and linked to the library by its soname; `Stack::join_multicast` ▶ the driver's
//!   event, as `roce mckey` runs it, in this process);
//! - leave ▶ Delete on the wire: from the leave call (`rdma_leave_multicast` /
//!   `Stack::leave_multicast`, its wall-clock time) to the SubnAdmDelete's timestamp in a capture
//!   on the SA's end of the veth (tcpdump).
//!
//! `cargo bench --bench capi_latency` (200 joins a side); under `cargo test --benches` 5 a side.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use roce_cm::{EventKind, PortSpace, QpType};
use roce_wire::mcmember::JoinState;

#[path = "../tests/capi/debian.rs"]
#[allow(dead_code)]
mod debian;
#[path = "../crates/roce-net/benches/veth/mod.rs"]
mod veth;

const STACK: &str = "198.18.6.1";
const SA: &str = "198.18.6.2";

fn now_wall() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

const PROGRAM: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>
static double mono(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static double wall(void) { struct timespec t; clock_gettime(CLOCK_REALTIME, &t); return t.tv_sec + t.tv_nsec / 1e9; }
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    struct rdma_event_channel *ch = rdma_create_event_channel();
    if (!ch) return 2;
    for (int i = 0; i < n; i++) {
        struct rdma_cm_id *id; struct rdma_cm_event *ev;
        struct sockaddr_in g = { .sin_family = AF_INET };
        char grp[32]; snprintf(grp, sizeof grp, "239.6.%d.%d", i / 250, 1 + i % 250);
        inet_pton(AF_INET, grp, &g.sin_addr);
        if (rdma_create_id(ch, &id, NULL, RDMA_PS_UDP)) return 3;
        if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&g, 2000)) return 4;
        if (rdma_get_cm_event(ch, &ev) || ev->event != RDMA_CM_EVENT_ADDR_RESOLVED) return 5;
        rdma_ack_cm_event(ev);
        double t0 = mono();
        if (rdma_join_multicast(id, (struct sockaddr *)&g, NULL)) return 6;
        if (rdma_get_cm_event(ch, &ev) || ev->event != RDMA_CM_EVENT_MULTICAST_JOIN) return 7;
        double t1 = mono();
        rdma_ack_cm_event(ev);
        double tl = wall();
        if (rdma_leave_multicast(id, (struct sockaddr *)&g)) return 8;
        printf("%s %.9f %.9f\n", grp, t1 - t0, tl);
        fflush(stdout);
        usleep(20000);
        rdma_destroy_id(id);
    }
    return 0;
}
"#;

fn build_program(dir: &Path) -> PathBuf {
    debian::build_c(dir, "join_leave", PROGRAM)
}

/// (group, join ▶ event seconds, leave call wall time) per join, through the library.
fn library_side(ns: &str, prog: &Path, n: usize) -> Vec<(String, f64, f64)> {
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            env!("CARGO_BIN_EXE_roce"),
            "exec",
            "-I",
            STACK,
            "--iface",
            "v1",
            "--transport",
            "raw",
            "--sa",
            SA,
            "--",
        ])
        .arg(prog)
        .arg(n.to_string())
        .stderr(Stdio::inherit())
        .output()
        .expect("roce exec");
    assert!(out.status.success(), "the C program: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0].to_string(), f[1].parse().unwrap(), f[2].parse().unwrap())
        })
        .collect()
}

/// The same through the engine in this process (the thread has entered the namespace).
fn engine_side(n: usize) -> Vec<(String, f64, f64)> {
    let o = roce::plumbing::port::PortOptions {
        iface: "v1".into(),
        ibsim: None,
        local: STACK.parse().unwrap(),
        prefix: None,
        mac: None,
        sa: Some(SA.parse().unwrap()),
        pcap: None,
        verbose: false,
        paths: roce_cm::MulticastPaths::BOTH,
        transport: Some(roce::plumbing::port::Transport::Raw),
        fault: Vec::new(),
        rx_queues: 1,
        gso: false,
        congestion: roce_cm::rc::Congestion::Off,
        rxe_flush_icrc: false,
    };
    let mut d = roce::plumbing::port::open_port(&o).unwrap_or_else(|e| panic!("{}", e.message));
    let mut out = Vec::new();
    for i in 0..n {
        let grp = format!("239.7.{}.{}", i / 250, 1 + i % 250);
        let group: IpAddr = grp.parse().unwrap();
        let id = d.stack.create_id(PortSpace::Udp, QpType::Ud).unwrap();
        d.stack.bind_addr(id, SocketAddr::new(STACK.parse().unwrap(), 0)).unwrap();
        let _ = d.stack.create_qp_for_id(id).unwrap();
        let t0 = Instant::now();
        let now = d.now();
        d.stack.join_multicast(now, id, group, JoinState::FULL_MEMBER).unwrap();
        let ev =
            d.wait_event(id, &[EventKind::MulticastJoin, EventKind::MulticastError], Duration::from_secs(5)).unwrap();
        assert_eq!(ev.map(|e| e.kind), Some(EventKind::MulticastJoin));
        let join = t0.elapsed().as_secs_f64();
        let tl = now_wall();
        let now = d.now();
        d.stack.leave_multicast(now, id, group).unwrap();
        let _ = d.wait_event(id, &[EventKind::MulticastLeft, EventKind::MulticastError], Duration::from_secs(5));
        out.push((grp, join, tl));
        let _ = d.run_for(Duration::from_millis(20));
        let now = d.now();
        let _ = d.stack.destroy_id(now, id);
    }
    out
}

/// Each group's SubnAdmDelete time in the capture.
fn deletes(pcap: &Path) -> Vec<(String, f64)> {
    let frames = roce_decode::capture::read_file(pcap).expect("the capture");
    frames
        .iter()
        .filter_map(|f| {
            let s = roce_decode::decode::decode_ethernet(&f.data).summary;
            if !s.contains("SubnAdmDelete(MCMemberRecord)") {
                return None;
            }
            let g = s.split("MGID=::ffff:").nth(1)?.split_whitespace().next()?.to_string();
            Some((g, f.timestamp.as_secs_f64()))
        })
        .collect()
}

fn stats(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    (v[v.len() / 2], v[(v.len() * 9 / 10).min(v.len() - 1)])
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let n = if full { 200 } else { 5 };
    let nets = veth::Nets::pair("capib", None, "198.18.6.11".parse().unwrap(), "198.18.6.12".parse().unwrap());
    let (mut sa, _lines, up) = veth::start_sa_server(&nets.1, SA.parse().unwrap(), &["--duration", "600"]);
    up.recv_timeout(Duration::from_secs(20)).expect("sa-server up");
    let dir = std::env::temp_dir().join(format!("capi_latency-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("sa.pcap");
    let mut cap = Command::new("ip")
        .args(["netns", "exec", &nets.1, "tcpdump", "-i", "v2", "-U", "-n", "-w"])
        .arg(&pcap)
        .args(["udp", "port", "4791"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tcpdump");
    std::thread::sleep(Duration::from_millis(500));
    let prog = build_program(&dir);
    let lib = library_side(&nets.0, &prog, n);
    // The engine's side on a thread inside the namespace.
    let ns = nets.0.clone();
    let eng = std::thread::spawn(move || {
        veth::enter(&ns);
        engine_side(n)
    })
    .join()
    .expect("the engine's side");
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill(2) on our tcpdump, so it writes its last frames.
    unsafe { libc::kill(cap.id() as i32, libc::SIGTERM) };
    let _ = cap.wait();
    sa.stop();
    let dels = deletes(&pcap);
    let leave = |side: &[(String, f64, f64)]| -> Vec<f64> {
        side.iter().filter_map(|(g, _, tl)| dels.iter().find(|(dg, _)| dg == g).map(|(_, t)| t - tl)).collect()
    };
    let (lj, le) = (lib.iter().map(|r| r.1).collect::<Vec<_>>(), leave(&lib));
    let (ej, ee) = (eng.iter().map(|r| r.1).collect::<Vec<_>>(), leave(&eng));
    assert_eq!(le.len(), n, "every library leave's Delete in the capture");
    assert_eq!(ee.len(), n, "every engine leave's Delete in the capture");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let (ljm, ljp) = stats(lj);
    let (ejm, ejp) = stats(ej);
    let (lem, lep) = stats(le);
    let (eem, eep) = stats(ee);
    println!("capi_latency: {n} joins a side, raw transport on a veth, SA roce sa-server; load {}", load.trim());
    println!("  join ▶ MULTICAST_JOIN  library {:>8.1} µs (p90 {:>8.1})  engine (roce mckey) {:>8.1} µs (p90 {:>8.1})  ratio {:.2}", ljm * 1e6, ljp * 1e6, ejm * 1e6, ejp * 1e6, ljm / ejm);
    println!("  leave ▶ Delete on wire library {:>8.1} µs (p90 {:>8.1})  engine (roce mckey) {:>8.1} µs (p90 {:>8.1})  ratio {:.2}", lem * 1e6, lep * 1e6, eem * 1e6, eep * 1e6, lem / eem);
    let _ = std::fs::remove_dir_all(&dir);
}
