// The conformance suite's fixture: every rule of docs/api.md is checked
// through the real gRPC service against one backend (chosen by the
// <backend>_env.cc the binary links), by the *_test.cc files of this folder.
// A backend is done when the suite is green against its real server.
//
// Each test runs once with one lockd and, for backends that several lockd
// replicas may share, once more with three in-process replicas over the same
// locks (the test parameter). Stub(i) reaches replica i % replicas(): a test
// that puts its clients on Stub(0), Stub(1), Stub(2) checks the rule across
// replicas in the second run and on one replica in the first.

#ifndef LOCKD_TESTS_CONFORMANCE_CONFORMANCE_H_
#define LOCKD_TESTS_CONFORMANCE_CONFORMANCE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "lockd/v1/lock.grpc.pb.h"
#include "protos/proto_duration.h"
#include "service/backend_factory.h"
#include "service/config.h"
#include "service/server.h"
#include "tests/conformance/backend_env.h"
#include "tests/support/lockd_process.h"
#include "tests/support/process.h"
#include "tests/support/status_matchers.h"

namespace lockd::testing {

using v1::LockService;

inline BackendEnv& Env() {
  static BackendEnv* env = MakeBackendEnv().release();
  return *env;
}

inline absl::Status& EnvStatus() {
  static absl::Status* status = new absl::Status(absl::UnknownError("environment not set up"));
  return *status;
}

class ServerEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { EnvStatus() = Env().SetUp(); }
  void TearDown() override { Env().TearDown(); }
};

// A channel of its own (not shared with other channels to the same target),
// so that concurrent clients really use separate connections. Connected
// before it is returned: a connect attempt that fails on a loaded machine is
// retried by the channel, whereas calls on a channel in that state would fail
// at once (calls are not wait-for-ready) and say nothing about the backend.
inline std::unique_ptr<LockService::Stub> NewStub(const std::string& address) {
  static std::atomic<int> n{0};
  grpc::ChannelArguments args;
  args.SetInt("lockd.test.channel", n++);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  channel->WaitForConnected(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  return LockService::NewStub(channel);
}

// The ErrorInfo reason carried in grpc-status-details-bin, or "".
inline std::string ErrorReason(const grpc::Status& s) {
  google::rpc::Status details;
  if (!details.ParseFromString(s.error_details())) return "";
  for (const auto& any : details.details()) {
    google::rpc::ErrorInfo info;
    if (any.UnpackTo(&info)) return absl::StrCat(info.domain(), "/", info.reason());
  }
  return "";
}

struct Acq {
  std::string name;
  std::string owner;
  absl::Duration ttl = absl::Seconds(30);  // ZeroDuration: leave lease_ttl absent
  absl::Duration wait = absl::ZeroDuration();
  std::string request_id;
  std::string ns;
  absl::Duration deadline = absl::Seconds(60);
  // The kind (docs/api.md "Shared locks, semaphores and all-or-nothing
  // acquires"): a lock in `mode`, or a semaphore of `limit` permits.
  v1::LockMode mode = v1::LOCK_MODE_EXCLUSIVE;
  uint32_t limit = 0;
  uint32_t permits = 0;
};

// The AcquireRequest `a` describes (its deadline is the call's, not a field).
inline v1::AcquireRequest ToRequest(const Acq& a) {
  v1::AcquireRequest req;
  req.set_namespace_(a.ns);
  req.set_name(a.name);
  req.set_owner(a.owner);
  if (a.ttl != absl::ZeroDuration()) *req.mutable_lease_ttl() = ToProtoDuration(a.ttl);
  if (a.wait != absl::ZeroDuration()) *req.mutable_wait_timeout() = ToProtoDuration(a.wait);
  req.set_request_id(a.request_id);
  req.set_mode(a.mode);
  req.set_limit(a.limit);
  req.set_permits(a.permits);
  return req;
}

// The test parameters of a suite deriving from ConformanceTest, and their
// names ("redis", "redis_3replicas"):
//   INSTANTIATE_TEST_SUITE_P(Backends, MyRules, ::testing::ValuesIn(ReplicaCountsOfEnv()),
//                            ReplicaCountName);
inline std::vector<int> ReplicaCountsOfEnv() {
  return Env().multi_replica() ? std::vector<int>{1, 3} : std::vector<int>{1};
}
inline std::string ReplicaCountName(const ::testing::TestParamInfo<int>& info) {
  return absl::StrCat(Env().name(), info.param == 1 ? "" : "_3replicas");
}

// The parameter is the number of lockd replicas (1 or 3).
class ConformanceTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(EnvStatus().ok()) << "backend server did not start: " << EnvStatus();
    static std::atomic<int> counter{0};
    isolation_ = absl::StrCat("c", ::getpid() % 100000, "_", counter++);
    server_ = StartServer({});
    ASSERT_NE(server_, nullptr);
    stub_ = NewStub(server_->address());
    for (int i = 1; i < GetParam(); ++i) {
      others_.push_back(StartServer({}));
      ASSERT_NE(others_.back(), nullptr);
      other_stubs_.push_back(NewStub(others_.back()->address()));
    }
    if (GetParam() > 1) absl::SleepFor(Env().replica_settle());
  }

  void TearDown() override {
    others_.clear();
    server_.reset();
  }

  int replicas() const { return GetParam(); }
  // Replica i % replicas(); replica 0 is server_ (stub_).
  LockService::Stub* Stub(int i) {
    int r = i % replicas();
    return r == 0 ? stub_.get() : other_stubs_[r - 1].get();
  }
  LockdServer* Server(int i) {
    int r = i % replicas();
    return r == 0 ? server_.get() : others_[r - 1].get();
  }

  std::vector<std::string> Flags(const std::vector<std::string>& extra) {
    std::vector<std::string> flags = Env().Flags(isolation_);
    flags.push_back("--lease.min=100ms");
    flags.insert(flags.end(), extra.begin(), extra.end());
    return flags;
  }

  std::unique_ptr<LockdServer> StartServer(const std::vector<std::string>& extra) {
    std::vector<std::string> flags = Flags(extra);
    flags.push_back("--listen=127.0.0.1:0");
    absl::StatusOr<ParsedArgs> parsed = ParseConfig(flags, {});
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    if (!parsed.ok()) return nullptr;
    absl::StatusOr<std::unique_ptr<Backend>> backend = NewBackendFromConfig(parsed->config);
    EXPECT_TRUE(backend.ok()) << backend.status();
    if (!backend.ok()) return nullptr;
    absl::StatusOr<std::unique_ptr<LockdServer>> server =
        LockdServer::Start(parsed->config, *std::move(backend), absl::Milliseconds(50));
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return nullptr;
    return *std::move(server);
  }

  grpc::Status Acquire(const Acq& a, v1::AcquireResponse* resp, LockService::Stub* stub = nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + a.deadline));
    return (stub ? stub : stub_.get())->Acquire(&ctx, ToRequest(a), resp);
  }

  // Acquires and asserts the grant; returns the fencing token.
  uint64_t MustAcquire(const std::string& name, const std::string& owner,
                       absl::Duration ttl = absl::Seconds(30)) {
    v1::AcquireResponse resp;
    grpc::Status s = Acquire({name, owner, ttl}, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(resp.acquired()) << name << " not acquired by " << owner;
    return resp.fencing_token();
  }

  grpc::Status Release(const std::string& name, const std::string& owner, v1::ReleaseResponse* resp,
                       const std::string& request_id = "", const std::string& ns = "",
                       LockService::Stub* stub = nullptr) {
    v1::ReleaseRequest req;
    req.set_namespace_(ns);
    req.set_name(name);
    req.set_owner(owner);
    req.set_request_id(request_id);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    return (stub ? stub : stub_.get())->Release(&ctx, req, resp);
  }

  // Release with acquire_request_id: undoes the Acquire with that id.
  grpc::Status Undo(const std::string& name, const std::string& owner,
                    const std::string& acquire_request_id, v1::ReleaseResponse* resp,
                    LockService::Stub* stub = nullptr) {
    v1::ReleaseRequest req;
    req.set_name(name);
    req.set_owner(owner);
    req.set_acquire_request_id(acquire_request_id);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    return (stub ? stub : stub_.get())->Release(&ctx, req, resp);
  }

  grpc::Status Renew(const std::string& name, const std::string& owner, absl::Duration ttl,
                     v1::RenewResponse* resp, LockService::Stub* stub = nullptr) {
    v1::RenewRequest req;
    req.set_name(name);
    req.set_owner(owner);
    if (ttl != absl::ZeroDuration()) *req.mutable_lease_ttl() = ToProtoDuration(ttl);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    return (stub ? stub : stub_.get())->Renew(&ctx, req, resp);
  }

  v1::LockInfo Describe(const std::string& name, const std::string& ns = "",
                        LockService::Stub* stub = nullptr) {
    v1::DescribeRequest req;
    req.set_namespace_(ns);
    req.set_name(name);
    v1::LockInfo info;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    grpc::Status s = (stub ? stub : stub_.get())->Describe(&ctx, req, &info);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return info;
  }

  // ForceRelease through `stub` (replica 0 when null); token 0: whatever the
  // holder's token.
  grpc::Status ForceRelease(const std::string& name, uint64_t token, v1::ForceReleaseResponse* resp,
                            LockService::Stub* stub = nullptr,
                            const std::string& reason = "conformance test") {
    v1::ForceReleaseRequest req;
    req.set_name(name);
    req.set_fencing_token(token);
    req.set_reason(reason);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    return (stub ? stub : stub_.get())->ForceRelease(&ctx, req, resp);
  }

  // Waits until `n` Acquire calls are parked on `name`, as replica
  // `replica` sees them (backends count this process's waiters, or all).
  void WaitForWaiters(const std::string& name, uint32_t n, int replica = 0) {
    LockService::Stub* stub = Stub(replica);
    bool ok = WaitFor([&] { return Describe(name, "", stub).waiters() == n; }, absl::Seconds(15),
                      absl::Milliseconds(10));
    ASSERT_TRUE(ok) << "waiters on " << name << " never reached " << n << " (now "
                    << Describe(name, "", stub).waiters() << ")";
  }

  // Waits until `n` Acquire calls are parked on `name` in all, whichever
  // replicas they wait on: a backend's replicas each count their own
  // waiters (the sum is n) or each count every replica's (the sum is
  // n * replicas()).
  void WaitForWaitersInAll(const std::string& name, uint32_t n) {
    uint32_t sum = 0;
    bool ok = WaitFor(
        [&] {
          sum = 0;
          for (int r = 0; r < replicas(); ++r) sum += Describe(name, "", Stub(r)).waiters();
          return sum == n || sum == n * static_cast<uint32_t>(replicas());
        },
        absl::Seconds(15), absl::Milliseconds(10));
    ASSERT_TRUE(ok) << "waiters on " << name << " never reached " << n << " in all (the "
                    << replicas() << " replicas count " << sum << " together)";
    // A backend that keeps its queue on its server counts a waiting call as
    // soon as the call's first attempt joins that queue, a moment before the
    // call's replica learns the answer and parks it: a newcomer on the same
    // replica in that moment is not yet behind it there. Tests start the
    // next caller once the replica has parked this one.
    absl::SleepFor(absl::Milliseconds(100));
  }

  // Waits until `name` is free.
  bool EventuallyFree(const std::string& name) {
    return WaitFor([&] { return !Describe(name).held(); }, absl::Seconds(15),
                   absl::Milliseconds(10));
  }

  std::string isolation_;
  std::unique_ptr<LockdServer> server_;
  std::unique_ptr<LockService::Stub> stub_;
  std::vector<std::unique_ptr<LockdServer>> others_;  // replicas 1..n-1
  std::vector<std::unique_ptr<LockService::Stub>> other_stubs_;
};

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_CONFORMANCE_CONFORMANCE_H_
