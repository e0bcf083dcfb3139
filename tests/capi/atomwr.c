/* ATOMIC WRITE and the work-request builder (ibv_wr_*): a server that lends 4 KiB and a
 * client that writes into it, over rdma_cm; run on roce's libraries by tests/capi/placement.rs
 * and on the guest's real ones (kernel rxe) by tests/interop/capi.rs.
 * -f: FLUSH too. The server grants it (IBV_ACCESS_FLUSH_GLOBAL, 1 << 8, on the region and,
 * after rdma_accept, on the QP); the client posts two through rdma-core 45's ibv_wr_flush,
 * the member after v44's struct ibv_qp_ex (these headers stop before it): only a library that
 * has it (roce's) may run the client with -f. The client flushes only once the server's "go"
 * SEND (unsignalled, posted after the grant) has arrived: without it a busy server could
 * still be between rdma_accept and the grant when the FLUSH lands. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

struct adv { uint64_t addr; uint32_t rkey; } __attribute__((packed));

#define ACCESS_FLUSH_GLOBAL (1 << 8)   /* rdma-core 45's IBV_ACCESS_FLUSH_GLOBAL */
#define QP_EX_WITH_FLUSH (1ULL << 11)  /* IBV_QP_EX_WITH_FLUSH */
struct qp_ex_v45 {
    struct ibv_qp_ex base;
    void (*wr_flush)(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t remote_addr, size_t len, uint8_t type, uint8_t level);
};

static int flush;

static struct rdma_event_channel *ch;

static struct rdma_cm_event *expect(enum rdma_cm_event_type t) {
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev)) { perror("rdma_get_cm_event"); exit(2); }
    if (ev->event != t) { fprintf(stderr, "event %s, wanted %s\n", rdma_event_str(ev->event), rdma_event_str(t)); exit(2); }
    return ev;
}

#define GO_WR_ID 99
static int got_go; /* the server's "go" arrived: its QP grants FLUSH */

/* The next completion of a send, or with want_go the server's "go" (a "go" met on the way
 * to a send's completion is remembered, not returned). */
static int wait_for(struct ibv_cq *cq, struct ibv_wc *wc, int want_go) {
    for (long i = 0; i < 400000000L; i++) {
        if (want_go && got_go) return 0;
        int n = ibv_poll_cq(cq, 1, wc);
        if (n < 0) return -1;
        if (n == 1 && wc->wr_id == GO_WR_ID) {
            if (wc->status) return wc->status;
            got_go = 1;
            continue;
        }
        if (n == 1) return wc->status;
    }
    return -2;
}

static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc) { return wait_for(cq, wc, 0); }

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
            int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
            struct ibv_mr *mr = ibv_reg_mr(id->pd, buf, sizeof buf, access | (flush ? ACCESS_FLUSH_GLOBAL : 0));
            struct ibv_mr *mmr = ibv_reg_mr(id->pd, msg, sizeof msg, IBV_ACCESS_LOCAL_WRITE);
            struct ibv_sge sge = { (uintptr_t)msg, sizeof msg, mmr->lkey };
            struct ibv_recv_wr rw = { .wr_id = 7, .sg_list = &sge, .num_sge = 1 }, *bad;
            if (!mr || !mmr || ibv_post_recv(id->qp, &rw, &bad)) { perror("mr/recv"); return 2; }
            struct adv ad = { (uintptr_t)buf, mr->rkey };
            struct rdma_conn_param p = { .private_data = &ad, .private_data_len = sizeof ad, .responder_resources = 4, .initiator_depth = 4, .retry_count = 7, .rnr_retry_count = 7 };
            rdma_ack_cm_event(ev);
            if (rdma_accept(id, &p)) { perror("accept"); return 2; }
            if (flush) {
                /* rdma_accept set the CM's access flags; FLUSH is granted on top (RTS -> RTS). */
                struct ibv_qp_attr qa = { .qp_access_flags = access | ACCESS_FLUSH_GLOBAL };
                int r = ibv_modify_qp(id->qp, &qa, IBV_QP_ACCESS_FLAGS);
                printf("server flush_access=%d\n", r); fflush(stdout);
                /* "go": the grant is in place (unsignalled, inline: no completion to poll). */
                static char go[] = "go";
                struct ibv_sge gs = { (uintptr_t)go, 2, 0 };
                struct ibv_send_wr sw = { .wr_id = 98, .sg_list = &gs, .num_sge = 1, .opcode = IBV_WR_SEND,
                                          .send_flags = IBV_SEND_INLINE }, *bsw;
                if (ibv_post_send(id->qp, &sw, &bsw)) { perror("go"); return 2; }
            }
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
        .send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_WRITE | (flush ? QP_EX_WITH_FLUSH : 0) };
    if (!cq || rdma_create_qp_ex(id, &a)) { perror("rdma_create_qp_ex"); return 2; }
    struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(id->qp);
    printf("case=qp_ex ok=%d\n", qpx != NULL);
    if (!qpx) return 2;
    static uint64_t local[8] __attribute__((aligned(64)));
    struct ibv_mr *mr = ibv_reg_mr(id->pd, local, sizeof local, IBV_ACCESS_LOCAL_WRITE);
    if (flush) {
        /* the server's "go" (see the top) */
        static char go[16];
        struct ibv_mr *gmr = ibv_reg_mr(id->pd, go, sizeof go, IBV_ACCESS_LOCAL_WRITE);
        struct ibv_sge gs = { (uintptr_t)go, sizeof go, gmr ? gmr->lkey : 0 };
        struct ibv_recv_wr rw = { .wr_id = GO_WR_ID, .sg_list = &gs, .num_sge = 1 }, *bad;
        if (!gmr || ibv_post_recv(id->qp, &rw, &bad)) { perror("go recv"); return 2; }
    }
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

    if (flush) {
        struct qp_ex_v45 *q45 = (struct qp_ex_v45 *)qpx;
        int g = wait_for(cq, &wc, 1);
        if (g) { fprintf(stderr, "no go from the server: status %d\n", g); return 2; }
        ibv_wr_start(qpx);
        qpx->wr_id = 6;
        qpx->wr_flags = IBV_SEND_SIGNALED;
        q45->wr_flush(qpx, peer.rkey, peer.addr, 4096, 1 /* global */, 0 /* range */);
        qpx->wr_id = 7;
        q45->wr_flush(qpx, peer.rkey, 0, 0, 1 /* global */, 1 /* the whole region */);
        int rc = ibv_wr_complete(qpx);
        for (int k = 0; k < 2; k++) {
            st = wait_wc(cq, &wc);
            printf("case=flush%s complete=%d status=%d opcode=%d wr_id=%llu\n", k ? "_mr" : "", rc, st, (int)wc.opcode, (unsigned long long)wc.wr_id);
        }
    }

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
    flush = argc == 4 && !strcmp(argv[3], "-f");
    if ((argc == 3 || flush) && !strcmp(argv[1], "-s")) return server(argv[2]);
    if ((argc == 3 || flush) && !strcmp(argv[1], "-c")) return client(argv[2]);
    fprintf(stderr, "usage: atomwr -s ADDR [-f] | -c ADDR [-f]\n");
    return 2;
}
