#include "service/acquire_call.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "protos/proto_duration.h"
#include "service/status_mapping.h"
#include "util/log.h"

namespace lockd {

std::string DefaultOwner(const Authorizer* authz, const std::string& identity) {
  return authz != nullptr ? authz->NewOwnerFor(identity) : NewOwnerId();
}

std::string NewRequestId() { return absl::StrCat("\x01", NewOwnerId()); }

void ToLockInfo(const LockState& s, absl::string_view backend, v1::LockInfo* out) {
  out->set_namespace_(s.key.ns);
  out->set_name(s.key.name);
  out->set_held(s.held);
  out->set_waiters(s.waiters);
  out->set_backend(std::string(backend));
  if (!s.held) return;
  out->set_owner(s.owner);
  out->set_hold_count(s.hold_count);
  out->set_fencing_token(s.fencing_token);
  SetProtoDuration(s.ttl_remaining, out->mutable_ttl_remaining());
  out->set_mode(s.mode == LockMode::kShared ? v1::LOCK_MODE_SHARED : v1::LOCK_MODE_EXCLUSIVE);
  out->set_limit(s.limit);
  for (const HolderState& h : s.holders) {
    v1::Holder* ph = out->add_holders();
    ph->set_owner(h.owner);
    ph->set_mode(h.mode == LockMode::kShared ? v1::LOCK_MODE_SHARED : v1::LOCK_MODE_EXCLUSIVE);
    ph->set_hold_count(h.hold_count);
    ph->set_permits(h.permits);
    ph->set_fencing_token(h.fencing_token);
    SetProtoDuration(h.ttl_remaining, ph->mutable_ttl_remaining());
  }
  if (s.holders.empty()) {  // a backend that reports an exclusive holder only
    v1::Holder* ph = out->add_holders();
    ph->set_owner(s.owner);
    ph->set_hold_count(s.hold_count);
    ph->set_fencing_token(s.fencing_token);
    SetProtoDuration(s.ttl_remaining, ph->mutable_ttl_remaining());
  }
}

bool TooLateToDeliver(absl::Time started, absl::Time deadline, absl::Time now) {
  const absl::Duration margin = std::min(kGrantDeliveryMargin, (deadline - started) / 4);
  return deadline - now < margin;
}

void AcquireCall::Start(Backend* backend, AcquireParams params,
                        std::shared_ptr<CancelSignal> cancel, Done done) {
  if (params.request_id.empty()) params.request_id = NewRequestId();
  AcquireCall call(backend, params);
  backend->Acquire(
      std::move(params), std::move(cancel),
      [call = std::move(call), done = std::move(done)](absl::StatusOr<AcquireResult> r) mutable {
        std::move(done)(call, std::move(r));
      });
}

grpc::Status AcquireCall::Answer(const absl::StatusOr<AcquireResult>& r, Delivery delivery,
                                 v1::AcquireResponse* resp) const {
  if (!r.ok()) return BackendToGrpcStatus(r.status());
  if (r->acquired && delivery != Delivery::kDeliver) {
    GiveBack(r->fencing_token);
    if (delivery == Delivery::kCancelled) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "acquire cancelled; the grant was released");
    }
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "acquire granted too close to the call's deadline for the reply to "
                        "arrive in time; the grant was released");
  }
  resp->set_acquired(r->acquired);
  resp->set_owner(owner_);
  if (r->acquired) {
    resp->set_fencing_token(r->fencing_token);
    resp->set_hold_count(r->hold_count);
    SetProtoDuration(r->ttl, resp->mutable_lease_ttl());
  } else {
    ToLockInfo(r->current, backend_->name(), resp->mutable_current());
  }
  return grpc::Status::OK;
}

void AcquireCall::GiveBack(uint64_t token, absl::AnyInvocable<void() &&> then) const {
  ReleaseParams undo;
  undo.key = key_;
  undo.owner = owner_;
  undo.acquire_request_id = request_id_;
  undo.fencing_token = token;
  backend_->Release(std::move(undo), [key = key_, then = std::move(then)](
                                         absl::StatusOr<ReleaseResult> rr) mutable {
    if (!rr.ok()) {
      LogWarning("could not give back a grant nobody saw (lock \"", key.name, "\" in ", key.ns,
                 "): ", rr.status().ToString(), "; its lease will end it");
    }
    if (then) std::move(then)();
  });
}

}  // namespace lockd
