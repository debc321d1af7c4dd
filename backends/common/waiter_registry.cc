#include "backends/common/waiter_registry.h"

#include <utility>

#include "backends/common/errors.h"

namespace lockd {

WaiterRegistry::WaiterRegistry(TimerQueue* timers, size_t max_waiters, StopFn stop)
    : max_waiters_(max_waiters),
      timers_(timers),
      stop_(std::move(stop)),
      anchor_(std::make_shared<Anchor>()) {
  absl::MutexLock l(&anchor_->mu);
  anchor_->registry = this;
}

WaiterRegistry::~WaiterRegistry() {
  absl::MutexLock l(&anchor_->mu);
  anchor_->registry = nullptr;
}

absl::AnyInvocable<void() &&> WaiterRegistry::StopTask(std::shared_ptr<Anchor> anchor, uint64_t id,
                                                       StopReason why) {
  return [anchor = std::move(anchor), id, why] {
    absl::ReaderMutexLock al(&anchor->mu);
    if (anchor->registry != nullptr) anchor->registry->StopById(id, why);
  };
}

uint64_t WaiterRegistry::AddLocked(std::shared_ptr<Call> call, const LockKey& key,
                                   std::optional<SteadyClock::time_point> deadline) {
  const uint64_t id = next_id_++;
  Entry& e = live_[id];
  e.call = std::move(call);
  e.key = key;
  if (deadline.has_value()) {
    e.deadline_timer = timers_->ScheduleAt(*deadline, StopTask(anchor_, id, StopReason::kDeadline));
  }
  return id;
}

uint64_t WaiterRegistry::Register(std::shared_ptr<Call> call, const LockKey& key,
                                  std::optional<SteadyClock::time_point> deadline,
                                  const std::shared_ptr<CancelSignal>& cancel) {
  uint64_t id;
  {
    absl::MutexLock l(&mu_);
    if (closed_) return 0;
    id = AddLocked(std::move(call), key, deadline);
  }
  // Without mu_: a signal that already fired stops the call here.
  if (cancel != nullptr && !cancel->SetCallback(StopTask(anchor_, id, StopReason::kCancelled))) {
    StopById(id, StopReason::kCancelled);
  }
  return id;
}

absl::StatusOr<uint64_t> WaiterRegistry::RegisterAdmitted(
    const LockKey& key, SteadyClock::time_point deadline,
    const std::shared_ptr<CancelSignal>& cancel) {
  absl::MutexLock l(&mu_);
  if (closed_) return ShuttingDownError();
  if (admitted_ >= max_waiters_) return TooManyWaitersError(max_waiters_);
  const uint64_t id = AddLocked(nullptr, key, deadline);
  AdmitLocked(live_[id]);
  // The stop goes to the timer thread, both from the hook and for a signal
  // that already fired: the caller may hold the mutex StopFn takes.
  if (cancel != nullptr && !cancel->SetCallback([anchor = anchor_, id] {
        absl::ReaderMutexLock al(&anchor->mu);
        if (anchor->registry == nullptr) return;
        anchor->registry->timers_->Schedule(absl::ZeroDuration(),
                                            StopTask(anchor, id, StopReason::kCancelled));
      })) {
    timers_->Schedule(absl::ZeroDuration(), StopTask(anchor_, id, StopReason::kCancelled));
  }
  return id;
}

void WaiterRegistry::StopById(uint64_t id, StopReason why) {
  std::shared_ptr<Call> call;
  LockKey key;
  {
    absl::MutexLock l(&mu_);
    auto it = live_.find(id);
    if (it == live_.end()) return;
    if (why == StopReason::kDeadline) it->second.deadline_timer = 0;
    call = it->second.call;
    if (call == nullptr) key = it->second.key;
  }
  if (call != nullptr) {
    call->Stop(why);
  } else {
    stop_(key, id, why);
  }
}

void WaiterRegistry::Unregister(uint64_t id, const std::shared_ptr<CancelSignal>& cancel) {
  {
    absl::MutexLock l(&mu_);
    auto it = live_.find(id);
    if (it != live_.end()) {
      DischargeLocked(it->second);
      if (it->second.deadline_timer != 0 && !closed_) timers_->Cancel(it->second.deadline_timer);
      live_.erase(it);
    }
  }
  if (cancel != nullptr) cancel->ClearCallback();
}

std::shared_ptr<WaiterRegistry::Call> WaiterRegistry::Find(uint64_t id) const {
  absl::MutexLock l(&mu_);
  auto it = live_.find(id);
  return it == live_.end() ? nullptr : it->second.call;
}

absl::Status WaiterRegistry::Admit(uint64_t id) {
  absl::MutexLock l(&mu_);
  auto it = live_.find(id);
  if (closed_ || it == live_.end()) return ShuttingDownError();
  Entry& e = it->second;
  if (e.admitted) return absl::OkStatus();
  if (admitted_ >= max_waiters_) return TooManyWaitersError(max_waiters_);
  AdmitLocked(e);
  return absl::OkStatus();
}

void WaiterRegistry::AdmitLocked(Entry& e) {
  e.admitted = true;
  ++admitted_;
  ++admitted_per_key_[e.key];
}

void WaiterRegistry::Discharge(uint64_t id) {
  absl::MutexLock l(&mu_);
  auto it = live_.find(id);
  if (it != live_.end()) DischargeLocked(it->second);
}

void WaiterRegistry::DischargeLocked(Entry& e) {
  if (!e.admitted) return;
  e.admitted = false;
  --admitted_;
  auto it = admitted_per_key_.find(e.key);
  if (it != admitted_per_key_.end() && --it->second == 0) admitted_per_key_.erase(it);
}

bool WaiterRegistry::HasAdmitted(const LockKey& key) const {
  absl::MutexLock l(&mu_);
  return admitted_per_key_.contains(key);
}

std::vector<std::shared_ptr<WaiterRegistry::Call>> WaiterRegistry::All() const {
  std::vector<std::shared_ptr<Call>> out;
  absl::MutexLock l(&mu_);
  out.reserve(live_.size());
  for (const auto& [id, e] : live_) {
    if (e.call != nullptr) out.push_back(e.call);
  }
  return out;
}

bool WaiterRegistry::closed() const {
  absl::MutexLock l(&mu_);
  return closed_;
}

void WaiterRegistry::Close() {
  {
    absl::MutexLock l(&anchor_->mu);
    anchor_->registry = nullptr;
  }
  std::vector<std::shared_ptr<Call>> calls;
  std::vector<std::pair<LockKey, uint64_t>> entries;  // told through stop_
  {
    absl::MutexLock l(&mu_);
    if (closed_) return;
    closed_ = true;
    for (auto& [id, e] : live_) {
      if (e.deadline_timer != 0) timers_->Cancel(e.deadline_timer);
      e.deadline_timer = 0;
      if (e.call != nullptr) {
        calls.push_back(e.call);
      } else {
        entries.emplace_back(e.key, id);
      }
    }
  }
  for (const std::shared_ptr<Call>& c : calls) c->Stop(StopReason::kShutdown);
  for (const auto& [key, id] : entries) stop_(key, id, StopReason::kShutdown);
}

}  // namespace lockd
