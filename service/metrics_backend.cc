#include "service/metrics_backend.h"

#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/time/clock.h"

namespace lockd {
namespace {

// Time for metrics: absl::Now() is the wall clock, but only differences of
// nearby readings are taken, and leases are tracked with a 1 s margin.
absl::Time Now() { return absl::Now(); }

constexpr absl::Duration kExpiryMargin = absl::Seconds(1);

size_t KeyHash(const LockKey& key) { return absl::Hash<LockKey>()(key); }
size_t OwnerHash(const std::string& owner) { return absl::Hash<std::string>()(owner); }
// The tracker's key of one holder of a shared lock or a semaphore (an
// exclusive hold is tracked under its lock's hash alone).
size_t HolderKey(size_t key, size_t owner) {
  return absl::Hash<std::pair<size_t, size_t>>()({key, owner});
}

}  // namespace

MetricsBackend::MetricsBackend(std::unique_ptr<Backend> inner, Metrics* metrics)
    : inner_(std::move(inner)), metrics_(metrics) {}

MetricsBackend::~MetricsBackend() = default;

void MetricsBackend::Granted(size_t key, size_t owner, int ns, uint64_t token, absl::Duration ttl,
                             absl::Time now) {
  Shard& s = ShardOf(key);
  bool regression = false, replaced = false;
  Hold old;
  {
    absl::MutexLock l(&s.mu);
    auto [it, inserted] = s.holds.try_emplace(key);
    Hold& h = it->second;
    if (!inserted && h.token == token && h.owner == owner) {  // reentrant: same holding
      h.until = now + ttl + kExpiryMargin;
      return;
    }
    if (!inserted) {
      // Another holding this replica still tracked (it ended elsewhere).
      regression = token <= h.token;
      replaced = true;
      old = h;
    }
    h = Hold{ns, token, owner, now, now + ttl + kExpiryMargin};
  }
  if (replaced) metrics_->HoldEnded(old.ns, HoldEnd::kExpired, now - old.since);
  if (regression) metrics_->FencingRegression();
  if (!replaced) metrics_->locks_held().Increment();
}

void MetricsBackend::Extended(size_t key, size_t owner, absl::Duration ttl, absl::Time now) {
  for (size_t k : {key, HolderKey(key, owner)}) {
    Shard& s = ShardOf(k);
    absl::MutexLock l(&s.mu);
    auto it = s.holds.find(k);
    if (it != s.holds.end() && it->second.owner == owner) {
      it->second.until = now + ttl + kExpiryMargin;
      return;
    }
  }
}

void MetricsBackend::HolderEnded(size_t key, size_t owner, HoldEnd how, absl::Time now) {
  // An exclusive hold (under the lock's hash) first: the common case.
  if (EndedIfOwner(key, owner, how, now) || EndedIfOwner(HolderKey(key, owner), owner, how, now)) {
    return;
  }
  // A hold of the owner that this replica did not see granted: a tracked
  // exclusive hold of another owner cannot coexist with it, so it ended.
  if (how == HoldEnd::kReleased) Ended(key, how, now);
}

void MetricsBackend::Ended(size_t key, HoldEnd how, absl::Time now) {
  Shard& s = ShardOf(key);
  Hold h;
  {
    absl::MutexLock l(&s.mu);
    auto it = s.holds.find(key);
    if (it == s.holds.end()) return;
    h = it->second;
    s.holds.erase(it);
  }
  metrics_->locks_held().Decrement();
  metrics_->HoldEnded(h.ns, how, now - h.since);
}

bool MetricsBackend::EndedIfOwner(size_t key, size_t owner, HoldEnd how, absl::Time now) {
  Shard& s = ShardOf(key);
  Hold h;
  {
    absl::MutexLock l(&s.mu);
    auto it = s.holds.find(key);
    if (it == s.holds.end() || it->second.owner != owner) return false;
    h = it->second;
    s.holds.erase(it);
  }
  metrics_->locks_held().Decrement();
  metrics_->HoldEnded(h.ns, how, now - h.since);
  return true;
}

void MetricsBackend::SweepExpired(absl::Time now) {
  for (Shard& s : shards_) {
    std::vector<Hold> ended;
    {
      absl::MutexLock l(&s.mu);
      for (auto it = s.holds.begin(); it != s.holds.end();) {
        if (it->second.until < now) {
          ended.push_back(it->second);
          s.holds.erase(it++);
        } else {
          ++it;
        }
      }
    }
    for (const Hold& h : ended) {
      metrics_->locks_held().Decrement();
      metrics_->HoldEnded(h.ns, HoldEnd::kExpired, now - h.since);
    }
  }
}

void MetricsBackend::Acquire(AcquireParams params, std::shared_ptr<CancelSignal> cancel,
                             Callback<AcquireResult> done) {
  const AcquireMode mode =
      params.wait > absl::ZeroDuration() ? AcquireMode::kWait : AcquireMode::kTry;
  const int ns = metrics_->NamespaceIndex(params.key.ns);
  const KindLabel kind = KindLabelOf(params);
  const absl::Time start = Now();
  if (mode == AcquireMode::kWait) metrics_->waiters().Increment();
  const size_t key = KeyHash(params.key);
  const size_t owner = OwnerHash(params.owner);
  inner_->Acquire(std::move(params), std::move(cancel),
                  [this, kind, mode, ns, start, key, owner,
                   done = std::move(done)](absl::StatusOr<AcquireResult> r) mutable {
                    const absl::Time now = Now();
                    AcquireLabel outcome = AcquireLabel::kError;
                    if (r.ok()) {
                      outcome = r->acquired ? AcquireLabel::kAcquired : AcquireLabel::kNotAcquired;
                      if (r->acquired) {
                        Granted(kind == KindLabel::kExclusive ? key : HolderKey(key, owner), owner,
                                ns, r->fencing_token, r->ttl, now);
                      }
                    } else if (absl::IsCancelled(r.status())) {
                      outcome = AcquireLabel::kCancelled;
                    }
                    if (mode == AcquireMode::kWait) {
                      metrics_->waiters().Decrement();
                    } else {
                      metrics_->BackendRequest(BackendOp::kAcquire, BackendResultOf(r.status()),
                                               now - start);
                    }
                    metrics_->AcquireDone(ns, kind, mode, outcome, now - start);
                    std::move(done)(std::move(r));
                  });
}

void MetricsBackend::Release(ReleaseParams params, Callback<ReleaseResult> done) {
  const absl::Time start = Now();
  const size_t key = KeyHash(params.key);
  const size_t owner = OwnerHash(params.owner);
  inner_->Release(std::move(params), [this, start, key, owner, done = std::move(done)](
                                         absl::StatusOr<ReleaseResult> r) mutable {
    const absl::Time now = Now();
    metrics_->BackendRequest(BackendOp::kRelease, BackendResultOf(r.status()), now - start);
    if (r.ok() && r->released) {
      HolderEnded(key, owner, HoldEnd::kReleased, now);
    } else if (IsLockNotHeld(r.status())) {
      // The holder learns its hold is gone; another owner's mistaken Release
      // must not end the holder's tracked hold.
      HolderEnded(key, owner, HoldEnd::kExpired, now);
    }
    std::move(done)(std::move(r));
  });
}

MetricsBackend::RenewCall MetricsBackend::StartRenew(const RenewParams& params) {
  return RenewCall{Now(), metrics_->NamespaceIndex(params.key.ns), KeyHash(params.key),
                   OwnerHash(params.owner)};
}

void MetricsBackend::Renewed(const RenewCall& call, const absl::StatusOr<RenewResult>& r) {
  const absl::Time now = Now();
  metrics_->BackendRequest(BackendOp::kRenew, BackendResultOf(r.status()), now - call.start);
  if (r.ok()) {
    metrics_->RenewDone(call.ns, RenewLabel::kOk);
    Extended(call.key, call.owner, r->ttl, now);
  } else if (IsLockNotHeld(r.status())) {
    metrics_->RenewDone(call.ns, RenewLabel::kLost);
    HolderEnded(call.key, call.owner, HoldEnd::kExpired, now);
  } else {
    metrics_->RenewDone(call.ns, RenewLabel::kError);
  }
}

void MetricsBackend::Renew(RenewParams params, Callback<RenewResult> done) {
  RenewCall call = StartRenew(params);
  inner_->Renew(std::move(params),
                [this, call, done = std::move(done)](absl::StatusOr<RenewResult> r) mutable {
                  Renewed(call, r);
                  std::move(done)(std::move(r));
                });
}

void MetricsBackend::RenewMany(std::vector<RenewParams> params, RenewManyCallback done) {
  std::vector<RenewCall> calls;
  calls.reserve(params.size());
  for (const RenewParams& p : params) calls.push_back(StartRenew(p));
  inner_->RenewMany(std::move(params),
                    [this, calls = std::move(calls), done = std::move(done)](
                        std::vector<absl::StatusOr<RenewResult>> results) mutable {
                      for (size_t i = 0; i < results.size() && i < calls.size(); ++i) {
                        Renewed(calls[i], results[i]);
                      }
                      std::move(done)(std::move(results));
                    });
}

void MetricsBackend::Describe(LockKey key, Callback<LockState> done) {
  const absl::Time start = Now();
  inner_->Describe(
      std::move(key), [this, start, done = std::move(done)](absl::StatusOr<LockState> r) mutable {
        metrics_->BackendRequest(BackendOp::kDescribe, BackendResultOf(r.status()), Now() - start);
        std::move(done)(std::move(r));
      });
}

void MetricsBackend::List(ListParams params, Callback<ListResult> done) {
  const absl::Time start = Now();
  inner_->List(std::move(params), [this, start,
                                   done = std::move(done)](absl::StatusOr<ListResult> r) mutable {
    metrics_->BackendRequest(BackendOp::kList, BackendResultOf(r.status()), Now() - start);
    std::move(done)(std::move(r));
  });
}

void MetricsBackend::ForceRelease(ForceReleaseParams params, Callback<ForceReleaseResult> done) {
  const absl::Time start = Now();
  const int ns = metrics_->NamespaceIndex(params.key.ns);
  const size_t key = KeyHash(params.key);
  const uint64_t token = params.fencing_token;
  inner_->ForceRelease(std::move(params), [this, start, ns, key, token, done = std::move(done)](
                                              absl::StatusOr<ForceReleaseResult> r) mutable {
    const absl::Time now = Now();
    metrics_->BackendRequest(BackendOp::kForceRelease, BackendResultOf(r.status()), now - start);
    ForceLabel outcome = ForceLabel::kError;
    if (r.ok()) {
      outcome = r->released ? ForceLabel::kReleased : ForceLabel::kNotHeld;
      if (r->released) {
        Ended(key, HoldEnd::kForceReleased, now);
        for (const HolderState& h : r->previous.holders) {  // shared and semaphore holders
          if (token == 0 || h.fencing_token == token) {
            EndedIfOwner(HolderKey(key, OwnerHash(h.owner)), OwnerHash(h.owner),
                         HoldEnd::kForceReleased, now);
          }
        }
      }
    } else if (IsFencingTokenMismatch(r.status())) {
      outcome = ForceLabel::kTokenMismatch;
    }
    metrics_->ForceReleaseDone(ns, outcome);
    std::move(done)(std::move(r));
  });
}

}  // namespace lockd
