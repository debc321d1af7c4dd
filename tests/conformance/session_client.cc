#include "tests/conformance/session_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "protos/proto_duration.h"

namespace lockd::testing {

SessionClient::SessionClient(v1::LockService::Stub* stub, absl::Duration deadline) {
  ctx_.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  stream_ = stub->Session(&ctx_);
  reader_ = std::thread([this] { ReadLoop(); });
}

SessionClient::~SessionClient() {
  if (!Ended()) ctx_.TryCancel();
  reader_.join();
}

void SessionClient::ReadLoop() {
  v1::SessionResponse resp;
  while (stream_->Read(&resp)) {
    absl::MutexLock l(&mu_);
    if (responses_ == 0) opened_first_ = resp.has_opened();
    File(resp);
  }
  // Finish is serialised with writes: the sync API allows one reader and
  // one writer at a time, and no write may follow it.
  grpc::Status status;
  {
    absl::MutexLock w(&write_mu_);
    status = stream_->Finish();
    writes_done_ = true;
  }
  absl::MutexLock l(&mu_);
  final_ = status;
  ended_ = true;
}

void SessionClient::File(const v1::SessionResponse& resp) {
  ++responses_;
  switch (resp.kind_case()) {
    case v1::SessionResponse::kOpened:
      opened_ = resp.opened();
      break;
    case v1::SessionResponse::kResult:
      results_.emplace(resp.result().op_id(), resp.result());
      ++result_count_;
      break;
    case v1::SessionResponse::kLost:
      lost_.push_back(resp.lost());
      ++lost_count_;
      break;
    case v1::SessionResponse::kBatch:
      ++response_batches_;
      for (const v1::SessionResponse& item : resp.batch().items()) File(item);
      break;
    default:
      break;
  }
}

bool SessionClient::Send(const v1::SessionRequest& req) {
  absl::MutexLock w(&write_mu_);
  if (writes_done_) return false;
  return stream_->Write(req);
}

bool SessionClient::SendOpen(const Opening& o) {
  v1::SessionRequest req;
  v1::SessionOpen* open = req.mutable_open();
  open->set_namespace_(o.ns);
  open->set_owner(o.owner);
  if (o.lease != absl::ZeroDuration()) *open->mutable_lease_ttl() = ToProtoDuration(o.lease);
  open->set_keep_on_disconnect(o.keep_on_disconnect);
  for (const v1::LockRef& ref : o.resume) *open->add_resume() = ref;
  return Send(req);
}

std::optional<v1::SessionOpened> SessionClient::Open(const Opening& o, absl::Duration timeout) {
  if (!SendOpen(o)) return std::nullopt;
  return WaitOpened(timeout);
}

v1::SessionRequest AcquireOp(uint64_t op_id, const std::string& name, absl::Duration wait,
                             const std::string& owner, const std::string& ns) {
  v1::SessionRequest req;
  req.mutable_acquire()->set_op_id(op_id);
  v1::AcquireRequest* a = req.mutable_acquire()->mutable_request();
  a->set_namespace_(ns);
  a->set_name(name);
  a->set_owner(owner);
  if (wait != absl::ZeroDuration()) *a->mutable_wait_timeout() = ToProtoDuration(wait);
  return req;
}

v1::SessionRequest ReleaseOp(uint64_t op_id, const std::string& name, const std::string& owner,
                             const std::string& ns) {
  v1::SessionRequest req;
  req.mutable_release()->set_op_id(op_id);
  v1::ReleaseRequest* r = req.mutable_release()->mutable_request();
  r->set_namespace_(ns);
  r->set_name(name);
  r->set_owner(owner);
  return req;
}

v1::SessionRequest CancelOp(uint64_t op_id) {
  v1::SessionRequest req;
  req.mutable_cancel()->set_op_id(op_id);
  return req;
}

v1::SessionRequest Batch(std::vector<v1::SessionRequest> ops) {
  v1::SessionRequest req;
  for (v1::SessionRequest& op : ops) *req.mutable_batch()->add_ops() = std::move(op);
  return req;
}

bool SessionClient::Acquire(uint64_t op_id, const std::string& name, absl::Duration wait,
                            const std::string& owner, const std::string& ns) {
  return Send(AcquireOp(op_id, name, wait, owner, ns));
}

bool SessionClient::Release(uint64_t op_id, const std::string& name, const std::string& owner,
                            const std::string& ns) {
  return Send(ReleaseOp(op_id, name, owner, ns));
}

bool SessionClient::Cancel(uint64_t op_id) { return Send(CancelOp(op_id)); }

std::optional<v1::SessionOpened> SessionClient::WaitOpened(absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return opened_.has_value() || ended_; };
  mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  return opened_;
}

bool SessionClient::OpenedCameFirst() {
  absl::MutexLock l(&mu_);
  return opened_first_;
}

std::optional<v1::SessionResult> SessionClient::WaitResult(uint64_t op_id, absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return results_.count(op_id) > 0 || ended_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  auto it = results_.lower_bound(op_id);  // the first of that op_id to arrive
  if (it == results_.end() || it->first != op_id) return std::nullopt;
  v1::SessionResult result = std::move(it->second);
  results_.erase(it);
  return result;
}

bool SessionClient::HasResult(uint64_t op_id) {
  absl::MutexLock l(&mu_);
  return results_.count(op_id) > 0;
}

std::optional<v1::LockLost> SessionClient::WaitLost(absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !lost_.empty() || ended_; };
  mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  if (lost_.empty()) return std::nullopt;
  v1::LockLost lost = std::move(lost_.front());
  lost_.pop_front();
  return lost;
}

int SessionClient::LostCount() {
  absl::MutexLock l(&mu_);
  return lost_count_;
}

int SessionClient::ResultCount() {
  absl::MutexLock l(&mu_);
  return result_count_;
}

int SessionClient::ResponseBatches() {
  absl::MutexLock l(&mu_);
  return response_batches_;
}

bool SessionClient::Ended() {
  absl::MutexLock l(&mu_);
  return ended_;
}

grpc::Status SessionClient::WaitEnd(absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  if (!mu_.AwaitWithTimeout(absl::Condition(&ended_), timeout)) {
    return grpc::Status(
        grpc::StatusCode::DEADLINE_EXCEEDED,
        absl::StrCat("test client: the stream did not end within ", absl::FormatDuration(timeout)));
  }
  return *final_;
}

grpc::Status SessionClient::HalfCloseAndFinish(absl::Duration timeout) {
  {
    absl::MutexLock w(&write_mu_);
    if (!writes_done_) {
      writes_done_ = true;
      stream_->WritesDone();
    }
  }
  return WaitEnd(timeout);
}

void SessionClient::Break() { ctx_.TryCancel(); }

}  // namespace lockd::testing
