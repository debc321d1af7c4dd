// The checks of `lockctl verify`, run on a history (history.h): after a live
// run, or offline on a saved one (`lockctl verify --check FILE`). What each
// check means for a user, and what its failure tells, is in docs/verify.md.
//
// Terms:
//   - A hold: a process's acquire ok on a lock until it leaves the critical
//     section (its release invoke, a kill or abandon of the process, or the
//     end of the history).
//   - Its certain lease: lockd cannot have granted before the acquire's
//     invoke, so the lease lasts at least until invoke + ttl_ns; a
//     valid_until_ns the worker's client reported on the hold extends that
//     (its own bound, computed from a later renewal or a live session). A
//     hold is "certain" from its ok until the earlier of its end and that
//     bound.
//   - A first grant: an acquire ok that opens a hold (not a reentrant one).
//
// The checks, in report order (CheckResult::name):
//   1. "exclusion": per lock, holds compared in time. Two holds, one of them
//      exclusive, certain at the same moment: a violation. Overlapping only
//      after one's certain lease: an "expired overlap" (a holder still inside
//      the critical section after its lease ended while another held the
//      lock), counted apart and a failure too: a correct deployment with
//      clients that check their lease before acting never shows one (the
//      workers do; only a paused client, or a lease lost under its holder,
//      does). As context, the fenced writes holds made after their certain
//      lease (late_writes) and how many the fenced counter rejected
//      (late_writes_rejected). Shared holds overlapping: counted
//      (reader_overlaps); a lock whose readers never overlapped although at
//      least CheckConfig::min_reader_chances shared acquires arrived while
//      only readers held it and no exclusive acquire was pending fails
//      (a read-write lock that serializes readers). Semaphores: at the start
//      of every hold, the permits of the certain holds at that moment above
//      the limit is a violation; above it only counting expired holds, an
//      expired overlap (a failure, as above).
//   2. "fencing": per lock, first grants' tokens never repeat, and a grant
//      whose invoke came after another's ok has the larger token. Writes to
//      the fenced counter, replayed in history order: a write accepted with a
//      token below the largest accepted before it is a violation
//      (stale_writes_accepted); rejected writes are counted
//      (stale_writes_rejected), the referee doing its job.
//   3. "lost-updates": each counter (per lock, fenced and unfenced) replayed
//      in history order from 0: the updates lost are what the accepted
//      writes added (wrote - read) minus the counter's final value. A write
//      that read r while the counter stood at c > r is an example (it
//      overwrote c - r updates); one that read r > c wrote from a value the
//      counter no longer held (inconsistent). Fails only for the fenced
//      counter (a loss, or an inconsistent write); the unfenced counter's
//      loss is what fencing prevented.
//   4. "liveness": for each hold a kill or abandon ended, the time from that
//      event to the lock's next grant to anyone (the workload keeps its locks
//      wanted). Bound: CheckConfig::session_liveness_bound for a hold taken
//      with api session, else the hold's ttl_ns + unary_liveness_grace. Over
//      the bound: a failure. No later grant before the end: unmeasured. A
//      next grant that also took (AcquireAll) another lock whose holder was
//      struck later, and was that lock's first grant since, waited for that
//      strike too: "shadowed", measured for the later strike only (a run
//      with unary holds on AcquireAll's locks saw a lock come back 20 s after
//      its strike, 10 s after its lease ended, because every acquire of it
//      also needed a lock struck 10 s later).
//   5. "fairness": acquires, grants, wait percentiles (ok - invoke of granted
//      acquires), errors of acquires and releases by code (fail and info),
//      and FIFO violations among the waiters of one replica (acquires with
//      the same lock and replica, both granted, A invoked more than
//      CheckConfig::fifo_slack before B, and B granted first: B's fencing
//      token below A's, since tokens grow with every grant of a lock; A not
//      its process's first acquire, which may have waited for the worker's
//      connection before it left). The ok stamps do not order grants: a
//      worker reports its grant after its client's own work (a unary client
//      renews a lease it waited for before it returns), so readers or
//      semaphore holders granted together are stamped in either order. A
//      FIFO violation is a failure; acquires without a replica are not
//      compared.
//
// Counts are named snake_case; a count whose name ends in `_ns` is a
// duration (printed as one in text). Every check reports its counts even
// when it had nothing to look at (all zero: passed).
//
// Pure functions; thread-safe.

#ifndef LOCKD_TOOLS_LOCKCTL_VERIFY_CHECKER_H_
#define LOCKD_TOOLS_LOCKCTL_VERIFY_CHECKER_H_

#include <cstdint>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tools/lockctl/verify/history.h"

namespace lockd::lockctl::verify {

// Exit codes of `lockctl verify` and `lockctl verify --check` (the issue's
// contract, not lockctl's sysexits codes): every check held, one failed, the
// command line or the history was unusable.
enum VerifyExit : int {
  kVerifyPassed = 0,
  kVerifyFailed = 1,
  kVerifyUsage = 2,
};

struct CheckConfig {
  // Examples kept per check (the first ones, in time order).
  int max_examples = 5;
  // Liveness: a session hold's lock is granted again within this after its
  // holder died (the stream breaks, lockd releases at once); a unary hold's
  // within its ttl plus the grace.
  absl::Duration session_liveness_bound = absl::Seconds(2);
  absl::Duration unary_liveness_grace = absl::Seconds(2);
  // FIFO: invokes closer than this are not ordered: the worker's stamp is
  // taken before its request reaches the replica (a first acquire, not
  // compared, was seen arriving 60 ms late while its worker connected; the
  // rest is room for a loaded machine's scheduling). Grants are ordered by
  // their tokens, exactly.
  absl::Duration fifo_slack = absl::Milliseconds(100);
  // Exclusion: shared acquires arriving while only readers held the lock
  // needed before "readers never overlapped" is a failure.
  int64_t min_reader_chances = 10;
};

// One instance of what a check found: when (time_ns of the later event
// involved), the lock, and a sentence naming processes, owners, tokens and
// times ("p3 (owner w3, token 17) held 1.200s-1.350s, certain until 1.300s;
// p5 (owner w5, token 18) from 1.250s").
struct Example {
  int64_t time_ns = 0;
  std::string lock;
  std::string text;
};

struct CheckResult {
  std::string name;  // "exclusion", "fencing", "lost-updates", "liveness", "fairness"
  bool passed = true;
  // Why it failed, one line ("2 overlapping certain holds, 1 semaphore over its
  // limit"); "" when passed.
  std::string failure;
  // What a passing or failing result still tells ("the unfenced counter lost
  // 12 updates: what fencing prevented"); "" when nothing.
  std::string note;
  // In a fixed order per check (see checker.cc's tables; docs/verify.md).
  std::vector<std::pair<std::string, int64_t>> counts;
  std::vector<Example> examples;

  // The named count; 0 when absent.
  int64_t Count(absl::string_view count_name) const;
};

struct CheckReport {
  std::vector<CheckResult> checks;  // the five, in the order above

  bool passed() const;  // every check passed
  // The named check; null when absent.
  const CheckResult* Find(absl::string_view name) const;
};

// Runs the five checks. REQUIRES: ValidateHistory(events) is OK (ReadHistory
// ensures it); events it would reject are otherwise skipped.
CheckReport Check(const std::vector<Event>& events, const CheckConfig& config);

// Text: one row per check (name, PASS/FAIL, its counts), each failing check's
// reason and every check's examples indented below it, then a last line
// "verify: PASSED" or "verify: FAILED (exclusion, fencing)".
void PrintReportText(const CheckReport& report, std::ostream& out);
// JSON: one object on one line, {"passed": bool, "checks": [{"name", "passed",
// "failure", "note", "counts": {...}, "examples": [{"time_ns", "lock",
// "text"}]}]}.
void PrintReportJson(const CheckReport& report, std::ostream& out);

// kVerifyPassed or kVerifyFailed.
int ExitCodeFor(const CheckReport& report);

enum class ReportFormat { kText, kJson };

// `lockctl verify --check PATH`: reads the history at PATH, checks it with
// `config` and prints the report in `format` to `out`. Returns kVerifyPassed
// or kVerifyFailed; kVerifyUsage, with a message naming the path (and the
// line) on `err`, when the history cannot be read or is malformed.
int RunVerifyCheck(const std::string& path, ReportFormat format, std::ostream& out,
                   std::ostream& err, const CheckConfig& config = CheckConfig());

}  // namespace lockd::lockctl::verify

#endif  // LOCKD_TOOLS_LOCKCTL_VERIFY_CHECKER_H_
