// A waiting lockd::Client acquire cancelled from another thread
// (AcquireOptions::cancel, a CancellationToken), on both paths (the Session
// stream and the unary RPCs), against a real lockd process (memory backend):
// it returns kCancelled promptly, and nothing of it stays held on lockd,
// whether the cancel comes before the call, while it waits, or together with
// the grant.

#include <atomic>
#include <chrono>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "lockd/client.h"
#include "tests/integration/clients/one_lockd.h"
#include "tests/support/process.h"
#include "tests/support/status_matchers.h"

namespace lockd {
namespace {

using ::lockd::testing::OneLockd;
using ::lockd::testing::StatusIs;
using ::lockd::testing::WaitFor;

enum class Path { kSession, kUnary };

std::string PathName(const ::testing::TestParamInfo<Path>& info) {
  return info.param == Path::kSession ? "Session" : "Unary";
}

// Well under what a waiting acquire would take otherwise (seconds).
constexpr absl::Duration kPrompt = absl::Milliseconds(800);

class ClientCancelTest : public ::testing::TestWithParam<Path> {
 protected:
  void SetUp() override { ASSERT_TRUE(lockd_.Start().ok()); }

  // A Client on the path under test (the observer's path does not matter).
  Client NewClient() {
    ClientOptions options;
    options.keepalive = {absl::Seconds(1), absl::Milliseconds(500)};
    options.use_sessions = GetParam() == Path::kSession;
    return lockd_.NewClient(options);
  }

  static AcquireOptions Waiting(const CancellationToken& cancel,
                                absl::Duration wait = absl::Seconds(20)) {
    AcquireOptions o;
    o.ttl = absl::Seconds(10);  // session-safe with the keepalive above
    o.wait = wait;
    o.cancel = cancel;
    return o;
  }

  // True once lockd parks `n` waiters on `name`.
  bool WaitForWaiters(Client& observer, const std::string& name, uint32_t n) {
    return WaitFor(
        [&] {
          absl::StatusOr<LockInfo> info = observer.Describe(name);
          return info.ok() && info->waiters == n;
        },
        absl::Seconds(10), absl::Milliseconds(5));
  }

  // True once `name` is free with nobody waiting (a hold the cancelled call
  // left, or a give-back still on its way, would show).
  bool WaitForFree(Client& observer, const std::string& name) {
    return WaitFor(
        [&] {
          absl::StatusOr<LockInfo> info = observer.Describe(name);
          return info.ok() && !info->held && info->waiters == 0;
        },
        absl::Seconds(5), absl::Milliseconds(5));
  }

  // Runs `call` (an acquire waiting on `name` with the token it is given)
  // on a thread of its own, cancels the token once lockd has parked the
  // call, and returns what the call returned, checking that it returned
  // within kPrompt of the cancel.
  absl::Status CancelWhileItWaits(
      Client& observer, const std::string& name,
      const std::function<absl::Status(const CancellationToken&)>& call) {
    CancellationToken cancel;
    absl::Status status;
    absl::Time returned;
    std::thread t([&] {
      status = call(cancel);
      returned = absl::Now();
    });
    const bool parked = WaitForWaiters(observer, name, 1);
    const absl::Time cancelled_at = absl::Now();
    cancel.Cancel();
    t.join();
    EXPECT_TRUE(parked) << name;
    EXPECT_LT(returned - cancelled_at, kPrompt);
    return status;
  }

  OneLockd lockd_;
};

TEST_P(ClientCancelTest, CancelWhileWaitingReturnsCancelledPromptlyAndLeavesNothing) {
  Client holder = NewClient();
  Client waiter = NewClient();
  Client observer = NewClient();
  absl::StatusOr<Lease> held = holder.Acquire("orders/42", Waiting(CancellationToken()));
  ASSERT_TRUE(held.ok()) << held.status();

  absl::Status cancelled =
      CancelWhileItWaits(observer, "orders/42", [&](const CancellationToken& cancel) {
        return waiter.Acquire("orders/42", Waiting(cancel)).status();
      });
  EXPECT_THAT(cancelled, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_FALSE(UnconfirmedAcquireRequestId(cancelled).has_value());

  // The waiter's place in lockd's queue is gone: a release frees the lock
  // instead of granting it to the cancelled call.
  ASSERT_TRUE(held->Release().ok());
  EXPECT_TRUE(WaitForFree(observer, "orders/42"));
}

TEST_P(ClientCancelTest, CancelBeforeTheCallSendsNothing) {
  Client waiter = NewClient();
  Client observer = NewClient();
  CancellationToken cancel;
  cancel.Cancel();
  const absl::Time start = absl::Now();
  // The lock is free: a call that reached lockd would get it.
  EXPECT_THAT(waiter.Acquire("orders/42", Waiting(cancel)), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_THAT(waiter.AcquireAll({{"a"}, {"b"}}, Waiting(cancel)),
              StatusIs(absl::StatusCode::kCancelled));
  EXPECT_LT(absl::Now() - start, kPrompt);
  for (const char* name : {"orders/42", "a", "b"}) {
    absl::StatusOr<LockInfo> info = observer.Describe(name);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_FALSE(info->held) << name;
  }
  // A token is per call: the next call with a fresh one is not affected.
  absl::StatusOr<Lease> lease = waiter.Acquire("orders/42", Waiting(CancellationToken()));
  EXPECT_TRUE(lease.ok()) << lease.status();
}

TEST_P(ClientCancelTest, CancelOfAWaitingAcquireAllLeavesNoLockHeld) {
  Client holder = NewClient();
  Client waiter = NewClient();
  Client observer = NewClient();
  absl::StatusOr<Lease> held = holder.Acquire("b", Waiting(CancellationToken()));
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_THAT(
      CancelWhileItWaits(observer, "b",
                         [&](const CancellationToken& cancel) {
                           return waiter.AcquireAll({{"a"}, {"b"}}, Waiting(cancel)).status();
                         }),
      StatusIs(absl::StatusCode::kCancelled));
  ASSERT_TRUE(held->Release().ok());
  EXPECT_TRUE(WaitForFree(observer, "a"));
  EXPECT_TRUE(WaitForFree(observer, "b"));
}

// The holder releases at about the moment the waiter's token is cancelled,
// so lockd's grant and the cancel cross (in either order, varied at random).
// Whatever the outcome, nothing stays held: the call either returned its
// Lease (granted before it saw the cancel), which is released here, or
// kCancelled after lockd or the client gave the grant back.
TEST_P(ClientCancelTest, CancelRacingAGrantLeavesTheLockFree) {
  Client holder = NewClient();
  Client waiter = NewClient();
  Client observer = NewClient();
  absl::BitGen gen;
  int granted = 0, cancelled = 0;
  for (int i = 0; i < 15; ++i) {
    const std::string name = absl::StrCat("race/", i);
    absl::StatusOr<Lease> held = holder.Acquire(name, Waiting(CancellationToken()));
    ASSERT_TRUE(held.ok()) << held.status();
    CancellationToken cancel;
    std::optional<absl::StatusOr<Lease>> result;
    std::thread t([&] { result = waiter.Acquire(name, Waiting(cancel)); });
    ASSERT_TRUE(WaitForWaiters(observer, name, 1));

    // The cancel from 3 ms before the release to 5 ms after it was sent.
    const int offset_us = absl::Uniform(gen, -3000, 5000);
    std::atomic<bool> go{false};
    std::thread canceller([&] {
      while (!go.load()) {
      }
      if (offset_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(offset_us));
      cancel.Cancel();
    });
    go.store(true);
    if (offset_us < 0) std::this_thread::sleep_for(std::chrono::microseconds(-offset_us));
    ASSERT_TRUE(held->Release().ok());
    canceller.join();
    t.join();

    if (result->ok()) {
      ++granted;
      EXPECT_TRUE((*result)->Release().ok());
    } else {
      ++cancelled;
      EXPECT_THAT(result->status(), StatusIs(absl::StatusCode::kCancelled));
      EXPECT_FALSE(UnconfirmedAcquireRequestId(result->status()).has_value());
    }
    EXPECT_TRUE(WaitForFree(observer, name)) << "round " << i;
    // And the waiter's owner can take it at once: no hold of its own in the way
    // nor one of anyone else.
    absl::StatusOr<Lease> again = waiter.TryAcquire(name, Waiting(CancellationToken()));
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->hold_count(), 1u) << "round " << i;
  }
  std::cout << "granted " << granted << ", cancelled " << cancelled << " of 15 rounds\n";
}

INSTANTIATE_TEST_SUITE_P(BothPaths, ClientCancelTest,
                         ::testing::Values(Path::kSession, Path::kUnary), PathName);

}  // namespace
}  // namespace lockd
