// Helpers the scenario files (scenarios.cc, waiters.cc, kinds.cc) share.
// Internal to lockbench.

#ifndef LOCKD_TOOLS_LOCKBENCH_SCENARIO_UTIL_H_
#define LOCKD_TOOLS_LOCKBENCH_SCENARIO_UTIL_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tools/lockbench/driver.h"
#include "tools/lockbench/report.h"
#include "tools/lockbench/scenarios.h"
#include "tools/lockbench/stats.h"

namespace lockd::bench {

inline constexpr absl::Duration kConnectTimeout = absl::Seconds(20);

// The lockd address of client `client` (round-robin over --target).
std::string Target(const CommonOptions& c, int client);

// The owner of client `client` in `role`, unique to this run.
std::string Owner(const CommonOptions& c, absl::string_view role, int client);

// A report with the fields every report starts with (scenario, api, backend
// as lockd reports it, target, clients, seed, lease_ms). Errors: lockd could
// not be reached or described.
absl::StatusOr<Report> NewReport(const CommonOptions& c, absl::string_view scenario);

// prefix_{samples,p50_ms,p90_ms,p99_ms,max_ms}.
void AddLatency(Report& r, const std::string& prefix, Samples& s);

// n per second over `nanos` (0 if nanos <= 0).
double PerSecond(int64_t n, int64_t nanos);

// a = max(a, v), atomically.
void AtomicMax(std::atomic<int64_t>& a, int64_t v);

// The first error any client saw; clients stop at the first one.
// Thread-safe.
class FirstError {
 public:
  void Set(absl::Status s) {
    absl::MutexLock l(&mu_);
    if (status_.ok()) status_ = std::move(s);
  }
  absl::Status Get() {
    absl::MutexLock l(&mu_);
    return status_;
  }

 private:
  absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

// Runs `logics` against lockd (event loops, or threads with --sync-client)
// or, with --direct-redis, against Redis on threads (driver.h). Returns how
// the clients ran, for the report.
absl::StatusOr<std::string> RunClients(const CommonOptions& c,
                                       const std::vector<ClientLogic*>& logics,
                                       const StartFn& start);

}  // namespace lockd::bench

#endif  // LOCKD_TOOLS_LOCKBENCH_SCENARIO_UTIL_H_
