// A stream rsocket's send buffer starts small and grows to the configured
// size only when the traffic needs it (as TCP's): seen from the kernel's
// side, the memory regions this process has registered on the device (`rdma
// res show mr`: each with its length), before and after the traffic, with
// every byte checked. The receive buffer is the window the peer may fill
// before we read (a 64 KiB reply sent before the peer reads must not block):
// registered whole at connect, as rdma-core registers both.
#include <gtest/gtest.h>
#include <rdma/rsocket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "rsocket_pair.h"
#include "rxe_env.h"

namespace rdmacm::rxe {
namespace {

// The lengths of the memory regions this process holds on the device (the
// tool's output in *text). The kernel names each by the thread that made it
// (a thread since gone, for the accepted end's): ours by our command name.
std::vector<long> mr_lengths(std::string* text = nullptr) {
  std::vector<long> lens;
  std::string comm;
  std::getline(std::ifstream("/proc/self/comm"), comm);
  FILE* f = popen("rdma res show mr 2>&1", "r");
  if (!f) return lens;
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), f)) > 0;) out.append(buf, n);
  pclose(f);
  static const std::regex mr(R"(mrlen (\d+) .*comm (\S+))");
  for (std::sregex_iterator it(out.begin(), out.end(), mr), end; it != end; ++it)
    if ((*it)[2] == comm) lens.push_back(std::stol((*it)[1]));
  if (text) *text = out;
  return lens;
}

long largest(const std::vector<long>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }

int configured(int s, int name) {
  int v = 0;
  socklen_t len = sizeof(v);
  EXPECT_EQ(rgetsockopt(s, SOL_SOCKET, name, &v, &len), 0) << strerror(errno);
  return v;
}

// Sends len bytes of a pattern from `from` while `to` reads and checks them.
void stream_checked(int from, int to, size_t len, uint8_t seed) {
  std::vector<uint8_t> out(len), in(len);
  for (size_t i = 0; i < len; ++i) out[i] = static_cast<uint8_t>(i * 7 + seed);
  std::thread reader([&] { EXPECT_EQ(recv_all(to, in.data(), len), static_cast<ssize_t>(len)); });
  size_t sent = 0;
  while (sent < len) {
    ssize_t n = rsend(from, out.data() + sent, len - sent, 0);
    ASSERT_GT(n, 0) << strerror(errno);
    sent += static_cast<size_t>(n);
  }
  reader.join();
  EXPECT_TRUE(in == out) << "bytes changed on the way";
}

// Waits (up to 10 s) until this process holds no region: the sockets of the
// tests before have finished closing (a close tears down in the background,
// within two seconds of the peer's own close; rsocket(7)).
bool no_regions_left() {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!mr_lengths().empty()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// Regions at least `size` long.
long at_least(const std::vector<long>& lens, long size) {
  return std::count_if(lens.begin(), lens.end(), [&](long l) { return l >= size; });
}

// Ours only; each test starts with no region of this process left.
class RsocketBuffers : public ::testing::Test {
 protected:
  void SetUp() override {
    if (reference()) GTEST_SKIP() << "rdma-core registers its configured send buffer at connect";
    ASSERT_TRUE(no_regions_left()) << "regions of closed sockets still registered after 10 s";
  }
};

TEST_F(RsocketBuffers, AConnectionStartsWithASmallSendBufferAndAnEchoKeepsItSmall) {
  Pair p(7671);
  ASSERT_GE(p.client, 0);
  long size = configured(p.client, SO_SNDBUF);
  ASSERT_EQ(size, configured(p.client, SO_RCVBUF)) << "rsockets' defaults: 128 KiB each";
  // Both ends are this process's: of their regions only the two receive
  // buffers are of the configured size.
  std::string text;
  std::vector<long> at_start = mr_lengths(&text);
  ASSERT_GE(at_start.size(), 6u) << "rdma res show mr found too few regions:\n" << text;
  EXPECT_EQ(at_least(at_start, size), 2);
  long before = sent_packets();
  stream_checked(p.client, p.server, 4096, 1);
  stream_checked(p.server, p.client, 4096, 2);
  EXPECT_GE(sent_packets() - before, 2) << "the echo did not cross the device";
  EXPECT_EQ(at_least(mr_lengths(&text), size), 2) << "a 4 KiB echo grew a send buffer";
}

TEST_F(RsocketBuffers, BulkTrafficGrowsTheSendBufferToTheConfiguredSizeEachWay) {
  Pair p(7672);
  ASSERT_GE(p.client, 0);
  long size = configured(p.client, SO_SNDBUF);
  long before = sent_packets();
  // A ring grows when a send finds it full and the bytes in flight do not
  // wrap (timing decides when): streamed each way, 4 MiB at a time, until
  // both ends' rings are grown (four doublings each, from 8 KiB), at most
  // 64 MiB.
  std::string text;
  std::vector<long> lens;
  for (int i = 0; i < 16; i++) {
    stream_checked(p.client, p.server, 4 << 20, static_cast<uint8_t>(3 + i));
    stream_checked(p.server, p.client, 4 << 20, static_cast<uint8_t>(4 + i));
    lens = mr_lengths(&text);
    if (at_least(lens, size) >= 4) break;
  }
  EXPECT_GT(sent_packets() - before, (8l << 20) / 4096) << "the bytes did not cross the device";
  // Each end's receive buffer and, grown, its send ring; none past it.
  EXPECT_EQ(at_least(lens, size), 4) << "a send ring that did not grow:\n" << text;
  EXPECT_LE(largest(lens), size);
  // Still intact once grown.
  stream_checked(p.client, p.server, 1 << 20, 5);
}

}  // namespace
}  // namespace rdmacm::rxe
