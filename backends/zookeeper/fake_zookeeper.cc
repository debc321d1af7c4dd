#include "backends/zookeeper/fake_zookeeper.h"

#include <deque>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"

namespace lockd::zk {

// One session at a time on a FakeZooKeeper; operations and events are queued
// and handled in order on its own thread.
class FakeTransport final : public Transport {
 public:
  FakeTransport(FakeZooKeeper* server, StateFn on_state, WatchFn on_watch)
      : server_(server), on_state_(std::move(on_state)), on_watch_(std::move(on_watch)) {}
  ~FakeTransport() override {
    Close();
    server_->Forget(this);
  }

  absl::Status Open() override {
    if (server_->TakeOpenFailure()) return OpenFailed();
    int64_t session = server_->NewSession();
    absl::MutexLock l(&mu_);
    session_ = session;
    generation_ = 1;
    connected_ = true;
    thread_ = std::thread([this] { Run(); });
    PushState(SessionState::kConnected);
    return absl::OkStatus();
  }

  absl::Status Reopen() override {
    if (server_->TakeOpenFailure()) return OpenFailed();
    int64_t session = server_->NewSession();
    absl::MutexLock l(&mu_);
    if (closed_) return absl::OkStatus();
    session_ = session;
    ++generation_;
    connected_ = true;
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });  // Open() failed
    PushState(SessionState::kConnected);
    return absl::OkStatus();
  }

  void Close() override {
    int64_t session;
    {
      absl::MutexLock l(&mu_);
      if (closed_) return;
      closed_ = true;
      connected_ = false;
      session = session_;
      session_ = 0;
    }
    {
      absl::MutexLock l(&server_->mu_);
      server_->DropWatches(this);
      server_->EndSession(session);
    }
    if (thread_.joinable()) thread_.join();
  }

  // As the real client answers when no host of the connect string can be
  // used (none resolves).
  absl::Status OpenFailed() {
    absl::MutexLock l(&mu_);
    ++generation_;
    return absl::UnavailableError("no server in zookeeper.hosts \"fake:2181\" can be used yet");
  }

  bool connected() const override {
    absl::MutexLock l(&mu_);
    return connected_;
  }
  uint64_t generation() const override {
    absl::MutexLock l(&mu_);
    return generation_;
  }

  void Submit(std::vector<Op> ops) override {
    std::vector<Op> refused;
    int rc = ZOK;
    {
      absl::MutexLock l(&mu_);
      rc = closed_ ? ZCLOSING : connected_ ? ZOK : ZCONNECTIONLOSS;
      for (Op& op : ops) {
        if (rc != ZOK) {
          refused.push_back(std::move(op));
        } else {
          Item item;
          item.op = std::move(op);
          item.session = session_;
          queue_.push_back(std::move(item));
        }
      }
    }
    for (Op& op : refused) {
      Result r;
      r.rc = rc;
      if (op.done) std::move(op.done)(std::move(r));
    }
  }

  // The server ended this session (Expire): everything queued fails, then
  // kExpired is reported.
  void Expired() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock l(&mu_);
    if (closed_) return;
    connected_ = false;
    session_ = 0;
    PushState(SessionState::kExpired);
  }

  void PushWatch(uint64_t id, int type, const std::string& path) {
    absl::MutexLock l(&mu_);
    Item item;
    item.kind = Item::kWatch;
    item.watch_id = id;
    item.type = type;
    item.path = path;
    queue_.push_back(std::move(item));
  }

  // Wakes the thread to look at the queue again (after Resume()).
  void Poke() { absl::MutexLock l(&mu_); }

  int64_t session() const {
    absl::MutexLock l(&mu_);
    return session_;
  }

 private:
  struct Item {
    enum { kOp, kWatch, kState } kind = kOp;
    Op op;
    int64_t session = 0;
    uint64_t watch_id = 0;
    int type = 0;
    std::string path;
    SessionState state = SessionState::kConnecting;
    uint64_t generation = 0;
  };

  void PushState(SessionState s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Item item;
    item.kind = Item::kState;
    item.state = s;
    item.generation = generation_;
    queue_.push_back(std::move(item));
  }

  void Run() {
    for (;;) {
      Item item;
      int64_t current;
      bool closed;
      {
        absl::MutexLock l(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return closed_ || (!queue_.empty() && !server_->paused_.load());
        };
        mu_.Await(absl::Condition(&ready));
        if (queue_.empty()) return;
        item = std::move(queue_.front());
        queue_.pop_front();
        current = session_;
        closed = closed_;
      }
      Handle(std::move(item), current, closed);
    }
  }

  void Handle(Item item, int64_t current, bool closed) {
    switch (item.kind) {
      case Item::kState:
        if (!closed) on_state_(item.state, item.generation);
        return;
      case Item::kWatch:
        if (closed) return;
        server_->watch_events_.fetch_add(1);
        on_watch_(item.watch_id, item.type, item.path);
        return;
      case Item::kOp: {
        Result r;
        if (closed) {
          r.rc = ZCLOSING;
        } else if (item.session != current) {
          r.rc = ZSESSIONEXPIRED;
        } else {
          r = server_->Execute(this, item.op, item.session);
        }
        if (item.op.done) std::move(item.op.done)(std::move(r));
        return;
      }
    }
  }

  FakeZooKeeper* const server_;
  const StateFn on_state_;
  const WatchFn on_watch_;
  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
  int64_t session_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

namespace {

std::string Parent(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool IsChild(const std::string& parent, const std::string& path) {
  std::string prefix = parent == "/" ? "/" : parent + "/";
  return path.size() > prefix.size() && absl::StartsWith(path, prefix) &&
         path.find('/', prefix.size()) == std::string::npos;
}

}  // namespace

std::unique_ptr<Transport> FakeZooKeeper::NewTransport(StateFn on_state, WatchFn on_watch) {
  auto t = std::make_unique<FakeTransport>(this, std::move(on_state), std::move(on_watch));
  absl::MutexLock l(&mu_);
  transports_.push_back(t.get());
  return t;
}

void FakeZooKeeper::Forget(FakeTransport* t) {
  absl::MutexLock l(&mu_);
  lagging_.erase(t);
  for (auto& p : transports_) {
    if (p == t) p = nullptr;
  }
}

void FakeZooKeeper::Resume() {
  paused_ = false;
  absl::MutexLock l(&mu_);
  for (FakeTransport* t : transports_) {
    if (t != nullptr) t->Poke();
  }
}

int64_t FakeZooKeeper::NewSession() {
  absl::MutexLock l(&mu_);
  return next_session_++;
}

void FakeZooKeeper::Expire(int i) {
  FakeTransport* t;
  {
    absl::MutexLock l(&mu_);
    if (i < 0 || static_cast<size_t>(i) >= transports_.size() || transports_[i] == nullptr) return;
    t = transports_[i];
    DropWatches(t);
    EndSession(t->session());
  }
  t->Expired();
}

void FakeZooKeeper::Lag(int i) {
  absl::MutexLock l(&mu_);
  if (i < 0 || static_cast<size_t>(i) >= transports_.size() || transports_[i] == nullptr) return;
  lagging_[transports_[i]] = tree_;
}

void FakeZooKeeper::DropWatches(FakeTransport* t) {
  for (auto& [path, ws] : watches_) {
    for (auto it = ws.begin(); it != ws.end();) it = it->t == t ? ws.erase(it) : std::next(it);
  }
}

void FakeZooKeeper::EndSession(int64_t session) {
  if (session == 0) return;
  ended_.insert(session);
  std::vector<std::string> gone;
  for (const auto& [path, node] : tree_) {
    if (node.owner == session) gone.push_back(path);
  }
  for (const std::string& path : gone) {
    tree_.erase(path);
    Fire(path, ZOO_DELETED_EVENT);
  }
}

void FakeZooKeeper::Fire(const std::string& path, int type) {
  auto it = watches_.find(path);
  if (it == watches_.end()) return;
  std::set<Watch> ws = std::move(it->second);
  watches_.erase(it);
  for (const Watch& w : ws) w.t->PushWatch(w.id, type, path);
}

Result FakeZooKeeper::Execute(FakeTransport* t, const Op& op, int64_t session) {
  Result r;
  absl::MutexLock l(&mu_);
  if (ended_.count(session) != 0) {
    r.rc = ZSESSIONEXPIRED;
    return r;
  }
  if (op.kind == Op::Kind::kChildren) listings_.fetch_add(1);
  bool read = op.kind == Op::Kind::kGet || op.kind == Op::Kind::kChildren;
  auto lag = lagging_.find(t);
  if (lag != lagging_.end() && !read) {
    lagging_.erase(lag);  // a sync or a write: the server catches up
    lag = lagging_.end();
  }
  if (op.kind == Op::Kind::kSync) return r;
  if (op.kind != Op::Kind::kMulti) {
    r.rc = Apply(lag != lagging_.end() ? lag->second : tree_, op, session, &r);
    if (r.rc == ZOK && op.kind == Op::Kind::kGet && op.watch_id != 0) {
      watches_[op.path].insert(Watch{t, op.watch_id});
    }
    if (r.rc == ZOK && op.kind == Op::Kind::kCreate &&
        (op.create_mode == ZOO_EPHEMERAL_SEQUENTIAL ||
         op.create_mode == ZOO_PERSISTENT_SEQUENTIAL)) {
      int n = drop_create_replies_.load();
      while (n > 0 && !drop_create_replies_.compare_exchange_weak(n, n - 1)) {
      }
      if (n > 0) r.rc = ZCONNECTIONLOSS;
    }
    return r;
  }
  multis_.fetch_add(1);
  // All or nothing, answered as ZooKeeper does: when a sub-operation fails,
  // those before it say ZOK, it its code, those after it
  // ZRUNTIMEINCONSISTENCY, the multi the failing code, and nothing changes.
  Tree copy = tree_;
  for (const Op& sub : op.ops) {
    if (r.rc != ZOK) {
      r.multi.push_back(ZRUNTIMEINCONSISTENCY);
      continue;
    }
    Result ignored;
    int rc = Apply(copy, sub, session, &ignored);
    r.multi.push_back(rc);
    r.rc = rc;
  }
  if (r.rc != ZOK) return r;
  for (const Op& sub : op.ops) {
    Result ignored;
    Apply(tree_, sub, session, &ignored);
  }
  return r;
}

int FakeZooKeeper::Apply(Tree& tree, const Op& op, int64_t session, Result* r) {
  bool live = &tree == &tree_;
  auto it = tree.find(op.path);
  auto fill = [r](const Node& n) {
    r->stat.czxid = n.czxid;
    r->stat.version = n.version;
    r->stat.ephemeralOwner = n.owner;
  };
  switch (op.kind) {
    case Op::Kind::kCreate: {
      auto parent = tree.find(Parent(op.path));
      if (parent == tree.end()) return ZNONODE;
      if (parent->second.owner != 0) return ZNOCHILDRENFOREPHEMERALS;
      std::string path = op.path;
      bool sequential =
          op.create_mode == ZOO_EPHEMERAL_SEQUENTIAL || op.create_mode == ZOO_PERSISTENT_SEQUENTIAL;
      if (sequential) path += absl::StrFormat("%010d", parent->second.next_seq++);
      if (tree.count(path) != 0) return ZNODEEXISTS;
      Node n;
      n.data = op.data;
      n.czxid = zxid_++;
      if (op.create_mode == ZOO_EPHEMERAL_SEQUENTIAL || op.create_mode == ZOO_EPHEMERAL) {
        n.owner = session;
      }
      tree[path] = n;
      fill(n);
      r->value = path;
      return ZOK;
    }
    case Op::Kind::kDelete: {
      if (it == tree.end()) return ZNONODE;
      if (op.version != -1 && op.version != it->second.version) return ZBADVERSION;
      auto child = tree.lower_bound(op.path + "/");
      if (child != tree.end() && absl::StartsWith(child->first, op.path + "/")) return ZNOTEMPTY;
      tree.erase(it);
      if (live) Fire(op.path, ZOO_DELETED_EVENT);
      return ZOK;
    }
    case Op::Kind::kGet:
      if (it == tree.end()) return ZNONODE;
      fill(it->second);
      r->value = it->second.data;
      return ZOK;
    case Op::Kind::kSet:
      if (it == tree.end()) return ZNONODE;
      if (op.version != -1 && op.version != it->second.version) return ZBADVERSION;
      it->second.data = op.data;
      ++it->second.version;
      ++zxid_;
      fill(it->second);
      if (live) Fire(op.path, ZOO_CHANGED_EVENT);
      return ZOK;
    case Op::Kind::kCheck:
      if (it == tree.end()) return ZNONODE;
      if (op.version != -1 && op.version != it->second.version) return ZBADVERSION;
      return ZOK;
    case Op::Kind::kChildren:
      if (it == tree.end()) return ZNONODE;
      fill(it->second);
      for (auto c = std::next(it); c != tree.end() && absl::StartsWith(c->first, op.path); ++c) {
        if (IsChild(op.path, c->first)) r->children.push_back(c->first.substr(op.path.size() + 1));
      }
      return ZOK;
    case Op::Kind::kMulti:
    case Op::Kind::kSync:
      // Execute() runs a multi's operations one by one; a multi or a sync
      // inside a multi is refused, as ZooKeeper refuses it.
      return ZBADARGUMENTS;
  }
  return ZBADARGUMENTS;  // not reached: every kind is handled above
}

std::vector<std::string> FakeZooKeeper::Children(const std::string& path) const {
  absl::MutexLock l(&mu_);
  std::vector<std::string> out;
  for (const auto& [p, n] : tree_) {
    if (IsChild(path, p)) out.push_back(p.substr(path == "/" ? 1 : path.size() + 1));
  }
  return out;
}

bool FakeZooKeeper::Exists(const std::string& path) const {
  absl::MutexLock l(&mu_);
  return tree_.count(path) != 0;
}

}  // namespace lockd::zk
