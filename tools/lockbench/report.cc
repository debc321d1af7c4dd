#include "tools/lockbench/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace lockd::bench {
namespace {

std::string FormatDouble(double v, const char* format) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string ToText(const Report::Value& v, bool json) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) return FormatDouble(*d, json ? "%.6g" : "%.3f");
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  const std::string& s = std::get<std::string>(v);
  return json ? JsonQuote(s) : s;
}

}  // namespace

void Report::Set(std::string key, Value value) {
  for (auto& [k, v] : fields_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  fields_.emplace_back(std::move(key), std::move(value));
}

const Report::Value* Report::Find(const std::string& key) const {
  for (const auto& [k, v] : fields_) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Report::PrintTable(std::ostream& out) const {
  size_t width = 0;
  for (const auto& [k, v] : fields_) width = std::max(width, k.size());
  for (const auto& [k, v] : fields_) {
    out << k << std::string(width + 2 - k.size(), ' ') << ToText(v, false) << "\n";
  }
}

void Report::PrintJson(std::ostream& out) const {
  out << "{";
  bool first = true;
  for (const auto& [k, v] : fields_) {
    if (!first) out << ", ";
    first = false;
    out << JsonQuote(k) << ": " << ToText(v, true);
  }
  out << "}\n";
}

std::string JsonQuote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += "\"";
  return out;
}

}  // namespace lockd::bench
