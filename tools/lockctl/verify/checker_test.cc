// Unit tests of lockctl verify's checker on constructed histories: a clean
// history passes every check, and each kind of broken history is found by
// the check that names it (the verifier must be able to fail).

#include "tools/lockctl/verify/checker.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace lockd::lockctl::verify {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;

constexpr int64_t kMs = 1'000'000;

// Builds histories in milliseconds. Every acquire is an invoke and an ok (or
// a failure); a hold's critical section writes both counters once.
class History {
 public:
  struct Acq {
    int64_t process;
    std::string lock;
    int64_t invoke_ms;
    int64_t ok_ms;
    uint64_t token;
    int64_t ttl_ms = 10'000;
    LockKind kind = LockKind::kExclusive;
    uint32_t permits = 0;
    uint32_t limit = 0;
    Api api = Api::kUnknown;
    std::string replica;
  };

  History& Acquire(const Acq& a) {
    Event inv = Base(a.invoke_ms, a.process, EventType::kInvoke, Op::kAcquire, a.lock);
    inv.kind = a.kind;
    inv.permits = a.permits;
    inv.limit = a.limit;
    inv.ttl_ns = a.ttl_ms * kMs;
    inv.api = a.api;
    inv.replica = a.replica;
    inv.owner = Owner(a.process);
    events_.push_back(inv);
    Event ok = Base(a.ok_ms, a.process, EventType::kOk, Op::kAcquire, a.lock);
    ok.owner = Owner(a.process);
    ok.token = a.token;
    events_.push_back(ok);
    return *this;
  }
  History& AcquireFails(int64_t process, const std::string& lock, int64_t invoke_ms,
                        int64_t done_ms, EventType type, const std::string& error) {
    Event inv = Base(invoke_ms, process, EventType::kInvoke, Op::kAcquire, lock);
    inv.ttl_ns = 10'000 * kMs;
    events_.push_back(inv);
    Event done = Base(done_ms, process, type, Op::kAcquire, lock);
    done.error = error;
    events_.push_back(done);
    return *this;
  }
  History& Release(int64_t process, const std::string& lock, int64_t at_ms,
                   std::optional<int64_t> valid_until_ms = std::nullopt) {
    Event inv = Base(at_ms, process, EventType::kInvoke, Op::kRelease, lock);
    if (valid_until_ms) inv.valid_until_ns = *valid_until_ms * kMs;
    events_.push_back(inv);
    events_.push_back(Base(at_ms + 1, process, EventType::kOk, Op::kRelease, lock));
    return *this;
  }
  History& Write(int64_t process, const std::string& lock, int64_t at_ms, Counter counter,
                 uint64_t token, int64_t read, bool accepted = true) {
    Event w = Base(at_ms, process, accepted ? EventType::kOk : EventType::kFail, Op::kWrite, lock);
    w.counter = counter;
    w.token = token;
    w.read = read;
    w.wrote = read + 1;
    if (!accepted) w.error = "STALE_TOKEN";
    events_.push_back(w);
    return *this;
  }
  History& Nemesis(Op f, int64_t process, int64_t at_ms) {
    events_.push_back(Base(at_ms, process, EventType::kInfo, f, ""));
    return *this;
  }

  const std::vector<Event>& events() const { return events_; }

 private:
  static std::string Owner(int64_t process) { return absl::StrCat("w", process); }
  static Event Base(int64_t ms, int64_t process, EventType type, Op f, const std::string& lock) {
    Event e;
    e.time_ns = ms * kMs;
    e.process = process;
    e.type = type;
    e.f = f;
    e.lock = lock;
    return e;
  }

  std::vector<Event> events_;
};

// A correct run: four workers take turns on mutex "m" (each hold writes both
// counters), readers share "rw" with a writer between them, and a semaphore
// "sem" of limit 2 holds two permits at once at most.
History CleanHistory() {
  History h;
  int64_t counter = 0;
  int64_t t = 0;
  for (int64_t i = 0; i < 8; ++i) {
    const int64_t p = i % 4;
    const uint64_t token = static_cast<uint64_t>(i + 1);
    h.Acquire({p, "m", t, t + 2, token, 10'000, LockKind::kExclusive, 0, 0, Api::kSession, "r1"});
    h.Write(p, "m", t + 4, Counter::kFenced, token, counter);
    h.Write(p, "m", t + 5, Counter::kUnfenced, token, counter);
    ++counter;
    h.Release(p, "m", t + 8);
    t += 10;
  }
  // Readers 10 and 11 overlap twelve times; writer 12 comes between rounds.
  uint64_t token = 1;
  for (int64_t round = 0; round < 12; ++round) {
    const int64_t b = 1000 + round * 100;
    h.Acquire({10, "rw", b, b + 1, token++, 10'000, LockKind::kShared});
    h.Acquire({11, "rw", b + 5, b + 6, token++, 10'000, LockKind::kShared});
    h.Release(10, "rw", b + 20);
    h.Release(11, "rw", b + 25);
    h.Acquire({12, "rw", b + 30, b + 40, token++, 10'000, LockKind::kExclusive});
    h.Release(12, "rw", b + 50);
  }
  h.Acquire({20, "sem", 3000, 3001, 1, 10'000, LockKind::kSemaphore, 1, 2});
  h.Acquire({21, "sem", 3002, 3003, 2, 10'000, LockKind::kSemaphore, 1, 2});
  h.Release(20, "sem", 3010);
  h.Acquire({22, "sem", 3005, 3012, 3, 10'000, LockKind::kSemaphore, 1, 2});
  h.Release(21, "sem", 3020);
  h.Release(22, "sem", 3030);
  return h;
}

TEST(CheckTest, CleanHistoryPassesEveryCheck) {
  CheckReport report = Check(CleanHistory().events(), CheckConfig());
  ASSERT_EQ(report.checks.size(), 5u);
  for (const CheckResult& c : report.checks) {
    EXPECT_TRUE(c.passed) << c.name << ": " << c.failure;
    EXPECT_TRUE(c.examples.empty()) << c.name << ": " << c.examples.front().text;
  }
  EXPECT_TRUE(report.passed());
  EXPECT_EQ(ExitCodeFor(report), kVerifyPassed);
  const CheckResult& exclusion = *report.Find("exclusion");
  EXPECT_EQ(exclusion.Count("holds"), 8 + 36 + 3);
  EXPECT_EQ(exclusion.Count("reader_overlaps"), 12);
  EXPECT_EQ(exclusion.Count("max_permits_held"), 2);
  EXPECT_EQ(report.Find("fencing")->Count("first_grants"), 8 + 36 + 3);
  EXPECT_EQ(report.Find("lost-updates")->Count("fenced_writes"), 8);
  EXPECT_EQ(report.Find("fairness")->Count("wait_max_ns"), 10 * kMs);
}

TEST(CheckTest, OverlapInsideBothCertainLeasesIsAnExclusionViolation) {
  History h;
  h.Acquire({1, "m", 0, 1, 1}).Acquire({2, "m", 2, 3, 2}).Release(1, "m", 10).Release(2, "m", 12);
  CheckReport report = Check(h.events(), CheckConfig());
  const CheckResult& c = *report.Find("exclusion");
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.Count("violations"), 1);
  EXPECT_EQ(c.Count("expired_overlaps"), 0);
  EXPECT_THAT(c.failure, HasSubstr("1 overlaps inside both certain leases"));
  ASSERT_EQ(c.examples.size(), 1u);
  EXPECT_EQ(c.examples[0].lock, "m");
  EXPECT_EQ(c.examples[0].time_ns, 3 * kMs);
  EXPECT_THAT(c.examples[0].text, HasSubstr("p1 (owner w1, token 1) held 0.001s-0.010s"));
  EXPECT_THAT(c.examples[0].text, HasSubstr("p2 (owner w2, token 2) held 0.003s-0.012s"));
  EXPECT_TRUE(report.Find("fencing")->passed);
  EXPECT_EQ(ExitCodeFor(report), kVerifyFailed);
}

TEST(CheckTest, OverlapAfterTheLeaseIsAnExpiredOverlapThatFailsExclusion) {
  // p1's lease (ttl 100 ms from its invoke at 0) ended before p2's grant at
  // 300 ms, but p1 left its critical section only at 500 ms (a paused holder).
  History h;
  h.Acquire({1, "m", 0, 1, 1, 100}).Acquire({2, "m", 50, 300, 2}).Release(1, "m", 500, 99);
  h.Release(2, "m", 600);
  CheckReport report = Check(h.events(), CheckConfig());
  const CheckResult& c = *report.Find("exclusion");
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.Count("violations"), 0);
  EXPECT_EQ(c.Count("expired_overlaps"), 1);
  EXPECT_EQ(c.failure, "1 expired overlaps (a holder still inside after its lease ended)");
  ASSERT_EQ(c.examples.size(), 1u);
  EXPECT_THAT(c.examples[0].text, HasSubstr("expired overlap: p1"));
  EXPECT_EQ(ExitCodeFor(report), kVerifyFailed);
}

TEST(CheckTest, LateWritesOfAnExpiredHolderAreCountedWithWhatFencingRejected) {
  // p1 (lease until 100 ms) read 0 and wrote at 450 ms, after p2 (token 2)
  // had read 0 and written 1: the fenced counter rejected p1's write, the
  // unfenced one took it and lost p2's update.
  History h;
  h.Acquire({1, "m", 0, 1, 1, 100}).Acquire({2, "m", 50, 300, 2});
  h.Write(2, "m", 310, Counter::kFenced, 2, 0).Write(2, "m", 311, Counter::kUnfenced, 2, 0);
  h.Release(2, "m", 320);
  h.Write(1, "m", 450, Counter::kFenced, 1, 0, /*accepted=*/false);
  h.Write(1, "m", 451, Counter::kUnfenced, 1, 0);
  h.Release(1, "m", 500);
  CheckReport report = Check(h.events(), CheckConfig());
  const CheckResult& exclusion = *report.Find("exclusion");
  EXPECT_FALSE(exclusion.passed);
  EXPECT_EQ(exclusion.Count("expired_overlaps"), 1);
  EXPECT_EQ(exclusion.Count("late_writes"), 1);
  EXPECT_EQ(exclusion.Count("late_writes_rejected"), 1);
  EXPECT_THAT(exclusion.note,
              HasSubstr("holders wrote 1 times after their lease ended; fencing rejected 1"));
  const CheckResult& fencing = *report.Find("fencing");
  EXPECT_TRUE(fencing.passed) << fencing.failure;
  EXPECT_EQ(fencing.Count("stale_writes_rejected"), 1);
  const CheckResult& lost = *report.Find("lost-updates");
  EXPECT_TRUE(lost.passed) << lost.failure;
  EXPECT_EQ(lost.Count("fenced_lost"), 0);
  EXPECT_EQ(lost.Count("unfenced_lost"), 1);
  std::ostringstream text;
  PrintReportText(report, text);
  EXPECT_THAT(text.str(), EndsWith("verify: FAILED (exclusion)\n"));
}

TEST(CheckTest, AHolderThatLeavesBeforeItsLeaseEndsHasNoExpiredOverlap) {
  // p1's lease ends at 100 ms; it wrote at 60 ms and left at 90 ms; p2 was
  // granted at 300 ms.
  History h;
  h.Acquire({1, "m", 0, 1, 1, 100}).Write(1, "m", 60, Counter::kFenced, 1, 0);
  h.Release(1, "m", 90).Acquire({2, "m", 50, 300, 2}).Release(2, "m", 400);
  CheckResult c = *Check(h.events(), CheckConfig()).Find("exclusion");
  EXPECT_TRUE(c.passed) << c.failure;
  EXPECT_EQ(c.Count("expired_overlaps"), 0);
  EXPECT_EQ(c.Count("late_writes"), 0);
  EXPECT_EQ(c.note, "");
}

TEST(CheckTest, AClientBoundReportedOnTheHoldExtendsItsCertainLease) {
  // The same timeline, but p1's client still held a valid lease until 550 ms
  // (renewed): p2's grant at 300 ms broke exclusion.
  History h;
  h.Acquire({1, "m", 0, 1, 1, 100}).Acquire({2, "m", 50, 300, 2}).Release(1, "m", 500, 550);
  h.Release(2, "m", 600);
  CheckResult c = *Check(h.events(), CheckConfig()).Find("exclusion");
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.Count("violations"), 1);
}

TEST(CheckTest, AKilledHolderLeavesItsCriticalSectionAtTheKill) {
  History h;
  h.Acquire({1, "m", 0, 1, 1}).Nemesis(Op::kKill, 1, 5).Acquire({2, "m", 2, 8, 2});
  h.Release(2, "m", 9);
  EXPECT_TRUE(Check(h.events(), CheckConfig()).Find("exclusion")->passed);
}

TEST(CheckTest, AWriterOverlappingAReaderIsAViolation) {
  History h;
  h.Acquire({1, "rw", 0, 1, 1, 10'000, LockKind::kShared});
  h.Acquire({2, "rw", 2, 3, 2, 10'000, LockKind::kExclusive});
  h.Release(1, "rw", 10).Release(2, "rw", 12);
  CheckResult c = *Check(h.events(), CheckConfig()).Find("exclusion");
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.Count("violations"), 1);
  EXPECT_EQ(c.Count("reader_overlaps"), 0);
}

TEST(CheckTest, ReadersThatNeverOverlapAreReported) {
  // Reader 2 arrives while reader 1 holds, and nobody else wants the lock,
  // yet is granted only after reader 1 leaves: twelve times.
  History h;
  uint64_t token = 1;
  for (int64_t i = 0; i < 12; ++i) {
    const int64_t b = i * 100;
    h.Acquire({1, "rw", b, b + 1, token++, 10'000, LockKind::kShared});
    h.Acquire({2, "rw", b + 5, b + 21, token++, 10'000, LockKind::kShared});
    h.Release(1, "rw", b + 20).Release(2, "rw", b + 30);
  }
  CheckConfig config;
  CheckResult c = *Check(h.events(), config).Find("exclusion");
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.Count("reader_chances"), 12);
  EXPECT_EQ(c.Count("serialized_reader_locks"), 1);
  EXPECT_THAT(c.failure, HasSubstr("read-write locks whose readers never overlapped"));

  config.min_reader_chances = 13;
  EXPECT_TRUE(Check(h.events(), config).Find("exclusion")->passed);
}

TEST(CheckTest, AKilledWritersAcquireStopsWaitingAtTheKill) {
  // The serialized readers again, with a writer whose acquire was in flight
  // when it was killed at 2 ms: from then on nobody waits to write.
  History h;
  Event writer;
  writer.time_ns = 0;
  writer.process = 3;
  writer.f = Op::kAcquire;
  writer.lock = "rw";
  writer.ttl_ns = 10'000 * kMs;
  h.Nemesis(Op::kKill, 3, 2);
  uint64_t token = 1;
  for (int64_t i = 0; i < 12; ++i) {
    const int64_t b = 10 + i * 100;
    h.Acquire({1, "rw", b, b + 1, token++, 10'000, LockKind::kShared});
    h.Acquire({2, "rw", b + 5, b + 21, token++, 10'000, LockKind::kShared});
    h.Release(1, "rw", b + 20).Release(2, "rw", b + 30);
  }
  std::vector<Event> events = h.events();
  events.push_back(writer);
  CheckReport report = Check(events, CheckConfig());
  EXPECT_EQ(report.Find("exclusion")->Count("reader_chances"), 12);
  EXPECT_EQ(report.Find("exclusion")->Count("serialized_reader_locks"), 1);
  EXPECT_EQ(report.Find("fairness")->Count("acquires"), 25);
}

TEST(CheckTest, ReadersQueuedBehindAWaitingWriterHadNoChance) {
  // A writer waits from 3 ms; reader 2 arriving at 5 ms queues behind it.
  History h;
  uint64_t token = 1;
  for (int64_t i = 0; i < 12; ++i) {
    const int64_t b = i * 100;
    h.Acquire({1, "rw", b, b + 1, token++, 10'000, LockKind::kShared});
    h.Acquire({3, "rw", b + 3, b + 21, token++, 10'000, LockKind::kExclusive});
    h.Release(1, "rw", b + 20);
    h.Release(3, "rw", b + 25);
    h.Acquire({2, "rw", b + 5, b + 26, token++, 10'000, LockKind::kShared});
    h.Release(2, "rw", b + 30);
  }
  CheckResult c = *Check(h.events(), CheckConfig()).Find("exclusion");
  EXPECT_TRUE(c.passed) << c.failure;
  EXPECT_EQ(c.Count("reader_chances"), 0);
}

TEST(CheckTest, ASemaphoreOverItsLimitIsAViolation) {
  History h;
  for (int64_t p = 1; p <= 3; ++p) {
    h.Acquire({p, "sem", p, p + 1, static_cast<uint64_t>(p), 10'000, LockKind::kSemaphore, 1, 2});
  }
  h.Release(1, "sem", 10).Release(2, "sem", 11).Release(3, "sem", 12);
  CheckResult c = *Check(h.events(), CheckConfig()).Find("exclusion");
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.Count("semaphore_over_limit"), 1);
  EXPECT_EQ(c.Count("max_permits_held"), 3);
  EXPECT_EQ(c.Count("violations"), 0);
  EXPECT_THAT(c.failure, HasSubstr("1 times a semaphore held more permits than its limit"));
  ASSERT_EQ(c.examples.size(), 1u);
  EXPECT_THAT(c.examples[0].text, HasSubstr("3 permits held at 0.004s (limit 2)"));
}

TEST(CheckTest, ASemaphoreOverItsLimitOnlyWithExpiredLeasesIsAnExpiredOverlap) {
  History h;
  h.Acquire({1, "sem", 0, 1, 1, 100, LockKind::kSemaphore, 2, 2});
  h.Acquire({2, "sem", 150, 200, 2, 10'000, LockKind::kSemaphore, 1, 2});
  h.Release(1, "sem", 300).Release(2, "sem", 310);
  CheckResult c = *Check(h.events(), CheckConfig()).Find("exclusion");
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.Count("expired_overlaps"), 1);
  EXPECT_EQ(c.Count("semaphore_over_limit"), 0);
  EXPECT_THAT(c.failure, HasSubstr("1 expired overlaps"));
}

TEST(CheckTest, ARepeatedTokenFailsFencing) {
  History h;
  h.Acquire({1, "m", 0, 1, 7}).Release(1, "m", 5).Acquire({2, "m", 6, 7, 7}).Release(2, "m", 9);
  CheckResult c = *Check(h.events(), CheckConfig()).Find("fencing");
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.Count("repeated_tokens"), 1);
  EXPECT_EQ(c.Count("token_regressions"), 0);
  ASSERT_EQ(c.examples.size(), 1u);
  EXPECT_THAT(c.examples[0].text, HasSubstr("token 7 granted twice: p1 (owner w1)"));
}

TEST(CheckTest, ATokenSmallerThanAnEarlierGrantsFailsFencing) {
  History h;
  h.Acquire({1, "m", 0, 1, 9}).Release(1, "m", 5).Acquire({2, "m", 6, 7, 4}).Release(2, "m", 9);
  CheckResult c = *Check(h.events(), CheckConfig()).Find("fencing");
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.Count("token_regressions"), 1);
  ASSERT_EQ(c.examples.size(), 1u);
  EXPECT_THAT(c.examples[0].text, HasSubstr("token went back: p2 (owner w2) got token 4"));
}

TEST(CheckTest, ConcurrentGrantsMayCarryTokensInEitherOrder) {
  // Two readers whose acquires overlap in time: lockd may have granted
  // either first, so 6 before 5 in ok order is fine; a reentrant acquire
  // keeps its token and is no repeat.
  History h;
  h.Acquire({1, "rw", 0, 10, 6, 10'000, LockKind::kShared});
  h.Acquire({2, "rw", 1, 12, 5, 10'000, LockKind::kShared});
  h.Acquire({1, "rw", 13, 14, 6, 10'000, LockKind::kShared});
  h.Release(1, "rw", 15).Release(1, "rw", 16).Release(2, "rw", 17);
  CheckReport report = Check(h.events(), CheckConfig());
  EXPECT_TRUE(report.Find("fencing")->passed) << report.Find("fencing")->failure;
  EXPECT_EQ(report.Find("fencing")->Count("first_grants"), 2);
  EXPECT_EQ(report.Find("exclusion")->Count("holds"), 2);
}

TEST(CheckTest, AStaleWriteAcceptedFailsFencingAndRejectedOnesCount) {
  History h;
  h.Write(1, "m", 1, Counter::kFenced, 5, 0);
  h.Write(2, "m", 2, Counter::kFenced, 4, 1, /*accepted=*/false);
  CheckResult good = *Check(h.events(), CheckConfig()).Find("fencing");
  EXPECT_TRUE(good.passed);
  EXPECT_EQ(good.Count("stale_writes_rejected"), 1);

  h.Write(3, "m", 3, Counter::kFenced, 3, 1);
  CheckResult bad = *Check(h.events(), CheckConfig()).Find("fencing");
  EXPECT_FALSE(bad.passed);
  EXPECT_EQ(bad.Count("stale_writes_accepted"), 1);
  EXPECT_EQ(bad.Count("fenced_writes_accepted"), 2);
  ASSERT_EQ(bad.examples.size(), 1u);
  EXPECT_THAT(bad.examples[0].text, HasSubstr("stale write accepted: p3 wrote with token 3"));
}

TEST(CheckTest, ALostFencedUpdateFailsAndAnUnfencedLossIsWhatFencingPrevented) {
  History unfenced;
  unfenced.Write(1, "m", 1, Counter::kUnfenced, 1, 0);  // 0 -> 1
  unfenced.Write(2, "m", 2, Counter::kUnfenced, 2, 1);  // 1 -> 2
  unfenced.Write(1, "m", 3, Counter::kUnfenced, 1, 0);  // read 0 late: 2 lost
  CheckResult c = *Check(unfenced.events(), CheckConfig()).Find("lost-updates");
  EXPECT_TRUE(c.passed);
  EXPECT_EQ(c.Count("unfenced_lost"), 2);
  EXPECT_THAT(c.note, HasSubstr("the unfenced counter lost 2 updates: what fencing prevented"));

  History fenced;
  fenced.Write(1, "m", 1, Counter::kFenced, 1, 0);
  fenced.Write(2, "m", 2, Counter::kFenced, 2, 0);  // read before 1's write landed
  c = *Check(fenced.events(), CheckConfig()).Find("lost-updates");
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.Count("fenced_lost"), 1);
  EXPECT_THAT(c.failure, HasSubstr("1 updates of the fenced counter lost"));
  ASSERT_EQ(c.examples.size(), 1u);
  EXPECT_THAT(c.examples[0].text,
              HasSubstr("fenced counter: p2 (token 2) wrote 1 at 0.002s having read 0 while it "
                        "stood at 1: 1 updates lost"));
}

TEST(CheckTest, AnUnfencedLossCountsWhatTheCounterDoesNotShow) {
  // p3's late write (read 0) overwrote two updates; p4 then wrote 3 from
  // the 2 it had read before, restoring one of them.
  History h;
  h.Write(1, "m", 1, Counter::kUnfenced, 1, 0);
  h.Write(2, "m", 2, Counter::kUnfenced, 2, 1);
  h.Write(3, "m", 3, Counter::kUnfenced, 3, 0);
  h.Write(4, "m", 4, Counter::kUnfenced, 4, 2);
  CheckResult c = *Check(h.events(), CheckConfig()).Find("lost-updates");
  EXPECT_TRUE(c.passed);
  EXPECT_EQ(c.Count("unfenced_writes"), 4);
  EXPECT_EQ(c.Count("unfenced_lost"), 1);
  EXPECT_EQ(c.Count("unfenced_inconsistent"), 1);
  ASSERT_EQ(c.examples.size(), 2u);
  EXPECT_THAT(c.examples[0].text, HasSubstr("having read 0 while it stood at 2: 2 updates lost"));
  EXPECT_THAT(c.examples[1].text, HasSubstr("which the counter no longer held (it stood at 1)"));
}

TEST(CheckTest, AReadOfAValueNeverWrittenFailsTheFencedCounter) {
  History h;
  h.Write(1, "m", 1, Counter::kFenced, 1, 5);
  CheckResult c = *Check(h.events(), CheckConfig()).Find("lost-updates");
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.Count("fenced_inconsistent"), 1);
}

TEST(CheckTest, LivenessMeasuresTheNextGrantAfterAHoldersDeath) {
  History h;
  h.Acquire({1, "m", 0, 1, 1, 1000, LockKind::kExclusive, 0, 0, Api::kUnary});
  h.Nemesis(Op::kKill, 1, 10);
  h.Acquire({2, "m", 5, 900, 2}).Release(2, "m", 950);
  h.Acquire({3, "s", 0, 1, 1, 1000, LockKind::kExclusive, 0, 0, Api::kSession});
  h.Nemesis(Op::kAbandon, 3, 10);
  h.Acquire({4, "s", 5, 900, 2}).Release(4, "s", 950);
  CheckConfig config;
  config.session_liveness_bound = absl::Milliseconds(500);
  config.unary_liveness_grace = absl::Milliseconds(100);
  CheckResult c = *Check(h.events(), config).Find("liveness");
  EXPECT_EQ(c.Count("nemesis_events"), 2);
  EXPECT_EQ(c.Count("holds_ended"), 2);
  EXPECT_EQ(c.Count("measured"), 2);
  EXPECT_EQ(c.Count("regrant_max_ns"), 890 * kMs);
  // The unary hold's bound is its ttl + grace (1.1 s): met; the session's
  // 500 ms: missed.
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.Count("over_bound"), 1);
  ASSERT_EQ(c.examples.size(), 1u);
  EXPECT_EQ(c.examples[0].lock, "s");
  EXPECT_THAT(c.examples[0].text, HasSubstr("abandon of p3"));

  config.session_liveness_bound = absl::Seconds(1);
  EXPECT_TRUE(Check(h.events(), config).Find("liveness")->passed);
}

TEST(CheckTest, AnAcquireAllThatAlsoWaitedForALaterStrikeMeasuresThatOne) {
  // p1 holds "a" (unary, ttl 1 s) and is killed at 100 ms; p2 holds "b" and
  // is killed at 1000 ms. p3's AcquireAll of both is granted at 2100 ms:
  // 1.1 s after p2's strike, 2.0 s after p1's, which it measures no more
  // than b's holder let it.
  History h;
  h.Acquire({1, "a", 0, 10, 1, 1'000, LockKind::kExclusive, 0, 0, Api::kUnary});
  h.Nemesis(Op::kKill, 1, 100);
  h.Acquire({2, "b", 500, 510, 1, 1'000, LockKind::kExclusive, 0, 0, Api::kUnary});
  h.Nemesis(Op::kKill, 2, 1000);
  h.Acquire({3, "a", 1200, 2100, 2, 1'000, LockKind::kExclusive, 0, 0, Api::kUnary});
  h.Acquire({3, "b", 1200, 2101, 2, 1'000, LockKind::kExclusive, 0, 0, Api::kUnary});
  h.Release(3, "a", 2200).Release(3, "b", 2201);
  // The checker orders events by time: p3's two invokes, then its two oks
  // (an AcquireAll).
  const std::vector<Event>& events = h.events();
  CheckConfig config;
  config.unary_liveness_grace = absl::Milliseconds(500);  // bound: 1.5 s
  CheckResult c = *Check(events, config).Find("liveness");
  EXPECT_TRUE(c.passed) << c.failure;
  EXPECT_EQ(c.Count("holds_ended"), 2);
  EXPECT_EQ(c.Count("measured"), 1);
  EXPECT_EQ(c.Count("shadowed"), 1);
  EXPECT_EQ(c.Count("regrant_max_ns"), 1101 * kMs);

  // Taken alone, "a" came back 2.0 s after its strike: over the bound.
  std::vector<Event> alone;
  for (const Event& e : events) {
    if (e.process != 3 || e.lock != "b") alone.push_back(e);
  }
  CheckResult single = *Check(alone, config).Find("liveness");
  EXPECT_FALSE(single.passed);
  EXPECT_EQ(single.Count("shadowed"), 0);
  EXPECT_EQ(single.Count("over_bound"), 1);
}

TEST(CheckTest, LivenessWithoutALaterGrantIsUnmeasured) {
  History h;
  h.Acquire({1, "m", 0, 1, 1}).Nemesis(Op::kKill, 1, 10);
  CheckResult c = *Check(h.events(), CheckConfig()).Find("liveness");
  EXPECT_TRUE(c.passed);
  EXPECT_EQ(c.Count("unmeasured"), 1);
  EXPECT_EQ(c.Count("measured"), 0);
}

// Every process has acquired once before (a first acquire is never the one
// overtaken): a try-once acquire of "warm-up" each.
History WarmedUp(std::initializer_list<int64_t> processes) {
  History h;
  uint64_t token = 1;
  for (int64_t p : processes) {
    h.Acquire(
        {p, "warm-up", 0, 1, token++, 10'000, LockKind::kExclusive, 0, 0, Api::kSession, "r1"});
    h.Release(p, "warm-up", 2);
  }
  return h;
}

TEST(CheckTest, FifoViolationsAmongOneReplicasWaitersFail) {
  History h = WarmedUp({1, 2, 3});
  h.Acquire({1, "m", 10, 11, 1, 10'000, LockKind::kExclusive, 0, 0, Api::kSession, "r1"});
  // p2 waits from 20 ms; p3 arrives at 200 ms and overtakes it.
  h.Acquire({3, "m", 200, 501, 2, 10'000, LockKind::kExclusive, 0, 0, Api::kSession, "r1"});
  h.Release(1, "m", 500).Release(3, "m", 700);
  h.Acquire({2, "m", 20, 701, 3, 10'000, LockKind::kExclusive, 0, 0, Api::kSession, "r1"});
  h.Release(2, "m", 800);
  CheckResult c = *Check(h.events(), CheckConfig()).Find("fairness");
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.Count("fifo_violations"), 1);
  ASSERT_EQ(c.examples.size(), 1u);
  EXPECT_THAT(c.examples[0].text, HasSubstr("on r1: p3 invoked at 0.200s"));

  // The same on two replicas: FIFO holds per replica only.
  std::vector<Event> events = h.events();
  for (Event& e : events) {
    if (e.process == 3 && e.type == EventType::kInvoke && e.lock == "m") e.replica = "r2";
  }
  EXPECT_TRUE(Check(events, CheckConfig()).Find("fairness")->passed);
}

TEST(CheckTest, FifoDoesNotCompareAProcesssFirstAcquire) {
  // p2's first acquire may have left only when its connection was up.
  History h = WarmedUp({1, 3});
  h.Acquire({1, "m", 10, 11, 1, 10'000, LockKind::kExclusive, 0, 0, Api::kSession, "r1"});
  h.Acquire({3, "m", 200, 501, 2, 10'000, LockKind::kExclusive, 0, 0, Api::kSession, "r1"});
  h.Release(1, "m", 500).Release(3, "m", 700);
  h.Acquire({2, "m", 20, 701, 3, 10'000, LockKind::kExclusive, 0, 0, Api::kSession, "r1"});
  h.Release(2, "m", 800);
  EXPECT_TRUE(Check(h.events(), CheckConfig()).Find("fairness")->passed);
}

TEST(CheckTest, FifoIgnoresOrderWithinTheSlack) {
  History h = WarmedUp({1, 2, 3});
  h.Acquire({1, "m", 10, 11, 1, 10'000, LockKind::kExclusive, 0, 0, Api::kSession, "r1"});
  h.Acquire({2, "m", 20, 610, 3, 10'000, LockKind::kExclusive, 0, 0, Api::kSession, "r1"});
  h.Acquire({3, "m", 100, 501, 2, 10'000, LockKind::kExclusive, 0, 0, Api::kSession, "r1"});
  h.Release(1, "m", 500).Release(3, "m", 600).Release(2, "m", 700);
  EXPECT_TRUE(Check(h.events(), CheckConfig()).Find("fairness")->passed);
  CheckConfig tight;
  tight.fifo_slack = absl::Milliseconds(50);
  EXPECT_FALSE(Check(h.events(), tight).Find("fairness")->passed);
}

TEST(CheckTest, FifoOrdersGrantsByTokenNotByWhenWorkersReportedThem) {
  // Semaphore "sem" (limit 3): p1 holds 3 permits until 500 ms; p2 (1
  // permit) waits from 20 ms, p3 (2 permits) from 200 ms. Both are granted
  // at 500 ms in arrival order (tokens 2, 3), but p2's unary client renewed
  // its lease before returning: p2 reported its grant 150 ms after p3.
  History h = WarmedUp({1, 2, 3});
  h.Acquire({1, "sem", 0, 1, 1, 10'000, LockKind::kSemaphore, 3, 3, Api::kSession, "r1"});
  h.Acquire({2, "sem", 20, 655, 2, 10'000, LockKind::kSemaphore, 1, 3, Api::kUnary, "r1"});
  h.Acquire({3, "sem", 200, 505, 3, 10'000, LockKind::kSemaphore, 2, 3, Api::kSession, "r1"});
  h.Release(1, "sem", 500).Release(3, "sem", 700).Release(2, "sem", 710);
  CheckResult c = *Check(h.events(), CheckConfig()).Find("fairness");
  EXPECT_TRUE(c.passed) << c.failure;
  EXPECT_EQ(c.Count("fifo_violations"), 0);

  // Had the server granted p3 first (the smaller token), it would be one.
  std::vector<Event> events = h.events();
  for (Event& e : events) {
    if (e.lock != "sem" || e.type != EventType::kOk || e.f != Op::kAcquire) continue;
    if (e.process == 2) e.token = 3;
    if (e.process == 3) e.token = 2;
  }
  CheckResult swapped = *Check(events, CheckConfig()).Find("fairness");
  EXPECT_FALSE(swapped.passed);
  EXPECT_EQ(swapped.Count("fifo_violations"), 1);
  ASSERT_EQ(swapped.examples.size(), 1u);
  EXPECT_THAT(swapped.examples[0].text,
              HasSubstr("p3 invoked at 0.200s was granted token 2 (at 0.505s) before p2"));
}

TEST(CheckTest, FairnessCountsWaitsAndErrorsByCode) {
  History h;
  h.Acquire({1, "m", 0, 4, 1}).Release(1, "m", 10);
  h.AcquireFails(2, "m", 1, 3, EventType::kFail, "NOT_ACQUIRED");
  h.AcquireFails(3, "m", 1, 3, EventType::kInfo, "DEADLINE_EXCEEDED");
  h.AcquireFails(4, "m", 1, 3, EventType::kFail, "UNAVAILABLE");
  h.AcquireFails(5, "m", 1, 3, EventType::kFail, "UNAVAILABLE");
  CheckResult c = *Check(h.events(), CheckConfig()).Find("fairness");
  EXPECT_TRUE(c.passed);
  EXPECT_EQ(c.Count("acquires"), 5);
  EXPECT_EQ(c.Count("granted"), 1);
  EXPECT_EQ(c.Count("not_acquired"), 1);
  EXPECT_EQ(c.Count("wait_p50_ns"), 4 * kMs);
  EXPECT_EQ(c.Count("errors_UNAVAILABLE"), 2);
  EXPECT_EQ(c.Count("errors_DEADLINE_EXCEEDED"), 1);
}

TEST(ReportTest, TextHasARowPerCheckAndNamesTheFailedOnes) {
  History h;
  h.Acquire({1, "m", 0, 1, 1}).Acquire({2, "m", 2, 3, 1}).Release(1, "m", 10).Release(2, "m", 12);
  std::ostringstream out;
  PrintReportText(Check(h.events(), CheckConfig()), out);
  const std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("exclusion     FAIL  holds=2 violations=1"));
  EXPECT_THAT(text, HasSubstr("    failed: 1 overlaps inside both certain leases\n"));
  EXPECT_THAT(text, HasSubstr("    at 0.003s lock \"m\": overlap inside both certain leases"));
  EXPECT_THAT(text, HasSubstr("liveness      PASS"));
  EXPECT_THAT(text, HasSubstr("wait_p50=1.0ms"));
  EXPECT_THAT(text, EndsWith("verify: FAILED (exclusion, fencing)\n"));
}

TEST(ReportTest, JsonIsOneObjectWithEveryCheck) {
  std::ostringstream out;
  PrintReportJson(Check(CleanHistory().events(), CheckConfig()), out);
  google::protobuf::Struct parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out.str(), &parsed).ok()) << out.str();
  EXPECT_TRUE(parsed.fields().at("passed").bool_value());
  const auto& checks = parsed.fields().at("checks").list_value().values();
  ASSERT_EQ(checks.size(), 5);
  const auto& exclusion = checks[0].struct_value().fields();
  EXPECT_EQ(exclusion.at("name").string_value(), "exclusion");
  EXPECT_EQ(exclusion.at("counts").struct_value().fields().at("reader_overlaps").number_value(),
            12);
}

// The issue's offline case: a saved history, edited to contain an overlap,
// a repeated token and an over-limit semaphore, re-checked with --check.
class RunVerifyCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = absl::StrCat(::testing::TempDir(), "/verify_history_", getpid(), ".jsonl");
  }
  void TearDown() override { std::remove(path_.c_str()); }

  void Save(const std::string& text) {
    std::ofstream out(path_);
    out << text;
  }
  static std::string Lines(const std::vector<Event>& events) {
    std::string text;
    for (const Event& e : events) absl::StrAppend(&text, EventToJson(e), "\n");
    return text;
  }
  // Replaces `from` in the one line containing `where`.
  static void Edit(std::string& text, const std::string& where, const std::string& from,
                   const std::string& to) {
    std::vector<std::string> lines = absl::StrSplit(text, '\n');
    int edited = 0;
    for (std::string& line : lines) {
      if (line.find(where) == std::string::npos) continue;
      ASSERT_NE(line.find(from), std::string::npos) << line;
      line.replace(line.find(from), from.size(), to);
      ++edited;
    }
    ASSERT_EQ(edited, 1) << where;
    text = absl::StrJoin(lines, "\n");
  }

  std::string path_;
};

TEST_F(RunVerifyCheckTest, ASavedCleanHistoryPasses) {
  Save(Lines(CleanHistory().events()));
  std::ostringstream out, err;
  EXPECT_EQ(RunVerifyCheck(path_, ReportFormat::kText, out, err), kVerifyPassed) << out.str();
  EXPECT_THAT(out.str(), EndsWith("verify: PASSED\n"));
  EXPECT_EQ(err.str(), "");
}

TEST_F(RunVerifyCheckTest, AnEditedHistoryFailsNamingEachCheck) {
  std::string text = Lines(CleanHistory().events());
  // An overlap: p0's release of token 5 (48 ms) moved after p1's grant of
  // token 6 (52 ms).
  Edit(text, R"("time_ns":48000000,"process":0,"type":"invoke","f":"release")",
       R"("time_ns":48000000)", R"("time_ns":55000000)");
  Edit(text, R"("time_ns":49000000,"process":0,"type":"ok","f":"release")", R"("time_ns":49000000)",
       R"("time_ns":56000000)");
  // A repeated token: p2's grant of "m" at 22 ms gets p1's token 2.
  Edit(text, R"("time_ns":22000000,"process":2,"type":"ok","f":"acquire")", R"("token":3)",
       R"("token":2)");
  // An over-limit semaphore: p22's grant at 3012 ms moved to 3006 ms, beside
  // p20 and p21 (limit 2).
  Edit(text, R"("time_ns":3012000000,"process":22,"type":"ok")", R"("time_ns":3012000000)",
       R"("time_ns":3006000000)");
  Save(text);

  std::ostringstream out, err;
  EXPECT_EQ(RunVerifyCheck(path_, ReportFormat::kText, out, err), kVerifyFailed);
  EXPECT_EQ(err.str(), "");
  EXPECT_THAT(out.str(), HasSubstr("verify: FAILED (exclusion, fencing)"));
  EXPECT_THAT(out.str(), HasSubstr("violations=1"));
  EXPECT_THAT(out.str(), HasSubstr("semaphore_over_limit=1"));
  EXPECT_THAT(out.str(), HasSubstr("repeated_tokens=1"));

  std::ostringstream json;
  EXPECT_EQ(RunVerifyCheck(path_, ReportFormat::kJson, json, err), kVerifyFailed);
  EXPECT_THAT(json.str(), HasSubstr(R"("name":"exclusion","passed":false)"));
  EXPECT_THAT(json.str(), HasSubstr(R"("name":"fencing","passed":false)"));
  EXPECT_THAT(json.str(), HasSubstr(R"("name":"lost-updates","passed":true)"));
}

TEST_F(RunVerifyCheckTest, AnEditedHistoryWithAHolderPastItsLeaseFailsExclusion) {
  std::string text = Lines(CleanHistory().events());
  // p0's first hold gets a 5 ms lease and leaves at 13 ms, after p1's grant
  // at 12 ms.
  Edit(text, R"("time_ns":0,"process":0,"type":"invoke","f":"acquire")", R"("ttl_ns":10000000000)",
       R"("ttl_ns":5000000)");
  Edit(text, R"("time_ns":8000000,"process":0,"type":"invoke","f":"release")",
       R"("time_ns":8000000)", R"("time_ns":13000000)");
  Edit(text, R"("time_ns":9000000,"process":0,"type":"ok","f":"release")", R"("time_ns":9000000)",
       R"("time_ns":14000000)");
  Save(text);
  std::ostringstream out, err;
  EXPECT_EQ(RunVerifyCheck(path_, ReportFormat::kText, out, err), kVerifyFailed) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("expired_overlaps=1"));
  EXPECT_THAT(out.str(), HasSubstr("violations=0"));
  EXPECT_THAT(out.str(), HasSubstr("failed: 1 expired overlaps"));
  EXPECT_THAT(out.str(), EndsWith("verify: FAILED (exclusion)\n"));
}

TEST_F(RunVerifyCheckTest, AMalformedOrMissingHistoryIsExit2NamingPathAndLine) {
  Save(Lines(CleanHistory().events()) + "{\"time_ns\":1,\"process\":0}\n");
  std::ostringstream out, err;
  EXPECT_EQ(RunVerifyCheck(path_, ReportFormat::kText, out, err), kVerifyUsage);
  EXPECT_THAT(err.str(), HasSubstr(absl::StrCat("history ", path_, ": line ")));
  EXPECT_THAT(err.str(), HasSubstr("missing key \"type\""));
  EXPECT_EQ(out.str(), "");

  std::ostringstream err2;
  EXPECT_EQ(RunVerifyCheck(path_ + ".absent", ReportFormat::kText, out, err2), kVerifyUsage);
  EXPECT_THAT(err2.str(), HasSubstr(path_ + ".absent"));
}

}  // namespace
}  // namespace lockd::lockctl::verify
