// Internal: how a lockd address becomes a gRPC channel target, so that one
// Client reaches several lockd replicas (lockd is stateless: any replica
// serves any call) and gRPC's round_robin policy spreads calls over them.
//
// Thread-safe: stateless functions.

#ifndef LOCKD_CLIENTS_CPP_SRC_TARGET_H_
#define LOCKD_CLIENTS_CPP_SRC_TARGET_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockd::client_internal {

// The channel's service config: round_robin over every address the target
// resolves to (gRPC's default, pick_first, would send everything to one).
inline constexpr absl::string_view kRoundRobinServiceConfig =
    R"({"loadBalancingConfig":[{"round_robin":{}}]})";

struct ChannelTarget {
  // What the channel is created with.
  std::string target;
  // Non-empty for an address list: the channel's default authority (the
  // :authority header, and the name TLS verifies unless
  // TlsOptions::server_name says otherwise): the list's first entry as
  // written.
  std::string authority;
};

// Maps `address` to a gRPC target:
//  * No comma, or a gRPC URI ("dns:///name:7411", "ipv4:a:p,b:p",
//    "ipv6:...", "unix:...", "unix-abstract:...", "vsock:...", "xds:..."):
//    unchanged ("host:port" resolves through DNS, to one or more addresses).
//  * "host1:port1,host2:port2,...": every entry (spaces around it ignored;
//    an IPv6 host in brackets, "[::1]:7411") is resolved now with
//    getaddrinfo, to every address it has, and the list becomes
//    "ipv4:a1:p1,a2:p2,..." (or "ipv6:[..]:p,..." with IPv4 addresses
//    written as IPv4-mapped IPv6 if any is IPv6). Host names are resolved
//    once, when the channel is created: for names whose addresses change
//    use a "dns:///name:port" target instead.
// Errors: kInvalidArgument naming the entry for an empty entry, one without
// a port, or one that does not resolve.
absl::StatusOr<ChannelTarget> ResolveChannelTarget(absl::string_view address);

}  // namespace lockd::client_internal

#endif  // LOCKD_CLIENTS_CPP_SRC_TARGET_H_
