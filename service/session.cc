// SessionHub: the live Session streams of a LockServiceImpl (the rules are in
// session.h; each stream's reactor is in session_reactor.cc).

#include "service/session.h"

#include "service/session_reactor.h"

namespace lockd {

SessionHub::SessionHub(Backend* backend, LeaseBounds lease, const Authorizer* authz,
                       std::atomic<int64_t>* in_flight, Metrics* metrics)
    : backend_(backend),
      lease_(lease),
      authz_(authz),
      in_flight_(in_flight),
      metrics_(metrics),
      renewals_(backend) {}

SessionHub::~SessionHub() = default;

grpc::ServerBidiReactor<v1::SessionRequest, v1::SessionResponse>* SessionHub::Open(
    grpc::CallbackServerContext* ctx) {
  auto* session = new SessionReactor(this, ctx);
  session->Begin();
  return session;
}

bool SessionHub::Add(SessionReactor* s) {
  absl::MutexLock l(&mu_);
  if (ending_) return false;
  live_.insert(s);
  if (metrics_ != nullptr) metrics_->SessionOpened();
  return true;
}

void SessionHub::Remove(SessionReactor* s) {
  absl::MutexLock l(&mu_);
  if (live_.erase(s) != 0 && metrics_ != nullptr) metrics_->SessionClosed();
}

// Sessions are called under mu_: a session leaves live_ (in OnDone, under
// mu_) before it can be deleted, so every one in live_ is alive here.
void SessionHub::EndAll() {
  absl::MutexLock l(&mu_);
  ending_ = true;
  for (SessionReactor* s : live_) s->EndForShutdown();
}

void SessionHub::ForceReleased(const LockKey& key, const std::string& owner, uint64_t token) {
  absl::MutexLock l(&mu_);
  for (SessionReactor* s : live_) s->ForceReleased(key, owner, token);
}

size_t SessionHub::size() const {
  absl::MutexLock l(&mu_);
  return live_.size();
}

}  // namespace lockd
