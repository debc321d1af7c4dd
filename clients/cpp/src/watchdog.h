// Internal: the one background thread per Client that renews auto-renewed
// leases every ttl/3 and notices leases whose validity ran out.
//
// Schedule per lease: the first renewal at (send time of the Acquire) + ttl/3;
// after a success at (send time of that Renew) + ttl/3; after a failure that
// did not lose the lease, again after clamp(ttl/10, 50ms, 1s). Renewals run one
// at a time on the thread, each bounded by min(rpc_timeout, remaining
// validity). Leases without auto_renew are tracked only for expiry.
//
// Thread-safe. The thread waits on std::condition_variable with steady_clock
// deadlines rather than absl::Mutex::AwaitWithTimeout: in this Abseil a timed
// wait is an absolute wall-clock deadline, and a wall clock stepped backwards
// would delay renewals.

#ifndef LOCKD_CLIENTS_CPP_SRC_WATCHDOG_H_
#define LOCKD_CLIENTS_CPP_SRC_WATCHDOG_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "clients/cpp/src/lease_state.h"
#include "clients/cpp/src/rpc.h"
#include "lockd/client.h"

namespace lockd::client_internal {

class Watchdog : public std::enable_shared_from_this<Watchdog> {
 public:
  // `channel` may be null (unknown); when given, the thread polls it while
  // it is not READY so that reconnection is prompt (see PauseWatchingChannel).
  Watchdog(std::shared_ptr<Stub> stub, std::shared_ptr<grpc::ChannelInterface> channel,
           ClientOptions options);
  // REQUIRES: Shutdown() was called, or no lease was ever added.
  ~Watchdog();

  // Tracks `lease`; its first renewal (if auto_renew) is due at `first_renew`.
  // Starts the thread on first use.
  void Add(std::shared_ptr<LeaseState> lease, SteadyTime first_renew);
  // Stops tracking `lease` (no effect if not tracked). A renewal of it that is
  // in flight completes, but its result no longer schedules anything.
  void Remove(const LeaseState* lease);
  // The lease was renewed by someone else at `send_time`: next renewal at
  // send_time + ttl/3.
  void Renewed(const LeaseState* lease, SteadyTime send_time);

  // Stops the thread: joins it, or detaches it when called on the thread
  // itself (a lost callback dropped the last reference to the Client); the
  // thread keeps this object alive until it exits. Idempotent.
  void Shutdown();

  // For tests: leases tracked and renewals issued.
  size_t tracked() const;
  uint64_t renewals() const;

 private:
  struct Entry {
    std::shared_ptr<LeaseState> lease;
    SteadyTime next_renew;
  };

  void Run();
  // One renewal of `lease`; reschedules it if still tracked.
  void RenewOne(const std::shared_ptr<LeaseState>& lease);

  const std::shared_ptr<Stub> stub_;
  const std::shared_ptr<grpc::ChannelInterface> channel_;
  const ClientOptions options_;

  // mu_ guards the four fields below. It is a std::mutex (see the top of
  // this file), which clang's -Wthread-safety cannot see, hence no
  // ABSL_GUARDED_BY here.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  absl::flat_hash_map<const LeaseState*, Entry> entries_;
  bool started_ = false;
  bool stop_ = false;
  uint64_t renewals_ = 0;
  std::thread thread_;  // set once, under mu_, by the first Add
};

}  // namespace lockd::client_internal

#endif  // LOCKD_CLIENTS_CPP_SRC_WATCHDOG_H_
