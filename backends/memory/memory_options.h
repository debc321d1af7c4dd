// The in-memory backend's options. It has no configuration keys of its own:
// its OptionSet only checks the ranges of the shared members
// (backends/common/shared_options.h); service/config.cc sets max_waiters from
// the `max_waiters` key.

#ifndef LOCKD_BACKENDS_MEMORY_MEMORY_OPTIONS_H_
#define LOCKD_BACKENDS_MEMORY_MEMORY_OPTIONS_H_

#include "backends/common/options.h"
#include "backends/common/shared_options.h"

namespace lockd {

struct MemoryOptions : WaiterLimit, ReleaseMemory {};

// The (key-less) OptionSet of MemoryOptions: NewMemoryBackend checks with it.
const OptionSet<MemoryOptions>& MemoryOptionSet();

}  // namespace lockd

#endif  // LOCKD_BACKENDS_MEMORY_MEMORY_OPTIONS_H_
