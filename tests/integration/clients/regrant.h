// Test helper: ends an owner's hold and grants the lock to the same owner
// again, behind the back of the client that holds it, through raw stubs (no
// client library logic). The client's Lease then names an older hold (token
// T1) while the owner holds the lock with a new token T2: what a Release or
// Renew of T1 delayed past the owner's release and re-acquire finds.

#ifndef LOCKD_TESTS_INTEGRATION_CLIENTS_REGRANT_H_
#define LOCKD_TESTS_INTEGRATION_CLIENTS_REGRANT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "grpcpp/create_channel.h"
#include "lockd/v1/lock.grpc.pb.h"

namespace lockd::testing {

// On the lockd at `address` (plaintext), in namespace "default": releases
// one hold of `owner` on `name` (a Release without a fencing token, so it
// takes whatever hold the owner has) and acquires `name` for `owner` again
// with lease `ttl` (whole seconds), without waiting. Returns the new hold's fencing token.
// REQUIRES: `owner` holds `name` once.
inline absl::StatusOr<uint64_t> RegrantBehindTheClientsBack(const std::string& address,
                                                            const std::string& name,
                                                            const std::string& owner,
                                                            absl::Duration ttl) {
  std::unique_ptr<v1::LockService::Stub> stub =
      v1::LockService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  auto deadline = [] { return std::chrono::system_clock::now() + std::chrono::seconds(5); };
  v1::ReleaseRequest rel;
  rel.set_name(name);
  rel.set_owner(owner);
  rel.set_request_id(absl::StrCat("regrant-release-", absl::ToUnixNanos(absl::Now())));
  v1::ReleaseResponse rel_resp;
  grpc::ClientContext rel_ctx;
  rel_ctx.set_deadline(deadline());
  grpc::Status s = stub->Release(&rel_ctx, rel, &rel_resp);
  if (!s.ok()) return absl::InternalError(absl::StrCat("release: ", s.error_message()));
  if (!rel_resp.released()) return absl::InternalError("release left holds of the owner");
  v1::AcquireRequest acq;
  acq.set_name(name);
  acq.set_owner(owner);
  acq.set_request_id(absl::StrCat("regrant-acquire-", absl::ToUnixNanos(absl::Now())));
  acq.mutable_lease_ttl()->set_seconds(absl::ToInt64Seconds(ttl));
  v1::AcquireResponse acq_resp;
  grpc::ClientContext acq_ctx;
  acq_ctx.set_deadline(deadline());
  s = stub->Acquire(&acq_ctx, acq, &acq_resp);
  if (!s.ok()) return absl::InternalError(absl::StrCat("acquire: ", s.error_message()));
  if (!acq_resp.acquired()) return absl::InternalError("acquire: not acquired");
  return acq_resp.fencing_token();
}

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_INTEGRATION_CLIENTS_REGRANT_H_
