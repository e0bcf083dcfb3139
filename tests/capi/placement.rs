//! The extended QP's work-request API (`ibv_create_qp_ex` / `rdma_create_qp_ex` with
//! `send_ops_flags`, `ibv_qp_to_qp_ex`, `ibv_wr_start` … `ibv_wr_complete`) and ATOMIC WRITE,
//! the operation only that API has in rdma-core v44 (issue 37 item 1), through the drop-in
//! libraries: a small C program built against Debian 12's headers, connected RC over roce to a
//! server of its own on a veth pair (two processes, raw sockets). The same program runs
//! against the kernel's rxe in tests/interop/capi.rs.
//!
//! What rxe gives, from rxe_resp.c and rdma-core's providers/rxe (spec/rc.md "Memory
//! placement"):
//! - one batch, ATOMIC WRITE then an RDMA READ of the same bytes: both complete, the READ
//!   sees the 8 bytes written (the responder executes in PSN order), the ATOMIC WRITE's
//!   completion opcode is IBV_WC_ATOMIC_WRITE (9);
//! - a SEND with inline data through `ibv_wr_set_inline_data`: the server receives the bytes;
//! - an aborted batch sends nothing;
//! - an ATOMIC WRITE to an address that is not 8-byte aligned: IBV_WC_REM_INV_REQ_ERR (9);
//! - FLUSH (`-f`; rdma-core 45's `ibv_wr_flush`, the member after v44's struct) of a range
//!   and of the whole region, once the server granted FLUSH_GLOBAL on its region and QP (its
//!   "go" SEND, posted after the grant, says so; CI once saw the FLUSH land between the
//!   server's rdma_accept and its grant): both IBV_WC_FLUSH (8).

use std::time::Duration;

use crate::common;
use crate::common::netns::Netns;
use crate::debian;
use crate::expect::{ATOMWR_CLIENT, ATOMWR_FLUSH, ATOMWR_SERVER};
use crate::library::exec;
use crate::veth::{finish_within, spawn, text};

/// The program (also built for the kernel rxe guest by tests/interop/capi.rs).
pub const ATOMWR: &str = include_str!("atomwr.c");

#[test]
fn atomic_write_and_the_work_request_builder_through_the_library() {
    let dir = common::artefact_dir("capi_placement");
    let prog = debian::build_c_for_both(&dir, "atomwr", ATOMWR);
    let ns = Netns::bridge("capiaw", 2);
    let pcap = dir.join("server.pcap");
    let p = pcap.display().to_string();
    let server = spawn(exec(
        &ns,
        &["-I", "198.18.1.3", "--iface", "veth1", "--transport", "raw", "--pcap", &p],
        &prog,
        &["-s", "198.18.1.3", "-f"],
    ));
    std::thread::sleep(Duration::from_millis(800));
    let client = spawn(exec(
        &ns,
        &["-I", "198.18.1.1", "--iface", "veth0", "--transport", "raw"],
        &prog,
        &["-c", "198.18.1.3", "-f"],
    ));
    let client = finish_within(client, Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) on our own child: the server loops until killed.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    let server = finish_within(server, Duration::from_secs(10));
    let (out, sout) = (text(&client), text(&server));
    std::fs::write(dir.join("outputs.txt"), format!("client:\n{out}\nserver:\n{sout}")).unwrap();
    assert!(client.status.success(), "client:\n{out}\nserver:\n{sout}");
    for want in ATOMWR_CLIENT {
        assert!(out.lines().any(|l| l == want), "wanted '{want}':\n{out}\nserver:\n{sout}");
    }
    for want in ATOMWR_FLUSH {
        assert!(out.lines().any(|l| l == want), "wanted '{want}':\n{out}\nserver:\n{sout}");
    }
    assert!(sout.lines().any(|l| l == "server flush_access=0"), "the server's QP takes FLUSH:\n{sout}");
    assert!(sout.lines().any(|l| l == ATOMWR_SERVER), "wanted '{ATOMWR_SERVER}':\n{sout}");
    // On the wire: the ATOMIC WRITE and its empty READ response, as tshark and roce decode
    // read them.
    let dec = std::process::Command::new(env!("CARGO_BIN_EXE_roce")).arg("decode").arg(&pcap).output().unwrap();
    let lines = String::from_utf8_lossy(&dec.stdout).to_string();
    for op in ["RC_ATOMIC_WRITE", "RC_FLUSH", "RC_RDMA_READ_RESPONSE_ONLY", "RC_SEND_ONLY"] {
        assert!(lines.contains(op), "no {op} in the server's capture:\n{lines}");
    }
}
