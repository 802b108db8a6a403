/* Built against rdma-core's headers and library (the system's), then run with
 * our librdmacm.so.1 preloaded or first on the library path: prints what a
 * plain rdma-core application observes, and which file served the calls. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>

/* With an RDMA device (RXE_IP set, as in the Soft-RoCE VM): bind and resolve
 * through the kernel and print what the application can see. */
static void exercise_device(const char *ip)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct sockaddr_in sin;
	const uint8_t *gid;
	int i;

	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		printf("device: setup failed (%s)\n", strerror(errno));
		return;
	}
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	inet_pton(AF_INET, ip, &sin.sin_addr);
	if (rdma_bind_addr(id, (struct sockaddr *)&sin)) {
		printf("bind: failed (%s)\n", strerror(errno));
	} else {
		printf("bind: device=%s port_num=%u port_assigned=%d family=%d\n",
		       id->verbs ? ibv_get_device_name(id->verbs->device) : "-",
		       id->port_num, rdma_get_src_port(id) != 0,
		       rdma_get_local_addr(id)->sa_family);
		gid = id->route.addr.addr.ibaddr.sgid.raw;
		printf("sgid:");
		for (i = 0; i < 16; i++)
			printf("%02x", gid[i]);
		printf("\n");
	}
	sin.sin_port = htons(7471);
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 2000) ||
	    rdma_get_cm_event(ch, &ev)) {
		printf("resolve: failed (%s)\n", strerror(errno));
	} else {
		printf("resolve: %s status=%d dst_port=%u\n", rdma_event_str(ev->event),
		       ev->status, ntohs(rdma_get_dst_port(id)));
		rdma_ack_cm_event(ev);
	}
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

int main(void)
{
	Dl_info info;
	struct rdma_event_channel *ch;
	struct ibv_context **devs;
	int i, n = -1;

	for (i = RDMA_CM_EVENT_ADDR_RESOLVED; i <= RDMA_CM_EVENT_TIMEWAIT_EXIT; i++)
		printf("event %d: %s\n", i, rdma_event_str((enum rdma_cm_event_type)i));
	printf("event 100: %s\n", rdma_event_str((enum rdma_cm_event_type)100));

	errno = 0;
	ch = rdma_create_event_channel();
	printf("rdma_create_event_channel: %s (%s)\n", ch ? "ok" : "NULL",
	       ch ? "-" : strerror(errno));
	if (ch)
		rdma_destroy_event_channel(ch);

	devs = rdma_get_devices(&n);
	printf("rdma_get_devices: %s, %d devices\n", devs ? "list" : "NULL", n);
	if (devs)
		rdma_free_devices(devs);

	if (getenv("RXE_IP"))
		exercise_device(getenv("RXE_IP"));

	if (!dladdr((void *)rdma_create_id, &info) || !info.dli_fname)
		return 2;
	printf("rdma_create_id from: %s\n", info.dli_fname);
	return 0;
}
