#include "backends/zookeeper/lease_tracker.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/common/errors.h"
#include "backends/zookeeper/queue_rules.h"
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

LeaseTracker::Known LeaseTracker::KnownLocked(const Holder& h, Clock::time_point now) const {
  Known k{h.path, h.czxid, h.version, h.data, Expired(h, now)};
  int32_t seq;
  ContenderSeq(Basename(h.path), &seq, &k.kind);
  return k;
}

std::optional<LeaseTracker::Known> LeaseTracker::Lookup(const LockKey& key,
                                                        absl::string_view owner) const {
  absl::MutexLock l(&mu_);
  auto it = holders_.find(key);
  if (it == holders_.end()) return std::nullopt;
  for (const Holder& h : it->second) {
    if (h.data.owner == owner) return KnownLocked(h, Clock::now());
  }
  return std::nullopt;
}

std::optional<LeaseTracker::Known> LeaseTracker::LookupPath(const LockKey& key,
                                                            absl::string_view path) const {
  absl::MutexLock l(&mu_);
  auto it = holders_.find(key);
  if (it == holders_.end()) return std::nullopt;
  for (const Holder& h : it->second) {
    if (h.path == path) return KnownLocked(h, Clock::now());
  }
  return std::nullopt;
}

LeaseTracker::Holder* LeaseTracker::FindLocked(const LockKey& key, absl::string_view path) {
  auto it = holders_.find(key);
  if (it == holders_.end()) return nullptr;
  for (Holder& h : it->second) {
    if (h.path == path) return &h;
  }
  return nullptr;
}

void LeaseTracker::EraseLocked(const LockKey& key, absl::string_view path) {
  auto it = holders_.find(key);
  if (it == holders_.end()) return;
  std::vector<Holder>& hs = it->second;
  for (size_t i = 0; i < hs.size(); ++i) {
    if (hs[i].path != path) continue;
    if (hs[i].timer != 0 && !stopped_) timers_->Cancel(hs[i].timer);
    hs.erase(hs.begin() + static_cast<ptrdiff_t>(i));
    break;
  }
  if (hs.empty()) holders_.erase(it);
}

void LeaseTracker::RetainLocked(const LockKey& key, const std::vector<HolderView>& keep) {
  auto it = holders_.find(key);
  if (it == holders_.end()) return;
  std::vector<Holder>& hs = it->second;
  for (size_t i = hs.size(); i-- > 0;) {
    bool kept = false;
    for (const HolderView& v : keep) kept = kept || v.path == hs[i].path;
    if (kept) continue;
    if (hs[i].timer != 0 && !stopped_) timers_->Cancel(hs[i].timer);
    hs.erase(hs.begin() + static_cast<ptrdiff_t>(i));
  }
  if (hs.empty()) holders_.erase(it);
}

LeaseTracker::Holder& LeaseTracker::ObserveLocked(const LockKey& key, const std::string& path,
                                                  const struct Stat& stat, const NodeData& data,
                                                  bool new_lease, Clock::time_point now,
                                                  Clock::time_point start) {
  std::vector<Holder>& hs = holders_[key];
  Holder* found = nullptr;
  for (Holder& h : hs) {
    if (h.path == path) found = &h;
  }
  if (found == nullptr) {
    // An exclusive holder is the only one: any other known is gone.
    int32_t seq;
    ContenderKind kind;
    if (ContenderSeq(Basename(path), &seq, &kind) && kind.exclusive_lock()) {
      for (Holder& o : hs) {
        if (o.timer != 0) timers_->Cancel(o.timer);
      }
      hs.clear();
    }
    hs.emplace_back();
    found = &hs.back();
  }
  Holder& h = *found;
  if (h.path != path) {
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
  std::vector<const Holder*> hs;
  for (const Holder& o : holders_[key]) hs.push_back(&o);
  s.state = StateLocked(key, hs, waiters, now);
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
  if (Holder* h = FindLocked(key, path); h != nullptr) ArmLocked(key, *h);
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
  EraseLocked(key, path);
}

std::optional<int32_t> LeaseTracker::ExpiredVersion(const LockKey& key,
                                                    const std::string& path) const {
  absl::MutexLock l(&mu_);
  auto it = holders_.find(key);
  if (it == holders_.end()) return std::nullopt;
  for (const Holder& h : it->second) {
    if (h.path == path && Expired(h, Clock::now())) return h.version;
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

LockState LeaseTracker::StateLocked(const LockKey& key, const std::vector<const Holder*>& holders,
                                    uint32_t waiters, Clock::time_point now) const {
  LockState s;
  s.key = key;
  s.waiters = waiters;
  for (const Holder* h : holders) {
    if (Expired(*h, now)) continue;
    int32_t seq;
    ContenderKind kind;
    ContenderSeq(Basename(h->path), &seq, &kind);
    HolderState hs;
    hs.owner = h->data.owner;
    hs.mode = kind.mode;
    hs.hold_count = h->data.holds;
    hs.permits = kind.permits;
    hs.fencing_token = static_cast<uint64_t>(h->czxid);
    Clock::time_point end =
        h->since + absl::ToChronoNanoseconds(absl::Milliseconds(h->data.ttl_ms));
    hs.ttl_remaining = std::max(absl::ZeroDuration(), absl::FromChrono(end - now));
    s.mode = kind.mode;
    s.limit = kind.limit;
    s.holders.push_back(std::move(hs));
  }
  std::sort(s.holders.begin(), s.holders.end(), [](const HolderState& a, const HolderState& b) {
    return a.fencing_token < b.fencing_token;
  });
  FillNewestHolder(s);
  if (!s.held) {
    s.mode = LockMode::kExclusive;
    s.limit = 0;
  }
  return s;
}

LockState LeaseTracker::StateOf(const LockKey& key, const LockView& v) {
  uint32_t waiters = static_cast<uint32_t>(v.contenders - std::min(v.contenders, v.holders.size()));
  LockState s;
  std::vector<std::pair<std::string, int32_t>> reap;
  {
    absl::MutexLock l(&mu_);
    Clock::time_point now = Clock::now();
    std::vector<const Holder*> hs;
    for (const HolderView& hv : v.holders) {
      const Holder* h = FindLocked(key, hv.path);
      if (h == nullptr) continue;
      hs.push_back(h);
      if (Expired(*h, now)) reap.emplace_back(h->path, h->version);
    }
    s = StateLocked(key, hs, waiters, now);
  }
  for (auto& [path, version] : reap) Reap(key, path, version, 0, nullptr);
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
  const size_t admitted = AdmittedCount(children.queue);
  if (admitted == 0) {
    {
      absl::MutexLock l(&mu_);
      RetainLocked(key, v.holders);
    }
    std::move(cb)(std::move(v));
    return;
  }
  // Every holder node read in one batch; the last reply settles the view.
  struct Reads {
    LockView view;
    std::vector<Result> results;
    absl::AnyInvocable<void(absl::StatusOr<LockView>) &&> cb;
  };
  auto reads = std::make_shared<Reads>();
  reads->results.resize(admitted);
  reads->cb = std::move(cb);
  std::string lock_path = paths_->Lock(key);
  for (size_t i = 0; i < admitted; ++i) {
    HolderView h;
    h.path = absl::StrCat(lock_path, "/", children.queue[i].name);
    h.kind = children.queue[i].kind;
    v.holders.push_back(std::move(h));
  }
  reads->view = std::move(v);
  std::vector<Op> ops;
  for (size_t i = 0; i < admitted; ++i) {
    ops.push_back(Op::Get(reads->view.holders[i].path,
                          [this, key, with_lock_data, tries, reads, i, admitted](Result r) mutable {
                            reads->results[i] = std::move(r);
                            if (i + 1 < admitted) return;
                            OnHoldersRead(key, with_lock_data, tries, std::move(reads->view),
                                          std::move(reads->results), std::move(reads->cb));
                          }));
  }
  zk_->Submit(std::move(ops));
}

void LeaseTracker::OnHoldersRead(const LockKey& key, bool with_lock_data, int tries, LockView v,
                                 std::vector<Result> results,
                                 absl::AnyInvocable<void(absl::StatusOr<LockView>) &&> cb) {
  for (size_t i = 0; i < results.size(); ++i) {
    Result& r = results[i];
    HolderView& h = v.holders[i];
    if (r.rc == ZNONODE && tries < kMaxRetries) {
      ReadLock(key, with_lock_data, std::move(cb), tries + 1);
      return;
    }
    if (r.rc != ZOK) {
      std::move(cb)(ZkError(absl::StrCat("reading the holders of lock ", LockName(key)), r.rc));
      return;
    }
    if (!DecodeNodeData(r.value, &h.data)) {
      std::move(cb)(absl::InternalError(absl::StrCat("unreadable data in ZooKeeper node ", h.path,
                                                     " (lock ", LockName(key), ")")));
      return;
    }
    h.stat = r.stat;
  }
  for (const HolderView& h : v.holders) {
    Observe(key, h.path, h.stat, h.data, /*new_lease=*/false, /*arm=*/true);
  }
  {
    absl::MutexLock l(&mu_);
    RetainLocked(key, v.holders);
  }
  std::move(cb)(std::move(v));
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
        EraseLocked(key, path);
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
    Holder* found = FindLocked(key, path);
    if (found == nullptr) return;
    Holder& h = *found;
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
