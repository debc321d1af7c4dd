// Latency samples and the figures lockbench reports from them.
//
// Not thread-safe: each client thread fills its own Samples; the scenario
// merges them after the threads have joined.

#ifndef LOCKD_TOOLS_LOCKBENCH_STATS_H_
#define LOCKD_TOOLS_LOCKBENCH_STATS_H_

#include <chrono>
#include <cstdint>
#include <vector>

namespace lockd::bench {

// Nanoseconds on std::chrono::steady_clock, shared by every thread of the
// process (so one thread's timestamp can be compared with another's).
inline int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class Samples {
 public:
  void Add(int64_t nanos) {
    values_.push_back(nanos);
    sorted_ = false;
  }
  void Merge(const Samples& other);
  size_t count() const { return values_.size(); }

  // Nearest-rank percentile (p in [0, 100]) in milliseconds; 0 when empty.
  // Sorts the samples on first use after an Add/Merge.
  double PercentileMs(double p);
  double MaxMs() { return PercentileMs(100); }
  double MinMs() { return PercentileMs(0); }
  double MeanMs() const;

 private:
  std::vector<int64_t> values_;
  bool sorted_ = false;
};

}  // namespace lockd::bench

#endif  // LOCKD_TOOLS_LOCKBENCH_STATS_H_
