#include <utility>

#include "absl/strings/str_cat.h"
#include "grpc/grpc.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "protos/proto_duration.h"
#include "tools/lockbench/locker.h"

namespace lockd::bench {
namespace {

absl::Status FromGrpc(const char* what, const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(what, ": ", s.error_message()));
}

// Slack on top of the wait so that a late answer from a loaded server is
// still an answer, not a DEADLINE_EXCEEDED.
constexpr absl::Duration kRpcSlack = absl::Seconds(30);

class GrpcLocker final : public Locker {
 public:
  GrpcLocker(std::shared_ptr<grpc::Channel> channel, std::string ns)
      : channel_(std::move(channel)), stub_(v1::LockService::NewStub(channel_)) {
    acquire_.set_namespace_(ns);
    release_.set_namespace_(ns);
  }

  absl::StatusOr<AcquireOutcome> Acquire(const std::string& name, const std::string& owner,
                                         absl::Duration lease, absl::Duration wait) override {
    acquire_.set_name(name);
    acquire_.set_owner(owner);
    SetProtoDuration(lease, acquire_.mutable_lease_ttl());
    if (wait > absl::ZeroDuration()) {
      SetProtoDuration(wait, acquire_.mutable_wait_timeout());
    } else {
      acquire_.clear_wait_timeout();
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + wait + kRpcSlack));
    v1::AcquireResponse resp;
    grpc::Status s = stub_->Acquire(&ctx, acquire_, &resp);
    if (!s.ok()) return FromGrpc("Acquire", s);
    return AcquireOutcome{resp.acquired(), resp.fencing_token()};
  }

  absl::Status Release(const std::string& name, const std::string& owner) override {
    release_.set_name(name);
    release_.set_owner(owner);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + kRpcSlack));
    v1::ReleaseResponse resp;
    grpc::Status s = stub_->Release(&ctx, release_, &resp);
    if (!s.ok()) return FromGrpc("Release", s);
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::LockService::Stub> stub_;
  // Reused between calls: only name/owner/durations change.
  v1::AcquireRequest acquire_;
  v1::ReleaseRequest release_;
};

class LocalCounter final : public Counter {
 public:
  explicit LocalCounter(std::atomic<int64_t>* cell) : cell_(cell) {}
  absl::StatusOr<int64_t> Get() override { return cell_->load(std::memory_order_relaxed); }
  absl::Status Set(int64_t v) override {
    cell_->store(v, std::memory_order_relaxed);
    return absl::OkStatus();
  }

 private:
  std::atomic<int64_t>* const cell_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> NewDedicatedChannel(const std::string& target,
                                                                   absl::Duration timeout) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // lockbench never retries a call; without the retry machinery gRPC's
  // client does less work per call, and the client's CPU on a shared
  // machine is taken from the server being measured.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + timeout))) {
    return absl::UnavailableError(absl::StrCat("cannot connect to lockd at ", target));
  }
  return channel;
}

std::unique_ptr<Locker> NewGrpcLocker(std::shared_ptr<grpc::Channel> channel, std::string ns) {
  return std::make_unique<GrpcLocker>(std::move(channel), std::move(ns));
}

absl::StatusOr<std::string> BackendName(grpc::Channel* channel, const std::string& ns) {
  std::unique_ptr<v1::LockService::Stub> stub = v1::LockService::NewStub(
      std::shared_ptr<grpc::ChannelInterface>(channel, [](grpc::ChannelInterface*) {}));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  v1::DescribeRequest req;
  req.set_namespace_(ns);
  req.set_name("lockbench-probe");
  v1::LockInfo info;
  grpc::Status s = stub->Describe(&ctx, req, &info);
  if (!s.ok()) return FromGrpc("Describe", s);
  return info.backend();
}

std::unique_ptr<Counter> NewLocalCounter(std::atomic<int64_t>* cell) {
  return std::make_unique<LocalCounter>(cell);
}

}  // namespace lockd::bench
