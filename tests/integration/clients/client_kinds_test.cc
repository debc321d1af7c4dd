// lockd::Client's shared locks, semaphores and AcquireAll against a real
// lockd process (memory backend), over the Session stream and over the
// unary RPCs (TEST_P): readers overlap and a writer waits for them, a
// semaphore admits up to its limit, another kind is refused at once with
// its reason, an upgrade that would block is refused, AcquireAll takes
// every lock or none and never deadlocks with a caller listing the locks in
// the opposite order, and a shared hold is renewed past its ttl.

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lockd/client.h"
#include "tests/integration/clients/restartable_lockd.h"
#include "tests/support/process.h"
#include "tests/support/status_matchers.h"

namespace lockd {
namespace {

using ::lockd::testing::RestartableLockd;
using ::lockd::testing::StatusIs;
using ::lockd::testing::TempDir;
using ::testing::UnorderedElementsAre;

// The parameter: whether the clients hold over their Session stream.
class ClientKindsTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    lockd_.emplace(tmp_.path());
    ASSERT_TRUE(lockd_->Start().ok());
  }

  Client NewClient() {
    ClientOptions options;
    options.rpc_timeout = absl::Seconds(3);
    options.use_sessions = GetParam();
    absl::StatusOr<Client> c = Client::Connect(lockd_->address(), options);
    EXPECT_TRUE(c.ok()) << c.status();
    return *std::move(c);
  }

  // ttl 10 s: long enough for a session hold (see client.h "Sessions").
  static AcquireOptions Opts(absl::Duration wait = absl::ZeroDuration(),
                             absl::Duration ttl = absl::Seconds(10)) {
    AcquireOptions o;
    o.ttl = ttl;
    o.wait = wait;
    return o;
  }

  static std::vector<std::string> Owners(const LockInfo& info) {
    std::vector<std::string> owners;
    for (const Holder& h : info.holders) owners.push_back(h.owner);
    return owners;
  }

  TempDir tmp_;
  std::optional<RestartableLockd> lockd_;
};

TEST_P(ClientKindsTest, ReadersOverlapAndAWriterWaitsForThem) {
  Client a = NewClient(), b = NewClient(), w = NewClient();
  absl::StatusOr<Lease> ra = a.AcquireShared("catalog", Opts());
  ASSERT_TRUE(ra.ok()) << ra.status();
  absl::StatusOr<Lease> rb = b.AcquireShared("catalog", Opts());
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_EQ(rb->mode(), HoldMode::kShared);
  EXPECT_GT(rb->fencing_token(), ra->fencing_token());
  absl::StatusOr<LockInfo> info = w.Describe("catalog");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->mode, HoldMode::kShared);
  EXPECT_THAT(Owners(*info), UnorderedElementsAre(a.owner(), b.owner()));
  EXPECT_THAT(w.Acquire("catalog", Opts(absl::Milliseconds(200))),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  ASSERT_TRUE(ra->Release().ok());
  ASSERT_TRUE(rb->Release().ok());
  absl::StatusOr<Lease> writer = w.Acquire("catalog", Opts(absl::Seconds(5)));
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_GT(writer->fencing_token(), rb->fencing_token());
}

TEST_P(ClientKindsTest, SemaphoreAdmitsUpToItsLimit) {
  Client a = NewClient(), b = NewClient(), c = NewClient();
  absl::StatusOr<Lease> la = Semaphore(a, "api", 4).Acquire(2, Opts());
  ASSERT_TRUE(la.ok()) << la.status();
  absl::StatusOr<Lease> lb = Semaphore(b, "api", 4).Acquire(2, Opts());
  ASSERT_TRUE(lb.ok()) << lb.status();
  EXPECT_THAT(Semaphore(c, "api", 4).Acquire(1, Opts(absl::Milliseconds(200))),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  absl::StatusOr<LockInfo> info = c.Describe("api");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->limit, 4u);
  ASSERT_EQ(info->holders.size(), 2u);
  EXPECT_EQ(info->holders[0].permits + info->holders[1].permits, 4u);
  ASSERT_TRUE(la->Release().ok());
  absl::StatusOr<Lease> lc = Semaphore(c, "api", 4).Acquire(2, Opts(absl::Seconds(5)));
  ASSERT_TRUE(lc.ok()) << lc.status();
  EXPECT_EQ(lc->permits(), 2u);
}

TEST_P(ClientKindsTest, AnotherKindIsRefusedAtOnceWithItsReason) {
  Client a = NewClient(), b = NewClient();
  absl::StatusOr<Lease> held = Semaphore(a, "api", 4).Acquire(1, Opts());
  ASSERT_TRUE(held.ok()) << held.status();
  const absl::Time start = absl::Now();
  absl::StatusOr<Lease> shared = b.AcquireShared("api", Opts(absl::Seconds(5)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));  // at once, whatever the wait
  EXPECT_THAT(shared, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(ErrorReason(shared.status()), "LOCK_KIND_MISMATCH");
  EXPECT_FALSE(IsLockLost(shared.status()));
  absl::StatusOr<Lease> other_limit = Semaphore(b, "api", 5).Acquire(1, Opts());
  EXPECT_EQ(ErrorReason(other_limit.status()), "LOCK_KIND_MISMATCH");
  absl::StatusOr<Lease> other_permits = Semaphore(a, "api", 4).Acquire(2, Opts());
  EXPECT_EQ(ErrorReason(other_permits.status()), "PERMITS_MISMATCH");
}

TEST_P(ClientKindsTest, UpgradeWhileAnotherReaderHoldsWouldBlock) {
  Client a = NewClient(), b = NewClient();
  absl::StatusOr<Lease> ra = a.AcquireShared("catalog", Opts());
  absl::StatusOr<Lease> rb = b.AcquireShared("catalog", Opts());
  ASSERT_TRUE(ra.ok() && rb.ok());
  absl::StatusOr<Lease> upgrade = a.Acquire("catalog", Opts(absl::Seconds(5)));
  EXPECT_THAT(upgrade, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(ErrorReason(upgrade.status()), "UPGRADE_WOULD_BLOCK");
  ASSERT_TRUE(rb->Release().ok());
  // The only holder, nobody waiting: granted at once with a larger token.
  upgrade = a.Acquire("catalog", Opts());
  ASSERT_TRUE(upgrade.ok()) << upgrade.status();
  EXPECT_GT(upgrade->fencing_token(), ra->fencing_token());
}

std::vector<LockSpec> Specs(std::vector<std::string> names) {
  std::vector<LockSpec> specs;
  for (std::string& name : names) {
    LockSpec s;
    s.name = std::move(name);
    specs.push_back(std::move(s));
  }
  return specs;
}

TEST_P(ClientKindsTest, AcquireAllTakesEveryLockOrNone) {
  Client a = NewClient(), b = NewClient();
  absl::StatusOr<Lease> hb = b.Acquire("acct/2", Opts());
  ASSERT_TRUE(hb.ok()) << hb.status();
  absl::StatusOr<LeaseSet> none = a.AcquireAll(Specs({"acct/1", "acct/2"}), Opts());
  EXPECT_THAT(none, StatusIs(absl::StatusCode::kDeadlineExceeded));
  std::optional<LockInfo> blocked = CurrentHolder(none.status());
  ASSERT_TRUE(blocked.has_value());
  EXPECT_EQ(blocked->name, "acct/2");
  absl::StatusOr<LockInfo> first = b.Describe("acct/1");
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->held);  // given back: all or nothing
  ASSERT_TRUE(hb->Release().ok());
  absl::StatusOr<LeaseSet> all = a.AcquireAll(Specs({"acct/2", "acct/1"}), Opts(absl::Seconds(5)));
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].name(), "acct/2");
  EXPECT_EQ((*all)[1].name(), "acct/1");
  EXPECT_NE((*all)[0].fencing_token(), (*all)[1].fencing_token());
  // Each lock is released on its own.
  ASSERT_TRUE((*all)[0].Release().ok());
  absl::StatusOr<LockInfo> released = b.Describe("acct/2");
  absl::StatusOr<LockInfo> kept = b.Describe("acct/1");
  ASSERT_TRUE(released.ok() && kept.ok());
  EXPECT_FALSE(released->held);
  EXPECT_TRUE(kept->held);
}

TEST_P(ClientKindsTest, OppositeOrdersDoNotDeadlock) {
  Client a = NewClient(), b = NewClient();
  std::atomic<int> failures{0};
  auto run = [&](Client& c, std::vector<std::string> order) {
    for (int i = 0; i < 15; ++i) {
      absl::StatusOr<LeaseSet> held = c.AcquireAll(Specs(order), Opts(absl::Seconds(10)));
      if (!held.ok() || !held->Release().ok()) ++failures;
    }
  };
  std::thread t1([&] { run(a, {"x", "y"}); });
  std::thread t2([&] { run(b, {"y", "x"}); });
  t1.join();
  t2.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_P(ClientKindsTest, SharedAndSemaphoreHoldsAreRenewedPastTheirTtl) {
  Client a = NewClient(), observer = NewClient();
  // 3 s: the unary path (too short for a session), renewed by the watchdog.
  absl::StatusOr<Lease> reader = a.AcquireShared("catalog", Opts({}, absl::Seconds(3)));
  absl::StatusOr<Lease> permits = Semaphore(a, "api", 2).Acquire(1, Opts({}, absl::Seconds(3)));
  ASSERT_TRUE(reader.ok() && permits.ok());
  absl::SleepFor(absl::Seconds(4));
  EXPECT_TRUE(reader->valid());
  EXPECT_TRUE(permits->valid());
  absl::StatusOr<LockInfo> info = observer.Describe("catalog");
  ASSERT_TRUE(info.ok());
  EXPECT_THAT(Owners(*info), UnorderedElementsAre(a.owner()));
  info = observer.Describe("api");
  ASSERT_TRUE(info.ok());
  EXPECT_THAT(Owners(*info), UnorderedElementsAre(a.owner()));
}

INSTANTIATE_TEST_SUITE_P(Paths, ClientKindsTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Session" : "Unary";
                         });

}  // namespace
}  // namespace lockd
