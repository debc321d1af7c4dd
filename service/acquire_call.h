// One Acquire's rules, the same for a unary LockService.Acquire (the
// reactor in service/lock_service.cc) and for an acquire on a Session stream
// (service/session_reactor.cc):
//
//  * Defaults: an Acquire without an owner gets a fresh one (DefaultOwner:
//    the authorizer's, which obeys auth.owner_prefix, else NewOwnerId());
//    every Acquire gets a request_id (the caller's, else NewRequestId()), so
//    that a grant nobody saw can be undone precisely.
//  * The backend call: AcquireCall::Start passes the parameters on unchanged
//    and keeps what a give-back needs (key, owner, request_id).
//  * Delivery: a grant is answered only when its caller can still see it.
//    Otherwise (the call or operation was cancelled, or, for a unary call,
//    the grant came within the delivery margin of the call's deadline,
//    TooLateToDeliver) it is given back and the caller is answered
//    CANCELLED or DEADLINE_EXCEEDED. A caller that goes away after its
//    answer was sent (a unary call's OnDone) has the grant given back the
//    same way.
//  * Give-back: a Release with the Acquire's request_id as
//    acquire_request_id and the grant's fencing token, so it undoes exactly
//    this Acquire, never a hold another call of the owner added nor a later
//    hold of the owner when it reaches the backend late. A failed give-back
//    is logged; the lease ends the hold.
//  * The answer: AcquireResponse with acquired, owner and, when granted,
//    fencing_token, hold_count and lease_ttl, or else the lock's state
//    (`current`).
//
// Thread-safe: AcquireCall is an immutable value; the functions keep no
// state (NewOwnerId uses a thread-local generator).

#ifndef LOCKD_SERVICE_ACQUIRE_CALL_H_
#define LOCKD_SERVICE_ACQUIRE_CALL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "backends/backend.h"
#include "grpcpp/support/status.h"
#include "lockd/v1/lock.pb.h"
#include "service/auth.h"
#include "service/owner_id.h"

namespace lockd {

// The owner of a call that named none: the authorizer's for `identity` when
// there is one, else NewOwnerId().
std::string DefaultOwner(const Authorizer* authz, const std::string& identity);

// A generated request_id: "\x01" and 32 hex digits. It never equals a
// caller's (validation refuses control characters in request ids).
std::string NewRequestId();

// A backend's lock state as the API's LockInfo.
void ToLockInfo(const LockState& s, absl::string_view backend, v1::LockInfo* out);

// A grant that reaches the service less than this before its unary call's
// gRPC deadline (or, for a shorter call, in the last quarter of its time) is
// given back instead of delivered: the server's deadline is later than the
// client's by the request's transit, so a reply sent in that window may
// reach a client that has given up, and gRPC still reports it as sent.
inline constexpr absl::Duration kGrantDeliveryMargin = absl::Milliseconds(100);

// Whether `now` is within kGrantDeliveryMargin (at most a quarter of the
// call's time, `deadline` - `started`) of the call's `deadline`.
bool TooLateToDeliver(absl::Time started, absl::Time deadline, absl::Time now);

class AcquireCall {
 public:
  // Whether a grant can still reach the caller.
  enum class Delivery {
    kDeliver,    // answer it
    kCancelled,  // the caller cancelled (or its session is ending)
    kTooLate,    // TooLateToDeliver
  };
  using Done =
      absl::AnyInvocable<void(const AcquireCall& call, absl::StatusOr<AcquireResult> r) &&>;

  // Starts Backend::Acquire with `params` and `cancel`; `done` runs once, on
  // any thread, with this call and the backend's answer. Fills an empty
  // params.request_id with NewRequestId(). `backend` must outlive the call.
  // REQUIRES: params.owner is not empty.
  static void Start(Backend* backend, AcquireParams params, std::shared_ptr<CancelSignal> cancel,
                    Done done);

  const LockKey& key() const { return key_; }
  const std::string& owner() const { return owner_; }
  const std::string& request_id() const { return request_id_; }

  // The caller's answer to `r`: OK with `resp` filled, or the error. A grant
  // that `delivery` says will not be seen is given back first (GiveBack) and
  // answered CANCELLED ("acquire cancelled; the grant was released") or
  // DEADLINE_EXCEEDED; `resp` is then left as it was.
  grpc::Status Answer(const absl::StatusOr<AcquireResult>& r, Delivery delivery,
                      v1::AcquireResponse* resp) const;

  // Undoes the grant of this Acquire with fencing token `token` (see the
  // file comment); returns at once, the Release runs on. `then`, if set,
  // runs once the backend answered the Release (whatever it answered), on
  // any thread.
  void GiveBack(uint64_t token, absl::AnyInvocable<void() &&> then = nullptr) const;

 private:
  AcquireCall(Backend* backend, const AcquireParams& params)
      : backend_(backend), key_(params.key), owner_(params.owner), request_id_(params.request_id) {}

  Backend* backend_;
  LockKey key_;
  std::string owner_;
  std::string request_id_;
};

}  // namespace lockd

#endif  // LOCKD_SERVICE_ACQUIRE_CALL_H_
