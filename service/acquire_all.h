// One AcquireAll's rules (docs/api.md "AcquireAll"), the same for a unary
// LockService.AcquireAll (the reactor in service/lock_service.cc) and for an
// acquire_all on a Session stream (service/session_reactor.cc). Built on
// AcquireCall (service/acquire_call.h) and Backend::Acquire / Release alone:
// backends know nothing of it.
//
//  * Order: the locks are taken one at a time, in (namespace, name) order
//    whatever the request's order, so two calls never wait on each other in
//    a cycle.
//  * One wait: every Acquire waits only what is left of the call's
//    wait_timeout (a try once it is spent; all tries when it is zero). The
//    caller's CancelSignal is passed to each Acquire in turn: cancelling the
//    call (or its gRPC deadline) ends the Acquire waiting now, and no later
//    one starts.
//  * Request ids: every lock's Acquire carries the call's request_id (the
//    caller's, else one NewRequestId() for the call). Backends keep request
//    ids per (lock, owner), so a retry with the same request_id replays each
//    lock's grant, and Release{acquire_request_id: <the call's request_id>}
//    on one lock undoes this call's hold on it.
//  * All or nothing: when a lock is not granted (its wait ended, the backend
//    failed, the call was cancelled), every hold this call took is given
//    back (AcquireCall::GiveBack: by acquire_request_id and the grant's
//    token, so no other hold of the owner is touched) and the backend has
//    answered every give-back BEFORE `done` runs. A give-back the backend
//    fails is logged; the lease ends that hold.
//  * Delivery: once every lock is held, `deliver` (the caller's) says
//    whether the answer can still reach the caller; on kCancelled or
//    kTooLate every hold is given back first, and the answer is CANCELLED or
//    DEADLINE_EXCEEDED, as for one Acquire.
//  * The answer (`done`): OK with acquired=true, the owner and one
//    AcquireResponse per lock in request order; OK with acquired=false and
//    `blocked_on` the LockInfo of the lock whose wait ended; or the error
//    (the backend's, mapped by BackendToGrpcStatus, or CANCELLED).
//
// Threading: StartAcquireAll returns at once; `deliver` then `done` run once
// each, in that order, on any thread (possibly inline), never concurrently.
// The call's state is owned by the callback chain; nothing is shared.

#ifndef LOCKD_SERVICE_ACQUIRE_ALL_H_
#define LOCKD_SERVICE_ACQUIRE_ALL_H_

#include <memory>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "backends/backend.h"
#include "grpcpp/support/status.h"
#include "lockd/v1/lock.pb.h"
#include "service/acquire_call.h"
#include "service/validation.h"

namespace lockd {

// One lock an AcquireAll holds: its Acquire and the grant.
struct AcquiredLock {
  AcquireCall call;
  AcquireResult grant;
};

// Decides, once every lock is held (`held`, in request order), whether the
// answer can still reach the caller. A caller that keeps holds (a session)
// records them here, so that its end sees them.
using AcquireAllDeliver =
    absl::AnyInvocable<AcquireCall::Delivery(const std::vector<AcquiredLock>& held) &&>;
// The answer: the status, the response (meaningful when the status is OK)
// and, when every lock was granted and delivered, the holds in request order
// (empty otherwise).
using AcquireAllDone = absl::AnyInvocable<void(grpc::Status status, v1::AcquireAllResponse resp,
                                               std::vector<AcquiredLock> held) &&>;

// Starts the AcquireAll of `params` (see the file comment). `backend` must
// outlive the call. `cancel` may be null.
// REQUIRES: `params` came from ToAcquireAllParams; params.owner is not empty.
void StartAcquireAll(Backend* backend, AcquireAllParams params,
                     std::shared_ptr<CancelSignal> cancel, AcquireAllDeliver deliver,
                     AcquireAllDone done);

// Authorization of an AcquireAll: `authorize` (the caller's check of the
// `lock` permission) runs once per namespace the locks name, with the first
// lock named in it (for the audit line), in request order; returns the
// first error, else OK.
absl::Status AuthorizeNamespaces(const AcquireAllParams& params,
                                 absl::FunctionRef<absl::Status(const LockKey& key)> authorize);

// Gives back every hold of `held` (AcquireCall::GiveBack); `then`, if set,
// runs once the backend answered each (at once when `held` is empty).
void GiveBackAll(const std::vector<AcquiredLock>& held, absl::AnyInvocable<void() &&> then);

}  // namespace lockd

#endif  // LOCKD_SERVICE_ACQUIRE_ALL_H_
