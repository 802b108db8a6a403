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
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include <rdma/rdma_cma.h>

#include "common.h"
#include "nodes.h"

static struct {
	struct node_set s;
	bool set_tos, set_ack_timeout, migrate;
	uint8_t tos, ack_timeout;
	int pending, connects_left, disconnects_left;
} t = { .s = { .port = "7471", .n = 1, .count = 10, .size = 100, .noun = "connection" } };

/* --- CM events ------------------------------------------------------------ */

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
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1,
					 .retry_count = 5 };

	return node_connect(&t.s, n, &param);
}

static int on_connect_request(struct rdma_cm_id *id)
{
	struct node *n = nodes_take_request(&t.s, id);
	int ret;

	if (!n)
		return 0;
	ret = set_id_options(id);
	if (ret)
		node_reject(id);
	else
		ret = node_accept(&t.s, n);
	if (ret) {
		t.connects_left--;
		return -1;
	}
	t.pending++;
	return 0;
}

/* Handles one event; returns 0, or the status the test ends with. */
static int handle_event(struct rdma_cm_event *ev)
{
	struct node *n = ev->id->context;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		return on_addr_resolved(n) ? (t.connects_left--, -1) : 0;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		return on_route_resolved(n) ? (t.connects_left--, -1) : 0;
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		return on_connect_request(ev->id);
	case RDMA_CM_EVENT_ESTABLISHED:
		if (!t.s.dst)
			t.pending--;
		n->connected = true;
		t.connects_left--;
		t.disconnects_left++;
		return 0;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
		if (!t.s.dst)
			t.pending--;
		t.connects_left--;
		return node_event_failed(&t.s, n, ev);
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
		int ms = for_requests && !t.pending ? WAIT_FOREVER : peer_timeout_ms();

		ret = nodes_next_event(&t.s, ms, handle_event);
		if (ret == NO_EVENT) {
			errmsg("%s: %d connection(s) still waiting after %d ms", what, *left, ms);
			ret = -ETIMEDOUT;
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
	if (t.s.listen_id && rdma_migrate_id(t.s.listen_id, ch))
		goto fail;
	for (int i = 0; i < t.s.n; i++)
		if (t.s.node[i].id && rdma_migrate_id(t.s.node[i].id, ch))
			goto fail;
	rdma_destroy_event_channel(t.s.ch);
	t.s.ch = ch;
	return 0;
fail:
	errno_msg("rdma_migrate_id");
	return -1;
}

/* --- the two sides --------------------------------------------------------- */

static int post_all_sends(void)
{
	for (int i = 0; i < t.s.n; i++)
		if (node_post_sends(&t.s, &t.s.node[i]))
			return -1;
	return 0;
}

static int run_server(void)
{
	int ret;

	printf("cmatose: starting server\n");
	if ((ret = nodes_listen(&t.s)) ||
	    (ret = run_events(&t.connects_left, true, "establishing connections")))
		return ret;
	if (t.s.count) {
		printf("initiating data transfers\n");
		if (post_all_sends())
			return -1;
		printf("completing sends\n");
		if ((ret = nodes_complete(&t.s, DIR_SEND, false)))
			return ret;
		printf("receiving data transfers\n");
		if ((ret = nodes_complete(&t.s, DIR_RECV, false)))
			return ret;
		printf("data transfers complete\n");
	}
	if (t.migrate && migrate_channel())
		return -1;
	printf("cmatose: disconnecting\n");
	for (int i = 0; i < t.s.n; i++) {
		if (!t.s.node[i].connected)
			continue;
		t.s.node[i].connected = false;
		rdma_disconnect(t.s.node[i].id);
	}
	ret = run_events(&t.disconnects_left, false, "disconnecting");
	printf("disconnected\n");
	return ret;
}

static int run_client(void)
{
	int ret, ret2;

	printf("cmatose: starting client\n");
	if ((ret = nodes_resolve(&t.s)))
		return ret;
	ret = run_events(&t.connects_left, false, "connecting");
	if (ret)
		goto disconnect;
	if (t.s.count) {
		printf("receiving data transfers\n");
		if ((ret = nodes_complete(&t.s, DIR_RECV, false)))
			goto disconnect;
		printf("sending replies\n");
		if ((ret = post_all_sends()) || (ret = nodes_complete(&t.s, DIR_SEND, false)))
			goto disconnect;
		printf("data transfers complete\n");
	}
	if (t.migrate && (ret = migrate_channel()))
		return ret;
disconnect:
	/* The server disconnects; answer each of its requests. After a
	 * failure, disconnect what is connected instead of waiting for it. */
	for (int i = 0; ret && i < t.s.n; i++)
		if (t.s.node[i].connected)
			rdma_disconnect(t.s.node[i].id);
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

static int option(int op, const char *arg)
{
	int v;

	switch (op) {
	case 's': t.s.dst = arg; return 0;
	case 'b': t.s.src = arg; return 0;
	case 'f': apply_addr_format(arg, &t.s.hints); return 0;
	case 'P':
		if (!strncasecmp("ib", arg, 2))
			t.s.hints.ai_port_space = RDMA_PS_IB;
		else if (strncasecmp("tcp", arg, 3))
			fprintf(stderr, "Warning: unknown port space format\n");
		return 0;
	case 't': return parse_tos(arg, &t.tos, &t.set_tos);
	case 'p': t.s.port = arg; return 0;
	case 'a':
		if (parse_int(arg, "ack timeout (-a)", 0, 31, &v))
			return -1;
		t.ack_timeout = (uint8_t)v;
		t.set_ack_timeout = true;
		return 0;
	case 'm': t.migrate = true; return 0;
	default: return 1;
	}
}

int main(int argc, char **argv)
{
	tool_init("cmatose");
	t.s.hints.ai_port_space = RDMA_PS_TCP;
	if (nodes_options(&t.s, argc, argv, "s:b:f:P:c:C:S:t:p:a:m", 1 << 20, 1 << 30, option,
			  usage))
		exit(1);
	t.connects_left = t.s.n;
	return nodes_main(&t.s, run_server, run_client);
}
