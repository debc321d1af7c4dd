#include "tools/lockbench/stats.h"

#include <algorithm>
#include <cmath>

namespace lockd::bench {

void Samples::Merge(const Samples& other) {
  values_.insert(values_.end(), other.values_.begin(), other.values_.end());
  sorted_ = false;
}

double Samples::PercentileMs(double p) {
  if (values_.empty()) return 0;
  if (!sorted_) {
    std::sort(values_.begin(), values_.end());
    sorted_ = true;
  }
  // Nearest rank: the smallest value with at least p% of samples at or below.
  double rank = std::ceil(p / 100.0 * static_cast<double>(values_.size()));
  size_t i = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  if (i >= values_.size()) i = values_.size() - 1;
  return static_cast<double>(values_[i]) / 1e6;
}

double Samples::MeanMs() const {
  if (values_.empty()) return 0;
  long double sum = 0;
  for (int64_t v : values_) sum += v;
  return static_cast<double>(sum / values_.size() / 1e6);
}

}  // namespace lockd::bench
