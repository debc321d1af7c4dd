// Blocking calls into a Backend, for tests: each starts the call with a
// callback and waits for its result.
//
//   absl::StatusOr<AcquireResult> r = SyncAcquire(*backend, Acq("orders/42", "alice"));
//   auto waiter = StartAcquire(*backend, Acq("orders/42", "bob", kTtl, absl::Seconds(5)));
//   ...                              // the Acquire is parked meanwhile
//   EXPECT_TRUE(waiter->Wait()->acquired);
//
// A call the backend never answers fails with kDeadlineExceeded after
// `timeout` instead of hanging the test; its callback may still run later
// (the state it writes to is shared with it). Thread-safe.

#ifndef LOCKD_TESTS_SUPPORT_SYNC_BACKEND_H_
#define LOCKD_TESTS_SUPPORT_SYNC_BACKEND_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "backends/backend.h"

namespace lockd::testing {

inline constexpr absl::Duration kBackendCallTimeout = absl::Seconds(60);

// The result of one backend call, filled in by the callback from Done().
template <typename T>
class PendingCall {
 public:
  // The callback to hand to the backend. REQUIRES: called once per object.
  static Callback<T> Done(std::shared_ptr<PendingCall> self) {
    return [self = std::move(self)](absl::StatusOr<T> r) {
      absl::MutexLock l(&self->mu_);
      self->result_ = std::move(r);
      self->done_ = true;
    };
  }

  // True once the callback has run.
  bool ready() const {
    absl::MutexLock l(&mu_);
    return done_;
  }

  // The result, after waiting up to `timeout` for it (kDeadlineExceeded if
  // the backend has not answered by then).
  absl::StatusOr<T> Wait(absl::Duration timeout = kBackendCallTimeout) const {
    absl::MutexLock l(&mu_);
    if (!mu_.AwaitWithTimeout(absl::Condition(&done_), timeout)) {
      return absl::DeadlineExceededError(
          absl::StrCat("the backend did not answer within ", absl::FormatDuration(timeout)));
    }
    return result_;
  }

 private:
  mutable absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::StatusOr<T> result_ ABSL_GUARDED_BY(mu_) = absl::UnknownError("no answer yet");
};

// Runs `start(callback)` and waits for the callback's result.
template <typename T, typename Start>
absl::StatusOr<T> Await(Start start, absl::Duration timeout = kBackendCallTimeout) {
  auto pending = std::make_shared<PendingCall<T>>();
  start(PendingCall<T>::Done(pending));
  return pending->Wait(timeout);
}

// An Acquire left running (parked, typically); the caller waits on it later.
inline std::shared_ptr<PendingCall<AcquireResult>> StartAcquire(
    Backend& b, AcquireParams p, std::shared_ptr<CancelSignal> cancel = nullptr) {
  auto pending = std::make_shared<PendingCall<AcquireResult>>();
  b.Acquire(std::move(p), std::move(cancel), PendingCall<AcquireResult>::Done(pending));
  return pending;
}

inline absl::StatusOr<AcquireResult> SyncAcquire(Backend& b, AcquireParams p,
                                                 std::shared_ptr<CancelSignal> cancel = nullptr) {
  return StartAcquire(b, std::move(p), std::move(cancel))->Wait();
}

inline absl::StatusOr<ReleaseResult> SyncRelease(Backend& b, ReleaseParams p) {
  return Await<ReleaseResult>(
      [&](Callback<ReleaseResult> done) { b.Release(std::move(p), std::move(done)); });
}

inline absl::StatusOr<RenewResult> SyncRenew(Backend& b, RenewParams p) {
  return Await<RenewResult>(
      [&](Callback<RenewResult> done) { b.Renew(std::move(p), std::move(done)); });
}

inline absl::StatusOr<LockState> SyncDescribe(Backend& b, LockKey key) {
  return Await<LockState>(
      [&](Callback<LockState> done) { b.Describe(std::move(key), std::move(done)); });
}

inline absl::StatusOr<ListResult> SyncList(Backend& b, ListParams p) {
  return Await<ListResult>(
      [&](Callback<ListResult> done) { b.List(std::move(p), std::move(done)); });
}

inline absl::StatusOr<ForceReleaseResult> SyncForceRelease(Backend& b, ForceReleaseParams p) {
  return Await<ForceReleaseResult>(
      [&](Callback<ForceReleaseResult> done) { b.ForceRelease(std::move(p), std::move(done)); });
}

// AcquireParams for `name` in the default namespace.
inline AcquireParams Acq(const std::string& name, const std::string& owner,
                         absl::Duration ttl = absl::Seconds(30),
                         absl::Duration wait = absl::ZeroDuration(),
                         const std::string& request_id = "") {
  AcquireParams p;
  p.key = LockKey{"default", name};
  p.owner = owner;
  p.ttl = ttl;
  p.wait = wait;
  p.request_id = request_id;
  return p;
}

// Acq for a SHARED hold (a reader of a read-write lock).
inline AcquireParams AcqShared(const std::string& name, const std::string& owner,
                               absl::Duration ttl = absl::Seconds(30),
                               absl::Duration wait = absl::ZeroDuration()) {
  AcquireParams p = Acq(name, owner, ttl, wait);
  p.mode = LockMode::kShared;
  return p;
}

// Acq for `permits` of a semaphore of `limit`.
inline AcquireParams AcqPermits(const std::string& name, const std::string& owner, uint32_t limit,
                                uint32_t permits, absl::Duration wait = absl::ZeroDuration()) {
  AcquireParams p = Acq(name, owner, absl::Seconds(30), wait);
  p.limit = limit;
  p.permits = permits;
  return p;
}

// ReleaseParams for `name` in the default namespace.
inline ReleaseParams Rel(const std::string& name, const std::string& owner,
                         const std::string& request_id = "") {
  return ReleaseParams{LockKey{"default", name}, owner, request_id};
}

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_SUPPORT_SYNC_BACKEND_H_
