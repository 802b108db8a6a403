/*
 * rping: ping-pong over one RDMA RC connection, wire-compatible with
 * rdma-core's rping.
 *
 * Each ping, the client advertises its source buffer (address, rkey, size in
 * 16 big-endian bytes, sent with SEND); the server RDMA-READs it and answers
 * "go ahead"; the client advertises its sink buffer; the server RDMA-WRITEs
 * the data back there and answers "go ahead" again. -V has the client
 * compare what came back with what it sent, and the server check the ping
 * text it read. Every wait for the peer is bounded (peer_timeout_ms()),
 * except a server's wait for a client.
 *
 * Exit status: 0 on success, 22 (EINVAL) for bad options, 255 on failure.
 */
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>

#include "common.h"

#define DEFAULT_PORT 7174
#define DEFAULT_SIZE 64
#define MIN_SIZE 23 /* what rdma-core's rping accepts */
#define MAX_SIZE 65535
#define SQ_DEPTH 16
#define PING_FMT "rdma-ping-%d: "

struct options {
	bool server, persistent, verbose, validate, self_qp, set_tos;
	int count, size;
	uint8_t tos;
	bool have_addr, have_src;
	struct sockaddr_storage addr, src;
};

/* What each side sends: where the peer may read or write, big endian. */
struct desc {
	uint64_t addr;
	uint32_t rkey;
	uint32_t size;
};

struct conn {
	const struct options *o;
	bool server;
	struct rdma_cm_id *id;
	struct rdma_event_channel *ch;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct desc recv_desc, send_desc;
	struct ibv_mr *recv_mr, *send_mr;
	char *buf; /* client: sink of the echo; server: where it reads to */
	struct ibv_mr *buf_mr;
	char *start; /* client: the ping data */
	struct ibv_mr *start_mr;
	/* Progress, from completions and CM events. */
	int recvs; /* receive completions not consumed yet */
	struct desc peer;
	bool read_done, write_done, disconnected;
};

enum want { RECV, READ_DONE, WRITE_DONE, DISCONNECT };

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
static int self_modify_qp(struct conn *c)
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
static int setup(struct conn *c)
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
	if (!(c->cc = ibv_create_comp_channel(verbs))) {
		errno_msg("ibv_create_comp_channel");
		return -1;
	}
	if (!(c->cq = ibv_create_cq(verbs, SQ_DEPTH * 2, c, c->cc, 0))) {
		errno_msg("ibv_create_cq");
		return -1;
	}
	if (create_qp(c))
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

static void teardown(struct conn *c)
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
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->cc)
		ibv_destroy_comp_channel(c->cc);
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
static int wait_for(struct conn *c, enum want w, int timeout_ms, const char *what)
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

static int post_send_desc(struct conn *c, const void *addr, const struct ibv_mr *mr)
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

static int post_rdma(struct conn *c, enum ibv_wr_opcode op, uint32_t len)
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

/* --- the ping data -------------------------------------------------------- */

/* "rdma-ping-N: " then letters A..z rotating, starting one further each ping. */
static void format_ping(char *buf, int size, int ping)
{
	int n = snprintf(buf, size, PING_FMT, ping);

	for (int i = n; i < size; i++)
		buf[i] = (char)('A' + (ping % 58 + (i - n)) % 58);
	buf[size - 1] = '\0';
}

static int check_ping(const char *buf, int size, int ping)
{
	char *want = malloc(size);
	int bad = -1;

	if (!want)
		return 0;
	format_ping(want, size, ping);
	for (int i = 0; i < size && bad < 0; i++)
		if (buf[i] != want[i])
			bad = i;
	if (bad >= 0)
		errmsg("data mismatch in ping %d at byte %d of %d: got 0x%02x, expected 0x%02x",
		       ping, bad, size, (unsigned char)buf[bad], (unsigned char)want[bad]);
	free(want);
	return bad >= 0 ? -1 : 0;
}

/* --- client --------------------------------------------------------------- */

static int set_tos(struct rdma_cm_id *id, uint8_t tos)
{
	if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos))) {
		errno_msg("rdma_set_option(RDMA_OPTION_ID_TOS)");
		return -1;
	}
	return 0;
}

static int client_pings(struct conn *c)
{
	const struct options *o = c->o;
	int t = peer_timeout_ms(), r;

	for (int ping = 0; !o->count || ping < o->count; ping++) {
		format_ping(c->start, o->size, ping);
		if (o->validate)
			memset(c->buf, 0, o->size);
		if (post_send_desc(c, c->start, c->start_mr))
			return -1;
		r = wait_for(c, RECV, t, "waiting for the server to read the ping");
		if (r == 0) {
			c->recvs--;
			if (post_send_desc(c, c->buf, c->buf_mr))
				return -1;
			r = wait_for(c, RECV, t, "waiting for the server to write the pong");
		}
		if (r == 1 && !o->count)
			return 0; /* endless pings: the server ends them */
		if (r == 1) {
			errmsg("the server disconnected after %d of %d pings", ping, o->count);
			return -1;
		}
		if (r)
			return -1;
		c->recvs--;
		if (o->validate && memcmp(c->start, c->buf, o->size)) {
			int i = 0;

			while (c->start[i] == c->buf[i])
				i++;
			errmsg("data mismatch in ping %d at byte %d of %d: sent 0x%02x, got back 0x%02x",
			       ping, i, o->size, (unsigned char)c->start[i], (unsigned char)c->buf[i]);
			return -1;
		}
		if (o->verbose)
			printf("ping data: %s\n", c->buf);
	}
	return 0;
}

static int client_connect(struct conn *c, const struct options *o)
{
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1,
					 .retry_count = 7, .rnr_retry_count = 7 };
	struct rdma_cm_event *ev;
	char a[64];
	int t = peer_timeout_ms();

	addr_str((struct sockaddr *)&o->addr, a, sizeof(a));
	if (rdma_resolve_addr(c->id, o->have_src ? (struct sockaddr *)&o->src : NULL,
			      (struct sockaddr *)&o->addr, 2000)) {
		errmsg("rdma_resolve_addr(%s) failed: %s", a, strerror(errno));
		return -1;
	}
	if (expect_cm_event(c->ch, RDMA_CM_EVENT_ADDR_RESOLVED, t, "resolving the address", &ev, NULL))
		return -1;
	rdma_ack_cm_event(ev);
	if (o->set_tos && set_tos(c->id, o->tos))
		return -1;
	if (rdma_resolve_route(c->id, 2000)) {
		errno_msg("rdma_resolve_route");
		return -1;
	}
	if (expect_cm_event(c->ch, RDMA_CM_EVENT_ROUTE_RESOLVED, t, "resolving the route", &ev, NULL))
		return -1;
	rdma_ack_cm_event(ev);
	if (setup(c))
		return -1;
	if (o->self_qp)
		param.qp_num = c->qp->qp_num;
	if (rdma_connect(c->id, &param)) {
		errno_msg("rdma_connect");
		return -1;
	}
	char what[96];

	snprintf(what, sizeof(what), "connecting to %s", a);
	if (!o->self_qp) {
		if (expect_cm_event(c->ch, RDMA_CM_EVENT_ESTABLISHED, t, what, &ev, NULL))
			return -1;
		rdma_ack_cm_event(ev);
		return 0;
	}
	/* With our own QP, rdma_cm hands us the reply to finish the handshake. */
	if (expect_cm_event(c->ch, RDMA_CM_EVENT_CONNECT_RESPONSE, t, what, &ev, NULL))
		return -1;
	rdma_ack_cm_event(ev);
	if (self_modify_qp(c))
		return -1;
	if (rdma_establish(c->id)) {
		errno_msg("rdma_establish");
		return -1;
	}
	return 0;
}

static void disconnect(struct conn *c)
{
	if (c->o->self_qp) {
		struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };

		ibv_modify_qp(c->qp, &err, IBV_QP_STATE);
	}
	if (rdma_disconnect(c->id) && !c->disconnected)
		errno_msg("rdma_disconnect");
}

static int run_client(const struct options *o, struct rdma_event_channel *ch)
{
	struct conn c = { .o = o, .ch = ch };
	int ret;

	if (rdma_create_id(ch, &c.id, &c, RDMA_PS_TCP)) {
		errno_msg("rdma_create_id");
		return -1;
	}
	ret = client_connect(&c, o);
	if (ret == 0) {
		ret = client_pings(&c);
		if (!c.disconnected) {
			disconnect(&c);
			/* Bounded: a dead server's DREQ times out and still
			 * produces the event. */
			if (wait_for(&c, DISCONNECT, peer_timeout_ms(), "disconnecting") < 0)
				ret = -1;
		}
	}
	teardown(&c);
	rdma_destroy_id(c.id);
	return ret;
}

/* --- server --------------------------------------------------------------- */

/* Serves one connected client until it disconnects. */
static int server_pings(struct conn *c)
{
	const struct options *o = c->o;
	int t = peer_timeout_ms(), r;

	for (int ping = 0;; ping++) {
		r = wait_for(c, RECV, t, "waiting for the client's ping");
		if (r == 1)
			return 0; /* the client is done */
		if (r)
			return -1;
		c->recvs--;
		if (c->peer.size > (uint32_t)o->size) {
			errmsg("the client's pings are %u bytes, more than this server's -S %d",
			       c->peer.size, o->size);
			return -1;
		}
		c->read_done = false;
		if (post_rdma(c, IBV_WR_RDMA_READ, c->peer.size))
			return -1;
		if ((r = wait_for(c, READ_DONE, t, "reading the ping")) != 0)
			break;
		c->buf[o->size - 1] = '\0';
		if (o->validate && check_ping(c->buf, c->peer.size, ping))
			return -1;
		if (o->verbose)
			printf("server ping data: %s\n", c->buf);
		if (post_send_desc(c, NULL, NULL))
			return -1;
		if ((r = wait_for(c, RECV, t, "waiting for the client's sink buffer")) != 0)
			break;
		c->recvs--;
		c->write_done = false;
		uint32_t len = (uint32_t)strnlen(c->buf, o->size - 1) + 1;

		if (len > c->peer.size)
			len = c->peer.size;
		if (post_rdma(c, IBV_WR_RDMA_WRITE, len))
			return -1;
		if ((r = wait_for(c, WRITE_DONE, t, "writing the pong")) != 0)
			break;
		if (post_send_desc(c, NULL, NULL))
			return -1;
	}
	if (r == 1)
		errmsg("the client disconnected in the middle of a ping");
	return -1;
}

/* Accepts the connection request of c->id (a new id) and serves it. */
static int serve(struct conn *c)
{
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1,
					 .retry_count = 7, .rnr_retry_count = 7 };
	int ret = -1;

	if (setup(c) || (c->o->self_qp && self_modify_qp(c))) {
		rdma_reject(c->id, NULL, 0);
		goto out;
	}
	if (c->o->self_qp)
		param.qp_num = c->qp->qp_num;
	if (rdma_accept(c->id, &param)) {
		errno_msg("rdma_accept");
		goto out;
	}
	ret = server_pings(c);
	if (!c->disconnected)
		disconnect(c);
out:
	teardown(c);
	rdma_destroy_id(c->id);
	return ret;
}

static int listen_on(const struct options *o, struct rdma_event_channel *ch,
		     struct rdma_cm_id **listen_id)
{
	char a[64];

	if (rdma_create_id(ch, listen_id, NULL, RDMA_PS_TCP)) {
		errno_msg("rdma_create_id");
		return -1;
	}
	addr_str((struct sockaddr *)&o->addr, a, sizeof(a));
	if (rdma_bind_addr(*listen_id, (struct sockaddr *)&o->addr)) {
		errmsg("rdma_bind_addr(%s) failed: %s", a, strerror(errno));
		return -1;
	}
	if (o->set_tos && set_tos(*listen_id, o->tos))
		return -1;
	if (rdma_listen(*listen_id, 3)) {
		errmsg("rdma_listen(%s) failed: %s", a, strerror(errno));
		return -1;
	}
	debug_msg("listening on %s", a);
	return 0;
}

/* Waits (without limit) for the next connection request on the listener. */
static struct rdma_cm_id *next_request(struct rdma_event_channel *ch)
{
	struct rdma_cm_event *ev;

	for (;;) {
		if (get_cm_event(ch, WAIT_FOREVER, &ev)) {
			errno_msg("rdma_get_cm_event");
			return NULL;
		}
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			struct rdma_cm_id *id = ev->id;

			rdma_ack_cm_event(ev);
			return id;
		}
		event_msg("waiting for a client", ev);
		bool fatal = ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL;

		rdma_ack_cm_event(ev);
		if (fatal)
			return NULL;
	}
}

struct worker {
	struct conn c;
	struct options o;
};

static void *persistent_worker(void *arg)
{
	struct worker *w = arg;
	struct rdma_event_channel *ch = w->c.ch;

	if (serve(&w->c))
		errmsg("a client's connection failed; still serving others");
	rdma_destroy_event_channel(ch);
	free(w);
	return NULL;
}

/* -P: each client is served by its own thread, on its own event channel. */
static int serve_forever(const struct options *o, struct rdma_event_channel *ch)
{
	pthread_attr_t attr;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (;;) {
		struct rdma_cm_id *id = next_request(ch);
		struct worker *w;
		pthread_t t;
		int err;

		if (!id)
			return -1;
		w = calloc(1, sizeof(*w));
		if (!w || !(w->c.ch = rdma_create_event_channel())) {
			errmsg("no memory or event channel for a new client: rejecting it");
			rdma_reject(id, NULL, 0);
			rdma_destroy_id(id);
			free(w);
			continue;
		}
		w->o = *o;
		w->c.o = &w->o;
		w->c.server = true;
		w->c.id = id;
		id->context = &w->c;
		if (rdma_migrate_id(id, w->c.ch)) {
			errno_msg("rdma_migrate_id");
			rdma_reject(id, NULL, 0);
			rdma_destroy_id(id);
			rdma_destroy_event_channel(w->c.ch);
			free(w);
			continue;
		}
		err = pthread_create(&t, &attr, persistent_worker, w);
		if (err) {
			errmsg("pthread_create failed: %s", strerror(err));
			rdma_reject(id, NULL, 0);
			rdma_destroy_id(id);
			rdma_destroy_event_channel(w->c.ch);
			free(w);
		}
	}
}

static int run_server(const struct options *o, struct rdma_event_channel *ch)
{
	struct rdma_cm_id *listen_id = NULL;
	int ret = -1;

	if (listen_on(o, ch, &listen_id))
		goto out;
	if (o->persistent) {
		ret = serve_forever(o, ch);
	} else {
		struct conn c = { .o = o, .ch = ch, .server = true };

		c.id = next_request(ch);
		if (c.id) {
			c.id->context = &c;
			ret = serve(&c);
		}
	}
out:
	if (listen_id)
		rdma_destroy_id(listen_id);
	return ret;
}

/* --- main ------------------------------------------------------------------ */

static void usage(void)
{
	fprintf(stderr,
		"usage: rping -s [-vVd] [-P] [-S size] [-C count] [-a addr] [-p port] [-t tos] [-q]\n"
		"       rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port] [-t tos] [-q]\n"
		"  -s        server\n"
		"  -c        client\n"
		"  -a addr   server: address to listen on (default any; -a ::0 for any IPv6);\n"
		"            client: the server's address\n"
		"  -I addr   client: source address to bind to\n"
		"  -p port   port (default %d)\n"
		"  -C count  pings (default 0: until stopped)\n"
		"  -S size   ping data size, %d to %d bytes (default %d)\n"
		"  -v        print the ping data\n"
		"  -V        verify the ping data\n"
		"  -d        debug messages\n"
		"  -P        persistent server: serve clients until killed\n"
		"  -q        create and modify the QP here instead of in rdma_cm\n"
		"  -t tos    type of service\n"
		"environment: RDMACM_TOOLS_TIMEOUT=seconds to wait for a silent peer (default 20)\n",
		DEFAULT_PORT, MIN_SIZE, MAX_SIZE, DEFAULT_SIZE);
}

enum { USAGE = 1, BAD_VALUE = 2 };

/* 0, USAGE, BAD_VALUE, or getaddrinfo's (negative) code for an address. */
static int parse_options(int argc, char **argv, struct options *o)
{
	const char *addr = NULL, *src = NULL;
	int port = DEFAULT_PORT, side = -1, op, v;

	*o = (struct options){ .size = DEFAULT_SIZE };
	while ((op = getopt(argc, argv, "a:I:Pp:C:S:t:scvVdq")) != -1) {
		switch (op) {
		case 'a': addr = optarg; break;
		case 'I': src = optarg; break;
		case 'P': o->persistent = true; break;
		case 'p':
			if (parse_int(optarg, "port (-p)", 0, 65535, &port))
				return BAD_VALUE;
			break;
		case 'C':
			if (parse_int(optarg, "count (-C)", 0, 0x7fffffff, &o->count))
				return BAD_VALUE;
			break;
		case 'S':
			if (parse_int(optarg, "size (-S)", MIN_SIZE, MAX_SIZE, &o->size))
				return BAD_VALUE;
			break;
		case 't':
			if (parse_int(optarg, "type of service (-t)", 0, 255, &v))
				return BAD_VALUE;
			o->tos = (uint8_t)v;
			o->set_tos = true;
			break;
		case 's': side = 1; break;
		case 'c': side = 0; break;
		case 'v': o->verbose = true; break;
		case 'V': o->validate = true; break;
		case 'd': tool_debug = 1; break;
		case 'q': o->self_qp = true; break;
		default: return USAGE;
		}
	}
	if (optind < argc) {
		errmsg("unexpected argument '%s'", argv[optind]);
		return USAGE;
	}
	if (side < 0) {
		errmsg("say -s (server) or -c (client)");
		return USAGE;
	}
	o->server = side;
	if (!o->server && !addr) {
		errmsg("the client needs the server's address (-a)");
		return USAGE;
	}
	if (addr) {
		int err = parse_addr(addr, (uint16_t)port, &o->addr);

		if (err)
			return err;
		o->have_addr = true;
	} else {
		struct sockaddr_in *in = (struct sockaddr_in *)&o->addr;

		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
	}
	if (src) {
		int err = parse_addr(src, 0, &o->src);

		if (err)
			return err;
		o->have_src = true;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct rdma_event_channel *ch;
	struct options o;
	int ret;

	tool_init("rping");
	ret = parse_options(argc, argv, &o);
	if (ret == USAGE)
		usage();
	if (ret == USAGE || ret == BAD_VALUE)
		return EINVAL;
	if (ret)
		return ret; /* an unusable address: getaddrinfo's code, as rdma-core */
	ch = open_event_channel();
	if (!ch)
		return errno;
	ret = o.server ? run_server(&o, ch) : run_client(&o, ch);
	rdma_destroy_event_channel(ch);
	return ret ? 255 : 0;
}
