// The zookeeper backend against a real three-server ZooKeeper ensemble
// started for the run: lockd connects with the connect string of all three
// servers (so its session may live on any of them, and several replicas'
// sessions on different ones). Each isolation value gets its own root znode.

#include <memory>

#include "absl/strings/str_cat.h"
#include "tests/conformance/backend_env.h"
#include "tests/support/zookeeper_server.h"

namespace lockd::testing {
namespace {

class ZooKeeperEnsembleEnv final : public BackendEnv {
 public:
  std::string name() const override { return "zookeeper"; }

  absl::Status SetUp() override {
    absl::StatusOr<std::unique_ptr<ZooKeeperEnsemble>> e = ZooKeeperEnsemble::Start();
    if (!e.ok()) return e.status();
    ensemble_ = *std::move(e);
    return absl::OkStatus();
  }

  void TearDown() override { ensemble_.reset(); }

  std::vector<std::string> Flags(const std::string& isolation) const override {
    return {
        "--backend=zookeeper",
        absl::StrCat("--zookeeper.hosts=", ensemble_ != nullptr ? ensemble_->hosts() : ""),
        absl::StrCat("--zookeeper.root=/conformance/", isolation),
        "--zookeeper.session_timeout=5s",
        "--zookeeper.reap_interval=200ms",
    };
  }

 private:
  std::unique_ptr<ZooKeeperEnsemble> ensemble_;
};

}  // namespace

std::unique_ptr<BackendEnv> MakeBackendEnv() { return std::make_unique<ZooKeeperEnsembleEnv>(); }

}  // namespace lockd::testing
