// `lockctl verify`: its flags, its help and its entry point (the run itself
// is verify/runner.h; the checker of a saved history verify/checker.h).

#include <ostream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tools/lockctl/lockctl.h"

namespace lockd::lockctl {
namespace {

absl::Status UsageError(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}

absl::StatusOr<absl::Duration> Positive(absl::string_view flag, const std::string& value) {
  absl::StatusOr<absl::Duration> d = ParseDurationFlag(flag, value);
  if (d.ok() && *d <= absl::ZeroDuration()) {
    return UsageError(absl::StrCat("--", flag, " must be positive"));
  }
  return d;
}

}  // namespace

absl::Status ParseVerifyFlag(absl::string_view flag, const std::string& value,
                             verify::VerifyOptions& o, std::string& check_file) {
  if (flag == "duration" || flag == "nemesis-interval" || flag == "hold") {
    absl::StatusOr<absl::Duration> d = Positive(flag, value);
    if (!d.ok()) return d.status();
    (flag == "duration" ? o.duration : flag == "hold" ? o.hold : o.nemesis_interval) = *d;
  } else if (flag == "workers") {
    if (!absl::SimpleAtoi(value, &o.workers) || o.workers < 1 || o.workers > 256) {
      return UsageError(
          absl::StrCat("--workers must be an integer from 1 to 256, not \"", value, "\""));
    }
  } else if (flag == "workload") {
    absl::StatusOr<std::vector<verify::Workload>> w = verify::ParseWorkloads(value);
    if (!w.ok()) return w.status();
    o.workloads = *std::move(w);
  } else if (flag == "nemesis") {
    absl::StatusOr<verify::NemesisKind> n = verify::ParseNemesis(value);
    if (!n.ok()) return n.status();
    o.nemesis = *n;
  } else if (flag == "api") {
    absl::StatusOr<verify::ApiMode> a = verify::ParseApiMode(value);
    if (!a.ok()) return a.status();
    o.api = *a;
  } else if (flag == "rate") {
    if (!absl::SimpleAtod(value, &o.rate) || !(o.rate > 0) || o.rate > 100000) {
      return UsageError(absl::StrCat(
          "--rate must be a number of acquires per second above 0 (at most 100000), not \"", value,
          "\""));
    }
  } else if (flag == "history") {
    if (value.empty()) return UsageError("--history must not be empty");
    o.history_file = value;
  } else if (flag == "check") {
    if (value.empty()) return UsageError("--check must not be empty");
    check_file = value;
  } else if (flag == "force") {
    o.force = value == "true";
  } else if (flag == "seed") {
    if (!absl::SimpleAtoi(value, &o.seed)) {
      return UsageError(absl::StrCat("--seed must be a non-negative integer, not \"", value, "\""));
    }
  }
  return absl::OkStatus();
}

absl::Status FinishVerifyFlags(Invocation& inv, bool ttl_set, bool wait_set, bool ns_set) {
  verify::VerifyOptions& o = inv.verify;
  o.server = inv.server;
  o.tls = inv.tls;
  o.auth = inv.auth;
  o.rpc_timeout = inv.timeout;
  o.json = inv.output == Output::kJson;
  if (ns_set) {
    if (inv.ns.empty()) return UsageError("--namespace must not be empty for verify");
    o.ns = inv.ns;
  }
  if (ttl_set) o.ttl = inv.ttl;
  if (wait_set) o.wait = inv.wait;
  if (o.nemesis != verify::NemesisKind::kNone && o.nemesis_interval < absl::Milliseconds(100)) {
    return UsageError("--nemesis-interval must be at least 100ms");
  }
  return absl::OkStatus();
}

std::string CommandOf(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") return "";
    if (absl::StartsWith(a, "--")) {
      std::string flag = a.substr(2);
      if (flag.find('=') == std::string::npos && !IsBoolFlag(flag)) ++i;  // skip its value
      continue;
    }
    if (absl::StartsWith(a, "-") && a.size() > 1) continue;
    return a;
  }
  return "";
}

std::string VerifyUsage() {
  return R"(Usage: lockctl verify [--namespace NS] [--duration DUR] [--workers N]
                      [--workload mutex,rw,semaphore,acquire-all]
                      [--nemesis none|kill-holders|abandon|pause-holders]
                      [--api session|unary|both] [--history FILE] [--output text|json]
       lockctl verify --check FILE [--output text|json]

Checks that the lockd deployment at --server keeps its locks (docs/verify.md):
worker processes take locks through every replica --server names (a list is
dealt out: worker i talks to replica i mod n; a dns:/// target is balanced
over by each worker) and, while holding, do a read-modify-write on a referee
inside lockctl (a fenced and an
unfenced counter); every operation is recorded in a history, which a checker
then reads: exclusion, fencing, lost updates, liveness, waits and errors, one
line each. Its namespace must hold no lock of anyone else (it refuses it
unless --force); it takes at most --rate acquires per second, stops after
--duration, and releases every lock it took.
  --namespace NS          its own namespace [lockd-verify] ($LOCKD_NAMESPACE is
                          not used)
  --duration DUR          how long the workers run [60s]
  --workers N             worker processes, 1-256 [16]
  --workload LIST         comma-separated [mutex,rw,semaphore,acquire-all]: mutex
                          (2 locks), rw (a read-write lock, 90% readers),
                          semaphore (limit 3, 1 or 2 permits), acquire-all (2
                          of 3 locks, in random order)
  --api session|unary|both  how workers hold: over a session stream, with the
                          unary calls, or half each [both]
  --ttl DUR               every hold's lease [10s]; a session hold shorter than
                          about 6.1s takes the unary path (the client's rule)
  --wait DUR              how long a worker waits for a lock [5s]
  --hold DUR              a hold lasts a random time up to DUR [50ms]
  --rate N                acquires per second, all workers together [200]
  --nemesis KIND          none [default]; kill-holders: SIGKILL a worker that
                          holds a lock (it is replaced), and measure how soon the
                          lock is granted again; abandon: a holder exits without
                          releasing; pause-holders: SIGSTOP a holder between its
                          lease check and its write for twice --ttl (a broken
                          client: exclusion fails; it shows what fencing catches)
  --nemesis-interval DUR  time between strikes [2s]
  --seed N                the random seed of the ops and the nemesis [random]
  --force                 run in a namespace that holds others' locks
  --history FILE          write the history (JSON lines, docs/verify.md)
  --check FILE            check a saved history instead of running (offline)
  --output text|json      the report: a table per check, or one JSON object

Exit codes: 0 every check holds; 1 a check failed (the report names it);
2 bad usage (or a namespace refused); 69 lockd unavailable.
)";
}

int VerifyCommand(const Invocation& inv, std::ostream& out, std::ostream& err) {
  if (!inv.verify_check_file.empty()) {
    return verify::RunVerifyCheck(
        inv.verify_check_file,
        inv.output == Output::kJson ? verify::ReportFormat::kJson : verify::ReportFormat::kText,
        out, err);
  }
  return verify::RunVerify(inv.verify, out, err);
}

}  // namespace lockd::lockctl
