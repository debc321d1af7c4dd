// The Redis client under the redis backend, part four: the one interface the
// backend sends commands and (un)subscribes release channels through, so
// that it has one code path for every redis.mode. Standalone mode is one
// CommandPool and one Subscriber (NewStandaloneTransport, here); cluster
// mode routes each command to the primary serving its slot
// (cluster_transport.h).
//
// Internal to backends/redis; the backend's contract is redis_backend.h.

#ifndef LOCKD_BACKENDS_REDIS_TRANSPORT_H_
#define LOCKD_BACKENDS_REDIS_TRANSPORT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "backends/redis/command_pool.h"
#include "backends/redis/redis_client.h"

namespace lockd::redis {

// Settings shared by every connection of a transport.
struct TransportOptions {
  // Standalone: the server's addresses (tried in order). Cluster: seed nodes.
  ConnectionOptions connection;
  // Loaded on every command connection; must have their sha set (Connect
  // fills it) and outlive the transport.
  std::vector<Script*> scripts;
  int pool_size = 4;  // command connections per server
  absl::Duration backoff_min = absl::Milliseconds(50);
  absl::Duration backoff_max = absl::Seconds(1);
  absl::Duration ping_interval = absl::Seconds(1);  // of silent subscriber connections
};

// Thread-safe (every implementation).
class Transport {
 public:
  // Receives what the subscriptions bring. Called on transport threads with
  // no transport lock held; must not call Stop().
  class Listener {
   public:
    virtual ~Listener() = default;
    // `channel` is now subscribed (after Subscribe(), and again after every
    // reconnect or move): anything published to it from now on arrives.
    virtual void OnSubscribed(const std::string& channel) = 0;
    // `message` was published to `channel`, which is wanted.
    virtual void OnMessage(const std::string& channel, absl::string_view message) = 0;
  };

  virtual ~Transport() = default;

  // Blocks until every server is connected (OK) or `limit` passes
  // (kUnavailable saying what is not).
  virtual absl::Status WaitReady(absl::Duration limit) = 0;

  // Sends `cmd`. cmd.done runs exactly once: on a transport thread with the
  // reply, or with an error (kUnavailable when the server is unreachable,
  // ShuttingDownError() after Stop()), possibly inline on this thread when
  // the command could not be sent. REQUIRES: no lock the callback takes.
  virtual void Send(Command cmd) = 0;
  // Sends `cmd` and right behind it on the same connection `then` (same
  // contract for both; when they cannot go together they go separately).
  virtual void Send(Command cmd, Command then) = 0;
  // Sends all of `cmds`, pipelined in as few writes as possible.
  virtual void SendAll(std::vector<Command> cmds) = 0;

  // For a walk over every key: one Command::slot per server that holds
  // keys, for SCAN to run on each server once.
  virtual std::vector<int> ScanSlots() const = 0;

  // Wants release channel `channel` subscribed (idempotent);
  // Listener::OnSubscribed follows once it is.
  virtual void Subscribe(const std::string& channel) = 0;
  // No longer wants `channel` (idempotent).
  virtual void Unsubscribe(const std::string& channel) = 0;

  // The primary may have moved (sentinel mode: +switch-master): every
  // connection is dropped and reconnects, finding the primary anew; commands
  // awaiting replies fail with kUnavailable. Cluster mode re-reads the slot
  // map instead.
  virtual void PrimaryMoved() = 0;

  // OK when every server is reachable; else kUnavailable saying which is not.
  virtual absl::Status Health() const = 0;

  // Stops listener calls, lets commands awaiting replies finish (at most a
  // command timeout), refuses new ones, joins the threads. Idempotent.
  virtual void Stop() = 0;
};

// One server (or the first reachable of options.connection.addresses).
// Starts connecting at once; `listener` must outlive the transport. Fails
// (kInternal) only when the process is out of file descriptors.
absl::StatusOr<std::unique_ptr<Transport>> NewStandaloneTransport(TransportOptions options,
                                                                  Transport::Listener* listener);

}  // namespace lockd::redis

#endif  // LOCKD_BACKENDS_REDIS_TRANSPORT_H_
