#include "service/backend_factory.h"

#include "absl/strings/str_cat.h"
#include "backends/memory/memory_backend.h"
#include "backends/mysql/mysql_backend.h"
#include "backends/redis/redis_backend.h"
#include "backends/zookeeper/zookeeper_backend.h"
#include "service/deferred_backend.h"
#include "util/log.h"

namespace lockd {
namespace {

// Starts a backend from its options as configured: applies the keys every
// backend shares and reads the secret files its keys name.
template <typename Options, typename NewBackend>
absl::StatusOr<std::unique_ptr<Backend>> Start(const Config& config, Options options,
                                               const OptionSet<Options>& keys,
                                               NewBackend new_backend) {
  options.max_waiters = config.max_waiters;
  absl::Status s = keys.Resolve(&options);
  if (!s.ok()) return s;
  return new_backend(options);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> NewBackendFromConfig(const Config& config) {
  if (config.backend == "memory") {
    return Start(config, config.memory, MemoryOptionSet(), NewMemoryBackend);
  }
  if (config.backend == "redis") {
    return Start(config, config.redis, RedisOptionSet(), NewRedisBackend);
  }
  if (config.backend == "mysql") {
    return Start(config, config.mysql, MysqlOptionSet(), NewMysqlBackend);
  }
  if (config.backend == "zookeeper") {
    return Start(config, config.zookeeper, ZooKeeperOptionSet(), NewZooKeeperBackend);
  }
  return absl::InvalidArgumentError(absl::StrCat("backend: \"", config.backend, "\" is unknown"));
}

absl::StatusOr<std::unique_ptr<Backend>> StartBackendFromConfig(const Config& config,
                                                                absl::Duration retry_interval) {
  absl::StatusOr<std::unique_ptr<Backend>> backend = NewBackendFromConfig(config);
  if (backend.ok() || backend.status().code() != absl::StatusCode::kUnavailable) return backend;
  LogWarning("backend ", config.backend, " not started: ", backend.status().message(),
             "; serving NOT_SERVING and retrying every ", absl::FormatDuration(retry_interval));
  return std::make_unique<DeferredBackend>(
      config.backend, backend.status(), [config] { return NewBackendFromConfig(config); },
      retry_interval);
}

}  // namespace lockd
