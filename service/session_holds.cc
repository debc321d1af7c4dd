// What a Session does with its holds (the rules are in session.h): resume at
// open, renewal rounds, `lost`, and the release at the end of the stream.

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "protos/proto_duration.h"
#include "service/acquire_call.h"
#include "service/session_reactor.h"
#include "util/log.h"

namespace lockd {

// --- Resume ---------------------------------------------------------------

void SessionReactor::Resume(std::vector<SessionOpenParams::Resume> refs) {
  if (refs.empty()) {
    SendOpened({});
    return;
  }
  {
    absl::MutexLock l(&mu_);
    resumes_left_ = refs.size();
  }
  for (SessionOpenParams::Resume& ref : refs) ResumeOne(std::move(ref));
}

// Takes over one hold of the owner if it still has the token: Describe, then
// Renew (which also proves the owner holds it). NotFound: not taken over.
void SessionReactor::ResumeOne(SessionOpenParams::Resume ref) {
  // Taking a hold over needs `lock` on its namespace, as any operation on it
  // does (the denial is audited); a refused entry is not taken over.
  if (!Authorize(ref.key).ok()) {
    Resumed(absl::NotFoundError("not authorized"));
    return;
  }
  LockKey key = ref.key;
  backend_->Describe(std::move(key), [self = NewRef(), ref = std::move(ref)](
                                         absl::StatusOr<LockState> state) mutable {
    if (!state.ok()) {
      self->Resumed(state.status());
      return;
    }
    if (!state->held || state->owner != self->owner_ || state->fencing_token != ref.fencing_token) {
      self->Resumed(absl::NotFoundError("not held with that token"));
      return;
    }
    RenewParams renew{ref.key, self->owner_, self->ttl_, ref.fencing_token};
    SessionReactor* s = self.operator->();
    s->backend_->Renew(std::move(renew), [self = std::move(self), state = *std::move(state),
                                          sent = absl::Now()](absl::StatusOr<RenewResult> r) {
      if (!r.ok()) {
        self->Resumed(IsLockNotHeld(r.status()) ? absl::NotFoundError("gone") : r.status());
        return;
      }
      if (r->fencing_token != state.fencing_token) {
        self->Resumed(absl::NotFoundError("re-granted"));
        return;
      }
      v1::LockInfo info;
      ToLockInfo(state, self->backend_->name(), &info);
      SetProtoDuration(r->ttl, info.mutable_ttl_remaining());
      {
        absl::MutexLock l(&self->mu_);
        Hold& h = self->holds_[state.key];
        h.token = state.fencing_token;
        h.expires = sent + self->ttl_;
      }
      self->Resumed(std::move(info));
    });
  });
}

void SessionReactor::Resumed(absl::StatusOr<v1::LockInfo> info) {
  std::vector<v1::LockInfo> resumed;
  absl::Status error;
  {
    absl::MutexLock l(&mu_);
    if (info.ok()) {
      resumed_.push_back(*std::move(info));
    } else if (!absl::IsNotFound(info.status())) {
      resume_error_ = info.status();
    }
    if (--resumes_left_ > 0) return;
    resumed.swap(resumed_);
    error = resume_error_;
    ScheduleRenewalLocked(ttl_ / 3);
  }
  if (!error.ok()) {
    // The client cannot learn which holds are its own: it opens again.
    // Holds taken over so far are kept to their lease for that retry.
    BeginEnd(End::kResumeFailed,
             grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          absl::StrCat("could not resume the session's holds: ", error.message())));
    return;
  }
  SendOpened(std::move(resumed));
  ContinueEnd();  // the stream may have ended while the holds were checked
}

// --- Renewal --------------------------------------------------------------

void SessionReactor::ScheduleRenewalLocked(absl::Duration delay) {
  ScheduleExpiryCheckLocked();
  if (renew_timer_ != 0 || renewing_ || holds_.empty() || end_ != End::kNone) return;
  renew_timer_ = hub_->timers_.Schedule(delay, [self = NewRef()] { self->RenewRound(); });
}

// The lost message must reach the client before the backend lets the hold
// go; a healthy hold is renewed every ttl/3 and never comes this close.
constexpr int kLostMarginDivisor = 10;  // kLostMargin = ttl / 10

void SessionReactor::ScheduleExpiryCheckLocked() {
  if (expiry_timer_ != 0 || holds_.empty() || end_ != End::kNone) return;
  absl::Time first = absl::InfiniteFuture();
  for (const auto& [key, hold] : holds_) first = std::min(first, hold.expires);
  expiry_timer_ = hub_->timers_.Schedule(first - ttl_ / kLostMarginDivisor - absl::Now(),
                                         [self = NewRef()] { self->CheckExpiry(); });
}

void SessionReactor::CheckExpiry() {
  std::vector<std::pair<LockKey, uint64_t>> lost;
  {
    absl::MutexLock l(&mu_);
    expiry_timer_ = 0;
    if (end_ != End::kNone) return;
    const absl::Time limit = absl::Now() + ttl_ / kLostMarginDivisor;
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

void SessionReactor::RenewRound() {
  std::vector<RenewParams> params;
  std::vector<uint64_t> tokens;
  const absl::Time sent = absl::Now();
  {
    absl::MutexLock l(&mu_);
    renew_timer_ = 0;
    if (end_ != End::kNone || holds_.empty()) return;
    for (const auto& [key, hold] : holds_) {
      params.push_back(RenewParams{key, owner_, ttl_, hold.token});
      tokens.push_back(hold.token);
    }
    renewing_ = true;
  }
  std::vector<LockKey> keys;
  keys.reserve(params.size());
  for (const RenewParams& p : params) keys.push_back(p.key);
  hub_->renewals_.RenewMany(std::move(params),
                            [self = NewRef(), keys = std::move(keys), tokens = std::move(tokens),
                             sent](std::vector<absl::StatusOr<RenewResult>> results) {
                              self->OnRenewed(keys, tokens, sent, results);
                            });
}

void SessionReactor::OnRenewed(const std::vector<LockKey>& keys,
                               const std::vector<uint64_t>& tokens, absl::Time sent,
                               const std::vector<absl::StatusOr<RenewResult>>& results) {
  std::vector<std::pair<size_t, absl::string_view>> lost;  // index, reason
  {
    absl::MutexLock l(&mu_);
    renewing_ = false;
    for (size_t i = 0; i < keys.size() && i < results.size(); ++i) {
      const absl::StatusOr<RenewResult>& r = results[i];
      auto it = holds_.find(keys[i]);
      // A hold released, lost or re-granted meanwhile is not this round's.
      if (it == holds_.end() || it->second.token != tokens[i]) continue;
      if (r.ok() && r->fencing_token == tokens[i]) {
        it->second.expires = sent + ttl_;
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
    ScheduleRenewalLocked(sent + ttl_ / 3 - absl::Now());
  }
  for (const auto& [i, reason] : lost) SendLost(keys[i], tokens[i], reason);
}

void SessionReactor::SendLost(const LockKey& key, uint64_t token, absl::string_view reason) {
  v1::SessionResponse resp;
  v1::LockLost* lost = resp.mutable_lost();
  lost->set_namespace_(key.ns);
  lost->set_name(key.name);
  lost->set_fencing_token(token);
  lost->set_reason(std::string(reason));
  Send(std::move(resp));
}

void SessionReactor::ForceReleased(const LockKey& key, const std::string& owner, uint64_t token) {
  {
    absl::MutexLock l(&mu_);
    if (!opened_ || owner != owner_) return;
    auto it = holds_.find(key);
    if (it == holds_.end() || it->second.token != token) return;
    holds_.erase(it);
  }
  SendLost(key, token, "FORCE_RELEASED");
}

// --- Release at the end ---------------------------------------------------

// By the hold's token: a session cut off from its client ends late, after
// its owner may have released and acquired the lock again through another
// session; that hold has another token and LOCK_NOT_HELD leaves it alone.
void SessionReactor::ReleaseToZero(LockKey key, uint64_t token) {
  ReleaseParams p;
  p.key = key;
  p.owner = owner_;
  p.fencing_token = token;
  backend_->Release(std::move(p), [self = NewRef(), key = std::move(key),
                                   token](absl::StatusOr<ReleaseResult> r) mutable {
    if (r.ok() && r->hold_count > 0) {
      self->ReleaseToZero(std::move(key), token);
      return;
    }
    // LOCK_NOT_HELD: nothing of this session's left to release.
    if (!r.ok() && !IsLockNotHeld(r.status())) {
      LogWarning("session of \"", self->owner_, "\" ended but lock \"", key.name, "\" in ", key.ns,
                 " could not be released (", r.status().ToString(), "); its lease will end it");
    }
    self->Released();
  });
}

void SessionReactor::Released() {
  {
    absl::MutexLock l(&mu_);
    --releases_left_;
  }
  MaybeFinish();
}

// --- SessionHub -----------------------------------------------------------

SessionHub::SessionHub(Backend* backend, LeaseBounds lease, const Authorizer* authz,
                       std::atomic<int64_t>* in_flight)
    : backend_(backend), lease_(lease), authz_(authz), in_flight_(in_flight), renewals_(backend) {}

SessionHub::~SessionHub() = default;

grpc::ServerBidiReactor<v1::SessionRequest, v1::SessionResponse>* SessionHub::Open(
    grpc::CallbackServerContext* ctx) {
  auto* session = new SessionReactor(this, ctx);
  session->Begin();
  return session;
}

bool SessionHub::Add(SessionReactor* s) {
  absl::MutexLock l(&mu_);
  if (ending_) return false;
  live_.insert(s);
  return true;
}

void SessionHub::Remove(SessionReactor* s) {
  absl::MutexLock l(&mu_);
  live_.erase(s);
}

// Sessions are called under mu_: a session leaves live_ (in OnDone, under
// mu_) before it can be deleted, so every one in live_ is alive here.
void SessionHub::EndAll() {
  absl::MutexLock l(&mu_);
  ending_ = true;
  for (SessionReactor* s : live_) s->EndForShutdown();
}

void SessionHub::ForceReleased(const LockKey& key, const std::string& owner, uint64_t token) {
  absl::MutexLock l(&mu_);
  for (SessionReactor* s : live_) s->ForceReleased(key, owner, token);
}

size_t SessionHub::size() const {
  absl::MutexLock l(&mu_);
  return live_.size();
}

}  // namespace lockd
