//! A stopped `roce mckey` leaves, as a process on the kernel does (`ucma_close` ▶
//! `rdma_destroy_id`): joined to OpenSM through ibsim, SIGINT, SIGTERM, SIGHUP or a closed
//! stdout make it destroy its id — the SA Delete goes out and is answered — and exit 130, 143,
//! 129 or 141. OpenSM's `saquery -m` lists our port while joined and not afterwards. A SIGINT
//! ignored at start (a background job) stays ignored. Fails (never skips) without ibsim/OpenSM.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::ibsim_harness::Fabric;
use crate::MGID_CM;

/// Wait for `child` to exit, at most `limit`; kills it and fails otherwise.
fn wait_exit(child: &mut Child, limit: Duration, what: &str) -> std::process::ExitStatus {
    let end = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > end {
            let _ = child.kill();
            panic!("{what}: still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Start `mckey --ibsim` holding the group for a minute (under `sh -c` with `prefix`, e.g. a
/// trap), and read its stdout until the join event: returns the child and the lines read.
#[allow(clippy::zombie_processes)] // the caller waits for the child it gets back
fn joined_mckey(f: &Fabric, prefix: &str) -> (Child, BufReader<std::process::ChildStdout>, String) {
    let bin = env!("CARGO_BIN_EXE_roce");
    let mut cmd = Command::new("sh");
    // The signals at their default action whatever this test process inherited (a run under
    // nohup ignores SIGHUP, and the tool keeps a signal ignored at start, as a background job
    // expects): `prefix` decides what the tool starts with.
    crate::common::netns::default_signals(&mut cmd);
    let mut child = cmd
        .arg("-c")
        .arg(format!("{prefix} exec {bin} mckey --ibsim Hca2 -m 239.1.2.3 --leave-after 60"))
        .env("IBSIM_SOCKNAME", &f.sockname)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut r = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut l = String::new();
        let n = r.read_line(&mut l).unwrap();
        seen += &l;
        if l.contains("event: MULTICAST_JOIN") {
            return (child, r, seen);
        }
        if n == 0 || l.contains("MULTICAST_ERROR") {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mckey did not join: {seen}");
        }
    }
}

fn kill(child: &Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

fn stderr_of(child: &mut Child) -> String {
    let mut s = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut s);
    s
}

#[test]
fn signals_and_a_closed_stdout_leave_the_group() {
    let f = Fabric::start();
    for (sig, name, status) in
        [(libc::SIGINT, "SIGINT", 130), (libc::SIGTERM, "SIGTERM", 143), (libc::SIGHUP, "SIGHUP", 129)]
    {
        let (mut child, mut out, seen) = joined_mckey(&f, "");
        let during = f.mc_members(Some(MGID_CM));
        assert_eq!(during.len(), 1, "{name}: saquery lists our port while joined: {during:?}\n{seen}");
        kill(&child, sig);
        let st = wait_exit(&mut child, Duration::from_secs(10), name);
        let mut rest = String::new();
        out.read_to_string(&mut rest).unwrap();
        let err = stderr_of(&mut child);
        assert_eq!(st.code(), Some(status), "{name}: exit status\nstdout:\n{seen}{rest}\nstderr:\n{err}");
        assert!(err.contains(&format!("{name}: destroying 1 id(s)")), "{name}: the grace period is announced:\n{err}");
        assert!(err.contains("1 leave(s) answered"), "{name}: the Delete was answered:\n{err}");
        assert!(rest.contains("summary:") && rest.contains("counters:"), "{name}: summary after the leave:\n{rest}");
        let after = f.mc_members(Some(MGID_CM));
        assert!(after.is_empty(), "{name}: OpenSM no longer lists us after the stop: {after:?}");
    }

    // `| head -1`: the reader goes away while we hold the group.
    let (mut child, out, _) = joined_mckey(&f, "");
    assert_eq!(f.mc_members(Some(MGID_CM)).len(), 1);
    drop(out);
    let st = wait_exit(&mut child, Duration::from_secs(10), "closed stdout");
    let err = stderr_of(&mut child);
    assert_eq!(st.code(), Some(141), "closed stdout: exit status\n{err}");
    assert!(err.contains("standard output closed: destroying 1 id(s)") && !err.contains("panicked"), "{err}");
    assert!(f.mc_members(Some(MGID_CM)).is_empty(), "closed stdout: OpenSM no longer lists us");

    // A background job started with SIGINT ignored keeps ignoring it; SIGTERM still leaves.
    let (mut child, mut out, _) = joined_mckey(&f, "trap '' INT;");
    kill(&child, libc::SIGINT);
    // saquery takes far longer than a caught SIGINT's leave: still joined, still running.
    assert_eq!(f.mc_members(Some(MGID_CM)).len(), 1, "still joined after an ignored SIGINT");
    assert!(child.try_wait().unwrap().is_none(), "an ignored SIGINT must not end mckey");
    kill(&child, libc::SIGTERM);
    let st = wait_exit(&mut child, Duration::from_secs(10), "SIGTERM after an ignored SIGINT");
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert_eq!(st.code(), Some(143), "{rest}\n{}", stderr_of(&mut child));
    assert!(f.mc_members(Some(MGID_CM)).is_empty());
}
