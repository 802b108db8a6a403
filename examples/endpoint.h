/*
 * What rdma_server and rdma_client share (endpoint.c): their options, and
 * the one 16-byte message each way over an endpoint-API connection, as
 * rdma-core's pair exchange it (inline sends when the QP allows).
 */
#ifndef RDMACM_EXAMPLES_ENDPOINT_H
#define RDMACM_EXAMPLES_ENDPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include <rdma/rdma_cma.h>

#define MSG_SIZE 16

struct msgs {
	uint8_t send[MSG_SIZE], recv[MSG_SIZE];
	struct ibv_mr *recv_mr, *send_mr; /* send_mr: only for sends not inline */
	int send_flags;
};

/* getopt "s:p:" into *server and *port; on a bad option prints the usage
 * (s_help and p_help describe -s and -p) and exits with 1. */
void ep_parse_options(int argc, char **argv, const char **server, const char **port,
		      const char *s_help, const char *p_help);
/* The QP's capabilities of an endpoint: the create attributes. */
void ep_qp_attr(struct ibv_qp_init_attr *attr);
/* Registers the buffers (the send buffer only if max_inline is too small
 * for an inline send) and posts the receive. Returns 0, or -1 after a
 * message; msgs_free() in either case. */
int msgs_setup(struct rdma_cm_id *id, struct msgs *m, uint32_t max_inline);
void msgs_free(struct msgs *m);
/* Waits (bounded: a watchdog, what naming the wait) for the receive. */
int msgs_recv(struct rdma_cm_id *id, const char *what);
/* Sends m->send and waits (bounded) for its completion. */
int msgs_send(struct rdma_cm_id *id, struct msgs *m, const char *what);

#endif
