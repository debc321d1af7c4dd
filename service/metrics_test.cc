// Unit tests of the metrics decorator over the real memory backend: what
// each call records, read back from the prometheus-cpp registry.

#include "service/metrics.h"

#include <fstream>
#include <memory>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "backends/memory/memory_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "service/metrics_backend.h"
#include "tests/support/status_matchers.h"
#include "util/version.h"

namespace lockd {
namespace {

using ::lockd::testing::IsLockNotHeld;
using ::testing::HasSubstr;
using ::testing::Not;

class MetricsBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    metrics_ = std::make_unique<Metrics>("memory", std::vector<std::string>{"orders"});
    auto inner = NewMemoryBackend(MemoryOptions());
    ASSERT_TRUE(inner.ok());
    backend_ = std::make_unique<MetricsBackend>(*std::move(inner), metrics_.get());
  }
  void TearDown() override { backend_->Shutdown(); }

  // The value of the series `name{labels, more}` ("" labels: the only one),
  // or -1.
  double Value(const std::string& name, const prometheus::Labels& labels = {},
               const prometheus::Labels& more = {}) {
    prometheus::Labels all = labels;
    all.insert(more.begin(), more.end());
    for (const auto& family : metrics_->registry()->Collect()) {
      for (const auto& m : family.metric) {
        bool match = true;
        for (const auto& [k, v] : all) {
          bool found = false;
          for (const auto& l : m.label) found |= l.name == k && l.value == v;
          match &= found;
        }
        if (!match) continue;
        if (family.name == name) {
          if (family.type == prometheus::MetricType::Counter) return m.counter.value;
          if (family.type == prometheus::MetricType::Gauge) return m.gauge.value;
        }
        if (family.name + "_count" == name) {
          return static_cast<double>(m.histogram.sample_count);
        }
      }
    }
    return -1;
  }

  AcquireResult Acquire(const std::string& ns, const std::string& name, const std::string& owner,
                        absl::Duration ttl = absl::Seconds(30),
                        absl::Duration wait = absl::ZeroDuration()) {
    absl::Notification done;
    AcquireResult out;
    backend_->Acquire(AcquireParams{{ns, name}, owner, ttl, wait, ""}, nullptr,
                      [&](absl::StatusOr<AcquireResult> r) {
                        EXPECT_TRUE(r.ok()) << r.status();
                        if (r.ok()) out = *r;
                        done.Notify();
                      });
    done.WaitForNotification();
    return out;
  }

  absl::Status Release(const std::string& ns, const std::string& name, const std::string& owner) {
    absl::Notification done;
    absl::Status out;
    backend_->Release(ReleaseParams{{ns, name}, owner, ""}, [&](absl::StatusOr<ReleaseResult> r) {
      out = r.status();
      done.Notify();
    });
    done.WaitForNotification();
    return out;
  }

  absl::Status Renew(const std::string& ns, const std::string& name, const std::string& owner) {
    absl::Notification done;
    absl::Status out;
    backend_->Renew(RenewParams{{ns, name}, owner, absl::Seconds(30)},
                    [&](absl::StatusOr<RenewResult> r) {
                      out = r.status();
                      done.Notify();
                    });
    done.WaitForNotification();
    return out;
  }

  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<MetricsBackend> backend_;
};

TEST_F(MetricsBackendTest, AcquiresAreCountedByNamespaceModeAndResult) {
  EXPECT_TRUE(Acquire("orders", "a", "o1").acquired);
  EXPECT_FALSE(Acquire("orders", "a", "o2").acquired);
  EXPECT_FALSE(Acquire("orders", "a", "o2", absl::Seconds(30), absl::Milliseconds(50)).acquired);
  EXPECT_TRUE(Acquire("billing", "b", "o1").acquired);
  const std::string acq = "lockd_acquire_requests_total";
  const prometheus::Labels ex = {{"kind", "exclusive"}};
  EXPECT_EQ(Value(acq, {{"namespace", "orders"}, {"mode", "try"}, {"result", "acquired"}}, ex), 1);
  EXPECT_EQ(Value(acq, {{"namespace", "orders"}, {"mode", "try"}, {"result", "not_acquired"}}, ex),
            1);
  EXPECT_EQ(Value(acq, {{"namespace", "orders"}, {"mode", "wait"}, {"result", "not_acquired"}}, ex),
            1);
  EXPECT_EQ(Value(acq, {{"namespace", "_other"}, {"mode", "try"}, {"result", "acquired"}}, ex), 1);
  EXPECT_EQ(Value("lockd_acquire_wait_seconds_count",
                  {{"namespace", "orders"}, {"result", "not_acquired"}}, ex),
            1);
  EXPECT_EQ(Value("lockd_locks_held"), 2);
  EXPECT_EQ(Value("lockd_waiters"), 0);
}

TEST_F(MetricsBackendTest, AcquiresAreCountedByKind) {
  // What the acquire asked, whatever the backend answered.
  for (auto [mode, limit, kind] : {std::make_tuple(LockMode::kExclusive, 0u, "exclusive"),
                                   std::make_tuple(LockMode::kShared, 0u, "shared"),
                                   std::make_tuple(LockMode::kExclusive, 3u, "semaphore")}) {
    AcquireParams p{{"orders", kind}, "o1", absl::Seconds(30)};
    p.mode = mode;
    p.limit = limit;
    p.permits = limit == 0 ? 0 : 1;
    absl::Notification done;
    backend_->Acquire(std::move(p), nullptr, [&](absl::StatusOr<AcquireResult>) { done.Notify(); });
    done.WaitForNotification();
    double total = 0;
    for (const char* result : {"acquired", "not_acquired", "cancelled", "error"}) {
      total +=
          Value("lockd_acquire_requests_total",
                {{"namespace", "orders"}, {"kind", kind}, {"mode", "try"}, {"result", result}});
    }
    EXPECT_EQ(total, 1) << kind;
  }
}

TEST_F(MetricsBackendTest, HoldsEndAsReleasedExpiredOrForceReleased) {
  ASSERT_TRUE(Acquire("orders", "r", "o1").acquired);
  ASSERT_TRUE(Acquire("orders", "r", "o1").acquired);  // reentrant: still one hold
  EXPECT_EQ(Value("lockd_locks_held"), 1);
  ASSERT_TRUE(Release("orders", "r", "o1").ok());
  EXPECT_EQ(Value("lockd_locks_held"), 1);
  // Another owner's mistaken release does not end the hold.
  EXPECT_THAT(Release("orders", "r", "intruder"), IsLockNotHeld());
  EXPECT_EQ(Value("lockd_locks_held"), 1);
  ASSERT_TRUE(Release("orders", "r", "o1").ok());
  EXPECT_EQ(Value("lockd_locks_held"), 0);
  EXPECT_EQ(
      Value("lockd_hold_duration_seconds_count", {{"namespace", "orders"}, {"ended", "released"}}),
      1);

  ASSERT_TRUE(Acquire("orders", "e", "o1", absl::Milliseconds(100)).acquired);
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_THAT(Renew("orders", "e", "o1"), IsLockNotHeld());
  EXPECT_EQ(Value("lockd_lease_renewals_total", {{"namespace", "orders"}, {"result", "lost"}}), 1);
  EXPECT_EQ(
      Value("lockd_hold_duration_seconds_count", {{"namespace", "orders"}, {"ended", "expired"}}),
      1);

  ASSERT_TRUE(Acquire("orders", "s", "o1").acquired);
  backend_->SweepExpired(absl::Now() + absl::Seconds(40));
  EXPECT_EQ(
      Value("lockd_hold_duration_seconds_count", {{"namespace", "orders"}, {"ended", "expired"}}),
      2);
  EXPECT_EQ(Value("lockd_locks_held"), 0);
  EXPECT_EQ(Value("lockd_backend_request_duration_seconds_count",
                  {{"operation", "release"}, {"result", "not_held"}}),
            1);
}

TEST_F(MetricsBackendTest, BuildInfoCarriesTheVersionFileAndTheRevision) {
  std::ifstream file(std::string(LOCKD_SOURCE_DIR) + "/VERSION");
  std::string version;
  std::getline(file, version);
  ASSERT_FALSE(version.empty());
  EXPECT_EQ(Version(), version);
  EXPECT_EQ(
      Value("lockd_build_info",
            {{"version", version}, {"revision", std::string(Revision())}, {"backend", "memory"}}),
      1);
  std::string text = prometheus::TextSerializer().Serialize(metrics_->registry()->Collect());
  EXPECT_THAT(text, HasSubstr(absl::StrCat("lockd_build_info{backend=\"memory\",revision=\"",
                                           Revision(), "\",version=\"", version, "\"} 1")));
}

TEST_F(MetricsBackendTest, ExpositionHasNoLockNamesOrOwners) {
  ASSERT_TRUE(Acquire("orders", "secret-lock-name", "secret-owner").acquired);
  std::string text = prometheus::TextSerializer().Serialize(metrics_->registry()->Collect());
  EXPECT_THAT(text, HasSubstr("lockd_build_info{"));
  EXPECT_THAT(text, Not(HasSubstr("secret-lock-name")));
  EXPECT_THAT(text, Not(HasSubstr("secret-owner")));
  // No TLS configured: no certificate expiry series (its alert would fire).
  EXPECT_THAT(text, Not(HasSubstr("lockd_tls_certificate_expiry_timestamp_seconds{")));
  EXPECT_THAT(text, Not(HasSubstr("lockd_tls_certificate_expiry_timestamp_seconds ")));
}

}  // namespace
}  // namespace lockd
