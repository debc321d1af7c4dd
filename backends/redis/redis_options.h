// The Redis backend's options and their configuration keys (redis.*).

#ifndef LOCKD_BACKENDS_REDIS_REDIS_OPTIONS_H_
#define LOCKD_BACKENDS_REDIS_REDIS_OPTIONS_H_

#include <cstddef>
#include <string>

#include "absl/time/time.h"
#include "backends/common/options.h"
#include "backends/common/shared_options.h"

namespace lockd {

// How lockd finds the Redis primary that holds a lock.
enum class RedisMode {
  kStandalone,  // one primary at `addresses` (tried in order)
  kCluster,     // a Redis Cluster; `addresses` are seed nodes
  kSentinel,    // a primary found through the Sentinels at `addresses`
};

// max_waiters, release_memory and fence_retention: shared_options.h (a fence
// key expires fence_retention after its lock's last lease; see
// redis_backend.h).
struct RedisOptions : WaiterLimit, ReleaseMemory, FenceRetention {
  RedisMode mode = RedisMode::kStandalone;
  // Comma-separated host:port ([v6addr]:port allowed). Connections use the
  // first address that accepts them; on failure the next one is tried.
  std::string addresses = "127.0.0.1:6379";
  std::string username;  // ACL user (Redis >= 6); empty: AUTH with the password alone
  std::string password;  // secret, never logged; empty: no AUTH
  // File whose first line is the password; read into `password` by
  // RedisOptionSet().Resolve() (NewRedisBackend ignores it).
  std::string password_file;
  // Sentinel mode: the master set whose primary lockd uses, and the
  // credentials of the Sentinels (empty password: no AUTH to them).
  std::string sentinel_master = "mymaster";
  std::string sentinel_username;
  // Secret, never logged.
  std::string sentinel_password;
  int db = 0;  // must be 0 in cluster mode
  // Prefix of every key and channel: 1-64 bytes of [A-Za-z0-9._:/-].
  std::string key_prefix = "lockd";
  // Command connections (per primary in cluster mode), each with its own
  // thread; commands are pipelined.
  int pool_size = 4;
  absl::Duration connect_timeout = absl::Seconds(1);
  absl::Duration command_timeout = absl::Seconds(1);
  // Reconnect backoff: doubles from min to max (with jitter).
  absl::Duration reconnect_backoff_min = absl::Milliseconds(50);
  absl::Duration reconnect_backoff_max = absl::Seconds(1);
};

// The keys that configure RedisOptions, for service/config.cc. Resolve()
// reads redis.password_file; setting it and redis.password is an error.
const OptionSet<RedisOptions>& RedisOptionSet();

}  // namespace lockd

#endif  // LOCKD_BACKENDS_REDIS_REDIS_OPTIONS_H_
