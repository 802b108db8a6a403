/* What rdma_server and rdma_client share; see endpoint.h. */
#include "endpoint.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include <rdma/rdma_verbs.h>

#include "common.h"

void ep_parse_options(int argc, char **argv, const char **server, const char **port,
		      const char *s_help, const char *p_help)
{
	int op;

	while ((op = getopt(argc, argv, "s:p:")) != -1) {
		switch (op) {
		case 's': *server = optarg; break;
		case 'p': *port = optarg; break;
		default:
			fprintf(stderr,
				"usage: %s [-s server_address] [-p port_number]\n"
				"  -s addr  %s\n"
				"  -p port  %s\n"
				"environment: RDMACM_TOOLS_TIMEOUT=seconds to wait for a silent peer (default 20)\n",
				argv[0], s_help, p_help);
			exit(1);
		}
	}
	if (no_arguments_left(argc, argv))
		exit(1);
}

void ep_qp_attr(struct ibv_qp_init_attr *attr)
{
	*attr = (struct ibv_qp_init_attr){
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = MSG_SIZE },
		.sq_sig_all = 1,
	};
}

int msgs_setup(struct rdma_cm_id *id, struct msgs *m, uint32_t max_inline)
{
	if (max_inline >= MSG_SIZE)
		m->send_flags = IBV_SEND_INLINE;
	else
		printf("%s: device doesn't support IBV_SEND_INLINE, using sge sends\n", tool_name);
	if (!(m->recv_mr = rdma_reg_msgs(id, m->recv, MSG_SIZE))) {
		errno_msg("rdma_reg_msgs for recv_msg");
		return -1;
	}
	if (!(m->send_flags & IBV_SEND_INLINE) && !(m->send_mr = rdma_reg_msgs(id, m->send, MSG_SIZE))) {
		errno_msg("rdma_reg_msgs for send_msg");
		return -1;
	}
	if (rdma_post_recv(id, NULL, m->recv, MSG_SIZE, m->recv_mr)) {
		errno_msg("rdma_post_recv");
		return -1;
	}
	return 0;
}

void msgs_free(struct msgs *m)
{
	if (m->send_mr)
		rdma_dereg_mr(m->send_mr);
	if (m->recv_mr)
		rdma_dereg_mr(m->recv_mr);
}

/* Waits (bounded) for one completion and checks it. */
static int get_comp(struct rdma_cm_id *id, bool send, const char *what)
{
	struct ibv_wc wc;
	int ret;

	watchdog_arm(peer_timeout_ms(), what);
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

int msgs_recv(struct rdma_cm_id *id, const char *what)
{
	return get_comp(id, false, what);
}

int msgs_send(struct rdma_cm_id *id, struct msgs *m, const char *what)
{
	if (rdma_post_send(id, NULL, m->send, MSG_SIZE, m->send_mr, m->send_flags)) {
		errno_msg("rdma_post_send");
		return -1;
	}
	return get_comp(id, true, what);
}
