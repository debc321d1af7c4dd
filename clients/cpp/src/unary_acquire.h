// Internal: an acquire by unary RPCs, the path ChooseAcquirePath
// (acquire_path.h) picks when the session stream cannot hold the lock; the
// session path is SessionStream::Acquire. A call of one lock sends Acquire,
// one of several (call.all) AcquireAll; the steps are the same, and from
// step 3 on every lock of an AcquireAll is a grant of its own:
//
//  1. Attempt: Acquire RPCs with a random request_id, retried on UNAVAILABLE
//     until call.deadline, each asking the server to wait only for what is
//     left of call.wait (rpc.h AcquireWithUndo, which also undoes an attempt
//     before it retries). A Cancel() of call.cancel cancels the RPC in
//     flight (TryCancel) and ends the retries: an outcome unknown, undone
//     in step 2.
//  2. Undo: a failure is reported only after the attempt whose outcome is
//     unknown was undone (rpc.h FailAcquire, bounded by UndoTimeout even past
//     the deadline); no hold of a failed Acquire outlives it.
//  3. Post-wait renew: validity runs from the send time (lease_validity.h
//     UnaryValidUntil), so a grant that came after a long wait may be mostly
//     used up. If a third of its ttl has passed (auto_renew) or its validity
//     has run out, it is renewed before it is returned; one that cannot be
//     renewed and is no longer valid is given back (with every other lock
//     of its AcquireAll: all or nothing).
//  4. The lease is handed to the watchdog, first renewal at send + ttl/3.
//
// Stateless; thread-safe as the core is. Blocks until the lease is held or
// the Acquire failed.

#ifndef LOCKD_CLIENTS_CPP_SRC_UNARY_ACQUIRE_H_
#define LOCKD_CLIENTS_CPP_SRC_UNARY_ACQUIRE_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "clients/cpp/src/acquire_path.h"
#include "clients/cpp/src/lease_state.h"

namespace lockd::client_internal {

// One hold of each lock of `call` (in call.locks order) by unary RPCs,
// tracked by core.watchdog(). Errors as Client::Acquire / AcquireAll:
// kDeadlineExceeded not acquired (naming the holder),
// kUnavailable no reply in time or a grant that could not be confirmed,
// kFailedPrecondition (IsLockLost) a grant lost before it could be used, the
// server's other errors as FromGrpc maps them; any of them may carry
// UnconfirmedAcquireRequestId.
absl::StatusOr<std::vector<std::shared_ptr<LeaseState>>> UnaryAcquire(const ClientCore& core,
                                                                      AcquireCall call);

}  // namespace lockd::client_internal

#endif  // LOCKD_CLIENTS_CPP_SRC_UNARY_ACQUIRE_H_
