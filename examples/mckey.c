/*
 * mckey: joins a multicast group with rdma_cm from -c UD QPs and either
 * sends -C datagrams of -S bytes to it (-s) or receives as many;
 * wire-compatible with rdma-core's mckey (start the receivers first).
 *
 * Prints rdma-core's lines ("mckey: joined dgid: ...", "data transfers
 * complete", "test complete", "return status N") and exits with N. A
 * receiver waits without limit for the first datagram (like a server for a
 * client), then at most the peer timeout for each of the rest; a sender
 * waits for its sends to complete before leaving the group.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/ib.h>
#include <rdma/rdma_cma.h>

#include "common.h"

#define GRH_SIZE 40 /* sizeof(struct ibv_grh): a UD receive starts with it */

struct node {
	int index;
	struct rdma_cm_id *id;
	bool joined;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	void *mem; /* GRH_SIZE + message */
	struct ibv_ah *ah;
	uint32_t remote_qpn, remote_qkey;
	int done; /* completions so far */
};

static struct {
	const char *dst, *src;
	int connections, count, size;
	bool sender, unmapped, send_only, no_loopback;
	enum rdma_port_space ps;
	struct sockaddr_storage src_addr, dst_addr;
	struct rdma_event_channel *ch;
	struct node *nodes;
	int joins_left;
} t = { .connections = 1, .count = 10, .size = 100, .ps = RDMA_PS_UDP };

static struct sockaddr *dst_sa(void) { return (struct sockaddr *)&t.dst_addr; }
static struct sockaddr *src_sa(void) { return t.src ? (struct sockaddr *)&t.src_addr : NULL; }

/* --- per-node resources ---------------------------------------------------- */

static int init_node(struct node *n)
{
	struct ibv_context *verbs = n->id->verbs;
	int depth = t.count ? t.count : 1;
	struct ibv_port_attr port;

	if (ibv_query_port(verbs, n->id->port_num, &port)) {
		errno_msg("ibv_query_port");
		return -1;
	}
	if (t.count && t.size > (1 << (port.active_mtu + 7))) {
		errmsg("message_size %d is larger than active mtu %d", t.size,
		       1 << (port.active_mtu + 7));
		return -1;
	}
	if (!(n->pd = ibv_alloc_pd(verbs))) {
		errno_msg("ibv_alloc_pd");
		return -1;
	}
	if (!(n->cc = ibv_create_comp_channel(verbs))) {
		errno_msg("ibv_create_comp_channel");
		return -1;
	}
	if (!(n->cq = ibv_create_cq(verbs, depth * 2, n, n->cc, 0))) {
		errno_msg("ibv_create_cq");
		return -1;
	}
	struct ibv_qp_init_attr_ex attr = {
		.qp_context = n,
		.send_cq = n->cq,
		.recv_cq = n->cq,
		.cap = { .max_send_wr = depth, .max_recv_wr = depth, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IBV_QPT_UD,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS,
		.pd = n->pd,
		.create_flags = t.no_loopback ? IBV_QP_CREATE_BLOCK_SELF_MCAST_LB : 0,
	};
	if (rdma_create_qp_ex(n->id, &attr)) {
		errno_msg(t.no_loopback ? "rdma_create_qp_ex (with IBV_QP_CREATE_BLOCK_SELF_MCAST_LB)"
					: "rdma_create_qp_ex");
		return -1;
	}
	if (!t.count)
		return 0;
	if (!(n->mem = calloc(1, GRH_SIZE + t.size))) {
		errmsg("no memory for a %d-byte message", t.size);
		return -1;
	}
	if (!(n->mr = ibv_reg_mr(n->pd, n->mem, GRH_SIZE + t.size, IBV_ACCESS_LOCAL_WRITE))) {
		errno_msg("ibv_reg_mr");
		return -1;
	}
	return 0;
}

static int post_recvs(struct node *n)
{
	struct ibv_sge sge = { (uintptr_t)n->mem, GRH_SIZE + t.size, n->mr ? n->mr->lkey : 0 };
	struct ibv_recv_wr wr = { .wr_id = (uintptr_t)n, .sg_list = &sge, .num_sge = 1 }, *bad;

	for (int i = 0; i < t.count; i++) {
		int err = ibv_post_recv(n->id->qp, &wr, &bad);

		if (err) {
			errmsg("ibv_post_recv failed: %s", strerror(err));
			return -1;
		}
	}
	return 0;
}

static int post_sends(struct node *n)
{
	struct ibv_sge sge = { (uintptr_t)n->mem + GRH_SIZE, t.size, n->mr ? n->mr->lkey : 0 };
	struct ibv_send_wr wr = {
		.wr_id = (uintptr_t)n,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND_WITH_IMM,
		.send_flags = IBV_SEND_SIGNALED,
		.imm_data = htonl(n->id->qp->qp_num),
	}, *bad;

	if (!n->joined || !t.count)
		return 0;
	wr.wr.ud.ah = n->ah;
	wr.wr.ud.remote_qpn = n->remote_qpn;
	wr.wr.ud.remote_qkey = n->remote_qkey;
	fill_pattern(n->mem + GRH_SIZE, t.size, n->index);
	for (int i = 0; i < t.count; i++) {
		int err = ibv_post_send(n->id->qp, &wr, &bad);

		if (err) {
			errmsg("ibv_post_send failed: %s", strerror(err));
			return -1;
		}
	}
	return 0;
}

/* Collects -C completions per joined node: sends for a sender, datagrams
 * for a receiver (the first one without a time limit). */
static int complete_all(void)
{
	struct ibv_wc wc[8];

	for (int i = 0; i < t.connections; i++) {
		struct node *n = &t.nodes[i];

		if (!n->joined)
			continue;
		while (n->done < t.count) {
			bool first = !t.sender && n->done == 0;
			int64_t deadline = deadline_in(first ? WAIT_FOREVER : peer_timeout_ms());
			int got = poll_cq_until(n->cq, n->cc, wc, 8, deadline);

			if (got < 0) {
				if (errno == ETIMEDOUT)
					errmsg("node %d: %d of %d %s, then nothing for %d ms", i, n->done,
					       t.count, t.sender ? "sends completed" : "datagrams received",
					       peer_timeout_ms());
				else
					errno_msg("polling the completion queue");
				return -ETIMEDOUT;
			}
			for (int k = 0; k < got; k++) {
				if (wc[k].status != IBV_WC_SUCCESS) {
					wc_msg(t.sender ? "send" : "receive", &wc[k]);
					return -EIO;
				}
				if (!t.sender && wc[k].byte_len != (uint32_t)(GRH_SIZE + t.size)) {
					errmsg("node %d: a datagram of %u bytes, expected %d (-S differs?)",
					       i, wc[k].byte_len - GRH_SIZE, t.size);
					return -EIO;
				}
			}
			n->done += got;
		}
	}
	return 0;
}

static void destroy_node(struct node *n)
{
	if (!n->id)
		return;
	if (n->ah)
		ibv_destroy_ah(n->ah);
	if (n->id->qp)
		rdma_destroy_qp(n->id);
	if (n->cq)
		ibv_destroy_cq(n->cq);
	if (n->cc)
		ibv_destroy_comp_channel(n->cc);
	if (n->mr)
		ibv_dereg_mr(n->mr);
	free(n->mem);
	if (n->pd)
		ibv_dealloc_pd(n->pd);
	rdma_destroy_id(n->id);
}

/* --- joining ------------------------------------------------------------------ */

/* The QP exists before the join, so rdma_cm attaches it to the group. */
static int join(struct node *n)
{
	if (init_node(n))
		return -1;
	if (!t.sender && post_recvs(n))
		return -1;
	if (t.send_only) {
		struct rdma_cm_join_mc_attr_ex attr = {
			.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
			.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER,
			.addr = dst_sa(),
		};
		if (rdma_join_multicast_ex(n->id, &attr, n)) {
			errno_msg("rdma_join_multicast_ex (send-only full member)");
			return -1;
		}
	} else if (rdma_join_multicast(n->id, dst_sa(), n)) {
		errno_msg("rdma_join_multicast");
		return -1;
	}
	return 0;
}

static int on_joined(struct node *n, const struct rdma_ud_param *ud)
{
	char gid[INET6_ADDRSTRLEN];

	inet_ntop(AF_INET6, ud->ah_attr.grh.dgid.raw, gid, sizeof(gid));
	printf("mckey: joined dgid: %s mlid 0x%x sl %d\n", gid, ud->ah_attr.dlid, ud->ah_attr.sl);
	n->remote_qpn = ud->qp_num;
	n->remote_qkey = ud->qkey;
	n->ah = ibv_create_ah(n->pd, (struct ibv_ah_attr *)&ud->ah_attr);
	if (!n->ah) {
		errno_msg("ibv_create_ah");
		return -1;
	}
	n->joined = true;
	return 0;
}

static int handle_event(struct rdma_cm_event *ev)
{
	struct node *n = ev->id->context;
	char what[32];

	debug_msg("event %s, status %d", rdma_event_str(ev->event), ev->status);
	snprintf(what, sizeof(what), "node %d", n->index);
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (join(n)) {
			t.joins_left--;
			return -1;
		}
		return 0;
	case RDMA_CM_EVENT_MULTICAST_JOIN:
		t.joins_left--;
		return on_joined(n, &ev->param.ud);
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_MULTICAST_ERROR:
		event_msg(what, ev);
		t.joins_left--;
		return ev->status ? ev->status : -1;
	case RDMA_CM_EVENT_ADDR_CHANGE:
		event_msg("warning", ev);
		return 0;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		event_msg("device removed", ev);
		return -ENODEV;
	default:
		return 0;
	}
}

/* Handles events for ms milliseconds (or until the joins are done when
 * until_joined); returns the first failure. */
static int run_events(int ms, bool until_joined)
{
	int64_t deadline = deadline_in(ms);
	int ret = 0;

	while (!ret && (!until_joined || t.joins_left > 0)) {
		struct rdma_cm_event *ev;

		if (get_cm_event(t.ch, ms_left(deadline), &ev)) {
			if (errno != ETIMEDOUT) {
				errno_msg("rdma_get_cm_event");
				return -errno;
			}
			if (!until_joined)
				return 0;
			errmsg("%d join(s) unanswered after %d ms", t.joins_left, ms);
			return -ETIMEDOUT;
		}
		ret = handle_event(ev);
		rdma_ack_cm_event(ev);
	}
	return ret;
}

static int parse_dst(void)
{
	struct sockaddr_ib *sib = (struct sockaddr_ib *)&t.dst_addr;

	if (!t.unmapped)
		return parse_addr(t.dst, 0, &t.dst_addr);
	/* -M: an IB multicast GID, not mapped from an IP address. */
	memset(sib, 0, sizeof(*sib));
	sib->sib_family = AF_IB;
	if (inet_pton(AF_INET6, t.dst, &sib->sib_addr) != 1) {
		errmsg("invalid multicast GID '%s' (-M wants IPv6 notation)", t.dst);
		return -1;
	}
	return 0;
}

static int run(void)
{
	int ret;

	printf("mckey: starting %s\n", t.sender ? "client" : "server");
	if (t.src && (ret = parse_addr(t.src, 0, &t.src_addr)))
		return ret;
	if ((ret = parse_dst()))
		return ret;
	printf("mckey: joining\n");
	for (int i = 0; i < t.connections; i++) {
		struct node *n = &t.nodes[i];

		if (t.src && rdma_bind_addr(n->id, src_sa())) {
			errno_msg("rdma_bind_addr");
			return -1;
		}
		if (t.unmapped) {
			if (join(n))
				return -1;
		} else if (rdma_resolve_addr(n->id, src_sa(), dst_sa(), 2000)) {
			errno_msg("rdma_resolve_addr");
			return -1;
		}
	}
	ret = run_events(peer_timeout_ms(), true);
	/* Give the fabric a moment to set up the group, as rdma-core does. */
	if (!ret)
		ret = run_events(3000, false);
	if (!ret && t.count) {
		if (t.sender) {
			printf("initiating data transfers\n");
			for (int i = 0; i < t.connections && !ret; i++)
				ret = post_sends(&t.nodes[i]);
		} else {
			printf("receiving data transfers\n");
		}
		if (!ret)
			ret = complete_all();
		if (!ret)
			printf("data transfers complete\n");
	}
	for (int i = 0; i < t.connections; i++) {
		if (t.nodes[i].joined && rdma_leave_multicast(t.nodes[i].id, dst_sa())) {
			errno_msg("rdma_leave_multicast");
			ret = ret ? ret : -1;
		}
	}
	return ret;
}

/* --- main ------------------------------------------------------------------ */

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s -m multicast_address [-s] [-b bind_address] [-c connections]\n"
		"          [-C message_count] [-S message_size] [-p port_space] [-o] [-l]\n"
		"  -m addr  multicast group (IP address)\n"
		"  -M gid   unmapped IB multicast GID; replaces -m and requires -b\n"
		"  -s       send (default: receive)\n"
		"  -b addr  local address to bind to\n"
		"  -c n     QPs joining (default 1)\n"
		"  -C n     datagrams (default 10)\n"
		"  -S n     datagram size in bytes, at most the path MTU (default 100)\n"
		"  -p n     port space: %#x for UDP (default), %#x for IPoIB\n"
		"  -o       join as a send-only full member\n"
		"  -l       join without multicast loopback\n"
		"environment: RDMACM_TOOLS_TIMEOUT=seconds to wait for a silent peer (default 20)\n",
		argv0, RDMA_PS_UDP, RDMA_PS_IPOIB);
}

static int parse_options(int argc, char **argv)
{
	int op, v;

	while ((op = getopt(argc, argv, "m:M:sb:c:C:S:p:ol")) != -1) {
		switch (op) {
		case 'm': t.dst = optarg; break;
		case 'M':
			t.dst = optarg;
			t.unmapped = true;
			break;
		case 's': t.sender = true; break;
		case 'b': t.src = optarg; break;
		case 'c':
			if (parse_int(optarg, "connections (-c)", 1, 100000, &t.connections))
				return -1;
			break;
		case 'C':
			if (parse_int(optarg, "message count (-C)", 0, 1 << 16, &t.count))
				return -1;
			break;
		case 'S':
			if (parse_int(optarg, "message size (-S)", 0, 1 << 16, &t.size))
				return -1;
			break;
		case 'p':
			if (parse_int(optarg, "port space (-p)", 0, 0xffff, &v))
				return -1;
			if (v != RDMA_PS_UDP && v != RDMA_PS_IPOIB) {
				errmsg("port space (-p) %#x is neither UDP (%#x) nor IPoIB (%#x)", v,
				       RDMA_PS_UDP, RDMA_PS_IPOIB);
				return -1;
			}
			t.ps = v;
			break;
		case 'o': t.send_only = true; break;
		case 'l': t.no_loopback = true; break;
		default:
			usage(argv[0]);
			return -1;
		}
	}
	if (optind < argc) {
		errmsg("unexpected argument '%s'", argv[optind]);
		return -1;
	}
	if (!t.dst) {
		errmsg("which multicast group? (-m address, or -M gid with -b)");
		usage(argv[0]);
		return -1;
	}
	if (t.unmapped && !t.src) {
		printf("unmapped multicast address requires binding to source address\n");
		return -1;
	}
	if (!t.size)
		t.count = 0;
	return 0;
}

int main(int argc, char **argv)
{
	int ret;

	tool_init("mckey");
	if (parse_options(argc, argv))
		exit(1);
	t.joins_left = t.connections;
	if (!(t.ch = open_event_channel()))
		exit(1);
	if (!(t.nodes = calloc(t.connections, sizeof(*t.nodes)))) {
		errmsg("no memory for %d connections", t.connections);
		exit(1);
	}
	for (int i = 0; i < t.connections; i++) {
		t.nodes[i].index = i;
		if (rdma_create_id(t.ch, &t.nodes[i].id, &t.nodes[i], t.ps)) {
			errno_msg("rdma_create_id");
			exit(1);
		}
	}
	ret = run();
	printf("test complete\n");
	for (int i = 0; i < t.connections; i++)
		destroy_node(&t.nodes[i]);
	free(t.nodes);
	rdma_destroy_event_channel(t.ch);
	printf("return status %d\n", ret);
	return ret;
}
