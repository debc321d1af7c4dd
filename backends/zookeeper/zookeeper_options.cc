#include "backends/zookeeper/zookeeper_options.h"

namespace lockd {

const OptionSet<ZooKeeperOptions>& ZooKeeperOptionSet() {
  using O = ZooKeeperOptions;
  static const auto* set = [] {
    auto* s = new OptionSet<O>;
    s->String("zookeeper.hosts", &O::hosts, "ZooKeeper connect string (host:port,host:port,...)");
    s->String("zookeeper.root", &O::root, "root znode of lockd's tree");
    s->DurationAtLeast("zookeeper.session_timeout", &O::session_timeout, absl::Milliseconds(100),
                       "ZooKeeper session timeout");
    s->SecretFile(
        "zookeeper.auth_file", &O::auth_file, &O::digest,
        [](const std::string& digest) { return digest.find(':') != std::string::npos; },
        "user:password", "file holding user:password for digest auth");
    s->PositiveDuration("zookeeper.reap_interval", &O::reap_interval,
                        "how often expired leases are reaped");
    BindSharedOptions(*s, "zookeeper");
    return s;
  }();
  return *set;
}

}  // namespace lockd
