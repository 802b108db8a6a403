// Zero-copy stream sends (zcopy_min, rsocket(7)) on the device: this binary
// sets RSOCKET_ZCOPY_MIN=65536 for itself before its first rsocket call, so
// every blocking send of 64 KiB or more below goes from the caller's buffer.
// What send(2) promises must hold: the caller may reuse or unmap its buffer
// the moment rsend returns, and a new mapping at the same address sends its
// own bytes (nothing registered outlives the call). Ours only (rdma-core has
// no zero-copy send); tests/rxe/rsocket_zcopy.sh proves the copy is gone and
// runs rdma-core's rsockets as the peer. What these catch on rxe: bytes
// from the wrong place or registration (offsets, keys, pieces, mappings).
// A send that returned before its writes completed cannot show here: rxe's
// kernel copies a write's bytes into packets while the post runs (each
// write is at most the peer's 64 KiB window half), measured with such a
// mutant: all pass.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <rdma/rsocket.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include "rsocket_pair.h"
#include "rxe_env.h"

namespace rdmacm::rxe {
namespace {

const bool kZeroCopy = setenv("RSOCKET_ZCOPY_MIN", "65536", 1) == 0;

constexpr size_t kSize = 1 << 20;

void fill(uint8_t* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(i * 131 + i / 4093 + seed * 17);
}

// Receives `count` messages of kSize and checks message k against fill(.., k).
void expect_messages(int s, unsigned count) {
  std::vector<uint8_t> got(kSize), want(kSize);
  for (unsigned k = 0; k < count; ++k) {
    ASSERT_EQ(recv_all(s, got.data(), got.size()), ssize_t(kSize)) << "message " << k;
    fill(want.data(), want.size(), k);
    ASSERT_EQ(std::memcmp(got.data(), want.data(), kSize), 0) << "message " << k << " differs";
  }
}

TEST(RsocketZeroCopy, TheCallerMayOverwriteItsBufferTheMomentSendReturns) {
  ASSERT_TRUE(kZeroCopy);
  Pair p(7631);
  constexpr unsigned kCount = 8;
  long pkts = sent_packets();
  std::thread receiver([&] { expect_messages(p.server, kCount); });
  std::vector<uint8_t> buf(kSize);
  for (unsigned k = 0; k < kCount; ++k) {
    fill(buf.data(), buf.size(), k);
    EXPECT_EQ(rsend(p.client, buf.data(), buf.size(), 0), ssize_t(kSize)) << strerror(errno);
    std::memset(buf.data(), 0xA5, buf.size());  // the next message's bytes go here at once
  }
  receiver.join();
  EXPECT_GE(sent_packets() - pkts, long(kCount * kSize / 4096)) << "the bytes did not cross rxe0";
}

TEST(RsocketZeroCopy, ABufferUnmappedAndMappedAgainAtTheSameAddressSendsItsNewBytes) {
  ASSERT_TRUE(kZeroCopy);
  Pair p(7632);
  constexpr unsigned kCount = 4;
  std::thread receiver([&] { expect_messages(p.server, kCount); });
  void* want = nullptr;
  for (unsigned k = 0; k < kCount; ++k) {
    // Fresh pages at the address the last mapping had (unmapped just before).
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | (want ? MAP_FIXED_NOREPLACE : 0);
    void* m = mmap(want, kSize, PROT_READ | PROT_WRITE, flags, -1, 0);
    ASSERT_NE(m, MAP_FAILED) << strerror(errno);
    if (want) {
      ASSERT_EQ(m, want);
    }
    want = m;
    fill(static_cast<uint8_t*>(m), kSize, k);
    EXPECT_EQ(rsend(p.client, m, kSize, 0), ssize_t(kSize)) << strerror(errno);
    ASSERT_EQ(munmap(m, kSize), 0);
  }
  receiver.join();
}

TEST(RsocketZeroCopy, AReadOnlyFileMappingIsSentAsItIs) {
  ASSERT_TRUE(kZeroCopy);
  Pair p(7633);
  char path[] = "/tmp/rsocket_zcopy.XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0) << strerror(errno);
  unlink(path);
  std::vector<uint8_t> bytes(kSize);
  fill(bytes.data(), bytes.size(), 0);
  ASSERT_EQ(write(fd, bytes.data(), bytes.size()), ssize_t(kSize));
  void* m = mmap(nullptr, kSize, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(m, MAP_FAILED) << strerror(errno);
  std::thread receiver([&] { expect_messages(p.server, 1); });
  EXPECT_EQ(rsend(p.client, m, kSize, 0), ssize_t(kSize)) << strerror(errno);
  receiver.join();
  munmap(m, kSize);
  close(fd);
}

// Sends larger than what one call pins at a time (4 MiB), from both ends at
// once: each end's sends wait on its own completions while its receives run.
TEST(RsocketZeroCopy, LargeSendsBothWaysAtOnce) {
  ASSERT_TRUE(kZeroCopy);
  Pair p(7634);
  constexpr size_t kBig = 9 << 20;
  std::vector<uint8_t> a(kBig), b(kBig), got_a(kBig), got_b(kBig);
  fill(a.data(), kBig, 1);
  fill(b.data(), kBig, 2);
  std::thread forth([&] { EXPECT_EQ(rsend(p.client, a.data(), kBig, 0), ssize_t(kBig)); });
  std::thread back([&] { EXPECT_EQ(rsend(p.server, b.data(), kBig, 0), ssize_t(kBig)); });
  EXPECT_EQ(recv_all(p.server, got_a.data(), kBig), ssize_t(kBig));
  EXPECT_EQ(recv_all(p.client, got_b.data(), kBig), ssize_t(kBig));
  forth.join();
  back.join();
  EXPECT_TRUE(got_a == a);
  EXPECT_TRUE(got_b == b);
}

}  // namespace
}  // namespace rdmacm::rxe
