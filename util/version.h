// lockd's version: the VERSION file at the repository's root (CMake's
// PROJECT_VERSION), and the git revision the binary was built from. The one
// source for `lockd --version`, `lockctl --version`, lockd's start log line
// and the lockd_build_info metric.
//
// Thread-safe: constants.

#ifndef LOCKD_UTIL_VERSION_H_
#define LOCKD_UTIL_VERSION_H_

#include <string>

#include "absl/strings/string_view.h"

namespace lockd {

// "0.1.0".
absl::string_view Version();
// The short git revision of the build ("3f2a9c1d0e4b"), the one given to
// CMake as LOCKD_GIT_REVISION, or "unknown" (no git repository).
absl::string_view Revision();
// "<program> 0.1.0 (git 3f2a9c1d0e4b)": what --version prints.
std::string VersionLine(absl::string_view program);

}  // namespace lockd

#endif  // LOCKD_UTIL_VERSION_H_
