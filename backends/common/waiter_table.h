// Parked Acquire calls, per lock, in arrival order (FIFO), each with a wait
// deadline and a cancellation hook. Backends park a call that cannot be
// granted yet, and pop the first waiter of a lock when it may proceed
// (release, lease expiry, notification). No waiter holds a thread: deadlines
// run on a TimerQueue.
//
// Thread-safe: one mutex guards the table. No callback is ever run while it
// is held, so a backend may call Park/PopFront while holding its own mutex
// (lock order: backend mutex, then the table's).

#ifndef LOCKD_BACKENDS_COMMON_WAITER_TABLE_H_
#define LOCKD_BACKENDS_COMMON_WAITER_TABLE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "backends/backend.h"
#include "backends/common/timer_queue.h"

namespace lockd {

class WaiterTable {
 public:
  struct Waiter {
    AcquireParams params;
    std::shared_ptr<CancelSignal> cancel;  // may be null
    Callback<AcquireResult> done;
    SteadyClock::time_point deadline;
  };

  // Called on the timer thread, with no lock held, for a waiter whose
  // deadline passed. It has been removed from the table; the backend must
  // finish it (normally OK, acquired=false, with the lock's current state).
  using TimeoutFn = absl::AnyInvocable<void(Waiter)>;

  // `timers` must outlive the table. At most `max_waiters` waiters are parked
  // at once across all locks.
  WaiterTable(TimerQueue* timers, size_t max_waiters, TimeoutFn on_timeout);
  ~WaiterTable();
  WaiterTable(const WaiterTable&) = delete;
  WaiterTable& operator=(const WaiterTable&) = delete;

  // Parks `w` at the back of its lock's queue (or at the front, for a waiter
  // that was popped to retry and lost). Arms its deadline and hooks its
  // cancel signal: when it fires, the waiter is removed and finished with
  // kCancelled (on the timer thread).
  // Returns OK if parked (w was moved from). Otherwise `w` is untouched and
  // the caller must finish it: kResourceExhausted when the table is full,
  // kCancelled when w.cancel has already fired, kUnavailable after Close().
  absl::Status Park(Waiter& w, bool front = false);

  // Removes and returns the first live waiter of `key` (disarming its
  // deadline and cancel hook), or nullopt if none.
  std::optional<Waiter> PopFront(const LockKey& key);

  // Removes and returns (disarmed, in arrival order) every waiter of `key`
  // whose params.owner is `owner`: once that owner holds the lock they are
  // reentrant acquires and must not wait on it.
  std::vector<Waiter> PopOwner(const LockKey& key, absl::string_view owner);

  // Number of waiters parked on `key`, and in total.
  size_t Count(const LockKey& key) const;
  size_t Total() const;

  // Refuses further Park calls and returns every parked waiter (disarmed),
  // for the backend to finish with ShuttingDownError().
  std::vector<Waiter> Close();

 private:
  struct Entry {
    uint64_t id;
    Waiter w;
    TimerQueue::TimerId timer;
  };
  // Removes the waiter with `id` from `key`'s queue; nullopt if not there.
  std::optional<Waiter> Remove(const LockKey& key, uint64_t id);
  void OnDeadline(const LockKey& key, uint64_t id);
  void OnCancel(const LockKey& key, uint64_t id);
  void Disarm(Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  TimerQueue* const timers_;
  const size_t max_waiters_;
  TimeoutFn on_timeout_;

  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  size_t total_ ABSL_GUARDED_BY(mu_) = 0;
  struct Queue {
    std::deque<Entry> entries;
    // Waiters per owner, so that PopOwner costs nothing when it finds none.
    absl::flat_hash_map<std::string, uint32_t> owners;
  };
  // Removes and returns the i-th entry of `key`'s queue `q` (disarmed),
  // dropping the queue when it becomes empty.
  Entry TakeLocked(const LockKey& key, Queue& q, size_t i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::flat_hash_map<LockKey, Queue> queues_ ABSL_GUARDED_BY(mu_);
  // Timer and cancel callbacks reach the table through the anchor, which the
  // destructor clears (waiting for callbacks that are running).
  struct Anchor {
    absl::Mutex mu;
    WaiterTable* table ABSL_GUARDED_BY(mu);
  };
  std::shared_ptr<Anchor> anchor_;
};

}  // namespace lockd

#endif  // LOCKD_BACKENDS_COMMON_WAITER_TABLE_H_
