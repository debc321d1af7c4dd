#include "service/config.h"

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

absl::Status SetMetricsNamespaces(Config::Metrics& m, const std::string& v) {
  std::vector<std::string> namespaces;
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
    namespaces.emplace_back(ns);
  }
  m.namespaces = std::move(namespaces);
  return absl::OkStatus();
}

absl::Status SetAuthRules(Config::Auth& a, const std::string& v) {
  absl::StatusOr<std::vector<AuthRule>> rules = ParseAuthRules(v);
  if (!rules.ok()) return rules.status();
  a.rules = *std::move(rules);
  return absl::OkStatus();
}

}  // namespace

const OptionSet<Config>& ConfigOptions() {
  using C = Config;
  static const auto* set = [] {
    auto* s = new OptionSet<C>;
    s->String("listen", &C::listen, "gRPC listen address (host:port)");
    s->OneOf("backend", &C::backend, {"memory", "redis", "mysql", "zookeeper"},
             "lock backend: memory, redis, mysql or zookeeper");
    OptionSet<LeaseBounds> lease;
    lease.Duration("lease.default", &LeaseBounds::default_ttl,
                   "lease when a request gives no lease_ttl");
    lease.Duration("lease.min", &LeaseBounds::min, "smallest lease_ttl accepted");
    lease.Duration("lease.max", &LeaseBounds::max, "largest lease_ttl accepted");
    s->Include(&C::lease, lease);
    BindMaxWaitersKey(*s, &C::max_waiters);
    s->OneOf("log_level", &C::log_level, {"debug", "info", "warning", "error"},
             "debug, info, warning or error");
    s->Duration("shutdown_grace", &C::shutdown_grace,
                "on SIGTERM, time given to in-flight calls before they are cut");
    s->Duration("keepalive_time", &C::keepalive_time,
                "how often lockd pings a client connection that has calls (HTTP/2 keepalive)");
    s->Duration("keepalive_timeout", &C::keepalive_timeout,
                "a connection whose ping is not answered in this time is closed (its Session "
                "streams end as if the client had gone)");

    s->Include(&C::redis, RedisOptionSet());
    s->Include(&C::mysql, MysqlOptionSet());
    s->Include(&C::zookeeper, ZooKeeperOptionSet());

    OptionSet<C::Metrics> metrics;
    metrics.String("metrics.listen", &C::Metrics::listen,
                   "address of the Prometheus /metrics endpoint (empty: off)");
    metrics.Custom(
        "metrics.namespaces",
        "namespaces given their own metrics label value (others: _other), comma-separated",
        SetMetricsNamespaces, [](const C::Metrics& m) { return absl::StrJoin(m.namespaces, ","); });
    s->Include(&C::metrics, metrics);

    OptionSet<C::Health> health;
    health.String(
        "health.listen", &C::Health::listen,
        "plaintext address serving only grpc.health.v1.Health, for kubelet probes (empty: off)");
    s->Include(&C::health, health);

    OptionSet<C::Tls> tls;
    tls.String("tls.cert_file", &C::Tls::cert_file,
               "PEM server certificate chain; with tls.key_file, the gRPC port is TLS");
    tls.String("tls.key_file", &C::Tls::key_file, "PEM private key of tls.cert_file");
    tls.String("tls.client_ca_file", &C::Tls::client_ca_file,
               "PEM CA certificates that sign client certificates");
    tls.OneOf("tls.client_auth", &C::Tls::client_auth, {"none", "request", "require"},
              "client certificates: none, request (verified if sent) or require (mutual TLS)");
    tls.Duration("tls.reload_interval", &C::Tls::reload_interval,
                 "how often the TLS files are checked for changes (rotation without restart)");
    s->Include(&C::tls, tls);

    OptionSet<C::Auth> auth;
    auth.String("auth.tokens_file", &C::Auth::tokens_file,
                "file of bearer tokens, one \"TOKEN IDENTITY\" per line (re-read when it changes)");
    auth.Duration("auth.reload_interval", &C::Auth::reload_interval,
                  "how often auth.tokens_file is checked for changes");
    auth.Custom("auth.rules",
                "authorization rules: a YAML list of {identities, namespaces, permissions} "
                "(empty: everyone may do everything)",
                SetAuthRules,
                // Rules are not shown; --help shows the default, no rules.
                [](const C::Auth& a) { return a.rules.empty() ? "" : "(rules)"; });
    auth.Bool("auth.owner_prefix", &C::Auth::owner_prefix,
              "true: an owner must be the caller's identity or start with \"<identity>/\"");
    s->Include(&C::auth, auth);

    OptionSet<C::Log> log;
    log.OneOf("log.format", &C::Log::format, {"text", "json"}, "log line format: text or json");
    s->Include(&C::log, log);
    return s;
  }();
  return *set;
}

namespace {

using Option = OptionSet<Config>::Binding;

const Option* FindOption(const std::string& key) { return ConfigOptions().Find(key); }

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
  if (c.keepalive_time < absl::Milliseconds(100)) {
    return absl::InvalidArgumentError("keepalive_time: must be at least 100ms");
  }
  if (c.keepalive_timeout < absl::Milliseconds(100)) {
    return absl::InvalidArgumentError("keepalive_timeout: must be at least 100ms");
  }
  if (c.tls.cert_file.empty() != c.tls.key_file.empty()) {
    return absl::InvalidArgumentError("tls.cert_file and tls.key_file: set both or neither");
  }
  if (c.tls.client_auth != "none" && c.tls.cert_file.empty()) {
    return absl::InvalidArgumentError(
        "tls.client_auth: client certificates need TLS (tls.cert_file and "
        "tls.key_file)");
  }
  if (c.tls.client_auth != "none" && c.tls.client_ca_file.empty()) {
    return absl::InvalidArgumentError(
        "tls.client_ca_file: needed to verify client certificates "
        "(tls.client_auth is " +
        c.tls.client_auth + ")");
  }
  if (!c.tls.client_ca_file.empty() && c.tls.client_auth == "none") {
    return absl::InvalidArgumentError(
        "tls.client_auth: tls.client_ca_file is set but client_auth is none "
        "(use request or "
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

Config DefaultConfig() { return Config(); }

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
    if (arg == "--version") {
      out.version = true;
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
  for (const Option& o : ConfigOptions().bindings()) {
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
      "       lockd --version\n"
      "\n"
      "Every option below can be set in the YAML file named by --config (or\n"
      "LOCKD_CONFIG), in the environment variable shown, or as a flag; flags "
      "beat\n"
      "the environment, which beats the file. Durations look like 250ms, 30s, "
      "5m, 1h.\n"
      "An unknown key or flag, or a malformed value, is an error (exit code "
      "2).\n"
      "\n"
      "Options (default in brackets):\n";
  const Config defaults;
  for (const Option& o : ConfigOptions().bindings()) {
    absl::StrAppend(&text, "  --", o.key, " [", o.get(defaults), "]\n      ", o.help, " (env ",
                    EnvName(o.key), ")\n");
  }
  absl::StrAppend(&text,
                  "\nSignals: SIGTERM or SIGINT stops accepting calls, "
                  "answers waiting Acquire\n"
                  "calls with UNAVAILABLE, and exits 0.\n");
  return text;
}

}  // namespace lockd
