// Connection calls against the fake kernel, with no device behind the id:
// misuse (an id that is not resolved, not a request, never connected, or
// destroyed) fails with the documented errno, and the kernel's errors reach
// the application with their errno.
#include "fixture.h"

namespace rdmacm::testing {
namespace {

TEST_F(CmTest, ConnectionCallsNeedAnIdOnADevice) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
  rdma_conn_param cp{};
  EXPECT_FAILS_WITH(rdma_connect(id, &cp), EINVAL);        // not resolved
  EXPECT_FAILS_WITH(rdma_accept(id, &cp), EINVAL);         // not a request
  EXPECT_FAILS_WITH(rdma_disconnect(id), EINVAL);          // never connected
  EXPECT_FAILS_WITH(rdma_resolve_route(id, 100), EINVAL);  // no address yet
  ibv_qp_init_attr attr{};
  EXPECT_FAILS_WITH(rdma_create_qp(id, nullptr, &attr), EINVAL);
  errno = 0;
  rdma_destroy_qp(id);  // none to destroy
  EXPECT_EQ(errno, EINVAL);
  EXPECT_FAILS_WITH(rdma_reject(id, nullptr, 5), EINVAL);
  EXPECT_FAILS_WITH(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, nullptr, 1), EFAULT);  // as the kernel answers
  EXPECT_FAILS_WITH(rdma_migrate_id(id, reinterpret_cast<rdma_event_channel*>(&cp)), EINVAL);
  // Calls on a destroyed id.
  EXPECT_EQ(rdma_destroy_id(id), 0);
  EXPECT_FAILS_WITH(rdma_listen(id, 1), EINVAL);
  EXPECT_FAILS_WITH(rdma_connect(id, &cp), EINVAL);
  EXPECT_FAILS_WITH(rdma_notify(id, IBV_EVENT_COMM_EST), EINVAL);
}

TEST_F(CmTest, KernelErrorsPassThroughWithTheirErrno) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
  fake.fail_next(Cmd::listen, EADDRINUSE);
  EXPECT_FAILS_WITH(rdma_listen(id, 4), EADDRINUSE);
  int on = 1;
  fake.fail_next(Cmd::set_option, ENOSYS);
  EXPECT_FAILS_WITH(rdma_set_option(id, RDMA_OPTION_ID, 77, &on, sizeof(on)), ENOSYS);
  fake.fail_next(Cmd::destroy_id, EIO);
  EXPECT_FAILS_WITH(rdma_destroy_id(id), EIO);
  EXPECT_EQ(rdma_destroy_id(id), 0) << "a failed destroy leaves the id usable";
  EXPECT_EQ(fake.live_ids(), 0u);
}

}  // namespace
}  // namespace rdmacm::testing
