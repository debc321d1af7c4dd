// Internal: the shared state of one Lease, seen by the Lease object, the
// watchdog and renewals.
//
// Thread-safe: mutable state is behind mu_; on_lost runs with no lock held.

#ifndef LOCKD_CLIENTS_CPP_SRC_LEASE_STATE_H_
#define LOCKD_CLIENTS_CPP_SRC_LEASE_STATE_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "clients/cpp/src/lease_validity.h"
#include "lockd/client.h"

namespace lockd::client_internal {

class LeaseState {
 public:
  struct Params {
    std::string ns;
    std::string name;
    std::string owner;
    uint64_t fencing_token = 0;
    uint32_t hold_count = 0;
    // The kind asked for (LockTarget).
    HoldMode mode = HoldMode::kExclusive;
    uint32_t limit = 0;
    uint32_t permits = 0;
    absl::Duration ttl;  // granted
    absl::Duration drift;
    bool auto_renew = true;
    // Held over the Client's session stream (renewed by the server, not the
    // watchdog; valid_until is kept by the SessionStream).
    bool session = false;
    SteadyTime valid_until;
    LostCallback on_lost;
  };
  explicit LeaseState(Params p);

  // Constant after construction.
  const std::string ns;
  const std::string name;
  const std::string owner;
  const uint64_t fencing_token;
  const uint32_t hold_count;
  const HoldMode mode;
  const uint32_t limit;
  const uint32_t permits;
  const absl::Duration ttl;
  const absl::Duration drift;
  const bool auto_renew;
  const bool session;

  SteadyTime valid_until() const;
  // OK while not lost.
  absl::Status lost_status() const;
  bool active() const;

  // Marks an active lease lost if `now` reached its validity deadline.
  // Returns whether the lease is lost.
  bool CheckExpiry(SteadyTime now);

  // Records a Renew sent at `send_time` that succeeded with `granted` ttl and
  // `token`, its reply seen at `reply_time`. A different token, or a reply
  // seen after the validity deadline, marks the lease lost. Returns the lost
  // status (OK if not lost).
  absl::Status OnRenewed(SteadyTime send_time, SteadyTime reply_time, absl::Duration granted,
                         uint64_t token);

  // Sets the validity deadline (session holds: the SessionStream keeps it).
  void SetValidUntil(SteadyTime until);

  // Marks the lease lost with `why` (first call wins; later ones are
  // ignored) and, if it is still active, runs on_lost once.
  void MarkLost(absl::Status why);

  // Ends the lease locally (Release, Detach): no more renewals, no on_lost.
  // Notices a passed validity deadline first.
  struct EndResult {
    bool was_active;
    absl::Status lost;  // OK if the lease was not lost
  };
  EndResult End(SteadyTime now);

  // Records a loss found after End() (a Release answered LOCK_NOT_HELD).
  void SetLostAfterEnd(absl::Status why);

 private:
  // Sets lost_ if not set; returns the callback to run (empty if none).
  LostCallback MarkLostLocked(absl::Status why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  SteadyTime valid_until_ ABSL_GUARDED_BY(mu_);
  absl::Status lost_ ABSL_GUARDED_BY(mu_);
  bool active_ ABSL_GUARDED_BY(mu_) = true;
  LostCallback on_lost_ ABSL_GUARDED_BY(mu_);
};

// `d` in milliseconds for a gRPC channel argument (capped at INT_MAX).
int ToGrpcMillis(absl::Duration d);

}  // namespace lockd::client_internal

#endif  // LOCKD_CLIENTS_CPP_SRC_LEASE_STATE_H_
