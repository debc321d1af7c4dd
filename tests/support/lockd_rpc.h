// Test support: one LockService call each, with a deadline, so that a call
// that hangs fails its test with DEADLINE_EXCEEDED instead of hanging it.
// Header-only; thread-safe as the stub is.

#ifndef LOCKD_TESTS_SUPPORT_LOCKD_RPC_H_
#define LOCKD_TESTS_SUPPORT_LOCKD_RPC_H_

#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "lockd/v1/lock.grpc.pb.h"
#include "protos/proto_duration.h"

namespace lockd::testing {

// Acquire `name` for `owner` with lease `ttl`, waiting up to `wait` (zero:
// no wait).
inline grpc::Status AcquireRpc(v1::LockService::Stub& stub, const std::string& name,
                               const std::string& owner, absl::Duration ttl, absl::Duration wait,
                               absl::Duration deadline, v1::AcquireResponse* resp) {
  v1::AcquireRequest req;
  req.set_name(name);
  req.set_owner(owner);
  *req.mutable_lease_ttl() = ToProtoDuration(ttl);
  if (wait > absl::ZeroDuration()) *req.mutable_wait_timeout() = ToProtoDuration(wait);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  return stub.Acquire(&ctx, req, resp);
}

inline grpc::Status ReleaseRpc(v1::LockService::Stub& stub, const std::string& name,
                               const std::string& owner, v1::ReleaseResponse* resp,
                               absl::Duration deadline = absl::Seconds(10)) {
  v1::ReleaseRequest req;
  req.set_name(name);
  req.set_owner(owner);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  return stub.Release(&ctx, req, resp);
}

inline grpc::Status RenewRpc(v1::LockService::Stub& stub, const std::string& name,
                             const std::string& owner, absl::Duration ttl,
                             absl::Duration deadline = absl::Seconds(10)) {
  v1::RenewRequest req;
  req.set_name(name);
  req.set_owner(owner);
  *req.mutable_lease_ttl() = ToProtoDuration(ttl);
  v1::RenewResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  return stub.Renew(&ctx, req, &resp);
}

inline grpc::Status DescribeRpc(v1::LockService::Stub& stub, const std::string& name,
                                v1::LockInfo* info, absl::Duration deadline = absl::Seconds(10)) {
  v1::DescribeRequest req;
  req.set_name(name);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  return stub.Describe(&ctx, req, info);
}

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_SUPPORT_LOCKD_RPC_H_
