// lockbench_null_server: a lockd.v1.LockService that does no lock work at all
// (every Acquire is granted at once, every Release succeeds, and so does
// every acquire/release op of a Session stream), served with the same gRPC
// callback API, build and process settings as lockd. Running
// `lockbench uncontended [--api=session]` against it measures the floor that
// gRPC alone puts under lockd on this machine; bench/run.sh reports it as
// "grpc-floor".
// Never use it for anything else: it grants every lock to everyone.
//
// Usage: lockbench_null_server HOST:PORT   (logs "lockd serving on ..." when up)

#include <signal.h>

#include <deque>
#include <iostream>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "lockd/v1/lock.grpc.pb.h"

namespace {

using lockd::v1::SessionRequest;
using lockd::v1::SessionResponse;

// A Session that answers `open` with `opened` and every acquire/release at
// once with an OK result; ends with OK after the client half-closes. One
// write outstanding at a time from a queue. Thread-safe: reactions may run
// concurrently on gRPC threads; state under mu_.
class NullSession final : public grpc::ServerBidiReactor<SessionRequest, SessionResponse> {
 public:
  NullSession() { StartRead(&req_); }

  void OnReadDone(bool ok) override {
    if (!ok) {  // half-close, or the stream broke
      bool finish = false;
      {
        absl::MutexLock l(&mu_);
        reads_done_ = true;
        finish = !writing_;
      }
      if (finish) Finish(grpc::Status::OK);
      return;
    }
    SessionResponse resp;
    switch (req_.kind_case()) {
      case SessionRequest::kOpen:
        owner_ = req_.open().owner();
        lease_ = req_.open().lease_ttl();
        resp.mutable_opened()->set_owner(owner_);
        *resp.mutable_opened()->mutable_lease_ttl() = lease_;
        break;
      case SessionRequest::kAcquire: {
        lockd::v1::SessionResult* r = resp.mutable_result();
        r->set_op_id(req_.acquire().op_id());
        r->mutable_status();
        lockd::v1::AcquireResponse* a = r->mutable_acquire();
        a->set_acquired(true);
        a->set_owner(owner_);
        a->set_fencing_token(1);
        a->set_hold_count(1);
        *a->mutable_lease_ttl() = lease_;
        break;
      }
      case SessionRequest::kRelease: {
        lockd::v1::SessionResult* r = resp.mutable_result();
        r->set_op_id(req_.release().op_id());
        r->mutable_status();
        r->mutable_release()->set_released(true);
        break;
      }
      default:  // cancel: nothing is ever waiting
        StartRead(&req_);
        return;
    }
    Send(std::move(resp));
    StartRead(&req_);
  }

  void OnWriteDone(bool ok) override {
    const SessionResponse* next = nullptr;
    bool finish = false;
    {
      absl::MutexLock l(&mu_);
      queue_.pop_front();
      if (!ok) queue_.clear();  // the stream broke: the read fails too
      if (!queue_.empty()) {
        next = &queue_.front();
      } else {
        writing_ = false;
        finish = reads_done_;
      }
    }
    if (next != nullptr) StartWrite(next);
    if (finish) Finish(grpc::Status::OK);
  }

  void OnDone() override { delete this; }

 private:
  void Send(SessionResponse resp) {
    const SessionResponse* next = nullptr;
    {
      absl::MutexLock l(&mu_);
      queue_.push_back(std::move(resp));
      if (writing_) return;
      writing_ = true;
      next = &queue_.front();
    }
    StartWrite(next);
  }

  // Read and written by the read reactions only (one at a time).
  SessionRequest req_;
  std::string owner_;
  google::protobuf::Duration lease_;
  absl::Mutex mu_;
  std::deque<SessionResponse> queue_ ABSL_GUARDED_BY(mu_);  // front: being written
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
};

class NullLockService final : public lockd::v1::LockService::CallbackService {
  grpc::ServerUnaryReactor* Acquire(grpc::CallbackServerContext* ctx,
                                    const lockd::v1::AcquireRequest* req,
                                    lockd::v1::AcquireResponse* resp) override {
    resp->set_acquired(true);
    resp->set_owner(req->owner());
    resp->set_fencing_token(1);
    resp->set_hold_count(1);
    *resp->mutable_lease_ttl() = req->lease_ttl();
    return Done(ctx);
  }
  grpc::ServerUnaryReactor* Release(grpc::CallbackServerContext* ctx,
                                    const lockd::v1::ReleaseRequest* req,
                                    lockd::v1::ReleaseResponse* resp) override {
    resp->set_released(true);
    return Done(ctx);
  }
  grpc::ServerBidiReactor<SessionRequest, SessionResponse>* Session(
      grpc::CallbackServerContext* /*ctx*/) override {
    return new NullSession();
  }
  grpc::ServerUnaryReactor* Describe(grpc::CallbackServerContext* ctx,
                                     const lockd::v1::DescribeRequest* req,
                                     lockd::v1::LockInfo* resp) override {
    resp->set_namespace_(req->namespace_());
    resp->set_name(req->name());
    resp->set_backend("grpc-floor");
    return Done(ctx);
  }

  static grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx) {
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: lockbench_null_server HOST:PORT\n";
    return 2;
  }
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);  // as lockd does
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  NullLockService service;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(argv[1], grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    std::cerr << "cannot listen on " << argv[1] << "\n";
    return 1;
  }
  std::cerr << "lockd serving on " << argv[1] << " backend=grpc-floor" << std::endl;
  int sig = 0;
  sigwait(&signals, &sig);
  server->Shutdown();
  return 0;
}
