// The wait engine against a scripted, in-process "try once": each attempt is
// queued for the test, which answers it (granted, held by someone, error).

#include "backends/common/wait_engine.h"

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace lockd {
namespace {

const LockKey kKey{"default", "x"};

class ScriptedStrategy final : public LockStrategy {
 public:
  struct Attempt {
    AcquireParams params;
    TryKind kind;
    absl::AnyInvocable<void(TryResult) &&> done;
  };

  void TryOnce(const AcquireParams& params, TryKind kind,
               absl::AnyInvocable<void(TryResult) &&> done) override {
    absl::MutexLock l(&mu_);
    attempts_.push_back(Attempt{params, kind, std::move(done)});
  }

  void Current(const LockKey& key, Callback<LockState> done) override {
    LockState s;
    s.key = key;
    s.held = true;
    s.owner = "holder";
    std::move(done)(s);
  }

  absl::Duration NextTry(const LockKey& key, TryKind after, const TryResult& last) override {
    absl::MutexLock l(&mu_);
    return next_try_;
  }
  bool TriesReadersTogether() const override { return together_; }
  void KeyActive(const LockKey& key) override {
    absl::MutexLock l(&mu_);
    ++active_;
  }
  void KeyIdle(const LockKey& key) override {
    absl::MutexLock l(&mu_);
    ++idle_;
  }

  // Waits (up to 5 s) until an attempt is queued and takes the oldest.
  Attempt Next() {
    absl::MutexLock l(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !attempts_.empty(); };
    EXPECT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(5)));
    if (attempts_.empty()) return Attempt{};
    Attempt a = std::move(attempts_.front());
    attempts_.pop_front();
    return a;
  }
  size_t Pending() {
    absl::MutexLock l(&mu_);
    return attempts_.size();
  }
  // Before the engine first asks (TriesReadersTogether is constant to it).
  void SetTriesReadersTogether() { together_ = true; }
  void SetNextTry(absl::Duration d) {
    absl::MutexLock l(&mu_);
    next_try_ = d;
  }
  int active() {
    absl::MutexLock l(&mu_);
    return active_;
  }
  int idle() {
    absl::MutexLock l(&mu_);
    return idle_;
  }

 private:
  absl::Mutex mu_;
  std::deque<Attempt> attempts_ ABSL_GUARDED_BY(mu_);
  absl::Duration next_try_ ABSL_GUARDED_BY(mu_) = absl::InfiniteDuration();
  int active_ ABSL_GUARDED_BY(mu_) = 0;
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool together_ = false;
};

TryResult Granted(uint64_t token) {
  AcquireResult r;
  r.acquired = true;
  r.fencing_token = token;
  r.hold_count = 1;
  r.ttl = absl::Seconds(10);
  return TryResult{r};
}

TryResult HeldBy(const std::string& owner, uint64_t token = 1) {
  AcquireResult r;
  r.current.key = kKey;
  r.current.held = true;
  r.current.owner = owner;
  r.current.fencing_token = token;
  return TryResult{r, absl::Seconds(10)};
}

// What a call asks: an exclusive lock unless said otherwise.
struct Ask {
  LockMode mode = LockMode::kExclusive;
  uint32_t limit = 0;
  uint32_t permits = 0;
};
constexpr Ask kShared{LockMode::kShared, 0, 0};
// `n` permits of a semaphore of 3.
Ask Permits(uint32_t n) { return Ask{LockMode::kExclusive, 3, n}; }

// Not granted: the name is held SHARED by `owners`, oldest first.
TryResult HeldSharedBy(const std::vector<std::string>& owners) {
  AcquireResult r;
  r.current.key = kKey;
  r.current.mode = LockMode::kShared;
  uint64_t token = 0;
  for (const std::string& o : owners) {
    HolderState h;
    h.owner = o;
    h.mode = LockMode::kShared;
    h.hold_count = 1;
    h.fencing_token = ++token;
    r.current.holders.push_back(h);
  }
  FillNewestHolder(r.current);
  return TryResult{r, absl::Seconds(10)};
}

class WaitEngineTest : public ::testing::Test {
 protected:
  struct Slot {
    absl::StatusOr<AcquireResult> result;
    absl::Notification done;
    bool Wait() { return done.WaitForNotificationWithTimeout(absl::Seconds(5)); }
  };

  Slot* Acquire(const std::string& owner, absl::Duration wait,
                std::shared_ptr<CancelSignal> cancel = nullptr, Ask ask = {}) {
    Slot* slot = &slots_.emplace_back();
    AcquireParams p;
    p.key = kKey;
    p.owner = owner;
    p.ttl = absl::Seconds(10);
    p.wait = wait;
    p.mode = ask.mode;
    p.limit = ask.limit;
    p.permits = ask.permits;
    engine_->Acquire(std::move(p), std::move(cancel), [slot](absl::StatusOr<AcquireResult> r) {
      slot->result = std::move(r);
      slot->done.Notify();
    });
    return slot;
  }

  // Acquire(owner) whose first attempt finds the lock held: parked.
  Slot* Park(const std::string& owner, absl::Duration wait = absl::Seconds(30), Ask ask = {},
             std::shared_ptr<CancelSignal> cancel = nullptr) {
    Slot* s = Acquire(owner, wait, std::move(cancel), ask);
    std::move(strategy_.Next().done)(HeldBy("holder"));
    return s;
  }

  // Declared so that the engine goes first, then the timers, then the slots.
  std::deque<Slot> slots_;
  ScriptedStrategy strategy_;
  std::unique_ptr<TimerQueue> timers_ = std::make_unique<TimerQueue>();
  std::unique_ptr<WaitEngine> engine_ =
      std::make_unique<WaitEngine>(&strategy_, timers_.get(), /*max_waiters=*/3);

  ~WaitEngineTest() override {
    engine_->Shutdown();
    // Answer attempts still out so that no callback is left dangling.
    while (strategy_.Pending() > 0)
      std::move(strategy_.Next().done)(TryResult{ShuttingDownError()});
    timers_.reset();
  }
};

TEST_F(WaitEngineTest, FirstAttemptGrantedAnswersAtOnce) {
  Slot* s = Acquire("a", absl::Seconds(1));
  ScriptedStrategy::Attempt a = strategy_.Next();
  EXPECT_EQ(a.kind, TryKind::kFirst);
  std::move(a.done)(Granted(7));
  ASSERT_TRUE(s->Wait());
  ASSERT_TRUE(s->result.ok());
  EXPECT_TRUE(s->result->acquired);
  EXPECT_EQ(s->result->fencing_token, 7u);
  EXPECT_EQ(strategy_.active(), 0);
}

TEST_F(WaitEngineTest, TryOnceCallDoesNotWait) {
  Slot* s = Acquire("a", absl::ZeroDuration());
  std::move(strategy_.Next().done)(HeldBy("holder"));
  ASSERT_TRUE(s->Wait());
  ASSERT_TRUE(s->result.ok());
  EXPECT_FALSE(s->result->acquired);
  EXPECT_EQ(s->result->current.owner, "holder");
  EXPECT_EQ(s->result->current.waiters, 0u);
}

TEST_F(WaitEngineTest, ParkedCallIsGrantedOnWake) {
  Slot* s = Park("a");
  EXPECT_EQ(strategy_.active(), 1);
  EXPECT_EQ(engine_->Waiting(kKey), 1u);
  EXPECT_EQ(strategy_.Pending(), 0u);
  engine_->Wake(kKey);
  ScriptedStrategy::Attempt a = strategy_.Next();
  EXPECT_EQ(a.kind, TryKind::kHead);
  EXPECT_EQ(a.params.owner, "a");
  EXPECT_EQ(engine_->Waiting(kKey), 1u);  // in flight counts
  std::move(a.done)(Granted(2));
  ASSERT_TRUE(s->Wait());
  EXPECT_TRUE(s->result->acquired);
  EXPECT_EQ(engine_->Waiting(kKey), 0u);
  EXPECT_EQ(strategy_.idle(), 1);
}

TEST_F(WaitEngineTest, WakesDuringAnAttemptCoalesceIntoOneRetryOfTheSameHead) {
  Slot* a = Park("a");
  Slot* b = Park("b");
  engine_->Wake(kKey);
  ScriptedStrategy::Attempt first = strategy_.Next();
  engine_->Wake(kKey);
  engine_->Wake(kKey);
  engine_->Wake(kKey);
  EXPECT_EQ(strategy_.Pending(), 0u);  // one attempt in flight per lock
  std::move(first.done)(HeldBy("holder"));
  // Lost, and wakes came meanwhile: the same head (back at the front) tries
  // once more, at once.
  ScriptedStrategy::Attempt second = strategy_.Next();
  EXPECT_EQ(second.params.owner, "a");
  EXPECT_EQ(second.kind, TryKind::kHead);
  std::move(second.done)(HeldBy("holder"));
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(strategy_.Pending(), 0u);
  EXPECT_FALSE(a->done.HasBeenNotified());
  EXPECT_FALSE(b->done.HasBeenNotified());
  EXPECT_EQ(engine_->Waiting(kKey), 2u);
}

TEST_F(WaitEngineTest, NewcomerBehindWaitersMayOnlyReenter) {
  Park("a");
  Acquire("b", absl::Seconds(30));
  EXPECT_EQ(strategy_.Next().kind, TryKind::kBehind);
  // Nor may a call that only tries: it does not pass them either.
  Acquire("c", absl::ZeroDuration());
  EXPECT_EQ(strategy_.Next().kind, TryKind::kBehind);
}

TEST_F(WaitEngineTest, CallThatOnlyTriesIsAFirstCallWhenNobodyWaits) {
  Acquire("c", absl::ZeroDuration());
  EXPECT_EQ(strategy_.Next().kind, TryKind::kFirst);
}

TEST_F(WaitEngineTest, CallWhoseFirstAttemptIsInFlightIsAheadOfLaterCalls) {
  // A backend with its queue on the server enqueues "a" with its first
  // attempt: "b", arriving before "a" parks, must not be tried as a first
  // call, and "a" keeps its place even though "b"'s attempt comes back first.
  Slot* a = Acquire("a", absl::Seconds(30));
  ScriptedStrategy::Attempt first_a = strategy_.Next();
  EXPECT_EQ(first_a.kind, TryKind::kFirst);
  Slot* b = Acquire("b", absl::Seconds(30));
  ScriptedStrategy::Attempt first_b = strategy_.Next();
  EXPECT_EQ(first_b.kind, TryKind::kBehind);
  std::move(first_b.done)(HeldBy("holder"));
  // No head starts while "a" is out, even when woken: the wake is kept.
  engine_->Wake(kKey);
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(strategy_.Pending(), 0u);
  std::move(first_a.done)(HeldBy("holder"));
  ScriptedStrategy::Attempt head = strategy_.Next();
  EXPECT_EQ(head.kind, TryKind::kHead);
  EXPECT_EQ(head.params.owner, "a");
  std::move(head.done)(Granted(2));
  ASSERT_TRUE(a->Wait());
  EXPECT_TRUE(a->result->acquired);
  EXPECT_FALSE(b->done.HasBeenNotified());
  EXPECT_EQ(engine_->Waiting(kKey), 1u);
}

TEST_F(WaitEngineTest, FirstGrantWithACallParkedBehindLetsTheOwnersOtherCallsReenter) {
  Slot* a = Acquire("a", absl::Seconds(30));
  ScriptedStrategy::Attempt first_a = strategy_.Next();
  Slot* a2 = Acquire("a", absl::Seconds(30));
  ScriptedStrategy::Attempt behind = strategy_.Next();
  EXPECT_EQ(behind.kind, TryKind::kBehind);
  std::move(behind.done)(HeldBy("holder"));
  std::move(first_a.done)(Granted(3));
  ASSERT_TRUE(a->Wait());
  // "a" holds now: its parked call re-enters at once.
  ScriptedStrategy::Attempt reentry = strategy_.Next();
  EXPECT_EQ(reentry.kind, TryKind::kReentrant);
  EXPECT_EQ(reentry.params.owner, "a");
  std::move(reentry.done)(Granted(3));
  ASSERT_TRUE(a2->Wait());
  EXPECT_TRUE(a2->result->acquired);
}

TEST_F(WaitEngineTest, NextTryArmsARetryWithoutWake) {
  strategy_.SetNextTry(absl::Milliseconds(20));
  Slot* s = Park("a");
  ScriptedStrategy::Attempt a = strategy_.Next();
  EXPECT_EQ(a.kind, TryKind::kHead);
  std::move(a.done)(Granted(3));
  ASSERT_TRUE(s->Wait());
  EXPECT_TRUE(s->result->acquired);
}

TEST_F(WaitEngineTest, DeadlineEndsTheWaitWithTheLocksState) {
  Slot* s = Park("a", absl::Milliseconds(30));
  ASSERT_TRUE(s->Wait());
  ASSERT_TRUE(s->result.ok());
  EXPECT_FALSE(s->result->acquired);
  EXPECT_EQ(s->result->current.owner, "holder");
  EXPECT_EQ(engine_->Waiting(kKey), 0u);
  EXPECT_EQ(strategy_.idle(), 1);
}

TEST_F(WaitEngineTest, CancelEndsTheWait) {
  auto cancel = std::make_shared<CancelSignal>();
  Slot* s = Acquire("a", absl::Seconds(30), cancel);
  std::move(strategy_.Next().done)(HeldBy("holder"));
  cancel->Cancel();
  ASSERT_TRUE(s->Wait());
  EXPECT_EQ(s->result.status().code(), absl::StatusCode::kCancelled);
}

TEST_F(WaitEngineTest, AlreadyCancelledCallIsNotParked) {
  auto cancel = std::make_shared<CancelSignal>();
  Slot* s = Acquire("a", absl::Seconds(30), cancel);
  ScriptedStrategy::Attempt first = strategy_.Next();
  cancel->Cancel();  // while its first attempt is out
  std::move(first.done)(HeldBy("holder"));
  ASSERT_TRUE(s->Wait());
  EXPECT_EQ(s->result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(engine_->Waiting(kKey), 0u);
  EXPECT_EQ(strategy_.idle(), 1);
}

// The deadline of a call whose attempt is in flight waits for that attempt:
// a grant is still delivered; a loss ends the wait then.
TEST_F(WaitEngineTest, DeadlineDuringAnAttemptWaitsForItsResult) {
  Slot* a = Park("a", absl::Milliseconds(200));
  ASSERT_EQ(engine_->Waiting(kKey), 1u);
  engine_->Wake(kKey);
  ScriptedStrategy::Attempt head = strategy_.Next();
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(a->done.HasBeenNotified());
  std::move(head.done)(Granted(5));
  ASSERT_TRUE(a->Wait());
  ASSERT_TRUE(a->result.ok());
  EXPECT_TRUE(a->result->acquired);

  Slot* b = Park("b", absl::Milliseconds(200));
  ASSERT_EQ(engine_->Waiting(kKey), 1u);
  engine_->Wake(kKey);
  head = strategy_.Next();
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(b->done.HasBeenNotified());
  std::move(head.done)(HeldBy("holder"));
  ASSERT_TRUE(b->Wait());
  ASSERT_TRUE(b->result.ok());
  EXPECT_FALSE(b->result->acquired);
  EXPECT_EQ(b->result->current.owner, "holder");
  EXPECT_EQ(engine_->Waiting(kKey), 0u);
}

TEST_F(WaitEngineTest, CapacityCountsParkedAndInFlightCalls) {
  Park("a");
  Park("b");
  engine_->Wake(kKey);  // "a" is in flight, out of the table
  ScriptedStrategy::Attempt head = strategy_.Next();
  Park("c");
  Slot* d = Park("d");
  ASSERT_TRUE(d->Wait());
  EXPECT_EQ(d->result.status().code(), absl::StatusCode::kResourceExhausted);
  // A head that lost always goes back, whatever the count.
  std::move(head.done)(HeldBy("holder"));
  EXPECT_EQ(engine_->Waiting(kKey), 3u);
}

TEST_F(WaitEngineTest, AnsweredCallsGiveTheirCapacityBack) {
  Slot* a = Park("a");
  Park("b");
  Park("c");
  Slot* refused = Park("d");
  ASSERT_TRUE(refused->Wait());
  EXPECT_EQ(refused->result.status().code(), absl::StatusCode::kResourceExhausted);
  engine_->Wake(kKey);
  std::move(strategy_.Next().done)(Granted(4));
  ASSERT_TRUE(a->Wait());
  ASSERT_TRUE(a->result.ok());
  EXPECT_TRUE(a->result->acquired);
  Slot* e = Park("e");  // a's place is free again
  EXPECT_FALSE(e->done.HasBeenNotified());
  EXPECT_EQ(engine_->Waiting(kKey), 3u);
}

TEST_F(WaitEngineTest, UnavailableAttemptKeepsWaitingOtherErrorsEnd) {
  Slot* a = Park("a");
  Slot* b = Park("b");
  engine_->Wake(kKey);
  std::move(strategy_.Next().done)(TryResult{absl::UnavailableError("down")});
  EXPECT_FALSE(a->done.HasBeenNotified());
  engine_->Wake(kKey);
  ScriptedStrategy::Attempt again = strategy_.Next();
  EXPECT_EQ(again.params.owner, "a");
  std::move(again.done)(TryResult{absl::InternalError("bad reply")});
  ASSERT_TRUE(a->Wait());
  EXPECT_EQ(a->result.status().code(), absl::StatusCode::kInternal);
  EXPECT_FALSE(b->done.HasBeenNotified());
}

TEST_F(WaitEngineTest, ParkedCallOfTheHolderIsGrantedAsReentrant) {
  Slot* a = Park("a");
  Slot* o = Park("o");
  engine_->Wake(kKey);
  ScriptedStrategy::Attempt head = strategy_.Next();
  EXPECT_EQ(head.params.owner, "a");
  std::move(head.done)(HeldBy("o", 5));  // "o" came to hold the lock elsewhere
  ScriptedStrategy::Attempt re = strategy_.Next();
  EXPECT_EQ(re.kind, TryKind::kReentrant);
  EXPECT_EQ(re.params.owner, "o");
  AcquireResult r;
  r.acquired = true;
  r.hold_count = 2;
  r.fencing_token = 5;
  std::move(re.done)(TryResult{r});
  ASSERT_TRUE(o->Wait());
  EXPECT_EQ(o->result->hold_count, 2u);
  EXPECT_FALSE(a->done.HasBeenNotified());
}

TEST_F(WaitEngineTest, OwnerHoldsGrantsItsParkedCalls) {
  Park("a");
  Slot* o = Park("o");
  engine_->OwnerHolds(kKey, "o", 9);
  ScriptedStrategy::Attempt re = strategy_.Next();
  EXPECT_EQ(re.kind, TryKind::kReentrant);
  std::move(re.done)(Granted(9));
  ASSERT_TRUE(o->Wait());
  EXPECT_TRUE(o->result->acquired);
  // A release of an older holding is stale news now.
  engine_->Wake(kKey, 8);
  EXPECT_EQ(strategy_.Pending(), 0u);
  engine_->Wake(kKey, 9);
  EXPECT_EQ(strategy_.Next().params.owner, "a");
}

TEST_F(WaitEngineTest, BackendMayRunTheHeadsAttemptItself) {
  Slot* a = Park("a");
  std::optional<WaitEngine::Head> head = engine_->TakeHead(kKey);
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->params().owner, "a");
  EXPECT_FALSE(engine_->TakeHead(kKey).has_value());  // one at a time
  engine_->Wake(kKey);                                // coalesced
  engine_->FinishHead(*std::move(head), HeldBy("holder"));
  ScriptedStrategy::Attempt again = strategy_.Next();
  std::move(again.done)(Granted(4));
  ASSERT_TRUE(a->Wait());
  EXPECT_TRUE(a->result->acquired);
}

// A grant's lease_start is when the attempt that granted it started, not
// when the call came: the lease of a call that waited runs from its grant.
TEST_F(WaitEngineTest, AGrantsLeaseStartIsWhenItsAttemptStarted) {
  const absl::Time called = absl::Now();
  Slot* a = Park("a");
  absl::SleepFor(absl::Milliseconds(20));
  const absl::Time before_wake = absl::Now();
  engine_->Wake(kKey);
  ScriptedStrategy::Attempt attempt = strategy_.Next();
  const absl::Time tried = absl::Now();
  absl::SleepFor(absl::Milliseconds(20));
  std::move(attempt.done)(Granted(2));
  ASSERT_TRUE(a->Wait());
  ASSERT_TRUE(a->result.ok() && a->result->acquired);
  EXPECT_GT(a->result->lease_start, called + absl::Milliseconds(20));
  EXPECT_GE(a->result->lease_start, before_wake);
  EXPECT_LE(a->result->lease_start, tried);

  // An attempt the backend makes itself starts when it takes the head.
  Slot* b = Park("b");
  const absl::Time before_take = absl::Now();
  std::optional<WaitEngine::Head> head = engine_->TakeHead(kKey);
  const absl::Time taken = absl::Now();
  ASSERT_TRUE(head.has_value());
  absl::SleepFor(absl::Milliseconds(20));
  engine_->FinishHead(*std::move(head), Granted(3));
  ASSERT_TRUE(b->Wait());
  ASSERT_TRUE(b->result.ok() && b->result->acquired);
  EXPECT_GE(b->result->lease_start, before_take);
  EXPECT_LE(b->result->lease_start, taken);
}

TEST_F(WaitEngineTest, ShutdownDrainsParkedCallsAndKeepsGrantsInFlight) {
  Slot* a = Park("a");
  Slot* b = Park("b");
  engine_->Wake(kKey);
  ScriptedStrategy::Attempt head = strategy_.Next();
  engine_->Shutdown();
  ASSERT_TRUE(b->Wait());
  EXPECT_EQ(b->result.status().code(), absl::StatusCode::kUnavailable);
  std::move(head.done)(Granted(6));
  ASSERT_TRUE(a->Wait());
  EXPECT_TRUE(a->result->acquired);
  Slot* c = Acquire("c", absl::Seconds(1));
  ASSERT_TRUE(c->Wait());
  EXPECT_EQ(c->result.status().code(), absl::StatusCode::kUnavailable);
}

// SHARED heads are granted together: each grant lets the next SHARED call
// try at once, without a wake; an EXCLUSIVE call behind them keeps waiting.
TEST_F(WaitEngineTest, SharedHeadsAreTriedOneAfterTheOtherWithoutAWake) {
  Slot* r1 = Park("r1", absl::Seconds(30), kShared);
  Slot* r2 = Park("r2", absl::Seconds(30), kShared);
  Slot* w = Park("w");
  engine_->Wake(kKey);
  ScriptedStrategy::Attempt a = strategy_.Next();
  EXPECT_EQ(a.params.owner, "r1");
  std::move(a.done)(Granted(2));
  ScriptedStrategy::Attempt b = strategy_.Next();
  EXPECT_EQ(b.params.owner, "r2");
  EXPECT_EQ(b.kind, TryKind::kHead);
  std::move(b.done)(Granted(3));
  ASSERT_TRUE(r1->Wait());
  ASSERT_TRUE(r2->Wait());
  EXPECT_TRUE(r2->result->acquired);
  // The writer is next: it waits for a wake.
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(strategy_.Pending(), 0u);
  EXPECT_FALSE(w->done.HasBeenNotified());
  EXPECT_EQ(engine_->Waiting(kKey), 1u);
}

// With TriesReadersTogether, the whole run of SHARED calls after a SHARED
// grant tries at once (kJoin). A joiner that loses parks again in its
// place, and no head starts until every joiner is back (a wake is kept).
// (The fixture admits 3 waiters; a writer behind the run waits as in
// SharedHeadsAreTriedOneAfterTheOtherWithoutAWake.)
TEST_F(WaitEngineTest, ReadersAfterASharedGrantTryTogetherWhenTheStrategyAsks) {
  strategy_.SetTriesReadersTogether();
  Park("r1", absl::Seconds(30), kShared);
  Slot* r2 = Park("r2", absl::Seconds(30), kShared);
  Slot* r3 = Park("r3", absl::Seconds(30), kShared);
  engine_->Wake(kKey);
  ScriptedStrategy::Attempt a = strategy_.Next();
  EXPECT_EQ(a.params.owner, "r1");
  EXPECT_EQ(a.kind, TryKind::kHead);
  std::move(a.done)(Granted(2));
  ScriptedStrategy::Attempt b = strategy_.Next();
  ScriptedStrategy::Attempt c = strategy_.Next();
  EXPECT_EQ(b.params.owner, "r2");
  EXPECT_EQ(c.params.owner, "r3");
  EXPECT_EQ(b.kind, TryKind::kJoin);
  EXPECT_EQ(c.kind, TryKind::kJoin);
  EXPECT_EQ(engine_->Waiting(kKey), 2u);
  // A newcomer while they try stays behind them.
  Slot* r4 = Acquire("r4", absl::Seconds(30), nullptr, kShared);
  ScriptedStrategy::Attempt n = strategy_.Next();
  EXPECT_EQ(n.kind, TryKind::kBehind);
  std::move(n.done)(HeldBy("other"));
  engine_->Wake(kKey);
  std::move(c.done)(Granted(3));
  ASSERT_TRUE(r3->Wait());
  EXPECT_TRUE(r3->result->acquired);
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(strategy_.Pending(), 0u) << "a head started while a joiner was in flight";
  std::move(b.done)(HeldBy("other"));
  ScriptedStrategy::Attempt d = strategy_.Next();
  EXPECT_EQ(d.params.owner, "r2") << "the joiner that lost is back ahead of the newcomer";
  EXPECT_EQ(d.kind, TryKind::kHead);
  std::move(d.done)(HeldBy("other"));
  EXPECT_FALSE(r2->done.HasBeenNotified());
  EXPECT_FALSE(r4->done.HasBeenNotified());
  EXPECT_EQ(engine_->Waiting(kKey), 2u);
}

TEST_F(WaitEngineTest, AnExclusiveGrantDoesNotTryTheNextHead) {
  Slot* w = Park("w");
  Park("r", absl::Seconds(30), kShared);
  engine_->Wake(kKey);
  std::move(strategy_.Next().done)(Granted(2));
  ASSERT_TRUE(w->Wait());
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(strategy_.Pending(), 0u);
  EXPECT_EQ(engine_->Waiting(kKey), 1u);
}

// Semaphore heads are tried while their permits fit; the first that does not
// fit waits at the front, and nobody behind it passes it.
TEST_F(WaitEngineTest, SemaphoreHeadsAreTriedUntilOneDoesNotFit) {
  Slot* s1 = Park("s1", absl::Seconds(30), Permits(2));
  Slot* s2 = Park("s2", absl::Seconds(30), Permits(2));
  Slot* s3 = Park("s3", absl::Seconds(30), Permits(1));
  engine_->Wake(kKey);
  std::move(strategy_.Next().done)(Granted(2));
  ScriptedStrategy::Attempt b = strategy_.Next();
  EXPECT_EQ(b.params.owner, "s2");
  EXPECT_EQ(b.kind, TryKind::kHead);
  std::move(b.done)(HeldBy("s1", 2));  // 2 of 3 permits held: 2 more do not fit
  ASSERT_TRUE(s1->Wait());
  EXPECT_TRUE(s1->result->acquired);
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(strategy_.Pending(), 0u);  // s3's one permit would fit, but s2 is ahead
  EXPECT_FALSE(s2->done.HasBeenNotified());
  EXPECT_FALSE(s3->done.HasBeenNotified());
  // A release makes room: s2 is the head again.
  engine_->Wake(kKey);
  EXPECT_EQ(strategy_.Next().params.owner, "s2");
}

// An owner holding SHARED whose parked EXCLUSIVE call would be an upgrade:
// refused at once (it waited), while its parked SHARED call re-enters.
TEST_F(WaitEngineTest, ParkedExclusiveCallOfASharedHolderIsRefusedAsAnUpgrade) {
  Park("a");
  Slot* up = Park("o");
  Slot* again = Park("o", absl::Seconds(30), kShared);
  engine_->Wake(kKey);
  std::move(strategy_.Next().done)(HeldSharedBy({"p", "o"}));
  ASSERT_TRUE(up->Wait());
  EXPECT_EQ(up->result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ErrorReasonOf(up->result.status()), kUpgradeWouldBlockReason);
  ScriptedStrategy::Attempt re = strategy_.Next();
  EXPECT_EQ(re.kind, TryKind::kReentrant);
  EXPECT_EQ(re.params.mode, LockMode::kShared);
  std::move(re.done)(Granted(2));
  ASSERT_TRUE(again->Wait());
  EXPECT_TRUE(again->result->acquired);
  EXPECT_EQ(engine_->Waiting(kKey), 1u);  // "a"
}

TEST_F(WaitEngineTest, OwnerHoldsSharedRefusesItsExclusiveCalls) {
  Slot* up = Park("o");
  engine_->OwnerHolds(kKey, "o", 4, LockMode::kShared);
  ASSERT_TRUE(up->Wait());
  EXPECT_EQ(ErrorReasonOf(up->result.status()), kUpgradeWouldBlockReason);
  EXPECT_EQ(strategy_.Pending(), 0u);
}

TEST_F(WaitEngineTest, ParkedSharedCallOfAnExclusiveHolderReenters) {
  Slot* r = Park("o", absl::Seconds(30), kShared);
  engine_->OwnerHolds(kKey, "o", 4, LockMode::kExclusive);
  ScriptedStrategy::Attempt re = strategy_.Next();
  EXPECT_EQ(re.kind, TryKind::kReentrant);
  EXPECT_EQ(re.params.mode, LockMode::kShared);
  std::move(re.done)(Granted(4));
  ASSERT_TRUE(r->Wait());
  EXPECT_TRUE(r->result->acquired);
}

// A SHARED grant with hold count 1 is a new SHARED hold: the owner's parked
// EXCLUSIVE call is an upgrade. With a larger count the grant may have
// re-entered an EXCLUSIVE hold: that call stays parked for its own attempt.
TEST_F(WaitEngineTest, ASharedGrantRefusesTheOwnersUpgradesOnlyWhenItsModeIsKnown) {
  Slot* r = Park("o", absl::Seconds(30), kShared);
  Slot* up = Park("o");
  engine_->Wake(kKey);
  std::move(strategy_.Next().done)(Granted(2));
  ASSERT_TRUE(r->Wait());
  ASSERT_TRUE(up->Wait());
  EXPECT_EQ(ErrorReasonOf(up->result.status()), kUpgradeWouldBlockReason);

  Slot* r2 = Park("q", absl::Seconds(30), kShared);
  Slot* maybe = Park("q");
  engine_->Wake(kKey);
  TryResult reentered = Granted(3);
  reentered.result->hold_count = 2;
  std::move(strategy_.Next().done)(std::move(reentered));
  ASSERT_TRUE(r2->Wait());
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(maybe->done.HasBeenNotified());
  EXPECT_EQ(engine_->Waiting(kKey), 1u);
}

// A cancelled or timed-out EXCLUSIVE call at the front lets the SHARED calls
// behind it try at once: they may join the SHARED holders, and no release
// would wake them.
TEST_F(WaitEngineTest, CancelledExclusiveHeadLetsTheSharedCallsBehindItTry) {
  auto cancel = std::make_shared<CancelSignal>();
  Slot* w = Park("w", absl::Seconds(30), {}, cancel);
  Slot* r = Park("r", absl::Seconds(30), kShared);
  EXPECT_EQ(strategy_.Pending(), 0u);
  cancel->Cancel();
  ASSERT_TRUE(w->Wait());
  EXPECT_EQ(w->result.status().code(), absl::StatusCode::kCancelled);
  ScriptedStrategy::Attempt a = strategy_.Next();
  EXPECT_EQ(a.params.owner, "r");
  EXPECT_EQ(a.kind, TryKind::kHead);
  std::move(a.done)(Granted(5));
  ASSERT_TRUE(r->Wait());
  EXPECT_TRUE(r->result->acquired);
  EXPECT_EQ(engine_->Waiting(kKey), 0u);
}

TEST_F(WaitEngineTest, TimedOutExclusiveHeadLetsTheSharedCallsBehindItTry) {
  Slot* w = Park("w", absl::Milliseconds(30));
  Park("r", absl::Seconds(30), kShared);
  ASSERT_TRUE(w->Wait());
  EXPECT_FALSE(w->result->acquired);
  ScriptedStrategy::Attempt a = strategy_.Next();
  EXPECT_EQ(a.params.owner, "r");
  EXPECT_EQ(a.kind, TryKind::kHead);
}

// Behind a cancelled EXCLUSIVE call, another EXCLUSIVE one can only be
// granted on a free name: it waits for the wake, as before.
TEST_F(WaitEngineTest, CancelledExclusiveHeadDoesNotTryTheExclusiveCallBehindIt) {
  auto cancel = std::make_shared<CancelSignal>();
  Slot* w = Park("w", absl::Seconds(30), {}, cancel);
  Park("x");
  cancel->Cancel();
  ASSERT_TRUE(w->Wait());
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(strategy_.Pending(), 0u);
  EXPECT_EQ(engine_->Waiting(kKey), 1u);
}

}  // namespace
}  // namespace lockd
