#include "backends/zookeeper/zk_codec.h"

#include <algorithm>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"

namespace lockd::zk {
namespace {

constexpr char kHex[] = "0123456789ABCDEF";
constexpr absl::string_view kNodeMagic = "lockd-zk-node 1";
constexpr absl::string_view kTombstoneMagic = "lockd-zk-freed 1";
constexpr size_t kSeqDigits = 10;

bool Unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;  // lower case is never produced, so it is not accepted either
}

// Values in znode data: one per line, so '%' and control characters are
// escaped. Owners and request ids never hold control characters (the service
// refuses them); escaping anyway keeps the format robust.
std::string EscapeValue(absl::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (unsigned char c : v) {
    if (c == '%' || c < 0x20 || c == 0x7f) {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

bool UnescapeValue(absl::string_view v, std::string* out) {
  out->clear();
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != '%') {
      out->push_back(v[i]);
      continue;
    }
    if (i + 2 >= v.size()) return false;
    int hi = HexValue(v[i + 1]);
    int lo = HexValue(v[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

// Splits "magic\nkey=value\n..." into key/value pairs. Unknown keys are
// ignored so that a later version may add fields.
bool ParseLines(absl::string_view text, absl::string_view magic,
                std::vector<std::pair<absl::string_view, absl::string_view>>* out) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  if (lines.empty() || lines[0] != magic) return false;
  for (size_t i = 1; i < lines.size(); ++i) {
    size_t eq = lines[i].find('=');
    if (eq == absl::string_view::npos) return false;
    out->emplace_back(lines[i].substr(0, eq), lines[i].substr(eq + 1));
  }
  return true;
}

absl::string_view LastName(NodeData::Last l) {
  switch (l) {
    case NodeData::Last::kAcquire:
      return "acquire";
    case NodeData::Last::kRelease:
      return "release";
    case NodeData::Last::kNone:
      break;
  }
  return "none";
}

}  // namespace

std::string EncodeSegment(absl::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (unsigned char c : raw) {
    if (Unreserved(c)) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  return out;
}

bool DecodeSegment(absl::string_view encoded, std::string* raw) {
  raw->clear();
  for (size_t i = 0; i < encoded.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(encoded[i]);
    if (Unreserved(c)) {
      raw->push_back(static_cast<char>(c));
      continue;
    }
    if (c != '%' || i + 2 >= encoded.size()) return false;
    int hi = HexValue(encoded[i + 1]);
    int lo = HexValue(encoded[i + 2]);
    if (hi < 0 || lo < 0) return false;
    unsigned char b = static_cast<unsigned char>(hi * 16 + lo);
    if (Unreserved(b)) return false;  // not canonical: EncodeSegment keeps it
    raw->push_back(static_cast<char>(b));
    i += 2;
  }
  return !raw->empty();
}

uint64_t OwnerTag(absl::string_view owner) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : owner) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

bool ContenderOwnerTag(absl::string_view name, uint64_t* tag) {
  if (name.size() < 2 + 16 || name.substr(0, 2) != "c-") return false;
  return absl::SimpleHexAtoi(name.substr(2, 16), tag);
}

std::string KindTag(const ContenderKind& kind) {
  if (kind.semaphore()) return absl::StrCat("p", kind.permits, "of", kind.limit, "-");
  return kind.shared_lock() ? "r-" : "";
}

std::string NewAttemptPrefix(absl::string_view owner, const ContenderKind& kind) {
  return absl::StrCat(NewAttemptPrefix(owner), KindTag(kind));
}

std::string NewAttemptPrefix(absl::string_view owner) {
  std::string p = NewAttemptPrefix();
  if (!owner.empty()) {
    std::string tag = absl::StrFormat("%016x", OwnerTag(owner));
    p.replace(2, tag.size(), tag);
  }
  return p;
}

std::string NewAttemptPrefix() {
  static absl::Mutex mu(absl::kConstInit);
  static absl::BitGen* gen ABSL_GUARDED_BY(mu) = nullptr;
  uint64_t hi, lo;
  {
    absl::MutexLock l(&mu);
    if (gen == nullptr) gen = new absl::BitGen();
    hi = absl::Uniform<uint64_t>(*gen);
    lo = absl::Uniform<uint64_t>(*gen);
  }
  return absl::StrFormat("c-%016x%016x-", hi, lo);
}

namespace {

// Parses a kind tag without its '-' ("r", "p3of4"); false for anything else.
bool ParseKindTag(absl::string_view tag, ContenderKind* kind) {
  ContenderKind k;
  if (tag == "r") {
    k.mode = LockMode::kShared;
  } else {
    size_t of = tag.find("of");
    if (tag.empty() || tag[0] != 'p' || of == absl::string_view::npos ||
        !absl::SimpleAtoi(tag.substr(1, of - 1), &k.permits) ||
        !absl::SimpleAtoi(tag.substr(of + 2), &k.limit) || k.permits == 0 || k.permits > k.limit ||
        tag.substr(1, of - 1) != absl::StrCat(k.permits) ||
        tag.substr(of + 2) != absl::StrCat(k.limit)) {
      return false;
    }
  }
  *kind = k;
  return true;
}

}  // namespace

bool ContenderSeq(absl::string_view name, int32_t* seq, ContenderKind* kind) {
  // "c-" + 32 hex + "-" + the kind tag + the sequence, which ZooKeeper
  // formats with %010d: 10 digits, or once the parent's cversion has wrapped
  // negative, a '-' and 9 or 10 digits. A kind tag starts with a letter.
  constexpr size_t kPrefixLen = 2 + 32 + 1;
  if (name.size() < kPrefixLen + kSeqDigits || name.substr(0, 2) != "c-" ||
      name[kPrefixLen - 1] != '-') {
    return false;
  }
  absl::string_view rest = name.substr(kPrefixLen);
  ContenderKind k;
  if (!rest.empty() && rest[0] >= 'a' && rest[0] <= 'z') {
    size_t dash = rest.find('-');
    if (dash == absl::string_view::npos || !ParseKindTag(rest.substr(0, dash), &k)) return false;
    rest.remove_prefix(dash + 1);
  }
  if (rest.size() < kSeqDigits || rest.size() > kSeqDigits + 1) return false;
  if (rest.size() == kSeqDigits + 1 && rest[0] != '-') return false;
  if (!absl::SimpleAtoi(rest, seq)) return false;
  if (kind != nullptr) *kind = k;
  return true;
}

bool ParseContender(absl::string_view name, Contender* out) {
  int32_t seq;
  ContenderKind kind;
  if (!ContenderSeq(name, &seq, &kind)) return false;
  out->name = std::string(name);
  out->seq = seq;
  out->kind = kind;
  return true;
}

std::vector<Contender> QueueOrder(std::vector<std::string> children) {
  std::vector<Contender> out;
  out.reserve(children.size());
  for (std::string& c : children) {
    int32_t seq;
    ContenderKind kind;
    if (ContenderSeq(c, &seq, &kind)) out.push_back(Contender{std::move(c), seq, kind});
  }
  std::sort(out.begin(), out.end(),
            [](const Contender& a, const Contender& b) { return SeqBefore(a.seq, b.seq); });
  return out;
}

std::string EncodeNodeData(const NodeData& d) {
  return absl::StrCat(kNodeMagic, "\nowner=", EscapeValue(d.owner), "\nholds=", d.holds,
                      "\nttl_ms=", d.ttl_ms, "\nlease=", d.lease, d.waiting ? "\nwaiting=1" : "",
                      "\nlast=", LastName(d.last), "\nlast_id=", EscapeValue(d.last_id),
                      "\nlast_holds=", d.last_holds, "\nlast_ttl_ms=", d.last_ttl_ms, "\n");
}

bool DecodeNodeData(absl::string_view text, NodeData* out) {
  std::vector<std::pair<absl::string_view, absl::string_view>> kv;
  if (!ParseLines(text, kNodeMagic, &kv)) return false;
  NodeData d;
  bool have_owner = false, have_ttl = false;
  for (const auto& [k, v] : kv) {
    bool ok = true;
    if (k == "owner") {
      ok = UnescapeValue(v, &d.owner);
      have_owner = true;
    } else if (k == "holds") {
      ok = absl::SimpleAtoi(v, &d.holds);
    } else if (k == "ttl_ms") {
      ok = absl::SimpleAtoi(v, &d.ttl_ms);
      have_ttl = true;
    } else if (k == "lease") {
      ok = absl::SimpleAtoi(v, &d.lease);
    } else if (k == "waiting") {
      ok = absl::SimpleAtob(v, &d.waiting);
    } else if (k == "last") {
      if (v == "acquire") {
        d.last = NodeData::Last::kAcquire;
      } else if (v == "release") {
        d.last = NodeData::Last::kRelease;
      } else if (v == "none") {
        d.last = NodeData::Last::kNone;
      } else {
        ok = false;
      }
    } else if (k == "last_id") {
      ok = UnescapeValue(v, &d.last_id);
    } else if (k == "last_holds") {
      ok = absl::SimpleAtoi(v, &d.last_holds);
    } else if (k == "last_ttl_ms") {
      ok = absl::SimpleAtoi(v, &d.last_ttl_ms);
    }
    if (!ok) return false;
  }
  if (!have_owner || !have_ttl || d.owner.empty() || d.holds == 0 || d.ttl_ms <= 0) return false;
  *out = std::move(d);
  return true;
}

std::string EncodeTombstone(const Tombstone& t) {
  return absl::StrCat(kTombstoneMagic, "\nowner=", EscapeValue(t.owner),
                      "\nrequest_id=", EscapeValue(t.request_id), "\n");
}

bool DecodeTombstone(absl::string_view text, Tombstone* out) {
  std::vector<std::pair<absl::string_view, absl::string_view>> kv;
  if (!ParseLines(text, kTombstoneMagic, &kv)) return false;
  Tombstone t;
  for (const auto& [k, v] : kv) {
    if (k == "owner" && !UnescapeValue(v, &t.owner)) return false;
    if (k == "request_id" && !UnescapeValue(v, &t.request_id)) return false;
  }
  if (t.owner.empty() || t.request_id.empty()) return false;
  *out = std::move(t);
  return true;
}

}  // namespace lockd::zk
