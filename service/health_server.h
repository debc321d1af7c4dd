// The plaintext health port (`health.listen`): a gRPC server that serves
// only grpc.health.v1.Health/Check (no LockService, no reflection), for
// kubelet gRPC probes, which cannot present client certificates. It reports
// what the main port's health service reports: the whole server ("",
// liveness) SERVING until Shutdown(), lockd.v1.LockService (readiness)
// SERVING while the backend is reachable. Watch is not served
// (UNIMPLEMENTED).
//
// Thread-safe.

#ifndef LOCKD_SERVICE_HEALTH_SERVER_H_
#define LOCKD_SERVICE_HEALTH_SERVER_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/server.h"

namespace lockd {

class HealthServer {
 public:
  // Serves on `listen` (port 0: a free port). "" answers SERVING,
  // lockd.v1.LockService NOT_SERVING until SetBackendUp(true); any other
  // service name answers NOT_FOUND, as gRPC's own service does.
  // kUnavailable if it cannot listen.
  static absl::StatusOr<std::unique_ptr<HealthServer>> Start(const std::string& listen);
  ~HealthServer();  // Shutdown(now)

  // Readiness: lockd.v1.LockService is SERVING while `up`.
  void SetBackendUp(bool up) { backend_up_.store(up); }
  int port() const { return port_; }
  // Both statuses turn NOT_SERVING, then the port closes.
  void Shutdown();

 private:
  class Service;
  HealthServer() = default;
  std::atomic<bool> live_{true};
  std::atomic<bool> backend_up_{false};
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace lockd

#endif  // LOCKD_SERVICE_HEALTH_SERVER_H_
