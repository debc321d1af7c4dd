// The zookeeper backend against a real ZooKeeper server started for the run.
// Each isolation value gets its own root znode.

#include <memory>

#include "absl/strings/str_cat.h"
#include "tests/conformance/backend_env.h"
#include "tests/support/zookeeper_server.h"

namespace lockd::testing {
namespace {

class ZooKeeperEnv final : public BackendEnv {
 public:
  std::string name() const override { return "zookeeper"; }

  absl::Status SetUp() override {
    absl::StatusOr<std::unique_ptr<ZooKeeperServer>> s = ZooKeeperServer::Start();
    if (!s.ok()) return s.status();
    server_ = *std::move(s);
    return absl::OkStatus();
  }

  void TearDown() override { server_.reset(); }

  std::vector<std::string> Flags(const std::string& isolation) const override {
    return {
        "--backend=zookeeper",
        absl::StrCat("--zookeeper.hosts=", server_ != nullptr ? server_->hosts() : ""),
        absl::StrCat("--zookeeper.root=/conformance/", isolation),
        "--zookeeper.session_timeout=5s",
        "--zookeeper.reap_interval=200ms",
    };
  }

 private:
  std::unique_ptr<ZooKeeperServer> server_;
};

}  // namespace

std::unique_ptr<BackendEnv> MakeBackendEnv() { return std::make_unique<ZooKeeperEnv>(); }

}  // namespace lockd::testing
