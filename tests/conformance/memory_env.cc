// The memory backend needs no server.

#include "tests/conformance/backend_env.h"

namespace lockd::testing {
namespace {

class MemoryEnv final : public BackendEnv {
 public:
  std::string name() const override { return "memory"; }
  absl::Status SetUp() override { return absl::OkStatus(); }
  std::vector<std::string> Flags(const std::string&) const override { return {"--backend=memory"}; }
  bool multi_replica() const override { return false; }
};

}  // namespace

std::unique_ptr<BackendEnv> MakeBackendEnv() { return std::make_unique<MemoryEnv>(); }

}  // namespace lockd::testing
