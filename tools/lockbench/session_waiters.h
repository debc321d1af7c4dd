// The waiters scenario over Session streams: many waiting acquires share one
// stream (docs/api.md "Sessions": a waiting acquire never delays the others), each
// released on its stream as soon as it is granted; a stream half-closes once
// all of its waiters are done. Callback API, so W waiters need no W threads.

#ifndef LOCKD_TOOLS_LOCKBENCH_SESSION_WAITERS_H_
#define LOCKD_TOOLS_LOCKBENCH_SESSION_WAITERS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lockd/v1/lock.grpc.pb.h"

namespace lockd::bench {

class WaiterStream;

// Thread-safe: the streams' callbacks run on gRPC threads; its own state is
// guarded by mu_.
class SessionWaiters {
 public:
  struct Options {
    std::string ns;
    absl::Duration lease;            // the sessions' lease_ttl
    absl::Duration wait;             // each acquire's wait_timeout
    std::vector<std::string> locks;  // waiter i waits on locks[i % locks.size()]
    int waiters = 0;
    int per_session = 100;  // waiters per stream, the last may have fewer
  };
  // Reported from gRPC threads: `granted` when a waiter's acquire is granted;
  // `finished` once per waiter, OK when it was granted and released, else
  // why not (a stream that ends early finishes its outstanding waiters with
  // the stream's status).
  struct Callbacks {
    std::function<void()> granted;
    std::function<void(const absl::Status&)> finished;
  };

  // REQUIRES: `callbacks` are thread-safe and outlive this object.
  SessionWaiters(Options options, Callbacks callbacks);
  // Cancels the streams still open and waits until every one has ended.
  ~SessionWaiters();

  // Opens the streams (stream s for owner owner(s), on stubs[s % size]) and
  // sends every waiter's acquire; returns at once. Call once.
  // REQUIRES: `stubs` outlive this object.
  void Start(const std::vector<v1::LockService::Stub*>& stubs,
             const std::function<std::string(int)>& owner);

  // Cancels every stream still open (their waiters finish CANCELLED).
  void Cancel();

  int sessions() const { return static_cast<int>(streams_.size()); }

 private:
  friend class WaiterStream;
  void StreamDone();
  bool AllStreamsDone() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return streams_done_ >= static_cast<int>(streams_.size());
  }

  const Options options_;
  const Callbacks callbacks_;
  std::vector<std::unique_ptr<WaiterStream>> streams_;  // set by Start only
  mutable absl::Mutex mu_;
  int streams_done_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace lockd::bench

#endif  // LOCKD_TOOLS_LOCKBENCH_SESSION_WAITERS_H_
