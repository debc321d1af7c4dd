// ForceRelease (docs/api.md "ForceRelease") in the conformance
// suite: every backend, with one lockd and with three replicas (then the
// operator's call goes to another replica than the holder's and waiter's).

#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/conformance/conformance.h"
#include "tests/support/status_matchers.h"

namespace lockd::testing {
namespace {

using ::testing::HasSubstr;

class ForceReleaseRules : public ConformanceTest {
 protected:
  // The operator's replica: another one than the holder's when there are
  // several.
  LockService::Stub* Operator() { return Stub(1); }

  grpc::Status ForceRelease(const std::string& name, uint64_t token, v1::ForceReleaseResponse* resp,
                            const std::string& reason = "conformance test") {
    return ConformanceTest::ForceRelease(name, token, resp, Operator(), reason);
  }
};

TEST_P(ForceReleaseRules, FreesTheLockWhateverOwnerAndHoldCount) {
  uint64_t token = MustAcquire("job", "alice");
  MustAcquire("job", "alice");
  MustAcquire("job", "alice");
  v1::ForceReleaseResponse resp;
  grpc::Status s = ForceRelease("job", 0, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(resp.released());
  EXPECT_TRUE(resp.previous().held());
  EXPECT_EQ(resp.previous().owner(), "alice");
  EXPECT_EQ(resp.previous().hold_count(), 3u);
  EXPECT_EQ(resp.previous().fencing_token(), token);
  EXPECT_EQ(resp.previous().name(), "job");
  EXPECT_EQ(resp.previous().backend(), Env().name());
  EXPECT_FALSE(Describe("job").held());
}

TEST_P(ForceReleaseRules, NextGrantGetsALargerToken) {
  uint64_t t1 = MustAcquire("tok", "alice");
  v1::ForceReleaseResponse resp;
  ASSERT_TRUE(ForceRelease("tok", 0, &resp).ok());
  uint64_t t2 = MustAcquire("tok", "bob");
  EXPECT_GT(t2, t1);
  ASSERT_TRUE(ForceRelease("tok", t2, &resp).ok());
  EXPECT_TRUE(resp.released());
  EXPECT_GT(MustAcquire("tok", "alice"), t2);
}

TEST_P(ForceReleaseRules, FormerHoldersReleaseAndRenewAreLockNotHeld) {
  MustAcquire("former", "alice");
  v1::ForceReleaseResponse resp;
  ASSERT_TRUE(ForceRelease("former", 0, &resp).ok());
  v1::RenewResponse renewed;
  EXPECT_THAT(Renew("former", "alice", absl::Seconds(30), &renewed), IsLockNotHeld());
  v1::ReleaseResponse released;
  EXPECT_THAT(Release("former", "alice", &released), IsLockNotHeld());
  // Also once another owner holds it.
  MustAcquire("former", "bob");
  EXPECT_THAT(Release("former", "alice", &released), IsLockNotHeld());
  EXPECT_EQ(Describe("former").owner(), "bob");
}

TEST_P(ForceReleaseRules, WaiterIsGrantedRightAway) {
  uint64_t t1 = MustAcquire("queue", "alice");
  v1::AcquireResponse waited;
  grpc::Status status;
  absl::Time granted_at;
  std::thread waiter([&] {
    status = Acquire({"queue", "bob", absl::Seconds(30), absl::Seconds(60)}, &waited);
    granted_at = absl::Now();
  });
  WaitForWaiters("queue", 1);
  v1::ForceReleaseResponse resp;
  absl::Time forced_at = absl::Now();
  ASSERT_TRUE(ForceRelease("queue", t1, &resp).ok());
  EXPECT_TRUE(resp.released());
  waiter.join();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(waited.acquired());
  EXPECT_GT(waited.fencing_token(), t1);
  EXPECT_LT(granted_at - forced_at, absl::Seconds(2)) << "the waiter was not woken";
  EXPECT_EQ(Describe("queue").owner(), "bob");
}

TEST_P(ForceReleaseRules, TokenMismatchIsFailedPreconditionAndChangesNothing) {
  uint64_t token = MustAcquire("guarded", "alice");
  v1::ForceReleaseResponse resp;
  grpc::Status s = ForceRelease("guarded", token + 1, &resp);
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_EQ(ErrorReason(s), "lockd/FENCING_TOKEN_MISMATCH");
  EXPECT_THAT(s.error_message(), HasSubstr("fencing_token"));
  v1::LockInfo info = Describe("guarded");
  EXPECT_TRUE(info.held());
  EXPECT_EQ(info.owner(), "alice");
  EXPECT_EQ(info.fencing_token(), token);
  ASSERT_TRUE(ForceRelease("guarded", token, &resp).ok());
  EXPECT_TRUE(resp.released());
  EXPECT_FALSE(Describe("guarded").held());
}

TEST_P(ForceReleaseRules, FreeLockAnswersNotReleased) {
  v1::ForceReleaseResponse resp;
  grpc::Status s = ForceRelease("never-held", 0, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(resp.released());
  EXPECT_FALSE(resp.previous().held());
}

TEST_P(ForceReleaseRules, BadInputIsInvalidArgumentNamingTheFieldAndChangesNothing) {
  MustAcquire("kept", "alice");
  v1::ForceReleaseResponse resp;
  grpc::Status s = ForceRelease("kept", 0, &resp, /*reason=*/"");
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_THAT(s.error_message(), HasSubstr("reason"));
  s = ForceRelease("", 0, &resp);
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_THAT(s.error_message(), HasSubstr("name"));
  EXPECT_EQ(Describe("kept").owner(), "alice");
}

INSTANTIATE_TEST_SUITE_P(Backends, ForceReleaseRules, ::testing::ValuesIn(ReplicaCountsOfEnv()),
                         ReplicaCountName);

}  // namespace
}  // namespace lockd::testing
