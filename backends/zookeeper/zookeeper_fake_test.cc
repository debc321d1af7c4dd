// The ZooKeeper backend's parts against the in-memory FakeZooKeeper: what a
// live server cannot be made to do on demand (a lost create reply, a session
// expiring mid-wait) and what it cannot count (watch events, listings).

#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backends/common/errors.h"
#include "backends/zookeeper/fake_zookeeper.h"
#include "backends/zookeeper/zookeeper_backend_internal.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockd {
namespace {

using ::testing::SizeIs;

// A pending backend call.
template <typename T>
class Pending {
 public:
  Callback<T> callback() {
    return [this](absl::StatusOr<T> r) { promise_.set_value(std::move(r)); };
  }
  absl::StatusOr<T> Get() {
    if (future_.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      return absl::DeadlineExceededError("no answer in 10 s");
    }
    return future_.get();
  }
  bool ready() { return future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }

 private:
  std::promise<absl::StatusOr<T>> promise_;
  std::future<absl::StatusOr<T>> future_ = promise_.get_future();
};

AcquireParams Params(const std::string& owner, absl::Duration wait) {
  AcquireParams p;
  p.key = LockKey{"ns", "lock"};
  p.owner = owner;
  p.ttl = absl::Seconds(30);
  p.wait = wait;
  return p;
}

AcquireParams ParamsFor(const std::string& name, const std::string& owner) {
  AcquireParams p = Params(owner, absl::ZeroDuration());
  p.key.name = name;
  return p;
}

class ZooKeeperFakeTest : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> NewReplica(size_t max_waiters = 1000) {
    ZooKeeperOptions o;
    o.hosts = "fake:2181";
    o.root = "/t";
    o.max_waiters = max_waiters;
    o.reap_interval = absl::Seconds(60);
    o.connect_wait = absl::Seconds(5);
    absl::StatusOr<std::unique_ptr<Backend>> b = NewZooKeeperBackendOn(o, fake_.Factory());
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : nullptr;
  }

  static absl::StatusOr<AcquireResult> Acquire(Backend& b, AcquireParams p,
                                               std::shared_ptr<CancelSignal> cancel = nullptr) {
    Pending<AcquireResult> r;
    b.Acquire(std::move(p), std::move(cancel), r.callback());
    return r.Get();
  }

  static absl::StatusOr<ReleaseResult> Release(Backend& b, const std::string& owner) {
    Pending<ReleaseResult> r;
    ReleaseParams p;
    p.key = LockKey{"ns", "lock"};
    p.owner = owner;
    b.Release(std::move(p), r.callback());
    return r.Get();
  }

  static absl::StatusOr<RenewResult> Renew(Backend& b, const std::string& name,
                                           const std::string& owner) {
    Pending<RenewResult> r;
    b.Renew(RenewParams{LockKey{"ns", name}, owner, absl::Minutes(10)}, r.callback());
    return r.Get();
  }

  // RenewMany of `names` for `owner`, each to a lease of 10 minutes.
  static std::vector<absl::StatusOr<RenewResult>> RenewMany(Backend& b,
                                                            const std::vector<std::string>& names,
                                                            const std::string& owner) {
    std::vector<RenewParams> params;
    for (const std::string& n : names) {
      params.push_back(RenewParams{LockKey{"ns", n}, owner, absl::Minutes(10)});
    }
    std::promise<std::vector<absl::StatusOr<RenewResult>>> done;
    auto results = done.get_future();
    b.RenewMany(std::move(params),
                [&](std::vector<absl::StatusOr<RenewResult>> r) { done.set_value(std::move(r)); });
    if (results.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      ADD_FAILURE() << "RenewMany did not answer in 10 s";
      return {};
    }
    return results.get();
  }

  static absl::StatusOr<LockState> Describe(Backend& b, const std::string& name) {
    Pending<LockState> r;
    b.Describe(LockKey{"ns", name}, r.callback());
    return r.Get();
  }

  // Waits until `n` contender nodes are queued on the lock.
  void WaitForContenders(size_t n) {
    for (int i = 0; i < 500 && fake_.Children(kLock).size() != n; ++i) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    ASSERT_THAT(fake_.Children(kLock), SizeIs(n));
  }

  static constexpr char kLock[] = "/t/ns/lock";
  zk::FakeZooKeeper fake_;
};

TEST_F(ZooKeeperFakeTest, LostCreateReplyFindsOwnNodeByAttemptId) {
  std::unique_ptr<Backend> b = NewReplica();
  fake_.DropCreateReplies(1);
  absl::StatusOr<AcquireResult> r = Acquire(*b, Params("a", absl::ZeroDuration()));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->acquired);
  EXPECT_EQ(fake_.create_replies_to_drop(), 0) << "the fault was not exercised";
  // The node whose reply was lost is the holding: no second node.
  EXPECT_THAT(fake_.Children(kLock), SizeIs(1));
  ASSERT_TRUE(Release(*b, "a").ok());
  EXPECT_THAT(fake_.Children(kLock), SizeIs(0));
}

TEST_F(ZooKeeperFakeTest, LostCreateReplyOfWaiterLeavesNoNodeBehind) {
  std::unique_ptr<Backend> b = NewReplica();
  ASSERT_TRUE(Acquire(*b, Params("a", absl::ZeroDuration()))->acquired);
  fake_.DropCreateReplies(1);
  Pending<AcquireResult> waiter;
  b->Acquire(Params("b", absl::Seconds(10)), nullptr, waiter.callback());
  WaitForContenders(2);
  ASSERT_TRUE(Release(*b, "a").ok());
  absl::StatusOr<AcquireResult> r = waiter.Get();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->acquired);
  EXPECT_EQ(fake_.create_replies_to_drop(), 0);
  EXPECT_THAT(fake_.Children(kLock), SizeIs(1));
}

TEST_F(ZooKeeperFakeTest, LostCreateReplyOfTryOnceRefusalDeletesItsNode) {
  std::unique_ptr<Backend> b = NewReplica();
  ASSERT_TRUE(Acquire(*b, Params("a", absl::ZeroDuration()))->acquired);
  fake_.DropCreateReplies(1);
  absl::StatusOr<AcquireResult> r = Acquire(*b, Params("b", absl::ZeroDuration()));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->acquired);
  EXPECT_EQ(r->current.owner, "a");
  EXPECT_EQ(fake_.create_replies_to_drop(), 0);
  WaitForContenders(1);
}

TEST_F(ZooKeeperFakeTest, SessionExpiryDuringWaitAnswersUnavailableAndRecovers) {
  std::unique_ptr<Backend> b = NewReplica();
  ASSERT_TRUE(Acquire(*b, Params("a", absl::ZeroDuration()))->acquired);
  Pending<AcquireResult> waiter;
  b->Acquire(Params("b", absl::Seconds(30)), nullptr, waiter.callback());
  WaitForContenders(2);
  fake_.Expire(0);
  absl::StatusOr<AcquireResult> r = waiter.Get();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  // Calls answer UNAVAILABLE until a new session serves. The waiter's node
  // is deleted then; the hold outlives the session (its lease has not
  // ended), so its owner still releases it.
  WaitForContenders(1);
  absl::StatusOr<ReleaseResult> released = Release(*b, "a");
  for (int i = 0; i < 500 && released.status().code() == absl::StatusCode::kUnavailable; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
    released = Release(*b, "a");
  }
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_TRUE(released->released);
  EXPECT_TRUE(b->Health().ok()) << b->Health();
  EXPECT_THAT(fake_.Children(kLock), SizeIs(0));
  EXPECT_TRUE(Acquire(*b, Params("c", absl::ZeroDuration()))->acquired);
}

TEST_F(ZooKeeperFakeTest, PredecessorDeletedWhileWatchingWakesExactlyTheNextWaiter) {
  std::unique_ptr<Backend> holder = NewReplica();
  std::unique_ptr<Backend> other = NewReplica();
  ASSERT_TRUE(Acquire(*holder, Params("a", absl::ZeroDuration()))->acquired);
  Pending<AcquireResult> w1, w2, w3;
  other->Acquire(Params("w1", absl::Seconds(10)), nullptr, w1.callback());
  WaitForContenders(2);
  other->Acquire(Params("w2", absl::Seconds(10)), nullptr, w2.callback());
  WaitForContenders(3);
  other->Acquire(Params("w3", absl::Seconds(10)), nullptr, w3.callback());
  WaitForContenders(4);
  absl::SleepFor(absl::Milliseconds(50));  // the watches are set
  const uint64_t before = fake_.watch_events();
  ASSERT_TRUE(Release(*holder, "a").ok());
  absl::StatusOr<AcquireResult> r1 = w1.Get();
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_TRUE(r1->acquired);
  EXPECT_FALSE(w2.ready());
  // The release wakes w1 only; w1's grant, confirmed by a write of its node,
  // touches the watch of w2 (its successor) once more, and nobody else's.
  EXPECT_LE(fake_.watch_events() - before, 2u) << "a release woke more than the next waiter";
  ASSERT_TRUE(Release(*other, "w1").ok());
  EXPECT_TRUE(w2.Get()->acquired);
  ASSERT_TRUE(Release(*other, "w2").ok());
  EXPECT_TRUE(w3.Get()->acquired);
  // 2 + 2 + 1 (w3 has no successor), one less when a release comes before
  // the changed watch is set again.
  EXPECT_LE(fake_.watch_events() - before, 5u);
}

TEST_F(ZooKeeperFakeTest, DeadlineAbandonsAndDeletesTheWaitersNode) {
  std::unique_ptr<Backend> b = NewReplica();
  ASSERT_TRUE(Acquire(*b, Params("a", absl::ZeroDuration()))->acquired);
  absl::StatusOr<AcquireResult> r = Acquire(*b, Params("b", absl::Milliseconds(200)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->acquired);
  EXPECT_EQ(r->current.owner, "a");
  EXPECT_EQ(r->current.waiters, 0u);
  WaitForContenders(1);
}

TEST_F(ZooKeeperFakeTest, CancelAbandonsAndDeletesTheWaitersNode) {
  std::unique_ptr<Backend> b = NewReplica();
  ASSERT_TRUE(Acquire(*b, Params("a", absl::ZeroDuration()))->acquired);
  auto cancel = std::make_shared<CancelSignal>();
  Pending<AcquireResult> waiter;
  b->Acquire(Params("b", absl::Seconds(30)), cancel, waiter.callback());
  WaitForContenders(2);
  cancel->Cancel();
  EXPECT_EQ(waiter.Get().status().code(), absl::StatusCode::kCancelled);
  WaitForContenders(1);
}

TEST_F(ZooKeeperFakeTest, WaiterBeyondMaxWaitersIsRefusedAndLeavesNoNode) {
  std::unique_ptr<Backend> b = NewReplica(/*max_waiters=*/1);
  ASSERT_TRUE(Acquire(*b, Params("a", absl::ZeroDuration()))->acquired);
  Pending<AcquireResult> first;
  b->Acquire(Params("b", absl::Seconds(30)), nullptr, first.callback());
  WaitForContenders(2);
  absl::StatusOr<AcquireResult> r = Acquire(*b, Params("c", absl::Seconds(30)));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  WaitForContenders(2);
  ASSERT_TRUE(Release(*b, "a").ok());
  EXPECT_TRUE(first.Get()->acquired);
}

TEST_F(ZooKeeperFakeTest, ShutdownAnswersParkedWaiters) {
  std::unique_ptr<Backend> b = NewReplica();
  ASSERT_TRUE(Acquire(*b, Params("a", absl::ZeroDuration()))->acquired);
  Pending<AcquireResult> waiter;
  b->Acquire(Params("b", absl::Seconds(30)), nullptr, waiter.callback());
  WaitForContenders(2);
  b->Shutdown();
  EXPECT_FALSE(waiter.Get().ok());
  // The waiter's node is deleted; the hold stays, to its lease.
  EXPECT_THAT(fake_.Children(kLock), SizeIs(1));
  std::unique_ptr<Backend> other = NewReplica();
  absl::StatusOr<AcquireResult> c = Acquire(*other, Params("c", absl::ZeroDuration()));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->acquired);
  EXPECT_EQ(c->current.owner, "a");
}

TEST_F(ZooKeeperFakeTest, RenewManyOfKnownHoldsIsOneMultiAndExtendsEveryLease) {
  std::unique_ptr<Backend> b = NewReplica();
  const std::vector<std::string> names = {"l0", "l1", "l2", "l3"};
  std::vector<uint64_t> tokens;
  for (const std::string& n : names) {
    absl::StatusOr<AcquireResult> a = Acquire(*b, ParamsFor(n, "o"));  // a 30 s lease
    ASSERT_TRUE(a.ok() && a->acquired) << a.status();
    tokens.push_back(a->fencing_token);
  }
  const uint64_t before = fake_.multis();
  std::vector<absl::StatusOr<RenewResult>> r = RenewMany(*b, names, "o");
  ASSERT_EQ(r.size(), names.size());
  EXPECT_EQ(fake_.multis() - before, 1u);
  for (size_t i = 0; i < names.size(); ++i) {
    ASSERT_TRUE(r[i].ok()) << names[i] << ": " << r[i].status();
    EXPECT_EQ(r[i]->fencing_token, tokens[i]);
    EXPECT_EQ(r[i]->ttl, absl::Minutes(10));
    absl::StatusOr<LockState> s = Describe(*b, names[i]);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_TRUE(s->held);
    EXPECT_GT(s->ttl_remaining, absl::Minutes(9)) << names[i] << ": the lease was not extended";
  }
}

TEST_F(ZooKeeperFakeTest, RenewManyWithAHoldForceReleasedElsewhereAnswersAsRenewPerHold) {
  std::unique_ptr<Backend> b = NewReplica();
  std::unique_ptr<Backend> other = NewReplica();
  const std::vector<std::string> names = {"l0", "l1", "l2"};
  std::vector<uint64_t> tokens;
  for (const std::string& n : names) {
    absl::StatusOr<AcquireResult> a = Acquire(*b, ParamsFor(n, "o"));
    ASSERT_TRUE(a.ok() && a->acquired) << a.status();
    tokens.push_back(a->fencing_token);
  }
  // Another replica frees l1: this replica still believes "o" holds it.
  Pending<ForceReleaseResult> forced;
  other->ForceRelease(ForceReleaseParams{LockKey{"ns", "l1"}, 0}, forced.callback());
  ASSERT_TRUE(forced.Get().ok());
  const uint64_t before = fake_.multis();
  std::vector<absl::StatusOr<RenewResult>> r = RenewMany(*b, names, "o");
  ASSERT_EQ(r.size(), names.size());
  EXPECT_EQ(fake_.multis() - before, 1u) << "one multi, refused; then one renewal per hold";
  ASSERT_TRUE(r[0].ok()) << r[0].status();
  EXPECT_EQ(r[0]->fencing_token, tokens[0]);
  ASSERT_TRUE(r[2].ok()) << r[2].status();
  EXPECT_EQ(r[2]->fencing_token, tokens[2]);
  EXPECT_TRUE(IsLockNotHeld(r[1].status())) << r[1].status();
  // Exactly what Renew answers for that hold.
  absl::StatusOr<RenewResult> single = Renew(*b, "l1", "o");
  EXPECT_EQ(r[1].status(), single.status());
  for (size_t i : {0u, 2u}) {
    absl::StatusOr<LockState> s = Describe(*b, names[i]);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_GT(s->ttl_remaining, absl::Minutes(9)) << names[i] << ": the lease was not extended";
  }
}

// In an ensemble each replica's session may talk to a different server, and
// a follower can lag behind the leader. What one replica has acknowledged
// must still be what another replica reads: a client balanced across
// replicas releases through a different one than it acquired through.
TEST_F(ZooKeeperFakeTest, ReplicaOnALaggingServerSeesWhatAnotherReplicaAcknowledged) {
  std::unique_ptr<Backend> a = NewReplica();  // transport 0
  std::unique_ptr<Backend> b = NewReplica();  // transport 1, on a lagging server

  fake_.Lag(1);
  absl::StatusOr<AcquireResult> got = Acquire(*a, ParamsFor("lock", "alice"));
  ASSERT_TRUE(got.ok() && got->acquired) << got.status();
  absl::StatusOr<LockState> seen = Describe(*b, "lock");
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_TRUE(seen->held) << "Describe read the lagging server's stale tree";
  EXPECT_EQ(seen->owner, "alice");

  fake_.Lag(1);
  Pending<ListResult> listed;
  b->List(ListParams{"ns", "", 10, ""}, listed.callback());
  absl::StatusOr<ListResult> l = listed.Get();
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_THAT(l->locks, SizeIs(1)) << "List read the lagging server's stale tree";
  EXPECT_EQ(l->locks[0].owner, "alice");

  fake_.Lag(1);
  absl::StatusOr<ReleaseResult> released = Release(*b, "alice");
  EXPECT_TRUE(released.ok()) << released.status();
  EXPECT_THAT(fake_.Children(kLock), SizeIs(0));

  ASSERT_TRUE(Acquire(*a, ParamsFor("lock", "carol"))->acquired);
  fake_.Lag(1);
  Pending<ForceReleaseResult> forced;
  b->ForceRelease(ForceReleaseParams{LockKey{"ns", "lock"}, 0}, forced.callback());
  absl::StatusOr<ForceReleaseResult> f = forced.Get();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(f->released) << "ForceRelease read the lagging server's stale tree";
  EXPECT_EQ(f->previous.owner, "carol");
}

// A connect string none of whose hosts resolve yet (a ZooKeeper StatefulSet
// whose DNS records Kubernetes creates only as its pods start) does not stop
// the backend: it serves UNAVAILABLE and keeps trying until a session opens.
TEST_F(ZooKeeperFakeTest, HostsThatCannotBeUsedYetAreRetriedWhileServingUnavailable) {
  fake_.FailOpens(2);
  ZooKeeperOptions o;
  o.hosts = "fake:2181";
  o.root = "/t";
  o.connect_wait = absl::Milliseconds(100);
  absl::StatusOr<std::unique_ptr<Backend>> b = NewZooKeeperBackendOn(o, fake_.Factory());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->Health().code(), absl::StatusCode::kUnavailable) << (*b)->Health();
  EXPECT_THAT((*b)->Health().message(), ::testing::HasSubstr("zookeeper.hosts"));
  EXPECT_EQ(Acquire(**b, Params("a", absl::ZeroDuration())).status().code(),
            absl::StatusCode::kUnavailable);
  for (int i = 0; i < 100 && !(*b)->Health().ok(); ++i) absl::SleepFor(absl::Milliseconds(50));
  EXPECT_TRUE((*b)->Health().ok()) << (*b)->Health();
  absl::StatusOr<AcquireResult> r = Acquire(**b, Params("a", absl::ZeroDuration()));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->acquired);
}

// ---- Shared locks and semaphores (backend.h "Kinds")

AcquireParams Shared(const std::string& owner, absl::Duration wait) {
  AcquireParams p = Params(owner, wait);
  p.mode = LockMode::kShared;
  return p;
}

AcquireParams Permits(const std::string& owner, uint32_t permits, uint32_t limit,
                      absl::Duration wait) {
  AcquireParams p = Params(owner, wait);
  p.limit = limit;
  p.permits = permits;
  return p;
}

std::vector<std::string> OwnersOf(const LockState& s) {
  std::vector<std::string> owners;
  for (const HolderState& h : s.holders) owners.push_back(h.owner);
  return owners;
}

TEST_F(ZooKeeperFakeTest, ReadersShareAndAWaitingWriterHoldsBackLaterReaders) {
  std::unique_ptr<Backend> b = NewReplica();
  std::unique_ptr<Backend> other = NewReplica();
  absl::StatusOr<AcquireResult> r1 = Acquire(*b, Shared("r1", absl::ZeroDuration()));
  absl::StatusOr<AcquireResult> r2 = Acquire(*other, Shared("r2", absl::ZeroDuration()));
  ASSERT_TRUE(r1.ok() && r2.ok());
  ASSERT_TRUE(r1->acquired && r2->acquired);
  EXPECT_GT(r2->fencing_token, r1->fencing_token);
  Pending<AcquireResult> writer, late_reader;
  b->Acquire(Params("w", absl::Seconds(10)), nullptr, writer.callback());
  WaitForContenders(3);
  other->Acquire(Shared("r3", absl::Seconds(10)), nullptr, late_reader.callback());
  WaitForContenders(4);
  absl::StatusOr<LockState> s = Describe(*b, "lock");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->mode, LockMode::kShared);
  EXPECT_THAT(OwnersOf(*s), ::testing::ElementsAre("r1", "r2"));
  EXPECT_EQ(s->waiters, 2u);
  // One reader's release frees only its hold; the writer waits for both.
  absl::StatusOr<ReleaseResult> rel = Release(*b, "r1");
  ASSERT_TRUE(rel.ok()) << rel.status();
  EXPECT_TRUE(rel->released);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(writer.ready());
  ASSERT_TRUE(Release(*other, "r2").ok());
  absl::StatusOr<AcquireResult> w = writer.Get();
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(w->acquired);
  EXPECT_GT(w->fencing_token, r2->fencing_token);
  EXPECT_FALSE(late_reader.ready());
  ASSERT_TRUE(Release(*b, "w").ok());
  absl::StatusOr<AcquireResult> r3 = late_reader.Get();
  ASSERT_TRUE(r3.ok()) << r3.status();
  EXPECT_TRUE(r3->acquired);
  EXPECT_GT(r3->fencing_token, w->fencing_token);
}

TEST_F(ZooKeeperFakeTest, SemaphoreAdmitsWhatFitsInOrderAndWakesOnlyItsFirstWaiter) {
  std::unique_ptr<Backend> b = NewReplica();
  ASSERT_TRUE(Acquire(*b, Permits("h1", 1, 2, absl::ZeroDuration()))->acquired);
  ASSERT_TRUE(Acquire(*b, Permits("h2", 1, 2, absl::ZeroDuration()))->acquired);
  absl::StatusOr<AcquireResult> full = Acquire(*b, Permits("x", 1, 2, absl::ZeroDuration()));
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_FALSE(full->acquired);
  EXPECT_THAT(OwnersOf(full->current), ::testing::ElementsAre("h1", "h2"));
  EXPECT_EQ(full->current.limit, 2u);
  Pending<AcquireResult> big, w1, w2;
  b->Acquire(Permits("big", 2, 2, absl::Seconds(10)), nullptr, big.callback());
  WaitForContenders(3);
  b->Acquire(Permits("w1", 1, 2, absl::Seconds(10)), nullptr, w1.callback());
  WaitForContenders(4);
  b->Acquire(Permits("w2", 1, 2, absl::Seconds(10)), nullptr, w2.callback());
  WaitForContenders(5);
  absl::SleepFor(absl::Milliseconds(50));  // the watches are set
  // The second holder's exit wakes the first waiter only (it watches every
  // holder; the others watch their predecessor), and one permit free does
  // not let the small requests behind the large one barge.
  const uint64_t before = fake_.watch_events();
  ASSERT_TRUE(Release(*b, "h2").ok());
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(fake_.watch_events() - before, 1u);
  EXPECT_FALSE(big.ready());
  EXPECT_FALSE(w1.ready());
  ASSERT_TRUE(Release(*b, "h1").ok());
  absl::StatusOr<AcquireResult> g = big.Get();
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->acquired);
  EXPECT_FALSE(w1.ready());
  ASSERT_TRUE(Release(*b, "big").ok());
  EXPECT_TRUE(w1.Get()->acquired);
  EXPECT_TRUE(w2.Get()->acquired);
}

TEST_F(ZooKeeperFakeTest, KindMismatchIsAnsweredAtOnceAndLeavesNoNode) {
  std::unique_ptr<Backend> b = NewReplica();
  ASSERT_TRUE(Acquire(*b, Shared("r", absl::ZeroDuration()))->acquired);
  absl::StatusOr<AcquireResult> r = Acquire(*b, Permits("s", 1, 3, absl::Seconds(30)));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_EQ(ErrorReasonOf(r.status()), kLockKindMismatchReason);
  WaitForContenders(1);
  ASSERT_TRUE(Release(*b, "r").ok());
  ASSERT_TRUE(Acquire(*b, Permits("s", 1, 3, absl::ZeroDuration()))->acquired);
  r = Acquire(*b, Permits("t", 1, 4, absl::Seconds(30)));
  EXPECT_EQ(ErrorReasonOf(r.status()), kLockKindMismatchReason) << r.status();
  // The holder itself, with other permits.
  r = Acquire(*b, Permits("s", 2, 3, absl::ZeroDuration()));
  EXPECT_EQ(ErrorReasonOf(r.status()), kPermitsMismatchReason) << r.status();
  WaitForContenders(1);
}

TEST_F(ZooKeeperFakeTest, ReentrancyAcrossModesAndTheUpgradeRule) {
  std::unique_ptr<Backend> b = NewReplica();
  std::unique_ptr<Backend> other = NewReplica();
  absl::StatusOr<AcquireResult> x = Acquire(*b, Params("a", absl::ZeroDuration()));
  ASSERT_TRUE(x.ok() && x->acquired);
  // An exclusive holder asking shared (through another replica): reentrant.
  absl::StatusOr<AcquireResult> again = Acquire(*other, Shared("a", absl::ZeroDuration()));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->fencing_token, x->fencing_token);
  EXPECT_EQ(again->hold_count, 2u);
  ASSERT_TRUE(Release(*b, "a").ok());
  ASSERT_TRUE(Release(*b, "a").ok());
  WaitForContenders(0);
  // A lone reader upgrades: exclusive, count + 1, a larger token.
  absl::StatusOr<AcquireResult> r = Acquire(*b, Shared("a", absl::ZeroDuration()));
  ASSERT_TRUE(r.ok() && r->acquired);
  absl::StatusOr<AcquireResult> up = Acquire(*other, Params("a", absl::ZeroDuration()));
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_TRUE(up->acquired);
  EXPECT_GT(up->fencing_token, r->fencing_token);
  EXPECT_EQ(up->hold_count, 2u);
  WaitForContenders(1);
  absl::StatusOr<LockState> s = Describe(*b, "lock");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->mode, LockMode::kExclusive);
  EXPECT_EQ(s->fencing_token, up->fencing_token);
  ASSERT_TRUE(Release(*b, "a").ok());
  ASSERT_TRUE(Release(*b, "a").ok());
  // With another reader, the upgrade would block: refused, nothing changes.
  ASSERT_TRUE(Acquire(*b, Shared("a", absl::ZeroDuration()))->acquired);
  ASSERT_TRUE(Acquire(*b, Shared("c", absl::ZeroDuration()))->acquired);
  absl::StatusOr<AcquireResult> blocked = Acquire(*other, Params("a", absl::Seconds(30)));
  EXPECT_EQ(ErrorReasonOf(blocked.status()), kUpgradeWouldBlockReason) << blocked.status();
  WaitForContenders(2);
}

TEST_F(ZooKeeperFakeTest, ForceReleaseFreesEveryHolderOrTheOneWithTheToken) {
  std::unique_ptr<Backend> b = NewReplica();
  absl::StatusOr<AcquireResult> r1 = Acquire(*b, Shared("r1", absl::ZeroDuration()));
  absl::StatusOr<AcquireResult> r2 = Acquire(*b, Shared("r2", absl::ZeroDuration()));
  ASSERT_TRUE(r1.ok() && r2.ok());
  Pending<ForceReleaseResult> one;
  b->ForceRelease(ForceReleaseParams{LockKey{"ns", "lock"}, r1->fencing_token}, one.callback());
  absl::StatusOr<ForceReleaseResult> f = one.Get();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(f->released);
  EXPECT_THAT(OwnersOf(f->previous), ::testing::ElementsAre("r1", "r2"));
  absl::StatusOr<LockState> s = Describe(*b, "lock");
  ASSERT_TRUE(s.ok());
  EXPECT_THAT(OwnersOf(*s), ::testing::ElementsAre("r2"));
  EXPECT_EQ(Release(*b, "r1").status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(Acquire(*b, Shared("r3", absl::ZeroDuration()))->acquired);
  Pending<ForceReleaseResult> all;
  b->ForceRelease(ForceReleaseParams{LockKey{"ns", "lock"}, 0}, all.callback());
  ASSERT_TRUE(all.Get().ok());
  WaitForContenders(0);
}

}  // namespace
}  // namespace lockd
