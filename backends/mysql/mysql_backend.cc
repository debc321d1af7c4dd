#include "backends/mysql/mysql_backend.h"

#include <mysql.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "backends/common/log.h"
#include "backends/common/timer_queue.h"
#include "backends/common/waiter_table.h"
#include "backends/mysql/mysql_client.h"
#include "backends/mysql/mysql_schema.h"

namespace lockd {
namespace {

// Callbacks collected under the mutex and run after it is released.
using Deferred = std::vector<absl::AnyInvocable<void() &&>>;

void RunAll(Deferred& deferred) {
  for (auto& fn : deferred) std::move(fn)();
  deferred.clear();
}

// Deadlocks and lock wait timeouts are retried this many times.
constexpr int kTransactionRetries = 3;
// A connection idle this long is pinged before use: the server (wait_timeout)
// or a proxy may have closed it, and a statement on it would fail ambiguously.
constexpr absl::Duration kIdlePing = absl::Seconds(60);
// After a failed connect, statements fail fast for this long instead of each
// waiting for its own connect attempt.
constexpr absl::Duration kConnectBackoff = absl::Milliseconds(100);
// While the database is unreachable the sweeper, which doubles as the health
// probe, runs at least this often.
constexpr absl::Duration kUnhealthyProbe = absl::Milliseconds(250);
// Expired rows looked at per sweep, and deleted per statement.
constexpr int kSweepBatch = 500;
constexpr int kSweepDeleteChunk = 100;
// Fence rows collected per collection.
constexpr int kCollectBatch = 1000;
// Collections run every tenth of the retention, between one sweep and a
// minute apart.
absl::Duration CollectInterval(const MysqlOptions& o) {
  return std::clamp(o.fence_retention / 10, o.sweep_interval,
                    std::max(o.sweep_interval, absl::Minutes(1)));
}

// The codes the Backend contract allows: anything the database says that is
// not a bug is a reason to retry later.
absl::Status ForCaller(absl::Status s) {
  switch (s.code()) {
    case absl::StatusCode::kOk:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kInternal:
      return s;
    default:
      return absl::UnavailableError(s.message());
  }
}

std::string KeyText(const LockKey& key) {
  return absl::StrCat("\"", key.name, "\" in namespace \"", key.ns, "\"");
}

// A demand row lives this many backoff caps past its last renewal.
constexpr int kDemandLife = 3;

std::string NewReplicaId() {
  absl::BitGen gen;
  return absl::StrFormat("%016x", absl::Uniform<uint64_t>(gen));
}

absl::Duration Jitter(absl::Duration d) {
  thread_local absl::BitGen gen;
  return d * absl::Uniform(gen, 0.75, 1.25);
}

// Reachability of the database as seen by every connection of the pool, and
// a generation number bumped on each connection failure so that the other
// connections (likely dead too after a server restart) are remade before use
// rather than failing a statement. Changes are not logged here: the server
// logs health transitions. Thread-safe: atomics for the per-statement fast
// path, a mutex for the rest.
class DbHealth {
 public:
  absl::Status status() const {
    if (ok_.load(std::memory_order_acquire)) return absl::OkStatus();
    absl::MutexLock l(&mu_);
    return status_;
  }
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

  void OnReachable() {
    if (ok_.load(std::memory_order_acquire)) return;
    absl::MutexLock l(&mu_);
    status_ = absl::OkStatus();
    ok_.store(true, std::memory_order_release);
  }

  void OnConnectionFailure(const absl::Status& s, bool connect) {
    absl::MutexLock l(&mu_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    if (connect) last_connect_failure_ = SteadyClock::now();
    status_ = absl::UnavailableError(s.message());
    ok_.store(false, std::memory_order_release);
  }

  // The error to fail with instead of connecting, if a connect failed very
  // recently.
  std::optional<absl::Status> FailFast() const {
    if (ok_.load(std::memory_order_acquire)) return std::nullopt;
    absl::MutexLock l(&mu_);
    if (status_.ok() ||
        SteadyClock::now() - last_connect_failure_ > absl::ToChronoNanoseconds(kConnectBackoff)) {
      return std::nullopt;
    }
    return status_;
  }

 private:
  std::atomic<bool> ok_{true};
  std::atomic<uint64_t> generation_{0};
  mutable absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  SteadyClock::time_point last_connect_failure_ ABSL_GUARDED_BY(mu_);
};

// One worker's connection: made on first use, remade after a failure.
// Not thread-safe: owned by one worker thread.
class Session {
 public:
  Session(const MysqlOptions* options, DbHealth* health) : options_(options), health_(health) {}

  struct Flags {
    // Also retry a duplicate-key error (a first grant racing another replica:
    // the retry sees the winner's row).
    bool retry_duplicate;
    // The statement changes nothing (a read): after a connection error it is
    // run once more on a new connection.
    bool read_only;
    // Connect even if a connect failed a moment ago (the health probe).
    bool probe;
  };
  static constexpr Flags kWrite{false, false, false};
  static constexpr Flags kGrant{true, false, false};
  static constexpr Flags kRead{false, true, false};
  static constexpr Flags kProbe{false, true, true};

  // Runs `sql`, connecting first if needed. Retries deadlocks and lock wait
  // timeouts (InnoDB rolled the transaction back) a bounded number of times.
  absl::StatusOr<MysqlResult> Run(absl::string_view sql, absl::string_view context, Flags flags) {
    for (int attempt = 0;; ++attempt) {
      absl::Status connected = EnsureConnected(flags.probe);
      if (!connected.ok()) return connected;
      MysqlOutcome o = conn_->Query(sql, context);
      last_used_ = absl::Now();
      if (o.result.ok()) {
        health_->OnReachable();
        return std::move(o.result);
      }
      if (conn_->broken()) {
        conn_.reset();
        health_->OnConnectionFailure(o.result.status(), /*connect=*/false);
        // Whether a write reached the server is unknown: report UNAVAILABLE
        // (its effect, if any, ends with the lease). A read is safe to repeat.
        if (flags.read_only && attempt == 0) continue;
        return o.result.status();
      }
      health_->OnReachable();
      bool again = IsRetryableTransactionError(o.error_code) ||
                   (flags.retry_duplicate && o.error_code == kErDupEntry);
      if (!again || attempt >= kTransactionRetries) return o.result.status();
      // Let the transaction we collided with finish.
      if (o.error_code == kErLockDeadlock) absl::SleepFor(Jitter(absl::Milliseconds(2)));
    }
  }

 private:
  absl::Status EnsureConnected(bool probe) {
    if (conn_ != nullptr && generation_ != health_->generation()) conn_.reset();
    if (conn_ != nullptr && absl::Now() - last_used_ > kIdlePing) {
      MysqlOutcome o = conn_->Ping();
      if (!o.result.ok()) conn_.reset();
    }
    if (conn_ != nullptr) return absl::OkStatus();
    if (!probe) {
      if (std::optional<absl::Status> fail = health_->FailFast()) return *fail;
    }
    uint64_t generation = health_->generation();
    absl::StatusOr<std::unique_ptr<MysqlConnection>> c =
        MysqlConnection::Connect(*options_, /*use_database=*/true);
    if (!c.ok()) {
      health_->OnConnectionFailure(c.status(), /*connect=*/true);
      return ForCaller(c.status());
    }
    conn_ = *std::move(c);
    generation_ = generation;
    last_used_ = absl::Now();
    return absl::OkStatus();
  }

  const MysqlOptions* const options_;
  DbHealth* const health_;
  std::unique_ptr<MysqlConnection> conn_;
  uint64_t generation_ = 0;
  absl::Time last_used_;
};

// Worker threads, each with its own Session, running jobs in FIFO order.
// Thread-safe: the queue is guarded by one mutex.
class WorkerPool {
 public:
  // Runs with the worker's session, or with nullptr if the pool closed
  // before the job ran (the job must then finish with ShuttingDownError()).
  using Job = absl::AnyInvocable<void(Session* session) &&>;

  WorkerPool(size_t n, const MysqlOptions* options, DbHealth* health) {
    for (size_t i = 0; i < n; ++i) {
      threads_.emplace_back([this, options, health] { Work(options, health); });
    }
  }
  ~WorkerPool() { Close(); }

  // Queues `job`; after Close() runs it inline with nullptr.
  void Submit(Job job) {
    {
      absl::MutexLock l(&mu_);
      if (!closed_) {
        jobs_.push_back(std::move(job));
        return;
      }
    }
    std::move(job)(nullptr);
  }

  // Stops taking jobs, runs the queued ones with nullptr, waits for the
  // running ones and joins the threads. Idempotent.
  void Close() {
    std::deque<Job> pending;
    {
      absl::MutexLock l(&mu_);
      if (closed_) return;
      closed_ = true;
      pending.swap(jobs_);
    }
    for (Job& job : pending) std::move(job)(nullptr);
    for (std::thread& t : threads_) t.join();
  }

 private:
  void Work(const MysqlOptions* options, DbHealth* health) {
    mysql_thread_init();
    Session session(options, health);
    while (true) {
      Job job;
      {
        absl::MutexLock l(&mu_);
        mu_.Await(absl::Condition(this, &WorkerPool::HasWorkOrClosed));
        if (jobs_.empty()) break;  // closed
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      std::move(job)(&session);
    }
    mysql_thread_end();
  }

  bool HasWorkOrClosed() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || !jobs_.empty();
  }

  absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

bool ParseField(const MysqlRow& row, size_t i, int64_t* out) {
  return i < row.size() && row[i].has_value() && absl::SimpleAtoi(*row[i], out);
}
bool ParseField(const MysqlRow& row, size_t i, uint64_t* out) {
  return i < row.size() && row[i].has_value() && absl::SimpleAtoi(*row[i], out);
}

absl::Status Unexpected(absl::string_view what, const LockKey& key) {
  return absl::InternalError(
      absl::StrCat("mysql ", what, " of lock ", KeyText(key), ": unexpected result row"));
}

// A popped head waiter with what its attempt tells the database about this
// replica's demand for the lock.
struct HeadTurn {
  WaiterTable::Waiter w;
  int64_t demand_us = 0;      // record demand for this long (0: not now)
  bool clear_demand = false;  // a grant ends this replica's recorded demand
};

// One acquire attempt's answer.
struct Attempt {
  AcquireResult result;  // acquired, or `current` (without waiters)
  // When not acquired and the lock is held: the holder's remaining lease.
  absl::Duration holder_remaining = absl::InfiniteDuration();
};

class MysqlBackend final : public Backend {
 public:
  MysqlBackend(const MysqlOptions& options, MysqlSchema schema)
      : options_(options),
        schema_(std::move(schema)),
        replica_(NewReplicaId()),
        fast_poll_(std::min(options.max_retry, options.initial_retry * 4)),
        hold_back_(fast_poll_ * 2.5),
        timers_(std::make_unique<TimerQueue>()),
        // Capacity is checked by Acquire (parked plus in-flight heads), so a
        // head that lost its retry can always go back to the front.
        waiters_(timers_.get(), static_cast<size_t>(-1),
                 [this](WaiterTable::Waiter w) { OnWaitTimeout(std::move(w)); }),
        pool_(options.pool_size, &options_, &health_) {
    absl::MutexLock l(&mu_);
    ScheduleSweepLocked(options_.sweep_interval);
  }

  ~MysqlBackend() override { Shutdown(); }

  absl::string_view name() const override { return "mysql"; }

  void Acquire(AcquireParams params, std::shared_ptr<CancelSignal> cancel,
               Callback<AcquireResult> done) override {
    SteadyClock::time_point deadline = SteadyAfter(params.wait);
    bool may_take = false;
    bool shutdown;
    {
      absl::MutexLock l(&mu_);
      shutdown = shutdown_;
      // Local waiters go first (FIFO): a newcomer only re-enters or replays
      // while they wait. A try-once call may still take a free lock.
      if (!shutdown) {
        may_take = params.wait <= absl::ZeroDuration() || !QueueBusyLocked(params.key);
      }
    }
    if (shutdown) {
      std::move(done)(ShuttingDownError());
      return;
    }
    pool_.Submit([this, params = std::move(params), cancel = std::move(cancel),
                  done = std::move(done), deadline, may_take](Session* s) mutable {
      if (s == nullptr) {
        std::move(done)(ShuttingDownError());
        return;
      }
      // A first attempt that defers to local waiters is a poll in effect.
      absl::StatusOr<Attempt> a =
          TryAcquire(*s, params, may_take, /*poll=*/!may_take, /*demand_us=*/0, false);
      OnFirstAttempt(
          WaiterTable::Waiter{std::move(params), std::move(cancel), std::move(done), deadline},
          std::move(a));
    });
  }

  void Release(ReleaseParams params, Callback<ReleaseResult> done) override {
    if (IsShutdown()) {
      std::move(done)(ShuttingDownError());
      return;
    }
    pool_.Submit([this, params = std::move(params), done = std::move(done)](Session* s) mutable {
      if (s == nullptr) {
        std::move(done)(ShuttingDownError());
        return;
      }
      // This replica's first waiter, if any, is handed the lock in the
      // release's own transaction.
      std::optional<HeadTurn> next = TakeHeadForHandoff(params.key);
      ReleaseOutcome out;
      absl::StatusOr<ReleaseResult> r = DoRelease(*s, params, next ? &*next : nullptr, &out);
      // The waiter is answered before the releaser, whose next Acquire then
      // queues behind the rest.
      if (next.has_value()) {
        Attempt a;
        if (out.next_token != 0) {
          a.result.acquired = true;
          a.result.fencing_token = out.next_token;
          a.result.hold_count = 1;
          a.result.ttl = next->w.params.ttl;
        }
        OnHeadAttempt(*std::move(next), std::move(a), out.yielded);
      } else if (out.freed) {
        Wake(params.key, out.yielded);
      }
      std::move(done)(std::move(r));
    });
  }

  void ForceRelease(ForceReleaseParams params, Callback<ForceReleaseResult> done) override {
    if (IsShutdown()) {
      std::move(done)(ShuttingDownError());
      return;
    }
    pool_.Submit([this, params = std::move(params), done = std::move(done)](Session* s) mutable {
      if (s == nullptr) {
        std::move(done)(ShuttingDownError());
        return;
      }
      absl::StatusOr<ForceReleaseResult> r = DoForceRelease(*s, params);
      if (r.ok() && r->released) Wake(params.key, /*yielded=*/false);
      std::move(done)(std::move(r));
    });
  }

  void Renew(RenewParams params, Callback<RenewResult> done) override {
    if (IsShutdown()) {
      std::move(done)(ShuttingDownError());
      return;
    }
    pool_.Submit([this, params = std::move(params), done = std::move(done)](Session* s) mutable {
      if (s == nullptr) {
        std::move(done)(ShuttingDownError());
        return;
      }
      std::move(done)(DoRenew(*s, params));
    });
  }

  void Describe(LockKey key, Callback<LockState> done) override {
    if (IsShutdown()) {
      std::move(done)(ShuttingDownError());
      return;
    }
    pool_.Submit([this, key = std::move(key), done = std::move(done)](Session* s) mutable {
      if (s == nullptr) {
        std::move(done)(ShuttingDownError());
        return;
      }
      std::move(done)(DoDescribe(*s, key));
    });
  }

  void List(ListParams params, Callback<ListResult> done) override {
    if (IsShutdown()) {
      std::move(done)(ShuttingDownError());
      return;
    }
    pool_.Submit([this, params = std::move(params), done = std::move(done)](Session* s) mutable {
      if (s == nullptr) {
        std::move(done)(ShuttingDownError());
        return;
      }
      std::move(done)(DoList(*s, params));
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
      for (auto& [key, q] : keys_) {
        if (q.retry != 0) timers_->Cancel(q.retry);
      }
      keys_.clear();
    }
    for (WaiterTable::Waiter& w : waiters_.Close()) {
      std::move(w.done)(ShuttingDownError());
    }
    // Queued jobs answer ShuttingDownError(); running ones finish (at most
    // the client's read timeout) before the threads are joined.
    pool_.Close();
    // Joins the timer thread; its callbacks see shutdown_ and return.
    timers_.reset();
  }

 private:
  // Per lock with local waiters: who is being retried and when.
  struct KeyQueue {
    bool in_flight = false;         // the head waiter is popped and trying now
    bool wake = false;              // a release happened while it was trying
    TimerQueue::TimerId retry = 0;  // 0: no retry scheduled
    uint64_t retry_seq = 0;
    SteadyClock::time_point retry_at;
    absl::Duration backoff;
    // Taking turns with other replicas (see MysqlOptions::fair_slice).
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

  bool QueueBusyLocked(const LockKey& key) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = keys_.find(key);
    return (it != keys_.end() && it->second.in_flight) || waiters_.Count(key) > 0;
  }

  uint32_t LocalWaiters(const LockKey& key) const {
    absl::MutexLock l(&mu_);
    auto it = keys_.find(key);
    size_t n = waiters_.Count(key) + (it != keys_.end() && it->second.in_flight ? 1 : 0);
    return static_cast<uint32_t>(n);
  }

  // ---- Statements ----

  // `poll`: the lock is probably held; look before locking its row.
  // `demand_us`, `clear_demand`: see HeadTurn.
  absl::StatusOr<Attempt> TryAcquire(Session& s, const AcquireParams& p, bool may_take, bool poll,
                                     int64_t demand_us, bool clear_demand) {
    std::string sql = absl::StrCat(
        "CALL ", schema_.acquire_proc(), "(", SqlBytes(p.key.ns), ",", SqlBytes(p.key.name), ",",
        SqlBytes(p.owner), ",", absl::ToInt64Microseconds(p.ttl), ",", SqlBytes(p.request_id), ",",
        may_take ? 1 : 0, ",", poll ? 1 : 0, ",", SqlBytes(replica_), ",", demand_us, ",",
        clear_demand ? 1 : 0, ")");
    absl::StatusOr<MysqlResult> r =
        s.Run(sql, absl::StrCat("acquire of lock ", KeyText(p.key)), Session::kGrant);
    if (!r.ok()) return ForCaller(r.status());
    int64_t outcome, hold, micros;
    uint64_t token;
    if (r->rows.size() != 1 || !ParseField(r->rows[0], 0, &outcome) ||
        !ParseField(r->rows[0], 2, &hold) || !ParseField(r->rows[0], 3, &token) ||
        !ParseField(r->rows[0], 4, &micros) || !r->rows[0][1].has_value()) {
      return Unexpected("acquire", p.key);
    }
    Attempt a;
    a.result.current.key = p.key;
    switch (outcome) {
      case kAcquireGranted:
      case kAcquireReplayed:
        a.result.acquired = true;
        a.result.fencing_token = token;
        a.result.hold_count = static_cast<uint32_t>(hold);
        a.result.ttl = outcome == kAcquireGranted ? p.ttl : absl::Microseconds(micros);
        a.result.current = LockState{};
        return a;
      case kAcquireHeld:
        a.result.current.held = true;
        a.result.current.owner = *r->rows[0][1];
        a.result.current.hold_count = static_cast<uint32_t>(hold);
        a.result.current.fencing_token = token;
        a.result.current.ttl_remaining = absl::Microseconds(std::max<int64_t>(micros, 0));
        a.holder_remaining = a.result.current.ttl_remaining;
        return a;
      case kAcquireDeferred:
        a.holder_remaining = absl::ZeroDuration();
        return a;
      default:
        return Unexpected("acquire", p.key);
    }
  }

  struct ReleaseOutcome {
    bool freed = false;       // this call freed the lock (not a replay)
    uint64_t next_token = 0;  // the token handed to `next`, or 0
    bool yielded = false;     // freed for another replica's waiters
  };

  // Gives up one hold. If that frees the lock and `next` is not null, grants
  // it to next's owner in the same transaction, unless another replica's
  // waiters have waited longer than the fairness slice (then it yields).
  absl::StatusOr<ReleaseResult> DoRelease(Session& s, const ReleaseParams& p, const HeadTurn* next,
                                          ReleaseOutcome* out) {
    const AcquireParams* n = next ? &next->w.params : nullptr;
    std::string sql = absl::StrCat(
        "CALL ", schema_.release_proc(), "(", SqlBytes(p.key.ns), ",", SqlBytes(p.key.name), ",",
        SqlBytes(p.owner), ",", SqlBytes(p.request_id), ",",
        absl::ToInt64Microseconds(options_.release_memory), ",", SqlBytes(n ? n->owner : ""), ",",
        n ? absl::ToInt64Microseconds(n->ttl) : 0, ",", SqlBytes(n ? n->request_id : ""), ",",
        SqlBytes(replica_), ",", absl::ToInt64Microseconds(options_.fair_slice), ",",
        next && next->clear_demand ? 1 : 0, ",", SqlBytes(p.acquire_request_id), ")");
    absl::StatusOr<MysqlResult> r =
        s.Run(sql, absl::StrCat("release of lock ", KeyText(p.key)), Session::kWrite);
    if (!r.ok()) return ForCaller(r.status());
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
        return LockNotHeldError(p.key, "the lock is held by another owner");
      case kReleaseFree:
        return LockNotHeldError(p.key, "the lock is free (released or lease expired)");
      default:
        return Unexpected("release", p.key);
    }
  }

  absl::StatusOr<RenewResult> DoRenew(Session& s, const RenewParams& p) {
    std::string sql = absl::StrCat("CALL ", schema_.renew_proc(), "(", SqlBytes(p.key.ns), ",",
                                   SqlBytes(p.key.name), ",", SqlBytes(p.owner), ",",
                                   absl::ToInt64Microseconds(p.ttl), ")");
    absl::StatusOr<MysqlResult> r =
        s.Run(sql, absl::StrCat("renew of lock ", KeyText(p.key)), Session::kWrite);
    if (!r.ok()) return ForCaller(r.status());
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
        return LockNotHeldError(p.key, "the lock is held by another owner");
      case kRenewFree:
        return LockNotHeldError(p.key, "the lock is free (released or lease expired)");
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
  absl::StatusOr<ForceReleaseResult> DoForceRelease(Session& s, const ForceReleaseParams& p) {
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
          s.Run(sql, absl::StrCat("force release of lock ", KeyText(p.key)), Session::kWrite);
      if (!r.ok()) return ForCaller(r.status());
      if (r->affected_rows == 1) {
        out.released = true;
        return out;
      }
      if (attempt == 2) return Unexpected("force release", p.key);
    }
  }

  absl::StatusOr<LockState> DoDescribe(Session& s, const LockKey& key) {
    std::string sql = absl::StrCat(
        "SELECT owner, hold_count, token, TIMESTAMPDIFF(MICROSECOND, NOW(6), expires_at) FROM ",
        schema_.locks(), " WHERE ns = ", SqlBytes(key.ns), " AND name = ", SqlBytes(key.name),
        " AND expires_at > NOW(6)");
    absl::StatusOr<MysqlResult> r =
        s.Run(sql, absl::StrCat("describe of lock ", KeyText(key)), Session::kRead);
    if (!r.ok()) return ForCaller(r.status());
    LockState state;
    state.key = key;
    if (r->rows.size() > 1 || (r->rows.size() == 1 && !ParseHolder(r->rows[0], 0, &state))) {
      return Unexpected("describe", key);
    }
    state.waiters = LocalWaiters(key);
    return state;
  }

  absl::StatusOr<ListResult> DoList(Session& s, const ListParams& p) {
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
        s.Run(sql, absl::StrCat("list of namespace \"", p.ns, "\""), Session::kRead);
    if (!r.ok()) return ForCaller(r.status());
    ListResult out;
    for (const MysqlRow& row : r->rows) {
      if (out.locks.size() == p.page_size) {
        out.next_page_token = out.locks.back().key.name;
        break;
      }
      LockState state;
      if (!row[0].has_value()) return Unexpected("list", LockKey{p.ns, ""});
      state.key = LockKey{p.ns, *row[0]};
      if (!ParseHolder(row, 1, &state)) return Unexpected("list", state.key);
      out.locks.push_back(std::move(state));
    }
    for (LockState& state : out.locks) state.waiters = LocalWaiters(state.key);
    return out;
  }

  // ---- Waiting ----

  // The first attempt of an Acquire came back (on a worker thread).
  void OnFirstAttempt(WaiterTable::Waiter w, absl::StatusOr<Attempt> a) {
    if (!a.ok() || a->result.acquired || w.params.wait <= absl::ZeroDuration()) {
      if (a.ok() && !a->result.acquired) a->result.current.waiters = LocalWaiters(w.params.key);
      if (a.ok()) {
        std::move(w.done)(std::move(a->result));
      } else {
        std::move(w.done)(a.status());
      }
      return;
    }
    absl::Status parked;
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) {
        parked = ShuttingDownError();
      } else if (waiters_.Total() + in_flight_ >= options_.max_waiters) {
        parked = absl::ResourceExhaustedError(
            absl::StrCat("too many waiting acquires (max_waiters = ", options_.max_waiters, ")"));
      } else {
        LockKey key = w.params.key;
        parked = waiters_.Park(w);
        if (parked.ok()) {
          auto [it, inserted] = keys_.try_emplace(key);
          if (inserted) it->second.backoff = options_.initial_retry;
          KeyQueue& q = it->second;
          if (q.in_flight) {
            // The head is trying; if this attempt saw the lock free, the head
            // may have read it before the release: make it look again.
            if (a->holder_remaining <= absl::ZeroDuration()) q.wake = true;
          } else {
            ScheduleRetryLocked(key, q, RetryDelay(q, a->holder_remaining));
          }
        }
      }
    }
    if (!parked.ok()) std::move(w.done)(parked);
  }

  // The delay before the head's next attempt: the backoff, or the end of the
  // holder's lease if that comes first.
  absl::Duration RetryDelay(const KeyQueue& q, absl::Duration holder_remaining) const {
    absl::Duration d = Jitter(q.backoff);
    if (holder_remaining < absl::InfiniteDuration()) {
      // Just after the lease ends by the database clock: retrying at the
      // instant itself would usually find it still live.
      d = std::min(d, holder_remaining + absl::Milliseconds(1));
    }
    return std::max(d, absl::ZeroDuration());
  }

  void ScheduleRetryLocked(const LockKey& key, KeyQueue& q, absl::Duration delay)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    SteadyClock::time_point at = SteadyAfter(delay);
    if (q.retry != 0) {
      if (q.retry_at <= at) return;  // an earlier retry is already due
      timers_->Cancel(q.retry);
    }
    q.retry_at = at;
    // The callback checks the sequence number to ignore a timer that was
    // cancelled or replaced while it was starting to run.
    q.retry_seq = ++retry_seq_;
    q.retry = timers_->ScheduleAt(at, [this, key, seq = q.retry_seq] { OnRetryTimer(key, seq); });
  }

  void OnRetryTimer(const LockKey& key, uint64_t seq) {
    Deferred deferred;
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) return;
      auto it = keys_.find(key);
      if (it == keys_.end() || it->second.retry == 0 || it->second.retry_seq != seq) return;
      it->second.retry = 0;
      StartHeadLocked(key, deferred);
    }
    RunAll(deferred);
  }

  // A release through this replica freed `key`: try its first waiter now,
  // or, if the release yielded to another replica, after a pause.
  void Wake(const LockKey& key, bool yielded) {
    Deferred deferred;
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) return;
      auto it = keys_.find(key);
      if (it == keys_.end()) return;
      KeyQueue& q = it->second;
      q.backoff = options_.initial_retry;
      if (yielded) {
        q.hold_until = SteadyAfter(hold_back_);
        if (!q.in_flight) ScheduleRetryLocked(key, q, hold_back_);
        return;
      }
      if (q.in_flight) {
        q.wake = true;
        return;
      }
      if (q.retry != 0) {
        timers_->Cancel(q.retry);
        q.retry = 0;
      }
      StartHeadLocked(key, deferred);
    }
    RunAll(deferred);
  }

  // Pops the first live waiter of `key` (finishing cancelled ones through
  // `deferred`) and marks it in flight. Forgets `key` when nobody waits.
  std::optional<HeadTurn> PopHeadLocked(const LockKey& key, Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = keys_.find(key);
    if (it == keys_.end() || it->second.in_flight) return std::nullopt;
    KeyQueue& q = it->second;
    while (std::optional<WaiterTable::Waiter> w = waiters_.PopFront(key)) {
      if (w->cancel && w->cancel->cancelled()) {
        deferred.push_back([done = std::move(w->done)]() mutable {
          std::move(done)(absl::CancelledError("acquire cancelled"));
        });
        continue;
      }
      q.in_flight = true;
      q.wake = false;
      ++in_flight_;
      if (q.retry != 0) {
        timers_->Cancel(q.retry);
        q.retry = 0;
      }
      HeadTurn t{*std::move(w)};
      // Demand is recorded (renewed) at most every half backoff cap.
      if (options_.fair_slice > absl::ZeroDuration() &&
          SteadyClock::now() - q.demand_refreshed >=
              absl::ToChronoNanoseconds(options_.max_retry / 2)) {
        t.demand_us = absl::ToInt64Microseconds(kDemandLife * options_.max_retry);
      }
      t.clear_demand = q.demand_written;
      return t;
    }
    if (q.retry != 0) timers_->Cancel(q.retry);
    keys_.erase(it);
    return std::nullopt;
  }

  // Pops the first waiter of `key` and queues its attempt (the queueing
  // itself is deferred: a closed pool runs the job inline).
  void StartHeadLocked(const LockKey& key, Deferred& deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = keys_.find(key);
    if (it == keys_.end()) return;
    SteadyClock::time_point now = SteadyClock::now();
    if (now < it->second.hold_until) {  // yielded a moment ago
      ScheduleRetryLocked(key, it->second, absl::FromChrono(it->second.hold_until - now));
      return;
    }
    std::optional<HeadTurn> t = PopHeadLocked(key, deferred);
    if (!t.has_value()) return;
    deferred.push_back([this, t = *std::move(t)]() mutable {
      pool_.Submit([this, t = std::move(t)](Session* s) mutable {
        absl::StatusOr<Attempt> a = s == nullptr
                                        ? absl::StatusOr<Attempt>(ShuttingDownError())
                                        : TryAcquire(*s, t.w.params, /*may_take=*/true,
                                                     /*poll=*/true, t.demand_us, t.clear_demand);
        OnHeadAttempt(std::move(t), std::move(a), /*yielded=*/false);
      });
    });
  }

  // For a release about to run: the waiter it may hand the lock to.
  std::optional<HeadTurn> TakeHeadForHandoff(const LockKey& key) {
    Deferred deferred;
    std::optional<HeadTurn> w;
    {
      absl::MutexLock l(&mu_);
      if (!shutdown_) w = PopHeadLocked(key, deferred);
    }
    RunAll(deferred);
    return w;
  }

  // The head waiter's attempt came back (on a worker thread). `yielded`: it
  // rode on a release that gave the lock up for another replica instead.
  void OnHeadAttempt(HeadTurn t, absl::StatusOr<Attempt> a, bool yielded) {
    WaiterTable::Waiter& w = t.w;
    const LockKey key = w.params.key;
    const SteadyClock::time_point now = SteadyClock::now();
    Deferred deferred;
    {
      absl::MutexLock l(&mu_);
      --in_flight_;
      if (shutdown_) {
        absl::StatusOr<AcquireResult> r = ShuttingDownError();
        // A grant is still reported: the caller gives back what it cannot use.
        if (a.ok() && a->result.acquired) r = std::move(a->result);
        deferred.push_back([done = std::move(w.done), r = std::move(r)]() mutable {
          std::move(done)(std::move(r));
        });
      } else {
        auto [it, inserted] = keys_.try_emplace(key);
        if (inserted) it->second.backoff = options_.initial_retry;
        KeyQueue& q = it->second;
        q.in_flight = false;
        if (a.ok() && a->result.acquired) {
          deferred.push_back([done = std::move(w.done), r = std::move(a->result)]() mutable {
            std::move(done)(std::move(r));
          });
          q.backoff = options_.initial_retry;
          q.wake = false;
          q.demand_written = false;  // a grant ends this replica's demand
          q.waiting_since.reset();
          // The next waiter polls while the new holder works, unless the
          // holder's release through this replica wakes it first.
          ScheduleRetryLocked(key, q, Jitter(q.backoff));
        } else if (!a.ok() && a.status().code() != absl::StatusCode::kUnavailable) {
          deferred.push_back(
              [done = std::move(w.done), s = a.status()]() mutable { std::move(done)(s); });
          ScheduleRetryLocked(key, q, Jitter(q.backoff));
        } else if (w.cancel && w.cancel->cancelled()) {
          deferred.push_back([done = std::move(w.done)]() mutable {
            std::move(done)(absl::CancelledError("acquire cancelled"));
          });
          ScheduleRetryLocked(key, q, absl::ZeroDuration());
        } else {
          // Not granted, or the database is unreachable: back to the front
          // (the deadline timer and cancel hook are armed again; a deadline
          // that passed meanwhile ends the wait at once).
          absl::Duration remaining = a.ok() ? a->holder_remaining : absl::InfiniteDuration();
          absl::Status parked = waiters_.Park(w, /*front=*/true);
          if (!parked.ok()) {
            deferred.push_back(
                [done = std::move(w.done), parked]() mutable { std::move(done)(parked); });
          }
          if (a.ok() && a->result.current.held) {
            if (t.demand_us > 0) {
              q.demand_written = true;
              q.demand_refreshed = now;
            }
            if (!q.waiting_since.has_value()) q.waiting_since = now;
          }
          absl::Duration delay;
          if (yielded) {
            q.backoff = options_.initial_retry;
            q.hold_until = now + absl::ToChronoNanoseconds(hold_back_);
            delay = hold_back_;
          } else if (q.wake) {
            q.wake = false;
            q.backoff = options_.initial_retry;
            delay = absl::ZeroDuration();
          } else {
            q.backoff = std::min(q.backoff * 2, options_.max_retry);
            delay = RetryDelay(q, remaining);
            // Waited a slice: the holder's replica is about to yield; look
            // often so that the turn is not lost.
            if (q.waiting_since.has_value() && options_.fair_slice > absl::ZeroDuration() &&
                now - *q.waiting_since > absl::ToChronoNanoseconds(options_.fair_slice)) {
              delay = std::min(delay, Jitter(fast_poll_));
            }
          }
          ScheduleRetryLocked(key, q, delay);
        }
      }
    }
    RunAll(deferred);
  }

  // A parked waiter's deadline passed (timer thread): answer with the lock's
  // state now.
  void OnWaitTimeout(WaiterTable::Waiter w) {
    pool_.Submit([this, w = std::move(w)](Session* s) mutable {
      if (s == nullptr) {
        std::move(w.done)(ShuttingDownError());
        return;
      }
      absl::StatusOr<LockState> state = DoDescribe(*s, w.params.key);
      if (!state.ok()) {
        std::move(w.done)(state.status());
        return;
      }
      AcquireResult r;
      r.current = *std::move(state);
      std::move(w.done)(std::move(r));
    });
  }

  // ---- Sweeper ----

  void ScheduleSweepLocked(absl::Duration delay) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    sweep_timer_ = timers_->Schedule(delay, [this] {
      {
        absl::MutexLock l(&mu_);
        if (shutdown_) return;
        sweep_timer_ = 0;
      }
      pool_.Submit([this](Session* s) {
        if (s == nullptr) return;
        Sweep(*s);
        absl::MutexLock l(&mu_);
        if (shutdown_) return;
        ScheduleSweepLocked(health_.status().ok()
                                ? options_.sweep_interval
                                : std::min(options_.sweep_interval, kUnhealthyProbe));
      });
    });
  }

  // Deletes rows whose lease ended. Each DELETE names the rows it saw by
  // identity (ns, name, token) and re-checks `expires_at < NOW(6)` on the
  // locked row, so a lease renewed or re-granted after the SELECT survives.
  void Sweep(Session& s) {
    absl::StatusOr<MysqlResult> r =
        s.Run(absl::StrCat("SELECT ns, name, token FROM ", schema_.locks(),
                           " WHERE expires_at < NOW(6) ORDER BY expires_at LIMIT ", kSweepBatch),
              "sweep: find expired locks", Session::kProbe);
    if (!r.ok()) return;  // the health state has the reason
    uint64_t deleted = 0;
    for (size_t i = 0; i < r->rows.size(); i += kSweepDeleteChunk) {
      std::vector<std::string> ids;
      for (size_t j = i; j < std::min(r->rows.size(), i + kSweepDeleteChunk); ++j) {
        const MysqlRow& row = r->rows[j];
        uint64_t token;
        if (!row[0] || !row[1] || !ParseField(row, 2, &token)) continue;
        ids.push_back(absl::StrCat("(ns = ", SqlBytes(*row[0]), " AND name = ", SqlBytes(*row[1]),
                                   " AND token = ", token, ")"));
      }
      if (ids.empty()) continue;
      absl::StatusOr<MysqlResult> d =
          s.Run(absl::StrCat("DELETE FROM ", schema_.locks(), " WHERE expires_at < NOW(6) AND (",
                             absl::StrJoin(ids, " OR "), ")"),
                "sweep: delete expired locks", Session::kWrite);
      if (!d.ok()) {
        LogWarning("mysql sweeper: ", d.status().message());
        return;
      }
      deleted += d->affected_rows;
    }
    if (deleted > 0) LogDebug("mysql sweeper: deleted ", deleted, " expired lock rows");
    // Demand rows of waits that ended (a lapsed row is as good as none).
    absl::StatusOr<MysqlResult> d =
        s.Run(absl::StrCat("DELETE FROM ", schema_.demand(),
                           " WHERE until < TIMESTAMPADD(SECOND, -10, NOW(6)) LIMIT 1000"),
              "sweep: delete lapsed demand", Session::kWrite);
    if (!d.ok()) LogWarning("mysql sweeper: ", d.status().message());
    if (options_.fence_retention > absl::ZeroDuration() && absl::Now() >= next_collect_) {
      next_collect_ = absl::Now() + CollectInterval(options_);
      absl::StatusOr<MysqlResult> c =
          s.Run(absl::StrCat("CALL ", schema_.collect_proc(), "(",
                             absl::ToInt64Microseconds(options_.fence_retention), ",",
                             kCollectBatch, ")"),
                "collect idle fence counters", Session::kWrite);
      if (!c.ok()) LogWarning("mysql sweeper: ", c.status().message());
    }
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
  // Reset (thread joined) by Shutdown(); the waiter table no longer uses it
  // once closed.
  std::unique_ptr<TimerQueue> timers_;
  WaiterTable waiters_;

  mutable absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<LockKey, KeyQueue> keys_ ABSL_GUARDED_BY(mu_);
  size_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // heads popped for an attempt
  uint64_t retry_seq_ ABSL_GUARDED_BY(mu_) = 0;
  TimerQueue::TimerId sweep_timer_ ABSL_GUARDED_BY(mu_) = 0;
  // Only the sweep job (one at a time) uses it.
  absl::Time next_collect_ = absl::InfinitePast();

  // Last: its threads use everything above.
  WorkerPool pool_;
};

absl::Status CheckOptions(const MysqlOptions& o) {
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
  if (o.pool_size < 1 || o.pool_size > 1024) return bad("pool_size", "must be in [1, 1024]");
  if (o.sweep_interval <= absl::ZeroDuration()) return bad("sweep_interval", "must be positive");
  if (o.connect_timeout <= absl::ZeroDuration()) return bad("connect_timeout", "must be positive");
  if (o.read_timeout <= absl::ZeroDuration()) return bad("read_timeout", "must be positive");
  if (o.write_timeout <= absl::ZeroDuration()) return bad("write_timeout", "must be positive");
  if (o.ssl_mode == MysqlSslMode::kVerifyIdentity && o.ssl_ca.empty()) {
    return bad("ssl_ca", "is required when mysql.ssl_mode is verify_identity");
  }
  if (o.ssl_cert.empty() != o.ssl_key.empty()) {
    return bad(o.ssl_cert.empty() ? "ssl_cert" : "ssl_key",
               "mysql.ssl_cert and mysql.ssl_key must be set together");
  }
  if (o.max_waiters == 0) return absl::InvalidArgumentError("max_waiters: must be positive");
  if (o.initial_retry <= absl::ZeroDuration() || o.max_retry < o.initial_retry) {
    return absl::InvalidArgumentError("mysql retry backoff: need 0 < initial_retry <= max_retry");
  }
  if (o.release_memory < absl::ZeroDuration() || o.fence_retention < absl::ZeroDuration() ||
      o.fair_slice < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "mysql: release_memory, fence_retention and fair_slice must be >= 0");
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
