// A backend whose server could not be reached when lockd started. lockd
// serves anyway, so that its liveness probe passes while its readiness
// (Health()) stays NOT_SERVING, and the real backend is started in the
// background, one attempt every `retry_interval`, until an attempt succeeds;
// from then on every call goes to it. A restart of lockd would not bring the
// backend server back.
//
// Until the real backend has started, every call is answered kUnavailable
// ("<name> backend not started: <why the last attempt failed>") and Health()
// returns that status; a later attempt that fails for another reason (e.g.
// kUnauthenticated once the server answers) is logged and retried too.
//
// Thread-safe, as every Backend. Owns the started backend.

#ifndef LOCKD_SERVICE_DEFERRED_BACKEND_H_
#define LOCKD_SERVICE_DEFERRED_BACKEND_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "backends/backend.h"

namespace lockd {

class DeferredBackend final : public Backend {
 public:
  // One attempt to start the real backend; called on the retry thread.
  using StartFn = absl::AnyInvocable<absl::StatusOr<std::unique_ptr<Backend>>()>;

  // `name` is the backend's name() ("redis"); `first_error` why the attempt
  // made before this one failed. The first retry is `retry_interval` from now.
  DeferredBackend(std::string name, absl::Status first_error, StartFn start,
                  absl::Duration retry_interval);
  ~DeferredBackend() override;  // Shutdown()

  absl::string_view name() const override { return name_; }
  void Acquire(AcquireParams params, std::shared_ptr<CancelSignal> cancel,
               Callback<AcquireResult> done) override;
  void Release(ReleaseParams params, Callback<ReleaseResult> done) override;
  void Renew(RenewParams params, Callback<RenewResult> done) override;
  void RenewMany(std::vector<RenewParams> params, RenewManyCallback done) override;
  void Describe(LockKey key, Callback<LockState> done) override;
  void List(ListParams params, Callback<ListResult> done) override;
  void ForceRelease(ForceReleaseParams params, Callback<ForceReleaseResult> done) override;
  absl::Status Health() const override;
  // Stops the retries (waits for an attempt in progress), then shuts the
  // started backend down, if any.
  void Shutdown() override;

 private:
  void Retry();
  // The started backend, or null.
  Backend* started() const { return started_.load(std::memory_order_acquire); }
  // The answer to a call while no backend has started.
  absl::Status NotStarted() const;

  const std::string name_;
  const absl::Duration retry_interval_;
  StartFn start_;  // used by the retry thread only
  std::atomic<Backend*> started_{nullptr};

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Backend> backend_ ABSL_GUARDED_BY(mu_);  // set once; started_ points to it

  absl::once_flag join_once_;
  std::thread thread_;
};

}  // namespace lockd

#endif  // LOCKD_SERVICE_DEFERRED_BACKEND_H_
