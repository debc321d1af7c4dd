// The `service` scenario (scenarios.h): a service process, ONE lockd::Client
// shared by N threads, each looping acquire, critical section, release.
//
// Uncontended: each thread on its own lock (Client::Acquire without wait,
// Lease::Release). Contended: thread i on lock i % locks through one
// lockd::Lockable per lock, whose owner is the Client's. The Client has one
// owner and lockd's holds are reentrant per owner, so threads of one process
// exclude each other the way the client library offers for that: Lockable
// is a mutex among this process's threads and holds lockd's lock while held
// (lockd/lockable.h); with the Client's own owner a hold takes the session
// path when --api=session. Each critical section is a non-atomic
// read-modify-write of its lock's counter (lost updates show broken
// exclusion) and checks that its grant's fencing token is larger than the
// previous grant's of that lock (lockd's part).

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "lockd/client.h"
#include "lockd/lockable.h"
#include "tools/lockbench/scenario_util.h"
#include "tools/lockbench/scenarios.h"
#include "tools/lockbench/stats.h"

namespace lockd::bench {
namespace {

// What one thread measured. Written by its thread only, read after join.
struct ThreadFigures {
  Samples acquire, release;
  int64_t done = 0;  // pairs, or critical sections
  std::map<absl::StatusCode, int64_t> errors;
};

// One contended lock: its Lockable, and what its holders check. Shared by
// the threads of the lock: Lockable is thread-safe, the rest are atomics.
struct ContendedLock {
  ContendedLock(const Client& client, std::string name, AcquireOptions options)
      : lockable(client, std::move(name), std::move(options)) {}
  Lockable lockable;
  // Updated by the holder only, non-atomically (a relaxed load, a yield, a
  // relaxed store), so that broken exclusion loses updates; atomic so that
  // it is not undefined behaviour.
  std::atomic<int64_t> counter{0};
  std::atomic<uint64_t> last_token{0};
  std::atomic<int64_t> token_regressions{0};
};

// The run's clock. start and deadline are set before the threads are let go
// (absl::Notification orders them), then only read; end is atomic.
struct Run {
  int64_t start = 0, deadline = 0;
  std::atomic<int64_t> end{0};  // when the last pair or critical section ended
};

void Uncontended(Client& client, const std::string& name, absl::Duration lease, absl::Duration hold,
                 Run& run, ThreadFigures& f) {
  AcquireOptions options;
  options.ttl = lease;
  while (NowNanos() < run.deadline) {
    const int64_t t0 = NowNanos();
    absl::StatusOr<Lease> held = client.Acquire(name, options);
    const int64_t t1 = NowNanos();
    if (!held.ok()) {
      ++f.errors[held.status().code()];
      continue;
    }
    f.acquire.Add(t1 - t0);
    if (hold > absl::ZeroDuration()) absl::SleepFor(hold);
    const int64_t t2 = NowNanos();
    absl::Status released = held->Release();
    const int64_t t3 = NowNanos();
    if (!released.ok()) {
      ++f.errors[released.code()];
      continue;
    }
    f.release.Add(t3 - t2);
    ++f.done;
    AtomicMax(run.end, t3);
  }
}

void Contended(ContendedLock& lock, absl::Duration hold, Run& run, ThreadFigures& f) {
  while (NowNanos() < run.deadline) {
    const int64_t t0 = NowNanos();
    try {
      lock.lockable.lock();
    } catch (const LockError& e) {
      ++f.errors[e.status().code()];
      continue;
    }
    const int64_t t1 = NowNanos();
    if (t1 >= run.deadline) {  // waited past the end: not counted
      lock.lockable.unlock();
      break;
    }
    f.acquire.Add(t1 - t0);
    const uint64_t token = lock.lockable.lease()->fencing_token();
    if (lock.last_token.exchange(token) >= token) ++lock.token_regressions;
    const int64_t v = lock.counter.load(std::memory_order_relaxed);
    std::this_thread::yield();  // widen the window
    lock.counter.store(v + 1, std::memory_order_relaxed);
    if (hold > absl::ZeroDuration()) absl::SleepFor(hold);
    ++f.done;
    const int64_t t2 = NowNanos();
    lock.lockable.unlock();
    const int64_t t3 = NowNanos();
    // The outcome of the latest unlock(): another thread's only if it took
    // and gave back the lock in between, which leaves an error uncounted or
    // counted once more, never invented.
    absl::Status released = lock.lockable.last_unlock_status();
    if (!released.ok()) ++f.errors[released.code()];
    f.release.Add(t3 - t2);
    AtomicMax(run.end, t3);
  }
}

}  // namespace

absl::StatusOr<Report> RunService(const CommonOptions& common, const ServiceOptions& options) {
  if (!common.direct_redis.empty() || common.sync_client) {
    return absl::InvalidArgumentError(
        "service: runs lockd::Client threads against lockd (not --direct-redis or "
        "--sync-client; the direct baseline is `uncontended --direct-redis`)");
  }
  if (options.threads < 1 || options.locks < 1) {
    return absl::InvalidArgumentError("service: --threads and --locks must be >= 1");
  }
  if (common.api == CommonOptions::Api::kSession && common.lease < kServiceMinSessionLease) {
    return absl::InvalidArgumentError(absl::StrCat(
        "service: --lease must be at least ", absl::FormatDuration(kServiceMinSessionLease),
        " with --api=session (lockd::Client takes a shorter lease by unary calls)"));
  }
  CommonOptions c = common;
  c.clients = options.threads;
  absl::StatusOr<Report> report = NewReport(c, "service");
  if (!report.ok()) return report;
  const bool session = common.api == CommonOptions::Api::kSession;

  ClientOptions client_options;
  client_options.owner = Owner(common, "service", 0);
  client_options.default_namespace = common.ns;
  client_options.use_sessions = session;
  absl::StatusOr<Client> client =
      Client::Connect(absl::StrJoin(common.targets, ","), client_options);
  if (!client.ok()) return client.status();
  // Connects (and, with sessions, opens the stream and fixes its lease)
  // before the clock starts.
  {
    AcquireOptions warm;
    warm.ttl = common.lease;
    absl::StatusOr<Lease> l =
        client->Acquire(absl::StrCat("service-", common.run_id, "-warm"), warm);
    if (!l.ok()) return l.status();
    if (absl::Status s = l->Release(); !s.ok()) return s;
  }

  std::vector<std::unique_ptr<ContendedLock>> locks;
  if (options.contended) {
    AcquireOptions lock_options;
    lock_options.owner = client->owner();
    lock_options.ttl = common.lease;
    lock_options.wait = options.wait;
    for (int i = 0; i < options.locks; ++i) {
      locks.push_back(std::make_unique<ContendedLock>(
          *client, absl::StrCat("service-", common.run_id, "-lock-", i), lock_options));
    }
  }
  Run run;
  std::vector<ThreadFigures> figures(static_cast<size_t>(options.threads));
  absl::Notification go;
  std::vector<std::thread> threads;
  for (int i = 0; i < options.threads; ++i) {
    threads.emplace_back([&, i] {
      go.WaitForNotification();
      ThreadFigures& f = figures[static_cast<size_t>(i)];
      if (options.contended) {
        Contended(*locks[static_cast<size_t>(i % options.locks)], options.hold, run, f);
      } else {
        Uncontended(*client, absl::StrCat("service-", common.run_id, "-", i), common.lease,
                    options.hold, run, f);
      }
    });
  }
  run.start = NowNanos();
  run.deadline = run.start + absl::ToInt64Nanoseconds(options.duration);
  go.Notify();
  for (std::thread& t : threads) t.join();

  Samples acquire, release;
  std::map<absl::StatusCode, int64_t> errors;
  int64_t total = 0, error_count = 0, min_done = INT64_MAX, max_done = 0;
  for (ThreadFigures& f : figures) {
    acquire.Merge(f.acquire);
    release.Merge(f.release);
    total += f.done;
    min_done = std::min(min_done, f.done);
    max_done = std::max(max_done, f.done);
    for (const auto& [code, n] : f.errors) {
      errors[code] += n;
      error_count += n;
    }
  }
  const int64_t elapsed = run.end.load() - run.start;

  Report& r = *report;
  r.Set("client", absl::StrCat("lockd::Client (", session ? "sessions" : "unary calls",
                               "), one shared by ", options.threads, " threads"));
  r.SetInt("threads", options.threads);
  r.Set("contended", options.contended);
  r.SetInt("locks", options.contended ? options.locks : options.threads);
  r.Set("hold_ms", absl::ToDoubleMilliseconds(options.hold));
  r.Set("elapsed_s", static_cast<double>(elapsed) / 1e9);
  if (options.contended) {
    r.SetInt("critical_sections", total);
    r.Set("cs_per_s", PerSecond(total, elapsed));
  } else {
    r.SetInt("pairs", total);
    r.Set("pairs_per_s", PerSecond(total, elapsed));
  }
  AddLatency(r, "acquire", acquire);
  AddLatency(r, "release", release);
  r.SetInt("per_thread_min", min_done);
  r.SetInt("per_thread_max", max_done);
  r.Set("fairness", max_done == 0 ? 0.0 : static_cast<double>(min_done) / max_done);
  int64_t lost = 0, regressions = 0;
  if (options.contended) {
    // Each thread stays on one lock: a lock's critical sections are its
    // threads' count.
    std::vector<int64_t> per_lock(locks.size(), 0);
    for (int i = 0; i < options.threads; ++i) {
      per_lock[static_cast<size_t>(i % options.locks)] += figures[static_cast<size_t>(i)].done;
    }
    for (size_t l = 0; l < locks.size(); ++l) {
      lost += per_lock[l] - locks[l]->counter.load();
      regressions += locks[l]->token_regressions.load();
    }
    r.SetInt("lost_updates", lost);
    r.SetInt("token_regressions", regressions);
  }
  r.SetInt("errors", error_count);
  for (const auto& [code, n] : errors) {
    r.SetInt(absl::StrCat("errors_", absl::StatusCodeToString(code)), n);
  }
  r.Set("ok", total > 0 && error_count == 0 && lost == 0 && regressions == 0);
  return report;
}

}  // namespace lockd::bench
