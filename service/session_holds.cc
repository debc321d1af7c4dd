// What a session does with its holds (the rules are in session.h and
// session_holds.h): takeover at open, renewal rounds, expiry, `lost`, and
// the release at the end of the stream.

#include "service/session_holds.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "protos/proto_duration.h"
#include "service/acquire_call.h"
#include "service/session_reactor.h"
#include "util/log.h"

namespace lockd {

// The lost message must reach the client before the backend lets the hold
// go; a healthy hold is renewed every ttl/3 and never comes this close.
constexpr int kLostMarginDivisor = 10;  // kLostMargin = ttl / 10

void SessionHolds::Add(const LockKey& key, uint64_t token, absl::Time expires) {
  absl::MutexLock l(&mu_);
  Hold& h = holds_[key];
  h.token = token;
  h.expires = expires;
}

void SessionHolds::ScheduleRenewal(absl::Duration delay) {
  absl::MutexLock l(&mu_);
  ScheduleRenewalLocked(delay);
}

// --- Takeover (open.resume) -------------------------------------------------

void SessionHolds::TakeOver(SessionOpenParams::Resume ref,
                            absl::AnyInvocable<void(absl::StatusOr<v1::LockInfo>) &&> done) {
  LockKey key = ref.key;
  deps_.backend->Describe(std::move(key), [this, self = deps_.session->NewRef(),
                                           ref = std::move(ref), done = std::move(done)](
                                              absl::StatusOr<LockState> state) mutable {
    if (!state.ok()) {
      std::move(done)(state.status());
      return;
    }
    // The owner's own hold, among every holder of a shared lock or a
    // semaphore.
    bool held =
        state->held && state->owner == params_.owner && state->fencing_token == ref.fencing_token;
    for (const HolderState& h : state->holders) {
      held = held || (h.owner == params_.owner && h.fencing_token == ref.fencing_token);
    }
    if (!held) {
      std::move(done)(absl::NotFoundError("not held with that token"));
      return;
    }
    RenewParams renew{ref.key, params_.owner, params_.ttl, ref.fencing_token};
    deps_.backend->Renew(
        std::move(renew),
        [this, self = std::move(self), state = *std::move(state), token = ref.fencing_token,
         done = std::move(done), sent = absl::Now()](absl::StatusOr<RenewResult> r) mutable {
          if (!r.ok()) {
            std::move(done)(IsLockNotHeld(r.status()) ? absl::NotFoundError("gone") : r.status());
            return;
          }
          if (r->fencing_token != token) {
            std::move(done)(absl::NotFoundError("re-granted"));
            return;
          }
          v1::LockInfo info;
          ToLockInfo(state, deps_.backend->name(), &info);
          SetProtoDuration(r->ttl, info.mutable_ttl_remaining());
          Add(state.key, token, sent + params_.ttl);
          std::move(done)(std::move(info));
        });
  });
}

// --- Renewal ----------------------------------------------------------------

void SessionHolds::ScheduleRenewalLocked(absl::Duration delay) {
  ScheduleExpiryCheckLocked();
  if (renewal_ != Renewal::kIdle || holds_.empty()) return;
  renewal_ = Renewal::kScheduled;
  renew_timer_ =
      deps_.timers->Schedule(delay, [this, self = deps_.session->NewRef()] { RenewRound(); });
}

void SessionHolds::ScheduleExpiryCheckLocked() {
  if (expiry_timer_ != 0 || holds_.empty() || renewal_ == Renewal::kStopped) return;
  absl::Time first = absl::InfiniteFuture();
  for (const auto& [key, hold] : holds_) first = std::min(first, hold.expires);
  expiry_timer_ = deps_.timers->Schedule(first - params_.ttl / kLostMarginDivisor - absl::Now(),
                                         [this, self = deps_.session->NewRef()] { CheckExpiry(); });
}

void SessionHolds::CheckExpiry() {
  std::vector<std::pair<LockKey, uint64_t>> lost;
  {
    absl::MutexLock l(&mu_);
    expiry_timer_ = 0;
    if (renewal_ == Renewal::kStopped) return;
    const absl::Time limit = absl::Now() + params_.ttl / kLostMarginDivisor;
    for (auto it = holds_.begin(); it != holds_.end();) {
      // A release in flight on the lock decides by its own result.
      if (it->second.expires <= limit && it->second.releasing == 0) {
        lost.emplace_back(it->first, it->second.token);
        it = holds_.erase(it);
      } else {
        ++it;
      }
    }
    ScheduleExpiryCheckLocked();
  }
  for (const auto& [key, token] : lost) SendLost(key, token, "LEASE_EXPIRED");
}

void SessionHolds::RenewRound() {
  std::vector<RenewParams> params;
  std::vector<uint64_t> tokens;
  const absl::Time sent = absl::Now();
  {
    absl::MutexLock l(&mu_);
    if (renewal_ != Renewal::kScheduled) return;  // stopped
    renew_timer_ = 0;
    if (holds_.empty()) {
      renewal_ = Renewal::kIdle;
      return;
    }
    for (const auto& [key, hold] : holds_) {
      params.push_back(RenewParams{key, params_.owner, params_.ttl, hold.token});
      tokens.push_back(hold.token);
    }
    renewal_ = Renewal::kInFlight;
  }
  std::vector<LockKey> keys;
  keys.reserve(params.size());
  for (const RenewParams& p : params) keys.push_back(p.key);
  deps_.renewals->RenewMany(
      std::move(params),
      [this, self = deps_.session->NewRef(), keys = std::move(keys), tokens = std::move(tokens),
       sent](std::vector<absl::StatusOr<RenewResult>> results) {
        OnRenewed(keys, tokens, sent, results);
      });
}

void SessionHolds::OnRenewed(const std::vector<LockKey>& keys, const std::vector<uint64_t>& tokens,
                             absl::Time sent,
                             const std::vector<absl::StatusOr<RenewResult>>& results) {
  std::vector<std::pair<size_t, absl::string_view>> lost;  // index, reason
  {
    absl::MutexLock l(&mu_);
    if (renewal_ == Renewal::kInFlight) renewal_ = Renewal::kIdle;
    for (size_t i = 0; i < keys.size() && i < results.size(); ++i) {
      const absl::StatusOr<RenewResult>& r = results[i];
      auto it = holds_.find(keys[i]);
      // A hold released, lost or re-granted meanwhile is not this round's.
      if (it == holds_.end() || it->second.token != tokens[i]) continue;
      if (r.ok() && r->fencing_token == tokens[i]) {
        it->second.expires = sent + params_.ttl;
      } else if (r.ok() || (IsLockNotHeld(r.status()) && it->second.releasing == 0)) {
        // Gone (or re-granted under another token). A release in flight on
        // the lock explains a LOCK_NOT_HELD itself; its result decides.
        lost.emplace_back(i, absl::Now() >= it->second.expires ? "LEASE_EXPIRED" : "NOT_HELD");
        holds_.erase(it);
      }
      // Other errors (the backend unreachable): the next round tries again.
    }
    // Rounds start every lease/3 however long each takes (at once when a
    // round took longer), so a slow backend does not stretch the cadence.
    ScheduleRenewalLocked(sent + params_.ttl / 3 - absl::Now());
  }
  for (const auto& [i, reason] : lost) SendLost(keys[i], tokens[i], reason);
}

void SessionHolds::SendLost(const LockKey& key, uint64_t token, absl::string_view reason) {
  v1::SessionResponse resp;
  v1::LockLost* lost = resp.mutable_lost();
  lost->set_namespace_(key.ns);
  lost->set_name(key.name);
  lost->set_fencing_token(token);
  lost->set_reason(std::string(reason));
  deps_.writer->Send(std::move(resp));
}

// --- Releases and the end -----------------------------------------------------

void SessionHolds::Releasing(const LockKey& key) {
  absl::MutexLock l(&mu_);
  if (auto it = holds_.find(key); it != holds_.end()) ++it->second.releasing;
}

void SessionHolds::Released(const LockKey& key, const absl::StatusOr<ReleaseResult>& r) {
  absl::MutexLock l(&mu_);
  auto it = holds_.find(key);
  if (it == holds_.end()) return;
  --it->second.releasing;
  if ((r.ok() && r->hold_count == 0) || (!r.ok() && IsLockNotHeld(r.status()))) holds_.erase(it);
}

void SessionHolds::ForceReleased(const LockKey& key, uint64_t token) {
  {
    absl::MutexLock l(&mu_);
    auto it = holds_.find(key);
    if (it == holds_.end() || it->second.token != token) return;
    holds_.erase(it);
  }
  SendLost(key, token, "FORCE_RELEASED");
}

void SessionHolds::Stop() {
  absl::MutexLock l(&mu_);
  if (renewal_ == Renewal::kScheduled && deps_.timers->Cancel(renew_timer_)) renew_timer_ = 0;
  if (expiry_timer_ != 0 && deps_.timers->Cancel(expiry_timer_)) expiry_timer_ = 0;
  renewal_ = Renewal::kStopped;
}

std::vector<std::pair<LockKey, uint64_t>> SessionHolds::TakeAll() {
  std::vector<std::pair<LockKey, uint64_t>> all;
  absl::MutexLock l(&mu_);
  for (const auto& [key, hold] : holds_) all.emplace_back(key, hold.token);
  holds_.clear();
  return all;
}

// By the hold's token: a session cut off from its client ends late, after
// its owner may have released and acquired the lock again through another
// session; that hold has another token and LOCK_NOT_HELD leaves it alone.
void SessionHolds::ReleaseToZero(LockKey key, uint64_t token, absl::AnyInvocable<void() &&> done) {
  ReleaseParams p;
  p.key = key;
  p.owner = params_.owner;
  p.fencing_token = token;
  deps_.backend->Release(std::move(p), [this, self = deps_.session->NewRef(), key = std::move(key),
                                        token, done = std::move(done)](
                                           absl::StatusOr<ReleaseResult> r) mutable {
    if (r.ok() && r->hold_count > 0) {
      ReleaseToZero(std::move(key), token, std::move(done));
      return;
    }
    // LOCK_NOT_HELD: nothing of this session's left to release.
    if (!r.ok() && !IsLockNotHeld(r.status())) {
      LogWarning("session of \"", params_.owner, "\" ended but lock \"", key.name, "\" in ", key.ns,
                 " could not be released (", r.status().ToString(), "); its lease will end it");
    }
    std::move(done)();
  });
}

}  // namespace lockd
