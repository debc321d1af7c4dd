// A running lockd: the gRPC server with LockService, grpc.health.v1.Health
// and server reflection, over one backend. Used by main() and by tests that
// run lockd in-process.
//
// Thread-safe: Shutdown() may be called from any thread, more than once.

#ifndef LOCKD_SERVICE_SERVER_H_
#define LOCKD_SERVICE_SERVER_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "backends/backend.h"
#include "grpcpp/server.h"
#include "service/config.h"
#include "service/lock_service.h"

namespace lockd {

class ServerSupport;

class LockdServer {
 public:
  // Starts serving `config.listen` (port 0 picks a free port), with TLS,
  // authorization, metrics and the health port as `config` says (see
  // service/server_support.h). grpc.health.v1.Health: the whole server ("",
  // liveness) is SERVING until Shutdown(), whatever the backend does;
  // lockd.v1.LockService (readiness) is SERVING while backend->Health() is
  // OK, checked every `health_interval`. Both are NOT_SERVING from Shutdown().
  static absl::StatusOr<std::unique_ptr<LockdServer>> Start(
      const Config& config, std::unique_ptr<Backend> backend,
      absl::Duration health_interval = absl::Milliseconds(250));

  ~LockdServer();  // Shutdown()

  // The address actually bound, e.g. "127.0.0.1:7411".
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  Backend* backend() const { return backend_.get(); }
  // Ports of the /metrics endpoint and of the health port (0: not serving).
  int metrics_port() const;
  int health_port() const;

  // Stops accepting calls, answers parked Acquires with UNAVAILABLE (through
  // Backend::Shutdown), gives in-flight calls up to `grace`, then returns:
  // as soon as no LockService call is in flight, even while idle client
  // connections stay open.
  void Shutdown(absl::Duration grace = absl::Seconds(5));

 private:
  LockdServer() = default;
  void WatchHealth(absl::Duration interval);

  std::unique_ptr<ServerSupport> support_;  // outlives backend_ (a MetricsBackend uses it)
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<LockServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  int port_ = 0;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::thread health_thread_;
};

}  // namespace lockd

#endif  // LOCKD_SERVICE_SERVER_H_
