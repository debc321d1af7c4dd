#include "backends/redis/redis_backend.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "backends/common/errors.h"
#include "backends/common/list_pages.h"
#include "backends/common/millis.h"
#include "backends/common/renew_join.h"
#include "backends/common/replica_presence.h"
#include "backends/common/timer_queue.h"
#include "backends/common/wait_engine.h"
#include "backends/redis/cluster_transport.h"
#include "backends/redis/command_pool.h"
#include "backends/redis/keys.h"
#include "backends/redis/redis_client.h"
#include "backends/redis/replies.h"
#include "backends/redis/scripts.h"
#include "backends/redis/sentinel.h"
#include "backends/redis/transport.h"
#include "util/log.h"

namespace lockd {
namespace {

using redis::Command;
using redis::ReplyPtr;

// When a retry of a waiter failed because Redis was unreachable.
constexpr absl::Duration kErrorRetryDelay = absl::Milliseconds(250);
// PTTL is whole milliseconds; waking a little after it makes sure the key has
// expired when the retry runs.
constexpr absl::Duration kExpirySlack = absl::Milliseconds(1);
// A held lock without a TTL is not ours to reason about; look again later.
constexpr absl::Duration kNoTtlRecheck = absl::Seconds(1);
// A free lock that another replica's queued call is about to take.
constexpr absl::Duration kQueuedRecheck = absl::Milliseconds(250);
constexpr absl::Duration kPingInterval = absl::Seconds(1);
constexpr int kScanCount = 1000;

// A queue entry lives this long unless its replica extends it (every
// kQueueExtendEvery, a quarter of it, while its call waits): a replica that
// dies leaves entries that stop holding back the others within this time.
// An extension is one script per lock with waiters here, sent only while
// another replica is live.
constexpr absl::Duration kQueueEntryLifetime = ReplicaPresence::kPlaceLife;
constexpr absl::Duration kQueueExtendEvery = absl::Milliseconds(500);
// How often the extension timer looks for entries due (every + tick stays
// well inside the lifetime).
constexpr absl::Duration kQueueExtendTick = absl::Milliseconds(250);

// Every script starts with the prelude; cluster mode publishes with SPUBLISH
// (scripts.h).
struct Scripts {
  explicit Scripts(bool sharded)
      : acquire{"acquire", Body(redis::kAcquireScript, sharded), ""},
        release{"release", Body(redis::kReleaseScript, sharded), ""},
        renew{"renew", Body(redis::kRenewScript, sharded), ""},
        describe{"describe", Body(redis::kDescribeScript, sharded), ""},
        force_release{"force_release", Body(redis::kForceReleaseScript, sharded), ""},
        leave_queue{"leave_queue", Body(redis::kLeaveQueueScript, sharded), ""},
        extend_queue{"extend_queue", Body(redis::kExtendQueueScript, sharded), ""},
        presence{"presence", Body(redis::kPresenceScript, sharded), ""} {}

  static std::string Body(const char* script, bool sharded) {
    std::string body = redis::Prelude(script);
    return sharded ? redis::Sharded(body) : body;
  }

  redis::Script acquire;
  redis::Script release;
  redis::Script renew;
  redis::Script describe;
  redis::Script force_release;
  redis::Script leave_queue;
  redis::Script extend_queue;
  redis::Script presence;

  std::vector<redis::Script*> All() {
    return {&acquire,       &release,     &renew,        &describe,
            &force_release, &leave_queue, &extend_queue, &presence};
  }
};

// This process's name in queue entries (keys.h): random, so that replicas
// (and restarts of one) never share entries.
std::string NewReplicaId() {
  absl::BitGen gen;
  return absl::StrCat(absl::Hex(absl::Uniform<uint64_t>(gen), absl::kZeroPad16));
}

// Waiting is the WaitEngine's; this class supplies its attempts (the acquire
// script), and wakes it on release messages, grant messages and releases made
// through this process. A lock's release channel is subscribed while the
// engine has waiters on it (KeyActive/KeyIdle); the subscription's
// confirmation wakes the lock, so that a release between a failed attempt and
// the subscription is not missed.
// The order across replicas is the lock's queue in Redis (keys.h): a call
// that waits takes a place in it with its first attempt that is not granted
// (the acquire script does), this class extends the lifetime of its places
// while their calls wait (queued_, a timer), and takes a place out when its
// call ends without a grant (a grant takes it out itself). Calls of one
// owner, mode and lock on this process share one place. Places are taken
// only while another replica uses the same Redis (presence_,
// replica_presence.h); alone, the engine's order is the order.
class RedisBackend final : public Backend,
                           private LockStrategy,
                           private redis::Transport::Listener {
 public:
  RedisBackend(const RedisOptions& options, std::unique_ptr<Scripts> scripts)
      : options_(options),
        keys_(options.key_prefix),
        scripts_(std::move(scripts)),
        replica_(NewReplicaId()),
        timers_(std::make_unique<TimerQueue>()),
        engine_(static_cast<LockStrategy*>(this), timers_.get(), options.max_waiters) {}

  ~RedisBackend() override { Shutdown(); }

  // Starts the transport of options_.mode and waits until every connection
  // is up.
  absl::Status Start(redis::ConnectionOptions connection) {
    redis::TransportOptions t;
    t.connection = std::move(connection);
    t.scripts = scripts_->All();
    t.pool_size = options_.pool_size;
    t.backoff_min = options_.reconnect_backoff_min;
    t.backoff_max = options_.reconnect_backoff_max;
    t.ping_interval = kPingInterval;
    auto* listener = static_cast<redis::Transport::Listener*>(this);
    absl::StatusOr<std::unique_ptr<redis::Transport>> transport =
        options_.mode == RedisMode::kCluster
            ? redis::NewClusterTransport(std::move(t), listener)
            : redis::NewStandaloneTransport(std::move(t), listener);
    if (!transport.ok()) return transport.status();
    transport_ = *std::move(transport);
    TimerQueue* timers = timers_.get();
    timers->Schedule(kQueueExtendTick, [this, timers] { ExtendQueueEntries(timers); });
    absl::Status ready =
        transport_->WaitReady(options_.connect_timeout + 4 * options_.command_timeout);
    if (ready.ok()) presence_.Start();
    return ready;
  }

  // Sentinel mode: when the Sentinels move the primary, every connection is
  // dropped and reconnects to the new primary.
  absl::Status WatchSentinels(const redis::ConnectionOptions& connection) {
    sentinel_watcher_ = std::make_unique<redis::SentinelWatcher>(
        connection,
        [this] {
          if (!IsShutdown()) transport_->PrimaryMoved();
        },
        options_.reconnect_backoff_min, options_.reconnect_backoff_max, kPingInterval);
    return sentinel_watcher_->Start();
  }

  absl::string_view name() const override { return "redis"; }

  void Acquire(AcquireParams params, std::shared_ptr<CancelSignal> cancel,
               Callback<AcquireResult> done) override {
    if (params.wait <= absl::ZeroDuration()) {
      engine_.Acquire(std::move(params), std::move(cancel), std::move(done));
      return;
    }
    std::string member = Member(params);
    LockKey key = params.key;
    {
      absl::MutexLock l(&mu_);
      QueuedLock& q = queued_[key];
      if (q.members.empty()) q.extended = absl::Now();
      ++q.members[member];
    }
    engine_.Acquire(
        std::move(params), std::move(cancel),
        [this, key, member, done = std::move(done)](absl::StatusOr<AcquireResult> r) mutable {
          bool last = Unqueue(key, member);
          if (!last || (r.ok() && r->acquired)) {
            std::move(done)(std::move(r));
            return;
          }
          LeaveQueue(key, member, std::move(r), std::move(done));
        });
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
                params.acquire_request_id,
                absl::StrCat(params.fencing_token)};
    cmd.context = absl::StrCat("release of lock ", LockName(key));
    cmd.done = [this, key, done = std::move(done)](absl::StatusOr<ReplyPtr> reply) mutable {
      uint64_t freed_token = 0;
      bool room = true;
      absl::StatusOr<ReleaseResult> result = redis::ParseRelease(key, reply, &freed_token, &room);
      // The publish will say the same, a little later; whichever comes first
      // wakes the first local waiter. A reader's release that leaves other
      // readers holding wakes nobody (and publishes nothing).
      if (result.ok() && result->released && room && !IsShutdown()) {
        engine_.Wake(key, freed_token);
      }
      std::move(done)(std::move(result));
    };
    // With waiters here, their first one's retry goes out right behind the
    // release, on the same connection: when the release frees the lock, the
    // hand-off costs no extra round trip. (If it does not, the retry just
    // loses and the waiter stays first in line.)
    std::optional<WaitEngine::Head> head;
    if (!IsShutdown()) head = engine_.TakeHead(key);
    if (!head.has_value()) {
      Send(cmd);
      return;
    }
    Command attempt = AcquireCommand(head->params(), TryKind::kHead);
    attempt.done = [this, key, context = attempt.context,
                    head = *std::move(head)](absl::StatusOr<ReplyPtr> reply) mutable {
      TryResult r = redis::ParseAcquire(key, head.params().permits, context, reply);
      LetTheScriptJudgeUpgrades(r);
      engine_.FinishHead(std::move(head), std::move(r));
    };
    transport_->Send(std::move(cmd), std::move(attempt));
  }

  void Renew(RenewParams params, Callback<RenewResult> done) override {
    Command cmd = RenewCommand(std::move(params), std::move(done));
    Send(cmd);
  }

  // One pipelined write of every renew script.
  void RenewMany(std::vector<RenewParams> params, RenewManyCallback done) override {
    if (params.empty()) {
      std::move(done)({});
      return;
    }
    auto join = std::make_shared<RenewJoin>(params.size(), std::move(done));
    std::vector<Command> cmds;
    cmds.reserve(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      cmds.push_back(RenewCommand(std::move(params[i]), [join, i](absl::StatusOr<RenewResult> r) {
        join->Done(i, std::move(r));
      }));
    }
    transport_->SendAll(std::move(cmds));
  }

  void ForceRelease(ForceReleaseParams params, Callback<ForceReleaseResult> done) override {
    redis::LockKeys k = keys_.KeysFor(params.key);
    Command cmd;
    cmd.script = &scripts_->force_release;
    cmd.num_keys = 2;
    cmd.args = {std::move(k.lock), std::move(k.qlife), absl::StrCat(params.fencing_token),
                std::move(k.channel)};
    cmd.context = absl::StrCat("force release of lock ", LockName(params.key));
    cmd.done = [this, key = params.key, want = params.fencing_token, context = cmd.context,
                done = std::move(done)](absl::StatusOr<ReplyPtr> reply) mutable {
      absl::StatusOr<ForceReleaseResult> r = redis::ParseForceRelease(key, want, context, reply);
      if (r.ok()) {
        LockState& was = r->previous;
        was.waiters = std::max(was.waiters, engine_.Waiting(key));
        // A shared lock's or semaphore's newest token says nothing of the
        // holding that was freed: wake without one.
        bool single = was.holders.size() == 1 && was.limit == 0;
        if (r->released && !IsShutdown()) engine_.Wake(key, single ? was.fencing_token : 0);
      }
      std::move(done)(std::move(r));
    };
    Send(cmd);
  }

  void Describe(LockKey key, Callback<LockState> done) override { Current(key, std::move(done)); }

  void List(ListParams params, Callback<ListResult> done) override {
    auto job = std::make_shared<ListScan>();
    job->params = std::move(params);
    job->done = std::move(done);
    job->pattern = keys_.LockKeyPattern(job->params.ns, job->params.prefix);
    job->slots = transport_->ScanSlots();
    Scan(std::move(job), "0");
  }

  absl::Status Health() const override {
    if (IsShutdown()) return ShuttingDownError();
    return transport_->Health();
  }

  void Shutdown() override {
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) return;
      shutdown_ = true;
    }
    presence_.Stop();
    engine_.Shutdown();
    // Joins the watcher thread: no PrimaryMoved() on a stopped transport.
    sentinel_watcher_.reset();
    // No listener calls after this; in-flight commands finish (the engine
    // delivers their grants, anything else ends with the shutdown); then the
    // timer thread is joined.
    if (transport_ != nullptr) transport_->Stop();
    timers_.reset();
  }

 private:
  // A List call's SCAN of key names, one server (slot) after the other.
  struct ListScan {
    ListParams params;
    Callback<ListResult> done;
    std::string pattern;
    std::vector<int> slots;          // Transport::ScanSlots()
    size_t server = 0;               // index into slots
    std::vector<std::string> names;  // matching, > page_token
  };

  // The places in the lock queues of this process's waiting calls (keys.h).
  struct QueuedLock {
    absl::flat_hash_map<std::string, int> members;  // member -> calls waiting
    absl::Time extended;                            // last extension sent
  };

  bool IsShutdown() const {
    absl::MutexLock l(&mu_);
    return shutdown_;
  }

  // The queue member of a call (keys.h).
  std::string Member(const AcquireParams& p) const {
    std::string mode = p.limit > 0                   ? absl::StrCat("M", p.permits)
                       : p.mode == LockMode::kShared ? std::string("S")
                                                     : std::string("X");
    return absl::StrCat(replica_, "|", mode, "|", p.owner);
  }

  // The engine answers a parked EXCLUSIVE call of an owner it is told holds
  // SHARED with UpgradeWouldBlockError at once, without an attempt. Here
  // that news can be older than the call: an attempt's reply (or a grant
  // message) may be delivered after the owner released and parked its next,
  // EXCLUSIVE, call. So the engine is told of every holder as EXCLUSIVE: the
  // owner's parked calls then get a re-entry attempt, and the acquire script
  // applies the upgrade rule to what Redis holds now. Only for calls that
  // wait, whose `current` the engine does not hand out (a timeout asks
  // Current()).
  static void LetTheScriptJudgeUpgrades(TryResult& r) {
    if (!r.result.ok() || r.result->acquired) return;
    for (HolderState& h : r.result->current.holders) h.mode = LockMode::kExclusive;
  }

  // One call sharing `member` stopped waiting; true if it was the last.
  bool Unqueue(const LockKey& key, const std::string& member) {
    absl::MutexLock l(&mu_);
    auto it = queued_.find(key);
    if (it == queued_.end()) return true;
    auto m = it->second.members.find(member);
    if (m != it->second.members.end() && --m->second > 0) return false;
    if (m != it->second.members.end()) it->second.members.erase(m);
    if (it->second.members.empty()) queued_.erase(it);
    return true;
  }

  // Takes `member` out of the queue of `key`, then answers `done` with `r`
  // (whatever the removal's outcome: an entry left behind ends with its
  // lifetime).
  void LeaveQueue(const LockKey& key, const std::string& member, absl::StatusOr<AcquireResult> r,
                  Callback<AcquireResult> done) {
    redis::LockKeys k = keys_.KeysFor(key);
    Command cmd;
    cmd.script = &scripts_->leave_queue;
    cmd.num_keys = 2;
    cmd.args = {std::move(k.queue), std::move(k.qlife), member, std::move(k.channel)};
    cmd.context = absl::StrCat("leaving the queue of lock ", LockName(key));
    cmd.done = [r = std::move(r), done = std::move(done)](absl::StatusOr<ReplyPtr>) mutable {
      std::move(done)(std::move(r));
    };
    Send(cmd);
  }

  // The timer: extends the entries of every lock whose last extension is
  // kQueueExtendEvery old, then schedules itself again on `timers` (timers_,
  // which Shutdown() resets while this may run).
  void ExtendQueueEntries(TimerQueue* timers) {
    if (IsShutdown()) return;
    std::vector<Command> cmds;
    const absl::Time now = absl::Now();
    // Alone, no call takes a place (AcquireCommand); places taken before are
    // left to lapse: they hold back nobody but this replica's own calls,
    // which pass them.
    if (presence_.others()) {
      absl::MutexLock l(&mu_);
      for (auto& [key, q] : queued_) {
        if (now - q.extended < kQueueExtendEvery) continue;
        q.extended = now;
        redis::LockKeys k = keys_.KeysFor(key);
        Command cmd;
        cmd.script = &scripts_->extend_queue;
        cmd.num_keys = 2;
        cmd.args = {std::move(k.queue), std::move(k.qlife),
                    absl::StrCat(CeilMillis(kQueueEntryLifetime))};
        for (const auto& [member, calls] : q.members) cmd.args.push_back(member);
        cmd.context = absl::StrCat("extending the queue entries of lock ", LockName(key));
        // A failure is made good by the next extension (well within the
        // lifetime) or, at worst, by the entry's next attempt.
        cmd.done = [](absl::StatusOr<ReplyPtr>) {};
        cmds.push_back(std::move(cmd));
      }
    }
    if (!cmds.empty()) transport_->SendAll(std::move(cmds));
    timers->Schedule(kQueueExtendTick, [this, timers] { ExtendQueueEntries(timers); });
  }

  // ReplicaPresence's beat: the presence script.
  void Beat(absl::Duration life, absl::AnyInvocable<void(absl::StatusOr<int>) &&> done) {
    Command cmd;
    cmd.script = &scripts_->presence;
    cmd.num_keys = 1;
    cmd.args = {keys_.ReplicasKey(), replica_, absl::StrCat(CeilMillis(life))};
    cmd.context = "replica presence";
    cmd.done = [done = std::move(done)](absl::StatusOr<ReplyPtr> reply) mutable {
      if (!reply.ok()) {
        std::move(done)(reply.status());
      } else if (*reply == nullptr || (*reply)->type != REDIS_REPLY_INTEGER) {
        std::move(done)(absl::InternalError("redis: unexpected reply of the presence script"));
      } else {
        std::move(done)(static_cast<int>((*reply)->integer));
      }
    };
    Send(cmd);
  }

  // Queues `cmd`; if that fails, finishes it with the error (inline).
  // REQUIRES: no engine or backend mutex held.
  void Send(Command& cmd) { transport_->Send(std::move(cmd)); }

  Command RenewCommand(RenewParams params, Callback<RenewResult> done) const {
    redis::LockKeys k = keys_.KeysFor(params.key);
    int64_t ms = CeilMillis(params.ttl);
    Command cmd;
    cmd.script = &scripts_->renew;
    cmd.num_keys = 2;
    cmd.args = {std::move(k.lock), std::move(k.fence), params.owner,
                absl::StrCat(ms),  FenceTtl(ms),       absl::StrCat(params.fencing_token)};
    cmd.context = absl::StrCat("renew of lock ", LockName(params.key));
    cmd.done = [key = std::move(params.key), ms, context = cmd.context,
                done = std::move(done)](absl::StatusOr<ReplyPtr> reply) mutable {
      std::move(done)(redis::ParseRenew(key, ms, context, reply));
    };
    return cmd;
  }

  std::string FenceTtl(int64_t lease_ms) const {
    if (options_.fence_retention <= absl::ZeroDuration()) return "0";
    return absl::StrCat(lease_ms + CeilMillis(options_.fence_retention));
  }

  // The acquire script for `p`: a first try or the head of the queue may
  // take a free lock, as may readers tried together; a waiter behind others
  // of this process only re-enters or replays (scripts.h: kMayTakeFree,
  // kJoinReaders, kReenterOnly).
  Command AcquireCommand(const AcquireParams& p, TryKind kind) const {
    const char* try_kind = kind == TryKind::kFirst || kind == TryKind::kHead ? redis::kMayTakeFree
                           : kind == TryKind::kJoin                          ? redis::kJoinReaders
                                                                             : redis::kReenterOnly;
    const char* mode = p.limit > 0 ? "M" : p.mode == LockMode::kShared ? "S" : "X";
    redis::LockKeys k = keys_.KeysFor(p.key);
    int64_t ms = CeilMillis(p.ttl);
    Command cmd;
    cmd.script = &scripts_->acquire;
    cmd.num_keys = 5;
    cmd.args = {std::move(k.lock),
                std::move(k.fence),
                std::move(k.freed),
                std::move(k.queue),
                std::move(k.qlife),
                p.owner,
                absl::StrCat(ms),
                p.request_id,
                try_kind,
                FenceTtl(ms),
                std::move(k.channel),
                mode,
                absl::StrCat(p.limit),
                absl::StrCat(p.permits),
                Member(p),
                p.wait > absl::ZeroDuration() && presence_.others() ? "1" : "0",
                absl::StrCat(CeilMillis(kQueueEntryLifetime))};
    cmd.context = absl::StrCat("acquire of lock ", LockName(p.key));
    return cmd;
  }

  Command DescribeCommand(const LockKey& key) const {
    redis::LockKeys k = keys_.KeysFor(key);
    Command cmd;
    cmd.script = &scripts_->describe;
    cmd.num_keys = 2;
    cmd.args = {std::move(k.lock), std::move(k.qlife)};
    cmd.context = absl::StrCat("describe of lock ", LockName(key));
    return cmd;
  }

  // --- LockStrategy (the WaitEngine's side) ---

  void TryOnce(const AcquireParams& params, TryKind kind,
               absl::AnyInvocable<void(TryResult) &&> done) override {
    if (IsShutdown()) {
      std::move(done)(TryResult{ShuttingDownError()});
      return;
    }
    Command cmd = AcquireCommand(params, kind);
    cmd.done = [key = params.key, permits = params.permits,
                waits = params.wait > absl::ZeroDuration(), context = cmd.context,
                done = std::move(done)](absl::StatusOr<ReplyPtr> reply) mutable {
      TryResult r = redis::ParseAcquire(key, permits, context, reply);
      if (waits) LetTheScriptJudgeUpgrades(r);
      std::move(done)(std::move(r));
    };
    Send(cmd);
  }

  void Current(const LockKey& key, Callback<LockState> done) override {
    Command cmd = DescribeCommand(key);
    cmd.done = [this, key, context = cmd.context,
                done = std::move(done)](absl::StatusOr<ReplyPtr> reply) mutable {
      absl::StatusOr<LockState> s = redis::ParseDescribe(key, context, reply);
      if (s.ok()) s->waiters = std::max(s->waiters, engine_.Waiting(key));
      std::move(done)(std::move(s));
    };
    Send(cmd);
  }

  // A burst of readers is admitted in one round of scripts (kJoinReaders).
  bool TriesReadersTogether() const override { return true; }

  // Retries come from release messages; the timer covers what sends none: a
  // lease that ends without a release, a queue entry of another replica that
  // ends without being taken out (its replica died), and an unreachable
  // Redis.
  absl::Duration NextTry(const LockKey& key, TryKind after, const TryResult& last) override {
    if (!last.result.ok()) return kErrorRetryDelay;
    if (last.result->acquired) return last.result->ttl + kExpirySlack;
    if (last.holder_remaining == absl::InfiniteDuration()) {
      return last.result->current.held ? kNoTtlRecheck : absl::ZeroDuration();
    }
    if (!last.result->current.held) {
      // Free, but another replica's call is ahead in the queue: it is about
      // to be granted (or its replica died). Look again soon: the grant may
      // be one of this call's owner, announced while this attempt was in
      // flight, which this call then re-enters.
      return std::min(last.holder_remaining + kExpirySlack, kQueuedRecheck);
    }
    return last.holder_remaining + kExpirySlack;
  }

  void KeyActive(const LockKey& key) override { transport_->Subscribe(keys_.ChannelFor(key)); }
  void KeyIdle(const LockKey& key) override { transport_->Unsubscribe(keys_.ChannelFor(key)); }

  // --- List ---

  void Scan(std::shared_ptr<ListScan> job, std::string cursor) {
    if (job->server == job->slots.size()) {
      // SCAN may return a key more than once.
      std::sort(job->names.begin(), job->names.end());
      job->names.erase(std::unique(job->names.begin(), job->names.end()), job->names.end());
      ListByDescribing(
          std::move(job->params.ns), std::move(job->names), job->params.page_size,
          [this](const LockKey& key, Callback<LockState> done) { Current(key, std::move(done)); },
          std::move(job->done));
      return;
    }
    Command cmd;
    cmd.args = {"SCAN",       std::move(cursor), "MATCH",
                job->pattern, "COUNT",           absl::StrCat(kScanCount)};
    cmd.slot = job->slots[job->server];
    cmd.context = absl::StrCat("list namespace \"", job->params.ns, "\"");
    cmd.done = [this, job, context = cmd.context](absl::StatusOr<ReplyPtr> reply) mutable {
      if (!reply.ok()) {
        std::move(job->done)(reply.status());
        return;
      }
      std::string next;
      const redisReply* keys = nullptr;
      if (!redis::ParseScan(reply->get(), &next, &keys)) {
        std::move(job->done)(redis::RedisError(context, nullptr, reply->get()));
        return;
      }
      const ListParams& p = job->params;
      for (size_t i = 0; i < keys->elements; ++i) {
        const redisReply* k = keys->element[i];
        if (k->type != REDIS_REPLY_STRING) continue;
        std::optional<LockKey> key = keys_.ParseLockKey(absl::string_view(k->str, k->len));
        if (!key.has_value() || key->ns != p.ns || !absl::StartsWith(key->name, p.prefix)) continue;
        if (!p.page_token.empty() && key->name <= p.page_token) continue;
        job->names.push_back(std::move(key->name));
      }
      if (next == "0") ++job->server;
      Scan(std::move(job), std::move(next));
    };
    Send(cmd);
  }

  // --- Transport::Listener (on a subscriber thread) ---

  void OnSubscribed(const std::string& channel) override {
    // The retry after subscribing; after a reconnect it also catches the
    // releases published while the connection was down.
    std::optional<LockKey> key = keys_.ParseChannel(channel);
    if (key.has_value()) engine_.Wake(*key);
  }

  void OnMessage(const std::string& channel, absl::string_view message) override {
    std::optional<LockKey> key = keys_.ParseChannel(channel);
    if (!key.has_value()) return;
    if (absl::ConsumePrefix(&message, "s") || absl::ConsumePrefix(&message, "g")) {
      // "g<token> <owner>": the lock was granted to owner ("s": SHARED).
      size_t space = message.find(' ');
      uint64_t token = 0;
      if (space == absl::string_view::npos || !absl::SimpleAtoi(message.substr(0, space), &token)) {
        return;
      }
      // As EXCLUSIVE also for a SHARED grant: see LetTheScriptJudgeUpgrades.
      engine_.OwnerHolds(*key, std::string(message.substr(space + 1)), token, LockMode::kExclusive);
      return;
    }
    // A freed token, or "w" (a SHARED or semaphore holder left, a queue entry
    // went away): 0, which is never stale news.
    uint64_t released_token = 0;  // 0 (unknown) if the message is not a token
    if (!absl::SimpleAtoi(message, &released_token)) released_token = 0;
    engine_.Wake(*key, released_token);
  }

  // Constant after construction.
  const RedisOptions options_;
  const redis::KeyCodec keys_;
  const std::unique_ptr<Scripts> scripts_;
  const std::string replica_;

  mutable absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<LockKey, QueuedLock> queued_ ABSL_GUARDED_BY(mu_);

  // Reset (thread joined) by Shutdown(), after the engine is shut down.
  std::unique_ptr<TimerQueue> timers_;
  WaitEngine engine_;
  // Set by Start(), before any other call.
  std::unique_ptr<redis::Transport> transport_;
  // Sentinel mode only; reset (joined) by Shutdown().
  std::unique_ptr<redis::SentinelWatcher> sentinel_watcher_;
  // Started by Start() once the transport is up; stopped by Shutdown() first.
  ReplicaPresence presence_{
      timers_.get(), [this](absl::Duration life, auto done) { Beat(life, std::move(done)); }};
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> NewRedisBackend(const RedisOptions& options) {
  absl::Status s = RedisOptionSet().Check(options);
  if (!s.ok()) return s;
  absl::StatusOr<std::vector<redis::Endpoint>> addresses = redis::ParseAddresses(options.addresses);
  if (!addresses.ok()) return addresses.status();
  s = redis::ValidateKeyPrefix(options.key_prefix);
  if (!s.ok()) return s;
  if (options.mode == RedisMode::kCluster && options.db != 0) {
    return absl::InvalidArgumentError(
        "redis.db: must be 0 in cluster mode (Redis Cluster has only database 0)");
  }
  if (!options.username.empty() && options.password.empty()) {
    return absl::InvalidArgumentError(
        "redis.username: an ACL user needs a password (redis.password_file or "
        "LOCKD_REDIS_PASSWORD)");
  }

  redis::ConnectionOptions connection;
  connection.addresses = *std::move(addresses);
  connection.username = options.username;
  connection.password = options.password;
  connection.db = options.db;
  connection.connect_timeout = options.connect_timeout;
  connection.command_timeout = options.command_timeout;
  if (options.mode == RedisMode::kSentinel) {
    absl::StatusOr<redis::SentinelOptions> sentinel = redis::SentinelOptionsOf(options);
    if (!sentinel.ok()) return sentinel.status();
    connection.sentinel = *std::move(sentinel);
  }

  // One connection first, so that bad credentials or an unreachable server
  // fail the start with a clear error; it also loads the scripts.
  auto scripts = std::make_unique<Scripts>(options.mode == RedisMode::kCluster);
  size_t address = 0;
  absl::StatusOr<redis::ContextPtr> probe = redis::Connect(connection, scripts->All(), &address);
  if (!probe.ok()) return probe.status();
  probe->reset();
  // The first address that worked goes first for the pool too.
  std::rotate(connection.addresses.begin(),
              connection.addresses.begin() + static_cast<ptrdiff_t>(address),
              connection.addresses.end());

  auto backend = std::make_unique<RedisBackend>(options, std::move(scripts));
  s = backend->Start(connection);
  if (!s.ok()) return s;
  if (connection.sentinel.has_value()) {
    s = backend->WatchSentinels(connection);
    if (!s.ok()) return s;
  }
  LogInfo("redis backend: connected to ",
          options.mode == RedisMode::kCluster ? "the cluster of " : "", options.addresses, " (db ",
          options.db, ", key prefix \"", options.key_prefix, "\")");
  return backend;
}

}  // namespace lockd
