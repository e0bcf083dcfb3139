//! Debian's perftest 4.5-0.17 (the package's binaries, unmodified) over roce's drop-in
//! libraries, both ends, on a veth pair: every RC test in both roles (`ib_write_bw`,
//! `ib_read_bw`, `ib_send_bw`, `ib_atomic_bw`, `ib_write_lat`, `ib_read_lat`, `ib_send_lat`,
//! `ib_atomic_lat`), UC WRITE and UD SEND where perftest offers them, on the raw transport and
//! (a bandwidth and a latency test) as nobody on udp. Asserted: both ends exit 0 and the
//! client prints its result row with the iterations asked for (perftest checks its own
//! completions: any error status ends it non-zero).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::netns::Netns;
use crate::debian;
use crate::library::exec;
use crate::veth::{as_nobody, finish_within, spawn, text, three_hosts};

/// The row under perftest's " #bytes" header.
fn row(out: &str) -> Option<Vec<String>> {
    let mut lines = out.lines().skip_while(|l| !l.trim_start().starts_with("#bytes"));
    lines.next();
    lines.next().map(|r| r.split_whitespace().map(str::to_string).collect())
}

/// Run `ib_<test> <args>` as server and client; the client retries while the server's TCP
/// listener is not up yet (perftest's client does not).
fn run(
    test: &str,
    args: &[&str],
    server: &dyn Fn(&Path, &[&str]) -> Command,
    client: &dyn Fn(&Path, &[&str]) -> Command,
) -> String {
    let bin = debian::bin(&format!("ib_{test}"));
    let srv = spawn(server(&bin, args));
    let mut last = String::new();
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(250));
        let c = finish_within(spawn(client(&bin, args)), Duration::from_secs(60));
        last = text(&c);
        if c.status.success() || !last.contains("Couldn't connect") {
            let s = finish_within(srv, Duration::from_secs(60));
            let st = text(&s);
            assert!(c.status.success(), "ib_{test} {args:?} client:\n{last}\nserver:\n{st}");
            assert!(s.status.success(), "ib_{test} {args:?} server:\n{st}\nclient:\n{last}");
            let r = row(&last).unwrap_or_else(|| panic!("ib_{test} {args:?}: no result row:\n{last}"));
            let iters = args.iter().skip_while(|a| **a != "-n").nth(1).copied().unwrap_or("1000");
            assert_eq!(r.get(1).map(String::as_str), Some(iters), "ib_{test} {args:?}: {r:?}");
            return format!("ib_{test} {}: {}\n", args.join(" "), r.join(" "));
        }
    }
    let s = finish_within(srv, Duration::from_secs(1));
    panic!("ib_{test} {args:?}: the server never listened:\n{last}\nserver:\n{}", text(&s));
}

#[test]
fn debian_perftest_against_itself_on_raw_sockets_and_as_nobody_on_udp() {
    let dir = crate::common::artefact_dir("capi_perftest");
    let mut report = String::new();
    let ns = Netns::bridge("capipt", 2);
    // The stacks on addresses of their own (.3 and .1); perftest's TCP exchange goes to the
    // server host's kernel address (veth1's .11).
    let server = |bin: &Path, args: &[&str]| {
        let mut a = vec!["-d", "roce0", "-x", "1"];
        a.extend(args);
        exec(&ns, &["-I", "198.18.1.3", "--iface", "veth1", "--transport", "raw"], bin, &a)
    };
    let client = |bin: &Path, args: &[&str]| {
        let mut a = vec!["-d", "roce0", "-x", "1"];
        a.extend(args);
        a.push("198.18.1.11");
        exec(&ns, &["-I", "198.18.1.1", "--iface", "veth0", "--transport", "raw"], bin, &a)
    };
    let cases: &[(&str, &[&str])] = &[
        ("write_bw", &["-s", "65536", "-n", "500"]),
        ("read_bw", &["-s", "65536", "-n", "500"]),
        ("send_bw", &["-s", "65536", "-n", "500"]),
        ("atomic_bw", &["-n", "500"]),
        ("atomic_bw", &["-n", "500", "-A", "FETCH_AND_ADD"]),
        ("write_lat", &["-n", "200"]),
        ("read_lat", &["-n", "500"]),
        ("send_lat", &["-n", "500"]),
        ("atomic_lat", &["-n", "500"]),
        ("write_bw", &["-c", "UC", "-s", "65536", "-n", "500"]),
        ("send_bw", &["-c", "UD", "-n", "500"]),
        ("send_lat", &["-c", "UD", "-n", "500"]),
    ];
    for (test, args) in cases {
        report.push_str(&run(test, args, &server, &client));
        std::fs::write(dir.join("report.txt"), &report).unwrap();
    }
    drop(ns);
    let (a, b, _c) = three_hosts("capiptu");
    let server = |bin: &Path, args: &[&str]| {
        let mut x = vec!["-d", "roce0", "-x", "1"];
        x.extend(args);
        as_nobody(&b, &["-I", "198.18.7.2", "--transport", "udp"], bin, &x)
    };
    let client = |bin: &Path, args: &[&str]| {
        let mut x = vec!["-d", "roce0", "-x", "1"];
        x.extend(args);
        x.push("198.18.7.2");
        as_nobody(&a, &["-I", "198.18.7.1", "--transport", "udp"], bin, &x)
    };
    for (test, args) in [("write_bw", &["-s", "65536", "-n", "500"][..]), ("send_lat", &["-n", "500"][..])] {
        report.push_str(&format!("udp, as nobody: {}", run(test, args, &server, &client)));
        std::fs::write(dir.join("report.txt"), &report).unwrap();
    }
    println!("{report}");
}
