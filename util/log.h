// Minimal leveled logging to stderr: one line per notable event, with a UTC
// timestamp. Thread-safe (each line is written with a single write(2)).
// Never log secrets: callers pass already-redacted text.
//
// Two formats (SetLogFormat): text, "2024-05-01T10:00:00.123Z INFO message
// key=value ...", and JSON lines with stable field names: {"ts": ..., "level":
// "info"|"debug"|"warning"|"error", "msg": ..., then each field of
// LogFields as a string}.

#ifndef LOCKD_UTIL_LOG_H_
#define LOCKD_UTIL_LOG_H_

#include <initializer_list>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace lockd {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Lines below `level` are dropped. Default kInfo.
void SetLogLevel(LogLevel level);
// Parses "debug", "info", "warning", "error". Returns false if unknown.
bool ParseLogLevel(absl::string_view text, LogLevel* level);

enum class LogFormat { kText = 0, kJson = 1 };

// Default kText.
void SetLogFormat(LogFormat format);
// Parses "text" or "json". Returns false if unknown.
bool ParseLogFormat(absl::string_view text, LogFormat* format);

void LogLine(LogLevel level, absl::string_view message);

using LogField = std::pair<absl::string_view, absl::string_view>;

// A line with named fields (audit records). In text, each field is
// key=value, the value quoted (Go-style escapes) unless it is a non-empty
// run of [A-Za-z0-9._:/@+-]; in JSON each is a string member. Field names
// must be [a-z_]+ and not ts, level or msg.
void LogFields(LogLevel level, absl::string_view message, std::initializer_list<LogField> fields);

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

#endif  // LOCKD_UTIL_LOG_H_
