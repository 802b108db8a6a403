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
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/ib.h>
#include <rdma/rdma_cma.h>

#include "common.h"
#include "nodes.h"

static struct {
	struct node_set s; /* dst: -m or -M; src: -b */
	bool sender, unmapped, send_only, no_loopback;
	struct sockaddr_storage src_addr, dst_addr;
	int joins_left;
} t = { .s = { .n = 1, .count = 10, .size = 100, .noun = "node", .ud = true,
	       .hints = { .ai_port_space = RDMA_PS_UDP } } };

static struct sockaddr *dst_sa(void) { return (struct sockaddr *)&t.dst_addr; }
static struct sockaddr *src_sa(void) { return t.s.src ? (struct sockaddr *)&t.src_addr : NULL; }

/* --- joining ------------------------------------------------------------------ */

/* The QP exists before the join, so rdma_cm attaches it to the group. */
static int join(struct node *n)
{
	if (node_setup(&t.s, n, t.no_loopback ? IBV_QP_CREATE_BLOCK_SELF_MCAST_LB : 0))
		return -1;
	if (!t.sender && node_post_recvs(&t.s, n))
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
	return node_set_peer(n, ud);
}

static int handle_event(struct rdma_cm_event *ev)
{
	struct node *n = ev->id->context;

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
		t.joins_left--;
		return node_event_failed(&t.s, n, ev);
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
		ret = nodes_next_event(&t.s, ms_left(deadline), handle_event);
		if (ret == NO_EVENT) {
			if (!until_joined)
				return 0;
			errmsg("%d join(s) unanswered after %d ms", t.joins_left, ms);
			return -ETIMEDOUT;
		}
	}
	return ret;
}

static int parse_dst(void)
{
	struct sockaddr_ib *sib = (struct sockaddr_ib *)&t.dst_addr;

	if (!t.unmapped)
		return parse_addr(t.s.dst, 0, &t.dst_addr);
	/* -M: an IB multicast GID, not mapped from an IP address. */
	memset(sib, 0, sizeof(*sib));
	sib->sib_family = AF_IB;
	if (inet_pton(AF_INET6, t.s.dst, &sib->sib_addr) != 1) {
		errmsg("invalid multicast GID '%s' (-M wants IPv6 notation)", t.s.dst);
		return -1;
	}
	return 0;
}

static int run(void)
{
	int ret;

	printf("mckey: starting %s\n", t.sender ? "client" : "server");
	if (t.s.src && (ret = parse_addr(t.s.src, 0, &t.src_addr)))
		return ret;
	if ((ret = parse_dst()))
		return ret;
	printf("mckey: joining\n");
	for (int i = 0; i < t.s.n; i++) {
		struct node *n = &t.s.node[i];

		if (t.s.src && rdma_bind_addr(n->id, src_sa())) {
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
	if (!ret && t.s.count) {
		if (t.sender) {
			printf("initiating data transfers\n");
			for (int i = 0; i < t.s.n && !ret; i++)
				ret = node_post_sends(&t.s, &t.s.node[i]);
		} else {
			printf("receiving data transfers\n");
		}
		/* A receiver waits for the first datagram as a server for a client. */
		if (!ret)
			ret = nodes_complete(&t.s, t.sender ? DIR_SEND : DIR_RECV, !t.sender);
		if (!ret)
			printf("data transfers complete\n");
	}
	for (int i = 0; i < t.s.n; i++) {
		if (t.s.node[i].connected && rdma_leave_multicast(t.s.node[i].id, dst_sa())) {
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

static int option(int op, const char *arg)
{
	switch (op) {
	case 'm': t.s.dst = arg; return 0;
	case 'M':
		t.s.dst = arg;
		t.unmapped = true;
		return 0;
	case 's': t.sender = true; return 0;
	case 'b': t.s.src = arg; return 0;
	case 'p': return parse_ud_port_space(arg, &t.s.hints.ai_port_space);
	case 'o': t.send_only = true; return 0;
	case 'l': t.no_loopback = true; return 0;
	default: return 1;
	}
}

static int parse_options(int argc, char **argv)
{
	if (nodes_options(&t.s, argc, argv, "m:M:sb:c:C:S:p:ol", 1 << 16, 1 << 16, option, usage))
		return -1;
	if (!t.s.dst) {
		errmsg("which multicast group? (-m address, or -M gid with -b)");
		usage(argv[0]);
		return -1;
	}
	if (t.unmapped && !t.s.src) {
		printf("unmapped multicast address requires binding to source address\n");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	tool_init("mckey");
	if (parse_options(argc, argv))
		exit(1);
	t.joins_left = t.s.n;
	if (nodes_open(&t.s, true))
		exit(1);
	return nodes_end(&t.s, run());
}
