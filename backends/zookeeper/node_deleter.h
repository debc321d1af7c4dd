// Deleting nodes this replica no longer wants, and what depends on those
// deletes being in flight.
//
//   - Track(): marks a node as being deleted by this replica until the reply
//     to the operation that deletes it arrives. A waiter whose predecessor
//     watch reports that node deleted can then wait for that reply
//     (AwaitIfDeleting) instead of listing the queue: ZOK means this
//     replica's own release/reap/abandon removed it, not the end of its
//     session.
//   - Delete(): deletes a contender node whatever its version; if the
//     connection drops meanwhile the node is remembered as an orphan and
//     deleted after the reconnect (DeleteOrphans), also across a new
//     session: contender nodes are persistent.
//
// Thread-safe: all state is guarded by mu_; no callback runs with it held.

#ifndef LOCKD_BACKENDS_ZOOKEEPER_NODE_DELETER_H_
#define LOCKD_BACKENDS_ZOOKEEPER_NODE_DELETER_H_

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "backends/zookeeper/zk_transport.h"

namespace lockd::zk {

class NodeDeleter {
 public:
  // `zk` must outlive this object, and every operation it submitted must have
  // answered before it is destroyed (close the transport first).
  explicit NodeDeleter(Transport* zk) : zk_(zk) {}
  NodeDeleter(const NodeDeleter&) = delete;
  NodeDeleter& operator=(const NodeDeleter&) = delete;

  // Returns `op` (a delete of `path`, or a multi that deletes it) wrapped so
  // that `path` counts as being deleted until its reply arrives. The caller
  // submits it.
  Op Track(const std::string& path, Op op);

  // An op deleting the contender node `path` (any version), tracked; an
  // orphan if the reply is a connection loss.
  Op Delete(const std::string& path);

  // If `path` is being deleted by this replica, queues `then` to run with
  // the delete's return code when its reply arrives and returns true.
  // Otherwise returns false and `then` is dropped.
  bool AwaitIfDeleting(const std::string& path, absl::AnyInvocable<void(int rc) &&> then);

  // Remembers a node to delete after the next reconnect: exactly `path`, or
  // (path empty) every child of `parent` whose name starts with `prefix`
  // (a create whose reply never came). Bounded; the excess is logged and
  // left to the lease reapers (zookeeper_backend.h).
  void AddOrphan(const std::string& parent, const std::string& prefix, const std::string& path);

  // Deletes the orphans remembered so far. Called once the session serves.
  void DeleteOrphans();

  // After Stop(), AddOrphan() is a no-op.
  void Stop();

 private:
  struct Orphan {
    std::string parent;  // with prefix: delete the children starting with it
    std::string prefix;
    std::string path;  // or exactly this node
  };

  void Done(const std::string& path, int rc);

  Transport* const zk_;
  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // Nodes being deleted (count of deletes in flight), and who waits for the
  // reply.
  absl::flat_hash_map<std::string, int> deleting_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::vector<absl::AnyInvocable<void(int) &&>>> awaiting_
      ABSL_GUARDED_BY(mu_);
  std::vector<Orphan> orphans_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockd::zk

#endif  // LOCKD_BACKENDS_ZOOKEEPER_NODE_DELETER_H_
