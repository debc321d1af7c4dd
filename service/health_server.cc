#include "service/health_server.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/health_check_service_server_builder_option.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/impl/server_builder_plugin.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace lockd {
namespace {

// Drops every ServerBuilder plugin (server reflection registers itself for
// all builders of the process) so that this port serves health alone.
class NoPluginsOption final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->clear();
  }
};

}  // namespace

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

class HealthServer::Service final : public grpc::health::v1::Health::CallbackService {
 public:
  Service(const std::atomic<bool>* live, const std::atomic<bool>* backend_up)
      : live_(live), backend_up_(backend_up) {}

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* ctx, const HealthCheckRequest* req,
                                  HealthCheckResponse* resp) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    bool serving;
    if (req->service().empty()) {
      serving = live_->load();
    } else if (req->service() == "lockd.v1.LockService") {
      serving = live_->load() && backend_up_->load();
    } else {
      reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service"));
      return reactor;
    }
    resp->set_status(serving ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  const std::atomic<bool>* const live_;
  const std::atomic<bool>* const backend_up_;
};

absl::StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(const std::string& listen) {
  std::unique_ptr<HealthServer> s(new HealthServer());
  s->service_ = std::make_unique<Service>(&s->live_, &s->backend_up_);
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &s->port_);
  builder.RegisterService(s->service_.get());
  // Not gRPC's default health service (this one is), and no reflection.
  builder.SetOption(std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(nullptr));
  builder.SetOption(std::make_unique<NoPluginsOption>());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("health.listen: cannot listen on ", listen));
  }
  return s;
}

void HealthServer::Shutdown() {
  live_.store(false);
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
  server_.reset();
}

HealthServer::~HealthServer() { Shutdown(); }

}  // namespace lockd
