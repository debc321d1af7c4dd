// Argument parsing and help text of lockctl.

#include <algorithm>
#include <csignal>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "tools/lockctl/lockctl.h"

namespace lockd::lockctl {
namespace {

const CommandSpec* FindCommand(absl::string_view name) {
  for (const CommandSpec& c : CommandTable()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

bool CommandTakes(absl::string_view command, absl::string_view flag) {
  const CommandSpec* c = FindCommand(command);
  return c != nullptr && std::find(c->flags.begin(), c->flags.end(), flag) != c->flags.end();
}

bool IsGlobalFlag(absl::string_view flag) {
  const std::vector<std::string>& global = GlobalFlags();
  return std::find(global.begin(), global.end(), flag) != global.end();
}

absl::Status UsageError(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}

}  // namespace

const std::vector<CommandSpec>& CommandTable() {
  static const auto* const kCommands = new std::vector<CommandSpec>{
      {"acquire",
       "take a lock and leave it held for its lease",
       {"name", "owner", "ttl", "wait", "shared", "limit", "permits"}},
      {"release",
       "give up a hold (by owner)",
       {"name", "owner", "acquire-request-id", "fencing-token"}},
      {"renew", "extend a hold's lease (by owner)", {"name", "owner", "ttl", "fencing-token"}},
      {"describe", "show one lock's state", {"name"}},
      {"list", "list held locks by name prefix", {"prefix", "limit"}},
      {"run",
       "hold a lock while a command runs (distributed flock)",
       {"name", "lock", "owner", "ttl", "wait", "shared", "limit", "permits", "signal",
        "kill-after", "unary"}},
      {"force-release",
       "free a lock whatever its owner (operators; audited)",
       {"name", "reason", "token"}},
      {"health", "check that lockd serves (gRPC health check; for probes)", {"service"}},
      {"completion", "print a bash or zsh completion script", {}},
      {"verify",
       "check that a deployment keeps its locks (workers, a referee, a checker)",
       {"duration", "workers", "workload", "nemesis", "nemesis-interval", "api", "ttl", "wait",
        "hold", "rate", "history", "check", "force", "seed"}},
  };
  return *kCommands;
}

const std::vector<std::string>& GlobalFlags() {
  static const auto* const kGlobal = new std::vector<std::string>{
      "server",   "namespace", "output",          "timeout",         "tls",  "tls-ca",
      "tls-cert", "tls-key",   "tls-server-name", "auth-token-file", "help", "version"};
  return *kGlobal;
}

bool IsBoolFlag(absl::string_view flag) {
  return flag == "tls" || flag == "help" || flag == "unary" || flag == "version" ||
         flag == "shared" || flag == "force";
}

absl::StatusOr<absl::Duration> ParseDurationFlag(absl::string_view flag, absl::string_view text) {
  absl::Duration d;
  int64_t seconds;
  if (absl::SimpleAtoi(text, &seconds)) {
    d = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(text, &d) || d == absl::InfiniteDuration()) {
    return UsageError(absl::StrCat("--", flag, ": \"", text,
                                   "\" is not a duration (examples: 30s, 10m, 1h30m, 250ms)"));
  }
  if (d < absl::ZeroDuration())
    return UsageError(absl::StrCat("--", flag, " must not be negative"));
  return d;
}

absl::StatusOr<int> ParseSignal(absl::string_view text) {
  int n;
  if (absl::SimpleAtoi(text, &n)) {
    if (n > 0 && n < NSIG) return n;
    return UsageError(absl::StrCat("--signal: ", text, " is not a signal number"));
  }
  std::string upper = absl::AsciiStrToUpper(text);
  absl::string_view name = upper;
  absl::ConsumePrefix(&name, "SIG");
  static const auto* const kSignals = new std::map<std::string, int>{
      {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"ALRM", SIGALRM},
  };
  auto it = kSignals->find(std::string(name));
  if (it == kSignals->end()) {
    return UsageError(
        absl::StrCat("--signal: unknown signal \"", text,
                     "\" (use TERM, INT, HUP, QUIT, KILL, USR1, USR2, ALRM or a number)"));
  }
  return it->second;
}

absl::StatusOr<Invocation> ParseArgs(const std::vector<std::string>& args,
                                     const std::map<std::string, std::string>& env) {
  Invocation inv;
  auto env_or = [&](const char* key, const char* fallback) {
    auto it = env.find(key);
    return it != env.end() && !it->second.empty() ? it->second : std::string(fallback);
  };
  inv.server = env_or("LOCKD_SERVER", "127.0.0.1:7411");
  inv.ns = env_or("LOCKD_NAMESPACE", "");
  inv.auth.bearer_token = env_or("LOCKD_AUTH_TOKEN", "");
  inv.auth.bearer_token_file = env_or("LOCKD_AUTH_TOKEN_FILE", "");

  std::vector<std::pair<std::string, std::string>> flags;  // in order
  std::vector<std::string> positional;
  bool saw_dashdash = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      saw_dashdash = true;
      inv.argv.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (a == "-h") {
      flags.emplace_back("help", "true");
      continue;
    }
    if (absl::StartsWith(a, "--")) {
      std::string flag = a.substr(2);
      std::string value;
      size_t eq = flag.find('=');
      bool has_value = eq != std::string::npos;
      if (has_value) {
        value = flag.substr(eq + 1);
        flag.resize(eq);
      }
      if (IsBoolFlag(flag)) {
        if (!has_value) value = "true";
        if (value != "true" && value != "false") {
          return UsageError(absl::StrCat("--", flag, " takes no value (or =true / =false)"));
        }
      } else if (!has_value) {
        if (i + 1 >= args.size()) return UsageError(absl::StrCat("--", flag, " needs a value"));
        value = args[++i];
      }
      flags.emplace_back(flag, value);
      continue;
    }
    if (absl::StartsWith(a, "-") && a.size() > 1) {
      return UsageError(absl::StrCat("unknown option \"", a, "\""));
    }
    positional.push_back(a);
  }

  bool help = false;
  for (const auto& [flag, value] : flags) {
    if (flag == "help") help = value == "true";
    if (flag == "version" && value == "true") inv.version = true;
  }
  if (inv.version && !help) return inv;
  if (!positional.empty() && positional[0] == "help") {
    inv.help = true;
    inv.command = positional.size() > 1 ? positional[1] : "";
    return inv;
  }
  if (positional.empty()) {
    if (help) {
      inv.help = true;
      return inv;
    }
    return UsageError("no command given");
  }
  inv.command = positional[0];
  if (FindCommand(inv.command) == nullptr) {
    return UsageError(absl::StrCat("unknown command \"", inv.command, "\""));
  }
  if (help) {
    inv.help = true;
    return inv;
  }
  if (inv.command == "completion") {
    if (positional.size() != 2 || (positional[1] != "bash" && positional[1] != "zsh")) {
      return UsageError("\"completion\" needs the shell: lockctl completion bash|zsh");
    }
    inv.shell = positional[1];
    positional.pop_back();
  }
  if (positional.size() > 1) {
    return UsageError(absl::StrCat("unexpected argument \"", positional[1], "\"",
                                   inv.command == "run" ? " (put the command after --)" : ""));
  }

  bool ttl_set = false, wait_set = false, ns_set = false;
  for (const auto& [flag, value] : flags) {
    if (!IsGlobalFlag(flag) && !CommandTakes(inv.command, flag)) {
      return UsageError(absl::StrCat("unknown flag --", flag, " for \"", inv.command, "\""));
    }
    if (flag == "server") {
      if (value.empty()) return UsageError("--server must not be empty");
      inv.server = value;
    } else if (flag == "namespace") {
      inv.ns = value;
      ns_set = true;
    } else if (flag == "output") {
      if (value == "text") {
        inv.output = Output::kText;
      } else if (value == "json") {
        inv.output = Output::kJson;
      } else {
        return UsageError(absl::StrCat("--output must be text or json, not \"", value, "\""));
      }
    } else if (flag == "timeout") {
      absl::StatusOr<absl::Duration> d = ParseDurationFlag(flag, value);
      if (!d.ok()) return d.status();
      if (*d <= absl::ZeroDuration()) return UsageError("--timeout must be positive");
      inv.timeout = *d;
    } else if (flag == "tls") {
      inv.tls.enabled = value == "true";
    } else if (flag == "unary") {
      inv.unary = value == "true";
    } else if (flag == "shared") {
      inv.shared = value == "true";
    } else if (flag == "lock") {
      if (value.empty()) return UsageError("--lock must not be empty");
      inv.locks.push_back(value);
    } else if (flag == "permits") {
      if (!absl::SimpleAtoi(value, &inv.permits) || inv.permits < 1 ||
          inv.permits > kMaxSemaphoreLimit) {
        return UsageError(absl::StrCat("--permits must be an integer from 1 to ",
                                       kMaxSemaphoreLimit, ", not \"", value, "\""));
      }
    } else if (flag == "tls-ca") {
      inv.tls.ca_file = value;
      inv.tls.enabled = true;
    } else if (flag == "tls-cert") {
      inv.tls.cert_file = value;
      inv.tls.enabled = true;
    } else if (flag == "tls-key") {
      inv.tls.key_file = value;
      inv.tls.enabled = true;
    } else if (flag == "tls-server-name") {
      inv.tls.server_name = value;
      inv.tls.enabled = true;
    } else if (flag == "auth-token-file") {
      if (value.empty()) return UsageError("--auth-token-file must not be empty");
      inv.auth.bearer_token_file = value;
      inv.auth.bearer_token.clear();  // the flag beats $LOCKD_AUTH_TOKEN
    } else if (flag == "service") {
      inv.service = value;
    } else if (flag == "reason") {
      inv.reason = value;
    } else if (flag == "token") {
      if (!absl::SimpleAtoi(value, &inv.fencing_token)) {
        return UsageError(absl::StrCat(
            "--token must be a fencing token (a non-negative integer), not \"", value, "\""));
      }
    } else if (flag == "fencing-token") {
      if (!absl::SimpleAtoi(value, &inv.fencing_token) || inv.fencing_token == 0) {
        return UsageError(absl::StrCat(
            "--fencing-token must be a fencing token (a positive integer, as `lockctl acquire` "
            "prints it), not \"",
            value, "\""));
      }
    } else if (flag == "name") {
      inv.name = value;
    } else if (flag == "owner") {
      inv.owner = value;
    } else if (flag == "acquire-request-id") {
      if (value.empty()) return UsageError("--acquire-request-id must not be empty");
      inv.acquire_request_id = value;
    } else if (flag == "ttl" || flag == "wait" || flag == "kill-after") {
      absl::StatusOr<absl::Duration> d = ParseDurationFlag(flag, value);
      if (!d.ok()) return d.status();
      if (flag == "ttl") {
        if (*d <= absl::ZeroDuration()) return UsageError("--ttl must be positive");
        inv.ttl = *d;
        ttl_set = true;
      } else if (flag == "wait") {
        inv.wait = *d;
        wait_set = true;
      } else {
        inv.kill_after = *d;
      }
    } else if (flag == "prefix") {
      inv.prefix = value;
    } else if (flag == "limit" && inv.command != "list") {
      if (!absl::SimpleAtoi(value, &inv.semaphore_limit) || inv.semaphore_limit < 1 ||
          inv.semaphore_limit > kMaxSemaphoreLimit) {
        return UsageError(
            absl::StrCat("--limit (a semaphore's permits) must be an integer from 1 "
                         "to ",
                         kMaxSemaphoreLimit, ", not \"", value, "\""));
      }
    } else if (flag == "limit") {
      if (!absl::SimpleAtoi(value, &inv.limit) || inv.limit < 0) {
        return UsageError(
            absl::StrCat("--limit must be a non-negative integer, not \"", value, "\""));
      }
    } else if (flag == "signal") {
      absl::StatusOr<int> sig = ParseSignal(value);
      if (!sig.ok()) return sig.status();
      inv.signal = *sig;
    } else {
      absl::Status s = ParseVerifyFlag(flag, value, inv.verify, inv.verify_check_file);
      if (!s.ok()) return s;
    }
  }
  if (inv.command == "verify") {
    absl::Status s = FinishVerifyFlags(inv, ttl_set, wait_set, ns_set);
    if (!s.ok()) return s;
  }
  // renew without --ttl asks for the server's default lease.
  if (inv.command == "renew" && !ttl_set) inv.ttl = absl::ZeroDuration();

  if (inv.command == "run" && !inv.locks.empty()) {
    if (!inv.name.empty()) return UsageError("\"run\" takes --name or --lock, not both");
  } else if (CommandTakes(inv.command, "name") && inv.name.empty()) {
    return UsageError(absl::StrCat("\"", inv.command, "\" needs --name",
                                   inv.command == "run" ? " (or --lock)" : ""));
  }
  if (inv.shared && inv.semaphore_limit > 0) {
    return UsageError("--shared is for a lock, --limit for a semaphore: not both");
  }
  if (inv.permits > 0 && inv.semaphore_limit == 0) {
    return UsageError("--permits needs --limit (the semaphore's)");
  }
  if (inv.permits > inv.semaphore_limit) {
    return UsageError(
        absl::StrCat("--permits must be at most --limit (", inv.semaphore_limit, ")"));
  }
  if ((inv.command == "release" || inv.command == "renew") && inv.owner.empty()) {
    return UsageError(absl::StrCat("\"", inv.command,
                                   "\" needs --owner (the owner printed by `lockctl acquire`)"));
  }
  if (inv.command == "force-release" && inv.reason.empty()) {
    return UsageError("\"force-release\" needs --reason (it goes to lockd's audit log)");
  }
  if (inv.command == "run") {
    if (!saw_dashdash || inv.argv.empty()) {
      return UsageError(
          "\"run\" needs a command after --, e.g. lockctl run --name job -- ./job.sh");
    }
  } else if (saw_dashdash) {
    return UsageError(absl::StrCat("\"", inv.command, "\" takes no command after --"));
  }
  return inv;
}

std::string Usage(absl::string_view command) {
  const std::string connection = R"(
Connection flags (any command):
  --server ADDR           lockd address [$LOCKD_SERVER, else 127.0.0.1:7411]; several
                          replicas: host1:port,host2:port (calls go to any live one)
                          or a gRPC target such as dns:///lockd-headless:7411
  --namespace NS          lock namespace [$LOCKD_NAMESPACE, else the server's "default"]
  --output text|json      result format [text]; json: one line of proto3 JSON, the
                          RPC's response message as grpcurl prints it (field
                          names in lowerCamelCase, 64-bit integers as strings,
                          durations as "29.950s", default values included)
  --timeout DUR           deadline of each call to lockd, retries included [10s]
  --tls                   use TLS (implied by any --tls-* flag)
  --tls-ca FILE           PEM roots that sign the server certificate [system roots]
  --tls-cert FILE         PEM client certificate (mutual TLS; with --tls-key)
  --tls-key FILE          PEM client private key
  --tls-server-name NAME  name to verify in the server certificate [the host in --server]
  --auth-token-file FILE  file holding a bearer token sent with every call
                          [$LOCKD_AUTH_TOKEN_FILE; or the token itself in $LOCKD_AUTH_TOKEN]
  --version               print lockctl's version and exit
Durations look like 250ms, 30s, 10m, 1h30m; a bare number is seconds.
)";
  const std::string exit_codes = R"(
Exit codes:
  0    success (run: the command exited 0)
  1    other error (e.g. the server rejected an argument)
  64   usage error
  69   lockd unavailable (unreachable, or no answer within --timeout)
  75   not acquired: the lock stayed held by another owner for --wait
  76   lock lost: run's lease was lost while the command ran (the command got
       --signal); release/renew: the owner does not hold the lock
  77   not allowed: lockd refused the credential or the permission
  run only: otherwise the command's own exit status, 128+N if it died of
  signal N, 126 if it could not be executed, 127 if it was not found.
)";
  const std::string kinds = R"(
Kinds (acquire, run; docs/api.md "Shared locks, semaphores and all-or-nothing acquires"):
  [none]                 an exclusive lock (a mutex, a writer)
  --shared               a shared hold of a read-write lock (a reader): with other
                         readers, never with a writer; FIFO, so readers queue behind
                         a waiting writer
  --limit N              a semaphore of N permits (1-10000): holders' permits add up
                         to at most N; every user of the name must give the same N
  --permits K            with --limit: the permits to take [1]
  A name is held as one kind at a time: another kind (or limit) fails at once,
  exit 1, with lockd's reason (LOCK_KIND_MISMATCH).
)";
  if (command == "acquire") {
    return "Usage: lockctl acquire --name NAME [--owner OWNER] [--ttl DUR] [--wait DUR]\n"
           "                       [--shared | --limit N [--permits K]]\n"
           "\n"
           "Takes the lock and leaves it held (no renewal) for --ttl, or until\n"
           "`lockctl release --name NAME --owner OWNER --fencing-token T`. Prints the owner\n"
           "(a random one unless --owner is given) and the fencing token T.\n"
           "If no answer comes within --timeout (plus --wait), the attempt is undone before\n"
           "lockctl exits 69, so it leaves no hold. If even the undo gets no answer, lockctl\n"
           "prints `acquired: unknown`, the owner and the attempt's acquire_request_id:\n"
           "the hold, if any, ends with --ttl, or now with `lockctl release --name NAME\n"
           "--owner OWNER --acquire-request-id ID`.\n"
           "JSON: the lockd.v1.AcquireResponse (not acquired: \"acquired\": false and the\n"
           "holder in \"current\"); outcome unknown: the lockd.v1.ReleaseRequest that undoes\n"
           "the attempt (namespace, name, owner, acquireRequestId).\n"
           "  --name NAME     lock name (required)\n"
           "  --owner OWNER   holder id [random]; acquiring again with the same owner is "
           "reentrant\n"
           "  --ttl DUR       lease [30s]\n"
           "  --wait DUR      wait this long for a held lock [0: try once]\n" +
           kinds + connection + exit_codes;
  }
  if (command == "release") {
    return "Usage: lockctl release --name NAME --owner OWNER [--fencing-token T]\n"
           "                       [--acquire-request-id ID]\n"
           "\n"
           "Gives up one hold of OWNER (retried safely with one request id). Prints whether\n"
           "the lock is now free and the holds that remain. Exit 76 if OWNER does not hold it.\n"
           "  --fencing-token T        only the hold with this token (printed by `acquire`):\n"
           "                           if OWNER released and acquired the lock again since,\n"
           "                           its new hold is left alone (exit 76) [any hold of OWNER]\n"
           "  --acquire-request-id ID  instead, undo OWNER's acquire with this request id\n"
           "                           (printed by an `acquire` whose outcome stayed unknown):\n"
           "                           its hold, if it added one and nothing came after it,\n"
           "                           is given back; otherwise nothing changes (exit 0).\n"
           "JSON: the lockd.v1.ReleaseResponse.\n" +
           connection + exit_codes;
  }
  if (command == "renew") {
    return "Usage: lockctl renew --name NAME --owner OWNER [--ttl DUR] [--fencing-token T]\n"
           "\n"
           "Resets the lease of OWNER's hold to --ttl from now [server default]. Exit 76 if\n"
           "OWNER does not hold the lock (the lease was lost).\n"
           "  --fencing-token T  only the hold with this token (printed by `acquire`); a\n"
           "                     newer hold of OWNER is left alone (exit 76) [any hold]\n"
           "JSON: the lockd.v1.RenewResponse.\n" +
           connection + exit_codes;
  }
  if (command == "describe") {
    return "Usage: lockctl describe --name NAME\n"
           "\n"
           "Prints the lock's state: held, owner, hold count, fencing token, time left on\n"
           "the lease, waiters, backend, mode (exclusive or shared), a semaphore's limit,\n"
           "and one line per holder (owner, mode, hold count, permits, fencing token, time\n"
           "left), oldest first. A free lock is not an error.\n"
           "JSON: the lockd.v1.LockInfo.\n" +
           connection + exit_codes;
  }
  if (command == "list") {
    return "Usage: lockctl list [--prefix PREFIX] [--limit N]\n"
           "\n"
           "Lists held locks of the namespace whose name starts with PREFIX, by name.\n"
           "  --prefix PREFIX  name prefix [all]\n"
           "  --limit N        at most N locks [0: all]\n"
           "JSON: one lockd.v1.ListResponse whose \"locks\" holds every lock listed (all\n"
           "pages, up to --limit; no nextPageToken).\n" +
           connection + exit_codes;
  }
  if (command == "force-release") {
    return "Usage: lockctl force-release --name NAME --reason TEXT [--token T]\n"
           "\n"
           "Operators only (the admin permission): frees the lock whatever its owner and\n"
           "hold count, e.g. one held by a job that died with a long lease. The next grant\n"
           "gets a larger fencing token; the former holder's release/renew fail (exit 76).\n"
           "Prints whether a hold was freed and who held it. Never retried.\n"
           "  --name NAME     lock name (required)\n"
           "  --reason TEXT   why, for lockd's audit log (required)\n"
           "  --token T       free it only if the holder's fencing token is T (exit 1 if not)\n"
           "JSON: the lockd.v1.ForceReleaseResponse.\n" +
           connection + exit_codes;
  }
  if (command == "run") {
    return "Usage: lockctl run (--name NAME | --lock NAME [--lock NAME]...) [--ttl DUR]\n"
           "                   [--wait DUR] [--owner OWNER] [--shared | --limit N [--permits K]]\n"
           "                   [--signal SIG] [--kill-after DUR] [--unary] -- COMMAND [ARG]...\n"
           "\n"
           "The distributed flock(1): takes the lock (waiting up to --wait), runs COMMAND\n"
           "while holding it, and releases it when COMMAND ends. Two `lockctl run` with\n"
           "the same name never run their commands at the same time, on any machines\n"
           "that share the lockd server. The lock is held over a session stream: lockd\n"
           "renews it, and if lockctl dies (even by SIGKILL) or loses its connection, the\n"
           "lock is freed at once. If the lockd replica dies, lockctl reconnects and takes\n"
           "the lock back within the lease.\n"
           "\n"
           "  --name NAME       lock name (required, unless --lock)\n"
           "  --lock NAME       instead of --name, repeatable: take every lock given, all\n"
           "                    or nothing (one AcquireAll: two runs that list the same\n"
           "                    locks in opposite orders never deadlock); each gets the kind\n"
           "                    of --shared / --limit\n"
           "  --ttl DUR         lease [30s]; how long the lock outlives its lockd replica\n"
           "                    (with --unary: how long it outlives lockctl)\n"
           "  --wait DUR        wait this long for the lock [0: give up at once, exit 75]\n"
           "  --owner OWNER     holder id [random]\n"
           "  --signal SIG      sent to COMMAND if the lock is lost [TERM]\n"
           "  --kill-after DUR  then SIGKILL if COMMAND is still running [10s; 0: never]\n"
           "  --unary           no session: unary Acquire/Release, lockctl renews every\n"
           "                    ttl/3; a lockctl that dies holds the lock until --ttl ends\n"
           "\n"
           "COMMAND runs in its own process group (the terminal's foreground group when\n"
           "lockctl runs in the foreground of one); signals are sent to the whole group.\n"
           "SIGINT, SIGTERM, SIGHUP and SIGQUIT received by lockctl are forwarded to it.\n"
           "If lockctl itself dies, COMMAND receives --signal. COMMAND sees\n"
           "LOCKD_LOCK_NAME, LOCKD_LOCK_OWNER and LOCKD_FENCING_TOKEN in its environment\n"
           "(with --lock: the names and their tokens, comma-separated, in --lock order).\n"
           "Exit status: COMMAND's, or 76 if a lock was lost (see below).\n"
           "It prints nothing of its own on stdout (--output does not apply).\n" +
           kinds + connection + exit_codes;
  }
  if (command == "health") {
    return "Usage: lockctl health [--service NAME]\n"
           "\n"
           "One gRPC health check (grpc.health.v1.Health/Check) of lockd: prints the status\n"
           "(SERVING, NOT_SERVING, ...) and exits 0 only for SERVING, 1 for any other\n"
           "status or an unknown service, 69 if lockd does not answer within --timeout.\n"
           "For an image HEALTHCHECK or a Kubernetes exec probe:\n"
           "  lockctl health --timeout 2s                                  (liveness)\n"
           "  lockctl health --service lockd.v1.LockService --timeout 2s   (readiness)\n"
           "  --service NAME  the service asked about [\"\": the server as a whole];\n"
           "                  lockd.v1.LockService is SERVING only while its backend is up\n"
           "JSON: the grpc.health.v1.HealthCheckResponse.\n" +
           connection + exit_codes;
  }
  if (command == "verify") return VerifyUsage() + connection;
  if (command == "completion") {
    return "Usage: lockctl completion bash|zsh\n"
           "\n"
           "Prints a completion script of lockctl's commands and flags for the shell:\n"
           "  bash: source <(lockctl completion bash)   (or save it in\n"
           "        /etc/bash_completion.d/lockctl)\n"
           "  zsh:  source <(lockctl completion zsh)    (in ~/.zshrc, after compinit)\n";
  }
  std::string commands = "Commands:\n";
  for (const CommandSpec& c : CommandTable()) {
    absl::StrAppend(&commands, absl::StrFormat("  %-14s %s\n", c.name, c.summary));
  }
  return "lockctl: command-line client of lockd, the distributed lock service.\n"
         "\n"
         "Usage: lockctl [FLAGS] COMMAND [FLAGS] [-- COMMAND-TO-RUN...]\n"
         "\n" +
         commands +
         "\n"
         "Example:\n"
         "  lockctl run --name nightly-report --ttl 30s --wait 10m -- ./report.sh\n"
         "\n"
         "`lockctl help COMMAND` or `lockctl COMMAND --help` describes a command.\n" +
         connection + exit_codes;
}

int ExitCodeFor(const absl::Status& status, bool acquiring) {
  if (status.ok()) return kExitOk;
  if (IsLockLost(status)) return kExitLockLost;
  // Not "not acquired in time" even if the code says so: lockd did not answer.
  if (UnconfirmedAcquireRequestId(status).has_value()) return kExitUnavailable;
  switch (status.code()) {
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
      return kExitNoPermission;
    case absl::StatusCode::kUnavailable:
      return kExitUnavailable;
    case absl::StatusCode::kDeadlineExceeded:
      // Client::Acquire reports "not acquired in time" this way; for other
      // calls it means no answer in time.
      return acquiring ? kExitNotAcquired : kExitUnavailable;
    default:
      return kExitError;
  }
}

}  // namespace lockd::lockctl
