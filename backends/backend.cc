#include "backends/backend.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/common/renew_join.h"

namespace lockd {
namespace {
constexpr absl::string_view kReasonPayloadUrl = "type.lockd.dev/reason";
}  // namespace

void CancelSignal::Cancel() {
  absl::AnyInvocable<void() &&> fn;
  {
    absl::MutexLock l(&mu_);
    if (cancelled_) return;
    cancelled_ = true;
    fn = std::move(fn_);
  }
  if (fn) std::move(fn)();
}

bool CancelSignal::cancelled() const {
  absl::MutexLock l(&mu_);
  return cancelled_;
}

bool CancelSignal::SetCallback(absl::AnyInvocable<void() &&> fn) {
  absl::AnyInvocable<void() &&> old;  // destroyed after the lock is released
  absl::MutexLock l(&mu_);
  if (cancelled_) return false;
  old = std::move(fn_);
  fn_ = std::move(fn);
  return true;
}

void CancelSignal::ClearCallback() {
  absl::AnyInvocable<void() &&> old;
  absl::MutexLock l(&mu_);
  old = std::move(fn_);
  fn_ = nullptr;
  // `old` is destroyed after the lock is released (declared first).
}

absl::Status LockNotHeldError(const LockKey& key, absl::string_view detail) {
  absl::Status s = absl::FailedPreconditionError(absl::StrCat(
      "lock \"", key.name, "\" in namespace \"", key.ns, "\" is not held by this owner: ", detail));
  s.SetPayload(kReasonPayloadUrl, absl::Cord(kLockNotHeldReason));
  return s;
}

bool IsLockNotHeld(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kFailedPrecondition) return false;
  auto p = status.GetPayload(kReasonPayloadUrl);
  return p.has_value() && *p == kLockNotHeldReason;
}

absl::Status FencingTokenMismatchError(const LockKey& key, uint64_t expected, uint64_t actual) {
  absl::Status s = absl::FailedPreconditionError(
      absl::StrCat("fencing_token: lock \"", key.name, "\" in namespace \"", key.ns,
                   "\" is held with token ", actual, ", not ", expected, "; nothing changed"));
  s.SetPayload(kReasonPayloadUrl, absl::Cord(kFencingTokenMismatchReason));
  return s;
}

bool IsFencingTokenMismatch(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kFailedPrecondition) return false;
  auto p = status.GetPayload(kReasonPayloadUrl);
  return p.has_value() && *p == kFencingTokenMismatchReason;
}

void Backend::RenewMany(std::vector<RenewParams> params, RenewManyCallback done) {
  if (params.empty()) {
    std::move(done)({});
    return;
  }
  auto join = std::make_shared<RenewJoin>(params.size(), std::move(done));
  for (size_t i = 0; i < params.size(); ++i) {
    Renew(std::move(params[i]),
          [join, i](absl::StatusOr<RenewResult> r) { join->Done(i, std::move(r)); });
  }
}

void Backend::ForceRelease(ForceReleaseParams params, Callback<ForceReleaseResult> done) {
  std::move(done)(absl::UnimplementedError(
      absl::StrCat("ForceRelease is not implemented by the ", name(), " backend")));
}

absl::Status ShuttingDownError() { return absl::UnavailableError("lockd is shutting down"); }

}  // namespace lockd
