// What the ZooKeeper backend stores, and how: znode name encoding, contender
// node names and their queue order, and the text kept in znode data. Pure
// functions with no ZooKeeper dependency, so they are unit-tested alone.
//
// Layout (see docs/backends.md, "ZooKeeper"):
//   <root>                          persistent, created on start
//   <root>/<ns>                     container node, one per namespace
//   <root>/<ns>/<name>              container node ("lock node"), one per lock;
//                                   its data is the "freed" tombstone, if any
//   <root>/<ns>/<name>/c-<id>-<kind><seq>
//                                   persistent sequential, one per contender;
//                                   the admitted prefix of the queue holds
//                                   the name (queue_rules.h); its data is a
//                                   NodeData
// <ns> and <name> are EncodeSegment()ed.
//
// Thread-safe: everything here is a pure function of its arguments except
// NewAttemptPrefix(), which draws from a thread-safe random source.

#ifndef LOCKD_BACKENDS_ZOOKEEPER_ZK_CODEC_H_
#define LOCKD_BACKENDS_ZOOKEEPER_ZK_CODEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "backends/backend.h"

namespace lockd::zk {

// Encodes any byte string as one valid znode name: bytes in [A-Za-z0-9_-]
// stay, every other byte (including '.', '/', '%', spaces and all non-ASCII
// bytes) becomes %XX with upper-case hex. The result is never empty for a
// non-empty input, never "." or "..", and contains no character ZooKeeper
// rejects.
std::string EncodeSegment(absl::string_view raw);

// The inverse of EncodeSegment. Returns false (leaving *raw unspecified) for
// text EncodeSegment never produces.
bool DecodeSegment(absl::string_view encoded, std::string* raw);

// What a contender asks for. It is part of the node's name, so that a
// listing alone shows every contender's kind (no read per node): an
// exclusive lock (limit 0; the only kind before shared locks and
// semaphores, so every older node reads as one), a shared lock, or
// `permits` of a semaphore of `limit` permits.
struct ContenderKind {
  LockMode mode = LockMode::kExclusive;  // kExclusive for a semaphore
  uint32_t limit = 0;                    // non-zero: a semaphore
  uint32_t permits = 0;                  // semaphore only

  bool exclusive_lock() const { return limit == 0 && mode == LockMode::kExclusive; }
  bool shared_lock() const { return limit == 0 && mode == LockMode::kShared; }
  bool semaphore() const { return limit != 0; }
  // A lock (either mode) and a semaphore of one limit are one kind each.
  bool SameKindAs(const ContenderKind& o) const { return limit == o.limit; }
  friend bool operator==(const ContenderKind& a, const ContenderKind& b) {
    return a.mode == b.mode && a.limit == b.limit && a.permits == b.permits;
  }
};

// The kind tag in a contender name: "" for an exclusive lock, "r-" for a
// shared lock, "p<permits>of<limit>-" for a semaphore.
std::string KindTag(const ContenderKind& kind);

// A contender node name: "c-" + 32 hex digits (the attempt id) + "-" + the
// kind tag, to which ZooKeeper appends a 10-character sequence number. The attempt id lets
// a client that lost the reply to its create find the node it made (Curator's
// "protected" mode). Its first 16 digits are OwnerTag(owner), so that a
// listing alone shows which contenders (probably) share an owner; the other
// 16 are random. Without an owner, all 32 are random.
// NewAttemptPrefix(owner, kind) is NewAttemptPrefix(owner) + KindTag(kind).
std::string NewAttemptPrefix(absl::string_view owner, const ContenderKind& kind);
std::string NewAttemptPrefix(absl::string_view owner);
std::string NewAttemptPrefix();

// A stable 64-bit hash of an owner (FNV-1a; the same in every process and
// version).
uint64_t OwnerTag(absl::string_view owner);
// The owner tag in a contender name or attempt prefix; false if `name` does
// not start with "c-" and 16 hex digits. Nodes of older versions carry a
// random tag: a match is a hint, to be confirmed by the node's data.
bool ContenderOwnerTag(absl::string_view name, uint64_t* tag);

struct Contender {
  std::string name;  // the child name, e.g. "c-0123...-r-0000000042"
  int32_t seq = 0;   // the sequence ZooKeeper appended
  ContenderKind kind;
};

// Parses a child name of a lock node. False for names that are not
// contender nodes (such children are ignored).
bool ParseContender(absl::string_view name, Contender* out);
// The same check, giving only the sequence (no copy of the name), and the
// kind if `kind` is not null.
bool ContenderSeq(absl::string_view name, int32_t* seq, ContenderKind* kind = nullptr);

// True if sequence `a` was issued before `b`. ZooKeeper's sequence is the
// parent's 32-bit cversion and wraps to negative values after 2^31 child
// changes; comparing with serial-number arithmetic (RFC 1982) keeps the
// queue order right across the wrap, as long as the live contenders of one
// lock span fewer than 2^31 sequence numbers.
inline bool SeqBefore(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) - static_cast<uint32_t>(b)) < 0;
}

// The contender children in queue order (lowest sequence first); other
// children are dropped. Takes the names by value: pass an rvalue to move
// them instead of copying (a lock with W waiters has W of them).
std::vector<Contender> QueueOrder(std::vector<std::string> children);

// The data of a contender node: who contends, and, once it is the lowest
// node, the lock's holder state. Written whole at create; the holder's
// replica (or any replica serving a Renew/Release/reentrant Acquire)
// rewrites it with a version check.
struct NodeData {
  enum class Last { kNone, kAcquire, kRelease };

  std::string owner;
  uint32_t holds = 1;  // hold count once this node holds the lock
  int64_t ttl_ms = 0;  // the lease, counted from `lease`'s first sighting
  // Lease epoch: bumped by every write that starts a new lease (renew,
  // reentrant acquire). Replicas time a lease from the moment they first saw
  // the node as holder with this epoch, on their own monotonic clock.
  uint64_t lease = 0;
  // True while the node waits in the queue; its replica clears it (starting
  // lease epoch 1) when it grants the node's call. A lowest node still marked
  // waiting is a grant nobody has answered yet: if its replica does not
  // confirm it within observer_grace (the replica died, or is cut off from
  // ZooKeeper, or the call ended), any replica deletes it. Nodes that were
  // lowest at once are never marked.
  bool waiting = false;
  // The owner's last request that carried a request_id, for idempotent
  // retries, with the result it returned.
  Last last = Last::kNone;
  std::string last_id;
  uint32_t last_holds = 0;
  int64_t last_ttl_ms = 0;

  friend bool operator==(const NodeData& a, const NodeData& b) {
    return a.owner == b.owner && a.holds == b.holds && a.ttl_ms == b.ttl_ms && a.lease == b.lease &&
           a.waiting == b.waiting && a.last == b.last && a.last_id == b.last_id &&
           a.last_holds == b.last_holds && a.last_ttl_ms == b.last_ttl_ms;
  }
};

std::string EncodeNodeData(const NodeData& d);
// False if `text` is not a NodeData this version can read.
bool DecodeNodeData(absl::string_view text, NodeData* out);

// Kept in a lock node's data by a Release with a request_id that freed the
// lock, so that a retry of it (on any replica) answers "released" again. It
// is only valid while the lock node has had no child created or deleted
// since (its pzxid equals its mzxid, both set by the same multi).
struct Tombstone {
  std::string owner;
  std::string request_id;
};

std::string EncodeTombstone(const Tombstone& t);
bool DecodeTombstone(absl::string_view text, Tombstone* out);

}  // namespace lockd::zk

#endif  // LOCKD_BACKENDS_ZOOKEEPER_ZK_CODEC_H_
