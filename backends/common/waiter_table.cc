#include "backends/common/waiter_table.h"

#include <iterator>
#include <utility>

namespace lockd {

WaiterTable::~WaiterTable() {
  for (auto& [key, q] : queues_) {
    for (Waiter& w : q.waiters) std::move(w.done)(ShuttingDownError());
  }
}

WaiterTable::Queue& WaiterTable::QueueFor(const Waiter& w) {
  Queue& q = queues_[w.params.key];
  ++q.owners[w.params.owner];
  ++total_;
  return q;
}

void WaiterTable::Push(Waiter w) {
  std::deque<Waiter>& q = QueueFor(w).waiters;
  auto at = q.end();
  while (w.arrival != 0 && at != q.begin() && std::prev(at)->arrival > w.arrival) --at;
  q.insert(at, std::move(w));
}

void WaiterTable::PushFront(Waiter w) { QueueFor(w).waiters.push_front(std::move(w)); }

std::optional<WaiterTable::Waiter> WaiterTable::PopFront(const LockKey& key) {
  auto it = queues_.find(key);
  if (it == queues_.end()) return std::nullopt;
  return Take(key, it->second, 0);
}

const WaiterTable::Waiter* WaiterTable::Front(const LockKey& key) const {
  auto it = queues_.find(key);
  return it == queues_.end() ? nullptr : &it->second.waiters.front();
}

std::vector<WaiterTable::Waiter> WaiterTable::PopOwner(const LockKey& key,
                                                       absl::string_view owner) {
  return PopOwner(key, owner, [](const Waiter&) { return true; });
}

std::vector<WaiterTable::Waiter> WaiterTable::PopOwner(
    const LockKey& key, absl::string_view owner, absl::FunctionRef<bool(const Waiter&)> take) {
  std::vector<Waiter> out;
  auto it = queues_.find(key);
  if (it == queues_.end()) return out;
  Queue& q = it->second;
  auto o = q.owners.find(owner);
  if (o == q.owners.end()) return out;
  // When the last one is taken the queue may be gone: stop before touching q.
  for (uint32_t left = o->second, i = 0; left > 0;) {
    const Waiter& w = q.waiters[i];
    if (w.params.owner != owner) {
      ++i;
      continue;
    }
    --left;
    if (take(w)) {
      out.push_back(Take(key, q, i));
    } else {
      ++i;
    }
  }
  return out;
}

std::optional<WaiterTable::Waiter> WaiterTable::Remove(const LockKey& key, uint64_t id) {
  auto it = queues_.find(key);
  if (it == queues_.end()) return std::nullopt;
  Queue& q = it->second;
  for (size_t i = 0; i < q.waiters.size(); ++i) {
    if (q.waiters[i].id == id) return Take(key, q, i);
  }
  return std::nullopt;
}

WaiterTable::Waiter WaiterTable::Take(const LockKey& key, Queue& q, size_t i) {
  auto w = q.waiters.begin() + static_cast<ptrdiff_t>(i);
  auto o = q.owners.find(w->params.owner);
  if (--o->second == 0) q.owners.erase(o);
  Waiter out = std::move(*w);
  q.waiters.erase(w);
  --total_;
  if (q.waiters.empty()) queues_.erase(key);
  return out;
}

size_t WaiterTable::Count(const LockKey& key) const {
  auto it = queues_.find(key);
  return it == queues_.end() ? 0 : it->second.waiters.size();
}

size_t WaiterTable::Total() const { return total_; }

}  // namespace lockd
