#include "service/backend_factory.h"

#include "absl/strings/str_cat.h"
#include "backends/memory/memory_backend.h"

namespace lockd {

absl::StatusOr<std::unique_ptr<Backend>> NewBackendFromConfig(const Config& config) {
  if (config.backend == "memory") {
    MemoryOptions o;
    o.max_waiters = static_cast<size_t>(config.max_waiters);
    return NewMemoryBackend(o);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("backend: \"", config.backend, "\" is not available in this build"));
}

}  // namespace lockd
