#include "backends/zookeeper/node_deleter.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "util/log.h"

namespace lockd::zk {
namespace {

// Orphaned contender nodes remembered for deletion after a reconnect.
constexpr size_t kMaxOrphans = 100000;

}  // namespace

Op NodeDeleter::Track(const std::string& path, Op op) {
  {
    absl::MutexLock l(&mu_);
    ++deleting_[path];
  }
  op.done = [this, path, done = std::move(op.done)](Result r) mutable {
    Done(path, r.rc);
    if (done) std::move(done)(std::move(r));
  };
  return op;
}

Op NodeDeleter::Delete(const std::string& path) {
  return Track(path, Op::Delete(path, -1, [this, path](Result r) {
                 // Nodes are persistent: whatever ended the session, the
                 // node is still there (after Stop(), left to the reaper).
                 if (IsTransient(r.rc)) AddOrphan("", "", path);
               }));
}

bool NodeDeleter::AwaitIfDeleting(const std::string& path,
                                  absl::AnyInvocable<void(int rc) &&> then) {
  absl::MutexLock l(&mu_);
  if (deleting_.find(path) == deleting_.end()) return false;
  awaiting_[path].push_back(std::move(then));
  return true;
}

void NodeDeleter::Done(const std::string& path, int rc) {
  std::vector<absl::AnyInvocable<void(int) &&>> waiting;
  {
    absl::MutexLock l(&mu_);
    auto it = deleting_.find(path);
    if (it != deleting_.end() && --it->second == 0) deleting_.erase(it);
    auto w = awaiting_.find(path);
    if (w != awaiting_.end()) {
      waiting = std::move(w->second);
      awaiting_.erase(w);
    }
  }
  for (auto& then : waiting) std::move(then)(rc);
}

void NodeDeleter::AddOrphan(const std::string& parent, const std::string& prefix,
                            const std::string& path) {
  absl::MutexLock l(&mu_);
  if (stopped_) return;
  if (orphans_.size() >= kMaxOrphans) {
    LogWarning(
        "zookeeper backend: too many contender nodes to delete after reconnect; "
        "the rest are reaped when they reach the head of their queues");
    return;
  }
  orphans_.push_back(Orphan{parent, prefix, path});
}

void NodeDeleter::DeleteOrphans() {
  std::vector<Orphan> orphans;
  {
    absl::MutexLock l(&mu_);
    orphans.swap(orphans_);
  }
  for (const Orphan& o : orphans) {
    if (!o.path.empty()) {
      zk_->Submit(Delete(o.path));
      continue;
    }
    zk_->Submit(Op::Children(o.parent, [this, o](Result r) {
      if (IsTransient(r.rc)) {
        AddOrphan(o.parent, o.prefix, "");
        return;
      }
      for (const std::string& c : r.children) {
        if (absl::StartsWith(c, o.prefix)) zk_->Submit(Delete(absl::StrCat(o.parent, "/", c)));
      }
    }));
  }
}

void NodeDeleter::Stop() {
  absl::MutexLock l(&mu_);
  stopped_ = true;
}

}  // namespace lockd::zk
