/* Built against rdma-core's headers and library (the system's), then run with
 * our librdmacm.so.1 preloaded or first on the library path: prints what a
 * plain rdma-core application observes, and which file served the calls. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rdma/rdma_cma.h>

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

	if (!dladdr((void *)rdma_create_id, &info) || !info.dli_fname)
		return 2;
	printf("rdma_create_id from: %s\n", info.dli_fname);
	return 0;
}
