// The one place where backend statuses become gRPC statuses.

#ifndef LOCKD_SERVICE_STATUS_MAPPING_H_
#define LOCKD_SERVICE_STATUS_MAPPING_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace lockd {

// Same code and message. A status built by one of backends/backend.h's
// error constructors (LockNotHeldError, FencingTokenMismatchError,
// LockKindMismatchError, UpgradeWouldBlockError, PermitsMismatchError)
// additionally carries a serialized google.rpc.Status with
// google.rpc.ErrorInfo{reason, domain: lockd, metadata} as binary error
// details, which gRPC sends in the `grpc-status-details-bin` trailer.
// For statuses about the caller's request (validation, authentication,
// authorization): a kUnauthenticated here means the caller's credentials.
grpc::Status ToGrpcStatus(const absl::Status& status);

// For statuses a Backend returned: as ToGrpcStatus, except that the backend's
// kUnauthenticated (the backend server refused *lockd's* credentials, see
// backends/backend.h) is UNAVAILABLE, because the caller's credentials are
// not at fault and the call had no effect. Its message says that the backend
// refused lockd's credentials, followed by the backend's message (which never
// contains the password).
grpc::Status BackendToGrpcStatus(const absl::Status& status);

}  // namespace lockd

#endif  // LOCKD_SERVICE_STATUS_MAPPING_H_
