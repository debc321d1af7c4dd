#include "backends/common/replica_presence.h"

#include <deque>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace lockd {
namespace {

// A beat whose answers the test gives, one per beat, in order.
class ScriptedBeats {
 public:
  ReplicaPresence::Beat Beat() {
    return [this](absl::Duration life, absl::AnyInvocable<void(absl::StatusOr<int>) &&> done) {
      absl::StatusOr<int> answer;
      {
        absl::MutexLock l(&mu_);
        ++beats_;
        last_life_ = life;
        answer = answers_.empty() ? absl::StatusOr<int>(0) : answers_.front();
        if (answers_.size() > 1) answers_.pop_front();
      }
      std::move(done)(std::move(answer));
    };
  }
  void Answer(std::deque<absl::StatusOr<int>> answers) {
    absl::MutexLock l(&mu_);
    answers_ = std::move(answers);
  }
  int beats() {
    absl::MutexLock l(&mu_);
    return beats_;
  }
  absl::Duration last_life() {
    absl::MutexLock l(&mu_);
    return last_life_;
  }
  // Waits until `n` beats have run (false after 10 s).
  bool WaitBeats(int n) {
    std::pair<int*, int> want(&beats_, n);
    absl::MutexLock l(&mu_);
    return mu_.AwaitWithTimeout(
        absl::Condition(
            +[](std::pair<int*, int>* a) { return *a->first >= a->second; }, &want),
        absl::Seconds(10));
  }

 private:
  absl::Mutex mu_;
  std::deque<absl::StatusOr<int>> answers_ ABSL_GUARDED_BY(mu_);
  int beats_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration last_life_ ABSL_GUARDED_BY(mu_);
};

TEST(ReplicaPresenceTest, AssumesOthersUntilTheFirstBeatSaysItIsAlone) {
  TimerQueue timers;
  ScriptedBeats beats;
  beats.Answer({0});
  ReplicaPresence p(&timers, beats.Beat(), absl::Milliseconds(5), absl::Milliseconds(50));
  EXPECT_TRUE(p.others());  // before any beat
  p.Start();                // the first beat runs at once
  EXPECT_EQ(beats.beats(), 1);
  EXPECT_FALSE(p.others());
  EXPECT_EQ(beats.last_life(), absl::Milliseconds(50));
}

TEST(ReplicaPresenceTest, BeatsEveryPeriodAndFollowsTheCount) {
  TimerQueue timers;
  ScriptedBeats beats;
  beats.Answer({0, 2});
  ReplicaPresence p(&timers, beats.Beat(), absl::Milliseconds(5), absl::Milliseconds(50));
  p.Start();
  ASSERT_TRUE(beats.WaitBeats(3));  // 0, then 2 from then on
  EXPECT_TRUE(p.others());
  beats.Answer({0});
  const int seen = beats.beats();
  ASSERT_TRUE(beats.WaitBeats(seen + 2));
  EXPECT_FALSE(p.others());
}

TEST(ReplicaPresenceTest, AFailedBeatKeepsTheLastAnswer) {
  TimerQueue timers;
  ScriptedBeats beats;
  beats.Answer({0, absl::UnavailableError("down")});
  ReplicaPresence p(&timers, beats.Beat(), absl::Milliseconds(5), absl::Milliseconds(50));
  p.Start();
  ASSERT_TRUE(beats.WaitBeats(3));  // every beat after the first fails
  EXPECT_FALSE(p.others());
}

TEST(ReplicaPresenceTest, NoBeatRunsAfterStop) {
  TimerQueue timers;
  ScriptedBeats beats;
  ReplicaPresence p(&timers, beats.Beat(), absl::Milliseconds(5), absl::Milliseconds(50));
  p.Start();
  ASSERT_TRUE(beats.WaitBeats(2));
  p.Stop();
  const int at_stop = beats.beats();
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(beats.beats(), at_stop);
}

TEST(ReplicaPresenceTest, StopWaitsForTheBeatInFlight) {
  TimerQueue timers;
  absl::Mutex mu;
  absl::AnyInvocable<void(absl::StatusOr<int>) &&> pending;
  bool started = false;
  ReplicaPresence p(
      &timers,
      [&](absl::Duration, absl::AnyInvocable<void(absl::StatusOr<int>) &&> done) {
        absl::MutexLock l(&mu);
        pending = std::move(done);
        started = true;
      },
      absl::Milliseconds(5), absl::Milliseconds(50));
  p.Start();
  absl::Notification stopped;
  std::thread stopper([&] {
    p.Stop();
    stopped.Notify();
  });
  EXPECT_FALSE(stopped.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  {
    absl::MutexLock l(&mu);
    ASSERT_TRUE(started);
    std::move(pending)(1);
  }
  EXPECT_TRUE(stopped.WaitForNotificationWithTimeout(absl::Seconds(10)));
  stopper.join();
}

}  // namespace
}  // namespace lockd
