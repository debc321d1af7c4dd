// One parser for the "host:port[,host:port...]" lists backends are
// configured with (redis.addresses, zookeeper.hosts).
//
// Entries are separated by commas; whitespace around an entry and empty
// entries are ignored. A host may be a name, an IPv4 address or an
// "[IPv6]" literal (returned without the brackets); the port must be in
// [1, 65535]. Whether a host resolves is not checked.
//
// Thread-safe: pure functions.

#ifndef LOCKD_BACKENDS_COMMON_HOST_PORTS_H_
#define LOCKD_BACKENDS_COMMON_HOST_PORTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockd {

struct HostPort {
  std::string host;
  int port = 0;
};

// The entries of `text`. kInvalidArgument naming `option` (the
// configuration key) and the bad entry, or saying the list is empty.
absl::StatusOr<std::vector<HostPort>> ParseHostPorts(absl::string_view text,
                                                     absl::string_view option);

// "host:port", with brackets around an IPv6 host.
std::string FormatHostPort(const HostPort& e);

}  // namespace lockd

#endif  // LOCKD_BACKENDS_COMMON_HOST_PORTS_H_
