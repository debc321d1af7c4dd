// AcquireCall over the memory backend: the request_id default, the answer
// for each delivery, and the give-back of a grant nobody saw.

#include "service/acquire_call.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/synchronization/notification.h"
#include "backends/memory/memory_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/sync_backend.h"

namespace lockd {
namespace {

using ::lockd::testing::Acq;
using ::lockd::testing::StatusIs;
using ::lockd::testing::SyncDescribe;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

// Starts `params` through AcquireCall and waits for its answer.
std::pair<std::optional<AcquireCall>, absl::StatusOr<AcquireResult>> StartAndWait(
    Backend& backend, AcquireParams params) {
  std::optional<AcquireCall> call;
  absl::StatusOr<AcquireResult> result = absl::UnknownError("no answer");
  absl::Notification done;
  AcquireCall::Start(&backend, std::move(params), std::make_shared<CancelSignal>(),
                     [&](const AcquireCall& c, absl::StatusOr<AcquireResult> r) {
                       call = c;
                       result = std::move(r);
                       done.Notify();
                     });
  done.WaitForNotification();
  return {std::move(call), std::move(result)};
}

TEST(AcquireCallTest, GeneratedIdsHaveTheirForm) {
  EXPECT_THAT(DefaultOwner(nullptr, "anyone"), MatchesRegex("[0-9a-f]{32}"));
  EXPECT_THAT(NewRequestId(), MatchesRegex("\x01[0-9a-f]{32}"));
  EXPECT_NE(NewRequestId(), NewRequestId());
}

TEST(AcquireCallTest, GivesEveryAcquireARequestIdAndKeepsTheCallers) {
  std::unique_ptr<Backend> backend = *NewMemoryBackend(MemoryOptions());
  auto [generated, r1] = StartAndWait(*backend, Acq("a", "alice"));
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_THAT(generated->request_id(), MatchesRegex("\x01[0-9a-f]{32}"));
  auto [given, r2] =
      StartAndWait(*backend, Acq("b", "alice", absl::Seconds(30), absl::ZeroDuration(), "req-1"));
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(given->request_id(), "req-1");
  EXPECT_EQ(given->owner(), "alice");
  EXPECT_EQ(given->key().name, "b");
  backend->Shutdown();
}

TEST(AcquireCallTest, DeliveredGrantFillsTheResponse) {
  std::unique_ptr<Backend> backend = *NewMemoryBackend(MemoryOptions());
  auto [call, r] = StartAndWait(*backend, Acq("a", "alice", absl::Seconds(30)));
  v1::AcquireResponse resp;
  ASSERT_TRUE(call->Answer(r, AcquireCall::Delivery::kDeliver, &resp).ok());
  EXPECT_TRUE(resp.acquired());
  EXPECT_EQ(resp.owner(), "alice");
  EXPECT_EQ(resp.fencing_token(), r->fencing_token);
  EXPECT_EQ(resp.hold_count(), 1u);
  EXPECT_EQ(resp.lease_ttl().seconds(), 30);

  auto [refused, r2] = StartAndWait(*backend, Acq("a", "bob"));
  v1::AcquireResponse held;
  ASSERT_TRUE(refused->Answer(r2, AcquireCall::Delivery::kDeliver, &held).ok());
  EXPECT_FALSE(held.acquired());
  EXPECT_EQ(held.owner(), "bob");
  EXPECT_EQ(held.current().owner(), "alice");
  EXPECT_EQ(held.current().backend(), "memory");
  backend->Shutdown();
}

TEST(AcquireCallTest, UndeliveredGrantIsGivenBack) {
  std::unique_ptr<Backend> backend = *NewMemoryBackend(MemoryOptions());
  for (AcquireCall::Delivery delivery :
       {AcquireCall::Delivery::kCancelled, AcquireCall::Delivery::kTooLate}) {
    auto [call, r] = StartAndWait(*backend, Acq("a", "alice"));
    ASSERT_TRUE(r.ok() && r->acquired);
    v1::AcquireResponse resp;
    grpc::Status s = call->Answer(r, delivery, &resp);
    if (delivery == AcquireCall::Delivery::kCancelled) {
      EXPECT_THAT(s, StatusIs(grpc::StatusCode::CANCELLED));
      EXPECT_EQ(s.error_message(), "acquire cancelled; the grant was released");
    } else {
      EXPECT_THAT(s, StatusIs(grpc::StatusCode::DEADLINE_EXCEEDED));
      EXPECT_THAT(s.error_message(), HasSubstr("the grant was released"));
    }
    EXPECT_FALSE(resp.acquired());
    // The memory backend answers the give-back before Release returns.
    absl::StatusOr<LockState> state = SyncDescribe(*backend, call->key());
    ASSERT_TRUE(state.ok()) << state.status();
    EXPECT_FALSE(state->held);
  }
  backend->Shutdown();
}

TEST(AcquireCallTest, BackendErrorIsAnsweredAsIs) {
  std::unique_ptr<Backend> backend = *NewMemoryBackend(MemoryOptions());
  auto [call, r] = StartAndWait(*backend, Acq("a", "alice"));
  v1::AcquireResponse resp;
  EXPECT_THAT(call->Answer(absl::UnavailableError("down"), AcquireCall::Delivery::kDeliver, &resp),
              StatusIs(grpc::StatusCode::UNAVAILABLE));
  backend->Shutdown();
}

TEST(AcquireCallTest, GrantIsTooLateWithinTheMarginOfTheDeadline) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  const absl::Time deadline = start + absl::Seconds(10);
  EXPECT_FALSE(TooLateToDeliver(start, deadline, deadline - absl::Milliseconds(101)));
  EXPECT_TRUE(TooLateToDeliver(start, deadline, deadline - absl::Milliseconds(99)));
  // A 200 ms call: the margin is a quarter of it.
  EXPECT_FALSE(
      TooLateToDeliver(start, start + absl::Milliseconds(200), start + absl::Milliseconds(149)));
  EXPECT_TRUE(
      TooLateToDeliver(start, start + absl::Milliseconds(200), start + absl::Milliseconds(151)));
}

}  // namespace
}  // namespace lockd
