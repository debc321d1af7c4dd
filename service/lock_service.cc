#include "service/lock_service.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "protos/proto_duration.h"
#include "service/acquire_all.h"
#include "service/acquire_call.h"
#include "service/audit.h"
#include "service/status_mapping.h"
#include "service/validation.h"
#include "util/log.h"

namespace lockd {
namespace {

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

// Whether a unary call's grant can still reach its caller: not when the call
// was cancelled (or its deadline passed), nor when the grant came too close
// to the deadline (TooLateToDeliver).
AcquireCall::Delivery UnaryDelivery(const CancelSignal& cancel, grpc::CallbackServerContext* ctx,
                                    absl::Time started) {
  if (cancel.cancelled() || ctx->IsCancelled()) return AcquireCall::Delivery::kCancelled;
  if (TooLateToDeliver(started, absl::FromChrono(ctx->deadline()), absl::Now())) {
    return AcquireCall::Delivery::kTooLate;
  }
  return AcquireCall::Delivery::kDeliver;
}

// An Acquire in flight (the rules are in service/acquire_call.h). Lives
// until OnDone; the backend's callback finishes it. A cancellation (client
// cancel, deadline, RST_STREAM) fires `cancel_`, which makes the backend
// drop a parked waiter. A grant whose reply gRPC did not deliver is given
// back, whenever the cancellation came: before the backend's answer
// (OnResult sees it) or after Finish (OnDone sees IsCancelled()).
class AcquireReactor final : public CountedReactor {
 public:
  AcquireReactor(Backend* backend, grpc::CallbackServerContext* ctx, v1::AcquireResponse* resp,
                 std::atomic<int64_t>* in_flight)
      : CountedReactor(in_flight),
        backend_(backend),
        ctx_(ctx),
        resp_(resp),
        cancel_(std::make_shared<CancelSignal>()) {}

  // REQUIRES: params.owner is not empty.
  void Start(AcquireParams params) {
    AcquireCall::Start(
        backend_, std::move(params), cancel_,
        [this](const AcquireCall& call, absl::StatusOr<AcquireResult> r) { OnResult(call, r); });
  }

  void OnCancel() override { cancel_->Cancel(); }
  void OnDone() override {
    // IsCancelled() may only be asked here: true when the call ended before
    // its status reached the client, so the grant in resp_ was never seen.
    if (granted_.has_value() && ctx_->IsCancelled()) granted_->GiveBack(resp_->fencing_token());
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
  // (WaiterRegistry's hands the cancel to the timer thread; the
  // zookeeper backend's starts asynchronous node deletion).
  bool InternalInlineable() override { return true; }

 private:
  void OnResult(const AcquireCall& call, const absl::StatusOr<AcquireResult>& r) {
    grpc::Status status = call.Answer(r, UnaryDelivery(*cancel_, ctx_, started_), resp_);
    if (status.ok() && r->acquired) granted_ = call;
    Finish(status);
  }

  Backend* const backend_;
  grpc::CallbackServerContext* const ctx_;
  v1::AcquireResponse* const resp_;
  const std::shared_ptr<CancelSignal> cancel_;
  const absl::Time started_ = absl::Now();
  std::optional<AcquireCall> granted_;  // Finish was called with this call's grant
};

// An AcquireAll in flight (the rules are in service/acquire_all.h). Like
// AcquireReactor: lives until OnDone, a cancellation fires `cancel_`, and
// holds whose reply gRPC did not deliver are given back in OnDone.
class AcquireAllReactor final : public CountedReactor {
 public:
  AcquireAllReactor(Backend* backend, grpc::CallbackServerContext* ctx,
                    v1::AcquireAllResponse* resp, std::atomic<int64_t>* in_flight)
      : CountedReactor(in_flight),
        backend_(backend),
        ctx_(ctx),
        resp_(resp),
        cancel_(std::make_shared<CancelSignal>()) {}

  // REQUIRES: params.owner is not empty.
  void Start(AcquireAllParams params) {
    StartAcquireAll(
        backend_, std::move(params), cancel_,
        [this](const std::vector<AcquiredLock>&) {
          return UnaryDelivery(*cancel_, ctx_, started_);
        },
        [this](grpc::Status status, v1::AcquireAllResponse resp, std::vector<AcquiredLock> held) {
          *resp_ = std::move(resp);
          held_ = std::move(held);
          Finish(status);
        });
  }

  void OnCancel() override { cancel_->Cancel(); }
  void OnDone() override {
    if (!held_.empty() && ctx_->IsCancelled()) GiveBackAll(held_, nullptr);
    CountedReactor::OnDone();  // deletes this
  }
  bool InternalInlineable() override { return true; }  // as AcquireReactor's

 private:
  Backend* const backend_;
  grpc::CallbackServerContext* const ctx_;
  v1::AcquireAllResponse* const resp_;
  const std::shared_ptr<CancelSignal> cancel_;
  const absl::Time started_ = absl::Now();
  std::vector<AcquiredLock> held_;  // Finish was called with these grants
};

// OK when `params` are valid and `authorize` (run only then) allows the
// call; otherwise finishes `reactor` with the error.
template <typename Params, typename AuthorizeFn>
bool Admit(grpc::ServerUnaryReactor* reactor, const absl::StatusOr<Params>& params,
           AuthorizeFn authorize) {
  absl::Status s = params.ok() ? authorize(*params) : params.status();
  if (s.ok()) return true;
  reactor->Finish(ToGrpcStatus(s));
  return false;
}

}  // namespace

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
  std::string identity(kAnonymous);
  if (!Admit(reactor, params, [&](const AcquireParams& p) {
        return Authorize(ctx, Permission::kLock, p.key, &p.owner, &identity);
      })) {
    return reactor;
  }
  if (params->owner.empty()) params->owner = DefaultOwner(authz_, identity);
  reactor->Start(*std::move(params));
  return reactor;
}

grpc::ServerUnaryReactor* LockServiceImpl::AcquireAll(grpc::CallbackServerContext* ctx,
                                                      const v1::AcquireAllRequest* req,
                                                      v1::AcquireAllResponse* resp) {
  auto* reactor = new AcquireAllReactor(backend_, ctx, resp, &in_flight_);
  absl::StatusOr<AcquireAllParams> params = ToAcquireAllParams(*req, lease_);
  std::string identity(kAnonymous);
  if (!Admit(reactor, params, [&](const AcquireAllParams& p) {
        return AuthorizeNamespaces(p, [&](const LockKey& key) {
          return Authorize(ctx, Permission::kLock, key, &p.owner, &identity);
        });
      })) {
    return reactor;
  }
  if (params->owner.empty()) params->owner = DefaultOwner(authz_, identity);
  reactor->Start(*std::move(params));
  return reactor;
}

grpc::ServerUnaryReactor* LockServiceImpl::Release(grpc::CallbackServerContext* ctx,
                                                   const v1::ReleaseRequest* req,
                                                   v1::ReleaseResponse* resp) {
  grpc::ServerUnaryReactor* reactor = new CountedReactor(&in_flight_);
  absl::StatusOr<ReleaseParams> params = ToReleaseParams(*req);
  if (!Admit(reactor, params,
             [&](const auto& p) { return Authorize(ctx, Permission::kLock, p.key, &p.owner); })) {
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
  if (!Admit(reactor, params,
             [&](const auto& p) { return Authorize(ctx, Permission::kLock, p.key, &p.owner); })) {
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
  if (!Admit(reactor, key,
             [&](const LockKey& k) { return Authorize(ctx, Permission::kRead, k, nullptr); })) {
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
  if (!Admit(reactor, params, [&](const auto& p) {
        return Authorize(ctx, Permission::kRead, LockKey{p.ns, ""}, nullptr);
      })) {
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
  // The audit line names the caller even when no authorization is
  // configured.
  std::string identity(kAnonymous);
  if (!Admit(reactor, params, [&](const ForceReleaseParams& p) {
        if (authz_ != nullptr && authz_->enabled()) {
          return Authorize(ctx, Permission::kAdmin, p.key, nullptr, &identity);
        }
        if (std::optional<std::string> cert = CertificateIdentity(*ctx)) {
          identity = *std::move(cert);
        }
        return absl::OkStatus();
      })) {
    return reactor;
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
        // Every holder freed (only the one with `token` when it is set).
        for (const HolderState& h : r->previous.holders) {
          if (token == 0 || h.fencing_token == token) {
            sessions_.ForceReleased(key, h.owner, h.fencing_token);
          }
        }
        if (r->previous.holders.empty()) {  // a backend that reports one holder only
          sessions_.ForceReleased(key, r->previous.owner, r->previous.fencing_token);
        }
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
