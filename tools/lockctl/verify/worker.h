// A worker of `lockctl verify`: a child process (lockctl re-executed as the
// hidden command `__verify-worker`), so that the nemesis can SIGKILL or
// SIGSTOP it like any client process. It holds one lockd::Client (one owner)
// and does what the parent tells it over the pipe on fd kWorkerFd (wire.h),
// one request and its answer at a time:
//
//   worker -> parent                                  parent -> worker
//   config? (first line comes from the parent:)       config K V K V ...
//   next                                              op ID KIND HOLD_US (NAME LIMIT PERMITS)...
//                                                     | stop
//   granted ID SESSION(0|1) VALID_UNTIL_NS TOKEN...   ok
//   failed ID CODE UNCERTAIN(0|1) MESSAGE             ok
//   enter NAME TOKEN VALID_UNTIL_NS                   ok
//   read NAME TOKEN                                   value FENCED UNFENCED
//   write NAME TOKEN FENCED UNFENCED                  ok
//   exit NAME TOKEN                                   ok
//   release ID                                        ok | abandon
//   released ID CODE MESSAGE                          ok
//
// One op: the worker acquires (KIND lock, shared, semaphore or all), says
// `granted` (or `failed`), enters the referee for each lock, and for each
// lock it holds exclusive reads the referee's two counters, sleeps HOLD_US
// (the hold), writes both plus one, exits, and releases. It never checks its
// lease between the read and the write: it is the client that pauses at the
// wrong moment, and the referee's fencing is what must catch it. On `abandon`
// it leaves without releasing (_exit: its stream or connection drops).
// VALID_UNTIL_NS is Lease::valid_until() as steady_clock nanoseconds (the
// CLOCK_MONOTONIC every process of the host shares), 0 for a session hold
// whose validity the server keeps renewing.

#ifndef LOCKD_TOOLS_LOCKCTL_VERIFY_WORKER_H_
#define LOCKD_TOOLS_LOCKCTL_VERIFY_WORKER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lockd/client.h"

namespace lockd::lockctl::verify {

// The descriptor a worker finds its pipe on.
inline constexpr int kWorkerFd = 3;
// The hidden command that runs a worker (main.cc).
inline constexpr char kWorkerCommand[] = "__verify-worker";

// What a worker is told first.
struct WorkerConfig {
  std::string server;
  std::string ns;
  std::string owner;
  bool session = true;  // ClientOptions::use_sessions
  absl::Duration ttl = absl::Seconds(10);
  absl::Duration wait = absl::Seconds(5);  // AcquireOptions::wait
  absl::Duration rpc_timeout = absl::Seconds(5);
  TlsOptions tls;
  AuthOptions auth;
};

// The `config` line's fields, and back (kInvalidArgument naming a bad key).
std::vector<std::string> EncodeConfig(const WorkerConfig& config);
absl::StatusOr<WorkerConfig> DecodeConfig(const std::vector<std::string>& fields);

// What an op takes.
enum class OpKind { kLock, kShared, kSemaphore, kAll };
const char* OpKindName(OpKind kind);  // "lock", "shared", "semaphore", "all"

struct OpLock {
  std::string name;
  uint32_t limit = 0;    // a semaphore's; 0 for a lock
  uint32_t permits = 0;  // a semaphore's permits; 0 for a lock
};

struct Op {
  uint64_t id = 0;
  OpKind kind = OpKind::kLock;
  absl::Duration hold;
  std::vector<OpLock> locks;  // one, or several for kAll (all exclusive)
};

// The `op` line's fields, and back (kInvalidArgument naming what is wrong).
std::vector<std::string> EncodeOp(const Op& op);
absl::StatusOr<Op> DecodeOp(const std::vector<std::string>& fields);

// Whether the holder of `op` writes the referee's counters (an exclusive
// hold: a lock, a writer, each lock of AcquireAll) or only enters it.
bool OpWrites(const Op& op);
// The code's name ("DEADLINE_EXCEEDED"), and back (kUnknown if unknown).
std::string CodeName(absl::StatusCode code);
absl::StatusCode CodeFromName(absl::string_view name);

// The worker's main: serves the pipe on kWorkerFd until `stop` or until the
// parent goes away. Returns the process exit code (0, or 1 on a broken pipe
// or config).
int RunWorker();

}  // namespace lockd::lockctl::verify

#endif  // LOCKD_TOOLS_LOCKCTL_VERIFY_WORKER_H_
