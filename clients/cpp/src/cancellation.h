// Internal: the shared state behind lockd::CancellationToken, and the one way
// a waiting acquire hears of a cancel (CancelScope).
//
// Rules:
//  * Cancel() sets the flag, then runs every registered callback, once,
//    with the token's mutex held; a scope registered after that runs its
//    callback at once, in its constructor. cancelled() reads an atomic and
//    takes no lock, so it may be called under any lock.
//  * Lock order: the token's mutex before any lock a callback takes (a
//    session's mutex, a ClientContext's). So a callback must be short, must
//    not use the token, and a CancelScope is never built or destroyed while
//    its thread holds a lock its callback takes.
//  * ~CancelScope unregisters its callback and waits for it if it is running,
//    so the callback may refer to what the scope's owner destroys next.
//
// Thread-safe: the flag is atomic, the callbacks are behind mu_.

#ifndef LOCKD_CLIENTS_CPP_SRC_CANCELLATION_H_
#define LOCKD_CLIENTS_CPP_SRC_CANCELLATION_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "lockd/client.h"

namespace lockd::client_internal {

class CancelState {
 public:
  // Idempotent; runs the callbacks on the calling thread.
  void Cancel() ABSL_LOCKS_EXCLUDED(mu_);
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

 private:
  friend class CancelScope;

  mutable absl::Mutex mu_;
  std::atomic<bool> cancelled_{false};  // set under mu_, read without it
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, std::function<void()>> callbacks_ ABSL_GUARDED_BY(mu_);
};

// The state of `token`. Never null.
const std::shared_ptr<CancelState>& StateOf(const CancellationToken& token);

// Runs `on_cancel` once if `token` is cancelled while the scope lives (at
// once, in the constructor, if it already is).
class CancelScope {
 public:
  CancelScope(const CancellationToken& token, std::function<void()> on_cancel);
  ~CancelScope();
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

 private:
  const std::shared_ptr<CancelState> state_;
  uint64_t id_ = 0;  // 0: not registered (ran in the constructor)
};

// The kCancelled an acquire of `what` (DescribeCall) reports when its
// token was cancelled; `cause` (may be OK) is the failure the cancel cut
// short: its message is appended and its payloads kept (an unconfirmed
// undo's request id among them).
absl::Status CancelledError(absl::string_view what, const absl::Status& cause = absl::OkStatus());

}  // namespace lockd::client_internal

#endif  // LOCKD_CLIENTS_CPP_SRC_CANCELLATION_H_
