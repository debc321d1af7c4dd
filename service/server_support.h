// ServerSupport: what a running lockd serves and checks beside the gRPC
// LockService (docs/operations/security.md): Prometheus metrics and their
// endpoint, the authorizer with its bearer-token file, the TLS credentials
// of the gRPC port, and the plaintext health port. LockdServer builds one
// and calls Tick() from its health watcher.
//
// Thread-safe: accessors return immutable objects; Tick() is called from one
// thread.

#ifndef LOCKD_SERVICE_SERVER_SUPPORT_H_
#define LOCKD_SERVICE_SERVER_SUPPORT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backends/backend.h"
#include "grpcpp/security/server_credentials.h"
#include "service/auth.h"
#include "service/config.h"
#include "service/health_server.h"
#include "service/metrics.h"
#include "service/metrics_backend.h"

namespace lockd {

class ServerSupport {
 public:
  // With metrics.listen set, replaces *backend by a MetricsBackend wrapping
  // it and serves /metrics; reads auth.tokens_file; checks the TLS files;
  // with health.listen set, starts the health port. Errors: kInvalidArgument
  // for unusable files (naming the option), kUnavailable when a port cannot
  // be bound. It must outlive *backend.
  static absl::StatusOr<std::unique_ptr<ServerSupport>> Start(const Config& config,
                                                              std::unique_ptr<Backend>* backend);
  ~ServerSupport();

  const Authorizer* authorizer() const { return authz_.get(); }
  const std::shared_ptr<grpc::ServerCredentials>& credentials() const { return creds_; }
  int metrics_port() const { return endpoint_ ? endpoint_->port() : 0; }
  int health_port() const { return health_ ? health_->port() : 0; }
  Metrics* metrics() const { return metrics_.get(); }

  // Publishes whether the backend is reachable (readiness on the health
  // port, lockd_backend_up; liveness does not depend on it), ends
  // tracked holds whose lease ran out, and at their intervals re-reads the
  // tokens file and the certificate's expiry.
  void Tick(bool backend_up);

  // Stops the health port (first thing at shutdown, so probes fail:
  // liveness and readiness both).
  void StopHealth();

 private:
  ServerSupport() = default;

  std::string cert_file_;
  absl::Duration tls_interval_;
  absl::Duration auth_interval_;
  absl::Time next_cert_check_ = absl::InfinitePast();
  absl::Time next_token_check_ = absl::InfinitePast();
  std::unique_ptr<Metrics> metrics_;
  MetricsBackend* metrics_backend_ = nullptr;  // owned by the server, through *backend
  std::unique_ptr<MetricsEndpoint> endpoint_;
  std::unique_ptr<Authorizer> authz_;
  std::shared_ptr<grpc::ServerCredentials> creds_;
  std::unique_ptr<HealthServer> health_;
};

}  // namespace lockd

#endif  // LOCKD_SERVICE_SERVER_SUPPORT_H_
