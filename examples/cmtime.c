/*
 * cmtime: times each step of setting up and tearing down -c RC connections
 * with rdma_cm (all connections step by step, each step issued for all of
 * them before waiting for their events), and prints rdma-core's table:
 *
 *   step              total ms     max ms     min us  us / conn
 *   create id    :        0.88       0.18       8.00      43.90
 *
 * The server (no -s) accepts and disconnects connections until killed.
 * Wire-compatible with rdma-core's cmtime. A step waits for its events as
 * long as they keep coming; when none comes for the peer timeout, the
 * missing connections count as failed. Exit status: 0 when every connection
 * went through every step, else 1.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/rdma_cma.h>

#include "common.h"

enum step { CREATE_ID, BIND, RESOLVE_ADDR, RESOLVE_ROUTE, CREATE_QP, CONNECT, DISCONNECT,
	    DESTROY, STEPS };

static const char *const step_name[STEPS] = {
	"create id", "bind addr", "resolve addr", "resolve route",
	"create qp", "connect",   "disconnect",   "destroy",
};

struct node {
	struct rdma_cm_id *id;
	int64_t start[STEPS], end[STEPS]; /* microseconds; 0: not done */
	int retries;
	bool failed;
};

static struct {
	const char *dst, *src, *port;
	int connections, retries, timeout_ms;
	struct rdma_addrinfo hints, *rai;
	struct rdma_event_channel *ch;
	struct node *nodes;
	int64_t step_start[STEPS], step_end[STEPS];
	int outstanding; /* events the current step still waits for */
} t = { .port = "7471", .connections = 100, .retries = 2, .timeout_ms = 2000 };

static struct ibv_qp_init_attr qp_attr = {
	.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	.qp_type = IBV_QPT_RC,
};

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* --- client: events --------------------------------------------------------- */

static void finish(struct node *n, enum step s, bool ok)
{
	n->end[s] = now_us();
	if (!ok)
		n->failed = true;
	t.outstanding--;
}

static void handle_client_event(struct rdma_cm_event *ev)
{
	struct node *n = ev->id->context;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		finish(n, RESOLVE_ADDR, true);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		finish(n, RESOLVE_ROUTE, true);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		finish(n, CONNECT, true);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		finish(n, DISCONNECT, true);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
		if (n->retries-- > 0 &&
		    !rdma_resolve_addr(n->id, t.rai->ai_src_addr, t.rai->ai_dst_addr, t.timeout_ms))
			break;
		event_msg("resolving an address", ev);
		finish(n, RESOLVE_ADDR, false);
		break;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		if (n->retries-- > 0 && !rdma_resolve_route(n->id, t.timeout_ms))
			break;
		event_msg("resolving a route", ev);
		finish(n, RESOLVE_ROUTE, false);
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
		event_msg("connecting", ev);
		finish(n, CONNECT, false);
		break;
	default:
		debug_msg("event %s ignored", rdma_event_str(ev->event));
		break;
	}
}

/* Processes events until the step has all of its answers, or none comes for
 * the peer timeout (then the missing ones fail). */
static void wait_step(enum step s)
{
	int ms = peer_timeout_ms();

	if (s == RESOLVE_ADDR || s == RESOLVE_ROUTE)
		ms += (t.retries + 1) * t.timeout_ms;
	while (t.outstanding > 0) {
		struct rdma_cm_event *ev;

		if (get_cm_event(t.ch, ms, &ev)) {
			if (errno == ETIMEDOUT)
				errmsg("%s: %d connection(s) got no answer within %d ms", step_name[s],
				       t.outstanding, ms);
			else
				errno_msg("rdma_get_cm_event");
			for (int i = 0; i < t.connections; i++) {
				struct node *n = &t.nodes[i];

				if (n->start[s] && !n->end[s])
					n->failed = true;
			}
			t.outstanding = 0;
			return;
		}
		handle_client_event(ev);
		rdma_ack_cm_event(ev);
	}
}

/* --- client: the steps -------------------------------------------------------- */

/* Runs one step over every connection still alive: a synchronous call, or
 * an asynchronous one whose events wait_step() collects. */
static void run_step(enum step s, const char *banner)
{
	struct rdma_conn_param param = {
		.responder_resources = 1,
		.initiator_depth = 1,
		.retry_count = (uint8_t)t.retries,
		.private_data = t.rai->ai_connect,
		.private_data_len = t.rai->ai_connect_len,
	};
	bool async = s == RESOLVE_ADDR || s == RESOLVE_ROUTE || s == CONNECT || s == DISCONNECT;

	printf("%s\n", banner);
	t.step_start[s] = now_us();
	for (int i = 0; i < t.connections; i++) {
		struct node *n = &t.nodes[i];
		const char *call = NULL;
		int ret = 0;

		if (n->failed)
			continue;
		n->start[s] = now_us();
		n->retries = t.retries;
		switch (s) {
		case BIND:
			call = "rdma_bind_addr";
			ret = rdma_bind_addr(n->id, t.rai->ai_src_addr);
			break;
		case RESOLVE_ADDR:
			call = "rdma_resolve_addr";
			ret = rdma_resolve_addr(n->id, t.rai->ai_src_addr, t.rai->ai_dst_addr,
						t.timeout_ms);
			break;
		case RESOLVE_ROUTE:
			call = "rdma_resolve_route";
			ret = rdma_resolve_route(n->id, t.timeout_ms);
			break;
		case CREATE_QP:
			call = "rdma_create_qp";
			ret = rdma_create_qp(n->id, NULL, &qp_attr);
			break;
		case CONNECT:
			call = "rdma_connect";
			ret = rdma_connect(n->id, &param);
			break;
		case DISCONNECT:
			call = "rdma_disconnect";
			ret = rdma_disconnect(n->id);
			break;
		default:
			break;
		}
		if (ret) {
			errmsg("connection %d: %s failed: %s", i, call, strerror(errno));
			n->failed = true;
		} else if (async) {
			t.outstanding++;
		} else {
			n->end[s] = now_us();
		}
	}
	if (async)
		wait_step(s);
	t.step_end[s] = now_us();
}

static int run_client(void)
{
	int failed = 0;

	if (get_rdma_addr(t.src, t.dst, t.port, &t.hints, &t.rai))
		return -1;
	printf("creating id\n");
	t.step_start[CREATE_ID] = now_us();
	for (int i = 0; i < t.connections; i++) {
		struct node *n = &t.nodes[i];

		n->start[CREATE_ID] = now_us();
		if (rdma_create_id(t.ch, &n->id, n, t.hints.ai_port_space)) {
			errno_msg("rdma_create_id");
			n->failed = true;
			continue;
		}
		n->end[CREATE_ID] = now_us();
	}
	t.step_end[CREATE_ID] = now_us();
	if (t.src)
		run_step(BIND, "binding source address");
	run_step(RESOLVE_ADDR, "resolving address");
	run_step(RESOLVE_ROUTE, "resolving route");
	run_step(CREATE_QP, "creating qp");
	run_step(CONNECT, "connecting");
	run_step(DISCONNECT, "disconnecting");

	printf("destroying id\n");
	t.step_start[DESTROY] = now_us();
	for (int i = 0; i < t.connections; i++) {
		struct node *n = &t.nodes[i];

		if (n->failed)
			failed++;
		if (!n->id)
			continue;
		n->start[DESTROY] = now_us();
		rdma_destroy_id(n->id); /* also destroys its QP */
		n->end[DESTROY] = now_us();
	}
	t.step_end[DESTROY] = now_us();
	if (failed)
		errmsg("%d of %d connections failed", failed, t.connections);
	return failed ? -1 : 0;
}

static void show_table(void)
{
	printf("step              total ms     max ms     min us  us / conn\n");
	for (int s = 0; s < STEPS; s++) {
		double total = (double)(t.step_end[s] - t.step_start[s]), max = 0, min = 0;
		bool any = false;

		if (s == BIND && !t.src)
			continue;
		for (int i = 0; i < t.connections; i++) {
			const struct node *n = &t.nodes[i];
			double us;

			if (!n->start[s] || !n->end[s])
				continue;
			us = (double)(n->end[s] - n->start[s]);
			max = any && max > us ? max : us;
			min = any && min < us ? min : us;
			any = true;
		}
		printf("%-13s: %11.2f%11.2f%11.2f%11.2f\n", step_name[s], total / 1000., max / 1000.,
		       min, total / t.connections);
	}
}

/* --- server ------------------------------------------------------------------ */

/* Accepts each request and tears down each connection the client ends,
 * until killed. */
static int run_server(void)
{
	struct rdma_cm_id *listen_id;

	if (rdma_create_id(t.ch, &listen_id, NULL, t.hints.ai_port_space)) {
		errno_msg("rdma_create_id");
		return -1;
	}
	if (get_rdma_addr(t.src, t.dst, t.port, &t.hints, &t.rai))
		return -1;
	if (rdma_bind_addr(listen_id, t.rai->ai_src_addr)) {
		errmsg("rdma_bind_addr(%s, port %s) failed: %s", t.src ? t.src : "any", t.port,
		       strerror(errno));
		return -1;
	}
	if (rdma_listen(listen_id, 0)) {
		errno_msg("rdma_listen");
		return -1;
	}
	for (;;) {
		struct rdma_cm_id *doomed = NULL;
		struct rdma_cm_event *ev;

		if (get_cm_event(t.ch, WAIT_FOREVER, &ev)) {
			errno_msg("rdma_get_cm_event");
			return -1;
		}
		switch (ev->event) {
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			if (rdma_create_qp(ev->id, NULL, &qp_attr)) {
				errno_msg("rdma_create_qp");
			} else if (rdma_accept(ev->id, NULL)) {
				errno_msg("rdma_accept");
			} else {
				break;
			}
			printf("failing connection request\n");
			rdma_reject(ev->id, NULL, 0);
			doomed = ev->id;
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			rdma_disconnect(ev->id);
			doomed = ev->id;
			break;
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
			event_msg("a connection failed", ev);
			doomed = ev->id;
			break;
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			event_msg("device removed", ev);
			rdma_ack_cm_event(ev);
			return -1;
		default:
			break;
		}
		rdma_ack_cm_event(ev);
		if (doomed) /* only once its event is acknowledged */
			rdma_destroy_id(doomed);
	}
}

/* --- main ------------------------------------------------------------------ */

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [-s server_address] [-b bind_address] [-c connections]\n"
		"          [-p port_number] [-r retries] [-t timeout_ms]\n"
		"  -s addr  run as the client of the server at addr (default: run as the server)\n"
		"  -b addr  address to bind to\n"
		"  -c n     connections (default 100)\n"
		"  -p port  port number (default 7471)\n"
		"  -r n     retries of address and route resolution (default 2)\n"
		"  -t ms    timeout of address and route resolution (default 2000)\n"
		"environment: RDMACM_TOOLS_TIMEOUT=seconds to wait for a silent peer (default 20)\n",
		argv0);
}

int main(int argc, char **argv)
{
	int op, ret;

	tool_init("cmtime");
	t.hints.ai_port_space = RDMA_PS_TCP;
	t.hints.ai_qp_type = IBV_QPT_RC;
	while ((op = getopt(argc, argv, "s:b:c:p:r:t:")) != -1) {
		switch (op) {
		case 's': t.dst = optarg; break;
		case 'b': t.src = optarg; break;
		case 'c':
			if (parse_int(optarg, "connections (-c)", 1, 1000000, &t.connections))
				exit(1);
			break;
		case 'p': t.port = optarg; break;
		case 'r':
			if (parse_int(optarg, "retries (-r)", 0, 255, &t.retries))
				exit(1);
			break;
		case 't':
			if (parse_int(optarg, "timeout (-t)", 1, 3600000, &t.timeout_ms))
				exit(1);
			break;
		default:
			usage(argv[0]);
			exit(1);
		}
	}
	if (optind < argc) {
		errmsg("unexpected argument '%s'", argv[optind]);
		exit(1);
	}
	if (!(t.ch = open_event_channel()))
		exit(1);
	if (t.dst) {
		if (!(t.nodes = calloc(t.connections, sizeof(*t.nodes)))) {
			errmsg("no memory for %d connections", t.connections);
			exit(1);
		}
		ret = run_client();
	} else {
		t.hints.ai_flags |= RAI_PASSIVE;
		ret = run_server();
	}
	rdma_destroy_event_channel(t.ch);
	if (t.rai)
		rdma_freeaddrinfo(t.rai);
	if (t.nodes)
		show_table();
	free(t.nodes);
	return ret ? 1 : 0;
}
