// A stress test of shared locks and semaphores (docs/api.md "Shared locks,
// semaphores and all-or-nothing acquires") in the conformance suite: 16
// clients, each on its own connection, spread over the replicas, for
// kStressDuration. Half are readers and writers of one read-write lock, half
// hold permits of one semaphore; every client records its holds and
// interval_checker.h judges them: no writer overlaps anything, fencing
// tokens follow the grant order around every writer, never more than the
// limit of permits at once, readers did hold together (a read-write lock
// that serialises readers is reported), and a counter written under the
// writers' holds loses no update.

#include <atomic>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/conformance/conformance.h"
#include "tests/conformance/interval_checker.h"

namespace lockd::testing {
namespace {

using ::testing::IsEmpty;

constexpr absl::Duration kStressDuration = absl::Seconds(10);
constexpr int kClients = 16;  // even ones on the read-write lock, odd ones on the semaphore
constexpr uint32_t kLimit = 4;
constexpr int kWriterOneIn = 4;  // a read-write client writes one time in four
// How long a reader or a permit holder keeps its hold: long enough for
// others to be granted beside it.
constexpr absl::Duration kHoldFor = absl::Milliseconds(2);

using Kind = HoldInterval::Kind;

// --- The checker itself ------------------------------------------------------------------

HoldInterval At(Kind kind, uint64_t token, int start_ms, int end_ms, uint32_t permits = 0) {
  HoldInterval h;
  h.kind = kind;
  h.owner = absl::StrCat("o", token);
  h.token = token;
  h.permits = permits;
  HoldClock::time_point t0{};
  h.start = t0 + std::chrono::milliseconds(start_ms);
  h.end = t0 + std::chrono::milliseconds(end_ms);
  return h;
}

TEST(IntervalChecker, AcceptsReadersTogetherBetweenWritersAndCountsTheirOverlaps) {
  ReadWriteReport r = CheckReadWrite({At(Kind::kWriter, 1, 0, 10), At(Kind::kReader, 2, 11, 20),
                                      At(Kind::kReader, 3, 12, 25), At(Kind::kWriter, 4, 25, 30),
                                      At(Kind::kReader, 5, 31, 32)});
  EXPECT_THAT(r.violations, IsEmpty());
  EXPECT_EQ(r.reader_overlaps, 1);
}

TEST(IntervalChecker, ReportsAWriterOverlappingAReaderOrAWriter) {
  ReadWriteReport r = CheckReadWrite(
      {At(Kind::kReader, 1, 0, 10), At(Kind::kWriter, 2, 9, 20), At(Kind::kWriter, 3, 19, 30)});
  EXPECT_EQ(r.violation_count, 2);
  EXPECT_EQ(r.reader_overlaps, 0);
}

TEST(IntervalChecker, ReportsTokensOutOfOrderAroundAWriterAndSharedTokens) {
  EXPECT_EQ(
      CheckReadWrite({At(Kind::kReader, 5, 0, 10), At(Kind::kWriter, 4, 11, 20)}).violation_count,
      1);
  EXPECT_EQ(
      CheckReadWrite({At(Kind::kWriter, 4, 0, 10), At(Kind::kReader, 3, 11, 20)}).violation_count,
      1);
  EXPECT_EQ(
      CheckReadWrite({At(Kind::kReader, 3, 0, 10), At(Kind::kReader, 3, 5, 20)}).violation_count,
      1);
}

TEST(IntervalChecker, CountsPermitsHeldAtOnceAgainstTheLimit) {
  PermitsReport ok = CheckPermits({At(Kind::kPermits, 1, 0, 10, 2), At(Kind::kPermits, 2, 5, 15, 2),
                                   At(Kind::kPermits, 3, 10, 20, 2)},
                                  4);
  EXPECT_THAT(ok.violations, IsEmpty());
  EXPECT_EQ(ok.peak_permits, 4u);
  EXPECT_EQ(ok.peak_holders, 2);
  PermitsReport over =
      CheckPermits({At(Kind::kPermits, 1, 0, 10, 2), At(Kind::kPermits, 2, 5, 15, 2),
                    At(Kind::kPermits, 3, 9, 20, 1)},
                   4);
  EXPECT_EQ(over.violation_count, 1);
  EXPECT_EQ(over.peak_permits, 5u);
}

// --- The stress test ---------------------------------------------------------------------------

class KindsStress : public ConformanceTest {};

TEST_P(KindsStress, ReadersWritersAndSemaphoreHoldersKeepEveryRuleUnder16Clients) {
  std::atomic<int64_t> counter{0};
  std::atomic<int> errors{0};
  absl::Mutex mu;
  std::vector<HoldInterval> rw_seen;   // guarded by mu
  std::vector<HoldInterval> sem_seen;  // guarded by mu
  const absl::Time stop = absl::Now() + kStressDuration;

  auto fail = [&](const std::string& what, const grpc::Status& s) {
    if (++errors <= 5) {
      ADD_FAILURE() << what << ": " << s.error_code() << ": " << s.error_message();
    }
    absl::SleepFor(absl::Milliseconds(10));
  };
  auto client = [&](int c) {
    std::unique_ptr<LockService::Stub> stub = NewStub(Server(c)->address());
    std::mt19937 rng(c);
    const bool on_rw = c % 2 == 0;
    std::vector<HoldInterval> mine;
    while (absl::Now() < stop) {
      HoldInterval h;
      Acq a{on_rw ? "rw" : "sem", absl::StrCat("client-", c), absl::Seconds(30), absl::Seconds(30)};
      if (on_rw) {
        h.kind = rng() % kWriterOneIn == 0 ? Kind::kWriter : Kind::kReader;
        a.mode = h.kind == Kind::kWriter ? v1::LOCK_MODE_EXCLUSIVE : v1::LOCK_MODE_SHARED;
      } else {
        h.kind = Kind::kPermits;
        h.permits = 1 + rng() % 2;
        a.limit = kLimit;
        a.permits = h.permits;
      }
      v1::AcquireResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
      grpc::Status s = stub->Acquire(&ctx, ToRequest(a), &resp);
      if (!s.ok() || !resp.acquired()) {
        fail(absl::StrCat(a.owner, " acquiring ", a.name, " (acquired=", resp.acquired(), ")"), s);
        continue;
      }
      h.start = HoldClock::now();
      if (h.kind == Kind::kWriter) {
        // A deliberately non-atomic increment: a lost update shows a second
        // holder.
        int64_t v = counter.load(std::memory_order_relaxed);
        absl::SleepFor(absl::Microseconds(200));
        counter.store(v + 1, std::memory_order_relaxed);
      } else {
        absl::SleepFor(kHoldFor);
      }
      h.end = HoldClock::now();
      h.owner = a.owner;
      h.token = resp.fencing_token();
      mine.push_back(h);

      v1::ReleaseRequest rel;
      rel.set_name(a.name);
      rel.set_owner(a.owner);
      v1::ReleaseResponse rel_resp;
      grpc::ClientContext rctx;
      rctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
      s = stub->Release(&rctx, rel, &rel_resp);
      if (!s.ok() || !rel_resp.released()) fail(absl::StrCat(a.owner, " releasing ", a.name), s);
    }
    absl::MutexLock l(&mu);
    std::vector<HoldInterval>& seen = on_rw ? rw_seen : sem_seen;
    seen.insert(seen.end(), mine.begin(), mine.end());
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) threads.emplace_back(client, c);
  for (std::thread& t : threads) t.join();

  absl::MutexLock l(&mu);
  int writes = 0, reads = 0;
  for (const HoldInterval& h : rw_seen) (h.kind == Kind::kWriter ? writes : reads)++;
  std::cout << "[ stress   ] " << reads << " reads, " << writes << " writes, " << sem_seen.size()
            << " semaphore holds in " << kStressDuration << "\n";
  EXPECT_EQ(errors.load(), 0);
  ASSERT_GT(writes, 0);
  ASSERT_GT(reads, 0);
  ASSERT_FALSE(sem_seen.empty());

  ReadWriteReport rw = CheckReadWrite(rw_seen);
  EXPECT_EQ(rw.violation_count, 0) << "the read-write lock broke its rules";
  EXPECT_THAT(rw.violations, IsEmpty());
  EXPECT_GT(rw.reader_overlaps, 0) << "readers never held together: the lock serialises them";
  EXPECT_EQ(counter.load(), writes) << "lost updates: a writer was not alone";

  PermitsReport sem = CheckPermits(sem_seen, kLimit);
  EXPECT_EQ(sem.violation_count, 0) << "the semaphore broke its rules";
  EXPECT_THAT(sem.violations, IsEmpty());
  EXPECT_LE(sem.peak_permits, kLimit);
  EXPECT_GE(sem.peak_holders, 2) << "the semaphore never had two holders at once";
}

INSTANTIATE_TEST_SUITE_P(Backends, KindsStress, ::testing::ValuesIn(ReplicaCountsOfEnv()),
                         ReplicaCountName);

}  // namespace
}  // namespace lockd::testing
