// The one place where backend statuses become gRPC statuses.

#ifndef LOCKD_SERVICE_STATUS_MAPPING_H_
#define LOCKD_SERVICE_STATUS_MAPPING_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace lockd {

// Same code and message. A LockNotHeldError (or FencingTokenMismatchError:
// reason FENCING_TOKEN_MISMATCH) additionally carries a
// serialized google.rpc.Status with google.rpc.ErrorInfo{reason:
// LOCK_NOT_HELD, domain: lockd} as binary error details, which gRPC sends in
// the `grpc-status-details-bin` trailer.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace lockd

#endif  // LOCKD_SERVICE_STATUS_MAPPING_H_
