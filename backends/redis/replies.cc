#include "backends/redis/replies.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "backends/common/errors.h"

namespace lockd::redis {
namespace {

bool IntAt(const redisReply* r, size_t i, int64_t* out) {
  if (i >= r->elements) return false;
  const redisReply* e = r->element[i];
  if (e->type == REDIS_REPLY_INTEGER) {
    *out = e->integer;
    return true;
  }
  if (e->type == REDIS_REPLY_STRING) {
    return absl::SimpleAtoi(absl::string_view(e->str, e->len), out);
  }
  return false;
}

bool TokenAt(const redisReply* r, size_t i, uint64_t* out) {
  if (i >= r->elements) return false;
  const redisReply* e = r->element[i];
  if (e->type == REDIS_REPLY_INTEGER) {
    *out = static_cast<uint64_t>(e->integer);
    return true;
  }
  if (e->type == REDIS_REPLY_STRING) {
    return absl::SimpleAtoi(absl::string_view(e->str, e->len), out);
  }
  return false;
}

bool StringAt(const redisReply* r, size_t i, std::string* out) {
  if (i >= r->elements) return false;
  const redisReply* e = r->element[i];
  if (e->type != REDIS_REPLY_STRING && e->type != REDIS_REPLY_STATUS) return false;
  out->assign(e->str, e->len);
  return true;
}

// The scripts' codes -1 (free), -2 (another owner), -3 (another hold).
absl::Status NotHeld(const LockKey& key, int64_t code) {
  if (code == -3) return OtherHoldError(key);
  return code == -1 ? LockFreeError(key) : HeldByOtherError(key);
}

// The state() part of a reply (scripts.h kPrelude), from element `at`:
// mode, limit, then six elements per holder.
bool StateAt(const redisReply* r, size_t at, LockState* s) {
  std::string mode;
  int64_t limit = 0;
  if (!StringAt(r, at, &mode) || !IntAt(r, at + 1, &limit)) return false;
  s->mode = mode == "S" ? LockMode::kShared : LockMode::kExclusive;
  s->limit = static_cast<uint32_t>(limit);
  s->holders.clear();
  for (size_t i = at + 2; i < r->elements; i += 6) {
    HolderState h;
    std::string hmode;
    int64_t count = 0, permits = 0, ms = 0;
    if (!StringAt(r, i, &h.owner) || !StringAt(r, i + 1, &hmode) || !IntAt(r, i + 2, &count) ||
        !IntAt(r, i + 3, &permits) || !TokenAt(r, i + 4, &h.fencing_token) ||
        !IntAt(r, i + 5, &ms)) {
      return false;
    }
    h.mode = hmode == "S" ? LockMode::kShared : LockMode::kExclusive;
    h.hold_count = static_cast<uint32_t>(count);
    h.permits = static_cast<uint32_t>(permits);
    h.ttl_remaining = absl::Milliseconds(std::max<int64_t>(0, ms));
    s->holders.push_back(std::move(h));
  }
  std::sort(s->holders.begin(), s->holders.end(), [](const HolderState& a, const HolderState& b) {
    return a.fencing_token < b.fencing_token;
  });
  FillNewestHolder(*s);
  return true;
}

// When the first of the holders' leases ends; infinite if none has a TTL.
absl::Duration FirstLeaseEnd(const redisReply* r, size_t at) {
  absl::Duration first = absl::InfiniteDuration();
  for (size_t i = at + 2 + 5; i < r->elements; i += 6) {
    int64_t ms = -1;
    if (IntAt(r, i, &ms) && ms >= 0) first = std::min(first, absl::Milliseconds(ms));
  }
  return first;
}

}  // namespace

TryResult ParseAcquire(const LockKey& key, uint32_t asked_permits, absl::string_view context,
                       absl::StatusOr<ReplyPtr>& reply) {
  if (!reply.ok()) return TryResult{reply.status()};
  const redisReply* r = reply->get();
  int64_t granted = 0;
  if (r->type != REDIS_REPLY_ARRAY || !IntAt(r, 0, &granted)) {
    return TryResult{RedisError(context, nullptr, r)};
  }
  AcquireResult out;
  if (granted == 1) {
    int64_t hold_count = 0, ms = 0;
    if (!IntAt(r, 1, &hold_count) || !TokenAt(r, 2, &out.fencing_token) || !IntAt(r, 3, &ms)) {
      return TryResult{RedisError(context, nullptr, r)};
    }
    out.acquired = true;
    out.hold_count = static_cast<uint32_t>(hold_count);
    out.ttl = absl::Milliseconds(ms);  // the lease in force
    return TryResult{out};
  }
  std::string code;
  int64_t extra = 0, retry_ms = -1;
  if (!StringAt(r, 1, &code) || !IntAt(r, 2, &extra) || !IntAt(r, 3, &retry_ms)) {
    return TryResult{RedisError(context, nullptr, r)};
  }
  if (code == "K") return TryResult{LockKindMismatchError(key, static_cast<uint32_t>(extra))};
  if (code == "U") return TryResult{UpgradeWouldBlockError(key)};
  if (code == "P") {
    return TryResult{PermitsMismatchError(key, static_cast<uint32_t>(extra), asked_permits)};
  }
  out.current.key = key;
  if (!StateAt(r, 4, &out.current)) return TryResult{RedisError(context, nullptr, r)};
  absl::Duration next = FirstLeaseEnd(r, 4);
  if (retry_ms >= 0) next = std::min(next, absl::Milliseconds(retry_ms));
  return TryResult{out, next};
}

absl::StatusOr<ReleaseResult> ParseRelease(const LockKey& key, absl::StatusOr<ReplyPtr>& reply,
                                           uint64_t* freed_token, bool* room) {
  *freed_token = 0;
  if (room != nullptr) *room = true;
  if (!reply.ok()) return reply.status();
  const redisReply* r = reply->get();
  int64_t code = 0;
  int64_t count = 0;
  if (r->type != REDIS_REPLY_ARRAY || !IntAt(r, 0, &code) || !IntAt(r, 1, &count)) {
    return RedisError(absl::StrCat("release of lock ", LockName(key)), nullptr, r);
  }
  if (r->elements > 2 && !TokenAt(r, 2, freed_token)) *freed_token = 0;
  int64_t made_room = 1;
  if (room != nullptr && r->elements > 3 && IntAt(r, 3, &made_room)) *room = made_room != 0;
  if (code < 0) return NotHeld(key, code);
  return ReleaseResult{code == 1, static_cast<uint32_t>(count)};  // 0, 2: still held
}

absl::StatusOr<RenewResult> ParseRenew(const LockKey& key, int64_t lease_ms,
                                       absl::string_view context, absl::StatusOr<ReplyPtr>& reply) {
  if (!reply.ok()) return reply.status();
  const redisReply* r = reply->get();
  int64_t code = 0;
  std::string token;
  uint64_t t = 0;
  if (r->type != REDIS_REPLY_ARRAY || !IntAt(r, 0, &code) || !StringAt(r, 1, &token) ||
      (code == 1 && !absl::SimpleAtoi(token, &t))) {
    return RedisError(context, nullptr, r);
  }
  if (code != 1) return NotHeld(key, code);
  return RenewResult{absl::Milliseconds(lease_ms), t};
}

absl::StatusOr<LockState> ParseDescribe(const LockKey& key, absl::string_view context,
                                        absl::StatusOr<ReplyPtr>& reply) {
  if (!reply.ok()) return reply.status();
  const redisReply* r = reply->get();
  LockState s;
  s.key = key;
  int64_t waiters = 0;
  if (r->type != REDIS_REPLY_ARRAY || !IntAt(r, 0, &waiters) || !StateAt(r, 1, &s)) {
    return RedisError(context, nullptr, r);
  }
  s.waiters = static_cast<uint32_t>(waiters);
  return s;
}

absl::StatusOr<ForceReleaseResult> ParseForceRelease(const LockKey& key, uint64_t want_token,
                                                     absl::string_view context,
                                                     absl::StatusOr<ReplyPtr>& reply) {
  if (!reply.ok()) return reply.status();
  const redisReply* r = reply->get();
  ForceReleaseResult result;
  LockState& s = result.previous;
  s.key = key;
  int64_t code = 0, waiters = 0;
  if (r->type != REDIS_REPLY_ARRAY || !IntAt(r, 0, &code) || !IntAt(r, 1, &waiters) ||
      !StateAt(r, 2, &s)) {
    return RedisError(context, nullptr, r);
  }
  s.waiters = static_cast<uint32_t>(waiters);
  if (code == 0) return FencingTokenMismatchError(key, want_token, s.fencing_token);
  result.released = code == 1;
  return result;
}

bool ParseScan(const redisReply* r, std::string* cursor, const redisReply** keys) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || !StringAt(r, 0, cursor) ||
      r->element[1]->type != REDIS_REPLY_ARRAY) {
    return false;
  }
  *keys = r->element[1];
  return true;
}

}  // namespace lockd::redis
