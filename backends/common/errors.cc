#include "backends/common/errors.h"

#include "absl/strings/str_cat.h"

namespace lockd {

std::string LockName(const LockKey& key) {
  return absl::StrCat("\"", key.name, "\" in namespace \"", key.ns, "\"");
}

absl::Status LockFreeError(const LockKey& key) {
  return LockNotHeldError(key, "the lock is free (released or lease expired)");
}

absl::Status HeldByOtherError(const LockKey& key) {
  return LockNotHeldError(key, "the lock is held by another owner");
}

absl::Status OtherHoldError(const LockKey& key) {
  return LockNotHeldError(key, "the owner holds the lock under another fencing token");
}

absl::Status TooManyWaitersError(size_t max_waiters) {
  return absl::ResourceExhaustedError(
      absl::StrCat("too many waiting acquires (max_waiters = ", max_waiters, ")"));
}

absl::Status AcquireCancelledError() { return absl::CancelledError("acquire cancelled"); }

}  // namespace lockd
