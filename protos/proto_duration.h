// Conversions between google.protobuf.Duration and absl::Duration (and
// std::chrono durations), exact to the nanosecond: the one copy for the
// service, the clients, the tools and the tests. Header-only (CMake target
// lockd::proto_duration).

#ifndef LOCKD_PROTOS_PROTO_DURATION_H_
#define LOCKD_PROTOS_PROTO_DURATION_H_

#include <chrono>
#include <cstdint>

#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"

namespace lockd {

// Writes `d` into `out`: seconds and nanos with the same sign, as the
// Duration message requires. Exact for |d| below about 292 years (the range
// of int64 nanoseconds); longer durations, InfiniteDuration() included,
// saturate to about +/-292 years.
inline void SetProtoDuration(absl::Duration d, google::protobuf::Duration* out) {
  const int64_t nanos = absl::ToInt64Nanoseconds(d);
  out->set_seconds(nanos / 1000000000);
  out->set_nanos(static_cast<int32_t>(nanos % 1000000000));
}

inline google::protobuf::Duration ToProtoDuration(absl::Duration d) {
  google::protobuf::Duration out;
  SetProtoDuration(d, &out);
  return out;
}

template <typename Rep, typename Period>
google::protobuf::Duration ToProtoDuration(std::chrono::duration<Rep, Period> d) {
  return ToProtoDuration(absl::FromChrono(d));
}

// `d` as an absl::Duration. Does not validate: callers that accept
// durations from the network check the message's bounds first
// (service/validation.cc).
inline absl::Duration FromProtoDuration(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

}  // namespace lockd

#endif  // LOCKD_PROTOS_PROTO_DURATION_H_
