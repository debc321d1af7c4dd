#include "backends/redis/keys.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace lockd::redis {
namespace {

constexpr char kHex[] = "0123456789ABCDEF";

bool NeedsEscape(unsigned char c) {
  switch (c) {
    case '%':
    case '{':
    case '}':
    case '*':
    case '?':
    case '[':
    case ']':
    case '\\':
      return true;
    default:
      return c < 0x20 || c == 0x7f;
  }
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;  // lower case is never produced, so it is not ours
}

bool ValidNamespace(absl::string_view ns) {
  if (ns.empty() || ns.size() > 64) return false;
  for (char c : ns) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::string EncodeName(absl::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char ch : name) {
    auto c = static_cast<unsigned char>(ch);
    if (NeedsEscape(c)) {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

std::optional<std::string> DecodeName(absl::string_view encoded) {
  std::string out;
  out.reserve(encoded.size());
  for (size_t i = 0; i < encoded.size(); ++i) {
    auto c = static_cast<unsigned char>(encoded[i]);
    if (c != '%') {
      if (NeedsEscape(c)) return std::nullopt;
      out.push_back(encoded[i]);
      continue;
    }
    if (i + 2 >= encoded.size()) return std::nullopt;
    int hi = HexValue(encoded[i + 1]);
    int lo = HexValue(encoded[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    auto decoded = static_cast<unsigned char>(hi << 4 | lo);
    // Only escaped bytes may appear escaped, so each name has one encoding.
    if (!NeedsEscape(decoded)) return std::nullopt;
    out.push_back(static_cast<char>(decoded));
    i += 2;
  }
  return out;
}

absl::Status ValidateKeyPrefix(absl::string_view prefix) {
  if (prefix.empty() || prefix.size() > 64) {
    return absl::InvalidArgumentError("redis.key_prefix: must be 1-64 characters");
  }
  for (char c : prefix) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == ':' || c == '/' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "redis.key_prefix: only [A-Za-z0-9._:/-] are allowed, got \"", prefix, "\""));
    }
  }
  return absl::OkStatus();
}

std::string KeyCodec::Tagged(const LockKey& key, absl::string_view suffix) const {
  return absl::StrCat(prefix_, ":{", key.ns, ":", EncodeName(key.name), "}:", suffix);
}

LockKeys KeyCodec::KeysFor(const LockKey& key) const {
  // One encoding, six names.
  std::string tag = absl::StrCat(prefix_, ":{", key.ns, ":", EncodeName(key.name), "}:");
  return LockKeys{absl::StrCat(tag, "lock"),  absl::StrCat(tag, "fence"),
                  absl::StrCat(tag, "freed"), absl::StrCat(tag, "queue"),
                  absl::StrCat(tag, "qlife"), absl::StrCat(tag, "rel")};
}

std::string KeyCodec::ChannelFor(const LockKey& key) const { return Tagged(key, "rel"); }

std::optional<LockKey> KeyCodec::Parse(absl::string_view key, absl::string_view suffix) const {
  if (!absl::ConsumePrefix(&key, prefix_) || !absl::ConsumePrefix(&key, ":{")) return std::nullopt;
  std::string tail = absl::StrCat("}:", suffix);
  if (!absl::ConsumeSuffix(&key, tail)) return std::nullopt;
  size_t colon = key.find(':');
  if (colon == absl::string_view::npos) return std::nullopt;
  absl::string_view ns = key.substr(0, colon);
  if (!ValidNamespace(ns)) return std::nullopt;
  std::optional<std::string> name = DecodeName(key.substr(colon + 1));
  if (!name.has_value() || name->empty()) return std::nullopt;
  return LockKey{std::string(ns), *std::move(name)};
}

std::optional<LockKey> KeyCodec::ParseChannel(absl::string_view channel) const {
  return Parse(channel, "rel");
}

std::optional<LockKey> KeyCodec::ParseLockKey(absl::string_view key) const {
  return Parse(key, "lock");
}

std::string KeyCodec::LockKeyPattern(absl::string_view ns, absl::string_view name_prefix) const {
  // The prefix, namespace and encoded name contain no glob characters.
  return absl::StrCat(prefix_, ":{", ns, ":", EncodeName(name_prefix), "*}:lock");
}

std::string KeyCodec::AllKeysPattern() const { return absl::StrCat(prefix_, ":{*"); }

std::string KeyCodec::ReplicasKey() const { return absl::StrCat(prefix_, ":replicas"); }

std::string KeyCodec::AllChannelsPattern() const { return absl::StrCat(prefix_, ":{*}:rel"); }

}  // namespace lockd::redis
