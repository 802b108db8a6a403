/*
 * cminfo: what the RDMA connection manager sees on this host.
 *
 * Lists the RDMA devices (rdma_get_devices), then for each address given on
 * the command line (default: none) binds an id to it and reports the device,
 * port, GID and an address resolution to itself. Exit status 0 when every
 * step succeeded.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>

static int list_devices(void)
{
	struct ibv_context **devs;
	int i, n = 0;

	devs = rdma_get_devices(&n);
	if (!devs) {
		fprintf(stderr, "cminfo: rdma_get_devices: %s\n", strerror(errno));
		return -1;
	}
	printf("%d RDMA device%s\n", n, n == 1 ? "" : "s");
	for (i = 0; i < n; i++)
		printf("  %s (node GUID %016llx)\n", ibv_get_device_name(devs[i]->device),
		       (unsigned long long)be64toh(ibv_get_device_guid(devs[i]->device)));
	rdma_free_devices(devs);
	return 0;
}

static void print_gid(const char *label, const union ibv_gid *gid)
{
	char buf[INET6_ADDRSTRLEN];

	printf("  %s %s\n", label, inet_ntop(AF_INET6, gid->raw, buf, sizeof(buf)));
}

/* Waits for the next event on the channel, at most timeout_ms. */
static int wait_event(struct rdma_event_channel *ch, struct rdma_cm_event **ev, int timeout_ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };

	if (poll(&p, 1, timeout_ms) != 1) {
		errno = ETIMEDOUT;
		return -1;
	}
	return rdma_get_cm_event(ch, ev);
}

static int probe_address(struct rdma_event_channel *ch, const char *host)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC }, *ai;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	int ret = -1, err;

	err = getaddrinfo(host, NULL, &hints, &ai);
	if (err) {
		fprintf(stderr, "cminfo: %s: %s\n", host, gai_strerror(err));
		return -1;
	}
	printf("%s\n", host);
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		fprintf(stderr, "cminfo: rdma_create_id: %s\n", strerror(errno));
		goto out;
	}
	if (rdma_bind_addr(id, ai->ai_addr)) {
		fprintf(stderr, "cminfo: rdma_bind_addr %s: %s\n", host, strerror(errno));
		goto destroy;
	}
	printf("  bound: device %s port %u, rdma_cm port %u\n",
	       id->verbs ? ibv_get_device_name(id->verbs->device) : "(none)",
	       id->port_num, ntohs(rdma_get_src_port(id)));
	print_gid("source GID", &id->route.addr.addr.ibaddr.sgid);

	if (rdma_resolve_addr(id, NULL, ai->ai_addr, 2000) || wait_event(ch, &ev, 5000)) {
		fprintf(stderr, "cminfo: resolving %s: %s\n", host, strerror(errno));
		goto destroy;
	}
	printf("  resolve to self: %s (status %d)\n", rdma_event_str(ev->event), ev->status);
	ret = ev->event == RDMA_CM_EVENT_ADDR_RESOLVED ? 0 : -1;
	rdma_ack_cm_event(ev);
destroy:
	rdma_destroy_id(id);
out:
	freeaddrinfo(ai);
	return ret;
}

int main(int argc, char **argv)
{
	struct rdma_event_channel *ch;
	int i, ret = 0;

	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		printf("usage: %s [ADDRESS...]\n", argv[0]);
		return 0;
	}
	if (list_devices())
		return 1;
	if (argc < 2)
		return 0;
	ch = rdma_create_event_channel();
	if (!ch) {
		fprintf(stderr, "cminfo: rdma_create_event_channel: %s\n", strerror(errno));
		return 1;
	}
	for (i = 1; i < argc; i++)
		ret |= probe_address(ch, argv[i]);
	rdma_destroy_event_channel(ch);
	return ret ? 1 : 0;
}
