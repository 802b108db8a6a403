// What the preload tests share: plain socket helpers (each test binary
// runs with librspreload.so preloaded, rxe_preload_tests).
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

namespace rdmacm::rxe {

inline sockaddr* sa(sockaddr_in* a) { return reinterpret_cast<sockaddr*>(a); }

inline bool fork_safe() { return getenv("RDMAV_FORK_SAFE") && atoi(getenv("RDMAV_FORK_SAFE")); }

inline ssize_t read_all(int s, void* buf, size_t len) {
  size_t got = 0;
  while (got < len) {
    ssize_t n = read(s, static_cast<char*>(buf) + got, len - got);
    if (n <= 0) return n < 0 ? n : static_cast<ssize_t>(got);
    got += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(got);
}

inline void write_all(int s, const void* buf, size_t len) {
  size_t put = 0;
  while (put < len) {
    ssize_t n = write(s, static_cast<const char*>(buf) + put, len - put);
    ASSERT_GT(n, 0) << strerror(errno);
    put += static_cast<size_t>(n);
  }
}

inline std::vector<char> pattern(size_t n) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; i++) v[i] = static_cast<char>(i * 7 + i / 4096);
  return v;
}

}  // namespace rdmacm::rxe
