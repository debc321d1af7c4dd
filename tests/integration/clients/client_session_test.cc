// lockd::Client over the Session stream (ClientOptions::use_sessions, the
// default) against real lockd processes: holds taken and released as session
// operations, kept by the server past their ttl with no watchdog, `lost`
// pushed after a ForceRelease, a release of an older hold leaving the
// owner's newer one alone, reentrancy, a wait cancelled at the caller's
// deadline, and a broken stream: resumed on a lockd restarted on the same
// port over a shared Redis, lost when the restarted lockd (memory backend)
// no longer has the hold; 64 threads of one Client sharing its stream in
// batches. The unary path is tested in client_integration_test.cc.

#include <signal.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "lockd/client.h"
// Generated without an include guard: included once, here.
#include "lockd/v1/lock_mock.grpc.pb.h"
#include "tests/integration/clients/regrant.h"
#include "tests/integration/clients/restartable_lockd.h"
#include "tests/support/lockd_process.h"
#include "tests/support/process.h"
#include "tests/support/redis_server.h"
#include "tests/support/status_matchers.h"

namespace lockd {
namespace {

using ::lockd::testing::LockdProcess;
using ::lockd::testing::RedisServer;
using ::lockd::testing::RegrantBehindTheClientsBack;
using ::lockd::testing::RestartableLockd;
using ::lockd::testing::StatusIs;
using ::lockd::testing::TempDir;
using ::lockd::testing::WaitFor;

// Keepalive pings every second, 500 ms to answer: a session notices a hung
// lockd within 1.5 s, and leases from about 2.3 s up can be held over it.
Client NewClientAt(const std::string& address, ClientOptions options = {}) {
  options.rpc_timeout = absl::Seconds(3);
  options.keepalive = {absl::Seconds(1), absl::Milliseconds(500)};
  absl::StatusOr<Client> c = Client::Connect(address, options);
  EXPECT_TRUE(c.ok()) << c.status();
  return *std::move(c);
}

AcquireOptions Opts(absl::Duration ttl, absl::Duration wait = absl::ZeroDuration()) {
  AcquireOptions o;
  o.ttl = ttl;
  o.wait = wait;
  return o;
}

// A session hold is kept valid by the server while its stream is up; a
// unary one only to its last renewal's send time + ttl.
bool KeptByTheServer(const Lease& lease) { return lease.validity_remaining() > absl::Hours(24); }

class ClientSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lockd_.emplace(tmp_.path());
    ASSERT_TRUE(lockd_->Start().ok());
  }

  Client NewClient(ClientOptions options = {}) { return NewClientAt(lockd_->address(), options); }

  TempDir tmp_;
  std::optional<RestartableLockd> lockd_;
};

TEST_F(ClientSessionTest, AcquireAndReleaseGoOverTheSession) {
  Client a = NewClient();
  Client observer = NewClient();
  absl::StatusOr<Lease> lease = a.Acquire("orders/42", Opts(absl::Seconds(10)));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_TRUE(KeptByTheServer(*lease));
  EXPECT_EQ(lease->ttl(), absl::Seconds(10));
  EXPECT_EQ(lease->owner(), a.owner());
  absl::StatusOr<LockInfo> info = observer.Describe("orders/42");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->owner, a.owner());
  EXPECT_EQ(info->fencing_token, lease->fencing_token());
  ASSERT_TRUE(lease->Release().ok());
  EXPECT_FALSE(observer.Describe("orders/42")->held);
  EXPECT_THAT(lease->Release(), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(ClientSessionTest, UnarySwitchAndPerCallOwnersUseTheUnaryPath) {
  ClientOptions unary;
  unary.use_sessions = false;
  Client u = NewClient(unary);
  absl::StatusOr<Lease> a = u.Acquire("u1", Opts(absl::Seconds(10)));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(KeptByTheServer(*a));
  Client s = NewClient();
  AcquireOptions other = Opts(absl::Seconds(10));
  other.owner = "someone-else";
  absl::StatusOr<Lease> b = s.Acquire("u2", other);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_FALSE(KeptByTheServer(*b));
  EXPECT_EQ(b->owner(), "someone-else");
  // A lease whose 2/3 do not outlast a hang the keepalive can miss (1.5 s
  // here) is not safe over a session: it is held unary, renewed by the
  // watchdog with send-time validity. One that does goes over the session.
  absl::StatusOr<Lease> short_lease = s.Acquire("u3", Opts(absl::Seconds(2)));
  ASSERT_TRUE(short_lease.ok()) << short_lease.status();
  EXPECT_FALSE(KeptByTheServer(*short_lease));
  absl::StatusOr<Lease> long_lease = s.Acquire("u4", Opts(absl::Seconds(3)));
  ASSERT_TRUE(long_lease.ok()) << long_lease.status();
  EXPECT_TRUE(KeptByTheServer(*long_lease));
}

TEST_F(ClientSessionTest, LeaseStaysValidLongPastItsTtlWithoutAWatchdog) {
  Client a = NewClient();
  Client observer = NewClient();
  absl::StatusOr<Lease> lease = a.Acquire("long", Opts(absl::Seconds(3)));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_TRUE(KeptByTheServer(*lease));
  absl::SleepFor(absl::Milliseconds(3500));  // past the ttl
  EXPECT_TRUE(lease->valid());
  EXPECT_FALSE(lease->lost());
  absl::StatusOr<LockInfo> info = observer.Describe("long");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->fencing_token, lease->fencing_token());
  EXPECT_TRUE(lease->Release().ok());
}

TEST_F(ClientSessionTest, ForceReleasePushesLostAtOnce) {
  Client a = NewClient();
  Client admin = NewClient();
  std::atomic<int> calls{0};
  AcquireOptions o = Opts(absl::Seconds(30));
  o.on_lost = [&](const absl::Status& why) {
    EXPECT_TRUE(IsLockLost(why)) << why;
    ++calls;
  };
  absl::StatusOr<Lease> lease = a.Acquire("forced", o);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(admin.ForceRelease("forced", "test").ok());
  EXPECT_TRUE(WaitFor([&] { return calls.load() == 1; }, absl::Seconds(1)));
  EXPECT_TRUE(lease->lost());
  EXPECT_THAT(lease->lost_status().message(), ::testing::HasSubstr("FORCE_RELEASED"));
  EXPECT_TRUE(IsLockLost(lease->Release()));
  EXPECT_EQ(calls.load(), 1);
}

// The session's release of a Lease names its hold by its fencing token: one
// reaching lockd after the owner released the lock and took it again (here
// behind the session's back, which lockd does not tell the session about)
// leaves the owner's new hold as it is.
TEST_F(ClientSessionTest, ReleaseOfAnOlderHoldLeavesTheOwnersNewHoldAlone) {
  Client a = NewClient();
  Client observer = NewClient();
  absl::StatusOr<Lease> lease = a.Acquire("x", Opts(absl::Seconds(30)));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(KeptByTheServer(*lease));
  absl::StatusOr<uint64_t> t2 =
      RegrantBehindTheClientsBack(lockd_->address(), "x", a.owner(), absl::Seconds(5));
  ASSERT_TRUE(t2.ok()) << t2.status();
  ASSERT_GT(*t2, lease->fencing_token());
  absl::Status released = lease->Release();
  EXPECT_THAT(released, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_TRUE(IsLockLost(released)) << released;
  absl::StatusOr<LockInfo> info = observer.Describe("x");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->held) << "the release of the old hold freed the new one";
  EXPECT_EQ(info->owner, a.owner());
  EXPECT_EQ(info->fencing_token, *t2);
}

TEST_F(ClientSessionTest, SameClientIsReentrant) {
  Client a = NewClient();
  Client observer = NewClient();
  absl::StatusOr<Lease> one = a.Acquire("re", Opts(absl::Seconds(10)));
  absl::StatusOr<Lease> two = a.Acquire("re", Opts(absl::Seconds(10)));
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ(one->fencing_token(), two->fencing_token());
  EXPECT_EQ(two->hold_count(), 2u);
  ASSERT_TRUE(one->Release().ok());
  EXPECT_EQ(observer.Describe("re")->hold_count, 1u);
  ASSERT_TRUE(two->Release().ok());
  EXPECT_FALSE(observer.Describe("re")->held);
}

TEST_F(ClientSessionTest, WaitCancelledAtTheDeadlineLeavesNoHold) {
  Client holder = NewClient();
  Client waiter = NewClient();
  Client observer = NewClient();
  absl::StatusOr<Lease> held = holder.Acquire("busy", Opts(absl::Seconds(30)));
  ASSERT_TRUE(held.ok());
  AcquireOptions o = Opts(absl::Seconds(30), /*wait=*/absl::Seconds(20));
  o.timeout = absl::Milliseconds(500);
  absl::Time start = absl::Now();
  absl::StatusOr<Lease> waited = waiter.Acquire("busy", o);
  EXPECT_THAT(waited, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  EXPECT_EQ(observer.Describe("busy")->waiters, 0u);
  ASSERT_TRUE(held->Release().ok());
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(observer.Describe("busy")->held);
}

// A Session stream that counts the batches going each way.
class CountingStream
    : public grpc::ClientReaderWriterInterface<v1::SessionRequest, v1::SessionResponse> {
 public:
  CountingStream(
      std::unique_ptr<grpc::ClientReaderWriterInterface<v1::SessionRequest, v1::SessionResponse>>
          real,
      std::atomic<int>* batches_sent, std::atomic<int>* batches_read)
      : real_(std::move(real)), batches_sent_(batches_sent), batches_read_(batches_read) {}

  void WaitForInitialMetadata() override { real_->WaitForInitialMetadata(); }
  bool NextMessageSize(uint32_t* sz) override { return real_->NextMessageSize(sz); }
  bool Read(v1::SessionResponse* resp) override {
    if (!real_->Read(resp)) return false;
    if (resp->has_batch()) ++*batches_read_;
    return true;
  }
  bool Write(const v1::SessionRequest& req, grpc::WriteOptions options) override {
    if (req.has_batch()) ++*batches_sent_;
    return real_->Write(req, options);
  }
  bool WritesDone() override { return real_->WritesDone(); }
  grpc::Status Finish() override { return real_->Finish(); }

 private:
  const std::unique_ptr<grpc::ClientReaderWriterInterface<v1::SessionRequest, v1::SessionResponse>>
      real_;
  std::atomic<int>* const batches_sent_;
  std::atomic<int>* const batches_read_;
};

// A service process: 64 threads share one Client, each taking and giving
// back its own lock. Their ops leave in batches (what is issued while a
// write is in flight), and lockd, having received batches, answers in
// response batches; every pair succeeds and no lock is left held.
TEST_F(ClientSessionTest, ThreadsOfOneClientShareItsStreamInBatches) {
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(lockd_->address(), grpc::InsecureChannelCredentials());
  std::shared_ptr<v1::LockService::Stub> real = v1::LockService::NewStub(channel);
  auto stub = std::make_shared<::testing::NiceMock<v1::MockLockServiceStub>>();
  std::atomic<int> batches_sent{0};
  std::atomic<int> batches_read{0};
  ON_CALL(*stub, SessionRaw(::testing::_))
      .WillByDefault(::testing::Invoke([&](grpc::ClientContext* ctx) {
        return new CountingStream(real->Session(ctx), &batches_sent, &batches_read);
      }));
  ON_CALL(*stub, Release(::testing::_, ::testing::_, ::testing::_))
      .WillByDefault(::testing::Invoke(
          [&](grpc::ClientContext* ctx, const v1::ReleaseRequest& req, v1::ReleaseResponse* resp) {
            return real->Release(ctx, req, resp);
          }));
  ClientOptions options;
  options.rpc_timeout = absl::Seconds(10);
  constexpr int kThreads = 64;
  constexpr int kRounds = 20;
  std::atomic<int> ok{0};
  {
    Client client(stub, options);
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        ++ready;
        while (ready.load() < kThreads) std::this_thread::yield();
        for (int r = 0; r < kRounds; ++r) {
          absl::StatusOr<Lease> lease =
              client.Acquire(absl::StrCat("svc/", t), Opts(absl::Seconds(30)));
          EXPECT_TRUE(lease.ok()) << lease.status();
          if (!lease.ok()) continue;
          EXPECT_TRUE(KeptByTheServer(*lease));
          absl::Status released = lease->Release();
          EXPECT_TRUE(released.ok()) << released;
          if (released.ok()) ++ok;
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  EXPECT_EQ(ok.load(), kThreads * kRounds);
  EXPECT_GT(batches_sent.load(), 0) << "no ops were issued during another's write";
  EXPECT_GT(batches_read.load(), 0) << "lockd answered no batch";
  Client observer = NewClient();
  for (int t = 0; t < kThreads; ++t) {
    absl::StatusOr<LockInfo> info = observer.Describe(absl::StrCat("svc/", t));
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_FALSE(info->held) << "svc/" << t;
  }
}

TEST_F(ClientSessionTest, HoldGoneAfterTheServerRestartsIsLostOnceOnResume) {
  Client a = NewClient();
  std::atomic<int> calls{0};
  AcquireOptions o = Opts(absl::Seconds(30));
  o.on_lost = [&](const absl::Status&) { ++calls; };
  absl::StatusOr<Lease> lease = a.Acquire("gone", o);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(lockd_->Restart().ok());  // memory backend: the hold is gone
  EXPECT_TRUE(WaitFor([&] { return calls.load() == 1; }, absl::Seconds(10)));
  EXPECT_THAT(lease->lost_status().message(), ::testing::HasSubstr("did not get it back"));
  // The session is back: new holds go over it.
  absl::StatusOr<Lease> again = a.Acquire("gone", Opts(absl::Seconds(30)));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(KeptByTheServer(*again));
  EXPECT_EQ(calls.load(), 1);
}

// Two lockd processes, one after the other on the same port, over one Redis:
// the first shuts down (its streams end UNAVAILABLE, holds kept to their
// lease), the client reconnects to the second and resumes its hold.
TEST(ClientSessionResumeTest, HoldIsResumedOnALockdRestartedOverTheSameBackend) {
  TempDir tmp;
  absl::StatusOr<std::unique_ptr<RedisServer>> redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  const std::vector<std::string> flags = {
      "--backend=redis", "--redis.addresses=" + (*redis)->address(), "--lease.min=100ms"};
  const int port = testing::FreePort();
  absl::StatusOr<std::unique_ptr<LockdProcess>> first =
      LockdProcess::StartOnPort(port, flags, tmp.path());
  ASSERT_TRUE(first.ok()) << first.status();
  Client a = NewClientAt((*first)->address());
  std::atomic<int> lost{0};
  AcquireOptions o = Opts(absl::Seconds(8));
  o.on_lost = [&](const absl::Status&) { ++lost; };
  absl::StatusOr<Lease> lease = a.Acquire("resumed", o);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(KeptByTheServer(*lease));

  (*first)->process().Stop();  // SIGTERM: a graceful shutdown
  EXPECT_TRUE(WaitFor([&] { return !KeptByTheServer(*lease); }, absl::Seconds(5)));
  absl::StatusOr<std::unique_ptr<LockdProcess>> second =
      LockdProcess::StartOnPort(port, flags, tmp.path());
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(WaitFor([&] { return KeptByTheServer(*lease); }, absl::Seconds(10)))
      << lease->lost_status();
  absl::SleepFor(absl::Seconds(9));  // past the ttl: the second lockd renews it
  EXPECT_EQ(lost.load(), 0);
  EXPECT_TRUE(lease->valid());
  Client observer = NewClientAt((*second)->address());
  absl::StatusOr<LockInfo> info = observer.Describe("resumed");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->owner, a.owner());
  EXPECT_EQ(info->fencing_token, lease->fencing_token());
  EXPECT_TRUE(lease->Release().ok());
  EXPECT_FALSE(observer.Describe("resumed")->held);
}

// A lockd replica that hangs without closing its connections (SIGSTOP) stops
// renewing its sessions' holds, and after the lease the backend grants the
// lock to a client of another replica. The hung replica's client must have
// stopped calling its lease valid by then: its keepalive breaks the stream,
// and the lease's validity is counted from before the hang could have begun.
// Without keepalive the stream looks open for ever and the lease stays
// valid(): two holders.
TEST(ClientSessionHangTest, LeaseOnAHungLockdEndsBeforeAnotherReplicaGrantsTheLock) {
  TempDir tmp;
  absl::StatusOr<std::unique_ptr<RedisServer>> redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  const std::vector<std::string> flags = {
      "--backend=redis", "--redis.addresses=" + (*redis)->address(), "--lease.min=100ms"};
  absl::StatusOr<std::unique_ptr<LockdProcess>> hung =
      LockdProcess::StartOnPort(0, flags, tmp.path());
  ASSERT_TRUE(hung.ok()) << hung.status();
  absl::StatusOr<std::unique_ptr<LockdProcess>> other =
      LockdProcess::StartOnPort(0, flags, tmp.path());
  ASSERT_TRUE(other.ok()) << other.status();

  Client a = NewClientAt((*hung)->address());
  std::atomic<bool> lost{false};
  AcquireOptions o = Opts(absl::Seconds(6));
  o.on_lost = [&](const absl::Status&) { lost = true; };
  absl::StatusOr<Lease> lease = a.Acquire("hung", o);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(KeptByTheServer(*lease));

  Client b = NewClientAt((*other)->address());
  (*hung)->process().Signal(SIGSTOP);
  const auto stopped = std::chrono::steady_clock::now();
  absl::StatusOr<Lease> next = b.Acquire("hung", Opts(absl::Seconds(6), absl::Seconds(20)));
  const auto granted = std::chrono::steady_clock::now();
  (*hung)->process().Signal(SIGCONT);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(lost.load()) << "the hung replica's client still calls its lease valid";
  EXPECT_FALSE(lease->valid());
  EXPECT_LT(lease->valid_until(), granted)
      << "the lease was valid until "
      << absl::FormatDuration(absl::FromChrono(lease->valid_until() - stopped))
      << " after the hang, the lock granted to another client "
      << absl::FormatDuration(absl::FromChrono(granted - stopped)) << " after it";
}

}  // namespace
}  // namespace lockd
