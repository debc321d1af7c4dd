// Test support: a Redis primary, one replica and three Redis Sentinels
// (`redis-sentinel`, or `redis-server --sentinel`), all child processes on
// free loopback ports in temporary directories, for the redis backend's
// sentinel mode. The Sentinels use quorum 2 and short timeouts, so that a
// killed primary is replaced within a few seconds.
//
// Not thread-safe: each object is used by one test thread.

#ifndef LOCKD_TESTS_SUPPORT_REDIS_SENTINEL_H_
#define LOCKD_TESTS_SUPPORT_REDIS_SENTINEL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/support/process.h"
#include "tests/support/redis_server.h"

namespace lockd::testing {

class RedisSentinelGroup {
 public:
  struct Options {
    std::string master_name = "mymaster";
    // Sentinel's down-after-milliseconds: how long the primary must be
    // silent before a Sentinel sees it down.
    absl::Duration down_after = absl::Milliseconds(1000);
    // Sentinel's failover-timeout (also: the pause before a failed election
    // is retried is twice this).
    absl::Duration failover_timeout = absl::Seconds(4);
  };

  // Starts the primary, the replica (--replicaof the primary) and three
  // Sentinels monitoring the primary, and waits up to `timeout` until every
  // Sentinel names the primary, sees the replica with a working link, and
  // knows the two other Sentinels. kNotFound if redis-server or
  // redis-sentinel is missing; kUnavailable with the logs otherwise.
  static absl::StatusOr<std::unique_ptr<RedisSentinelGroup>> Start(
      Options options, absl::Duration timeout = absl::Seconds(30));
  static absl::StatusOr<std::unique_ptr<RedisSentinelGroup>> Start() { return Start(Options()); }

  // Stops every process.
  ~RedisSentinelGroup();
  RedisSentinelGroup(const RedisSentinelGroup&) = delete;
  RedisSentinelGroup& operator=(const RedisSentinelGroup&) = delete;

  const std::string& master_name() const { return options_.master_name; }
  // "127.0.0.1:<port>,..." of the three Sentinels (for redis.addresses).
  std::string sentinel_addresses() const;
  int sentinel_port(int i) const { return sentinels_[i].port; }
  // The data servers: the current primary (as last seen by Start or
  // WaitForPromotion) and the other one.
  RedisServer& primary() { return *servers_[primary_]; }
  RedisServer& replica() { return *servers_[1 - primary_]; }

  // SIGKILLs the current primary (no shutdown, clients see resets).
  void KillPrimary();
  // SIGKILLs Sentinel `i` (0..2).
  void KillSentinel(int i);
  // Asks a running Sentinel for a manual failover (SENTINEL FAILOVER),
  // retrying for up to 10 s while it finds no good replica yet.
  absl::Status Failover();
  // Waits up to `timeout` until every running Sentinel names the other data
  // server (replica()) as the primary and it answers ROLE with "master";
  // then primary() is that server. kDeadlineExceeded with the logs if not.
  absl::Status WaitForPromotion(absl::Duration timeout);

  // The primary's address according to Sentinel `i` ("" if it does not
  // answer).
  std::string PrimaryAccordingTo(int i) const;
  // Every process's log, for failure messages.
  std::string Logs() const;

 private:
  struct Sentinel {
    int port = 0;
    std::string dir;
    std::unique_ptr<Subprocess> process;
  };

  explicit RedisSentinelGroup(Options options);
  absl::Status StartSentinel(int i, const std::string& binary, bool server_binary);
  // True once Sentinel `i` names the primary, sees the replica and knows the
  // other Sentinels.
  bool SentinelReady(int i) const;

  Options options_;
  TempDir dir_;
  std::vector<std::unique_ptr<RedisServer>> servers_;  // [primary, replica] at first
  int primary_ = 0;
  std::vector<Sentinel> sentinels_;
};

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_SUPPORT_REDIS_SENTINEL_H_
