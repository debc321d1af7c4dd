// The Redis backend's script replies (scripts.h) turned into Backend results:
// one function per script, each answering the reply's error, or kInternal
// (through redis::RedisError, naming the operation and lock) for a reply of
// an unexpected shape. Stateless and thread-safe.

#ifndef LOCKD_BACKENDS_REDIS_REPLIES_H_
#define LOCKD_BACKENDS_REDIS_REPLIES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backends/backend.h"
#include "backends/common/wait_engine.h"
#include "backends/redis/redis_client.h"

namespace lockd::redis {

// The acquire script's reply as a WaitEngine attempt result: granted; or an
// error (a kind, upgrade or permits refusal: `asked_permits` is the call's);
// or not granted, with the lock's state and as holder_remaining the time
// until the first holder's lease or the first queue entry ahead of the call
// ends (infinite if none of them has an end).
TryResult ParseAcquire(const LockKey& key, uint32_t asked_permits, absl::string_view context,
                       absl::StatusOr<ReplyPtr>& reply);

// The release script's reply. `freed_token` is set to the token of the
// holding the release freed, when the script reports it (else 0); `room`
// (if not null) to false when the script reports that no waiter can be
// admitted after it (other readers still hold), else true.
absl::StatusOr<ReleaseResult> ParseRelease(const LockKey& key, absl::StatusOr<ReplyPtr>& reply,
                                           uint64_t* freed_token, bool* room = nullptr);

// The renew script's reply, for a renewal to `lease_ms`.
absl::StatusOr<RenewResult> ParseRenew(const LockKey& key, int64_t lease_ms,
                                       absl::string_view context, absl::StatusOr<ReplyPtr>& reply);

// The describe script's reply: holders, mode, limit and the queue's waiters.
absl::StatusOr<LockState> ParseDescribe(const LockKey& key, absl::string_view context,
                                        absl::StatusOr<ReplyPtr>& reply);

// The force-release script's reply (the state before, and whether it freed).
absl::StatusOr<ForceReleaseResult> ParseForceRelease(const LockKey& key, uint64_t want_token,
                                                     absl::string_view context,
                                                     absl::StatusOr<ReplyPtr>& reply);

// A SCAN reply: the next cursor and the keys of this batch.
bool ParseScan(const redisReply* r, std::string* cursor, const redisReply** keys);

}  // namespace lockd::redis

#endif  // LOCKD_BACKENDS_REDIS_REPLIES_H_
