// Common set-up: the fake kernel behind the library, one event channel.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include <cerrno>

#include "fake_transport.h"

namespace rdmacm::testing {

// The uid the library gave the kernel for this id (its public address).
inline uint64_t uid(rdma_cm_id* id) { return reinterpret_cast<uintptr_t>(id); }

inline sockaddr_in ipv4(const char* ip, uint16_t port) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(port);
  inet_pton(AF_INET, ip, &sin.sin_addr);
  return sin;
}

// Makes a channel's fd non-blocking: an empty channel answers EAGAIN.
inline void nonblocking(int fd) {
  ASSERT_EQ(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
}

class CmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    channel = rdma_create_event_channel();
    ASSERT_NE(channel, nullptr);
  }
  void TearDown() override {
    if (channel) rdma_destroy_event_channel(channel);
  }

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
