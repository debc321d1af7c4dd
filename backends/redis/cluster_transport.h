// The redis backend's transport in cluster mode (redis.mode: cluster): a
// router over the primaries of a Redis Cluster. hiredis 0.14 has no cluster
// support; this is lockd's own.
//
//  - The slot map comes from CLUSTER SLOTS, asked of the known primaries and
//    the seed nodes (redis.addresses) in turn. It is refreshed when a node
//    answers -MOVED, when a primary or its subscriber connection is lost or
//    a sharded subscription is refused or dropped (a failover or a
//    resharding), while some slot has no primary, and every 10 s; at most
//    one refresh per 200 ms.
//  - Each primary has its own CommandPool (pool_size connections) and its
//    own sharded Subscriber. A command goes to the primary serving its slot
//    (Command::slot, else the slot of args[0], a script's first key).
//  - -MOVED: the command is resent to the node named (or, if that node is
//    not a known primary, after the next refresh); -ASK: ASKING and the
//    command go to the node named in one write; -TRYAGAIN: resent after a
//    short delay. A command moved more than 5 times, or still redirected two
//    command timeouts after its first redirection, fails with kUnavailable.
//    Redirection replies mean the command did not run, so resending never
//    runs a script twice; a command whose connection is lost fails
//    (kUnavailable) and is never resent.
//  - Release channels are SSUBSCRIBEd on the primary serving their slot;
//    when the slot moves (a `sunsubscribe` push, a -MOVED reply, a refreshed
//    map), the subscription moves with it and OnSubscribed is reported again.
//  - Health: kUnavailable while some slot has no primary, or some primary's
//    command or subscriber connections are all down.
//
// Internal to backends/redis; the backend's contract is redis_backend.h.

#ifndef LOCKD_BACKENDS_REDIS_CLUSTER_TRANSPORT_H_
#define LOCKD_BACKENDS_REDIS_CLUSTER_TRANSPORT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "backends/redis/transport.h"

namespace lockd::redis {

// Reads the slot map from the first seed node (options.connection.addresses)
// that answers (blocking, up to connect_timeout + a few command timeouts per
// seed), then connects to every primary in the background (WaitReady waits
// for them). `listener` must outlive the transport.
// Errors: kInvalidArgument naming redis.mode when a seed is not a cluster
// node; kUnauthenticated when a seed refuses the credentials; kUnavailable
// when no seed can be reached.
absl::StatusOr<std::unique_ptr<Transport>> NewClusterTransport(TransportOptions options,
                                                               Transport::Listener* listener);

}  // namespace lockd::redis

#endif  // LOCKD_BACKENDS_REDIS_CLUSTER_TRANSPORT_H_
