#include "backends/redis/cluster_slots.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace lockd::redis {
namespace {

bool IntegerOf(const redisReply* r, int64_t* out) {
  if (r->type == REDIS_REPLY_INTEGER) {
    *out = r->integer;
    return true;
  }
  return r->type == REDIS_REPLY_STRING && absl::SimpleAtoi(ReplyText(r), out);
}

// "host:port" or "[v6]:port" as a redirection names a node.
std::optional<Endpoint> ParseNode(absl::string_view text) {
  size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return std::nullopt;
  int port = 0;
  if (!absl::SimpleAtoi(text.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return std::nullopt;
  }
  absl::string_view host = text.substr(0, colon);
  if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) return std::nullopt;
  if (host.empty()) return std::nullopt;
  return Endpoint{std::string(host), port};
}

}  // namespace

uint16_t Crc16(absl::string_view data) {
  uint16_t crc = 0;
  for (char ch : data) {
    crc ^= static_cast<uint16_t>(static_cast<unsigned char>(ch) << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) != 0 ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                                : static_cast<uint16_t>(crc << 1);
    }
  }
  return crc;
}

int HashSlot(absl::string_view key) {
  size_t open = key.find('{');
  if (open != absl::string_view::npos) {
    size_t close = key.find('}', open + 1);
    // An empty tag ("{}") does not count: the whole key is hashed.
    if (close != absl::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return Crc16(key) & (kClusterSlots - 1);
}

std::string NodeName(const Endpoint& e) {
  if (absl::StrContains(e.host, ':')) return absl::StrCat("[", e.host, "]:", e.port);
  return absl::StrCat(e.host, ":", e.port);
}

SlotMap::SlotMap() : owner_(kClusterSlots, -1) {}

bool SlotMap::complete() const { return unassigned() == 0; }

int SlotMap::unassigned() const {
  return static_cast<int>(std::count(owner_.begin(), owner_.end(), -1));
}

std::vector<int> SlotMap::FirstSlots() const {
  std::vector<int> first(primaries_.size(), -1);
  for (int slot = kClusterSlots - 1; slot >= 0; --slot) {
    int o = owner_[static_cast<size_t>(slot)];
    if (o >= 0) first[static_cast<size_t>(o)] = slot;
  }
  return first;
}

void SlotMap::Assign(int first, int last, const Endpoint& primary) {
  const std::string name = NodeName(primary);
  size_t index = 0;
  while (index < primaries_.size() && NodeName(primaries_[index]) != name) ++index;
  if (index == primaries_.size()) primaries_.push_back(primary);
  std::fill(owner_.begin() + first, owner_.begin() + last + 1, static_cast<int16_t>(index));
}

absl::StatusOr<SlotMap> ParseClusterSlots(const redisReply* reply, const Endpoint& queried,
                                          absl::string_view context) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) {
    return RedisError(context, nullptr, reply);
  }
  SlotMap map;
  for (size_t i = 0; i < reply->elements; ++i) {
    const redisReply* range = reply->element[i];
    int64_t first = 0;
    int64_t last = 0;
    if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
        !IntegerOf(range->element[0], &first) || !IntegerOf(range->element[1], &last) ||
        first < 0 || last < first || last >= kClusterSlots) {
      return absl::InternalError(
          absl::StrCat(context, ": malformed CLUSTER SLOTS reply (slot range ", i, ")"));
    }
    const redisReply* node = range->element[2];
    int64_t port = 0;
    if (node->type != REDIS_REPLY_ARRAY || node->elements < 2 ||
        node->element[0]->type != REDIS_REPLY_STRING || !IntegerOf(node->element[1], &port) ||
        port <= 0 || port > 65535) {
      return absl::InternalError(
          absl::StrCat(context, ": malformed CLUSTER SLOTS reply (primary of range ", i, ")"));
    }
    std::string host(ReplyText(node->element[0]));
    if (host.empty() || host == "?") host = queried.host;
    map.Assign(static_cast<int>(first), static_cast<int>(last),
               Endpoint{std::move(host), static_cast<int>(port)});
  }
  return map;
}

std::optional<Redirect> ParseRedirect(absl::string_view error_text) {
  std::vector<absl::string_view> parts = absl::StrSplit(error_text, ' ');
  if (parts.size() != 3) return std::nullopt;
  Redirect r;
  if (parts[0] == "MOVED") {
    r.kind = Redirect::Kind::kMoved;
  } else if (parts[0] == "ASK") {
    r.kind = Redirect::Kind::kAsk;
  } else {
    return std::nullopt;
  }
  if (!absl::SimpleAtoi(parts[1], &r.slot) || r.slot < 0 || r.slot >= kClusterSlots) {
    return std::nullopt;
  }
  std::optional<Endpoint> target = ParseNode(parts[2]);
  if (!target.has_value()) return std::nullopt;
  r.target = *std::move(target);
  return r;
}

bool IsClusterRedirect(const redisReply* reply) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ERROR) return false;
  absl::string_view text = ReplyText(reply);
  return absl::StartsWith(text, "MOVED ") || absl::StartsWith(text, "ASK ") ||
         absl::StartsWith(text, "TRYAGAIN");
}

}  // namespace lockd::redis
