// A worker of `lockctl verify`: a child process (lockctl re-executed as the
// hidden command `__verify-worker`), so that the nemesis can SIGKILL or
// SIGSTOP it like any client process. It holds one lockd::Client (one owner)
// and does what the parent tells it over the pipe on fd kWorkerFd (wire.h),
// one request and its answer at a time:
//
//   worker -> parent                                  parent -> worker
//   (first line, from the parent:)                    config K V K V ...
//   next                                              task ID KIND HOLD_US (NAME LIMIT PERMITS)...
//                                                     | stop
//   granted ID VALID_UNTIL_NS TOKEN...                ok
//   failed ID CODE UNCERTAIN(0|1) MESSAGE             ok
//   read NAME TOKEN                                   value FENCED UNFENCED
//   write NAME TOKEN FENCED UNFENCED                  ok
//   release ID VALID_UNTIL_NS                         ok | abandon
//   released ID CODE MESSAGE                          ok
//
// One task: the worker acquires (KIND lock, shared, semaphore or all) and
// says `granted` (tokens in the task's lock order) or `failed`; for each lock
// it holds exclusive it reads the referee's two counters, sleeps HOLD_US (a
// reader or a semaphore holder just sleeps), writes both plus one, then
// releases. Just before each write it checks its lease (Lease::valid()) and
// skips the write on one its client no longer vouches for, so that a worker
// never writes after its own lease bound unless it is stopped between that
// check and the write (the pause-holders nemesis: then the referee's fencing
// must catch it). On `abandon` it exits without releasing (_exit: its
// stream or connection drops). The parent stamps every event when the
// request arrives: `next` is answered before the acquire is sent and
// `release` before the release is. VALID_UNTIL_NS is Lease::valid_until() as
// steady_clock nanoseconds (CLOCK_MONOTONIC, shared by every process of the
// host), 0 for a session hold whose validity the server keeps renewing
// (time_point::max()).

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

// What an task takes.
enum class TaskKind { kLock, kShared, kSemaphore, kAll };
const char* TaskKindName(TaskKind kind);  // "lock", "shared", "semaphore", "all"

struct TaskLock {
  std::string name;
  uint32_t limit = 0;    // a semaphore's; 0 for a lock
  uint32_t permits = 0;  // a semaphore's permits; 0 for a lock
};

struct Task {
  uint64_t id = 0;
  TaskKind kind = TaskKind::kLock;
  absl::Duration hold;
  std::vector<TaskLock> locks;  // one, or several for kAll (all exclusive)
};

// The `task` line's fields, and back (kInvalidArgument naming what is wrong).
std::vector<std::string> EncodeTask(const Task& task);
absl::StatusOr<Task> DecodeTask(const std::vector<std::string>& fields);

// Whether the holder of `task` writes the referee's counters (an exclusive
// hold: a lock, a writer, each lock of AcquireAll) or only enters it.
bool TaskWrites(const Task& task);
// The code's name ("DEADLINE_EXCEEDED"), and back (kUnknown if unknown).
std::string CodeName(absl::StatusCode code);
absl::StatusCode CodeFromName(absl::string_view name);

// The worker's main: serves the pipe on kWorkerFd until `stop` or until the
// parent goes away. Returns the process exit code (0, or 1 on a broken pipe
// or config).
int RunWorker();

}  // namespace lockd::lockctl::verify

#endif  // LOCKD_TOOLS_LOCKCTL_VERIFY_WORKER_H_
