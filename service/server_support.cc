#include "service/server_support.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "service/tls.h"
#include "util/log.h"

namespace lockd {

absl::StatusOr<std::unique_ptr<ServerSupport>> ServerSupport::Start(
    const Config& config, std::unique_ptr<Backend>* backend) {
  std::unique_ptr<ServerSupport> ops(new ServerSupport());
  ops->cert_file_ = config.tls.cert_file;
  ops->tls_interval_ = config.tls.reload_interval;
  ops->auth_interval_ = config.auth.reload_interval;

  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds = NewServerCredentials(config.tls);
  if (!creds.ok()) return creds.status();
  ops->creds_ = *std::move(creds);

  std::unique_ptr<TokenStore> tokens;
  if (!config.auth.tokens_file.empty()) {
    absl::StatusOr<std::unique_ptr<TokenStore>> t = TokenStore::Open(config.auth.tokens_file);
    if (!t.ok()) return t.status();
    tokens = *std::move(t);
    if (config.tls.cert_file.empty()) {
      LogWarning(
          "auth.tokens_file is set but the gRPC port is plaintext: bearer tokens travel "
          "unencrypted (set tls.cert_file and tls.key_file)");
    }
  }

  if (!config.metrics.listen.empty()) {
    ops->metrics_ =
        std::make_unique<Metrics>(std::string((*backend)->name()), config.metrics.namespaces);
    auto wrapped = std::make_unique<MetricsBackend>(std::move(*backend), ops->metrics_.get());
    ops->metrics_backend_ = wrapped.get();
    *backend = std::move(wrapped);
    absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint =
        MetricsEndpoint::Start(config.metrics.listen, ops->metrics_->registry());
    if (!endpoint.ok()) return endpoint.status();
    ops->endpoint_ = *std::move(endpoint);
    std::string host(config.metrics.listen.substr(0, config.metrics.listen.rfind(':')));
    LogInfo("metrics on http://", host, ":", ops->endpoint_->port(), "/metrics");
  }

  ops->authz_ =
      std::make_unique<Authorizer>(config.auth.rules, config.auth.owner_prefix, std::move(tokens),
                                   ops->metrics_.get(), config.tls.client_auth != "none");

  if (!config.health.listen.empty()) {
    absl::StatusOr<std::unique_ptr<HealthServer>> h = HealthServer::Start(config.health.listen);
    if (!h.ok()) return h.status();
    ops->health_ = *std::move(h);
    std::string host(config.health.listen.substr(0, config.health.listen.rfind(':')));
    LogInfo("health port on ", host, ":", ops->health_->port(), " (grpc.health.v1 only)");
  }
  ops->Tick((*backend)->Health().ok());
  return ops;
}

ServerSupport::~ServerSupport() { StopHealth(); }

void ServerSupport::StopHealth() {
  if (health_ != nullptr) health_->Shutdown();
}

void ServerSupport::Tick(bool backend_up) {
  const absl::Time now = absl::Now();
  if (health_ != nullptr) health_->SetBackendUp(backend_up);
  if (metrics_ != nullptr) {
    metrics_->SetBackendUp(backend_up);
    metrics_backend_->SweepExpired(now);
    if (!cert_file_.empty() && now >= next_cert_check_) {
      next_cert_check_ = now + tls_interval_;
      absl::StatusOr<absl::Time> not_after = CertificateNotAfter(cert_file_);
      if (not_after.ok()) metrics_->SetCertificateExpiry(*not_after);
    }
  }
  if (authz_ != nullptr && authz_->tokens() != nullptr && now >= next_token_check_) {
    next_token_check_ = now + auth_interval_;
    if (absl::Status s = authz_->tokens()->ReloadIfChanged(); !s.ok()) {
      LogWarning("keeping the previous bearer tokens: ", s.message());
    }
  }
}

}  // namespace lockd
