// Internal: one acquire with its options resolved, and the one choice of the
// path it takes: over the Client's session stream (SessionStream::Acquire)
// or by unary RPCs (UnaryAcquire, unary_acquire.h). Client::Acquire,
// AcquireShared, AcquireAll and Semaphore::Acquire validate and resolve
// (NewAcquireCall), choose (ChooseAcquirePath) and call the chosen path
// (AcquireLeases in client.cc). A call takes one lock (of any kind: its
// LockTarget carries mode, limit and permits) or, with `all`, several at
// once (the AcquireAll RPC or the session's acquire_all); both paths take
// either.
//
// Thread-safe: NewAcquireCall only reads the core; ChooseAcquirePath also
// asks its session stream (thread-safe), which may fix the session's lease.

#ifndef LOCKD_CLIENTS_CPP_SRC_ACQUIRE_PATH_H_
#define LOCKD_CLIENTS_CPP_SRC_ACQUIRE_PATH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "clients/cpp/src/lease_state.h"
#include "clients/cpp/src/lease_validity.h"
#include "clients/cpp/src/rpc.h"
#include "lockd/client.h"
#include "lockd/v1/lock.pb.h"

namespace lockd::client_internal {

class ClientCore;

// One lock of a call and its kind
// (docs/api.md "Shared locks, semaphores and all-or-nothing acquires").
struct LockTarget {
  std::string ns;  // resolved (ClientCore::Namespace), never empty
  std::string name;
  HoldMode mode = HoldMode::kExclusive;
  uint32_t limit = 0;    // non-zero: a semaphore of this many permits
  uint32_t permits = 0;  // with limit: the permits to take (0: 1)
};

// One acquire as both paths take it.
struct AcquireCall {
  // One lock, or with `all` 1-64 locks taken all or nothing.
  std::vector<LockTarget> locks;
  bool all = false;
  std::string owner;    // AcquireOptions::owner, else the Client's
  absl::Duration ttl;   // asked; zero: the server's default
  absl::Duration wait;  // how long the server may wait for the lock
  // The caller's bound: AcquireOptions::timeout, else wait + rpc_timeout.
  absl::Duration timeout;
  SteadyTime wait_end;  // start + wait: the server waits until then
  SteadyTime deadline;  // start + timeout: past it a waiting attempt is given up
  bool auto_renew = true;
  LostCallback on_lost;
  CancellationToken cancel;  // AcquireOptions::cancel
};

// Validates `options` (kInvalidArgument naming a negative ttl, wait or
// timeout; nothing is sent) and resolves them for an acquire of `locks`
// (their empty ns: options.ns, else the Client's default) starting now;
// `all`: with AcquireAll. Kinds are checked by the server (and by Semaphore
// for its limit).
absl::StatusOr<AcquireCall> NewAcquireCall(const ClientCore& core, std::vector<LockTarget> locks,
                                           AcquireOptions options, bool all = false);
// The same for one exclusive lock `name`.
absl::StatusOr<AcquireCall> NewAcquireCall(const ClientCore& core, absl::string_view name,
                                           AcquireOptions options);

// The call's locks for messages: "\"a\" (namespace default)", or for
// several "locks \"a\" (namespace default), \"b\" (namespace default)".
std::string DescribeCall(const AcquireCall& call);

// The call's request, whichever path sends it: an AcquireRequest for one
// lock (REQUIRES !call.all) or an AcquireAllRequest (REQUIRES call.all),
// with locks, kinds and owner; request_id, wait_timeout and lease_ttl are
// the path's to set.
void FillRequest(const AcquireCall& call, v1::AcquireRequest* req);
void FillRequest(const AcquireCall& call, v1::AcquireAllRequest* req);

// The server's answer to one attempt of `call` (`one` for an Acquire, else
// `all`): OK with one response per lock, in call.locks order, when granted;
// else NotAcquiredError naming the lock that was held.
absl::StatusOr<std::vector<v1::AcquireResponse>> GrantedLocks(const AcquireCall& call,
                                                              const v1::AcquireResponse* one,
                                                              const v1::AcquireAllResponse* all);

// What an attempt of `call` may have added: one AttemptHold per lock (rpc.h),
// with the grant's token from `granted` when the client saw the grant.
std::vector<AttemptHold> AttemptHolds(const AcquireCall& call,
                                      const std::vector<v1::AcquireResponse>& granted = {});

// The lease a grant of `lock` by `owner` becomes: ns, name, owner and kind
// set (permits of a semaphore at least 1), the rest the path's to set.
LeaseState::Params LeaseParams(const LockTarget& lock, const std::string& owner);

enum class AcquirePath { kSession, kUnary };

// The path `call` takes. The first row that holds decides:
//
//   condition                                   path     why
//   ClientOptions::use_sessions false           unary    sessions turned off
//   call.owner other than the Client's owner    unary    a session holds for its own owner
//   call.auto_renew false                       unary    a session renews every hold it has
//   lockd has no Session stream                 unary    learnt from an UNIMPLEMENTED, kept
//                                                        for the Client's life (the call that
//                                                        learns it goes unary too: nothing
//                                                        was sent)
//   call.ttl not session_safe                   unary    the hold would not outlast a replica
//                                                        that hangs (SessionSafe)
//   the session's lease not session_safe        unary    the same, for session_ttl or the
//                                                        lease the server granted
//   call.ttl neither zero nor the session's     unary    one session has one lease: session_ttl,
//   lease (asked or granted)                             else the ttl of the first Acquire
//                                                        that reached this row
//   otherwise                                   session
//
// The last four rows are SessionStream::Accepts, which keeps the session's
// lease and whether lockd has the stream.
AcquirePath ChooseAcquirePath(const ClientCore& core, const AcquireCall& call);

}  // namespace lockd::client_internal

#endif  // LOCKD_CLIENTS_CPP_SRC_ACQUIRE_PATH_H_
