/* Memory windows through the verbs, as rxe's users drive them: the server binds a type 2
 * window (an IBV_WR_BIND_MW work request) and a type 1 window (ibv_bind_mw) over its buffer and
 * sends the client their keys; the client READs through both, sends a SEND with invalidate of
 * the type 2 key, and READs through it again (refused: the window is free). On a second
 * connection it READs a region the server registered in a second PD (refused: the server's
 * QP is not of that PD, rxe's lookup_mr). Run on roce's libraries by tests/capi/windows.rs
 * and against the kernel's rxe by tests/interop/capi.rs. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

struct keys { uint64_t addr; uint32_t rkey2, rkey1; uint64_t addr_pd; uint32_t rkey_pd; } __attribute__((packed));

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

static struct ibv_cq *qp_for(struct rdma_cm_id *id) {
    struct ibv_cq *cq = ibv_create_cq(id->verbs, 16, NULL, NULL, 0);
    struct ibv_qp_init_attr a = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 } };
    if (!cq || rdma_create_qp(id, NULL, &a)) { perror("qp"); exit(2); }
    return cq;
}

static int server(const char *addr) {
    struct rdma_cm_id *listen;
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(7473) };
    inet_pton(AF_INET, addr, &sin.sin_addr);
    if (rdma_create_id(ch, &listen, NULL, RDMA_PS_TCP) || rdma_bind_addr(listen, (struct sockaddr *)&sin) || rdma_listen(listen, 8)) { perror("listen"); return 2; }
    static unsigned char buf[8192] __attribute__((aligned(64)));
    static unsigned char other[4096] __attribute__((aligned(64)));
    static char msg[64];
    static struct keys k;
    struct ibv_cq *cq = NULL;
    printf("listening\n"); fflush(stdout);
    for (;;) {
        struct rdma_cm_event *ev;
        if (rdma_get_cm_event(ch, &ev)) return 2;
        if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            struct rdma_cm_id *id = ev->id;
            for (int i = 0; i < 8192; i++) buf[i] = (unsigned char)(i * 13);
            cq = qp_for(id);
            struct ibv_mr *mr = ibv_reg_mr(id->pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
            struct ibv_mr *mmr = ibv_reg_mr(id->pd, msg, sizeof msg, IBV_ACCESS_LOCAL_WRITE);
            struct ibv_mr *kmr = ibv_reg_mr(id->pd, &k, sizeof k, 0);
            struct ibv_mw *mw2 = ibv_alloc_mw(id->pd, IBV_MW_TYPE_2);
            struct ibv_mw *mw1 = ibv_alloc_mw(id->pd, IBV_MW_TYPE_1);
            /* A region of another PD than the QP's, with every remote access. */
            struct ibv_pd *pd2 = ibv_alloc_pd(id->verbs);
            struct ibv_mr *omr = pd2 ? ibv_reg_mr(pd2, other, sizeof other, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ) : NULL;
            if (!mr || !mmr || !kmr || !mw2 || !mw1 || !omr) { perror("mr/mw"); return 2; }
            struct ibv_sge rs = { (uintptr_t)msg, sizeof msg, mmr->lkey };
            struct ibv_recv_wr rw = { .wr_id = 7, .sg_list = &rs, .num_sge = 1 }, *rbad;
            if (ibv_post_recv(id->qp, &rw, &rbad)) { perror("recv"); return 2; }
            struct rdma_conn_param p = { .responder_resources = 4, .initiator_depth = 4, .retry_count = 7, .rnr_retry_count = 7 };
            rdma_ack_cm_event(ev);
            if (rdma_accept(id, &p)) { perror("accept"); return 2; }
            rdma_ack_cm_event(expect(RDMA_CM_EVENT_ESTABLISHED));
            /* Type 2: a bind work request, the new key's low byte one up. */
            struct ibv_send_wr b = { .wr_id = 21, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED }, *bad;
            b.bind_mw.mw = mw2;
            b.bind_mw.rkey = ibv_inc_rkey(mw2->rkey);
            b.bind_mw.bind_info = (struct ibv_mw_bind_info){ .mr = mr, .addr = (uintptr_t)buf + 1024, .length = 1024,
                .mw_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE };
            struct ibv_wc wc;
            int r = ibv_post_send(id->qp, &b, &bad);
            int st = r ? -r : wait_wc(cq, &wc);
            printf("server bind2 status=%d opcode=%d\n", st, r ? -1 : (int)wc.opcode);
            /* Type 1: ibv_bind_mw, which updates mw1->rkey. */
            uint32_t before = mw1->rkey;
            struct ibv_mw_bind b1 = { .wr_id = 22, .send_flags = IBV_SEND_SIGNALED,
                .bind_info = { .mr = mr, .addr = (uintptr_t)buf + 4096, .length = 512, .mw_access_flags = IBV_ACCESS_REMOTE_READ } };
            r = ibv_bind_mw(id->qp, mw1, &b1);
            st = r ? -r : wait_wc(cq, &wc);
            printf("server bind1 status=%d opcode=%d rkey_changed=%d\n", st, r ? -1 : (int)wc.opcode, mw1->rkey != before);
            fflush(stdout);
            k = (struct keys){ (uintptr_t)buf, b.bind_mw.rkey, mw1->rkey, (uintptr_t)other, omr->rkey };
            struct ibv_sge ss = { (uintptr_t)&k, sizeof k, kmr->lkey };
            struct ibv_send_wr s = { .wr_id = 23, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
            r = ibv_post_send(id->qp, &s, &bad);
            st = r ? -r : wait_wc(cq, &wc);
            printf("server keys status=%d\n", st); fflush(stdout);
        } else if (ev->event == RDMA_CM_EVENT_DISCONNECTED) {
            struct rdma_cm_id *id = ev->id;
            rdma_ack_cm_event(ev);
            struct ibv_wc wc;
            int n = cq ? ibv_poll_cq(cq, 1, &wc) : 0;
            printf("server recv=%d status=%d flags=%#x rkey_ok=%d\n", n, n == 1 ? (int)wc.status : -1,
                   n == 1 ? wc.wc_flags : 0, n == 1 && wc.invalidated_rkey == k.rkey2);
            fflush(stdout);
            rdma_disconnect(id);
        } else {
            rdma_ack_cm_event(ev);
        }
    }
}

static int read_at(struct rdma_cm_id *id, struct ibv_cq *cq, struct ibv_mr *mr, void *dst, uint64_t raddr, uint32_t rkey, uint32_t len) {
    struct ibv_sge sge = { (uintptr_t)dst, len, mr->lkey };
    struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED }, *bad;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    struct ibv_wc wc;
    int r = ibv_post_send(id->qp, &wr, &bad);
    return r ? -r : wait_wc(cq, &wc);
}

static int same(const unsigned char *got, uint64_t off, uint32_t len) {
    for (uint32_t i = 0; i < len; i++) if (got[i] != (unsigned char)((off + i) * 13)) return 0;
    return 1;
}

/* A connected id, its CQ and local region, and the server's keys (the first SEND). */
struct conn { struct rdma_cm_id *id; struct ibv_cq *cq; struct ibv_mr *mr; };

static struct conn connect_for_keys(const char *dst, unsigned char *local, size_t len, struct keys *k) {
    struct conn c = {0};
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(7473) };
    inet_pton(AF_INET, dst, &sin.sin_addr);
    if (rdma_create_id(ch, &c.id, NULL, RDMA_PS_TCP) || rdma_resolve_addr(c.id, NULL, (struct sockaddr *)&sin, 2000)) { perror("resolve"); exit(2); }
    rdma_ack_cm_event(expect(RDMA_CM_EVENT_ADDR_RESOLVED));
    if (rdma_resolve_route(c.id, 2000)) exit(2);
    rdma_ack_cm_event(expect(RDMA_CM_EVENT_ROUTE_RESOLVED));
    c.cq = qp_for(c.id);
    c.mr = ibv_reg_mr(c.id->pd, local, len, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr *kmr = ibv_reg_mr(c.id->pd, k, sizeof *k, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_sge rs = { (uintptr_t)k, sizeof *k, kmr ? kmr->lkey : 0 };
    struct ibv_recv_wr rw = { .wr_id = 9, .sg_list = &rs, .num_sge = 1 }, *rbad;
    if (!c.mr || !kmr || ibv_post_recv(c.id->qp, &rw, &rbad)) { perror("mr/recv"); exit(2); }
    struct rdma_conn_param p = { .responder_resources = 4, .initiator_depth = 4, .retry_count = 7, .rnr_retry_count = 7 };
    if (rdma_connect(c.id, &p)) { perror("connect"); exit(2); }
    rdma_ack_cm_event(expect(RDMA_CM_EVENT_ESTABLISHED));
    struct ibv_wc wc;
    int st = wait_wc(c.cq, &wc);
    printf("case=keys status=%d len=%u\n", st, wc.byte_len);
    return c;
}

static void hang_up(struct conn *c) {
    fflush(stdout);
    rdma_disconnect(c->id);
    rdma_ack_cm_event(expect(RDMA_CM_EVENT_DISCONNECTED));
    rdma_destroy_qp(c->id);
    rdma_destroy_id(c->id);
}

static int client(const char *dst) {
    static unsigned char local[4096] __attribute__((aligned(64)));
    static struct keys k;
    struct conn c = connect_for_keys(dst, local, sizeof local, &k);
    struct ibv_wc wc;
    int st = read_at(c.id, c.cq, c.mr, local, k.addr + 1024, k.rkey2, 1024);
    printf("case=read_type2 status=%d same=%d\n", st, same(local, 1024, 1024));
    memset(local, 0, sizeof local);
    st = read_at(c.id, c.cq, c.mr, local, k.addr + 4096, k.rkey1, 512);
    printf("case=read_type1 status=%d same=%d\n", st, same(local, 4096, 512));
    struct ibv_send_wr s = { .wr_id = 3, .opcode = IBV_WR_SEND_WITH_INV, .send_flags = IBV_SEND_SIGNALED }, *bad;
    s.invalidate_rkey = k.rkey2;
    int r = ibv_post_send(c.id->qp, &s, &bad);
    st = r ? -r : wait_wc(c.cq, &wc);
    printf("case=send_inv status=%d\n", st);
    st = read_at(c.id, c.cq, c.mr, local, k.addr + 1024, k.rkey2, 64);
    printf("case=read_after_inv status=%d\n", st);
    hang_up(&c);
    /* A second connection (the error moved the first QP to ERR): the region of the server's
     * second PD, whose rkey is good but not its QP's to serve. */
    c = connect_for_keys(dst, local, sizeof local, &k);
    st = read_at(c.id, c.cq, c.mr, local, k.addr_pd, k.rkey_pd, 64);
    printf("case=read_other_pd status=%d\n", st);
    hang_up(&c);
    return 0;
}

int main(int argc, char **argv) {
    ch = rdma_create_event_channel();
    if (!ch) { perror("channel"); return 2; }
    if (argc == 3 && !strcmp(argv[1], "-s")) return server(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "-c")) return client(argv[2]);
    fprintf(stderr, "usage: mw -s ADDR | -c ADDR\n");
    return 2;
}
