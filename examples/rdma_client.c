/*
 * rdma_client: the endpoint API's client side, wire-compatible with
 * rdma-core's rdma_client: rdma_getaddrinfo, rdma_create_ep (address and
 * route resolution, QP), rdma_connect, one 16-byte send and one 16-byte
 * receive, rdma_disconnect.
 *
 * Prints "rdma_client: start" and "rdma_client: end N" and exits with N
 * (0 on success). The endpoint API's calls are synchronous: a watchdog
 * bounds each (peer_timeout_ms()), so a dead server cannot hang the client.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "common.h"
#include "endpoint.h"

static const char *server = "127.0.0.1";
static const char *port = "7471";

/* Connected: the ping out, the server's echo back. */
static int exchange(struct rdma_cm_id *id, struct msgs *m)
{
	memcpy(m->send, "rdma_client ping", MSG_SIZE);
	if (msgs_send(id, m, "waiting for the send to complete") ||
	    msgs_recv(id, "waiting for the server's reply"))
		return -1;
	return 0;
}

static int run(void)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr attr;
	struct msgs m = { 0 };
	struct rdma_cm_id *id;
	int ret;

	if ((ret = get_rdma_addr(NULL, server, port, &hints, &res)))
		return ret;
	ep_qp_attr(&attr);
	watchdog_arm(peer_timeout_ms(), "rdma_create_ep (resolving the address and route)");
	ret = rdma_create_ep(&id, res, NULL, &attr);
	watchdog_arm(0, NULL);
	if (ret) {
		errmsg("rdma_create_ep(%s, port %s) failed: %s", server, port, strerror(errno));
		goto out_free;
	}
	ret = -1;
	if (msgs_setup(id, &m, attr.cap.max_inline_data))
		goto out_destroy;
	watchdog_arm(peer_timeout_ms(), "rdma_connect (waiting for the server to accept)");
	ret = rdma_connect(id, NULL);
	watchdog_arm(0, NULL);
	if (ret) {
		errmsg("rdma_connect to %s port %s failed: %s", server, port, strerror(errno));
		goto out_destroy;
	}
	ret = exchange(id, &m);
	rdma_disconnect(id);
out_destroy:
	msgs_free(&m);
	rdma_destroy_ep(id);
out_free:
	rdma_freeaddrinfo(res);
	return ret;
}

int main(int argc, char **argv)
{
	int ret;

	tool_init("rdma_client");
	ep_parse_options(argc, argv, &server, &port, "the server (default 127.0.0.1)",
			 "its port (default 7471)");
	printf("rdma_client: start\n");
	ret = run();
	printf("rdma_client: end %d\n", ret);
	return ret;
}
