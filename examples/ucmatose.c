/*
 * ucmatose: sets up -c RC connections with rdma_cm, sends -C messages of -S
 * bytes each way on every one, and tears them down; wire-compatible with
 * rdma-core's ucmatose (the server sends first, the client replies).
 *
 * Prints the same progress lines as rdma-core's ("cmatose: starting
 * client", ..., "data transfers complete", "test complete", "return status
 * N") and exits with that status: 0, or the failing event's status (8 for a
 * rejection by a port nobody listens on), or a negative errno. Every wait
 * for a peer that has shown up is bounded; only the server's wait for
 * connection requests is not.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <rdma/rdma_cma.h>

#include "common.h"

struct node {
	int index;
	struct rdma_cm_id *id;
	bool connected;
	struct ibv_pd *pd;
	struct ibv_comp_channel *send_cc, *recv_cc;
	struct ibv_cq *send_cq, *recv_cq;
	struct ibv_mr *mr;
	void *mem;
};

static struct {
	/* options */
	const char *dst, *src, *port;
	int connections, count, size;
	bool set_tos, set_ack_timeout, migrate;
	uint8_t tos, ack_timeout;
	struct rdma_addrinfo hints;
	/* state */
	struct rdma_event_channel *ch;
	struct rdma_addrinfo *rai;
	struct rdma_cm_id *listen_id;
	struct rdma_cm_id *extra_id; /* a request beyond -c: rejected, then destroyed */
	struct node *nodes;
	int accepted, pending, connects_left, disconnects_left;
} t = { .port = "7471", .connections = 1, .count = 10, .size = 100 };

/* --- per-connection resources ------------------------------------------------ */

static int set_id_options(struct rdma_cm_id *id)
{
	if (t.set_tos &&
	    rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &t.tos, sizeof(t.tos))) {
		errno_msg("rdma_set_option(RDMA_OPTION_ID_TOS)");
		return -1;
	}
	if (t.set_ack_timeout &&
	    rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &t.ack_timeout,
			    sizeof(t.ack_timeout))) {
		errno_msg("rdma_set_option(RDMA_OPTION_ID_ACK_TIMEOUT)");
		return -1;
	}
	return 0;
}

static int init_node(struct node *n)
{
	struct ibv_context *verbs = n->id->verbs;
	int cqe = t.count ? t.count : 1;

	if (!(n->pd = ibv_alloc_pd(verbs))) {
		errno_msg("ibv_alloc_pd");
		return -1;
	}
	n->send_cc = ibv_create_comp_channel(verbs);
	n->recv_cc = ibv_create_comp_channel(verbs);
	if (!n->send_cc || !n->recv_cc) {
		errno_msg("ibv_create_comp_channel");
		return -1;
	}
	n->send_cq = ibv_create_cq(verbs, cqe, n, n->send_cc, 0);
	n->recv_cq = ibv_create_cq(verbs, cqe, n, n->recv_cc, 0);
	if (!n->send_cq || !n->recv_cq) {
		errno_msg("ibv_create_cq");
		return -1;
	}
	struct ibv_qp_init_attr attr = {
		.qp_context = n,
		.send_cq = n->send_cq,
		.recv_cq = n->recv_cq,
		.cap = { .max_send_wr = cqe, .max_recv_wr = cqe, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
	};
	if (rdma_create_qp(n->id, n->pd, &attr)) {
		errno_msg("rdma_create_qp");
		return -1;
	}
	if (!t.count)
		return 0;
	n->mem = malloc(t.size);
	if (!n->mem) {
		errmsg("no memory for a %d-byte message", t.size);
		return -1;
	}
	fill_pattern(n->mem, t.size, n->index);
	n->mr = ibv_reg_mr(n->pd, n->mem, t.size, IBV_ACCESS_LOCAL_WRITE);
	if (!n->mr) {
		errno_msg("ibv_reg_mr");
		return -1;
	}
	return 0;
}

static int post_recvs(struct node *n)
{
	struct ibv_sge sge = { (uintptr_t)n->mem, t.size, n->mr ? n->mr->lkey : 0 };
	struct ibv_recv_wr wr = { .wr_id = (uintptr_t)n, .sg_list = &sge, .num_sge = 1 }, *bad;

	for (int i = 0; i < t.count; i++) {
		int err = ibv_post_recv(n->id->qp, &wr, &bad);

		if (err) {
			errmsg("connection %d: ibv_post_recv failed: %s", n->index, strerror(err));
			return -1;
		}
	}
	return 0;
}

static int post_sends(struct node *n)
{
	struct ibv_sge sge = { (uintptr_t)n->mem, t.size, n->mr ? n->mr->lkey : 0 };
	struct ibv_send_wr wr = { .wr_id = (uintptr_t)n, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND }, *bad;

	if (!n->connected)
		return 0;
	for (int i = 0; i < t.count; i++) {
		int err = ibv_post_send(n->id->qp, &wr, &bad);

		if (err) {
			errmsg("connection %d: ibv_post_send failed: %s", n->index, strerror(err));
			return -1;
		}
	}
	return 0;
}

/* Collects -C completions of every connected node's send or receive CQ. */
static int complete_all(bool sends)
{
	struct ibv_wc wc[8];

	for (int i = 0; i < t.connections; i++) {
		struct node *n = &t.nodes[i];
		int64_t deadline = deadline_in(peer_timeout_ms());

		if (!n->connected)
			continue;
		for (int done = 0; done < t.count;) {
			int got = poll_cq_until(sends ? n->send_cq : n->recv_cq,
						sends ? n->send_cc : n->recv_cc, wc, 8, deadline);

			if (got < 0) {
				if (errno == ETIMEDOUT)
					errmsg("connection %d: %d of %d %s completed within %d ms", i,
					       done, t.count, sends ? "sends" : "receives",
					       peer_timeout_ms());
				else
					errno_msg("polling the completion queue");
				return -ETIMEDOUT;
			}
			for (int k = 0; k < got; k++) {
				if (wc[k].status != IBV_WC_SUCCESS) {
					wc_msg(sends ? "send" : "receive", &wc[k]);
					return -EIO;
				}
				if (!sends && wc[k].byte_len != (uint32_t)t.size) {
					errmsg("connection %d: received %u bytes, expected %d (-S differs?)",
					       i, wc[k].byte_len, t.size);
					return -EIO;
				}
			}
			done += got;
		}
	}
	return 0;
}

static void destroy_node(struct node *n)
{
	if (!n->id)
		return;
	if (n->id->qp)
		rdma_destroy_qp(n->id);
	if (n->send_cq)
		ibv_destroy_cq(n->send_cq);
	if (n->recv_cq)
		ibv_destroy_cq(n->recv_cq);
	if (n->send_cc)
		ibv_destroy_comp_channel(n->send_cc);
	if (n->recv_cc)
		ibv_destroy_comp_channel(n->recv_cc);
	if (n->mr)
		ibv_dereg_mr(n->mr);
	free(n->mem);
	if (n->pd)
		ibv_dealloc_pd(n->pd);
	rdma_destroy_id(n->id);
}

/* --- CM events ------------------------------------------------------------ */

static int on_addr_resolved(struct node *n)
{
	if (set_id_options(n->id))
		return -1;
	if (rdma_resolve_route(n->id, 2000)) {
		errno_msg("rdma_resolve_route");
		return -1;
	}
	return 0;
}

static int on_route_resolved(struct node *n)
{
	struct rdma_conn_param param = {
		.responder_resources = 1,
		.initiator_depth = 1,
		.retry_count = 5,
		.private_data = t.rai->ai_connect,
		.private_data_len = t.rai->ai_connect_len,
	};

	if (init_node(n) || post_recvs(n))
		return -1;
	if (rdma_connect(n->id, &param)) {
		errno_msg("rdma_connect");
		return -1;
	}
	return 0;
}

static int on_connect_request(struct rdma_cm_id *id)
{
	struct node *n;

	if (t.accepted == t.connections) {
		errmsg("a connection request beyond the %d expected (-c): rejecting it",
		       t.connections);
		printf("cmatose: failing connection request\n");
		rdma_reject(id, NULL, 0);
		t.extra_id = id;
		return 0;
	}
	n = &t.nodes[t.accepted++];
	n->id = id;
	id->context = n;
	if (set_id_options(id) || init_node(n) || post_recvs(n)) {
		t.connects_left--;
		goto reject;
	}
	if (rdma_accept(id, NULL)) {
		errno_msg("rdma_accept");
		t.connects_left--;
		goto reject;
	}
	t.pending++;
	return 0;
reject:
	printf("cmatose: failing connection request\n");
	rdma_reject(id, NULL, 0);
	return -1;
}

/* Handles one event; returns 0, or the status the test ends with. */
static int handle_event(struct rdma_cm_event *ev)
{
	struct node *n = ev->id->context;

	debug_msg("event %s, status %d", rdma_event_str(ev->event), ev->status);
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		return on_addr_resolved(n) ? (t.connects_left--, -1) : 0;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		return on_route_resolved(n) ? (t.connects_left--, -1) : 0;
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		return on_connect_request(ev->id) ? -1 : 0;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (!t.dst)
			t.pending--;
		n->connected = true;
		t.connects_left--;
		t.disconnects_left++;
		return 0;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED: {
		char what[32];

		snprintf(what, sizeof(what), "connection %d", n ? n->index : -1);
		event_msg(what, ev);
		if (!t.dst)
			t.pending--;
		t.connects_left--;
		return ev->status ? ev->status : -1;
	}
	case RDMA_CM_EVENT_DISCONNECTED:
		rdma_disconnect(ev->id);
		t.disconnects_left--;
		return 0;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		event_msg("device removed", ev);
		return -ENODEV;
	default:
		return 0;
	}
}

/* Runs events until *left drops to 0. With for_requests, the server waits
 * for new requests without limit while none is pending; anything a peer
 * owes comes within the peer timeout. */
static int run_events(int *left, bool for_requests, const char *what)
{
	int ret = 0;

	while (*left > 0 && !ret) {
		struct rdma_cm_event *ev;
		int ms = for_requests && !t.pending ? WAIT_FOREVER : peer_timeout_ms();

		if (get_cm_event(t.ch, ms, &ev)) {
			if (errno == ETIMEDOUT) {
				errmsg("%s: %d connection(s) still waiting after %d ms", what, *left, ms);
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

static int migrate_channel(void)
{
	struct rdma_event_channel *ch;

	printf("migrating to new event channel\n");
	ch = rdma_create_event_channel();
	if (!ch) {
		errno_msg("rdma_create_event_channel");
		return -1;
	}
	if (t.listen_id && rdma_migrate_id(t.listen_id, ch))
		goto fail;
	for (int i = 0; i < t.connections; i++)
		if (t.nodes[i].id && rdma_migrate_id(t.nodes[i].id, ch))
			goto fail;
	rdma_destroy_event_channel(t.ch);
	t.ch = ch;
	return 0;
fail:
	errno_msg("rdma_migrate_id");
	return -1;
}

/* --- the two sides --------------------------------------------------------- */

static int run_server(void)
{
	int ret;

	printf("cmatose: starting server\n");
	if (rdma_create_id(t.ch, &t.listen_id, NULL, t.hints.ai_port_space)) {
		errno_msg("rdma_create_id");
		return -1;
	}
	ret = get_rdma_addr(t.src, t.dst, t.port, &t.hints, &t.rai);
	if (ret)
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
	ret = run_events(&t.connects_left, true, "establishing connections");
	if (ret)
		return ret;
	if (t.count) {
		printf("initiating data transfers\n");
		for (int i = 0; i < t.connections; i++)
			if (post_sends(&t.nodes[i]))
				return -1;
		printf("completing sends\n");
		if ((ret = complete_all(true)))
			return ret;
		printf("receiving data transfers\n");
		if ((ret = complete_all(false)))
			return ret;
		printf("data transfers complete\n");
	}
	if (t.migrate && migrate_channel())
		return -1;
	printf("cmatose: disconnecting\n");
	for (int i = 0; i < t.connections; i++) {
		if (!t.nodes[i].connected)
			continue;
		t.nodes[i].connected = false;
		rdma_disconnect(t.nodes[i].id);
	}
	ret = run_events(&t.disconnects_left, false, "disconnecting");
	printf("disconnected\n");
	return ret;
}

static int run_client(void)
{
	int ret, ret2;

	printf("cmatose: starting client\n");
	ret = get_rdma_addr(t.src, t.dst, t.port, &t.hints, &t.rai);
	if (ret)
		return ret;
	printf("cmatose: connecting\n");
	for (int i = 0; i < t.connections; i++) {
		if (rdma_resolve_addr(t.nodes[i].id, t.rai->ai_src_addr, t.rai->ai_dst_addr, 2000)) {
			errno_msg("rdma_resolve_addr");
			return -1;
		}
	}
	ret = run_events(&t.connects_left, false, "connecting");
	if (ret)
		goto disconnect;
	if (t.count) {
		printf("receiving data transfers\n");
		if ((ret = complete_all(false)))
			goto disconnect;
		printf("sending replies\n");
		for (int i = 0; i < t.connections; i++)
			if ((ret = post_sends(&t.nodes[i])))
				goto disconnect;
		if ((ret = complete_all(true)))
			goto disconnect;
		printf("data transfers complete\n");
	}
	if (t.migrate && (ret = migrate_channel()))
		return ret;
disconnect:
	/* The server disconnects; answer each of its requests. After a
	 * failure, disconnect what is connected instead of waiting for it. */
	for (int i = 0; ret && i < t.connections; i++)
		if (t.nodes[i].connected)
			rdma_disconnect(t.nodes[i].id);
	ret2 = run_events(&t.disconnects_left, false, "waiting for the server to disconnect");
	return ret ? ret : ret2;
}

/* --- main ------------------------------------------------------------------ */

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [-s server_address] [-b bind_address] [-f address_format]\n"
		"          [-P port_space] [-c connections] [-C message_count] [-S message_size]\n"
		"          [-t type_of_service] [-p port_number] [-a ack_timeout] [-m]\n"
		"  -s addr  run as the client of the server at addr (default: run as the server)\n"
		"  -b addr  address to bind to\n"
		"  -f fmt   address format: name, ip, ipv6 or gid\n"
		"  -P ps    port space: tcp or ib\n"
		"  -c n     connections (default 1)\n"
		"  -C n     messages per connection each way (default 10)\n"
		"  -S n     message size in bytes (default 100)\n"
		"  -t tos   type of service\n"
		"  -p port  port number (default 7471)\n"
		"  -a n     ACK timeout exponent (4.096 us * 2^n)\n"
		"  -m       migrate the ids to a new event channel after the transfers\n"
		"environment: RDMACM_TOOLS_TIMEOUT=seconds to wait for a silent peer (default 20)\n",
		argv0);
}

static int parse_options(int argc, char **argv)
{
	int op, v;

	t.hints.ai_port_space = RDMA_PS_TCP;
	while ((op = getopt(argc, argv, "s:b:f:P:c:C:S:t:p:a:m")) != -1) {
		switch (op) {
		case 's': t.dst = optarg; break;
		case 'b': t.src = optarg; break;
		case 'f': apply_addr_format(optarg, &t.hints); break;
		case 'P':
			if (!strncasecmp("ib", optarg, 2))
				t.hints.ai_port_space = RDMA_PS_IB;
			else if (strncasecmp("tcp", optarg, 3))
				fprintf(stderr, "Warning: unknown port space format\n");
			break;
		case 'c':
			if (parse_int(optarg, "connections (-c)", 1, 100000, &t.connections))
				return -1;
			break;
		case 'C':
			if (parse_int(optarg, "message count (-C)", 0, 1 << 20, &t.count))
				return -1;
			break;
		case 'S':
			if (parse_int(optarg, "message size (-S)", 0, 1 << 30, &t.size))
				return -1;
			break;
		case 't':
			if (parse_int(optarg, "type of service (-t)", 0, 255, &v))
				return -1;
			t.tos = (uint8_t)v;
			t.set_tos = true;
			break;
		case 'p': t.port = optarg; break;
		case 'a':
			if (parse_int(optarg, "ack timeout (-a)", 0, 31, &v))
				return -1;
			t.ack_timeout = (uint8_t)v;
			t.set_ack_timeout = true;
			break;
		case 'm': t.migrate = true; break;
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

	tool_init("cmatose");
	if (parse_options(argc, argv))
		exit(1);
	t.connects_left = t.connections;
	t.ch = open_event_channel();
	if (!t.ch)
		exit(1);
	t.nodes = calloc(t.connections, sizeof(*t.nodes));
	if (!t.nodes) {
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
