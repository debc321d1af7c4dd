// One Session stream (the rules are in session.h). This file holds the
// reactor: reading, writing, the operations and the end of the stream;
// session_holds.cc holds what the session does with its holds (resume,
// renewal, lost, release at the end).

#include <utility>

#include "absl/strings/str_cat.h"
#include "protos/proto_duration.h"
#include "service/acquire_call.h"
#include "service/session_reactor.h"
#include "service/status_mapping.h"
#include "service/validation.h"
#include "util/log.h"

namespace lockd {
namespace {

google::rpc::Status ToRpcStatus(const grpc::Status& s) {
  google::rpc::Status out;
  // Statuses with details carry the whole google.rpc.Status.
  if (!s.error_details().empty() && out.ParseFromString(s.error_details())) return out;
  out.Clear();
  out.set_code(static_cast<int32_t>(s.error_code()));
  out.set_message(s.error_message());
  return out;
}

v1::SessionResponse ErrorResult(uint64_t op_id, const grpc::Status& s) {
  v1::SessionResponse resp;
  resp.mutable_result()->set_op_id(op_id);
  *resp.mutable_result()->mutable_status() = ToRpcStatus(s);
  return resp;
}

v1::SessionResponse OkResult(uint64_t op_id) {
  v1::SessionResponse resp;
  resp.mutable_result()->set_op_id(op_id);
  resp.mutable_result()->mutable_status();  // code 0: OK
  return resp;
}

}  // namespace

SessionReactor::SessionReactor(SessionHub* hub, grpc::CallbackServerContext* ctx)
    : hub_(hub), backend_(hub->backend_), ctx_(ctx) {
  hub_->in_flight_->fetch_add(1, std::memory_order_relaxed);
}

void SessionReactor::Begin() {
  if (!hub_->Add(this)) {
    BeginEnd(End::kShutdown, ShutdownStatus());
    return;
  }
  Read();
}

grpc::Status SessionReactor::ShutdownStatus() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "lockd is shutting down; the session's holds are kept to their lease "
                      "(resume them on another replica)");
}

// --- Reference counting ---------------------------------------------------

void SessionReactor::Unref() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

SessionReactor::Ref SessionReactor::NewRef() {
  refs_.fetch_add(1, std::memory_order_relaxed);
  return Ref(this);
}

// --- Reading --------------------------------------------------------------

void SessionReactor::Read() {
  {
    absl::MutexLock l(&mu_);
    if (end_ != End::kNone || finish_called_) return;
    ++starting_;
  }
  StartRead(&request_);
  Started();
}

void SessionReactor::Started() {
  {
    absl::MutexLock l(&mu_);
    --starting_;
  }
  MaybeFinish();
}

void SessionReactor::OnReadDone(bool ok) {
  if (!ok) {
    ReadFailed();
    return;
  }
  v1::SessionRequest req = std::move(request_);
  request_.Clear();
  switch (req.kind_case()) {
    case v1::SessionRequest::kOpen:
      HandleOpen(req.open());  // reads on once `opened` is queued
      return;
    case v1::SessionRequest::kAcquire:
      if (!RequireOpen()) return;
      HandleAcquire(*req.mutable_acquire());
      break;
    case v1::SessionRequest::kRelease:
      if (!RequireOpen()) return;
      HandleRelease(*req.mutable_release());
      break;
    case v1::SessionRequest::kCancel:
      if (!RequireOpen()) return;
      HandleCancel(req.cancel().op_id());
      break;
    case v1::SessionRequest::KIND_NOT_SET:
      ProtocolError("a SessionRequest must set one of open, acquire, release, cancel");
      return;
  }
  Read();
}

void SessionReactor::ReadFailed() {
  bool grace = false;
  {
    absl::MutexLock l(&mu_);
    if (end_ != End::kNone) return;
    grace = opened_ && keep_on_disconnect_ && !cancelled_;
  }
  if (!grace) {
    BeginEnd(End::kHalfClose, grpc::Status::OK);
    return;
  }
  hub_->timers_.Schedule(kBreakGrace, [ref = NewRef()] {
    bool broken;
    {
      absl::MutexLock l(&ref->mu_);
      broken = ref->cancelled_;
    }
    ref->BeginEnd(broken ? End::kBroken : End::kHalfClose, grpc::Status::OK);
  });
}

bool SessionReactor::RequireOpen() {
  {
    absl::MutexLock l(&mu_);
    if (opened_) return true;
  }
  ProtocolError("the first SessionRequest must be `open`");
  return false;
}

void SessionReactor::ProtocolError(absl::string_view what) {
  BeginEnd(End::kProtocolError,
           grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(what)));
}

// --- Opening --------------------------------------------------------------

void SessionReactor::HandleOpen(const v1::SessionOpen& open) {
  bool again;
  {
    absl::MutexLock l(&mu_);
    again = opening_;
    opening_ = true;
  }
  if (again) {
    ProtocolError("`open` may only be the first SessionRequest");
    return;
  }
  absl::StatusOr<SessionOpenParams> p = ToSessionOpenParams(open, hub_->lease_);
  if (!p.ok()) {
    BeginEnd(End::kProtocolError, ToGrpcStatus(p.status()));
    return;
  }
  std::string ns = p->ns.empty() ? std::string(kDefaultNamespace) : p->ns;
  std::string identity(kAnonymous);
  const Authorizer* authz = hub_->authz_;
  if (authz != nullptr && authz->enabled()) {
    // Opening needs `lock` on the session's namespace, and open.owner obeys
    // the owner rule of a unary call (auth.owner_prefix).
    absl::StatusOr<std::string> id =
        authz->Authorize(*ctx_, Permission::kLock, ns, /*name=*/"", &p->owner);
    if (!id.ok()) {
      BeginEnd(End::kRefused, ToGrpcStatus(id.status()));
      return;
    }
    identity = *std::move(id);
  }
  if (p->owner.empty()) p->owner = DefaultOwner(authz, identity);
  {
    absl::MutexLock l(&mu_);
    owner_ = p->owner;
    ns_ = std::move(ns);
    ttl_ = p->ttl;
    keep_on_disconnect_ = p->keep_on_disconnect;
    opened_ = true;
  }
  Resume(std::move(p->resume));  // sends `opened` and reads on when done
}

void SessionReactor::SendOpened(std::vector<v1::LockInfo> resumed) {
  v1::SessionResponse resp;
  v1::SessionOpened* opened = resp.mutable_opened();
  opened->set_owner(owner_);
  SetProtoDuration(ttl_, opened->mutable_lease_ttl());
  for (v1::LockInfo& info : resumed) *opened->add_resumed() = std::move(info);
  Send(std::move(resp));
  Read();
}

// --- Operations -----------------------------------------------------------

bool SessionReactor::CheckOwnerAndNamespace(uint64_t op_id, std::string* owner, std::string* ns) {
  if (!owner->empty() && *owner != owner_) {
    Send(ErrorResult(op_id, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                         absl::StrCat("owner: must be empty or the session's "
                                                      "owner (got \"",
                                                      *owner, "\")"))));
    return false;
  }
  *owner = owner_;
  if (ns->empty()) *ns = ns_;
  return true;
}

// Ends the stream (a protocol error) if `op_id` is in flight. Only the
// reader adds operations, so an op_id checked here is still free when the
// operation starts.
bool SessionReactor::InFlight(uint64_t op_id) {
  {
    absl::MutexLock l(&mu_);
    if (!ops_.contains(op_id)) return false;
  }
  ProtocolError(absl::StrCat("op_id ", op_id, " is already in flight on this session"));
  return true;
}

// Registers the operation; false (and answered RESOURCE_EXHAUSTED) when the
// session has too many in flight.
bool SessionReactor::StartOp(uint64_t op_id, std::shared_ptr<CancelSignal> cancel) {
  {
    absl::MutexLock l(&mu_);
    if (ops_.size() < kMaxSessionOps) {
      ops_.emplace(op_id, std::move(cancel));
      return true;
    }
  }
  Send(ErrorResult(op_id, grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                       absl::StrCat("too many operations in flight on this "
                                                    "session (at most ",
                                                    kMaxSessionOps, ")"))));
  return false;
}

void SessionReactor::HandleAcquire(v1::SessionAcquire& a) {
  const uint64_t op_id = a.op_id();
  if (InFlight(op_id)) return;
  v1::AcquireRequest& req = *a.mutable_request();
  if (!CheckOwnerAndNamespace(op_id, req.mutable_owner(), req.mutable_namespace_())) return;
  SetProtoDuration(ttl_, req.mutable_lease_ttl());
  absl::StatusOr<AcquireParams> params = ToAcquireParams(req, hub_->lease_);
  if (!Admit(op_id, params)) return;
  auto cancel = std::make_shared<CancelSignal>();
  if (!StartOp(op_id, cancel)) return;
  AcquireCall::Start(backend_, *std::move(params), cancel,
                     [ref = NewRef(), op_id, sent = absl::Now()](const AcquireCall& call,
                                                                 absl::StatusOr<AcquireResult> r) {
                       ref->OnAcquired(op_id, call, sent, r);
                     });
}

void SessionReactor::OnAcquired(uint64_t op_id, const AcquireCall& call, absl::Time sent,
                                const absl::StatusOr<AcquireResult>& r) {
  AcquireCall::Delivery delivery = AcquireCall::Delivery::kDeliver;
  {
    absl::MutexLock l(&mu_);
    auto it = ops_.find(op_id);
    bool cancelled = it != ops_.end() && it->second != nullptr && it->second->cancelled();
    if (it != ops_.end()) ops_.erase(it);
    if (cancelled || end_ != End::kNone) {
      delivery = AcquireCall::Delivery::kCancelled;
    } else if (r.ok() && r->acquired) {
      // The lease runs from the grant, however long the acquire waited:
      // from the backend's lower bound of that moment, else from the call.
      Hold& h = holds_[call.key()];
      h.token = r->fencing_token;
      h.expires = (r->lease_start != absl::InfinitePast() ? r->lease_start : sent) + ttl_;
      ScheduleRenewalLocked(ttl_ / 3);
    }
  }
  v1::AcquireResponse answer;
  grpc::Status status = call.Answer(r, delivery, &answer);
  if (!status.ok()) {
    Send(ErrorResult(op_id, status));
  } else {
    v1::SessionResponse resp = OkResult(op_id);
    *resp.mutable_result()->mutable_acquire() = std::move(answer);
    Send(std::move(resp));
  }
  ContinueEnd();
}

void SessionReactor::HandleRelease(v1::SessionRelease& rel) {
  const uint64_t op_id = rel.op_id();
  v1::ReleaseRequest& req = *rel.mutable_request();
  if (InFlight(op_id)) return;
  if (!CheckOwnerAndNamespace(op_id, req.mutable_owner(), req.mutable_namespace_())) return;
  absl::StatusOr<ReleaseParams> params = ToReleaseParams(req);
  if (!Admit(op_id, params)) return;
  if (!StartOp(op_id, nullptr)) return;
  LockKey key = params->key;
  {
    absl::MutexLock l(&mu_);
    if (auto it = holds_.find(key); it != holds_.end()) ++it->second.releasing;
  }
  backend_->Release(*std::move(params),
                    [ref = NewRef(), op_id, key = std::move(key)](absl::StatusOr<ReleaseResult> r) {
                      ref->OnReleased(op_id, key, std::move(r));
                    });
}

void SessionReactor::OnReleased(uint64_t op_id, const LockKey& key,
                                absl::StatusOr<ReleaseResult> r) {
  {
    absl::MutexLock l(&mu_);
    ops_.erase(op_id);
    if (auto it = holds_.find(key); it != holds_.end()) {
      --it->second.releasing;
      if ((r.ok() && r->hold_count == 0) || (!r.ok() && IsLockNotHeld(r.status()))) {
        holds_.erase(it);
      }
    }
  }
  if (!r.ok()) {
    Send(ErrorResult(op_id, BackendToGrpcStatus(r.status())));
  } else {
    v1::SessionResponse resp = OkResult(op_id);
    resp.mutable_result()->mutable_release()->set_released(r->released);
    resp.mutable_result()->mutable_release()->set_hold_count(r->hold_count);
    Send(std::move(resp));
  }
  ContinueEnd();
}

void SessionReactor::HandleCancel(uint64_t op_id) {
  std::shared_ptr<CancelSignal> cancel;
  {
    absl::MutexLock l(&mu_);
    auto it = ops_.find(op_id);
    if (it != ops_.end()) cancel = it->second;
  }
  if (cancel != nullptr) cancel->Cancel();
}

template <typename Params>
bool SessionReactor::Admit(uint64_t op_id, const absl::StatusOr<Params>& params) {
  absl::Status s = params.ok() ? Authorize(params->key) : params.status();
  if (s.ok()) return true;
  Send(ErrorResult(op_id, ToGrpcStatus(s)));
  return false;
}

absl::Status SessionReactor::Authorize(const LockKey& key) {
  const Authorizer* authz = hub_->authz_;
  if (authz == nullptr || !authz->enabled()) return absl::OkStatus();
  return authz->Authorize(*ctx_, Permission::kLock, key.ns, key.name, &owner_).status();
}

// --- Writing --------------------------------------------------------------

void SessionReactor::Send(v1::SessionResponse resp) {
  {
    absl::MutexLock l(&mu_);
    if (finish_called_ || write_failed_) return;
    outbox_.push_back(std::move(resp));
    if (writing_) return;
    writing_ = true;
    writing_now_ = std::move(outbox_.front());
    outbox_.pop_front();
  }
  StartWrite(&writing_now_);
}

void SessionReactor::OnWriteDone(bool ok) {
  bool next = false;
  {
    absl::MutexLock l(&mu_);
    if (!ok) {
      write_failed_ = true;  // the stream is broken; OnCancel follows
      outbox_.clear();
    }
    if (!outbox_.empty()) {
      writing_now_ = std::move(outbox_.front());
      outbox_.pop_front();
      next = true;
    } else {
      writing_ = false;
    }
  }
  if (next) {
    StartWrite(&writing_now_);
  } else {
    MaybeFinish();
  }
}

// --- Ending ---------------------------------------------------------------

void SessionReactor::OnCancel() {
  {
    absl::MutexLock l(&mu_);
    cancelled_ = true;
  }
  BeginEnd(End::kBroken, grpc::Status(grpc::StatusCode::CANCELLED, "session stream broken"));
}

void SessionReactor::BeginEnd(End why, grpc::Status status) {
  std::vector<std::shared_ptr<CancelSignal>> cancels;
  {
    absl::MutexLock l(&mu_);
    if (end_ != End::kNone) return;
    end_ = why;
    final_status_ = std::move(status);
    if (renew_timer_ != 0 && hub_->timers_.Cancel(renew_timer_)) renew_timer_ = 0;
    if (expiry_timer_ != 0 && hub_->timers_.Cancel(expiry_timer_)) expiry_timer_ = 0;
    for (auto& [op_id, cancel] : ops_) {
      if (cancel != nullptr) cancels.push_back(cancel);
    }
  }
  for (const std::shared_ptr<CancelSignal>& c : cancels) c->Cancel();
  ContinueEnd();
}

void SessionReactor::ContinueEnd() {
  std::vector<std::pair<LockKey, uint64_t>> release;  // key, token
  {
    absl::MutexLock l(&mu_);
    if (end_ == End::kNone || end_settled_ || !ops_.empty() || resumes_left_ > 0) return;
    end_settled_ = true;
    // kShutdown and kResumeFailed keep the holds for a session that
    // resumes them.
    bool release_holds =
        end_ == End::kHalfClose ||
        ((end_ == End::kBroken || end_ == End::kProtocolError) && !keep_on_disconnect_);
    if (release_holds) {
      for (const auto& [key, hold] : holds_) release.emplace_back(key, hold.token);
    }
    holds_.clear();
    releases_left_ = release.size();
  }
  if (release.empty()) {
    MaybeFinish();
    return;
  }
  for (auto& [key, token] : release) ReleaseToZero(std::move(key), token);
}

void SessionReactor::MaybeFinish() {
  grpc::Status status;
  {
    absl::MutexLock l(&mu_);
    if (!end_settled_ || releases_left_ > 0 || writing_ || starting_ > 0 || finish_called_) {
      return;
    }
    finish_called_ = true;
    status = final_status_;
  }
  Finish(status);
}

void SessionReactor::OnDone() {
  hub_->Remove(this);
  hub_->in_flight_->fetch_sub(1, std::memory_order_release);
  Unref();  // gRPC's reference
}

}  // namespace lockd
