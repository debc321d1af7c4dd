// The bookkeeping of waiting Acquire calls that every backend shares, written
// once: the max_waiters rule, each call's deadline timer and cancel hook, and
// the drain at shutdown. The WaitEngine (wait_engine.h) takes its capacity
// and its shutdown gate from here; the ZooKeeper backend, whose queue lives
// on the server and whose calls wait behind their own predecessor watch
// (backends/zookeeper/acquire_attempt.h), uses all of it.
//
// A call is registered for as long as it is live (from its first attempt to
// its answer) and admitted while it waits. The max_waiters rule: at most
// `max_waiters` calls are admitted at once, counting calls parked and calls
// whose retry is in flight; admitting one more fails with
// TooManyWaitersError(max_waiters). A call keeps its admission until it is
// discharged or unregistered, so a retry in flight never loses its place.
//
// A registered call with a deadline or a cancel signal is told through
// Call::Stop() when either fires; Close() tells every live call
// (StopReason::kShutdown). Timers and cancel hooks look the call up by id, so
// neither keeps an unregistered call alive, and Stop() may race with the call
// finishing on its own: a call ignores a Stop() that comes after its answer.
//
// Thread-safe: all state is guarded by mu_. No callback runs with mu_ held,
// so the registry may be used under a caller's mutex (lock order: the
// caller's mutex, then mu_).

#ifndef LOCKD_BACKENDS_COMMON_WAITER_REGISTRY_H_
#define LOCKD_BACKENDS_COMMON_WAITER_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "backends/backend.h"
#include "backends/common/timer_queue.h"

namespace lockd {

class WaiterRegistry {
 public:
  enum class StopReason {
    kDeadline,   // the wait's deadline passed
    kCancelled,  // the call's CancelSignal fired
    kShutdown,   // Close(): the call must be answered ShuttingDownError()
  };

  // A live call, as the backend represents it. Implementations are
  // thread-safe.
  class Call {
   public:
    virtual ~Call() = default;
    // Ends the call's wait for `why`. Called with no registry lock held, on
    // the TimerQueue thread (deadline), the canceller's thread (cancel, maybe
    // inline in Register()) or Close()'s caller (shutdown). May come after
    // the call was answered; it is then ignored.
    virtual void Stop(StopReason why) = 0;
  };

  // `timers` must outlive the registry, or at least Close(). max_waiters > 0.
  WaiterRegistry(TimerQueue* timers, size_t max_waiters);
  ~WaiterRegistry();
  WaiterRegistry(const WaiterRegistry&) = delete;
  WaiterRegistry& operator=(const WaiterRegistry&) = delete;

  size_t max_waiters() const { return max_waiters_; }

  // Registers a live call on `key`, not admitted. `call` may be null (the
  // caller then keeps deadlines, cancellation and the drain of its parked
  // calls itself, and only counts capacity here); otherwise its deadline, if
  // any, and `cancel`, if not null, call call->Stop(). Returns the call's id,
  // never 0; or 0 after Close() (nothing registered).
  uint64_t Register(std::shared_ptr<Call> call, const LockKey& key,
                    std::optional<SteadyClock::time_point> deadline,
                    const std::shared_ptr<CancelSignal>& cancel);

  // Forgets call `id`: discharges it, cancels its deadline timer and unhooks
  // `cancel` (the signal it was registered with, or null). Idempotent.
  void Unregister(uint64_t id, const std::shared_ptr<CancelSignal>& cancel);

  // The live call `id` as registered, or null.
  std::shared_ptr<Call> Find(uint64_t id) const;

  // Admits call `id` if it is not admitted yet. OK if admitted (now or
  // before); TooManyWaitersError(max_waiters) if max_waiters calls are
  // admitted already (the call then is not); ShuttingDownError() after
  // Close() or for an unknown id.
  absl::Status Admit(uint64_t id);
  // Ends the admission of call `id`, if it has one; it stays registered.
  void Discharge(uint64_t id);

  // Whether some call on `key` is admitted.
  bool HasAdmitted(const LockKey& key) const;

  // Every live call registered with a non-null Call (to end them, e.g. when
  // a backend's session ends).
  std::vector<std::shared_ptr<Call>> All() const;

  // Whether Close() was called.
  bool closed() const;

  // The drain: refuses further Register() and Admit() calls, cancels every
  // deadline timer and unhooks cancel signals, then calls
  // Stop(StopReason::kShutdown) on every live call (with no lock held; the
  // calls stay registered until they unregister). Idempotent.
  void Close();

 private:
  struct Entry {
    std::shared_ptr<Call> call;
    LockKey key;
    bool admitted = false;
    TimerQueue::TimerId deadline_timer = 0;
  };
  // Cancel hooks reach this object through the anchor, cleared by Close()
  // and the destructor (a CancelSignal may fire after its call is gone).
  struct Anchor {
    absl::Mutex mu;
    WaiterRegistry* registry ABSL_GUARDED_BY(mu) = nullptr;
  };

  void DischargeLocked(Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StopById(uint64_t id, StopReason why);

  // Constant after construction.
  const size_t max_waiters_;
  TimerQueue* const timers_;  // used only with mu_ held and !closed_
  const std::shared_ptr<Anchor> anchor_;

  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, Entry> live_ ABSL_GUARDED_BY(mu_);
  size_t admitted_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<LockKey, int> admitted_per_key_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockd

#endif  // LOCKD_BACKENDS_COMMON_WAITER_REGISTRY_H_
