#include "backends/backend.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "backends/common/renew_join.h"

namespace lockd {
namespace {
constexpr absl::string_view kReasonPayloadUrl = "type.lockd.dev/reason";
constexpr absl::string_view kMetadataPayloadPrefix = "type.lockd.dev/metadata/";

std::string KeyText(const LockKey& key) {
  return absl::StrCat("\"", key.name, "\" in namespace \"", key.ns, "\"");
}

absl::Status WithReason(absl::Status s, absl::string_view reason) {
  s.SetPayload(kReasonPayloadUrl, absl::Cord(reason));
  return s;
}
}  // namespace

void FillNewestHolder(LockState& s) {
  s.held = !s.holders.empty();
  if (!s.held) return;
  const HolderState& h = s.holders.back();
  s.owner = h.owner;
  s.hold_count = h.hold_count;
  s.fencing_token = h.fencing_token;
  s.ttl_remaining = h.ttl_remaining;
}

absl::Status LockKindMismatchError(const LockKey& key, uint32_t held_limit) {
  absl::Status s = WithReason(
      absl::FailedPreconditionError(absl::StrCat(
          "kind: ", KeyText(key), " is held as ",
          held_limit == 0 ? std::string("a lock")
                          : absl::StrCat("a semaphore of limit ", held_limit),
          "; an acquire of another kind (or another limit) cannot wait for it; nothing changed")),
      kLockKindMismatchReason);
  s.SetPayload(absl::StrCat(kMetadataPayloadPrefix, "kind"),
               absl::Cord(held_limit == 0 ? "lock" : "semaphore"));
  if (held_limit != 0) {
    s.SetPayload(absl::StrCat(kMetadataPayloadPrefix, "limit"),
                 absl::Cord(absl::StrCat(held_limit)));
  }
  return s;
}

absl::Status UpgradeWouldBlockError(const LockKey& key) {
  return WithReason(absl::FailedPreconditionError(absl::StrCat(
                        "mode: ", KeyText(key),
                        " is held SHARED by this owner and an upgrade to EXCLUSIVE would wait "
                        "for other holders or waiters (two upgrading readers would deadlock); "
                        "release the shared hold and acquire EXCLUSIVE instead; nothing changed")),
                    kUpgradeWouldBlockReason);
}

absl::Status PermitsMismatchError(const LockKey& key, uint32_t held, uint32_t asked) {
  return WithReason(
      absl::FailedPreconditionError(absl::StrCat(
          "permits: this owner holds ", held, " permits of semaphore ", KeyText(key),
          "; a reentrant acquire must ask the same number (asked ", asked, "); nothing changed")),
      kPermitsMismatchReason);
}

std::string ErrorReasonOf(const absl::Status& status) {
  auto p = status.GetPayload(kReasonPayloadUrl);
  return p.has_value() ? std::string(*p) : std::string();
}

std::vector<std::pair<std::string, std::string>> ErrorMetadataOf(const absl::Status& status) {
  std::vector<std::pair<std::string, std::string>> out;
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& value) {
    if (absl::StartsWith(url, kMetadataPayloadPrefix)) {
      out.emplace_back(std::string(url.substr(kMetadataPayloadPrefix.size())), std::string(value));
    }
  });
  std::sort(out.begin(), out.end());
  return out;
}

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
