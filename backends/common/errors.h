// The error texts every backend shares, written once, and the one way a lock
// is named in a message. Backends build their statuses through these so that
// a client sees the same words whichever backend answers.

#ifndef LOCKD_BACKENDS_COMMON_ERRORS_H_
#define LOCKD_BACKENDS_COMMON_ERRORS_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "backends/backend.h"

namespace lockd {

// `"<name>" in namespace "<ns>"`, for messages: "renew of lock " + LockName(k).
std::string LockName(const LockKey& key);

// LockNotHeldError (kFailedPrecondition, reason LOCK_NOT_HELD) for a lock
// that nobody holds (released, or its lease ended) ...
absl::Status LockFreeError(const LockKey& key);
// ... for a lock that another owner holds ...
absl::Status HeldByOtherError(const LockKey& key);
// ... and for a Release/Renew whose fencing_token is not the owner's current
// hold's (the owner released and acquired the lock again since).
absl::Status OtherHoldError(const LockKey& key);

// kResourceExhausted: an Acquire would wait, but `max_waiters` calls already
// wait on this process.
absl::Status TooManyWaitersError(size_t max_waiters);

// kCancelled: the caller's CancelSignal fired before the Acquire had a result.
absl::Status AcquireCancelledError();

}  // namespace lockd

#endif  // LOCKD_BACKENDS_COMMON_ERRORS_H_
