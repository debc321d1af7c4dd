// Reading the contender queue of a lock node, shared between requests.
//
// One getChildren of a lock node is parsed once into a Listing (queue order)
// and handed to every request that waited for it. At most one listing per
// lock node is in flight: calls that arrive meanwhile share the next one,
// sent when it returns. Without that, W waiters queueing on one lock read W
// lists of up to W names: O(W^2) bytes, with thousands of those replies
// alive at once in the C client's completion queue.
//
// Ordering: ZooKeeper answers one session's requests in order, so a listing
// reflects every operation the calling thread submitted before List() (an
// attempt sees its own node and not one it deleted). A shared listing sent
// later still does. In an ensemble, the server a session talks to may lag
// behind the leader, so a plain listing can miss writes other sessions (other
// lockd replicas) have already seen acknowledged; a Freshness::kLatest
// listing is preceded by a sync and reflects every write acknowledged to
// anyone before List() was called.
//
// Thread-safe: the table of listings in flight is guarded by mu_; callbacks
// run on the client's completion thread (or inline when the client fails
// the read at once) with no lock held.

#ifndef LOCKD_BACKENDS_ZOOKEEPER_CONTENDER_LISTING_H_
#define LOCKD_BACKENDS_ZOOKEEPER_CONTENDER_LISTING_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "backends/zookeeper/zk_codec.h"
#include "backends/zookeeper/zk_transport.h"

namespace lockd::zk {

// One getChildren of a lock node.
struct Listing {
  int rc = ZOK;                  // ZNONODE: the lock node does not exist
  struct Stat stat = {};         // the lock node's, when rc == ZOK
  std::vector<Contender> queue;  // in queue order (lowest sequence first)
  // The index in `queue` of the first contender of each owner tag
  // (ContenderOwnerTag): who else of an owner is ahead, without reading
  // every node. Filled by ContenderListing only.
  absl::flat_hash_map<uint64_t, size_t> first_of_tag;
};
using ListingPtr = std::shared_ptr<const Listing>;
using ListingCb = absl::AnyInvocable<void(ListingPtr) &&>;

// The index of the contender node `name` in `queue`, or queue.size() if it
// is not there. A binary search on its sequence: one listing is shared by
// thousands of waiters.
size_t FindContender(const std::vector<Contender>& queue, absl::string_view name);

// kSession: reflects this session's own operations (enough after a write of
// this session, such as an attempt's create). kLatest: also every write
// acknowledged to any session before the call (a sync first; one more
// request, sent in the same batch).
enum class Freshness { kSession, kLatest };

class ContenderListing {
 public:
  // `zk` must outlive this object.
  explicit ContenderListing(Transport* zk) : zk_(zk) {}
  ContenderListing(const ContenderListing&) = delete;
  ContenderListing& operator=(const ContenderListing&) = delete;

  // Lists the contenders of the lock node `lock_path` and runs `cb` exactly
  // once with the result (rc carries any ZooKeeper error). Never blocks.
  void List(const std::string& lock_path, ListingCb cb, Freshness f = Freshness::kSession);

 private:
  // The callbacks waiting for a lock node's next listing, and whether any of
  // them needs it kLatest.
  struct Waiting {
    std::vector<ListingCb> cbs;
    bool latest = false;
  };

  void Send(const std::string& lock_path, std::vector<ListingCb> batch, bool latest);

  Transport* const zk_;
  absl::Mutex mu_;
  // Lock nodes with a listing in flight, and the callbacks that wait for the
  // next one.
  absl::flat_hash_map<std::string, Waiting> waiting_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockd::zk

#endif  // LOCKD_BACKENDS_ZOOKEEPER_CONTENDER_LISTING_H_
