// Builds the backend named by Config::backend from its options.

#ifndef LOCKD_SERVICE_BACKEND_FACTORY_H_
#define LOCKD_SERVICE_BACKEND_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "service/config.h"

namespace lockd {

// Errors: kInvalidArgument for unusable options (naming the key),
// kUnavailable / kUnauthenticated when the backend server cannot be reached
// or refuses the credentials at start. Messages never contain secrets.
absl::StatusOr<std::unique_ptr<Backend>> NewBackendFromConfig(const Config& config);

}  // namespace lockd

#endif  // LOCKD_SERVICE_BACKEND_FACTORY_H_
