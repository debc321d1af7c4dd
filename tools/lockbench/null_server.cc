// lockbench_null_server: a lockd.v1.LockService that does no lock work at all
// (every Acquire is granted at once, every Release succeeds, and so does
// every acquire/release op of a Session stream), served with the same gRPC
// callback API, build and process settings as lockd. Running
// `lockbench uncontended [--api=session]` or `lockbench service` against it
// measures the floor that gRPC alone puts under lockd on this machine;
// bench/run.sh and bench/service.sh report it as "grpc-floor".
// Never use it for anything else: it grants every lock to everyone.
//
// Usage: lockbench_null_server HOST:PORT   (logs "lockd serving on ..." when up)

#include <signal.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "lockd/v1/lock.grpc.pb.h"

namespace {

using lockd::v1::SessionRequest;
using lockd::v1::SessionResponse;

// Fencing tokens, increasing across the process (as a real lock's are per
// name), so that checks a benchmark makes on them hold here too.
std::atomic<uint64_t> next_token{1};

// A Session that answers `open` with `opened` and every acquire/release at
// once with an OK result; ends with OK after the client half-closes. The ops
// of a `batch` are answered one by one, as if each had come alone. Writes
// follow lockd's rule (docs/api.md "Batches on a Session"): one write in
// flight; what becomes ready meanwhile goes out, when it completes, as one
// response `batch` to a client that has sent a batch (else one message
// each). Thread-safe: reactions may run concurrently on gRPC threads;
// state under mu_.
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
    std::vector<SessionResponse> out;
    if (req_.kind_case() == SessionRequest::kBatch) {
      for (const SessionRequest& op : req_.batch().ops()) Answer(op, &out);
      absl::MutexLock l(&mu_);
      client_batches_ = true;
    } else {
      Answer(req_, &out);
    }
    Send(std::move(out));
    StartRead(&req_);
  }

  void OnWriteDone(bool ok) override {
    bool write = false, finish = false;
    {
      absl::MutexLock l(&mu_);
      if (!ok) pending_.clear();  // the stream broke: the read fails too
      if (pending_.empty()) {
        writing_ = false;
        finish = reads_done_;
      } else {
        TakeNextWrite();
        write = true;
      }
    }
    if (write) StartWrite(&in_flight_);
    if (finish) Finish(grpc::Status::OK);
  }

  void OnDone() override { delete this; }

 private:
  static constexpr size_t kMaxBatchItems = 1000;  // as lockd

  // The response to `op`, if it has one, appended to *out. Called by the
  // read reactions only (one at a time).
  void Answer(const SessionRequest& op, std::vector<SessionResponse>* out) {
    SessionResponse resp;
    switch (op.kind_case()) {
      case SessionRequest::kOpen:
        owner_ = op.open().owner();
        lease_ = op.open().lease_ttl();
        resp.mutable_opened()->set_owner(owner_);
        *resp.mutable_opened()->mutable_lease_ttl() = lease_;
        break;
      case SessionRequest::kAcquire: {
        lockd::v1::SessionResult* r = resp.mutable_result();
        r->set_op_id(op.acquire().op_id());
        r->mutable_status();
        lockd::v1::AcquireResponse* a = r->mutable_acquire();
        a->set_acquired(true);
        a->set_owner(owner_);
        a->set_fencing_token(next_token.fetch_add(1));
        a->set_hold_count(1);
        *a->mutable_lease_ttl() = lease_;
        break;
      }
      case SessionRequest::kRelease: {
        lockd::v1::SessionResult* r = resp.mutable_result();
        r->set_op_id(op.release().op_id());
        r->mutable_status();
        r->mutable_release()->set_released(true);
        break;
      }
      default:  // cancel: nothing is ever waiting
        return;
    }
    out->push_back(std::move(resp));
  }

  void Send(std::vector<SessionResponse> responses) {
    {
      absl::MutexLock l(&mu_);
      for (SessionResponse& r : responses) pending_.push_back(std::move(r));
      if (writing_ || pending_.empty()) return;
      writing_ = true;
      TakeNextWrite();
    }
    StartWrite(&in_flight_);
  }

  // Moves what is pending into in_flight_: one response, or, to a client
  // that sends batches, up to kMaxBatchItems of them as one batch.
  void TakeNextWrite() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!client_batches_ || pending_.size() == 1 || pending_.front().has_opened()) {
      in_flight_ = std::move(pending_.front());
      pending_.pop_front();
      return;
    }
    in_flight_.Clear();
    lockd::v1::SessionResponseBatch* batch = in_flight_.mutable_batch();
    while (!pending_.empty() && batch->items_size() < static_cast<int>(kMaxBatchItems) &&
           !pending_.front().has_opened()) {
      *batch->add_items() = std::move(pending_.front());
      pending_.pop_front();
    }
  }

  // Read and written by the read reactions only (one at a time).
  SessionRequest req_;
  std::string owner_;
  google::protobuf::Duration lease_;
  absl::Mutex mu_;
  std::deque<SessionResponse> pending_ ABSL_GUARDED_BY(mu_);  // ready, not yet written
  // The message being written; set under mu_ before StartWrite and not
  // touched again until OnWriteDone.
  SessionResponse in_flight_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool client_batches_ ABSL_GUARDED_BY(mu_) = false;  // the client has sent a batch
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
};

class NullLockService final : public lockd::v1::LockService::CallbackService {
  grpc::ServerUnaryReactor* Acquire(grpc::CallbackServerContext* ctx,
                                    const lockd::v1::AcquireRequest* req,
                                    lockd::v1::AcquireResponse* resp) override {
    resp->set_acquired(true);
    resp->set_owner(req->owner());
    resp->set_fencing_token(next_token.fetch_add(1));
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
  // The clients' keepalive pings are welcome, as lockd (service/server.cc)
  // takes them: lockd::Client pings every 2 s.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 500);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
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
