// Callbacks collected while a mutex is held and run after it is released, so
// that no `done` (which may call back into the backend) runs under a lock.
//
// Not thread-safe: one Deferred belongs to one call on one thread.

#ifndef LOCKD_BACKENDS_COMMON_DEFERRED_H_
#define LOCKD_BACKENDS_COMMON_DEFERRED_H_

#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"

namespace lockd {

using Deferred = std::vector<absl::AnyInvocable<void() &&>>;

// Runs the callbacks in the order they were added and empties `deferred`.
// REQUIRES: no mutex that a callback takes is held.
inline void RunAll(Deferred& deferred) {
  for (auto& fn : deferred) std::move(fn)();
  deferred.clear();
}

}  // namespace lockd

#endif  // LOCKD_BACKENDS_COMMON_DEFERRED_H_
