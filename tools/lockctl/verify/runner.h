// `lockctl verify`: runs workers against a lockd deployment, records what
// they do as a history, and checks it (docs/verify.md).
//
// The run, in order:
//  1. Preflight: a List of the namespace. A namespace that holds a lock of
//     an owner that is not a verify worker is refused (usage error) unless
//     `force`: verify takes and releases locks of its own names there.
//  2. Workers: `workers` child processes (worker.h), each one lockd::Client
//     (one owner) over the session or unary path (`api`; kBoth: two of
//     each in turn), doing tasks the runner hands out: a random workload of
//     `workloads` per task, at most `rate` acquires per second in all. A `server` list
//     ("a:7411,b:7411") is dealt out: worker i talks to replica i mod n, so
//     that every replica serves holders whose holds meet only in the
//     backend; any other gRPC target (dns:///name:7411) goes to every worker
//     as it is, and its client balances over the addresses it resolves.
//  3. The nemesis, if asked (nemesis.h), strikes holders every
//     `nemesis_interval`; a killed or abandoning worker is replaced by a new
//     process (a new history process number), and its task is the next one
//     handed out, so that its locks are wanted at once (the checker measures
//     the time to their next grant).
//  4. After `duration` each worker is told to stop after its current task;
//     one still running `duration` + 2 * ttl + 10 s after the start is
//     killed (the time box).
//  5. Cleanup: every hold of this run's owners still listed in the
//     namespace is released by owner (holds of killed workers; the server
//     would end them with their lease anyway).
//  6. The history goes to `history_file` (if set) and to the checker; the
//     report is printed as text or JSON.
//
// Every event is stamped with the parent's steady clock, which is the
// CLOCK_MONOTONIC every process of the host shares: a worker's lease bound
// (Lease::valid_until) is on the same clock. An acquire's invoke is
// recorded before the worker sends it (the worker asks for its task and sends
// the call after the answer), its ok after the worker saw the grant, so the
// recorded interval always contains the real one.
//
// Thread-safety: RunVerify may be called from one thread at a time per
// process (it installs SIG_IGN for SIGPIPE and forks).

#ifndef LOCKD_TOOLS_LOCKCTL_VERIFY_RUNNER_H_
#define LOCKD_TOOLS_LOCKCTL_VERIFY_RUNNER_H_

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "lockd/client.h"
#include "tools/lockctl/verify/checker.h"
#include "tools/lockctl/verify/nemesis.h"

namespace lockd::lockctl::verify {

enum class Workload { kMutex, kRw, kSemaphore, kAcquireAll };
// "mutex", "rw", "semaphore", "acquire-all".
const char* WorkloadName(Workload w);
// A comma-separated list of workload names (no repeats). kInvalidArgument
// naming --workload and the unknown name.
absl::StatusOr<std::vector<Workload>> ParseWorkloads(absl::string_view text);

// How workers hold (--api): every one over a session stream, every one with
// the unary calls, or half each.
enum class ApiMode { kSession, kUnary, kBoth };
// "session", "unary", "both"; kInvalidArgument naming --api otherwise.
absl::StatusOr<ApiMode> ParseApiMode(absl::string_view text);

struct VerifyOptions {
  std::string server = "127.0.0.1:7411";
  std::string ns = "lockd-verify";
  TlsOptions tls;
  AuthOptions auth;
  absl::Duration rpc_timeout = absl::Seconds(5);

  absl::Duration duration = absl::Seconds(60);
  int workers = 16;  // 1-256
  std::vector<Workload> workloads = {Workload::kMutex, Workload::kRw, Workload::kSemaphore,
                                     Workload::kAcquireAll};
  ApiMode api = ApiMode::kBoth;
  // The lease of every hold (session_ttl for session workers). Below about
  // 6.1 s a session worker's holds go the unary path (lockd/client.h).
  absl::Duration ttl = absl::Seconds(10);
  // How long a worker waits for a lock.
  absl::Duration wait = absl::Seconds(5);
  // A hold lasts a random time in [hold / 10, hold].
  absl::Duration hold = absl::Milliseconds(50);
  double rate = 200;  // acquires per second, all workers together
  NemesisKind nemesis = NemesisKind::kNone;
  absl::Duration nemesis_interval = absl::Seconds(2);
  bool force = false;

  std::string history_file;  // "": not written
  bool json = false;         // the report as JSON

  // The lockctl binary that runs workers ("": /proc/self/exe).
  std::string worker_binary;
  uint64_t seed = 0;  // 0: random
};

// Exit codes besides checker.h's VerifyExit (0 passed, 1 a check failed,
// 2 bad usage).
inline constexpr int kVerifyUnavailable = 69;  // lockctl's code: lockd did not answer
inline constexpr int kVerifyInternal = 70;     // EX_SOFTWARE: e.g. no worker could start

// Runs the whole of it (see above), writing the report to `out` and
// diagnostics to `err`. Returns kVerifyPassed when every check holds,
// kVerifyFailed when one fails (the report names it),
// kVerifyUsage for a refused namespace or a bad target, kVerifyUnavailable
// when lockd cannot be reached for the preflight, kVerifyInternal when the
// workers cannot be started.
int RunVerify(const VerifyOptions& options, std::ostream& out, std::ostream& err);

}  // namespace lockd::lockctl::verify

#endif  // LOCKD_TOOLS_LOCKCTL_VERIFY_RUNNER_H_
