// Shared locks and semaphores on the mysql backend, where the rules depend on
// its storage: where holders live, the sweeper per holder, the queue's
// entries across replicas, and the migration of a version 1 database. The
// rules every backend shares are in tests/conformance.

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/mysql/mysql_backend_fixture.h"
#include "tests/support/status_matchers.h"
#include "tests/support/sync_backend.h"

namespace lockd::testing {
namespace {

TEST_F(MysqlBackendTest, ExclusiveHoldersStayInTheLocksRowOthersAreHolderRows) {
  auto b = NewBackend();
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(SyncAcquire(*b, Acq("x", "w")).value().acquired);
  ASSERT_TRUE(SyncAcquire(*b, AcqShared("r", "r1")).value().acquired);
  ASSERT_TRUE(SyncAcquire(*b, AcqShared("r", "r2")).value().acquired);
  ASSERT_TRUE(SyncAcquire(*b, AcqPermits("s", "p1", 4, 3)).value().acquired);
  auto holders = [&](const std::string& name) {
    return QueryInt(
        absl::StrCat("SELECT COUNT(*) FROM ", prefix_, "holders WHERE name = '", name, "'"));
  };
  EXPECT_EQ(holders("x"), 0) << "an exclusive grant writes no holder row";
  EXPECT_EQ(holders("r"), 2);
  EXPECT_EQ(holders("s"), 1);
  EXPECT_EQ(QueryInt(absl::StrCat("SELECT kind FROM ", prefix_, "locks WHERE name = 'r'")), 1);
  EXPECT_EQ(QueryInt(absl::StrCat("SELECT lim FROM ", prefix_, "locks WHERE name = 's'")), 4);

  absl::StatusOr<LockState> s = SyncDescribe(*b, LockKey{"default", "r"});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->holders.size(), 2u);
  EXPECT_EQ(s->mode, LockMode::kShared);
  EXPECT_EQ(s->holders[0].owner, "r1");
  EXPECT_EQ(s->owner, "r2") << "the single-holder fields describe the newest holder";
  s = SyncDescribe(*b, LockKey{"default", "s"});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->limit, 4u);
  ASSERT_EQ(s->holders.size(), 1u);
  EXPECT_EQ(s->holders[0].permits, 3u);

  // The last shared holder's release frees the name: no row is left.
  ASSERT_TRUE(SyncRelease(*b, Rel("r", "r1")).value().released);
  ASSERT_TRUE(SyncRelease(*b, Rel("r", "r2")).value().released);
  EXPECT_EQ(QueryInt(absl::StrCat("SELECT COUNT(*) FROM ", prefix_, "locks WHERE name = 'r'")), 0);
  EXPECT_EQ(holders("r"), 0);
}

TEST_F(MysqlBackendTest, SweeperRemovesOnlyTheHolderWhoseLeaseEnded) {
  MysqlOptions o = Options();
  o.sweep_interval = absl::Milliseconds(20);
  auto b = NewBackend(o);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(SyncAcquire(*b, AcqShared("rw", "short", absl::Milliseconds(200))).value().acquired);
  AcquireResult kept = SyncAcquire(*b, AcqShared("rw", "long", absl::Seconds(60))).value();
  ASSERT_TRUE(kept.acquired);
  std::string count = absl::StrCat("SELECT COUNT(*) FROM ", prefix_, "holders");
  ASSERT_TRUE(WaitFor([&] { return QueryInt(count) == 1; }, absl::Seconds(5)))
      << "the expired holder was not swept";
  absl::StatusOr<LockState> s = SyncDescribe(*b, LockKey{"default", "rw"});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->holders.size(), 1u);
  EXPECT_EQ(s->holders[0].owner, "long");
  absl::StatusOr<RenewResult> r =
      SyncRenew(*b, RenewParams{LockKey{"default", "rw"}, "long", absl::Seconds(60)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->fencing_token, kept.fencing_token);
  EXPECT_THAT(SyncRenew(*b, RenewParams{LockKey{"default", "rw"}, "short", absl::Seconds(60)}),
              IsLockNotHeld());
}

TEST_F(MysqlBackendTest, DeadReplicasQueueEntryLapses) {
  auto a = NewBackend();
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(SyncAcquire(*a, Acq("q", "holder")).value().acquired);
  // The entry of a replica that crashed while its call waited: nobody
  // extends it any more (a live replica extends its entries every 0.5 s).
  for (const std::string& sql :
       {absl::StrCat("INSERT INTO ", prefix_,
                     "queue (ns, name, owner, replica, mode, permits, lim, until) VALUES"
                     " ('default', 'q', 'ghost', 'dead', 0, 0, 0,"
                     " TIMESTAMPADD(SECOND, 2, NOW(6)))"),
        absl::StrCat("UPDATE ", prefix_,
                     "locks SET queue_until = TIMESTAMPADD(SECOND, 2, NOW(6)) WHERE name = 'q'")}) {
    absl::StatusOr<std::string> r = server_->Query(sql);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  ASSERT_TRUE(SyncRelease(*a, Rel("q", "holder")).value().released);
  absl::StatusOr<AcquireResult> r = SyncAcquire(*a, Acq("q", "next"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->acquired) << "a newcomer queues behind the entry while it lives";
  const absl::Time start = absl::Now();
  r = SyncAcquire(*a, Acq("q", "next", absl::Seconds(30), absl::Seconds(10)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->acquired);
  EXPECT_LT(absl::Now() - start, absl::Seconds(4)) << "the dead replica's entry lapses";
}

TEST_F(MysqlBackendTest, CancelledWaiterLeavesNoQueueEntry) {
  auto a = NewBackend();
  auto b = NewBackend();
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(SyncAcquire(*a, AcqShared("c", "reader")).value().acquired);
  auto cancel = std::make_shared<CancelSignal>();
  auto waiting = StartAcquire(*b, Acq("c", "writer", absl::Seconds(30), absl::Seconds(30)), cancel);
  std::string entries = absl::StrCat("SELECT COUNT(*) FROM ", prefix_, "queue");
  ASSERT_TRUE(WaitFor([&] { return QueryInt(entries) == 1; }, absl::Seconds(5)));
  absl::StatusOr<AcquireResult> r = SyncAcquire(*a, AcqShared("c", "late"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->acquired) << "a reader does not pass the waiting writer of another replica";
  cancel->Cancel();
  EXPECT_THAT(waiting->Wait(), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_TRUE(WaitFor([&] { return QueryInt(entries) == 0; }, absl::Seconds(5)));
  r = SyncAcquire(*a, AcqShared("c", "late"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->acquired);
}

// docs/backends.md "Waiting across replicas": queue entries are written only
// while another replica is live.
TEST_F(MysqlBackendTest, AReplicaAloneQueuesNothingAndQueuesOnceAnotherIsLive) {
  auto a = NewBackend();
  ASSERT_NE(a, nullptr);
  const std::string replicas = absl::StrCat("SELECT COUNT(*) FROM ", prefix_, "replicas");
  const std::string entries = absl::StrCat("SELECT COUNT(*) FROM ", prefix_, "queue");
  ASSERT_TRUE(WaitFor([&] { return QueryInt(replicas) == 1; }, absl::Seconds(5)));
  absl::SleepFor(absl::Milliseconds(100));  // its first beat has been answered
  ASSERT_TRUE(SyncAcquire(*a, AcqShared("alone", "reader")).value().acquired);
  auto first = StartAcquire(*a, Acq("alone", "writer1", absl::Seconds(30), absl::Seconds(30)));
  ASSERT_TRUE(WaitFor(
      [&] {
        return SyncDescribe(*a, {"default", "alone"})->waiters == 1;
      },
      absl::Seconds(5)));
  EXPECT_EQ(QueryInt(entries), 0) << "a replica alone keeps its waiters' order itself";

  auto b = NewBackend();
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(WaitFor([&] { return QueryInt(replicas) == 2; }, absl::Seconds(5)));
  // Within a beat `a` sees `b`, and its waiting writers take their places.
  auto second = StartAcquire(*a, Acq("alone", "writer2", absl::Seconds(30), absl::Seconds(30)));
  ASSERT_TRUE(WaitFor([&] { return QueryInt(entries) >= 1; }, absl::Seconds(5)));
  // So a reader through `b` does not join the reader holding: it would pass
  // the writers waiting through `a`.
  absl::StatusOr<AcquireResult> r = SyncAcquire(*b, AcqShared("alone", "late"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->acquired);
  ASSERT_TRUE(SyncRelease(*a, Rel("alone", "reader")).value().released);
  EXPECT_TRUE(first->Wait().value().acquired);
  ASSERT_TRUE(SyncRelease(*a, Rel("alone", "writer1")).value().released);
  EXPECT_TRUE(second->Wait().value().acquired);
}

TEST_F(MysqlBackendTest, Version1DatabaseIsMigratedAndKeepsItsLocks) {
  const std::string p = prefix_;
  for (const std::string& sql : {
           absl::StrCat("CREATE TABLE ", p,
                        "meta (k VARBINARY(64) NOT NULL PRIMARY KEY, v BIGINT UNSIGNED NOT NULL)"
                        " ENGINE=InnoDB"),
           absl::StrCat("INSERT INTO ", p,
                        "meta (k, v) VALUES ('schema_version', 1), ('fence_floor', 0)"),
           absl::StrCat("CREATE TABLE ", p,
                        "locks (ns VARBINARY(64) NOT NULL, name VARBINARY(512) NOT NULL,"
                        " owner VARBINARY(256) NOT NULL, hold_count INT UNSIGNED NOT NULL,"
                        " token BIGINT UNSIGNED NOT NULL, expires_at DATETIME(6) NOT NULL,"
                        " last_kind TINYINT UNSIGNED NOT NULL DEFAULT 0,"
                        " last_request_id VARBINARY(128) NOT NULL DEFAULT '',"
                        " last_hold_count INT UNSIGNED NOT NULL DEFAULT 0,"
                        " last_ttl_us BIGINT NOT NULL DEFAULT 0,"
                        " PRIMARY KEY (ns, name), KEY expires (expires_at)) ENGINE=InnoDB"),
           absl::StrCat("INSERT INTO ", p,
                        "locks (ns, name, owner, hold_count, token, expires_at) VALUES"
                        " ('default', 'old', 'o', 1, 7, TIMESTAMPADD(SECOND, 60, NOW(6)))"),
           absl::StrCat("CREATE TABLE ", p,
                        "fences (ns VARBINARY(64) NOT NULL, name VARBINARY(512) NOT NULL,"
                        " token BIGINT UNSIGNED NOT NULL, granted_at DATETIME(6) NOT NULL,"
                        " freed_owner VARBINARY(256) NOT NULL DEFAULT '',"
                        " freed_request_id VARBINARY(128) NOT NULL DEFAULT '',"
                        " freed_until DATETIME(6) NULL,"
                        " PRIMARY KEY (ns, name), KEY granted (granted_at)) ENGINE=InnoDB"),
           absl::StrCat(
               "INSERT INTO ", p,
               "fences (ns, name, token, granted_at) VALUES ('default', 'old', 7, NOW(6))"),
       }) {
    absl::StatusOr<std::string> r = server_->Query(sql);
    ASSERT_TRUE(r.ok()) << r.status() << "\n" << sql;
  }
  auto b = NewBackend();
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(QueryInt(absl::StrCat("SELECT v FROM ", p, "meta WHERE k = 'schema_version'")), 2);
  absl::StatusOr<LockState> s = SyncDescribe(*b, LockKey{"default", "old"});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->held);
  EXPECT_EQ(s->owner, "o");
  EXPECT_EQ(s->fencing_token, 7u);
  absl::StatusOr<AcquireResult> r = SyncAcquire(*b, AcqShared("old", "r"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->acquired) << "the migrated row is an exclusive hold";
  ASSERT_TRUE(SyncRelease(*b, Rel("old", "o")).value().released);
  r = SyncAcquire(*b, AcqShared("old", "r"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->acquired);
  EXPECT_GT(r->fencing_token, 7u);
  b.reset();
  // A second start finds version 2 and changes nothing.
  b = NewBackend();
  ASSERT_NE(b, nullptr);
  s = SyncDescribe(*b, LockKey{"default", "old"});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->mode, LockMode::kShared);
}

}  // namespace
}  // namespace lockd::testing
