#include "clients/cpp/src/lease_validity.h"

#include <algorithm>

namespace lockd::client_internal {

absl::Duration Drift(absl::Duration ttl, const ClientOptions& options) {
  return ttl * options.clock_drift_factor + options.min_clock_drift;
}

absl::Duration KeepaliveInterval(const KeepaliveOptions& k) {
  return std::max(k.time, absl::Seconds(1));
}

absl::Duration HangBound(const ClientOptions& options) {
  return KeepaliveInterval(options.keepalive) + options.keepalive.timeout;
}

SteadyTime UnaryValidUntil(SteadyTime send, absl::Duration ttl, absl::Duration drift) {
  return send + ToSteady(ttl - drift);
}

SteadyTime SessionBreakValidUntil(SteadyTime break_noticed, absl::Duration hang_bound,
                                  absl::Duration ttl, absl::Duration drift) {
  // The server was last known alive hang_bound before the break was noticed.
  const SteadyTime alive = break_noticed - ToSteady(hang_bound);
  return alive + ToSteady(ttl * 2 / 3 - drift);
}

bool SessionSafe(absl::Duration ttl, absl::Duration drift, absl::Duration hang_bound) {
  return ttl == absl::ZeroDuration() || ttl * 2 / 3 - drift > hang_bound;
}

}  // namespace lockd::client_internal
