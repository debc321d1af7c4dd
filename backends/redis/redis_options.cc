#include "backends/redis/redis_options.h"

namespace lockd {

const OptionSet<RedisOptions>& RedisOptionSet() {
  using O = RedisOptions;
  static const auto* set = [] {
    auto* s = new OptionSet<O>;
    s->Enum("redis.mode", &O::mode,
            {{"standalone", RedisMode::kStandalone},
             {"cluster", RedisMode::kCluster},
             {"sentinel", RedisMode::kSentinel}},
            "how lockd finds the Redis primary");
    s->String("redis.addresses", &O::addresses, "Redis server(s), comma-separated host:port");
    s->String("redis.sentinel_master", &O::sentinel_master,
              "sentinel mode: the master set's name (SENTINEL get-master-addr-by-name)");
    s->String("redis.sentinel_username", &O::sentinel_username,
              "sentinel mode: ACL user for the Sentinels");
    s->Secret("redis.sentinel_password", &O::sentinel_password,
              "sentinel mode: password for the Sentinels (prefer the environment variable)");
    s->String("redis.username", &O::username, "Redis ACL user (empty: password-only AUTH)");
    s->Password("redis.password", &O::password,
                "Redis password; prefer LOCKD_REDIS_PASSWORD or redis.password_file",
                "redis.password_file", &O::password_file,
                "file whose first line is the Redis password");
    s->Int("redis.db", &O::db, 0, 1 << 20, "Redis database number (SELECT)");
    s->String("redis.key_prefix", &O::key_prefix, "prefix of every Redis key lockd writes");
    s->Int("redis.pool_size", &O::pool_size, 1, 1024, "Redis command connections");
    s->PositiveDuration("redis.connect_timeout", &O::connect_timeout, "Redis connect timeout");
    s->PositiveDuration("redis.command_timeout", &O::command_timeout, "Redis command timeout");
    BindSharedOptions(*s, "redis");
    return s;
  }();
  return *set;
}

}  // namespace lockd
