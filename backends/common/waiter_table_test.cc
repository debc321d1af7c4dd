#include "backends/common/waiter_table.h"

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
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
                                 Slot** slot_out) {
    Slot* slot = &slots_.emplace_back();
    *slot_out = slot;
    WaiterTable::Waiter w;
    w.id = ++last_id_;
    w.params.key = LockKey{"default", name};
    w.params.owner = owner;
    w.deadline = SteadyAfter(absl::Seconds(30));
    w.done = [slot](absl::StatusOr<AcquireResult> r) {
      slot->result = std::move(r);
      slot->done.Notify();
    };
    return w;
  }

  std::deque<Slot> slots_;
  uint64_t last_id_ = 0;
  WaiterTable table_;
};

TEST_F(WaiterTableTest, PushPlacesANumberedWaiterAheadOfLaterArrivals) {
  Slot *n1, *n2, *n3, *n4;
  WaiterTable::Waiter late = MakeWaiter("x", "late", &n1);
  late.arrival = 5;
  WaiterTable::Waiter early = MakeWaiter("x", "early", &n2);
  early.arrival = 3;
  WaiterTable::Waiter later = MakeWaiter("x", "later", &n3);
  later.arrival = 7;
  table_.Push(std::move(late));
  table_.Push(std::move(early));  // came back after "late" but arrived first
  table_.Push(std::move(later));
  table_.Push(MakeWaiter("x", "unnumbered", &n4));  // appended
  std::vector<std::string> order;
  while (std::optional<WaiterTable::Waiter> w = table_.PopFront(LockKey{"default", "x"})) {
    order.push_back(w->params.owner);
    std::move(w->done)(AcquireResult{});
  }
  EXPECT_THAT(order, ::testing::ElementsAre("early", "late", "later", "unnumbered"));
}

TEST_F(WaiterTableTest, PopsWaitersInArrivalOrderPerLock) {
  Slot *n1, *n2, *n3;
  table_.Push(MakeWaiter("x", "a", &n1));
  table_.Push(MakeWaiter("x", "b", &n2));
  table_.Push(MakeWaiter("y", "c", &n3));
  EXPECT_EQ(table_.Count(LockKey{"default", "x"}), 2u);
  EXPECT_EQ(table_.Total(), 3u);
  EXPECT_EQ(table_.PopFront(LockKey{"default", "x"})->params.owner, "a");
  EXPECT_EQ(table_.PopFront(LockKey{"default", "x"})->params.owner, "b");
  EXPECT_FALSE(table_.PopFront(LockKey{"default", "x"}).has_value());
  EXPECT_EQ(table_.Total(), 1u);
}

TEST_F(WaiterTableTest, PushFrontGoesBeforeEarlierWaiters) {
  Slot *n1, *n2;
  table_.Push(MakeWaiter("x", "a", &n1));
  table_.PushFront(MakeWaiter("x", "b", &n2));
  EXPECT_EQ(table_.PopFront(LockKey{"default", "x"})->params.owner, "b");
}

TEST_F(WaiterTableTest, RemoveTakesOnlyTheWaiterWithThatId) {
  Slot *n1, *n2;
  WaiterTable::Waiter a = MakeWaiter("x", "a", &n1);
  const uint64_t id = a.id;
  table_.Push(std::move(a));
  table_.Push(MakeWaiter("x", "b", &n2));
  EXPECT_FALSE(table_.Remove(LockKey{"default", "y"}, id).has_value());
  std::optional<WaiterTable::Waiter> removed = table_.Remove(LockKey{"default", "x"}, id);
  ASSERT_TRUE(removed.has_value());
  EXPECT_EQ(removed->params.owner, "a");
  EXPECT_FALSE(table_.Remove(LockKey{"default", "x"}, id).has_value());  // gone: a late stop
  EXPECT_EQ(table_.Count(LockKey{"default", "x"}), 1u);
  EXPECT_EQ(table_.PopFront(LockKey{"default", "x"})->params.owner, "b");
  EXPECT_EQ(table_.Total(), 0u);
}

TEST_F(WaiterTableTest, CancelledSaysWhetherTheWaitersSignalFired) {
  Slot* n;
  WaiterTable::Waiter w = MakeWaiter("x", "a", &n);
  EXPECT_FALSE(w.cancelled());  // no signal
  w.cancel = std::make_shared<CancelSignal>();
  EXPECT_FALSE(w.cancelled());
  w.cancel->Cancel();
  EXPECT_TRUE(w.cancelled());
}

TEST_F(WaiterTableTest, PopOwnerTakesEveryWaiterOfThatOwnerInOrderAndLeavesTheRest) {
  Slot *s1, *s2, *s3;
  auto a1 = MakeWaiter("x", "a", &s1);
  auto b = MakeWaiter("x", "b", &s2);
  auto a2 = MakeWaiter("x", "a", &s3);
  a1.params.request_id = "first";
  a2.params.request_id = "second";
  table_.Push(std::move(a1));
  table_.Push(std::move(b));
  table_.Push(std::move(a2));
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
  // Popped waiters are the caller's: the table answers none of them.
  for (auto& w : popped) std::move(w.done)(AcquireResult{});
  std::move(rest->done)(AcquireResult{});
  EXPECT_TRUE(s1->result.ok());
  EXPECT_TRUE(s2->result.ok());
  EXPECT_TRUE(s3->result.ok());
}

TEST_F(WaiterTableTest, PopOwnerWithAFilterLeavesTheOthersInPlace) {
  const LockKey x{"default", "x"};
  Slot *s1, *s2, *s3;
  auto shared = MakeWaiter("x", "a", &s1);
  shared.params.mode = LockMode::kShared;
  table_.Push(MakeWaiter("x", "a", &s2));  // exclusive, first
  table_.Push(std::move(shared));
  table_.Push(MakeWaiter("x", "b", &s3));
  std::vector<WaiterTable::Waiter> popped = table_.PopOwner(
      x, "a", [](const WaiterTable::Waiter& w) { return w.params.mode == LockMode::kShared; });
  ASSERT_EQ(popped.size(), 1u);
  EXPECT_EQ(popped[0].params.mode, LockMode::kShared);
  ASSERT_NE(table_.Front(x), nullptr);
  EXPECT_EQ(table_.Front(x)->params.owner, "a");  // the exclusive one kept its place
  EXPECT_EQ(table_.Count(x), 2u);
  EXPECT_EQ(table_.Front(LockKey{"default", "y"}), nullptr);
  std::move(popped[0].done)(AcquireResult{});
}

TEST(WaiterTableLifetimeTest, DestroyingTheTableAnswersParkedWaitersUnavailable) {
  absl::StatusOr<AcquireResult> result;
  {
    WaiterTable table;
    WaiterTable::Waiter w;
    w.id = 1;
    w.params.key = LockKey{"default", "x"};
    w.deadline = SteadyAfter(absl::Seconds(30));
    w.done = [&result](absl::StatusOr<AcquireResult> r) { result = std::move(r); };
    table.Push(std::move(w));
  }
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace lockd
