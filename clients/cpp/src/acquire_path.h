// Internal: one Acquire with its options resolved, and the one choice of the
// path it takes: over the Client's session stream (SessionStream::Acquire)
// or by unary RPCs (UnaryAcquire, unary_acquire.h). Client::Acquire
// validates and resolves (NewAcquireCall), chooses (ChooseAcquirePath) and
// calls the chosen path.
//
// Thread-safe: NewAcquireCall only reads the core; ChooseAcquirePath also
// asks its session stream (thread-safe), which may fix the session's lease.

#ifndef LOCKD_CLIENTS_CPP_SRC_ACQUIRE_PATH_H_
#define LOCKD_CLIENTS_CPP_SRC_ACQUIRE_PATH_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "clients/cpp/src/lease_validity.h"
#include "lockd/client.h"

namespace lockd::client_internal {

class ClientCore;

// One Acquire as both paths take it.
struct AcquireCall {
  std::string ns;  // resolved (ClientCore::Namespace), never empty
  std::string name;
  std::string owner;    // AcquireOptions::owner, else the Client's
  absl::Duration ttl;   // asked; zero: the server's default
  absl::Duration wait;  // how long the server may wait for the lock
  // The caller's bound: AcquireOptions::timeout, else wait + rpc_timeout.
  absl::Duration timeout;
  SteadyTime wait_end;  // start + wait: the server waits until then
  SteadyTime deadline;  // start + timeout: past it a waiting attempt is given up
  bool auto_renew = true;
  LostCallback on_lost;
};

// Validates `options` (kInvalidArgument naming a negative ttl, wait or
// timeout; nothing is sent) and resolves them for an Acquire of `name`
// starting now.
absl::StatusOr<AcquireCall> NewAcquireCall(const ClientCore& core, absl::string_view name,
                                           AcquireOptions options);

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
