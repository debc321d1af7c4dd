// Internal: the RPCs the client issues, with deadlines, retries and
// request ids. Stateless functions; thread-safe as the stub is.

#ifndef LOCKD_CLIENTS_CPP_SRC_RPC_H_
#define LOCKD_CLIENTS_CPP_SRC_RPC_H_

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "clients/cpp/src/lease_state.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "lockd/client.h"
#include "lockd/v1/lock.grpc.pb.h"

namespace lockd::client_internal {

using Stub = v1::LockService::StubInterface;

// `bytes` random bytes as lowercase hex.
std::string RandomHex(int bytes);

// Sets the context's deadline to the steady-clock `deadline`.
void SetDeadline(grpc::ClientContext* ctx, SteadyTime deadline);

// Waits until `until`, returning early once `channel` (if not null) is READY,
// and meanwhile asks the channel to connect and polls it. With gRPC's
// synchronous API nothing else drives reconnection between calls (only
// gRPC's 5 s backup poller), so without this a server that comes back is
// noticed seconds late. With `cancel`, also returns within about 20 ms of
// its Cancel().
void PauseWatchingChannel(grpc::ChannelInterface* channel, SteadyTime until,
                          const CancellationToken* cancel = nullptr);

// A pause uniformly jittered in [backoff/2, backoff].
absl::Duration Jittered(absl::Duration backoff);
// The backoff after `backoff`: doubled, capped at options.max_backoff.
absl::Duration NextBackoff(const ClientOptions& options, absl::Duration backoff);

// Runs `attempt` with a fresh context whose deadline is `deadline`, again
// after UNAVAILABLE with capped, jittered exponential backoff (cut short when
// `channel`, if given, becomes READY), until another status comes back or the
// next pause would end past `deadline` (then the last UNAVAILABLE is
// returned). Blocks; never past `deadline` (+ one attempt's scheduling noise).
grpc::Status CallWithRetry(const ClientOptions& options, grpc::ChannelInterface* channel,
                           SteadyTime deadline,
                           absl::FunctionRef<grpc::Status(grpc::ClientContext*)> attempt);

// One Renew of `lease` (ttl = lease.ttl, fencing_token = lease.fencing_token:
// it renews only that hold), bounded by `deadline`, applied to the lease: OK
// returns the send time (validity now runs from it); a LOCK_NOT_HELD answer
// (the hold is gone, or the owner's hold now has another token) or a changed
// fencing token marks the lease lost and returns its lost status; other
// errors leave the lease alone.
absl::StatusOr<SteadyTime> RenewLease(Stub& stub, LeaseState& lease, SteadyTime deadline);

// Release of one hold of `owner` with `request_id` (empty: a fresh one),
// retried on UNAVAILABLE with that same request_id until `deadline`.
// `fencing_token` non-zero: only the hold with that token (the one the caller
// means; a later hold of the owner answers LOCK_NOT_HELD and stays); zero:
// any hold of the owner. Errors as Client::Release.
absl::StatusOr<ReleaseOutcome> ReleaseHold(Stub& stub, grpc::ChannelInterface* channel,
                                           const ClientOptions& options, absl::string_view ns,
                                           absl::string_view name, absl::string_view owner,
                                           uint64_t fencing_token, SteadyTime deadline,
                                           std::string request_id = "");

// True if a call that ended with `status` may have been applied by the server
// although no answer said so: DEADLINE_EXCEEDED, CANCELLED, UNAVAILABLE (the
// connection may have broken after the request was sent), UNKNOWN, INTERNAL,
// ABORTED, DATA_LOSS. Every other code is the server's definite answer.
bool OutcomeUnknown(const grpc::Status& status);

// How long an automatic undo may take: min(rpc_timeout, release_timeout).
absl::Duration UndoTimeout(const ClientOptions& options);

// Release{ns, name, owner, acquire_request_id, fencing_token} (no
// request_id), retried on UNAVAILABLE until `deadline`: gives back the hold
// that the Acquire with that request_id added, if it did and is the owner's
// last request on the lock (and, with a non-zero `fencing_token`, only if the
// hold has that token: pass the grant's token when it is known, else 0).
// OK: the server answered (hold_count: the owner's holds now). Errors as
// Client::UndoAcquire.
absl::StatusOr<ReleaseOutcome> UndoAcquire(Stub& stub, grpc::ChannelInterface* channel,
                                           const ClientOptions& options, absl::string_view ns,
                                           absl::string_view name, absl::string_view owner,
                                           absl::string_view acquire_request_id,
                                           SteadyTime deadline, uint64_t fencing_token = 0);

// True if `undo` (a result of UndoAcquire) shows that no hold of the undone
// Acquire remains: an OK answer, or LOCK_NOT_HELD (the owner holds nothing).
bool UndoConfirmed(const absl::StatusOr<ReleaseOutcome>& undo);

// A hold that one acquire attempt may have added: the lock, and the grant's
// fencing token when the client saw the grant (its undo then touches only
// that hold), else 0. An AcquireAll attempt may have added one per lock.
struct AttemptHold {
  std::string ns;
  std::string name;
  uint64_t fencing_token = 0;
};

// The undo of `owner`'s acquire attempt `request_id` on every lock of
// `holds` (UndoAcquire each, all bounded by `deadline`). OK when every undo
// was confirmed (UndoConfirmed); else the first unconfirmed one's error.
absl::Status UndoAttempt(Stub& stub, grpc::ChannelInterface* channel, const ClientOptions& options,
                         const std::vector<AttemptHold>& holds, absl::string_view owner,
                         absl::string_view request_id, SteadyTime deadline);

// Runs `attempt` (an Acquire or AcquireAll of `owner` on `holds`, whose
// request_id is *request_id) with a fresh context whose deadline is
// `deadline` until it gets the server's answer (OK or a definite error),
// fails with an unknown outcome other than UNAVAILABLE, or the next backoff
// pause would end past `deadline`. After an UNAVAILABLE it first undoes that
// attempt (UndoAttempt, bounded by min(UndoTimeout, deadline)); if the undo
// was confirmed the next attempt gets a new *request_id (a late give-back of
// the old attempt can then not touch the new hold), otherwise it keeps the
// same one (the server answers a repeat with the first result, so the hold
// count cannot double). Then it backs off as CallWithRetry does, cut short
// by a Cancel() of `cancel` (the next attempt, which `attempt` answers
// CANCELLED at once, ends the loop). Returns the last attempt's status. *unresolved: the request_id
// of an attempt whose outcome is unknown and whose undo was not confirmed, else empty; the caller
// must undo it if it reports a failure.
grpc::Status AcquireWithUndo(Stub& stub, grpc::ChannelInterface* channel,
                             const ClientOptions& options, SteadyTime deadline,
                             std::string* request_id, const std::vector<AttemptHold>& holds,
                             absl::string_view owner, const CancellationToken& cancel,
                             absl::FunctionRef<grpc::Status(grpc::ClientContext*)> attempt,
                             std::string* unresolved);

// The status a failed acquire of `holds` by `owner` reports, given the
// failure `s` and `unresolved`, the request_id of an attempt that may have
// left a hold (empty: none). Undoes that attempt first (UndoAttempt, bounded
// by UndoTimeout, even past the caller's deadline); if the undo is not
// confirmed, the status names the owner and id and carries
// kUnconfirmedAcquirePayload (see UnconfirmedAcquireRequestId).
absl::Status FailAcquire(Stub& stub, grpc::ChannelInterface* channel, const ClientOptions& options,
                         const std::vector<AttemptHold>& holds, absl::string_view owner,
                         const std::string& unresolved, absl::Status s);

// The kDeadlineExceeded of an acquire of `what` (DescribeCall) answered
// acquired = false after waiting `wait`, naming the lock's holder and
// carrying `current` (CurrentHolder) when the server sent it (null: not).
absl::Status NotAcquiredError(absl::string_view what, absl::Duration wait,
                              const v1::LockInfo* current);

}  // namespace lockd::client_internal

#endif  // LOCKD_CLIENTS_CPP_SRC_RPC_H_
