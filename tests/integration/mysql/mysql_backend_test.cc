// The mysql backend in-process (through the Backend interface) against a
// private MariaDB server: storage details, waiting and wake-ups, several
// replicas on one database, schema start-up, errors, fence collection.
// Rules that every backend shares are in tests/conformance.

#include "backends/mysql/mysql_backend.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/mysql/mysql_backend_fixture.h"
#include "tests/support/status_matchers.h"
#include "tests/support/sync_backend.h"

namespace lockd::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

void WaitForLocalWaiters(Backend& b, const std::string& name, uint32_t n) {
  bool ok = WaitFor(
      [&] {
        absl::StatusOr<LockState> s = SyncDescribe(b, LockKey{"default", name});
        return s.ok() && s->waiters == n;
      },
      absl::Seconds(10), absl::Milliseconds(2));
  ASSERT_TRUE(ok) << "waiters on " << name << " never reached " << n;
}

TEST_F(MysqlBackendTest, GrantReenterReleaseAndTokensKeepGrowing) {
  auto b = NewBackend();
  ASSERT_NE(b, nullptr);
  absl::StatusOr<AcquireResult> a = SyncAcquire(*b, Acq("a", "o1"));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(a->acquired);
  EXPECT_EQ(a->hold_count, 1u);
  uint64_t first = a->fencing_token;

  a = SyncAcquire(*b, Acq("a", "o1"));
  ASSERT_TRUE(a.ok() && a->acquired);
  EXPECT_EQ(a->hold_count, 2u);
  EXPECT_EQ(a->fencing_token, first);

  a = SyncAcquire(*b, Acq("a", "o2"));
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->acquired);
  EXPECT_TRUE(a->current.held);
  EXPECT_EQ(a->current.owner, "o1");
  EXPECT_EQ(a->current.hold_count, 2u);
  EXPECT_EQ(a->current.fencing_token, first);
  EXPECT_GT(a->current.ttl_remaining, absl::Seconds(29));

  absl::StatusOr<ReleaseResult> r = SyncRelease(*b, Rel("a", "o2"));
  EXPECT_THAT(r, IsLockNotHeld());
  r = SyncRelease(*b, Rel("a", "o1"));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->released);
  EXPECT_EQ(r->hold_count, 1u);
  r = SyncRelease(*b, Rel("a", "o1"));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->released);
  EXPECT_EQ(QueryInt(absl::StrCat("SELECT COUNT(*) FROM ", prefix_, "locks")), 0)
      << "a released lock leaves no row";

  a = SyncAcquire(*b, Acq("a", "o2"));
  ASSERT_TRUE(a.ok() && a->acquired);
  EXPECT_GT(a->fencing_token, first);
}

TEST_F(MysqlBackendTest, NamesWithSqlSpecialBytesRoundTripExactly) {
  auto b = NewBackend();
  ASSERT_NE(b, nullptr);
  const std::vector<std::string> names = {"it's",         "back\\slash",
                                          "100%_done",    "quote\"d",
                                          " spaced ",     "\xC3\xBC/\xF0\x9F\x99\x82",
                                          "semi;colon--", "X'41'"};
  for (const std::string& n : names) {
    absl::StatusOr<AcquireResult> a = SyncAcquire(*b, Acq(n, "owner'; DROP TABLE x; --"));
    ASSERT_TRUE(a.ok() && a->acquired) << n;
    absl::StatusOr<LockState> s = SyncDescribe(*b, LockKey{"default", n});
    ASSERT_TRUE(s.ok());
    EXPECT_TRUE(s->held) << n;
    EXPECT_EQ(s->owner, "owner'; DROP TABLE x; --");
  }
  ListParams p;
  p.ns = "default";
  p.page_size = 100;
  absl::StatusOr<ListResult> l = SyncList(*b, p);
  ASSERT_TRUE(l.ok());
  std::vector<std::string> listed;
  for (const LockState& s : l->locks) listed.push_back(s.key.name);
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(listed, sorted) << "List returns every name, bytewise ordered";
}

TEST_F(MysqlBackendTest, ListTreatsLikeWildcardsLiterallyAndPages) {
  auto b = NewBackend();
  ASSERT_NE(b, nullptr);
  for (const char* n : {"a%1", "a_2", "ab3", "a!4", "ax5", "b"}) {
    ASSERT_TRUE(SyncAcquire(*b, Acq(n, "o")).value().acquired);
  }
  auto list = [&](const std::string& prefix, uint32_t page_size, const std::string& token) {
    ListParams p;
    p.ns = "default";
    p.prefix = prefix;
    p.page_size = page_size;
    p.page_token = token;
    absl::StatusOr<ListResult> r = SyncList(*b, p);
    EXPECT_TRUE(r.ok()) << r.status();
    std::vector<std::string> names;
    if (r.ok()) {
      for (const LockState& s : r->locks) names.push_back(s.key.name);
      names.push_back("next=" + r->next_page_token);
    }
    return names;
  };
  EXPECT_THAT(list("a%", 10, ""), ElementsAre("a%1", "next="));
  EXPECT_THAT(list("a_", 10, ""), ElementsAre("a_2", "next="));
  EXPECT_THAT(list("a!", 10, ""), ElementsAre("a!4", "next="));
  EXPECT_THAT(list("a", 2, ""), ElementsAre("a!4", "a%1", "next=a%1"));
  EXPECT_THAT(list("a", 2, "a%1"), ElementsAre("a_2", "ab3", "next=ab3"));
  EXPECT_THAT(list("a", 2, "ab3"), ElementsAre("ax5", "next="));
}

TEST_F(MysqlBackendTest, FirstGrantRaceAcrossReplicasGrantsExactlyOnce) {
  std::vector<std::unique_ptr<Backend>> replicas;
  for (int i = 0; i < 3; ++i) {
    replicas.push_back(NewBackend());
    ASSERT_NE(replicas.back(), nullptr);
  }
  constexpr int kNames = 20;
  constexpr int kThreads = 12;
  std::atomic<int> granted[kNames] = {};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Backend& b = *replicas[t % replicas.size()];
      for (int n = 0; n < kNames; ++n) {
        absl::StatusOr<AcquireResult> a =
            SyncAcquire(b, Acq(absl::StrCat("race-", n), absl::StrCat("owner-", t)));
        if (!a.ok()) {
          ++errors;
          ADD_FAILURE() << a.status();
        } else if (a->acquired) {
          ++granted[n];
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  for (int n = 0; n < kNames; ++n) EXPECT_EQ(granted[n].load(), 1) << "race-" << n;
}

TEST_F(MysqlBackendTest, ReleaseThroughThisReplicaWakesTheLocalWaiterAtOnce) {
  auto b = NewBackend();
  ASSERT_NE(b, nullptr);
  std::vector<absl::Duration> handoffs;
  std::string holder = "h0";
  ASSERT_TRUE(SyncAcquire(*b, Acq("wake", holder)).value().acquired);
  for (int i = 1; i <= 40; ++i) {
    std::string next = absl::StrCat("h", i);
    auto waiter = StartAcquire(*b, Acq("wake", next, absl::Seconds(30), absl::Seconds(10)));
    WaitForLocalWaiters(*b, "wake", 1);
    // Let the waiter's backoff grow past the first polls, so that only the
    // wake-up can explain a fast grant.
    absl::SleepFor(absl::Milliseconds(20));
    absl::Time start = absl::Now();
    ASSERT_TRUE(SyncRelease(*b, Rel("wake", holder)).value().released);
    absl::StatusOr<AcquireResult> a = waiter->Wait();
    handoffs.push_back(absl::Now() - start);
    ASSERT_TRUE(a.ok() && a->acquired) << a.status();
    holder = next;
  }
  std::sort(handoffs.begin(), handoffs.end());
  absl::Duration p50 = handoffs[handoffs.size() / 2];
  absl::Duration p90 = handoffs[handoffs.size() * 9 / 10];
  std::cout << "release-to-grant handoff through one replica: p50 " << p50 << ", p90 " << p90
            << ", max " << handoffs.back() << "\n";
  EXPECT_LT(p50, absl::Milliseconds(10));
}

TEST_F(MysqlBackendTest, WaiterOnAnotherReplicaGetsTheLockWithinTheBackoffCap) {
  auto a = NewBackend();
  auto b = NewBackend();
  ASSERT_TRUE(a && b);
  std::vector<absl::Duration> handoffs;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(SyncAcquire(*a, Acq("remote", "holder")).value().acquired);
    auto waiter = StartAcquire(*b, Acq("remote", "waiter", absl::Seconds(30), absl::Seconds(10)));
    WaitForLocalWaiters(*b, "remote", 1);
    absl::SleepFor(absl::Milliseconds(300));  // backoff at its cap
    absl::Time start = absl::Now();
    ASSERT_TRUE(SyncRelease(*a, Rel("remote", "holder")).value().released);
    absl::StatusOr<AcquireResult> r = waiter->Wait();
    handoffs.push_back(absl::Now() - start);
    ASSERT_TRUE(r.ok() && r->acquired);
    ASSERT_TRUE(SyncRelease(*b, Rel("remote", "waiter")).value().released);
  }
  std::sort(handoffs.begin(), handoffs.end());
  std::cout << "cross-replica handoff: median " << handoffs[2] << ", max " << handoffs.back()
            << "\n";
  // The cap is 50 ms with +25% jitter; allow for a busy machine (a median
  // under 250 ms still rules out a backoff that kept growing past its cap).
  EXPECT_LT(handoffs[2], absl::Milliseconds(250));
}

TEST_F(MysqlBackendTest, ReplicasTakeTurnsUnderSustainedContention) {
  // Four clients on each of two replicas keep one lock busy. Local hand-offs
  // alone would keep it on one replica while that replica's queue never
  // drains; the replicas must take turns.
  std::vector<std::unique_ptr<Backend>> replicas;
  for (int i = 0; i < 2; ++i) {
    replicas.push_back(NewBackend());
    ASSERT_NE(replicas.back(), nullptr);
  }
  std::atomic<int64_t> grants[2] = {};
  std::atomic<int64_t> max_wait_ms{0};
  std::atomic<int> errors{0};
  const absl::Time end = absl::Now() + absl::Seconds(3);
  std::vector<std::thread> threads;
  for (int c = 0; c < 8; ++c) {
    threads.emplace_back([&, c] {
      Backend& b = *replicas[c % 2];
      std::string owner = absl::StrCat("c", c);
      while (absl::Now() < end) {
        absl::Time start = absl::Now();
        absl::StatusOr<AcquireResult> a =
            SyncAcquire(b, Acq("turns", owner, absl::Seconds(30), absl::Seconds(10)));
        int64_t waited = absl::ToInt64Milliseconds(absl::Now() - start);
        int64_t seen = max_wait_ms.load();
        while (waited > seen && !max_wait_ms.compare_exchange_weak(seen, waited)) {
        }
        if (!a.ok() || !a->acquired) {
          ++errors;
          continue;
        }
        ++grants[c % 2];
        absl::SleepFor(absl::Microseconds(500));
        if (!SyncRelease(b, Rel("turns", owner)).ok()) ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  int64_t total = grants[0] + grants[1];
  std::cout << "grants per replica: " << grants[0] << " / " << grants[1] << ", longest wait "
            << max_wait_ms << " ms\n";
  EXPECT_EQ(errors.load(), 0);
  EXPECT_GT(total, 100);
  EXPECT_GT(std::min(grants[0].load(), grants[1].load()), total / 5)
      << "one replica starved the other";
  EXPECT_LT(max_wait_ms.load(), 2000);
}

TEST_F(MysqlBackendTest, WaiterGetsTheLockRightAfterTheLeaseEnds) {
  auto a = NewBackend();
  auto b = NewBackend();
  ASSERT_TRUE(a && b);
  absl::Time granted = absl::Now();
  ASSERT_TRUE(SyncAcquire(*a, Acq("expiry", "crashed", absl::Milliseconds(300))).value().acquired);
  absl::StatusOr<AcquireResult> r =
      SyncAcquire(*b, Acq("expiry", "waiter", absl::Seconds(30), absl::Seconds(10)));
  absl::Duration waited = absl::Now() - granted;
  ASSERT_TRUE(r.ok() && r->acquired);
  EXPECT_GE(waited, absl::Milliseconds(250));
  EXPECT_LT(waited, absl::Milliseconds(300 + 100)) << "granted long after the lease ended";
}

TEST_F(MysqlBackendTest, LocalWaitersAreGrantedInArrivalOrderAndNewcomersDoNotBarge) {
  auto b = NewBackend();
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(SyncAcquire(*b, Acq("fifo", "holder")).value().acquired);
  std::mutex mu;
  std::vector<std::string> order;
  std::vector<std::future<void>> done;
  for (int i = 0; i < 5; ++i) {
    std::string owner = absl::StrCat("w", i);
    auto promise = std::make_shared<std::promise<void>>();
    done.push_back(promise->get_future());
    b->Acquire(Acq("fifo", owner, absl::Seconds(30), absl::Seconds(20)), nullptr,
               [&, owner, promise](absl::StatusOr<AcquireResult> r) {
                 EXPECT_TRUE(r.ok() && r->acquired) << owner;
                 {
                   std::lock_guard<std::mutex> l(mu);
                   order.push_back(owner);
                 }
                 promise->set_value();
               });
    WaitForLocalWaiters(*b, "fifo", static_cast<uint32_t>(i + 1));
  }
  ASSERT_TRUE(SyncRelease(*b, Rel("fifo", "holder")).value().released);
  // The old holder wants it back at once: it queues behind the five.
  auto again = StartAcquire(*b, Acq("fifo", "holder", absl::Seconds(30), absl::Seconds(20)));
  for (int i = 0; i < 5; ++i) {
    done[i].wait();
    ASSERT_TRUE(SyncRelease(*b, Rel("fifo", absl::StrCat("w", i))).value().released);
  }
  absl::StatusOr<AcquireResult> r = again->Wait();
  ASSERT_TRUE(r.ok() && r->acquired);
  EXPECT_THAT(order, ElementsAre("w0", "w1", "w2", "w3", "w4"));
}

TEST_F(MysqlBackendTest, TooManyWaitersIsResourceExhausted) {
  MysqlOptions o = Options();
  o.max_waiters = 2;
  auto b = NewBackend(o);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(SyncAcquire(*b, Acq("full", "holder")).value().acquired);
  auto w1 = StartAcquire(*b, Acq("full", "w1", absl::Seconds(30), absl::Seconds(2)));
  auto w2 = StartAcquire(*b, Acq("full", "w2", absl::Seconds(30), absl::Seconds(2)));
  WaitForLocalWaiters(*b, "full", 2);
  absl::StatusOr<AcquireResult> r =
      SyncAcquire(*b, Acq("full", "w3", absl::Seconds(30), absl::Seconds(2)));
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kResourceExhausted));
  // A try-once call never parks, so it is still answered.
  r = SyncAcquire(*b, Acq("full", "w4"));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->acquired);
  EXPECT_EQ(r->current.owner, "holder");
  EXPECT_FALSE(w1->Wait().value().acquired);
  EXPECT_FALSE(w2->Wait().value().acquired);
}

TEST_F(MysqlBackendTest, WaitEndsAtTheDeadlineWithTheHolderDescribed) {
  auto b = NewBackend();
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(SyncAcquire(*b, Acq("deadline", "holder")).value().acquired);
  absl::Time start = absl::Now();
  absl::StatusOr<AcquireResult> r =
      SyncAcquire(*b, Acq("deadline", "w", absl::Seconds(30), absl::Milliseconds(300)));
  absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->acquired);
  EXPECT_EQ(r->current.owner, "holder");
  EXPECT_TRUE(r->current.held);
  EXPECT_GE(took, absl::Milliseconds(300));
  EXPECT_LT(took, absl::Milliseconds(600));
}

TEST_F(MysqlBackendTest, CancelledWaiterIsAnsweredCancelledAndHoldsNothing) {
  auto b = NewBackend();
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(SyncAcquire(*b, Acq("cancel", "holder")).value().acquired);
  auto cancel = std::make_shared<CancelSignal>();
  auto w = StartAcquire(*b, Acq("cancel", "w", absl::Seconds(30), absl::Seconds(20)), cancel);
  WaitForLocalWaiters(*b, "cancel", 1);
  absl::SleepFor(absl::Milliseconds(100));  // through several polls
  cancel->Cancel();
  absl::StatusOr<AcquireResult> r = w->Wait();
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kCancelled));
  ASSERT_TRUE(SyncRelease(*b, Rel("cancel", "holder")).value().released);
  absl::StatusOr<LockState> s = SyncDescribe(*b, LockKey{"default", "cancel"});
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->held);
  EXPECT_EQ(s->waiters, 0u);
}

TEST_F(MysqlBackendTest, ShutdownAnswersParkedWaitersUnavailable) {
  auto b = NewBackend();
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(SyncAcquire(*b, Acq("shutdown", "holder")).value().acquired);
  auto w = StartAcquire(*b, Acq("shutdown", "w", absl::Seconds(30), absl::Seconds(20)));
  WaitForLocalWaiters(*b, "shutdown", 1);
  b->Shutdown();
  EXPECT_THAT(w->Wait(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(SyncAcquire(*b, Acq("x", "o")), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(b->Health(), StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(MysqlBackendTest, RequestIdRetriesAnswerTheFirstResult) {
  MysqlOptions o = Options();
  o.release_memory = absl::Milliseconds(500);
  auto b = NewBackend(o);
  ASSERT_NE(b, nullptr);
  AcquireResult first =
      SyncAcquire(*b, Acq("rid", "o", absl::Seconds(30), absl::ZeroDuration(), "r1")).value();
  AcquireResult again =
      SyncAcquire(*b, Acq("rid", "o", absl::Seconds(10), absl::ZeroDuration(), "r1")).value();
  EXPECT_TRUE(again.acquired);
  EXPECT_EQ(again.hold_count, 1u);
  EXPECT_EQ(again.fencing_token, first.fencing_token);
  EXPECT_EQ(again.ttl, absl::Seconds(30));
  ASSERT_EQ(SyncAcquire(*b, Acq("rid", "o", absl::Seconds(30), absl::ZeroDuration(), "r2"))
                .value()
                .hold_count,
            2u);
  ReleaseResult r = SyncRelease(*b, Rel("rid", "o", "x1")).value();
  EXPECT_EQ(r.hold_count, 1u);
  r = SyncRelease(*b, Rel("rid", "o", "x1")).value();
  EXPECT_EQ(r.hold_count, 1u) << "a repeated release must not decrement twice";
  r = SyncRelease(*b, Rel("rid", "o", "x2")).value();
  EXPECT_TRUE(r.released);
  r = SyncRelease(*b, Rel("rid", "o", "x2")).value();
  EXPECT_TRUE(r.released) << "a repeated freeing release answers the same";
  EXPECT_THAT(SyncRelease(*b, Rel("rid", "other", "x2")), IsLockNotHeld());
  absl::SleepFor(absl::Milliseconds(600));
  EXPECT_THAT(SyncRelease(*b, Rel("rid", "o", "x2")), IsLockNotHeld())
      << "remembered only for release_memory";
}

TEST_F(MysqlBackendTest, SweeperDeletesExpiredRowsOnly) {
  MysqlOptions o = Options();
  o.sweep_interval = absl::Milliseconds(20);
  auto b = NewBackend(o);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(SyncAcquire(*b, Acq("short", "o", absl::Milliseconds(100))).value().acquired);
  ASSERT_TRUE(SyncAcquire(*b, Acq("long", "o", absl::Seconds(60))).value().acquired);
  std::string count = absl::StrCat("SELECT COUNT(*) FROM ", prefix_, "locks");
  EXPECT_TRUE(WaitFor([&] { return QueryInt(count) == 1; }, absl::Seconds(5)));
  absl::StatusOr<LockState> s = SyncDescribe(*b, LockKey{"default", "long"});
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->held);
  EXPECT_EQ(QueryInt(absl::StrCat("SELECT COUNT(*) FROM ", prefix_, "fences")), 2)
      << "fencing counters survive the sweeper";
}

TEST_F(MysqlBackendTest, CollectedFenceCountersNeverLetTokensGoBack) {
  MysqlOptions o = Options();
  o.sweep_interval = absl::Milliseconds(20);
  o.fence_retention = absl::Milliseconds(300);
  auto b = NewBackend(o);
  ASSERT_NE(b, nullptr);
  uint64_t token = 0;
  for (int i = 0; i < 3; ++i) {
    AcquireResult a = SyncAcquire(*b, Acq("gc", "o")).value();
    ASSERT_TRUE(a.acquired);
    EXPECT_GT(a.fencing_token, token);
    token = a.fencing_token;
    ASSERT_TRUE(SyncRelease(*b, Rel("gc", "o")).value().released);
  }
  // A held lock's counter may be collected too; its next grant still grows.
  AcquireResult held = SyncAcquire(*b, Acq("gc-held", "o")).value();
  ASSERT_TRUE(held.acquired);
  std::string fences = absl::StrCat("SELECT COUNT(*) FROM ", prefix_, "fences");
  ASSERT_TRUE(WaitFor([&] { return QueryInt(fences) == 0; }, absl::Seconds(10)))
      << "idle counters were not collected";
  EXPECT_GE(QueryInt(absl::StrCat("SELECT v FROM ", prefix_, "meta WHERE k = 'fence_floor'")),
            static_cast<int64_t>(std::max(token, held.fencing_token)));
  AcquireResult a = SyncAcquire(*b, Acq("gc", "o")).value();
  ASSERT_TRUE(a.acquired);
  EXPECT_GT(a.fencing_token, token);
  ASSERT_TRUE(SyncRelease(*b, Rel("gc-held", "o")).value().released);
  a = SyncAcquire(*b, Acq("gc-held", "o")).value();
  ASSERT_TRUE(a.acquired);
  EXPECT_GT(a.fencing_token, held.fencing_token);
}

TEST_F(MysqlBackendTest, SchemaStartUpIsIdempotent) {
  auto first = NewBackend();
  ASSERT_NE(first, nullptr);
  uint64_t token = SyncAcquire(*first, Acq("keep", "o")).value().fencing_token;
  first.reset();
  auto second = NewBackend();
  ASSERT_NE(second, nullptr);
  absl::StatusOr<LockState> s = SyncDescribe(*second, LockKey{"default", "keep"});
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->held) << "a restart of lockd keeps the locks";
  EXPECT_EQ(s->fencing_token, token);
  EXPECT_EQ(QueryInt(absl::StrCat("SELECT COUNT(*) FROM information_schema.TABLES WHERE "
                                  "TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE '",
                                  prefix_, "%'")),
            7);
  EXPECT_EQ(QueryInt(absl::StrCat("SELECT COUNT(*) FROM information_schema.ROUTINES WHERE "
                                  "ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME LIKE '",
                                  prefix_, "%'")),
            5);
}

TEST_F(MysqlBackendTest, ReplicasStartingAtOnceAllSucceed) {
  constexpr int kReplicas = 6;
  std::vector<std::thread> threads;
  std::vector<absl::StatusOr<std::unique_ptr<Backend>>> results(kReplicas);
  MysqlOptions o = Options();
  for (int i = 0; i < kReplicas; ++i) {
    threads.emplace_back([&, i] { results[i] = NewMysqlBackend(o); });
  }
  for (auto& t : threads) t.join();
  for (auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
  }
  ASSERT_TRUE(SyncAcquire(**results[0], Acq("shared", "o")).value().acquired);
  absl::StatusOr<AcquireResult> other = SyncAcquire(**results[5], Acq("shared", "p"));
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->acquired);
}

TEST_F(MysqlBackendTest, NewerSchemaVersionIsRefused) {
  ASSERT_NE(NewBackend(), nullptr);
  ASSERT_TRUE(
      server_->Query(absl::StrCat("UPDATE ", prefix_, "meta SET v = 99 WHERE k = 'schema_version'"))
          .ok());
  absl::StatusOr<std::unique_ptr<Backend>> b = StartBackend(Options());
  EXPECT_THAT(b, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(b.status().message(), HasSubstr("99"));
}

TEST_F(MysqlBackendTest, ConnectsThroughTheUnixSocket) {
  MysqlOptions o = Options();
  o.host = "";
  o.port = 0;
  o.socket = server_->socket();
  auto b = NewBackend(o);
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(SyncAcquire(*b, Acq("socket", "o")).value().acquired);
  EXPECT_TRUE(b->Health().ok());
}

TEST_F(MysqlBackendTest, WrongPasswordIsUnauthenticatedAndNotEchoed) {
  MysqlOptions o = Options();
  o.password = "not-the-password-s3cret";
  absl::StatusOr<std::unique_ptr<Backend>> b = NewMysqlBackend(o);
  EXPECT_THAT(b, StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(b.status().message(), Not(HasSubstr("s3cret")));
}

TEST_F(MysqlBackendTest, UnreachableServerIsUnavailable) {
  MysqlOptions o = Options();
  o.port = FreePort();
  absl::StatusOr<std::unique_ptr<Backend>> b = NewMysqlBackend(o);
  EXPECT_THAT(b, StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(MysqlBackendTest, UnusableOptionsAreInvalidArgumentNamingTheOption) {
  MysqlOptions o = Options();
  o.table_prefix = "bad-prefix";
  EXPECT_THAT(NewMysqlBackend(o).status().message(), HasSubstr("mysql.table_prefix"));
  o = Options();
  o.pool_size = 0;
  EXPECT_THAT(NewMysqlBackend(o).status().message(), HasSubstr("mysql.pool_size"));
  o = Options();
  o.ssl_mode = MysqlSslMode::kVerifyIdentity;
  absl::Status s = NewMysqlBackend(o).status();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s.message(), HasSubstr("mysql.ssl_ca"));
}

TEST_F(MysqlBackendTest, DatabaseTheUserMayNotCreateIsFailedPrecondition) {
  MysqlOptions o = Options();
  o.database = "not_granted";
  absl::StatusOr<std::unique_ptr<Backend>> b = NewMysqlBackend(o);
  EXPECT_FALSE(b.ok());
  EXPECT_THAT(b, Not(StatusIs(absl::StatusCode::kInternal)));
}

}  // namespace
}  // namespace lockd::testing
