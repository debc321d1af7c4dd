#include "backends/common/wait_engine.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "backends/common/errors.h"

namespace lockd {
namespace {

// A grant whose lease_start the strategy left unknown gets `sent`, a moment
// before its attempt reached the server.
void StampLeaseStart(TryResult& r, absl::Time sent) {
  if (r.result.ok() && r.result->acquired && r.result->lease_start == absl::InfinitePast()) {
    r.result->lease_start = sent;
  }
}

bool AsksShared(const AcquireParams& p) { return p.limit == 0 && p.mode == LockMode::kShared; }
bool AsksSemaphore(const AcquireParams& p) { return p.limit > 0; }
bool AsksExclusiveLock(const AcquireParams& p) {
  return p.limit == 0 && p.mode == LockMode::kExclusive;
}
// Whether a call asking `p` may be granted beside holders (not only on a
// free name).
bool JoinsHolders(const AcquireParams& p) { return !AsksExclusiveLock(p); }

// The mode the owner of a call asking `p` holds once granted `r`; nullopt
// when it cannot be told (a SHARED ask re-entering some hold).
std::optional<LockMode> HeldAfterGrant(const AcquireParams& p, const AcquireResult& r) {
  if (!AsksShared(p)) return LockMode::kExclusive;  // an exclusive lock, or semaphore permits
  if (r.hold_count == 1) return LockMode::kShared;
  return std::nullopt;
}

}  // namespace

WaitEngine::WaitEngine(LockStrategy* strategy, TimerQueue* timers, size_t max_waiters)
    : strategy_(strategy),
      timers_(timers),
      registry_(timers, max_waiters,
                [this](const LockKey& key, uint64_t id, WaiterRegistry::StopReason why) {
                  OnStop(key, id, why);
                }) {}

WaitEngine::~WaitEngine() { Shutdown(); }

void WaitEngine::Acquire(AcquireParams params, std::shared_ptr<CancelSignal> cancel,
                         Callback<AcquireResult> done) {
  TryKind kind = TryKind::kFirst;
  uint64_t arrival = 0;
  bool closed;
  {
    absl::MutexLock l(&mu_);
    closed = registry_.closed();
    if (!closed) {
      // Calls of this process are served first come, first served: while some
      // wait (parked, or trying: first attempts and joiners included), a
      // newcomer may only re-enter or replay, whether it would wait too or
      // only tries.
      auto it = keys_.find(params.key);
      const bool behind =
          (it != keys_.end() && it->second.trying()) || table_.Count(params.key) > 0;
      if (behind) kind = TryKind::kBehind;
      if (params.wait > absl::ZeroDuration()) {
        // A first call may take the lock, so later calls stay behind it and
        // no head starts until it is back. (A kBehind attempt cannot take
        // the lock: it holds nothing back.)
        KeyState& k = keys_[params.key];
        if (!behind) ++k.firsts;
        arrival = ++arrivals_;
      }
    }
  }
  if (closed) {
    std::move(done)(ShuttingDownError());
    return;
  }
  SteadyClock::time_point deadline = SteadyAfter(params.wait);
  Waiter w{std::move(params), std::move(cancel), std::move(done), deadline};
  w.arrival = arrival;
  Try(std::move(w), kind,
      kind == TryKind::kFirst && arrival != 0 ? &WaitEngine::OnCountedFirstTry
                                              : &WaitEngine::OnFirstTry);
}

void WaitEngine::Try(Waiter w, TryKind kind, void (WaitEngine::*then)(Waiter, TryResult)) {
  // The waiter stays where it is (on the heap) while the attempt runs, so
  // that the strategy may read `params` until it calls `done`.
  auto owned = std::make_unique<Waiter>(std::move(w));
  const AcquireParams& p = owned->params;
  const absl::Time sent = absl::Now();
  strategy_->TryOnce(p, kind, [this, then, sent, owned = std::move(owned)](TryResult r) mutable {
    StampLeaseStart(r, sent);
    (this->*then)(std::move(*owned), std::move(r));
  });
}

void WaitEngine::OnFirstTry(Waiter w, TryResult r) {
  Deferred deferred;
  {
    absl::MutexLock l(&mu_);
    ParseFirstLocked(w, r, /*counted=*/false, deferred);
  }
  RunAll(deferred);
}

void WaitEngine::OnCountedFirstTry(Waiter w, TryResult r) {
  Deferred deferred;
  {
    absl::MutexLock l(&mu_);
    ParseFirstLocked(w, r, /*counted=*/true, deferred);
  }
  RunAll(deferred);
}

void WaitEngine::ParseFirstLocked(Waiter& w, TryResult& r, bool counted, Deferred& deferred) {
  const LockKey key = w.params.key;
  if (counted) --keys_[key].firsts;
  if (!r.result.ok() || r.result->acquired || w.params.wait <= absl::ZeroDuration()) {
    if (counted && r.result.ok() && r.result->acquired && table_.Count(key) > 0) {
      // Calls that came in while this one tried are parked behind it: as
      // after a head's grant, its owner's re-enter and the next may join.
      KeyState& k = keys_[key];
      ObserveLocked(k, r);
      ReenterOwnerLocked(key, k, w.params.owner, HeldAfterGrant(w.params, *r.result), deferred);
      AfterGrantLocked(key, k, w.params, r, deferred);
    }
    Finish(key, std::move(w.done), std::move(r.result), deferred);
  } else if (registry_.closed()) {
    Finish(key, std::move(w.done), ShuttingDownError(), deferred);
  } else if (SteadyClock::now() >= w.deadline) {
    Finish(key, std::move(w.done), std::move(r.result), deferred);
  } else {
    ParkFirstLocked(w, r, deferred);
  }
  if (!counted) return;
  // The last first attempt in flight is back: a wake that came meanwhile
  // starts the head now.
  KeyState& k = keys_[key];
  if (k.firsts == 0 && k.joining == 0 && k.wake_pending && !registry_.closed()) {
    StartHeadLocked(key, k, deferred);
  }
  ForgetIfIdleLocked(key);
}

void WaitEngine::ParkFirstLocked(Waiter& w, TryResult& r, Deferred& deferred) {
  const LockKey key = w.params.key;
  // Registered until answered: the registry keeps its deadline, cancel hook
  // and place under max_waiters while it is parked or trying again.
  absl::StatusOr<uint64_t> id = registry_.RegisterAdmitted(key, w.deadline, w.cancel);
  if (!id.ok()) {
    Finish(key, std::move(w.done), id.status(), deferred);
    return;
  }
  w.id = *id;
  KeyState& k = keys_[key];
  const bool was_active = k.active;
  if (!k.active) {
    k.active = true;
    strategy_->KeyActive(key);
  }
  ObserveLocked(k, r);
  const bool first = !k.trying() && table_.Count(key) == 0;
  w.done = Registered(w, std::move(w.done));
  if (w.cancelled()) {
    Finish(key, std::move(w.done), AcquireCancelledError(), deferred);
    return;
  }
  table_.Push(std::move(w));
  if (k.trying()) {
    // The head, or a call ahead whose first attempt is in flight, may have
    // looked before the release this attempt saw. A head waits until the
    // first attempts are back (ParseFirstLocked), so none overtakes them.
    if (!r.result->current.held) k.wake_pending = true;
    if (!k.head_in_flight) ScheduleLocked(key, k, strategy_->NextTry(key, TryKind::kFirst, r));
  } else if (k.wake_pending || (first && was_active)) {
    // Woken while first attempts were in flight; or nobody ahead will be
    // woken for this call, and the lock's wake-ups are live already: one
    // retry now closes the gap since the attempt.
    StartHeadLocked(key, k, deferred);
  } else {
    ScheduleLocked(key, k, strategy_->NextTry(key, TryKind::kFirst, r));
  }
  ReenterHoldersLocked(key, k, r.result->current, deferred);
}

void WaitEngine::Wake(const LockKey& key, uint64_t released_token) {
  Deferred deferred;
  {
    absl::MutexLock l(&mu_);
    if (registry_.closed()) return;
    auto it = keys_.find(key);
    if (it == keys_.end()) return;
    KeyState& k = it->second;
    if (released_token != 0 && released_token < k.seen_token) return;
    if (k.head_in_flight) {
      k.wake_pending = true;
    } else {
      StartHeadLocked(key, k, deferred);
    }
  }
  RunAll(deferred);
}

void WaitEngine::OwnerHolds(const LockKey& key, const std::string& owner, uint64_t token,
                            LockMode mode) {
  Deferred deferred;
  {
    absl::MutexLock l(&mu_);
    if (registry_.closed()) return;
    auto it = keys_.find(key);
    if (it == keys_.end()) return;
    it->second.seen_token = std::max(it->second.seen_token, token);
    ReenterOwnerLocked(key, it->second, owner, mode, deferred);
  }
  RunAll(deferred);
}

std::optional<WaitEngine::Head> WaitEngine::TakeHead(const LockKey& key) {
  Deferred deferred;
  std::optional<Waiter> w;
  {
    absl::MutexLock l(&mu_);
    auto it = keys_.find(key);
    if (!registry_.closed() && it != keys_.end()) w = PopHeadLocked(key, it->second, deferred);
  }
  RunAll(deferred);
  if (!w.has_value()) return std::nullopt;
  return Head(*std::move(w), absl::Now());
}

void WaitEngine::FinishHead(Head head, TryResult r) {
  StampLeaseStart(r, head.taken_);
  OnHeadResult(std::move(head.w_), std::move(r));
}

uint32_t WaitEngine::Waiting(const LockKey& key) const {
  absl::MutexLock l(&mu_);
  return WaitingLocked(key);
}

uint32_t WaitEngine::WaitingLocked(const LockKey& key) const {
  auto it = keys_.find(key);
  size_t n = table_.Count(key);
  if (it != keys_.end()) n += (it->second.head_in_flight ? 1 : 0) + it->second.joining;
  return static_cast<uint32_t>(n);
}

void WaitEngine::Shutdown() {
  // Without mu_: every parked call is answered ShuttingDownError() through
  // OnStop, before Close() returns.
  registry_.Close();
  absl::MutexLock l(&mu_);
  for (auto& [key, k] : keys_) {
    if (k.timer != 0) timers_->Cancel(k.timer);
    k.timer = 0;
  }
}

std::optional<WaiterTable::Waiter> WaitEngine::PopHeadLocked(const LockKey& key, KeyState& k,
                                                             Deferred& deferred) {
  if (k.head_in_flight) return std::nullopt;
  if (k.firsts > 0 || k.joining > 0) {
    // A call that arrived earlier than the parked ones may be about to park
    // ahead of them: the head starts when the first attempts (or the
    // joiners) are back.
    k.wake_pending = true;
    return std::nullopt;
  }
  while (std::optional<Waiter> w = table_.PopFront(key)) {
    if (w->cancelled()) {
      deferred.push_back(
          [done = std::move(w->done)]() mutable { std::move(done)(AcquireCancelledError()); });
      continue;
    }
    k.head_in_flight = true;
    k.wake_pending = false;
    if (k.timer != 0) {
      timers_->Cancel(k.timer);
      k.timer = 0;
    }
    return w;
  }
  return std::nullopt;
}

void WaitEngine::StartHeadLocked(const LockKey& key, KeyState& k, Deferred& deferred) {
  std::optional<Waiter> w = PopHeadLocked(key, k, deferred);
  if (!w.has_value()) return;
  deferred.push_back([this, w = *std::move(w)]() mutable {
    Try(std::move(w), TryKind::kHead, &WaitEngine::OnHeadResult);
  });
}

void WaitEngine::OnHeadResult(Waiter w, TryResult r) {
  const LockKey key = w.params.key;
  Deferred deferred;
  {
    absl::MutexLock l(&mu_);
    auto it = keys_.find(key);
    if (registry_.closed() || it == keys_.end()) {
      // A grant is still the caller's; anything else ends with the shutdown.
      if (!r.result.ok() || !r.result->acquired) r.result = ShuttingDownError();
      Finish(key, std::move(w.done), std::move(r.result), deferred);
    } else {
      KeyState& k = it->second;
      k.head_in_flight = false;
      ObserveLocked(k, r);
      const absl::StatusOr<AcquireResult>& res = r.result;
      if (res.ok() && res->acquired) {
        k.wake_pending = false;
        // The owner's other calls re-enter; the rest are served at once if
        // they join this holder, else on a wake, or when the strategy wants
        // to look again (the new lease's end).
        ReenterOwnerLocked(key, k, w.params.owner, HeldAfterGrant(w.params, *res), deferred);
        AfterGrantLocked(key, k, w.params, r, deferred);
        Finish(key, std::move(w.done), std::move(r.result), deferred);
      } else if (!res.ok() && res.status().code() != absl::StatusCode::kUnavailable) {
        Finish(key, std::move(w.done), res.status(), deferred);
        if (table_.Count(key) > 0)
          ScheduleLocked(key, k, strategy_->NextTry(key, TryKind::kHead, r));
      } else {
        // Lost, or the server is unreachable: back to the front.
        if (!ReparkLocked(w, deferred) || k.wake_pending) {
          StartHeadLocked(key, k, deferred);
        } else {
          ScheduleLocked(key, k, strategy_->NextTry(key, TryKind::kHead, r));
        }
        if (res.ok()) ReenterHoldersLocked(key, k, res->current, deferred);
      }
    }
    ForgetIfIdleLocked(key);
  }
  RunAll(deferred);
}

void WaitEngine::OnReentrantResult(Waiter w, TryResult r) {
  const LockKey key = w.params.key;
  Deferred deferred;
  {
    absl::MutexLock l(&mu_);
    auto it = keys_.find(key);
    if (it != keys_.end()) --it->second.reentering;
    const absl::StatusOr<AcquireResult>& res = r.result;
    if (res.ok() && res->acquired) {
      Finish(key, std::move(w.done), std::move(r.result), deferred);
    } else if (registry_.closed() || it == keys_.end()) {
      Finish(key, std::move(w.done), ShuttingDownError(), deferred);
    } else if (!res.ok() && res.status().code() != absl::StatusCode::kUnavailable) {
      Finish(key, std::move(w.done), res.status(), deferred);
    } else {
      // The owner no longer holds the lock (released meanwhile): back to the
      // front, and the lock may well be free.
      KeyState& k = it->second;
      ReparkLocked(w, deferred);
      if (!res.ok()) {
        ScheduleLocked(key, k, strategy_->NextTry(key, TryKind::kReentrant, r));
      } else if (k.head_in_flight) {
        k.wake_pending = true;
      } else {
        StartHeadLocked(key, k, deferred);
      }
    }
    ForgetIfIdleLocked(key);
  }
  RunAll(deferred);
}

void WaitEngine::OnJoinResult(Waiter w, TryResult r) {
  const LockKey key = w.params.key;
  Deferred deferred;
  {
    absl::MutexLock l(&mu_);
    auto it = keys_.find(key);
    if (it != keys_.end()) --it->second.joining;
    const absl::StatusOr<AcquireResult>& res = r.result;
    if (registry_.closed() || it == keys_.end()) {
      // A grant is still the caller's; anything else ends with the shutdown.
      if (!res.ok() || !res->acquired) r.result = ShuttingDownError();
      Finish(key, std::move(w.done), std::move(r.result), deferred);
    } else {
      KeyState& k = it->second;
      ObserveLocked(k, r);
      if (res.ok() && res->acquired) {
        ReenterOwnerLocked(key, k, w.params.owner, HeldAfterGrant(w.params, *res), deferred);
        Finish(key, std::move(w.done), std::move(r.result), deferred);
      } else if (!res.ok() && res.status().code() != absl::StatusCode::kUnavailable) {
        Finish(key, std::move(w.done), res.status(), deferred);
      } else {
        // Lost (another replica's call was ahead, or a writer came in), or
        // the server is unreachable: parked again in its place.
        ReparkLocked(w, deferred, /*front=*/false);
        if (res.ok()) ReenterHoldersLocked(key, k, res->current, deferred);
      }
      if (k.joining == 0 && table_.Count(key) > 0) {
        // The last joiner is back: a wake that came meanwhile starts the
        // head; else it tries when the strategy wants to look again.
        if (k.wake_pending) {
          StartHeadLocked(key, k, deferred);
        } else {
          ScheduleLocked(key, k, strategy_->NextTry(key, TryKind::kHead, r));
        }
      }
    }
    ForgetIfIdleLocked(key);
  }
  RunAll(deferred);
}

bool WaitEngine::ReparkLocked(Waiter& w, Deferred& deferred, bool front) {
  if (w.cancelled()) {
    deferred.push_back(
        [done = std::move(w.done)]() mutable { std::move(done)(AcquireCancelledError()); });
    return false;
  }
  // The registry's deadline timer may have fired while the call was out of
  // the table (OnStop found nothing): it ends once back, unless the caller
  // pops it again at once.
  if (SteadyClock::now() >= w.deadline) {
    deferred.push_back([this, key = w.params.key, id = w.id] {
      OnStop(key, id, WaiterRegistry::StopReason::kDeadline);
    });
  }
  if (front) {
    table_.PushFront(std::move(w));
  } else {
    table_.Push(std::move(w));
  }
  return true;
}

void WaitEngine::ScheduleLocked(const LockKey& key, KeyState& k, absl::Duration delay) {
  if (delay == absl::InfiniteDuration()) return;
  SteadyClock::time_point at = SteadyAfter(std::max(delay, absl::ZeroDuration()));
  if (k.timer != 0) {
    if (k.timer_at <= at) return;  // an earlier retry is already due
    timers_->Cancel(k.timer);
  }
  k.timer_at = at;
  // The generation tells a timer that was replaced while it started to run.
  uint64_t gen = ++k.timer_gen;
  k.timer = timers_->ScheduleAt(at, [this, key, gen] { OnRetryTimer(key, gen); });
}

void WaitEngine::OnRetryTimer(const LockKey& key, uint64_t gen) {
  Deferred deferred;
  {
    absl::MutexLock l(&mu_);
    if (registry_.closed()) return;
    auto it = keys_.find(key);
    if (it == keys_.end() || it->second.timer_gen != gen) return;
    it->second.timer = 0;
    StartHeadLocked(key, it->second, deferred);
  }
  RunAll(deferred);
}

void WaitEngine::ReenterOwnerLocked(const LockKey& key, KeyState& k, const std::string& owner,
                                    std::optional<LockMode> held, Deferred& deferred) {
  if (owner.empty()) return;
  // In an unknown mode, the owner's EXCLUSIVE calls may be re-entries or
  // upgrades: they stay parked and their own attempt tells.
  auto take = [&held](const Waiter& w) { return held.has_value() || JoinsHolders(w.params); };
  for (Waiter& w : table_.PopOwner(key, owner, take)) {
    if (w.cancelled()) {
      deferred.push_back(
          [done = std::move(w.done)]() mutable { std::move(done)(AcquireCancelledError()); });
      continue;
    }
    if (held == LockMode::kShared && AsksExclusiveLock(w.params)) {
      deferred.push_back([done = std::move(w.done), key]() mutable {
        std::move(done)(UpgradeWouldBlockError(key));
      });
      continue;
    }
    ++k.reentering;
    deferred.push_back([this, w = std::move(w)]() mutable {
      Try(std::move(w), TryKind::kReentrant, &WaitEngine::OnReentrantResult);
    });
  }
}

void WaitEngine::ReenterHoldersLocked(const LockKey& key, KeyState& k, const LockState& current,
                                      Deferred& deferred) {
  if (!current.held) return;
  if (current.holders.empty()) {
    // A backend that reports the newest holder only.
    const LockMode mode = current.limit > 0 ? LockMode::kExclusive : current.mode;
    ReenterOwnerLocked(key, k, current.owner, mode, deferred);
    return;
  }
  for (const HolderState& h : current.holders) {
    ReenterOwnerLocked(key, k, h.owner, h.mode, deferred);
  }
}

void WaitEngine::AfterGrantLocked(const LockKey& key, KeyState& k, const AcquireParams& granted,
                                  const TryResult& r, Deferred& deferred) {
  const Waiter* next = table_.Front(key);
  if (next == nullptr) return;
  const bool readers = AsksShared(granted) && AsksShared(next->params);
  if (readers && strategy_->TriesReadersTogether() && !k.head_in_flight) {
    // No release is coming that would wake them: the run of readers at the
    // front tries together.
    while ((next = table_.Front(key)) != nullptr && AsksShared(next->params)) {
      std::optional<Waiter> w = table_.PopFront(key);
      if (w->cancelled()) {
        deferred.push_back(
            [done = std::move(w->done)]() mutable { std::move(done)(AcquireCancelledError()); });
        continue;
      }
      ++k.joining;
      deferred.push_back([this, w = *std::move(w)]() mutable {
        Try(std::move(w), TryKind::kJoin, &WaitEngine::OnJoinResult);
      });
    }
  } else if (readers || (AsksSemaphore(granted) && AsksSemaphore(next->params))) {
    // No release is coming that would wake it.
    StartHeadLocked(key, k, deferred);
  } else {
    ScheduleLocked(key, k, strategy_->NextTry(key, TryKind::kHead, r));
  }
}

void WaitEngine::ObserveLocked(KeyState& k, const TryResult& r) {
  if (!r.result.ok()) return;
  uint64_t token = r.result->acquired ? r.result->fencing_token : r.result->current.fencing_token;
  k.seen_token = std::max(k.seen_token, token);
}

void WaitEngine::ForgetIfIdleLocked(const LockKey& key) {
  if (registry_.closed()) return;  // the strategy may be stopping; nothing waits any more
  auto it = keys_.find(key);
  if (it == keys_.end()) return;
  KeyState& k = it->second;
  if (k.trying() || k.reentering > 0 || table_.Count(key) > 0) return;
  if (k.timer != 0) timers_->Cancel(k.timer);
  const bool active = k.active;
  keys_.erase(it);
  if (active) strategy_->KeyIdle(key);
}

Callback<AcquireResult> WaitEngine::Registered(const Waiter& w, Callback<AcquireResult> done) {
  return [this, key = w.params.key, id = w.id, cancel = w.cancel,
          done = std::move(done)](absl::StatusOr<AcquireResult> r) mutable {
    {
      absl::MutexLock l(&mu_);
      registry_.Unregister(id, cancel);
      ForgetIfIdleLocked(key);
    }
    std::move(done)(std::move(r));
  };
}

void WaitEngine::Finish(const LockKey& key, Callback<AcquireResult> done,
                        absl::StatusOr<AcquireResult> r, Deferred& deferred) {
  if (r.ok() && !r->acquired) {
    r->current.key = key;
    r->current.waiters = WaitingLocked(key);
  }
  deferred.push_back(
      [done = std::move(done), r = std::move(r)]() mutable { std::move(done)(std::move(r)); });
}

void WaitEngine::OnStop(const LockKey& key, uint64_t id, WaiterRegistry::StopReason why) {
  std::optional<Waiter> w;
  Deferred deferred;
  {
    absl::MutexLock l(&mu_);
    const Waiter* front = table_.Front(key);
    const bool was_front = front != nullptr && front->id == id;
    w = table_.Remove(key, id);
    // A call that left the front may have held back one that can join the
    // holders now, and no release will wake that one.
    auto it = keys_.find(key);
    if (w.has_value() && was_front && !registry_.closed() && it != keys_.end() &&
        !it->second.head_in_flight && it->second.joining == 0) {
      const Waiter* next = table_.Front(key);
      if (next != nullptr && JoinsHolders(next->params)) StartHeadLocked(key, it->second, deferred);
    }
  }
  RunAll(deferred);
  if (!w.has_value()) return;
  switch (why) {
    case WaiterRegistry::StopReason::kDeadline:
      OnTimeout(*std::move(w));
      return;
    case WaiterRegistry::StopReason::kCancelled:
      std::move(w->done)(AcquireCancelledError());
      return;
    case WaiterRegistry::StopReason::kShutdown:
      std::move(w->done)(ShuttingDownError());
      return;
  }
}

void WaitEngine::OnTimeout(Waiter w) {
  const LockKey key = w.params.key;
  strategy_->Current(key,
                     [this, key, done = std::move(w.done)](absl::StatusOr<LockState> s) mutable {
                       absl::StatusOr<AcquireResult> r = AcquireResult{};
                       if (s.ok()) {
                         r->current = *std::move(s);
                       } else {
                         r = s.status();
                       }
                       Deferred deferred;
                       {
                         absl::MutexLock l(&mu_);
                         Finish(key, std::move(done), std::move(r), deferred);
                       }
                       RunAll(deferred);
                     });
}

}  // namespace lockd
