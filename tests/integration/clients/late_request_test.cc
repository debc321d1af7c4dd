// A late request never touches a later hold (issue 28 items 1 and 2): two
// lockd replicas (r0, r1) over one real Redis, MariaDB or ZooKeeper server.
// Two StallProxies hold bytes as a partition does (no reset; TCP delivers
// them once it heals): one between the client and r0, one between r0 and
// the backend. Meanwhile the owner goes on through r1, releases and acquires
// the lock again under a new fencing token; the request that reaches the
// backend late, the end of the session r0 serves, or that session's renewal
// names the old hold by its token and leaves the new one alone.
//
// Every case of every backend is its own ctest test (a few seconds each,
// mostly start-up).

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "lockd/v1/lock.grpc.pb.h"
#include "protos/proto_duration.h"
#include "tests/conformance/session_client.h"
#include "tests/support/lockd_process.h"
#include "tests/support/lockd_rpc.h"
#include "tests/support/mariadb_server.h"
#include "tests/support/process.h"
#include "tests/support/redis_server.h"
#include "tests/support/stall_proxy.h"
#include "tests/support/status_matchers.h"
#include "tests/support/zookeeper_server.h"

namespace lockd::testing {
namespace {

using v1::LockService;

constexpr absl::Duration kLease = absl::Seconds(60);  // far beyond the test

class LateRequestTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    int port = 0;
    if (GetParam() == "redis") {
      auto s = RedisServer::Start();
      ASSERT_TRUE(s.ok()) << s.status();
      redis_ = *std::move(s);
      port = redis_->port();
    } else if (GetParam() == "mysql") {
      auto s = MariadbServer::Start();
      ASSERT_TRUE(s.ok()) << s.status();
      mariadb_ = *std::move(s);
      port = mariadb_->port();
    } else {
      auto s = ZooKeeperServer::Start();
      ASSERT_TRUE(s.ok()) << s.status();
      zookeeper_ = *std::move(s);
      port = zookeeper_->port();
    }
    auto backend_proxy = StallProxy::Start(port);
    ASSERT_TRUE(backend_proxy.ok()) << backend_proxy.status();
    backend_proxy_ = *std::move(backend_proxy);
    // Both replicas start at once; r0 reaches the backend through the proxy
    // and gives up on a backend call after about a second (ZooKeeper calls
    // wait for the client's deadline).
    auto r0 =
        LockdProcess::Launch(Flags(backend_proxy_->port(), /*short_timeouts=*/true), dir_.path());
    ASSERT_TRUE(r0.ok()) << r0.status();
    auto r1 = LockdProcess::Launch(Flags(port, /*short_timeouts=*/false), dir_.path());
    ASSERT_TRUE(r1.ok()) << r1.status();
    r0_ = *std::move(r0);
    r1_ = *std::move(r1);
    ASSERT_TRUE(r0_->WaitUntilServing().ok());
    ASSERT_TRUE(r1_->WaitUntilServing().ok());
    auto proxy = StallProxy::Start(r0_->port());
    ASSERT_TRUE(proxy.ok()) << proxy.status();
    proxy_ = *std::move(proxy);
    via_r0_ = LockService::NewStub(
        grpc::CreateChannel(proxy_->address(), grpc::InsecureChannelCredentials()));
    via_r1_ = LockService::NewStub(r1_->NewChannel());
  }

  // lockd's flags for the backend server listening on `port`.
  std::vector<std::string> Flags(int port, bool short_timeouts) const {
    const std::string address = absl::StrCat("127.0.0.1:", port);
    std::vector<std::string> flags;
    if (redis_ != nullptr) {
      flags = {"--backend=redis", "--redis.addresses=" + address};
      if (short_timeouts) flags.push_back("--redis.command_timeout=1s");
    } else if (mariadb_ != nullptr) {
      for (const std::string& f : mariadb_->LockdFlags("late_")) {
        flags.push_back(absl::StartsWith(f, "--mysql.port=") ? absl::StrCat("--mysql.port=", port)
                                                             : f);
      }
      // One connection, opened by the test's first call: the Release goes
      // out on it (not on a new connection whose handshake would be held).
      if (short_timeouts) {
        flags.insert(flags.end(), {"--mysql.read_timeout=1s", "--mysql.pool_size=1"});
      }
    } else {
      flags = {"--backend=zookeeper", "--zookeeper.hosts=" + address, "--zookeeper.root=/late"};
    }
    return flags;
  }

  // `owner` holds `name` with `token` (Describe through r1), and another
  // owner cannot acquire it.
  void ExpectHeldBy(const std::string& name, const std::string& owner, uint64_t token) {
    v1::LockInfo info;
    ASSERT_TRUE(DescribeRpc(*via_r1_, name, &info).ok());
    EXPECT_TRUE(info.held()) << info.DebugString();
    EXPECT_EQ(info.owner(), owner);
    EXPECT_EQ(info.fencing_token(), token);
    v1::AcquireResponse other;
    ASSERT_TRUE(
        AcquireRpc(*via_r1_, name, "P", kLease, absl::ZeroDuration(), absl::Seconds(10), &other)
            .ok());
    EXPECT_FALSE(other.acquired()) << "a second holder: " << other.DebugString();
  }

  TempDir dir_;
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<MariadbServer> mariadb_;
  std::unique_ptr<ZooKeeperServer> zookeeper_;
  std::unique_ptr<LockdProcess> r0_, r1_;
  std::unique_ptr<StallProxy> backend_proxy_;  // r0's way to the backend
  std::unique_ptr<StallProxy> proxy_;          // the client's way to r0
  std::unique_ptr<LockService::Stub> via_r0_, via_r1_;
};

v1::ReleaseRequest ReleaseOf(const std::string& name, const std::string& owner,
                             const std::string& request_id, uint64_t token) {
  v1::ReleaseRequest req;
  req.set_name(name);
  req.set_owner(owner);
  req.set_request_id(request_id);
  req.set_fencing_token(token);
  return req;
}

// Issue 28, item 1: O's Release through r0 is held up on the way; O retries
// it through r1 and acquires again (T2); then r0 receives the old Release.
TEST_P(LateRequestTest, LateReleaseLeavesTheOwnersLaterHold) {
  v1::AcquireResponse first;
  ASSERT_TRUE(
      AcquireRpc(*via_r1_, "x", "O", kLease, absl::ZeroDuration(), absl::Seconds(10), &first).ok());
  ASSERT_TRUE(first.acquired());
  // The client's connection to r0 is up before the partition starts.
  v1::LockInfo info;
  ASSERT_TRUE(DescribeRpc(*via_r0_, "x", &info).ok());
  absl::SleepFor(absl::Milliseconds(100));  // its last frames have passed

  proxy_->HoldRequests(true);
  const v1::ReleaseRequest release = ReleaseOf("x", "O", "R1", first.fencing_token());
  grpc::Status late;
  v1::ReleaseResponse late_resp;
  std::thread late_call([&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    late = via_r0_->Release(&ctx, release, &late_resp);
  });
  // The Release's message (and more: its headers) is in the proxy.
  ASSERT_TRUE(proxy_->WaitForPendingRequestBytes(release.ByteSizeLong() + 20, absl::Seconds(10)));

  // O gives up on r0: the same Release through r1, then a new hold.
  {
    grpc::ClientContext ctx;
    v1::ReleaseResponse resp;
    ASSERT_TRUE(via_r1_->Release(&ctx, release, &resp).ok());
    EXPECT_TRUE(resp.released());
  }
  v1::AcquireResponse second;
  ASSERT_TRUE(
      AcquireRpc(*via_r1_, "x", "O", kLease, absl::ZeroDuration(), absl::Seconds(10), &second)
          .ok());
  ASSERT_TRUE(second.acquired());
  ASSERT_GT(second.fencing_token(), first.fencing_token());

  proxy_->HoldRequests(false);  // the partition heals: r0 gets the Release
  late_call.join();
  // Gone: the hold it names (T1) is no more.
  EXPECT_THAT(late, IsLockNotHeld()) << late_resp.DebugString();
  ExpectHeldBy("x", "O", second.fencing_token());
}

// Issue 28, item 1, as it was found: the partition is between r0 and the
// backend. r0 sends O's Release to the backend, where it is held up; O
// hears UNAVAILABLE (or gives up), retries through r1 and acquires again
// (T2); then the backend receives r0's Release.
TEST_P(LateRequestTest, ReleaseDelayedToTheBackendLeavesTheOwnersLaterHold) {
  v1::AcquireResponse first;
  ASSERT_TRUE(
      AcquireRpc(*via_r1_, "x", "O", kLease, absl::ZeroDuration(), absl::Seconds(10), &first).ok());
  ASSERT_TRUE(first.acquired());
  auto direct_r0 = LockService::NewStub(r0_->NewChannel());
  v1::LockInfo info;
  ASSERT_TRUE(DescribeRpc(*direct_r0, "x", &info).ok());  // r0 is connected

  backend_proxy_->HoldRequests(true);
  const v1::ReleaseRequest release = ReleaseOf("x", "O", "R1", first.fencing_token());
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(3)));
    v1::ReleaseResponse resp;
    grpc::Status s = direct_r0->Release(&ctx, release, &resp);
    EXPECT_TRUE(s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
        << s.error_code() << ": " << s.error_message();
  }
  ASSERT_GT(backend_proxy_->pending_request_bytes(), 0u);
  {
    grpc::ClientContext ctx;
    v1::ReleaseResponse resp;
    ASSERT_TRUE(via_r1_->Release(&ctx, release, &resp).ok());
    EXPECT_TRUE(resp.released());
  }
  v1::AcquireResponse second;
  ASSERT_TRUE(
      AcquireRpc(*via_r1_, "x", "O", kLease, absl::ZeroDuration(), absl::Seconds(10), &second)
          .ok());
  ASSERT_TRUE(second.acquired());
  ASSERT_GT(second.fencing_token(), first.fencing_token());

  backend_proxy_->HoldRequests(false);  // the partition heals
  ASSERT_TRUE(backend_proxy_->WaitUntilRequestsDelivered(absl::Seconds(10)));
  absl::SleepFor(absl::Milliseconds(500));  // the backend runs what it got
  ExpectHeldBy("x", "O", second.fencing_token());
}

// The result of `op_id` on `s`, which must be OK.
v1::SessionResult OkResult(SessionClient& s, uint64_t op_id) {
  std::optional<v1::SessionResult> r = s.WaitResult(op_id);
  EXPECT_TRUE(r.has_value()) << "no result for op " << op_id;
  if (!r.has_value()) return {};
  EXPECT_EQ(r->status().code(), 0) << r->DebugString();
  return *r;
}

bool SendRelease(SessionClient& s, uint64_t op_id, const std::string& name, uint64_t token) {
  v1::SessionRequest req;
  v1::SessionRelease* rel = req.mutable_release();
  rel->set_op_id(op_id);
  rel->mutable_request()->set_name(name);
  rel->mutable_request()->set_fencing_token(token);
  return s.Send(req);
}

// Issue 28, item 2: O's session S1 on r0 is cut off from the client; O goes
// on through S2 on r1 (reentrant grant, released to zero, acquired again:
// T2). When r0 sees S1 end, it releases S1's holds: not T2.
TEST_P(LateRequestTest, CutOffSessionsEndLeavesTheOwnersLaterHold) {
  // S1's lease is long, so r0 renews nothing during the test (a renewal by
  // the old token would tell r0 that the hold is gone before S1 ends).
  SessionClient s1(via_r0_.get());
  ASSERT_TRUE(s1.Open(Opening{.owner = "O", .lease = kLease}).has_value());
  ASSERT_TRUE(s1.Acquire(1, "x"));
  ASSERT_TRUE(s1.Acquire(2, "y"));  // held by S1 alone: its release shows S1 ended
  const uint64_t t1 = OkResult(s1, 1).acquire().fencing_token();
  ASSERT_TRUE(OkResult(s1, 2).acquire().acquired());

  proxy_->Hold(true);  // the partition: nothing passes between the client and r0

  SessionClient s2(via_r1_.get());
  ASSERT_TRUE(s2.Open(Opening{.owner = "O", .lease = kLease}).has_value());
  ASSERT_TRUE(s2.Acquire(1, "x"));
  v1::AcquireResponse reentrant = OkResult(s2, 1).acquire();
  ASSERT_TRUE(reentrant.acquired());
  EXPECT_EQ(reentrant.fencing_token(), t1);
  EXPECT_EQ(reentrant.hold_count(), 2u);
  ASSERT_TRUE(SendRelease(s2, 2, "x", t1));
  OkResult(s2, 2);
  ASSERT_TRUE(SendRelease(s2, 3, "x", t1));
  EXPECT_TRUE(OkResult(s2, 3).release().released());
  ASSERT_TRUE(s2.Acquire(4, "x"));
  v1::AcquireResponse again = OkResult(s2, 4).acquire();
  ASSERT_TRUE(again.acquired());
  ASSERT_GT(again.fencing_token(), t1);

  // The partition ends with a reset: r0 sees S1's stream end and releases
  // its holds.
  proxy_->CutConnections();
  ASSERT_TRUE(WaitFor(
      [&] {
        v1::LockInfo y;
        return DescribeRpc(*via_r1_, "y", &y).ok() && !y.held();
      },
      absl::Seconds(20)))
      << "r0 did not end S1";
  // x's release was sent with y's; give it a moment to land.
  absl::SleepFor(absl::Milliseconds(500));
  ExpectHeldBy("x", "O", again.fencing_token());
  EXPECT_EQ(s2.LostCount(), 0);
}

// A session's renewal names its hold by its token: O's session S1 holds x
// (T1, 3 s lease, renewed every second); O releases T1 and acquires x again
// elsewhere (T2, 2 s lease). S1's next renewal finds another token: S1 is
// told `lost` and T2 keeps its own lease (no renewal stretched it to S1's).
TEST_P(LateRequestTest, SessionRenewalLeavesTheOwnersLaterHold) {
  SessionClient s1(via_r0_.get());
  ASSERT_TRUE(s1.Open(Opening{.owner = "O", .lease = absl::Seconds(3)}).has_value());
  ASSERT_TRUE(s1.Acquire(1, "x"));
  const uint64_t t1 = OkResult(s1, 1).acquire().fencing_token();
  {
    grpc::ClientContext ctx;
    v1::ReleaseResponse resp;
    ASSERT_TRUE(via_r1_->Release(&ctx, ReleaseOf("x", "O", "R1", t1), &resp).ok());
    ASSERT_TRUE(resp.released());
  }
  constexpr absl::Duration kSecondLease = absl::Seconds(2);
  v1::AcquireResponse second;
  ASSERT_TRUE(
      AcquireRpc(*via_r1_, "x", "O", kSecondLease, absl::ZeroDuration(), absl::Seconds(10), &second)
          .ok());
  ASSERT_TRUE(second.acquired());

  std::optional<v1::LockLost> lost = s1.WaitLost(absl::Seconds(5));
  ASSERT_TRUE(lost.has_value()) << "S1 was not told that its hold is gone";
  EXPECT_EQ(lost->fencing_token(), t1);
  v1::LockInfo info;
  ASSERT_TRUE(DescribeRpc(*via_r1_, "x", &info).ok());
  EXPECT_TRUE(info.held());
  EXPECT_EQ(info.fencing_token(), second.fencing_token());
  EXPECT_LE(FromProtoDuration(info.ttl_remaining()), kSecondLease)
      << "S1's renewal extended the owner's later hold";
}

INSTANTIATE_TEST_SUITE_P(Backends, LateRequestTest,
                         ::testing::Values("redis", "mysql", "zookeeper"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace lockd::testing
