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
#include "backends/common/replica_presence.h"
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
// A queue entry lives this long past its last extension (at least; 20
// backoff caps when that is longer); the head's polls extend this replica's
// entries every quarter of it. A dead replica's entries lapse after it.
constexpr absl::Duration kQueueLife = ReplicaPresence::kPlaceLife;

std::string NewReplicaId() {
  absl::BitGen gen;
  return absl::StrFormat("%016x", absl::Uniform<uint64_t>(gen));
}

// Waiting is the WaitEngine's; this class supplies its attempts (the acquire
// procedure), paces the polling of each lock's head (Pace), keeps this
// replica's queue entries alive and deletes them when their calls end, and
// hands a lock to this replica's first waiter inside the release that frees
// it.
class MysqlBackend final : public Backend, private LockStrategy {
 public:
  MysqlBackend(const MysqlOptions& options, MysqlSchema schema)
      : options_(options),
        schema_(std::move(schema)),
        replica_(NewReplicaId()),
        queue_life_(std::max(kQueueLife, 20 * options.max_retry)),
        timers_(std::make_unique<TimerQueue>()),
        engine_(static_cast<LockStrategy*>(this), timers_.get(), options.max_waiters),
        pool_(options.pool_size, &options_, &health_) {
    {
      absl::MutexLock l(&mu_);
      ScheduleSweepLocked(options_.sweep_interval);
    }
    presence_.Start();
  }

  ~MysqlBackend() override { Shutdown(); }

  absl::string_view name() const override { return "mysql"; }

  void Acquire(AcquireParams params, std::shared_ptr<CancelSignal> cancel,
               Callback<AcquireResult> done) override {
    if (params.wait <= absl::ZeroDuration()) {
      engine_.Acquire(std::move(params), std::move(cancel), std::move(done));
      return;
    }
    // A call that may wait may get a queue entry (its owner's on this
    // replica): when the owner's last such call ends without a grant, the
    // entry goes (a grant deletes it in its own transaction).
    OwnerKey ok{params.key, params.owner};
    {
      absl::MutexLock l(&mu_);
      ++waiting_calls_[ok];
    }
    engine_.Acquire(std::move(params), std::move(cancel),
                    [this, ok = std::move(ok),
                     done = std::move(done)](absl::StatusOr<AcquireResult> r) mutable {
                      bool last;
                      {
                        absl::MutexLock l(&mu_);
                        auto it = waiting_calls_.find(ok);
                        last = --it->second == 0;
                        if (last) waiting_calls_.erase(it);
                      }
                      if (last && !(r.ok() && r->acquired)) DropEntry(std::move(ok));
                      std::move(done)(std::move(r));
                    });
  }

  void Release(ReleaseParams params, Callback<ReleaseResult> done) override {
    RunOnConnection(std::move(done), [this, params = std::move(params)](Connection& s) {
      // This replica's first waiter, if it asks an exclusive lock, is handed
      // the lock in the release's own transaction when nobody waits ahead of
      // it; any other head tries on its own once the release is done.
      std::optional<WaitEngine::Head> next = engine_.TakeHead(params.key);
      const bool hand_over = next.has_value() && next->params().limit == 0 &&
                             next->params().mode == LockMode::kExclusive;
      ReleaseOutcome out;
      absl::StatusOr<ReleaseResult> r =
          DoRelease(s, params, hand_over ? &next->params() : nullptr, &out);
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
        }
        engine_.FinishHead(*std::move(next), std::move(a));
        if (!hand_over && out.freed) Wake(params.key);
      } else if (out.freed) {
        Wake(params.key);
      }
      return r;
    });
  }

  void ForceRelease(ForceReleaseParams params, Callback<ForceReleaseResult> done) override {
    RunOnConnection(std::move(done), [this, params = std::move(params)](Connection& s) {
      absl::StatusOr<ForceReleaseResult> r = DoForceRelease(s, params);
      if (r.ok() && r->released) Wake(params.key);
      return r;
    });
  }

  void Renew(RenewParams params, Callback<RenewResult> done) override {
    RunOnConnection(std::move(done), [this, params = std::move(params)](Connection& s) {
      return mysql::RenewOne(s, schema_, params);
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
    presence_.Stop();
    engine_.Shutdown();
    // Queued jobs answer ShuttingDownError(); running ones finish (at most
    // the client's read timeout) before the threads are joined.
    pool_.Close();
    // Joins the timer thread; its callbacks see shutdown_ and return.
    timers_.reset();
  }

 private:
  // How this replica's head waiter on one lock polls. Exists while the
  // engine has waiters on the lock.
  struct Pace {
    absl::Duration backoff;
    // When the head's poll last extended this replica's queue entries.
    SteadyClock::time_point refreshed;
  };
  using OwnerKey = std::pair<LockKey, std::string>;

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
  // `queue`: the call waits if not granted (its owner's entry is made or
  // kept); `refresh`: extend this replica's entries on the lock.
  TryResult TryAcquire(Connection& s, const AcquireParams& p, bool may_take, bool poll, bool queue,
                       bool refresh) {
    std::string sql = absl::StrCat(
        "CALL ", schema_.acquire_proc(), "(", SqlBytes(p.key.ns), ",", SqlBytes(p.key.name), ",",
        SqlBytes(p.owner), ",", absl::ToInt64Microseconds(p.ttl), ",", SqlBytes(p.request_id), ",",
        may_take ? 1 : 0, ",", poll ? 1 : 0, ",", SqlBytes(replica_), ",",
        queue ? absl::ToInt64Microseconds(queue_life_) : 0, ",", refresh ? 1 : 0, ",",
        p.mode == LockMode::kShared ? 1 : 0, ",", p.limit, ",", p.permits, ")");
    absl::StatusOr<MysqlResult> r =
        s.Run(sql, absl::StrCat("acquire of lock ", LockName(p.key)), Connection::kGrant);
    if (!r.ok()) return TryResult{UnavailableUnlessBug(r.status())};
    int64_t outcome, hold, micros, kind, extra;
    uint64_t token;
    if (r->rows.size() != 1 || !ParseField(r->rows[0], 0, &outcome) ||
        !ParseField(r->rows[0], 2, &hold) || !ParseField(r->rows[0], 3, &token) ||
        !ParseField(r->rows[0], 4, &micros) || !ParseField(r->rows[0], 5, &kind) ||
        !ParseField(r->rows[0], 6, &extra) || !r->rows[0][1].has_value()) {
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
      case kAcquireHeld: {
        if (kind != 0 && p.wait <= absl::ZeroDuration()) {
          // The answer of a try: every holder of a shared lock or semaphore.
          absl::StatusOr<LockState> state = DoDescribe(s, p.key);
          if (state.ok() && state->held) {
            a.current = *std::move(state);
            return TryResult{a, a.current.ttl_remaining};
          }
        }
        if (kind != 0) {
          // Held SHARED or as a semaphore, seen by a waiting call: no owner is
          // named, so that the engine re-enters nobody on news that a release
          // may have made stale (a parked call's own attempt re-enters it).
          a.current.held = true;
          a.current.mode = kind == 1 ? LockMode::kShared : LockMode::kExclusive;
          return TryResult{a, absl::Microseconds(std::max<int64_t>(micros, 0))};
        }
        HolderState h;
        h.owner = *r->rows[0][1];
        h.mode = kind == 1 ? LockMode::kShared : LockMode::kExclusive;
        h.hold_count = static_cast<uint32_t>(hold);
        h.fencing_token = token;
        h.ttl_remaining = absl::Microseconds(std::max<int64_t>(micros, 0));
        a.current.mode = h.mode;
        a.current.limit = kind == 2 ? static_cast<uint32_t>(extra) : 0;
        a.current.holders.push_back(std::move(h));
        FillNewestHolder(a.current);
        return TryResult{a, a.current.ttl_remaining};
      }
      case kAcquireDeferred:
        return TryResult{a, absl::ZeroDuration()};
      case kAcquireQueued:
        return TryResult{a};
      case kAcquireKindMismatch:
        return TryResult{
            LockKindMismatchError(p.key, kind == 2 ? static_cast<uint32_t>(extra) : 0)};
      case kAcquireUpgradeWouldBlock:
        return TryResult{UpgradeWouldBlockError(p.key)};
      case kAcquirePermitsMismatch:
        return TryResult{PermitsMismatchError(p.key, static_cast<uint32_t>(extra), p.permits)};
      default:
        return TryResult{Unexpected("acquire", p.key)};
    }
  }

  // Deletes `ok`'s queue entry on this replica unless a call of that owner
  // waits on the lock again by the time the job runs (best effort: an entry
  // left behind lapses after queue_life_).
  void DropEntry(OwnerKey ok) {
    pool_.Submit([this, ok = std::move(ok)](Connection* s) {
      if (s == nullptr) return;
      {
        absl::MutexLock l(&mu_);
        if (waiting_calls_.contains(ok)) return;
      }
      absl::StatusOr<MysqlResult> r = s->Run(
          absl::StrCat("DELETE FROM ", schema_.queue(), " WHERE ns = ", SqlBytes(ok.first.ns),
                       " AND name = ", SqlBytes(ok.first.name),
                       " AND owner = ", SqlBytes(ok.second), " AND replica = ", SqlBytes(replica_)),
          absl::StrCat("end of a wait on lock ", LockName(ok.first)), Connection::kWrite);
      if (!r.ok()) LogWarning("mysql: ", r.status().message());
    });
  }

  struct ReleaseOutcome {
    bool freed = false;       // this call gave the caller's hold up (not a replay)
    uint64_t next_token = 0;  // the token handed to `next`, or 0
  };

  // Gives up one hold. If that frees the lock and `n` (an exclusive lock
  // acquire) is not null, grants it to n's owner in the same transaction,
  // unless others wait ahead of n in the database's queue.
  absl::StatusOr<ReleaseResult> DoRelease(Connection& s, const ReleaseParams& p,
                                          const AcquireParams* n, ReleaseOutcome* out) {
    std::string sql = absl::StrCat(
        "CALL ", schema_.release_proc(), "(", SqlBytes(p.key.ns), ",", SqlBytes(p.key.name), ",",
        SqlBytes(p.owner), ",", SqlBytes(p.request_id), ",",
        absl::ToInt64Microseconds(options_.release_memory), ",", SqlBytes(n ? n->owner : ""), ",",
        n ? absl::ToInt64Microseconds(n->ttl) : 0, ",", SqlBytes(n ? n->request_id : ""), ",",
        SqlBytes(replica_), ",", SqlBytes(p.acquire_request_id), ",", p.fencing_token, ")");
    absl::StatusOr<MysqlResult> r =
        s.Run(sql, absl::StrCat("release of lock ", LockName(p.key)), Connection::kWrite);
    if (!r.ok()) return UnavailableUnlessBug(r.status());
    int64_t outcome, hold, remaining;
    if (r->rows.size() != 1 || !ParseField(r->rows[0], 0, &outcome) ||
        !ParseField(r->rows[0], 1, &hold) || !ParseField(r->rows[0], 2, &out->next_token) ||
        !ParseField(r->rows[0], 3, &remaining)) {
      return Unexpected("release", p.key);
    }
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

  // Reads the holders, then frees exactly those seen (a token names each),
  // so a grant that slips in between is never the one freed; looks again
  // when that happens. The lock's token counter is untouched, so the next
  // grant's token is larger.
  absl::StatusOr<ForceReleaseResult> DoForceRelease(Connection& s, const ForceReleaseParams& p) {
    for (int attempt = 0;; ++attempt) {
      absl::StatusOr<LockState> held = DoDescribe(s, p.key);
      if (!held.ok()) return held.status();
      ForceReleaseResult out;
      out.previous = *std::move(held);
      if (!out.previous.held) return out;
      if (p.fencing_token != 0 &&
          std::none_of(out.previous.holders.begin(), out.previous.holders.end(),
                       [&](const HolderState& h) { return h.fencing_token == p.fencing_token; })) {
        return FencingTokenMismatchError(p.key, p.fencing_token, out.previous.fencing_token);
      }
      std::string sql = absl::StrCat("CALL ", schema_.force_proc(), "(", SqlBytes(p.key.ns), ",",
                                     SqlBytes(p.key.name), ",", p.fencing_token, ",",
                                     out.previous.fencing_token, ")");
      absl::StatusOr<MysqlResult> r =
          s.Run(sql, absl::StrCat("force release of lock ", LockName(p.key)), Connection::kWrite);
      if (!r.ok()) return UnavailableUnlessBug(r.status());
      int64_t outcome;
      if (r->rows.size() != 1 || !ParseField(r->rows[0], 0, &outcome)) {
        return Unexpected("force release", p.key);
      }
      if (outcome == kForceFreed) {
        out.released = true;
        return out;
      }
      if (attempt == 2) return Unexpected("force release", p.key);
    }
  }

  // Every live holder of `key` (by token) and the lock's kind, and the
  // acquires that wait on it: this replica's, and other replicas' queue
  // entries.
  absl::StatusOr<LockState> DoDescribe(Connection& s, const LockKey& key) {
    const std::string ns = SqlBytes(key.ns), name = SqlBytes(key.name);
    std::string sql = absl::StrCat(
        "SELECT 0, owner, 0, hold_count, 0, token,"
        " TIMESTAMPDIFF(MICROSECOND, NOW(6), expires_at), 0, 0 FROM ",
        schema_.locks(), " WHERE ns = ", ns, " AND name = ", name,
        " AND kind = 0 AND expires_at > NOW(6)"
        " UNION ALL SELECT 0, h.owner, h.mode, h.hold_count, h.permits, h.token,"
        " TIMESTAMPDIFF(MICROSECOND, NOW(6), h.expires_at), l.kind, l.lim FROM ",
        schema_.holders(), " h JOIN ", schema_.locks(),
        " l ON l.ns = h.ns AND l.name = h.name WHERE h.ns = ", ns, " AND h.name = ", name,
        " AND l.kind <> 0 AND h.expires_at > NOW(6)"
        " UNION ALL SELECT 1, '', 0, COUNT(*), 0, 0, 0, 0, 0 FROM ",
        schema_.queue(), " WHERE ns = ", ns, " AND name = ", name,
        " AND until > NOW(6) AND replica <> ", SqlBytes(replica_));
    absl::StatusOr<MysqlResult> r =
        s.Run(sql, absl::StrCat("describe of lock ", LockName(key)), Connection::kRead);
    if (!r.ok()) return UnavailableUnlessBug(r.status());
    LockState state;
    state.key = key;
    uint32_t remote = 0;
    for (const MysqlRow& row : r->rows) {
      int64_t queue;
      if (!ParseField(row, 0, &queue)) return Unexpected("describe", key);
      if (queue == 1) {
        int64_t n;
        if (!ParseField(row, 3, &n)) return Unexpected("describe", key);
        remote = static_cast<uint32_t>(n);
      } else if (!AddHolder(row, 1, &state)) {
        return Unexpected("describe", key);
      }
    }
    FinishState(state);
    state.waiters = engine_.Waiting(key) + remote;
    return state;
  }

  // Adds the holder at `col` (owner, mode, hold_count, permits, token,
  // remaining_us, lock kind, limit) to `state`.
  static bool AddHolder(const MysqlRow& row, size_t col, LockState* state) {
    int64_t mode, hold, permits, micros, kind, lim;
    uint64_t token;
    if (!row[col].has_value() || !ParseField(row, col + 1, &mode) ||
        !ParseField(row, col + 2, &hold) || !ParseField(row, col + 3, &permits) ||
        !ParseField(row, col + 4, &token) || !ParseField(row, col + 5, &micros) ||
        !ParseField(row, col + 6, &kind) || !ParseField(row, col + 7, &lim)) {
      return false;
    }
    HolderState h;
    h.owner = *row[col];
    h.mode = mode == 1 ? LockMode::kShared : LockMode::kExclusive;
    h.hold_count = static_cast<uint32_t>(hold);
    h.permits = static_cast<uint32_t>(permits);
    h.fencing_token = token;
    h.ttl_remaining = absl::Microseconds(std::max<int64_t>(micros, 0));
    state->holders.push_back(std::move(h));
    if (kind == 1) state->mode = LockMode::kShared;
    if (kind == 2) state->limit = static_cast<uint32_t>(lim);
    return true;
  }

  // Orders the holders by token and fills the single-holder fields.
  static void FinishState(LockState& state) {
    std::sort(state.holders.begin(), state.holders.end(),
              [](const HolderState& a, const HolderState& b) {
                return a.fencing_token < b.fencing_token;
              });
    FillNewestHolder(state);
  }

  // One page of held names; then the holders of those held SHARED or as a
  // semaphore, in one more statement.
  absl::StatusOr<ListResult> DoList(Connection& s, const ListParams& p) {
    std::string sql = absl::StrCat(
        "SELECT name, owner, 0, hold_count, 0, token,"
        " TIMESTAMPDIFF(MICROSECOND, NOW(6), expires_at), kind, lim FROM ",
        schema_.locks(), " WHERE ns = ", SqlBytes(p.ns), " AND expires_at > NOW(6)");
    if (!p.prefix.empty()) {
      absl::StrAppend(&sql, " AND name LIKE ", SqlBytes(absl::StrCat(EscapeLike(p.prefix), "%")),
                      " ESCAPE '!'");
    }
    if (!p.page_token.empty()) absl::StrAppend(&sql, " AND name > ", SqlBytes(p.page_token));
    absl::StrAppend(&sql, " ORDER BY name LIMIT ", static_cast<uint64_t>(p.page_size) + 1);
    const std::string context = absl::StrCat("list of namespace \"", p.ns, "\"");
    absl::StatusOr<MysqlResult> r = s.Run(sql, context, Connection::kRead);
    if (!r.ok()) return UnavailableUnlessBug(r.status());
    std::vector<LockState> held;
    absl::flat_hash_map<std::string, size_t> shared;  // name -> index in `held`
    for (const MysqlRow& row : r->rows) {
      LockState state;
      int64_t kind;
      if (!row[0].has_value() || !ParseField(row, 7, &kind)) {
        return Unexpected("list", LockKey{p.ns, ""});
      }
      state.key = LockKey{p.ns, *row[0]};
      if (kind == 0) {
        if (!AddHolder(row, 1, &state)) return Unexpected("list", state.key);
      } else {
        shared.emplace(*row[0], held.size());
      }
      held.push_back(std::move(state));
    }
    if (!shared.empty()) {
      std::string names;
      for (const auto& [name, index] : shared) {
        absl::StrAppend(&names, names.empty() ? "" : ",", SqlBytes(name));
      }
      absl::StatusOr<MysqlResult> h = s.Run(
          absl::StrCat("SELECT h.name, h.owner, h.mode, h.hold_count, h.permits, h.token,"
                       " TIMESTAMPDIFF(MICROSECOND, NOW(6), h.expires_at), l.kind, l.lim FROM ",
                       schema_.holders(), " h JOIN ", schema_.locks(),
                       " l ON l.ns = h.ns AND l.name = h.name WHERE h.ns = ", SqlBytes(p.ns),
                       " AND h.name IN (", names, ") AND l.kind <> 0 AND h.expires_at > NOW(6)"),
          context, Connection::kRead);
      if (!h.ok()) return UnavailableUnlessBug(h.status());
      for (const MysqlRow& row : h->rows) {
        auto it = row[0].has_value() ? shared.find(*row[0]) : shared.end();
        if (it == shared.end() || !AddHolder(row, 1, &held[it->second])) {
          return Unexpected("list", LockKey{p.ns, row[0].value_or("")});
        }
      }
    }
    // A name whose holders all left since the first statement is not held.
    std::vector<LockState> out;
    for (LockState& state : held) {
      FinishState(state);
      if (!state.held) continue;
      state.waiters = engine_.Waiting(state.key);
      out.push_back(std::move(state));
    }
    return PageOf(std::move(out), p.page_size);
  }

  // ---- LockStrategy (the WaitEngine's side) ----

  void TryOnce(const AcquireParams& params, TryKind kind,
               absl::AnyInvocable<void(TryResult) &&> done) override {
    const bool head = kind == TryKind::kHead;
    const bool may_take = kind == TryKind::kFirst || head;
    // A call that may wait keeps its owner's queue entry (a re-entry never
    // waits for it) while another replica can read it (replica_presence.h).
    const bool queue =
        params.wait > absl::ZeroDuration() && kind != TryKind::kReentrant && presence_.others();
    bool refresh = false;
    if (head) {
      absl::MutexLock l(&mu_);
      Pace& pace = PaceLocked(params.key);
      const SteadyClock::time_point now = SteadyClock::now();
      if (now - pace.refreshed >= absl::ToChronoNanoseconds(queue_life_ / 4)) {
        refresh = true;
        pace.refreshed = now;
      }
    }
    // `params` lives until `done` is called.
    pool_.Submit([this, p = &params, may_take, poll = kind != TryKind::kFirst, head, queue, refresh,
                  done = std::move(done)](Connection* s) mutable {
      if (s == nullptr) {
        std::move(done)(TryResult{ShuttingDownError()});
        return;
      }
      TryResult a = TryAcquire(*s, *p, may_take, poll, queue, refresh);
      if (head && a.result.ok() && a.result->acquired) OnGranted(p->key);
      std::move(done)(std::move(a));
    });
  }

  // A local waiter was granted `key`: its polling starts over.
  void OnGranted(const LockKey& key) {
    absl::MutexLock l(&mu_);
    PaceLocked(key).backoff = options_.initial_retry;
  }

  // A release through this replica freed `key` (or some of its permits): its
  // first waiter tries now.
  void Wake(const LockKey& key) {
    {
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
    const bool lost = last.result.ok()
                          ? !last.result->acquired
                          : last.result.status().code() == absl::StatusCode::kUnavailable;
    if (after != TryKind::kHead || !lost) {
      // The next waiter polls while the new holder works, unless the
      // holder's release through this replica wakes it first.
      return RetryDelay(pace.backoff, last);
    }
    pace.backoff = std::min(pace.backoff * 2, options_.max_retry);
    return RetryDelay(pace.backoff, last);
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

  // ---- ReplicaPresence's beat ----

  void Beat(absl::Duration life, absl::AnyInvocable<void(absl::StatusOr<int>) &&> done) {
    pool_.Submit([this, life, done = std::move(done)](Connection* s) mutable {
      if (s == nullptr) {
        std::move(done)(ShuttingDownError());
        return;
      }
      std::move(done)(CountOtherReplicas(*s, life));
    });
  }

  // Records this replica as live for `life` (database clock); the number of
  // other live replicas.
  absl::StatusOr<int> CountOtherReplicas(Connection& s, absl::Duration life) {
    absl::StatusOr<MysqlResult> w =
        s.Run(absl::StrCat("INSERT INTO ", schema_.replicas(), " (replica, until) VALUES (",
                           SqlBytes(replica_), ", TIMESTAMPADD(MICROSECOND, ",
                           absl::ToInt64Microseconds(life),
                           ", NOW(6))) ON DUPLICATE KEY UPDATE until = VALUES(until)"),
              "replica presence", Connection::kWrite);
    if (!w.ok()) return w.status();
    absl::StatusOr<MysqlResult> r =
        s.Run(absl::StrCat("SELECT COUNT(*) FROM ", schema_.replicas(),
                           " WHERE until > NOW(6) AND replica <> ", SqlBytes(replica_)),
              "replica presence", Connection::kRead);
    if (!r.ok()) return r.status();
    int64_t others = 0;
    if (r->rows.size() != 1 || !ParseField(r->rows[0], 0, &others)) {
      return absl::InternalError("mysql: unexpected answer counting replicas");
    }
    return static_cast<int>(others);
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
  // This backend's name in <prefix>queue entries.
  const std::string replica_;
  // How long a queue entry lives past its last extension.
  const absl::Duration queue_life_;
  DbHealth health_;
  // Reset (thread joined) by Shutdown(), after the engine is shut down.
  std::unique_ptr<TimerQueue> timers_;

  // Lock order: the engine's mutex, then mu_ (the engine calls NextTry and
  // KeyIdle with its own held; this class never calls the engine under mu_).
  mutable absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<LockKey, Pace> paces_ ABSL_GUARDED_BY(mu_);
  // Calls that may wait, per lock and owner, from Acquire to their answer.
  absl::flat_hash_map<OwnerKey, int> waiting_calls_ ABSL_GUARDED_BY(mu_);
  TimerQueue::TimerId sweep_timer_ ABSL_GUARDED_BY(mu_) = 0;
  // Only the sweep job (one at a time) uses it.
  mysql::Sweeper sweeper_{&options_, &schema_};

  WaitEngine engine_;
  // Submits jobs to pool_ (constructed next; the batcher only keeps its
  // address until then).
  mysql::RenewBatcher renewals_{&pool_, &schema_, std::max<size_t>(1, options_.pool_size / 4)};
  // Last: its threads use everything above.
  WorkerPool pool_;
  // Its beats run on pool_; stopped by Shutdown() before pool_ closes.
  ReplicaPresence presence_{
      timers_.get(), [this](absl::Duration life, auto done) { Beat(life, std::move(done)); }};
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
