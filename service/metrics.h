// lockd's Prometheus metrics (prometheus-cpp) and the /metrics endpoint.
//
// Labels never carry a lock name, owner or request id (unbounded
// cardinality). `namespace` is the request's namespace only if it is in the
// configured allow-list (`metrics.namespaces`), else "_other". Every series
// is created up front, so the hot path is a few atomic increments (and, for
// histograms, prometheus-cpp's per-series mutex) with no map lookup beyond
// the namespace's index.
//
// Families (docs/operations/monitoring.md lists them with their meaning):
//   lockd_build_info{version,revision,backend}                gauge = 1
//   lockd_acquire_requests_total{backend,namespace,kind,mode,result}
//       kind: exclusive | shared | semaphore (what the acquire asked; each
//       lock of an AcquireAll counts as one acquire); mode: try | wait;
//       result: acquired | not_acquired | cancelled | error
//   lockd_acquire_grant_seconds{backend,namespace,kind,mode}  histogram
//   lockd_acquire_wait_seconds{backend,namespace,kind,result} histogram (mode=wait)
//   lockd_hold_duration_seconds{backend,namespace,ended}      histogram
//       ended: released | expired | force_released | disconnected
//   lockd_locks_held{backend}, lockd_waiters{backend}         gauges
//   lockd_lease_renewals_total{backend,namespace,result}      ok | lost | error
//   lockd_backend_request_duration_seconds{backend,operation,result}
//       operation: acquire | release | renew | describe | list | force_release;
//       result: ok | not_held | unavailable | error
//   lockd_backend_up{backend}                                 gauge 0/1
//   lockd_force_releases_total{backend,namespace,result}      released | not_held | token_mismatch
//   | error lockd_fencing_token_regressions_total{backend}            counter
//   lockd_auth_denied_total{namespace,permission,code}        unauthenticated | permission_denied
//   lockd_tls_certificate_expiry_timestamp_seconds            gauge (Unix time; with TLS)
//
// Thread-safe: every method may be called from any thread.

#ifndef LOCKD_SERVICE_METRICS_H_
#define LOCKD_SERVICE_METRICS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "backends/backend.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "service/auth_config.h"

namespace prometheus {
class Exposer;
}

namespace lockd {

inline constexpr absl::string_view kOtherNamespace = "_other";

enum class AcquireMode { kTry = 0, kWait = 1 };
enum class KindLabel { kExclusive = 0, kShared = 1, kSemaphore = 2 };
enum class AcquireLabel { kAcquired = 0, kNotAcquired = 1, kCancelled = 2, kError = 3 };
enum class HoldEnd { kReleased = 0, kExpired = 1, kForceReleased = 2, kDisconnected = 3 };
enum class RenewLabel { kOk = 0, kLost = 1, kError = 2 };
enum class BackendOp { kAcquire = 0, kRelease, kRenew, kDescribe, kList, kForceRelease };
enum class BackendResult { kOk = 0, kNotHeld, kUnavailable, kError };
enum class ForceLabel { kReleased = 0, kNotHeld, kTokenMismatch, kError };

// The kind label of an acquire.
KindLabel KindLabelOf(const AcquireParams& params);

// The result label of a backend status.
BackendResult BackendResultOf(const absl::Status& status);

class Metrics {
 public:
  // `backend` is the backend label; `namespaces` the allow-list.
  Metrics(std::string backend, const std::vector<std::string>& namespaces);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // The index of `ns`'s label value (allow-list position, or the "_other"
  // slot). Cheap: one hash lookup in an immutable map.
  int NamespaceIndex(absl::string_view ns) const;

  void AcquireDone(int ns, KindLabel kind, AcquireMode mode, AcquireLabel outcome,
                   absl::Duration elapsed);
  void HoldEnded(int ns, HoldEnd how, absl::Duration held);
  void RenewDone(int ns, RenewLabel outcome);
  void BackendRequest(BackendOp op, BackendResult result, absl::Duration elapsed);
  void ForceReleaseDone(int ns, ForceLabel outcome);
  void AuthDenied(absl::string_view ns, Permission permission, bool unauthenticated);
  void FencingRegression() { regressions_->Increment(); }
  prometheus::Gauge& locks_held() { return *held_; }
  prometheus::Gauge& waiters() { return *waiters_; }
  void SetBackendUp(bool up) { backend_up_->Set(up ? 1 : 0); }
  // Unix time at which the serving certificate expires.
  void SetCertificateExpiry(absl::Time not_after);

 private:
  static constexpr int kKinds = 3, kModes = 2, kOutcomes = 4, kEnds = 4, kRenews = 3, kOps = 6,
                       kResults = 4, kForce = 4, kPerms = 3;
  struct PerNamespace {
    prometheus::Counter* acquires[kKinds][kModes][kOutcomes];
    prometheus::Histogram* grant[kKinds][kModes];
    prometheus::Histogram* wait[kKinds][kOutcomes];
    prometheus::Histogram* hold[kEnds];
    prometheus::Counter* renewals[kRenews];
    prometheus::Counter* force[kForce];
    prometheus::Counter* denied[kPerms][2];
  };

  const std::shared_ptr<prometheus::Registry> registry_;
  absl::flat_hash_map<std::string, int> ns_index_;  // immutable after construction
  std::vector<PerNamespace> per_ns_;                // allow-list order, then _other
  prometheus::Histogram* backend_latency_[kOps][kResults];
  prometheus::Gauge* held_;
  prometheus::Gauge* waiters_;
  prometheus::Gauge* backend_up_;
  prometheus::Counter* regressions_;
  prometheus::Gauge* cert_expiry_ = nullptr;
  prometheus::Family<prometheus::Gauge>* cert_expiry_family_;
};

// The /metrics HTTP endpoint (prometheus-cpp's civetweb exposer).
class MetricsEndpoint {
 public:
  // Serves `registry` on `listen` ("host:port"; port 0 picks a free one).
  // kUnavailable if it cannot listen.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& listen, std::shared_ptr<prometheus::Registry> registry);
  ~MetricsEndpoint();
  int port() const { return port_; }

 private:
  MetricsEndpoint() = default;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace lockd

#endif  // LOCKD_SERVICE_METRICS_H_
