// Checks the holds that concurrent clients saw of one name (the conformance
// suite's stress tests). Each client records, for every grant, the interval
// from the grant's reply to just before it sends the release, with the
// fencing token and the permits. A recorded interval lies inside the real
// hold (granted before the reply, released after the record), so two
// recorded intervals that overlap prove two holds at once, and an interval
// that ends before another starts proves the first hold was granted first.
//
//   std::vector<HoldInterval> seen = ...;  // from every client
//   ReadWriteReport rw = CheckReadWrite(seen);
//   EXPECT_THAT(rw.violations, IsEmpty());
//   EXPECT_GT(rw.reader_overlaps, 0) << "readers never held together";
//
// Pure functions of their input; thread-compatible.

#ifndef LOCKD_TESTS_CONFORMANCE_INTERVAL_CHECKER_H_
#define LOCKD_TESTS_CONFORMANCE_INTERVAL_CHECKER_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace lockd::testing {

using HoldClock = std::chrono::steady_clock;

struct HoldInterval {
  enum class Kind { kReader, kWriter, kPermits };
  Kind kind = Kind::kWriter;
  std::string owner;
  uint64_t token = 0;
  uint32_t permits = 0;         // kPermits: the semaphore permits held
  HoldClock::time_point start;  // the grant's reply had come
  HoldClock::time_point end;    // the release was about to be sent
};

// At most this many violations are described; `violation_count` has them all.
inline constexpr int kMaxViolationsDescribed = 20;

struct ReadWriteReport {
  std::vector<std::string> violations;  // readable sentences
  int violation_count = 0;
  // Reader intervals that began while another reader interval was open.
  int reader_overlaps = 0;
};

// The intervals of one read-write lock (kReader and kWriter). Violations:
// a writer's interval overlaps any other interval; a writer's token is not
// larger than the token of every interval that ended before the writer's
// began, or not smaller than that of every interval that began after it
// ended (fencing: every first grant takes a larger token); two intervals
// share a token (every interval is a first grant).
ReadWriteReport CheckReadWrite(const std::vector<HoldInterval>& intervals);

struct PermitsReport {
  std::vector<std::string> violations;
  int violation_count = 0;
  uint32_t peak_permits = 0;  // the most permits held at once
  int peak_holders = 0;       // the most intervals open at once
};

// The intervals of one semaphore (kPermits). Violations: more than `limit`
// permits held at once; two intervals share a token.
PermitsReport CheckPermits(const std::vector<HoldInterval>& intervals, uint32_t limit);

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_CONFORMANCE_INTERVAL_CHECKER_H_
