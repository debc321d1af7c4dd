// lockbench: load generator and latency meter for lockd. See `lockbench --help`.

#include <unistd.h>

#include <cstdint>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tools/lockbench/scenarios.h"

namespace lockd::bench {
namespace {

constexpr char kUsage[] = R"(lockbench: drives a running lockd and measures it.

Usage: lockbench <scenario> [flags]

Scenarios:
  contended    C clients, one lock, a budget of critical sections; each
               critical section is a non-atomic read-modify-write of a counter,
               so broken exclusion shows up as lost updates. Reports CS/s,
               acquire latency, handoff latency (a holder's Release sent ->
               the next waiter's grant received), fairness (min/max CS per
               client) and lost updates (exit status 1 if any).
  uncontended  C clients, each on its own lock names, acquire (no wait) +
               release pairs for a duration. Reports pairs/s and the latency
               of each call.
  waiters      parks W waiting Acquires on a few held locks, reads lockd's
               resident memory and thread count (--lockd-pid), then releases:
               each waiter releases once granted. Reports the drain time.
  holders      --api=session only (the default for it): N Session streams,
               each holding ONE lock of its own (no wait), kept open for
               --hold while lockd renews every hold each lease/3; reads
               lockd's resident memory and thread count before, at full load
               and after (--lockd-pid), counts `lost` pushes (any is a
               failure), checks that a sample of 100 locks is still held by
               its session (Describe), then half-closes every stream and
               checks each ends OK and no lock is left held (List). Reports the time to open
               and acquire all, and the acquire latency (open included).
  expiry       per lock, a holder that never releases and waiters that never
               release either; reports how long after each lease ends the next
               waiter is granted.
  rw           C clients on one read-write lock for --duration: each acquire
               is a read (SHARED) with probability --readers, else a write
               (EXCLUSIVE); each holds for --hold, then releases. Reports
               CS/s, acquire latency (all, reads, writes), fairness (min/max
               CS per client), the most readers seen holding at once (each
               client counts itself from the grant it received to the
               release it sends) and exclusion violations (a writer seen
               with anyone: exit status 1). --read-mode=exclusive takes
               every read EXCLUSIVE: the baseline of the same run.
  semaphore    C clients on one semaphore of --limit permits, each acquire
               taking --permits, holding for --hold. Reports CS/s, latency,
               fairness, the most permits seen held at once and violations
               (more than --limit).
  acquire-all  C clients over --names locks: each round takes two distinct
               ones at random with ONE AcquireAll call, listed in a random
               order (callers list them in opposite orders), holds both for
               --hold, releases both. Reports CS/s, latency, fairness, wait
               timeouts (a deadlock would show here) and violations.
               rw, semaphore and acquire-all: unary calls on event loops
               only (not --api=session, --sync-client or --direct-redis).
  service      a service process: ONE lockd::Client (the C++ client library)
               shared by --threads threads, each looping acquire, critical
               section (--hold), release for --duration, on its own lock or,
               with --contended, on lock i % --locks through a
               lockd::Lockable with the Client's owner (the library's way to
               exclude threads of one process: lockd sees one acquire per
               lock at a time). --api sets the Client's use_sessions.
               Reports pairs/s (contended: CS/s), acquire and release
               latency, fairness (min/max per thread), errors by code
               (errors_<CODE>) and, contended, lost updates of a per-lock
               counter and fencing tokens that did not increase; any of
               these makes exit status 1. Not with --clients,
               --client-threads, --sync-client or --direct-redis (the
               direct baseline is `uncontended --direct-redis --clients=N`);
               bench/service.sh runs it beside its floors.

Common flags:
  --target=HOST:PORT[,HOST:PORT...]  lockd address(es), clients round-robin
                                     (default 127.0.0.1:7411)
  --clients=C          concurrent clients, each with its own channel (16);
                       expiry: number of locks
  --namespace=NS       lock namespace (lockbench)
  --lease=DUR          lease_ttl of every Acquire (10s)
  --seed=N             seed for the randomness used (1)
  --json               print one JSON object instead of a table
  --direct-redis=HOST:PORT   contended/uncontended only: no lockd; run the
                       redis backend's Lua scripts straight against this Redis
                       with hiredis (the baseline)
  --direct-prefix=P    key prefix for --direct-redis (lockbench-direct)
  --client-threads=T   contended/uncontended: event-loop threads that drive the
                       clients' asynchronous calls (default: one per CPU)
  --sync-client        contended/uncontended: blocking calls, a thread per
                       client, instead (costs more client CPU per call)
  --api=unary|session  how clients call lockd (unary): `session` opens one
                       Session stream per client on its own channel (owner =
                       the client's, lease_ttl = --lease) and sends each
                       acquire/release as an op on it, one outstanding per
                       client; in waiters, one stream per --waiters-per-session
                       waiters. Not with expiry (a session renews its holds,
                       so no lease ends by itself) nor with --direct-redis:
                       both are usage errors; holders: session only (its
                       default), --api=unary is a usage error

contended:
  --budget=N           critical sections in total (20000)
  --duration=DUR       stop earlier once this has passed (60s)
  --wait=DUR           wait_timeout of each Acquire (10s)
  --counter-redis=HOST:PORT  keep the counter in Redis (GET, then SET)
                       instead of in this process
uncontended:
  --duration=DUR       how long to run (5s)
  --names-per-client=K lock names per client, picked at random (1)
waiters:
  --waiters=W          parked Acquires (10000)
  --locks=L            locks they wait on (4)
  --lockd-pid=PID      lockd process to read /proc/PID/status of
  --timeout=DUR        limit for parking and for draining (300s)
  --waiters-per-session=N   --api=session: waiting acquires per stream (100,
                       at most 10000, lockd's limit of ops in flight); the
                       waiters of one stream share its owner, so one granted
                       a lock makes its stream's others on it reentrant grants
holders:
  --sessions=N         Session streams, one lock each (10000)
  --channels=K         channels (TCP connections) the streams are spread over
                       (100); --clients is not used
  --hold=DUR           how long the holds are kept (10s); at least 3 leases
  --lease=DUR          the sessions' lease_ttl (2s here)
  --lockd-pid=PID      lockd process to read /proc/PID/status of
  --timeout=DUR        limit for opening+acquiring all and for closing (300s)
expiry:
  --chain=N            clients per lock: one holder, N-1 waiters (3)
rw, semaphore, acquire-all:
  --duration=DUR       how long to run (5s)
  --hold=DUR           how long each grant is held, a timer that costs no
                       CPU (1ms); 0: release at once
  --wait=DUR           wait_timeout of each acquire (10s)
rw:
  --readers=R          share of acquires that are reads, 0-1 (0.9)
  --read-mode=shared|exclusive   how reads take the lock (shared)
semaphore:
  --limit=N            the semaphore's permits, 1-10000 (4)
  --permits=K          permits each acquire takes, 1-limit (1)
acquire-all:
  --names=N            locks the pairs are drawn from (8)
service:
  --threads=N          threads sharing the one Client (64)
  --duration=DUR       how long to run (5s)
  --hold=DUR           time in each critical section, asleep (0: none)
  --contended          the threads share --locks locks instead of one each
  --locks=L            --contended: the locks (8)
  --wait=DUR           --contended: bound of each waiting acquire (10s)
  --lease=DUR          every hold's lease (10s); with --api=session at least
                       7s (the Client holds shorter leases by unary calls)

Exit status: 0 ok, 1 the run failed or found broken exclusion, 2 bad usage.
)";

struct Flags {
  std::map<std::string, std::string> values;
  bool json = false;
  bool sync_client = false;
  bool contended = false;
};

// --name=value, --name value, or --json. Unknown names are errors.
absl::StatusOr<Flags> ParseFlags(const std::vector<std::string>& args,
                                 const std::set<std::string>& known) {
  Flags f;
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view a = args[i];
    if (!absl::ConsumePrefix(&a, "--")) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument: ", args[i]));
    }
    std::string name, value;
    size_t eq = a.find('=');
    if (eq != absl::string_view::npos) {
      name = std::string(a.substr(0, eq));
      value = std::string(a.substr(eq + 1));
    } else {
      name = std::string(a);
      if (name == "json") {
        f.json = true;
        continue;
      }
      if (name == "sync-client") {
        f.sync_client = true;
        continue;
      }
      if (name == "contended") {
        f.contended = true;
        continue;
      }
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
      value = args[++i];
    }
    if (name == "json") {
      f.json = value != "false";
      continue;
    }
    if (known.count(name) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    f.values[name] = value;
  }
  return f;
}

absl::Status GetDuration(const Flags& f, const std::string& name, absl::Duration* out) {
  auto it = f.values.find(name);
  if (it == f.values.end()) return absl::OkStatus();
  if (!absl::ParseDuration(it->second, out) || *out < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": not a duration like 250ms, 10s: ", it->second));
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status GetInt(const Flags& f, const std::string& name, T* out, int64_t min) {
  auto it = f.values.find(name);
  if (it == f.values.end()) return absl::OkStatus();
  int64_t v = 0;
  if (!absl::SimpleAtoi(it->second, &v) || v < min) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": not an integer >= ", min, ": ", it->second));
  }
  *out = static_cast<T>(v);
  return absl::OkStatus();
}

std::string GetString(const Flags& f, const std::string& name, const std::string& def) {
  auto it = f.values.find(name);
  return it == f.values.end() ? def : it->second;
}

int Main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ||
      std::string(argv[1]) == "help") {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  const std::string scenario = argv[1];
  std::set<std::string> known = {"target",       "clients",       "namespace",      "lease", "seed",
                                 "direct-redis", "direct-prefix", "client-threads", "api"};
  if (scenario == "contended") {
    known.insert({"budget", "duration", "wait", "counter-redis"});
  } else if (scenario == "uncontended") {
    known.insert({"duration", "names-per-client"});
  } else if (scenario == "waiters") {
    known.insert({"waiters", "locks", "lockd-pid", "timeout", "waiters-per-session"});
  } else if (scenario == "holders") {
    known.insert({"sessions", "channels", "hold", "lockd-pid", "timeout"});
  } else if (scenario == "expiry") {
    known.insert({"chain"});
  } else if (scenario == "rw") {
    known.insert({"duration", "hold", "wait", "readers", "read-mode"});
  } else if (scenario == "semaphore") {
    known.insert({"duration", "hold", "wait", "limit", "permits"});
  } else if (scenario == "acquire-all") {
    known.insert({"duration", "hold", "wait", "names"});
  } else if (scenario == "service") {
    known.insert({"threads", "duration", "hold", "locks", "wait"});
  } else {
    std::cerr << "lockbench: unknown scenario \"" << scenario << "\" (see lockbench --help)\n";
    return 2;
  }
  absl::StatusOr<Flags> flags = ParseFlags(std::vector<std::string>(argv + 2, argv + argc), known);
  if (!flags.ok()) {
    std::cerr << "lockbench: " << flags.status().message() << " (see lockbench --help)\n";
    return 2;
  }

  if (flags->contended && scenario != "service") {
    std::cerr << "lockbench: --contended is a flag of the service scenario only\n";
    return 2;
  }
  if (scenario == "service") {
    for (const char* name : {"clients", "client-threads", "direct-redis", "direct-prefix"}) {
      if (flags->values.count(name) > 0) {
        std::cerr << "lockbench: service takes --threads, not --" << name
                  << " (one lockd::Client shared by the threads; the direct-Redis baseline is "
                     "`lockbench uncontended --direct-redis=HOST:PORT --clients=N`)\n";
        return 2;
      }
    }
    if (flags->sync_client) {
      std::cerr << "lockbench: service runs lockd::Client's blocking calls on its threads "
                   "already; --sync-client does not apply\n";
      return 2;
    }
  }

  CommonOptions common;
  common.targets =
      absl::StrSplit(GetString(*flags, "target", "127.0.0.1:7411"), ',', absl::SkipWhitespace());
  common.ns = GetString(*flags, "namespace", common.ns);
  common.direct_redis = GetString(*flags, "direct-redis", "");
  common.direct_prefix = GetString(*flags, "direct-prefix", common.direct_prefix);
  common.sync_client = flags->sync_client;
  // holders runs over sessions only: that is its default.
  const std::string api = GetString(*flags, "api", scenario == "holders" ? "session" : "unary");
  if (api != "unary" && api != "session") {
    std::cerr << "lockbench: --api: unary or session, not \"" << api << "\"\n";
    return 2;
  }
  if (api == "unary" && scenario == "holders") {
    std::cerr << "lockbench: holders cannot run with --api=unary: it measures holds kept alive "
                 "by Session streams (the server renews them); use --api=session\n";
    return 2;
  }
  const bool hold_loop = scenario == "rw" || scenario == "semaphore" || scenario == "acquire-all";
  if (hold_loop && (api == "session" || common.sync_client || !common.direct_redis.empty())) {
    std::cerr << "lockbench: " << scenario
              << " runs with unary calls on event loops only (not --api=session, "
                 "--sync-client or --direct-redis)\n";
    return 2;
  }
  if (api == "session") {
    if (scenario == "expiry") {
      std::cerr << "lockbench: expiry cannot run with --api=session: a session renews its "
                   "holds while its stream is open, so no lease ends by itself\n";
      return 2;
    }
    if (!common.direct_redis.empty()) {
      std::cerr << "lockbench: --api=session is for lockd; --direct-redis has no sessions\n";
      return 2;
    }
    common.api = CommonOptions::Api::kSession;
  }
  // Unique per run (pid and start time), so leftovers never collide; the
  // seed drives the randomness that is measured.
  common.run_id = absl::StrCat(getpid(), "-", absl::ToUnixMillis(absl::Now()) % 100000000);
  ContendedOptions contended;
  UncontendedOptions uncontended;
  WaitersOptions waiters;
  HoldersOptions holders;
  ExpiryOptions expiry;
  HoldLoopOptions loop;
  RwOptions rw;
  SemaphoreOptions semaphore;
  AcquireAllOptions acquire_all;
  ServiceOptions service;
  service.contended = flags->contended;
  if (scenario == "holders") common.lease = absl::Seconds(2);
  contended.counter_redis = GetString(*flags, "counter-redis", "");

  std::vector<absl::Status> checks = {
      GetInt(*flags, "clients", &common.clients, 1),
      GetInt(*flags, "seed", &common.seed, 0),
      GetInt(*flags, "client-threads", &common.client_threads, 0),
      GetDuration(*flags, "lease", &common.lease),
      GetInt(*flags, "budget", &contended.budget, 1),
      GetInt(*flags, "names-per-client", &uncontended.names_per_client, 1),
      GetInt(*flags, "waiters", &waiters.waiters, 1),
      GetInt(*flags, "locks", &waiters.locks, 1),
      GetInt(*flags, "lockd-pid", &waiters.lockd_pid, 0),
      GetDuration(*flags, "timeout", &waiters.timeout),
      GetInt(*flags, "waiters-per-session", &waiters.per_session, 1),
      GetInt(*flags, "sessions", &holders.sessions, 1),
      GetInt(*flags, "channels", &holders.channels, 1),
      GetDuration(*flags, "hold", &holders.hold),
      GetInt(*flags, "lockd-pid", &holders.lockd_pid, 0),
      GetDuration(*flags, "timeout", &holders.timeout),
      GetInt(*flags, "chain", &expiry.chain, 2),
      GetDuration(*flags, "hold", &loop.hold),
      GetInt(*flags, "limit", &semaphore.limit, 1),
      GetInt(*flags, "permits", &semaphore.permits, 1),
      GetInt(*flags, "names", &acquire_all.names, 2),
      GetInt(*flags, "threads", &service.threads, 1),
      GetInt(*flags, "locks", &service.locks, 1),
  };
  if (scenario == "contended") {
    checks.push_back(GetDuration(*flags, "duration", &contended.max_duration));
    checks.push_back(GetDuration(*flags, "wait", &contended.wait));
  } else if (hold_loop) {
    checks.push_back(GetDuration(*flags, "duration", &loop.duration));
    checks.push_back(GetDuration(*flags, "wait", &loop.wait));
  } else if (scenario == "service") {
    checks.push_back(GetDuration(*flags, "duration", &service.duration));
    checks.push_back(GetDuration(*flags, "hold", &service.hold));
    checks.push_back(GetDuration(*flags, "wait", &service.wait));
  } else {
    checks.push_back(GetDuration(*flags, "duration", &uncontended.duration));
  }
  for (const absl::Status& s : checks) {
    if (!s.ok()) {
      std::cerr << "lockbench: " << s.message() << "\n";
      return 2;
    }
  }
  if (scenario == "rw") {
    std::string readers = GetString(*flags, "readers", "0.9");
    if (!absl::SimpleAtod(readers, &rw.readers) || !(rw.readers >= 0 && rw.readers <= 1)) {
      std::cerr << "lockbench: --readers: a share between 0 and 1, not \"" << readers << "\"\n";
      return 2;
    }
    const std::string mode = GetString(*flags, "read-mode", "shared");
    if (mode != "shared" && mode != "exclusive") {
      std::cerr << "lockbench: --read-mode: shared or exclusive, not \"" << mode << "\"\n";
      return 2;
    }
    rw.exclusive_reads = mode == "exclusive";
  }
  if (semaphore.limit > 10000 || semaphore.permits > semaphore.limit) {
    std::cerr << "lockbench: semaphore: --limit at most 10000, --permits at most --limit\n";
    return 2;
  }
  rw.loop = semaphore.loop = acquire_all.loop = loop;
  if (waiters.per_session > 10000) {
    std::cerr << "lockbench: --waiters-per-session: at most 10000\n";
    return 2;
  }
  if (scenario == "holders" && holders.hold < common.lease * 3) {
    std::cerr << "lockbench: holders: --hold must be at least 3 leases (--lease="
              << absl::FormatDuration(common.lease)
              << "), so that the server renews every hold several times\n";
    return 2;
  }
  if (scenario == "service" && api == "session" && common.lease < kServiceMinSessionLease) {
    std::cerr << "lockbench: service: --lease must be at least "
              << absl::FormatDuration(kServiceMinSessionLease)
              << " with --api=session (lockd::Client holds shorter leases by unary calls)\n";
    return 2;
  }
  if (common.targets.empty()) {
    std::cerr << "lockbench: --target is empty\n";
    return 2;
  }

  absl::StatusOr<Report> report;
  if (scenario == "contended") {
    report = RunContended(common, contended);
  } else if (scenario == "uncontended") {
    report = RunUncontended(common, uncontended);
  } else if (scenario == "waiters") {
    report = RunWaiters(common, waiters);
  } else if (scenario == "holders") {
    report = RunHolders(common, holders);
  } else if (scenario == "rw") {
    report = RunRw(common, rw);
  } else if (scenario == "semaphore") {
    report = RunSemaphore(common, semaphore);
  } else if (scenario == "acquire-all") {
    report = RunAcquireAll(common, acquire_all);
  } else if (scenario == "service") {
    report = RunService(common, service);
  } else {
    report = RunExpiry(common, expiry);
  }
  if (!report.ok()) {
    std::cerr << "lockbench " << scenario << ": " << report.status().ToString() << "\n";
    return 1;
  }
  if (flags->json) {
    report->PrintJson(std::cout);
  } else {
    report->PrintTable(std::cout);
  }
  const Report::Value* ok = report->Find("ok");
  bool passed = ok != nullptr && std::get<bool>(*ok);
  if (!passed)
    std::cerr << "lockbench " << scenario
              << ": FAILED (see ok/lost_updates/lost/exclusion_violations/errors above)\n";
  return passed ? 0 : 1;
}

}  // namespace
}  // namespace lockd::bench

int main(int argc, char** argv) {
  // Debian's Abseil is built without NDEBUG: its Mutex deadlock detector
  // would tax every lock taken in this process and in gRPC, inflating the
  // client's share of the shared CPUs.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return lockd::bench::Main(argc, argv);
}
