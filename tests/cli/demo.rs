//! `roce demo` end to end: the exact frame sequence (by decode) and events, for IPv4 and IPv6,
//! and with 30% loss; exit codes from the binary.

use std::process::Command;

use roce::demo::{simulate as run, DemoOptions};

/// One token per timeline line: the frame's kind or the event's name.
fn tokens(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter_map(|l| {
            if let Some(i) = l.find("RDMA_CM_EVENT_") {
                let who = if l.contains("event A:") { "A" } else { "B" };
                return Some(format!("{who}:{}", l[i + 14..].split(' ').next().unwrap()));
            }
            let from = l.split_whitespace().nth(1)?;
            let kind = if l.contains("SubnAdm") {
                l.split(" | ").nth(1)?.split('(').next()?.to_string()
            } else if l.contains("ARP who has") {
                "ARP?".into()
            } else if l.contains("ARP ") {
                "ARP!".into()
            } else if l.contains("Neighbor Solicitation") {
                "NS".into()
            } else if l.contains("Neighbor Advertisement") {
                "NA".into()
            } else if l.contains("IGMPv3") || l.contains("MLDv2") {
                if l.contains("EXCLUDE") || l.contains("[4 ") {
                    "report-join".into()
                } else {
                    "report-leave".into()
                }
            } else if l.contains("QP=0xffffff") {
                "data".into()
            } else {
                return None;
            };
            Some(format!("{from}:{kind}"))
        })
        .collect()
}

fn expected(neigh_q: &str, neigh_a: &str) -> Vec<String> {
    let v: Vec<String> = vec![
        "A:report-join",
        &format!("A:{neigh_q}"),
        &format!("SA:{neigh_a}"),
        "A:SubnAdmSet",
        "SA:SubnAdmGetResp",
        "A:MULTICAST_JOIN",
        "B:report-join",
        &format!("B:{neigh_q}"),
        &format!("SA:{neigh_a}"),
        "B:SubnAdmSet",
        "SA:SubnAdmGetResp",
        "B:MULTICAST_JOIN",
        "A:data",
        "A:data",
        "A:data",
        "A:data",
        "A:data",
        "A:report-leave",
        "A:SubnAdmDelete",
        "SA:SubnAdmDeleteResp",
        "A:MULTICAST_LEFT",
        "B:report-leave",
        "B:SubnAdmDelete",
        "SA:SubnAdmDeleteResp",
        "B:MULTICAST_LEFT",
        "A:report-leave",
        "B:report-leave",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    // The joins' report repeats (due a second later) are cancelled by the leaves; the leaves'
    // repeats go out a second after them.
    v
}

#[test]
fn ipv4_exact_sequence() {
    let r = run(&DemoOptions::default());
    assert!(r.ok(), "{:#?}", r.failed);
    assert_eq!(tokens(&r.lines), expected("ARP?", "ARP!"), "{}", r.lines.join("\n"));
    assert_eq!((r.sent, r.received), (5, 5));
}

#[test]
fn ipv6_exact_sequence() {
    let r = run(&DemoOptions { ipv6: true, ..DemoOptions::default() });
    assert!(r.ok(), "{:#?}", r.failed);
    assert_eq!(tokens(&r.lines), expected("NS", "NA"), "{}", r.lines.join("\n"));
}

#[test]
fn thirty_percent_loss_still_verifies_every_step() {
    for ipv6 in [false, true] {
        let r = run(&DemoOptions { loss: 0.3, ipv6, ..DemoOptions::default() });
        assert!(r.ok(), "ipv6={ipv6}: {:#?}\n{}", r.failed, r.lines.join("\n"));
        let t = tokens(&r.lines);
        for must in ["A:SubnAdmSet", "A:SubnAdmDelete", "SA:SubnAdmDeleteResp", "A:MULTICAST_LEFT", "B:MULTICAST_LEFT"]
        {
            assert!(t.iter().any(|x| x == must), "{must} missing: {t:?}");
        }
    }
}

#[test]
fn binary_exit_codes_and_pcap() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli_demo");
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("demo.pcap");
    let out = Command::new(env!("CARGO_BIN_EXE_roce")).args(["demo", "--pcap"]).arg(&pcap).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("verdict: PASS"));
    // The pcap decodes: every RoCEv2 frame with a good ICRC.
    let dec = Command::new(env!("CARGO_BIN_EXE_roce")).args(["decode", "--json"]).arg(&pcap).output().unwrap();
    let text = String::from_utf8(dec.stdout).unwrap();
    assert!(text.lines().count() > 20);
    for l in text.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert!(v.get("error").is_none(), "{l}");
        if v["kind"] == "rocev2" {
            assert_eq!(v["icrc"], "ok");
        }
    }
    let bad = Command::new(env!("CARGO_BIN_EXE_roce")).args(["demo", "--loss", "1.5"]).output().unwrap();
    assert!(!bad.status.success());
    // Total loss: nothing can be verified, and the exit code says so.
    let lost = Command::new(env!("CARGO_BIN_EXE_roce")).args(["demo", "--loss", "1.0"]).output().unwrap();
    assert!(!lost.status.success());
    assert!(String::from_utf8_lossy(&lost.stdout).contains("verdict: FAIL"));
}

/// Under loss, a step that did not happen never passes: when B never joined, "received 0 of 5
/// (loss allowed)" is not marked verified; the step fails and says why.
#[test]
fn no_step_passes_that_did_not_happen() {
    let mut b_missed = 0;
    for seed in 1..=30 {
        let r = run(&DemoOptions { loss: 0.3, seed, ..DemoOptions::default() });
        if r.failed.iter().any(|f| f.starts_with("B: MULTICAST_JOIN")) {
            b_missed += 1;
            assert!(!r.passed.iter().any(|p| p.starts_with("B: received")), "seed {seed}: {:#?}", r.passed);
            assert!(r.failed.iter().any(|f| f.contains("not tried: B did not join")), "seed {seed}: {:#?}", r.failed);
            assert!(!r.ok());
        }
    }
    assert!(b_missed > 0, "some seed at 30 % loss loses B's join (else this test checks nothing)");
}

/// The demo states its limits, and refuses a count beyond B's receive queue with the bound.
#[test]
fn limits_are_stated_and_enforced() {
    let out = Command::new(env!("CARGO_BIN_EXE_roce")).args(["demo", "-C", "2"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("demo: limits: -C at most 1024 (B's receive queue)"), "{text}");
    for c in ["1025", "4294967295"] {
        let out = Command::new(env!("CARGO_BIN_EXE_roce")).args(["demo", "-C", c]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("is not in 0..=1024"), "{err}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_roce")).args(["demo", "-C", "1024"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("1024 of 1024 datagrams received"), "{text}");
    // -q: the verdict only.
    let out = Command::new(env!("CARGO_BIN_EXE_roce")).args(["demo", "-q"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.starts_with("verdict: PASS"), "{text}");
}
