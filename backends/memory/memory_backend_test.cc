// The memory backend's rules of kinds (backend.h "Kinds"), called directly:
// read-write locks and semaphores, their queue, holders and errors. The
// cross-backend conformance suite (tests/conformance) runs the same rules
// through the service; these cases pin the reference implementation.

#include "backends/memory/memory_backend.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/sync_backend.h"

namespace lockd {
namespace {

using ::lockd::testing::Acq;
using ::lockd::testing::StartAcquire;
using ::lockd::testing::StatusIs;
using ::lockd::testing::SyncAcquire;
using ::lockd::testing::SyncDescribe;
using ::lockd::testing::SyncForceRelease;
using ::lockd::testing::SyncRelease;
using ::lockd::testing::SyncRenew;
using ::testing::ElementsAre;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

const LockKey kKey{"default", "k"};
constexpr absl::Duration kWait = absl::Seconds(10);
// Long enough for a parked call to show that it is still parked.
constexpr absl::Duration kStillParked = absl::Milliseconds(50);

AcquireParams Shared(const std::string& owner, absl::Duration wait = absl::ZeroDuration()) {
  AcquireParams p = Acq("k", owner, absl::Seconds(30), wait);
  p.mode = LockMode::kShared;
  return p;
}
AcquireParams Exclusive(const std::string& owner, absl::Duration wait = absl::ZeroDuration()) {
  return Acq("k", owner, absl::Seconds(30), wait);
}
AcquireParams Permits(const std::string& owner, uint32_t limit, uint32_t permits,
                      absl::Duration wait = absl::ZeroDuration()) {
  AcquireParams p = Acq("k", owner, absl::Seconds(30), wait);
  p.limit = limit;
  p.permits = permits;
  return p;
}

class MemoryKindsTest : public ::testing::Test {
 protected:
  // OK and acquired, or the test fails; returns the fencing token.
  uint64_t Take(AcquireParams p) {
    absl::StatusOr<AcquireResult> r = SyncAcquire(*backend_, std::move(p));
    EXPECT_TRUE(r.ok() && r->acquired) << r.status();
    return r.ok() ? r->fencing_token : 0;
  }
  bool Granted(AcquireParams p) {
    absl::StatusOr<AcquireResult> r = SyncAcquire(*backend_, std::move(p));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() && r->acquired;
  }
  void Release(const std::string& owner) {
    absl::StatusOr<ReleaseResult> r = SyncRelease(*backend_, testing::Rel("k", owner));
    EXPECT_TRUE(r.ok()) << r.status();
  }
  LockState Describe() { return *SyncDescribe(*backend_, kKey); }

  std::unique_ptr<Backend> backend_ = *NewMemoryBackend(MemoryOptions());
};

TEST_F(MemoryKindsTest, ReadersShareAndEachGetsALargerToken) {
  const uint64_t t1 = Take(Shared("r1"));
  const uint64_t t2 = Take(Shared("r2"));
  EXPECT_GT(t2, t1);
  EXPECT_FALSE(Granted(Exclusive("w")));
  LockState s = Describe();
  EXPECT_TRUE(s.held);
  EXPECT_EQ(s.mode, LockMode::kShared);
  ASSERT_EQ(s.holders.size(), 2u);
  EXPECT_EQ(s.holders[0].owner, "r1");
  EXPECT_EQ(s.holders[1].owner, "r2");
  EXPECT_EQ(s.owner, "r2");  // the newest holder
  EXPECT_EQ(s.fencing_token, t2);
}

TEST_F(MemoryKindsTest, AWaitingWriterHoldsBackLaterReadersAndGetsInAfterTheHolders) {
  Take(Shared("r1"));
  auto w = StartAcquire(*backend_, Exclusive("w", kWait));
  EXPECT_FALSE(Granted(Shared("r2")));  // behind the writer: no barging
  auto r3 = StartAcquire(*backend_, Shared("r3", kWait));
  EXPECT_EQ(Describe().waiters, 2u);
  Release("r1");
  absl::StatusOr<AcquireResult> wr = w->Wait();
  ASSERT_TRUE(wr.ok() && wr->acquired);
  absl::SleepFor(kStillParked);
  EXPECT_FALSE(r3->ready());
  Release("w");
  EXPECT_TRUE(r3->Wait()->acquired);
}

TEST_F(MemoryKindsTest, ReadersAtTheHeadAreGrantedTogether) {
  Take(Exclusive("w"));
  auto r1 = StartAcquire(*backend_, Shared("r1", kWait));
  auto r2 = StartAcquire(*backend_, Shared("r2", kWait));
  auto w2 = StartAcquire(*backend_, Exclusive("w2", kWait));
  Release("w");
  EXPECT_TRUE(r1->Wait()->acquired);
  EXPECT_TRUE(r2->Wait()->acquired);
  absl::SleepFor(kStillParked);
  EXPECT_FALSE(w2->ready());
  EXPECT_EQ(Describe().holders.size(), 2u);
}

TEST_F(MemoryKindsTest, SemaphoreAdmitsWhilePermitsFitWithoutBarging) {
  Take(Permits("a", 3, 2));
  auto b = StartAcquire(*backend_, Permits("b", 3, 2, kWait));
  EXPECT_FALSE(Granted(Permits("c", 3, 1)));  // would fit, but b waits ahead
  LockState s = Describe();
  EXPECT_EQ(s.limit, 3u);
  EXPECT_EQ(s.waiters, 1u);
  Release("a");
  EXPECT_TRUE(b->Wait()->acquired);
  EXPECT_TRUE(Granted(Permits("c", 3, 1)));
  EXPECT_FALSE(Granted(Permits("d", 3, 1)));
}

TEST_F(MemoryKindsTest, AnotherKindFailsAtOnceWhateverItsWait) {
  Take(Exclusive("a"));
  absl::StatusOr<AcquireResult> r = SyncAcquire(*backend_, Permits("b", 3, 1, kWait));
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(ErrorReasonOf(r.status()), kLockKindMismatchReason);
  EXPECT_THAT(ErrorMetadataOf(r.status()), ElementsAre(Pair("kind", "lock")));
  Release("a");

  Take(Permits("a", 3, 1));
  r = SyncAcquire(*backend_, Shared("b", kWait));
  EXPECT_EQ(ErrorReasonOf(r.status()), kLockKindMismatchReason);
  r = SyncAcquire(*backend_, Permits("b", 4, 1, kWait));  // another limit
  EXPECT_EQ(ErrorReasonOf(r.status()), kLockKindMismatchReason);
  EXPECT_THAT(ErrorMetadataOf(r.status()),
              UnorderedElementsAre(Pair("kind", "semaphore"), Pair("limit", "3")));
  EXPECT_EQ(Describe().holders.size(), 1u);
}

TEST_F(MemoryKindsTest, ReentrancyAcrossModesAndTheUpgradeRule) {
  // EXCLUSIVE then SHARED: a reentrant exclusive hold.
  const uint64_t t = Take(Exclusive("o"));
  absl::StatusOr<AcquireResult> r = SyncAcquire(*backend_, Shared("o"));
  ASSERT_TRUE(r.ok() && r->acquired);
  EXPECT_EQ(r->fencing_token, t);
  EXPECT_EQ(r->hold_count, 2u);
  EXPECT_EQ(Describe().mode, LockMode::kExclusive);
  Release("o");
  Release("o");

  // SHARED, alone and nobody waiting: the upgrade is a new grant.
  const uint64_t s = Take(Shared("o"));
  r = SyncAcquire(*backend_, Exclusive("o"));
  ASSERT_TRUE(r.ok() && r->acquired);
  EXPECT_GT(r->fencing_token, s);
  EXPECT_EQ(r->hold_count, 2u);
  EXPECT_EQ(Describe().mode, LockMode::kExclusive);
  EXPECT_FALSE(Granted(Shared("p")));
  Release("o");
  Release("o");

  // Beside another reader: the upgrade would block.
  Take(Shared("o"));
  Take(Shared("p"));
  r = SyncAcquire(*backend_, Exclusive("o", kWait));
  EXPECT_EQ(ErrorReasonOf(r.status()), kUpgradeWouldBlockReason);
  EXPECT_EQ(Describe().holders[0].hold_count, 1u);
}

TEST_F(MemoryKindsTest, UpgradeWouldBlockWhileSomeoneWaits) {
  Take(Shared("o"));
  auto w = StartAcquire(*backend_, Exclusive("w", kWait));
  absl::StatusOr<AcquireResult> r = SyncAcquire(*backend_, Exclusive("o"));
  EXPECT_EQ(ErrorReasonOf(r.status()), kUpgradeWouldBlockReason);
  Release("o");
  EXPECT_TRUE(w->Wait()->acquired);
}

TEST_F(MemoryKindsTest, SemaphoreReentryMustAskThePermitsHeld) {
  const uint64_t t = Take(Permits("o", 5, 2));
  absl::StatusOr<AcquireResult> r = SyncAcquire(*backend_, Permits("o", 5, 2));
  ASSERT_TRUE(r.ok() && r->acquired);
  EXPECT_EQ(r->fencing_token, t);
  EXPECT_EQ(r->hold_count, 2u);
  r = SyncAcquire(*backend_, Permits("o", 5, 3));
  EXPECT_EQ(ErrorReasonOf(r.status()), kPermitsMismatchReason);
}

TEST_F(MemoryKindsTest, EachHolderHasItsOwnLease) {
  AcquireParams brief = Shared("r1");
  brief.ttl = absl::Milliseconds(100);
  Take(brief);
  Take(Shared("r2"));
  auto w = StartAcquire(*backend_, Exclusive("w", kWait));
  absl::SleepFor(absl::Milliseconds(250));
  LockState s = Describe();
  ASSERT_EQ(s.holders.size(), 1u);
  EXPECT_EQ(s.holders[0].owner, "r2");
  EXPECT_THAT(SyncRelease(*backend_, testing::Rel("k", "r1")),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_FALSE(w->ready());
  Release("r2");
  EXPECT_TRUE(w->Wait()->acquired);
}

TEST_F(MemoryKindsTest, AnExpiredPermitLetsTheHeadIn) {
  AcquireParams brief = Permits("a", 1, 1);
  brief.ttl = absl::Milliseconds(100);
  Take(brief);
  auto b = StartAcquire(*backend_, Permits("b", 1, 1, kWait));
  EXPECT_TRUE(b->Wait()->acquired);  // by the lease-end timer, no other call
}

TEST_F(MemoryKindsTest, ReleaseAndRenewActOnTheCallersHoldOnly) {
  Take(Shared("r1"));
  const uint64_t t2 = Take(Shared("r2"));
  absl::StatusOr<RenewResult> renewed =
      SyncRenew(*backend_, RenewParams{kKey, "r2", absl::Seconds(60), t2});
  ASSERT_TRUE(renewed.ok());
  EXPECT_EQ(renewed->fencing_token, t2);
  absl::StatusOr<ReleaseResult> r = SyncRelease(*backend_, testing::Rel("k", "r1"));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->released);  // the caller's hold is gone; r2 still holds
  LockState s = Describe();
  ASSERT_EQ(s.holders.size(), 1u);
  EXPECT_EQ(s.holders[0].owner, "r2");
  EXPECT_GT(s.holders[0].ttl_remaining, absl::Seconds(30));
}

TEST_F(MemoryKindsTest, UndoOfAnAcquireGivesBackThatHoldOnly) {
  Take(Shared("r1"));
  AcquireParams p = Shared("r2");
  p.request_id = "req-1";
  Take(p);
  ReleaseParams undo{kKey, "r2"};
  undo.acquire_request_id = "req-1";
  absl::StatusOr<ReleaseResult> r = SyncRelease(*backend_, undo);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->released);
  r = SyncRelease(*backend_, undo);  // a repeat changes nothing
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->released);
  LockState s = Describe();
  ASSERT_EQ(s.holders.size(), 1u);
  EXPECT_EQ(s.holders[0].owner, "r1");
}

TEST_F(MemoryKindsTest, ForceReleaseFreesOneHolderByTokenOrAll) {
  Take(Shared("r1"));
  const uint64_t t2 = Take(Shared("r2"));
  auto w = StartAcquire(*backend_, Exclusive("w", kWait));
  absl::StatusOr<ForceReleaseResult> f = SyncForceRelease(*backend_, ForceReleaseParams{kKey, t2});
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->released);
  EXPECT_EQ(f->previous.holders.size(), 2u);
  EXPECT_EQ(Describe().holders.size(), 1u);
  EXPECT_THAT(SyncForceRelease(*backend_, ForceReleaseParams{kKey, t2}),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_FALSE(w->ready());
  f = SyncForceRelease(*backend_, ForceReleaseParams{kKey});
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(w->Wait()->acquired);
}

TEST_F(MemoryKindsTest, ACancelledWriterAtTheHeadLetsTheReadersBehindItIn) {
  Take(Shared("r1"));
  auto cancel = std::make_shared<CancelSignal>();
  auto w = StartAcquire(*backend_, Exclusive("w", kWait), cancel);
  auto r2 = StartAcquire(*backend_, Shared("r2", kWait));
  absl::SleepFor(kStillParked);
  EXPECT_FALSE(r2->ready());
  cancel->Cancel();
  EXPECT_THAT(w->Wait(), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_TRUE(r2->Wait()->acquired);
  LockState s = Describe();
  EXPECT_EQ(s.holders.size(), 2u);
  EXPECT_EQ(s.waiters, 0u);
}

TEST_F(MemoryKindsTest, ATimedOutSemaphoreHeadLetsTheSmallerOnesBehindItIn) {
  Take(Permits("a", 3, 2));
  auto big = StartAcquire(*backend_, Permits("big", 3, 2, absl::Milliseconds(100)));
  auto small = StartAcquire(*backend_, Permits("small", 3, 1, kWait));
  absl::StatusOr<AcquireResult> r = big->Wait();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->acquired);
  EXPECT_TRUE(small->Wait()->acquired);
  EXPECT_EQ(Describe().waiters, 0u);
}

// A parked EXCLUSIVE call whose owner comes to hold SHARED (its SHARED call
// was ahead of it) waited: the upgrade is refused, not left to deadlock.
TEST_F(MemoryKindsTest, AParkedUpgradeIsRefusedWhenItsOwnerIsGrantedShared) {
  Take(Exclusive("w"));
  auto shared = StartAcquire(*backend_, Shared("o", kWait));
  auto upgrade = StartAcquire(*backend_, Exclusive("o", kWait));
  Release("w");
  EXPECT_TRUE(shared->Wait()->acquired);
  EXPECT_EQ(ErrorReasonOf(upgrade->Wait().status()), kUpgradeWouldBlockReason);
}

}  // namespace
}  // namespace lockd
