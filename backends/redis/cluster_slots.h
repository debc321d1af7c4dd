// Redis Cluster's key-to-node mapping, for the redis backend's cluster mode:
// hash slots (CRC16/XMODEM of the key or its hash tag, modulo 16384, as the
// Redis Cluster specification defines them), the slot map read from a
// CLUSTER SLOTS reply, and the -MOVED / -ASK redirections. Pure functions and
// values, no I/O; thread-compatible.
//
// Internal to backends/redis; the backend's contract is redis_backend.h.

#ifndef LOCKD_BACKENDS_REDIS_CLUSTER_SLOTS_H_
#define LOCKD_BACKENDS_REDIS_CLUSTER_SLOTS_H_

#include <hiredis/hiredis.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backends/redis/redis_client.h"

namespace lockd::redis {

inline constexpr int kClusterSlots = 16384;

// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0, no reflection),
// the checksum Redis Cluster hashes keys with. Crc16("123456789") == 0x31C3.
uint16_t Crc16(absl::string_view data);

// The slot of `key`: Crc16 of its hash tag (the bytes between the first `{`
// and the first `}` after it, when there are any) or else of the whole key,
// modulo 16384.
int HashSlot(absl::string_view key);

// "host:port", the name a node goes by in the maps below.
std::string NodeName(const Endpoint& e);

// Which primary serves each slot.
class SlotMap {
 public:
  // An empty map: no slot has a primary.
  SlotMap();

  // The primaries, each once, in the order first seen.
  const std::vector<Endpoint>& primaries() const { return primaries_; }
  // The index into primaries() of the primary serving `slot`; -1 if none.
  // REQUIRES: 0 <= slot < kClusterSlots.
  int owner(int slot) const { return owner_[static_cast<size_t>(slot)]; }
  // True when every slot has a primary.
  bool complete() const;
  // Number of slots without a primary.
  int unassigned() const;
  // The lowest slot each primary serves (one per primaries() entry; -1 for
  // a primary that serves none).
  std::vector<int> FirstSlots() const;

  // Makes `primary` serve [first, last]. REQUIRES: 0 <= first <= last < kClusterSlots.
  void Assign(int first, int last, const Endpoint& primary);

 private:
  std::vector<Endpoint> primaries_;
  std::vector<int16_t> owner_;  // kClusterSlots entries
};

// The slot map in a CLUSTER SLOTS reply: an array of
// [first, last, [host, port, id, ...] (the primary), replicas...]. A node
// whose host is empty or "?" is reachable at `queried`'s host (Redis leaves
// the host out when it does not know the address it is reached at).
// Errors: kInternal naming the malformed part (an error reply is passed to
// RedisError with `context`).
absl::StatusOr<SlotMap> ParseClusterSlots(const redisReply* reply, const Endpoint& queried,
                                          absl::string_view context);

// A -MOVED or -ASK error reply: the slot and the node to ask instead.
struct Redirect {
  enum class Kind { kMoved, kAsk };
  Kind kind = Kind::kMoved;
  int slot = 0;
  Endpoint target;
};

// The redirection in an error reply's text ("MOVED 3999 127.0.0.1:6381",
// "ASK 3999 [::1]:6381"); nullopt for any other text or a malformed one.
std::optional<Redirect> ParseRedirect(absl::string_view error_text);

// True for an error reply that says "run this elsewhere or later": -MOVED,
// -ASK, or -TRYAGAIN (a multi-key command during a slot migration). The
// command did not run.
bool IsClusterRedirect(const redisReply* reply);

}  // namespace lockd::redis

#endif  // LOCKD_BACKENDS_REDIS_CLUSTER_SLOTS_H_
