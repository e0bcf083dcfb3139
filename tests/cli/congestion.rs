//! `roce bench congestion` in test mode (a hundredth of a virtual second): the JSON document's
//! shape, DCQCN's reaction (CNPs, rate cuts) against `--cc off`'s none, one run per seed, and
//! bad settings as usage errors. The figures themselves are a benchmark's (spec/benchmarks.md),
//! not asserted.

use std::process::Command;

use serde_json::Value;

fn bench(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_roce"))
        .args(["bench", "congestion", "--duration", "0.01"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(args: &[&str]) -> (String, Value) {
    let (code, out, err) = bench(&[args, &["--json"]].concat());
    assert_eq!(code, Some(0), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    (out, v)
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k}: {v}"))
}

#[test]
fn the_json_document_has_every_figure_and_dcqcn_reacts() {
    let (_, v) = json(&["--flows", "2", "--rate", "2", "--cc", "dcqcn"]);
    let cfg = &v["config"];
    assert_eq!((u(cfg, "flows"), cfg["cc"].as_str(), cfg["rate_gbit"].as_f64()), (2, Some("dcqcn"), Some(2.0)));
    assert_eq!((u(cfg, "kmin"), u(cfg, "kmax"), u(cfg, "buffer")), (5_000, 200_000, 12_000_000));
    let flows = v["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2);
    for f in flows {
        for k in ["messages", "retransmitted_pkts", "ack_timeouts", "failed", "ce_received", "cnp_sent", "cnp_received"]
        {
            u(f, k);
        }
        assert!(f["goodput_gbit"].as_f64().unwrap() > 0.0, "{f}");
        assert!(u(f, "rate_cuts") > 0 && u(f, "cnp_sent") > 0, "{f}");
        assert_eq!(u(f, "cnp_sent"), u(f, "cnp_received"), "every CNP arrives (the way back has no queue)");
        for k in ["fast_recovery", "additive", "hyper"] {
            u(&f["rate_increases"], k);
        }
        assert!(f["final_rate_gbit"].as_f64().unwrap() <= 2.0);
    }
    let fairness = v["fairness"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&fairness));
    assert!(v["goodput_gbit"].as_f64().unwrap() > 0.0 && v["goodput_of_rate"].as_f64().unwrap() <= 1.0);
    assert!(u(&v, "cnps") > 0 && u(&v, "rate_cuts") > 0 && u(&v, "ce_marks") > 0, "{v}");
    assert_eq!(u(&v, "drops"), 0);
    let q = &v["queue_bytes"];
    assert!(u(q, "p50") <= u(q, "p99") && u(q, "p99") <= u(q, "max") && u(q, "max") <= 12_000_000, "{q}");
    assert!(u(&v, "packets") > 0 && u(&v, "events") > 0);
    // Off: nothing ECN-capable to mark, so no CNP and no cut.
    let (_, off) = json(&["--flows", "2", "--rate", "2", "--cc", "off"]);
    assert_eq!((u(&off, "ce_marks"), u(&off, "cnps"), u(&off, "rate_cuts")), (0, 0, 0), "{off}");
    // The table names the same figures.
    let (code, text, err) = bench(&["--flows", "2", "--rate", "2"]);
    assert_eq!(code, Some(0), "{err}");
    for want in ["goodput Gbit/s", "Jain's fairness", "dropped", "CE-marked", "queue p50", "p99", "CNPs"] {
        assert!(text.contains(want), "{want}: {text}");
    }
}

#[test]
fn a_seed_fixes_the_run() {
    let args = ["--flows", "3", "--rate", "2", "--cc", "dcqcn", "--seed", "42"];
    let (a, _) = json(&args);
    let (b, _) = json(&args);
    assert_eq!(a, b, "the same seed, the same document");
    let (c, _) = json(&["--flows", "3", "--rate", "2", "--cc", "dcqcn", "--seed", "43"]);
    assert_ne!(a, c, "another seed, another run");
}

#[test]
fn bad_settings_are_usage_errors() {
    for (args, want) in [
        (&["--rate", "0"][..], "above 0"),
        (&["--rate", "nan"], "not nan"),
        (&["--flows", "0"], "1..=1024"),
        (&["--pmax", "2"], "probability"),
        (&["--kmin", "300000"], "K_min 300000 above K_max 200000"),
        (&["--buffer", "100"], "hold no two packets"),
        (&["--delay", "inf"], "not inf"),
        (&["--cc", "dctcp"], "dctcp"),
    ] {
        let (code, _, err) = bench(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {want}: {err}");
    }
}
