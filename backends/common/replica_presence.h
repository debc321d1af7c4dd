// Whether other lockd replicas share this replica's backend, for backends
// that keep a waiting queue on their server (Redis, MySQL). The queue exists
// for FIFO across replicas, and writing a waiting call's entry (and deleting
// it at its grant) is most of what a contended hand-off costs there; a
// replica alone has its WaitEngine, which already serves its calls in
// arrival order. So a waiting call writes its queue entry only while
// others() is true; every acquire still reads the queue, whoever wrote it.
//
// Rules (docs/backends.md "Waiting across replicas"):
//   - Every `period` the backend's beat records this replica in the backend,
//     live for `life` (> period) on the backend's clock, and answers how many
//     other replicas are live. others() is that count > 0.
//   - The first beat runs at once on Start(). A replica that starts beside
//     running ones queues from its start; they see it within `period`. In
//     that window the newcomer's waiting calls are in the queue and the
//     others' are not: the others' calls then wait behind its entries, never
//     ahead of them, so nobody is starved; only arrival order between the
//     two replicas' calls may be off. Mutual exclusion never depends on the
//     queue.
//   - Until its first beat is answered a replica assumes others (its calls
//     queue, as they would beside another). A failed beat keeps the last
//     answer (the backend reports its own health). A replica that stops
//     beating (crashed, or paused past `life`) drops out of the others'
//     count after `life`.
//
// Hooks: the beat is the backend's, asynchronous, and calls its `done`
// exactly once on any thread, with no lock of this class held.
//
// Threading: thread-safe; others() is one atomic load (it is read on every
// acquire attempt). Beats never overlap: the next is scheduled when one ends.
// Stop() (idempotent, also run by the destructor) cancels the next beat and
// waits for one in flight to end.

#ifndef LOCKD_BACKENDS_COMMON_REPLICA_PRESENCE_H_
#define LOCKD_BACKENDS_COMMON_REPLICA_PRESENCE_H_

#include <atomic>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "backends/common/timer_queue.h"

namespace lockd {

class ReplicaPresence {
 public:
  // Records this replica as live for `life` and calls `done` with the number
  // of OTHER live replicas (or an error).
  using Beat = absl::AnyInvocable<void(absl::Duration life,
                                       absl::AnyInvocable<void(absl::StatusOr<int>) &&> done)>;

  // How often a replica beats, and how long a beat keeps it live.
  static constexpr absl::Duration kPeriod = absl::Milliseconds(200);
  static constexpr absl::Duration kLife = absl::Seconds(1);
  // How long a waiting call's place in a backend's queue lives past its
  // replica's last extension of it (replicas extend their places every
  // quarter of it while the calls wait): the places of a replica that
  // crashed stop holding the others' calls back within this time.
  static constexpr absl::Duration kPlaceLife = absl::Seconds(2);

  // `timers` must outlive this object.
  ReplicaPresence(TimerQueue* timers, Beat beat, absl::Duration period = kPeriod,
                  absl::Duration life = kLife);
  ~ReplicaPresence();
  ReplicaPresence(const ReplicaPresence&) = delete;
  ReplicaPresence& operator=(const ReplicaPresence&) = delete;

  // Runs the first beat now, then one every `period`.
  void Start();
  void Stop();

  // Whether the last answered beat saw another live replica (true before
  // the first answer).
  bool others() const { return state_->others.load(std::memory_order_relaxed); }

 private:
  // Shared with the timer callbacks and the beat's `done`, which may run
  // after this object is gone (they then see `stopped`).
  struct State {
    TimerQueue* timers;
    Beat beat;
    absl::Duration period;
    absl::Duration life;
    std::atomic<bool> others{true};
    absl::Mutex mu;
    bool stopped ABSL_GUARDED_BY(mu) = false;
    bool in_flight ABSL_GUARDED_BY(mu) = false;
    TimerQueue::TimerId timer ABSL_GUARDED_BY(mu) = 0;
  };
  // Called with in_flight set.
  static void RunBeat(const std::shared_ptr<State>& s);
  static void Answered(const std::shared_ptr<State>& s, absl::StatusOr<int> others);

  const std::shared_ptr<State> state_;
};

}  // namespace lockd

#endif  // LOCKD_BACKENDS_COMMON_REPLICA_PRESENCE_H_
