// DEVICE_REMOVAL (core/device_table.cpp release_removed): the kernel's
// removal of a device waits until every user of its uverbs device has
// closed it, so once the application has destroyed the last id on a removed
// device the library must close its PD and context; an id made afterwards
// opens the device afresh. Without a removal, devices stay open.
#include "device_fixture.h"

namespace rdmacm::testing {
namespace {

class DeviceRemoval : public DeviceTest {
 protected:
  void removal(rdma_cm_id* id) {
    queue_conn(id, RDMA_CM_EVENT_DEVICE_REMOVAL, 0);
    rdma_cm_event* ev = next(channel);
    ASSERT_NE(ev, nullptr);
    EXPECT_EQ(ev->id, id);
    EXPECT_EQ(ev->event, RDMA_CM_EVENT_DEVICE_REMOVAL) << rdma_event_str(ev->event);
    EXPECT_EQ(rdma_ack_cm_event(ev), 0);
  }
};

TEST_F(DeviceRemoval, LastIdDestroyedClosesTheContext) {
  rdma_cm_id *a = nullptr, *b = nullptr;
  ASSERT_NO_FATAL_FAILURE(routed(channel, true, &a));
  ASSERT_NO_FATAL_FAILURE(routed(channel, false, &b));
  int closes = fake_device_closes();
  ASSERT_NO_FATAL_FAILURE(removal(a));
  ASSERT_NO_FATAL_FAILURE(removal(b));
  rdma_destroy_qp(a);
  EXPECT_EQ(rdma_destroy_id(a), 0);
  EXPECT_EQ(fake_device_closes(), closes) << "closed while an id was still on the device";
  EXPECT_EQ(rdma_destroy_id(b), 0);
  EXPECT_EQ(fake_device_closes(), closes + 1) << "the removed device's context stayed open";

  // The device is back (same GUID): a new id opens it again.
  int opens = fake_device_opens();
  rdma_cm_id* c = nullptr;
  ASSERT_NO_FATAL_FAILURE(routed(channel, true, &c));
  EXPECT_EQ(fake_device_opens(), opens + 1);
  EXPECT_NE(c->verbs, nullptr);
  EXPECT_NE(c->pd, nullptr);
  rdma_destroy_qp(c);
  EXPECT_EQ(rdma_destroy_id(c), 0);
  EXPECT_EQ(fake_device_closes(), closes + 1) << "a device not removed was closed";
}

TEST_F(DeviceRemoval, WithoutRemovalTheDeviceStaysOpen) {
  rdma_cm_id* a = nullptr;
  ASSERT_NO_FATAL_FAILURE(routed(channel, true, &a));
  int closes = fake_device_closes();
  rdma_destroy_qp(a);
  EXPECT_EQ(rdma_destroy_id(a), 0);
  EXPECT_EQ(fake_device_closes(), closes);
}

}  // namespace
}  // namespace rdmacm::testing
