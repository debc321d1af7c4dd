#include "tools/lockbench/scenarios.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "protos/proto_duration.h"
#include "tools/lockbench/driver.h"
#include "tools/lockbench/locker.h"
#include "tools/lockbench/scenario_util.h"
#include "tools/lockbench/session.h"
#include "tools/lockbench/stats.h"

namespace lockd::bench {

std::string Target(const CommonOptions& c, int client) {
  return c.targets[static_cast<size_t>(client) % c.targets.size()];
}

std::string Owner(const CommonOptions& c, absl::string_view role, int client) {
  return absl::StrCat("lockbench-", c.run_id, "-", role, "-", client);
}

// Fills the fields every report starts with.
absl::StatusOr<Report> NewReport(const CommonOptions& c, absl::string_view scenario) {
  Report r;
  r.Set("scenario", std::string(scenario));
  r.Set("api", std::string(!c.direct_redis.empty()                 ? "redis-direct"
                           : c.api == CommonOptions::Api::kSession ? "session"
                                                                   : "unary"));
  if (!c.direct_redis.empty()) {
    r.Set("backend", std::string("redis-direct"));
    r.Set("target", c.direct_redis);
  } else {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> ch =
        NewDedicatedChannel(c.targets[0], kConnectTimeout);
    if (!ch.ok()) return ch.status();
    absl::StatusOr<std::string> backend = BackendName(ch->get(), c.ns);
    if (!backend.ok()) return backend.status();
    r.Set("backend", *backend);
    r.Set("target", absl::StrJoin(c.targets, ","));
  }
  r.SetInt("clients", c.clients);
  r.SetInt("seed", c.seed);
  r.Set("lease_ms", absl::ToDoubleMilliseconds(c.lease));
  return r;
}

void AddLatency(Report& r, const std::string& prefix, Samples& s) {
  r.SetInt(prefix + "_samples", s.count());
  r.Set(prefix + "_p50_ms", s.PercentileMs(50));
  r.Set(prefix + "_p90_ms", s.PercentileMs(90));
  r.Set(prefix + "_p99_ms", s.PercentileMs(99));
  r.Set(prefix + "_max_ms", s.MaxMs());
}

double PerSecond(int64_t n, int64_t nanos) {
  return nanos <= 0 ? 0.0 : static_cast<double>(n) * 1e9 / static_cast<double>(nanos);
}

namespace {

// One Locker per logic, each on its own connection(s); with --api=session,
// each over its own Session stream, opened for the logic's owner.
absl::StatusOr<std::vector<std::unique_ptr<Locker>>> NewLockers(
    const CommonOptions& c, const std::vector<ClientLogic*>& logics) {
  std::vector<std::unique_ptr<Locker>> out;
  for (int i = 0; i < static_cast<int>(logics.size()); ++i) {
    if (!c.direct_redis.empty()) {
      absl::StatusOr<std::unique_ptr<Locker>> l =
          NewRedisDirectLocker(c.direct_redis, c.direct_prefix, c.ns);
      if (!l.ok()) return l.status();
      out.push_back(*std::move(l));
      continue;
    }
    absl::StatusOr<std::shared_ptr<grpc::Channel>> ch =
        NewDedicatedChannel(Target(c, i), kConnectTimeout);
    if (!ch.ok()) return ch.status();
    if (c.api == CommonOptions::Api::kSession) {
      absl::StatusOr<std::unique_ptr<Locker>> l =
          NewSessionLocker(*std::move(ch), c.ns, logics[static_cast<size_t>(i)]->owner(), c.lease);
      if (!l.ok()) return l.status();
      out.push_back(*std::move(l));
      continue;
    }
    out.push_back(NewGrpcLocker(*std::move(ch), c.ns));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Counter>> NewCounter(const std::string& redis,
                                                    const std::string& key,
                                                    std::atomic<int64_t>* cell) {
  if (redis.empty()) return NewLocalCounter(cell);
  return NewRedisCounter(redis, key);
}

}  // namespace

void AtomicMax(std::atomic<int64_t>& a, int64_t v) {
  int64_t cur = a.load();
  while (cur < v && !a.compare_exchange_weak(cur, v)) {
  }
}

absl::StatusOr<std::string> RunClients(const CommonOptions& c,
                                       const std::vector<ClientLogic*>& logics,
                                       const StartFn& start) {
  const int n = static_cast<int>(logics.size());
  const bool session = c.api == CommonOptions::Api::kSession;
  if (!c.direct_redis.empty() || c.sync_client) {
    absl::StatusOr<std::vector<std::unique_ptr<Locker>>> lockers = NewLockers(c, logics);
    if (!lockers.ok()) return lockers.status();
    if (absl::Status s = RunOnThreads(*lockers, logics, c.lease, start); !s.ok()) return s;
    if (!c.direct_redis.empty()) return std::string("hiredis-sync, a thread per client");
    return std::string(session ? "grpc-sync-session, a thread per client"
                               : "grpc-sync, a thread per client");
  }
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> ch =
        NewDedicatedChannel(Target(c, i), kConnectTimeout);
    if (!ch.ok()) return ch.status();
    channels.push_back(*std::move(ch));
  }
  int threads = c.client_threads > 0 ? c.client_threads
                                     : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(1, std::min(threads, n));
  if (session) {
    absl::Status s = RunSessionsOnEventLoops(channels, c.ns, logics, c.lease, threads, start);
    if (!s.ok()) return s;
    return absl::StrCat("grpc-async-session, ", threads, " event loop thread(s)");
  }
  RunOnEventLoops(channels, c.ns, logics, c.lease, threads, start);
  return absl::StrCat("grpc-async, ", threads, " event loop thread(s)");
}

// ---------------------------------------------------------------------------
// contended

namespace {

// What the contended clients share. Written by the lock holder only (so, if
// the lock works, by one client at a time); atomics keep a broken lock from
// being undefined behaviour.
struct ContendedShared {
  const ContendedOptions* options = nullptr;
  std::string lock;
  int64_t hard_deadline = 0;
  std::atomic<int64_t> last_release_start{0};
  std::atomic<int64_t> cs_started{0};
  std::atomic<int64_t> end_ns{0};
  std::atomic<bool> stop{false};
  FirstError error;
};

class ContendedClient final : public ClientLogic {
 public:
  ContendedClient(ContendedShared* shared, std::string owner, Counter* counter)
      : shared_(shared), owner_(std::move(owner)), counter_(counter) {}

  const std::string& owner() const override { return owner_; }

  Op First() override { return Acquire(NowNanos()); }

  Op Next(const OpResult& r) override {
    const int64_t now = NowNanos();
    ContendedShared& sh = *shared_;
    switch (state_) {
      case State::kAcquiring: {
        if (!r.status.ok()) return Fail(r.status, false);
        if (!r.acquired) {
          ++timeouts;
          return sh.stop.load() ? Op{} : Acquire(now);
        }
        if (sh.stop.load()) {  // the budget was used up while this client waited
          state_ = State::kFinalRelease;
          return Op{Op::Kind::kRelease, &sh.lock};
        }
        // A handoff: this client was already waiting when the holder before
        // it started its Release.
        int64_t released_at = sh.last_release_start.load();
        if (released_at > acquire_sent_) handoff.Add(now - released_at);
        acquire.Add(now - acquire_sent_);

        // The critical section: a deliberately non-atomic read-modify-write.
        absl::StatusOr<int64_t> v = counter_->Get();
        if (!v.ok()) return Fail(v.status(), true);
        if (sh.options->counter_redis.empty()) std::this_thread::yield();  // widen the window
        absl::Status set = counter_->Set(*v + 1);
        if (!set.ok()) return Fail(set, true);
        ++cs;
        int64_t done = sh.cs_started.fetch_add(1) + 1;
        if (done >= sh.options->budget || now >= sh.hard_deadline) sh.stop = true;

        release_sent_ = NowNanos();
        sh.last_release_start.store(release_sent_);
        state_ = State::kReleasing;
        return Op{Op::Kind::kRelease, &sh.lock};
      }
      case State::kReleasing:
        if (!r.status.ok()) return Fail(r.status, false);
        release.Add(now - release_sent_);
        AtomicMax(sh.end_ns, now);
        return sh.stop.load() ? Op{} : Acquire(NowNanos());
      case State::kFinalRelease:
        return Op{};
    }
    return Op{};
  }

  Samples acquire, handoff, release;
  int64_t cs = 0;
  int64_t timeouts = 0;

 private:
  enum class State { kAcquiring, kReleasing, kFinalRelease };

  Op Acquire(int64_t now) {
    state_ = State::kAcquiring;
    acquire_sent_ = now;
    return Op{Op::Kind::kAcquire, &shared_->lock, shared_->options->wait};
  }

  // Records the first error and stops every client; gives the lock back if
  // this client holds it.
  Op Fail(absl::Status s, bool holding) {
    shared_->error.Set(std::move(s));
    shared_->stop = true;
    if (!holding) return Op{};
    state_ = State::kFinalRelease;
    return Op{Op::Kind::kRelease, &shared_->lock};
  }

  ContendedShared* const shared_;
  const std::string owner_;
  Counter* const counter_;
  State state_ = State::kAcquiring;
  int64_t acquire_sent_ = 0;
  int64_t release_sent_ = 0;
};

}  // namespace

absl::StatusOr<Report> RunContended(const CommonOptions& common, const ContendedOptions& options) {
  absl::StatusOr<Report> report = NewReport(common, "contended");
  if (!report.ok()) return report;
  const int n = common.clients;
  const std::string counter_key = absl::StrCat("lockbench:counter:", common.run_id);

  ContendedShared shared;
  shared.options = &options;
  shared.lock = absl::StrCat("contended-", common.run_id);
  std::atomic<int64_t> cell{0};
  std::vector<std::unique_ptr<Counter>> counters;
  std::vector<std::unique_ptr<ContendedClient>> clients;
  std::vector<ClientLogic*> logics;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<std::unique_ptr<Counter>> c =
        NewCounter(options.counter_redis, counter_key, &cell);
    if (!c.ok()) return c.status();
    counters.push_back(*std::move(c));
    clients.push_back(
        std::make_unique<ContendedClient>(&shared, Owner(common, "c", i), counters.back().get()));
    logics.push_back(clients.back().get());
  }
  absl::Status reset = counters[0]->Set(0);
  if (!reset.ok()) return reset;

  int64_t start_ns = 0;
  absl::StatusOr<std::string> how = RunClients(common, logics, [&](int64_t t) {
    start_ns = t;
    shared.hard_deadline = t + absl::ToInt64Nanoseconds(options.max_duration);
  });
  if (!how.ok()) return how.status();
  if (absl::Status e = shared.error.Get(); !e.ok()) return e;

  Samples acquire, handoff, release;
  int64_t total = 0, timeouts = 0, min_cs = INT64_MAX, max_cs = 0;
  for (auto& p : clients) {
    acquire.Merge(p->acquire);
    handoff.Merge(p->handoff);
    release.Merge(p->release);
    total += p->cs;
    timeouts += p->timeouts;
    min_cs = std::min(min_cs, p->cs);
    max_cs = std::max(max_cs, p->cs);
  }
  absl::StatusOr<int64_t> final_value = counters[0]->Get();
  if (!final_value.ok()) return final_value.status();
  int64_t lost = total - *final_value;
  int64_t elapsed = shared.end_ns.load() - start_ns;

  Report& r = *report;
  r.Set("client", *how);
  r.Set("counter", std::string(options.counter_redis.empty() ? "in-process" : "redis"));
  r.SetInt("critical_sections", total);
  r.Set("elapsed_s", static_cast<double>(elapsed) / 1e9);
  r.Set("cs_per_s", PerSecond(total, elapsed));
  AddLatency(r, "acquire", acquire);
  r.SetInt("handoff_samples", handoff.count());
  r.Set("handoff_p50_ms", handoff.PercentileMs(50));
  r.Set("handoff_p99_ms", handoff.PercentileMs(99));
  r.Set("release_p50_ms", release.PercentileMs(50));
  r.Set("release_p99_ms", release.PercentileMs(99));
  r.SetInt("cs_per_client_min", min_cs);
  r.SetInt("cs_per_client_max", max_cs);
  r.Set("fairness", max_cs == 0 ? 0.0 : static_cast<double>(min_cs) / max_cs);
  r.SetInt("wait_timeouts", timeouts);
  r.SetInt("counter_final", *final_value);
  r.SetInt("lost_updates", lost);
  r.Set("ok", lost == 0 && total > 0);
  return report;
}

// ---------------------------------------------------------------------------
// uncontended

namespace {

struct UncontendedShared {
  int64_t deadline = 0;
  std::atomic<int64_t> end_ns{0};
  std::atomic<bool> stop{false};
  FirstError error;
};

class UncontendedClient final : public ClientLogic {
 public:
  UncontendedClient(UncontendedShared* shared, std::string owner, std::vector<std::string> names,
                    uint64_t seed)
      : shared_(shared), owner_(std::move(owner)), names_(std::move(names)), rng_(seed) {}

  const std::string& owner() const override { return owner_; }

  Op First() override { return AcquireOrStop(NowNanos()); }

  Op Next(const OpResult& r) override {
    const int64_t now = NowNanos();
    if (!r.status.ok()) {
      shared_->error.Set(r.status);
      shared_->stop = true;
      return Op{};
    }
    if (!releasing_) {
      if (!r.acquired) {
        ++not_acquired;
        return AcquireOrStop(now);
      }
      acquire.Add(now - sent_);
      sent_ = now;
      releasing_ = true;
      return Op{Op::Kind::kRelease, name_};
    }
    release.Add(now - sent_);
    ++pairs;
    return AcquireOrStop(now);
  }

  Samples acquire, release;
  int64_t pairs = 0;
  int64_t not_acquired = 0;

 private:
  Op AcquireOrStop(int64_t now) {
    if (shared_->stop.load() || now >= shared_->deadline) {
      AtomicMax(shared_->end_ns, now);
      return Op{};
    }
    name_ = &names_[rng_() % names_.size()];
    sent_ = now;
    releasing_ = false;
    return Op{Op::Kind::kAcquire, name_, absl::ZeroDuration()};
  }

  UncontendedShared* const shared_;
  const std::string owner_;
  const std::vector<std::string> names_;
  std::mt19937_64 rng_;
  const std::string* name_ = nullptr;
  bool releasing_ = false;
  int64_t sent_ = 0;
};

}  // namespace

absl::StatusOr<Report> RunUncontended(const CommonOptions& common,
                                      const UncontendedOptions& options) {
  absl::StatusOr<Report> report = NewReport(common, "uncontended");
  if (!report.ok()) return report;
  const int n = common.clients;
  UncontendedShared shared;
  std::vector<std::unique_ptr<UncontendedClient>> clients;
  std::vector<ClientLogic*> logics;
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> names;
    for (int k = 0; k < std::max(1, options.names_per_client); ++k) {
      names.push_back(absl::StrCat("uncontended-", common.run_id, "-", i, "-", k));
    }
    clients.push_back(
        std::make_unique<UncontendedClient>(&shared, Owner(common, "u", i), std::move(names),
                                            common.seed * 1000003 + static_cast<uint64_t>(i)));
    logics.push_back(clients.back().get());
  }
  int64_t start_ns = 0;
  absl::StatusOr<std::string> how = RunClients(common, logics, [&](int64_t t) {
    start_ns = t;
    shared.deadline = t + absl::ToInt64Nanoseconds(options.duration);
  });
  if (!how.ok()) return how.status();
  if (absl::Status e = shared.error.Get(); !e.ok()) return e;

  Samples acquire, release;
  int64_t pairs = 0, not_acquired = 0;
  for (auto& p : clients) {
    acquire.Merge(p->acquire);
    release.Merge(p->release);
    pairs += p->pairs;
    not_acquired += p->not_acquired;
  }
  int64_t elapsed = shared.end_ns.load() - start_ns;
  Report& r = *report;
  r.Set("client", *how);
  r.SetInt("names_per_client", options.names_per_client);
  r.SetInt("pairs", pairs);
  r.Set("elapsed_s", static_cast<double>(elapsed) / 1e9);
  r.Set("pairs_per_s", PerSecond(pairs, elapsed));
  AddLatency(r, "acquire", acquire);
  AddLatency(r, "release", release);
  r.SetInt("not_acquired", not_acquired);
  r.Set("ok", pairs > 0 && not_acquired == 0);
  return report;
}

// ---------------------------------------------------------------------------
// expiry

absl::StatusOr<Report> RunExpiry(const CommonOptions& common, const ExpiryOptions& options) {
  if (!common.direct_redis.empty()) {
    return absl::InvalidArgumentError("expiry: --direct-redis is not supported");
  }
  if (common.api == CommonOptions::Api::kSession) {
    return absl::InvalidArgumentError(
        "expiry: --api=session is not supported (a session renews its holds, so no lease ends)");
  }
  absl::StatusOr<Report> report = NewReport(common, "expiry");
  if (!report.ok()) return report;
  const int locks = std::max(1, common.clients);
  const int chain = std::max(2, options.chain);
  const absl::Duration wait = common.lease * chain + absl::Seconds(30);

  struct Grant {
    int64_t at = 0;
    uint64_t token = 0;
    bool ok = false;
  };
  std::vector<std::vector<Grant>> grants(locks, std::vector<Grant>(chain));
  std::vector<std::unique_ptr<Locker>> lockers;
  for (int i = 0; i < locks * chain; ++i) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> ch =
        NewDedicatedChannel(Target(common, i), kConnectTimeout);
    if (!ch.ok()) return ch.status();
    lockers.push_back(NewGrpcLocker(*std::move(ch), common.ns));
  }
  std::vector<absl::Notification> held(locks);
  FirstError error;
  absl::Notification go;
  std::vector<std::thread> threads;
  for (int l = 0; l < locks; ++l) {
    for (int j = 0; j < chain; ++j) {
      threads.emplace_back([&, l, j] {
        Locker& locker = *lockers[static_cast<size_t>(l * chain + j)];
        const std::string name = absl::StrCat("expiry-", common.run_id, "-", l);
        const std::string owner = Owner(common, absl::StrCat("e", l), j);
        go.WaitForNotification();
        if (j > 0) held[l].WaitForNotification();
        absl::StatusOr<AcquireOutcome> a =
            locker.Acquire(name, owner, common.lease, j == 0 ? absl::ZeroDuration() : wait);
        int64_t t = NowNanos();
        if (j == 0) held[l].Notify();
        if (!a.ok()) {
          error.Set(a.status());
          return;
        }
        // Never released: the lease has to end by itself.
        grants[l][j] = Grant{t, a->fencing_token, a->acquired};
      });
    }
  }
  go.Notify();
  for (std::thread& t : threads) t.join();
  if (absl::Status e = error.Get(); !e.ok()) return e;

  Samples delay;
  int64_t not_granted = 0;
  bool tokens_increase = true;
  double early_ms = 0;  // the most negative delay seen (0 if none)
  const int64_t lease_ns = absl::ToInt64Nanoseconds(common.lease);
  for (std::vector<Grant>& g : grants) {
    std::sort(g.begin(), g.end(), [](const Grant& a, const Grant& b) { return a.at < b.at; });
    for (size_t j = 0; j < g.size(); ++j) {
      if (!g[j].ok) {
        ++not_granted;
        continue;
      }
      if (j == 0 || !g[j - 1].ok) continue;
      if (g[j].token <= g[j - 1].token) tokens_increase = false;
      // Both times are when a reply arrived here, so the transit times
      // mostly cancel out; what is left (their difference) can make a
      // sub-millisecond delay come out slightly negative. Kept signed.
      int64_t d = g[j].at - g[j - 1].at - lease_ns;
      early_ms = std::min(early_ms, static_cast<double>(d) / 1e6);
      delay.Add(d);
    }
  }
  Report& r = *report;
  r.SetInt("locks", locks);
  r.SetInt("chain", chain);
  r.SetInt("grants_after_expiry", delay.count());
  r.Set("delay_p50_ms", delay.PercentileMs(50));
  r.Set("delay_p90_ms", delay.PercentileMs(90));
  r.Set("delay_p99_ms", delay.PercentileMs(99));
  r.Set("delay_max_ms", delay.MaxMs());
  r.Set("delay_min_ms", delay.MinMs());
  r.Set("earliest_before_lease_end_ms", early_ms);
  r.SetInt("not_granted", not_granted);
  r.Set("tokens_increase", tokens_increase);
  r.Set("ok", not_granted == 0 && tokens_increase && delay.count() > 0);
  return report;
}

}  // namespace lockd::bench
