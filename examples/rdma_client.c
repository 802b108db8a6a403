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
#include <getopt.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "common.h"

#define MSG_SIZE 16

static const char *server = "127.0.0.1";
static const char *port = "7471";
static uint8_t send_msg[MSG_SIZE];
static uint8_t recv_msg[MSG_SIZE];

/* Waits (bounded) for one completion and checks it. */
static int get_comp(struct rdma_cm_id *id, bool send)
{
	struct ibv_wc wc;
	int ret;

	watchdog_arm(peer_timeout_ms(), send ? "waiting for the send to complete"
					      : "waiting for the server's reply");
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

static int run(void)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr attr = {
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = MSG_SIZE },
		.sq_sig_all = 1,
	};
	struct ibv_mr *mr = NULL, *send_mr = NULL;
	struct rdma_cm_id *id;
	int send_flags = 0, ret;

	ret = rdma_getaddrinfo(server, port, &hints, &res);
	if (ret) {
		errmsg("rdma_getaddrinfo(%s, port %s) failed: %s", server, port,
		       ret == EAI_SYSTEM ? strerror(errno) : gai_strerror(ret));
		return ret;
	}
	watchdog_arm(peer_timeout_ms(), "rdma_create_ep (resolving the address and route)");
	ret = rdma_create_ep(&id, res, NULL, &attr);
	watchdog_arm(0, NULL);
	if (ret) {
		errmsg("rdma_create_ep(%s, port %s) failed: %s", server, port, strerror(errno));
		goto out_free;
	}
	if (attr.cap.max_inline_data >= MSG_SIZE)
		send_flags = IBV_SEND_INLINE;
	else
		printf("rdma_client: device doesn't support IBV_SEND_INLINE, using sge sends\n");

	ret = -1;
	mr = rdma_reg_msgs(id, recv_msg, MSG_SIZE);
	if (!mr) {
		errno_msg("rdma_reg_msgs for recv_msg");
		goto out_destroy;
	}
	if (!(send_flags & IBV_SEND_INLINE) && !(send_mr = rdma_reg_msgs(id, send_msg, MSG_SIZE))) {
		errno_msg("rdma_reg_msgs for send_msg");
		goto out_dereg;
	}
	if (rdma_post_recv(id, NULL, recv_msg, MSG_SIZE, mr)) {
		errno_msg("rdma_post_recv");
		goto out_dereg;
	}
	watchdog_arm(peer_timeout_ms(), "rdma_connect (waiting for the server to accept)");
	ret = rdma_connect(id, NULL);
	watchdog_arm(0, NULL);
	if (ret) {
		errmsg("rdma_connect to %s port %s failed: %s", server, port, strerror(errno));
		goto out_dereg;
	}
	memcpy(send_msg, "rdma_client ping", MSG_SIZE);
	ret = rdma_post_send(id, NULL, send_msg, MSG_SIZE, send_mr, send_flags);
	if (ret)
		errno_msg("rdma_post_send");
	else
		ret = get_comp(id, true) || get_comp(id, false) ? -1 : 0;
	rdma_disconnect(id);
out_dereg:
	if (send_mr)
		rdma_dereg_mr(send_mr);
	if (mr)
		rdma_dereg_mr(mr);
out_destroy:
	rdma_destroy_ep(id);
out_free:
	rdma_freeaddrinfo(res);
	return ret;
}

int main(int argc, char **argv)
{
	int op, ret;

	tool_init("rdma_client");
	while ((op = getopt(argc, argv, "s:p:")) != -1) {
		switch (op) {
		case 's': server = optarg; break;
		case 'p': port = optarg; break;
		default:
			fprintf(stderr,
				"usage: %s [-s server_address] [-p port_number]\n"
				"  -s addr  the server (default 127.0.0.1)\n"
				"  -p port  its port (default 7471)\n"
				"environment: RDMACM_TOOLS_TIMEOUT=seconds to wait for a silent peer (default 20)\n",
				argv[0]);
			exit(1);
		}
	}
	if (optind < argc) {
		errmsg("unexpected argument '%s'", argv[optind]);
		exit(1);
	}
	printf("rdma_client: start\n");
	ret = run();
	printf("rdma_client: end %d\n", ret);
	return ret;
}
