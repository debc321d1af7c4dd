#include "clients/cpp/src/acquire_path.h"

#include <utility>

#include "clients/cpp/src/client_core.h"

namespace lockd::client_internal {

absl::StatusOr<AcquireCall> NewAcquireCall(const ClientCore& core, absl::string_view name,
                                           AcquireOptions options) {
  if (options.ttl < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("AcquireOptions.ttl must not be negative");
  }
  if (options.wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("AcquireOptions.wait must not be negative");
  }
  if (options.timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("AcquireOptions.timeout must not be negative");
  }
  const ClientOptions& co = core.options();
  const SteadyTime start = SteadyClock::now();
  AcquireCall call;
  call.ns = core.Namespace(options.ns);
  call.name = std::string(name);
  call.owner = options.owner.empty() ? co.owner : options.owner;
  call.ttl = options.ttl;
  call.wait = options.wait;
  call.timeout =
      options.timeout > absl::ZeroDuration() ? options.timeout : options.wait + co.rpc_timeout;
  call.wait_end = start + ToSteady(options.wait);
  call.deadline = start + ToSteady(call.timeout);
  call.auto_renew = options.auto_renew;
  call.on_lost = std::move(options.on_lost);
  return call;
}

AcquirePath ChooseAcquirePath(const ClientCore& core, const AcquireCall& call) {
  const ClientOptions& options = core.options();
  if (!options.use_sessions || call.owner != options.owner || !call.auto_renew) {
    return AcquirePath::kUnary;
  }
  return core.session().Accepts(call.ttl) ? AcquirePath::kSession : AcquirePath::kUnary;
}

}  // namespace lockd::client_internal
