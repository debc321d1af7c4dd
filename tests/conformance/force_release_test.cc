// The conformance suite's ForceRelease rules (design/API.md "Operations and
// security"), checked through the real gRPC service against one backend's
// real server, like conformance_test.cc: one binary per backend links this
// file and that backend's <backend>_env.cc.

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "lockd/v1/lock.grpc.pb.h"
#include "service/backend_factory.h"
#include "service/config.h"
#include "service/server.h"
#include "tests/conformance/backend_env.h"
#include "tests/support/process.h"

namespace lockd::testing {
namespace {

using ::testing::HasSubstr;
using v1::LockService;

BackendEnv& Env() {
  static BackendEnv* env = MakeBackendEnv().release();
  return *env;
}

absl::Status& EnvStatus() {
  static absl::Status* status = new absl::Status(absl::UnknownError("environment not set up"));
  return *status;
}

class ServerEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { EnvStatus() = Env().SetUp(); }
  void TearDown() override { Env().TearDown(); }
};

std::string ErrorReason(const grpc::Status& s) {
  google::rpc::Status details;
  if (!details.ParseFromString(s.error_details())) return "";
  for (const auto& any : details.details()) {
    google::rpc::ErrorInfo info;
    if (any.UnpackTo(&info)) return absl::StrCat(info.domain(), "/", info.reason());
  }
  return "";
}

MATCHER(IsLockNotHeld, "") {
  return arg.error_code() == grpc::StatusCode::FAILED_PRECONDITION &&
         ErrorReason(arg) == "lockd/LOCK_NOT_HELD";
}

std::unique_ptr<grpc::ClientContext> Ctx(absl::Duration timeout = absl::Seconds(30)) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return ctx;
}

google::protobuf::Duration Seconds(int64_t s) {
  google::protobuf::Duration d;
  d.set_seconds(s);
  return d;
}

// One lockd serving the backend; `isolation` as BackendEnv::Flags.
struct Replica {
  std::unique_ptr<LockdServer> server;
  std::unique_ptr<LockService::Stub> stub;

  grpc::Status Acquire(const std::string& name, const std::string& owner, v1::AcquireResponse* resp,
                       int64_t wait_s = 0) {
    v1::AcquireRequest req;
    req.set_name(name);
    req.set_owner(owner);
    *req.mutable_lease_ttl() = Seconds(60);
    if (wait_s > 0) *req.mutable_wait_timeout() = Seconds(wait_s);
    return stub->Acquire(Ctx().get(), req, resp);
  }
  uint64_t MustAcquire(const std::string& name, const std::string& owner) {
    v1::AcquireResponse resp;
    grpc::Status s = Acquire(name, owner, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(resp.acquired()) << name << " not acquired by " << owner;
    return resp.fencing_token();
  }
  grpc::Status ForceRelease(const std::string& name, uint64_t token, v1::ForceReleaseResponse* resp,
                            const std::string& reason = "conformance test") {
    v1::ForceReleaseRequest req;
    req.set_name(name);
    req.set_fencing_token(token);
    req.set_reason(reason);
    return stub->ForceRelease(Ctx().get(), req, resp);
  }
  grpc::Status Release(const std::string& name, const std::string& owner) {
    v1::ReleaseRequest req;
    req.set_name(name);
    req.set_owner(owner);
    v1::ReleaseResponse resp;
    return stub->Release(Ctx().get(), req, &resp);
  }
  grpc::Status Renew(const std::string& name, const std::string& owner) {
    v1::RenewRequest req;
    req.set_name(name);
    req.set_owner(owner);
    v1::RenewResponse resp;
    return stub->Renew(Ctx().get(), req, &resp);
  }
  v1::LockInfo Describe(const std::string& name) {
    v1::DescribeRequest req;
    req.set_name(name);
    v1::LockInfo info;
    grpc::Status s = stub->Describe(Ctx().get(), req, &info);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return info;
  }
};

class ForceReleaseTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(EnvStatus().ok()) << "backend server did not start: " << EnvStatus();
    static std::atomic<int> counter{0};
    isolation_ = absl::StrCat("f", ::getpid() % 100000, "_", counter++);
    a_ = StartReplica();
    ASSERT_NE(a_.server, nullptr);
  }

  Replica StartReplica() {
    std::vector<std::string> flags = Env().Flags(isolation_);
    flags.push_back("--listen=127.0.0.1:0");
    Replica r;
    absl::StatusOr<ParsedArgs> parsed = ParseConfig(flags, {});
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    if (!parsed.ok()) return r;
    absl::StatusOr<std::unique_ptr<Backend>> backend = NewBackendFromConfig(parsed->config);
    EXPECT_TRUE(backend.ok()) << backend.status();
    if (!backend.ok()) return r;
    auto server = LockdServer::Start(parsed->config, *std::move(backend), absl::Milliseconds(50));
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return r;
    r.server = *std::move(server);
    auto channel = grpc::CreateChannel(r.server->address(), grpc::InsecureChannelCredentials());
    channel->WaitForConnected(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    r.stub = LockService::NewStub(channel);
    return r;
  }

  std::string isolation_;
  Replica a_;
};

TEST_P(ForceReleaseTest, FreesTheLockWhateverOwnerAndHoldCount) {
  uint64_t token = a_.MustAcquire("job", "alice");
  a_.MustAcquire("job", "alice");
  a_.MustAcquire("job", "alice");
  v1::ForceReleaseResponse resp;
  grpc::Status s = a_.ForceRelease("job", 0, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(resp.released());
  EXPECT_TRUE(resp.previous().held());
  EXPECT_EQ(resp.previous().owner(), "alice");
  EXPECT_EQ(resp.previous().hold_count(), 3u);
  EXPECT_EQ(resp.previous().fencing_token(), token);
  EXPECT_EQ(resp.previous().name(), "job");
  EXPECT_EQ(resp.previous().backend(), Env().name());
  EXPECT_FALSE(a_.Describe("job").held());
}

TEST_P(ForceReleaseTest, NextGrantGetsALargerToken) {
  uint64_t t1 = a_.MustAcquire("tok", "alice");
  v1::ForceReleaseResponse resp;
  ASSERT_TRUE(a_.ForceRelease("tok", 0, &resp).ok());
  uint64_t t2 = a_.MustAcquire("tok", "bob");
  EXPECT_GT(t2, t1);
  ASSERT_TRUE(a_.ForceRelease("tok", t2, &resp).ok());
  EXPECT_GT(a_.MustAcquire("tok", "alice"), t2);
}

TEST_P(ForceReleaseTest, FormerHoldersReleaseAndRenewAreLockNotHeld) {
  a_.MustAcquire("former", "alice");
  v1::ForceReleaseResponse resp;
  ASSERT_TRUE(a_.ForceRelease("former", 0, &resp).ok());
  EXPECT_THAT(a_.Renew("former", "alice"), IsLockNotHeld());
  EXPECT_THAT(a_.Release("former", "alice"), IsLockNotHeld());
  // Also once another owner holds it.
  a_.MustAcquire("former", "bob");
  EXPECT_THAT(a_.Release("former", "alice"), IsLockNotHeld());
  EXPECT_EQ(a_.Describe("former").owner(), "bob");
}

TEST_P(ForceReleaseTest, WaiterIsGrantedRightAway) {
  uint64_t t1 = a_.MustAcquire("queue", "alice");
  v1::AcquireResponse waited;
  grpc::Status status;
  absl::Time granted_at;
  std::thread waiter([&] {
    status = a_.Acquire("queue", "bob", &waited, /*wait_s=*/60);
    granted_at = absl::Now();
  });
  ASSERT_TRUE(WaitFor([&] { return a_.Describe("queue").waiters() == 1; }, absl::Seconds(15),
                      absl::Milliseconds(10)));
  v1::ForceReleaseResponse resp;
  absl::Time forced_at = absl::Now();
  ASSERT_TRUE(a_.ForceRelease("queue", 0, &resp).ok());
  waiter.join();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(waited.acquired());
  EXPECT_GT(waited.fencing_token(), t1);
  EXPECT_LT(granted_at - forced_at, absl::Seconds(2)) << "the waiter was not woken";
  EXPECT_EQ(a_.Describe("queue").owner(), "bob");
}

TEST_P(ForceReleaseTest, TokenMismatchIsFailedPreconditionAndChangesNothing) {
  uint64_t token = a_.MustAcquire("guarded", "alice");
  v1::ForceReleaseResponse resp;
  grpc::Status s = a_.ForceRelease("guarded", token + 1, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(ErrorReason(s), "lockd/FENCING_TOKEN_MISMATCH");
  EXPECT_THAT(s.error_message(), HasSubstr("fencing_token"));
  v1::LockInfo info = a_.Describe("guarded");
  EXPECT_TRUE(info.held());
  EXPECT_EQ(info.owner(), "alice");
  EXPECT_EQ(info.fencing_token(), token);
  ASSERT_TRUE(a_.ForceRelease("guarded", token, &resp).ok());
  EXPECT_TRUE(resp.released());
  EXPECT_FALSE(a_.Describe("guarded").held());
}

TEST_P(ForceReleaseTest, FreeLockAnswersNotReleased) {
  v1::ForceReleaseResponse resp;
  grpc::Status s = a_.ForceRelease("never-held", 0, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(resp.released());
  EXPECT_FALSE(resp.previous().held());
}

TEST_P(ForceReleaseTest, BadInputIsInvalidArgumentNamingTheFieldAndChangesNothing) {
  a_.MustAcquire("kept", "alice");
  v1::ForceReleaseResponse resp;
  grpc::Status s = a_.ForceRelease("kept", 0, &resp, /*reason=*/"");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("reason"));
  s = a_.ForceRelease("", 0, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("name"));
  EXPECT_EQ(a_.Describe("kept").owner(), "alice");
}

TEST_P(ForceReleaseTest, WorksAcrossReplicas) {
  if (!Env().multi_replica()) GTEST_SKIP() << Env().name() << " serves a single replica";
  Replica b = StartReplica();
  ASSERT_NE(b.server, nullptr);
  uint64_t t1 = a_.MustAcquire("shared", "alice");
  v1::AcquireResponse waited;
  grpc::Status status;
  std::thread waiter([&] { status = a_.Acquire("shared", "bob", &waited, /*wait_s=*/60); });
  ASSERT_TRUE(WaitFor([&] { return a_.Describe("shared").waiters() >= 1; }, absl::Seconds(15),
                      absl::Milliseconds(10)));
  v1::ForceReleaseResponse resp;
  ASSERT_TRUE(b.ForceRelease("shared", t1, &resp).ok());
  EXPECT_TRUE(resp.released());
  EXPECT_EQ(resp.previous().owner(), "alice");
  waiter.join();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(waited.acquired());
  EXPECT_GT(waited.fencing_token(), t1);
  EXPECT_THAT(a_.Release("shared", "alice"), IsLockNotHeld());
  EXPECT_THAT(a_.Renew("shared", "alice"), IsLockNotHeld());
}

INSTANTIATE_TEST_SUITE_P(Backends, ForceReleaseTest, ::testing::Values(Env().name()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace lockd::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new lockd::testing::ServerEnvironment());
  return RUN_ALL_TESTS();
}
