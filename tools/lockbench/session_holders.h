// The holders scenario's streams: N Session streams, each the session of its
// own owner holding ONE lock of its own, kept open (the server renews the
// hold each lease/3, docs/api.md "Sessions") until Close() half-closes them all.
// Callback API, so N streams need no N threads on this side.

#ifndef LOCKD_TOOLS_LOCKBENCH_SESSION_HOLDERS_H_
#define LOCKD_TOOLS_LOCKBENCH_SESSION_HOLDERS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lockd/v1/lock.grpc.pb.h"

namespace lockd::bench {

class HolderStream;

// Thread-safe: the streams' callbacks run on gRPC threads; its own state is
// guarded by mu_.
class SessionHolders {
 public:
  struct Options {
    std::string ns;
    absl::Duration lease;  // the sessions' lease_ttl
    int sessions = 0;
  };
  // Reported from gRPC threads, each for stream `s`:
  //  acquired  once, when its acquire (no wait) is answered: OK if the lock
  //            was granted, else why not; `nanos` since the stream was
  //            started (open + acquire);
  //  lost      for every `lost` the server pushes;
  //  ended     once, with the stream's final status (OK after Close() means
  //            the server released the hold).
  struct Callbacks {
    std::function<void(int s, const absl::Status&, int64_t nanos)> acquired;
    std::function<void(int s, const v1::LockLost&)> lost;
    std::function<void(int s, const absl::Status&)> ended;
  };

  // REQUIRES: `callbacks` are thread-safe and outlive this object.
  SessionHolders(Options options, Callbacks callbacks);
  // Cancels the streams still open and waits until every one has ended.
  ~SessionHolders();

  // Opens the streams (stream s for owner(s), acquiring lock(s), on
  // stubs[s % size]): each sends `open` and its acquire; returns at once.
  // Call once. REQUIRES: `stubs` outlive this object.
  void Start(const std::vector<v1::LockService::Stub*>& stubs,
             const std::function<std::string(int)>& owner,
             const std::function<std::string(int)>& lock);

  // Half-closes every stream (once its writes are done): the server releases
  // its hold and ends it with OK.
  void Close();
  // Cancels every stream still open (a broken stream for the server).
  void Cancel();
  // Waits up to `timeout` for every stream to end; true if they all did.
  bool AwaitEnded(absl::Duration timeout);

  int sessions() const { return static_cast<int>(streams_.size()); }

 private:
  friend class HolderStream;
  void StreamDone();
  bool AllStreamsDone() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return streams_done_ >= static_cast<int>(streams_.size());
  }

  const Options options_;
  const Callbacks callbacks_;
  std::vector<std::unique_ptr<HolderStream>> streams_;  // set by Start only
  mutable absl::Mutex mu_;
  int streams_done_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace lockd::bench

#endif  // LOCKD_TOOLS_LOCKBENCH_SESSION_HOLDERS_H_
