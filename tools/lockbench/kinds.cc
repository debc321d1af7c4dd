// The scenarios of the other kinds (scenarios.h): rw, semaphore and
// acquire-all. One client logic (HoldLoopClient) runs all three; a scenario
// says what a round takes (a Planner) and what it reports.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "tools/lockbench/driver.h"
#include "tools/lockbench/scenario_util.h"
#include "tools/lockbench/scenarios.h"
#include "tools/lockbench/stats.h"

namespace lockd::bench {
namespace {

// What a client sees of one name's holders: each counts itself from the
// grant it received to the release it is about to send.
struct Occupancy {
  std::atomic<int64_t> exclusive{0};
  std::atomic<int64_t> shared{0};
  std::atomic<int64_t> permits{0};
  std::atomic<int64_t> max_shared{0};
  std::atomic<int64_t> max_permits{0};
};

// What the clients of a run share.
struct HoldLoopShared {
  HoldLoopShared(const HoldLoopOptions& o, std::vector<std::string> lock_names, uint32_t lim)
      : options(o), names(std::move(lock_names)), occupancy(names.size()), limit(lim) {}

  const HoldLoopOptions options;
  const std::vector<std::string> names;
  std::vector<Occupancy> occupancy;  // one per name
  const uint32_t limit;              // non-zero: every name is a semaphore of this limit
  int64_t deadline = 0;
  std::atomic<int64_t> end_ns{0};
  std::atomic<bool> stop{false};
  std::atomic<int64_t> violations{0};
  FirstError error;
};

// What a client takes in one round.
struct Round {
  std::vector<size_t> locks;  // indexes into names; several: one AcquireAll, in this order
  bool shared = false;
  uint32_t permits = 0;  // semaphore acquires
  int role = 0;          // the latency and count bucket (rw: 0 read, 1 write)
};
using Planner = std::function<Round(std::mt19937_64& rng)>;

class HoldLoopClient final : public ClientLogic {
 public:
  HoldLoopClient(HoldLoopShared* shared, std::string owner, Planner plan, uint64_t seed, int roles)
      : acquire(static_cast<size_t>(roles)),
        rounds(static_cast<size_t>(roles), 0),
        shared_(shared),
        owner_(std::move(owner)),
        plan_(std::move(plan)),
        rng_(seed) {}

  const std::string& owner() const override { return owner_; }

  Op First() override { return StartRound(NowNanos()); }

  Op Next(const OpResult& r) override {
    const int64_t now = NowNanos();
    if (!r.status.ok()) {
      shared_->error.Set(r.status);
      shared_->stop = true;
    }
    switch (state_) {
      case State::kAcquiring:
        if (!r.status.ok()) return Op{};
        if (!r.acquired) {
          ++timeouts;
          return StartRound(now);
        }
        acquire[round_.role].Add(now - sent_);
        Enter();
        if (shared_->options.hold <= absl::ZeroDuration()) return StartRelease(now);
        state_ = State::kHolding;
        return Op{Op::Kind::kPause, nullptr, shared_->options.hold};
      case State::kHolding:
        return StartRelease(now);
      case State::kReleasing:
        if (++released_ < round_.locks.size()) return Release();
        AtomicMax(shared_->end_ns, now);
        return StartRound(now);
    }
    return Op{};
  }

  std::vector<Samples> acquire;  // per role
  std::vector<int64_t> rounds;   // completed, per role
  int64_t timeouts = 0;
  int64_t listed_descending = 0;  // AcquireAll rounds whose names were listed in descending order

  int64_t total() const {
    int64_t n = 0;
    for (int64_t v : rounds) n += v;
    return n;
  }

 private:
  enum class State { kAcquiring, kHolding, kReleasing };

  Op StartRound(int64_t now) {
    if (shared_->stop.load() || now >= shared_->deadline) return Op{};
    round_ = plan_(rng_);
    state_ = State::kAcquiring;
    sent_ = now;
    Op op;
    op.kind = Op::Kind::kAcquire;
    op.name = &shared_->names[round_.locks[0]];
    op.wait = shared_->options.wait;
    op.shared = round_.shared;
    op.limit = shared_->limit;
    op.permits = round_.permits;
    if (round_.locks.size() > 1) {
      listed_.clear();
      for (size_t i : round_.locks) listed_.push_back(shared_->names[i]);
      if (!std::is_sorted(listed_.begin(), listed_.end())) ++listed_descending;
      op.kind = Op::Kind::kAcquireAll;
      op.name = nullptr;
      op.names = &listed_;
    }
    return op;
  }

  Op StartRelease(int64_t now) {
    Leave();
    ++rounds[round_.role];
    if (now >= shared_->deadline) shared_->stop = true;
    state_ = State::kReleasing;
    released_ = 0;
    return Release();
  }

  Op Release() { return Op{Op::Kind::kRelease, &shared_->names[round_.locks[released_]]}; }

  // Counts this client among the holders of its round's names and checks
  // the others it finds there.
  void Enter() {
    for (size_t i : round_.locks) {
      Occupancy& o = shared_->occupancy[i];
      bool broken = false;
      if (shared_->limit > 0) {
        const int64_t k = std::max<uint32_t>(1, round_.permits);
        const int64_t held = o.permits.fetch_add(k) + k;
        AtomicMax(o.max_permits, held);
        broken = held > shared_->limit;
      } else if (round_.shared) {
        AtomicMax(o.max_shared, o.shared.fetch_add(1) + 1);
        broken = o.exclusive.load() > 0;
      } else {
        broken = o.exclusive.fetch_add(1) > 0 || o.shared.load() > 0;
      }
      if (broken) ++shared_->violations;
    }
  }

  void Leave() {
    for (size_t i : round_.locks) {
      Occupancy& o = shared_->occupancy[i];
      if (shared_->limit > 0) {
        o.permits -= std::max<uint32_t>(1, round_.permits);
      } else if (round_.shared) {
        --o.shared;
      } else {
        --o.exclusive;
      }
    }
  }

  HoldLoopShared* const shared_;
  const std::string owner_;
  const Planner plan_;
  std::mt19937_64 rng_;
  State state_ = State::kAcquiring;
  Round round_;
  std::vector<std::string> listed_;  // the AcquireAll's names, in the listed order
  size_t released_ = 0;
  int64_t sent_ = 0;
};

// What a run of HoldLoopClients measured.
struct HoldLoopRun {
  std::string how;  // how the clients ran
  int64_t elapsed_ns = 0;
  std::vector<std::unique_ptr<HoldLoopClient>> clients;

  int64_t total() const {
    int64_t n = 0;
    for (const auto& c : clients) n += c->total();
    return n;
  }
};

absl::Status UnaryEventLoopsOnly(const CommonOptions& c, absl::string_view scenario) {
  if (c.api == CommonOptions::Api::kSession || c.sync_client || !c.direct_redis.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        scenario,
        ": runs with unary calls on event loops only (not --api=session, --sync-client or "
        "--direct-redis)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<HoldLoopRun> RunHoldLoop(const CommonOptions& c, HoldLoopShared& shared,
                                        absl::string_view role, const Planner& plan, int roles) {
  HoldLoopRun run;
  std::vector<ClientLogic*> logics;
  for (int i = 0; i < c.clients; ++i) {
    run.clients.push_back(std::make_unique<HoldLoopClient>(
        &shared, Owner(c, role, i), plan, c.seed * 1000003 + static_cast<uint64_t>(i), roles));
    logics.push_back(run.clients.back().get());
  }
  int64_t start_ns = 0;
  absl::StatusOr<std::string> how = RunClients(c, logics, [&](int64_t t) {
    start_ns = t;
    shared.deadline = t + absl::ToInt64Nanoseconds(shared.options.duration);
  });
  if (!how.ok()) return how.status();
  if (absl::Status e = shared.error.Get(); !e.ok()) return e;
  run.how = *how;
  run.elapsed_ns = shared.end_ns.load() - start_ns;
  return run;
}

// The figures every hold-loop scenario reports; `role_names` names the
// roles' latency prefixes when there are several.
void AddHoldLoopFigures(Report& r, const HoldLoopShared& shared, HoldLoopRun& run,
                        const std::vector<std::string>& role_names) {
  Samples all;
  std::vector<Samples> per_role(role_names.size());
  int64_t timeouts = 0, min_cs = INT64_MAX, max_cs = 0;
  for (auto& c : run.clients) {
    for (size_t k = 0; k < per_role.size(); ++k) {
      all.Merge(c->acquire[k]);
      per_role[k].Merge(c->acquire[k]);
    }
    timeouts += c->timeouts;
    min_cs = std::min(min_cs, c->total());
    max_cs = std::max(max_cs, c->total());
  }
  const int64_t total = run.total();
  r.Set("client", run.how);
  r.Set("hold_ms", absl::ToDoubleMilliseconds(shared.options.hold));
  r.SetInt("critical_sections", total);
  r.Set("elapsed_s", static_cast<double>(run.elapsed_ns) / 1e9);
  r.Set("cs_per_s", PerSecond(total, run.elapsed_ns));
  AddLatency(r, "acquire", all);
  if (role_names.size() > 1) {
    for (size_t k = 0; k < role_names.size(); ++k) {
      int64_t n = 0;
      for (auto& c : run.clients) n += c->rounds[k];
      r.SetInt(role_names[k] + "s", n);
      AddLatency(r, role_names[k] + "_acquire", per_role[k]);
    }
  }
  r.SetInt("cs_per_client_min", min_cs);
  r.SetInt("cs_per_client_max", max_cs);
  r.Set("fairness", max_cs == 0 ? 0.0 : static_cast<double>(min_cs) / max_cs);
  r.SetInt("wait_timeouts", timeouts);
  r.SetInt("exclusion_violations", shared.violations.load());
}

}  // namespace

absl::StatusOr<Report> RunRw(const CommonOptions& common, const RwOptions& options) {
  if (absl::Status s = UnaryEventLoopsOnly(common, "rw"); !s.ok()) return s;
  absl::StatusOr<Report> report = NewReport(common, "rw");
  if (!report.ok()) return report;
  HoldLoopShared shared(options.loop, {absl::StrCat("rw-", common.run_id)}, 0);
  const double readers = options.readers;
  const bool shared_reads = !options.exclusive_reads;
  Planner plan = [readers, shared_reads](std::mt19937_64& rng) {
    const bool read = std::uniform_real_distribution<double>(0, 1)(rng) < readers;
    return Round{{0}, read && shared_reads, 0, read ? 0 : 1};
  };
  absl::StatusOr<HoldLoopRun> run = RunHoldLoop(common, shared, "rw", plan, 2);
  if (!run.ok()) return run.status();

  Report& r = *report;
  r.Set("readers", readers);
  r.Set("read_mode", std::string(shared_reads ? "shared" : "exclusive"));
  AddHoldLoopFigures(r, shared, *run, {"read", "write"});
  const int64_t max_readers = shared.occupancy[0].max_shared.load();
  r.SetInt("max_concurrent_readers", max_readers);
  // With shared reads, several clients and a hold, readers must be seen
  // holding together: that is what a read lock is for.
  const bool overlap_expected =
      shared_reads && readers > 0 && common.clients > 1 && options.loop.hold > absl::ZeroDuration();
  r.Set("readers_overlap", max_readers > 1);
  r.Set("ok", run->total() > 0 && shared.violations.load() == 0 &&
                  (!overlap_expected || max_readers > 1));
  return report;
}

absl::StatusOr<Report> RunSemaphore(const CommonOptions& common, const SemaphoreOptions& options) {
  if (absl::Status s = UnaryEventLoopsOnly(common, "semaphore"); !s.ok()) return s;
  if (options.limit < 1 || options.permits < 1 || options.permits > options.limit) {
    return absl::InvalidArgumentError("semaphore: need 1 <= permits <= limit");
  }
  absl::StatusOr<Report> report = NewReport(common, "semaphore");
  if (!report.ok()) return report;
  HoldLoopShared shared(options.loop, {absl::StrCat("semaphore-", common.run_id)}, options.limit);
  const uint32_t permits = options.permits;
  Planner plan = [permits](std::mt19937_64&) { return Round{{0}, false, permits, 0}; };
  absl::StatusOr<HoldLoopRun> run = RunHoldLoop(common, shared, "s", plan, 1);
  if (!run.ok()) return run.status();

  Report& r = *report;
  r.SetInt("limit", options.limit);
  r.SetInt("permits", options.permits);
  AddHoldLoopFigures(r, shared, *run, {"acquire"});
  r.SetInt("max_permits_held", shared.occupancy[0].max_permits.load());
  r.Set("ok", run->total() > 0 && shared.violations.load() == 0);
  return report;
}

absl::StatusOr<Report> RunAcquireAll(const CommonOptions& common,
                                     const AcquireAllOptions& options) {
  if (absl::Status s = UnaryEventLoopsOnly(common, "acquire-all"); !s.ok()) return s;
  if (options.names < 2) return absl::InvalidArgumentError("acquire-all: --names must be >= 2");
  absl::StatusOr<Report> report = NewReport(common, "acquire-all");
  if (!report.ok()) return report;
  std::vector<std::string> names;
  // Zero-padded, so that the names sort as their indexes do.
  for (int i = 0; i < options.names; ++i) {
    names.push_back(absl::StrFormat("all-%s-%04d", common.run_id, i));
  }
  HoldLoopShared shared(options.loop, std::move(names), 0);
  const size_t n = static_cast<size_t>(options.names);
  Planner plan = [n](std::mt19937_64& rng) {
    size_t a = rng() % n;
    size_t b = rng() % (n - 1);
    if (b >= a) ++b;
    return Round{{a, b}, false, 0, 0};
  };
  absl::StatusOr<HoldLoopRun> run = RunHoldLoop(common, shared, "a", plan, 1);
  if (!run.ok()) return run.status();

  Report& r = *report;
  r.SetInt("names", options.names);
  AddHoldLoopFigures(r, shared, *run, {"acquire"});
  int64_t descending = 0;
  for (auto& c : run->clients) descending += c->listed_descending;
  r.SetInt("listed_descending", descending);
  r.Set("ok", run->total() > 0 && shared.violations.load() == 0);
  return report;
}

}  // namespace lockd::bench
