#include "core/transport.h"

#include <atomic>
#include <cerrno>

namespace rdmacm::core {
namespace {

// What the core talks to when nothing was installed: no RDMA here.
class NoTransport final : public Transport {
 public:
  int open_channel() override { return -ENODEV; }
  int create_id(int, uint64_t, uint16_t, uint8_t, uint32_t*) override { return -ENODEV; }
  int destroy_id(int, uint32_t, uint32_t*) override { return -ENODEV; }
  int bind(int, uint32_t, const sockaddr*, socklen_t) override { return -ENODEV; }
  int resolve_addr(int, uint32_t, const sockaddr*, socklen_t, const sockaddr*, socklen_t,
                   uint32_t) override {
    return -ENODEV;
  }
  int query_addr(int, uint32_t, ucma_abi_query_addr_resp*) override { return -ENODEV; }
  int query_gid(int, uint32_t, uint8_t*, uint8_t*) override { return -ENODEV; }
  int get_event(int, ucma_abi_event_resp*) override { return -ENODEV; }
  int resolve_route(int, uint32_t, uint32_t) override { return -ENODEV; }
  int query_path(int, uint32_t, ibv_path_data*, size_t*) override { return -ENODEV; }
  int connect(int, uint32_t, const ucma_abi_conn_param&, const ucma_abi_ece&) override {
    return -ENODEV;
  }
  int listen(int, uint32_t, int) override { return -ENODEV; }
  int accept(int, uint32_t, uint64_t, const ucma_abi_conn_param&, const ucma_abi_ece&) override {
    return -ENODEV;
  }
  int reject(int, uint32_t, const void*, uint8_t, uint8_t) override { return -ENODEV; }
  int disconnect(int, uint32_t) override { return -ENODEV; }
  int init_qp_attr(int, uint32_t, ibv_qp_state, ibv_qp_attr*, int*) override { return -ENODEV; }
  int notify(int, uint32_t, uint32_t) override { return -ENODEV; }
  int set_option(int, uint32_t, int, int, const void*, size_t) override { return -ENODEV; }
  int migrate_id(int, uint32_t, int, uint32_t*) override { return -ENODEV; }
  int join_mcast(int, uint32_t, uint64_t, const sockaddr*, socklen_t, uint16_t,
                 uint32_t*) override {
    return -ENODEV;
  }
  int leave_mcast(int, uint32_t, uint32_t*) override { return -ENODEV; }
};

constinit NoTransport none;
// Constant-initialised, so a call arriving before any static constructor
// (another library's, say) finds a valid answer, not garbage.
constinit std::atomic<Transport*> installed{nullptr};
constinit std::atomic<Transport*> test_override{nullptr};

void choose() {
  Transport* t = test_override.load(std::memory_order_acquire);
  if (!t) t = installed.load(std::memory_order_acquire);
  detail::current_transport.store(t ? t : &none, std::memory_order_release);
}

}  // namespace

constinit std::atomic<Transport*> detail::current_transport{&none};

void install_transport(Transport* t) {
  installed.store(t, std::memory_order_release);
  choose();
}
void set_transport(Transport* t) {
  test_override.store(t, std::memory_order_release);
  choose();
}

}  // namespace rdmacm::core
