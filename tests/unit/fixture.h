// Common set-up: the fake kernel behind the library, one event channel.
#pragma once

#include <gtest/gtest.h>
#include <rdma/rdma_cma.h>

#include <cerrno>

#include "fake_transport.h"

namespace rdmacm::testing {

class CmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    channel = rdma_create_event_channel();
    ASSERT_NE(channel, nullptr);
  }
  void TearDown() override {
    if (channel) rdma_destroy_event_channel(channel);
  }

  // The uid the library gave the kernel for this id (its public address).
  static uint64_t uid(rdma_cm_id* id) { return reinterpret_cast<uintptr_t>(id); }

  FakeTransport fake;
  rdma_event_channel* channel = nullptr;
};

// Expects a C API call to fail with -1 and this errno.
#define EXPECT_FAILS_WITH(call, err) \
  do {                               \
    errno = 0;                       \
    EXPECT_EQ((call), -1);           \
    EXPECT_EQ(errno, (err));         \
  } while (0)

}  // namespace rdmacm::testing
