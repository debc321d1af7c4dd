#include "backends/common/options.h"

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"

namespace lockd {

absl::Status IntRangeError(int64_t min, int64_t max, const std::string& text) {
  return absl::InvalidArgumentError(
      absl::StrCat("expected an integer in [", min, ", ", max, "], got \"", text, "\""));
}

absl::Status ParseIntOption(const std::string& text, int64_t min, int64_t max, int64_t* out) {
  int64_t n;
  if (!absl::SimpleAtoi(text, &n) || n < min || n > max) return IntRangeError(min, max, text);
  *out = n;
  return absl::OkStatus();
}

namespace {

bool InRange(absl::Duration d, DurationRange range) {
  return d >= range.min && d >= absl::ZeroDuration() && d != absl::InfiniteDuration() &&
         !(range.positive && d == absl::ZeroDuration());
}

absl::Status DurationRangeError(DurationRange range, absl::string_view text) {
  std::string expected = "a duration";
  if (range.positive) {
    expected = "a positive duration";
  } else if (range.min > absl::ZeroDuration()) {
    expected = absl::StrCat("a duration of at least ", absl::FormatDuration(range.min), ",");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("expected ", expected, " like 250ms, 30s, 5m or 1h, got \"", text, "\""));
}

}  // namespace

absl::Status ParseDurationOption(const std::string& text, DurationRange range,
                                 absl::Duration* out) {
  absl::Duration d;
  if (!absl::ParseDuration(text, &d) || !InRange(d, range)) return DurationRangeError(range, text);
  *out = d;
  return absl::OkStatus();
}

absl::Status CheckDurationOption(absl::Duration d, DurationRange range) {
  if (InRange(d, range)) return absl::OkStatus();
  return DurationRangeError(range, absl::FormatDuration(d));
}

absl::Status ParseBoolOption(const std::string& text, bool* out) {
  if (text != "true" && text != "false") {
    return absl::InvalidArgumentError(absl::StrCat("expected true or false, got \"", text, "\""));
  }
  *out = text == "true";
  return absl::OkStatus();
}

absl::Status NotOneOf(const std::vector<std::string>& names, const std::string& text) {
  return absl::InvalidArgumentError(
      absl::StrCat("expected one of ", absl::StrJoin(names, ", "), ", got \"", text, "\""));
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read secret file ", path));
  }
  std::string line;
  std::getline(in, line);
  absl::StripTrailingAsciiWhitespace(&line);
  return line;
}

}  // namespace lockd
