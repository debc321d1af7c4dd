// The nemesis of `lockctl verify`: what it does to workers that hold a lock,
// and when. Nothing happens unless asked (kNone is the default).
//
//  * kKillHolders: SIGKILL a worker process that holds a lock. Its holds
//    must free by themselves: a session's at once (the stream breaks; the
//    workers' sessions do not keep holds on disconnect), a unary hold when
//    its lease ends. The checker measures the time from the kill to the
//    lock's next grant (liveness).
//  * kAbandon: a worker that holds a lock leaves the referee and exits
//    without releasing (its stream or connection drops unclosed); measured
//    like a kill.
//  * kPauseHolders: SIGSTOP a worker that writes the referee between its
//    lease check and its write (the runner stops it as its write arrives,
//    and applies the write when it resumes) for twice the lease, then
//    SIGCONT: the lease runs out under a holder that goes on writing. A
//    deliberately broken client, not a fault lockd can prevent (no lock
//    service can stop a paused process): a run with it fails exclusion
//    (expired overlaps) every time, and shows what the fenced resource
//    caught (its late writes rejected) and the unfenced one lost, never a
//    stale write the fenced counter accepted.
//
// Thread-safety: NemesisPolicy is not thread-safe (the runner calls it under
// its mutex).

#ifndef LOCKD_TOOLS_LOCKCTL_VERIFY_NEMESIS_H_
#define LOCKD_TOOLS_LOCKCTL_VERIFY_NEMESIS_H_

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace lockd::lockctl::verify {

enum class NemesisKind { kNone, kKillHolders, kAbandon, kPauseHolders };
// "none", "kill-holders", "abandon", "pause-holders".
const char* NemesisName(NemesisKind kind);
// kInvalidArgument naming --nemesis for an unknown name.
absl::StatusOr<NemesisKind> ParseNemesis(absl::string_view text);

// When to strike and whom: at most one strike per `interval`, the first one
// `interval` after Start, on a candidate picked at random (the runner
// passes the workers that can be struck now: holders, or for kPauseHolders
// writers acquiring, to be stopped at their write). A strike due while there is no candidate
// waits for one.
class NemesisPolicy {
 public:
  NemesisPolicy(NemesisKind kind, absl::Duration interval, uint64_t seed)
      : kind_(kind), interval_(interval), rng_(seed) {}

  NemesisKind kind() const { return kind_; }
  void Start(absl::Time now) { next_ = now + interval_; }
  // The candidate to strike at `now`, or nullopt (none due, no candidate,
  // or kNone). After a strike the next is due `interval` later.
  std::optional<int> Pick(absl::Time now, const std::vector<int>& candidates);

 private:
  NemesisKind kind_;
  absl::Duration interval_;
  std::mt19937_64 rng_;
  absl::Time next_ = absl::InfiniteFuture();
};

}  // namespace lockd::lockctl::verify

#endif  // LOCKD_TOOLS_LOCKCTL_VERIFY_NEMESIS_H_
