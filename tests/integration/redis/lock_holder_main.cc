// A lock-holding client for the kill -9 test: acquires one lock through
// lockd, prints "acquired <token>" and then waits, holding it, until it is
// killed. It never renews and never releases.
//
// Usage: lockd_redis_test_holder ADDRESS NAME OWNER LEASE_MS

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "lockd/v1/lock.grpc.pb.h"
#include "protos/proto_duration.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s ADDRESS NAME OWNER LEASE_MS\n", argv[0]);
    return 2;
  }
  auto stub = lockd::v1::LockService::NewStub(
      grpc::CreateChannel(argv[1], grpc::InsecureChannelCredentials()));
  lockd::v1::AcquireRequest req;
  req.set_name(argv[2]);
  req.set_owner(argv[3]);
  *req.mutable_lease_ttl() = lockd::ToProtoDuration(absl::Milliseconds(std::atoll(argv[4])));
  *req.mutable_wait_timeout() = lockd::ToProtoDuration(absl::Seconds(10));
  lockd::v1::AcquireResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  grpc::Status s = stub->Acquire(&ctx, req, &resp);
  if (!s.ok() || !resp.acquired()) {
    std::fprintf(stderr, "not acquired: %s\n", s.error_message().c_str());
    return 1;
  }
  std::printf("acquired %llu\n", static_cast<unsigned long long>(resp.fencing_token()));
  std::fflush(stdout);
  while (true) ::pause();
}
