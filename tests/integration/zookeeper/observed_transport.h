// The real ZooKeeper client decorated for integration tests (leveldb's
// EnvWrapper idea): ObservedTransport forwards every call to a zk::Client
// and records or disturbs what Observed describes, so that lockd itself
// needs no test hooks. Use with NewZooKeeperBackendOn().

#ifndef LOCKD_TESTS_INTEGRATION_ZOOKEEPER_OBSERVED_TRANSPORT_H_
#define LOCKD_TESTS_INTEGRATION_ZOOKEEPER_OBSERVED_TRANSPORT_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "backends/zookeeper/zk_client.h"
#include "backends/zookeeper/zk_transport.h"

namespace lockd {

// What the tests observe of, and do to, the backend's session.
struct Observed {
  // Events delivered to predecessor watches (no herd: one per release).
  std::atomic<uint64_t> predecessor_watch_events{0};
  // While positive, each successful contender create is answered as if its
  // reply had been lost to a connection loss (and the count decremented).
  std::atomic<int> drop_create_replies{0};
  // Listings of a lock node's contenders sent (<root>/<ns>/<lock>).
  std::atomic<uint64_t> contender_listings{0};
  // kConnected events: the first connect, each reconnect within the session
  // (to the same or another server) and each new session.
  std::atomic<int> connects{0};
  std::string root;  // set before the backend starts
  // The current session's id and password, for ExpireSession().
  absl::Mutex mu;
  int64_t session_id ABSL_GUARDED_BY(mu) = 0;
  std::string session_password ABSL_GUARDED_BY(mu);
};

// The real client, decorated (leveldb's EnvWrapper idea): forwards every
// call and records or disturbs what Observed describes.
class ObservedTransport final : public zk::Transport {
 public:
  ObservedTransport(zk::Client::Options o, std::shared_ptr<Observed> obs, zk::StateFn on_state,
                    zk::WatchFn on_watch)
      : obs_(std::move(obs)) {
    client_ = std::make_unique<zk::Client>(
        std::move(o),
        [this, on_state = std::move(on_state)](zk::SessionState s, uint64_t gen) {
          if (s == zk::SessionState::kConnected) {
            obs_->connects.fetch_add(1);
            int64_t id;
            std::string password;
            if (client_->ClientId(&id, &password)) {
              absl::MutexLock l(&obs_->mu);
              obs_->session_id = id;
              obs_->session_password = std::move(password);
            }
          }
          on_state(s, gen);
        },
        [obs = obs_, on_watch = std::move(on_watch)](uint64_t id, int type,
                                                     absl::string_view path) {
          obs->predecessor_watch_events.fetch_add(1);
          on_watch(id, type, path);
        });
  }

  absl::Status Open() override { return client_->Open(); }
  absl::Status Reopen() override { return client_->Reopen(); }
  void Close() override { client_->Close(); }
  bool connected() const override { return client_->connected(); }
  uint64_t generation() const override { return client_->generation(); }

  void Submit(std::vector<zk::Op> ops) override {
    for (zk::Op& op : ops) Observe(op);
    client_->Submit(std::move(ops));
  }

 private:
  void Observe(zk::Op& op) {
    if (op.kind == zk::Op::Kind::kChildren && absl::StartsWith(op.path, obs_->root + "/") &&
        std::count(op.path.begin() + obs_->root.size(), op.path.end(), '/') == 2) {
      obs_->contender_listings.fetch_add(1);
    }
    if (op.kind == zk::Op::Kind::kCreate && op.create_mode == ZOO_PERSISTENT_SEQUENTIAL) {
      op.done = [obs = obs_, done = std::move(op.done)](zk::Result r) mutable {
        int n = obs->drop_create_replies.load();
        while (r.rc == ZOK && n > 0 && !obs->drop_create_replies.compare_exchange_weak(n, n - 1)) {
        }
        if (r.rc == ZOK && n > 0) r.rc = ZCONNECTIONLOSS;
        std::move(done)(std::move(r));
      };
    }
  }

  const std::shared_ptr<Observed> obs_;
  std::unique_ptr<zk::Client> client_;  // last: its callbacks use obs_
};

}  // namespace lockd

#endif  // LOCKD_TESTS_INTEGRATION_ZOOKEEPER_OBSERVED_TRANSPORT_H_
