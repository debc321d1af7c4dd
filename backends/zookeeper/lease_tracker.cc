#include "backends/zookeeper/lease_tracker.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/common/errors.h"
#include "util/log.h"

namespace lockd::zk {

LeaseTracker::LeaseTracker(Options options, const Paths* paths, Transport* zk,
                           ContenderListing* listing, NodeDeleter* deleter, TimerQueue* timers,
                           absl::AnyInvocable<bool(const LockKey&) const> has_local_waiters,
                           absl::AnyInvocable<bool() const> serving)
    : options_(options),
      paths_(paths),
      zk_(zk),
      listing_(listing),
      deleter_(deleter),
      timers_(timers),
      has_local_waiters_(std::move(has_local_waiters)),
      serving_(std::move(serving)) {}

Clock::time_point LeaseTracker::LeaseEnd(const Holder& h) const {
  // A grant its replica has not confirmed yet: it has observer_grace to do
  // so, however long the lease it asked for.
  if (h.data.waiting) return h.since + absl::ToChronoNanoseconds(options_.observer_grace);
  absl::Duration d = absl::Milliseconds(h.data.ttl_ms);
  if (!h.precise) d += options_.observer_grace;
  return h.since + absl::ToChronoNanoseconds(d);
}

std::optional<LeaseTracker::Known> LeaseTracker::Lookup(const LockKey& key) const {
  absl::MutexLock l(&mu_);
  auto it = holders_.find(key);
  if (it == holders_.end()) return std::nullopt;
  const Holder& h = it->second;
  return Known{h.path, h.czxid, h.version, h.data, Expired(h, Clock::now())};
}

LeaseTracker::Holder& LeaseTracker::ObserveLocked(const LockKey& key, const std::string& path,
                                                  const struct Stat& stat, const NodeData& data,
                                                  bool new_lease, Clock::time_point now,
                                                  Clock::time_point start) {
  Holder& h = holders_[key];
  if (h.path != path) {
    if (h.timer != 0) timers_->Cancel(h.timer);
    h = Holder();
    h.path = path;
    h.lease = data.lease;
    h.since = new_lease ? start : now;
    h.precise = new_lease;
    h.version = stat.version;
    h.data = data;
  } else if (stat.version < h.version) {
    h.touched = now;
    return h;
  } else if (new_lease) {
    h.lease = data.lease;
    h.since = start;
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

LeaseTracker::Sighting LeaseTracker::Observe(const LockKey& key, const std::string& path,
                                             const struct Stat& stat, const NodeData& data,
                                             bool new_lease, bool arm, uint32_t waiters) {
  Sighting s;
  absl::MutexLock l(&mu_);
  if (stopped_) {
    s.version = stat.version;
    s.expired = true;
    s.state.key = key;
    return s;
  }
  Clock::time_point now = Clock::now();
  Holder& h = ObserveLocked(key, path, stat, data, new_lease, now, now);
  if (arm) ArmLocked(key, h);
  s.version = h.version;
  s.expired = Expired(h, now);
  s.state = StateLocked(key, &h, waiters, now);
  return s;
}

bool LeaseTracker::ObserveRenewal(const LockKey& key, const std::string& path,
                                  const struct Stat& stat, const NodeData& data,
                                  Clock::time_point sent) {
  absl::MutexLock l(&mu_);
  if (stopped_) return true;
  Clock::time_point now = Clock::now();
  Holder& h = ObserveLocked(key, path, stat, data, /*new_lease=*/true, now, std::min(sent, now));
  ArmLocked(key, h);
  return Expired(h, now);
}

void LeaseTracker::Arm(const LockKey& key, const std::string& path) {
  absl::MutexLock l(&mu_);
  auto it = holders_.find(key);
  if (it != holders_.end() && it->second.path == path) ArmLocked(key, it->second);
}

void LeaseTracker::ArmLocked(const LockKey& key, Holder& h) {
  if (stopped_) return;
  if (!h.precise && !has_local_waiters_(key)) return;
  Clock::time_point end = LeaseEnd(h);
  if (h.timer != 0) {
    if (h.timer_at == end) return;
    timers_->Cancel(h.timer);
  }
  h.timer_at = end;
  h.timer = timers_->ScheduleAt(end, [this, key, path = h.path] { CheckLease(key, path); });
}

void LeaseTracker::Forget(const LockKey& key, const std::string& path) {
  absl::MutexLock l(&mu_);
  auto it = holders_.find(key);
  if (it == holders_.end() || it->second.path != path) return;
  if (it->second.timer != 0 && !stopped_) timers_->Cancel(it->second.timer);
  holders_.erase(it);
}

std::optional<int32_t> LeaseTracker::ExpiredVersion(const LockKey& key,
                                                    const std::string& path) const {
  absl::MutexLock l(&mu_);
  auto it = holders_.find(key);
  if (it != holders_.end() && it->second.path == path && Expired(it->second, Clock::now())) {
    return it->second.version;
  }
  return std::nullopt;
}

void LeaseTracker::NoteFloor(const LockKey& key, int64_t lock_czxid, int32_t seq) {
  absl::MutexLock l(&mu_);
  auto [f, inserted] = floors_.try_emplace(key, Floor{lock_czxid, seq});
  if (inserted) return;
  if (f->second.lock_czxid < lock_czxid) {
    f->second = Floor{lock_czxid, seq};
  } else if (f->second.lock_czxid == lock_czxid && SeqBefore(f->second.seq, seq)) {
    f->second.seq = seq;
  }
}

bool LeaseTracker::FloorCovers(const LockKey& key, int64_t lock_czxid, int32_t seq) const {
  absl::MutexLock l(&mu_);
  auto f = floors_.find(key);
  return f != floors_.end() && f->second.lock_czxid == lock_czxid && !SeqBefore(f->second.seq, seq);
}

LockState LeaseTracker::StateLocked(const LockKey& key, const Holder* h, uint32_t waiters,
                                    Clock::time_point now) const {
  LockState s;
  s.key = key;
  s.waiters = waiters;
  if (h == nullptr || Expired(*h, now)) return s;
  s.held = true;
  s.owner = h->data.owner;
  s.hold_count = h->data.holds;
  s.fencing_token = static_cast<uint64_t>(h->czxid);
  Clock::time_point end = h->since + absl::ToChronoNanoseconds(absl::Milliseconds(h->data.ttl_ms));
  s.ttl_remaining = std::max(absl::ZeroDuration(), absl::FromChrono(end - now));
  return s;
}

LockState LeaseTracker::StateOf(const LockKey& key, const LockView& v) {
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
    s = StateLocked(key, h, waiters, now);
    if (h != nullptr && !s.held) reap.emplace(h->path, h->version);
  }
  if (reap.has_value()) Reap(key, reap->first, reap->second, 0, nullptr);
  return s;
}

void LeaseTracker::ReadLock(const LockKey& key, bool with_lock_data,
                            absl::AnyInvocable<void(absl::StatusOr<LockView>) &&> cb, int tries) {
  std::string path = paths_->Lock(key);
  if (!with_lock_data) {
    listing_->List(
        path,
        [this, key, tries, cb = std::move(cb)](ListingPtr l) mutable {
          OnLockRead(key, false, *l, Result(), std::move(cb), tries);
        },
        Freshness::kLatest);
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
  ops.push_back(Op::Sync(path, [](Result) {}));  // as Freshness::kLatest
  ops.push_back(Op::Children(path, [reads](Result r) { reads->children = std::move(r); }));
  ops.push_back(Op::Get(path, [this, key, reads, tries, cb = std::move(cb)](Result r) mutable {
    Listing listing;
    listing.rc = reads->children.rc;
    if (listing.rc == ZOK) {
      listing.stat = reads->children.stat;
      listing.queue = QueueOrder(std::move(reads->children.children));
    }
    OnLockRead(key, true, listing, std::move(r), std::move(cb), tries);
  }));
  zk_->Submit(std::move(ops));
}

void LeaseTracker::OnLockRead(const LockKey& key, bool with_lock_data, const Listing& children,
                              Result data, absl::AnyInvocable<void(absl::StatusOr<LockView>) &&> cb,
                              int tries) {
  LockView v;
  if (children.rc == ZNONODE) {
    std::move(cb)(std::move(v));
    return;
  }
  if (children.rc != ZOK) {
    std::move(cb)(ZkError(absl::StrCat("reading lock ", LockName(key)), children.rc));
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
  v.holder_path = absl::StrCat(paths_->Lock(key), "/", children.queue.front().name);
  std::string holder_path = v.holder_path;
  zk_->Submit(Op::Get(holder_path, [this, key, with_lock_data, tries, v = std::move(v),
                                    cb = std::move(cb)](Result r) mutable {
    if (r.rc == ZNONODE && tries < kMaxRetries) {
      ReadLock(key, with_lock_data, std::move(cb), tries + 1);
      return;
    }
    if (r.rc != ZOK) {
      std::move(cb)(ZkError(absl::StrCat("reading the holder of lock ", LockName(key)), r.rc));
      return;
    }
    if (!DecodeNodeData(r.value, &v.holder)) {
      std::move(cb)(absl::InternalError(absl::StrCat(
          "unreadable data in ZooKeeper node ", v.holder_path, " (lock ", LockName(key), ")")));
      return;
    }
    v.has_holder = true;
    v.holder_stat = r.stat;
    Observe(key, v.holder_path, r.stat, v.holder, /*new_lease=*/false, /*arm=*/true);
    std::move(cb)(std::move(v));
  }));
}

void LeaseTracker::Reap(const LockKey& key, const std::string& path, int32_t version, int tries,
                        absl::AnyInvocable<void() &&> then) {
  zk_->Submit(deleter_->Track(
      path,
      Op::Delete(path, version, [this, key, path, tries, then = std::move(then)](Result r) mutable {
        if (r.rc == ZOK || r.rc == ZNONODE) {
          if (r.rc == ZOK)
            LogDebug("zookeeper backend: lease of lock ", LockName(key), " ran out; reaped");
          Forget(key, path);
        } else if (r.rc == ZBADVERSION && tries < kMaxRetries) {
          Refresh(key, path, tries + 1, std::move(then));
          return;
        }
        if (then) std::move(then)();
      })));
}

// Re-reads a holder whose data changed, and reaps it if its lease (as this
// replica now sees it) has run out; otherwise re-arms its timer.
void LeaseTracker::Refresh(const LockKey& key, const std::string& path, int tries,
                           absl::AnyInvocable<void() &&> then) {
  zk_->Submit(Op::Get(path, [this, key, path, tries, then = std::move(then)](Result r) mutable {
    std::optional<int32_t> reap;
    {
      absl::MutexLock l(&mu_);
      NodeData d;
      if (r.rc == ZNONODE) {
        auto it = holders_.find(key);
        if (it != holders_.end() && it->second.path == path) {
          if (it->second.timer != 0 && !stopped_) timers_->Cancel(it->second.timer);
          holders_.erase(it);
        }
      } else if (r.rc == ZOK && !stopped_ && DecodeNodeData(r.value, &d)) {
        Clock::time_point now = Clock::now();
        Holder& h = ObserveLocked(key, path, r.stat, d, false, now, now);
        if (Expired(h, now)) {
          reap = h.version;
        } else {
          ArmLocked(key, h);
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

void LeaseTracker::CheckLease(const LockKey& key, const std::string& path) {
  int32_t version;
  {
    absl::MutexLock l(&mu_);
    if (stopped_) return;
    auto it = holders_.find(key);
    if (it == holders_.end() || it->second.path != path) return;
    Holder& h = it->second;
    h.timer = 0;
    if (!Expired(h, Clock::now())) {
      ArmLocked(key, h);
      return;
    }
    version = h.version;
  }
  Reap(key, path, version, 0, nullptr);
}

void LeaseTracker::Stop() {
  absl::MutexLock l(&mu_);
  stopped_ = true;
}

}  // namespace lockd::zk
