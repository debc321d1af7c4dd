// AcquireAttempt: watching the predecessor, reentrant acquires, starting
// over, and ending an attempt (answer, abandon, fail).

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "backends/common/errors.h"
#include "backends/common/millis.h"
#include "backends/zookeeper/acquire_attempt.h"
#include "util/log.h"

namespace lockd::zk {

// Watches the predecessor (and reads the holder, if it is another node and
// `read_holder`).
void AcquireAttempt::Watch(const std::string& holder_path, const std::string& pred_path,
                           bool read_holder) {
  Ptr self = shared_from_this();
  uint64_t id;
  std::vector<Op> ops;
  {
    absl::MutexLock l(&mu_);
    id = id_;
    if (!mark_sent_ && !path_.empty()) {
      // Parking: mark the node waiting, so that its grant counts only once
      // confirmed (acquire_attempt.h). Sent before the watch, so its reply
      // is in before anything the watch leads to.
      mark_sent_ = true;
      NodeData nd = InitialData(params_);
      nd.waiting = true;
      ops.push_back(Op::Set(path_, EncodeNodeData(nd), version_, [self, path = path_](Result r) {
        absl::MutexLock l(&self->mu_);
        if (r.rc != ZOK || self->path_ != path) return;
        self->version_ = r.stat.version;
        self->marked_ = true;
      }));
    }
  }
  std::vector<std::string> also;
  {
    absl::MutexLock l(&mu_);
    if (!watched_.is_holder || watched_.name == Basename(pred_path)) also = watched_.also;
  }
  std::string lock_path = deps_->paths->Lock(params_.key);
  for (const std::string& name : also) {
    // A watched holder already gone counts as its deletion.
    std::string path = absl::StrCat(lock_path, "/", name);
    ops.push_back(Op::Get(
        path,
        [self, path](Result r) {
          if (r.rc == ZNONODE) self->OnWatch(ZOO_DELETED_EVENT, path);
        },
        id));
  }
  std::shared_ptr<Result> holder_read;
  if (read_holder && holder_path != pred_path) {
    holder_read = std::make_shared<Result>();
    ops.push_back(Op::Get(holder_path, [self, holder_read](Result r) {
      absl::MutexLock l(&self->mu_);
      *holder_read = std::move(r);
    }));
  }
  ops.push_back(Op::Get(
      pred_path,
      [self, holder_path, holder_read](Result r) {
        self->OnWatchSet(holder_path, std::move(r), holder_read.get());
      },
      id));
  deps_->zk->Submit(std::move(ops));
}

// `holder_read`, if not null, is the holder's data, read just before.
void AcquireAttempt::OnWatchSet(const std::string& holder_path, Result pred, Result* holder_read) {
  if (pred.rc == ZNONODE) {
    Reevaluate();  // the predecessor left before the watch was set
    return;
  }
  if (pred.rc != ZOK) {
    FailWithNode(
        ZkError(absl::StrCat("watching the queue of lock ", LockName(params_.key)), pred.rc));
    return;
  }
  Result holder;
  bool have_holder = false;
  bool was_holder_watch;
  {
    absl::MutexLock l(&mu_);
    was_holder_watch = watched_.is_holder;
    if (watched_.is_holder) {
      holder = pred;
      have_holder = true;
    } else if (holder_read != nullptr && holder_read->rc == ZOK && !holder_read->value.empty()) {
      holder = std::move(*holder_read);
      have_holder = true;
    }
  }
  if (have_holder && CheckHolderWhileWatching(holder_path, holder)) return;
  // A predecessor of this same owner can come to hold the lock without its
  // node changing, and then nothing would wake this attempt, which must be
  // granted at once as a reentrant acquire. Watch the holder instead: when
  // it goes, the queue is read again.
  NodeData pd;
  if (kind_.exclusive_lock() && !was_holder_watch && DecodeNodeData(pred.value, &pd) &&
      pd.owner == params_.owner) {
    {
      absl::MutexLock l(&mu_);
      if (state_ == State::kDone) return;
      watched_.name = std::string(Basename(holder_path));
      watched_.is_holder = true;
      watched_.skips = true;
    }
    Watch(holder_path, holder_path, /*read_holder=*/false);
    return;
  }
  bool stop = false, recheck = false;
  {
    absl::MutexLock l(&mu_);
    if (state_ == State::kDone) return;
    stop = Stopping();
    recheck = state_ == State::kRecheck;
    if (recheck) state_ = State::kRunning;
    if (!stop && !recheck) state_ = State::kWaiting;
  }
  if (stop) {
    Abandon();
  } else if (recheck) {
    Reevaluate();
  }
}

// Records the holder read while setting the watch. If it is this owner's,
// continues as a reentrant acquire and returns true. Reaps a lease that ran
// out.
bool AcquireAttempt::CheckHolderWhileWatching(const std::string& holder_path,
                                              const Result& holder) {
  NodeData d;
  if (!DecodeNodeData(holder.value, &d)) return false;
  bool mine;
  std::optional<int32_t> reap;
  {
    absl::MutexLock l(&mu_);
    if (state_ == State::kDone) return true;
    LeaseTracker::Sighting s =
        deps_->leases->Observe(params_.key, holder_path, holder.stat, d, false);
    // A grant not confirmed yet is no hold to reenter: wait until it is
    // confirmed (a data change) or reaped.
    mine = d.owner == params_.owner && !s.expired && !d.waiting;
    if (!mine && s.expired) reap = s.version;
    if (!mine && !reap.has_value()) deps_->leases->Arm(params_.key, holder_path);
  }
  if (mine) {
    // This owner already holds the lock (acquired through another replica
    // or an earlier call): a reentrant acquire. The watch just set fires
    // later into nothing.
    OnOwnHold(holder_path, holder.stat, d, false);
    return true;
  }
  if (reap.has_value()) deps_->leases->Reap(params_.key, holder_path, *reap, 0, nullptr);
  return false;
}

void AcquireAttempt::OnWatch(int type, absl::string_view path) {
  std::string watched;
  std::optional<AcquireResult> granted;
  bool confirm = false;
  {
    absl::MutexLock l(&mu_);
    // A watch set before the attempt started over with a new node stays
    // registered; its event says nothing about the current predecessor.
    if (Basename(path) != watched_.name && std::find(watched_.also.begin(), watched_.also.end(),
                                                     Basename(path)) == watched_.also.end()) {
      return;
    }
    if (state_ == State::kRunning) {
      state_ = State::kRecheck;
      return;
    }
    if (state_ != State::kWaiting) return;
    state_ = State::kRunning;
    watched = absl::StrCat(deps_->paths->Lock(params_.key), "/", watched_.name);
    // Every node below the predecessor is known to be gone if the
    // predecessor was the lowest, or has been seen holding the lock:
    // sequence numbers are never reused, so nothing can have appeared in
    // between, and this node is now the lowest: no need to list.
    if (kind_.exclusive_lock() && type == ZOO_DELETED_EVENT && !watched_.skips &&
        (watched_.seq == watched_.lowest_seq ||
         deps_->leases->FloorCovers(params_.key, lock_czxid_, watched_.seq))) {
      Ptr self = shared_from_this();
      // This replica deleted it (release, reap, abandon): the reply to that
      // delete, right behind this event, settles it.
      if (deps_->deleter->AwaitIfDeleting(watched,
                                          [self](int rc) { self->OnPredecessorDeleted(rc); })) {
        return;
      }
      if (NeedsConfirmLocked()) {
        confirm = true;
      } else {
        granted = GrantLocked();
      }
    }
  }
  if (confirm) {
    Confirm(0);
    return;
  }
  if (granted.has_value()) {
    Finish(*std::move(granted));
    return;
  }
  // A semaphore waiter's predecessor admitted (its mark cleared) may admit
  // it too: list again. Other kinds only re-set the watch.
  if (type == ZOO_CHANGED_EVENT && Basename(watched) == Basename(path) && !kind_.semaphore()) {
    // The predecessor's data changed (a renewal or reentrant acquire, when
    // it holds the lock): the watch is used up, so set it again. Without a
    // holder read, OnWatchSet() uses the holder's path only when the
    // predecessor is the holder (watched_.is_holder).
    Watch(watched, watched, /*read_holder=*/false);
    return;
  }
  Reevaluate();
}

// The predecessor was deleted by this replica's own request (rc is that
// delete's reply): on ZOK this attempt holds the lock now.
void AcquireAttempt::OnPredecessorDeleted(int rc) {
  std::optional<AcquireResult> granted;
  bool stop, confirm = false;
  {
    absl::MutexLock l(&mu_);
    if (state_ == State::kDone) return;
    stop = Stopping();
    if (!stop && rc == ZOK) {
      if (NeedsConfirmLocked()) {
        confirm = true;
      } else {
        granted = GrantLocked();
      }
    }
  }
  if (confirm) {
    Confirm(0);
  } else if (granted.has_value()) {
    Finish(*std::move(granted));
  } else if (stop) {
    Abandon();
  } else {
    Reevaluate();
  }
}

// Clears the waiting mark of the attempt's node, which is lowest, with the
// marked version: a reaper's versioned delete of the unconfirmed grant and
// this write cannot both succeed.
void AcquireAttempt::Confirm(int tries) {
  std::string path;
  int32_t version;
  bool marked;
  {
    absl::MutexLock l(&mu_);
    if (state_ == State::kDone) return;
    path = path_;
    version = version_;
    marked = marked_;
  }
  if (path.empty()) {
    Restart();
    return;
  }
  if (!marked) {
    // The mark's reply was an error: whether it applied is unknown.
    ConfirmFromRead(tries);
    return;
  }
  NodeData nd = InitialData(params_);
  nd.lease = 1;  // the lease starts now
  Ptr self = shared_from_this();
  deps_->zk->Submit(Op::Set(path, EncodeNodeData(nd), version, [self, nd, tries](Result r) {
    self->OnConfirmed(nd, tries, std::move(r));
  }));
}

void AcquireAttempt::ConfirmFromRead(int tries) {
  std::string path;
  {
    absl::MutexLock l(&mu_);
    path = path_;
  }
  if (path.empty()) {
    Restart();
    return;
  }
  if (tries > kMaxRetries) {
    FailWithNode(absl::UnavailableError(absl::StrCat(
        "gave up granting lock ", LockName(params_.key), " after conflicting changes; retry")));
    return;
  }
  Ptr self = shared_from_this();
  deps_->zk->Submit(Op::Get(path, [self, path, tries](Result r) {
    NodeData d;
    if (r.rc == ZOK && !DecodeNodeData(r.value, &d)) {
      self->FailWithNode(
          absl::InternalError(absl::StrCat("unreadable data in ZooKeeper node ", path)));
      return;
    }
    if (r.rc == ZOK) {
      if (d.waiting) {
        {
          absl::MutexLock l(&self->mu_);
          if (self->path_ != path) return;
          self->version_ = r.stat.version;
          self->marked_ = true;
        }
        self->Confirm(tries + 1);
        return;
      }
      // Not marked (the mark never applied): the node holds as it is.
      self->OnConfirmed(d, tries, std::move(r));
      return;
    }
    self->OnConfirmed(d, tries, std::move(r));
  }));
}

void AcquireAttempt::OnConfirmed(const NodeData& nd, int tries, Result r) {
  if (r.rc == ZOK) {
    std::optional<AcquireResult> granted;
    {
      absl::MutexLock l(&mu_);
      if (state_ == State::kDone) return;
      if (!Stopping()) {
        version_ = r.stat.version;
        granted = GrantLocked(nd, r.stat);
      }
    }
    if (granted.has_value()) {
      Finish(*std::move(granted));
    } else {
      Abandon();  // the call ended meanwhile: give the grant back
    }
    return;
  }
  if (r.rc == ZBADVERSION) {
    ConfirmFromRead(tries + 1);
    return;
  }
  if (r.rc == ZNONODE) {
    // Reaped as an unconfirmed grant (this replica was too slow) or
    // released: queue again.
    LogInfo("zookeeper backend: the unconfirmed grant of lock ", LockName(params_.key),
            " was reaped; queueing again");
    {
      absl::MutexLock l(&mu_);
      path_.clear();
    }
    Restart();
    return;
  }
  FailWithNode(ZkError(absl::StrCat("granting lock ", LockName(params_.key)), r.rc));
}

void AcquireAttempt::Reevaluate() {
  Ptr self = shared_from_this();
  deps_->listing->List(deps_->paths->Lock(params_.key), [self](ListingPtr l) {
    if (l->rc == ZNONODE) {
      self->Evaluate(Listing());
      return;
    }
    if (l->rc != ZOK) {
      self->FailWithNode(ZkError(
          absl::StrCat("listing the contenders of lock ", LockName(self->params_.key)), l->rc));
      return;
    }
    self->Evaluate(*l);
  });
}

void AcquireAttempt::OnOwnHold(const std::string& path, const struct Stat& stat, const NodeData& d,
                               bool from_cache) {
  int32_t seq;
  ContenderKind held;
  ContenderSeq(Basename(path), &seq, &held);
  Reentry rule = ReentryFor(held, kind_);
  if (rule == Reentry::kReenter) {
    Reenter(path, stat, d, 0, from_cache);
    return;
  }
  if (from_cache) {
    Begin();  // only a fresh read may refuse or upgrade
    return;
  }
  switch (rule) {
    case Reentry::kKindMismatch:
      FailWithNode(LockKindMismatchError(params_.key, held.limit));
      return;
    case Reentry::kPermitsMismatch:
      FailWithNode(PermitsMismatchError(params_.key, held.permits, kind_.permits));
      return;
    case Reentry::kUpgrade:
      Upgrade(path, stat, d);
      return;
    case Reentry::kReenter:
      break;
  }
}

// Reads the node `path` of this owner's tag, a holding: if it is this
// owner's live hold, the reentrancy rules apply; otherwise the queue is
// evaluated again without it.
void AcquireAttempt::CheckOwn(const std::string& path) {
  Ptr self = shared_from_this();
  deps_->zk->Submit(Op::Get(path, [self, path](Result r) {
    NodeData d;
    if (r.rc == ZOK && !DecodeNodeData(r.value, &d)) {
      self->FailWithNode(
          absl::InternalError(absl::StrCat("unreadable data in ZooKeeper node ", path)));
      return;
    }
    if (r.rc != ZOK && r.rc != ZNONODE) {
      self->FailWithNode(
          ZkError(absl::StrCat("reading the holders of lock ", LockName(self->params_.key)), r.rc));
      return;
    }
    if (r.rc == ZOK && d.owner == self->params_.owner && !d.waiting) {
      LeaseTracker::Sighting s =
          self->deps_->leases->Observe(self->params_.key, path, r.stat, d, false);
      if (s.expired) {
        self->deps_->leases->Reap(self->params_.key, path, s.version, 0,
                                  [self] { self->Reevaluate(); });
        return;
      }
      self->OnOwnHold(path, r.stat, d, false);
      return;
    }
    {
      absl::MutexLock l(&self->mu_);
      if (self->state_ == State::kDone) return;
      self->own_checked_ = std::string(Basename(path));
    }
    self->Reevaluate();
  }));
}

// The owner's shared node `held_path` (data `d` at `stat`) is the only one
// ahead of the attempt's exclusive node: one multi deletes it and confirms
// the attempt's node with the hold count + 1. The attempt's node, created
// after every earlier grant, is the new, larger token.
void AcquireAttempt::Upgrade(const std::string& held_path, const struct Stat& stat,
                             const NodeData& d) {
  std::string path;
  int32_t version;
  bool alone;
  {
    absl::MutexLock l(&mu_);
    if (state_ == State::kDone) return;
    path = path_;
    version = version_;
    alone = upgrade_alone_;
  }
  if (path.empty() || !alone) {
    FailWithNode(UpgradeWouldBlockError(params_.key));
    return;
  }
  NodeData nd = InitialData(params_);
  nd.holds = d.holds + 1;
  nd.lease = 1;
  if (!params_.request_id.empty()) nd.last_holds = nd.holds;
  std::vector<Op> ops;
  ops.push_back(Op::Delete(held_path, stat.version, nullptr));
  ops.push_back(Op::Set(path, EncodeNodeData(nd), version, nullptr));
  Ptr self = shared_from_this();
  deps_->zk->Submit(Op::Multi(std::move(ops), [self, held_path, nd](Result r) {
    int rc = MultiRc(r);
    if (rc == ZBADVERSION || rc == ZNONODE) {
      self->Reevaluate();  // the shared hold changed meanwhile
      return;
    }
    if (rc != ZOK) {
      self->FailWithNode(ZkError(absl::StrCat("upgrading lock ", LockName(self->params_.key)), rc));
      return;
    }
    self->deps_->leases->Forget(self->params_.key, held_path);
    std::optional<AcquireResult> granted;
    {
      absl::MutexLock l(&self->mu_);
      if (self->state_ == State::kDone) return;
      self->version_ += 1;  // the set above
      granted = self->GrantLocked(nd, StatOf(self->czxid_, self->version_));
    }
    self->Finish(*std::move(granted));
  }));
}

// A reentrant acquire: bumps the hold count and starts a new lease in the
// holder node `path`, whose data was `d` at `stat.version`.
void AcquireAttempt::Reenter(const std::string& path, const struct Stat& stat, const NodeData& d,
                             int tries, bool from_cache) {
  std::vector<Op> ops;
  if (std::optional<Op> del = DeleteOwnOp(); del.has_value()) ops.push_back(*std::move(del));
  if (!params_.request_id.empty() && d.last == NodeData::Last::kAcquire &&
      d.last_id == params_.request_id) {
    if (!ops.empty()) deps_->zk->Submit(std::move(ops));
    AcquireResult r;
    r.acquired = true;
    r.fencing_token = static_cast<uint64_t>(stat.czxid);
    r.hold_count = d.last_holds;
    r.ttl = absl::Milliseconds(d.last_ttl_ms);
    Finish(std::move(r));
    return;
  }
  NodeData nd = d;
  nd.holds = d.holds + 1;
  nd.lease = d.lease + 1;
  nd.ttl_ms = CeilMillis(params_.ttl);
  if (params_.request_id.empty()) {
    nd.last = NodeData::Last::kNone;
    nd.last_id.clear();
  } else {
    nd.last = NodeData::Last::kAcquire;
    nd.last_id = params_.request_id;
    nd.last_holds = nd.holds;
    nd.last_ttl_ms = nd.ttl_ms;
  }
  int64_t czxid = stat.czxid;
  Ptr self = shared_from_this();
  ops.push_back(Op::Set(path, EncodeNodeData(nd), stat.version,
                        [self, path, nd, czxid, tries, from_cache](Result r) {
                          self->OnReentered(path, nd, czxid, tries, from_cache, std::move(r));
                        }));
  deps_->zk->Submit(std::move(ops));
}

void AcquireAttempt::OnReentered(const std::string& path, const NodeData& nd, int64_t czxid,
                                 int tries, bool from_cache, Result r) {
  if (r.rc == ZOK) {
    AcquireResult res;
    res.acquired = true;
    res.fencing_token = static_cast<uint64_t>(czxid);
    res.hold_count = nd.holds;
    res.ttl = params_.ttl;
    res.lease_start = absl::Now();  // the tracker starts the new lease below
    deps_->leases->Observe(params_.key, path, r.stat, nd, /*new_lease=*/true, /*arm=*/true);
    Finish(std::move(res));
    return;
  }
  if (r.rc == ZBADVERSION || r.rc == ZNONODE) {
    if (r.rc == ZNONODE) deps_->leases->Forget(params_.key, path);
    if (from_cache) {
      Begin();  // the cache was stale: take the general path
    } else if (r.rc == ZBADVERSION && tries < kMaxRetries) {
      RereadForReentry(path, tries + 1);
    } else {
      Restart();
    }
    return;
  }
  Finish(ZkError(absl::StrCat("updating the holder of lock ", LockName(params_.key)), r.rc));
}

void AcquireAttempt::RereadForReentry(const std::string& path, int tries) {
  Ptr self = shared_from_this();
  deps_->zk->Submit(Op::Get(path, [self, path, tries](Result r) {
    NodeData d;
    if (r.rc == ZOK && DecodeNodeData(r.value, &d) && d.owner == self->params_.owner &&
        !d.waiting) {
      self->Reenter(path, r.stat, d, tries, false);
      return;
    }
    if (r.rc == ZOK || r.rc == ZNONODE) {
      self->Restart();  // the lock changed hands meanwhile
      return;
    }
    self->Finish(
        ZkError(absl::StrCat("reading the holder of lock ", LockName(self->params_.key)), r.rc));
  }));
}

// Starts over with a new contender node (the old one, if any, is gone or
// being deleted).
void AcquireAttempt::Restart() {
  bool stop;
  {
    absl::MutexLock l(&mu_);
    if (state_ == State::kDone) return;
    if (!Stopping() && params_.wait > absl::ZeroDuration() && Clock::now() >= deadline_) {
      state_ = State::kStopDeadline;
    }
    stop = Stopping();
  }
  if (stop) {
    Abandon();
    return;
  }
  if (!CountRetry()) return;
  uint64_t id;
  {
    absl::MutexLock l(&mu_);
    prefix_ = NewAttemptPrefix(params_.owner, kind_);
    path_.clear();
    mark_sent_ = false;
    marked_ = false;
    if (state_ == State::kRecheck) state_ = State::kRunning;
    id = id_;
  }
  if (id == 0) {
    Begin();
  } else {
    CreateNode();
  }
}

bool AcquireAttempt::CountRetry() {
  {
    absl::MutexLock l(&mu_);
    if (++retries_ <= kMaxRetries) return true;
  }
  FailWithNode(
      absl::UnavailableError(absl::StrCat("gave up acquiring lock ", LockName(params_.key),
                                          " after ", kMaxRetries, " conflicting changes; retry")));
  return false;
}

void AcquireAttempt::Stop(WaiterRegistry::StopReason why) {
  if (why == WaiterRegistry::StopReason::kShutdown) {
    Fail(ShuttingDownError());
    return;
  }
  const bool cancelled = why == WaiterRegistry::StopReason::kCancelled;
  {
    absl::MutexLock l(&mu_);
    if (state_ == State::kDone || Stopping()) return;
    bool waiting = state_ == State::kWaiting;
    state_ = cancelled ? State::kStopCancel : State::kStopDeadline;
    // An operation in flight sees the stop when it completes.
    if (!waiting) return;
  }
  Abandon();
}

// Ends a stopped attempt: deletes its node, then answers kCancelled, or
// (deadline) not acquired with the lock's state read after the delete.
void AcquireAttempt::Abandon() {
  bool cancelled;
  {
    absl::MutexLock l(&mu_);
    if (state_ == State::kDone) return;
    cancelled = state_ == State::kStopCancel;
  }
  Callback<AcquireResult> done = TakeDone();
  if (!done) return;
  std::optional<Op> del = DeleteOwnOp();
  if (del.has_value()) deps_->zk->Submit(*std::move(del));
  if (cancelled) {
    std::move(done)(absl::CancelledError("acquire cancelled"));
    return;
  }
  // Submitted after the delete on the same session, so the state read no
  // longer counts this waiter.
  LockKey key = params_.key;
  LeaseTracker* leases = deps_->leases;
  leases->ReadLock(key, false,
                   [leases, key, done = std::move(done)](absl::StatusOr<LockView> v) mutable {
                     if (!v.ok()) {
                       std::move(done)(v.status());
                       return;
                     }
                     AcquireResult r;
                     r.current = leases->StateOf(key, *v);
                     std::move(done)(std::move(r));
                   });
}

std::optional<Op> AcquireAttempt::DeleteOwnOp() {
  std::string path;
  {
    absl::MutexLock l(&mu_);
    path.swap(path_);
  }
  if (path.empty()) return std::nullopt;
  return deps_->deleter->Delete(path);
}

void AcquireAttempt::FailWithNode(absl::Status status) {
  if (std::optional<Op> del = DeleteOwnOp(); del.has_value()) deps_->zk->Submit(*std::move(del));
  Finish(std::move(status));
}

void AcquireAttempt::Fail(absl::Status status) {
  // Answered first, so that no grant can be answered for the node deleted
  // below.
  Callback<AcquireResult> done = TakeDone();
  if (!done) return;
  std::string path, prefix;
  {
    absl::MutexLock l(&mu_);
    path.swap(path_);
    // A create whose reply has not come: the node may exist.
    if (path.empty() && create_rc_ == ZCONNECTIONLOSS) prefix = prefix_;
  }
  // The node is persistent: delete it now, or (no session) once one serves.
  if (!path.empty()) {
    deps_->zk->Submit(deps_->deleter->Delete(path));
  } else if (!prefix.empty()) {
    deps_->deleter->AddOrphan(deps_->paths->Lock(params_.key), prefix, "");
  }
  std::move(done)(std::move(status));
}

Callback<AcquireResult> AcquireAttempt::TakeDone() {
  Callback<AcquireResult> done;
  uint64_t id;
  {
    absl::MutexLock l(&mu_);
    if (state_ == State::kDone) return nullptr;
    state_ = State::kDone;
    done = std::move(done_);
    done_ = nullptr;
    id = id_;
  }
  if (id != 0) {
    deps_->waiters->Unregister(id, cancel_);
  } else if (cancel_ != nullptr) {
    cancel_->ClearCallback();
  }
  return done;
}

void AcquireAttempt::Finish(absl::StatusOr<AcquireResult> result) {
  Callback<AcquireResult> done = TakeDone();
  if (done) std::move(done)(std::move(result));
}

}  // namespace lockd::zk
