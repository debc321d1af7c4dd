// Sessions (docs/api.md "Sessions") in the
// conformance suite: every backend, with one lockd and with three replicas
// (then resumes, Describe checks and operators' calls go to another replica
// than the session's where the test says so).
//
// Timing: waits for something that must happen are generous (kLong, for a
// loaded machine); checks that something does not happen look for a short,
// fixed window (kWindow).

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "gtest/gtest.h"
#include "protos/proto_duration.h"
#include "tests/conformance/conformance.h"
#include "tests/conformance/session_client.h"
#include "tests/support/status_matchers.h"

namespace lockd::testing {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr absl::Duration kLong = absl::Seconds(30);
constexpr absl::Duration kWindow = absl::Milliseconds(300);
// A session lease that tests outlive several times. The server renews every
// lease/3 after its previous renewal round ended, which leaves a round about
// 2/3 of the lease: with 300 ms, holds were lost now and then (a `lost`, the
// lock free) against MySQL on a loaded 2-core machine.
constexpr absl::Duration kShortLease = absl::Seconds(1);
constexpr int kOk = 0;
constexpr int kCancelled = 1;
constexpr int kInvalidArgument = 3;
constexpr int kFailedPrecondition = 9;

Opening As(const std::string& owner, absl::Duration lease = absl::ZeroDuration()) {
  Opening o;
  o.owner = owner;
  o.lease = lease;
  return o;
}

v1::LockRef Ref(const std::string& name, uint64_t token) {
  v1::LockRef ref;
  ref.set_name(name);
  ref.set_fencing_token(token);
  return ref;
}

// The ErrorInfo of a result's status, as "domain/reason", or "".
std::string ResultReason(const v1::SessionResult& r) {
  for (const auto& any : r.status().details()) {
    google::rpc::ErrorInfo info;
    if (any.UnpackTo(&info)) return absl::StrCat(info.domain(), "/", info.reason());
  }
  return "";
}

class SessionRules : public ConformanceTest {
 protected:
  // A session on replica `replica` that received `opened` (stored in
  // `*opened` when given); nullptr, with a failure, otherwise.
  std::unique_ptr<SessionClient> OpenSession(const Opening& o, int replica = 0,
                                             v1::SessionOpened* opened = nullptr) {
    auto s = std::make_unique<SessionClient>(Stub(replica));
    std::optional<v1::SessionOpened> got = s->Open(o, kLong);
    if (!got) {
      grpc::Status end = s->WaitEnd(absl::Seconds(1));
      ADD_FAILURE() << "no opened; the stream ended with " << end.error_code() << ": "
                    << end.error_message();
      return nullptr;
    }
    if (opened) *opened = *got;
    return s;
  }

  // The result of `op_id`, which must have granted the lock.
  v1::AcquireResponse Granted(SessionClient& s, uint64_t op_id) {
    std::optional<v1::SessionResult> r = s.WaitResult(op_id, kLong);
    EXPECT_TRUE(r.has_value()) << "no result for op " << op_id;
    if (!r) return {};
    EXPECT_EQ(r->op_id(), op_id);
    EXPECT_EQ(r->status().code(), kOk) << r->status().message();
    EXPECT_TRUE(r->has_acquire()) << r->DebugString();
    EXPECT_TRUE(r->acquire().acquired()) << "op " << op_id << ": " << r->DebugString();
    return r->acquire();
  }

  v1::AcquireResponse MustAcquireIn(SessionClient& s, uint64_t op_id, const std::string& name) {
    EXPECT_TRUE(s.Acquire(op_id, name)) << "stream closed";
    return Granted(s, op_id);
  }

  // Releases through the session; the result must be OK.
  v1::ReleaseResponse MustReleaseIn(SessionClient& s, uint64_t op_id, const std::string& name) {
    EXPECT_TRUE(s.Release(op_id, name)) << "stream closed";
    std::optional<v1::SessionResult> r = s.WaitResult(op_id, kLong);
    EXPECT_TRUE(r.has_value()) << "no result for op " << op_id;
    if (!r) return {};
    EXPECT_EQ(r->status().code(), kOk) << r->status().message();
    EXPECT_TRUE(r->has_release()) << r->DebugString();
    return r->release();
  }
};

TEST_P(SessionRules, OpenedComesFirstWithTheGeneratedOwnerAndTheSessionsLease) {
  SessionClient s(Stub(0));
  ASSERT_TRUE(s.SendOpen(As("", absl::Seconds(2))));
  // An op right behind `open`, with a lease of its own, which the session's
  // lease overrides.
  v1::SessionRequest req;
  req.mutable_acquire()->set_op_id(1);
  req.mutable_acquire()->mutable_request()->set_name("first");
  *req.mutable_acquire()->mutable_request()->mutable_lease_ttl() =
      ToProtoDuration(absl::Seconds(10));
  ASSERT_TRUE(s.Send(req));
  std::optional<v1::SessionOpened> opened = s.WaitOpened(kLong);
  ASSERT_TRUE(opened.has_value()) << s.WaitEnd(absl::Seconds(1)).error_message();
  EXPECT_TRUE(s.OpenedCameFirst());
  EXPECT_EQ(opened->owner().size(), 32u) << opened->owner();
  EXPECT_TRUE(std::all_of(opened->owner().begin(), opened->owner().end(), [](char c) {
    return absl::ascii_isxdigit(c);
  })) << opened->owner();
  EXPECT_EQ(FromProtoDuration(opened->lease_ttl()), absl::Seconds(2));
  v1::AcquireResponse granted = Granted(s, 1);
  EXPECT_EQ(granted.owner(), opened->owner());
  EXPECT_EQ(FromProtoDuration(granted.lease_ttl()), absl::Seconds(2));
  EXPECT_EQ(granted.hold_count(), 1u);
  EXPECT_EQ(Describe("first", "", Stub(1)).owner(), opened->owner());
}

TEST_P(SessionRules, OpenWithoutLeaseUsesTheServerDefault) {
  v1::SessionOpened opened;
  auto s = OpenSession(As("alice"), 0, &opened);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(FromProtoDuration(opened.lease_ttl()), absl::Seconds(30));
}

TEST_P(SessionRules, OpenOwnerIsTheOwnerOfEveryOperation) {
  v1::SessionOpened opened;
  auto s = OpenSession(As("alice"), 0, &opened);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(opened.owner(), "alice");
  EXPECT_EQ(MustAcquireIn(*s, 1, "mine").owner(), "alice");
  // A request's own owner may repeat the session's.
  ASSERT_TRUE(s->Acquire(2, "mine", absl::ZeroDuration(), "alice"));
  EXPECT_EQ(Granted(*s, 2).hold_count(), 2u);
  v1::LockInfo info = Describe("mine", "", Stub(1));
  EXPECT_TRUE(info.held());
  EXPECT_EQ(info.owner(), "alice");
}

TEST_P(SessionRules, OpenNamespaceIsTheDefaultOfRequestsThatLeaveTheirsEmpty) {
  Opening o = As("alice");
  o.ns = "team-a";
  auto s = OpenSession(o);
  ASSERT_NE(s, nullptr);
  MustAcquireIn(*s, 1, "shared");
  ASSERT_TRUE(s->Acquire(2, "shared", absl::ZeroDuration(), "", "team-b"));
  Granted(*s, 2);
  EXPECT_EQ(Describe("shared", "team-a", Stub(1)).owner(), "alice");
  EXPECT_EQ(Describe("shared", "team-b", Stub(1)).owner(), "alice");
  EXPECT_FALSE(Describe("shared", "", Stub(1)).held());
}

TEST_P(SessionRules, WaitingAcquireDoesNotDelayOtherOperations) {
  MustAcquire("busy", "bob");
  auto s = OpenSession(As("alice"));
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Acquire(1, "busy", absl::Seconds(60)));
  WaitForWaiters("busy", 1, 0);
  ASSERT_TRUE(s->Acquire(2, "free"));
  EXPECT_EQ(Granted(*s, 2).owner(), "alice");
  EXPECT_FALSE(s->HasResult(1)) << "the waiting acquire ended while bob holds the lock";
  v1::ReleaseResponse rel;
  ASSERT_TRUE(Release("busy", "bob", &rel).ok());
  EXPECT_EQ(Granted(*s, 1).owner(), "alice");
  EXPECT_EQ(Describe("busy", "", Stub(1)).owner(), "alice");
}

TEST_P(SessionRules, ReacquireIsReentrantWithTheSameToken) {
  auto s = OpenSession(As("alice"));
  ASSERT_NE(s, nullptr);
  v1::AcquireResponse first = MustAcquireIn(*s, 1, "re");
  EXPECT_EQ(first.hold_count(), 1u);
  v1::AcquireResponse second = MustAcquireIn(*s, 2, "re");
  EXPECT_EQ(second.hold_count(), 2u);
  EXPECT_EQ(second.fencing_token(), first.fencing_token());
  EXPECT_EQ(Describe("re", "", Stub(1)).hold_count(), 2u);
  v1::ReleaseResponse rel = MustReleaseIn(*s, 3, "re");
  EXPECT_FALSE(rel.released());
  EXPECT_EQ(rel.hold_count(), 1u);
  rel = MustReleaseIn(*s, 4, "re");
  EXPECT_TRUE(rel.released());
  EXPECT_EQ(rel.hold_count(), 0u);
  EXPECT_FALSE(Describe("re", "", Stub(1)).held());
}

TEST_P(SessionRules, WaitersOnOneReplicaAreGrantedInArrivalOrder) {
  // The holder is on another replica when there are several.
  v1::AcquireResponse held;
  ASSERT_TRUE(Acquire({"fifo", "holder"}, &held, Stub(1)).ok());
  ASSERT_TRUE(held.acquired());
  constexpr int kWaiters = 5;
  std::vector<std::unique_ptr<SessionClient>> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.push_back(OpenSession(As(absl::StrCat("waiter-", i))));
    ASSERT_NE(waiters.back(), nullptr);
    ASSERT_TRUE(waiters.back()->Acquire(1, "fifo", absl::Seconds(60)));
    WaitForWaiters("fifo", i + 1, 0);
  }
  v1::ReleaseResponse rel;
  ASSERT_TRUE(Release("fifo", "holder", &rel, "", "", Stub(1)).ok());
  for (int i = 0; i < kWaiters; ++i) {
    int winner = -1;
    ASSERT_TRUE(WaitFor(
        [&] {
          for (int j = i; j < kWaiters; ++j) {
            if (waiters[j]->HasResult(1)) winner = j;
          }
          return winner >= 0;
        },
        kLong, absl::Milliseconds(5)))
        << "nobody was granted the lock after waiter " << i - 1;
    EXPECT_EQ(winner, i) << "granted out of arrival order";
    Granted(*waiters[winner], 1);
    EXPECT_TRUE(MustReleaseIn(*waiters[winner], 2, "fifo").released());
  }
}

TEST_P(SessionRules, CancelEndsAWaitingAcquireWithCancelledAndLeavesNoHold) {
  v1::AcquireResponse held;
  ASSERT_TRUE(Acquire({"cx", "bob"}, &held, Stub(1)).ok());
  auto s = OpenSession(As("alice"));
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Acquire(1, "cx", absl::Seconds(60)));
  WaitForWaiters("cx", 1, 0);
  ASSERT_TRUE(s->Cancel(1));
  std::optional<v1::SessionResult> r = s->WaitResult(1, kLong);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status().code(), kCancelled) << r->DebugString();
  EXPECT_FALSE(r->has_acquire() && r->acquire().acquired()) << r->DebugString();
  ASSERT_TRUE(WaitFor([&] { return Describe("cx").waiters() == 0; }, kLong));
  v1::ReleaseResponse rel;
  ASSERT_TRUE(Release("cx", "bob", &rel, "", "", Stub(1)).ok());
  EXPECT_TRUE(EventuallyFree("cx"));
  absl::SleepFor(kWindow);
  EXPECT_FALSE(Describe("cx").held()) << "the cancelled acquire was granted the lock";
  // The session holds nothing of it: a new acquire is a first grant.
  EXPECT_EQ(MustAcquireIn(*s, 2, "cx").hold_count(), 1u);
}

TEST_P(SessionRules, HeldLockStaysHeldWellPastItsLease) {
  auto s = OpenSession(As("alice", kShortLease));
  ASSERT_NE(s, nullptr);
  uint64_t token = MustAcquireIn(*s, 1, "renewed").fencing_token();
  absl::SleepFor(3 * kShortLease);  // time passing is the point here
  v1::LockInfo info = Describe("renewed", "", Stub(1));
  EXPECT_TRUE(info.held());
  EXPECT_EQ(info.owner(), "alice");
  EXPECT_EQ(info.fencing_token(), token);
  std::optional<v1::LockLost> lost = s->WaitLost(absl::ZeroDuration());
  EXPECT_FALSE(lost.has_value()) << lost->DebugString();
  EXPECT_TRUE(s->HalfCloseAndFinish(kLong).ok());
}

TEST_P(SessionRules, HalfCloseReleasesEveryHoldBeforeTheStreamEndsOk) {
  auto s = OpenSession(As("alice"));
  ASSERT_NE(s, nullptr);
  MustAcquireIn(*s, 1, "a");
  MustAcquireIn(*s, 2, "a");
  MustAcquireIn(*s, 3, "b");
  grpc::Status end = s->HalfCloseAndFinish(kLong);
  EXPECT_TRUE(end.ok()) << end.error_code() << ": " << end.error_message();
  EXPECT_FALSE(Describe("a", "", Stub(1)).held());
  EXPECT_FALSE(Describe("b", "", Stub(1)).held());
}

TEST_P(SessionRules, HalfCloseCancelsWaitingAcquires) {
  v1::AcquireResponse held;
  ASSERT_TRUE(Acquire({"w", "bob"}, &held, Stub(1)).ok());
  auto s = OpenSession(As("alice"));
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Acquire(1, "w", absl::Seconds(60)));
  WaitForWaiters("w", 1, 0);
  grpc::Status end = s->HalfCloseAndFinish(kLong);
  EXPECT_TRUE(end.ok()) << end.error_code() << ": " << end.error_message();
  std::optional<v1::SessionResult> r = s->WaitResult(1, absl::ZeroDuration());
  ASSERT_TRUE(r.has_value()) << "the waiting acquire got no result before the end";
  EXPECT_EQ(r->status().code(), kCancelled) << r->DebugString();
  ASSERT_TRUE(WaitFor([&] { return Describe("w").waiters() == 0; }, kLong));
  v1::ReleaseResponse rel;
  ASSERT_TRUE(Release("w", "bob", &rel, "", "", Stub(1)).ok());
  EXPECT_TRUE(EventuallyFree("w"));
  absl::SleepFor(kWindow);
  EXPECT_FALSE(Describe("w").held()) << "the cancelled acquire was granted the lock";
}

TEST_P(SessionRules, BrokenStreamReleasesEveryHoldWithinASecond) {
  auto s = OpenSession(As("alice"));  // a 30 s lease: only the release frees them
  ASSERT_NE(s, nullptr);
  MustAcquireIn(*s, 1, "a");
  MustAcquireIn(*s, 2, "a");
  MustAcquireIn(*s, 3, "b");
  absl::Time broken = absl::Now();
  s->Break();
  ASSERT_TRUE(WaitFor(
      [&] { return !Describe("a", "", Stub(1)).held() && !Describe("b", "", Stub(1)).held(); },
      kLong, absl::Milliseconds(10)))
      << "the holds of a broken stream were not released";
  EXPECT_LT(absl::Now() - broken, absl::Seconds(1));
}

TEST_P(SessionRules, KeepOnDisconnectHoldIsResumedByANewSessionOfTheOwner) {
  constexpr absl::Duration kFirstLease = absl::Seconds(2);
  Opening first = As("carol", kFirstLease);
  first.keep_on_disconnect = true;
  auto s1 = OpenSession(first, 0);
  ASSERT_NE(s1, nullptr);
  uint64_t token = MustAcquireIn(*s1, 1, "handover").fencing_token();
  absl::Time broken = absl::Now();
  s1->Break();
  absl::SleepFor(kWindow);
  v1::LockInfo info = Describe("handover", "", Stub(1));
  EXPECT_TRUE(info.held()) << "a keep_on_disconnect hold was released when the stream broke";
  EXPECT_EQ(info.owner(), "carol");

  // Another replica takes it over, with a short lease it must keep renewing.
  Opening second = As("carol", kShortLease);
  second.resume.push_back(Ref("handover", token));
  v1::SessionOpened opened;
  auto s2 = OpenSession(second, 1, &opened);
  ASSERT_NE(s2, nullptr);
  ASSERT_EQ(opened.resumed_size(), 1) << opened.DebugString();
  EXPECT_EQ(opened.resumed(0).name(), "handover");
  EXPECT_TRUE(opened.resumed(0).held());
  EXPECT_EQ(opened.resumed(0).owner(), "carol");
  EXPECT_EQ(opened.resumed(0).fencing_token(), token);
  EXPECT_EQ(opened.resumed(0).hold_count(), 1u);

  // Past the first session's lease and several of the second's.
  absl::SleepFor(
      std::max(broken + kFirstLease + absl::Milliseconds(500) - absl::Now(), 3 * kShortLease));
  info = Describe("handover", "", Stub(0));
  EXPECT_TRUE(info.held()) << "the resumed hold was not renewed";
  EXPECT_EQ(info.owner(), "carol");
  EXPECT_EQ(info.fencing_token(), token);
  EXPECT_EQ(s2->LostCount(), 0);
  EXPECT_TRUE(s2->HalfCloseAndFinish(kLong).ok());
  EXPECT_FALSE(Describe("handover", "", Stub(0)).held())
      << "the resumed hold was not released with its new session";
}

TEST_P(SessionRules, ResumeWithAnotherTokenIsNotTakenOverAndLeavesTheLockUntouched) {
  constexpr absl::Duration kFirstLease = absl::Seconds(20);
  Opening first = As("dave", kFirstLease);
  first.keep_on_disconnect = true;
  auto s1 = OpenSession(first, 0);
  ASSERT_NE(s1, nullptr);
  uint64_t token = MustAcquireIn(*s1, 1, "guarded").fencing_token();
  s1->Break();
  s1->WaitEnd(kLong);

  Opening second = As("dave");  // the 30 s default: a renewal would show
  second.resume.push_back(Ref("guarded", token + 1));
  v1::SessionOpened opened;
  auto s2 = OpenSession(second, 1, &opened);
  ASSERT_NE(s2, nullptr);
  EXPECT_EQ(opened.resumed_size(), 0) << opened.DebugString();
  EXPECT_TRUE(s2->HalfCloseAndFinish(kLong).ok());
  v1::LockInfo info = Describe("guarded", "", Stub(0));
  EXPECT_TRUE(info.held());
  EXPECT_EQ(info.owner(), "dave");
  EXPECT_EQ(info.fencing_token(), token);
  EXPECT_EQ(info.hold_count(), 1u);
  EXPECT_LE(FromProtoDuration(info.ttl_remaining()), kFirstLease) << "the lease was renewed";
}

TEST_P(SessionRules, LostIsPushedAtOnceWhenForceReleasedThroughTheSameReplica) {
  auto s = OpenSession(As("alice"));  // 30 s: the first renewal comes after 10 s
  ASSERT_NE(s, nullptr);
  uint64_t token = MustAcquireIn(*s, 1, "doomed").fencing_token();
  v1::ForceReleaseResponse forced;
  absl::Time at = absl::Now();
  ASSERT_TRUE(ForceRelease("doomed", 0, &forced, Stub(0)).ok());
  ASSERT_TRUE(forced.released());
  std::optional<v1::LockLost> lost = s->WaitLost(kLong);
  ASSERT_TRUE(lost.has_value()) << "no lost after ForceRelease";
  EXPECT_LT(absl::Now() - at, absl::Seconds(5)) << "not pushed: found by a renewal";
  EXPECT_EQ(lost->namespace_(), "default");
  EXPECT_EQ(lost->name(), "doomed");
  EXPECT_EQ(lost->fencing_token(), token);
  EXPECT_EQ(lost->reason(), "FORCE_RELEASED");
  EXPECT_TRUE(s->HalfCloseAndFinish(kLong).ok());
}

TEST_P(SessionRules, LostIsPushedWithinTwoLeasesWhenForceReleasedThroughAnotherReplica) {
  auto s = OpenSession(As("alice", kShortLease));
  ASSERT_NE(s, nullptr);
  uint64_t token = MustAcquireIn(*s, 1, "doomed").fencing_token();
  v1::ForceReleaseResponse forced;
  absl::Time at = absl::Now();
  ASSERT_TRUE(ForceRelease("doomed", 0, &forced, Stub(1)).ok());
  ASSERT_TRUE(forced.released());
  std::optional<v1::LockLost> lost = s->WaitLost(kLong);
  ASSERT_TRUE(lost.has_value()) << "no lost after ForceRelease";
  EXPECT_LT(absl::Now() - at, 2 * kShortLease);
  EXPECT_EQ(lost->name(), "doomed");
  EXPECT_EQ(lost->fencing_token(), token);
  EXPECT_THAT(lost->reason(), AnyOf("FORCE_RELEASED", "NOT_HELD"));
}

TEST_P(SessionRules, FirstMessageOtherThanOpenEndsTheStreamInvalidArgument) {
  SessionClient s(Stub(0));
  ASSERT_TRUE(s.Acquire(1, "early"));
  EXPECT_THAT(s.WaitEnd(kLong), StatusIs(grpc::StatusCode::INVALID_ARGUMENT, HasSubstr("open")));
  EXPECT_FALSE(s.WaitOpened(absl::ZeroDuration()).has_value());
  EXPECT_FALSE(Describe("early").held());
}

TEST_P(SessionRules, SecondOpenEndsTheStreamInvalidArgument) {
  auto s = OpenSession(As("alice"));
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->SendOpen(As("alice")));
  EXPECT_THAT(s->WaitEnd(kLong), StatusIs(grpc::StatusCode::INVALID_ARGUMENT, HasSubstr("open")));
}

TEST_P(SessionRules, RequestWithoutKindEndsTheStreamInvalidArgument) {
  auto s = OpenSession(As("alice"));
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Send(v1::SessionRequest()));
  EXPECT_THAT(s->WaitEnd(kLong), StatusIs(grpc::StatusCode::INVALID_ARGUMENT));
}

TEST_P(SessionRules, OpIdReusedWhileInFlightEndsTheStreamInvalidArgument) {
  MustAcquire("busy", "bob");
  auto s = OpenSession(As("alice"));
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Acquire(7, "busy", absl::Seconds(60)));
  WaitForWaiters("busy", 1, 0);
  s->Acquire(7, "other");
  EXPECT_THAT(s->WaitEnd(kLong), StatusIs(grpc::StatusCode::INVALID_ARGUMENT, HasSubstr("op_id")));
}

TEST_P(SessionRules, ForeignOwnerFailsThatOperationInvalidArgumentAndTheStreamGoesOn) {
  auto s = OpenSession(As("alice"));
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Acquire(1, "mine", absl::ZeroDuration(), "mallory"));
  std::optional<v1::SessionResult> r = s->WaitResult(1, kLong);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status().code(), kInvalidArgument) << r->DebugString();
  EXPECT_THAT(r->status().message(), StartsWith("owner"));
  EXPECT_FALSE(Describe("mine").held());
  EXPECT_EQ(MustAcquireIn(*s, 2, "mine").owner(), "alice");
  ASSERT_TRUE(s->Release(3, "mine", "mallory"));
  r = s->WaitResult(3, kLong);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status().code(), kInvalidArgument) << r->DebugString();
  EXPECT_EQ(Describe("mine").owner(), "alice");
  EXPECT_TRUE(s->HalfCloseAndFinish(kLong).ok());
}

TEST_P(SessionRules, ReleaseOfALockNotHeldCarriesLockNotHeldInTheResult) {
  MustAcquire("theirs", "bob");
  auto s = OpenSession(As("alice"));
  ASSERT_NE(s, nullptr);
  for (const char* name : {"never", "theirs"}) {
    ASSERT_TRUE(s->Release(1, name));
    std::optional<v1::SessionResult> r = s->WaitResult(1, kLong);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status().code(), kFailedPrecondition) << r->DebugString();
    EXPECT_EQ(ResultReason(*r), "lockd/LOCK_NOT_HELD") << r->DebugString();
  }
  EXPECT_EQ(Describe("theirs").owner(), "bob");
  EXPECT_EQ(MustAcquireIn(*s, 2, "never").owner(), "alice");
}

TEST_P(SessionRules, OpenWithBadLeaseEndsInvalidArgumentNamingOpenLeaseTtl) {
  for (absl::Duration lease : {absl::Milliseconds(10), absl::Hours(2), absl::Seconds(-1)}) {
    SessionClient s(Stub(0));
    EXPECT_FALSE(s.Open(As("alice", lease), kLong).has_value()) << lease;
    EXPECT_THAT(s.WaitEnd(kLong),
                StatusIs(grpc::StatusCode::INVALID_ARGUMENT, HasSubstr("open.lease_ttl")))
        << lease;
  }
}

TEST_P(SessionRules, ServerShutdownEndsTheStreamUnavailableAndKeepsTheHold) {
  auto s = OpenSession(As("alice"), 0);
  ASSERT_NE(s, nullptr);
  uint64_t token = MustAcquireIn(*s, 1, "kept").fencing_token();
  Server(0)->Shutdown();
  EXPECT_THAT(s->WaitEnd(kLong), StatusIs(grpc::StatusCode::UNAVAILABLE));
  if (replicas() == 1) return;  // nobody left to ask
  v1::LockInfo info = Describe("kept", "", Stub(1));
  EXPECT_TRUE(info.held());
  EXPECT_EQ(info.owner(), "alice");
  EXPECT_EQ(info.fencing_token(), token);
}

INSTANTIATE_TEST_SUITE_P(Backends, SessionRules, ::testing::ValuesIn(ReplicaCountsOfEnv()),
                         ReplicaCountName);

}  // namespace
}  // namespace lockd::testing
