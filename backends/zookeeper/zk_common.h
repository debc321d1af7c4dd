// Small pieces shared by the parts of the ZooKeeper backend: the clock they
// time leases with, the bound on retries when a lock changes under a
// request, a znode path's last segment, the Stat a version check compares,
// and where each lock lives in the tree (Paths). Not a public interface.

#ifndef LOCKD_BACKENDS_ZOOKEEPER_ZK_COMMON_H_
#define LOCKD_BACKENDS_ZOOKEEPER_ZK_COMMON_H_

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "backends/backend.h"
#include "backends/common/timer_queue.h"
#include "backends/zookeeper/zk_codec.h"

namespace lockd::zk {

using Clock = SteadyClock;

// Bound on re-reads and re-creates when the lock changes under a request
// (version conflicts, a holder vanishing between two reads, ...).
inline constexpr int kMaxRetries = 8;

// The last segment of a znode path.
inline absl::string_view Basename(absl::string_view path) {
  size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

inline struct Stat StatOf(int64_t czxid, int32_t version) {
  struct Stat s = {};
  s.czxid = czxid;
  s.version = version;
  return s;
}

// Where locks live: <root>/<ns>/<name>, segments encoded by EncodeSegment.
// Immutable, so thread-safe.
class Paths {
 public:
  explicit Paths(std::string root) : root_(std::move(root)) {}
  const std::string& root() const { return root_; }
  std::string Ns(absl::string_view ns) const { return absl::StrCat(root_, "/", EncodeSegment(ns)); }
  std::string Lock(const LockKey& key) const {
    return absl::StrCat(root_, "/", EncodeSegment(key.ns), "/", EncodeSegment(key.name));
  }

 private:
  const std::string root_;
};

}  // namespace lockd::zk

#endif  // LOCKD_BACKENDS_ZOOKEEPER_ZK_COMMON_H_
