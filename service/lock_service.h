// The gRPC glue of lockd.v1.LockService: validate, call the backend, map the
// status. Uses the callback API: no RPC holds a thread while the backend
// works or while an Acquire waits.
//
// Thread-safe: the service's only state of its own is the SessionHub (which
// is thread-safe); the backend is thread-safe.

#ifndef LOCKD_SERVICE_LOCK_SERVICE_H_
#define LOCKD_SERVICE_LOCK_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "backends/backend.h"
#include "lockd/v1/lock.grpc.pb.h"
#include "service/auth.h"
#include "service/config.h"
#include "service/session.h"

namespace lockd {

class LockServiceImpl final : public v1::LockService::CallbackService {
 public:
  // `backend` (and `authz`, if not null) must outlive the service and every
  // call it serves. With a null `authz` every caller may do everything.
  LockServiceImpl(Backend* backend, LeaseBounds lease, const Authorizer* authz = nullptr);

  grpc::ServerUnaryReactor* Acquire(grpc::CallbackServerContext* ctx, const v1::AcquireRequest* req,
                                    v1::AcquireResponse* resp) override;
  grpc::ServerUnaryReactor* Release(grpc::CallbackServerContext* ctx, const v1::ReleaseRequest* req,
                                    v1::ReleaseResponse* resp) override;
  grpc::ServerUnaryReactor* Renew(grpc::CallbackServerContext* ctx, const v1::RenewRequest* req,
                                  v1::RenewResponse* resp) override;
  grpc::ServerUnaryReactor* Describe(grpc::CallbackServerContext* ctx,
                                     const v1::DescribeRequest* req, v1::LockInfo* resp) override;
  grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* ctx, const v1::ListRequest* req,
                                 v1::ListResponse* resp) override;
  grpc::ServerUnaryReactor* ForceRelease(grpc::CallbackServerContext* ctx,
                                         const v1::ForceReleaseRequest* req,
                                         v1::ForceReleaseResponse* resp) override;
  grpc::ServerUnaryReactor* AcquireAll(grpc::CallbackServerContext* ctx,
                                       const v1::AcquireAllRequest* req,
                                       v1::AcquireAllResponse* resp) override;
  grpc::ServerBidiReactor<v1::SessionRequest, v1::SessionResponse>* Session(
      grpc::CallbackServerContext* ctx) override;

  // Server shutdown: ends every Session stream with UNAVAILABLE, leaving
  // their holds to their lease (service/session.h).
  void EndSessions() { sessions_.EndAll(); }
  // Session streams open now.
  size_t sessions() const { return sessions_.size(); }

  // Calls of this service that have started and not yet ended (their
  // reply sent or their call cancelled). Thread-safe.
  int64_t in_flight() const { return in_flight_.load(std::memory_order_acquire); }

 private:
  // OK, or the status to finish the call with (UNAUTHENTICATED or
  // PERMISSION_DENIED); fills `identity` when not null.
  absl::Status Authorize(grpc::CallbackServerContext* ctx, Permission permission,
                         const LockKey& key, const std::string* owner,
                         std::string* identity = nullptr) const;

  Backend* const backend_;
  const LeaseBounds lease_;
  std::atomic<int64_t> in_flight_{0};
  const Authorizer* const authz_;
  SessionHub sessions_;  // after in_flight_, which it counts in
};

}  // namespace lockd

#endif  // LOCKD_SERVICE_LOCK_SERVICE_H_
