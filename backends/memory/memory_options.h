// The in-memory backend's options. It has no configuration keys of its own;
// service/config.cc sets max_waiters from the `max_waiters` key.

#ifndef LOCKD_BACKENDS_MEMORY_MEMORY_OPTIONS_H_
#define LOCKD_BACKENDS_MEMORY_MEMORY_OPTIONS_H_

#include <cstddef>

#include "absl/time/time.h"
#include "backends/common/options.h"

namespace lockd {

struct MemoryOptions {
  // Parked Acquire calls allowed at once; more get kResourceExhausted.
  size_t max_waiters = kDefaultMaxWaiters;
  // How long the result of a Release that freed a lock is remembered for
  // request_id retries.
  absl::Duration release_memory = absl::Minutes(5);
};

}  // namespace lockd

#endif  // LOCKD_BACKENDS_MEMORY_MEMORY_OPTIONS_H_
