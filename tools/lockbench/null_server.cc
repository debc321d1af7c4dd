// lockbench_null_server: a lockd.v1.LockService that does no lock work at all
// (every Acquire is granted at once, every Release succeeds), served with the
// same gRPC callback API, build and process settings as lockd. Running
// `lockbench uncontended` against it measures the floor that gRPC alone puts
// under lockd on this machine; bench/run.sh reports it as "grpc-floor".
// Never use it for anything else: it grants every lock to everyone.
//
// Usage: lockbench_null_server HOST:PORT   (logs "lockd serving on ..." when up)

#include <signal.h>

#include <iostream>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "lockd/v1/lock.grpc.pb.h"

namespace {

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
