#include "tools/lockctl/verify/referee.h"

#include <algorithm>

namespace lockd::lockctl::verify {

Referee::Counters Referee::Read(const std::string& name, uint64_t token) {
  absl::MutexLock l(&mu_);
  Counters& c = counters_[name];
  c.max_token = std::max(c.max_token, token);
  return c;
}

bool Referee::Write(const std::string& name, uint64_t token, int64_t fenced, int64_t unfenced) {
  absl::MutexLock l(&mu_);
  Counters& c = counters_[name];
  c.unfenced = unfenced;
  ++c.unfenced_writes;
  if (token < c.max_token) {
    ++c.stale_rejected;
    return false;
  }
  c.max_token = token;
  c.fenced = fenced;
  ++c.fenced_writes;
  return true;
}

std::map<std::string, Referee::Counters> Referee::Snapshot() const {
  absl::MutexLock l(&mu_);
  return counters_;
}

}  // namespace lockd::lockctl::verify
