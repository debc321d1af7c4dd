// The Lua scripts of the redis backend: every state change of a lock is one
// script, so it is atomic on the server. Key layout: keys.h.
//
// Numbers that may exceed 14 digits (fencing tokens) are kept as strings end
// to end: Redis converts Lua numbers to strings with limited precision.
// Scripts touch only the keys they are given (all in one hash slot) plus
// PUBLISH to the lock's channel (same hash tag, so same slot), so they run on
// Redis Cluster; there they run as Sharded() makes them. They need Redis >= 5
// (HSET with several fields; effects replication, so TIME may precede
// writes), >= 7 in cluster mode (SPUBLISH).

#ifndef LOCKD_BACKENDS_REDIS_SCRIPTS_H_
#define LOCKD_BACKENDS_REDIS_SCRIPTS_H_

#include <string>

#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"

namespace lockd::redis {

// The acquire script's mode argument: whether the caller may take a free
// lock. kMayTakeFree ('n', a new grant allowed): a first try, or the head of
// this replica's waiters. kReenterOnly ('r'): a waiter behind others of this
// replica; it must not jump that queue, so it only re-enters a lock its owner
// holds (or replays a request_id) and leaves a free lock to the head.
inline constexpr char kMayTakeFree[] = "n";
inline constexpr char kReenterOnly[] = "r";

// Grants, re-enters or reports a lock.
// KEYS: lock, fence, freed.
// ARGV: owner, lease_ms, request_id ('' = none), mode (kMayTakeFree or
//   kReenterOnly, above), fence_ttl_ms, channel. fence_ttl_ms '0': the fence
//   key never expires.
// Returns {granted, owner, hold_count, token, ms}:
//   granted 1: ms is the lease in force; a repeat of the owner's last
//   request_id returns that request's result and changes nothing.
//   granted 0: owner/hold_count/token describe the holder ('' owner: free)
//   and ms is the lock's PTTL (-2 when free).
// A first grant's token is the larger of the fence key + 1 and the server's
// TIME in microseconds + 1, written back to the fence key: tokens keep growing
// when Redis restarts without the data, or from a snapshot (RDB, AOF
// everysec) older than the last grants, as long as the primary's clock does
// not go back. It forgets the owner's last freeing release (the owner's last
// request is this one now), and PUBLISHes "g<token> <owner>" so that waiters
// of that owner on any replica are granted as reentrant acquires.
inline constexpr char kAcquireScript[] = R"lua(
local lock, fence, freed = KEYS[1], KEYS[2], KEYS[3]
local owner, ttl, rid, mode, fttl = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local h = redis.call('HMGET', lock, 'owner', 'count', 'token', 'rkind', 'rid', 'rcount', 'rttl')
local function keep_fence()
  if fttl == '0' then redis.call('PERSIST', fence) else redis.call('PEXPIRE', fence, fttl) end
end
local function remember(count)
  if rid == '' then
    redis.call('HDEL', lock, 'rkind', 'rid', 'rcount', 'rttl')
  else
    redis.call('HSET', lock, 'rkind', 'a', 'rid', rid, 'rcount', count, 'rttl', ttl)
  end
end
if not h[1] then
  -- mode 'r' (re-enter only): a free lock is left to the head of the queue
  if mode == 'r' then return {0, '', 0, '0', -2} end
  local t = redis.call('TIME')
  local now = t[1] .. string.format('%06d', tonumber(t[2]))
  local last = redis.call('GET', fence)
  if not last or #last < #now or (#last == #now and last < now) then
    redis.call('SET', fence, now)
  end
  redis.call('INCR', fence)
  local token = redis.call('GET', fence)
  redis.call('DEL', lock)
  redis.call('HSET', lock, 'owner', owner, 'count', 1, 'token', token)
  remember(1)
  redis.call('PEXPIRE', lock, ttl)
  keep_fence()
  redis.call('HDEL', freed, owner)
  redis.call('PUBLISH', ARGV[6], 'g' .. token .. ' ' .. owner)
  return {1, owner, 1, token, tonumber(ttl)}
end
if h[1] == owner then
  if rid ~= '' and h[4] == 'a' and h[5] == rid then
    return {1, owner, tonumber(h[6]), h[3], tonumber(h[7])}
  end
  local c = redis.call('HINCRBY', lock, 'count', 1)
  remember(c)
  redis.call('PEXPIRE', lock, ttl)
  keep_fence()
  return {1, owner, c, h[3], tonumber(ttl)}
end
return {0, h[1], tonumber(h[2]), h[3], redis.call('PTTL', lock)}
)lua";

// Gives up one hold, or undoes one Acquire.
// KEYS: lock, freed.
// ARGV: owner, request_id, release_memory_ms, channel, acquire_request_id,
//   token ('0': any hold of the owner).
// Returns {code, hold_count[, token]}: code 1 freed (and the freed holding's
// token PUBLISHed to the channel, and returned), 0 decremented, 2 nothing to
// undo (hold_count is the owner's), -1 not held (free), -2 held by another
// owner, -3 the owner's hold has another token. A repeat of the owner's last
// request_id returns its result and changes nothing (whatever the token);
// for the release that freed the lock, the freed hash remembers it per owner
// (the last 64 owners within release_memory), also after the lock went to
// another owner.
// With acquire_request_id: if the owner's last request is that Acquire (and
// the hold has the token, unless '0'), one hold is given back (codes 1 and
// 0), else code 2; never -1/-2/-3.
inline constexpr char kReleaseScript[] = R"lua(
local lock, freed = KEYS[1], KEYS[2]
local owner, rid, arid, want = ARGV[1], ARGV[2], ARGV[5], ARGV[6]
local h = redis.call('HMGET', lock, 'owner', 'rkind', 'rid', 'rcount', 'token', 'count')
local function free()
  redis.call('DEL', lock)
  redis.call('PUBLISH', ARGV[4], h[5])
  return {1, 0, h[5]}
end
if arid ~= '' then
  if h[1] ~= owner then return {2, 0} end
  if h[2] ~= 'a' or h[3] ~= arid or (want ~= '0' and h[5] ~= want) then
    return {2, tonumber(h[6])}
  end
  local c = redis.call('HINCRBY', lock, 'count', -1)
  if c > 0 then
    redis.call('HDEL', lock, 'rkind', 'rid', 'rcount', 'rttl')
    return {0, c}
  end
  return free()
end
if h[1] ~= owner then
  if rid ~= '' and redis.call('HGET', freed, owner) == rid then return {1, 0} end
  if not h[1] then return {-1, 0} end
  return {-2, 0}
end
if rid ~= '' and h[2] == 'r' and h[3] == rid then return {0, tonumber(h[4])} end
if want ~= '0' and h[5] ~= want then return {-3, 0} end
local c = redis.call('HINCRBY', lock, 'count', -1)
if c > 0 then
  if rid == '' then
    redis.call('HDEL', lock, 'rkind', 'rid', 'rcount', 'rttl')
  else
    redis.call('HSET', lock, 'rkind', 'r', 'rid', rid, 'rcount', c)
  end
  return {0, c}
end
if rid ~= '' then
  if redis.call('HLEN', freed) >= 64 then redis.call('DEL', freed) end
  redis.call('HSET', freed, owner, rid)
  redis.call('PEXPIRE', freed, ARGV[3])
end
return free()
)lua";

// Resets the lease of a held lock.
// KEYS: lock, fence. ARGV: owner, lease_ms, fence_ttl_ms ('0': persist),
//   token ('0': any hold of the owner).
// Returns {code, token}: 1 renewed, -1 free, -2 held by another owner, -3
// the owner's hold has another token.
inline constexpr char kRenewScript[] = R"lua(
local h = redis.call('HMGET', KEYS[1], 'owner', 'token')
if not h[1] then return {-1, ''} end
if h[1] ~= ARGV[1] then return {-2, ''} end
if ARGV[4] ~= '0' and h[2] ~= ARGV[4] then return {-3, ''} end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if ARGV[3] == '0' then redis.call('PERSIST', KEYS[2]) else redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
return {1, h[2]}
)lua";

// One lock's state. KEYS: lock.
// Returns {} when free, else {owner, hold_count, token, pttl_ms}.
inline constexpr char kDescribeScript[] = R"lua(
local h = redis.call('HMGET', KEYS[1], 'owner', 'count', 'token')
if not h[1] then return {} end
return {h[1], tonumber(h[2]), h[3], redis.call('PTTL', KEYS[1])}
)lua";

// Frees a lock whatever its owner and hold count (ForceRelease).
// KEYS: lock. ARGV: token ('0': any), channel.
// Returns {} when free, else {owner, hold_count, token, pttl_ms, code}:
// code 1 freed (and the freed token PUBLISHed, as a freeing release does),
// 0 not freed because the holder's token is not ARGV[1].
inline constexpr char kForceReleaseScript[] = R"lua(
local h = redis.call('HMGET', KEYS[1], 'owner', 'count', 'token')
if not h[1] then return {} end
local pttl = redis.call('PTTL', KEYS[1])
if ARGV[1] ~= '0' and h[3] ~= ARGV[1] then return {h[1], tonumber(h[2]), h[3], pttl, 0} end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], h[3])
return {h[1], tonumber(h[2]), h[3], pttl, 1}
)lua";

// `script` as cluster mode runs it: PUBLISH becomes SPUBLISH (sharded
// pub/sub), so a message goes only to the node serving the lock's slot (and
// its replicas), where lockd SSUBSCRIBEs the channel, instead of to every
// node of the cluster.
inline std::string Sharded(absl::string_view script) {
  return absl::StrReplaceAll(script, {{"redis.call('PUBLISH',", "redis.call('SPUBLISH',"}});
}

}  // namespace lockd::redis

#endif  // LOCKD_BACKENDS_REDIS_SCRIPTS_H_
