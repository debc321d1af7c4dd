#include "tools/lockbench/proc_status.h"

#include <algorithm>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace lockd::bench {

ProcSample ReadProc(int pid) {
  ProcSample s;
  if (pid <= 0) return s;
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view v(line);
    if (absl::ConsumePrefix(&v, "VmRSS:")) {
      v = absl::StripAsciiWhitespace(v);
      (void)absl::ConsumeSuffix(&v, "kB");
      (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(v), &s.rss_kb);
    } else if (absl::ConsumePrefix(&v, "Threads:")) {
      (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(v), &s.threads);
    }
  }
  return s;
}

ProcSample MaxOf(const ProcSample& a, const ProcSample& b) {
  return ProcSample{std::max(a.rss_kb, b.rss_kb), std::max(a.threads, b.threads)};
}

}  // namespace lockd::bench
