//! The HTML report in Debian's chromium, headless: it renders (the DOM chromium dumps holds
//! the plots' SVG elements), with no console error; `ROCE_SCREENSHOT=path` also saves a
//! screenshot (how spec/analyze-report.png is made).

use std::path::Path;
use std::process::Command;

use super::captures;
use super::common;
use super::oracle::sample;

fn chromium() -> &'static str {
    let ok = Command::new("chromium").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    assert!(ok, "chromium is required (the HTML report's browser): run tests/setup.sh");
    "chromium"
}

fn headless(dir: &Path) -> Command {
    let mut c = Command::new(chromium());
    c.args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .args(["--enable-logging=stderr", "--v=0"]);
    c
}

#[test]
fn html_report_renders_in_chromium_with_its_plots() {
    let dir = common::artefact_dir("analyze-html");
    let pcap = captures::cm_rc(&dir, 3);
    let (lossy, qa, _) = captures::lossy_rc(&dir, 12);
    let congested = captures::with_ecn_and_cnps(&dir, &lossy, qa);
    // One report of an RC connection made through the CM, one of CM and SA exchanges, one of
    // an RC flow with ECN CE marks and CNPs back to its sender.
    for (name, cap) in [("rc", pcap.as_path()), ("sample", sample().as_path()), ("congestion", congested.as_path())] {
        let html = dir.join(format!("{name}.html"));
        let st = captures::roce()
            .args(["analyze", "-q", "--html"])
            .arg(&html)
            .arg(cap)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
        let page = std::fs::read_to_string(&html).unwrap();
        assert!(!page.contains("<script"), "no script");
        assert!(
            !page.contains("http://")
                || page.matches("http://").all(|_| page.contains("xmlns=\"http://www.w3.org/2000/svg\""))
        );
        let url = format!("file://{}", html.display());
        let out = headless(&dir).arg("--dump-dom").arg(&url).output().unwrap();
        assert!(out.status.success(), "chromium: {}", String::from_utf8_lossy(&out.stderr));
        let dom = String::from_utf8_lossy(&out.stdout);
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(!log.contains("Uncaught"), "script error: {log}");
        assert!(!log.contains(":CONSOLE("), "console message: {log}");
        assert!(dom.contains("class=\"throughput-plot\""), "throughput plot in the DOM");
        assert!(dom.contains("class=\"ladder\""), "ladder in the DOM");
        if name != "congestion" {
            assert!(!dom.contains("class=\"rate-plot\""), "no congestion plot without CE or CNPs");
        }
        if name == "rc" {
            assert!(dom.contains("class=\"psn-plot\""), "PSN plot");
            assert!(dom.contains("class=\"retx\""), "retransmissions marked");
            assert!(dom.contains("class=\"nak\""), "NAKs marked");
            assert!(dom.contains("class=\"ack\""), "ACKs marked");
            assert!(dom.contains("class=\"bar\""), "latency histogram bars");
            assert!(dom.matches("class=\"rung\"").count() >= 5, "REQ, REP, RTU, DREQ, DREP");
        } else if name == "congestion" {
            // The sender's rate over time, CE marks below it, CNPs above.
            assert!(dom.contains("class=\"rate-plot\""), "rate plot");
            assert!(dom.contains("class=\"rate\""), "the rate's line");
            assert!(dom.contains("class=\"ce\""), "CE marks");
            assert!(dom.contains("class=\"cnp\""), "CNPs");
        } else {
            assert!(dom.matches("class=\"rung\"").count() >= 10, "CM and SA ladder rungs");
            assert!(dom.matches("class=\"members\"").count() >= 2, "members over time of the SA and IGMP groups");
        }
        if let Some(shot) = std::env::var_os("ROCE_SCREENSHOT").filter(|_| name == "rc") {
            let st = headless(&dir)
                .arg(format!("--screenshot={}", Path::new(&shot).display()))
                .arg("--window-size=1000,2700")
                .arg(&url)
                .status()
                .unwrap();
            assert!(st.success());
        }
    }
}
