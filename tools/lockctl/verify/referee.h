// The referee of `lockctl verify`: the resource the locks protect, living in
// the verify (parent) process. Per lock name it keeps two counters that
// every exclusive holder increments with a read-modify-write (read, hold,
// write the value read plus one):
//  * the FENCED counter is a fenced resource: every access carries the
//    holder's fencing token; a read raises the largest token seen, and a
//    write whose token is below the largest seen is rejected (a holder whose
//    lease ran out while it held, and whose lock went to someone else who
//    used the resource since, cannot write). Raising the bar on reads too
//    is what makes the read-modify-write safe: a stale holder whose write
//    lands between a newer holder's read and write is still refused.
//  * the UNFENCED counter accepts every write: the updates it loses are the
//    ones fencing prevented on the other.
// Who is inside (enter/exit) is recorded in the history by the runner; the
// referee only answers reads and writes.
//
// Thread-safe: one mutex guards everything.

#ifndef LOCKD_TOOLS_LOCKCTL_VERIFY_REFEREE_H_
#define LOCKD_TOOLS_LOCKCTL_VERIFY_REFEREE_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace lockd::lockctl::verify {

class Referee {
 public:
  struct Counters {
    int64_t fenced = 0;
    int64_t unfenced = 0;
    uint64_t max_token = 0;       // largest token the fenced counter saw
    int64_t fenced_writes = 0;    // writes the fenced counter accepted
    int64_t stale_rejected = 0;   // writes it rejected (token below max_token)
    int64_t unfenced_writes = 0;  // writes the unfenced counter took (all)
  };

  // Both counters of `name` (0 for a name never used). Raises the fenced
  // counter's largest token seen to `token`.
  Counters Read(const std::string& name, uint64_t token);

  // Sets the unfenced counter to `unfenced`, and the fenced one to `fenced`
  // unless `token` is below the largest token it has seen. Returns whether
  // the fenced write was accepted.
  bool Write(const std::string& name, uint64_t token, int64_t fenced, int64_t unfenced);

  // Every name's counters, by name.
  std::map<std::string, Counters> Snapshot() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, Counters> counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockd::lockctl::verify

#endif  // LOCKD_TOOLS_LOCKCTL_VERIFY_REFEREE_H_
