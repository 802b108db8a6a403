// Which data messages are signalled (src/rsocket/send_signal.h).
#include "rsocket/send_signal.h"

#include <gtest/gtest.h>

namespace rdmacm::rsocket {
namespace {

constexpr uint32_t kSbuf = 128 * 1024;
constexpr int kSq = 384;

// rstream's and iperf3's 64 KiB sends into the default 128 KiB send buffer:
// each is signalled, so the first one's completion frees room while the
// second is still on the wire (signalling only the second one made the
// sender wait for both).
TEST(SendSignal, EachWriteThatLeavesHalfTheBufferUsedOrMoreIsSignalled) {
  EXPECT_TRUE(signal_data({1, kSq - 1, kSq, static_cast<int>(kSbuf / 2), kSbuf, true}));
  EXPECT_TRUE(signal_data({1, kSq - 2, kSq, 0, kSbuf, true}));
  EXPECT_TRUE(signal_data({1, kSq / 2, kSq, static_cast<int>(kSbuf) - 64, kSbuf, true}));
}

// Small messages with room to spare: one in kSignalEvery, or the last
// control slot.
TEST(SendSignal, SmallMessagesWithRoomAreQuietButOneInSixtyFour) {
  EXPECT_FALSE(signal_data({1, kSq - 1, kSq, static_cast<int>(kSbuf) - 64, kSbuf, true}));
  EXPECT_FALSE(signal_data({kSignalEvery - 1, kSq - 1, kSq, static_cast<int>(kSbuf / 2) + 1, kSbuf, true}));
  EXPECT_TRUE(signal_data({kSignalEvery, kSq - 1, kSq, static_cast<int>(kSbuf) - 64, kSbuf, true}));
  EXPECT_TRUE(signal_data({1, kSq - 1, kSq, static_cast<int>(kSbuf) - 64, kSbuf, false}));
}

}  // namespace
}  // namespace rdmacm::rsocket
