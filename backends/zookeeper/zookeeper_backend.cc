#include "backends/zookeeper/zookeeper_backend.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "backends/common/log.h"
#include "backends/common/timer_queue.h"
#include "backends/zookeeper/zk_client.h"
#include "backends/zookeeper/zk_codec.h"

namespace lockd {
namespace {

using Clock = SteadyClock;
using zk::NodeData;
using zk::Op;
using zk::Result;

// Bound on re-reads and re-creates when the lock changes under a request
// (version conflicts, a holder vanishing between two reads, ...).
constexpr int kMaxRetries = 8;
// Orphaned contender nodes remembered for deletion after a reconnect.
constexpr size_t kMaxOrphans = 100000;

std::string What(const LockKey& key) {
  return absl::StrCat("lock \"", key.name, "\" in namespace \"", key.ns, "\"");
}

int64_t ToMs(absl::Duration d) { return std::max<int64_t>(1, absl::ToInt64Milliseconds(d)); }

absl::string_view Basename(absl::string_view path) {
  size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

// What an Acquire's contender node is created with (and holds once lowest).
// Derived when needed rather than kept: a parked waiter should cost little.
NodeData InitialData(const AcquireParams& p) {
  NodeData d;
  d.owner = p.owner;
  d.holds = 1;
  d.ttl_ms = ToMs(p.ttl);
  d.lease = 0;
  if (!p.request_id.empty()) {
    d.last = NodeData::Last::kAcquire;
    d.last_id = p.request_id;
    d.last_holds = 1;
    d.last_ttl_ms = d.ttl_ms;
  }
  return d;
}

// The index of the contender node `name` in `queue` (in queue order), or
// queue.size() if it is not there. A binary search on its sequence: one
// listing is shared by thousands of waiters.
size_t FindContender(const std::vector<zk::Contender>& queue, absl::string_view name) {
  int32_t own_seq;
  if (!zk::ContenderSeq(name, &own_seq)) return queue.size();
  auto it = std::lower_bound(
      queue.begin(), queue.end(), own_seq,
      [](const zk::Contender& c, int32_t seq) { return zk::SeqBefore(c.seq, seq); });
  if (it == queue.end() || it->name != name) return queue.size();
  return static_cast<size_t>(it - queue.begin());
}

struct Stat StatOf(int64_t czxid, int32_t version) {
  struct Stat s = {};
  s.czxid = czxid;
  s.version = version;
  return s;
}

class ZooKeeperBackend final : public Backend {
 public:
  explicit ZooKeeperBackend(const ZooKeeperOptions& options)
      : options_(options),
        hooks_(options.test_hooks),
        root_(options.root),
        timers_(std::make_unique<TimerQueue>()),
        anchor_(std::make_shared<Anchor>()) {
    anchor_->backend = this;
    zk::Client::Options zo;
    zo.hosts = options.hosts;
    zo.session_timeout = options.session_timeout;
    zo.digest = options.digest;
    zk_ = std::make_unique<zk::Client>(
        std::move(zo), [this](zk::SessionState s, uint64_t gen) { OnSessionState(s, gen); },
        [this](uint64_t id, int type, absl::string_view path) { OnWatch(id, type, path); });
  }

  ~ZooKeeperBackend() override { Shutdown(); }

  // Opens the session and waits (up to connect_wait) until the root exists.
  absl::Status Start() {
    {
      absl::MutexLock l(&mu_);
      reason_ = absl::StrCat("connecting to ZooKeeper at ", options_.hosts);
    }
    if (absl::Status s = zk_->Open(); !s.ok()) return s;
    absl::MutexLock l(&mu_);
    ScheduleReapTick();
    auto settled = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ready_ || !root_error_.ok(); };
    mu_.AwaitWithTimeout(absl::Condition(&settled), options_.connect_wait);
    if (!root_error_.ok()) return root_error_;
    if (!ready_) {
      LogWarning("zookeeper backend: ", reason_, " for ",
                 absl::FormatDuration(options_.connect_wait),
                 " without success; serving UNAVAILABLE until it connects");
    }
    return absl::OkStatus();
  }

  absl::string_view name() const override { return "zookeeper"; }

  void Acquire(AcquireParams params, std::shared_ptr<CancelSignal> cancel,
               Callback<AcquireResult> done) override {
    if (absl::Status s = Usable(); !s.ok()) {
      std::move(done)(s);
      return;
    }
    if (cancel != nullptr && cancel->cancelled()) {
      std::move(done)(absl::CancelledError("acquire cancelled"));
      return;
    }
    auto a = std::make_shared<Attempt>();
    a->params = std::move(params);
    a->cancel = std::move(cancel);
    a->done = std::move(done);
    // Fast path: this replica knows the owner holds the lock; a versioned
    // write of the holder node is the whole reentrant acquire.
    std::optional<Holder> known;
    {
      absl::MutexLock l(&mu_);
      auto it = holders_.find(a->params.key);
      if (it != holders_.end() && it->second.data.owner == a->params.owner &&
          !Expired(it->second, Clock::now()) && !IsReplay(it->second.data, a->params.request_id)) {
        known = it->second;
      }
    }
    if (known.has_value()) {
      Reenter(a, known->path, StatOf(known->czxid, known->version), known->data, 0,
              /*from_cache=*/true);
      return;
    }
    Begin(a);
  }

  void Release(ReleaseParams params, Callback<ReleaseResult> done) override {
    if (absl::Status s = Usable(); !s.ok()) {
      std::move(done)(s);
      return;
    }
    auto op = std::make_shared<ReleaseOp>();
    op->params = std::move(params);
    op->done = std::move(done);
    std::optional<Holder> known;
    {
      absl::MutexLock l(&mu_);
      auto it = holders_.find(op->params.key);
      if (it != holders_.end() && it->second.data.owner == op->params.owner &&
          !Expired(it->second, Clock::now()) &&
          !(it->second.data.last == NodeData::Last::kRelease && !op->params.request_id.empty() &&
            it->second.data.last_id == op->params.request_id)) {
        known = it->second;
      }
    }
    if (known.has_value()) {
      ReleaseOn(op, known->path, StatOf(known->czxid, known->version), known->data,
                /*from_cache=*/true);
      return;
    }
    ReleaseSlow(op);
  }

  void Renew(RenewParams params, Callback<RenewResult> done) override {
    if (absl::Status s = Usable(); !s.ok()) {
      std::move(done)(s);
      return;
    }
    auto op = std::make_shared<RenewOp>();
    op->params = std::move(params);
    op->done = std::move(done);
    std::optional<Holder> known;
    {
      absl::MutexLock l(&mu_);
      auto it = holders_.find(op->params.key);
      if (it != holders_.end() && it->second.data.owner == op->params.owner &&
          !Expired(it->second, Clock::now())) {
        known = it->second;
      }
    }
    if (known.has_value()) {
      RenewOn(op, known->path, StatOf(known->czxid, known->version), known->data,
              /*from_cache=*/true);
      return;
    }
    RenewSlow(op);
  }

  // Reads the lock, then deletes its holder node whatever its data version
  // (the node, whose czxid is the token, is the holding). The waiter behind
  // it is granted as after a freeing release: by its predecessor watch, or
  // at once when it waits on this replica. A holding that vanished meanwhile
  // is re-read.
  void ForceRelease(ForceReleaseParams params, Callback<ForceReleaseResult> done) override {
    if (absl::Status s = Usable(); !s.ok()) {
      std::move(done)(s);
      return;
    }
    auto op = std::make_shared<ForceReleaseOp>();
    op->params = std::move(params);
    op->done = std::move(done);
    ForceReleaseNext(op);
  }

  void Describe(LockKey key, Callback<LockState> done) override {
    if (absl::Status s = Usable(); !s.ok()) {
      std::move(done)(s);
      return;
    }
    ReadLock(key, false, [this, key, done = std::move(done)](absl::StatusOr<LockView> v) mutable {
      if (!v.ok()) {
        std::move(done)(v.status());
        return;
      }
      std::move(done)(StateOf(key, *v));
    });
  }

  void List(ListParams params, Callback<ListResult> done) override {
    if (absl::Status s = Usable(); !s.ok()) {
      std::move(done)(s);
      return;
    }
    auto op = std::make_shared<ListOp>();
    op->params = std::move(params);
    op->done = std::move(done);
    std::string ns_path = absl::StrCat(root_, "/", zk::EncodeSegment(op->params.ns));
    zk_->Submit(Op::Children(ns_path, [this, op](Result r) {
      if (r.rc == ZNONODE) {
        std::move(op->done)(ListResult{});
        return;
      }
      if (r.rc != ZOK) {
        std::move(op->done)(
            zk::ZkError(absl::StrCat("listing locks of namespace \"", op->params.ns, "\""), r.rc));
        return;
      }
      const ListParams& p = op->params;
      bool after_token = !p.page_token.empty() && p.page_token >= p.prefix;
      for (const std::string& child : r.children) {
        std::string name;
        if (!zk::DecodeSegment(child, &name)) continue;
        if (!absl::StartsWith(name, p.prefix)) continue;
        if (after_token && name <= p.page_token) continue;
        op->names.push_back(std::move(name));
      }
      std::sort(op->names.begin(), op->names.end());
      ListNextChunk(op);
    }));
  }

  absl::Status Health() const override {
    absl::MutexLock l(&mu_);
    if (shutdown_) return ShuttingDownError();
    if (ready_) return absl::OkStatus();
    return absl::UnavailableError(reason_);
  }

  void Shutdown() override {
    std::vector<std::shared_ptr<Attempt>> attempts;
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) return;
      shutdown_ = true;
      ready_ = false;
      for (auto& [id, a] : attempts_) attempts.push_back(a);
    }
    for (auto& a : attempts) Finish(a, ShuttingDownError());
    {
      absl::MutexLock l(&anchor_->mu);
      anchor_->backend = nullptr;
    }
    // Ends the session (the server deletes this replica's contender nodes at
    // once) and runs every callback still pending; they see shutdown_.
    zk_->Close();
    // Nothing schedules timers once shutdown_ is set (all scheduling checks
    // it under mu_), so the queue can go; its thread is joined here.
    timers_.reset();
  }

 private:
  // What this replica knows about the holder node of one lock.
  struct Holder {
    std::string path;
    int64_t czxid = 0;
    int32_t version = 0;
    NodeData data;
    // The lease is timed from `since`: when this replica wrote lease epoch
    // `lease` itself (precise) or first saw it (not precise: grace added).
    uint64_t lease = 0;
    Clock::time_point since;
    bool precise = false;
    Clock::time_point touched;  // last read or write, for pruning
    uint64_t scan = 0;          // last reaper scan that saw it
    TimerQueue::TimerId timer = 0;
    Clock::time_point timer_at;
  };

  // One Acquire that needs a contender node.
  struct Attempt {
    uint64_t id = 0;  // also the id of its predecessor watch
    AcquireParams params;
    std::shared_ptr<CancelSignal> cancel;
    Callback<AcquireResult> done;
    // Guarded by the backend's mu_ from here on.
    enum class Phase { kRunning, kWaiting, kDone } phase = Phase::kRunning;
    std::string prefix;  // "c-<attempt id>-" of the current node
    std::string path;    // the contender node, once known
    // The reply to creating the current node: ZCONNECTIONLOSS until it
    // arrives (a listing that finds no reply treats it as lost); its path
    // and stat go to `path`, `czxid`, ... at once.
    int create_rc = ZCONNECTIONLOSS;
    int64_t czxid = 0;
    int32_t version = 0;
    // The child name (not the path: a parked waiter should cost little) of
    // the predecessor being watched.
    std::string watched;
    bool watched_is_holder = false;
    // The holder is watched in place of a predecessor of this same owner:
    // its deletion says nothing about who is lowest now.
    bool watch_skips = false;
    int32_t watched_seq = 0;
    int32_t lowest_seq = 0;     // of the queue the watch was chosen from
    int64_t lock_czxid = 0;     // the lock node incarnation of that queue
    int32_t seq = 0;            // of the own node
    int64_t session = 0;        // the own node's session (ephemeralOwner)
    int64_t watched_owner = 0;  // the predecessor's session
    bool parked = false;        // holds a max_waiters slot
    bool stop = false;          // deadline or cancel arrived while an operation ran
    bool cancelled = false;
    bool recheck = false;  // a watch fired while an operation ran
    bool own_deleted = false;
    int retries = 0;
    Clock::time_point deadline;
    TimerQueue::TimerId deadline_timer = 0;
  };

  struct LockView {
    bool lock_exists = false;
    struct Stat lock_stat = {};
    std::string lock_data;  // only when asked for
    size_t contenders = 0;
    bool has_holder = false;
    std::string holder_path;
    struct Stat holder_stat = {};
    NodeData holder;
  };

  // One getChildren of a lock node, parsed once and shared by every request
  // that waited for it.
  struct Listing {
    int rc = ZOK;
    struct Stat stat = {};             // the lock node's
    std::vector<zk::Contender> queue;  // in queue order
  };
  using ListingPtr = std::shared_ptr<const Listing>;
  using ListingCb = absl::AnyInvocable<void(ListingPtr) &&>;

  struct ReleaseOp {
    ReleaseParams params;
    Callback<ReleaseResult> done;
    int tries = 0;
  };

  struct RenewOp {
    RenewParams params;
    Callback<RenewResult> done;
    int tries = 0;
  };

  struct ListOp {
    ListParams params;
    Callback<ListResult> done;
    std::vector<std::string> names;  // candidates, sorted
    size_t next = 0;
    ListResult out;
    // The chunk being read.
    absl::Mutex mu;
    std::vector<std::optional<LockState>> chunk ABSL_GUARDED_BY(mu);
    size_t outstanding ABSL_GUARDED_BY(mu) = 0;
    absl::Status error ABSL_GUARDED_BY(mu);
  };

  struct Scan {
    uint64_t number = 0;
    Clock::time_point start;
    std::deque<std::pair<LockKey, std::string>> locks;  // key, lock node path
    int listing = 0;
    int reading = 0;
    bool complete = true;
  };

  // Cancel callbacks reach the backend through this, cleared at Shutdown().
  struct Anchor {
    absl::Mutex mu;
    ZooKeeperBackend* backend ABSL_GUARDED_BY(mu) = nullptr;
  };

  // ---- Paths and small helpers ---------------------------------------------

  std::string NsPath(const LockKey& key) const {
    return absl::StrCat(root_, "/", zk::EncodeSegment(key.ns));
  }
  std::string LockPath(const LockKey& key) const {
    return absl::StrCat(root_, "/", zk::EncodeSegment(key.ns), "/", zk::EncodeSegment(key.name));
  }

  absl::Status Usable() const {
    absl::MutexLock l(&mu_);
    if (shutdown_) return ShuttingDownError();
    if (!ready_) return absl::UnavailableError(reason_);
    return absl::OkStatus();
  }

  static bool IsReplay(const NodeData& d, const std::string& request_id) {
    return !request_id.empty() && d.last == NodeData::Last::kAcquire && d.last_id == request_id;
  }

  Clock::time_point LeaseEnd(const Holder& h) const {
    absl::Duration d = absl::Milliseconds(h.data.ttl_ms);
    if (!h.precise) d += options_.observer_grace;
    return h.since + absl::ToChronoNanoseconds(d);
  }

  bool Expired(const Holder& h, Clock::time_point now) const { return now >= LeaseEnd(h); }

  // Records a sighting (or this replica's write, when `new_lease`) of the
  // holder node of `key`. Stale reads (older data version) are ignored.
  Holder& Observe(const LockKey& key, const std::string& path, const struct Stat& stat,
                  const NodeData& data, bool new_lease, Clock::time_point now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Holder& h = holders_[key];
    if (h.path != path) {
      if (h.timer != 0) timers_->Cancel(h.timer);
      h = Holder();
      h.path = path;
      h.lease = data.lease;
      h.since = now;
      h.precise = new_lease;
      h.version = stat.version;
      h.data = data;
    } else if (stat.version < h.version) {
      h.touched = now;
      return h;
    } else if (new_lease) {
      h.lease = data.lease;
      h.since = now;
      h.precise = true;
    } else if (h.lease != data.lease) {
      h.lease = data.lease;
      h.since = now;
      h.precise = false;
    }
    h.czxid = stat.czxid;
    h.version = stat.version;
    h.data = data;
    h.touched = now;
    return h;
  }

  // Records that the contender with sequence `seq` was the lowest of the
  // lock node incarnation `lock_czxid` (a lock node that ZooKeeper deleted
  // when empty and that was created again restarts its sequence at 0).
  void NoteFloor(const LockKey& key, int64_t lock_czxid, int32_t seq)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto [f, inserted] = floors_.try_emplace(key, Floor{lock_czxid, seq});
    if (inserted) return;
    if (f->second.lock_czxid < lock_czxid) {
      f->second = Floor{lock_czxid, seq};
    } else if (f->second.lock_czxid == lock_czxid && zk::SeqBefore(f->second.seq, seq)) {
      f->second.seq = seq;
    }
  }

  void ForgetHolder(const LockKey& key, const std::string& path)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = holders_.find(key);
    if (it == holders_.end() || it->second.path != path) return;
    if (it->second.timer != 0 && !shutdown_) timers_->Cancel(it->second.timer);
    holders_.erase(it);
  }

  // A timer at the lease end, kept for leases this replica wrote (it is the
  // one that times them exactly) and for holders of locks it has waiters on.
  void ArmLease(const LockKey& key, Holder& h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (shutdown_) return;
    if (!h.precise && local_waiters_.find(key) == local_waiters_.end()) return;
    Clock::time_point end = LeaseEnd(h);
    if (h.timer != 0) {
      if (h.timer_at == end) return;
      timers_->Cancel(h.timer);
    }
    h.timer_at = end;
    h.timer = timers_->ScheduleAt(end, [this, key, path = h.path] { OnLeaseTimer(key, path); });
  }

  LockState StateFromHolder(const LockKey& key, const Holder* h, uint32_t waiters,
                            Clock::time_point now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    LockState s;
    s.key = key;
    s.waiters = waiters;
    if (h == nullptr || Expired(*h, now)) return s;
    s.held = true;
    s.owner = h->data.owner;
    s.hold_count = h->data.holds;
    s.fencing_token = static_cast<uint64_t>(h->czxid);
    Clock::time_point end =
        h->since + absl::ToChronoNanoseconds(absl::Milliseconds(h->data.ttl_ms));
    s.ttl_remaining = std::max(absl::ZeroDuration(), absl::FromChrono(end - now));
    return s;
  }

  // The LockState for a view from ReadLock(); starts reaping the holder if
  // its lease ran out.
  LockState StateOf(const LockKey& key, const LockView& v) {
    uint32_t waiters = v.contenders == 0 ? 0 : static_cast<uint32_t>(v.contenders - 1);
    LockState s;
    std::optional<std::pair<std::string, int32_t>> reap;
    {
      absl::MutexLock l(&mu_);
      Clock::time_point now = Clock::now();
      const Holder* h = nullptr;
      if (v.has_holder) {
        auto it = holders_.find(key);
        if (it != holders_.end() && it->second.path == v.holder_path) h = &it->second;
      }
      s = StateFromHolder(key, h, waiters, now);
      if (h != nullptr && !s.held) reap.emplace(h->path, h->version);
    }
    if (reap.has_value()) Reap(key, reap->first, reap->second, 0, nullptr);
    return s;
  }

  // ---- Reading a lock --------------------------------------------------------

  // Lists the contenders of the lock node `lock_path` and runs `cb` with the
  // result. ZooKeeper reads the listing after every operation the calling
  // thread submitted before this call (it answers one session's requests in
  // order), so an attempt sees its own node and not one it deleted. At most
  // one listing per lock node is in flight: calls that arrive meanwhile share
  // the next one, sent when it returns. Without that, W waiters queueing on
  // one lock read W lists of up to W names: O(W^2) bytes, with thousands of
  // those replies alive at once in the C client's completion queue.
  void ListContenders(const std::string& lock_path, ListingCb cb) {
    {
      absl::MutexLock l(&mu_);
      auto [it, first] = listings_.try_emplace(lock_path);
      if (!first) {
        it->second.push_back(std::move(cb));
        return;
      }
    }
    std::vector<ListingCb> batch;
    batch.push_back(std::move(cb));
    SubmitListing(lock_path, std::move(batch));
  }

  void SubmitListing(const std::string& lock_path, std::vector<ListingCb> batch) {
    if (hooks_ != nullptr) hooks_->contender_listings.fetch_add(1);
    zk_->Submit(
        Op::Children(lock_path, [this, lock_path, batch = std::move(batch)](Result r) mutable {
          auto listing = std::make_shared<Listing>();
          listing->rc = r.rc;
          if (r.rc == ZOK) {
            listing->stat = r.stat;
            listing->queue = zk::QueueOrder(std::move(r.children));
          }
          r = Result();
          std::vector<ListingCb> next;
          {
            absl::MutexLock l(&mu_);
            auto it = listings_.find(lock_path);
            if (it != listings_.end()) {
              if (it->second.empty()) {
                listings_.erase(it);
              } else {
                next.swap(it->second);
              }
            }
          }
          // The next one first: it is in flight while this batch is served.
          if (!next.empty()) SubmitListing(lock_path, std::move(next));
          ListingPtr shared = std::move(listing);
          for (ListingCb& cb : batch) std::move(cb)(shared);
        }));
  }

  // Reads the contender queue of `key` and the holder's data (and, when
  // `with_lock_data`, the lock node's data: the tombstone). Records the
  // holder sighting. Retries when the holder vanishes between the reads.
  void ReadLock(const LockKey& key, bool with_lock_data,
                absl::AnyInvocable<void(absl::StatusOr<LockView>) &&> cb, int tries = 0) {
    std::string path = LockPath(key);
    if (!with_lock_data) {
      ListContenders(path, [this, key, tries, cb = std::move(cb)](ListingPtr l) mutable {
        OnLockRead(key, false, *l, Result(), std::move(cb), tries);
      });
      return;
    }
    // The tombstone check compares the lock node's stat from the listing
    // with its data: read both back to back, unshared.
    struct Reads {
      Result children;
      Result data;
    };
    auto reads = std::make_shared<Reads>();
    std::vector<Op> ops;
    ops.push_back(Op::Children(path, [reads](Result r) { reads->children = std::move(r); }));
    ops.push_back(Op::Get(path, [this, key, reads, tries, cb = std::move(cb)](Result r) mutable {
      Listing listing;
      listing.rc = reads->children.rc;
      if (listing.rc == ZOK) {
        listing.stat = reads->children.stat;
        listing.queue = zk::QueueOrder(std::move(reads->children.children));
      }
      OnLockRead(key, true, listing, std::move(r), std::move(cb), tries);
    }));
    zk_->Submit(std::move(ops));
  }

  void OnLockRead(const LockKey& key, bool with_lock_data, const Listing& children, Result data,
                  absl::AnyInvocable<void(absl::StatusOr<LockView>) &&> cb, int tries) {
    LockView v;
    if (children.rc == ZNONODE) {
      std::move(cb)(std::move(v));
      return;
    }
    if (children.rc != ZOK) {
      std::move(cb)(zk::ZkError(absl::StrCat("reading ", What(key)), children.rc));
      return;
    }
    v.lock_exists = true;
    v.lock_stat = children.stat;
    if (with_lock_data && data.rc == ZOK) v.lock_data = std::move(data.value);
    v.contenders = children.queue.size();
    if (children.queue.empty()) {
      std::move(cb)(std::move(v));
      return;
    }
    v.holder_path = absl::StrCat(LockPath(key), "/", children.queue.front().name);
    std::string holder_path = v.holder_path;
    zk_->Submit(Op::Get(holder_path, [this, key, with_lock_data, tries, v = std::move(v),
                                      cb = std::move(cb)](Result r) mutable {
      if (r.rc == ZNONODE && tries < kMaxRetries) {
        ReadLock(key, with_lock_data, std::move(cb), tries + 1);
        return;
      }
      if (r.rc != ZOK) {
        std::move(cb)(zk::ZkError(absl::StrCat("reading the holder of ", What(key)), r.rc));
        return;
      }
      if (!zk::DecodeNodeData(r.value, &v.holder)) {
        std::move(cb)(absl::InternalError(absl::StrCat("unreadable data in ZooKeeper node ",
                                                       v.holder_path, " (", What(key), ")")));
        return;
      }
      v.has_holder = true;
      v.holder_stat = r.stat;
      {
        absl::MutexLock l(&mu_);
        if (!shutdown_) {
          Holder& h = Observe(key, v.holder_path, r.stat, v.holder, false, Clock::now());
          ArmLease(key, h);
        }
      }
      std::move(cb)(std::move(v));
    }));
  }

  // Deletes the holder node `path` of `key` if its data is still `version`
  // (a renewal in between wins). Then runs `then` (if any).
  void Reap(const LockKey& key, const std::string& path, int32_t version, int tries,
            absl::AnyInvocable<void() &&> then) {
    zk_->Submit(TrackDelete(
        path, Op::Delete(path, version,
                         [this, key, path, tries, then = std::move(then)](Result r) mutable {
                           if (r.rc == ZOK || r.rc == ZNONODE) {
                             if (r.rc == ZOK)
                               LogDebug("zookeeper backend: lease of ", What(key),
                                        " ran out; reaped");
                             absl::MutexLock l(&mu_);
                             ForgetHolder(key, path);
                           } else if (r.rc == ZBADVERSION && tries < kMaxRetries) {
                             Refresh(key, path, tries + 1, std::move(then));
                             return;
                           }
                           if (then) std::move(then)();
                         })));
  }

  // Re-reads a holder whose data changed, and reaps it if its lease (as this
  // replica now sees it) has run out; otherwise re-arms its timer.
  void Refresh(const LockKey& key, const std::string& path, int tries,
               absl::AnyInvocable<void() &&> then) {
    zk_->Submit(Op::Get(path, [this, key, path, tries, then = std::move(then)](Result r) mutable {
      std::optional<int32_t> reap;
      {
        absl::MutexLock l(&mu_);
        NodeData d;
        if (r.rc == ZNONODE) {
          ForgetHolder(key, path);
        } else if (r.rc == ZOK && !shutdown_ && zk::DecodeNodeData(r.value, &d)) {
          Holder& h = Observe(key, path, r.stat, d, false, Clock::now());
          if (Expired(h, Clock::now())) {
            reap = h.version;
          } else {
            ArmLease(key, h);
          }
        }
      }
      if (reap.has_value()) {
        Reap(key, path, *reap, tries, std::move(then));
      } else if (then) {
        std::move(then)();
      }
    }));
  }

  void OnLeaseTimer(const LockKey& key, const std::string& path) {
    int32_t version;
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) return;
      auto it = holders_.find(key);
      if (it == holders_.end() || it->second.path != path) return;
      Holder& h = it->second;
      h.timer = 0;
      if (!Expired(h, Clock::now())) {
        ArmLease(key, h);
        return;
      }
      version = h.version;
    }
    Reap(key, path, version, 0, nullptr);
  }

  // ---- Acquire ---------------------------------------------------------------

  // Registers `a` (deadline, cancel hook) and creates its contender node.
  void Begin(const std::shared_ptr<Attempt>& a) {
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) {
        // Fall through to Finish below.
      } else {
        a->id = next_attempt_id_++;
        a->prefix = zk::NewAttemptPrefix();
        attempts_[a->id] = a;
        if (a->params.wait > absl::ZeroDuration()) {
          a->deadline = SteadyAfter(a->params.wait);
          uint64_t id = a->id;
          a->deadline_timer = timers_->ScheduleAt(a->deadline, [this, id] { OnDeadline(id); });
        }
      }
    }
    if (a->id == 0) {
      Finish(a, ShuttingDownError());
      return;
    }
    if (a->cancel != nullptr) {
      uint64_t id = a->id;
      a->cancel->SetCallback([anchor = anchor_, id] {
        absl::MutexLock l(&anchor->mu);
        if (anchor->backend != nullptr) anchor->backend->OnStop(id, /*cancelled=*/true);
      });
    }
    CreateNode(a);
  }

  // Creates the contender node and, behind it, lists the queue.
  void CreateNode(const std::shared_ptr<Attempt>& a) {
    std::string prefix;
    {
      absl::MutexLock l(&mu_);
      prefix = a->prefix;
      a->create_rc = ZCONNECTIONLOSS;
    }
    // The create's reply precedes the listing's on one session, so
    // OnCreated() finds it recorded in `a`.
    std::string lock_path = LockPath(a->params.key);
    zk_->Submit(Op::Create(
        absl::StrCat(lock_path, "/", prefix), zk::EncodeNodeData(InitialData(a->params)),
        ZOO_EPHEMERAL_SEQUENTIAL, [this, a](Result r) {
          if (r.rc == ZOK && DropThisCreateReply()) {
            LogInfo("zookeeper backend: test hook dropped the reply to creating ", r.value);
            r.rc = ZCONNECTIONLOSS;
          }
          absl::MutexLock l(&mu_);
          a->create_rc = r.rc;
          if (r.rc != ZOK) return;
          a->path = std::move(r.value);
          a->czxid = r.stat.czxid;
          a->version = r.stat.version;
          a->session = r.stat.ephemeralOwner;
        }));
    ListContenders(lock_path, [this, a](ListingPtr l) { OnCreated(a, *l); });
  }

  bool DropThisCreateReply() {
    if (hooks_ == nullptr) return false;
    int n = hooks_->drop_create_replies.load();
    while (n > 0 && !hooks_->drop_create_replies.compare_exchange_weak(n, n - 1)) {
    }
    return n > 0;
  }

  void OnCreated(const std::shared_ptr<Attempt>& a, const Listing& children) {
    int created_rc;
    bool stop;
    {
      absl::MutexLock l(&mu_);
      created_rc = a->create_rc;
      stop = a->stop || a->phase == Attempt::Phase::kDone;
    }
    if (created_rc == ZOK) {
      if (stop) {
        Abandon(a);
        return;
      }
      if (children.rc != ZOK) {
        FailWithNode(a, zk::ZkError(absl::StrCat("listing the contenders of ", What(a->params.key)),
                                    children.rc));
        return;
      }
      Evaluate(a, children);
      return;
    }
    if (created_rc == ZNONODE) {
      EnsureParentsThenCreate(a);
      return;
    }
    absl::Status error = zk::ZkError(
        absl::StrCat("creating a contender node for ", What(a->params.key)), created_rc);
    if (zk::IsTransient(created_rc) && created_rc != ZCLOSING) {
      if (zk_->connected()) {
        // The reply was lost but the session is back: the node may exist.
        // Find it by its attempt id rather than create a second one.
        Recover(a);
        return;
      }
      std::string prefix;
      {
        absl::MutexLock l(&mu_);
        prefix = a->prefix;
      }
      AddOrphan(LockPath(a->params.key), prefix, "");
    }
    Finish(a, error);
  }

  void EnsureParentsThenCreate(const std::shared_ptr<Attempt>& a) {
    if (!CountRetry(a)) return;
    std::vector<Op> ops;
    ops.push_back(Op::Create(NsPath(a->params.key), "", ZOO_CONTAINER, [](Result) {}));
    ops.push_back(Op::Create(LockPath(a->params.key), "", ZOO_CONTAINER, [this, a](Result r) {
      if (r.rc == ZOK || r.rc == ZNODEEXISTS) {
        CreateNode(a);
        return;
      }
      Finish(a, zk::ZkError(absl::StrCat("creating the node of ", What(a->params.key)), r.rc));
    }));
    zk_->Submit(std::move(ops));
  }

  // After a create whose reply was lost: looks for the node by attempt id.
  void Recover(const std::shared_ptr<Attempt>& a) {
    if (!CountRetry(a)) return;
    std::string lock_path = LockPath(a->params.key);
    ListContenders(lock_path, [this, a, lock_path](ListingPtr listing) {
      const Listing& r = *listing;
      std::string prefix;
      {
        absl::MutexLock l(&mu_);
        prefix = a->prefix;
      }
      if (r.rc == ZNONODE) {
        EnsureParentsThenCreate(a);
        return;
      }
      if (r.rc != ZOK) {
        if (zk::IsTransient(r.rc)) AddOrphan(lock_path, prefix, "");
        Finish(a,
               zk::ZkError(absl::StrCat("looking for the contender node of ", What(a->params.key)),
                           r.rc));
        return;
      }
      std::string mine;
      for (const zk::Contender& c : r.queue) {
        if (absl::StartsWith(c.name, prefix)) mine = c.name;
      }
      if (mine.empty()) {
        LogInfo("zookeeper backend: a create for ", What(a->params.key),
                " whose reply was lost did not happen; creating again");
        CreateNode(a);
        return;
      }
      LogInfo("zookeeper backend: found contender node ", mine, " whose create reply was lost");
      std::string path = absl::StrCat(lock_path, "/", mine);
      zk_->Submit(Op::Get(path, [this, a, path, listing](Result g) mutable {
        if (g.rc == ZNONODE) {
          Restart(a);
          return;
        }
        if (g.rc != ZOK) {
          if (zk::IsTransient(g.rc)) AddOrphan("", "", path);
          Finish(a, zk::ZkError(absl::StrCat("reading the contender node of ", What(a->params.key)),
                                g.rc));
          return;
        }
        {
          absl::MutexLock l(&mu_);
          a->path = path;
          a->czxid = g.stat.czxid;
          a->version = g.stat.version;
          a->session = g.stat.ephemeralOwner;
        }
        Evaluate(a, *listing);
      }));
    });
  }

  // Decides from the contender queue: granted (lowest), try-once refusal, or
  // wait behind the predecessor.
  void Evaluate(const std::shared_ptr<Attempt>& a, const Listing& listing) {
    const std::vector<zk::Contender>& queue = listing.queue;
    enum { kGone, kStop, kGranted, kTryOnce, kFull, kWait, kReenter } action;
    std::string holder_path, pred_path;
    AcquireResult granted;
    size_t waiters = 0;
    bool read_holder = true;
    std::optional<int32_t> reap;
    Holder known;
    {
      absl::MutexLock l(&mu_);
      if (a->phase == Attempt::Phase::kDone) return;
      size_t idx = FindContender(queue, Basename(a->path));
      if (idx < queue.size()) {
        a->seq = queue[idx].seq;
        a->lock_czxid = listing.stat.czxid;
        NoteFloor(a->params.key, listing.stat.czxid, queue.front().seq);
      }
      if (a->stop) {
        action = kStop;
      } else if (idx == queue.size()) {
        action = kGone;
      } else if (idx == 0) {
        action = kGranted;
        granted = GrantLocked(a);
      } else {
        std::string lock_path = LockPath(a->params.key);
        holder_path = absl::StrCat(lock_path, "/", queue.front().name);
        pred_path = absl::StrCat(lock_path, "/", queue[idx - 1].name);
        waiters = queue.size() - 2;
        if (a->params.wait <= absl::ZeroDuration()) {
          action = kTryOnce;
        } else if (!a->parked && parked_ >= options_.max_waiters) {
          action = kFull;
        } else {
          action = kWait;
          if (!a->parked) {
            a->parked = true;
            ++parked_;
            ++local_waiters_[a->params.key];
          }
          a->watched = queue[idx - 1].name;
          a->watched_is_holder = idx == 1;
          a->watch_skips = false;
          a->watched_seq = queue[idx - 1].seq;
          a->lowest_seq = queue.front().seq;
          a->recheck = false;
          // A node's owner never changes, and this replica's sighting of its
          // lease is what counts here: a holder it knows needs no read.
          auto it = holders_.find(a->params.key);
          if (idx > 1 && it != holders_.end() && it->second.path == holder_path) {
            read_holder = false;
            Holder& h = it->second;
            bool expired = Expired(h, Clock::now());
            if (h.data.owner == a->params.owner && !expired) {
              action = kReenter;
              known = h;
            } else if (expired) {
              reap = h.version;
            } else {
              ArmLease(a->params.key, h);
            }
          }
        }
      }
    }
    switch (action) {
      case kGone:
        // Our node vanished (reaped after a long stall, or deleted by hand).
        Restart(a);
        return;
      case kStop:
        Abandon(a);
        return;
      case kGranted:
        Finish(a, std::move(granted));
        return;
      case kTryOnce:
        TryOnceRefused(a, holder_path, waiters);
        return;
      case kFull:
        FailWithNode(
            a, absl::ResourceExhaustedError(absl::StrCat(
                   "too many waiting Acquire calls (max_waiters=", options_.max_waiters, ")")));
        return;
      case kReenter:
        Reenter(a, known.path, StatOf(known.czxid, known.version), known.data, 0, false);
        return;
      case kWait:
        if (reap.has_value()) Reap(a->params.key, holder_path, *reap, 0, nullptr);
        Watch(a, holder_path, pred_path, read_holder);
        return;
    }
  }

  // The attempt's node is the lowest: it holds the lock from now, timed by
  // this replica (which answers the grant) without a grace.
  AcquireResult GrantLocked(const std::shared_ptr<Attempt>& a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    NoteFloor(a->params.key, a->lock_czxid, a->seq);
    Holder& h = Observe(a->params.key, a->path, StatOf(a->czxid, a->version),
                        InitialData(a->params), /*new_lease=*/true, Clock::now());
    AcquireResult granted;
    granted.acquired = true;
    granted.fencing_token = static_cast<uint64_t>(a->czxid);
    granted.hold_count = h.data.holds;
    granted.ttl = a->params.ttl;
    TakeSlot(a);
    ArmLease(a->params.key, h);
    return granted;
  }

  // Not lowest and not allowed to wait: give the node back and describe the
  // holder (unless the holder is this very owner: a reentrant acquire).
  void TryOnceRefused(const std::shared_ptr<Attempt>& a, const std::string& holder_path,
                      size_t waiters) {
    std::vector<Op> ops;
    ops.push_back(DeleteOwnOp(a));
    ops.push_back(Op::Get(holder_path, [this, a, holder_path, waiters](Result r) {
      if (r.rc == ZNONODE) {
        Restart(a);  // the holder just left; try again
        return;
      }
      if (r.rc != ZOK) {
        Finish(a, zk::ZkError(absl::StrCat("reading the holder of ", What(a->params.key)), r.rc));
        return;
      }
      NodeData d;
      if (!zk::DecodeNodeData(r.value, &d)) {
        Finish(a, absl::InternalError(
                      absl::StrCat("unreadable data in ZooKeeper node ", holder_path)));
        return;
      }
      bool mine = false, expired = false;
      AcquireResult refused;
      int32_t version = 0;
      {
        absl::MutexLock l(&mu_);
        if (shutdown_) return;
        Clock::time_point now = Clock::now();
        Holder& h = Observe(a->params.key, holder_path, r.stat, d, false, now);
        mine = d.owner == a->params.owner;
        expired = Expired(h, now);
        version = h.version;
        refused.current = StateFromHolder(a->params.key, &h, static_cast<uint32_t>(waiters), now);
      }
      if (mine && !expired) {
        Reenter(a, holder_path, r.stat, d, 0, false);
      } else if (expired) {
        Reap(a->params.key, holder_path, version, 0, [this, a] { Restart(a); });
      } else {
        Finish(a, std::move(refused));
      }
    }));
    zk_->Submit(std::move(ops));
  }

  // Watches the predecessor (and reads the holder, if it is another node and
  // `read_holder`).
  void Watch(const std::shared_ptr<Attempt>& a, const std::string& holder_path,
             const std::string& pred_path, bool read_holder) {
    std::vector<Op> ops;
    std::shared_ptr<Result> holder_read;
    if (read_holder && holder_path != pred_path) {
      holder_read = std::make_shared<Result>();
      ops.push_back(Op::Get(holder_path, [this, holder_read](Result r) {
        absl::MutexLock l(&mu_);
        *holder_read = std::move(r);
      }));
    }
    ops.push_back(Op::Get(
        pred_path,
        [this, a, holder_path, holder_read](Result r) {
          OnWatchSet(a, holder_path, std::move(r), holder_read.get());
        },
        a->id));
    zk_->Submit(std::move(ops));
  }

  // `holder_read`, if not null, is the holder's data, read just before.
  void OnWatchSet(const std::shared_ptr<Attempt>& a, const std::string& holder_path, Result pred,
                  Result* holder_read) {
    if (pred.rc == ZNONODE) {
      Reevaluate(a);  // the predecessor left before the watch was set
      return;
    }
    if (pred.rc != ZOK) {
      FailWithNode(
          a, zk::ZkError(absl::StrCat("watching the queue of ", What(a->params.key)), pred.rc));
      return;
    }
    Result holder;
    bool have_holder = false;
    {
      absl::MutexLock l(&mu_);
      a->watched_owner = pred.stat.ephemeralOwner;
      if (a->watched_is_holder) {
        holder = pred;
        have_holder = true;
      } else if (holder_read != nullptr && holder_read->rc == ZOK && !holder_read->value.empty()) {
        holder = std::move(*holder_read);
        have_holder = true;
      }
    }
    std::optional<int32_t> reap;
    if (have_holder) {
      NodeData d;
      if (zk::DecodeNodeData(holder.value, &d)) {
        bool mine;
        {
          absl::MutexLock l(&mu_);
          if (a->phase == Attempt::Phase::kDone) return;
          Clock::time_point now = Clock::now();
          Holder& h = Observe(a->params.key, holder_path, holder.stat, d, false, now);
          mine = d.owner == a->params.owner && !Expired(h, now);
          if (!mine && Expired(h, now)) reap = h.version;
          if (!mine && !reap.has_value()) ArmLease(a->params.key, h);
        }
        if (mine) {
          // This owner already holds the lock (acquired through another
          // replica or an earlier call): a reentrant acquire. The watch just
          // set fires later into nothing.
          Reenter(a, holder_path, holder.stat, d, 0, false);
          return;
        }
      }
    }
    if (reap.has_value()) Reap(a->params.key, holder_path, *reap, 0, nullptr);
    // A predecessor of this same owner can come to hold the lock without its
    // node changing, and then nothing would wake this attempt, which must be
    // granted at once as a reentrant acquire. Watch the holder instead: when
    // it goes, the queue is read again.
    NodeData pd;
    bool was_holder_watch;
    {
      absl::MutexLock l(&mu_);
      was_holder_watch = a->watched_is_holder;
    }
    if (!was_holder_watch && zk::DecodeNodeData(pred.value, &pd) && pd.owner == a->params.owner) {
      {
        absl::MutexLock l(&mu_);
        if (a->phase == Attempt::Phase::kDone) return;
        a->watched = std::string(Basename(holder_path));
        a->watched_is_holder = true;
        a->watch_skips = true;
      }
      Watch(a, holder_path, holder_path, /*read_holder=*/false);
      return;
    }
    bool stop = false, recheck = false;
    {
      absl::MutexLock l(&mu_);
      if (a->phase == Attempt::Phase::kDone) return;
      stop = a->stop;
      recheck = a->recheck;
      a->recheck = false;
      if (!stop && !recheck) a->phase = Attempt::Phase::kWaiting;
    }
    if (stop) {
      Abandon(a);
    } else if (recheck) {
      Reevaluate(a);
    }
  }

  void OnWatch(uint64_t id, int type, absl::string_view path) {
    if (hooks_ != nullptr) hooks_->predecessor_watch_events.fetch_add(1);
    std::shared_ptr<Attempt> a;
    std::string watched;
    std::optional<AcquireResult> granted;
    {
      absl::MutexLock l(&mu_);
      auto it = attempts_.find(id);
      if (it == attempts_.end()) return;
      a = it->second;
      // A watch an attempt set before it started over with a new node stays
      // registered; its event says nothing about the current predecessor.
      if (Basename(path) != a->watched) return;
      if (a->phase == Attempt::Phase::kRunning) {
        a->recheck = true;
        return;
      }
      if (a->phase != Attempt::Phase::kWaiting) return;
      a->phase = Attempt::Phase::kRunning;
      watched = absl::StrCat(LockPath(a->params.key), "/", a->watched);
      if (type == ZOO_DELETED_EVENT && !a->stop) {
        // Every node below the predecessor is known to be gone if the
        // predecessor was the lowest, or has been seen holding the lock:
        // sequence numbers are never reused, so nothing can have appeared
        // in between, and this node is now the lowest. No need to list,
        // unless the deletion may be the end of this very session: when the
        // server closes a session it deletes its ephemeral nodes and tells
        // that session's watches, just before the session ends. So:
        auto f = floors_.find(a->params.key);
        if (!a->watch_skips && (a->watched_seq == a->lowest_seq ||
                                (f != floors_.end() && f->second.lock_czxid == a->lock_czxid &&
                                 !zk::SeqBefore(f->second.seq, a->watched_seq)))) {
          if (deleting_.find(watched) != deleting_.end()) {
            // This replica deleted it (release, reap, abandon): the reply to
            // that delete, right behind this event, settles it.
            awaiting_delete_[watched].push_back(a);
            return;
          }
          if (a->watched_owner != 0 && a->watched_owner != a->session) {
            granted = GrantLocked(a);  // another session's node
          }
        }
      }
    }
    if (granted.has_value()) {
      Finish(a, *std::move(granted));
      return;
    }
    if (type == ZOO_CHANGED_EVENT) {
      // The predecessor's data changed (a renewal or reentrant acquire, when
      // it holds the lock): the watch is used up, so set it again. Without
      // a holder read, OnWatchSet() uses the holder's path only when the
      // predecessor is the holder (watched_is_holder).
      Watch(a, watched, watched, /*read_holder=*/false);
      return;
    }
    Reevaluate(a);
  }

  void Reevaluate(const std::shared_ptr<Attempt>& a) {
    ListContenders(LockPath(a->params.key), [this, a](ListingPtr l) {
      if (l->rc == ZNONODE) {
        Evaluate(a, Listing());
        return;
      }
      if (l->rc != ZOK) {
        FailWithNode(
            a, zk::ZkError(absl::StrCat("listing the contenders of ", What(a->params.key)), l->rc));
        return;
      }
      Evaluate(a, *l);
    });
  }

  // A reentrant acquire: bumps the hold count and starts a new lease in the
  // holder node `path`, whose data was `d` at `stat.version`.
  void Reenter(const std::shared_ptr<Attempt>& a, const std::string& path, const struct Stat& stat,
               const NodeData& d, int tries, bool from_cache) {
    std::vector<Op> ops;
    bool delete_own = false;
    {
      absl::MutexLock l(&mu_);
      if (!a->path.empty() && !a->own_deleted) {
        a->own_deleted = true;
        delete_own = true;
      }
    }
    if (delete_own) ops.push_back(DeleteOwnOp(a));
    if (IsReplay(d, a->params.request_id)) {
      if (!ops.empty()) zk_->Submit(std::move(ops));
      AcquireResult r;
      r.acquired = true;
      r.fencing_token = static_cast<uint64_t>(stat.czxid);
      r.hold_count = d.last_holds;
      r.ttl = absl::Milliseconds(d.last_ttl_ms);
      Finish(a, std::move(r));
      return;
    }
    NodeData nd = d;
    nd.holds = d.holds + 1;
    nd.lease = d.lease + 1;
    nd.ttl_ms = ToMs(a->params.ttl);
    if (a->params.request_id.empty()) {
      nd.last = NodeData::Last::kNone;
      nd.last_id.clear();
    } else {
      nd.last = NodeData::Last::kAcquire;
      nd.last_id = a->params.request_id;
      nd.last_holds = nd.holds;
      nd.last_ttl_ms = nd.ttl_ms;
    }
    int64_t czxid = stat.czxid;
    ops.push_back(Op::Set(
        path, zk::EncodeNodeData(nd), stat.version,
        [this, a, path, nd, czxid, tries, from_cache](Result r) {
          if (r.rc == ZOK) {
            AcquireResult res;
            res.acquired = true;
            res.fencing_token = static_cast<uint64_t>(czxid);
            res.hold_count = nd.holds;
            res.ttl = a->params.ttl;
            {
              absl::MutexLock l(&mu_);
              if (!shutdown_) {
                Holder& h =
                    Observe(a->params.key, path, r.stat, nd, /*new_lease=*/true, Clock::now());
                ArmLease(a->params.key, h);
              }
            }
            Finish(a, std::move(res));
            return;
          }
          if (r.rc == ZBADVERSION || r.rc == ZNONODE) {
            if (r.rc == ZNONODE) {
              absl::MutexLock l(&mu_);
              ForgetHolder(a->params.key, path);
            }
            if (from_cache) {
              Begin(a);  // the cache was stale: take the general path
            } else if (r.rc == ZBADVERSION && tries < kMaxRetries) {
              RereadForReentry(a, path, tries + 1);
            } else {
              Restart(a);
            }
            return;
          }
          Finish(a,
                 zk::ZkError(absl::StrCat("updating the holder of ", What(a->params.key)), r.rc));
        }));
    zk_->Submit(std::move(ops));
  }

  void RereadForReentry(const std::shared_ptr<Attempt>& a, const std::string& path, int tries) {
    zk_->Submit(Op::Get(path, [this, a, path, tries](Result r) {
      NodeData d;
      if (r.rc == ZOK && zk::DecodeNodeData(r.value, &d) && d.owner == a->params.owner) {
        Reenter(a, path, r.stat, d, tries, false);
        return;
      }
      if (r.rc == ZOK || r.rc == ZNONODE) {
        Restart(a);  // the lock changed hands meanwhile
        return;
      }
      Finish(a, zk::ZkError(absl::StrCat("reading the holder of ", What(a->params.key)), r.rc));
    }));
  }

  // Starts over with a new contender node (the old one, if any, is gone or
  // being deleted).
  void Restart(const std::shared_ptr<Attempt>& a) {
    bool stop;
    {
      absl::MutexLock l(&mu_);
      if (a->phase == Attempt::Phase::kDone) return;
      stop = a->stop || (a->params.wait > absl::ZeroDuration() && Clock::now() >= a->deadline);
    }
    if (stop) {
      Abandon(a);
      return;
    }
    if (!CountRetry(a)) return;
    {
      absl::MutexLock l(&mu_);
      a->prefix = zk::NewAttemptPrefix();
      a->path.clear();
      a->own_deleted = false;
      a->phase = Attempt::Phase::kRunning;
    }
    if (a->id == 0) {
      Begin(a);
    } else {
      CreateNode(a);
    }
  }

  bool CountRetry(const std::shared_ptr<Attempt>& a) {
    {
      absl::MutexLock l(&mu_);
      if (++a->retries <= kMaxRetries) return true;
    }
    FailWithNode(
        a, absl::UnavailableError(absl::StrCat("gave up acquiring ", What(a->params.key), " after ",
                                               kMaxRetries, " conflicting changes; retry")));
    return false;
  }

  // The deadline passed or the call was cancelled.
  void OnDeadline(uint64_t id) { OnStop(id, /*cancelled=*/false); }

  void OnStop(uint64_t id, bool cancelled) {
    std::shared_ptr<Attempt> a;
    {
      absl::MutexLock l(&mu_);
      auto it = attempts_.find(id);
      if (it == attempts_.end()) return;
      a = it->second;
      if (!cancelled) a->deadline_timer = 0;
      if (a->phase == Attempt::Phase::kDone || a->stop) return;
      a->stop = true;
      a->cancelled = cancelled;
      // An operation in flight sees `stop` when it completes.
      if (a->phase == Attempt::Phase::kRunning) return;
    }
    Abandon(a);
  }

  // Ends a stopped attempt: deletes its node, then answers kCancelled, or
  // (deadline) not acquired with the lock's state read after the delete.
  void Abandon(const std::shared_ptr<Attempt>& a) {
    bool cancelled;
    {
      absl::MutexLock l(&mu_);
      if (a->phase == Attempt::Phase::kDone) return;
      cancelled = a->cancelled;
    }
    Callback<AcquireResult> done = TakeDone(a);
    if (!done) return;
    std::string path;
    {
      absl::MutexLock l(&mu_);
      path = a->own_deleted ? "" : a->path;
      a->own_deleted = true;
    }
    if (!path.empty()) zk_->Submit(DeleteOp(path));
    if (cancelled) {
      std::move(done)(absl::CancelledError("acquire cancelled"));
      return;
    }
    // Submitted after the delete on the same session, so the state read
    // no longer counts this waiter.
    LockKey key = a->params.key;
    ReadLock(key, false, [this, key, done = std::move(done)](absl::StatusOr<LockView> v) mutable {
      if (!v.ok()) {
        std::move(done)(v.status());
        return;
      }
      AcquireResult r;
      r.current = StateOf(key, *v);
      std::move(done)(std::move(r));
    });
  }

  Op DeleteOwnOp(const std::shared_ptr<Attempt>& a) {
    std::string path;
    {
      absl::MutexLock l(&mu_);
      path = a->path;
      a->own_deleted = true;
    }
    return DeleteOp(path);
  }

  // Deletes a contender node this replica no longer wants; if the
  // connection drops meanwhile, it is deleted after the reconnect.
  Op DeleteOp(const std::string& path) {
    return TrackDelete(path, Op::Delete(path, -1, [this, path](Result r) {
                         if (zk::IsTransient(r.rc) && r.rc != ZCLOSING && r.rc != ZSESSIONEXPIRED) {
                           AddOrphan("", "", path);
                         }
                       }));
  }

  // Marks `path` as being deleted by this replica until `op` (a delete of
  // it, or a multi that deletes it) completes; see OnWatch.
  Op TrackDelete(const std::string& path, Op op) {
    {
      absl::MutexLock l(&mu_);
      ++deleting_[path];
    }
    op.done = [this, path, done = std::move(op.done)](Result r) mutable {
      DeleteDone(path, r.rc);
      if (done) std::move(done)(std::move(r));
    };
    return op;
  }

  void DeleteDone(const std::string& path, int rc) {
    std::vector<std::shared_ptr<Attempt>> waiting;
    {
      absl::MutexLock l(&mu_);
      auto it = deleting_.find(path);
      if (it != deleting_.end() && --it->second == 0) deleting_.erase(it);
      auto w = awaiting_delete_.find(path);
      if (w != awaiting_delete_.end()) {
        waiting = std::move(w->second);
        awaiting_delete_.erase(w);
      }
    }
    for (auto& a : waiting) {
      // Deleted by this replica's own request: the waiter behind it holds
      // the lock now. Anything else: look at the queue again.
      std::optional<AcquireResult> granted;
      bool stop;
      {
        absl::MutexLock l(&mu_);
        if (a->phase == Attempt::Phase::kDone) continue;
        stop = a->stop;
        if (!stop && rc == ZOK) granted = GrantLocked(a);
      }
      if (granted.has_value()) {
        Finish(a, *std::move(granted));
      } else if (stop) {
        Abandon(a);
      } else {
        Reevaluate(a);
      }
    }
  }

  void FailWithNode(const std::shared_ptr<Attempt>& a, absl::Status status) {
    std::string path;
    {
      absl::MutexLock l(&mu_);
      if (!a->own_deleted) path = a->path;
      a->own_deleted = true;
    }
    if (!path.empty()) zk_->Submit(DeleteOp(path));
    Finish(a, std::move(status));
  }

  // Releases the attempt's bookkeeping and returns its callback (null if it
  // was already finished).
  Callback<AcquireResult> TakeDone(const std::shared_ptr<Attempt>& a) {
    Callback<AcquireResult> done;
    {
      absl::MutexLock l(&mu_);
      if (a->phase == Attempt::Phase::kDone && a->done == nullptr) return nullptr;
      a->phase = Attempt::Phase::kDone;
      done = std::move(a->done);
      a->done = nullptr;
      if (a->id != 0) attempts_.erase(a->id);
      TakeSlot(a);
      if (a->deadline_timer != 0 && !shutdown_) timers_->Cancel(a->deadline_timer);
      a->deadline_timer = 0;
    }
    if (a->cancel != nullptr) a->cancel->ClearCallback();
    return done;
  }

  void TakeSlot(const std::shared_ptr<Attempt>& a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!a->parked) return;
    a->parked = false;
    --parked_;
    auto it = local_waiters_.find(a->params.key);
    if (it != local_waiters_.end() && --it->second == 0) local_waiters_.erase(it);
  }

  void Finish(const std::shared_ptr<Attempt>& a, absl::StatusOr<AcquireResult> result) {
    Callback<AcquireResult> done = TakeDone(a);
    if (done) std::move(done)(std::move(result));
  }

  // ---- ForceRelease ----------------------------------------------------------

  struct ForceReleaseOp {
    ForceReleaseParams params;
    Callback<ForceReleaseResult> done;
    int tries = 0;
  };

  void ForceReleaseNext(const std::shared_ptr<ForceReleaseOp>& op) {
    ReadLock(op->params.key, false, [this, op](absl::StatusOr<LockView> v) {
      const ForceReleaseParams& p = op->params;
      if (!v.ok()) {
        std::move(op->done)(v.status());
        return;
      }
      ForceReleaseResult out;
      out.previous = StateOf(p.key, *v);
      if (!v->has_holder || !out.previous.held) {
        std::move(op->done)(std::move(out));
        return;
      }
      if (p.fencing_token != 0 && out.previous.fencing_token != p.fencing_token) {
        std::move(op->done)(
            FencingTokenMismatchError(p.key, p.fencing_token, out.previous.fencing_token));
        return;
      }
      const std::string path = v->holder_path;
      zk_->Submit(TrackDelete(
          path, Op::Delete(path, -1, [this, op, path, out = std::move(out)](Result r) mutable {
            if (r.rc == ZOK) {
              {
                absl::MutexLock l(&mu_);
                ForgetHolder(op->params.key, path);
              }
              out.released = true;
              std::move(op->done)(std::move(out));
            } else if (r.rc == ZNONODE && ++op->tries <= kMaxRetries) {
              ForceReleaseNext(op);  // the holding ended meanwhile
            } else {
              std::move(op->done)(
                  zk::ZkError(absl::StrCat("force release of ", What(op->params.key)), r.rc));
            }
          })));
    });
  }

  // ---- Release ---------------------------------------------------------------

  void ReleaseSlow(const std::shared_ptr<ReleaseOp>& op) {
    const ReleaseParams& p = op->params;
    ReadLock(p.key, !p.request_id.empty(), [this, op](absl::StatusOr<LockView> v) {
      const ReleaseParams& p = op->params;
      if (!v.ok()) {
        std::move(op->done)(v.status());
        return;
      }
      if (!v->has_holder || v->holder.owner != p.owner) {
        if (!p.acquire_request_id.empty()) {
          std::move(op->done)(ReleaseResult{false, 0});  // nothing of this owner's to undo
          return;
        }
        zk::Tombstone t;
        // A retry of the Release that freed the lock (the multi that freed
        // it left this tombstone in the lock node), also after the lock went
        // to another owner: the owner does not hold it, so its last request
        // on the lock is still that release.
        if (!p.request_id.empty() && v->lock_exists && zk::DecodeTombstone(v->lock_data, &t) &&
            t.owner == p.owner && t.request_id == p.request_id) {
          std::move(op->done)(ReleaseResult{true, 0});
          return;
        }
        std::move(op->done)(LockNotHeldError(
            p.key, v->has_holder ? "the lock is held by another owner"
                                 : "the lock is free (released or lease expired)"));
        return;
      }
      std::optional<int32_t> reap;
      {
        absl::MutexLock l(&mu_);
        auto it = holders_.find(p.key);
        if (it != holders_.end() && it->second.path == v->holder_path &&
            Expired(it->second, Clock::now())) {
          reap = it->second.version;
        }
      }
      if (reap.has_value()) {
        Reap(p.key, v->holder_path, *reap, 0, nullptr);
        if (!p.acquire_request_id.empty()) {
          std::move(op->done)(ReleaseResult{false, 0});
        } else {
          std::move(op->done)(LockNotHeldError(p.key, "the lease expired"));
        }
        return;
      }
      if (!p.request_id.empty() && v->holder.last == NodeData::Last::kRelease &&
          v->holder.last_id == p.request_id) {
        std::move(op->done)(ReleaseResult{false, v->holder.last_holds});
        return;
      }
      ReleaseOn(op, v->holder_path, v->holder_stat, v->holder, false);
    });
  }

  void ReleaseOn(const std::shared_ptr<ReleaseOp>& op, const std::string& path,
                 const struct Stat& stat, const NodeData& d, bool from_cache) {
    const ReleaseParams& p = op->params;
    // An undo gives back the hold only if that Acquire is the owner's last
    // request; it then proceeds as a release without request id (whose
    // versioned write fails if `d` is stale). Nothing to undo is an answer
    // without a write, so it is only given from fresh data.
    if (!p.acquire_request_id.empty() &&
        !(d.last == NodeData::Last::kAcquire && d.last_id == p.acquire_request_id)) {
      if (from_cache) {
        ReleaseSlow(op);
      } else {
        std::move(op->done)(ReleaseResult{false, d.holds});
      }
      return;
    }
    auto retry = [this, op, from_cache](int rc) {
      if (from_cache || ++op->tries <= kMaxRetries) {
        ReleaseSlow(op);
      } else {
        std::move(op->done)(absl::UnavailableError(absl::StrCat(
            "gave up releasing ", What(op->params.key), " after conflicting changes; retry")));
      }
      (void)rc;
    };
    if (d.holds > 1) {
      NodeData nd = d;
      nd.holds = d.holds - 1;
      if (p.request_id.empty()) {
        nd.last = NodeData::Last::kNone;
        nd.last_id.clear();
      } else {
        nd.last = NodeData::Last::kRelease;
        nd.last_id = p.request_id;
        nd.last_holds = nd.holds;
      }
      zk_->Submit(Op::Set(path, zk::EncodeNodeData(nd), stat.version,
                          [this, op, path, nd, retry](Result r) mutable {
                            if (r.rc == ZOK) {
                              {
                                absl::MutexLock l(&mu_);
                                // Same lease epoch: the lease keeps running from where it was.
                                if (!shutdown_)
                                  Observe(op->params.key, path, r.stat, nd, false, Clock::now());
                              }
                              std::move(op->done)(ReleaseResult{false, nd.holds});
                              return;
                            }
                            if (r.rc == ZBADVERSION || r.rc == ZNONODE) {
                              retry(r.rc);
                              return;
                            }
                            std::move(op->done)(zk::ZkError(
                                absl::StrCat("releasing ", What(op->params.key)), r.rc));
                          }));
      return;
    }
    auto freed = [this, op, path, retry](Result r) mutable {
      // For a multi, the code that matters is the first failing operation's.
      for (int rc : r.multi) {
        if (rc != ZOK && rc != ZRUNTIMEINCONSISTENCY) {
          r.rc = rc;
          break;
        }
      }
      if (r.rc == ZOK) {
        {
          absl::MutexLock l(&mu_);
          ForgetHolder(op->params.key, path);
        }
        std::move(op->done)(ReleaseResult{true, 0});
        return;
      }
      if (r.rc == ZBADVERSION || r.rc == ZNONODE) {
        retry(r.rc);
        return;
      }
      std::move(op->done)(zk::ZkError(absl::StrCat("releasing ", What(op->params.key)), r.rc));
    };
    if (p.request_id.empty()) {
      zk_->Submit(TrackDelete(path, Op::Delete(path, stat.version, std::move(freed))));
      return;
    }
    // Delete the holder and leave a tombstone for retries, atomically.
    std::vector<Op> ops;
    ops.push_back(Op::Delete(path, stat.version, nullptr));
    ops.push_back(
        Op::Set(LockPath(p.key), zk::EncodeTombstone({p.owner, p.request_id}), -1, nullptr));
    zk_->Submit(TrackDelete(path, Op::Multi(std::move(ops), std::move(freed))));
  }

  // ---- Renew -----------------------------------------------------------------

  void RenewSlow(const std::shared_ptr<RenewOp>& op) {
    ReadLock(op->params.key, false, [this, op](absl::StatusOr<LockView> v) {
      const RenewParams& p = op->params;
      if (!v.ok()) {
        std::move(op->done)(v.status());
        return;
      }
      if (!v->has_holder) {
        std::move(op->done)(
            LockNotHeldError(p.key, "the lock is free (released or lease expired)"));
        return;
      }
      if (v->holder.owner != p.owner) {
        std::move(op->done)(LockNotHeldError(p.key, "the lock is held by another owner"));
        return;
      }
      std::optional<int32_t> reap;
      {
        absl::MutexLock l(&mu_);
        auto it = holders_.find(p.key);
        if (it != holders_.end() && it->second.path == v->holder_path &&
            Expired(it->second, Clock::now())) {
          reap = it->second.version;
        }
      }
      if (reap.has_value()) {
        Reap(p.key, v->holder_path, *reap, 0, nullptr);
        std::move(op->done)(LockNotHeldError(p.key, "the lease expired"));
        return;
      }
      RenewOn(op, v->holder_path, v->holder_stat, v->holder, false);
    });
  }

  void RenewOn(const std::shared_ptr<RenewOp>& op, const std::string& path, const struct Stat& stat,
               const NodeData& d, bool from_cache) {
    NodeData nd = d;
    nd.lease = d.lease + 1;
    nd.ttl_ms = ToMs(op->params.ttl);
    int64_t czxid = stat.czxid;
    zk_->Submit(Op::Set(
        path, zk::EncodeNodeData(nd), stat.version,
        [this, op, path, nd, czxid, from_cache](Result r) {
          if (r.rc == ZOK) {
            {
              absl::MutexLock l(&mu_);
              if (!shutdown_) {
                Holder& h = Observe(op->params.key, path, r.stat, nd, true, Clock::now());
                ArmLease(op->params.key, h);
              }
            }
            std::move(op->done)(RenewResult{op->params.ttl, static_cast<uint64_t>(czxid)});
            return;
          }
          if (r.rc == ZBADVERSION || r.rc == ZNONODE) {
            if (from_cache || ++op->tries <= kMaxRetries) {
              RenewSlow(op);
            } else {
              std::move(op->done)(absl::UnavailableError(absl::StrCat(
                  "gave up renewing ", What(op->params.key), " after conflicting changes; retry")));
            }
            return;
          }
          std::move(op->done)(zk::ZkError(absl::StrCat("renewing ", What(op->params.key)), r.rc));
        }));
  }

  // ---- List ------------------------------------------------------------------

  // Reads the next few candidate locks at once and keeps the held ones, in
  // name order, until the page is full and one more held lock proves there
  // is a next page.
  void ListNextChunk(const std::shared_ptr<ListOp>& op) {
    size_t page = op->params.page_size;
    size_t n =
        std::min(op->names.size() - op->next, std::max<size_t>(page + 1 - op->out.locks.size(), 8));
    n = std::min<size_t>(n, 64);
    if (n == 0) {
      std::move(op->done)(std::move(op->out));
      return;
    }
    size_t first = op->next;
    op->next += n;
    {
      absl::MutexLock l(&op->mu);
      op->chunk.assign(n, std::nullopt);
      op->outstanding = n;
    }
    for (size_t i = 0; i < n; ++i) {
      LockKey key{op->params.ns, op->names[first + i]};
      ReadLock(key, false, [this, op, key, i](absl::StatusOr<LockView> v) {
        std::optional<LockState> state;
        absl::Status error;
        if (v.ok()) {
          state = StateOf(key, *v);
        } else {
          error = v.status();
        }
        bool last;
        {
          absl::MutexLock l(&op->mu);
          if (!error.ok() && op->error.ok()) op->error = error;
          op->chunk[i] = std::move(state);
          last = --op->outstanding == 0;
        }
        if (last) ListChunkDone(op);
      });
    }
  }

  void ListChunkDone(const std::shared_ptr<ListOp>& op) {
    std::vector<std::optional<LockState>> chunk;
    absl::Status error;
    {
      absl::MutexLock l(&op->mu);
      chunk.swap(op->chunk);
      error = op->error;
    }
    if (!error.ok()) {
      std::move(op->done)(error);
      return;
    }
    for (auto& s : chunk) {
      if (!s.has_value() || !s->held) continue;
      if (op->out.locks.size() == op->params.page_size) {
        op->out.next_page_token = op->out.locks.back().key.name;
        std::move(op->done)(std::move(op->out));
        return;
      }
      op->out.locks.push_back(std::move(*s));
    }
    ListNextChunk(op);
  }

  // ---- Session ---------------------------------------------------------------

  void OnSessionState(zk::SessionState state, uint64_t generation) {
    std::vector<std::shared_ptr<Attempt>> failed;
    bool ensure_root = false, orphans = false;
    {
      absl::MutexLock l(&mu_);
      if (shutdown_ || generation != zk_->generation()) return;
      switch (state) {
        case zk::SessionState::kConnected:
          if (generation != root_generation_) {
            ensure_root = true;
          } else {
            ready_ = true;
            orphans = true;
            LogInfo("zookeeper backend: reconnected to ZooKeeper; serving");
          }
          break;
        case zk::SessionState::kConnecting:
          if (ready_) {
            LogWarning(
                "zookeeper backend: lost the connection to ZooKeeper; reconnecting "
                "(calls fail with UNAVAILABLE meanwhile)");
          }
          ready_ = false;
          reason_ = absl::StrCat("not connected to ZooKeeper at ", options_.hosts);
          break;
        case zk::SessionState::kExpired:
        case zk::SessionState::kAuthFailed: {
          bool expired = state == zk::SessionState::kExpired;
          ready_ = false;
          reason_ = expired ? "the ZooKeeper session expired; opening a new one"
                            : "ZooKeeper refused the credentials from zookeeper.auth_file";
          LogWarning("zookeeper backend: ", reason_,
                     "; locks held through this replica's session are lost");
          for (auto& [id, a] : attempts_) failed.push_back(a);
          for (auto& [key, h] : holders_) {
            if (h.timer != 0) timers_->Cancel(h.timer);
          }
          holders_.clear();
          floors_.clear();
          orphans_.clear();
          timers_->Schedule(expired ? absl::ZeroDuration() : absl::Seconds(1),
                            [this] { ReopenSession(); });
          break;
        }
      }
    }
    for (auto& a : failed) {
      Finish(a,
             absl::UnavailableError(absl::StrCat("the ZooKeeper session ended while waiting for ",
                                                 What(a->params.key), "; retry")));
    }
    if (state == zk::SessionState::kConnected && hooks_ != nullptr) {
      int64_t id;
      std::string password;
      if (zk_->ClientId(&id, &password)) {
        absl::MutexLock l(&hooks_->mu);
        hooks_->session_id = id;
        hooks_->session_password = std::move(password);
      }
    }
    if (ensure_root) EnsureRoot(generation);
    if (orphans) DeleteOrphans();
  }

  void ReopenSession() {
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) return;
    }
    absl::Status s = zk_->Reopen();
    if (!s.ok()) {
      LogWarning("zookeeper backend: cannot open a new session: ", s.message(), "; retrying");
      absl::MutexLock l(&mu_);
      if (!shutdown_) timers_->Schedule(absl::Seconds(1), [this] { ReopenSession(); });
    }
  }

  // Creates the root (and its parents) for a new session, then checks that
  // it can be read; only then does the backend serve.
  void EnsureRoot(uint64_t generation) {
    std::vector<std::string> parts = absl::StrSplit(root_, '/', absl::SkipEmpty());
    std::vector<Op> ops;
    std::string path;
    for (size_t i = 0; i < parts.size(); ++i) {
      absl::StrAppend(&path, "/", parts[i]);
      bool last = i + 1 == parts.size();
      // Parents of the root may be shared with other users of the ensemble:
      // only the root itself gets lockd's ACL.
      ops.push_back(Op::Create(path, "", ZOO_PERSISTENT, [this, generation, last](Result r) {
        if (!last) return;
        if (r.rc != ZOK && r.rc != ZNODEEXISTS) {
          RootFailed(generation, r.rc);
          return;
        }
        zk_->Submit(Op::Children(root_, [this, generation](Result c) {
          if (c.rc != ZOK) {
            RootFailed(generation, c.rc);
            return;
          }
          {
            absl::MutexLock l(&mu_);
            if (shutdown_ || generation != zk_->generation()) return;
            root_generation_ = generation;
            ready_ = true;
            root_error_ = absl::OkStatus();
          }
          LogInfo("zookeeper backend: connected to ", options_.hosts, ", root ", root_);
          DeleteOrphans();
        }));
      }));
      ops.back().open_acl = !last;
    }
    zk_->Submit(std::move(ops));
  }

  void RootFailed(uint64_t generation, int rc) {
    absl::Status s = zk::ZkError(absl::StrCat("creating the root ", root_), rc);
    absl::MutexLock l(&mu_);
    if (shutdown_ || generation != zk_->generation()) return;
    if (zk::IsTransient(rc)) return;  // tried again on the next connect
    root_error_ = s;
    reason_ = std::string(s.message());
    LogError("zookeeper backend: ", s.message());
  }

  void AddOrphan(const std::string& parent, const std::string& prefix, const std::string& path) {
    absl::MutexLock l(&mu_);
    if (shutdown_) return;
    if (orphans_.size() >= kMaxOrphans) {
      LogWarning(
          "zookeeper backend: too many contender nodes to delete after reconnect; "
          "the rest go when the session ends");
      return;
    }
    orphans_.push_back(Orphan{parent, prefix, path});
  }

  // Deletes contender nodes this replica gave up on while disconnected.
  void DeleteOrphans() {
    std::vector<Orphan> orphans;
    {
      absl::MutexLock l(&mu_);
      orphans.swap(orphans_);
    }
    for (const Orphan& o : orphans) {
      if (!o.path.empty()) {
        zk_->Submit(DeleteOp(o.path));
        continue;
      }
      zk_->Submit(Op::Children(o.parent, [this, o](Result r) {
        if (zk::IsTransient(r.rc)) {
          AddOrphan(o.parent, o.prefix, "");
          return;
        }
        for (const std::string& c : r.children) {
          if (absl::StartsWith(c, o.prefix)) zk_->Submit(DeleteOp(absl::StrCat(o.parent, "/", c)));
        }
      }));
    }
  }

  // ---- The periodic reaper -----------------------------------------------

  void ScheduleReapTick() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (shutdown_) return;
    timers_->Schedule(options_.reap_interval, [this] { OnReapTick(); });
  }

  void OnReapTick() {
    bool start = false;
    {
      absl::MutexLock l(&mu_);
      if (shutdown_) return;
      if (ready_ && scan_ == nullptr) {
        scan_ = std::make_unique<Scan>();
        scan_->number = ++scans_;
        scan_->start = Clock::now();
        scan_->listing = 1;
        start = true;
      }
      ScheduleReapTick();
    }
    if (!start) return;
    zk_->Submit(Op::Children(root_, [this](Result r) {
      std::vector<std::string> namespaces;
      {
        absl::MutexLock l(&mu_);
        if (scan_ == nullptr) return;
        --scan_->listing;
        if (r.rc != ZOK) {
          scan_->complete = false;
        } else {
          for (std::string& c : r.children) {
            std::string ns;
            if (zk::DecodeSegment(c, &ns)) namespaces.push_back(std::move(c));
          }
          scan_->listing += static_cast<int>(namespaces.size());
        }
      }
      for (const std::string& ns_enc : namespaces) {
        std::string ns_path = absl::StrCat(root_, "/", ns_enc);
        zk_->Submit(Op::Children(ns_path, [this, ns_enc, ns_path](Result c) {
          {
            absl::MutexLock l(&mu_);
            if (scan_ == nullptr) return;
            --scan_->listing;
            std::string ns;
            zk::DecodeSegment(ns_enc, &ns);
            if (c.rc != ZOK) {
              if (c.rc != ZNONODE) scan_->complete = false;
            } else {
              for (const std::string& n : c.children) {
                std::string name;
                if (!zk::DecodeSegment(n, &name)) continue;
                scan_->locks.emplace_back(LockKey{ns, name}, absl::StrCat(ns_path, "/", n));
              }
            }
          }
          PumpScan();
        }));
      }
      PumpScan();
    }));
  }

  void PumpScan() {
    std::vector<std::pair<LockKey, std::string>> batch;
    bool end = false;
    {
      absl::MutexLock l(&mu_);
      if (scan_ == nullptr) return;
      while (!scan_->locks.empty() && scan_->reading < options_.reap_parallelism) {
        batch.push_back(std::move(scan_->locks.front()));
        scan_->locks.pop_front();
        ++scan_->reading;
      }
      end = batch.empty() && scan_->reading == 0 && scan_->listing == 0 && scan_->locks.empty();
    }
    if (end) {
      EndScan();
      return;
    }
    for (auto& [key, path] : batch) ScanLock(key, path);
  }

  void ScanLock(const LockKey& key, const std::string& lock_path) {
    auto done = [this](bool ok) {
      {
        absl::MutexLock l(&mu_);
        if (scan_ == nullptr) return;
        --scan_->reading;
        if (!ok) scan_->complete = false;
      }
      PumpScan();
    };
    ListContenders(lock_path, [this, key, lock_path, done](ListingPtr r) mutable {
      if (r->rc != ZOK) {
        done(r->rc == ZNONODE);
        return;
      }
      const std::vector<zk::Contender>& queue = r->queue;
      if (queue.empty()) {
        done(true);
        return;
      }
      std::string holder = absl::StrCat(lock_path, "/", queue.front().name);
      zk_->Submit(Op::Get(holder, [this, key, holder, done](Result g) mutable {
        NodeData d;
        std::optional<int32_t> reap;
        if (g.rc == ZOK && zk::DecodeNodeData(g.value, &d)) {
          absl::MutexLock l(&mu_);
          if (!shutdown_ && scan_ != nullptr) {
            Clock::time_point now = Clock::now();
            Holder& h = Observe(key, holder, g.stat, d, false, now);
            h.scan = scan_->number;
            if (Expired(h, now)) reap = h.version;
          }
        }
        if (reap.has_value()) Reap(key, holder, *reap, 0, nullptr);
        done(g.rc == ZOK || g.rc == ZNONODE);
      }));
    });
  }

  // Forgets holders the finished scan did not see (released or reaped
  // through other replicas), unless touched since the scan began.
  void EndScan() {
    absl::MutexLock l(&mu_);
    if (scan_ == nullptr) return;
    if (scan_->complete) {
      for (auto it = holders_.begin(); it != holders_.end();) {
        Holder& h = it->second;
        if (h.scan != scan_->number && h.touched < scan_->start) {
          if (h.timer != 0 && !shutdown_) timers_->Cancel(h.timer);
          holders_.erase(it++);
        } else {
          ++it;
        }
      }
      for (auto it = floors_.begin(); it != floors_.end();) {
        if (holders_.find(it->first) == holders_.end() &&
            local_waiters_.find(it->first) == local_waiters_.end()) {
          floors_.erase(it++);
        } else {
          ++it;
        }
      }
    }
    scan_.reset();
  }

  struct Orphan {
    std::string parent;  // with prefix: delete the children starting with it
    std::string prefix;
    std::string path;  // or exactly this node
  };

  const ZooKeeperOptions options_;
  const std::shared_ptr<ZooKeeperTestHooks> hooks_;
  const std::string root_;

  mutable absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;  // connected, root checked
  std::string reason_ ABSL_GUARDED_BY(mu_);  // why not ready
  absl::Status root_error_ ABSL_GUARDED_BY(mu_);
  uint64_t root_generation_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_attempt_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Attempt>> attempts_ ABSL_GUARDED_BY(mu_);
  size_t parked_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<LockKey, int> local_waiters_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<LockKey, Holder> holders_ ABSL_GUARDED_BY(mu_);
  // Per lock, the highest sequence this replica has seen holding it: every
  // contender below it is gone for good.
  struct Floor {
    int64_t lock_czxid;
    int32_t seq;
  };
  absl::flat_hash_map<LockKey, Floor> floors_ ABSL_GUARDED_BY(mu_);
  // Contender nodes this replica is deleting (delete sent, reply pending),
  // and the waiters whose predecessor that is, waiting for the reply.
  absl::flat_hash_map<std::string, int> deleting_ ABSL_GUARDED_BY(mu_);
  // Lock nodes with a listing in flight, and the callbacks that wait for the
  // next one (see ListContenders).
  absl::flat_hash_map<std::string, std::vector<ListingCb>> listings_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::vector<std::shared_ptr<Attempt>>> awaiting_delete_
      ABSL_GUARDED_BY(mu_);
  std::vector<Orphan> orphans_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Scan> scan_ ABSL_GUARDED_BY(mu_);
  uint64_t scans_ ABSL_GUARDED_BY(mu_) = 0;

  // Used only with mu_ held and shutdown_ false; reset by Shutdown().
  std::unique_ptr<TimerQueue> timers_;
  const std::shared_ptr<Anchor> anchor_;
  // Last: its callbacks use everything above.
  std::unique_ptr<zk::Client> zk_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> NewZooKeeperBackend(const ZooKeeperOptions& options) {
  if (options.hosts.empty()) {
    return absl::InvalidArgumentError("zookeeper.hosts: must name at least one host:port");
  }
  if (options.root.size() < 2 || options.root[0] != '/' || options.root.back() == '/' ||
      absl::StrContains(options.root, "//")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "zookeeper.root: must be an absolute znode path like /lockd, got \"", options.root, "\""));
  }
  for (absl::string_view part : absl::StrSplit(options.root.substr(1), '/')) {
    if (part == "." || part == ".." || part == "zookeeper") {
      return absl::InvalidArgumentError(
          absl::StrCat("zookeeper.root: \"", options.root, "\" is not a usable znode path"));
    }
  }
  if (options.session_timeout < absl::Milliseconds(100)) {
    return absl::InvalidArgumentError("zookeeper.session_timeout: must be at least 100ms");
  }
  if (options.reap_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("zookeeper.reap_interval: must be positive");
  }
  if (options.max_waiters == 0) return absl::InvalidArgumentError("max_waiters must be positive");
  auto backend = std::make_unique<ZooKeeperBackend>(options);
  if (absl::Status s = backend->Start(); !s.ok()) return s;
  return backend;
}

}  // namespace lockd
