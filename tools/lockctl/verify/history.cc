#include "tools/lockctl/verify/history.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <istream>
#include <map>
#include <ostream>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace lockd::lockctl::verify {
namespace {

// JSON numbers are doubles to most readers (and to protobuf's parser used
// here); integers beyond 2^53 would not round-trip.
constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

template <typename E>
struct Word {
  E value;
  absl::string_view name;
};

constexpr Word<EventType> kEventTypes[] = {{EventType::kInvoke, "invoke"},
                                           {EventType::kOk, "ok"},
                                           {EventType::kFail, "fail"},
                                           {EventType::kInfo, "info"}};
constexpr Word<Op> kOps[] = {{Op::kAcquire, "acquire"},
                             {Op::kRelease, "release"},
                             {Op::kWrite, "write"},
                             {Op::kKill, "kill"},
                             {Op::kAbandon, "abandon"}};
constexpr Word<LockKind> kKinds[] = {{LockKind::kExclusive, "exclusive"},
                                     {LockKind::kShared, "shared"},
                                     {LockKind::kSemaphore, "semaphore"}};
constexpr Word<Api> kApis[] = {{Api::kSession, "session"}, {Api::kUnary, "unary"}};
constexpr Word<Counter> kCounters[] = {{Counter::kFenced, "fenced"},
                                       {Counter::kUnfenced, "unfenced"}};

template <typename E, size_t N>
absl::string_view NameOf(const Word<E> (&words)[N], E value) {
  for (const Word<E>& w : words) {
    if (w.value == value) return w.name;
  }
  return "";
}

template <typename E, size_t N>
std::string Choices(const Word<E> (&words)[N]) {
  std::string out;
  for (const Word<E>& w : words) absl::StrAppend(&out, out.empty() ? "" : "|", w.name);
  return out;
}

}  // namespace

std::string JsonString(absl::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

namespace {

// Reads the fields of one parsed line, each at most once, checking types.
class FieldReader {
 public:
  explicit FieldReader(const google::protobuf::Struct& object) : object_(object) {}

  // The value of `key`, or null when absent.
  const google::protobuf::Value* Find(absl::string_view key) {
    auto it = object_.fields().find(std::string(key));
    if (it == object_.fields().end()) return nullptr;
    return &it->second;
  }

  absl::Status Integer(absl::string_view key, bool required, int64_t* out) {
    const google::protobuf::Value* v = Find(key);
    if (v == nullptr) {
      return required ? absl::InvalidArgumentError(absl::StrCat("missing key \"", key, "\""))
                      : absl::OkStatus();
    }
    if (v->kind_case() != google::protobuf::Value::kNumberValue) {
      return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" must be an integer"));
    }
    double d = v->number_value();
    if (std::trunc(d) != d || std::fabs(d) > kMaxExactInteger) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", key, "\" must be an integer within +-2^53, not ", d));
    }
    *out = static_cast<int64_t>(d);
    return absl::OkStatus();
  }

  absl::Status NonNegative(absl::string_view key, bool required, int64_t* out) {
    int64_t v = *out;
    if (absl::Status s = Integer(key, required, &v); !s.ok()) return s;
    if (v < 0) return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" must be >= 0"));
    *out = v;
    return absl::OkStatus();
  }

  absl::Status String(absl::string_view key, std::string* out) {
    const google::protobuf::Value* v = Find(key);
    if (v == nullptr) return absl::OkStatus();
    if (v->kind_case() != google::protobuf::Value::kStringValue) {
      return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" must be a string"));
    }
    *out = v->string_value();
    return absl::OkStatus();
  }

  template <typename E, size_t N>
  absl::Status Enum(absl::string_view key, bool required, const Word<E> (&words)[N], E* out) {
    std::string text;
    if (absl::Status s = String(key, &text); !s.ok()) return s;
    if (object_.fields().count(std::string(key)) == 0) {
      return required ? absl::InvalidArgumentError(absl::StrCat("missing key \"", key, "\""))
                      : absl::OkStatus();
    }
    for (const Word<E>& w : words) {
      if (w.name == text) {
        *out = w.value;
        return absl::OkStatus();
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("\"", key, "\" is ", JsonString(text), ", not one of ", Choices(words)));
  }

  // The first key (in sorted order) not in `known`; "" when there is none.
  std::string Unknown(const std::vector<absl::string_view>& known) const {
    std::vector<std::string> unknown;
    for (const auto& [key, value] : object_.fields()) {
      if (std::find(known.begin(), known.end(), key) == known.end()) unknown.push_back(key);
    }
    std::sort(unknown.begin(), unknown.end());
    return unknown.empty() ? "" : unknown.front();
  }

 private:
  const google::protobuf::Struct& object_;
};

const std::vector<absl::string_view>& Keys() {
  static const auto* keys = new std::vector<absl::string_view>{
      "time_ns", "process", "type",           "f",    "lock",    "kind",  "permits",
      "limit",   "owner",   "ttl_ns",         "api",  "replica", "token", "counter",
      "read",    "wrote",   "valid_until_ns", "error"};
  return *keys;
}

absl::Status ParseFields(FieldReader& r, Event& e) {
  int64_t n = 0;
  absl::Status s;
  if (s = r.NonNegative("time_ns", true, &e.time_ns); !s.ok()) return s;
  if (s = r.NonNegative("process", true, &e.process); !s.ok()) return s;
  if (s = r.Enum("type", true, kEventTypes, &e.type); !s.ok()) return s;
  if (s = r.Enum("f", true, kOps, &e.f); !s.ok()) return s;
  if (s = r.String("lock", &e.lock); !s.ok()) return s;
  if (s = r.Enum("kind", false, kKinds, &e.kind); !s.ok()) return s;
  if (s = r.NonNegative("permits", false, &n); !s.ok()) return s;
  if (n > UINT32_MAX) return absl::InvalidArgumentError("\"permits\" is above 2^32-1");
  e.permits = static_cast<uint32_t>(n);
  n = 0;
  if (s = r.NonNegative("limit", false, &n); !s.ok()) return s;
  if (n > UINT32_MAX) return absl::InvalidArgumentError("\"limit\" is above 2^32-1");
  e.limit = static_cast<uint32_t>(n);
  if (s = r.String("owner", &e.owner); !s.ok()) return s;
  if (s = r.NonNegative("ttl_ns", false, &e.ttl_ns); !s.ok()) return s;
  if (s = r.Enum("api", false, kApis, &e.api); !s.ok()) return s;
  if (s = r.String("replica", &e.replica); !s.ok()) return s;
  n = 0;
  if (s = r.NonNegative("token", false, &n); !s.ok()) return s;
  e.token = static_cast<uint64_t>(n);
  if (r.Find("valid_until_ns") != nullptr) {
    int64_t v = 0;
    if (s = r.Integer("valid_until_ns", true, &v); !s.ok()) return s;
    e.valid_until_ns = v;
  }
  if (s = r.Enum("counter", false, kCounters, &e.counter); !s.ok()) return s;
  if (s = r.Integer("read", false, &e.read); !s.ok()) return s;
  if (s = r.Integer("wrote", false, &e.wrote); !s.ok()) return s;
  return r.String("error", &e.error);
}

std::string Describe(const Event& e) {
  return absl::StrCat(EventTypeName(e.type), " ", OpName(e.f), " of process ", e.process,
                      e.lock.empty() ? "" : absl::StrCat(" on ", JsonString(e.lock)),
                      " at time_ns ", e.time_ns);
}

// ValidateHistory's work: the index (in `events`) of the first event breaking
// a rule, with the reason; or -1.
std::pair<int64_t, std::string> FindInvalid(const std::vector<Event>& events) {
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    auto bad = [&](absl::string_view why) {
      return std::make_pair(static_cast<int64_t>(i), absl::StrCat(Describe(e), ": ", why));
    };
    switch (e.f) {
      case Op::kAcquire:
      case Op::kRelease:
        if (e.lock.empty()) return bad("no \"lock\"");
        break;
      case Op::kWrite:
        if (e.lock.empty()) return bad("no \"lock\"");
        if (e.counter == Counter::kNone) return bad("no \"counter\"");
        if (e.type != EventType::kOk && e.type != EventType::kFail) {
          return bad("a write is recorded once, as ok or fail");
        }
        if (e.counter == Counter::kFenced && e.token == 0)
          return bad("a fenced write needs a \"token\"");
        break;
      case Op::kKill:
      case Op::kAbandon:
        if (e.type != EventType::kInfo) return bad("a nemesis event has type info");
        break;
    }
    if (e.f == Op::kAcquire && e.type == EventType::kInvoke) {
      if (e.ttl_ns <= 0) return bad("no \"ttl_ns\" (the lease asked for)");
      if (e.kind == LockKind::kSemaphore && (e.permits == 0 || e.permits > e.limit)) {
        return bad("a semaphore acquire needs 1 <= \"permits\" <= \"limit\"");
      }
    }
    if (e.f == Op::kAcquire && e.type == EventType::kOk && e.token == 0) {
      return bad("a granted acquire needs its \"token\"");
    }
  }

  // Pairing, in time order (stable: events of one process are recorded in
  // their order).
  std::vector<size_t> order(events.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return events[a].time_ns < events[b].time_ns; });
  std::map<std::tuple<int64_t, Op, std::string>, size_t> pending;
  for (size_t i : order) {
    const Event& e = events[i];
    if (e.f == Op::kWrite) continue;
    if (e.f == Op::kKill || e.f == Op::kAbandon) {
      auto it = pending.lower_bound({e.process, Op::kAcquire, ""});
      while (it != pending.end() && std::get<0>(it->first) == e.process) it = pending.erase(it);
      continue;
    }
    auto key = std::make_tuple(e.process, e.f, e.lock);
    auto it = pending.find(key);
    if (e.type == EventType::kInvoke) {
      if (it != pending.end()) {
        return {static_cast<int64_t>(i),
                absl::StrCat(Describe(e), ": the invoke at time_ns ", events[it->second].time_ns,
                             " has no completion yet")};
      }
      pending.emplace(std::move(key), i);
    } else {
      if (it == pending.end()) {
        return {static_cast<int64_t>(i), absl::StrCat(Describe(e), ": no invoke before it")};
      }
      pending.erase(it);
    }
  }
  return {-1, ""};
}

}  // namespace

absl::string_view EventTypeName(EventType type) { return NameOf(kEventTypes, type); }
absl::string_view OpName(Op f) { return NameOf(kOps, f); }
absl::string_view LockKindName(LockKind kind) { return NameOf(kKinds, kind); }
absl::string_view ApiName(Api api) { return NameOf(kApis, api); }
absl::string_view CounterName(Counter counter) { return NameOf(kCounters, counter); }

std::string EventToJson(const Event& e) {
  std::string out = absl::StrCat("{\"time_ns\":", e.time_ns, ",\"process\":", e.process,
                                 ",\"type\":", JsonString(EventTypeName(e.type)),
                                 ",\"f\":", JsonString(OpName(e.f)));
  if (!e.lock.empty()) absl::StrAppend(&out, ",\"lock\":", JsonString(e.lock));
  if (e.kind != LockKind::kExclusive) {
    absl::StrAppend(&out, ",\"kind\":", JsonString(LockKindName(e.kind)));
  }
  if (e.permits != 0) absl::StrAppend(&out, ",\"permits\":", e.permits);
  if (e.limit != 0) absl::StrAppend(&out, ",\"limit\":", e.limit);
  if (!e.owner.empty()) absl::StrAppend(&out, ",\"owner\":", JsonString(e.owner));
  if (e.ttl_ns != 0) absl::StrAppend(&out, ",\"ttl_ns\":", e.ttl_ns);
  if (e.api != Api::kUnknown) absl::StrAppend(&out, ",\"api\":", JsonString(ApiName(e.api)));
  if (!e.replica.empty()) absl::StrAppend(&out, ",\"replica\":", JsonString(e.replica));
  if (e.token != 0) absl::StrAppend(&out, ",\"token\":", e.token);
  if (e.valid_until_ns.has_value())
    absl::StrAppend(&out, ",\"valid_until_ns\":", *e.valid_until_ns);
  if (e.counter != Counter::kNone) {
    absl::StrAppend(&out, ",\"counter\":", JsonString(CounterName(e.counter)));
  }
  if (e.f == Op::kWrite) absl::StrAppend(&out, ",\"read\":", e.read, ",\"wrote\":", e.wrote);
  if (!e.error.empty()) absl::StrAppend(&out, ",\"error\":", JsonString(e.error));
  out += "}";
  return out;
}

absl::StatusOr<Event> ParseEvent(absl::string_view line) {
  google::protobuf::Struct object;
  google::protobuf::util::JsonParseOptions options;
  auto parsed = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(line.data(), line.size()), &object, options);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not one JSON object: ", std::string(parsed.message())));
  }
  FieldReader reader(object);
  Event event;
  if (absl::Status s = ParseFields(reader, event); !s.ok()) return s;
  if (std::string key = reader.Unknown(Keys()); !key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown key ", JsonString(key)));
  }
  return event;
}

absl::Status ValidateHistory(const std::vector<Event>& events) {
  auto [index, why] = FindInvalid(events);
  if (index < 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("event ", index + 1, ": ", why));
}

absl::StatusOr<std::vector<Event>> ReadHistory(std::istream& in) {
  std::vector<Event> events;
  std::vector<int64_t> lines;  // the line of each event
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    absl::StatusOr<Event> event = ParseEvent(line);
    if (!event.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", number, ": ", event.status().message()));
    }
    events.push_back(*std::move(event));
    lines.push_back(number);
  }
  if (in.bad()) return absl::DataLossError("reading the history failed");
  auto [index, why] = FindInvalid(events);
  if (index >= 0) return absl::InvalidArgumentError(absl::StrCat("line ", lines[index], ": ", why));
  return events;
}

absl::StatusOr<std::vector<Event>> ReadHistoryFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    int err = errno;
    std::string what = absl::StrCat("history ", path, ": ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(what);
    if (err == EACCES) return absl::PermissionDeniedError(what);
    return absl::InvalidArgumentError(what);
  }
  absl::StatusOr<std::vector<Event>> events = ReadHistory(in);
  if (!events.ok()) {
    return absl::Status(events.status().code(),
                        absl::StrCat("history ", path, ": ", events.status().message()));
  }
  return events;
}

HistoryRecorder::HistoryRecorder(std::ostream* out, Clock::time_point start)
    : out_(out), start_(start) {}

int64_t HistoryRecorder::ToRunNs(Clock::time_point t) const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t - start_).count();
}

int64_t HistoryRecorder::NowNs() const { return ToRunNs(Clock::now()); }

int64_t HistoryRecorder::LeaseBoundNs(Clock::time_point valid_until) const {
  if (valid_until == Clock::time_point::max()) return NowNs();
  return ToRunNs(valid_until);
}

void HistoryRecorder::Record(const Event& event) {
  absl::MutexLock l(&mu_);
  AppendLocked(event);
}

int64_t HistoryRecorder::RecordNow(Event event) {
  absl::MutexLock l(&mu_);
  event.time_ns = NowNs();
  AppendLocked(event);
  return event.time_ns;
}

std::vector<Event> HistoryRecorder::Events() const {
  absl::MutexLock l(&mu_);
  return events_;
}

absl::Status HistoryRecorder::status() const {
  absl::MutexLock l(&mu_);
  if (write_failed_) return absl::DataLossError("writing the history file failed");
  return absl::OkStatus();
}

void HistoryRecorder::AppendLocked(const Event& event) {
  events_.push_back(event);
  if (out_ == nullptr || write_failed_) return;
  *out_ << EventToJson(event) << '\n';
  out_->flush();
  if (!*out_) write_failed_ = true;
}

}  // namespace lockd::lockctl::verify
