// Blocking calls into a Backend, for tests: each waits for the callback.

#ifndef LOCKD_TESTS_INTEGRATION_MYSQL_SYNC_BACKEND_H_
#define LOCKD_TESTS_INTEGRATION_MYSQL_SYNC_BACKEND_H_

#include <future>
#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "backends/backend.h"

namespace lockd::testing {

template <typename T, typename Start>
absl::StatusOr<T> Await(Start start) {
  auto promise = std::make_shared<std::promise<absl::StatusOr<T>>>();
  std::future<absl::StatusOr<T>> future = promise->get_future();
  start([promise](absl::StatusOr<T> r) mutable { promise->set_value(std::move(r)); });
  return future.get();
}

inline absl::StatusOr<AcquireResult> SyncAcquire(Backend& b, AcquireParams p,
                                                 std::shared_ptr<CancelSignal> cancel = nullptr) {
  return Await<AcquireResult>([&](Callback<AcquireResult> done) {
    b.Acquire(std::move(p), std::move(cancel), std::move(done));
  });
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

inline ReleaseParams Rel(const std::string& name, const std::string& owner,
                         const std::string& request_id = "") {
  return ReleaseParams{LockKey{"default", name}, owner, request_id};
}

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_INTEGRATION_MYSQL_SYNC_BACKEND_H_
