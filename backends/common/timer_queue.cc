#include "backends/common/timer_queue.h"

#include <vector>

namespace lockd {

SteadyClock::time_point SteadyAfter(absl::Duration d) {
  if (d <= absl::ZeroDuration()) return SteadyClock::now();
  if (d > absl::Hours(24 * 365)) d = absl::Hours(24 * 365);
  return SteadyClock::now() + absl::ToChronoNanoseconds(d);
}

absl::Duration SteadyUntil(SteadyClock::time_point t) {
  return absl::FromChrono(t - SteadyClock::now());
}

TimerQueue::TimerQueue() : thread_([this] { Run(); }) {}

TimerQueue::~TimerQueue() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  thread_.join();
  // Destroy pending callbacks outside the lock: they may own objects whose
  // destructors call back into other components.
  absl::flat_hash_map<TimerId, Entry> pending;
  {
    absl::MutexLock l(&mu_);
    pending.swap(entries_);
    by_time_.clear();
  }
}

TimerQueue::TimerId TimerQueue::Schedule(absl::Duration delay, absl::AnyInvocable<void() &&> fn) {
  return ScheduleAt(SteadyAfter(delay), std::move(fn));
}

TimerQueue::TimerId TimerQueue::ScheduleAt(SteadyClock::time_point when,
                                           absl::AnyInvocable<void() &&> fn) {
  absl::MutexLock l(&mu_);
  TimerId id = next_id_++;
  auto pos = by_time_.emplace(when, id);
  entries_.emplace(id, Entry{pos, std::move(fn)});
  return id;
}

bool TimerQueue::Cancel(TimerId id) {
  absl::AnyInvocable<void() &&> fn;  // destroyed after the lock is released
  absl::MutexLock l(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  by_time_.erase(it->second.pos);
  fn = std::move(it->second.fn);
  entries_.erase(it);
  return true;
}

size_t TimerQueue::size() const {
  absl::MutexLock l(&mu_);
  return entries_.size();
}

void TimerQueue::Run() {
  mu_.Lock();
  while (!stop_) {
    if (by_time_.empty()) {
      mu_.Await(absl::Condition(
          +[](TimerQueue* q)
               ABSL_NO_THREAD_SAFETY_ANALYSIS { return q->stop_ || !q->by_time_.empty(); },
          this));
      continue;
    }
    auto first = by_time_.begin();
    SteadyClock::time_point when = first->first;
    if (when > SteadyClock::now()) {
      // Wake early if an earlier timer is added or we are stopped.
      auto earlier = [this, when]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return stop_ || (!by_time_.empty() && by_time_.begin()->first < when);
      };
      mu_.AwaitWithTimeout(absl::Condition(&earlier), SteadyUntil(when));
      continue;
    }
    TimerId id = first->second;
    by_time_.erase(first);
    auto it = entries_.find(id);
    absl::AnyInvocable<void()&&> fn = std::move(it->second.fn);
    entries_.erase(it);
    mu_.Unlock();
    std::move(fn)();
    fn = nullptr;  // destroy captured state outside the lock
    mu_.Lock();
  }
  mu_.Unlock();
}

}  // namespace lockd
