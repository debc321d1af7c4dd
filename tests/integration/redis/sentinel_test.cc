// The redis backend in sentinel mode (redis.mode: sentinel) against a real
// primary, replica and three Sentinels started by the test
// (tests/support/redis_sentinel.h): locks go to the primary the Sentinels
// name, and lockd follows a failover by itself.

#include "backends/redis/sentinel.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "backends/redis/keys.h"
#include "backends/redis/redis_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/redis/redis_test_util.h"
#include "tests/support/process.h"
#include "tests/support/redis_sentinel.h"
#include "tests/support/shared_server.h"
#include "tests/support/status_matchers.h"
#include "tests/support/sync_backend.h"

namespace lockd::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// How long lockd may take to use the promoted primary once the Sentinels
// name it (reconnect backoff is at most 200 ms here; generous for a loaded
// machine).
constexpr absl::Duration kFollowLimit = absl::Seconds(15);
// Failure detection (down-after 1 s), election and promotion.
constexpr absl::Duration kPromotionLimit = absl::Seconds(40);

RedisOptions SentinelMode(const RedisSentinelGroup& g, const std::string& prefix) {
  RedisOptions o = FastRedisOptions(RedisMode::kSentinel, g.sentinel_addresses(), prefix);
  o.sentinel_master = g.master_name();
  return o;
}

std::unique_ptr<Backend> MustStart(const RedisOptions& o) {
  absl::StatusOr<std::unique_ptr<Backend>> b = NewRedisBackend(o);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *std::move(b) : nullptr;
}

uint64_t MustAcquire(Backend& b, const std::string& name, const std::string& owner,
                     absl::Duration ttl = absl::Seconds(30)) {
  absl::StatusOr<AcquireResult> r = SyncAcquire(b, Acq(name, owner, ttl));
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r.ok() && r->acquired) << name << " not acquired by " << owner;
  return r.ok() ? r->fencing_token : 0;
}

// True once a waiter of lock `name` is parked: its process subscribed the
// lock's channel on `server`.
bool WaiterParked(RedisServer& server, const std::string& prefix, const std::string& name) {
  absl::StatusOr<std::unique_ptr<RedisCli>> cli = RedisCli::Connect(server.port());
  if (!cli.ok()) return false;
  redis::LockKeys k = redis::KeyCodec(prefix).KeysFor(LockKey{"default", name});
  return (*cli)->Subscribers(k.channel) > 0;
}

std::string OwnerOn(RedisServer& server, const std::string& prefix, const std::string& name) {
  absl::StatusOr<std::unique_ptr<RedisCli>> cli = RedisCli::Connect(server.port());
  if (!cli.ok()) return absl::StrCat("<", cli.status().ToString(), ">");
  redis::LockKeys k = redis::KeyCodec(prefix).KeysFor(LockKey{"default", name});
  return (*cli)->Str({"HGET", k.lock, "owner"});
}

// --- Against one group, without failovers ---------------------------------

class RedisSentinelTest : public SharedServerTest<RedisSentinelGroup> {};

TEST_F(RedisSentinelTest, LocksGoToThePrimaryTheSentinelsName) {
  std::unique_ptr<Backend> b = MustStart(SentinelMode(*server_, "s1"));
  ASSERT_NE(b, nullptr);
  uint64_t first = MustAcquire(*b, "a", "alice");
  EXPECT_EQ(OwnerOn(server_->primary(), "s1", "a"), "alice");
  absl::StatusOr<AcquireResult> busy = SyncAcquire(*b, Acq("a", "bob"));
  ASSERT_TRUE(busy.ok()) << busy.status();
  EXPECT_FALSE(busy->acquired);
  absl::StatusOr<ReleaseResult> released = SyncRelease(*b, Rel("a", "alice"));
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_TRUE(released->released);
  EXPECT_GT(MustAcquire(*b, "a", "bob"), first);
  EXPECT_TRUE(b->Health().ok()) << b->Health();
}

TEST_F(RedisSentinelTest, WaiterIsGrantedOnRelease) {
  std::unique_ptr<Backend> b = MustStart(SentinelMode(*server_, "s2"));
  ASSERT_NE(b, nullptr);
  MustAcquire(*b, "w", "alice");
  auto waiter = StartAcquire(*b, Acq("w", "bob", absl::Seconds(30), absl::Seconds(30)));
  ASSERT_TRUE(
      WaitFor([&] { return WaiterParked(server_->primary(), "s2", "w"); }, absl::Seconds(10)));
  ASSERT_TRUE(SyncRelease(*b, Rel("w", "alice")).ok());
  absl::StatusOr<AcquireResult> r = waiter->Wait(absl::Seconds(20));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->acquired);
}

TEST_F(RedisSentinelTest, UnknownMasterNameFailsTheStartNamingTheOption) {
  RedisOptions o = SentinelMode(*server_, "s3");
  o.sentinel_master = "nosuchmaster";
  EXPECT_THAT(NewRedisBackend(o).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("redis.sentinel_master"), HasSubstr("nosuchmaster"))));
}

TEST_F(RedisSentinelTest, NoReachableSentinelIsUnavailable) {
  RedisOptions o = SentinelMode(*server_, "s4");
  o.addresses = absl::StrCat("127.0.0.1:", FreePort());
  EXPECT_THAT(NewRedisBackend(o).status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("sentinel")));
}

// --- Failovers: a group per test --------------------------------------------

class RedisSentinelFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<RedisSentinelGroup>> g = RedisSentinelGroup::Start();
    ASSERT_TRUE(g.ok()) << g.status();
    group_ = *std::move(g);
  }

  // Waits until `b` answers again after a failover: Health OK and a
  // try-acquire of `probe` granted. Returns the probe's token (0 if it never
  // came back within kFollowLimit).
  uint64_t WaitUntilServing(Backend& b, const std::string& probe) {
    uint64_t token = 0;
    WaitFor(
        [&] {
          if (!b.Health().ok()) return false;
          absl::StatusOr<AcquireResult> r = SyncAcquire(b, Acq(probe, "prober"));
          if (!r.ok() || !r->acquired) return false;
          token = r->fencing_token;
          return true;
        },
        kFollowLimit, absl::Milliseconds(50));
    return token;
  }

  std::unique_ptr<RedisSentinelGroup> group_;
};

TEST_F(RedisSentinelFailoverTest, FollowsThePromotionWhenThePrimaryIsKilled) {
  std::unique_ptr<Backend> b = MustStart(SentinelMode(*group_, "k"));
  ASSERT_NE(b, nullptr);
  std::vector<uint64_t> before;
  before.push_back(MustAcquire(*b, "held", "alice"));
  before.push_back(MustAcquire(*b, "released", "bob"));
  before.push_back(MustAcquire(*b, "expiring", "dave", absl::Seconds(8)));
  auto after_release =
      StartAcquire(*b, Acq("released", "carol", absl::Seconds(30), absl::Seconds(60)));
  auto after_expiry =
      StartAcquire(*b, Acq("expiring", "erin", absl::Seconds(30), absl::Seconds(60)));
  ASSERT_TRUE(WaitFor(
      [&] {
        return WaiterParked(group_->primary(), "k", "released") &&
               WaiterParked(group_->primary(), "k", "expiring");
      },
      absl::Seconds(10)));
  // The grants reached the replica: this test is about following the
  // failover, not about what an unreplicated write loses.
  {
    absl::StatusOr<std::unique_ptr<RedisCli>> cli = RedisCli::Connect(group_->primary().port());
    ASSERT_TRUE(cli.ok()) << cli.status();
    ASSERT_EQ((*cli)->Int({"WAIT", "1", "5000"}), 1);
  }

  group_->KillPrimary();
  ASSERT_TRUE(group_->WaitForPromotion(kPromotionLimit).ok()) << group_->Logs();
  const absl::Time promoted = absl::Now();
  uint64_t probe = WaitUntilServing(*b, "probe");
  ASSERT_NE(probe, 0u) << "lockd did not follow the promotion within "
                       << absl::FormatDuration(kFollowLimit) << "; health: " << b->Health();
  EXPECT_LT(absl::Now() - promoted, kFollowLimit);
  EXPECT_EQ(OwnerOn(group_->primary(), "k", "probe"), "prober");
  const uint64_t max_before = *std::max_element(before.begin(), before.end());
  EXPECT_GT(probe, max_before);

  // The replicated holding survived the failover.
  absl::StatusOr<AcquireResult> busy = SyncAcquire(*b, Acq("held", "zed"));
  ASSERT_TRUE(busy.ok()) << busy.status();
  EXPECT_FALSE(busy->acquired);
  ASSERT_TRUE(SyncRelease(*b, Rel("held", "alice")).ok());
  EXPECT_GT(MustAcquire(*b, "held", "zed"), max_before);

  // Waiters parked before the failover are granted after it.
  ASSERT_TRUE(SyncRelease(*b, Rel("released", "bob")).ok());
  absl::StatusOr<AcquireResult> carol = after_release->Wait(absl::Seconds(20));
  ASSERT_TRUE(carol.ok()) << carol.status();
  EXPECT_TRUE(carol->acquired);
  EXPECT_GT(carol->fencing_token, max_before);
  absl::StatusOr<AcquireResult> erin = after_expiry->Wait(absl::Seconds(30));
  ASSERT_TRUE(erin.ok()) << erin.status();
  EXPECT_TRUE(erin->acquired);
  EXPECT_GT(erin->fencing_token, max_before);
  EXPECT_TRUE(b->Health().ok()) << b->Health();
}

TEST_F(RedisSentinelFailoverTest, ManualFailoverMovesLocksToTheNewPrimary) {
  std::unique_ptr<Backend> b = MustStart(SentinelMode(*group_, "m"));
  ASSERT_NE(b, nullptr);
  uint64_t before = MustAcquire(*b, "x", "alice");
  ASSERT_TRUE(group_->Failover().ok());
  ASSERT_TRUE(group_->WaitForPromotion(kPromotionLimit).ok()) << group_->Logs();
  // The old primary is still up (it becomes a replica): lockd must stop
  // writing to it.
  uint64_t probe = WaitUntilServing(*b, "probe");
  ASSERT_NE(probe, 0u) << "lockd did not follow the failover; health: " << b->Health();
  EXPECT_GT(probe, before);
  EXPECT_EQ(OwnerOn(group_->primary(), "m", "probe"), "prober");
}

TEST_F(RedisSentinelFailoverTest, WatcherMovesToAnotherSentinelAndReportsTheSwitch) {
  redis::ConnectionOptions o;
  for (int i = 0; i < 3; ++i) o.addresses.push_back({"127.0.0.1", group_->sentinel_port(i)});
  o.sentinel = redis::SentinelOptions{group_->master_name(), "", ""};
  o.connect_timeout = absl::Milliseconds(500);
  o.command_timeout = absl::Milliseconds(500);
  std::atomic<int> moved{0};
  redis::SentinelWatcher watcher(
      o, [&moved] { ++moved; }, absl::Milliseconds(20), absl::Milliseconds(200),
      absl::Milliseconds(500));
  ASSERT_TRUE(watcher.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return watcher.watching(); }, absl::Seconds(10)));
  // The watcher starts with the first Sentinel; it goes away.
  group_->KillSentinel(0);
  ASSERT_TRUE(group_->Failover().ok());
  ASSERT_TRUE(group_->WaitForPromotion(kPromotionLimit).ok()) << group_->Logs();
  EXPECT_TRUE(WaitFor([&] { return moved.load() > 0; }, absl::Seconds(10)));
  EXPECT_TRUE(WaitFor([&] { return watcher.watching(); }, absl::Seconds(10)));
  watcher.Stop();
}

}  // namespace
}  // namespace lockd::testing
