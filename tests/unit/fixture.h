// Common set-up: the fake kernel behind the library, one event channel.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <functional>
#include <thread>

#include "../common/time_scale.h"
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

  // The race of a reader with another thread: reads the channel (made
  // non-blocking) once, with `act` started in a thread right after the fake
  // kernel has handed the event out. The reader goes on once `act` has
  // reached the kernel (its first command, the destroy or the leave, comes
  // after the library marked the object as going), and 100 ms later, so
  // that as a rule `act` waits there for the reader's count (either order
  // must work). The event was for an object `act` tears down, so the reader
  // must get EAGAIN (counted and dropped). Returns once `act` has finished.
  void race_reader_with(const std::function<void()>& act) {
    nonblocking(channel->fd);
    std::thread actor;
    std::atomic<bool> finished{false};
    fake.on_get_event = [&] {
      size_t issued = fake.commands().size();
      actor = std::thread([&] {
        act();
        finished = true;
      });
      while (fake.commands().size() == issued && !finished)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    };
    rdma_cm_event* ev = nullptr;
    errno = 0;
    EXPECT_EQ(rdma_get_cm_event(channel, &ev), -1);
    EXPECT_EQ(errno, EAGAIN);
    actor.join();  // the watchdog fails a hang
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
