#include "service/config.h"

#include <fstream>
#include <functional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "yaml-cpp/yaml.h"

namespace lockd {
namespace {

using Setter = std::function<absl::Status(Config&, const std::string&)>;

struct Option {
  std::string key;
  std::string default_value;
  std::string help;
  Setter set;
  bool secret = false;
};

Setter String(std::string Config::*field) {
  return [field](Config& c, const std::string& v) {
    c.*field = v;
    return absl::OkStatus();
  };
}

template <typename Group>
Setter String(Group Config::*group, std::string Group::*field) {
  return [group, field](Config& c, const std::string& v) {
    (c.*group).*field = v;
    return absl::OkStatus();
  };
}

absl::Status ParseInt(const std::string& v, int64_t min, int64_t max, int64_t* out) {
  int64_t n;
  if (!absl::SimpleAtoi(v, &n) || n < min || n > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected an integer in [", min, ", ", max, "], got \"", v, "\""));
  }
  *out = n;
  return absl::OkStatus();
}

absl::Status ParseDurationValue(const std::string& v, absl::Duration* out) {
  absl::Duration d;
  if (!absl::ParseDuration(v, &d) || d < absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a duration like 250ms, 30s, 5m or 1h, got \"", v, "\""));
  }
  *out = d;
  return absl::OkStatus();
}

template <typename Group>
Setter Int(Group Config::*group, int64_t Group::*field, int64_t min, int64_t max) {
  return
      [=](Config& c, const std::string& v) { return ParseInt(v, min, max, &((c.*group).*field)); };
}

Setter Int(int64_t Config::*field, int64_t min, int64_t max) {
  return [=](Config& c, const std::string& v) { return ParseInt(v, min, max, &(c.*field)); };
}

template <typename Group>
Setter Duration(Group Config::*group, absl::Duration Group::*field) {
  return
      [=](Config& c, const std::string& v) { return ParseDurationValue(v, &((c.*group).*field)); };
}

Setter OneOf(std::string Config::*field, std::vector<std::string> allowed) {
  return [=](Config& c, const std::string& v) {
    for (const auto& a : allowed) {
      if (v == a) {
        c.*field = v;
        return absl::OkStatus();
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("expected one of ", absl::StrJoin(allowed, ", "), ", got \"", v, "\""));
  };
}

Setter Bool(bool Config::Auth::*field) {
  return [=](Config& c, const std::string& v) {
    if (v == "true") {
      c.auth.*field = true;
    } else if (v == "false") {
      c.auth.*field = false;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("expected true or false, got \"", v, "\""));
    }
    return absl::OkStatus();
  };
}

absl::Status SetMetricsNamespaces(Config& c, const std::string& v) {
  c.metrics.namespaces.clear();
  for (absl::string_view ns : absl::StrSplit(v, ',', absl::SkipWhitespace())) {
    ns = absl::StripAsciiWhitespace(ns);
    bool ok = !ns.empty() && ns.size() <= 64 &&
              ns.find_first_not_of(
                  "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                  "0123456789._-") == absl::string_view::npos;
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", ns, "\" is not a namespace (1-64 bytes of [A-Za-z0-9._-])"));
    }
    c.metrics.namespaces.emplace_back(ns);
  }
  return absl::OkStatus();
}

absl::Status SetAuthRules(Config& c, const std::string& v) {
  absl::StatusOr<std::vector<AuthRule>> rules = ParseAuthRules(v);
  if (!rules.ok()) return rules.status();
  c.auth.rules = *std::move(rules);
  return absl::OkStatus();
}

const std::vector<Option>& Options() {
  using C = Config;
  static const auto*
      options =
          new std::
              vector<Option>{
                  {"listen", "127.0.0.1:7411", "gRPC listen address (host:port)",
                   String(&C::listen)},
                  {"backend", "memory", "lock backend: memory, redis, mysql or zookeeper",
                   OneOf(&C::backend, {"memory", "redis", "mysql", "zookeeper"})},
                  {"lease.default", "30s", "lease when a request gives no lease_ttl",
                   Duration(&C::lease, &LeaseBounds::default_ttl)},
                  {"lease.min", "1s", "smallest lease_ttl accepted",
                   Duration(&C::lease, &LeaseBounds::min)},
                  {"lease.max", "1h", "largest lease_ttl accepted",
                   Duration(&C::lease, &LeaseBounds::max)},
                  {"max_waiters", "100000",
                   "waiting Acquire calls allowed at once (more: RESOURCE_EXHAUSTED)",
                   Int(&C::max_waiters, 1, 100000000)},
                  {"log_level", "info", "debug, info, warning or error",
                   OneOf(&C::log_level, {"debug", "info", "warning", "error"})},
                  {"shutdown_grace", "5s",
                   "on SIGTERM, time given to in-flight calls before they are cut",
                   [](C& c, const std::string& v) {
                     return ParseDurationValue(v, &c.shutdown_grace);
                   }},

                  {"redis.addresses", "127.0.0.1:6379",
                   "Redis server(s), comma-separated host:port",
                   String(&C::redis, &C::Redis::addresses)},
                  {"redis.username", "", "Redis ACL user (empty: password-only AUTH)",
                   String(&C::redis, &C::Redis::username)},
                  {"redis.password", "",
                   "Redis password; prefer LOCKD_REDIS_PASSWORD or redis.password_file",
                   String(&C::redis, &C::Redis::password), true},
                  {"redis.password_file", "", "file whose first line is the Redis password",
                   String(&C::redis, &C::Redis::password_file)},
                  {"redis.db", "0", "Redis database number (SELECT)",
                   Int(&C::redis, &C::Redis::db, 0, 1 << 20)},
                  {"redis.key_prefix", "lockd", "prefix of every Redis key lockd writes",
                   String(&C::redis, &C::Redis::key_prefix)},
                  {"redis.pool_size", "4", "Redis command connections",
                   Int(&C::redis, &C::Redis::pool_size, 1, 1024)},
                  {"redis.connect_timeout", "1s", "Redis connect timeout",
                   Duration(&C::redis, &C::Redis::connect_timeout)},
                  {"redis.command_timeout", "1s", "Redis command timeout",
                   Duration(&C::redis, &C::Redis::command_timeout)},
                  {"redis.fence_retention", "24h",
                   "how long a fence key outlives its lock (0: forever)",
                   Duration(&C::redis, &C::Redis::fence_retention)},

                  {"mysql.host", "127.0.0.1", "MySQL/MariaDB host",
                   String(&C::mysql, &C::Mysql::host)},
                  {"mysql.port", "3306", "MySQL/MariaDB port",
                   Int(&C::mysql, &C::Mysql::port, 0, 65535)},
                  {"mysql.socket", "", "Unix socket path (used instead of host:port when set)",
                   String(&C::mysql, &C::Mysql::socket)},
                  {"mysql.user", "lockd", "database user", String(&C::mysql, &C::Mysql::user)},
                  {"mysql.password", "",
                   "database password; prefer LOCKD_MYSQL_PASSWORD or mysql.password_file",
                   String(&C::mysql, &C::Mysql::password), true},
                  {"mysql.password_file", "", "file whose first line is the database password",
                   String(&C::mysql, &C::Mysql::password_file)},
                  {"mysql.database", "lockd", "database (schema) holding lockd's tables",
                   String(&C::mysql, &C::Mysql::database)},
                  {"mysql.table_prefix", "lockd_", "prefix of lockd's table names",
                   String(&C::mysql, &C::Mysql::table_prefix)},
                  {"mysql.pool_size", "8", "database connections",
                   Int(&C::mysql, &C::Mysql::pool_size, 1, 1024)},
                  {"mysql.sweep_interval", "1s", "how often expired lock rows are deleted",
                   Duration(&C::mysql, &C::Mysql::sweep_interval)},
                  {"mysql.fence_retention", "24h",
                   "idle time before a token counter is collected (0: never)",
                   Duration(&C::mysql, &C::Mysql::fence_retention)},
                  {"mysql.fair_slice", "200ms",
                   "time one replica may keep a contended lock (0: no turns)",
                   Duration(&C::mysql, &C::Mysql::fair_slice)},
                  {"mysql.connect_timeout", "2s", "database connect timeout",
                   Duration(&C::mysql, &C::Mysql::connect_timeout)},
                  {"mysql.read_timeout", "2s", "database read timeout",
                   Duration(&C::mysql, &C::Mysql::read_timeout)},
                  {"mysql.write_timeout", "2s", "database write timeout",
                   Duration(&C::mysql, &C::Mysql::write_timeout)},
                  {"mysql.ssl_mode", "disabled",
                   "TLS to the database: disabled, required or verify_identity",
                   [](C& c, const std::string& v) {
                     if (v != "disabled" && v != "required" && v != "verify_identity") {
                       return absl::InvalidArgumentError(absl::StrCat(
                           "expected one of disabled, required, verify_identity, got \"", v, "\""));
                     }
                     c.mysql.ssl_mode = v;
                     return absl::OkStatus();
                   }},
                  {"mysql.ssl_ca", "", "CA certificate file for TLS",
                   String(&C::mysql, &C::Mysql::ssl_ca)},
                  {"mysql.ssl_cert", "", "client certificate file for TLS",
                   String(&C::mysql, &C::Mysql::ssl_cert)},
                  {"mysql.ssl_key", "", "client key file for TLS",
                   String(&C::mysql, &C::Mysql::ssl_key)},

                  {"zookeeper.hosts", "127.0.0.1:2181",
                   "ZooKeeper connect string (host:port,host:port,...)",
                   String(&C::zookeeper, &C::ZooKeeper::hosts)},
                  {"zookeeper.root", "/lockd", "root znode of lockd's tree",
                   String(&C::zookeeper, &C::ZooKeeper::root)},
                  {"zookeeper.session_timeout", "10s", "ZooKeeper session timeout",
                   Duration(&C::zookeeper, &C::ZooKeeper::session_timeout)},
                  {"zookeeper.auth_file", "", "file holding user:password for digest auth",
                   String(&C::zookeeper, &C::ZooKeeper::auth_file)},
                  {"zookeeper.reap_interval", "1s", "how often expired leases are reaped",
                   Duration(&C::zookeeper, &C::ZooKeeper::reap_interval)},

                  {"metrics.listen", "", "address of the Prometheus /metrics endpoint (empty: off)",
                   String(&C::metrics, &C::Metrics::listen)},
                  {"metrics.namespaces", "",
                   "namespaces given their own metrics label value (others: _other), "
                   "comma-separated",
                   SetMetricsNamespaces},
                  {"health.listen", "",
                   "plaintext address serving only grpc.health.v1.Health, for kubelet probes "
                   "(empty: off)",
                   String(&C::health, &C::Health::listen)},
                  {"tls.cert_file", "",
                   "PEM server certificate chain; with tls.key_file, the gRPC port is TLS",
                   String(&C::tls, &C::Tls::cert_file)},
                  {"tls.key_file", "", "PEM private key of tls.cert_file",
                   String(&C::tls, &C::Tls::key_file)},
                  {"tls.client_ca_file", "", "PEM CA certificates that sign client certificates",
                   String(&C::tls, &C::Tls::client_ca_file)},
                  {"tls.client_auth", "none",
                   "client certificates: none, request (verified if sent) or require (mutual TLS)",
                   [](C& c, const std::string& v) {
                     if (v != "none" && v != "request" && v != "require") {
                       return absl::InvalidArgumentError(
                           absl::StrCat("expected one of none, request, require, got \"", v, "\""));
                     }
                     c.tls.client_auth = v;
                     return absl::OkStatus();
                   }},
                  {"tls.reload_interval", "10s",
                   "how often the TLS files are checked for changes (rotation without restart)",
                   Duration(&C::tls, &C::Tls::reload_interval)},
                  {"auth.tokens_file", "",
                   "file of bearer tokens, one \"TOKEN IDENTITY\" per line (re-read when it "
                   "changes)",
                   String(&C::auth, &C::Auth::tokens_file)},
                  {"auth.reload_interval", "5s",
                   "how often auth.tokens_file is checked for changes",
                   Duration(&C::auth, &C::Auth::reload_interval)},
                  {"auth.rules", "",
                   "authorization rules: a YAML list of {identities, namespaces, permissions} "
                   "(empty: everyone may do everything)",
                   SetAuthRules},
                  {"auth.owner_prefix", "false",
                   "true: an owner must be the caller's identity or start with \"<identity>/\"",
                   Bool(&C::Auth::owner_prefix)},
                  {"log.format", "text", "log line format: text or json",
                   [](C& c, const std::string& v) {
                     if (v != "text" && v != "json") {
                       return absl::InvalidArgumentError(
                           absl::StrCat("expected one of text, json, got \"", v, "\""));
                     }
                     c.log.format = v;
                     return absl::OkStatus();
                   }},
              };
  return *options;
}

const Option* FindOption(const std::string& key) {
  for (const Option& o : Options()) {
    if (o.key == key) return &o;
  }
  return nullptr;
}

absl::Status Apply(Config& c, const Option& o, const std::string& value, const std::string& where) {
  absl::Status s = o.set(c, value);
  if (s.ok()) return s;
  if (o.secret) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": malformed value (not shown)"));
  }
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", s.message()));
}

bool AllScalars(const YAML::Node& seq) {
  for (const auto& item : seq) {
    if (!item.IsScalar()) return false;
  }
  return true;
}

// Flattens a YAML map into dotted keys. Sequences become comma-separated.
absl::Status Flatten(const YAML::Node& node, const std::string& prefix,
                     std::vector<std::pair<std::string, std::string>>* out) {
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    std::string full = prefix.empty() ? key : absl::StrCat(prefix, ".", key);
    const YAML::Node& v = kv.second;
    if (v.IsMap()) {
      absl::Status s = Flatten(v, full, out);
      if (!s.ok()) return s;
    } else if (v.IsSequence() && !AllScalars(v)) {
      // Structured values (auth.rules) are handed to their setter as YAML.
      YAML::Emitter e;
      e << YAML::Flow << v;
      out->emplace_back(full, e.c_str());
    } else if (v.IsSequence()) {
      std::vector<std::string> items;
      for (const auto& item : v) items.push_back(item.as<std::string>());
      out->emplace_back(full, absl::StrJoin(items, ","));
    } else if (v.IsNull()) {
      out->emplace_back(full, "");
    } else {
      out->emplace_back(full, v.as<std::string>());
    }
  }
  return absl::OkStatus();
}

absl::Status ApplyFile(Config& c, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("config file ", path, ": ", e.what()));
  }
  if (root.IsNull()) return absl::OkStatus();
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat("config file ", path, ": expected a mapping"));
  }
  std::vector<std::pair<std::string, std::string>> entries;
  try {
    absl::Status s = Flatten(root, "", &entries);
    if (!s.ok()) return s;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("config file ", path, ": ", e.what()));
  }
  for (const auto& [key, value] : entries) {
    const Option* o = FindOption(key);
    if (o == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("config file ", path, ": unknown key \"", key, "\""));
    }
    absl::Status s = Apply(c, *o, value, absl::StrCat("config file ", path, ": key \"", key, "\""));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Check(const Config& c) {
  if (c.lease.min <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("lease.min: must be positive");
  }
  if (c.lease.max < c.lease.min) {
    return absl::InvalidArgumentError("lease.max: must not be smaller than lease.min");
  }
  if (c.lease.default_ttl < c.lease.min || c.lease.default_ttl > c.lease.max) {
    return absl::InvalidArgumentError("lease.default: must be within [lease.min, lease.max]");
  }
  if (c.listen.empty()) return absl::InvalidArgumentError("listen: must not be empty");
  if (c.tls.cert_file.empty() != c.tls.key_file.empty()) {
    return absl::InvalidArgumentError("tls.cert_file and tls.key_file: set both or neither");
  }
  if (c.tls.client_auth != "none" && c.tls.cert_file.empty()) {
    return absl::InvalidArgumentError(
        "tls.client_auth: client certificates need TLS (tls.cert_file and tls.key_file)");
  }
  if (c.tls.client_auth != "none" && c.tls.client_ca_file.empty()) {
    return absl::InvalidArgumentError(
        "tls.client_ca_file: needed to verify client certificates (tls.client_auth is " +
        c.tls.client_auth + ")");
  }
  if (!c.tls.client_ca_file.empty() && c.tls.client_auth == "none") {
    return absl::InvalidArgumentError(
        "tls.client_auth: tls.client_ca_file is set but client_auth is none (use request or "
        "require)");
  }
  if (c.tls.reload_interval < absl::Seconds(1)) {
    return absl::InvalidArgumentError("tls.reload_interval: must be at least 1s");
  }
  if (c.auth.reload_interval < absl::Milliseconds(100)) {
    return absl::InvalidArgumentError("auth.reload_interval: must be at least 100ms");
  }
  return absl::OkStatus();
}

}  // namespace

std::string EnvName(const std::string& key) {
  return absl::StrCat("LOCKD_", absl::AsciiStrToUpper(absl::StrReplaceAll(key, {{".", "_"}})));
}

Config DefaultConfig() {
  Config c;
  for (const Option& o : Options()) {
    absl::Status s = o.set(c, o.default_value);
    (void)s;  // defaults are valid by construction (config_test checks it)
  }
  return c;
}

absl::StatusOr<ParsedArgs> ParseConfig(const std::vector<std::string>& args,
                                       const std::map<std::string, std::string>& env) {
  ParsedArgs out;
  out.config = DefaultConfig();

  // Flags are split first so that --config is known before the file is read,
  // and applied last so that they win.
  std::string config_file;
  if (auto it = env.find("LOCKD_CONFIG"); it != env.end()) config_file = it->second;
  std::vector<std::pair<const Option*, std::string>> flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      out.help = true;
      return out;
    }
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument \"", arg, "\""));
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (name != "config" && FindOption(name) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag \"--", name, "\""));
    }
    if (!has_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("flag \"--", name, "\" needs a value"));
      }
      value = args[++i];
    }
    if (name == "config") {
      config_file = value;
    } else {
      flags.emplace_back(FindOption(name), value);
    }
  }

  if (!config_file.empty()) {
    absl::Status s = ApplyFile(out.config, config_file);
    if (!s.ok()) return s;
  }
  for (const Option& o : Options()) {
    auto it = env.find(EnvName(o.key));
    if (it == env.end()) continue;
    absl::Status s =
        Apply(out.config, o, it->second, absl::StrCat("environment variable ", EnvName(o.key)));
    if (!s.ok()) return s;
  }
  for (const auto& [o, value] : flags) {
    absl::Status s = Apply(out.config, *o, value, absl::StrCat("flag --", o->key));
    if (!s.ok()) return s;
  }
  absl::Status s = Check(out.config);
  if (!s.ok()) return s;
  return out;
}

std::string HelpText() {
  std::string text =
      "lockd: a distributed lock service (gRPC lockd.v1.LockService).\n"
      "\n"
      "Usage: lockd [--config FILE] [--KEY=VALUE | --KEY VALUE]...\n"
      "\n"
      "Every option below can be set in the YAML file named by --config (or\n"
      "LOCKD_CONFIG), in the environment variable shown, or as a flag; flags beat\n"
      "the environment, which beats the file. Durations look like 250ms, 30s, 5m, 1h.\n"
      "An unknown key or flag, or a malformed value, is an error (exit code 2).\n"
      "\n"
      "Options (default in brackets):\n";
  for (const Option& o : Options()) {
    absl::StrAppend(&text, "  --", o.key, " [", o.default_value, "]\n      ", o.help, " (env ",
                    EnvName(o.key), ")\n");
  }
  absl::StrAppend(&text,
                  "\nSignals: SIGTERM or SIGINT stops accepting calls, answers waiting Acquire\n"
                  "calls with UNAVAILABLE, and exits 0.\n");
  return text;
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read secret file ", path));
  }
  std::string line;
  std::getline(in, line);
  absl::StripTrailingAsciiWhitespace(&line);
  return line;
}

}  // namespace lockd
