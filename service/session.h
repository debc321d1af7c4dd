// The Session stream of lockd.v1.LockService (docs/api.md "Sessions"):
// locks bound to one bidirectional stream, renewed by the server while the
// stream is open, released when it ends.
//
// One SessionHub serves every Session call of a LockServiceImpl. Each call
// gets a SessionReactor (service/session_reactor.h) that follows these rules:
//
//  * Authorization (with auth rules, tokens or owner_prefix): `open` needs
//    `lock` on open.namespace (the default when empty) and an owner the
//    caller may use (owner_prefix), else the stream ends with that
//    PERMISSION_DENIED or UNAUTHENTICATED; each open.resume entry and each
//    acquire and release needs `lock` on its own namespace (an
//    acquire_all, on every namespace it names; a refused
//    resume entry is not taken over, a refused operation answers the
//    error). Every denial is audited (Authorizer).
//  * Reading: one read outstanding, re-armed once a request is handled.
//    After `open`, reading pauses until `opened` is queued (resumed holds
//    are checked first), so `opened` is always the first response.
//  * Batches (docs/api.md "Batches on a Session"): a `batch` is checked
//    whole first: more than kMaxBatchOps ops, or an `open`, a nested
//    `batch` or an empty entry among them, is a protocol error, and none of
//    its ops is handled. Otherwise each op is handled exactly as if it had
//    come alone, in order (an op_id reused while in flight still ends the
//    stream there, after the ops before it).
//  * Writing: responses go through a queue with one write outstanding; no
//    gRPC thread ever waits for the client. Results and `lost` queued while
//    a write is in flight leave together as one response batch, once the
//    client has sent a batch (service/session_writer.h has the rules).
//  * Operations: an acquire or release is the unary call's backend call with
//    the session's owner, namespace default and lease; several run at once
//    and each answers with one `result`. A waiting acquire is parked in the
//    backend like a unary one; `cancel` fires its CancelSignal. Every acquire
//    carries a request_id (the caller's or a generated one), so a grant that
//    arrives after its cancel is given back exactly (Release with
//    acquire_request_id and the grant's fencing token). An acquire_all is
//    the unary AcquireAll (service/acquire_all.h) with the session's owner,
//    namespace default and lease; its holds become the session's, one per
//    lock, when every lock is held and the operation was neither cancelled
//    nor overtaken by the end of the stream. A hold is one (lock, owner)
//    hold whatever its kind: shared holds and semaphore permits are
//    renewed, lost, released and resumed like exclusive ones.
//  * Tokens: every renewal and release the session makes on its own names
//    the hold by its fencing token, so a late one (this replica cut off from
//    the client or the backend) never touches a later hold the owner took
//    through another session: the backend answers LOCK_NOT_HELD instead.
//  * Renewal: while the stream is open and the session holds locks, every
//    hold is renewed each lease/3, all holds of the session in one round;
//    under load the rounds of many sessions are joined into one
//    Backend::RenewMany (RenewCoalescer: one round trip where the backend
//    allows). A hold's lease is timed from its grant (the backend's
//    AcquireResult::lease_start), however long its acquire waited, then
//    from each renewal's send time. A renewal that finds a hold gone pushes
//    `lost` and forgets the hold: LEASE_EXPIRED when the lease had run out
//    (by the server's clock) before the renewal reached the
//    backend, otherwise NOT_HELD. A hold not renewed successfully by a tenth
//    of its lease before it ends (the backend unreachable from this replica
//    or too slow, while others may reach it) is given up the same way, with
//    LEASE_EXPIRED, before the backend can grant it to anyone else. A
//    ForceRelease served by this replica pushes FORCE_RELEASED at once
//    (SessionHub::ForceReleased).
//  * End: on half-close, on a broken stream (OnCancel), after a protocol
//    error and at server shutdown, waiting acquires are cancelled and the
//    session waits for its operations in flight to finish (their results
//    are still sent while the stream can carry them). Then:
//      half-close                       release every hold (to hold count
//                                       0), then finish OK;
//      broken stream, protocol error    the same, unless keep_on_disconnect:
//                                       holds are left to their lease;
//      server shutdown (EndAll)         holds are left to their lease,
//                                       finish UNAVAILABLE.
//    gRPC reports a half-close and a broken stream alike as a failed read,
//    and may report the break (OnCancel) a moment later; a session with
//    keep_on_disconnect therefore waits kBreakGrace after a failed read
//    before it takes the end for a half-close and releases.
//
// Thread-safety: each session's state is guarded by its reactor's mutex and
// those of its writer and its holds (session_reactor.h: the phases and the
// lock order); gRPC reactions, backend callbacks and renewal timers may run
// on any thread. No gRPC or backend call is made while one of these
// mutexes is held.

#ifndef LOCKD_SERVICE_SESSION_H_
#define LOCKD_SERVICE_SESSION_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "backends/backend.h"
#include "backends/common/timer_queue.h"
#include "lockd/v1/lock.grpc.pb.h"
#include "service/auth.h"
#include "service/config.h"
#include "service/metrics.h"
#include "service/renew_coalescer.h"

namespace lockd {

class SessionReactor;

// How long a keep_on_disconnect session waits, after its read failed, for
// gRPC to report a broken stream before it treats the end as a half-close.
inline constexpr absl::Duration kBreakGrace = absl::Milliseconds(200);

// At most this many operations in flight on one session; more get
// RESOURCE_EXHAUSTED in their result.
inline constexpr size_t kMaxSessionOps = 10000;

// At most this many ops in one SessionBatch; more is a protocol error.
inline constexpr int kMaxBatchOps = 1000;

class SessionHub {
 public:
  // `backend`, `authz` and `metrics` (both may be null) must outlive the
  // hub. `in_flight` counts each session from its start to gRPC's OnDone.
  SessionHub(Backend* backend, LeaseBounds lease, const Authorizer* authz,
             std::atomic<int64_t>* in_flight, Metrics* metrics = nullptr);
  // REQUIRES: every session has ended (gRPC called OnDone for each): the
  // server was shut down and waited for.
  ~SessionHub();
  SessionHub(const SessionHub&) = delete;
  SessionHub& operator=(const SessionHub&) = delete;

  // The reactor for a new Session call.
  grpc::ServerBidiReactor<v1::SessionRequest, v1::SessionResponse>* Open(
      grpc::CallbackServerContext* ctx);

  // Server shutdown: ends every stream with UNAVAILABLE, leaving holds to
  // their lease; sessions opened afterwards end at once the same way.
  void EndAll();

  // A ForceRelease served by this replica freed `key`, held by `owner` with
  // `token`: sessions of that owner holding it push `lost` FORCE_RELEASED.
  void ForceReleased(const LockKey& key, const std::string& owner, uint64_t token);

  // Sessions whose stream has not ended.
  size_t size() const;

 private:
  friend class SessionReactor;
  // False after EndAll(): the session must end at once.
  bool Add(SessionReactor* s);
  void Remove(SessionReactor* s);

  Backend* const backend_;
  const LeaseBounds lease_;
  const Authorizer* const authz_;
  std::atomic<int64_t>* const in_flight_;
  Metrics* const metrics_;  // null: no metrics
  RenewCoalescer renewals_;

  mutable absl::Mutex mu_;
  bool ending_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<SessionReactor*> live_ ABSL_GUARDED_BY(mu_);
  // Renewal rounds and break-grace waits. Last: destroyed first, so that
  // callbacks it drops unrun can still reach the hub.
  TimerQueue timers_;
};

}  // namespace lockd

#endif  // LOCKD_SERVICE_SESSION_H_
