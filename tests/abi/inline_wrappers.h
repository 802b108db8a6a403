/*
 * Out-of-line wrappers around every static inline function of the public
 * headers.  inline_wrappers.c is compiled twice, once against rdma-core's
 * headers and once against ours, giving two tables with identical types, so
 * a test can run the same scenario through both and compare what happens.
 */
#ifndef RDMACM_TESTS_ABI_INLINE_WRAPPERS_H
#define RDMACM_TESTS_ABI_INLINE_WRAPPERS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rdma_cm_id;
struct ibv_mr;
struct ibv_sge;
struct ibv_wc;
struct ibv_ah;
struct ib_addr;
struct sockaddr;

struct inline_api {
	const char *label;
	/* rdma/rdma_cma.h */
	struct sockaddr *(*get_local_addr)(struct rdma_cm_id *id);
	struct sockaddr *(*get_peer_addr)(struct rdma_cm_id *id);
	/* rdma/rdma_verbs.h */
	int (*seterrno)(int ret);
	struct ibv_mr *(*reg_msgs)(struct rdma_cm_id *id, void *addr, size_t len);
	struct ibv_mr *(*reg_read)(struct rdma_cm_id *id, void *addr, size_t len);
	struct ibv_mr *(*reg_write)(struct rdma_cm_id *id, void *addr, size_t len);
	int (*dereg_mr)(struct ibv_mr *mr);
	int (*post_recvv)(struct rdma_cm_id *id, void *context,
			  struct ibv_sge *sgl, int nsge);
	int (*post_sendv)(struct rdma_cm_id *id, void *context,
			  struct ibv_sge *sgl, int nsge, int flags);
	int (*post_readv)(struct rdma_cm_id *id, void *context,
			  struct ibv_sge *sgl, int nsge, int flags,
			  uint64_t remote_addr, uint32_t rkey);
	int (*post_writev)(struct rdma_cm_id *id, void *context,
			   struct ibv_sge *sgl, int nsge, int flags,
			   uint64_t remote_addr, uint32_t rkey);
	int (*post_recv)(struct rdma_cm_id *id, void *context, void *addr,
			 size_t length, struct ibv_mr *mr);
	int (*post_send)(struct rdma_cm_id *id, void *context, void *addr,
			 size_t length, struct ibv_mr *mr, int flags);
	int (*post_read)(struct rdma_cm_id *id, void *context, void *addr,
			 size_t length, struct ibv_mr *mr, int flags,
			 uint64_t remote_addr, uint32_t rkey);
	int (*post_write)(struct rdma_cm_id *id, void *context, void *addr,
			  size_t length, struct ibv_mr *mr, int flags,
			  uint64_t remote_addr, uint32_t rkey);
	int (*post_ud_send)(struct rdma_cm_id *id, void *context, void *addr,
			    size_t length, struct ibv_mr *mr, int flags,
			    struct ibv_ah *ah, uint32_t remote_qpn);
	int (*get_send_comp)(struct rdma_cm_id *id, struct ibv_wc *wc);
	int (*get_recv_comp)(struct rdma_cm_id *id, struct ibv_wc *wc);
	/* infiniband/ib.h */
	int (*ib_addr_any)(const struct ib_addr *a);
	int (*ib_addr_loopback)(const struct ib_addr *a);
	void (*ib_addr_set)(struct ib_addr *addr, uint32_t w1, uint32_t w2,
			    uint32_t w3, uint32_t w4);
	int (*ib_addr_cmp)(const struct ib_addr *a1, const struct ib_addr *a2);
};

extern const struct inline_api abi_inline_ref;	/* rdma-core 44's headers */
extern const struct inline_api abi_inline_ours;	/* include/ of this project */

#ifdef __cplusplus
}
#endif

#endif
