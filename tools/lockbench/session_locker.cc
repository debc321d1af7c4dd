// The blocking Locker over a Session stream (session.h): Write, then Read.

#include <utility>

#include "grpcpp/client_context.h"
#include "tools/lockbench/session.h"

namespace lockd::bench {
namespace {

class SessionLocker final : public Locker {
 public:
  explicit SessionLocker(std::shared_ptr<grpc::Channel> channel)
      : channel_(std::move(channel)), stub_(v1::LockService::NewStub(channel_)) {}

  absl::Status Open(const std::string& ns, const std::string& owner, absl::Duration lease) {
    stream_ = stub_->Session(&ctx_);
    v1::SessionRequest open;
    SetOpen(ns, owner, lease, &open);
    v1::SessionResponse resp;
    if (!stream_->Write(open) || !stream_->Read(&resp)) return Ended();
    return CheckOpened(resp);
  }

  ~SessionLocker() override {
    if (finished_) return;
    ctx_.TryCancel();
    (void)Finish();
  }

  absl::StatusOr<AcquireOutcome> Acquire(const std::string& name, const std::string& /*owner*/,
                                         absl::Duration /*lease*/, absl::Duration wait) override {
    req_.Clear();
    SetAcquire(++op_id_, name, wait, &req_);
    return RoundTrip(true);
  }

  absl::Status Release(const std::string& name, const std::string& /*owner*/) override {
    req_.Clear();
    SetRelease(++op_id_, name, &req_);
    return RoundTrip(false).status();
  }

  absl::Status Close() override {
    if (finished_) return absl::OkStatus();
    stream_->WritesDone();
    v1::SessionResponse resp;
    while (stream_->Read(&resp)) {
    }
    return Finish();
  }

 private:
  absl::StatusOr<AcquireOutcome> RoundTrip(bool acquire) {
    if (finished_) return absl::FailedPreconditionError("Session: the stream has ended");
    v1::SessionResponse resp;
    if (!stream_->Write(req_) || !stream_->Read(&resp)) return Ended();
    return ResultOf(resp, op_id_, acquire);
  }

  // The stream ended early: its status, never OK.
  absl::Status Ended() {
    absl::Status s = Finish();
    return s.ok() ? absl::UnavailableError("Session: the server ended the stream early") : s;
  }

  absl::Status Finish() {
    finished_ = true;
    return StreamStatus(stream_->Finish());
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::LockService::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::SessionRequest, v1::SessionResponse>> stream_;
  v1::SessionRequest req_;  // reused between ops
  uint64_t op_id_ = 0;
  bool finished_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Locker>> NewSessionLocker(std::shared_ptr<grpc::Channel> channel,
                                                         const std::string& ns,
                                                         const std::string& owner,
                                                         absl::Duration lease) {
  auto locker = std::make_unique<SessionLocker>(std::move(channel));
  if (absl::Status s = locker->Open(ns, owner, lease); !s.ok()) return s;
  return locker;
}

}  // namespace lockd::bench
