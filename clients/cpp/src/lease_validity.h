// Internal: how long the client may trust a lease. Each bound is written
// once, here, and used by every call site (the unary path, renewals, the
// session stream, the path choice). lease_validity_test.cc checks them
// against clients/testdata/lease_validity.json, the vectors every client's
// tests read.
//
//   drift          = ttl * clock_drift_factor + min_clock_drift
//   hang_bound (K) = max(keepalive.time, 1 s) + keepalive.timeout
//   unary          : valid until send + ttl - drift
//   session_break  : valid until break_noticed - K + ttl*2/3 - drift
//   session_safe   : ttl*2/3 - drift > K, or ttl zero (not known yet)
//
// Why: a lease cannot have started before the request that granted or
// renewed it was sent, so `send` bounds the server's lease from below. A
// session stream to a replica that hangs breaks within K (keepalive pings),
// and the replica renewed each hold at most ttl/3 before it was last known
// alive, so a session hold stays safe until 2/3 of its lease minus the drift
// after break_noticed - K; holding a lease over a session is only safe when
// that bound is later than the break itself.
//
// Pure functions of their arguments; thread-safe.

#ifndef LOCKD_CLIENTS_CPP_SRC_LEASE_VALIDITY_H_
#define LOCKD_CLIENTS_CPP_SRC_LEASE_VALIDITY_H_

#include <chrono>

#include "absl/time/time.h"
#include "lockd/client.h"

namespace lockd::client_internal {

using SteadyClock = std::chrono::steady_clock;
using SteadyTime = SteadyClock::time_point;

inline SteadyClock::duration ToSteady(absl::Duration d) {
  return std::chrono::duration_cast<SteadyClock::duration>(absl::ToChronoNanoseconds(d));
}
inline absl::Duration FromSteady(SteadyClock::duration d) {
  return absl::FromChrono(std::chrono::duration_cast<std::chrono::nanoseconds>(d));
}

// drift = ttl * options.clock_drift_factor + options.min_clock_drift
// (Redlock's clock-drift allowance).
absl::Duration Drift(absl::Duration ttl, const ClientOptions& options);

// The ping interval a channel uses for `k`: k.time, at least 1 s.
absl::Duration KeepaliveInterval(const KeepaliveOptions& k);

// K: the longest a lockd replica can hang before a session stream on the
// Client's channel breaks (a ping interval plus its timeout).
absl::Duration HangBound(const ClientOptions& options);

// unary: the validity deadline of a lease of `ttl` granted or renewed by a
// request sent at `send`: send + ttl - drift.
SteadyTime UnaryValidUntil(SteadyTime send, absl::Duration ttl, absl::Duration drift);

// session_break: the validity deadline of a session hold of `ttl` whose
// stream broke, noticed at `break_noticed`:
// break_noticed - hang_bound + ttl*2/3 - drift.
SteadyTime SessionBreakValidUntil(SteadyTime break_noticed, absl::Duration hang_bound,
                                  absl::Duration ttl, absl::Duration drift);

// session_safe: whether a hold of lease `ttl` (zero: the server's default,
// not known yet, counts as safe) may be held over a session:
// ttl*2/3 - drift > hang_bound.
bool SessionSafe(absl::Duration ttl, absl::Duration drift, absl::Duration hang_bound);

}  // namespace lockd::client_internal

#endif  // LOCKD_CLIENTS_CPP_SRC_LEASE_VALIDITY_H_
