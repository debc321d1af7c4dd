// Conformance: AcquireAll (docs/api.md "AcquireAll"). All or nothing (a lock
// held by another owner: acquired=false, blocked_on it, nothing of the call
// held afterwards), callers listing the same locks in opposite orders never
// deadlock, one wait for all the locks, idempotent retry by request_id, undo
// of one lock with acquire_request_id, several kinds in one call, validation
// naming locks[i], and the Session's acquire_all (its holds are the
// session's; cancel ends it). Every backend, with one lockd and with three
// replicas (the callers then sit on different replicas).

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/conformance/conformance.h"
#include "tests/conformance/session_client.h"
#include "tests/support/status_matchers.h"

namespace lockd::testing {
namespace {

using ::testing::StartsWith;

struct Spec {
  std::string name;
  v1::LockMode mode = v1::LOCK_MODE_EXCLUSIVE;
  uint32_t limit = 0;
  uint32_t permits = 0;
};

v1::AcquireAllRequest AllRequest(const std::vector<Spec>& specs, const std::string& owner,
                                 absl::Duration wait, const std::string& request_id) {
  v1::AcquireAllRequest req;
  for (const Spec& s : specs) {
    v1::LockSpec* spec = req.add_locks();
    spec->set_name(s.name);
    spec->set_mode(s.mode);
    spec->set_limit(s.limit);
    spec->set_permits(s.permits);
  }
  req.set_owner(owner);
  *req.mutable_lease_ttl() = ToProtoDuration(absl::Seconds(30));
  if (wait != absl::ZeroDuration()) *req.mutable_wait_timeout() = ToProtoDuration(wait);
  req.set_request_id(request_id);
  return req;
}

class AcquireAllRules : public ConformanceTest {
 protected:
  grpc::Status AcquireAll(const std::vector<Spec>& specs, const std::string& owner,
                          v1::AcquireAllResponse* resp, absl::Duration wait = absl::ZeroDuration(),
                          const std::string& request_id = "", LockService::Stub* stub = nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + wait + absl::Seconds(30)));
    return (stub ? stub : stub_.get())
        ->AcquireAll(&ctx, AllRequest(specs, owner, wait, request_id), resp);
  }
};

TEST_P(AcquireAllRules, OneLockHeldByAnotherOwnerLeavesNothingHeld) {
  MustAcquire("b", "bob");
  v1::AcquireAllResponse resp;
  grpc::Status s =
      AcquireAll({{"a"}, {"b"}, {"c"}}, "alice", &resp, absl::ZeroDuration(), "", Stub(1));
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(resp.acquired());
  EXPECT_EQ(resp.locks_size(), 0);
  EXPECT_EQ(resp.blocked_on().name(), "b");
  EXPECT_EQ(resp.blocked_on().owner(), "bob");
  // Given back before the reply: free at once, on every replica.
  EXPECT_FALSE(Describe("a", "", Stub(2)).held());
  EXPECT_FALSE(Describe("c", "", Stub(2)).held());
  EXPECT_EQ(Describe("b", "", Stub(2)).owner(), "bob");
}

TEST_P(AcquireAllRules, GrantsEveryLockWithItsOwnTokenInRequestOrder) {
  v1::AcquireAllResponse resp;
  grpc::Status s = AcquireAll({{"z"}, {"m"}, {"a"}}, "alice", &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_TRUE(resp.acquired());
  EXPECT_EQ(resp.owner(), "alice");
  ASSERT_EQ(resp.locks_size(), 3);
  const char* order[] = {"z", "m", "a"};
  for (int i = 0; i < 3; ++i) {
    v1::LockInfo info = Describe(order[i], "", Stub(1));
    EXPECT_EQ(info.owner(), "alice");
    EXPECT_EQ(resp.locks(i).fencing_token(), info.fencing_token()) << order[i];
    EXPECT_EQ(resp.locks(i).hold_count(), 1u);
    EXPECT_TRUE(resp.locks(i).acquired());
  }
  // Each hold is released on its own.
  v1::ReleaseResponse rel;
  ASSERT_TRUE(Release("m", "alice", &rel).ok());
  EXPECT_TRUE(rel.released());
  EXPECT_TRUE(Describe("z").held());
  EXPECT_TRUE(Describe("a").held());
}

TEST_P(AcquireAllRules, OppositeOrdersCompleteWithoutDeadlock) {
  constexpr int kRounds = 15;
  const absl::Duration wait = absl::Seconds(20);
  std::atomic<int> acquired{0};
  auto caller = [&](const std::string& owner, const std::string& first, const std::string& second,
                    int replica) {
    std::unique_ptr<LockService::Stub> stub = NewStub(Server(replica)->address());
    for (int i = 0; i < kRounds; ++i) {
      v1::AcquireAllResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + wait + absl::Seconds(30)));
      grpc::Status s =
          stub->AcquireAll(&ctx, AllRequest({{first}, {second}}, owner, wait, ""), &resp);
      ASSERT_TRUE(s.ok()) << s.error_message();
      ASSERT_TRUE(resp.acquired())
          << owner << " round " << i << " blocked on " << resp.blocked_on().name();
      ++acquired;
      for (const std::string& name : {first, second}) {
        v1::ReleaseRequest req;
        req.set_name(name);
        req.set_owner(owner);
        v1::ReleaseResponse rel;
        grpc::ClientContext rctx;
        rctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
        ASSERT_TRUE(stub->Release(&rctx, req, &rel).ok());
      }
    }
  };
  std::thread alice(caller, "alice", "x", "y", 0);
  std::thread bob(caller, "bob", "y", "x", 1);
  alice.join();
  bob.join();
  EXPECT_EQ(acquired.load(), 2 * kRounds);
}

TEST_P(AcquireAllRules, OneWaitForAllTheLocks) {
  MustAcquire("a", "bob");
  MustAcquire("b", "carol");
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(1200));
    v1::ReleaseResponse rel;
    EXPECT_TRUE(Release("a", "bob", &rel).ok());
  });
  const absl::Duration wait = absl::Milliseconds(1500);
  const absl::Time start = absl::Now();
  v1::AcquireAllResponse resp;
  grpc::Status s = AcquireAll({{"a"}, {"b"}}, "alice", &resp, wait, "", Stub(1));
  const absl::Duration took = absl::Now() - start;
  releaser.join();
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(resp.acquired());
  EXPECT_EQ(resp.blocked_on().name(), "b");
  // One wait of 1.5 s for both, not 1.2 s for `a` and then 1.5 s for `b`.
  EXPECT_GE(took, wait - absl::Milliseconds(50));
  EXPECT_LT(took, absl::Milliseconds(2400));
  EXPECT_FALSE(Describe("a").held());
}

TEST_P(AcquireAllRules, RetryWithTheSameRequestIdIsIdempotent) {
  v1::AcquireAllResponse first, again;
  ASSERT_TRUE(AcquireAll({{"a"}, {"b"}}, "alice", &first, absl::ZeroDuration(), "all-1").ok());
  ASSERT_TRUE(first.acquired());
  ASSERT_TRUE(
      AcquireAll({{"a"}, {"b"}}, "alice", &again, absl::ZeroDuration(), "all-1", Stub(1)).ok());
  ASSERT_TRUE(again.acquired());
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(again.locks(i).fencing_token(), first.locks(i).fencing_token());
    EXPECT_EQ(again.locks(i).hold_count(), 1u);
  }
  EXPECT_EQ(Describe("a").hold_count(), 1u);
  EXPECT_EQ(Describe("b").hold_count(), 1u);
}

// A retry of a call that gave its holds back never replays a grant that
// was undone: it takes the locks anew.
TEST_P(AcquireAllRules, RetryAfterAGiveBackHoldsWhatItAnswers) {
  MustAcquire("b", "bob");
  v1::AcquireAllResponse first, again;
  ASSERT_TRUE(AcquireAll({{"a"}, {"b"}}, "alice", &first, absl::ZeroDuration(), "all-3").ok());
  ASSERT_FALSE(first.acquired());
  v1::ReleaseResponse rel;
  ASSERT_TRUE(Release("b", "bob", &rel).ok());
  ASSERT_TRUE(
      AcquireAll({{"a"}, {"b"}}, "alice", &again, absl::ZeroDuration(), "all-3", Stub(1)).ok());
  ASSERT_TRUE(again.acquired());
  for (int i = 0; i < 2; ++i) {
    v1::LockInfo info = Describe(i == 0 ? "a" : "b", "", Stub(2));
    EXPECT_EQ(info.owner(), "alice");
    EXPECT_EQ(info.fencing_token(), again.locks(i).fencing_token());
  }
}

TEST_P(AcquireAllRules, UndoOfOneLockByTheCallsRequestId) {
  v1::AcquireAllResponse resp;
  ASSERT_TRUE(AcquireAll({{"a"}, {"b"}}, "alice", &resp, absl::ZeroDuration(), "all-2").ok());
  ASSERT_TRUE(resp.acquired());
  v1::ReleaseResponse undo;
  ASSERT_TRUE(Undo("a", "alice", "all-2", &undo, Stub(1)).ok());
  EXPECT_TRUE(undo.released());
  EXPECT_FALSE(Describe("a").held());
  EXPECT_EQ(Describe("b").owner(), "alice");
}

TEST_P(AcquireAllRules, MixedKindsInOneCall) {
  v1::AcquireAllResponse resp;
  grpc::Status s = AcquireAll({{"ex"},
                               {"rd", v1::LOCK_MODE_SHARED},
                               {"sem", v1::LOCK_MODE_EXCLUSIVE, /*limit=*/3, /*permits=*/2}},
                              "alice", &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_TRUE(resp.acquired());
  EXPECT_EQ(Describe("ex").mode(), v1::LOCK_MODE_EXCLUSIVE);
  EXPECT_EQ(Describe("rd").mode(), v1::LOCK_MODE_SHARED);
  v1::LockInfo sem = Describe("sem");
  EXPECT_EQ(sem.limit(), 3u);
  ASSERT_EQ(sem.holders_size(), 1);
  EXPECT_EQ(sem.holders(0).permits(), 2u);
  // A reader beside alice's shared hold; the writer lock and the remaining
  // permit are as alice left them.
  v1::AcquireAllResponse bob;
  ASSERT_TRUE(AcquireAll({{"rd", v1::LOCK_MODE_SHARED}, {"sem", v1::LOCK_MODE_EXCLUSIVE, 3, 1}},
                         "bob", &bob, absl::ZeroDuration(), "", Stub(1))
                  .ok());
  EXPECT_TRUE(bob.acquired());
  v1::AcquireAllResponse carol;
  ASSERT_TRUE(AcquireAll({{"rd", v1::LOCK_MODE_SHARED}, {"sem", v1::LOCK_MODE_EXCLUSIVE, 3, 1}},
                         "carol", &carol)
                  .ok());
  EXPECT_FALSE(carol.acquired());  // the semaphore is full
  EXPECT_EQ(carol.blocked_on().name(), "sem");
  EXPECT_EQ(Describe("rd").holders_size(), 2);  // carol's shared hold was given back
}

TEST_P(AcquireAllRules, ValidationNamesTheLock) {
  v1::AcquireAllResponse resp;
  grpc::Status dup = AcquireAll({{"a"}, {"b"}, {"a"}}, "alice", &resp);
  EXPECT_THAT(dup, StatusIs(grpc::StatusCode::INVALID_ARGUMENT, StartsWith("locks[2]: ")));
  grpc::Status kind = AcquireAll({{"a"}, {"b", v1::LOCK_MODE_SHARED, 2}}, "alice", &resp);
  EXPECT_THAT(kind, StatusIs(grpc::StatusCode::INVALID_ARGUMENT, StartsWith("locks[1].limit: ")));
  EXPECT_THAT(AcquireAll({}, "alice", &resp),
              StatusIs(grpc::StatusCode::INVALID_ARGUMENT, StartsWith("locks: ")));
  EXPECT_FALSE(Describe("a").held());
}

Opening SessionOf(const std::string& owner) {
  Opening o;
  o.owner = owner;
  return o;
}

v1::SessionRequest SessionAll(uint64_t op_id, const std::vector<Spec>& specs, absl::Duration wait) {
  v1::SessionRequest req;
  req.mutable_acquire_all()->set_op_id(op_id);
  *req.mutable_acquire_all()->mutable_request() = AllRequest(specs, "", wait, "");
  req.mutable_acquire_all()->mutable_request()->clear_lease_ttl();
  return req;
}

TEST_P(AcquireAllRules, SessionAcquireAllHoldsAreReleasedAtHalfClose) {
  SessionClient session(stub_.get());
  ASSERT_TRUE(session.Open(SessionOf("sess")).has_value());
  ASSERT_TRUE(session.Send(SessionAll(1, {{"b"}, {"a"}}, absl::ZeroDuration())));
  std::optional<v1::SessionResult> r = session.WaitResult(1);
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->status().code(), 0) << r->status().message();
  ASSERT_EQ(r->body_case(), v1::SessionResult::kAcquireAll);
  ASSERT_TRUE(r->acquire_all().acquired());
  EXPECT_EQ(r->acquire_all().owner(), "sess");
  ASSERT_EQ(r->acquire_all().locks_size(), 2);
  EXPECT_EQ(r->acquire_all().locks(0).fencing_token(), Describe("b", "", Stub(1)).fencing_token());
  EXPECT_EQ(Describe("a", "", Stub(1)).owner(), "sess");
  EXPECT_TRUE(session.HalfCloseAndFinish().ok());
  EXPECT_FALSE(Describe("a", "", Stub(1)).held());
  EXPECT_FALSE(Describe("b", "", Stub(1)).held());
}

TEST_P(AcquireAllRules, SessionCancelEndsAWaitingAcquireAll) {
  MustAcquire("b", "bob");
  SessionClient session(Stub(1));
  ASSERT_TRUE(session.Open(SessionOf("sess")).has_value());
  ASSERT_TRUE(session.Send(SessionAll(1, {{"a"}, {"b"}}, absl::Seconds(60))));
  WaitForWaiters("b", 1, 1);
  EXPECT_EQ(Describe("a", "", Stub(1)).owner(), "sess");  // taken first, while b waits
  ASSERT_TRUE(session.Cancel(1));
  std::optional<v1::SessionResult> r = session.WaitResult(1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status().code(), static_cast<int>(grpc::StatusCode::CANCELLED));
  EXPECT_FALSE(Describe("a", "", Stub(1)).held());  // given back before the result
  EXPECT_TRUE(session.HalfCloseAndFinish().ok());
}

INSTANTIATE_TEST_SUITE_P(Backends, AcquireAllRules, ::testing::ValuesIn(ReplicaCountsOfEnv()),
                         ReplicaCountName);

}  // namespace
}  // namespace lockd::testing
