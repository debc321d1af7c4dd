// The redis backend through its Backend interface, against a real
// redis-server started by the test: key layout, fencing, script reloading,
// pub/sub wake-ups, outages and credentials.

#include "backends/redis/redis_backend.h"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "backends/common/coalescing_scope.h"
#include "backends/common/replica_presence.h"
#include "backends/redis/keys.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/redis/redis_test_util.h"
#include "tests/support/redis_server.h"
#include "tests/support/shared_server.h"
#include "tests/support/status_matchers.h"
#include "tests/support/sync_backend.h"

namespace lockd::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

// INFO commandstats' call count of `cmd` ("evalsha").
long long CommandCalls(const std::string& info, absl::string_view cmd) {
  const std::string field = absl::StrCat("cmdstat_", cmd, ":calls=");
  size_t at = info.find(field);
  if (at == std::string::npos) return 0;
  absl::string_view rest = absl::string_view(info).substr(at + field.size());
  long long n = 0;
  return absl::SimpleAtoi(rest.substr(0, rest.find(',')), &n) ? n : 0;
}

// How many scripts ran (EVALSHA + EVAL), leaving out the replicas' presence
// beats (replica_presence.h), the one script that runs ZREMRANGEBYSCORE.
long long ScriptCalls(RedisCli& cli) {
  std::string info = cli.Str({"INFO", "commandstats"});
  return CommandCalls(info, "evalsha") + CommandCalls(info, "eval") -
         CommandCalls(info, "zremrangebyscore");
}

RedisOptions FastOptions(const RedisServer& server, const std::string& prefix) {
  return FastRedisOptions(RedisMode::kStandalone, server.address(), prefix);
}

class RedisBackendTest : public SharedServerTest<RedisServer> {
 protected:
  void SetUp() override {
    static int n = 0;
    prefix_ = absl::StrCat("t", n++);
    absl::StatusOr<std::unique_ptr<RedisCli>> cli = RedisCli::Connect(server_->port());
    ASSERT_TRUE(cli.ok()) << cli.status();
    cli_ = *std::move(cli);
    backend_ = NewBackend();
    ASSERT_NE(backend_, nullptr);
  }

  std::unique_ptr<Backend> NewBackend(RedisOptions o) {
    absl::StatusOr<std::unique_ptr<Backend>> b = NewRedisBackend(o);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : nullptr;
  }
  std::unique_ptr<Backend> NewBackend() { return NewBackend(Options()); }
  // Another replica, once the replicas see each other (docs/backends.md
  // "Waiting across replicas": till then a replica alone takes no places in
  // the queues).
  std::unique_ptr<Backend> NewReplica() {
    std::unique_ptr<Backend> b = NewBackend();
    absl::SleepFor(2 * ReplicaPresence::kPeriod + absl::Milliseconds(50));
    return b;
  }
  RedisOptions Options() const { return FastOptions(*server_, prefix_); }

  redis::LockKeys Keys(const std::string& name) const {
    return redis::KeyCodec(prefix_).KeysFor(LockKey{"default", name});
  }

  uint64_t MustAcquire(Backend& b, const std::string& name, const std::string& owner,
                       absl::Duration ttl = absl::Seconds(30)) {
    absl::StatusOr<AcquireResult> r = SyncAcquire(b, Acq(name, owner, ttl));
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r.ok() && r->acquired) << name << " not acquired by " << owner;
    return r.ok() ? r->fencing_token : 0;
  }

  std::string prefix_;
  std::unique_ptr<RedisCli> cli_;
  std::unique_ptr<Backend> backend_;
};

// --- Key layout and fencing ------------------------------------------------

TEST_F(RedisBackendTest, LockIsAHashWithOwnerHoldCountAndToken) {
  uint64_t token = MustAcquire(*backend_, "h", "alice", absl::Seconds(10));
  MustAcquire(*backend_, "h", "alice", absl::Seconds(10));
  redis::LockKeys k = Keys("h");
  EXPECT_EQ(cli_->Str({"TYPE", k.lock}), "hash");
  EXPECT_EQ(cli_->Str({"HGET", k.lock, "owner"}), "alice");
  EXPECT_EQ(cli_->Str({"HGET", k.lock, "count"}), "2");
  EXPECT_EQ(cli_->Str({"HGET", k.lock, "token"}), absl::StrCat(token));
  long long pttl = cli_->Int({"PTTL", k.lock});
  EXPECT_GT(pttl, 9000);
  EXPECT_LE(pttl, 10000);
}

// The Redis server's clock in milliseconds.
long long RedisNowMs(RedisCli& cli) {
  return cli.Int(
      {"EVAL", "local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000)", "0"});
}

TEST_F(RedisBackendTest, UncontendedExclusiveAcquireAndReleaseAreOneScriptEachAndNoQueueKey) {
  long long before = ScriptCalls(*cli_);
  MustAcquire(*backend_, "fast", "alice");
  EXPECT_EQ(ScriptCalls(*cli_) - before, 1);
  EXPECT_EQ(cli_->Int({"EXISTS", Keys("fast").queue, Keys("fast").qlife}), 0);
  ASSERT_TRUE(SyncRelease(*backend_, Rel("fast", "alice")).ok());
  EXPECT_EQ(ScriptCalls(*cli_) - before, 2);
}

// INFO stats' total_reads_processed: how many reads Redis made from its
// clients' sockets (a pipelined write of several commands is one read).
long long ReadsProcessed(RedisCli& cli) {
  std::string info = cli.Str({"INFO", "stats"});
  constexpr absl::string_view kField = "total_reads_processed:";
  size_t at = absl::string_view(info).find(kField);
  long long n = -1;
  if (at != std::string::npos) {
    absl::string_view rest = absl::string_view(info).substr(at + kField.size());
    EXPECT_TRUE(absl::SimpleAtoi(rest.substr(0, rest.find('\r')), &n)) << info;
  }
  return n;
}

// What a session batch costs: acquires and releases started while a
// CoalescingScope is open on the thread are held back (nothing reaches Redis)
// and leave in one write as it closes; each gets its own answer.
TEST_F(RedisBackendTest, CallsStartedInACoalescingScopeReachRedisInOneWrite) {
  constexpr int kCalls = 20;
  const long long scripts_before = ScriptCalls(*cli_);
  const long long reads_before = ReadsProcessed(*cli_);
  std::vector<std::shared_ptr<PendingCall<AcquireResult>>> acquires;
  {
    CoalescingScope scope;
    for (int i = 0; i < kCalls; ++i) {
      acquires.push_back(StartAcquire(*backend_, Acq(absl::StrCat("batch/", i), "alice")));
    }
    absl::SleepFor(absl::Milliseconds(100));
    EXPECT_FALSE(acquires[0]->ready());
  }
  for (auto& a : acquires) {
    absl::StatusOr<AcquireResult> r = a->Wait();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->acquired);
  }
  // The cli's own commands in between: ScriptCalls' INFO, this INFO.
  EXPECT_EQ(ScriptCalls(*cli_) - scripts_before, kCalls);
  EXPECT_EQ(ReadsProcessed(*cli_) - reads_before, 1 + 2);
  std::vector<std::shared_ptr<PendingCall<ReleaseResult>>> releases;
  {
    CoalescingScope scope;
    for (int i = 0; i < kCalls; ++i) {
      auto pending = std::make_shared<PendingCall<ReleaseResult>>();
      backend_->Release(Rel(absl::StrCat("batch/", i), "alice"),
                        PendingCall<ReleaseResult>::Done(pending));
      releases.push_back(pending);
    }
  }
  for (auto& r : releases) {
    absl::StatusOr<ReleaseResult> released = r->Wait();
    ASSERT_TRUE(released.ok()) << released.status();
    EXPECT_TRUE(released->released);
  }
  EXPECT_EQ(ScriptCalls(*cli_) - scripts_before, 2 * kCalls);
}

TEST_F(RedisBackendTest, SharedHoldersAreRecordsInTheLockHashEachWithItsOwnLease) {
  absl::StatusOr<AcquireResult> a = SyncAcquire(*backend_, AcqShared("rw", "r1", absl::Seconds(1)));
  absl::StatusOr<AcquireResult> b =
      SyncAcquire(*backend_, AcqShared("rw", "r2", absl::Seconds(30)));
  ASSERT_TRUE(a.ok() && a->acquired && b.ok() && b->acquired);
  EXPECT_GT(b->fencing_token, a->fencing_token);
  redis::LockKeys k = Keys("rw");
  EXPECT_EQ(cli_->Str({"HGET", k.lock, "kind"}), "S");
  EXPECT_EQ(cli_->Str({"HGET", k.lock, "owner"}), "<nil>");
  EXPECT_THAT(cli_->Str({"HGET", k.lock, "h:r1"}), HasSubstr(absl::StrCat(a->fencing_token)));
  absl::StatusOr<LockState> s = SyncDescribe(*backend_, LockKey{"default", "rw"});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->mode, LockMode::kShared);
  ASSERT_EQ(s->holders.size(), 2u);
  EXPECT_EQ(s->holders[0].owner, "r1");
  EXPECT_EQ(s->owner, "r2");  // the newest
  // A writer cannot enter; r1's lease ends and only r1 loses its hold.
  absl::StatusOr<AcquireResult> w = SyncAcquire(*backend_, Acq("rw", "w"));
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(w->acquired);
  absl::SleepFor(absl::Milliseconds(1100));
  EXPECT_TRUE(IsLockNotHeld(
      SyncRenew(*backend_, RenewParams{{"default", "rw"}, "r1", absl::Seconds(5)}).status()));
  EXPECT_TRUE(SyncRenew(*backend_, RenewParams{{"default", "rw"}, "r2", absl::Seconds(5)}).ok());
  s = SyncDescribe(*backend_, LockKey{"default", "rw"});
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->holders.size(), 1u);
  EXPECT_EQ(s->holders[0].owner, "r2");
  // The last holder's release frees the lock: nothing but the fence key.
  absl::StatusOr<ReleaseResult> r = SyncRelease(*backend_, Rel("rw", "r2"));
  ASSERT_TRUE(r.ok() && r->released);
  EXPECT_THAT(cli_->Keys(absl::StrCat(prefix_, ":{*")), ElementsAre(k.fence));
}

TEST_F(RedisBackendTest, SemaphoreAdmitsUpToItsLimitAndRefusesAnotherKind) {
  ASSERT_TRUE(SyncAcquire(*backend_, AcqPermits("sem", "a", 3, 2))->acquired);
  ASSERT_TRUE(SyncAcquire(*backend_, AcqPermits("sem", "b", 3, 1))->acquired);
  EXPECT_FALSE(SyncAcquire(*backend_, AcqPermits("sem", "c", 3, 1))->acquired);
  EXPECT_EQ(ErrorReasonOf(SyncAcquire(*backend_, AcqPermits("sem", "c", 4, 1)).status()),
            kLockKindMismatchReason);
  EXPECT_EQ(ErrorReasonOf(SyncAcquire(*backend_, Acq("sem", "c")).status()),
            kLockKindMismatchReason);
  EXPECT_EQ(ErrorReasonOf(SyncAcquire(*backend_, AcqPermits("sem", "a", 3, 1)).status()),
            kPermitsMismatchReason);
  // A waiter is granted when permits are given back.
  auto waiter = StartAcquire(*backend_, AcqPermits("sem", "c", 3, 2, absl::Seconds(5)));
  ASSERT_TRUE(SyncRelease(*backend_, Rel("sem", "b")).ok());
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_FALSE(waiter->ready()) << "2 + 2 permits do not fit in 3";
  ASSERT_TRUE(SyncRelease(*backend_, Rel("sem", "a")).ok());
  absl::StatusOr<AcquireResult> c = waiter->Wait();
  ASSERT_TRUE(c.ok() && c->acquired) << c.status();
  absl::StatusOr<LockState> s = SyncDescribe(*backend_, LockKey{"default", "sem"});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->limit, 3u);
  ASSERT_EQ(s->holders.size(), 1u);
  EXPECT_EQ(s->holders[0].permits, 2u);
}

TEST_F(RedisBackendTest, ReaderArrivingAfterAWaitingWriterOnAnotherReplicaQueuesBehindIt) {
  std::unique_ptr<Backend> other = NewReplica();
  ASSERT_TRUE(SyncAcquire(*backend_, AcqShared("fifo", "r1"))->acquired);
  auto writer = StartAcquire(*other, Acq("fifo", "w", absl::Seconds(30), absl::Seconds(10)));
  ASSERT_TRUE(WaitFor(
      [&] {
        return cli_->Int({"ZCARD", Keys("fifo").queue}) == 1;
      },
      absl::Seconds(5)));
  // A try of a reader fails (someone waits); a waiting one queues.
  EXPECT_FALSE(SyncAcquire(*backend_, AcqShared("fifo", "r2"))->acquired);
  auto reader =
      StartAcquire(*backend_, AcqShared("fifo", "r3", absl::Seconds(30), absl::Seconds(10)));
  ASSERT_TRUE(WaitFor(
      [&] {
        return cli_->Int({"ZCARD", Keys("fifo").queue}) == 2;
      },
      absl::Seconds(5)));
  ASSERT_TRUE(SyncRelease(*backend_, Rel("fifo", "r1")).ok());
  absl::StatusOr<AcquireResult> w = writer->Wait();
  ASSERT_TRUE(w.ok() && w->acquired) << w.status();
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_FALSE(reader->ready());
  ASSERT_TRUE(SyncRelease(*other, Rel("fifo", "w")).ok());
  absl::StatusOr<AcquireResult> r = reader->Wait();
  ASSERT_TRUE(r.ok() && r->acquired) << r.status();
  EXPECT_GT(r->fencing_token, w->fencing_token);
  ASSERT_TRUE(SyncRelease(*backend_, Rel("fifo", "r3")).ok());
  EXPECT_THAT(cli_->Keys(absl::StrCat(prefix_, ":{*")), ElementsAre(Keys("fifo").fence));
}

TEST_F(RedisBackendTest, QueueEntryOfADeadReplicaStopsHoldingOthersBackAtTheEndOfItsLifetime) {
  // An entry its replica no longer extends (it died): the lock is free, but a
  // try finds someone waiting, and a waiter is granted once the entry ends.
  redis::LockKeys k = Keys("dead");
  const std::string ghost = "0123456789abcdef|X|ghost";
  ASSERT_EQ(cli_->Int({"ZADD", k.queue, "1", ghost}), 1);
  ASSERT_EQ(cli_->Int({"ZADD", k.qlife, absl::StrCat(RedisNowMs(*cli_) + 800), ghost}), 1);
  absl::StatusOr<AcquireResult> t = SyncAcquire(*backend_, Acq("dead", "alice"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(t->acquired);
  EXPECT_FALSE(t->current.held);
  absl::Time start = absl::Now();
  absl::StatusOr<AcquireResult> w =
      SyncAcquire(*backend_, Acq("dead", "alice", absl::Seconds(30), absl::Seconds(5)));
  ASSERT_TRUE(w.ok() && w->acquired) << w.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2)) << "the waiter should retry at the entry's end";
  EXPECT_EQ(cli_->Int({"EXISTS", k.queue, k.qlife}), 0);
}

TEST_F(RedisBackendTest, WaitingCallsKeepTheirQueueEntriesAliveAndTakeThemOutWhenTheyEnd) {
  std::unique_ptr<Backend> other = NewReplica();
  MustAcquire(*backend_, "alive", "holder");
  redis::LockKeys k = Keys("alive");
  auto cancel = std::make_shared<CancelSignal>();
  auto waiter = StartAcquire(
      *backend_, AcqShared("alive", "reader", absl::Seconds(30), absl::Seconds(30)), cancel);
  ASSERT_TRUE(WaitFor([&] { return cli_->Int({"ZCARD", k.queue}) == 1; }, absl::Seconds(5)));
  absl::SleepFor(absl::Milliseconds(500));  // past the attempts that follow a park
  std::string member =
      cli_->Str({"EVAL", "return redis.call('ZRANGE', KEYS[1], 0, 0)[1]", "1", k.qlife});
  long long first_end = std::stoll(cli_->Str({"ZSCORE", k.qlife, member}));
  // Extended while the call waits (every 0.5 s, for 2 s each time): a dead
  // replica's entry would end within 2 s of its last extension.
  EXPECT_LE(first_end, RedisNowMs(*cli_) + 2000);
  ASSERT_TRUE(WaitFor(
      [&] {
        return std::stoll(cli_->Str({"ZSCORE", k.qlife, member})) > first_end;
      },
      absl::Seconds(2)));
  absl::SleepFor(absl::Seconds(2));  // past the first entry's end, had it not been extended
  EXPECT_EQ(cli_->Int({"ZCARD", k.queue}), 1);
  EXPECT_GT(cli_->Int({"PTTL", k.queue}), 0);
  cancel->Cancel();
  EXPECT_THAT(waiter->Wait(), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(cli_->Int({"EXISTS", k.queue, k.qlife}), 0);
}

TEST_F(RedisBackendTest, AReplicaAloneTakesNoQueuePlacesAndTakesThemOnceAnotherIsLive) {
  const std::string replicas = redis::KeyCodec(prefix_).ReplicasKey();
  absl::SleepFor(absl::Milliseconds(100));  // backend_'s first beat has been answered
  EXPECT_EQ(cli_->Int({"ZCARD", replicas}), 1);
  redis::LockKeys k = Keys("alone");
  ASSERT_TRUE(SyncAcquire(*backend_, AcqShared("alone", "reader"))->acquired);
  auto first =
      StartAcquire(*backend_, Acq("alone", "writer1", absl::Seconds(30), absl::Seconds(30)));
  ASSERT_TRUE(WaitFor(
      [&] {
        return SyncDescribe(*backend_, {"default", "alone"})->waiters == 1;
      },
      absl::Seconds(5)));
  EXPECT_EQ(cli_->Int({"EXISTS", k.queue, k.qlife}), 0)
      << "a replica alone keeps its waiters' order itself";
  // The extension script looks each place up (ZSCORE), which no script of a
  // replica alone does (the waiter's own retries may run meanwhile).
  const long long lookups = CommandCalls(cli_->Str({"INFO", "commandstats"}), "zscore");
  absl::SleepFor(absl::Seconds(1));  // two periods of the queue's extension
  EXPECT_EQ(CommandCalls(cli_->Str({"INFO", "commandstats"}), "zscore") - lookups, 0)
      << "alone, it has no place to extend";

  std::unique_ptr<Backend> other = NewBackend();
  ASSERT_TRUE(WaitFor([&] { return cli_->Int({"ZCARD", replicas}) == 2; }, absl::Seconds(5)));
  // Within a beat backend_ sees the other, and its new waiters take places.
  absl::SleepFor(2 * ReplicaPresence::kPeriod + absl::Milliseconds(50));
  auto second =
      StartAcquire(*backend_, Acq("alone", "writer2", absl::Seconds(30), absl::Seconds(30)));
  ASSERT_TRUE(WaitFor([&] { return cli_->Int({"ZCARD", k.queue}) == 1; }, absl::Seconds(5)));
  // So a reader through the other replica does not join the reader holding:
  // it would pass the writer waiting through backend_.
  absl::StatusOr<AcquireResult> r = SyncAcquire(*other, AcqShared("alone", "late"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->acquired);
  ASSERT_TRUE(SyncRelease(*backend_, Rel("alone", "reader")).ok());
  EXPECT_TRUE(first->Wait().value().acquired);
  ASSERT_TRUE(SyncRelease(*backend_, Rel("alone", "writer1")).ok());
  EXPECT_TRUE(second->Wait().value().acquired);
  // A replica that stops drops out after its presence's lifetime.
  other.reset();
  EXPECT_TRUE(WaitFor([&] { return cli_->Int({"ZCARD", replicas}) == 1; }, absl::Seconds(5)));
}

TEST_F(RedisBackendTest, UpgradeOfTheOnlyReaderTakesANewTokenAndTheExclusiveFormat) {
  absl::StatusOr<AcquireResult> r = SyncAcquire(*backend_, AcqShared("up", "alice"));
  ASSERT_TRUE(r.ok() && r->acquired);
  absl::StatusOr<AcquireResult> u = SyncAcquire(*backend_, Acq("up", "alice"));
  ASSERT_TRUE(u.ok() && u->acquired) << u.status();
  EXPECT_GT(u->fencing_token, r->fencing_token);
  EXPECT_EQ(u->hold_count, 2u);
  redis::LockKeys k = Keys("up");
  EXPECT_EQ(cli_->Str({"HGET", k.lock, "owner"}), "alice");
  EXPECT_EQ(cli_->Str({"HGET", k.lock, "count"}), "2");
  // With a second reader, an upgrade would block: refused at once.
  ASSERT_TRUE(SyncRelease(*backend_, Rel("up", "alice")).ok());
  ASSERT_TRUE(SyncRelease(*backend_, Rel("up", "alice")).ok());
  ASSERT_TRUE(SyncAcquire(*backend_, AcqShared("up", "alice"))->acquired);
  ASSERT_TRUE(SyncAcquire(*backend_, AcqShared("up", "bob"))->acquired);
  EXPECT_EQ(
      ErrorReasonOf(
          SyncAcquire(*backend_, Acq("up", "alice", absl::Seconds(30), absl::Seconds(5))).status()),
      kUpgradeWouldBlockReason);
}

TEST_F(RedisBackendTest, FenceKeyIsSeededFromServerTimeAndOutlivesTheLease) {
  uint64_t token = MustAcquire(*backend_, "f", "alice", absl::Seconds(10));
  redis::LockKeys k = Keys("f");
  EXPECT_EQ(cli_->Str({"GET", k.fence}), absl::StrCat(token));
  // The server's TIME in microseconds (the fence key was missing).
  uint64_t now_us = static_cast<uint64_t>(absl::ToUnixMicros(absl::Now()));
  EXPECT_GT(token, now_us - 60'000'000);
  EXPECT_LT(token, now_us + 60'000'000);
  long long fence_ttl = cli_->Int({"PTTL", k.fence});
  long long lock_ttl = cli_->Int({"PTTL", k.lock});
  const long long day = 24LL * 3600 * 1000;
  EXPECT_GT(fence_ttl, lock_ttl + day - 2000) << "fence key must outlive the lease";
  EXPECT_LE(fence_ttl, 10000 + day);
  // Renew moves the fence TTL along with the lease.
  ASSERT_TRUE(SyncRenew(*backend_, RenewParams{{"default", "f"}, "alice", absl::Hours(1)}).ok());
  EXPECT_GT(cli_->Int({"PTTL", k.fence}), 3600LL * 1000 + day - 2000);
}

TEST_F(RedisBackendTest, FenceRetentionZeroKeepsFenceKeysForever) {
  RedisOptions o = Options();
  o.fence_retention = absl::ZeroDuration();
  std::unique_ptr<Backend> b = NewBackend(o);
  ASSERT_NE(b, nullptr);
  MustAcquire(*b, "forever", "alice", absl::Seconds(5));
  EXPECT_EQ(cli_->Int({"PTTL", Keys("forever").fence}), -1);
}

TEST_F(RedisBackendTest, TokensKeepGrowingWhenTheFenceKeyIsLost) {
  uint64_t t1 = MustAcquire(*backend_, "lost", "alice");
  ASSERT_TRUE(SyncRelease(*backend_, Rel("lost", "alice")).ok());
  ASSERT_EQ(cli_->Int({"DEL", Keys("lost").fence}), 1);
  uint64_t t2 = MustAcquire(*backend_, "lost", "bob");
  EXPECT_GT(t2, t1);
}

TEST_F(RedisBackendTest, ReleaseThatFreesLeavesOnlyTheFenceKey) {
  MustAcquire(*backend_, "clean", "alice");
  ASSERT_TRUE(SyncRelease(*backend_, Rel("clean", "alice")).ok());
  EXPECT_THAT(cli_->Keys(absl::StrCat(prefix_, ":{*")), ElementsAre(Keys("clean").fence));
}

TEST_F(RedisBackendTest, FreeingReleaseIsRememberedForReleaseMemoryThenForgottenOnNextGrant) {
  RedisOptions o = Options();
  o.release_memory = absl::Seconds(60);
  std::unique_ptr<Backend> b = NewBackend(o);
  MustAcquire(*b, "mem", "alice");
  absl::StatusOr<ReleaseResult> r = SyncRelease(*b, Rel("mem", "alice", "rel-1"));
  ASSERT_TRUE(r.ok() && r->released);
  redis::LockKeys k = Keys("mem");
  long long pttl = cli_->Int({"PTTL", k.freed});
  EXPECT_GT(pttl, 50000);
  EXPECT_LE(pttl, 60000);
  r = SyncRelease(*b, Rel("mem", "alice", "rel-1"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->released);
  // A retry after the lock went to another owner still answers the same.
  MustAcquire(*b, "mem", "bob");
  r = SyncRelease(*b, Rel("mem", "alice", "rel-1"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->released);
  // Alice's next grant makes that release no longer her last request.
  ASSERT_TRUE(SyncRelease(*b, Rel("mem", "bob")).ok());
  MustAcquire(*b, "mem", "alice");
  EXPECT_EQ(cli_->Int({"EXISTS", k.freed}), 0);
}

TEST_F(RedisBackendTest, PrefixesKeepDeploymentsApart) {
  MustAcquire(*backend_, "shared-name", "alice");
  RedisOptions o = Options();
  o.key_prefix = prefix_ + "-other";
  std::unique_ptr<Backend> other = NewBackend(o);
  MustAcquire(*other, "shared-name", "bob");
  absl::StatusOr<ListResult> list = SyncList(*other, ListParams{"default", "", 100, ""});
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->locks.size(), 1u);
  EXPECT_EQ(list->locks[0].owner, "bob");
}

TEST_F(RedisBackendTest, SelectsTheConfiguredDatabase) {
  RedisOptions o = Options();
  o.db = 3;
  std::unique_ptr<Backend> b = NewBackend(o);
  MustAcquire(*b, "db3", "alice");
  EXPECT_EQ(cli_->Int({"EXISTS", Keys("db3").lock}), 0);
  ASSERT_EQ(cli_->Str({"SELECT", "3"}), "OK");
  EXPECT_EQ(cli_->Int({"EXISTS", Keys("db3").lock}), 1);
}

TEST_F(RedisBackendTest, ScriptsComeBackAfterScriptFlush) {
  uint64_t t1 = MustAcquire(*backend_, "flush", "alice");
  ASSERT_EQ(cli_->Str({"SCRIPT", "FLUSH"}), "OK");
  absl::StatusOr<LockState> d = SyncDescribe(*backend_, LockKey{"default", "flush"});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->owner, "alice");
  ASSERT_EQ(cli_->Str({"SCRIPT", "FLUSH"}), "OK");
  ASSERT_TRUE(
      SyncRenew(*backend_, RenewParams{{"default", "flush"}, "alice", absl::Seconds(5)}).ok());
  ASSERT_EQ(cli_->Str({"SCRIPT", "FLUSH"}), "OK");
  ASSERT_TRUE(SyncRelease(*backend_, Rel("flush", "alice")).ok());
  ASSERT_EQ(cli_->Str({"SCRIPT", "FLUSH"}), "OK");
  EXPECT_GT(MustAcquire(*backend_, "flush", "bob"), t1);
}

TEST_F(RedisBackendTest, KeyOfAnotherTypeIsInternalNamingTheLock) {
  ASSERT_EQ(cli_->Str({"SET", Keys("strange").lock, "not a hash"}), "OK");
  absl::StatusOr<AcquireResult> r = SyncAcquire(*backend_, Acq("strange", "alice"));
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(r.status().message(), HasSubstr("\"strange\""));
}

TEST_F(RedisBackendTest, ListScansEveryPageOfAManyKeyNamespace) {
  // More keys than one SCAN COUNT, so the scan takes several round trips.
  constexpr int kLocks = 1500;
  std::vector<std::string> names;
  for (int i = 0; i < kLocks; ++i) names.push_back(absl::StrCat("many/", 10000 + i));
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = t; i < kLocks; i += 4) MustAcquire(*backend_, names[i], "alice");
      });
    }
    for (auto& t : threads) t.join();
  }
  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    absl::StatusOr<ListResult> page =
        SyncList(*backend_, ListParams{"default", "many/", 400, token});
    ASSERT_TRUE(page.ok()) << page.status();
    for (const LockState& s : page->locks) seen.push_back(s.key.name);
    token = page->next_page_token;
    ASSERT_LT(++pages, 10);
  } while (!token.empty());
  EXPECT_EQ(pages, 4);
  EXPECT_EQ(seen, names);
}

// --- Waiting -----------------------------------------------------------------

TEST_F(RedisBackendTest, ReleaseOnOneProcessWakesWaiterOnAnother) {
  std::unique_ptr<Backend> other = NewBackend();
  uint64_t t1 = MustAcquire(*backend_, "x", "alice");
  std::atomic<bool> done{false};
  absl::StatusOr<AcquireResult> got;
  absl::Time granted_at;
  std::thread waiter([&] {
    got = SyncAcquire(*other, Acq("x", "bob", absl::Seconds(30), absl::Seconds(20)));
    granted_at = absl::Now();
    done = true;
  });
  ASSERT_TRUE(WaitFor([&] { return cli_->Subscribers(Keys("x").channel) == 1; }, absl::Seconds(5)));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(done);
  absl::Time released_at = absl::Now();
  ASSERT_TRUE(SyncRelease(*backend_, Rel("x", "alice")).ok());
  waiter.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->acquired);
  EXPECT_GT(got->fencing_token, t1);
  EXPECT_LT(granted_at - released_at, absl::Milliseconds(200)) << "woken by the release message";
}

TEST_F(RedisBackendTest, WaiterGetsTheLockWhenTheLeaseEndsWithoutRelease) {
  std::unique_ptr<Backend> other = NewBackend();
  MustAcquire(*backend_, "crash", "gone", absl::Milliseconds(400));
  // The lease ends at or after before_describe + ttl_remaining.
  absl::Time before_describe = absl::Now();
  absl::StatusOr<LockState> held = SyncDescribe(*backend_, LockKey{"default", "crash"});
  ASSERT_TRUE(held.ok() && held->held);
  absl::Time lease_end = before_describe + held->ttl_remaining;
  absl::StatusOr<AcquireResult> r =
      SyncAcquire(*other, Acq("crash", "bob", absl::Seconds(30), absl::Seconds(10)));
  absl::Duration late = absl::Now() - lease_end;
  ASSERT_TRUE(r.ok() && r->acquired) << r.status();
  std::cerr << "granted " << late << " after the lease ended\n";
  EXPECT_GE(late, absl::Milliseconds(-20)) << "granted before the lease ended";
  EXPECT_LE(late, absl::Milliseconds(100)) << "the PTTL timer should fire at lease end";
}

TEST_F(RedisBackendTest, AReaderLeavingBesideOtherReadersWakesNobody) {
  ASSERT_TRUE(SyncAcquire(*backend_, AcqShared("rooms", "r1"))->acquired);
  ASSERT_TRUE(SyncAcquire(*backend_, AcqShared("rooms", "r2"))->acquired);
  auto writer = StartAcquire(*backend_, Acq("rooms", "w", absl::Seconds(30), absl::Seconds(20)));
  ASSERT_TRUE(WaitFor(
      [&] {
        return SyncDescribe(*backend_, {"default", "rooms"})->waiters == 1;
      },
      absl::Seconds(5)));
  absl::SleepFor(absl::Milliseconds(100));
  auto publishes = [&] { return CommandCalls(cli_->Str({"INFO", "commandstats"}), "publish"); };
  const long long scripts = ScriptCalls(*cli_);
  const long long published = publishes();
  // r2 still holds: the writer cannot be admitted, so nobody is told. Only
  // the writer's attempt pipelined behind the release runs (and loses).
  ASSERT_TRUE(SyncRelease(*backend_, Rel("rooms", "r1")).value().released);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(publishes(), published);
  EXPECT_EQ(ScriptCalls(*cli_) - scripts, 2) << "the release woke the writer again";
  EXPECT_FALSE(writer->ready());
  // The last reader's release admits it.
  ASSERT_TRUE(SyncRelease(*backend_, Rel("rooms", "r2")).value().released);
  absl::StatusOr<AcquireResult> w = writer->Wait();
  ASSERT_TRUE(w.ok() && w->acquired) << w.status();
}

TEST_F(RedisBackendTest, ReleaseWakesOnlyTheFirstWaiterAndNobodyPolls) {
  MustAcquire(*backend_, "herd", "holder");
  constexpr int kWaiters = 8;
  std::vector<std::thread> threads;
  std::atomic<int> granted{0};
  std::vector<std::string> owners;
  for (int i = 0; i < kWaiters; ++i) owners.push_back(absl::StrCat("w", i));
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      absl::StatusOr<AcquireResult> r =
          SyncAcquire(*backend_, Acq("herd", owners[i], absl::Seconds(30), absl::Seconds(20)));
      if (r.ok() && r->acquired) ++granted;
    });
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<LockState> s = SyncDescribe(*backend_, LockKey{"default", "herd"});
        return s.ok() && s->waiters == kWaiters;
      },
      absl::Seconds(10)));
  // Waiting costs nothing: no script runs while the holder holds.
  absl::SleepFor(absl::Milliseconds(100));
  long long before = ScriptCalls(*cli_);
  absl::SleepFor(absl::Milliseconds(1000));
  EXPECT_EQ(ScriptCalls(*cli_), before) << "waiters poll Redis";
  // One release, one retry of the first waiter (pipelined behind the
  // release); the release reply and message that follow are recognised as
  // old news.
  ASSERT_TRUE(SyncRelease(*backend_, Rel("herd", "holder")).ok());
  ASSERT_TRUE(WaitFor([&] { return granted == 1; }, absl::Seconds(5)));
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(granted, 1);
  EXPECT_EQ(ScriptCalls(*cli_) - before, 2) << "more than the first waiter retried";
  // The rest follow one by one.
  for (int i = 1; i < kWaiters; ++i) {
    absl::StatusOr<LockState> s = SyncDescribe(*backend_, LockKey{"default", "herd"});
    ASSERT_TRUE(s.ok() && s->held);
    ASSERT_TRUE(SyncRelease(*backend_, Rel("herd", s->owner)).ok());
    ASSERT_TRUE(WaitFor([&] { return granted == i + 1; }, absl::Seconds(5)));
  }
  absl::StatusOr<LockState> s = SyncDescribe(*backend_, LockKey{"default", "herd"});
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(SyncRelease(*backend_, Rel("herd", s->owner)).ok());
  for (auto& t : threads) t.join();
}

TEST_F(RedisBackendTest, ChannelIsSubscribedExactlyWhileWaitersWait) {
  const std::string channel = Keys("sub").channel;
  MustAcquire(*backend_, "sub", "alice");
  EXPECT_EQ(cli_->Subscribers(channel), 0);
  // A waiter that times out.
  absl::StatusOr<AcquireResult> r =
      SyncAcquire(*backend_, Acq("sub", "bob", absl::Seconds(30), absl::Milliseconds(300)));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->acquired);
  EXPECT_EQ(r->current.owner, "alice");
  EXPECT_TRUE(WaitFor([&] { return cli_->Subscribers(channel) == 0; }, absl::Seconds(5)));
  // A waiter that is cancelled.
  auto cancel = std::make_shared<CancelSignal>();
  std::thread t([&] {
    absl::StatusOr<AcquireResult> c =
        SyncAcquire(*backend_, Acq("sub", "carol", absl::Seconds(30), absl::Seconds(30)), cancel);
    EXPECT_THAT(c, StatusIs(absl::StatusCode::kCancelled));
  });
  ASSERT_TRUE(WaitFor([&] { return cli_->Subscribers(channel) == 1; }, absl::Seconds(5)));
  cancel->Cancel();
  t.join();
  EXPECT_TRUE(WaitFor([&] { return cli_->Subscribers(channel) == 0; }, absl::Seconds(5)));
  // A waiter that is granted.
  std::thread g([&] {
    absl::StatusOr<AcquireResult> c =
        SyncAcquire(*backend_, Acq("sub", "dave", absl::Seconds(30), absl::Seconds(30)));
    EXPECT_TRUE(c.ok() && c->acquired);
  });
  ASSERT_TRUE(WaitFor([&] { return cli_->Subscribers(channel) == 1; }, absl::Seconds(5)));
  ASSERT_TRUE(SyncRelease(*backend_, Rel("sub", "alice")).ok());
  g.join();
  EXPECT_TRUE(WaitFor([&] { return cli_->Subscribers(channel) == 0; }, absl::Seconds(5)));
}

TEST_F(RedisBackendTest, TooManyWaitersIsResourceExhausted) {
  RedisOptions o = Options();
  o.max_waiters = 1;
  std::unique_ptr<Backend> b = NewBackend(o);
  MustAcquire(*b, "full", "alice");
  std::thread t([&] {
    SyncAcquire(*b, Acq("full", "bob", absl::Seconds(30), absl::Seconds(1))).IgnoreError();
  });
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<LockState> s = SyncDescribe(*b, LockKey{"default", "full"});
        return s.ok() && s->waiters == 1;
      },
      absl::Seconds(5)));
  absl::StatusOr<AcquireResult> r =
      SyncAcquire(*b, Acq("full", "carol", absl::Seconds(30), absl::Seconds(1)));
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kResourceExhausted));
  t.join();
}

// --- Credentials and options ----------------------------------------------

TEST(RedisBackendOptionsTest, InvalidOptionsNameTheOption) {
  RedisOptions o;
  o.addresses = "nonsense";
  EXPECT_THAT(NewRedisBackend(o).status().message(), HasSubstr("redis.addresses"));
  o = RedisOptions();
  o.key_prefix = "a{b}";
  EXPECT_THAT(NewRedisBackend(o).status().message(), HasSubstr("redis.key_prefix"));
  o = RedisOptions();
  o.pool_size = 0;
  EXPECT_THAT(NewRedisBackend(o).status().message(), HasSubstr("redis.pool_size"));
  o = RedisOptions();
  o.username = "user";
  EXPECT_THAT(NewRedisBackend(o), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(RedisBackendOptionsTest, UnreachableServerFailsStartWithUnavailable) {
  RedisOptions o;
  o.addresses = absl::StrCat("127.0.0.1:", FreePort());
  o.connect_timeout = absl::Milliseconds(300);
  absl::StatusOr<std::unique_ptr<Backend>> b = NewRedisBackend(o);
  EXPECT_THAT(b, StatusIs(absl::StatusCode::kUnavailable));
}

TEST(RedisBackendAuthTest, PasswordAndAclUser) {
  RedisServer::Options so;
  so.password = "default-secret-1";
  so.acl_user = "lockd";
  so.acl_password = "acl-secret-2";
  absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();

  RedisOptions o = FastOptions(**server, "auth");
  // No password where one is required.
  absl::StatusOr<std::unique_ptr<Backend>> b = NewRedisBackend(o);
  EXPECT_THAT(b, StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(b.status().message(), HasSubstr("authentication failed"));
  // A wrong password.
  o.password = "wrong-secret-3";
  b = NewRedisBackend(o);
  EXPECT_THAT(b, StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(b.status().message(), HasSubstr("authentication failed"));
  EXPECT_THAT(b.status().message(), Not(HasSubstr("wrong-secret-3")));
  // The default user's password.
  o.password = "default-secret-1";
  b = NewRedisBackend(o);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(SyncAcquire(**b, Acq("a", "alice")).ok());
  b->reset();
  // An ACL user, with a wrong and then the right password.
  o.username = "lockd";
  b = NewRedisBackend(o);
  EXPECT_THAT(b.status().message(), HasSubstr("authentication failed"));
  EXPECT_THAT(b.status().message(), Not(HasSubstr("default-secret-1")));
  o.password = "acl-secret-2";
  b = NewRedisBackend(o);
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<AcquireResult> r = SyncAcquire(**b, Acq("b", "bob"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->acquired);
}

// --- Outages --------------------------------------------------------------

class RedisOutageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<RedisServer>> s = RedisServer::Start();
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    absl::StatusOr<std::unique_ptr<Backend>> b = NewRedisBackend(FastOptions(*server_, "out"));
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = *std::move(b);
  }

  bool EventuallyHealthy(bool healthy) {
    return WaitFor([&] { return backend_->Health().ok() == healthy; }, absl::Seconds(10),
                   absl::Milliseconds(10));
  }

  std::unique_ptr<RedisServer> server_;
  std::unique_ptr<Backend> backend_;
};

TEST_F(RedisOutageTest, CallsFailFastWhileDownAndEverythingRecoversByItself) {
  absl::StatusOr<AcquireResult> first = SyncAcquire(*backend_, Acq("o", "alice"));
  ASSERT_TRUE(first.ok() && first->acquired);
  ASSERT_TRUE(backend_->Health().ok());

  server_->Stop();
  ASSERT_TRUE(EventuallyHealthy(false)) << "health did not notice the outage";
  EXPECT_THAT(backend_->Health().message(), HasSubstr("redis"));
  for (int i = 0; i < 3; ++i) {
    absl::Time start = absl::Now();
    absl::StatusOr<AcquireResult> a = SyncAcquire(*backend_, Acq("o", "bob"));
    EXPECT_THAT(a, StatusIs(absl::StatusCode::kUnavailable));
    EXPECT_THAT(a.status().message(), HasSubstr("\"o\""));
    // Well under the 500 ms connect and command timeouts: nothing waited on
    // the network.
    EXPECT_LT(absl::Now() - start, absl::Milliseconds(250)) << "not failing fast";
  }
  EXPECT_THAT(SyncRelease(*backend_, Rel("o", "alice")), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(SyncRenew(*backend_, RenewParams{{"default", "o"}, "alice", absl::Seconds(5)}),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(SyncDescribe(*backend_, LockKey{"default", "o"}),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(SyncList(*backend_, ListParams{"default", "", 10, ""}),
              StatusIs(absl::StatusCode::kUnavailable));

  ASSERT_TRUE(server_->Restart().ok());
  ASSERT_TRUE(EventuallyHealthy(true)) << backend_->Health();
  // Without persistence the lock is gone; the fence is re-seeded from TIME.
  absl::StatusOr<AcquireResult> again = SyncAcquire(*backend_, Acq("o", "bob"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->acquired);
  EXPECT_GT(again->fencing_token, first->fencing_token);
}

TEST_F(RedisOutageTest, ParkedWaiterStaysParkedUntilItsDeadline) {
  ASSERT_TRUE(SyncAcquire(*backend_, Acq("p", "alice")).ok());
  absl::Time start = absl::Now();
  absl::StatusOr<AcquireResult> r;
  std::thread waiter(
      [&] { r = SyncAcquire(*backend_, Acq("p", "bob", absl::Seconds(30), absl::Seconds(2))); });
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<LockState> s = SyncDescribe(*backend_, LockKey{"default", "p"});
        return s.ok() && s->waiters == 1;
      },
      absl::Seconds(5)));
  server_->Stop();
  waiter.join();
  absl::Duration waited = absl::Now() - start;
  EXPECT_GE(waited, absl::Milliseconds(1900)) << "the outage ended the wait early";
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(RedisOutageTest, ParkedWaiterGetsTheLockAfterRedisRestartsWithoutData) {
  absl::StatusOr<AcquireResult> held = SyncAcquire(*backend_, Acq("q", "alice"));
  ASSERT_TRUE(held.ok() && held->acquired);
  absl::StatusOr<AcquireResult> r;
  std::thread waiter(
      [&] { r = SyncAcquire(*backend_, Acq("q", "bob", absl::Seconds(30), absl::Seconds(20))); });
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<LockState> s = SyncDescribe(*backend_, LockKey{"default", "q"});
        return s.ok() && s->waiters == 1;
      },
      absl::Seconds(5)));
  ASSERT_TRUE(server_->Restart().ok());
  waiter.join();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->acquired) << "re-subscribing should retry the waiter";
  EXPECT_GT(r->fencing_token, held->fencing_token);
  // The holder learns that its lock is gone.
  EXPECT_THAT(SyncRenew(*backend_, RenewParams{{"default", "q"}, "alice", absl::Seconds(5)}),
              IsLockNotHeld());
}

TEST(RedisPersistenceTest, RestartWithPersistenceKeepsTheLockAndTheFence) {
  RedisServer::Options so;
  so.persistence = true;
  absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::unique_ptr<Backend>> b = NewRedisBackend(FastOptions(**server, "aof"));
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<AcquireResult> first = SyncAcquire(**b, Acq("kept", "alice"));
  ASSERT_TRUE(first.ok() && first->acquired);

  ASSERT_TRUE((*server)->Restart().ok());
  ASSERT_TRUE(WaitFor([&] { return (*b)->Health().ok(); }, absl::Seconds(10)));
  absl::StatusOr<LockState> d = SyncDescribe(**b, LockKey{"default", "kept"});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->held);
  EXPECT_EQ(d->owner, "alice");
  EXPECT_EQ(d->fencing_token, first->fencing_token);
  ASSERT_TRUE(SyncRenew(**b, RenewParams{{"default", "kept"}, "alice", absl::Seconds(5)}).ok());
  ASSERT_TRUE(SyncRelease(**b, Rel("kept", "alice")).ok());
  absl::StatusOr<AcquireResult> next = SyncAcquire(**b, Acq("kept", "bob"));
  ASSERT_TRUE(next.ok() && next->acquired);
  EXPECT_GT(next->fencing_token, first->fencing_token);
}

// Grants the lock `n` times (each released) and returns the largest token.
uint64_t GrantTimes(Backend& b, const std::string& name, int n) {
  uint64_t last = 0;
  for (int i = 0; i < n; ++i) {
    std::string owner = absl::StrCat("owner-", i);
    absl::StatusOr<AcquireResult> a = SyncAcquire(b, Acq(name, owner));
    EXPECT_TRUE(a.ok() && a->acquired) << a.status();
    if (!a.ok()) return 0;
    EXPECT_GT(a->fencing_token, last);
    last = a->fencing_token;
    EXPECT_TRUE(SyncRelease(b, Rel(name, owner)).ok());
  }
  return last;
}

// Redis restarted from a snapshot older than the last grants (RDB, as after
// a crash between two saves): tokens granted after it are still larger than
// every token granted before.
TEST(RedisPersistenceTest, TokensNeverRepeatAfterARestartFromAnOlderRdbSnapshot) {
  absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::unique_ptr<RedisCli>> cli = RedisCli::Connect((*server)->port());
  ASSERT_TRUE(cli.ok()) << cli.status();
  absl::StatusOr<std::unique_ptr<Backend>> b = NewRedisBackend(FastOptions(**server, "rdb"));
  ASSERT_TRUE(b.ok()) << b.status();
  GrantTimes(**b, "snap", 2);
  ASSERT_EQ((*cli)->Str({"SAVE"}), "OK");
  uint64_t before = GrantTimes(**b, "snap", 3);  // not in the snapshot
  (*server)->Kill();
  ASSERT_TRUE((*server)->Restart().ok());  // loads dump.rdb
  ASSERT_TRUE(WaitFor([&] { return (*b)->Health().ok(); }, absl::Seconds(10)));
  absl::StatusOr<AcquireResult> next = SyncAcquire(**b, Acq("snap", "after"));
  ASSERT_TRUE(next.ok() && next->acquired) << next.status();
  EXPECT_GT(next->fencing_token, before) << "a token granted before the restart came back";
}

// The same with an append-only file fsynced every second, restored as a
// crash would leave it: without the grants of the last second.
TEST(RedisPersistenceTest, TokensNeverRepeatAfterARestartFromAnAofThatMissedTheLastGrants) {
  RedisServer::Options so;
  so.extra_args = {"--appendonly", "yes", "--appendfsync", "everysec"};
  absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::unique_ptr<Backend>> b = NewRedisBackend(FastOptions(**server, "aof"));
  ASSERT_TRUE(b.ok()) << b.status();
  GrantTimes(**b, "aof", 2);
  absl::SleepFor(absl::Milliseconds(1500));  // fsynced
  std::string aof = absl::StrCat((*server)->dir(), "/appendonlydir");
  std::string saved = absl::StrCat((*server)->dir(), "/aof-at-last-fsync");
  ASSERT_EQ(std::system(absl::StrCat("cp -a ", aof, " ", saved).c_str()), 0);
  uint64_t before = GrantTimes(**b, "aof", 3);  // the second the crash loses
  (*server)->Kill();
  ASSERT_EQ(std::system(absl::StrCat("rm -rf ", aof, " && mv ", saved, " ", aof).c_str()), 0);
  ASSERT_TRUE((*server)->Restart().ok());
  ASSERT_TRUE(WaitFor([&] { return (*b)->Health().ok(); }, absl::Seconds(10)));
  absl::StatusOr<AcquireResult> next = SyncAcquire(**b, Acq("aof", "after"));
  ASSERT_TRUE(next.ok() && next->acquired) << next.status();
  EXPECT_GT(next->fencing_token, before) << "a token granted before the restart came back";
}

TEST_F(RedisOutageTest, HungServerTimesOutAsUnavailableAndRecovers) {
  ASSERT_TRUE(SyncAcquire(*backend_, Acq("h", "alice")).ok());
  server_->Pause();
  absl::Time start = absl::Now();
  absl::StatusOr<LockState> d = SyncDescribe(*backend_, LockKey{"default", "h"});
  EXPECT_THAT(d, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2)) << "command timeout not applied";
  EXPECT_TRUE(EventuallyHealthy(false));
  server_->Resume();
  ASSERT_TRUE(EventuallyHealthy(true)) << backend_->Health();
  d = SyncDescribe(*backend_, LockKey{"default", "h"});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->owner, "alice");
}

}  // namespace
}  // namespace lockd::testing
