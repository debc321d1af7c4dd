// Redis key layout of the redis backend. Pure functions, no I/O; thread-safe
// (a KeyCodec is immutable after construction).
//
// For lock (ns, name) under prefix P the backend uses:
//   P:{ns:E}:lock   hash. Held EXCLUSIVE (the format of lockd before shared
//                   locks, unchanged): owner, count, token, and the owner's
//                   last request (rkind, rid, rcount, rttl); PEXPIREs with
//                   the lease. Held SHARED or as a semaphore: kind (S or M),
//                   limit (M), and per holder a field h:<owner>, a JSON
//                   record of its token, count, permits, lease end (Redis
//                   clock, ms) and last request; PEXPIREs with the last
//                   lease to end (scripts.h).
//   P:{ns:E}:fence  the last token (max of a counter and the server clock in
//                   microseconds) of the lock; expires fence_retention after
//                   the end of the lock's last lease.
//   P:{ns:E}:freed  hash owner -> rid of the Releases with a request_id that
//                   freed the lock; expires after release_memory.
//   P:{ns:E}:queue  sorted set: the acquires waiting on the lock, on every
//                   replica, in arrival order (score: the Redis clock in
//                   microseconds when the place was taken); one member per
//                   replica, owner and mode: "<replica>|<X, S or M<permits>>|
//                   <owner>". Written only while calls wait.
//   P:{ns:E}:qlife  sorted set: the same members, scored by the end of their
//                   lifetime (Redis clock, ms), which their replica extends
//                   while they wait; a script drops a member past it.
//   P:{ns:E}:rel    pub/sub channel: the release script PUBLISHes the freed
//                   token when the lock becomes free, the acquire script
//                   "g<token> <owner>" when it is granted ("s<token>
//                   <owner>": granted SHARED), "w" when a
//                   waiter may now be admitted (a shared or semaphore
//                   holder left, a queue entry ahead went away).
//   P:replicas      sorted set: the lockd replicas using this Redis, scored
//                   by the end of their presence (Redis clock, ms), which
//                   each extends every beat (replica_presence.h); a replica
//                   writes queue places only while it sees another.
// where E = EncodeName(name). Everything between the braces is the hash tag,
// so all keys of one lock live in one Redis Cluster slot.
//
// EncodeName keeps every byte except `%`, `{`, `}`, the glob characters
// `* ? [ ] \`, control bytes and DEL, which become `%XX` (upper-case hex).
// It is injective, never produces `}` (so the hash tag always ends where the
// name ends), never produces glob characters (so a name prefix can be used in
// a SCAN MATCH pattern as is), and is a prefix-free byte code: name A starts
// with B exactly when EncodeName(A) starts with EncodeName(B).

#ifndef LOCKD_BACKENDS_REDIS_KEYS_H_
#define LOCKD_BACKENDS_REDIS_KEYS_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "backends/backend.h"

namespace lockd::redis {

std::string EncodeName(absl::string_view name);
// The inverse of EncodeName; nullopt if `encoded` is not an output of it.
std::optional<std::string> DecodeName(absl::string_view encoded);

// OK if `prefix` can be used as a key prefix: 1-64 bytes of [A-Za-z0-9._:/-].
// (No braces, which would move the hash tag, and no glob characters, which
// would need escaping in SCAN patterns.) Otherwise kInvalidArgument naming
// redis.key_prefix.
absl::Status ValidateKeyPrefix(absl::string_view prefix);

// The keys of one lock.
struct LockKeys {
  std::string lock;
  std::string fence;
  std::string freed;
  std::string queue;
  std::string qlife;
  std::string channel;
};

class KeyCodec {
 public:
  // REQUIRES: ValidateKeyPrefix(prefix).ok().
  explicit KeyCodec(std::string prefix) : prefix_(std::move(prefix)) {}

  const std::string& prefix() const { return prefix_; }

  LockKeys KeysFor(const LockKey& key) const;
  std::string ChannelFor(const LockKey& key) const;

  // The lock a release channel belongs to; nullopt if `channel` is not one of
  // this prefix's channels.
  std::optional<LockKey> ParseChannel(absl::string_view channel) const;
  // The lock a `...:lock` key belongs to; nullopt if it is not one of this
  // prefix's lock keys.
  std::optional<LockKey> ParseLockKey(absl::string_view key) const;

  // A SCAN MATCH pattern for the lock keys of namespace `ns` whose names start
  // with `name_prefix` (possibly empty).
  std::string LockKeyPattern(absl::string_view ns, absl::string_view name_prefix) const;
  // A pattern matching every key of this prefix (all namespaces, all kinds).
  std::string AllKeysPattern() const;
  // P:replicas (no hash tag: one key of its own, outside AllKeysPattern()).
  std::string ReplicasKey() const;
  // A PUBSUB CHANNELS pattern matching every release channel of this prefix.
  std::string AllChannelsPattern() const;

 private:
  std::optional<LockKey> Parse(absl::string_view key, absl::string_view suffix) const;
  std::string Tagged(const LockKey& key, absl::string_view suffix) const;

  const std::string prefix_;
};

}  // namespace lockd::redis

#endif  // LOCKD_BACKENDS_REDIS_KEYS_H_
