#include "backends/common/waiter_registry.h"

#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace lockd {
namespace {

using ::lockd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using StopReason = WaiterRegistry::StopReason;

const LockKey kKey{"default", "x"};
const LockKey kOther{"default", "y"};

// Records the Stop() calls it gets.
class RecordingCall final : public WaiterRegistry::Call {
 public:
  void Stop(StopReason why) override {
    absl::MutexLock l(&mu_);
    stops_.push_back(why);
  }
  // Waits (up to 5 s) for a first Stop().
  std::vector<StopReason> AwaitStops() {
    absl::MutexLock l(&mu_);
    auto some = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !stops_.empty(); };
    mu_.AwaitWithTimeout(absl::Condition(&some), absl::Seconds(5));
    return stops_;
  }
  std::vector<StopReason> stops() {
    absl::MutexLock l(&mu_);
    return stops_;
  }

 private:
  absl::Mutex mu_;
  std::vector<StopReason> stops_ ABSL_GUARDED_BY(mu_);
};

class WaiterRegistryTest : public ::testing::Test {
 protected:
  TimerQueue timers_;
  WaiterRegistry registry_{&timers_, 2};
};

TEST_F(WaiterRegistryTest, AdmitsUpToMaxWaitersThenRefusesWithTooManyWaiters) {
  uint64_t a = registry_.Register(nullptr, kKey, std::nullopt, nullptr);
  uint64_t b = registry_.Register(nullptr, kOther, std::nullopt, nullptr);
  uint64_t c = registry_.Register(nullptr, kKey, std::nullopt, nullptr);
  EXPECT_TRUE(registry_.Admit(a).ok());
  EXPECT_TRUE(registry_.Admit(a).ok());  // already admitted: counts once
  EXPECT_TRUE(registry_.Admit(b).ok());
  EXPECT_THAT(registry_.Admit(c),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("max_waiters")));
  registry_.Discharge(b);
  EXPECT_TRUE(registry_.Admit(c).ok());
}

TEST_F(WaiterRegistryTest, UnregisteringFreesTheAdmission) {
  uint64_t a = registry_.Register(nullptr, kKey, std::nullopt, nullptr);
  uint64_t b = registry_.Register(nullptr, kKey, std::nullopt, nullptr);
  uint64_t c = registry_.Register(nullptr, kKey, std::nullopt, nullptr);
  ASSERT_TRUE(registry_.Admit(a).ok());
  ASSERT_TRUE(registry_.Admit(b).ok());
  EXPECT_TRUE(registry_.HasAdmitted(kKey));
  EXPECT_FALSE(registry_.HasAdmitted(kOther));
  registry_.Unregister(a, nullptr);
  registry_.Unregister(a, nullptr);  // idempotent
  EXPECT_TRUE(registry_.Admit(c).ok());
  registry_.Unregister(b, nullptr);
  registry_.Unregister(c, nullptr);
  EXPECT_FALSE(registry_.HasAdmitted(kKey));
}

TEST_F(WaiterRegistryTest, DeadlineStopsTheCall) {
  auto call = std::make_shared<RecordingCall>();
  registry_.Register(call, kKey, SteadyAfter(absl::Milliseconds(20)), nullptr);
  EXPECT_THAT(call->AwaitStops(), ElementsAre(StopReason::kDeadline));
}

TEST_F(WaiterRegistryTest, UnregisteredCallHearsNeitherDeadlineNorCancel) {
  auto call = std::make_shared<RecordingCall>();
  auto cancel = std::make_shared<CancelSignal>();
  uint64_t id = registry_.Register(call, kKey, SteadyAfter(absl::Milliseconds(20)), cancel);
  registry_.Unregister(id, cancel);
  cancel->Cancel();
  absl::SleepFor(absl::Milliseconds(60));
  EXPECT_TRUE(call->stops().empty());
  EXPECT_EQ(registry_.Find(id), nullptr);
}

TEST_F(WaiterRegistryTest, CancelStopsTheCallEvenIfItFiredBeforeRegistering) {
  auto call = std::make_shared<RecordingCall>();
  auto cancel = std::make_shared<CancelSignal>();
  registry_.Register(call, kKey, std::nullopt, cancel);
  cancel->Cancel();
  EXPECT_THAT(call->AwaitStops(), ElementsAre(StopReason::kCancelled));

  auto early = std::make_shared<RecordingCall>();
  auto fired = std::make_shared<CancelSignal>();
  fired->Cancel();
  registry_.Register(early, kKey, std::nullopt, fired);
  EXPECT_THAT(early->stops(), ElementsAre(StopReason::kCancelled));  // inline
}

TEST_F(WaiterRegistryTest, CloseDrainsEveryLiveCallAndRefusesNewOnes) {
  auto a = std::make_shared<RecordingCall>();
  auto b = std::make_shared<RecordingCall>();
  uint64_t ia = registry_.Register(a, kKey, SteadyAfter(absl::Milliseconds(30)), nullptr);
  registry_.Register(b, kOther, std::nullopt, nullptr);
  ASSERT_TRUE(registry_.Admit(ia).ok());
  EXPECT_EQ(registry_.Find(ia), a);
  registry_.Close();
  registry_.Close();  // idempotent: nobody hears it twice
  EXPECT_TRUE(registry_.closed());
  EXPECT_THAT(a->stops(), ElementsAre(StopReason::kShutdown));
  EXPECT_THAT(b->stops(), ElementsAre(StopReason::kShutdown));
  absl::SleepFor(absl::Milliseconds(60));  // the deadline timer was cancelled
  EXPECT_THAT(a->stops(), ElementsAre(StopReason::kShutdown));
  EXPECT_EQ(registry_.Register(a, kKey, std::nullopt, nullptr), 0u);
  EXPECT_THAT(registry_.Admit(ia), StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace lockd
