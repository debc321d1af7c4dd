// Shared locks and semaphores (docs/api.md "Shared locks, semaphores and
// all-or-nothing acquires") in the conformance suite: every backend, with
// one lockd and with three replicas. Holders, waiters and operators are put
// on Stub(0), Stub(1) and Stub(2), so that the three-replica run checks each
// rule across replicas. AcquireAll has tests of its own.
//
// Timing: waits for something that must happen are generous (kLong, for a
// loaded machine); checks that something does not happen look for a short,
// fixed window (kWindow); "at once" is kAtOnce, far below any wait asked for.

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "protos/proto_duration.h"
#include "tests/conformance/conformance.h"
#include "tests/conformance/session_client.h"
#include "tests/support/status_matchers.h"

namespace lockd::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

constexpr absl::Duration kLong = absl::Seconds(30);
constexpr absl::Duration kWindow = absl::Milliseconds(300);
constexpr absl::Duration kAtOnce = absl::Seconds(5);
constexpr int kOk = 0;
// The wait_timeout of waiters that must time out: long enough for the test
// to queue another acquire behind them first.
constexpr absl::Duration kGiveUpAfter = absl::Seconds(3);

constexpr v1::LockMode kShared = v1::LOCK_MODE_SHARED;
constexpr v1::LockMode kExclusive = v1::LOCK_MODE_EXCLUSIVE;

Acq Exclusive(const std::string& name, const std::string& owner,
              absl::Duration wait = absl::ZeroDuration(), absl::Duration ttl = absl::Seconds(30)) {
  Acq a{name, owner, ttl, wait};
  return a;
}

Acq Shared(const std::string& name, const std::string& owner,
           absl::Duration wait = absl::ZeroDuration(), absl::Duration ttl = absl::Seconds(30)) {
  Acq a{name, owner, ttl, wait};
  a.mode = kShared;
  return a;
}

Acq Sem(const std::string& name, const std::string& owner, uint32_t limit, uint32_t permits,
        absl::Duration wait = absl::ZeroDuration(), absl::Duration ttl = absl::Seconds(30)) {
  Acq a{name, owner, ttl, wait};
  a.limit = limit;
  a.permits = permits;
  return a;
}

// The ErrorInfo of a status (empty when it has none).
google::rpc::ErrorInfo InfoOf(const grpc::Status& s) {
  google::rpc::Status details;
  google::rpc::ErrorInfo info;
  if (!details.ParseFromString(s.error_details())) return info;
  for (const auto& any : details.details()) {
    if (any.UnpackTo(&info)) break;
  }
  return info;
}

std::map<std::string, std::string> MetadataOf(const grpc::Status& s) {
  google::rpc::ErrorInfo info = InfoOf(s);
  return {info.metadata().begin(), info.metadata().end()};
}

// The owners of `info.holders`, in the order listed.
std::vector<std::string> Owners(const v1::LockInfo& info) {
  std::vector<std::string> owners;
  for (const v1::Holder& h : info.holders()) owners.push_back(h.owner());
  return owners;
}

// The holder `owner` of `info`, or nullopt.
std::optional<v1::Holder> HolderOf(const v1::LockInfo& info, const std::string& owner) {
  for (const v1::Holder& h : info.holders()) {
    if (h.owner() == owner) return h;
  }
  return std::nullopt;
}

// An Acquire running on a thread of its own, so that the test can act while
// it waits. The destructor cancels it if it is still running and joins.
// Thread-safe: the reply is published under mu_.
class PendingAcquire {
 public:
  PendingAcquire(LockService::Stub* stub, const Acq& a) : owner_(a.owner) {
    ctx_.set_deadline(absl::ToChronoTime(absl::Now() + a.deadline));
    thread_ = std::thread([this, stub, req = ToRequest(a)] {
      v1::AcquireResponse resp;
      grpc::Status status = stub->Acquire(&ctx_, req, &resp);
      absl::MutexLock l(&mu_);
      resp_ = std::move(resp);
      status_ = std::move(status);
      done_ = true;
    });
  }
  ~PendingAcquire() {
    ctx_.TryCancel();
    thread_.join();
  }
  PendingAcquire(const PendingAcquire&) = delete;
  PendingAcquire& operator=(const PendingAcquire&) = delete;

  const std::string& owner() const { return owner_; }
  void Cancel() { ctx_.TryCancel(); }
  // True when the reply came within `timeout`.
  bool Answered(absl::Duration timeout) {
    absl::MutexLock l(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&done_), timeout);
  }
  // REQUIRES: Answered() returned true.
  grpc::Status status() {
    absl::MutexLock l(&mu_);
    return status_;
  }
  v1::AcquireResponse response() {
    absl::MutexLock l(&mu_);
    return resp_;
  }

 private:
  const std::string owner_;
  grpc::ClientContext ctx_;
  std::thread thread_;
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
  v1::AcquireResponse resp_ ABSL_GUARDED_BY(mu_);
};

class KindRules : public ConformanceTest {
 protected:
  // Acquires through replica `replica`; the grant must come (at once for a
  // try-once acquire).
  v1::AcquireResponse Granted(const Acq& a, int replica) {
    v1::AcquireResponse resp;
    grpc::Status s = Acquire(a, &resp, Stub(replica));
    EXPECT_TRUE(s.ok()) << a.owner << " on " << a.name << ": " << s.error_code() << ": "
                        << s.error_message();
    EXPECT_TRUE(resp.acquired()) << a.name << " not granted to " << a.owner << ": "
                                 << resp.current().DebugString();
    return resp;
  }

  // Acquires through replica `replica`; the answer must be OK, not acquired.
  v1::AcquireResponse NotGranted(const Acq& a, int replica) {
    v1::AcquireResponse resp;
    grpc::Status s = Acquire(a, &resp, Stub(replica));
    EXPECT_TRUE(s.ok()) << a.owner << " on " << a.name << ": " << s.error_code() << ": "
                        << s.error_message();
    EXPECT_FALSE(resp.acquired()) << a.name << " was granted to " << a.owner;
    return resp;
  }

  // An acquire that must fail at once with FAILED_PRECONDITION and `reason`.
  grpc::Status Refused(const Acq& a, int replica, const std::string& reason) {
    v1::AcquireResponse resp;
    absl::Time start = absl::Now();
    grpc::Status s = Acquire(a, &resp, Stub(replica));
    EXPECT_THAT(s, StatusIs(grpc::StatusCode::FAILED_PRECONDITION)) << a.owner << " on " << a.name;
    EXPECT_EQ(ErrorReason(s), "lockd/" + reason) << s.error_message();
    EXPECT_LT(absl::Now() - start, kAtOnce) << "waited instead of failing at once";
    return s;
  }

  std::unique_ptr<PendingAcquire> Start(const Acq& a, int replica) {
    return std::make_unique<PendingAcquire>(Stub(replica), a);
  }

  // The pending acquire `p` must be granted (within kLong).
  v1::AcquireResponse GrantedLater(PendingAcquire& p) {
    if (!p.Answered(kLong)) {
      ADD_FAILURE() << p.owner() << " was never answered";
      return {};
    }
    grpc::Status s = p.status();
    EXPECT_TRUE(s.ok()) << p.owner() << ": " << s.error_code() << ": " << s.error_message();
    EXPECT_TRUE(p.response().acquired()) << p.owner() << " answered without the grant";
    return p.response();
  }

  // The pending acquire `p` must still wait (no answer within kWindow).
  void StillWaiting(PendingAcquire& p, absl::Duration window = kWindow) {
    EXPECT_FALSE(p.Answered(window))
        << p.owner() << " was answered while it had to wait: acquired=" << p.response().acquired()
        << " status " << p.status().error_code();
  }

  v1::ReleaseResponse MustRelease(const std::string& name, const std::string& owner, int replica) {
    v1::ReleaseResponse rel;
    grpc::Status s = Release(name, owner, &rel, "", "", Stub(replica));
    EXPECT_TRUE(s.ok()) << owner << " releasing " << name << ": " << s.error_message();
    return rel;
  }

  // Waiters on `name` summed over the replicas, in the units of
  // WaitForWaitersInAll; 0 means none anywhere.
  uint32_t WaitersAnywhere(const std::string& name) {
    uint32_t sum = 0;
    for (int r = 0; r < replicas(); ++r) sum += Describe(name, "", Stub(r)).waiters();
    return sum;
  }
};

// --- Validation ---------------------------------------------------------------

TEST_P(KindRules, BadKindIsRejectedNamingTheFieldAndChangesNothing) {
  uint64_t token = Granted(Shared("victim", "alice"), 0).fencing_token();
  struct Case {
    std::string field;
    v1::LockMode mode;
    uint32_t limit;
    uint32_t permits;
  };
  const std::vector<Case> cases = {
      {"limit", kShared, 3, 0},        {"limit", kShared, 3, 1},
      {"permits", kExclusive, 0, 1},   {"permits", kShared, 0, 2},
      {"permits", kExclusive, 2, 3},   {"limit", kExclusive, 10001, 0},
      {"limit", kExclusive, 10001, 1}, {"mode", static_cast<v1::LockMode>(7), 0, 0},
      {"permits", kExclusive, 1, 2},
  };
  int replica = 0;
  for (const Case& c : cases) {
    for (const char* name : {"victim", "fresh"}) {
      Acq a{name, "bob", absl::Seconds(30), absl::Seconds(5)};
      a.mode = c.mode;
      a.limit = c.limit;
      a.permits = c.permits;
      v1::AcquireResponse resp;
      grpc::Status s = Acquire(a, &resp, Stub(replica++));
      EXPECT_THAT(s, StatusIs(grpc::StatusCode::INVALID_ARGUMENT))
          << c.field << " mode=" << c.mode << " limit=" << c.limit << " permits=" << c.permits;
      EXPECT_THAT(s.error_message(), StartsWith(c.field + ":")) << s.error_message();
    }
  }
  v1::LockInfo info = Describe("victim", "", Stub(1));
  EXPECT_EQ(info.mode(), kShared);
  EXPECT_EQ(info.limit(), 0u);
  EXPECT_THAT(Owners(info), ElementsAre("alice"));
  EXPECT_EQ(info.fencing_token(), token);
  EXPECT_EQ(info.hold_count(), 1u);
  EXPECT_EQ(WaitersAnywhere("victim"), 0u);
  EXPECT_FALSE(Describe("fresh", "", Stub(2)).held()) << "a rejected request wrote a lock";
  // The largest semaphore is valid.
  Granted(Sem("largest", "carol", 10000, 10000), 2);
  EXPECT_EQ(Describe("largest").limit(), 10000u);
}

// --- Read-write locks: readers together, writers alone, FIFO ----------------------------

TEST_P(KindRules, ReadersHoldTogetherAndAWriterWaitsForAllOfThem) {
  v1::AcquireResponse r1 = Granted(Shared("rw", "r1"), 0);
  v1::AcquireResponse r2 = Granted(Shared("rw", "r2"), 1);
  EXPECT_EQ(r1.hold_count(), 1u);
  EXPECT_EQ(r2.hold_count(), 1u);
  v1::LockInfo info = Describe("rw", "", Stub(2));
  EXPECT_EQ(info.mode(), kShared);
  EXPECT_THAT(Owners(info), ElementsAre("r1", "r2"));
  // A writer that only tries is refused and told who holds it.
  v1::AcquireResponse tried = NotGranted(Exclusive("rw", "w"), 2);
  EXPECT_EQ(tried.current().mode(), kShared);
  EXPECT_THAT(Owners(tried.current()), ElementsAre("r1", "r2"));

  auto w = Start(Exclusive("rw", "w", kLong), 2);
  WaitForWaitersInAll("rw", 1);
  v1::ReleaseResponse rel = MustRelease("rw", "r1", 0);
  EXPECT_TRUE(rel.released());
  StillWaiting(*w);
  MustRelease("rw", "r2", 1);
  v1::AcquireResponse granted = GrantedLater(*w);
  EXPECT_GT(granted.fencing_token(), r2.fencing_token());
  info = Describe("rw", "", Stub(0));
  EXPECT_EQ(info.mode(), kExclusive);
  ASSERT_THAT(Owners(info), ElementsAre("w"));
  EXPECT_EQ(info.holders(0).mode(), kExclusive);
  // While the writer holds it, readers are refused.
  NotGranted(Shared("rw", "r3"), 1);
}

TEST_P(KindRules, ReaderArrivingWhileAWriterWaitsQueuesBehindIt) {
  v1::AcquireResponse r1 = Granted(Shared("rw", "r1"), 0);
  auto w = Start(Exclusive("rw", "w", kLong), 1);
  WaitForWaitersInAll("rw", 1);
  auto r2 = Start(Shared("rw", "r2", kLong), 2);
  WaitForWaitersInAll("rw", 2);
  StillWaiting(*r2);
  // A reader that only tries does not pass the waiting writer either.
  NotGranted(Shared("rw", "r3"), 0);

  MustRelease("rw", "r1", 0);
  v1::AcquireResponse wg = GrantedLater(*w);
  EXPECT_GT(wg.fencing_token(), r1.fencing_token());
  StillWaiting(*r2);
  MustRelease("rw", "w", 1);
  v1::AcquireResponse rg = GrantedLater(*r2);
  EXPECT_GT(rg.fencing_token(), wg.fencing_token());
  EXPECT_EQ(Describe("rw").mode(), kShared);
}

TEST_P(KindRules, QueueIsFifoAcrossModesAndReadersAtTheHeadAreGrantedTogether) {
  v1::AcquireResponse w1 = Granted(Exclusive("rw", "w1"), 0);
  auto r1 = Start(Shared("rw", "r1", kLong), 1);
  WaitForWaitersInAll("rw", 1);
  auto r2 = Start(Shared("rw", "r2", kLong), 2);
  WaitForWaitersInAll("rw", 2);
  auto w2 = Start(Exclusive("rw", "w2", kLong), 0);
  WaitForWaitersInAll("rw", 3);
  auto r3 = Start(Shared("rw", "r3", kLong), 1);
  WaitForWaitersInAll("rw", 4);

  MustRelease("rw", "w1", 0);
  v1::AcquireResponse g1 = GrantedLater(*r1);
  v1::AcquireResponse g2 = GrantedLater(*r2);
  EXPECT_GT(g1.fencing_token(), w1.fencing_token());
  EXPECT_GT(g2.fencing_token(), w1.fencing_token());
  v1::LockInfo info = Describe("rw", "", Stub(2));
  EXPECT_EQ(info.mode(), kShared);
  EXPECT_THAT(Owners(info), UnorderedElementsAre("r1", "r2")) << "the readers at the head were "
                                                                 "not granted together";
  StillWaiting(*w2);
  EXPECT_FALSE(r3->Answered(absl::ZeroDuration())) << "r3 passed the waiting writer w2";

  MustRelease("rw", "r1", 1);
  StillWaiting(*w2);
  MustRelease("rw", "r2", 2);
  v1::AcquireResponse gw2 = GrantedLater(*w2);
  EXPECT_GT(gw2.fencing_token(), std::max(g1.fencing_token(), g2.fencing_token()));
  StillWaiting(*r3);
  MustRelease("rw", "w2", 0);
  EXPECT_GT(GrantedLater(*r3).fencing_token(), gw2.fencing_token());
}

// --- Every holder on its own ---------------------------------------------------------------

TEST_P(KindRules, EachReaderHasItsOwnLease) {
  Granted(Shared("lease", "short", absl::ZeroDuration(), absl::Milliseconds(1500)), 0);
  v1::AcquireResponse kept = Granted(Shared("lease", "kept"), 1);
  ASSERT_TRUE(WaitFor([&] { return Describe("lease", "", Stub(2)).holders_size() == 1; }, kLong))
      << "the short lease never ended";
  v1::LockInfo info = Describe("lease", "", Stub(2));
  EXPECT_TRUE(info.held()) << "the other reader's hold went with it";
  EXPECT_EQ(info.mode(), kShared);
  EXPECT_THAT(Owners(info), ElementsAre("kept"));
  EXPECT_EQ(info.fencing_token(), kept.fencing_token());
  v1::RenewResponse renewed;
  grpc::Status s = Renew("lease", "kept", absl::Seconds(30), &renewed, Stub(0));
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(renewed.fencing_token(), kept.fencing_token());
  EXPECT_THAT(Renew("lease", "short", absl::Seconds(30), &renewed, Stub(1)), IsLockNotHeld());
  v1::ReleaseResponse rel;
  EXPECT_THAT(Release("lease", "short", &rel, "", "", Stub(2)), IsLockNotHeld());
  EXPECT_THAT(Owners(Describe("lease")), ElementsAre("kept"));
}

TEST_P(KindRules, EachSemaphoreHolderHasItsOwnLease) {
  Granted(Sem("lease", "short", 3, 2, absl::ZeroDuration(), absl::Milliseconds(1500)), 0);
  v1::AcquireResponse kept = Granted(Sem("lease", "kept", 3, 1), 1);
  ASSERT_TRUE(WaitFor([&] { return Describe("lease", "", Stub(2)).holders_size() == 1; }, kLong))
      << "the short lease never ended";
  v1::LockInfo info = Describe("lease", "", Stub(2));
  EXPECT_EQ(info.limit(), 3u);
  EXPECT_THAT(Owners(info), ElementsAre("kept"));
  v1::RenewResponse renewed;
  EXPECT_TRUE(Renew("lease", "kept", absl::Seconds(30), &renewed, Stub(0)).ok());
  EXPECT_THAT(Renew("lease", "short", absl::Seconds(30), &renewed, Stub(1)), IsLockNotHeld());
  // Its permits are free again.
  Granted(Sem("lease", "next", 3, 2), 2);
}

TEST_P(KindRules, TokensGrowOnEveryFirstGrantInAnyModeAndReentryKeepsThem) {
  uint64_t last = 0;
  auto first_grant = [&](const v1::AcquireResponse& r, const std::string& what) {
    EXPECT_GT(r.fencing_token(), last) << what << " did not get a larger token";
    EXPECT_EQ(r.hold_count(), 1u) << what;
    last = r.fencing_token();
  };
  v1::AcquireResponse r1 = Granted(Shared("tok", "r1"), 0);
  first_grant(r1, "reader r1");
  v1::AcquireResponse r2 = Granted(Shared("tok", "r2"), 1);
  first_grant(r2, "reader r2");
  v1::AcquireResponse again = Granted(Shared("tok", "r1"), 2);
  EXPECT_EQ(again.fencing_token(), r1.fencing_token()) << "a reentrant acquire changed the token";
  EXPECT_EQ(again.hold_count(), 2u);
  v1::RenewResponse renewed;
  ASSERT_TRUE(Renew("tok", "r2", absl::Seconds(30), &renewed, Stub(0)).ok());
  EXPECT_EQ(renewed.fencing_token(), r2.fencing_token());
  MustRelease("tok", "r1", 1);
  MustRelease("tok", "r1", 2);
  MustRelease("tok", "r2", 0);

  first_grant(Granted(Exclusive("tok", "w"), 2), "writer w");
  MustRelease("tok", "w", 2);
  // A name without holders may become a semaphore: one token counter still.
  v1::AcquireResponse s1 = Granted(Sem("tok", "s1", 3, 2), 0);
  first_grant(s1, "semaphore holder s1");
  first_grant(Granted(Sem("tok", "s2", 3, 1), 1), "semaphore holder s2");
  v1::AcquireResponse s1again = Granted(Sem("tok", "s1", 3, 2), 2);
  EXPECT_EQ(s1again.fencing_token(), s1.fencing_token());
  EXPECT_EQ(s1again.hold_count(), 2u);
  MustRelease("tok", "s1", 0);
  MustRelease("tok", "s1", 0);
  MustRelease("tok", "s2", 1);
  first_grant(Granted(Exclusive("tok", "w"), 1), "writer w again");
}

// --- Reentrancy across modes and the upgrade rule -------------------------------------------

TEST_P(KindRules, SharedTwiceIsReentrant) {
  v1::AcquireResponse a = Granted(Shared("re", "alice"), 0);
  v1::AcquireResponse b = Granted(Shared("re", "alice"), 1);
  EXPECT_EQ(b.hold_count(), 2u);
  EXPECT_EQ(b.fencing_token(), a.fencing_token());
  v1::LockInfo info = Describe("re", "", Stub(2));
  ASSERT_EQ(info.holders_size(), 1);
  EXPECT_EQ(info.holders(0).hold_count(), 2u);
  EXPECT_EQ(info.holders(0).mode(), kShared);
  v1::ReleaseResponse rel = MustRelease("re", "alice", 2);
  EXPECT_FALSE(rel.released());
  EXPECT_EQ(rel.hold_count(), 1u);
  rel = MustRelease("re", "alice", 0);
  EXPECT_TRUE(rel.released());
  EXPECT_FALSE(Describe("re").held());
}

TEST_P(KindRules, ExclusiveHolderAskingSharedGetsAReentrantExclusiveHold) {
  v1::AcquireResponse a = Granted(Exclusive("re", "alice"), 0);
  v1::AcquireResponse b = Granted(Shared("re", "alice"), 1);
  EXPECT_EQ(b.hold_count(), 2u);
  EXPECT_EQ(b.fencing_token(), a.fencing_token());
  v1::LockInfo info = Describe("re", "", Stub(2));
  EXPECT_EQ(info.mode(), kExclusive);
  ASSERT_EQ(info.holders_size(), 1);
  EXPECT_EQ(info.holders(0).mode(), kExclusive);
  EXPECT_EQ(info.holders(0).hold_count(), 2u);
  NotGranted(Shared("re", "bob"), 2);
  MustRelease("re", "alice", 0);
  NotGranted(Shared("re", "bob"), 1);  // still exclusive with one hold left
}

TEST_P(KindRules, SoleReaderUpgradesAtOnceWithALargerToken) {
  v1::AcquireResponse shared = Granted(Shared("up", "alice"), 0);
  v1::AcquireResponse up = Granted(Exclusive("up", "alice"), 1);
  EXPECT_EQ(up.hold_count(), 2u);
  EXPECT_GT(up.fencing_token(), shared.fencing_token()) << "an upgrade is a new grant";
  v1::LockInfo info = Describe("up", "", Stub(2));
  EXPECT_EQ(info.mode(), kExclusive);
  ASSERT_EQ(info.holders_size(), 1);
  EXPECT_EQ(info.holders(0).owner(), "alice");
  EXPECT_EQ(info.holders(0).mode(), kExclusive);
  EXPECT_EQ(info.holders(0).hold_count(), 2u);
  EXPECT_EQ(info.holders(0).fencing_token(), up.fencing_token());
  NotGranted(Shared("up", "bob"), 2);
  // Exclusive until its count reaches 0.
  v1::ReleaseResponse rel = MustRelease("up", "alice", 0);
  EXPECT_FALSE(rel.released());
  EXPECT_EQ(rel.hold_count(), 1u);
  EXPECT_EQ(Describe("up", "", Stub(1)).mode(), kExclusive);
  NotGranted(Shared("up", "bob"), 1);
  rel = MustRelease("up", "alice", 2);
  EXPECT_TRUE(rel.released());
  EXPECT_GT(Granted(Shared("up", "bob"), 0).fencing_token(), up.fencing_token());
}

TEST_P(KindRules, UpgradeBesideAnotherReaderFailsAtOnceAndChangesNothing) {
  v1::AcquireResponse alice = Granted(Shared("up", "alice"), 0);
  Granted(Shared("up", "bob"), 1);
  grpc::Status s = Refused(Exclusive("up", "alice", kLong), 2, "UPGRADE_WOULD_BLOCK");
  EXPECT_THAT(s.error_message(), StartsWith("mode:"));
  v1::LockInfo info = Describe("up", "", Stub(0));
  EXPECT_EQ(info.mode(), kShared);
  EXPECT_THAT(Owners(info), ElementsAre("alice", "bob"));
  EXPECT_EQ(info.holders(0).mode(), kShared);
  EXPECT_EQ(info.holders(0).hold_count(), 1u);
  EXPECT_EQ(info.holders(0).fencing_token(), alice.fencing_token());
  EXPECT_EQ(WaitersAnywhere("up"), 0u);
}

TEST_P(KindRules, UpgradeWithAWaiterFailsAtOnceAndChangesNothing) {
  v1::AcquireResponse alice = Granted(Shared("up", "alice"), 0);
  auto carol = Start(Exclusive("up", "carol", kLong), 1);
  WaitForWaitersInAll("up", 1);
  Refused(Exclusive("up", "alice", kLong), 2, "UPGRADE_WOULD_BLOCK");
  v1::LockInfo info = Describe("up", "", Stub(0));
  EXPECT_EQ(info.mode(), kShared);
  ASSERT_THAT(Owners(info), ElementsAre("alice"));
  EXPECT_EQ(info.holders(0).hold_count(), 1u);
  EXPECT_EQ(info.holders(0).fencing_token(), alice.fencing_token());
  StillWaiting(*carol);
  MustRelease("up", "alice", 2);
  EXPECT_GT(GrantedLater(*carol).fencing_token(), alice.fencing_token());
}

TEST_P(KindRules, SemaphoreReentryMustAskThePermitsHeld) {
  v1::AcquireResponse a = Granted(Sem("sem", "alice", 3, 2), 0);
  v1::AcquireResponse b = Granted(Sem("sem", "alice", 3, 2), 1);
  EXPECT_EQ(b.hold_count(), 2u);
  EXPECT_EQ(b.fencing_token(), a.fencing_token());
  Refused(Sem("sem", "alice", 3, 1), 2, "PERMITS_MISMATCH");
  Refused(Sem("sem", "alice", 3, 3, kLong), 0, "PERMITS_MISMATCH");
  v1::LockInfo info = Describe("sem", "", Stub(1));
  ASSERT_THAT(Owners(info), ElementsAre("alice"));
  EXPECT_EQ(info.holders(0).permits(), 2u);
  EXPECT_EQ(info.holders(0).hold_count(), 2u);
  // The one permit left is still there for others.
  Granted(Sem("sem", "bob", 3, 1), 2);
}

// --- Kinds do not mix -----------------------------------------------------------------------

TEST_P(KindRules, SemaphoreAcquireOfAHeldLockFailsAtOnceNamingKindLock) {
  for (v1::LockMode mode : {kExclusive, kShared}) {
    std::string name = mode == kShared ? "read-locked" : "locked";
    Acq lock{name, "alice"};
    lock.mode = mode;
    v1::AcquireResponse held = Granted(lock, 0);
    for (const char* owner : {"bob", "alice"}) {
      grpc::Status s = Refused(Sem(name, owner, 2, 1, kLong), 1, "LOCK_KIND_MISMATCH");
      EXPECT_THAT(MetadataOf(s), ElementsAre(Pair("kind", "lock"))) << name;
    }
    v1::LockInfo info = Describe(name, "", Stub(2));
    EXPECT_EQ(info.mode(), mode);
    EXPECT_EQ(info.limit(), 0u);
    ASSERT_THAT(Owners(info), ElementsAre("alice"));
    EXPECT_EQ(info.holders(0).hold_count(), 1u);
    EXPECT_EQ(info.holders(0).fencing_token(), held.fencing_token());
    EXPECT_EQ(WaitersAnywhere(name), 0u);
  }
}

TEST_P(KindRules, LockAcquireOfAHeldSemaphoreFailsAtOnceNamingKindAndLimit) {
  v1::AcquireResponse held = Granted(Sem("sem", "alice", 3, 1), 0);
  for (const Acq& a : {Exclusive("sem", "bob", kLong), Shared("sem", "bob", kLong),
                       Exclusive("sem", "alice", kLong)}) {
    grpc::Status s = Refused(a, 1, "LOCK_KIND_MISMATCH");
    EXPECT_THAT(MetadataOf(s), ElementsAre(Pair("kind", "semaphore"), Pair("limit", "3")))
        << a.owner << " mode " << a.mode;
  }
  v1::LockInfo info = Describe("sem", "", Stub(2));
  EXPECT_EQ(info.limit(), 3u);
  ASSERT_THAT(Owners(info), ElementsAre("alice"));
  EXPECT_EQ(info.holders(0).permits(), 1u);
  EXPECT_EQ(info.holders(0).fencing_token(), held.fencing_token());
  EXPECT_EQ(WaitersAnywhere("sem"), 0u);
}

TEST_P(KindRules, SemaphoreAcquireWithAnotherLimitFailsAtOnce) {
  Granted(Sem("sem", "alice", 3, 1), 0);
  for (const Acq& a : {Sem("sem", "bob", 4, 1, kLong), Sem("sem", "bob", 2, 1, kLong),
                       Sem("sem", "alice", 4, 1, kLong)}) {
    grpc::Status s = Refused(a, 2, "LOCK_KIND_MISMATCH");
    EXPECT_THAT(MetadataOf(s), ElementsAre(Pair("kind", "semaphore"), Pair("limit", "3")));
  }
  v1::LockInfo info = Describe("sem", "", Stub(1));
  EXPECT_EQ(info.limit(), 3u);
  EXPECT_THAT(Owners(info), ElementsAre("alice"));
  EXPECT_EQ(info.holders(0).hold_count(), 1u);
  EXPECT_EQ(WaitersAnywhere("sem"), 0u);
}

TEST_P(KindRules, NameWithoutHoldersTakesTheKindOfItsNextGrant) {
  Granted(Sem("any", "alice", 3, 1), 0);
  MustRelease("any", "alice", 0);
  Granted(Exclusive("any", "bob"), 1);
  EXPECT_EQ(Describe("any", "", Stub(2)).limit(), 0u);
  MustRelease("any", "bob", 1);
  Granted(Sem("any", "carol", 5, 5), 2);
  EXPECT_EQ(Describe("any", "", Stub(0)).limit(), 5u);
  MustRelease("any", "carol", 2);
  Granted(Shared("any", "dave"), 0);
  v1::LockInfo info = Describe("any", "", Stub(1));
  EXPECT_EQ(info.mode(), kShared);
  EXPECT_EQ(info.limit(), 0u);
}

// --- Semaphores -----------------------------------------------------------------------------

TEST_P(KindRules, SemaphoreGrantsWhilePermitsFitAndNeverAboveItsLimit) {
  Granted(Sem("sem", "a", 3, 1), 0);
  Granted(Sem("sem", "b", 3, 2), 1);
  v1::AcquireResponse full = NotGranted(Sem("sem", "c", 3, 1), 2);
  EXPECT_EQ(full.current().limit(), 3u);
  EXPECT_THAT(Owners(full.current()), ElementsAre("a", "b"));
  auto c = Start(Sem("sem", "c", 3, 1, kLong), 2);
  WaitForWaitersInAll("sem", 1);
  StillWaiting(*c);
  MustRelease("sem", "a", 0);
  GrantedLater(*c);
  v1::LockInfo info = Describe("sem", "", Stub(1));
  EXPECT_THAT(Owners(info), ElementsAre("b", "c"));
  EXPECT_EQ(info.holders(0).permits(), 2u);
  EXPECT_EQ(info.holders(1).permits(), 1u);
  // permits 0 means 1.
  Granted(Sem("ones", "x", 2, 0), 0);
  Granted(Sem("ones", "y", 2, 0), 1);
  NotGranted(Sem("ones", "z", 2, 0), 2);
  info = Describe("ones");
  ASSERT_EQ(info.holders_size(), 2);
  EXPECT_EQ(info.holders(0).permits(), 1u);
  EXPECT_EQ(info.holders(1).permits(), 1u);
}

TEST_P(KindRules, WeightedPermitsAreFifoWithoutBarging) {
  Granted(Sem("sem", "A", 4, 3), 0);
  auto b = Start(Sem("sem", "B", 4, 2, kLong), 1);
  WaitForWaitersInAll("sem", 1);
  auto c = Start(Sem("sem", "C", 4, 1, kLong), 2);
  WaitForWaitersInAll("sem", 2);
  // C's one permit would fit beside A's three, but B waits ahead of it.
  StillWaiting(*c);
  NotGranted(Sem("sem", "D", 4, 1), 0);
  StillWaiting(*b, absl::ZeroDuration());
  MustRelease("sem", "A", 0);
  GrantedLater(*b);
  GrantedLater(*c);
  v1::LockInfo info = Describe("sem", "", Stub(1));
  EXPECT_THAT(Owners(info), UnorderedElementsAre("B", "C"));
  ASSERT_TRUE(HolderOf(info, "B").has_value());
  EXPECT_EQ(HolderOf(info, "B")->permits(), 2u);
  EXPECT_EQ(WaitersAnywhere("sem"), 0u);
}

// --- ForceRelease ---------------------------------------------------------------------------

TEST_P(KindRules, ForceReleaseFreesEveryHolder) {
  Granted(Shared("rw", "r1"), 0);
  Granted(Shared("rw", "r2"), 1);
  v1::ForceReleaseResponse forced;
  grpc::Status s = ForceRelease("rw", 0, &forced, Stub(2));
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(forced.released());
  EXPECT_TRUE(forced.previous().held());
  EXPECT_THAT(Owners(forced.previous()), ElementsAre("r1", "r2"));
  EXPECT_FALSE(Describe("rw", "", Stub(0)).held());
  v1::RenewResponse renewed;
  EXPECT_THAT(Renew("rw", "r1", absl::Seconds(30), &renewed, Stub(0)), IsLockNotHeld());
  v1::ReleaseResponse rel;
  EXPECT_THAT(Release("rw", "r2", &rel, "", "", Stub(1)), IsLockNotHeld());

  Granted(Sem("sem", "s1", 3, 2), 0);
  Granted(Sem("sem", "s2", 3, 1), 1);
  auto s3 = Start(Sem("sem", "s3", 3, 3, kLong), 2);
  WaitForWaitersInAll("sem", 1);
  s = ForceRelease("sem", 0, &forced, Stub(1));
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(forced.released());
  GrantedLater(*s3);
  EXPECT_THAT(Owners(Describe("sem", "", Stub(0))), ElementsAre("s3"));
}

TEST_P(KindRules, ForceReleaseWithATokenFreesOnlyThatHolder) {
  v1::AcquireResponse r1 = Granted(Shared("rw", "r1"), 0);
  v1::AcquireResponse r2 = Granted(Shared("rw", "r2"), 1);
  v1::ForceReleaseResponse forced;
  grpc::Status s = ForceRelease("rw", r1.fencing_token(), &forced, Stub(2));
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(forced.released());
  v1::LockInfo info = Describe("rw", "", Stub(0));
  EXPECT_EQ(info.mode(), kShared);
  EXPECT_THAT(Owners(info), ElementsAre("r2"));
  v1::RenewResponse renewed;
  EXPECT_TRUE(Renew("rw", "r2", absl::Seconds(30), &renewed, Stub(2)).ok());
  EXPECT_THAT(Renew("rw", "r1", absl::Seconds(30), &renewed, Stub(1)), IsLockNotHeld());
  // A token that is no holder's frees nobody.
  s = ForceRelease("rw", r2.fencing_token() + 1000, &forced, Stub(1));
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_EQ(ErrorReason(s), "lockd/FENCING_TOKEN_MISMATCH");
  EXPECT_THAT(Owners(Describe("rw", "", Stub(0))), ElementsAre("r2"));

  // A semaphore holder's permits go to the next waiter; the others stay.
  Granted(Sem("sem", "s1", 2, 1), 0);
  v1::AcquireResponse s2 = Granted(Sem("sem", "s2", 2, 1), 1);
  auto s3 = Start(Sem("sem", "s3", 2, 1, kLong), 2);
  WaitForWaitersInAll("sem", 1);
  s = ForceRelease("sem", s2.fencing_token(), &forced, Stub(0));
  ASSERT_TRUE(s.ok()) << s.error_message();
  GrantedLater(*s3);
  EXPECT_THAT(Owners(Describe("sem", "", Stub(1))), ElementsAre("s1", "s3"));
}

// --- Release ---------------------------------------------------------------------------------

TEST_P(KindRules, ReleaseIsReleasedWhenTheCallersOwnCountReachesZero) {
  Granted(Shared("rw", "r1"), 0);
  Granted(Shared("rw", "r1"), 0);
  Granted(Shared("rw", "r2"), 1);
  v1::ReleaseResponse rel = MustRelease("rw", "r1", 2);
  EXPECT_FALSE(rel.released());
  EXPECT_EQ(rel.hold_count(), 1u);
  rel = MustRelease("rw", "r1", 1);
  EXPECT_TRUE(rel.released()) << "released must be true while another reader holds on";
  EXPECT_EQ(rel.hold_count(), 0u);
  v1::LockInfo info = Describe("rw", "", Stub(0));
  EXPECT_TRUE(info.held());
  EXPECT_THAT(Owners(info), ElementsAre("r2"));
  EXPECT_THAT(Release("rw", "r1", &rel, "", "", Stub(2)), IsLockNotHeld());

  Granted(Sem("sem", "s1", 2, 1), 0);
  Granted(Sem("sem", "s2", 2, 1), 1);
  rel = MustRelease("sem", "s1", 2);
  EXPECT_TRUE(rel.released());
  EXPECT_EQ(rel.hold_count(), 0u);
  EXPECT_THAT(Owners(Describe("sem")), ElementsAre("s2"));
}

TEST_P(KindRules, UndoWithAcquireRequestIdGivesBackASharedOrSemaphoreGrant) {
  Granted(Shared("rw", "r2"), 1);
  Acq a = Shared("rw", "r1");
  a.request_id = "acq-r1";
  Granted(a, 0);
  v1::ReleaseResponse rel;
  grpc::Status s = Undo("rw", "r1", "acq-r1", &rel, Stub(2));
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(rel.released());
  EXPECT_EQ(rel.hold_count(), 0u);
  EXPECT_THAT(Owners(Describe("rw", "", Stub(0))), ElementsAre("r2"));
  // Again: nothing changes, still OK.
  s = Undo("rw", "r1", "acq-r1", &rel, Stub(1));
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(rel.hold_count(), 0u);
  EXPECT_THAT(Owners(Describe("rw", "", Stub(0))), ElementsAre("r2"));

  Acq sa = Sem("sem", "s1", 3, 2);
  sa.request_id = "acq-s1";
  Granted(sa, 0);
  auto s2 = Start(Sem("sem", "s2", 3, 2, kLong), 1);
  WaitForWaitersInAll("sem", 1);
  s = Undo("sem", "s1", "acq-s1", &rel, Stub(2));
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(rel.released());
  GrantedLater(*s2);
  EXPECT_THAT(Owners(Describe("sem", "", Stub(0))), ElementsAre("s2"));
}

// --- Waiters that give up leave nothing behind ---------------------------------------------

// `waiter` stops waiting (by its timeout, or `cancel`), and must leave no
// hold and no waiter behind, nor block `behind`, queued after it, which must
// then be granted once `release` (if any) is released by `release_replica`.
class GiveUpRules : public KindRules {
 protected:
  void GiveUpAndCheck(PendingAcquire& waiter, bool cancel, const std::string& name) {
    if (cancel) waiter.Cancel();
    ASSERT_TRUE(waiter.Answered(kLong)) << waiter.owner() << " never answered";
    if (cancel) {
      EXPECT_THAT(waiter.status(), StatusIs(grpc::StatusCode::CANCELLED));
    } else {
      ASSERT_TRUE(waiter.status().ok()) << waiter.status().error_message();
      EXPECT_FALSE(waiter.response().acquired());
    }
    EXPECT_FALSE(HolderOf(Describe(name, "", Stub(1)), waiter.owner()).has_value());
  }
};

TEST_P(GiveUpRules, TimedOutSemaphoreWaiterUnblocksSmallerOnesBehindIt) {
  for (bool cancel : {false, true}) {
    std::string name = cancel ? "sem-cancel" : "sem-timeout";
    Granted(Sem(name, "A", 4, 3), 0);
    auto b = Start(Sem(name, "B", 4, 2, cancel ? kLong : kGiveUpAfter), 1);
    WaitForWaitersInAll(name, 1);
    auto c = Start(Sem(name, "C", 4, 1, kLong), 2);
    WaitForWaitersInAll(name, 2);
    StillWaiting(*c);
    GiveUpAndCheck(*b, cancel, name);
    GrantedLater(*c);
    v1::LockInfo info = Describe(name, "", Stub(0));
    EXPECT_THAT(Owners(info), ElementsAre("A", "C")) << name;
    EXPECT_EQ(WaitersAnywhere(name), 0u) << name;
    MustRelease(name, "A", 0);
    MustRelease(name, "C", 2);
    absl::SleepFor(kWindow);
    EXPECT_FALSE(Describe(name, "", Stub(1)).held()) << name << ": B was granted after giving up";
  }
}

TEST_P(GiveUpRules, SharedWaiterThatGivesUpLeavesNothingBehind) {
  for (bool cancel : {false, true}) {
    std::string name = cancel ? "rw-cancel" : "rw-timeout";
    Granted(Exclusive(name, "w1"), 0);
    auto r = Start(Shared(name, "r", cancel ? kLong : kGiveUpAfter), 1);
    WaitForWaitersInAll(name, 1);
    auto w2 = Start(Exclusive(name, "w2", kLong), 2);
    WaitForWaitersInAll(name, 2);
    GiveUpAndCheck(*r, cancel, name);
    WaitForWaitersInAll(name, 1);
    MustRelease(name, "w1", 0);
    GrantedLater(*w2);
    EXPECT_THAT(Owners(Describe(name, "", Stub(1))), ElementsAre("w2")) << name;
    MustRelease(name, "w2", 2);
    absl::SleepFor(kWindow);
    EXPECT_FALSE(Describe(name, "", Stub(0)).held()) << name << ": r was granted after giving up";
    EXPECT_EQ(WaitersAnywhere(name), 0u) << name;
  }
}

TEST_P(GiveUpRules, WriterThatGivesUpLetsTheReadersBehindItJoin) {
  for (bool cancel : {false, true}) {
    std::string name = cancel ? "w-cancel" : "w-timeout";
    Granted(Shared(name, "r1"), 0);
    auto w = Start(Exclusive(name, "w", cancel ? kLong : kGiveUpAfter), 1);
    WaitForWaitersInAll(name, 1);
    auto r2 = Start(Shared(name, "r2", kLong), 2);
    WaitForWaitersInAll(name, 2);
    StillWaiting(*r2);
    GiveUpAndCheck(*w, cancel, name);
    GrantedLater(*r2);
    EXPECT_THAT(Owners(Describe(name, "", Stub(0))), ElementsAre("r1", "r2")) << name;
    EXPECT_EQ(WaitersAnywhere(name), 0u) << name;
  }
}

// --- Describe and List -------------------------------------------------------------------------

TEST_P(KindRules, DescribeAndListShowModeLimitHoldersAndWaitersOfEveryMode) {
  v1::AcquireResponse r1 = Granted(Shared("dl/rw", "r1", absl::ZeroDuration(), kLong), 0);
  v1::AcquireResponse r2 = Granted(Shared("dl/rw", "r2", absl::ZeroDuration(), kLong), 1);
  Granted(Shared("dl/rw", "r1"), 2);  // r1 holds twice
  auto w = Start(Exclusive("dl/rw", "w", kLong), 0);
  WaitForWaitersInAll("dl/rw", 1);
  auto r3 = Start(Shared("dl/rw", "r3", kLong), 0);
  WaitForWaitersInAll("dl/rw", 2);
  v1::AcquireResponse s1 = Granted(Sem("dl/sem", "s1", 5, 2), 1);
  v1::AcquireResponse s2 = Granted(Sem("dl/sem", "s2", 5, 3), 2);
  auto s3 = Start(Sem("dl/sem", "s3", 5, 1, kLong), 0);
  WaitForWaitersInAll("dl/sem", 1);
  v1::AcquireResponse x = Granted(Exclusive("dl/x", "x"), 1);

  auto check_rw = [&](const v1::LockInfo& info) {
    EXPECT_TRUE(info.held());
    EXPECT_EQ(info.mode(), kShared);
    EXPECT_EQ(info.limit(), 0u);
    ASSERT_THAT(Owners(info), ElementsAre("r1", "r2"));
    EXPECT_EQ(info.holders(0).mode(), kShared);
    EXPECT_EQ(info.holders(0).hold_count(), 2u);
    EXPECT_EQ(info.holders(0).permits(), 0u);
    EXPECT_EQ(info.holders(0).fencing_token(), r1.fencing_token());
    EXPECT_EQ(info.holders(1).hold_count(), 1u);
    EXPECT_EQ(info.holders(1).fencing_token(), r2.fencing_token());
    for (const v1::Holder& h : info.holders()) {
      EXPECT_GT(FromProtoDuration(h.ttl_remaining()), absl::ZeroDuration()) << h.owner();
      EXPECT_LE(FromProtoDuration(h.ttl_remaining()), kLong) << h.owner();
    }
    // The single-holder fields describe the newest holder.
    EXPECT_EQ(info.owner(), "r2");
    EXPECT_EQ(info.fencing_token(), r2.fencing_token());
    EXPECT_EQ(info.hold_count(), 1u);
  };
  auto check_sem = [&](const v1::LockInfo& info) {
    EXPECT_TRUE(info.held());
    EXPECT_EQ(info.mode(), kExclusive);
    EXPECT_EQ(info.limit(), 5u);
    ASSERT_THAT(Owners(info), ElementsAre("s1", "s2"));
    EXPECT_EQ(info.holders(0).permits(), 2u);
    EXPECT_EQ(info.holders(0).fencing_token(), s1.fencing_token());
    EXPECT_EQ(info.holders(1).permits(), 3u);
    EXPECT_EQ(info.holders(1).fencing_token(), s2.fencing_token());
    EXPECT_EQ(info.owner(), "s2");
  };
  auto check_x = [&](const v1::LockInfo& info) {
    EXPECT_EQ(info.mode(), kExclusive);
    EXPECT_EQ(info.limit(), 0u);
    EXPECT_EQ(info.owner(), "x");
    ASSERT_THAT(Owners(info), ElementsAre("x"));
    EXPECT_EQ(info.holders(0).mode(), kExclusive);
    EXPECT_EQ(info.holders(0).fencing_token(), x.fencing_token());
  };
  v1::LockInfo rw = Describe("dl/rw", "", Stub(0));
  check_rw(rw);
  EXPECT_EQ(rw.waiters(), 2u) << "a waiting writer and a waiting reader";
  v1::LockInfo sem = Describe("dl/sem", "", Stub(0));
  check_sem(sem);
  EXPECT_EQ(sem.waiters(), 1u);
  check_x(Describe("dl/x", "", Stub(2)));

  v1::ListRequest req;
  req.set_prefix("dl/");
  v1::ListResponse list;
  grpc::ClientContext ctx;
  ASSERT_TRUE(Stub(1)->List(&ctx, req, &list).ok());
  ASSERT_EQ(list.locks_size(), 3);
  for (const v1::LockInfo& info : list.locks()) {
    if (info.name() == "dl/rw") {
      check_rw(info);
    } else if (info.name() == "dl/sem") {
      check_sem(info);
    } else {
      EXPECT_EQ(info.name(), "dl/x");
      check_x(info);
    }
  }
}

// --- Sessions ---------------------------------------------------------------------------------

Opening SessionOf(const std::string& owner, absl::Duration lease, bool keep = false) {
  Opening o;
  o.owner = owner;
  o.lease = lease;
  o.keep_on_disconnect = keep;
  return o;
}

// A session acquire of `a` (its owner and lease are the session's).
v1::SessionRequest SessionAcquireOf(uint64_t op_id, Acq a) {
  a.owner = "";
  a.ttl = absl::ZeroDuration();
  v1::SessionRequest req;
  req.mutable_acquire()->set_op_id(op_id);
  *req.mutable_acquire()->mutable_request() = ToRequest(a);
  return req;
}

v1::LockRef RefOf(const std::string& name, uint64_t token) {
  v1::LockRef ref;
  ref.set_name(name);
  ref.set_fencing_token(token);
  return ref;
}

class SessionKindRules : public KindRules {
 protected:
  // A session on replica `replica` that received `opened`; nullptr with a
  // failure otherwise.
  std::unique_ptr<SessionClient> OpenSession(const Opening& o, int replica,
                                             v1::SessionOpened* opened = nullptr) {
    auto s = std::make_unique<SessionClient>(Stub(replica));
    std::optional<v1::SessionOpened> got = s->Open(o, kLong);
    if (!got) {
      ADD_FAILURE() << "no opened: " << s->WaitEnd(absl::Seconds(1)).error_message();
      return nullptr;
    }
    if (opened) *opened = *got;
    return s;
  }

  // Acquires `a` through session `s`; the grant must come.
  v1::AcquireResponse GrantedIn(SessionClient& s, uint64_t op_id, const Acq& a) {
    EXPECT_TRUE(s.Send(SessionAcquireOf(op_id, a))) << "stream closed";
    std::optional<v1::SessionResult> r = s.WaitResult(op_id, kLong);
    if (!r) {
      ADD_FAILURE() << "no result for op " << op_id;
      return {};
    }
    EXPECT_EQ(r->status().code(), kOk) << r->status().message();
    EXPECT_TRUE(r->acquire().acquired()) << a.name << ": " << r->DebugString();
    return r->acquire();
  }
};

TEST_P(SessionKindRules, SharedHoldsAndPermitsAreRenewedPastTheirLeaseAndReleasedAtHalfClose) {
  constexpr absl::Duration kLease = absl::Seconds(1);
  auto s = OpenSession(SessionOf("alice", kLease), 0);
  ASSERT_NE(s, nullptr);
  uint64_t rw_token = GrantedIn(*s, 1, Shared("s-rw", "")).fencing_token();
  uint64_t sem_token = GrantedIn(*s, 2, Sem("s-sem", "", 3, 2)).fencing_token();
  Granted(Shared("s-rw", "bob"), 1);
  Granted(Sem("s-sem", "bob", 3, 1), 2);
  absl::SleepFor(3 * kLease);  // time passing is the point here
  v1::LockInfo rw = Describe("s-rw", "", Stub(1));
  EXPECT_THAT(Owners(rw), ElementsAre("alice", "bob")) << "the shared hold was not renewed";
  std::optional<v1::Holder> alice = HolderOf(rw, "alice");
  if (alice) {
    EXPECT_EQ(alice->fencing_token(), rw_token);
    EXPECT_EQ(alice->mode(), kShared);
  }
  v1::LockInfo sem = Describe("s-sem", "", Stub(2));
  EXPECT_THAT(Owners(sem), ElementsAre("alice", "bob")) << "the permits were not renewed";
  alice = HolderOf(sem, "alice");
  if (alice) {
    EXPECT_EQ(alice->fencing_token(), sem_token);
    EXPECT_EQ(alice->permits(), 2u);
  }
  EXPECT_EQ(s->LostCount(), 0);
  grpc::Status end = s->HalfCloseAndFinish(kLong);
  EXPECT_TRUE(end.ok()) << end.error_message();
  EXPECT_THAT(Owners(Describe("s-rw", "", Stub(1))), ElementsAre("bob"));
  EXPECT_THAT(Owners(Describe("s-sem", "", Stub(2))), ElementsAre("bob"));
}

TEST_P(SessionKindRules, ResumeTakesSharedHoldsAndPermitsOver) {
  constexpr absl::Duration kFirstLease = absl::Seconds(2);
  constexpr absl::Duration kLease = absl::Seconds(1);
  auto s1 = OpenSession(SessionOf("carol", kFirstLease, /*keep=*/true), 0);
  ASSERT_NE(s1, nullptr);
  uint64_t rw_token = GrantedIn(*s1, 1, Shared("h-rw", "")).fencing_token();
  uint64_t sem_token = GrantedIn(*s1, 2, Sem("h-sem", "", 3, 2)).fencing_token();
  // Newer holders beside carol's: hers is not the newest.
  Granted(Shared("h-rw", "dave"), 2);
  Granted(Sem("h-sem", "dave", 3, 1), 2);
  absl::Time broken = absl::Now();
  s1->Break();
  absl::SleepFor(kWindow);
  EXPECT_TRUE(HolderOf(Describe("h-rw", "", Stub(1)), "carol").has_value())
      << "a keep_on_disconnect hold was released when the stream broke";

  Opening second = SessionOf("carol", kLease);
  second.resume.push_back(RefOf("h-rw", rw_token));
  second.resume.push_back(RefOf("h-sem", sem_token));
  v1::SessionOpened opened;
  auto s2 = OpenSession(second, 1, &opened);
  ASSERT_NE(s2, nullptr);
  std::vector<std::string> resumed;
  for (const v1::LockInfo& info : opened.resumed()) resumed.push_back(info.name());
  EXPECT_THAT(resumed, UnorderedElementsAre("h-rw", "h-sem")) << opened.DebugString();

  absl::SleepFor(
      std::max(broken + kFirstLease + absl::Milliseconds(500) - absl::Now(), 3 * kLease));
  v1::LockInfo rw = Describe("h-rw", "", Stub(0));
  EXPECT_THAT(Owners(rw), ElementsAre("carol", "dave")) << "the resumed hold was not renewed";
  v1::LockInfo sem = Describe("h-sem", "", Stub(0));
  EXPECT_THAT(Owners(sem), ElementsAre("carol", "dave")) << "the resumed permits were not renewed";
  std::optional<v1::Holder> carol = HolderOf(sem, "carol");
  if (carol) {
    EXPECT_EQ(carol->fencing_token(), sem_token);
    EXPECT_EQ(carol->permits(), 2u);
  }
  EXPECT_EQ(s2->LostCount(), 0);
  EXPECT_TRUE(s2->HalfCloseAndFinish(kLong).ok());
  EXPECT_THAT(Owners(Describe("h-rw", "", Stub(2))), ElementsAre("dave"));
  EXPECT_THAT(Owners(Describe("h-sem", "", Stub(2))), ElementsAre("dave"));
}

INSTANTIATE_TEST_SUITE_P(Backends, KindRules, ::testing::ValuesIn(ReplicaCountsOfEnv()),
                         ReplicaCountName);
INSTANTIATE_TEST_SUITE_P(Backends, GiveUpRules, ::testing::ValuesIn(ReplicaCountsOfEnv()),
                         ReplicaCountName);
INSTANTIATE_TEST_SUITE_P(Backends, SessionKindRules, ::testing::ValuesIn(ReplicaCountsOfEnv()),
                         ReplicaCountName);

}  // namespace
}  // namespace lockd::testing
