// lockctl's one-shot commands (acquire, release, renew, describe, list) and
// their text / JSON output.

#include <algorithm>
#include <cstdio>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "tools/lockctl/lockctl.h"

namespace lockd::lockctl {
namespace {

std::string Json(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
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
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;  // UTF-8 passes through
        }
    }
  }
  return out + "\"";
}

const char* Bool(bool b) { return b ? "true" : "false"; }

int64_t Millis(absl::Duration d) { return absl::ToInt64Milliseconds(d); }

// Durations for people: millisecond precision ("29.957s").
std::string Human(absl::Duration d) {
  return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(1)));
}

std::string NsOrDefault(const std::string& ns) { return ns.empty() ? "default" : ns; }

std::string LockInfoJson(const LockInfo& i) {
  return absl::StrCat("{\"namespace\":", Json(NsOrDefault(i.ns)), ",\"name\":", Json(i.name),
                      ",\"held\":", Bool(i.held), ",\"owner\":", Json(i.owner),
                      ",\"hold_count\":", i.hold_count, ",\"fencing_token\":", i.fencing_token,
                      ",\"ttl_remaining_ms\":", Millis(i.ttl_remaining), ",\"waiters\":", i.waiters,
                      ",\"backend\":", Json(i.backend), "}");
}

void PrintLockInfoText(const LockInfo& i, std::ostream& out) {
  out << "name: " << i.name << "\n"
      << "namespace: " << NsOrDefault(i.ns) << "\n"
      << "held: " << Bool(i.held) << "\n";
  if (i.held) {
    out << "owner: " << i.owner << "\n"
        << "hold_count: " << i.hold_count << "\n"
        << "fencing_token: " << i.fencing_token << "\n"
        << "ttl_remaining: " << Human(i.ttl_remaining) << "\n";
  }
  out << "waiters: " << i.waiters << "\n"
      << "backend: " << i.backend << "\n";
}

int Fail(const absl::Status& status, bool acquiring, std::ostream& err) {
  err << "lockctl: " << status.message() << "\n";
  return ExitCodeFor(status, acquiring);
}

// `s` quoted for a POSIX shell when it needs it.
std::string ShellWord(absl::string_view s) {
  bool plain = !s.empty();
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        std::string_view("-_./:=@%+,").find(c) == std::string_view::npos) {
      plain = false;
    }
  }
  if (plain) return std::string(s);
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

int Acquire(const Invocation& inv, Client& client, std::ostream& out, std::ostream& err) {
  AcquireOptions o;
  o.ttl = inv.ttl;
  o.wait = inv.wait;
  o.auto_renew = false;  // the hold outlives this process; nothing would renew it
  absl::StatusOr<Lease> lease = client.Acquire(inv.name, o);
  if (std::optional<std::string> id = UnconfirmedAcquireRequestId(lease.status())) {
    // The attempt may hold the lock and its undo went unanswered: say what
    // is needed to undo it by hand.
    const std::string ns = NsOrDefault(inv.ns);
    if (inv.output == Output::kJson) {
      out << "{\"acquired\":null,\"name\":" << Json(inv.name) << ",\"namespace\":" << Json(ns)
          << ",\"owner\":" << Json(client.owner()) << ",\"acquire_request_id\":" << Json(*id)
          << "}\n";
    } else {
      out << "acquired: unknown\n"
          << "name: " << inv.name << "\n"
          << "namespace: " << ns << "\n"
          << "owner: " << client.owner() << "\n"
          << "acquire_request_id: " << *id << "\n";
    }
    err << "lockctl: " << lease.status().message() << "\n"
        << "lockctl: to undo it: " << UndoCommand(inv, client.owner(), lease.status()) << "\n";
    return ExitCodeFor(lease.status(), /*acquiring=*/true);
  }
  if (!lease.ok()) {
    if (inv.output == Output::kJson && absl::IsDeadlineExceeded(lease.status())) {
      std::optional<LockInfo> holder = CurrentHolder(lease.status());
      out << "{\"acquired\":false,\"name\":" << Json(inv.name)
          << ",\"namespace\":" << Json(NsOrDefault(inv.ns))
          << ",\"current\":" << (holder ? LockInfoJson(*holder) : std::string("null")) << "}\n";
    }
    return Fail(lease.status(), /*acquiring=*/true, err);
  }
  if (inv.output == Output::kJson) {
    out << "{\"acquired\":true,\"name\":" << Json(lease->name())
        << ",\"namespace\":" << Json(NsOrDefault(lease->ns()))
        << ",\"owner\":" << Json(lease->owner()) << ",\"fencing_token\":" << lease->fencing_token()
        << ",\"hold_count\":" << lease->hold_count() << ",\"ttl_ms\":" << Millis(lease->ttl())
        << "}\n";
  } else {
    out << "acquired: true\n"
        << "name: " << lease->name() << "\n"
        << "namespace: " << NsOrDefault(lease->ns()) << "\n"
        << "owner: " << lease->owner() << "\n"
        << "fencing_token: " << lease->fencing_token() << "\n"
        << "hold_count: " << lease->hold_count() << "\n"
        << "ttl: " << absl::FormatDuration(lease->ttl()) << "\n";
  }
  lease->Detach();  // leave it held
  return kExitOk;
}

int Release(const Invocation& inv, Client& client, std::ostream& out, std::ostream& err) {
  absl::StatusOr<ReleaseOutcome> r =
      inv.acquire_request_id.empty()
          ? client.Release(inv.name, inv.owner, "", inv.fencing_token)
          : client.UndoAcquire(inv.name, inv.owner, inv.acquire_request_id, "", inv.fencing_token);
  if (!r.ok()) return Fail(r.status(), false, err);
  if (inv.output == Output::kJson) {
    out << "{\"released\":" << Bool(r->released) << ",\"hold_count\":" << r->hold_count << "}\n";
  } else {
    out << "released: " << Bool(r->released) << "\n"
        << "hold_count: " << r->hold_count << "\n";
  }
  return kExitOk;
}

int Renew(const Invocation& inv, Client& client, std::ostream& out, std::ostream& err) {
  absl::StatusOr<RenewOutcome> r =
      client.Renew(inv.name, inv.owner, inv.ttl, "", inv.fencing_token);
  if (!r.ok()) return Fail(r.status(), false, err);
  if (inv.output == Output::kJson) {
    out << "{\"renewed\":true,\"ttl_ms\":" << Millis(r->ttl)
        << ",\"fencing_token\":" << r->fencing_token << "}\n";
  } else {
    out << "renewed: true\n"
        << "ttl: " << absl::FormatDuration(r->ttl) << "\n"
        << "fencing_token: " << r->fencing_token << "\n";
  }
  return kExitOk;
}

int Describe(const Invocation& inv, Client& client, std::ostream& out, std::ostream& err) {
  absl::StatusOr<LockInfo> info = client.Describe(inv.name);
  if (!info.ok()) return Fail(info.status(), false, err);
  if (inv.output == Output::kJson) {
    out << LockInfoJson(*info) << "\n";
  } else {
    PrintLockInfoText(*info, out);
  }
  return kExitOk;
}

int List(const Invocation& inv, Client& client, std::ostream& out, std::ostream& err) {
  std::vector<LockInfo> locks;
  ListOptions o;
  o.prefix = inv.prefix;
  while (true) {
    if (inv.limit > 0) {
      o.page_size = static_cast<uint32_t>(
          std::min<int64_t>(1000, inv.limit - static_cast<int64_t>(locks.size())));
    }
    absl::StatusOr<ListPage> page = client.List(o);
    if (!page.ok()) return Fail(page.status(), false, err);
    for (LockInfo& i : page->locks) {
      if (inv.limit > 0 && static_cast<int64_t>(locks.size()) >= inv.limit) break;
      locks.push_back(std::move(i));
    }
    if (page->next_page_token.empty() ||
        (inv.limit > 0 && static_cast<int64_t>(locks.size()) >= inv.limit)) {
      break;
    }
    o.page_token = page->next_page_token;
  }
  if (inv.output == Output::kJson) {
    out << "{\"locks\":[";
    for (size_t i = 0; i < locks.size(); ++i) out << (i ? "," : "") << LockInfoJson(locks[i]);
    out << "]}\n";
    return kExitOk;
  }
  size_t name_w = 4, owner_w = 5;
  for (const LockInfo& i : locks) {
    name_w = std::max(name_w, i.name.size());
    owner_w = std::max(owner_w, i.owner.size());
  }
  out << absl::StrFormat("%-*s  %-*s  %20s  %5s  %10s  %7s\n", name_w, "NAME", owner_w, "OWNER",
                         "FENCING_TOKEN", "HOLDS", "TTL", "WAITERS");
  for (const LockInfo& i : locks) {
    out << absl::StrFormat("%-*s  %-*s  %20d  %5d  %10s  %7d\n", name_w, i.name, owner_w, i.owner,
                           i.fencing_token, i.hold_count, Human(i.ttl_remaining), i.waiters);
  }
  return kExitOk;
}

int ForceRelease(const Invocation& inv, Client& client, std::ostream& out, std::ostream& err) {
  absl::StatusOr<ForceReleaseOutcome> r =
      client.ForceRelease(inv.name, inv.reason, inv.fencing_token);
  if (!r.ok()) return Fail(r.status(), false, err);
  if (inv.output == Output::kJson) {
    out << "{\"released\":" << Bool(r->released) << ",\"previous\":" << LockInfoJson(r->previous)
        << "}\n";
  } else {
    out << "released: " << Bool(r->released) << "\n";
    if (r->previous.held) {
      out << "previous_owner: " << r->previous.owner << "\n"
          << "previous_hold_count: " << r->previous.hold_count << "\n"
          << "previous_fencing_token: " << r->previous.fencing_token << "\n";
    }
  }
  return kExitOk;
}

}  // namespace

std::string UndoCommand(const Invocation& inv, absl::string_view owner,
                        const absl::Status& status) {
  std::optional<std::string> id = UnconfirmedAcquireRequestId(status);
  if (!id.has_value()) return "";
  return absl::StrCat("lockctl release --namespace ", ShellWord(NsOrDefault(inv.ns)), " --name ",
                      ShellWord(inv.name), " --owner ", ShellWord(owner), " --acquire-request-id ",
                      ShellWord(*id));
}

int Execute(const Invocation& inv, std::ostream& out, std::ostream& err) {
  ClientOptions co;
  co.owner = inv.owner;
  co.default_namespace = inv.ns;
  co.rpc_timeout = inv.timeout;
  co.release_timeout = std::min(inv.timeout, absl::Seconds(5));
  // Only `run` holds over the session (acquire leaves its hold behind, so
  // it takes it unary). The session's lease is --ttl; a dead lockctl must
  // free its lock at once, so holds are not kept for a resume after a
  // disconnect (a lockd replica that dies still leaves them to be resumed).
  co.use_sessions = !inv.unary;
  co.session_ttl = inv.ttl;
  co.keep_on_disconnect = false;
  absl::StatusOr<Client> client = Client::Connect(inv.server, co, inv.tls, inv.auth);
  if (!client.ok()) {
    err << "lockctl: " << client.status().message() << "\n";
    return kExitUsage;
  }
  if (inv.command == "acquire") return Acquire(inv, *client, out, err);
  if (inv.command == "release") return Release(inv, *client, out, err);
  if (inv.command == "renew") return Renew(inv, *client, out, err);
  if (inv.command == "describe") return Describe(inv, *client, out, err);
  if (inv.command == "list") return List(inv, *client, out, err);
  if (inv.command == "run") return RunCommand(inv, *client, err);
  if (inv.command == "force-release") return ForceRelease(inv, *client, out, err);
  err << "lockctl: unknown command \"" << inv.command << "\"\n";
  return kExitUsage;
}

}  // namespace lockd::lockctl
