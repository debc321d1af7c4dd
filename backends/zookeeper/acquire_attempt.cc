// AcquireAttempt: creating the contender node, finding it again after a
// lost reply, and deciding from the queue. Waiting, reentry and the end of
// an attempt are in acquire_attempt_wait.cc.

#include "backends/zookeeper/acquire_attempt.h"

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "backends/common/errors.h"
#include "backends/common/millis.h"
#include "util/log.h"

namespace lockd::zk {

// What an Acquire's contender node is created with (and holds once lowest).
// Derived when needed rather than kept: a parked waiter should cost little.
NodeData AcquireAttempt::InitialData(const AcquireParams& p) {
  NodeData d;
  d.owner = p.owner;
  d.holds = 1;
  d.ttl_ms = CeilMillis(p.ttl);
  d.lease = 0;
  if (!p.request_id.empty()) {
    d.last = NodeData::Last::kAcquire;
    d.last_id = p.request_id;
    d.last_holds = 1;
    d.last_ttl_ms = d.ttl_ms;
  }
  return d;
}

AcquireAttempt::AcquireAttempt(const Deps* deps, AcquireParams params,
                               std::shared_ptr<CancelSignal> cancel, Callback<AcquireResult> done)
    : deps_(deps),
      params_(std::move(params)),
      cancel_(std::move(cancel)),
      owner_tag_(OwnerTag(params_.owner)),
      kind_{params_.limit != 0 ? LockMode::kExclusive : params_.mode, params_.limit,
            params_.limit != 0 ? params_.permits : 0},
      done_(std::move(done)) {}

void AcquireAttempt::Start(const std::optional<LeaseTracker::Known>& known) {
  if (known.has_value()) {
    OnOwnHold(known->path, StatOf(known->czxid, known->version), known->data,
              /*from_cache=*/true);
    return;
  }
  Begin();
}

// Registers the attempt (deadline, cancel hook) and creates its node.
void AcquireAttempt::Begin() {
  std::optional<Clock::time_point> deadline;
  if (params_.wait > absl::ZeroDuration()) deadline = SteadyAfter(params_.wait);
  {
    absl::MutexLock l(&mu_);
    if (deadline.has_value()) deadline_ = *deadline;
  }
  // Without mu_: a cancel that already fired calls Stop() inline.
  uint64_t id = deps_->waiters->Register(shared_from_this(), params_.key, deadline, cancel_);
  if (id == 0) {
    Finish(ShuttingDownError());
    return;
  }
  {
    absl::MutexLock l(&mu_);
    id_ = id;
    prefix_ = NewAttemptPrefix(params_.owner, kind_);
  }
  CreateNode();
}

// Creates the contender node and, behind it, lists the queue.
void AcquireAttempt::CreateNode() {
  std::string prefix;
  {
    absl::MutexLock l(&mu_);
    prefix = prefix_;
    create_rc_ = ZCONNECTIONLOSS;
  }
  // The create's reply precedes the listing's on one session, so
  // OnCreated() finds it recorded.
  std::string lock_path = deps_->paths->Lock(params_.key);
  Ptr self = shared_from_this();
  deps_->zk->Submit(Op::Create(absl::StrCat(lock_path, "/", prefix),
                               EncodeNodeData(InitialData(params_)), ZOO_PERSISTENT_SEQUENTIAL,
                               [self](Result r) {
                                 absl::MutexLock l(&self->mu_);
                                 self->create_rc_ = r.rc;
                                 if (r.rc != ZOK) return;
                                 self->path_ = std::move(r.value);
                                 self->czxid_ = r.stat.czxid;
                                 self->version_ = r.stat.version;
                               }));
  deps_->listing->List(lock_path, [self](ListingPtr l) { self->OnCreated(*l); });
}

void AcquireAttempt::OnCreated(const Listing& children) {
  int created_rc;
  bool stop, done;
  std::string prefix;
  {
    absl::MutexLock l(&mu_);
    created_rc = create_rc_;
    done = state_ == State::kDone;
    stop = Stopping() || done;
    prefix = prefix_;
  }
  if (created_rc == ZOK) {
    if (done) {
      // Answered meanwhile (Fail: the session ended, or shutdown): the node
      // is persistent, so give it back.
      std::optional<Op> del = DeleteOwnOp();
      if (del.has_value()) deps_->zk->Submit(*std::move(del));
      return;
    }
    if (stop) {
      Abandon();
      return;
    }
    if (children.rc != ZOK) {
      FailWithNode(ZkError(absl::StrCat("listing the contenders of lock ", LockName(params_.key)),
                           children.rc));
      return;
    }
    Evaluate(children);
    return;
  }
  if (created_rc == ZNONODE) {
    EnsureParentsThenCreate();
    return;
  }
  absl::Status error = ZkError(
      absl::StrCat("creating a contender node for lock ", LockName(params_.key)), created_rc);
  if (IsTransient(created_rc)) {
    // The node may exist, and outlives the session (it is persistent).
    if (created_rc != ZCLOSING && deps_->zk->connected()) {
      // The reply was lost but the session is back: the node may exist.
      // Find it by its attempt id rather than create a second one.
      Recover();
      return;
    }
    deps_->deleter->AddOrphan(deps_->paths->Lock(params_.key), prefix, "");
  }
  Finish(error);
}

void AcquireAttempt::EnsureParentsThenCreate() {
  if (!CountRetry()) return;
  Ptr self = shared_from_this();
  std::vector<Op> ops;
  ops.push_back(Op::Create(deps_->paths->Ns(params_.key.ns), "", ZOO_CONTAINER, [](Result) {}));
  ops.push_back(Op::Create(deps_->paths->Lock(params_.key), "", ZOO_CONTAINER, [self](Result r) {
    if (r.rc == ZOK || r.rc == ZNODEEXISTS) {
      self->CreateNode();
      return;
    }
    self->Finish(
        ZkError(absl::StrCat("creating the node of lock ", LockName(self->params_.key)), r.rc));
  }));
  deps_->zk->Submit(std::move(ops));
}

// After a create whose reply was lost: looks for the node by attempt id.
void AcquireAttempt::Recover() {
  if (!CountRetry()) return;
  std::string lock_path = deps_->paths->Lock(params_.key);
  Ptr self = shared_from_this();
  deps_->listing->List(lock_path, [self, lock_path](ListingPtr listing) {
    const Listing& r = *listing;
    const LockKey& key = self->params_.key;
    std::string prefix;
    {
      absl::MutexLock l(&self->mu_);
      prefix = self->prefix_;
    }
    if (r.rc == ZNONODE) {
      self->EnsureParentsThenCreate();
      return;
    }
    if (r.rc != ZOK) {
      if (IsTransient(r.rc)) self->deps_->deleter->AddOrphan(lock_path, prefix, "");
      self->Finish(
          ZkError(absl::StrCat("looking for the contender node of lock ", LockName(key)), r.rc));
      return;
    }
    std::string mine;
    for (const Contender& c : r.queue) {
      if (absl::StartsWith(c.name, prefix)) mine = c.name;
    }
    if (mine.empty()) {
      LogInfo("zookeeper backend: a create for lock ", LockName(key),
              " whose reply was lost did not happen; creating again");
      self->CreateNode();
      return;
    }
    LogInfo("zookeeper backend: found contender node ", mine, " whose create reply was lost");
    self->AdoptFound(absl::StrCat(lock_path, "/", mine), std::move(listing));
  });
}

// Reads the node found by Recover() and continues with it as its own.
void AcquireAttempt::AdoptFound(const std::string& path, ListingPtr listing) {
  Ptr self = shared_from_this();
  deps_->zk->Submit(Op::Get(path, [self, path, listing](Result g) {
    if (g.rc == ZNONODE) {
      self->Restart();
      return;
    }
    if (g.rc != ZOK) {
      if (IsTransient(g.rc)) self->deps_->deleter->AddOrphan("", "", path);
      self->Finish(ZkError(
          absl::StrCat("reading the contender node of lock ", LockName(self->params_.key)), g.rc));
      return;
    }
    {
      absl::MutexLock l(&self->mu_);
      self->path_ = path;
      self->czxid_ = g.stat.czxid;
      self->version_ = g.stat.version;
    }
    self->Evaluate(*listing);
  }));
}

// Decides from the contender queue: granted (lowest), try-once refusal, or
// wait behind the predecessor.
void AcquireAttempt::Evaluate(const Listing& listing) {
  Decision d;
  {
    absl::MutexLock l(&mu_);
    if (state_ == State::kDone) return;
    d = DecideLocked(listing);
  }
  switch (d.action) {
    case Decision::kGone:
      // Our node vanished (reaped after a long stall, or deleted by hand).
      Restart();
      return;
    case Decision::kStop:
      Abandon();
      return;
    case Decision::kGranted:
      Finish(std::move(d.granted));
      return;
    case Decision::kConfirm:
      Confirm(0);
      return;
    case Decision::kTryOnce:
      TryOnceRefused(d.holder_path, d.waiters);
      return;
    case Decision::kFull:
      FailWithNode(std::move(d.refused));
      return;
    case Decision::kReenter:
      OnOwnHold(d.known->path, StatOf(d.known->czxid, d.known->version), d.known->data, false);
      return;
    case Decision::kMismatch:
      FailWithNode(LockKindMismatchError(params_.key, d.held_limit));
      return;
    case Decision::kCheckOwn:
      CheckOwn(d.own_path);
      return;
    case Decision::kWait:
      if (d.reap.has_value()) {
        deps_->leases->Reap(params_.key, d.holder_path, *d.reap, 0, nullptr);
      }
      Watch(d.holder_path, d.pred_path, d.read_holder);
      return;
  }
}

AcquireAttempt::Decision AcquireAttempt::DecideLocked(const Listing& listing) {
  const std::vector<Contender>& queue = listing.queue;
  Decision d;
  upgrade_alone_ = false;
  size_t idx = FindContender(queue, Basename(path_));
  if (idx < queue.size()) {
    seq_ = queue[idx].seq;
    lock_czxid_ = listing.stat.czxid;
    deps_->leases->NoteFloor(params_.key, listing.stat.czxid, queue.front().seq);
  }
  if (Stopping()) {
    d.action = Decision::kStop;
    return d;
  }
  if (idx == queue.size()) {
    d.action = Decision::kGone;
    return d;
  }
  std::string lock_path = deps_->paths->Lock(params_.key);
  if (idx != 0 && !kind_.SameKindAs(queue.front().kind)) {
    // The holders decide the name's kind.
    d.action = Decision::kMismatch;
    d.held_limit = queue.front().kind.limit;
    return d;
  }
  const size_t admitted = AdmittedCount(queue);
  auto own = listing.first_of_tag.find(owner_tag_);
  if (own != listing.first_of_tag.end() && own->second < idx && own->second < admitted &&
      queue[own->second].name != own_checked_) {
    // A holding node of (probably: the tag is a hash) this owner: the
    // reentrancy rules apply once its data confirms it.
    upgrade_alone_ = own->second == 0 && idx == 1;
    d.action = Decision::kCheckOwn;
    d.own_path = absl::StrCat(lock_path, "/", queue[own->second].name);
    return d;
  }
  if (idx < admitted) {
    if (NeedsConfirmLocked()) {
      d.action = Decision::kConfirm;
      return d;
    }
    d.action = Decision::kGranted;
    d.granted = GrantLocked();
    return d;
  }
  std::vector<size_t> targets = WatchTargets(queue, idx);
  d.holder_path = absl::StrCat(lock_path, "/", queue.front().name);
  d.pred_path = absl::StrCat(lock_path, "/", queue[targets[0]].name);
  d.waiters = queue.size() - admitted - 1;
  if (params_.wait <= absl::ZeroDuration()) {
    d.action = Decision::kTryOnce;
    return d;
  }
  if (absl::Status admitted = deps_->waiters->Admit(id_); !admitted.ok()) {
    d.action = Decision::kFull;
    d.refused = std::move(admitted);
    return d;
  }
  d.action = Decision::kWait;
  if (kind_.exclusive_lock() && own != listing.first_of_tag.end() && own->second < idx) {
    // A node of this same owner (probably: the tag is a hash) is ahead.
    // When it comes to hold the lock, nothing changes for the predecessor,
    // yet this attempt must be granted at once as a reentrant acquire: watch
    // the holder instead, and look again whenever it goes.
    d.pred_path = d.holder_path;
    watched_ =
        WatchTarget{queue.front().name, {}, true, idx != 1, queue.front().seq, queue.front().seq};
  } else {
    watched_ =
        WatchTarget{queue[targets[0]].name, {}, targets[0] == 0, false, queue[targets[0]].seq,
                    queue.front().seq};
    for (size_t i = 1; i < targets.size(); ++i) watched_.also.push_back(queue[targets[i]].name);
  }
  if (state_ == State::kRecheck) state_ = State::kRunning;
  // A node's owner never changes, and this replica's sighting of its lease
  // is what counts here: a holder it knows needs no read.
  std::optional<LeaseTracker::Known> h = deps_->leases->LookupPath(params_.key, d.holder_path);
  if (idx > 1 && h.has_value()) {
    d.read_holder = false;
    if (h->data.owner == params_.owner && !h->expired && !h->data.waiting) {
      d.action = Decision::kReenter;
      d.known = std::move(h);
    } else if (h->expired) {
      d.reap = h->version;
    } else {
      deps_->leases->Arm(params_.key, d.holder_path);
    }
  }
  return d;
}

// The attempt's node is the lowest: it holds the lock from now, timed by
// this replica (which answers the grant) without a grace.
AcquireResult AcquireAttempt::GrantLocked() {
  return GrantLocked(InitialData(params_), StatOf(czxid_, version_));
}

AcquireResult AcquireAttempt::GrantLocked(const NodeData& data, const struct Stat& stat) {
  // Only an exclusive holder is the lowest node (others may hold below it).
  if (kind_.exclusive_lock()) deps_->leases->NoteFloor(params_.key, lock_czxid_, seq_);
  deps_->waiters->Discharge(id_);
  const absl::Time lease_start = absl::Now();  // the tracker starts the lease below
  LeaseTracker::Sighting s = deps_->leases->Observe(params_.key, path_, stat, data,
                                                    /*new_lease=*/true, /*arm=*/true);
  AcquireResult granted;
  granted.acquired = true;
  granted.fencing_token = static_cast<uint64_t>(czxid_);
  granted.hold_count = s.expired ? 1 : data.holds;
  granted.ttl = params_.ttl;
  granted.lease_start = lease_start;
  return granted;
}

// Not lowest and not allowed to wait: give the node back and describe the
// holder (unless the holder is this very owner: a reentrant acquire).
void AcquireAttempt::TryOnceRefused(const std::string& holder_path, size_t waiters) {
  std::vector<Op> ops;
  if (std::optional<Op> del = DeleteOwnOp(); del.has_value()) ops.push_back(*std::move(del));
  Ptr self = shared_from_this();
  ops.push_back(Op::Get(holder_path, [self, holder_path, waiters](Result r) {
    self->OnHolderRead(holder_path, waiters, std::move(r));
  }));
  deps_->zk->Submit(std::move(ops));
}

void AcquireAttempt::OnHolderRead(const std::string& holder_path, size_t waiters, Result r) {
  if (r.rc == ZNONODE) {
    Restart();  // the holder just left; try again
    return;
  }
  if (r.rc != ZOK) {
    Finish(ZkError(absl::StrCat("reading the holder of lock ", LockName(params_.key)), r.rc));
    return;
  }
  NodeData d;
  if (!DecodeNodeData(r.value, &d)) {
    Finish(absl::InternalError(absl::StrCat("unreadable data in ZooKeeper node ", holder_path)));
    return;
  }
  {
    absl::MutexLock l(&mu_);
    if (state_ == State::kDone) return;
  }
  LeaseTracker::Sighting s = deps_->leases->Observe(params_.key, holder_path, r.stat, d, false,
                                                    false, static_cast<uint32_t>(waiters));
  // A grant not confirmed yet is not a hold to reenter (zk_codec.h).
  bool mine = d.owner == params_.owner && !d.waiting;
  int32_t seq;
  ContenderKind head;
  ContenderSeq(Basename(holder_path), &seq, &head);
  if (mine && !s.expired) {
    OnOwnHold(holder_path, r.stat, d, false);
  } else if (!s.expired && !head.exclusive_lock()) {
    // Several holders: answer them all, read after the own node's delete.
    LockKey key = params_.key;
    LeaseTracker* leases = deps_->leases;
    Ptr self = shared_from_this();
    leases->ReadLock(key, false, [self, leases, key](absl::StatusOr<LockView> v) {
      if (!v.ok()) {
        self->Finish(v.status());
        return;
      }
      AcquireResult refused;
      refused.current = leases->StateOf(key, *v);
      self->Finish(std::move(refused));
    });
  } else if (s.expired) {
    Ptr self = shared_from_this();
    deps_->leases->Reap(params_.key, holder_path, s.version, 0, [self] { self->Restart(); });
  } else {
    AcquireResult refused;
    refused.current = std::move(s.state);
    Finish(std::move(refused));
  }
}

}  // namespace lockd::zk
