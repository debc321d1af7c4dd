#include "util/log.h"

#include <unistd.h>

#include <atomic>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace lockd {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_format{static_cast<int>(LogFormat::kText)};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARN";
    case LogLevel::kError:
      return "ERROR";
  }
  return "?";
}
const char* JsonLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "?";
}

// A JSON string literal; bytes >= 0x80 pass through (lockd's strings are
// valid UTF-8).
void AppendJsonString(std::string* out, absl::string_view s) {
  out->push_back('"');
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '\t') {
      out->append("\\t");
    } else if (u < 0x20 || u == 0x7f) {
      absl::StrAppend(out, "\\u00", absl::Hex(u, absl::kZeroPad2));
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

bool IsBareValue(absl::string_view v) {
  if (v.empty()) return false;
  for (char c : v) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == ':' || c == '/' || c == '@' || c == '+' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string Timestamp() {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
}

void Write(const std::string& line) {
  // One write per line keeps concurrent lines whole.
  ssize_t unused = ::write(STDERR_FILENO, line.data(), line.size());
  (void)unused;
}

}  // namespace

void SetLogFormat(LogFormat format) { g_format.store(static_cast<int>(format)); }

bool ParseLogFormat(absl::string_view text, LogFormat* format) {
  if (text == "text") {
    *format = LogFormat::kText;
  } else if (text == "json") {
    *format = LogFormat::kJson;
  } else {
    return false;
  }
  return true;
}

void LogFields(LogLevel level, absl::string_view message, std::initializer_list<LogField> fields) {
  if (static_cast<int>(level) < g_level.load(std::memory_order_relaxed)) return;
  std::string line;
  if (g_format.load(std::memory_order_relaxed) == static_cast<int>(LogFormat::kJson)) {
    absl::StrAppend(&line, "{\"ts\":\"", Timestamp(), "\",\"level\":\"", JsonLevelName(level),
                    "\",\"msg\":");
    AppendJsonString(&line, message);
    for (const LogField& f : fields) {
      absl::StrAppend(&line, ",\"", f.first, "\":");
      AppendJsonString(&line, f.second);
    }
    line += "}\n";
  } else {
    absl::StrAppend(&line, Timestamp(), " ", LevelName(level), " ", message);
    for (const LogField& f : fields) {
      absl::StrAppend(&line, " ", f.first, "=");
      if (IsBareValue(f.second)) {
        line.append(f.second.data(), f.second.size());
      } else {
        AppendJsonString(&line, f.second);
      }
    }
    line += "\n";
  }
  Write(line);
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }

bool ParseLogLevel(absl::string_view text, LogLevel* level) {
  if (text == "debug") {
    *level = LogLevel::kDebug;
  } else if (text == "info") {
    *level = LogLevel::kInfo;
  } else if (text == "warning" || text == "warn") {
    *level = LogLevel::kWarning;
  } else if (text == "error") {
    *level = LogLevel::kError;
  } else {
    return false;
  }
  return true;
}

void LogLine(LogLevel level, absl::string_view message) {
  if (g_format.load(std::memory_order_relaxed) == static_cast<int>(LogFormat::kJson)) {
    LogFields(level, message, {});
    return;
  }
  if (static_cast<int>(level) < g_level.load(std::memory_order_relaxed)) return;
  Write(absl::StrCat(Timestamp(), " ", LevelName(level), " ", message, "\n"));
}

}  // namespace lockd
