// The mysql backend's RenewMany (backends/mysql/mysql_renew_many.h) against
// a private MariaDB server: each hold is answered as Renew would answer it,
// in one batch of statements. Part of lockd_mysql_backend_test.

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/mysql/mysql_backend_fixture.h"
#include "tests/support/status_matchers.h"
#include "tests/support/sync_backend.h"

namespace lockd::testing {
namespace {

using ::testing::HasSubstr;

using RenewResults = std::vector<absl::StatusOr<RenewResult>>;

// Backend::RenewMany, waited for (sync_backend.h's helpers take one result).
RenewResults SyncRenewMany(Backend& b, std::vector<RenewParams> params) {
  auto done = std::make_shared<std::promise<RenewResults>>();
  std::future<RenewResults> f = done->get_future();
  b.RenewMany(std::move(params), [done](RenewResults r) { done->set_value(std::move(r)); });
  if (f.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    ADD_FAILURE() << "RenewMany did not answer within 60 s";
    return {};
  }
  return f.get();
}

RenewParams Ren(const std::string& name, const std::string& owner, absl::Duration ttl) {
  return RenewParams{LockKey{"default", name}, owner, ttl};
}

// The same outcome, token, lease and error text.
void ExpectSameAnswer(const absl::StatusOr<RenewResult>& batch,
                      const absl::StatusOr<RenewResult>& single, const RenewParams& p) {
  SCOPED_TRACE(absl::StrCat(p.key.name, " renewed by ", p.owner));
  ASSERT_EQ(batch.ok(), single.ok()) << batch.status() << " vs " << single.status();
  if (single.ok()) {
    EXPECT_EQ(batch->fencing_token, single->fencing_token);
    EXPECT_EQ(batch->ttl, single->ttl);
  } else {
    EXPECT_EQ(batch.status(), single.status());
    EXPECT_EQ(IsLockNotHeld(batch.status()), IsLockNotHeld(single.status()));
  }
}

TEST_F(MysqlBackendTest, RenewManyAnswersEachHoldAsRenewWouldAndExtendsOnlyLiveOwnLeases) {
  MysqlOptions o = Options();
  o.sweep_interval = absl::Hours(1);  // the expired row stays
  auto b = NewBackend(o);
  ASSERT_NE(b, nullptr);
  const absl::Duration kShort = absl::Seconds(5);
  const absl::Duration kRenewed = absl::Seconds(40);
  AcquireResult mine = SyncAcquire(*b, Acq("mine", "o1", kShort)).value();
  ASSERT_TRUE(mine.acquired);
  ASSERT_TRUE(SyncAcquire(*b, Acq("theirs", "o2", kShort)).value().acquired);
  ASSERT_TRUE(SyncAcquire(*b, Acq("expired", "o1", absl::Milliseconds(100))).value().acquired);
  // More holds than one statement takes (mysql::kRenewChunk is 500).
  constexpr int kMany = 520;
  std::vector<uint64_t> tokens;
  for (int i = 0; i < kMany; ++i) {
    AcquireResult a = SyncAcquire(*b, Acq(absl::StrCat("many/", i), "o1", kShort)).value();
    ASSERT_TRUE(a.acquired);
    tokens.push_back(a.fencing_token);
  }
  absl::SleepFor(absl::Milliseconds(200));
  ASSERT_EQ(QueryInt(absl::StrCat("SELECT COUNT(*) FROM ", prefix_,
                                  "locks WHERE name = 'expired' AND expires_at < NOW(6)")),
            1)
      << "the expired lease's row must still be there";

  std::vector<RenewParams> params = {Ren("mine", "o1", kRenewed), Ren("theirs", "o1", kRenewed),
                                     Ren("free", "o1", kRenewed), Ren("expired", "o1", kRenewed)};
  for (int i = 0; i < kMany; ++i) params.push_back(Ren(absl::StrCat("many/", i), "o1", kRenewed));
  params.push_back(Ren("mine", "o1", kRenewed));  // twice in one call
  auto status = [&](const char* name) {
    return QueryInt(absl::StrCat(
        "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = '", name,
        "'"));
  };
  const int64_t calls = status("COM_CALL_PROCEDURE");
  const int64_t updates = status("COM_UPDATE");
  RenewResults got = SyncRenewMany(*b, params);
  ASSERT_EQ(got.size(), params.size());
  EXPECT_EQ(status("COM_CALL_PROCEDURE"), calls) << "no renew procedure call per hold";
  EXPECT_LE(status("COM_UPDATE") - updates, 2) << "one UPDATE per 500 holds";

  ASSERT_TRUE(got[0].ok()) << got[0].status();
  EXPECT_EQ(got[0]->fencing_token, mine.fencing_token);
  EXPECT_EQ(got[0]->ttl, kRenewed);
  EXPECT_THAT(got[1], IsLockNotHeld());
  EXPECT_THAT(got[1].status().message(), HasSubstr("another owner"));
  EXPECT_THAT(got[2], IsLockNotHeld());
  EXPECT_THAT(got[3], IsLockNotHeld());
  for (int i = 0; i < kMany; ++i) {
    ASSERT_TRUE(got[4 + i].ok()) << i << ": " << got[4 + i].status();
    EXPECT_EQ(got[4 + i]->fencing_token, tokens[i]);
  }
  ASSERT_TRUE(got.back().ok()) << got.back().status();
  EXPECT_EQ(got.back()->fencing_token, mine.fencing_token);

  // Leases: the owner's are extended, another owner's and the ended one not.
  for (const std::string& name :
       std::vector<std::string>{"mine", "many/0", absl::StrCat("many/", kMany - 1)}) {
    absl::StatusOr<LockState> s = SyncDescribe(*b, LockKey{"default", name});
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_TRUE(s->held) << name;
    EXPECT_GT(s->ttl_remaining, kShort) << name << " was not extended";
  }
  absl::StatusOr<LockState> theirs = SyncDescribe(*b, LockKey{"default", "theirs"});
  ASSERT_TRUE(theirs.ok());
  EXPECT_EQ(theirs->owner, "o2");
  EXPECT_LE(theirs->ttl_remaining, kShort);
  absl::StatusOr<LockState> expired = SyncDescribe(*b, LockKey{"default", "expired"});
  ASSERT_TRUE(expired.ok());
  EXPECT_FALSE(expired->held) << "an ended lease must not come back";

  // Renew, one by one, answers the same (token, lease and error text).
  for (size_t i = 0; i < params.size(); ++i) {
    ExpectSameAnswer(got[i], SyncRenew(*b, params[i]), params[i]);
  }
}

TEST_F(MysqlBackendTest, RenewManyCallsOfManyOwnersAndLeasesAreAnsweredEachTheirOwn) {
  auto b = NewBackend();
  ASSERT_NE(b, nullptr);
  // 60 sessions of one hold each renew at once (their renewals share
  // statements); every third renews a lock it does not hold.
  constexpr int kSessions = 60;
  for (int i = 0; i < kSessions; ++i) {
    ASSERT_TRUE(
        SyncAcquire(*b, Acq(absl::StrCat("s/", i), absl::StrCat("owner", i), absl::Seconds(5)))
            .value()
            .acquired);
  }
  std::vector<std::future<RenewResults>> calls;
  for (int i = 0; i < kSessions; ++i) {
    std::string owner = absl::StrCat("owner", i % 3 == 2 ? i + 1 : i);
    calls.push_back(std::async(std::launch::async, [&b, i, owner] {
      return SyncRenewMany(*b, {Ren(absl::StrCat("s/", i), owner, absl::Seconds(20))});
    }));
  }
  for (int i = 0; i < kSessions; ++i) {
    RenewResults r = calls[i].get();
    ASSERT_EQ(r.size(), 1u);
    if (i % 3 == 2) {
      EXPECT_THAT(r[0], IsLockNotHeld()) << i;
    } else {
      ASSERT_TRUE(r[0].ok()) << i << ": " << r[0].status();
      EXPECT_EQ(r[0]->ttl, absl::Seconds(20));
    }
  }
  // One call whose holds ask for different leases gets each its own.
  RenewResults r = SyncRenewMany(
      *b, {Ren("s/0", "owner0", absl::Seconds(50)), Ren("s/1", "owner1", absl::Seconds(10))});
  ASSERT_EQ(r.size(), 2u);
  ASSERT_TRUE(r[0].ok() && r[1].ok());
  EXPECT_EQ(r[0]->ttl, absl::Seconds(50));
  EXPECT_EQ(r[1]->ttl, absl::Seconds(10));
  absl::StatusOr<LockState> s0 = SyncDescribe(*b, LockKey{"default", "s/0"});
  absl::StatusOr<LockState> s1 = SyncDescribe(*b, LockKey{"default", "s/1"});
  ASSERT_TRUE(s0.ok() && s1.ok());
  EXPECT_GT(s0->ttl_remaining, absl::Seconds(40));
  EXPECT_LE(s1->ttl_remaining, absl::Seconds(10));
  EXPECT_GT(s1->ttl_remaining, absl::Seconds(5));
  EXPECT_TRUE(SyncRenewMany(*b, {}).empty());
}

TEST_F(MysqlBackendTest, RenewManyAfterShutdownIsUnavailableForEachHold) {
  auto b = NewBackend();
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(SyncAcquire(*b, Acq("down", "o")).value().acquired);
  b->Shutdown();
  RenewResults r =
      SyncRenewMany(*b, {Ren("down", "o", absl::Seconds(5)), Ren("other", "o", absl::Seconds(5))});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_THAT(r[0], StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(r[1], StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(MysqlBackendTest, RenewManyWhileTheDatabaseIsDownIsUnavailableForEachHoldAsRenew) {
  // A private server: this test kills it.
  absl::StatusOr<std::unique_ptr<MariadbServer>> db = MariadbServer::Start();
  ASSERT_TRUE(db.ok()) << db.status();
  MysqlOptions o = Options();
  o.host = (*db)->host();
  o.port = (*db)->port();
  o.user = (*db)->user();
  o.password = (*db)->password();
  o.database = (*db)->database();
  auto b = NewBackend(o);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(SyncAcquire(*b, Acq("a", "o")).value().acquired);
  ASSERT_TRUE(SyncAcquire(*b, Acq("b", "o")).value().acquired);
  (*db)->Kill();
  std::vector<RenewParams> params = {Ren("a", "o", absl::Seconds(30)),
                                     Ren("b", "o", absl::Seconds(30))};
  RenewResults r = SyncRenewMany(*b, params);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_THAT(r[0], StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(r[1], StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(SyncRenew(*b, params[0]), StatusIs(absl::StatusCode::kUnavailable));
}
}  // namespace
}  // namespace lockd::testing
