// rdma_resolve_addrinfo / rdma_query_addrinfo: rdma_getaddrinfo in the
// background, reported as RDMA_CM_EVENT_ADDRINFO_RESOLVED or
// RDMA_CM_EVENT_ADDRINFO_ERROR on the id's channel (a queued event, see
// user_events.cpp), the result kept on the id until rdma_query_addrinfo takes
// it. An error event's status is the resolver's EAI_* code (for
// gai_strerror) or -errno.
//
// Name resolution (RAI_DNS, the default) only: resolving a service through the
// InfiniBand subnet administrator (RAI_SA) needs the kernel's
// RESOLVE_IB_SERVICE command, which the kernels we run on lack (EOPNOTSUPP).
// A synchronous id (no channel) resolves in the call itself.
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "core/addrinfo.h"
#include "core/cm.h"
#include "core/id_state.h"
#include "core/objects.h"
#include "core/user_events.h"

namespace rdmacm::core {
namespace {

// The call's arguments, owned: the caller's may be gone when the resolver runs.
class Request {
 public:
  Request(const char* node, const char* service, const rdma_addrinfo* hints) {
    if (node) node_ = node;
    if (service) service_ = service;
    if (!hints) return;
    hints_ = rdma_addrinfo{};
    hints_->ai_flags = hints->ai_flags;
    hints_->ai_family = hints->ai_family;
    hints_->ai_qp_type = hints->ai_qp_type;
    hints_->ai_port_space = hints->ai_port_space;
    copy(hints->ai_src_addr, hints->ai_src_len, &src_, &hints_->ai_src_addr,
         &hints_->ai_src_len);
    copy(hints->ai_dst_addr, hints->ai_dst_len, &dst_, &hints_->ai_dst_addr,
         &hints_->ai_dst_len);
  }
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  // 0 or -errno; on the resolver's failure 1, its EAI_* code in *gai_error.
  int run(rdma_addrinfo** res, int* gai_error) const {
    return getaddrinfo(node_ ? node_->c_str() : nullptr,
                       service_ ? service_->c_str() : nullptr,
                       hints_ ? &*hints_ : nullptr, res, gai_error);
  }

 private:
  static void copy(const sockaddr* from, socklen_t len, sockaddr_storage* store,
                   sockaddr** to, socklen_t* to_len) {
    if (!from || !len || len > sizeof(*store)) return;
    std::memcpy(store, from, len);
    *to = reinterpret_cast<sockaddr*>(store);
    *to_len = len;
  }

  std::optional<std::string> node_, service_;
  std::optional<rdma_addrinfo> hints_;
  sockaddr_storage src_{}, dst_{};
};

// Keeps a finished resolution's result on the id (unless it is dying).
void store(CmId& id, rdma_addrinfo* res) {
  rdma_addrinfo* unwanted = res;
  if (CmIdExtras* x = id.peek_extras()) {  // made by resolve_addrinfo
    LockGuard lock(x->user_mutex);
    x->resolving = false;
    if (!id.destroying) std::swap(unwanted, x->resolved);
  }
  freeaddrinfo(unwanted);  // outside: its table has a lock of its own
}

}  // namespace

int resolve_addrinfo(rdma_cm_id* pub, const char* node, const char* service,
                     const rdma_addrinfo* hints) {
  auto id = find_id(pub);
  if (!id || (!node && !service) || (hints && !hint_addrs_valid(*hints))) return -EINVAL;
  int flags = hints ? hints->ai_flags : 0;
  if ((flags & RAI_SA) && (flags & RAI_DNS)) return -EINVAL;
  if (flags & RAI_SA) return -EOPNOTSUPP;
  auto request = std::make_shared<Request>(node, service, hints);
  CmIdExtras& x = id->extras();  // throws std::bad_alloc: nothing done yet
  {
    LockGuard lock(x.user_mutex);
    if (x.resolving) return -EBUSY;
    x.resolving = true;
  }

  if (id->sync) {
    rdma_addrinfo* res = nullptr;
    int gai_error = 0;
    int ret = request->run(&res, &gai_error);
    store(*id, res);
    return ret > 0 ? -EADDRNOTAVAIL : ret;
  }

  std::shared_ptr<UserEvent> ue;
  int err = prepare_user_event(id, &ue);
  if (!err) {
    try {
      std::thread([id, request, ue] {
        rdma_addrinfo* res = nullptr;
        int gai_error = 0;
        int ret = request->run(&res, &gai_error);
        int status = ret > 0 ? gai_error : ret;
        store(*id, res);
        ring_user_event(ue, status ? RDMA_CM_EVENT_ADDRINFO_ERROR
                                   : RDMA_CM_EVENT_ADDRINFO_RESOLVED,
                        status, 0);
      }).detach();
      return 0;
    } catch (const std::system_error&) {
      cancel_user_event(ue);
      err = -EAGAIN;
    }
  }
  LockGuard lock(x.user_mutex);
  x.resolving = false;
  return err;
}

int query_addrinfo(rdma_cm_id* pub, rdma_addrinfo** info) {
  auto id = find_id(pub);
  if (!id || !info) return -EINVAL;
  CmIdExtras* x = id->peek_extras();
  if (!x) return -ENOENT;  // never asked to resolve anything
  LockGuard lock(x->user_mutex);
  if (x->resolving) return -EBUSY;
  if (!x->resolved) return -ENOENT;
  *info = x->resolved;
  x->resolved = nullptr;
  return 0;
}

void forget_resolution(CmId& id) {
  CmIdExtras* x = id.peek_extras();
  if (!x) return;  // never asked to resolve anything
  rdma_addrinfo* res = nullptr;
  {
    LockGuard lock(x->user_mutex);
    std::swap(res, x->resolved);
  }
  freeaddrinfo(res);
}

}  // namespace rdmacm::core
