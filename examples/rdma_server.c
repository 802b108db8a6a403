/*
 * rdma_server: the endpoint API's server side, wire-compatible with
 * rdma-core's rdma_server: rdma_getaddrinfo, rdma_create_ep, rdma_listen,
 * rdma_get_request, rdma_accept, one 16-byte receive, and a 16-byte reply
 * (here: the message received, echoed back), rdma_disconnect.
 *
 * Prints "rdma_server: start" and "rdma_server: end N" and exits with N
 * (0 on success). It waits for a client without limit; once one connects,
 * a watchdog bounds every synchronous call (peer_timeout_ms()).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "common.h"
#include "endpoint.h"

static const char *server; /* NULL: any address */
static const char *port = "7471";

/* Serves the connection request id: one message in, one reply out. */
static int serve(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr init = { 0 };
	struct ibv_qp_attr qp_attr;
	struct msgs m = { 0 };
	int ret = -1;

	if (ibv_query_qp(id->qp, &qp_attr, IBV_QP_CAP, &init)) {
		errno_msg("ibv_query_qp");
		return -1;
	}
	if (msgs_setup(id, &m, init.cap.max_inline_data))
		goto out;
	watchdog_arm(peer_timeout_ms(), "rdma_accept (waiting for the connection to establish)");
	ret = rdma_accept(id, NULL);
	watchdog_arm(0, NULL);
	if (ret) {
		errno_msg("rdma_accept");
		goto out;
	}
	ret = msgs_recv(id, "waiting for the client's message");
	if (!ret) {
		memcpy(m.send, m.recv, MSG_SIZE);
		ret = msgs_send(id, &m, "waiting for the reply to complete");
	}
	rdma_disconnect(id);
out:
	msgs_free(&m);
	return ret;
}

static int run(void)
{
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr attr;
	struct rdma_cm_id *listen_id, *id;
	int ret;

	if ((ret = get_rdma_addr(server, NULL, port, &hints, &res)))
		return ret;
	ep_qp_attr(&attr);
	ret = rdma_create_ep(&listen_id, res, NULL, &attr);
	if (ret) {
		errmsg("rdma_create_ep(%s, port %s) failed: %s", server ? server : "any", port,
		       strerror(errno));
		goto out_free;
	}
	ret = rdma_listen(listen_id, 0);
	if (ret) {
		errno_msg("rdma_listen");
		goto out_listen;
	}
	ret = rdma_get_request(listen_id, &id); /* a server waits for its client */
	if (ret) {
		errno_msg("rdma_get_request");
		goto out_listen;
	}
	ret = serve(id);
	rdma_destroy_ep(id);
out_listen:
	rdma_destroy_ep(listen_id);
out_free:
	rdma_freeaddrinfo(res);
	return ret;
}

int main(int argc, char **argv)
{
	int ret;

	tool_init("rdma_server");
	ep_parse_options(argc, argv, &server, &port, "address to listen on (default: any)",
			 "port (default 7471)");
	printf("rdma_server: start\n");
	ret = run();
	printf("rdma_server: end %d\n", ret);
	return ret;
}
