// Shared by the rsocket tests on the device: a listener, a connected pair,
// reading a whole buffer (rxe_env.h has the device's sent-packet counter).
#pragma once

#include <gtest/gtest.h>
#include <rdma/rsocket.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <thread>

#include "rxe_env.h"

namespace rdmacm::rxe {

inline sockaddr* sa(sockaddr_in* a) { return reinterpret_cast<sockaddr*>(a); }

// A listening rsocket on the device's address and `port`.
inline int listener(uint16_t port) {
  int l = rsocket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(l, 0) << strerror(errno);
  int one = 1;
  rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a = device_addr(port);
  EXPECT_EQ(rbind(l, sa(&a), sizeof(a)), 0) << strerror(errno);
  EXPECT_EQ(rlisten(l, 4), 0) << strerror(errno);
  return l;
}

// A connected pair: client (blocking connect) and the server's accepted end;
// `setup` sees the client's socket before it connects.
struct Pair {
  int server = -1, client = -1;
  explicit Pair(uint16_t port, const std::function<void(int)>& setup = {}) {
    int l = listener(port);
    std::thread accepter([&] { server = raccept(l, nullptr, nullptr); });
    client = rsocket(AF_INET, SOCK_STREAM, 0);
    if (setup) setup(client);
    sockaddr_in a = device_addr(port);
    EXPECT_EQ(rconnect(client, sa(&a), sizeof(a)), 0) << strerror(errno);
    accepter.join();
    EXPECT_GE(server, 0) << strerror(errno);
    rclose(l);
  }
  ~Pair() {
    if (client >= 0) rclose(client);
    if (server >= 0) rclose(server);
  }
};

inline ssize_t recv_all(int s, void* buf, size_t len) {
  size_t got = 0;
  while (got < len) {
    ssize_t n = rrecv(s, static_cast<char*>(buf) + got, len - got, 0);
    if (n <= 0) return n < 0 ? n : static_cast<ssize_t>(got);
    got += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(got);
}

}  // namespace rdmacm::rxe
