// Backend::RenewMany for the ZooKeeper backend: the renewals of holds this
// replica knows (LeaseTracker::Lookup: same owner, lease not ended by the
// monotonic clock) are written as versioned sets in one multi per chunk, one
// round trip instead of one per hold.
//
//   - A multi is all or nothing. When it succeeds, every renewal in it did
//     (each recorded as HolderWrites::Renew records its own). When one of
//     its sets loses a race (ZBADVERSION, ZNONODE: a hold released, reaped,
//     force-released or renewed elsewhere meanwhile), nothing was written
//     and each renewal of that chunk runs again as HolderWrites::Renew,
//     which re-reads what it must and answers exactly. A connection error
//     is each renewal's answer, as Renew would give it.
//   - Holds this replica does not know, holds whose lease has ended, holds
//     known under another token than the renewal's fencing_token (when not
//     0), and a second renewal of the same lock in one call run as Renew
//     directly.
//   - A chunk stays far below ZooKeeper's request limit (jute.maxbuffer,
//     1 MB by default): at most kMaxOpsPerMulti sets and kMaxMultiBytes of
//     paths and data.
// So the results are those of one Renew per element, in request order.
//
// Thread-safe: no state of its own beyond the objects it points to.

#ifndef LOCKD_BACKENDS_ZOOKEEPER_RENEW_BATCH_H_
#define LOCKD_BACKENDS_ZOOKEEPER_RENEW_BATCH_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/common/renew_join.h"
#include "backends/zookeeper/holder_writes.h"
#include "backends/zookeeper/lease_tracker.h"
#include "backends/zookeeper/zk_transport.h"

namespace lockd::zk {

class RenewBatch {
 public:
  // Bounds on one multi. A set costs its path, its data and about 30 bytes
  // of framing; a name of 512 bytes encodes to at most ~1.5 KB of path, so
  // kMaxMultiBytes is reached before 1 MB in any case, and a typical
  // renewal (~200 bytes) fills kMaxOpsPerMulti first.
  static constexpr size_t kMaxOpsPerMulti = 500;
  static constexpr size_t kMaxMultiBytes = 256 * 1024;
  static constexpr size_t kOpOverheadBytes = 32;

  // Every pointer must outlive this object.
  RenewBatch(Transport* zk, LeaseTracker* leases, HolderWrites* writes)
      : zk_(zk), leases_(leases), writes_(writes) {}
  RenewBatch(const RenewBatch&) = delete;
  RenewBatch& operator=(const RenewBatch&) = delete;

  // As Backend::RenewMany. Never blocks; `done` runs exactly once, with one
  // result per element of `params` in the same order, on the client's
  // completion thread (or inline when every renewal failed at once or
  // `params` is empty).
  void RenewMany(std::vector<RenewParams> params, RenewManyCallback done);

 private:
  // One renewal of a known hold: its index in the request and its write.
  struct Entry {
    size_t index = 0;
    RenewParams params;
    std::string path;
    struct Stat stat = {};  // czxid and the data version the set expects
    NodeData written;       // HolderWrites::RenewedData
  };

  // Writes `chunk` as one multi; every entry's result goes to `join`.
  void Submit(std::vector<Entry> chunk, const std::shared_ptr<RenewJoin>& join);
  // The renewal at `index` of the request, as Renew.
  void RenewOne(size_t index, RenewParams params, const std::shared_ptr<RenewJoin>& join);

  Transport* const zk_;
  LeaseTracker* const leases_;
  HolderWrites* const writes_;
};

}  // namespace lockd::zk

#endif  // LOCKD_BACKENDS_ZOOKEEPER_RENEW_BATCH_H_
