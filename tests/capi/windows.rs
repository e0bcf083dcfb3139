//! Memory windows through the drop-in libraries (issue 37 item 1): tests/capi/mw.c, a C
//! program built against Debian 12's headers, server and client over roce on a veth pair
//! (raw). What rxe's users see (rxe_mw.c, rdma-core providers/rxe): a type 2 window bound by
//! an IBV_WR_BIND_MW work request and a type 1 window by `ibv_bind_mw` both complete as
//! IBV_WC_BIND_MW (5), `ibv_bind_mw` moves the window's key on; READs through either window
//! return the server's bytes; a SEND with invalidate of the type 2 key arrives with
//! IBV_WC_WITH_INV and that key; a READ through it afterwards is IBV_WC_REM_ACCESS_ERR (10);
//! on a second connection a READ of a region in the server's second PD is
//! IBV_WC_REM_ACCESS_ERR (10) too (rxe serves only regions of the QP's PD).

use std::time::Duration;

use crate::common;
use crate::common::netns::Netns;
use crate::debian;
use crate::expect::{MW_CLIENT, MW_SERVER};
use crate::library::exec;
use crate::veth::{finish_within, spawn, text};

#[test]
fn memory_windows_through_the_library() {
    let dir = common::artefact_dir("capi_windows");
    let prog = debian::build_c_for_both(&dir, "mw", include_str!("mw.c"));
    let ns = Netns::bridge("capimw", 2);
    let pcap = dir.join("server.pcap");
    let p = pcap.display().to_string();
    let server = spawn(exec(
        &ns,
        &["-I", "198.18.1.3", "--iface", "veth1", "--transport", "raw", "--pcap", &p],
        &prog,
        &["-s", "198.18.1.3"],
    ));
    std::thread::sleep(Duration::from_millis(800));
    let client =
        spawn(exec(&ns, &["-I", "198.18.1.1", "--iface", "veth0", "--transport", "raw"], &prog, &["-c", "198.18.1.3"]));
    let client = finish_within(client, Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) on our own child: the server loops until killed.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    let server = finish_within(server, Duration::from_secs(10));
    let (out, sout) = (text(&client), text(&server));
    std::fs::write(dir.join("outputs.txt"), format!("client:\n{out}\nserver:\n{sout}")).unwrap();
    assert!(client.status.success(), "client:\n{out}\nserver:\n{sout}");
    for want in MW_CLIENT {
        assert!(out.lines().any(|l| l == want), "wanted '{want}':\n{out}\nserver:\n{sout}");
    }
    for want in MW_SERVER {
        assert!(sout.lines().any(|l| l == want), "wanted '{want}' of the server:\n{sout}\nclient:\n{out}");
    }
    let dec = std::process::Command::new(env!("CARGO_BIN_EXE_roce")).arg("decode").arg(&pcap).output().unwrap();
    let lines = String::from_utf8_lossy(&dec.stdout).to_string();
    assert!(lines.contains("RC_SEND_ONLY_WITH_INVALIDATE"), "no SEND with invalidate in the capture:\n{lines}");
}
