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

}  // namespace

TryResult ParseAcquire(const LockKey& key, absl::string_view context,
                       absl::StatusOr<ReplyPtr>& reply) {
  if (!reply.ok()) return TryResult{reply.status()};
  const redisReply* r = reply->get();
  int64_t granted = 0, hold_count = 0, ms = 0;
  uint64_t token = 0;
  std::string owner;
  if (r->type != REDIS_REPLY_ARRAY || !IntAt(r, 0, &granted) || !StringAt(r, 1, &owner) ||
      !IntAt(r, 2, &hold_count) || !TokenAt(r, 3, &token) || !IntAt(r, 4, &ms)) {
    return TryResult{RedisError(context, nullptr, r)};
  }
  AcquireResult out;
  if (granted == 1) {
    out.acquired = true;
    out.fencing_token = token;
    out.hold_count = static_cast<uint32_t>(hold_count);
    out.ttl = absl::Milliseconds(ms);  // the lease in force
    return TryResult{out};
  }
  out.current.key = key;
  if (owner.empty()) return TryResult{out};
  // Not granted: `ms` is the holder's PTTL (-1: the key has no TTL).
  out.current.held = true;
  out.current.owner = std::move(owner);
  out.current.hold_count = static_cast<uint32_t>(hold_count);
  out.current.fencing_token = token;
  out.current.ttl_remaining = absl::Milliseconds(std::max<int64_t>(0, ms));
  return TryResult{out, ms >= 0 ? absl::Milliseconds(ms) : absl::InfiniteDuration()};
}

absl::StatusOr<ReleaseResult> ParseRelease(const LockKey& key, absl::StatusOr<ReplyPtr>& reply,
                                           uint64_t* freed_token) {
  *freed_token = 0;
  if (!reply.ok()) return reply.status();
  const redisReply* r = reply->get();
  int64_t code = 0;
  int64_t count = 0;
  if (r->type != REDIS_REPLY_ARRAY || !IntAt(r, 0, &code) || !IntAt(r, 1, &count)) {
    return RedisError(absl::StrCat("release of lock ", LockName(key)), nullptr, r);
  }
  if (r->elements > 2 && !TokenAt(r, 2, freed_token)) *freed_token = 0;
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
  if (r->type != REDIS_REPLY_ARRAY) return RedisError(context, nullptr, r);
  if (r->elements == 0) return s;
  int64_t count = 0;
  int64_t pttl = 0;
  if (!StringAt(r, 0, &s.owner) || !IntAt(r, 1, &count) || !TokenAt(r, 2, &s.fencing_token) ||
      !IntAt(r, 3, &pttl)) {
    return RedisError(context, nullptr, r);
  }
  s.held = true;
  s.hold_count = static_cast<uint32_t>(count);
  s.ttl_remaining = absl::Milliseconds(std::max<int64_t>(0, pttl));
  return s;
}

absl::StatusOr<ForceReleaseResult> ParseForceRelease(const LockKey& key, uint64_t want_token,
                                                     absl::string_view context,
                                                     absl::StatusOr<ReplyPtr>& reply) {
  absl::StatusOr<LockState> previous = ParseDescribe(key, context, reply);
  if (!previous.ok()) return previous.status();
  ForceReleaseResult result;
  result.previous = *std::move(previous);
  if (!result.previous.held) return result;
  int64_t code = 0;
  if (!IntAt(reply->get(), 4, &code)) return RedisError(context, nullptr, reply->get());
  if (code != 1) {
    return FencingTokenMismatchError(key, want_token, result.previous.fencing_token);
  }
  result.released = true;
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
