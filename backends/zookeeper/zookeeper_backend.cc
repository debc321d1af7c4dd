// The ZooKeeper backend: a facade over its parts (see zookeeper_backend.h
// for the model):
//   zk_session.h         the session: connect, expiry, a new session
//   acquire_attempt.h    one Acquire: contender node, queue, watch, states
//   lease_tracker.h      holders this replica knows, leases, the reaper
//   contender_listing.h  shared reads of a lock's queue
//   node_deleter.h       deletes in flight and orphaned nodes
//   backends/common/waiter_registry.h  live Acquire calls: max_waiters,
//                        deadline, cancel, the drain (shared with WaitEngine)
//   holder_writes.h      Release, Renew, ForceRelease
//   renew_batch.h        RenewMany: known holds renewed in one multi
// This file wires them together and answers Describe and List (paged by
// backends/common/list_pages.h).

#include "backends/zookeeper/zookeeper_backend.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "backends/common/errors.h"
#include "backends/common/host_ports.h"
#include "backends/common/list_pages.h"
#include "backends/common/timer_queue.h"
#include "backends/common/waiter_registry.h"
#include "backends/zookeeper/acquire_attempt.h"
#include "backends/zookeeper/contender_listing.h"
#include "backends/zookeeper/holder_writes.h"
#include "backends/zookeeper/lease_tracker.h"
#include "backends/zookeeper/node_deleter.h"
#include "backends/zookeeper/renew_batch.h"
#include "backends/zookeeper/zk_client.h"
#include "backends/zookeeper/zk_codec.h"
#include "backends/zookeeper/zk_common.h"
#include "backends/zookeeper/zk_session.h"
#include "backends/zookeeper/zookeeper_backend_internal.h"

namespace lockd {
namespace {

using zk::Op;
using zk::Result;

class ZooKeeperBackend final : public Backend {
 public:
  ZooKeeperBackend(const ZooKeeperOptions& options, zk::TransportFactory make_transport);
  ~ZooKeeperBackend() override { Shutdown(); }

  absl::Status Start() {
    absl::Status s = session_->Start();
    if (s.ok()) leases_->StartReaper();
    return s;
  }

  absl::string_view name() const override { return "zookeeper"; }

  void Acquire(AcquireParams params, std::shared_ptr<CancelSignal> cancel,
               Callback<AcquireResult> done) override {
    if (absl::Status s = session_->Usable(); !s.ok()) {
      std::move(done)(s);
      return;
    }
    if (cancel != nullptr && cancel->cancelled()) {
      std::move(done)(absl::CancelledError("acquire cancelled"));
      return;
    }
    // Fast path: this replica knows the owner holds the lock; a versioned
    // write of the holder node is the whole reentrant acquire.
    std::optional<zk::LeaseTracker::Known> known = leases_->Lookup(params.key, params.owner);
    if (known.has_value() &&
        (known->expired || known->data.waiting ||
         (!params.request_id.empty() && known->data.last == zk::NodeData::Last::kAcquire &&
          known->data.last_id == params.request_id))) {
      known.reset();
    }
    auto a = std::make_shared<zk::AcquireAttempt>(&deps_, std::move(params), std::move(cancel),
                                                  std::move(done));
    a->Start(known);
  }

  void Release(ReleaseParams params, Callback<ReleaseResult> done) override {
    if (absl::Status s = session_->Usable(); !s.ok()) {
      std::move(done)(s);
      return;
    }
    writes_->Release(std::move(params), std::move(done));
  }

  void Renew(RenewParams params, Callback<RenewResult> done) override {
    if (absl::Status s = session_->Usable(); !s.ok()) {
      std::move(done)(s);
      return;
    }
    writes_->Renew(std::move(params), std::move(done));
  }

  void RenewMany(std::vector<RenewParams> params, RenewManyCallback done) override {
    if (absl::Status s = session_->Usable(); !s.ok()) {
      std::move(done)(std::vector<absl::StatusOr<RenewResult>>(params.size(), s));
      return;
    }
    batch_->RenewMany(std::move(params), std::move(done));
  }

  void ForceRelease(ForceReleaseParams params, Callback<ForceReleaseResult> done) override {
    if (absl::Status s = session_->Usable(); !s.ok()) {
      std::move(done)(s);
      return;
    }
    writes_->ForceRelease(std::move(params), std::move(done));
  }

  void Describe(LockKey key, Callback<LockState> done) override {
    if (absl::Status s = session_->Usable(); !s.ok()) {
      std::move(done)(s);
      return;
    }
    ReadState(key, std::move(done));
  }

  void List(ListParams params, Callback<ListResult> done) override;

  absl::Status Health() const override { return session_->Usable(); }

  void Shutdown() override;

 private:
  // Describe without the session check.
  void ReadState(const LockKey& key, Callback<LockState> done) {
    leases_->ReadLock(key, false,
                      [this, key, done = std::move(done)](absl::StatusOr<zk::LockView> v) mutable {
                        if (!v.ok()) {
                          std::move(done)(v.status());
                          return;
                        }
                        std::move(done)(leases_->StateOf(key, *v));
                      });
  }

  void OnSessionLost();
  void OnWatch(uint64_t id, int type, absl::string_view path);

  // Constant after construction.
  const ZooKeeperOptions options_;
  const zk::Paths paths_;
  std::atomic<bool> shut_down_{false};

  // Reset by Shutdown(), after every part that schedules timers stopped.
  std::unique_ptr<TimerQueue> timers_;
  std::unique_ptr<zk::NodeDeleter> deleter_;
  std::unique_ptr<zk::ContenderListing> listing_;
  std::unique_ptr<WaiterRegistry> waiters_;
  std::unique_ptr<zk::LeaseTracker> leases_;
  std::unique_ptr<zk::HolderWrites> writes_;
  std::unique_ptr<zk::RenewBatch> batch_;
  std::unique_ptr<zk::Session> session_;
  zk::AcquireAttempt::Deps deps_;
  // Last: its callbacks use everything above.
  std::unique_ptr<zk::Transport> zk_;
};

ZooKeeperBackend::ZooKeeperBackend(const ZooKeeperOptions& options,
                                   zk::TransportFactory make_transport)
    : options_(options), paths_(options.root), timers_(std::make_unique<TimerQueue>()) {
  zk_ = make_transport(
      [this](zk::SessionState s, uint64_t gen) { session_->OnState(s, gen); },
      [this](uint64_t id, int type, absl::string_view path) { OnWatch(id, type, path); });
  zk::Transport* zk = zk_.get();
  deleter_ = std::make_unique<zk::NodeDeleter>(zk);
  listing_ = std::make_unique<zk::ContenderListing>(zk);
  waiters_ = std::make_unique<WaiterRegistry>(timers_.get(), options.max_waiters);
  zk::LeaseTracker::Options lo;
  lo.observer_grace = options.observer_grace;
  lo.reap_interval = options.reap_interval;
  lo.reap_parallelism = options.reap_parallelism;
  leases_ = std::make_unique<zk::LeaseTracker>(
      lo, &paths_, zk, listing_.get(), deleter_.get(), timers_.get(),
      [this](const LockKey& key) { return waiters_->HasAdmitted(key); },
      [this] { return session_->serving(); });
  writes_ = std::make_unique<zk::HolderWrites>(&paths_, zk, leases_.get(), deleter_.get());
  batch_ = std::make_unique<zk::RenewBatch>(zk, leases_.get(), writes_.get());
  zk::Session::Listener listener;
  listener.on_serving = [this] { deleter_->DeleteOrphans(); };
  listener.on_lost = [this] { OnSessionLost(); };
  session_ = std::make_unique<zk::Session>(
      zk::Session::Options{options.hosts, options.root, options.connect_wait,
                           // Redis and MySQL replicas notice a silent backend
                           // in about 2 s; a short session timeout, sooner.
                           std::min(absl::Seconds(2), options.session_timeout / 3)},
      timers_.get(), std::move(listener));
  session_->Attach(zk);
  deps_.paths = &paths_;
  deps_.zk = zk;
  deps_.listing = listing_.get();
  deps_.leases = leases_.get();
  deps_.deleter = deleter_.get();
  deps_.waiters = waiters_.get();
}

void ZooKeeperBackend::Shutdown() {
  if (shut_down_.exchange(true)) return;
  session_->Stop();
  waiters_->Close();  // answers every live Acquire ShuttingDownError()
  // Contender nodes are persistent: the waiters' nodes, whose deletes were
  // just sent, should be gone before the session ends. A session's requests
  // are applied in order, so a sync answered means they were. Bounded: a
  // backend cut off leaves them to the other replicas (reaped as
  // unconfirmed grants when they reach the head).
  auto synced = std::make_shared<absl::Notification>();
  zk_->Submit(Op::Sync(paths_.root(), [synced](Result) { synced->Notify(); }));
  synced->WaitForNotificationWithTimeout(absl::Seconds(2));
  leases_->Stop();
  deleter_->Stop();
  // Ends the session and runs every callback still pending; they find
  // every part stopped. Holds acquired through this replica stay, to their
  // leases (reaped by the other replicas): their clients renew or release
  // them through another replica.
  zk_->Close();
  // Nothing schedules timers once every part is stopped, so the queue can
  // go; its thread is joined here.
  timers_.reset();
}

// The session ended. Contender nodes are persistent, so the locks held
// through it stay held (to their leases, still timed here); the waiters
// give up their places (Fail deletes their nodes once a session serves).
void ZooKeeperBackend::OnSessionLost() {
  for (const std::shared_ptr<WaiterRegistry::Call>& c : waiters_->All()) {
    // Every registered call is an AcquireAttempt.
    auto* a = static_cast<zk::AcquireAttempt*>(c.get());
    a->Fail(absl::UnavailableError(absl::StrCat(
        "the ZooKeeper session ended while waiting for lock ", LockName(a->key()), "; retry")));
  }
}

void ZooKeeperBackend::OnWatch(uint64_t id, int type, absl::string_view path) {
  if (std::shared_ptr<WaiterRegistry::Call> c = waiters_->Find(id); c != nullptr) {
    static_cast<zk::AcquireAttempt*>(c.get())->OnWatch(type, path);
  }
}

void ZooKeeperBackend::List(ListParams params, Callback<ListResult> done) {
  if (absl::Status s = session_->Usable(); !s.ok()) {
    std::move(done)(s);
    return;
  }
  std::string ns_path = paths_.Ns(params.ns);
  // A sync first: the names reflect every lock created anywhere before the
  // call (the lock reads below sync too).
  std::vector<zk::Op> ops;
  ops.push_back(zk::Op::Sync(ns_path, [](zk::Result) {}));
  ops.push_back(zk::Op::Children(std::move(ns_path), [this, params = std::move(params),
                                                      done =
                                                          std::move(done)](zk::Result r) mutable {
    if (r.rc == ZNONODE) {
      std::move(done)(ListResult{});
      return;
    }
    if (r.rc != ZOK) {
      std::move(done)(
          zk::ZkError(absl::StrCat("listing locks of namespace \"", params.ns, "\""), r.rc));
      return;
    }
    bool after_token = !params.page_token.empty() && params.page_token >= params.prefix;
    std::vector<std::string> names;
    for (const std::string& child : r.children) {
      std::string name;
      if (!zk::DecodeSegment(child, &name)) continue;
      if (!absl::StartsWith(name, params.prefix)) continue;
      if (after_token && name <= params.page_token) continue;
      names.push_back(std::move(name));
    }
    std::sort(names.begin(), names.end());
    // At least 8 reads a round, so that names of free locks cost few rounds;
    // at most 64 in flight.
    ListByDescribing(
        std::move(params.ns), std::move(names), params.page_size,
        [this](const LockKey& key, Callback<LockState> done) { ReadState(key, std::move(done)); },
        std::move(done), DescribeBatch{8, 64});
  }));
  zk_->Submit(std::move(ops));
}

// The connect string `hosts` ("host:port[,host:port...][/chroot]") with
// its syntax checked (host_ports.h) and its entries written out again, as the
// C client reads them. Whether the hosts resolve is not checked here: names
// may appear later (the session keeps trying).
absl::StatusOr<std::string> ConnectString(absl::string_view hosts) {
  size_t slash = hosts.find('/');
  absl::StatusOr<std::vector<HostPort>> entries =
      ParseHostPorts(hosts.substr(0, slash), "zookeeper.hosts");
  if (!entries.ok()) return entries.status();
  std::string out = absl::StrJoin(*entries, ",", [](std::string* o, const HostPort& e) {
    absl::StrAppend(o, FormatHostPort(e));
  });
  if (slash != absl::string_view::npos) absl::StrAppend(&out, hosts.substr(slash));
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> NewZooKeeperBackendOn(
    const ZooKeeperOptions& options, zk::TransportFactory make_transport) {
  if (absl::Status s = ZooKeeperOptionSet().Check(options); !s.ok()) return s;
  if (options.hosts.empty()) {
    return absl::InvalidArgumentError("zookeeper.hosts: must name at least one host:port");
  }
  if (absl::Status s = ConnectString(options.hosts).status(); !s.ok()) return s;
  if (options.root.size() < 2 || options.root[0] != '/' || options.root.back() == '/' ||
      absl::StrContains(options.root, "//")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "zookeeper.root: must be an absolute znode path like /lockd, got \"", options.root, "\""));
  }
  for (absl::string_view part : absl::StrSplit(options.root.substr(1), '/')) {
    if (part == "." || part == ".." || part == "zookeeper") {
      return absl::InvalidArgumentError(
          absl::StrCat("zookeeper.root: \"", options.root, "\" is not a usable znode path"));
    }
  }
  auto backend = std::make_unique<ZooKeeperBackend>(options, std::move(make_transport));
  if (absl::Status s = backend->Start(); !s.ok()) return s;
  return backend;
}

absl::StatusOr<std::unique_ptr<Backend>> NewZooKeeperBackend(const ZooKeeperOptions& options) {
  // The C client gets the entries without the whitespace a list may have.
  absl::StatusOr<std::string> hosts = ConnectString(options.hosts);
  return NewZooKeeperBackendOn(options, [options, hosts = hosts.value_or(options.hosts)](
                                            zk::StateFn on_state, zk::WatchFn on_watch) {
    zk::Client::Options zo;
    zo.hosts = hosts;
    zo.session_timeout = options.session_timeout;
    zo.digest = options.digest;
    return std::make_unique<zk::Client>(std::move(zo), std::move(on_state), std::move(on_watch));
  });
}

}  // namespace lockd
