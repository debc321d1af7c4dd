// A Session acquire that waited (docs/api.md "Sessions"): the lease of a hold
// starts at its grant, however long the acquire waited for it. The session
// renews the hold from then on and never reports it `lost` while the backend
// still holds it. Every backend, with one lockd and with three replicas (the
// holder's unary calls and the Describe checks go to another replica than
// the session's).

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/conformance/conformance.h"
#include "tests/conformance/session_client.h"

namespace lockd::testing {
namespace {

// The session's lease; the server's minimum in the suite is 100 ms. Long
// enough that renewal rounds (every lease/3) keep up on a loaded machine.
constexpr absl::Duration kLease = absl::Seconds(1);
constexpr absl::Duration kLong = absl::Seconds(30);

class SessionWaitRules : public ConformanceTest {};

// Owner `holder` holds the lock with a long lease; a session with a short
// lease waits for it, and the holder releases after `wait`. The grant must
// then stay held and renewed for three leases: no `lost`, Describe showing
// the session's owner with the granted token.
//
// A session that timed the lease from the acquire's arrival would, after a
// wait longer than about 9/10 of the lease, push `lost` LEASE_EXPIRED the
// moment the grant came and never renew the hold.
TEST_P(SessionWaitRules, AGrantAfterALongWaitIsHeldAndRenewedFromTheGrant) {
  const std::vector<double> waits = {0.5, 1, 3, 10};  // in leases
  std::vector<std::thread> cases;
  for (size_t i = 0; i < waits.size(); ++i) {
    cases.emplace_back([this, i, wait = waits[i] * kLease] {
      const std::string name = absl::StrCat("waited-", i);
      const std::string holder = absl::StrCat("holder-", i);
      const std::string waiter = absl::StrCat("waiter-", i);
      SCOPED_TRACE(absl::StrCat(name, ", waiting ", absl::FormatDuration(wait)));
      LockService::Stub* other = Stub(static_cast<int>(i) + 1);
      v1::AcquireResponse held;
      grpc::Status s = Acquire({name, holder, absl::Seconds(60)}, &held, other);
      ASSERT_TRUE(s.ok() && held.acquired()) << s.error_message();

      SessionClient session(Stub(static_cast<int>(i)));
      Opening o;
      o.owner = waiter;
      o.lease = kLease;
      ASSERT_TRUE(session.Open(o, kLong).has_value()) << session.WaitEnd().error_message();
      ASSERT_TRUE(session.Acquire(1, name, wait + kLong));
      WaitForWaiters(name, 1, static_cast<int>(i));
      absl::SleepFor(wait);
      EXPECT_FALSE(session.HasResult(1)) << "the acquire ended while the holder held the lock";
      v1::ReleaseResponse rel;
      ASSERT_TRUE(Release(name, holder, &rel, "", "", other).ok());

      std::optional<v1::SessionResult> r = session.WaitResult(1, kLong);
      ASSERT_TRUE(r.has_value()) << "no result for the waiting acquire";
      ASSERT_EQ(r->status().code(), 0) << r->status().message();
      ASSERT_TRUE(r->acquire().acquired()) << r->DebugString();
      const uint64_t token = r->acquire().fencing_token();
      EXPECT_GT(token, held.fencing_token());

      // Three leases: only renewals keep the hold this long.
      std::optional<v1::LockLost> lost = session.WaitLost(3 * kLease);
      EXPECT_FALSE(lost.has_value()) << "lost right after the grant: " << lost->DebugString();
      v1::LockInfo info = Describe(name, "", other);
      EXPECT_TRUE(info.held());
      EXPECT_EQ(info.owner(), waiter);
      EXPECT_EQ(info.fencing_token(), token);
      EXPECT_EQ(session.LostCount(), 0);
      EXPECT_TRUE(session.HalfCloseAndFinish().ok());
    });
  }
  for (std::thread& t : cases) t.join();
}

INSTANTIATE_TEST_SUITE_P(Backends, SessionWaitRules, ::testing::ValuesIn(ReplicaCountsOfEnv()),
                         ReplicaCountName);

}  // namespace
}  // namespace lockd::testing
