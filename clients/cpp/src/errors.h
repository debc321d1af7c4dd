// Internal: conversions between the wire types and the client's types, and the
// one place where gRPC statuses become absl::Status.

#ifndef LOCKD_CLIENTS_CPP_SRC_ERRORS_H_
#define LOCKD_CLIENTS_CPP_SRC_ERRORS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "grpcpp/support/status.h"
#include "lockd/client.h"
#include "lockd/v1/lock.pb.h"

namespace lockd::client_internal {

// Payload marking a lock-lost status (value: the reason, e.g.
// "LOCK_NOT_HELD", "VALIDITY_EXPIRED", "FENCING_TOKEN_CHANGED").
inline constexpr absl::string_view kLockLostPayload = "type.lockd.dev/lockd.client.LockLost";
// Payload of a not-acquired status: the serialized lockd.v1.LockInfo holder.
inline constexpr absl::string_view kHolderPayload = "type.googleapis.com/lockd.v1.LockInfo";
// Payload of a failed Acquire whose undo was not confirmed: the request_id
// of the attempt that may have left a hold.
inline constexpr absl::string_view kUnconfirmedAcquirePayload =
    "type.lockd.dev/lockd.client.UnconfirmedAcquire";

// Payload of a status that carried a lockd ErrorInfo: its reason
// (ErrorReason), e.g. "LOCK_KIND_MISMATCH".
inline constexpr absl::string_view kErrorReasonPayload = "type.lockd.dev/lockd.client.ErrorReason";

// kFailedPrecondition carrying kLockLostPayload = `reason`.
absl::Status LockLostError(absl::string_view reason, absl::string_view message);

// Translates the result of RPC `op` on lock (ns, name): same canonical code,
// a message naming the operation and the lock, and LOCK_NOT_HELD (the
// google.rpc.ErrorInfo in the status details) as LockLostError. Any other
// lockd ErrorInfo (LOCK_KIND_MISMATCH, UPGRADE_WOULD_BLOCK,
// PERMITS_MISMATCH, ...) becomes kErrorReasonPayload, and the message ends
// with the reason and its metadata: "[LOCK_KIND_MISMATCH kind=semaphore
// limit=4]".
absl::Status FromGrpc(absl::string_view op, absl::string_view ns, absl::string_view name,
                      const grpc::Status& status);
// The same for an operation on `what` (DescribeCall, DescribeLock).
absl::Status FromGrpcOn(absl::string_view op, absl::string_view what, const grpc::Status& status);

HoldMode FromProto(v1::LockMode mode);
v1::LockMode ToProto(HoldMode mode);

// "\"orders/42\" (namespace default)" for messages.
std::string DescribeLock(absl::string_view ns, absl::string_view name);

LockInfo FromProto(const v1::LockInfo& info);

}  // namespace lockd::client_internal

#endif  // LOCKD_CLIENTS_CPP_SRC_ERRORS_H_
