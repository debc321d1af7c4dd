#include "backends/common/host_ports.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace lockd {

absl::StatusOr<std::vector<HostPort>> ParseHostPorts(absl::string_view text,
                                                     absl::string_view option) {
  std::vector<HostPort> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    part = absl::StripAsciiWhitespace(part);
    size_t colon = part.rfind(':');
    int port = 0;
    if (colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(part.substr(colon + 1), &port) || port <= 0 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat(option, ": expected host:port, got \"", part, "\""));
    }
    absl::string_view host = part.substr(0, colon);
    if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) {
      return absl::InvalidArgumentError(
          absl::StrCat(option, ": expected [ipv6]:port, got \"", part, "\""));
    }
    out.push_back(HostPort{std::string(host), port});
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat(option, ": must not be empty"));
  return out;
}

std::string FormatHostPort(const HostPort& e) {
  return absl::StrContains(e.host, ':') ? absl::StrCat("[", e.host, "]:", e.port)
                                        : absl::StrCat(e.host, ":", e.port);
}

}  // namespace lockd
