// lockd's configuration: every option has a default, a YAML key, a flag and
// an environment variable, mapped mechanically (YAML `redis.addresses` is
// flag `--redis.addresses` and variable `LOCKD_REDIS_ADDRESSES`). Precedence:
// default < file < environment < flag.
//
// Strict: an unknown key in the file, an unknown flag or a malformed value is
// an error naming it (lockd exits with code 2). Unknown LOCKD_* variables are
// ignored, because Kubernetes injects LOCKD_SERVICE_HOST and friends for a
// Service named lockd.
//
// Each key is declared once, bound to the member it sets (see
// backends/common/options.h); a member's initializer is its default.

#ifndef LOCKD_SERVICE_CONFIG_H_
#define LOCKD_SERVICE_CONFIG_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backends/common/options.h"
#include "backends/common/shared_options.h"
#include "backends/memory/memory_options.h"
#include "backends/mysql/mysql_options.h"
#include "backends/redis/redis_options.h"
#include "backends/zookeeper/zookeeper_options.h"
#include "service/auth_config.h"

namespace lockd {

struct LeaseBounds {
  absl::Duration default_ttl = absl::Seconds(30);
  absl::Duration min = absl::Seconds(1);
  absl::Duration max = absl::Hours(1);
};

// The shortest interval at which lockd accepts HTTP/2 pings from a client
// (clients' keepalive, which notices a hung lockd); faster pingers are
// disconnected by gRPC ("too_many_pings").
inline constexpr absl::Duration kMinClientPingInterval = absl::Milliseconds(500);

struct Config {
  std::string listen = "127.0.0.1:7411";
  std::string backend = "memory";
  LeaseBounds lease;
  // Applies to whichever backend runs (its options' max_waiters).
  size_t max_waiters = kDefaultMaxWaiters;
  std::string log_level = "info";
  absl::Duration shutdown_grace = absl::Seconds(5);
  // HTTP/2 keepalive: lockd pings each client connection that has calls
  // every keepalive_time and closes it when a ping is not answered within
  // keepalive_timeout, so a client that hangs or is cut off without a TCP
  // reset ends its Session streams (their holds released, or left to their
  // lease with keep_on_disconnect) instead of keeping them renewed for ever.
  // Clients may ping as often as every kMinClientPingInterval.
  absl::Duration keepalive_time = absl::Seconds(10);
  absl::Duration keepalive_timeout = absl::Seconds(5);

  // Each backend's own options, configured by the keys its
  // <name>_options.cc binds (secret files are read when the backend starts).
  MemoryOptions memory;
  RedisOptions redis;
  MysqlOptions mysql;
  ZooKeeperOptions zookeeper;

  // Operations and security (docs/operations/security.md).
  struct Metrics {
    std::string listen;                   // empty: no /metrics endpoint
    std::vector<std::string> namespaces;  // label values allowed; others are "_other"
  } metrics;

  struct Health {
    std::string listen;  // empty: health only on `listen`
  } health;

  struct Tls {
    std::string cert_file;  // both set: the gRPC port serves TLS only
    std::string key_file;
    std::string client_ca_file;
    std::string client_auth = "none";  // none, request, require
    absl::Duration reload_interval = absl::Seconds(10);
  } tls;

  struct Auth {
    std::string tokens_file;  // secret file: "TOKEN IDENTITY" per line
    absl::Duration reload_interval = absl::Seconds(5);
    std::vector<AuthRule> rules;  // empty: everyone may do everything
    bool owner_prefix = false;    // owners must be the identity or start with "<identity>/"
  } auth;

  struct Log {
    std::string format = "text";  // text, json
  } log;
};

// The result of parsing a command line.
struct ParsedArgs {
  Config config;
  bool help = false;     // --help was given: print HelpText() and exit 0
  bool version = false;  // --version was given: print VersionLine("lockd") and exit 0
};

// Parses `args` (argv without argv[0]) and `env` (NAME -> value) on top of
// the defaults; reads the YAML file named by --config (or LOCKD_CONFIG).
// Errors are kInvalidArgument naming the key, flag or variable.
absl::StatusOr<ParsedArgs> ParseConfig(const std::vector<std::string>& args,
                                       const std::map<std::string, std::string>& env);

// The defaults alone: Config's member initializers (Config{}).
Config DefaultConfig();

// Every key lockd accepts, in --help order: the service's own (config.cc),
// each backend's (backends/<name>/<name>_options.cc), then operations.
const OptionSet<Config>& ConfigOptions();

// Every option with its default and meaning, for `lockd --help`.
std::string HelpText();

// "LOCKD_REDIS_ADDRESSES" for "redis.addresses".
std::string EnvName(const std::string& key);

}  // namespace lockd

#endif  // LOCKD_SERVICE_CONFIG_H_
