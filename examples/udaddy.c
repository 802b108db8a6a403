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
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include <rdma/rdma_cma.h>

#include "common.h"
#include "nodes.h"

static struct {
	struct node_set s;
	bool set_tos;
	uint8_t tos;
	int connects_left;
} t = { .s = { .port = "7174", .n = 1, .count = 10, .size = 100, .noun = "node", .ud = true } };

/* --- CM events ------------------------------------------------------------ */

static int on_connect_request(struct rdma_cm_id *id)
{
	struct node *n = nodes_take_request(&t.s, id);

	if (!n)
		return 0;
	t.connects_left--;
	return node_accept(&t.s, n);
}

static int handle_event(struct rdma_cm_event *ev)
{
	struct node *n = ev->id->context;
	int ret = 0;

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
		ret = node_connect(&t.s, n, &(struct rdma_conn_param){ 0 });
		break;
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		return on_connect_request(ev->id);
	case RDMA_CM_EVENT_ESTABLISHED:
		t.connects_left--;
		return node_set_peer(n, &ev->param.ud);
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
		t.connects_left--;
		return node_event_failed(&t.s, n, ev);
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
		int ms = server ? WAIT_FOREVER : peer_timeout_ms();

		ret = nodes_next_event(&t.s, ms, handle_event);
		if (ret == NO_EVENT) {
			errmsg("no answer within %d ms: %d node(s) still unresolved", ms,
			       t.connects_left);
			ret = -ETIMEDOUT;
		}
	}
	return ret;
}

/* --- the two sides --------------------------------------------------------- */

/* Sends -C datagrams on every node and waits for their completions. */
static int send_all(void)
{
	for (int i = 0; i < t.s.n; i++)
		if (node_post_sends(&t.s, &t.s.node[i]))
			return -1;
	return nodes_complete(&t.s, DIR_SEND, false);
}

static int run_server(void)
{
	int ret;

	printf("udaddy: starting server\n");
	if ((ret = nodes_listen(&t.s)) || (ret = connect_events(true)))
		return ret;
	if (t.s.count) {
		printf("receiving data transfers\n");
		if ((ret = nodes_complete(&t.s, DIR_RECV, false)))
			return ret;
		printf("sending replies\n");
		if ((ret = send_all()))
			return ret;
		printf("data transfers complete\n");
	}
	return 0;
}

static int run_client(void)
{
	int ret;

	printf("udaddy: starting client\n");
	if ((ret = nodes_resolve(&t.s)) || (ret = connect_events(false)))
		return ret;
	if (t.s.count) {
		printf("initiating data transfers\n");
		if ((ret = send_all()))
			return ret;
		printf("receiving data transfers\n");
		if ((ret = nodes_complete(&t.s, DIR_RECV, false)))
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

static int option(int op, const char *arg)
{
	switch (op) {
	case 's': t.s.dst = arg; return 0;
	case 'b': t.s.src = arg; return 0;
	case 't': return parse_tos(arg, &t.tos, &t.set_tos);
	case 'p': return parse_ud_port_space(arg, &t.s.hints.ai_port_space);
	case 'P':
		if (!strncasecmp("ipoib", arg, 5))
			t.s.hints.ai_port_space = RDMA_PS_IPOIB;
		else if (strncasecmp("udp", arg, 3))
			fprintf(stderr, "Warning: unknown port space format\n");
		return 0;
	case 'f': apply_addr_format(arg, &t.s.hints); return 0;
	default: return 1;
	}
}

int main(int argc, char **argv)
{
	tool_init("udaddy");
	t.s.hints.ai_port_space = RDMA_PS_UDP;
	if (nodes_options(&t.s, argc, argv, "s:b:c:C:S:t:p:P:f:", 1 << 16, 1 << 16, option, usage))
		exit(1);
	t.connects_left = t.s.n;
	return nodes_main(&t.s, run_server, run_client);
}
