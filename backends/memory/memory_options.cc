#include "backends/memory/memory_options.h"

namespace lockd {

const OptionSet<MemoryOptions>& MemoryOptionSet() {
  static const auto* set = [] {
    auto* s = new OptionSet<MemoryOptions>;
    BindSharedOptions(*s, "memory");
    return s;
  }();
  return *set;
}

}  // namespace lockd
