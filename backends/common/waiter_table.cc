#include "backends/common/waiter_table.h"

#include <utility>

#include "backends/common/errors.h"

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
    if (w.cancel && w.cancel->cancelled()) return AcquireCancelledError();
    if (total_ >= max_waiters_) return TooManyWaitersError(max_waiters_);
    id = next_id_++;
    LockKey key = w.params.key;
    auto anchor = anchor_;
    // Hooked under mu_ so that PopFront cannot clear it first. The hook only
    // schedules work; a signal that fired since the check above refuses it.
    if (w.cancel && !w.cancel->SetCallback([anchor, key, id] {
          absl::ReaderMutexLock al(&anchor->mu);
          if (anchor->table != nullptr)
            anchor->table->timers_->Schedule(absl::ZeroDuration(), [anchor, key, id] {
              absl::ReaderMutexLock al2(&anchor->mu);
              if (anchor->table != nullptr) anchor->table->OnCancel(key, id);
            });
        })) {
      return AcquireCancelledError();
    }
    TimerQueue::TimerId timer = timers_->ScheduleAt(w.deadline, [anchor, key, id] {
      absl::ReaderMutexLock al(&anchor->mu);
      if (anchor->table != nullptr) anchor->table->OnDeadline(key, id);
    });
    Queue& q = queues_[key];
    ++q.owners[w.params.owner];
    Entry e{id, std::move(w), timer};
    if (front) {
      q.entries.push_front(std::move(e));
    } else {
      q.entries.push_back(std::move(e));
    }
    ++total_;
  }
  return absl::OkStatus();
}

std::optional<WaiterTable::Waiter> WaiterTable::PopFront(const LockKey& key) {
  absl::MutexLock l(&mu_);
  auto it = queues_.find(key);
  if (it == queues_.end()) return std::nullopt;
  return TakeLocked(key, it->second, 0).w;
}

std::vector<WaiterTable::Waiter> WaiterTable::PopOwner(const LockKey& key,
                                                       absl::string_view owner) {
  std::vector<Waiter> out;
  absl::MutexLock l(&mu_);
  auto it = queues_.find(key);
  if (it == queues_.end()) return out;
  Queue& q = it->second;
  auto o = q.owners.find(owner);
  if (o == q.owners.end()) return out;
  // When the last one is taken the queue may be gone: stop before touching q.
  for (uint32_t left = o->second, i = 0; left > 0;) {
    if (q.entries[i].w.params.owner != owner) {
      ++i;
      continue;
    }
    out.push_back(TakeLocked(key, q, i).w);
    --left;
  }
  return out;
}

WaiterTable::Entry WaiterTable::TakeLocked(const LockKey& key, Queue& q, size_t i) {
  auto e = q.entries.begin() + static_cast<ptrdiff_t>(i);
  auto o = q.owners.find(e->w.params.owner);
  if (--o->second == 0) q.owners.erase(o);
  Entry entry = std::move(*e);
  q.entries.erase(e);
  --total_;
  if (q.entries.empty()) queues_.erase(key);
  Disarm(entry);
  return entry;
}

size_t WaiterTable::Count(const LockKey& key) const {
  absl::MutexLock l(&mu_);
  auto it = queues_.find(key);
  return it == queues_.end() ? 0 : it->second.entries.size();
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
    for (Entry& e : q.entries) {
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
  Queue& q = it->second;
  for (size_t i = 0; i < q.entries.size(); ++i) {
    if (q.entries[i].id == id) return TakeLocked(key, q, i).w;
  }
  return std::nullopt;
}

void WaiterTable::OnDeadline(const LockKey& key, uint64_t id) {
  std::optional<Waiter> w = Remove(key, id);
  if (w) on_timeout_(std::move(*w));
}

void WaiterTable::OnCancel(const LockKey& key, uint64_t id) {
  std::optional<Waiter> w = Remove(key, id);
  if (w) std::move(w->done)(AcquireCancelledError());
}

}  // namespace lockd
