#include "clients/cpp/src/errors.h"

#include <cstdint>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "protos/proto_duration.h"

namespace lockd::client_internal {
namespace {

bool HasLockNotHeldInfo(const grpc::Status& status) {
  if (status.error_details().empty()) return false;
  google::rpc::Status details;
  if (!details.ParseFromString(status.error_details())) return false;
  for (const google::protobuf::Any& any : details.details()) {
    google::rpc::ErrorInfo info;
    if (any.Is<google::rpc::ErrorInfo>() && any.UnpackTo(&info) &&
        info.reason() == "LOCK_NOT_HELD" && info.domain() == "lockd") {
      return true;
    }
  }
  return false;
}

}  // namespace

absl::Status LockLostError(absl::string_view reason, absl::string_view message) {
  absl::Status s(absl::StatusCode::kFailedPrecondition, message);
  s.SetPayload(kLockLostPayload, absl::Cord(reason));
  return s;
}

std::string DescribeLock(absl::string_view ns, absl::string_view name) {
  return absl::StrCat("\"", name, "\" (namespace ", ns.empty() ? "default" : ns, ")");
}

absl::Status FromGrpc(absl::string_view op, absl::string_view ns, absl::string_view name,
                      const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  std::string message =
      absl::StrCat("lockd ", op, " of ", DescribeLock(ns, name), ": ", status.error_message());
  if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION && HasLockNotHeldInfo(status)) {
    return LockLostError("LOCK_NOT_HELD", message);
  }
  // absl and gRPC share the canonical code numbers.
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), message);
}

LockInfo FromProto(const v1::LockInfo& info) {
  LockInfo out;
  out.ns = info.namespace_();
  out.name = info.name();
  out.held = info.held();
  out.owner = info.owner();
  out.hold_count = info.hold_count();
  out.fencing_token = info.fencing_token();
  out.ttl_remaining = FromProtoDuration(info.ttl_remaining());
  out.waiters = info.waiters();
  out.backend = info.backend();
  return out;
}

}  // namespace lockd::client_internal

namespace lockd {

bool IsLockLost(const absl::Status& status) {
  return status.code() == absl::StatusCode::kFailedPrecondition &&
         status.GetPayload(client_internal::kLockLostPayload).has_value();
}

std::optional<LockInfo> CurrentHolder(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kDeadlineExceeded) return std::nullopt;
  absl::optional<absl::Cord> payload = status.GetPayload(client_internal::kHolderPayload);
  if (!payload.has_value()) return std::nullopt;
  v1::LockInfo info;
  if (!info.ParseFromString(std::string(*payload))) return std::nullopt;
  return client_internal::FromProto(info);
}

std::optional<std::string> UnconfirmedAcquireRequestId(const absl::Status& status) {
  absl::optional<absl::Cord> payload =
      status.GetPayload(client_internal::kUnconfirmedAcquirePayload);
  if (!payload.has_value()) return std::nullopt;
  return std::string(*payload);
}

}  // namespace lockd
