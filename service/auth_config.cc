#include "service/auth_config.h"

#include "absl/strings/str_cat.h"
#include "yaml-cpp/yaml.h"

namespace lockd {
namespace {

absl::StatusOr<std::vector<std::string>> Strings(const YAML::Node& node, const std::string& where) {
  std::vector<std::string> out;
  if (node.IsScalar()) {
    out.push_back(node.as<std::string>());
  } else if (node.IsSequence()) {
    for (const YAML::Node& item : node) {
      if (!item.IsScalar()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": expected strings"));
      }
      out.push_back(item.as<std::string>());
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": expected a string or a list of strings"));
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": must not be empty"));
  for (const std::string& s : out) {
    if (s.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": empty pattern"));
  }
  return out;
}

absl::StatusOr<AuthRule> ParseRule(const YAML::Node& node, const std::string& where) {
  if (!node.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": expected a mapping with identities, namespaces and permissions"));
  }
  AuthRule rule;
  bool has_ids = false, has_ns = false, has_perms = false;
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    std::string at = absl::StrCat(where, ".", key);
    if (key == "identities" || key == "namespaces") {
      absl::StatusOr<std::vector<std::string>> v = Strings(kv.second, at);
      if (!v.ok()) return v.status();
      (key == "identities" ? rule.identities : rule.namespaces) = *std::move(v);
      (key == "identities" ? has_ids : has_ns) = true;
    } else if (key == "permissions") {
      absl::StatusOr<std::vector<std::string>> v = Strings(kv.second, at);
      if (!v.ok()) return v.status();
      for (const std::string& p : *v) {
        if (p == "lock") {
          rule.permissions |= static_cast<uint8_t>(Permission::kLock);
        } else if (p == "read") {
          rule.permissions |= static_cast<uint8_t>(Permission::kRead);
        } else if (p == "admin") {
          rule.permissions |= static_cast<uint8_t>(Permission::kAdmin);
        } else {
          return absl::InvalidArgumentError(
              absl::StrCat(at, ": unknown permission \"", p, "\" (expected lock, read or admin)"));
        }
      }
      has_perms = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": unknown key \"", key, "\" (expected identities, namespaces, permissions)"));
    }
  }
  if (!has_ids) return absl::InvalidArgumentError(absl::StrCat(where, ".identities: missing"));
  if (!has_ns) return absl::InvalidArgumentError(absl::StrCat(where, ".namespaces: missing"));
  if (!has_perms) return absl::InvalidArgumentError(absl::StrCat(where, ".permissions: missing"));
  return rule;
}

}  // namespace

absl::string_view PermissionName(Permission p) {
  switch (p) {
    case Permission::kLock:
      return "lock";
    case Permission::kRead:
      return "read";
    case Permission::kAdmin:
      return "admin";
  }
  return "?";
}

absl::StatusOr<std::vector<AuthRule>> ParseAuthRules(const std::string& text) {
  std::vector<AuthRule> rules;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("auth.rules: not valid YAML: ", e.what()));
  }
  if (root.IsNull()) return rules;
  if (!root.IsSequence()) {
    return absl::InvalidArgumentError(
        "auth.rules: expected a list of {identities, namespaces, permissions}");
  }
  try {
    for (size_t i = 0; i < root.size(); ++i) {
      absl::StatusOr<AuthRule> rule = ParseRule(root[i], absl::StrCat("auth.rules[", i, "]"));
      if (!rule.ok()) return rule.status();
      rules.push_back(*std::move(rule));
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("auth.rules: ", e.what()));
  }
  return rules;
}

namespace {

// Matches the class starting at pattern[i] ('[') against c. Sets *end past
// its ']'; returns false with *end = npos if the class is not closed (then
// '[' is an ordinary character, as in fnmatch).
bool ClassMatch(absl::string_view pattern, size_t i, char c, size_t* end) {
  size_t j = i + 1;
  bool negate = j < pattern.size() && (pattern[j] == '!' || pattern[j] == '^');
  if (negate) ++j;
  bool matched = false;
  bool first = true;
  for (; j < pattern.size() && (first || pattern[j] != ']'); ++j, first = false) {
    char lo = pattern[j], hi = lo;
    if (j + 2 < pattern.size() && pattern[j + 1] == '-' && pattern[j + 2] != ']') {
      hi = pattern[j + 2];
      j += 2;
    }
    if (lo <= c && c <= hi) matched = true;
  }
  if (j >= pattern.size()) {
    *end = absl::string_view::npos;
    return false;
  }
  *end = j + 1;
  return matched != negate;
}

}  // namespace

// fnmatch(3) semantics without flags, without copying or locale work: this
// runs for every rule on every authorized call. Backtracks to the last '*'.
bool GlobMatch(absl::string_view pattern, absl::string_view text) {
  if (pattern == "*") return true;
  if (IsLiteralPattern(pattern)) return pattern == text;
  size_t p = 0, t = 0;
  size_t star = absl::string_view::npos, star_t = 0;
  while (t < text.size()) {
    if (p < pattern.size()) {
      char pc = pattern[p];
      if (pc == '*') {
        star = p++;
        star_t = t;
        continue;
      }
      if (pc == '?') {
        ++p;
        ++t;
        continue;
      }
      if (pc == '[') {
        size_t end;
        bool m = ClassMatch(pattern, p, text[t], &end);
        if (end != absl::string_view::npos) {
          if (m) {
            p = end;
            ++t;
            continue;
          }
        } else if (text[t] == '[') {
          ++p;
          ++t;
          continue;
        }
      } else if (pc == text[t]) {
        ++p;
        ++t;
        continue;
      }
    }
    if (star == absl::string_view::npos) return false;
    p = star + 1;
    t = ++star_t;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool IsLiteralPattern(absl::string_view pattern) {
  for (char c : pattern) {
    if (c == '*' || c == '?' || c == '[') return false;
  }
  return true;
}

}  // namespace lockd
