// LockService over a backend whose server refuses lockd's credentials: every
// RPC answers UNAVAILABLE, never UNAUTHENTICATED (that code is the caller's
// own credentials, see auth.h).

#include <memory>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "lockd/v1/lock.grpc.pb.h"
#include "service/server.h"
#include "tests/support/status_matchers.h"

namespace lockd {
namespace {

using ::lockd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// Answers every call as a backend does when its server refuses lockd's
// password (the Redis backend's message).
class RefusingBackend final : public Backend {
 public:
  absl::string_view name() const override { return "refusing"; }
  void Acquire(AcquireParams, std::shared_ptr<CancelSignal>,
               Callback<AcquireResult> done) override {
    std::move(done)(Refused());
  }
  void Release(ReleaseParams, Callback<ReleaseResult> done) override { std::move(done)(Refused()); }
  void Renew(RenewParams, Callback<RenewResult> done) override { std::move(done)(Refused()); }
  void Describe(LockKey, Callback<LockState> done) override { std::move(done)(Refused()); }
  void List(ListParams, Callback<ListResult> done) override { std::move(done)(Refused()); }
  void ForceRelease(ForceReleaseParams, Callback<ForceReleaseResult> done) override {
    std::move(done)(Refused());
  }
  absl::Status Health() const override { return absl::OkStatus(); }
  void Shutdown() override {}

 private:
  static absl::Status Refused() {
    return absl::UnauthenticatedError(
        "redis 127.0.0.1:6379: authentication failed: WRONGPASS invalid username-password pair");
  }
};

TEST(LockServiceTest, BackendRefusingLockdsCredentialsIsUnavailableForEveryRpc) {
  Config config;
  config.listen = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<LockdServer>> server =
      LockdServer::Start(config, std::make_unique<RefusingBackend>());
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::LockService::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
  auto expect_unavailable = [](const grpc::Status& s, const char* rpc) {
    EXPECT_THAT(s, StatusIs(grpc::StatusCode::UNAVAILABLE)) << rpc;
    EXPECT_THAT(s.error_message(),
                AllOf(HasSubstr("refused lockd's credentials"), HasSubstr("authentication failed")))
        << rpc;
  };
  {
    grpc::ClientContext ctx;
    v1::AcquireRequest req;
    req.set_name("x");
    req.set_owner("o");
    v1::AcquireResponse resp;
    expect_unavailable(stub->Acquire(&ctx, req, &resp), "Acquire");
  }
  {
    grpc::ClientContext ctx;
    v1::ReleaseRequest req;
    req.set_name("x");
    req.set_owner("o");
    v1::ReleaseResponse resp;
    expect_unavailable(stub->Release(&ctx, req, &resp), "Release");
  }
  {
    grpc::ClientContext ctx;
    v1::RenewRequest req;
    req.set_name("x");
    req.set_owner("o");
    v1::RenewResponse resp;
    expect_unavailable(stub->Renew(&ctx, req, &resp), "Renew");
  }
  {
    grpc::ClientContext ctx;
    v1::DescribeRequest req;
    req.set_name("x");
    v1::LockInfo resp;
    expect_unavailable(stub->Describe(&ctx, req, &resp), "Describe");
  }
  {
    grpc::ClientContext ctx;
    v1::ListRequest req;
    v1::ListResponse resp;
    expect_unavailable(stub->List(&ctx, req, &resp), "List");
  }
  {
    grpc::ClientContext ctx;
    v1::ForceReleaseRequest req;
    req.set_name("x");
    req.set_reason("test");
    v1::ForceReleaseResponse resp;
    expect_unavailable(stub->ForceRelease(&ctx, req, &resp), "ForceRelease");
  }
  (*server)->Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace lockd
