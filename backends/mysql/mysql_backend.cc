#include "backends/mysql/mysql_backend.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "backends/common/errors.h"
#include "backends/common/list_pages.h"
#include "backends/common/timer_queue.h"
#include "backends/common/wait_engine.h"
#include "backends/mysql/mysql_client.h"
#include "backends/mysql/mysql_connection.h"
#include "backends/mysql/mysql_renew_many.h"
#include "backends/mysql/mysql_schema.h"
#include "backends/mysql/mysql_sweeper.h"
#include "util/log.h"

namespace lockd {
namespace {

using mysql::Connection;
using mysql::DbHealth;
using mysql::Jitter;
using mysql::ParseField;
using mysql::UnavailableUnlessBug;
using mysql::Unexpected;
using mysql::WorkerPool;

// While the database is unreachable the sweeper, which doubles as the health
// probe, runs at least this often.
constexpr absl::Duration kUnhealthyProbe = absl::Milliseconds(250);
// A demand row lives this many backoff caps past its last renewal.
constexpr int kDemandLife = 3;

std::string NewReplicaId() {
  absl::BitGen gen;
  return absl::StrFormat("%016x", absl::Uniform<uint64_t>(gen));
}

// Waiting is the WaitEngine's; this class supplies its attempts (the acquire
// procedure), paces the polling of each lock's head (Pace), and hands a lock
// to this replica's first waiter inside the release that frees it.
class MysqlBackend final : public Backend, private LockStrategy {
 public:
  MysqlBackend(const MysqlOptions& options, MysqlSchema schema)
      : options_(options),
        schema_(std::move(schema)),
        replica_(NewReplicaId()),
        fast_poll_(std::min(options.max_retry, options.initial_retry * 4)),
        hold_back_(fast_poll_ * 2.5),
        timers_(std::make_unique<TimerQueue>()),
        engine_(static_cast<LockStrategy*>(this), timers_.get(), options.max_waiters),
        pool_(options.pool_size, &options_, &health_) {
    absl::MutexLock l(&mu_);
    ScheduleSweepLocked(options_.sweep_interval);
  }

  ~MysqlBackend() override { Shutdown(); }

  absl::string_view name() const override { return "mysql"; }

  void Acquire(AcquireParams params, std::shared_ptr<CancelSignal> cancel,
               Callback<AcquireResult> done) override {
    if (absl::Status s = ExclusiveLocksOnly(params, name()); !s.ok()) {
      std::move(done)(s);
      return;
    }
    engine_.Acquire(std::move(params), std::move(cancel), std::move(done));
  }

  void Release(ReleaseParams params, Callback<ReleaseResult> done) override {
    RunOnConnection(std::move(done), [this, params = std::move(params)](Connection& s) {
      // This replica's first waiter, if any, is handed the lock in the
      // release's own transaction.
      std::optional<WaitEngine::Head> next = engine_.TakeHead(params.key);
      bool clear_demand = false;
      if (next.has_value()) {
        absl::MutexLock l(&mu_);
        auto it = paces_.find(params.key);
        clear_demand = it != paces_.end() && it->second.demand_written;
      }
      ReleaseOutcome out;
      absl::StatusOr<ReleaseResult> r =
          DoRelease(s, params, next.has_value() ? &next->params() : nullptr, clear_demand, &out);
      // The waiter is answered before the releaser, whose next Acquire then
      // queues behind the rest.
      if (next.has_value()) {
        TryResult a{AcquireResult{}};
        if (out.next_token != 0) {
          a.result->acquired = true;
          a.result->fencing_token = out.next_token;
          a.result->hold_count = 1;
          a.result->ttl = next->params().ttl;
          OnGranted(params.key);
        } else if (out.yielded) {
          HoldBack(params.key);
        }
        engine_.FinishHead(*std::move(next), std::move(a));
      } else if (out.freed) {
        Wake(params.key, out.yielded);
      }
      return r;
    });
  }

  void ForceRelease(ForceReleaseParams params, Callback<ForceReleaseResult> done) override {
    RunOnConnection(std::move(done), [this, params = std::move(params)](Connection& s) {
      absl::StatusOr<ForceReleaseResult> r = DoForceRelease(s, params);
      if (r.ok() && r->released) Wake(params.key, /*yielded=*/false);
      return r;
    });
  }

  void Renew(RenewParams params, Callback<RenewResult> done) override {
    RunOnConnection(std::move(done), [this, params = std::move(params)](Connection& s) {
      return DoRenew(s, params);
    });
  }

  // Coalesced with other calls' renewals into batches (mysql_renew_many.h).
  void RenewMany(std::vector<RenewParams> params, RenewManyCallback done) override {
    if (IsShutdown()) {
      std::move(done)(std::vector<absl::StatusOr<RenewResult>>(params.size(), ShuttingDownError()));
      return;
    }
    renewals_.Add(std::move(params), std::move(done));
  }

  void Describe(LockKey key, Callback<LockState> done) override {
    RunOnConnection(std::move(done),
                    [this, key = std::move(key)](Connection& s) { return DoDescribe(s, key); });
  }

  void List(ListParams params, Callback<ListResult> done) override {
    RunOnConnection(std::move(done), [this, params = std::move(params)](Connection& s) {
      return DoList(s, params);
    });
  }

  absl::Status Health() const override {
    if (IsShutdown()) return ShuttingDownError();
    return health_.status();
  }

  void Shutdown() override {
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) return;
      shutdown_ = true;
      if (sweep_timer_ != 0) timers_->Cancel(sweep_timer_);
    }
    engine_.Shutdown();
    // Queued jobs answer ShuttingDownError(); running ones finish (at most
    // the client's read timeout) before the threads are joined.
    pool_.Close();
    // Joins the timer thread; its callbacks see shutdown_ and return.
    timers_.reset();
  }

 private:
  // How this replica's head waiter on one lock polls, and takes turns with
  // other replicas (MysqlOptions::fair_slice). Exists while the engine has
  // waiters on the lock.
  struct Pace {
    absl::Duration backoff;
    bool demand_written = false;  // this replica's demand row may exist
    SteadyClock::time_point demand_refreshed;
    // Since when the head has found the lock held by others, unbroken.
    std::optional<SteadyClock::time_point> waiting_since;
    // After yielding the lock: no local attempt before this.
    SteadyClock::time_point hold_until;
  };

  bool IsShutdown() const {
    absl::MutexLock l(&mu_);
    return shutdown_;
  }

  // Answers `done` with `work` run on a pooled connection, or with
  // ShuttingDownError() once the backend is shut down (also when it shuts
  // down before a connection is free).
  template <typename T, typename Work>
  void RunOnConnection(Callback<T> done, Work work) {
    if (IsShutdown()) {
      std::move(done)(ShuttingDownError());
      return;
    }
    pool_.Submit([done = std::move(done), work = std::move(work)](Connection* s) mutable {
      if (s == nullptr) {
        std::move(done)(ShuttingDownError());
        return;
      }
      std::move(done)(work(*s));
    });
  }

  Pace& PaceLocked(const LockKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto [it, inserted] = paces_.try_emplace(key);
    if (inserted) it->second.backoff = options_.initial_retry;
    return it->second;
  }

  // ---- Statements ----

  // `poll`: the lock is probably held; look before locking its row.
  // `demand_us`: record this replica's demand for the lock for that long (0:
  // not now); `clear_demand`: a grant ends this replica's recorded demand.
  TryResult TryAcquire(Connection& s, const AcquireParams& p, bool may_take, bool poll,
                       int64_t demand_us, bool clear_demand) {
    std::string sql = absl::StrCat(
        "CALL ", schema_.acquire_proc(), "(", SqlBytes(p.key.ns), ",", SqlBytes(p.key.name), ",",
        SqlBytes(p.owner), ",", absl::ToInt64Microseconds(p.ttl), ",", SqlBytes(p.request_id), ",",
        may_take ? 1 : 0, ",", poll ? 1 : 0, ",", SqlBytes(replica_), ",", demand_us, ",",
        clear_demand ? 1 : 0, ")");
    absl::StatusOr<MysqlResult> r =
        s.Run(sql, absl::StrCat("acquire of lock ", LockName(p.key)), Connection::kGrant);
    if (!r.ok()) return TryResult{UnavailableUnlessBug(r.status())};
    int64_t outcome, hold, micros;
    uint64_t token;
    if (r->rows.size() != 1 || !ParseField(r->rows[0], 0, &outcome) ||
        !ParseField(r->rows[0], 2, &hold) || !ParseField(r->rows[0], 3, &token) ||
        !ParseField(r->rows[0], 4, &micros) || !r->rows[0][1].has_value()) {
      return TryResult{Unexpected("acquire", p.key)};
    }
    AcquireResult a;
    a.current.key = p.key;
    switch (outcome) {
      case kAcquireGranted:
      case kAcquireReplayed:
        a.acquired = true;
        a.fencing_token = token;
        a.hold_count = static_cast<uint32_t>(hold);
        a.ttl = outcome == kAcquireGranted ? p.ttl : absl::Microseconds(micros);
        a.current = LockState{};
        return TryResult{a};
      case kAcquireHeld:
        a.current.held = true;
        a.current.owner = *r->rows[0][1];
        a.current.hold_count = static_cast<uint32_t>(hold);
        a.current.fencing_token = token;
        a.current.ttl_remaining = absl::Microseconds(std::max<int64_t>(micros, 0));
        return TryResult{a, a.current.ttl_remaining};
      case kAcquireDeferred:
        return TryResult{a, absl::ZeroDuration()};
      default:
        return TryResult{Unexpected("acquire", p.key)};
    }
  }

  struct ReleaseOutcome {
    bool freed = false;       // this call freed the lock (not a replay)
    uint64_t next_token = 0;  // the token handed to `next`, or 0
    bool yielded = false;     // freed for another replica's waiters
  };

  // Gives up one hold. If that frees the lock and `n` is not null, grants
  // it to n's owner in the same transaction, unless another replica's
  // waiters have waited longer than the fairness slice (then it yields).
  absl::StatusOr<ReleaseResult> DoRelease(Connection& s, const ReleaseParams& p,
                                          const AcquireParams* n, bool clear_demand,
                                          ReleaseOutcome* out) {
    std::string sql = absl::StrCat(
        "CALL ", schema_.release_proc(), "(", SqlBytes(p.key.ns), ",", SqlBytes(p.key.name), ",",
        SqlBytes(p.owner), ",", SqlBytes(p.request_id), ",",
        absl::ToInt64Microseconds(options_.release_memory), ",", SqlBytes(n ? n->owner : ""), ",",
        n ? absl::ToInt64Microseconds(n->ttl) : 0, ",", SqlBytes(n ? n->request_id : ""), ",",
        SqlBytes(replica_), ",", absl::ToInt64Microseconds(options_.fair_slice), ",",
        n && clear_demand ? 1 : 0, ",", SqlBytes(p.acquire_request_id), ",", p.fencing_token, ")");
    absl::StatusOr<MysqlResult> r =
        s.Run(sql, absl::StrCat("release of lock ", LockName(p.key)), Connection::kWrite);
    if (!r.ok()) return UnavailableUnlessBug(r.status());
    int64_t outcome, hold, yielded;
    if (r->rows.size() != 1 || !ParseField(r->rows[0], 0, &outcome) ||
        !ParseField(r->rows[0], 1, &hold) || !ParseField(r->rows[0], 2, &out->next_token) ||
        !ParseField(r->rows[0], 3, &yielded)) {
      return Unexpected("release", p.key);
    }
    out->yielded = yielded != 0;
    switch (outcome) {
      case kReleaseDecremented:
      case kReleaseReplayed:
      case kReleaseNothingToUndo:
        return ReleaseResult{false, static_cast<uint32_t>(hold)};
      case kReleaseFreed:
        out->freed = true;
        return ReleaseResult{true, 0};
      case kReleaseReplayedFreed:
        return ReleaseResult{true, 0};
      case kReleaseOtherOwner:
        return HeldByOtherError(p.key);
      case kReleaseFree:
        return LockFreeError(p.key);
      case kReleaseOtherHold:
        return OtherHoldError(p.key);
      default:
        return Unexpected("release", p.key);
    }
  }

  absl::StatusOr<RenewResult> DoRenew(Connection& s, const RenewParams& p) {
    std::string sql = absl::StrCat("CALL ", schema_.renew_proc(), "(", SqlBytes(p.key.ns), ",",
                                   SqlBytes(p.key.name), ",", SqlBytes(p.owner), ",",
                                   absl::ToInt64Microseconds(p.ttl), ",", p.fencing_token, ")");
    absl::StatusOr<MysqlResult> r =
        s.Run(sql, absl::StrCat("renew of lock ", LockName(p.key)), Connection::kWrite);
    if (!r.ok()) return UnavailableUnlessBug(r.status());
    int64_t outcome;
    uint64_t token;
    if (r->rows.size() != 1 || !ParseField(r->rows[0], 0, &outcome) ||
        !ParseField(r->rows[0], 1, &token)) {
      return Unexpected("renew", p.key);
    }
    switch (outcome) {
      case kRenewRenewed:
        return RenewResult{p.ttl, token};
      case kRenewOtherOwner:
        return HeldByOtherError(p.key);
      case kRenewFree:
        return LockFreeError(p.key);
      case kRenewOtherHold:
        return OtherHoldError(p.key);
      default:
        return Unexpected("renew", p.key);
    }
  }

  // Fills `state` from (owner, hold_count, token, remaining_us) at `col`.
  static bool ParseHolder(const MysqlRow& row, size_t col, LockState* state) {
    int64_t hold, micros;
    uint64_t token;
    if (!row[col].has_value() || !ParseField(row, col + 1, &hold) ||
        !ParseField(row, col + 2, &token) || !ParseField(row, col + 3, &micros)) {
      return false;
    }
    state->held = true;
    state->owner = *row[col];
    state->hold_count = static_cast<uint32_t>(hold);
    state->fencing_token = token;
    state->ttl_remaining = absl::Microseconds(std::max<int64_t>(micros, 0));
    return true;
  }

  // Reads the holding, then deletes exactly that holding (its token names
  // it), so a grant that slips in between is never the one freed; retried
  // when that happens. The lock's token counter is untouched, so the next
  // grant's token is larger.
  absl::StatusOr<ForceReleaseResult> DoForceRelease(Connection& s, const ForceReleaseParams& p) {
    for (int attempt = 0;; ++attempt) {
      absl::StatusOr<LockState> held = DoDescribe(s, p.key);
      if (!held.ok()) return held.status();
      ForceReleaseResult out;
      out.previous = *std::move(held);
      if (!out.previous.held) return out;
      if (p.fencing_token != 0 && out.previous.fencing_token != p.fencing_token) {
        return FencingTokenMismatchError(p.key, p.fencing_token, out.previous.fencing_token);
      }
      std::string sql = absl::StrCat(
          "DELETE FROM ", schema_.locks(), " WHERE ns = ", SqlBytes(p.key.ns),
          " AND name = ", SqlBytes(p.key.name), " AND token = ", out.previous.fencing_token);
      absl::StatusOr<MysqlResult> r =
          s.Run(sql, absl::StrCat("force release of lock ", LockName(p.key)), Connection::kWrite);
      if (!r.ok()) return UnavailableUnlessBug(r.status());
      if (r->affected_rows == 1) {
        out.released = true;
        return out;
      }
      if (attempt == 2) return Unexpected("force release", p.key);
    }
  }

  absl::StatusOr<LockState> DoDescribe(Connection& s, const LockKey& key) {
    std::string sql = absl::StrCat(
        "SELECT owner, hold_count, token, TIMESTAMPDIFF(MICROSECOND, NOW(6), expires_at) FROM ",
        schema_.locks(), " WHERE ns = ", SqlBytes(key.ns), " AND name = ", SqlBytes(key.name),
        " AND expires_at > NOW(6)");
    absl::StatusOr<MysqlResult> r =
        s.Run(sql, absl::StrCat("describe of lock ", LockName(key)), Connection::kRead);
    if (!r.ok()) return UnavailableUnlessBug(r.status());
    LockState state;
    state.key = key;
    if (r->rows.size() > 1 || (r->rows.size() == 1 && !ParseHolder(r->rows[0], 0, &state))) {
      return Unexpected("describe", key);
    }
    state.waiters = engine_.Waiting(key);
    return state;
  }

  absl::StatusOr<ListResult> DoList(Connection& s, const ListParams& p) {
    std::string sql = absl::StrCat(
        "SELECT name, owner, hold_count, token, TIMESTAMPDIFF(MICROSECOND, NOW(6), expires_at)"
        " FROM ",
        schema_.locks(), " WHERE ns = ", SqlBytes(p.ns), " AND expires_at > NOW(6)");
    if (!p.prefix.empty()) {
      absl::StrAppend(&sql, " AND name LIKE ", SqlBytes(absl::StrCat(EscapeLike(p.prefix), "%")),
                      " ESCAPE '!'");
    }
    if (!p.page_token.empty()) absl::StrAppend(&sql, " AND name > ", SqlBytes(p.page_token));
    absl::StrAppend(&sql, " ORDER BY name LIMIT ", static_cast<uint64_t>(p.page_size) + 1);
    absl::StatusOr<MysqlResult> r =
        s.Run(sql, absl::StrCat("list of namespace \"", p.ns, "\""), Connection::kRead);
    if (!r.ok()) return UnavailableUnlessBug(r.status());
    std::vector<LockState> held;
    for (const MysqlRow& row : r->rows) {
      LockState state;
      if (!row[0].has_value()) return Unexpected("list", LockKey{p.ns, ""});
      state.key = LockKey{p.ns, *row[0]};
      if (!ParseHolder(row, 1, &state)) return Unexpected("list", state.key);
      state.waiters = engine_.Waiting(state.key);
      held.push_back(std::move(state));
    }
    return PageOf(std::move(held), p.page_size);
  }

  // ---- LockStrategy (the WaitEngine's side) ----

  void TryOnce(const AcquireParams& params, TryKind kind,
               absl::AnyInvocable<void(TryResult) &&> done) override {
    const bool head = kind == TryKind::kHead;
    const bool may_take = kind == TryKind::kFirst || head;
    int64_t demand_us = 0;
    bool clear_demand = false;
    if (head) {
      bool held_back;
      {
        absl::MutexLock l(&mu_);
        Pace& pace = PaceLocked(params.key);
        held_back = SteadyClock::now() < pace.hold_until;
        // Demand is recorded (renewed) at most every half backoff cap.
        if (options_.fair_slice > absl::ZeroDuration() &&
            SteadyClock::now() - pace.demand_refreshed >=
                absl::ToChronoNanoseconds(options_.max_retry / 2)) {
          demand_us = absl::ToInt64Microseconds(kDemandLife * options_.max_retry);
        }
        clear_demand = pace.demand_written;
      }
      if (held_back) {
        // Yielded a moment ago: not this replica's turn (NextTry waits).
        AcquireResult r;
        r.current.key = params.key;
        std::move(done)(TryResult{r, absl::ZeroDuration()});
        return;
      }
    }
    // `params` lives until `done` is called.
    pool_.Submit([this, p = &params, may_take, poll = kind != TryKind::kFirst, head, demand_us,
                  clear_demand, done = std::move(done)](Connection* s) mutable {
      if (s == nullptr) {
        std::move(done)(TryResult{ShuttingDownError()});
        return;
      }
      TryResult a = TryAcquire(*s, *p, may_take, poll, demand_us, clear_demand);
      if (head) OnHeadAttempt(p->key, demand_us, a);
      std::move(done)(std::move(a));
    });
  }

  // Records what a head's attempt told the database about this replica's
  // demand for the lock.
  void OnHeadAttempt(const LockKey& key, int64_t demand_us, const TryResult& a) {
    if (!a.result.ok()) return;
    if (a.result->acquired) {
      OnGranted(key);
      return;
    }
    if (!a.result->current.held) return;
    absl::MutexLock l(&mu_);
    Pace& pace = PaceLocked(key);
    SteadyClock::time_point now = SteadyClock::now();
    if (demand_us > 0) {
      pace.demand_written = true;
      pace.demand_refreshed = now;
    }
    if (!pace.waiting_since.has_value()) pace.waiting_since = now;
  }

  // A local waiter was granted `key`: its polling starts over, and the grant
  // ended this replica's recorded demand.
  void OnGranted(const LockKey& key) {
    absl::MutexLock l(&mu_);
    Pace& pace = PaceLocked(key);
    pace.backoff = options_.initial_retry;
    pace.demand_written = false;
    pace.waiting_since.reset();
  }

  // A release through this replica yielded `key` to another replica's
  // waiters: local waiters hold back long enough for them to take it.
  void HoldBack(const LockKey& key) {
    absl::MutexLock l(&mu_);
    Pace& pace = PaceLocked(key);
    pace.backoff = options_.initial_retry;
    pace.hold_until = SteadyAfter(hold_back_);
  }

  // A release through this replica freed `key`: its first waiter tries now
  // (or, if the release yielded to another replica, after the hold-back).
  void Wake(const LockKey& key, bool yielded) {
    if (yielded) {
      HoldBack(key);
    } else {
      absl::MutexLock l(&mu_);
      auto it = paces_.find(key);
      if (it != paces_.end()) it->second.backoff = options_.initial_retry;
    }
    engine_.Wake(key);
  }

  void Current(const LockKey& key, Callback<LockState> done) override {
    pool_.Submit([this, key, done = std::move(done)](Connection* s) mutable {
      if (s == nullptr) {
        std::move(done)(ShuttingDownError());
        return;
      }
      std::move(done)(DoDescribe(*s, key));
    });
  }

  // No notifications reach other replicas' waiters: heads poll, backing off
  // from initial_retry to max_retry, but never past the holder's lease end.
  absl::Duration NextTry(const LockKey& key, TryKind after, const TryResult& last) override {
    absl::MutexLock l(&mu_);
    Pace& pace = PaceLocked(key);
    const SteadyClock::time_point now = SteadyClock::now();
    if (now < pace.hold_until) return absl::FromChrono(pace.hold_until - now);
    const bool lost = last.result.ok()
                          ? !last.result->acquired
                          : last.result.status().code() == absl::StatusCode::kUnavailable;
    if (after != TryKind::kHead || !lost) {
      // The next waiter polls while the new holder works, unless the
      // holder's release through this replica wakes it first.
      return RetryDelay(pace.backoff, last);
    }
    pace.backoff = std::min(pace.backoff * 2, options_.max_retry);
    absl::Duration delay = RetryDelay(pace.backoff, last);
    // Waited a slice: the holder's replica is about to yield; look often so
    // that the turn is not lost.
    if (pace.waiting_since.has_value() && options_.fair_slice > absl::ZeroDuration() &&
        now - *pace.waiting_since > absl::ToChronoNanoseconds(options_.fair_slice)) {
      delay = std::min(delay, Jitter(fast_poll_));
    }
    return delay;
  }

  void KeyIdle(const LockKey& key) override {
    absl::MutexLock l(&mu_);
    paces_.erase(key);
  }

  // The backoff, or the end of the holder's lease if that comes first.
  static absl::Duration RetryDelay(absl::Duration backoff, const TryResult& last) {
    absl::Duration d = Jitter(backoff);
    if (last.result.ok() && !last.result->acquired &&
        last.holder_remaining < absl::InfiniteDuration()) {
      // Just after the lease ends by the database clock: retrying at the
      // instant itself would usually find it still live.
      d = std::min(d, last.holder_remaining + absl::Milliseconds(1));
    }
    return std::max(d, absl::ZeroDuration());
  }

  // ---- Sweeper ----

  void ScheduleSweepLocked(absl::Duration delay) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    sweep_timer_ = timers_->Schedule(delay, [this] {
      {
        absl::MutexLock l(&mu_);
        if (shutdown_) return;
        sweep_timer_ = 0;
      }
      pool_.Submit([this](Connection* s) {
        if (s == nullptr) return;
        sweeper_.Run(*s);
        absl::MutexLock l(&mu_);
        if (shutdown_) return;
        ScheduleSweepLocked(health_.status().ok()
                                ? options_.sweep_interval
                                : std::min(options_.sweep_interval, kUnhealthyProbe));
      });
    });
  }

  // Constant after construction.
  const MysqlOptions options_;
  const MysqlSchema schema_;
  // This backend's name in <prefix>demand rows.
  const std::string replica_;
  // The poll interval of a head that has waited a fairness slice, and how
  // long a replica that yielded keeps its own waiters back: long enough for
  // such a head on another replica to poll twice.
  const absl::Duration fast_poll_;
  const absl::Duration hold_back_;
  DbHealth health_;
  // Reset (thread joined) by Shutdown(), after the engine is shut down.
  std::unique_ptr<TimerQueue> timers_;

  // Lock order: the engine's mutex, then mu_ (the engine calls NextTry and
  // KeyIdle with its own held; this class never calls the engine under mu_).
  mutable absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<LockKey, Pace> paces_ ABSL_GUARDED_BY(mu_);
  TimerQueue::TimerId sweep_timer_ ABSL_GUARDED_BY(mu_) = 0;
  // Only the sweep job (one at a time) uses it.
  mysql::Sweeper sweeper_{&options_, &schema_};

  WaitEngine engine_;
  // Submits jobs to pool_ (constructed next; the batcher only keeps its
  // address until then).
  mysql::RenewBatcher renewals_{&pool_, &schema_, std::max<size_t>(1, options_.pool_size / 4)};
  // Last: its threads use everything above.
  WorkerPool pool_;
};

// The ranges are MysqlOptionSet()'s; these are the rules that relate
// members or look inside strings.
absl::Status CheckOptions(const MysqlOptions& o) {
  if (absl::Status s = MysqlOptionSet().Check(o); !s.ok()) return s;
  auto bad = [](absl::string_view key, absl::string_view rule) {
    return absl::InvalidArgumentError(absl::StrCat("mysql.", key, ": ", rule));
  };
  if (o.socket.empty() && o.host.empty()) return bad("host", "must not be empty");
  if (o.socket.empty() && (o.port < 1 || o.port > 65535)) {
    return bad("port", "must be in [1, 65535]");
  }
  if (o.user.empty()) return bad("user", "must not be empty");
  if (o.database.empty() || o.database.size() > 64 ||
      o.database.find_first_of(std::string("`\0/\\.", 5)) != std::string::npos) {
    return bad("database", "must be 1-64 characters without `, /, \\, . or NUL");
  }
  if (o.ssl_mode == MysqlSslMode::kVerifyIdentity && o.ssl_ca.empty()) {
    return bad("ssl_ca", "is required when mysql.ssl_mode is verify_identity");
  }
  if (o.ssl_cert.empty() != o.ssl_key.empty()) {
    return bad(o.ssl_cert.empty() ? "ssl_cert" : "ssl_key",
               "mysql.ssl_cert and mysql.ssl_key must be set together");
  }
  if (o.initial_retry <= absl::ZeroDuration() || o.max_retry < o.initial_retry) {
    return absl::InvalidArgumentError("mysql retry backoff: need 0 < initial_retry <= max_retry");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> NewMysqlBackend(const MysqlOptions& options) {
  absl::Status s = CheckOptions(options);
  if (!s.ok()) return s;
  absl::StatusOr<MysqlSchema> schema = MysqlSchema::ForPrefix(options.table_prefix);
  if (!schema.ok()) return schema.status();
  std::string where =
      options.socket.empty() ? absl::StrCat(options.host, ":", options.port) : options.socket;

  unsigned code = 0;
  absl::StatusOr<std::unique_ptr<MysqlConnection>> conn =
      MysqlConnection::Connect(options, /*use_database=*/true, &code);
  if (!conn.ok() && code == 1049) {  // ER_BAD_DB_ERROR: create it if we may
    absl::StatusOr<std::unique_ptr<MysqlConnection>> bare =
        MysqlConnection::Connect(options, /*use_database=*/false);
    if (!bare.ok()) return bare.status();
    MysqlOutcome o = (*bare)->Query(
        absl::StrCat("CREATE DATABASE IF NOT EXISTS `", options.database, "`"), "create database");
    if (!o.result.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "mysql: database \"", options.database,
          "\" does not exist and could not be created: ", o.result.status().message()));
    }
    conn = MysqlConnection::Connect(options, /*use_database=*/true);
  }
  if (!conn.ok()) return conn.status();
  s = EnsureSchema(**conn, *schema, options.database, options.table_prefix);
  if (!s.ok()) return s;
  std::string tls = (*conn)->TlsDescription();
  conn->reset();

  LogInfo("mysql backend: ", where, " database ", options.database, ", table prefix \"",
          options.table_prefix, "\", schema version ", MysqlSchema::kVersion, ", ",
          options.pool_size, " connections, ", tls.empty() ? "no TLS" : absl::StrCat("TLS ", tls));
  return std::make_unique<MysqlBackend>(options, *std::move(schema));
}

}  // namespace lockd
