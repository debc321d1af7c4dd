// lockd::Lockable: a lockd lock as a standard C++ mutex, for std::unique_lock,
// std::scoped_lock, std::lock_guard and std::lock.
//
//   lockd::Lockable orders(client, "orders/42");
//   {
//     std::unique_lock<lockd::Lockable> guard(orders);  // blocks until held
//     Charge(order, orders.lease()->fencing_token());
//   }                                                  // released here
//
// A Lockable meets the named requirements BasicLockable (lock, unlock),
// Lockable (+ try_lock) and TimedLockable (+ try_lock_for, try_lock_until).
// It excludes at two levels:
//  * Threads of this process: one Lockable object is a mutex; while one
//    thread holds it (or is taking lockd's lock for it), other threads'
//    lock() wait for it here, without asking lockd, in arrival order: an
//    unlock() hands it to the longest-waiting thread, so a thread that
//    unlocks and locks again at once queues behind those already waiting
//    (no barging), and try_lock() fails while any thread waits.
//  * Processes (and other Lockable objects): the holder holds the lockd lock
//    `name` for its own owner id: AcquireOptions::owner, else
//    "<Client owner>/lockable-<random hex>", a new one per Lockable. So two
//    Lockables of one name exclude each other even in one process. Such an
//    owner is not the Client's, so the hold uses the unary path with the
//    watchdog (docs/clients/cpp.md); pass options.owner = client.owner() for the
//    session path, if nothing else of this Client takes `name` (lockd's
//    holds are reentrant per owner: it would get the lock alongside).
// The lease is renewed as any Lease (options.auto_renew); check
// lease()->valid() and pass lease()->fencing_token() to what the lock
// protects: a lock held by lock() can still be lost (see lockd::Lease).
//
// Errors are exceptions (the standard interfaces return void or bool):
//  * lock() waits however long the lock is held by others, in waiting
//    acquires of options.wait each (zero: 5 minutes); it throws LockError
//    for every other failure: kUnavailable (lockd unreachable until an
//    acquire's timeout), kInvalidArgument (a bad name or option),
//    kFailedPrecondition (the name is a semaphore, ...), kResourceExhausted,
//    kCancelled (options.cancel, also while waiting for another thread of
//    this process), and kFailedPrecondition when the calling thread holds
//    this Lockable already (as std::unique_lock's resource_deadlock_would_occur).
//  * try_lock() tries once and returns false when another owner (or another
//    thread of this process) holds the lock; try_lock_for / try_lock_until
//    wait up to their bound and then return false. They throw LockError as
//    lock() does for everything else.
//  * unlock() never throws (BasicLockable): it releases the hold (bounded by
//    ClientOptions::rpc_timeout); if the release fails the hold ends with
//    its lease, and last_unlock_status() says why.
// Whatever a call throws, the Lockable is not held afterwards and no hold of
// that call remains on lockd (Client::Acquire's guarantee), unless the
// error carries UnconfirmedAcquireRequestId.
//
// Thread-safe as a mutex is: any thread may lock; unlock() and lease() are
// for the thread that holds it. Not copyable or movable. It keeps its
// Client's connection alive. Destroying a held Lockable releases the hold.

#ifndef LOCKD_LOCKABLE_H_
#define LOCKD_LOCKABLE_H_

#include <chrono>
#include <deque>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lockd/client.h"

namespace lockd {

// What Lockable throws: what() is status().ToString().
class LockError : public std::runtime_error {
 public:
  explicit LockError(absl::Status status);
  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
};

class Lockable {
 public:
  // The lock `name` of `client`, taken with `options` (ns, owner, ttl,
  // auto_renew, on_lost, cancel; options.wait bounds each waiting acquire
  // of lock(), options.timeout is ignored). Nothing is sent yet.
  Lockable(const Client& client, std::string name, AcquireOptions options = {});
  ~Lockable();
  Lockable(const Lockable&) = delete;
  Lockable& operator=(const Lockable&) = delete;

  // Blocks until held. Throws LockError (see above).
  void lock();
  // One attempt. True: held. Throws LockError (see above).
  bool try_lock();
  // Waits up to `timeout` (for this process's other threads, then for
  // lockd). True: held. Throws LockError (see above).
  template <typename Rep, typename Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    return TryLockFor(
        absl::FromChrono(std::chrono::duration_cast<std::chrono::nanoseconds>(timeout)));
  }
  template <typename Clock, typename Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return try_lock_for(deadline - Clock::now());
  }
  // Releases the hold. Never throws. REQUIRES: the calling thread holds it
  // (otherwise nothing happens).
  void unlock() noexcept;

  // The hold, while the calling thread holds this Lockable; else null.
  const Lease* lease() const;
  // The outcome of the last unlock()'s release (OK before any).
  absl::Status last_unlock_status() const;
  const std::string& name() const { return name_; }
  // The owner id of every hold of this Lockable.
  const std::string& owner() const { return options_.owner; }

 private:
  bool TryLockFor(absl::Duration timeout);
  // Waits up to `timeout` until no thread holds this Lockable, then takes
  // it for the calling thread. False on timeout; throws on a cancel or when
  // the caller holds it already.
  bool Claim(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // Gives back what Claim took (no lockd hold).
  void Unclaim() ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the calling thread's claim: hands it to the first waiting thread,
  // or frees it when none waits.
  void PassOnLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After Claim: lockd's lock, waiting up to `wait` per acquire, again and
  // again if `forever`. True: held; false: not within `wait`. On any other
  // error, Unclaims and throws.
  bool Take(absl::Duration wait, bool forever) ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction (client_ is thread-safe).
  Client client_;
  const std::string name_;
  const AcquireOptions options_;  // owner filled in

  mutable absl::Mutex mu_;
  // A thread holds this Lockable, or is taking lockd's lock for it.
  bool claimed_ ABSL_GUARDED_BY(mu_) = false;
  std::thread::id holder_ ABSL_GUARDED_BY(mu_);
  // Threads waiting in Claim, in arrival order; PassOnLocked sets the
  // first one's `granted` as it makes it the holder.
  struct Waiter {
    std::thread::id thread;
    bool granted = false;
  };
  std::deque<Waiter*> waiters_ ABSL_GUARDED_BY(mu_);
  std::optional<Lease> lease_ ABSL_GUARDED_BY(mu_);  // set while held
  absl::Status last_unlock_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockd

#endif  // LOCKD_LOCKABLE_H_
