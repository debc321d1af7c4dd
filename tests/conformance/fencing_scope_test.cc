// Conformance: Release and Renew carrying a fencing_token act only on the
// owner's hold with that token. A late request (the owner released and
// acquired the lock again since it was sent) finds another token: it answers
// FAILED_PRECONDITION with ErrorInfo LOCK_NOT_HELD and leaves the later hold
// exactly as it was; an undo by acquire_request_id changes nothing. Token 0
// keeps the behaviour of requests without one. Every backend, with one lockd
// and with three replicas (the late request then goes through another
// replica than the holder's).

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/conformance/conformance.h"
#include "tests/support/status_matchers.h"

namespace lockd::testing {
namespace {

constexpr char kLockNotHeld[] = "lockd/LOCK_NOT_HELD";

class FencingScopeRules : public ConformanceTest {
 protected:
  // The late request's replica: another one than the holder's when there
  // are several.
  LockService::Stub* Late() { return Stub(1); }

  grpc::Status ReleaseWith(const std::string& name, const std::string& owner, uint64_t token,
                           v1::ReleaseResponse* resp, const std::string& request_id = "",
                           LockService::Stub* stub = nullptr) {
    v1::ReleaseRequest req;
    req.set_name(name);
    req.set_owner(owner);
    req.set_request_id(request_id);
    req.set_fencing_token(token);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    return (stub ? stub : stub_.get())->Release(&ctx, req, resp);
  }

  grpc::Status UndoWith(const std::string& name, const std::string& owner,
                        const std::string& acquire_request_id, uint64_t token,
                        v1::ReleaseResponse* resp, LockService::Stub* stub = nullptr) {
    v1::ReleaseRequest req;
    req.set_name(name);
    req.set_owner(owner);
    req.set_acquire_request_id(acquire_request_id);
    req.set_fencing_token(token);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    return (stub ? stub : stub_.get())->Release(&ctx, req, resp);
  }

  grpc::Status RenewWith(const std::string& name, const std::string& owner, uint64_t token,
                         absl::Duration ttl, v1::RenewResponse* resp,
                         LockService::Stub* stub = nullptr) {
    v1::RenewRequest req;
    req.set_name(name);
    req.set_owner(owner);
    req.set_fencing_token(token);
    *req.mutable_lease_ttl() = ToProtoDuration(ttl);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    return (stub ? stub : stub_.get())->Renew(&ctx, req, resp);
  }

  // Acquires (with `request_id`) and asserts the grant; returns the token.
  uint64_t MustAcquireWithId(const std::string& name, const std::string& owner,
                             const std::string& request_id) {
    v1::AcquireResponse resp;
    Acq a{name, owner};
    a.request_id = request_id;
    grpc::Status s = Acquire(a, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(resp.acquired()) << name << " not acquired by " << owner;
    return resp.fencing_token();
  }

  // Acquires `name` for `owner`, releases it, and acquires it again: returns
  // the first holding's token (now stale) and sets *later to the second's.
  uint64_t HoldTwice(const std::string& name, const std::string& owner, uint64_t* later) {
    uint64_t first = MustAcquire(name, owner);
    v1::ReleaseResponse rel;
    grpc::Status s = Release(name, owner, &rel);
    EXPECT_TRUE(s.ok() && rel.released()) << s.error_message();
    *later = MustAcquire(name, owner);
    EXPECT_NE(first, *later);
    return first;
  }

  // Asserts that `owner` holds `name` with `token` and `holds` holds, as
  // another replica sees it.
  void ExpectHold(const std::string& name, const std::string& owner, uint64_t token,
                  uint32_t holds) {
    v1::LockInfo info = Describe(name, "", Stub(2));
    EXPECT_TRUE(info.held()) << name << " was freed";
    EXPECT_EQ(info.owner(), owner);
    EXPECT_EQ(info.fencing_token(), token);
    EXPECT_EQ(info.hold_count(), holds);
  }
};

TEST_P(FencingScopeRules, LateReleaseWithAStaleTokenLeavesTheLaterHoldAlone) {
  uint64_t later = 0;
  const uint64_t stale = HoldTwice("late-release", "alice", &later);

  // The later hold is the owner's only one: an unscoped release would free it.
  v1::ReleaseResponse rel;
  grpc::Status s = ReleaseWith("late-release", "alice", stale, &rel, "", Late());
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_EQ(ErrorReason(s), kLockNotHeld);
  ExpectHold("late-release", "alice", later, 1);

  // With a request id, and a reentrant hold: nothing changes either.
  EXPECT_EQ(MustAcquire("late-release", "alice"), later);
  s = ReleaseWith("late-release", "alice", stale, &rel, "late-1", Late());
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_EQ(ErrorReason(s), kLockNotHeld);
  ExpectHold("late-release", "alice", later, 2);
}

TEST_P(FencingScopeRules, LateRenewWithAStaleTokenLeavesTheLaterHoldAlone) {
  uint64_t later = 0;
  const uint64_t stale = HoldTwice("late-renew", "alice", &later);
  v1::RenewResponse ren;
  grpc::Status s = RenewWith("late-renew", "alice", stale, absl::Minutes(10), &ren, Late());
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_EQ(ErrorReason(s), kLockNotHeld);
  ExpectHold("late-renew", "alice", later, 1);
  // The lease is still the later Acquire's 30 s, not the late renew's 10 min.
  v1::LockInfo info = Describe("late-renew", "", Stub(2));
  EXPECT_LE(FromProtoDuration(info.ttl_remaining()), absl::Seconds(30));
}

TEST_P(FencingScopeRules, ReleaseAndRenewWithTheHoldsTokenWork) {
  const uint64_t token = MustAcquire("scoped", "alice");
  MustAcquire("scoped", "alice");
  MustAcquire("scoped", "alice");

  v1::RenewResponse ren;
  grpc::Status s = RenewWith("scoped", "alice", token, absl::Seconds(40), &ren, Late());
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(ren.fencing_token(), token);
  EXPECT_GT(FromProtoDuration(Describe("scoped", "", Stub(2)).ttl_remaining()), absl::Seconds(30));

  v1::ReleaseResponse rel;
  s = ReleaseWith("scoped", "alice", token, &rel, "rel-1", Late());
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(rel.released());
  EXPECT_EQ(rel.hold_count(), 2u);
  // A repeat of the owner's last request id returns its first result.
  s = ReleaseWith("scoped", "alice", token, &rel, "rel-1");
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(rel.released());
  EXPECT_EQ(rel.hold_count(), 2u);
  ExpectHold("scoped", "alice", token, 2);

  s = ReleaseWith("scoped", "alice", token, &rel);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(rel.hold_count(), 1u);
  s = ReleaseWith("scoped", "alice", token, &rel, "", Late());
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(rel.released());
  EXPECT_FALSE(Describe("scoped", "", Stub(2)).held());

  // The hold is gone: the same token now finds nothing to release or renew.
  s = ReleaseWith("scoped", "alice", token, &rel);
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_EQ(ErrorReason(s), kLockNotHeld);
  s = RenewWith("scoped", "alice", token, absl::Seconds(40), &ren);
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_EQ(ErrorReason(s), kLockNotHeld);
}

TEST_P(FencingScopeRules, AnotherOwnersTokenReleasesAndRenewsNothing) {
  const uint64_t bobs = MustAcquire("others", "bob");
  v1::ReleaseResponse rel;
  grpc::Status s = ReleaseWith("others", "alice", bobs, &rel, "", Late());
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_EQ(ErrorReason(s), kLockNotHeld);
  v1::RenewResponse ren;
  s = RenewWith("others", "alice", bobs, absl::Seconds(40), &ren, Late());
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_EQ(ErrorReason(s), kLockNotHeld);
  ExpectHold("others", "bob", bobs, 1);
}

TEST_P(FencingScopeRules, UndoWithAnotherTokenChangesNothing) {
  uint64_t token = 0;
  const uint64_t stale = HoldTwice("undo-scope", "alice", &token);
  // The owner's last request is the Acquire "acq-2", which added a hold.
  EXPECT_EQ(MustAcquireWithId("undo-scope", "alice", "acq-2"), token);

  v1::ReleaseResponse rel;
  grpc::Status s = UndoWith("undo-scope", "alice", "acq-2", stale, &rel, Late());
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(rel.released());
  EXPECT_EQ(rel.hold_count(), 2u);
  ExpectHold("undo-scope", "alice", token, 2);

  // With the hold's own token the undo gives that hold back.
  s = UndoWith("undo-scope", "alice", "acq-2", token, &rel, Late());
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(rel.released());
  EXPECT_EQ(rel.hold_count(), 1u);
  ExpectHold("undo-scope", "alice", token, 1);
}

TEST_P(FencingScopeRules, ZeroTokenActsOnAnyHoldOfTheOwner) {
  uint64_t later = 0;
  HoldTwice("unscoped", "alice", &later);
  MustAcquire("unscoped", "alice");
  v1::RenewResponse ren;
  grpc::Status s = RenewWith("unscoped", "alice", 0, absl::Seconds(40), &ren, Late());
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(ren.fencing_token(), later);
  v1::ReleaseResponse rel;
  s = ReleaseWith("unscoped", "alice", 0, &rel, "", Late());
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(rel.hold_count(), 1u);
  s = ReleaseWith("unscoped", "alice", 0, &rel);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(rel.released());
}

// Backend::RenewMany (what a session's renewals use) scopes each renewal
// the same way, in the batched path too: the backend of replica 1 knows the
// holds acquired through it, and not those acquired through replica 0.
TEST_P(FencingScopeRules, RenewManyRenewsOnlyTheHoldsWithTheirTokens) {
  uint64_t later_elsewhere = 0;
  const uint64_t stale_elsewhere = HoldTwice("many-elsewhere", "alice", &later_elsewhere);
  auto acquire_here = [&](const std::string& name) {
    v1::AcquireResponse resp;
    grpc::Status s = Acquire({name, "alice"}, &resp, Late());
    EXPECT_TRUE(s.ok() && resp.acquired()) << name << ": " << s.error_message();
    return resp.fencing_token();
  };
  const uint64_t stale_here = acquire_here("many-here");
  v1::ReleaseResponse rel;
  grpc::Status s = Release("many-here", "alice", &rel, "", "", Late());
  ASSERT_TRUE(s.ok() && rel.released()) << s.error_message();
  const uint64_t later_here = acquire_here("many-here");
  const uint64_t mine = acquire_here("many-mine");
  acquire_here("many-any");

  auto renewal = [](const std::string& name, uint64_t token) {
    RenewParams p{LockKey{"default", name}, "alice", absl::Seconds(40)};
    p.fencing_token = token;
    return p;
  };
  std::vector<RenewParams> params = {renewal("many-elsewhere", stale_elsewhere),
                                     renewal("many-here", stale_here), renewal("many-mine", mine),
                                     renewal("many-any", 0)};
  auto results = std::make_shared<std::vector<absl::StatusOr<RenewResult>>>();
  auto done = std::make_shared<absl::Notification>();
  Server(1)->backend()->RenewMany(params,
                                  [results, done](std::vector<absl::StatusOr<RenewResult>> r) {
                                    *results = std::move(r);
                                    done->Notify();
                                  });
  ASSERT_TRUE(done->WaitForNotificationWithTimeout(absl::Seconds(60)));
  ASSERT_EQ(results->size(), params.size());
  EXPECT_THAT((*results)[0], StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT((*results)[0], IsLockNotHeld());
  EXPECT_THAT((*results)[1], StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT((*results)[1], IsLockNotHeld());
  ASSERT_TRUE((*results)[2].ok()) << (*results)[2].status();
  EXPECT_EQ((*results)[2]->fencing_token, mine);
  ASSERT_TRUE((*results)[3].ok()) << (*results)[3].status();

  // The later holds keep their 30 s leases; the renewed ones run 40 s.
  ExpectHold("many-elsewhere", "alice", later_elsewhere, 1);
  ExpectHold("many-here", "alice", later_here, 1);
  for (const char* name : {"many-elsewhere", "many-here"}) {
    EXPECT_LE(FromProtoDuration(Describe(name, "", Stub(2)).ttl_remaining()), absl::Seconds(30))
        << name << " was renewed by a renewal of an earlier hold";
  }
  EXPECT_GT(FromProtoDuration(Describe("many-mine", "", Stub(2)).ttl_remaining()),
            absl::Seconds(30));
}

INSTANTIATE_TEST_SUITE_P(Backends, FencingScopeRules, ::testing::ValuesIn(ReplicaCountsOfEnv()),
                         ReplicaCountName);

}  // namespace
}  // namespace lockd::testing
