// RDMACM_TRACE (core/trace.h): calls with their results and errno, and the
// kernel's events with what the application got, one line each.
#include <cstdio>
#include <string>

#include "core/trace.h"
#include "fixture.h"

namespace rdmacm::testing {
namespace {

class TraceTest : public CmTest {
 protected:
  void SetUp() override {
    out = std::tmpfile();
    ASSERT_NE(out, nullptr);
    core::set_trace(out);
    CmTest::SetUp();
  }
  void TearDown() override {
    CmTest::TearDown();
    core::set_trace(nullptr);
    std::fclose(out);
  }
  std::string text() {
    std::fflush(out);
    std::rewind(out);
    std::string s;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, out)) > 0) s.append(buf, n);
    return s;
  }
  FILE* out = nullptr;
};

TEST_F(TraceTest, CallsAreTracedWithTheirResultAndErrno) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
  EXPECT_EQ(rdma_resolve_route(id, -5), -1);
  ASSERT_EQ(rdma_destroy_id(id), 0);
  std::string t = text();
  EXPECT_NE(t.find("] rdma_create_event_channel = "), std::string::npos) << t;
  EXPECT_NE(t.find("] rdma_create_id = 0\n"), std::string::npos) << t;
  EXPECT_NE(t.find("] rdma_resolve_route = -1 errno 22 (Invalid argument)\n"), std::string::npos)
      << t;
  EXPECT_NE(t.find("] rdma_destroy_id = 0\n"), std::string::npos) << t;
}

TEST_F(TraceTest, EventsAreTracedWithTheirIdAndStatus) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
  fake.queue_event(channel->fd, uid(id), RDMA_CM_EVENT_ADDR_ERROR, -ETIMEDOUT);
  rdma_cm_event* ev = nullptr;
  ASSERT_EQ(rdma_get_cm_event(channel, &ev), 0);
  ASSERT_EQ(rdma_ack_cm_event(ev), 0);
  ASSERT_EQ(rdma_destroy_id(id), 0);
  char want[128];
  std::snprintf(want, sizeof want, "] event RDMA_CM_EVENT_ADDR_ERROR status -110 id %p\n",
                static_cast<void*>(id));
  std::string t = text();
  EXPECT_NE(t.find(want), std::string::npos) << t;
}

TEST_F(TraceTest, NothingIsWrittenWhenOff) {
  core::set_trace(nullptr);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
  ASSERT_EQ(rdma_destroy_id(id), 0);
  core::set_trace(out);
  EXPECT_EQ(text().find("rdma_create_id"), std::string::npos);
}

}  // namespace
}  // namespace rdmacm::testing
