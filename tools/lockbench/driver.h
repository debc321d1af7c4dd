// How lockbench's clients run. A client's behaviour is a state machine
// (ClientLogic): it names the next lock operation and is told its result. The
// same logic then runs either
//   * on blocking threads, one per client, over a Locker (the direct-Redis
//     baseline, or lockd with --sync-client), or
//   * on a few asynchronous gRPC event loops (CompletionQueue, one thread per
//     CPU by default) where each client still has its own channel and one
//     call outstanding at a time. This is the default against lockd: a
//     blocking gRPC client spends more CPU per call than lockd itself does
//     (measured: bench/RESULTS.md), and on a shared machine that CPU is taken
//     from the server being measured.
// Against lockd, calls are unary RPCs or ops on one Session stream per
// client (--api=session; session.h).
// A logic may block briefly inside Next() (the contended scenario's critical
// section talks to Redis); its event loop waits meanwhile, which delays no
// one else's measurement because no other client can be granted the lock.
// A logic whose holders overlap (shared locks, semaphores) must not block:
// it holds with a kPause op instead, a timer on the event loop.
//
// The other kinds (shared locks, semaphores, AcquireAll: docs/api.md and
// docs/locks.md): a kAcquire with `shared` or `limit`, kAcquireAll and kPause run
// on RunOnEventLoops only (unary calls). The other drivers send every
// kAcquire as an exclusive acquire and know neither kAcquireAll nor kPause;
// the scenarios that use them refuse to run on those drivers.

#ifndef LOCKD_TOOLS_LOCKBENCH_DRIVER_H_
#define LOCKD_TOOLS_LOCKBENCH_DRIVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "tools/lockbench/locker.h"

namespace lockd::bench {

struct Op {
  enum class Kind { kAcquire, kAcquireAll, kRelease, kPause, kDone };
  Kind kind = Kind::kDone;
  const std::string* name = nullptr;  // kAcquire, kRelease; must outlive the operation
  // kAcquire, kAcquireAll: the wait_timeout (zero: try once); kPause: how
  // long to pause.
  absl::Duration wait = absl::ZeroDuration();
  // kAcquireAll: the locks in the order the caller lists them (the server
  // sorts them); must outlive the operation.
  const std::vector<std::string>* names = nullptr;
  // kAcquire, kAcquireAll (every lock): the kind. The defaults are an
  // exclusive lock; `limit` non-zero makes it a semaphore acquire of
  // `permits` (0 means 1).
  bool shared = false;
  uint32_t limit = 0;
  uint32_t permits = 0;
};

struct OpResult {
  absl::Status status;    // the call failed (not: "not acquired")
  bool acquired = false;  // kAcquireAll: every lock is held
  uint64_t fencing_token = 0;
};

// Not thread-safe: a driver calls one logic from one thread at a time.
class ClientLogic {
 public:
  virtual ~ClientLogic() = default;
  virtual const std::string& owner() const = 0;
  // The first operation.
  virtual Op First() = 0;
  // The next operation, given the result of the previous one.
  virtual Op Next(const OpResult& result) = 0;
};

// Called once, with the start time (NowNanos), before any First().
using StartFn = std::function<void(int64_t start_ns)>;

// One thread per logic, each over its Locker (lockers[i] for logics[i]).
// Returns when every logic is done and each Locker is closed: the first
// error of a Close() (an op's error goes to its logic).
absl::Status RunOnThreads(const std::vector<std::unique_ptr<Locker>>& lockers,
                          const std::vector<ClientLogic*>& logics, absl::Duration lease,
                          const StartFn& start);

// Asynchronous gRPC: channels[i] for logics[i], `threads` event loops.
// Returns when every logic is done.
void RunOnEventLoops(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                     const std::string& ns, const std::vector<ClientLogic*>& logics,
                     absl::Duration lease, int threads, const StartFn& start);

// The same over lockd's Session stream (docs/api.md "Sessions"): each logic opens
// one stream on channels[i] (owner = its owner, lease_ttl = `lease`,
// namespace `ns`), all opened before `start`; then each op is a
// SessionAcquire/SessionRelease with increasing op_ids, one outstanding per
// client; a non-OK result.status is the op's failure. When its logic is done
// a client half-closes and waits for the stream's end. Returns the first
// stream-level error (an open that failed, a stream that did not end OK);
// if an open failed, no logic is started.
absl::Status RunSessionsOnEventLoops(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                                     const std::string& ns, const std::vector<ClientLogic*>& logics,
                                     absl::Duration lease, int threads, const StartFn& start);

}  // namespace lockd::bench

#endif  // LOCKD_TOOLS_LOCKBENCH_DRIVER_H_
