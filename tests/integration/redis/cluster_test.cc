// The redis backend in cluster mode (redis.mode: cluster) through its Backend
// interface, against a real Redis Cluster of three primaries with a replica
// each (tests/support/redis_cluster.h), started once for the binary: locks
// spread over every primary, List gathers them from all, a slot moving to
// another primary while its lock is held and waited on, and a primary killed
// and replaced by its replica. The failover test runs last: it leaves one
// primary without a replica.

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "backends/common/replica_presence.h"
#include "backends/redis/keys.h"
#include "backends/redis/redis_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/redis/redis_test_util.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/shared_server.h"
#include "tests/support/status_matchers.h"
#include "tests/support/sync_backend.h"

namespace lockd::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// How long a waiter may take to be granted after the release that frees its
// lock. Far below the holder's lease (kLongTtl), so that a waiter that misses
// the release (and only wakes when the lease ends) fails the test.
constexpr absl::Duration kGrantBound = absl::Seconds(10);
constexpr absl::Duration kLongTtl = absl::Seconds(120);
// How long the backend may take to serve again after a primary is killed,
// counted from the kill: the failover itself takes about 2 * node timeout.
constexpr absl::Duration kRecoveryBound = absl::Seconds(30);

// Matches an OK absl::Status (printing the error otherwise).
auto Ok() { return StatusIs(absl::StatusCode::kOk); }

std::string ReplyText(const absl::StatusOr<redis::ReplyPtr>& r) {
  if (!r.ok()) return std::string(r.status().message());
  if ((*r)->type == REDIS_REPLY_INTEGER) return absl::StrCat((*r)->integer);
  if ((*r)->type == REDIS_REPLY_NIL) return "<nil>";
  return std::string(redis::ReplyText(r->get()));
}

class RedisClusterTest : public SharedServerTest<RedisCluster> {
 protected:
  void SetUp() override {
    static int n = 0;
    prefix_ = absl::StrCat("c", n++);
  }

  RedisOptions Options() const {
    RedisOptions o = FastRedisOptions(RedisMode::kCluster, server_->SeedAddresses(), prefix_);
    o.command_timeout = absl::Seconds(1);
    return o;
  }

  std::unique_ptr<Backend> NewBackend() {
    absl::StatusOr<std::unique_ptr<Backend>> b = NewRedisBackend(Options());
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : nullptr;
  }

  // Waits until replicas started together see each other (docs/backends.md
  // "Waiting across replicas": until then the first one takes no places in
  // the queues).
  static void AwaitPresence() {
    absl::SleepFor(2 * ReplicaPresence::kPeriod + absl::Milliseconds(50));
  }

  std::string LockKeyOf(const std::string& name) const {
    return redis::KeyCodec(prefix_).KeysFor(LockKey{"default", name}).lock;
  }

  // The slot of `name`'s keys (they share one, through their hash tag).
  int SlotOf(const std::string& name) const {
    absl::StatusOr<int> slot = server_->KeySlot(LockKeyOf(name));
    EXPECT_TRUE(slot.ok()) << slot.status();
    return slot.ok() ? *slot : -1;
  }

  // The port of the primary that serves `name`'s slot.
  int OwnerPortOf(const std::string& name) const {
    absl::StatusOr<RedisCluster::Node> owner = server_->SlotOwner(SlotOf(name));
    EXPECT_TRUE(owner.ok()) << owner.status();
    return owner.ok() ? owner->port : 0;
  }

  std::vector<RedisCluster::Node> Primaries() const {
    absl::StatusOr<std::vector<RedisCluster::Node>> p = server_->Primaries();
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *p : std::vector<RedisCluster::Node>{};
  }

  uint64_t MustAcquire(Backend& b, const std::string& name, const std::string& owner,
                       absl::Duration ttl = kLongTtl) {
    absl::StatusOr<AcquireResult> r = SyncAcquire(b, Acq(name, owner, ttl));
    EXPECT_TRUE(r.ok()) << name << ": " << r.status();
    EXPECT_TRUE(r.ok() && r->acquired) << name << " not acquired by " << owner;
    return r.ok() ? r->fencing_token : 0;
  }

  // Waits until `b` has `n` Acquires parked on `name`.
  void AwaitWaiters(Backend& b, const std::string& name, uint32_t n) {
    absl::StatusOr<LockState> s;
    EXPECT_TRUE(WaitFor(
        [&] {
          s = SyncDescribe(b, LockKey{"default", name});
          return s.ok() && s->waiters == n;
        },
        absl::Seconds(10)))
        << name << ": " << (s.ok() ? absl::StrCat(s->waiters, " waiters") : s.status().ToString());
  }

  // A primary other than the one serving `slot`.
  RedisCluster::Node OtherPrimary(int slot) const {
    for (RedisCluster::Node& p : Primaries()) {
      if (!p.Serves(slot)) return p;
    }
    ADD_FAILURE() << "no primary other than the owner of slot " << slot;
    return {};
  }

  std::string prefix_;
};

// --- The harness itself -----------------------------------------------------

TEST_F(RedisClusterTest, HarnessBuildsThreePrimariesWithAReplicaEachAndMovesSlots) {
  std::vector<RedisCluster::Node> primaries = Primaries();
  ASSERT_EQ(primaries.size(), 3u);
  for (const RedisCluster::Node& p : primaries) {
    absl::StatusOr<std::vector<RedisCluster::Node>> replicas = server_->ReplicasOf(p.id);
    ASSERT_TRUE(replicas.ok()) << replicas.status();
    EXPECT_EQ(replicas->size(), 1u) << p.address();
  }
  const std::string key = absl::StrCat(prefix_, ":{harness}");
  ASSERT_EQ(ReplyText(server_->CommandForKey(key, {"SET", key, "v"})), "OK");
  absl::StatusOr<int> slot = server_->KeySlot(key);
  ASSERT_TRUE(slot.ok()) << slot.status();
  absl::StatusOr<RedisCluster::Node> from = server_->SlotOwner(*slot);
  ASSERT_TRUE(from.ok()) << from.status();
  RedisCluster::Node to = OtherPrimary(*slot);

  ASSERT_THAT(server_->MigrateSlot(*slot, to.id), Ok());
  absl::StatusOr<RedisCluster::Node> owner = server_->SlotOwner(*slot);
  ASSERT_TRUE(owner.ok()) << owner.status();
  EXPECT_EQ(owner->id, to.id);
  EXPECT_EQ(ReplyText(server_->Command(to.port, {"GET", key})), "v");
  EXPECT_THAT(ReplyText(server_->Command(from->port, {"GET", key})), HasSubstr("MOVED"));
  EXPECT_EQ(ReplyText(server_->CommandForKey(key, {"DEL", key})), "1");
}

// --- Sharding ---------------------------------------------------------------

TEST_F(RedisClusterTest, LocksSpreadOverEveryPrimary) {
  std::unique_ptr<Backend> b = NewBackend();
  ASSERT_NE(b, nullptr);
  const int kLocks = 48;
  for (int i = 0; i < kLocks; ++i) MustAcquire(*b, absl::StrCat("spread-", i), "alice");
  const std::string pattern = redis::KeyCodec(prefix_).LockKeyPattern("default", "");
  size_t total = 0;
  for (const RedisCluster::Node& p : Primaries()) {
    absl::StatusOr<std::vector<std::string>> keys = server_->Keys(p.port, pattern);
    ASSERT_TRUE(keys.ok()) << keys.status();
    EXPECT_FALSE(keys->empty()) << "no lock on primary " << p.address();
    total += keys->size();
  }
  EXPECT_EQ(total, static_cast<size_t>(kLocks));
  // Each lock lives on the primary that serves its slot.
  for (int i = 0; i < kLocks; i += 7) {
    std::string name = absl::StrCat("spread-", i);
    EXPECT_EQ(ReplyText(server_->Command(OwnerPortOf(name), {"HGET", LockKeyOf(name), "owner"})),
              "alice")
        << name;
  }
}

TEST_F(RedisClusterTest, ListReturnsLocksFromEveryPrimary) {
  std::unique_ptr<Backend> b = NewBackend();
  ASSERT_NE(b, nullptr);
  std::vector<std::string> names;
  std::set<int> ports;
  for (int i = 0; i < 30; ++i) {
    names.push_back(absl::StrCat("listed-", i));
    MustAcquire(*b, names.back(), absl::StrCat("owner-", i));
    ports.insert(OwnerPortOf(names.back()));
  }
  MustAcquire(*b, "unlisted", "alice");  // another prefix
  ASSERT_EQ(ports.size(), 3u) << "the names should span every primary";
  std::sort(names.begin(), names.end());

  absl::StatusOr<ListResult> all = SyncList(*b, ListParams{"default", "listed-", 1000, ""});
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<std::string> listed;
  for (const LockState& l : all->locks) {
    listed.push_back(l.key.name);
    EXPECT_TRUE(l.held);
    EXPECT_EQ(l.owner, absl::StrCat("owner-", l.key.name.substr(7)));
  }
  EXPECT_THAT(listed, ElementsAreArray(names));
  EXPECT_EQ(all->next_page_token, "");

  // Page by page: every lock exactly once, in order.
  std::vector<std::string> paged;
  std::string token;
  int pages = 0;
  do {
    absl::StatusOr<ListResult> page = SyncList(*b, ListParams{"default", "listed-", 7, token});
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_LE(page->locks.size(), 7u);
    for (const LockState& l : page->locks) paged.push_back(l.key.name);
    token = page->next_page_token;
    ASSERT_LT(++pages, 20);
  } while (!token.empty());
  EXPECT_THAT(paged, ElementsAreArray(names));
}

// --- Slot migration ---------------------------------------------------------

// Alice holds a lock; bob waits on one backend (lockd replica), carol on
// another. The lock's slot moves to another primary. Alice's hold, token
// and lease calls survive the move, and her release (through the other
// replica, so that waking needs the release message) grants both waiters in
// turn, promptly.
TEST_F(RedisClusterTest, SlotMigrationKeepsTheHolderAndWakesWaiters) {
  std::unique_ptr<Backend> a = NewBackend();
  std::unique_ptr<Backend> b = NewBackend();
  ASSERT_TRUE(a != nullptr && b != nullptr);
  AwaitPresence();
  const std::string name = "moving";
  uint64_t t1 = MustAcquire(*a, name, "alice");
  auto bob = StartAcquire(*a, Acq(name, "bob", kLongTtl, absl::Minutes(2)));
  auto carol = StartAcquire(*b, Acq(name, "carol", kLongTtl, absl::Minutes(2)));
  // The lock's queue is in Redis: each backend counts both waiters.
  AwaitWaiters(*a, name, 2);
  AwaitWaiters(*b, name, 2);

  const int slot = SlotOf(name);
  RedisCluster::Node to = OtherPrimary(slot);
  ASSERT_THAT(server_->MigrateSlot(slot, to.id), Ok());
  EXPECT_EQ(ReplyText(server_->Command(to.port, {"HGET", LockKeyOf(name), "owner"})), "alice");

  absl::StatusOr<LockState> s = SyncDescribe(*b, LockKey{"default", name});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->held);
  EXPECT_EQ(s->owner, "alice");
  EXPECT_EQ(s->fencing_token, t1);
  absl::StatusOr<RenewResult> renewed =
      SyncRenew(*a, RenewParams{{"default", name}, "alice", kLongTtl});
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_EQ(renewed->fencing_token, t1);
  EXPECT_FALSE(bob->ready());
  EXPECT_FALSE(carol->ready());

  absl::StatusOr<ReleaseResult> released = SyncRelease(*b, Rel(name, "alice"));
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_TRUE(released->released);
  ASSERT_TRUE(WaitFor([&] { return bob->ready() || carol->ready(); }, kGrantBound))
      << "no waiter was granted within " << kGrantBound << " of the release";
  auto first = bob->ready() ? bob : carol;
  auto second = bob->ready() ? carol : bob;
  const std::string first_owner = bob->ready() ? "bob" : "carol";
  absl::StatusOr<AcquireResult> r1 = first->Wait();
  ASSERT_TRUE(r1.ok()) << r1.status();
  ASSERT_TRUE(r1->acquired);
  EXPECT_GT(r1->fencing_token, t1);
  EXPECT_FALSE(second->ready()) << "both waiters hold the lock";

  ASSERT_TRUE(SyncRelease(first == bob ? *a : *b, Rel(name, first_owner)).ok());
  absl::StatusOr<AcquireResult> r2 = second->Wait(kGrantBound);
  ASSERT_TRUE(r2.ok()) << r2.status();
  ASSERT_TRUE(r2->acquired);
  EXPECT_GT(r2->fencing_token, r1->fencing_token);
}

// The same while the slot is half-way: its keys already on the target, the
// source answering ASK. Renew and Describe reach the lock there; a
// contender is refused (or told to retry: Redis answers TRYAGAIN to scripts
// over keys of which some are still missing on the target, until the slot
// is handed over). After the hand-over, a release wakes the waiter promptly.
TEST_F(RedisClusterTest, LockCallsFollowAskRedirectsDuringAMigration) {
  std::unique_ptr<Backend> a = NewBackend();
  std::unique_ptr<Backend> b = NewBackend();
  ASSERT_TRUE(a != nullptr && b != nullptr);
  AwaitPresence();
  const std::string name = "asked";
  uint64_t t1 = MustAcquire(*a, name, "alice");
  auto bob = StartAcquire(*b, Acq(name, "bob", kLongTtl, absl::Minutes(2)));
  AwaitWaiters(*b, name, 1);

  const int slot = SlotOf(name);
  absl::StatusOr<RedisCluster::Node> from = server_->SlotOwner(slot);
  ASSERT_TRUE(from.ok()) << from.status();
  RedisCluster::Node to = OtherPrimary(slot);
  ASSERT_THAT(server_->BeginSlotMigration(slot, to.id), Ok());
  ASSERT_THAT(server_->MoveSlotKeys(slot), Ok());
  EXPECT_THAT(ReplyText(server_->Command(from->port, {"HGET", LockKeyOf(name), "owner"})),
              HasSubstr("ASK"));

  absl::StatusOr<RenewResult> renewed =
      SyncRenew(*a, RenewParams{{"default", name}, "alice", kLongTtl});
  EXPECT_TRUE(renewed.ok()) << renewed.status();
  if (renewed.ok()) {
    EXPECT_EQ(renewed->fencing_token, t1);
  }
  absl::StatusOr<LockState> s = SyncDescribe(*b, LockKey{"default", name});
  EXPECT_TRUE(s.ok()) << s.status();
  if (s.ok()) {
    EXPECT_EQ(s->owner, "alice");
  }
  absl::StatusOr<AcquireResult> refused = SyncAcquire(*a, Acq(name, "dave"));
  if (refused.ok()) {
    EXPECT_FALSE(refused->acquired);
  } else {
    EXPECT_THAT(refused, StatusIs(absl::StatusCode::kUnavailable));
  }
  const bool finished = server_->FinishSlotMigration(slot).ok();
  ASSERT_TRUE(finished);  // after the calls, so that a failed one cannot leave it half-way

  EXPECT_FALSE(bob->ready());
  absl::StatusOr<ReleaseResult> released = SyncRelease(*a, Rel(name, "alice"));
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_TRUE(released->released);
  absl::StatusOr<AcquireResult> r = bob->Wait(kGrantBound);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->acquired);
  EXPECT_GT(r->fencing_token, t1);
}

// --- Failover (last: it leaves a primary without a replica) ----------------

// A primary dies (SIGKILL) and its replica takes over. The backend finds the
// new primary by itself: its calls succeed again and it reports healthy
// within kRecoveryBound of the kill, and every token it grants afterwards is
// larger than every token granted before (on every primary).
TEST_F(RedisClusterTest, ZzPrimaryKilledReplicaPromotedBackendRecoversAndTokensGrow) {
  std::unique_ptr<Backend> b = NewBackend();
  ASSERT_NE(b, nullptr);
  std::vector<RedisCluster::Node> primaries = Primaries();
  ASSERT_EQ(primaries.size(), 3u);
  const RedisCluster::Node& victim = primaries[0];
  std::vector<std::string> names;
  std::vector<std::string> on_victim;
  uint64_t max_before = 0;
  for (int i = 0; i < 24; ++i) {
    names.push_back(absl::StrCat("failover-", i));
    max_before = std::max(max_before, MustAcquire(*b, names.back(), "alice", absl::Seconds(3)));
    ASSERT_TRUE(SyncRelease(*b, Rel(names.back(), "alice")).ok());
    if (victim.Serves(SlotOf(names.back()))) on_victim.push_back(names.back());
  }
  ASSERT_FALSE(on_victim.empty());

  absl::Time killed = absl::Now();
  absl::StatusOr<RedisCluster::Node> dead = server_->KillPrimary(0);
  ASSERT_TRUE(dead.ok()) << dead.status();
  ASSERT_EQ(dead->id, victim.id);
  ASSERT_THAT(server_->WaitForFailover(victim.id, kRecoveryBound), Ok());
  absl::StatusOr<RedisCluster::Node> owner = server_->SlotOwner(SlotOf(on_victim[0]));
  ASSERT_TRUE(owner.ok()) << owner.status();
  EXPECT_NE(owner->id, victim.id);

  // The first calls may still fail while the backend learns the new map.
  absl::StatusOr<AcquireResult> first;
  bool recovered = WaitFor(
      [&] {
        first = SyncAcquire(*b, Acq(on_victim[0], "bob", kLongTtl, absl::Seconds(5)));
        return first.ok() && first->acquired;
      },
      killed + kRecoveryBound - absl::Now(), absl::Milliseconds(100));
  ASSERT_TRUE(recovered) << "no grant on the promoted replica within " << kRecoveryBound
                         << " of the kill: "
                         << (first.ok() ? "not acquired" : first.status().ToString());
  EXPECT_GT(first->fencing_token, max_before);
  EXPECT_TRUE(WaitFor([&] { return b->Health().ok(); }, killed + kRecoveryBound - absl::Now()))
      << b->Health();

  // Every lock, on every primary: granted (the releases before the kill, or
  // at worst alice's 3 s lease, freed them) with a larger token.
  for (size_t i = 1; i < names.size(); ++i) {
    absl::StatusOr<AcquireResult> r =
        SyncAcquire(*b, Acq(names[i], "bob", kLongTtl, absl::Seconds(10)));
    ASSERT_TRUE(r.ok()) << names[i] << ": " << r.status();
    EXPECT_TRUE(r->acquired) << names[i];
    EXPECT_GT(r->fencing_token, max_before) << names[i];
  }
  EXPECT_THAT(b->Health(), Ok());
}

}  // namespace
}  // namespace lockd::testing
