#include "clients/cpp/src/cancellation.h"

#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace lockd {

CancellationToken::CancellationToken() : state_(std::make_shared<client_internal::CancelState>()) {}

void CancellationToken::Cancel() const { state_->Cancel(); }

bool CancellationToken::cancelled() const { return state_->cancelled(); }

namespace client_internal {

void CancelState::Cancel() {
  absl::MutexLock l(&mu_);
  if (cancelled_.exchange(true, std::memory_order_acq_rel)) return;
  for (auto& [id, callback] : callbacks_) callback();
  callbacks_.clear();
}

const std::shared_ptr<CancelState>& StateOf(const CancellationToken& token) { return token.state_; }

CancelScope::CancelScope(const CancellationToken& token, std::function<void()> on_cancel)
    : state_(StateOf(token)) {
  absl::MutexLock l(&state_->mu_);
  if (state_->cancelled()) {
    on_cancel();
    return;
  }
  id_ = state_->next_id_++;
  state_->callbacks_.emplace(id_, std::move(on_cancel));
}

CancelScope::~CancelScope() {
  if (id_ == 0) return;
  absl::MutexLock l(&state_->mu_);  // waits for a Cancel() running the callback
  state_->callbacks_.erase(id_);
}

absl::Status CancelledError(absl::string_view what, const absl::Status& cause) {
  absl::Status out(absl::StatusCode::kCancelled,
                   absl::StrCat("lockd acquire of ", what, ": cancelled by its CancellationToken",
                                cause.ok() ? "" : " (", cause.message(), cause.ok() ? "" : ")"));
  cause.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& value) { out.SetPayload(url, value); });
  return out;
}

}  // namespace client_internal
}  // namespace lockd
