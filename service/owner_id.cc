#include "service/owner_id.h"

#include <cstdint>

#include "absl/random/random.h"
#include "absl/strings/str_format.h"

namespace lockd {

std::string NewOwnerId() {
  thread_local absl::BitGen gen;
  return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(gen), absl::Uniform<uint64_t>(gen));
}

}  // namespace lockd
