// Authorization rules as configured (`auth.rules`), parsed from YAML. The
// rules are evaluated by Authorizer (service/auth.h); this header only says
// what a rule is and how its text is read.
//
// A rule grants `permissions` on every namespace matching one of
// `namespaces` to every identity matching one of `identities`. Patterns are
// globs: `*` matches any run of characters (including none, and `/`), `?`
// one character, `[...]` a class (fnmatch(3) without flags); a pattern
// without those characters matches exactly.

#ifndef LOCKD_SERVICE_AUTH_CONFIG_H_
#define LOCKD_SERVICE_AUTH_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockd {

// What an RPC needs (docs/api.md "Authorization").
enum class Permission : uint8_t {
  kLock = 1,   // Acquire, Release, Renew (and Session)
  kRead = 2,   // Describe, List
  kAdmin = 4,  // ForceRelease
};

// "lock", "read" or "admin".
absl::string_view PermissionName(Permission p);

struct AuthRule {
  std::vector<std::string> identities;  // globs, at least one
  std::vector<std::string> namespaces;  // globs, at least one
  uint8_t permissions = 0;              // a set of Permission bits, at least one
};

// Parses the value of `auth.rules`: a YAML sequence (block or flow style) of
// mappings with exactly the keys `identities`, `namespaces` and
// `permissions`, each a string or a sequence of strings; permissions are
// `lock`, `read` and `admin`. Empty text or an empty sequence: no rules.
// Errors: kInvalidArgument naming the rule and key, e.g.
// "auth.rules[1].permissions: unknown permission \"write\" (expected lock, read or admin)".
absl::StatusOr<std::vector<AuthRule>> ParseAuthRules(const std::string& text);

// fnmatch(3)-style glob match with no flags (see above).
bool GlobMatch(absl::string_view pattern, absl::string_view text);

// True if `pattern` holds none of `*`, `?`, `[` (it matches only itself).
bool IsLiteralPattern(absl::string_view pattern);

}  // namespace lockd

#endif  // LOCKD_SERVICE_AUTH_CONFIG_H_
