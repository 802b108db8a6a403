// A stream rsocket's send buffer starts small, grows to the configured size
// only when the traffic needs it and shrinks back when the connection idles
// (as TCP's): seen from the kernel's
// side, the memory regions this process has registered on the device (`rdma
// res show mr`: each with its length), before and after the traffic, with
// every byte checked. The receive buffer is the window the peer may fill
// before we read (a 64 KiB reply sent before the peer reads must not block):
// registered whole at connect, as rdma-core registers both. The queues in
// use start shallow too and deepen with the traffic (the CQs, `rdma res show
// cq`); a QP's queues are made 127 deep unless a depth is asked for.
#include <gtest/gtest.h>
#include <rdma/rsocket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "rdma_res.h"
#include "rsocket_pair.h"
#include "rxe_env.h"

namespace rdmacm::rxe {
namespace {

// The lengths of the memory regions this process holds on the device (the
// tool's output in *text): all, or only those the peer cannot write (rkey 0:
// send rings and control slots; a receive buffer and the target SGL are the
// peer's to write). Endpoints made ahead in the background (a run of
// connections: endpoint_spares.h) are among them.
std::vector<long> mr_lengths(std::string* text = nullptr, bool local_only = false) {
  std::vector<long> lens;
  static const std::regex mr(R"(rkey (0x[0-9a-f]+) .*mrlen (\d+) )");
  std::smatch m;
  for (const std::string& line : own_resources("mr", text))
    if (std::regex_search(line, m, mr) && (!local_only || m[1] == "0x0"))
      lens.push_back(std::stol(m[2]));
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

// The entries of every CQ this process holds on the device (`rdma res show
// cq`: a stream connection's one CQ each, an endpoint made ahead's too). rxe
// reports its ring's slots less one: what was asked, plus one, rounded up to
// a power of two (96 entries: 127; 768: 1023).
std::vector<long> cq_entries(std::string* text = nullptr) {
  std::vector<long> cqes;
  static const std::regex cq(R"(cqe (\d+) )");
  std::smatch m;
  for (const std::string& line : own_resources("cq", text))
    if (std::regex_search(line, m, cq)) cqes.push_back(std::stol(m[1]));
  return cqes;
}

// The lengths of this process's mappings of the device's file: rxe maps each
// QP's send and receive rings and each CQ's ring into the process whole
// (resident at once), at creation.
std::vector<long> device_mappings(std::string* text) {
  std::vector<long> lens;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  text->clear();
  while (std::getline(maps, line)) {
    if (line.find("/dev/infiniband/uverbs") == std::string::npos) continue;
    *text += line + "\n";
    unsigned long start = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &start, &end) == 2) lens.push_back(static_cast<long>(end - start));
  }
  return lens;
}

// Sends `count` messages of `size` bytes from `from` (one rsend each) while
// `to` reads them and checks every byte.
void messages_checked(int from, int to, int count, size_t size, uint8_t seed) {
  size_t len = size * static_cast<size_t>(count);
  std::vector<uint8_t> out(len), in(len);
  for (size_t i = 0; i < len; ++i) out[i] = static_cast<uint8_t>(i * 13 + seed);
  std::thread reader([&] { EXPECT_EQ(recv_all(to, in.data(), len), static_cast<ssize_t>(len)); });
  for (size_t at = 0; at < len;) {
    ssize_t n = rsend(from, out.data() + at, std::min(size, len - at), 0);
    ASSERT_GT(n, 0) << strerror(errno);
    at += static_cast<size_t>(n);
  }
  reader.join();
  EXPECT_TRUE(in == out) << "bytes changed on the way";
}

// Whether `done` comes true within 10 s (looked at every 50 ms).
template <typename Done>
bool within_10s(Done done) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// Waits (up to 10 s) until this process holds no region: the sockets of the
// tests before have finished closing (a close tears down in the background,
// within two seconds of the peer's own close; rsocket(7)).
bool no_regions_left() { return within_10s([] { return mr_lengths().empty(); }); }

// Regions at least `size` long.
long at_least(const std::vector<long>& lens, long size) {
  return std::count_if(lens.begin(), lens.end(), [&](long l) { return l >= size; });
}

// A ring grows when a send finds it full and the bytes in flight do not
// wrap (timing decides when): streamed each way, 4 MiB at a time, until
// both ends' rings are grown (four doublings each, from 8 KiB), at most
// 64 MiB. The local regions then (mr_lengths).
std::vector<long> grow_both_rings(const Pair& p, long size, std::string* text) {
  std::vector<long> lens;
  for (int i = 0; i < 16; i++) {
    stream_checked(p.client, p.server, 4 << 20, static_cast<uint8_t>(3 + i));
    stream_checked(p.server, p.client, 4 << 20, static_cast<uint8_t>(4 + i));
    lens = mr_lengths(text, true);
    if (at_least(lens, size) >= 2) break;
  }
  return lens;
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
  // Both ends are this process's: their two receive buffers are of the
  // configured size, their send rings (the regions the peer cannot write)
  // smaller.
  std::string text;
  std::vector<long> at_start = mr_lengths(&text);
  ASSERT_GE(at_start.size(), 6u) << "rdma res show mr found too few regions:\n" << text;
  EXPECT_GE(at_least(at_start, size), 2);
  std::vector<long> rings = mr_lengths(&text, true);
  EXPECT_GE(rings.size(), 2u) << text;
  EXPECT_LT(largest(rings), size) << text;
  long before = sent_packets();
  stream_checked(p.client, p.server, 4096, 1);
  stream_checked(p.server, p.client, 4096, 2);
  EXPECT_GE(sent_packets() - before, 2) << "the echo did not cross the device";
  EXPECT_LT(largest(mr_lengths(&text, true)), size) << "a 4 KiB echo grew a send buffer:\n" << text;
}

TEST_F(RsocketBuffers, BulkTrafficGrowsTheSendBufferToTheConfiguredSizeEachWay) {
  Pair p(7672);
  ASSERT_GE(p.client, 0);
  long size = configured(p.client, SO_SNDBUF);
  long before = sent_packets();
  std::string text;
  std::vector<long> lens = grow_both_rings(p, size, &text);
  EXPECT_GT(sent_packets() - before, (8l << 20) / 4096) << "the bytes did not cross the device";
  // Each end's send ring grown (an endpoint made ahead meanwhile has a small
  // one); no region past the configured size.
  EXPECT_EQ(at_least(lens, size), 2) << "a send ring that did not grow:\n" << text;
  EXPECT_LE(largest(mr_lengths(&text)), size) << text;
  // Still intact once grown.
  stream_checked(p.client, p.server, 1 << 20, 5);
}

// As TCP gives an idle connection's buffer back: once the traffic stops, a
// send ring that bulk traffic grew goes back to its first 8 KiB (within a
// second or two of the last send: rsocket(7)), registration and pages both;
// the connection carries on (and grows again) with every byte intact.
TEST_F(RsocketBuffers, ASendRingGrownByBulkTrafficShrinksBackWhenTheConnectionIdles) {
  Pair p(7676);
  ASSERT_GE(p.client, 0);
  long size = configured(p.client, SO_SNDBUF);
  std::string text;
  std::vector<long> lens = grow_both_rings(p, size, &text);
  ASSERT_EQ(at_least(lens, size), 2) << "a send ring that did not grow:\n" << text;
  // Idle: no region the peer cannot write is past the first ring's 8 KiB
  // (send rings and control slots).
  EXPECT_TRUE(within_10s([&] { return largest(mr_lengths(&text, true)) <= 8192; }))
      << "a grown send ring still registered after 10 s idle:\n" << text;
  long before = sent_packets();
  messages_checked(p.client, p.server, 2000, 16, 8);
  messages_checked(p.server, p.client, 2000, 16, 9);
  stream_checked(p.client, p.server, 4 << 20, 10);
  stream_checked(p.server, p.client, 4 << 20, 11);
  EXPECT_GT(sent_packets() - before, (8l << 20) / 4096) << "the bytes did not cross the device";
  EXPECT_LE(largest(mr_lengths(&text)), size) << text;
}

// The queues start shallow (the QP's are 127 deep, but a connection keeps
// 64 sends and 32 receives in use at first, and its CQ holds just those: rxe
// maps a CQ's ring into the process whole, 132 KiB at 768 entries) and deepen when a stream of small messages runs out of them:
// the receiver's when the sender spent every credit, the sender's when its
// queue was full. Every byte checked; the traffic crossed the device.
TEST_F(RsocketBuffers, QueuesStartShallowAndAStreamOfSmallMessagesDeepensThem) {
  Pair p(7673);
  ASSERT_GE(p.client, 0);
  std::string text;
  std::vector<long> at_start = cq_entries(&text);
  ASSERT_GE(at_start.size(), 2u) << "rdma res show cq found too few CQs:\n" << text;
  constexpr long kShallow = 127, kDeepest = 255;  // 64 + 32 entries; 127 + 127
  EXPECT_LE(largest(at_start), kShallow) << "a connection's CQ made deep:\n" << text;
  long before = sent_packets();
  stream_checked(p.client, p.server, 4096, 1);
  stream_checked(p.server, p.client, 4096, 2);
  EXPECT_LE(largest(cq_entries(&text)), kShallow) << "a 4 KiB echo deepened a queue:\n" << text;
  // Small messages each way, 20,000 at a time, until both ends' CQs are
  // deeper (at most 10 rounds).
  std::vector<long> cqes;
  for (int i = 0; i < 10; i++) {
    messages_checked(p.client, p.server, 20000, 16, static_cast<uint8_t>(3 + i));
    messages_checked(p.server, p.client, 20000, 16, static_cast<uint8_t>(4 + i));
    cqes = cq_entries(&text);
    if (std::count_if(cqes.begin(), cqes.end(), [](long c) { return c > kShallow; }) >= 2) break;
  }
  EXPECT_GT(sent_packets() - before, 20000) << "the messages did not cross the device";
  EXPECT_GE(std::count_if(cqes.begin(), cqes.end(), [](long c) { return c > kShallow; }), 2)
      << "a connection whose queues stayed shallow:\n" << text;
  EXPECT_LE(largest(cqes), kDeepest) << "a CQ past the QP's depths:\n" << text;
  // Still intact once deepened: bulk and small messages.
  stream_checked(p.client, p.server, 1 << 20, 5);
  messages_checked(p.server, p.client, 5000, 16, 6);
}


// A connection's QP holds 127 sends and 127 receives unless RDMA_SQSIZE and
// RDMA_RQSIZE (or the {sq,rq}size_default files) ask for other depths: rxe
// maps a send ring of 384 (rdma-core's default) as 260 KiB, one of 127 as
// 68 KiB; a receive ring of 384 as 36 KiB, one of 127 as 12 KiB. The options
// still read as rdma-core's, and a connection made with depths asked for
// moves bytes both ways as before.
TEST_F(RsocketBuffers, QueuePairsAreMade127DeepUnlessADepthIsAskedFor) {
  constexpr long kSend127 = 68 << 10, kSend384 = 260 << 10, kRecv384 = 36 << 10;
  auto count = [](const std::vector<long>& v, long len) { return std::count(v.begin(), v.end(), len); };
  std::string text;
  // The tests before's rings gone too (SetUp waited for their regions, which
  // go a moment before their CQs: a deepened CQ's ring is as long as a
  // receive ring of 384).
  ASSERT_TRUE(within_10s([&] { return device_mappings(&text).empty(); })) << "still mapped:\n" << text;
  {
    Pair p(7674);
    ASSERT_GE(p.client, 0);
    std::vector<long> maps = device_mappings(&text);
    ASSERT_GE(maps.size(), 6u) << "too few rings mapped for two connections:\n" << text;
    EXPECT_LE(largest(maps), kSend127) << "a ring deeper than 127 sends:\n" << text;
    EXPECT_EQ(count(maps, kRecv384), 0) << "a receive ring of 384:\n" << text;
    for (int name : {RDMA_SQSIZE, RDMA_RQSIZE}) {
      int v = 0;
      socklen_t len = sizeof(v);
      EXPECT_EQ(rgetsockopt(p.client, SOL_RDMA, name, &v, &len), 0) << strerror(errno);
      EXPECT_EQ(v, 384) << "rdma-core's default reads as it does there";
    }
    long before = sent_packets();
    messages_checked(p.client, p.server, 20000, 16, 1);
    messages_checked(p.server, p.client, 20000, 16, 2);
    EXPECT_GT(sent_packets() - before, 20000) << "the messages did not cross the device";
    EXPECT_LE(largest(device_mappings(&text)), kSend127) << "a queue past the QP's:\n" << text;
  }
  // The first pair's rings gone (a deepened CQ's is as long as a receive
  // ring of 384).
  ASSERT_TRUE(within_10s([&] { return device_mappings(&text).empty(); })) << "still mapped:\n" << text;
  Pair p(7675, [](int s) {
    int depth = 384;
    for (int name : {RDMA_SQSIZE, RDMA_RQSIZE})
      EXPECT_EQ(rsetsockopt(s, SOL_RDMA, name, &depth, sizeof(depth)), 0) << strerror(errno);
  });
  ASSERT_GE(p.client, 0);
  std::vector<long> maps = device_mappings(&text);
  EXPECT_EQ(count(maps, kSend384), 1) << "the client's send ring is not the 384 it asked for:\n" << text;
  EXPECT_EQ(count(maps, kRecv384), 1) << "the client's receive ring is not the 384 it asked for:\n" << text;
  long before = sent_packets();
  stream_checked(p.client, p.server, 1 << 20, 3);
  messages_checked(p.server, p.client, 20000, 16, 4);
  messages_checked(p.client, p.server, 20000, 16, 5);
  EXPECT_GT(sent_packets() - before, 40000) << "the bytes did not cross the device";
}

}  // namespace
}  // namespace rdmacm::rxe
