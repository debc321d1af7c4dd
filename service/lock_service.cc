#include "service/lock_service.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "protos/proto_duration.h"
#include "service/audit.h"
#include "service/status_mapping.h"
#include "service/validation.h"
#include "util/log.h"

namespace lockd {
namespace {

// A grant that reaches the service less than this before its call's gRPC
// deadline (or, for a shorter call, in the last quarter of its time) is given
// back instead of delivered: the server's deadline is later than the
// client's by the request's transit, so a reply sent in that window may
// reach a client that has given up, and gRPC still reports it as sent.
constexpr absl::Duration kGrantDeliveryMargin = absl::Milliseconds(100);

// A unary call's reactor that counts the call in flight until gRPC is done
// with it (LockServiceImpl::in_flight(), which shutdown waits on).
class CountedReactor : public grpc::ServerUnaryReactor {
 public:
  explicit CountedReactor(std::atomic<int64_t>* in_flight) : in_flight_(in_flight) {
    in_flight_->fetch_add(1, std::memory_order_relaxed);
  }
  void OnDone() override {
    in_flight_->fetch_sub(1, std::memory_order_release);
    delete this;
  }
  // OnDone only counts and deletes; run it inline (see AcquireReactor).
  bool InternalInlineable() override { return true; }

 private:
  std::atomic<int64_t>* const in_flight_;
};

// An Acquire in flight. Lives until OnDone; the backend's callback finishes
// it. A cancellation (client cancel, deadline, RST_STREAM) fires `cancel_`,
// which makes the backend drop a parked waiter. A grant whose reply gRPC did
// not deliver is given back, whenever the cancellation came: before the
// backend's answer (OnResult sees it) or after Finish (OnDone sees
// IsCancelled()). The give-back undoes exactly this Acquire, by its
// request_id (the service gives every Acquire one) and the grant's fencing
// token, so it never takes a hold that another call of the same owner added,
// nor a later hold of the owner when it reaches the backend late.
class AcquireReactor final : public CountedReactor {
 public:
  AcquireReactor(Backend* backend, grpc::CallbackServerContext* ctx, v1::AcquireResponse* resp,
                 std::atomic<int64_t>* in_flight)
      : CountedReactor(in_flight),
        backend_(backend),
        ctx_(ctx),
        resp_(resp),
        cancel_(std::make_shared<CancelSignal>()) {}

  // REQUIRES: params.request_id is not empty.
  void Start(AcquireParams params) {
    key_ = params.key;
    owner_ = params.owner;
    request_id_ = params.request_id;
    resp_->set_owner(owner_);
    backend_->Acquire(std::move(params), cancel_,
                      [this](absl::StatusOr<AcquireResult> r) { OnResult(std::move(r)); });
  }

  void OnCancel() override { cancel_->Cancel(); }
  void OnDone() override {
    // IsCancelled() may only be asked here: true when the call ended before
    // its status reached the client, so the grant in resp_ was never seen.
    if (granted_ && ctx_->IsCancelled()) GiveBack();
    CountedReactor::OnDone();  // deletes this
  }
  // Run OnDone/OnCancel inline on the gRPC thread that completes the call,
  // as gRPC does for its own DefaultReactor, instead of scheduling each on
  // gRPC's executor: that hop cost a thread wake-up per Acquire (1.6 context
  // switches per acquire+release pair instead of 0.15) and held lockd to
  // 0.8x the uncontended throughput of a LockService doing no work
  // (bench/RESULTS.md). Both reactions are trivial and never block: OnDone
  // deletes the reactor (a give-back only starts an asynchronous Release);
  // OnCancel fires the CancelSignal, whose hooks only schedule work
  // (WaiterTable's moves the waiter's removal to the timer thread; the
  // zookeeper backend's starts asynchronous node deletion).
  bool InternalInlineable() override { return true; }

 private:
  void OnResult(absl::StatusOr<AcquireResult> r) {
    if (!r.ok()) {
      Finish(BackendToGrpcStatus(r.status()));
      return;
    }
    if (r->acquired) token_ = r->fencing_token;
    if (r->acquired && (cancel_->cancelled() || ctx_->IsCancelled())) {
      GiveBack();
      Finish(
          grpc::Status(grpc::StatusCode::CANCELLED, "acquire cancelled; the grant was released"));
      return;
    }
    if (r->acquired && TooLateToDeliver()) {
      GiveBack();
      Finish(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          "acquire granted too close to the call's deadline for the reply to "
                          "arrive in time; the grant was released"));
      return;
    }
    resp_->set_acquired(r->acquired);
    if (r->acquired) {
      granted_ = true;
      resp_->set_fencing_token(r->fencing_token);
      resp_->set_hold_count(r->hold_count);
      SetProtoDuration(r->ttl, resp_->mutable_lease_ttl());
    } else {
      ToLockInfo(r->current, backend_->name(), resp_->mutable_current());
    }
    Finish(grpc::Status::OK);
  }

  // Whether the call's deadline is within kGrantDeliveryMargin (at most a
  // quarter of the call's time) of now.
  bool TooLateToDeliver() const {
    const absl::Time deadline = absl::FromChrono(ctx_->deadline());
    const absl::Duration margin = std::min(kGrantDeliveryMargin, (deadline - started_) / 4);
    return deadline - absl::Now() < margin;
  }

  // The caller is gone and will never learn of this hold: undo it.
  void GiveBack() {
    ReleaseParams undo;
    undo.key = key_;
    undo.owner = owner_;
    undo.acquire_request_id = request_id_;
    undo.fencing_token = token_;
    backend_->Release(std::move(undo), [key = key_](absl::StatusOr<ReleaseResult> rr) {
      if (!rr.ok()) {
        LogWarning("could not give back a grant whose Acquire was cancelled (lock \"", key.name,
                   "\" in ", key.ns, "): ", rr.status().ToString(), "; its lease will end it");
      }
    });
  }

  Backend* const backend_;
  grpc::CallbackServerContext* const ctx_;
  v1::AcquireResponse* const resp_;
  const std::shared_ptr<CancelSignal> cancel_;
  LockKey key_;
  std::string owner_;
  std::string request_id_;
  bool granted_ = false;  // Finish was called with a grant
  const absl::Time started_ = absl::Now();
  uint64_t token_ = 0;  // the grant's fencing token, once granted
};

}  // namespace

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
}

std::string NewOwnerId() {
  thread_local absl::BitGen gen;
  return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(gen), absl::Uniform<uint64_t>(gen));
}

LockServiceImpl::LockServiceImpl(Backend* backend, LeaseBounds lease, const Authorizer* authz)
    : backend_(backend),
      lease_(lease),
      authz_(authz),
      sessions_(backend, lease, authz, &in_flight_) {}

grpc::ServerBidiReactor<v1::SessionRequest, v1::SessionResponse>* LockServiceImpl::Session(
    grpc::CallbackServerContext* ctx) {
  return sessions_.Open(ctx);
}

absl::Status LockServiceImpl::Authorize(grpc::CallbackServerContext* ctx, Permission permission,
                                        const LockKey& key, const std::string* owner,
                                        std::string* identity) const {
  if (authz_ == nullptr || !authz_->enabled()) return absl::OkStatus();
  absl::StatusOr<std::string> id = authz_->Authorize(*ctx, permission, key.ns, key.name, owner);
  if (!id.ok()) return id.status();
  if (identity != nullptr) *identity = *std::move(id);
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* LockServiceImpl::Acquire(grpc::CallbackServerContext* ctx,
                                                   const v1::AcquireRequest* req,
                                                   v1::AcquireResponse* resp) {
  auto* reactor = new AcquireReactor(backend_, ctx, resp, &in_flight_);
  absl::StatusOr<AcquireParams> params = ToAcquireParams(*req, lease_);
  if (!params.ok()) {
    reactor->Finish(ToGrpcStatus(params.status()));
    return reactor;
  }
  std::string identity(kAnonymous);
  if (absl::Status a = Authorize(ctx, Permission::kLock, params->key, &params->owner, &identity);
      !a.ok()) {
    reactor->Finish(ToGrpcStatus(a));
    return reactor;
  }
  if (params->owner.empty()) {
    params->owner = authz_ != nullptr ? authz_->NewOwnerFor(identity) : NewOwnerId();
  }
  // Every Acquire gets a request_id, so that a grant the caller never saw
  // can be undone precisely. A generated one can never equal a caller's
  // retry (caller ids cannot start with the control character).
  if (params->request_id.empty()) params->request_id = absl::StrCat("\x01", NewOwnerId());
  reactor->Start(*std::move(params));
  return reactor;
}

grpc::ServerUnaryReactor* LockServiceImpl::Release(grpc::CallbackServerContext* ctx,
                                                   const v1::ReleaseRequest* req,
                                                   v1::ReleaseResponse* resp) {
  grpc::ServerUnaryReactor* reactor = new CountedReactor(&in_flight_);
  absl::StatusOr<ReleaseParams> params = ToReleaseParams(*req);
  if (!params.ok()) {
    reactor->Finish(ToGrpcStatus(params.status()));
    return reactor;
  }
  if (absl::Status a = Authorize(ctx, Permission::kLock, params->key, &params->owner); !a.ok()) {
    reactor->Finish(ToGrpcStatus(a));
    return reactor;
  }
  backend_->Release(*std::move(params), [reactor, resp](absl::StatusOr<ReleaseResult> r) {
    if (r.ok()) {
      resp->set_released(r->released);
      resp->set_hold_count(r->hold_count);
    }
    reactor->Finish(BackendToGrpcStatus(r.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* LockServiceImpl::Renew(grpc::CallbackServerContext* ctx,
                                                 const v1::RenewRequest* req,
                                                 v1::RenewResponse* resp) {
  grpc::ServerUnaryReactor* reactor = new CountedReactor(&in_flight_);
  absl::StatusOr<RenewParams> params = ToRenewParams(*req, lease_);
  if (!params.ok()) {
    reactor->Finish(ToGrpcStatus(params.status()));
    return reactor;
  }
  if (absl::Status a = Authorize(ctx, Permission::kLock, params->key, &params->owner); !a.ok()) {
    reactor->Finish(ToGrpcStatus(a));
    return reactor;
  }
  backend_->Renew(*std::move(params), [reactor, resp](absl::StatusOr<RenewResult> r) {
    if (r.ok()) {
      SetProtoDuration(r->ttl, resp->mutable_lease_ttl());
      resp->set_fencing_token(r->fencing_token);
    }
    reactor->Finish(BackendToGrpcStatus(r.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* LockServiceImpl::Describe(grpc::CallbackServerContext* ctx,
                                                    const v1::DescribeRequest* req,
                                                    v1::LockInfo* resp) {
  grpc::ServerUnaryReactor* reactor = new CountedReactor(&in_flight_);
  absl::StatusOr<LockKey> key = ToLockKey(*req);
  if (!key.ok()) {
    reactor->Finish(ToGrpcStatus(key.status()));
    return reactor;
  }
  if (absl::Status a = Authorize(ctx, Permission::kRead, *key, nullptr); !a.ok()) {
    reactor->Finish(ToGrpcStatus(a));
    return reactor;
  }
  backend_->Describe(*std::move(key), [this, reactor, resp](absl::StatusOr<LockState> r) {
    if (r.ok()) ToLockInfo(*r, backend_->name(), resp);
    reactor->Finish(BackendToGrpcStatus(r.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* LockServiceImpl::List(grpc::CallbackServerContext* ctx,
                                                const v1::ListRequest* req,
                                                v1::ListResponse* resp) {
  grpc::ServerUnaryReactor* reactor = new CountedReactor(&in_flight_);
  absl::StatusOr<ListParams> params = ToListParams(*req);
  if (!params.ok()) {
    reactor->Finish(ToGrpcStatus(params.status()));
    return reactor;
  }
  if (absl::Status a = Authorize(ctx, Permission::kRead, LockKey{params->ns, ""}, nullptr);
      !a.ok()) {
    reactor->Finish(ToGrpcStatus(a));
    return reactor;
  }
  backend_->List(*std::move(params), [this, reactor, resp](absl::StatusOr<ListResult> r) {
    if (r.ok()) {
      for (const LockState& s : r->locks) ToLockInfo(s, backend_->name(), resp->add_locks());
      resp->set_next_page_token(r->next_page_token);
    }
    reactor->Finish(BackendToGrpcStatus(r.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* LockServiceImpl::ForceRelease(grpc::CallbackServerContext* ctx,
                                                        const v1::ForceReleaseRequest* req,
                                                        v1::ForceReleaseResponse* resp) {
  grpc::ServerUnaryReactor* reactor = new CountedReactor(&in_flight_);
  absl::StatusOr<ForceReleaseParams> params = ToForceReleaseParams(*req);
  if (!params.ok()) {
    reactor->Finish(ToGrpcStatus(params.status()));
    return reactor;
  }
  // The audit line names the caller even when no authorization is
  // configured.
  std::string identity(kAnonymous);
  if (authz_ != nullptr && authz_->enabled()) {
    if (absl::Status a = Authorize(ctx, Permission::kAdmin, params->key, nullptr, &identity);
        !a.ok()) {
      reactor->Finish(ToGrpcStatus(a));
      return reactor;
    }
  } else if (std::optional<std::string> cert = CertificateIdentity(*ctx)) {
    identity = *std::move(cert);
  }
  LockKey key = params->key;
  uint64_t token = params->fencing_token;
  backend_->ForceRelease(*std::move(params), [this, reactor, resp, identity = std::move(identity),
                                              key = std::move(key), token, reason = req->reason()](
                                                 absl::StatusOr<ForceReleaseResult> r) {
    ForceReleaseAudit audit{identity, key.ns, key.name, reason, token};
    if (r.ok()) {
      resp->set_released(r->released);
      ToLockInfo(r->previous, backend_->name(), resp->mutable_previous());
      audit.released = r->released;
      if (r->released) {
        sessions_.ForceReleased(key, r->previous.owner, r->previous.fencing_token);
      }
      audit.previous_owner = r->previous.owner;
      audit.previous_token = r->previous.fencing_token;
    }
    AuditForceRelease(audit, r.status());
    reactor->Finish(BackendToGrpcStatus(r.status()));
  });
  return reactor;
}

}  // namespace lockd
