#include "backends/memory/memory_backend.h"

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "backends/common/deferred.h"
#include "backends/common/errors.h"
#include "backends/common/list_pages.h"
#include "backends/common/timer_queue.h"
#include "backends/common/waiter_registry.h"
#include "backends/common/waiter_table.h"

namespace lockd {
namespace {

using Clock = SteadyClock;

struct Lock {
  std::string owner;
  uint32_t hold_count = 0;
  uint64_t token = 0;
  Clock::time_point expires;
  TimerQueue::TimerId expiry_timer = 0;  // armed while waiters are parked
  // The owner's last request with a request_id, for idempotent retries.
  enum class Kind { kNone, kAcquire, kRelease } last_kind = Kind::kNone;
  std::string last_request_id;
  AcquireResult last_acquire;
  ReleaseResult last_release;
};

// A Release that freed a lock, remembered (per lock and owner) so that its
// retry answers the same even after the lock went to another owner.
struct FreedBy {
  std::string request_id;
  Clock::time_point until;
};
using FreedKey = std::pair<LockKey, std::string>;  // lock, owner

// The wall-clock time (absl::Now()) of steady time `t`, never later than it:
// an AcquireResult's lease_start for a lease started at `t`.
absl::Time WallTimeOf(Clock::time_point t) {
  const absl::Time wall = absl::Now();  // first: the steady reading below is no earlier
  return wall - absl::FromChrono(Clock::now() - t);
}

// Waiting uses a WaiterTable and a WaiterRegistry directly, not the
// WaitEngine: the locks live under this class's own mutex, so a release hands
// the lock to the first waiter in the same critical section (no attempt to
// make, nothing in flight, no retry timer). The engine's "try once, then
// retry the head" would add an asynchronous round for nothing. The rules are
// the same: FIFO per lock, max_waiters counts every waiting call, the same
// error texts (errors.h). A call is registered from its park to the moment it
// leaves the table, under mu_; the registry reports its deadline, cancel and
// the shutdown drain to OnStop.
class MemoryBackend final : public Backend {
 public:
  explicit MemoryBackend(const MemoryOptions& options)
      : options_(options),
        next_token_(static_cast<uint64_t>(absl::ToUnixMicros(absl::Now()))),
        timers_(std::make_unique<TimerQueue>()),
        registry_(timers_.get(), options.max_waiters,
                  [this](const LockKey& key, uint64_t id, WaiterRegistry::StopReason why) {
                    OnStop(key, id, why);
                  }) {}

  ~MemoryBackend() override { Shutdown(); }

  absl::string_view name() const override { return "memory"; }

  void Acquire(AcquireParams params, std::shared_ptr<CancelSignal> cancel,
               Callback<AcquireResult> done) override {
    if (absl::Status s = ExclusiveLocksOnly(params, name()); !s.ok()) {
      std::move(done)(s);
      return;
    }
    Deferred deferred;
    absl::StatusOr<AcquireResult> result;
    bool parked = false;
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) {
        result = ShuttingDownError();
      } else {
        Clock::time_point now = Clock::now();
        const LockKey key = params.key;  // params is moved into a parked waiter
        ExpireIfDue(key, now, deferred);
        auto it = locks_.find(key);
        if (it == locks_.end()) {
          result = Grant(params, now);
          GrantOwnersWaiters(key, now, deferred);
        } else if (it->second.owner == params.owner) {
          result = Reenter(it->second, params, now);
        } else if (params.wait <= absl::ZeroDuration()) {
          result = NotAcquired(key, &it->second, now);
        } else {
          Clock::time_point deadline = SteadyAfter(params.wait);
          WaiterTable::Waiter w{std::move(params), std::move(cancel), std::move(done), deadline};
          absl::Status s = ParkLocked(w);
          if (s.ok()) {
            parked = true;
            ArmExpiry(key, it->second);
          } else {
            result = s;
            done = std::move(w.done);
          }
        }
      }
    }
    RunAll(deferred);
    if (!parked) std::move(done)(std::move(result));
  }

  void Release(ReleaseParams params, Callback<ReleaseResult> done) override {
    OnLock(params.key, std::move(done), [&](const At& at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return ReleaseLocked(params, at.it, at.now, at.deferred);
    });
  }

  void ForceRelease(ForceReleaseParams params, Callback<ForceReleaseResult> done) override {
    OnLock(
        params.key, std::move(done),
        [&](const At& at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::StatusOr<ForceReleaseResult> {
          ForceReleaseResult r;
          if (at.it == locks_.end()) {
            r.previous = StateOf(params.key, nullptr, at.now);
            return r;
          }
          if (params.fencing_token != 0 && at.it->second.token != params.fencing_token) {
            return FencingTokenMismatchError(params.key, params.fencing_token, at.it->second.token);
          }
          r.previous = StateOf(params.key, &at.it->second, at.now);
          r.released = true;
          Free(at.it);
          HandOff(params.key, at.now, at.deferred);
          return r;
        });
  }

  void Renew(RenewParams params, Callback<RenewResult> done) override {
    OnLock(params.key, std::move(done),
           [&](const At& at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::StatusOr<RenewResult> {
             if (at.it == locks_.end()) return LockFreeError(params.key);
             if (at.it->second.owner != params.owner) return HeldByOtherError(params.key);
             if (!OfHold(at.it->second, params.fencing_token)) return OtherHoldError(params.key);
             at.it->second.expires = at.now + absl::ToChronoNanoseconds(params.ttl);
             return RenewResult{params.ttl, at.it->second.token};
           });
  }

  void Describe(LockKey key, Callback<LockState> done) override {
    OnLock(key, std::move(done), [&](const At& at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return StateOf(key, at.it == locks_.end() ? nullptr : &at.it->second, at.now);
    });
  }

  void List(ListParams params, Callback<ListResult> done) override {
    absl::StatusOr<ListResult> result;
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) {
        result = ShuttingDownError();
      } else {
        result = ListLocked(params);
      }
    }
    std::move(done)(std::move(result));
  }

  absl::Status Health() const override {
    absl::MutexLock l(&mu_);
    return shutdown_ ? ShuttingDownError() : absl::OkStatus();
  }

  void Shutdown() override {
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) return;
      shutdown_ = true;
    }
    registry_.Close();  // answers every parked call ShuttingDownError() (OnStop)
    // Joins the timer thread; its callbacks see shutdown_ and return.
    timers_.reset();
  }

 private:
  using LockIt = std::map<LockKey, Lock>::iterator;

  // What an operation run by OnLock sees.
  struct At {
    LockIt it;              // the lock's entry in locks_, or end()
    Clock::time_point now;  // its lease has been checked against this
    Deferred& deferred;     // answers to waiters, run once mu_ is released
  };

  // One call on `key`: under mu_, frees the lock if its lease has ended
  // (handing it to its first waiter) and runs `op(At)`; then, with mu_
  // released, runs the answers `op` deferred and answers `done` with its
  // result. After Shutdown(): ShuttingDownError(), without `op`.
  template <typename T, typename Op>
  void OnLock(const LockKey& key, Callback<T> done, Op op) {
    Deferred deferred;
    absl::StatusOr<T> result;
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) {
        result = ShuttingDownError();
      } else {
        const Clock::time_point now = Clock::now();
        ExpireIfDue(key, now, deferred);
        result = op(At{locks_.find(key), now, deferred});
      }
    }
    RunAll(deferred);
    std::move(done)(std::move(result));
  }

  // Parks `w` (moved from) at the back of its lock's queue and returns OK;
  // or returns why not (kCancelled, TooManyWaitersError) and leaves `w`.
  absl::Status ParkLocked(WaiterTable::Waiter& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (w.cancelled()) return AcquireCancelledError();
    absl::StatusOr<uint64_t> id = registry_.RegisterAdmitted(w.params.key, w.deadline, w.cancel);
    if (!id.ok()) return id.status();
    w.id = *id;
    table_.Push(std::move(w));
    return absl::OkStatus();
  }

  AcquireResult Grant(const AcquireParams& p, Clock::time_point now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Lock& lock = locks_[p.key];
    lock.owner = p.owner;
    lock.hold_count = 1;
    lock.token = ++next_token_;
    lock.expires = now + absl::ToChronoNanoseconds(p.ttl);
    AcquireResult r;
    r.acquired = true;
    r.fencing_token = lock.token;
    r.hold_count = 1;
    r.ttl = p.ttl;
    r.lease_start = WallTimeOf(now);
    Remember(lock, p.request_id, r);
    freed_.erase(FreedKey(p.key, p.owner));  // the owner's last request is this one now
    return r;
  }

  AcquireResult Reenter(Lock& lock, const AcquireParams& p, Clock::time_point now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!p.request_id.empty() && lock.last_kind == Lock::Kind::kAcquire &&
        lock.last_request_id == p.request_id) {
      return lock.last_acquire;
    }
    ++lock.hold_count;
    lock.expires = now + absl::ToChronoNanoseconds(p.ttl);
    AcquireResult r;
    r.acquired = true;
    r.fencing_token = lock.token;
    r.hold_count = lock.hold_count;
    r.ttl = p.ttl;
    r.lease_start = WallTimeOf(now);
    Remember(lock, p.request_id, r);
    return r;
  }

  // Records the owner's last request; one without a request_id ends the
  // idempotency of the one before it.
  static void Remember(Lock& lock, const std::string& request_id, const AcquireResult& r) {
    if (request_id.empty()) {
      lock.last_kind = Lock::Kind::kNone;
      lock.last_request_id.clear();
      return;
    }
    lock.last_kind = Lock::Kind::kAcquire;
    lock.last_request_id = request_id;
    lock.last_acquire = r;
  }

  // True if a Release/Renew carrying `token` (0: any) is for `lock`'s hold.
  static bool OfHold(const Lock& lock, uint64_t token) { return token == 0 || token == lock.token; }

  AcquireResult NotAcquired(const LockKey& key, const Lock* lock, Clock::time_point now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    AcquireResult r;
    r.current = StateOf(key, lock, now);
    return r;
  }

  absl::StatusOr<ReleaseResult> ReleaseLocked(const ReleaseParams& p, LockIt it,
                                              Clock::time_point now, Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!p.acquire_request_id.empty()) return UndoLocked(p, it, now, deferred);
    if (it == locks_.end() || it->second.owner != p.owner) {
      if (!p.request_id.empty()) {
        auto f = freed_.find(FreedKey(p.key, p.owner));
        if (f != freed_.end() && f->second.request_id == p.request_id && f->second.until > now) {
          return ReleaseResult{true, 0};
        }
      }
      return it == locks_.end() ? LockFreeError(p.key) : HeldByOtherError(p.key);
    }
    Lock& lock = it->second;
    if (!p.request_id.empty() && lock.last_kind == Lock::Kind::kRelease &&
        lock.last_request_id == p.request_id) {
      return lock.last_release;
    }
    if (!OfHold(lock, p.fencing_token)) return OtherHoldError(p.key);
    ReleaseResult r;
    r.hold_count = --lock.hold_count;
    r.released = lock.hold_count == 0;
    if (!r.released) {
      lock.last_kind = p.request_id.empty() ? Lock::Kind::kNone : Lock::Kind::kRelease;
      lock.last_request_id = p.request_id;
      lock.last_release = r;
      return r;
    }
    if (!p.request_id.empty()) RememberFreed(p, now);
    Free(it);
    HandOff(p.key, now, deferred);
    return r;
  }

  void RememberFreed(const ReleaseParams& p, Clock::time_point now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (++freed_inserts_ % 4096 == 0) {
      for (auto f = freed_.begin(); f != freed_.end();) {
        if (f->second.until <= now) {
          freed_.erase(f++);
        } else {
          ++f;
        }
      }
    }
    freed_[FreedKey(p.key, p.owner)] =
        FreedBy{p.request_id, now + absl::ToChronoNanoseconds(options_.release_memory)};
  }

  // Release with acquire_request_id (backend.h).
  ReleaseResult UndoLocked(const ReleaseParams& p, LockIt it, Clock::time_point now,
                           Deferred& deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (it == locks_.end() || it->second.owner != p.owner) return ReleaseResult{false, 0};
    Lock& lock = it->second;
    if (lock.last_kind != Lock::Kind::kAcquire || lock.last_request_id != p.acquire_request_id ||
        !OfHold(lock, p.fencing_token)) {
      return ReleaseResult{false, lock.hold_count};
    }
    lock.last_kind = Lock::Kind::kNone;
    lock.last_request_id.clear();
    if (--lock.hold_count > 0) return ReleaseResult{false, lock.hold_count};
    Free(it);
    HandOff(p.key, now, deferred);
    return ReleaseResult{true, 0};
  }

  void Free(LockIt it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (it->second.expiry_timer != 0 && timers_) timers_->Cancel(it->second.expiry_timer);
    locks_.erase(it);
  }

  // If `key` is held and its lease has ended, frees it and grants it to the
  // first waiter.
  void ExpireIfDue(const LockKey& key, Clock::time_point now, Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = locks_.find(key);
    if (it == locks_.end() || it->second.expires > now) return;
    Free(it);
    HandOff(key, now, deferred);
  }

  // The lock is free: grants it to the first live waiter, if any.
  void HandOff(const LockKey& key, Clock::time_point now, Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (std::optional<WaiterTable::Waiter> w = table_.PopFront(key)) {
      registry_.Unregister(w->id, w->cancel);
      if (w->cancelled()) {
        deferred.push_back(
            [done = std::move(w->done)]() mutable { std::move(done)(AcquireCancelledError()); });
        continue;
      }
      AcquireResult r = Grant(w->params, now);
      deferred.push_back([done = std::move(w->done), r = std::move(r)]() mutable {
        std::move(done)(std::move(r));
      });
      GrantOwnersWaiters(key, now, deferred);
      ArmExpiry(key, locks_[key]);
      return;
    }
  }

  // `key` was just granted to a new holder: its other parked calls are
  // reentrant acquires now, granted at once instead of waiting on their own
  // owner.
  void GrantOwnersWaiters(const LockKey& key, Clock::time_point now, Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Lock& lock = locks_[key];
    for (WaiterTable::Waiter& w : table_.PopOwner(key, lock.owner)) {
      registry_.Unregister(w.id, w.cancel);
      absl::StatusOr<AcquireResult> r = AcquireCancelledError();
      if (!w.cancelled()) r = Reenter(lock, w.params, now);
      deferred.push_back([done = std::move(w.done), r = std::move(r)]() mutable {
        std::move(done)(std::move(r));
      });
    }
  }

  // While waiters are parked on a held lock, a timer at its lease end makes
  // sure they are served when the holder stops renewing.
  void ArmExpiry(const LockKey& key, Lock& lock) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (lock.expiry_timer != 0 || table_.Count(key) == 0) return;
    lock.expiry_timer = timers_->ScheduleAt(lock.expires, [this, key] { OnExpiryTimer(key); });
  }

  void OnExpiryTimer(const LockKey& key) {
    Deferred deferred;
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) return;
      auto it = locks_.find(key);
      if (it == locks_.end()) return;
      it->second.expiry_timer = 0;
      Clock::time_point now = Clock::now();
      if (it->second.expires <= now) {
        ExpireIfDue(key, now, deferred);
      } else {
        ArmExpiry(key, it->second);  // renewed meanwhile
      }
    }
    RunAll(deferred);
  }

  // The registry's StopFn: ends the wait of parked call `id` on `key`, if it
  // is still parked.
  void OnStop(const LockKey& key, uint64_t id, WaiterRegistry::StopReason why) {
    std::optional<WaiterTable::Waiter> w;
    absl::StatusOr<AcquireResult> result;
    {
      absl::MutexLock l(&mu_);
      w = table_.Remove(key, id);
      if (!w.has_value()) return;
      registry_.Unregister(id, w->cancel);
      if (why == WaiterRegistry::StopReason::kCancelled) {
        result = AcquireCancelledError();
      } else if (why == WaiterRegistry::StopReason::kShutdown || shutdown_) {
        result = ShuttingDownError();
      } else {
        auto it = locks_.find(key);
        result = NotAcquired(key, it == locks_.end() ? nullptr : &it->second, Clock::now());
      }
    }
    std::move(w->done)(std::move(result));
  }

  LockState StateOf(const LockKey& key, const Lock* lock, Clock::time_point now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    LockState s;
    s.key = key;
    s.waiters = static_cast<uint32_t>(table_.Count(key));
    if (lock == nullptr || lock->expires <= now) return s;
    s.held = true;
    s.owner = lock->owner;
    s.hold_count = lock->hold_count;
    s.fencing_token = lock->token;
    s.ttl_remaining = absl::FromChrono(lock->expires - now);
    return s;
  }

  ListResult ListLocked(const ListParams& p) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<LockState> held;
    Clock::time_point now = Clock::now();
    auto it = p.page_token.empty() || p.page_token < p.prefix
                  ? locks_.lower_bound(LockKey{p.ns, p.prefix})
                  : locks_.upper_bound(LockKey{p.ns, p.page_token});
    for (; it != locks_.end() && held.size() <= p.page_size; ++it) {
      if (it->first.ns != p.ns || !absl::StartsWith(it->first.name, p.prefix)) break;
      if (it->second.expires <= now) continue;
      held.push_back(StateOf(it->first, &it->second, now));
    }
    return PageOf(std::move(held), p.page_size);
  }

  const MemoryOptions options_;
  mutable absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_token_ ABSL_GUARDED_BY(mu_);
  std::map<LockKey, Lock> locks_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<FreedKey, FreedBy> freed_ ABSL_GUARDED_BY(mu_);
  uint64_t freed_inserts_ ABSL_GUARDED_BY(mu_) = 0;
  // Reset (thread joined) by Shutdown(); the registry no longer uses it once
  // closed.
  std::unique_ptr<TimerQueue> timers_;
  WaiterTable table_ ABSL_GUARDED_BY(mu_);  // the parked calls, in order
  // Every parked call: deadline, cancel hook, max_waiters, the shutdown
  // drain. Declared last, so destroyed first: no stop reaches the state
  // above once that is gone.
  WaiterRegistry registry_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> NewMemoryBackend(const MemoryOptions& options) {
  if (absl::Status s = MemoryOptionSet().Check(options); !s.ok()) return s;
  return std::make_unique<MemoryBackend>(options);
}

}  // namespace lockd
