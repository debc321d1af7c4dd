#include "tools/lockctl/verify/worker.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tools/lockctl/verify/wire.h"

namespace lockd::lockctl::verify {
namespace {

std::string Ms(absl::Duration d) { return absl::StrCat(absl::ToInt64Milliseconds(d)); }

bool ParseMs(absl::string_view text, absl::Duration* d) {
  int64_t ms;
  if (!absl::SimpleAtoi(text, &ms) || ms < 0) return false;
  *d = absl::Milliseconds(ms);
  return true;
}

int64_t SteadyNanos(std::chrono::steady_clock::time_point t) {
  if (t == std::chrono::steady_clock::time_point::max()) return 0;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

std::vector<std::string> EncodeConfig(const WorkerConfig& c) {
  return {"config",
          "server",
          c.server,
          "ns",
          c.ns,
          "owner",
          c.owner,
          "session",
          c.session ? "1" : "0",
          "ttl_ms",
          Ms(c.ttl),
          "wait_ms",
          Ms(c.wait),
          "rpc_timeout_ms",
          Ms(c.rpc_timeout),
          "tls",
          c.tls.enabled ? "1" : "0",
          "tls_ca",
          c.tls.ca_file,
          "tls_cert",
          c.tls.cert_file,
          "tls_key",
          c.tls.key_file,
          "tls_server_name",
          c.tls.server_name,
          "token",
          c.auth.bearer_token,
          "token_file",
          c.auth.bearer_token_file};
}

absl::StatusOr<WorkerConfig> DecodeConfig(const std::vector<std::string>& f) {
  if (f.empty() || f[0] != "config" || f.size() % 2 != 1) {
    return absl::InvalidArgumentError("not a config line");
  }
  WorkerConfig c;
  for (size_t i = 1; i + 1 < f.size(); i += 2) {
    const std::string& k = f[i];
    const std::string& v = f[i + 1];
    bool ok = true;
    if (k == "server") {
      c.server = v;
    } else if (k == "ns") {
      c.ns = v;
    } else if (k == "owner") {
      c.owner = v;
    } else if (k == "session") {
      c.session = v == "1";
    } else if (k == "ttl_ms") {
      ok = ParseMs(v, &c.ttl);
    } else if (k == "wait_ms") {
      ok = ParseMs(v, &c.wait);
    } else if (k == "rpc_timeout_ms") {
      ok = ParseMs(v, &c.rpc_timeout);
    } else if (k == "tls") {
      c.tls.enabled = v == "1";
    } else if (k == "tls_ca") {
      c.tls.ca_file = v;
    } else if (k == "tls_cert") {
      c.tls.cert_file = v;
    } else if (k == "tls_key") {
      c.tls.key_file = v;
    } else if (k == "tls_server_name") {
      c.tls.server_name = v;
    } else if (k == "token") {
      c.auth.bearer_token = v;
    } else if (k == "token_file") {
      c.auth.bearer_token_file = v;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("config: unknown key \"", k, "\""));
    }
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("config: bad ", k, " \"", v, "\""));
  }
  return c;
}

const char* TaskKindName(TaskKind kind) {
  switch (kind) {
    case TaskKind::kLock:
      return "lock";
    case TaskKind::kShared:
      return "shared";
    case TaskKind::kSemaphore:
      return "semaphore";
    case TaskKind::kAll:
      return "all";
  }
  return "?";
}

std::vector<std::string> EncodeTask(const Task& task) {
  std::vector<std::string> f = {"task", absl::StrCat(task.id), TaskKindName(task.kind),
                                absl::StrCat(absl::ToInt64Microseconds(task.hold))};
  for (const TaskLock& l : task.locks) {
    f.push_back(l.name);
    f.push_back(absl::StrCat(l.limit));
    f.push_back(absl::StrCat(l.permits));
  }
  return f;
}

absl::StatusOr<Task> DecodeTask(const std::vector<std::string>& f) {
  if (f.size() < 7 || f[0] != "task" || (f.size() - 4) % 3 != 0) {
    return absl::InvalidArgumentError("not a task line");
  }
  Task task;
  int64_t hold_us;
  if (!absl::SimpleAtoi(f[1], &task.id)) return absl::InvalidArgumentError("task: bad id");
  bool known = false;
  for (TaskKind k : {TaskKind::kLock, TaskKind::kShared, TaskKind::kSemaphore, TaskKind::kAll}) {
    if (f[2] == TaskKindName(k)) {
      task.kind = k;
      known = true;
    }
  }
  if (!known) return absl::InvalidArgumentError(absl::StrCat("task: unknown kind \"", f[2], "\""));
  if (!absl::SimpleAtoi(f[3], &hold_us) || hold_us < 0) {
    return absl::InvalidArgumentError("task: bad hold");
  }
  task.hold = absl::Microseconds(hold_us);
  for (size_t i = 4; i + 2 < f.size(); i += 3) {
    TaskLock l;
    l.name = f[i];
    if (!absl::SimpleAtoi(f[i + 1], &l.limit) || !absl::SimpleAtoi(f[i + 2], &l.permits)) {
      return absl::InvalidArgumentError(absl::StrCat("task: bad limit or permits of ", l.name));
    }
    task.locks.push_back(std::move(l));
  }
  return task;
}

bool TaskWrites(const Task& task) {
  return task.kind == TaskKind::kLock || task.kind == TaskKind::kAll;
}

std::string CodeName(absl::StatusCode code) { return absl::StatusCodeToString(code); }

absl::StatusCode CodeFromName(absl::string_view name) {
  for (int c = 0; c <= 16; ++c) {
    if (absl::StatusCodeToString(static_cast<absl::StatusCode>(c)) == name) {
      return static_cast<absl::StatusCode>(c);
    }
  }
  return absl::StatusCode::kUnknown;
}

namespace {

// One task, start to end. False when the pipe broke (the parent is gone).
bool DoTask(const Task& task, const WorkerConfig& config, Client& client, LineChannel& pipe) {
  const std::string id = absl::StrCat(task.id);
  AcquireOptions o;
  o.ttl = config.ttl;
  o.wait = config.wait;
  absl::StatusOr<LeaseSet> held = [&]() -> absl::StatusOr<LeaseSet> {
    if (task.kind == TaskKind::kAll) {
      std::vector<LockSpec> specs;
      for (const TaskLock& l : task.locks) {
        specs.push_back(LockSpec{l.name, "", HoldMode::kExclusive});
      }
      return client.AcquireAll(specs, o);
    }
    const TaskLock& l = task.locks[0];
    absl::StatusOr<Lease> lease = task.kind == TaskKind::kSemaphore
                                      ? Semaphore(client, l.name, l.limit).Acquire(l.permits, o)
                                  : task.kind == TaskKind::kShared ? client.AcquireShared(l.name, o)
                                                                   : client.Acquire(l.name, o);
    if (!lease.ok()) return lease.status();
    std::vector<Lease> one;
    one.push_back(*std::move(lease));
    return LeaseSet(std::move(one));
  }();
  if (!held.ok()) {
    bool uncertain = UnconfirmedAcquireRequestId(held.status()).has_value();
    return pipe
        .Call({"failed", id, CodeName(held.status().code()), uncertain ? "1" : "0",
               std::string(held.status().message())})
        .has_value();
  }
  LeaseSet& leases = *held;
  std::vector<std::string> granted = {"granted", id,
                                      absl::StrCat(SteadyNanos(leases[0].valid_until()))};
  for (const Lease& l : leases) granted.push_back(absl::StrCat(l.fencing_token()));
  if (!pipe.Call(granted)) return false;

  std::vector<std::pair<int64_t, int64_t>> values(leases.size());
  if (TaskWrites(task)) {
    for (size_t i = 0; i < leases.size(); ++i) {
      std::optional<std::vector<std::string>> v =
          pipe.Call({"read", leases[i].name(), absl::StrCat(leases[i].fencing_token())});
      if (!v || v->size() != 3 || (*v)[0] != "value" ||
          !absl::SimpleAtoi((*v)[1], &values[i].first) ||
          !absl::SimpleAtoi((*v)[2], &values[i].second)) {
        return false;
      }
    }
  }
  absl::SleepFor(task.hold);
  if (TaskWrites(task)) {
    for (size_t i = 0; i < leases.size(); ++i) {
      // As a careful client does: no write on a lease its client no longer
      // vouches for (it leaves, and releases, without it).
      if (!leases[i].valid()) continue;
      if (!pipe.Call({"write", leases[i].name(), absl::StrCat(leases[i].fencing_token()),
                      absl::StrCat(values[i].first + 1), absl::StrCat(values[i].second + 1)})) {
        return false;
      }
    }
  }
  std::optional<std::vector<std::string>> go =
      pipe.Call({"release", id, absl::StrCat(SteadyNanos(leases[0].valid_until()))});
  if (!go) return false;
  if ((*go)[0] == "abandon") _exit(0);  // no release, no goodbye: the connection drops
  absl::Status released = leases.Release();
  return pipe.Call({"released", id, CodeName(released.code()), std::string(released.message())})
      .has_value();
}

}  // namespace

int RunWorker() {
  ::signal(SIGPIPE, SIG_IGN);
  LineChannel pipe(kWorkerFd);
  std::optional<std::vector<std::string>> first = pipe.Read();
  if (!first) return 1;
  absl::StatusOr<WorkerConfig> config = DecodeConfig(*first);
  if (!config.ok()) return 1;
  ClientOptions co;
  co.owner = config->owner;
  co.default_namespace = config->ns;
  co.rpc_timeout = config->rpc_timeout;
  co.release_timeout = std::min(config->rpc_timeout, absl::Seconds(2));
  co.use_sessions = config->session;
  co.session_ttl = config->ttl;
  // A worker that dies frees its session's holds at once (as `lockctl run`).
  co.keep_on_disconnect = false;
  absl::StatusOr<Client> client = Client::Connect(config->server, co, config->tls, config->auth);
  if (!client.ok()) return 1;
  // Warm-up, not recorded: the channel connects and a session worker opens
  // its stream, so that its first recorded acquire is not slowed by them
  // (the checker compares acquires' invoke times).
  AcquireOptions warm_up;
  warm_up.ttl = config->ttl;
  absl::StatusOr<Lease> warm =
      client->TryAcquire(absl::StrCat("verify/warm-up/", co.owner), warm_up);
  if (warm.ok()) warm->Release().IgnoreError();
  while (true) {
    std::optional<std::vector<std::string>> next = pipe.Call({"next"});
    if (!next || next->empty()) return 1;
    if ((*next)[0] == "stop") return 0;
    absl::StatusOr<Task> task = DecodeTask(*next);
    if (!task.ok() || !DoTask(*task, *config, *client, pipe)) return 1;
  }
}

}  // namespace lockd::lockctl::verify
