#include "clients/cpp/src/watchdog.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace lockd::client_internal {
namespace {

absl::Duration RetryDelay(absl::Duration ttl) {
  return std::clamp(ttl / 10, absl::Milliseconds(50), absl::Seconds(1));
}

}  // namespace

Watchdog::Watchdog(std::shared_ptr<Stub> stub, std::shared_ptr<grpc::ChannelInterface> channel,
                   ClientOptions options)
    : stub_(std::move(stub)), channel_(std::move(channel)), options_(std::move(options)) {}

Watchdog::~Watchdog() {
  // Only reachable joinable if Shutdown() was skipped; never terminate().
  if (thread_.joinable()) thread_.detach();
}

void Watchdog::Add(std::shared_ptr<LeaseState> lease, SteadyTime first_renew) {
  std::lock_guard<std::mutex> l(mu_);
  const LeaseState* key = lease.get();
  entries_[key] = Entry{std::move(lease), first_renew};
  if (!started_ && !stop_) {
    started_ = true;
    // The thread owns a reference so that a detached thread (see Shutdown)
    // never outlives this object.
    thread_ = std::thread([self = shared_from_this()] { self->Run(); });
  }
  cv_.notify_all();
}

void Watchdog::Remove(const LeaseState* lease) {
  std::shared_ptr<LeaseState> dropped;  // released after the lock
  std::lock_guard<std::mutex> l(mu_);
  auto it = entries_.find(lease);
  if (it == entries_.end()) return;
  dropped = std::move(it->second.lease);
  entries_.erase(it);
}

void Watchdog::Renewed(const LeaseState* lease, SteadyTime send_time) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = entries_.find(lease);
  if (it == entries_.end()) return;
  it->second.next_renew = send_time + ToSteady(lease->ttl / 3);
  cv_.notify_all();
}

void Watchdog::Shutdown() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();
  } else {
    thread_.join();
  }
}

size_t Watchdog::tracked() const {
  std::lock_guard<std::mutex> l(mu_);
  return entries_.size();
}

uint64_t Watchdog::renewals() const {
  std::lock_guard<std::mutex> l(mu_);
  return renewals_;
}

void Watchdog::Run() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    SteadyTime now = SteadyClock::now();
    SteadyTime wake = now + std::chrono::hours(1);
    std::vector<std::shared_ptr<LeaseState>> expired;
    std::shared_ptr<LeaseState> due;
    SteadyTime due_at = SteadyTime::max();
    for (auto it = entries_.begin(); it != entries_.end();) {
      Entry& e = it->second;
      if (!e.lease->active() || !e.lease->lost_status().ok()) {
        entries_.erase(it++);
        continue;
      }
      SteadyTime valid_until = e.lease->valid_until();
      if (now >= valid_until) {
        expired.push_back(e.lease);
      } else {
        wake = std::min(wake, valid_until);
        if (e.lease->auto_renew) {
          if (e.next_renew <= now) {
            if (e.next_renew < due_at) {
              due = e.lease;
              due_at = e.next_renew;
            }
          } else {
            wake = std::min(wake, e.next_renew);
          }
        }
      }
      ++it;
    }
    if (!expired.empty() || due != nullptr) {
      l.unlock();
      // CheckExpiry re-reads the deadline: a Renew() racing this scan wins.
      for (const auto& lease : expired) lease->CheckExpiry(SteadyClock::now());
      expired.clear();  // drop references without the lock held
      if (due != nullptr) RenewOne(due);
      due.reset();
      l.lock();
      continue;
    }
    if (channel_ != nullptr && !entries_.empty() &&
        channel_->GetState(/*try_to_connect=*/false) != GRPC_CHANNEL_READY) {
      // Drive reconnection while leases depend on it. Slices of at most
      // 100 ms keep Add/Remove/Shutdown responsive.
      l.unlock();
      PauseWatchingChannel(channel_.get(), std::min(wake, now + std::chrono::milliseconds(100)));
      l.lock();
      continue;
    }
    cv_.wait_until(l, wake);
  }
}

void Watchdog::RenewOne(const std::shared_ptr<LeaseState>& lease) {
  SteadyTime now = SteadyClock::now();
  SteadyTime deadline = std::min(now + ToSteady(options_.rpc_timeout), lease->valid_until());
  absl::StatusOr<SteadyTime> sent = RenewLease(*stub_, *lease, deadline);
  std::lock_guard<std::mutex> l(mu_);
  ++renewals_;
  auto it = entries_.find(lease.get());
  if (it == entries_.end()) return;
  if (sent.ok()) {
    it->second.next_renew = *sent + ToSteady(lease->ttl / 3);
  } else {
    // Lost leases are dropped by the next scan; others retry soon.
    it->second.next_renew = SteadyClock::now() + ToSteady(RetryDelay(lease->ttl));
  }
}

}  // namespace lockd::client_internal
