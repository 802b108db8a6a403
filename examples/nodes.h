/*
 * The connections of ucmatose, udaddy and mckey (nodes.c): an array of
 * rdma_cm ids, each with its own PD, CQ(s), QP and message buffer, and what
 * the three tools do alike with them: options -c -C -S, the server's
 * listener and the requests it takes, the client's address resolution,
 * posting -C messages, collecting their completions, and the CM event loop.
 *
 * An RC set (ucmatose) gives each node a send CQ and a receive CQ, as
 * rdma-core's cmatose does; a UD set (udaddy, mckey) one CQ, and room for
 * the GRH ahead of each message.
 */
#ifndef RDMACM_EXAMPLES_NODES_H
#define RDMACM_EXAMPLES_NODES_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include <rdma/rdma_cma.h>

#define GRH_SIZE 40 /* sizeof(struct ibv_grh): a UD receive starts with it */

enum dir { DIR_SEND, DIR_RECV };

struct node {
	int index;
	struct rdma_cm_id *id;
	bool connected; /* connected (mckey: joined): messages go on it */
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc[2]; /* by enum dir; UD: the same one twice */
	struct ibv_cq *cq[2];
	struct ibv_mr *mr;
	uint8_t *mem; /* UD: GRH_SIZE bytes of room, then the message */
	struct ibv_ah *ah; /* UD: the peer */
	uint32_t remote_qpn, remote_qkey;
	int done[2]; /* completions taken, by enum dir */
};

struct node_set {
	/* options */
	const char *dst, *src, *port; /* -s, -b, -p (ucmatose) */
	int n, count, size;           /* -c, -C, -S */
	struct rdma_addrinfo hints;   /* port space and address format */
	/* set by the tool before nodes_open() */
	const char *noun; /* a node in messages: "connection" or "node" */
	bool ud;
	/* state */
	struct rdma_event_channel *ch;
	struct node *node;
	struct rdma_addrinfo *rai;
	struct rdma_cm_id *listen_id;
	struct rdma_cm_id *extra_id; /* a request beyond -c: rejected, destroyed after its ack */
	int accepted;
};

/* getopt() over argv: each option goes to tool_opt (0: taken, -1: bad
 * value, after a message; 1: not its own), else -c, -C and -S are taken
 * here (at most max_count and max_size), else usage(argv[0]) is printed.
 * Returns 0, or -1 for a bad option, value or leftover argument. */
int nodes_options(struct node_set *s, int argc, char **argv, const char *optstring,
		  int max_count, int max_size, int (*tool_opt)(int op, const char *arg),
		  void (*usage)(const char *argv0));
/* The event channel and s->n nodes, with their ids when create_ids (a
 * client). Returns 0, or -1 after a message. */
int nodes_open(struct node_set *s, bool create_ids);
/* Prints "test complete", frees everything, prints "return status <ret>";
 * returns ret. */
int nodes_end(struct node_set *s, int ret);
/* The rest of main() for ucmatose and udaddy: nodes_open() (exit 1 when it
 * fails), then client() with -s, server() without it, then nodes_end(). */
int nodes_main(struct node_set *s, int (*server)(void), int (*client)(void));

/* PD, CQ(s) with their channels, the QP (create_flags for
 * ibv_qp_init_attr_ex, 0 for none; errno_msg() names what) and, with -C, the
 * message buffer holding fill_pattern(index). UD: first checks -S against
 * the port's MTU. Returns 0, or -1 after a message. */
int node_setup(const struct node_set *s, struct node *n, uint32_t create_flags);
/* Posts -C receives, or (if connected) -C sends of the message. */
int node_post_recvs(const struct node_set *s, struct node *n);
int node_post_sends(const struct node_set *s, struct node *n);
/* A client's node once its route is resolved: node_setup(), the receives,
 * and rdma_connect() with param and the private data rdma_getaddrinfo()
 * gave. Returns 0, or -1 after a message. */
int node_connect(const struct node_set *s, struct node *n, struct rdma_conn_param *param);
/* A server's node for a request: node_setup(), the receives and
 * rdma_accept() (UD: with the QP number, and then n is connected: the
 * answer is all there is). Returns 0, or -1 after a message and a reject. */
int node_accept(const struct node_set *s, struct node *n);
/* UD: the peer from an ESTABLISHED or MULTICAST_JOIN event; marks n connected. */
int node_set_peer(struct node *n, const struct rdma_ud_param *ud);

/* Waits until every connected node has -C completions of kind d, each at
 * most the peer timeout after the last (the first without limit when
 * first_unbounded), taking completions of the other kind that come
 * meanwhile. A UD node with no peer answers the sender of its first
 * datagram. Returns 0, -EIO or -ETIMEDOUT after a message. */
int nodes_complete(struct node_set *s, enum dir d, bool first_unbounded);

/* Server: the listener on s->src (or any), s->port. Returns 0, an EAI_*
 * code or -1 after a message. */
int nodes_listen(struct node_set *s);
/* Client: resolves s->dst, prints "<tool>: connecting" and starts address
 * resolution on every node. Returns 0, an EAI_* code or -1 after a message. */
int nodes_resolve(struct node_set *s);
/* A connection request: the next free node, with id in it; beyond -c,
 * rejects it (destroyed by nodes_next_event()) and returns NULL. */
struct node *nodes_take_request(struct node_set *s, struct rdma_cm_id *id);
/* Prints "<tool>: failing connection request" and rejects id. */
void node_reject(struct rdma_cm_id *id);
/* Reports a failure event of node n; returns its status (or -1). */
int node_event_failed(const struct node_set *s, const struct node *n,
		      const struct rdma_cm_event *ev);
/* Takes the next CM event within ms (WAIT_FOREVER: no limit), passes it to
 * handle, acks it. Returns handle's result, NO_EVENT when none came within
 * ms (printing nothing), or -errno after a message. */
#define NO_EVENT INT_MIN
int nodes_next_event(struct node_set *s, int ms, int (*handle)(struct rdma_cm_event *));

#endif
