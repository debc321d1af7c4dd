// Who waits for which lock, in order: per lock, the parked Acquire calls in
// arrival order (FIFO). Used by the WaitEngine (wait_engine.h) and by the
// memory backend, which park a call that cannot be granted yet and pop the
// first waiter of a lock when it may proceed (release, lease expiry,
// notification).
//
// Each waiter is an entry of a WaiterRegistry (waiter_registry.h), by its id:
// the registry, not this table, owns the call's deadline timer, cancel hook,
// place under max_waiters and the shutdown gate. When the registry tells the
// owner that a call's wait ends (WaiterRegistry::StopFn), the owner takes it
// out of here with Remove(); a call that is not here then (its attempt is in
// flight) is the owner's to end when it comes back.
//
// Not thread-safe: the owner guards the table with its own mutex (declare it
// ABSL_GUARDED_BY that mutex, so that clang checks every use). Nothing here
// locks, blocks or calls back.

#ifndef LOCKD_BACKENDS_COMMON_WAITER_TABLE_H_
#define LOCKD_BACKENDS_COMMON_WAITER_TABLE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "backends/backend.h"
#include "backends/common/timer_queue.h"

namespace lockd {

class WaiterTable {
 public:
  // One waiting Acquire call.
  struct Waiter {
    AcquireParams params;
    std::shared_ptr<CancelSignal> cancel;  // may be null
    Callback<AcquireResult> done;
    SteadyClock::time_point deadline;
    uint64_t id = 0;  // its WaiterRegistry id, once registered
    // When it arrived, as its owner numbers calls (0: not numbered). Push
    // keeps a lock's queue in this order, so that a call whose first
    // attempt came back later than a newer call's still parks ahead of it.
    uint64_t arrival = 0;

    // Whether its CancelSignal has fired.
    bool cancelled() const { return cancel != nullptr && cancel->cancelled(); }
  };

  WaiterTable() = default;
  // Answers every waiter still here ShuttingDownError(), so that no `done` is
  // dropped unanswered (owners drain the table before, through the registry).
  ~WaiterTable();
  WaiterTable(const WaiterTable&) = delete;
  WaiterTable& operator=(const WaiterTable&) = delete;

  // Appends `w` to its lock's queue, ahead of the waiters at its end that
  // arrived after it (a larger non-zero `arrival`; waiters numbered 0 are
  // appended).
  void Push(Waiter w);
  // Puts `w` first in its lock's queue: a waiter that was popped to try and
  // lost keeps its place ahead of later ones.
  void PushFront(Waiter w);

  // Removes and returns the first waiter of `key`; nullopt if none.
  std::optional<Waiter> PopFront(const LockKey& key);

  // The first waiter of `key`, left in place; null if none. Valid until the
  // table is next changed.
  const Waiter* Front(const LockKey& key) const;

  // Removes and returns (in arrival order) every waiter of `key` whose
  // params.owner is `owner`: once that owner holds the lock they are
  // reentrant acquires and must not wait on it. With `take`, only those for
  // which it returns true (the others keep their places). Costs nothing
  // when the owner has none.
  std::vector<Waiter> PopOwner(const LockKey& key, absl::string_view owner);
  std::vector<Waiter> PopOwner(const LockKey& key, absl::string_view owner,
                               absl::FunctionRef<bool(const Waiter&)> take);

  // Removes and returns the waiter of `key` with registry id `id`; nullopt if
  // it is not here.
  std::optional<Waiter> Remove(const LockKey& key, uint64_t id);

  // Number of waiters on `key`, and in total.
  size_t Count(const LockKey& key) const;
  size_t Total() const;

 private:
  struct Queue {
    std::deque<Waiter> waiters;
    // Waiters per owner, so that PopOwner costs nothing when it finds none.
    absl::flat_hash_map<std::string, uint32_t> owners;
  };
  Queue& QueueFor(const Waiter& w);
  // Removes and returns the i-th waiter of `key`'s queue `q`, dropping the
  // queue when it becomes empty.
  Waiter Take(const LockKey& key, Queue& q, size_t i);

  absl::flat_hash_map<LockKey, Queue> queues_;
  size_t total_ = 0;
};

}  // namespace lockd

#endif  // LOCKD_BACKENDS_COMMON_WAITER_TABLE_H_
