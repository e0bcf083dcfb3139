//! No argument makes `roce` panic: every subcommand driven with hostile argument vectors
//! (inf, nan, -1, 1e30, huge counts, empty strings, non-UTF-8, wrong address families, unknown
//! interfaces) ends with a status from the one exit table, never 101 and never "panicked".
//! Runs cannot reach a network: interfaces do not exist, ibsim's socket name is one no sim
//! uses, and each run is bounded.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use proptest::prelude::*;

const SUBCOMMANDS: [&str; 16] = [
    "mckey",
    "sa-query",
    "sa-server",
    "sa-agent",
    "udaddy",
    "cmatose",
    "rping",
    "pingpong",
    "perftest",
    "demo",
    "decode",
    "analyze",
    "encode",
    "send",
    "bench",
    "fuzz-peer",
];

const OPTIONS: [&str; 62] = [
    "--peer",
    "--out",
    "-o",
    "-w",
    "-i",
    "--rate",
    "--loop",
    "--src-ip",
    "-c",
    "-a",
    "-I",
    "-V",
    "-d",
    "--iface=nope0",
    "-m",
    "-b",
    "-s",
    "-r",
    "-C",
    "-S",
    "-p",
    "-o",
    "-q",
    "-v",
    "--join-state",
    "--leave-after",
    "--no-sa",
    "--iface",
    "--ibsim",
    "--sa",
    "--prefix",
    "--pcap",
    "--mgid",
    "--ip",
    "--duration",
    "--device",
    "--timeout",
    "--loss",
    "--seed",
    "--ipv6",
    "--json",
    "--server",
    "--port",
    "--count",
    "--register",
    "--delete",
    "--resolve",
    "--service-id",
    "--service-name",
    "--lease",
    "--mac",
    "--reset-cmd",
    "--max-resets",
    "--reset-timeout",
    "--html",
    "--annotate",
    "--max-flows",
    "--target",
    "--service",
    "--log-cmd",
    "--log-every",
    "--fault",
];

fn hostile_values() -> Vec<OsString> {
    let mut v: Vec<OsString> = [
        "inf",
        "-inf",
        "nan",
        "NaN",
        "-1",
        "-0",
        "1e30",
        "1e308",
        "-1e-320",
        "0",
        "0.0000001",
        "86401",
        "4294967295",
        "4294967296",
        "18446744073709551616",
        "1025",
        "65536",
        "100000",
        "",
        " ",
        "0x",
        "0x0111",
        "::",
        "ff0e::1:2:3",
        "ff12:401b:ffff::1:2",
        "239.1.2.3",
        "198.18.1.1",
        "198.18.1.77",
        "0.0.0.0",
        "255.255.255.255",
        "fd00::1",
        "nope0",
        "full",
        "sendonly",
        "/nonexistent/x",
        "umad99",
        "drop=0.02,reorder=0.01,dup=0.005,seed=3",
        "drop=2",
        "reorder=nan,dir=up",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    v.push(OsString::from_vec(vec![0xff, 0xfe, b'x']));
    v.push(OsString::from("9".repeat(400)));
    v.push(OsString::from("a".repeat(5000)));
    v
}

/// Run `roce ARGS` with no network reachable; returns (status, stdout+stderr).
fn run(dir: &Path, args: &[OsString]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_roce"))
        .args(args)
        .current_dir(dir)
        .env("IBSIM_SOCKNAME", format!("roce-hostile-no-sim-{}", std::process::id()))
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "roce {args:?} did not end within 30 s:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = child.wait_with_output().unwrap();
    (out.status.code(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

fn assert_no_panic(dir: &Path, args: &[OsString]) -> (Option<i32>, String) {
    let (code, text) = run(dir, args);
    assert!(code.is_some(), "roce {args:?} was killed by a signal:\n{text}");
    assert_ne!(code, Some(101), "roce {args:?} panicked:\n{text}");
    assert!(!text.contains("panicked"), "roce {args:?}:\n{text}");
    assert!(
        matches!(code, Some(0..=3) | Some(128..=143)),
        "roce {args:?}: status {code:?} is not in the exit table:\n{text}"
    );
    (code, text)
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

/// `roce fuzz-peer --target cm` with every value it needs, on an interface that does not exist.
const FUZZ_CM_ON_NOPE0: [&str; 9] =
    ["fuzz-peer", "--target", "cm", "--iface", "nope0", "-b", "198.18.1.1", "--peer", "198.18.1.2"];

/// `roce mckey` with every value it needs, on an interface that does not exist.
const MCKEY_ON_NOPE0: [&str; 9] =
    ["mckey", "-m", "239.1.2.3", "-b", "198.18.1.1", "--iface", "nope0", "--sa", "198.18.1.2"];

/// The cases issue 11 saw panic or mislead, each with the bound or reason it must now name.
#[test]
fn the_cases_seen_are_refused_with_the_bound() {
    let dir = tempdir();
    let refused = |args: &[&str], want: &str| {
        let (code, text) = assert_no_panic(&dir, &os(args));
        assert_eq!(code, Some(2), "roce {args:?}: a usage error:\n{text}");
        assert!(text.contains(want), "roce {args:?}: the message names {want:?}:\n{text}");
    };
    for (args, want) in [
        (&["sa-server", "--iface", "nope0", "--ip", "198.18.1.2", "--duration", "inf"][..], "0 to 31536000, not inf"),
        (
            &["udaddy", "-s", "198.18.1.2", "-b", "198.18.1.1", "--iface", "nope0", "--timeout", "1e30"],
            "0 to 86400, not 1e30",
        ),
        (
            &["mckey", "-m", "ff0e::1:2:3", "-b", "198.18.1.1", "--iface", "nope0", "--sa", "198.18.1.2"],
            "address families disagree",
        ),
        (
            &["mckey", "-m", "198.18.1.77", "-b", "198.18.1.1", "--iface", "nope0", "--sa", "198.18.1.2"],
            "not a multicast address",
        ),
        (
            &["mckey", "-m", "239.1.2.3", "-b", "198.18.1.1", "--iface", "nope0", "--sa", "fd00::2"],
            "address families disagree",
        ),
        (
            &["fuzz-peer", "--iface", "nope0", "-b", "198.18.1.1", "--peer", "198.18.1.2", "--max-resets", "0"],
            "--max-resets must be between 1 and 1000, not 0",
        ),
        (
            &["fuzz-peer", "--iface", "nope0", "-b", "198.18.1.1", "--peer", "198.18.1.2", "--reset-timeout", "inf"],
            "--reset-timeout must be above 0 and at most 3600 s, not inf",
        ),
        (
            &["fuzz-peer", "--iface", "nope0", "-b", "198.18.1.1", "--peer", "198.18.1.2", "--service", "tcp:7174"],
            "--service and --log-cmd go with --target cm",
        ),
        (
            &["fuzz-peer", "--target", "nope", "--iface", "nope0", "-b", "198.18.1.1", "--peer", "198.18.1.2"],
            "frames, cm",
        ),
        (&["demo", "-C", "1025"], "0..=1024"),
        (&["demo", "-C", "4294967295"], "0..=1024"),
        (&["demo", "--loss", "nan"], "probability from 0 to 1, not nan"),
        (&["sa-server", "--iface", "nope0", "--ip", "198.18.1.2", "--ibsim"], "unexpected argument '--ibsim'"),
        (&["sa-server", "--iface", "nope0", "--ip", "198.18.1.2", "--sa", "198.18.1.3"], "unexpected argument '--sa'"),
        (&["sa-server", "--iface", "nope0", "--ip", "198.18.1.2", "--member-lifetime", "0"], "member lifetime 0 s"),
        (&["sa-server", "--iface", "nope0", "--ip", "198.18.1.2", "--requester-queue", "0"], "at least 1"),
        (
            &[
                "sa-server",
                "--iface",
                "nope0",
                "--ip",
                "198.18.1.2",
                "--requester-queue",
                "100",
                "--request-queue",
                "10",
            ],
            "is at most the whole queue",
        ),
        (&["udaddy", "-b", "198.18.1.1", "--ibsim"], "unexpected argument '--ibsim'"),
        (&["cmatose", "-b", "198.18.1.1", "--ibsim"], "unexpected argument '--ibsim'"),
        (&["mckey", "-m", "239.1.2.3", "--ibsim", "-s"], "cannot be used with"),
        (&["sa-query", "--ibsim", "-S", "--register", "--service-id", "1", "--lease", "4294967295"], "4294967295"),
        (&["sa-query", "--ibsim", "-S", "--lease", "60"], "--register"),
        (&["sa-query", "--ibsim", "-S", "--mgid", "ff12::1"], "cannot be used with"),
        (&["sa-query", "--ibsim", "-S", "--service-id", "0x1g"], "not a 64-bit number"),
        (&["sa-query", "--ibsim", "-S", "--service-name", &"n".repeat(64)], "at most 63"),
        (&["sa-query", "--ibsim", "--register"], "--service-id"),
        (&["sa-query", "--ibsim", "--resolve", "--delete", "--service-id", "1"], "cannot be used with"),
        (&["rping", "-c", "-a", "198.18.1.2", "--iface", "nope0", "--fault", "drop=1.5"], "not 1.5"),
        (&["perftest", "send_bw", "-I", "198.18.1.1", "--iface", "nope0", "--fault", "loss=0.1"], "unknown key 'loss'"),
        (&["udaddy", "-b", "198.18.1.1", "--iface", "nope0", "--fault", "dup=-1"], "not -1"),
        (&["mckey", "-m", "239.1.2.3", "--ibsim", "--fault", "drop=0.1"], "cannot be used with"),
    ] {
        refused(args, want);
    }
    // fuzz-peer --target cm with addresses and an interface, and one value it refuses.
    for (bad, want) in [
        (&["--service", "sctp:1"][..], "port space 'sctp' is neither tcp nor udp"),
        (&["--log-cmd", " "], "--log-cmd is empty"),
        (&["--log-every", "0"], "--log-every must be above 0"),
    ] {
        refused(&[&FUZZ_CM_ON_NOPE0[..], bad].concat(), want);
    }
    // mckey with a group, an address, an interface and an SA, and one value out of bounds.
    for (bad, want) in [
        (["--leave-after", "inf"], "not inf"),
        (["--leave-after", "-1"], "not -1"),
        (["--leave-after", "nan"], "not nan"),
        (["-C", "4294967295"], "0..=1000000"),
    ] {
        refused(&[&MCKEY_ON_NOPE0[..], &bad[..]].concat(), want);
    }
    // Cannot run here: no such interface, device or sim (3), never a panic.
    for args in [
        &MCKEY_ON_NOPE0[..],
        &["mckey", "-m", "239.1.2.3", "--ibsim"],
        &["sa-query", "--ibsim", "Hca9"],
        &["sa-agent", "--device", "/nonexistent/umad9", "--duration", "0"],
        &["sa-server", "--iface", "nope0", "--ip", "198.18.1.2"],
    ] {
        let (code, text) = assert_no_panic(&dir, &os(args));
        assert_eq!(code, Some(3), "roce {args:?}:\n{text}");
    }
    // Every command's help carries the exit table; -b is required, with no default shown.
    for sub in SUBCOMMANDS {
        let (code, text) = assert_no_panic(&dir, &os(&[sub, "--help"]));
        assert_eq!(code, Some(0));
        assert!(text.contains("Exit status (every command):") && text.contains("143 SIGTERM"), "{sub}:\n{text}");
        assert!(!text.contains("[default: 0.0.0.0]"), "{sub}:\n{text}");
    }
}

fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("roce-cli-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn arg_vector() -> impl Strategy<Value = Vec<OsString>> {
    let values = hostile_values();
    let pair = (0..OPTIONS.len(), prop::option::of(0..values.len()));
    (0..SUBCOMMANDS.len(), prop::collection::vec(pair, 0..7)).prop_map(move |(sub, pairs)| {
        let mut v = vec![OsString::from(SUBCOMMANDS[sub])];
        for (o, val) in pairs {
            v.push(OsString::from(OPTIONS[o]));
            if let Some(i) = val {
                v.push(values[i].clone());
            }
        }
        v
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random hostile vectors: any status of the table, never a panic.
    #[test]
    fn hostile_argument_vectors_never_panic(args in arg_vector()) {
        let dir = tempdir();
        assert_no_panic(&dir, &args);
    }
}
