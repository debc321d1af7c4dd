// The options several backends share, each declared once here: the member
// with its default, its range, its key where it has one, and its help. A
// backend's options struct derives from the parts it has, and its OptionSet
// binds them with BindSharedOptions():
//
//   part            memory  redis  mysql  zookeeper  key
//   WaiterLimit       x       x      x       x       max_waiters (top level,
//                                                    below)
//   ReleaseMemory     x       x      x               none
//   FenceRetention            x      x               <backend>.fence_retention
//
// `max_waiters` is one key of lockd's configuration, not one per backend:
// service/config.cc binds it with BindMaxWaitersKey() and applies it to
// whichever backend runs; a backend's own set only checks the range.

#ifndef LOCKD_BACKENDS_COMMON_SHARED_OPTIONS_H_
#define LOCKD_BACKENDS_COMMON_SHARED_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "absl/time/time.h"
#include "backends/common/options.h"

namespace lockd {

// Parked Acquire calls allowed at once unless configured otherwise.
inline constexpr size_t kDefaultMaxWaiters = 100000;
// The range of max_waiters.
inline constexpr int64_t kMinMaxWaiters = 1;
inline constexpr int64_t kMaxMaxWaiters = 100000000;

// Every backend.
struct WaiterLimit {
  // Acquire calls waiting at once (as the backend's waiter registry counts
  // them); one more gets kResourceExhausted (TooManyWaitersError).
  size_t max_waiters = kDefaultMaxWaiters;
};

// The backends that remember a Release that freed a lock (memory, Redis,
// MySQL; ZooKeeper keeps a tombstone in the lock node instead).
struct ReleaseMemory {
  // How long the result of a Release (with a request_id) that freed a lock
  // is remembered for retries. Not negative.
  absl::Duration release_memory = absl::Minutes(5);
};

// The backends that keep a fencing counter per lock name (Redis, MySQL).
struct FenceRetention {
  // How long a lock name's fencing counter is kept once no lease uses it
  // (each backend's header says from when, and what keeps tokens growing
  // after it is collected); zero keeps counters forever. Not negative.
  absl::Duration fence_retention = absl::Hours(24);
};

// Binds the key `max_waiters` to `member` (lockd's configuration has it once,
// at the top level).
template <typename T>
OptionSet<T>& BindMaxWaitersKey(OptionSet<T>& set, size_t T::*member) {
  return set.Int("max_waiters", member, kMinMaxWaiters, kMaxMaxWaiters,
                 "waiting Acquire calls allowed at once (more: RESOURCE_EXHAUSTED)");
}

// Binds the shared parts T derives from into `set`, the OptionSet of the
// backend `backend` ("redis"): the ranges of max_waiters and release_memory
// (which have no keys in it), and the key <backend>.fence_retention.
template <typename T>
OptionSet<T>& BindSharedOptions(OptionSet<T>& set, const std::string& backend) {
  if constexpr (std::is_base_of_v<WaiterLimit, T>) {
    set.template UnkeyedInt<size_t>("max_waiters", &T::max_waiters, kMinMaxWaiters, kMaxMaxWaiters);
  }
  if constexpr (std::is_base_of_v<ReleaseMemory, T>) {
    set.UnkeyedDuration("release_memory", &T::release_memory);
  }
  if constexpr (std::is_base_of_v<FenceRetention, T>) {
    set.Duration(backend + ".fence_retention", &T::fence_retention,
                 "how long a lock's fencing counter is kept once no lease uses it (0: forever)");
  }
  return set;
}

}  // namespace lockd

#endif  // LOCKD_BACKENDS_COMMON_SHARED_OPTIONS_H_
