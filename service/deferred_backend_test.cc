// DeferredBackend over start attempts the test scripts: UNAVAILABLE and not
// healthy until an attempt starts the (memory) backend, then every call goes
// to it; Shutdown with or without a started backend.

#include "service/deferred_backend.h"

#include <atomic>
#include <memory>
#include <utility>

#include "absl/time/clock.h"
#include "backends/memory/memory_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/sync_backend.h"

namespace lockd {
namespace {

using ::lockd::testing::Acq;
using ::lockd::testing::StatusIs;
using ::lockd::testing::SyncAcquire;
using ::lockd::testing::SyncDescribe;
using ::testing::HasSubstr;

// Fails with kUnavailable until `*attempts` reaches `succeed_at`, then
// starts a memory backend.
DeferredBackend::StartFn StartAt(int succeed_at, std::atomic<int>* attempts) {
  return [succeed_at, attempts]() -> absl::StatusOr<std::unique_ptr<Backend>> {
    if (++*attempts < succeed_at) return absl::UnavailableError("connection refused");
    return NewMemoryBackend(MemoryOptions());
  };
}

TEST(DeferredBackendTest, UnavailableUntilAnAttemptStartsTheBackendThenServes) {
  std::atomic<int> attempts{0};
  DeferredBackend b("memory", absl::UnavailableError("connection refused"), StartAt(3, &attempts),
                    absl::Milliseconds(20));
  EXPECT_EQ(b.name(), "memory");
  EXPECT_THAT(SyncAcquire(b, Acq("x", "o")),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("memory backend not started: connection refused")));
  EXPECT_THAT(b.Health(), StatusIs(absl::StatusCode::kUnavailable));

  absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (!b.Health().ok() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_TRUE(b.Health().ok()) << b.Health();
  EXPECT_EQ(attempts.load(), 3);
  absl::StatusOr<AcquireResult> r = SyncAcquire(b, Acq("x", "o"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->acquired);
  absl::StatusOr<LockState> state = SyncDescribe(b, LockKey{"default", "x"});
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->owner, "o");

  b.Shutdown();
  EXPECT_THAT(SyncAcquire(b, Acq("y", "o")), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(attempts.load(), 3) << "tried again after starting";
}

TEST(DeferredBackendTest, ShutdownStopsTheAttempts) {
  std::atomic<int> attempts{0};
  DeferredBackend b("redis", absl::UnavailableError("connection refused"),
                    StartAt(1000000, &attempts), absl::Milliseconds(5));
  while (attempts.load() < 2) absl::SleepFor(absl::Milliseconds(5));
  b.Shutdown();
  const int after = attempts.load();
  EXPECT_THAT(SyncAcquire(b, Acq("x", "o")),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("shutting down")));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(attempts.load(), after);
  b.Shutdown();  // idempotent
}

}  // namespace
}  // namespace lockd
