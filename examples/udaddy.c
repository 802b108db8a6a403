/*
 * udaddy: resolves -c UD "connections" with rdma_cm (an address handle, QP
 * number and Q_Key for the server, found through a SIDR exchange), sends -C
 * datagrams of -S bytes to the server and gets as many back; wire-compatible
 * with rdma-core's udaddy (fixed port 7174; -p and -P choose the port space).
 *
 * Prints rdma-core's progress lines and "return status N" and exits with N:
 * 0, the failing event's status, or a negative errno. Waits for a peer that
 * has shown up are bounded; the server's wait for requests is not.
 */
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <rdma/rdma_cma.h>

#include "common.h"

#define GRH_SIZE 40 /* sizeof(struct ibv_grh): a UD receive starts with it */

struct node {
	int index;
	struct rdma_cm_id *id;
	bool connected;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	void *mem; /* GRH_SIZE + message */
	struct ibv_ah *ah;
	uint32_t remote_qpn, remote_qkey;
	int sent, received; /* completions so far */
};

static struct {
	const char *dst, *src, *port;
	int connections, count, size;
	bool set_tos;
	uint8_t tos;
	struct rdma_addrinfo hints;
	struct rdma_event_channel *ch;
	struct rdma_addrinfo *rai;
	struct rdma_cm_id *listen_id, *extra_id;
	struct node *nodes;
	int accepted, connects_left;
} t = { .port = "7174", .connections = 1, .count = 10, .size = 100 };

/* --- per-node resources ---------------------------------------------------- */

static int check_mtu(struct node *n)
{
	struct ibv_port_attr attr;
	int mtu;

	if (ibv_query_port(n->id->verbs, n->id->port_num, &attr)) {
		errno_msg("ibv_query_port");
		return -1;
	}
	mtu = 1 << (attr.active_mtu + 7);
	if (t.count && t.size > mtu) {
		errmsg("message_size %d is larger than active mtu %d", t.size, mtu);
		return -1;
	}
	return 0;
}

static int init_node(struct node *n)
{
	struct ibv_context *verbs = n->id->verbs;
	int depth = t.count ? t.count : 1;

	if (check_mtu(n))
		return -1;
	if (!(n->pd = ibv_alloc_pd(verbs))) {
		errno_msg("ibv_alloc_pd");
		return -1;
	}
	if (!(n->cc = ibv_create_comp_channel(verbs))) {
		errno_msg("ibv_create_comp_channel");
		return -1;
	}
	if (!(n->cq = ibv_create_cq(verbs, depth * 2, n, n->cc, 0))) {
		errno_msg("ibv_create_cq");
		return -1;
	}
	struct ibv_qp_init_attr attr = {
		.qp_context = n,
		.send_cq = n->cq,
		.recv_cq = n->cq,
		.cap = { .max_send_wr = depth, .max_recv_wr = depth, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IBV_QPT_UD,
	};
	if (rdma_create_qp(n->id, n->pd, &attr)) {
		errno_msg("rdma_create_qp");
		return -1;
	}
	if (!t.count)
		return 0;
	if (!(n->mem = calloc(1, GRH_SIZE + t.size))) {
		errmsg("no memory for a %d-byte message", t.size);
		return -1;
	}
	if (!(n->mr = ibv_reg_mr(n->pd, n->mem, GRH_SIZE + t.size, IBV_ACCESS_LOCAL_WRITE))) {
		errno_msg("ibv_reg_mr");
		return -1;
	}
	/* Receives: GRH and message; sends: the message alone. */
	struct ibv_sge sge = { (uintptr_t)n->mem, GRH_SIZE + t.size, n->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = (uintptr_t)n, .sg_list = &sge, .num_sge = 1 }, *bad;

	for (int i = 0; i < t.count; i++) {
		int err = ibv_post_recv(n->id->qp, &wr, &bad);

		if (err) {
			errmsg("ibv_post_recv failed: %s", strerror(err));
			return -1;
		}
	}
	return 0;
}

static int post_sends(struct node *n)
{
	struct ibv_sge sge = { (uintptr_t)n->mem + GRH_SIZE, t.size, n->mr ? n->mr->lkey : 0 };
	struct ibv_send_wr wr = {
		.wr_id = (uintptr_t)n,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND_WITH_IMM,
		.send_flags = IBV_SEND_SIGNALED,
		.imm_data = htobe32(n->id->qp->qp_num),
	}, *bad;

	if (!n->connected || !t.count)
		return 0;
	wr.wr.ud.ah = n->ah;
	wr.wr.ud.remote_qpn = n->remote_qpn;
	wr.wr.ud.remote_qkey = n->remote_qkey;
	fill_pattern(n->mem + GRH_SIZE, t.size, n->index);
	for (int i = 0; i < t.count; i++) {
		int err = ibv_post_send(n->id->qp, &wr, &bad);

		if (err) {
			errmsg("ibv_post_send failed: %s", strerror(err));
			return -1;
		}
	}
	return 0;
}

/* The server answers whoever sent the first datagram. */
static int create_reply_ah(struct node *n, const struct ibv_wc *wc)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;

	n->ah = ibv_create_ah_from_wc(n->pd, (struct ibv_wc *)wc, n->mem, n->id->port_num);
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
static int take_wc(struct node *n, const struct ibv_wc *wc)
{
	if (wc->status != IBV_WC_SUCCESS) {
		wc_msg(wc->opcode == IBV_WC_RECV ? "receive" : "send", wc);
		return -EIO;
	}
	if (wc->opcode != IBV_WC_RECV) {
		n->sent++;
		return 0;
	}
	if (wc->byte_len != (uint32_t)(GRH_SIZE + t.size)) {
		errmsg("node %d: a datagram of %u bytes, expected %d (-S differs?)", n->index,
		       wc->byte_len - GRH_SIZE, t.size);
		return -EIO;
	}
	if (!n->ah && create_reply_ah(n, wc))
		return -1;
	n->received++;
	return 0;
}

/* Waits until every connected node has -C completions of the given kind
 * (counting those of the other kind that come meanwhile). */
static int complete_all(bool recv)
{
	struct ibv_wc wc[8];

	for (int i = 0; i < t.connections; i++) {
		struct node *n = &t.nodes[i];
		int64_t deadline = deadline_in(peer_timeout_ms());
		int *done = recv ? &n->received : &n->sent;

		if (!n->connected)
			continue;
		while (*done < t.count) {
			int got = poll_cq_until(n->cq, n->cc, wc, 8, deadline), ret;

			if (got < 0) {
				if (errno == ETIMEDOUT)
					errmsg("node %d: %d of %d %s within %d ms (datagrams lost, or peer gone)",
					       i, *done, t.count, recv ? "datagrams arrived" : "sends completed",
					       peer_timeout_ms());
				else
					errno_msg("polling the completion queue");
				return -ETIMEDOUT;
			}
			for (int k = 0; k < got; k++)
				if ((ret = take_wc(n, &wc[k])))
					return ret;
		}
	}
	return 0;
}

static void destroy_node(struct node *n)
{
	if (!n->id)
		return;
	if (n->ah)
		ibv_destroy_ah(n->ah);
	if (n->id->qp)
		rdma_destroy_qp(n->id);
	if (n->cq)
		ibv_destroy_cq(n->cq);
	if (n->cc)
		ibv_destroy_comp_channel(n->cc);
	if (n->mr)
		ibv_dereg_mr(n->mr);
	free(n->mem);
	if (n->pd)
		ibv_dealloc_pd(n->pd);
	rdma_destroy_id(n->id);
}

/* --- CM events ------------------------------------------------------------ */

static int on_route_resolved(struct node *n)
{
	struct rdma_conn_param param = { .private_data = t.rai->ai_connect,
					 .private_data_len = t.rai->ai_connect_len };

	if (init_node(n))
		return -1;
	if (rdma_connect(n->id, &param)) {
		errno_msg("rdma_connect");
		return -1;
	}
	return 0;
}

static int on_connect_request(struct rdma_cm_id *id)
{
	struct rdma_conn_param param = { 0 };
	struct node *n;

	if (t.accepted == t.connections) {
		errmsg("a request beyond the %d expected (-c): rejecting it", t.connections);
		printf("udaddy: failing connection request\n");
		rdma_reject(id, NULL, 0);
		t.extra_id = id;
		return 0;
	}
	n = &t.nodes[t.accepted++];
	n->id = id;
	id->context = n;
	if (init_node(n))
		goto reject;
	param.qp_num = id->qp->qp_num;
	if (rdma_accept(id, &param)) {
		errno_msg("rdma_accept");
		goto reject;
	}
	n->connected = true; /* UD: the answer is all there is */
	t.connects_left--;
	return 0;
reject:
	t.connects_left--;
	printf("udaddy: failing connection request\n");
	rdma_reject(id, NULL, 0);
	return -1;
}

static int on_established(struct node *n, const struct rdma_ud_param *ud)
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

static int handle_event(struct rdma_cm_event *ev)
{
	struct node *n = ev->id->context;
	int ret = 0;

	debug_msg("event %s, status %d", rdma_event_str(ev->event), ev->status);
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (t.set_tos && rdma_set_option(ev->id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &t.tos, 1))
			errno_msg("rdma_set_option(RDMA_OPTION_ID_TOS)");
		if (rdma_resolve_route(ev->id, 2000)) {
			errno_msg("rdma_resolve_route");
			ret = -1;
		}
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		ret = on_route_resolved(n);
		break;
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		return on_connect_request(ev->id);
	case RDMA_CM_EVENT_ESTABLISHED:
		t.connects_left--;
		return on_established(n, &ev->param.ud);
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED: {
		char what[32];

		snprintf(what, sizeof(what), "node %d", n ? n->index : -1);
		event_msg(what, ev);
		t.connects_left--;
		return ev->status ? ev->status : -1;
	}
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		event_msg("device removed", ev);
		return -ENODEV;
	default:
		return 0;
	}
	if (ret)
		t.connects_left--;
	return ret;
}

/* Runs events until every node is resolved; the server waits without limit
 * for requests, a client at most the peer timeout for each event. */
static int connect_events(bool server)
{
	int ret = 0;

	while (t.connects_left > 0 && !ret) {
		struct rdma_cm_event *ev;
		int ms = server ? WAIT_FOREVER : peer_timeout_ms();

		if (get_cm_event(t.ch, ms, &ev)) {
			if (errno == ETIMEDOUT) {
				errmsg("no answer within %d ms: %d node(s) still unresolved", ms,
				       t.connects_left);
				return -ETIMEDOUT;
			}
			errno_msg("rdma_get_cm_event");
			return -errno;
		}
		ret = handle_event(ev);
		rdma_ack_cm_event(ev);
		if (t.extra_id) {
			rdma_destroy_id(t.extra_id);
			t.extra_id = NULL;
		}
	}
	return ret;
}

/* --- the two sides --------------------------------------------------------- */

static int run_server(void)
{
	int ret;

	printf("udaddy: starting server\n");
	if (rdma_create_id(t.ch, &t.listen_id, NULL, t.hints.ai_port_space)) {
		errno_msg("rdma_create_id");
		return -1;
	}
	if ((ret = get_rdma_addr(t.src, t.dst, t.port, &t.hints, &t.rai)))
		return ret;
	if (rdma_bind_addr(t.listen_id, t.rai->ai_src_addr)) {
		errmsg("rdma_bind_addr(%s, port %s) failed: %s", t.src ? t.src : "any", t.port,
		       strerror(errno));
		return -1;
	}
	if (rdma_listen(t.listen_id, 0)) {
		errno_msg("rdma_listen");
		return -1;
	}
	if ((ret = connect_events(true)))
		return ret;
	if (t.count) {
		printf("receiving data transfers\n");
		if ((ret = complete_all(true)))
			return ret;
		printf("sending replies\n");
		for (int i = 0; i < t.connections; i++)
			if (post_sends(&t.nodes[i]))
				return -1;
		if ((ret = complete_all(false)))
			return ret;
		printf("data transfers complete\n");
	}
	return 0;
}

static int run_client(void)
{
	int ret;

	printf("udaddy: starting client\n");
	if ((ret = get_rdma_addr(t.src, t.dst, t.port, &t.hints, &t.rai)))
		return ret;
	printf("udaddy: connecting\n");
	for (int i = 0; i < t.connections; i++) {
		if (rdma_resolve_addr(t.nodes[i].id, t.rai->ai_src_addr, t.rai->ai_dst_addr, 2000)) {
			errno_msg("rdma_resolve_addr");
			return -1;
		}
	}
	if ((ret = connect_events(false)))
		return ret;
	if (t.count) {
		printf("initiating data transfers\n");
		for (int i = 0; i < t.connections; i++)
			if (post_sends(&t.nodes[i]))
				return -1;
		if ((ret = complete_all(false)))
			return ret;
		printf("receiving data transfers\n");
		if ((ret = complete_all(true)))
			return ret;
		printf("data transfers complete\n");
	}
	return 0;
}

/* --- main ------------------------------------------------------------------ */

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [-s server_address] [-b bind_address] [-f address_format]\n"
		"          [-P port_space] [-c connections] [-C message_count] [-S message_size]\n"
		"          [-t type_of_service] [-p port_space_number]\n"
		"  -s addr  run as the client of the server at addr (default: run as the server)\n"
		"  -b addr  address to bind to\n"
		"  -f fmt   address format: name, ip, ipv6 or gid\n"
		"  -P ps    port space: udp or ipoib\n"
		"  -c n     connections (default 1)\n"
		"  -C n     datagrams each way per connection (default 10)\n"
		"  -S n     datagram size in bytes, at most the path MTU (default 100)\n"
		"  -t tos   type of service\n"
		"  -p n     port space by number: %#x for UDP (default), %#x for IPoIB\n"
		"The service port is always 7174.\n"
		"environment: RDMACM_TOOLS_TIMEOUT=seconds to wait for a silent peer (default 20)\n",
		argv0, RDMA_PS_UDP, RDMA_PS_IPOIB);
}

static int parse_options(int argc, char **argv)
{
	int op, v;

	t.hints.ai_port_space = RDMA_PS_UDP;
	while ((op = getopt(argc, argv, "s:b:c:C:S:t:p:P:f:")) != -1) {
		switch (op) {
		case 's': t.dst = optarg; break;
		case 'b': t.src = optarg; break;
		case 'c':
			if (parse_int(optarg, "connections (-c)", 1, 100000, &t.connections))
				return -1;
			break;
		case 'C':
			if (parse_int(optarg, "message count (-C)", 0, 1 << 16, &t.count))
				return -1;
			break;
		case 'S':
			if (parse_int(optarg, "message size (-S)", 0, 1 << 16, &t.size))
				return -1;
			break;
		case 't':
			if (parse_int(optarg, "type of service (-t)", 0, 255, &v))
				return -1;
			t.tos = (uint8_t)v;
			t.set_tos = true;
			break;
		case 'p':
			if (parse_int(optarg, "port space (-p)", 0, 0xffff, &v))
				return -1;
			if (v != RDMA_PS_UDP && v != RDMA_PS_IPOIB) {
				errmsg("port space (-p) %#x is neither UDP (%#x) nor IPoIB (%#x)", v,
				       RDMA_PS_UDP, RDMA_PS_IPOIB);
				return -1;
			}
			t.hints.ai_port_space = v;
			break;
		case 'P':
			if (!strncasecmp("ipoib", optarg, 5))
				t.hints.ai_port_space = RDMA_PS_IPOIB;
			else if (strncasecmp("udp", optarg, 3))
				fprintf(stderr, "Warning: unknown port space format\n");
			break;
		case 'f': apply_addr_format(optarg, &t.hints); break;
		default:
			usage(argv[0]);
			return -1;
		}
	}
	if (optind < argc) {
		errmsg("unexpected argument '%s'", argv[optind]);
		return -1;
	}
	if (!t.size)
		t.count = 0;
	return 0;
}

int main(int argc, char **argv)
{
	int ret;

	tool_init("udaddy");
	if (parse_options(argc, argv))
		exit(1);
	t.connects_left = t.connections;
	if (!(t.ch = open_event_channel()))
		exit(1);
	if (!(t.nodes = calloc(t.connections, sizeof(*t.nodes)))) {
		errmsg("no memory for %d connections", t.connections);
		exit(1);
	}
	for (int i = 0; i < t.connections; i++) {
		t.nodes[i].index = i;
		if (t.dst && rdma_create_id(t.ch, &t.nodes[i].id, &t.nodes[i], t.hints.ai_port_space)) {
			errno_msg("rdma_create_id");
			exit(1);
		}
	}
	if (t.dst) {
		ret = run_client();
	} else {
		t.hints.ai_flags |= RAI_PASSIVE;
		ret = run_server();
	}
	printf("test complete\n");
	for (int i = 0; i < t.connections; i++)
		destroy_node(&t.nodes[i]);
	free(t.nodes);
	if (t.listen_id)
		rdma_destroy_id(t.listen_id);
	rdma_destroy_event_channel(t.ch);
	if (t.rai)
		rdma_freeaddrinfo(t.rai);
	printf("return status %d\n", ret);
	return ret;
}
