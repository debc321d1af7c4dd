#include "clients/cpp/src/target.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace lockd::client_internal {
namespace {

// URI schemes of gRPC's resolvers: a target starting with one is passed on.
bool IsGrpcUri(absl::string_view address) {
  for (absl::string_view scheme :
       {"dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:", "vsock:", "xds:", "google-c2p:"}) {
    if (absl::StartsWithIgnoreCase(address, scheme)) return true;
  }
  return false;
}

struct Resolved {
  int family;
  std::string ip;  // numeric, without brackets
  int port;
};

absl::Status BadEntry(absl::string_view entry, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("lockd address list entry \"", entry, "\": ", why));
}

absl::Status Resolve(absl::string_view entry, std::vector<Resolved>* out) {
  absl::string_view host;
  absl::string_view port;
  if (absl::StartsWith(entry, "[")) {
    size_t close = entry.find(']');
    if (close == absl::string_view::npos || entry.substr(close + 1, 1) != ":") {
      return BadEntry(entry, "expected [ipv6]:port");
    }
    host = entry.substr(1, close - 1);
    port = entry.substr(close + 2);
  } else {
    size_t colon = entry.rfind(':');
    if (colon == absl::string_view::npos) return BadEntry(entry, "expected host:port");
    host = entry.substr(0, colon);
    port = entry.substr(colon + 1);
    if (absl::StrContains(host, ':')) return BadEntry(entry, "write an IPv6 host in brackets");
  }
  int port_number = 0;
  if (host.empty() || !absl::SimpleAtoi(port, &port_number) || port_number < 1 ||
      port_number > 65535) {
    return BadEntry(entry, "expected host:port with a port in [1, 65535]");
  }
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string h(host);
  const std::string p(port);
  int rc = ::getaddrinfo(h.c_str(), p.c_str(), &hints, &res);
  if (rc != 0) return BadEntry(entry, absl::StrCat("cannot resolve: ", ::gai_strerror(rc)));
  for (const addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    char buf[INET6_ADDRSTRLEN] = {};
    const void* addr = nullptr;
    if (ai->ai_family == AF_INET) {
      addr = &reinterpret_cast<const sockaddr_in*>(ai->ai_addr)->sin_addr;
    } else if (ai->ai_family == AF_INET6) {
      addr = &reinterpret_cast<const sockaddr_in6*>(ai->ai_addr)->sin6_addr;
    } else {
      continue;
    }
    if (::inet_ntop(ai->ai_family, addr, buf, sizeof(buf)) == nullptr) continue;
    Resolved r{ai->ai_family, buf, port_number};
    if (std::none_of(out->begin(), out->end(), [&](const Resolved& o) {
          return o.family == r.family && o.ip == r.ip && o.port == r.port;
        })) {
      out->push_back(std::move(r));
    }
  }
  ::freeaddrinfo(res);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ChannelTarget> ResolveChannelTarget(absl::string_view address) {
  if (!absl::StrContains(address, ',') || IsGrpcUri(address)) {
    return ChannelTarget{std::string(address), ""};
  }
  std::vector<Resolved> resolved;
  std::string first;
  for (absl::string_view entry : absl::StrSplit(address, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    if (entry.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("lockd address list \"", address, "\" has an empty entry"));
    }
    if (first.empty()) first = std::string(entry);
    absl::Status s = Resolve(entry, &resolved);
    if (!s.ok()) return s;
  }
  const bool any_v6 = std::any_of(resolved.begin(), resolved.end(),
                                  [](const Resolved& r) { return r.family == AF_INET6; });
  std::vector<std::string> parts;
  for (const Resolved& r : resolved) {
    if (!any_v6) {
      parts.push_back(absl::StrCat(r.ip, ":", r.port));
    } else {
      parts.push_back(absl::StrCat("[", r.family == AF_INET ? "::ffff:" : "", r.ip, "]:", r.port));
    }
  }
  return ChannelTarget{absl::StrCat(any_v6 ? "ipv6:" : "ipv4:", absl::StrJoin(parts, ",")),
                       std::move(first)};
}

}  // namespace lockd::client_internal
