// The redis backend against a real redis-server on a free loopback port,
// without persistence, started once for the whole suite. Tests are kept
// apart by key prefix.

#include "absl/strings/str_cat.h"
#include "backends/common/replica_presence.h"
#include "tests/conformance/backend_env.h"
#include "tests/support/redis_server.h"

namespace lockd::testing {
namespace {

class RedisEnv final : public BackendEnv {
 public:
  std::string name() const override { return "redis"; }

  absl::Status SetUp() override {
    absl::StatusOr<std::unique_ptr<RedisServer>> s = RedisServer::Start();
    if (!s.ok()) return s.status();
    server_ = *std::move(s);
    return absl::OkStatus();
  }

  void TearDown() override { server_.reset(); }

  absl::Duration replica_settle() const override {
    return 2 * ReplicaPresence::kPeriod + absl::Milliseconds(50);
  }

  std::vector<std::string> Flags(const std::string& isolation) const override {
    return {"--backend=redis", absl::StrCat("--redis.addresses=", server_->address()),
            absl::StrCat("--redis.key_prefix=lockd-test:", isolation)};
  }

 private:
  std::unique_ptr<RedisServer> server_;
};

}  // namespace

std::unique_ptr<BackendEnv> MakeBackendEnv() { return std::make_unique<RedisEnv>(); }

}  // namespace lockd::testing
