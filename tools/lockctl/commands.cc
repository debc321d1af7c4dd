// lockctl's one-shot commands (acquire, release, renew, describe, list,
// force-release) and their text / JSON output (proto_json.h).

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
#include "tools/lockctl/proto_json.h"

namespace lockd::lockctl {
namespace {

const char* Bool(bool b) { return b ? "true" : "false"; }

// Durations for people: millisecond precision ("29.957s").
std::string Human(absl::Duration d) {
  return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(1)));
}

std::string NsOrDefault(const std::string& ns) { return ns.empty() ? "default" : ns; }

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
  if (!i.held) return;
  out << "mode: " << HoldModeName(i.mode) << "\n";
  if (i.limit > 0) out << "limit: " << i.limit << "\n";
  out << "holders: " << i.holders.size() << "\n";
  for (const Holder& h : i.holders) {
    out << "  - owner: " << h.owner << "  mode: " << HoldModeName(h.mode)
        << "  hold_count: " << h.hold_count << "  permits: " << h.permits
        << "  fencing_token: " << h.fencing_token << "  ttl_remaining: " << Human(h.ttl_remaining)
        << "\n";
  }
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
  absl::StatusOr<Lease> lease = AcquireKind(inv, client, o);
  if (std::optional<std::string> id = UnconfirmedAcquireRequestId(lease.status())) {
    // The attempt may hold the lock and its undo went unanswered: say what
    // is needed to undo it by hand.
    const std::string ns = NsOrDefault(inv.ns);
    if (inv.output == Output::kJson) {
      v1::ReleaseRequest undo;  // what `release --acquire-request-id` sends
      undo.set_namespace_(ns);
      undo.set_name(inv.name);
      undo.set_owner(client.owner());
      undo.set_acquire_request_id(*id);
      out << ProtoJson(undo) << "\n";
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
      out << ProtoJson(NotAcquiredResponse(holder ? &*holder : nullptr)) << "\n";
    }
    return Fail(lease.status(), /*acquiring=*/true, err);
  }
  if (inv.output == Output::kJson) {
    out << ProtoJson(AcquiredResponse(*lease)) << "\n";
  } else {
    out << "acquired: true\n"
        << "name: " << lease->name() << "\n"
        << "namespace: " << NsOrDefault(lease->ns()) << "\n"
        << "owner: " << lease->owner() << "\n"
        << "fencing_token: " << lease->fencing_token() << "\n"
        << "hold_count: " << lease->hold_count() << "\n"
        << "ttl: " << absl::FormatDuration(lease->ttl()) << "\n";
    if (lease->mode() == HoldMode::kShared) out << "mode: shared\n";
    if (lease->limit() > 0) {
      out << "limit: " << lease->limit() << "\n"
          << "permits: " << lease->permits() << "\n";
    }
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
    out << ProtoJson(ToProto(*r)) << "\n";
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
    out << ProtoJson(ToProto(*r)) << "\n";
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
    out << ProtoJson(ToProto(*info)) << "\n";
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
    out << ProtoJson(ToListResponse(locks)) << "\n";
    return kExitOk;
  }
  // One line per name: its kind (exclusive, shared, or semaphore/LIMIT), how
  // many holders it has, and the newest holder's owner, token, hold count and
  // lease (describe prints every holder).
  size_t name_w = 4, owner_w = 5;
  for (const LockInfo& i : locks) {
    name_w = std::max(name_w, i.name.size());
    owner_w = std::max(owner_w, i.owner.size());
  }
  out << absl::StrFormat("%-*s  %-14s  %7s  %-*s  %20s  %5s  %10s  %7s\n", name_w, "NAME", "MODE",
                         "HOLDERS", owner_w, "OWNER", "FENCING_TOKEN", "HOLDS", "TTL", "WAITERS");
  for (const LockInfo& i : locks) {
    const std::string mode =
        i.limit > 0 ? absl::StrCat("semaphore/", i.limit) : std::string(HoldModeName(i.mode));
    const size_t holders = std::max<size_t>(i.holders.size(), i.held ? 1 : 0);
    out << absl::StrFormat("%-*s  %-14s  %7d  %-*s  %20d  %5d  %10s  %7d\n", name_w, i.name, mode,
                           holders, owner_w, i.owner, i.fencing_token, i.hold_count,
                           Human(i.ttl_remaining), i.waiters);
  }
  return kExitOk;
}

int ForceRelease(const Invocation& inv, Client& client, std::ostream& out, std::ostream& err) {
  absl::StatusOr<ForceReleaseOutcome> r =
      client.ForceRelease(inv.name, inv.reason, inv.fencing_token);
  if (!r.ok()) return Fail(r.status(), false, err);
  if (inv.output == Output::kJson) {
    out << ProtoJson(ToProto(*r)) << "\n";
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

absl::StatusOr<Lease> AcquireKind(const Invocation& inv, Client& client, AcquireOptions options) {
  if (inv.semaphore_limit > 0) {
    return Semaphore(client, inv.name, inv.semaphore_limit, inv.ns)
        .Acquire(std::max<uint32_t>(inv.permits, 1), std::move(options));
  }
  if (inv.shared) return client.AcquireShared(inv.name, std::move(options));
  return client.Acquire(inv.name, std::move(options));
}

std::string UndoCommand(const Invocation& inv, absl::string_view owner,
                        const absl::Status& status) {
  std::optional<std::string> id = UnconfirmedAcquireRequestId(status);
  if (!id.has_value()) return "";
  // `run --lock`: the AcquireAll is undone lock by lock.
  std::vector<std::string> names = inv.locks;
  if (names.empty()) names.push_back(inv.name);
  std::string out;
  for (const std::string& name : names) {
    absl::StrAppend(&out, out.empty() ? "" : " && ", "lockctl release --namespace ",
                    ShellWord(NsOrDefault(inv.ns)), " --name ", ShellWord(name), " --owner ",
                    ShellWord(owner), " --acquire-request-id ", ShellWord(*id));
  }
  return out;
}

int Execute(const Invocation& inv, std::ostream& out, std::ostream& err) {
  if (inv.command == "completion") {
    out << CompletionScript(inv.shell);
    return kExitOk;
  }
  if (inv.command == "health") return HealthCheck(inv, out, err);
  if (inv.command == "verify") return VerifyCommand(inv, out, err);
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
