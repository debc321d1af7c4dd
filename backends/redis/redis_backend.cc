#include "backends/redis/redis_backend.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "backends/common/log.h"
#include "backends/common/timer_queue.h"
#include "backends/common/waiter_table.h"
#include "backends/redis/keys.h"
#include "backends/redis/redis_client.h"
#include "backends/redis/scripts.h"

namespace lockd {
namespace {

using redis::Command;
using redis::ReplyPtr;

// Callbacks collected under the mutex and run after it is released.
using Deferred = std::vector<absl::AnyInvocable<void() &&>>;

void RunAll(Deferred& deferred) {
  for (auto& fn : deferred) std::move(fn)();
  deferred.clear();
}

// When a retry of a waiter failed because Redis was unreachable.
constexpr absl::Duration kErrorRetryDelay = absl::Milliseconds(250);
// PTTL is whole milliseconds; waking a little after it makes sure the key has
// expired when the retry runs.
constexpr absl::Duration kExpirySlack = absl::Milliseconds(1);
// A held lock without a TTL is not ours to reason about; look again later.
constexpr absl::Duration kNoTtlRecheck = absl::Seconds(1);
constexpr absl::Duration kPingInterval = absl::Seconds(1);
constexpr int kScanCount = 1000;

// Leases and memories are sent in whole milliseconds, rounded up.
int64_t CeilMillis(absl::Duration d) {
  int64_t us = absl::ToInt64Microseconds(d);
  return std::max<int64_t>(1, (us + 999) / 1000);
}

std::string Context(absl::string_view op, const LockKey& key) {
  return absl::StrCat(op, " lock \"", key.name, "\" in namespace \"", key.ns, "\"");
}

bool IntAt(const redisReply* r, size_t i, int64_t* out) {
  if (i >= r->elements) return false;
  const redisReply* e = r->element[i];
  if (e->type == REDIS_REPLY_INTEGER) {
    *out = e->integer;
    return true;
  }
  if (e->type == REDIS_REPLY_STRING) {
    return absl::SimpleAtoi(absl::string_view(e->str, e->len), out);
  }
  return false;
}

bool TokenAt(const redisReply* r, size_t i, uint64_t* out) {
  if (i >= r->elements) return false;
  const redisReply* e = r->element[i];
  if (e->type == REDIS_REPLY_INTEGER) {
    *out = static_cast<uint64_t>(e->integer);
    return true;
  }
  if (e->type == REDIS_REPLY_STRING) {
    return absl::SimpleAtoi(absl::string_view(e->str, e->len), out);
  }
  return false;
}

bool StringAt(const redisReply* r, size_t i, std::string* out) {
  if (i >= r->elements) return false;
  const redisReply* e = r->element[i];
  if (e->type != REDIS_REPLY_STRING && e->type != REDIS_REPLY_STATUS) return false;
  out->assign(e->str, e->len);
  return true;
}

// The reply of the acquire script.
struct AcquireReply {
  bool granted = false;
  std::string owner;
  int64_t hold_count = 0;
  uint64_t token = 0;
  int64_t ms = 0;  // lease in force when granted; the holder's PTTL otherwise
};

absl::StatusOr<AcquireReply> ParseAcquire(absl::string_view context,
                                          absl::StatusOr<ReplyPtr>& reply) {
  if (!reply.ok()) return reply.status();
  const redisReply* r = reply->get();
  AcquireReply a;
  int64_t granted = 0;
  if (r->type != REDIS_REPLY_ARRAY || !IntAt(r, 0, &granted) || !StringAt(r, 1, &a.owner) ||
      !IntAt(r, 2, &a.hold_count) || !TokenAt(r, 3, &a.token) || !IntAt(r, 4, &a.ms)) {
    return redis::RedisError(context, nullptr, r);
  }
  a.granted = granted == 1;
  return a;
}

AcquireResult Granted(const AcquireReply& a) {
  AcquireResult r;
  r.acquired = true;
  r.fencing_token = a.token;
  r.hold_count = static_cast<uint32_t>(a.hold_count);
  r.ttl = absl::Milliseconds(a.ms);
  return r;
}

struct Scripts {
  redis::Script acquire{"acquire", redis::kAcquireScript, ""};
  redis::Script release{"release", redis::kReleaseScript, ""};
  redis::Script renew{"renew", redis::kRenewScript, ""};
  redis::Script describe{"describe", redis::kDescribeScript, ""};
  redis::Script force_release{"force_release", redis::kForceReleaseScript, ""};

  std::vector<redis::Script*> All() {
    return {&acquire, &release, &renew, &describe, &force_release};
  }
};

class RedisBackend final : public Backend, private redis::Subscriber::Listener {
 public:
  RedisBackend(const RedisOptions& options, redis::ConnectionOptions connection,
               std::unique_ptr<Scripts> scripts)
      : options_(options),
        keys_(options.key_prefix),
        scripts_(std::move(scripts)),
        timers_(std::make_unique<TimerQueue>()),
        waiters_(timers_.get(), options.max_waiters,
                 [this](WaiterTable::Waiter w) { OnWaitTimeout(std::move(w)); }),
        pool_(std::make_unique<redis::CommandPool>(connection, scripts_->All(), options.pool_size,
                                                   options.reconnect_backoff_min,
                                                   options.reconnect_backoff_max)),
        subscriber_(std::make_unique<redis::Subscriber>(
            connection, static_cast<redis::Subscriber::Listener*>(this),
            options.reconnect_backoff_min, options.reconnect_backoff_max, kPingInterval)) {}

  ~RedisBackend() override { Shutdown(); }

  // Starts the subscriber and waits until every connection is up.
  absl::Status Start() {
    absl::Status s = subscriber_->Start();
    if (!s.ok()) return s;
    absl::Duration limit = options_.connect_timeout + 4 * options_.command_timeout;
    if (!pool_->WaitAllConnected(limit)) {
      return absl::UnavailableError(absl::StrCat("redis: command connections did not come up: ",
                                                 pool_->last_error().message()));
    }
    if (!subscriber_->WaitConnected(limit)) {
      return absl::UnavailableError(absl::StrCat("redis: subscriber connection did not come up: ",
                                                 subscriber_->last_error().message()));
    }
    return absl::OkStatus();
  }

  absl::string_view name() const override { return "redis"; }

  void Acquire(AcquireParams params, std::shared_ptr<CancelSignal> cancel,
               Callback<AcquireResult> done) override {
    char mode = 'n';
    bool down;
    {
      absl::MutexLock l(&mu_);
      down = shutdown_;
      // Waiters of this process are served first come, first served: while
      // some are queued, a newcomer may only re-enter a lock it holds.
      if (params.wait > absl::ZeroDuration() && locals_.contains(params.key)) mode = 'r';
    }
    if (down) {
      std::move(done)(ShuttingDownError());
      return;
    }
    Command cmd = AcquireCommand(params, mode);
    if (params.wait <= absl::ZeroDuration()) {
      cmd.done = [this, key = params.key,
                  done = std::move(done)](absl::StatusOr<ReplyPtr> reply) mutable {
        absl::StatusOr<AcquireReply> a = ParseAcquire("acquire", reply);
        if (!a.ok()) {
          std::move(done)(a.status());
        } else if (a->granted) {
          std::move(done)(Granted(*a));
        } else {
          std::move(done)(NotAcquired(key, *a));
        }
      };
    } else {
      SteadyClock::time_point deadline = SteadyAfter(params.wait);
      cmd.done = [this, w = WaiterTable::Waiter{std::move(params), std::move(cancel),
                                                std::move(done), deadline}](
                     absl::StatusOr<ReplyPtr> reply) mutable { OnFirstTry(std::move(w), reply); };
    }
    Send(cmd);
  }

  void Release(ReleaseParams params, Callback<ReleaseResult> done) override {
    const LockKey key = params.key;
    redis::LockKeys k = keys_.KeysFor(key);
    Command cmd;
    cmd.script = &scripts_->release;
    cmd.num_keys = 2;
    cmd.args = {std::move(k.lock),
                std::move(k.freed),
                params.owner,
                params.request_id,
                absl::StrCat(CeilMillis(options_.release_memory)),
                std::move(k.channel),
                params.acquire_request_id};
    cmd.context = Context("release", key);
    cmd.done = [this, key, done = std::move(done)](absl::StatusOr<ReplyPtr> reply) mutable {
      uint64_t freed_token = 0;
      absl::StatusOr<ReleaseResult> result = ParseRelease(key, reply, &freed_token);
      if (result.ok() && result->released) {
        // The publish will say the same, a little later; whichever comes
        // first wakes the first local waiter.
        Deferred deferred;
        {
          absl::MutexLock l(&mu_);
          if (!shutdown_) WakeLocked(key, deferred, freed_token);
        }
        RunAll(deferred);
      }
      std::move(done)(std::move(result));
    };
    // With waiters here, their first one's retry goes out right behind the
    // release, on the same connection: when the release frees the lock, the
    // hand-off costs no extra round trip. (If it does not, the retry just
    // loses and the waiter stays first in line.)
    std::optional<Command> attempt;
    Deferred deferred;
    {
      absl::MutexLock l(&mu_);
      auto it = locals_.find(key);
      if (!shutdown_ && it != locals_.end() && !it->second.attempting &&
          it->second.sub == Local::Sub::kActive) {
        attempt = TakeAttemptLocked(key, it->second, deferred);
      }
    }
    RunAll(deferred);
    if (!attempt.has_value()) {
      Send(cmd);
      return;
    }
    absl::Status s = pool_->Submit(cmd, *attempt);
    if (!s.ok()) {
      std::move(cmd.done)(s);
      std::move(attempt->done)(s);
    }
  }

  void Renew(RenewParams params, Callback<RenewResult> done) override {
    redis::LockKeys k = keys_.KeysFor(params.key);
    int64_t ms = CeilMillis(params.ttl);
    Command cmd;
    cmd.script = &scripts_->renew;
    cmd.num_keys = 2;
    cmd.args = {std::move(k.lock), std::move(k.fence), params.owner, absl::StrCat(ms),
                FenceTtl(ms)};
    cmd.context = Context("renew", params.key);
    cmd.done = [key = std::move(params.key), ms, context = cmd.context,
                done = std::move(done)](absl::StatusOr<ReplyPtr> reply) mutable {
      if (!reply.ok()) {
        std::move(done)(reply.status());
        return;
      }
      const redisReply* r = reply->get();
      int64_t code = 0;
      std::string token;
      uint64_t t = 0;
      if (r->type != REDIS_REPLY_ARRAY || !IntAt(r, 0, &code) || !StringAt(r, 1, &token) ||
          (code == 1 && !absl::SimpleAtoi(token, &t))) {
        std::move(done)(redis::RedisError(context, nullptr, r));
      } else if (code == 1) {
        std::move(done)(RenewResult{absl::Milliseconds(ms), t});
      } else {
        std::move(done)(NotHeld(key, code));
      }
    };
    Send(cmd);
  }

  void ForceRelease(ForceReleaseParams params, Callback<ForceReleaseResult> done) override {
    redis::LockKeys k = keys_.KeysFor(params.key);
    Command cmd;
    cmd.script = &scripts_->force_release;
    cmd.num_keys = 1;
    cmd.args = {std::move(k.lock), absl::StrCat(params.fencing_token), std::move(k.channel)};
    cmd.context = Context("force release", params.key);
    cmd.done = [this, key = params.key, want = params.fencing_token, context = cmd.context,
                done = std::move(done)](absl::StatusOr<ReplyPtr> reply) mutable {
      absl::StatusOr<LockState> previous = ParseDescribe(key, context, reply);
      if (!previous.ok()) {
        std::move(done)(previous.status());
        return;
      }
      ForceReleaseResult result;
      result.previous = *std::move(previous);
      if (result.previous.held) {
        int64_t code = 0;
        if (!IntAt(reply->get(), 4, &code)) {
          std::move(done)(redis::RedisError(context, nullptr, reply->get()));
          return;
        }
        if (code != 1) {
          std::move(done)(FencingTokenMismatchError(key, want, result.previous.fencing_token));
          return;
        }
        result.released = true;
        Deferred deferred;
        {
          absl::MutexLock l(&mu_);
          if (!shutdown_) WakeLocked(key, deferred, result.previous.fencing_token);
        }
        RunAll(deferred);
      }
      std::move(done)(std::move(result));
    };
    Send(cmd);
  }

  void Describe(LockKey key, Callback<LockState> done) override {
    Command cmd = DescribeCommand(key);
    cmd.done = [this, key = std::move(key), context = cmd.context,
                done = std::move(done)](absl::StatusOr<ReplyPtr> reply) mutable {
      std::move(done)(ParseDescribe(key, context, reply));
    };
    Send(cmd);
  }

  void List(ListParams params, Callback<ListResult> done) override {
    auto job = std::make_shared<ListJob>();
    job->params = std::move(params);
    job->done = std::move(done);
    job->pattern = keys_.LockKeyPattern(job->params.ns, job->params.prefix);
    ListScan(std::move(job), "0");
  }

  absl::Status Health() const override {
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) return ShuttingDownError();
    }
    if (!subscriber_->connected()) {
      return absl::UnavailableError(absl::StrCat("redis subscriber connection is down: ",
                                                 subscriber_->last_error().message()));
    }
    if (pool_->connected() == 0) {
      return absl::UnavailableError(
          absl::StrCat("no redis command connection: ", pool_->last_error().message()));
    }
    return absl::OkStatus();
  }

  void Shutdown() override {
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) return;
      shutdown_ = true;
    }
    for (WaiterTable::Waiter& w : waiters_.Close()) std::move(w.done)(ShuttingDownError());
    // No listener calls after this; then in-flight commands finish (their
    // callbacks see shutdown_), then the timer thread is joined.
    subscriber_->Stop();
    pool_->Stop();
    timers_.reset();
  }

 private:
  // This process's view of a lock it has waiters on. Exists exactly while
  // waiters are parked on the lock or one is being retried.
  struct Local {
    enum class Sub { kNone, kRequested, kActive };
    // The release channel: requested when the first waiter parks, active once
    // the subscriber confirms it (then a retry cannot miss a release).
    Sub sub = Sub::kNone;
    // The first waiter is out of the table, running the acquire script.
    bool attempting = false;
    // Waiters out of the table re-entering a lock their owner came to hold.
    int reentering = 0;
    // A wake-up came while attempting: if the attempt loses, retry at once.
    bool retry = false;
    TimerQueue::TimerId timer = 0;  // the next retry (lease end, error backoff)
    uint64_t timer_gen = 0;
    // The largest fencing token seen in a reply for this lock. A release of
    // an older holding is stale news: the lock has been granted since.
    uint64_t seen_token = 0;
  };

  // A List call in progress: SCAN pages, then the states of candidates.
  struct ListJob {
    ListParams params;
    Callback<ListResult> done;
    std::string pattern;
    std::vector<std::string> names;  // matching, > page_token
    size_t next = 0;                 // first name not described yet
    ListResult result;
    absl::Mutex mu;
    size_t outstanding ABSL_GUARDED_BY(mu) = 0;
    std::vector<std::optional<LockState>> chunk ABSL_GUARDED_BY(mu);
    absl::Status error ABSL_GUARDED_BY(mu);
  };

  // Queues `cmd`; if that fails, finishes it with the error (inline).
  // REQUIRES: mu_ not held.
  void Send(Command& cmd) {
    absl::Status s = pool_->Submit(cmd);
    if (!s.ok()) std::move(cmd.done)(s);
  }

  std::string FenceTtl(int64_t lease_ms) const {
    if (options_.fence_retention <= absl::ZeroDuration()) return "0";
    return absl::StrCat(lease_ms + CeilMillis(options_.fence_retention));
  }

  Command AcquireCommand(const AcquireParams& p, char mode) const {
    redis::LockKeys k = keys_.KeysFor(p.key);
    int64_t ms = CeilMillis(p.ttl);
    Command cmd;
    cmd.script = &scripts_->acquire;
    cmd.num_keys = 3;
    cmd.args = {std::move(k.lock),   std::move(k.fence), std::move(k.freed),   p.owner,
                absl::StrCat(ms),    p.request_id,       std::string(1, mode), FenceTtl(ms),
                std::move(k.channel)};
    cmd.context = Context("acquire", p.key);
    return cmd;
  }

  Command DescribeCommand(const LockKey& key) const {
    Command cmd;
    cmd.script = &scripts_->describe;
    cmd.num_keys = 1;
    cmd.args = {keys_.KeysFor(key).lock};
    cmd.context = Context("describe", key);
    return cmd;
  }

  static absl::Status NotHeld(const LockKey& key, int64_t code) {
    return LockNotHeldError(key, code == -1 ? "the lock is free (released or lease expired)"
                                            : "the lock is held by another owner");
  }

  // `freed_token` is set to the token of the holding the release freed, when
  // the script reports it.
  static absl::StatusOr<ReleaseResult> ParseRelease(const LockKey& key,
                                                    absl::StatusOr<ReplyPtr>& reply,
                                                    uint64_t* freed_token) {
    if (!reply.ok()) return reply.status();
    const redisReply* r = reply->get();
    int64_t code = 0;
    int64_t count = 0;
    if (r->type != REDIS_REPLY_ARRAY || !IntAt(r, 0, &code) || !IntAt(r, 1, &count)) {
      return redis::RedisError(Context("release", key), nullptr, r);
    }
    if (r->elements > 2 && !TokenAt(r, 2, freed_token)) *freed_token = 0;
    if (code < 0) return NotHeld(key, code);
    return ReleaseResult{code == 1, static_cast<uint32_t>(count)};  // 0, 2: still held
  }

  absl::StatusOr<LockState> ParseDescribe(const LockKey& key, absl::string_view context,
                                          absl::StatusOr<ReplyPtr>& reply) const {
    if (!reply.ok()) return reply.status();
    const redisReply* r = reply->get();
    LockState s;
    s.key = key;
    s.waiters = LocalWaiters(key);
    if (r->type != REDIS_REPLY_ARRAY) return redis::RedisError(context, nullptr, r);
    if (r->elements == 0) return s;
    int64_t count = 0;
    int64_t pttl = 0;
    if (!StringAt(r, 0, &s.owner) || !IntAt(r, 1, &count) || !TokenAt(r, 2, &s.fencing_token) ||
        !IntAt(r, 3, &pttl)) {
      return redis::RedisError(context, nullptr, r);
    }
    s.held = true;
    s.hold_count = static_cast<uint32_t>(count);
    s.ttl_remaining = absl::Milliseconds(std::max<int64_t>(0, pttl));
    return s;
  }

  AcquireResult NotAcquired(const LockKey& key, const AcquireReply& a) const {
    absl::MutexLock l(&mu_);
    return NotAcquiredLocked(key, a);
  }

  AcquireResult NotAcquiredLocked(const LockKey& key, const AcquireReply& a) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    AcquireResult r;
    r.current.key = key;
    r.current.waiters = LocalWaitersLocked(key);
    if (a.owner.empty()) return r;
    r.current.held = true;
    r.current.owner = a.owner;
    r.current.hold_count = static_cast<uint32_t>(a.hold_count);
    r.current.fencing_token = a.token;
    r.current.ttl_remaining = absl::Milliseconds(std::max<int64_t>(0, a.ms));
    return r;
  }

  uint32_t LocalWaiters(const LockKey& key) const {
    absl::MutexLock l(&mu_);
    return LocalWaitersLocked(key);
  }

  uint32_t LocalWaitersLocked(const LockKey& key) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = locals_.find(key);
    size_t n = waiters_.Count(key) + (it != locals_.end() && it->second.attempting ? 1 : 0);
    return static_cast<uint32_t>(n);
  }

  // Every parked waiter's `done` goes through this, so that the lock's local
  // state is dropped (and its channel unsubscribed) when its last waiter
  // finishes, however it finishes (grant, timeout, cancel, shutdown).
  Callback<AcquireResult> Tracked(LockKey key, Callback<AcquireResult> done) {
    return [this, key = std::move(key),
            done = std::move(done)](absl::StatusOr<AcquireResult> r) mutable {
      {
        absl::MutexLock l(&mu_);
        --waiting_;
        if (!shutdown_) ForgetIfIdleLocked(key);
      }
      std::move(done)(std::move(r));
    };
  }

  void ForgetIfIdleLocked(const LockKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = locals_.find(key);
    if (it == locals_.end() || it->second.attempting || it->second.reentering > 0 ||
        waiters_.Count(key) > 0) {
      return;
    }
    if (it->second.timer != 0) timers_->Cancel(it->second.timer);
    if (it->second.sub != Local::Sub::kNone) subscriber_->Unsubscribe(keys_.ChannelFor(key));
    locals_.erase(it);
  }

  void ArmTimerLocked(const LockKey& key, Local& local, absl::Duration delay)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (local.timer != 0) timers_->Cancel(local.timer);
    uint64_t gen = ++local.timer_gen;
    local.timer = timers_->Schedule(delay, [this, key, gen] { OnTimer(key, gen); });
  }

  // Arms the retry for a lock whose holder has `pttl_ms` left.
  void ArmLeaseTimerLocked(const LockKey& key, Local& local, int64_t pttl_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ArmTimerLocked(key, local,
                   pttl_ms >= 0 ? absl::Milliseconds(pttl_ms) + kExpirySlack : kNoTtlRecheck);
  }

  void OnTimer(const LockKey& key, uint64_t gen) {
    Deferred deferred;
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) return;
      auto it = locals_.find(key);
      if (it == locals_.end()) return;
      if (it->second.timer_gen == gen) it->second.timer = 0;
      WakeLocked(key, deferred);
    }
    RunAll(deferred);
  }

  // The lock may have become free: runs the acquire script for the first
  // live local waiter (only one at a time per lock, and only once the
  // release channel is subscribed). `released_token`, when known, is the
  // token of the holding whose release caused the wake-up.
  void WakeLocked(const LockKey& key, Deferred& deferred, uint64_t released_token = 0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = locals_.find(key);
    if (it == locals_.end()) return;
    Local& local = it->second;
    if (released_token != 0 && released_token < local.seen_token) return;
    if (local.attempting) {
      local.retry = true;
      return;
    }
    if (local.sub != Local::Sub::kActive) return;  // its confirmation wakes
    std::optional<Command> cmd = TakeAttemptLocked(key, local, deferred);
    if (!cmd.has_value()) return;
    absl::Status s = pool_->Submit(*cmd);
    if (!s.ok()) {
      deferred.push_back([done = std::move(cmd->done), s]() mutable { std::move(done)(s); });
    }
  }

  // Takes the first live waiter out of the table (finishing cancelled ones
  // through `deferred`) and returns the command that retries it; nullopt if
  // there is none. REQUIRES: !local.attempting.
  std::optional<Command> TakeAttemptLocked(const LockKey& key, Local& local, Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (std::optional<WaiterTable::Waiter> w = waiters_.PopFront(key)) {
      if (w->cancel && w->cancel->cancelled()) {
        deferred.push_back([done = std::move(w->done)]() mutable {
          std::move(done)(absl::CancelledError("acquire cancelled"));
        });
        continue;
      }
      local.attempting = true;
      local.retry = false;
      Command cmd = AcquireCommand(w->params, 'n');
      cmd.done = [this, w = std::move(*w)](absl::StatusOr<ReplyPtr> reply) mutable {
        OnAttempt(std::move(w), reply);
      };
      return cmd;
    }
    return std::nullopt;
  }

  // The reply to a waiting Acquire's first try.
  void OnFirstTry(WaiterTable::Waiter w, absl::StatusOr<ReplyPtr>& reply) {
    absl::StatusOr<AcquireReply> a = ParseAcquire("acquire", reply);
    if (!a.ok()) {
      std::move(w.done)(a.status());
      return;
    }
    if (a->granted) {
      std::move(w.done)(Granted(*a));
      return;
    }
    const LockKey key = w.params.key;
    Deferred deferred;
    std::optional<absl::StatusOr<AcquireResult>> finish;
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) {
        finish = ShuttingDownError();
      } else if (SteadyClock::now() >= w.deadline) {
        finish = NotAcquiredLocked(key, *a);
      } else if (waiting_ >= options_.max_waiters) {
        finish = absl::ResourceExhaustedError(
            absl::StrCat("too many waiting acquires (max_waiters = ", options_.max_waiters, ")"));
      } else {
        Local& local = locals_[key];
        if (!a->owner.empty()) local.seen_token = std::max(local.seen_token, a->token);
        bool first = !local.attempting && waiters_.Count(key) == 0;
        ++waiting_;
        w.done = Tracked(key, std::move(w.done));
        absl::Status parked = waiters_.Park(w);
        if (!parked.ok()) {
          deferred.push_back(
              [done = std::move(w.done), parked]() mutable { std::move(done)(parked); });
        } else {
          if (local.sub == Local::Sub::kNone) {
            // Subscribe, then retry (on the confirmation): a release between
            // the failed try and the subscription cannot be missed.
            local.sub = Local::Sub::kRequested;
            subscriber_->Subscribe(keys_.ChannelFor(key));
          } else if (local.sub == Local::Sub::kActive && first) {
            // Nobody ahead will be woken for us; the channel is live, so one
            // retry now closes the gap since the try.
            WakeLocked(key, deferred);
          }
          if (!a->owner.empty() && !local.attempting) ArmLeaseTimerLocked(key, local, a->ms);
        }
        if (!a->owner.empty()) ReenterOwnerLocked(key, local, a->owner, deferred);
      }
    }
    RunAll(deferred);
    if (finish.has_value()) std::move(w.done)(*std::move(finish));
  }

  // The reply to a parked waiter's retry.
  void OnAttempt(WaiterTable::Waiter w, absl::StatusOr<ReplyPtr>& reply) {
    absl::StatusOr<AcquireReply> a = ParseAcquire("acquire", reply);
    const LockKey key = w.params.key;
    Deferred deferred;
    std::optional<absl::StatusOr<AcquireResult>> finish;
    {
      absl::MutexLock l(&mu_);
      auto it = locals_.find(key);
      Local* local = it == locals_.end() ? nullptr : &it->second;
      if (local != nullptr) {
        local->attempting = false;
        if (a.ok() && !a->owner.empty()) local->seen_token = std::max(local->seen_token, a->token);
      }
      if (shutdown_ || local == nullptr) {
        // A grant is still the caller's (the service gives back grants it
        // cannot deliver); anything else ends with the shutdown.
        if (a.ok() && a->granted) {
          finish = Granted(*a);
        } else {
          finish = ShuttingDownError();
        }
      } else if (!a.ok() && a.status().code() != absl::StatusCode::kUnavailable) {
        finish = a.status();
      } else if (a.ok() && a->granted) {
        local->retry = false;
        finish = Granted(*a);
        // The waiters behind are served when this holder releases, or when
        // its lease ends without a release.
        if (waiters_.Count(key) > 0) ArmLeaseTimerLocked(key, *local, a->ms);
      } else {
        // Lost, or Redis is unreachable: back to the head of the queue until
        // the next wake-up or the waiter's own deadline.
        absl::Status parked = waiters_.Park(w, /*front=*/true);
        if (!parked.ok()) finish = parked;
        if (!a.ok()) {
          ArmTimerLocked(key, *local, kErrorRetryDelay);
        } else if (local->retry || a->owner.empty()) {
          local->retry = false;
          WakeLocked(key, deferred);
        } else {
          ArmLeaseTimerLocked(key, *local, a->ms);
        }
        if (a.ok() && !a->owner.empty()) ReenterOwnerLocked(key, *local, a->owner, deferred);
      }
    }
    RunAll(deferred);
    if (finish.has_value()) std::move(w.done)(*std::move(finish));
  }

  // `owner` holds `key` (a grant message or a reply said so): its parked
  // waiters are reentrant acquires now. Each re-enters with mode 'r', out of
  // the queue, without waiting for the head of the line.
  void ReenterOwnerLocked(const LockKey& key, Local& local, const std::string& owner,
                          Deferred& deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (WaiterTable::Waiter& w : waiters_.PopOwner(key, owner)) {
      if (w.cancel && w.cancel->cancelled()) {
        deferred.push_back([done = std::move(w.done)]() mutable {
          std::move(done)(absl::CancelledError("acquire cancelled"));
        });
        continue;
      }
      ++local.reentering;
      Command cmd = AcquireCommand(w.params, 'r');
      cmd.done = [this, w = std::move(w)](absl::StatusOr<ReplyPtr> reply) mutable {
        OnReenter(std::move(w), reply);
      };
      absl::Status s = pool_->Submit(cmd);
      if (!s.ok()) {
        deferred.push_back([done = std::move(cmd.done), s]() mutable { std::move(done)(s); });
      }
    }
  }

  // The reply to a waiter's re-entry. If its owner no longer holds the lock
  // (released meanwhile), it goes back to the head of the queue.
  void OnReenter(WaiterTable::Waiter w, absl::StatusOr<ReplyPtr>& reply) {
    absl::StatusOr<AcquireReply> a = ParseAcquire("acquire", reply);
    const LockKey key = w.params.key;
    Deferred deferred;
    std::optional<absl::StatusOr<AcquireResult>> finish;
    {
      absl::MutexLock l(&mu_);
      auto it = locals_.find(key);
      Local* local = it == locals_.end() ? nullptr : &it->second;
      if (local != nullptr) --local->reentering;
      if (a.ok() && a->granted) {
        finish = Granted(*a);
      } else if (shutdown_ || local == nullptr) {
        finish = ShuttingDownError();
      } else if (!a.ok() && a.status().code() != absl::StatusCode::kUnavailable) {
        finish = a.status();
      } else {
        absl::Status parked = waiters_.Park(w, /*front=*/true);
        if (!parked.ok()) finish = parked;
        if (a.ok()) {
          WakeLocked(key, deferred);
        } else {
          ArmTimerLocked(key, *local, kErrorRetryDelay);
        }
      }
    }
    RunAll(deferred);
    if (finish.has_value()) std::move(w.done)(*std::move(finish));
  }

  void OnWaitTimeout(WaiterTable::Waiter w) {
    Command cmd = DescribeCommand(w.params.key);
    cmd.done = [this, w = std::move(w),
                context = cmd.context](absl::StatusOr<ReplyPtr> reply) mutable {
      absl::StatusOr<LockState> s = ParseDescribe(w.params.key, context, reply);
      if (!s.ok()) {
        std::move(w.done)(s.status());
        return;
      }
      AcquireResult r;
      r.current = *std::move(s);
      std::move(w.done)(std::move(r));
    };
    Send(cmd);
  }

  void ListScan(std::shared_ptr<ListJob> job, std::string cursor) {
    Command cmd;
    cmd.args = {"SCAN",       std::move(cursor), "MATCH",
                job->pattern, "COUNT",           absl::StrCat(kScanCount)};
    cmd.context = absl::StrCat("list namespace \"", job->params.ns, "\"");
    cmd.done = [this, job, context = cmd.context](absl::StatusOr<ReplyPtr> reply) mutable {
      if (!reply.ok()) {
        std::move(job->done)(reply.status());
        return;
      }
      const redisReply* r = reply->get();
      std::string next;
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || !StringAt(r, 0, &next) ||
          r->element[1]->type != REDIS_REPLY_ARRAY) {
        std::move(job->done)(redis::RedisError(context, nullptr, r));
        return;
      }
      const ListParams& p = job->params;
      const redisReply* keys = r->element[1];
      for (size_t i = 0; i < keys->elements; ++i) {
        const redisReply* k = keys->element[i];
        if (k->type != REDIS_REPLY_STRING) continue;
        std::optional<LockKey> key = keys_.ParseLockKey(absl::string_view(k->str, k->len));
        if (!key.has_value() || key->ns != p.ns || !absl::StartsWith(key->name, p.prefix)) continue;
        if (!p.page_token.empty() && key->name <= p.page_token) continue;
        job->names.push_back(std::move(key->name));
      }
      if (next != "0") {
        ListScan(std::move(job), std::move(next));
        return;
      }
      // SCAN may return a key more than once.
      std::sort(job->names.begin(), job->names.end());
      job->names.erase(std::unique(job->names.begin(), job->names.end()), job->names.end());
      ListDescribe(std::move(job));
    };
    Send(cmd);
  }

  // Describes the next candidates (as many as the page still needs, plus
  // one to know whether another page follows), pipelined.
  void ListDescribe(std::shared_ptr<ListJob> job) {
    const size_t want = job->params.page_size + 1;
    if (job->result.locks.size() >= want || job->next >= job->names.size()) {
      ListResult out = std::move(job->result);
      if (out.locks.size() > job->params.page_size) {
        out.locks.resize(job->params.page_size);
        out.next_page_token = out.locks.back().key.name;
      }
      std::move(job->done)(std::move(out));
      return;
    }
    size_t n = std::min(want - job->result.locks.size(), job->names.size() - job->next);
    size_t first = job->next;
    job->next += n;
    {
      absl::MutexLock l(&job->mu);
      job->outstanding = n;
      job->chunk.assign(n, std::nullopt);
      job->error = absl::OkStatus();
    }
    for (size_t i = 0; i < n; ++i) {
      LockKey key{job->params.ns, job->names[first + i]};
      Command cmd = DescribeCommand(key);
      cmd.done = [this, job, i, key,
                  context = cmd.context](absl::StatusOr<ReplyPtr> reply) mutable {
        absl::StatusOr<LockState> s = ParseDescribe(key, context, reply);
        bool last;
        {
          absl::MutexLock l(&job->mu);
          if (!s.ok()) {
            if (job->error.ok()) job->error = s.status();
          } else if (s->held) {
            job->chunk[i] = *std::move(s);
          }
          last = --job->outstanding == 0;
        }
        if (!last) return;
        absl::Status error;
        {
          absl::MutexLock l(&job->mu);
          error = job->error;
          for (auto& c : job->chunk) {
            if (c.has_value()) job->result.locks.push_back(*std::move(c));
          }
        }
        if (!error.ok()) {
          std::move(job->done)(error);
          return;
        }
        ListDescribe(std::move(job));
      };
      Send(cmd);
    }
  }

  // --- Subscriber::Listener (on the subscriber thread) ---

  void OnSubscribed(const std::string& channel) override {
    std::optional<LockKey> key = keys_.ParseChannel(channel);
    if (!key.has_value()) return;
    Deferred deferred;
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) return;
      auto it = locals_.find(*key);
      if (it == locals_.end() || it->second.sub == Local::Sub::kNone) return;
      it->second.sub = Local::Sub::kActive;
      // The retry after subscribing; after a reconnect it also catches the
      // releases published while the connection was down.
      WakeLocked(*key, deferred);
    }
    RunAll(deferred);
  }

  void OnMessage(const std::string& channel, absl::string_view message) override {
    std::optional<LockKey> key = keys_.ParseChannel(channel);
    if (!key.has_value()) return;
    if (absl::ConsumePrefix(&message, "g")) {
      OnGrantMessage(*key, message);
      return;
    }
    uint64_t released_token = 0;  // 0 (unknown) if the message is not a token
    if (!absl::SimpleAtoi(message, &released_token)) released_token = 0;
    Deferred deferred;
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) return;
      WakeLocked(*key, deferred, released_token);
    }
    RunAll(deferred);
  }

  // "<token> <owner>": the lock was granted to owner.
  void OnGrantMessage(const LockKey& key, absl::string_view message) {
    size_t space = message.find(' ');
    uint64_t token = 0;
    if (space == absl::string_view::npos || !absl::SimpleAtoi(message.substr(0, space), &token)) {
      return;
    }
    Deferred deferred;
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) return;
      auto it = locals_.find(key);
      if (it == locals_.end()) return;
      it->second.seen_token = std::max(it->second.seen_token, token);
      ReenterOwnerLocked(key, it->second, std::string(message.substr(space + 1)), deferred);
    }
    RunAll(deferred);
  }

  void OnConnectionLost(const absl::Status& why) override {
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) return;
      for (auto& [key, local] : locals_) {
        if (local.sub == Local::Sub::kActive) local.sub = Local::Sub::kRequested;
      }
    }
    // Idle command connections to a server that went away would fail their
    // next command; replace them now.
    pool_->ResetConnections();
  }

  // Constant after construction.
  const RedisOptions options_;
  const redis::KeyCodec keys_;
  const std::unique_ptr<Scripts> scripts_;

  mutable absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<LockKey, Local> locals_ ABSL_GUARDED_BY(mu_);
  // Waiting Acquire calls between their first park and their answer.
  size_t waiting_ ABSL_GUARDED_BY(mu_) = 0;

  // Reset (thread joined) by Shutdown(); unused once shutdown_ is set.
  std::unique_ptr<TimerQueue> timers_;
  WaiterTable waiters_;
  const std::unique_ptr<redis::CommandPool> pool_;
  const std::unique_ptr<redis::Subscriber> subscriber_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> NewRedisBackend(const RedisOptions& options) {
  absl::StatusOr<std::vector<redis::Endpoint>> addresses = redis::ParseAddresses(options.addresses);
  if (!addresses.ok()) return addresses.status();
  absl::Status s = redis::ValidateKeyPrefix(options.key_prefix);
  if (!s.ok()) return s;
  if (options.pool_size < 1) return absl::InvalidArgumentError("redis.pool_size: must be >= 1");
  if (options.db < 0) return absl::InvalidArgumentError("redis.db: must be >= 0");
  if (!options.username.empty() && options.password.empty()) {
    return absl::InvalidArgumentError(
        "redis.username: an ACL user needs a password (redis.password_file or "
        "LOCKD_REDIS_PASSWORD)");
  }
  if (options.connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("redis.connect_timeout: must be positive");
  }
  if (options.command_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("redis.command_timeout: must be positive");
  }
  if (options.max_waiters == 0) return absl::InvalidArgumentError("max_waiters: must be positive");
  if (options.fence_retention < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("redis.fence_retention: must not be negative");
  }

  redis::ConnectionOptions connection;
  connection.addresses = *std::move(addresses);
  connection.username = options.username;
  connection.password = options.password;
  connection.db = options.db;
  connection.connect_timeout = options.connect_timeout;
  connection.command_timeout = options.command_timeout;

  // One connection first, so that bad credentials or an unreachable server
  // fail the start with a clear error; it also loads the scripts.
  auto scripts = std::make_unique<Scripts>();
  size_t address = 0;
  absl::StatusOr<redis::ContextPtr> probe = redis::Connect(connection, scripts->All(), &address);
  if (!probe.ok()) return probe.status();
  probe->reset();
  // The first address that worked goes first for the pool too.
  std::rotate(connection.addresses.begin(),
              connection.addresses.begin() + static_cast<ptrdiff_t>(address),
              connection.addresses.end());

  auto backend = std::make_unique<RedisBackend>(options, std::move(connection), std::move(scripts));
  s = backend->Start();
  if (!s.ok()) return s;
  LogInfo("redis backend: connected to ", options.addresses, " (db ", options.db, ", key prefix \"",
          options.key_prefix, "\")");
  return backend;
}

}  // namespace lockd
