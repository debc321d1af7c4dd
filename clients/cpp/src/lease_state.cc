#include "clients/cpp/src/lease_state.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "clients/cpp/src/errors.h"

namespace lockd::client_internal {

LeaseState::LeaseState(Params p)
    : ns(std::move(p.ns)),
      name(std::move(p.name)),
      owner(std::move(p.owner)),
      fencing_token(p.fencing_token),
      hold_count(p.hold_count),
      mode(p.mode),
      limit(p.limit),
      permits(p.permits),
      ttl(p.ttl),
      drift(p.drift),
      auto_renew(p.auto_renew),
      session(p.session),
      valid_until_(p.valid_until),
      on_lost_(std::move(p.on_lost)) {}

SteadyTime LeaseState::valid_until() const {
  absl::MutexLock l(&mu_);
  return valid_until_;
}

void LeaseState::SetValidUntil(SteadyTime until) {
  absl::MutexLock l(&mu_);
  valid_until_ = until;
}

absl::Status LeaseState::lost_status() const {
  absl::MutexLock l(&mu_);
  return lost_;
}

bool LeaseState::active() const {
  absl::MutexLock l(&mu_);
  return active_;
}

LostCallback LeaseState::MarkLostLocked(absl::Status why) {
  if (!lost_.ok()) return nullptr;
  lost_ = std::move(why);
  if (!active_) return nullptr;
  return std::exchange(on_lost_, nullptr);
}

void LeaseState::MarkLost(absl::Status why) {
  LostCallback callback;
  absl::Status copy;
  {
    absl::MutexLock l(&mu_);
    callback = MarkLostLocked(std::move(why));
    copy = lost_;
  }
  if (callback) callback(copy);
}

bool LeaseState::CheckExpiry(SteadyTime now) {
  {
    absl::MutexLock l(&mu_);
    if (!lost_.ok()) return true;
    if (!active_ || now < valid_until_) return false;
  }
  MarkLost(
      LockLostError("VALIDITY_EXPIRED",
                    absl::StrCat("lease of ", DescribeLock(ns, name),
                                 " lost: its validity ran out before a renewal succeeded (ttl ",
                                 absl::FormatDuration(ttl), ")")));
  return true;
}

absl::Status LeaseState::OnRenewed(SteadyTime send_time, SteadyTime reply_time,
                                   absl::Duration granted, uint64_t token) {
  LostCallback callback;
  absl::Status result;
  {
    absl::MutexLock l(&mu_);
    if (lost_.ok() && token != fencing_token) {
      callback = MarkLostLocked(LockLostError(
          "FENCING_TOKEN_CHANGED",
          absl::StrCat("lease of ", DescribeLock(ns, name),
                       " lost: a renewal reported fencing token ", token, " instead of ",
                       fencing_token, " (the hold ended and the lock was granted again)")));
    } else if (lost_.ok() && reply_time >= valid_until_) {
      callback = MarkLostLocked(LockLostError(
          "VALIDITY_EXPIRED", absl::StrCat("lease of ", DescribeLock(ns, name),
                                           " lost: its validity ran out before a renewal's reply "
                                           "arrived (ttl ",
                                           absl::FormatDuration(ttl), ")")));
    } else if (lost_.ok()) {
      SteadyTime until = UnaryValidUntil(send_time, granted, drift);
      if (until > valid_until_) valid_until_ = until;
    }
    result = lost_;
  }
  if (callback) callback(result);
  return result;
}

LeaseState::EndResult LeaseState::End(SteadyTime now) {
  LostCallback dropped;  // destroyed after the lock is released
  absl::MutexLock l(&mu_);
  EndResult r{active_, absl::OkStatus()};
  if (active_ && lost_.ok() && now >= valid_until_) {
    lost_ = LockLostError("VALIDITY_EXPIRED", absl::StrCat("lease of ", DescribeLock(ns, name),
                                                           " lost: its validity had run out (ttl ",
                                                           absl::FormatDuration(ttl), ")"));
  }
  active_ = false;
  dropped = std::exchange(on_lost_, nullptr);
  r.lost = lost_;
  return r;
}

void LeaseState::SetLostAfterEnd(absl::Status why) {
  absl::MutexLock l(&mu_);
  if (lost_.ok()) lost_ = std::move(why);
}

int ToGrpcMillis(absl::Duration d) {
  return static_cast<int>(
      std::min<int64_t>(absl::ToInt64Milliseconds(d), std::numeric_limits<int>::max()));
}

}  // namespace lockd::client_internal
