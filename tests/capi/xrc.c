/* XRC's verbs and their errors through the drop-in libibverbs (tests/capi/xrc.rs): XRC domains
 * (ibv_open_xrcd's checks, one domain per file, ibv_close_xrcd's EBUSY), XRC SRQs
 * (ibv_create_srq_ex, ibv_get_srq_num), XRC target and initiator QPs (creation, the transitions
 * each requires, what they refuse to post). One process, no peer: each case prints one line,
 * "case=NAME VALUE", which the test compares with what the kernel's uverbs and libibverbs
 * answer (the sources are named there). Built against Debian 12's headers. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

static struct ibv_context *ctx;

/* errno of a NULL result, 0 otherwise. */
#define ERR(p) ((p) ? 0 : errno)

static struct ibv_xrcd *xrcd_open(uint32_t mask, int fd, int oflags, int *err)
{
	struct ibv_xrcd_init_attr a = { .comp_mask = mask, .fd = fd, .oflags = oflags };
	errno = 0;
	struct ibv_xrcd *x = ibv_open_xrcd(ctx, &a);
	*err = ERR(x);
	return x;
}

static struct ibv_srq *xsrq(struct ibv_pd *pd, struct ibv_xrcd *x, struct ibv_cq *cq, uint32_t mask,
			    enum ibv_srq_type type, int *err)
{
	struct ibv_srq_init_attr_ex a;
	memset(&a, 0, sizeof a);
	a.attr.max_wr = 4;
	a.attr.max_sge = 1;
	a.comp_mask = mask;
	a.srq_type = type;
	a.pd = pd;
	a.xrcd = x;
	a.cq = cq;
	errno = 0;
	struct ibv_srq *s = ibv_create_srq_ex(ctx, &a);
	*err = ERR(s);
	return s;
}

static int modify(struct ibv_qp *qp, enum ibv_qp_state to, int mask)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = to;
	a.port_num = 1;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = 0x11;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 64;
	/* ::ffff:198.18.6.9, an address nobody has: nothing is sent in these cases */
	uint8_t gid[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 6, 9 };
	memcpy(a.ah_attr.grh.dgid.raw, gid, 16);
	return ibv_modify_qp(qp, &a, mask);
}

int main(int argc, char **argv)
{
	int n, err;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n < 1 || !(ctx = ibv_open_device(list[0]))) {
		fprintf(stderr, "no device\n");
		return 2;
	}
	const char *file = argc > 1 ? argv[1] : "/tmp/roce_xrc_test";
	unlink(file);
	int fd = open(file, O_RDONLY | O_CREAT, 0600);
	if (fd < 0) {
		perror(file);
		return 2;
	}
	struct ibv_device_attr da;
	printf("case=device_cap_xrc %d\n", !ibv_query_device(ctx, &da) && (da.device_cap_flags & IBV_DEVICE_XRC) != 0);

	const uint32_t FD = IBV_XRCD_INIT_ATTR_FD, OFL = IBV_XRCD_INIT_ATTR_OFLAGS;
	xrcd_open(0, fd, O_CREAT, &err);
	printf("case=xrcd_no_mask %d\n", err);
	xrcd_open(FD, fd, O_CREAT, &err);
	printf("case=xrcd_no_oflags %d\n", err);
	xrcd_open(FD | OFL | IBV_XRCD_INIT_ATTR_RESERVED, fd, O_CREAT, &err);
	printf("case=xrcd_reserved_mask %d\n", err);
	xrcd_open(FD | OFL, fd, 0, &err);
	printf("case=xrcd_new_without_creat %d\n", err);
	xrcd_open(FD | OFL, 1000, O_CREAT, &err);
	printf("case=xrcd_bad_fd %d\n", err);
	struct ibv_xrcd *a = xrcd_open(FD | OFL, fd, O_CREAT, &err);
	printf("case=xrcd_create %d\n", err);
	xrcd_open(FD | OFL, fd, O_CREAT | O_EXCL, &err);
	printf("case=xrcd_exclusive_again %d\n", err);
	struct ibv_xrcd *b = xrcd_open(FD | OFL, fd, 0, &err);
	printf("case=xrcd_open_again %d distinct=%d\n", err, a != b);
	struct ibv_xrcd *p = xrcd_open(FD | OFL, -1, 0, &err);
	printf("case=xrcd_private %d\n", err);
	if (!a || !b || !p)
		return 1;

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	const uint32_t ALL = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
			     IBV_SRQ_INIT_ATTR_CQ;
	xsrq(pd, a, NULL, ALL & ~IBV_SRQ_INIT_ATTR_CQ, IBV_SRQT_XRC, &err);
	printf("case=xsrq_no_cq %d\n", err);
	xsrq(pd, NULL, cq, ALL & ~IBV_SRQ_INIT_ATTR_XRCD, IBV_SRQT_XRC, &err);
	printf("case=xsrq_no_xrcd %d\n", err);
	xsrq(pd, a, cq, ALL, IBV_SRQT_TM, &err);
	printf("case=srq_tm %d\n", err);
	/* SRQ in domain a, target QP in the same domain opened as b */
	struct ibv_srq *srq = xsrq(pd, a, cq, ALL, IBV_SRQT_XRC, &err);
	uint32_t srqn = 0;
	printf("case=xsrq %d num_ok=%d\n", err, srq && !ibv_get_srq_num(srq, &srqn) && srqn > 0 && srqn < (1u << 24));
	struct ibv_srq *basic = xsrq(pd, NULL, NULL, IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD, IBV_SRQT_BASIC, &err);
	printf("case=basic_srq_ex %d\n", err);

	struct ibv_qp_init_attr_ex t;
	memset(&t, 0, sizeof t);
	t.qp_type = IBV_QPT_XRC_RECV;
	t.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	errno = 0;
	struct ibv_qp *bad = ibv_create_qp_ex(ctx, &t);
	printf("case=tgt_no_xrcd %d\n", ERR(bad));
	t.xrcd = b;
	errno = 0;
	struct ibv_qp *tgt = ibv_create_qp_ex(ctx, &t);
	printf("case=tgt %d\n", ERR(tgt));
	if (!tgt)
		return 1;

	/* per handle: a made the SRQ, b the target QP */
	printf("case=close_with_its_srq %d\n", ibv_close_xrcd(a));
	printf("case=close_with_its_tgt %d\n", ibv_close_xrcd(b));
	printf("case=close_private %d\n", ibv_close_xrcd(p));

	printf("case=tgt_init %d\n",
	       modify(tgt, IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
	printf("case=tgt_rtr_without_responder_attrs %d\n",
	       modify(tgt, IBV_QPS_RTR, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN));
	printf("case=tgt_rtr %d\n",
	       modify(tgt, IBV_QPS_RTR, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
						IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER));
	printf("case=tgt_rts %d\n", modify(tgt, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN));

	struct ibv_qp_init_attr i;
	memset(&i, 0, sizeof i);
	i.qp_type = IBV_QPT_XRC_SEND;
	i.send_cq = cq;
	i.cap.max_send_wr = 4;
	i.cap.max_send_sge = 1;
	i.cap.max_recv_wr = 4;
	errno = 0;
	struct ibv_qp *ini = ibv_create_qp(pd, &i);
	printf("case=ini %d recv_caps=%u\n", ERR(ini), i.cap.max_recv_wr);
	if (!ini)
		return 1;
	struct ibv_sge sge = { .addr = (uintptr_t)&da, .length = 8, .lkey = 0 };
	struct ibv_send_wr sw, *bad_sw;
	memset(&sw, 0, sizeof sw);
	sw.opcode = IBV_WR_SEND;
	sw.sg_list = &sge;
	sw.num_sge = 1;
	sw.qp_type.xrc.remote_srqn = srqn;
	struct ibv_recv_wr rw, *bad_rw;
	memset(&rw, 0, sizeof rw);
	rw.sg_list = &sge;
	rw.num_sge = 1;
	printf("case=ini_post_send_in_reset %d\n", ibv_post_send(ini, &sw, &bad_sw));
	printf("case=ini_post_recv %d\n", ibv_post_recv(ini, &rw, &bad_rw));
	printf("case=tgt_post_recv %d\n", ibv_post_recv(tgt, &rw, &bad_rw));
	printf("case=tgt_post_send %d\n", ibv_post_send(tgt, &sw, &bad_sw));
	printf("case=ini_init %d\n",
	       modify(ini, IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
	printf("case=ini_rtr %d\n",
	       modify(ini, IBV_QPS_RTR, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN));
	printf("case=ini_rts_without_retry %d\n", modify(ini, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN));
	printf("case=ini_rts %d\n",
	       modify(ini, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT |
						IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC));
	sw.qp_type.xrc.remote_srqn = 1u << 24;
	printf("case=ini_srqn_past_24_bits %d\n", ibv_post_send(ini, &sw, &bad_sw));

	printf("case=destroy_srq_in_domain %d\n", ibv_destroy_srq(srq));
	printf("case=close_after_its_srq %d\n", ibv_close_xrcd(a));
	printf("case=destroy_tgt %d\n", ibv_destroy_qp(tgt));
	printf("case=close_last %d\n", ibv_close_xrcd(b));
	printf("case=reopen_after_close %d\n", (xrcd_open(FD | OFL, fd, 0, &err), err));
	ibv_destroy_qp(ini);
	ibv_destroy_srq(basic);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	close(fd);
	unlink(file);
	return 0;
}
