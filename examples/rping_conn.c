/* One rping connection: verbs resources, posting, and the waits (rping.h). */
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "rping.h"

static const char *role(const struct conn *c)
{
	return c->server ? "server" : "client";
}

/* --- setup and teardown --------------------------------------------------- */

static int create_qp(struct conn *c)
{
	struct ibv_qp_init_attr attr = {
		.send_cq = c->cq,
		.recv_cq = c->cq,
		.cap = { .max_send_wr = SQ_DEPTH, .max_recv_wr = 2,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};

	if (!c->o->self_qp) {
		if (rdma_create_qp(c->id, c->pd, &attr)) {
			errno_msg("rdma_create_qp");
			return -1;
		}
		c->qp = c->id->qp;
		return 0;
	}
	/* -q: the application owns the QP; rdma_cm only supplies attributes. */
	c->qp = ibv_create_qp(c->pd, &attr);
	if (!c->qp) {
		errno_msg("ibv_create_qp");
		return -1;
	}
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .port_num = c->id->port_num };
	int err = ibv_modify_qp(c->qp, &init,
				IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (err) {
		errno = err;
		errno_msg("ibv_modify_qp(INIT)");
		return -1;
	}
	return 0;
}

/* -q: moves our QP through INIT, RTR, RTS with the attributes rdma_cm gives. */
int conn_self_modify_qp(struct conn *c)
{
	static const struct { enum ibv_qp_state state; const char *name; } steps[] = {
		{ IBV_QPS_INIT, "INIT" }, { IBV_QPS_RTR, "RTR" }, { IBV_QPS_RTS, "RTS" },
	};

	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct ibv_qp_attr attr = { .qp_state = steps[i].state };
		int mask, err;

		if (rdma_init_qp_attr(c->id, &attr, &mask)) {
			errmsg("rdma_init_qp_attr(%s) failed: %s", steps[i].name, strerror(errno));
			return -1;
		}
		err = ibv_modify_qp(c->qp, &attr, mask);
		if (err) {
			errmsg("ibv_modify_qp(%s) failed: %s", steps[i].name, strerror(err));
			return -1;
		}
	}
	return 0;
}

static struct ibv_mr *reg(struct conn *c, void *p, size_t len, int access, const char *what)
{
	struct ibv_mr *mr = ibv_reg_mr(c->pd, p, len, access);

	if (!mr)
		errmsg("ibv_reg_mr of the %s (%zu bytes) failed: %s", what, len, strerror(errno));
	return mr;
}

static int post_recv(struct conn *c)
{
	struct ibv_sge sge = { (uintptr_t)&c->recv_desc, sizeof(c->recv_desc), c->recv_mr->lkey };
	struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;
	int err = ibv_post_recv(c->qp, &wr, &bad);

	if (err)
		errmsg("ibv_post_recv failed: %s", strerror(err));
	return err ? -1 : 0;
}

/* PD, CQ with its channel, QP, buffers, and the first receive. */
int conn_setup(struct conn *c)
{
	const int remote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
	struct ibv_context *verbs = c->id->verbs;

	if (!verbs) {
		errmsg("the rdma_cm id is not bound to a device");
		return -1;
	}
	if (!(c->pd = ibv_alloc_pd(verbs))) {
		errno_msg("ibv_alloc_pd");
		return -1;
	}
	if (create_cq(verbs, SQ_DEPTH * 2, c, &c->cc, &c->cq) || create_qp(c))
		return -1;
	c->recv_mr = reg(c, &c->recv_desc, sizeof(c->recv_desc), IBV_ACCESS_LOCAL_WRITE,
			 "receive buffer");
	c->send_mr = reg(c, &c->send_desc, sizeof(c->send_desc), 0, "send buffer");
	c->buf = calloc(1, c->o->size);
	if (!c->recv_mr || !c->send_mr || !c->buf)
		return -1;
	if (!(c->buf_mr = reg(c, c->buf, c->o->size, remote, "RDMA buffer")))
		return -1;
	if (!c->server) {
		c->start = calloc(1, c->o->size);
		if (!c->start || !(c->start_mr = reg(c, c->start, c->o->size, remote, "ping buffer")))
			return -1;
	}
	return post_recv(c);
}

void conn_teardown(struct conn *c)
{
	if (c->qp) {
		if (c->o->self_qp)
			ibv_destroy_qp(c->qp);
		else
			rdma_destroy_qp(c->id);
	}
	if (c->start_mr)
		ibv_dereg_mr(c->start_mr);
	if (c->buf_mr)
		ibv_dereg_mr(c->buf_mr);
	if (c->send_mr)
		ibv_dereg_mr(c->send_mr);
	if (c->recv_mr)
		ibv_dereg_mr(c->recv_mr);
	free(c->start);
	free(c->buf);
	destroy_cq(c->cq, c->cc);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
}

/* --- waiting for the peer -------------------------------------------------- */

/* Takes every completion there is. Returns -1 on a failed one. */
static int drain_cq(struct conn *c)
{
	struct ibv_wc wc;
	int n;

	while ((n = ibv_poll_cq(c->cq, 1, &wc)) == 1) {
		if (wc.status == IBV_WC_WR_FLUSH_ERR) {
			/* The QP is in error: a disconnect is under way; its
			 * CM event tells the rest. */
			debug_msg("flushed work request (opcode %d)", wc.opcode);
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS) {
			wc_msg(wc.opcode == IBV_WC_RDMA_READ    ? "RDMA read"
			       : wc.opcode == IBV_WC_RDMA_WRITE ? "RDMA write"
			       : wc.opcode == IBV_WC_RECV       ? "receive"
								: "send",
			       &wc);
			return -1;
		}
		switch (wc.opcode) {
		case IBV_WC_RECV:
			if (wc.byte_len != sizeof(c->recv_desc)) {
				errmsg("received %u bytes from the peer, expected %zu (not an rping peer?)",
				       wc.byte_len, sizeof(c->recv_desc));
				return -1;
			}
			c->peer.addr = be64toh(c->recv_desc.addr);
			c->peer.rkey = be32toh(c->recv_desc.rkey);
			c->peer.size = be32toh(c->recv_desc.size);
			c->recvs++;
			if (post_recv(c))
				return -1;
			break;
		case IBV_WC_RDMA_READ:
			c->read_done = true;
			break;
		case IBV_WC_RDMA_WRITE:
			c->write_done = true;
			break;
		default:
			break;
		}
	}
	if (n < 0) {
		errmsg("ibv_poll_cq failed");
		return -1;
	}
	return 0;
}

/* Handles one CM event of an established connection. Returns -1 on a fatal one. */
static int handle_cm_event(struct conn *c)
{
	struct rdma_cm_event *ev;
	int ret = 0;

	if (rdma_get_cm_event(c->ch, &ev)) {
		if (errno == EAGAIN)
			return 0;
		errno_msg("rdma_get_cm_event");
		return -1;
	}
	debug_msg("%s event %s, status %d", role(c), rdma_event_str(ev->event), ev->status);
	if (ev->id != c->id && ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		/* Another client while this one runs: only -P serves several. */
		struct rdma_cm_id *other = ev->id;

		errmsg("rejecting another connection request (busy; -P serves several clients)");
		rdma_reject(other, NULL, 0);
		rdma_ack_cm_event(ev);
		rdma_destroy_id(other);
		return 0;
	}
	switch (ev->event) {
	case RDMA_CM_EVENT_ESTABLISHED:
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		/* The line scripts look for, as rdma-core prints it. */
		fprintf(stderr, "%s DISCONNECT EVENT...\n", role(c));
		c->disconnected = true;
		break;
	case RDMA_CM_EVENT_ADDR_CHANGE:
		errmsg("warning: %s: the address of the device changed", rdma_event_str(ev->event));
		break;
	default:
		event_msg("connection failed", ev);
		ret = -1;
		break;
	}
	rdma_ack_cm_event(ev);
	return ret;
}

static bool satisfied(struct conn *c, enum want w)
{
	switch (w) {
	case RECV: return c->recvs > 0;
	case READ_DONE: return c->read_done;
	case WRITE_DONE: return c->write_done;
	case DISCONNECT: return c->disconnected;
	}
	return false;
}

/*
 * Processes completions and CM events until w holds (0), the peer
 * disconnects first (1), something fails (-1, after a message) or the peer
 * stays silent for timeout_ms (-1).
 */
int conn_wait(struct conn *c, enum want w, int timeout_ms, const char *what)
{
	int64_t deadline = deadline_in(timeout_ms);
	bool armed = false;

	for (;;) {
		if (drain_cq(c))
			return -1;
		if (satisfied(c, w))
			return 0;
		if (c->disconnected)
			return 1;
		if (!armed) {
			int err = ibv_req_notify_cq(c->cq, 0);

			if (err) {
				errmsg("ibv_req_notify_cq failed: %s", strerror(err));
				return -1;
			}
			armed = true;
			continue; /* poll once more: a completion may have slipped in */
		}
		struct pollfd fds[2] = { { .fd = c->ch->fd, .events = POLLIN },
					 { .fd = c->cc->fd, .events = POLLIN } };
		int n = poll(fds, 2, ms_left(deadline));

		if (n < 0 && errno != EINTR) {
			errno_msg("poll");
			return -1;
		}
		if (n == 0) {
			errmsg("%s: nothing from the peer within %d ms (peer dead or stalled?)", what,
			       timeout_ms);
			return -1;
		}
		if ((fds[0].revents & POLLIN) && handle_cm_event(c))
			return -1;
		if (fds[1].revents & POLLIN) {
			struct ibv_cq *cq;
			void *ctx;

			if (ibv_get_cq_event(c->cc, &cq, &ctx) == 0) {
				ibv_ack_cq_events(cq, 1);
				armed = false;
			}
		}
	}
}

int conn_post_desc(struct conn *c, const void *addr, const struct ibv_mr *mr)
{
	struct ibv_sge sge = { (uintptr_t)&c->send_desc, sizeof(c->send_desc), c->send_mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	int err;

	c->send_desc.addr = htobe64((uintptr_t)addr);
	c->send_desc.rkey = htobe32(mr ? mr->rkey : 0);
	c->send_desc.size = htobe32(c->o->size);
	err = ibv_post_send(c->qp, &wr, &bad);
	if (err)
		errmsg("ibv_post_send(SEND) failed: %s", strerror(err));
	return err ? -1 : 0;
}

int conn_post_rdma(struct conn *c, enum ibv_wr_opcode op, uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)c->buf, len, c->buf_mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	int err;

	wr.wr.rdma.remote_addr = c->peer.addr;
	wr.wr.rdma.rkey = c->peer.rkey;
	err = ibv_post_send(c->qp, &wr, &bad);
	if (err)
		errmsg("ibv_post_send(%s) failed: %s", op == IBV_WR_RDMA_READ ? "RDMA_READ" : "RDMA_WRITE",
		       strerror(err));
	return err ? -1 : 0;
}

void conn_disconnect(struct conn *c)
{
	if (c->o->self_qp) {
		struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };

		ibv_modify_qp(c->qp, &err, IBV_QP_STATE);
	}
	if (rdma_disconnect(c->id) && !c->disconnected)
		errno_msg("rdma_disconnect");
}

