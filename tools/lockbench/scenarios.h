// The lockbench scenarios. Each drives a running lockd (or, for
// contended/uncontended, Redis directly) and returns its figures as a Report;
// an error status means the run itself failed (cannot connect, an RPC error).
// Broken exclusion is not an error status: it is reported (lost_updates,
// ok=false) so that it is seen.
//
// Every client has its own channel (own TCP connection) to lockd and one call
// outstanding at a time; contended/uncontended clients run on event loops or
// threads (driver.h), expiry clients on threads; in `waiters`, W asynchronous
// calls share the C clients' channels. Clients are assigned to the targets
// round-robin.
//
// api = kSession (--api=session): the same clients use lockd's Session stream
// instead of unary calls, one stream per client on its own channel (in
// `waiters`, one stream per WaitersOptions::per_session waiters). `expiry`
// cannot: a session renews its holds while its stream is open, so no lease
// ends by itself (RunExpiry returns INVALID_ARGUMENT); neither can
// --direct-redis. `holders` is sessions only: N streams, each holding one
// lock, spread over HoldersOptions::channels channels (common.clients is not
// used; the report's `clients` is the channel count).
//
// rw, semaphore and acquire-all (kinds.cc) measure the other kinds (shared
// locks, semaphores, AcquireAll: docs/locks.md): each client loops for a
// duration over take (waiting), hold (a timer on the event loop, so holders
// overlap without blocking one another), release. Unary calls on event
// loops only: with --api=session, --sync-client or --direct-redis they
// return INVALID_ARGUMENT. Each client checks, from the grant it received to
// the release it is about to send (an interval inside the server's hold),
// that the holders it sees together are ones the kind allows; any other
// overlap is counted (exclusion_violations, ok=false).
//
// service (service.cc) models a service process: ONE lockd::Client (the
// client library, clients/cpp) shared by ServiceOptions::threads threads,
// api = kSession meaning the Client's use_sessions. Each thread loops
// acquire, critical section, release on its own lock, or, `contended`, on
// lock i % locks through a lockd::Lockable (the Client's owner; the library's
// mutex among threads of one process). Errors are counted by code, not
// returned: any error, lost update or fencing token that did not increase
// makes ok=false. Not with --direct-redis or --sync-client
// (INVALID_ARGUMENT); common.clients is replaced by the thread count.

#ifndef LOCKD_TOOLS_LOCKBENCH_SCENARIOS_H_
#define LOCKD_TOOLS_LOCKBENCH_SCENARIOS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/lockbench/report.h"

namespace lockd::bench {

struct CommonOptions {
  enum class Api { kUnary, kSession };
  Api api = Api::kUnary;
  std::vector<std::string> targets = {"127.0.0.1:7411"};  // lockd host:port
  int clients = 16;
  std::string ns = "lockbench";
  absl::Duration lease = absl::Seconds(10);
  uint64_t seed = 1;
  // Lock names of this run carry this id, so that leftovers of an earlier
  // run (holds whose lease has not ended) never meet this run's clients.
  std::string run_id;
  // host:port of a Redis server: run the scenario straight against it with
  // the redis backend's scripts (the baseline), instead of against lockd.
  std::string direct_redis;
  std::string direct_prefix = "lockbench-direct";
  // contended/uncontended against lockd: blocking gRPC calls on a thread per
  // client instead of asynchronous calls on event loops (driver.h).
  bool sync_client = false;
  int client_threads = 0;  // event loops; 0: one per CPU
};

struct ContendedOptions {
  int64_t budget = 20000;                           // critical sections in total
  absl::Duration max_duration = absl::Seconds(60);  // stop earlier if reached
  absl::Duration wait = absl::Seconds(10);          // wait_timeout of each Acquire
  std::string counter_redis;                        // host:port; empty: in-process counter
};

struct UncontendedOptions {
  absl::Duration duration = absl::Seconds(5);
  int names_per_client = 1;  // each pair picks one of them (seeded)
};

struct WaitersOptions {
  int waiters = 10000;
  int locks = 4;
  int lockd_pid = 0;                            // 0: do not read /proc
  absl::Duration timeout = absl::Seconds(300);  // for parking and for draining
  // api = kSession: waiting acquires per Session stream. The waiters of one
  // stream share its owner, so once one of them is granted a lock, its
  // others on that lock are granted at once (reentrantly) too.
  int per_session = 100;
};

struct HoldersOptions {
  int sessions = 10000;                         // streams, each holding one lock of its own
  int channels = 100;                           // the streams are spread over this many channels
  absl::Duration hold = absl::Seconds(10);      // how long the holds are kept
  int lockd_pid = 0;                            // 0: do not read /proc
  absl::Duration timeout = absl::Seconds(300);  // for setting up and for closing
};

// What rw, semaphore and acquire-all share.
struct HoldLoopOptions {
  absl::Duration duration = absl::Seconds(5);
  absl::Duration hold = absl::Milliseconds(1);  // from grant to release
  absl::Duration wait = absl::Seconds(10);      // wait_timeout of each acquire
};

// One name; each acquire is a read with probability `readers`, else a write.
// Reads take SHARED unless `exclusive_reads` (the baseline: the same
// critical sections, every acquire exclusive).
struct RwOptions {
  HoldLoopOptions loop;
  double readers = 0.9;
  bool exclusive_reads = false;
};

// One semaphore of `limit` permits; each acquire takes `permits`.
struct SemaphoreOptions {
  HoldLoopOptions loop;
  uint32_t limit = 4;
  uint32_t permits = 1;
};

// `names` locks; each round takes two distinct ones at random with one
// AcquireAll, listed in a random order (so callers list them in opposite
// orders), holds both, releases both.
struct AcquireAllOptions {
  HoldLoopOptions loop;
  int names = 8;
};

// lockd::Client holds a lease on its session only when 2/3 of it, less the
// drift, outlasts the channel's keepalive (2 s + 2 s by default): about
// 6.1 s (lockd/client.h "Sessions"); it takes shorter leases by unary
// calls, so RunService refuses them with api = kSession (INVALID_ARGUMENT).
inline constexpr absl::Duration kServiceMinSessionLease = absl::Seconds(7);

struct ServiceOptions {
  int threads = 64;
  absl::Duration duration = absl::Seconds(5);
  // Time spent in each critical section (asleep); 0: release at once.
  absl::Duration hold = absl::ZeroDuration();
  bool contended = false;  // threads share `locks` locks; else one lock each
  int locks = 8;
  absl::Duration wait = absl::Seconds(10);  // contended: each waiting acquire's bound
};

struct ExpiryOptions {
  int chain = 3;  // clients per lock: one holder, chain-1 waiters; none releases
};

absl::StatusOr<Report> RunContended(const CommonOptions& common, const ContendedOptions& options);
absl::StatusOr<Report> RunUncontended(const CommonOptions& common,
                                      const UncontendedOptions& options);
absl::StatusOr<Report> RunWaiters(const CommonOptions& common, const WaitersOptions& options);
// INVALID_ARGUMENT unless common.api is kSession (and no --direct-redis).
absl::StatusOr<Report> RunHolders(const CommonOptions& common, const HoldersOptions& options);
absl::StatusOr<Report> RunExpiry(const CommonOptions& common, const ExpiryOptions& options);
absl::StatusOr<Report> RunRw(const CommonOptions& common, const RwOptions& options);
absl::StatusOr<Report> RunSemaphore(const CommonOptions& common, const SemaphoreOptions& options);
absl::StatusOr<Report> RunService(const CommonOptions& common, const ServiceOptions& options);
absl::StatusOr<Report> RunAcquireAll(const CommonOptions& common, const AcquireAllOptions& options);

}  // namespace lockd::bench

#endif  // LOCKD_TOOLS_LOCKBENCH_SCENARIOS_H_
