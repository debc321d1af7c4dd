// The in-memory backend: locks live in this process (a single replica only;
// state is lost on restart). The embedded default and the reference
// implementation of the contract in backends/backend.h.
//
// Guarantees: everything in backend.h. Leases run on the monotonic clock.
// Fencing tokens come from one process-wide counter seeded from the wall
// clock in microseconds at start, so tokens keep growing across a restart as
// long as the previous run granted fewer than one token per microsecond on
// average. A release hands the lock straight to the first waiter (FIFO).

#ifndef LOCKD_BACKENDS_MEMORY_MEMORY_BACKEND_H_
#define LOCKD_BACKENDS_MEMORY_MEMORY_BACKEND_H_

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "backends/memory/memory_options.h"

namespace lockd {

absl::StatusOr<std::unique_ptr<Backend>> NewMemoryBackend(const MemoryOptions& options);

}  // namespace lockd

#endif  // LOCKD_BACKENDS_MEMORY_MEMORY_BACKEND_H_
