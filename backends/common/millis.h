// The one rounding rule for durations sent to a server in whole
// milliseconds: up, and never below 1 ms (a lease or memory of 0 ms would
// mean "none" or be refused). Servers that take microseconds get
// absl::ToInt64Microseconds and need no rounding.

#ifndef LOCKD_BACKENDS_COMMON_MILLIS_H_
#define LOCKD_BACKENDS_COMMON_MILLIS_H_

#include <algorithm>
#include <cstdint>

#include "absl/time/time.h"

namespace lockd {

inline int64_t CeilMillis(absl::Duration d) {
  int64_t us = absl::ToInt64Microseconds(d);
  return std::max<int64_t>(1, (us + 999) / 1000);
}

}  // namespace lockd

#endif  // LOCKD_BACKENDS_COMMON_MILLIS_H_
