// Internal: what a Client and its Leases share (stub, options, watchdog,
// session). Destroyed when the Client and all its Leases are gone; closes the
// session and stops the watchdog.
//
// Thread-safe: constant after construction (the watchdog and the session are
// thread-safe).

#ifndef LOCKD_CLIENTS_CPP_SRC_CLIENT_CORE_H_
#define LOCKD_CLIENTS_CPP_SRC_CLIENT_CORE_H_

#include <memory>

#include "clients/cpp/src/rpc.h"
#include "clients/cpp/src/session_stream.h"
#include "clients/cpp/src/watchdog.h"
#include "lockd/client.h"

namespace lockd::client_internal {

class ClientCore {
 public:
  // Fills in options.owner if empty. `channel` is the stub's channel, or null
  // when unknown (a stub given by the caller, e.g. a mock).
  ClientCore(std::shared_ptr<Stub> stub, std::shared_ptr<grpc::ChannelInterface> channel,
             ClientOptions options);
  ~ClientCore();
  ClientCore(const ClientCore&) = delete;
  ClientCore& operator=(const ClientCore&) = delete;

  Stub& stub() const { return *stub_; }
  grpc::ChannelInterface* channel() const { return channel_.get(); }
  const ClientOptions& options() const { return options_; }
  Watchdog& watchdog() const { return *watchdog_; }
  SessionStream& session() const { return *session_; }

  // `ns`, else options().default_namespace, else "default".
  std::string Namespace(absl::string_view ns) const;

 private:
  const std::shared_ptr<Stub> stub_;
  const std::shared_ptr<grpc::ChannelInterface> channel_;
  const ClientOptions options_;
  const std::shared_ptr<Watchdog> watchdog_;
  const std::shared_ptr<SessionStream> session_;
};

// "<hostname>-<pid>-<32 hex>".
std::string NewClientOwner();

}  // namespace lockd::client_internal

#endif  // LOCKD_CLIENTS_CPP_SRC_CLIENT_CORE_H_
