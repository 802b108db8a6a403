/*
 * rping's connection: its options, the verbs resources of one RC
 * connection, and the waits that drive it (rping_conn.c). The ping-pong
 * itself is in rping.c.
 */
#ifndef RDMACM_EXAMPLES_RPING_H
#define RDMACM_EXAMPLES_RPING_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <rdma/rdma_cma.h>

#define SQ_DEPTH 16

struct options {
	bool server, persistent, verbose, validate, self_qp, set_tos;
	int count, size;
	uint8_t tos;
	bool have_addr, have_src;
	struct sockaddr_storage addr, src;
};

/* What each side sends: where the peer may read or write, big endian. */
struct desc {
	uint64_t addr;
	uint32_t rkey;
	uint32_t size;
};

struct conn {
	const struct options *o;
	bool server;
	struct rdma_cm_id *id;
	struct rdma_event_channel *ch; /* where id's events come */
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct desc recv_desc, send_desc;
	struct ibv_mr *recv_mr, *send_mr;
	char *buf; /* client: sink of the echo; server: where it reads to */
	struct ibv_mr *buf_mr;
	char *start; /* client: the ping data */
	struct ibv_mr *start_mr;
	/* Progress, from completions and CM events. */
	int recvs; /* receive completions not consumed yet */
	struct desc peer; /* what the last one said */
	bool read_done, write_done, disconnected;
};

/* PD, CQ with its completion channel, QP (rdma_cm's, or with -q our own),
 * buffers, and the first receive posted. Returns 0 or -1 after a message. */
int conn_setup(struct conn *c);
/* -q: moves our QP through INIT, RTR, RTS with the attributes rdma_cm gives. */
int conn_self_modify_qp(struct conn *c);
/* -q: our QP to ERR first; then rdma_disconnect. */
void conn_disconnect(struct conn *c);
void conn_teardown(struct conn *c);

enum want { RECV, READ_DONE, WRITE_DONE, DISCONNECT };

/* Processes completions and CM events until w holds (0), the peer
 * disconnects first (1), something fails (-1, after a message) or the peer
 * stays silent for timeout_ms (-1, after a message naming what). */
int conn_wait(struct conn *c, enum want w, int timeout_ms, const char *what);

/* Sends our descriptor of addr/mr (NULL: a bare "go ahead"). */
int conn_post_desc(struct conn *c, const void *addr, const struct ibv_mr *mr);
/* RDMA read or write of len bytes between c->buf and the peer's last descriptor. */
int conn_post_rdma(struct conn *c, enum ibv_wr_opcode op, uint32_t len);

#endif
