// Test only (library lockd_zookeeper_fake, never linked into lockd): an
// in-memory ZooKeeper "server" and zk::Transport sessions on it, so that the
// backend's parts can be tested without a ZooKeeper process and with faults
// a real server cannot produce on demand.
//
// What it models: a tree of znodes (persistent, container, ephemeral,
// ephemeral sequential) with data versions, czxids and ephemeral owners;
// create, delete, get (with data watches), set, children, check and
// all-or-nothing multi, with ZooKeeper's return codes; sessions that answer
// their operations in order on their own completion thread, expire (their
// ephemeral nodes deleted, watches of other sessions fired) and close.
// What it does not: ACLs, containers vanishing when empty, connection loss
// other than scripted.
//
// Scripting (any thread, at any time):
//   - DropCreateReplies(n): the next n successful contender creates happen
//     but their replies say ZCONNECTIONLOSS (the reply was "lost");
//   - Expire(t): ends transport t's session as the server would on timeout;
//   - FailOpens(n): the next n session opens fail (an unresolvable host);
//   - Lag(t): transport t's server falls behind the leader (an ensemble
//     follower): its reads see the tree as it was, until it syncs or writes;
//   - counters of listings sent, multis executed and watch events delivered.
//
// Thread-safe: the tree is guarded by mu_; each session's queue by its own
// mutex, taken after mu_. Callbacks run on the session's completion thread
// with no lock held (or inline, for an operation refused at Submit()).

#ifndef LOCKD_BACKENDS_ZOOKEEPER_FAKE_ZOOKEEPER_H_
#define LOCKD_BACKENDS_ZOOKEEPER_FAKE_ZOOKEEPER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "backends/zookeeper/zk_transport.h"

namespace lockd::zk {

class FakeTransport;

class FakeZooKeeper {
 public:
  FakeZooKeeper() = default;
  FakeZooKeeper(const FakeZooKeeper&) = delete;
  FakeZooKeeper& operator=(const FakeZooKeeper&) = delete;

  // A new, not yet opened session on this server; a TransportFactory body.
  // The server must outlive it. The transport is remembered (for Expire by
  // index) until it is destroyed.
  std::unique_ptr<Transport> NewTransport(StateFn on_state, WatchFn on_watch);
  TransportFactory Factory() {
    return [this](StateFn s, WatchFn w) { return NewTransport(std::move(s), std::move(w)); };
  }

  // The next `n` Open()/Reopen() calls of any transport fail kUnavailable,
  // as the real client's do while no host of the connect string resolves.
  void FailOpens(int n) { fail_opens_ = n; }
  bool TakeOpenFailure() {
    int n = fail_opens_.load();
    while (n > 0 && !fail_opens_.compare_exchange_weak(n, n - 1)) {
    }
    return n > 0;
  }

  // The next `n` successful creates of sequential nodes are
  // applied but answered ZCONNECTIONLOSS.
  void DropCreateReplies(int n) { drop_create_replies_ = n; }
  int create_replies_to_drop() const { return drop_create_replies_.load(); }

  // Expires the session of the i-th transport made (0 first): its
  // ephemeral nodes go, other sessions' watches on them fire, it reports
  // kExpired and fails everything until Reopen().
  void Expire(int i);

  // The i-th transport's server falls behind: from now on its reads (get,
  // children) see the tree as it is now, until the session sends a sync or
  // a write (its server then applies everything up to that point, as a
  // ZooKeeper follower applies commits in order).
  void Lag(int i);

  // While paused, no session handles anything: operations and events queue
  // up (so a test can make requests overlap). Resume() lets them run.
  void Pause() { paused_ = true; }
  void Resume();

  // Children of `path` (names, sorted); empty if it does not exist.
  std::vector<std::string> Children(const std::string& path) const;
  bool Exists(const std::string& path) const;

  uint64_t listings() const { return listings_.load(); }
  uint64_t multis() const { return multis_.load(); }  // executed, applied or refused
  uint64_t watch_events() const { return watch_events_.load(); }

 private:
  friend class FakeTransport;
  struct Node {
    std::string data;
    int32_t version = 0;
    int64_t czxid = 0;
    int64_t owner = 0;  // ephemeral owner's session, or 0
    int32_t next_seq = 0;
  };
  using Tree = std::map<std::string, Node>;
  struct Watch {
    FakeTransport* t;
    uint64_t id;
    bool operator<(const Watch& o) const { return t < o.t || (t == o.t && id < o.id); }
  };

  // Applies `op` for `session` on `tree` (mu_ held; events collected).
  int Apply(Tree& tree, const Op& op, int64_t session, Result* r)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `op` and returns its result, firing watches.
  Result Execute(FakeTransport* t, const Op& op, int64_t session);
  void Fire(const std::string& path, int type) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndSession(int64_t session) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropWatches(FakeTransport* t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t NewSession();
  void Forget(FakeTransport* t);

  mutable absl::Mutex mu_;
  Tree tree_ ABSL_GUARDED_BY(mu_) = {{"/", Node()}};
  int64_t zxid_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t next_session_ ABSL_GUARDED_BY(mu_) = 0x1000;
  std::map<std::string, std::set<Watch>> watches_ ABSL_GUARDED_BY(mu_);
  std::vector<FakeTransport*> transports_ ABSL_GUARDED_BY(mu_);
  // What lagging sessions' reads see (Lag).
  std::map<FakeTransport*, Tree> lagging_ ABSL_GUARDED_BY(mu_);
  // Sessions that ended: an operation of theirs still in a queue fails.
  std::set<int64_t> ended_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> paused_{false};
  std::atomic<int> drop_create_replies_{0};
  std::atomic<int> fail_opens_{0};
  std::atomic<uint64_t> listings_{0};
  std::atomic<uint64_t> multis_{0};
  std::atomic<uint64_t> watch_events_{0};
};

}  // namespace lockd::zk

#endif  // LOCKD_BACKENDS_ZOOKEEPER_FAKE_ZOOKEEPER_H_
