// Minimal leveled logging to stderr: one line per notable event, with a UTC
// timestamp. Thread-safe (each line is written with a single write(2)).
// Never log secrets: callers pass already-redacted text.

#ifndef LOCKD_BACKENDS_COMMON_LOG_H_
#define LOCKD_BACKENDS_COMMON_LOG_H_

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace lockd {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Lines below `level` are dropped. Default kInfo.
void SetLogLevel(LogLevel level);
// Parses "debug", "info", "warning", "error". Returns false if unknown.
bool ParseLogLevel(absl::string_view text, LogLevel* level);

void LogLine(LogLevel level, absl::string_view message);

template <typename... Args>
void LogInfo(const Args&... args) {
  LogLine(LogLevel::kInfo, absl::StrCat(args...));
}
template <typename... Args>
void LogWarning(const Args&... args) {
  LogLine(LogLevel::kWarning, absl::StrCat(args...));
}
template <typename... Args>
void LogError(const Args&... args) {
  LogLine(LogLevel::kError, absl::StrCat(args...));
}
template <typename... Args>
void LogDebug(const Args&... args) {
  LogLine(LogLevel::kDebug, absl::StrCat(args...));
}

}  // namespace lockd

#endif  // LOCKD_BACKENDS_COMMON_LOG_H_
