#include "clients/cpp/src/errors.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "protos/proto_duration.h"

namespace lockd::client_internal {
namespace {

// The lockd ErrorInfo in the status details, if any.
std::optional<google::rpc::ErrorInfo> LockdErrorInfo(const grpc::Status& status) {
  if (status.error_details().empty()) return std::nullopt;
  google::rpc::Status details;
  if (!details.ParseFromString(status.error_details())) return std::nullopt;
  for (const google::protobuf::Any& any : details.details()) {
    google::rpc::ErrorInfo info;
    if (any.Is<google::rpc::ErrorInfo>() && any.UnpackTo(&info) && info.domain() == "lockd") {
      return info;
    }
  }
  return std::nullopt;
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
  return FromGrpcOn(op, DescribeLock(ns, name), status);
}

absl::Status FromGrpcOn(absl::string_view op, absl::string_view what, const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  std::string message = absl::StrCat("lockd ", op, " of ", what, ": ", status.error_message());
  std::optional<google::rpc::ErrorInfo> info = LockdErrorInfo(status);
  if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION && info.has_value() &&
      info->reason() == "LOCK_NOT_HELD") {
    return LockLostError("LOCK_NOT_HELD", message);
  }
  if (info.has_value() && !info->reason().empty()) {
    // Metadata in key order, so that the message is stable.
    std::map<std::string, std::string> metadata(info->metadata().begin(), info->metadata().end());
    absl::StrAppend(&message, " [", info->reason());
    for (const auto& [key, value] : metadata) absl::StrAppend(&message, " ", key, "=", value);
    absl::StrAppend(&message, "]");
  }
  // absl and gRPC share the canonical code numbers.
  absl::Status out(static_cast<absl::StatusCode>(status.error_code()), message);
  if (info.has_value() && !info->reason().empty()) {
    out.SetPayload(kErrorReasonPayload, absl::Cord(info->reason()));
  }
  return out;
}

HoldMode FromProto(v1::LockMode mode) {
  return mode == v1::LOCK_MODE_SHARED ? HoldMode::kShared : HoldMode::kExclusive;
}

v1::LockMode ToProto(HoldMode mode) {
  return mode == HoldMode::kShared ? v1::LOCK_MODE_SHARED : v1::LOCK_MODE_EXCLUSIVE;
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
  out.mode = FromProto(info.mode());
  out.limit = info.limit();
  for (const v1::Holder& h : info.holders()) {
    Holder holder;
    holder.owner = h.owner();
    holder.mode = FromProto(h.mode());
    holder.hold_count = h.hold_count();
    holder.permits = h.permits();
    holder.fencing_token = h.fencing_token();
    holder.ttl_remaining = FromProtoDuration(h.ttl_remaining());
    out.holders.push_back(std::move(holder));
  }
  return out;
}

}  // namespace lockd::client_internal

namespace lockd {

const char* HoldModeName(HoldMode mode) {
  return mode == HoldMode::kShared ? "shared" : "exclusive";
}

std::optional<std::string> ErrorReason(const absl::Status& status) {
  absl::optional<absl::Cord> payload =
      IsLockLost(status) ? status.GetPayload(client_internal::kLockLostPayload)
                         : status.GetPayload(client_internal::kErrorReasonPayload);
  if (!payload.has_value()) return std::nullopt;
  return std::string(*payload);
}

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
