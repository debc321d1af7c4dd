#include "backends/zookeeper/queue_rules.h"

#include <cstdint>

namespace lockd::zk {

size_t AdmittedCount(const std::vector<Contender>& queue) {
  if (queue.empty()) return 0;
  const ContenderKind& head = queue.front().kind;
  if (head.exclusive_lock()) return 1;
  size_t n = 1;
  if (head.shared_lock()) {
    while (n < queue.size() && queue[n].kind.shared_lock()) ++n;
    return n;
  }
  uint64_t permits = head.permits;
  while (n < queue.size() && queue[n].kind.semaphore() && queue[n].kind.limit == head.limit &&
         permits + queue[n].kind.permits <= head.limit) {
    permits += queue[n].kind.permits;
    ++n;
  }
  return n;
}

std::vector<size_t> WatchTargets(const std::vector<Contender>& queue, size_t idx) {
  const ContenderKind& own = queue[idx].kind;
  if (own.shared_lock()) {
    for (size_t i = idx; i-- > 0;) {
      if (queue[i].kind.exclusive_lock()) return {i};
    }
    // Nothing exclusive ahead, yet not admitted: a node of another kind
    // blocks it (it is about to leave); its predecessor's exit tells.
    return {idx - 1};
  }
  const size_t admitted = AdmittedCount(queue);
  if (own.semaphore() && queue.front().kind.semaphore() && idx - admitted < kSemaphoreWindow) {
    uint64_t waiting = 0;
    for (size_t i = admitted; i <= idx; ++i) waiting += queue[i].kind.permits;
    if (waiting <= own.limit) {
      std::vector<size_t> all(admitted);
      for (size_t i = 0; i < admitted; ++i) all[i] = i;
      if (idx > admitted) all.push_back(idx - 1);  // a waiter ahead giving up
      return all;
    }
  }
  return {idx - 1};
}

Reentry ReentryFor(const ContenderKind& held, const ContenderKind& asked) {
  if (!held.SameKindAs(asked)) return Reentry::kKindMismatch;
  if (held.semaphore()) {
    return held.permits == asked.permits ? Reentry::kReenter : Reentry::kPermitsMismatch;
  }
  // An exclusive holder asking SHARED keeps its exclusive hold.
  return held.shared_lock() && asked.exclusive_lock() ? Reentry::kUpgrade : Reentry::kReenter;
}

}  // namespace lockd::zk
