#include "backends/common/waiter_table.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace lockd {

WaiterTable::WaiterTable(TimerQueue* timers, size_t max_waiters, TimeoutFn on_timeout)
    : timers_(timers),
      max_waiters_(max_waiters),
      on_timeout_(std::move(on_timeout)),
      anchor_(std::make_shared<Anchor>()) {
  absl::MutexLock l(&anchor_->mu);
  anchor_->table = this;
}

WaiterTable::~WaiterTable() {
  {
    absl::MutexLock l(&anchor_->mu);
    anchor_->table = nullptr;
  }
  for (Waiter& w : Close()) {
    std::move(w.done)(ShuttingDownError());
  }
}

absl::Status WaiterTable::Park(Waiter& w, bool front) {
  uint64_t id;
  {
    absl::MutexLock l(&mu_);
    if (closed_) return ShuttingDownError();
    if (w.cancel && w.cancel->cancelled()) return absl::CancelledError("acquire cancelled");
    if (total_ >= max_waiters_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("too many waiting acquires (max_waiters = ", max_waiters_, ")"));
    }
    id = next_id_++;
    LockKey key = w.params.key;
    auto anchor = anchor_;
    TimerQueue::TimerId timer = timers_->ScheduleAt(w.deadline, [anchor, key, id] {
      absl::ReaderMutexLock al(&anchor->mu);
      if (anchor->table != nullptr) anchor->table->OnDeadline(key, id);
    });
    std::shared_ptr<CancelSignal> cancel = w.cancel;
    auto& q = queues_[key];
    Entry e{id, std::move(w), timer};
    if (front) {
      q.push_front(std::move(e));
    } else {
      q.push_back(std::move(e));
    }
    ++total_;
    if (cancel) {
      // Registered under mu_ so that PopFront cannot clear it first. If the
      // signal fired meanwhile, the hook runs inline; it only schedules work.
      cancel->SetCallback([anchor, key, id] {
        absl::ReaderMutexLock al(&anchor->mu);
        if (anchor->table != nullptr)
          anchor->table->timers_->Schedule(absl::ZeroDuration(), [anchor, key, id] {
            absl::ReaderMutexLock al2(&anchor->mu);
            if (anchor->table != nullptr) anchor->table->OnCancel(key, id);
          });
      });
    }
  }
  return absl::OkStatus();
}

std::optional<WaiterTable::Waiter> WaiterTable::PopFront(const LockKey& key) {
  absl::MutexLock l(&mu_);
  auto it = queues_.find(key);
  if (it == queues_.end()) return std::nullopt;
  Entry e = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) queues_.erase(it);
  --total_;
  Disarm(e);
  return std::move(e.w);
}

size_t WaiterTable::Count(const LockKey& key) const {
  absl::MutexLock l(&mu_);
  auto it = queues_.find(key);
  return it == queues_.end() ? 0 : it->second.size();
}

size_t WaiterTable::Total() const {
  absl::MutexLock l(&mu_);
  return total_;
}

std::vector<WaiterTable::Waiter> WaiterTable::Close() {
  std::vector<Waiter> out;
  absl::MutexLock l(&mu_);
  closed_ = true;
  for (auto& [key, q] : queues_) {
    for (Entry& e : q) {
      Disarm(e);
      out.push_back(std::move(e.w));
    }
  }
  queues_.clear();
  total_ = 0;
  return out;
}

void WaiterTable::Disarm(Entry& e) {
  timers_->Cancel(e.timer);
  if (e.w.cancel) e.w.cancel->ClearCallback();
}

std::optional<WaiterTable::Waiter> WaiterTable::Remove(const LockKey& key, uint64_t id) {
  absl::MutexLock l(&mu_);
  auto it = queues_.find(key);
  if (it == queues_.end()) return std::nullopt;
  auto& q = it->second;
  for (auto e = q.begin(); e != q.end(); ++e) {
    if (e->id != id) continue;
    Entry entry = std::move(*e);
    q.erase(e);
    if (q.empty()) queues_.erase(it);
    --total_;
    Disarm(entry);
    return std::move(entry.w);
  }
  return std::nullopt;
}

void WaiterTable::OnDeadline(const LockKey& key, uint64_t id) {
  std::optional<Waiter> w = Remove(key, id);
  if (w) on_timeout_(std::move(*w));
}

void WaiterTable::OnCancel(const LockKey& key, uint64_t id) {
  std::optional<Waiter> w = Remove(key, id);
  if (w) std::move(w->done)(absl::CancelledError("acquire cancelled"));
}

}  // namespace lockd
