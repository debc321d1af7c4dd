// Gathers the results of a Backend::RenewMany whose renewals complete one by
// one (each Renew's own callback), and calls the RenewMany callback once the
// last one is in.
//
// Thread-safe: Done() may be called from any thread, once per index.

#ifndef LOCKD_BACKENDS_COMMON_RENEW_JOIN_H_
#define LOCKD_BACKENDS_COMMON_RENEW_JOIN_H_

#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "backends/backend.h"

namespace lockd {

class RenewJoin {
 public:
  // REQUIRES: n > 0.
  RenewJoin(size_t n, RenewManyCallback done)
      : results_(n, absl::UnknownError("not renewed")), left_(n), done_(std::move(done)) {}

  // The result of renewal `i` (of n); the last one calls `done`, without a
  // lock held.
  void Done(size_t i, absl::StatusOr<RenewResult> r) {
    std::vector<absl::StatusOr<RenewResult>> all;
    {
      absl::MutexLock l(&mu_);
      results_[i] = std::move(r);
      if (--left_ > 0) return;
      all.swap(results_);
    }
    std::move(done_)(std::move(all));
  }

 private:
  absl::Mutex mu_;
  std::vector<absl::StatusOr<RenewResult>> results_ ABSL_GUARDED_BY(mu_);
  size_t left_ ABSL_GUARDED_BY(mu_);
  RenewManyCallback done_;  // called once, by the last Done
};

}  // namespace lockd

#endif  // LOCKD_BACKENDS_COMMON_RENEW_JOIN_H_
