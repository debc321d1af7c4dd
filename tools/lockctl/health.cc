// `lockctl health`: one grpc.health.v1.Health/Check, for an image
// HEALTHCHECK or a Kubernetes exec probe.

#include <memory>
#include <ostream>

#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "tools/lockctl/lockctl.h"
#include "tools/lockctl/proto_json.h"

namespace lockd::lockctl {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

int HealthCheck(const Invocation& inv, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      NewLockdChannel(inv.server, inv.tls, inv.auth);
  if (!channel.ok()) {
    err << "lockctl: " << channel.status().message() << "\n";
    return kExitUsage;
  }
  std::unique_ptr<grpc::health::v1::Health::Stub> stub =
      grpc::health::v1::Health::NewStub(*channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + inv.timeout));
  HealthCheckRequest req;
  req.set_service(inv.service);
  HealthCheckResponse resp;
  grpc::Status s = stub->Check(&ctx, req, &resp);
  if (!s.ok()) {
    err << "lockctl: health check of \"" << inv.service << "\" on " << inv.server
        << " failed: " << s.error_message() << "\n";
    return ExitCodeFor(
        absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message()),
        /*acquiring=*/false);
  }
  if (inv.output == Output::kJson) {
    out << ProtoJson(resp) << "\n";
  } else {
    out << HealthCheckResponse::ServingStatus_Name(resp.status()) << "\n";
  }
  return resp.status() == HealthCheckResponse::SERVING ? kExitOk : kExitError;
}

}  // namespace lockd::lockctl
