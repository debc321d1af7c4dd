#include "service/server.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "grpc/grpc.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "service/server_support.h"
#include "util/log.h"

namespace lockd {
namespace {
constexpr char kServiceName[] = "lockd.v1.LockService";

int Millis(absl::Duration d) {
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(d), INT32_MAX));
}
}  // namespace

absl::StatusOr<std::unique_ptr<LockdServer>> LockdServer::Start(const Config& config,
                                                                std::unique_ptr<Backend> backend,
                                                                absl::Duration health_interval) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  std::unique_ptr<LockdServer> s(new LockdServer());
  absl::StatusOr<std::unique_ptr<ServerSupport>> support = ServerSupport::Start(config, &backend);
  if (!support.ok()) {
    backend->Shutdown();
    return support.status();
  }
  s->support_ = *std::move(support);
  s->backend_ = std::move(backend);
  s->service_ = std::make_unique<LockServiceImpl>(
      s->backend_.get(), config.lease, s->support_->authorizer(), s->support_->metrics());

  grpc::ServerBuilder builder;
  // Without this gRPC sets SO_REUSEPORT, and a second lockd on a taken port
  // would start and silently share it instead of failing.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Keepalive (config.h): lockd's pings find clients that hang or vanish
  // without a reset; clients' pings (which find a hung lockd) are welcome
  // down to kMinClientPingInterval, with or without calls.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, Millis(config.keepalive_time));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Millis(config.keepalive_timeout));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             Millis(kMinClientPingInterval));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  builder.AddListeningPort(config.listen, s->support_->credentials(), &s->port_);
  builder.RegisterService(s->service_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", config.listen));
  }
  std::string host(config.listen.substr(0, config.listen.rfind(':')));
  s->address_ = absl::StrCat(host, ":", s->port_);

  // Liveness, the whole server (""): SERVING while this process answers,
  // whatever the backend does (restarting lockd never repairs a backend).
  // Readiness, kServiceName: SERVING while the backend is reachable.
  s->server_->GetHealthCheckService()->SetServingStatus("", true);
  s->server_->GetHealthCheckService()->SetServingStatus(kServiceName, s->backend_->Health().ok());
  s->health_thread_ =
      std::thread([p = s.get(), health_interval] { p->WatchHealth(health_interval); });
  return s;
}

void LockdServer::WatchHealth(absl::Duration interval) {
  absl::Status last = backend_->Health();
  absl::MutexLock l(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval)) {
    mu_.Unlock();
    absl::Status now = backend_->Health();
    if (now.ok() != last.ok()) {
      if (now.ok()) {
        LogInfo("backend ", backend_->name(), " reachable; ", kServiceName, " SERVING");
      } else {
        LogWarning("backend ", backend_->name(), " unavailable: ", now.message(), "; ",
                   kServiceName, " NOT_SERVING");
      }
      server_->GetHealthCheckService()->SetServingStatus(kServiceName, now.ok());
    }
    support_->Tick(now.ok());
    last = now;
    mu_.Lock();
  }
}

void LockdServer::Shutdown(absl::Duration grace) {
  {
    absl::MutexLock l(&mu_);
    if (stopping_) {
      mu_.Await(absl::Condition(&stopped_));
      return;
    }
    stopping_ = true;
  }
  if (!health_thread_.joinable()) {  // Start() failed before serving
    if (backend_ != nullptr) backend_->Shutdown();
    absl::MutexLock l(&mu_);
    stopped_ = true;
    return;
  }
  health_thread_.join();
  // Liveness and readiness turn NOT_SERVING (the health port closes).
  support_->StopHealth();
  server_->GetHealthCheckService()->Shutdown();
  // Stop accepting while parked waiters are answered; Server::Shutdown waits
  // for in-flight calls, so the backend must release its waiters meanwhile.
  absl::Notification stopped;
  std::thread stopper([this, grace, &stopped] {
    server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    stopped.Notify();
  });
  // Session streams end with UNAVAILABLE and keep their holds to their
  // lease (clients resume them on another replica); then the backend answers
  // parked Acquires.
  service_->EndSessions();
  backend_->Shutdown();
  // gRPC's Shutdown waits for every connection to go away, not only for
  // calls, so one idle client channel would hold it for the whole grace (and
  // a Kubernetes rolling update with it). Once no LockService call is in
  // flight, cancel what is left (health watches) and drop the connections,
  // as Shutdown itself does when its deadline passes. Repeated until
  // Shutdown returns, because the first try may come before it began.
  while (!stopped.WaitForNotificationWithTimeout(absl::Milliseconds(20))) {
    if (service_->in_flight() == 0) grpc_server_cancel_all_calls(server_->c_server());
  }
  stopper.join();
  server_->Wait();
  absl::MutexLock l(&mu_);
  stopped_ = true;
}

LockdServer::~LockdServer() { Shutdown(); }

int LockdServer::metrics_port() const { return support_->metrics_port(); }
int LockdServer::health_port() const { return support_->health_port(); }

}  // namespace lockd
