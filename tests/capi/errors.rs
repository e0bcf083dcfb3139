//! Bad work requests through the drop-in libraries end as the kernel's rxe ends them, never
//! as a crash of the program (issue 35 item 4): a small C program built against Debian 12's
//! headers, connected RC over roce to a server of its own (two processes on a veth pair),
//! opens one connection per case and prints each completion's status, or the post's errno.
//! What rxe gives, from rxe_req.c/rxe_resp.c/rxe_verbs.c (spec/conformance.md):
//! - a SEND whose SGE names no region: IBV_WC_LOC_PROT_ERR (4), the QP to ERR;
//! - the next request on that QP: IBV_WC_WR_FLUSH_ERR (5);
//! - an RDMA WRITE to a region registered for remote READ only: IBV_WC_REM_ACCESS_ERR (10);
//! - an RDMA READ past the end of the peer's region: IBV_WC_REM_ACCESS_ERR (10);
//! - an RDMA READ with an rkey the peer never gave: IBV_WC_REM_ACCESS_ERR (10);
//! - an ATOMIC on an address that is not 8-byte aligned: the post fails with EINVAL;
//! - a post on a QP not yet connected (INIT): the post fails with EINVAL;
//! - a peer that vanishes without a DREQ (its link cut while connected): the READ is sent
//!   retry_count + 1 times, then IBV_WC_RETRY_EXC_ERR (12) (rxe_comp.c, COMPST_ERROR_RETRY);
//! - and the good control case: an RDMA READ inside the region: IBV_WC_SUCCESS (0) with the
//!   peer's bytes.

use std::time::Duration;

use crate::common;
use crate::common::netns::Netns;
use crate::debian;
use crate::library::exec;
use crate::veth::{finish_within, spawn, text};

const RCERR: &str = r#"#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netdb.h>
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

static struct ibv_cq *qp_for(struct rdma_cm_id *id) {
    struct ibv_cq *cq = ibv_create_cq(id->verbs, 16, NULL, NULL, 0);
    struct ibv_qp_init_attr a = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 } };
    if (!cq || rdma_create_qp(id, NULL, &a)) { perror("qp"); exit(2); }
    return cq;
}

static int wait_wc(struct ibv_cq *cq) {
    struct ibv_wc wc;
    for (long i = 0; i < 400000000L; i++) {
        int n = ibv_poll_cq(cq, 1, &wc);
        if (n < 0) return -1;
        if (n == 1) return wc.status;
    }
    return -2;
}

static int server(const char *addr) {
    struct rdma_cm_id *listen;
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(7471) };
    inet_pton(AF_INET, addr, &sin.sin_addr);
    if (rdma_create_id(ch, &listen, NULL, RDMA_PS_TCP) || rdma_bind_addr(listen, (struct sockaddr *)&sin) || rdma_listen(listen, 8)) { perror("listen"); return 2; }
    static char buf[4096];
    for (int i = 0; i < 4096; i++) buf[i] = (char)(i * 7);
    printf("listening\n"); fflush(stdout);
    for (;;) {
        struct rdma_cm_event *ev;
        if (rdma_get_cm_event(ch, &ev)) return 2;
        if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            struct rdma_cm_id *id = ev->id;
            qp_for(id);
            struct ibv_mr *mr = ibv_reg_mr(id->pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
            struct adv a = { (uintptr_t)buf, mr->rkey };
            struct rdma_conn_param p = { .private_data = &a, .private_data_len = sizeof a, .responder_resources = 4, .initiator_depth = 4, .retry_count = 7, .rnr_retry_count = 7 };
            rdma_ack_cm_event(ev);
            if (rdma_accept(id, &p)) { perror("accept"); return 2; }
        } else if (ev->event == RDMA_CM_EVENT_DISCONNECTED) {
            struct rdma_cm_id *id = ev->id;
            rdma_ack_cm_event(ev);
            rdma_disconnect(id);
        } else {
            int done = ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL;
            rdma_ack_cm_event(ev);
            if (done) return 0;
        }
    }
}

/* One connection: a connected id, its CQ, the server's region. */
struct conn { struct rdma_cm_id *id; struct ibv_cq *cq; struct adv peer; struct ibv_mr *mr; char *buf; };

static struct conn connect_to(const char *dst, int connected) {
    struct conn c = {0};
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(7471) };
    inet_pton(AF_INET, dst, &sin.sin_addr);
    if (rdma_create_id(ch, &c.id, NULL, RDMA_PS_TCP) || rdma_resolve_addr(c.id, NULL, (struct sockaddr *)&sin, 2000)) { perror("resolve"); exit(2); }
    rdma_ack_cm_event(expect(RDMA_CM_EVENT_ADDR_RESOLVED));
    if (rdma_resolve_route(c.id, 2000)) exit(2);
    rdma_ack_cm_event(expect(RDMA_CM_EVENT_ROUTE_RESOLVED));
    c.cq = qp_for(c.id);
    c.buf = calloc(1, 8192);
    c.mr = ibv_reg_mr(c.id->pd, c.buf, 8192, IBV_ACCESS_LOCAL_WRITE);
    if (!connected) return c;
    struct rdma_conn_param p = { .responder_resources = 4, .initiator_depth = 4, .retry_count = 7, .rnr_retry_count = 7 };
    if (rdma_connect(c.id, &p)) { perror("connect"); exit(2); }
    struct rdma_cm_event *ev = expect(RDMA_CM_EVENT_ESTABLISHED);
    memcpy(&c.peer, ev->param.conn.private_data, sizeof c.peer);
    rdma_ack_cm_event(ev);
    return c;
}

static void done(struct conn *c) {
    rdma_disconnect(c->id);
    rdma_ack_cm_event(expect(RDMA_CM_EVENT_DISCONNECTED));
    rdma_destroy_qp(c->id);
    ibv_dereg_mr(c->mr);
    ibv_destroy_cq(c->cq);
    rdma_destroy_id(c->id);
    free(c->buf);
}

static int post(struct conn *c, enum ibv_wr_opcode op, uint64_t raddr, uint32_t rkey, uint32_t lkey, uint32_t len) {
    struct ibv_sge sge = { (uintptr_t)c->buf, len, lkey };
    struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = op, .send_flags = IBV_SEND_SIGNALED }, *bad;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) { wr.wr.atomic.remote_addr = raddr; wr.wr.atomic.rkey = rkey; wr.wr.atomic.compare_add = 1; }
    return ibv_post_send(c->id->qp, &wr, &bad);
}

static int client(const char *dst, const char *sync_dir) {
    struct conn c = connect_to(dst, 1);
    int r = post(&c, IBV_WR_RDMA_READ, c.peer.addr, c.peer.rkey, c.mr->lkey, 4096);
    int st = r ? -r : wait_wc(c.cq);
    printf("case=read_inside status=%d bytes_ok=%d\n", st, (unsigned char)c.buf[4095] == (unsigned char)(4095 * 7));
    done(&c);

    c = connect_to(dst, 1);
    r = post(&c, IBV_WR_SEND, 0, 0, c.mr->lkey ^ 0x5a5a00, 16);
    printf("case=bad_lkey status=%d\n", r ? -r : wait_wc(c.cq));
    r = post(&c, IBV_WR_SEND, 0, 0, c.mr->lkey, 16);
    printf("case=after_error status=%d\n", r ? -r : wait_wc(c.cq));
    done(&c);

    c = connect_to(dst, 1);
    r = post(&c, IBV_WR_RDMA_WRITE, c.peer.addr, c.peer.rkey, c.mr->lkey, 64);
    printf("case=write_read_only status=%d\n", r ? -r : wait_wc(c.cq));
    done(&c);

    c = connect_to(dst, 1);
    r = post(&c, IBV_WR_RDMA_READ, c.peer.addr + 1, c.peer.rkey, c.mr->lkey, 4096);
    printf("case=read_past_end status=%d\n", r ? -r : wait_wc(c.cq));
    done(&c);

    c = connect_to(dst, 1);
    r = post(&c, IBV_WR_RDMA_READ, c.peer.addr, c.peer.rkey ^ 0x77, c.mr->lkey, 64);
    printf("case=bad_rkey status=%d\n", r ? -r : wait_wc(c.cq));
    done(&c);

    c = connect_to(dst, 1);
    r = post(&c, IBV_WR_ATOMIC_FETCH_AND_ADD, c.peer.addr + 3, c.peer.rkey, c.mr->lkey, 8);
    printf("case=atomic_misaligned post=%d\n", r);
    done(&c);

    c = connect_to(dst, 0);
    r = post(&c, IBV_WR_SEND, 0, 0, c.mr->lkey, 16);
    printf("case=not_connected post=%d\n", r);
    rdma_destroy_qp(c.id);
    rdma_destroy_id(c.id);

    /* The peer vanishes without a DREQ (the test cuts its link once we say we are
     * connected): the READ is retried retry_count times, then RETRY_EXC_ERR. */
    c = connect_to(dst, 1);
    char path[512];
    snprintf(path, sizeof path, "%s/connected", sync_dir);
    fclose(fopen(path, "w"));
    snprintf(path, sizeof path, "%s/go", sync_dir);
    while (access(path, F_OK)) usleep(10000);
    r = post(&c, IBV_WR_RDMA_READ, c.peer.addr, c.peer.rkey, c.mr->lkey, 64);
    printf("case=peer_vanished status=%d\n", r ? -r : wait_wc(c.cq));
    fflush(stdout);
    rdma_destroy_qp(c.id);
    rdma_destroy_id(c.id);
    return 0;
}

int main(int argc, char **argv) {
    ch = rdma_create_event_channel();
    if (!ch) { perror("channel"); return 2; }
    if (argc == 3 && !strcmp(argv[1], "-s")) return server(argv[2]);
    if (argc == 4 && !strcmp(argv[1], "-c")) return client(argv[2], argv[3]);
    fprintf(stderr, "usage: rcerr -s ADDR | -c ADDR SYNC_DIR\n");
    return 2;
}
"#;

#[test]
fn bad_work_requests_complete_with_rxes_statuses_and_never_crash_the_program() {
    let dir = common::artefact_dir("capi_errors");
    let prog = debian::build_c(&dir, "rcerr", RCERR);
    let ns = Netns::bridge("capierr", 2);
    let server =
        spawn(exec(&ns, &["-I", "198.18.1.3", "--iface", "veth1", "--transport", "raw"], &prog, &["-s", "198.18.1.3"]));
    std::thread::sleep(Duration::from_millis(800));
    let sync = dir.join("sync");
    let _ = std::fs::remove_dir_all(&sync);
    std::fs::create_dir_all(&sync).unwrap();
    let sync_arg = sync.to_str().unwrap();
    let client = spawn(exec(
        &ns,
        &["-I", "198.18.1.1", "--iface", "veth0", "--transport", "raw"],
        &prog,
        &["-c", "198.18.1.3", sync_arg],
    ));
    // The last case: once connected, the server's port on the bridge goes down (the peer
    // vanishes, no DREQ), then the client posts its READ.
    let end = std::time::Instant::now() + Duration::from_secs(60);
    while !sync.join("connected").exists() && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    ns.sh("ip link set port1 down");
    std::fs::write(sync.join("go"), b"").unwrap();
    let client = finish_within(client, Duration::from_secs(60));
    // SAFETY: kill(2) on our own child: the server loops until killed.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    let server = finish_within(server, Duration::from_secs(10));
    let out = text(&client);
    std::fs::write(dir.join("outputs.txt"), format!("client:\n{out}\nserver:\n{}", text(&server))).unwrap();
    assert!(client.status.success(), "client:\n{out}\nserver:\n{}", text(&server));
    for want in [
        "case=read_inside status=0 bytes_ok=1",
        "case=bad_lkey status=4",
        "case=after_error status=5",
        "case=write_read_only status=10",
        "case=read_past_end status=10",
        "case=bad_rkey status=10",
        &format!("case=atomic_misaligned post={}", libc::EINVAL),
        &format!("case=not_connected post={}", libc::EINVAL),
        "case=peer_vanished status=12",
    ] {
        assert!(out.lines().any(|l| l == want), "wanted '{want}':\n{out}");
    }
}
