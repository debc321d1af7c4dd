// Builds the backend named by Config::backend from its options.

#ifndef LOCKD_SERVICE_BACKEND_FACTORY_H_
#define LOCKD_SERVICE_BACKEND_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backends/backend.h"
#include "service/config.h"

namespace lockd {

// The backend's options are `config.<backend>` with `config.max_waiters`
// applied and its secret files read (its OptionSet's Resolve()).
// Errors: kInvalidArgument for unusable options (naming the key; a password
// and its password_file both set names both),
// kUnavailable / kUnauthenticated when the backend server cannot be reached
// or refuses the credentials at start. Messages never contain secrets.
absl::StatusOr<std::unique_ptr<Backend>> NewBackendFromConfig(const Config& config);

// What lockd's main() starts: as NewBackendFromConfig, except that a backend
// server that cannot be reached at start (kUnavailable) is no error: then
// returns a DeferredBackend (service/deferred_backend.h) that answers
// kUnavailable and reports NOT_SERVING, and starts the backend every
// `retry_interval` until it starts. Other errors are returned as they are.
absl::StatusOr<std::unique_ptr<Backend>> StartBackendFromConfig(
    const Config& config, absl::Duration retry_interval = absl::Seconds(1));

}  // namespace lockd

#endif  // LOCKD_SERVICE_BACKEND_FACTORY_H_
