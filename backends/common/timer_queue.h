// Runs callbacks after a delay, on one thread owned by the queue, on the
// monotonic clock (std::chrono::steady_clock). Used for wait deadlines, lease
// expiry wake-ups and reconnect backoff, so that no waiter holds a thread.
//
// Thread-safe: all state is guarded by one mutex; callbacks run on the timer
// thread with no lock held, one at a time, in deadline order.

#ifndef LOCKD_BACKENDS_COMMON_TIMER_QUEUE_H_
#define LOCKD_BACKENDS_COMMON_TIMER_QUEUE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace lockd {

using SteadyClock = std::chrono::steady_clock;

// Converts between absl::Duration and the steady clock.
SteadyClock::time_point SteadyAfter(absl::Duration d);
absl::Duration SteadyUntil(SteadyClock::time_point t);

class TimerQueue {
 public:
  using TimerId = uint64_t;  // never 0

  TimerQueue();
  // Stops the thread; callbacks that have not run are destroyed unrun.
  ~TimerQueue();
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;

  // Runs `fn` on the timer thread once `delay` has passed (at once if it is
  // not positive). Returns an id for Cancel().
  TimerId Schedule(absl::Duration delay, absl::AnyInvocable<void() &&> fn);
  TimerId ScheduleAt(SteadyClock::time_point when, absl::AnyInvocable<void() &&> fn);

  // Removes a timer that has not started running. Returns true if it was
  // removed (its callback will never run), false if it already ran, is
  // running, or was cancelled before. Never blocks on a running callback.
  bool Cancel(TimerId id);

  // Number of timers not yet run.
  size_t size() const;

 private:
  void Run();

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  TimerId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::multimap<SteadyClock::time_point, TimerId> by_time_ ABSL_GUARDED_BY(mu_);
  struct Entry {
    std::multimap<SteadyClock::time_point, TimerId>::iterator pos;
    absl::AnyInvocable<void() &&> fn;
  };
  absl::flat_hash_map<TimerId, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: started after the state above exists
};

}  // namespace lockd

#endif  // LOCKD_BACKENDS_COMMON_TIMER_QUEUE_H_
