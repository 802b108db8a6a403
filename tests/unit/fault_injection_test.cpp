// Fault injection through the fake kernel. For every operation that reaches
// the kernel (fault_rows.cpp), each command it issues (step 1, 2, ...) is made
// to fail in turn with each errno the kernel can give for that command. Every
// such point must give a clean answer (the errno, or the answer the row
// documents), leave nothing behind (no kernel id, no verbs object;
// LeakSanitizer in the sanitizer build sees the rest), and leave the id
// usable: the operation succeeds when tried again without the fault, and
// everything is destroyable.
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "fault_rows.h"

namespace rdmacm::testing {
namespace {

std::vector<Cmd> since(const Bed& b, size_t start) {
  auto all = b.fake.commands();
  return {all.begin() + static_cast<ptrdiff_t>(start), all.end()};
}

class FaultInjection : public ::testing::TestWithParam<Row> {};

TEST_P(FaultInjection, EveryStepFailsCleanly) {
  const Row& row = GetParam();
  {
    SCOPED_TRACE("without a fault");
    Bed b;
    row.setup(b);
    ASSERT_FALSE(HasFailure());
    size_t start = b.fake.commands().size();
    ASSERT_EQ(row.op(b), 0) << strerror(errno);
    ASSERT_EQ(since(b, start), row.steps) << "the operation's commands changed: update the row";
    row.after(b);
    EXPECT_TRUE(b.clear());
    EXPECT_EQ(b.fake.live_ids(), 0u);
  }
  for (size_t step = 1; step <= row.steps.size(); ++step) {
    for (int err : kernel_errnos(row.steps[step - 1])) {
      SCOPED_TRACE(::testing::Message() << "step " << step << " (" << row.steps[step - 1]
                                      << ") fails with " << strerrorname_np(err));
      Answer answer = row.answer(step, err);
      Bed b;
      row.setup(b);
      ASSERT_FALSE(HasFailure());
      b.fault_step = step;
      b.fake.fail_nth(step, err);
      size_t verbs = fake_verbs_objects();
      errno = 0;
      int ret = row.op(b);
      if (answer.err) {
        EXPECT_EQ(ret, -1);
        EXPECT_EQ(errno, answer.err) << strerrorname_np(errno);
        EXPECT_LE(fake_verbs_objects(), verbs) << "the failed operation left QPs or CQs";
      } else {
        EXPECT_EQ(ret, 0) << strerrorname_np(errno);
      }
      b.fault_step = 0;
      row.after(b);
      bool retry = answer.err && (row.retry == Retry::kSame ||
                                  (row.retry == Retry::kFirstStep && step == 1));
      if (retry) {
        EXPECT_EQ(row.op(b), 0) << "not usable again: " << strerrorname_np(errno);
      }
      EXPECT_TRUE(b.clear()) << "something would not be destroyed";
      EXPECT_EQ(b.fake.live_ids(), answer.leftover) << "kernel ids left behind";
      EXPECT_EQ(fake_verbs_objects(), 0u) << "QPs, CQs or channels left behind";
      if (HasFailure()) return;  // one broken point says enough
    }
  }
}

// A second rdma_accept is EINVAL without a command to the kernel: the
// kernel's own EINVAL for it leaves the id's destroy (and the process's exit)
// waiting ~70 s in ib_cm (rxe, rdma-core 44 too: rxe.misuse's accept(twice)).
TEST(AcceptTwice, TheSecondIsRefusedWithoutAskingTheKernel) {
  Bed b;
  requested(b);
  ASSERT_FALSE(::testing::Test::HasFailure());
  rdma_conn_param param{};
  ASSERT_EQ(rdma_accept(b.id, &param), 0) << strerror(errno);
  size_t start = b.fake.commands().size();
  errno = 0;
  EXPECT_EQ(rdma_accept(b.id, &param), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(since(b, start), std::vector<Cmd>{});
  EXPECT_TRUE(b.clear());
}

INSTANTIATE_TEST_SUITE_P(Operations, FaultInjection, ::testing::ValuesIn(fault_rows()),
                         [](const auto& info) { return std::string(info.param.name); });

// The number of injection points, for the README: operations x steps x errnos.
TEST(FaultInjectionTable, CountsItsPoints) {
  size_t steps = 0, points = 0;
  for (const Row& row : fault_rows()) {
    steps += row.steps.size();
    for (Cmd command : row.steps) points += kernel_errnos(command).size();
  }
  std::printf("[   INFO   ] %zu operations, %zu steps, %zu injection points\n", fault_rows().size(),
              steps, points);
  EXPECT_GE(points, 500u) << "the table shrank";
}

// A command added to the fake (and the seam) needs its kernel errnos before
// any row can use it as a step.
TEST(FaultInjectionTable, EveryCommandHasKernelErrnos) {
  for (Cmd command : kAllCmds) {
    bool listed = false;
    try {
      listed = !kernel_errnos(command).empty();
    } catch (const std::out_of_range&) {
    }
    EXPECT_TRUE(listed) << command << " has no kernel errnos in fault_rows.cpp";
  }
}

}  // namespace
}  // namespace rdmacm::testing
