#include "tools/lockctl/proto_json.h"

#include "google/protobuf/util/json_util.h"
#include "protos/proto_duration.h"

namespace lockd::lockctl {

std::string ProtoJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  std::string json;
  // Fails only for a message that cannot be represented (an Any of an unknown
  // type, a Duration out of range); lockd's messages have neither.
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) return "{}";
  return json;
}

v1::LockInfo ToProto(const LockInfo& info) {
  v1::LockInfo out;
  out.set_namespace_(info.ns);
  out.set_name(info.name);
  out.set_held(info.held);
  out.set_waiters(info.waiters);
  out.set_backend(info.backend);
  if (!info.held) return out;
  out.set_owner(info.owner);
  out.set_hold_count(info.hold_count);
  out.set_fencing_token(info.fencing_token);
  SetProtoDuration(info.ttl_remaining, out.mutable_ttl_remaining());
  out.set_mode(info.mode == HoldMode::kShared ? v1::LOCK_MODE_SHARED : v1::LOCK_MODE_EXCLUSIVE);
  out.set_limit(info.limit);
  for (const Holder& h : info.holders) {
    v1::Holder* p = out.add_holders();
    p->set_owner(h.owner);
    p->set_mode(h.mode == HoldMode::kShared ? v1::LOCK_MODE_SHARED : v1::LOCK_MODE_EXCLUSIVE);
    p->set_hold_count(h.hold_count);
    p->set_permits(h.permits);
    p->set_fencing_token(h.fencing_token);
    if (h.ttl_remaining > absl::ZeroDuration()) {
      SetProtoDuration(h.ttl_remaining, p->mutable_ttl_remaining());
    }
  }
  return out;
}

v1::AcquireResponse AcquiredResponse(const Lease& lease) {
  v1::AcquireResponse out;
  out.set_acquired(true);
  out.set_owner(lease.owner());
  out.set_fencing_token(lease.fencing_token());
  SetProtoDuration(lease.ttl(), out.mutable_lease_ttl());
  out.set_hold_count(lease.hold_count());
  return out;
}

v1::AcquireResponse NotAcquiredResponse(const LockInfo* current) {
  v1::AcquireResponse out;
  out.set_acquired(false);
  if (current != nullptr) *out.mutable_current() = ToProto(*current);
  return out;
}

v1::ReleaseResponse ToProto(const ReleaseOutcome& outcome) {
  v1::ReleaseResponse out;
  out.set_released(outcome.released);
  out.set_hold_count(outcome.hold_count);
  return out;
}

v1::RenewResponse ToProto(const RenewOutcome& outcome) {
  v1::RenewResponse out;
  SetProtoDuration(outcome.ttl, out.mutable_lease_ttl());
  out.set_fencing_token(outcome.fencing_token);
  return out;
}

v1::ListResponse ToListResponse(const std::vector<LockInfo>& locks) {
  v1::ListResponse out;
  for (const LockInfo& info : locks) *out.add_locks() = ToProto(info);
  return out;
}

v1::ForceReleaseResponse ToProto(const ForceReleaseOutcome& outcome) {
  v1::ForceReleaseResponse out;
  out.set_released(outcome.released);
  *out.mutable_previous() = ToProto(outcome.previous);
  return out;
}

}  // namespace lockd::lockctl
