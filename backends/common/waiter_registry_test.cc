#include "backends/common/waiter_registry.h"

#include <memory>
#include <thread>
#include <utility>
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

// A list that one thread appends to and another awaits.
template <typename T>
class Recorded {
 public:
  void Add(T t) {
    absl::MutexLock l(&mu_);
    items_.push_back(std::move(t));
  }
  // Waits (up to 5 s) until `n` items were added.
  std::vector<T> Await(size_t n) {
    absl::MutexLock l(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return items_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(5));
    return items_;
  }
  std::vector<T> All() {
    absl::MutexLock l(&mu_);
    return items_;
  }

 private:
  absl::Mutex mu_;
  std::vector<T> items_ ABSL_GUARDED_BY(mu_);
};

// Records the Stop() calls it gets.
class RecordingCall final : public WaiterRegistry::Call {
 public:
  void Stop(StopReason why) override { stops_.Add(why); }
  // Waits (up to 5 s) for a first Stop().
  std::vector<StopReason> AwaitStops() { return stops_.Await(1); }
  std::vector<StopReason> stops() { return stops_.All(); }

 private:
  Recorded<StopReason> stops_;
};

// What the registry's StopFn was told.
struct Told {
  LockKey key;
  uint64_t id;
  StopReason why;
  std::thread::id thread;
};

// Records what the StopFn is told.
class StopRecorder {
 public:
  WaiterRegistry::StopFn Fn() {
    return [this](const LockKey& key, uint64_t id, StopReason why) {
      told_.Add(Told{key, id, why, std::this_thread::get_id()});
    };
  }
  // Waits (up to 5 s) until `n` stops were told.
  std::vector<Told> Await(size_t n) { return told_.Await(n); }
  std::vector<Told> told() { return told_.All(); }

 private:
  Recorded<Told> told_;
};

class WaiterRegistryTest : public ::testing::Test {
 protected:
  uint64_t RegisterCall(const LockKey& key) {
    return registry_.Register(std::make_shared<RecordingCall>(), key, std::nullopt, nullptr);
  }

  StopRecorder stops_;
  TimerQueue timers_;
  WaiterRegistry registry_{&timers_, 2, stops_.Fn()};
};

TEST_F(WaiterRegistryTest, AdmitsUpToMaxWaitersThenRefusesWithTooManyWaiters) {
  uint64_t a = RegisterCall(kKey);
  uint64_t b = RegisterCall(kOther);
  uint64_t c = RegisterCall(kKey);
  EXPECT_TRUE(registry_.Admit(a).ok());
  EXPECT_TRUE(registry_.Admit(a).ok());  // already admitted: counts once
  EXPECT_TRUE(registry_.Admit(b).ok());
  EXPECT_THAT(registry_.Admit(c),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("max_waiters")));
  registry_.Discharge(b);
  EXPECT_TRUE(registry_.Admit(c).ok());
}

TEST_F(WaiterRegistryTest, UnregisteringFreesTheAdmission) {
  uint64_t a = RegisterCall(kKey);
  uint64_t b = RegisterCall(kKey);
  uint64_t c = RegisterCall(kKey);
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
  absl::StatusOr<uint64_t> ic =
      registry_.RegisterAdmitted(kOther, SteadyAfter(absl::Milliseconds(30)), nullptr);
  ASSERT_TRUE(ic.ok());
  EXPECT_EQ(registry_.Find(ia), a);
  EXPECT_EQ(registry_.Find(*ic), nullptr);  // no Call object: told through the StopFn
  registry_.Close();
  registry_.Close();  // idempotent: nobody hears it twice
  EXPECT_TRUE(registry_.closed());
  EXPECT_THAT(a->stops(), ElementsAre(StopReason::kShutdown));
  EXPECT_THAT(b->stops(), ElementsAre(StopReason::kShutdown));
  std::vector<Told> told = stops_.told();
  ASSERT_EQ(told.size(), 1u);  // inline
  EXPECT_EQ(told[0].key, kOther);
  EXPECT_EQ(told[0].id, *ic);
  EXPECT_EQ(told[0].why, StopReason::kShutdown);
  absl::SleepFor(absl::Milliseconds(60));  // the deadline timers were cancelled
  EXPECT_THAT(a->stops(), ElementsAre(StopReason::kShutdown));
  EXPECT_EQ(stops_.told().size(), 1u);
  EXPECT_EQ(registry_.Register(a, kKey, std::nullopt, nullptr), 0u);
  EXPECT_THAT(registry_.Admit(ia), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(registry_.RegisterAdmitted(kKey, SteadyAfter(absl::Seconds(30)), nullptr),
              StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(WaiterRegistryTest, RegisterAdmittedCountsAgainstMaxWaitersWithAdmittedCalls) {
  uint64_t a = RegisterCall(kKey);
  ASSERT_TRUE(registry_.Admit(a).ok());
  absl::StatusOr<uint64_t> b =
      registry_.RegisterAdmitted(kKey, SteadyAfter(absl::Seconds(30)), nullptr);
  ASSERT_TRUE(b.ok());
  EXPECT_NE(*b, 0u);
  EXPECT_TRUE(registry_.HasAdmitted(kKey));
  EXPECT_THAT(registry_.RegisterAdmitted(kOther, SteadyAfter(absl::Seconds(30)), nullptr),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("max_waiters")));
  uint64_t c = RegisterCall(kOther);
  EXPECT_THAT(registry_.Admit(c), StatusIs(absl::StatusCode::kResourceExhausted));
  registry_.Unregister(*b, nullptr);
  EXPECT_TRUE(registry_.RegisterAdmitted(kOther, SteadyAfter(absl::Seconds(30)), nullptr).ok());
}

TEST_F(WaiterRegistryTest, DeadlineTellsTheStopFnOnceWithKeyAndId) {
  absl::StatusOr<uint64_t> id =
      registry_.RegisterAdmitted(kKey, SteadyAfter(absl::Milliseconds(50)), nullptr);
  ASSERT_TRUE(id.ok());
  std::vector<Told> told = stops_.Await(1);
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].key, kKey);
  EXPECT_EQ(told[0].id, *id);
  EXPECT_EQ(told[0].why, StopReason::kDeadline);
  absl::SleepFor(absl::Milliseconds(60));
  EXPECT_EQ(stops_.told().size(), 1u);
}

// The StopFn hears a cancel on the timer thread, never on the canceller's or
// inside RegisterAdmitted(), whose caller may hold the mutex it takes.
TEST_F(WaiterRegistryTest, CancelTellsTheStopFnFromTheTimerThread) {
  auto cancel = std::make_shared<CancelSignal>();
  absl::StatusOr<uint64_t> id =
      registry_.RegisterAdmitted(kKey, SteadyAfter(absl::Seconds(30)), cancel);
  ASSERT_TRUE(id.ok());
  cancel->Cancel();
  std::vector<Told> told = stops_.Await(1);
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].id, *id);
  EXPECT_EQ(told[0].why, StopReason::kCancelled);
  EXPECT_NE(told[0].thread, std::this_thread::get_id());

  auto fired = std::make_shared<CancelSignal>();
  fired->Cancel();
  absl::StatusOr<uint64_t> early =
      registry_.RegisterAdmitted(kKey, SteadyAfter(absl::Seconds(30)), fired);
  ASSERT_TRUE(early.ok());  // registered: its owner parks it, the stop follows
  told = stops_.Await(2);
  ASSERT_EQ(told.size(), 2u);
  EXPECT_EQ(told[1].id, *early);
  EXPECT_EQ(told[1].why, StopReason::kCancelled);
  EXPECT_NE(told[1].thread, std::this_thread::get_id());
}

TEST_F(WaiterRegistryTest, UnregisteredEntryHearsNeitherDeadlineNorCancel) {
  auto cancel = std::make_shared<CancelSignal>();
  absl::StatusOr<uint64_t> id =
      registry_.RegisterAdmitted(kKey, SteadyAfter(absl::Milliseconds(50)), cancel);
  ASSERT_TRUE(id.ok());
  registry_.Unregister(*id, cancel);
  cancel->Cancel();
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_TRUE(stops_.told().empty());
  EXPECT_FALSE(registry_.HasAdmitted(kKey));
}

// The registry hooks a signal while its caller may hold its own lock, so a
// signal that has fired must refuse the hook rather than run it there.
TEST(CancelSignalTest, FiredSignalRefusesALaterCallbackWithoutRunningIt) {
  CancelSignal cancel;
  int runs = 0;
  EXPECT_TRUE(cancel.SetCallback([&] { ++runs; }));
  cancel.Cancel();
  EXPECT_EQ(runs, 1);
  EXPECT_FALSE(cancel.SetCallback([&] { ++runs; }));
  cancel.Cancel();
  EXPECT_EQ(runs, 1);
}

}  // namespace
}  // namespace lockd
