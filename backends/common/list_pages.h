// Backend::List paging, written once. A page holds at most page_size held
// locks in name order; next_page_token is the last name of a full page when
// more may follow (Backends list "names > token" on the next call).

#ifndef LOCKD_BACKENDS_COMMON_LIST_PAGES_H_
#define LOCKD_BACKENDS_COMMON_LIST_PAGES_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "backends/backend.h"

namespace lockd {

// The page of `held` (held locks in name order, at most page_size + 1 of
// them: the extra one only says that another page follows).
ListResult PageOf(std::vector<LockState> held, uint32_t page_size);

// How many names ListByDescribing describes at once: as many as the page
// still needs (plus one), but at least `min` (reading ahead past names of free
// locks saves rounds) and at most `max` (a bound on the requests in flight).
struct DescribeBatch {
  size_t min = 1;
  size_t max = std::numeric_limits<size_t>::max();
};

// For backends that can only list names and then look at each lock: describes
// `names` (sorted, unique, all after the page token) in order, a batch at a
// time, until the page is full or the names run out, then calls `done` with
// PageOf(...) or the first error of a batch. `describe` may answer on any
// thread; `done` is called exactly once.
using DescribeFn = absl::AnyInvocable<void(const LockKey& key, Callback<LockState> done)>;
void ListByDescribing(std::string ns, std::vector<std::string> names, uint32_t page_size,
                      DescribeFn describe, Callback<ListResult> done, DescribeBatch batch = {});

}  // namespace lockd

#endif  // LOCKD_BACKENDS_COMMON_LIST_PAGES_H_
