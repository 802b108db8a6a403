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
#include <getopt.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "common.h"

#define MSG_SIZE 16

static const char *server; /* NULL: any address */
static const char *port = "7471";
static uint8_t send_msg[MSG_SIZE];
static uint8_t recv_msg[MSG_SIZE];

/* Waits (bounded) for one completion and checks it. */
static int get_comp(struct rdma_cm_id *id, bool send)
{
	struct ibv_wc wc;
	int ret;

	watchdog_arm(peer_timeout_ms(), send ? "waiting for the reply to complete"
					      : "waiting for the client's message");
	do
		ret = send ? rdma_get_send_comp(id, &wc) : rdma_get_recv_comp(id, &wc);
	while (ret == 0);
	watchdog_arm(0, NULL);
	if (ret < 0) {
		errno_msg(send ? "rdma_get_send_comp" : "rdma_get_recv_comp");
		return -1;
	}
	if (wc.status != IBV_WC_SUCCESS) {
		wc_msg(send ? "send" : "receive", &wc);
		return -1;
	}
	return 0;
}

/* Serves the connection request id: one message in, one reply out. */
static int serve(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr init = { 0 };
	struct ibv_qp_attr qp_attr;
	struct ibv_mr *mr, *send_mr = NULL;
	int send_flags = 0, ret = -1;

	if (ibv_query_qp(id->qp, &qp_attr, IBV_QP_CAP, &init)) {
		errno_msg("ibv_query_qp");
		return -1;
	}
	if (init.cap.max_inline_data >= MSG_SIZE)
		send_flags = IBV_SEND_INLINE;
	else
		printf("rdma_server: device doesn't support IBV_SEND_INLINE, using sge sends\n");
	mr = rdma_reg_msgs(id, recv_msg, MSG_SIZE);
	if (!mr) {
		errno_msg("rdma_reg_msgs for recv_msg");
		return -1;
	}
	if (!(send_flags & IBV_SEND_INLINE) && !(send_mr = rdma_reg_msgs(id, send_msg, MSG_SIZE))) {
		errno_msg("rdma_reg_msgs for send_msg");
		goto out;
	}
	if (rdma_post_recv(id, NULL, recv_msg, MSG_SIZE, mr)) {
		errno_msg("rdma_post_recv");
		goto out;
	}
	watchdog_arm(peer_timeout_ms(), "rdma_accept (waiting for the connection to establish)");
	ret = rdma_accept(id, NULL);
	watchdog_arm(0, NULL);
	if (ret) {
		errno_msg("rdma_accept");
		goto out;
	}
	ret = get_comp(id, false);
	if (!ret) {
		memcpy(send_msg, recv_msg, MSG_SIZE);
		ret = rdma_post_send(id, NULL, send_msg, MSG_SIZE, send_mr, send_flags);
		if (ret)
			errno_msg("rdma_post_send");
		else
			ret = get_comp(id, true);
	}
	rdma_disconnect(id);
out:
	if (send_mr)
		rdma_dereg_mr(send_mr);
	rdma_dereg_mr(mr);
	return ret;
}

static int run(void)
{
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr attr = {
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = MSG_SIZE },
		.sq_sig_all = 1,
	};
	struct rdma_cm_id *listen_id, *id;
	int ret;

	ret = rdma_getaddrinfo(server, port, &hints, &res);
	if (ret) {
		errmsg("rdma_getaddrinfo(%s, port %s) failed: %s", server ? server : "any", port,
		       ret == EAI_SYSTEM ? strerror(errno) : gai_strerror(ret));
		return ret;
	}
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
	int op, ret;

	tool_init("rdma_server");
	while ((op = getopt(argc, argv, "s:p:")) != -1) {
		switch (op) {
		case 's': server = optarg; break;
		case 'p': port = optarg; break;
		default:
			fprintf(stderr,
				"usage: %s [-s server_address] [-p port_number]\n"
				"  -s addr  address to listen on (default: any)\n"
				"  -p port  port (default 7471)\n"
				"environment: RDMACM_TOOLS_TIMEOUT=seconds to wait for a silent peer (default 20)\n",
				argv[0]);
			exit(1);
		}
	}
	if (optind < argc) {
		errmsg("unexpected argument '%s'", argv[optind]);
		exit(1);
	}
	printf("rdma_server: start\n");
	ret = run();
	printf("rdma_server: end %d\n", ret);
	return ret;
}
