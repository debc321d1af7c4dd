// ChooseAcquirePath: each row of its table (acquire_path.h). The paths
// themselves are tested through lockd::Client (client_test.cc,
// session_abandon_test.cc and tests/integration/clients/).

#include "clients/cpp/src/acquire_path.h"

#include <memory>

#include "clients/cpp/src/client_core.h"
#include "clients/cpp/src/client_test_fixture.h"
#include "tests/support/status_matchers.h"

namespace lockd::client_internal {
namespace {

using ::lockd::testing::StatusIs;

class ChooseAcquirePathTest : public ::testing::Test {
 protected:
  ChooseAcquirePathTest()
      : stub_(std::make_shared<::testing::NiceMock<v1::MockLockServiceStub>>()) {
    options_.owner = "test-owner";
    // K = 2 s + 2 s: session_safe needs ttl*2/3 - drift > 4 s, ttl >= about 6.1 s.
    options_.keepalive.time = absl::Seconds(2);
    options_.keepalive.timeout = absl::Seconds(2);
  }

  ClientCore& Core() {
    if (core_ == nullptr) core_ = std::make_unique<ClientCore>(stub_, nullptr, options_);
    return *core_;
  }

  AcquireCall Call(absl::Duration ttl) {
    absl::StatusOr<AcquireCall> call = NewAcquireCall(Core(), "orders/42", Ttl(ttl));
    EXPECT_TRUE(call.ok()) << call.status();
    return call.ok() ? *std::move(call) : AcquireCall();
  }

  AcquirePath Choose(const AcquireCall& call) { return ChooseAcquirePath(Core(), call); }

  std::shared_ptr<::testing::NiceMock<v1::MockLockServiceStub>> stub_;
  ClientOptions options_;
  std::unique_ptr<ClientCore> core_;
};

TEST_F(ChooseAcquirePathTest, SessionWhenNoRowSaysUnary) {
  EXPECT_EQ(Choose(Call(absl::ZeroDuration())), AcquirePath::kSession);
  // Zero (the server's default) fixed the session's lease: the same again.
  EXPECT_EQ(Choose(Call(absl::ZeroDuration())), AcquirePath::kSession);
}

TEST_F(ChooseAcquirePathTest, UnaryWhenSessionsAreOff) {
  options_.use_sessions = false;
  EXPECT_EQ(Choose(Call(absl::ZeroDuration())), AcquirePath::kUnary);
}

TEST_F(ChooseAcquirePathTest, UnaryForAnotherOwner) {
  AcquireCall call = Call(absl::ZeroDuration());
  call.owner = "someone-else";
  EXPECT_EQ(Choose(call), AcquirePath::kUnary);
}

TEST_F(ChooseAcquirePathTest, UnaryWithoutAutoRenew) {
  AcquireCall call = Call(absl::ZeroDuration());
  call.auto_renew = false;
  EXPECT_EQ(Choose(call), AcquirePath::kUnary);
}

TEST_F(ChooseAcquirePathTest, UnaryForATtlTooShortToOutlastAHang) {
  EXPECT_EQ(Choose(Call(absl::Seconds(6))), AcquirePath::kUnary);
  EXPECT_EQ(Choose(Call(absl::Seconds(7))), AcquirePath::kSession);
}

TEST_F(ChooseAcquirePathTest, UnaryWhenTheSessionsLeaseIsTooShort) {
  options_.session_ttl = absl::Seconds(6);
  EXPECT_EQ(Choose(Call(absl::ZeroDuration())), AcquirePath::kUnary);
}

TEST_F(ChooseAcquirePathTest, UnaryForATtlOtherThanTheSessionsLease) {
  // The first Acquire fixes the session's lease.
  EXPECT_EQ(Choose(Call(absl::Seconds(30))), AcquirePath::kSession);
  EXPECT_EQ(Choose(Call(absl::Seconds(20))), AcquirePath::kUnary);
  EXPECT_EQ(Choose(Call(absl::Seconds(30))), AcquirePath::kSession);
  EXPECT_EQ(Choose(Call(absl::ZeroDuration())), AcquirePath::kSession);
}

TEST_F(ChooseAcquirePathTest, UnaryFromThenOnOnceLockdHasNoSessionStream) {
  // The mock's Session RPC returns no stream, as a lockd without it answers
  // UNIMPLEMENTED.
  AcquireCall call = Call(absl::ZeroDuration());
  ASSERT_EQ(Choose(call), AcquirePath::kSession);
  EXPECT_THAT(Core().session().Acquire(call), StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_EQ(Choose(call), AcquirePath::kUnary);
}

TEST_F(ChooseAcquirePathTest, NegativeOptionsAreRejected) {
  AcquireOptions options;
  options.wait = absl::Seconds(-1);
  EXPECT_THAT(NewAcquireCall(Core(), "orders/42", options),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace lockd::client_internal
