#include "backends/common/waiter_table.h"

#include <atomic>
#include <deque>
#include <memory>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace lockd {
namespace {

using ::lockd::testing::StatusIs;

class WaiterTableTest : public ::testing::Test {
 protected:
  // Where a waiter's answer lands. Owned by the fixture and declared before
  // the table, so that waiters the table still holds when it is destroyed
  // (answered UNAVAILABLE) write into live memory.
  struct Slot {
    absl::StatusOr<AcquireResult> result;
    absl::Notification done;
  };

  WaiterTable::Waiter MakeWaiter(const std::string& name, const std::string& owner,
                                 absl::Duration wait, Slot** slot_out,
                                 std::shared_ptr<CancelSignal> cancel = nullptr) {
    Slot* slot = &slots_.emplace_back();
    *slot_out = slot;
    WaiterTable::Waiter w;
    w.params.key = LockKey{"default", name};
    w.params.owner = owner;
    w.cancel = std::move(cancel);
    w.deadline = SteadyAfter(wait);
    w.done = [slot](absl::StatusOr<AcquireResult> r) {
      slot->result = std::move(r);
      slot->done.Notify();
    };
    return w;
  }

  std::deque<Slot> slots_;
  TimerQueue timers_;
  std::atomic<int> timeouts_{0};
  WaiterTable table_{&timers_, 3, [this](WaiterTable::Waiter w) {
                       ++timeouts_;
                       AcquireResult r;
                       r.acquired = false;
                       std::move(w.done)(r);
                     }};
};

TEST_F(WaiterTableTest, PopsWaitersInArrivalOrderPerLock) {
  Slot *n1, *n2, *n3;
  auto a = MakeWaiter("x", "a", absl::Seconds(30), &n1);
  auto b = MakeWaiter("x", "b", absl::Seconds(30), &n2);
  auto c = MakeWaiter("y", "c", absl::Seconds(30), &n3);
  ASSERT_TRUE(table_.Park(a).ok());
  ASSERT_TRUE(table_.Park(b).ok());
  ASSERT_TRUE(table_.Park(c).ok());
  EXPECT_EQ(table_.Count(LockKey{"default", "x"}), 2u);
  EXPECT_EQ(table_.Total(), 3u);
  EXPECT_EQ(table_.PopFront(LockKey{"default", "x"})->params.owner, "a");
  EXPECT_EQ(table_.PopFront(LockKey{"default", "x"})->params.owner, "b");
  EXPECT_FALSE(table_.PopFront(LockKey{"default", "x"}).has_value());
  EXPECT_EQ(table_.Total(), 1u);
}

TEST_F(WaiterTableTest, ParkAtFrontGoesBeforeEarlierWaiters) {
  Slot *n1, *n2;
  auto a = MakeWaiter("x", "a", absl::Seconds(30), &n1);
  auto b = MakeWaiter("x", "b", absl::Seconds(30), &n2);
  ASSERT_TRUE(table_.Park(a).ok());
  ASSERT_TRUE(table_.Park(b, /*front=*/true).ok());
  EXPECT_EQ(table_.PopFront(LockKey{"default", "x"})->params.owner, "b");
}

TEST_F(WaiterTableTest, DeadlineRemovesWaiterAndCallsTimeout) {
  Slot* n;
  auto a = MakeWaiter("x", "a", absl::Milliseconds(50), &n);
  ASSERT_TRUE(table_.Park(a).ok());
  ASSERT_TRUE(n->done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(n->result.ok());
  EXPECT_FALSE(n->result->acquired);
  EXPECT_EQ(timeouts_.load(), 1);
  EXPECT_EQ(table_.Count(LockKey{"default", "x"}), 0u);
}

TEST_F(WaiterTableTest, PoppedWaiterNoLongerTimesOut) {
  Slot* n;
  auto a = MakeWaiter("x", "a", absl::Milliseconds(50), &n);
  ASSERT_TRUE(table_.Park(a).ok());
  auto w = table_.PopFront(LockKey{"default", "x"});
  ASSERT_TRUE(w.has_value());
  absl::SleepFor(absl::Milliseconds(150));
  EXPECT_EQ(timeouts_.load(), 0);
  EXPECT_FALSE(n->done.HasBeenNotified());
}

TEST_F(WaiterTableTest, CancelRemovesWaiterAndAnswersCancelled) {
  auto cancel = std::make_shared<CancelSignal>();
  Slot* n;
  auto a = MakeWaiter("x", "a", absl::Seconds(30), &n, cancel);
  ASSERT_TRUE(table_.Park(a).ok());
  cancel->Cancel();
  ASSERT_TRUE(n->done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_THAT(n->result, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(table_.Total(), 0u);
}

TEST_F(WaiterTableTest, AlreadyCancelledWaiterIsNotParked) {
  auto cancel = std::make_shared<CancelSignal>();
  cancel->Cancel();
  Slot* n;
  auto a = MakeWaiter("x", "a", absl::Seconds(30), &n, cancel);
  EXPECT_THAT(table_.Park(a), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_TRUE(static_cast<bool>(a.done)) << "a refused waiter must be left to the caller";
  EXPECT_EQ(table_.Total(), 0u);
}

// The table hooks a signal while holding its own lock (and its caller's), so
// a signal that has fired must refuse the hook rather than run it there.
TEST(CancelSignalTest, FiredSignalRefusesALaterCallbackWithoutRunningIt) {
  CancelSignal cancel;
  int runs = 0;
  EXPECT_TRUE(cancel.SetCallback([&] { ++runs; }));
  cancel.Cancel();
  EXPECT_EQ(runs, 1);
  EXPECT_FALSE(cancel.SetCallback([&] { ++runs; }));
  cancel.Cancel();
  EXPECT_EQ(runs, 1);
}

TEST_F(WaiterTableTest, FullTableRefusesWithResourceExhausted) {
  Slot* slot[4];
  for (int i = 0; i < 3; ++i) {
    auto w = MakeWaiter("x", "w", absl::Seconds(30), &slot[i]);
    ASSERT_TRUE(table_.Park(w).ok());
  }
  auto extra = MakeWaiter("y", "w", absl::Seconds(30), &slot[3]);
  EXPECT_THAT(table_.Park(extra), StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST_F(WaiterTableTest, CloseReturnsEveryWaiterAndRefusesMore) {
  Slot *n1, *n2, *n3;
  auto a = MakeWaiter("x", "a", absl::Seconds(30), &n1);
  auto b = MakeWaiter("y", "b", absl::Seconds(30), &n2);
  ASSERT_TRUE(table_.Park(a).ok());
  ASSERT_TRUE(table_.Park(b).ok());
  std::vector<WaiterTable::Waiter> all = table_.Close();
  EXPECT_EQ(all.size(), 2u);
  auto c = MakeWaiter("x", "c", absl::Seconds(30), &n3);
  EXPECT_THAT(table_.Park(c), StatusIs(absl::StatusCode::kUnavailable));
  for (auto& w : all) std::move(w.done)(ShuttingDownError());
}

TEST_F(WaiterTableTest, PopOwnerTakesEveryWaiterOfThatOwnerInOrderAndLeavesTheRest) {
  Slot *s1, *s2, *s3;
  auto a1 = MakeWaiter("x", "a", absl::Seconds(30), &s1);
  auto b = MakeWaiter("x", "b", absl::Seconds(30), &s2);
  auto a2 = MakeWaiter("x", "a", absl::Seconds(30), &s3);
  a1.params.request_id = "first";
  a2.params.request_id = "second";
  ASSERT_TRUE(table_.Park(a1).ok());
  ASSERT_TRUE(table_.Park(b).ok());
  ASSERT_TRUE(table_.Park(a2).ok());
  std::vector<WaiterTable::Waiter> popped = table_.PopOwner(LockKey{"default", "x"}, "a");
  ASSERT_EQ(popped.size(), 2u);
  EXPECT_EQ(popped[0].params.request_id, "first");
  EXPECT_EQ(popped[1].params.request_id, "second");
  EXPECT_EQ(table_.Count(LockKey{"default", "x"}), 1u);
  EXPECT_EQ(table_.Total(), 1u);
  EXPECT_TRUE(table_.PopOwner(LockKey{"default", "x"}, "a").empty());
  std::optional<WaiterTable::Waiter> rest = table_.PopFront(LockKey{"default", "x"});
  ASSERT_TRUE(rest.has_value());
  EXPECT_EQ(rest->params.owner, "b");
  // Popped waiters are disarmed: their deadlines no longer fire.
  for (auto& w : popped) std::move(w.done)(AcquireResult{});
  std::move(rest->done)(AcquireResult{});
  EXPECT_EQ(timeouts_.load(), 0);
}

TEST(WaiterTableLifetimeTest, DestroyingTheTableAnswersParkedWaitersUnavailable) {
  absl::StatusOr<AcquireResult> result;
  TimerQueue timers;
  {
    WaiterTable table(&timers, 10, [](WaiterTable::Waiter) {});
    WaiterTable::Waiter w;
    w.params.key = LockKey{"default", "x"};
    w.deadline = SteadyAfter(absl::Seconds(30));
    w.done = [&result](absl::StatusOr<AcquireResult> r) { result = std::move(r); };
    ASSERT_TRUE(table.Park(w).ok());
  }
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace lockd
