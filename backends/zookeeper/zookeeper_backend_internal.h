// For tests: the ZooKeeper backend over any zk::Transport (an in-memory
// fake), instead of the C client NewZooKeeperBackend() uses.

#ifndef LOCKD_BACKENDS_ZOOKEEPER_ZOOKEEPER_BACKEND_INTERNAL_H_
#define LOCKD_BACKENDS_ZOOKEEPER_ZOOKEEPER_BACKEND_INTERNAL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "backends/zookeeper/zk_transport.h"
#include "backends/zookeeper/zookeeper_backend.h"

namespace lockd {

// As NewZooKeeperBackend(options), with the session made by
// `make_transport` (options.hosts, session_timeout and digest are then the
// transport's business; the other options apply).
absl::StatusOr<std::unique_ptr<Backend>> NewZooKeeperBackendOn(const ZooKeeperOptions& options,
                                                               zk::TransportFactory make_transport);

}  // namespace lockd

#endif  // LOCKD_BACKENDS_ZOOKEEPER_ZOOKEEPER_BACKEND_INTERNAL_H_
