// The ZooKeeper backend: every lock lives in a ZooKeeper ensemble, so any
// number of lockd replicas can serve the same locks.
//
// Model (docs/backends.md, "ZooKeeper", has the operator's view):
//   - One lock is the container node <root>/<ns>/<name> (names encoded by
//     zk::EncodeSegment). Each Acquire that cannot be answered from the holder
//     alone creates one persistent sequential contender node under it, named
//     with a per-attempt id so that a create whose reply was lost is found
//     again instead of duplicated. The lowest sequence holds the lock; a
//     waiter watches only its immediate predecessor (no herd), or the holder
//     when a node of its own owner is ahead (so that it is granted as a
//     reentrant acquire once its owner holds). A try-once Acquire that is not
//     lowest deletes its node. A waiter's node is marked waiting while it
//     waits, and its replica confirms the grant (clears the mark) before
//     answering; a lowest node left unconfirmed for observer_grace (its
//     replica died or is cut off) is deleted by any replica.
//   - Reading a queue (getChildren of the lock node) is shared: at most one
//     listing per lock node is in flight, and every request that needs one
//     meanwhile waits for the next, which ZooKeeper reads after all of their
//     own writes. W Acquires arriving together on one lock thus cost a few
//     listings rather than W listings of up to W names each.
//   - The holder's state (owner, hold count, lease, last request_id) is the
//     holder node's data, rewritten with version checks, so any replica can
//     renew or release any lock.
//   - Fencing token: the holder node's creation zxid (czxid). It grows
//     across the whole ensemble, including ZooKeeper restarts that keep their
//     data, and is the same for reentrant acquires and renewals.
//   - Leases: measured by each replica's monotonic clock from when it wrote
//     the lease or first saw it (never a wall clock), so no clock skew between
//     replicas matters. The replica that granted or renewed a lease times it
//     exactly and deletes the holder node when it runs out; every replica also
//     reaps, every `reap_interval`, holder nodes whose lease it has seen run
//     out (plus a grace of `observer_grace` for leases it did not write).
//   - Contender nodes are persistent, so a hold never ends with the
//     ZooKeeper session of the replica that created it: if that replica
//     dies, is cut off or shuts down, its holds last to their leases (the
//     other replicas reap them) and can be renewed or released through any
//     replica. Every replica deletes its own nodes when their calls end
//     (NodeDeleter retries after a reconnect); a dead replica's waiter node
//     that reaches the head is an unconfirmed grant (reaped after
//     observer_grace), and a node of a call that died between its create
//     and its answer or waiting mark holds at most to its lease.
//   - Sessions: one per backend. While disconnected, or while the server has
//     not answered a probe for min(2 s, session_timeout / 3), every call fails
//     at once with kUnavailable and Health() reports it; parked waiters stay parked
//     (their nodes and watches survive a reconnect within the session
//     timeout). On session expiry the backend answers parked waiters
//     kUnavailable (deleting their nodes), opens a new session and serves
//     again; holds acquired through the old session stay, to their leases.
//   - Ensembles: `hosts` lists every server. A leader change or the loss of
//     the server the session is on is a disconnect within the session: the
//     client moves to another server and everything above survives. Without
//     a quorum no server serves, so the backend stays disconnected
//     (kUnavailable) until a majority is back; a new leader restarts every
//     session's timeout, so the session survives any such outage
//     (tests/integration/zookeeper/zookeeper_ensemble_test.cc).
//
// Guarantees: everything in backends/backend.h, across replicas, except that
// a request_id retry of a Release that freed the lock answers "released" only
// until ZooKeeper deletes the empty lock node (its container check interval,
// 60 s by default) or someone else takes the lock.
//
// Thread-safe: each part (zookeeper_backend.cc lists them) guards its own
// state; ZooKeeper callbacks run on the C client's completion thread and
// timers on a TimerQueue thread, and neither blocks.

#ifndef LOCKD_BACKENDS_ZOOKEEPER_ZOOKEEPER_BACKEND_H_
#define LOCKD_BACKENDS_ZOOKEEPER_ZOOKEEPER_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "backends/backend.h"
#include "backends/zookeeper/zookeeper_options.h"

namespace lockd {

// Starts a backend: opens a ZooKeeper session and creates the root. Errors:
// kInvalidArgument for unusable options (naming the field: hosts that are not
// "host:port,...", root, session_timeout); kUnauthenticated if the server
// refuses access to the root (bad credentials or ACL). If the ensemble cannot
// be reached within options.connect_wait (down, or no host name resolves
// yet), returns a backend that keeps connecting in the background and
// answers kUnavailable meanwhile.
absl::StatusOr<std::unique_ptr<Backend>> NewZooKeeperBackend(const ZooKeeperOptions& options);

}  // namespace lockd

#endif  // LOCKD_BACKENDS_ZOOKEEPER_ZOOKEEPER_BACKEND_H_
