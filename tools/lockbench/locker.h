// The lock operations a lockbench client performs, behind one interface so
// the contended and uncontended scenarios run unchanged against lockd (over
// gRPC) and against Redis directly (the hiredis baseline, no lockd between).
//
// Each Locker is one client: its own gRPC channel (its own TCP connection)
// or its own Redis connections. Not thread-safe: one thread uses a Locker.

#ifndef LOCKD_TOOLS_LOCKBENCH_LOCKER_H_
#define LOCKD_TOOLS_LOCKBENCH_LOCKER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "lockd/v1/lock.grpc.pb.h"

namespace lockd::bench {

struct AcquireOutcome {
  bool acquired = false;
  uint64_t fencing_token = 0;
};

class Locker {
 public:
  virtual ~Locker() = default;
  // Takes `name` for `owner` with a lease of `lease`, waiting up to `wait`
  // (zero: try once). OK with acquired=false when the wait ended first; an
  // error status when the call failed.
  virtual absl::StatusOr<AcquireOutcome> Acquire(const std::string& name, const std::string& owner,
                                                 absl::Duration lease, absl::Duration wait) = 0;
  // Gives the hold back; an error if the call failed or the owner did not
  // hold the lock (which, in a benchmark, means exclusion was broken).
  virtual absl::Status Release(const std::string& name, const std::string& owner) = 0;
  // Ends the client's use of its connection, once, after its last call: a
  // session half-closes and returns the stream's final status. OK for the
  // others.
  virtual absl::Status Close() { return absl::OkStatus(); }
};

// A new gRPC channel to `target` that shares no connection with any other
// channel of this process (gRPC would otherwise reuse one subchannel for
// every channel with identical arguments), connected before it is returned.
absl::StatusOr<std::shared_ptr<grpc::Channel>> NewDedicatedChannel(const std::string& target,
                                                                   absl::Duration timeout);

// A Locker over lockd's gRPC API (blocking unary calls; the calling thread
// drives the I/O, so the client adds no thread hop to what is measured).
std::unique_ptr<Locker> NewGrpcLocker(std::shared_ptr<grpc::Channel> channel, std::string ns);

// The backend name lockd reports (LockInfo.backend), e.g. "memory".
absl::StatusOr<std::string> BackendName(grpc::Channel* channel, const std::string& ns);

// The critical section's shared counter, read and written non-atomically.
class Counter {
 public:
  virtual ~Counter() = default;
  virtual absl::StatusOr<int64_t> Get() = 0;
  virtual absl::Status Set(int64_t v) = 0;
};

// A counter in this process (a relaxed atomic, so that the race the benchmark
// looks for is not undefined behaviour); `cell` is shared by every client.
std::unique_ptr<Counter> NewLocalCounter(std::atomic<int64_t>* cell);

// A counter at `key` on the Redis server at `address` (host:port), with its
// own connection: GET, then SET in a second round trip.
absl::StatusOr<std::unique_ptr<Counter>> NewRedisCounter(const std::string& address,
                                                         const std::string& key);

// The direct baseline: the redis backend's own Lua scripts
// (backends/redis/scripts.h) and key layout (backends/redis/keys.h) run
// straight from this process with hiredis. Waiting is done the way direct
// Redis lock clients do it: SUBSCRIBE to the lock's release channel, retry on
// a message or when the holder's PTTL runs out. One command connection and
// one subscriber connection per Locker.
absl::StatusOr<std::unique_ptr<Locker>> NewRedisDirectLocker(const std::string& address,
                                                             const std::string& key_prefix,
                                                             const std::string& ns);

}  // namespace lockd::bench

#endif  // LOCKD_TOOLS_LOCKBENCH_LOCKER_H_
