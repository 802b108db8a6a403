// Stream endpoints made ahead (src/rsocket/endpoint_spares.h): a process
// that connects in a run gets its next endpoint made in the background, a
// later connect takes it, and nothing of it is left a few seconds after the
// connections stop. Seen from the kernel's side: the QPs and regions this
// process holds (`rdma res show`), each listed with the thread that made it.
#include <gtest/gtest.h>
#include <rdma/rsocket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rdma_res.h"
#include "rsocket_pair.h"
#include "rxe_env.h"

namespace rdmacm::rxe {
namespace {

using Clock = std::chrono::steady_clock;

// On by default (rsocket(7)), and for this whole binary whatever a file
// says, before its first rsocket reads the configuration: every stream test
// here runs with endpoints made ahead beside its own (unless the
// environment says otherwise).
const bool ahead_on = [] { return setenv("RSOCKET_ENDPOINTS_AHEAD", "2", 0) == 0; }();

// This process's QPs in RTS: number -> the thread that made it (the kernel
// lists a QP by its creator's thread id, and only once it has a port: a QP
// made ahead is not listed until a connection takes it).
std::map<long, long> connected_qps() {
  static const std::regex qp(R"(lqpn (\d+) .*state RTS .*pid (\d+))");
  std::map<long, long> qps;
  std::smatch m;
  for (const std::string& line : own_resources("qp"))
    if (std::regex_search(line, m, qp)) qps[std::stol(m[1])] = std::stol(m[2]);
  return qps;
}

// Waits up to `secs` for cond(); false if it never held.
template <typename F>
bool within(int secs, F cond) {
  auto end = Clock::now() + std::chrono::seconds(secs);
  while (!cond()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// A connection to the listener l, both ends ours.
std::pair<int, int> connect_to(int l, uint16_t port) {
  int server = -1;
  std::thread accepter([&] { server = raccept(l, nullptr, nullptr); });
  int client = rsocket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = device_addr(port);
  EXPECT_EQ(rconnect(client, sa(&a), sizeof(a)), 0) << strerror(errno);
  accepter.join();
  EXPECT_GE(server, 0) << strerror(errno);
  return {client, server};
}

// Ours only (rdma-core makes every endpoint when it is needed); each test
// starts with no QP of this process left (the sockets of the tests before
// close in the background, and their spares go a second after).
class RsocketSpares : public ::testing::Test {
 protected:
  void SetUp() override {
    if (reference()) GTEST_SKIP() << "rdma-core makes no endpoint ahead";
    ASSERT_TRUE(ahead_on);
    ASSERT_TRUE(within(10, [] { return own_resources("qp").empty() && own_resources("mr").empty(); }))
        << "QPs or regions of closed sockets still there after 10 s";
  }
};

TEST_F(RsocketSpares, ConnectsInARunTakeEndpointsMadeAheadThatGoOnceTheRunEnds) {
  constexpr uint16_t kPort = 7681;
  int l = listener(kPort);
  std::vector<std::pair<int, int>> conns;
  // Without endpoints made ahead, this thread makes the client ends' QPs and
  // the listener's thread the accepted ends': the first connection's (one
  // connection is two endpoints of one shape here, both ends being ours, so
  // the run starts with the next).
  conns.push_back(connect_to(l, kPort));
  std::set<long> makers{static_cast<long>(syscall(SYS_gettid))};
  for (auto [qp, maker] : connected_qps()) makers.insert(maker);
  ASSERT_EQ(makers.size(), 2u) << "the first connection's QPs: not made by two threads";
  // In a run, a connection soon takes an endpoint another thread made ahead.
  bool ahead = false;
  for (int i = 0; i < 10 && !ahead; ++i) {
    conns.push_back(connect_to(l, kPort));
    for (auto [qp, maker] : connected_qps()) ahead = ahead || !makers.count(maker);
  }
  std::string text;
  ASSERT_TRUE(ahead) << "no connection took an endpoint made ahead in a run of 11:\n"
                     << (own_resources("qp", &text), text);
  // The connections carry bytes, through the device.
  long before = sent_packets();
  char out[4096], in[4096];
  for (size_t i = 0; i < sizeof(out); ++i) out[i] = static_cast<char>(i * 13);
  for (auto [client, server] : conns) {
    ASSERT_EQ(rsend(client, out, sizeof(out), 0), static_cast<ssize_t>(sizeof(out)));
    ASSERT_EQ(recv_all(server, in, sizeof(in)), static_cast<ssize_t>(sizeof(in)));
    EXPECT_EQ(0, memcmp(in, out, sizeof(in)));
  }
  EXPECT_GE(sent_packets() - before, static_cast<long>(conns.size())) << "the bytes did not cross the device";
  for (auto [c, s] : conns) {
    rclose(c);
    rclose(s);
  }
  rclose(l);
  // An endpoint made ahead that nobody takes goes a second after it was made
  // (its regions are listed, its QP not), a closed connection within two
  // seconds of its peer's close (rsocket(7)).
  EXPECT_TRUE(within(10, [] { return own_resources("qp").empty() && own_resources("mr").empty(); }))
      << "QPs or regions left 10 s after the last connection closed";
}

}  // namespace
}  // namespace rdmacm::rxe
