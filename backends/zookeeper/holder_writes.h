// Release, Renew and ForceRelease of the ZooKeeper backend: versioned
// writes of a lock's holder nodes (any replica can write any lock). Each
// holder of a shared lock or a semaphore has its own node: Release and
// Renew write the caller's (the holder node whose data names its owner).
//
//   - Release: one hold less (a versioned set), or at zero a versioned
//     delete of the holder node; with a request_id, the delete and a
//     tombstone {owner, request_id} in the lock node's data are one multi,
//     so a retry of the release that freed the lock is recognised.
//   - Renew: a new lease epoch in the holder's data (versioned set), timed
//     from when the write was sent. A lease that has ended by this
//     replica's monotonic clock is lost (LOCK_NOT_HELD "the lease expired",
//     and reaped), whether or not its timer or the reaper has run yet.
//     Several renewals at once: RenewBatch (renew_batch.h), built on the
//     pieces below.
//   - ForceRelease: deletes the holder nodes whatever their version: every
//     one (one multi), or with a fencing_token only the one whose czxid it
//     is (none: FENCING_TOKEN_MISMATCH with the newest holder's token).
// The tombstone is one per lock node: with several holders, a retry of a
// freeing Release answers "released" only until another holder's freeing
// Release with a request_id replaces it (then LOCK_NOT_HELD).
// A Release/Renew with a fencing_token writes only the holder node whose
// czxid is that token; contender node names are unique, so a versioned
// write of that path never reaches a later hold.
// A write that loses a race (ZBADVERSION, ZNONODE) re-reads the lock, at
// most kMaxRetries times. A holder this replica knows (LeaseTracker) is
// written without reading it first; if that sighting was stale the write
// fails its version check and the general path runs.
//
// Codes: as backends/backend.h documents; ZooKeeper errors via ZkError.
// Thread-safe: no state of its own beyond the objects it points to.

#ifndef LOCKD_BACKENDS_ZOOKEEPER_HOLDER_WRITES_H_
#define LOCKD_BACKENDS_ZOOKEEPER_HOLDER_WRITES_H_

#include <memory>
#include <string>

#include "backends/backend.h"
#include "backends/zookeeper/lease_tracker.h"
#include "backends/zookeeper/node_deleter.h"
#include "backends/zookeeper/zk_common.h"
#include "backends/zookeeper/zk_transport.h"

namespace lockd::zk {

class HolderWrites {
 public:
  // Every pointer must outlive this object.
  HolderWrites(const Paths* paths, Transport* zk, LeaseTracker* leases, NodeDeleter* deleter)
      : paths_(paths), zk_(zk), leases_(leases), deleter_(deleter) {}
  HolderWrites(const HolderWrites&) = delete;
  HolderWrites& operator=(const HolderWrites&) = delete;

  // As Backend::Release, Renew, ForceRelease. Never block; `done` runs
  // exactly once on the client's completion thread (or inline on an
  // immediate failure).
  void Release(ReleaseParams params, Callback<ReleaseResult> done);
  void Renew(RenewParams params, Callback<RenewResult> done);
  void ForceRelease(ForceReleaseParams params, Callback<ForceReleaseResult> done);

  // The pieces of a renewal, shared with RenewBatch so that a batched
  // renewal answers exactly as Renew does.
  //
  // The data a renewal of a holder with data `d` writes: the next lease
  // epoch, lasting `ttl`.
  static NodeData RenewedData(const NodeData& d, absl::Duration ttl);
  // Renew's answer to a ZooKeeper error `rc` of its write (other than a lost
  // race, which re-reads).
  static absl::Status RenewError(const LockKey& key, int rc);
  // True if a Release/Renew with `fencing_token` (0: any hold of the owner)
  // is for the holder node at `stat`: the token is the node's czxid.
  static bool OfHold(const struct Stat& stat, uint64_t fencing_token) {
    return fencing_token == 0 || static_cast<uint64_t>(stat.czxid) == fencing_token;
  }
  // Records the successful renewal `p` of the holder node `path` (now at
  // `stat`, with `written` = RenewedData), sent at `sent`, and returns
  // Renew's result: the lease and fencing token, or LOCK_NOT_HELD if the
  // new lease ended before the reply came (it is then reaped).
  absl::StatusOr<RenewResult> Renewed(const RenewParams& p, const std::string& path,
                                      const struct Stat& stat, const NodeData& written,
                                      Clock::time_point sent);

 private:
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
  struct ForceReleaseOp {
    ForceReleaseParams params;
    Callback<ForceReleaseResult> done;
    int tries = 0;
  };

  void ReleaseSlow(const std::shared_ptr<ReleaseOp>& op);
  void ReleaseRead(const std::shared_ptr<ReleaseOp>& op, const LockView& v);
  void ReleaseOn(const std::shared_ptr<ReleaseOp>& op, const std::string& path,
                 const struct Stat& stat, const NodeData& d, bool from_cache);
  void ReleaseOne(const std::shared_ptr<ReleaseOp>& op, const std::string& path,
                  const struct Stat& stat, const NodeData& d, bool from_cache);
  void ReleaseLast(const std::shared_ptr<ReleaseOp>& op, const std::string& path,
                   const struct Stat& stat, bool from_cache);
  void ReleaseRetry(const std::shared_ptr<ReleaseOp>& op, bool from_cache);
  void RenewSlow(const std::shared_ptr<RenewOp>& op);
  void RenewOn(const std::shared_ptr<RenewOp>& op, const std::string& path, const struct Stat& stat,
               const NodeData& d, bool from_cache);
  void ForceReleaseNext(const std::shared_ptr<ForceReleaseOp>& op);

  const Paths* const paths_;
  Transport* const zk_;
  LeaseTracker* const leases_;
  NodeDeleter* const deleter_;
};

}  // namespace lockd::zk

#endif  // LOCKD_BACKENDS_ZOOKEEPER_HOLDER_WRITES_H_
