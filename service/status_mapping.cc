#include "service/status_mapping.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "backends/backend.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace lockd {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbers.
  auto code = static_cast<grpc::StatusCode>(status.code());
  std::string message(status.message());
  const std::string reason = ErrorReasonOf(status);
  if (reason.empty()) return grpc::Status(code, message);

  google::rpc::ErrorInfo info;
  info.set_reason(reason);
  info.set_domain("lockd");
  for (auto& [key, value] : ErrorMetadataOf(status)) (*info.mutable_metadata())[key] = value;
  google::rpc::Status details;
  details.set_code(static_cast<int32_t>(code));
  details.set_message(message);
  details.add_details()->PackFrom(info);
  return grpc::Status(code, message, details.SerializeAsString());
}

grpc::Status BackendToGrpcStatus(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kUnauthenticated) return ToGrpcStatus(status);
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      absl::StrCat("the backend refused lockd's credentials (a lockd "
                                   "configuration problem, not the caller's): ",
                                   status.message()));
}

}  // namespace lockd
