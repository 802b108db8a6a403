/* A table of rdma_getaddrinfo inputs, each run in a child process, with the
 * outcome printed in canonical form (addrinfo_print.c) on stdout. compare.sh
 * runs this once with our library and once with rdma-core's preloaded, and
 * diffs the two. Cases marked "skip" are deliberate differences: their
 * outcome goes to stderr, for the log, and is not compared.
 *
 * In node, service and hint addresses, $IP and $IP6 stand for rxe0's
 * addresses (RXE_IP, RXE_IP6), $HOST for gethostname(), $LL6 for the
 * link-local fe80::1 scoped to RXE_NETDEV. Printed labels keep the tokens. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "addrinfo_hints.h"
#include "addrinfo_print.h"

struct tcase {
	const char *node, *service;
	const struct hint *hints; /* NULL: no hints at all */
	int null_res;             /* call with res == NULL */
	const char *skip;         /* not compared, and why */
};

#define H(...) (&(const struct hint){ __VA_ARGS__ })

static const struct tcase cases[] = {
	/* Names and numbers, no hints. */
	{ "localhost", NULL, NULL },
	{ "localhost", "7471", NULL },
	{ "$HOST", NULL, NULL },
	{ "$HOST", "7471", NULL },
	{ "$HOST", "7471", H(.family = AF_INET) },
	{ "$HOST", "7471", H(.flags = RAI_PASSIVE, .qp_type = IBV_QPT_UD) },
	{ "$IP", NULL, NULL },
	{ "$IP", "7471", NULL },
	{ "$IP6", "7471", NULL },
	{ "127.0.0.1", "7471", NULL },
	{ "::1", "7471", NULL },
	{ "$LL6", "7471", NULL },
	{ "$IP", "ssh", NULL },
	{ "localhost", "domain", NULL },
	{ NULL, "7471", NULL },
	{ NULL, "echo", NULL },

	/* Passive. */
	{ NULL, "7471", H(.flags = RAI_PASSIVE) },
	{ NULL, "7471", H(.flags = RAI_PASSIVE, .family = AF_INET6) },
	{ NULL, "ssh", H(.flags = RAI_PASSIVE) },
	{ "$IP", "7471", H(.flags = RAI_PASSIVE) },
	{ "$IP6", "7471", H(.flags = RAI_PASSIVE) },
	{ "localhost", "7471", H(.flags = RAI_PASSIVE) },
	{ NULL, NULL, H(.flags = RAI_PASSIVE) },
	{ NULL, NULL, H(.flags = RAI_PASSIVE, .src = "$IP#7471") },
	/* The resolved source wins over the hint's. */
	{ "$IP", "7471", H(.flags = RAI_PASSIVE, .src = "$IP6") },

	/* RAI_NUMERICHOST. */
	{ "$IP", "7471", H(.flags = RAI_NUMERICHOST) },
	{ "$IP6", NULL, H(.flags = RAI_NUMERICHOST) },
	{ "localhost", "7471", H(.flags = RAI_NUMERICHOST) },
	{ "$HOST", NULL, H(.flags = RAI_NUMERICHOST) },

	/* RAI_NOROUTE. rdma-core sends every active result to ibacm for a route
	 * (with a bound source address, and "no delay" for NOROUTE/NUMERICHOST);
	 * the VM runs no ibacm, so both libraries answer without route data. */
	{ "$IP", "7471", H(.flags = RAI_NOROUTE) },
	{ "$IP", "7471", H(.flags = RAI_NOROUTE, .src = "$IP") },
	{ "$IP6", "7471", H(.flags = RAI_NOROUTE | RAI_NUMERICHOST, .src = "$IP6") },
	{ "localhost", NULL, H(.flags = RAI_NOROUTE) },

	/* Families, AF_IB among them. */
	{ "localhost", "7471", H(.family = AF_INET) },
	{ "localhost", "7471", H(.family = AF_INET6) },
	{ "$IP", "7471", H(.family = AF_INET6) },
	{ "$IP6", "7471", H(.family = AF_INET) },
	{ "$IP6", "7471", H(.flags = RAI_FAMILY | RAI_NUMERICHOST, .family = AF_IB) },
	{ "$IP6", "7471", H(.flags = RAI_FAMILY | RAI_NUMERICHOST | RAI_PASSIVE, .family = AF_IB) },
	{ "::1", NULL, H(.flags = RAI_FAMILY | RAI_NUMERICHOST, .family = AF_IB,
			 .qp_type = IBV_QPT_UD, .port_space = RDMA_PS_IB) },
	{ "$IP6", NULL, H(.flags = RAI_FAMILY | RAI_NUMERICHOST, .family = AF_IB,
			  .port_space = RDMA_PS_TCP) },
	{ "$LL6", "7471", H(.flags = RAI_FAMILY | RAI_NUMERICHOST, .family = AF_IB) },
	{ "$IP6", "7471", H(.flags = RAI_FAMILY, .family = AF_IB) },
	{ "$IP6", "7471", H(.family = AF_IB) },
	{ "$IP", "7471", H(.flags = RAI_FAMILY | RAI_NUMERICHOST, .family = AF_IB),
	  .skip = "rdma-core reads the IPv4 sockaddr as a sockaddr_in6 (past its "
		  "end); we fail with EINVAL" },

	/* QP types and port spaces. */
	{ "$IP", "7471", H(.qp_type = IBV_QPT_RC) },
	{ "$IP", "7471", H(.qp_type = IBV_QPT_UD) },
	{ "$IP", "7471", H(.qp_type = IBV_QPT_UC) },
	{ "$IP", "7471", H(.qp_type = IBV_QPT_XRC_SEND) },
	{ "$IP", "7471", H(.port_space = RDMA_PS_TCP) },
	{ "$IP", "7471", H(.port_space = RDMA_PS_UDP) },
	{ "$IP", "7471", H(.port_space = RDMA_PS_IB) },
	{ "$IP", "7471", H(.port_space = RDMA_PS_IB, .qp_type = IBV_QPT_RC) },
	{ "$IP", "7471", H(.port_space = RDMA_PS_IB, .qp_type = IBV_QPT_UD) },
	{ "$IP", "7471", H(.port_space = RDMA_PS_IPOIB, .qp_type = IBV_QPT_UD) },
	{ "$IP6", "7471", H(.port_space = RDMA_PS_UDP, .qp_type = IBV_QPT_UD) },
	{ "$IP", "ssh", H(.qp_type = IBV_QPT_UD) },
	{ "$IP", "7471", H(.qp_type = IBV_QPT_UD, .port_space = RDMA_PS_TCP) },
	{ "$IP", "7471", H(.qp_type = IBV_QPT_RC, .port_space = RDMA_PS_UDP) },

	/* Source and destination addresses given in the hints. */
	{ "$IP", "7471", H(.src = "$IP") },
	{ "$IP6", "7471", H(.src = "$IP6#7000") },
	{ "$IP", "7471", H(.src = "$IP6") },
	{ "$IP", "7471", H(.src = "ib:$IP6", .family = AF_IB) },
	{ NULL, NULL, H(.dst = "$IP#7471") },
	{ NULL, NULL, H(.dst = "$IP6#7471", .src = "$IP6", .qp_type = IBV_QPT_UD) },
	{ NULL, NULL, H(.dst = "ib:$IP6", .src = "ib:$IP6", .flags = RAI_FAMILY,
			.family = AF_IB, .port_space = RDMA_PS_IB) },
	{ NULL, NULL, H(.dst = "$IP#7471", .flags = RAI_PASSIVE) },
	{ "$IP", "7471", H(.route = 1) },
	{ NULL, NULL, H(.dst = "ib:$IP6", .route = 1) },
	{ NULL, NULL, H(0) },

	/* Bad names and services. */
	{ "no.such.host.invalid", NULL, NULL },
	{ "no.such.host.invalid", "7471", H(.flags = RAI_PASSIVE) },
	{ "", "7471", NULL },
	{ "256.1.1.1", NULL, H(.flags = RAI_NUMERICHOST) },
	{ "fe80::1%nosuchif", NULL, H(.flags = RAI_NUMERICHOST) },
	{ "$IP", "no-such-service", NULL },
	{ "$IP", "99999", NULL },
	{ "$IP", "-1", NULL },

	/* Bad hints. */
	{ "$IP", "7471", H(.flags = (int)0xffff0000) },
	{ "$IP", "7471", H(.flags = RAI_SA | RAI_DNS) },
	{ "$IP", "7471", H(.family = 12345) },
	{ "$IP", "7471", H(.family = AF_UNIX) },
	{ "$IP", "7471", H(.qp_type = 999) },
	{ "$IP", "7471", H(.port_space = 0x999) },
	{ NULL, NULL, H(.flags = 0xf0, .family = 12345, .qp_type = 999, .port_space = 0x999) },

	/* NULL node, service, hints, res. */
	{ NULL, NULL, NULL },
	{ NULL, NULL, NULL, .null_res = 1 },
	{ "no.such.host.invalid", NULL, NULL, .null_res = 1 },
	{ "$IP", "7471", H(.family = 12345), .null_res = 1 },
	{ "$IP", "7471", NULL, .null_res = 1,
	  .skip = "rdma-core stores the result through res (a crash); we fail with EINVAL" },
	{ NULL, NULL, H(.flags = RAI_PASSIVE), .null_res = 1,
	  .skip = "rdma-core stores the result through res (a crash); we fail with EINVAL" },
};

static void run_case(FILE *out, const struct tcase *c)
{
	struct rdma_addrinfo hints, sentinel, *res = &sentinel;
	int ret, err;

	if (c->hints)
		make_hints(&hints, c->hints);
	errno = 0;
	ret = rdma_getaddrinfo(expand(c->node), expand(c->service),
			       c->hints ? &hints : NULL, c->null_res ? NULL : &res);
	err = errno;
	print_outcome(out, ret, err);
	if (ret == 0 && !c->null_res) {
		print_list(out, res);
		rdma_freeaddrinfo(res);
	} else if (!c->null_res) {
		fprintf(out, "  res %s\n", res == &sentinel ? "untouched" : "changed");
	}
}

/* One child per case: a crash or a hang is that case's outcome. */
static int run_isolated(int i)
{
	const struct tcase *c = &cases[i];
	FILE *out = c->skip ? stderr : stdout;
	int status;
	pid_t pid;

	fprintf(out, "case %d: node %s service %s", i, c->node ? c->node : "NULL",
		c->service ? c->service : "NULL");
	print_hint_label(out, c->hints);
	fprintf(out, "%s\n", c->null_res ? " res NULL" : "");
	if (c->skip)
		fprintf(out, "  (not compared: %s)\n", c->skip);
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return perror("fork"), -1;
	if (pid == 0) {
		alarm(30);
		run_case(out, c);
		fflush(NULL);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) < 0)
		return perror("waitpid"), -1;
	if (WIFSIGNALED(status))
		fprintf(out, "  killed by signal %d (%s)\n", WTERMSIG(status),
			strsignal(WTERMSIG(status)));
	else if (WEXITSTATUS(status))
		fprintf(out, "  exit status %d\n", WEXITSTATUS(status));
	fflush(NULL);
	return 0;
}

int main(void)
{
	int n = sizeof(cases) / sizeof(cases[0]);

	Dl_info where;

	/* Which library answers: compare.sh checks it is the one it meant. */
	if (dladdr((void *)rdma_getaddrinfo, &where) && where.dli_fname)
		fprintf(stderr, "rdma_getaddrinfo from %s\n", where.dli_fname);
	fprintf(stderr, "$HOST is %s\n", expand("$HOST"));
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < n; i++)
		if (run_isolated(i))
			return 2;
	fprintf(stderr, "%d cases\n", n);
	return 0;
}
