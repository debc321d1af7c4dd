// The Redis backend: every lock lives in Redis, so any number of lockd
// replicas can share one Redis server (or one primary with replicas behind a
// failover mechanism that moves the address list's first reachable entry).
//
// Guarantees (besides everything in backends/backend.h):
//  - Each state change is one Lua script (scripts.h), run with EVALSHA and
//    re-sent with EVAL when the server lost its script cache. The lease is a
//    PEXPIRE measured by the Redis server's clock.
//  - Fencing tokens come from an INCR of a per-lock fence key that is seeded
//    from the server's TIME in microseconds when missing, so they keep
//    growing across lockd restarts, across Redis restarts with or without
//    persistence, and after a fence key expired. This relies on fewer than
//    one grant per microsecond per lock on average, and on the Redis clock
//    not stepping back by more than fence_retention.
//  - A fence key never expires while its lock can be held: every grant,
//    re-entry and renew sets its TTL to the lease plus fence_retention. It
//    is deleted by Redis fence_retention after the lock's last lease ended
//    (fence_retention zero: never).
//  - Waiting uses one pub/sub connection per process: a waiter's lock
//    channel is subscribed while this process has waiters on it, and a
//    release message (or a timer at the holder's PTTL, for a lease that ends
//    without a release) wakes only the first local waiter. Waiters of one
//    process are granted in arrival order; across processes the first to run
//    its script after a release wins.
//  - While Redis is unreachable, calls fail at once with kUnavailable,
//    parked waiters stay parked until their own deadline, Health() reports
//    kUnavailable, and connections, scripts and subscriptions come back by
//    themselves (capped exponential backoff).
// Not guaranteed: Redis replication is asynchronous, so a failover can lose a
// granted lock (a second holder may then be granted it); fencing tokens are
// the defence. A Redis restart without persistence frees every lock (holders
// learn it from Renew/Release: LOCK_NOT_HELD).
//
// Thread-safe. Callbacks run on the backend's Redis threads (or inline on
// the calling thread when a call fails before reaching Redis).

#ifndef LOCKD_BACKENDS_REDIS_REDIS_BACKEND_H_
#define LOCKD_BACKENDS_REDIS_REDIS_BACKEND_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backends/backend.h"

namespace lockd {

struct RedisOptions {
  // Comma-separated host:port ([v6addr]:port allowed). Connections use the
  // first address that accepts them; on failure the next one is tried.
  std::string addresses = "127.0.0.1:6379";
  std::string username;  // ACL user (Redis >= 6); empty: AUTH with the password alone
  std::string password;  // secret, never logged; empty: no AUTH
  int db = 0;
  // Prefix of every key and channel: 1-64 bytes of [A-Za-z0-9._:/-].
  std::string key_prefix = "lockd";
  // Command connections, each with its own thread; commands are pipelined.
  int pool_size = 4;
  absl::Duration connect_timeout = absl::Seconds(1);
  absl::Duration command_timeout = absl::Seconds(1);
  // Parked Acquire calls allowed at once; more get kResourceExhausted.
  size_t max_waiters = 100000;
  // How long the result of a Release (with a request_id) that freed a lock
  // is remembered for retries.
  absl::Duration release_memory = absl::Minutes(5);
  // How long a fence key outlives its lock's last lease; zero: forever.
  absl::Duration fence_retention = absl::Hours(24);
  // Reconnect backoff: doubles from min to max (with jitter).
  absl::Duration reconnect_backoff_min = absl::Milliseconds(50);
  absl::Duration reconnect_backoff_max = absl::Seconds(1);
};

// Connects (blocking for up to about connect_timeout + a few command
// timeouts), loads the scripts, starts the connection pool and the
// subscriber, and returns the backend once they are connected.
// Errors: kInvalidArgument naming the option (redis.addresses,
// redis.key_prefix, redis.pool_size, redis.username, ...);
// kUnauthenticated "... authentication failed ..." when Redis refuses the
// credentials (the password never appears in the message); kUnavailable when
// no address can be reached.
absl::StatusOr<std::unique_ptr<Backend>> NewRedisBackend(const RedisOptions& options);

}  // namespace lockd

#endif  // LOCKD_BACKENDS_REDIS_REDIS_BACKEND_H_
