// The sweeper never removes a live lease. Three replicas share one database,
// each sweeping every few milliseconds, while pairs of owners take turns on a
// few locks for 30 s: grant, renew on time, then either release or abandon
// the lock so that its lease ends and the other owner re-grants the expired
// row (which is exactly the row the sweepers are trying to delete). Every
// renew and release that reached the database before the lease could have
// ended must succeed.

#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "backends/mysql/mysql_backend.h"
#include "gtest/gtest.h"
#include "tests/support/mariadb_server.h"
#include "tests/support/sync_backend.h"

namespace lockd::testing {
namespace {

int64_t HandlerDeletes(MariadbServer& server) {
  absl::StatusOr<std::string> out = server.Query("SHOW GLOBAL STATUS LIKE 'Handler_delete'");
  if (!out.ok()) return -1;
  std::vector<std::string> parts = absl::StrSplit(*out, '\t');
  int64_t v = -1;
  if (parts.size() == 2 && absl::SimpleAtoi(parts[1], &v)) return v;
  return -1;
}

TEST(MysqlSweeperTest, RenewalsAndRegrantsRacingTheSweeperNeverLoseALiveLease) {
  absl::StatusOr<std::unique_ptr<MariadbServer>> server = MariadbServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  MysqlOptions o;
  o.host = (*server)->host();
  o.port = (*server)->port();
  o.user = (*server)->user();
  o.password = (*server)->password();
  o.database = (*server)->database();
  o.table_prefix = "sweep_";
  o.pool_size = 4;
  o.sweep_interval = absl::Milliseconds(3);
  o.fence_retention = absl::ZeroDuration();  // only the lock sweeper deletes
  std::vector<std::unique_ptr<Backend>> replicas;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::unique_ptr<Backend>> b = NewMysqlBackend(o);
    ASSERT_TRUE(b.ok()) << b.status();
    replicas.push_back(*std::move(b));
  }

  constexpr int kLocks = 6;
  constexpr int kOwnersPerLock = 2;
  const absl::Duration kTestTime = absl::Seconds(30);
  const absl::Duration kTtl = absl::Milliseconds(250);
  const absl::Time end = absl::Now() + kTestTime;
  // Leeway for the database clock (DATETIME(6)) against ours, on one machine.
  const absl::Duration kSlack = absl::Milliseconds(2);

  std::atomic<int64_t> grants{0}, renewals{0}, releases{0}, abandons{0}, late{0}, lost{0},
      errors{0};
  int64_t deletes_before = HandlerDeletes(**server);
  std::vector<std::thread> threads;
  for (int l = 0; l < kLocks; ++l) {
    for (int k = 0; k < kOwnersPerLock; ++k) {
      threads.emplace_back([&, l, k] {
        Backend& b = *replicas[(l + k) % replicas.size()];
        const std::string name = absl::StrCat("live-", l);
        const std::string owner = absl::StrCat("owner-", l, "-", k);
        std::mt19937 rng(l * 31 + k);
        while (absl::Now() < end) {
          // Short abandoned leases make the re-grant race the sweeper often.
          absl::Duration ttl =
              std::uniform_int_distribution<int>(0, 2)(rng) == 0 ? absl::Milliseconds(30) : kTtl;
          absl::Time sent = absl::Now();
          absl::StatusOr<AcquireResult> a = SyncAcquire(b, Acq(name, owner, ttl, absl::Seconds(2)));
          if (!a.ok()) {
            ++errors;
            ADD_FAILURE() << owner << ": " << a.status();
            continue;
          }
          if (!a->acquired) continue;
          ++grants;
          // The lease began no earlier than the request was sent.
          absl::Time lease_floor = sent + ttl;
          int rounds = std::uniform_int_distribution<int>(0, 6)(rng);
          bool held = true;
          for (int i = 0; i < rounds && held; ++i) {
            absl::SleepFor(ttl * std::uniform_real_distribution<double>(0.1, 0.4)(rng));
            sent = absl::Now();
            absl::StatusOr<RenewResult> r =
                SyncRenew(b, RenewParams{LockKey{"default", name}, owner, ttl});
            absl::Time answered = absl::Now();
            if (r.ok()) {
              ++renewals;
              EXPECT_EQ(r->fencing_token, a->fencing_token);
              lease_floor = sent + ttl;
            } else if (IsLockNotHeld(r.status())) {
              held = false;
              if (answered + kSlack < lease_floor) {
                ++lost;
                ADD_FAILURE() << owner << " lost a live lease on renew (answered "
                              << (lease_floor - answered) << " before its end)";
              } else {
                ++late;
              }
            } else {
              ++errors;
              ADD_FAILURE() << owner << " renew: " << r.status();
              held = false;
            }
          }
          if (!held) continue;
          if (std::uniform_int_distribution<int>(0, 1)(rng) == 0) {
            ++abandons;  // stop renewing: the lease ends, the row stays
            absl::SleepFor(ttl);
            continue;
          }
          absl::StatusOr<ReleaseResult> r = SyncRelease(b, Rel(name, owner));
          absl::Time answered = absl::Now();
          if (r.ok()) {
            ++releases;
            EXPECT_TRUE(r->released);
          } else if (IsLockNotHeld(r.status())) {
            if (answered + kSlack < lease_floor) {
              ++lost;
              ADD_FAILURE() << owner << " lost a live lease on release";
            } else {
              ++late;
            }
          } else {
            ++errors;
            ADD_FAILURE() << owner << " release: " << r.status();
          }
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  int64_t deletes = HandlerDeletes(**server) - deletes_before;
  int64_t swept = deletes - releases.load();
  std::cout << "grants " << grants << ", renewals " << renewals << ", releases " << releases
            << ", abandoned " << abandons << ", late " << late << ", rows swept ~" << swept << "\n";
  EXPECT_EQ(lost.load(), 0);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_GT(grants.load(), 200);
  EXPECT_GT(abandons.load(), 50);
  EXPECT_GT(swept, 0) << "the sweepers never deleted anything: the race was not exercised";
}

}  // namespace
}  // namespace lockd::testing
