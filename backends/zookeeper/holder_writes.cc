#include "backends/zookeeper/holder_writes.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/common/errors.h"
#include "backends/common/millis.h"

namespace lockd::zk {

// ---- Release

void HolderWrites::Release(ReleaseParams params, Callback<ReleaseResult> done) {
  auto op = std::make_shared<ReleaseOp>();
  op->params = std::move(params);
  op->done = std::move(done);
  const ReleaseParams& p = op->params;
  std::optional<LeaseTracker::Known> known = leases_->Lookup(p.key, p.owner);
  if (known.has_value() && !known->expired &&
      !(known->data.last == NodeData::Last::kRelease && !p.request_id.empty() &&
        known->data.last_id == p.request_id)) {
    ReleaseOn(op, known->path, StatOf(known->czxid, known->version), known->data,
              /*from_cache=*/true);
    return;
  }
  ReleaseSlow(op);
}

void HolderWrites::ReleaseSlow(const std::shared_ptr<ReleaseOp>& op) {
  const ReleaseParams& p = op->params;
  leases_->ReadLock(p.key, !p.request_id.empty(), [this, op](absl::StatusOr<LockView> v) {
    if (!v.ok()) {
      std::move(op->done)(v.status());
      return;
    }
    ReleaseRead(op, *v);
  });
}

void HolderWrites::ReleaseRead(const std::shared_ptr<ReleaseOp>& op, const LockView& v) {
  const ReleaseParams& p = op->params;
  const HolderView* mine = v.Of(p.owner);
  if (mine == nullptr) {
    if (!p.acquire_request_id.empty()) {
      std::move(op->done)(ReleaseResult{false, 0});  // nothing of this owner's to undo
      return;
    }
    Tombstone t;
    // A retry of the Release that freed the lock (the multi that freed it
    // left this tombstone in the lock node), also after the lock went to
    // another owner: the owner does not hold it, so its last request on the
    // lock is still that release.
    if (!p.request_id.empty() && v.lock_exists && DecodeTombstone(v.lock_data, &t) &&
        t.owner == p.owner && t.request_id == p.request_id) {
      std::move(op->done)(ReleaseResult{true, 0});
      return;
    }
    std::move(op->done)(LockNotHeldError(
        p.key, !v.holders.empty() ? "the lock is held by another owner"
                                  : "the lock is free (released or lease expired)"));
    return;
  }
  if (std::optional<int32_t> reap = leases_->ExpiredVersion(p.key, mine->path); reap.has_value()) {
    leases_->Reap(p.key, mine->path, *reap, 0, nullptr);
    if (!p.acquire_request_id.empty()) {
      std::move(op->done)(ReleaseResult{false, 0});
    } else {
      std::move(op->done)(LockNotHeldError(p.key, "the lease expired"));
    }
    return;
  }
  if (!p.request_id.empty() && mine->data.last == NodeData::Last::kRelease &&
      mine->data.last_id == p.request_id) {
    std::move(op->done)(ReleaseResult{false, mine->data.last_holds});
    return;
  }
  ReleaseOn(op, mine->path, mine->stat, mine->data, false);
}

void HolderWrites::ReleaseOn(const std::shared_ptr<ReleaseOp>& op, const std::string& path,
                             const struct Stat& stat, const NodeData& d, bool from_cache) {
  const ReleaseParams& p = op->params;
  // An undo gives back the hold only if that Acquire is the owner's last
  // request; it then proceeds as a release without request id (whose
  // versioned write fails if `d` is stale). Nothing to undo is an answer
  // without a write, so it is only given from fresh data. Likewise for a
  // fencing_token that is not this hold's: the holder node `path` (its name
  // is unique) is the hold whose token is stat.czxid, so the versioned
  // write below can only change that hold.
  const bool other_hold = !OfHold(stat, p.fencing_token);
  if (other_hold || (!p.acquire_request_id.empty() &&
                     !(d.last == NodeData::Last::kAcquire && d.last_id == p.acquire_request_id))) {
    if (from_cache) {
      ReleaseSlow(op);
    } else if (!p.acquire_request_id.empty()) {
      std::move(op->done)(ReleaseResult{false, d.holds});
    } else {
      std::move(op->done)(OtherHoldError(p.key));
    }
    return;
  }
  if (d.holds > 1) {
    ReleaseOne(op, path, stat, d, from_cache);
  } else {
    ReleaseLast(op, path, stat, from_cache);
  }
}

void HolderWrites::ReleaseRetry(const std::shared_ptr<ReleaseOp>& op, bool from_cache) {
  if (from_cache || ++op->tries <= kMaxRetries) {
    ReleaseSlow(op);
  } else {
    std::move(op->done)(absl::UnavailableError(absl::StrCat(
        "gave up releasing lock ", LockName(op->params.key), " after conflicting changes; retry")));
  }
}

// One hold less; the lease keeps running (same lease epoch).
void HolderWrites::ReleaseOne(const std::shared_ptr<ReleaseOp>& op, const std::string& path,
                              const struct Stat& stat, const NodeData& d, bool from_cache) {
  const ReleaseParams& p = op->params;
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
  zk_->Submit(
      Op::Set(path, EncodeNodeData(nd), stat.version, [this, op, path, nd, from_cache](Result r) {
        if (r.rc == ZOK) {
          leases_->Observe(op->params.key, path, r.stat, nd, false);
          std::move(op->done)(ReleaseResult{false, nd.holds});
          return;
        }
        if (r.rc == ZBADVERSION || r.rc == ZNONODE) {
          ReleaseRetry(op, from_cache);
          return;
        }
        std::move(op->done)(
            ZkError(absl::StrCat("releasing lock ", LockName(op->params.key)), r.rc));
      }));
}

// The last hold: deletes the holder node (with a tombstone for retries,
// atomically, when the release has a request id).
void HolderWrites::ReleaseLast(const std::shared_ptr<ReleaseOp>& op, const std::string& path,
                               const struct Stat& stat, bool from_cache) {
  const ReleaseParams& p = op->params;
  auto freed = [this, op, path, from_cache](Result r) mutable {
    r.rc = MultiRc(r);
    if (r.rc == ZOK) {
      leases_->Forget(op->params.key, path);
      std::move(op->done)(ReleaseResult{true, 0});
      return;
    }
    if (r.rc == ZBADVERSION || r.rc == ZNONODE) {
      ReleaseRetry(op, from_cache);
      return;
    }
    std::move(op->done)(ZkError(absl::StrCat("releasing lock ", LockName(op->params.key)), r.rc));
  };
  if (p.request_id.empty()) {
    zk_->Submit(deleter_->Track(path, Op::Delete(path, stat.version, std::move(freed))));
    return;
  }
  std::vector<Op> ops;
  ops.push_back(Op::Delete(path, stat.version, nullptr));
  ops.push_back(
      Op::Set(paths_->Lock(p.key), EncodeTombstone({p.owner, p.request_id}), -1, nullptr));
  zk_->Submit(deleter_->Track(path, Op::Multi(std::move(ops), std::move(freed))));
}

// ---- Renew

void HolderWrites::Renew(RenewParams params, Callback<RenewResult> done) {
  auto op = std::make_shared<RenewOp>();
  op->params = std::move(params);
  op->done = std::move(done);
  std::optional<LeaseTracker::Known> known = leases_->Lookup(op->params.key, op->params.owner);
  if (known.has_value() && !known->expired) {
    RenewOn(op, known->path, StatOf(known->czxid, known->version), known->data,
            /*from_cache=*/true);
    return;
  }
  RenewSlow(op);
}

void HolderWrites::RenewSlow(const std::shared_ptr<RenewOp>& op) {
  leases_->ReadLock(op->params.key, false, [this, op](absl::StatusOr<LockView> v) {
    const RenewParams& p = op->params;
    if (!v.ok()) {
      std::move(op->done)(v.status());
      return;
    }
    if (v->holders.empty()) {
      std::move(op->done)(LockNotHeldError(p.key, "the lock is free (released or lease expired)"));
      return;
    }
    const HolderView* mine = v->Of(p.owner);
    if (mine == nullptr) {
      std::move(op->done)(LockNotHeldError(p.key, "the lock is held by another owner"));
      return;
    }
    if (std::optional<int32_t> reap = leases_->ExpiredVersion(p.key, mine->path);
        reap.has_value()) {
      leases_->Reap(p.key, mine->path, *reap, 0, nullptr);
      std::move(op->done)(LockNotHeldError(p.key, "the lease expired"));
      return;
    }
    RenewOn(op, mine->path, mine->stat, mine->data, false);
  });
}

NodeData HolderWrites::RenewedData(const NodeData& d, absl::Duration ttl) {
  NodeData nd = d;
  nd.lease = d.lease + 1;
  nd.ttl_ms = CeilMillis(ttl);
  return nd;
}

absl::Status HolderWrites::RenewError(const LockKey& key, int rc) {
  return ZkError(absl::StrCat("renewing lock ", LockName(key)), rc);
}

absl::StatusOr<RenewResult> HolderWrites::Renewed(const RenewParams& p, const std::string& path,
                                                  const struct Stat& stat, const NodeData& written,
                                                  Clock::time_point sent) {
  if (leases_->ObserveRenewal(p.key, path, stat, written, sent)) {
    return LockNotHeldError(p.key, "the lease expired");
  }
  return RenewResult{p.ttl, static_cast<uint64_t>(stat.czxid)};
}

void HolderWrites::RenewOn(const std::shared_ptr<RenewOp>& op, const std::string& path,
                           const struct Stat& stat, const NodeData& d, bool from_cache) {
  if (!OfHold(stat, op->params.fencing_token)) {
    if (from_cache) {
      RenewSlow(op);
    } else {
      std::move(op->done)(OtherHoldError(op->params.key));
    }
    return;
  }
  NodeData nd = RenewedData(d, op->params.ttl);
  const Clock::time_point sent = Clock::now();
  zk_->Submit(Op::Set(path, EncodeNodeData(nd), stat.version,
                      [this, op, path, nd, sent, from_cache](Result r) {
                        if (r.rc == ZOK) {
                          std::move(op->done)(Renewed(op->params, path, r.stat, nd, sent));
                          return;
                        }
                        if (r.rc == ZBADVERSION || r.rc == ZNONODE) {
                          if (from_cache || ++op->tries <= kMaxRetries) {
                            RenewSlow(op);
                          } else {
                            std::move(op->done)(absl::UnavailableError(
                                absl::StrCat("gave up renewing lock ", LockName(op->params.key),
                                             " after conflicting changes; retry")));
                          }
                          return;
                        }
                        std::move(op->done)(RenewError(op->params.key, r.rc));
                      }));
}

// ---- ForceRelease

void HolderWrites::ForceRelease(ForceReleaseParams params, Callback<ForceReleaseResult> done) {
  auto op = std::make_shared<ForceReleaseOp>();
  op->params = std::move(params);
  op->done = std::move(done);
  ForceReleaseNext(op);
}

// Reads the lock, then deletes its holder nodes whatever their data version
// (each node, whose czxid is its token, is one holding): every one, or with
// a fencing_token only that one, in one multi. The waiters behind are
// granted as after a freeing release. A holding that vanished meanwhile is
// re-read.
void HolderWrites::ForceReleaseNext(const std::shared_ptr<ForceReleaseOp>& op) {
  leases_->ReadLock(op->params.key, false, [this, op](absl::StatusOr<LockView> v) {
    const ForceReleaseParams& p = op->params;
    if (!v.ok()) {
      std::move(op->done)(v.status());
      return;
    }
    ForceReleaseResult out;
    out.previous = leases_->StateOf(p.key, *v);
    if (!out.previous.held) {
      std::move(op->done)(std::move(out));
      return;
    }
    std::vector<std::string> paths;
    for (const HolderView& h : v->holders) {
      if (HolderWrites::OfHold(h.stat, p.fencing_token)) paths.push_back(h.path);
    }
    if (paths.empty()) {
      std::move(op->done)(
          FencingTokenMismatchError(p.key, p.fencing_token, out.previous.fencing_token));
      return;
    }
    auto freed = [this, op, paths, out = std::move(out)](Result r) mutable {
      r.rc = MultiRc(r);
      if (r.rc == ZOK) {
        for (const std::string& path : paths) leases_->Forget(op->params.key, path);
        out.released = true;
        std::move(op->done)(std::move(out));
      } else if (r.rc == ZNONODE && ++op->tries <= kMaxRetries) {
        ForceReleaseNext(op);  // a holding ended meanwhile
      } else {
        std::move(op->done)(
            ZkError(absl::StrCat("force release of lock ", LockName(op->params.key)), r.rc));
      }
    };
    if (paths.size() == 1) {
      zk_->Submit(deleter_->Track(paths[0], Op::Delete(paths[0], -1, std::move(freed))));
      return;
    }
    std::vector<Op> ops;
    for (const std::string& path : paths) ops.push_back(Op::Delete(path, -1, nullptr));
    zk_->Submit(Op::Multi(std::move(ops), std::move(freed)));
  });
}

}  // namespace lockd::zk
