// The reactor of one Session stream. Internal to the service: the rules are
// in session.h; the reactor is made by SessionHub::Open.
//
// Phases (one enum; every transition happens under mu_):
//
//   kAwaitOpen ──`open` read──▶ kOpening ──accepted (params_ set)──▶ kResuming
//   kResuming  ──every open.resume entry checked, `opened` queued──▶ kOpen
//   kOpen      ──read fails, keep_on_disconnect──▶ kGrace
//   kGrace     ──kBreakGrace passes──▶ kEnding (half-close)
//   kAwaitOpen … kGrace ──BeginEnd: half-close, OnCancel, protocol error,
//                         refused, resume failed, shutdown──▶ kEnding
//   kEnding    ──no operation in flight or with its result being queued,
//                  no resume entry being checked──▶
//                  kReleasing (holds to release) or kFlushing (none, or kept)
//   kReleasing ──the last hold released──▶ kFlushing
//   kFlushing  ──no write in flight, no StartRead under way──▶ kFinished
//
// kFinished is final: Finish was called (once). Reading stops at kEnding
// (a read already outstanding is still handled); from kOpening to kOpen
// reading pauses, so `opened` is the first response. Entering kEnding
// fires the CancelSignal of every acquire in flight and stops the holds'
// renewals (SessionHolds::Stop).
//
// Collaborators: SessionWriter (session_writer.h: the outbox, one write in
// flight) and, once `open` is accepted, SessionHolds (session_holds.h: the
// holds, renewal rounds and expiry timer), each with its own mutex. Lock
// order: SessionHub's, then mu_, then SessionHolds', then SessionWriter's.
// No gRPC or backend call is made with mu_ held.
//
// Lifetime: reference counted. gRPC holds one reference until OnDone; every
// backend call and timer of the session holds one until its callback has
// run (or was dropped unrun). The last reference deletes the session, so a
// backend answer that comes after the stream ended finds it alive.

#ifndef LOCKD_SERVICE_SESSION_REACTOR_H_
#define LOCKD_SERVICE_SESSION_REACTOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "backends/backend.h"
#include "lockd/v1/lock.grpc.pb.h"
#include "service/acquire_all.h"
#include "service/acquire_call.h"
#include "service/auth.h"
#include "service/session.h"
#include "service/session_holds.h"
#include "service/session_writer.h"
#include "service/validation.h"

namespace lockd {

class SessionReactor final
    : public grpc::ServerBidiReactor<v1::SessionRequest, v1::SessionResponse> {
 public:
  // A counted reference; releases it when destroyed (also when a timer or
  // backend callback holding it is dropped unrun).
  class Ref {
   public:
    explicit Ref(SessionReactor* s) : s_(s) {}
    Ref(Ref&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
    Ref& operator=(Ref&&) = delete;
    ~Ref() {
      if (s_ != nullptr) s_->Unref();
    }
    SessionReactor* operator->() const { return s_; }

   private:
    SessionReactor* s_;
  };

  SessionReactor(SessionHub* hub, grpc::CallbackServerContext* ctx);

  // Registers with the hub and starts reading (or ends at once when the hub
  // is ending).
  void Begin();
  // Server shutdown: ends the stream with UNAVAILABLE, holds kept.
  void EndForShutdown() { BeginEnd(End::kShutdown, ShutdownStatus()); }
  // See SessionHub::ForceReleased.
  void ForceReleased(const LockKey& key, const std::string& owner, uint64_t token);
  // A new counted reference to this session.
  Ref NewRef();

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  enum class Phase {
    kAwaitOpen,
    kOpening,
    kResuming,
    kOpen,
    kGrace,
    kEnding,
    kReleasing,
    kFlushing,
    kFinished,
  };
  // Why the stream ends (see session.h, "End"). kResumeFailed: a backend
  // error while checking open.resume; like kShutdown, it keeps the holds.
  // kRefused: the `open` was not authorized (nothing is held).
  enum class End { kNone, kHalfClose, kBroken, kProtocolError, kShutdown, kResumeFailed, kRefused };

  ~SessionReactor() = default;
  void Unref();
  static grpc::Status ShutdownStatus();
  // The session's holds once `open` was accepted, else null; never changes
  // once set, and lives as long as the session.
  SessionHolds* holds() ABSL_LOCKS_EXCLUDED(mu_);

  // Reading and opening.
  void Read();
  void Started();
  void ReadFailed();
  void GraceOver();
  // The open session's holds (and parameters), or null after a protocol
  // error (the first request was not `open`).
  SessionHolds* RequireOpen();
  void ProtocolError(absl::string_view what);
  void HandleOpen(const v1::SessionOpen& open);
  void Resume(SessionHolds* holds, std::vector<SessionOpenParams::Resume> refs);
  void Resumed(SessionHolds* holds, absl::StatusOr<v1::LockInfo> info);
  void SendOpened(const SessionParams& params, std::vector<v1::LockInfo> resumed);

  // Operations.
  // Handles one acquire, release, cancel or acquire_all (protocol errors
  // end the stream).
  void HandleOp(SessionHolds* holds, v1::SessionRequest& req);
  // A batch's ops, each as if it had come alone, in order; the whole batch
  // is checked first, so that a bad one (a protocol error) handles none.
  void HandleBatch(SessionHolds* holds, v1::SessionBatch& batch);
  // `ns` may be null (an acquire_all's namespaces are per lock).
  bool CheckOwnerAndNamespace(const SessionParams& params, uint64_t op_id, std::string* owner,
                              std::string* ns);
  bool InFlight(uint64_t op_id);
  bool StartOp(uint64_t op_id, std::shared_ptr<CancelSignal> cancel);
  absl::Status Authorize(const SessionParams& params, const LockKey& key);
  // True when `params` are valid and the caller may act on their lock;
  // otherwise answers the operation with the error.
  template <typename Params>
  bool Admit(const SessionParams& session, uint64_t op_id, const absl::StatusOr<Params>& params);
  void HandleAcquire(SessionHolds* holds, v1::SessionAcquire& a);
  void OnAcquired(SessionHolds* holds, uint64_t op_id, const AcquireCall& call, absl::Time sent,
                  const absl::StatusOr<AcquireResult>& r);
  void HandleAcquireAll(SessionHolds* holds, v1::SessionAcquireAll& a);
  // Once every lock of an acquire_all is held: whether its result may be
  // sent (not after its cancel or the session's end); records the holds.
  AcquireCall::Delivery DeliverAll(SessionHolds* holds, uint64_t op_id, absl::Time sent,
                                   const std::vector<AcquiredLock>& held);
  void OnAcquiredAll(uint64_t op_id, const grpc::Status& status, v1::AcquireAllResponse resp);
  void HandleRelease(SessionHolds* holds, v1::SessionRelease& rel);
  void OnReleased(SessionHolds* holds, uint64_t op_id, const LockKey& key,
                  absl::StatusOr<ReleaseResult> r);
  void HandleCancel(uint64_t op_id);

  // Ending.
  void BeginEnd(End why, grpc::Status status);
  // An operation's result, counted in queuing_results_ since the operation
  // left ops_, is queued: the end continues if it waited for it.
  void ResultQueued();
  void ContinueEnd();
  void HoldReleased();
  void MaybeFinish();

  // Constant after construction.
  SessionHub* const hub_;
  Backend* const backend_;
  grpc::CallbackServerContext* const ctx_;
  std::atomic<int> refs_{1};  // gRPC's
  SessionWriter writer_{[this](const v1::SessionResponse* resp) { StartWrite(resp); }};
  // What the session's operations were allowed (Authorize); thread-safe.
  AuthorizeMemo authz_memo_;

  absl::Mutex mu_;
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kAwaitOpen;
  // The read in progress: gRPC fills it between StartRead and OnReadDone
  // (one read outstanding); taken under mu_ at both ends.
  v1::SessionRequest request_ ABSL_GUARDED_BY(mu_);
  // Set once, when `open` is accepted (kOpening to kResuming).
  std::unique_ptr<SessionHolds> holds_ ABSL_GUARDED_BY(mu_);
  size_t resumes_left_ ABSL_GUARDED_BY(mu_) = 0;  // open.resume entries being checked
  absl::Status resume_error_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::LockInfo> resumed_ ABSL_GUARDED_BY(mu_);
  // Operations in flight; an acquire's CancelSignal, null for a release.
  absl::flat_hash_map<uint64_t, std::shared_ptr<CancelSignal>> ops_ ABSL_GUARDED_BY(mu_);
  // Operations that left ops_ (their op_id may be used again) and whose
  // result is not queued yet: the end waits for them, so that the writer
  // does not close before the result is queued.
  int queuing_results_ ABSL_GUARDED_BY(mu_) = 0;
  int starting_ ABSL_GUARDED_BY(mu_) = 0;      // StartRead calls under way
  End end_ ABSL_GUARDED_BY(mu_) = End::kNone;  // set on entering kEnding
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
  size_t releases_left_ ABSL_GUARDED_BY(mu_) = 0;  // in kReleasing
};

}  // namespace lockd

#endif  // LOCKD_SERVICE_SESSION_REACTOR_H_
