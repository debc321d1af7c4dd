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

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"

namespace lockd::redis {

// The acquire script's try argument: whether the caller may take a new
// grant. kMayTakeFree ('n'): a first try, or the head of this replica's
// waiters. kReenterOnly ('r'): a waiter behind others of this replica; it
// must not jump that queue, so it only re-enters a lock its owner holds (or
// replays a request_id) and leaves a new grant to the head.
// kJoinReaders ('j'): a SHARED waiter tried beside the others of its replica
// right after a SHARED grant (WaitEngine's joiners); it may take a place
// beside the holders, but, as its replica's calls do not come one at a
// time here, it passes no entry ahead of its own but its replica's SHARED
// ones (else the next head's attempt, with 'n', admits it).
inline constexpr char kMayTakeFree[] = "n";
inline constexpr char kReenterOnly[] = "r";
inline constexpr char kJoinReaders[] = "j";

// The Lua every script below starts with (Prelude() prepends it): clock()
// reads TIME once per script (now_ms, and now_us in microseconds); the
// records of a lock held SHARED or as a semaphore (kind S or M, keys.h), one
// hash field h:<owner> per holder, a JSON object {t: token (a string), c:
// hold count, p: permits, e: lease end in ms of the Redis clock, k/i/n/l:
// the holder's last request's kind (a or r), request_id, count and lease}.
// A holder whose lease ended is ignored, and dropped by the scripts that
// read every record (`holders` with `drop`). The key's TTL covers every
// holder's lease and may outlast them: a SHARED grant, a renewal and a
// release read the owner's record only (`own`) and never shorten it
// (`extend_to`), so their cost does not grow with the number of readers.
//   own(key, owner) is the owner's record while its lease runs, else nil.
//   state(lock, out) appends {mode, limit, holders...} to `out`: mode X (one
//   exclusive holder), S, M or '' (free); per holder owner, mode (X or S),
//   count, permits, token, lease ms left (-1: no TTL). state_of(kind, limit,
//   hs, out) appends the same from live records already read.
inline constexpr char kPrelude[] = R"lua(
local now_ms, now_us
local function clock()
  if not now_ms then
    local t = redis.call('TIME')
    now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return now_ms
end
local function holders(key, drop)
  local all = redis.call('HGETALL', key)
  local out, n = {}, 0
  for i = 1, #all, 2 do
    if all[i]:sub(1, 2) == 'h:' then
      local r = cjson.decode(all[i + 1])
      if r.e > clock() then
        out[all[i]:sub(3)] = r
        n = n + 1
      elseif drop then
        redis.call('HDEL', key, all[i])
      end
    end
  end
  if n == 0 and drop then redis.call('DEL', key) end
  return out, n
end
local function save(key, owner, r) redis.call('HSET', key, 'h:' .. owner, cjson.encode(r)) end
local function own(key, owner)
  local raw = redis.call('HGET', key, 'h:' .. owner)
  local r = raw and cjson.decode(raw)
  if r and r.e > clock() then return r end
end
local function extend_to(key, ms)
  if redis.call('PTTL', key) < tonumber(ms) then redis.call('PEXPIRE', key, ms) end
end
local function expire_at_last(key, hs)
  local last = 0
  for _, r in pairs(hs) do if r.e > last then last = r.e end end
  redis.call('PEXPIRE', key, math.max(1, last - clock()))
end
local function state_of(kind, limit, hs, out)
  out[#out + 1] = kind
  out[#out + 1] = tonumber(limit or '0')
  local m = kind == 'S' and 'S' or 'X'
  for o, r in pairs(hs) do
    for _, v in ipairs({o, m, r.c, r.p, r.t, r.e - clock()}) do out[#out + 1] = v end
  end
  return out
end
local function state(lock, out)
  local h = redis.call('HMGET', lock, 'owner', 'count', 'token', 'kind', 'limit')
  if h[1] then
    for _, v in ipairs({'X', 0, h[1], 'X', tonumber(h[2]), 0, h[3], redis.call('PTTL', lock)}) do
      out[#out + 1] = v
    end
    return out
  end
  local hs, n = {}, 0
  if h[4] then hs, n = holders(lock, false) end
  if n == 0 then
    out[#out + 1] = ''
    out[#out + 1] = 0
    return out
  end
  return state_of(h[4], h[5], hs, out)
end
)lua";

// Grants, re-enters or reports a lock, a shared lock or a semaphore.
// KEYS: lock, fence, freed, queue, qlife.
// ARGV: owner, lease_ms, request_id ('' = none), try (kMayTakeFree or
//   kReenterOnly), fence_ttl_ms ('0': the fence key never expires), channel,
//   mode (X, S or M: a semaphore), limit, permits, member (this call's queue
//   member, keys.h), join ('1': the call waits, so it takes a place in the
//   queue when not granted), member_lifetime_ms.
// Returns {1, hold_count, token, ms} when granted (ms: the lease in force; a
//   repeat of the owner's last request_id returns that request's result and
//   changes nothing), else {0, code, extra, retry_ms, state...}: code ''
//   (not now; retry_ms: when the first queue entry of another replica ahead
//   of this call ends unless extended, -1 if none), K (kind mismatch, extra:
//   the holders' limit), U (an upgrade would block), P (permits mismatch,
//   extra: the permits held); state as state() (kPrelude) appends it.
// Admission (docs/api.md "Shared locks, semaphores and all-or-nothing acquires"):
// a new grant needs the holders to admit it and no queue entry
// ahead of it that it may not pass: none at all for EXCLUSIVE and semaphore
// acquires, only SHARED ones for a SHARED acquire. For a call that waits
// (join '1') "ahead" means ahead of the first entry of its replica: a
// replica's calls are served in that replica's own order (it sends only its
// first one as kMayTakeFree), which may differ from the order their first
// attempts reached Redis, so its entries count as one place, its earliest
// (without that, two replicas could each wait behind the other's entry). A
// grant leaves the queue; after a SHARED or semaphore grant with entries
// left, "w" is PUBLISHed so that the next ones try too.
// A first grant's token is the larger of the fence key + 1 and the server's
// TIME in microseconds, written back to the fence key: tokens keep growing
// when Redis restarts without the data, or from a snapshot (RDB, AOF
// everysec) older than the last grants, as long as the primary's clock does
// not go back. It forgets the owner's last freeing release (the owner's last
// request is this one now), and PUBLISHes "g<token> <owner>" ("s<token>
// <owner>" for a SHARED grant) so that waiters of that owner on any replica
// are granted as reentrant acquires.
// A call takes its place in the queue scored by the Redis clock in
// microseconds at its first place-taking attempt (a clock stepping back can
// put a later call ahead: unfair, never unsafe). Admission reads the first
// entry only, unless it belongs to another replica.
// The uncontended EXCLUSIVE grant writes the lock and fence keys only, as
// before shared locks existed (the queue is only read: ZRANGE of one entry).
// Each redis.call costs several microseconds inside Redis, on the hand-off's
// critical path: the paths of an EXCLUSIVE acquire make as few as they can.
inline constexpr char kAcquireScript[] = R"lua(
local lock, fence, freed, queue, qlife = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local owner, ttl, rid, try, fttl, chan = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local mode, limit, permits = ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9])
local me, join, life = ARGV[10], ARGV[11], ARGV[12]
local rep = join == '1' and me:match('^[^|]*|')
local may_take = try == 'n' or try == 'j'
local h = redis.call('HMGET', lock, 'owner', 'count', 'token', 'rkind', 'rid', 'rcount', 'rttl',
                     'kind', 'limit')
-- The park of a call on an exclusive lock held by another owner, when no
-- other replica's entry is first in the queue: the commonest attempt under
-- contention, answered before the functions below are even defined.
if h[1] and h[1] ~= owner and mode ~= 'M' then
  local first = join == '1' and redis.call('ZRANGE', queue, 0, 0)[1]
  if not first or first == me or (rep and first:sub(1, #rep) == rep) then
    if join == '1' then
      local t = redis.call('TIME')
      redis.call('ZADD', queue, 'NX', tonumber(t[1]) * 1000000 + tonumber(t[2]), me)
      redis.call('ZADD', qlife, tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(life), me)
      redis.call('PEXPIRE', queue, life)
      redis.call('PEXPIRE', qlife, life)
    end
    return {0, '', 0, -1, 'X', 0, h[1], 'X', tonumber(h[2]), 0, h[3], redis.call('PTTL', lock)}
  end
end
--@prelude
local queued = true  -- false once the queue was read empty
local read_hs        -- the live records, once this script has read them all
local function keep_fence()
  if fttl == '0' then redis.call('PERSIST', fence) else redis.call('PEXPIRE', fence, fttl) end
end
-- beside other holders: never shorten the fence key's life
local function keep_fence_max()
  if fttl == '0' then
    redis.call('PERSIST', fence)
  elseif redis.call('PTTL', fence) < tonumber(fttl) then
    redis.call('PEXPIRE', fence, fttl)
  end
end
local function remember(count)
  if rid == '' then
    redis.call('HDEL', lock, 'rkind', 'rid', 'rcount', 'rttl')
  else
    redis.call('HSET', lock, 'rkind', 'a', 'rid', rid, 'rcount', count, 'rttl', ttl)
  end
end
local function remember_in(r, count)
  if rid == '' then
    r.k, r.i, r.n, r.l = nil, nil, nil, nil
  else
    r.k, r.i, r.n, r.l = 'a', rid, count, tonumber(ttl)
  end
end
-- max(fence + 1, TIME in microseconds), written to the fence key with its
-- life (beside other holders: never shortened). Tokens stay strings: Lua
-- numbers print with 14 digits.
local function new_token(beside)
  local t = redis.call('TIME')
  local token = t[1] .. ('000000'):sub(#t[2] + 1) .. t[2]
  local last = redis.call('GET', fence)
  local px = fttl ~= '0' and fttl
  if px and beside then
    local left = redis.call('PTTL', fence)
    if left > tonumber(fttl) then px = left end
  end
  if last and (#last > #token or (#last == #token and last >= token)) then
    redis.call('INCR', fence)
    token = redis.call('GET', fence)
  end
  if px then redis.call('SET', fence, token, 'PX', px) else redis.call('SET', fence, token) end
  return token
end
local function leave()
  if queued and redis.call('ZREM', queue, me) == 1 then redis.call('ZREM', qlife, me) end
end
local function purge()
  local dead = redis.call('ZRANGEBYSCORE', qlife, '-inf', clock())
  for _, m in ipairs(dead) do
    redis.call('ZREM', queue, m)
    redis.call('ZREM', qlife, m)
  end
end
local function mine(m) return m == me or (rep and m:sub(1, #rep) == rep) end
-- the entries this call waits behind; reads only the first when it is mine
local function ahead()
  if try == 'j' then
    local all, out = redis.call('ZRANGE', queue, 0, -1), {}
    queued = #all > 0
    for _, m in ipairs(all) do
      if m == me then break end
      if not (rep and m:sub(1, #rep) == rep and m:sub(#rep + 1, #rep + 2) == 'S|') then
        out[#out + 1] = m
      end
    end
    return out
  end
  local first = redis.call('ZRANGE', queue, 0, 0)[1]
  queued = first ~= nil
  if not first or mine(first) then return {} end
  local out = {}
  for _, m in ipairs(redis.call('ZRANGE', queue, 0, -1)) do
    if mine(m) then break end
    out[#out + 1] = m
  end
  return out
end
local function admits(list)
  if mode ~= 'S' then return #list == 0 end
  for _, m in ipairs(list) do
    if not m:find('^[^|]*|S|') then return false end
  end
  return true
end
local function fail(code, extra)
  leave()
  return {0, code, extra, -1}
end
-- not now: a call that waits takes (or keeps) its place, the queue's order
-- being the Redis clock's (microseconds) at its first place-taking attempt;
-- retry is when the first entry of another replica ahead of it ends (dead
-- ones are dropped by the next attempt that may take the lock). Every place
-- taken (and every extension) gives both keys a whole entry's life: a queue
-- that never empties lives on while places come and go, whoever took them.
local function wait_reply(before)
  local retry = -1
  if join == '1' then
    before = before or ahead()
    clock()
    redis.call('ZADD', queue, 'NX', now_us, me)
    redis.call('ZADD', qlife, now_ms + tonumber(life), me)
    redis.call('PEXPIRE', queue, life)
    redis.call('PEXPIRE', qlife, life)
    queued = true
    for _, m in ipairs(before) do
      local e = tonumber(redis.call('ZSCORE', qlife, m) or '0')
      if e > now_ms and (retry < 0 or e - now_ms < retry) then retry = e - now_ms end
    end
  end
  if h[1] then
    return {0, '', 0, retry, 'X', 0, h[1], 'X', tonumber(h[2]), 0, h[3], redis.call('PTTL', lock)}
  end
  if read_hs then return state_of(h[8], h[9], read_hs, {0, '', 0, retry}) end
  return state(lock, {0, '', 0, retry})
end
local function granted(token, count)
  redis.call('PUBLISH', chan, (mode == 'S' and 's' or 'g') .. token .. ' ' .. owner)
  leave()
  if mode ~= 'X' and queued and redis.call('EXISTS', queue) == 1 then
    redis.call('PUBLISH', chan, 'w')
  end
  return {1, count, token, tonumber(ttl)}
end

if h[1] then
  if mode == 'M' then return fail('K', 0) end
  if h[1] == owner then
    if rid ~= '' and h[4] == 'a' and h[5] == rid then
      return {1, tonumber(h[6]), h[3], tonumber(h[7])}
    end
    local c = redis.call('HINCRBY', lock, 'count', 1)
    remember(c)
    redis.call('PEXPIRE', lock, ttl)
    keep_fence()
    leave()
    return {1, c, h[3], tonumber(ttl)}
  end
  return wait_reply()
end

-- a hold's count and lease grow by one re-entry; `hs` false: the others
-- were not read
local function reenter(r)
  r.c = r.c + 1
  r.e = clock() + tonumber(ttl)
  remember_in(r, r.c)
  save(lock, owner, r)
  extend_to(lock, ttl)
  keep_fence_max()
  leave()
  return {1, r.c, r.t, tonumber(ttl)}
end

local hs, n = {}, 0
if mode == 'S' and h[8] ~= 'M' then
  -- SHARED where no semaphore is: only the owner's record matters (n -1:
  -- the other holders were not read)
  if h[8] then n = -1 end
  local r = own(lock, owner)
  if r then
    if rid ~= '' and r.k == 'a' and r.i == rid then return {1, r.n, r.t, r.l} end
    return reenter(r)
  end
  if not may_take then return wait_reply() end
elseif h[8] then
  hs, n = holders(lock, true)
  if n > 0 then read_hs = hs end
end
if n > 0 then
  local lim = tonumber(h[9] or '0')
  if (mode == 'M') ~= (h[8] == 'M') or (mode == 'M' and lim ~= limit) then
    return fail('K', lim)
  end
  local r = hs[owner]
  if r then
    if mode == 'M' and r.p ~= permits then return fail('P', r.p) end
    if rid ~= '' and r.k == 'a' and r.i == rid then return {1, r.n, r.t, r.l} end
    if mode == 'X' then
      -- an upgrade: only when alone and nobody else waits
      if n > 1 then return fail('U', 0) end
      if redis.call('EXISTS', queue) == 1 then
        purge()
        for _, m in ipairs(redis.call('ZRANGE', queue, 0, -1)) do
          if m:match('^[^|]*|[^|]*|(.*)$') ~= owner then return fail('U', 0) end
        end
      end
      -- others of this replica wait (try: kReenterOnly)
      if try ~= 'n' then return fail('U', 0) end
      local token = new_token(true)
      redis.call('DEL', lock)
      redis.call('HSET', lock, 'owner', owner, 'count', r.c + 1, 'token', token)
      remember(r.c + 1)
      redis.call('PEXPIRE', lock, ttl)
      return granted(token, r.c + 1)
    end
    return reenter(r)
  end
  if not may_take or mode == 'X' then return wait_reply() end
  if mode == 'M' then
    local used = permits
    for _, o in pairs(hs) do used = used + o.p end
    if used > limit then return wait_reply() end
  end
elseif n == 0 and not may_take then
  return wait_reply()
end

local before = ahead()
if not admits(before) then
  purge()
  before = ahead()
  if not admits(before) then return wait_reply(before) end
end
local token = new_token(mode ~= 'X')
-- a lock without holders has no key, or only the fields of earlier requests
if n == 0 and (h[2] or h[4] or h[9]) then redis.call('DEL', lock) end
redis.call('HDEL', freed, owner)
if mode == 'X' then
  if rid == '' then
    redis.call('HSET', lock, 'owner', owner, 'count', 1, 'token', token)
  else
    redis.call('HSET', lock, 'owner', owner, 'count', 1, 'token', token,
               'rkind', 'a', 'rid', rid, 'rcount', 1, 'rttl', ttl)
  end
  redis.call('PEXPIRE', lock, ttl)
  return granted(token, 1)
end
if n == 0 then redis.call('HSET', lock, 'kind', mode, 'limit', limit) end
local r = {t = token, c = 1, p = permits, e = clock() + tonumber(ttl)}
remember_in(r, 1)
save(lock, owner, r)
extend_to(lock, ttl)
return granted(token, 1)
)lua";

// Gives up one hold, or undoes one Acquire.
// KEYS: lock, freed.
// ARGV: owner, request_id, release_memory_ms, channel, acquire_request_id,
//   token ('0': any hold of the owner).
// Returns {code, hold_count[, token[, room]]}: code 1 freed (and, for an
// EXCLUSIVE hold, the freed holding's token PUBLISHed to the channel and
// returned; for a semaphore hold "w" PUBLISHed; for a SHARED hold "w"
// PUBLISHed unless records of other readers are left: then room is 0, as no
// waiter can be admitted yet: a writer waits for every reader, a reader
// waits only behind a writer), 0 decremented, 2 nothing to undo (hold_count is the owner's), -1
// not held (free), -2 held by others, -3 the owner's hold has another
// token. A repeat of the owner's last request_id returns its result and
// changes nothing (whatever the token); for the release that freed the
// owner's hold, the freed hash remembers it per owner (the last 64 owners
// within release_memory), also after the lock went to another owner.
// With acquire_request_id: if the owner's last request is that Acquire (and
// the hold has the token, unless '0'), one hold is given back (codes 1 and
// 0), else code 2; never -1/-2/-3.
inline constexpr char kReleaseScript[] = R"lua(
local lock, freed = KEYS[1], KEYS[2]
local owner, rid, arid, want = ARGV[1], ARGV[2], ARGV[5], ARGV[6]
local h = redis.call('HMGET', lock, 'owner', 'rkind', 'rid', 'rcount', 'token', 'count', 'kind')
local function free()
  redis.call('DEL', lock)
  redis.call('PUBLISH', ARGV[4], h[5])
  return {1, 0, h[5]}
end
local function remember_freed()
  if rid ~= '' then
    if redis.call('HLEN', freed) >= 64 then redis.call('DEL', freed) end
    redis.call('HSET', freed, owner, rid)
    redis.call('PEXPIRE', freed, ARGV[3])
  end
end
if not h[1] and h[7] then
  local r = own(lock, owner)
  if not r then
    if arid ~= '' then return {2, 0} end
    if rid ~= '' and redis.call('HGET', freed, owner) == rid then return {1, 0} end
    local _, n = holders(lock, true)
    return {n == 0 and -1 or -2, 0}
  end
  if arid ~= '' then
    if r.k ~= 'a' or r.i ~= arid or (want ~= '0' and r.t ~= want) then return {2, r.c} end
  else
    if rid ~= '' and r.k == 'r' and r.i == rid then return {0, r.n} end
    if want ~= '0' and r.t ~= want then return {-3, 0} end
  end
  r.c = r.c - 1
  if r.c > 0 then
    if arid ~= '' or rid == '' then
      r.k, r.i, r.n, r.l = nil, nil, nil, nil
    else
      r.k, r.i, r.n = 'r', rid, r.c
    end
    save(lock, owner, r)
    return {0, r.c}
  end
  if arid == '' then remember_freed() end
  redis.call('HDEL', lock, 'h:' .. owner)
  -- kind and limit left, no record: the lock is free
  local left = redis.call('HLEN', lock)
  if left <= 2 then redis.call('DEL', lock) end
  -- other readers' records left: no waiter can be admitted yet
  if h[7] == 'S' and left > 2 then return {1, 0, '', 0} end
  redis.call('PUBLISH', ARGV[4], 'w')
  return {1, 0}
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
remember_freed()
return free()
)lua";

// Resets the lease of the owner's hold.
// KEYS: lock, fence. ARGV: owner, lease_ms, fence_ttl_ms ('0': persist),
//   token ('0': any hold of the owner).
// Returns {code, token}: 1 renewed, -1 free, -2 held by others, -3 the
// owner's hold has another token.
inline constexpr char kRenewScript[] = R"lua(
local h = redis.call('HMGET', KEYS[1], 'owner', 'token', 'kind')
if not h[1] and h[3] then
  local r = own(KEYS[1], ARGV[1])
  if not r then
    local _, n = holders(KEYS[1], true)
    return {n == 0 and -1 or -2, ''}
  end
  if ARGV[4] ~= '0' and r.t ~= ARGV[4] then return {-3, ''} end
  r.e = clock() + tonumber(ARGV[2])
  save(KEYS[1], ARGV[1], r)
  extend_to(KEYS[1], ARGV[2])
  if ARGV[3] == '0' then
    redis.call('PERSIST', KEYS[2])
  elseif redis.call('PTTL', KEYS[2]) < tonumber(ARGV[3]) then
    redis.call('PEXPIRE', KEYS[2], ARGV[3])
  end
  return {1, r.t}
end
if not h[1] then return {-1, ''} end
if h[1] ~= ARGV[1] then return {-2, ''} end
if ARGV[4] ~= '0' and h[2] ~= ARGV[4] then return {-3, ''} end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if ARGV[3] == '0' then redis.call('PERSIST', KEYS[2]) else redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
return {1, h[2]}
)lua";

// One lock's state. KEYS: lock, qlife.
// Returns {waiters, state...}: the queue entries alive, then as state()
// (kPrelude). Changes nothing.
inline constexpr char kDescribeScript[] = R"lua(
return state(KEYS[1], {redis.call('ZCOUNT', KEYS[2], '(' .. clock(), '+inf')})
)lua";

// Frees every holder of a lock, or the one holder with a token
// (ForceRelease). KEYS: lock, qlife. ARGV: token ('0': every holder),
// channel.
// Returns {code, waiters, state...} (as the describe script, state from
// before): code 1 freed (and PUBLISHed as a release does), 0 no holder has
// the token, -1 free.
inline constexpr char kForceReleaseScript[] = R"lua(
local lock, want = KEYS[1], ARGV[1]
local out = {0, redis.call('ZCOUNT', KEYS[2], '(' .. clock(), '+inf')}
local h = redis.call('HMGET', lock, 'owner', 'token')
state(lock, out)
if out[3] == '' then
  out[1] = -1
  return out
end
if h[1] then
  if want ~= '0' and h[2] ~= want then return out end
  redis.call('DEL', lock)
  redis.call('PUBLISH', ARGV[2], h[2])
  out[1] = 1
  return out
end
if want == '0' then
  redis.call('DEL', lock)
  redis.call('PUBLISH', ARGV[2], 'w')
  out[1] = 1
  return out
end
local hs, n = holders(lock, true)
for o, r in pairs(hs) do
  if r.t == want then
    redis.call('HDEL', lock, 'h:' .. o)
    hs[o] = nil
    if n == 1 then redis.call('DEL', lock) else expire_at_last(lock, hs) end
    redis.call('PUBLISH', ARGV[2], 'w')
    out[1] = 1
    return out
  end
end
return out
)lua";

// Takes a call's entry out of the queue (its wait ended without a grant).
// KEYS: queue, qlife. ARGV: member, channel.
// PUBLISHes "w" when entries were behind it. Returns 1 if it was there.
inline constexpr char kLeaveQueueScript[] = R"lua(
local at = redis.call('ZRANK', KEYS[1], ARGV[1])
if not at then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('ZCARD', KEYS[1]) > at then redis.call('PUBLISH', ARGV[2], 'w') end
return 1
)lua";

// Extends the lifetime of a replica's queue entries of one lock.
// KEYS: queue, qlife. ARGV: lifetime_ms, member...
// Members no longer queued are left out. Returns how many were extended.
inline constexpr char kExtendQueueScript[] = R"lua(
local n = 0
for i = 2, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[2], clock() + tonumber(ARGV[1]), ARGV[i])
    n = n + 1
  end
end
if n > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  redis.call('PEXPIRE', KEYS[2], ARGV[1])
end
return n
)lua";

// Records a replica as live (ReplicaPresence's beat) and counts the others.
// KEYS: replicas (keys.h). ARGV: replica, lifetime_ms. (The only script that
// runs ZREMRANGEBYSCORE: tests count beats by it.)
// Returns the number of other live replicas.
inline constexpr char kPresenceScript[] = R"lua(
local now = clock()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return redis.call('ZCARD', KEYS[1]) - 1
)lua";

// `script` with kPrelude at its line `--@prelude` (so that what comes
// before it runs without defining the prelude's functions), else before it.
inline std::string Prelude(absl::string_view script) {
  constexpr absl::string_view kMark = "\n--@prelude\n";
  size_t at = script.find(kMark);
  if (at == absl::string_view::npos) return absl::StrCat(kPrelude, script);
  return absl::StrCat(script.substr(0, at + 1), kPrelude, script.substr(at + kMark.size()));
}

// `script` as cluster mode runs it: PUBLISH becomes SPUBLISH (sharded
// pub/sub), so a message goes only to the node serving the lock's slot (and
// its replicas), where lockd SSUBSCRIBEs the channel, instead of to every
// node of the cluster.
inline std::string Sharded(absl::string_view script) {
  return absl::StrReplaceAll(script, {{"redis.call('PUBLISH',", "redis.call('SPUBLISH',"}});
}

}  // namespace lockd::redis

#endif  // LOCKD_BACKENDS_REDIS_SCRIPTS_H_
