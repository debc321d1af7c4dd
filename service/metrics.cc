#include "service/metrics.h"

#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/backend.h"
#include "prometheus/exposer.h"
#include "util/version.h"

namespace lockd {
namespace {

using prometheus::Histogram;

constexpr const char* kKindNames[] = {"exclusive", "shared", "semaphore"};
constexpr const char* kModeNames[] = {"try", "wait"};
constexpr const char* kOutcomeNames[] = {"acquired", "not_acquired", "cancelled", "error"};
constexpr const char* kEndNames[] = {"released", "expired", "force_released", "disconnected"};
constexpr const char* kRenewNames[] = {"ok", "lost", "error"};
constexpr const char* kOpNames[] = {"acquire",  "release", "renew",
                                    "describe", "list",    "force_release"};
constexpr const char* kResultNames[] = {"ok", "not_held", "unavailable", "error"};
constexpr const char* kForceNames[] = {"released", "not_held", "token_mismatch", "error"};
constexpr Permission kPermValues[] = {Permission::kLock, Permission::kRead, Permission::kAdmin};

const Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* b = new Histogram::BucketBoundaries{
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  return *b;
}

const Histogram::BucketBoundaries& HoldBuckets() {
  static const auto* b =
      new Histogram::BucketBoundaries{0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600};
  return *b;
}

int PermIndex(Permission p) {
  switch (p) {
    case Permission::kLock:
      return 0;
    case Permission::kRead:
      return 1;
    case Permission::kAdmin:
      return 2;
  }
  return 0;
}

}  // namespace

KindLabel KindLabelOf(const AcquireParams& params) {
  if (params.limit != 0) return KindLabel::kSemaphore;
  return params.mode == LockMode::kShared ? KindLabel::kShared : KindLabel::kExclusive;
}

BackendResult BackendResultOf(const absl::Status& status) {
  if (status.ok()) return BackendResult::kOk;
  if (IsLockNotHeld(status) || IsFencingTokenMismatch(status)) return BackendResult::kNotHeld;
  if (absl::IsUnavailable(status)) return BackendResult::kUnavailable;
  return BackendResult::kError;
}

Metrics::Metrics(std::string backend, const std::vector<std::string>& namespaces)
    : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::Registry& r = *registry_;
  prometheus::BuildGauge()
      .Name("lockd_build_info")
      .Help("lockd's version, git revision and backend (always 1)")
      .Register(r)
      .Add({{"version", std::string(Version())},
            {"revision", std::string(Revision())},
            {"backend", backend}})
      .Set(1);
  auto& acquires = prometheus::BuildCounter()
                       .Name("lockd_acquire_requests_total")
                       .Help(
                           "Acquire calls by kind (exclusive, shared, semaphore), mode (try: no "
                           "wait_timeout; wait) and result")
                       .Register(r);
  auto& grant = prometheus::BuildHistogram()
                    .Name("lockd_acquire_grant_seconds")
                    .Help("time from an Acquire call to its grant (granted calls)")
                    .Register(r);
  auto& wait = prometheus::BuildHistogram()
                   .Name("lockd_acquire_wait_seconds")
                   .Help("time Acquire calls with a wait_timeout spent in the call, by result")
                   .Register(r);
  auto& hold = prometheus::BuildHistogram()
                   .Name("lockd_hold_duration_seconds")
                   .Help(
                       "how long a lock was held (first grant to end), by how the hold ended; "
                       "holds granted through this replica")
                   .Register(r);
  auto& renewals = prometheus::BuildCounter()
                       .Name("lockd_lease_renewals_total")
                       .Help("Renew calls by result (lost: LOCK_NOT_HELD)")
                       .Register(r);
  auto& force = prometheus::BuildCounter()
                    .Name("lockd_force_releases_total")
                    .Help("ForceRelease calls by result")
                    .Register(r);
  auto& denied = prometheus::BuildCounter()
                     .Name("lockd_auth_denied_total")
                     .Help("calls refused by authentication or authorization")
                     .Register(r);
  auto& latency = prometheus::BuildHistogram()
                      .Name("lockd_backend_request_duration_seconds")
                      .Help(
                          "backend call latency by operation and result (waiting Acquires "
                          "excluded: see lockd_acquire_wait_seconds)")
                      .Register(r);
  held_ = &prometheus::BuildGauge()
               .Name("lockd_locks_held")
               .Help("holds granted through this replica that have not ended")
               .Register(r)
               .Add({{"backend", backend}});
  waiters_ = &prometheus::BuildGauge()
                  .Name("lockd_waiters")
                  .Help("Acquire calls with a wait_timeout in progress on this replica")
                  .Register(r)
                  .Add({{"backend", backend}});
  backend_up_ = &prometheus::BuildGauge()
                     .Name("lockd_backend_up")
                     .Help("1 while the backend is reachable (readiness SERVING), else 0")
                     .Register(r)
                     .Add({{"backend", backend}});
  regressions_ = &prometheus::BuildCounter()
                      .Name("lockd_fencing_token_regressions_total")
                      .Help(
                          "first grants whose token was not larger than the previous holder's "
                          "that this replica saw (must stay 0)")
                      .Register(r)
                      .Add({{"backend", backend}});
  cert_expiry_family_ = &prometheus::BuildGauge()
                             .Name("lockd_tls_certificate_expiry_timestamp_seconds")
                             .Help("Unix time at which the serving TLS certificate expires")
                             .Register(r);

  std::vector<std::string> labels = namespaces;
  labels.emplace_back(kOtherNamespace);
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i + 1 < labels.size()) ns_index_.emplace(labels[i], static_cast<int>(i));
    const std::string& ns = labels[i];
    PerNamespace p;
    for (int k = 0; k < kKinds; ++k) {
      for (int m = 0; m < kModes; ++m) {
        for (int o = 0; o < kOutcomes; ++o) {
          p.acquires[k][m][o] = &acquires.Add({{"backend", backend},
                                               {"namespace", ns},
                                               {"kind", kKindNames[k]},
                                               {"mode", kModeNames[m]},
                                               {"result", kOutcomeNames[o]}});
        }
        p.grant[k][m] = &grant.Add({{"backend", backend},
                                    {"namespace", ns},
                                    {"kind", kKindNames[k]},
                                    {"mode", kModeNames[m]}},
                                   LatencyBuckets());
      }
      for (int o = 0; o < kOutcomes; ++o) {
        p.wait[k][o] = &wait.Add({{"backend", backend},
                                  {"namespace", ns},
                                  {"kind", kKindNames[k]},
                                  {"result", kOutcomeNames[o]}},
                                 LatencyBuckets());
      }
    }
    for (int e = 0; e < kEnds; ++e) {
      p.hold[e] = &hold.Add({{"backend", backend}, {"namespace", ns}, {"ended", kEndNames[e]}},
                            HoldBuckets());
    }
    for (int k = 0; k < kRenews; ++k) {
      p.renewals[k] =
          &renewals.Add({{"backend", backend}, {"namespace", ns}, {"result", kRenewNames[k]}});
    }
    for (int k = 0; k < kForce; ++k) {
      p.force[k] =
          &force.Add({{"backend", backend}, {"namespace", ns}, {"result", kForceNames[k]}});
    }
    for (int k = 0; k < kPerms; ++k) {
      for (int u = 0; u < 2; ++u) {
        p.denied[k][u] = &denied.Add({{"namespace", ns},
                                      {"permission", std::string(PermissionName(kPermValues[k]))},
                                      {"code", u ? "unauthenticated" : "permission_denied"}});
      }
    }
    per_ns_.push_back(p);
  }
  for (int op = 0; op < kOps; ++op) {
    for (int res = 0; res < kResults; ++res) {
      backend_latency_[op][res] = &latency.Add(
          {{"backend", backend}, {"operation", kOpNames[op]}, {"result", kResultNames[res]}},
          LatencyBuckets());
    }
  }
}

Metrics::~Metrics() = default;

int Metrics::NamespaceIndex(absl::string_view ns) const {
  auto it = ns_index_.find(ns);
  return it == ns_index_.end() ? static_cast<int>(per_ns_.size()) - 1 : it->second;
}

void Metrics::AcquireDone(int ns, KindLabel kind, AcquireMode mode, AcquireLabel outcome,
                          absl::Duration elapsed) {
  PerNamespace& p = per_ns_[ns];
  int k = static_cast<int>(kind), m = static_cast<int>(mode), o = static_cast<int>(outcome);
  p.acquires[k][m][o]->Increment();
  double seconds = absl::ToDoubleSeconds(elapsed);
  if (outcome == AcquireLabel::kAcquired) p.grant[k][m]->Observe(seconds);
  if (mode == AcquireMode::kWait) p.wait[k][o]->Observe(seconds);
}

void Metrics::HoldEnded(int ns, HoldEnd how, absl::Duration held) {
  per_ns_[ns].hold[static_cast<int>(how)]->Observe(absl::ToDoubleSeconds(held));
}

void Metrics::RenewDone(int ns, RenewLabel outcome) {
  per_ns_[ns].renewals[static_cast<int>(outcome)]->Increment();
}

void Metrics::BackendRequest(BackendOp op, BackendResult result, absl::Duration elapsed) {
  backend_latency_[static_cast<int>(op)][static_cast<int>(result)]->Observe(
      absl::ToDoubleSeconds(elapsed));
}

void Metrics::ForceReleaseDone(int ns, ForceLabel outcome) {
  per_ns_[ns].force[static_cast<int>(outcome)]->Increment();
}

void Metrics::AuthDenied(absl::string_view ns, Permission permission, bool unauthenticated) {
  per_ns_[NamespaceIndex(ns)].denied[PermIndex(permission)][unauthenticated ? 1 : 0]->Increment();
}

void Metrics::SetCertificateExpiry(absl::Time not_after) {
  if (cert_expiry_ == nullptr) cert_expiry_ = &cert_expiry_family_->Add({});
  cert_expiry_->Set(absl::ToDoubleSeconds(not_after - absl::UnixEpoch()));
}

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& listen, std::shared_ptr<prometheus::Registry> registry) {
  std::unique_ptr<MetricsEndpoint> e(new MetricsEndpoint());
  try {
    e->exposer_ = std::make_unique<prometheus::Exposer>(listen, /*num_threads=*/1);
  } catch (const std::exception& ex) {
    return absl::UnavailableError(
        absl::StrCat("metrics.listen: cannot listen on ", listen, ": ", ex.what()));
  }
  e->exposer_->RegisterCollectable(registry);
  std::vector<int> ports = e->exposer_->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(absl::StrCat("metrics.listen: cannot listen on ", listen));
  }
  e->port_ = ports[0];
  return e;
}

MetricsEndpoint::~MetricsEndpoint() = default;

}  // namespace lockd
