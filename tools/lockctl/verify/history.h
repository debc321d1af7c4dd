// The history of a `lockctl verify` run: every operation as Jepsen-style
// events, one JSON object per line (`--history FILE`), and the recorder the
// runner appends to. `lockctl verify --check FILE` reads it back and checks
// it (checker.h); an independent checker can read it too (docs/verify.md).
//
// An event is one line, keys in the order below, a key left out when it does
// not apply (or has its default). Times and durations are integers of
// nanoseconds; `time_ns` is monotonic, counted from the run's start. Every
// integer stays within +-2^53, which any JSON reader takes exactly.
//
//   time_ns         when the event happened (required, >= 0)
//   process         the worker, an integer >= 0 (required). A worker process
//                   the nemesis killed may come back under a new number.
//   type            invoke | ok | fail | info (required). Jepsen's meaning:
//                   invoke starts an operation; ok: it happened; fail: it did
//                   not; info: unknown (a timeout, a lost answer)
//   f               acquire | release | write | kill | abandon (required)
//   lock            the lock's name (acquire, release, write)
//   kind            exclusive (default) | shared | semaphore (acquire invoke)
//   permits, limit  a semaphore's permits asked and its limit (kind semaphore)
//   owner           the lockd owner (acquire, release)
//   ttl_ns          the lease asked for (acquire invoke, required there)
//   api             session | unary: the path the worker's client used
//                   (acquire invoke; optional, sets the liveness bound)
//   replica         the lockd address the worker's client talks to (acquire
//                   invoke; optional; FIFO is checked among one replica's
//                   waiters only)
//   token           the fencing token: granted (acquire ok, required there),
//                   held (release invoke), carried by a write (write)
//   valid_until_ns  the worker's own lease bound, as its client computes it
//                   (Lease::valid_until() on the run's clock), when the worker
//                   looked: acquire ok, release invoke. A client with no finite
//                   bound (a session hold while its stream is up) is recorded
//                   as valid at the moment it looked (HistoryRecorder::
//                   LeaseBoundNs). Left out at the release of a hold the
//                   nemesis paused: a client that was stopped cannot vouch
//                   for its lease
//   counter         fenced | unfenced: which of the referee's counters a write
//                   went to (write, required there)
//   read, wrote     the counter's value the worker read, and the value it
//                   wrote (write, required there; a read-modify-write wrote
//                   read + 1)
//   error           why an operation failed or is unknown (fail, info): a gRPC
//                   code name (UNAVAILABLE, FAILED_PRECONDITION, ...),
//                   NOT_ACQUIRED for an acquire answered `acquired: false`,
//                   STALE_TOKEN for a write the fenced counter rejected
//
// Operations and what they mean to the checker:
//   - acquire: an invoke, then one completion (ok, fail or info) by the same
//     process for the same lock. A process may have several acquires in
//     flight on different locks (AcquireAll: one invoke per lock, then one
//     completion per lock). The critical section is entered at the acquire's
//     ok: from then on the process holds the lock (its "hold").
//   - release: an invoke, then one completion. The critical section is left
//     at the release's invoke, whatever the completion says. An acquire ok on
//     a lock the process already holds is a reentrant acquire (same token:
//     one more release ends the hold; another token: an upgrade, a new grant).
//   - write: the referee's fenced or unfenced counter, one event, no invoke
//     (the referee is in the verify process and writes atomically): ok when
//     the counter took the write, fail (error STALE_TOKEN) when the fenced
//     counter rejected it. The referee records its writes in the order it
//     applied them (HistoryRecorder::RecordNow under its own lock), so history
//     order is the counters' order. The fenced counter is Kleppmann's fenced
//     resource: it remembers the largest token it has seen, on a read as on a
//     write, and rejects a write whose token is below it; a worker whose read
//     the fenced counter refused records its write as rejected.
//   - kill, abandon: the nemesis (type info, `process` the worker it hit):
//     kill: the worker process was killed (SIGKILL); abandon: the worker
//     dropped its stream or stopped renewing without releasing. Either ends
//     every hold and every operation in flight of that process at that time.
//   - A hold still open at the end of the history ends at the history's last
//     event.
//
// Thread-safety: the functions are pure and thread-safe; HistoryRecorder is
// thread-safe (one mutex guards its events and its output stream).

#ifndef LOCKD_TOOLS_LOCKCTL_VERIFY_HISTORY_H_
#define LOCKD_TOOLS_LOCKCTL_VERIFY_HISTORY_H_

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace lockd::lockctl::verify {

enum class EventType { kInvoke, kOk, kFail, kInfo };
enum class Op { kAcquire, kRelease, kWrite, kKill, kAbandon };
enum class LockKind { kExclusive, kShared, kSemaphore };
enum class Api { kUnknown, kSession, kUnary };
enum class Counter { kNone, kFenced, kUnfenced };

// One line of the history (the fields above; C++ names as the JSON keys).
struct Event {
  int64_t time_ns = 0;
  int64_t process = 0;
  EventType type = EventType::kInvoke;
  Op f = Op::kAcquire;
  std::string lock;
  LockKind kind = LockKind::kExclusive;
  uint32_t permits = 0;
  uint32_t limit = 0;
  std::string owner;
  int64_t ttl_ns = 0;  // 0: not given
  Api api = Api::kUnknown;
  std::string replica;
  uint64_t token = 0;  // 0: none (lockd's tokens start at 1)
  std::optional<int64_t> valid_until_ns;
  Counter counter = Counter::kNone;
  int64_t read = 0;
  int64_t wrote = 0;
  std::string error;
};

// The JSON key words of the enums ("invoke", "acquire", "shared", ...).
absl::string_view EventTypeName(EventType type);
absl::string_view OpName(Op f);
absl::string_view LockKindName(LockKind kind);
absl::string_view ApiName(Api api);              // "" for kUnknown
absl::string_view CounterName(Counter counter);  // "" for kNone

// `s` as a JSON string literal, quotes included (control characters escaped).
std::string JsonString(absl::string_view s);

// `event` as one line of JSON, without the newline. Keys in the order of the
// table above; a key is left out at its default, except read and wrote of a
// write.
std::string EventToJson(const Event& event);

// One line back into an Event. Strict: the line must be one JSON object;
// an unknown key, a value of the wrong type (a string for a number, a number
// that is not an integer or outside [-2^53, 2^53]), an unknown word (type,
// f, kind, api, counter) or a missing required key (time_ns, process, type,
// f) is kInvalidArgument naming the key. Rules between keys and events are
// ValidateHistory's.
absl::StatusOr<Event> ParseEvent(absl::string_view line);

// The rules a history must keep for the checker to read it (kInvalidArgument
// naming the event by its index, counted from 1, otherwise):
//   - acquire invoke: lock, ttl_ns > 0; kind semaphore: 1 <= permits <= limit;
//   - acquire ok: token >= 1; release: lock; write: lock, counter, type ok
//     or fail, token >= 1 for the fenced counter; kill, abandon: type info;
//   - every completion follows an invoke of the same process, f and lock
//     with none between (pending operations end at a kill or abandon of
//     their process); an invoke does not repeat one still pending.
// Times need not be in order (events forwarded from worker processes may
// arrive late); the checker orders them by time_ns, stably.
absl::Status ValidateHistory(const std::vector<Event>& events);

// Reads a history: one event per line, blank lines skipped; then
// ValidateHistory. Errors: kInvalidArgument "line N: ..." for a line that
// does not parse or an event that breaks a rule; kNotFound / kPermissionDenied
// / kInvalidArgument naming the path for a file that cannot be read.
absl::StatusOr<std::vector<Event>> ReadHistory(std::istream& in);
absl::StatusOr<std::vector<Event>> ReadHistoryFile(const std::string& path);

// Appends events in memory and, when given an output stream, writes each as
// a line at once (so a run that dies leaves its history so far). Thread-safe:
// workers, the referee and the nemesis record from their own threads.
class HistoryRecorder {
 public:
  using Clock = std::chrono::steady_clock;

  // `out`: null to keep the events in memory only; otherwise not owned, it
  // must outlive the recorder. The run's clock starts at `start`.
  explicit HistoryRecorder(std::ostream* out, Clock::time_point start = Clock::now());

  HistoryRecorder(const HistoryRecorder&) = delete;
  HistoryRecorder& operator=(const HistoryRecorder&) = delete;

  // Nanoseconds from the run's start to `t` (negative before it), and to now.
  int64_t ToRunNs(Clock::time_point t) const;
  int64_t NowNs() const;

  // A client's lease bound (Lease::valid_until()) on the run's clock;
  // time_point::max() (a session hold while its stream is up: no finite
  // bound) is recorded as now, the moment the lease was known valid.
  int64_t LeaseBoundNs(Clock::time_point valid_until) const;

  // Appends `event` as it is (time_ns set by the caller: a worker process's
  // own stamp on the same monotonic clock).
  void Record(const Event& event) ABSL_LOCKS_EXCLUDED(mu_);
  // Sets event.time_ns to NowNs() under the recorder's lock, then appends it,
  // so that events recorded this way are in time order in the file. Returns
  // the time set.
  int64_t RecordNow(Event event) ABSL_LOCKS_EXCLUDED(mu_);

  // Every event recorded so far, in recording order (a copy).
  std::vector<Event> Events() const ABSL_LOCKS_EXCLUDED(mu_);
  // OK, or kDataLoss once writing to `out` failed (the events are still kept
  // in memory).
  absl::Status status() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void AppendLocked(const Event& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  std::ostream* const out_;
  const Clock::time_point start_;

  mutable absl::Mutex mu_;
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lockd::lockctl::verify

#endif  // LOCKD_TOOLS_LOCKCTL_VERIFY_HISTORY_H_
