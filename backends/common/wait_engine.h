// The waiting half of Backend::Acquire, written once for every backend whose
// locks live on a server it can only ask ("try to take this lock now"): it
// parks calls that found the lock held, retries the first of them when the
// lock may have become free, and answers each call exactly once. The backend
// supplies a LockStrategy (one attempt, and the lock's state) and calls
// Wake() when it learns that a lock may be free (a release it made, a
// published release, a lease-expiry timer of its own). Userver's dist_lock
// Locker over its strategies is the model.
//
// Per lock, in arrival order (FIFO):
//   - A new Acquire makes one attempt (TryKind::kFirst, or kBehind while
//     others of this process wait for the lock, so that it cannot overtake
//     them: then only a reentrant or replayed acquire is granted, and an
//     upgrade would block). This holds for a call that only tries
//     (params.wait <= 0) too: a replica alone writes no queue entries on its
//     server (replica_presence.h), so its own waiters are known only here. A call
//     that may wait counts as waiting from its arrival: while its kFirst
//     attempt is in flight, later calls try kBehind and no head starts (a
//     wake is kept for when it is back; a kBehind attempt in flight holds
//     nothing back, as it cannot take the lock), and every call parks in
//     arrival order even if a later call's attempt came back first. A backend that queues
//     waiters on its server (Redis, MySQL) enqueues the call with its first
//     attempt, so a later call of the same replica must not take the lock
//     before it parks.
//   - If that is not granted and params.wait > 0, the call is parked. At most
//     one parked call per lock, the head, has an attempt in flight
//     (TryKind::kHead). It is started by Wake(), by the retry timer (the
//     delay the strategy asks for through NextTry), or by the backend itself
//     through TakeHead()/FinishHead() (e.g. riding on a release).
//   - A head that loses goes back to the front. Wakes that arrive while its
//     attempt is in flight are coalesced into one immediate retry.
//   - An attempt that reports the lock held by owner O grants every parked
//     call of O as a reentrant acquire at once (TryKind::kReentrant attempts,
//     out of line), as does OwnerHolds(): a call never waits on its own owner.
//     Modes count (backend.h "Kinds"): O holding EXCLUSIVE (or semaphore
//     permits) re-enters every parked call of O (the attempt answers a kind
//     or permits mismatch); O holding SHARED re-enters O's SHARED calls, but
//     O's EXCLUSIVE calls are upgrades, and an upgrade is only granted to a
//     call that did not wait: they are answered UpgradeWouldBlockError at
//     once. Where O's mode is not known (a SHARED grant with hold count > 1
//     may be a re-entry on an EXCLUSIVE hold), O's EXCLUSIVE calls stay
//     parked and their own attempt decides.
//   - The wait ends at the deadline (OK, acquired=false, the lock's state from
//     LockStrategy::Current), on cancel (kCancelled), on an attempt error
//     other than kUnavailable (that error), or at Shutdown (kUnavailable).
//     kUnavailable from an attempt only means "try again later".
//
// Kinds (backend.h "Kinds"), one queue per name across modes, no barging:
//   - A call joins holders when it asks SHARED, or asks permits of a
//     semaphore. When such a call is granted with calls parked behind it
//     and the next is of the same sort (SHARED after SHARED, semaphore after
//     semaphore), that call tries at once (kHead) instead of waiting for a
//     Wake, one after the other: SHARED heads while they are granted,
//     semaphore heads while their permits fit. The first that loses waits
//     at the front as any head does. A strategy whose TriesReadersTogether()
//     is true gets the whole run of SHARED calls at the front after a SHARED
//     grant at once instead (kJoin attempts out of line, "joiners"), so that
//     a burst of readers costs one round trip, not one each: while joiners
//     are in flight no head starts (a wake is kept) and newcomers try
//     kBehind, as for first attempts; a joiner that loses parks again in
//     arrival order. An EXCLUSIVE head, or one after an EXCLUSIVE grant,
//     waits for a Wake or NextTry exactly as before.
//   - A parked call that leaves the front of the queue without an attempt
//     (cancelled, timed out) lets the next one try at once when that one
//     joins holders (a SHARED call behind a cancelled EXCLUSIVE one may be
//     granted beside the SHARED holders; no release will wake it).
//   - Nothing else depends on the kind: the strategy's attempt applies the
//     admission rules (free, compatible mode, permits that fit), reentrancy,
//     kind mismatch and the upgrade rule of a call that did not wait.
//
// Capacity, for every backend: at most `max_waiters` calls are waiting at
// once, counting parked calls and calls whose retry is in flight; one more is
// answered kResourceExhausted (TooManyWaitersError) when it would park.
//
// Bookkeeping: a call that parks is registered in the engine's
// WaiterRegistry (waiter_registry.h) until it is answered; the registry owns
// its deadline timer, cancel hook and place under max_waiters, and the
// shutdown gate. The engine's WaiterTable (waiter_table.h) keeps only the
// order of the parked ones. A deadline or cancel the registry reports while
// the call's attempt is in flight is acted on when the attempt ends and the
// call would go back to the table: a cancelled call is answered kCancelled,
// one past its deadline is timed out unless it is the head tried again at
// once.
//
// Threading: thread-safe. One mutex (mu_) guards the per-lock state and the
// WaiterTable; the WaiterRegistry has its own. Lock order: mu_, then the
// WaiterRegistry's. The strategy's TryOnce and Current and every `done` are
// called with no engine lock held; NextTry, KeyActive and KeyIdle are called
// with mu_ held (so a lock's activations and idlings reach the strategy in
// order) and must not call into the engine or block. Callbacks of
// TryOnce/Current may run on any thread, inline included.

#ifndef LOCKD_BACKENDS_COMMON_WAIT_ENGINE_H_
#define LOCKD_BACKENDS_COMMON_WAIT_ENGINE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "backends/backend.h"
#include "backends/common/deferred.h"
#include "backends/common/timer_queue.h"
#include "backends/common/waiter_registry.h"
#include "backends/common/waiter_table.h"

namespace lockd {

// What one attempt found.
struct TryResult {
  // OK and acquired: granted (fencing_token, hold_count, ttl filled).
  // OK and !acquired: not granted; `current` is the lock's state as far as
  //   the attempt saw it (held=false: it looked free but was not taken, e.g.
  //   deferred to other waiters). current.waiters is filled by the engine.
  // kUnavailable: the server could not be asked; a parked call tries again.
  // Any other error ends the call with that error.
  absl::StatusOr<AcquireResult> result;
  // Not granted and held: how long the holder's lease has left, if known.
  absl::Duration holder_remaining = absl::InfiniteDuration();
};

// What an attempt may grant. "Take" means: a free name, or (SHARED, a
// semaphore) a place beside compatible holders per backend.h "Kinds"; every
// kind also re-enters or replays for an owner that holds the name, and
// answers the holder errors (kind mismatch, upgrade, permits mismatch).
enum class TryKind {
  kFirst,      // a new call, nobody of this process waits: may take
  kBehind,     // a new call while others wait: only re-enter or replay
  kHead,       // the first parked call, retrying: may take
  kReentrant,  // a parked call whose owner was seen holding the name (never
               // an EXCLUSIVE call of a SHARED holder: see the header)
  kJoin,       // a parked SHARED call tried beside others after a SHARED
               // grant (TriesReadersTogether): may take, but must not pass a
               // call ahead of it that another process serves
};

// What a backend supplies. Implementations are thread-safe.
class LockStrategy {
 public:
  virtual ~LockStrategy() = default;

  // Starts one acquire attempt for `params`; calls `done` exactly once.
  // `params` stays valid until `done` is called (not after).
  virtual void TryOnce(const AcquireParams& params, TryKind kind,
                       absl::AnyInvocable<void(TryResult) &&> done) = 0;

  // The lock's current state, for a call whose wait ended. `waiters` need
  // not be filled (the engine fills it).
  virtual void Current(const LockKey& key, Callback<LockState> done) = 0;

  // After an attempt of kind `after` on `key` that is not the end of the line
  // (a first park: kFirst, also for kBehind; a lost head; a grant with calls
  // still parked; a failed re-entry): how long until the head should try
  // again if no Wake() comes first. InfiniteDuration: only on a Wake(). An
  // earlier pending retry is kept.
  virtual absl::Duration NextTry(const LockKey& key, TryKind after, const TryResult& last) = 0;

  // Whether the run of SHARED calls after a SHARED grant is tried at once
  // (kJoin attempts, concurrently) rather than one head after the other.
  // Constant for a strategy.
  virtual bool TriesReadersTogether() const { return false; }

  // `key` gets its first waiting call / loses its last one. Called with the
  // engine's mutex held: record or queue work (subscribe to a channel), do
  // not call into the engine. A strategy that learns of releases only after
  // KeyActive (a subscription) calls Wake(key) once it is sure to see them.
  virtual void KeyActive(const LockKey& key) {}
  virtual void KeyIdle(const LockKey& key) {}
};

class WaitEngine {
 public:
  // `strategy` and `timers` must outlive the engine; the timer queue must be
  // stopped (destroyed) before the engine is. max_waiters > 0.
  WaitEngine(LockStrategy* strategy, TimerQueue* timers, size_t max_waiters);
  // Finishes what is still parked with ShuttingDownError().
  ~WaitEngine();
  WaitEngine(const WaitEngine&) = delete;
  WaitEngine& operator=(const WaitEngine&) = delete;

  // Backend::Acquire: tries once, then waits as described above. `done` is
  // called exactly once, with no engine lock held. After Shutdown():
  // ShuttingDownError(), inline. A grant's lease_start, unless the strategy
  // set it, is the time its attempt was started (TryOnce called, or
  // TakeHead returned).
  void Acquire(AcquireParams params, std::shared_ptr<CancelSignal> cancel,
               Callback<AcquireResult> done);

  // `key` may be free (or have room: a SHARED or semaphore holder left): the
  // head tries now (or right after its attempt in flight).
  // `released_token`, when non-zero, is the token of the exclusive holding
  // whose end caused the wake: if an attempt already saw a larger token (the
  // lock was granted since), the news is stale and ignored. Pass 0 for the
  // end of a SHARED or semaphore hold: with several holders an older token
  // is no sign of staleness.
  void Wake(const LockKey& key, uint64_t released_token = 0);

  // `owner` holds `key` in `mode` with `token` (a grant the backend heard
  // of; kExclusive for semaphore permits): its parked calls are granted as
  // reentrant acquires, under the mode rules of the header.
  void OwnerHolds(const LockKey& key, const std::string& owner, uint64_t token,
                  LockMode mode = LockMode::kExclusive);

  // The head of `key`, taken out of line for an attempt the backend makes
  // itself (e.g. in the same transaction or pipeline as a release), which
  // it sends after TakeHead() returns. The backend must call FinishHead()
  // exactly once with its result.
  class Head {
   public:
    const AcquireParams& params() const { return w_.params; }

   private:
    friend class WaitEngine;
    Head(WaiterTable::Waiter w, absl::Time taken) : w_(std::move(w)), taken_(taken) {}
    WaiterTable::Waiter w_;
    absl::Time taken_;  // before the attempt was sent: a grant's lease_start
  };
  // nullopt if `key` has no parked call, its head is already trying, or the
  // engine is shut down.
  std::optional<Head> TakeHead(const LockKey& key);
  void FinishHead(Head head, TryResult r);

  // Calls waiting on `key`: parked, plus the head and joiners whose attempts
  // are in flight (LockState::waiters).
  uint32_t Waiting(const LockKey& key) const;

  // Finishes every parked call with ShuttingDownError() and answers later
  // Acquires so. Attempts in flight still finish: a grant is delivered (the
  // service gives back grants it cannot use), anything else becomes
  // ShuttingDownError(). Idempotent. Waits for a deadline or cancel that is
  // being handled (which may be in LockStrategy::Current): call it with no
  // mutex held that Current or a `done` takes.
  void Shutdown();

 private:
  struct KeyState {
    bool active = false;  // KeyActive called: a call has parked
    // Calls that may wait whose kFirst attempt is in flight: they are ahead
    // of later calls (kBehind), and no head starts before they are back.
    int firsts = 0;
    // SHARED calls out of line on a kJoin attempt after a SHARED grant
    // (the header's "joiners"); they hold the head back as `firsts` do.
    int joining = 0;
    bool head_in_flight = false;
    bool wake_pending = false;  // a Wake() came while the head was trying
    int reentering = 0;         // calls out of line on a kReentrant attempt
    // An attempt that later calls stay behind is in flight (the head's,
    // a first call's or a joiner's): newcomers try kBehind, no head starts.
    bool trying() const { return head_in_flight || firsts > 0 || joining > 0; }
    TimerQueue::TimerId timer = 0;
    uint64_t timer_gen = 0;
    SteadyClock::time_point timer_at;
    uint64_t seen_token = 0;  // the largest token an attempt reported
  };
  using Waiter = WaiterTable::Waiter;

  // Runs one attempt for `w`, then (this->*then)(w, result).
  void Try(Waiter w, TryKind kind, void (WaitEngine::*then)(Waiter, TryResult));
  void OnFirstTry(Waiter w, TryResult r);
  // A kFirst call that may wait, counted in KeyState::firsts until it is back.
  void OnCountedFirstTry(Waiter w, TryResult r);
  void ParseFirstLocked(Waiter& w, TryResult& r, bool counted, Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A first attempt not granted, of a call that may wait: it parks.
  void ParkFirstLocked(Waiter& w, TryResult& r, Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint32_t WaitingLocked(const LockKey& key) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnHeadResult(Waiter w, TryResult r);
  void OnReentrantResult(Waiter w, TryResult r);
  void OnJoinResult(Waiter w, TryResult r);
  void OnRetryTimer(const LockKey& key, uint64_t gen);
  // The registry's StopFn: ends the wait of call `id` if it is parked;
  // otherwise (in flight) its attempt's end decides (ReparkLocked).
  void OnStop(const LockKey& key, uint64_t id, WaiterRegistry::StopReason why);
  void OnTimeout(Waiter w);

  // Pops the first live call of `key` (finishing cancelled ones) and marks it
  // in flight; nullopt if none or one is in flight already.
  std::optional<Waiter> PopHeadLocked(const LockKey& key, KeyState& k, Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartHeadLocked(const LockKey& key, KeyState& k, Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Parks `w` again, at the front (or, for a joiner, in arrival order), or
  // finishes it through `deferred` if it was cancelled meanwhile. Returns
  // whether it was parked. One whose deadline passed meanwhile is timed out
  // through `deferred` unless it is popped again first.
  bool ReparkLocked(Waiter& w, Deferred& deferred, bool front = true)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ScheduleLocked(const LockKey& key, KeyState& k, absl::Duration delay)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The parked calls of `owner`, which holds `key` in `held` (nullopt: in
  // some mode, SHARED at least), re-enter or are refused (upgrades).
  void ReenterOwnerLocked(const LockKey& key, KeyState& k, const std::string& owner,
                          std::optional<LockMode> held, Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ReenterOwnerLocked for every holder an attempt reported.
  void ReenterHoldersLocked(const LockKey& key, KeyState& k, const LockState& current,
                            Deferred& deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a grant to `granted` with calls still parked: the next head tries
  // at once if it would join the same holders (with TriesReadersTogether,
  // the run of SHARED calls at the front: joiners), else on NextTry.
  void AfterGrantLocked(const LockKey& key, KeyState& k, const AcquireParams& granted,
                        const TryResult& r, Deferred& deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ObserveLocked(KeyState& k, const TryResult& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetIfIdleLocked(const LockKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wraps the `done` of registered call `w` so that finishing it
  // unregisters it (frees its capacity, disarms its deadline and cancel
  // hook) and forgets an idle lock.
  Callback<AcquireResult> Registered(const Waiter& w, Callback<AcquireResult> done);
  // `done` with `current.waiters` filled for a not-granted result.
  void Finish(const LockKey& key, Callback<AcquireResult> done, absl::StatusOr<AcquireResult> r,
              Deferred& deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  LockStrategy* const strategy_;
  TimerQueue* const timers_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<LockKey, KeyState> keys_ ABSL_GUARDED_BY(mu_);
  uint64_t arrivals_ ABSL_GUARDED_BY(mu_) = 0;  // numbers the calls that may wait
  WaiterTable table_ ABSL_GUARDED_BY(mu_);      // the parked calls, in order

  // Every call from its first park to its answer: deadline, cancel hook,
  // capacity, and the shutdown gate. Declared last, so destroyed first: no
  // stop reaches the state above once that is gone.
  WaiterRegistry registry_;
};

}  // namespace lockd

#endif  // LOCKD_BACKENDS_COMMON_WAIT_ENGINE_H_
