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
//! - an ATOMIC WRITE to an address that is not 8-byte aligned: IBV_WC_REM_INV_REQ_ERR (9).

use std::time::Duration;

use crate::common;
use crate::common::netns::Netns;
use crate::debian;
use crate::library::exec;
use crate::veth::{finish_within, spawn, text};

/// The program (also built for the kernel rxe guest by tests/interop/capi.rs).
pub const ATOMWR: &str = r#"#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

struct adv { uint64_t addr; uint32_t rkey; } __attribute__((packed));

static struct rdma_event_channel *ch;

static struct rdma_cm_event *expect(enum rdma_cm_event_type t) {
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev)) { perror("rdma_get_cm_event"); exit(2); }
    if (ev->event != t) { fprintf(stderr, "event %s, wanted %s\n", rdma_event_str(ev->event), rdma_event_str(t)); exit(2); }
    return ev;
}

static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc) {
    for (long i = 0; i < 400000000L; i++) {
        int n = ibv_poll_cq(cq, 1, wc);
        if (n < 0) return -1;
        if (n == 1) return wc->status;
    }
    return -2;
}

static int server(const char *addr) {
    struct rdma_cm_id *listen;
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(7472) };
    inet_pton(AF_INET, addr, &sin.sin_addr);
    if (rdma_create_id(ch, &listen, NULL, RDMA_PS_TCP) || rdma_bind_addr(listen, (struct sockaddr *)&sin) || rdma_listen(listen, 8)) { perror("listen"); return 2; }
    static uint64_t buf[512] __attribute__((aligned(64)));
    static char msg[64];
    struct ibv_cq *cq = NULL;
    printf("listening\n"); fflush(stdout);
    for (;;) {
        struct rdma_cm_event *ev;
        if (rdma_get_cm_event(ch, &ev)) return 2;
        if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            struct rdma_cm_id *id = ev->id;
            for (int i = 0; i < 512; i++) buf[i] = 0x0101010101010101ULL * (uint64_t)(i & 0xff);
            cq = ibv_create_cq(id->verbs, 16, NULL, NULL, 0);
            struct ibv_qp_init_attr a = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
                .cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 } };
            if (!cq || rdma_create_qp(id, NULL, &a)) { perror("qp"); return 2; }
            struct ibv_mr *mr = ibv_reg_mr(id->pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
            struct ibv_mr *mmr = ibv_reg_mr(id->pd, msg, sizeof msg, IBV_ACCESS_LOCAL_WRITE);
            struct ibv_sge sge = { (uintptr_t)msg, sizeof msg, mmr->lkey };
            struct ibv_recv_wr rw = { .wr_id = 7, .sg_list = &sge, .num_sge = 1 }, *bad;
            if (!mr || !mmr || ibv_post_recv(id->qp, &rw, &bad)) { perror("mr/recv"); return 2; }
            struct adv ad = { (uintptr_t)buf, mr->rkey };
            struct rdma_conn_param p = { .private_data = &ad, .private_data_len = sizeof ad, .responder_resources = 4, .initiator_depth = 4, .retry_count = 7, .rnr_retry_count = 7 };
            rdma_ack_cm_event(ev);
            if (rdma_accept(id, &p)) { perror("accept"); return 2; }
        } else if (ev->event == RDMA_CM_EVENT_DISCONNECTED) {
            struct rdma_cm_id *id = ev->id;
            rdma_ack_cm_event(ev);
            struct ibv_wc wc;
            int n = cq ? ibv_poll_cq(cq, 1, &wc) : 0;
            printf("server word=%016llx recv=%d status=%d len=%u text=%.*s\n", (unsigned long long)buf[1], n,
                   n == 1 ? (int)wc.status : -1, n == 1 ? wc.byte_len : 0, n == 1 ? (int)wc.byte_len : 0, msg);
            fflush(stdout);
            rdma_disconnect(id);
        } else {
            rdma_ack_cm_event(ev);
        }
    }
}

static int client(const char *dst) {
    struct rdma_cm_id *id;
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(7472) };
    inet_pton(AF_INET, dst, &sin.sin_addr);
    if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) || rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 2000)) { perror("resolve"); return 2; }
    rdma_ack_cm_event(expect(RDMA_CM_EVENT_ADDR_RESOLVED));
    if (rdma_resolve_route(id, 2000)) return 2;
    rdma_ack_cm_event(expect(RDMA_CM_EVENT_ROUTE_RESOLVED));
    struct ibv_cq *cq = ibv_create_cq(id->verbs, 16, NULL, NULL, 0);
    struct ibv_qp_init_attr_ex a = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 32 },
        .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = id->pd,
        .send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_WRITE };
    if (!cq || rdma_create_qp_ex(id, &a)) { perror("rdma_create_qp_ex"); return 2; }
    struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(id->qp);
    printf("case=qp_ex ok=%d\n", qpx != NULL);
    if (!qpx) return 2;
    static uint64_t local[8] __attribute__((aligned(64)));
    struct ibv_mr *mr = ibv_reg_mr(id->pd, local, sizeof local, IBV_ACCESS_LOCAL_WRITE);
    struct rdma_conn_param p = { .responder_resources = 4, .initiator_depth = 4, .retry_count = 7, .rnr_retry_count = 7 };
    if (!mr || rdma_connect(id, &p)) { perror("connect"); return 2; }
    struct rdma_cm_event *ev = expect(RDMA_CM_EVENT_ESTABLISHED);
    struct adv peer;
    memcpy(&peer, ev->param.conn.private_data, sizeof peer);
    rdma_ack_cm_event(ev);

    uint64_t v = 0x1122334455667788ULL;
    ibv_wr_start(qpx);
    qpx->wr_id = 1;
    qpx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_atomic_write(qpx, peer.rkey, peer.addr + 8, &v);
    v = 0; /* copied at the call */
    qpx->wr_id = 2;
    ibv_wr_rdma_read(qpx, peer.rkey, peer.addr);
    ibv_wr_set_sge(qpx, mr->lkey, (uintptr_t)local, 16);
    printf("case=batch complete=%d\n", ibv_wr_complete(qpx));
    struct ibv_wc wc;
    int st = wait_wc(cq, &wc);
    printf("case=atomic_write status=%d opcode=%d wr_id=%llu\n", st, (int)wc.opcode, (unsigned long long)wc.wr_id);
    st = wait_wc(cq, &wc);
    printf("case=read status=%d wr_id=%llu same=%d\n", st, (unsigned long long)wc.wr_id, local[1] == 0x1122334455667788ULL);

    ibv_wr_start(qpx);
    qpx->wr_id = 3;
    ibv_wr_send(qpx);
    ibv_wr_set_sge(qpx, mr->lkey, (uintptr_t)local, 8);
    ibv_wr_abort(qpx);
    int n = 0;
    for (int i = 0; i < 200 && n == 0; i++) { n = ibv_poll_cq(cq, 1, &wc); usleep(1000); }
    printf("case=abort wcs=%d\n", n);

    ibv_wr_start(qpx);
    qpx->wr_id = 4;
    qpx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    ibv_wr_send(qpx);
    char text[] = "done!";
    ibv_wr_set_inline_data(qpx, text, 5);
    int rc = ibv_wr_complete(qpx);
    memset(text, 'x', 5); /* copied at the call */
    st = wait_wc(cq, &wc);
    printf("case=send_inline complete=%d status=%d wr_id=%llu\n", rc, st, (unsigned long long)wc.wr_id);

    ibv_wr_start(qpx);
    qpx->wr_id = 5;
    qpx->wr_flags = IBV_SEND_SIGNALED;
    v = 1;
    ibv_wr_atomic_write(qpx, peer.rkey, peer.addr + 4, &v);
    rc = ibv_wr_complete(qpx);
    st = wait_wc(cq, &wc);
    printf("case=atomic_write_misaligned complete=%d status=%d\n", rc, st);
    fflush(stdout);

    rdma_disconnect(id);
    rdma_ack_cm_event(expect(RDMA_CM_EVENT_DISCONNECTED));
    rdma_destroy_qp(id);
    ibv_dereg_mr(mr);
    ibv_destroy_cq(cq);
    rdma_destroy_id(id);
    return 0;
}

int main(int argc, char **argv) {
    ch = rdma_create_event_channel();
    if (!ch) { perror("channel"); return 2; }
    if (argc == 3 && !strcmp(argv[1], "-s")) return server(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "-c")) return client(argv[2]);
    fprintf(stderr, "usage: atomwr -s ADDR | -c ADDR\n");
    return 2;
}
"#;

/// The client's lines every RC peer with ATOMIC WRITE gives (rxe 6.2 on, roce).
pub const CLIENT_WANTS: [&str; 7] = [
    "case=qp_ex ok=1",
    "case=batch complete=0",
    "case=atomic_write status=0 opcode=9 wr_id=1",
    "case=read status=0 wr_id=2 same=1",
    "case=abort wcs=0",
    "case=send_inline complete=0 status=0 wr_id=4",
    "case=atomic_write_misaligned complete=0 status=9",
];

/// The server's line once the client has gone: the word the ATOMIC WRITE placed, and the
/// inline SEND's bytes.
pub const SERVER_WANTS: &str = "server word=1122334455667788 recv=1 status=0 len=5 text=done!";

#[test]
fn atomic_write_and_the_work_request_builder_through_the_library() {
    let dir = common::artefact_dir("capi_placement");
    let prog = debian::build_c(&dir, "atomwr", ATOMWR);
    let ns = Netns::bridge("capiaw", 2);
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
    for want in CLIENT_WANTS {
        assert!(out.lines().any(|l| l == want), "wanted '{want}':\n{out}\nserver:\n{sout}");
    }
    assert!(sout.lines().any(|l| l == SERVER_WANTS), "wanted '{SERVER_WANTS}':\n{sout}");
    // On the wire: the ATOMIC WRITE and its empty READ response, as tshark and roce decode
    // read them.
    let dec = std::process::Command::new(env!("CARGO_BIN_EXE_roce")).arg("decode").arg(&pcap).output().unwrap();
    let lines = String::from_utf8_lossy(&dec.stdout).to_string();
    for op in ["RC_ATOMIC_WRITE", "RC_RDMA_READ_RESPONSE_ONLY", "RC_SEND_ONLY"] {
        assert!(lines.contains(op), "no {op} in the server's capture:\n{lines}");
    }
}
