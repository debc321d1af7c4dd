#include "backends/common/timer_queue.h"

#include <atomic>
#include <mutex>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace lockd {
namespace {

TEST(TimerQueueTest, RunsCallbacksInDeadlineOrder) {
  TimerQueue q;
  std::mutex mu;
  std::vector<int> order;
  absl::Notification done;
  q.Schedule(absl::Milliseconds(60), [&] {
    std::lock_guard<std::mutex> l(mu);
    order.push_back(3);
    done.Notify();
  });
  q.Schedule(absl::Milliseconds(20), [&] {
    std::lock_guard<std::mutex> l(mu);
    order.push_back(1);
  });
  q.Schedule(absl::Milliseconds(40), [&] {
    std::lock_guard<std::mutex> l(mu);
    order.push_back(2);
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  std::lock_guard<std::mutex> l(mu);
  EXPECT_EQ(order, std::vector<int>({1, 2, 3}));
}

TEST(TimerQueueTest, DoesNotRunBeforeTheDelay) {
  TimerQueue q;
  absl::Notification done;
  absl::Time start = absl::Now();
  absl::Time ran;
  q.Schedule(absl::Milliseconds(100), [&] {
    ran = absl::Now();
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_GE(ran - start, absl::Milliseconds(95));
}

TEST(TimerQueueTest, CancelledTimerNeverRuns) {
  TimerQueue q;
  std::atomic<bool> ran{false};
  TimerQueue::TimerId id = q.Schedule(absl::Milliseconds(50), [&] { ran = true; });
  EXPECT_TRUE(q.Cancel(id));
  EXPECT_FALSE(q.Cancel(id));
  absl::SleepFor(absl::Milliseconds(150));
  EXPECT_FALSE(ran.load());
  EXPECT_EQ(q.size(), 0u);
}

TEST(TimerQueueTest, EarlierTimerAddedLaterWakesTheThread) {
  TimerQueue q;
  absl::Notification early;
  q.Schedule(absl::Seconds(30), [] {});
  absl::Time start = absl::Now();
  q.Schedule(absl::Milliseconds(10), [&] { early.Notify(); });
  ASSERT_TRUE(early.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

TEST(TimerQueueTest, DestructionDropsPendingTimers) {
  std::atomic<bool> ran{false};
  {
    TimerQueue q;
    q.Schedule(absl::Seconds(30), [&] { ran = true; });
  }
  EXPECT_FALSE(ran.load());
}

}  // namespace
}  // namespace lockd
