// The redis backend in cluster mode (redis.mode: cluster) against a real
// Redis Cluster of three primaries with a replica each, without persistence,
// started once for the whole suite (tests/support/redis_cluster.h). lockd is
// given every node as a seed. Tests are kept apart by key prefix; their
// locks spread over all three primaries.

#include "absl/strings/str_cat.h"
#include "backends/common/replica_presence.h"
#include "tests/conformance/backend_env.h"
#include "tests/support/redis_cluster.h"

namespace lockd::testing {
namespace {

class RedisClusterEnv final : public BackendEnv {
 public:
  // The backend's name, as LockInfo.backend reports it.
  std::string name() const override { return "redis"; }

  absl::Status SetUp() override {
    absl::StatusOr<std::unique_ptr<RedisCluster>> c = RedisCluster::Start();
    if (!c.ok()) return c.status();
    cluster_ = *std::move(c);
    return absl::OkStatus();
  }

  void TearDown() override { cluster_.reset(); }

  absl::Duration replica_settle() const override {
    return 2 * ReplicaPresence::kPeriod + absl::Milliseconds(50);
  }

  std::vector<std::string> Flags(const std::string& isolation) const override {
    return {"--backend=redis", "--redis.mode=cluster",
            absl::StrCat("--redis.addresses=", cluster_->SeedAddresses()),
            absl::StrCat("--redis.key_prefix=lockd-test:", isolation)};
  }

 private:
  std::unique_ptr<RedisCluster> cluster_;
};

}  // namespace

std::unique_ptr<BackendEnv> MakeBackendEnv() { return std::make_unique<RedisClusterEnv>(); }

}  // namespace lockd::testing
