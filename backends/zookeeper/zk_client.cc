#include "backends/zookeeper/zk_client.h"

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "util/log.h"

namespace lockd::zk {
namespace {

// The C client logs through this once a handle has a log callback. Its
// messages are about reconnect attempts and the like: useful when debugging,
// noise otherwise (they repeat every few hundred ms while a server is down),
// so they go to the debug level. lockd logs state changes itself.
void LogFromZk(const char* message) { LogDebug("zookeeper client: ", message); }

void SetZkLogLevelOnce() {
  static std::once_flag once;
  // Process-wide in the C client. WARN keeps the C client from formatting
  // per-request debug lines that would go nowhere.
  std::call_once(once, [] { zoo_set_debug_level(ZOO_LOG_LEVEL_WARN); });
}

std::string Errno() { return std::strerror(errno); }

}  // namespace

// One session's C handle. Lives until CloseHandle(); `pending` holds every
// operation whose callback has not run, so that none is lost when the C
// client drops them at close.
struct Client::Handle {
  Client* client = nullptr;
  uint64_t generation = 0;
  zhandle_t* zh = nullptr;
  absl::Mutex mu;
  absl::flat_hash_set<Pending*> pending ABSL_GUARDED_BY(mu);
};

namespace {

// A multi's sub-operations and where the C client writes their results.
struct MultiState {
  std::vector<Op> sub;
  std::vector<zoo_op_t> zops;
  std::vector<zoo_op_result_t> results;
  std::vector<struct Stat> stats;
};

}  // namespace

// The C client's `data` pointer of one operation. Small: one is alive for
// every operation in flight, thousands when many Acquires arrive together.
struct Client::Pending {
  Handle* handle = nullptr;
  Done done;
  std::unique_ptr<MultiState> multi;  // multi only
};

Client::Client(Options options, StateFn on_state, WatchFn on_watch)
    : options_(std::move(options)), on_state_(std::move(on_state)), on_watch_(std::move(on_watch)) {
  SetZkLogLevelOnce();
}

Client::~Client() { Close(); }

absl::StatusOr<Client::Handle*> Client::NewHandle(uint64_t generation) {
  auto* h = new Handle();
  h->client = this;
  h->generation = generation;
  int timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(options_.session_timeout));
  // ZOO_NO_LOG_CLIENTENV: the client environment (host, user, cwd) is not
  // worth a log line per session.
  zhandle_t* zh = zookeeper_init2(options_.hosts.c_str(), &Client::GlobalWatcher, timeout_ms,
                                  nullptr, h, ZOO_NO_LOG_CLIENTENV, &LogFromZk);
  if (zh == nullptr) {
    // The connect string's syntax was checked at start-up: no host of it
    // resolves (yet).
    std::string why = Errno();
    delete h;
    return absl::UnavailableError(absl::StrCat("no server in zookeeper.hosts \"", options_.hosts,
                                               "\" can be used yet (", why, ")"));
  }
  h->zh = zh;
  if (!options_.digest.empty()) {
    // Sent now and again on every reconnect by the C client.
    int rc = zoo_add_auth(zh, "digest", options_.digest.data(),
                          static_cast<int>(options_.digest.size()), nullptr, nullptr);
    if (rc != ZOK) {
      CloseHandle(h);
      return ZkError("adding digest credentials", rc);
    }
  }
  return h;
}

absl::Status Client::Open() {
  uint64_t generation;
  {
    absl::MutexLock l(&mu_);
    if (closed_ || handle_ != nullptr) return absl::FailedPreconditionError("already opened");
    generation = ++generation_;
  }
  absl::StatusOr<Handle*> h = NewHandle(generation);
  if (!h.ok()) return h.status();
  if (Install(*h)) return absl::OkStatus();
  CloseHandle(*h);
  return absl::UnavailableError("closed");
}

bool Client::Install(Handle* h) {
  absl::MutexLock events(&event_mu_);
  bool deliver = false, installed = false;
  SessionState state = SessionState::kConnecting;
  {
    absl::MutexLock l(&mu_);
    if (!closed_ && h->generation == generation_) {
      installed = true;
      handle_ = h;
      deliver = has_early_state_;
      state = early_state_;
      has_early_state_ = false;
      connected_ = deliver && state == SessionState::kConnected;
    }
  }
  if (deliver) on_state_(state, h->generation);
  return installed;
}

absl::Status Client::Reopen() {
  Handle* old;
  uint64_t generation;
  {
    absl::MutexLock l(&mu_);
    if (closed_) return absl::UnavailableError("closed");
    old = handle_;
    handle_ = nullptr;
    connected_ = false;
    has_early_state_ = false;
    generation = ++generation_;
  }
  if (old != nullptr) CloseHandle(old);
  absl::StatusOr<Handle*> h = NewHandle(generation);
  if (!h.ok()) return h.status();
  if (Install(*h)) return absl::OkStatus();
  CloseHandle(*h);
  return absl::UnavailableError("closed");
}

void Client::Close() {
  Handle* old;
  {
    absl::MutexLock l(&mu_);
    if (closed_) return;
    closed_ = true;
    connected_ = false;
    old = handle_;
    handle_ = nullptr;
  }
  if (old != nullptr) CloseHandle(old);
}

void Client::CloseHandle(Handle* h) {
  // Joins the C client's threads. Callbacks it still delivers run before it
  // returns; the ones it drops are run below.
  zookeeper_close(h->zh);
  absl::flat_hash_set<Pending*> left;
  {
    absl::MutexLock l(&h->mu);
    left.swap(h->pending);
  }
  for (Pending* p : left) {
    Done done = std::move(p->done);
    delete p;
    Result r;
    r.rc = ZCLOSING;
    std::move(done)(std::move(r));
  }
  delete h;
}

bool Client::connected() const {
  absl::MutexLock l(&mu_);
  return connected_ && handle_ != nullptr;
}

uint64_t Client::generation() const {
  absl::MutexLock l(&mu_);
  return generation_;
}

bool Client::ClientId(int64_t* id, std::string* password) const {
  absl::MutexLock l(&mu_);
  if (handle_ == nullptr) return false;
  const clientid_t* c = zoo_client_id(handle_->zh);
  if (c == nullptr || c->client_id == 0) return false;
  *id = c->client_id;
  password->assign(c->passwd, sizeof(c->passwd));
  return true;
}

struct ACL_vector* Client::acl() const {
  return options_.digest.empty() ? &ZOO_OPEN_ACL_UNSAFE : &ZOO_CREATOR_ALL_ACL;
}

void Client::Submit(std::vector<Op> ops) {
  std::vector<std::pair<Done, int>> failed;
  {
    absl::MutexLock l(&mu_);
    bool usable = !closed_ && connected_ && handle_ != nullptr;
    for (Op& op : ops) {
      int rc = usable ? Issue(handle_, op) : (closed_ ? ZCLOSING : ZCONNECTIONLOSS);
      if (rc != ZOK) failed.emplace_back(std::move(op.done), rc);
    }
  }
  for (auto& [done, rc] : failed) {
    Result r;
    r.rc = rc;
    std::move(done)(std::move(r));
  }
}

int Client::Issue(Handle* h, Op& op) {
  auto* p = new Pending();
  p->handle = h;
  p->done = std::move(op.done);
  {
    absl::MutexLock l(&h->mu);
    h->pending.insert(p);
  }
  const char* path = op.path.c_str();
  int rc = ZOK;
  switch (op.kind) {
    case Op::Kind::kCreate:
      rc = zoo_acreate2(h->zh, path, op.data.data(), static_cast<int>(op.data.size()),
                        op.open_acl ? &ZOO_OPEN_ACL_UNSAFE : acl(), op.create_mode,
                        &Client::OnStringStat, p);
      break;
    case Op::Kind::kDelete:
      rc = zoo_adelete(h->zh, path, op.version, &Client::OnVoid, p);
      break;
    case Op::Kind::kGet:
      if (op.watch_id != 0) {
        // The watch context is the id itself, not a pointer: nothing to free
        // if the watch never fires.
        rc = zoo_awget(h->zh, path, &Client::PathWatcher,
                       reinterpret_cast<void*>(static_cast<uintptr_t>(op.watch_id)),
                       &Client::OnData, p);
      } else {
        rc = zoo_aget(h->zh, path, 0, &Client::OnData, p);
      }
      break;
    case Op::Kind::kSet:
      rc = zoo_aset(h->zh, path, op.data.data(), static_cast<int>(op.data.size()), op.version,
                    &Client::OnStat, p);
      break;
    case Op::Kind::kChildren:
      rc = zoo_aget_children2(h->zh, path, 0, &Client::OnStrings, p);
      break;
    case Op::Kind::kCheck:
      rc = ZBADARGUMENTS;  // only inside a multi
      break;
    case Op::Kind::kMulti:
      rc = IssueMulti(h->zh, op, p);
      break;
    case Op::Kind::kSync:
      rc = zoo_async(h->zh, path, &Client::OnString, p);
      break;
  }
  if (rc != ZOK) {
    {
      absl::MutexLock l(&h->mu);
      h->pending.erase(p);
    }
    op.done = std::move(p->done);
    delete p;
  }
  return rc;
}

int Client::IssueMulti(zhandle_t* zh, Op& op, Pending* p) {
  p->multi = std::make_unique<MultiState>();
  MultiState& m = *p->multi;
  m.sub = std::move(op.ops);
  size_t n = m.sub.size();
  m.zops.resize(n);
  m.results.resize(n);
  m.stats.resize(n);
  for (size_t i = 0; i < n; ++i) {
    Op& s = m.sub[i];
    switch (s.kind) {
      case Op::Kind::kDelete:
        zoo_delete_op_init(&m.zops[i], s.path.c_str(), s.version);
        break;
      case Op::Kind::kSet:
        zoo_set_op_init(&m.zops[i], s.path.c_str(), s.data.data(), static_cast<int>(s.data.size()),
                        s.version, &m.stats[i]);
        break;
      case Op::Kind::kCheck:
        zoo_check_op_init(&m.zops[i], s.path.c_str(), s.version);
        break;
      default:
        return ZBADARGUMENTS;
    }
  }
  return zoo_amulti(zh, static_cast<int>(n), m.zops.data(), m.results.data(), &Client::OnMulti, p);
}

void Client::Finish(Pending* p, Result r) {
  Handle* h = p->handle;
  {
    absl::MutexLock l(&h->mu);
    if (h->pending.erase(p) == 0) return;  // already run by CloseHandle
  }
  Done done = std::move(p->done);
  delete p;
  std::move(done)(std::move(r));
}

void Client::OnStringStat(int rc, const char* value, const struct Stat* stat, const void* data) {
  Result r;
  r.rc = rc;
  if (rc == ZOK) {
    if (value != nullptr) r.value = value;
    if (stat != nullptr) r.stat = *stat;
  }
  Finish(static_cast<Pending*>(const_cast<void*>(data)), std::move(r));
}

void Client::OnString(int rc, const char* /*value*/, const void* data) {
  Result r;
  r.rc = rc;
  Finish(static_cast<Pending*>(const_cast<void*>(data)), std::move(r));
}

void Client::OnVoid(int rc, const void* data) {
  Result r;
  r.rc = rc;
  Finish(static_cast<Pending*>(const_cast<void*>(data)), std::move(r));
}

void Client::OnData(int rc, const char* value, int len, const struct Stat* stat, const void* data) {
  Result r;
  r.rc = rc;
  if (rc == ZOK) {
    if (value != nullptr && len > 0) r.value.assign(value, static_cast<size_t>(len));
    if (stat != nullptr) r.stat = *stat;
  }
  Finish(static_cast<Pending*>(const_cast<void*>(data)), std::move(r));
}

void Client::OnStat(int rc, const struct Stat* stat, const void* data) {
  Result r;
  r.rc = rc;
  if (rc == ZOK && stat != nullptr) r.stat = *stat;
  Finish(static_cast<Pending*>(const_cast<void*>(data)), std::move(r));
}

void Client::OnStrings(int rc, const struct String_vector* strings, const struct Stat* stat,
                       const void* data) {
  Result r;
  r.rc = rc;
  if (rc == ZOK) {
    if (strings != nullptr) {
      r.children.reserve(static_cast<size_t>(strings->count));
      for (int32_t i = 0; i < strings->count; ++i) r.children.emplace_back(strings->data[i]);
    }
    if (stat != nullptr) r.stat = *stat;
  }
  Finish(static_cast<Pending*>(const_cast<void*>(data)), std::move(r));
}

void Client::OnMulti(int rc, const void* data) {
  auto* p = static_cast<Pending*>(const_cast<void*>(data));
  Result r;
  r.rc = rc;
  r.multi.reserve(p->multi->results.size());
  for (const zoo_op_result_t& res : p->multi->results) r.multi.push_back(res.err);
  Finish(p, std::move(r));
}

void Client::GlobalWatcher(zhandle_t* zh, int type, int state, const char* path, void* ctx) {
  if (type != ZOO_SESSION_EVENT) return;  // path watches use PathWatcher
  auto* h = static_cast<Handle*>(ctx);
  h->client->OnSessionEvent(h, state);
}

void Client::PathWatcher(zhandle_t* zh, int type, int state, const char* path, void* ctx) {
  // The C client also hands session events to every path watcher; those are
  // handled once, by the global watcher.
  if (type == ZOO_SESSION_EVENT) return;
  auto* h = static_cast<Handle*>(const_cast<void*>(zoo_get_context(zh)));
  h->client->on_watch_(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ctx)), type,
                       path != nullptr ? absl::string_view(path) : absl::string_view());
}

void Client::OnSessionEvent(Handle* h, int state) {
  SessionState s;
  if (state == ZOO_CONNECTED_STATE) {
    s = SessionState::kConnected;
  } else if (state == ZOO_EXPIRED_SESSION_STATE) {
    s = SessionState::kExpired;
  } else if (state == ZOO_AUTH_FAILED_STATE) {
    s = SessionState::kAuthFailed;
  } else {
    s = SessionState::kConnecting;
  }
  absl::MutexLock events(&event_mu_);
  {
    absl::MutexLock l(&mu_);
    if (closed_ || h->generation != generation_) return;  // stale
    if (handle_ != h) {
      // The C client connected before NewHandle() returned: park the event
      // until Install(), or Submit() would see "connected" without a handle.
      has_early_state_ = true;
      early_state_ = s;
      return;
    }
    connected_ = s == SessionState::kConnected;
  }
  on_state_(s, h->generation);
}

}  // namespace lockd::zk
