// The bookkeeping of live waiting Acquire calls, written once for every
// backend: each call's deadline timer and cancel hook, the max_waiters rule,
// the shutdown gate and drain. Nothing else keeps these: the WaitEngine
// (wait_engine.h) and the memory backend keep only the order of their parked
// calls (waiter_table.h, by registry id); the ZooKeeper backend, whose queue
// lives on the server and whose calls wait behind their own predecessor
// watch (backends/zookeeper/acquire_attempt.h), keeps none.
//
// A call is registered for as long as it is live and admitted while it
// waits. The max_waiters rule: at most `max_waiters` calls are admitted at
// once, counting calls parked and calls whose retry is in flight; admitting
// one more fails with TooManyWaitersError(max_waiters). A call keeps its
// admission until it is discharged or unregistered, so a retry in flight
// never loses its place.
//
// Two kinds of call, by how they hear that their wait ends (their deadline
// passed, their CancelSignal fired, or Close()):
//   - A Call object (ZooKeeper's AcquireAttempt): Register(), then Admit()
//     when it parks. Call::Stop() runs on the thread that fired: the timer
//     thread, the canceller's (inline in Register() for a signal that has
//     fired already), or Close()'s caller.
//   - An entry of its owner's WaiterTable (the engine's, the memory
//     backend's): RegisterAdmitted(), registered and admitted at once. The
//     registry's StopFn is told (key, id, why), never inside a registry call
//     other than Close(): a cancel is handed to the timer thread, so the hook
//     only schedules work (a CancelSignal fires on a gRPC thread that must not
//     block) and RegisterAdmitted() may be called under the mutex StopFn
//     takes.
// Timers and cancel hooks look the call up by id, so neither keeps an
// unregistered call alive, and a stop may race with the call finishing on
// its own: a Call ignores a Stop() that comes after its answer, a StopFn
// one for a call that is no longer in its table.
//
// Thread-safe: all state is guarded by mu_. No callback runs with mu_ held,
// so the registry may be used under a caller's mutex (lock order: the
// caller's mutex, then mu_). Close() and the destructor wait for a stop that
// is being delivered to return: call them with no mutex held that Stop() or
// StopFn takes.

#ifndef LOCKD_BACKENDS_COMMON_WAITER_REGISTRY_H_
#define LOCKD_BACKENDS_COMMON_WAITER_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

  // Tells the owner of call `id` (registered by RegisterAdmitted on `key`)
  // that its wait ends for `why`. Called with no registry lock held, on the
  // TimerQueue thread (deadline, cancel) or inside Close() (shutdown); at
  // most once per id and reason, and not at all once Close() has returned.
  // May come after the call left the owner's table (or was unregistered);
  // it is then ignored.
  using StopFn = absl::AnyInvocable<void(const LockKey& key, uint64_t id, StopReason why) const>;

  // `timers` must outlive the registry, or at least Close(). max_waiters > 0.
  // `stop` is required for RegisterAdmitted().
  WaiterRegistry(TimerQueue* timers, size_t max_waiters, StopFn stop = nullptr);
  ~WaiterRegistry();
  WaiterRegistry(const WaiterRegistry&) = delete;
  WaiterRegistry& operator=(const WaiterRegistry&) = delete;

  size_t max_waiters() const { return max_waiters_; }

  // Registers live call `call` on `key`, not admitted; its deadline, if any,
  // and `cancel`, if not null, call call->Stop(). Returns the call's id, never
  // 0; or 0 after Close() (nothing registered).
  // REQUIRES: call != nullptr.
  uint64_t Register(std::shared_ptr<Call> call, const LockKey& key,
                    std::optional<SteadyClock::time_point> deadline,
                    const std::shared_ptr<CancelSignal>& cancel);

  // Registers and admits a call on `key` whose stops go to the StopFn: at
  // `deadline` (kDeadline) and when `cancel`, if not null, fires (kCancelled,
  // also when it has fired already). Returns its id, never 0;
  // TooManyWaitersError(max_waiters) if max_waiters calls are admitted
  // already; ShuttingDownError() after Close(). Nothing is registered on an
  // error.
  // REQUIRES: the registry was built with a StopFn.
  absl::StatusOr<uint64_t> RegisterAdmitted(const LockKey& key, SteadyClock::time_point deadline,
                                            const std::shared_ptr<CancelSignal>& cancel);

  // Forgets call `id`: discharges it, cancels its deadline timer and unhooks
  // `cancel` (the signal it was registered with, or null). Idempotent.
  void Unregister(uint64_t id, const std::shared_ptr<CancelSignal>& cancel);

  // The live Call `id` as registered, or null (also for a StopFn call).
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

  // Every live Call object (to end them, e.g. when a backend's session
  // ends).
  std::vector<std::shared_ptr<Call>> All() const;

  // Whether Close() was called.
  bool closed() const;

  // The gate and the drain: refuses further Register(), RegisterAdmitted()
  // and Admit() calls, cancels every deadline timer and silences cancel
  // hooks, then stops every live call with StopReason::kShutdown (with no
  // lock held; the calls stay registered until they unregister). Idempotent.
  void Close();

 private:
  struct Entry {
    std::shared_ptr<Call> call;  // null: told through stop_
    LockKey key;
    bool admitted = false;
    TimerQueue::TimerId deadline_timer = 0;
  };
  // Timers and cancel hooks reach this object through the anchor, cleared
  // by Close() and the destructor (a CancelSignal may fire after its call is
  // gone); a stop is delivered with the anchor's lock held, so that clearing
  // it waits for deliveries in progress.
  struct Anchor {
    absl::Mutex mu;
    WaiterRegistry* registry ABSL_GUARDED_BY(mu) = nullptr;
  };
  // A callback that stops call `id` for `why`, if the registry is still open.
  static absl::AnyInvocable<void() &&> StopTask(std::shared_ptr<Anchor> anchor, uint64_t id,
                                                StopReason why);

  uint64_t AddLocked(std::shared_ptr<Call> call, const LockKey& key,
                     std::optional<SteadyClock::time_point> deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AdmitLocked(Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DischargeLocked(Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StopById(uint64_t id, StopReason why);

  // Constant after construction.
  const size_t max_waiters_;
  // Used with mu_ held and !closed_, or by a hook holding the anchor's lock
  // while it points here (Close() clears it first).
  TimerQueue* const timers_;
  const StopFn stop_;
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
