// The Redis client under the redis backend, sentinel mode: finding the
// primary of a master set through Redis Sentinels, and watching them for
// failovers.
//
// In sentinel mode every connection (the command pool's and the
// subscriber's) is opened by Connect() (redis_client.h), which asks the
// Sentinels in turn for the primary (AskSentinelForPrimary) and checks that
// the server it reaches is a primary (CheckPrimary). A connection lost to a
// failover is therefore re-resolved by the reconnect loops that exist anyway.
// The SentinelWatcher adds the case where the old primary stays reachable: it
// reports a +switch-master so that the backend drops its connections.
//
// Internal to backends/redis; the backend's contract is redis_backend.h.

#ifndef LOCKD_BACKENDS_REDIS_SENTINEL_H_
#define LOCKD_BACKENDS_REDIS_SENTINEL_H_

#include <hiredis/hiredis.h>

#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "backends/redis/redis_client.h"
#include "backends/redis/redis_options.h"

namespace lockd::redis {

// The sentinel fields of `options` (redis.sentinel_*), validated.
// Errors: kInvalidArgument naming the option (redis.sentinel_master empty or
// containing a space; redis.sentinel_username without a password).
absl::StatusOr<SentinelOptions> SentinelOptionsOf(const RedisOptions& options);

// The primary's address in `r`, a reply to SENTINEL get-master-addr-by-name:
// nullopt for a nil reply (the Sentinel does not know the master set).
// Errors: the error reply's status (RedisError); kInternal for anything but
// a nil or an array of a host and a port in 1..65535.
absl::StatusOr<std::optional<Endpoint>> ParseMasterAddress(absl::string_view context,
                                                           const redisReply* r);

// OK if `r`, a reply to ROLE, starts with "master". kUnavailable naming
// `where` and the role otherwise (a replica: the Sentinels are failing over,
// or have not noticed yet); the error reply's status for an error reply;
// kInternal for a malformed reply.
absl::Status ParseRole(absl::string_view where, const redisReply* r);

// Sends ROLE on `c`, a connection to `where` found as the primary of master
// set `master_name`, and checks the answer with ParseRole. Blocks up to
// command_timeout.
absl::Status CheckPrimary(redisContext* c, absl::string_view where, absl::string_view master_name);

// Asks the Sentinel at `sentinel` for the primary of o.sentinel's master set
// (connecting and AUTHing with the Sentinel credentials). Blocks up to
// connect_timeout + 2 * command_timeout.
// REQUIRES: o.sentinel is set.
// Errors: kUnavailable if the Sentinel cannot be reached or answers with an
// error; kUnauthenticated if it refuses the credentials; kInvalidArgument
// naming redis.sentinel_master if it does not know the master set; kInternal
// for a malformed reply.
absl::StatusOr<Endpoint> AskSentinelForPrimary(const ConnectionOptions& o,
                                               const Endpoint& sentinel);

// A +switch-master event: "<master-name> <old-ip> <old-port> <new-ip>
// <new-port>".
struct SwitchMaster {
  std::string master_name;
  Endpoint from;
  Endpoint to;
};
// nullopt if `message` is not a well-formed +switch-master payload.
std::optional<SwitchMaster> ParseSwitchMaster(absl::string_view message);

// One connection to a Sentinel, subscribed to +switch-master, driven by its
// own thread. Calls `on_moved` (on that thread, with no lock held) whenever
// the primary of the master set moves: a +switch-master names it, or the
// address a Sentinel gives after a reconnect differs from the last one seen
// (a failover that happened while no Sentinel was watched). When its
// Sentinel goes away (connection error, EOF, or no answer to a PING within
// command_timeout) it connects to the next Sentinel of options.addresses,
// with capped exponential backoff.
//
// Thread-safe: the thread owns the connection and the last address seen;
// the flags read by other threads are guarded by a mutex.
class SentinelWatcher {
 public:
  // REQUIRES: options.sentinel is set and options.addresses is not empty.
  SentinelWatcher(ConnectionOptions options, absl::AnyInvocable<void()> on_moved,
                  absl::Duration backoff_min, absl::Duration backoff_max,
                  absl::Duration ping_interval);
  // Stop()s.
  ~SentinelWatcher();
  SentinelWatcher(const SentinelWatcher&) = delete;
  SentinelWatcher& operator=(const SentinelWatcher&) = delete;

  // Starts the thread. kInternal if the wake-up descriptor cannot be made.
  absl::Status Start();
  // True while subscribed to a Sentinel.
  bool watching() const;
  // Closes the connection and joins the thread; no on_moved call is made
  // after it returns. Idempotent.
  void Stop();

 private:
  void Run();
  // Watches the Sentinel at `sentinel` until the connection must be dropped
  // (returns why) or the watcher stops (OK).
  absl::Status Watch(const Endpoint& sentinel);
  // Reads the subscription's messages on `c` until it fails or stops.
  absl::Status Serve(redisContext* c);
  absl::Status ReadMessages(redisContext* c);
  // The primary is (now) at `to`; `announced`: a +switch-master said so.
  void Observe(const Endpoint& to, bool announced);
  // Waits up to `d` for Stop(); false if stopping.
  bool Sleep(absl::Duration d);
  bool Stopping() const;
  void SetWatching(bool watching);

  const ConnectionOptions options_;
  absl::AnyInvocable<void()> on_moved_;
  const absl::Duration backoff_min_;
  const absl::Duration backoff_max_;
  const absl::Duration ping_interval_;
  int wake_fd_ = -1;

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool watching_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<Endpoint> primary_;  // thread only: the last address seen
  bool ping_outstanding_ = false;    // thread only
  std::thread thread_;
};

}  // namespace lockd::redis

#endif  // LOCKD_BACKENDS_REDIS_SENTINEL_H_
