#include "util/version.h"

#include "absl/strings/str_cat.h"

namespace lockd {

std::string VersionLine(absl::string_view program) {
  return absl::StrCat(program, " ", Version(), " (git ", Revision(), ")");
}

}  // namespace lockd
