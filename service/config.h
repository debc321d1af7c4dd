// lockd's configuration: every option has a default, a YAML key, a flag and
// an environment variable, mapped mechanically (YAML `redis.addresses` is
// flag `--redis.addresses` and variable `LOCKD_REDIS_ADDRESSES`). Precedence:
// default < file < environment < flag.
//
// Strict: an unknown key in the file, an unknown flag or a malformed value is
// an error naming it (lockd exits with code 2). Unknown LOCKD_* variables are
// ignored, because Kubernetes injects LOCKD_SERVICE_HOST and friends for a
// Service named lockd.

#ifndef LOCKD_SERVICE_CONFIG_H_
#define LOCKD_SERVICE_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service/auth_config.h"

namespace lockd {

struct LeaseBounds {
  absl::Duration default_ttl = absl::Seconds(30);
  absl::Duration min = absl::Seconds(1);
  absl::Duration max = absl::Hours(1);
};

struct Config {
  std::string listen;
  std::string backend;
  LeaseBounds lease;
  int64_t max_waiters = 0;
  std::string log_level;
  absl::Duration shutdown_grace;

  struct Redis {
    std::string addresses;
    std::string username;
    std::string password;  // secret: never logged
    std::string password_file;
    int64_t db = 0;
    std::string key_prefix;
    int64_t pool_size = 0;
    absl::Duration connect_timeout;
    absl::Duration command_timeout;
    absl::Duration fence_retention;
  } redis;

  struct Mysql {
    std::string host;
    int64_t port = 0;
    std::string socket;
    std::string user;
    std::string password;  // secret: never logged
    std::string password_file;
    std::string database;
    std::string table_prefix;
    int64_t pool_size = 0;
    absl::Duration sweep_interval;
    absl::Duration fence_retention;
    absl::Duration fair_slice;
    absl::Duration connect_timeout;
    absl::Duration read_timeout;
    absl::Duration write_timeout;
    std::string ssl_mode;
    std::string ssl_ca;
    std::string ssl_cert;
    std::string ssl_key;
  } mysql;

  struct ZooKeeper {
    std::string hosts;
    std::string root;
    absl::Duration session_timeout;
    std::string auth_file;
    absl::Duration reap_interval;
  } zookeeper;

  // Operations and security (README "Operations and security").
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
    std::string client_auth;  // none, request, require
    absl::Duration reload_interval;
  } tls;

  struct Auth {
    std::string tokens_file;  // secret file: "TOKEN IDENTITY" per line
    absl::Duration reload_interval;
    std::vector<AuthRule> rules;  // empty: everyone may do everything
    bool owner_prefix = false;    // owners must be the identity or start with "<identity>/"
  } auth;

  struct Log {
    std::string format;  // text, json
  } log;
};

// The result of parsing a command line.
struct ParsedArgs {
  Config config;
  bool help = false;  // --help was given: print HelpText() and exit 0
};

// Parses `args` (argv without argv[0]) and `env` (NAME -> value) on top of
// the defaults; reads the YAML file named by --config (or LOCKD_CONFIG).
// Errors are kInvalidArgument naming the key, flag or variable.
absl::StatusOr<ParsedArgs> ParseConfig(const std::vector<std::string>& args,
                                       const std::map<std::string, std::string>& env);

// The defaults alone.
Config DefaultConfig();

// Every option with its default and meaning, for `lockd --help`.
std::string HelpText();

// "LOCKD_REDIS_ADDRESSES" for "redis.addresses".
std::string EnvName(const std::string& key);

// Reads a secret file (password_file options): the first line, without the
// line end. The error names the file, never its contents.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path);

}  // namespace lockd

#endif  // LOCKD_SERVICE_CONFIG_H_
