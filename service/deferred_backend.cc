#include "service/deferred_backend.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "util/log.h"

namespace lockd {

DeferredBackend::DeferredBackend(std::string name, absl::Status first_error, StartFn start,
                                 absl::Duration retry_interval)
    : name_(std::move(name)), retry_interval_(retry_interval), start_(std::move(start)) {
  last_error_ = std::move(first_error);
  thread_ = std::thread([this] { Retry(); });
}

DeferredBackend::~DeferredBackend() { Shutdown(); }

void DeferredBackend::Retry() {
  absl::MutexLock l(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), retry_interval_)) {
    mu_.Unlock();
    absl::StatusOr<std::unique_ptr<Backend>> backend = start_();
    mu_.Lock();
    if (backend.ok()) {
      backend_ = *std::move(backend);
      started_.store(backend_.get(), std::memory_order_release);
      LogInfo("backend ", name_, " started");
      return;
    }
    if (backend.status() != last_error_) {
      LogWarning("backend ", name_, " still not started: ", backend.status().message(),
                 "; retrying every ", absl::FormatDuration(retry_interval_));
    }
    last_error_ = backend.status();
  }
}

absl::Status DeferredBackend::NotStarted() const {
  absl::MutexLock l(&mu_);
  if (stopping_) return ShuttingDownError();
  return absl::UnavailableError(
      absl::StrCat(name_, " backend not started: ", last_error_.message()));
}

void DeferredBackend::Acquire(AcquireParams params, std::shared_ptr<CancelSignal> cancel,
                              Callback<AcquireResult> done) {
  if (Backend* b = started()) {
    b->Acquire(std::move(params), std::move(cancel), std::move(done));
    return;
  }
  std::move(done)(NotStarted());
}

void DeferredBackend::Release(ReleaseParams params, Callback<ReleaseResult> done) {
  if (Backend* b = started()) return b->Release(std::move(params), std::move(done));
  std::move(done)(NotStarted());
}

void DeferredBackend::Renew(RenewParams params, Callback<RenewResult> done) {
  if (Backend* b = started()) return b->Renew(std::move(params), std::move(done));
  std::move(done)(NotStarted());
}

void DeferredBackend::RenewMany(std::vector<RenewParams> params, RenewManyCallback done) {
  if (Backend* b = started()) return b->RenewMany(std::move(params), std::move(done));
  std::move(done)(std::vector<absl::StatusOr<RenewResult>>(params.size(), NotStarted()));
}

void DeferredBackend::Describe(LockKey key, Callback<LockState> done) {
  if (Backend* b = started()) return b->Describe(std::move(key), std::move(done));
  std::move(done)(NotStarted());
}

void DeferredBackend::List(ListParams params, Callback<ListResult> done) {
  if (Backend* b = started()) return b->List(std::move(params), std::move(done));
  std::move(done)(NotStarted());
}

void DeferredBackend::ForceRelease(ForceReleaseParams params, Callback<ForceReleaseResult> done) {
  if (Backend* b = started()) return b->ForceRelease(std::move(params), std::move(done));
  std::move(done)(NotStarted());
}

absl::Status DeferredBackend::Health() const {
  if (Backend* b = started()) return b->Health();
  return NotStarted();
}

void DeferredBackend::Shutdown() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  absl::call_once(join_once_, [this] { thread_.join(); });
  if (Backend* b = started()) b->Shutdown();
}

}  // namespace lockd
