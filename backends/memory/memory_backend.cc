#include "backends/memory/memory_backend.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
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

// One owner's hold of a name (backend.h "Kinds": every holder is on its own).
struct Holder {
  std::string owner;
  LockMode mode = LockMode::kExclusive;  // kExclusive for semaphore permits
  uint32_t hold_count = 0;
  uint32_t permits = 0;  // 0 for a lock
  uint64_t token = 0;
  Clock::time_point expires;
  // The owner's last request with a request_id, for idempotent retries and
  // Release{acquire_request_id}.
  enum class Kind { kNone, kAcquire, kRelease } last_kind = Kind::kNone;
  std::string last_request_id;
  AcquireResult last_acquire;
  bool last_upgraded = false;  // that acquire turned the SHARED hold EXCLUSIVE
  ReleaseResult last_release;
};

// A name with holders; erased when its last holder goes, so that the name
// takes the kind of its next grant.
struct Lock {
  uint32_t limit = 0;           // non-zero: a semaphore of `limit` permits
  uint32_t permits = 0;         // held, in all
  std::vector<Holder> holders;  // by token, oldest first; an EXCLUSIVE one is alone
  // Armed at the earliest lease end while waiters are parked; `expiry_gen`
  // tells a timer that was replaced.
  TimerQueue::TimerId expiry_timer = 0;
  Clock::time_point expiry_at;
  uint64_t expiry_gen = 0;
};

// A Release that freed a hold, remembered (per lock and owner) so that its
// retry answers the same even after the lock went to another owner.
struct FreedBy {
  std::string request_id;
  Clock::time_point until;
};
using FreedKey = std::pair<LockKey, std::string>;  // lock, owner

// A lock and owner as freed_ looks them up (a Grant's erase, a retried
// Release's find) without copying them into a FreedKey.
struct FreedRef {
  FreedRef(const LockKey& k, absl::string_view o) : key(k), owner(o) {}
  FreedRef(const FreedKey& k) : key(k.first), owner(k.second) {}  // NOLINT: implicit
  const LockKey& key;
  absl::string_view owner;
};
struct FreedHash {
  using is_transparent = void;
  size_t operator()(const FreedRef& r) const { return absl::HashOf(r.key, r.owner); }
};
struct FreedEq {
  using is_transparent = void;
  bool operator()(const FreedRef& a, const FreedRef& b) const {
    return a.key == b.key && a.owner == b.owner;
  }
};

// The wall-clock time (absl::Now()) of steady time `t`, never later than it:
// an AcquireResult's lease_start for a lease started at `t`.
absl::Time WallTimeOf(Clock::time_point t) {
  const absl::Time wall = absl::Now();  // first: the steady reading below is no earlier
  return wall - absl::FromChrono(Clock::now() - t);
}

Holder* HolderOf(Lock& lock, absl::string_view owner) {
  for (Holder& h : lock.holders) {
    if (h.owner == owner) return &h;
  }
  return nullptr;
}

// Whether a call asking `p` (of the lock's kind) may be granted beside the
// holders of `lock` (null: a free name).
bool Fits(const Lock* lock, const AcquireParams& p) {
  if (lock == nullptr) return true;
  if (lock->limit > 0) return lock->permits + p.permits <= lock->limit;
  return p.mode == LockMode::kShared && lock->holders.front().mode == LockMode::kShared;
}

// True if a Release/Renew carrying `token` (0: any) is for hold `h`.
bool OfHold(const Holder& h, uint64_t token) { return token == 0 || token == h.token; }

// Waiting uses a WaiterTable and a WaiterRegistry directly, not the
// WaitEngine: the locks live under this class's own mutex, so whatever frees
// room (a release, a lease end, a waiter leaving the front) admits the
// waiters at the front in the same critical section (no attempt to make,
// nothing in flight, no retry timer). The engine's "try once, then retry the
// head" would add an asynchronous round for nothing. The rules are the same:
// FIFO per name across modes (Admit), max_waiters counts every waiting call,
// the same error texts (errors.h). A call is registered from its park to the
// moment it leaves the table, under mu_; the registry reports its deadline,
// cancel and the shutdown drain to OnStop.
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
    Deferred deferred;
    absl::StatusOr<AcquireResult> result;
    bool parked = false;
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) {
        result = ShuttingDownError();
      } else {
        Clock::time_point now = Clock::now();
        const LockKey& key = params.key;
        // The key of a parked call, whose params are moved into its waiter.
        LockKey parked_key;
        const LockKey* arm = &key;
        ExpireIfDue(key, now, deferred);
        auto it = locks_.find(key);
        Lock* lock = it == locks_.end() ? nullptr : &it->second;
        Holder* holder = lock == nullptr ? nullptr : HolderOf(*lock, params.owner);
        if (holder != nullptr) {
          result = AsHolder(key, *lock, *holder, params, now, /*waited=*/false);
        } else if (lock != nullptr && params.limit != lock->limit) {
          result = LockKindMismatchError(key, lock->limit);
        } else if (lock == nullptr || (table_.Count(key) == 0 && Fits(lock, params))) {
          // A free name has no waiters: Admit serves them as it frees it.
          result = Grant(params, now);
        } else if (params.wait <= absl::ZeroDuration()) {
          result = NotAcquired(key, lock, now);
        } else {
          Clock::time_point deadline = SteadyAfter(params.wait);
          parked_key = params.key;
          arm = &parked_key;
          WaiterTable::Waiter w{std::move(params), std::move(cancel), std::move(done), deadline};
          absl::Status s = ParkLocked(w);
          if (s.ok()) {
            parked = true;
          } else {
            result = s;
            done = std::move(w.done);
          }
        }
        ArmExpiry(*arm);
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
    OnLock(params.key, std::move(done),
           [&](const At& at)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::StatusOr<ForceReleaseResult> {
                 ForceReleaseResult r;
                 if (at.it == locks_.end()) {
                   r.previous = StateOf(params.key, nullptr, at.now);
                   return r;
                 }
                 Lock& lock = at.it->second;
                 auto h = lock.holders.begin();
                 if (params.fencing_token != 0) {
                   while (h != lock.holders.end() && h->token != params.fencing_token) ++h;
                   if (h == lock.holders.end()) {
                     return FencingTokenMismatchError(params.key, params.fencing_token,
                                                      lock.holders.back().token);
                   }
                 }
                 r.previous = StateOf(params.key, &lock, at.now);
                 r.released = true;
                 if (params.fencing_token != 0) {
                   DropHolder(at.it, h, at.now, at.deferred);
                 } else {
                   Free(at.it);
                   Admit(params.key, at.now, at.deferred);
                 }
                 return r;
               });
  }

  void Renew(RenewParams params, Callback<RenewResult> done) override {
    OnLock(params.key, std::move(done),
           [&](const At& at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::StatusOr<RenewResult> {
             if (at.it == locks_.end()) return LockFreeError(params.key);
             Holder* h = HolderOf(at.it->second, params.owner);
             if (h == nullptr) return HeldByOtherError(params.key);
             if (!OfHold(*h, params.fencing_token)) return OtherHoldError(params.key);
             h->expires = at.now + absl::ToChronoNanoseconds(params.ttl);
             ArmExpiry(params.key);  // the new lease may end before the armed timer
             return RenewResult{params.ttl, h->token};
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
    Clock::time_point now;  // its leases have been checked against this
    Deferred& deferred;     // answers to waiters, run once mu_ is released
  };

  // One call on `key`: under mu_, drops the holders whose lease has ended
  // (admitting waiters) and runs `op(At)`; then, with mu_ released, runs
  // the answers `op` deferred and answers `done` with its result. After
  // Shutdown(): ShuttingDownError(), without `op`.
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

  // A new holder for `p.owner`, who holds nothing of `p.key`.
  // REQUIRES: Fits (and the kind matches).
  AcquireResult Grant(const AcquireParams& p, Clock::time_point now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Lock& lock = locks_[p.key];
    if (lock.holders.empty()) lock.limit = p.limit;
    Holder& h = lock.holders.emplace_back();
    h.owner = p.owner;
    h.mode = p.limit > 0 ? LockMode::kExclusive : p.mode;
    h.hold_count = 1;
    h.permits = p.permits;
    h.token = ++next_token_;
    h.expires = now + absl::ToChronoNanoseconds(p.ttl);
    lock.permits += h.permits;
    AcquireResult r;
    r.acquired = true;
    r.fencing_token = h.token;
    r.hold_count = 1;
    r.ttl = p.ttl;
    r.lease_start = WallTimeOf(now);
    Remember(h, p.request_id, r, /*upgraded=*/false);
    freed_.erase(FreedRef(p.key, p.owner));  // the owner's last request is this one now
    return r;
  }

  // An acquire by `h`'s owner (backend.h "Kinds"): a replay, a kind or
  // permits mismatch, a re-entry, or an upgrade. `waited`: the call was
  // parked, so an upgrade would have blocked.
  absl::StatusOr<AcquireResult> AsHolder(const LockKey& key, Lock& lock, Holder& h,
                                         const AcquireParams& p, Clock::time_point now, bool waited)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!p.request_id.empty() && h.last_kind == Holder::Kind::kAcquire &&
        h.last_request_id == p.request_id) {
      return h.last_acquire;
    }
    if (p.limit != lock.limit) return LockKindMismatchError(key, lock.limit);
    if (lock.limit > 0 && p.permits != h.permits) {
      return PermitsMismatchError(key, h.permits, p.permits);
    }
    const bool upgrade =
        lock.limit == 0 && h.mode == LockMode::kShared && p.mode == LockMode::kExclusive;
    if (upgrade) {
      if (waited || lock.holders.size() > 1 || table_.Count(key) > 0) {
        return UpgradeWouldBlockError(key);
      }
      // The only holder: it stays last in token order.
      h.mode = LockMode::kExclusive;
      h.token = ++next_token_;
    }
    ++h.hold_count;
    h.expires = now + absl::ToChronoNanoseconds(p.ttl);
    AcquireResult r;
    r.acquired = true;
    r.fencing_token = h.token;
    r.hold_count = h.hold_count;
    r.ttl = p.ttl;
    r.lease_start = WallTimeOf(now);
    Remember(h, p.request_id, r, upgrade);
    return r;
  }

  // Records the owner's last request; one without a request_id ends the
  // idempotency of the one before it.
  static void Remember(Holder& h, const std::string& request_id, const AcquireResult& r,
                       bool upgraded) {
    if (request_id.empty()) {
      h.last_kind = Holder::Kind::kNone;
      h.last_request_id.clear();
      return;
    }
    h.last_kind = Holder::Kind::kAcquire;
    h.last_request_id = request_id;
    h.last_acquire = r;
    h.last_upgraded = upgraded;
  }

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
    Holder* h = it == locks_.end() ? nullptr : HolderOf(it->second, p.owner);
    if (h == nullptr) {
      if (!p.request_id.empty()) {
        auto f = freed_.find(FreedRef(p.key, p.owner));
        if (f != freed_.end() && f->second.request_id == p.request_id && f->second.until > now) {
          return ReleaseResult{true, 0};
        }
      }
      return it == locks_.end() ? LockFreeError(p.key) : HeldByOtherError(p.key);
    }
    if (!p.request_id.empty() && h->last_kind == Holder::Kind::kRelease &&
        h->last_request_id == p.request_id) {
      return h->last_release;
    }
    if (!OfHold(*h, p.fencing_token)) return OtherHoldError(p.key);
    ReleaseResult r;
    r.hold_count = --h->hold_count;
    r.released = h->hold_count == 0;
    if (!r.released) {
      h->last_kind = p.request_id.empty() ? Holder::Kind::kNone : Holder::Kind::kRelease;
      h->last_request_id = p.request_id;
      h->last_release = r;
      return r;
    }
    if (!p.request_id.empty()) RememberFreed(p, now);
    DropHolder(it, it->second.holders.begin() + (h - it->second.holders.data()), now, deferred);
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

  // Release with acquire_request_id (backend.h), on the owner's hold only.
  // Undoing an upgrade that left holds turns the hold SHARED again.
  ReleaseResult UndoLocked(const ReleaseParams& p, LockIt it, Clock::time_point now,
                           Deferred& deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Holder* h = it == locks_.end() ? nullptr : HolderOf(it->second, p.owner);
    if (h == nullptr) return ReleaseResult{false, 0};
    if (h->last_kind != Holder::Kind::kAcquire || h->last_request_id != p.acquire_request_id ||
        !OfHold(*h, p.fencing_token)) {
      return ReleaseResult{false, h->hold_count};
    }
    h->last_kind = Holder::Kind::kNone;
    h->last_request_id.clear();
    if (--h->hold_count > 0) {
      if (h->last_upgraded) {
        h->mode = LockMode::kShared;
        Admit(p.key, now, deferred);  // readers may join it again
      }
      return ReleaseResult{false, h->hold_count};
    }
    DropHolder(it, it->second.holders.begin() + (h - it->second.holders.data()), now, deferred);
    return ReleaseResult{true, 0};
  }

  // Removes holder `h` of `it` (the name too when it was the last) and
  // admits the waiters that now fit.
  void DropHolder(LockIt it, std::vector<Holder>::iterator h, Clock::time_point now,
                  Deferred& deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Lock& lock = it->second;
    lock.permits -= h->permits;
    lock.holders.erase(h);
    const LockKey key = lock.holders.empty() ? Free(it) : it->first;
    Admit(key, now, deferred);
  }

  // Erases the name; returns its key (moved out of the erased entry, not
  // copied: a release of the last holder frees the name on every call).
  LockKey Free(LockIt it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (it->second.expiry_timer != 0 && timers_) timers_->Cancel(it->second.expiry_timer);
    return std::move(locks_.extract(it).key());
  }

  // Drops the holders of `key` whose lease has ended, admitting waiters.
  void ExpireIfDue(const LockKey& key, Clock::time_point now, Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = locks_.find(key);
    if (it == locks_.end()) return;
    Lock& lock = it->second;
    const size_t before = lock.holders.size();
    for (auto h = lock.holders.begin(); h != lock.holders.end();) {
      if (h->expires > now) {
        ++h;
        continue;
      }
      lock.permits -= h->permits;
      h = lock.holders.erase(h);
    }
    if (lock.holders.size() == before) return;
    if (lock.holders.empty()) Free(it);
    Admit(key, now, deferred);
  }

  // Serves the front of `key`'s queue, in order, for as long as it can be
  // served now: SHARED calls join SHARED holders together, semaphore calls
  // while their permits fit, an EXCLUSIVE call takes a free name; the first
  // that must wait holds back everyone behind it (no barging). Cancelled
  // calls are answered on the way; a call whose owner holds the name is
  // answered as a holder (re-entry, mismatch, or an upgrade that would
  // block).
  void Admit(const LockKey& key, Clock::time_point now, Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (const WaiterTable::Waiter* front = table_.Front(key)) {
      auto it = locks_.find(key);
      Lock* lock = it == locks_.end() ? nullptr : &it->second;
      const bool cancelled = front->cancelled();
      Holder* holder = lock == nullptr ? nullptr : HolderOf(*lock, front->params.owner);
      const bool mismatch = lock != nullptr && front->params.limit != lock->limit;
      if (!cancelled && holder == nullptr && !mismatch && !Fits(lock, front->params)) break;
      WaiterTable::Waiter w = *table_.PopFront(key);
      registry_.Unregister(w.id, w.cancel);
      absl::StatusOr<AcquireResult> r;
      if (cancelled) {
        r = AcquireCancelledError();
      } else if (holder != nullptr) {
        r = AsHolder(key, *lock, *holder, w.params, now, /*waited=*/true);
      } else if (mismatch) {
        r = LockKindMismatchError(key, lock->limit);
      } else {
        r = Grant(w.params, now);
        GrantOwnersWaiters(key, w.params.owner, now, deferred);
      }
      deferred.push_back([done = std::move(w.done), r = std::move(r)]() mutable {
        std::move(done)(std::move(r));
      });
    }
    ArmExpiry(key);
  }

  // `owner` was just granted `key`: its other parked calls are answered as
  // a holder's at once (re-entries, or refused) instead of waiting on their
  // own owner.
  void GrantOwnersWaiters(const LockKey& key, const std::string& owner, Clock::time_point now,
                          Deferred& deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Lock& lock = locks_[key];
    Holder* h = HolderOf(lock, owner);
    for (WaiterTable::Waiter& w : table_.PopOwner(key, owner)) {
      registry_.Unregister(w.id, w.cancel);
      absl::StatusOr<AcquireResult> r = AcquireCancelledError();
      if (!w.cancelled()) r = AsHolder(key, lock, *h, w.params, now, /*waited=*/true);
      deferred.push_back([done = std::move(w.done), r = std::move(r)]() mutable {
        std::move(done)(std::move(r));
      });
    }
  }

  // While waiters are parked on a held name, a timer at its earliest lease
  // end makes sure they are served when a holder stops renewing.
  void ArmExpiry(const LockKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (table_.Count(key) == 0) return;
    auto it = locks_.find(key);
    if (it == locks_.end()) return;
    Lock& lock = it->second;
    Clock::time_point at = Clock::time_point::max();
    for (const Holder& h : lock.holders) at = std::min(at, h.expires);
    if (lock.expiry_timer != 0) {
      if (lock.expiry_at <= at) return;  // fires first; re-armed then
      timers_->Cancel(lock.expiry_timer);
    }
    const uint64_t gen = ++expiry_gen_;
    lock.expiry_gen = gen;
    lock.expiry_at = at;
    lock.expiry_timer = timers_->ScheduleAt(at, [this, key, gen] { OnExpiryTimer(key, gen); });
  }

  void OnExpiryTimer(const LockKey& key, uint64_t gen) {
    Deferred deferred;
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) return;
      auto it = locks_.find(key);
      if (it == locks_.end() || it->second.expiry_gen != gen) return;
      it->second.expiry_timer = 0;
      ExpireIfDue(key, Clock::now(), deferred);
      ArmExpiry(key);  // the next lease end, or a lease renewed meanwhile
    }
    RunAll(deferred);
  }

  // The registry's StopFn: ends the wait of parked call `id` on `key`, if it
  // is still parked. A call that leaves the front may let those behind it in
  // (a SHARED call behind a cancelled EXCLUSIVE one).
  void OnStop(const LockKey& key, uint64_t id, WaiterRegistry::StopReason why) {
    std::optional<WaiterTable::Waiter> w;
    absl::StatusOr<AcquireResult> result;
    Deferred deferred;
    {
      absl::MutexLock l(&mu_);
      w = table_.Remove(key, id);
      if (!w.has_value()) return;
      registry_.Unregister(id, w->cancel);
      const Clock::time_point now = Clock::now();
      if (why == WaiterRegistry::StopReason::kCancelled) {
        result = AcquireCancelledError();
      } else if (why == WaiterRegistry::StopReason::kShutdown || shutdown_) {
        result = ShuttingDownError();
      } else {
        auto it = locks_.find(key);
        result = NotAcquired(key, it == locks_.end() ? nullptr : &it->second, now);
      }
      if (!shutdown_) Admit(key, now, deferred);
    }
    RunAll(deferred);
    std::move(w->done)(std::move(result));
  }

  // The live holders of `lock` (null: none) and the queue of `key`.
  LockState StateOf(const LockKey& key, const Lock* lock, Clock::time_point now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    LockState s;
    s.key = key;
    s.waiters = static_cast<uint32_t>(table_.Count(key));
    if (lock == nullptr) return s;
    for (const Holder& h : lock->holders) {
      if (h.expires <= now) continue;
      HolderState& out = s.holders.emplace_back();
      out.owner = h.owner;
      out.mode = h.mode;
      out.hold_count = h.hold_count;
      out.permits = h.permits;
      out.fencing_token = h.token;
      out.ttl_remaining = absl::FromChrono(h.expires - now);
    }
    if (s.holders.empty()) return s;
    s.limit = lock->limit;
    s.mode = s.holders.front().mode;  // an EXCLUSIVE holder is alone
    FillNewestHolder(s);
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
      LockState s = StateOf(it->first, &it->second, now);
      if (s.held) held.push_back(std::move(s));
    }
    return PageOf(std::move(held), p.page_size);
  }

  const MemoryOptions options_;
  mutable absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  // One counter for every name: each name's tokens grow with it.
  uint64_t next_token_ ABSL_GUARDED_BY(mu_);
  uint64_t expiry_gen_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<LockKey, Lock> locks_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<FreedKey, FreedBy, FreedHash, FreedEq> freed_ ABSL_GUARDED_BY(mu_);
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
