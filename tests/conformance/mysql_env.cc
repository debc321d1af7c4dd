// The mysql backend against a private MariaDB server started for this
// binary (tests/support/mariadb_server.h). Each isolation value gets its own
// table prefix, so tests never see each other's locks.

#include <memory>

#include "absl/strings/str_cat.h"
#include "backends/common/replica_presence.h"
#include "tests/conformance/backend_env.h"
#include "tests/support/mariadb_server.h"

namespace lockd::testing {
namespace {

class MysqlEnv final : public BackendEnv {
 public:
  std::string name() const override { return "mysql"; }

  absl::Status SetUp() override {
    absl::StatusOr<std::unique_ptr<MariadbServer>> server = MariadbServer::Start();
    if (!server.ok()) return server.status();
    server_ = *std::move(server);
    return absl::OkStatus();
  }

  void TearDown() override { server_.reset(); }

  absl::Duration replica_settle() const override {
    return 2 * ReplicaPresence::kPeriod + absl::Milliseconds(50);
  }

  std::vector<std::string> Flags(const std::string& isolation) const override {
    return server_->LockdFlags(absl::StrCat(isolation, "_"));
  }

 private:
  std::unique_ptr<MariadbServer> server_;
};

}  // namespace

std::unique_ptr<BackendEnv> MakeBackendEnv() { return std::make_unique<MysqlEnv>(); }

}  // namespace lockd::testing
