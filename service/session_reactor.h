// The reactor of one Session stream. Internal to the service: the rules are
// in session.h; the reactor is made by SessionHub::Open.
//
// Lifetime: reference counted. gRPC holds one reference until OnDone; every
// backend call and timer of the session holds one until its callback has
// run (or was dropped unrun). The last reference deletes the session, so a
// backend answer that comes after the stream ended finds it alive.

#ifndef LOCKD_SERVICE_SESSION_REACTOR_H_
#define LOCKD_SERVICE_SESSION_REACTOR_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "backends/backend.h"
#include "backends/common/timer_queue.h"
#include "lockd/v1/lock.grpc.pb.h"
#include "service/acquire_call.h"
#include "service/session.h"
#include "service/validation.h"

namespace lockd {

class SessionReactor final
    : public grpc::ServerBidiReactor<v1::SessionRequest, v1::SessionResponse> {
 public:
  SessionReactor(SessionHub* hub, grpc::CallbackServerContext* ctx);

  // Registers with the hub and starts reading (or ends at once when the hub
  // is ending).
  void Begin();
  // Server shutdown: ends the stream with UNAVAILABLE, holds kept.
  void EndForShutdown() { BeginEnd(End::kShutdown, ShutdownStatus()); }
  // See SessionHub::ForceReleased.
  void ForceReleased(const LockKey& key, const std::string& owner, uint64_t token);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // Why the stream ends (see session.h, "End"). kResumeFailed: a backend
  // error while checking open.resume; like kShutdown, it keeps the holds.
  // kRefused: the `open` was not authorized (nothing is held).
  enum class End { kNone, kHalfClose, kBroken, kProtocolError, kShutdown, kResumeFailed, kRefused };
  struct Hold {
    uint64_t token = 0;
    // The lease's end by this server's clock, never later than the
    // backend's: the lease plus the last renewal's send time, or plus the
    // grant's lease_start (AcquireResult).
    absl::Time expires;
    int releasing = 0;  // release operations in flight on this lock
  };

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

  ~SessionReactor() = default;
  Ref NewRef();
  void Unref();
  static grpc::Status ShutdownStatus();

  // Reading and opening (session.cc).
  void Read();
  void Started();
  void ReadFailed();
  bool RequireOpen();
  void ProtocolError(absl::string_view what);
  void HandleOpen(const v1::SessionOpen& open);
  void SendOpened(std::vector<v1::LockInfo> resumed);

  // Operations (session.cc).
  bool CheckOwnerAndNamespace(uint64_t op_id, std::string* owner, std::string* ns);
  bool InFlight(uint64_t op_id);
  bool StartOp(uint64_t op_id, std::shared_ptr<CancelSignal> cancel);
  absl::Status Authorize(const LockKey& key);
  // True when `params` are valid and the caller may act on their lock;
  // otherwise answers the operation with the error.
  template <typename Params>
  bool Admit(uint64_t op_id, const absl::StatusOr<Params>& params);
  void HandleAcquire(v1::SessionAcquire& a);
  void OnAcquired(uint64_t op_id, const AcquireCall& call, absl::Time sent,
                  const absl::StatusOr<AcquireResult>& r);
  void HandleRelease(v1::SessionRelease& rel);
  void OnReleased(uint64_t op_id, const LockKey& key, absl::StatusOr<ReleaseResult> r);
  void HandleCancel(uint64_t op_id);

  // Writing and ending (session.cc).
  void Send(v1::SessionResponse resp);
  void BeginEnd(End why, grpc::Status status);
  void ContinueEnd();
  void MaybeFinish();

  // Holds (session_holds.cc).
  void Resume(std::vector<SessionOpenParams::Resume> refs);
  void ResumeOne(SessionOpenParams::Resume ref);
  void Resumed(absl::StatusOr<v1::LockInfo> info);
  // The next round after `delay` (none while one is pending or in flight);
  // also makes sure the expiry check is scheduled.
  void ScheduleRenewalLocked(absl::Duration delay) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A hold whose lease ends within kLostMargin of its ttl without a
  // successful renewal (the backend unreachable from this replica, or too
  // slow) is given up: `lost` LEASE_EXPIRED goes out while the backend still
  // counts the hold, so the client stops before anyone else can be granted
  // the lock. One timer per session, at the earliest such moment.
  void ScheduleExpiryCheckLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckExpiry();
  void RenewRound();
  void OnRenewed(const std::vector<LockKey>& keys, const std::vector<uint64_t>& tokens,
                 absl::Time sent, const std::vector<absl::StatusOr<RenewResult>>& results);
  void SendLost(const LockKey& key, uint64_t token, absl::string_view reason);
  // Releases the session's hold of `key` with fencing token `token` until its
  // hold count is zero; a hold with another token (the owner's, taken
  // through another session since) is not this session's and is left alone.
  void ReleaseToZero(LockKey key, uint64_t token);
  void Released();

  SessionHub* const hub_;
  Backend* const backend_;
  grpc::CallbackServerContext* const ctx_;
  std::atomic<int> refs_{1};  // gRPC's

  // Set once by the `open`, before any operation starts (opened_ guards the
  // order); read without the mutex afterwards.
  std::string owner_;
  std::string ns_;
  absl::Duration ttl_;
  bool keep_on_disconnect_ = false;

  v1::SessionRequest request_;       // the read in progress
  v1::SessionResponse writing_now_;  // the write in progress

  absl::Mutex mu_;
  bool opening_ ABSL_GUARDED_BY(mu_) = false;     // `open` was read
  bool opened_ ABSL_GUARDED_BY(mu_) = false;      // owner_ and the rest are set
  size_t resumes_left_ ABSL_GUARDED_BY(mu_) = 0;  // open.resume entries being checked
  absl::Status resume_error_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::LockInfo> resumed_ ABSL_GUARDED_BY(mu_);
  // Operations in flight; an acquire's CancelSignal, null for a release.
  absl::flat_hash_map<uint64_t, std::shared_ptr<CancelSignal>> ops_ ABSL_GUARDED_BY(mu_);
  std::map<LockKey, Hold> holds_ ABSL_GUARDED_BY(mu_);
  TimerQueue::TimerId renew_timer_ ABSL_GUARDED_BY(mu_) = 0;
  bool renewing_ ABSL_GUARDED_BY(mu_) = false;  // a round is in flight
  TimerQueue::TimerId expiry_timer_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<v1::SessionResponse> outbox_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  int starting_ ABSL_GUARDED_BY(mu_) = 0;  // StartRead calls under way
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  End end_ ABSL_GUARDED_BY(mu_) = End::kNone;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
  // No operation is left and the holds were dealt with (released or kept).
  bool end_settled_ ABSL_GUARDED_BY(mu_) = false;
  size_t releases_left_ ABSL_GUARDED_BY(mu_) = 0;
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lockd

#endif  // LOCKD_SERVICE_SESSION_REACTOR_H_
