// The in-memory backend: locks live in this process (a single replica only;
// state is lost on restart). The embedded default and the reference
// implementation of the contract in backends/backend.h.
//
// Guarantees: everything in backend.h, all three kinds included. Leases
// run on the monotonic clock, one per holder. Fencing tokens come from one
// process-wide counter seeded from the wall clock in microseconds at start
// (so each name's tokens grow too), and keep growing across a restart as
// long as the previous run granted fewer than one token per microsecond on
// average. Whatever frees room (a release, a lease end, ForceRelease, a
// waiter leaving the front) admits the front of the name's queue at once,
// in order (FIFO across modes, no barging).

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
