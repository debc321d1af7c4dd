// The result of one lockbench run: an ordered list of named figures, printed
// as a human table or as one JSON object (--json) for scripts.
//
// Naming: keys are snake_case and end in their unit (`_ms`, `_per_s`, `_kb`)
// where they have one. Not thread-safe; built by one thread after a run.

#ifndef LOCKD_TOOLS_LOCKBENCH_REPORT_H_
#define LOCKD_TOOLS_LOCKBENCH_REPORT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace lockd::bench {

class Report {
 public:
  using Value = std::variant<int64_t, double, std::string, bool>;

  void Set(std::string key, Value value);
  // Convenience for counts of any integer type.
  template <typename T>
  void SetInt(std::string key, T value) {
    Set(std::move(key), static_cast<int64_t>(value));
  }
  const Value* Find(const std::string& key) const;

  // "metric  value" lines in insertion order, doubles with 3 decimals.
  void PrintTable(std::ostream& out) const;
  // One JSON object on one line, keys in insertion order.
  void PrintJson(std::ostream& out) const;

 private:
  std::vector<std::pair<std::string, Value>> fields_;
};

// `s` as a JSON string literal (quotes included).
std::string JsonQuote(const std::string& s);

}  // namespace lockd::bench

#endif  // LOCKD_TOOLS_LOCKBENCH_REPORT_H_
