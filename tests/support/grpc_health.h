// Test support: asks a gRPC server for its health the way a kubelet probe
// or `grpc_health_probe` does (grpc.health.v1.Health/Check), without
// generated health stubs: the request is field 1, the service name, and the
// answer is field 1, a varint.
//
// Thread-safe (each call uses its own channel).

#ifndef LOCKD_TESTS_SUPPORT_GRPC_HEALTH_H_
#define LOCKD_TESTS_SUPPORT_GRPC_HEALTH_H_

#include <future>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"

namespace lockd::testing {

// grpc.health.v1.HealthCheckResponse.ServingStatus values.
inline constexpr int kHealthServing = 1;
inline constexpr int kHealthNotServing = 2;

// The service whose health is lockd's readiness (SERVING while the backend
// is reachable); the whole server, "", is its liveness.
inline constexpr char kLockService[] = "lockd.v1.LockService";

// The health of `service` ("": the whole server) at `address`
// ("host:port"): kHealthServing, kHealthNotServing, or -1 if the call failed
// (within `timeout`).
inline int HealthStatus(const std::string& address, const std::string& service = "",
                        absl::Duration timeout = absl::Seconds(2)) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  // HealthCheckRequest{service}: "" encodes to no bytes; names are < 128 bytes.
  std::string encoded;
  if (!service.empty()) {
    encoded = std::string("\x0a") + static_cast<char>(service.size()) + service;
  }
  grpc::Slice slice(encoded);
  grpc::ByteBuffer request(&slice, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) { done.set_value(s); });
  if (!done.get_future().get().ok()) return -1;
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return -1;
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  if (bytes.size() == 2 && bytes[0] == 0x08) return bytes[1];
  return -1;
}

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_SUPPORT_GRPC_HEALTH_H_
