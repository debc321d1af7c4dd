#include "service/backend_factory.h"

#include "absl/strings/str_cat.h"
#include "backends/memory/memory_backend.h"
#include "backends/mysql/mysql_backend.h"
#include "backends/redis/redis_backend.h"
#include "backends/zookeeper/zookeeper_backend.h"

namespace lockd {

absl::StatusOr<std::unique_ptr<Backend>> NewBackendFromConfig(const Config& config) {
  if (config.backend == "memory") {
    MemoryOptions o;
    o.max_waiters = static_cast<size_t>(config.max_waiters);
    return NewMemoryBackend(o);
  }
  if (config.backend == "zookeeper") {
    ZooKeeperOptions o;
    o.hosts = config.zookeeper.hosts;
    o.root = config.zookeeper.root;
    o.session_timeout = config.zookeeper.session_timeout;
    o.reap_interval = config.zookeeper.reap_interval;
    o.max_waiters = static_cast<size_t>(config.max_waiters);
    if (!config.zookeeper.auth_file.empty()) {
      absl::StatusOr<std::string> digest = ReadSecretFile(config.zookeeper.auth_file);
      if (!digest.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("zookeeper.auth_file: ", digest.status().message()));
      }
      if (digest->find(':') == std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat(
            "zookeeper.auth_file: ", config.zookeeper.auth_file, " must hold user:password"));
      }
      o.digest = *std::move(digest);
    }
    return NewZooKeeperBackend(o);
  }
  if (config.backend == "mysql") {
    const Config::Mysql& c = config.mysql;
    MysqlOptions o;
    o.host = c.host;
    o.port = static_cast<int>(c.port);
    o.socket = c.socket;
    o.user = c.user;
    o.password = c.password;
    if (!c.password_file.empty()) {
      absl::StatusOr<std::string> secret = ReadSecretFile(c.password_file);
      if (!secret.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("mysql.password_file: ", secret.status().message()));
      }
      o.password = *std::move(secret);
    }
    o.database = c.database;
    o.table_prefix = c.table_prefix;
    o.pool_size = static_cast<size_t>(c.pool_size);
    o.sweep_interval = c.sweep_interval;
    o.fence_retention = c.fence_retention;
    o.fair_slice = c.fair_slice;
    o.connect_timeout = c.connect_timeout;
    o.read_timeout = c.read_timeout;
    o.write_timeout = c.write_timeout;
    o.ssl_mode = c.ssl_mode == "required"          ? MysqlSslMode::kRequired
                 : c.ssl_mode == "verify_identity" ? MysqlSslMode::kVerifyIdentity
                                                   : MysqlSslMode::kDisabled;
    o.ssl_ca = c.ssl_ca;
    o.ssl_cert = c.ssl_cert;
    o.ssl_key = c.ssl_key;
    o.max_waiters = static_cast<size_t>(config.max_waiters);
    return NewMysqlBackend(o);
  }
  if (config.backend == "redis") {
    const Config::Redis& c = config.redis;
    RedisOptions o;
    o.addresses = c.addresses;
    o.username = c.username;
    o.password = c.password;
    if (!c.password_file.empty()) {
      if (!c.password.empty()) {
        return absl::InvalidArgumentError(
            "redis.password_file: redis.password is set too; use one of them");
      }
      absl::StatusOr<std::string> secret = ReadSecretFile(c.password_file);
      if (!secret.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("redis.password_file: ", secret.status().message()));
      }
      o.password = *std::move(secret);
    }
    o.db = static_cast<int>(c.db);
    o.key_prefix = c.key_prefix;
    o.pool_size = static_cast<int>(c.pool_size);
    o.connect_timeout = c.connect_timeout;
    o.command_timeout = c.command_timeout;
    o.fence_retention = c.fence_retention;
    o.max_waiters = static_cast<size_t>(config.max_waiters);
    return NewRedisBackend(o);
  }
  return absl::InvalidArgumentError(absl::StrCat("backend: \"", config.backend, "\" is unknown"));
}

}  // namespace lockd
