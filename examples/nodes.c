/* The connections of ucmatose, udaddy and mckey; see nodes.h. */
#include "nodes.h"

#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* --- options and life cycle ------------------------------------------------- */

static int parse_opt(struct node_set *s, int op, const char *arg, int max_count, int max_size)
{
	switch (op) {
	case 'c': return parse_int(arg, "connections (-c)", 1, 100000, &s->n);
	case 'C': return parse_int(arg, "message count (-C)", 0, max_count, &s->count);
	case 'S': return parse_int(arg, "message size (-S)", 0, max_size, &s->size);
	default: return 1;
	}
}

int nodes_options(struct node_set *s, int argc, char **argv, const char *optstring,
		  int max_count, int max_size, int (*tool_opt)(int op, const char *arg),
		  void (*usage)(const char *argv0))
{
	int op, ret;

	while ((op = getopt(argc, argv, optstring)) != -1) {
		ret = op == '?' ? 1 : tool_opt(op, optarg);
		if (ret > 0)
			ret = parse_opt(s, op, optarg, max_count, max_size);
		if (ret > 0)
			usage(argv[0]);
		if (ret)
			return -1;
	}
	return no_arguments_left(argc, argv);
}

int nodes_open(struct node_set *s, bool create_ids)
{
	if (!s->size)
		s->count = 0;
	if (!(s->ch = open_event_channel()))
		return -1;
	if (!(s->node = calloc(s->n, sizeof(*s->node)))) {
		errmsg("no memory for %d connections", s->n);
		return -1;
	}
	for (int i = 0; i < s->n; i++) {
		s->node[i].index = i;
		if (create_ids &&
		    rdma_create_id(s->ch, &s->node[i].id, &s->node[i], s->hints.ai_port_space)) {
			errno_msg("rdma_create_id");
			return -1;
		}
	}
	return 0;
}

static void node_destroy(struct node *n)
{
	if (!n->id)
		return;
	if (n->ah)
		ibv_destroy_ah(n->ah);
	if (n->id->qp)
		rdma_destroy_qp(n->id);
	for (int d = DIR_SEND; d <= DIR_RECV; d++) {
		bool shared = d == DIR_RECV && n->cq[DIR_RECV] == n->cq[DIR_SEND];

		if (!shared)
			destroy_cq(n->cq[d], n->cc[d]);
	}
	if (n->mr)
		ibv_dereg_mr(n->mr);
	free(n->mem);
	if (n->pd)
		ibv_dealloc_pd(n->pd);
	rdma_destroy_id(n->id);
}

int nodes_end(struct node_set *s, int ret)
{
	printf("test complete\n");
	for (int i = 0; s->node && i < s->n; i++)
		node_destroy(&s->node[i]);
	free(s->node);
	if (s->listen_id)
		rdma_destroy_id(s->listen_id);
	rdma_destroy_event_channel(s->ch);
	if (s->rai)
		rdma_freeaddrinfo(s->rai);
	printf("return status %d\n", ret);
	return ret;
}

int nodes_main(struct node_set *s, int (*server)(void), int (*client)(void))
{
	if (nodes_open(s, s->dst != NULL))
		exit(1);
	if (!s->dst)
		s->hints.ai_flags |= RAI_PASSIVE;
	return nodes_end(s, s->dst ? client() : server());
}

/* --- verbs resources ------------------------------------------------------ */

static int check_mtu(const struct node_set *s, const struct node *n)
{
	struct ibv_port_attr attr;
	int mtu;

	if (ibv_query_port(n->id->verbs, n->id->port_num, &attr)) {
		errno_msg("ibv_query_port");
		return -1;
	}
	mtu = 1 << (attr.active_mtu + 7);
	if (s->count && s->size > mtu) {
		errmsg("message_size %d is larger than active mtu %d", s->size, mtu);
		return -1;
	}
	return 0;
}

static int create_cqs(const struct node_set *s, struct node *n, int depth)
{
	struct ibv_context *verbs = n->id->verbs;

	if (s->ud) {
		if (create_cq(verbs, depth * 2, n, &n->cc[DIR_SEND], &n->cq[DIR_SEND]))
			return -1;
		n->cc[DIR_RECV] = n->cc[DIR_SEND];
		n->cq[DIR_RECV] = n->cq[DIR_SEND];
		return 0;
	}
	if (create_cq(verbs, depth, n, &n->cc[DIR_SEND], &n->cq[DIR_SEND]))
		return -1;
	return create_cq(verbs, depth, n, &n->cc[DIR_RECV], &n->cq[DIR_RECV]);
}

int node_setup(const struct node_set *s, struct node *n, uint32_t create_flags)
{
	int depth = s->count ? s->count : 1;
	size_t room = s->ud ? GRH_SIZE : 0;

	if (s->ud && check_mtu(s, n))
		return -1;
	if (!(n->pd = ibv_alloc_pd(n->id->verbs))) {
		errno_msg("ibv_alloc_pd");
		return -1;
	}
	if (create_cqs(s, n, depth))
		return -1;
	struct ibv_qp_init_attr_ex attr = {
		.qp_context = n,
		.send_cq = n->cq[DIR_SEND],
		.recv_cq = n->cq[DIR_RECV],
		.cap = { .max_send_wr = depth, .max_recv_wr = depth, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = s->ud ? IBV_QPT_UD : IBV_QPT_RC,
		.sq_sig_all = !s->ud,
		.comp_mask = IBV_QP_INIT_ATTR_PD | (create_flags ? IBV_QP_INIT_ATTR_CREATE_FLAGS : 0),
		.pd = n->pd,
		.create_flags = create_flags,
	};
	if (rdma_create_qp_ex(n->id, &attr)) {
		errno_msg(create_flags ? "rdma_create_qp_ex (with create flags)" : "rdma_create_qp");
		return -1;
	}
	if (!s->count)
		return 0;
	if (!(n->mem = calloc(1, room + s->size))) {
		errmsg("no memory for a %d-byte message", s->size);
		return -1;
	}
	fill_pattern(n->mem + room, s->size, n->index);
	if (!(n->mr = ibv_reg_mr(n->pd, n->mem, room + s->size, IBV_ACCESS_LOCAL_WRITE))) {
		errno_msg("ibv_reg_mr");
		return -1;
	}
	return 0;
}

int node_post_recvs(const struct node_set *s, struct node *n)
{
	/* UD: the GRH, then the message. */
	struct ibv_sge sge = { (uintptr_t)n->mem, (s->ud ? GRH_SIZE : 0) + s->size,
			       n->mr ? n->mr->lkey : 0 };
	struct ibv_recv_wr wr = { .wr_id = (uintptr_t)n, .sg_list = &sge, .num_sge = 1 }, *bad;

	for (int i = 0; i < s->count; i++) {
		int err = ibv_post_recv(n->id->qp, &wr, &bad);

		if (err) {
			errmsg("%s %d: ibv_post_recv failed: %s", s->noun, n->index, strerror(err));
			return -1;
		}
	}
	return 0;
}

int node_post_sends(const struct node_set *s, struct node *n)
{
	struct ibv_sge sge = { (uintptr_t)n->mem + (s->ud ? GRH_SIZE : 0), s->size,
			       n->mr ? n->mr->lkey : 0 };
	struct ibv_send_wr wr = { .wr_id = (uintptr_t)n, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND }, *bad;

	if (!n->connected)
		return 0;
	if (s->ud) {
		/* The immediate data names the sender's QP, as rdma-core's do. */
		wr.opcode = IBV_WR_SEND_WITH_IMM;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.imm_data = htobe32(n->id->qp->qp_num);
		wr.wr.ud.ah = n->ah;
		wr.wr.ud.remote_qpn = n->remote_qpn;
		wr.wr.ud.remote_qkey = n->remote_qkey;
	}
	for (int i = 0; i < s->count; i++) {
		int err = ibv_post_send(n->id->qp, &wr, &bad);

		if (err) {
			errmsg("%s %d: ibv_post_send failed: %s", s->noun, n->index, strerror(err));
			return -1;
		}
	}
	return 0;
}

int node_connect(const struct node_set *s, struct node *n, struct rdma_conn_param *param)
{
	param->private_data = s->rai->ai_connect;
	param->private_data_len = s->rai->ai_connect_len;
	if (node_setup(s, n, 0) || node_post_recvs(s, n))
		return -1;
	if (rdma_connect(n->id, param)) {
		errno_msg("rdma_connect");
		return -1;
	}
	return 0;
}

int node_accept(const struct node_set *s, struct node *n)
{
	struct rdma_conn_param ud = { 0 };

	if (node_setup(s, n, 0) || node_post_recvs(s, n))
		goto reject;
	ud.qp_num = n->id->qp->qp_num;
	if (rdma_accept(n->id, s->ud ? &ud : NULL)) {
		errno_msg("rdma_accept");
		goto reject;
	}
	n->connected = s->ud;
	return 0;
reject:
	node_reject(n->id);
	return -1;
}

int node_set_peer(struct node *n, const struct rdma_ud_param *ud)
{
	n->remote_qpn = ud->qp_num;
	n->remote_qkey = ud->qkey;
	n->ah = ibv_create_ah(n->pd, (struct ibv_ah_attr *)&ud->ah_attr);
	if (!n->ah) {
		errno_msg("ibv_create_ah");
		return -1;
	}
	n->connected = true;
	return 0;
}

/* --- completions ---------------------------------------------------------- */

/* UD: the peer is whoever sent this datagram (its QP number in the
 * immediate data, the Q_Key our own). */
static int answer_sender(struct node *n, const struct ibv_wc *wc)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;

	n->ah = ibv_create_ah_from_wc(n->pd, (struct ibv_wc *)wc, (void *)n->mem, n->id->port_num);
	if (!n->ah) {
		errno_msg("ibv_create_ah_from_wc");
		return -1;
	}
	n->remote_qpn = (wc->wc_flags & IBV_WC_WITH_IMM) ? be32toh(wc->imm_data) : wc->src_qp;
	if (ibv_query_qp(n->id->qp, &attr, IBV_QP_QKEY, &init)) {
		errno_msg("ibv_query_qp");
		return -1;
	}
	n->remote_qkey = attr.qkey;
	return 0;
}

/* Takes one completion of node n into its counters. */
static int take_wc(const struct node_set *s, struct node *n, const struct ibv_wc *wc)
{
	uint32_t room = s->ud ? GRH_SIZE : 0;

	if (wc->status != IBV_WC_SUCCESS) {
		wc_msg(wc->opcode == IBV_WC_RECV ? "receive" : "send", wc);
		return -EIO;
	}
	if (wc->opcode != IBV_WC_RECV) {
		n->done[DIR_SEND]++;
		return 0;
	}
	if (wc->byte_len != room + s->size) {
		errmsg("%s %d: received %u bytes, expected %d (-S differs?)", s->noun, n->index,
		       wc->byte_len - room, s->size);
		return -EIO;
	}
	if (s->ud && !n->ah && answer_sender(n, wc))
		return -1;
	n->done[DIR_RECV]++;
	return 0;
}

int nodes_complete(struct node_set *s, enum dir d, bool first_unbounded)
{
	struct ibv_wc wc[8];
	const char *what = d == DIR_SEND ? "sends completed" : "messages received";

	for (int i = 0; i < s->n; i++) {
		struct node *n = &s->node[i];

		if (!n->connected)
			continue;
		while (n->done[d] < s->count) {
			bool unbounded = first_unbounded && n->done[d] == 0;
			int64_t deadline = deadline_in(unbounded ? WAIT_FOREVER : peer_timeout_ms());
			int got = poll_cq_until(n->cq[d], n->cc[d], wc, 8, deadline), ret;

			if (got < 0) {
				if (errno == ETIMEDOUT)
					errmsg("%s %d: %d of %d %s, then nothing within %d ms (peer gone?)",
					       s->noun, i, n->done[d], s->count, what, peer_timeout_ms());
				else
					errno_msg("polling the completion queue");
				return -ETIMEDOUT;
			}
			for (int k = 0; k < got; k++)
				if ((ret = take_wc(s, n, &wc[k])))
					return ret;
		}
	}
	return 0;
}

/* --- connecting ------------------------------------------------------------- */

int nodes_listen(struct node_set *s)
{
	int ret;

	if (rdma_create_id(s->ch, &s->listen_id, NULL, s->hints.ai_port_space)) {
		errno_msg("rdma_create_id");
		return -1;
	}
	if ((ret = get_rdma_addr(s->src, s->dst, s->port, &s->hints, &s->rai)))
		return ret;
	if (rdma_bind_addr(s->listen_id, s->rai->ai_src_addr)) {
		errmsg("rdma_bind_addr(%s, port %s) failed: %s", s->src ? s->src : "any", s->port,
		       strerror(errno));
		return -1;
	}
	if (rdma_listen(s->listen_id, 0)) {
		errno_msg("rdma_listen");
		return -1;
	}
	return 0;
}

int nodes_resolve(struct node_set *s)
{
	int ret;

	if ((ret = get_rdma_addr(s->src, s->dst, s->port, &s->hints, &s->rai)))
		return ret;
	printf("%s: connecting\n", tool_name);
	for (int i = 0; i < s->n; i++) {
		if (rdma_resolve_addr(s->node[i].id, s->rai->ai_src_addr, s->rai->ai_dst_addr, 2000)) {
			errno_msg("rdma_resolve_addr");
			return -1;
		}
	}
	return 0;
}

void node_reject(struct rdma_cm_id *id)
{
	printf("%s: failing connection request\n", tool_name);
	rdma_reject(id, NULL, 0);
}

struct node *nodes_take_request(struct node_set *s, struct rdma_cm_id *id)
{
	struct node *n;

	if (s->accepted == s->n) {
		errmsg("a connection request beyond the %d expected (-c): rejecting it", s->n);
		node_reject(id);
		s->extra_id = id;
		return NULL;
	}
	n = &s->node[s->accepted++];
	n->id = id;
	id->context = n;
	return n;
}

int node_event_failed(const struct node_set *s, const struct node *n,
		      const struct rdma_cm_event *ev)
{
	char what[48];

	snprintf(what, sizeof(what), "%s %d", s->noun, n ? n->index : -1);
	event_msg(what, ev);
	return ev->status ? ev->status : -1;
}

int nodes_next_event(struct node_set *s, int ms, int (*handle)(struct rdma_cm_event *))
{
	struct rdma_cm_event *ev;
	int ret;

	if (get_cm_event(s->ch, ms, &ev)) {
		if (errno == ETIMEDOUT)
			return NO_EVENT;
		errno_msg("rdma_get_cm_event");
		return -errno;
	}
	debug_msg("event %s, status %d", rdma_event_str(ev->event), ev->status);
	ret = handle(ev);
	rdma_ack_cm_event(ev);
	if (s->extra_id) {
		rdma_destroy_id(s->extra_id);
		s->extra_id = NULL;
	}
	return ret;
}
