#include "backends/common/replica_presence.h"

#include <utility>

namespace lockd {

ReplicaPresence::ReplicaPresence(TimerQueue* timers, Beat beat, absl::Duration period,
                                 absl::Duration life)
    : state_(std::make_shared<State>()) {
  state_->timers = timers;
  state_->beat = std::move(beat);
  state_->period = period;
  state_->life = life;
}

ReplicaPresence::~ReplicaPresence() { Stop(); }

void ReplicaPresence::Start() {
  {
    absl::MutexLock l(&state_->mu);
    if (state_->stopped || state_->in_flight || state_->timer != 0) return;
    state_->in_flight = true;
  }
  RunBeat(state_);
}

void ReplicaPresence::Stop() {
  State& s = *state_;
  absl::MutexLock l(&s.mu);
  s.stopped = true;
  if (s.timer != 0) {
    s.timers->Cancel(s.timer);  // if it is running, it sees `stopped`
    s.timer = 0;
  }
  s.mu.Await(absl::Condition(
      +[](bool* in_flight) { return !*in_flight; }, &s.in_flight));
}

void ReplicaPresence::RunBeat(const std::shared_ptr<State>& s) {
  s->beat(s->life, [s](absl::StatusOr<int> others) { Answered(s, std::move(others)); });
}

void ReplicaPresence::Answered(const std::shared_ptr<State>& s, absl::StatusOr<int> others) {
  if (others.ok()) s->others.store(*others > 0, std::memory_order_relaxed);
  absl::MutexLock l(&s->mu);
  s->in_flight = false;
  if (s->stopped) return;
  s->timer = s->timers->Schedule(s->period, [s] {
    {
      absl::MutexLock l(&s->mu);
      s->timer = 0;
      if (s->stopped) return;
      s->in_flight = true;
    }
    RunBeat(s);
  });
}

}  // namespace lockd
