// lockd::Lockable, a lockd lock as a standard C++ mutex, with the standard
// library's lock types (std::unique_lock, std::lock_guard, std::scoped_lock)
// against a real lockd process (memory backend): exclusion between threads
// sharing one Lockable, between Lockables of one name, deadlock-free
// scoped_lock of two, timed tries, and the errors it throws.

#include "lockd/lockable.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lockd/client.h"
#include "tests/integration/clients/one_lockd.h"
#include "tests/support/process.h"
#include "tests/support/status_matchers.h"

namespace lockd {
namespace {

using ::lockd::testing::OneLockd;
using ::lockd::testing::StatusIs;

class LockableTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(lockd_.Start().ok()); }

  Client NewClient() { return lockd_.NewClient(); }

  // The owner lockd reports for `name`, or "" when it is free.
  std::string HolderOf(Client& observer, const std::string& name) {
    absl::StatusOr<LockInfo> info = observer.Describe(name);
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() && info->held ? info->owner : "";
  }

  OneLockd lockd_;
};

TEST_F(LockableTest, UniqueLockHoldsTheLockdLockForItsScope) {
  Client client = NewClient();
  Client observer = NewClient();
  Lockable orders(client, "orders/42");
  {
    std::unique_lock<Lockable> guard(orders);
    ASSERT_TRUE(guard.owns_lock());
    ASSERT_NE(orders.lease(), nullptr);
    EXPECT_TRUE(orders.lease()->valid());
    EXPECT_GT(orders.lease()->fencing_token(), 0u);
    EXPECT_EQ(HolderOf(observer, "orders/42"), orders.owner());
    guard.unlock();
    EXPECT_EQ(HolderOf(observer, "orders/42"), "");
    EXPECT_EQ(orders.lease(), nullptr);
    guard.lock();
    EXPECT_EQ(HolderOf(observer, "orders/42"), orders.owner());
  }
  EXPECT_EQ(HolderOf(observer, "orders/42"), "");
  EXPECT_TRUE(orders.last_unlock_status().ok()) << orders.last_unlock_status();
}

TEST_F(LockableTest, TwoLockablesOfOneNameExcludeEachOtherEvenOnOneClient) {
  Client client = NewClient();
  Client other_process = NewClient();
  Lockable a(client, "shared");
  Lockable b(client, "shared");  // an owner of its own: no reentrant grant
  Lockable c(other_process, "shared");
  EXPECT_NE(a.owner(), b.owner());
  std::unique_lock<Lockable> ga(a, std::try_to_lock);
  ASSERT_TRUE(ga.owns_lock());
  EXPECT_FALSE(b.try_lock());
  EXPECT_FALSE(c.try_lock());
  ga.unlock();
  std::unique_lock<Lockable> gc(c, std::try_to_lock);
  EXPECT_TRUE(gc.owns_lock());
}

// One Lockable shared by threads is a mutex: a plain counter incremented
// under std::lock_guard loses nothing and no two threads are inside at once.
TEST_F(LockableTest, ThreadsSharingOneLockableAreMutuallyExclusive) {
  Client client = NewClient();
  Lockable counter_lock(client, "counter");
  int counter = 0;  // guarded by counter_lock
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        std::lock_guard<Lockable> guard(counter_lock);
        if (inside.fetch_add(1) != 0) overlap = true;
        int seen = counter;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        counter = seen + 1;
        inside.fetch_sub(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(overlap.load());
  EXPECT_EQ(counter, 30);
}

// Threads of one process take a Lockable in the order they came: a thread
// that unlocks and locks again at once queues behind the threads already
// waiting, instead of taking it back before they run.
TEST_F(LockableTest, AThreadThatLocksAgainQueuesBehindTheWaitingThreads) {
  Client client = NewClient();
  Lockable lockable(client, "fifo");
  absl::Mutex mu;
  std::vector<std::string> order;  // guarded by mu
  auto record = [&](const std::string& who) {
    absl::MutexLock l(&mu);
    order.push_back(who);
  };
  lockable.lock();
  std::vector<std::thread> waiters;
  for (int w = 0; w < 3; ++w) {
    waiters.emplace_back([&, w] {
      std::lock_guard<Lockable> guard(lockable);
      record(absl::StrCat("waiter ", w));
    });
    absl::SleepFor(absl::Milliseconds(100));  // waiter w is queued by now
  }
  for (int i = 0; i < 5; ++i) {
    lockable.unlock();
    lockable.lock();
    record("relocker");
  }
  lockable.unlock();
  for (std::thread& t : waiters) t.join();
  absl::MutexLock l(&mu);
  EXPECT_THAT(order, ::testing::ElementsAre("waiter 0", "waiter 1", "waiter 2", "relocker",
                                            "relocker", "relocker", "relocker", "relocker"));
}

// std::scoped_lock takes several Lockables without deadlock (std::lock's
// try-and-back-off), whatever order two threads list them in.
TEST_F(LockableTest, ScopedLockOfTwoInOppositeOrdersDoesNotDeadlock) {
  Client c1 = NewClient();
  Client c2 = NewClient();
  Client observer = NewClient();
  Lockable a1(c1, "a"), b1(c1, "b");
  Lockable a2(c2, "a"), b2(c2, "b");
  std::atomic<int> rounds{0};
  auto run = [&](Lockable& first, Lockable& second) {
    for (int i = 0; i < 5; ++i) {
      std::scoped_lock both(first, second);
      EXPECT_EQ(HolderOf(observer, first.name()), first.owner());
      EXPECT_EQ(HolderOf(observer, second.name()), second.owner());
      ++rounds;
    }
  };
  std::thread t1([&] { run(a1, b1); });
  std::thread t2([&] { run(b2, a2); });
  t1.join();
  t2.join();
  EXPECT_EQ(rounds.load(), 10);
  EXPECT_EQ(HolderOf(observer, "a"), "");
  EXPECT_EQ(HolderOf(observer, "b"), "");
}

TEST_F(LockableTest, TryLockForWaitsItsBoundThenFails) {
  Client c1 = NewClient();
  Client c2 = NewClient();
  Lockable held(c1, "busy");
  Lockable wanted(c2, "busy");
  std::lock_guard<Lockable> guard(held);
  const absl::Time start = absl::Now();
  std::unique_lock<Lockable> attempt(wanted, std::chrono::milliseconds(600));
  const absl::Duration took = absl::Now() - start;
  EXPECT_FALSE(attempt.owns_lock());
  EXPECT_GE(took, absl::Milliseconds(550));
  EXPECT_LT(took, absl::Seconds(3));
  EXPECT_FALSE(wanted.try_lock_until(std::chrono::steady_clock::now()));
}

TEST_F(LockableTest, TryLockForGetsTheLockReleasedMeanwhile) {
  Client c1 = NewClient();
  Client c2 = NewClient();
  Lockable held(c1, "soon");
  Lockable wanted(c2, "soon");
  std::atomic<bool> locked{false};
  std::thread holder([&] {
    std::lock_guard<Lockable> guard(held);
    locked = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  });
  while (!locked.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // unlock() is for the holding thread: from another it does nothing.
  held.unlock();
  EXPECT_FALSE(wanted.try_lock());
  const absl::Time start = absl::Now();
  EXPECT_TRUE(wanted.try_lock_for(std::chrono::seconds(5)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  holder.join();
  wanted.unlock();
}

TEST_F(LockableTest, LockThrowsLockErrorForWhatWaitingCannotFix) {
  Client client = NewClient();
  Lockable bad(client, "");  // lockd refuses an empty name
  try {
    bad.lock();
    FAIL() << "lock() of an empty name returned";
  } catch (const LockError& e) {
    EXPECT_THAT(e.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  }
  EXPECT_THROW(bad.try_lock(), LockError);
  // Not held after a throw: unlock() is a no-op.
  bad.unlock();

  Lockable twice(client, "twice");
  twice.lock();
  try {
    twice.lock();
    FAIL() << "a second lock() by the holding thread returned";
  } catch (const LockError& e) {
    EXPECT_THAT(e.status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  }
  twice.unlock();
}

TEST_F(LockableTest, CancelStopsALockThatWaits) {
  Client c1 = NewClient();
  Client c2 = NewClient();
  Lockable held(c1, "stuck");
  std::lock_guard<Lockable> guard(held);
  AcquireOptions options;
  CancellationToken cancel;
  options.cancel = cancel;
  Lockable waiting(c2, "stuck", options);
  std::optional<absl::Status> thrown;
  std::thread t([&] {
    try {
      waiting.lock();
      thrown = absl::OkStatus();
    } catch (const LockError& e) {
      thrown = e.status();
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  cancel.Cancel();
  t.join();
  ASSERT_TRUE(thrown.has_value());
  EXPECT_THAT(*thrown, StatusIs(absl::StatusCode::kCancelled));
}

TEST_F(LockableTest, UnlockOfALostLeaseDoesNotThrowAndSaysWhy) {
  Client client = NewClient();
  Client admin = NewClient();
  Lockable lockable(client, "forced");
  lockable.lock();
  ASSERT_TRUE(admin.ForceRelease("forced", "test").ok());
  lockable.unlock();  // noexcept
  EXPECT_TRUE(IsLockLost(lockable.last_unlock_status())) << lockable.last_unlock_status();
  EXPECT_TRUE(lockable.try_lock());
  lockable.unlock();
}

}  // namespace
}  // namespace lockd
