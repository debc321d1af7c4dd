// The ZooKeeper backend's options and their configuration keys (zookeeper.*).

#ifndef LOCKD_BACKENDS_ZOOKEEPER_ZOOKEEPER_OPTIONS_H_
#define LOCKD_BACKENDS_ZOOKEEPER_ZOOKEEPER_OPTIONS_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "backends/common/options.h"
#include "backends/common/shared_options.h"

namespace lockd {

// max_waiters: shared_options.h.
struct ZooKeeperOptions : WaiterLimit {
  // Connect string: "host:port[,host:port...]" (an ensemble).
  std::string hosts = "127.0.0.1:2181";
  // Absolute path of lockd's root znode, created (with its parents) on start.
  // Deployments sharing an ensemble use different roots.
  std::string root = "/lockd";
  // Requested ZooKeeper session timeout (the server clamps it to its
  // [minSessionTimeout, maxSessionTimeout]). Holds do not depend on it: a
  // dead replica's holds end with their leases.
  absl::Duration session_timeout = absl::Seconds(10);
  // "user:password" for ZooKeeper digest authentication, or empty. When set,
  // lockd's nodes get a creator-only ACL. Secret: never logged.
  std::string digest;
  // File whose first line is the digest; read into `digest` by
  // ZooKeeperOptionSet().Resolve() (NewZooKeeperBackend ignores it).
  std::string auth_file;
  // How often every replica scans all locks for leases that ran out.
  absl::Duration reap_interval = absl::Seconds(1);
  // Extra time a replica waits before reaping a lease it did not grant or
  // renew itself and first saw after the fact. Covers the time between a
  // waiter's node becoming lowest and its replica answering the grant.
  absl::Duration observer_grace = absl::Seconds(1);
  // How long NewZooKeeperBackend() waits for the first session before it
  // returns a backend that is still connecting (Health() then reports it).
  absl::Duration connect_wait = absl::Seconds(10);
  // How many locks the periodic reaper reads at once.
  int reap_parallelism = 32;
};

// The keys that configure ZooKeeperOptions, for service/config.cc. Resolve()
// reads zookeeper.auth_file, which must hold user:password.
const OptionSet<ZooKeeperOptions>& ZooKeeperOptionSet();

}  // namespace lockd

#endif  // LOCKD_BACKENDS_ZOOKEEPER_ZOOKEEPER_OPTIONS_H_
