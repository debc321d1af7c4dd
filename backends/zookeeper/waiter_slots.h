// The ZooKeeper backend's bookkeeping of live Acquire calls: their ids, the
// max_waiters capacity of parked calls, deadlines, cancellation hooks and
// the drain at shutdown. Kept behind this narrow interface so that moving
// ZooKeeper to the common waiting engine (backends/common) is a local
// change: AcquireAttempt only registers, parks, unparks and unregisters.
//
// An attempt is "parked" once it waits behind a predecessor; parking takes
// one of options.max_waiters slots, released only when the attempt is
// granted or finished, so re-checks in flight keep theirs. This is the
// common WaitEngine's rule: at most max_waiters calls waiting, counting
// those whose attempt is in flight; one more gets TooManyWaitersError. The deadline timer and the
// cancel signal call AcquireAttempt::Stop(); they look the attempt up by id, so neither keeps a
// finished attempt alive.
//
// Thread-safe: all state is guarded by mu_. Nothing is called with mu_
// held, so it may be taken under an attempt's or the LeaseTracker's mutex.

#ifndef LOCKD_BACKENDS_ZOOKEEPER_WAITER_SLOTS_H_
#define LOCKD_BACKENDS_ZOOKEEPER_WAITER_SLOTS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "backends/backend.h"
#include "backends/common/timer_queue.h"
#include "backends/zookeeper/zk_common.h"

namespace lockd::zk {

class AcquireAttempt;

class WaiterSlots {
 public:
  // `timers` must outlive this object, or at least Stop().
  WaiterSlots(size_t max_waiters, TimerQueue* timers);
  ~WaiterSlots();
  WaiterSlots(const WaiterSlots&) = delete;
  WaiterSlots& operator=(const WaiterSlots&) = delete;

  size_t max_waiters() const { return max_waiters_; }

  // Registers a live attempt on `key`: arms its deadline (if any) and hooks
  // `cancel` (if not null); both call attempt->Stop(). Returns its id, never
  // 0; or 0 after Stop() (nothing registered).
  uint64_t Register(std::shared_ptr<AcquireAttempt> attempt, const LockKey& key,
                    std::optional<Clock::time_point> deadline,
                    const std::shared_ptr<CancelSignal>& cancel);

  // Forgets attempt `id`: frees its slot, cancels its deadline timer and
  // unhooks `cancel`. Idempotent.
  void Unregister(uint64_t id, const std::shared_ptr<CancelSignal>& cancel);

  // The live attempt `id`, or null.
  std::shared_ptr<AcquireAttempt> Find(uint64_t id) const;

  // Takes a slot for attempt `id` if it holds none. False if all
  // max_waiters slots are taken (the attempt then holds none).
  bool Park(uint64_t id);
  // Frees the slot of attempt `id`, if it holds one.
  void Unpark(uint64_t id);

  // True if some attempt on `key` holds a slot.
  bool HasLocalWaiters(const LockKey& key) const;

  // Every live attempt (to fail them when the session ends).
  std::vector<std::shared_ptr<AcquireAttempt>> All() const;

  // Refuses further Register() calls, cancels every timer and unhooks
  // cancel signals, and returns every live attempt for the caller to answer.
  std::vector<std::shared_ptr<AcquireAttempt>> Stop();

 private:
  struct Entry {
    std::shared_ptr<AcquireAttempt> attempt;
    LockKey key;
    bool parked = false;
    TimerQueue::TimerId deadline_timer = 0;
  };
  // Cancel callbacks reach this object through the anchor, cleared by Stop()
  // (a CancelSignal may fire after its waiter is gone).
  struct Anchor {
    absl::Mutex mu;
    WaiterSlots* slots ABSL_GUARDED_BY(mu) = nullptr;
  };

  void UnparkLocked(Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnStop(uint64_t id, bool cancelled);

  const size_t max_waiters_;
  TimerQueue* const timers_;  // used only with mu_ held and !stopped_
  const std::shared_ptr<Anchor> anchor_;

  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, Entry> live_ ABSL_GUARDED_BY(mu_);
  size_t parked_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<LockKey, int> parked_per_key_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockd::zk

#endif  // LOCKD_BACKENDS_ZOOKEEPER_WAITER_SLOTS_H_
