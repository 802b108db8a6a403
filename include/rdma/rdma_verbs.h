/*
 * rdmacm: verbs helpers for rdma_cm_id users.
 *
 * Source and binary compatible with rdma-core's <rdma/rdma_verbs.h>.  The
 * helpers are static inline and act on the QP, CQs, SRQ and PD stored in an
 * rdma_cm_id.  Functions returning int give 0 on success, or -1 with errno
 * set (except where noted).
 */

#if !defined(RDMA_VERBS_H)
#define RDMA_VERBS_H

#include <assert.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <errno.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Map a verbs status (0 or an errno value) to 0 / -1-with-errno. */
static inline int rdma_seterrno(int ret)
{
	if (ret == 0)
		return 0;
	errno = ret;
	return -1;
}

/* Shared receive queue attached to the id (id->srq). */
int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
		    struct ibv_srq_init_attr *attr);
int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr);
void rdma_destroy_srq(struct rdma_cm_id *id);

/*
 * Register a buffer on id->pd for receives and sends.  The flag is passed as
 * int: ibv_reg_mr() masks it with a flag of another enum type, which C++20
 * rejects for two enums.
 */
static inline struct ibv_mr *
rdma_reg_msgs(struct rdma_cm_id *id, void *addr, size_t length)
{
	return ibv_reg_mr(id->pd, addr, length, (int)IBV_ACCESS_LOCAL_WRITE);
}

/* Register a buffer on id->pd that the peer may RDMA-read. */
static inline struct ibv_mr *
rdma_reg_read(struct rdma_cm_id *id, void *addr, size_t length)
{
	return ibv_reg_mr(id->pd, addr, length,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
}

/* Register a buffer on id->pd that the peer may RDMA-write. */
static inline struct ibv_mr *
rdma_reg_write(struct rdma_cm_id *id, void *addr, size_t length)
{
	return ibv_reg_mr(id->pd, addr, length,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
}

/* Deregister a region obtained from one of the rdma_reg_* helpers. */
static inline int rdma_dereg_mr(struct ibv_mr *mr)
{
	return rdma_seterrno(ibv_dereg_mr(mr));
}

/*
 * Scatter/gather posts.  context becomes the work request id; receives go to
 * id->srq when the id has one, otherwise to id->qp.
 */
static inline int
rdma_post_recvv(struct rdma_cm_id *id, void *context, struct ibv_sge *sgl,
		int nsge)
{
	struct ibv_recv_wr wr;
	struct ibv_recv_wr *bad_wr;

	wr.wr_id = (uintptr_t)context;
	wr.next = NULL;
	wr.sg_list = sgl;
	wr.num_sge = nsge;

	if (id->srq != NULL)
		return rdma_seterrno(ibv_post_srq_recv(id->srq, &wr, &bad_wr));
	return rdma_seterrno(ibv_post_recv(id->qp, &wr, &bad_wr));
}

static inline int
rdma_post_sendv(struct rdma_cm_id *id, void *context, struct ibv_sge *sgl,
		int nsge, int flags)
{
	struct ibv_send_wr wr;
	struct ibv_send_wr *bad_wr;

	wr.wr_id = (uintptr_t)context;
	wr.next = NULL;
	wr.sg_list = sgl;
	wr.num_sge = nsge;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = (unsigned int)flags;

	return rdma_seterrno(ibv_post_send(id->qp, &wr, &bad_wr));
}

static inline int
rdma_post_readv(struct rdma_cm_id *id, void *context, struct ibv_sge *sgl,
		int nsge, int flags, uint64_t remote_addr, uint32_t rkey)
{
	struct ibv_send_wr wr;
	struct ibv_send_wr *bad_wr;

	wr.wr_id = (uintptr_t)context;
	wr.next = NULL;
	wr.sg_list = sgl;
	wr.num_sge = nsge;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.send_flags = (unsigned int)flags;
	wr.wr.rdma.remote_addr = remote_addr;
	wr.wr.rdma.rkey = rkey;

	return rdma_seterrno(ibv_post_send(id->qp, &wr, &bad_wr));
}

static inline int
rdma_post_writev(struct rdma_cm_id *id, void *context, struct ibv_sge *sgl,
		 int nsge, int flags, uint64_t remote_addr, uint32_t rkey)
{
	struct ibv_send_wr wr;
	struct ibv_send_wr *bad_wr;

	wr.wr_id = (uintptr_t)context;
	wr.next = NULL;
	wr.sg_list = sgl;
	wr.num_sge = nsge;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = (unsigned int)flags;
	wr.wr.rdma.remote_addr = remote_addr;
	wr.wr.rdma.rkey = rkey;

	return rdma_seterrno(ibv_post_send(id->qp, &wr, &bad_wr));
}

/*
 * Single-buffer posts.  The buffer must lie inside mr; for sends and writes
 * mr may be NULL (lkey 0, e.g. with IBV_SEND_INLINE).
 */
static inline int
rdma_post_recv(struct rdma_cm_id *id, void *context, void *addr,
	       size_t length, struct ibv_mr *mr)
{
	struct ibv_sge sge;

	assert(addr >= mr->addr &&
	       (uint8_t *)addr + length <= (uint8_t *)mr->addr + mr->length);
	sge.addr = (uintptr_t)addr;
	sge.length = (uint32_t)length;
	sge.lkey = mr->lkey;

	return rdma_post_recvv(id, context, &sge, 1);
}

static inline int
rdma_post_send(struct rdma_cm_id *id, void *context, void *addr,
	       size_t length, struct ibv_mr *mr, int flags)
{
	struct ibv_sge sge;

	sge.addr = (uintptr_t)addr;
	sge.length = (uint32_t)length;
	sge.lkey = mr != NULL ? mr->lkey : 0;

	return rdma_post_sendv(id, context, &sge, 1, flags);
}

static inline int
rdma_post_read(struct rdma_cm_id *id, void *context, void *addr,
	       size_t length, struct ibv_mr *mr, int flags,
	       uint64_t remote_addr, uint32_t rkey)
{
	struct ibv_sge sge;

	sge.addr = (uintptr_t)addr;
	sge.length = (uint32_t)length;
	sge.lkey = mr->lkey;

	return rdma_post_readv(id, context, &sge, 1, flags, remote_addr, rkey);
}

static inline int
rdma_post_write(struct rdma_cm_id *id, void *context, void *addr,
		size_t length, struct ibv_mr *mr, int flags,
		uint64_t remote_addr, uint32_t rkey)
{
	struct ibv_sge sge;

	sge.addr = (uintptr_t)addr;
	sge.length = (uint32_t)length;
	sge.lkey = mr != NULL ? mr->lkey : 0;

	return rdma_post_writev(id, context, &sge, 1, flags, remote_addr, rkey);
}

/* Datagram send to (ah, remote_qpn) with the CM's Q_Key, RDMA_UDP_QKEY. */
static inline int
rdma_post_ud_send(struct rdma_cm_id *id, void *context, void *addr,
		  size_t length, struct ibv_mr *mr, int flags,
		  struct ibv_ah *ah, uint32_t remote_qpn)
{
	struct ibv_send_wr wr;
	struct ibv_send_wr *bad_wr;
	struct ibv_sge sge;

	sge.addr = (uintptr_t)addr;
	sge.length = (uint32_t)length;
	sge.lkey = mr != NULL ? mr->lkey : 0;

	wr.wr_id = (uintptr_t)context;
	wr.next = NULL;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = (unsigned int)flags;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = remote_qpn;
	wr.wr.ud.remote_qkey = RDMA_UDP_QKEY;

	return rdma_seterrno(ibv_post_send(id->qp, &wr, &bad_wr));
}

/*
 * Block until one completion is available on id->send_cq (resp. recv_cq),
 * using the id's completion channel, and store it in *wc.  Returns the
 * number of completions polled (1), or -1 with errno set.
 */
static inline int
rdma_get_send_comp(struct rdma_cm_id *id, struct ibv_wc *wc)
{
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	int n;

	for (;;) {
		n = ibv_poll_cq(id->send_cq, 1, wc);
		if (n != 0)
			break;
		n = ibv_req_notify_cq(id->send_cq, 0);
		if (n != 0)
			return rdma_seterrno(n);
		/* A completion may have landed before the CQ was armed. */
		n = ibv_poll_cq(id->send_cq, 1, wc);
		if (n != 0)
			break;
		n = ibv_get_cq_event(id->send_cq_channel, &ev_cq, &ev_ctx);
		if (n != 0)
			return n;
		assert(ev_cq == id->send_cq && ev_ctx == id);
		ibv_ack_cq_events(id->send_cq, 1);
	}
	return n < 0 ? rdma_seterrno(n) : n;
}

static inline int
rdma_get_recv_comp(struct rdma_cm_id *id, struct ibv_wc *wc)
{
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	int n;

	for (;;) {
		n = ibv_poll_cq(id->recv_cq, 1, wc);
		if (n != 0)
			break;
		n = ibv_req_notify_cq(id->recv_cq, 0);
		if (n != 0)
			return rdma_seterrno(n);
		/* A completion may have landed before the CQ was armed. */
		n = ibv_poll_cq(id->recv_cq, 1, wc);
		if (n != 0)
			break;
		n = ibv_get_cq_event(id->recv_cq_channel, &ev_cq, &ev_ctx);
		if (n != 0)
			return n;
		assert(ev_cq == id->recv_cq && ev_ctx == id);
		ibv_ack_cq_events(id->recv_cq, 1);
	}
	return n < 0 ? rdma_seterrno(n) : n;
}

#ifdef __cplusplus
}
#endif

#endif /* RDMA_VERBS_H */
