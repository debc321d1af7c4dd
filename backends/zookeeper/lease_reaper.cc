// The periodic reaper of LeaseTracker: every reap_interval, reads the holder
// of every lock under the root (reap_parallelism at a time), reaps leases
// that ran out and forgets holders no longer there.

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/zookeeper/lease_tracker.h"
#include "backends/zookeeper/queue_rules.h"

namespace lockd::zk {

void LeaseTracker::StartReaper() {
  absl::MutexLock l(&mu_);
  ScheduleReapTick();
}

void LeaseTracker::ScheduleReapTick() {
  if (stopped_) return;
  timers_->Schedule(options_.reap_interval, [this] { StartReapScan(); });
}

void LeaseTracker::StartReapScan() {
  bool serving = serving_();
  bool start = false;
  {
    absl::MutexLock l(&mu_);
    if (stopped_) return;
    if (serving && scan_ == nullptr) {
      scan_ = std::make_unique<Scan>();
      scan_->number = ++scans_;
      scan_->start = Clock::now();
      scan_->listing = 1;
      start = true;
    }
    ScheduleReapTick();
  }
  if (!start) return;
  zk_->Submit(Op::Children(paths_->root(), [this](Result r) {
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
          if (DecodeSegment(c, &ns)) namespaces.push_back(std::move(c));
        }
        scan_->listing += static_cast<int>(namespaces.size());
      }
    }
    for (const std::string& ns_enc : namespaces) ListNamespace(ns_enc);
    PumpScan();
  }));
}

void LeaseTracker::ListNamespace(const std::string& ns_enc) {
  std::string ns_path = absl::StrCat(paths_->root(), "/", ns_enc);
  zk_->Submit(Op::Children(ns_path, [this, ns_enc, ns_path](Result c) {
    {
      absl::MutexLock l(&mu_);
      if (scan_ == nullptr) return;
      --scan_->listing;
      std::string ns;
      DecodeSegment(ns_enc, &ns);
      if (c.rc != ZOK) {
        if (c.rc != ZNONODE) scan_->complete = false;
      } else {
        for (const std::string& n : c.children) {
          std::string name;
          if (!DecodeSegment(n, &name)) continue;
          scan_->locks.emplace_back(LockKey{ns, name}, absl::StrCat(ns_path, "/", n));
        }
      }
    }
    PumpScan();
  }));
}

void LeaseTracker::PumpScan() {
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

void LeaseTracker::ScanLockDone(bool ok) {
  {
    absl::MutexLock l(&mu_);
    if (scan_ == nullptr) return;
    --scan_->reading;
    if (!ok) scan_->complete = false;
  }
  PumpScan();
}

void LeaseTracker::ScanLock(const LockKey& key, const std::string& lock_path) {
  listing_->List(lock_path, [this, key, lock_path](ListingPtr r) {
    if (r->rc != ZOK) {
      ScanLockDone(r->rc == ZNONODE);
      return;
    }
    if (r->queue.empty()) {
      ScanLockDone(true);
      return;
    }
    // Every holder node of the lock (one unless shared or a semaphore).
    const size_t admitted = AdmittedCount(r->queue);
    auto left = std::make_shared<size_t>(admitted);
    auto ok = std::make_shared<bool>(true);
    std::vector<Op> ops;
    for (size_t i = 0; i < admitted; ++i) {
      std::string holder = absl::StrCat(lock_path, "/", r->queue[i].name);
      ops.push_back(Op::Get(holder, [this, key, holder, left, ok](Result g) {
        NodeData d;
        std::optional<int32_t> reap;
        if (g.rc == ZOK && DecodeNodeData(g.value, &d)) {
          absl::MutexLock l(&mu_);
          if (!stopped_ && scan_ != nullptr) {
            Clock::time_point now = Clock::now();
            Holder& h = ObserveLocked(key, holder, g.stat, d, false, now, now);
            h.scan = scan_->number;
            if (Expired(h, now)) reap = h.version;
          }
        }
        if (reap.has_value()) Reap(key, holder, *reap, 0, nullptr);
        *ok = *ok && (g.rc == ZOK || g.rc == ZNONODE);
        if (--*left == 0) ScanLockDone(*ok);
      }));
    }
    zk_->Submit(std::move(ops));
  });
}

// Forgets holders the finished scan did not see (released or reaped
// through other replicas), unless touched since the scan began.
void LeaseTracker::EndScan() {
  absl::MutexLock l(&mu_);
  if (scan_ == nullptr) return;
  if (scan_->complete) {
    for (auto it = holders_.begin(); it != holders_.end();) {
      std::vector<Holder>& hs = it->second;
      for (size_t i = hs.size(); i-- > 0;) {
        Holder& h = hs[i];
        if (h.scan == scan_->number || h.touched >= scan_->start) continue;
        if (h.timer != 0 && !stopped_) timers_->Cancel(h.timer);
        hs.erase(hs.begin() + static_cast<ptrdiff_t>(i));
      }
      if (hs.empty()) {
        holders_.erase(it++);
      } else {
        ++it;
      }
    }
    for (auto it = floors_.begin(); it != floors_.end();) {
      if (holders_.find(it->first) == holders_.end() && !has_local_waiters_(it->first)) {
        floors_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  scan_.reset();
}

}  // namespace lockd::zk
