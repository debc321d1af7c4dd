#include "lockd/lockable.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "clients/cpp/src/cancellation.h"
#include "clients/cpp/src/rpc.h"

namespace lockd {
namespace {

// lock()'s waiting acquire when options.wait is zero. Each one that ends
// unanswered joins lockd's queue again at its back, so it is long.
constexpr absl::Duration kLockWait = absl::Minutes(5);

AcquireOptions WithOwner(const Client& client, AcquireOptions options) {
  if (options.owner.empty()) {
    options.owner = absl::StrCat(client.owner(), "/lockable-", client_internal::RandomHex(8));
  }
  return options;
}

// The not-acquired-in-time of Client::Acquire (nothing held, try again).
bool NotAcquired(const absl::Status& s) {
  return s.code() == absl::StatusCode::kDeadlineExceeded && !UnconfirmedAcquireRequestId(s);
}

}  // namespace

LockError::LockError(absl::Status status)
    : std::runtime_error(status.ToString()), status_(std::move(status)) {}

Lockable::Lockable(const Client& client, std::string name, AcquireOptions options)
    : client_(client.core_),
      name_(std::move(name)),
      options_(WithOwner(client, std::move(options))) {}

Lockable::~Lockable() {
  absl::MutexLock l(&mu_);
  lease_.reset();  // ~Lease releases it
}

bool Lockable::Claim(absl::Duration timeout) {
  const std::thread::id self = std::this_thread::get_id();
  // Wakes the wait below on a cancel (cancellation.h: the token's mutex
  // before mu_).
  client_internal::CancelScope wake(options_.cancel, [this] { absl::MutexLock l(&mu_); });
  absl::MutexLock l(&mu_);
  if (claimed_ && holder_ == self) {
    throw LockError(absl::FailedPreconditionError(
        absl::StrCat("lockd Lockable \"", name_, "\": the calling thread holds it already")));
  }
  if (!claimed_ && waiters_.empty()) {
    claimed_ = true;
    holder_ = self;
    return true;
  }
  if (timeout <= absl::ZeroDuration()) return false;
  Waiter me{self};
  waiters_.push_back(&me);
  auto granted_or_cancelled = [this, &me]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return me.granted || options_.cancel.cancelled();
  };
  mu_.AwaitWithTimeout(absl::Condition(&granted_or_cancelled), timeout);
  if (!me.granted) waiters_.erase(std::find(waiters_.begin(), waiters_.end(), &me));
  if (options_.cancel.cancelled()) {
    if (me.granted) PassOnLocked();
    throw LockError(absl::CancelledError(
        absl::StrCat("lockd Lockable \"", name_, "\": cancelled by its CancellationToken")));
  }
  return me.granted;
}

void Lockable::PassOnLocked() {
  if (waiters_.empty()) {
    claimed_ = false;
    holder_ = std::thread::id();
    return;
  }
  Waiter* next = waiters_.front();
  waiters_.pop_front();
  next->granted = true;
  holder_ = next->thread;  // claimed_ stays true: no other thread can take it meanwhile
}

void Lockable::Unclaim() {
  absl::MutexLock l(&mu_);
  PassOnLocked();
}

bool Lockable::Take(absl::Duration wait, bool forever) {
  AcquireOptions options = options_;
  options.wait = wait;
  options.timeout = absl::ZeroDuration();
  while (true) {
    absl::StatusOr<Lease> lease = client_.Acquire(name_, options);
    if (lease.ok()) {
      absl::MutexLock l(&mu_);
      lease_ = *std::move(lease);
      return true;
    }
    if (NotAcquired(lease.status()) && forever) continue;
    Unclaim();
    if (NotAcquired(lease.status())) return false;
    throw LockError(lease.status());
  }
}

void Lockable::lock() {
  Claim(absl::InfiniteDuration());
  Take(options_.wait > absl::ZeroDuration() ? options_.wait : kLockWait, /*forever=*/true);
}

bool Lockable::try_lock() {
  return Claim(absl::ZeroDuration()) && Take(absl::ZeroDuration(), false);
}

bool Lockable::TryLockFor(absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  if (!Claim(timeout)) return false;
  return Take(std::max(end - absl::Now(), absl::ZeroDuration()), /*forever=*/false);
}

void Lockable::unlock() noexcept {
  std::optional<Lease> lease;
  {
    absl::MutexLock l(&mu_);
    if (!claimed_ || holder_ != std::this_thread::get_id() || !lease_.has_value()) return;
    lease = std::move(lease_);
    lease_.reset();
  }
  absl::Status released = lease->Release();
  absl::MutexLock l(&mu_);
  last_unlock_ = released;
  PassOnLocked();
}

const Lease* Lockable::lease() const {
  absl::MutexLock l(&mu_);
  if (!claimed_ || holder_ != std::this_thread::get_id() || !lease_.has_value()) return nullptr;
  return &*lease_;
}

absl::Status Lockable::last_unlock_status() const {
  absl::MutexLock l(&mu_);
  return last_unlock_;
}

}  // namespace lockd
