#include "backends/zookeeper/waiter_slots.h"

#include <utility>

#include "backends/zookeeper/acquire_attempt.h"

namespace lockd::zk {

WaiterSlots::WaiterSlots(size_t max_waiters, TimerQueue* timers)
    : max_waiters_(max_waiters), timers_(timers), anchor_(std::make_shared<Anchor>()) {
  absl::MutexLock l(&anchor_->mu);
  anchor_->slots = this;
}

WaiterSlots::~WaiterSlots() {
  absl::MutexLock l(&anchor_->mu);
  anchor_->slots = nullptr;
}

uint64_t WaiterSlots::Register(std::shared_ptr<AcquireAttempt> attempt, const LockKey& key,
                               std::optional<Clock::time_point> deadline,
                               const std::shared_ptr<CancelSignal>& cancel) {
  uint64_t id;
  {
    absl::MutexLock l(&mu_);
    if (stopped_) return 0;
    id = next_id_++;
    Entry& e = live_[id];
    e.attempt = std::move(attempt);
    e.key = key;
    if (deadline.has_value()) {
      e.deadline_timer = timers_->ScheduleAt(*deadline, [this, id] { OnStop(id, false); });
    }
  }
  if (cancel != nullptr) {
    cancel->SetCallback([anchor = anchor_, id] {
      absl::MutexLock l(&anchor->mu);
      if (anchor->slots != nullptr) anchor->slots->OnStop(id, /*cancelled=*/true);
    });
  }
  return id;
}

void WaiterSlots::OnStop(uint64_t id, bool cancelled) {
  std::shared_ptr<AcquireAttempt> a;
  {
    absl::MutexLock l(&mu_);
    auto it = live_.find(id);
    if (it == live_.end()) return;
    if (!cancelled) it->second.deadline_timer = 0;
    a = it->second.attempt;
  }
  a->Stop(cancelled);
}

void WaiterSlots::Unregister(uint64_t id, const std::shared_ptr<CancelSignal>& cancel) {
  {
    absl::MutexLock l(&mu_);
    auto it = live_.find(id);
    if (it != live_.end()) {
      UnparkLocked(it->second);
      if (it->second.deadline_timer != 0 && !stopped_) timers_->Cancel(it->second.deadline_timer);
      live_.erase(it);
    }
  }
  if (cancel != nullptr) cancel->ClearCallback();
}

std::shared_ptr<AcquireAttempt> WaiterSlots::Find(uint64_t id) const {
  absl::MutexLock l(&mu_);
  auto it = live_.find(id);
  return it == live_.end() ? nullptr : it->second.attempt;
}

bool WaiterSlots::Park(uint64_t id) {
  absl::MutexLock l(&mu_);
  auto it = live_.find(id);
  if (it == live_.end()) return false;
  Entry& e = it->second;
  if (e.parked) return true;
  if (parked_ >= max_waiters_) return false;
  e.parked = true;
  ++parked_;
  ++parked_per_key_[e.key];
  return true;
}

void WaiterSlots::Unpark(uint64_t id) {
  absl::MutexLock l(&mu_);
  auto it = live_.find(id);
  if (it != live_.end()) UnparkLocked(it->second);
}

void WaiterSlots::UnparkLocked(Entry& e) {
  if (!e.parked) return;
  e.parked = false;
  --parked_;
  auto it = parked_per_key_.find(e.key);
  if (it != parked_per_key_.end() && --it->second == 0) parked_per_key_.erase(it);
}

bool WaiterSlots::HasLocalWaiters(const LockKey& key) const {
  absl::MutexLock l(&mu_);
  return parked_per_key_.find(key) != parked_per_key_.end();
}

std::vector<std::shared_ptr<AcquireAttempt>> WaiterSlots::All() const {
  std::vector<std::shared_ptr<AcquireAttempt>> out;
  absl::MutexLock l(&mu_);
  out.reserve(live_.size());
  for (const auto& [id, e] : live_) out.push_back(e.attempt);
  return out;
}

std::vector<std::shared_ptr<AcquireAttempt>> WaiterSlots::Stop() {
  {
    absl::MutexLock l(&anchor_->mu);
    anchor_->slots = nullptr;
  }
  absl::MutexLock l(&mu_);
  stopped_ = true;
  std::vector<std::shared_ptr<AcquireAttempt>> out;
  for (auto& [id, e] : live_) {
    if (e.deadline_timer != 0) timers_->Cancel(e.deadline_timer);
    e.deadline_timer = 0;
    out.push_back(e.attempt);
  }
  return out;
}

}  // namespace lockd::zk
