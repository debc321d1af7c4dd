// The Redis backend: every lock lives in Redis, so any number of lockd
// replicas can share one Redis server (or one primary with replicas behind a
// failover mechanism that moves the address list's first reachable entry),
// or one Redis Cluster (redis.mode: cluster, Redis >= 7).
//
// Guarantees (besides everything in backends/backend.h):
//  - Each state change is one Lua script (scripts.h), run with EVALSHA and
//    re-sent with EVAL when the server lost its script cache. The lease is a
//    PEXPIRE measured by the Redis server's clock.
//  - Fencing tokens are the larger of a per-lock fence key + 1 and the
//    server's TIME in microseconds, written back to the key, so they keep
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
//    without a release) wakes only the first local waiter.
//  - Kinds (backend.h "Kinds"): an EXCLUSIVE hold keeps the lock hash's
//    format of before shared locks; SHARED and semaphore holders are one
//    record each in the same hash, with their own lease end on the Redis
//    clock (keys.h). Old lockd versions do not know these records: upgrade
//    every replica before the first shared or semaphore acquire.
//  - FIFO across replicas and modes: the lock's queue lives in Redis (keys.h)
//    and every acquire script consults it. While another replica is live
//    (backends/common/replica_presence.h), a waiting call takes a place with
//    its first attempt that is not granted; this process extends its places
//    every 0.5 s to 2 s while their calls wait (only while another replica
//    is live) and takes a place out when its call ends ungranted, so a dead
//    replica's places stop counting within 2 s. The uncontended EXCLUSIVE
//    acquire and release stay one script each and write no queue key.
//  - While Redis is unreachable, calls fail at once with kUnavailable,
//    parked waiters stay parked until their own deadline, Health() reports
//    kUnavailable, and connections, scripts and subscriptions come back by
//    themselves (capped exponential backoff).
// Not guaranteed: Redis replication is asynchronous, so a failover can lose a
// granted lock (a second holder may then be granted it); fencing tokens are
// the defence. A Redis restart without persistence frees every lock (holders
// learn it from Renew/Release: LOCK_NOT_HELD).
//
// Cluster mode (redis.mode: cluster; redis.addresses are seed nodes, any
// nodes of the cluster, primaries or replicas; redis.db must be 0):
//  - All keys of a lock and its channel share the hash tag {ns:name}
//    (keys.h), so each lock lives in one slot, on the primary serving it,
//    and every script runs there. lockd reads the slot map (CLUSTER SLOTS)
//    from the seeds at start, keeps pool_size command connections and one
//    subscriber connection per primary, follows -MOVED/-ASK/-TRYAGAIN
//    (a command still redirected after 5 moves or 2 command timeouts fails
//    with kUnavailable; a slot migration makes scripts of locks in that
//    slot wait, -TRYAGAIN, while their keys are split between nodes) and
//    re-reads the map on redirections, lost primaries and lost
//    subscriptions (cluster_transport.h).
//  - Release messages use sharded pub/sub (SPUBLISH/SSUBSCRIBE on the
//    lock's primary); when a slot moves, the subscription moves with it.
//  - Fencing tokens keep growing across a failover or a slot migration as
//    they do across restarts: the fence key moves with its slot (migration)
//    or is replicated, and when a promoted replica misses the last grants,
//    the TIME seeding still puts the next token above them (given clocks
//    that agree to within the grants' spacing). Only a command answered
//    with a redirection, i.e. one that did not run, is ever resent.
//  - Health() is kUnavailable while some slot has no known primary or some
//    primary cannot be reached; calls for locks in the slots of a failed
//    primary fail with kUnavailable until the cluster promotes a replica and
//    lockd reads the new map (about cluster-node-timeout plus 200 ms),
//    calls for other slots go on.
//  - Not guaranteed, as above: a failover can lose grants the old primary
//    had not replicated (WAIT is not used); fencing is the defence. List
//    walks every primary with SCAN, one after the other; a lock whose slot
//    migrates during the walk may be missed or listed twice (List is a
//    snapshot of no single moment anyway).
//
// Sentinel mode (RedisMode::kSentinel; sentinel.h): `addresses` are Redis
// Sentinels. Every connection asks them in turn for the primary of
// `sentinel_master` and uses it only if ROLE says "master", so the reconnect
// loops follow a failover by themselves; a watcher subscribed to a
// Sentinel's +switch-master also drops every connection when the primary
// moves (a demoted primary may stay reachable). During a failover calls fail
// with kUnavailable and waiters stay parked. A failover can lose what was not
// yet replicated to the promoted replica, e.g. a grant: a second holder may
// then be granted the same lock. Fencing tokens are the defence; they still
// grow across the failover, being seeded from the server's TIME. NewRedisBackend
// fails with kInvalidArgument naming redis.sentinel_master when the
// Sentinels do not know the master set.
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
#include "backends/redis/redis_options.h"

namespace lockd {

// Connects (blocking for up to about connect_timeout + a few command
// timeouts), loads the scripts, starts the connection pool and the
// subscriber, and returns the backend once they are connected.
// Errors: kInvalidArgument naming the option (redis.addresses,
// redis.key_prefix, redis.pool_size, redis.username, redis.db: must be 0 in
// cluster mode, redis.mode: a seed has cluster support disabled, ...);
// kUnauthenticated "... authentication failed ..." when Redis refuses the
// credentials (the password never appears in the message); kUnavailable when
// no address can be reached.
absl::StatusOr<std::unique_ptr<Backend>> NewRedisBackend(const RedisOptions& options);

}  // namespace lockd

#endif  // LOCKD_BACKENDS_REDIS_REDIS_BACKEND_H_
