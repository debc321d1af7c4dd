// The holds of one open Session stream (the rules are in session.h,
// "Tokens" and "Renewal"): each lock the session holds with its fencing
// token and lease end, the renewal rounds, the expiry check that gives up a
// hold not renewed in time, the takeover of open.resume entries and the
// release at the end of the stream. Made by SessionReactor when `open` is
// accepted, with the session's owner and lease, and owned by it.
//
// Renewal states (one enum; every transition happens under mu_):
//
//   kIdle      ──ScheduleRenewal, holds not empty──▶ kScheduled
//   kScheduled ──the timer fires──▶ kInFlight (one Backend::RenewMany,
//                                   through the RenewCoalescer)
//   kInFlight  ──the round's answer──▶ kIdle, then ScheduleRenewal at the
//                                   round's send time + lease/3
//   any        ──Stop()──▶ kStopped (final: no round, no expiry check)
//
// The expiry check is one timer (expiry_timer_) at the earliest lease end
// minus a tenth of the lease, scheduled with every renewal and stopped by
// Stop(). `lost` responses go out through the session's SessionWriter.
//
// Thread-safe: guarded by mu_. Lock order: the reactor's mutex, then mu_,
// then the writer's (session_writer.h). Timer and backend callbacks hold a
// counted reference to the session (SessionReactor::NewRef), which owns
// this object, so they always find it alive. No backend call and no Send
// is made with mu_ held.

#ifndef LOCKD_SERVICE_SESSION_HOLDS_H_
#define LOCKD_SERVICE_SESSION_HOLDS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "backends/backend.h"
#include "backends/common/timer_queue.h"
#include "lockd/v1/lock.pb.h"
#include "service/metrics.h"
#include "service/renew_coalescer.h"
#include "service/session_writer.h"
#include "service/validation.h"

namespace lockd {

class SessionReactor;

// What `open` settled for the session; constant once the open is accepted.
struct SessionParams {
  std::string owner;
  std::string ns;  // the default namespace of the session's operations
  absl::Duration ttl;
  bool keep_on_disconnect = false;
};

class SessionHolds {
 public:
  // What the holds work with; everything outlives the session.
  struct Deps {
    SessionReactor* session = nullptr;  // owns the holds; NewRef() only
    SessionWriter* writer = nullptr;    // for `lost`
    Backend* backend = nullptr;
    TimerQueue* timers = nullptr;
    RenewCoalescer* renewals = nullptr;
    Metrics* metrics = nullptr;  // null: no metrics
  };
  SessionHolds(Deps deps, const SessionParams& params) : deps_(deps), params_(params) {}
  // Takes the holds it still counts out of lockd_session_holds.
  ~SessionHolds();
  SessionHolds(const SessionHolds&) = delete;
  SessionHolds& operator=(const SessionHolds&) = delete;

  const SessionParams& params() const { return params_; }

  // Records the grant of `key` with `token`, its lease ending at `expires`
  // (by this server's clock, never later than the backend's).
  void Add(const LockKey& key, uint64_t token, absl::Time expires) ABSL_LOCKS_EXCLUDED(mu_);

  // The next round after `delay` (none while one is pending or in flight,
  // none after Stop); also makes sure the expiry check is scheduled.
  void ScheduleRenewal(absl::Duration delay) ABSL_LOCKS_EXCLUDED(mu_);

  // Takes over the owner's hold `ref` (open.resume): Describe, then Renew
  // (which also proves the owner holds it with that token). `done` gets the
  // hold's LockInfo (it is then one of these holds), NotFound when it is not
  // held with that token any more, or the backend's error.
  void TakeOver(SessionOpenParams::Resume ref,
                absl::AnyInvocable<void(absl::StatusOr<v1::LockInfo>) &&> done)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A release operation on `key` starts (Releasing) and ends (Released with
  // its result): while one is in flight, renewals and the expiry check
  // leave the hold to that result; a result that frees the hold (hold count
  // 0, LOCK_NOT_HELD) forgets it.
  void Releasing(const LockKey& key) ABSL_LOCKS_EXCLUDED(mu_);
  void Released(const LockKey& key, const absl::StatusOr<ReleaseResult>& r)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A ForceRelease freed `key` held with `token`: if that is this session's
  // hold, forgets it and sends `lost` FORCE_RELEASED.
  void ForceReleased(const LockKey& key, uint64_t token) ABSL_LOCKS_EXCLUDED(mu_);

  // The session ends: no renewal round and no expiry check from now on.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Forgets every hold and returns them (key, token).
  std::vector<std::pair<LockKey, uint64_t>> TakeAll() ABSL_LOCKS_EXCLUDED(mu_);

  // Releases the session's hold of `key` with `token` until its hold count
  // is zero (by the token: a hold the owner took since through another
  // session is left alone); `done` runs once, when that is over (a failure
  // is logged: the lease ends the hold).
  void ReleaseToZero(LockKey key, uint64_t token, absl::AnyInvocable<void() &&> done);

 private:
  enum class Renewal { kIdle, kScheduled, kInFlight, kStopped };
  struct Hold {
    uint64_t token = 0;
    // The lease's end by this server's clock, never later than the
    // backend's: the lease plus the last renewal's send time, or plus the
    // grant's lease_start (AcquireResult).
    absl::Time expires;
    int releasing = 0;  // release operations in flight on this lock
  };

  void ScheduleRenewalLocked(absl::Duration delay) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ScheduleExpiryCheckLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckExpiry() ABSL_LOCKS_EXCLUDED(mu_);
  void RenewRound() ABSL_LOCKS_EXCLUDED(mu_);
  void OnRenewed(const std::vector<LockKey>& keys, const std::vector<uint64_t>& tokens,
                 absl::Time sent, const std::vector<absl::StatusOr<RenewResult>>& results)
      ABSL_LOCKS_EXCLUDED(mu_);
  void SendLost(const LockKey& key, uint64_t token, absl::string_view reason);
  // Brings lockd_session_holds up to date with holds_ (call after changing it).
  void CountHoldsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Deps deps_;
  const SessionParams params_;

  absl::Mutex mu_;
  std::map<LockKey, Hold> holds_ ABSL_GUARDED_BY(mu_);
  Renewal renewal_ ABSL_GUARDED_BY(mu_) = Renewal::kIdle;
  TimerQueue::TimerId renew_timer_ ABSL_GUARDED_BY(mu_) = 0;   // in kScheduled
  TimerQueue::TimerId expiry_timer_ ABSL_GUARDED_BY(mu_) = 0;  // 0: none pending
  size_t counted_ ABSL_GUARDED_BY(mu_) = 0;  // holds_.size() as lockd_session_holds has it
};

}  // namespace lockd

#endif  // LOCKD_SERVICE_SESSION_HOLDS_H_
