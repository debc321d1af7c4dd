#include "tests/conformance/interval_checker.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace lockd::testing {
namespace {

// Collects violations, describing the first kMaxViolationsDescribed.
class Violations {
 public:
  Violations(std::vector<std::string>* out, int* count) : out_(out), count_(count) {}
  void Add(std::string what) {
    if (++*count_ <= kMaxViolationsDescribed) out_->push_back(std::move(what));
  }

 private:
  std::vector<std::string>* out_;
  int* count_;
};

const char* KindName(HoldInterval::Kind k) {
  switch (k) {
    case HoldInterval::Kind::kReader:
      return "reader";
    case HoldInterval::Kind::kWriter:
      return "writer";
    case HoldInterval::Kind::kPermits:
      return "permit holder";
  }
  return "?";
}

// "writer client-3 (token 17, 1204-1410 us)", times from `t0`.
std::string Describe(const HoldInterval& h, HoldClock::time_point t0) {
  auto us = [&](HoldClock::time_point t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(t - t0).count();
  };
  return absl::StrCat(
      KindName(h.kind), " ", h.owner, " (token ", h.token,
      h.kind == HoldInterval::Kind::kPermits ? absl::StrCat(", ", h.permits, " permits") : "", ", ",
      us(h.start), "-", us(h.end), " us)");
}

HoldClock::time_point Earliest(const std::vector<HoldInterval>& intervals) {
  HoldClock::time_point t0 = HoldClock::time_point::max();
  for (const HoldInterval& h : intervals) t0 = std::min(t0, h.start);
  return t0;
}

void CheckDistinctTokens(const std::vector<HoldInterval>& intervals, HoldClock::time_point t0,
                         Violations& v) {
  std::map<uint64_t, const HoldInterval*> by_token;
  for (const HoldInterval& h : intervals) {
    auto [it, fresh] = by_token.emplace(h.token, &h);
    if (!fresh) {
      v.Add(absl::StrCat(Describe(*it->second, t0), " and ", Describe(h, t0),
                         " have the same token: two first grants got one token"));
    }
  }
}

}  // namespace

ReadWriteReport CheckReadWrite(const std::vector<HoldInterval>& intervals) {
  ReadWriteReport report;
  Violations v(&report.violations, &report.violation_count);
  const HoldClock::time_point t0 = Earliest(intervals);
  std::vector<HoldInterval> sorted = intervals;
  std::sort(sorted.begin(), sorted.end(),
            [](const HoldInterval& a, const HoldInterval& b) { return a.start < b.start; });

  HoldClock::time_point readers_open_until = HoldClock::time_point::min();
  for (const HoldInterval& h : sorted) {
    if (h.kind != HoldInterval::Kind::kReader) continue;
    if (h.start < readers_open_until) ++report.reader_overlaps;
    readers_open_until = std::max(readers_open_until, h.end);
  }

  for (size_t i = 0; i < sorted.size(); ++i) {
    const HoldInterval& w = sorted[i];
    if (w.kind != HoldInterval::Kind::kWriter) continue;
    for (size_t j = 0; j < sorted.size(); ++j) {
      const HoldInterval& x = sorted[j];
      // A pair of writers is looked at once.
      if (j == i || (x.kind == HoldInterval::Kind::kWriter && j < i)) continue;
      if (x.start < w.end && w.start < x.end) {
        v.Add(absl::StrCat(Describe(w, t0), " overlaps ", Describe(x, t0)));
      } else if (x.end <= w.start && x.token >= w.token) {
        v.Add(absl::StrCat(Describe(x, t0), " came before ", Describe(w, t0),
                           " with a token not smaller"));
      } else if (x.start >= w.end && x.token <= w.token) {
        v.Add(absl::StrCat(Describe(x, t0), " came after ", Describe(w, t0),
                           " with a token not larger"));
      }
    }
  }
  CheckDistinctTokens(intervals, t0, v);
  return report;
}

PermitsReport CheckPermits(const std::vector<HoldInterval>& intervals, uint32_t limit) {
  PermitsReport report;
  Violations v(&report.violations, &report.violation_count);
  const HoldClock::time_point t0 = Earliest(intervals);
  // (time, +permits at a start or -permits at an end); at one instant ends
  // come first: intervals that only touch did not overlap.
  struct Event {
    HoldClock::time_point at;
    int64_t delta;
    const HoldInterval* h;
  };
  std::vector<Event> events;
  for (const HoldInterval& h : intervals) {
    events.push_back({h.start, static_cast<int64_t>(h.permits), &h});
    events.push_back({h.end, -static_cast<int64_t>(h.permits), &h});
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.at != b.at ? a.at < b.at : a.delta < b.delta;
  });
  int64_t held = 0;
  int holders = 0;
  for (const Event& e : events) {
    held += e.delta;
    holders += e.delta > 0 ? 1 : -1;
    report.peak_permits =
        std::max(report.peak_permits, static_cast<uint32_t>(std::max<int64_t>(held, 0)));
    report.peak_holders = std::max(report.peak_holders, holders);
    if (e.delta > 0 && held > static_cast<int64_t>(limit)) {
      v.Add(absl::StrCat(held, " permits held at once (limit ", limit, ") when ",
                         Describe(*e.h, t0), " began"));
    }
  }
  CheckDistinctTokens(intervals, t0, v);
  return report;
}

}  // namespace lockd::testing
