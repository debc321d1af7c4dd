// One Session stream (the rules are in session.h, the phases in
// session_reactor.h): reading and opening, the operations and the end of the
// stream. The holds are SessionHolds' (session_holds.cc), the writes
// SessionWriter's (session_writer.cc).

#include "service/session_reactor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/common/coalescing_scope.h"
#include "protos/proto_duration.h"
#include "service/status_mapping.h"
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

SessionHolds* SessionReactor::holds() {
  absl::MutexLock l(&mu_);
  return holds_.get();
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
  v1::SessionRequest* into;
  {
    absl::MutexLock l(&mu_);
    if (phase_ >= Phase::kEnding) return;
    ++starting_;
    into = &request_;
  }
  StartRead(into);
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
  v1::SessionRequest req;
  {
    absl::MutexLock l(&mu_);
    req = std::move(request_);
    request_.Clear();
  }
  if (req.kind_case() == v1::SessionRequest::kOpen) {
    HandleOpen(req.open());  // reads on once `opened` is queued
    return;
  }
  if (req.kind_case() == v1::SessionRequest::KIND_NOT_SET) {
    ProtocolError(
        "a SessionRequest must set one of open, acquire, release, cancel, acquire_all, batch");
    return;
  }
  SessionHolds* holds = RequireOpen();
  if (holds == nullptr) return;
  if (req.kind_case() == v1::SessionRequest::kBatch) {
    HandleBatch(holds, *req.mutable_batch());
  } else {
    HandleOp(holds, req);
  }
  Read();
}

void SessionReactor::ReadFailed() {
  bool grace;
  {
    absl::MutexLock l(&mu_);
    if (phase_ >= Phase::kEnding) return;
    grace = phase_ == Phase::kOpen && holds_->params().keep_on_disconnect;
    if (grace) phase_ = Phase::kGrace;
  }
  if (!grace) {
    BeginEnd(End::kHalfClose, grpc::Status::OK);
    return;
  }
  hub_->timers_.Schedule(kBreakGrace, [self = NewRef()] { self->GraceOver(); });
}

// OnCancel during the grace already ended the session as broken.
void SessionReactor::GraceOver() { BeginEnd(End::kHalfClose, grpc::Status::OK); }

SessionHolds* SessionReactor::RequireOpen() {
  if (SessionHolds* h = holds()) return h;
  ProtocolError("the first SessionRequest must be `open`");
  return nullptr;
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
    again = holds_ != nullptr || phase_ == Phase::kOpening;
    if (phase_ == Phase::kAwaitOpen) phase_ = Phase::kOpening;
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
  SessionHolds::Deps deps{this,           &writer_,         backend_,
                          &hub_->timers_, &hub_->renewals_, hub_->metrics_};
  auto holds = std::make_unique<SessionHolds>(
      deps, SessionParams{p->owner, std::move(ns), p->ttl, p->keep_on_disconnect});
  SessionHolds* h = holds.get();
  {
    absl::MutexLock l(&mu_);
    holds_ = std::move(holds);
    if (phase_ == Phase::kOpening) phase_ = Phase::kResuming;
    resumes_left_ = p->resume.size();
  }
  Resume(h, std::move(p->resume));  // sends `opened` and reads on when done
}

// Takes over each hold of open.resume the owner still has with its token.
void SessionReactor::Resume(SessionHolds* holds, std::vector<SessionOpenParams::Resume> refs) {
  if (refs.empty()) {
    Resumed(holds, absl::NotFoundError("nothing to resume"));
    return;
  }
  for (SessionOpenParams::Resume& ref : refs) {
    // Taking a hold over needs `lock` on its namespace, as any operation on
    // it does (the denial is audited); a refused entry is not taken over.
    if (!Authorize(holds->params(), ref.key).ok()) {
      Resumed(holds, absl::NotFoundError("not authorized"));
      continue;
    }
    holds->TakeOver(std::move(ref), [self = NewRef(), holds](absl::StatusOr<v1::LockInfo> info) {
      self->Resumed(holds, std::move(info));
    });
  }
}

// One open.resume entry checked (NotFound: not taken over). After the last
// one (or at once when there were none), queues `opened`.
void SessionReactor::Resumed(SessionHolds* holds, absl::StatusOr<v1::LockInfo> info) {
  std::vector<v1::LockInfo> resumed;
  absl::Status error;
  {
    absl::MutexLock l(&mu_);
    if (info.ok()) {
      resumed_.push_back(*std::move(info));
    } else if (!absl::IsNotFound(info.status())) {
      resume_error_ = info.status();
    }
    if (resumes_left_ > 0 && --resumes_left_ > 0) return;
    resumed.swap(resumed_);
    error = resume_error_;
    if (phase_ == Phase::kResuming && error.ok()) phase_ = Phase::kOpen;
  }
  holds->ScheduleRenewal(holds->params().ttl / 3);
  if (!error.ok()) {
    // The client cannot learn which holds are its own: it opens again.
    // Holds taken over so far are kept to their lease for that retry.
    BeginEnd(End::kResumeFailed,
             grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          absl::StrCat("could not resume the session's holds: ", error.message())));
  } else {
    SendOpened(holds->params(), std::move(resumed));
  }
  ContinueEnd();  // the stream may have ended while the holds were checked
}

void SessionReactor::SendOpened(const SessionParams& params, std::vector<v1::LockInfo> resumed) {
  v1::SessionResponse resp;
  v1::SessionOpened* opened = resp.mutable_opened();
  opened->set_owner(params.owner);
  SetProtoDuration(params.ttl, opened->mutable_lease_ttl());
  for (v1::LockInfo& info : resumed) *opened->add_resumed() = std::move(info);
  writer_.Send(std::move(resp));
  Read();
}

// --- Operations -----------------------------------------------------------

void SessionReactor::HandleOp(SessionHolds* holds, v1::SessionRequest& req) {
  switch (req.kind_case()) {
    case v1::SessionRequest::kAcquire:
      HandleAcquire(holds, *req.mutable_acquire());
      break;
    case v1::SessionRequest::kRelease:
      HandleRelease(holds, *req.mutable_release());
      break;
    case v1::SessionRequest::kAcquireAll:
      HandleAcquireAll(holds, *req.mutable_acquire_all());
      break;
    case v1::SessionRequest::kCancel:
      HandleCancel(req.cancel().op_id());
      break;
    default:  // open, batch and none are the reader's (OnReadDone, HandleBatch)
      break;
  }
}

void SessionReactor::HandleBatch(SessionHolds* holds, v1::SessionBatch& batch) {
  if (batch.ops_size() > kMaxBatchOps) {
    ProtocolError(absl::StrCat("batch.ops: ", batch.ops_size(), " ops, at most ", kMaxBatchOps,
                               " in one batch"));
    return;
  }
  for (int i = 0; i < batch.ops_size(); ++i) {
    const char* wrong = nullptr;
    switch (batch.ops(i).kind_case()) {
      case v1::SessionRequest::kOpen:
        wrong = "`open` may not be in a batch";
        break;
      case v1::SessionRequest::kBatch:
        wrong = "a batch may not be nested in a batch";
        break;
      case v1::SessionRequest::KIND_NOT_SET:
        wrong = "must set one of acquire, release, cancel, acquire_all";
        break;
      default:
        break;
    }
    if (wrong != nullptr) {
      ProtocolError(absl::StrCat("batch.ops[", i, "]: ", wrong));
      return;
    }
  }
  // The client reads response batches, since it sends them.
  writer_.EnableBatches();
  // The ops' round trips to the backend leave together as the batch ends
  // (a backend that can, e.g. redis: one pipelined write).
  CoalescingScope coalesce;
  for (v1::SessionRequest& op : *batch.mutable_ops()) {
    {
      absl::MutexLock l(&mu_);
      if (phase_ >= Phase::kEnding) return;  // an op ended the stream (op_id reused)
    }
    HandleOp(holds, op);
  }
}

bool SessionReactor::CheckOwnerAndNamespace(const SessionParams& params, uint64_t op_id,
                                            std::string* owner, std::string* ns) {
  if (!owner->empty() && *owner != params.owner) {
    writer_.Send(ErrorResult(op_id, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                                 absl::StrCat("owner: must be empty or the "
                                                              "session's owner (got \"",
                                                              *owner, "\")"))));
    return false;
  }
  *owner = params.owner;
  if (ns != nullptr && ns->empty()) *ns = params.ns;
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

// Registers the operation; false (and answered) when the session has too
// many in flight (RESOURCE_EXHAUSTED) or is ending (CANCELLED).
bool SessionReactor::StartOp(uint64_t op_id, std::shared_ptr<CancelSignal> cancel) {
  bool ending;
  {
    absl::MutexLock l(&mu_);
    // An op read just before the stream began to end (a batch's ops take a
    // while to start) would not see the end's cancel: it does not start.
    ending = phase_ >= Phase::kEnding;
    if (!ending && ops_.size() < kMaxSessionOps) {
      ops_.emplace(op_id, std::move(cancel));
      return true;
    }
  }
  if (ending) {
    writer_.Send(
        ErrorResult(op_id, grpc::Status(grpc::StatusCode::CANCELLED, "the session is ending")));
    return false;
  }
  writer_.Send(ErrorResult(op_id, grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                               absl::StrCat("too many operations in flight on "
                                                            "this session (at most ",
                                                            kMaxSessionOps, ")"))));
  return false;
}

void SessionReactor::HandleAcquire(SessionHolds* holds, v1::SessionAcquire& a) {
  const SessionParams& session = holds->params();
  const uint64_t op_id = a.op_id();
  if (InFlight(op_id)) return;
  v1::AcquireRequest& req = *a.mutable_request();
  if (!CheckOwnerAndNamespace(session, op_id, req.mutable_owner(), req.mutable_namespace_())) {
    return;
  }
  SetProtoDuration(session.ttl, req.mutable_lease_ttl());
  // The request is the reader's to give up: its strings move into params.
  absl::StatusOr<AcquireParams> params = ToAcquireParams(std::move(req), hub_->lease_);
  if (!Admit(session, op_id, params)) return;
  auto cancel = std::make_shared<CancelSignal>();
  if (!StartOp(op_id, cancel)) return;
  AcquireCall::Start(backend_, *std::move(params), cancel,
                     [ref = NewRef(), holds, op_id, sent = absl::Now()](
                         const AcquireCall& call, absl::StatusOr<AcquireResult> r) {
                       ref->OnAcquired(holds, op_id, call, sent, r);
                     });
}

void SessionReactor::OnAcquired(SessionHolds* holds, uint64_t op_id, const AcquireCall& call,
                                absl::Time sent, const absl::StatusOr<AcquireResult>& r) {
  const absl::Duration ttl = holds->params().ttl;
  AcquireCall::Delivery delivery = AcquireCall::Delivery::kDeliver;
  {
    absl::MutexLock l(&mu_);
    auto it = ops_.find(op_id);
    bool cancelled = it != ops_.end() && it->second != nullptr && it->second->cancelled();
    if (it != ops_.end()) ops_.erase(it);
    ++queuing_results_;
    if (cancelled || phase_ >= Phase::kEnding) {
      delivery = AcquireCall::Delivery::kCancelled;
    } else if (r.ok() && r->acquired) {
      // The lease runs from the grant, however long the acquire waited:
      // from the backend's lower bound of that moment, else from the call.
      // Under mu_, so that BeginEnd's Stop and the end's TakeAll see it.
      holds->Add(call.key(), r->fencing_token,
                 (r->lease_start != absl::InfinitePast() ? r->lease_start : sent) + ttl);
      holds->ScheduleRenewal(ttl / 3);
    }
  }
  v1::AcquireResponse answer;
  grpc::Status status = call.Answer(r, delivery, &answer);
  if (!status.ok()) {
    writer_.Send(ErrorResult(op_id, status));
  } else {
    v1::SessionResponse resp = OkResult(op_id);
    *resp.mutable_result()->mutable_acquire() = std::move(answer);
    writer_.Send(std::move(resp));
  }
  ResultQueued();
}

void SessionReactor::HandleAcquireAll(SessionHolds* holds, v1::SessionAcquireAll& a) {
  const SessionParams& session = holds->params();
  const uint64_t op_id = a.op_id();
  if (InFlight(op_id)) return;
  v1::AcquireAllRequest& req = *a.mutable_request();
  if (!CheckOwnerAndNamespace(session, op_id, req.mutable_owner(), nullptr)) return;
  for (v1::LockSpec& spec : *req.mutable_locks()) {
    if (spec.namespace_().empty()) spec.set_namespace_(session.ns);
  }
  SetProtoDuration(session.ttl, req.mutable_lease_ttl());
  absl::StatusOr<AcquireAllParams> params = ToAcquireAllParams(req, hub_->lease_);
  absl::Status admitted =
      params.ok() ? AuthorizeNamespaces(*params,
                                        [&](const LockKey& key) { return Authorize(session, key); })
                  : params.status();
  if (!admitted.ok()) {
    writer_.Send(ErrorResult(op_id, ToGrpcStatus(admitted)));
    return;
  }
  auto cancel = std::make_shared<CancelSignal>();
  if (!StartOp(op_id, cancel)) return;
  StartAcquireAll(
      backend_, *std::move(params), cancel,
      [ref = NewRef(), holds, op_id, sent = absl::Now()](const std::vector<AcquiredLock>& held) {
        return ref->DeliverAll(holds, op_id, sent, held);
      },
      [ref = NewRef(), op_id](grpc::Status status, v1::AcquireAllResponse resp,
                              std::vector<AcquiredLock>) {
        ref->OnAcquiredAll(op_id, status, std::move(resp));
      });
}

AcquireCall::Delivery SessionReactor::DeliverAll(SessionHolds* holds, uint64_t op_id,
                                                 absl::Time sent,
                                                 const std::vector<AcquiredLock>& held) {
  const absl::Duration ttl = holds->params().ttl;
  absl::MutexLock l(&mu_);
  auto it = ops_.find(op_id);
  if ((it != ops_.end() && it->second != nullptr && it->second->cancelled()) ||
      phase_ >= Phase::kEnding) {
    return AcquireCall::Delivery::kCancelled;
  }
  // As in OnAcquired: under mu_, so that the end of the stream sees them.
  for (const AcquiredLock& h : held) {
    const absl::Time start =
        h.grant.lease_start != absl::InfinitePast() ? h.grant.lease_start : sent;
    holds->Add(h.call.key(), h.grant.fencing_token, start + ttl);
  }
  holds->ScheduleRenewal(ttl / 3);
  return AcquireCall::Delivery::kDeliver;
}

void SessionReactor::OnAcquiredAll(uint64_t op_id, const grpc::Status& status,
                                   v1::AcquireAllResponse resp) {
  {
    absl::MutexLock l(&mu_);
    ops_.erase(op_id);
    ++queuing_results_;
  }
  if (!status.ok()) {
    writer_.Send(ErrorResult(op_id, status));
  } else {
    v1::SessionResponse out = OkResult(op_id);
    *out.mutable_result()->mutable_acquire_all() = std::move(resp);
    writer_.Send(std::move(out));
  }
  ResultQueued();
}

void SessionReactor::HandleRelease(SessionHolds* holds, v1::SessionRelease& rel) {
  const uint64_t op_id = rel.op_id();
  v1::ReleaseRequest& req = *rel.mutable_request();
  if (InFlight(op_id)) return;
  if (!CheckOwnerAndNamespace(holds->params(), op_id, req.mutable_owner(),
                              req.mutable_namespace_())) {
    return;
  }
  absl::StatusOr<ReleaseParams> params = ToReleaseParams(std::move(req));
  if (!Admit(holds->params(), op_id, params)) return;
  if (!StartOp(op_id, nullptr)) return;
  LockKey key = params->key;
  holds->Releasing(key);
  backend_->Release(*std::move(params), [ref = NewRef(), holds, op_id,
                                         key = std::move(key)](absl::StatusOr<ReleaseResult> r) {
    ref->OnReleased(holds, op_id, key, std::move(r));
  });
}

void SessionReactor::OnReleased(SessionHolds* holds, uint64_t op_id, const LockKey& key,
                                absl::StatusOr<ReleaseResult> r) {
  {
    absl::MutexLock l(&mu_);
    ops_.erase(op_id);
    ++queuing_results_;
    holds->Released(key, r);
  }
  if (!r.ok()) {
    writer_.Send(ErrorResult(op_id, BackendToGrpcStatus(r.status())));
  } else {
    v1::SessionResponse resp = OkResult(op_id);
    resp.mutable_result()->mutable_release()->set_released(r->released);
    resp.mutable_result()->mutable_release()->set_hold_count(r->hold_count);
    writer_.Send(std::move(resp));
  }
  ResultQueued();
}

void SessionReactor::ResultQueued() {
  {
    absl::MutexLock l(&mu_);
    --queuing_results_;
    // Only an ending stream waits for results (once it enters kEnding,
    // BeginEnd continues the end itself): one lock per op, not two.
    if (phase_ != Phase::kEnding) return;
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
bool SessionReactor::Admit(const SessionParams& session, uint64_t op_id,
                           const absl::StatusOr<Params>& params) {
  absl::Status s = params.ok() ? Authorize(session, params->key) : params.status();
  if (s.ok()) return true;
  writer_.Send(ErrorResult(op_id, ToGrpcStatus(s)));
  return false;
}

absl::Status SessionReactor::Authorize(const SessionParams& params, const LockKey& key) {
  const Authorizer* authz = hub_->authz_;
  if (authz == nullptr || !authz->enabled()) return absl::OkStatus();
  return authz->Authorize(*ctx_, Permission::kLock, key.ns, key.name, &params.owner, &authz_memo_)
      .status();
}

void SessionReactor::ForceReleased(const LockKey& key, const std::string& owner, uint64_t token) {
  SessionHolds* h = holds();
  if (h != nullptr && owner == h->params().owner) h->ForceReleased(key, token);
}

// --- Writing and ending ---------------------------------------------------

void SessionReactor::OnWriteDone(bool ok) {
  if (writer_.WriteDone(ok)) MaybeFinish();
}

void SessionReactor::OnCancel() {
  BeginEnd(End::kBroken, grpc::Status(grpc::StatusCode::CANCELLED, "session stream broken"));
}

void SessionReactor::BeginEnd(End why, grpc::Status status) {
  std::vector<std::shared_ptr<CancelSignal>> cancels;
  {
    absl::MutexLock l(&mu_);
    if (phase_ >= Phase::kEnding) return;
    phase_ = Phase::kEnding;
    end_ = why;
    final_status_ = std::move(status);
    if (holds_ != nullptr) holds_->Stop();
    for (auto& [op_id, cancel] : ops_) {
      if (cancel != nullptr) cancels.push_back(cancel);
    }
  }
  for (const std::shared_ptr<CancelSignal>& c : cancels) c->Cancel();
  ContinueEnd();
}

void SessionReactor::ContinueEnd() {
  std::vector<std::pair<LockKey, uint64_t>> release;  // key, token
  SessionHolds* holds;
  {
    absl::MutexLock l(&mu_);
    if (phase_ != Phase::kEnding || !ops_.empty() || queuing_results_ > 0 || resumes_left_ > 0) {
      return;
    }
    holds = holds_.get();
    if (holds != nullptr) {
      // kShutdown and kResumeFailed keep the holds for a session that
      // resumes them.
      const bool release_holds =
          end_ == End::kHalfClose || ((end_ == End::kBroken || end_ == End::kProtocolError) &&
                                      !holds->params().keep_on_disconnect);
      release = holds->TakeAll();
      if (!release_holds) release.clear();
    }
    releases_left_ = release.size();
    phase_ = release.empty() ? Phase::kFlushing : Phase::kReleasing;
  }
  if (release.empty()) {
    MaybeFinish();
    return;
  }
  for (auto& [key, token] : release) {
    holds->ReleaseToZero(std::move(key), token, [ref = NewRef()] { ref->HoldReleased(); });
  }
}

void SessionReactor::HoldReleased() {
  {
    absl::MutexLock l(&mu_);
    if (--releases_left_ == 0) phase_ = Phase::kFlushing;
  }
  MaybeFinish();
}

void SessionReactor::MaybeFinish() {
  grpc::Status status;
  {
    absl::MutexLock l(&mu_);
    if (phase_ != Phase::kFlushing || starting_ > 0 || !writer_.CloseIfIdle()) return;
    phase_ = Phase::kFinished;
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
